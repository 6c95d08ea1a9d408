"""Training-mode batch norm (kernels/cpu/core/batchnorm.c through ``ops.batch_norm``, and the
numpy path of backends/cpu/batchnorm.py) against torch's in f64: y, the gradients of x, weight
and bias, and the running statistics, for f32 / f16 / bf16 (and f64 on numpy), odd sizes,
strided and broadcast inputs, and sizes past the threading threshold (2^15 elements)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import torch

import workbench as wb
from workbench.backends.cpu import batchnorm
from workbench.backends.cpu.native import NATIVE
from workbench.nn import functional as F

rng = np.random.default_rng(5)
NUMPY = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16, "f64": np.float64}
TOL = {
    "f64": dict(rtol=1e-10, atol=1e-10),
    "f32": dict(rtol=2e-5, atol=2e-5),
    "f16": dict(rtol=4e-3, atol=4e-3),
    "bf16": dict(rtol=3e-2, atol=3e-2),
}
PATHS = ["native", "numpy"]


@pytest.fixture(params=PATHS)
def path(request, monkeypatch):
    """Run the CPU storage's batch norm on the native kernel or on its numpy path."""
    if request.param == "native":
        if NATIVE is None or not batchnorm._NATIVE_BN:
            pytest.skip("the native CPU kernels are not built")
    else:
        monkeypatch.setattr(batchnorm, "_NATIVE_BN", "")
    return request.param


def rounded(dtype: str, shape: tuple[int, ...], scale: float = 1.0, shift: float = 0.0):
    """Random values already rounded to ``dtype``, as float64 (the reference's input)."""
    a = rng.standard_normal(shape) * scale + shift
    return a.astype(NUMPY[dtype]).astype(np.float64)


def wb_tensor(a: np.ndarray, dtype: str) -> wb.Tensor:
    return wb.tensor(np.ascontiguousarray(a.astype(NUMPY[dtype])))


def as_f64(t: wb.Tensor) -> np.ndarray:
    return np.asarray(t.to_dtype("f64").numpy())


def check(dtype, shape, affine=True, view=None, momentum=0.1, scale=2.0, shift=1.5):
    """One training step of batch_norm on x of ``shape`` (or on ``view(x)``) against torch:
    y, dL/dx, dL/dw, dL/db for L = Σ g y, and the updated running statistics."""
    x_np = rounded(dtype, shape, scale, shift)
    view = view or (lambda t: t)
    x = wb.Var(wb_tensor(x_np, dtype))
    tx = torch.tensor(x_np, requires_grad=True)
    xv, txv = view(x), view(tx)
    c = txv.shape[1]
    g_np = rounded(dtype, tuple(txv.shape))
    w_np, b_np = rounded("f32", (c,)), rounded("f32", (c,))
    w, b = wb.Var(wb.tensor(w_np.astype(np.float32))), wb.Var(wb.tensor(b_np.astype(np.float32)))
    rm, rv = wb.zeros(c), wb.ones(c)
    y = F.batch_norm(xv, rm, rv, w if affine else None, b if affine else None, True, momentum)
    grads = (y.to_dtype("f64") * wb.tensor(g_np)).sum().backward()

    tw = torch.tensor(w_np, requires_grad=True)
    tb = torch.tensor(b_np, requires_grad=True)
    trm, trv = torch.zeros(c, dtype=torch.float64), torch.ones(c, dtype=torch.float64)
    ty = torch.nn.functional.batch_norm(
        txv, trm, trv, tw if affine else None, tb if affine else None, True, momentum
    )
    (ty * torch.tensor(g_np)).sum().backward()

    tol = TOL[dtype]
    assert y.dtype.name == dtype and y.shape == tuple(txv.shape)
    np.testing.assert_allclose(as_f64(y), ty.detach().numpy(), **tol)
    np.testing.assert_allclose(as_f64(grads[x]), tx.grad.numpy(), **tol)
    # the weight/bias gradients and statistics (f32) sum N·S values: a looser atol for halves
    wtol = TOL["f32"] if dtype == "f64" else tol
    gtol = dict(rtol=wtol["rtol"], atol=wtol["atol"] * 20)
    if affine:
        np.testing.assert_allclose(as_f64(grads[w]), tw.grad.numpy(), **gtol)
        np.testing.assert_allclose(as_f64(grads[b]), tb.grad.numpy(), **gtol)
    np.testing.assert_allclose(rm.numpy(), trm.numpy(), **gtol)
    np.testing.assert_allclose(rv.numpy(), trv.numpy(), **gtol)


SHAPES = [(4, 3, 5, 2), (8, 5), (4, 3, 6), (3, 7, 1, 1), (2, 1, 9, 11)]


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_batch_norm_matches_torch(path, dtype, shape):
    check(dtype, shape)


def test_f64_takes_numpy_and_matches_torch():
    check("f64", (4, 3, 5, 2))


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_without_weight_and_bias(path, dtype):
    check(dtype, (5, 4, 3, 3), affine=False)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_past_the_threading_threshold(path, dtype, threads):
    before = wb.get_num_threads()
    wb.set_num_threads(threads)
    try:
        check(dtype, (9, 13, 17, 19))  # 37791 elements > 2^15, 13 channels over the threads
    finally:
        wb.set_num_threads(before)


VIEWS = {
    "permuted": ((3, 6, 5, 4), lambda t: t.permute(0, 3, 1, 2)),  # (3, 4, 6, 5), strided S
    "narrowed": ((4, 6, 5), lambda t: t[:, 1:5, 1:4]),  # (4, 4, 3), offset and gaps
    "transposed_1d": ((6, 8), lambda t: t.transpose(0, 1)),  # (8, 6): channels of stride 1
}


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("name", sorted(VIEWS))
def test_strided_inputs(path, dtype, name):
    shape, view = VIEWS[name]
    check(dtype, shape, view=view)


def test_a_large_mean_keeps_the_variance(path):
    """Two passes (Σ(x - μ)², not Σx² - μ²): an offset of 1e4 does not swamp σ² = 1e-2 in f32
    (y itself is only as good as μ's f32 rounding, ulp(1e4) / σ ≈ 1e-2)."""
    x_np = rounded("f32", (16, 3, 8, 8), 0.1, 1e4)
    rm, rv = wb.zeros(3), wb.ones(3)
    y = F.batch_norm(wb_tensor(x_np, "f32"), rm, rv, training=True, momentum=1.0)
    trm, trv = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    ty = torch.nn.functional.batch_norm(torch.tensor(x_np), trm, trv, training=True, momentum=1.0)
    np.testing.assert_allclose(rv.numpy(), trv.numpy(), rtol=1e-4)
    np.testing.assert_allclose(y.numpy(), ty.numpy(), atol=2e-2)


def test_broadcast_gradient(path):
    """dL/dy with stride-0 dims (the backward of a sum) reaches the kernel as is."""
    x = wb.Var(wb_tensor(rounded("f32", (4, 3, 5)), "f32"))
    y = F.batch_norm(x, None, None, None, None, True)
    gx = y.sum().backward()[x]
    tx = torch.tensor(np.asarray(x.numpy(), np.float64), requires_grad=True)
    torch.nn.functional.batch_norm(tx, None, None, training=True).sum().backward()
    np.testing.assert_allclose(gx.numpy(), tx.grad.numpy(), atol=1e-5)


def test_the_op_is_one_call_each_way():
    x = wb.Var(wb.randn(4, 3, 2, 2))
    with wb.profile() as p:
        F.batch_norm(x, None, None, None, None, True).sum().backward()
    names = [e.name for e in p.events]
    assert names.count("batch_norm_training") == 1
    assert "mul" not in names and "sub" not in names
