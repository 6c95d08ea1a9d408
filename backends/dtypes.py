"""The dtype table of the hardware layer: every dtype a storage can hold, by name.

Dtypes cross the backend boundary as names; this maps them to numpy (the CPU's storage and
every backend's host transfers; ``ml_dtypes`` for bfloat16), their size and their kind.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

NUMPY_BY_NAME: dict[str, np.dtype] = {
    "bool": np.dtype(np.bool_), "u8": np.dtype(np.uint8), "u32": np.dtype(np.uint32),
    "i16": np.dtype(np.int16), "i32": np.dtype(np.int32), "i64": np.dtype(np.int64),
    "f16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16),
    "f32": np.dtype(np.float32), "f64": np.dtype(np.float64),
}  # fmt: skip
ITEMSIZE: dict[str, int] = {name: dtype.itemsize for name, dtype in NUMPY_BY_NAME.items()}
FLOAT = ("f16", "bf16", "f32", "f64")
INT = ("u8", "u32", "i16", "i32", "i64")
NUM = INT + FLOAT
ALL = ("bool",) + NUM
_NAME_BY_NUMPY = {dtype: name for name, dtype in NUMPY_BY_NAME.items()}


def name_of(dtype: np.dtype) -> str | None:
    """The name of numpy ``dtype`` (None when no storage can hold it)."""
    return _NAME_BY_NUMPY.get(np.dtype(dtype))
