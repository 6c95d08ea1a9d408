"""Indexing ops on the CPU: gather, scatter, scatter_add, index_select, index_add, nonzero.

Every op checks its indices in one min/max pass: an index outside ``[0, size)`` (or
``[-size, size)`` with ``wrap=True``, PyTorch's rule for advanced indexing, where negative
indices count from the end) raises ``IndexError`` naming the range found and the size; the
core re-raises it as ``IndexingError`` with the op's name.

Accumulation (scatter_add, index_add) runs in f32 for f16/bf16. Rows of ``index_add`` (the
embedding backward: many rows of ``post`` elements into a ``(n, post)`` table) go through a
sparse one-hot matrix product, which is several times faster than ``np.add.at`` on rows;
everything else scatters through flat positions with the 1-d ``np.add.at`` fast path.
"""

from __future__ import annotations

import numpy as np

from ..lazy import lazy_module
from ._arrays import contiguous, upcast, view

sparse = lazy_module("scipy.sparse")

# Below this many source elements the sparse matrix costs more to build than add.at takes.
_SPARSE_MIN_ELEMENTS = 16384
_SPARSE_MIN_ROW = 8


def _indices(storage, layout, size: int, dim: int, wrap: bool) -> np.ndarray:
    """The index array of ``storage[layout]``, checked against ``size``; negatives wrapped."""
    idx = view(storage.array, layout)
    if not idx.size:
        return idx
    if not wrap:
        # One pass: seen as unsigned, negative indices are huge, so max() catches both ends.
        if idx.view(_UNSIGNED[idx.itemsize]).max() >= size:
            _out_of_range(idx, size, dim, wrap)
        return idx
    lo = int(idx.min())
    hi = int(idx.max())
    if hi >= size or lo < -size:
        _out_of_range(idx, size, dim, wrap)
    return np.where(idx < 0, idx + size, idx) if lo < 0 else idx


_UNSIGNED = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def _out_of_range(idx: np.ndarray, size: int, dim: int, wrap: bool):
    allowed = f"[{-size}, {size})" if wrap else f"[0, {size})"
    raise IndexError(
        f"index out of range: found indices in [{idx.min()}, {idx.max()}] for dim {dim} of "
        f"size {size} (allowed {allowed})"
    )


def _leading(a: np.ndarray, shape: tuple[int, ...], skip: int | None = None) -> np.ndarray:
    """The view ``a[:shape[0], :shape[1], ...]`` (dim ``skip`` kept whole)."""
    if a.shape == shape or (skip is not None and _same_except(a.shape, shape, skip)):
        return a
    return a[tuple(slice(None) if d == skip else slice(0, s) for d, s in enumerate(shape))]


def _same_except(a: tuple[int, ...], b: tuple[int, ...], skip: int) -> bool:
    return all(x == y for d, (x, y) in enumerate(zip(a, b, strict=True)) if d != skip)


def _flat_positions(idx: np.ndarray, dim: int, shape: tuple[int, ...]) -> np.ndarray:
    """Flat positions in a C-contiguous array of ``shape`` of the elements that
    ``idx`` names along ``dim`` (coordinates of ``idx`` itself elsewhere)."""
    strides = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        strides[d] = strides[d + 1] * shape[d + 1]
    pos = idx.astype(np.intp) * strides[dim]
    for d, n in enumerate(idx.shape):
        if d != dim and n > 1:
            grid = np.arange(n, dtype=np.intp) * strides[d]
            pos = pos + grid.reshape((n,) + (1,) * (idx.ndim - d - 1))
    return pos


def _is_broadcast_zero(x: np.ndarray) -> bool:
    return not any(x.strides) and x.size > 0 and not x.reshape(-1)[0]


def _compute_copy(x: np.ndarray) -> np.ndarray:
    """A fresh C-contiguous copy of ``x`` in its compute type (f32 for f16/bf16)."""
    out = upcast(x)
    if out is x or not out.flags.c_contiguous:
        out = np.array(out, order="C")
    return out


class IndexingOps:
    __slots__ = ()

    def gather(self, layout, dim: int, index, index_layout, wrap: bool = False):
        """``out[i, j, k] = x[i, index[i, j, k], k]`` (dim 1); out has index's shape."""
        x = view(self.array, layout)
        idx = _indices(index, index_layout, x.shape[dim], dim, wrap)
        x = _leading(x, idx.shape, skip=dim)
        return type(self)(contiguous(np.take_along_axis(x, idx.astype(np.intp), axis=dim)))

    def scatter(self, layout, dim: int, index, index_layout, src, src_layout, wrap: bool = False):
        """A copy of ``x`` with ``out[i, index[i, j, k], k] = src[i, j, k]`` (dim 1).

        Where an index repeats, the last write wins (as PyTorch's CPU kernel).
        """
        out = np.array(view(self.array, layout), order="C")
        idx = _indices(index, index_layout, out.shape[dim], dim, wrap)
        values = _leading(view(src.array, src_layout), idx.shape)
        np.put_along_axis(_leading(out, idx.shape, skip=dim), idx.astype(np.intp), values, dim)
        return type(self)(out)

    def scatter_add(
        self, layout, dim: int, index, index_layout, src, src_layout, wrap: bool = False
    ):
        """A copy of ``x`` with ``out[i, index[i, j, k], k] += src[i, j, k]`` (dim 1)."""
        x = view(self.array, layout)
        out = _compute_copy(x)
        idx = _indices(index, index_layout, out.shape[dim], dim, wrap)
        if idx.size:
            values = upcast(_leading(view(src.array, src_layout), idx.shape))
            pos = _flat_positions(idx, dim, out.shape)
            np.add.at(out.reshape(-1), pos.reshape(-1), values.reshape(-1))
        return type(self)(contiguous(out, x.dtype))

    def index_select(self, layout, dim: int, index, index_layout, wrap: bool = False):
        """``x`` restricted to the (1-d) ``index`` entries along ``dim``."""
        x = view(self.array, layout)
        idx = _indices(index, index_layout, x.shape[dim], dim, wrap)
        if dim == 0:
            return type(self)(contiguous(x[idx]))
        return type(self)(contiguous(np.take(x, idx, axis=dim)))

    def index_add(self, layout, dim: int, index, index_layout, src, src_layout, wrap: bool = False):
        """A copy of ``x`` with ``out[..., index[j], ...] += src[..., j, ...]`` along ``dim``.

        Repeated indices accumulate. ``src`` has x's shape with ``len(index)`` at ``dim``.
        """
        x = view(self.array, layout)
        idx = _indices(index, index_layout, x.shape[dim], dim, wrap)
        values = upcast(view(src.array, src_layout))
        shape = x.shape
        pre = int(np.prod(shape[:dim], dtype=np.int64))
        post = int(np.prod(shape[dim + 1 :], dtype=np.int64))
        n, k = shape[dim], idx.shape[0]
        if (
            values.dtype.kind == "f"
            and post >= _SPARSE_MIN_ROW
            and values.size >= _SPARSE_MIN_ELEMENTS
        ):
            # One-hot (n, k) matrix times the (k, pre*post) rows: a scatter-add in compiled code.
            itype = np.int32 if max(n, k) < 2**31 - 1 else np.int64  # scipy's native index type
            onehot = sparse.csc_matrix(
                (np.ones(k, values.dtype), idx.astype(itype), np.arange(k + 1, dtype=itype)),
                shape=(n, k),
            )
            rows = values.reshape(pre, k, post)
            rows = rows[0] if pre == 1 else rows.transpose(1, 0, 2).reshape(k, pre * post)
            summed = np.asarray(onehot @ rows)
            if pre > 1:
                summed = summed.reshape(n, pre, post).transpose(1, 0, 2)
            out = summed.reshape(shape)
            out = np.array(out, order="C") if not out.flags.c_contiguous else out
            if not _is_broadcast_zero(x):  # the gradient of index_select adds to zeros
                out += upcast(x)
            return type(self)(contiguous(out, x.dtype))
        out = _compute_copy(x)
        if k and out.size:
            pos = (np.arange(pre, dtype=np.intp) * (n * post)).reshape(pre, 1, 1)
            pos = pos + (idx.astype(np.intp) * post).reshape(1, k, 1)
            pos = pos + np.arange(post, dtype=np.intp).reshape(1, 1, post)
            np.add.at(out.reshape(-1), pos.reshape(-1), values.reshape(-1))
        return type(self)(contiguous(out, x.dtype))

    def nonzero(self, layout):
        """(storage of the ``(n, ndim)`` int64 coordinates of the non-zero elements in C order,
        ``n``)."""
        coords = np.argwhere(view(self.array, layout))
        return type(self)(contiguous(coords, np.dtype(np.int64))), coords.shape[0]
