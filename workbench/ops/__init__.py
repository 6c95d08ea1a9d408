"""Every op, one function each (validation, dispatch to the storage, gradient).

Families: creation, elementwise, reduce, shape, matmul, indexing, conv, pool, fused,
inplace, transfer, and compat (PyTorch functions composed from the others).
``workbench._methods`` binds them onto ``Tensor``.
"""

from . import (
    compat,
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

FAMILIES = (elementwise, reduce, shape, matmul, indexing, conv, pool, fused, inplace, transfer,
            compat)  # fmt: skip

__all__ = ["FAMILIES", "compat", "conv", "creation", "elementwise", "fused", "indexing", "inplace",
           "matmul", "pool", "reduce", "shape", "transfer"]  # fmt: skip
