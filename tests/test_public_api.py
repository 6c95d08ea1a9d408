"""Guards the public surface: ``workbench.__all__``, what ``import workbench as wb`` gives.

A name added or removed on purpose is added to or removed from ``PUBLIC_NAMES`` here, in the
same change, so that every change of the public API is a visible, reviewed line.
"""

from __future__ import annotations

import collections
import types

import workbench as wb

# Sorted: every name of ``wb.__all__`` (functions, classes, dtypes, public subpackages).
PUBLIC_NAMES = [
    "AutogradError",
    "DType",
    "DTypeError",
    "Device",
    "DeviceMismatch",
    "DeviceUnavailable",
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
    "__version__",
    "abs",
    "acos",
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
    "add",
    "add_",
    "affine",
    "all",
    "any",
    "arange",
    "argmax",
    "argmin",
    "argsort",
    "asin",
    "atan",
    "atan2",
    "avg_pool1d",
    "avg_pool2d",
    "bf16",
    "bfloat16",
    "bool",
    "bool_",
    "broadcast_to",
    "cat",
    "ceil",
    "chunk",
    "clamp",
    "clamp_",
    "clear_cache",
    "clone",
    "contiguous",
    "conv1d",
    "conv2d",
    "conv_transpose1d",
    "conv_transpose2d",
    "copy_",
    "cos",
    "cosh",
    "cpu",
    "cuda",
    "cuda_if_available",
    "cumsum",
    "device",
    "div",
    "div_",
    "elu",
    "embedding",
    "empty",
    "empty_like",
    "enable_grad",
    "eq",
    "erf",
    "exp",
    "expand",
    "expm1",
    "eye",
    "f16",
    "f32",
    "f64",
    "fill_",
    "flatten",
    "flip",
    "float16",
    "float32",
    "float64",
    "floor",
    "floor_div",
    "from_dlpack",
    "from_numpy",
    "full",
    "full_like",
    "gallery",
    "gather",
    "ge",
    "gelu",
    "gelu_erf",
    "getitem",
    "group_norm",
    "gt",
    "hub",
    "i16",
    "i32",
    "i64",
    "index_add",
    "index_select",
    "int16",
    "int32",
    "int64",
    "interpolate",
    "io",
    "is_available",
    "is_grad_enabled",
    "isfinite",
    "isinf",
    "isnan",
    "layer_norm",
    "le",
    "linspace",
    "load_ipython_extension",
    "load_npz",
    "load_safetensors",
    "log",
    "log1p",
    "log_softmax",
    "logical_and",
    "logical_not",
    "logical_or",
    "logical_xor",
    "logsumexp",
    "lt",
    "manual_seed",
    "masked_fill",
    "masked_select",
    "matmul",
    "max",
    "max_pool1d",
    "max_pool2d",
    "maximum",
    "mean",
    "memory_stats",
    "metal_if_available",
    "min",
    "minimum",
    "movedim",
    "mul",
    "mul_",
    "narrow",
    "ne",
    "neg",
    "nn",
    "no_grad",
    "nonzero",
    "norm",
    "ones",
    "ones_like",
    "optim",
    "pad",
    "permute",
    "pow",
    "powf",
    "prod",
    "profile",
    "promote_types",
    "rand",
    "rand_like",
    "randint",
    "randint_like",
    "randn",
    "randn_like",
    "recip",
    "relu",
    "remainder",
    "repeat",
    "reset_peak_memory_stats",
    "reshape",
    "rms_norm",
    "roll",
    "rope",
    "round",
    "rsqrt",
    "save_npz",
    "save_safetensors",
    "scaled_dot_product_attention",
    "scatter",
    "scatter_add",
    "setitem",
    "sigmoid",
    "sign",
    "silu",
    "sin",
    "sinh",
    "softmax",
    "sort",
    "split",
    "sqr",
    "sqrt",
    "squeeze",
    "stack",
    "std",
    "sub",
    "sub_",
    "sum",
    "t",
    "tan",
    "tanh",
    "tensor",
    "tile",
    "to",
    "to_dtype",
    "topk",
    "transpose",
    "u32",
    "u8",
    "uint32",
    "uint8",
    "unload_ipython_extension",
    "unsqueeze",
    "upsample_bilinear2d",
    "upsample_nearest2d",
    "var",
    "view",
    "where",
    "zero_",
    "zeros",
    "zeros_like",
]


def test_public_names_are_the_listed_ones():
    assert PUBLIC_NAMES == sorted(set(PUBLIC_NAMES)), "keep PUBLIC_NAMES sorted and unique"
    found = set(wb.__all__)
    added = sorted(found - set(PUBLIC_NAMES))
    removed = sorted(set(PUBLIC_NAMES) - found)
    assert not added and not removed, (
        f"public API changed: new names {added}, missing names {removed}; if deliberate, "
        "update PUBLIC_NAMES in tests/test_public_api.py"
    )


def test_dunder_all_has_no_duplicates_and_every_name_exists():
    duplicates = [n for n, count in collections.Counter(wb.__all__).items() if count > 1]
    assert not duplicates, f"listed twice in workbench.__all__: {duplicates}"
    missing = [name for name in wb.__all__ if not hasattr(wb, name)]
    assert not missing, f"in workbench.__all__ but not defined: {missing}"


def test_no_public_name_outside_dunder_all():
    """Every public function, class or constant of ``wb`` is listed in ``__all__``
    (submodules such as ``wb.dtype`` or ``wb.ops`` are namespaces, not names)."""
    unlisted = sorted(
        name
        for name in dir(wb)
        if not name.startswith("_")
        and name not in wb.__all__
        and not isinstance(getattr(wb, name), types.ModuleType)
    )
    assert not unlisted, f"public but not in workbench.__all__: {unlisted}"


def test_ops_are_functions_and_methods_of_one_object():
    """``wb.exp`` and ``Tensor.exp`` are the same function (no extra call in between)."""
    for name in ("exp", "add", "sum", "reshape", "matmul", "to_dtype", "add_", "narrow"):
        assert getattr(wb, name) is getattr(wb.Tensor, name), name
    assert wb.bool is wb.bool_ and wb.float32 is wb.f32 and wb.int64 is wb.i64
    assert isinstance(wb.__version__, str)
