"""Convolution (im2col + cuBLAS), pooling and upsampling on CUDA (NCHW, f16/bf16/f32/f64)."""

from __future__ import annotations

from ..errors import UnsupportedOnDevice
from . import kernels as K
from .params import F32, I32, Dims, Layout, geometry


class NnOps:
    __slots__ = ()

    def _float_only(self, op: str) -> None:
        if self.dtype not in K.FLOAT:
            raise UnsupportedOnDevice(f"op {op} is not implemented on cuda for {self.dtype}")

    # -- convolution ------------------------------------------------------------------------
    def conv2d(self, layout, weight, w_layout, bias, b_layout, stride, padding, dilation,
               groups: int):  # fmt: skip
        """x (N, C, H, W) ⋆ weight (O, C/groups, kh, kw) (+ bias (O,)) -> (N, O, Ho, Wo).

        ``padding`` is ((top, bottom), (left, right)); a negative bottom/right pad crops.
        Per image: col = im2col(x) (C·kh·kw, Ho·Wo), out_g = W_g (O/g, C/g·kh·kw) @ col_g.
        """
        self._float_only("conv2d")
        n, c, h, w = layout.shape
        o, cg, kh, kw = w_layout.shape
        (sh, sw), ((pt, pb), (pl, pr)), (dh, dw) = stride, padding, dilation
        ho = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
        wo = (w + pl + pr - dw * (kw - 1) - 1) // sw + 1
        out = self._new(n * o * ho * wo)
        if out.size == 0:
            return out
        if weight.dtype != self.dtype:
            weight = weight.cast(w_layout, self.dtype)
            w_layout = Layout.contiguous(tuple(w_layout.shape))
        wmat = weight.contiguous(w_layout)  # (O, C/g·kh·kw) row-major
        rows, cols = c * kh * kw, ho * wo
        col = self._new(rows * cols)
        geom = geometry(c, h, w, kh, kw, sh, sw, pt, pl, dh, dw, ho, wo)
        og, kg = o // groups, cg * kh * kw
        for img in range(n):
            self._launch("conv", f"im2col_{self.dtype}", rows * cols, col._at(), self._at(),
                         Dims(layout), img, geom)  # fmt: skip
            for g in range(groups):
                a = Layout((og, kg), (kg, 1), g * og * kg)
                b = Layout((kg, cols), (cols, 1), g * kg * cols)
                dst = out._at(img * o * cols + g * og * cols)
                _gemm_into(wmat, a, col, b, dst, self)
        if bias is not None:
            if bias.dtype != self.dtype:
                bias = bias.cast(b_layout, self.dtype)
                b_layout = Layout.contiguous((o,))
            b4 = Layout((n, o, ho, wo), (0, b_layout.strides[0], 0, 0), b_layout.offset)
            return out.binary("add", Layout.contiguous((n, o, ho, wo)), bias, b4)
        return out

    # -- pooling --------------------------------------------------------------------------
    def max_pool2d(self, layout, kernel_size, stride, padding, dilation, output_size):
        """x (N, C, H, W) -> (values (N, C, Ho, Wo), int64 indices into H·W)."""
        self._float_only("max_pool2d")
        n, c, h, w = layout.shape
        ho, wo = output_size
        total = n * c * ho * wo
        out, idx = self._new(total), self._new(total, "i64")
        geom = geometry(n, c, h, w, *kernel_size, *stride, *padding, *dilation, ho, wo)
        self._launch("pool", f"max_pool2d_{self.dtype}", total, out._at(), idx._at(),
                     self._at(), Dims(layout), geom)  # fmt: skip
        return out, idx

    def max_pool2d_backward(self, layout, indices, indices_layout, input_size):
        """Route each output gradient (N, C, Ho, Wo) to its argmax: -> (N, C, H, W)."""
        self._float_only("max_pool2d_backward")
        n, c, ho, wo = layout.shape
        h, w = input_size
        g = self.contiguous(layout)
        idx = indices.contiguous(indices_layout)
        acc = self._new(n * c * h * w, "f32")
        acc.const_set(Layout.contiguous((n * c * h * w,)), 0)
        total = n * c * ho * wo
        self._launch("pool", f"max_pool2d_backward_{self.dtype}", total, acc._at(), g._at(),
                     idx._at(), total, ho * wo, h * w)  # fmt: skip
        return acc.cast(Layout.contiguous((n * c * h * w,)), self.dtype)

    def avg_pool2d(self, layout, kernel_size, stride, padding, output_size,
                   count_include_pad: bool, divisor_override=None):  # fmt: skip
        """Mean over each window: x (N, C, H, W) -> (N, C, Ho, Wo) (PyTorch's divisor)."""
        self._float_only("avg_pool2d")
        n, c, h, w = layout.shape
        ho, wo = output_size
        total = n * c * ho * wo
        out = self._new(total)
        geom = geometry(n, c, h, w, *kernel_size, *stride, *padding, 1, 1, ho, wo)
        self._launch("pool", f"avg_pool2d_{self.dtype}", total, out._at(), self._at(),
                     Dims(layout), geom, I32(count_include_pad),
                     int(divisor_override or 0))  # fmt: skip
        return out

    def adaptive_avg_pool2d(self, layout, output_size):
        self._float_only("adaptive_avg_pool2d")
        n, c, h, w = layout.shape
        ho, wo = output_size
        total = n * c * ho * wo
        out = self._new(total)
        geom = geometry(n, c, h, w, 0, 0, 0, 0, 0, 0, 0, 0, ho, wo)
        self._launch("pool", f"adaptive_avg_pool2d_{self.dtype}", total, out._at(), self._at(),
                     Dims(layout), geom)  # fmt: skip
        return out

    # -- upsampling -----------------------------------------------------------------------
    def upsample_nearest2d(self, layout, output_size, scales):
        """out[.., i, j] = x[.., src(i), src(j)], src(i) = min(⌊i·scale⌋, H-1)."""
        self._float_only("upsample_nearest2d")
        n, c, h, w = layout.shape
        ho, wo = output_size
        sh = 1.0 / scales[0] if scales[0] else h / ho
        sw = 1.0 / scales[1] if scales[1] else w / wo
        total = n * c * ho * wo
        out = self._new(total)
        self._launch("upsample", f"upsample_nearest2d_{self.dtype}", total, out._at(),
                     self._at(), Dims(layout), geometry(n, c, h, w, ho, wo), F32(sh),
                     F32(sw))  # fmt: skip
        return out

    def upsample_bilinear2d(self, layout, output_size, align_corners: bool, scales):
        """Bilinear interpolation with PyTorch's source index (see ``upsample.cu``)."""
        self._float_only("upsample_bilinear2d")
        n, c, h, w = layout.shape
        ho, wo = output_size
        params = []
        for size, new, scale in ((h, ho, scales[0]), (w, wo, scales[1])):
            if new == size:
                params.append((1.0, 1))
            elif align_corners:
                params.append(((size - 1) / (new - 1) if new > 1 else 0.0, 1))
            else:
                params.append((1.0 / scale if scale else size / new, 0))
        total = n * c * ho * wo
        out = self._new(total)
        self._launch("upsample", f"upsample_bilinear2d_{self.dtype}", total, out._at(),
                     self._at(), Dims(layout), geometry(n, c, h, w, ho, wo), F32(params[0][0]),
                     F32(params[1][0]), I32(params[0][1]), I32(params[1][1]))  # fmt: skip
        return out


def _gemm_into(a_storage, a: Layout, b_storage, b: Layout, dst, like) -> None:
    """Row-major (m, k) @ (k, n) into the contiguous (m, n) at address ``dst`` (cuBLAS)."""
    from .runtime import runtime

    m, k = a.shape
    n = b.shape[1]
    # column-major Cᵀ (n x m) = Bᵀ (n x k) Aᵀ (k x m): B first, no transposes
    runtime().gemm(like.index, like.dtype, False, False, n, m, k,
                   b_storage._at(b.offset), b.strides[0], 0,
                   a_storage._at(a.offset), a.strides[0], 0, dst, n, 0, 1)  # fmt: skip
