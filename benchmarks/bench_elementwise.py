"""Elementwise ops on 4M f32 values: memory bandwidth and the per-element kernels."""

from __future__ import annotations

import numpy as np
import torch

import workbench as wb

from ._harness import Workload

N = 4 * 1024 * 1024


def _operands():
    x, y = (np.random.default_rng(i).standard_normal(N, dtype=np.float32) for i in (0, 1))
    return x, y, wb.tensor(x), wb.tensor(y), torch.from_numpy(x.copy()), torch.from_numpy(y.copy())


def _add():
    x, y, a, b, ta, tb = _operands()
    return {"workbench": lambda: a + b, "numpy": lambda: x + y, "torch": lambda: ta + tb}


def _mul():
    x, y, a, b, ta, tb = _operands()
    return {"workbench": lambda: a * b, "numpy": lambda: x * y, "torch": lambda: ta * tb}


def _exp():
    x, _, a, _, ta, _ = _operands()
    return {"workbench": lambda: a.exp(), "numpy": lambda: np.exp(x), "torch": lambda: ta.exp()}


WORKLOADS = [
    Workload("elementwise/add_4M", _add),
    Workload("elementwise/mul_4M", _mul),
    Workload("elementwise/exp_4M", _exp),
]
