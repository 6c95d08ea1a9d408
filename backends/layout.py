"""Layouts: how a tensor's elements sit in its storage (shape, strides in elements, offset).

Views (narrow, transpose, permute, broadcast, squeeze/unsqueeze, reshape of a contiguous
layout) only compute a new Layout; the storage is shared. One class for the core and every
backend (``workbench.layout`` re-exports it); GPU backends pack it into their kernels'
``Layout`` struct (``backends/gpu/params.py``).
"""

from __future__ import annotations

from functools import lru_cache
from math import prod

from .errors import ShapeError


@lru_cache(maxsize=4096)
def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides = []
    step = 1
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return tuple(reversed(strides))


@lru_cache(maxsize=4096)
def reduced_shape(shape: tuple[int, ...], dims: tuple[int, ...], keepdim: bool) -> tuple:
    """The shape of a reduction of ``shape`` over ``dims`` (normalised): those dims dropped,
    or kept as 1 (cached: a small reduction's shape maths cost as much as its kernel)."""
    return tuple(1 if i in dims else s for i, s in enumerate(shape) if keepdim or i not in dims)


class Layout:
    """``element(i0, i1, ...) = storage[offset + sum(i_k * strides[k])]``.

    Strides may be 0 (broadcast) or negative: ``flip`` reads through a layout that starts at
    the last element of the flipped dims and walks back (backends' strided copies accept it).
    """

    __slots__ = ("shape", "strides", "offset", "is_contiguous")

    def __init__(self, shape: tuple[int, ...], strides: tuple[int, ...], offset: int = 0):
        self.shape = shape
        self.strides = strides
        self.offset = offset
        self.is_contiguous = _is_contiguous(shape, strides)

    @classmethod
    def of(cls, layout) -> Layout:
        """``layout`` itself when it is a Layout, else one with its shape, strides and offset."""
        if type(layout) is cls:
            return layout
        return cls(tuple(layout.shape), tuple(layout.strides), int(layout.offset))

    @classmethod
    def contiguous(cls, shape: tuple[int, ...], offset: int = 0) -> Layout:
        layout = object.__new__(cls)
        layout.shape = shape
        layout.strides = contiguous_strides(shape)
        layout.offset = offset
        layout.is_contiguous = True
        return layout

    @staticmethod
    def contiguous_cached(shape: tuple[int, ...]) -> Layout:
        """``Layout.contiguous(shape)``, shared between tensors (layouts are never mutated)."""
        layout = _CONTIGUOUS.get(shape)
        if layout is None:
            if len(_CONTIGUOUS) > 4096:
                _CONTIGUOUS.clear()
            layout = _CONTIGUOUS[shape] = Layout.contiguous(shape)
        return layout

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        return prod(self.shape)

    def narrow(self, dim: int, start: int, length: int) -> Layout:
        shape = list(self.shape)
        shape[dim] = length
        return Layout(tuple(shape), self.strides, self.offset + start * self.strides[dim])

    def select(self, dim: int, index: int) -> Layout:
        """Drop ``dim`` by picking one index along it."""
        shape = self.shape[:dim] + self.shape[dim + 1 :]
        strides = self.strides[:dim] + self.strides[dim + 1 :]
        return Layout(shape, strides, self.offset + index * self.strides[dim])

    def strided_slice(self, dim: int, start: int, length: int, step: int) -> Layout:
        shape = list(self.shape)
        strides = list(self.strides)
        shape[dim] = length
        offset = self.offset + start * strides[dim]
        strides[dim] *= step
        return Layout(tuple(shape), tuple(strides), offset)

    def permute(self, dims: tuple[int, ...]) -> Layout:
        return Layout(
            tuple(self.shape[d] for d in dims), tuple(self.strides[d] for d in dims), self.offset
        )

    def broadcast_to(self, shape: tuple[int, ...]) -> Layout:
        extra = len(shape) - len(self.shape)
        if extra < 0:
            raise ShapeError(f"cannot broadcast shape {self.shape} to {shape}: fewer dims")
        strides = [0] * extra
        for size, have, stride in zip(shape[extra:], self.shape, self.strides, strict=True):
            if have == size:
                strides.append(stride)
            elif have == 1:
                strides.append(0)
            else:
                raise ShapeError(f"cannot broadcast shape {self.shape} to {shape}")
        return Layout(tuple(shape), tuple(strides), self.offset)

    def unsqueeze(self, dim: int) -> Layout:
        stride = self.strides[dim] * self.shape[dim] if dim < len(self.shape) else 1
        return Layout(
            self.shape[:dim] + (1,) + self.shape[dim:],
            self.strides[:dim] + (stride,) + self.strides[dim:],
            self.offset,
        )

    def squeeze(self, dims: tuple[int, ...]) -> Layout:
        keep = [d for d in range(len(self.shape)) if d not in dims]
        return Layout(
            tuple(self.shape[d] for d in keep), tuple(self.strides[d] for d in keep), self.offset
        )

    def reshape(self, shape: tuple[int, ...]) -> Layout | None:
        """A view layout with ``shape``, or None when the elements must be copied first."""
        if self.is_contiguous:
            return Layout.contiguous(shape, self.offset)
        strides = _view_strides(self.shape, self.strides, shape)
        return None if strides is None else Layout(shape, strides, self.offset)

    def __repr__(self) -> str:
        return f"Layout(shape={self.shape}, strides={self.strides}, offset={self.offset})"


_CONTIGUOUS: dict[tuple[int, ...], Layout] = {}


def numel(shape) -> int:
    """The number of elements of ``shape`` (any iterable of sizes)."""
    n = 1
    for s in shape:
        n *= int(s)
    return n


def _is_contiguous(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    step = 1
    for size, stride in zip(reversed(shape), reversed(strides), strict=True):
        if size != 1 and stride != step:
            return False
        step *= size
    return True


def _view_strides(
    old_shape: tuple[int, ...], old_strides: tuple[int, ...], new_shape: tuple[int, ...]
) -> tuple[int, ...] | None:
    """Strides that view ``old`` as ``new_shape`` without a copy (PyTorch's rule), or None.

    Groups of old dims that are contiguous among themselves can be split or merged freely.
    """
    if prod(old_shape) == 0:
        return contiguous_strides(new_shape)
    old = [(s, st) for s, st in zip(old_shape, old_strides, strict=True) if s != 1]
    new_strides = [0] * len(new_shape)
    i = 0
    j = 0
    while j < len(new_shape):
        if new_shape[j] == 1:
            new_strides[j] = 1
            j += 1
            continue
        if i >= len(old):
            return None
        # Take a run of old dims that is contiguous in itself, then split it over new dims.
        chunk = old[i][0]
        inner_stride = old[i][1]
        i += 1
        while i < len(old) and old[i - 1][1] == old[i][0] * old[i][1]:
            chunk *= old[i][0]
            inner_stride = old[i][1]
            i += 1
        got = 1
        dims = []
        while j < len(new_shape) and got < chunk:
            if new_shape[j] != 1:
                got *= new_shape[j]
            dims.append(j)
            j += 1
        if got != chunk:
            return None
        stride = inner_stride
        for d in reversed(dims):
            new_strides[d] = stride
            stride *= new_shape[d]
    return tuple(new_strides) if i == len(old) else None
