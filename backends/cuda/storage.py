"""``CudaStorage``: one block of device memory from the caching pool, ops as CUDA kernels.

Every op launches a kernel from ``kernels/cuda`` (the prebuilt fatbin, or compiled at first use,
see ``compile.py``) on the device's stream, passing shapes and strides as ``Layout`` structs by
value (``gpu/params.py``), so strided and broadcast views are read in place. Launch plans (grids,
the views that put reduced dims last, the sort network) come from ``gpu/plan.py``. Results are
contiguous. Matmul goes through cuBLAS. Host transfers go through a pinned staging buffer.
"""

from __future__ import annotations

import numpy as np

from ..base import BackendStorage
from ..dtypes import ITEMSIZE, NUMPY_BY_NAME, name_of
from ..errors import UnsupportedOnDevice
from ..gpu import plan
from ..gpu.params import I32, Ptr, Raw, pack_args
from ..layout import Layout, contiguous_strides, numel
from . import kernels as K
from .attention import AttentionOps
from .indexing import IndexingOps
from .nn import NnOps
from .padnorm import PadNormOps
from .runtime import runtime


class CudaStorage(IndexingOps, NnOps, AttentionOps, PadNormOps, BackendStorage):
    """``size`` elements of ``dtype`` (a name) on device ``index``; ``ptr`` is the address."""

    device_kind = "cuda"
    __slots__ = ("block", "ptr", "dtype", "size", "index", "version")

    def __init__(self, block, dtype: str, size: int, index: int):
        self.block = block
        self.ptr = block.ptr if block is not None else 0
        self.dtype = dtype
        self.size = size
        self.index = index
        self.version = 0

    @classmethod
    def alloc(cls, size: int, dtype: str, index: int) -> CudaStorage:
        nbytes = size * ITEMSIZE[dtype]
        block = runtime().pool(index).allocate(nbytes) if nbytes else None
        return cls(block, dtype, size, index)

    def _new(self, size: int, dtype: str | None = None) -> CudaStorage:
        return CudaStorage.alloc(size, dtype or self.dtype, self.index)

    def _at(self, offset: int = 0) -> Ptr:
        return Ptr(self.ptr + offset * ITEMSIZE[self.dtype])

    def _launch(self, source: str, name: str, n: int, *args, grid=None, block=None,
                shared: int = 0) -> None:  # fmt: skip
        """Launch ``name`` from ``kernels/cuda/<source>.cu`` over ``n`` items (grid-stride)."""
        if n == 0:
            return
        rt = runtime()
        function = rt.function(self.index, source, name)
        rt.driver.launch(
            self.index,
            function,
            grid or (plan.blocks(n), 1, 1),
            block or (plan.THREADS, 1, 1),
            pack_args(*args),
            shared,
            rt.stream(self.index),
        )

    # -- allocation and host transfers -------------------------------------------------
    @classmethod
    def from_numpy(cls, array: np.ndarray, index: int = 0, copy: bool = False) -> CudaStorage:
        """A device copy of ``array`` (always a copy: host memory cannot be adopted)."""
        name = _dtype_name(array.dtype)
        array = np.ascontiguousarray(array)
        out = cls.alloc(array.size, name, index)
        if array.size:
            runtime().upload(index, out.ptr, array.reshape(-1).view(np.uint8))
        return out

    @classmethod
    def full(cls, shape, value, dtype: str, index: int = 0) -> CudaStorage:
        out = cls.alloc(numel(shape), dtype, index)
        out.const_set(Layout.contiguous(shape), value)
        return out

    @classmethod
    def empty(cls, shape, dtype: str, index: int = 0) -> CudaStorage:
        return cls.alloc(numel(shape), dtype, index)

    def to_numpy(self, layout) -> np.ndarray:
        """A host copy of the elements ``layout`` describes (waits for queued work)."""
        shape = tuple(layout.shape)
        host = np.empty(shape, NUMPY_BY_NAME[self.dtype])
        if host.size == 0:
            return host
        src = self if _is_dense(layout) else self.contiguous(layout)
        offset = layout.offset if src is self else 0
        runtime().download(self.index, host.reshape(-1).view(np.uint8), src._at(offset))
        return host

    @property
    def nbytes(self) -> int:
        return self.size * ITEMSIZE[self.dtype]

    def data_ptr(self) -> int:
        return self.ptr

    # -- elementwise ---------------------------------------------------------------------
    def unary(self, op: str, layout):
        out_dtype = "bool" if op in K.BOOL_UNARY else self.dtype
        name = K.unary_name(op, self.dtype)
        n = numel(layout.shape)
        out = self._new(n, out_dtype)
        self._launch("elementwise", name, n, out._at(), self._at(), n, layout)
        return out

    def binary(self, op: str, lhs_layout, rhs, rhs_layout):
        shape = np.broadcast_shapes(tuple(lhs_layout.shape), tuple(rhs_layout.shape))
        rhs = _same_dtype(rhs, rhs_layout, self.dtype, "binary " + op)
        name = K.binary_name(op, self.dtype)
        n = numel(shape)
        out = self._new(n, "bool" if op in K.LOGICAL else self.dtype)
        la, lb = _bcast(lhs_layout, shape), _bcast(rhs_layout, shape)
        self._launch("elementwise", name, n, out._at(), self._at(), rhs._at(), n, la, lb)
        return out

    def binary_scalar(self, op: str, layout, scalar, reverse: bool = False):
        name = K.scalar_name(op, self.dtype)
        n = numel(layout.shape)
        out = self._new(n, "bool" if op in K.LOGICAL else self.dtype)
        args = (out._at(), self._at(), n, layout, float(scalar), I32(bool(reverse)))
        self._launch("elementwise", name, n, *args)
        return out

    def cmp(self, op: str, lhs_layout, rhs, rhs_layout):
        shape = np.broadcast_shapes(tuple(lhs_layout.shape), tuple(rhs_layout.shape))
        rhs = _same_dtype(rhs, rhs_layout, self.dtype, "cmp " + op)
        n = numel(shape)
        out = self._new(n, "bool")
        la, lb = _bcast(lhs_layout, shape), _bcast(rhs_layout, shape)
        name = K.cmp_name(op, self.dtype)
        self._launch("elementwise", name, n, out._at(), self._at(), rhs._at(), n, la, lb)
        return out

    def cmp_scalar(self, op: str, layout, scalar):
        n = numel(layout.shape)
        out = self._new(n, "bool")
        name = K.cmp_scalar_name(op, self.dtype)
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
        name = K.param_name(family, self.dtype)
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
        on_false = _same_dtype(on_false, false_layout, dtype, "where")
        n = numel(shape)
        out = on_true._new(n)
        lc = _bcast(cond_layout, shape)
        la, lb = _bcast(true_layout, shape), _bcast(false_layout, shape)
        args = (out._at(), cond._at(), on_true._at(), on_false._at(), n, lc, la, lb)
        self._launch("elementwise", K.where_name(dtype), n, *args)
        return out

    # -- copies and casts -----------------------------------------------------------------
    def cast(self, layout, dtype: str):
        n = numel(layout.shape)
        if dtype == self.dtype:
            return self.contiguous(layout)
        out = self._new(n, dtype)
        self._launch("elementwise", K.cast_name(self.dtype, dtype), n, out._at(), self._at(), n,
                     layout)  # fmt: skip
        return out

    def copy_strided(self, src_layout, dst: CudaStorage, dst_layout) -> None:
        """``dst[dst_layout] = self[src_layout]`` (src broadcast to dst's shape)."""
        shape = tuple(dst_layout.shape)
        src = self
        if dst.dtype != self.dtype:
            src = self.cast(src_layout, dst.dtype)
            src_layout = Layout.contiguous(tuple(src_layout.shape))
        n = numel(shape)
        name = K.copy_name(ITEMSIZE[dst.dtype])
        src._launch("elementwise", name, n, dst._at(), dst_layout, src._at(),
                    _bcast(src_layout, shape), n)  # fmt: skip

    def const_set(self, layout, value) -> None:
        n = numel(layout.shape)
        size = ITEMSIZE[self.dtype]
        raw = np.array(value).astype(NUMPY_BY_NAME[self.dtype]).tobytes()
        self._launch("elementwise", K.fill_name(size), n, self._at(), layout, n, Raw(raw, size))

    def contiguous(self, layout) -> CudaStorage:
        shape = tuple(layout.shape)
        n = numel(shape)
        out = self._new(n)
        self.copy_strided(layout, out, Layout.contiguous(shape))
        return out

    # -- reductions -----------------------------------------------------------------------
    def reduce(self, op: str, layout, dims: tuple[int, ...], keepdim: bool, dtype: str):
        """Reduce over ``dims`` (kept dims first, reduced dims last: one block per output)."""
        view, m, k = plan.reduce_view(layout, dims)
        natural = K.reduce_out_dtype(op, self.dtype)
        out = self._new(m, natural)
        if m:
            self._launch("reduce", K.reduce_name(op, self.dtype), m, out._at(), self._at(), m, k,
                         view, grid=plan.row_grid(m))  # fmt: skip
        if natural != dtype:
            out = out.cast(Layout.contiguous((m,)), dtype)
        return out

    def cumsum(self, layout, dim: int, dtype: str):
        shape = tuple(layout.shape)
        if not shape:
            return self.cast(layout, dtype)
        src, dst, m, k = plan.line_views(layout, dim)
        natural = K.reduce_out_dtype("sum", self.dtype)
        out = self._new(numel(shape), natural)
        self._launch("reduce", K.cumsum_name(self.dtype), m, out._at(), dst, self._at(), src, m, k)
        if natural != dtype:
            out = out.cast(Layout.contiguous(shape), dtype)
        return out

    def sort(self, layout, dim: int, descending: bool):
        """Stable sort along ``dim``: (values, int64 indices); NaN sorts as the largest value.
        A bitonic network over (value, index) keys: in shared memory, one block per line, for
        lines up to ``SORT_MAX``; in global memory beyond."""
        shape = tuple(layout.shape)
        if not shape:
            return self.contiguous(layout), CudaStorage.full((), 0, "i64", self.index)
        src, dst, m, k = plan.line_views(layout, dim)
        p = plan.next_pow2(k)
        values, indices = self._new(numel(shape)), self._new(numel(shape), "i64")
        if k > plan.SORT_MAX:
            self._sort_long(values, indices, dst, src, m, k, p, descending)
            return values, indices
        shared = plan.sort_shared_bytes(p, ITEMSIZE[self.dtype])
        self._launch("reduce", K.sort_name(self.dtype), m, values._at(), indices._at(), dst,
                     self._at(), src, m, k, p, I32(descending),
                     grid=plan.row_grid(m), shared=shared)  # fmt: skip
        return values, indices

    def _sort_long(self, values, indices, dst, src, m: int, k: int, p: int, descending: bool):
        """Lines longer than ``SORT_MAX``: the bitonic network over an (m, p) index scratch in
        global memory, one launch per step (log2(p)·(log2(p)+1)/2 launches)."""
        scratch = self._new(m * p, "i64")
        self._launch("reduce", "sort_long_init", m * p, scratch._at(), m, k, p)
        K.sort_name(self.dtype)  # raises for a dtype without sort kernels
        step = f"sort_long_step_{self.dtype}"
        for size, stride in plan.bitonic_steps(p):
            self._launch("reduce", step, m * p, scratch._at(), self._at(), src, m, k, p, size,
                         stride, I32(descending))  # fmt: skip
        gather = f"sort_long_gather_{self.dtype}"
        self._launch("reduce", gather, m * k, values._at(), indices._at(), dst, self._at(), src,
                     scratch._at(), m, k, p)  # fmt: skip

    # -- matmul ---------------------------------------------------------------------------
    def matmul(self, lhs_layout, rhs, rhs_layout):
        """``(..., m, k) @ (..., k, n)`` through cuBLAS (integers: ``kernels/gpu/matmul.h``);
        batch dims already broadcast."""
        dtype = self.dtype
        if dtype not in ("f16", "bf16", "f32", "f64", "u8", "u32", "i16", "i32", "i64"):
            raise UnsupportedOnDevice(f"op matmul is not implemented on cuda for {dtype}")
        rhs = _same_dtype(rhs, rhs_layout, dtype, "matmul")
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
        if dtype not in ("f16", "bf16", "f32", "f64"):
            self._launch("matmul", f"matmul_int_{dtype}", count * m * n, out._at(), self._at(),
                         _bcast(lhs_layout, (*batch, m, k)), rhs._at(),
                         _bcast(rhs_layout, (*batch, k, n)), count, m, n, k)  # fmt: skip
            return out
        a, la = _gemm_ready(self, _bcast(lhs_layout, (*batch, m, k)))
        b, lb = _gemm_ready(rhs, _bcast(rhs_layout, (*batch, k, n)))
        from .cublas import batch_stride, gemm_operand

        ta, lda = gemm_operand(la.shape, la.strides)
        tb, ldb = gemm_operand(lb.shape, lb.strides)
        # row-major C = A B  <=>  column-major Cᵀ (n x m) = Bᵀ (n x k) Aᵀ (k x m)
        runtime().gemm(self.index, dtype, tb, ta, n, m, k,
                       b._at(lb.offset), ldb, batch_stride(lb.shape, lb.strides),
                       a._at(la.offset), lda, batch_stride(la.shape, la.strides),
                       out._at(), n, m * n, count)  # fmt: skip
        return out

    def qmatmul(self, layout, raw: CudaStorage, type_name: str, n: int, k: int):
        """``x (..., k) @ Wᵀ`` with W ``(n, k)`` as GGUF blocks in the u8 storage ``raw``."""
        from .quantized import qmatmul

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
        name = K.fused_name("softmax", self.dtype)
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
        cdt = K.compute_dtype(self.dtype)
        out = self._new(numel(shape))
        mean = self._new(m, cdt) if center else None
        rstd = self._new(m, cdt)
        w, lw = self._operand(weight, weight_layout, (k,))
        b, lb = self._operand(bias, bias_layout, (k,))
        grid = plan.row_grid(m)
        self._launch("fused", K.fused_name("norm", self.dtype), m, out._at(),
                     mean._at() if center else Ptr(0), rstd._at(), self._at(), layout,
                     w, lw, b, lb, m, k, float(eps), I32(weight is not None),
                     I32(bias is not None), I32(center), grid=grid)  # fmt: skip
        return out, mean, rstd

    def _operand(self, other, layout, shape):
        """(pointer, layout) of an optional operand in this dtype, broadcast to ``shape``."""
        if other is None:
            return Ptr(0), Layout.contiguous(shape)
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
        self._launch("fused", K.fused_name("rope", self.dtype), rows * (d // 2), out._at(),
                     self._at(), layout, c, lc, s, ls, rows, d, I32(interleaved))  # fmt: skip
        return out


def _dtype_name(dtype: np.dtype) -> str:
    name = name_of(dtype)
    if name is None:
        raise UnsupportedOnDevice(f"dtype {dtype} cannot be stored on cuda")
    return name


def _is_dense(layout) -> bool:
    shape = tuple(layout.shape)
    return tuple(layout.strides) == contiguous_strides(shape) or numel(shape) <= 1


def _bcast(layout, shape) -> Layout:
    shape = tuple(shape)
    own = Layout.of(layout)
    return own if own.shape == shape else own.broadcast_to(shape)


def _same_dtype(other: CudaStorage, layout, dtype: str, what: str) -> CudaStorage:
    if other.dtype != dtype:
        raise UnsupportedOnDevice(
            f"op {what} on cuda got operands of dtypes {dtype} and {other.dtype}"
        )
    return other


def _gemm_ready(storage: CudaStorage, layout: Layout) -> tuple[CudaStorage, Layout]:
    """``(storage, layout)`` cuBLAS can read as a strided batch, copying only when needed."""
    from .cublas import batch_stride, gemm_operand

    if gemm_operand(layout.shape, layout.strides) is not None and (
        batch_stride(layout.shape, layout.strides) is not None
    ):
        return storage, layout
    return storage.contiguous(layout), Layout.contiguous(layout.shape)
