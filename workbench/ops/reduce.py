"""Reductions (with ``keepdim``), scans and sorting, with gradients."""

from __future__ import annotations

import math

from .. import dtype as dt
from .._oprecord import op
from ..autograd import no_grad, record
from ..errors import ShapeError
from ..tensor import Tensor
from ._helpers import describe, new, norm_dim, norm_dims
from .elementwise import eq, exp, log, sqrt, to_dtype, where


def _norm_dims(dims, ndim: int, op: str = "op") -> tuple[int, ...]:
    """``norm_dims`` after checking the kind: a float dim would otherwise pass the range check
    and fail deep in the backend."""
    ok = dims is None or isinstance(dims, int)
    if not ok and isinstance(dims, tuple | list):  # (``all`` is the reduction, here)
        ok = [type(d) for d in dims if not isinstance(d, int)] == []
    if not ok:
        raise ShapeError(f"{op}: dim must be an int, a sequence of ints or None, found {dims!r}")
    return norm_dims(dims, ndim, op)


def _reduce(name: str, x: Tensor, dims, keepdim: bool, dtype: dt.DType) -> Tensor:
    shape = x.shape
    if x.ndim == 0:  # a scalar reduces to itself over its only (virtual) dim
        _norm_dims(dims, 1, name)
        return new(x._storage.reduce(name, x._layout, (), False, dtype.name), (), dtype, x.device)
    dims = _norm_dims(dims, x.ndim, name)
    out_shape = tuple(
        1 if i in dims else s for i, s in enumerate(shape) if keepdim or i not in dims
    )
    storage = x._storage.reduce(name, x._layout, dims, keepdim, dtype.name)
    return new(storage, out_shape, dtype, x.device)


def _keep(g: Tensor, x: Tensor, dims, keepdim: bool) -> Tensor:
    """Reshape a reduced gradient so it broadcasts against ``x``."""
    if keepdim:
        return g
    dims = _norm_dims(dims, x.ndim)
    return g.reshape(tuple(1 if i in dims else s for i, s in enumerate(x.shape)))


def _sum_dtype(x: Tensor) -> dt.DType:
    return x.dtype if x.dtype.is_floating_point else dt.i64


@op
def sum(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """Sum over ``dim`` (an int, a tuple, or None for all); ints and bools sum to i64."""
    out = _reduce("sum", x, dim, keepdim, _sum_dtype(x))
    return record(out, "sum", (x,), lambda g: (_keep(g, x, dim, keepdim).expand(x.shape),))


@op
def mean(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    if not x.dtype.is_floating_point:
        x = to_dtype(x, dt.f32)
    dims = _norm_dims(dim, x.ndim, "mean")
    count = math.prod(x.shape[d] for d in dims)
    return sum(x, dims, keepdim) * (1.0 / count if count else math.nan)


@op
def prod(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    out = _reduce("prod", x, dim, keepdim, _sum_dtype(x))

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
    for d in _norm_dims(dims, x.ndim, name):
        if x.shape[d] == 0:
            raise ShapeError(
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
def max(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """Largest value over ``dim`` (values only; use ``argmax`` for indices)."""
    return _extremum("max", x, dim, keepdim)


@op
def min(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    return _extremum("min", x, dim, keepdim)


def _arg(name: str, x: Tensor, dim, keepdim: bool) -> Tensor:
    _check_not_empty(name, x, dim)
    if dim is None:
        flat = x.reshape((-1,))
        out = _reduce(name, flat, 0, False, dt.i64)
        return out.reshape((1,) * x.ndim) if keepdim else out
    return _reduce(name, x, norm_dim(dim, x.ndim, name), keepdim, dt.i64)


@op
def argmax(x: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """Index of the largest value (the first one on ties)."""
    return _arg("argmax", x, dim, keepdim)


@op
def argmin(x: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    return _arg("argmin", x, dim, keepdim)


@op
def any(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    return _reduce("any", x, dim, keepdim, dt.bool_)


@op
def all(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    return _reduce("all", x, dim, keepdim, dt.bool_)


@op
def var(x: Tensor, dim=None, keepdim: bool = False, correction: int = 1) -> Tensor:
    """Σ (x - mean)² / (N - correction); ``correction=1`` is the unbiased estimate."""
    dims = _norm_dims(dim, x.ndim, "var")
    n = math.prod(x.shape[d] for d in dims)
    centered = x - mean(x, dims, keepdim=True)
    denominator = n - correction
    return sum(centered * centered, dims, keepdim) * (
        1.0 / denominator if denominator > 0 else math.nan
    )


@op
def std(x: Tensor, dim=None, keepdim: bool = False, correction: int = 1) -> Tensor:
    return sqrt(var(x, dim, keepdim, correction))


@op
def logsumexp(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """log Σ exp(x), computed stably around the max."""
    if x.numel == 0:  # no max to subtract; the sum is 0 (or empty) and its log -inf
        return log(sum(exp(x), dim, keepdim))
    m = max(x, dim, keepdim=True).detach()
    m = m.masked_fill(m.isinf(), 0.0)
    out = log(sum(exp(x - m), dim, keepdim=True)) + m
    return out if keepdim else out.squeeze(_norm_dims(dim, x.ndim, "logsumexp"))


@op
def norm(x: Tensor, p: float = 2.0, dim=None, keepdim: bool = False) -> Tensor:
    """The p-norm ‖x‖ₚ = (Σ |x|ᵖ)^(1/p); p = inf gives max |x|.

    d‖x‖ₚ/dx = sign(x) |x|ᵖ⁻¹ / ‖x‖ₚᵖ⁻¹, taken as 0 where the norm is 0 (as PyTorch).
    """
    if p == 1:
        return sum(x.abs(), dim, keepdim)
    if p == math.inf:
        return max(x.abs(), dim, keepdim)
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
def cumsum(x: Tensor, dim: int) -> Tensor:
    dim = norm_dim(dim, x.ndim, "cumsum")
    dtype = _sum_dtype(x)
    out = new(x._storage.cumsum(x._layout, dim, dtype.name), x.shape, dtype, x.device)
    if x.ndim == 0:
        return record(out, "cumsum", (x,), lambda g: (g,))
    # d/dx_i Σ_{j≥i} g_j: a reversed cumulative sum of the gradient.
    return record(out, "cumsum", (x,), lambda g: (g.flip(dim).cumsum(dim).flip(dim),))


@op
def sort(x: Tensor, dim: int = -1, descending: bool = False) -> tuple[Tensor, Tensor]:
    """(values, indices) sorted along ``dim``; stable."""
    dim = norm_dim(dim, x.ndim, "sort")
    values_s, idx_s = x._storage.sort(x._layout, dim, descending)
    values = new(values_s, x.shape, x.dtype, x.device)
    indices = new(idx_s, x.shape, dt.i64, x.device)

    def backward(g: Tensor):
        from .creation import zeros_like

        return (zeros_like(g).scatter_add(dim, indices, g),)

    record(values, "sort", (x,), backward)
    return values, indices


@op
def argsort(x: Tensor, dim: int = -1, descending: bool = False) -> Tensor:
    return sort(x, dim, descending)[1]


@op
def topk(x: Tensor, k: int, dim: int = -1, largest: bool = True) -> tuple[Tensor, Tensor]:
    """The ``k`` largest (or smallest) values along ``dim`` and their indices, sorted."""
    dim = norm_dim(dim, x.ndim, "topk")
    if not 0 <= k <= x.shape[dim]:
        raise ShapeError(f"topk: k={k} is out of range for dim {dim} of size {x.shape[dim]}")
    values, indices = sort(x, dim, descending=largest)
    return values.narrow(dim, 0, k), indices.narrow(dim, 0, k)
