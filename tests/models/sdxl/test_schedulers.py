"""The schedulers against diffusers' (goldens from tests/fixtures/sdxl_goldens/schedulers.py,
read without diffusers): schedules, multi-step trajectories with a fake model, img2img."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import workbench as wb
from workbench.io.safetensors import open_safetensors
from workbench.models.stable_diffusion.schedulers import (
    SDXL_BASE_SCHEDULER,
    SDXL_TURBO_SCHEDULER,
    DDIMScheduler,
    DPMSolverMultistepScheduler,
    EulerAncestralDiscreteScheduler,
    EulerDiscreteScheduler,
    make_scheduler,
)

GOLDEN = Path(__file__).resolve().parents[2] / "fixtures" / "sdxl" / "schedulers.safetensors"
_FILE = open_safetensors(GOLDEN)
CASES = json.loads(_FILE.metadata["cases"])
BASE = CASES["base"]
CLASSES = {
    "euler": EulerDiscreteScheduler,
    "euler_a": EulerAncestralDiscreteScheduler,
    "ddim": DDIMScheduler,
    "dpm": DPMSolverMultistepScheduler,
}


@pytest.fixture(scope="module")
def g() -> dict[str, np.ndarray]:
    return {k: np.array(_FILE.get_tensor(k).numpy()) for k in _FILE}


def _build(case):
    return CLASSES[case["kind"]].from_config({**BASE, **case["config"]})


def _model(sample: wb.Tensor, t, fixed: wb.Tensor) -> wb.Tensor:
    """The goldens' fake denoiser: 0.3 x + 0.1 t/1000 · fixed."""
    return sample * 0.3 + fixed * (0.1 * float(np.float32(t)) / 1000.0)


def _close(ours: np.ndarray, ref: np.ndarray, rtol: float = 1e-5, what: str = "") -> None:
    assert ours.shape == ref.shape, f"{what}: shape {ours.shape} vs {ref.shape}"
    err = np.abs(ours - ref).max() / max(np.abs(ref).max(), 1e-6)
    assert err < rtol, f"{what}: relative max error {err:.3g}"


def test_alphas_cumprod(g):
    _close(EulerDiscreteScheduler.from_config(BASE).alphas_cumprod, g["alphas_cumprod"], 1e-6)


@pytest.mark.parametrize("case", CASES["schedules"], ids=lambda c: c["key"][len("schedule.") :])
def test_schedule(g, case):
    sched = _build(case)
    sched.set_timesteps(case["steps"])
    key = case["key"]
    ts = g[f"{key}.timesteps"]
    assert sched.timesteps.shape == ts.shape
    np.testing.assert_allclose(sched.timesteps.astype(np.float64), ts, rtol=1e-6, atol=1e-4)
    if f"{key}.sigmas" in g:
        _close(sched.sigmas, g[f"{key}.sigmas"], 1e-6, "sigmas")
    assert sched.init_noise_sigma == pytest.approx(float(g[f"{key}.init_noise_sigma"][0]), 1e-6)
    assert len(sched.timesteps) == sched.num_inference_steps


def test_timestep_dtypes():
    classes = (EulerDiscreteScheduler, DDIMScheduler, DPMSolverMultistepScheduler)
    euler, ddim, dpm = (cls.from_config(BASE) for cls in classes)
    for sched in (euler, ddim, dpm):
        sched.set_timesteps(4)
    assert euler.timesteps.dtype == np.float32  # fractional with Karras sigmas
    assert ddim.timesteps.dtype == dpm.timesteps.dtype == np.int64


@pytest.mark.parametrize("case", CASES["trajectories"], ids=lambda c: c["key"])
def test_trajectory(g, case):
    key = f"traj.{case['key']}"
    sched = _build(case)
    if "eta" in case:
        sched.eta = case["eta"]
    sched.set_timesteps(case["steps"])
    fixed = wb.from_numpy(g[f"{key}.fixed"])
    x = wb.from_numpy(g[f"{key}.start"])
    for i, t in enumerate(sched.timesteps):
        m = _model(sched.scale_model_input(x, t), t, fixed)
        noise = g.get(f"{key}.noise{i}")
        x = sched.step(m, t, x, noise=None if noise is None else wb.from_numpy(noise))
        _close(x.numpy(), g[f"{key}.step{i}"], 2e-6, f"step {i} at t={t}")
    assert sched.step_index == len(sched.timesteps)


@pytest.mark.parametrize("case", CASES["img2img"], ids=lambda c: c["key"])
def test_img2img(g, case):
    key = case["key"]
    sched = _build(case)
    sched.set_timesteps(case["steps"])
    begin = case["begin"] * sched.order
    timesteps = sched.timesteps[begin:]
    sched.set_begin_index(begin)
    x = sched.add_noise(
        wb.from_numpy(g[f"{key}.x0"]), wb.from_numpy(g[f"{key}.noise"]), timesteps[0]
    )
    _close(x.numpy(), g[f"{key}.noised"], 1e-5, "add_noise")
    fixed = wb.from_numpy(g[f"{key}.fixed"])
    for i, t in enumerate(timesteps[:2]):
        m = _model(sched.scale_model_input(x, t), t, fixed)
        noise = g.get(f"{key}.noise{i}")
        x = sched.step(m, t, x, noise=None if noise is None else wb.from_numpy(noise))
        _close(x.numpy(), g[f"{key}.step{i}"], 2e-6, f"step {i}")


def test_add_noise_per_sample_timesteps():
    """Without a begin index each sample's t is looked up (Euler: x + σ_t ε)."""
    sched = EulerDiscreteScheduler.from_config(BASE)
    sched.set_timesteps(4)
    x0, noise = wb.zeros(2, 1, 2, 2), wb.ones(2, 1, 2, 2)
    out = sched.add_noise(x0, noise, sched.timesteps[[0, 2]]).numpy()
    np.testing.assert_allclose(out[:, 0, 0, 0], sched.sigmas[[0, 2]], rtol=1e-6)


def test_ancestral_rng_is_reproducible():
    def run(seed):
        sched = make_scheduler("euler_a", SDXL_TURBO_SCHEDULER)
        sched.set_timesteps(2)
        x = wb.ones(1, 4, 2, 2)
        rng = np.random.default_rng(seed)
        for t in sched.timesteps:
            x = sched.step(wb.zeros(1, 4, 2, 2), t, x, rng=rng)
        return x.numpy()

    np.testing.assert_array_equal(run(3), run(3))
    assert not np.allclose(run(3), run(4))


@pytest.mark.parametrize("name", ["euler", "euler_a", "ddim", "dpm++2m", "dpm++2m_karras"])
def test_make_scheduler(name):
    sched = make_scheduler(name, BASE)
    sched.set_timesteps(4)
    assert sched.order == 1 and len(sched.timesteps) == 4
    assert sched.config.timestep_spacing == "leading" and sched.config.steps_offset == 1
    if name.startswith("dpm"):
        assert sched.config.use_karras_sigmas == name.endswith("karras")


def test_sdxl_configs():
    euler = make_scheduler("euler")  # SDXL base by default
    euler.set_timesteps(1)
    assert euler.timesteps.tolist() == [1.0]  # leading + steps_offset
    turbo = make_scheduler("euler_a", SDXL_TURBO_SCHEDULER)
    turbo.set_timesteps(1)
    assert turbo.timesteps.tolist() == [999.0]
    assert turbo.init_noise_sigma == pytest.approx(float(turbo.sigmas[0]))  # trailing: σ_max
    ddim = make_scheduler("ddim", SDXL_BASE_SCHEDULER)
    assert not ddim.config.clip_sample and not ddim.config.set_alpha_to_one


def test_unknown_scheduler_name():
    with pytest.raises(ValueError, match=r"unknown scheduler 'heun'.*euler, euler_a, ddim"):
        make_scheduler("heun", BASE)


@pytest.mark.parametrize("name", ["euler", "euler_a", "ddim", "dpm++2m"])
def test_step_without_set_timesteps(name):
    sched = make_scheduler(name, BASE)
    x = wb.zeros(1, 4, 2, 2)
    with pytest.raises(wb.WorkbenchError, match=r"call set_timesteps\(num_inference_steps\) first"):
        sched.step(x, 999, x)


@pytest.mark.parametrize("steps", [0, -3, 1001, 2.5, True])
def test_bad_step_counts(steps):
    sched = make_scheduler("euler", BASE)
    with pytest.raises(ValueError, match=r"num_inference_steps must be an int in \[1, 1000\]"):
        sched.set_timesteps(steps)


def test_timestep_not_in_schedule():
    sched = make_scheduler("euler", BASE)
    sched.set_timesteps(4)
    x = wb.zeros(1, 4, 2, 2)
    with pytest.raises(ValueError, match="timestep 500.0 is not in the schedule"):
        sched.step(x, 500, x)


def test_unsupported_config():
    with pytest.raises(NotImplementedError, match="beta_schedule='cosine'"):
        make_scheduler("euler", {**BASE, "beta_schedule": "cosine"})
    with pytest.raises(NotImplementedError, match="timestep_spacing='middle'"):
        make_scheduler("ddim", {**BASE, "timestep_spacing": "middle"}).set_timesteps(2)
    with pytest.raises(NotImplementedError, match="algorithm_type='sde-dpmsolver\\+\\+'"):
        DPMSolverMultistepScheduler.from_config({**BASE, "algorithm_type": "sde-dpmsolver++"})
    with pytest.raises(NotImplementedError, match="prediction_type='sample'"):
        EulerAncestralDiscreteScheduler.from_config({**BASE, "prediction_type": "sample"})


def test_noise_shape_checked():
    sched = make_scheduler("euler_a", BASE)
    sched.set_timesteps(2)
    x = wb.zeros(1, 4, 2, 2)
    with pytest.raises(wb.ShapeError, match="noise"):
        sched.step(x, sched.timesteps[0], x, noise=wb.zeros(1, 4, 3, 3))


def test_f16_sample_keeps_dtype():
    sched = make_scheduler("euler", BASE)
    sched.set_timesteps(2)
    x = wb.ones(1, 4, 2, 2, dtype=wb.f16)
    out = sched.step(x, sched.timesteps[0], x)
    assert out.dtype == wb.f16
