"""The backend protocol: what a device's ``Storage`` must provide.

A storage owns one buffer of device memory holding elements of one dtype. Every op takes the
layouts (shape, strides in elements, offset) of its operands, so strided views never need a copy
before reaching the backend. Dtypes cross this boundary as names ("f32", "bf16", ...); layouts
are any object with ``shape``, ``strides``, ``offset`` and ``is_contiguous``.

Ops return a new storage holding a contiguous result. A backend that lacks an op inherits the
default here, which raises ``UnsupportedOnDevice`` naming the op and the device: there is never
a silent fallback to another device.
"""

from __future__ import annotations

from typing import Any

from .errors import UnsupportedOnDevice

UNARY_OPS = (
    "exp", "log", "sin", "cos", "tan", "tanh", "abs", "neg", "recip", "sqr", "sqrt", "rsqrt",
    "gelu", "gelu_erf", "erf", "relu", "silu", "sigmoid", "ceil", "floor", "round", "sign",
    "logical_not", "log1p", "expm1", "asin", "acos", "atan", "sinh", "cosh", "isnan", "isinf",
)  # fmt: skip
BINARY_OPS = ("add", "sub", "mul", "div", "maximum", "minimum", "pow", "floor_div", "remainder",
              "atan2", "logical_and", "logical_or", "logical_xor")  # fmt: skip
CMP_OPS = ("eq", "ne", "lt", "le", "gt", "ge")
REDUCE_OPS = ("sum", "max", "min", "argmax", "argmin", "prod", "any", "all")

# Every method family a storage may implement (the names ops dispatch to).
METHODS = (
    "unary", "binary", "binary_scalar", "cmp", "cmp_scalar", "affine", "powf", "elu", "clamp",
    "where", "reduce", "cumsum", "sort", "cast", "matmul", "conv1d", "conv2d",
    "conv_transpose1d", "conv_transpose2d", "max_pool2d", "avg_pool2d", "max_pool2d_backward",
    "upsample_nearest2d", "upsample_bilinear2d", "pad", "gather", "scatter", "scatter_add",
    "index_select", "index_add", "copy_strided", "const_set", "softmax", "log_softmax",
    "layer_norm", "rms_norm", "rope", "scaled_dot_product_attention", "qmatmul", "nonzero",
    "group_norm",
    "conv2d_backward_weight", "avg_pool2d_backward", "adaptive_avg_pool2d",
    "adaptive_avg_pool2d_backward", "upsample_nearest2d_backward", "upsample_bilinear2d_backward",
    "pad_backward",
)  # fmt: skip


class BackendStorage:
    """Base class of every device's storage. Subclasses set ``device_kind``."""

    device_kind = "abstract"
    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        if name in METHODS:
            raise UnsupportedOnDevice(f"op {name} is not implemented on {self.device_kind}")
        raise AttributeError(name)
