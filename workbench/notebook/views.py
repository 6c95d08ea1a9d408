"""Picture views of a tensor, like lovely-tensors': ``t.plt`` (a histogram), ``t.rgb`` (an image
grid for ``[..., C, H, W]``), ``t.chans`` (one heatmap per channel). Each is a small object with
``_repr_png_``, so a notebook shows it; ``.png()`` gives the bytes.

``%load_ext workbench`` adds the three properties to ``Tensor`` (and ``unload`` removes them).
"""

from __future__ import annotations

import io

import numpy as np

from .html import host_sample

_NAMES = ("plt", "rgb", "chans")


def _figure(width: float, height: float):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=80)


def _png(fig) -> bytes:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", bbox_inches="tight")
    return buffer.getvalue()


def _host(t) -> np.ndarray:
    values = t.detach().to("cpu").numpy()
    return (
        values.astype(np.float32)
        if values.dtype.kind not in "fiu" or values.dtype.name == "bfloat16"
        else values
    )


class _View:
    def __init__(self, tensor) -> None:
        self.tensor = tensor

    def png(self) -> bytes:
        return _png(self.figure())

    def _repr_png_(self) -> bytes:
        return self.png()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} of Tensor{list(self.tensor.shape)}>"


class PlotView(_View):
    """A histogram of the (sampled) finite values, with μ and ±σ marked."""

    def figure(self):
        flat, sampled = host_sample(self.tensor)
        f = flat.astype(np.float64)
        f = f[np.isfinite(f)]
        fig = _figure(6, 2)
        ax = fig.add_subplot()
        if f.size:
            ax.hist(f, bins=min(64, max(1, f.size)), color="#7aa6da")
            mean, std = f.mean(), f.std()
            ax.axvline(mean, color="k", lw=1)
            for s in (-1, 1):
                ax.axvline(mean + s * std, color="k", lw=0.5, ls="--")
        ax.set_title(
            f"Tensor{list(self.tensor.shape)} {self.tensor.dtype.name}"
            + (" (sampled)" if sampled else ""),
            fontsize=9,
        )
        return fig


def _unit(x: np.ndarray) -> np.ndarray:
    """Into [0, 1]: as is when already there, else min-max scaled."""
    x = x.astype(np.float32)
    lo, hi = float(np.nanmin(x)), float(np.nanmax(x))
    if lo >= 0 and hi <= 1:
        return x
    return (x - lo) / (hi - lo) if hi > lo else np.zeros_like(x)


class RgbView(_View):
    """Images from ``[..., C, H, W]`` with C in (1, 3, 4), laid out in a grid."""

    def figure(self):
        shape = self.tensor.shape
        if len(shape) < 3 or shape[-3] not in (1, 3, 4):
            raise ValueError(
                f".rgb needs a [..., C, H, W] tensor with C in 1, 3, 4; found {list(shape)}"
            )
        images = _unit(_host(self.tensor)).reshape(-1, *shape[-3:]).transpose(0, 2, 3, 1)
        n = images.shape[0]
        cols = min(n, 8)
        rows = -(-n // cols)
        fig = _figure(1.6 * cols, 1.6 * rows)
        for i, image in enumerate(images):
            ax = fig.add_subplot(rows, cols, i + 1)
            ax.imshow(image[..., 0] if image.shape[-1] == 1 else image, cmap="gray", vmin=0, vmax=1)
            ax.axis("off")
        return fig


class ChansView(_View):
    """One heatmap per channel of ``[..., H, W]`` (leading dims flattened)."""

    def figure(self):
        shape = self.tensor.shape
        if len(shape) < 2:
            raise ValueError(f".chans needs a [..., H, W] tensor; found {list(shape)}")
        chans = _host(self.tensor).reshape(-1, *shape[-2:]).astype(np.float32)
        n = chans.shape[0]
        cols = min(n, 8)
        rows = -(-n // cols)
        fig = _figure(1.6 * cols, 1.6 * rows)
        for i, chan in enumerate(chans):
            ax = fig.add_subplot(rows, cols, i + 1)
            ax.imshow(chan, cmap="viridis")
            ax.set_title(str(i), fontsize=7)
            ax.axis("off")
        return fig


def plt(t) -> PlotView:
    return PlotView(t)


def rgb(t) -> RgbView:
    return RgbView(t)


def chans(t) -> ChansView:
    return ChansView(t)


def install() -> bool:
    """Add ``.plt``, ``.rgb``, ``.chans`` to ``Tensor`` unless it already has them."""
    from ..tensor import Tensor

    if any(hasattr(Tensor, name) for name in _NAMES):
        return False
    Tensor.plt = property(plt, doc="A histogram of the values (``_repr_png_``).")
    Tensor.rgb = property(rgb, doc="The tensor as images, [..., C, H, W] (``_repr_png_``).")
    Tensor.chans = property(chans, doc="One heatmap per channel (``_repr_png_``).")
    return True


def uninstall() -> None:
    from ..tensor import Tensor

    for name in _NAMES:
        if isinstance(vars(Tensor).get(name), property):
            delattr(Tensor, name)
