"""``GpuStorage``: the ops of the GPU backends, written once over a few device hooks.

Every op launches a kernel of ``kernels/gpu`` (CUDA's fatbin or PTX, Metal's library) over a
buffer, passing shapes and strides as ``Layout`` structs by value (``params.py``), so strided
and broadcast views are read in place; launch plans (grids, the views that put reduced dims
last, the sort network) come from ``plan.py``. Results are contiguous.

A backend subclasses it and provides the hooks:

- ``alloc(size, dtype, index)`` (classmethod): a new storage of ``size`` elements;
- ``_at(offset)``: the kernel argument for the buffer at element ``offset``; ``_null()`` the
  argument for an absent optional buffer;
- ``_launch(source, name, n, *args, grid=, block=, shared=)``: run kernel ``name`` of family
  ``source`` over ``n`` items (grid-stride unless ``grid``/``block`` are given);
- ``_upload(data)`` / ``_download(out, offset)``: bytes to and from the buffer (a download
  waits for queued work: the sync point of ``.numpy()`` and ``.item()``);
- ``_gemm(c, a, b, m, n, k, batch, beta)``: row-major ``C = op(A) op(B) + beta C`` over
  ``GemmOperand`` s (the vendor library, or the backend's own kernel).

``K`` is the device's ``KernelNames`` (which dtypes each family has there).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from ..base import BackendStorage
from ..dtypes import ITEMSIZE, NUMPY_BY_NAME, name_of
from ..errors import UnsupportedOnDevice
from ..layout import Layout, contiguous_strides, numel
from . import plan
from .attention import AttentionOps
from .gemm import GemmOperand, gemm_ready
from .indexing import IndexingOps
from .kernels import BOOL_UNARY, LOGICAL, KernelNames
from .nn import NnOps
from .padnorm import PadNormOps
from .params import I32, Raw

GEMM_FLOAT = ("f16", "bf16", "f32", "f64")


class GpuStorage(IndexingOps, NnOps, AttentionOps, PadNormOps, BackendStorage):
    """``size`` elements of ``dtype`` (a name) on device ``index`` of a GPU backend."""

    device_kind: ClassVar[str] = "gpu"
    K: ClassVar[KernelNames] = KernelNames("gpu")
    __slots__ = ()

    # -- hooks (see the module docstring) --------------------------------------------------
    @classmethod
    def alloc(cls, size: int, dtype: str, index: int) -> GpuStorage:
        raise NotImplementedError

    def _at(self, offset: int = 0):
        raise NotImplementedError

    def _null(self):
        raise NotImplementedError

    def _launch(self, source: str, name: str, n: int, *args, grid=None, block=None,
                shared: int = 0) -> None:  # fmt: skip
        raise NotImplementedError

    def _upload(self, data: np.ndarray) -> None:
        raise NotImplementedError

    def _download(self, out: np.ndarray, offset: int) -> None:
        raise NotImplementedError

    def _gemm(self, c: GemmOperand, a: GemmOperand, b: GemmOperand, m: int, n: int, k: int,
              batch: int, beta: float = 0.0) -> None:  # fmt: skip
        raise NotImplementedError

    # -- allocation and host transfers -------------------------------------------------
    def _new(self, size: int, dtype: str | None = None) -> GpuStorage:
        return type(self).alloc(size, dtype or self.dtype, self.index)

    @classmethod
    def _check_dtype(cls, dtype: str) -> None:
        """Raise for a dtype this device cannot hold (Metal: f64)."""
        if dtype not in cls.K.ALL:
            raise UnsupportedOnDevice(
                f"dtype {dtype} cannot be stored on {cls.device_kind} "
                f"(it holds {', '.join(cls.K.ALL)})"
            )

    @classmethod
    def from_numpy(cls, array: np.ndarray, index: int = 0, copy: bool = False) -> GpuStorage:
        """A device copy of ``array``."""
        name = name_of(array.dtype)
        if name is None:
            raise UnsupportedOnDevice(f"dtype {array.dtype} cannot be stored on {cls.device_kind}")
        cls._check_dtype(name)
        array = np.ascontiguousarray(array)
        out = cls.alloc(array.size, name, index)
        if array.size:
            out._upload(array.reshape(-1).view(np.uint8))
        return out

    @classmethod
    def full(cls, shape, value, dtype: str, index: int = 0) -> GpuStorage:
        cls._check_dtype(dtype)
        out = cls.alloc(numel(shape), dtype, index)
        out.const_set(Layout.contiguous(shape), value)
        return out

    @classmethod
    def empty(cls, shape, dtype: str, index: int = 0) -> GpuStorage:
        cls._check_dtype(dtype)
        return cls.alloc(numel(shape), dtype, index)

    def to_numpy(self, layout) -> np.ndarray:
        """A host copy of the elements ``layout`` describes (waits for queued work)."""
        shape = tuple(layout.shape)
        host = np.empty(shape, NUMPY_BY_NAME[self.dtype])
        if host.size == 0:
            return host
        src = self if _is_dense(layout) else self.contiguous(layout)
        offset = layout.offset if src is self else 0
        src._download(host.reshape(-1).view(np.uint8), offset)
        return host

    @property
    def nbytes(self) -> int:
        return self.size * ITEMSIZE[self.dtype]

    # -- elementwise ---------------------------------------------------------------------
    def unary(self, op: str, layout):
        out_dtype = "bool" if op in BOOL_UNARY else self.dtype
        name = self.K.unary_name(op, self.dtype)
        n = numel(layout.shape)
        out = self._new(n, out_dtype)
        self._launch("elementwise", name, n, out._at(), self._at(), n, layout)
        return out

    def binary(self, op: str, lhs_layout, rhs, rhs_layout):
        shape = np.broadcast_shapes(tuple(lhs_layout.shape), tuple(rhs_layout.shape))
        rhs = self._same_dtype(rhs, self.dtype, "binary " + op)
        name = self.K.binary_name(op, self.dtype)
        n = numel(shape)
        out = self._new(n, "bool" if op in LOGICAL else self.dtype)
        la, lb = _bcast(lhs_layout, shape), _bcast(rhs_layout, shape)
        self._launch("elementwise", name, n, out._at(), self._at(), rhs._at(), n, la, lb)
        return out

    def binary_scalar(self, op: str, layout, scalar, reverse: bool = False):
        name = self.K.scalar_name(op, self.dtype)
        n = numel(layout.shape)
        out = self._new(n, "bool" if op in LOGICAL else self.dtype)
        args = (out._at(), self._at(), n, layout, float(scalar), I32(bool(reverse)))
        self._launch("elementwise", name, n, *args)
        return out

    def cmp(self, op: str, lhs_layout, rhs, rhs_layout):
        shape = np.broadcast_shapes(tuple(lhs_layout.shape), tuple(rhs_layout.shape))
        rhs = self._same_dtype(rhs, self.dtype, "cmp " + op)
        n = numel(shape)
        out = self._new(n, "bool")
        la, lb = _bcast(lhs_layout, shape), _bcast(rhs_layout, shape)
        name = self.K.cmp_name(op, self.dtype)
        self._launch("elementwise", name, n, out._at(), self._at(), rhs._at(), n, la, lb)
        return out

    def cmp_scalar(self, op: str, layout, scalar):
        n = numel(layout.shape)
        out = self._new(n, "bool")
        name = self.K.cmp_scalar_name(op, self.dtype)
        self._launch("elementwise", name, n, out._at(), self._at(), n, layout, float(scalar))
        return out

    def affine(self, layout, mul: float, add: float):
        """``x * mul + add``"""
        return self._param_op("affine", layout, float(mul), float(add))

    def powf(self, layout, exponent: float):
        return self._param_op("powf", layout, float(exponent))

    def elu(self, layout, alpha: float):
        """``x if x > 0 else alpha (e^x - 1)``"""
        return self._param_op("elu", layout, float(alpha))

    def clamp(self, layout, lo, hi):
        args = (
            0.0 if lo is None else float(lo),
            0.0 if hi is None else float(hi),
            I32(lo is not None),
            I32(hi is not None),
        )
        return self._param_op("clamp", layout, *args)

    def _param_op(self, family: str, layout, *params):
        name = self.K.param_name(family, self.dtype)
        n = numel(layout.shape)
        out = self._new(n)
        self._launch("elementwise", name, n, out._at(), self._at(), n, layout, *params)
        return out

    def where(self, layout, on_true, true_layout, on_false, false_layout):
        """``self`` is the condition (cast to bool when it is not); layouts share one shape."""
        shape = tuple(layout.shape)
        cond = self if self.dtype == "bool" else self.cast(layout, "bool")
        cond_layout = layout if cond is self else Layout.contiguous(shape)
        dtype = on_true.dtype
        on_false = self._same_dtype(on_false, dtype, "where")
        n = numel(shape)
        out = on_true._new(n)
        lc = _bcast(cond_layout, shape)
        la, lb = _bcast(true_layout, shape), _bcast(false_layout, shape)
        args = (out._at(), cond._at(), on_true._at(), on_false._at(), n, lc, la, lb)
        self._launch("elementwise", self.K.where_name(dtype), n, *args)
        return out

    # -- copies and casts -----------------------------------------------------------------
    def cast(self, layout, dtype: str):
        n = numel(layout.shape)
        if dtype == self.dtype:
            return self.contiguous(layout)
        out = self._new(n, dtype)
        self._launch("elementwise", self.K.cast_name(self.dtype, dtype), n, out._at(),
                     self._at(), n, layout)  # fmt: skip
        return out

    def copy_strided(self, src_layout, dst: GpuStorage, dst_layout) -> None:
        """``dst[dst_layout] = self[src_layout]`` (src broadcast to dst's shape)."""
        shape = tuple(dst_layout.shape)
        src = self
        if dst.dtype != self.dtype:
            src = self.cast(src_layout, dst.dtype)
            src_layout = Layout.contiguous(tuple(src_layout.shape))
        n = numel(shape)
        name = self.K.copy_name(ITEMSIZE[dst.dtype])
        src._launch("elementwise", name, n, dst._at(), dst_layout, src._at(),
                    _bcast(src_layout, shape), n)  # fmt: skip

    def const_set(self, layout, value) -> None:
        n = numel(layout.shape)
        size = ITEMSIZE[self.dtype]
        raw = np.array(value).astype(NUMPY_BY_NAME[self.dtype]).tobytes()
        self._launch("elementwise", self.K.fill_name(size), n, self._at(), layout, n,
                     Raw(raw, size))  # fmt: skip

    def contiguous(self, layout) -> GpuStorage:
        shape = tuple(layout.shape)
        n = numel(shape)
        out = self._new(n)
        self.copy_strided(layout, out, Layout.contiguous(shape))
        return out

    # -- reductions -----------------------------------------------------------------------
    def reduce(self, op: str, layout, dims: tuple[int, ...], keepdim: bool, dtype: str):
        """Reduce over ``dims`` (kept dims first, reduced dims last: one block per output)."""
        view, m, k = plan.reduce_view(layout, dims)
        natural = self.K.reduce_out_dtype(op, self.dtype)
        out = self._new(m, natural)
        if m:
            self._launch("reduce", self.K.reduce_name(op, self.dtype), m, out._at(), self._at(),
                         m, k, view, grid=plan.row_grid(m))  # fmt: skip
        if natural != dtype:
            out = out.cast(Layout.contiguous((m,)), dtype)
        return out

    def cumsum(self, layout, dim: int, dtype: str):
        shape = tuple(layout.shape)
        if not shape:
            return self.cast(layout, dtype)
        src, dst, m, k = plan.line_views(layout, dim)
        natural = self.K.reduce_out_dtype("sum", self.dtype)
        out = self._new(numel(shape), natural)
        self._launch("reduce", self.K.cumsum_name(self.dtype), m, out._at(), dst, self._at(),
                     src, m, k)  # fmt: skip
        if natural != dtype:
            out = out.cast(Layout.contiguous(shape), dtype)
        return out

    def sort(self, layout, dim: int, descending: bool):
        """Stable sort along ``dim``: (values, int64 indices); NaN sorts as the largest value.
        A bitonic network over (value, index) keys: in shared memory, one block per line, for
        lines up to ``SORT_MAX``; in global memory beyond."""
        shape = tuple(layout.shape)
        if not shape:
            return self.contiguous(layout), type(self).full((), 0, "i64", self.index)
        src, dst, m, k = plan.line_views(layout, dim)
        p = plan.next_pow2(k)
        values, indices = self._new(numel(shape)), self._new(numel(shape), "i64")
        if k > plan.SORT_MAX:
            self._sort_long(values, indices, dst, src, m, k, p, descending)
            return values, indices
        shared = plan.sort_shared_bytes(p, ITEMSIZE[self.dtype])
        self._launch("reduce", self.K.sort_name(self.dtype), m, values._at(), indices._at(),
                     dst, self._at(), src, m, k, p, I32(descending),
                     grid=plan.row_grid(m), shared=shared)  # fmt: skip
        return values, indices

    def _sort_long(self, values, indices, dst, src, m: int, k: int, p: int, descending: bool):
        """Lines longer than ``SORT_MAX``: the bitonic network over an (m, p) index scratch in
        global memory, one launch per step (log2(p)·(log2(p)+1)/2 launches)."""
        scratch = self._new(m * p, "i64")
        self._launch("reduce", "sort_long_init", m * p, scratch._at(), m, k, p)
        self.K.sort_name(self.dtype)  # raises for a dtype without sort kernels
        step = f"sort_long_step_{self.dtype}"
        for size, stride in plan.bitonic_steps(p):
            self._launch("reduce", step, m * p, scratch._at(), self._at(), src, m, k, p, size,
                         stride, I32(descending))  # fmt: skip
        gather = f"sort_long_gather_{self.dtype}"
        self._launch("reduce", gather, m * k, values._at(), indices._at(), dst, self._at(), src,
                     scratch._at(), m, k, p)  # fmt: skip

    # -- matmul ---------------------------------------------------------------------------
    def matmul(self, lhs_layout, rhs, rhs_layout):
        """``(..., m, k) @ (..., k, n)`` through ``_gemm`` (integers: ``kernels/gpu/matmul.h``);
        batch dims already broadcast."""
        dtype = self.dtype
        if dtype not in self.K.NUM:
            raise UnsupportedOnDevice(
                f"op matmul is not implemented on {self.device_kind} for {dtype}"
            )
        rhs = self._same_dtype(rhs, dtype, "matmul")
        a_shape, b_shape = tuple(lhs_layout.shape), tuple(rhs_layout.shape)
        batch = np.broadcast_shapes(a_shape[:-2], b_shape[:-2])
        m, k, n = a_shape[-2], a_shape[-1], b_shape[-1]
        count = numel(batch)
        out = self._new(count * m * n)
        if count * m * n == 0:
            return out
        if k == 0:
            out.const_set(Layout.contiguous((count * m * n,)), 0)
            return out
        la, lb = _bcast(lhs_layout, (*batch, m, k)), _bcast(rhs_layout, (*batch, k, n))
        if dtype not in GEMM_FLOAT:
            self._launch("matmul", f"matmul_int_{dtype}", count * m * n, out._at(), self._at(),
                         la, rhs._at(), lb, count, m, n, k)  # fmt: skip
            return out
        a, b = gemm_ready(self, la), gemm_ready(rhs, lb)
        self._gemm(GemmOperand(out, 0, False, n, m * n), a, b, m, n, k, count)
        return out

    def qmatmul(self, layout, raw: GpuStorage, type_name: str, n: int, k: int):
        """``x (..., k) @ Wᵀ`` with W ``(n, k)`` as GGUF blocks in the u8 storage ``raw``."""
        from .quantized import qmatmul  # imported when first used, like the family it launches

        return qmatmul(self, layout, raw, type_name, n, k)

    # -- fused --------------------------------------------------------------------------
    def softmax(self, layout, dim: int):
        """exp(x - max) / Σ exp(x - max) along ``dim``."""
        return self._softmax(layout, dim, False)

    def log_softmax(self, layout, dim: int):
        """x - max - log Σ exp(x - max) along ``dim``."""
        return self._softmax(layout, dim, True)

    def _softmax(self, layout, dim: int, is_log: bool):
        shape = tuple(layout.shape)
        name = self.K.fused_name("softmax", self.dtype)
        out = self._new(numel(shape))
        if not shape:
            shape, layout = (1,), Layout((1,), (1,), layout.offset)
        src, dst, m, k = plan.line_views(layout, dim)
        self._launch("fused", name, m, out._at(), dst, self._at(), src, m, k, I32(is_log),
                     grid=plan.row_grid(m))  # fmt: skip
        return out

    def layer_norm(self, layout, weight, weight_layout, bias, bias_layout, eps: float):
        """(x - mean) · rstd · w + b over the last dim. Returns (out, mean, rstd)."""
        return self._norm(layout, weight, weight_layout, bias, bias_layout, eps, True)

    def rms_norm(self, layout, weight, weight_layout, eps: float):
        """x · rstd · w over the last dim; rstd = 1/sqrt(mean(x²) + eps). Returns (out, rstd)."""
        out, _, rstd = self._norm(layout, weight, weight_layout, None, None, eps, False)
        return out, rstd

    def _norm(self, layout, weight, weight_layout, bias, bias_layout, eps, center):
        shape = tuple(layout.shape)
        k = shape[-1]
        m = numel(shape[:-1])
        cdt = self.K.compute_dtype(self.dtype)
        out = self._new(numel(shape))
        mean = self._new(m, cdt) if center else None
        rstd = self._new(m, cdt)
        w, lw = self._operand(weight, weight_layout, (k,))
        b, lb = self._operand(bias, bias_layout, (k,))
        grid = plan.row_grid(m)
        self._launch("fused", self.K.fused_name("norm", self.dtype), m, out._at(),
                     mean._at() if center else self._null(), rstd._at(), self._at(), layout,
                     w, lw, b, lb, m, k, float(eps), I32(weight is not None),
                     I32(bias is not None), I32(center), grid=grid)  # fmt: skip
        return out, mean, rstd

    def _operand(self, other, layout, shape):
        """(buffer argument, layout) of an optional operand in this dtype, broadcast to
        ``shape``."""
        if other is None:
            return self._null(), Layout.contiguous(shape)
        if other.dtype != self.dtype:
            other = other.cast(layout, self.dtype)
            layout = Layout.contiguous(tuple(layout.shape))
        return other._at(), _bcast(layout, shape)

    def rope(self, layout, cos, cos_layout, sin, sin_layout, interleaved: bool):
        """Rotate pairs of x (..., T, D) by cos/sin (..., T, D/2) (broadcast)."""
        shape = tuple(layout.shape)
        d = shape[-1]
        rows = numel(shape[:-1])
        half_shape = (*shape[:-1], d // 2)
        c, lc = self._operand(cos, cos_layout, half_shape)
        s, ls = self._operand(sin, sin_layout, half_shape)
        out = self._new(numel(shape))
        self._launch("fused", self.K.fused_name("rope", self.dtype), rows * (d // 2), out._at(),
                     self._at(), layout, c, lc, s, ls, rows, d, I32(interleaved))  # fmt: skip
        return out

    # -- helpers --------------------------------------------------------------------------
    def _same_dtype(self, other: GpuStorage, dtype: str, what: str) -> GpuStorage:
        if other.dtype != dtype:
            raise UnsupportedOnDevice(
                f"op {what} on {self.device_kind} got operands of dtypes {dtype} and {other.dtype}"
            )
        return other


def _is_dense(layout) -> bool:
    shape = tuple(layout.shape)
    return tuple(layout.strides) == contiguous_strides(shape) or numel(shape) <= 1


def _bcast(layout, shape) -> Layout:
    shape = tuple(shape)
    own = Layout.of(layout)
    return own if own.shape == shape else own.broadcast_to(shape)
