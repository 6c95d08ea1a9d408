"""The fused Adam/AdamW step (kernels/cpu/core/optim.c through ``CpuStorage.adam_step``)
against torch.optim.Adam/AdamW over many steps, in f32 and f64: with and without weight decay,
amsgrad, maximize, β₁ < 0.5 (torch's other lerp form), sizes past the threading threshold
(2^16 elements); and the cases the kernel declines (f16, strided gradients), which take the
optimizer's generic rule."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import workbench as wb
from workbench import optim
from workbench.backends.cpu import optim as cpu_optim

pytestmark = pytest.mark.skipif(
    not cpu_optim._NATIVE_OPTIM, reason="the native CPU kernels are not built"
)

STEPS = 60
SHAPES = [(7,), (33, 31), ((1 << 16) + 5,)]
CONFIGS = {
    "adam": (optim.Adam, torch.optim.Adam, dict(lr=0.01)),
    "adam_wd": (optim.Adam, torch.optim.Adam, dict(lr=0.01, weight_decay=0.1)),
    "adam_amsgrad_maximize": (optim.Adam, torch.optim.Adam,
                              dict(lr=0.02, betas=(0.8, 0.99), amsgrad=True, maximize=True)),
    "adam_small_beta1": (optim.Adam, torch.optim.Adam,
                         dict(lr=0.01, betas=(0.3, 0.9), weight_decay=0.05)),
    "adamw": (optim.AdamW, torch.optim.AdamW, dict(lr=0.01)),
    "adamw_amsgrad": (optim.AdamW, torch.optim.AdamW,
                      dict(lr=0.005, weight_decay=0.2, amsgrad=True, eps=1e-6)),
    "adamw_maximize_no_wd": (optim.AdamW, torch.optim.AdamW,
                             dict(lr=0.01, weight_decay=0.0, maximize=True)),
}  # fmt: skip
TOL = {np.float32: dict(rtol=2e-5, atol=1e-6), np.float64: dict(rtol=1e-11, atol=1e-13)}


@pytest.fixture
def calls(monkeypatch):
    """Counts the kernel's calls (so a test knows which path ran)."""
    count = [0]
    kernel = cpu_optim._ADAM

    def counted(*args):
        count[0] += 1
        return kernel(*args)

    monkeypatch.setattr(cpu_optim, "_ADAM", counted)
    return count


def run(config, np_dtype, grad_view=None, steps=STEPS):
    """``steps`` steps of workbench's and torch's optimizer on the same gradients, the
    parameters compared after each (torch in the parameters' dtype)."""
    wb_cls, torch_cls, kwargs = CONFIGS[config]
    rng = np.random.default_rng(3)
    init = [rng.standard_normal(s).astype(np_dtype) for s in SHAPES]
    params = [wb.Var(wb.tensor(a)) for a in init]
    tparams = [torch.nn.Parameter(torch.from_numpy(a.copy())) for a in init]
    opt, topt = wb_cls(params, **kwargs), torch_cls(tparams, **kwargs)
    for step in range(steps):
        grads = [rng.standard_normal(s).astype(np_dtype) for s in SHAPES]
        for p, tp, g in zip(params, tparams, grads, strict=True):
            tp.grad = torch.from_numpy(g)
            p.grad = wb.tensor(g) if grad_view is None else grad_view(g)
        opt.step()
        topt.step()
        for i, (p, tp) in enumerate(zip(params, tparams, strict=True)):
            np.testing.assert_allclose(
                p.numpy(),
                tp.detach().numpy(),
                **TOL[np_dtype],
                err_msg=f"{config}: step {step + 1}, parameter {i}",
            )
    for p, tp in zip(params, tparams, strict=True):  # the state too
        state, tstate = opt.state[id(p)], topt.state[tp]
        for name in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq"):
            if name in tstate:
                np.testing.assert_allclose(
                    state[name].numpy(), tstate[name].numpy(), **TOL[np_dtype], err_msg=name
                )


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("np_dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_matches_torch(config, np_dtype, calls):
    run(config, np_dtype)
    assert calls[0] == STEPS * len(SHAPES)


def test_strided_gradients_take_the_generic_rule(calls):
    """A transposed (non-contiguous) gradient is declined: the numpy rule runs, and agrees."""

    def grad_view(g):
        if g.ndim != 2:
            return wb.tensor(g)
        return wb.tensor(np.ascontiguousarray(g.T)).transpose(0, 1)

    run("adamw_amsgrad", np.float32, grad_view, steps=5)
    assert calls[0] == 5 * (len(SHAPES) - 1)


def test_half_parameters_take_the_generic_rule(calls):
    p = wb.Var(wb.tensor(np.ones(5, np.float16)))
    opt = optim.AdamW([p], lr=0.1)
    p.grad = wb.tensor(np.ones(5, np.float16))
    opt.step()
    assert calls[0] == 0
    # torch's AdamW from p = 1, g = 1, one step: p (1 - lr λ) - lr · 1 / (1 + ε)
    np.testing.assert_allclose(p.numpy().astype(np.float64), 1 - 0.1 * 0.01 - 0.1, rtol=1e-3)


def test_the_step_bumps_the_parameter_version():
    p = wb.Var(wb.tensor(np.ones(4, np.float32)))
    opt = optim.Adam([p])
    before = p._storage.version
    p.grad = wb.tensor(np.ones(4, np.float32))
    opt.step()
    assert p._storage.version > before


@pytest.mark.parametrize("config", list(CONFIGS))
def test_the_numpy_rule_still_matches_torch(config, monkeypatch):
    """Without the kernel (WORKBENCH_NATIVE=0, other builds) the numpy rule runs."""
    monkeypatch.setattr(cpu_optim, "_NATIVE_OPTIM", "")
    run(config, np.float32, steps=10)
