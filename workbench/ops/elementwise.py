"""Elementwise ops and their gradients: unary maths, binary arithmetic with broadcasting and
scalars, comparisons, ``where``, casts."""

from __future__ import annotations

import math

import numpy as np

from .. import dtype as dt
from .._oprecord import HOOK, hot_op, op
from ..autograd import GRAD_ENABLED, record
from ..backends.base import supports
from ..dtype import DType
from ..errors import DivisionByZero, DTypeError, DTypeNotImplemented
from ..layout import Layout
from ..tensor import Tensor, make
from ._helpers import broadcast_shapes, describe, new, promote, scalar_operand, sum_to_shape

_contiguous = Layout.contiguous_cached
_new = object.__new__


def _unary(name: str, x: Tensor, backward=None, float_only: bool = True) -> Tensor:
    if float_only and not x.dtype.is_floating_point:
        x = to_dtype(x, dt.f32)
    out = new(x._storage.unary(name, x._layout), x.shape, x.dtype, x.device)
    if backward is not None and x.requires_grad and GRAD_ENABLED.get():
        value = out.detach()
        record(out, name, (x,), lambda g: (backward(g, x, value),), saved=(x, value))
    return out


def _zero_grad(g: Tensor, x: Tensor, out: Tensor) -> Tensor:
    return g * 0.0


@op
def exp(x: Tensor) -> Tensor:
    return _unary("exp", x, lambda g, x, out: g * out)


@op
def log(x: Tensor) -> Tensor:
    return _unary("log", x, lambda g, x, out: g / x)


@op
def sin(x: Tensor) -> Tensor:
    return _unary("sin", x, lambda g, x, out: g * cos(x))


@op
def cos(x: Tensor) -> Tensor:
    return _unary("cos", x, lambda g, x, out: -(g * sin(x)))


@op
def tan(x: Tensor) -> Tensor:
    return _unary("tan", x, lambda g, x, out: g * (out * out + 1.0))


@op
def tanh(x: Tensor) -> Tensor:
    return _unary("tanh", x, lambda g, x, out: g * (1.0 - out * out))


@op
def abs(x: Tensor) -> Tensor:
    return _unary("abs", x, lambda g, x, out: g * sign(x), float_only=False)


@op
def neg(x: Tensor) -> Tensor:
    return _unary("neg", x, lambda g, x, out: -g, float_only=False)


@op
def recip(x: Tensor) -> Tensor:
    """1 / x"""
    return _unary("recip", x, lambda g, x, out: -(g * out * out))


@op
def sqr(x: Tensor) -> Tensor:
    """x²"""
    return _unary("sqr", x, lambda g, x, out: g * x * 2.0, float_only=False)


@op
def sqrt(x: Tensor) -> Tensor:
    return _unary("sqrt", x, lambda g, x, out: g / (out * 2.0))


@op
def rsqrt(x: Tensor) -> Tensor:
    """1 / sqrt(x)"""
    return _unary("rsqrt", x, lambda g, x, out: g * out * out * out * -0.5)


_GELU_K = math.sqrt(2.0 / math.pi)


def _gelu_tanh_grad(g: Tensor, x: Tensor, out: Tensor) -> Tensor:
    """d/dx of 0.5 x (1 + tanh(k (x + 0.044715 x³)))"""
    x2 = x * x
    t = tanh((x + x2 * x * 0.044715) * _GELU_K)
    return g * ((t + 1.0) * 0.5 + x * (1.0 - t * t) * (x2 * (3 * 0.044715) + 1.0) * (0.5 * _GELU_K))


@op
def gelu(x: Tensor, approximate: str = "tanh") -> Tensor:
    """GELU, tanh approximation by default (candle's ``gelu``); ``approximate="none"`` is exact."""
    if approximate == "none":
        return gelu_erf(x)
    return _unary("gelu", x, _gelu_tanh_grad)


@op
def gelu_erf(x: Tensor) -> Tensor:
    """Exact GELU, x Φ(x) = 0.5 x (1 + erf(x / √2)); d/dx = Φ(x) + x φ(x)."""
    inv_sqrt_2pi = 1.0 / math.sqrt(2.0 * math.pi)
    return _unary(
        "gelu_erf",
        x,
        lambda g, x, out: (
            g
            * ((erf(x * (1.0 / math.sqrt(2.0))) + 1.0) * 0.5 + x * exp(x * x * -0.5) * inv_sqrt_2pi)
        ),
    )


@op
def erf(x: Tensor) -> Tensor:
    return _unary("erf", x, lambda g, x, out: g * exp(-(x * x)) * (2.0 / math.sqrt(math.pi)))


def _relu_grad(g: Tensor, x: Tensor, out: Tensor) -> Tensor:
    """0 where x <= 0, else g (torch's threshold_backward: NaN in x passes g through), in one
    backend pass where the device has one that takes these operands."""
    if g.dtype is x.dtype and supports(x._storage, "relu_backward"):
        gx = x._storage.relu_backward(x._layout, g._storage, g._layout)
        if gx is not None:
            return new(gx, x.shape, x.dtype, x.device)
    return where(x <= 0, 0.0, g)


@op
def relu(x: Tensor) -> Tensor:
    return _unary("relu", x, _relu_grad, float_only=False)


@op
def silu(x: Tensor) -> Tensor:
    """x σ(x); d/dx = σ(x) (1 + x (1 - σ(x)))"""

    def backward(g: Tensor, x: Tensor, out: Tensor) -> Tensor:
        s = sigmoid(x)
        return g * s * (x * (1.0 - s) + 1.0)

    return _unary("silu", x, backward)


@op
def sigmoid(x: Tensor) -> Tensor:
    return _unary("sigmoid", x, lambda g, x, out: g * out * (1.0 - out))


@op
def ceil(x: Tensor) -> Tensor:
    return _unary("ceil", x, _zero_grad, float_only=False)


@op
def floor(x: Tensor) -> Tensor:
    return _unary("floor", x, _zero_grad, float_only=False)


@op
def round(x: Tensor) -> Tensor:
    """Round half to even, as PyTorch."""
    return _unary("round", x, _zero_grad, float_only=False)


@op
def sign(x: Tensor) -> Tensor:
    return _unary("sign", x, _zero_grad, float_only=False)


@op
def log1p(x: Tensor) -> Tensor:
    return _unary("log1p", x, lambda g, x, out: g / (x + 1.0))


@op
def expm1(x: Tensor) -> Tensor:
    return _unary("expm1", x, lambda g, x, out: g * (out + 1.0))


@op
def asin(x: Tensor) -> Tensor:
    return _unary("asin", x, lambda g, x, out: g * rsqrt(1.0 - x * x))


@op
def acos(x: Tensor) -> Tensor:
    return _unary("acos", x, lambda g, x, out: -(g * rsqrt(1.0 - x * x)))


@op
def atan(x: Tensor) -> Tensor:
    return _unary("atan", x, lambda g, x, out: g / (x * x + 1.0))


@op
def sinh(x: Tensor) -> Tensor:
    return _unary("sinh", x, lambda g, x, out: g * cosh(x))


@op
def cosh(x: Tensor) -> Tensor:
    return _unary("cosh", x, lambda g, x, out: g * sinh(x))


def _bool_unary(name: str, x: Tensor) -> Tensor:
    return new(x._storage.unary(name, x._layout), x.shape, dt.bool_, x.device)


@op
def logical_not(x: Tensor) -> Tensor:
    return _bool_unary("logical_not", x)


@op
def isnan(x: Tensor) -> Tensor:
    return _bool_unary("isnan", x)


@op
def isinf(x: Tensor) -> Tensor:
    return _bool_unary("isinf", x)


@op
def isfinite(x: Tensor) -> Tensor:
    return logical_not(logical_or(isnan(x), isinf(x)))


@op
def elu(x: Tensor, alpha: float = 1.0) -> Tensor:
    """x if x > 0 else α (eˣ - 1)"""
    out = new(x._storage.elu(x._layout, float(alpha)), x.shape, x.dtype, x.device)

    value = out.detach()

    def backward(g: Tensor) -> tuple[Tensor]:
        positive = (x > 0).to_dtype(g.dtype)
        return (g * (positive + (1.0 - positive) * (value + alpha)),)

    return record(out, "elu", (x,), backward, saved=(x, value))


@op
def powf(x: Tensor, exponent: float) -> Tensor:
    """xᵉ for a float exponent."""
    out = new(x._storage.powf(x._layout, float(exponent)), x.shape, x.dtype, x.device)
    return record(
        out, "powf", (x,), lambda g: (g * powf(x, exponent - 1.0) * exponent,), saved=(x,)
    )


@op
def affine(x: Tensor, mul: float, add: float) -> Tensor:
    """x · mul + add in one pass."""
    out = new(x._storage.affine(x._layout, float(mul), float(add)), x.shape, x.dtype, x.device)
    return record(out, "affine", (x,), lambda g: (g * mul,))


@op
def clamp(x: Tensor, min: float | None = None, max: float | None = None) -> Tensor:
    """Limit values to [min, max]; the gradient flows where min ≤ x ≤ max."""
    out = new(x._storage.clamp(x._layout, min, max), x.shape, x.dtype, x.device)

    def backward(g: Tensor) -> tuple[Tensor]:
        inside = ones_mask = None
        if min is not None:
            inside = x >= min
        if max is not None:
            ones_mask = x <= max
            inside = ones_mask if inside is None else logical_and(inside, ones_mask)
        return (g if inside is None else g * inside.to_dtype(g.dtype),)

    return record(out, "clamp", (x,), backward, saved=(x,))


# -- casts -----------------------------------------------------------------------------------
@op
def to_dtype(x: Tensor, dtype: DType | str) -> Tensor:
    """The values converted to ``dtype`` (float to int truncates towards zero, as PyTorch)."""
    if dtype is not x.dtype:
        dtype = _target_dtype(x, dtype)
    if dtype is x.dtype:
        return x
    out = new(x._storage.cast(x._layout, dtype.name), x.shape, dtype, x.device)
    if dtype.is_floating_point and x.dtype.is_floating_point:
        return record(out, "to_dtype", (x,), lambda g: (to_dtype(g, x.dtype),))
    return out


def _target_dtype(x: Tensor, spec) -> DType:
    """``spec`` as a DType, naming the op and operand when it is none (``np.dtype(None)`` would
    silently be float64)."""
    try:
        if spec is None:
            raise DTypeError("expected a dtype, found None")
        return dt.dtype(spec)
    except (DTypeError, TypeError, ValueError) as exc:  # numpy's own for other objects
        raise DTypeError(f"to_dtype: cannot convert {describe(x)}: {exc}") from None


# -- binary ----------------------------------------------------------------------------------
def _binary(name: str, a, b, backward) -> Tensor:
    """``a name b`` for tensors or scalars, with broadcasting and type promotion."""
    profiler = HOOK.active
    if profiler is not None:
        return profiler.run(name, _binary_impl, (name, a, b, backward), {})
    return _binary_impl(name, a, b, backward)


def _binary_impl(name: str, a, b, backward) -> Tensor:
    if not isinstance(b, Tensor):
        if not isinstance(a, Tensor):
            raise DTypeError(f"{name}: expected at least one tensor, found {a!r} and {b!r}")
        if not isinstance(b, np.ndarray):
            return _binary_scalar(name, a, b, False, backward)
        b = _from_array(b, a)
    elif not isinstance(a, Tensor):
        if not isinstance(a, np.ndarray):
            return _binary_scalar(name, b, a, True, backward)
        a = _from_array(a, b)
    if a.dtype is not b.dtype or a.device is not b.device:
        a, b, _ = promote(name, a, b)
    la = a._layout
    lb = b._layout
    shape = la.shape
    if shape != lb.shape:
        shape = broadcast_shapes(name, la.shape, lb.shape)
        if la.shape != shape:
            la = la.broadcast_to(shape)
        if lb.shape != shape:
            lb = lb.broadcast_to(shape)
    # make(), inlined: this is the hottest path of all
    out = _new(Tensor)
    out._storage = a._storage.binary(name, la, b._storage, lb)
    out._layout = _contiguous(shape)
    out.dtype = a.dtype
    out.device = a.device
    out.requires_grad = False
    out._node = out.grad = out._base = None
    if (a.requires_grad or b.requires_grad) and backward is not None and GRAD_ENABLED.get():
        value = out.detach()
        record(
            out,
            name,
            (a, b),
            lambda g: tuple(
                None if gi is None else sum_to_shape(gi, t.shape)
                for gi, t in zip(backward(g, a, b, value), (a, b), strict=True)
            ),
            saved=() if name in _NOTHING_SAVED else (a, b, value),
        )
    return out


def _from_array(array: np.ndarray, like: Tensor) -> Tensor:
    """A numpy operand (``ndarray + tensor``) as a tensor on the other operand's device."""
    from .creation import tensor

    return tensor(array, device=like.device)


def _check_scalar(name: str, x: Tensor, s) -> None:
    """Raise a DTypeError naming the op when ``s`` is not a bool, int or float."""
    try:
        dt.scalar_category(s)
    except DTypeError as exc:
        raise DTypeError(f"{name}: {describe(x)} with {type(s).__name__} operand: {exc}") from None


def _binary_scalar(name: str, x: Tensor, s, reverse: bool, backward) -> Tensor:
    try:
        x, dtype = scalar_operand(name, x, s)
    except DTypeError:
        _check_scalar(name, x, s)
        raise
    if name == "div" and not dtype.is_floating_point:
        x, dtype = to_dtype(x, dt.f32), dt.f32
    storage = x._storage.binary_scalar(name, x._layout, s, reverse)
    out = make(storage, _contiguous(x.shape), dtype, x.device)
    if x.requires_grad and GRAD_ENABLED.get() and backward is not None:
        value = out.detach()
        saved = () if name in _NOTHING_SAVED_SCALAR and not reverse else (x, value)
        if reverse:
            record(out, name, (x,), lambda g: (backward(g, s, x, value)[1],), saved=saved)
        else:
            record(out, name, (x,), lambda g: (backward(g, x, s, value)[0],), saved=saved)
    return out


# Ops whose gradient reads none of the operands' values (so in-place changes are harmless).
_NOTHING_SAVED = ("add", "sub")
_NOTHING_SAVED_SCALAR = ("add", "sub", "mul", "div")


def _add_grad(g, a, b, out):
    return g, g


def _sub_grad(g, a, b, out):
    return g, -g


def _mul_grad(g, a, b, out):
    return g * b, g * a


def _div_grad(g, a, b, out):
    return g / b, -(g * out / b)


def _max_grad(g, a, b, out):
    """Ties split the gradient evenly between both sides, as PyTorch."""
    wa = (a > b).to_dtype(g.dtype) + (a == b).to_dtype(g.dtype) * 0.5
    return g * wa, g * (1.0 - wa)


def _min_grad(g, a, b, out):
    wa = (a < b).to_dtype(g.dtype) + (a == b).to_dtype(g.dtype) * 0.5
    return g * wa, g * (1.0 - wa)


def _pow_grad(g, a, b, out):
    """d(aᵇ)/da = b aᵇ⁻¹, 0 where b = 0 (also at a = 0, where 0 · 0⁻¹ would be NaN);
    d(aᵇ)/db = aᵇ ln a, 0 where a = 0 and b ≥ 0 (-inf where b < 0), NaN where a < 0: PyTorch's
    conventions."""
    ga = gb = None
    if isinstance(a, Tensor):
        if not isinstance(b, Tensor):
            ga = g * 0.0 if b == 0 else g * b * pow(a, b - 1.0)
        else:
            ga = where(b == 0, 0.0, g * b * pow(a, b - 1.0))
    if isinstance(b, Tensor):
        ln_a = log(a) if isinstance(a, Tensor) else _scalar_log(a)
        gb = g * out * ln_a
        gb = where((b >= 0) & (a == 0), 0.0, gb)
    return ga, gb


def _scalar_log(a: float) -> float:
    """ln a with IEEE's special values (math.log raises where they are -inf and NaN)."""
    return math.log(a) if a > 0 else (-math.inf if a == 0 else math.nan)


def _atan2_grad(g, a, b, out):
    denominator = a * a + b * b
    return g * b / denominator, -(g * a / denominator)


def _remainder_grad(g, a, b, out):
    return g, (-(g * floor_div(a, b)) if isinstance(b, Tensor) else None)


def _no_grad2(g, a, b, out):
    return (g * 0.0 if isinstance(a, Tensor) else None), (
        g * 0.0 if isinstance(b, Tensor) else None
    )


def _true_div_operands(a, b):
    """Integer division gives floats (``/`` is true division, as in Python and PyTorch)."""
    if isinstance(a, Tensor) and not a.dtype.is_floating_point:
        if not (isinstance(b, Tensor) and b.dtype.is_floating_point):
            a = to_dtype(a, dt.f32)
    if isinstance(b, Tensor) and not b.dtype.is_floating_point:
        if not (isinstance(a, Tensor) and a.dtype.is_floating_point):
            b = to_dtype(b, dt.f32)
    return a, b


# The four arithmetic ops skip ``_binary`` (one call less) when no profiler listens.
def _scaled(b, alpha):
    """alpha · b for add/sub's ``alpha`` (b a tensor or a Python number)."""
    return mul(b, alpha) if isinstance(b, Tensor) else b * alpha


@hot_op
def add(a, b, *, alpha: float = 1) -> Tensor:
    """a + alpha · b"""
    if alpha != 1:
        b = _scaled(b, alpha)
    if HOOK.active is None:
        return _binary_impl("add", a, b, _add_grad)
    return _binary("add", a, b, _add_grad)


@hot_op
def sub(a, b, *, alpha: float = 1) -> Tensor:
    """a - alpha · b"""
    if alpha != 1:
        b = _scaled(b, alpha)
    if HOOK.active is None:
        return _binary_impl("sub", a, b, _sub_grad)
    return _binary("sub", a, b, _sub_grad)


@hot_op
def mul(a, b) -> Tensor:
    if HOOK.active is None:
        return _binary_impl("mul", a, b, _mul_grad)
    return _binary("mul", a, b, _mul_grad)


@hot_op
def div(a, b, *, rounding_mode: str | None = None) -> Tensor:
    """a / b; ``rounding_mode="trunc"`` rounds the quotient towards zero, ``"floor"`` down
    (integer operands then stay integers, as in PyTorch)."""
    if rounding_mode is None:
        return _binary("div", *_true_div_operands(a, b), _div_grad)
    if rounding_mode == "floor":
        return floor_div(a, b)
    if rounding_mode == "trunc":
        return _trunc_div(a, b)
    raise DTypeError(
        f"div: rounding_mode must be None, 'trunc' or 'floor', found {rounding_mode!r}"
    )


def _is_float(v) -> bool:
    return v.dtype.is_floating_point if isinstance(v, Tensor) else isinstance(v, float)


def _trunc_div(a, b) -> Tensor:
    """The quotient rounded towards zero: (a - fmod(a, b)) // b exactly for integers; for
    floats, the true quotient rounded (ceil below zero, floor above)."""
    if not (_is_float(a) or _is_float(b)):
        return floor_div(sub(a, fmod(a, b)), b)
    q = div(a, b)
    return where(q < 0, ceil(q), floor(q))


@op
def maximum(a, b) -> Tensor:
    return _binary("maximum", a, b, _max_grad)


@op
def minimum(a, b) -> Tensor:
    return _binary("minimum", a, b, _min_grad)


@op
def pow(a, b) -> Tensor:
    """aᵇ elementwise (tensor or scalar on either side)."""
    return _binary("pow", a, b, _pow_grad)


def _check_integer_divisor(name: str, a, b) -> None:
    """Integer division by zero raises, as in PyTorch and Python (numpy silently gives 0)."""
    if _is_float(a) or _is_float(b):
        return
    zero = bool((b == 0).any().item()) if isinstance(b, Tensor) else b == 0
    if zero:
        operands = " and ".join(describe(v) if isinstance(v, Tensor) else repr(v) for v in (a, b))
        raise DivisionByZero(f"{name}: integer division by zero ({operands})")


@op
def floor_div(a, b) -> Tensor:
    """floor(a / b); integer operands raise ``DivisionByZero`` where b is 0."""
    _check_integer_divisor("floor_div", a, b)
    return _binary("floor_div", a, b, _no_grad2)


@op
def remainder(a, b) -> Tensor:
    """a - floor(a / b) b: the result has the sign of b, as Python's % and PyTorch; integer
    operands raise ``DivisionByZero`` where b is 0."""
    _check_integer_divisor("remainder", a, b)
    return _binary("remainder", a, b, _remainder_grad)


@op
def atan2(a, b) -> Tensor:
    """The angle of the point (b, a), in (-π, π]; integers give floats, as PyTorch."""
    a, b = (_float_operand(v) for v in (a, b))
    return _binary("atan2", a, b, _atan2_grad)


def _fmod_grad(g, a, b, out):
    return g, (-(g * _trunc_div(a, b)) if isinstance(b, Tensor) else None)


@op
def fmod(a, b) -> Tensor:
    """a - trunc(a / b) b: the result has the sign of a (C's fmod; ``remainder`` follows b);
    integer operands raise ``DivisionByZero`` where b is 0."""
    _check_integer_divisor("fmod", a, b)
    return _binary("fmod", a, b, _fmod_grad)


def _copysign_grad(g, a, b, out):
    """d|a|·sign(b)/da = sign(a) sign(b) (0 at a = 0, as PyTorch); no gradient to b."""
    ga = where(a == 0, 0.0, g * out / a) if isinstance(a, Tensor) else None
    return ga, (g * 0.0 if isinstance(b, Tensor) else None)


@op
def copysign(a, b) -> Tensor:
    """|a| with the sign of b (-0.0 counts as negative); integers give floats, as PyTorch."""
    a, b = (_float_operand(v) for v in (a, b))
    return _binary("copysign", a, b, _copysign_grad)


def _float_operand(v):
    """Integer and bool tensors (and Python ints) as floats, for ops defined on reals only."""
    if isinstance(v, Tensor):
        return v if v.dtype.is_floating_point else to_dtype(v, dt.f32)
    return float(v) if isinstance(v, bool | int) else v


# -- bitwise -------------------------------------------------------------------------------
def _result_dtype(name: str, a, b) -> DType:
    """The dtype ``a op b`` computes in (one of them a tensor), by the promotion rules."""
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        return dt.promote_types(a.dtype, b.dtype)
    t, s = (a, b) if isinstance(a, Tensor) else (b, a)
    _check_scalar(name, t, s)
    return dt.result_type_with_scalar(t.dtype, s)


def _not_for_dtype(name: str, dtype: DType, expected: str, a, b=None) -> DTypeNotImplemented:
    """PyTorch's "not implemented for 'Float'": a NotImplementedError that is a DTypeError."""
    found = " and ".join(describe(v) if isinstance(v, Tensor) else repr(v) for v in (a, b)
                         if v is not None)  # fmt: skip
    return DTypeNotImplemented(
        f"{name}: not implemented for {dtype.name}; expected {expected}, found {found}"
    )


def _bitwise(name: str, logical_name: str, a, b) -> Tensor:
    """Integer operands combine bit by bit; bools stay logical (as in Python and PyTorch)."""
    tensors = [v for v in (a, b) if isinstance(v, Tensor)]
    if (
        tensors
        and all(v.dtype.is_bool for v in tensors)
        and all(isinstance(v, Tensor | bool) for v in (a, b))
    ):
        return _binary(logical_name, a, b, None)
    dtype = _result_dtype(name, a, b) if tensors else None
    if dtype is not None and dtype.is_floating_point:
        raise _not_for_dtype(name, dtype, "integer or bool operands", a, b)
    return _binary(name, a, b, None)  # (a bool tensor meeting an int one counts as 0/1)


@op
def bitwise_and(a, b) -> Tensor:
    return _bitwise("bitwise_and", "logical_and", a, b)


@op
def bitwise_or(a, b) -> Tensor:
    return _bitwise("bitwise_or", "logical_or", a, b)


@op
def bitwise_xor(a, b) -> Tensor:
    return _bitwise("bitwise_xor", "logical_xor", a, b)


@op
def bitwise_not(x: Tensor) -> Tensor:
    """~x: the bits flipped for integers (-x - 1 in two's complement), ``not`` for bools."""
    if x.dtype.is_bool:
        return logical_not(x)
    if x.dtype.is_floating_point:
        raise _not_for_dtype("bitwise_not", x.dtype, "an integer or bool tensor", x)
    return _unary("bitwise_not", x, None, float_only=False)


def _shift(name: str, a, b) -> Tensor:
    """Shifts in the promoted integer dtype: a bool tensor shifted by an int is shifted as
    i64 (as in PyTorch); bools alone and floats have no shift."""
    dtype = _result_dtype(name, a, b)
    if not dtype.is_integer:
        raise _not_for_dtype(name, dtype, "integer operands", a, b)
    a, b = (
        (to_dtype(v, dtype) if v.dtype.is_bool else v) if isinstance(v, Tensor) else int(v)
        for v in (a, b)
    )
    return _binary(name, a, b, None)


@op
def bitwise_left_shift(a, b) -> Tensor:
    """a << b (a · 2ᵇ, wrapping in a's width); shifts by the width or more give 0."""
    return _shift("left_shift", a, b)


@op
def bitwise_right_shift(a, b) -> Tensor:
    """a >> b (floor(a / 2ᵇ), the sign kept)."""
    return _shift("right_shift", a, b)


def _truth(x):
    """Nonzero is true: operands of the logical ops as bools."""
    return to_dtype(x, dt.bool_) if isinstance(x, Tensor) else bool(x)


def _logical(name: str, a, b) -> Tensor:
    return _binary(name, _truth(a), _truth(b), None)


@op
def logical_and(a, b) -> Tensor:
    return _logical("logical_and", a, b)


@op
def logical_or(a, b) -> Tensor:
    return _logical("logical_or", a, b)


@op
def logical_xor(a, b) -> Tensor:
    return _logical("logical_xor", a, b)


# -- comparisons -------------------------------------------------------------------------
def _cmp(name: str, a: Tensor, b) -> Tensor:
    if not isinstance(b, Tensor):
        if isinstance(b, np.ndarray):
            b = _from_array(b, a)
        else:
            _check_scalar(name, a, b)
            storage = a._storage.cmp_scalar(name, a._layout, b)
            return new(storage, a.shape, dt.bool_, a.device)
    if a.dtype is not b.dtype or a.device is not b.device:
        a, b, _ = promote(name, a, b)
    la, lb = a._layout, b._layout
    shape = la.shape
    if shape != lb.shape:
        shape = broadcast_shapes(name, la.shape, lb.shape)
        la, lb = la.broadcast_to(shape), lb.broadcast_to(shape)
    return new(a._storage.cmp(name, la, b._storage, lb), shape, dt.bool_, a.device)


@op
def eq(a: Tensor, b) -> Tensor:
    return _cmp("eq", a, b)


@op
def ne(a: Tensor, b) -> Tensor:
    return _cmp("ne", a, b)


@op
def lt(a: Tensor, b) -> Tensor:
    return _cmp("lt", a, b)


@op
def le(a: Tensor, b) -> Tensor:
    return _cmp("le", a, b)


@op
def gt(a: Tensor, b) -> Tensor:
    return _cmp("gt", a, b)


@op
def ge(a: Tensor, b) -> Tensor:
    return _cmp("ge", a, b)


# -- where -----------------------------------------------------------------------------------
@op
def where(condition: Tensor, x, y) -> Tensor:
    """``x`` where ``condition`` is true, else ``y`` (tensors or scalars, broadcast)."""
    from .creation import full

    if not isinstance(condition, Tensor):
        raise DTypeError(f"where: condition must be a tensor, found {type(condition).__name__}")
    ref = x if isinstance(x, Tensor) else y if isinstance(y, Tensor) else None
    device = condition.device
    if ref is None:
        dtype = dt.promote_types(
            dt.DEFAULT_FOR_CATEGORY[dt.scalar_category(x)],
            dt.DEFAULT_FOR_CATEGORY[dt.scalar_category(y)],
        )
    else:
        dtype = ref.dtype
        other = y if ref is x else x
        if isinstance(other, Tensor):
            dtype = dt.promote_types(x.dtype, y.dtype)
        else:
            dtype = dt.result_type_with_scalar(dtype, other)
    xt = x if isinstance(x, Tensor) else full((), fill_value=x, dtype=dtype, device=device)
    yt = y if isinstance(y, Tensor) else full((), fill_value=y, dtype=dtype, device=device)
    xt, yt = (
        (xt if xt.dtype is dtype else to_dtype(xt, dtype)),
        (yt if yt.dtype is dtype else to_dtype(yt, dtype)),
    )
    if condition.dtype is not dt.bool_:
        condition = condition != 0
    shape = broadcast_shapes("where", condition.shape, xt.shape, yt.shape)
    for t in (xt, yt):
        if t.device is not device:
            raise DTypeError(f"where: {describe(t)} is not on {device} like the condition")
    storage = condition._storage.where(
        condition._layout.broadcast_to(shape),
        xt._storage,
        xt._layout.broadcast_to(shape),
        yt._storage,
        yt._layout.broadcast_to(shape),
    )
    out = new(storage, shape, dtype, device)

    def backward(g: Tensor):
        zero = g * 0.0
        gx = sum_to_shape(where(condition, g, zero), xt.shape) if xt.requires_grad else None
        gy = sum_to_shape(where(condition, zero, g), yt.shape) if yt.requires_grad else None
        return gx, gy

    return record(out, "where", (xt, yt), backward)


@op
def masked_fill(x: Tensor, mask: Tensor, value: float) -> Tensor:
    """``x`` with ``value`` where ``mask`` is true (a bool mask broadcasting to x, as PyTorch
    requires: a float mask's "non-zero is true" hides bugs)."""
    if not isinstance(mask, Tensor) or mask.dtype is not dt.bool_:
        found = describe(mask) if isinstance(mask, Tensor) else type(mask).__name__
        raise DTypeError(f"masked_fill: the mask must be a bool tensor, found {found}")
    return where(mask, value, x)
