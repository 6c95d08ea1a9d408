"""workbench.optim: optimizers, learning-rate schedules and gradient clipping.

opt = optim.AdamW(model.parameters(), lr=1e-3)
sched = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=100)
for xb, yb in batches:
    opt.backward_step(loss_fn(model(xb), yb))   # or loss.backward(); opt.step(); opt.zero_grad()
    sched.step()
"""

from . import lr_scheduler
from .adam import Adam, AdamW
from .clip import clip_grad_norm_, clip_grad_value_
from .lr_scheduler import (
    CosineAnnealingLR,
    ExponentialLR,
    LambdaLR,
    LinearLR,
    LRScheduler,
    MultiStepLR,
    OneCycleLR,
    SequentialLR,
    StepLR,
    warmup_cosine,
)
from .optimizer import Optimizer, OptimizerError
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = [
    "SGD", "Adam", "AdamW", "CosineAnnealingLR", "ExponentialLR", "LRScheduler", "LambdaLR",
    "LinearLR", "MultiStepLR", "OneCycleLR", "Optimizer", "OptimizerError", "RMSprop",
    "SequentialLR", "StepLR", "clip_grad_norm_", "clip_grad_value_", "lr_scheduler",
    "warmup_cosine",
]  # fmt: skip
