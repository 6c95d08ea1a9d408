"""The CUDA backend's kernel names: ``gpu/kernels.py``'s tables for device "cuda" (f64
included), as module attributes (``unary_name``, ``FLOAT``, ``all_names`` ...)."""

from __future__ import annotations

from ..gpu.kernels import (  # noqa: F401  (the tables, re-exported)
    ANY_UNARY,
    BOOL_AS_LOGICAL,
    BOOL_UNARY,
    CMP,
    FLOAT_BINARY,
    FLOAT_UNARY,
    INT_BINARY,
    INT_UNARY,
    LOGICAL,
    REDUCE,
    KernelNames,
    reduce_out_dtype,
)

NAMES = KernelNames("cuda")


def __getattr__(name: str):
    """``FLOAT``, ``INT``, ``NUM``, ``ALL``, ``PARAM_FAMILIES`` and the ``*_name`` functions."""
    try:
        return getattr(NAMES, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
