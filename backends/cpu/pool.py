"""Pooling, upsampling and padding on the CPU (2-d; the ops run 1-d through a unit height).

Windowed ops (max/avg pool) loop over the kh·kw window offsets, each a strided view of the
padded input, so no window buffer is materialised; max pooling keeps the argmax for its
gradient. Disjoint tiles (kernel = stride, no padding: the common 2×2) read the taps from the
input itself, find the argmax without masked writes, and scatter the gradient directly.
Adaptive average pooling is A_H @ x @ A_Wᵀ with averaging matrices (its gradient the
transposed products). Upsampling is separable, one pass along H and one along W: gathers
(strided copies for integer factors), and for the gradients, sums over each source's outputs
done as a few gathers rather than numpy's slow reductions over tiny segments.
f16/bf16 are computed in f32.
"""

from __future__ import annotations

import numpy as np

from ..conv_params import ConvParams
from ._arrays import contiguous, view
from .conv import _compute_dtype, _windows
from .native import NATIVE

# The native max pool (kernels/cpu/core/pool.c): one pass per output, values and argmax
# together, threaded over planes (an extension built before it existed lacks it). It runs
# first, the numpy tile paths are the fallback: on the MNIST CNN's 2×2 pools (64×32×28×28
# f32) 2.1 ms vs 7.7 ms forward, and its scatter 0.6 ms vs 5.3 ms backward.
_NATIVE_POOL = NATIVE is not None and hasattr(NATIVE, "max_pool2d")


def _native_max_pool(x: np.ndarray, kernel, stride, padding, dilation, out_hw):
    """(values, int64 indices) of max pooling x (N, C, H, W) by the native kernel."""
    n, c, h, w = x.shape
    src = np.ascontiguousarray(x)
    out = np.empty((n, c, *out_hw), x.dtype)
    idx = np.empty((n, c, *out_hw), np.int64)
    NATIVE.max_pool2d(src, out, idx, n * c, h, w, *out_hw, *kernel, *stride, *padding, *dilation)
    return out, idx


def _filled(x: np.ndarray, shape, padding, value, dtype) -> np.ndarray:
    """An array of ``shape`` (N, C, Hf, Wf) filled with ``value``, ``x`` placed at ``padding``."""
    out = np.full(shape, value, dtype)
    ph, pw = padding
    out[:, :, ph : ph + x.shape[2], pw : pw + x.shape[3]] = x
    return out


def _lowest(dtype: np.dtype):
    """The padding of max pooling: -inf, or the smallest integer (integer inputs)."""
    return np.iinfo(dtype).min if dtype.kind in "iu" else -np.inf


def _full_size(size: int, pad: int, out: int, stride: int, span: int) -> int:
    """Padded extent that holds every window (ceil_mode windows may run past the padding)."""
    return max(size + 2 * pad, (out - 1) * stride + span)


def _along(values: np.ndarray, ndim: int, axis: int) -> np.ndarray:
    """A 1-d array shaped to broadcast along ``axis`` of an ``ndim``-d array."""
    shape = [1] * ndim
    shape[axis] = -1
    return values.reshape(shape)


def _at(ndim: int, axis: int, index) -> tuple:
    return (slice(None),) * axis + (index,) + (slice(None),) * (ndim - axis - 1)


def _repeat_factor(index: np.ndarray, size: int) -> int:
    """k when ``index`` is [0]*k + [1]*k + ... + [size-1]*k (an integer upscale), else 0."""
    n = len(index)
    k = n // size
    return k if n == k * size and np.array_equal(index, np.arange(n) // k) else 0


def _gather(x: np.ndarray, index: np.ndarray, axis: int) -> np.ndarray:
    """``x`` indexed by ``index`` along ``axis``; an integer upscale is k strided copies."""
    k = _repeat_factor(index, x.shape[axis])
    if k == 1:
        return x
    if not k:
        return np.take(x, index, axis)
    shape = list(x.shape)
    shape[axis] *= k
    out = np.empty(shape, x.dtype)
    for r in range(k):
        out[_at(x.ndim, axis, slice(r, None, k))] = x
    return out


def _segment_sum(v: np.ndarray, index: np.ndarray, size: int, axis: int) -> np.ndarray:
    """out[.., j, ..] = Σ_{i: index[i] = j} v[.., i, ..] along ``axis``; ``index`` is sorted.

    Summed as one gather per rank inside a segment (segments are short): numpy's reductions
    over tiny segments (reduceat) are an order of magnitude slower.
    """
    k = _repeat_factor(index, size)
    if k:
        out = v[_at(v.ndim, axis, slice(0, None, k))].copy()
        for r in range(1, k):
            out += v[_at(v.ndim, axis, slice(r, None, k))]
        return out
    targets = np.arange(size)
    starts = np.searchsorted(index, targets, "left")
    counts = np.searchsorted(index, targets, "right") - starts
    shape = list(v.shape)
    shape[axis] = size
    out = np.zeros(shape, v.dtype)
    last = v.shape[axis] - 1
    for r in range(int(counts.max(initial=0))):
        term = np.take(v, np.minimum(starts + r, last), axis)
        have = counts > r
        if not have.all():
            term *= _along(have.astype(v.dtype), v.ndim, axis)
        out += term
    return out


def _adaptive_matrix(size: int, out: int, dtype: np.dtype) -> np.ndarray:
    """(out, size) averaging matrix: row i is 1/len over [⌊i·size/out⌋, ⌈(i+1)·size/out⌉)."""
    i = np.arange(out)[:, None]
    starts = (i * size) // out
    ends = -((-(i + 1) * size) // out)
    j = np.arange(size)[None, :]
    return (((j >= starts) & (j < ends)) / (ends - starts)).astype(dtype)


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
    out = np.take(x, i0, axis) * _along(lam0, x.ndim, axis)
    out += np.take(x, i1, axis) * _along(lam1, x.ndim, axis)
    return out


def _lerp_axis_backward(g: np.ndarray, weights, size: int, axis: int) -> np.ndarray:
    i0, i1, lam0, lam1 = weights
    out = _segment_sum(g * _along(lam0, g.ndim, axis), i0, size, axis)
    out += _segment_sum(g * _along(lam1, g.ndim, axis), i1, size, axis)
    return out


def _avg_divisor(in_hw, out_hw, kernel, stride, padding, include_pad, override) -> np.ndarray:
    """The divisor of each output window (N-independent, (Ho, Wo), int64)."""
    if override:
        return np.full(tuple(out_hw), override, np.int64)
    params = ConvParams.symmetric(stride, padding, (1, 1))
    dh, dw = params.avg_divisors(in_hw, kernel, out_hw, include_pad)
    return np.outer(dh, dw).astype(np.int64)


def _avg_scale(in_hw, out_hw, kernel, stride, padding, include_pad, override, dtype):
    """1 / divisor of each output window (N-independent, (Ho, Wo))."""
    divisor = _avg_divisor(in_hw, out_hw, kernel, stride, padding, include_pad, override)
    return (1.0 / divisor).astype(dtype)


def _max_pool_tiles(x: np.ndarray, kernel, out_hw, ct) -> tuple[np.ndarray, np.ndarray]:
    """Max pooling over disjoint kh×kw tiles (kernel = stride, no padding, no dilation):
    each tap is a strided view of ``x`` itself, no padded copy. -> (values, int64 indices).

    The first tap equal to the maximum wins, found without masked writes: the index is
    base + Σ_k [taps 0..k all differ from the max] · (offset_{k+1} - offset_k).
    NaN wins (the last NaN tap), as the general path.
    """
    kh, kw = kernel
    ho, wo = out_hw
    w = x.shape[3]
    taps = [
        x[:, :, i : i + kh * ho : kh, j : j + kw * wo : kw] for i in range(kh) for j in range(kw)
    ]
    offsets = [i * w + j for i in range(kh) for j in range(kw)]
    best = taps[0].astype(ct)
    for tap in taps[1:]:
        np.maximum(best, tap, out=best)
    base = (np.arange(ho) * (kh * w))[:, None] + np.arange(wo) * kw
    arg = np.empty(best.shape, np.int64)
    arg[...] = base
    before = np.empty(best.shape, bool)  # no tap so far equals the maximum
    differs = np.empty(best.shape, bool)
    step = np.empty(best.shape, np.int64)
    for k in range(len(taps) - 1):
        np.not_equal(taps[k], best, out=differs if k else before)
        if k:
            before &= differs
        np.multiply(before, offsets[k + 1] - offsets[k], out=step)
        arg += step
    if np.isnan(best).any():
        for tap, offset in zip(taps, offsets, strict=True):
            np.copyto(arg, base + offset, where=np.isnan(tap))
    return best, arg


def _tiles_backward(g: np.ndarray, idx: np.ndarray, input_size):
    """The max-pool gradient as a plain scatter when every index lies in its own disjoint
    tile of (H // Ho) × (W // Wo) cells (so no two outputs share an input), else None."""
    n, c, ho, wo = g.shape
    h, w = input_size
    if not (ho and wo) or h < ho or w < wo:
        return None
    kh, kw = h // ho, w // wo
    span = (kh - 1) * w + kw
    local = idx - ((np.arange(ho) * (kh * w))[:, None] + np.arange(wo) * kw)
    if local.min(initial=0) < 0 or local.max(initial=0) >= span:
        return None
    in_tile = np.zeros(span, bool)
    in_tile[(np.arange(kh) * w)[:, None] + np.arange(kw)] = True
    if not in_tile[local].all():
        return None
    out = np.zeros(n * c * h * w, _compute_dtype(g))
    flat = idx.reshape(n * c, ho * wo) + (np.arange(n * c) * (h * w))[:, None]
    out[flat.ravel()] = g.ravel()
    return out.reshape(n, c, h, w)


class PoolOps:
    __slots__ = ()

    # -- max / avg pooling -------------------------------------------------------------
    def max_pool2d(self, layout, kernel_size, stride, padding, dilation, output_size):
        """x: (N, C, H, W) -> (values (N, C, Ho, Wo), int64 indices into H·W, as PyTorch).

        Among equal maxima the first in the window wins; NaN wins (the last one); a window of
        -inf reports its first real element, or -1 when it holds only padding.
        """
        x = view(self.array, layout)
        ct = _compute_dtype(x)
        n, c, h, w = x.shape
        (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel_size, stride, padding, dilation
        ho, wo = output_size
        if _NATIVE_POOL and type(x) is np.ndarray and x.dtype.kind != "b":
            out, idx = _native_max_pool(x, kernel_size, stride, padding, dilation, output_size)
            return type(self)(out), type(self)(idx)
        if (kh, kw) == (sh, sw) and padding == (0, 0) and dilation == (1, 1):
            if ho * kh <= h and wo * kw <= w:  # vectorised over the outputs
                best, arg = _max_pool_tiles(x, kernel_size, output_size, ct)
                return type(self)(contiguous(best, x.dtype)), type(self)(arg)
        span_h, span_w = dh * (kh - 1) + 1, dw * (kw - 1) + 1
        full = (n, c, _full_size(h, ph, ho, sh, span_h), _full_size(w, pw, wo, sw, span_w))
        xp = _filled(x, full, padding, _lowest(ct), ct)
        win = _windows(xp, kernel_size, stride, dilation, output_size)
        taps = [(i, j) for i in range(kh) for j in range(kw)]
        rows0 = np.arange(ho) * sh - ph
        cols0 = np.arange(wo) * sw - pw

        def position(i: int, j: int) -> np.ndarray:
            return (rows0 + i * dh)[:, None] * w + (cols0 + j * dw)[None, :]

        best = win[:, :, 0, 0].copy()
        for i, j in taps[1:]:
            np.maximum(best, win[:, :, i, j], out=best)
        arg = np.empty(best.shape, np.int64)
        hit = np.empty(best.shape, bool)
        for i, j in reversed(taps):  # the first tap equal to the maximum is written last
            np.equal(win[:, :, i, j], best, out=hit)
            np.copyto(arg, position(i, j), where=hit)
        if np.isnan(best).any():
            for i, j in taps:
                np.copyto(arg, position(i, j), where=np.isnan(win[:, :, i, j]))
        if np.isneginf(best).any():
            # the first real element (-1 when a dilated window holds only padding)
            first_r = rows0 + dh * -(rows0 // dh) * (rows0 < 0)
            first_c = cols0 + dw * -(cols0 // dw) * (cols0 < 0)
            real_r = (first_r < h) & (first_r <= rows0 + dh * (kh - 1))
            real_c = (first_c < w) & (first_c <= cols0 + dw * (kw - 1))
            first = np.where(real_r[:, None] & real_c[None, :], first_r[:, None] * w + first_c, -1)
            np.copyto(arg, first, where=np.isneginf(best))
        return type(self)(contiguous(best, x.dtype)), type(self)(arg)

    def max_pool2d_backward(self, layout, indices, indices_layout, input_size):
        """Route each output gradient (N, C, Ho, Wo) to its argmax: -> (N, C, H, W)."""
        g = view(self.array, layout)
        idx = view(indices.array, indices_layout)
        n, c = g.shape[:2]
        plane = input_size[0] * input_size[1]
        if _NATIVE_POOL and type(g) is np.ndarray:
            ct = _compute_dtype(g)
            src = np.ascontiguousarray(g, dtype=ct)
            out = np.empty((n, c, *input_size), ct)
            length = g.shape[2] * g.shape[3]
            NATIVE.max_pool2d_backward(src, np.ascontiguousarray(idx), out, n * c, length, plane)
            return type(self)(contiguous(out, g.dtype))
        tiled = _tiles_backward(g, idx, input_size)
        if tiled is not None:
            return type(self)(contiguous(tiled, g.dtype))
        flat = idx.reshape(n * c, g.shape[2] * g.shape[3]) + (np.arange(n * c) * plane)[:, None]
        weights = g.reshape(-1).astype(np.float64, copy=False)
        real = idx.reshape(-1) >= 0  # -1: a window of padding only, whose gradient goes nowhere
        if not real.all():
            flat, weights = flat.ravel()[real], weights[real]
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
        if x.dtype.kind in "iu":
            ct = np.dtype(np.int64)  # integers: an exact sum, then a division toward zero
        win = _windows(_filled(x, full, padding, 0, ct), kernel_size, stride, (1, 1), output_size)
        out = win[:, :, 0, 0].copy()
        for i in range(kh):
            for j in range(kw):
                if i or j:
                    out += win[:, :, i, j]
        if ct.kind == "i":
            args = (kernel_size, stride, padding, count_include_pad, divisor_override)
            divisor = _avg_divisor((h, w), output_size, *args)
            quotient = np.abs(out) // np.abs(divisor)
            out = np.where((out < 0) != (divisor < 0), -quotient, quotient)
            return type(self)(contiguous(out, x.dtype))
        out *= _avg_scale(
            (h, w),
            output_size,
            kernel_size,
            stride,
            padding,
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
        scaled = g.astype(ct) * _avg_scale(
            input_size,
            (ho, wo),
            kernel_size,
            stride,
            padding,
            count_include_pad,
            divisor_override,
            ct,
        )
        full = np.zeros((n, c, _full_size(h, ph, ho, sh, kh), _full_size(w, pw, wo, sw, kw)), ct)
        for i in range(kh):
            for j in range(kw):
                full[:, :, i : i + sh * (ho - 1) + 1 : sh, j : j + sw * (wo - 1) + 1 : sw] += scaled
        return type(self)(contiguous(full[:, :, ph : ph + h, pw : pw + w], g.dtype))

    # -- adaptive pooling --------------------------------------------------------------
    def adaptive_avg_pool2d(self, layout, output_size):
        """Mean over window i = [⌊i·H/Ho⌋, ⌈(i+1)·H/Ho⌉) (and the same along W), as
        A_H @ x @ A_Wᵀ with averaging matrices."""
        x = view(self.array, layout)
        ct = _compute_dtype(x)
        n, c, h, w = x.shape
        ho, wo = output_size
        out = x.astype(ct, copy=False)
        if wo != w:
            out = (out.reshape(n * c * h, w) @ _adaptive_matrix(w, wo, ct).T).reshape(n, c, h, wo)
        if ho != h:
            out = _adaptive_matrix(h, ho, ct) @ out
        return type(self)(contiguous(out, x.dtype))

    def adaptive_avg_pool2d_backward(self, layout, input_size):
        g = view(self.array, layout)
        ct = _compute_dtype(g)
        n, c, ho, wo = g.shape
        h, w = input_size
        grad = g.astype(ct, copy=False)
        if ho != h:
            grad = _adaptive_matrix(h, ho, ct).T @ grad
        if wo != w:
            grad = (grad.reshape(n * c * h, wo) @ _adaptive_matrix(w, wo, ct)).reshape(n, c, h, w)
        return type(self)(contiguous(grad, g.dtype))

    # -- upsampling --------------------------------------------------------------------
    def upsample_nearest2d(self, layout, output_size, scales):
        """out[.., i, j] = x[.., src(i), src(j)], src(i) = min(⌊i·scale⌋, H-1) with scale =
        1/scale_factor when given, else H/Ho (PyTorch's ``nearest``)."""
        x = view(self.array, layout)
        rows = _nearest_index(x.shape[2], output_size[0], scales[0])
        cols = _nearest_index(x.shape[3], output_size[1], scales[1])
        return type(self)(contiguous(_gather(_gather(x, rows, 2), cols, 3)))

    def upsample_nearest2d_backward(self, layout, input_size, scales):
        g = view(self.array, layout)
        ct = _compute_dtype(g)
        rows = _nearest_index(input_size[0], g.shape[2], scales[0])
        cols = _nearest_index(input_size[1], g.shape[3], scales[1])
        grad = _segment_sum(g.astype(ct, copy=False), rows, input_size[0], 2)
        return type(self)(contiguous(_segment_sum(grad, cols, input_size[1], 3), g.dtype))

    def upsample_bilinear2d(self, layout, output_size, align_corners: bool, scales):
        """Separable linear interpolation, PyTorch's source index:
        align_corners: src = i·(H-1)/(Ho-1); else src = max((i + ½)·scale - ½, 0).
        An axis whose size does not change is copied as is (whatever the scale), as PyTorch."""
        x = view(self.array, layout)
        ct = _compute_dtype(x)
        out = x.astype(ct, copy=False)
        for axis in (3, 2):
            size, new = x.shape[axis], output_size[axis - 2]
            if new != size:
                weights = _linear_weights(size, new, align_corners, scales[axis - 2], ct)
                out = _lerp_axis(out, weights, axis)
        return type(self)(contiguous(out, x.dtype))

    def upsample_bilinear2d_backward(self, layout, input_size, align_corners: bool, scales):
        g = view(self.array, layout)
        ct = _compute_dtype(g)
        grad = g.astype(ct, copy=False)
        for axis in (2, 3):
            size, new = input_size[axis - 2], g.shape[axis]
            if new != size:
                weights = _linear_weights(size, new, align_corners, scales[axis - 2], ct)
                grad = _lerp_axis_backward(grad, weights, size, axis)
        return type(self)(contiguous(grad, g.dtype))

    # -- padding -----------------------------------------------------------------------
    def pad(self, layout, pads, mode: str, value=0):
        """``pads`` has one (before, after) pair per dim. ``constant`` fills with ``value``
        (a negative pad crops); ``reflect`` mirrors without the edge; ``replicate`` repeats the
        edge; ``circular`` wraps around."""
        x = view(self.array, layout)
        shapes = zip(x.shape, pads, strict=True)
        x = x[tuple(slice(max(-lo, 0), n - max(-hi, 0)) for n, (lo, hi) in shapes)]  # crops
        pads = tuple((max(lo, 0), max(hi, 0)) for lo, hi in pads)
        shape = tuple(n + lo + hi for n, (lo, hi) in zip(x.shape, pads, strict=True))
        out = np.full(shape, value, x.dtype) if mode == "constant" else np.empty(shape, x.dtype)
        out[tuple(slice(lo, lo + n) for n, (lo, _) in zip(x.shape, pads, strict=True))] = x
        if mode == "constant":
            return type(self)(out)
        # fill the borders dim by dim from what is already in place (corners included)
        for axis, ((lo, hi), size) in enumerate(zip(pads, x.shape, strict=True)):
            end = lo + size

            def at(start, stop, step=1, axis=axis):
                return _at(out.ndim, axis, slice(start, stop, step))

            if mode == "reflect":
                stop = end - 2 - hi
                left, right = at(2 * lo, lo, -1), at(end - 2, None if stop < 0 else stop, -1)
            elif mode == "replicate":
                left, right = at(lo, lo + 1), at(end - 1, end)
            else:  # circular
                left, right = at(size, size + lo), at(lo, lo + hi)
            if lo:
                out[at(0, lo)] = out[left]
            if hi:
                out[at(end, end + hi)] = out[right]
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
