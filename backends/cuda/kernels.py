"""Names of the kernels in ``kernels/cuda/*.cu`` and which dtypes each family covers.

The elementwise and reduction op lists come from ``backends/optable.py``, which also generates
the X-macro lists the ``.cu`` files instantiate (``kernels/gpu/optable.h``); ``tests/cuda``
checks that every name produced here is an entry point of the compiled PTX. A request outside
the tables raises ``UnsupportedOnDevice`` naming the op and dtype (never a silent fallback).
"""

from __future__ import annotations

from .. import optable
from ..errors import UnsupportedOnDevice

FLOAT = ("f16", "bf16", "f32", "f64")
INT = ("u8", "u32", "i16", "i32", "i64")
NUM = INT + FLOAT
ALL = ("bool",) + NUM

FLOAT_UNARY = optable.names("unary", dtype=optable.FLOAT, gpu_any=None)
INT_UNARY = optable.names("unary", dtype=optable.INT, gpu_any=None)
BOOL_UNARY = frozenset(optable.names("unary", result=optable.BOOL))
ANY_UNARY = optable.names("unary", dtype=optable.BOOL)  # one kernel for every dtype
FLOAT_BINARY = optable.names("binary", dtype=optable.FLOAT, gpu_any=None)
INT_BINARY = optable.names("binary", dtype=optable.INT, gpu_any=None)
LOGICAL = frozenset(optable.names("binary", result=optable.BOOL))
# bool arithmetic is logic (numpy and PyTorch): True + True is True, True * False is False
BOOL_AS_LOGICAL = {"add": "logical_or", "mul": "logical_and", "maximum": "logical_or",
                   "minimum": "logical_and"}  # fmt: skip
CMP = optable.names("cmp")
PARAM_FAMILIES = {"affine": NUM, "clamp": NUM, "powf": FLOAT, "elu": FLOAT}
REDUCE = optable.names("reduce")


def _unsupported(op: str, dtype: str):
    return UnsupportedOnDevice(f"op {op} is not implemented on cuda for dtype {dtype}")


def unary_name(op: str, dtype: str) -> str:
    if op in ANY_UNARY and dtype in ALL:
        return f"unary_{op}_{dtype}"
    if (dtype in FLOAT and op in FLOAT_UNARY) or (dtype in INT and op in INT_UNARY):
        return f"unary_{op}_{dtype}"
    raise _unsupported(op, dtype)


def binary_name(op: str, dtype: str, prefix: str = "binary") -> str:
    if dtype == "bool" and op in BOOL_AS_LOGICAL:
        op = BOOL_AS_LOGICAL[op]
    if op in LOGICAL and dtype in ALL:
        return f"{prefix}_{op}_{dtype}"
    if (dtype in FLOAT and op in FLOAT_BINARY) or (dtype in INT and op in INT_BINARY):
        return f"{prefix}_{op}_{dtype}"
    raise _unsupported(op, dtype)


def scalar_name(op: str, dtype: str) -> str:
    return binary_name(op, dtype, "bscalar")


def cmp_name(op: str, dtype: str) -> str:
    if op in CMP and dtype in ALL:
        return f"cmp_{op}_{dtype}"
    raise _unsupported(op, dtype)


def cmp_scalar_name(op: str, dtype: str) -> str:
    return "cmps" + cmp_name(op, dtype)[3:]


def param_name(family: str, dtype: str) -> str:
    if dtype in PARAM_FAMILIES[family]:
        return f"{family}_{dtype}"
    raise _unsupported(family, dtype)


def where_name(dtype: str) -> str:
    if dtype in ALL:
        return f"where_{dtype}"
    raise _unsupported("where", dtype)


def cast_name(src: str, dst: str) -> str:
    if src in ALL and dst in ALL:
        return f"cast_{src}_{dst}"
    raise _unsupported(f"cast to {dst}", src)


def copy_name(itemsize: int) -> str:
    return f"copy_b{itemsize}"


def fill_name(itemsize: int) -> str:
    return f"fill_b{itemsize}"


def reduce_name(op: str, dtype: str) -> str:
    if op in REDUCE and dtype in ALL:
        return f"reduce_{op}_{dtype}"
    raise _unsupported(op, dtype)


reduce_out_dtype = optable.reduce_out_dtype


def cumsum_name(dtype: str) -> str:
    if dtype in ALL:
        return f"cumsum_{dtype}"
    raise _unsupported("cumsum", dtype)


def fused_name(family: str, dtype: str) -> str:
    """``softmax_<dtype>`` (also log_softmax), ``norm_<dtype>`` (layer/rms), ``rope_<dtype>``."""
    if dtype in FLOAT:
        return f"{family}_{dtype}"
    raise _unsupported(family, dtype)


def compute_dtype(dtype: str) -> str:
    """The dtype statistics are kept in: f64 for f64, f32 otherwise."""
    return "f64" if dtype == "f64" else "f32"


def pad_name(itemsize: int) -> str:
    """``pad_b<itemsize>``: padding moves elements, so one kernel per element size."""
    return f"pad_b{itemsize}"


def pad_backward_name(dtype: str) -> str:
    if dtype in FLOAT:
        return f"pad_backward_{dtype}"
    raise _unsupported("pad_backward", dtype)


def group_norm_name(dtype: str) -> str:
    if dtype in FLOAT:
        return f"group_norm_{dtype}"
    raise _unsupported("group_norm", dtype)


def sort_name(dtype: str) -> str:
    if dtype in ALL:
        return f"sort_{dtype}"
    raise _unsupported("sort", dtype)


def all_names() -> dict[str, list[str]]:
    """Every kernel name the storage can launch, by source file (for the coverage test)."""
    ew: list[str] = []
    for dtype in ALL:
        for op in (*FLOAT_UNARY, *INT_UNARY, *ANY_UNARY):
            for fn in (unary_name,):
                try:
                    ew.append(fn(op, dtype))
                except UnsupportedOnDevice:
                    pass
        for op in (*FLOAT_BINARY, *INT_BINARY, *LOGICAL):
            for fn in (binary_name, scalar_name):
                try:
                    ew.append(fn(op, dtype))
                except UnsupportedOnDevice:
                    pass
        ew += [cmp_name(op, dtype) for op in CMP] + [cmp_scalar_name(op, dtype) for op in CMP]
        ew += [param_name(f, dtype) for f, ok in PARAM_FAMILIES.items() if dtype in ok]
        ew += [where_name(dtype)] + [cast_name(dtype, other) for other in ALL]
    ew += [f(size) for size in (1, 2, 4, 8) for f in (copy_name, fill_name)]
    red = [reduce_name(op, dtype) for op in REDUCE for dtype in ALL]
    red += [cumsum_name(dtype) for dtype in ALL] + [sort_name(dtype) for dtype in ALL]
    red += ["sort_long_init"] + [f"sort_long_{k}_{d}" for k in ("step", "gather") for d in ALL]
    fused = [fused_name(f, d) for f in ("softmax", "norm", "rope") for d in FLOAT]
    atomic = ("f16", "bf16", "f32", "f64", "i32", "i64")
    indexing = [f"{k}_{d}" for k in ("index_select", "gather", "scatter") for d in ALL]
    indexing += [f"{k}_{d}" for k in ("scatter_add", "index_add") for d in atomic]
    pool = [f"{k}{b}_{d}" for k in ("max_pool2d", "avg_pool2d", "adaptive_avg_pool2d")
            for b in ("", "_backward") for d in FLOAT]  # fmt: skip
    return {
        "elementwise": sorted(set(ew)), "reduce": red, "fused": fused, "indexing": indexing,
        "conv": [f"{k}_{d}" for k in ("im2col", "col2im") for d in FLOAT], "pool": pool,
        "matmul": [f"matmul_int_{d}" for d in ("u8", "u32", "i16", "i32", "i64")],
        "upsample": [f"upsample_{k}2d{b}_{d}" for k in ("nearest", "bilinear")
                     for b in ("", "_backward") for d in FLOAT],
        "quantized": [f"dequantize_{q}_{d}" for q in QTYPES for d in ("f32", "f16", "bf16")]
        + [f"qmatvec_{q}_f32" for q in ("q4_0", "q8_0")],
        "pad": [pad_name(size) for size in (1, 2, 4, 8)] + [pad_backward_name(d) for d in FLOAT],
        "norm": [group_norm_name(d) for d in FLOAT],
    }  # fmt: skip


QTYPES = ("q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q4_k", "q6_k")
