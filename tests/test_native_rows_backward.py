"""The row ops' backward kernels (kernels/cpu/core/rows.c: softmax_backward, norm_backward)
against torch's autograd in f64: dims, strided gradients, the half types, and sizes around the
threading threshold (WB_ROWS_PAR = 2^15 elements). The same gradients through the op layer run
on the kernels and, where a storage declines (f64, no extension, other devices), on the
composed ops (workbench/ops/fused.py): both paths are checked against torch here."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import torch

import workbench as wb
from workbench.backends.cpu import threads
from workbench.backends.cpu.native import NATIVE
from workbench.backends.cpu.storage import CpuStorage
from workbench.layout import Layout

needs_native = pytest.mark.skipif(NATIVE is None, reason="the native CPU kernels are not built")

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


@needs_native
@pytest.mark.parametrize("dtype", list(NUMPY))
@pytest.mark.parametrize("shape,dim", [((7, 33), 1), ((7, 33), 0), ((3, 5, 9), 1), ((2, 130), -1)])
@pytest.mark.parametrize("log", [False, True])
def test_softmax_backward_matches_torch(dtype, shape, dim, log):
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


@needs_native
def test_softmax_backward_reads_strided_gradients():
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


@needs_native
@pytest.mark.parametrize("dtype", list(NUMPY))
@pytest.mark.parametrize("center", [True, False], ids=["layer_norm", "rms_norm"])
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("lead,n", [((5,), 33), ((2, 3), 64), ((1,), 1)])
def test_norm_backward_matches_torch(dtype, center, affine, lead, n):
    got, ref = _norm_case(dtype, lead, n, center, affine)
    assert got.dtype == NUMPY[dtype] and got.shape == (*lead, n)
    scale = max(1.0, float(np.abs(ref).max()))
    tol = TOL[dtype]
    np.testing.assert_allclose(
        got.astype(np.float64), ref, rtol=tol["rtol"], atol=tol["atol"] * scale
    )


@needs_native
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


@needs_native
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


def test_storage_declines_operands_the_kernels_do_not_take():
    """None (the op layer then composes the gradient) for f64 and for a g of another dtype."""
    y64 = rounded("f32", 3, 5)
    ys, yl = CpuStorage(y64), Layout.contiguous(y64.shape)
    assert ys.softmax_backward(yl, ys, yl, 1, False) is None
    _, mean, rstd = ys.layer_norm(yl, None, None, None, None, 1e-5)
    assert ys.norm_backward(yl, ys, yl, None, None, mean, rstd) is None
    y32, _ = storage(y64, "f32")
    g16, _ = storage(y64, "f16")
    assert y32.softmax_backward(yl, g16, yl, 1, True) is None
    _, rstd = y32.rms_norm(yl, None, None, 1e-6)
    assert y32.norm_backward(yl, g16, yl, None, None, None, rstd) is None


WB = {"f32": wb.f32, "f16": wb.f16, "bf16": wb.bf16}


@pytest.fixture(params=["kernel", "ops"])
def grad_path(request, monkeypatch):
    """The op layer's gradients by the one-pass kernels, or by its composed ops (the storage
    declining, as it does for f64, without the extension and on devices with no kernel)."""
    if request.param == "kernel" and NATIVE is None:
        pytest.skip("the native CPU kernels are not built")
    if request.param == "ops":
        for name in ("softmax_backward", "norm_backward"):
            monkeypatch.setattr(CpuStorage, name, lambda *args, **kwargs: None)
    return request.param


def _wb_grad(fn, x: np.ndarray, g: np.ndarray, dtype: str, *extra: np.ndarray):
    """dL/d(x, *extra) with L = Σ fn(x, *extra) ⊙ g, by workbench's autograd in ``dtype``."""
    ts = [wb.tensor(a.astype(NUMPY[dtype]), dtype=WB[dtype]).requires_grad_() for a in (x, *extra)]
    gt = wb.tensor(g.astype(NUMPY[dtype]), dtype=WB[dtype])
    grads = (fn(*ts) * gt).sum().backward()
    return [grads[t].numpy().astype(np.float64) for t in ts]


@pytest.mark.parametrize("dtype", list(NUMPY))
@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("dim", [0, 1])
def test_softmax_grad_through_both_paths(grad_path, dtype, log, dim):
    x, g = rounded(dtype, 6, 37), rounded(dtype, 6, 37)
    tx = torch.from_numpy(x).requires_grad_()
    ((torch.log_softmax if log else torch.softmax)(tx, dim) * torch.from_numpy(g)).sum().backward()
    fn = wb.log_softmax if log else wb.softmax
    (got,) = _wb_grad(lambda t: fn(t, dim), x, g, dtype)
    np.testing.assert_allclose(got, tx.grad.numpy(), **TOL[dtype])


@pytest.mark.parametrize("dtype", list(NUMPY))
@pytest.mark.parametrize("center", [True, False], ids=["layer_norm", "rms_norm"])
def test_norm_grads_through_both_paths(grad_path, dtype, center):
    n = 48
    x, g, w = rounded(dtype, 5, n), rounded(dtype, 5, n), rounded(dtype, n)
    tx, tw = torch.from_numpy(x).requires_grad_(), torch.from_numpy(w).requires_grad_()
    if center:
        ty = torch.nn.functional.layer_norm(tx, (n,), tw, None, 1e-5)
        got = _wb_grad(lambda a, b: wb.layer_norm(a, (n,), b, None, 1e-5), x, g, dtype, w)
    else:
        ty = torch.nn.functional.rms_norm(tx, (n,), tw, 1e-6)
        got = _wb_grad(lambda a, b: wb.rms_norm(a, b, 1e-6), x, g, dtype, w)
    (ty * torch.from_numpy(g)).sum().backward()
    for mine, ref in zip(got, (tx.grad.numpy(), tw.grad.numpy()), strict=True):
        scale = max(1.0, float(np.abs(ref).max()))
        tol = TOL[dtype]
        np.testing.assert_allclose(mine, ref, rtol=tol["rtol"], atol=tol["atol"] * scale)
