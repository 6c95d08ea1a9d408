"""``%%wb_profile``, auto mode over the comm, ``%wb_timeit``, ``%wb_devices``."""

from __future__ import annotations

import pytest
from conftest import run
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output
from payload_check import check_payload

from workbench.notebook.magics import TimeitResult
from workbench.notebook.timings import COMM_TARGET, MIME
from workbench.profiler import Profile

CELL = "%%wb_profile{args}\nimport workbench as wb\nx = wb.ones(8, 8)\ny = (x @ x).exp()\ny.sum()"


def _payloads(captured) -> list[dict]:
    return [o.data[MIME] for o in captured.outputs if MIME in o.data]


def test_wb_profile_emits_payload(shell, ext):
    with capture_output() as captured:
        result = run(shell, CELL.format(args=""), cell_id="cell-abc")
    (payload,) = _payloads(captured)
    check_payload(payload)
    assert payload["cell_id"] == "cell-abc"
    assert payload["execution_count"] == result.execution_count
    names = {row["name"] for row in payload["rows"]}
    assert {"matmul", "exp", "sum"} <= names
    # One output: the payload, with the text table as its plain-text fallback; nothing printed.
    (output,) = captured.outputs
    assert "calls" not in captured.stdout  # only the cell's Out[] value
    table = output.data["text/plain"]
    assert table.splitlines()[0].split() == ["op", "device", "calls", "self", "total", "mean",
                                             "device", "share"]  # fmt: skip
    assert "matmul" in table and "op calls" in table.splitlines()[-1]
    assert output.metadata == {MIME: {"rows": 20, "sort": {"key": "total_ms", "descending": True}}}
    assert result.result.item() == pytest.approx(64 * 2980.958, rel=1e-4)  # the cell's value


def test_wb_profile_options(shell, ext):
    with capture_output() as captured:
        result = run(shell, CELL.format(args=" -n 1 --sort calls -o"))
    assert isinstance(result.result, Profile)
    (output,) = captured.outputs
    table_rows = [line for line in output.data["text/plain"].splitlines() if line.split()[:1] in
                  (["matmul"], ["exp"], ["sum"], ["ones"])]  # fmt: skip
    assert len(table_rows) == 1
    # The inline view shows the same rows first; the payload keeps every op for the panel.
    assert output.metadata[MIME] == {"rows": 1, "sort": {"key": "calls", "descending": True}}
    assert len(output.data[MIME]["rows"]) == len(result.result.stats()) > 1
    with pytest.raises(UsageError):
        shell.run_cell_magic("wb_profile", "--sort nope", "1")
    with pytest.raises(UsageError):
        shell.run_line_magic("wb_profile", "maybe")


def test_wb_profile_escapes_errors(shell, ext):
    result = shell.run_cell("%%wb_profile\nraise ValueError('boom')")
    assert isinstance(result.error_in_exec, ValueError)
    from workbench._oprecord import HOOK

    assert HOOK.active is None  # the profiler was switched off despite the error


def test_auto_mode_over_comm(shell, ext):
    manager = ext.comm_manager_for_tests
    comm = manager.open(COMM_TARGET, {"type": "hello", "version": 2})
    assert comm.sent == [{"type": "ready", "version": 2, "auto": False}]
    comm.deliver({"type": "hello"})
    assert comm.sent[-1] == {"type": "ready", "version": 2, "auto": False}
    comm.sent.clear()

    run(shell, "%wb_profile auto on")
    assert comm.sent == [{"type": "state", "auto": True}]  # the badge follows
    assert manager.kernel_opened == []  # a frontend comm is open: none opened from here
    comm.sent.clear()
    with capture_output() as captured:
        result = run(shell, "import workbench as wb\nz = wb.ones(4).exp().sum()", cell_id="c1")
    assert captured.outputs == [] and captured.stdout == ""  # no outputs added
    (message,) = comm.sent
    assert message["type"] == "timings"
    check_payload(message["payload"])
    assert message["payload"]["cell_id"] == "c1"
    assert message["payload"]["execution_count"] == result.execution_count
    assert {r["name"] for r in message["payload"]["rows"]} >= {"exp", "sum"}

    run(shell, "z2 = z + 1", cell_id="c2")
    assert [m["payload"]["cell_id"] for m in comm.sent] == ["c1", "c2"]
    run(shell, "plain = sum(range(10))", cell_id="no-ops")
    assert len(comm.sent) == 2  # a cell without workbench ops sends no empty timings
    comm.close()
    run(shell, "z3 = z + 1", cell_id="c3")
    assert len(comm.sent) == 2  # a closed comm is forgotten
    third = manager.open(COMM_TARGET)
    with capture_output() as captured:
        run(shell, CELL.format(args=""), cell_id="c4")
    assert len(_payloads(captured)) == 1  # %%wb_profile still emits its output in auto mode
    waited, message = third.sent  # c3 waited for a comm; auto mode still sees c4's ops
    assert waited["payload"]["cell_id"] == "c3"
    assert message["payload"]["cell_id"] == "c4"
    assert "matmul" in {r["name"] for r in message["payload"]["rows"]}
    third.close()
    run(shell, "%wb_profile auto off")
    other = manager.open(COMM_TARGET)
    run(shell, "z4 = z + 1")
    assert other.sent == []
    run(shell, "%wb_profile auto on")
    run(shell, "%wb_profile auto off")
    assert other.sent == [{"type": "state", "auto": True}, {"type": "state", "auto": False}]
    other.close()
    from workbench._oprecord import HOOK

    assert HOOK.active is None


def test_wb_timeit(shell, ext):
    shell.user_ns["wb"] = __import__("workbench")
    with capture_output() as captured:
        result = shell.run_line_magic("wb_timeit", "-n 3 -r 2 -o wb.ones(4) + 1")
    assert isinstance(result, TimeitResult)
    assert result.loops == 3 and len(result.runs) == 2 and result.best > 0
    assert "per loop" in captured.stdout


def test_wb_devices(shell, ext):
    table = shell.run_line_magic("wb_devices", "")
    assert table.rows[0]["device"] == "cpu" and table.rows[0]["backend"] == "cpu"
    assert "active" in repr(table) and "<table" in table._repr_html_()


def test_wb_timeit_cell_and_usage(shell, ext):
    shell.user_ns["wb"] = __import__("workbench")
    with capture_output():
        result = shell.run_cell_magic("wb_timeit", "-n 2 -r 1 -o", "a = wb.ones(3)\nb = a * 2")
    assert result.loops == 2 and len(result.runs) == 1
    with pytest.raises(UsageError):
        shell.run_line_magic("wb_timeit", "-n 2")


def test_auto_on_opens_a_comm_and_buffers_until_one_is_open(shell, ext):
    """Under Run All the frontend's own open waits behind the queued cells: ``auto on`` opens
    a comm from the kernel, and payloads made while no comm is open go out, in order, on the
    next one."""
    manager = ext.comm_manager_for_tests
    run(shell, "import workbench as wb\n%wb_profile auto on")
    ((target, data, opened),) = manager.kernel_opened
    assert target == COMM_TARGET and data == {"type": "ready", "version": 2, "auto": True}
    run(shell, "a = wb.ones(3).exp()", cell_id="r1")
    assert [m["payload"]["cell_id"] for m in opened.sent if m["type"] == "timings"] == ["r1"]
    opened.close()  # e.g. a frontend without the extension
    for i in range(2, 5):
        run(shell, f"a{i} = wb.ones(3).exp()", cell_id=f"r{i}")
    late = manager.open(COMM_TARGET, {"type": "hello", "version": 2})
    assert late.sent[0] == {"type": "ready", "version": 2, "auto": True}
    assert [m["payload"]["cell_id"] for m in late.sent[1:]] == ["r2", "r3", "r4"]
    run(shell, "a5 = wb.ones(3).exp()", cell_id="r5")
    assert late.sent[-1]["payload"]["cell_id"] == "r5" and len(late.sent) == 5
    late.close()
    run(shell, "%wb_profile auto off")
