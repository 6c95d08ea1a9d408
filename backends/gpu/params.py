"""Packing kernel parameters into one argument buffer, with no device memory.

The C layout of a parameter list is the same for CUDA (a kernel's arguments) and Metal (an
argument struct): every kernel takes its shapes and strides as ``Layout`` structs by value
(see ``kernels/cuda/common.cuh``): ``int ndim; int contiguous; long long offset;
long long shape[8]; long long strides[8]`` — 144 bytes, 8-byte aligned. Each argument is
placed at the next multiple of its alignment, as the compiler lays out a parameter list.
"""

from __future__ import annotations

import struct

from ..layout import contiguous_strides

MAX_DIMS = 8
LAYOUT_FORMAT = f"<iiq{MAX_DIMS}q{MAX_DIMS}q"
LAYOUT_SIZE = struct.calcsize(LAYOUT_FORMAT)  # 144


def _merge(shape, strides):
    """Drop size-1 dims and merge dims that are contiguous with each other (fewer index ops)."""
    dims = [(s, st) for s, st in zip(shape, strides, strict=True) if s != 1]
    merged: list[list[int]] = []
    for size, stride in dims:
        if merged and merged[-1][1] == stride * size:
            merged[-1][0] *= size
            merged[-1][1] = stride
        else:
            merged.append([size, stride])
    return [m[0] for m in merged], [m[1] for m in merged]


class Dims:
    """A layout packed with its own dims (not merged): for kernels that read coordinates."""

    __slots__ = ("layout",)

    def __init__(self, layout):
        self.layout = layout


def pack_layout(layout, merge: bool = True) -> bytes:
    """The 144-byte ``Layout`` struct; the contiguity flag enables the kernels' fast path.

    Size-1 dims are dropped and adjacent dims that are contiguous with each other merged
    (the C-order element order is unchanged) unless ``merge`` is False."""
    if merge:
        shape, strides = _merge(layout.shape, layout.strides)
    else:
        shape, strides = list(layout.shape), list(layout.strides)
    if len(shape) > MAX_DIMS:
        raise ValueError(
            f"the GPU kernels take at most {MAX_DIMS} non-mergeable dims, got shape "
            f"{tuple(layout.shape)} with strides {tuple(layout.strides)}"
        )
    contiguous = int(tuple(strides) == contiguous_strides(tuple(shape)))
    pad = MAX_DIMS - len(shape)
    return struct.pack(
        LAYOUT_FORMAT,
        len(shape),
        contiguous,
        int(layout.offset),
        *shape,
        *([1] * pad),
        *strides,
        *([0] * pad),
    )


class Ptr(int):
    """A device pointer argument (8 bytes)."""


class I32(int):
    """A 32-bit int argument (``int``)."""


class U32(int):
    """A 32-bit unsigned argument."""


class F32(float):
    """A 32-bit float argument (``float``); a plain Python float is packed as ``double``."""


class Raw(bytes):
    """An argument given as raw bytes with its alignment (e.g. a fill value of a dtype)."""

    align = 1

    def __new__(cls, data: bytes, align: int):
        obj = super().__new__(cls, data)
        obj.align = align
        return obj


def geometry(*values: int) -> Raw:
    """A struct of ``long long`` fields (ConvGeom, PoolGeom, UpGeom in the kernels)."""
    return Raw(struct.pack(f"<{len(values)}q", *(int(v) for v in values)), 8)


def pack_args(*args) -> bytes:
    """One argument buffer: pointers (``Ptr``), ``I32``/``U32``/``F32``, Python ``int`` as
    ``long long``, Python ``float`` as ``double``, layouts (anything with shape/strides/offset)
    as ``Layout`` structs, and ``Raw`` bytes."""
    buf = bytearray()
    for arg in args:
        if isinstance(arg, Ptr):
            data, align = struct.pack("<Q", int(arg)), 8
        elif isinstance(arg, I32):
            data, align = struct.pack("<i", int(arg)), 4
        elif isinstance(arg, U32):
            data, align = struct.pack("<I", int(arg)), 4
        elif isinstance(arg, F32):
            data, align = struct.pack("<f", float(arg)), 4
        elif isinstance(arg, bool):
            data, align = struct.pack("<i", int(arg)), 4
        elif isinstance(arg, int):
            data, align = struct.pack("<q", arg), 8
        elif isinstance(arg, float):
            data, align = struct.pack("<d", arg), 8
        elif isinstance(arg, Raw):
            data, align = bytes(arg), arg.align
        elif isinstance(arg, Dims):
            data, align = pack_layout(arg.layout, merge=False), 8
        elif hasattr(arg, "strides"):
            data, align = pack_layout(arg), 8
        else:
            raise TypeError(f"cannot pass {type(arg).__name__} to a GPU kernel")
        buf += b"\0" * (-len(buf) % align)
        buf += data
    return bytes(buf)
