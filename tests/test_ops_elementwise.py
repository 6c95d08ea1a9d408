"""Elementwise ops against PyTorch: unary maths, binary arithmetic (broadcast, scalars on either
side), comparisons, ``where``/``masked_fill``, logical ops and in-place ops, forward and gradient,
across dtypes, layouts, broadcast shapes and empty or size-1 dims.

One table per family; ``op_check.check`` does every comparison.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from devices import OP_DEVICE_PARAMS
from op_check import check

import workbench as wb

FLOATS = (wb.f32, wb.f64, wb.f16, wb.bf16)
LAYOUTS = ("contiguous", "transposed", "sliced")


def uniform(shape, low=-2.0, high=2.0, seed=0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(low, high, shape)


def away_from_zero(shape, low=0.3, high=2.0, seed=0) -> np.ndarray:
    """Values with |x| in [low, high] and random signs (divisors, reciprocals)."""
    rng = np.random.default_rng(seed)
    return rng.uniform(low, high, shape) * rng.choice([-1.0, 1.0], shape)


# -- unary -----------------------------------------------------------------------------------
# name: (workbench fn, torch fn, input domain (low, high) or a maker)
UNARY = {
    "exp": (wb.exp, torch.exp, (-3, 3)),
    "log": (wb.log, torch.log, (0.1, 4)),
    "sin": (wb.sin, torch.sin, (-3, 3)),
    "cos": (wb.cos, torch.cos, (-3, 3)),
    "tan": (wb.tan, torch.tan, (-1.2, 1.2)),
    "tanh": (wb.tanh, torch.tanh, (-3, 3)),
    "abs": (wb.abs, torch.abs, (-3, 3)),
    "neg": (wb.neg, torch.neg, (-3, 3)),
    "recip": (wb.recip, torch.reciprocal, away_from_zero),
    "sqr": (wb.sqr, torch.square, (-3, 3)),
    "sqrt": (wb.sqrt, torch.sqrt, (0.1, 4)),
    "rsqrt": (wb.rsqrt, torch.rsqrt, (0.1, 4)),
    "gelu": (wb.gelu, lambda x: torch.nn.functional.gelu(x, approximate="tanh"), (-4, 4)),
    "gelu_erf": (wb.gelu_erf, torch.nn.functional.gelu, (-4, 4)),
    "gelu_none": (
        lambda x: wb.gelu(x, approximate="none"),
        lambda x: torch.nn.functional.gelu(x, approximate="none"),
        (-4, 4),
    ),
    "erf": (wb.erf, torch.erf, (-2, 2)),
    "relu": (wb.relu, torch.relu, (-3, 3)),
    "silu": (wb.silu, torch.nn.functional.silu, (-5, 5)),
    "sigmoid": (wb.sigmoid, torch.sigmoid, (-5, 5)),
    "ceil": (wb.ceil, torch.ceil, (-3, 3)),
    "floor": (wb.floor, torch.floor, (-3, 3)),
    "round": (wb.round, torch.round, (-3, 3)),
    "sign": (wb.sign, torch.sign, (-3, 3)),
    "clamp": (lambda x: x.clamp(-0.5, 1.0), lambda x: x.clamp(-0.5, 1.0), (-3, 3)),
    "clamp_min": (lambda x: x.clamp(min=0.2), lambda x: x.clamp(min=0.2), (-3, 3)),
    "clamp_max": (lambda x: x.clamp(max=0.2), lambda x: x.clamp(max=0.2), (-3, 3)),
    "powf": (lambda x: x.powf(2.5), lambda x: x.pow(2.5), (0.1, 3)),
    "powf_neg": (lambda x: x.powf(-1.5), lambda x: x.pow(-1.5), (0.3, 3)),
    "elu": (wb.elu, torch.nn.functional.elu, (-3, 3)),
    "elu_alpha": (lambda x: wb.elu(x, 0.5), lambda x: torch.nn.functional.elu(x, 0.5), (-3, 3)),
    "affine": (lambda x: x.affine(1.5, -0.25), lambda x: x * 1.5 - 0.25, (-3, 3)),
    "log1p": (wb.log1p, torch.log1p, (-0.9, 3)),
    "expm1": (wb.expm1, torch.expm1, (-3, 3)),
    "asin": (wb.asin, torch.asin, (-0.9, 0.9)),
    "acos": (wb.acos, torch.acos, (-0.9, 0.9)),
    "atan": (wb.atan, torch.atan, (-3, 3)),
    "sinh": (wb.sinh, torch.sinh, (-3, 3)),
    "cosh": (wb.cosh, torch.cosh, (-3, 3)),
}

# Gradients built from several half-precision ops round at every step, where PyTorch's fused
# CPU kernels round once: the difference is a few half-precision ulps of the largest term.
HALF_GRAD_TOL = {
    "gelu": 4e-2,
    "gelu_erf": 4e-2,
    "gelu_none": 4e-2,
    "silu": 4e-2,
    "tan": 4e-2,
    "powf": 4e-2,
    "powf_neg": 4e-2,
    "elu": 4e-2,
    "elu_alpha": 4e-2,
}


def unary_input(name: str, shape, seed=0) -> np.ndarray:
    domain = UNARY[name][2]
    return domain(shape, seed=seed) if callable(domain) else uniform(shape, *domain, seed=seed)


def half_tolerances(name: str, dtype: wb.DType) -> dict:
    if dtype in (wb.f16, wb.bf16) and name in HALF_GRAD_TOL:
        tol = HALF_GRAD_TOL[name] * (2 if dtype is wb.bf16 else 1)
        return {"grad_atol": tol, "grad_rtol": tol}
    return {}


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("name", UNARY)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_unary_dtypes(name, dtype, device):
    fn, torch_fn, _ = UNARY[name]
    check(
        fn,
        [unary_input(name, (3, 5))],
        dtype=dtype,
        torch_fn=torch_fn,
        **half_tolerances(name, dtype),
        device=device,
    )


@pytest.mark.parametrize("layout", ("transposed", "sliced"))
@pytest.mark.parametrize("name", UNARY)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_unary_layouts(name, layout, device):
    fn, torch_fn, _ = UNARY[name]
    check(fn, [unary_input(name, (4, 3, 2))], torch_fn=torch_fn, layouts=[layout], device=device)


@pytest.mark.parametrize("shape", [(), (1,), (0,), (2, 0, 3), (1, 1, 4)], ids=str)
@pytest.mark.parametrize("name", ["exp", "log", "gelu", "relu", "clamp", "powf", "elu", "affine"])
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_unary_odd_shapes(name, shape, device):
    fn, torch_fn, _ = UNARY[name]
    check(fn, [unary_input(name, shape)], torch_fn=torch_fn, device=device)


@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_unary_broadcast_input_gradient_sums_into_the_source(device):
    check(wb.exp, [np.full((3, 4), 0.5)], torch_fn=torch.exp, layouts=["broadcast"], device=device)


# Integer inputs: ops that keep the dtype stay integer; float maths promotes to f32, as PyTorch.
INT_UNARY = [
    "abs",
    "neg",
    "sign",
    "sqr",
    "relu",
    "ceil",
    "floor",
    "round",
    "exp",
    "sqrt",
    "sin",
    "sigmoid",
    "log1p",
]


@pytest.mark.parametrize(
    "np_dtype", [np.int64, np.int32, np.int16, np.int8], ids=lambda d: d.__name__
)
@pytest.mark.parametrize("name", INT_UNARY)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_unary_integers(name, np_dtype, device):
    fn, torch_fn, _ = UNARY[name]
    x = np.random.default_rng(0).integers(0 if name in ("sqrt", "log1p") else -5, 6, (3, 4))
    x = x.astype(np_dtype)
    out = fn(wb.tensor(x, device=device))
    expected = torch_fn(torch.tensor(x))
    assert out.dtype.torch_name == str(expected.dtype).removeprefix("torch.")
    check(fn, [x], torch_fn=torch_fn, device=device)


@pytest.mark.parametrize("name", ["abs", "sign", "relu", "sqr"])
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_unary_uint8(name, device):
    fn, torch_fn, _ = UNARY[name]
    check(
        fn, [np.array([[0, 1, 7], [200, 255, 3]], dtype=np.uint8)], torch_fn=torch_fn, device=device
    )


def test_gelu_approximations_differ():
    x = wb.tensor([-1.0, 0.5, 2.0])
    assert not np.allclose(wb.gelu(x).numpy(), wb.gelu_erf(x).numpy(), atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", ["relu", "abs", "clamp", "sign"])
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_unary_gradient_at_kinks_matches_torch(name, device):
    """Subgradient choices at 0 and at the clamp bounds (relu'(0) = 0, |x|'(0) = 0...)."""
    fn, torch_fn, _ = UNARY[name]
    check(fn, [np.array([-1.0, -0.5, 0.0, 1.0, 0.5, 2.0])], torch_fn=torch_fn, device=device)


@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_sign_of_nan_is_nan(device):
    """Documented difference: PyTorch's sign(NaN) is 0; workbench keeps NaN (as numpy, JAX and
    MLX do), so a NaN is never silently turned into a number."""
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, -2.0])
    out = wb.sign(wb.tensor(x, device=device)).numpy()
    assert np.isnan(out[0])
    check(wb.sign, [x[1:]], torch_fn=torch.sign, grad=False, device=device)


# -- binary ----------------------------------------------------------------------------------
BINARY = {
    "add": (wb.add, torch.add),
    "sub": (wb.sub, torch.sub),
    "mul": (wb.mul, torch.mul),
    "div": (wb.div, torch.div),
    "maximum": (wb.maximum, torch.maximum),
    "minimum": (wb.minimum, torch.minimum),
    "pow": (wb.pow, torch.pow),
    "floor_div": (wb.floor_div, lambda a, b: torch.div(a, b, rounding_mode="floor")),
    "remainder": (wb.remainder, torch.remainder),
    "atan2": (wb.atan2, torch.atan2),
}
OPERATORS = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "pow": lambda a, b: a**b,
    "floor_div": lambda a, b: a // b,
    "remainder": lambda a, b: a % b,
}
# PyTorch defines no gradient for floor division; workbench gives zeros (a step function).
NO_TORCH_GRAD = {"floor_div"}


def binary_inputs(name: str, shape_a, shape_b, seed=0) -> list[np.ndarray]:
    if name == "pow":  # positive base, so any real exponent is defined
        return [uniform(shape_a, 0.3, 2.0, seed), uniform(shape_b, -2.0, 2.0, seed + 1)]
    if name in ("div", "floor_div", "remainder", "atan2"):
        return [uniform(shape_a, -3, 3, seed), away_from_zero(shape_b, 0.4, 2.0, seed + 1)]
    return [uniform(shape_a, seed=seed), uniform(shape_b, seed=seed + 1)]


BROADCAST_SHAPES = [
    ((3, 4), (3, 4)),
    ((3, 4), (4,)),
    ((4,), (3, 4)),
    ((2, 1, 4), (3, 1)),
    ((3, 1), (1, 4)),
    ((), (2, 3)),
    ((2, 3), ()),
    ((1,), (1,)),
    ((0, 4), (4,)),
    ((2, 0), (1, 1)),
]


@pytest.mark.parametrize("shapes", BROADCAST_SHAPES, ids=str)
@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_binary_broadcast(name, shapes, device):
    fn, torch_fn = BINARY[name]
    check(
        fn,
        binary_inputs(name, *shapes),
        torch_fn=torch_fn,
        grad=name not in NO_TORCH_GRAD,
        device=device,
    )


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_binary_dtypes(name, dtype, device):
    fn, torch_fn = BINARY[name]
    tol = {}
    if dtype in (wb.f16, wb.bf16) and name in ("pow", "atan2", "div"):
        # The gradient formulas chain several half-precision ops (see HALF_GRAD_TOL).
        tol = {"grad_atol": 8e-2, "grad_rtol": 8e-2}
    if dtype in (wb.f16, wb.bf16) and name in ("floor_div", "remainder"):
        # a / b is rounded to half precision before the floor in both libraries, but a
        # quotient that lands within an ulp of an integer can floor either way: use inputs
        # whose quotients stay away from integers.
        a = np.array([[0.3, -1.7, 2.2], [5.5, -3.1, 0.9]])
        b = np.array([[0.7, 0.6, -0.8], [1.6, 1.2, -0.5]])
        check(
            fn,
            [a, b],
            dtype=dtype,
            torch_fn=torch_fn,
            grad=name not in NO_TORCH_GRAD,
            device=device,
        )
        return
    check(
        fn,
        binary_inputs(name, (3, 4), (3, 4)),
        dtype=dtype,
        torch_fn=torch_fn,
        grad=name not in NO_TORCH_GRAD,
        **tol,
        device=device,
    )


@pytest.mark.parametrize(
    "layouts",
    [("transposed", "contiguous"), ("sliced", "transposed"), ("broadcast", "sliced")],
    ids=str,
)
@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_binary_layouts(name, layouts, device):
    fn, torch_fn = BINARY[name]
    inputs = binary_inputs(name, (3, 4), (3, 4))
    if layouts[0] == "broadcast":
        inputs[0] = np.broadcast_to(inputs[0][:1], (3, 4)).copy()
    check(
        fn,
        inputs,
        torch_fn=torch_fn,
        layouts=list(layouts),
        grad=name not in NO_TORCH_GRAD,
        device=device,
    )


@pytest.mark.parametrize("scalar", [2.5, -1.5, 3, True], ids=repr)
@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("name", OPERATORS)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_binary_scalar_operands(name, side, scalar, device):
    if name in ("floor_div", "remainder", "div") and side == "left":
        x = away_from_zero((3, 4), 0.4, 2.0)
    elif name == "pow":
        x = uniform((3, 4), 0.3, 2.0) if side == "right" else uniform((3, 4), -2, 2)
        if side == "left" and scalar is not True:
            scalar = abs(scalar)  # a negative base to a real power is NaN in both
    else:
        x = uniform((3, 4))
    if scalar is True and (name == "sub" or (name == "pow" and side == "left")):
        pytest.skip("PyTorch rejects bool - tensor and crashes on True ** tensor")
    op = OPERATORS[name]
    fn = (lambda t: op(t, scalar)) if side == "right" else (lambda t: op(scalar, t))
    # PyTorch has no derivative for scalar % tensor; test_remainder_gradients covers it.
    torch_grad = name not in NO_TORCH_GRAD and not (name == "remainder" and side == "left")
    check(fn, [x], grad=torch_grad, device=device)


@pytest.mark.parametrize("scalar", [2.5, 3, True], ids=repr)
@pytest.mark.parametrize("name", ["maximum", "minimum", "atan2"])
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_binary_fn_scalar_operands(name, scalar, device):
    fn, torch_fn = BINARY[name]
    x = uniform((3, 4), -3, 3)
    # torch's maximum/minimum/atan2 take tensors only: the scalar goes in as a 0-d tensor of x's
    # dtype, which is what a Python scalar means under the promotion rules.
    check(
        lambda t: fn(t, scalar),
        [x],
        torch_fn=lambda t: torch_fn(t, torch.tensor(scalar, dtype=t.dtype)),
        device=device,
    )
    check(
        lambda t: fn(scalar, t),
        [x],
        torch_fn=lambda t: torch_fn(torch.tensor(scalar, dtype=t.dtype), t),
        device=device,
    )


@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_maximum_minimum_ties_split_the_gradient(device):
    a = np.array([1.0, 2.0, 3.0, -1.0])
    b = np.array([1.0, 1.0, 3.0, 0.0])
    check(wb.maximum, [a, b], torch_fn=torch.maximum, device=device)
    check(wb.minimum, [a, b], torch_fn=torch.minimum, device=device)


@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_pow_with_zero_base_has_a_finite_exponent_gradient(device):
    a = np.array([0.0, 0.5, 2.0])
    b = np.array([2.0, 3.0, 0.5])
    check(wb.pow, [a, b], torch_fn=torch.pow, device=device)


@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_remainder_gradients(device):
    """d(a % b)/da = 1, d(a % b)/db = -floor(a / b); PyTorch has the tensor-tensor case only,
    so the scalar-first case is compared with that formula."""
    a, b = uniform((3, 4), -3, 3), away_from_zero((3, 4), 0.4, 2.0, seed=1)
    check(wb.remainder, [a, b], torch_fn=torch.remainder, device=device)
    x = wb.tensor(b, requires_grad=True, device=device)
    grads = (2.5 % x).sum().backward()
    np.testing.assert_allclose(grads[x].numpy(), -np.floor(2.5 / b.astype(np.float32)), rtol=1e-6)


@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_remainder_follows_the_sign_of_the_divisor(device):
    a = np.array([5.0, -5.0, 5.0, -5.0, 0.0])
    b = np.array([3.0, 3.0, -3.0, -3.0, 2.0])
    check(wb.remainder, [a, b], torch_fn=torch.remainder, grad=False, device=device)
    check(
        wb.floor_div,
        [a, b],
        torch_fn=lambda x, y: torch.div(x, y, rounding_mode="floor"),
        grad=False,
        device=device,
    )


INT_DTYPES = (np.int64, np.int32, np.int16, np.int8, np.uint8)


@pytest.mark.parametrize("np_dtype", INT_DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize(
    "name", ["add", "sub", "mul", "div", "maximum", "minimum", "floor_div", "remainder"]
)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_binary_integers(name, np_dtype, device):
    fn, torch_fn = BINARY[name]
    rng = np.random.default_rng(0)
    low = 0 if np_dtype is np.uint8 else -9
    a = rng.integers(low, 10, (3, 4)).astype(np_dtype)
    b = rng.integers(1, 5, (4,)).astype(np_dtype)
    if np_dtype is np.uint8 and name == "sub":
        a = a + 5  # no wrap-around in the comparison (both libraries wrap alike, numpy warns)
    out = fn(wb.tensor(a, device=device), wb.tensor(b, device=device))
    expected = torch_fn(torch.tensor(a), torch.tensor(b))
    assert out.dtype.torch_name == str(expected.dtype).removeprefix("torch.")
    check(fn, [a, b], torch_fn=torch_fn, device=device)


@pytest.mark.parametrize("scalar", [2, -3, 2.5], ids=repr)
@pytest.mark.parametrize("name", ["add", "mul", "div", "floor_div", "remainder", "pow"])
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_integer_tensor_with_scalar(name, scalar, device):
    """An int tensor with an int scalar stays int; with a float scalar it becomes f32."""
    op = OPERATORS[name]
    a = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.int32)
    if name == "pow" and isinstance(scalar, int) and scalar < 0:
        pytest.skip("integers to negative integer powers are an error in PyTorch")
    out = op(wb.tensor(a, device=device), scalar)
    expected = op(torch.tensor(a), scalar)
    assert out.dtype.torch_name == str(expected.dtype).removeprefix("torch.")
    check(lambda t: op(t, scalar), [a], device=device)


@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_integer_true_division_gives_float(device):
    a = np.array([1, 2, 7], dtype=np.int64)
    b = np.array([2, 4, 2], dtype=np.int64)
    assert (wb.tensor(a, device=device) / wb.tensor(b, device=device)).dtype is wb.f32
    assert (wb.tensor(a, device=device) / 2).dtype is wb.f32
    assert (2 / wb.tensor(b, device=device)).dtype is wb.f32
    check(lambda x, y: x / y, [a, b], device=device)


@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_bool_arithmetic(device):
    a = np.array([True, False, True])
    b = np.array([True, True, False])
    check(lambda x, y: x + y, [a, b], device=device)  # bool + bool is logical or, as PyTorch
    check(lambda x, y: x * y, [a, b], device=device)
    check(lambda x: x + 1, [a], device=device)
    check(lambda x: x * 2.5, [a], device=device)


# -- comparisons, where, masked_fill, logical ------------------------------------------------
COMPARISONS = {
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
    "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b,
}


def comparison_inputs(np_dtype, shape_a, shape_b):
    """Small integers (as any dtype) so that ties happen."""
    rng = np.random.default_rng(0)
    low = 0 if np_dtype in (np.uint8, np.bool_) else -2
    high = 2 if np_dtype is np.bool_ else 3
    a = rng.integers(low, high, shape_a).astype(np_dtype)
    b = rng.integers(low, high, shape_b).astype(np_dtype)
    return a, b


CMP_DTYPES = (np.float32, np.float64, np.int64, np.int32, np.uint8, np.bool_)


@pytest.mark.parametrize("np_dtype", CMP_DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("name", COMPARISONS)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_comparisons(name, np_dtype, device):
    op = COMPARISONS[name]
    for shapes in [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1), (1, 3)), ((0, 2), (2,))]:
        a, b = comparison_inputs(np_dtype, *shapes)
        out = op(wb.tensor(a, device=device), wb.tensor(b, device=device))
        assert out.dtype is wb.bool
        check(op, [a, b], grad=False, device=device)
    a, _ = comparison_inputs(np_dtype, (3, 4), ())
    check(lambda x: op(x, 1), [a], grad=False, device=device)
    check(lambda x: op(x, 0.5), [a], grad=False, device=device)
    check(lambda x: op(x, 1), [a], layouts=["transposed"], grad=False, device=device)


@pytest.mark.parametrize("name", COMPARISONS)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_comparisons_with_mixed_dtypes_and_nan(name, device):
    op = COMPARISONS[name]
    a = np.array([1.0, np.nan, 2.0, -1.0], dtype=np.float32)
    b = np.array([1, 1, 3, -1], dtype=np.int64)
    check(op, [a, b], grad=False, device=device)
    check(lambda x: op(x, math.nan), [a], grad=False, device=device)


@pytest.mark.parametrize(
    "layouts", [("contiguous",) * 3, ("transposed", "sliced", "broadcast")], ids=str
)
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_where(dtype, layouts, device):
    rng = np.random.default_rng(0)
    cond = rng.random((3, 4)) > 0.5
    x = uniform((3, 4))
    y = np.full((3, 4), 0.25)
    check(
        wb.where,
        [cond, x, y],
        dtype=dtype,
        torch_fn=torch.where,
        layouts=list(layouts),
        device=device,
    )


@pytest.mark.parametrize(
    "shapes",
    [((3, 4), (4,), (3, 1)), ((3, 1), (1, 4), ()), ((4,), (3, 4), (3, 4)), ((0, 4), (4,), (1,))],
    ids=str,
)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_where_broadcasts(shapes, device):
    rng = np.random.default_rng(1)
    cond = rng.random(shapes[0]) > 0.5
    check(
        wb.where,
        [cond, uniform(shapes[1]), uniform(shapes[2], seed=2)],
        torch_fn=torch.where,
        device=device,
    )


@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_where_with_scalars_and_non_bool_condition(device):
    x = uniform((3, 4))
    cond = np.array([[1, 0, 2, 0]] * 3, dtype=np.int64)
    check(
        lambda c, t: wb.where(c, t, 0.0),
        [cond, x],
        torch_fn=lambda c, t: torch.where(c != 0, t, 0.0),
        device=device,
    )
    check(
        lambda c, t: wb.where(c, -1.5, t),
        [cond, x],
        torch_fn=lambda c, t: torch.where(c != 0, -1.5, t),
        device=device,
    )
    out = wb.where(wb.tensor([True, False], device=device), 1, 2)
    assert out.dtype is wb.i64 and out.tolist() == [1, 2]
    i32 = wb.tensor([1, 2], dtype=wb.i32, device=device)
    assert wb.where(wb.tensor([True, False], device=device), i32, 0.5).dtype is wb.f32


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("value", [0.0, -math.inf, 7.5], ids=repr)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_masked_fill(dtype, value, device):
    rng = np.random.default_rng(0)
    mask = rng.random((3, 4)) > 0.5
    check(lambda m, x: x.masked_fill(m, value), [mask, uniform((3, 4))], dtype=dtype, device=device)
    check(
        lambda m, x: x.masked_fill(m, value), [mask[0], uniform((3, 4))], dtype=dtype, device=device
    )


@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_masked_fill_integer_tensor(device):
    x = np.arange(6, dtype=np.int64).reshape(2, 3)
    mask = np.array([True, False, True])
    check(lambda m, t: t.masked_fill(m, -1), [mask, x], device=device)


LOGICAL = {
    "logical_and": (wb.logical_and, torch.logical_and),
    "logical_or": (wb.logical_or, torch.logical_or),
    "logical_xor": (wb.logical_xor, torch.logical_xor),
}


@pytest.mark.parametrize("np_dtype", (np.bool_, np.float32, np.int64), ids=lambda d: d.__name__)
@pytest.mark.parametrize("name", LOGICAL)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_logical(name, np_dtype, device):
    fn, torch_fn = LOGICAL[name]
    a, b = comparison_inputs(np_dtype, (3, 4), (4,))
    out = fn(wb.tensor(a, device=device), wb.tensor(b, device=device))
    assert out.dtype is wb.bool
    check(fn, [a, b], torch_fn=torch_fn, grad=False, device=device)
    check(
        lambda x: fn(x, True),
        [a],
        torch_fn=lambda x: torch_fn(x, torch.tensor(True)),
        grad=False,
        device=device,
    )


@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_logical_not_and_operators(device):
    a = np.array([True, False, True])
    b = np.array([True, True, False])
    check(lambda x: ~x, [a], grad=False, device=device)
    check(lambda x, y: x & y, [a, b], grad=False, device=device)
    check(lambda x, y: x | y, [a, b], grad=False, device=device)
    check(lambda x, y: x ^ y, [a, b], grad=False, device=device)
    check(
        wb.logical_not,
        [np.array([0.0, 1.5, -2.0])],
        torch_fn=torch.logical_not,
        grad=False,
        device=device,
    )


@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_isnan_isinf_isfinite(device):
    x = np.array([1.0, np.nan, np.inf, -np.inf, 0.0])
    for fn, torch_fn in (
        (wb.isnan, torch.isnan),
        (wb.isinf, torch.isinf),
        (wb.isfinite, torch.isfinite),
    ):
        for dtype in FLOATS:
            check(fn, [x], dtype=dtype, torch_fn=torch_fn, grad=False, device=device)


# -- in-place --------------------------------------------------------------------------------
def _fresh(x):
    """A non-leaf copy in both libraries, so in-place ops are legal under autograd."""
    return x * 1.0


INPLACE = {
    "add_": lambda x, y: _fresh(x).add_(y),
    "add_alpha": lambda x, y: _fresh(x).add_(y, alpha=-2.0),
    "sub_": lambda x, y: _fresh(x).sub_(y),
    "mul_": lambda x, y: _fresh(x).mul_(y),
    "div_": lambda x, y: _fresh(x).div_(y),
    "copy_": lambda x, y: _fresh(x).copy_(y),
    "iadd": lambda x, y: _iop(x, y, "iadd"),
    "isub": lambda x, y: _iop(x, y, "isub"),
    "imul": lambda x, y: _iop(x, y, "imul"),
    "itruediv": lambda x, y: _iop(x, y, "itruediv"),
}


def _iop(x, y, name):
    z = _fresh(x)
    if name == "iadd":
        z += y
    elif name == "isub":
        z -= y
    elif name == "imul":
        z *= y
    else:
        z /= y
    return z


def _inplace_grad_inputs(name: str):
    """``copy_`` overwrites every value, so the old tensor gets no gradient: PyTorch still
    reaches it and reports zeros, workbench leaves it out of the graph (documented in
    test_copy_replaces_the_graph)."""
    return [1] if name == "copy_" else None


@pytest.mark.parametrize("shape_y", [(3, 4), (4,), (1, 1)], ids=str)
@pytest.mark.parametrize("name", INPLACE)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_inplace_tensor_operand(name, shape_y, device):
    y = away_from_zero(shape_y, seed=3)
    check(
        INPLACE[name], [uniform((3, 4)), y], grad_inputs=_inplace_grad_inputs(name), device=device
    )


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("name", ["add_", "mul_", "div_", "copy_", "iadd"])
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_inplace_dtypes(name, dtype, device):
    inputs = [uniform((3, 4)), away_from_zero((3, 4), seed=3)]
    check(INPLACE[name], inputs, dtype=dtype, grad_inputs=_inplace_grad_inputs(name), device=device)


def test_copy_replaces_the_graph():
    x = wb.tensor(uniform((2, 3)), requires_grad=True)
    y = wb.tensor(uniform((2, 3), seed=1), requires_grad=True)
    z = x * 2.0
    z.copy_(y)
    grads = (z * 3.0).sum().backward()
    assert grads.get(x) is None
    np.testing.assert_allclose(grads[y].numpy(), np.full((2, 3), 3.0))


@pytest.mark.parametrize("name", ["add_", "sub_", "mul_", "div_", "iadd", "imul"])
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_inplace_scalar_operand(name, device):
    check(lambda x: INPLACE[name](x, 1.5), [uniform((3, 4))], device=device)


@pytest.mark.parametrize("bounds", [(-0.5, 0.5), (None, 0.0), (0.0, None)], ids=str)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_clamp_inplace(bounds, device):
    check(lambda x: _fresh(x).clamp_(*bounds), [uniform((3, 4))], device=device)


@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_fill_and_zero_cut_the_graph(device):
    check(lambda x: _fresh(x).fill_(2.5) * x, [uniform((3, 4))], device=device)
    check(lambda x: _fresh(x).zero_() + x, [uniform((3, 4))], device=device)


def test_inplace_on_a_strided_view_without_grad():
    """Writes through views land in the base tensor, like PyTorch."""
    base_np = uniform((4, 6))
    for make_view in (
        lambda t: t.transpose(0, 1),
        lambda t: t.narrow(1, 1, 3),
        lambda t: t.narrow(0, 2, 1).squeeze(0),
    ):
        w, t = wb.tensor(base_np), torch.tensor(base_np)
        make_view(w).mul_(2.0).add_(1.0)
        make_view(t).mul_(2.0).add_(1.0)
        np.testing.assert_allclose(w.numpy(), t.numpy())
        make_view(w).copy_(wb.tensor(0.5))
        make_view(t).copy_(torch.tensor(0.5))
        make_view(w).clamp_(0.0, 0.25)
        make_view(t).clamp_(0.0, 0.25)
        np.testing.assert_allclose(w.numpy(), t.numpy())
        make_view(w).zero_()
        make_view(t).zero_()
        np.testing.assert_allclose(w.numpy(), t.numpy())


def test_inplace_keeps_the_destination_dtype():
    """``int_tensor += 1.5`` truncates into the int tensor in workbench; PyTorch refuses to
    cast a float result into an int tensor in place (documented difference). f32 += f64 keeps
    f32 in both."""
    x = wb.tensor([1.0, 2.0], dtype=wb.f32)
    x += wb.tensor([0.5, 0.5], dtype=wb.f64)
    assert x.dtype is wb.f32 and x.tolist() == [1.5, 2.5]
    i = wb.tensor([1, 2])
    i += 2
    assert i.dtype is wb.i64 and i.tolist() == [3, 4]
    i.mul_(3)
    assert i.tolist() == [9, 12]


def test_inplace_returns_the_same_object_and_bumps_the_version():
    x = wb.zeros(3)
    version = x._storage.version
    assert x.add_(1.0) is x
    x += 1.0
    assert x._storage.version == version + 2
    assert x.tolist() == [2.0, 2.0, 2.0]


def test_ops_do_not_modify_their_inputs():
    a_np, b_np = uniform((3, 4)), uniform((4,), seed=1)
    a, b = wb.tensor(a_np), wb.tensor(b_np)
    for fn in (wb.add, wb.mul, wb.div, wb.maximum, wb.pow, wb.atan2):
        fn(a, b)
    for name in UNARY:
        UNARY[name][0](a)
    np.testing.assert_array_equal(a.numpy(), a_np)
    np.testing.assert_array_equal(b.numpy(), b_np)
