"""Elementwise ops on 4M values: memory bandwidth and the per-element kernels, in f32 and in the
half types (computed in f32 registers, rounded once; numpy has no bf16 kernels: torch only).
``WORKBENCH_NATIVE=0 python -m benchmarks`` times workbench's numpy path (before the native
kernels). Also reductions (sum, max, var, logsumexp) of a 4096 x 4096 f32 matrix along each dim,
convolutions' bias gradients (sums over dims 0, 2, 3 of NCHW) and casts of 4M f32 values to f16
and bf16."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import torch
import torch.nn.functional as F
from scipy import special

import workbench as wb

from ._harness import Workload

N = 4 * 1024 * 1024
DTYPES = {
    "f32": (np.float32, wb.f32, torch.float32),
    "f16": (np.float16, wb.f16, torch.float16),
    "bf16": (ml_dtypes.bfloat16, wb.bf16, torch.bfloat16),
}


def _operands(dtype: str):
    np_dt, wb_dt, torch_dt = DTYPES[dtype]
    x, y = (np.random.default_rng(i).standard_normal(N, dtype=np.float32) for i in (0, 1))
    a, b = wb.tensor(x).to_dtype(wb_dt), wb.tensor(y).to_dtype(wb_dt)
    ta, tb = torch.from_numpy(x).to(torch_dt), torch.from_numpy(y).to(torch_dt)
    # numpy: f32 and its own f16 loops; bf16 (ml_dtypes) has none worth timing
    xs = (x, y) if dtype == "f32" else (x.astype(np.float16), y.astype(np.float16))
    return xs, (a, b), (ta, tb), dtype != "bf16"


def _gelu_numpy(x):
    return 0.5 * x * (1 + np.tanh(np.float32(0.7978845608) * (x + np.float32(0.044715) * x**3)))


# name -> (workbench, numpy, torch), each a function of the operand pair
OPS = {
    "add": (lambda a, b: a + b, lambda x, y: x + y, lambda a, b: a + b),
    "mul": (lambda a, b: a * b, lambda x, y: x * y, lambda a, b: a * b),
    "exp": (lambda a, b: a.exp(), lambda x, y: np.exp(x), lambda a, b: a.exp()),
    "gelu": (lambda a, b: a.gelu(), lambda x, y: _gelu_numpy(x),
             lambda a, b: F.gelu(a, approximate="tanh")),
    "silu": (lambda a, b: a.silu(), lambda x, y: x * special.expit(x), lambda a, b: F.silu(a)),
}  # fmt: skip


def _workload(op: str, dtype: str):
    def make():
        (x, y), (a, b), (ta, tb), has_numpy = _operands(dtype)
        ours, theirs, peer = OPS[op]
        return {
            "workbench": lambda: ours(a, b),
            "numpy": (lambda: theirs(x, y)) if has_numpy else None,
            "torch": lambda: peer(ta, tb),
        }

    return make


WORKLOADS = [
    Workload(f"elementwise/{op}_4M{'' if dt == 'f32' else '_' + dt}", _workload(op, dt),
             target=1.0, tolerance=1e-3 if dt == "f32" else 2e-2)
    for dt in DTYPES
    for op in OPS
]  # fmt: skip


# -- reductions over a 4096 x 4096 f32 matrix, along each dim (dim 0: columns, strided reads;
# dim 1: contiguous rows), over the same values in short rows (262144 x 64, a head's or a small
# layer's features), and casts of 4M f32 values to the half types
SIDE = 4096


def _logsumexp_numpy(x, dim):
    m = x.max(axis=dim, keepdims=True)
    return np.log(np.exp(x - m).sum(axis=dim)) + m.squeeze(dim)


# name -> (workbench, numpy, torch), each a function of (operand, dim)
REDUCTIONS = {
    "sum": (lambda a, d: a.sum(d), lambda x, d: x.sum(axis=d), lambda t, d: t.sum(d)),
    "max": (lambda a, d: a.amax(d), lambda x, d: x.max(axis=d), lambda t, d: t.amax(d)),
    "var": (lambda a, d: a.var(d), lambda x, d: x.var(axis=d, ddof=1), lambda t, d: t.var(d)),
    "logsumexp": (lambda a, d: a.logsumexp(d), _logsumexp_numpy, lambda t, d: t.logsumexp(d)),
}  # fmt: skip


def _reduction(op: str, dim: int, shape: tuple[int, int] = (SIDE, SIDE)):
    def make():
        x = np.random.default_rng(0).standard_normal(shape, dtype=np.float32)
        a, t = wb.tensor(x), torch.from_numpy(x)
        ours, theirs, peer = REDUCTIONS[op]
        return {
            "workbench": lambda: ours(a, dim),
            "numpy": lambda: theirs(x, dim),
            "torch": lambda: peer(t, dim),
        }

    return make


# A convolution's bias gradient: the sum over dims 0, 2, 3 of an NCHW gradient (the CNN
# training steps' layers, MNIST's, a UNet block's at batch 2).
BIAS_GRAD_SHAPES = [(64, 16, 8, 8), (64, 32, 4, 4), (64, 32, 28, 28), (64, 64, 14, 14),
                    (2, 320, 64, 64)]  # fmt: skip


def _bias_grad(shape: tuple[int, ...]):
    def make():
        x = np.random.default_rng(0).standard_normal(shape, dtype=np.float32)
        a, t = wb.tensor(x), torch.from_numpy(x)
        return {
            "workbench": lambda: a.sum((0, 2, 3)),
            "numpy": lambda: x.sum(axis=(0, 2, 3)),
            "torch": lambda: t.sum((0, 2, 3)),
        }

    return make


def _cast(dtype: str):
    def make():
        np_dt, wb_dt, torch_dt = DTYPES[dtype]
        x = np.random.default_rng(0).standard_normal(N, dtype=np.float32)
        a, t = wb.tensor(x), torch.from_numpy(x)
        return {
            "workbench": lambda: a.to_dtype(wb_dt),
            "numpy": lambda: x.astype(np_dt),
            "torch": lambda: t.to(torch_dt),
        }

    return make


WORKLOADS += [
    Workload(f"reduce/{op}_4096x4096_dim{dim}", _reduction(op, dim), target=1.0, tolerance=1e-3)
    for op in REDUCTIONS
    for dim in (0, 1)
]  # fmt: skip
WORKLOADS += [
    Workload(f"reduce/{op}_262144x64_dim1", _reduction(op, 1, (262144, 64)), target=1.0,
             tolerance=1e-3)
    for op in ("sum", "max")
]  # fmt: skip
WORKLOADS += [
    Workload(f"reduce/sum_{'x'.join(map(str, shape))}_dims023", _bias_grad(shape), target=1.0,
             tolerance=1e-3)
    for shape in BIAS_GRAD_SHAPES
]  # fmt: skip
WORKLOADS += [
    Workload(f"cast/f32_to_{dt}_4M", _cast(dt), target=1.0, tolerance=1e-2)
    for dt in ("f16", "bf16")
]
