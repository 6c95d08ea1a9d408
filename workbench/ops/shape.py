"""Views (zero-copy: reshape of contiguous data, transpose, permute, narrow, expand, squeeze)
and the ops that rearrange data: cat, stack, split, flip, roll, repeat."""

from __future__ import annotations

import math
from collections.abc import Sequence

from .. import dtype as dt
from .._oprecord import op
from ..autograd import record
from ..dtype import DType, promote_types
from ..errors import ShapeError, UnsupportedOnDevice
from ..layout import Layout
from ..tensor import Tensor, make
from ._helpers import describe, norm_dim, norm_dims, same_device


def _as_view(x: Tensor, layout: Layout, name: str, backward) -> Tensor:
    out = make(x._storage, layout, x.dtype, x.device)
    out._base = x if x._base is None else x._base
    return record(out, name, (x,), backward)


def _shape_arg(shape: tuple) -> tuple[int, ...]:
    if len(shape) == 1 and not isinstance(shape[0], int):
        return tuple(shape[0])
    return tuple(shape)


def _infer_shape(op_name: str, x: Tensor, shape: tuple[int, ...]) -> tuple[int, ...]:
    numel = x.numel
    if -1 in shape:
        if shape.count(-1) > 1:
            raise ShapeError(f"{op_name}: only one dim can be -1, found {shape}")
        known = math.prod(s for s in shape if s != -1)
        if known == 0 or numel % known:
            raise ShapeError(f"{op_name}: cannot reshape {describe(x)} to {shape}")
        shape = tuple(numel // known if s == -1 else s for s in shape)
    if math.prod(shape) != numel:
        raise ShapeError(
            f"{op_name}: cannot reshape {describe(x)} ({numel} elements) to {shape} "
            f"({math.prod(shape)} elements)"
        )
    return shape


@op
def reshape(x: Tensor, *shape: int) -> Tensor:
    """The same elements in a new shape: a view when the layout allows, else a copy."""
    shape = _infer_shape("reshape", x, _shape_arg(shape))
    if shape == x.shape:
        return x
    layout = x._layout.reshape(shape)
    if layout is None:
        return reshape(contiguous(x), shape)
    old = x.shape
    return _as_view(x, layout, "reshape", lambda g: (g.reshape(old),))


@op
def view(x: Tensor, *shape) -> Tensor:
    """Like ``reshape`` but never copies: raises when the layout cannot be viewed so.
    ``x.view(dtype)`` reinterprets the bytes instead (see ``_view_as_dtype``)."""
    if len(shape) == 1 and isinstance(shape[0], DType | str):
        return _view_as_dtype(x, dt.dtype(shape[0]))
    shape = _infer_shape("view", x, _shape_arg(shape))
    layout = x._layout.reshape(shape)
    if layout is None:
        raise ShapeError(
            f"view: {describe(x)} with strides {x.strides} cannot be viewed as {shape}; "
            "use reshape() (which copies) or contiguous() first"
        )
    old = x.shape
    return _as_view(x, layout, "view", lambda g: (g.reshape(old),))


def _view_as_dtype(x: Tensor, dtype: DType) -> Tensor:
    """The same bytes read as ``dtype`` (no copy, no gradient). With another item size the last
    dim scales by the ratio and must be contiguous (stride 1), as in PyTorch. CPU only."""
    if dtype is x.dtype:
        return x
    if not x.device.is_cpu:
        raise UnsupportedOnDevice(f"op view(dtype) is not implemented on {x.device.kind}")
    if dtype.itemsize != x.dtype.itemsize:
        last = x.shape[-1] if x.ndim else 0
        if x.ndim == 0 or x.strides[-1] != 1 or (last * x.dtype.itemsize) % dtype.itemsize:
            raise ShapeError(
                f"view: {describe(x)} with strides {x.strides} cannot be viewed as "
                f"{dtype.name}: the last dim needs stride 1 and {last} × {x.dtype.itemsize} "
                f"bytes divisible by {dtype.itemsize}"
            )
    from .creation import from_numpy

    return from_numpy(x.detach().numpy().view(dtype.numpy))


@op
def flatten(x: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    if x.ndim == 0:
        return x.reshape((1,))
    start = norm_dim(start_dim, x.ndim, "flatten")
    end = norm_dim(end_dim, x.ndim, "flatten")
    if start > end:
        raise ShapeError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}")
    shape = x.shape
    return x.reshape((*shape[:start], math.prod(shape[start : end + 1]), *shape[end + 1 :]))


@op
def squeeze(x: Tensor, dim=None) -> Tensor:
    """Drop size-1 dims (all of them, or those in ``dim`` that have size 1)."""
    if x.ndim == 0:
        norm_dims(dim, 0, "squeeze")  # validates dim (0 or -1 for a 0-d tensor)
        return x
    if dim is None:
        dims = tuple(i for i, s in enumerate(x.shape) if s == 1)
    else:
        dims = tuple(d for d in norm_dims(dim, x.ndim, "squeeze") if x.shape[d] == 1)
    if not dims:
        return x
    old = x.shape
    return _as_view(x, x._layout.squeeze(dims), "squeeze", lambda g: (g.reshape(old),))


@op
def unsqueeze(x: Tensor, dim: int) -> Tensor:
    """Insert a size-1 dim at ``dim`` (negative counts from the end of the result)."""
    dim = norm_dim(dim, x.ndim + 1, "unsqueeze")
    old = x.shape
    return _as_view(x, x._layout.unsqueeze(dim), "unsqueeze", lambda g: (g.reshape(old),))


@op
def permute(x: Tensor, *dims: int) -> Tensor:
    dims = _shape_arg(dims)
    if len(dims) != x.ndim:
        raise ShapeError(f"permute: {describe(x)} has {x.ndim} dims, got the order {dims}")
    dims = tuple(norm_dim(d, x.ndim, "permute") for d in dims)
    if sorted(dims) != list(range(x.ndim)):
        raise ShapeError(f"permute: {dims} is not a permutation of the dims of {describe(x)}")
    inverse = tuple(dims.index(i) for i in range(x.ndim))
    return _as_view(x, x._layout.permute(dims), "permute", lambda g: (g.permute(inverse),))


@op
def transpose(x: Tensor, dim0: int = -2, dim1: int = -1) -> Tensor:
    """Swap two dims (a view)."""
    if x.ndim < 2 and dim0 in (-2, 0) and dim1 in (-1, 0):
        return x
    d0 = norm_dim(dim0, x.ndim, "transpose")
    d1 = norm_dim(dim1, x.ndim, "transpose")
    if d0 == d1:
        return x
    order = list(range(x.ndim))
    order[d0], order[d1] = d1, d0
    return permute(x, tuple(order))


@op
def movedim(x: Tensor, source: int, destination: int) -> Tensor:
    src = norm_dim(source, x.ndim, "movedim")
    dst = norm_dim(destination, x.ndim, "movedim")
    order = [d for d in range(x.ndim) if d != src]
    order.insert(dst, src)
    return permute(x, tuple(order))


@op
def broadcast_to(x: Tensor, *shape: int) -> Tensor:
    """A view repeating size-1 dims (stride 0) up to ``shape``; -1 keeps a size."""
    shape = _shape_arg(shape)
    extra = len(shape) - x.ndim
    if extra < 0:
        raise ShapeError(f"broadcast_to: cannot broadcast {describe(x)} to fewer dims {shape}")
    shape = tuple(x.shape[i - extra] if s == -1 else s for i, s in enumerate(shape))
    if shape == x.shape:
        return x
    try:
        layout = x._layout.broadcast_to(shape)
    except ShapeError:
        raise ShapeError(f"broadcast_to: cannot broadcast {describe(x)} to {shape}") from None
    old = x.shape
    from ._helpers import sum_to_shape

    return _as_view(x, layout, "broadcast_to", lambda g: (sum_to_shape(g, old),))


expand = broadcast_to


@op
def narrow(x: Tensor, dim: int, start: int, length: int) -> Tensor:
    """Elements ``start .. start+length`` along ``dim`` (a view)."""
    dim = norm_dim(dim, x.ndim, "narrow")
    size = x.shape[dim]
    if start < 0:
        start += size
    if not (0 <= start and length >= 0 and start + length <= size):
        raise ShapeError(
            f"narrow: start {start} + length {length} is out of range for dim {dim} of "
            f"{describe(x)}"
        )
    if start == 0 and length == size:
        return x

    def backward(g: Tensor):
        return (pad_with_zeros(g, dim, start, size - start - length),)

    return _as_view(x, x._layout.narrow(dim, start, length), "narrow", backward)


@op
def contiguous(x: Tensor) -> Tensor:
    """``x`` itself when contiguous, else a contiguous copy."""
    if x._layout.is_contiguous:
        return x
    return clone(x)


@op
def clone(x: Tensor) -> Tensor:
    """A copy in new memory (contiguous), in the graph."""
    from .creation import empty

    out = empty(x.shape, dtype=x.dtype, device=x.device)
    x._storage.copy_strided(x._layout, out._storage, out._layout)
    return record(out, "clone", (x,), lambda g: (g,))


@op
def cat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Join tensors along an existing dim; all other dims must match."""
    from .creation import empty

    tensors = list(tensors)
    if not tensors:
        raise ShapeError("cat: expected a non-empty list of tensors")
    first = tensors[0]
    same_device("cat", *tensors)
    dtype = first.dtype
    for t in tensors[1:]:
        dtype = promote_types(dtype, t.dtype)
    tensors = [t if t.dtype is dtype else t.to_dtype(dtype) for t in tensors]
    dim = norm_dim(dim, first.ndim, "cat")
    for t in tensors:
        if t.ndim != first.ndim or any(
            a != b for i, (a, b) in enumerate(zip(t.shape, first.shape, strict=True)) if i != dim
        ):
            raise ShapeError(
                f"cat: shapes must match except in dim {dim}: "
                + ", ".join(str(x.shape) for x in tensors)
            )
    sizes = [t.shape[dim] for t in tensors]
    shape = list(first.shape)
    shape[dim] = sum(sizes)
    out = empty(tuple(shape), dtype=dtype, device=first.device)
    start = 0
    for t, size in zip(tensors, sizes, strict=True):
        if size:
            t._storage.copy_strided(t._layout, out._storage, out._layout.narrow(dim, start, size))
        start += size

    def backward(g: Tensor):
        grads = []
        begin = 0
        for size in sizes:
            grads.append(g.narrow(dim, begin, size))
            begin += size
        return tuple(grads)

    return record(out, "cat", tuple(tensors), backward)


def pad_with_zeros(x: Tensor, dim: int, before: int, after: int) -> Tensor:
    """``x`` with ``before`` and ``after`` zeros added along ``dim``."""
    from .creation import zeros

    parts = []
    for n in (before, None, after):
        if n is None:
            parts.append(x)
        elif n:
            shape = list(x.shape)
            shape[dim] = n
            parts.append(zeros(tuple(shape), dtype=x.dtype, device=x.device))
    return cat(parts, dim) if len(parts) > 1 else x


@op
def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Join same-shaped tensors along a new dim."""
    tensors = list(tensors)
    if not tensors:
        raise ShapeError("stack: expected a non-empty list of tensors")
    shapes = {t.shape for t in tensors}
    if len(shapes) != 1:
        raise ShapeError(f"stack: all tensors need one shape, found {sorted(shapes)}")
    dim = norm_dim(dim, tensors[0].ndim + 1, "stack")
    return cat([t.unsqueeze(dim) for t in tensors], dim)


@op
def split(x: Tensor, split_size_or_sections, dim: int = 0) -> tuple[Tensor, ...]:
    """Views of ``x`` along ``dim``: pieces of one size (the last may be smaller) or a list."""
    dim = norm_dim(dim, x.ndim, "split")
    size = x.shape[dim]
    if isinstance(split_size_or_sections, int):
        step = split_size_or_sections
        if step <= 0:
            raise ShapeError(f"split: split size must be positive, found {step}")
        sections = [min(step, size - s) for s in range(0, size, step)] or [0]
    else:
        sections = list(split_size_or_sections)
        if sum(sections) != size:
            raise ShapeError(f"split: sections {sections} do not add up to dim size {size}")
    out = []
    start = 0
    for length in sections:
        out.append(narrow(x, dim, start, length))
        start += length
    return tuple(out)


@op
def chunk(x: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
    """``chunks`` views of (nearly) equal size along ``dim``, as PyTorch."""
    size = x.shape[norm_dim(dim, x.ndim, "chunk")]
    if chunks <= 0:
        raise ShapeError(f"chunk: the number of chunks must be positive, found {chunks}")
    return split(x, max(1, -(-size // chunks)), dim)


@op
def flip(x: Tensor, dims) -> Tensor:
    """Reverse the order of elements along ``dims`` (a copy, as PyTorch).

    The copy reads ``x`` through a layout with negated strides along ``dims``, starting at
    the last element of each, so no index tensor is needed.
    """
    from .creation import empty

    dims = norm_dims(dims, x.ndim, "flip") if x.ndim else ()
    layout = x._layout
    strides = list(layout.strides)
    offset = layout.offset
    for d in dims:
        if x.shape[d] > 1:
            offset += (x.shape[d] - 1) * strides[d]
            strides[d] = -strides[d]
    out = empty(x.shape, dtype=x.dtype, device=x.device)
    if x.numel:
        source = Layout(x.shape, tuple(strides), offset)
        x._storage.copy_strided(source, out._storage, out._layout)
    return record(out, "flip", (x,), lambda g: (flip(g, dims),))


@op
def roll(x: Tensor, shifts, dims=None) -> Tensor:
    """Shift elements cyclically along ``dims`` (flattened first when dims is None)."""
    if dims is None:
        return roll(x.flatten(), shifts, 0).reshape(x.shape)
    shifts = (shifts,) if isinstance(shifts, int) else tuple(shifts)
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    if len(shifts) != len(dims):
        raise ShapeError(f"roll: {len(shifts)} shifts for {len(dims)} dims")
    out = x
    for shift, d in zip(shifts, dims, strict=True):
        d = norm_dim(d, x.ndim, "roll")
        n = x.shape[d]
        if n == 0:
            continue
        s = shift % n
        if s:
            out = cat([out.narrow(d, n - s, s), out.narrow(d, 0, n - s)], d)
    return out


@op
def repeat(x: Tensor, *repeats: int) -> Tensor:
    """Tile ``x`` ``repeats[i]`` times along each dim (PyTorch's ``repeat``; a copy)."""
    repeats = _shape_arg(repeats)
    if len(repeats) < x.ndim:
        raise ShapeError(f"repeat: {len(repeats)} repeats for {describe(x)}; need >= {x.ndim}")
    shape = (1,) * (len(repeats) - x.ndim) + x.shape
    base = x.reshape(shape)
    interleaved = []
    expanded = []
    for r, s in zip(repeats, shape, strict=True):
        interleaved += [1, s]
        expanded += [r, s]
    out = base.reshape(tuple(interleaved)).expand(tuple(expanded))
    return out.reshape(tuple(r * s for r, s in zip(repeats, shape, strict=True)))


@op
def tile(x: Tensor, *reps: int) -> Tensor:
    """Like ``repeat``, but fewer reps than dims are padded with ones on the left."""
    reps = _shape_arg(reps)
    reps = (1,) * (x.ndim - len(reps)) + tuple(reps)
    return repeat(x, reps)


@op
def t(x: Tensor) -> Tensor:
    """Transpose of a matrix (a 0-d or 1-d tensor is returned as is)."""
    if x.ndim > 2:
        raise ShapeError(f"t: expects at most 2 dims, found {describe(x)}; use transpose()")
    return transpose(x, 0, 1) if x.ndim == 2 else x
