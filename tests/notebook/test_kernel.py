"""End to end in a real kernel: ``%load_ext workbench``, then a ``%%wb_profile`` cell sent with
cell-id metadata, as JupyterLab sends it; the display output carries the payload and that id."""

from __future__ import annotations

import queue
import time

import pytest
from payload_check import check_payload

from workbench.notebook.timings import MIME

jupyter_client = pytest.importorskip("jupyter_client")

TIMEOUT = 60


def _execute(kc, code: str, cell_id: str | None = None) -> tuple[dict, list[dict]]:
    """Send an execute_request (with ``metadata.cellId``); the reply and the iopub messages."""
    content = {"code": code, "silent": False, "store_history": True, "user_expressions": {},
               "allow_stdin": False, "stop_on_error": True}  # fmt: skip
    msg = kc.session.msg(
        "execute_request", content, metadata={"cellId": cell_id} if cell_id else {}
    )
    kc.shell_channel.send(msg)
    msg_id = msg["header"]["msg_id"]
    messages = []
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        try:
            message = kc.get_iopub_msg(timeout=1)
        except queue.Empty:
            continue
        if message["parent_header"].get("msg_id") != msg_id:
            continue
        messages.append(message)
        if message["msg_type"] == "status" and message["content"]["execution_state"] == "idle":
            break
    else:
        raise TimeoutError(f"no idle status for {code!r}")
    while True:  # skip replies to earlier requests (kernel_info from wait_for_ready)
        reply = kc.get_shell_msg(timeout=TIMEOUT)
        if reply["parent_header"].get("msg_id") == msg_id:
            return reply, messages


@pytest.fixture(scope="module")
def kernel():
    km = jupyter_client.KernelManager(kernel_name="python3")
    km.start_kernel()
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=TIMEOUT)
        yield kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_wb_profile_payload_in_a_real_kernel(kernel):
    reply, _ = _execute(kernel, "%load_ext workbench")
    assert reply["content"]["status"] == "ok", reply["content"]
    code = "%%wb_profile\nimport workbench as wb\nx = wb.ones(16, 16)\n(x @ x).relu().sum()"
    reply, messages = _execute(kernel, code, cell_id="integration-cell-1")
    assert reply["content"]["status"] == "ok", reply["content"]
    payloads = [m["content"]["data"][MIME] for m in messages
                if m["msg_type"] == "display_data" and MIME in m["content"]["data"]]  # fmt: skip
    assert len(payloads) == 1
    payload = payloads[0]
    check_payload(payload)
    assert payload["cell_id"] == "integration-cell-1"
    assert payload["execution_count"] == reply["content"]["execution_count"]
    assert {"matmul", "relu", "sum"} <= {row["name"] for row in payload["rows"]}
    # One output: the text table is the plain-text fallback of the payload, nothing printed.
    (display,) = [m for m in messages if m["msg_type"] == "display_data"]
    assert "matmul" in display["content"]["data"]["text/plain"]
    assert display["content"]["metadata"][MIME]["rows"] == 20
    assert not [m for m in messages if m["msg_type"] == "stream"]


def test_tensor_html_in_a_real_kernel(kernel):
    _execute(kernel, "%load_ext workbench")
    reply, messages = _execute(kernel, "import workbench as wb\nwb.ones(2, 3)")
    assert reply["content"]["status"] == "ok"
    (result,) = [m for m in messages if m["msg_type"] == "execute_result"]
    assert "Tensor[2, 3]" in result["content"]["data"]["text/html"]


def test_auto_mode_comm_in_a_real_kernel(kernel):
    """The frontend opens ``workbench.timings``; the kernel answers ready, then one timings
    message per cell once ``%wb_profile auto on``."""
    _execute(kernel, "%load_ext workbench")
    comm_id = "test-comm-1"
    msg = kernel.session.msg("comm_open", {"comm_id": comm_id, "target_name": "workbench.timings",
                                           "data": {"type": "hello", "version": 1}})  # fmt: skip
    kernel.shell_channel.send(msg)
    _, messages = _execute(kernel, "%wb_profile auto on")
    states = [m["content"]["data"] for m in messages if m["msg_type"] == "comm_msg"]
    assert states == [{"type": "state", "auto": True}]
    reply, messages = _execute(kernel, "y = wb.ones(4).exp().sum()", cell_id="auto-cell")
    assert reply["content"]["status"] == "ok"
    assert not [m for m in messages if m["msg_type"] in ("display_data", "execute_result")]
    comm_messages = [m["content"]["data"] for m in messages if m["msg_type"] == "comm_msg"
                     and m["content"]["comm_id"] == comm_id]  # fmt: skip
    (message,) = comm_messages
    assert message["type"] == "timings"
    check_payload(message["payload"])
    assert message["payload"]["cell_id"] == "auto-cell"
    assert message["payload"]["execution_count"] == reply["content"]["execution_count"]
    _execute(kernel, "%wb_profile auto off")


def test_auto_on_opens_the_comm_from_the_kernel(kernel):
    """With no frontend comm (Run All: its open waits behind the queued cells), ``auto on``
    opens one on iopub, and the next cell's timings arrive on it."""
    _execute(kernel, "%reload_ext workbench")  # closes the comms the kernel had
    _, messages = _execute(kernel, "import workbench as wb\n%wb_profile auto on")
    (opened,) = [m["content"] for m in messages if m["msg_type"] == "comm_open"]
    assert opened["target_name"] == "workbench.timings"
    assert opened["data"] == {"type": "ready", "version": 2, "auto": True}
    _, messages = _execute(kernel, "w = wb.ones(4).exp()", cell_id="run-all-cell")
    (message,) = [m["content"] for m in messages if m["msg_type"] == "comm_msg"]
    assert message["comm_id"] == opened["comm_id"]
    assert message["data"]["payload"]["cell_id"] == "run-all-cell"
    _execute(kernel, "%wb_profile auto off")
