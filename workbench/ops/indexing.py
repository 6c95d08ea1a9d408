"""Indexing: gather, scatter, scatter_add, index_select, index_add, embedding, nonzero,
masked_select, and ``x[key]`` / ``x[key] = value`` with PyTorch's rules.

``x[key]`` with ints, slices (positive steps), ``None`` and ``...`` is a zero-copy view.
Integer index tensors (or lists / numpy arrays) and bool masks select a copy through
``index_select``; its gradient accumulates repeated indices with ``index_add``.
Index tensors are i64, i32, u32 or i16. Only ``x[key]`` lets negative indices count from the
end (as PyTorch); the ops raise ``IndexingError`` for any index outside ``[0, size)``.
"""

from __future__ import annotations

import math
import operator

import numpy as np

from .. import dtype as dt
from .._oprecord import op
from ..autograd import GRAD_ENABLED, record
from ..errors import DTypeError, IndexingError, ShapeError
from ..layout import Layout
from ..tensor import Tensor, make
from ._helpers import broadcast_shapes, cast, describe, new, norm_dim, same_device

_INDEX_DTYPES = (dt.i64, dt.i32, dt.u32, dt.i16)
_INDEX_NAMES = "i64, i32, u32 or i16"


# -- operands ----------------------------------------------------------------------------------
def _host_index(name: str, data, device) -> Tensor:
    """A list / numpy array of indices (or a bool mask) as a tensor on ``device``."""
    from .creation import from_numpy

    array = np.asarray(data)
    if array.size == 0 and array.dtype.kind == "f":  # [] is an empty index, not floats
        array = array.astype(np.int64)
    elif array.dtype.kind in "iu" and array.dtype not in (np.int64, np.int32, np.uint32):
        array = array.astype(np.int64)
    elif array.dtype.kind not in "biu":
        raise IndexingError(
            f"{name}: indices must be integers or bools, found a {type(data).__name__} of "
            f"{array.dtype} values"
        )
    return from_numpy(np.ascontiguousarray(array), device)


def _index_arg(name: str, index, x: Tensor) -> Tensor:
    """``index`` as an integer tensor on x's device, or a clear error."""
    if not isinstance(index, Tensor):
        index = _host_index(name, index, x.device)
    if index.dtype not in _INDEX_DTYPES:
        raise DTypeError(f"{name}: index must be {_INDEX_NAMES}, found {describe(index)}")
    same_device(name, x, index)
    return index


def _source_arg(name: str, src, x: Tensor) -> Tensor:
    if not isinstance(src, Tensor):
        raise DTypeError(f"{name}: source must be a tensor, found {type(src).__name__}")
    same_device(name, x, src)
    return cast(src, x.dtype)


def _lift(layout: Layout) -> Layout:
    """0-d layouts as 1-d of size 1 (the backend's kernels index along a dim)."""
    return layout if layout.shape else layout.unsqueeze(0)


def _dispatch(name: str, x: Tensor, method, *args, **kwargs):
    """Call a storage method, re-raising its out-of-range IndexError as an IndexingError."""
    try:
        return method(*args, **kwargs)
    except IndexError as e:
        raise IndexingError(f"{name}: {e}; input {describe(x)}") from None


def _check_along(name: str, x: Tensor, dim: int, index: Tensor, src: Tensor | None = None):
    """PyTorch's gather/scatter shape rule: same number of dims, ``index`` no bigger than
    ``x`` outside ``dim`` and no bigger than ``src`` anywhere."""
    if max(index.ndim, 1) != max(x.ndim, 1):
        raise ShapeError(
            f"{name}: index {describe(index)} must have as many dims as the input {describe(x)}"
        )
    for d, n in enumerate(index.shape):
        if d != dim and x.ndim and n > x.shape[d]:
            raise ShapeError(
                f"{name}: index {describe(index)} is bigger than the input {describe(x)} in "
                f"dim {d} ({n} > {x.shape[d]})"
            )
    if src is not None:
        if max(src.ndim, 1) != max(index.ndim, 1) or any(
            n > s for n, s in zip(index.shape, src.shape, strict=False)
        ):
            raise ShapeError(
                f"{name}: index {describe(index)} must have src's number of dims and be no "
                f"bigger than src {describe(src)}"
            )


def _zeros(shape: tuple[int, ...], like: Tensor) -> Tensor:
    """Zeros of ``shape`` as a broadcast view of one zero (the kernels copy it anyway)."""
    from .creation import zeros

    return zeros((), dtype=like.dtype, device=like.device).broadcast_to(shape)


def _pad_to(t: Tensor, shape: tuple[int, ...]) -> Tensor:
    """``t`` in the leading corner of zeros of ``shape`` (src bigger than index)."""
    from .shape import pad_with_zeros

    for d, (have, want) in enumerate(zip(t.shape, shape, strict=True)):
        if have != want:
            t = pad_with_zeros(t, d, 0, want - have)
    return t


# -- gather / scatter ------------------------------------------------------------------------
@op
def gather(x: Tensor, dim: int, index) -> Tensor:
    """Pick along ``dim``: ``out[i, j, k] = x[i, index[i, j, k], k]`` (dim 1).

    ``index`` has x's number of dims and ``index.shape[d] <= x.shape[d]`` for ``d != dim``;
    ``out`` has index's shape. grad: ``zeros_like(x).scatter_add(dim, index, g)``.
    """
    index = _index_arg("gather", index, x)
    dim = norm_dim(dim, x.ndim, "gather")
    _check_along("gather", x, dim, index)
    storage = _dispatch(
        "gather", x, x._storage.gather, _lift(x._layout), dim, index._storage,
        _lift(index._layout),
    )  # fmt: skip
    out = new(storage, index.shape, x.dtype, x.device)

    def backward(g: Tensor):
        return (scatter_add(_zeros(x.shape, g), dim, index, g),)

    return record(out, "gather", (x,), backward, saved=(index,))


def _scatter(name: str, x: Tensor, dim: int, index, src) -> Tensor:
    from .creation import full

    index = _index_arg(name, index, x)
    dim = norm_dim(dim, x.ndim, name)
    if isinstance(src, Tensor):
        src_t = _source_arg(name, src, x)
        _check_along(name, x, dim, index, src_t)
        src_layout = _lift(src_t._layout)
    else:
        if name == "scatter_add":
            raise DTypeError(f"scatter_add: src must be a tensor, found {type(src).__name__}")
        _check_along(name, x, dim, index)
        src_t = full((), fill_value=src, dtype=x.dtype, device=x.device)
        src_layout = src_t._layout.broadcast_to(_lift(index._layout).shape)
    method = getattr(x._storage, name)
    storage = _dispatch(
        name, x, method, _lift(x._layout), dim, index._storage, _lift(index._layout),
        src_t._storage, src_layout,
    )  # fmt: skip
    out = new(storage, x.shape, x.dtype, x.device)
    is_tensor = isinstance(src, Tensor)

    def backward(g: Tensor):
        if name == "scatter":
            gx = scatter(g, dim, index, 0) if x.requires_grad else None
        else:
            gx = g
        gsrc = None
        if is_tensor and src_t.requires_grad:
            gsrc = _pad_to(gather(g, dim, index), src_t.shape)
        return gx, gsrc

    return record(out, name, (x, src_t if is_tensor else None), backward, saved=(index,))


@op
def scatter(x: Tensor, dim: int, index, src=None, *, value=None) -> Tensor:
    """A copy of ``x`` with ``out[i, index[i, j, k], k] = src[i, j, k]`` (dim 1).

    ``src`` is a tensor (at least index's size in every dim) or a scalar, or ``value=`` a
    scalar (PyTorch's spelling). Repeated indices: the last write wins. grads: x gets ``g``
    with the written places zeroed, src gets ``g.gather(dim, index)``.
    """
    if (src is None) == (value is None):
        raise DTypeError("scatter: give one of src and value")
    return _scatter("scatter", x, dim, index, value if src is None else src)


@op
def scatter_add(x: Tensor, dim: int, index, src: Tensor) -> Tensor:
    """A copy of ``x`` with ``out[i, index[i, j, k], k] += src[i, j, k]`` (dim 1).

    Repeated indices accumulate. grads: x gets ``g``, src gets ``g.gather(dim, index)``.
    """
    return _scatter("scatter_add", x, dim, index, src)


_SCATTER_REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")


def _identity(reduce: str, dtype: dt.DType) -> float | int:
    """The value that changes nothing under ``reduce`` (its empty result)."""
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if dtype.is_floating_point:
        return -math.inf if reduce == "amax" else math.inf
    info = np.iinfo(dtype.numpy) if not dtype.is_bool else None
    return (info.min if reduce == "amax" else info.max) if info else reduce == "amin"


@op
def scatter_reduce(x: Tensor, dim: int, index, src: Tensor, reduce: str, *,
                   include_self: bool = True) -> Tensor:  # fmt: skip
    """A copy of ``x`` where each ``out[i, index[i, j, k], k]`` (dim 1) is the ``reduce``
    ("sum", "prod", "mean", "amax", "amin") of the ``src[i, j, k]`` sent there, and of the
    ``x`` value too when ``include_self``; places nothing is sent to keep ``x``.

    Built from differentiable ops over a one-hot (x.shape[dim] × index) comparison, so it has
    gradients (tied extrema share theirs) and runs on every device.
    """
    from .creation import arange
    from .elementwise import logical_and, maximum, minimum, where
    from .reduce import amax, amin, prod, sum

    if reduce not in _SCATTER_REDUCTIONS:
        raise DTypeError(f"scatter_reduce: reduce must be one of {_SCATTER_REDUCTIONS}, "
                         f"found {reduce!r}")  # fmt: skip
    index = _index_arg("scatter_reduce", index, x)
    src = _source_arg("scatter_reduce", src, x)
    dim = norm_dim(dim, x.ndim, "scatter_reduce")
    _check_along("scatter_reduce", x, dim, index, src)
    if x.ndim == 0:
        x, index, src = x.reshape((1,)), index.reshape((1,)), src.reshape((1,))
        return scatter_reduce(x, 0, index, src, reduce, include_self=include_self).reshape(())
    n = x.shape[dim]
    src = _corner(src, index.shape)
    targets = arange(n, device=x.device).reshape((1,) * dim + (n,) + (1,) * (x.ndim - dim))
    sent = index.unsqueeze(dim) == targets  # (..., n, index.shape[dim], ...)
    spread = where(sent, src.unsqueeze(dim), _identity(reduce, x.dtype))
    along = dim + 1
    hit = _pad_to(sent.any(along), x.shape)
    if reduce in ("sum", "mean"):
        total = sum(spread, along)
    else:
        total = {"prod": prod, "amax": amax, "amin": amin}[reduce](spread, along)
    total = _pad_to(total.to_dtype(x.dtype) if reduce != "mean" else total, x.shape)
    if reduce == "mean":
        count = _pad_to(sum(sent, along), x.shape) + (1 if include_self else 0)
        total = (total + x) if include_self else total
        mean = total / where(logical_and(hit, count > 0), count, 1)
        out = mean if x.dtype.is_floating_point else mean.floor()
        return where(hit, out.to_dtype(x.dtype), x)
    if include_self:
        combine = {"sum": lambda a, b: a + b, "prod": lambda a, b: a * b,
                   "amax": maximum, "amin": minimum}[reduce]  # fmt: skip
        total = combine(x, total)
    return where(hit, total, x)


def _corner(t: Tensor, shape: tuple[int, ...]) -> Tensor:
    """The leading ``shape`` corner of ``t`` (src may be bigger than index)."""
    for d, size in enumerate(shape):
        if t.shape[d] != size:
            t = t.narrow(d, 0, size)
    return t


# -- index_select / index_add / embedding --------------------------------------------------------
def _select_shape(x: Tensor, dim: int, n: int) -> tuple[int, ...]:
    if not x.ndim:
        return ()
    return x.shape[:dim] + (n,) + x.shape[dim + 1 :]


def _index_select(x: Tensor, dim: int, index: Tensor, wrap: bool, name: str) -> Tensor:
    """index_select with a 0-d or 1-d integer ``index``; ``wrap`` allows negative indices."""
    dim = norm_dim(dim, x.ndim, name)
    extra = {"wrap": True} if wrap else {}
    storage = _dispatch(
        name, x, x._storage.index_select, _lift(x._layout), dim, index._storage,
        _lift(index._layout), **extra,
    )  # fmt: skip
    out = new(storage, _select_shape(x, dim, index.numel), x.dtype, x.device)
    if not (x.requires_grad and GRAD_ENABLED.get()):
        return out

    def backward(g: Tensor):
        return (_index_add(_zeros(x.shape, g), dim, index, g, wrap),)

    return record(out, name, (x,), backward, saved=(index,))


def _index_add(x: Tensor, dim: int, index: Tensor, src: Tensor, wrap: bool) -> Tensor:
    extra = {"wrap": True} if wrap else {}
    storage = _dispatch(
        "index_add", x, x._storage.index_add, _lift(x._layout), dim, index._storage,
        _lift(index._layout), src._storage, _lift(src._layout), **extra,
    )  # fmt: skip
    out = new(storage, x.shape, x.dtype, x.device)

    def backward(g: Tensor):
        gsrc = _index_select(g, dim, index, wrap, "index_add") if src.requires_grad else None
        return g, gsrc

    return record(out, "index_add", (x, src), backward, saved=(index,))


def _vector_index(name: str, index, x: Tensor) -> Tensor:
    index = _index_arg(name, index, x)
    if index.ndim > 1:
        raise ShapeError(f"{name}: index must be 0-d or 1-d, found {describe(index)}")
    return index


@op
def index_select(x: Tensor, dim: int, index) -> Tensor:
    """The entries ``index`` (1-d) along ``dim``: ``out.shape[dim] == len(index)``.

    grad: ``zeros_like(x).index_add(dim, index, g)`` (repeated indices accumulate).
    """
    index = _vector_index("index_select", index, x)
    return _index_select(x, dim, index, False, "index_select")


@op
def index_add(x: Tensor, dim: int, index, source: Tensor, alpha: float = 1) -> Tensor:
    """A copy of ``x`` with ``out[..., index[j], ...] += alpha * source[..., j, ...]``.

    ``source`` has x's shape with ``len(index)`` at ``dim``; repeated indices accumulate.
    grads: x gets ``g``, source gets ``alpha * g.index_select(dim, index)``.
    """
    index = _vector_index("index_add", index, x)
    dim = norm_dim(dim, x.ndim, "index_add")
    source = _source_arg("index_add", source, x)
    want = _select_shape(x, dim, index.numel)
    if source.shape != want and not (source.numel == index.numel == 1 and x.ndim <= 1):
        raise ShapeError(
            f"index_add: source {describe(source)} must have shape {want} (the input "
            f"{describe(x)} with {index.numel} entries in dim {dim})"
        )
    if alpha != 1:
        source = source * alpha
    return _index_add(x, dim, index, source.reshape(want), False)


@op
def embedding(weight: Tensor, ids) -> Tensor:
    """Rows of ``weight`` (V, D) picked by integer ``ids`` of any shape: out (*ids.shape, D).

    ``out[..., :] = weight[ids[...], :]``. grad: each row of ``weight`` receives the sum of
    ``g`` over the positions that picked it (an index_add).
    """
    ids = _index_arg("embedding", ids, weight)
    if weight.ndim != 2:
        raise ShapeError(f"embedding: weight must be 2-d (V, D), found {describe(weight)}")
    flat = ids if ids.ndim == 1 else ids.reshape(-1)
    out = _index_select(weight, 0, flat, False, "embedding")
    return out if ids.ndim == 1 else out.reshape(ids.shape + (weight.shape[1],))


@op
def nonzero(x: Tensor, *, as_tuple: bool = False):
    """``(n, ndim)`` i64 coordinates of the non-zero (true) elements, in row-major order;
    ``as_tuple``: one ``(n,)`` tensor per dim instead (``x[x.nonzero(as_tuple=True)]``)."""
    storage, count = x._storage.nonzero(x._layout)
    out = new(storage, (count, x.ndim), dt.i64, x.device)
    if not as_tuple:
        return out
    if x.ndim == 0:  # PyTorch treats a 0-d tensor as 1-d here
        return nonzero(x.reshape((1,)), as_tuple=True)
    return tuple(out.narrow(1, d, 1).reshape((count,)) for d in range(x.ndim))


@op
def masked_select(x: Tensor, mask: Tensor) -> Tensor:
    """1-d tensor of the elements of ``x`` where ``mask`` is true (both broadcast)."""
    if not isinstance(mask, Tensor) or mask.dtype is not dt.bool_:
        found = describe(mask) if isinstance(mask, Tensor) else type(mask).__name__
        raise DTypeError(f"masked_select: mask must be a bool tensor, found {found}")
    shape = broadcast_shapes("masked_select", x.shape, mask.shape)
    return getitem(x.broadcast_to(shape), mask.broadcast_to(shape))


# -- x[key] ------------------------------------------------------------------------------------
# A parsed key is a list of (kind, value) pairs.
_NONE, _ELLIPSIS, _INT, _SLICE, _BOOL, _INDEX, _MASK = range(7)


def _parse_key(x: Tensor, key, name: str = "getitem") -> tuple[list, bool]:
    """(items with the ellipsis expanded, whether any item is advanced)."""
    items = key if isinstance(key, tuple) else (key,)
    parsed = []
    used = 0
    ellipsis_at = None
    advanced = False
    for k in items:
        if k is None:
            parsed.append((_NONE, None))
        elif k is Ellipsis:
            if ellipsis_at is not None:
                raise IndexingError(f"{name}: an index can only have a single ellipsis ('...')")
            ellipsis_at = len(parsed)
            parsed.append((_ELLIPSIS, 0))
        elif isinstance(k, slice):
            parsed.append((_SLICE, k))
            used += 1
        elif isinstance(k, bool | np.bool_):
            parsed.append((_BOOL, bool(k)))
            advanced |= not k
        elif isinstance(k, Tensor | list | np.ndarray):
            t = k if isinstance(k, Tensor) else _host_index(name, k, x.device)
            same_device(name, x, t)
            if t.dtype is dt.bool_ or t.dtype is dt.u8:
                if t.dtype is dt.u8:  # PyTorch's legacy byte masks
                    t = t != 0
                if t.ndim == 0:
                    parsed.append((_BOOL, bool(t.item())))
                    advanced |= not parsed[-1][1]
                    continue
                parsed.append((_MASK, t))
                used += t.ndim
            elif t.dtype in _INDEX_DTYPES:
                parsed.append((_INDEX, t))
                used += 1
            else:
                raise IndexingError(
                    f"{name}: index tensors must be {_INDEX_NAMES} or bool, found {describe(t)}"
                )
            advanced = True
        else:
            try:
                i = operator.index(k)
            except TypeError:
                raise IndexingError(
                    f"{name}: cannot index with {type(k).__name__}; use ints, slices, None, "
                    "..., integer or bool tensors"
                ) from None
            parsed.append((_INT, i))
            used += 1
    if used > x.ndim:
        raise IndexingError(
            f"{name}: too many indices for {describe(x)}: the key indexes {used} dims"
        )
    if ellipsis_at is not None:
        parsed[ellipsis_at] = (_ELLIPSIS, x.ndim - used)
    return parsed, advanced


def _apply_basic(layout: Layout, parsed: list, name: str = "getitem") -> tuple[Layout, list]:
    """The view layout of the basic items, and the advanced ones as
    (dim in that view, dim of the indexed tensor, kind, value)."""
    d = 0  # dim of the view being built
    xd = 0  # dim of the indexed tensor
    advanced = []
    for kind, v in parsed:
        if kind == _SLICE:
            size = layout.shape[d]
            step = 1 if v.step is None else operator.index(v.step)
            if step <= 0:
                raise IndexingError(
                    f"{name}: slice step must be positive, found {step} (PyTorch has no "
                    "negative steps; use flip(dims) to reverse)"
                )
            if v.start is not None or v.stop is not None or step != 1:
                start, stop, step = v.indices(size)
                length = max(0, (stop - start + step - 1) // step)
                layout = layout.strided_slice(d, start if length else 0, length, step)
            d += 1
            xd += 1
        elif kind == _INT:
            size = layout.shape[d]
            i = v + size if v < 0 else v
            if not 0 <= i < size:
                raise IndexingError(
                    f"{name}: index {v} is out of range for dim {xd} of size {size}"
                )
            layout = layout.select(d, i)
            xd += 1
        elif kind == _NONE or kind == _BOOL:
            layout = layout.unsqueeze(d)
            if kind == _BOOL and not v:
                advanced.append((d, xd, _INDEX, None))
            d += 1
        elif kind == _ELLIPSIS:
            d += v
            xd += v
        elif kind == _INDEX:
            advanced.append((d, xd, kind, v))
            d += 1
            xd += 1
        else:  # _MASK
            shape = layout.shape[d : d + v.ndim]
            if v.shape != shape:
                raise IndexingError(
                    f"{name}: mask of shape {v.shape} does not match the indexed dims "
                    f"{xd}..{xd + v.ndim - 1} of shape {shape}"
                )
            advanced.append((d, xd, kind, v))
            d += v.ndim
            xd += v.ndim
    return layout, advanced


def _basic_view(x: Tensor, layout: Layout, parsed: list) -> Tensor:
    """``x`` seen through ``layout`` (zero-copy); the gradient is written back into zeros."""
    out = make(x._storage, layout, x.dtype, x.device)
    out._base = x if x._base is None else x._base
    if not (x.requires_grad and GRAD_ENABLED.get()):
        return out

    def backward(g: Tensor):
        from .creation import zeros

        gx = zeros(x.shape, dtype=g.dtype, device=g.device)
        where, _ = _apply_basic(Layout.contiguous(x.shape), parsed)
        g._storage.copy_strided(g._layout, gx._storage, where)
        return (gx,)

    return record(out, "getitem", (x,), backward)


def _checked(t: Tensor, size: int, dim: int, name: str) -> Tensor:
    """An index tensor in i64 with negatives wrapped, after checking it fits ``size``."""
    from .elementwise import where

    t = cast(t, dt.i64)
    if t.numel:
        lo, hi = int(t.min().item()), int(t.max().item())
        if lo < -size or hi >= size:
            raise IndexingError(
                f"{name}: index out of range: found indices in [{lo}, {hi}] for dim {dim} "
                f"of size {size}"
            )
        if lo < 0:
            t = where(t < 0, t + size, t)
    return t


def _empty_index(device) -> Tensor:
    from .creation import zeros

    return zeros((0,), dtype=dt.i64, device=device)


def _advanced(y: Tensor, advanced: list) -> Tensor:
    """``y[advanced]``: one index or mask selects along its dims in place; several index
    tensors broadcast together and their result dims go where the first one was when they
    are adjacent, else in front (PyTorch/numpy rule)."""
    if len(advanced) == 1:
        d, xd, kind, t = advanced[0]
        if kind == _INDEX:
            t = _empty_index(y.device) if t is None else t
            if d != xd:  # ints or None before it: check here to name x's dim in errors
                t = _checked(t, y.shape[d], xd, "getitem")
            out = _index_select(y, d, t if t.ndim <= 1 else t.reshape(-1), True, "getitem")
            if t.ndim == 1:
                return out
            return out.reshape(y.shape[:d] + t.shape + y.shape[d + 1 :])
        k = t.ndim
        flat_mask = t if k == 1 else t.reshape(-1)
        picked = nonzero(flat_mask).reshape(-1)
        rows = y if k == 1 else y.reshape(y.shape[:d] + (flat_mask.numel,) + y.shape[d + k :])
        return _index_select(rows, d, picked, False, "getitem")

    columns = _columns(y.shape, advanced, y.device, "getitem")
    dims = [d for d, _ in columns]
    shape = broadcast_shapes("getitem", *(t.shape for _, t in columns))
    rest = [d for d in range(y.ndim) if d not in dims]
    rest_shape = tuple(y.shape[d] for d in rest)
    sizes = [y.shape[d] for d in dims]
    # Flatten the indexed dims into one and combine the indices into positions along it.
    order = dims + rest
    rows = y if order == list(range(y.ndim)) else y.permute(order)
    rows = rows.reshape((math.prod(sizes),) + rest_shape)
    flat = None
    stride = 1
    for (_, t), size in zip(reversed(columns), reversed(sizes), strict=True):
        term = t if stride == 1 else t * stride
        flat = term if flat is None else flat + term
        stride *= size
    flat = flat.broadcast_to(shape).reshape(-1)
    out = _index_select(rows, 0, flat, False, "getitem").reshape(shape + rest_shape)
    return _place(out, dims, len(shape))


def _columns(shape: tuple[int, ...], advanced: list, device, name: str) -> list:
    """(dim, in-range i64 index tensor) for every dim the advanced items index (a mask of k
    dims gives k columns of its true places' coordinates)."""
    columns = []
    for d, xd, kind, t in advanced:
        if kind == _MASK:
            coords = nonzero(t)
            columns += [(d + j, coords[:, j]) for j in range(t.ndim)]
        else:
            t = _empty_index(device) if t is None else t
            columns.append((d, _checked(t, shape[d], xd, name)))
    return columns


def _place(out: Tensor, dims: list[int], nb: int) -> Tensor:
    """Move the ``nb`` leading (broadcast index) dims of ``out`` to ``dims[0]`` when the
    indexed dims are adjacent; else they stay in front."""
    first = dims[0]
    if first and dims == list(range(first, first + len(dims))):
        order = list(range(nb, nb + first)) + list(range(nb)) + list(range(nb + first, out.ndim))
        out = out.permute(order)
    return out


def _grid(shape: tuple[int, ...], strides: tuple[int, ...], offset: int, device) -> Tensor:
    """i64 tensor of ``shape`` holding ``offset + sum_k i_k * strides[k]``."""
    from .creation import arange, full, zeros

    if math.prod(shape) == 0:
        return zeros(shape, dtype=dt.i64, device=device)
    pos = full((), fill_value=offset, dtype=dt.i64, device=device)
    n = len(shape)
    for k, (size, stride) in enumerate(zip(shape, strides, strict=True)):
        if size != 1:
            term = arange(0, size * stride, stride, device=device)
            pos = pos + term.reshape((size,) + (1,) * (n - k - 1))
    return pos.broadcast_to(shape)


def _positions(x: Tensor, parsed: list) -> Tensor:
    """Where the elements of ``x[key]`` sit in a contiguous ``x``: i64, shaped as ``x[key]``.

    Computed from the key alone (per-dim ranges, index values), so it costs the size of
    ``x[key]``, not of ``x``."""
    layout, adv = _apply_basic(Layout.contiguous(x.shape), parsed, "setitem")
    shape, strides = layout.shape, layout.strides
    if not adv:
        return _grid(shape, strides, layout.offset, x.device)
    columns = _columns(shape, adv, x.device, "setitem")
    dims = [d for d, _ in columns]
    bshape = broadcast_shapes("setitem", *(t.shape for _, t in columns))
    rest = [d for d in range(len(shape)) if d not in dims]
    flat = None
    for d, t in columns:
        term = t * strides[d]
        flat = term if flat is None else flat + term
    flat = flat.broadcast_to(bshape)
    rest_pos = _grid(
        tuple(shape[d] for d in rest), tuple(strides[d] for d in rest), layout.offset, x.device
    )
    pos = flat.reshape(bshape + (1,) * len(rest)) + rest_pos
    return _place(pos, dims, len(bshape))


def _getitem(x: Tensor, parsed: list, advanced: bool) -> Tensor:
    layout, adv = _apply_basic(x._layout, parsed)
    y = _basic_view(x, layout, parsed if not adv else _without_advanced(parsed))
    return _advanced(y, adv) if adv else y


def _without_advanced(parsed: list) -> list:
    """The basic part of a key (advanced items become full slices over their dims)."""
    out = []
    for kind, v in parsed:
        if kind == _INDEX:
            out.append((_SLICE, slice(None)))
        elif kind == _MASK:
            out.append((_ELLIPSIS, v.ndim))
        elif kind == _BOOL:
            out.append((_NONE, None))
        else:
            out.append((kind, v))
    return out


@op
def getitem(x: Tensor, key) -> Tensor:
    """``x[key]`` as in PyTorch.

    Ints, slices (step > 0), ``None`` and ``...`` give a view sharing x's storage. Integer
    index tensors / lists / numpy arrays and bool masks give a copy: one index selects along
    its dim in place; several broadcast together, their result dims placed where the first
    was when adjacent, else in front. ``x[mask]`` is the 1-d selection of true places.
    Negative indices count from the end.
    """
    if type(key) is int and x.ndim:  # the hot path (iteration, x[i])
        size = x.shape[0]
        i = key + size if key < 0 else key
        if 0 <= i < size:
            return _basic_view(x, x._layout.select(0, i), [(_INT, key)])
    parsed, advanced = _parse_key(x, key)
    return _getitem(x, parsed, advanced)


def _value_for(name: str, value, x: Tensor, shape: tuple[int, ...]):
    """``value`` as a tensor of x's dtype that broadcasts to ``shape`` (or a scalar)."""
    if isinstance(value, bool | int | float | np.number):
        return value
    if not isinstance(value, Tensor):
        from .creation import tensor

        value = tensor(value, dtype=x.dtype, device=x.device)
    same_device(name, x, value)
    value = cast(value, x.dtype)
    while value.ndim > len(shape) and value.shape[0] == 1:  # PyTorch drops leading 1s
        value = value.reshape(value.shape[1:])
    if value.ndim > len(shape) or broadcast_shapes(name, value.shape, shape) != shape:
        raise ShapeError(f"{name}: value {describe(value)} cannot be broadcast to shape {shape}")
    return value


def _sole_mask(parsed: list) -> Tensor | None:
    """The mask of a key that is one bool mask over the leading dims (then only ``...`` or
    full slices), else None."""
    kind, mask = parsed[0]
    if kind != _MASK:
        return None
    for kind, v in parsed[1:]:
        if not (kind == _ELLIPSIS or (kind == _SLICE and v == slice(None))):
            return None
    return mask


@op
def setitem(x: Tensor, key, value) -> None:
    """``x[key] = value`` in place (value: a scalar or a tensor broadcast to ``x[key]``).

    Basic keys copy into the view; advanced keys (and anything autograd must see) compute
    the result out of place with ``scatter`` and write it back, bumping the version. With
    repeated indices the last write wins. As in PyTorch, a leaf that requires grad (or a
    view of a tensor in a graph) cannot be written while grad mode is on.
    """
    from .inplace import _alias, _check_writable, _write, copy_

    parsed, advanced = _parse_key(x, key, "setitem")
    value_grad = isinstance(value, Tensor) and value.requires_grad
    if not advanced and not ((x.requires_grad or value_grad) and GRAD_ENABLED.get()):
        layout, _ = _apply_basic(x._layout, parsed, "setitem")
        value = _value_for("setitem", value, x, layout.shape)
        if not isinstance(value, Tensor):
            _check_writable("setitem", x, False)
            x._storage.const_set(layout, value)
            x._storage.version += 1
            return
        target = make(x._storage, layout, x.dtype, x.device)
        target._base = x if x._base is None else x._base
        copy_(target, value)
        return
    mask = _sole_mask(parsed)
    if mask is not None and (not isinstance(value, Tensor) or value.numel == 1):
        # x[mask] = scalar (x[x < 0] = 0): one elementwise where, gradients included.
        from .elementwise import where

        if isinstance(value, Tensor):
            value = cast(value, x.dtype).reshape(())
        mask = mask.reshape(mask.shape + (1,) * (x.ndim - mask.ndim))
        _write("setitem", x, where(mask, value, _alias(x)))
        return
    positions = _positions(x, parsed)
    value = _value_for("setitem", value, x, positions.shape)
    if isinstance(value, Tensor):
        value = value.broadcast_to(positions.shape).reshape(-1)
    flat = scatter(_alias(x).reshape(-1), 0, positions.reshape(-1), value)
    _write("setitem", x, flat.reshape(x.shape))


Tensor.__getitem__ = getitem
Tensor.__setitem__ = setitem
