"""Each optimizer step by step against torch.optim: 20 steps on the same gradients."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import workbench as wb
from workbench import io as wbio
from workbench import nn, optim
from workbench.optim import optimizer as optimizer_module

SHAPES = [(4, 3), (3,), (2, 2, 2)]
STEPS = 20

CONFIGS = [
    ("sgd", optim.SGD, torch.optim.SGD, dict(lr=0.1)),
    ("sgd_momentum", optim.SGD, torch.optim.SGD, dict(lr=0.05, momentum=0.9, dampening=0.1)),
    ("sgd_nesterov_wd", optim.SGD, torch.optim.SGD,
     dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.01)),
    ("sgd_maximize", optim.SGD, torch.optim.SGD, dict(lr=0.05, momentum=0.5, maximize=True)),
    ("adam", optim.Adam, torch.optim.Adam, dict(lr=0.01)),
    ("adam_wd_amsgrad", optim.Adam, torch.optim.Adam,
     dict(lr=0.01, betas=(0.8, 0.99), weight_decay=0.1, amsgrad=True)),
    ("adamw", optim.AdamW, torch.optim.AdamW, dict(lr=0.01)),
    ("adamw_amsgrad_maximize", optim.AdamW, torch.optim.AdamW,
     dict(lr=0.02, weight_decay=0.05, amsgrad=True, maximize=True, eps=1e-6)),
    ("rmsprop", optim.RMSprop, torch.optim.RMSprop, dict(lr=0.01)),
    ("rmsprop_momentum_centered_wd", optim.RMSprop, torch.optim.RMSprop,
     dict(lr=0.01, alpha=0.9, momentum=0.7, centered=True, weight_decay=0.1)),
]  # fmt: skip


def _run(wb_cls, torch_cls, kwargs, dtype, use_store):
    rng = np.random.default_rng(0)
    np_dtype = np.float64 if dtype is wb.f64 else np.float32
    init = [rng.standard_normal(s).astype(np_dtype) for s in SHAPES]
    wb_params = [wb.Var(wb.tensor(a, dtype=dtype)) for a in init]
    torch_params = [torch.nn.Parameter(torch.tensor(a)) for a in init]
    wb_opt = wb_cls(wb_params, **kwargs)
    torch_opt = torch_cls(torch_params, **kwargs)
    rtol, atol = (1e-10, 1e-12) if dtype is wb.f64 else (2e-5, 1e-6)
    for step in range(STEPS):
        grads = [rng.standard_normal(s).astype(np_dtype) for s in SHAPES]
        for p, g in zip(torch_params, grads, strict=True):
            p.grad = torch.tensor(g)
        torch_opt.step()
        if use_store:
            store = wb.GradStore()
            for p, g in zip(wb_params, grads, strict=True):
                store.insert(p, wb.tensor(g, dtype=dtype))
            wb_opt.step(store)
        else:
            for p, g in zip(wb_params, grads, strict=True):
                p.grad = wb.tensor(g, dtype=dtype)
            wb_opt.step()
        for i, (w, t) in enumerate(zip(wb_params, torch_params, strict=True)):
            np.testing.assert_allclose(
                w.numpy(),
                t.detach().numpy(),
                rtol=rtol,
                atol=atol,
                err_msg=f"step {step + 1}, parameter {i}",
            )


@pytest.mark.parametrize(
    "wb_cls, torch_cls, kwargs", [c[1:] for c in CONFIGS], ids=[c[0] for c in CONFIGS]
)
def test_matches_torch_f32_grad_attr(wb_cls, torch_cls, kwargs):
    _run(wb_cls, torch_cls, kwargs, wb.f32, use_store=False)


@pytest.mark.parametrize(
    "wb_cls, torch_cls, kwargs", [c[1:] for c in CONFIGS], ids=[c[0] for c in CONFIGS]
)
def test_matches_torch_f64_grad_store(wb_cls, torch_cls, kwargs):
    _run(wb_cls, torch_cls, kwargs, wb.f64, use_store=True)


@pytest.mark.parametrize(
    "wb_cls, torch_cls, kwargs", [c[1:] for c in CONFIGS], ids=[c[0] for c in CONFIGS]
)
def test_matches_torch_with_tensor_ops(wb_cls, torch_cls, kwargs, monkeypatch):
    """The device-independent path (tensor ops, used off the CPU), run on the CPU."""
    monkeypatch.setattr(optimizer_module, "USE_NUMPY_ON_CPU", False)
    _run(wb_cls, torch_cls, kwargs, wb.f64, use_store=False)


def test_backward_step_trains_and_clears_grads():
    wb.manual_seed(0)
    model = nn.Linear(3, 1)
    x = wb.randn(32, 3)
    y = x @ wb.tensor([[1.0], [-2.0], [0.5]]) + 0.3
    opt = optim.SGD(model, lr=0.1, momentum=0.9)  # a Module is accepted as its parameters
    weight = model.weight
    first = None
    for _ in range(100):
        loss = nn.functional.mse_loss(model(x), y)
        first = first if first is not None else loss.item()
        grads = opt.backward_step(loss)
        assert isinstance(grads, wb.GradStore)
        assert model.weight.grad is None
    assert model.weight is weight
    assert loss.item() < 1e-3 * first
    np.testing.assert_allclose(model.weight.numpy(), [[1.0, -2.0, 0.5]], atol=1e-2)


def test_param_groups_and_learning_rate():
    a, b = wb.Var(wb.ones(2)), wb.Var(wb.ones(2))
    opt = optim.SGD([{"params": [a]}, {"params": [b], "lr": 1.0}], lr=0.1)
    assert opt.lr == 0.1 and opt.param_groups[1]["lr"] == 1.0
    a.grad = wb.ones(2)
    b.grad = wb.ones(2)
    opt.step()
    np.testing.assert_allclose(a.numpy(), [0.9, 0.9])
    np.testing.assert_allclose(b.numpy(), [0.0, 0.0])
    opt.set_learning_rate(0.5)
    assert [g["lr"] for g in opt.param_groups] == [0.5, 0.5]
    opt.zero_grad()
    assert a.grad is None and b.grad is None
    opt.step()  # no gradients: nothing happens
    np.testing.assert_allclose(a.numpy(), [0.9, 0.9])
    c = wb.Var(wb.ones(1))
    opt.add_param_group({"params": c, "lr": 2.0})
    with pytest.raises(optim.OptimizerError, match="more than one parameter group"):
        opt.add_param_group({"params": [a]})


def test_state_dict_round_trip():
    rng = np.random.default_rng(1)
    make = lambda: [wb.Var(wb.tensor(np.ones((2, 2), np.float32)))]  # noqa: E731
    p1, p2 = make(), make()
    o1, o2 = optim.Adam(p1, lr=0.1), optim.Adam(p2, lr=0.1)
    g = rng.standard_normal((2, 2)).astype(np.float32)
    p1[0].grad = wb.tensor(g)
    o1.step()
    o2.load_state_dict(o1.state_dict())
    p2[0].set(p1[0])
    for p, o in ((p1, o1), (p2, o2)):
        p[0].grad = wb.tensor(g)
        o.step()
    np.testing.assert_array_equal(p1[0].numpy(), p2[0].numpy())
    assert o2.state_dict()["state"][0]["step"] == 2


def test_closure_and_errors():
    w = wb.Var(wb.ones(2))

    def closure():
        w.grad = None
        loss = (w * w).sum()
        loss.backward()
        return loss

    opt = optim.SGD([w], lr=0.25)
    assert opt.step(closure).item() == 2.0
    np.testing.assert_allclose(w.numpy(), [0.5, 0.5])
    with pytest.raises(optim.OptimizerError, match="invalid lr -1"):
        optim.Adam([w], lr=-1)
    with pytest.raises(optim.OptimizerError, match="betas must be in"):
        optim.Adam([w], betas=(1.0, 0.9))
    with pytest.raises(optim.OptimizerError, match="nesterov"):
        optim.SGD([w], nesterov=True)
    with pytest.raises(optim.OptimizerError, match="empty parameter list"):
        optim.SGD([])
    with pytest.raises(optim.OptimizerError, match="cannot optimise a i64 tensor"):
        optim.SGD([wb.tensor([1, 2])])
    w.grad = wb.ones(3)
    with pytest.raises(optim.OptimizerError, match=r"gradient \(3,\) does not match"):
        opt.step()


def test_read_only_parameter_error(tmp_path):
    path = tmp_path / "w.safetensors"
    wbio.save_safetensors({"w": wb.ones(2)}, path)
    frozen = wb.Var(wbio.load_safetensors(path)["w"])  # a view of the mapped file
    frozen.grad = wb.ones(2)
    with pytest.raises(optim.OptimizerError, match="read-only"):
        optim.SGD([frozen], lr=0.1).step()
