"""Training-mode batch norm on the CPU: x (N, C, S) normalised per channel over N and S.

The native kernel (kernels/cpu/core/batchnorm.c) runs f32, f16 and bf16 in f32, a channel per
unit of work: two reads for the statistics and one read + write for y; the backward one pass
for Σg, Σg (x - μ) and one for dL/dx. f64, and builds without the extension, take numpy.
"""

from __future__ import annotations

import numpy as np

from ._arrays import F32, view
from .fused import _compute_dtype, _operand_args, _same_dtype
from .native import NATIVE

# numpy type characters of f32, f16 and bf16 (ml_dtypes), the dtypes the kernel computes in f32
_NATIVE_BN = "feE" if NATIVE is not None else ""


def _native(x, *others) -> bool:
    a = x.array
    return type(a) is np.ndarray and a.dtype.char in _NATIVE_BN and _same_dtype(x, *others)


def _channel(storage, layout, cdt) -> np.ndarray | None:
    """An optional (C,) operand in the compute type, shaped (C, 1) to broadcast over S."""
    if storage is None:
        return None
    return view(storage.array, layout).astype(cdt, copy=False)[:, None]


class BatchNormOps:
    """The ``batch_norm`` / ``batch_norm_backward`` methods of ``CpuStorage``."""

    __slots__ = ()

    def batch_norm(self, layout, weight, weight_layout, bias, bias_layout, eps: float):
        """(y, mean (C,), rstd (C,)) of x (N, C, S): μ, σ² (biased) over N and S,
        y = (x - μ) / √(σ² + ε) · w + b."""
        wrap = type(self)
        c = layout.shape[1]
        if _native(self, weight, bias) and 0 not in layout.shape:
            out = np.empty(layout.shape, self.array.dtype)
            mean, rstd = np.empty(c, F32), np.empty(c, F32)
            NATIVE.batch_norm(self.array, layout.offset, layout.shape, layout.strides,
                              *_operand_args(weight, weight_layout),
                              *_operand_args(bias, bias_layout), eps, out, mean, rstd)  # fmt: skip
            return wrap(out), wrap(mean), wrap(rstd)
        x = view(self.array, layout)
        cdt = _compute_dtype(x.dtype)
        xc = x.astype(cdt, order="C")
        m = x.shape[0] * x.shape[2]
        mean = xc.sum((0, 2)) / m
        xc -= mean[:, None]
        rstd = 1 / np.sqrt(np.einsum("ncs,ncs->c", xc, xc) / m + cdt.type(eps))
        scale = rstd[:, None]
        w = _channel(weight, weight_layout, cdt)
        xc *= scale if w is None else scale * w
        b = _channel(bias, bias_layout, cdt)
        if b is not None:
            xc += b
        return wrap(xc.astype(x.dtype, order="C", copy=False)), wrap(mean), wrap(rstd)

    def batch_norm_backward(self, layout, grad, grad_layout, weight, weight_layout, mean, rstd,
                            input_grad: bool):  # fmt: skip
        """(dL/dx or None, dL/dw, dL/db) of ``batch_norm``: with x̂ = (x - μ) r,
        dL/dw = Σ g x̂, dL/db = Σ g, dL/dx = w r (g - mean(g) - x̂ mean(g x̂))."""
        wrap = type(self)
        c = layout.shape[1]
        if _native(self, grad, weight) and 0 not in layout.shape:
            gx = np.empty(layout.shape, self.array.dtype) if input_grad else None
            gw, gb = np.empty(c, F32), np.empty(c, F32)
            NATIVE.batch_norm_backward(self.array, layout.offset, layout.shape, layout.strides,
                                       grad.array, grad_layout.offset, grad_layout.strides,
                                       *_operand_args(weight, weight_layout), mean.array,
                                       rstd.array, gx, gw, gb)  # fmt: skip
            return (None if gx is None else wrap(gx)), wrap(gw), wrap(gb)
        x = view(self.array, layout)
        cdt = _compute_dtype(x.dtype)
        g = view(grad.array, grad_layout).astype(cdt, copy=False)
        r = rstd.array
        xhat = (x.astype(cdt, order="C") - mean.array[:, None]) * r[:, None]
        gb = g.sum((0, 2))
        gw = np.einsum("ncs,ncs->c", g, xhat)
        gx = None
        if input_grad:
            m = x.shape[0] * x.shape[2]
            w = _channel(weight, weight_layout, cdt)
            scale = r[:, None] if w is None else r[:, None] * w
            gx = (g - gb[:, None] / m - xhat * (gw[:, None] / m)) * scale
            gx = wrap(gx.astype(x.dtype, order="C", copy=False))
        return gx, wrap(gw), wrap(gb)
