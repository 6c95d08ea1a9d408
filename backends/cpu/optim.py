"""Optimizer steps on the CPU: one native in-place pass per parameter
(kernels/cpu/core/optim.c)."""

from __future__ import annotations

import numpy as np

from ._arrays import view
from .native import NATIVE

# None on the numpy path, or in an extension built before the kernel existed
_ADAM = getattr(NATIVE, "adam_step", None)
# numpy type characters of f32 and f64: the dtypes the kernel takes
_NATIVE_OPTIM = "fd" if _ADAM is not None else ""


def _flat(storage, layout) -> np.ndarray | None:
    """The elements of a contiguous layout as a 1-d view (None when the layout is not)."""
    if not layout.is_contiguous or type(storage.array) is not np.ndarray:
        return None
    return view(storage.array, layout).reshape(-1)


class OptimOps:
    """The ``adam_step`` method of ``CpuStorage``."""

    __slots__ = ()

    def adam_step(self, layout, grad, grad_layout, state, lr: float, betas: tuple[float, float],
                  eps: float, weight_decay: float, decoupled: bool, maximize: bool,
                  step: int) -> bool:  # fmt: skip
        """One Adam/AdamW step of the parameter (``self``) and its ``state`` storages
        (exp_avg, exp_avg_sq[, max_exp_avg_sq] as (storage, layout) pairs) in place, with
        torch.optim.Adam's arithmetic; False, with nothing written, where the kernel does not
        take the operands (no extension, f16/bf16, mixed dtypes, non-contiguous layouts)."""
        dtype = self.array.dtype
        if dtype.char not in _NATIVE_OPTIM:
            return False
        arrays = [_flat(self, layout), _flat(grad, grad_layout)]
        arrays += [_flat(s, s_layout) for s, s_layout in state]
        if any(a is None or a.dtype is not dtype for a in arrays):
            return False
        if len(arrays) == 4:
            arrays.append(None)
        _ADAM(*arrays, lr, betas[0], betas[1], eps, weight_decay, decoupled, maximize, step)
        return True
