"""Initialisation (statistics of the draws, fans, gains) and the Batcher."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import workbench as wb
from workbench import nn
from workbench.nn import init


@pytest.mark.parametrize("shape", [(30, 20), (16, 8, 3, 3), (5, 7, 4)])
def test_fans_match_torch(shape):
    t = torch.empty(shape)
    assert init.fans(shape) == torch.nn.init._calculate_fan_in_and_fan_out(t)


@pytest.mark.parametrize(
    "name, param",
    [("relu", None), ("tanh", None), ("leaky_relu", 0.2), ("linear", None), ("selu", None)],
)
def test_gain_matches_torch(name, param):
    assert math.isclose(init.calculate_gain(name, param), torch.nn.init.calculate_gain(name, param))


def _std_uniform(bound):
    return bound / math.sqrt(3)


SHAPE = (400, 300)
FAN_IN, FAN_OUT = 300, 400
CASES = [
    (lambda w: init.kaiming_uniform_(w), _std_uniform(math.sqrt(2) * math.sqrt(3 / FAN_IN)), True),
    (lambda w: init.kaiming_normal_(w, mode="fan_out", nonlinearity="relu"),
     math.sqrt(2 / FAN_OUT), False),
    (lambda w: init.xavier_uniform_(w, gain=2.0),
     _std_uniform(2 * math.sqrt(6 / (FAN_IN + FAN_OUT))), True),
    (lambda w: init.xavier_normal_(w), math.sqrt(2 / (FAN_IN + FAN_OUT)), False),
    (lambda w: init.normal_(w, 0.0, 0.02), 0.02, False),
    (lambda w: init.uniform_(w, -0.5, 0.5), _std_uniform(0.5), True),
]  # fmt: skip


@pytest.mark.parametrize("fill, std, bounded", CASES)
def test_in_place_init_statistics(fill, std, bounded):
    wb.manual_seed(0)
    w = wb.Var(wb.zeros(*SHAPE))
    assert fill(w) is w
    a = w.numpy()
    assert abs(a.std() - std) < 0.02 * std
    assert abs(a.mean()) < 0.02 * std
    if bounded:
        assert np.abs(a).max() <= std * math.sqrt(3) * 1.0001


def test_constant_hints_and_seed():
    w = wb.Var(wb.zeros(3))
    init.constant_(w, 0.5)
    np.testing.assert_array_equal(w.numpy(), [0.5] * 3)
    init.ones_(w)
    np.testing.assert_array_equal(w.numpy(), [1.0] * 3)
    assert init.Const(2.0)((2, 2), wb.f16).dtype is wb.f16
    wb.manual_seed(3)
    a = init.KaimingNormal()((4, 4)).numpy()
    wb.manual_seed(3)
    np.testing.assert_array_equal(a, init.KaimingNormal()((4, 4)).numpy())
    g = wb.Generator(5)
    assert init.Normal(0, 1, generator=g)((2,)).shape == (2,)
    with pytest.raises(wb.ShapeError, match="at least 2 dims"):
        init.XavierUniform()((5,))


def test_batcher():
    x = np.arange(10, dtype=np.float32).reshape(10, 1)
    y = np.arange(10)
    b = nn.Batcher(x, y, batch_size=4)
    assert len(b) == 3
    batches = list(b)
    assert [xb.shape for xb, _ in batches] == [(4, 1), (4, 1), (2, 1)]
    np.testing.assert_array_equal(batches[2][1].numpy(), [8, 9])
    b = nn.Batcher(
        wb.tensor(x), y, batch_size=4, shuffle=True, drop_last=True, generator=wb.Generator(0)
    )
    assert len(b) == 2
    e1 = np.concatenate([yb.numpy() for _, yb in b])
    e2 = np.concatenate([yb.numpy() for _, yb in b])
    assert len(e1) == 8 and len(set(e1)) == 8 and not np.array_equal(e1, e2)
    for xb, yb in b:
        np.testing.assert_array_equal(xb.numpy()[:, 0], yb.numpy())  # rows stay paired
    single = nn.Batcher(x, batch_size=5)
    assert all(isinstance(t, wb.Tensor) for t in single)
    with pytest.raises(wb.ShapeError, match="same first dim"):
        nn.Batcher(x, y[:5])
    with pytest.raises(wb.WorkbenchError, match="batch_size must be >= 1"):
        nn.Batcher(x, batch_size=0)
