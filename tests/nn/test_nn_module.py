"""Module: the tree of parameters and buffers, state dicts, modes, devices and dtypes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import workbench as wb
from workbench import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.norm = nn.BatchNorm1d(4)
        self.scale = wb.Var(wb.ones(4))
        self.register_buffer("mask", wb.ones(4), persistent=False)

    def forward(self, x):
        return self.norm(self.fc(x)) * self.scale * self.mask


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block(), Block()])
        self.heads = nn.ModuleDict({"a": nn.Linear(4, 2), "b": nn.Linear(4, 3, bias=False)})
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.heads["a"](self.drop(x))


def test_named_parameters_buffers_and_state_dict():
    net = Net()
    names = [n for n, _ in net.named_parameters()]
    assert names[:5] == [
        "blocks.0.scale",
        "blocks.0.fc.weight",
        "blocks.0.fc.bias",
        "blocks.0.norm.weight",
        "blocks.0.norm.bias",
    ]
    assert "heads.b.weight" in names and "heads.b.bias" not in names
    buffers = [n for n, _ in net.named_buffers()]
    assert "blocks.1.norm.running_var" in buffers and "blocks.1.mask" in buffers
    state = net.state_dict()
    assert "blocks.1.mask" not in state  # not persistent
    assert "blocks.0.norm.num_batches_tracked" in state
    assert net.num_parameters() == sum(p.numel for p in net.parameters()) == 2 * 32 + 10 + 12
    assert [n for n, _ in net.named_children()] == ["blocks", "heads", "drop"]
    assert len(list(net.modules())) == 1 + 1 + 2 * 3 + 1 + 2 + 1


def test_state_dict_round_trip_and_strict_errors():
    a, b = Net(), Net()
    b.load_state_dict(a.state_dict())
    for (na, pa), (nb, pb) in zip(a.state_dict().items(), b.state_dict().items(), strict=True):
        assert na == nb
        np.testing.assert_array_equal(pa.numpy(), pb.numpy())
    state = dict(a.state_dict())
    del state["heads.a.bias"]
    state["heads.c.weight"] = wb.zeros(2)
    with pytest.raises(nn.StateDictError) as e:
        b.load_state_dict(state)
    assert "missing keys (1): heads.a.bias" in str(e.value)
    assert "unexpected keys (1): heads.c.weight" in str(e.value)
    missing, unexpected = b.load_state_dict(state, strict=False)
    assert missing == ["heads.a.bias"] and unexpected == ["heads.c.weight"]
    state = a.state_dict()
    state["heads.a.weight"] = wb.zeros(3, 3)
    with pytest.raises(
        nn.StateDictError, match=r"heads.a.weight: expected \(2, 4\), found \(3, 3\)"
    ):
        b.load_state_dict(state)


def test_load_state_dict_keeps_parameter_objects_and_casts():
    m = nn.Linear(3, 2)
    w = m.weight
    m.load_state_dict({"weight": np.ones((2, 3), np.float64), "bias": torch.zeros(2).numpy()})
    assert m.weight is w and w.dtype is wb.f32
    np.testing.assert_array_equal(w.numpy(), np.ones((2, 3)))


def test_state_dict_names_match_torch():
    t = torch.nn.Sequential(
        torch.nn.Conv2d(1, 2, 3),
        torch.nn.BatchNorm2d(2),
        torch.nn.ReLU(),
        torch.nn.Flatten(),
        torch.nn.LazyLinear(3),
    )
    m = nn.Sequential(
        nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.ReLU(), nn.Flatten(), nn.Linear(8, 3)
    )
    t(torch.zeros(1, 1, 4, 4))
    assert list(m.state_dict()) == list(t.state_dict())


def test_train_eval_apply_and_requires_grad():
    net = Net()
    assert net.training and net.blocks[0].norm.training
    net.eval()
    assert not any(m.training for m in net.modules())
    net.train()
    assert all(m.training for m in net.modules())
    seen = []
    net.apply(lambda m: seen.append(type(m).__name__))
    assert seen[-1] == "Net" and seen.count("Linear") == 4
    net.requires_grad_(False)
    assert not any(p.requires_grad for p in net.parameters())
    assert net.num_parameters(trainable_only=True) == 0


def test_forward_backward_through_a_tree():
    net = Net()
    x = wb.randn(5, 4)
    loss = net(x).sum()
    grads = loss.backward()
    assert all(grads.get(p) is not None for n, p in net.named_parameters() if "heads.b" not in n)


def test_to_dtype_keeps_parameter_objects():
    m = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2))
    params = list(m.parameters())
    m.to(wb.f64)
    assert all(a is b for a, b in zip(m.parameters(), params, strict=True))
    assert all(p.dtype is wb.f64 for p in m.parameters())
    assert m[1].running_mean.dtype is wb.f64
    assert m[1].num_batches_tracked.dtype is wb.i64  # not floating: unchanged
    assert m(wb.randn(4, 3, dtype=wb.f64)).dtype is wb.f64
    m.to("cpu", wb.bf16)
    assert m[0].weight.dtype is wb.bf16


def test_shared_parameters_come_once():
    lin = nn.Linear(2, 2)
    m = nn.Sequential(lin, nn.ReLU(), lin)
    assert len(list(m.parameters())) == 2
    assert m.num_parameters() == 6


def test_containers():
    seq = nn.Sequential(nn.Linear(2, 3), nn.ReLU())
    seq.append(nn.Linear(3, 1))
    assert len(seq) == 3 and isinstance(seq[2], nn.Linear)
    assert isinstance(seq[1:], nn.Sequential) and len(seq[1:]) == 2
    assert seq(wb.randn(4, 2)).shape == (4, 1)
    ml = nn.ModuleList()
    ml.append(nn.ReLU()).extend([nn.Tanh()])
    ml[0] = nn.Sigmoid()
    assert [type(m).__name__ for m in ml] == ["Sigmoid", "Tanh"]
    md = nn.ModuleDict({"x": nn.ReLU()})
    md["y"] = nn.Tanh()
    assert list(md) == ["x", "y"] and "y" in md
    del md["x"]
    assert list(md.keys()) == ["y"]


def test_repr():
    text = repr(nn.Sequential(nn.Linear(2, 3), nn.Conv2d(1, 2, 3, padding=1)))
    assert "(0): Linear(in_features=2, out_features=3, bias=True)" in text
    assert "(1): Conv2d(1, 2, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))" in text


def test_registration_errors():
    class NoInit(nn.Module):
        def __init__(self):
            self.w = wb.Var(wb.ones(2))

    with pytest.raises(wb.WorkbenchError, match="must call super"):
        NoInit()
    m = nn.Linear(2, 2)
    with pytest.raises(wb.WorkbenchError, match="cannot assign int to parameter 'weight'"):
        m.weight = 3
    with pytest.raises(wb.WorkbenchError, match="cannot register 'train'"):
        m.register_buffer("train", wb.ones(1))
    m.weight = wb.Var(wb.zeros(2, 2))  # a new Var replaces the parameter
    assert dict(m.named_parameters())["weight"] is m.weight


def test_frozen_plain_tensor_parameter():
    m = nn.Linear(2, 2)
    m.register_parameter("weight", wb.ones(2, 2))  # a plain tensor: kept, never trained
    assert "weight" in m.state_dict()
    assert not m.weight.requires_grad
