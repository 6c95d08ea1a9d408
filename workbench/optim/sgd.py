"""Stochastic gradient descent with momentum, Nesterov momentum and weight decay."""

from __future__ import annotations

from typing import Any

from .optimizer import Optimizer, OptimizerError, _positive


class SGD(Optimizer):
    """As ``torch.optim.SGD``::

    d = g + λ p                                  (weight_decay λ)
    b = d the first step, then μ b + (1 - τ) d   (momentum μ, dampening τ)
    d = d + μ b if nesterov else b
    p = p - lr d
    """

    def __init__(
        self,
        params: Any,
        lr: float = 1e-3,
        momentum: float = 0.0,
        dampening: float = 0.0,
        weight_decay: float = 0.0,
        nesterov: bool = False,
        maximize: bool = False,
    ):
        for what, value in (("lr", lr), ("momentum", momentum), ("weight_decay", weight_decay)):
            _positive("SGD", what, value)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise OptimizerError("SGD: nesterov momentum needs momentum > 0 and dampening = 0")
        super().__init__(
            params,
            dict(
                lr=lr,
                momentum=momentum,
                dampening=dampening,
                weight_decay=weight_decay,
                nesterov=nesterov,
                maximize=maximize,
            ),
        )

    def _update(self, k, p, g, state, group) -> None:
        P, d = k.view(p), k.view(g)
        if group["maximize"]:
            d = k.neg(d)
        if group["weight_decay"]:
            d = k.axpy(d, P, group["weight_decay"])
        momentum = group["momentum"]
        if momentum:
            first = "momentum_buffer" not in state
            buf = self._buffer(k, state, "momentum_buffer", p)
            if first:
                k.copy_(buf, d)
            else:
                k.scale_(buf, momentum)
                k.add_(buf, d, 1.0 - group["dampening"])
            d = k.axpy(d, buf, momentum) if group["nesterov"] else buf
        k.add_(P, d, -group["lr"])
