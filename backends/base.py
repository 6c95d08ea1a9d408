"""The backend protocol: what a device's ``Storage`` must provide, with full signatures.

A storage owns one buffer of device memory holding elements of one dtype. Every op takes the
layouts (shape, strides in elements, offset) of its operands, so strided views never need a copy
before reaching the backend. Dtypes cross this boundary as names ("f32", "bf16", ...); layouts
are any object with ``shape``, ``strides``, ``offset`` and ``is_contiguous`` (``LayoutLike``).
Ops return a new storage holding a contiguous result.

Two tiers:

- ``CoreStorage``: every device provides all of it (allocation, host transfers, copies, the
  elementwise / reduction / matmul / conv / pool / indexing families).
- ``FusedStorage``: fused and quantized kernels a device may lack. The op layer asks
  ``supports(storage, op)`` or calls ``require(storage, op)``; a missing one raises
  ``UnsupportedOnDevice`` naming the op and the device. There is never a silent fallback to
  another device.

``tests/test_backend_protocol.py`` checks every backend's methods against these signatures
(parameter names, kinds and defaults).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from .errors import UnsupportedOnDevice

Pair = tuple[int, int]
Pads2d = tuple[Pair, Pair]  # ((top, bottom), (left, right)); negative bottom/right crops
Scales = tuple[float | None, float | None]  # the scale_factor given per axis, if any


class LayoutLike(Protocol):
    """``element(i0, i1, ...) = storage[offset + Σ i_k · strides[k]]`` (strides in elements)."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int
    is_contiguous: bool


@runtime_checkable
class CoreStorage(Protocol):
    """The methods every device's storage implements."""

    device_kind: str
    version: int  # in-place writes so far (autograd refuses stale saved values)

    # -- allocation and host transfers -------------------------------------------------
    @classmethod
    def from_numpy(cls, array: np.ndarray, index: int = 0, copy: bool = False) -> CoreStorage:
        """A storage holding ``array`` (adopted without a copy where the device can)."""

    @classmethod
    def full(cls, shape: tuple[int, ...], value, dtype: str, index: int = 0) -> CoreStorage: ...

    @classmethod
    def empty(cls, shape: tuple[int, ...], dtype: str, index: int = 0) -> CoreStorage: ...

    def to_numpy(self, layout: LayoutLike) -> np.ndarray:
        """The elements ``layout`` describes on the host (a view on the CPU, a copy elsewhere)."""

    @property
    def nbytes(self) -> int: ...

    def data_ptr(self) -> int: ...

    # -- copies and casts ------------------------------------------------------------------
    def cast(self, layout: LayoutLike, dtype: str) -> CoreStorage: ...

    def copy_strided(
        self, src_layout: LayoutLike, dst: CoreStorage, dst_layout: LayoutLike
    ) -> None:
        """``dst[dst_layout] = self[src_layout]`` (src broadcast to dst's shape)."""

    def const_set(self, layout: LayoutLike, value) -> None: ...

    def contiguous(self, layout: LayoutLike) -> CoreStorage: ...

    # -- elementwise (op names: ``backends/optable.py``) ---------------------------------
    def unary(self, op: str, layout: LayoutLike) -> CoreStorage: ...

    def binary(
        self, op: str, lhs_layout: LayoutLike, rhs: CoreStorage, rhs_layout: LayoutLike
    ) -> CoreStorage:
        """``lhs op rhs``; both layouts already broadcast to one shape."""

    def binary_scalar(
        self, op: str, layout: LayoutLike, scalar: float, reverse: bool = False
    ) -> CoreStorage:
        """``x op scalar`` (``scalar op x`` when ``reverse``), in x's dtype."""

    def cmp(
        self, op: str, lhs_layout: LayoutLike, rhs: CoreStorage, rhs_layout: LayoutLike
    ) -> CoreStorage: ...

    def cmp_scalar(self, op: str, layout: LayoutLike, scalar: float) -> CoreStorage: ...

    def affine(self, layout: LayoutLike, mul: float, add: float) -> CoreStorage:
        """``x · mul + add``"""

    def powf(self, layout: LayoutLike, exponent: float) -> CoreStorage: ...

    def elu(self, layout: LayoutLike, alpha: float) -> CoreStorage:
        """``x if x > 0 else alpha (eˣ - 1)``"""

    def clamp(self, layout: LayoutLike, lo: float | None, hi: float | None) -> CoreStorage: ...

    def where(
        self,
        layout: LayoutLike,
        on_true: CoreStorage,
        true_layout: LayoutLike,
        on_false: CoreStorage,
        false_layout: LayoutLike,
    ) -> CoreStorage:
        """``self`` is the condition; the three layouts share one shape."""

    # -- reductions and scans ------------------------------------------------------------
    def reduce(
        self, op: str, layout: LayoutLike, dims: tuple[int, ...], keepdim: bool, dtype: str
    ) -> CoreStorage: ...

    def cumsum(self, layout: LayoutLike, dim: int, dtype: str) -> CoreStorage: ...

    def sort(
        self, layout: LayoutLike, dim: int, descending: bool
    ) -> tuple[CoreStorage, CoreStorage]:
        """Stable sort along ``dim``: (values, int64 indices)."""

    # -- matmul and convolution (NCHW; 1-d ops run on a unit-height view) ---------------
    def matmul(
        self, lhs_layout: LayoutLike, rhs: CoreStorage, rhs_layout: LayoutLike
    ) -> CoreStorage:
        """``(..., m, k) @ (..., k, n)``, batch dims already broadcast."""

    def conv2d(
        self,
        layout: LayoutLike,
        weight: CoreStorage,
        w_layout: LayoutLike,
        bias: CoreStorage | None,
        b_layout: LayoutLike | None,
        stride: Pair,
        padding: Pads2d,
        dilation: Pair,
        groups: int,
    ) -> CoreStorage:
        """x (N, C, H, W) ⋆ weight (O, C/groups, kh, kw) (+ bias (O,)) -> (N, O, Ho, Wo)."""

    def conv_transpose2d(
        self,
        layout: LayoutLike,
        weight: CoreStorage,
        w_layout: LayoutLike,
        bias: CoreStorage | None,
        b_layout: LayoutLike | None,
        stride: Pair,
        padding: Pair,
        dilation: Pair,
        groups: int,
        output_size: Pair,
    ) -> CoreStorage:
        """x (N, C, H, W), weight (C, O/groups, kh, kw) -> (N, O, *output_size)."""

    def conv2d_backward_weight(
        self,
        layout: LayoutLike,
        grad: CoreStorage,
        grad_layout: LayoutLike,
        kernel_size: Pair,
        stride: Pair,
        padding: Pads2d,
        dilation: Pair,
        groups: int,
    ) -> CoreStorage:
        """dL/dW (O, C/groups, kh, kw) of conv2d from x (``self``) and the output gradient."""

    # -- pooling, upsampling, padding ----------------------------------------------------
    def max_pool2d(
        self,
        layout: LayoutLike,
        kernel_size: Pair,
        stride: Pair,
        padding: Pair,
        dilation: Pair,
        output_size: Pair,
    ) -> tuple[CoreStorage, CoreStorage]:
        """x (N, C, H, W) -> (values (N, C, Ho, Wo), int64 indices into H·W)."""

    def max_pool2d_backward(
        self, layout: LayoutLike, indices: CoreStorage, indices_layout: LayoutLike, input_size: Pair
    ) -> CoreStorage: ...

    def avg_pool2d(
        self,
        layout: LayoutLike,
        kernel_size: Pair,
        stride: Pair,
        padding: Pair,
        output_size: Pair,
        count_include_pad: bool,
        divisor_override: int | None = None,
    ) -> CoreStorage: ...

    def avg_pool2d_backward(
        self,
        layout: LayoutLike,
        input_size: Pair,
        kernel_size: Pair,
        stride: Pair,
        padding: Pair,
        count_include_pad: bool,
        divisor_override: int | None = None,
    ) -> CoreStorage: ...

    def adaptive_avg_pool2d(self, layout: LayoutLike, output_size: Pair) -> CoreStorage: ...

    def adaptive_avg_pool2d_backward(self, layout: LayoutLike, input_size: Pair) -> CoreStorage: ...

    def upsample_nearest2d(
        self, layout: LayoutLike, output_size: Pair, scales: Scales
    ) -> CoreStorage: ...

    def upsample_nearest2d_backward(
        self, layout: LayoutLike, input_size: Pair, scales: Scales
    ) -> CoreStorage: ...

    def upsample_bilinear2d(
        self, layout: LayoutLike, output_size: Pair, align_corners: bool, scales: Scales
    ) -> CoreStorage: ...

    def upsample_bilinear2d_backward(
        self, layout: LayoutLike, input_size: Pair, align_corners: bool, scales: Scales
    ) -> CoreStorage: ...

    def pad(
        self, layout: LayoutLike, pads: Sequence[Pair], mode: str, value: float = 0
    ) -> CoreStorage:
        """One (before, after) pair per dim; mode constant / reflect / replicate / circular."""

    def pad_backward(self, layout: LayoutLike, pads: Sequence[Pair], mode: str) -> CoreStorage: ...

    # -- indexing --------------------------------------------------------------------------
    def gather(
        self,
        layout: LayoutLike,
        dim: int,
        index: CoreStorage,
        index_layout: LayoutLike,
        wrap: bool = False,
    ) -> CoreStorage: ...

    def scatter(
        self,
        layout: LayoutLike,
        dim: int,
        index: CoreStorage,
        index_layout: LayoutLike,
        src: CoreStorage,
        src_layout: LayoutLike,
        wrap: bool = False,
    ) -> CoreStorage: ...

    def scatter_add(
        self,
        layout: LayoutLike,
        dim: int,
        index: CoreStorage,
        index_layout: LayoutLike,
        src: CoreStorage,
        src_layout: LayoutLike,
        wrap: bool = False,
    ) -> CoreStorage: ...

    def index_select(
        self,
        layout: LayoutLike,
        dim: int,
        index: CoreStorage,
        index_layout: LayoutLike,
        wrap: bool = False,
    ) -> CoreStorage: ...

    def index_add(
        self,
        layout: LayoutLike,
        dim: int,
        index: CoreStorage,
        index_layout: LayoutLike,
        src: CoreStorage,
        src_layout: LayoutLike,
        wrap: bool = False,
    ) -> CoreStorage: ...

    def nonzero(self, layout: LayoutLike) -> tuple[CoreStorage, int]:
        """(the ``(n, ndim)`` int64 coordinates of the non-zero elements in C order, n)."""


@runtime_checkable
class FusedStorage(Protocol):
    """Fused and quantized kernels: optional per device (check with ``supports``)."""

    def softmax(self, layout: LayoutLike, dim: int) -> CoreStorage: ...

    def log_softmax(self, layout: LayoutLike, dim: int) -> CoreStorage: ...

    def layer_norm(
        self,
        layout: LayoutLike,
        weight: CoreStorage | None,
        weight_layout: LayoutLike | None,
        bias: CoreStorage | None,
        bias_layout: LayoutLike | None,
        eps: float,
    ) -> tuple[CoreStorage, CoreStorage, CoreStorage]:
        """Over the last dim: (out, mean, rstd)."""

    def rms_norm(
        self,
        layout: LayoutLike,
        weight: CoreStorage | None,
        weight_layout: LayoutLike | None,
        eps: float,
    ) -> tuple[CoreStorage, CoreStorage]:
        """Over the last dim: (out, rstd)."""

    def softmax_backward(
        self,
        layout: LayoutLike,
        grad: CoreStorage,
        grad_layout: LayoutLike,
        dim: int,
        log: bool = False,
    ) -> CoreStorage | None:
        """From y = (log_)softmax(x) along ``dim`` (self) and dL/dy: dL/dx, y's shape; None
        where the device's kernel does not take these operands (the op layer then composes
        the gradient)."""

    def norm_backward(
        self,
        layout: LayoutLike,
        grad: CoreStorage,
        grad_layout: LayoutLike,
        weight: CoreStorage | None,
        weight_layout: LayoutLike | None,
        mean: CoreStorage | None,
        rstd: CoreStorage,
    ) -> CoreStorage | None:
        """dL/dx of layer_norm (``mean`` given) or rms_norm over the last dim of x (self);
        None where the device's kernel does not take these operands (the op layer then
        composes the gradient)."""

    def group_norm(
        self,
        layout: LayoutLike,
        num_groups: int,
        weight: CoreStorage | None,
        weight_layout: LayoutLike | None,
        bias: CoreStorage | None,
        bias_layout: LayoutLike | None,
        eps: float,
    ) -> tuple[CoreStorage, CoreStorage, CoreStorage]:
        """x (N, C, S): (out (N, C, S), mean (N, G), rstd (N, G))."""

    def conv2d_activated(
        self,
        layout: LayoutLike,
        weight: CoreStorage,
        w_layout: LayoutLike,
        bias: CoreStorage | None,
        b_layout: LayoutLike | None,
        stride: Pair,
        padding: Pads2d,
        dilation: Pair,
        groups: int,
        activation: str,
    ) -> CoreStorage:
        """activation(conv2d(...)), as ``conv2d``'s arguments, in one call: ``activation`` one
        of "silu", "relu", "gelu" (tanh), "gelu_erf", applied as the outputs are stored."""

    def batch_norm(
        self,
        layout: LayoutLike,
        weight: CoreStorage | None,
        weight_layout: LayoutLike | None,
        bias: CoreStorage | None,
        bias_layout: LayoutLike | None,
        eps: float,
    ) -> tuple[CoreStorage, CoreStorage, CoreStorage]:
        """Training statistics of x (N, C, S) per channel over N and S: (out (N, C, S),
        mean (C,), rstd (C,)), the statistics in the compute type."""

    def batch_norm_backward(
        self,
        layout: LayoutLike,
        grad: CoreStorage,
        grad_layout: LayoutLike,
        weight: CoreStorage | None,
        weight_layout: LayoutLike | None,
        mean: CoreStorage,
        rstd: CoreStorage,
        input_grad: bool,
    ) -> tuple[CoreStorage | None, CoreStorage, CoreStorage]:
        """From x (N, C, S) (self), dL/dy and the forward's mean, rstd: (dL/dx, None unless
        ``input_grad``; dL/dweight (C,); dL/dbias (C,)), the last two in the compute type."""

    def relu_backward(
        self, layout: LayoutLike, grad: CoreStorage, grad_layout: LayoutLike
    ) -> CoreStorage | None:
        """dL/dx of relu from x (self) and dL/dy of x's shape: 0 where x <= 0, else dL/dy
        (NaN in x passes dL/dy, as torch); None where the device's kernel does not take these
        operands (the op layer then composes the gradient)."""

    def adam_step(
        self,
        layout: LayoutLike,
        grad: CoreStorage,
        grad_layout: LayoutLike,
        state: Sequence[tuple[CoreStorage, LayoutLike]],
        lr: float,
        betas: tuple[float, float],
        eps: float,
        weight_decay: float,
        decoupled: bool,
        maximize: bool,
        step: int,
    ) -> bool:
        """One Adam/AdamW step (``step`` t >= 1) of the parameter (self) in place, and of its
        ``state`` (exp_avg, exp_avg_sq[, max_exp_avg_sq for amsgrad]) with torch.optim.Adam's
        arithmetic; False, with nothing written, where the device's kernel does not take these
        operands (the optimizer then runs its generic rule)."""

    def rope(
        self,
        layout: LayoutLike,
        cos: CoreStorage,
        cos_layout: LayoutLike,
        sin: CoreStorage,
        sin_layout: LayoutLike,
        interleaved: bool,
    ) -> CoreStorage:
        """Rotate pairs of x (..., T, D) by cos/sin (..., T, D/2)."""

    def scaled_dot_product_attention(
        self,
        q_layout: LayoutLike,
        k: CoreStorage,
        k_layout: LayoutLike,
        v: CoreStorage,
        v_layout: LayoutLike,
        mask: CoreStorage | None,
        mask_layout: LayoutLike | None,
        is_causal: bool,
        scale: float,
    ) -> tuple[CoreStorage, CoreStorage]:
        """softmax(q kᵀ · scale + mask) v: (out (*B, L, Ev), probabilities (*B, L, S))."""

    def mean(self, layout: LayoutLike, dims: tuple[int, ...], keepdim: bool) -> CoreStorage:
        """Σ x / N over ``dims``, accumulated past the storage dtype (f32 for f16/bf16)."""

    def var(
        self, layout: LayoutLike, dims: tuple[int, ...], keepdim: bool, correction: float
    ) -> CoreStorage:
        """Σ (x - x̄)² / (N - correction) over ``dims``."""

    def std(
        self, layout: LayoutLike, dims: tuple[int, ...], keepdim: bool, correction: float
    ) -> CoreStorage: ...

    def logsumexp(self, layout: LayoutLike, dims: tuple[int, ...], keepdim: bool) -> CoreStorage:
        """m + log Σ exp(x - m), m = max over ``dims`` (0 where infinite)."""

    def norm(
        self, layout: LayoutLike, p: float, dims: tuple[int, ...], keepdim: bool
    ) -> CoreStorage:
        """(Σ |x|ᵖ)^(1/p) over ``dims``, p > 0; p = ±inf: max/min |x|."""

    def qmatmul(
        self, layout: LayoutLike, raw: CoreStorage, type_name: str, n: int, k: int
    ) -> CoreStorage:
        """``x (..., k) @ Wᵀ`` with W ``(n, k)`` as GGUF blocks of ``type_name`` in ``raw``."""


def _methods(protocol: type) -> tuple[str, ...]:
    return tuple(
        name
        for name, value in vars(protocol).items()
        if not name.startswith("_")
        and (callable(value) or isinstance(value, (property, classmethod)))
    )


CORE_METHODS = _methods(CoreStorage)
FUSED_METHODS = _methods(FusedStorage)
METHODS = CORE_METHODS + FUSED_METHODS


def supports(storage: Any, op: str) -> bool:
    """Whether ``storage``'s device implements the optional method ``op``."""
    if op not in FUSED_METHODS:
        raise ValueError(f"{op!r} is not an optional storage method ({', '.join(FUSED_METHODS)})")
    return callable(getattr(type(storage), op, None))


def require(storage: Any, op: str) -> Callable[..., Any]:
    """``storage``'s bound method ``op``, or ``UnsupportedOnDevice`` naming op and device."""
    if not supports(storage, op):
        raise UnsupportedOnDevice(f"op {op} is not implemented on {storage.device_kind}")
    return getattr(storage, op)


class BackendStorage:
    """Base class of every device's storage. Subclasses set ``device_kind``.

    Reading a protocol method the device lacks raises ``UnsupportedOnDevice`` (the op layer
    calls ``storage.<op>(...)`` directly: this is its explicit error, never a fallback).
    """

    device_kind = "abstract"
    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        if name in METHODS:
            raise UnsupportedOnDevice(f"op {name} is not implemented on {self.device_kind}")
        raise AttributeError(name)
