"""Launch plans shared by the GPU backends: grid sizes, the views that put the reduced (or
scanned, sorted, softmaxed) dims last, and the bitonic sort network's schedule. Pure
arithmetic on layouts: no device API."""

from __future__ import annotations

from collections.abc import Iterator

from ..layout import Layout, contiguous_strides, numel

THREADS = 256  # threads per block (threadgroup) of the elementwise kernels
MAX_BLOCKS = 65535  # the kernels loop (grid-stride) beyond this many blocks
SORT_MAX = 1024  # longest line sorted in shared memory by one block
GROUP_NORM_THREADS = (32, 512, 1024)  # fewest, usual and most threads per block (32 | n)


def blocks(n: int) -> int:
    """Blocks for ``n`` items of a grid-stride kernel with ``THREADS`` threads each."""
    return max(1, min(-(-n // THREADS), MAX_BLOCKS))


def row_grid(rows: int) -> tuple[int, int, int]:
    """One block per row (grid-stride beyond ``MAX_BLOCKS`` rows)."""
    return (max(1, min(rows, MAX_BLOCKS)), 1, 1)


def reduce_view(layout, dims: tuple[int, ...]) -> tuple[Layout, int, int]:
    """``(view, m, k)``: ``layout`` permuted to kept dims first and the (sorted, normalised)
    ``dims`` last, so output row ``i`` reduces the ``k`` elements ``view[i, :]``."""
    shape = tuple(layout.shape)
    dims = tuple(sorted(d % len(shape) for d in dims)) if shape else ()
    kept = [d for d in range(len(shape)) if d not in dims]
    view = Layout.of(layout).permute(tuple(kept + list(dims)))
    return view, numel(shape[d] for d in kept), numel(shape[d] for d in dims)


def line_views(layout, dim: int) -> tuple[Layout, Layout, int, int]:
    """``(src, dst, m, k)`` for an op along ``dim`` writing a contiguous result of the same
    shape: both layouts permuted so ``dim`` is last; ``m`` lines of ``k`` elements."""
    shape = tuple(layout.shape)
    dim %= len(shape)
    order = tuple([d for d in range(len(shape)) if d != dim] + [dim])
    src = Layout.of(layout).permute(order)
    dst = Layout(shape, contiguous_strides(shape)).permute(order)
    k = shape[dim]
    return src, dst, (numel(shape) // k if k else 0), k


def next_pow2(k: int) -> int:
    p = 1
    while p < k:
        p *= 2
    return p


def bitonic_steps(p: int) -> Iterator[tuple[int, int]]:
    """``(size, stride)`` of each compare-exchange step of a bitonic sort of ``p`` (a power of
    two) keys: log2(p)·(log2(p)+1)/2 steps, each one launch (or one barrier in shared memory)."""
    size = 2
    while size <= p:
        stride = size // 2
        while stride > 0:
            yield size, stride
            stride //= 2
        size *= 2


def sort_shared_bytes(p: int, itemsize: int) -> int:
    """Shared memory of the in-block sort: ``p`` (value, int64 index) pairs, values widened
    to 8 bytes when 8-byte types, else 4."""
    return p * (8 + (8 if itemsize == 8 else 4))


def group_norm_threads(k: int) -> int:
    """Threads per (n, g) block for ``k`` elements a group: no more than the elements (a
    multiple of 32, as the warp reduction needs), and the most for large groups, which are
    few per sample (Stable Diffusion: 32 groups of up to C/32 · H · W elements)."""
    low, usual, most = GROUP_NORM_THREADS
    if k >= 16 * most:
        return most
    return max(low, min(usual, -(-k // 32) * 32))


def gemm_operand(shape, strides):
    """How a row-major (..., rows, cols) operand reaches a GEMM library without a copy.

    Returns ``(transposed, ld)``: row-major contiguous rows (``strides[-1] == 1``) are a
    column-major ``cols x rows`` matrix with ``ld = strides[-2]``; a transposed view
    (``strides[-2] == 1``) is passed with the T flag and ``ld = strides[-1]``. Returns None
    when neither holds (the caller makes the operand contiguous first).
    """
    rows, cols = shape[-2], shape[-1]
    rs, cs = strides[-2], strides[-1]
    if cs == 1 or cols == 1:
        ld = rs if rows > 1 else cols
        if ld >= max(cols, 1):
            return False, max(ld, 1)
    if rs == 1 or rows == 1:
        ld = cs if cols > 1 else rows
        if ld >= max(rows, 1):
            return True, max(ld, 1)
    return None


def batch_stride(shape, strides) -> int | None:
    """The one element stride between consecutive matrices of a batch, or None when the batch
    dims are not a single evenly strided run (the caller copies first). Batch size 1: 0."""
    batch_shape, batch_strides = shape[:-2], strides[:-2]
    dims = [(s, st) for s, st in zip(batch_shape, batch_strides, strict=True) if s != 1]
    if not dims:
        return 0
    if all(st == 0 for _, st in dims):
        return 0
    step = dims[-1][1]
    expected = step
    for size, stride in reversed(dims):
        if stride != expected:
            return None
        expected = stride * size
    return step
