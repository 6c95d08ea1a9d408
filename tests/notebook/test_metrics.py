"""``LiveMetrics``: the curves it draws (against coordinates computed with numpy), the redraw
throttle, long runs and non-finite values."""

from __future__ import annotations

import re

import numpy as np
import pytest

from workbench.notebook import LiveMetrics


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _polyline(html: str, name: str) -> np.ndarray:
    chart = html.split(f'data-metric="{name}"')[1]
    points = re.search(r'points="([^"]*)"', chart).group(1)
    return np.array([[float(v) for v in p.split(",")] for p in points.split()])


def test_curve_coordinates():
    metrics = LiveMetrics(width=108, height=58, every=0.0)
    steps = np.array([0, 1, 2, 5, 10], float)
    loss = np.array([2.0, 1.5, 0.5, 1.0, 0.25])
    for s, v in zip(steps, loss, strict=True):
        metrics.log(s, loss=v, lr=0.1)
    got = _polyline(metrics.html(), "loss")
    # 4 px padding: x from 4 to 104 over steps 0..10; y from 54 (min loss) up to 4 (max loss).
    expected_x = np.interp(steps, [0, 10], [4, 104])
    expected_y = np.interp(loss, [0.25, 2.0], [54, 4])
    np.testing.assert_allclose(got, np.stack([expected_x, expected_y], 1), atol=0.051)
    flat = _polyline(metrics.html(), "lr")  # a constant sits in the middle
    np.testing.assert_allclose(flat[:, 1], 29.0)
    assert "loss 0.25" in metrics.html() and "(step 10)" in metrics.html()
    assert repr(metrics) == "LiveMetrics(5 steps: loss=0.25, lr=0.1)"


def test_log_every_step_redraws_only_every_interval():
    clock = Clock()
    metrics = LiveMetrics(every=1.0, clock=clock)
    for step in range(500):
        clock.now = step * 0.01  # 100 steps a second
        metrics.log(loss=1.0 / (step + 1))
    assert metrics.draws == 5  # at t = 0, 1, 2, 3, 4 s
    assert len(metrics.values["loss"]) == 500
    before = metrics.widget.value
    metrics.done()
    assert metrics.draws == 6 and metrics.widget.value != before  # the last steps drawn
    assert "(step 499)" in metrics.widget.value


def test_long_runs_are_thinned_keeping_the_ends():
    metrics = LiveMetrics(max_points=50, every=1e9)
    for step in range(1000):
        metrics.log(step, loss=float(step))
    points = metrics.points("loss")
    assert len(points) == 51  # every 20th, plus the last
    assert points[0][0] == pytest.approx(4.0) and points[-1][0] == pytest.approx(256.0)
    assert points[-1][1] == pytest.approx(4.0)  # the largest value at the top


def test_non_finite_values_are_counted_not_drawn():
    metrics = LiveMetrics(every=0.0)
    metrics.log(loss=float("nan"))
    assert metrics.points("loss") == [] and "1 non-finite" in metrics.html()
    metrics.log(loss=1.0)
    metrics.log(loss=float("inf"))
    metrics.log(loss=0.5)
    assert len(metrics.points("loss")) == 2 and "2 non-finite" in metrics.html()
    assert "application/vnd.jupyter.widget-view+json" in metrics._repr_mimebundle_()
