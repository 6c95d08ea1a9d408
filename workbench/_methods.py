"""Bind the op functions onto ``Tensor`` as methods and Python operators.

Every ``@op`` function of the op families whose first argument is a tensor becomes a method of
the same name, so ``x.exp()`` is ``wb.exp(x)`` with no extra call in between.
"""

from __future__ import annotations

from .ops import FAMILIES
from .ops import elementwise as ew
from .ops import matmul as mm
from .tensor import Tensor

# Functions that take something other than a tensor first.
_NOT_METHODS = {"cat", "stack", "where"}


def _bind() -> None:
    for family in FAMILIES:
        for name, fn in vars(family).items():
            if (
                getattr(fn, "op_name", None)
                and not name.startswith("_")
                and name not in _NOT_METHODS
            ):
                setattr(Tensor, name, fn)

    def swap(fn):
        return lambda a, b: fn(b, a)

    operators = {
        "__add__": ew.add, "__sub__": ew.sub, "__mul__": ew.mul, "__truediv__": ew.div,
        "__floordiv__": ew.floor_div, "__mod__": ew.remainder, "__pow__": ew.pow,
        "__matmul__": mm.matmul, "__radd__": swap(ew.add), "__rsub__": swap(ew.sub),
        "__rmul__": swap(ew.mul), "__rtruediv__": swap(ew.div),
        "__rfloordiv__": swap(ew.floor_div), "__rmod__": swap(ew.remainder),
        "__rpow__": swap(ew.pow), "__rmatmul__": swap(mm.matmul), "__neg__": ew.neg,
        "__abs__": ew.abs, "__invert__": ew.logical_not, "__and__": ew.logical_and,
        "__or__": ew.logical_or, "__xor__": ew.logical_xor, "__eq__": ew.eq, "__ne__": ew.ne,
        "__lt__": ew.lt, "__le__": ew.le, "__gt__": ew.gt, "__ge__": ew.ge,
        "__iadd__": Tensor.add_, "__isub__": Tensor.sub_, "__imul__": Tensor.mul_,
        "__itruediv__": Tensor.div_,
    }  # fmt: skip
    for name, fn in operators.items():
        setattr(Tensor, name, fn)
    Tensor.__hash__ = object.__hash__
    Tensor.T = property(lambda self: self.permute(tuple(reversed(range(self.ndim)))))
    Tensor.mT = property(lambda self: self.transpose(-2, -1))


_bind()
