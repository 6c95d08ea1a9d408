"""Per-op timing: ``with wb.profile() as p: ...`` then ``p.table()``.

Every public op goes through ``workbench._oprecord.HOOK``; while a ``Profile`` is active it
records each call of its own thread / asyncio task (with ``all_threads=True``, also of every
thread that has no profile of its own): name, device, input shapes and dtypes, thread, host
wall time, self time (minus the ops it called), nesting depth, and device time where the
backend can measure it (its ``device_timer()``; CUDA events, Metal GPU times). The same
records feed ``table()``, ``summary()``, the Chrome/Perfetto trace (one track per thread) and
the JupyterLab timings payload (docs/timings-payload.md).

Cost: off, one attribute check per op (``HOOK.active is None``). On, each op also reads a
``ContextVar`` and the thread's id, scans its
arguments for tensors, reads their shapes and dtypes, calls ``perf_counter_ns`` twice and appends
one ``Event`` tuple. Measured on the 2-core dev machine (under load, best of 5 x 20000 calls on
4-element tensors): ``x + y`` 9-22 µs off vs 36-47 µs on, ``x.exp()`` 11-18 µs vs 32-46 µs, i.e.
roughly 15-35 µs added per op: it doubles or triples the cost of a tiny op and vanishes
beside ops that take a millisecond. notebooks/04_profiling_and_widgets.ipynb re-measures it.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from ._oprecord import CURRENT, ROUTER

PAYLOAD_VERSION = 1


class Event(NamedTuple):
    """One op call. Times in nanoseconds; ``device_ns`` is None when not measurable.

    A named tuple rather than a dataclass: it is built once per op while profiling, and a tuple
    of ints and strings costs less to build and nothing to the garbage collector."""

    name: str
    device: str
    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[str, ...]
    start_ns: int
    duration_ns: int
    self_ns: int
    depth: int
    device_ns: int | None
    thread: int = 0  # ``threading.get_ident()`` of the calling thread


@dataclass(frozen=True)
class OpStats:
    """Aggregated calls of one op on one device."""

    name: str
    device: str
    calls: int
    total_ns: int
    self_ns: int
    device_ns: int | None

    @property
    def mean_ns(self) -> float:
        return self.total_ns / self.calls


def _tensors(args: tuple, kwargs: dict) -> list:
    """The tensors among an op's arguments, one level into lists and tuples (``cat``)."""
    found = []
    for value in (*args, *kwargs.values()) if kwargs else args:
        if hasattr(value, "_layout"):
            found.append(value)
        elif type(value) is list or type(value) is tuple:
            found.extend(v for v in value if hasattr(v, "_layout"))
    return found


class Profile:
    """Records every op of the thread / asyncio task that enters it (a context manager;
    re-entrant across nesting, the innermost profile of a context gets the ops).

    ``all_threads=True`` also records the ops of every other thread that has no profile of its
    own; ``Event.thread`` tells them apart and the Chrome trace gives each thread a track."""

    def __init__(self, device_times: bool = True, all_threads: bool = False):
        self.events: list[Event] = []
        self.device_times = device_times
        self.all_threads = all_threads
        self.threads: dict[int, str] = {}  # thread id -> name, of the threads seen
        self._stacks: dict[int, list[int]] = {}  # per thread: children's time of open calls
        self._entries: list[tuple] = []
        self.wall_ns = 0

    def __enter__(self) -> Profile:
        ROUTER.start(self, self.all_threads)
        self._entries.append((CURRENT.set(self), time.perf_counter_ns()))
        return self

    def __exit__(self, *exc: object) -> None:
        token, entered_ns = self._entries.pop()
        self.wall_ns += time.perf_counter_ns() - entered_ns
        try:
            CURRENT.reset(token)
        except ValueError:  # exited from another context (a notebook hook): restore by value
            CURRENT.set(token.old_value if token.old_value is not token.MISSING else None)
        ROUTER.stop(self, self.all_threads)

    def __repr__(self) -> str:
        return f"<Profile: {len(self.events)} op calls, {_ms(self.wall_ns)} wall>"

    # -- recording (called by the op hook) ----------------------------------------------
    def run(self, name: str, fn, args: tuple, kwargs: dict):
        tensors = _tensors(args, kwargs)
        device = tensors[0].device if tensors else None
        timer = None
        if self.device_times and device is not None and not device.is_cpu:
            make_timer = getattr(device.backend, "device_timer", None)
            timer = make_timer(device.index) if make_timer is not None else None
        thread = threading.get_ident()
        stack = self._stacks.get(thread)
        if stack is None:
            stack = self._stacks[thread] = []
            self.threads[thread] = threading.current_thread().name
        depth = len(stack)
        stack.append(0)
        if timer is not None:
            timer.start()
        start = time.perf_counter_ns()
        try:
            return fn(*args, **kwargs)
        finally:
            duration = time.perf_counter_ns() - start
            device_ns = timer.stop_ns() if timer is not None else None
            children = stack.pop()
            if stack:
                stack[-1] += duration
            self.events.append(
                Event(
                    name,
                    str(device) if device is not None else "cpu",
                    tuple([t._layout.shape for t in tensors]),
                    tuple([t.dtype.name for t in tensors]),
                    start,
                    duration,
                    duration - children,
                    depth,
                    device_ns,
                    thread,
                )
            )

    # -- views of the records -----------------------------------------------------------
    def stats(self) -> list[OpStats]:
        """Per (op, device): calls, total (inclusive), self and device time; by total, desc."""
        groups: dict[tuple[str, str], list[Event]] = {}
        for event in self.events:
            groups.setdefault((event.name, event.device), []).append(event)
        rows = []
        for (name, device), events in groups.items():
            device_times = [e.device_ns for e in events if e.device_ns is not None]
            rows.append(
                OpStats(
                    name,
                    device,
                    len(events),
                    sum(e.duration_ns for e in events),
                    sum(e.self_ns for e in events),
                    sum(device_times) if device_times else None,
                )
            )
        rows.sort(key=lambda r: r.total_ns, reverse=True)
        return rows

    @property
    def total_self_ns(self) -> int:
        return sum(e.self_ns for e in self.events)

    def table(self, rows: int | None = 20, sort: str = "total") -> str:
        """A text table like PyTorch's profiler: calls, self, total, mean, share of self time."""
        keys = {
            "total": lambda r: r.total_ns, "self": lambda r: r.self_ns,
            "calls": lambda r: r.calls, "mean": lambda r: r.mean_ns,
            "device": lambda r: r.device_ns or 0, "name": lambda r: r.name,
        }  # fmt: skip
        if sort not in keys:
            raise ValueError(f"sort must be one of {sorted(keys)}, found {sort!r}")
        stats = sorted(self.stats(), key=keys[sort], reverse=sort != "name")
        stats = stats if rows is None else stats[:rows]
        total_self = self.total_self_ns or 1
        header = (
            f"{'op':<28}{'device':<8}{'calls':>7}{'self':>11}{'total':>11}{'mean':>11}"
            f"{'device':>11}{'share':>8}"
        )
        lines = [header, "-" * len(header)]
        for r in stats:
            device_time = _ms(r.device_ns) if r.device_ns is not None else "-"
            lines.append(
                f"{r.name:<28}{r.device:<8}{r.calls:>7}{_ms(r.self_ns):>11}{_ms(r.total_ns):>11}"
                f"{_ms(r.mean_ns):>11}{device_time:>11}{r.self_ns / total_self:>8.1%}"
            )
        lines.append("-" * len(header))
        lines.append(f"{len(self.events)} op calls, {_ms(self.total_self_ns)} in ops, "
                     f"{_ms(self.wall_ns)} wall")  # fmt: skip
        return "\n".join(lines)

    def summary(self) -> dict:
        """Totals as plain numbers (milliseconds)."""
        device = [e.device_ns for e in self.events if e.device_ns is not None and e.depth == 0]
        return {
            "calls": len(self.events),
            "host_ms": self.total_self_ns / 1e6,
            "device_ms": sum(device) / 1e6 if device else None,
            "wall_ms": self.wall_ns / 1e6,
        }

    def export_chrome_trace(self, path: str | Path) -> Path:
        """Write the events in the Chrome trace format (opens in Perfetto / chrome://tracing):
        one track per thread, named after it."""
        origin = min((e.start_ns for e in self.events), default=0)
        threads = dict.fromkeys(e.thread for e in self.events)  # in order of first appearance
        tracks = {thread: i for i, thread in enumerate(threads)}
        names = [
            {"name": "thread_name", "ph": "M", "pid": 0, "tid": tid,
             "args": {"name": self.threads.get(thread, f"thread {thread}")}}
            for thread, tid in tracks.items()
        ]  # fmt: skip
        trace = [
            {
                "name": e.name, "ph": "X", "pid": 0, "tid": tracks[e.thread],
                "ts": (e.start_ns - origin) / 1e3, "dur": e.duration_ns / 1e3, "cat": "op",
                "args": {"device": e.device, "shapes": [list(s) for s in e.shapes],
                         "dtypes": list(e.dtypes),
                         **({"device_us": e.device_ns / 1e3} if e.device_ns is not None else {})},
            }
            for e in self.events
        ]  # fmt: skip
        import json  # (only here: ``import workbench`` does not need it)

        path = Path(path)
        path.write_text(json.dumps({"traceEvents": names + trace, "displayTimeUnit": "ms"}))
        return path

    def timings_payload(
        self, cell_id: str | None = None, execution_count: int | None = None
    ) -> dict:
        """The JupyterLab timings payload (docs/timings-payload.md), version 1."""
        summary = self.summary()
        host = summary["host_ms"] or 0.0
        rows = [
            {
                "name": r.name,
                "device": r.device,
                "calls": r.calls,
                "total_ms": r.total_ns / 1e6,
                "self_ms": r.self_ns / 1e6,
                "mean_ms": r.mean_ns / 1e6,
                "device_ms": None if r.device_ns is None else r.device_ns / 1e6,
                "share": (r.self_ns / 1e6) / host if host else 0.0,
            }
            for r in self.stats()
        ]
        return {
            "version": PAYLOAD_VERSION,
            "cell_id": cell_id,
            "execution_count": execution_count,
            "wall_ms": summary["wall_ms"],
            "totals": {
                "calls": summary["calls"],
                "host_ms": host,
                "device_ms": summary["device_ms"],
            },
            "rows": rows,
        }


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.3f}ms"


def profile(device_times: bool = True, all_threads: bool = False) -> Profile:
    """``with wb.profile() as p: ...``; then ``print(p.table())``. ``all_threads=True`` also
    records the threads that have no profile of their own."""
    return Profile(device_times=device_times, all_threads=all_threads)


def current_profile() -> Profile | None:
    """The profile recording this thread's / asyncio task's ops, if any (not counting one
    that records all threads from elsewhere)."""
    return CURRENT.get()
