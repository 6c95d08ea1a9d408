"""In-place ops (``add_``, ``copy_``, ``zero_``, ...) that keep autograd honest.

The new values are computed out of place from an alias of the old tensor, written into the
tensor's storage, and the tensor takes over the result's graph node. Writing bumps the storage
version, so a gradient that needs the overwritten values raises instead of being wrong.
A leaf that requires grad, or a view of a tensor in a graph, cannot be modified in place while
grad mode is on (as in PyTorch, use ``with wb.no_grad():`` for parameter updates).
"""

from __future__ import annotations

from .._oprecord import op
from ..autograd import GRAD_ENABLED, Node
from ..errors import AutogradError, ShapeError
from ..tensor import Tensor, make
from . import elementwise as ew
from ._helpers import broadcast_shapes, cast, describe, same_device


def _alias(x: Tensor) -> Tensor:
    """A second tensor object for ``x``'s current value and graph position."""
    alias = make(x._storage, x._layout, x.dtype, x.device)
    alias._node = x._node
    alias.requires_grad = x.requires_grad
    alias._base = x._base
    return alias


def _check_writable(name: str, dst: Tensor, src_requires_grad: bool) -> None:
    if not GRAD_ENABLED.get():
        return
    if dst.requires_grad and dst._node is None:
        raise AutogradError(
            f"{name}: {describe(dst)} is a leaf that requires grad; modify it inside "
            "`with wb.no_grad():` or use an out-of-place op"
        )
    base = dst._base
    if base is not None and (base.requires_grad or src_requires_grad):
        raise AutogradError(
            f"{name}: in-place change of a view of a tensor in an autograd graph is not "
            "supported; clone() the view or use out-of-place ops"
        )


def _write(name: str, dst: Tensor, result: Tensor) -> Tensor:
    """Store ``result`` (broadcast to dst's shape) into ``dst`` and hand it result's node."""
    same_device(name, dst, result)
    _check_writable(name, dst, result.requires_grad)
    if result.shape != dst.shape:
        if broadcast_shapes(name, dst.shape, result.shape) != dst.shape:
            raise ShapeError(
                f"{name}: a result of shape {result.shape} does not fit into {describe(dst)}"
            )
        result = result.broadcast_to(dst.shape)
    result = cast(result, dst.dtype)
    result._storage.copy_strided(result._layout, dst._storage, dst._layout)
    dst._storage.version += 1
    if result.requires_grad and GRAD_ENABLED.get():
        # A leaf result (``copy_`` from a Var) has no node: dst depends on it one to one.
        dst._node = result._node or Node(name, (result,), lambda g: (g,))
        dst.requires_grad = True
    return dst


def _old_value(dst: Tensor, reads_old: bool) -> Tensor:
    """The operand standing for ``dst``'s current values in the out-of-place computation.

    When the op's gradient reads those values (``y`` in ``x.mul_(y)`` needs the old ``x``),
    they are copied first, as the write below overwrites them; otherwise an alias suffices.
    """
    alias = _alias(dst)
    if reads_old and GRAD_ENABLED.get():
        from .shape import clone

        return clone(alias)
    return alias


def _inplace(name: str, fn, dst: Tensor, other, reads_old: bool = False) -> Tensor:
    if reads_old:
        reads_old = isinstance(other, Tensor) and (dst.requires_grad or other.requires_grad)
    result = fn(_old_value(dst, reads_old), other)
    return _write(name, dst, result)


@op
def add_(x: Tensor, other, alpha: float = 1.0) -> Tensor:
    return _inplace("add_", ew.add, x, other if alpha == 1.0 else other * alpha)


@op
def sub_(x: Tensor, other, alpha: float = 1.0) -> Tensor:
    return _inplace("sub_", ew.sub, x, other if alpha == 1.0 else other * alpha)


@op
def mul_(x: Tensor, other) -> Tensor:
    return _inplace("mul_", ew.mul, x, other, reads_old=True)


@op
def div_(x: Tensor, other) -> Tensor:
    return _inplace("div_", ew.div, x, other, reads_old=True)


@op
def clamp_(x: Tensor, min: float | None = None, max: float | None = None) -> Tensor:
    return _write("clamp_", x, ew.clamp(_old_value(x, x.requires_grad), min, max))


@op
def copy_(x: Tensor, src: Tensor) -> Tensor:
    """Overwrite ``x``'s values with ``src`` (broadcast, cast and moved to x's device)."""
    if not isinstance(src, Tensor):
        from .creation import full

        src = full((), fill_value=src, dtype=x.dtype, device=x.device)
    if src.device is not x.device:
        src = src.to(x.device)
    return _write("copy_", x, src)


@op
def fill_(x: Tensor, value: float) -> Tensor:
    _check_writable("fill_", x, False)
    x._storage.const_set(x._layout, value)
    x._storage.version += 1
    if x._node is not None:  # the values no longer depend on anything
        x._node = None
        x.requires_grad = False
    return x


@op
def zero_(x: Tensor) -> Tensor:
    return fill_(x, 0)


def _unary_(name: str, fn, x: Tensor) -> Tensor:
    """``x`` overwritten with ``fn(x)``, the old values kept if the gradient needs them."""
    return _write(name, x, fn(_old_value(x, x.requires_grad)))


@op
def exp_(x: Tensor) -> Tensor:
    return _unary_("exp_", ew.exp, x)


@op
def log_(x: Tensor) -> Tensor:
    return _unary_("log_", ew.log, x)


@op
def sqrt_(x: Tensor) -> Tensor:
    return _unary_("sqrt_", ew.sqrt, x)


@op
def rsqrt_(x: Tensor) -> Tensor:
    return _unary_("rsqrt_", ew.rsqrt, x)


@op
def abs_(x: Tensor) -> Tensor:
    return _unary_("abs_", ew.abs, x)


@op
def neg_(x: Tensor) -> Tensor:
    return _unary_("neg_", ew.neg, x)


@op
def sigmoid_(x: Tensor) -> Tensor:
    return _unary_("sigmoid_", ew.sigmoid, x)


@op
def tanh_(x: Tensor) -> Tensor:
    return _unary_("tanh_", ew.tanh, x)


@op
def relu_(x: Tensor) -> Tensor:
    return _unary_("relu_", ew.relu, x)


@op
def sin_(x: Tensor) -> Tensor:
    return _unary_("sin_", ew.sin, x)


@op
def cos_(x: Tensor) -> Tensor:
    return _unary_("cos_", ew.cos, x)


@op
def floor_(x: Tensor) -> Tensor:
    return _unary_("floor_", ew.floor, x)


@op
def ceil_(x: Tensor) -> Tensor:
    return _unary_("ceil_", ew.ceil, x)


@op
def round_(x: Tensor) -> Tensor:
    return _unary_("round_", ew.round, x)


@op
def masked_fill_(x: Tensor, mask: Tensor, value: float) -> Tensor:
    """``x`` with ``value`` where ``mask`` (broadcast to x) is true, in place."""
    return _write("masked_fill_", x, ew.masked_fill(_alias(x), mask, value))
