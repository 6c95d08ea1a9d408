"""Typed use of the public API: ``make lint`` runs mypy on it (through the shipped stubs), and
``tests/compat/test_stubs.py`` runs it, so every line is also real, working code."""

from __future__ import annotations

from typing import assert_type

import workbench as wb
import workbench.nn.functional as F


def forward(x: wb.Tensor, w: wb.Var) -> wb.Tensor:
    h = wb.silu(x @ w)  # an op bound at run time, seen through workbench/__init__.pyi
    assert_type(h, wb.Tensor)
    assert_type(h.softmax(-1), wb.Tensor)  # a method bound at run time (tensor.pyi)
    assert_type(h.float().long().half().bool().type(wb.f32), wb.Tensor)
    assert_type(2 * h + 1, wb.Tensor)
    assert_type(h.T, wb.Tensor)
    return F.relu(h).mean()


def main() -> None:
    x = wb.randn(3, 4)
    w = wb.Var(wb.randn(4, 2))
    loss = forward(x, w)
    assert_type(loss.item(), bool | int | float)
    grads = loss.backward()
    assert_type(grads[w], wb.Tensor)
    assert_type(wb.einsum("ij,jk->ik", x, w), wb.Tensor)
    assert_type(wb.allclose(x, x), bool)
    assert_type(wb.isclose(x, x).all(), wb.Tensor)
    assert_type(x.cumprod(1), wb.Tensor)
    assert_type(x.sort(1).values, wb.Tensor)  # named (values, indices) results
    assert_type(x.topk(2, 1, True, True).indices, wb.Tensor)
    values, indices = x.cummax(0)
    assert_type(indices, wb.Tensor)
    assert_type(x.int() & 3 | 1 << x.long(), wb.Tensor)
    assert_type(x.shape, tuple[int, ...])
    assert_type(x.dtype, wb.DType)


if __name__ == "__main__":
    main()
