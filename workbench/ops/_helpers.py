"""Shared pieces of the op functions: operand checks, broadcasting, gradient reduction."""

from __future__ import annotations

from ..dtype import DType, promote_types, result_type_with_scalar
from ..errors import DeviceMismatch, DimensionError, ShapeError, WorkbenchError
from ..layout import Layout
from ..tensor import Tensor, make


def describe(t: Tensor) -> str:
    return f"Tensor[{', '.join(map(str, t.shape))}] {t.dtype.name} {t.device}"


def broadcast_shapes(op: str, *shapes: tuple[int, ...]) -> tuple[int, ...]:
    """NumPy/PyTorch broadcasting: align right, sizes equal or 1."""
    ndim = max(len(s) for s in shapes)
    out = []
    for i in range(ndim):
        size = 1
        for s in shapes:
            j = i - (ndim - len(s))
            if j < 0 or s[j] == 1:
                continue
            if size != 1 and s[j] != size:
                raise ShapeError(
                    f"{op}: shapes {' and '.join(str(s) for s in shapes)} cannot be broadcast "
                    f"(dim {i - ndim}: {size} vs {s[j]})"
                )
            size = s[j]
        out.append(size)
    return tuple(out)


def same_device(op: str, *tensors: Tensor) -> None:
    device = tensors[0].device
    for t in tensors[1:]:
        if t.device is not device:
            raise DeviceMismatch(
                f"{op}: operands are on different devices: "
                + ", ".join(describe(x) for x in tensors)
                + "; move them with .to(device)"
            )


def cast(t: Tensor, dtype: DType) -> Tensor:
    """``t`` in ``dtype`` (the op ``to_dtype``, with its gradient)."""
    if t.dtype is dtype:
        return t
    from .elementwise import to_dtype

    return to_dtype(t, dtype)


def promote(op: str, a: Tensor, b: Tensor) -> tuple[Tensor, Tensor, DType]:
    same_device(op, a, b)
    if a.dtype is b.dtype:
        return a, b, a.dtype
    dtype = promote_types(a.dtype, b.dtype)
    return cast(a, dtype), cast(b, dtype), dtype


def scalar_operand(op: str, t: Tensor, value: object) -> tuple[Tensor, DType]:
    """Cast ``t`` when a scalar of a higher category (an int tensor times 0.5) needs it."""
    dtype = result_type_with_scalar(t.dtype, value)
    return (t if dtype is t.dtype else cast(t, dtype)), dtype


def norm_dim(dim: int, ndim: int, op: str = "op") -> int:
    if -ndim <= dim < ndim:
        return dim % ndim if ndim else 0
    if ndim == 0 and dim in (0, -1):
        return 0
    raise DimensionError(f"{op}: dim {dim} is out of range for a tensor with {ndim} dims")


def norm_dims(dims, ndim: int, op: str = "op") -> tuple[int, ...]:
    """``None`` means every dim; ints and sequences are normalised and deduplicated."""
    if dims is None:
        return tuple(range(ndim))
    if isinstance(dims, int):
        return (norm_dim(dims, ndim, op),)
    out = tuple(sorted({norm_dim(d, ndim, op) for d in dims}))
    if len(out) != len(tuple(dims)):
        raise ShapeError(f"{op}: repeated dims in {tuple(dims)}")
    return out


def new(storage, shape: tuple[int, ...], dtype: DType, device) -> Tensor:
    return make(storage, Layout.contiguous_cached(shape), dtype, device)


def sum_to_shape(g: Tensor, shape: tuple[int, ...]) -> Tensor:
    """Undo broadcasting in a gradient: sum over the dims that were expanded."""
    if g.shape == shape:
        return g
    extra = g.ndim - len(shape)
    dims = tuple(range(extra)) + tuple(
        i + extra for i, s in enumerate(shape) if s == 1 and g.shape[i + extra] != 1
    )
    from .reduce import sum as sum_

    out = sum_(g, dims, keepdim=True) if dims else g
    return out.reshape(shape)


def require_float(op: str, t: Tensor) -> None:
    if not t.dtype.is_floating_point:
        raise WorkbenchError(f"{op}: expected a floating point tensor, found {describe(t)}")
