"""numpy helpers shared by the CPU storage's op families."""

from __future__ import annotations

import numpy as np

from ..dtypes import HALF_TYPES, NUMPY_BY_NAME  # noqa: F401  (the one dtype table; re-exported)

F16 = HALF_TYPES[0]
F32 = np.dtype(np.float32)


def is_half(dtype: np.dtype) -> bool:
    """f16 or bf16 (by identity first: numpy's dtype ``==`` costs more than the op on small
    arrays; storages only hold native dtypes, which are singletons). ``HALF_TYPES[-1]`` is bf16
    once the tables have loaded it; an array made with ``ml_dtypes`` before that is known by
    its type code (``E``, bfloat16's)."""
    return dtype is F16 or dtype is HALF_TYPES[-1] or dtype.char == "E"


try:  # numpy >= 2 keeps the floating-point error state in a context variable
    from numpy._core.umath import _extobj_contextvar, _make_extobj
except ImportError:  # other numpy versions: the public context manager (slower)

    def quiet(fn, *args, **kwargs):
        """``fn(*args, **kwargs)`` with numpy's floating-point warnings off: inf and NaN
        results are silent, as in PyTorch."""
        with np.errstate(all="ignore"):
            return fn(*args, **kwargs)

else:
    _IGNORE = _make_extobj(all="ignore")
    _set_state, _reset_state = _extobj_contextvar.set, _extobj_contextvar.reset

    def quiet(fn, *args, **kwargs):
        """``fn(*args, **kwargs)`` with numpy's floating-point warnings off: inf and NaN
        results are silent, as in PyTorch. Same as ``np.errstate(all="ignore")`` at a fifth
        of its cost (it builds its state object on every entry)."""
        token = _set_state(_IGNORE)
        try:
            return fn(*args, **kwargs)
        finally:
            _reset_state(token)


def view(array: np.ndarray, layout) -> np.ndarray:
    """The elements of ``array`` (a C-contiguous buffer) that ``layout`` describes, no copy."""
    shape = layout.shape
    offset = layout.offset
    if offset == 0 and layout.is_contiguous:
        if array.shape == shape:
            return array
        if array.size == _numel(shape):
            return array.reshape(shape)
    if _numel(shape) == 0:  # nothing to address: the offset may point past the buffer
        return np.empty(shape, array.dtype)
    itemsize = array.itemsize
    return np.ndarray(
        shape,
        array.dtype,
        array.reshape(-1).view(np.uint8),
        offset * itemsize,
        tuple(s * itemsize for s in layout.strides),
    )


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def upcast(a: np.ndarray) -> np.ndarray:
    """f16/bf16 are computed in f32 (numpy has no fast half-precision kernels)."""
    return a.astype(F32) if is_half(a.dtype) else a


def contiguous(a: np.ndarray, dtype: np.dtype | None = None) -> np.ndarray:
    """A C-contiguous array of ``dtype`` (rounding back from the f32 compute type)."""
    if dtype is not None and a.dtype is not dtype:  # equal dtypes: no copy is made below
        return np.ascontiguousarray(a, dtype=dtype)
    if a.flags.c_contiguous:
        return a
    return np.ascontiguousarray(a)
