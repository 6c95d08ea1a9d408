"""PerformanceMonitor: percentiles against numpy float64 on known samples, the sliding
window, timing of callables, and the notebook views."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

import workbench as wb
from workbench.errors import WorkbenchError
from workbench.serve.monitor import PerformanceMonitor, rss_bytes


def test_percentiles_match_numpy_over_the_window():
    rng = np.random.default_rng(0)
    samples = rng.lognormal(-3.0, 0.7, size=500)
    m = PerformanceMonitor(window=200)
    for v in samples:
        m.record_request(float(v))
    last = samples[-200:].astype(np.float64)
    for q, got in ((50, m.p50), (95, m.p95), (99, m.p99)):
        assert got == pytest.approx(np.percentile(last, q), rel=1e-12)
    assert m.p99 != pytest.approx(np.percentile(samples, 99), rel=1e-6)  # old ones dropped
    assert m.requests == 500
    s = m.stats()
    assert s["count"] == 200 and s["max"] == last.max() and s["mean"] == pytest.approx(last.mean())


def test_horizon_forgets_old_samples():
    m = PerformanceMonitor(horizon=10.0)
    now = time.monotonic()
    m.record("latency", 5.0, at=now - 60)
    m.record("latency", 1.0, at=now)
    assert m.values().tolist() == [1.0]


def test_track_times_ttft_and_tokens_per_second():
    m = PerformanceMonitor()
    with m.track() as t:
        time.sleep(0.02)
        t.first_token()
        time.sleep(0.02)
        t.tokens = 5
    lat, ttft, tps = m.values("latency")[0], m.values("ttft")[0], m.values("tokens_per_s")[0]
    assert 0.02 <= ttft < lat
    assert tps == pytest.approx(4 / (lat - ttft))


def test_monitor_around_any_callable():
    with wb.monitor() as m:
        for x in range(5):
            assert m(lambda v: v * 2, x) == 2 * x
        double = m.wrap(lambda v: v + v)
        assert double(4) == 8
    assert m.requests == 6 and m.values().size == 6 and m.values().min() >= 0
    assert "6 requests" in repr(m)


def test_empty_and_bad_input():
    m = PerformanceMonitor()
    assert math.isnan(m.p99) and m.stats()["count"] == 0
    assert repr(m) == "PerformanceMonitor(no requests yet)"
    with pytest.raises(WorkbenchError, match="unknown metric 'latncy'"):
        m.record("latncy", 1.0)
    with pytest.raises(WorkbenchError, match="0 <= q <= 100"):
        m.percentile(101)
    with pytest.raises(WorkbenchError, match="window"):
        PerformanceMonitor(window=0)


def test_sample_records_gauges_and_memory():
    m = PerformanceMonitor()
    m.sample(queue_depth=3, batch_size=2)
    assert m.values("queue_depth").tolist() == [3.0] and m.values("batch_size").tolist() == [2.0]
    big = np.ones(64 << 20, np.uint8)  # 64 MiB, touched
    assert rss_bytes() > big.nbytes
    assert set(m.summary()) == {"latency", "ttft", "tokens_per_s", "queue_depth", "batch_size",
                                "memory"}  # fmt: skip


def test_plot_and_live_widget():
    pytest.importorskip("matplotlib")
    widgets = pytest.importorskip("ipywidgets")
    m = PerformanceMonitor()
    for v in np.linspace(0.01, 0.1, 40):
        m.record_request(float(v))
    ax = m.plot()
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels[0].startswith("p50 55") and len(labels) == 3  # 55 ms is the median
    view = m.live(refresh=0.0)
    assert isinstance(view, widgets.VBox)
    png = view.children[0].value
    m.record_request(0.5)
    assert view.children[0].value != png and "41 requests" in view.children[1].value
