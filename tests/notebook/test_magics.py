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
    assert "matmul" in captured.stdout and "calls" in captured.stdout  # the table
    assert result.result.item() == pytest.approx(64 * 2980.958, rel=1e-4)  # the cell's value


def test_wb_profile_options(shell, ext):
    with capture_output() as captured:
        result = run(shell, CELL.format(args=" -n 1 --sort calls -o"))
    assert isinstance(result.result, Profile)
    table_rows = [line for line in captured.stdout.splitlines() if line.split()[:1] in
                  (["matmul"], ["exp"], ["sum"], ["ones"])]  # fmt: skip
    assert len(table_rows) == 1
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
    comm = manager.open(COMM_TARGET, {"type": "hello", "version": 1})
    assert comm.sent == [{"type": "ready", "version": 1}]
    comm.deliver({"type": "hello"})
    assert comm.sent[-1] == {"type": "ready", "version": 1}
    comm.sent.clear()

    run(shell, "%wb_profile auto on")
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
    run(shell, "z3 = z + 1")
    assert len(comm.sent) == 2  # a closed comm is forgotten
    third = manager.open(COMM_TARGET)
    with capture_output() as captured:
        run(shell, CELL.format(args=""), cell_id="c4")
    assert len(_payloads(captured)) == 1  # %%wb_profile still emits its output in auto mode
    (message,) = third.sent  # and auto mode still sees the cell's ops
    assert message["payload"]["cell_id"] == "c4"
    assert "matmul" in {r["name"] for r in message["payload"]["rows"]}
    third.close()
    run(shell, "%wb_profile auto off")
    other = manager.open(COMM_TARGET)
    run(shell, "z4 = z + 1")
    assert other.sent == []
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
