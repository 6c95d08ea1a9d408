"""Per-op dispatch: ``a + b`` on 1k floats, where the framework's overhead dominates."""

from __future__ import annotations

import numpy as np
import torch

import workbench as wb

from ._harness import Workload


def _add_1k():
    x, y = (np.random.default_rng(i).standard_normal(1024, dtype=np.float32) for i in (0, 1))
    a, b = wb.tensor(x), wb.tensor(y)
    ta, tb = torch.from_numpy(x.copy()), torch.from_numpy(y.copy())
    return {"workbench": lambda: a + b, "numpy": lambda: x + y, "torch": lambda: ta + tb}


def _add_1k_requires_grad():
    """The same with a leaf that requires grad: the cost of recording the graph."""
    x, y = (np.random.default_rng(i).standard_normal(1024, dtype=np.float32) for i in (0, 1))
    a, b = wb.tensor(x, requires_grad=True), wb.tensor(y)
    ta, tb = torch.tensor(x, requires_grad=True), torch.from_numpy(y.copy())
    return {"workbench": lambda: a + b, "numpy": None, "torch": lambda: ta + tb}


def _mul_scalar_1k():
    x = np.random.default_rng(0).standard_normal(1024, dtype=np.float32)
    a, ta = wb.tensor(x), torch.from_numpy(x.copy())
    return {"workbench": lambda: a * 2.0, "numpy": lambda: x * 2.0, "torch": lambda: ta * 2.0}


WORKLOADS = [
    Workload("dispatch/add_1k", _add_1k, target=1.0),
    Workload("dispatch/add_1k_grad", _add_1k_requires_grad, note="graph recorded"),
    Workload("dispatch/mul_scalar_1k", _mul_scalar_1k),
]
