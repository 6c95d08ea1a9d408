"""Every op, one function each (validation, dispatch to the storage, gradient).

Families: creation, elementwise, reduce, shape, matmul, indexing, conv, pool, fused,
inplace, transfer. ``workbench._methods`` binds them onto ``Tensor``.
"""

from . import (
    conv,
    creation,
    elementwise,
    fused,
    indexing,
    inplace,
    matmul,
    pool,
    reduce,
    shape,
    transfer,
)

FAMILIES = (elementwise, reduce, shape, matmul, indexing, conv, pool, fused, inplace, transfer)

__all__ = ["FAMILIES", "conv", "creation", "elementwise", "fused", "indexing", "inplace",
           "matmul", "pool", "reduce", "shape", "transfer"]  # fmt: skip
