"""Convolution (im2col + the device GEMM), pooling and upsampling on the GPU backends (NCHW,
the device's float dtypes)."""

from __future__ import annotations

from ..conv_params import ConvParams
from ..errors import UnsupportedOnDevice
from ..layout import Layout, numel
from .gemm import gemm_2d
from .params import F32, I32, Dims, geometry


class NnOps:
    __slots__ = ()

    def _float_only(self, op: str) -> None:
        if self.dtype not in self.K.FLOAT:
            raise UnsupportedOnDevice(
                f"op {op} is not implemented on {self.device_kind} for {self.dtype}"
            )

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
        (sh, sw), ((pt, _), (pl, _)), (dh, dw) = stride, padding, dilation
        ho, wo = ConvParams(stride, padding, dilation).out_size((h, w), (kh, kw))
        out = self._new(n * o * ho * wo)
        if out.size == 0:
            return out
        wmat = weight.cast(w_layout, self.dtype)  # (O, C/g·kh·kw), contiguous in x's dtype
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
                gemm_2d(wmat, a, col, b, out, img * o * cols + g * og * cols)
        return out._add_channel_bias(bias, b_layout, (n, o, ho, wo))

    def _add_channel_bias(self, bias, b_layout, shape: tuple[int, int, int, int]):
        """``self`` (N, O, H, W) plus a per-channel bias (O,) broadcast over N, H, W."""
        if bias is None:
            return self
        if bias.dtype != self.dtype:
            bias = bias.cast(b_layout, self.dtype)
            b_layout = Layout.contiguous((shape[1],))
        b4 = Layout(shape, (0, b_layout.strides[0], 0, 0), b_layout.offset)
        return self.binary("add", Layout.contiguous(shape), bias, b4)

    def conv_transpose2d(self, layout, weight, w_layout, bias, b_layout, stride, padding,
                         dilation, groups: int, output_size):  # fmt: skip
        """x (N, C, H, W), weight (C, O/groups, kh, kw) -> (N, O, *output_size).

        The adjoint of conv2d: per image and group col_g = W_gᵀ (O/g·kh·kw, C/g) @ x_g
        (C/g, H·W), then col2im scatters the columns into the output cropped at
        ``padding`` = (top, left).
        """
        self._float_only("conv_transpose2d")
        n, c, h, w = layout.shape
        _, og, kh, kw = w_layout.shape
        (sh, sw), (pt, pl), (dh, dw) = stride, padding, dilation
        ho, wo = output_size
        o = og * groups
        out = self._new(n * o * ho * wo)
        if out.size == 0:
            return out
        wmat = weight.cast(w_layout, self.dtype)  # (C, O/g·kh·kw), contiguous in x's dtype
        x = self.contiguous(layout)  # (N, C, H·W)
        cg, kg, hw = c // groups, og * kh * kw, h * w
        col = self._new(o * kh * kw * hw)
        geom = geometry(o, ho, wo, kh, kw, sh, sw, pt, pl, dh, dw, h, w)
        for img in range(n):
            for g in range(groups):
                a = Layout((kg, cg), (1, kg), g * cg * kg)  # W_gᵀ, a transposed view
                b = Layout((cg, hw), (hw, 1), img * c * hw + g * cg * hw)
                gemm_2d(wmat, a, x, b, col, g * kg * hw)
            self._launch("conv", f"col2im_{self.dtype}", o * ho * wo,
                         out._at(img * o * ho * wo), col._at(), geom)  # fmt: skip
        return out._add_channel_bias(bias, b_layout, (n, o, ho, wo))

    def conv2d_backward_weight(self, layout, grad, grad_layout, kernel_size, stride, padding,
                               dilation, groups: int):  # fmt: skip
        """dL/dW of conv2d: x (N, C, H, W) is ``self``, grad (N, O, Ho, Wo) ->
        (O, C/groups, kh, kw) = Σ_n grad_n,g (O/g, Ho·Wo) @ im2col(x_n)_gᵀ."""
        self._float_only("conv2d_backward_weight")
        n, c, h, w = layout.shape
        _, o, ho, wo = grad_layout.shape
        kh, kw = kernel_size
        (sh, sw), ((pt, _), (pl, _)), (dh, dw) = stride, padding, dilation
        cg, og = c // groups, o // groups
        kg, cols = cg * kh * kw, ho * wo
        out = self._new(o * kg)
        if grad.dtype != self.dtype:
            grad = grad.cast(grad_layout, self.dtype)
            grad_layout = Layout.contiguous(tuple(grad_layout.shape))
        g = grad.contiguous(grad_layout)
        if n == 0 or cols == 0:
            out.const_set(Layout.contiguous((o * kg,)), 0)
            return out
        col = self._new(c * kh * kw * cols)
        geom = geometry(c, h, w, kh, kw, sh, sw, pt, pl, dh, dw, ho, wo)
        for img in range(n):
            self._launch("conv", f"im2col_{self.dtype}", c * kh * kw * cols, col._at(),
                         self._at(), Dims(layout), img, geom)  # fmt: skip
            for grp in range(groups):
                a = Layout((og, cols), (cols, 1), img * o * cols + grp * og * cols)
                b = Layout((cols, kg), (1, cols), grp * kg * cols)  # col_gᵀ, a transposed view
                gemm_2d(g, a, col, b, out, grp * og * kg,
                           beta=0.0 if img == 0 else 1.0)  # fmt: skip
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
        acc = self._gradient_sum(n * c * h * w)
        total = n * c * ho * wo
        self._launch("pool", f"max_pool2d_backward_{self.dtype}", total, acc._at(), g._at(),
                     idx._at(), total, ho * wo, h * w)  # fmt: skip
        return self._rounded(acc)

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

    def avg_pool2d_backward(self, layout, input_size, kernel_size, stride, padding,
                            count_include_pad: bool, divisor_override=None):  # fmt: skip
        """Spread each output gradient evenly over its window: -> (N, C, H, W)."""
        n, c, ho, wo = layout.shape
        h, w = input_size
        geom = geometry(n, c, h, w, *kernel_size, *stride, *padding, 1, 1, ho, wo)
        return self._scatter_back("avg_pool2d_backward", layout, (n, c, h, w), geom,
                                  I32(count_include_pad), int(divisor_override or 0))  # fmt: skip

    def adaptive_avg_pool2d_backward(self, layout, input_size):
        n, c, ho, wo = layout.shape
        h, w = input_size
        geom = geometry(n, c, h, w, 0, 0, 0, 0, 0, 0, 0, 0, ho, wo)
        return self._scatter_back("adaptive_avg_pool2d_backward", layout, (n, c, h, w), geom)

    def _scatter_back(self, op: str, layout, in_shape, *params):
        """A backward kernel that atomically adds the (contiguous) output gradient into an f32
        (f64 for f64) input gradient, then rounds it to this dtype."""
        self._float_only(op)
        g = self.contiguous(layout)
        acc = self._gradient_sum(numel(in_shape))
        source = "pool" if "pool" in op else "upsample"
        self._launch(source, f"{op}_{self.dtype}", numel(layout.shape), acc._at(), g._at(),
                     *params)  # fmt: skip
        return self._rounded(acc)

    def _gradient_sum(self, size: int):
        """A zeroed buffer the backward kernels add into atomically: f64 for f64, else f32."""
        acc = self._new(size, "f64" if self.dtype == "f64" else "f32")
        acc.const_set(Layout.contiguous((size,)), 0)
        return acc

    def _rounded(self, acc):
        """``acc`` in this storage's dtype."""
        if acc.dtype == self.dtype:
            return acc
        return acc.cast(Layout.contiguous((acc.size,)), self.dtype)

    # -- upsampling -----------------------------------------------------------------------
    def upsample_nearest2d(self, layout, output_size, scales):
        """out[.., i, j] = x[.., src(i), src(j)], src(i) = min(⌊i·scale⌋, H-1)."""
        self._float_only("upsample_nearest2d")
        n, c, h, w = layout.shape
        ho, wo = output_size
        sh, sw = _nearest_scale(h, ho, scales[0]), _nearest_scale(w, wo, scales[1])
        total = n * c * ho * wo
        out = self._new(total)
        self._launch("upsample", f"upsample_nearest2d_{self.dtype}", total, out._at(),
                     self._at(), Dims(layout), geometry(n, c, h, w, ho, wo), F32(sh),
                     F32(sw))  # fmt: skip
        return out

    def upsample_nearest2d_backward(self, layout, input_size, scales):
        n, c, ho, wo = layout.shape
        h, w = input_size
        sh, sw = _nearest_scale(h, ho, scales[0]), _nearest_scale(w, wo, scales[1])
        return self._scatter_back("upsample_nearest2d_backward", layout, (n, c, h, w),
                                  geometry(n, c, h, w, ho, wo), F32(sh), F32(sw))  # fmt: skip

    def upsample_bilinear2d_backward(self, layout, input_size, align_corners: bool, scales):
        n, c, ho, wo = layout.shape
        h, w = input_size
        (sh, ah), (sw, aw) = _bilinear_params((h, w), (ho, wo), align_corners, scales)
        return self._scatter_back("upsample_bilinear2d_backward", layout, (n, c, h, w),
                                  geometry(n, c, h, w, ho, wo), float(sh), float(sw), I32(ah),
                                  I32(aw))  # fmt: skip

    def upsample_bilinear2d(self, layout, output_size, align_corners: bool, scales):
        """Bilinear interpolation with PyTorch's source index (see ``kernels/gpu/upsample.h``)."""
        self._float_only("upsample_bilinear2d")
        n, c, h, w = layout.shape
        ho, wo = output_size
        params = _bilinear_params((h, w), (ho, wo), align_corners, scales)
        total = n * c * ho * wo
        out = self._new(total)
        self._launch("upsample", f"upsample_bilinear2d_{self.dtype}", total, out._at(),
                     self._at(), Dims(layout), geometry(n, c, h, w, ho, wo), float(params[0][0]),
                     float(params[1][0]), I32(params[0][1]), I32(params[1][1]))  # fmt: skip
        return out


def _nearest_scale(size: int, new: int, scale) -> float:
    """Source step of nearest upsampling: an unchanged axis is an exact copy and a doubled one
    takes ``i // 2`` (as PyTorch's kernels and the CPU backend), else 1/scale_factor or
    size/new in f32."""
    if new == size:
        return 1.0
    if new == 2 * size:
        return 0.5
    return 1.0 / scale if scale else size / new


def _bilinear_params(sizes, new_sizes, align_corners: bool, scales):
    """Per axis (scale, align flag) for ``kernels/gpu/upsample.h``; an unchanged axis is an
    exact copy."""
    params = []
    for size, new, scale in zip(sizes, new_sizes, scales, strict=True):
        if new == size:
            params.append((1.0, 1))
        elif align_corners:
            params.append(((size - 1) / (new - 1) if new > 1 else 0.0, 1))
        else:
            params.append((1.0 / scale if scale else size / new, 0))
    return params
