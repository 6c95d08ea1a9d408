"""Learning-rate schedules: the same sequences as torch.optim.lr_scheduler; clipping."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import workbench as wb
from workbench import optim
from workbench.optim import lr_scheduler as wls

TLS = torch.optim.lr_scheduler
STEPS = 30

CASES = [
    ("step", lambda o: wls.StepLR(o, 7, 0.5), lambda o: TLS.StepLR(o, 7, 0.5)),
    ("multistep", lambda o: wls.MultiStepLR(o, [5, 12, 20], 0.3),
     lambda o: TLS.MultiStepLR(o, [5, 12, 20], 0.3)),
    ("exponential", lambda o: wls.ExponentialLR(o, 0.9), lambda o: TLS.ExponentialLR(o, 0.9)),
    ("cosine", lambda o: wls.CosineAnnealingLR(o, 25, 0.001),
     lambda o: TLS.CosineAnnealingLR(o, 25, 0.001)),
    ("linear_warmup", lambda o: wls.LinearLR(o, 0.1, 1.0, 10),
     lambda o: TLS.LinearLR(o, 0.1, 1.0, 10)),
    ("linear_decay", lambda o: wls.LinearLR(o, 1.0, 0.2, 15),
     lambda o: TLS.LinearLR(o, 1.0, 0.2, 15)),
    ("lambda", lambda o: wls.LambdaLR(o, lambda t: 1 / (1 + t)),
     lambda o: TLS.LambdaLR(o, lambda t: 1 / (1 + t))),
    ("one_cycle", lambda o: wls.OneCycleLR(o, 0.5, total_steps=STEPS),
     lambda o: TLS.OneCycleLR(o, 0.5, total_steps=STEPS)),
    ("one_cycle_three_phase_linear",
     lambda o: wls.OneCycleLR(o, [0.5, 0.2], epochs=3, steps_per_epoch=10, three_phase=True,
                              anneal_strategy="linear", pct_start=0.25),
     lambda o: TLS.OneCycleLR(o, [0.5, 0.2], epochs=3, steps_per_epoch=10, three_phase=True,
                              anneal_strategy="linear", pct_start=0.25)),
    ("warmup_then_cosine",
     lambda o: wls.SequentialLR(o, [wls.LinearLR(o, 0.01, 1.0, 5),
                                    wls.CosineAnnealingLR(o, 25)], [5]),
     lambda o: TLS.SequentialLR(o, [TLS.LinearLR(o, 0.01, 1.0, 5),
                                    TLS.CosineAnnealingLR(o, 25)], [5])),
]  # fmt: skip


def _optimizers(kind: str):
    wa, wb_ = wb.Var(wb.ones(1)), wb.Var(wb.ones(1))
    ta, tb = torch.nn.Parameter(torch.ones(1)), torch.nn.Parameter(torch.ones(1))
    if kind == "sgd":
        w = optim.SGD([{"params": [wa]}, {"params": [wb_], "lr": 0.05}], lr=0.1, momentum=0.9)
        t = torch.optim.SGD([{"params": [ta]}, {"params": [tb], "lr": 0.05}], lr=0.1, momentum=0.9)
    else:
        w = optim.Adam([{"params": [wa]}, {"params": [wb_], "lr": 0.05}], lr=0.1)
        t = torch.optim.Adam([{"params": [ta]}, {"params": [tb], "lr": 0.05}], lr=0.1)
    return w, t


@pytest.mark.filterwarnings("ignore::UserWarning")  # torch: scheduler.step() before opt.step()
@pytest.mark.parametrize("kind", ["sgd", "adam"])
@pytest.mark.parametrize("make_wb, make_torch", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_schedule_matches_torch(make_wb, make_torch, kind):
    wopt, topt = _optimizers(kind)
    ws, ts = make_wb(wopt), make_torch(topt)
    key = "momentum" if kind == "sgd" else "betas"
    for step in range(STEPS):
        np.testing.assert_allclose(
            ws.get_last_lr(), ts.get_last_lr(), rtol=1e-9, err_msg=f"step {step}"
        )
        assert [g["lr"] for g in wopt.param_groups] == ws.get_last_lr()
        for gw, gt in zip(wopt.param_groups, topt.param_groups, strict=True):
            np.testing.assert_allclose(gw[key], gt[key], rtol=1e-9, err_msg=f"{key} step {step}")
        topt.step()
        ws.step()
        ts.step()


def test_warmup_cosine_helper():
    w = wb.Var(wb.ones(1))
    opt = optim.SGD([w], lr=1.0)
    sched = optim.warmup_cosine(opt, warmup_steps=4, total_steps=12, start_factor=0.25)
    lrs = []
    for _ in range(13):
        lrs.append(opt.lr)
        sched.step()
    np.testing.assert_allclose(lrs[:5], [0.25, 0.4375, 0.625, 0.8125, 1.0])
    assert lrs[12] == pytest.approx(0.0, abs=1e-12)
    assert lrs[8] == pytest.approx(0.5)


def test_one_cycle_errors():
    w = wb.Var(wb.ones(1))
    with pytest.raises(optim.OptimizerError, match="total_steps"):
        wls.OneCycleLR(optim.SGD([w], momentum=0.9), 0.1)
    s = wls.OneCycleLR(optim.SGD([w], momentum=0.9), 0.1, total_steps=2)
    s.step()
    s.step()
    with pytest.raises(optim.OptimizerError, match="more than total_steps=2"):
        s.step()


@pytest.mark.parametrize("norm_type", [2.0, 1.0, math.inf])
@pytest.mark.parametrize("max_norm", [0.5, 100.0])
def test_clip_grad_norm_matches_torch(norm_type, max_norm):
    rng = np.random.default_rng(0)
    grads = [rng.standard_normal(s).astype(np.float32) for s in [(3, 4), (5,)]]
    tps = [torch.nn.Parameter(torch.zeros(g.shape)) for g in grads]
    for p, g in zip(tps, grads, strict=True):
        p.grad = torch.tensor(g)
    t_total = torch.nn.utils.clip_grad_norm_(tps, max_norm, norm_type)
    # on .grad
    wps = [wb.Var(wb.zeros(*g.shape)) for g in grads]
    for p, g in zip(wps, grads, strict=True):
        p.grad = wb.tensor(g)
    total = optim.clip_grad_norm_(wps, max_norm, norm_type)
    assert total.item() == pytest.approx(t_total.item(), rel=1e-5)
    for w, t in zip(wps, tps, strict=True):
        np.testing.assert_allclose(w.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-7)
    # on a GradStore, shared gradient tensors are not scaled twice
    store = wb.GradStore()
    shared = wb.tensor(grads[0])
    a, b = wb.Var(wb.zeros(3, 4)), wb.Var(wb.zeros(3, 4))
    store.insert(a, shared)
    store.insert(b, shared)
    optim.clip_grad_norm_([a, b], max_norm, norm_type, grads=store)
    np.testing.assert_array_equal(store[a].numpy(), store[b].numpy())
    np.testing.assert_array_equal(shared.numpy(), grads[0])  # not written in place


def test_clip_grad_value():
    w = wb.Var(wb.zeros(3))
    w.grad = wb.tensor([-2.0, 0.5, 3.0])
    optim.clip_grad_value_([w], 1.0)
    np.testing.assert_array_equal(w.grad.numpy(), [-1.0, 0.5, 1.0])
    w.grad = wb.tensor([np.inf, 0.0, 0.0])
    with pytest.raises(wb.WorkbenchError, match="not finite"):
        optim.clip_grad_norm_([w], 1.0, error_if_nonfinite=True)
