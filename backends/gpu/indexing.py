"""Index ops on the GPU backends: index_select, gather, scatter, scatter_add, index_add.

Indices are checked on the host first (min and max through the reduce kernels: one sync), so
an out-of-range index raises the CPU backend's ``IndexError`` instead of faulting the GPU.
"""

from __future__ import annotations

from ..errors import UnsupportedOnDevice
from ..layout import Layout, numel
from .params import I32, Dims


class IndexingOps:
    __slots__ = ()

    def _checked_index(self, index, index_layout, size: int, dim: int, wrap: bool):
        """(i64 storage, its layout) after a range check against ``size``."""
        if index.dtype != "i64":
            index = index.cast(index_layout, "i64")
            index_layout = Layout.contiguous(tuple(index_layout.shape))
        n = numel(index_layout.shape)
        if n:
            all_dims = tuple(range(len(index_layout.shape)))
            lo = index.reduce("min", index_layout, all_dims, False, "i64")
            hi = index.reduce("max", index_layout, all_dims, False, "i64")
            lo_v = int(lo.to_numpy(Layout((), ()))[()])
            hi_v = int(hi.to_numpy(Layout((), ()))[()])
            if hi_v >= size or lo_v < (-size if wrap else 0):
                import numpy as np

                from ..cpu.indexing import _out_of_range

                _out_of_range(np.array([lo_v, hi_v]), size, dim, wrap)
        return index, index_layout

    def index_select(self, layout, dim: int, index, index_layout, wrap: bool = False):
        """``x`` restricted to the (1-d) ``index`` entries along ``dim``."""
        shape = list(layout.shape)
        index, index_layout = self._checked_index(index, index_layout, shape[dim], dim, wrap)
        shape[dim] = index_layout.shape[0]
        n = numel(shape)
        out = self._new(n)
        self._launch("indexing", f"index_select_{self.dtype}", n, out._at(), self._at(),
                     Dims(layout), index._at(), Dims(index_layout), n, I32(dim),
                     I32(wrap))  # fmt: skip
        return out

    def gather(self, layout, dim: int, index, index_layout, wrap: bool = False):
        """``out[i, j, k] = x[i, index[i, j, k], k]`` (dim 1); out has index's shape."""
        index, index_layout = self._checked_index(index, index_layout, layout.shape[dim], dim,
                                                  wrap)  # fmt: skip
        n = numel(index_layout.shape)
        out = self._new(n)
        self._launch("indexing", f"gather_{self.dtype}", n, out._at(), self._at(), Dims(layout),
                     index._at(), Dims(index_layout), n, I32(dim), I32(wrap))  # fmt: skip
        return out

    def scatter(self, layout, dim: int, index, index_layout, src, src_layout, wrap: bool = False):
        """A copy of ``x`` with ``out[i, index[i, j, k], k] = src[i, j, k]`` (dim 1).

        Repeated indices: one of the writes wins (unordered on the GPU)."""
        return self._scatter("scatter", layout, dim, index, index_layout, src, src_layout, wrap)

    def scatter_add(self, layout, dim: int, index, index_layout, src, src_layout,
                    wrap: bool = False):  # fmt: skip
        """A copy of ``x`` with ``out[i, index[i, j, k], k] += src[i, j, k]`` (dim 1)."""
        return self._scatter("scatter_add", layout, dim, index, index_layout, src, src_layout,
                             wrap)  # fmt: skip

    def index_add(self, layout, dim: int, index, index_layout, src, src_layout,
                  wrap: bool = False):  # fmt: skip
        """A copy of ``x`` with ``out[..., index[j], ...] += src[..., j, ...]`` along ``dim``."""
        return self._scatter("index_add", layout, dim, index, index_layout, src, src_layout, wrap)

    def _scatter(self, kind, layout, dim, index, index_layout, src, src_layout, wrap):
        if kind != "scatter" and self.dtype not in self.K.ATOMIC:
            raise UnsupportedOnDevice(
                f"op {kind} is not implemented on {self.device_kind} for {self.dtype}"
            )
        shape = tuple(layout.shape)
        if kind != "scatter" and self.dtype in ("f16", "bf16"):
            # sum in f32 and round once, as the CPU does (bf16 atomics round every addition)
            wide = self.cast(layout, "f32")._scatter(
                kind, Layout.contiguous(shape), dim, index, index_layout, src, src_layout, wrap
            )
            return wide.cast(Layout.contiguous(shape), self.dtype)
        index, index_layout = self._checked_index(index, index_layout, shape[dim], dim, wrap)
        if src.dtype != self.dtype:
            src = src.cast(src_layout, self.dtype)
            src_layout = Layout.contiguous(tuple(src_layout.shape))
        out = self.contiguous(layout)
        out_layout = Layout.contiguous(shape)
        # scatter/scatter_add walk index's shape (src read there); index_add walks src's shape
        walk = src_layout if kind == "index_add" else index_layout
        n = numel(walk.shape)
        if kind == "index_add":
            src_arg = Dims(src_layout)
        else:
            src_arg = Dims(_leading(src_layout, tuple(index_layout.shape)))
        self._launch("indexing", f"{kind}_{self.dtype}", n, out._at(), Dims(out_layout),
                     index._at(), Dims(index_layout), src._at(), src_arg, n, I32(dim),
                     I32(wrap))  # fmt: skip
        return out

    def nonzero(self, layout):
        """(storage of the ``(n, ndim)`` int64 coordinates of the non-zero elements in C order,
        ``n``): found on the host (the output size must be known anyway)."""
        import numpy as np

        coords = np.argwhere(self.to_numpy(layout)).astype(np.int64)
        return type(self).from_numpy(coords, self.index), coords.shape[0]


def _leading(layout, shape) -> Layout:
    """``layout`` restricted to its leading ``shape`` (same strides and offset)."""
    return Layout(shape, layout.strides, layout.offset)
