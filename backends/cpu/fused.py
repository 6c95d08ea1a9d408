"""Fused ops on the CPU: softmax, log-softmax, layer/RMS/group norm, rotary embeddings and
scaled dot-product attention, each one call from the core.

Rows are processed in cache-sized blocks with in-place numpy ops (``out=``), so the several
passes of a softmax or a norm stay in L2 instead of streaming the whole tensor through memory
each time. f16/bf16 are computed in f32 block by block and rounded once at the end; the
statistics (mean, rstd) and attention probabilities handed back for the backward pass are in
the compute dtype (f32 for f16/bf16, else the input dtype).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ._arrays import F32, is_half, view
from .native import NATIVE

# Elements per block: 64K f32 = 256 KiB, which sits in L2 next to the block's output.
_BLOCK = 1 << 16
# The native row kernels (kernels/cpu/core/rows.c) compute these dtypes (numpy type characters
# of f32, f16 and bf16) in f32; f64 takes the numpy path.
_NATIVE_ROWS = "feE" if NATIVE is not None else ""
# group_norm, rope (rows.c) and attention (attention.c) also run f64, in f64.
_NATIVE_FLOAT = "fdeE" if NATIVE is not None else ""


def _native_rows(a) -> bool:
    return type(a) is np.ndarray and a.dtype.char in _NATIVE_ROWS


def _compute_dtype(dtype: np.dtype) -> np.dtype:
    return F32 if is_half(dtype) else dtype


def _compact(a: np.ndarray) -> np.ndarray:
    """Undo broadcasting: size-1 views of stride-0 dims (numpy broadcasts them back)."""
    if 0 not in a.strides or a.size == 0:
        return a
    index = tuple(slice(0, 1) if st == 0 and n > 1 else slice(None)
                  for n, st in zip(a.shape, a.strides, strict=True))  # fmt: skip
    return a[index]


def _reshape_view(a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``a`` reshaped without a copy; ValueError when its strides do not allow it."""
    try:
        return a.reshape(shape, copy=False)
    except TypeError:  # numpy < 2.1 has no ``copy=``
        r = a.reshape(shape)
        if a.size and not np.may_share_memory(r, a):
            raise ValueError("reshape needs a copy") from None
        return r


def _sum_of_squares(a: np.ndarray) -> np.ndarray:
    """Σ a² over the last dim, without an (a * a) temporary."""
    if hasattr(np, "vecdot"):  # numpy >= 2.0
        return np.vecdot(a, a)
    return np.einsum("...i,...i->...", a, a)


def _blocks(x: np.ndarray, out: np.ndarray, dim: int):
    """Blocks (x block, out block, axis) of about ``_BLOCK`` elements, each holding whole
    lines along ``dim``, which is ``axis`` of the block. ``out`` is C-contiguous, ``x``'s shape.

    x is viewed as (P, D, Q) (D along ``dim``): blocks are rows (p, D) when Q = 1, else
    (p, D, Q) slabs. When x's strides do not allow that view, x is one block.
    """
    d = x.shape[dim]
    p = math.prod(x.shape[:dim])
    q = math.prod(x.shape[dim + 1 :])
    try:
        x3 = _reshape_view(x, (p, d, q))
    except ValueError:
        yield x, out, dim
        return
    o3 = out.reshape(p, d, q)
    if q == 1:
        x2, o2 = x3[..., 0], o3[..., 0]
        step = max(1, _BLOCK // max(1, d))
        for r in range(0, p, step):
            yield x2[r : r + step], o2[r : r + step], 1
        return
    # Whole (D, Q) planes: narrower column slabs of a big plane touch a page per line and
    # measured slower than streaming the plane.
    step = max(1, _BLOCK // max(1, d * q))
    for i in range(0, p, step):
        yield x3[i : i + step], o3[i : i + step], 1


def _softmax_lines(x: np.ndarray, out: np.ndarray, axis: int, zero_empty: bool = False) -> None:
    """``out = softmax(x)`` along ``axis`` (``out`` may be ``x``)."""
    m = x.max(axis=axis, keepdims=True)
    if zero_empty:  # lines that are all -inf (fully masked) give 0, as torch's attention
        m[np.isneginf(m)] = 0.0
    np.subtract(x, m, out=out)
    np.exp(out, out=out)
    s = out.sum(axis=axis, keepdims=True)
    if zero_empty:
        s[s == 0.0] = 1.0
    np.reciprocal(s, out=s)  # one division per line, then a (faster) multiply
    np.multiply(out, s, out=out)


def _log_softmax_lines(x: np.ndarray, out: np.ndarray, axis: int) -> None:
    """``out = x - max - log(sum(exp(x - max)))`` along ``axis`` (``out`` is not ``x``)."""
    m = x.max(axis=axis, keepdims=True)
    np.subtract(x, m, out=out)
    np.exp(out, out=out)
    s = out.sum(axis=axis, keepdims=True)
    np.log(s, out=s)
    s += m
    np.subtract(x, s, out=out)


def _normalize_rows(x: np.ndarray, out: np.ndarray, eps: float, center: bool):
    """``out = (x - mean) * rstd`` over the last dim; returns (mean or None, rstd), (rows, 1).

    Two passes (mean, then the centred sum of squares) for a stable variance.
    """
    n = x.shape[-1]
    mean = None
    if center:
        mean = x.mean(axis=-1, keepdims=True)
        np.subtract(x, mean, out=out)
        src = out
    else:
        src = x
    rstd = _sum_of_squares(src)[..., None]
    rstd *= 1.0 / n if n else np.nan
    rstd += eps
    np.sqrt(rstd, out=rstd)
    np.reciprocal(rstd, out=rstd)
    np.multiply(src, rstd, out=out)
    return mean, rstd


class FusedOps:
    __slots__ = ()

    # -- softmax ------------------------------------------------------------------------
    def softmax(self, layout, dim: int):
        """exp(x - max) / Σ exp(x - max) along ``dim``; a line of all -inf gives NaN."""
        if _native_rows(self.array):
            return self._native_softmax(layout, dim, False)
        return type(self)(self._along(layout, dim, _softmax_lines))

    def log_softmax(self, layout, dim: int):
        """x - max - log Σ exp(x - max) along ``dim``."""
        if _native_rows(self.array):
            return self._native_softmax(layout, dim, True)
        return type(self)(self._along(layout, dim, _log_softmax_lines))

    def _native_softmax(self, layout, dim: int, log: bool):
        out = np.empty(layout.shape, self.array.dtype)
        NATIVE.softmax(self.array, layout.offset, layout.shape, layout.strides, dim, out, log)
        return type(self)(out)

    def softmax_backward(self, layout, grad, grad_layout, dim: int, log: bool = False):
        """The input gradient of (log_)softmax along ``dim`` from its output y (``self``) and
        the output gradient g (``grad``, y's shape):

            softmax: gx = y (g − Σ g y),    log_softmax: gx = g − exp(y) Σ g,

        in one pass per line by the native kernel; None where it does not take the operands
        (no extension, f64, g of another dtype): the op layer then composes it from ops."""
        y, g = self.array, grad.array
        if not (_native_rows(y) and type(g) is np.ndarray and g.dtype is y.dtype):
            return None
        out = np.empty(layout.shape, y.dtype)
        args = (layout.offset, layout.shape, layout.strides, g, grad_layout.offset)
        NATIVE.softmax_backward(y, *args, grad_layout.strides, dim, out, bool(log))
        return type(self)(out)

    def norm_backward(self, layout, grad, grad_layout, weight, weight_layout, mean, rstd):
        """The input gradient of layer_norm (``mean`` given) or rms_norm (``mean`` None) over
        the last dim, from x (``self``), the output gradient g and the forward's statistics
        (storages of the leading shape). With x̂ = (x − mean) rstd and ĝ = g w:

            layer_norm: gx = rstd (ĝ − mean(ĝ) − x̂ mean(ĝ x̂)),
            rms_norm:   gx = rstd (ĝ − x̂ mean(ĝ x̂)),

        in one pass per row by the native kernel; None where it does not take the operands
        (no extension, f64, mixed dtypes): the op layer then composes it from ops."""
        x = self.array
        stats = (rstd.array,) if mean is None else (rstd.array, mean.array)
        if not (
            _native_rows(x)
            and _same_dtype(self, grad, weight)
            and all(type(a) is np.ndarray and a.dtype == F32 for a in stats)
        ):
            return None
        out = np.empty(layout.shape, x.dtype)
        NATIVE.norm_backward(x, layout.offset, layout.shape, layout.strides, grad.array,
                             grad_layout.offset, grad_layout.strides,
                             *_operand_args(weight, weight_layout),
                             None if mean is None else np.ascontiguousarray(mean.array),
                             np.ascontiguousarray(rstd.array), out)  # fmt: skip
        return type(self)(out)

    def _along(self, layout, dim: int, kernel) -> np.ndarray:
        x = view(self.array, layout)
        out = np.empty(x.shape, x.dtype)
        if out.size == 0:
            return out
        half = is_half(x.dtype)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            for xb, ob, axis in _blocks(x, out, dim):
                if half:
                    scratch = np.empty(ob.shape, F32)
                    kernel(xb.astype(F32), scratch, axis)
                    ob[...] = scratch
                else:
                    kernel(xb, ob, axis)
        return out

    # -- normalisation ------------------------------------------------------------------
    def layer_norm(self, layout, weight, weight_layout, bias, bias_layout, eps: float):
        """(x - mean) · rstd · w + b over the LAST dim; rstd = 1/sqrt(var + eps).

        ``weight``/``bias`` are storages (or None) with 1-d layouts of the last dim's size.
        Returns (out, mean, rstd); mean and rstd have the leading shape, compute dtype.
        """
        if self._native_norm(layout, weight, bias):
            args = (weight, weight_layout, bias, bias_layout)
            return self._native_normalize(layout, eps, True, *args)
        w = None if weight is None else view(weight.array, weight_layout)
        b = None if bias is None else view(bias.array, bias_layout)
        out, mean, rstd = self._normalize(layout, eps, True, w, b)
        return type(self)(out), type(self)(mean), type(self)(rstd)

    def rms_norm(self, layout, weight, weight_layout, eps: float):
        """x · rstd · w over the LAST dim; rstd = 1/sqrt(mean(x²) + eps). Returns (out, rstd)."""
        if self._native_norm(layout, weight, None):
            out, _, rstd = self._native_normalize(layout, eps, False, weight, weight_layout)
            return out, rstd
        w = None if weight is None else view(weight.array, weight_layout)
        out, _, rstd = self._normalize(layout, eps, False, w, None)
        return type(self)(out), type(self)(rstd)

    def _native_norm(self, layout, weight, bias) -> bool:
        shape = layout.shape
        return (
            _native_rows(self.array)
            and len(shape) > 0
            and math.prod(shape) > 0
            and _same_dtype(self, weight, bias)
        )

    def _native_normalize(self, layout, eps, center, weight, weight_layout, bias=None,
                          bias_layout=None):  # fmt: skip
        """(out, mean or None, rstd) by the native kernel: layer_norm when ``center``, else
        rms_norm; mean and rstd in f32."""
        out = np.empty(layout.shape, self.array.dtype)
        lead = layout.shape[:-1]
        mean = np.empty(lead, F32) if center else None
        rstd = np.empty(lead, F32)
        w, b = _operand_args(weight, weight_layout), _operand_args(bias, bias_layout)
        NATIVE.norm(self.array, layout.offset, layout.shape, layout.strides, *w, *b, eps, out,
                    mean, rstd)  # fmt: skip
        wrap = type(self)
        return wrap(out), None if mean is None else wrap(mean), wrap(rstd)

    def _normalize(self, layout, eps, center, w, b):
        x = view(self.array, layout)
        cdt = _compute_dtype(x.dtype)
        out = np.empty(x.shape, x.dtype)
        lead = x.shape[:-1]
        mean_all = np.empty(lead, cdt) if center else None
        rstd_all = np.empty(lead, cdt)
        if w is not None:
            w = w.astype(cdt, copy=False)
        if b is not None:
            b = b.astype(cdt, copy=False)
        half = is_half(x.dtype)
        mean_rows = None if mean_all is None else mean_all.reshape(-1)
        rstd_rows = rstd_all.reshape(-1)
        r = 0
        with np.errstate(invalid="ignore", divide="ignore"):
            for xb, ob, _ in _blocks(x, out, x.ndim - 1):
                if half:
                    xb = xb.astype(F32)
                    target, ob = ob, np.empty(ob.shape, F32)
                mean, rstd = _normalize_rows(xb, ob, eps, center)
                if w is not None:
                    ob *= w
                if b is not None:
                    ob += b
                if half:
                    target[...] = ob
                k = rstd.size
                if mean_rows is not None:
                    mean_rows[r : r + k] = mean.reshape(-1)
                rstd_rows[r : r + k] = rstd.reshape(-1)
                r += k
        return out, mean_all, rstd_all

    def group_norm(self, layout, num_groups: int, weight, weight_layout, bias, bias_layout,
                   eps: float):  # fmt: skip
        """GroupNorm of x (N, C, S): statistics over each group of C/G channels and all of S,
        then a per-channel affine. Returns (out (N, C, S), mean (N, G), rstd (N, G))."""
        if _native_float(self, weight, bias) and math.prod(layout.shape) > 0:
            return self._native_group_norm(layout, num_groups, weight, weight_layout, bias,
                                           bias_layout, eps)  # fmt: skip
        x = view(self.array, layout)
        n, c, s = x.shape
        g = num_groups
        cdt = _compute_dtype(x.dtype)
        out = np.empty(x.shape, x.dtype)
        mean = np.empty((n, g), cdt)
        rstd = np.empty((n, g), cdt)
        w = None if weight is None else view(weight.array, weight_layout).astype(cdt, copy=False)
        b = None if bias is None else view(bias.array, bias_layout).astype(cdt, copy=False)
        w = None if w is None else w.reshape(g, c // g, 1)
        b = None if b is None else b.reshape(g, c // g, 1)
        half = is_half(x.dtype)
        step = max(1, _BLOCK // max(1, c * s))
        with np.errstate(invalid="ignore", divide="ignore"):
            for i in range(0, n, step):
                xb = x[i : i + step].astype(cdt, copy=False)
                nb = xb.shape[0]
                rows = xb.reshape(nb, g, (c // g) * s)  # a copy only if x was strided
                target = out[i : i + step].reshape(rows.shape)
                ob = np.empty(rows.shape, cdt) if half else target
                mb, rb = _normalize_rows(rows, ob, eps, True)
                mean[i : i + step] = mb[..., 0]
                rstd[i : i + step] = rb[..., 0]
                ob4 = ob.reshape(nb, g, c // g, s)
                if w is not None:
                    ob4 *= w
                if b is not None:
                    ob4 += b
                if half:
                    target[...] = ob
        return type(self)(out), type(self)(mean), type(self)(rstd)

    def _native_group_norm(self, layout, num_groups, weight, weight_layout, bias, bias_layout,
                           eps):  # fmt: skip
        n = layout.shape[0]
        cdt = _compute_dtype(self.array.dtype)
        out = np.empty(layout.shape, self.array.dtype)
        mean = np.empty((n, num_groups), cdt)
        rstd = np.empty((n, num_groups), cdt)
        NATIVE.group_norm(self.array, layout.offset, layout.shape, layout.strides, num_groups,
                          *_operand_args(weight, weight_layout), *_operand_args(bias, bias_layout),
                          eps, out, mean, rstd)  # fmt: skip
        wrap = type(self)
        return wrap(out), wrap(mean), wrap(rstd)

    # -- rotary embeddings --------------------------------------------------------------
    def rope(self, layout, cos, cos_layout, sin, sin_layout, interleaved: bool):
        """Rotate pairs of x (..., T, D) by angles with cos/sin (..., T, D/2) (broadcast).

        Pairs are (x[i], x[i + D/2]) (half split, GPT-NeoX/Llama) or (x[2i], x[2i+1])
        (interleaved, GPT-J): out = (x1 cos − x2 sin, x2 cos + x1 sin).
        """
        if _native_float(self, cos, sin):
            out = np.empty(layout.shape, self.array.dtype)
            NATIVE.rope(self.array, layout.offset, layout.shape, layout.strides, cos.array,
                        cos_layout.offset, cos_layout.strides, sin.array, sin_layout.offset,
                        sin_layout.strides, bool(interleaved), out)  # fmt: skip
            return type(self)(out)
        x = view(self.array, layout)
        dtype = x.dtype
        cdt = _compute_dtype(dtype)
        c = _compact(view(cos.array, cos_layout)).astype(cdt, copy=False)
        s = _compact(view(sin.array, sin_layout)).astype(cdt, copy=False)
        x = x.astype(cdt, copy=False)
        out = np.empty(x.shape, cdt)
        h = x.shape[-1] // 2
        if interleaved:
            x1, x2, o1, o2 = x[..., 0::2], x[..., 1::2], out[..., 0::2], out[..., 1::2]
        else:
            x1, x2, o1, o2 = x[..., :h], x[..., h:], out[..., :h], out[..., h:]
        tmp = np.empty(o1.shape, cdt)
        np.multiply(x1, c, out=o1)
        np.multiply(x2, s, out=tmp)
        np.subtract(o1, tmp, out=o1)
        np.multiply(x2, c, out=o2)
        np.multiply(x1, s, out=tmp)
        np.add(o2, tmp, out=o2)
        return type(self)(out if cdt == dtype else out.astype(dtype))

    # -- attention ----------------------------------------------------------------------
    def scaled_dot_product_attention(self, q_layout, k, k_layout, v, v_layout, mask,
                                     mask_layout, is_causal: bool, scale: float):  # fmt: skip
        """softmax(q kᵀ · scale + mask) v with q (*B, L, E), k (*B, S, E), v (*B, S, Ev).

        Batch dims are already broadcast to one shape ``*B``; ``mask`` (or None) is bool
        (True = keep) or float (added), broadcast to (*B, L, S). ``is_causal`` keeps j ≤ i
        (top-left aligned). Rows with every score masked give zeros (as PyTorch).
        Returns (out (*B, L, Ev), probabilities (*B, L, S) in the compute dtype). The native
        kernel never forms the (L, S) scores; it saves lse = log Σ_j exp(z_j) per query, and
        the probabilities exp(z - lse) are computed only if something reads them (the
        backward pass).
        """
        args = (q_layout, k, k_layout, v, v_layout, mask, mask_layout, is_causal, scale)
        if not _native_attention(self, k, v, mask):
            out, probs = self._attention_numpy(*args)
            return type(self)(out), type(self)(probs)
        dtype = self.array.dtype
        out = np.empty((*q_layout.shape[:-1], v_layout.shape[-1]), dtype)
        lse = np.empty(q_layout.shape[:-1], _compute_dtype(dtype))
        m = _operand_args(mask, mask_layout)
        NATIVE.attention(self.array, q_layout.offset, q_layout.shape, q_layout.strides,
                         k.array, k_layout.offset, k_layout.shape, k_layout.strides,
                         v.array, v_layout.offset, v_layout.shape, v_layout.strides,
                         *m, bool(is_causal), float(scale), out, lse)  # fmt: skip
        score_args = (q_layout, k, k_layout, mask, mask_layout, is_causal, scale)
        probs = _deferred_class(type(self))(lambda: self._probabilities(*score_args, lse))
        return type(self)(out), probs

    def _attention_scores(self, q_layout, k, k_layout, mask, mask_layout, is_causal, scale):
        """Z = q kᵀ · scale (+ mask; -inf where a bool mask or causality excludes) in the
        compute dtype, C-contiguous; batch dims that every operand broadcasts stay size 1."""
        q = _compact(view(self.array, q_layout))
        cdt = _compute_dtype(q.dtype)
        q = np.multiply(q, scale, dtype=cdt)  # scaling q (L×E) is cheaper than scores (L×S)
        kk = _compact(view(k.array, k_layout)).astype(cdt, copy=False)
        batch = q_layout.shape[:-2]
        length, source = q_layout.shape[-2], k_layout.shape[-2]
        scores = np.matmul(q, np.swapaxes(kk, -1, -2))
        m = None if mask is None else _compact(view(mask.array, mask_layout))
        if m is not None and m.ndim and np.broadcast_shapes(scores.shape, m.shape) != scores.shape:
            scores = np.ascontiguousarray(np.broadcast_to(scores, (*batch, length, source)))
        if is_causal:
            above = ~np.tri(length, source, dtype=np.bool_)
            np.copyto(scores, -np.inf, where=above)
        if m is not None:
            if m.dtype == np.bool_:
                np.copyto(scores, -np.inf, where=~m)
            else:
                np.add(scores, m.astype(cdt, copy=False), out=scores)
        return scores

    def _probabilities(self, q_layout, k, k_layout, mask, mask_layout, is_causal, scale, lse):
        """P = exp(Z - lse) (*B, L, S) from the log-normaliser ``lse`` (*B, L) that the native
        forward saved: one product and one exp, no max or sum pass. A fully masked query
        (lse = -inf) gets a row of zeros, as the forward gave it."""
        scores = self._attention_scores(q_layout, k, k_layout, mask, mask_layout, is_causal, scale)
        shift = np.where(np.isneginf(lse), np.inf, lse)[..., None]  # -inf - inf = -inf: exp 0
        probs = np.empty((*lse.shape, scores.shape[-1]), scores.dtype)
        with np.errstate(invalid="ignore", over="ignore"):
            np.subtract(scores, shift, out=probs)
            np.exp(probs, out=probs)
        return probs

    def _attention_numpy(self, q_layout, k, k_layout, v, v_layout, mask, mask_layout,
                         is_causal, scale):  # fmt: skip
        """(out, probabilities) as C-contiguous arrays, by matmul - softmax - matmul."""
        scores = self._attention_scores(q_layout, k, k_layout, mask, mask_layout, is_causal, scale)
        dtype = self.array.dtype
        vv = _compact(view(v.array, v_layout)).astype(scores.dtype, copy=False)
        batch = q_layout.shape[:-2]
        length, source = q_layout.shape[-2], k_layout.shape[-2]
        if scores.size:
            with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
                for sb, _, axis in _blocks(scores, scores, scores.ndim - 1):
                    _softmax_lines(sb, sb, axis, zero_empty=True)
        out = np.matmul(scores, vv)
        out_shape = (*batch, length, vv.shape[-1])
        if out.shape != out_shape:
            out = np.broadcast_to(out, out_shape)
        if scores.shape != (*batch, length, source):
            scores = np.broadcast_to(scores, (*batch, length, source))
        return np.ascontiguousarray(out, dtype=dtype), np.ascontiguousarray(scores)


def _native_float(x, *others) -> bool:
    """x's array is of a dtype the native group_norm / rope / attention kernels take, and the
    other storages (None or not) share it."""
    a = x.array
    return type(a) is np.ndarray and a.dtype.char in _NATIVE_FLOAT and _same_dtype(x, *others)


def _same_dtype(x, *others) -> bool:
    """Every storage of ``others`` is None or has x's dtype."""
    dtype = x.array.dtype
    return all(o is None or o.array.dtype is dtype for o in others)


def _operand_args(storage, layout) -> tuple:
    """(array, offset, strides) of an optional operand, as the native kernels take it."""
    return (None, 0, ()) if storage is None else (storage.array, layout.offset, layout.strides)


def _native_attention(q, k, v, mask) -> bool:
    """The native kernel takes q, k, v of one float dtype and a bool or same-dtype mask."""
    return _native_float(q, k, v) and (
        mask is None or mask.array.dtype in (np.bool_, q.array.dtype)
    )


@functools.cache
def _deferred_class(storage_type: type) -> type:
    """A ``storage_type`` whose array is computed on first access (attention probabilities are
    (*B, L, S), and only the backward pass reads them). Until then the array slot holds the
    function that computes it; on first access the object becomes a plain ``storage_type``."""
    slot = storage_type.array  # the base class's slot, shadowed by the property below

    class Deferred(storage_type):
        __slots__ = ()  # the same layout as storage_type, so __class__ can be switched back

        def __init__(self, compute) -> None:
            slot.__set__(self, compute)
            self.version = 0
            self._owned_bytes = 0

        @property
        def array(self) -> np.ndarray:
            array = slot.__get__(self)()
            self.__class__ = storage_type
            storage_type.__init__(self, array)  # counted as owned from now on
            return array

    Deferred.__name__ = Deferred.__qualname__ = f"Deferred{storage_type.__name__}"
    return Deferred
