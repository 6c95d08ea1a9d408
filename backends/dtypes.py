"""The dtype table of the hardware layer: every dtype a storage can hold, by name.

Dtypes cross the backend boundary as names; this maps them to numpy (the CPU's storage and
every backend's host transfers; ``ml_dtypes`` for bfloat16), their size and their kind.
``ml_dtypes`` costs several times numpy's own import, so bf16 joins the tables when it is first
needed: at its first lookup in ``NUMPY_BY_NAME``, or when ``name_of`` meets a bfloat16 array
(which only exists once someone imported ``ml_dtypes``).
"""

from __future__ import annotations

import functools
import sys

import numpy as np

from .lazy import LazyValues, lazy_module

ml_dtypes = lazy_module("ml_dtypes")

ITEMSIZE: dict[str, int] = {
    "bool": 1, "u8": 1, "u32": 4, "i8": 1, "i16": 2, "i32": 4, "i64": 8,
    "f16": 2, "bf16": 2, "f32": 4, "f64": 8,
}  # fmt: skip
FLOAT = ("f16", "bf16", "f32", "f64")
INT = ("u8", "u32", "i8", "i16", "i32", "i64")
NUM = INT + FLOAT
ALL = ("bool",) + NUM
# The half-precision types loaded so far: f16, then bf16 (appended by ``bfloat16()``). A list,
# so that modules which imported it see bf16 arrive.
HALF_TYPES: list[np.dtype] = [np.dtype(np.float16)]


@functools.cache
def bfloat16() -> np.dtype:
    """numpy's bfloat16 dtype (imports ``ml_dtypes`` on the first call), entered in the tables."""
    dtype = np.dtype(ml_dtypes.bfloat16)
    _NAME_BY_NUMPY[dtype] = "bf16"
    if dtype not in HALF_TYPES:  # (two threads may both get here first)
        HALF_TYPES.append(dtype)
    return dtype


NUMPY_BY_NAME: dict[str, np.dtype] = LazyValues(
    {name: np.dtype(code) for name, code in (
        ("bool", np.bool_), ("u8", np.uint8), ("u32", np.uint32), ("i8", np.int8),
        ("i16", np.int16), ("i32", np.int32), ("i64", np.int64), ("f16", np.float16),
        ("f32", np.float32), ("f64", np.float64),
    )},
    lazy={"bf16": bfloat16},
)  # fmt: skip
_NAME_BY_NUMPY = {dtype: name for name, dtype in NUMPY_BY_NAME.items()}


def name_of(dtype: np.dtype) -> str | None:
    """The name of numpy ``dtype`` (None when no storage can hold it)."""
    dtype = np.dtype(dtype)
    name = _NAME_BY_NUMPY.get(dtype)
    if name is None and "ml_dtypes" in sys.modules:  # maybe a bfloat16 we have not seen yet
        bfloat16()
        name = _NAME_BY_NUMPY.get(dtype)
    return name
