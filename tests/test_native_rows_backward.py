"""The row ops' backward kernels (kernels/cpu/core/rows.c: softmax_backward, norm_backward)
against torch's autograd in f64 and against the numpy path of the same storage methods: dims,
strided gradients, the half types, and sizes around the threading threshold (WB_ROWS_PAR =
2^15 elements)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import torch

from workbench.backends.cpu import fused, threads
from workbench.backends.cpu.native import NATIVE
from workbench.backends.cpu.storage import CpuStorage
from workbench.layout import Layout

pytestmark = pytest.mark.skipif(
    NATIVE is None or not fused._ROW_BACKWARD,
    reason="the native row backward kernels are not built",
)

rng = np.random.default_rng(11)
NUMPY = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}
# f32: a few roundings of O(1) values; halves: one rounding of the result (inputs are rounded)
TOL = {
    "f32": dict(rtol=2e-5, atol=2e-6),
    "f16": dict(rtol=4e-3, atol=4e-3),
    "bf16": dict(rtol=3e-2, atol=3e-2),
}


def rounded(dtype: str, *shape: int) -> np.ndarray:
    """Random values already rounded to ``dtype``, as float64 (the reference's input)."""
    return rng.standard_normal(shape).astype(NUMPY[dtype]).astype(np.float64)


def storage(a: np.ndarray, dtype: str) -> tuple[CpuStorage, Layout]:
    a = np.ascontiguousarray(a.astype(NUMPY[dtype]))
    return CpuStorage(a), Layout.contiguous(a.shape)


@pytest.fixture(params=["native", "numpy"])
def path(request, monkeypatch):
    """Runs a test on the native kernels and on the numpy path of the same methods."""
    if request.param == "numpy":
        monkeypatch.setattr(fused, "_ROW_BACKWARD", False)
    return request.param


@pytest.mark.parametrize("dtype", list(NUMPY))
@pytest.mark.parametrize("shape,dim", [((7, 33), 1), ((7, 33), 0), ((3, 5, 9), 1), ((2, 130), -1)])
@pytest.mark.parametrize("log", [False, True])
def test_softmax_backward_matches_torch(path, dtype, shape, dim, log):
    x, g = rounded(dtype, *shape), rounded(dtype, *shape)
    tx = torch.from_numpy(x).requires_grad_()
    ty = (torch.log_softmax if log else torch.softmax)(tx, dim)
    ty.backward(torch.from_numpy(g))
    y = ty.detach().numpy()
    ys, yl = storage(y, dtype)
    gs, gl = storage(g, dtype)
    got = ys.softmax_backward(yl, gs, gl, dim % len(shape), log).array
    assert got.dtype == NUMPY[dtype] and got.shape == shape
    # the reference from y rounded to the dtype, as the kernel sees it
    yr = ys.array.astype(np.float64)
    ref = (
        g - np.exp(yr) * g.sum(dim, keepdims=True)
        if log
        else yr * (g - (g * yr).sum(dim, keepdims=True))
    )
    np.testing.assert_allclose(got.astype(np.float64), ref, **TOL[dtype])
    if dtype == "f32":
        np.testing.assert_allclose(got, tx.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_softmax_backward_reads_strided_gradients(path):
    """g as a transposed view and y as a broadcast-free slice: no copies needed."""
    y = np.asarray(torch.softmax(torch.from_numpy(rounded("f32", 40, 70)), 0), np.float32)
    gt = rng.standard_normal((70, 40)).astype(np.float32)
    gs = CpuStorage(gt)
    glay = Layout((40, 70), (1, 40), 0)  # gt.T
    ys, yl = storage(y, "f32")
    got = ys.softmax_backward(yl, gs, glay, 0, False).array
    g = gt.T.astype(np.float64)
    ref = y * (g - (g * y).sum(0, keepdims=True))
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


def _norm_case(dtype, lead, n, center, affine):
    x, g = rounded(dtype, *lead, n), rounded(dtype, *lead, n)
    w = rounded(dtype, n) if affine else None
    tx = torch.from_numpy(x).requires_grad_()
    tw = None if w is None else torch.from_numpy(w)
    if center:
        ty = torch.nn.functional.layer_norm(tx, (n,), tw, None, 1e-5)
    else:
        ty = torch.nn.functional.rms_norm(tx, (n,), tw, 1e-6)
    ty.backward(torch.from_numpy(g))
    xs, xl = storage(x, dtype)
    ws, wl = storage(w, dtype) if affine else (None, None)
    if center:
        _, mean, rstd = xs.layer_norm(xl, ws, wl, None, None, 1e-5)
    else:
        _, rstd = xs.rms_norm(xl, ws, wl, 1e-6)
        mean = None
    gs, gl = storage(g, dtype)
    got = xs.norm_backward(xl, gs, gl, ws, wl, mean, rstd).array
    return got, tx.grad.numpy()


@pytest.mark.parametrize("dtype", list(NUMPY))
@pytest.mark.parametrize("center", [True, False], ids=["layer_norm", "rms_norm"])
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("lead,n", [((5,), 33), ((2, 3), 64), ((1,), 1)])
def test_norm_backward_matches_torch(path, dtype, center, affine, lead, n):
    got, ref = _norm_case(dtype, lead, n, center, affine)
    assert got.dtype == NUMPY[dtype] and got.shape == (*lead, n)
    scale = max(1.0, float(np.abs(ref).max()))
    tol = TOL[dtype]
    np.testing.assert_allclose(
        got.astype(np.float64), ref, rtol=tol["rtol"], atol=tol["atol"] * scale
    )


@pytest.mark.parametrize("rows,n", [(1, 1 << 15), (255, 128), (256, 128), (257, 128), (3, 70001)])
@pytest.mark.parametrize("nthreads", [1, 2])
def test_sizes_around_the_threading_threshold(rows, n, nthreads):
    """Whole lines per thread whatever the split: the same results on 1 and 2 threads."""
    old = threads.get_num_threads()
    threads.set_num_threads(nthreads)
    try:
        got, ref = _norm_case("f32", (rows,), n, True, True)
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)
        x, g = rounded("f32", rows, n), rounded("f32", rows, n)
        y = torch.softmax(torch.from_numpy(x), -1).numpy()
        ys, yl = storage(y, "f32")
        gs, gl = storage(g, "f32")
        got = ys.softmax_backward(yl, gs, gl, 1, False).array
        yr = ys.array.astype(np.float64)
        np.testing.assert_allclose(
            got, yr * (g - (g * yr).sum(1, keepdims=True)), rtol=1e-4, atol=1e-7
        )
    finally:
        threads.set_num_threads(old)


def test_backward_kernel_errors():
    y = np.zeros((2, 3), np.float32)
    with pytest.raises(TypeError, match="g must have the input's dtype"):
        NATIVE.softmax_backward(
            y, 0, (2, 3), (3, 1), y.astype(np.float64), 0, (3, 1), 1, np.empty_like(y), False
        )
    with pytest.raises(ValueError, match="dim 2 out of range"):
        NATIVE.softmax_backward(y, 0, (2, 3), (3, 1), y, 0, (3, 1), 2, np.empty_like(y), False)
    with pytest.raises(TypeError, match="unsupported dtype combination"):
        rstd = np.zeros(2, np.float64)
        NATIVE.norm_backward(
            y, 0, (2, 3), (3, 1), y, 0, (3, 1), None, 0, (), None, rstd, np.empty_like(y)
        )
