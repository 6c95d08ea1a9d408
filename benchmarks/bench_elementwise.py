"""Elementwise ops on 4M values: memory bandwidth and the per-element kernels, in f32 and in the
half types (computed in f32 registers, rounded once; numpy has no bf16 kernels: torch only).
``WORKBENCH_NATIVE=0 python -m benchmarks`` times workbench's numpy path (before the native
kernels)."""

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
