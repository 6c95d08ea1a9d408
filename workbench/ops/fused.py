"""Fused ops: softmax, log-softmax, layer/RMS/group norm, rotary embeddings and scaled
dot-product attention.

Each forward is ONE backend call (so a device can run it as a single kernel); softmax hands
its ``dim`` to the backend as is, so no transpose or copy is needed. Unlike candle,
every one has a backward pass, built from ordinary ops so it runs on any device. The norms get
their per-row statistics (mean, rstd) back from the forward and reuse them; attention reuses
its probabilities. f16/bf16 statistics, probabilities and gradients are computed in f32.
Where a device has the optional one-pass kernels (``softmax_backward``, ``norm_backward``),
the (log-)softmax and layer/RMS norm input gradients use them instead of several ops; a kernel
returns None for operands it does not take (on the CPU: f64, or no native extension), and the
ops run instead. These ops are the one implementation of that maths for every other case.
"""

from __future__ import annotations

import math

from .. import dtype as dt
from .._oprecord import op
from ..autograd import record
from ..backends.base import supports
from ..errors import DTypeError, ShapeError, WorkbenchError
from ..layout import Layout
from ..tensor import Tensor
from ._helpers import broadcast_shapes, cast, describe, new, norm_dim, same_device, sum_to_shape
from .creation import zeros_like
from .shape import contiguous


def _float_input(name: str, x: Tensor) -> None:
    if not x.dtype.is_floating_point:
        raise DTypeError(f"{name}: expected a floating point tensor, found {describe(x)}")


def _compute_dtype(dtype: dt.DType) -> dt.DType:
    """The dtype statistics and gradients are computed in: f32 for f16/bf16."""
    return dt.f32 if dtype.itemsize < 4 else dtype


def _layout_as(x: Tensor, shape: tuple[int, ...]) -> tuple[Tensor, Layout]:
    """``x`` and a view layout of it with ``shape`` (``x`` is copied first if it must be)."""
    layout = x._layout.reshape(shape)
    if layout is None:
        x = contiguous(x)
        layout = x._layout.reshape(shape)
    return x, layout


def _affine_operand(name: str, what: str, t: Tensor | None, shape: tuple[int, ...], x: Tensor):
    """A norm's weight or bias: checked against ``shape`` and cast to x's dtype."""
    if t is None:
        return None, None
    same_device(name, x, t)
    if not t.dtype.is_floating_point:
        raise DTypeError(f"{name}: {what} must be floating point, found {describe(t)}")
    if t.shape != shape:
        raise ShapeError(f"{name}: {what} must have shape {shape}, found {describe(t)}")
    t = cast(t, x.dtype)
    t, layout = _layout_as(t, (math.prod(shape),))
    return t, layout


def trailing_dims(name: str, x: Tensor, normalized_shape: int | tuple[int, ...]) -> tuple[int, ...]:
    """``normalized_shape`` as a tuple, checked to be the trailing dims of ``x`` (the norms)."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    k = len(shape)
    if k == 0 or k > x.ndim or x.shape[x.ndim - k :] != shape:
        raise ShapeError(
            f"{name}: normalized_shape {shape} must be the trailing dims of the input, "
            f"found {describe(x)}"
        )
    return shape


def _storage_of(t: Tensor | None):
    return None if t is None else t._storage


def _norm_grad(gxhat: Tensor, xhat: Tensor, rstd: Tensor, dims, center: bool) -> Tensor:
    """dL/dx for x̂ = (x − μ)·rstd (``center``) or x̂ = x·rstd, over ``dims``:

    rstd · (ĝ − mean(ĝ) − x̂ · mean(ĝ ⊙ x̂)), without the mean(ĝ) term when not centred.
    """
    inner = gxhat - xhat * (gxhat * xhat).mean(dims, keepdim=True)
    if center:
        inner = inner - gxhat.mean(dims, keepdim=True)
    return inner * rstd


def _fused_norm_grad(x, layout, g, w, w_layout, mean, rstd) -> Tensor | None:
    """dL/dx of layer_norm (``mean`` given) or rms_norm over the last dim of ``layout`` in one
    backend pass from the forward's statistic storages, or None where the device has none or
    its kernel does not take these operands."""
    if not supports(x._storage, "norm_backward") or g.dtype != x.dtype:
        return None
    g, g_layout = _layout_as(g, layout.shape)
    gx = x._storage.norm_backward(
        layout, g._storage, g_layout, _storage_of(w), w_layout, mean, rstd
    )
    return None if gx is None else new(gx, g.shape, x.dtype, x.device)


def _grad_to(g: Tensor | None, t: Tensor) -> Tensor | None:
    return None if g is None else cast(g, t.dtype)


# -- softmax --------------------------------------------------------------------------------
def _along(method: str, x: Tensor, dim: int) -> Tensor:
    """The backend's ``method`` along ``dim`` (a 0-d tensor is run as shape (1,))."""
    layout = x._layout if x.ndim else x._layout.reshape((1,))
    return new(getattr(x._storage, method)(layout, dim), x.shape, x.dtype, x.device)


def _softmax_grad(y: Tensor, g: Tensor, dim: int, log: bool) -> Tensor | None:
    """dL/dx of (log_)softmax in one backend pass, or None where the device has no such pass
    or its kernel does not take these operands."""
    if not supports(y._storage, "softmax_backward") or g.dtype != y.dtype:
        return None
    gx = y._storage.softmax_backward(y._layout, g._storage, g._layout, dim, log)
    return None if gx is None else new(gx, y.shape, y.dtype, y.device)


@op
def softmax(x: Tensor, dim: int = -1) -> Tensor:
    """softmax(x)ᵢ = exp(xᵢ − max x) / Σⱼ exp(xⱼ − max x) along ``dim``.

    A row that is all −inf gives NaN (as PyTorch). Gradient: y ⊙ (g − Σ g ⊙ y).
    """
    _float_input("softmax", x)
    dim = norm_dim(dim, x.ndim, "softmax")
    out = _along("softmax", x, dim)
    y = out.detach()  # not ``out``: see ``autograd.record``

    def backward(g: Tensor):
        if x.ndim == 0:  # softmax of a scalar is the constant 1
            return (g * 0.0,)
        fused = _softmax_grad(y, g, dim, log=False)
        return (y * (g - (g * y).sum(dim, keepdim=True)) if fused is None else fused,)

    return record(out, "softmax", (x,), backward, saved=(y,))


@op
def log_softmax(x: Tensor, dim: int = -1) -> Tensor:
    """log softmax(x) = x − max x − log Σ exp(x − max x) along ``dim``.

    Gradient: g − softmax(x) · Σ g.
    """
    _float_input("log_softmax", x)
    dim = norm_dim(dim, x.ndim, "log_softmax")
    out = _along("log_softmax", x, dim)
    y = out.detach()  # not ``out``: see ``autograd.record``

    def backward(g: Tensor):
        if x.ndim == 0:  # log_softmax of a scalar is the constant 0
            return (g * 0.0,)
        fused = _softmax_grad(y, g, dim, log=True)
        return (g - y.exp() * g.sum(dim, keepdim=True) if fused is None else fused,)

    return record(out, "log_softmax", (x,), backward, saved=(y,))


# -- normalisation ---------------------------------------------------------------------------
@op
def layer_norm(
    x: Tensor,
    normalized_shape,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    """Layer normalisation over the trailing dims ``normalized_shape`` (PyTorch's):

    y = (x − E[x]) / sqrt(Var[x] + eps) · weight + bias, with the biased variance.
    x: (*, *normalized_shape); weight, bias: normalized_shape (or None).
    """
    name = "layer_norm"
    _float_input(name, x)
    shape = trailing_dims(name, x, normalized_shape)
    k = len(shape)
    lead = x.shape[: x.ndim - k]
    x, layout = _layout_as(x, (*lead, math.prod(shape)))
    w, w_layout = _affine_operand(name, "weight", weight, shape, x)
    b, b_layout = _affine_operand(name, "bias", bias, shape, x)
    out_s, mean_s, rstd_s = x._storage.layer_norm(
        layout, _storage_of(w), w_layout, _storage_of(b), b_layout, float(eps)
    )
    out = new(out_s, x.shape, x.dtype, x.device)
    cdt = _compute_dtype(x.dtype)
    stat_shape = (*lead, *(1,) * k)
    mean = new(mean_s, stat_shape, cdt, x.device)
    rstd = new(rstd_s, stat_shape, cdt, x.device)
    dims = tuple(range(len(lead), x.ndim))
    lead_dims = tuple(range(len(lead)))

    def backward(g_out: Tensor):
        gw = gb = None
        gx = (
            _fused_norm_grad(x, layout, g_out, w, w_layout, mean_s, rstd_s)
            if x.requires_grad
            else None
        )
        w_grad = w is not None and w.requires_grad
        b_grad = b is not None and b.requires_grad
        composite = x.requires_grad and gx is None
        # g in the compute dtype only for what reads it (a pass over g for f16/bf16)
        g = cast(g_out, cdt) if w_grad or b_grad or composite else None
        xhat = (cast(x, cdt) - mean) * rstd if w_grad or composite else None
        if composite:
            gxhat = g if w is None else g * cast(w, cdt).reshape(shape)
            gx = _norm_grad(gxhat, xhat, rstd, dims, center=True)
        if w_grad:
            gw = _sum_dims(g * xhat, lead_dims).reshape(w.shape)
        if b_grad:
            gb = _sum_dims(g, lead_dims).reshape(b.shape)
        return _grad_to(gx, x), _grad_to(gw, w), _grad_to(gb, b)

    return record(out, name, (x, w, b), backward, saved=(x,) if w is None else (x, w))


def _sum_dims(t: Tensor, dims: tuple[int, ...]) -> Tensor:
    return t.sum(dims) if dims else t


@op
def rms_norm(x: Tensor, weight: Tensor | None = None, eps: float = 1e-6) -> Tensor:
    """RMS normalisation over the last dim (Llama's RMSNorm, candle's ``rms_norm``):

    y = x / sqrt(mean(x²) + eps) · weight. x: (*, D); weight: (D,) or None.
    """
    name = "rms_norm"
    _float_input(name, x)
    if x.ndim == 0:
        raise ShapeError(f"{name}: expected at least 1 dim, found {describe(x)}")
    d = x.shape[-1]
    w, w_layout = _affine_operand(name, "weight", weight, (d,), x)
    out_s, rstd_s = x._storage.rms_norm(x._layout, _storage_of(w), w_layout, float(eps))
    out = new(out_s, x.shape, x.dtype, x.device)
    cdt = _compute_dtype(x.dtype)
    rstd = new(rstd_s, (*x.shape[:-1], 1), cdt, x.device)
    lead_dims = tuple(range(x.ndim - 1))

    def backward(g_out: Tensor):
        gw = None
        gx = (
            _fused_norm_grad(x, x._layout, g_out, w, w_layout, None, rstd_s)
            if x.requires_grad
            else None
        )
        w_grad = w is not None and w.requires_grad
        composite = x.requires_grad and gx is None
        # g in the compute dtype only for what reads it (a pass over g for f16/bf16)
        g = cast(g_out, cdt) if w_grad or composite else None
        xhat = cast(x, cdt) * rstd if w_grad or composite else None
        if composite:
            gxhat = g if w is None else g * cast(w, cdt)
            gx = _norm_grad(gxhat, xhat, rstd, -1, center=False)
        if w_grad:
            gw = _sum_dims(g * xhat, lead_dims)
        return _grad_to(gx, x), _grad_to(gw, w)

    return record(out, name, (x, w), backward, saved=(x,) if w is None else (x, w))


@op
def group_norm(
    x: Tensor,
    num_groups: int,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    """Group normalisation (PyTorch's): x (N, C, *) has its C channels split into
    ``num_groups`` groups; each (sample, group) is normalised over its channels and ``*``,
    then y = x̂ · weight[c] + bias[c]. weight, bias: (C,) or None.
    """
    name = "group_norm"
    _float_input(name, x)
    if x.ndim < 2:
        raise ShapeError(f"{name}: expected an input (N, C, *), found {describe(x)}")
    n, c = x.shape[:2]
    if not isinstance(num_groups, int) or num_groups <= 0 or c % num_groups:
        raise ShapeError(
            f"{name}: num_groups={num_groups} must be a positive divisor of the {c} channels "
            f"of {describe(x)}"
        )
    groups = num_groups
    s = math.prod(x.shape[2:])
    x, layout = _layout_as(x, (n, c, s))
    w, w_layout = _affine_operand(name, "weight", weight, (c,), x)
    b, b_layout = _affine_operand(name, "bias", bias, (c,), x)
    out_s, mean_s, rstd_s = x._storage.group_norm(
        layout, groups, _storage_of(w), w_layout, _storage_of(b), b_layout, float(eps)
    )
    out = new(out_s, x.shape, x.dtype, x.device)
    cdt = _compute_dtype(x.dtype)
    mean = new(mean_s, (n, groups, 1), cdt, x.device)
    rstd = new(rstd_s, (n, groups, 1), cdt, x.device)
    per_group = (c // groups) * s

    def backward(g: Tensor):
        g3 = cast(g, cdt).reshape((n, c, s))
        xhat = ((cast(x, cdt).reshape((n, groups, per_group)) - mean) * rstd).reshape((n, c, s))
        gx = gw = gb = None
        if x.requires_grad:
            gxhat = g3 if w is None else g3 * cast(w, cdt).reshape((1, c, 1))
            gx = _norm_grad(
                gxhat.reshape((n, groups, per_group)),
                xhat.reshape((n, groups, per_group)),
                rstd,
                -1,
                center=True,
            ).reshape(x.shape)
        if w is not None and w.requires_grad:
            gw = (g3 * xhat).sum((0, 2))
        if b is not None and b.requires_grad:
            gb = g3.sum((0, 2))
        return _grad_to(gx, x), _grad_to(gw, w), _grad_to(gb, b)

    return record(out, name, (x, w, b), backward, saved=(x,) if w is None else (x, w))


# -- rotary embeddings -----------------------------------------------------------------------
def _rope_table(what: str, t: Tensor, x: Tensor) -> Tensor:
    """cos or sin aligned with x (..., T, D): (T, D/2), (B, T, D/2) for a 4-d x (candle's
    layout), or any shape broadcastable to (..., T, D/2)."""
    same_device("rope", x, t)
    if not t.dtype.is_floating_point:
        raise DTypeError(f"rope: {what} must be floating point, found {describe(t)}")
    target = (*x.shape[:-1], x.shape[-1] // 2)
    aligned = t.unsqueeze(1) if t.ndim == 3 and x.ndim == 4 else t
    try:
        aligned._layout.broadcast_to(target)
    except ShapeError:
        raise ShapeError(
            f"rope: {what} {describe(t)} does not fit x {describe(x)}; expected (T, D/2) = "
            f"{target[-2:]}, (B, T, D/2) or a shape broadcastable to {target}"
        ) from None
    return cast(aligned, x.dtype)


def _zeros_if(t: Tensor) -> Tensor | None:
    return zeros_like(t) if t.requires_grad else None


def _pairs(t: Tensor, interleaved: bool) -> tuple[Tensor, Tensor]:
    """The two members of each rotated pair, as views: halves, or even/odd positions."""
    h = t.shape[-1] // 2
    if interleaved:
        p = t.reshape((*t.shape[:-1], h, 2))
        return p.narrow(-1, 0, 1).squeeze(-1), p.narrow(-1, 1, 1).squeeze(-1)
    return t.narrow(-1, 0, h), t.narrow(-1, h, h)


@op
def rope(x: Tensor, cos: Tensor, sin: Tensor, interleaved: bool = False) -> Tensor:
    """Rotary position embeddings: each pair (x₁, x₂) of x (B, H, T, D) is rotated by θ,

    out = (x₁ cos θ − x₂ sin θ, x₂ cos θ + x₁ sin θ), with cos, sin: (T, D/2), (B, T, D/2)
    or broadcastable to (B, H, T, D/2). Pairs are (x[i], x[i + D/2]) (GPT-NeoX / Llama,
    candle's ``rope``) or, with ``interleaved``, (x[2i], x[2i+1]) (GPT-J, candle's ``rope_i``).
    Gradients flow to x (a rotation by −θ) and to cos and sin.
    """
    _float_input("rope", x)
    if x.ndim < 2 or x.shape[-1] % 2:
        raise ShapeError(f"rope: expected x (..., T, D) with an even D, found {describe(x)}")
    cos = _rope_table("cos", cos, x)
    sin = _rope_table("sin", sin, x)
    target = (*x.shape[:-1], x.shape[-1] // 2)
    storage = x._storage.rope(
        x._layout,
        cos._storage,
        cos._layout.broadcast_to(target),
        sin._storage,
        sin._layout.broadcast_to(target),
        bool(interleaved),
    )
    out = new(storage, x.shape, x.dtype, x.device)

    def backward(g: Tensor):
        gx = gcos = gsin = None
        if x.requires_grad:
            gx = rope(g, cos, -sin, interleaved)
        if x.numel == 0:  # nothing to pair up (avoids views into empty buffers)
            return gx, _zeros_if(cos), _zeros_if(sin)
        if cos.requires_grad or sin.requires_grad:
            g1, g2 = _pairs(g, interleaved)
            x1, x2 = _pairs(x, interleaved)
            if cos.requires_grad:
                gcos = sum_to_shape(g1 * x1 + g2 * x2, cos.shape)
            if sin.requires_grad:
                gsin = sum_to_shape(g2 * x1 - g1 * x2, sin.shape)
        return gx, gcos, gsin

    return record(out, "rope", (x, cos, sin), backward, saved=(x, cos, sin))


# -- attention -------------------------------------------------------------------------------
@op
def scaled_dot_product_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    attn_mask: Tensor | None = None,
    is_causal: bool = False,
    scale: float | None = None,
    dropout_p: float = 0.0,
) -> Tensor:
    """softmax(q kᵀ · scale + mask) v, as PyTorch's ``F.scaled_dot_product_attention``.

    q: (..., L, E), k: (..., S, E), v: (..., S, Ev) -> (..., L, Ev); batch dims broadcast.
    ``attn_mask`` broadcasts to (..., L, S): bool (True = take part) or float (added to the
    scores). ``is_causal`` keeps key j for query i when j ≤ i (top-left aligned, as PyTorch).
    ``scale`` defaults to 1/√E. A query whose keys are all masked gives zeros (as PyTorch).
    Only ``dropout_p=0.0`` is supported. Gradients flow to q, k, v and a float mask.
    """
    name = "scaled_dot_product_attention"
    if dropout_p:
        raise WorkbenchError(
            f"{name}: dropout_p={dropout_p} is not supported, only 0.0; apply dropout "
            "outside the op (e.g. on its output) if you need it"
        )
    same_device(name, q, k, v)
    for what, t in (("q", q), ("k", k), ("v", v)):
        _float_input(name, t)
        if t.ndim < 2:
            raise ShapeError(f"{name}: {what} needs at least 2 dims, found {describe(t)}")
    if not (q.dtype is k.dtype is v.dtype):
        raise DTypeError(
            f"{name}: q, k and v must share one dtype, found {q.dtype}, {k.dtype}, {v.dtype}"
        )
    e = q.shape[-1]
    if k.shape[-1] != e:
        raise ShapeError(
            f"{name}: q and k need the same last dim (E), found q {describe(q)}, k {describe(k)}"
        )
    if v.shape[-2] != k.shape[-2]:
        raise ShapeError(
            f"{name}: k and v need the same sequence length (dim -2), found k {describe(k)}, "
            f"v {describe(v)}"
        )
    length, source, ev = q.shape[-2], k.shape[-2], v.shape[-1]
    mask = attn_mask
    batch_shapes = [q.shape[:-2], k.shape[:-2], v.shape[:-2]]
    if mask is not None:
        if is_causal:
            raise WorkbenchError(
                f"{name}: attn_mask and is_causal=True cannot be combined (as in PyTorch); "
                "fold the causal mask into attn_mask"
            )
        same_device(name, q, mask)
        if mask.dtype.is_floating_point:
            mask = cast(mask, q.dtype)
        elif not mask.dtype.is_bool:
            raise DTypeError(f"{name}: attn_mask must be bool or float, found {describe(mask)}")
        batch_shapes.append(mask.shape[:-2])
    batch = broadcast_shapes(name, *batch_shapes)
    mask_layout = None
    if mask is not None:
        try:
            mask_layout = mask._layout.broadcast_to((*batch, length, source))
        except ShapeError:
            raise ShapeError(
                f"{name}: attn_mask {describe(mask)} does not broadcast to (..., L, S) = "
                f"{(*batch, length, source)}"
            ) from None
    scale = 1.0 / math.sqrt(e) if scale is None else float(scale)
    out_s, probs_s = q._storage.scaled_dot_product_attention(
        q._layout.broadcast_to((*batch, length, e)),
        k._storage,
        k._layout.broadcast_to((*batch, source, e)),
        v._storage,
        v._layout.broadcast_to((*batch, source, ev)),
        None if mask is None else mask._storage,
        mask_layout,
        bool(is_causal),
        scale,
    )
    out = new(out_s, (*batch, length, ev), q.dtype, q.device)
    cdt = _compute_dtype(q.dtype)
    probs = new(probs_s, (*batch, length, source), cdt, q.device)

    float_mask = mask if mask is not None and mask.dtype.is_floating_point else None

    def backward(g: Tensor):
        # out = P v, P = softmax(Z), Z = q kᵀ · scale (+ mask): dZ/dmask = 1, so a float
        # mask's gradient is dZ summed over the dims it was broadcast along.
        g = cast(g, cdt)
        gq = gk = gv = gm = None
        if v.requires_grad:
            gv = sum_to_shape(probs.transpose(-1, -2) @ g, v.shape)
        mask_grad = float_mask is not None and float_mask.requires_grad
        if q.requires_grad or k.requires_grad or mask_grad:
            gp = g @ cast(v, cdt).transpose(-1, -2)
            gz = probs * (gp - (gp * probs).sum(-1, keepdim=True))
            if q.requires_grad:
                gq = sum_to_shape((gz @ cast(k, cdt)) * scale, q.shape)
            if k.requires_grad:
                gk = sum_to_shape((gz.transpose(-1, -2) @ cast(q, cdt)) * scale, k.shape)
            if mask_grad:
                gm = _grad_to(sum_to_shape(gz, float_mask.shape), float_mask)
        return _grad_to(gq, q), _grad_to(gk, k), _grad_to(gv, v), gm

    return record(out, name, (q, k, v, float_mask), backward, saved=(q, k, v))
