"""Element types and PyTorch-style type promotion.

The set is candle's (u8, u32, i64, f16, bf16, f32, f64) plus i8, i16, i32 and bool.

Promotion (``promote_types``), as in PyTorch:
- categories rank bool < integer < floating; the higher category wins;
- inside a category the wider type wins; f16 with bf16 gives f32;
- signed with unsigned gives the narrowest signed type that holds both (u8 + i8 -> i16,
  u8 + i16 -> i16, u8 + i32 -> i32, u32 + i32 -> i64);
- a Python scalar only changes the result when its category is higher than the tensor's:
  ``int_tensor * 0.5`` is f32 (the default float), ``f16_tensor * 2.0`` stays f16.
"""

from __future__ import annotations

import numpy as np

from .backends.dtypes import NUMPY_BY_NAME, name_of


class DType:
    """An element type. Compare with ``is`` or ``==``; instances are singletons."""

    __slots__ = ("name", "itemsize", "category", "is_signed", "torch_name",
                 "is_floating_point", "is_integer", "is_bool")  # fmt: skip

    def __init__(self, name: str, itemsize: int, category: int, is_signed: bool, torch_name: str):
        self.name = name
        self.itemsize = itemsize
        self.category = category  # 0 bool, 1 integer, 2 floating
        self.is_signed = is_signed
        self.torch_name = torch_name
        # Plain attributes, not properties: ops read them on every call.
        self.is_floating_point = category == 2
        self.is_integer = category == 1
        self.is_bool = category == 0

    @property
    def numpy(self) -> np.dtype:
        """The numpy dtype holding this type on the host (bf16 through ml_dtypes)."""
        return NUMPY_DTYPES[self.name]

    def __repr__(self) -> str:
        return f"wb.{self.name}"

    def __reduce__(self):
        return (dtype, (self.name,))


bool_ = DType("bool", 1, 0, False, "bool")
u8 = DType("u8", 1, 1, False, "uint8")
u32 = DType("u32", 4, 1, False, "uint32")
i8 = DType("i8", 1, 1, True, "int8")
i16 = DType("i16", 2, 1, True, "int16")
i32 = DType("i32", 4, 1, True, "int32")
i64 = DType("i64", 8, 1, True, "int64")
f16 = DType("f16", 2, 2, True, "float16")
bf16 = DType("bf16", 2, 2, True, "bfloat16")
f32 = DType("f32", 4, 2, True, "float32")
f64 = DType("f64", 8, 2, True, "float64")

ALL_DTYPES: tuple[DType, ...] = (bool_, u8, u32, i8, i16, i32, i64, f16, bf16, f32, f64)
FLOAT_DTYPES: tuple[DType, ...] = (f16, bf16, f32, f64)

_BY_NAME = {d.name: d for d in ALL_DTYPES}
_ALIASES = {
    "bool_": bool_, "uint8": u8, "uint32": u32, "int8": i8, "int16": i16, "int32": i32,
    "int64": i64, "short": i16, "float16": f16, "half": f16, "bfloat16": bf16, "float32": f32,
    "float": f32, "float64": f64, "double": f64, "long": i64, "int": i32,
}  # fmt: skip


# The hardware layer's table, by the same names (bf16 enters it, importing ml_dtypes, on its
# first lookup: ``NUMPY_DTYPES["bf16"]``).
NUMPY_DTYPES = NUMPY_BY_NAME
# numpy types with no exact workbench twin, mapped to the type that holds their values.
_FROM_NUMPY_WIDENED = {np.dtype(np.uint16): i32, np.dtype(np.uint64): i64}


def dtype(spec: DType | str | np.dtype | type) -> DType:
    """Turn a DType, a name ("f32", "float32", "bfloat16"), a numpy dtype or a torch dtype
    into a workbench DType."""
    if isinstance(spec, DType):
        return spec
    if isinstance(spec, str):
        found = _BY_NAME.get(spec) or _ALIASES.get(spec)
        if found is None:
            from .errors import DTypeError

            raise DTypeError(f"unknown dtype {spec!r}; expected one of {sorted(_BY_NAME)}")
        return found
    torch_name = getattr(spec, "is_floating_point", None) is not None and str(spec)
    if torch_name and torch_name.startswith("torch."):
        return dtype(torch_name[len("torch.") :])
    return from_numpy_dtype(np.dtype(spec))


def from_numpy_dtype(np_dtype: np.dtype) -> DType:
    found = _BY_NAME.get(name_of(np_dtype))
    if found is None:
        from .errors import DTypeError

        raise DTypeError(
            f"numpy dtype {np_dtype} has no workbench equivalent; "
            f"supported: {', '.join(str(d.numpy) for d in ALL_DTYPES)}"
        )
    return found


def widened_from_numpy(np_dtype: np.dtype) -> DType | None:
    """The workbench type a numpy type without an exact twin is converted to, or None."""
    return _BY_NAME.get(name_of(np_dtype)) or _FROM_NUMPY_WIDENED.get(np_dtype)


def promote_types(a: DType, b: DType) -> DType:
    """The type both operands are computed in (see module docstring)."""
    if a is b:
        return a
    if a.category != b.category:
        return a if a.category > b.category else b
    if a.category == 2:
        if a.itemsize == b.itemsize:  # f16 with bf16
            return f32
        return a if a.itemsize > b.itemsize else b
    if a.category == 0:
        return a
    if a.is_signed == b.is_signed:
        return a if a.itemsize >= b.itemsize else b
    signed, unsigned = (a, b) if a.is_signed else (b, a)
    if signed.itemsize > unsigned.itemsize:
        return signed
    return {1: i16, 4: i64}[unsigned.itemsize]


_CATEGORY_OF_TYPE = {float: 2, int: 1, bool: 0}


def scalar_category(value: object) -> int:
    """0 for bools, 1 for integers, 2 for floats (Python or numpy scalars)."""
    category = _CATEGORY_OF_TYPE.get(type(value))  # the common case, without isinstance chains
    if category is not None:
        return category
    if isinstance(value, bool | np.bool_):
        return 0
    if isinstance(value, int | np.integer):
        return 1
    if isinstance(value, float | np.floating):
        return 2
    from .errors import DTypeError

    raise DTypeError(f"expected a bool, int or float scalar, found {type(value).__name__}")


DEFAULT_FOR_CATEGORY = {0: bool_, 1: i64, 2: f32}


def result_type_with_scalar(tensor_dtype: DType, value: object) -> DType:
    """The result type of ``tensor op scalar`` (a scalar never widens within a category)."""
    category = scalar_category(value)
    if category > tensor_dtype.category:
        return DEFAULT_FOR_CATEGORY[category]
    return tensor_dtype
