"""PyTorch functions composed from other ops: ``einsum``, ``cumprod``, ``isclose``, ``allclose``,
``log2``, ``fmax``, ``lerp``, ``nansum``, ``tril``, ``unbind``, ``mm``, ... and PyTorch's other
names for workbench ops (``clip``, ``floor_divide``, ``subtract``, ``concat``, ``sgn``, ...).

Built from differentiable ops (mul, sum, permute, reshape, matmul, narrow, cat), so their
gradients come from the ops they are made of and they run on every device.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence

import numpy as np

from .. import dtype as dt
from .._oprecord import op
from ..autograd import no_grad, record
from ..errors import ArgumentError, DTypeError, ShapeError, WorkbenchError
from ..tensor import Tensor
from . import elementwise as ew
from . import return_types
from ._helpers import norm_dim
from .creation import arange, eye, full, full_like
from .matmul import matmul
from .shape import cat

# A label is a subscript letter, or an int for the k-th dim covered by "..." (counted from the
# left of the widest ellipsis, so that ellipsis dims align to the right as in broadcasting).
Label = str | int


def _term_labels(term: str, ndim: int | None, n_ellipsis: int, what: str) -> list[Label]:
    head, dots, tail = term.partition("...")
    letters = head + tail
    if "." in letters or not all(c.isalpha() for c in letters):
        raise ShapeError(f"einsum: subscripts must be letters and at most one '...', found {what}")
    if not dots:
        if ndim is not None and len(letters) != ndim:
            raise ShapeError(
                f"einsum: {what} has {len(letters)} subscripts for an operand of {ndim} dims"
            )
        return list(letters)
    k = n_ellipsis if ndim is None else ndim - len(letters)
    return [*head, *range(n_ellipsis - k, n_ellipsis), *tail]


def _parse(equation: str, operands: tuple[Tensor, ...]) -> tuple[list[list[Label]], list[Label]]:
    equation = equation.replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise ShapeError(
            f"einsum: {equation!r} names {len(terms)} operands, {len(operands)} were given"
        )
    n_ellipsis = 0
    for term, x in zip(terms, operands, strict=True):
        if term.count("...") > 1:
            raise ShapeError(f"einsum: more than one '...' in {term!r}")
        if "..." in term:
            k = x.ndim - len(term.replace("...", ""))
            if k < 0:
                raise ShapeError(f"einsum: {term!r} has more subscripts than its {x.ndim} dims")
            n_ellipsis = max(n_ellipsis, k)
    inputs = [
        _term_labels(term, x.ndim, n_ellipsis, repr(term))
        for term, x in zip(terms, operands, strict=True)
    ]
    seen = [label for labels in inputs for label in labels]
    if arrow:
        output = _term_labels(rhs, None, n_ellipsis, f"the output {rhs!r}")
        for label in output:
            if output.count(label) > 1:
                raise ShapeError(f"einsum: output subscript {label!r} appears twice")
            if label not in seen:
                raise ShapeError(f"einsum: output subscript {label!r} is in no input")
    else:  # implicit: the ellipsis dims, then the letters seen once, in alphabetical order
        once = sorted({c for c in seen if isinstance(c, str) and seen.count(c) == 1})
        output = [*range(n_ellipsis), *once]
    return inputs, output


def _diagonal(x: Tensor, p: int, q: int) -> Tensor:
    """The diagonal of dims ``p < q`` (kept at ``p``): Σ_q x[.., i, .., j, ..] δ_ij."""
    n = x.shape[p]
    if x.shape[q] != n:
        raise ShapeError(f"einsum: a repeated subscript spans dims of sizes {n} and {x.shape[q]}")
    shape = [1] * x.ndim
    shape[p] = shape[q] = n
    return (x * eye(n, dtype=x.dtype, device=x.device).reshape(shape)).sum(q)


def _prepare(x: Tensor, labels: list[Label], needed: set[Label]) -> tuple[Tensor, list[Label]]:
    """Take the diagonals of repeated labels, then sum the labels nothing else needs."""
    labels = list(labels)
    for label in dict.fromkeys(labels):
        while labels.count(label) > 1:
            p = labels.index(label)
            q = labels.index(label, p + 1)
            x = _diagonal(x, p, q)
            del labels[q]
    summed = [i for i, label in enumerate(labels) if label not in needed]
    if summed:
        x = x.sum(tuple(summed))
        labels = [label for label in labels if label in needed]
    return x, labels


def _size(x: Tensor, labels: list[Label], label: Label) -> int:
    return x.shape[labels.index(label)]


def _contract(
    a: Tensor, la: list[Label], b: Tensor, lb: list[Label], keep: set[Label]
) -> tuple[Tensor, list[Label]]:
    """Σ over the shared labels not in ``keep`` of a ⊗ b, as one batched matmul
    (batch, left, k) @ (batch, k, right)."""
    for label in la:
        if label in lb:
            na, nb = _size(a, la, label), _size(b, lb, label)
            if na != nb and 1 not in (na, nb):
                raise ShapeError(f"einsum: subscript {label!r} has sizes {na} and {nb}")
            if na == 1 and nb != 1:
                a = a.expand(
                    tuple(nb if lab == label else n for lab, n in zip(la, a.shape, strict=True))
                )
            elif nb == 1 and na != 1:
                b = b.expand(
                    tuple(na if lab == label else n for lab, n in zip(lb, b.shape, strict=True))
                )
    batch = [label for label in la if label in lb and label in keep]
    summed = [label for label in la if label in lb and label not in keep]
    left = [label for label in la if label not in lb]
    right = [label for label in lb if label not in la]

    def sizes(x: Tensor, labels: list[Label], chosen: list[Label]) -> tuple[int, ...]:
        return tuple(_size(x, labels, label) for label in chosen)

    def product(shape: tuple[int, ...]) -> int:
        n = 1
        for s in shape:
            n *= s
        return n

    left_shape, right_shape = sizes(a, la, left), sizes(b, lb, right)
    k = product(sizes(a, la, summed))
    a = a.permute(tuple(la.index(label) for label in batch + left + summed))
    a = a.reshape((*sizes(a, batch + left + summed, batch), product(left_shape), k))
    b = b.permute(tuple(lb.index(label) for label in batch + summed + right))
    b = b.reshape((*sizes(b, batch + summed + right, batch), k, product(right_shape)))
    out = matmul(a, b)
    return out.reshape((*out.shape[:-2], *left_shape, *right_shape)), batch + left + right


@op
def einsum(equation: str, *operands: Tensor) -> Tensor:
    """Einstein summation: ``einsum("bij,bjk->bik", a, b)`` is a batched matmul.

    Each operand's subscripts label its dims; ``...`` stands for dims that broadcast; a
    subscript repeated within one operand takes its diagonal (``"ii->i"``, ``"ii"`` the
    trace); subscripts missing from the output (after ``->``, else the ellipsis dims then the
    subscripts seen once, alphabetically) are summed over. Operands may also come as one list.
    """
    if len(operands) == 1 and isinstance(operands[0], list | tuple):
        operands = tuple(operands[0])
    if not operands or not all(isinstance(x, Tensor) for x in operands):
        raise WorkbenchError(f"einsum: expected tensor operands after {equation!r}")
    inputs, output = _parse(equation, operands)
    prepared = []
    for i, (x, labels) in enumerate(zip(operands, inputs, strict=True)):
        needed = set(output).union(*inputs[:i], *inputs[i + 1 :])
        prepared.append(_prepare(x, labels, needed))
    x, labels = prepared[0]
    for i, (y, y_labels) in enumerate(prepared[1:], start=1):
        keep = set(output).union(*(lab for _, lab in prepared[i + 1 :]))
        x, labels = _contract(x, labels, y, y_labels, keep)
    x, labels = _prepare(x, labels, set(output))
    return x.permute(tuple(labels.index(label) for label in output)) if labels else x


@op
def cumprod(x: Tensor, dim: int, *, dtype: dt.DType | str | None = None) -> Tensor:
    """y_i = Π_{j≤i} x_j along ``dim``; ints and bools multiply in i64 (as in PyTorch).

    A Hillis–Steele scan, log₂(n) products of shifted copies, so that the gradient is exact
    where some x_j = 0 (no division by the product).
    """
    if dtype is not None:
        x = x.to(dt.dtype(dtype))
    elif not x.dtype.is_floating_point:
        x = x.to(dt.i64)
    if x.ndim == 0:
        return x * 1
    dim = norm_dim(dim, x.ndim, "cumprod")
    n = x.shape[dim]
    shift = 1
    while shift < n:
        ones = full(
            *x.shape[:dim], shift, *x.shape[dim + 1 :], fill_value=1, dtype=x.dtype, device=x.device
        )
        x = x * cat([ones, x.narrow(dim, 0, n - shift)], dim)
        shift *= 2
    return x


def _close_operands(a: Tensor, b, op_name: str) -> tuple[Tensor, Tensor]:
    if not isinstance(a, Tensor):
        raise DTypeError(f"{op_name}: expected a tensor, found {type(a).__name__}")
    if not isinstance(b, Tensor):
        b = full_like(a, b)
    dtype = dt.promote_types(a.dtype, b.dtype)
    if not dtype.is_floating_point:
        dtype = dt.f64  # |a - b| of integers must not wrap around
    return a.to(dtype), b.to(dtype)


@op
def isclose(
    a: Tensor, b: Tensor, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False
) -> Tensor:
    """|a − b| ≤ atol + rtol·|b| elementwise (bool, broadcast); infinities are close only to
    themselves, NaNs to NaNs only with ``equal_nan``."""
    if rtol < 0 or atol < 0:
        raise WorkbenchError(f"isclose: rtol and atol must be >= 0, found {rtol} and {atol}")
    with no_grad():
        a, b = _close_operands(a, b, "isclose")
        finite = ew.logical_and(ew.isfinite(a), ew.isfinite(b))
        near = ew.logical_and(finite, ew.le((a - b).abs(), atol + rtol * b.abs()))
        close = ew.logical_or(ew.eq(a, b), near)
        if equal_nan:
            close = ew.logical_or(close, ew.logical_and(ew.isnan(a), ew.isnan(b)))
    return close


@op
def allclose(
    a: Tensor, b: Tensor, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False
) -> bool:
    """True when ``isclose(a, b, rtol, atol, equal_nan)`` holds everywhere."""
    return bool(isclose(a, b, rtol, atol, equal_nan).all().item())


def _alias(name: str, target: Callable) -> Callable:
    """``name`` as an op of its own that calls ``target`` (same signature, own profiler row)."""

    def alias(*args, **kwargs):
        return target(*args, **kwargs)

    alias.__name__ = alias.__qualname__ = name
    alias.__doc__ = f"PyTorch's name for ``{target.__name__}``."
    alias.__signature__ = inspect.signature(target)
    return op(alias)


clip = _alias("clip", ew.clamp)
floor_divide = _alias("floor_divide", ew.floor_div)
true_divide = _alias("true_divide", ew.div)
divide = _alias("divide", ew.div)
subtract = _alias("subtract", ew.sub)
multiply = _alias("multiply", ew.mul)
negative = _alias("negative", ew.neg)
absolute = _alias("absolute", ew.abs)
square = _alias("square", ew.sqr)
reciprocal = _alias("reciprocal", ew.recip)
greater = _alias("greater", ew.gt)
greater_equal = _alias("greater_equal", ew.ge)
less = _alias("less", ew.lt)
less_equal = _alias("less_equal", ew.le)
not_equal = _alias("not_equal", ew.ne)


# -- more of PyTorch's elementwise functions, composed -------------------------------------------
_LN2 = math.log(2.0)
_LN10 = math.log(10.0)


def _floating(x: Tensor) -> Tensor:
    """Integer and bool tensors as f32 (PyTorch's default float), floats as they are."""
    return x if x.dtype.is_floating_point else x.to(dt.f32)


@op
def log2(x: Tensor) -> Tensor:
    """log₂ x = ln x / ln 2."""
    return ew.log(x) * (1.0 / _LN2)


@op
def log10(x: Tensor) -> Tensor:
    """log₁₀ x = ln x / ln 10."""
    return ew.log(x) * (1.0 / _LN10)


@op
def exp2(x: Tensor) -> Tensor:
    """2ˣ = exp(x ln 2)."""
    return ew.exp(_floating(x) * _LN2)


@op
def erfc(x: Tensor) -> Tensor:
    """1 - erf(x)."""
    return 1.0 - ew.erf(x)


@op
def asinh(x: Tensor) -> Tensor:
    """asinh x = sign(x) · log1p(|x| + x² / (1 + √(1 + x²))) (no cancellation for x < 0);
    d/dx = 1 / √(1 + x²)."""
    x = _floating(x)
    with no_grad():
        a = x.abs()
        out = ew.sign(x) * ew.log1p(a + a * a / (1.0 + ew.sqrt(a * a + 1.0)))
    return record(out, "asinh", (x,), lambda g: (g * ew.rsqrt(x * x + 1.0),), saved=(x,))


@op
def atanh(x: Tensor) -> Tensor:
    """atanh x = ½ log1p(2x / (1 - x)); d/dx = 1 / (1 - x²)."""
    x = _floating(x)
    return 0.5 * ew.log1p(2.0 * x / (1.0 - x))


@op
def trunc(x: Tensor) -> Tensor:
    """x rounded toward zero (integers as they are); its gradient is 0, as floor's."""
    if not x.dtype.is_floating_point:
        return x
    return ew.where(x < 0, ew.ceil(x), ew.floor(x))


@op
def frac(x: Tensor) -> Tensor:
    """x - trunc(x), with x's sign."""
    return x - trunc(x)


@op
def signbit(x: Tensor) -> Tensor:
    """True where the sign bit is set: negative numbers, -0.0 and NaNs with the bit."""
    if not x.dtype.is_floating_point:
        return x < 0
    with no_grad():
        return ew.copysign(1.0, x) < 0


@op
def positive(x: Tensor) -> Tensor:
    """x itself (PyTorch's unary +)."""
    return x


sgn = _alias("sgn", ew.sign)


def _nan_to(x: Tensor, fill: float | Tensor) -> Tensor:
    return ew.where(ew.isnan(x), fill, x) if x.dtype.is_floating_point else x


@op
def fmax(a: Tensor, b: Tensor) -> Tensor:
    """max(a, b), where a NaN loses to a number (NaN only where both are)."""
    return ew.maximum(_nan_to(a, b), _nan_to(b, a))


@op
def fmin(a: Tensor, b: Tensor) -> Tensor:
    """min(a, b), where a NaN loses to a number (NaN only where both are)."""
    return ew.minimum(_nan_to(a, b), _nan_to(b, a))


@op
def hypot(a: Tensor, b: Tensor) -> Tensor:
    """√(a² + b²)."""
    return ew.sqrt(a * a + b * b)


@op
def lerp(start: Tensor, end: Tensor, weight) -> Tensor:
    """start + weight · (end - start)."""
    return start + weight * (end - start)


@op
def addcmul(x: Tensor, t1: Tensor, t2: Tensor, *, value: float = 1.0) -> Tensor:
    """x + value · t1 · t2."""
    return x + value * (t1 * t2)


@op
def addcdiv(x: Tensor, t1: Tensor, t2: Tensor, *, value: float = 1.0) -> Tensor:
    """x + value · t1 / t2."""
    return x + value * (t1 / t2)


@op
def nan_to_num(
    x: Tensor, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None
) -> Tensor:
    """NaN -> ``nan``, +inf -> ``posinf`` and -inf -> ``neginf`` (default: the dtype's
    largest and lowest finite values); the gradient passes where x was finite."""
    if not x.dtype.is_floating_point:
        return x
    big = float(np.finfo(x.dtype.numpy).max)
    out = ew.where(ew.isnan(x), nan, x)
    out = ew.where(out == math.inf, big if posinf is None else posinf, out)
    return ew.where(out == -math.inf, -big if neginf is None else neginf, out)


# -- reductions ---------------------------------------------------------------------------------
@op
def nansum(x: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """The sum with NaNs counted as 0."""
    return _nan_to(x, 0.0).sum(dim, keepdim, dtype=dtype)


@op
def nanmean(x: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """The mean of the values that are not NaN (NaN where all are)."""
    if dtype is not None:
        x = x.to(dt.dtype(dtype))
    if not x.dtype.is_floating_point:
        raise DTypeError(f"nanmean: expected a floating-point tensor, found {x.dtype.name}")
    count = (~ew.isnan(x)).sum(dim, keepdim).to(x.dtype)
    return nansum(x, dim, keepdim) / count


@op
def count_nonzero(x: Tensor, dim=None) -> Tensor:
    """How many elements are not 0 (over ``dim``: an int, a tuple or None), as i64."""
    return (x != 0).sum(dim)


# -- shapes -------------------------------------------------------------------------------------
def _triangle(x: Tensor, diagonal: int, lower: bool, name: str) -> Tensor:
    if x.ndim < 2:
        raise ShapeError(f"{name}: expected a tensor of at least 2 dims, found {x.ndim}")
    rows, cols = x.shape[-2:]
    i = arange(rows, device=x.device).reshape(rows, 1)
    j = arange(cols, device=x.device).reshape(1, cols)
    keep = (j - i <= diagonal) if lower else (j - i >= diagonal)
    return ew.where(keep, x, 0)


@op
def tril(x: Tensor, diagonal: int = 0) -> Tensor:
    """The lower triangle of the last two dims: x[..., i, j] where j - i ≤ diagonal, else 0."""
    return _triangle(x, diagonal, True, "tril")


@op
def triu(x: Tensor, diagonal: int = 0) -> Tensor:
    """The upper triangle of the last two dims: x[..., i, j] where j - i ≥ diagonal, else 0."""
    return _triangle(x, diagonal, False, "triu")


@op
def expand_as(x: Tensor, other: Tensor) -> Tensor:
    """x broadcast to ``other``'s shape (a view)."""
    return x.expand(other.shape)


@op
def unflatten(x: Tensor, dim: int, sizes: Sequence[int]) -> Tensor:
    """Dim ``dim`` split into ``sizes`` (one of them may be -1)."""
    dim = norm_dim(dim, x.ndim, "unflatten")
    return x.reshape(*x.shape[:dim], *sizes, *x.shape[dim + 1 :])


@op
def unbind(x: Tensor, dim: int = 0) -> tuple[Tensor, ...]:
    """The slices along ``dim``, that dim removed (views)."""
    dim = norm_dim(dim, x.ndim, "unbind")
    return tuple(x.narrow(dim, i, 1).squeeze(dim) for i in range(x.shape[dim]))


concat = _alias("concat", cat)
concatenate = _alias("concatenate", cat)


# -- matrix products by PyTorch's other names -----------------------------------------------------
def _checked_matmul(name: str, a: Tensor, b: Tensor, ndims: tuple[int, int]) -> Tensor:
    if (a.ndim, b.ndim) != ndims:
        raise ShapeError(
            f"{name}: expected operands of {ndims[0]} and {ndims[1]} dims, found "
            f"{list(a.shape)} and {list(b.shape)}"
        )
    return matmul(a, b)


@op
def mm(a: Tensor, b: Tensor) -> Tensor:
    """(n, k) @ (k, m)."""
    return _checked_matmul("mm", a, b, (2, 2))


@op
def bmm(a: Tensor, b: Tensor) -> Tensor:
    """(B, n, k) @ (B, k, m)."""
    return _checked_matmul("bmm", a, b, (3, 3))


@op
def mv(a: Tensor, v: Tensor) -> Tensor:
    """(n, k) @ (k,)."""
    return _checked_matmul("mv", a, v, (2, 1))


@op
def dot(a: Tensor, b: Tensor) -> Tensor:
    """Σᵢ aᵢ bᵢ of two vectors."""
    return _checked_matmul("dot", a, b, (1, 1))


@op
def outer(a: Tensor, b: Tensor) -> Tensor:
    """aᵢ bⱼ of two vectors."""
    if (a.ndim, b.ndim) != (1, 1):
        raise ShapeError(f"outer: expected two vectors, found {list(a.shape)} and {list(b.shape)}")
    return a.unsqueeze(1) * b.unsqueeze(0)


@op
def addmm(x: Tensor, a: Tensor, b: Tensor, *, beta: float = 1.0, alpha: float = 1.0) -> Tensor:
    """beta · x + alpha · (a @ b)."""
    return beta * x + alpha * mm(a, b)


# -- more reductions and gathers ------------------------------------------------------------------
@op
def median(x: Tensor, dim: int | None = None, keepdim: bool = False):
    """The lower median (the ⌊(n-1)/2⌋-th smallest value), of all elements (a 0-d tensor) or
    along ``dim`` (named ``(values, indices)``). NaNs sort last here, so unlike PyTorch's a
    NaN does not make the median NaN."""
    if dim is None:
        flat = x.reshape(-1)
        if flat.shape[0] == 0:
            raise ShapeError("median: expected a non-empty tensor")
        return flat.sort(0).values[(flat.shape[0] - 1) // 2]
    dim = norm_dim(dim, x.ndim, "median")
    values, indices = x.sort(dim)
    k = (x.shape[dim] - 1) // 2 if x.ndim else 0
    if x.ndim == 0:
        return return_types.median(values, indices)
    pick = (values.narrow(dim, k, 1), indices.narrow(dim, k, 1))
    return return_types.median(*(p if keepdim else p.squeeze(dim) for p in pick))


@op
def diagonal(x: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """x[..., i, i + offset] over dims ``dim1``, ``dim2`` (removed; the diagonal goes last)."""
    d1, d2 = norm_dim(dim1, x.ndim, "diagonal"), norm_dim(dim2, x.ndim, "diagonal")
    if d1 == d2:
        raise ShapeError(f"diagonal: dim1 and dim2 must differ, found both {dim1}")
    y = x.permute(tuple(d for d in range(x.ndim) if d not in (d1, d2)) + (d1, d2))
    n, m = y.shape[-2:]
    if offset >= 0:
        y = y.narrow(-1, min(offset, m), m - min(offset, m))
    else:
        y = y.narrow(-2, min(-offset, n), n - min(-offset, n))
    n, m = y.shape[-2:]
    length = min(n, m)
    flat = y.contiguous().reshape(*y.shape[:-2], n * m)
    # the diagonal of a row-major (n, m) block: every (m + 1)-th element from the first
    return flat[..., : max((length - 1) * (m + 1) + 1, 0) : m + 1]


_diagonal_op = diagonal  # (diag's parameter is named diagonal, as PyTorch's)


@op
def take_along_dim(x: Tensor, indices: Tensor, dim: int | None = None) -> Tensor:
    """x gathered at ``indices`` along ``dim`` (both broadcast over the other dims);
    ``dim=None`` takes from the flattened x."""
    if dim is None:
        return x.reshape(-1).gather(0, indices.reshape(-1))
    dim = norm_dim(dim, x.ndim, "take_along_dim")
    if indices.ndim != x.ndim:
        raise ShapeError(
            f"take_along_dim: indices of {indices.ndim} dims for a tensor of {x.ndim} dims"
        )
    shape = [max(a, b) for a, b in zip(x.shape, indices.shape, strict=True)]
    x_shape, i_shape = list(shape), list(shape)
    x_shape[dim], i_shape[dim] = x.shape[dim], indices.shape[dim]
    return x.expand(tuple(x_shape)).gather(dim, indices.expand(tuple(i_shape)))


@op
def repeat_interleave(x: Tensor, repeats: int, dim: int | None = None) -> Tensor:
    """Each element (of the flattened x, or each slice along ``dim``) ``repeats`` times in a
    row: [a, b] -> [a, a, b, b]."""
    if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats < 0:
        raise ArgumentError(
            f"repeat_interleave: repeats must be a non-negative int, found {repeats!r}"
        )
    if dim is None:
        x, dim = x.reshape(-1), 0
    dim = norm_dim(dim, x.ndim, "repeat_interleave")
    shape = list(x.shape)
    y = x.unsqueeze(dim + 1).expand(tuple(shape[: dim + 1] + [repeats] + shape[dim + 1 :]))
    return y.reshape(*shape[:dim], shape[dim] * repeats, *shape[dim + 1 :])


@op
def diag(x: Tensor, diagonal: int = 0) -> Tensor:
    """A vector -> the square matrix with it on diagonal ``diagonal`` (0 elsewhere); a matrix
    -> its diagonal ``diagonal``."""
    if x.ndim == 2:
        return _diagonal_op(x, diagonal)
    if x.ndim != 1:
        raise ShapeError(f"diag: expected a vector or a matrix, found {x.ndim} dims")
    k = abs(diagonal)
    n = x.shape[0] + k
    padded = cat([x, full((k,), 0, dtype=x.dtype, device=x.device)]) if k else x
    # M[i, j] = v[i] on j - i = diagonal >= 0, v[j] on a diagonal below the main one
    values = padded.reshape(n, 1) if diagonal >= 0 else padded.reshape(1, n)
    i = arange(n, device=x.device).reshape(n, 1)
    j = arange(n, device=x.device).reshape(1, n)
    return ew.where(j - i == diagonal, values.expand((n, n)), 0)
