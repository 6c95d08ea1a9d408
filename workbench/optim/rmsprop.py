"""RMSprop."""

from __future__ import annotations

from typing import Any

from .optimizer import Optimizer, _positive


class RMSprop(Optimizer):
    """As ``torch.optim.RMSprop``::

    g = g + λ p;  s = α s + (1 - α) g²
    centered: a = lerp(a, g, 1 - α); d = √(s - a²) + ε, else d = √s + ε
    momentum μ: b = μ b + g / d; p = p - lr b, else p = p - lr g / d
    """

    def __init__(
        self,
        params: Any,
        lr: float = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum: float = 0.0,
        centered: bool = False,
        maximize: bool = False,
    ):
        for what, value in (
            ("lr", lr),
            ("alpha", alpha),
            ("eps", eps),
            ("weight_decay", weight_decay),
            ("momentum", momentum),
        ):
            _positive("RMSprop", what, value)
        super().__init__(
            params,
            dict(
                lr=lr,
                alpha=alpha,
                eps=eps,
                weight_decay=weight_decay,
                momentum=momentum,
                centered=centered,
                maximize=maximize,
            ),
        )

    def _update(self, k, p, g, state, group) -> None:
        P, G = k.view(p), k.view(g)
        alpha, eps, lr = group["alpha"], group["eps"], group["lr"]
        if group["maximize"]:
            G = k.neg(G)
        if group["weight_decay"]:
            G = k.axpy(G, P, group["weight_decay"])
        s = self._buffer(k, state, "square_avg", p)
        k.scale_(s, alpha)
        k.addcmul_(s, G, G, 1.0 - alpha)
        if group["centered"]:
            a = self._buffer(k, state, "grad_avg", p)
            k.lerp_(a, G, 1.0 - alpha)
            avg = k.clone(s)
            k.addcmul_(avg, a, a, -1.0)
            avg = k.sqrt(avg)
        else:
            avg = k.sqrt(s)
        k.add_scalar_(avg, eps)
        if group["momentum"] > 0:
            buf = self._buffer(k, state, "momentum_buffer", p)
            k.scale_(buf, group["momentum"])
            k.addcdiv_(buf, G, avg, 1.0)
            k.add_(P, buf, -lr)
        else:
            k.addcdiv_(P, G, avg, -lr)
