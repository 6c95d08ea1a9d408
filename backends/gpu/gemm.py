"""GEMM operands of the GPU backends: which strided views a GEMM library reads in place
(``plan.gemm_operand`` / ``plan.batch_stride``), and the one row-major call shape the storage's
``_gemm`` hook takes."""

from __future__ import annotations

from typing import Any, NamedTuple

from ..layout import Layout
from . import plan


class GemmOperand(NamedTuple):
    """A row-major matrix (or a strided batch of them) a GEMM reads or writes in place:
    ``storage`` from element ``offset``; ``transposed`` for a transposed view; ``ld`` the
    row (or, transposed, column) stride; ``batch_stride`` elements between matrices (0: one
    matrix for the whole batch)."""

    storage: Any
    offset: int
    transposed: bool
    ld: int
    batch_stride: int


def gemm_ready(storage, layout: Layout) -> GemmOperand:
    """``storage[layout]`` (..., rows, cols) as a GEMM operand: read in place when it is a
    row-major or transposed strided batch, else copied contiguous first."""
    ok = plan.gemm_operand(layout.shape, layout.strides) is not None
    if not ok or plan.batch_stride(layout.shape, layout.strides) is None:
        storage, layout = storage.contiguous(layout), Layout.contiguous(layout.shape)
    transposed, ld = plan.gemm_operand(layout.shape, layout.strides)
    step = plan.batch_stride(layout.shape, layout.strides)
    return GemmOperand(storage, layout.offset, transposed, ld, step)


def gemm_2d(a_storage, a: Layout, b_storage, b: Layout, c_storage, c_offset: int,
            beta: float = 0.0) -> None:  # fmt: skip
    """Row-major (m, k) @ (k, n) (+ beta · C) into the contiguous (m, n) at element
    ``c_offset`` of ``c_storage``. Each operand is row-major or a transposed view (strides
    (1, ld)), read in place."""
    m, k = a.shape
    n = b.shape[1]
    ta, lda = plan.gemm_operand(a.shape, a.strides)
    tb, ldb = plan.gemm_operand(b.shape, b.strides)
    c_storage._gemm(GemmOperand(c_storage, c_offset, False, n, 0),
                    GemmOperand(a_storage, a.offset, ta, lda, 0),
                    GemmOperand(b_storage, b.offset, tb, ldb, 0), m, n, k, 1, beta)  # fmt: skip
