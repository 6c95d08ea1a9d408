"""Reductions, scans and sorting against PyTorch: keepdim over one, several or all dims,
across dtypes, layouts, empty and size-1 dims, forward and gradient."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from devices import OP_DEVICE_PARAMS
from op_check import check

import workbench as wb

FLOATS = (wb.f32, wb.f64, wb.f16, wb.bf16)


def uniform(shape, low=-2.0, high=2.0, seed=0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(low, high, shape)


def distinct(shape, seed=0) -> np.ndarray:
    """A permutation of well separated values: no ties, exact in every float type."""
    n = math.prod(shape)
    return (np.random.default_rng(seed).permutation(n) - n / 2).reshape(shape) * 0.25


def _all_dims(x, dim):
    return tuple(range(x.ndim)) if dim is None else dim


# name: (workbench fn(x, dim, keepdim), torch fn(x, dim, keepdim), input maker)
REDUCTIONS = {
    "sum": (wb.sum, lambda x, d, k: torch.sum(x, _all_dims(x, d), keepdim=k), uniform),
    "mean": (wb.mean, lambda x, d, k: torch.mean(x, _all_dims(x, d), keepdim=k), uniform),
    "max": (wb.amax, lambda x, d, k: torch.amax(x, _all_dims(x, d), keepdim=k), distinct),
    "min": (wb.amin, lambda x, d, k: torch.amin(x, _all_dims(x, d), keepdim=k), distinct),
    "var": (wb.var, lambda x, d, k: torch.var(x, _all_dims(x, d), keepdim=k), uniform),
    "var_c0": (
        lambda x, d, k: wb.var(x, d, k, correction=0),
        lambda x, d, k: torch.var(x, _all_dims(x, d), keepdim=k, correction=0),
        uniform,
    ),
    "std": (wb.std, lambda x, d, k: torch.std(x, _all_dims(x, d), keepdim=k), uniform),
    "std_c0": (
        lambda x, d, k: wb.std(x, d, k, correction=0),
        lambda x, d, k: torch.std(x, _all_dims(x, d), keepdim=k, correction=0),
        uniform,
    ),
    "logsumexp": (
        wb.logsumexp,
        lambda x, d, k: torch.logsumexp(x, _all_dims(x, d), keepdim=k),
        lambda shape, seed=0: uniform(shape, -5, 5, seed),
    ),
    "prod": (wb.prod, lambda x, d, k: _torch_prod(x, d, k), lambda s, seed=0: uniform(s, 0.5, 1.5)),
}
for _p in (1, 2, 3, math.inf):
    REDUCTIONS[f"norm{_p}"] = (
        lambda x, d, k, p=_p: wb.norm(x, p, d, k),
        lambda x, d, k, p=_p: torch.linalg.vector_norm(x, p, _all_dims(x, d), keepdim=k),
        uniform,
    )


def _torch_prod(x, dim, keepdim):
    """torch.prod takes one dim: reduce several one at a time, from the last."""
    dims = _all_dims(x, dim)
    dims = (dims,) if isinstance(dims, int) else dims
    for d in sorted((d % x.ndim for d in dims), reverse=True):
        x = x.prod(d, keepdim=keepdim)
    return x


DIMS = [None, 0, -1, 1, (0, 2), (2, 0), (-1, 1), (0, 1, 2)]


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", DIMS, ids=str)
@pytest.mark.parametrize("name", REDUCTIONS)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_reductions_dims(name, dim, keepdim, device):
    fn, torch_fn, make = REDUCTIONS[name]
    check(
        lambda x: fn(x, dim, keepdim),
        [make((3, 4, 5))],
        torch_fn=lambda x: torch_fn(x, dim, keepdim),
        device=device,
    )


# Composite ops (mean, var, std, logsumexp, norm) run each step in half precision, where PyTorch
# accumulates in f32 and rounds once; the tolerance covers a few ulps of that rounding.
HALF_TOL = {"var": 3e-2, "var_c0": 3e-2, "std": 3e-2, "std_c0": 3e-2, "norm3": 3e-2}


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("dim", [1, None], ids=str)
@pytest.mark.parametrize("name", REDUCTIONS)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_reductions_dtypes(name, dim, dtype, device):
    fn, torch_fn, make = REDUCTIONS[name]
    tol = {}
    if dtype in (wb.f16, wb.bf16) and name in HALF_TOL:
        t = HALF_TOL[name] * (2 if dtype is wb.bf16 else 1)
        tol = {"atol": t, "rtol": t}
    check(
        lambda x: fn(x, dim, False),
        [make((4, 6))],
        dtype=dtype,
        torch_fn=lambda x: torch_fn(x, dim, False),
        **tol,
        device=device,
    )


@pytest.mark.parametrize("dim", [0, (0, 2), None], ids=str)
@pytest.mark.parametrize("layout", ["transposed", "sliced"])
@pytest.mark.parametrize("name", REDUCTIONS)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_reductions_layouts(name, layout, dim, device):
    fn, torch_fn, make = REDUCTIONS[name]
    check(
        lambda x: fn(x, dim, True),
        [make((3, 4, 5))],
        layouts=[layout],
        torch_fn=lambda x: torch_fn(x, dim, True),
        device=device,
    )


@pytest.mark.parametrize("name", ["sum", "mean", "max", "var", "logsumexp", "prod", "norm2"])
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_reductions_of_broadcast_and_size_one(name, device):
    fn, torch_fn, make = REDUCTIONS[name]
    x = np.broadcast_to(make((1, 5)), (3, 5)).copy()
    check(
        lambda t: fn(t, 1, False),
        [x],
        layouts=["broadcast"],
        torch_fn=lambda t: torch_fn(t, 1, False),
        device=device,
    )
    check(
        lambda t: fn(t, 0, True),
        [make((1, 5))],
        torch_fn=lambda t: torch_fn(t, 0, True),
        device=device,
    )
    check(
        lambda t: fn(t, None, False),
        [make(())],
        torch_fn=lambda t: torch_fn(t, None, False),
        device=device,
    )


@pytest.mark.parametrize("name", ["sum", "mean", "prod", "logsumexp"])
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_reductions_over_empty_dims(name, device):
    """sum → 0, prod → 1, mean → NaN, logsumexp → -inf over zero elements, as PyTorch."""
    fn, torch_fn, _ = REDUCTIONS[name]
    x = np.zeros((0, 4))
    check(lambda t: fn(t, 0, False), [x], torch_fn=lambda t: torch_fn(t, 0, False), device=device)
    check(lambda t: fn(t, 1, True), [x], torch_fn=lambda t: torch_fn(t, 1, True), device=device)


@pytest.mark.parametrize("dim", [None, 0, 1], ids=str)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_max_min_ties_share_the_gradient(dim, device):
    x = np.array([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 2.0], [-1.0, 5.0, -1.0, 0.0]])
    check(
        lambda t: wb.amax(t, dim),
        [x],
        torch_fn=lambda t: torch.amax(t, _all_dims(t, dim)),
        device=device,
    )
    check(
        lambda t: wb.amin(t, dim),
        [x],
        torch_fn=lambda t: torch.amin(t, _all_dims(t, dim)),
        device=device,
    )


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("dim", [None, 0, 1, (0, 1)], ids=str)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_prod_with_zeros(dim, dtype, device):
    """The gradient with zeros is the product of the other elements (not prod / x)."""
    x = np.array([[0.0, 2.0, 3.0, 1.5], [1.0, 0.0, 0.0, 2.0], [0.5, -1.0, 2.0, 4.0]])
    check(
        lambda t: wb.prod(t, dim),
        [x],
        dtype=dtype,
        torch_fn=lambda t: _torch_prod(t, dim, False),
        device=device,
    )


@pytest.mark.parametrize("p", [1, 2, 3, math.inf])
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_norm_of_zeros_has_a_zero_gradient(p, device):
    """PyTorch defines the p-norm's gradient at 0 as 0 (not 0/0)."""
    check(
        lambda t: wb.norm(t, p),
        [np.zeros(4)],
        torch_fn=lambda t: torch.linalg.vector_norm(t, p),
        device=device,
    )


INT_REDUCTIONS = {
    "sum": (wb.sum, lambda x, d, k: torch.sum(x, d, keepdim=k)),
    "prod": (wb.prod, lambda x, d, k: torch.prod(x, d, keepdim=k)),
    "max": (wb.amax, lambda x, d, k: torch.amax(x, d, keepdim=k)),
    "min": (wb.amin, lambda x, d, k: torch.amin(x, d, keepdim=k)),
    "argmax": (wb.argmax, lambda x, d, k: torch.argmax(x, d, keepdim=k)),
    "argmin": (wb.argmin, lambda x, d, k: torch.argmin(x, d, keepdim=k)),
    "any": (wb.any, lambda x, d, k: torch.any(x, d, keepdim=k)),
    "all": (wb.all, lambda x, d, k: torch.all(x, d, keepdim=k)),
    "cumsum": (lambda x, d, k: wb.cumsum(x, d), lambda x, d, k: torch.cumsum(x, d)),
}


@pytest.mark.parametrize(
    "np_dtype", [np.int64, np.int32, np.int8, np.uint8, np.bool_], ids=lambda d: d.__name__
)
@pytest.mark.parametrize("dim_keepdim", [(1, False), (0, True)], ids=str)
@pytest.mark.parametrize("name", INT_REDUCTIONS)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_integer_and_bool_reductions(name, np_dtype, dim_keepdim, device):
    """Sums, products and cumsums of ints and bools are i64, as PyTorch."""
    fn, torch_fn = INT_REDUCTIONS[name]
    if np_dtype is np.bool_ and name in ("max", "min", "argmax", "argmin", "prod"):
        pytest.skip("not defined on bool in PyTorch")
    rng = np.random.default_rng(0)
    x = rng.integers(0 if np_dtype in (np.uint8, np.bool_) else -3, 4, (3, 4)).astype(np_dtype)
    dim, keepdim = dim_keepdim
    out = fn(wb.tensor(x, device=device), dim, keepdim)
    expected = torch_fn(torch.tensor(x), dim, keepdim)
    if name in ("any", "all"):
        # PyTorch keeps uint8 for any/all of uint8 (a legacy rule); workbench always answers bool.
        assert out.dtype is wb.bool
        check(
            lambda t: fn(t, dim, keepdim),
            [x],
            torch_fn=lambda t: torch_fn(t, dim, keepdim).bool(),
            device=device,
        )
        return
    assert out.dtype.torch_name == str(expected.dtype).removeprefix("torch.")
    check(
        lambda t: fn(t, dim, keepdim),
        [x],
        torch_fn=lambda t: torch_fn(t, dim, keepdim),
        device=device,
    )


ARG = {"argmax": (wb.argmax, torch.argmax), "argmin": (wb.argmin, torch.argmin)}


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [None, 0, -1], ids=str)
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced"])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("name", ARG)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_argmax_argmin(name, dtype, layout, dim, keepdim, device):
    fn, torch_fn = ARG[name]
    check(
        lambda t: fn(t, dim, keepdim),
        [distinct((3, 4, 5))],
        dtype=dtype,
        layouts=[layout],
        torch_fn=lambda t: torch_fn(t, dim, keepdim),
        device=device,
    )


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [None, 0, 1, (0, 1)], ids=str)
@pytest.mark.parametrize("name", ["any", "all"])
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_any_all(name, dim, keepdim, device):
    fn, torch_fn = INT_REDUCTIONS[name]
    x = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0], [2.0, -1.0, 0.5]])
    tdim = (0, 1) if dim is None else dim
    for values in (x, x != 0):
        check(
            lambda t: fn(t, dim, keepdim),
            [values],
            torch_fn=lambda t: torch_fn(t, tdim, keepdim),
            grad=False,
            device=device,
        )
    check(
        lambda t: fn(t, 0),
        [np.zeros((0, 3), dtype=bool)],
        torch_fn=lambda t: torch_fn(t, 0, False),
        grad=False,
        device=device,
    )


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced"])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_cumsum(dim, dtype, layout, device):
    check(
        lambda t: wb.cumsum(t, dim),
        [uniform((3, 4, 5))],
        dtype=dtype,
        layouts=[layout],
        torch_fn=lambda t: torch.cumsum(t, dim),
        device=device,
    )


@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_cumsum_odd_shapes(device):
    for shape in [(0,), (1,), (4, 0), (1, 1)]:
        check(
            lambda t: wb.cumsum(t, -1),
            [uniform(shape)],
            torch_fn=lambda t: torch.cumsum(t, -1),
            device=device,
        )
    check(
        lambda t: wb.cumsum(t, 0),
        [uniform(())],
        torch_fn=lambda t: torch.cumsum(t, 0),
        device=device,
    )


def _has_scatter_add() -> bool:
    return hasattr(wb.Tensor, "scatter_add")


# The gradient of sort and topk scatters back through the indices (scatter_add, an indexing op).
needs_scatter = pytest.mark.skipif(not _has_scatter_add(), reason="scatter_add not available yet")


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced"])
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dim", [0, -1])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_sort_values_and_indices(dtype, dim, descending, layout, device):
    check(
        lambda t: wb.sort(t, dim, descending),
        [distinct((4, 5))],
        dtype=dtype,
        layouts=[layout],
        torch_fn=lambda t: torch.sort(t, dim=dim, descending=descending, stable=True),
        grad=False,
        device=device,
    )
    check(
        lambda t: wb.argsort(t, dim, descending),
        [distinct((4, 5))],
        dtype=dtype,
        torch_fn=lambda t: torch.argsort(t, dim=dim, descending=descending, stable=True),
        grad=False,
        device=device,
    )


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_sort_is_stable_with_ties_and_nan_sorts_last(descending, device):
    x = np.array([[2.0, 1.0, 2.0, 1.0, 0.0, 2.0], [1.0, np.nan, 0.0, 1.0, np.nan, -1.0]])
    check(
        lambda t: wb.sort(t, -1, descending),
        [x],
        torch_fn=lambda t: torch.sort(t, dim=-1, descending=descending, stable=True),
        grad=False,
        device=device,
    )


@pytest.mark.parametrize(
    "np_dtype", [np.int64, np.int32, np.int8, np.uint8, np.bool_], ids=lambda d: d.__name__
)
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_sort_integers(np_dtype, descending, device):
    x = np.random.default_rng(0).integers(0, 2 if np_dtype is np.bool_ else 50, (3, 7))
    check(
        lambda t: wb.sort(t, 1, descending),
        [x.astype(np_dtype)],
        torch_fn=lambda t: torch.sort(t, dim=1, descending=descending, stable=True),
        device=device,
    )


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("k", [0, 1, 3, 5])
@pytest.mark.parametrize("dim", [0, -1])
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_topk_values_and_indices(dim, k, largest, device):
    x = distinct((5, 6))
    check(
        lambda t: wb.topk(t, k, dim, largest),
        [x],
        torch_fn=lambda t: torch.topk(t, k, dim, largest),
        grad=False,
        device=device,
    )


@needs_scatter
@pytest.mark.parametrize("dim", [0, -1])
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_sort_and_topk_gradients(dim, device):
    x = distinct((4, 5))
    check(
        lambda t: wb.sort(t, dim)[0], [x], torch_fn=lambda t: torch.sort(t, dim)[0], device=device
    )
    check(
        lambda t: wb.topk(t, 2, dim)[0],
        [x],
        torch_fn=lambda t: torch.topk(t, 2, dim)[0],
        device=device,
    )


def test_sum_keepdim_of_all_dims_and_scalar_results():
    x = wb.tensor(uniform((2, 3)))
    assert wb.sum(x).shape == ()
    assert wb.sum(x, keepdim=True).shape == (1, 1)
    assert wb.mean(x, (0, 1), keepdim=True).shape == (1, 1)
    assert wb.argmax(x, keepdim=True).shape == (1, 1)
    assert x.sum(dim=1).shape == (2,)
    assert isinstance(x.sum().item(), float)


def test_mean_of_integers_is_float():
    """PyTorch refuses mean() on ints; workbench computes it in f32 (documented difference)."""
    out = wb.mean(wb.tensor([[1, 2], [3, 4]]), 0)
    assert out.dtype is wb.f32
    assert out.tolist() == [2.0, 3.0]


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_half_variance_accumulates_wide(dtype):
    # Σ (x - x̄)² of these 92,400 values is ~9e8, past f16's largest finite value 65504:
    # the squares must be summed wider than the storage type, as torch does.
    x = np.random.default_rng(0).normal(0, 100, (4, 23100)).astype(np.float32)
    t = torch.tensor(x).to(getattr(torch, {"f16": "float16", "bf16": "bfloat16"}[dtype]))
    ours = wb.tensor(x).to(getattr(wb, dtype))
    expected = t.float().var().item()
    assert ours.var().float().item() == pytest.approx(expected, rel=1e-2)
    assert ours.std(dim=1).float().numpy() == pytest.approx(t.float().std(dim=1).numpy(), rel=1e-2)
