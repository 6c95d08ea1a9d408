"""Host (numpy) helpers the MPI and in-process backends share."""

from __future__ import annotations

import numpy as np

from .. import dtype as dt
from ..ops.creation import empty, from_numpy
from ..tensor import Tensor

# Half types have no MPI reduction (and numpy's own is slow): reduce them in f32, which is
# exact for a sum of two and correctly rounded for max/min.
WIDENED = {dt.f16: dt.f32, dt.bf16: dt.f32}


def host_array(x: Tensor) -> np.ndarray:
    """The memory of a contiguous CPU tensor as a flat numpy array (no copy)."""
    return x.numpy().reshape(-1)


def new_like(x: Tensor, shape: tuple[int, ...] | None = None) -> tuple[Tensor, np.ndarray]:
    """A fresh CPU tensor and its flat writable numpy view."""
    out = empty(*(x.shape if shape is None else shape), dtype=x.dtype)
    return out, host_array(out)


def widen(x: Tensor) -> Tensor:
    wide = WIDENED.get(x.dtype)
    return x if wide is None else x.to_dtype(wide)


def narrow_back(y: Tensor, dtype: dt.DType) -> Tensor:
    return y if y.dtype is dtype else y.to_dtype(dtype)


def as_tensor(array: np.ndarray, shape: tuple[int, ...]) -> Tensor:
    return from_numpy(array.reshape(shape))
