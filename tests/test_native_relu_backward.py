"""relu's input gradient (kernels/cpu/core/relu_backward.c through ``CpuStorage.relu_backward``,
and the op layer's composed fallback) against torch's ReluBackward: a select, so equal bit for
bit, in f32 / f64 / f16 / bf16, for strided and broadcast operands, special values (NaN, ±0, ±inf
in x and in the gradient) and sizes past the threading threshold (2^16 elements)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import torch

import workbench as wb
from workbench.backends.cpu import relu_grad

rng = np.random.default_rng(7)
NUMPY = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "bf16": ml_dtypes.bfloat16}
TORCH = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16}
SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 1e-30, -1e-30]


@pytest.fixture(params=["native", "composed"])
def path(request, monkeypatch):
    """The storage's one-pass kernel, or the op layer's composed gradient (what devices
    without the kernel, and WORKBENCH_NATIVE=0, run)."""
    if request.param == "native":
        if not relu_grad._NATIVE_RELU:
            pytest.skip("the native CPU kernels are not built")
    else:
        monkeypatch.setattr(relu_grad, "_NATIVE_RELU", "")
    return request.param


def values(dtype: str, shape: tuple[int, ...], special: bool = False) -> np.ndarray:
    """Random values of ``dtype`` (as that numpy dtype), some of them special when asked."""
    a = rng.standard_normal(shape)
    if special:
        flat = a.reshape(-1)
        picks = rng.integers(0, flat.size, size=max(1, flat.size // 3))
        flat[picks] = rng.choice(SPECIAL, size=picks.size)
    return a.astype(NUMPY[dtype])


def to_torch(a: np.ndarray, dtype: str) -> torch.Tensor:
    return torch.from_numpy(a.astype(np.float64)).to(TORCH[dtype])


def check(dtype, shape, view=lambda t: t, grad_shape=None, special=False):
    """x.grad of relu(view(x)) with upstream gradient g (of ``grad_shape``, broadcast to the
    view's shape) against torch's, bit for bit (NaN where torch has NaN)."""
    x_np = values(dtype, shape, special)
    x = wb.Var(wb.tensor(x_np))
    tx = to_torch(x_np, dtype).requires_grad_(True)
    xv, txv = view(x), view(tx)
    g_np = values(dtype, grad_shape or tuple(txv.shape), special)
    g = wb.tensor(g_np).expand(tuple(txv.shape))
    y = wb.relu(xv)
    y.backward(g)
    torch.relu(txv).backward(to_torch(g_np, dtype).expand(txv.shape))
    assert x.grad.dtype.name == dtype and x.grad.shape == shape
    expected = tx.grad.to(torch.float64).numpy()
    np.testing.assert_array_equal(np.asarray(x.grad.numpy()).astype(np.float64), expected)


@pytest.mark.parametrize("dtype", list(NUMPY))
@pytest.mark.parametrize("shape", [(1,), (7,), (3, 5), (2, 3, 1025), ((1 << 16) + 3,)])
def test_contiguous(path, dtype, shape):
    check(dtype, shape)


@pytest.mark.parametrize("dtype", list(NUMPY))
def test_special_values(path, dtype):
    """NaN in x passes g through (torch tests the output, NaN <= 0 is false); x <= 0 gives 0
    even where g is inf or NaN (no 0 · inf); -0 counts as <= 0."""
    check(dtype, (4, 257), special=True)
    x = wb.Var(wb.tensor(np.array([np.nan, -0.0, 0.0, -np.inf, np.inf, 2.0], NUMPY[dtype])))
    wb.relu(x).backward(wb.tensor(np.array([3, np.inf, np.nan, np.inf, 5, -1], NUMPY[dtype])))
    got = np.asarray(x.grad.numpy()).astype(np.float64)
    np.testing.assert_array_equal(got, [3.0, 0.0, 0.0, 0.0, 5.0, -1.0])


@pytest.mark.parametrize("dtype", ["f32", "f64", "bf16"])
@pytest.mark.parametrize(
    "shape, view",
    [
        ((6, 9), lambda t: t.transpose(0, 1)),
        ((5, 12), lambda t: t[:, ::3]),
        ((4, 3, 300), lambda t: t.permute(2, 0, 1)[1:]),
        ((300, 700), lambda t: t.transpose(0, 1)),  # past the threading threshold
    ],
)
def test_strided_x(path, dtype, shape, view):
    check(dtype, shape, view)


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize(
    "shape, grad_shape", [((4, 33), (1, 33)), ((4, 33), (4, 1)), ((3, 400, 70), (1, 400, 1))]
)
def test_broadcast_grad(path, dtype, shape, grad_shape):
    check(dtype, shape, grad_shape=grad_shape)


def test_integer_relu_keeps_working():
    x = wb.tensor(np.array([-3, 0, 4, -1, 7], np.int32))
    y = wb.relu(x)
    assert y.dtype.name == "i32"
    np.testing.assert_array_equal(y.numpy(), [0, 0, 4, 0, 7])


def test_mixed_dtypes_take_the_composed_path():
    """A gradient of another dtype than x is not the kernel's: the storage declines."""
    x = wb.tensor(np.array([1.0, -1.0], np.float32))
    g = wb.tensor(np.array([2.0, 2.0], np.float64))
    assert x._storage.relu_backward(x._layout, g._storage, g._layout) is None
