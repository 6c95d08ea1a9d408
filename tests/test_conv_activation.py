"""conv2d(..., activation=) against PyTorch's act(conv2d) in f64, on each CPU path: the
activation applied as the native kernels store (conv_direct.c's implicit product, the im2col
path's rows), and composed where a path has no fused form (1×1 products, depthwise, the numpy
path); its gradients (recorded: the composed ops) and its errors."""

from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench.backends.cpu import conv as cpu_conv
from workbench.errors import ArgumentError

torch = pytest.importorskip("torch")
F = torch.nn.functional
TORCH_ACT = {
    "silu": F.silu,
    "relu": F.relu,
    "gelu": lambda t: F.gelu(t, approximate="tanh"),
    "gelu_erf": F.gelu,
}
# (x shape, weight shape, kwargs): the direct kernel's pixel and channel forms, a strided
# one, a grouped one (im2col), a 1×1 product of many channels and a depthwise one
CASES = [
    ((2, 5, 11, 13), (19, 5, 3, 3), dict(padding=1)),
    ((1, 8, 3, 4), (40, 8, 3, 3), dict(padding=1)),
    ((1, 3, 21, 20), (16, 3, 3, 3), dict(stride=2, padding=1)),
    ((2, 6, 9, 9), (8, 3, 3, 3), dict(padding=1, groups=2)),
    ((1, 96, 6, 7), (24, 96, 1, 1), {}),
    ((2, 6, 8, 8), (6, 1, 3, 3), dict(padding=1, groups=6)),
]
TOL = {"f32": 2e-5, "f64": 1e-12, "f16": 4e-3, "bf16": 3e-2}


def _operands(xs, ws, seed: int):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(xs) * 2.0
    return x, rng.standard_normal(ws) / np.sqrt(np.prod(ws[1:])), rng.standard_normal(ws[0])


def _reference(x, w, b, kwargs, activation: str) -> tuple[np.ndarray, np.ndarray]:
    """act(y) and y."""
    y = F.conv2d(*(torch.tensor(a) for a in (x, w, b)), **kwargs)
    return TORCH_ACT[activation](y).numpy(), y.numpy()


@pytest.mark.parametrize("native", [True, False], ids=["native", "numpy"])
@pytest.mark.parametrize("dtype", ["f32", "f64", "f16", "bf16"])
@pytest.mark.parametrize("activation", list(TORCH_ACT))
@pytest.mark.parametrize("case", range(len(CASES)))
def test_activated_conv_matches_torch(case, activation, dtype, native, monkeypatch):
    if not native:
        monkeypatch.setattr(cpu_conv, "_NATIVE_CONV", False)
        monkeypatch.setattr(cpu_conv, "_DIRECT_CONV", False)
    xs, ws, kwargs = CASES[case]
    x, w, b = _operands(xs, ws, case)
    if dtype in ("f16", "bf16"):  # the reference from the operands as rounded
        x, w, b = (wb.tensor(a).to_dtype(dtype).to_dtype(wb.f64).numpy() for a in (x, w, b))
    got = wb.conv2d(*(wb.tensor(a).to_dtype(dtype) for a in (x, w, b)), **kwargs,
                    activation=activation)  # fmt: skip
    want, pre = _reference(x, w, b, kwargs, activation)
    tol = TOL[dtype]
    np.testing.assert_allclose(got.to_dtype(wb.f64).numpy(), want, rtol=tol,
                               atol=tol * np.abs(want).max())  # fmt: skip
    assert (pre < -3).any() and (pre > 3).any()  # both sides of the activation are reached


def _spy(monkeypatch, name: str) -> list:
    calls = []
    original = getattr(cpu_conv, name)
    monkeypatch.setattr(cpu_conv, name, lambda *a: calls.append(a[-1]) or original(*a))
    return calls


@pytest.mark.skipif(not cpu_conv._DIRECT_CONV, reason="no conv_direct in this variant")
def test_the_direct_and_im2col_kernels_apply_it(monkeypatch):
    direct, columns = _spy(monkeypatch, "_conv_direct"), _spy(monkeypatch, "_conv_native")
    for i in (0, 3):
        xs, ws, kwargs = CASES[i]
        x, w, b = (wb.tensor(a).to_dtype(wb.f32) for a in _operands(xs, ws, i))
        fused = wb.conv2d(x, w, b, **kwargs, activation="silu").numpy()
        plain = wb.conv2d(x, w, b, **kwargs)
        np.testing.assert_allclose(fused, wb.silu(plain).numpy(), rtol=1e-6, atol=1e-7)
    codes = cpu_conv.ACTIVATIONS["silu"], 0
    assert direct == list(codes) and columns == list(codes)


def test_gradients_flow_through_the_activation():
    xs, ws, kwargs = CASES[0]
    x, w, b = _operands(xs, ws, 0)
    xt, wt, bt = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    F.silu(F.conv2d(xt, wt, bt, **kwargs)).sum().backward()
    xv, wv, bv = (wb.tensor(a).requires_grad_() for a in (x, w, b))
    grads = wb.conv2d(xv, wv, bv, **kwargs, activation="silu").sum().backward()
    for got, want in ((grads[xv], xt.grad), (grads[wv], wt.grad), (grads[bv], bt.grad)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-10, atol=1e-10)


def test_an_unknown_activation_is_a_clear_error():
    x, w = wb.zeros((1, 2, 4, 4)), wb.zeros((3, 2, 3, 3))
    with pytest.raises(ArgumentError, match="activation must be None or one of 'silu'.*'tanh'"):
        wb.conv2d(x, w, activation="tanh")
