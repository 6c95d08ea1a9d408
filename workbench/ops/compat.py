"""PyTorch functions composed from other ops: ``einsum``, ``cumprod``, ``isclose``, ``allclose``,
and PyTorch's other names for workbench ops (``clip``, ``floor_divide``, ``subtract``, ...).

Built from differentiable ops (mul, sum, permute, reshape, matmul, narrow, cat), so their
gradients come from the ops they are made of and they run on every device.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

from .. import dtype as dt
from .._oprecord import op
from ..autograd import no_grad
from ..errors import DTypeError, ShapeError, WorkbenchError
from ..tensor import Tensor
from . import elementwise as ew
from ._helpers import norm_dim
from .creation import eye, full, full_like
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
