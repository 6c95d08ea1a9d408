"""Losses against torch.nn.functional: values and gradients, every reduction."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from op_check import check

import workbench as wb
from workbench.nn import functional as F

R = np.random.default_rng(0)
REDUCTIONS = ["mean", "sum", "none"]


def randn(*shape) -> np.ndarray:
    return R.standard_normal(shape).astype(np.float32)


def targets(shape, classes, ignore=None):
    t = R.integers(0, classes, shape)
    if ignore is not None:
        t.reshape(-1)[::3] = ignore
    return t


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("label_smoothing", [0.0, 0.2])
def test_cross_entropy_indices(reduction, label_smoothing):
    x, y = randn(6, 5), targets(6, 5)
    check(
        lambda x, y: F.cross_entropy(x, y, reduction=reduction, label_smoothing=label_smoothing),
        [x, y],
        torch_fn=lambda x, y: TF.cross_entropy(
            x, y, reduction=reduction, label_smoothing=label_smoothing
        ),
    )


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("label_smoothing", [0.0, 0.1])
def test_cross_entropy_ignore_index_weight_and_spatial(reduction, label_smoothing):
    x, y, w = randn(3, 4, 2, 5), targets((3, 2, 5), 4, ignore=-1), np.abs(randn(4)) + 0.5

    def fn(lib):
        def run(x, y, w):
            return lib(
                x,
                y,
                weight=w,
                ignore_index=-1,
                reduction=reduction,
                label_smoothing=label_smoothing,
            )

        return run

    check(fn(F.cross_entropy), [x, y, w], torch_fn=fn(TF.cross_entropy), grad_inputs=[0])


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_probabilities(reduction):
    x = randn(4, 6)
    p = np.exp(randn(4, 6))
    p /= p.sum(1, keepdims=True)
    check(
        lambda x, p: F.cross_entropy(x, p, reduction=reduction, label_smoothing=0.1),
        [x, p],
        torch_fn=lambda x, p: TF.cross_entropy(x, p, reduction=reduction, label_smoothing=0.1),
    )


def test_cross_entropy_unbatched_and_f64():
    x, y = randn(5), np.array(3)
    check(lambda x, y: F.cross_entropy(x, y), [x, y], torch_fn=TF.cross_entropy)
    x, y = randn(4, 3), targets(4, 3)
    check(lambda x, y: F.cross_entropy(x, y), [x, y], torch_fn=TF.cross_entropy, dtype=wb.f64)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_nll_loss(reduction):
    x, y, w = randn(5, 4), targets(5, 4, ignore=-100), np.abs(randn(4)) + 0.5
    check(
        lambda x, y, w: F.nll_loss(x, y, w, reduction=reduction),
        [x, y, w],
        torch_fn=lambda x, y, w: TF.nll_loss(x, y, w, reduction=reduction),
        grad_inputs=[0],
    )


POINTWISE = [
    ("mse", F.mse_loss, TF.mse_loss, {}),
    ("l1", F.l1_loss, TF.l1_loss, {}),
    ("huber", F.huber_loss, TF.huber_loss, {"delta": 0.7}),
    ("smooth_l1", F.smooth_l1_loss, TF.smooth_l1_loss, {"beta": 0.5}),
    ("kl_div", F.kl_div, TF.kl_div, {}),
    ("kl_div_log_target", F.kl_div, TF.kl_div, {"log_target": True}),
]


@pytest.mark.filterwarnings("ignore:reduction. 'mean' divides the total loss")
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize(
    "fn, torch_fn, kwargs", [c[1:] for c in POINTWISE], ids=[c[0] for c in POINTWISE]
)
def test_pointwise_losses(fn, torch_fn, kwargs, reduction):
    x, y = randn(4, 5), randn(4, 5)
    if fn is F.kl_div and not kwargs:
        y = np.abs(y)
        y[0, :2] = 0  # zero target probabilities contribute 0 (torch's target grad is NaN)
    check(
        lambda x, y: fn(x, y, reduction=reduction, **kwargs),
        [x, y],
        torch_fn=lambda x, y: torch_fn(x, y, reduction=reduction, **kwargs),
        grad_inputs=[0] if fn is F.kl_div and not kwargs else None,
    )


def test_kl_div_batchmean():
    x, y = randn(4, 5), np.abs(randn(4, 5))
    check(
        lambda x, y: F.kl_div(x, y, reduction="batchmean"),
        [x, y],
        torch_fn=lambda x, y: TF.kl_div(x, y, reduction="batchmean"),
    )


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_cross_entropy(reduction):
    p = 1 / (1 + np.exp(-randn(3, 4)))
    y = (randn(3, 4) > 0).astype(np.float32)
    w = np.abs(randn(3, 4))
    check(
        lambda p, y, w: F.binary_cross_entropy(p, y, w, reduction=reduction),
        [p, y, w],
        torch_fn=lambda p, y, w: TF.binary_cross_entropy(p, y, w, reduction=reduction),
        grad_inputs=[0],
    )


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_cross_entropy_with_logits(reduction):
    x = randn(3, 4) * 30  # large logits: must stay finite
    y = R.random((3, 4)).astype(np.float32)
    pw = np.abs(randn(4)) + 0.5
    check(
        lambda x, y: F.binary_cross_entropy_with_logits(x, y, reduction=reduction),
        [x, y],
        torch_fn=lambda x, y: TF.binary_cross_entropy_with_logits(x, y, reduction=reduction),
    )
    check(
        lambda x, y, pw: F.binary_cross_entropy_with_logits(
            x, y, reduction=reduction, pos_weight=pw
        ),
        [x, y, pw],
        torch_fn=lambda x, y, pw: TF.binary_cross_entropy_with_logits(
            x, y, reduction=reduction, pos_weight=pw
        ),
        grad_inputs=[0],
    )


def test_loss_modules():
    from workbench import nn

    x, y = randn(4, 3), targets(4, 3)
    got = nn.CrossEntropyLoss(label_smoothing=0.1)(wb.tensor(x), wb.tensor(y)).item()
    expected = torch.nn.CrossEntropyLoss(label_smoothing=0.1)(torch.tensor(x), torch.tensor(y))
    assert abs(got - expected.item()) < 1e-5
    assert nn.MSELoss("sum")(wb.ones(2), wb.zeros(2)).item() == 2.0
    assert nn.HuberLoss(delta=2.0)(wb.ones(1) * 3, wb.zeros(1)).item() == 4.0


def test_loss_errors():
    x = wb.randn(4, 3)
    with pytest.raises(wb.ShapeError, match=r"needs a target of shape \(4,\), found \(3,\)"):
        F.cross_entropy(x, wb.tensor([0, 1, 2]))
    with pytest.raises(wb.ShapeError, match="must have the same shape"):
        F.mse_loss(x, wb.randn(3, 4))
    with pytest.raises(wb.WorkbenchError, match="reduction must be one of"):
        F.mse_loss(x, x, reduction="avg")
    with pytest.raises(wb.DTypeError, match="target must hold class indices"):
        F.nll_loss(x, wb.randn(4))


def test_functional_extras():
    ids = wb.tensor([[0, 2], [1, 2]])
    oh = F.one_hot(ids, 4)
    assert oh.dtype is wb.i64
    np.testing.assert_array_equal(oh.numpy(), TF.one_hot(torch.tensor(ids.numpy()), 4).numpy())
    x = randn(3, 4)
    np.testing.assert_allclose(
        F.normalize(wb.tensor(x)).numpy(), TF.normalize(torch.tensor(x)).numpy(), rtol=1e-5
    )
    # core ops are reachable under their names, as torch.nn.functional
    assert F.softmax is wb.softmax and F.conv2d is wb.conv2d
    with pytest.raises(AttributeError):
        _ = F.not_a_function
