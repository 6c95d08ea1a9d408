"""Learning-rate schedules, as ``torch.optim.lr_scheduler`` (same arguments and values).

A scheduler sets ``group["lr"]`` of each parameter group from the group's initial rate and
the step count t (``last_epoch``): construct it after the optimizer, call ``step()`` after
each ``optimizer.step()``. Closed forms, with base rate η₀:

- StepLR:            η₀ γ^⌊t / step_size⌋;   MultiStepLR: η₀ γ^(milestones passed)
- ExponentialLR:     η₀ γᵗ
- CosineAnnealingLR: η_min + (η₀ - η_min) (1 + cos(π t / T_max)) / 2
- LinearLR:          η₀ (s + (e - s) min(t, T) / T)   (linear warm-up from s = start_factor)
- OneCycleLR:        warm up from max_lr / div_factor to max_lr over pct_start of the steps,
  then anneal (cos or linear) to initial / final_div_factor; cycles momentum (or β₁) inversely
- LambdaLR:          η₀ f(t);  SequentialLR: one schedule after another at ``milestones``
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Callable, Sequence

from .optimizer import Optimizer, OptimizerError


class LRScheduler:
    """Base class: subclasses define ``lr_at(base_lr, t)`` (or ``_lrs(t)``)."""

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1):
        self.optimizer = optimizer
        for group in optimizer.param_groups:
            group.setdefault("initial_lr", group["lr"])
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._last_lr = [group["lr"] for group in optimizer.param_groups]
        self.step()

    def lr_at(self, base_lr: float, t: int) -> float:
        raise NotImplementedError

    def _lrs(self, t: int) -> list[float]:
        return [self.lr_at(base, t) for base in self.base_lrs]

    def step(self, epoch: int | None = None) -> None:
        """Advance one step (or jump to ``epoch``) and set the groups' learning rates."""
        self.last_epoch = self.last_epoch + 1 if epoch is None else epoch
        lrs = self._lrs(self.last_epoch)
        for group, lr in zip(self.optimizer.param_groups, lrs, strict=True):
            group["lr"] = lr
        self._last_lr = lrs

    def get_last_lr(self) -> list[float]:
        return list(self._last_lr)

    def state_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "optimizer" and not callable(v)}

    def load_state_dict(self, state: dict) -> None:
        self.__dict__.update(state)


class LambdaLR(LRScheduler):
    def __init__(self, optimizer: Optimizer, lr_lambda: Callable[[int], float], last_epoch=-1):
        self.lr_lambda = lr_lambda
        super().__init__(optimizer, last_epoch)

    def lr_at(self, base_lr, t):
        return base_lr * self.lr_lambda(t)


class StepLR(LRScheduler):
    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1, last_epoch=-1):
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_epoch)

    def lr_at(self, base_lr, t):
        return base_lr * self.gamma ** (t // self.step_size)


class MultiStepLR(LRScheduler):
    def __init__(
        self, optimizer: Optimizer, milestones: Sequence[int], gamma: float = 0.1, last_epoch=-1
    ):
        self.milestones, self.gamma = sorted(milestones), gamma
        super().__init__(optimizer, last_epoch)

    def lr_at(self, base_lr, t):
        return base_lr * self.gamma ** bisect_right(self.milestones, t)


class ExponentialLR(LRScheduler):
    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch=-1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def lr_at(self, base_lr, t):
        return base_lr * self.gamma**t


class CosineAnnealingLR(LRScheduler):
    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0, last_epoch=-1):  # noqa: N803
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def lr_at(self, base_lr, t):
        return (
            self.eta_min + (base_lr - self.eta_min) * (1 + math.cos(math.pi * t / self.T_max)) / 2
        )


class LinearLR(LRScheduler):
    """Multiply the rate by a factor going linearly from ``start_factor`` to ``end_factor``
    over ``total_iters`` steps (a linear warm-up with the defaults of ``warmup``)."""

    def __init__(
        self,
        optimizer: Optimizer,
        start_factor: float = 1.0 / 3,
        end_factor: float = 1.0,
        total_iters: int = 5,
        last_epoch=-1,
    ):
        if not 0 < start_factor <= 1 or not 0 <= end_factor <= 1:
            raise OptimizerError(
                "LinearLR: start_factor must be in (0, 1] and end_factor in [0, 1]"
            )
        self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, total_iters
        super().__init__(optimizer, last_epoch)

    def lr_at(self, base_lr, t):
        done = min(self.total_iters, t) / self.total_iters if self.total_iters else 1.0
        return base_lr * (self.start_factor + (self.end_factor - self.start_factor) * done)


class SequentialLR(LRScheduler):
    """``schedulers[i]`` from ``milestones[i - 1]`` on, each counting from 0 at its start."""

    def __init__(
        self,
        optimizer: Optimizer,
        schedulers: Sequence[LRScheduler],
        milestones: Sequence[int],
        last_epoch=-1,
    ):
        if len(milestones) != len(schedulers) - 1:
            raise OptimizerError(
                f"SequentialLR: {len(schedulers)} schedulers need "
                f"{len(schedulers) - 1} milestones, found {len(milestones)}"
            )
        self.schedulers, self.milestones = list(schedulers), list(milestones)
        for group in optimizer.param_groups:
            group["lr"] = group.get("initial_lr", group["lr"])
        super().__init__(optimizer, last_epoch)

    def _lrs(self, t: int) -> list[float]:
        i = bisect_right(self.milestones, t)
        start = self.milestones[i - 1] if i else 0
        scheduler = self.schedulers[i]
        scheduler.last_epoch = t - start
        return scheduler._lrs(t - start)


def warmup_cosine(
    optimizer: Optimizer,
    warmup_steps: int,
    total_steps: int,
    eta_min: float = 0.0,
    start_factor: float = 1e-3,
) -> SequentialLR:
    """Linear warm-up over ``warmup_steps``, then cosine annealing to ``eta_min`` at
    ``total_steps`` (the usual transformer schedule)."""
    warmup = LinearLR(optimizer, start_factor, 1.0, warmup_steps)
    cosine = CosineAnnealingLR(optimizer, max(1, total_steps - warmup_steps), eta_min)
    return SequentialLR(optimizer, [warmup, cosine], [warmup_steps])


class OneCycleLR(LRScheduler):
    """The 1cycle policy (Smith & Topin), as ``torch.optim.lr_scheduler.OneCycleLR``."""

    def __init__(
        self,
        optimizer: Optimizer,
        max_lr: float | Sequence[float],
        total_steps: int | None = None,
        epochs: int | None = None,
        steps_per_epoch: int | None = None,
        pct_start: float = 0.3,
        anneal_strategy: str = "cos",
        cycle_momentum: bool = True,
        base_momentum: float = 0.85,
        max_momentum: float = 0.95,
        div_factor: float = 25.0,
        final_div_factor: float = 1e4,
        three_phase: bool = False,
        last_epoch=-1,
    ):
        if total_steps is None:
            if epochs is None or steps_per_epoch is None:
                raise OptimizerError("OneCycleLR: give total_steps, or epochs and steps_per_epoch")
            total_steps = epochs * steps_per_epoch
        if total_steps <= 0:
            raise OptimizerError(f"OneCycleLR: total_steps must be positive, found {total_steps}")
        if anneal_strategy not in ("cos", "linear"):
            raise OptimizerError(
                f"OneCycleLR: anneal_strategy must be 'cos' or 'linear', found {anneal_strategy!r}"
            )
        self.total_steps = total_steps
        self.anneal_strategy = anneal_strategy
        up = float(pct_start * total_steps) - 1
        if three_phase:
            self._phases = [
                (up, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                (
                    float(2 * pct_start * total_steps) - 2,
                    "max_lr",
                    "initial_lr",
                    "base_momentum",
                    "max_momentum",
                ),
                (total_steps - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum"),
            ]
        else:
            self._phases = [
                (up, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                (total_steps - 1, "max_lr", "min_lr", "base_momentum", "max_momentum"),
            ]
        groups = optimizer.param_groups
        max_lrs = list(max_lr) if isinstance(max_lr, list | tuple) else [max_lr] * len(groups)
        for group, top in zip(groups, max_lrs, strict=True):
            group["initial_lr"] = top / div_factor
            group["max_lr"] = top
            group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self._use_beta1 = "betas" in optimizer.defaults
            if not self._use_beta1 and "momentum" not in optimizer.defaults:
                raise OptimizerError(
                    "OneCycleLR: cycle_momentum needs an optimizer with momentum or betas"
                )
            for group in groups:
                group["max_momentum"], group["base_momentum"] = max_momentum, base_momentum
                self._set_momentum(group, max_momentum)
        super().__init__(optimizer, last_epoch)

    def _set_momentum(self, group: dict, value: float) -> None:
        if self._use_beta1:
            group["betas"] = (value, *group["betas"][1:])
        else:
            group["momentum"] = value

    def _anneal(self, start: float, end: float, pct: float) -> float:
        if self.anneal_strategy == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def _lrs(self, t: int) -> list[float]:
        if t > self.total_steps:
            raise OptimizerError(
                f"OneCycleLR: stepped {t} times, more than total_steps={self.total_steps}"
            )
        lrs = []
        for group in self.optimizer.param_groups:
            start = 0.0
            for i, (end, lr0, lr1, m0, m1) in enumerate(self._phases):
                if t <= end or i == len(self._phases) - 1:
                    pct = (t - start) / (end - start)
                    lrs.append(self._anneal(group[lr0], group[lr1], pct))
                    if self.cycle_momentum:
                        self._set_momentum(group, self._anneal(group[m0], group[m1], pct))
                    break
                start = end
        return lrs
