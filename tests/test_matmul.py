"""``matmul`` / ``@`` against PyTorch: 1-d and 2-d operands, batches with broadcast batch dims,
strided operands, half precision, empty dims, forward and gradient."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from devices import OP_DEVICE_PARAMS
from op_check import check

import workbench as wb


def uniform(shape, seed=0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1.0, 1.0, shape)


SHAPES = [
    ((4,), (4,)),  # dot product -> 0-d
    ((4,), (4, 3)),  # vector @ matrix -> (3,)
    ((3, 4), (4,)),  # matrix @ vector -> (3,)
    ((3, 4), (4, 5)),
    ((1, 4), (4, 1)),
    ((2, 3, 4), (2, 4, 5)),  # batched
    ((2, 3, 4), (4, 5)),  # matrix broadcast over the batch
    ((3, 4), (2, 4, 5)),
    ((2, 1, 3, 4), (5, 4, 2)),  # batch dims (2, 1) and (5,) broadcast to (2, 5)
    ((2, 3, 4), (4,)),  # batched matrix @ vector
    ((4,), (2, 4, 5)),  # vector @ batched matrix
    ((0, 4), (4, 3)),  # empty rows
    ((3, 0), (0, 5)),  # empty inner dim: zeros
    ((2, 0, 4), (4, 3)),  # empty batch rows
]


@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_matmul_shapes(shapes, device):
    check(lambda a, b: a @ b, [uniform(shapes[0]), uniform(shapes[1], seed=1)], device=device)


@pytest.mark.parametrize(
    "layouts",
    [
        ("transposed", "contiguous"),
        ("contiguous", "transposed"),
        ("transposed", "transposed"),
        ("sliced", "sliced"),
        ("broadcast", "sliced"),
    ],
    ids=str,
)
@pytest.mark.parametrize("shapes", [((3, 4), (4, 5)), ((2, 3, 4), (2, 4, 5))], ids=str)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_matmul_strided_operands(shapes, layouts, device):
    a, b = uniform(shapes[0]), uniform(shapes[1], seed=1)
    if layouts[0] == "broadcast":
        a = np.broadcast_to(a[:1], a.shape).copy()
    check(wb.matmul, [a, b], torch_fn=torch.matmul, layouts=list(layouts), device=device)


# f16/bf16 products are accumulated in f32 and rounded once in both libraries; the remaining
# difference is the rounding of the inputs' gradients through a second product.
@pytest.mark.parametrize("dtype", [wb.f64, wb.f16, wb.bf16], ids=str)
@pytest.mark.parametrize("shapes", [((3, 4), (4, 5)), ((2, 3, 8), (8, 5)), ((8,), (8,))], ids=str)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_matmul_dtypes(shapes, dtype, device):
    out = wb.matmul(
        wb.tensor(uniform(shapes[0]), dtype=dtype, device=device),
        wb.tensor(uniform(shapes[1]), dtype=dtype, device=device),
    )
    assert out.dtype is dtype
    check(
        wb.matmul,
        [uniform(shapes[0]), uniform(shapes[1], seed=1)],
        dtype=dtype,
        torch_fn=torch.matmul,
        device=device,
    )


@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_matmul_bigger_f32(device):
    check(
        wb.matmul,
        [uniform((2, 33, 70)), uniform((70, 17), seed=1)],
        torch_fn=torch.matmul,
        device=device,
    )


@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_matmul_integers(device):
    a = np.random.default_rng(0).integers(-5, 5, (3, 4))
    b = np.random.default_rng(1).integers(-5, 5, (4, 2))
    check(wb.matmul, [a, b], torch_fn=torch.matmul, device=device)


def test_matmul_mixed_dtypes_promote():
    a = wb.tensor(uniform((2, 3)), dtype=wb.f32)
    b = wb.tensor(uniform((3, 2)), dtype=wb.f64)
    assert (a @ b).dtype is wb.f64
    assert (a @ wb.tensor(np.ones((3, 1), dtype=np.int64))).dtype is wb.f32


@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_matmul_gradient_when_one_side_is_constant(device):
    check(
        wb.matmul,
        [uniform((3, 4)), uniform((4, 2), seed=1)],
        torch_fn=torch.matmul,
        grad_inputs=[1],
        device=device,
    )
    check(
        wb.matmul,
        [uniform((4,)), uniform((2, 4, 2), seed=1)],
        torch_fn=torch.matmul,
        grad_inputs=[0],
        device=device,
    )


def test_rmatmul_with_numpy_array():
    """``ndarray @ Tensor`` defers to the tensor (``__array_priority__``)."""
    a, b = uniform((2, 3)), uniform((3, 2), seed=1)
    out = a @ wb.tensor(b)
    assert isinstance(out, wb.Tensor)
    np.testing.assert_allclose(out.numpy(), a @ b)


@pytest.mark.parametrize("side", ["weight on the right", "weight on the left"])
def test_gradient_of_a_transposed_matrix_reaches_it_contiguous(side):
    """x @ W.t() (a linear layer) or W.t() @ x: W's gradient equals torch's and is
    contiguous like W, so the optimizers' fused steps take it."""
    w = uniform((4, 3), seed=1)
    if side == "weight on the right":
        x, g = uniform((5, 3)), uniform((5, 4), seed=2)
    else:
        x, g = uniform((4, 5)), uniform((3, 5), seed=2)

    def product(x, w):
        return x @ w.t() if side == "weight on the right" else w.t() @ x

    wbw = wb.tensor(w, requires_grad=True)
    product(wb.tensor(x), wbw).backward(wb.tensor(g))
    tw = torch.tensor(w, requires_grad=True)
    product(torch.tensor(x), tw).backward(torch.tensor(g))
    assert wbw.grad.is_contiguous
    np.testing.assert_allclose(wbw.grad.numpy(), tw.grad.numpy(), rtol=1e-12)
