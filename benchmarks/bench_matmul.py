"""Square f32 matmuls: workbench goes through numpy's BLAS, PyTorch through its own (MKL or
OpenBLAS, depending on the build)."""

from __future__ import annotations

import numpy as np
import torch

import workbench as wb

from ._harness import Workload


def _square(n: int):
    def make():
        x, y = (np.random.default_rng(i).standard_normal((n, n), dtype=np.float32) for i in (0, 1))
        a, b = wb.tensor(x), wb.tensor(y)
        ta, tb = torch.from_numpy(x.copy()), torch.from_numpy(y.copy())
        return {"workbench": lambda: a @ b, "numpy": lambda: x @ y, "torch": lambda: ta @ tb}

    return make


WORKLOADS = [
    Workload("matmul/512", _square(512), target=1.05, tolerance=1e-2),
    Workload("matmul/2048", _square(2048), target=1.05, tolerance=1e-2),
]
