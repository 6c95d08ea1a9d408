"""torch.nn.functional's shrink/threshold ops, cosine_similarity, F.embedding and F.rms_norm in
torch's argument order, the in-place unary ops, ``x.new_*`` and the creation functions'
``requires_grad=``, against torch."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from op_check import check

import workbench as wb
import workbench.nn.functional as F

rng = np.random.default_rng(0)


def _x(*shape: int) -> np.ndarray:
    return (rng.standard_normal(shape) * 1.5).astype(np.float32)


@pytest.mark.parametrize(
    "name,args",
    [("tanhshrink", ()), ("softshrink", ()), ("softshrink", (1.0,)), ("hardshrink", ()),
     ("hardshrink", (0.25,)), ("threshold", (0.5, -2.0)), ("threshold", (-0.1, 0.0))],
)  # fmt: skip
@pytest.mark.parametrize("dtype", [wb.f32, wb.f64, wb.bf16])
def test_shrink_and_threshold(name: str, args: tuple, dtype) -> None:
    x = _x(4, 33)
    x[0, :4] = [0.5, -0.5, 0.0, 1.0]  # at the knees
    check(lambda t: getattr(F, name)(t, *args), [x], dtype=dtype,
          torch_fn=lambda t: getattr(TF, name)(t, *args))  # fmt: skip


@pytest.mark.parametrize(
    "s1,s2,dim", [((4, 8), (4, 8), 1), ((3, 5, 6), (3, 5, 6), -1), ((2, 7), (1, 7), 1),
                  ((5, 3), (5, 3), 0)],
)  # fmt: skip
def test_cosine_similarity(s1, s2, dim) -> None:
    check(lambda a, b: F.cosine_similarity(a, b, dim), [_x(*s1), _x(*s2)],
          torch_fn=lambda a, b: TF.cosine_similarity(a, b, dim))  # fmt: skip


def test_cosine_similarity_of_a_zero_vector_is_zero() -> None:
    a, b = np.zeros((2, 4), np.float32), _x(2, 4)
    got = F.cosine_similarity(wb.tensor(a), wb.tensor(b)).numpy()
    want = TF.cosine_similarity(torch.tensor(a), torch.tensor(b)).numpy()
    np.testing.assert_array_equal(got, want)


def test_embedding_in_torch_order_with_padding_idx() -> None:
    weight = _x(6, 3)
    ids = np.array([[0, 2, 2], [5, 1, 2]])
    tw = torch.tensor(weight, requires_grad=True)
    TF.embedding(torch.tensor(ids), tw, padding_idx=2).square().sum().backward()
    w = wb.tensor(weight, requires_grad=True)
    out = F.embedding(wb.tensor(ids), w, padding_idx=2)
    np.testing.assert_allclose(out.numpy(), weight[ids])
    out.square().sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-6)
    assert not w.grad.numpy()[2].any()


@pytest.mark.parametrize("shape,normalized", [((3, 8), (8,)), ((2, 3, 4, 5), (4, 5)), ((6,), (6,))])
@pytest.mark.parametrize("dtype", [wb.f32, wb.f16, wb.bf16])
def test_rms_norm_in_torch_order(shape, normalized, dtype) -> None:
    check(lambda x, w: F.rms_norm(x, normalized, w), [_x(*shape), _x(*normalized)], dtype=dtype,
          torch_fn=lambda x, w: TF.rms_norm(x, normalized, w))  # fmt: skip


def test_rms_norm_default_eps_is_the_compute_dtypes_epsilon() -> None:
    x = np.full((2, 4), 1e-4, np.float32)  # mean(x²) = 1e-8: f32's eps (1.2e-7) matters
    for dtype, tdtype in [
        (wb.f32, torch.float32),
        (wb.f16, torch.float16),
        (wb.f64, torch.float64),
    ]:
        got = F.rms_norm(wb.tensor(x).to(dtype), (4,)).to(wb.f32).numpy()
        want = TF.rms_norm(torch.tensor(x).to(tdtype), (4,)).float().numpy()
        np.testing.assert_allclose(got, want, rtol=2e-3)


def test_rms_norm_rejects_a_shape_that_is_not_trailing() -> None:
    with pytest.raises(wb.ShapeError, match=r"normalized_shape \(3,\) must be the trailing"):
        F.rms_norm(wb.zeros(3, 4), (3,))


UNARY_INPLACE = ["exp", "log", "sqrt", "rsqrt", "abs", "neg", "sigmoid", "tanh", "relu", "sin",
                 "cos", "floor", "ceil", "round"]  # fmt: skip


@pytest.mark.parametrize("name", UNARY_INPLACE)
def test_unary_inplace_values_and_gradients(name: str) -> None:
    x = np.abs(_x(3, 5)) + 0.1 if name in ("log", "sqrt", "rsqrt") else _x(3, 5)
    tx = torch.tensor(x, requires_grad=True)
    ty = tx * 2.0
    getattr(ty, name + "_")()
    ty.sum().backward()
    wx = wb.tensor(x, requires_grad=True)
    wy = wx * 2.0
    assert getattr(wy, name + "_")() is wy
    np.testing.assert_allclose(wy.numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-6)
    wy.sum().backward()
    np.testing.assert_allclose(wx.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_masked_fill_inplace_keeps_the_gradient_of_the_rest() -> None:
    x = _x(2, 6)
    mask = x > 0.3
    tx = torch.tensor(x, requires_grad=True)
    ty = tx * 3.0
    ty.masked_fill_(torch.tensor(mask), -1.0)
    ty.square().sum().backward()
    wx = wb.tensor(x, requires_grad=True)
    wy = wx * 3.0
    wy.masked_fill_(wb.tensor(mask), -1.0)
    np.testing.assert_allclose(wy.numpy(), ty.detach().numpy())
    wy.square().sum().backward()
    np.testing.assert_allclose(wx.grad.numpy(), tx.grad.numpy(), rtol=1e-6)


def test_inplace_on_a_leaf_that_requires_grad_raises() -> None:
    with pytest.raises(wb.AutogradError, match="exp_"):
        wb.tensor([1.0, 2.0], requires_grad=True).exp_()


@pytest.mark.parametrize(
    "call",
    [lambda t: t.new_zeros(2, 3), lambda t: t.new_zeros((2, 3)), lambda t: t.new_ones(4),
     lambda t: t.new_full((2,), 7), lambda t: t.new_empty(3).shape,
     lambda t: t.new_tensor([1.5, 2]),
     lambda t: t.new_zeros(2, dtype=torch.float32 if isinstance(t, torch.Tensor) else wb.f32)],
)  # fmt: skip
@pytest.mark.parametrize("np_dtype", [np.int16, np.float64])
def test_new_tensors_take_the_source_dtype(call, np_dtype) -> None:
    src = np.arange(3).astype(np_dtype)
    got, want = call(wb.tensor(src)), call(torch.tensor(src))
    if isinstance(want, torch.Size):
        assert tuple(got) == tuple(want)
        return
    assert (
        got.dtype.name
        == {torch.int16: "i16", torch.float64: "f64", torch.float32: "f32"}[want.dtype]
    )
    if "empty" not in repr(call):
        np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize(
    "make",
    [lambda m: m.zeros(2, 3, requires_grad=True), lambda m: m.ones((4,), requires_grad=True),
     lambda m: m.full((2,), 3.0, requires_grad=True), lambda m: m.randn(3, requires_grad=True),
     lambda m: m.rand(3, requires_grad=True), lambda m: m.arange(4.0, requires_grad=True),
     lambda m: m.linspace(0, 1, 5, requires_grad=True), lambda m: m.eye(3, requires_grad=True),
     lambda m: m.empty(2, requires_grad=True),
     lambda m: m.zeros_like(m.ones(3), requires_grad=True)],
)  # fmt: skip
def test_creation_functions_take_requires_grad(make) -> None:
    t, w = make(torch), make(wb)
    assert w.requires_grad is t.requires_grad is True and tuple(w.shape) == tuple(t.shape)
    (w * 2.0).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), np.full(tuple(t.shape), 2.0, np.float32))
    assert not wb.zeros(2).requires_grad


def test_integer_tensors_cannot_require_grad() -> None:
    with pytest.raises(wb.AutogradError, match="only floating point tensors can require grad"):
        wb.zeros(2, dtype=wb.i64, requires_grad=True)
