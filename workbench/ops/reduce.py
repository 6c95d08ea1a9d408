"""Reductions (with ``keepdim``), scans and sorting, with gradients."""

from __future__ import annotations

import math

from .. import dtype as dt
from .._oprecord import op
from ..autograd import no_grad, record
from ..backends.base import supports
from ..errors import ArgumentError, DimensionError, ShapeError
from ..layout import reduced_shape
from ..tensor import Tensor
from . import return_types
from ._helpers import describe, new, norm_dim, norm_dims
from .elementwise import (
    eq,
    exp,
    log,
    logical_and,
    logical_not,
    logical_or,
    maximum,
    minimum,
    ne,
    sqrt,
    to_dtype,
    where,
)
from .shape import cat


def _norm_dims(dims, ndim: int, op: str = "op") -> tuple[int, ...]:
    """``norm_dims`` after checking the kind: a float dim would otherwise pass the range check
    and fail deep in the backend."""
    ok = dims is None or isinstance(dims, int)
    if not ok and isinstance(dims, tuple | list):  # (``all`` is the reduction, here)
        ok = [type(d) for d in dims if not isinstance(d, int)] == []
    if not ok:
        raise ArgumentError(f"{op}: dim must be an int, a sequence of ints or None, found {dims!r}")
    return norm_dims(dims, ndim, op)


def _dim(dim, axis, op: str):
    """``dim``, or ``axis`` (NumPy's name, which PyTorch accepts too) when that is given."""
    if axis is None:
        return dim
    if dim is not None:
        raise ArgumentError(f"{op}: got dim={dim!r} and axis={axis!r}; give one of them")
    return axis


def _reduce(name: str, x: Tensor, dims, keepdim: bool, dtype: dt.DType) -> Tensor:
    shape = x.shape
    if x.ndim == 0:  # a scalar reduces to itself over its only (virtual) dim
        _norm_dims(dims, 1, name)
        return new(x._storage.reduce(name, x._layout, (), False, dtype.name), (), dtype, x.device)
    dims = _norm_dims(dims, x.ndim, name)
    storage = x._storage.reduce(name, x._layout, dims, keepdim, dtype.name)
    return new(storage, reduced_shape(shape, dims, keepdim), dtype, x.device)


def _fused(method: str, x: Tensor, dims: tuple[int, ...], keepdim: bool, *params) -> Tensor:
    """The storage's fused statistic ``method`` (mean, var, logsumexp) of x over normalised
    ``dims``, in x's dtype; no gradient recorded."""
    storage = getattr(x._storage, method)(x._layout, dims, keepdim, *params)
    return new(storage, reduced_shape(x.shape, dims, keepdim), x.dtype, x.device)


def _keep(g: Tensor, x: Tensor, dims, keepdim: bool) -> Tensor:
    """Reshape a reduced gradient so it broadcasts against ``x``."""
    if keepdim:
        return g
    dims = _norm_dims(dims, x.ndim)
    return g.reshape(tuple(1 if i in dims else s for i, s in enumerate(x.shape)))


def _sum_dtype(x: Tensor, dtype=None) -> dt.DType:
    """A sum's or product's dtype: ``dtype`` when given (x was cast to it: torch's ``dtype=``
    computes in it, so i8 wraps), else x's for floats and i64 for integers and bools."""
    if dtype is not None:
        return x.dtype
    return x.dtype if x.dtype.is_floating_point else dt.i64


@op
def sum(x: Tensor, dim=None, keepdim: bool = False, *, dtype=None, axis=None) -> Tensor:
    """Sum over ``dim`` (an int, a tuple, or None for all); ints and bools sum to i64;
    ``dtype`` casts the input first."""
    dim = _dim(dim, axis, "sum")
    if dtype is not None:
        x = to_dtype(x, dtype)
    out = _reduce("sum", x, dim, keepdim, _sum_dtype(x, dtype))
    return record(out, "sum", (x,), lambda g: (_keep(g, x, dim, keepdim).expand(x.shape),))


@op
def mean(x: Tensor, dim=None, keepdim: bool = False, *, dtype=None, axis=None) -> Tensor:
    dim = _dim(dim, axis, "mean")
    if dtype is not None:
        x = to_dtype(x, dtype)
    if not x.dtype.is_floating_point:
        x = to_dtype(x, dt.f32)
    dims = _norm_dims(dim, x.ndim, "mean")
    count = math.prod(x.shape[d] for d in dims)
    scale = 1.0 / count if count else math.nan
    if x.ndim and supports(x._storage, "mean"):  # one fused pass and one op: Σ x / N
        out = _fused("mean", x, dims, keepdim)
        return record(
            out, "mean", (x,), lambda g: (_keep(g, x, dims, keepdim).expand(x.shape) * scale,)
        )
    return sum(x, dims, keepdim) * scale


@op
def prod(x: Tensor, dim=None, keepdim: bool = False, *, dtype=None, axis=None) -> Tensor:
    dim = _dim(dim, axis, "prod")
    if dtype is not None:
        x = to_dtype(x, dtype)
    out = _reduce("prod", x, dim, keepdim, _sum_dtype(x, dtype))

    def backward(g: Tensor):
        dims = _norm_dims(dim, x.ndim)
        return (_keep(g, x, dim, keepdim) * _prod_of_others(x, dims),)

    return record(out, "prod", (x,), backward, saved=(x,))


def _prod_of_others(x: Tensor, dims: tuple[int, ...]) -> Tensor:
    """For each element, the product of the other elements of its reduction group.

    prod / x_i is wrong where x_i = 0, so count the zeros of each group: with none it is
    P / x_i (P the product of the non-zero elements); with one, P at the zero and 0 elsewhere;
    with more, 0 everywhere.
    """
    is_zero = eq(x, 0)
    nonzero = where(is_zero, 1.0, x)
    p = prod(nonzero, dims, keepdim=True)
    zeros = sum(is_zero, dims, keepdim=True)
    at_nonzero = where(eq(zeros, 0), p, 0.0) / nonzero
    at_zero = where(eq(zeros, 1), p, 0.0)
    return where(is_zero, at_zero, at_nonzero)


def _check_not_empty(name: str, x: Tensor, dims) -> None:
    if x.ndim == 0:
        return
    for d in _norm_dims(dims, x.ndim, name):
        if x.shape[d] == 0:
            raise DimensionError(
                f"{name}: cannot reduce over dim {d} of size 0 ({describe(x)}): "
                "the result has no identity"
            )


def _extremum(name: str, x: Tensor, dim, keepdim: bool) -> Tensor:
    _check_not_empty(name, x, dim)
    out = _reduce(name, x, dim, keepdim, x.dtype)
    value = out.detach()  # not ``out``: see ``record``

    def backward(g: Tensor):
        # The gradient is shared evenly between tied extrema, as PyTorch's amax/amin.
        hit = eq(x, _keep(value, x, dim, keepdim)).to_dtype(g.dtype)
        count = sum(hit, dim, keepdim=True)
        return (_keep(g, x, dim, keepdim) * hit / count,)

    return record(out, name, (x,), backward, saved=(x, value))


@op
def amax(x: Tensor, dim=None, keepdim: bool = False, *, axis=None) -> Tensor:
    """Largest value over ``dim`` (an int, a tuple, or None for all); the gradient is shared
    evenly between tied maxima."""
    return _extremum("max", x, _dim(dim, axis, "amax"), keepdim)


@op
def amin(x: Tensor, dim=None, keepdim: bool = False, *, axis=None) -> Tensor:
    return _extremum("min", x, _dim(dim, axis, "amin"), keepdim)


def _values_at(result: type, x: Tensor, indices: Tensor, dim: int, keepdim: bool):
    """``result(values, indices)`` with values = x at ``indices`` along ``dim`` (indices keep
    ``dim`` as size 1 and are squeezed unless ``keepdim``): the gradient goes to the chosen
    elements only, as PyTorch's."""
    if x.ndim == 0:
        return result(x.reshape(()), indices.reshape(()))
    values = x.gather(dim, indices)
    if not keepdim:
        values, indices = values.squeeze(dim), indices.squeeze(dim)
    return result(values, indices)


def _extremum_along(name: str, x: Tensor, dim, keepdim: bool, other, axis):
    """PyTorch's three ``max``: of everything, ``(values, indices)`` along one dim, or
    elementwise against a tensor."""
    if isinstance(dim, Tensor) or other is not None:
        return (maximum if name == "max" else minimum)(x, dim if other is None else other)
    dim = _dim(dim, axis, name)
    if dim is None:
        return _extremum(name, x, None, keepdim)
    if not isinstance(dim, int):
        raise ArgumentError(
            f"{name}: dim must be an int (use a{name} to reduce over several), found {dim!r}"
        )
    with no_grad():
        indices = _arg("arg" + name, x, dim, x.ndim > 0)
    return _values_at(getattr(return_types, name), x, indices, norm_dim(dim, x.ndim, name),
                      keepdim)  # fmt: skip


@op
def max(x: Tensor, dim=None, keepdim: bool = False, other=None, *, axis=None):
    """``x.max()``: the largest value; ``x.max(dim)``: ``(values, indices)`` along ``dim`` (a
    named tuple; the first index on ties); ``x.max(y)``: ``maximum(x, y)``. Use ``amax`` for
    several dims."""
    return _extremum_along("max", x, dim, keepdim, other, axis)


@op
def min(x: Tensor, dim=None, keepdim: bool = False, other=None, *, axis=None):
    """``x.min()``, ``x.min(dim)`` -> ``(values, indices)``, ``x.min(y)``: see ``max``."""
    return _extremum_along("min", x, dim, keepdim, other, axis)


def _arg(name: str, x: Tensor, dim, keepdim: bool) -> Tensor:
    _check_not_empty(name, x, dim)
    if dim is None or x.ndim == 0:
        if dim is not None:
            norm_dim(dim, 0, name)
        flat = x.reshape((-1,))
        out = _reduce(name, flat, 0, False, dt.i64)
        return out.reshape((1,) * x.ndim) if keepdim else out
    return _reduce(name, x, norm_dim(dim, x.ndim, name), keepdim, dt.i64)


@op
def argmax(x: Tensor, dim: int | None = None, keepdim: bool = False, *, axis=None) -> Tensor:
    """Index of the largest value (the first one on ties)."""
    return _arg("argmax", x, _dim(dim, axis, "argmax"), keepdim)


@op
def argmin(x: Tensor, dim: int | None = None, keepdim: bool = False, *, axis=None) -> Tensor:
    return _arg("argmin", x, _dim(dim, axis, "argmin"), keepdim)


@op
def any(x: Tensor, dim=None, keepdim: bool = False, *, axis=None) -> Tensor:
    return _reduce("any", x, _dim(dim, axis, "any"), keepdim, dt.bool_)


@op
def all(x: Tensor, dim=None, keepdim: bool = False, *, axis=None) -> Tensor:
    return _reduce("all", x, _dim(dim, axis, "all"), keepdim, dt.bool_)


def _correction(correction, unbiased: bool | None) -> int:
    """PyTorch's older ``unbiased=False`` is ``correction=0``."""
    return correction if unbiased is None else int(bool(unbiased))


@op
def var(x: Tensor, dim=None, keepdim: bool = False, correction: int = 1, *,
        unbiased: bool | None = None, axis=None) -> Tensor:  # fmt: skip
    """Σ (x - mean)² / (N - correction); ``correction=1`` is the unbiased estimate."""
    dims = _norm_dims(_dim(dim, axis, "var"), x.ndim, "var")
    correction = _correction(correction, unbiased)
    n = math.prod(x.shape[d] for d in dims)
    denominator = n - correction
    scale = 1.0 / denominator if denominator > 0 else math.nan
    if x.ndim and x.dtype.is_floating_point and supports(x._storage, "var"):
        # one fused pass (halves accumulate in f32, so their squares cannot overflow);
        # d var / dx = 2 (x - mean) / (N - correction)
        out = _fused("var", x, dims, keepdim, float(correction))

        def backward(g: Tensor):
            centered = x.detach() - mean(x.detach(), dims, keepdim=True)
            return (_keep(g, x, dims, keepdim) * centered * (2.0 * scale),)

        return record(out, "var", (x,), backward, saved=(x,))
    centered = x - mean(x, dims, keepdim=True)
    return sum(centered * centered, dims, keepdim) * scale


@op
def std(x: Tensor, dim=None, keepdim: bool = False, correction: int = 1, *,
        unbiased: bool | None = None, axis=None) -> Tensor:  # fmt: skip
    return sqrt(var(x, _dim(dim, axis, "std"), keepdim, _correction(correction, unbiased)))


@op
def logsumexp(x: Tensor, dim=None, keepdim: bool = False, *, axis=None) -> Tensor:
    """log Σ exp(x), computed stably around the max."""
    dim = _dim(dim, axis, "logsumexp")
    if x.numel == 0:  # no max to subtract; the sum is 0 (or empty) and its log -inf
        return log(sum(exp(x), dim, keepdim))
    if x.ndim == 0:  # a scalar's only (virtual) dim: log exp x = x
        _norm_dims(dim, 1, "logsumexp")
        return x * 1.0
    if x.dtype.is_floating_point and supports(x._storage, "logsumexp"):
        # one fused op (the max, then Σ exp(x - max)); d lse / dx = exp(x - lse)
        dims = _norm_dims(dim, x.ndim, "logsumexp")
        out = _fused("logsumexp", x, dims, keepdim)
        value = out.detach()  # not ``out``: see ``record``

        def backward(g: Tensor):
            lse = _keep(value, x, dims, keepdim)
            return (_keep(g, x, dims, keepdim) * exp(x.detach() - lse),)

        return record(out, "logsumexp", (x,), backward, saved=(x, value))
    m = amax(x, dim, keepdim=True).detach()
    m = m.masked_fill(m.isinf(), 0.0)
    out = log(sum(exp(x - m), dim, keepdim=True)) + m
    return out if keepdim else out.squeeze(_norm_dims(dim, x.ndim, "logsumexp"))


@op
def norm(x: Tensor, p: float = 2.0, dim=None, keepdim: bool = False) -> Tensor:
    """The p-norm ‖x‖ₚ = (Σ |x|ᵖ)^(1/p); p = inf gives max |x|.

    d‖x‖ₚ/dx = sign(x) |x|ᵖ⁻¹ / ‖x‖ₚᵖ⁻¹, taken as 0 where the norm is 0 (as PyTorch).
    p = 0 counts the non-zero elements (no gradient); p = -inf gives min |x|.
    """
    if p == 0:  # a count: its gradient is 0 everywhere
        out = sum(to_dtype(ne(x, 0), x.dtype), dim, keepdim)
        return record(out, "norm", (x,), lambda g: (x.detach() * 0.0,))
    if p == 1:
        return sum(x.abs(), dim, keepdim)
    if p == math.inf:
        return amax(x.abs(), dim, keepdim)
    if p == -math.inf:
        return amin(x.abs(), dim, keepdim)
    with no_grad():
        if p == 2:
            out = sqrt(sum(x * x, dim, keepdim))
        else:
            out = sum(x.abs().powf(p), dim, keepdim).powf(1.0 / p)

    value = out.detach()  # not ``out``: see ``record``

    def backward(g: Tensor):
        n = _keep(value, x, dim, keepdim)
        n = where(eq(n, 0), math.inf, n)  # x / inf = 0 where the whole group is 0
        if p == 2:
            return (_keep(g, x, dim, keepdim) * x / n,)
        ratio = x.abs() / n
        return (_keep(g, x, dim, keepdim) * x.sign() * ratio.powf(p - 1.0),)

    return record(out, "norm", (x,), backward, saved=(x, value))


@op
def cumsum(x: Tensor, dim: int, *, dtype=None) -> Tensor:
    """Running sums along ``dim``: out_i = Σ_{j≤i} x_j (ints and bools in i64; ``dtype`` casts
    the input first)."""
    dim = norm_dim(dim, x.ndim, "cumsum")
    if dtype is not None:
        x = to_dtype(x, dtype)
    dtype = _sum_dtype(x, dtype)
    out = new(x._storage.cumsum(x._layout, dim, dtype.name), x.shape, dtype, x.device)
    if x.ndim == 0:
        return record(out, "cumsum", (x,), lambda g: (g,))
    # d/dx_i Σ_{j≥i} g_j: a reversed cumulative sum of the gradient.
    return record(out, "cumsum", (x,), lambda g: (g.flip(dim).cumsum(dim).flip(dim),))


@op
def sort(
    x: Tensor, dim: int = -1, descending: bool = False, *, stable: bool = True
) -> return_types.sort:
    """``(values, indices)`` sorted along ``dim`` (a named tuple); always stable."""
    dim = norm_dim(dim, x.ndim, "sort")
    if x.ndim == 0:
        return _values_at(return_types.sort, x, _zero_index(x), 0, False)
    values_s, idx_s = x._storage.sort(x._layout, dim, descending)
    values = new(values_s, x.shape, x.dtype, x.device)
    indices = new(idx_s, x.shape, dt.i64, x.device)

    def backward(g: Tensor):
        from .creation import zeros_like

        return (zeros_like(g).scatter_add(dim, indices, g),)

    record(values, "sort", (x,), backward)
    return return_types.sort(values, indices)


@op
def argsort(x: Tensor, dim: int = -1, descending: bool = False) -> Tensor:
    return sort(x, dim, descending).indices


@op
def topk(
    x: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True
) -> return_types.topk:
    """The ``k`` largest (or smallest) values along ``dim`` and their indices, as a named
    tuple ``(values, indices)``; always sorted (``sorted=False`` leaves the order free)."""
    dim = norm_dim(dim, x.ndim, "topk")
    if x.ndim == 0:  # as a 1-element vector; k = 1 gives 0-d results, as PyTorch
        values, indices = topk(x.reshape((1,)), k, 0, largest)
        shape = () if k == 1 else values.shape
        return return_types.topk(values.reshape(shape), indices.reshape(shape))
    if not 0 <= k <= x.shape[dim]:
        raise ShapeError(f"topk: k={k} is out of range for dim {dim} of size {x.shape[dim]}")
    values, indices = sort(x, dim, descending=largest)
    return return_types.topk(values.narrow(dim, 0, k), indices.narrow(dim, 0, k))


def _zero_index(x: Tensor) -> Tensor:
    """The index of a 0-d tensor's only element."""
    from .creation import zeros

    return zeros((), dtype=dt.i64, device=x.device)


def _cumulative_extremum(name: str, x: Tensor, dim: int):
    """``(values, indices)`` of the running max (min) along ``dim``: a Hillis–Steele scan
    over indices, log₂(n) steps, each combining every position with the one ``shift``
    before it. Ties keep the later index and a NaN beats every number (the latest NaN's
    index), as PyTorch."""
    from .creation import arange

    result = getattr(return_types, name)
    dim = norm_dim(dim, x.ndim, name)
    if x.ndim == 0:
        return _values_at(result, x, _zero_index(x), 0, False)
    n = x.shape[dim]
    shape = [1] * x.ndim
    shape[dim] = n
    with no_grad():
        indices = arange(n, device=x.device).reshape(tuple(shape)).expand(x.shape).contiguous()
        values = x.detach()
        shift = 1
        while shift < n:
            before, here = values.narrow(dim, 0, n - shift), values.narrow(dim, shift, n - shift)
            beats = before > here if name == "cummax" else before < here
            if x.dtype.is_floating_point:
                beats = logical_or(beats, logical_and(before.isnan(), logical_not(here.isnan())))
            values = cat([values.narrow(dim, 0, shift), where(beats, before, here)], dim)
            earlier = indices.narrow(dim, 0, n - shift)
            later = indices.narrow(dim, shift, n - shift)
            indices = cat([indices.narrow(dim, 0, shift), where(beats, earlier, later)], dim)
            shift *= 2
    return _values_at(result, x, indices, dim, True)


@op
def cummax(x: Tensor, dim: int) -> return_types.cummax:
    """The running maximum along ``dim`` and where it was reached: ``(values, indices)``."""
    return _cumulative_extremum("cummax", x, dim)


@op
def cummin(x: Tensor, dim: int) -> return_types.cummin:
    return _cumulative_extremum("cummin", x, dim)


@op
def mode(x: Tensor, dim: int = -1, keepdim: bool = False) -> return_types.mode:
    """The most frequent value along ``dim`` (the smallest one on ties) and the index of its
    last occurrence, as PyTorch: ``(values, indices)``. Counts by an (n × n) comparison."""
    from .creation import arange

    dim = norm_dim(dim, x.ndim, "mode")
    if x.ndim == 0:
        return _values_at(return_types.mode, x, _zero_index(x), 0, keepdim)
    _check_not_empty("mode", x, dim)
    with no_grad():
        last = x.detach().movedim(dim, -1)
        ordered = sort(last, -1).values
        counts = sum(eq(ordered.unsqueeze(-1), ordered.unsqueeze(-2)), -1)
        best = ordered.gather(-1, argmax(counts, -1, keepdim=True))
        positions = arange(last.shape[-1], device=x.device)
        at = amax(where(eq(last, best), positions, -1), -1, keepdim=True)
    return _values_at(return_types.mode, x, at.movedim(-1, dim), dim, keepdim)
