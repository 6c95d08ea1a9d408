"""workbench: a minimalist, fast ML framework built to be lived in from Jupyter.

    import workbench as wb
    x = wb.randn(3, 4)
    w = wb.Var(wb.randn(4, 2))
    loss = (x @ w).relu().sum()
    grads = loss.backward()
    grads[w]

This module is the public surface; everything not listed in ``__all__`` may change.
"""

from . import _methods  # noqa: F401  (binds ops onto Tensor)
from .autograd import GradStore, enable_grad, is_grad_enabled, no_grad
from .device import Device, cuda_if_available, device, is_available, metal_if_available
from .dtype import (
    DType,
    bf16,
    bool_,
    f16,
    f32,
    f64,
    i8,
    i16,
    i32,
    i64,
    promote_types,
    u8,
    u32,
)
from .errors import (
    ArgumentError,
    AutogradError,
    DeviceMismatch,
    DeviceUnavailable,
    DimensionError,
    DivisionByZero,
    DTypeError,
    IndexingError,
    OutOfMemory,
    ShapeError,
    UnsupportedOnDevice,
    WorkbenchError,
)
from .interop import from_dlpack
from .memory import clear_cache, memory_stats, reset_peak_memory_stats
from .ops import FAMILIES as _FAMILIES
from .ops.creation import (
    arange,
    empty,
    empty_like,
    eye,
    from_numpy,
    full,
    full_like,
    linspace,
    ones,
    ones_like,
    rand,
    rand_like,
    randint,
    randint_like,
    randn,
    randn_like,
    tensor,
    zeros,
    zeros_like,
)
from .profiler import Profile, profile
from .random import Generator, manual_seed
from .tensor import Tensor, Var
from .threads import get_num_threads, native_info, set_num_threads

# Every op function (wb.exp, wb.cat, wb.conv2d, wb.softmax, ...), by its own name; indexing is
# spelled x[key] and x[key] = value.
_OPS = {
    name: fn
    for family in _FAMILIES
    for name, fn in vars(family).items()
    if getattr(fn, "op_name", None)
    and not name.startswith("_")
    and name not in ("getitem", "setitem")
}
globals().update(_OPS)


def load_ipython_extension(ipython) -> None:
    """``%load_ext workbench``: rich reprs, profiling magics, device and memory widgets."""
    from .notebook.extension import load

    load(ipython)


# Imported on first use, so that ``import workbench`` (a kernel's first cell, a CLI) stays fast
# (benchmarks/bench_import.py; tests/test_lazy_imports.py lists what it must not import).
_LAZY = {
    "nn": ("nn", None),
    "optim": ("optim", None),
    "io": ("io", None),
    **{name: ("io", name) for name in ("hub", "load_npz", "load_safetensors", "save_npz",
                                       "save_safetensors")},
    "quantized": ("quantized", None),
    "distributed": ("distributed", None),  # wb.distributed.init(), DDP, tensor parallel
    **{name: ("quantized", name) for name in ("GgmlDType", "QEmbedding", "QLinear", "QMatMul",
                                              "QTensor", "QVarBuilder", "quantize_model")},
    "serve": ("serve", None),  # callable: wb.serve(model) starts a server
    "monitor": ("serve", "monitor"),
    "PerformanceMonitor": ("serve", "PerformanceMonitor"),
}  # fmt: skip


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'workbench' has no attribute {name!r}")
    import importlib

    module, attr = _LAZY[name]
    found = importlib.import_module(f".{module}", __name__)
    value = found if attr is None else getattr(found, attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


def gallery(model: str | None = None):
    """The model gallery widget (needs ipywidgets): registered models, weights, Run."""
    from .notebook.gallery import gallery as show_gallery

    return show_gallery(model)


def unload_ipython_extension(ipython) -> None:
    from .notebook.extension import unload

    unload(ipython)


bool = bool_  # noqa: A001  (wb.bool, like torch.bool)
uint8, uint32, int8, int16, int32, int64 = u8, u32, i8, i16, i32, i64
float16, bfloat16, float32, float64 = f16, bf16, f32, f64

__version__ = "0.1.0"

__all__ = [
    "quantized",
    "distributed",
    "serve",
    "monitor",
    "PerformanceMonitor",
    "GgmlDType",
    "QEmbedding",
    "QLinear",
    "QMatMul",
    "QTensor",
    "QVarBuilder",
    "quantize_model",
    "clear_cache",
    "memory_stats",
    "reset_peak_memory_stats",
    "gallery",
    "io",
    "nn",
    "optim",
    "hub",
    "load_npz",
    "load_safetensors",
    "save_npz",
    "save_safetensors",
    "ArgumentError",
    "AutogradError",
    "DType",
    "DTypeError",
    "DivisionByZero",
    "Device",
    "DeviceMismatch",
    "DeviceUnavailable",
    "DimensionError",
    "Generator",
    "GradStore",
    "IndexingError",
    "OutOfMemory",
    "Profile",
    "ShapeError",
    "Tensor",
    "UnsupportedOnDevice",
    "Var",
    "WorkbenchError",
    "arange",
    "bf16",
    "bool_",
    "cuda_if_available",
    "device",
    "empty",
    "empty_like",
    "enable_grad",
    "eye",
    "f16",
    "f32",
    "f64",
    "from_dlpack",
    "from_numpy",
    "full",
    "full_like",
    "i8",
    "i16",
    "i32",
    "i64",
    "is_available",
    "is_grad_enabled",
    "linspace",
    "manual_seed",
    "metal_if_available",
    "native_info",
    "set_num_threads",
    "get_num_threads",
    "no_grad",
    "ones",
    "ones_like",
    "profile",
    "promote_types",
    "rand",
    "rand_like",
    "randint",
    "randint_like",
    "randn",
    "randn_like",
    "tensor",
    "u32",
    "u8",
    "zeros",
    "zeros_like",
    "load_ipython_extension",
    "unload_ipython_extension",
    "bool",
    "uint8",
    "uint32",
    "int8",
    "int16",
    "int32",
    "int64",
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "__version__",
] + sorted(_OPS)
