"""Losses, as in ``torch.nn.functional`` (same arguments, same reductions).

``reduction`` is ``"mean"`` (default), ``"sum"`` or ``"none"``. With x the input, y the target:

- cross_entropy: -Σ_c y_c log softmax(x)_c, y one-hot from class indices (``ignore_index``
  skipped, ``label_smoothing`` ε mixes in the uniform distribution: y ← (1 - ε) y + ε / C),
  or class probabilities of x's shape. The class dim is 1 (0 for an unbatched (C,) input).
- nll_loss: -x[target] (x holds log-probabilities)
- mse_loss: (x - y)²;  l1_loss: |x - y|
- huber_loss: ½ d² if |d| < δ else δ (|d| - ½ δ);  smooth_l1_loss: huber / β with δ = β
- binary_cross_entropy: -(y log x + (1 - y) log(1 - x)), logs clamped at -100 (as PyTorch)
- binary_cross_entropy_with_logits: the same on σ(x), computed stably:
  (1 - y) x + (1 + (p - 1) y) (log(1 + e^(-|x|)) + max(-x, 0)), p = ``pos_weight``
- kl_div: y (log y - x) for x = log-probabilities (``log_target``: eʸ (y - x));
  ``"batchmean"`` divides the sum by the batch size
"""

from __future__ import annotations

from ..errors import DTypeError, IndexingError, ShapeError, WorkbenchError
from ..ops import elementwise as ew
from ..ops import fused, indexing
from ..tensor import Tensor

REDUCTIONS = ("mean", "sum", "none")


def _reduce(loss: Tensor, reduction: str, op: str) -> Tensor:
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise WorkbenchError(f"{op}: reduction must be one of {REDUCTIONS}, found {reduction!r}")


def _same_shape(op: str, x: Tensor, y: Tensor) -> None:
    if x.shape != y.shape:
        raise ShapeError(f"{op}: input {x.shape} and target {y.shape} must have the same shape")


def _class_dim(op: str, x: Tensor) -> int:
    if x.ndim == 0:
        raise ShapeError(f"{op}: the input needs a class dim, found a 0-d tensor")
    return 0 if x.ndim == 1 else 1


def _weight_shape(weight: Tensor, x: Tensor, cdim: int) -> Tensor:
    """A (C,) class weight shaped to broadcast along the class dim of ``x``."""
    return weight.reshape((weight.numel,) + (1,) * (x.ndim - cdim - 1))


def nll_loss(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    ignore_index: int = -100,
    reduction: str = "mean",
) -> Tensor:
    """Negative log-likelihood of class indices; ``input`` holds log-probabilities (N, C, ...)."""
    return _nll("nll_loss", input, target, weight, ignore_index, reduction)


def _nll(op: str, input, target, weight, ignore_index: int, reduction: str) -> Tensor:
    """``nll_loss``, its errors naming ``op`` (the loss the user called)."""
    cdim = _class_dim(op, input)
    if target.dtype.is_floating_point:
        raise DTypeError(f"{op}: target must hold class indices, found {target.dtype}")
    expected = input.shape[:cdim] + input.shape[cdim + 1 :]
    if target.shape != expected:
        raise ShapeError(
            f"{op}: input {input.shape} (class dim {cdim}) needs a target of shape "
            f"{expected}, found {target.shape}"
        )
    keep = target != ignore_index
    safe = ew.where(keep, target, 0)
    n_classes = input.shape[cdim]
    if safe.numel and not (0 <= safe.min().item() and safe.max().item() < n_classes):
        raise IndexingError(
            f"{op}: target class indices must be in [0, {n_classes}) or ignore_index="
            f"{ignore_index}, found values in [{safe.min().item()}, {safe.max().item()}] "
            f"(input {input.shape} {input.dtype.name}, target {target.shape} {target.dtype.name})"
        )
    picked = indexing.gather(input, cdim, safe.unsqueeze(cdim)).squeeze(cdim)
    w = keep.to_dtype(input.dtype)
    if weight is not None:
        w = w * indexing.index_select(weight, 0, safe.flatten()).reshape(safe.shape)
    loss = -(picked * w)
    if reduction == "mean":
        return loss.sum() / w.sum()
    return _reduce(loss, reduction, "nll_loss")


def cross_entropy(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    ignore_index: int = -100,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> Tensor:
    """Softmax cross-entropy of logits (N, C, ...) with class indices (N, ...) or class
    probabilities (N, C, ...); see the module docstring for the maths."""
    if not 0.0 <= label_smoothing <= 1.0:
        raise WorkbenchError(
            f"cross_entropy: label_smoothing must be in [0, 1], found {label_smoothing}"
        )
    cdim = _class_dim("cross_entropy", input)
    n_classes = input.shape[cdim]
    logp = fused.log_softmax(input, cdim)
    if target.dtype.is_floating_point:
        _same_shape("cross_entropy", input, target)
        if label_smoothing > 0:
            target = target * (1.0 - label_smoothing) + label_smoothing / n_classes
        terms = logp * target
        if weight is not None:
            terms = terms * _weight_shape(weight, input, cdim)
        loss = -terms.sum(cdim)
        return _reduce(loss, reduction, "cross_entropy")
    nll = _nll("cross_entropy", logp, target, weight, ignore_index, reduction)
    if label_smoothing == 0:
        return nll
    keep = (target != ignore_index).to_dtype(input.dtype)
    terms = logp if weight is None else logp * _weight_shape(weight, input, cdim)
    smooth = -terms.sum(cdim) * keep
    if reduction == "mean":
        if weight is None:
            denom = keep.sum()
        else:
            safe = ew.where(target != ignore_index, target, 0)
            denom = (
                indexing.index_select(weight, 0, safe.flatten()).reshape(safe.shape) * keep
            ).sum()
        smooth = smooth.sum() / denom
    else:
        smooth = _reduce(smooth, reduction, "cross_entropy")
    return nll * (1.0 - label_smoothing) + smooth * (label_smoothing / n_classes)


def mse_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    _same_shape("mse_loss", input, target)
    d = input - target
    return _reduce(d * d, reduction, "mse_loss")


def l1_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    _same_shape("l1_loss", input, target)
    return _reduce((input - target).abs(), reduction, "l1_loss")


def huber_loss(
    input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0
) -> Tensor:
    _same_shape("huber_loss", input, target)
    d = input - target
    a = d.abs()
    quadratic = d * d * 0.5
    linear = (a - 0.5 * delta) * delta
    return _reduce(ew.where(a < delta, quadratic, linear), reduction, "huber_loss")


def smooth_l1_loss(
    input: Tensor, target: Tensor, reduction: str = "mean", beta: float = 1.0
) -> Tensor:
    _same_shape("smooth_l1_loss", input, target)
    if beta == 0:
        return l1_loss(input, target, reduction)
    d = input - target
    a = d.abs()
    loss = ew.where(a < beta, d * d * (0.5 / beta), a - 0.5 * beta)
    return _reduce(loss, reduction, "smooth_l1_loss")


def binary_cross_entropy(
    input: Tensor, target: Tensor, weight: Tensor | None = None, reduction: str = "mean"
) -> Tensor:
    """``input`` holds probabilities in [0, 1]."""
    _same_shape("binary_cross_entropy", input, target)
    log_p = input.log().clamp(min=-100.0)
    log_q = (1.0 - input).log().clamp(min=-100.0)
    loss = -(target * log_p + (1.0 - target) * log_q)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction, "binary_cross_entropy")


def binary_cross_entropy_with_logits(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    reduction: str = "mean",
    pos_weight: Tensor | None = None,
) -> Tensor:
    """Binary cross-entropy on σ(input), stable for large |input|."""
    _same_shape("binary_cross_entropy_with_logits", input, target)
    softplus_neg = ew.log1p(ew.exp(-input.abs())) + ew.relu(-input)  # log(1 + e^(-x))
    if pos_weight is not None:
        loss = (1.0 - target) * input + ((pos_weight - 1.0) * target + 1.0) * softplus_neg
    else:
        loss = (1.0 - target) * input + softplus_neg
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction, "binary_cross_entropy_with_logits")


def kl_div(
    input: Tensor, target: Tensor, reduction: str = "mean", log_target: bool = False
) -> Tensor:
    """KL(target ‖ input) pointwise; ``input`` holds log-probabilities."""
    _same_shape("kl_div", input, target)
    if log_target:
        loss = target.exp() * (target - input)
    else:
        positive = target > 0
        loss = target * ew.where(positive, target, 1.0).log() - target * input
    if reduction == "batchmean":
        return loss.sum() / (input.shape[0] if input.ndim else 1)
    return _reduce(loss, reduction, "kl_div")
