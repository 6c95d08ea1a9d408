"""Moving tensors between devices and dtypes."""

from __future__ import annotations

from .. import dtype as dt
from .._oprecord import op
from ..autograd import record
from ..device import Device
from ..dtype import DType
from ..layout import Layout
from ..tensor import Tensor, make
from .elementwise import to_dtype


def _to_device(x: Tensor, device: Device) -> Tensor:
    """Copy to another device through host memory (backends may add direct paths later)."""
    host = x._storage.to_numpy(x._layout)
    storage = device.backend.Storage.from_numpy(host, device.index, copy=True)
    out = make(storage, Layout.contiguous(x.shape), x.dtype, device)
    source = x.device
    return record(out, "to_device", (x,), lambda g: (_to_device(g, source),))


@op
def to(x: Tensor, device: Device | str | None = None, dtype: DType | str | None = None) -> Tensor:
    """``x`` on ``device`` and/or in ``dtype``; ``x`` itself when nothing changes.

    ``x.to("cuda")``, ``x.to(wb.f16)``, ``x.to(device, dtype)``.
    """
    if isinstance(device, DType) or (isinstance(device, str) and _is_dtype_name(device)):
        device, dtype = None, device
    if dtype is not None:
        x = to_dtype(x, dt.dtype(dtype))
    if device is not None:
        device = Device(device)
        if device is not x.device:
            x = _to_device(x, device)
    return x


def _is_dtype_name(name: str) -> bool:
    try:
        dt.dtype(name)
    except Exception:
        return False
    return True


@op
def cpu(x: Tensor) -> Tensor:
    return to(x, Device.cpu())


@op
def cuda(x: Tensor, index: int = 0) -> Tensor:
    return to(x, Device.cuda(index))
