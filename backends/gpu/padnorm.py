"""Padding (``kernels/gpu/pad.h``) and group normalisation (``kernels/gpu/norm.h``) on the GPU
backends."""

from __future__ import annotations

import numpy as np

from ..dtypes import NUMPY_BY_NAME
from ..errors import UnsupportedOnDevice
from ..layout import Layout, numel
from .params import I32, MAX_DIMS, Dims, Raw, geometry
from .plan import group_norm_threads, row_grid

PAD_MODES = {"constant": 0, "reflect": 1, "replicate": 2, "circular": 3}


def pad_dims(shape, strides, pads):
    """(shape, strides, lo, out) of a pad with unpadded size-1 dims dropped and adjacent
    unpadded dims that are contiguous with each other merged (same C element order)."""
    dims: list[list[int]] = []  # [size, stride, lo, out]
    merge = False  # the last entry is unpadded, so an unpadded dim may merge into it
    for size, stride, (lo, hi) in zip(shape, strides, pads, strict=True):
        size, stride, lo, hi = int(size), int(stride), int(lo), int(hi)
        if lo or hi:
            dims.append([size, stride, lo, size + lo + hi])
            merge = False
        elif size != 1:
            if merge and dims[-1][1] == stride * size:
                dims[-1][0] *= size
                dims[-1][1] = stride
                dims[-1][3] = dims[-1][0]
            else:
                dims.append([size, stride, 0, size])
                merge = True
    return tuple(tuple(d[k] for d in dims) for k in range(4))


class PadNormOps:
    __slots__ = ()

    # -- padding --------------------------------------------------------------------------
    def pad(self, layout, pads, mode: str, value=0):
        """``pads`` has one (before, after) pair per dim. ``constant`` fills with ``value``
        (a negative pad crops); ``reflect`` mirrors without the edge; ``replicate`` repeats the
        edge; ``circular`` wraps around. Any dtype; the output is contiguous."""
        if mode not in PAD_MODES:
            raise UnsupportedOnDevice(
                f"op pad is not implemented on {self.device_kind} for mode {mode!r}"
            )
        shape = tuple(layout.shape)
        out_shape = tuple(n + lo + hi for n, (lo, hi) in zip(shape, pads, strict=True))
        total = numel(out_shape)
        out = self._new(total)
        if total == 0:
            return out
        sizes, strides, lo, outs = pad_dims(shape, layout.strides, pads)
        if len(sizes) > MAX_DIMS:
            raise UnsupportedOnDevice(
                f"op pad on {self.device_kind} takes at most {MAX_DIMS} dims that are padded or "
                f"not mergeable, got shape {shape} with strides {tuple(layout.strides)}, "
                f"pads {pads}"
            )
        rest = MAX_DIMS - len(sizes)
        geom = geometry(*lo, *([0] * rest), *outs, *([1] * rest))
        itemsize = np.dtype(NUMPY_BY_NAME[self.dtype]).itemsize
        raw = np.array(value if mode == "constant" else 0).astype(NUMPY_BY_NAME[self.dtype])
        self._launch("pad", self.K.pad_name(itemsize), total, out._at(), self._at(),
                     Dims(Layout(sizes, strides, layout.offset)), geom, total,
                     I32(PAD_MODES[mode]), Raw(raw.tobytes(), itemsize))  # fmt: skip
        return out

    def pad_backward(self, layout, pads, mode: str):
        """The gradient of a ``reflect``/``replicate``/``circular`` pad: every padded element's
        gradient is added to the element it copies. One pass per padded dim, accumulated in
        the compute type (f32 for halves), then rounded to this dtype."""
        if mode not in PAD_MODES or mode == "constant":
            raise UnsupportedOnDevice(
                f"op pad_backward is not implemented on {self.device_kind} for mode {mode!r}"
            )
        self.K.pad_backward_name(self.dtype)  # float dtypes only
        shape = list(layout.shape)
        padded = [d for d, (lo, hi) in enumerate(pads) if lo or hi]
        if not padded:
            return self.contiguous(layout)
        cur, cur_layout = self, layout
        for d in padded:
            lo, hi = (int(p) for p in pads[d])
            n = shape[d] - lo - hi
            shape[d] = n
            total = numel(shape)
            out = self._new(total, self.K.compute_dtype(self.dtype))
            inner = numel(shape[d + 1 :])
            self._launch("pad", self.K.pad_backward_name(cur.dtype), total, out._at(), cur._at(),
                         cur_layout, total, inner, n, lo, hi, I32(PAD_MODES[mode]))  # fmt: skip
            cur, cur_layout = out, Layout.contiguous(tuple(shape))
        if cur.dtype != self.dtype:
            cur = cur.cast(cur_layout, self.dtype)
        return cur

    # -- group normalisation ---------------------------------------------------------------
    def group_norm(self, layout, num_groups: int, weight, weight_layout, bias, bias_layout,
                   eps: float):  # fmt: skip
        """GroupNorm of x (N, C, S): statistics over each group of C/G channels and all of S,
        then a per-channel affine. Returns (out (N, C, S), mean (N, G), rstd (N, G)), the
        statistics in the compute type (f32 for halves). One block per (n, g)."""
        name = self.K.group_norm_name(self.dtype)
        n, c, s = (int(v) for v in layout.shape)
        g = int(num_groups)
        if g <= 0 or c % g:
            raise ValueError(f"group_norm: {g} groups do not divide {c} channels")
        cdt = self.K.compute_dtype(self.dtype)
        rows, cpg = n * g, c // g
        out = self._new(n * c * s)
        mean, rstd = self._new(rows, cdt), self._new(rows, cdt)
        w, lw = self._affine(weight, weight_layout, c)
        b, lb = self._affine(bias, bias_layout, c)
        grid = row_grid(rows)
        self._launch("norm", name, rows, out._at(), mean._at(), rstd._at(), self._at(), layout,
                     w, lw, b, lb, rows, g, cpg * s, s, cpg, float(eps),
                     I32(weight is not None), I32(bias is not None), grid=grid,
                     block=(group_norm_threads(cpg * s), 1, 1))  # fmt: skip
        return out, mean, rstd

    def _affine(self, other, layout, c: int):
        """(buffer argument, layout) of an optional per-channel (C,) operand in this dtype."""
        if other is None:
            return self._null(), Layout.contiguous((c,))
        if other.dtype != self.dtype:
            other = other.cast(layout, self.dtype)
            layout = Layout.contiguous((c,))
        return other._at(), Layout.of(layout)
