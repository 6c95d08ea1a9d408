"""Checks a timings payload against docs/timings-payload.md (version 1), field by field."""

from __future__ import annotations

import json


def check_payload(payload: dict) -> None:
    json.dumps(payload)  # plain JSON
    assert set(payload) == {"version", "cell_id", "execution_count", "wall_ms", "totals", "rows"}
    assert payload["version"] == 1
    assert payload["cell_id"] is None or isinstance(payload["cell_id"], str)
    assert payload["execution_count"] is None or isinstance(payload["execution_count"], int)
    assert isinstance(payload["wall_ms"], float)
    totals = payload["totals"]
    assert set(totals) == {"calls", "host_ms", "device_ms"}
    assert isinstance(totals["calls"], int) and isinstance(totals["host_ms"], float)
    assert totals["device_ms"] is None or isinstance(totals["device_ms"], float)
    keys = {"name", "device", "calls", "total_ms", "self_ms", "mean_ms", "device_ms", "share"}
    for row in payload["rows"]:
        assert set(row) == keys
        assert isinstance(row["calls"], int) and row["calls"] > 0
        for key in ("total_ms", "self_ms", "mean_ms", "share"):
            assert isinstance(row[key], float), key
        assert row["share"] == (row["self_ms"] / totals["host_ms"] if totals["host_ms"] else 0.0)
    totals_ms = [row["total_ms"] for row in payload["rows"]]
    assert totals_ms == sorted(totals_ms, reverse=True)
    assert sum(row["calls"] for row in payload["rows"]) == totals["calls"]
