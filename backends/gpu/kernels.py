"""Names of the kernels in ``kernels/gpu`` (``kernels/cuda/*.cu``, ``kernels/metal/*.metal``)
and which dtypes each family covers, per device.

The elementwise and reduction op lists come from ``backends/optable.py``, which also generates
the X-macro lists the kernels instantiate (``kernels/gpu/optable.h``); ``tests/cuda`` checks
that every name produced here is an entry point of the compiled PTX. A request outside the
tables raises ``UnsupportedOnDevice`` naming the op, the dtype and the device (never a silent
fallback). ``KernelNames("metal", has_f64=False)`` leaves f64 out: Metal has no double.
"""

from __future__ import annotations

from .. import optable
from ..errors import UnsupportedOnDevice

HALF_AND_F32 = ("f16", "bf16", "f32")
INT = ("u8", "u32", "i8", "i16", "i32", "i64")

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
REDUCE = optable.names("reduce")
reduce_out_dtype = optable.reduce_out_dtype


class KernelNames:
    """The kernel names of one device kind; ``FLOAT``/``INT``/``NUM``/``ALL`` its dtypes."""

    def __init__(self, device: str, has_f64: bool = True):
        self.device = device
        self.FLOAT = HALF_AND_F32 + (("f64",) if has_f64 else ())
        self.INT = INT
        self.NUM = self.INT + self.FLOAT
        self.ALL = ("bool",) + self.NUM
        self.PARAM_FAMILIES = {"affine": self.NUM, "clamp": self.NUM, "powf": self.FLOAT,
                               "elu": self.FLOAT}  # fmt: skip
        self.ATOMIC = tuple(d for d in ("f16", "bf16", "f32", "f64", "i32", "i64")
                            if d in self.ALL)  # fmt: skip

    reduce_out_dtype = staticmethod(optable.reduce_out_dtype)

    def unsupported(self, op: str, dtype: str) -> UnsupportedOnDevice:
        return UnsupportedOnDevice(f"op {op} is not implemented on {self.device} for dtype {dtype}")

    def unary_name(self, op: str, dtype: str) -> str:
        if op in ANY_UNARY and dtype in self.ALL:
            return f"unary_{op}_{dtype}"
        if (dtype in self.FLOAT and op in FLOAT_UNARY) or (dtype in self.INT and op in INT_UNARY):
            return f"unary_{op}_{dtype}"
        raise self.unsupported(op, dtype)

    def binary_name(self, op: str, dtype: str, prefix: str = "binary") -> str:
        if dtype == "bool" and op in BOOL_AS_LOGICAL:
            op = BOOL_AS_LOGICAL[op]
        if op in LOGICAL and dtype in self.ALL:
            return f"{prefix}_{op}_{dtype}"
        if (dtype in self.FLOAT and op in FLOAT_BINARY) or (dtype in self.INT and op in INT_BINARY):
            return f"{prefix}_{op}_{dtype}"
        raise self.unsupported(op, dtype)

    def scalar_name(self, op: str, dtype: str) -> str:
        return self.binary_name(op, dtype, "bscalar")

    def cmp_name(self, op: str, dtype: str) -> str:
        if op in CMP and dtype in self.ALL:
            return f"cmp_{op}_{dtype}"
        raise self.unsupported(op, dtype)

    def cmp_scalar_name(self, op: str, dtype: str) -> str:
        return "cmps" + self.cmp_name(op, dtype)[3:]

    def param_name(self, family: str, dtype: str) -> str:
        if dtype in self.PARAM_FAMILIES[family]:
            return f"{family}_{dtype}"
        raise self.unsupported(family, dtype)

    def _in(self, family: str, dtype: str, dtypes) -> str:
        if dtype in dtypes:
            return f"{family}_{dtype}"
        raise self.unsupported(family, dtype)

    def where_name(self, dtype: str) -> str:
        return self._in("where", dtype, self.ALL)

    def cast_name(self, src: str, dst: str) -> str:
        if src in self.ALL and dst in self.ALL:
            return f"cast_{src}_{dst}"
        raise self.unsupported(f"cast to {dst}", src)

    @staticmethod
    def copy_name(itemsize: int) -> str:
        return f"copy_b{itemsize}"

    @staticmethod
    def fill_name(itemsize: int) -> str:
        return f"fill_b{itemsize}"

    def reduce_name(self, op: str, dtype: str) -> str:
        if op in REDUCE and dtype in self.ALL:
            return f"reduce_{op}_{dtype}"
        raise self.unsupported(op, dtype)

    def cumsum_name(self, dtype: str) -> str:
        return self._in("cumsum", dtype, self.ALL)

    def sort_name(self, dtype: str) -> str:
        return self._in("sort", dtype, self.ALL)

    def fused_name(self, family: str, dtype: str) -> str:
        """``softmax_<dtype>`` (also log_softmax), ``norm_<dtype>`` (layer/rms),
        ``rope_<dtype>``."""
        return self._in(family, dtype, self.FLOAT)

    def float_name(self, family: str, dtype: str) -> str:
        """``<family>_<dtype>`` of a family with float kernels only (conv, pool, upsample)."""
        return self._in(family, dtype, self.FLOAT)

    @staticmethod
    def compute_dtype(dtype: str) -> str:
        """The dtype statistics are kept in: f64 for f64, f32 otherwise."""
        return "f64" if dtype == "f64" else "f32"

    @staticmethod
    def pad_name(itemsize: int) -> str:
        """``pad_b<itemsize>``: padding moves elements, so one kernel per element size."""
        return f"pad_b{itemsize}"

    def pad_backward_name(self, dtype: str) -> str:
        return self._in("pad_backward", dtype, self.FLOAT)

    def group_norm_name(self, dtype: str) -> str:
        return self._in("group_norm", dtype, self.FLOAT)

    def all_names(self) -> dict[str, list[str]]:
        """Every kernel name the storage can launch, by source file (for the coverage test)."""
        from . import quantized  # the family's own list; imported when needed, as storage does

        ew: list[str] = []
        for dtype in self.ALL:
            for op in (*FLOAT_UNARY, *INT_UNARY, *ANY_UNARY):
                ew += self._maybe(self.unary_name, op, dtype)
            for op in (*FLOAT_BINARY, *INT_BINARY, *LOGICAL):
                ew += self._maybe(self.binary_name, op, dtype)
                ew += self._maybe(self.scalar_name, op, dtype)
            ew += [self.cmp_name(op, dtype) for op in CMP]
            ew += [self.cmp_scalar_name(op, dtype) for op in CMP]
            ew += [self.param_name(f, dtype) for f, ok in self.PARAM_FAMILIES.items()
                   if dtype in ok]  # fmt: skip
            ew += [self.where_name(dtype)] + [self.cast_name(dtype, other) for other in self.ALL]
        ew += [f(size) for size in (1, 2, 4, 8) for f in (self.copy_name, self.fill_name)]
        ALL, FLOAT = self.ALL, self.FLOAT  # noqa: N806
        red = [self.reduce_name(op, dtype) for op in REDUCE for dtype in ALL]
        red += [self.cumsum_name(d) for d in ALL] + [self.sort_name(d) for d in ALL]
        red += ["sort_long_init"] + [f"sort_long_{k}_{d}" for k in ("step", "gather") for d in ALL]
        fused = [self.fused_name(f, d) for f in ("softmax", "norm", "rope") for d in FLOAT]
        indexing = [f"{k}_{d}" for k in ("index_select", "gather", "scatter") for d in ALL]
        indexing += [f"{k}_{d}" for k in ("scatter_add", "index_add") for d in self.ATOMIC]
        pool = [f"{k}{b}_{d}" for k in ("max_pool2d", "avg_pool2d", "adaptive_avg_pool2d")
                for b in ("", "_backward") for d in FLOAT]  # fmt: skip
        return {
            "elementwise": sorted(set(ew)), "reduce": red, "fused": fused, "indexing": indexing,
            "conv": [f"{k}_{d}" for k in ("im2col", "col2im") for d in FLOAT], "pool": pool,
            "matmul": [f"matmul_int_{d}" for d in self.INT]
            + [f"gemm_{d}" for d in HALF_AND_F32],
            "upsample": [f"upsample_{k}2d{b}_{d}" for k in ("nearest", "bilinear")
                         for b in ("", "_backward") for d in FLOAT],
            "quantized": quantized.kernel_names(),
            "pad": [self.pad_name(s) for s in (1, 2, 4, 8)]
            + [self.pad_backward_name(d) for d in FLOAT],
            "norm": [self.group_norm_name(d) for d in FLOAT],
        }  # fmt: skip

    @staticmethod
    def _maybe(fn, op: str, dtype: str) -> list[str]:
        try:
            return [fn(op, dtype)]
        except UnsupportedOnDevice:
            return []
