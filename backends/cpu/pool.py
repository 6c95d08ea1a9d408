"""Pooling, upsampling and padding on the CPU (2-d; the ops run 1-d through a unit height).

Windowed ops (max/avg pool) loop over the kh·kw window offsets, each a strided view of the
padded input, so no window buffer is materialised. Resampling (adaptive pool, nearest and
bilinear upsampling) is separable: one pass along W, one along H. Their gradients scatter back
with segment sums over the (monotone) source indices. f16/bf16 are computed in f32.
"""

from __future__ import annotations

import numpy as np

from ._arrays import F32, HALF_TYPES, contiguous, view
from .conv import _windows

_PAD_MODES = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}


def _compute_dtype(a: np.ndarray) -> np.dtype:
    return F32 if a.dtype in HALF_TYPES else a.dtype


def _filled(x: np.ndarray, shape, padding, value, dtype) -> np.ndarray:
    """An array of ``shape`` (N, C, Hf, Wf) filled with ``value``, ``x`` placed at ``padding``."""
    out = np.full(shape, value, dtype)
    ph, pw = padding
    out[:, :, ph : ph + x.shape[2], pw : pw + x.shape[3]] = x
    return out


def _full_size(size: int, pad: int, out: int, stride: int, span: int) -> int:
    """Padded extent that holds every window (ceil_mode windows may run past the padding)."""
    return max(size + 2 * pad, (out - 1) * stride + span)


def _avg_divisors(size, kernel, stride, pad, out, include_pad) -> np.ndarray:
    """Per-output window sizes along one axis, as PyTorch counts them."""
    start = np.arange(out) * stride - pad
    end = np.minimum(start + kernel, size + pad)
    if include_pad:
        return (end - start).astype(np.float64)
    return (np.minimum(end, size) - np.maximum(start, 0)).astype(np.float64)


def _segment_sum(v: np.ndarray, index: np.ndarray, size: int, axis: int) -> np.ndarray:
    """out[.., j, ..] = Σ_{i: index[i] = j} v[.., i, ..] along ``axis``; ``index`` is sorted."""
    targets = np.arange(size)
    starts = np.searchsorted(index, targets, "left")
    hit = np.searchsorted(index, targets, "right") > starts
    shape = list(v.shape)
    shape[axis] = size
    out = np.zeros(shape, v.dtype)
    if hit.any():
        where = [slice(None)] * v.ndim
        where[axis] = hit
        out[tuple(where)] = np.add.reduceat(v, starts[hit], axis=axis)
    return out


def _adaptive_bounds(size: int, out: int) -> tuple[np.ndarray, np.ndarray]:
    """Window i covers [floor(i·size/out), ceil((i+1)·size/out))."""
    i = np.arange(out)
    return (i * size) // out, -((-(i + 1) * size) // out)


def _adaptive_axis(x: np.ndarray, out: int, axis: int) -> np.ndarray:
    size = x.shape[axis]
    if size % out == 0:
        k = size // out
        return x.reshape(*x.shape[:axis], out, k, *x.shape[axis + 1 :]).mean(axis + 1)
    starts, ends = _adaptive_bounds(size, out)
    parts = [
        x[(slice(None),) * axis + (slice(s, e),)].mean(axis)
        for s, e in zip(starts, ends, strict=True)
    ]
    return np.stack(parts, axis)


def _adaptive_axis_backward(g: np.ndarray, size: int, axis: int) -> np.ndarray:
    out = g.shape[axis]
    if size % out == 0:
        k = size // out
        return np.repeat(g * (1.0 / k), k, axis)
    shape = list(g.shape)
    shape[axis] = size
    grad = np.zeros(shape, g.dtype)
    starts, ends = _adaptive_bounds(size, out)
    lead = (slice(None),) * axis
    for i, (s, e) in enumerate(zip(starts, ends, strict=True)):
        grad[lead + (slice(s, e),)] += np.expand_dims(g[lead + (i,)] / (e - s), axis)
    return grad


def _nearest_index(size: int, out: int, scale) -> np.ndarray:
    """Source index of each output position: floor(dst · in/out) in f32, as PyTorch."""
    if out == size:
        return np.arange(out)
    if out == 2 * size:
        return np.arange(out) >> 1
    step = np.float32(1.0 / scale) if scale else np.float32(size) / np.float32(out)
    src = np.floor(np.arange(out, dtype=np.float32) * step).astype(np.int64)
    return np.minimum(src, size - 1)


def _linear_weights(size: int, out: int, align_corners: bool, scale, dtype):
    """(i0, i1, λ0, λ1): out[k] = λ0[k]·in[i0[k]] + λ1[k]·in[i1[k]], PyTorch's source index."""
    dst = np.arange(out, dtype=dtype)
    if align_corners:
        step = dtype.type(size - 1) / dtype.type(out - 1) if out > 1 else dtype.type(0)
        src = dst * step
    else:
        step = dtype.type(1.0 / scale) if scale else dtype.type(size) / dtype.type(out)
        src = np.maximum(step * (dst + dtype.type(0.5)) - dtype.type(0.5), 0)
    i0 = np.minimum(src.astype(np.int64), size - 1)
    i1 = np.minimum(i0 + 1, size - 1)
    lam1 = np.clip(src - i0, 0, 1).astype(dtype)
    return i0, i1, (1 - lam1).astype(dtype), lam1


def _lerp_axis(x: np.ndarray, weights, axis: int) -> np.ndarray:
    i0, i1, lam0, lam1 = weights
    shape = [1] * x.ndim
    shape[axis] = -1
    return np.take(x, i0, axis) * lam0.reshape(shape) + np.take(x, i1, axis) * lam1.reshape(shape)


def _lerp_axis_backward(g: np.ndarray, weights, size: int, axis: int) -> np.ndarray:
    i0, i1, lam0, lam1 = weights
    shape = [1] * g.ndim
    shape[axis] = -1
    out = _segment_sum(g * lam0.reshape(shape), i0, size, axis)
    out += _segment_sum(g * lam1.reshape(shape), i1, size, axis)
    return out


class PoolOps:
    __slots__ = ()

    # -- max / avg pooling -------------------------------------------------------------
    def max_pool2d(self, layout, kernel_size, stride, padding, dilation, output_size):
        """x: (N, C, H, W) -> (values (N, C, Ho, Wo), int64 indices into H·W, as PyTorch).

        NaN wins (and propagates); among equal maxima the first in the window wins.
        """
        x = view(self.array, layout)
        ct = _compute_dtype(x)
        n, c, h, w = x.shape
        (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel_size, stride, padding, dilation
        ho, wo = output_size
        full = (
            n,
            c,
            _full_size(h, ph, ho, sh, dh * (kh - 1) + 1),
            _full_size(w, pw, wo, sw, dw * (kw - 1) + 1),
        )
        win = _windows(
            _filled(x, full, padding, -np.inf, ct), kernel_size, stride, dilation, output_size
        )
        rows0 = np.arange(ho) * sh - ph
        cols0 = np.arange(wo) * sw - pw
        # Windows of -inf report their first real element, as PyTorch does.
        first_r = rows0 + dh * -(rows0 // dh) * (rows0 < 0)
        first_c = cols0 + dw * -(cols0 // dw) * (cols0 < 0)
        best = np.full((n, c, ho, wo), -np.inf, ct)
        arg = np.empty((n, c, ho, wo), np.int64)
        arg[...] = first_r[:, None] * w + first_c[None, :]
        take = np.empty(best.shape, bool)
        for i in range(kh):
            for j in range(kw):
                v = win[:, :, i, j]
                np.greater(v, best, out=take)
                take |= np.isnan(v)
                np.copyto(best, v, where=take)
                pos = (rows0 + i * dh)[:, None] * w + (cols0 + j * dw)[None, :]
                np.copyto(arg, pos, where=take)
        return type(self)(contiguous(best, x.dtype)), type(self)(arg)

    def max_pool2d_backward(self, layout, indices, indices_layout, input_size):
        """Route each output gradient (N, C, Ho, Wo) to its argmax: -> (N, C, H, W)."""
        g = view(self.array, layout)
        idx = view(indices.array, indices_layout)
        n, c = g.shape[:2]
        plane = input_size[0] * input_size[1]
        flat = idx.reshape(n * c, -1) + (np.arange(n * c) * plane)[:, None]
        weights = g.reshape(-1).astype(np.float64, copy=False)
        out = np.bincount(flat.ravel(), weights=weights, minlength=n * c * plane)
        return type(self)(contiguous(out.reshape(n, c, *input_size), g.dtype))

    def avg_pool2d(
        self,
        layout,
        kernel_size,
        stride,
        padding,
        output_size,
        count_include_pad: bool,
        divisor_override=None,
    ):
        """Mean over each window: x (N, C, H, W) -> (N, C, Ho, Wo)."""
        x = view(self.array, layout)
        ct = _compute_dtype(x)
        n, c, h, w = x.shape
        (kh, kw), (sh, sw), (ph, pw) = kernel_size, stride, padding
        ho, wo = output_size
        full = (n, c, _full_size(h, ph, ho, sh, kh), _full_size(w, pw, wo, sw, kw))
        win = _windows(_filled(x, full, padding, 0, ct), kernel_size, stride, (1, 1), output_size)
        out = np.zeros((n, c, ho, wo), ct)
        for i in range(kh):
            for j in range(kw):
                out += win[:, :, i, j]
        out *= self._avg_scale(
            x.shape,
            kernel_size,
            stride,
            padding,
            output_size,
            count_include_pad,
            divisor_override,
            ct,
        )
        return type(self)(contiguous(out, x.dtype))

    def avg_pool2d_backward(
        self,
        layout,
        input_size,
        kernel_size,
        stride,
        padding,
        count_include_pad: bool,
        divisor_override=None,
    ):
        """Spread each output gradient evenly over its window: -> (N, C, H, W)."""
        g = view(self.array, layout)
        ct = _compute_dtype(g)
        n, c, ho, wo = g.shape
        h, w = input_size
        (kh, kw), (sh, sw), (ph, pw) = kernel_size, stride, padding
        scaled = g.astype(ct, copy=False) * self._avg_scale(
            (n, c, h, w),
            kernel_size,
            stride,
            padding,
            (ho, wo),
            count_include_pad,
            divisor_override,
            ct,
        )
        full = np.zeros((n, c, _full_size(h, ph, ho, sh, kh), _full_size(w, pw, wo, sw, kw)), ct)
        for i in range(kh):
            for j in range(kw):
                full[:, :, i : i + sh * (ho - 1) + 1 : sh, j : j + sw * (wo - 1) + 1 : sw] += scaled
        return type(self)(contiguous(full[:, :, ph : ph + h, pw : pw + w], g.dtype))

    @staticmethod
    def _avg_scale(shape, kernel, stride, padding, out, include_pad, override, dtype):
        if override:
            return dtype.type(1.0 / override)
        dh = _avg_divisors(shape[2], kernel[0], stride[0], padding[0], out[0], include_pad)
        dw = _avg_divisors(shape[3], kernel[1], stride[1], padding[1], out[1], include_pad)
        return (1.0 / (dh[:, None] * dw[None, :])).astype(dtype)

    # -- adaptive pooling --------------------------------------------------------------
    def adaptive_avg_pool2d(self, layout, output_size):
        """Mean over window i = [⌊i·H/Ho⌋, ⌈(i+1)·H/Ho⌉) (and the same along W)."""
        x = view(self.array, layout)
        ct = _compute_dtype(x)
        out = _adaptive_axis(x.astype(ct, copy=False), output_size[1], 3)
        return type(self)(contiguous(_adaptive_axis(out, output_size[0], 2), x.dtype))

    def adaptive_avg_pool2d_backward(self, layout, input_size):
        g = view(self.array, layout)
        ct = _compute_dtype(g)
        grad = _adaptive_axis_backward(g.astype(ct, copy=False), input_size[0], 2)
        return type(self)(contiguous(_adaptive_axis_backward(grad, input_size[1], 3), g.dtype))

    # -- upsampling --------------------------------------------------------------------
    def upsample_nearest2d(self, layout, output_size, scales):
        """out[.., i, j] = x[.., src(i), src(j)], src(i) = min(⌊i·scale⌋, H-1) with scale =
        1/scale_factor when given, else H/Ho (PyTorch's ``nearest``)."""
        x = view(self.array, layout)
        rows = _nearest_index(x.shape[2], output_size[0], scales[0])
        cols = _nearest_index(x.shape[3], output_size[1], scales[1])
        return type(self)(contiguous(x[:, :, rows[:, None], cols[None, :]]))

    def upsample_nearest2d_backward(self, layout, input_size, scales):
        g = view(self.array, layout)
        ct = _compute_dtype(g)
        rows = _nearest_index(input_size[0], g.shape[2], scales[0])
        cols = _nearest_index(input_size[1], g.shape[3], scales[1])
        grad = _segment_sum(g.astype(ct, copy=False), cols, input_size[1], 3)
        return type(self)(contiguous(_segment_sum(grad, rows, input_size[0], 2), g.dtype))

    def upsample_bilinear2d(self, layout, output_size, align_corners: bool, scales):
        """Separable linear interpolation, PyTorch's source index:
        align_corners: src = i·(H-1)/(Ho-1); else src = max((i + ½)·scale - ½, 0)."""
        x = view(self.array, layout)
        ct = _compute_dtype(x)
        h, w = x.shape[2:]
        wy = _linear_weights(h, output_size[0], align_corners, scales[0], ct)
        wx = _linear_weights(w, output_size[1], align_corners, scales[1], ct)
        out = _lerp_axis(_lerp_axis(x.astype(ct, copy=False), wx, 3), wy, 2)
        return type(self)(contiguous(out, x.dtype))

    def upsample_bilinear2d_backward(self, layout, input_size, align_corners: bool, scales):
        g = view(self.array, layout)
        ct = _compute_dtype(g)
        ho, wo = g.shape[2:]
        wy = _linear_weights(input_size[0], ho, align_corners, scales[0], ct)
        wx = _linear_weights(input_size[1], wo, align_corners, scales[1], ct)
        grad = _lerp_axis_backward(g.astype(ct, copy=False), wy, input_size[0], 2)
        grad = _lerp_axis_backward(grad, wx, input_size[1], 3)
        return type(self)(contiguous(grad, g.dtype))

    # -- padding -----------------------------------------------------------------------
    def pad(self, layout, pads, mode: str, value=0):
        """``pads`` has one (before, after) pair per dim. ``constant`` fills with ``value``
        (a negative pad crops); ``reflect`` mirrors without the edge; ``replicate`` repeats the
        edge; ``circular`` wraps around."""
        x = view(self.array, layout)
        if mode != "constant":
            return type(self)(contiguous(np.pad(x, pads, mode=_PAD_MODES[mode])))
        x = x[
            tuple(
                slice(max(-lo, 0), s - max(-hi, 0))
                for s, (lo, hi) in zip(x.shape, pads, strict=True)
            )
        ]
        shape = tuple(
            s + max(lo, 0) + max(hi, 0) for s, (lo, hi) in zip(x.shape, pads, strict=True)
        )
        out = np.full(shape, value, x.dtype)
        out[
            tuple(
                slice(max(lo, 0), max(lo, 0) + s) for s, (lo, _) in zip(x.shape, pads, strict=True)
            )
        ] = x
        return type(self)(out)

    def pad_backward(self, layout, pads, mode: str):
        """The gradient of a ``reflect``/``replicate``/``circular`` pad: every padded element's
        gradient is added to the element it copies."""
        g = view(self.array, layout)
        ct = _compute_dtype(g)
        grad = g.astype(ct, copy=False)
        for axis, (lo, hi) in enumerate(pads):
            if not (lo or hi):
                continue
            gm = np.moveaxis(grad, axis, -1)
            size = gm.shape[-1] - lo - hi
            core = gm[..., lo : lo + size].copy()
            left, right = gm[..., :lo], gm[..., lo + size :]
            if mode == "reflect":
                core[..., 1 : lo + 1] += left[..., ::-1]
                core[..., size - 1 - hi : size - 1] += right[..., ::-1]
            elif mode == "replicate":
                core[..., 0] += left.sum(-1)
                core[..., -1] += right.sum(-1)
            else:  # circular
                core[..., size - lo :] += left
                core[..., :hi] += right
            grad = np.moveaxis(core, -1, axis)
        return type(self)(contiguous(grad, g.dtype))
