"""``Tensor``: a layout over a device storage, plus the autograd graph it belongs to.

Ops live in ``workbench.ops``; ``workbench._methods`` binds them here as methods and Python
operators. This module holds what is a tensor's own: metadata, host interop and the repr.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import autograd
from .device import Device
from .dtype import DType
from .errors import ArgumentError, AutogradError, WorkbenchError
from .layout import Layout


class Tensor:
    """An n-dimensional array on a device. Views share storage; ops run eagerly."""

    __slots__ = ("_storage", "_layout", "dtype", "device", "requires_grad", "_node", "grad",
                 "_base", "__weakref__")  # fmt: skip
    __array_priority__ = 1000  # numpy defers ``ndarray op Tensor`` to us

    # -- metadata ----------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self._layout.shape

    @property
    def ndim(self) -> int:
        return len(self._layout.shape)

    @property
    def numel(self) -> int:
        return self._layout.numel

    def size(self, dim: int | None = None) -> tuple[int, ...] | int:
        return self.shape if dim is None else self.shape[dim]

    def dim(self) -> int:
        return self.ndim

    def dims(self) -> tuple[int, ...]:
        return self.shape

    @property
    def strides(self) -> tuple[int, ...]:
        """Strides in elements (not bytes)."""
        return self._layout.strides

    def stride(self, dim: int | None = None) -> tuple[int, ...] | int:
        return self.strides if dim is None else self.strides[dim]

    @property
    def offset(self) -> int:
        return self._layout.offset

    @property
    def layout(self) -> Layout:
        return self._layout

    @property
    def is_contiguous(self) -> bool:
        return self._layout.is_contiguous

    @property
    def is_leaf(self) -> bool:
        return self._node is None

    @property
    def grad_fn(self) -> str | None:
        return None if self._node is None else self._node.name

    @property
    def nbytes(self) -> int:
        return self.numel * self.dtype.itemsize

    def shares_storage(self, other: Tensor) -> bool:
        """True when both tensors are views of one buffer."""
        return self._storage is other._storage

    def __len__(self) -> int:
        if not self.shape:
            raise ArgumentError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def __hash__(self) -> int:
        return id(self)

    def __bool__(self) -> bool:
        if self.numel != 1:
            raise WorkbenchError(
                f"the truth value of a tensor with {self.numel} elements is ambiguous; "
                "use .any() or .all()"
            )
        return bool(self.item())

    # -- host interop ------------------------------------------------------------------
    def numpy(self) -> np.ndarray:
        """The values as a numpy array: a view of the same memory on the CPU, a copy elsewhere."""
        return self._storage.to_numpy(self._layout)

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        array = np.asarray(self.numpy())  # (a 0-d storage may hold a numpy scalar)
        if dtype is not None:
            array = array.astype(dtype)
        return array.copy() if copy else array

    def item(self) -> bool | int | float:
        if self.numel != 1:
            raise WorkbenchError(f"item() needs exactly one element, tensor has shape {self.shape}")
        return self.detach().numpy().reshape(()).item()

    def tolist(self) -> Any:
        return self.detach().numpy().tolist()

    def __dlpack__(self, *args, **kwargs):
        from .interop import to_dlpack_capsule

        return to_dlpack_capsule(self, *args, **kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        from .interop import dlpack_device

        return dlpack_device(self)

    # -- autograd ----------------------------------------------------------------------
    def backward(self, grad: Tensor | None = None) -> autograd.GradStore:
        """Gradients of this tensor w.r.t. everything it depends on (see ``GradStore``)."""
        return autograd.backward(self, grad)

    def detach(self) -> Tensor:
        """The same values (same storage) outside any graph."""
        return make(self._storage, self._layout, self.dtype, self.device)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        if self._node is not None and not requires_grad:
            raise AutogradError("requires_grad_(False) on a non-leaf tensor; use detach()")
        if requires_grad and not self.dtype.is_floating_point:
            raise AutogradError(f"only floating point tensors can require grad, found {self.dtype}")
        self.requires_grad = requires_grad
        return self

    def zero_grad(self) -> None:
        self.grad = None

    # -- repr --------------------------------------------------------------------------
    def __repr__(self) -> str:
        from .printing import tensor_repr

        return tensor_repr(self)

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        if spec and self.numel == 1:
            return format(self.item(), spec)
        return repr(self)


_new = object.__new__


def make(storage, layout: Layout, dtype: DType, device: Device) -> Tensor:
    """Wrap a storage as a tensor outside any graph (the constructor every op uses)."""
    t = _new(Tensor)
    t._storage = storage
    t._layout = layout
    t.dtype = dtype
    t.device = device
    t.requires_grad = False
    t._node = None
    t.grad = None
    t._base = None
    return t


class Var(Tensor):
    """A trainable leaf: a tensor that requires a gradient and can be updated in place.

    ``Var(tensor_or_data)`` copies nothing when given a float tensor; ``var.set(value)``
    replaces the values (same shape and dtype) without creating a graph.
    """

    __slots__ = ()

    def __new__(
        cls, data: Any, dtype: DType | str | None = None, device: Device | str | None = None
    ):
        from .ops.creation import tensor as to_tensor

        src = data if isinstance(data, Tensor) else to_tensor(data, dtype=dtype, device=device)
        if dtype is not None or device is not None:
            src = src.to(device=device, dtype=dtype)
        if not src.dtype.is_floating_point:
            raise AutogradError(f"a Var must be floating point, found {src.dtype}")
        var = _new(cls)
        var._storage = src._storage
        var._layout = src._layout
        var.dtype = src.dtype
        var.device = src.device
        var.requires_grad = True
        var._node = None
        var.grad = None
        var._base = None
        return var

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def set(self, value: Tensor) -> None:
        """Overwrite the values in place (shapes must match)."""
        if value.shape != self.shape:
            raise WorkbenchError(f"Var.set: expected shape {self.shape}, found {value.shape}")
        with autograd.no_grad():
            self.detach().copy_(value)

    def as_tensor(self) -> Tensor:
        return self.detach()
