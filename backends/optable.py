"""The op table: every elementwise and reduction op as one row.

A row holds the op's name, kind and arity, the dtypes it takes, its maths for the GPU kernels
(an expression in ``x`` for unary ops, ``a`` and ``b`` for binary ones, with ``C`` the compute
type) and its numpy reference. From it come:

- the CPU backend's dispatch dicts (``backends/cpu/elementwise.py``: the reference, unless the
  CPU has a faster implementation of the same maths, which ``tests/test_optable.py`` checks
  against the reference),
- the CUDA kernel names (``backends/cuda/kernels.py``),
- ``kernels/gpu/optable.h``, the X-macro lists the (CUDA and Metal) kernels instantiate, made by
  ``python -m workbench.backends.optable`` (a test fails when the file is stale).

Adding a unary op is one row here plus its gradient in ``workbench/ops``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .lazy import lazy_module

special = lazy_module("scipy.special")  # imported at the first call of erf / expit

FLOAT, INT, BOOL = "float", "int", "bool"


@dataclass(frozen=True, slots=True)
class Op:
    """One op. ``gpu`` / ``gpu_int``: the kernel maths for float / integer inputs (None: the
    op takes no such input on GPUs); ``gpu_any``: one expression for every dtype, bool
    included. ``result`` is "same" or "bool". ``exact``: the result of a half-precision input
    is exact in its own dtype (no f32 round trip needed); ``upcast``: numpy has no precise half
    loop for it, compute halves in f32. A reduction's ``gpu_any`` combines two partials ``a``
    and ``b`` of the accumulator type ``A`` (for an arg-reduction: "value a beats value b"),
    and ``gpu_init`` is its identity (None for arg-reductions, which start from an element)."""

    name: str
    kind: str  # unary | binary | cmp | reduce
    numpy: Callable
    gpu: str | None = None
    gpu_int: str | None = None
    gpu_any: str | None = None
    result: str = "same"
    exact: bool = False
    upcast: bool = False
    gpu_init: str | None = None

    @property
    def arity(self) -> int:
        return 1 if self.kind in ("unary", "reduce") else 2

    @property
    def dtypes(self) -> tuple[str, ...]:
        """The dtype kinds the op takes."""
        if self.gpu_any is not None or self.kind == "cmp":
            return (BOOL, INT, FLOAT)
        return tuple(k for k, e in ((INT, self.gpu_int), (FLOAT, self.gpu)) if e is not None)


_SQRT_2_OVER_PI = float(np.sqrt(2.0 / np.pi))
_INV_SQRT_2 = float(1.0 / np.sqrt(2.0))


def _gelu_tanh(x):
    """0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))"""
    return 0.5 * x * (1.0 + np.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)))


def _gelu_erf(x):
    """x Φ(x) = 0.5 x (1 + erf(x / sqrt(2)))"""
    return 0.5 * x * (1.0 + special.erf(x * _INV_SQRT_2))


def _relu(x):
    """max(x, 0), NaN kept."""
    return np.maximum(x, np.zeros((), x.dtype))


def _unary(name, numpy, gpu=None, gpu_int=None, **flags) -> Op:
    return Op(name, "unary", numpy, gpu, gpu_int, **flags)


def _binary(name, numpy, gpu=None, gpu_int=None, **flags) -> Op:
    return Op(name, "binary", numpy, gpu, gpu_int, **flags)


def _reduce(name, numpy, combine, identity=None, **flags) -> Op:
    return Op(name, "reduce", numpy, gpu_any=combine, gpu_init=identity, **flags)


def _limit_at_minus_inf(expr: str) -> str:
    """``expr`` = x·g(x) with g(-inf) = 0, taking its limit -0 at x = -inf (not 0·inf = nan)."""
    return f"(x < (C)0 && isinf(x)) ? -(C)0 : {expr}"


_GELU = _limit_at_minus_inf(
    "(C)0.5 * x * ((C)1 + tanh((C)0.7978845608028654 * (x + (C)0.044715 * x * x * x)))"
)

OPS: tuple[Op, ...] = (
    _unary("exp", np.exp, "exp(x)"),
    _unary("log", np.log, "log(x)"),
    _unary("sin", np.sin, "sin(x)"),
    _unary("cos", np.cos, "cos(x)"),
    _unary("tan", np.tan, "tan(x)"),
    _unary("tanh", np.tanh, "tanh(x)"),
    _unary("abs", np.abs, "fabs(x)", "int_abs(x)", exact=True),
    _unary("neg", np.negative, "-x", "(C)(-x)", exact=True),
    _unary("recip", np.reciprocal, "(C)1 / x"),
    _unary("sqr", np.square, "x * x", "(C)(x * x)", exact=True),
    _unary("sqrt", np.sqrt, "sqrt(x)"),
    _unary("rsqrt", lambda x: 1.0 / np.sqrt(x), "(C)1 / sqrt(x)"),
    _unary("gelu", _gelu_tanh, _GELU),
    _unary(
        "gelu_erf",
        _gelu_erf,
        _limit_at_minus_inf("(C)0.5 * x * ((C)1 + erf(x * (C)0.7071067811865476))"),
    ),
    _unary("erf", lambda x: special.erf(x), "erf(x)"),
    _unary("relu", _relu, "(x != x || x > (C)0) ? x : (C)0", "x > (C)0 ? x : (C)0", exact=True),
    _unary("silu", lambda x: x * special.expit(x), _limit_at_minus_inf("x / ((C)1 + exp(-x))")),
    _unary("sigmoid", lambda x: special.expit(x), "(C)1 / ((C)1 + exp(-x))"),
    _unary("ceil", np.ceil, "ceil(x)", "x", exact=True),
    _unary("floor", np.floor, "floor(x)", "x", exact=True),
    _unary("round", np.round, "rint(x)", "x", exact=True),
    _unary("sign", np.sign, "x != x ? x : (C)((x > (C)0) - (x < (C)0))", "int_sign(x)", exact=True),
    Op("logical_not", "unary", np.logical_not, gpu_any="x == (C)0", result=BOOL),
    _unary("log1p", np.log1p, "log1p(x)"),
    _unary("expm1", np.expm1, "expm1(x)"),
    _unary("asin", np.arcsin, "asin(x)"),
    _unary("acos", np.arccos, "acos(x)"),
    _unary("atan", np.arctan, "atan(x)"),
    _unary("sinh", np.sinh, "sinh(x)"),
    _unary("cosh", np.cosh, "cosh(x)"),
    _unary("isnan", np.isnan, "x != x", "false", result=BOOL),
    _unary("isinf", np.isinf, "isinf(x)", "false", result=BOOL),
    _unary("bitwise_not", np.invert, None, "(C)(~x)", exact=True),
    _binary("add", np.add, "a + b", "a + b"),
    _binary("sub", np.subtract, "a - b", "a - b"),
    _binary("mul", np.multiply, "a * b", "a * b"),
    _binary("div", np.true_divide, "a / b"),
    _binary("maximum", np.maximum, "(a != a || a > b) ? a : b", "a > b ? a : b"),
    _binary("minimum", np.minimum, "(a != a || a < b) ? a : b", "a < b ? a : b"),
    _binary("pow", np.power, "pow(a, b)", "int_pow(a, b)", upcast=True),
    _binary("floor_div", np.floor_divide, "floor(a / b)", "int_floor_div(a, b)", upcast=True),
    _binary("remainder", np.remainder, "py_remainder(a, b)", "int_remainder(a, b)", upcast=True),
    _binary("atan2", np.arctan2, "atan2(a, b)", upcast=True),
    _binary("fmod", np.fmod, "fmod(a, b)", "b == (C)0 ? (C)0 : (C)(a % b)", upcast=True),
    _binary("copysign", np.copysign, "copysign(a, b)", upcast=True),
    _binary("bitwise_and", np.bitwise_and, None, "(C)(a & b)"),
    _binary("bitwise_or", np.bitwise_or, None, "(C)(a | b)"),
    _binary("bitwise_xor", np.bitwise_xor, None, "(C)(a ^ b)"),
    # Shifts by a negative amount or by the width or more: 0 (>> of a negative: -1), as numpy.
    _binary(
        "left_shift",
        np.left_shift,
        None,
        "(b < (C)0 || b >= (C)(sizeof(C) * 8)) ? (C)0 : (C)(a << b)",
    ),
    _binary(
        "right_shift",
        np.right_shift,
        None,
        "(b < (C)0 || b >= (C)(sizeof(C) * 8)) ? (C)(a < (C)0 ? -1 : 0) : (C)(a >> b)",
    ),
    Op("logical_and", "binary", np.logical_and, gpu_any="(a != (C)0) && (b != (C)0)", result=BOOL),
    Op("logical_or", "binary", np.logical_or, gpu_any="(a != (C)0) || (b != (C)0)", result=BOOL),
    Op("logical_xor", "binary", np.logical_xor, gpu_any="(a != (C)0) != (b != (C)0)", result=BOOL),
    Op("eq", "cmp", np.equal, gpu_any="a == b", result=BOOL),
    Op("ne", "cmp", np.not_equal, gpu_any="a != b", result=BOOL),
    Op("lt", "cmp", np.less, gpu_any="a < b", result=BOOL),
    Op("le", "cmp", np.less_equal, gpu_any="a <= b", result=BOOL),
    Op("gt", "cmp", np.greater, gpu_any="a > b", result=BOOL),
    Op("ge", "cmp", np.greater_equal, gpu_any="a >= b", result=BOOL),
    # Reductions: the result dtype rule lives in ``reduce_out_dtype``. NaN wins max/min (as
    # numpy and PyTorch); any/all test the values' own type against zero (0.5 is true).
    _reduce("sum", np.sum, "a + b", "(A)0"),
    _reduce("prod", np.prod, "a * b", "(A)1"),
    _reduce("max", np.max, "(a != a || a > b) ? a : b", "wb_lowest<A>()"),
    _reduce("min", np.min, "(a != a || a < b) ? a : b", "wb_highest<A>()"),
    _reduce("any", np.any, "(A)((a != (A)0) || (b != (A)0))", "(A)0", result=BOOL),
    _reduce("all", np.all, "(A)((a != (A)0) && (b != (A)0))", "(A)1", result=BOOL),
    _reduce("argmax", np.argmax, "a > b"),
    _reduce("argmin", np.argmin, "a < b"),
)
BY_NAME: dict[tuple[str, str], Op] = {(op.kind, op.name): op for op in OPS}


def ops(kind: str) -> tuple[Op, ...]:
    return tuple(op for op in OPS if op.kind == kind)


def names(kind: str, **where) -> tuple[str, ...]:
    """Names of the ``kind`` ops whose fields equal ``where`` (``dtype=INT``: ops taking ints)."""
    dtype = where.pop("dtype", None)
    return tuple(
        op.name
        for op in ops(kind)
        if (dtype is None or dtype in op.dtypes)
        and all(getattr(op, k) == v for k, v in where.items())
    )


def numpy_table(kind: str) -> dict[str, Callable]:
    """``{name: numpy reference}`` for the ``kind`` ops."""
    return {op.name: op.numpy for op in ops(kind)}


def reduce_out_dtype(op: str, dtype: str) -> str:
    """The dtype a reduction's kernel writes: sums and products of integers in i64 (as
    PyTorch), arg-reductions i64 indices, any/all bool, max/min the input's dtype."""
    if op in ("sum", "prod"):
        return dtype if dtype in ("f16", "bf16", "f32", "f64") else "i64"
    if op in ("argmax", "argmin"):
        return "i64"
    if op in ("any", "all"):
        return "bool"
    return dtype


# -- the generated kernel header -------------------------------------------------------------
HEADER = Path(__file__).resolve().parent.parent / "kernels" / "gpu" / "optable.h"

_LISTS = (
    # macro, kind, expression field, result
    ("WB_FLOAT_UNARY", "unary", "gpu", "same"),
    ("WB_FLOAT_BOOL_UNARY", "unary", "gpu", BOOL),
    ("WB_INT_UNARY", "unary", "gpu_int", "same"),
    ("WB_INT_BOOL_UNARY", "unary", "gpu_int", BOOL),
    ("WB_ANY_BOOL_UNARY", "unary", "gpu_any", BOOL),
    ("WB_FLOAT_BINARY", "binary", "gpu", "same"),
    ("WB_INT_BINARY", "binary", "gpu_int", "same"),
    ("WB_LOGICAL_BINARY", "binary", "gpu_any", BOOL),
    ("WB_CMP_OPS", "cmp", "gpu_any", BOOL),
)
# The reductions' lists, K(op, combine, identity, name, T), by what the kernel writes
# (reduce_out_dtype of an i32 input), and K(op, beats, name, T) for the arg-reductions.
_REDUCE_LISTS = (
    ("WB_WIDENING_REDUCE", "i64"),  # sum, prod: integers accumulate and write i64
    ("WB_VALUE_REDUCE", "i32"),  # max, min: the input's dtype
    ("WB_BOOL_REDUCE", BOOL),  # any, all
)


def header() -> str:
    """``kernels/gpu/optable.h``: per list ``#define LIST(K, name, T) K(op, expr, name, T)
    ...`` for the kernel sources to instantiate."""
    lines = [
        "// Generated from backends/optable.py by `python -m workbench.backends.optable`:",
        "// do not edit. Each list is K(op, expr, name, T) per op; the kernel sources define K.",
        "#pragma once",
    ]
    for macro, kind, field, result in _LISTS:
        rows = [op for op in ops(kind) if getattr(op, field) is not None and op.result == result]
        lines.append("")
        lines.append(f"#define {macro}(K, name, T) \\")
        lines += [f"    K({op.name}, {getattr(op, field)}, name, T) \\" for op in rows]
        lines.append("    /* end */")
    reductions = [op for op in ops("reduce") if op.gpu_any is not None]
    for macro, out in _REDUCE_LISTS:
        rows = [op for op in reductions if op.gpu_init is not None
                and reduce_out_dtype(op.name, "i32") == out]  # fmt: skip
        lines += ["", f"#define {macro}(K, name, T) \\"]
        lines += [f"    K({op.name}, {op.gpu_any}, {op.gpu_init}, name, T) \\" for op in rows]
        lines.append("    /* end */")
    args = [op for op in reductions if op.gpu_init is None]
    lines += ["", "#define WB_ARG_REDUCE(K, name, T) \\"]
    lines += [f"    K({op.name}, {op.gpu_any}, name, T) \\" for op in args]
    lines.append("    /* end */")
    return "\n".join(lines) + "\n"


def main() -> None:
    HEADER.write_text(header())
    print(f"wrote {HEADER}", file=sys.stderr)


if __name__ == "__main__":
    main()
