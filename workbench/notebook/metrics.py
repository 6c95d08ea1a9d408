"""Live training curves: ``LiveMetrics`` draws one small chart per metric (loss, accuracy,
learning rate, ...) that updates in place while a loop runs::

    from tqdm.auto import trange
    from workbench.notebook import LiveMetrics

    metrics = LiveMetrics()
    metrics                                     # show it (a cell's last expression), or display()
    for step in trange(steps):                  # tqdm.auto: a widget in JupyterLab, text elsewhere
        loss = ...
        metrics.log(loss=loss.item(), lr=schedule.lr)   # every step: O(1) unless it redraws
    metrics.done()                              # the final picture

``log`` appends to lists and redraws at most every ``every`` seconds, so calling it on every
step costs microseconds. Charts are inline SVG in one ``ipywidgets.HTML`` (no matplotlib, no
image encoding); with more points than ``max_points`` a chart shows every k-th one (the last
always included). Non-finite values are left out of the curve and counted in its title.
"""

from __future__ import annotations

import html
import math
import time
from collections.abc import Callable

__all__ = ["LiveMetrics"]


class LiveMetrics:
    """Curves of named training metrics by step (see the module docstring).

    ``every``: seconds between redraws; ``width``/``height``: pixels of one chart;
    ``max_points``: points drawn per curve; ``clock``: the time source (tests).
    """

    def __init__(self, every: float = 0.25, width: int = 260, height: int = 120,
                 max_points: int = 400, clock: Callable[[], float] = time.monotonic):  # fmt: skip
        self.every, self.width, self.height = every, width, height
        self.max_points = max(2, max_points)
        self._clock = clock
        self.steps: dict[str, list[float]] = {}
        self.values: dict[str, list[float]] = {}
        self._bad: dict[str, int] = {}
        self._count = 0
        self._drawn_at: float | None = None
        self.draws = 0
        try:
            import ipywidgets
        except ImportError:  # a terminal without widgets: the data is kept, repr is static
            self.widget = None
        else:
            self.widget = ipywidgets.HTML(value=self.html())

    # -- recording ------------------------------------------------------------------------------
    def log(self, step: float | None = None, **values: float) -> None:
        """Record ``values`` (name=number) at ``step`` (default: the number of ``log`` calls so
        far); redraw if ``every`` seconds have passed since the last drawing."""
        step = self._count if step is None else float(step)
        self._count += 1
        for name, value in values.items():
            value = float(value)
            if not math.isfinite(value):
                self._bad[name] = self._bad.get(name, 0) + 1
                self.steps.setdefault(name, [])
                self.values.setdefault(name, [])
                continue
            self.steps.setdefault(name, []).append(step)
            self.values.setdefault(name, []).append(value)
        now = self._clock()
        if self._drawn_at is None or now - self._drawn_at >= self.every:
            self._drawn_at = now
            self.draw()

    def done(self) -> None:
        """Draw the final state (whatever the throttle says)."""
        self.draw()

    def draw(self) -> None:
        self.draws += 1
        if self.widget is not None:
            self.widget.value = self.html()

    # -- rendering ------------------------------------------------------------------------------
    def html(self) -> str:
        """Every chart side by side, as HTML with inline SVG."""
        if not self.values:
            return "<div><i>no metrics logged yet</i></div>"
        charts = "".join(self._chart(name) for name in self.values)
        return f'<div style="display:flex;flex-wrap:wrap;gap:8px">{charts}</div>'

    def points(self, name: str) -> list[tuple[float, float]]:
        """The (x, y) pixel coordinates of ``name``'s curve: steps map onto the chart's width,
        values onto its height (the smallest at the bottom), every k-th point of a long one."""
        steps, values = self.steps[name], self.values[name]
        n = len(values)
        if n == 0:
            return []
        stride = math.ceil(n / self.max_points)
        keep = list(range(0, n, stride))
        if keep[-1] != n - 1:
            keep.append(n - 1)
        x0, x1 = steps[0], steps[-1]
        y0, y1 = min(values), max(values)
        pad = 4.0
        w, h = self.width - 2 * pad, self.height - 2 * pad
        out = []
        for i in keep:
            fx = (steps[i] - x0) / (x1 - x0) if x1 > x0 else 0.5
            fy = (values[i] - y0) / (y1 - y0) if y1 > y0 else 0.5
            out.append((pad + fx * w, pad + (1.0 - fy) * h))
        return out

    def _chart(self, name: str) -> str:
        values = self.values[name]
        title = html.escape(name)
        if values:
            title += f" {_number(values[-1])} <small>(step {_number(self.steps[name][-1])})</small>"
        if self._bad.get(name):
            title += f' <b style="color:#c00">{self._bad[name]} non-finite</b>'
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in self.points(name))
        low, high = (min(values), max(values)) if values else (0.0, 0.0)
        svg = (
            f'<svg width="{self.width}" height="{self.height}" '
            f'viewBox="0 0 {self.width} {self.height}" style="background:rgba(128,128,128,.08)">'
            f'<polyline fill="none" stroke="#1f77b4" stroke-width="1.5" points="{path}"/>'
            f'<text x="4" y="12" font-size="10" fill="#777">{_number(high)}</text>'
            f'<text x="4" y="{self.height - 4}" font-size="10" fill="#777">{_number(low)}</text>'
            "</svg>"
        )
        label = f'<div style="font-size:12px">{title}</div>'
        return f'<div class="wb-metric" data-metric="{html.escape(name)}">{label}{svg}</div>'

    def _repr_mimebundle_(self, **kwargs):
        if self.widget is not None:
            return self.widget._repr_mimebundle_(**kwargs)
        return {"text/html": self.html(), "text/plain": repr(self)}

    def __repr__(self) -> str:
        last = ", ".join(f"{k}={_number(v[-1])}" for k, v in self.values.items() if v)
        return f"LiveMetrics({self._count} steps{': ' + last if last else ''})"


def _number(value: float) -> str:
    return f"{value:.4g}"
