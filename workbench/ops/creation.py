"""Creating tensors: from data, constants, ranges, random values."""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import dtype as dt
from ..device import CPU, Device
from ..dtype import DType
from ..errors import DTypeError, ShapeError, WorkbenchError
from ..layout import Layout
from ..random import Generator, default_generator
from ..tensor import Tensor, make

Shape = Sequence[int] | int


_MAX_NUMEL = 2**63 - 1  # element counts and offsets are int64 on every backend


def _leaf(out: Tensor, requires_grad: bool) -> Tensor:
    """PyTorch's ``requires_grad=`` of the creation functions: True makes the new tensor a leaf
    whose gradient is recorded (floating point only)."""
    return out.requires_grad_() if requires_grad else out


def _shape(size: tuple, op: str) -> tuple[int, ...]:
    """``zeros(2, 3)`` and ``zeros((2, 3))`` alike: non-negative ints (not floats, which
    would silently truncate) whose product an int64 can count."""
    if len(size) == 1 and not _is_size(size[0]):  # zeros((2, 3)): a shape, not one size
        size = size[0]
    try:
        shape = tuple(operator.index(s) for s in size)
    except TypeError:
        found = tuple(size) if isinstance(size, Sequence) else size
        raise ShapeError(f"{op}: sizes must be integers, found {found!r}") from None
    if any(s < 0 for s in shape):
        raise ShapeError(f"{op}: negative size in shape {shape}")
    if math.prod(shape) > _MAX_NUMEL:
        raise ShapeError(f"{op}: shape {shape} has {math.prod(shape)} elements, more than 2**63-1")
    return shape


def _is_size(value: Any) -> bool:
    try:
        operator.index(value)
    except TypeError:
        return False
    return True


def _device(device: Device | str | None) -> Device:
    return CPU if device is None else Device(device)


def from_numpy(array: np.ndarray, device: Device | str | None = None) -> Tensor:
    """A tensor over ``array``'s memory: no copy on the CPU, strided arrays (``a.T``,
    ``a[:, ::2]``, ``np.broadcast_to``) included; arrays with negative strides are copied.

    numpy types without an exact twin are converted: uint16 to i32, uint64 to i64.
    """
    array = np.asarray(array)
    dtype = dt.widened_from_numpy(array.dtype)
    if dtype is None:
        raise DTypeError(f"from_numpy: numpy dtype {array.dtype} is not supported")
    if array.dtype != dtype.numpy:
        array = array.astype(dtype.numpy)
    layout = Layout.contiguous(array.shape)
    if not array.flags.c_contiguous:
        flat, strides = _spanned_memory(array)
        if flat is not None:
            array, layout = flat, Layout(array.shape, strides)
    storage = CPU.backend.Storage.from_numpy(array)
    t = make(storage, layout, dtype, CPU)
    return t if device is None else t.to(device)


def _spanned_memory(array: np.ndarray) -> tuple[np.ndarray | None, tuple[int, ...]]:
    """A 1-d contiguous view of the memory a strided array spans, and the array's strides in
    elements; ``(None, ())`` when a stride is negative or not a whole number of elements."""
    itemsize = array.itemsize
    if array.size == 0 or any(s < 0 or s % itemsize for s in array.strides):
        return None, ()
    strides = tuple(s // itemsize for s in array.strides)
    span = 1 + sum((n - 1) * s for n, s in zip(array.shape, strides, strict=True))
    flat = np.lib.stride_tricks.as_strided(
        array, (span,), (itemsize,), writeable=array.flags.writeable
    )
    return flat, strides


def tensor(
    data: Any,
    dtype: DType | str | None = None,
    device: Device | str | None = None,
    requires_grad: bool = False,
) -> Tensor:
    """A new tensor holding a copy of ``data`` (nested lists, scalars, arrays or tensors).

    Default dtypes as in PyTorch: Python floats give f32, ints give i64, bools give bool.
    """
    if isinstance(data, Tensor):
        out = data.detach().to(device=device or data.device, dtype=dtype or data.dtype)
        out = out.clone() if out.shares_storage(data) else out
    else:
        try:
            array = np.asarray(data)
        except ValueError as err:  # numpy's message names the depth where lengths differ
            raise ShapeError(f"tensor(): nested sequences of different lengths: {err}") from None
        if dtype is not None:
            array = np.array(array, dtype=dt.dtype(dtype).numpy)
        elif array.dtype == np.float64 and not isinstance(data, np.ndarray):
            array = array.astype(np.float32)
        elif array.dtype.kind in "U S O".split():
            raise DTypeError(f"tensor(): cannot make a tensor from {type(data).__name__} data")
        else:
            array = np.array(array)
        out = from_numpy(_c_contiguous(array), device)
    if requires_grad:
        out.requires_grad_()
    return out


_NO_VALUE = object()


def full(
    *size: Any,
    fill_value: Any = _NO_VALUE,
    dtype: DType | str | None = None,
    device: Device | str | None = None,
    _op: str = "full",
    requires_grad: bool = False,
) -> Tensor:
    """A tensor of ``size`` filled with ``fill_value``: ``full(2, 3, fill_value=7)`` or, as
    PyTorch, ``full((2, 3), 7)``. The dtype defaults to the value's kind (f32, i64, bool)."""
    if fill_value is _NO_VALUE:
        if len(size) != 2 or _is_size(size[0]):
            raise ShapeError(
                f"{_op}: expected full(size, fill_value) with a sequence size, or "
                f"fill_value=..., found {size!r}"
            )
        size, fill_value = (size[0],), size[1]
    shape = _shape(size, _op)
    if dtype is None:
        dtype = dt.DEFAULT_FOR_CATEGORY[dt.scalar_category(fill_value)]
    dtype = dt.dtype(dtype)
    device = _device(device)
    storage = device.backend.Storage.full(shape, fill_value, dtype.name, device.index)
    return _leaf(make(storage, Layout.contiguous(shape), dtype, device), requires_grad)


def zeros(
    *size: Any,
    dtype: DType | str = dt.f32,
    device: Device | str | None = None,
    requires_grad: bool = False,
) -> Tensor:
    return full(
        *size, fill_value=0, dtype=dtype, device=device, _op="zeros", requires_grad=requires_grad
    )


def ones(
    *size: Any,
    dtype: DType | str = dt.f32,
    device: Device | str | None = None,
    requires_grad: bool = False,
) -> Tensor:
    return full(
        *size, fill_value=1, dtype=dtype, device=device, _op="ones", requires_grad=requires_grad
    )


def empty(
    *size: Any,
    dtype: DType | str = dt.f32,
    device: Device | str | None = None,
    requires_grad: bool = False,
) -> Tensor:
    shape = _shape(size, "empty")
    dtype = dt.dtype(dtype)
    device = _device(device)
    storage = device.backend.Storage.empty(shape, dtype.name, device.index)
    return _leaf(make(storage, Layout.contiguous(shape), dtype, device), requires_grad)


def _like(t: Tensor, dtype, device) -> tuple[DType, Device]:
    return (t.dtype if dtype is None else dt.dtype(dtype)), (t.device if device is None else device)


def new_full(
    t: Tensor, size: Any, fill_value: Any, dtype=None, device=None, *, requires_grad: bool = False
) -> Tensor:
    """``size`` filled with ``fill_value``, in t's dtype and on t's device unless given
    (PyTorch's ``x.new_full``; ``new_zeros``, ``new_ones``, ``new_empty`` and ``new_tensor``
    likewise)."""
    dtype, device = _like(t, dtype, device)
    return full(
        size, fill_value=fill_value, dtype=dtype, device=device, requires_grad=requires_grad
    )


def new_zeros(
    t: Tensor, *size: Any, dtype=None, device=None, requires_grad: bool = False
) -> Tensor:
    dtype, device = _like(t, dtype, device)
    return zeros(*size, dtype=dtype, device=device, requires_grad=requires_grad)


def new_ones(t: Tensor, *size: Any, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    dtype, device = _like(t, dtype, device)
    return ones(*size, dtype=dtype, device=device, requires_grad=requires_grad)


def new_empty(
    t: Tensor, *size: Any, dtype=None, device=None, requires_grad: bool = False
) -> Tensor:
    dtype, device = _like(t, dtype, device)
    return empty(*size, dtype=dtype, device=device, requires_grad=requires_grad)


def new_tensor(
    t: Tensor, data: Any, dtype=None, device=None, *, requires_grad: bool = False
) -> Tensor:
    dtype, device = _like(t, dtype, device)
    return tensor(data, dtype=dtype, device=device, requires_grad=requires_grad)


def zeros_like(t: Tensor, dtype=None, device=None, *, requires_grad: bool = False) -> Tensor:
    dtype, device = _like(t, dtype, device)
    return zeros(t.shape, dtype=dtype, device=device, requires_grad=requires_grad)


def ones_like(t: Tensor, dtype=None, device=None, *, requires_grad: bool = False) -> Tensor:
    dtype, device = _like(t, dtype, device)
    return ones(t.shape, dtype=dtype, device=device, requires_grad=requires_grad)


def full_like(
    t: Tensor, fill_value: Any, dtype=None, device=None, *, requires_grad: bool = False
) -> Tensor:
    dtype, device = _like(t, dtype, device)
    return full(
        t.shape, fill_value=fill_value, dtype=dtype, device=device, requires_grad=requires_grad
    )


def empty_like(t: Tensor, dtype=None, device=None, *, requires_grad: bool = False) -> Tensor:
    dtype, device = _like(t, dtype, device)
    return empty(t.shape, dtype=dtype, device=device, requires_grad=requires_grad)


def _c_contiguous(array: np.ndarray, dtype: np.dtype | None = None) -> np.ndarray:
    """``array`` as a C-contiguous array of ``dtype``, keeping 0-d arrays 0-d
    (``np.ascontiguousarray`` turns them into shape (1,))."""
    return np.ascontiguousarray(array, dtype=dtype).reshape(np.shape(array))


def _host(array: np.ndarray, dtype: DType, device: Device | str | None) -> Tensor:
    return from_numpy(_c_contiguous(array, dtype.numpy), device)


def arange(
    start: float,
    end: float | None = None,
    step: float = 1,
    dtype=None,
    device=None,
    *,
    requires_grad: bool = False,
) -> Tensor:
    """``[start, end)`` by ``step``; ints give i64, floats f32 (as PyTorch)."""
    if end is None:
        start, end = 0, start
    if step == 0:
        raise ShapeError(f"arange: step must be non-zero, found arange({start}, {end}, {step})")
    if dtype is None:
        is_int = all(isinstance(v, int) for v in (start, end, step))
        dtype = dt.i64 if is_int else dt.f32
    dtype = dt.dtype(dtype)
    return _leaf(
        _host(
            np.arange(start, end, step, dtype=np.float64 if dtype.is_floating_point else None),
            dtype,
            device,
        ),
        requires_grad,
    )


def linspace(
    start: float, end: float, steps: int, dtype=dt.f32, device=None, *, requires_grad: bool = False
) -> Tensor:
    """``steps`` values from ``start`` to ``end`` inclusive."""
    (steps,) = _shape((steps,), "linspace")
    return _leaf(_host(np.linspace(start, end, steps), dt.dtype(dtype), device), requires_grad)


def eye(
    n: int, m: int | None = None, dtype=dt.f32, device=None, *, requires_grad: bool = False
) -> Tensor:
    n, m = _shape((n, n if m is None else m), "eye")
    return _leaf(_host(np.eye(n, m), dt.dtype(dtype), device), requires_grad)


def rand(
    *size: Any,
    dtype=dt.f32,
    device=None,
    generator: Generator | None = None,
    requires_grad: bool = False,
) -> Tensor:
    """Uniform on [0, 1)."""
    rng = (generator or default_generator).rng
    return _leaf(_host(rng.random(_shape(size, "rand")), dt.dtype(dtype), device), requires_grad)


def randn(
    *size: Any,
    dtype=dt.f32,
    device=None,
    generator: Generator | None = None,
    requires_grad: bool = False,
) -> Tensor:
    """Standard normal."""
    rng = (generator or default_generator).rng
    return _leaf(
        _host(rng.standard_normal(_shape(size, "randn")), dt.dtype(dtype), device), requires_grad
    )


def randint(
    low: int, high: int | None = None, size: Shape = (), dtype=dt.i64, device=None,
    generator: Generator | None = None,
) -> Tensor:  # fmt: skip
    """Integers uniform on ``[low, high)`` (``randint(high, size=...)`` starts at 0)."""
    if high is None:
        low, high = 0, low
    if not low < high:
        raise WorkbenchError(f"randint: low must be less than high, found [{low}, {high})")
    rng = (generator or default_generator).rng
    shape = _shape((size,), "randint")
    return _host(rng.integers(low, high, shape), dt.dtype(dtype), device)


def rand_like(t: Tensor, dtype=None, device=None, *, requires_grad: bool = False) -> Tensor:
    dtype, device = _like(t, dtype, device)
    return rand(t.shape, dtype=dtype, device=device, requires_grad=requires_grad)


def randn_like(t: Tensor, dtype=None, device=None, *, requires_grad: bool = False) -> Tensor:
    dtype, device = _like(t, dtype, device)
    return randn(t.shape, dtype=dtype, device=device, requires_grad=requires_grad)


def randint_like(t: Tensor, low: int, high: int | None = None, dtype=None, device=None) -> Tensor:
    dtype, device = _like(t, dtype, device)
    return randint(low, high, t.shape, dtype=dtype, device=device)
