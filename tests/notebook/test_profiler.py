"""``wb.profile()``: events, table, summary, Chrome trace and the timings payload."""

from __future__ import annotations

import json

import pytest
from payload_check import check_payload

import workbench as wb
from workbench._oprecord import HOOK
from workbench.profiler import current_profile


def _work():
    x = wb.ones(8, 8)
    y = (x @ x).exp()
    z = wb.cat([y, y], dim=0)
    return z.sum()


def test_records_ops_with_shapes_and_dtypes():
    with wb.profile() as p:
        _work()
    assert HOOK.active is None
    by_name = {e.name: e for e in p.events}
    assert {"matmul", "exp", "cat", "sum"} <= set(by_name)
    assert by_name["matmul"].shapes == ((8, 8), (8, 8))
    assert by_name["matmul"].dtypes == ("f32", "f32")
    assert by_name["cat"].shapes == ((8, 8), (8, 8))  # tensors inside a list
    assert all(e.device == "cpu" and e.device_ns is None for e in p.events)
    assert all(0 <= e.self_ns <= e.duration_ns for e in p.events)


def test_table_summary_and_sorting():
    with wb.profile() as p:
        _work()
        _work()
    table = p.table()
    for column in ("calls", "self", "total", "mean", "share"):
        assert column in table
    assert p.table(rows=1).count("\n") < table.count("\n")
    assert p.table(sort="name").index("cat") < p.table(sort="name").index("sum")
    with pytest.raises(ValueError, match="sort must be one of"):
        p.table(sort="bogus")
    summary = p.summary()
    assert summary["calls"] == len(p.events) and summary["device_ms"] is None
    assert summary["wall_ms"] >= summary["host_ms"] > 0
    stats = {s.name: s for s in p.stats()}
    assert stats["matmul"].calls == 2


def test_nested_profiles_restore_the_hook():
    with wb.profile() as outer:
        wb.ones(2).exp()
        with wb.profile() as inner:
            wb.ones(2).exp()
        assert current_profile() is outer
    assert HOOK.active is None and current_profile() is None
    assert len(inner.events) == 1 and len(outer.events) == 1


def test_chrome_trace(tmp_path):
    with wb.profile() as p:
        _work()
    path = p.export_chrome_trace(tmp_path / "trace.json")
    trace = json.loads(path.read_text())
    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(events) == len(p.events)
    assert all(e["ph"] == "X" and e["dur"] >= 0 and e["ts"] >= 0 for e in events)
    assert {"shapes", "dtypes"} <= set(events[0]["args"])


def test_timings_payload_matches_the_spec():
    with wb.profile() as p:
        _work()
    payload = p.timings_payload("cell-1", 3)
    check_payload(payload)
    assert payload["cell_id"] == "cell-1" and payload["execution_count"] == 3
    check_payload(wb.profile().timings_payload())  # empty profile
