"""A crafted timings payload for the one UI test that needs one.

The UI tests drive the real kernel side (``%load_ext workbench``,
``%%wb_profile``, ``%wb_profile auto on``). Real timings on this machine are
CPU-only and vary from run to run, so the test of exact totals, bar widths and
the device filter displays this deterministic version-1 payload
(docs/timings-payload.md) instead, with ``cuda:0`` rows that cannot exist here:
``emit_timings()`` displays it as ``%%wb_profile`` does, as a display output of
MIME type ``application/vnd.workbench.timings+json`` for the running cell.
"""

from __future__ import annotations

import IPython
from IPython import get_ipython
from IPython.display import display

MIME_TYPE = "application/vnd.workbench.timings+json"
VERSION = 1

# (name, device, calls, total_ms, self_ms, device_ms): deterministic made-up ops.
DEFAULT_OPS = (
    ("matmul", "cuda:0", 12, 18.4, 17.9, 15.2),
    ("conv2d", "cuda:0", 4, 9.6, 9.1, 8.3),
    ("softmax_last_dim", "cuda:0", 12, 3.1, 3.1, 2.4),
    ("to_device", "cpu", 3, 6.2, 6.2, None),
    ("add", "cpu", 40, 2.2, 2.2, None),
    ("reshape", "cpu", 24, 0.35, 0.35, None),
)


def current_cell_id() -> str | None:
    """The notebook cell id of the running cell (JupyterLab sends it as ``cellId``)."""
    ip = get_ipython()
    parent = ip.get_parent() if ip is not None and hasattr(ip, "get_parent") else {}
    return (parent or {}).get("metadata", {}).get("cellId")


def current_execution_count() -> int:
    """The prompt number of the running cell.

    IPython >= 9 bumps ``execution_count`` before the cell runs (so during the
    cell it already holds the next number); IPython 8 bumps it afterwards.
    """
    count = get_ipython().execution_count
    return count - 1 if IPython.version_info[0] >= 9 else count


def make_payload(cell_id=None, execution_count=None, ops=DEFAULT_OPS, scale=1.0):
    """A version-1 payload for ``ops``; times are multiplied by ``scale``."""
    rows = []
    for name, device, calls, total, self_ms, device_ms in ops:
        rows.append(
            {
                "name": name,
                "device": device,
                "calls": calls,
                "total_ms": total * scale,
                "self_ms": self_ms * scale,
                "mean_ms": total * scale / calls,
                "device_ms": None if device_ms is None else device_ms * scale,
            }
        )
    host_ms = sum(row["self_ms"] for row in rows)
    device_times = [row["device_ms"] for row in rows if row["device_ms"] is not None]
    for row in rows:
        row["share"] = row["self_ms"] / host_ms if host_ms else 0.0
    rows.sort(key=lambda row: row["total_ms"], reverse=True)
    return {
        "version": VERSION,
        "cell_id": cell_id,
        "execution_count": execution_count,
        "wall_ms": host_ms * 1.25,
        "totals": {
            "calls": sum(row["calls"] for row in rows),
            "host_ms": host_ms,
            "device_ms": sum(device_times) if device_times else None,
        },
        "rows": rows,
    }


def emit_timings(ops=DEFAULT_OPS, scale=1.0):
    """Display the timings of the running cell, as ``%%wb_profile`` does."""
    payload = make_payload(current_cell_id(), current_execution_count(), ops, scale)
    text = f"<workbench timings: {len(payload['rows'])} ops, cell {payload['cell_id']}>"
    display({MIME_TYPE: payload, "text/plain": text}, raw=True)
    return payload
