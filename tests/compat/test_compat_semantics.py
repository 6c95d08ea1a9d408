"""PyTorch spellings and semantics, against torch through ``op_check.check``: ``axis=``,
aliases, rounding modes, named ``(values, indices)`` results, bitwise operators and shifts,
reflected operators, ``copysign``/``fmod``, ``scatter_reduce``, ``view(dtype)``, gradients at
the edges of ``pow`` and the attention mask's gradient, 0-d inputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from op_check import check

import workbench as wb
import workbench.nn.functional as F

rng = np.random.default_rng(0)
A = rng.standard_normal((3, 4)).astype(np.float32)
POSITIVE = rng.uniform(0.5, 2.0, (3, 4)).astype(np.float32)
INTS = rng.integers(-20, 20, (3, 4))
SMALL = rng.integers(0, 8, (3, 4))


# -- axis= and other keywords ------------------------------------------------------------------
AXIS = {
    "sum": lambda t: t.sum(axis=1),
    "mean": lambda t: t.mean(axis=0, keepdim=True),
    "std": lambda t: t.std(axis=1),
    "var": lambda t: t.var(axis=1),
    "prod": lambda t: t.prod(axis=1),
    "amax": lambda t: t.amax(axis=(0, 1)),
    "amin": lambda t: t.amin(axis=1),
    "logsumexp": lambda t: t.logsumexp(axis=1),
    "max_values": lambda t: t.max(axis=1).values,
    "min_values": lambda t: t.min(axis=0).values,
}


@pytest.mark.parametrize("name", AXIS)
def test_axis_is_dim(name: str) -> None:
    check(AXIS[name], [A], layouts=["transposed"])


@pytest.mark.parametrize("name", ["all", "any", "argmax", "argmin"])
def test_axis_without_gradient(name: str) -> None:
    x = (A > 0) if name in ("all", "any") else A
    check(lambda t: getattr(t, name)(axis=1), [x], grad=False)


def test_sum_dtype_and_var_unbiased() -> None:
    check(lambda t: t.sum(1, dtype=wb.f64), [A],
          torch_fn=lambda t: t.sum(1, dtype=torch.float64))  # fmt: skip
    check(lambda t: t.sum(dtype=wb.f32), [SMALL], torch_fn=lambda t: t.sum(dtype=torch.float32))
    check(lambda t: t.var(1, unbiased=False), [A])
    check(lambda t: t.std(0, unbiased=True, keepdim=True), [A])


ALIASES = {
    "clip": (lambda m, t: m.clip(t, -0.5, 0.5), [A]),
    "clip_method_min": (lambda m, t: t.clip(min=0.1), [A]),
    "floor_divide": (lambda m, a, b: m.floor_divide(a, b), [INTS, SMALL + 1]),
    "true_divide": (lambda m, a, b: m.true_divide(a, b), [INTS, SMALL + 1]),
    "divide": (lambda m, a, b: m.divide(a, b), [A, POSITIVE]),
    "subtract": (lambda m, a, b: m.subtract(a, b), [A, POSITIVE]),
    "multiply": (lambda m, a, b: m.multiply(a, b), [A, POSITIVE]),
    "negative": (lambda m, t: m.negative(t), [A]),
    "absolute": (lambda m, t: m.absolute(t), [A]),
    "square": (lambda m, t: m.square(t), [A]),
    "reciprocal": (lambda m, t: m.reciprocal(t), [POSITIVE]),
    "greater": (lambda m, a, b: m.greater(a, b), [A, POSITIVE]),
    "greater_equal": (lambda m, a, b: m.greater_equal(a, b), [A, A]),
    "less": (lambda m, a, b: m.less(a, b), [A, POSITIVE]),
    "less_equal": (lambda m, a, b: m.less_equal(a, b), [A, POSITIVE]),
    "not_equal": (lambda m, a, b: m.not_equal(a, b), [A, A]),
}


@pytest.mark.parametrize("name", ALIASES)
def test_pytorch_aliases(name: str) -> None:
    fn, inputs = ALIASES[name]
    check(lambda *xs: fn(wb, *xs), inputs, torch_fn=lambda *xs: fn(torch, *xs))


DIVISION = {
    "trunc_float": (lambda a, b: a.div(b, rounding_mode="trunc"), [A * 5, POSITIVE]),
    "floor_float": (lambda a, b: a.div(b, rounding_mode="floor"), [A * 5, POSITIVE]),
    "trunc_int": (lambda a, b: a.div(b, rounding_mode="trunc"), [INTS, SMALL + 1]),
    "trunc_int_negative_divisor": (
        lambda a, b: a.div(-b, rounding_mode="trunc"),
        [INTS, SMALL + 1],
    ),  # fmt: skip
    "floor_int": (lambda a, b: a.div(b, rounding_mode="floor"), [INTS, -(SMALL + 1)]),
    "trunc_scalar": (lambda a: a.div(3, rounding_mode="trunc"), [INTS]),
    "fmod_int": (lambda a, b: a.fmod(b), [INTS, SMALL + 1]),
    "fmod_int_negative": (lambda a, b: a.fmod(-b), [INTS, SMALL + 1]),
    "fmod_float": (lambda a, b: a.fmod(b), [A * 5, POSITIVE]),
    "fmod_scalar": (lambda a: a.fmod(-1.5), [A * 5]),
    "remainder": (lambda a, b: a.remainder(b), [A * 5, -POSITIVE]),
    "remainder_int": (lambda a, b: a.remainder(b), [INTS, -(SMALL + 1)]),
}


@pytest.mark.parametrize("name", DIVISION)
def test_rounding_division_fmod_remainder(name: str) -> None:
    fn, inputs = DIVISION[name]
    check(fn, inputs)


@pytest.mark.parametrize("value", [7.0, 7, True])
def test_full_takes_the_value_positionally(value) -> None:
    check(lambda: wb.full((2, 3), value), [], torch_fn=lambda: torch.full((2, 3), value))
    with pytest.raises(wb.ShapeError, match="expected full.size, fill_value."):
        wb.full(2, 3)


@pytest.mark.parametrize("args", [(2,), (2, 0), (3, 1, False), (1, -1, True, True),
                                  (2, 1, True, False)])  # fmt: skip
def test_topk_positional_arguments(args) -> None:
    check(lambda t: tuple(t.topk(*args)), [A], torch_fn=lambda t: tuple(t.topk(*args)))


# -- named (values, indices) results -------------------------------------------------------------
TIES = np.array([[1.0, 3.0, 3.0, 2.0, 3.0], [5.0, -1.0, -1.0, 0.0, 4.0]], dtype=np.float32)
VALUES_INDICES = {
    "max_dim": lambda t: t.max(1),
    "max_dim_keepdim": lambda t: t.max(0, keepdim=True),
    "max_dim_keyword": lambda t: t.max(dim=1),
    "min_dim": lambda t: t.min(1),
    "sort": lambda t: t.sort(),
    "sort_descending": lambda t: t.sort(0, descending=True),
    "topk": lambda t: t.topk(2),
    "cummax": lambda t: t.cummax(1),
    "cummin": lambda t: t.cummin(0),
    "mode": lambda t: t.mode(1),
    "mode_keepdim": lambda t: t.mode(0, keepdim=True),
}


@pytest.mark.parametrize("name", VALUES_INDICES)
@pytest.mark.parametrize("data", ["random", "ties"])
def test_named_values_and_indices(name: str, data: str) -> None:
    fn = VALUES_INDICES[name]
    if name == "topk" and data == "ties":
        pytest.skip("which of tied values topk returns is unspecified in PyTorch")
    x = A if data == "random" else TIES
    check(lambda t: tuple(fn(t)), [x], torch_fn=lambda t: tuple(fn(t)), layouts=["transposed"])
    check(lambda t: fn(t).values, [x], torch_fn=lambda t: fn(t).values)
    check(lambda t: fn(t).indices, [x], torch_fn=lambda t: fn(t).indices)
    values, indices = fn(wb.tensor(x))  # still a tuple
    assert isinstance(fn(wb.tensor(x)), tuple) and fn(wb.tensor(x))[1] is not None
    assert type(fn(wb.tensor(x))).__name__ == type(fn(torch.tensor(x))).__name__


@pytest.mark.parametrize("name", ["cummax", "cummin"])
def test_cumulative_extremum_nan_and_integers(name: str) -> None:
    x = np.array([[1.0, 3.0, np.nan, 2.0, 5.0, np.nan], [2.0, 2.0, 1.0, 1.0, 3.0, 0.0]],
                 dtype=np.float32)  # fmt: skip
    check(lambda t: tuple(getattr(t, name)(1)), [x], grad=False)
    check(lambda t: tuple(getattr(t, name)(0)), [INTS])
    n17 = rng.standard_normal((2, 17)).astype(np.float32)
    check(lambda t: tuple(getattr(t, name)(-1)), [n17])


def test_max_and_min_of_everything_and_against_a_tensor() -> None:
    check(lambda t: t.max(), [TIES])
    check(lambda t: t.min(), [A])
    check(lambda a, b: wb.max(a, b), [A, POSITIVE], torch_fn=lambda a, b: torch.max(a, b))
    check(lambda a, b: a.min(b), [A, POSITIVE])
    with pytest.raises(wb.WorkbenchError, match="max: dim must be an int .use amax"):
        wb.tensor(A).max((0, 1))


def test_mode_of_integers() -> None:
    y = np.array([[2, 1, 2, 1, 3], [5, 5, 4, 4, 4]])
    check(lambda t: tuple(t.mode(1)), [y])
    check(lambda t: tuple(t.mode(0)), [SMALL])


# -- conversions -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "dtype", ["int32", "float16", "uint8", "int16", "int8", "bool"], ids=lambda d: f"view_{d}"
)
def test_view_as_another_dtype(dtype: str) -> None:
    x = A if dtype != "bool" else (A > 0)
    x = x if dtype != "bool" else x.astype(np.uint8)
    check(lambda t: t.view(getattr(wb, dtype) if hasattr(wb, dtype) else dtype), [x],
          torch_fn=lambda t: t.view(getattr(torch, dtype)), grad=False)  # fmt: skip


def test_view_as_dtype_needs_a_contiguous_last_dim() -> None:
    with pytest.raises(wb.ShapeError, match="cannot be viewed as f16"):
        wb.tensor(A).t().view(wb.f16)


# -- bitwise and shifts --------------------------------------------------------------------------
BITWISE = {
    "and": lambda a, b: a & b,
    "or": lambda a, b: a | b,
    "xor": lambda a, b: a ^ b,
    "and_scalar": lambda a, b: a & 6,
    "rand_scalar": lambda a, b: 6 & a,
    "ror_scalar": lambda a, b: 5 | b,
    "rxor_scalar": lambda a, b: 3 ^ a,
    "invert": lambda a, b: ~a,
    "lshift": lambda a, b: a << b,
    "rshift": lambda a, b: a >> b,
    "lshift_scalar": lambda a, b: a << 2,
    "rshift_scalar": lambda a, b: a >> 1,
    "rlshift": lambda a, b: 1 << b,
    "rrshift": lambda a, b: 1024 >> b,
    "bitwise_and": lambda a, b: a.bitwise_and(b),
    "bitwise_not": lambda a, b: a.bitwise_not(),
    "bitwise_left_shift": lambda a, b: a.bitwise_left_shift(b),
}


@pytest.mark.parametrize("name", BITWISE)
@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.int16, np.int8, np.uint8])
def test_bitwise_operators_on_integers(name: str, dtype) -> None:
    a = (INTS if dtype != np.uint8 else INTS + 20).astype(dtype)
    check(BITWISE[name], [a, SMALL.astype(dtype)], layouts=["transposed", "contiguous"])


@pytest.mark.parametrize("name", ["and", "or", "xor", "invert", "and_scalar"])
def test_bitwise_operators_on_bools_stay_logical(name: str) -> None:
    check(BITWISE[name], [A > 0, POSITIVE > 1])


def test_bool_mixed_with_integers_and_shifts_past_the_width() -> None:
    check(lambda m, i: m & i, [A > 0, INTS])
    check(lambda m: m & True, [A > 0])
    shifts = np.array([0, 7, 8, 31, 40, 63])
    check(lambda a, s: a << s, [np.full(6, -5, np.int64), shifts])
    check(lambda a, s: a >> s, [np.full(6, -5, np.int64), shifts])


def test_bitwise_refuses_floats() -> None:
    with pytest.raises(wb.DTypeError, match="bitwise_and: not implemented for f32; expected "
                       "integer or bool operands"):  # fmt: skip
        wb.tensor(A) & wb.tensor(A)
    with pytest.raises(wb.DTypeError, match="left_shift: not implemented for f32; expected "
                       "integer operands"):  # fmt: skip
        wb.tensor(A) << 1


REFLECTED = {
    "radd": lambda t: 3 + t,
    "rsub": lambda t: 3 - t,
    "rmul": lambda t: 3 * t,
    "rtruediv": lambda t: 3 / t,
    "rfloordiv": lambda t: 3 // t,
    "rmod": lambda t: 3 % t,
    "rpow": lambda t: 2**t,
    "rpow_float": lambda t: 1.5**t,
}


@pytest.mark.parametrize("name", REFLECTED)
@pytest.mark.parametrize("kind", ["float", "int"])
def test_reflected_operators(name: str, kind: str) -> None:
    x = POSITIVE if kind == "float" else SMALL + 1
    check(REFLECTED[name], [x], grad=name not in ("rfloordiv", "rmod"))  # (torch has none)


@pytest.mark.parametrize("operands", ["tensors", "scalar", "ints", "signed_zero"])
def test_copysign(operands: str) -> None:
    if operands == "tensors":
        check(lambda a, b: wb.copysign(a, b), [A, -A[::-1]],
              torch_fn=lambda a, b: torch.copysign(a, b))  # fmt: skip
    elif operands == "scalar":
        check(lambda a: a.copysign(-1.0), [A])
    elif operands == "ints":
        check(lambda a, b: a.copysign(b), [INTS, -SMALL])
    else:
        zeros = np.array([0.0, -0.0, 1.0, -2.0], dtype=np.float32)
        check(lambda a, b: a.copysign(b), [zeros[::-1].copy(), zeros])


# -- scatter -----------------------------------------------------------------------------------
X = rng.standard_normal((4, 5)).astype(np.float32)
SRC = rng.standard_normal((3, 4)).astype(np.float32)
INDEX = np.array([[0, 1, 2, 0], [2, 1, 0, 0], [3, 3, 1, 0]])


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dim", [0, 1])
def test_scatter_reduce(reduce: str, include_self: bool, dim: int) -> None:
    index = INDEX if dim == 0 else np.minimum(INDEX, 4)
    check(lambda x, s, i: x.scatter_reduce(dim, i, s, reduce, include_self=include_self),
          [X, SRC, index])  # fmt: skip


@pytest.mark.parametrize("reduce", ["sum", "mean", "amax"])
def test_scatter_reduce_integers(reduce: str) -> None:
    x = rng.integers(-9, 9, (4, 5))
    check(lambda x, s, i: x.scatter_reduce(0, i, s, reduce), [x, INTS[:, :4] * 3, INDEX])


def test_scatter_value_keyword() -> None:
    check(lambda x, i: x.scatter(0, i, value=2.5), [X, INDEX])
    with pytest.raises(wb.DTypeError, match="give one of src and value"):
        wb.tensor(X).scatter(0, wb.tensor(INDEX))


# -- gradients at the edges --------------------------------------------------------------------
EDGE = np.array([0.0, 0.0, 0.0, 1.5, 2.0], dtype=np.float32)
EXPONENTS = np.array([0.0, 2.0, -1.0, 0.0, 0.5], dtype=np.float32)


def test_pow_gradients_at_zero() -> None:
    check(lambda x: x**0, [EDGE])
    check(lambda x: x**0.0, [EDGE])
    check(lambda x: x**2, [EDGE])
    check(lambda x, y: x**y, [EDGE, EXPONENTS])
    check(lambda y: 0.0**y, [EXPONENTS])


def test_pow_of_a_negative_base_has_nan_gradients_like_torch() -> None:
    check(lambda y: (-2.0) ** y, [EXPONENTS])
    check(lambda x, y: x**y, [-POSITIVE, np.round(A)])


@pytest.mark.parametrize("mask_shape", [(3, 5), (2, 1, 3, 5), (1, 1, 5)])
def test_attention_float_mask_gradient(mask_shape) -> None:
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in [(2, 2, 3, 4), (2, 2, 5, 4),
                                                                   (2, 2, 5, 4)])  # fmt: skip
    mask = rng.standard_normal(mask_shape).astype(np.float32)
    check(lambda *xs: F.scaled_dot_product_attention(*xs), [q, k, v, mask],
          torch_fn=lambda *xs: torch.nn.functional.scaled_dot_product_attention(*xs))  # fmt: skip


# -- 0-d inputs --------------------------------------------------------------------------------
ZERO_D = {
    "silu": lambda m, t: m.nn.functional.silu(t),
    "logsumexp": lambda m, t: t.logsumexp(0),
    "logsumexp_all": lambda m, t: m.logsumexp(t, dim=()) if m is torch else t.logsumexp(),
    "max_dim": lambda m, t: tuple(t.max(0)),
    "argmax_dim": lambda m, t: t.argmax(0),
    "cummax": lambda m, t: tuple(t.cummax(0)),
    "sort": lambda m, t: tuple(t.sort(0)),
    "topk": lambda m, t: tuple(t.topk(1)),
}


@pytest.mark.parametrize("name", ZERO_D)
def test_zero_dim_inputs(name: str) -> None:
    fn = ZERO_D[name]
    check(lambda t: fn(wb, t), [np.float32(0.7)], torch_fn=lambda t: fn(torch, t))


@pytest.mark.parametrize("p", [0, 1, 2, 3, float("inf")])
def test_normalize_every_p(p) -> None:
    x = A.copy()
    x[0] = 0.0  # an all-zero row: the eps clamp, not a division by zero
    x[1, 1] = 0.0
    check(lambda t: F.normalize(t, p=p, dim=1), [x],
          torch_fn=lambda t: torch.nn.functional.normalize(t, p=p, dim=1))  # fmt: skip
    check(lambda t: t.norm(p, 1), [x[1:]])


# -- padding and pooling -----------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("pads", [(-1, 1, 1, -1), (-2, 3, 0, -1), (2, -1, -2, 2), (-1, -2, 1, 0)])
def test_negative_pads_crop_in_every_mode(mode: str, pads) -> None:
    x = rng.standard_normal((1, 2, 5, 6)).astype(np.float32)
    check(lambda t: F.pad(t, pads, mode), [x],
          torch_fn=lambda t: torch.nn.functional.pad(t, pads, mode))  # fmt: skip


POOLS = {
    "max_pool2d": lambda f, t: f.max_pool2d(t, 2),
    "max_pool2d_padded": lambda f, t: f.max_pool2d(t, 3, stride=1, padding=1),
    "max_pool2d_dilated": lambda f, t: f.max_pool2d(t, 2, stride=1, dilation=2),
    "max_pool2d_indices": lambda f, t: f.max_pool2d(t, 2, return_indices=True),
}


@pytest.mark.parametrize("name", POOLS)
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.int8, np.uint8])
def test_max_pooling_of_integers(name: str, dtype) -> None:
    x = rng.integers(0 if dtype == np.uint8 else -50, 50, (1, 2, 6, 6)).astype(dtype)
    check(lambda t: POOLS[name](F, t), [x], torch_fn=lambda t: POOLS[name](torch.nn.functional, t))


def test_add_alpha_and_nonzero_as_tuple() -> None:
    check(lambda a, b: wb.add(a, b, alpha=2), [A, POSITIVE],
          torch_fn=lambda a, b: torch.add(a, b, alpha=2))  # fmt: skip
    check(lambda a, b: a.sub(b, alpha=0.5), [A, POSITIVE])
    check(lambda t: t.nonzero(as_tuple=True), [INTS > 0])
    check(lambda t: t.nonzero(as_tuple=True), [np.int64(3)])
    assert np.asarray(wb.ones(3).sum()).shape == ()  # __array__ gives an array, not a scalar


RESIZES = [
    ((1, 2, 5, 6), "bicubic", {"scale_factor": 2}),
    ((1, 2, 5, 6), "bicubic", {"size": (3, 9), "align_corners": True}),
    ((2, 1, 4, 4), "bicubic", {"scale_factor": 1.7}),
    ((1, 2, 5, 6), "nearest-exact", {"scale_factor": 2}),
    ((1, 2, 5, 6), "nearest-exact", {"size": (3, 8)}),
    ((1, 2, 7), "nearest-exact", {"scale_factor": 1.5}),
    ((1, 2, 3, 4, 5), "nearest-exact", {"size": (4, 2, 7)}),
    ((1, 2, 5, 6), "area", {"size": (2, 4)}),
    ((1, 2, 7), "area", {"size": 3}),
    ((1, 2, 4, 6, 5), "area", {"size": (2, 3, 2)}),
    ((1, 2, 3, 4, 5), "trilinear", {"scale_factor": 2}),
    ((1, 2, 3, 4, 5), "trilinear", {"size": (5, 3, 8), "align_corners": True}),
    ((2, 1, 3, 4, 5), "trilinear", {"scale_factor": (1.5, 2.0, 0.6)}),
]


@pytest.mark.parametrize(
    "shape,mode,kwargs", RESIZES, ids=[f"{m}-{len(s)}d" for s, m, _ in RESIZES]
)
def test_interpolate_modes(shape, mode: str, kwargs) -> None:
    x = rng.standard_normal(shape).astype(np.float32)
    check(lambda t: F.interpolate(t, mode=mode, **kwargs), [x], layouts=["transposed"],
          torch_fn=lambda t: torch.nn.functional.interpolate(t, mode=mode, **kwargs))  # fmt: skip


def test_interpolate_nearest_exact_of_integers() -> None:
    x = rng.integers(0, 9, (1, 2, 4, 5))

    def reference(t):  # (torch resizes floats only)
        return torch.nn.functional.interpolate(t.float(), scale_factor=2, mode="nearest-exact")

    check(lambda t: F.interpolate(t, scale_factor=2, mode="nearest-exact"), [x],
          torch_fn=lambda t: reference(t).long())  # fmt: skip
