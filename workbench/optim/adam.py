"""Adam and AdamW."""

from __future__ import annotations

import math
from typing import Any

from .optimizer import Optimizer, OptimizerError, _positive


class Adam(Optimizer):
    """As ``torch.optim.Adam`` (``decoupled_weight_decay=True`` is AdamW)::

    g = g + λ p                       (weight_decay λ; AdamW instead: p = p (1 - lr λ))
    m = β₁ m + (1 - β₁) g;  v = β₂ v + (1 - β₂) g²    (amsgrad: v̂ = max(v̂, v))
    p = p - lr / (1 - β₁ᵗ) · m / (√v / √(1 - β₂ᵗ) + ε)
    """

    def __init__(
        self,
        params: Any,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        amsgrad: bool = False,
        maximize: bool = False,
        decoupled_weight_decay: bool = False,
    ):
        name = type(self).__name__
        for what, value in (("lr", lr), ("eps", eps), ("weight_decay", weight_decay)):
            _positive(name, what, value)
        if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise OptimizerError(f"{name}: betas must be in [0, 1), found {betas}")
        super().__init__(
            params,
            dict(
                lr=lr,
                betas=tuple(betas),
                eps=eps,
                weight_decay=weight_decay,
                amsgrad=amsgrad,
                maximize=maximize,
                decoupled_weight_decay=decoupled_weight_decay,
            ),
        )

    def _update(self, k, p, g, state, group) -> None:
        if k.fused(p, "adam_step") and self._fused_update(p, g, state, group):
            return
        P, G = k.view(p), k.view(g)
        lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
        wd = group["weight_decay"]
        if group["maximize"]:
            G = k.neg(G)
        if wd:
            if group["decoupled_weight_decay"]:
                k.scale_(P, 1.0 - lr * wd)
            else:
                G = k.axpy(G, P, wd)
        m = self._buffer(k, state, "exp_avg", p)
        v = self._buffer(k, state, "exp_avg_sq", p)
        k.lerp_(m, G, 1.0 - beta1)
        k.scale_(v, beta2)
        k.addcmul_(v, G, G, 1.0 - beta2)
        t = state["step"]
        step_size = lr / (1.0 - beta1**t)
        bias_correction2_sqrt = math.sqrt(1.0 - beta2**t)
        if group["amsgrad"]:
            v_max = self._buffer(k, state, "max_exp_avg_sq", p)
            k.maximum_(v_max, v)
            v = v_max
        denom = k.sqrt(v)
        k.div_scalar_(denom, bias_correction2_sqrt)
        k.add_scalar_(denom, eps)
        k.addcdiv_(P, m, denom, -step_size)

    def _fused_update(self, p, g, state, group) -> bool:
        """The whole step as one ``adam_step`` pass of the parameter's storage (False where
        its kernel does not take these operands: nothing was written)."""
        names = ("exp_avg", "exp_avg_sq") + (("max_exp_avg_sq",) if group["amsgrad"] else ())
        buffers = [self._state_tensor(state, name, p) for name in names]
        return p._storage.adam_step(
            p._layout,
            g._storage,
            g._layout,
            [(b._storage, b._layout) for b in buffers],
            group["lr"],
            group["betas"],
            group["eps"],
            group["weight_decay"],
            group["decoupled_weight_decay"],
            group["maximize"],
            state["step"],
        )


class AdamW(Adam):
    """Adam with decoupled weight decay (default λ = 0.01): p = p (1 - lr λ) before the Adam
    step, as ``torch.optim.AdamW``."""

    def __init__(
        self,
        params: Any,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        amsgrad: bool = False,
        maximize: bool = False,
    ):
        super().__init__(
            params, lr, betas, eps, weight_decay, amsgrad, maximize, decoupled_weight_decay=True
        )
