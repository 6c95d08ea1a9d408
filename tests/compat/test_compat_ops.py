"""workbench.ops.compat (einsum, cumprod, isclose, allclose), the conversion methods and the
reflected logical operators, against torch through ``op_check.check``."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from op_check import check

import workbench as wb

rng = np.random.default_rng(0)


def _arrays(*shapes: tuple[int, ...]) -> list[np.ndarray]:
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


EINSUM = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("ij,jk", [(3, 4), (4, 5)]),  # implicit output: ik
    ("bij,bkj->bik", [(2, 3, 4), (2, 5, 4)]),
    ("i,j->ij", [(3,), (4,)]),
    ("i,i->", [(5,), (5,)]),
    ("ij->ji", [(3, 4)]),
    ("ij->", [(3, 4)]),
    ("ii->i", [(4, 4)]),  # diagonal
    ("ii", [(4, 4)]),  # trace
    ("bii->b", [(2, 3, 3)]),
    ("iij->j", [(3, 3, 2)]),
    ("...ij->...ji", [(2, 3, 4)]),
    ("i...->...", [(2, 3, 4)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]),  # ellipsis dims broadcast
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("a,b,c->abc", [(2,), (3,), (4,)]),
    ("bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)]),
    ("ij,ij->ij", [(1, 3), (2, 3)]),
    ("ab, bc -> ca", [(2, 3), (3, 4)]),
]


@pytest.mark.parametrize("equation,shapes", EINSUM, ids=[e for e, _ in EINSUM])
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_einsum(equation: str, shapes, layout: str) -> None:
    check(
        lambda *xs: wb.einsum(equation, *xs),
        _arrays(*shapes),
        torch_fn=lambda *xs: torch.einsum(equation, *xs),
        layouts=[layout] * len(shapes),
    )


def test_einsum_takes_a_list_of_operands() -> None:
    a, b = _arrays((3, 4), (4, 2))
    check(lambda x, y: wb.einsum("ij,jk->ik", [x, y]), [a, b],
          torch_fn=lambda x, y: torch.einsum("ij,jk->ik", [x, y]))  # fmt: skip


@pytest.mark.parametrize(
    "equation,shapes,message",
    [
        ("ij,jk->ik", [(3, 4)], "names 2 operands"),
        ("ijk->i", [(3, 4)], "3 subscripts"),
        ("ij->k", [(3, 4)], "'k' is in no input"),
        ("ij->ii", [(3, 4)], "appears twice"),
        ("ij,jk->ik", [(3, 4), (5, 2)], "sizes 4 and 5"),
        ("ii->i", [(3, 4)], "sizes 3 and 4"),
        ("i1->i", [(3, 4)], "letters"),
    ],
)
def test_einsum_errors_name_the_problem(equation: str, shapes, message: str) -> None:
    with pytest.raises(wb.ShapeError, match=message):
        wb.einsum(equation, *[wb.zeros(s) for s in shapes])


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumprod_values_and_gradient_with_zeros(dim: int) -> None:
    x = rng.standard_normal((3, 9)).astype(np.float32)
    x[1, 2] = x[2, 5] = x[2, 7] = 0.0  # the gradient through a zero needs no division
    check(lambda t: t.cumprod(dim), [x], torch_fn=lambda t: t.cumprod(dim),
          layouts=["transposed"])  # fmt: skip


@pytest.mark.parametrize("n", [1, 2, 5, 8, 17])
def test_cumprod_lengths(n: int) -> None:
    x = rng.uniform(0.5, 1.5, (2, n)).astype(np.float32)
    check(lambda t: wb.cumprod(t, 1), [x], torch_fn=lambda t: torch.cumprod(t, 1))


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.bool_])
def test_cumprod_of_integers_is_int64(dtype) -> None:
    x = np.array([[1, 2, 3], [4, 0, 2]]).astype(dtype)
    check(lambda t: t.cumprod(1), [x], torch_fn=lambda t: t.cumprod(1))


def test_cumprod_dtype_keyword_and_0d() -> None:
    x = rng.standard_normal((2, 3)).astype(np.float32)
    check(lambda t: t.cumprod(0, dtype=wb.f64), [x],
          torch_fn=lambda t: t.cumprod(0, dtype=torch.float64))  # fmt: skip
    check(lambda t: t.cumprod(0), [np.float32(1.5)], torch_fn=lambda t: t.cumprod(0))


NAN, INF = float("nan"), float("inf")
CLOSE_A = np.array([1.0, 1.0, INF, -INF, NAN, 1.0, 0.0, 1e-9, 100.0], dtype=np.float32)
CLOSE_B = np.array([1.0, 1.0 + 1e-6, INF, INF, NAN, INF, 1e-8, 0.0, 100.01], dtype=np.float32)


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"equal_nan": True},
        {"rtol": 1e-3},
        {"atol": 0.0, "rtol": 0.0},
        {"atol": 1e-2},
    ],  # fmt: skip
)
def test_isclose(kwargs) -> None:
    check(lambda a, b: wb.isclose(a, b, **kwargs), [CLOSE_A, CLOSE_B],
          torch_fn=lambda a, b: torch.isclose(a, b, **kwargs))  # fmt: skip
    a, b = wb.tensor(CLOSE_A), wb.tensor(CLOSE_B)
    assert a.isclose(b, **kwargs).tolist() == torch.isclose(
        torch.tensor(CLOSE_A), torch.tensor(CLOSE_B), **kwargs).tolist()  # fmt: skip


def test_isclose_integers_and_broadcasting() -> None:
    a = np.array([[1, 5, -3]], dtype=np.int64)
    b = np.array([[1], [5]], dtype=np.int64)
    check(lambda x, y: wb.isclose(x, y), [a, b], torch_fn=lambda x, y: torch.isclose(x, y))


def test_allclose() -> None:
    a = rng.standard_normal((3, 4)).astype(np.float32)
    for b, kwargs in [(a, {}), (a + 1e-3, {}), (a + 1e-3, {"atol": 1e-2}),
                      (np.full_like(a, NAN), {"equal_nan": True})]:  # fmt: skip
        for x in (a, np.full_like(a, NAN)):
            got = wb.allclose(wb.tensor(x), wb.tensor(b), **kwargs)
            assert got is torch.allclose(torch.tensor(x), torch.tensor(b), **kwargs)


def test_isclose_rejects_negative_tolerances() -> None:
    with pytest.raises(wb.WorkbenchError, match="rtol and atol must be >= 0"):
        wb.isclose(wb.ones(2), wb.ones(2), rtol=-1.0)


CONVERSIONS = ["float", "double", "half", "bfloat16", "int", "long", "short", "bool", "byte"]


@pytest.mark.parametrize("name", CONVERSIONS)
def test_conversion_methods(name: str) -> None:
    x = (rng.standard_normal((3, 4)) * 3).astype(np.float32)
    check(lambda t: getattr(t, name)(), [x], layouts=["transposed"],
          grad=name in ("float", "double", "half", "bfloat16"),
          atol=1e-2, rtol=1e-2)  # fmt: skip


def test_conversion_returns_self_when_the_dtype_is_already_right() -> None:
    x = wb.randn(2, 3)
    assert x.float() is x
    assert x.type(wb.f32) is x


@pytest.mark.parametrize("dtype", ["i64", wb.f64, "bool"])
def test_type(dtype) -> None:
    x = (rng.standard_normal((3, 4)) * 3).astype(np.float32)
    torch_dtype = getattr(torch, wb.dtype.dtype(dtype).torch_name)
    check(lambda t: t.type(dtype), [x], torch_fn=lambda t: t.type(torch_dtype), grad=False)


@pytest.mark.parametrize("op", ["&", "|", "^"])
@pytest.mark.parametrize("scalar", [True, False])
def test_reflected_logical_operators(op: str, scalar: bool) -> None:
    mask = rng.standard_normal((3, 4)) > 0
    forward = {"&": lambda s, t: s & t, "|": lambda s, t: s | t, "^": lambda s, t: s ^ t}[op]
    check(lambda t: forward(scalar, t), [mask])


def test_op_check_asserts_the_result_dtype() -> None:
    x = rng.standard_normal((3,)).astype(np.float32)
    with pytest.raises(AssertionError, match="dtype i32, torch gives torch.int64"):
        check(lambda t: t.int(), [x], torch_fn=lambda t: t.long(), grad=False)
    check(lambda t: t.int(), [x], torch_fn=lambda t: t.long(), grad=False,
          dtype_differs="the test of the opt-out itself")  # fmt: skip


# -- composed elementwise ops, reductions, shapes and matrix products ---------------------------
X = rng.standard_normal((3, 4)).astype(np.float32)
Y = rng.standard_normal((3, 4)).astype(np.float32)
Z = rng.standard_normal((3, 4)).astype(np.float32)
POS = (np.abs(X) + 0.5).astype(np.float32)
UNIT = rng.uniform(-0.9, 0.9, (3, 4)).astype(np.float32)
SPECIAL = np.array([[1.5, np.nan, -2.0, np.inf], [-np.inf, 0.0, -0.0, np.nan]], np.float32)
OTHER = np.array([[np.nan, 1.0, -3.0, 2.0], [4.0, np.nan, 1.0, -1.0]], np.float32)
INT = rng.integers(-5, 6, (3, 4))


def _lib(t):
    return torch if isinstance(t, torch.Tensor) else wb


COMPOSED = {
    "log2": (lambda x: x.log2(), [POS]),
    "log10": (lambda x: _lib(x).log10(x), [POS]),
    "exp2": (lambda x: x.exp2(), [X]),
    "exp2_int": (lambda x: _lib(x).exp2(x), [INT]),
    "erfc": (lambda x: x.erfc(), [X]),
    "asinh": (lambda x: x.asinh(), [X * 4]),
    "asinh_at_0": (lambda x: x.asinh(), [np.array([0.0, -1e-6, 1e-6], np.float32)]),
    "atanh": (lambda x: x.atanh(), [UNIT]),
    "trunc": (lambda x: x.trunc(), [X * 3]),
    "trunc_int": (lambda x: x.trunc(), [INT]),
    "frac": (lambda x: x.frac(), [X * 3]),
    "sgn": (lambda x: x.sgn(), [X]),
    "signbit": (lambda x: x.signbit(), [SPECIAL]),
    "signbit_int": (lambda x: x.signbit(), [INT]),
    "positive": (lambda x: x.positive() * 2, [X]),
    "fmax": (lambda x, y: _lib(x).fmax(x, y), [SPECIAL, OTHER]),
    "fmin": (lambda x, y: _lib(x).fmin(x, y), [SPECIAL, OTHER]),
    "fmax_grad": (lambda x, y: _lib(x).fmax(x, y), [X, Y]),
    "hypot": (lambda x, y: _lib(x).hypot(x, y), [X, Y]),
    "lerp": (lambda x, y: x.lerp(y, 0.3), [X, Y]),
    "lerp_tensor_weight": (lambda x, y, w: _lib(x).lerp(x, y, w), [X, Y, UNIT]),
    "addcmul": (lambda x, y, z: _lib(x).addcmul(x, y, z, value=0.5), [X, Y, Z]),
    "addcdiv": (lambda x, y, z: x.addcdiv(y, z, value=2.0), [X, Y, POS]),
    "nan_to_num": (lambda x: x.nan_to_num(), [SPECIAL]),
    "nan_to_num_values": (lambda x: _lib(x).nan_to_num(x, 1.0, 9.0, -9.0), [SPECIAL]),
    "nansum": (lambda x: x.nansum(), [SPECIAL]),
    "nansum_dim": (lambda x: _lib(x).nansum(x, 1, keepdim=True), [OTHER]),
    "nanmean": (lambda x: x.nanmean(1), [OTHER]),
    "count_nonzero": (lambda x: x.count_nonzero(), [INT]),
    "count_nonzero_dim": (lambda x: _lib(x).count_nonzero(x, dim=1), [INT]),
    "tril": (lambda x: x.tril(), [X]),
    "tril_k": (lambda x: _lib(x).tril(x, -1), [X]),
    "triu_k": (lambda x: x.triu(1), [rng.standard_normal((2, 3, 5)).astype(np.float32)]),
    "triu_int": (lambda x: x.triu(), [INT]),
    "expand_as": (lambda x, y: x.expand_as(y), [X[:1], Y]),
    "unflatten": (lambda x: x.unflatten(1, (2, -1)), [X]),
    "unbind": (lambda x: x.unbind(1), [X]),
    "concat": (lambda x, y: _lib(x).concat([x, y], 1), [X, Y]),
    "mm": (lambda x, y: _lib(x).mm(x, y.t()), [X, Y]),
    "bmm": (lambda x, y: _lib(x).bmm(x, y.transpose(1, 2)), _arrays((2, 3, 4), (2, 5, 4))),
    "mv": (lambda x, y: _lib(x).mv(x, y[0]), [X, Y]),
    "dot": (lambda x, y: _lib(x).dot(x[0], y[1]), [X, Y]),
    "outer": (lambda x, y: _lib(x).outer(x[0], y[1]), [X, Y]),
    "median": (lambda x: x.median(), [X]),
    "median_even": (lambda x: _lib(x).median(x[:, :4]), [X]),
    "median_dim": (lambda x: tuple(x.median(1)), [X]),
    "median_keepdim": (lambda x: tuple(_lib(x).median(x, 0, keepdim=True)), [X]),
    "diagonal": (lambda x: x.diagonal(), [X]),
    "diagonal_offsets": (lambda x: (x.diagonal(1), x.diagonal(-1), x.diagonal(9)), [X]),
    "diagonal_dims": (
        lambda x: _lib(x).diagonal(x, 1, 2, 0),
        [rng.standard_normal((3, 4, 5)).astype(np.float32)],
    ),  # fmt: skip
    "take_along_dim": (lambda x, i: _lib(x).take_along_dim(x, i, 1), [X, np.array([[0, 3]])]),
    "take_along_dim_flat": (lambda x, i: x.take_along_dim(i), [X, np.array([11, 0, 5])]),
    "repeat_interleave": (lambda x: x.repeat_interleave(2, dim=0), [X]),
    "repeat_interleave_flat": (lambda x: _lib(x).repeat_interleave(x, 3), [X]),
    "diag_vector": (lambda v: (_lib(v).diag(v[0]), _lib(v).diag(v[1], 2), v[2].diag(-1)), [X]),
    "diag_matrix": (lambda x: (_lib(x).diag(x), x.diag(-2)), [X]),
    "addmm": (
        lambda b, x, w: _lib(x).addmm(b, x, w.t(), beta=0.5, alpha=2.0),
        [Z[:, :3], X, Y[:3]],
    ),  # fmt: skip
}


@pytest.mark.parametrize("name", COMPOSED)
def test_composed_ops_match_torch(name: str) -> None:
    fn, inputs = COMPOSED[name]
    # torch's gradient of sgn is a ZeroTensor, which cannot become numpy (sign's is compared)
    check(fn, inputs, layouts=["transposed"] + ["contiguous"] * (len(inputs) - 1),
          grad=name != "sgn")  # fmt: skip


def test_matrix_products_check_their_ranks() -> None:
    with pytest.raises(wb.ShapeError, match=r"mm: expected operands of 2 and 2 dims"):
        wb.mm(wb.ones(2, 3, 4), wb.ones(4, 2))
    with pytest.raises(wb.ShapeError, match="tril: expected a tensor of at least 2 dims"):
        wb.tril(wb.ones(3))
