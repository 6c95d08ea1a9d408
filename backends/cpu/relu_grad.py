"""relu's input gradient on the CPU in one native pass (kernels/cpu/core/relu_backward.c)."""

from __future__ import annotations

import numpy as np

from .native import NATIVE

# None on the numpy path, or in an extension built before the kernel existed
_KERNEL = getattr(NATIVE, "relu_backward", None)
# numpy type characters of f32, f64, f16 and bf16: the dtypes the kernel takes
_NATIVE_RELU = "fdeE" if _KERNEL is not None else ""


class ReluGradOps:
    """The ``relu_backward`` method of ``CpuStorage``."""

    __slots__ = ()

    def relu_backward(self, layout, grad, grad_layout):
        """dL/dx = 0 where x <= 0, else g (as torch's threshold_backward: NaN in x passes g),
        from x (``self``) and g (``grad``, x's shape, any strides) into a contiguous array;
        None where the kernel does not take the operands (no extension, integer or mixed
        dtypes): the op layer then composes it from ops."""
        x, g = self.array, grad.array
        if not (type(x) is np.ndarray and type(g) is np.ndarray and x.dtype.char in _NATIVE_RELU
                and g.dtype is x.dtype):  # fmt: skip
            return None
        out = np.empty(layout.shape, x.dtype)
        _KERNEL(x, layout.offset, layout.strides, g, grad_layout.offset, grad_layout.strides,
                out, layout.shape)  # fmt: skip
        return type(self)(out)
