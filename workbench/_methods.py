"""Bind the op functions onto ``Tensor`` as methods and Python operators.

Every ``@op`` function of the op families whose first argument is a tensor becomes a method of
the same name, so ``x.exp()`` is ``wb.exp(x)`` with no extra call in between. PyTorch's dtype
conversions (``x.float()``, ``x.long()``, ``x.type(wb.i32)``, ...) are ``x.to(dtype)``, and
``x.new_zeros(...)`` and its kin make tensors of x's dtype and device.
"""

from __future__ import annotations

from typing import Any

from . import dtype as dt
from .dtype import DType
from .ops import FAMILIES, creation
from .ops import elementwise as ew
from .ops import matmul as mm
from .tensor import Tensor

# Functions that take something other than a tensor first.
_NOT_METHODS = {"cat", "stack", "where", "einsum"}

# PyTorch's conversion methods: x.float() is x.to(torch.float32), x.long() x.to(torch.int64)...
_CONVERSIONS = {
    "float": dt.f32, "double": dt.f64, "half": dt.f16, "bfloat16": dt.bf16, "int": dt.i32,
    "long": dt.i64, "short": dt.i16, "char": dt.i8, "bool": dt.bool_, "byte": dt.u8,
}  # fmt: skip


def _conversion(name: str, dtype: DType):
    def convert(self: Tensor) -> Tensor:
        return self.to(dtype)

    convert.__name__ = convert.__qualname__ = name
    convert.__doc__ = f"``self.to({dtype.name})``: a copy in {dtype.name}, ``self`` if already."
    return convert


def _type(self: Tensor, dtype: DType | str) -> Tensor:
    """``self.to(dtype)`` (PyTorch's ``x.type(torch.int64)``)."""
    return self.to(dt.dtype(dtype))


def _T(self: Tensor) -> Tensor:
    """All dims reversed."""
    return self.permute(tuple(reversed(range(self.ndim))))


def _mT(self: Tensor) -> Tensor:
    """The last two dims swapped (a batch of transposed matrices)."""
    return self.transpose(-2, -1)


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
        def reflected(a: Tensor, b: Any) -> Tensor:
            return fn(b, a)

        return reflected

    operators = {
        "__add__": ew.add, "__sub__": ew.sub, "__mul__": ew.mul, "__truediv__": ew.div,
        "__floordiv__": ew.floor_div, "__mod__": ew.remainder, "__pow__": ew.pow,
        "__matmul__": mm.matmul, "__radd__": swap(ew.add), "__rsub__": swap(ew.sub),
        "__rmul__": swap(ew.mul), "__rtruediv__": swap(ew.div),
        "__rfloordiv__": swap(ew.floor_div), "__rmod__": swap(ew.remainder),
        "__rpow__": swap(ew.pow), "__rmatmul__": swap(mm.matmul), "__neg__": ew.neg,
        "__abs__": ew.abs, "__invert__": ew.bitwise_not, "__and__": ew.bitwise_and,
        "__or__": ew.bitwise_or, "__xor__": ew.bitwise_xor,
        "__lshift__": ew.bitwise_left_shift, "__rshift__": ew.bitwise_right_shift,
        "__rlshift__": swap(ew.bitwise_left_shift), "__rrshift__": swap(ew.bitwise_right_shift),
        "__eq__": ew.eq, "__ne__": ew.ne,
        "__lt__": ew.lt, "__le__": ew.le, "__gt__": ew.gt, "__ge__": ew.ge,
        "__iadd__": Tensor.add_, "__isub__": Tensor.sub_, "__imul__": Tensor.mul_,
        "__itruediv__": Tensor.div_,
    }  # fmt: skip
    for name, fn in operators.items():
        setattr(Tensor, name, fn)
    # & | ^ commute, so the reflected forms (``True & mask``, ``3 | t``) are the same functions
    # (bitwise on integers, logical on bools).
    Tensor.__rand__, Tensor.__ror__, Tensor.__rxor__ = (
        Tensor.__and__, Tensor.__or__, Tensor.__xor__
    )  # fmt: skip
    for name, dtype in _CONVERSIONS.items():
        setattr(Tensor, name, _conversion(name, dtype))
    Tensor.type = _type
    for name in ("new_full", "new_zeros", "new_ones", "new_empty", "new_tensor"):
        setattr(Tensor, name, getattr(creation, name))
    Tensor.__hash__ = object.__hash__
    Tensor.T = property(_T)
    Tensor.mT = property(_mT)


_bind()
