"""``QMatMul``: ``y = x @ W.T`` with a quantized weight ``W`` of shape ``(N, K)``.

The product runs where ``x`` lives, through its storage's ``qmatmul`` method: the raw GGUF
blocks are moved to that device once (kept per device, a zero-copy view on the CPU) and the
backend multiplies without ever materialising the whole f32 ``W``:

- CPU: ``x`` quantized on the fly to Q8_0 / Q8_1 / Q8_K as ggml does and integer dot
  products per block (native kernels), or f32 tiles through BLAS on the numpy path
  (``WORKBENCH_NATIVE=0``); see ``workbench.backends.cpu.quantized``.
- CUDA and Metal: a quantized matvec (W's blocks decoded in registers, f32 sums) for up to 8
  rows of ``x``, for every GGUF block type plus F16 / BF16 weights; more rows expand W on the
  device and run one matrix product (cuBLAS, MPS or the GEMM kernel); see
  ``workbench.backends.gpu.quantized``.

A device (or block type) without a product raises ``UnsupportedOnDevice`` naming the op and
the device; nothing falls back to another device behind the caller's back.

Inference only: the result carries no autograd history.
"""

from __future__ import annotations

import numpy as np

from .. import dtype as dt
from ..errors import DTypeError, ShapeError
from ..ops._helpers import new
from ..tensor import Tensor
from .qtensor import QTensor


class QMatMul:
    """``x @ W.T`` for a quantized 2-D ``W`` (``(N, K)``, as in ``nn.Linear``).

    ``x`` may be a Tensor (on any device) or a numpy array of shape ``(..., K)``; the result
    has the same kind and shape ``(..., N)`` and x's float dtype (numpy integers give f32).
    """

    def __init__(self, weight: QTensor):
        if not isinstance(weight, QTensor):
            raise TypeError(f"QMatMul: expected a QTensor weight, found {type(weight).__name__}")
        if weight.ndim != 2:
            raise ShapeError(f"QMatMul: weight must be 2-D (N, K), found {list(weight.shape)}")
        self.weight = weight
        self._on_device: dict = {}  # Device -> the raw blocks there (u8; F32: the (N, K) values)
        self._type = weight.ggml_dtype.name  # looked up once: forward is a per-token path

    @property
    def shape(self) -> tuple[int, int]:
        return self.weight.shape  # type: ignore[return-value]

    def matmul_numpy(self, x: np.ndarray) -> np.ndarray:
        """``x (..., K) @ W.T`` for a numpy ``x`` on the CPU; returns float32 ``(..., N)``."""
        from ..ops.creation import from_numpy

        x = np.asarray(x)
        if x.dtype != np.float32:
            x = x.astype(np.float32)
        return self.forward(from_numpy(x)).numpy()

    def forward(self, x: Tensor | np.ndarray) -> Tensor | np.ndarray:
        if not isinstance(x, Tensor):
            arr = np.asarray(x)
            if arr.dtype.kind != "f" and arr.dtype.name != "bfloat16":
                arr = arr.astype(np.float32)
            from ..ops.creation import from_numpy

            return self.forward(from_numpy(arr)).numpy()
        if not x.dtype.is_floating_point:
            raise DTypeError(f"QMatMul: expected a float input, found {x.dtype}")
        n, k = self.weight.shape
        if tuple(x.shape[-1:]) != (k,):
            raise ShapeError(
                f"QMatMul: x of shape {list(x.shape)} does not match weight {list(self.shape)} "
                f"(expected last dimension {k})"
            )
        device = x.device
        raw = self._on_device.get(device)
        if raw is None:
            raw = self._raw_on(device)
        if self._type == "F32":  # nothing to decode: a plain matmul
            return x @ raw.to_dtype(x.dtype).t()
        compute = x if x.dtype in (dt.f32, dt.f16, dt.bf16) else x.to_dtype(dt.f32)
        storage = compute._storage.qmatmul(compute._layout, raw._storage, self._type, n, k)
        out = new(storage, (*x.shape[:-1], n), compute.dtype, device)
        return out if out.dtype is x.dtype else out.to_dtype(x.dtype)

    __call__ = forward

    def _raw_on(self, device) -> Tensor:
        raw = self._on_device.get(device)
        if raw is None:
            from ..ops.creation import from_numpy

            if self.weight.ggml_dtype.name == "F32":
                raw = from_numpy(self.weight.data.view(np.float32))  # (N, K)
            else:
                raw = from_numpy(self.weight.data.reshape(-1))
            if device.kind != "cpu":
                raw = raw.to(device)
            self._on_device[device] = raw
        return raw

    def __repr__(self) -> str:
        return f"QMatMul({self.weight!r})"
