"""``PerformanceMonitor``: p50 / p95 / p99 over a sliding window, for a server or any callable.

Each metric keeps its last ``window`` samples (and, with ``horizon``, only those of the last
``horizon`` seconds); a percentile is numpy's linear interpolation over them (``q`` in
[0, 100]). Metrics: ``latency`` and ``ttft`` (seconds per request, time to first token),
``tokens_per_s`` (per request: completion tokens / time after the first), ``queue_depth``,
``batch_size`` and ``memory`` (the process's resident bytes), the last three sampled.

::

    with wb.monitor(live=True) as m:      # a live latency histogram under the cell
        for x in inputs:
            m(fn, x)                      # or: with m.track(): fn(x)
    m.p99, m.summary()

The server records into one too (``server.monitor``) and exports it at ``GET /metrics``.
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ..errors import WorkbenchError

METRICS = ("latency", "ttft", "tokens_per_s", "queue_depth", "batch_size", "memory")
QUANTILES = (50.0, 95.0, 99.0)


def rss_bytes() -> int:
    """The process's resident set size in bytes (peak RSS where /proc is missing)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024  # macOS counts bytes


class Tracked:
    """One request being timed by :meth:`PerformanceMonitor.track`: call :meth:`first_token`
    when the first output appears and add to ``tokens`` as outputs come."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.first: float | None = None
        self.tokens = 0

    def first_token(self) -> None:
        if self.first is None:
            self.first = time.perf_counter()


class PerformanceMonitor:
    """Sliding-window statistics of request latency, time to first token, tokens/s, queue
    depth, batch size and memory (see the module docs)."""

    def __init__(self, window: int = 1024, horizon: float | None = None, live: bool = False):
        if window <= 0 or (horizon is not None and horizon <= 0):
            raise WorkbenchError(
                f"PerformanceMonitor: window and horizon must be positive, found window={window}, "
                f"horizon={horizon}"
            )
        self.window = window
        self.horizon = horizon
        self.requests = 0
        self._data = {name: deque(maxlen=window) for name in METRICS}  # (time, value)
        self._lock = threading.Lock()
        self._live = live
        self._widget: Any = None
        self._refresh = 0.5
        self._drawn = 0.0

    # -- recording ---------------------------------------------------------------------------
    def record(self, metric: str, value: float, at: float | None = None) -> None:
        if metric not in self._data:
            raise WorkbenchError(f"PerformanceMonitor: unknown metric {metric!r}; expected one "
                                 f"of {', '.join(METRICS)}")  # fmt: skip
        with self._lock:
            self._data[metric].append((time.monotonic() if at is None else at, float(value)))

    def record_request(self, latency: float, ttft: float | None = None, tokens: int = 0) -> None:
        """One finished request: total seconds, seconds to its first token, tokens produced."""
        now = time.monotonic()
        self.record("latency", latency, now)
        if ttft is not None:
            self.record("ttft", ttft, now)
            if tokens > 1 and latency > ttft:
                self.record("tokens_per_s", (tokens - 1) / (latency - ttft), now)
        with self._lock:
            self.requests += 1
        self._maybe_redraw()

    def sample(self, queue_depth: int | None = None, batch_size: int | None = None) -> None:
        """Record the gauges: queue depth and batch size when given, and the memory in use."""
        now = time.monotonic()
        if queue_depth is not None:
            self.record("queue_depth", queue_depth, now)
        if batch_size is not None:
            self.record("batch_size", batch_size, now)
        self.record("memory", rss_bytes(), now)

    @contextlib.contextmanager
    def track(self) -> Iterator[Tracked]:
        """Time the block as one request (``with m.track() as t: ...; t.first_token()``)."""
        t = Tracked()
        yield t
        end = time.perf_counter()
        ttft = None if t.first is None else t.first - t.start
        self.record_request(end - t.start, ttft, t.tokens)

    def __call__(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)``, timed as one request; returns what ``fn`` returns."""
        with self.track():
            return fn(*args, **kwargs)

    def wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` with every call timed."""

        def timed(*args: Any, **kwargs: Any) -> Any:
            return self(fn, *args, **kwargs)

        timed.__wrapped__ = fn  # type: ignore[attr-defined]
        return timed

    def reset(self) -> None:
        with self._lock:
            for d in self._data.values():
                d.clear()
            self.requests = 0

    # -- statistics --------------------------------------------------------------------------
    def values(self, metric: str = "latency") -> np.ndarray:
        """The samples now in the window, oldest first (f64)."""
        if metric not in self._data:
            raise WorkbenchError(f"PerformanceMonitor: unknown metric {metric!r}; expected one "
                                 f"of {', '.join(METRICS)}")  # fmt: skip
        with self._lock:
            items = list(self._data[metric])
        if self.horizon is not None:
            cutoff = time.monotonic() - self.horizon
            items = [it for it in items if it[0] >= cutoff]
        return np.array([v for _, v in items], dtype=np.float64)

    def percentile(self, q: float, metric: str = "latency") -> float:
        """The q-th percentile (0..100) of ``metric`` over the window; NaN when it is empty."""
        if not 0.0 <= q <= 100.0:
            raise WorkbenchError(
                f"PerformanceMonitor.percentile: expected 0 <= q <= 100, found {q}"
            )
        v = self.values(metric)
        return float(np.percentile(v, q)) if v.size else math.nan

    @property
    def p50(self) -> float:
        return self.percentile(50.0)

    @property
    def p95(self) -> float:
        return self.percentile(95.0)

    @property
    def p99(self) -> float:
        return self.percentile(99.0)

    def stats(self, metric: str = "latency") -> dict[str, float]:
        """``{count, mean, p50, p95, p99, max}`` of ``metric`` over the window."""
        v = self.values(metric)
        if not v.size:
            return {"count": 0, "mean": math.nan, "p50": math.nan, "p95": math.nan,
                    "p99": math.nan, "max": math.nan}  # fmt: skip
        p50, p95, p99 = np.percentile(v, QUANTILES)
        return {"count": int(v.size), "mean": float(v.mean()), "p50": float(p50),
                "p95": float(p95), "p99": float(p99), "max": float(v.max())}  # fmt: skip

    def summary(self) -> dict[str, dict[str, float]]:
        return {name: self.stats(name) for name in METRICS}

    # -- display -----------------------------------------------------------------------------
    def plot(self, metric: str = "latency", ax: Any = None) -> Any:
        """A histogram of ``metric`` with its p50 / p95 / p99 marked; returns the Axes."""
        if ax is None:
            from matplotlib.figure import Figure

            ax = Figure(figsize=(6, 3)).subplots()
        v = self.values(metric)
        scale, unit = (1e3, "ms") if metric in ("latency", "ttft") else (1.0, "")
        if v.size:
            ax.hist(v * scale, bins=min(50, max(5, v.size // 4)), color="#4c72b0", alpha=0.8)
            for q, style in zip(QUANTILES, ("-", "--", ":"), strict=True):
                x = float(np.percentile(v, q)) * scale
                ax.axvline(x, color="#c44e52", linestyle=style, label=f"p{q:g} {x:.3g} {unit}")
            ax.legend(loc="upper right", fontsize=8)
        ax.set_xlabel(f"{metric} ({unit})" if unit else metric)
        ax.set_ylabel("count")
        ax.set_title(f"{metric}: {v.size} samples")
        return ax

    def live(self, refresh: float = 0.5) -> Any:
        """An ipywidgets view (latency histogram and summary) redrawn at most every
        ``refresh`` seconds as requests are recorded, from any thread."""
        import ipywidgets as widgets

        self._refresh = refresh
        self._widget = widgets.VBox([widgets.Image(format="png"), widgets.HTML()])
        self._redraw()
        return self._widget

    def _maybe_redraw(self) -> None:
        if self._widget is not None and time.monotonic() - self._drawn >= self._refresh:
            self._redraw()

    def _redraw(self) -> None:
        self._drawn = time.monotonic()
        ax = self.plot()
        buf = io.BytesIO()
        ax.figure.tight_layout()
        ax.figure.savefig(buf, format="png", dpi=80)
        image, text = self._widget.children
        image.value = buf.getvalue()
        text.value = f"<code>{self!r}</code>"

    def __enter__(self) -> PerformanceMonitor:
        if self._live:
            from IPython.display import display

            display(self.live())
        return self

    def __exit__(self, *exc: object) -> None:
        if self._widget is not None:
            self._redraw()

    def __repr__(self) -> str:
        s = self.stats("latency")
        if not s["count"]:
            return "PerformanceMonitor(no requests yet)"
        line = (f"PerformanceMonitor({s['count']} requests: latency p50 {s['p50'] * 1e3:.3g} ms, "
                f"p95 {s['p95'] * 1e3:.3g} ms, p99 {s['p99'] * 1e3:.3g} ms")  # fmt: skip
        t = self.stats("ttft")
        if t["count"]:
            line += f"; ttft p99 {t['p99'] * 1e3:.3g} ms"
        return line + ")"


def monitor(window: int = 1024, horizon: float | None = None, live: bool = False):
    """A new :class:`PerformanceMonitor` (``with wb.monitor(live=True) as m: m(fn, x)``)."""
    return PerformanceMonitor(window, horizon, live)
