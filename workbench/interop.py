"""Sharing memory with numpy, PyTorch, CuPy...: the array protocol and DLPack.

On the CPU, ``wb.from_numpy`` and ``Tensor.numpy()`` share memory. DLPack goes through numpy's
implementation on the CPU (numpy >= 1.22 speaks DLPack both ways), so ``torch.from_dlpack(t)``
and ``wb.from_dlpack(torch_tensor)`` copy nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import DTypeError, UnsupportedOnDevice, WorkbenchError

_DLPACK_DEVICE_TYPES = {"cpu": 1, "cuda": 2, "metal": 8}


def dlpack_device(t) -> tuple[int, int]:
    return _DLPACK_DEVICE_TYPES[t.device.kind], t.device.index


def to_dlpack_capsule(t, stream: Any = None, **kwargs: Any):
    if t.device.kind != "cpu":
        export = getattr(t._storage, "to_dlpack", None)
        if export is None:
            raise UnsupportedOnDevice(f"DLPack export is not implemented on {t.device.kind}")
        return export(t._layout, stream)
    array = t.detach().numpy()
    if array.dtype.name == "bfloat16":
        raise WorkbenchError("DLPack export of bf16 on the CPU is not supported by numpy")
    return array.__dlpack__(**kwargs)


def from_dlpack(obj: Any):
    """A tensor sharing memory with any DLPack producer (numpy, PyTorch, CuPy, JAX...)."""
    from .ops.creation import from_numpy

    device_type, _ = obj.__dlpack_device__()
    if device_type != 1:
        raise UnsupportedOnDevice(
            f"from_dlpack: device type {device_type} is not supported yet (only CPU, type 1)"
        )
    try:
        array = np.from_dlpack(obj)
    except (RuntimeError, BufferError, TypeError) as exc:
        raise DTypeError(
            f"from_dlpack: cannot import {type(obj).__name__} through numpy's DLPack ({exc}); "
            "bfloat16 is not supported by numpy: convert to float32 first"
        ) from exc
    return from_numpy(array)
