"""Samplers for the SDXL latents, with diffusers' semantics for the keys of its
``scheduler_config.json``: Euler, Euler ancestral, DDIM and DPM-Solver++(2M), with Karras sigmas.

The training noise schedule (T = ``num_train_timesteps`` = 1000 for SDXL):

- betas: ``linear`` β_t = linspace(β₀, β₁, T), ``scaled_linear`` (SDXL)
  β_t = linspace(√β₀, √β₁, T)², ``squaredcos_cap_v2`` from the cosine ᾱ(t);
- ᾱ_t = Π_{s≤t} (1 - β_s) (``alphas_cumprod``), and the noise level of the variance-exploding
  view σ_t = √((1 - ᾱ_t) / ᾱ_t): x_t = x₀ + σ_t ε for the Euler family, x_t = √ᾱ_t x₀ +
  √(1 - ᾱ_t) ε = (x₀ + σ_t ε) / √(σ_t² + 1) for DDIM / DPM.

``set_timesteps(n)`` picks n of the T training steps (``timestep_spacing``):
``leading`` t_i = i·⌊T/n⌋ + ``steps_offset`` (i = n-1 .. 0, SDXL base), ``trailing``
t_i = round(T - i·T/n) - 1 (i = 0 .. n-1, SDXL-Turbo: 1 step is t = 999), ``linspace``
t = linspace(0, T-1, n) reversed. σ at those t is interpolated linearly in t; with Karras sigmas
(ρ = 7) σ_i = (σ_max^(1/ρ) + i/(n-1) (σ_min^(1/ρ) - σ_max^(1/ρ)))^ρ and t is mapped back from σ
by interpolating log σ. The schedule ends at σ = 0 (``final_sigmas_type="zero"``).

A sampling loop::

    sched = make_scheduler("euler", json.load(open("scheduler/scheduler_config.json")))
    sched.set_timesteps(30)
    x = noise * sched.init_noise_sigma
    for t in sched.timesteps:
        eps = unet(sched.scale_model_input(x, t), t, ...)
        x = sched.step(eps, t, x, rng=rng)

Latents are workbench tensors; the update is computed in f32 and returned in the sample's dtype.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from ... import dtype as dt
from ...errors import ShapeError, WorkbenchError
from ...ops import creation
from ...tensor import Tensor

__all__ = [
    "SDXL_BASE_SCHEDULER", "SDXL_TURBO_SCHEDULER", "SCHEDULERS", "DDIMScheduler",
    "DPMSolverMultistepScheduler", "EulerAncestralDiscreteScheduler", "EulerDiscreteScheduler",
    "SchedulerConfig", "make_scheduler",
]  # fmt: skip

# ``stabilityai/stable-diffusion-xl-base-1.0/scheduler/scheduler_config.json`` (Euler)
SDXL_BASE_SCHEDULER: dict[str, Any] = {
    "_class_name": "EulerDiscreteScheduler", "beta_end": 0.012, "beta_schedule": "scaled_linear",
    "beta_start": 0.00085, "clip_sample": False, "interpolation_type": "linear",
    "num_train_timesteps": 1000, "prediction_type": "epsilon", "sample_max_value": 1.0,
    "set_alpha_to_one": False, "skip_prk_steps": True, "steps_offset": 1,
    "timestep_spacing": "leading", "trained_betas": None, "use_karras_sigmas": False,
}  # fmt: skip
# ``stabilityai/sdxl-turbo``: Euler ancestral with trailing spacing (1 step samples t = 999)
SDXL_TURBO_SCHEDULER: dict[str, Any] = {
    **SDXL_BASE_SCHEDULER,
    "_class_name": "EulerAncestralDiscreteScheduler",
    "timestep_spacing": "trailing",
}


@dataclass(frozen=True)
class SchedulerConfig:
    """The diffusers config keys the schedulers read; each scheduler class has its own
    defaults for the missing ones (as diffusers)."""

    num_train_timesteps: int = 1000
    beta_start: float = 0.0001
    beta_end: float = 0.02
    beta_schedule: str = "linear"
    trained_betas: tuple[float, ...] | None = None
    prediction_type: str = "epsilon"
    timestep_spacing: str = "linspace"
    steps_offset: int = 0
    interpolation_type: str = "linear"
    use_karras_sigmas: bool = False
    sigma_min: float | None = None
    sigma_max: float | None = None
    final_sigmas_type: str = "zero"
    rescale_betas_zero_snr: bool = False
    # DDIM
    clip_sample: bool = True
    clip_sample_range: float = 1.0
    set_alpha_to_one: bool = True
    thresholding: bool = False
    # DPM-Solver
    solver_order: int = 2
    algorithm_type: str = "dpmsolver++"
    solver_type: str = "midpoint"
    lower_order_final: bool = True
    euler_at_final: bool = False
    use_exponential_sigmas: bool = False
    use_beta_sigmas: bool = False
    timestep_type: str = "discrete"

    @classmethod
    def from_dict(cls, config: dict[str, Any], **defaults) -> SchedulerConfig:
        """Known keys of ``config`` over ``defaults`` over the field defaults; a key set to
        null keeps its default (except the optional ones)."""
        known = {f.name for f in fields(cls)}
        optional = {"trained_betas", "sigma_min", "sigma_max"}
        values = dict(defaults)
        for key, value in config.items():
            if key in known and (value is not None or key in optional):
                values[key] = value
        if values.get("trained_betas") is not None:
            values["trained_betas"] = tuple(float(b) for b in values["trained_betas"])
        return cls(**values)


def _unsupported(name: str, what: str, value, allowed) -> NotImplementedError:
    return NotImplementedError(
        f"{name}: {what}={value!r} is not supported (supported: {', '.join(map(repr, allowed))})"
    )


def _linspace_f32(start: float, end: float, n: int) -> np.ndarray:
    """``torch.linspace(start, end, n, dtype=float32)`` bit for bit: the first half counts up
    from ``start``, the second half down from ``end``, each value rounded once to f32."""
    if n == 1:
        return np.array([start], np.float32)
    lo, hi = float(np.float32(start)), float(np.float32(end))
    step = float(np.float32((end - start) / (n - 1)))
    i = np.arange(n, dtype=np.float64)
    return np.where(i < n // 2, lo + step * i, hi - step * (n - 1 - i)).astype(np.float32)


def _alphas_cumprod(cfg: SchedulerConfig, name: str) -> np.ndarray:
    """ᾱ_t (T,) in f32, rounded as diffusers' (torch's f32 linspace, a running product
    accumulated in f64)."""
    n = cfg.num_train_timesteps
    if cfg.trained_betas is not None:
        betas = np.asarray(cfg.trained_betas, np.float32)
    elif cfg.beta_schedule == "linear":
        betas = _linspace_f32(cfg.beta_start, cfg.beta_end, n)
    elif cfg.beta_schedule == "scaled_linear":
        root = _linspace_f32(cfg.beta_start**0.5, cfg.beta_end**0.5, n)
        betas = root * root
    elif cfg.beta_schedule == "squaredcos_cap_v2":

        def alpha_bar(t: float) -> float:
            return math.cos((t + 0.008) / 1.008 * math.pi / 2) ** 2

        betas = np.array(
            [min(1 - alpha_bar((i + 1) / n) / alpha_bar(i / n), 0.999) for i in range(n)],
            np.float32,
        )
    else:
        raise _unsupported(
            name,
            "beta_schedule",
            cfg.beta_schedule,
            ("linear", "scaled_linear", "squaredcos_cap_v2"),
        )
    if cfg.rescale_betas_zero_snr:
        raise _unsupported(name, "rescale_betas_zero_snr", True, (False,))
    return np.cumprod((np.float32(1.0) - betas).astype(np.float64)).astype(np.float32)


def _spaced_timesteps(cfg: SchedulerConfig, n: int, name: str) -> np.ndarray:
    """The n training steps sampled, high to low (float64; callers cast)."""
    big_t = cfg.num_train_timesteps
    if cfg.timestep_spacing == "linspace":
        return np.linspace(0, big_t - 1, n)[::-1].copy()
    if cfg.timestep_spacing == "leading":
        return (np.arange(0, n) * (big_t // n)).round()[::-1].astype(np.float64) + cfg.steps_offset
    if cfg.timestep_spacing == "trailing":
        return np.arange(big_t, 0, -big_t / n).round() - 1
    raise _unsupported(
        name, "timestep_spacing", cfg.timestep_spacing, ("leading", "trailing", "linspace")
    )


def _karras(sigma_min: float, sigma_max: float, n: int) -> np.ndarray:
    """Karras et al. (2022) noise levels, ρ = 7: σ_max down to σ_min, uniform in σ^(1/ρ)."""
    rho = 7.0
    ramp = np.linspace(0, 1, n)
    lo, hi = sigma_min ** (1 / rho), sigma_max ** (1 / rho)
    return (hi + ramp * (lo - hi)) ** rho


def _sigma_to_t(sigmas: np.ndarray, log_sigmas: np.ndarray) -> np.ndarray:
    """Fractional training steps t with σ_t = ``sigmas``: linear interpolation of log σ between
    the neighbouring training steps (``log_sigmas`` increasing in t), clipped to [0, T-1]."""
    log_sigma = np.log(np.maximum(sigmas, 1e-10))
    low = np.searchsorted(log_sigmas, log_sigma, side="right") - 1
    low = np.clip(low, 0, len(log_sigmas) - 2)
    lo, hi = log_sigmas[low], log_sigmas[low + 1]
    w = np.clip((lo - log_sigma) / (lo - hi), 0, 1)
    return (1 - w) * low + w * (low + 1)


def _scalar_t(t) -> float:
    if isinstance(t, Tensor):
        if t.numel != 1:
            raise ShapeError(f"expected one timestep, found a tensor of shape {t.shape}")
        return float(t.item())
    return float(np.asarray(t).reshape(()))


def _batch_t(t, batch: int) -> np.ndarray:
    """Timesteps as a (B,) float array: a number, a (B,) sequence/array or a tensor."""
    values = t.numpy() if isinstance(t, Tensor) else np.asarray(t)
    values = np.asarray(values, np.float64).reshape(-1)
    if values.size == 1:
        return np.full(batch, values[0])
    if values.size != batch:
        raise ShapeError(f"add_noise: {values.size} timesteps for a batch of {batch}")
    return values


def _per_sample(coef: np.ndarray, like: Tensor) -> Tensor:
    """A (B,) coefficient as a (B, 1, ..., 1) f32 tensor on ``like``'s device."""
    shape = (coef.shape[0],) + (1,) * (like.ndim - 1)
    return creation.from_numpy(coef.astype(np.float32).reshape(shape), like.device)


def _f32(x: Tensor) -> Tensor:
    return x.to_dtype(dt.f32)


class _Scheduler:
    """What every scheduler shares: the config, ᾱ, the timestep lookup and the step counter."""

    order = 1
    _defaults: dict[str, Any] = {}
    _predictions: tuple[str, ...] = ("epsilon", "v_prediction", "sample")

    def __init__(self, config: SchedulerConfig | None = None, **overrides):
        name = type(self).__name__
        cfg = config if config is not None else SchedulerConfig.from_dict({}, **self._defaults)
        cfg = replace(cfg, **overrides) if overrides else cfg
        if cfg.prediction_type not in self._predictions:
            raise _unsupported(name, "prediction_type", cfg.prediction_type, self._predictions)
        if cfg.thresholding:
            raise _unsupported(name, "thresholding", True, (False,))
        if cfg.timestep_type != "discrete":
            raise _unsupported(name, "timestep_type", cfg.timestep_type, ("discrete",))
        if cfg.use_exponential_sigmas or cfg.use_beta_sigmas:
            raise NotImplementedError(f"{name}: only Karras sigmas are supported as a respacing")
        self.config = cfg
        self.alphas_cumprod = _alphas_cumprod(cfg, name)
        self.num_inference_steps: int | None = None
        self.timesteps = np.zeros(0, np.float32)
        self._step_index: int | None = None
        self._begin_index: int | None = None

    @classmethod
    def from_config(cls, config: dict[str, Any] | SchedulerConfig, **overrides):
        """From diffusers' ``scheduler_config.json`` dict (unknown keys ignored, so another
        scheduler's config works, as diffusers' ``from_config``); ``overrides`` win."""
        if isinstance(config, SchedulerConfig):
            return cls(config, **overrides)
        return cls(SchedulerConfig.from_dict({**config, **overrides}, **cls._defaults))

    # -- schedule ------------------------------------------------------------------------
    def _check_steps(self, n) -> int:
        big_t = self.config.num_train_timesteps
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 1 <= n <= big_t:
            raise ValueError(
                f"{type(self).__name__}.set_timesteps: num_inference_steps must be an int in "
                f"[1, {big_t}] (num_train_timesteps), found {n!r}"
            )
        return int(n)

    def set_timesteps(self, num_inference_steps: int) -> None:
        raise NotImplementedError

    def _require_timesteps(self, what: str) -> None:
        if self.num_inference_steps is None:
            raise WorkbenchError(
                f"{type(self).__name__}.{what}: call set_timesteps(num_inference_steps) first"
            )

    @property
    def step_index(self) -> int | None:
        """Index into ``timesteps`` of the next step (None before the first one)."""
        return self._step_index

    @property
    def begin_index(self) -> int | None:
        return self._begin_index

    def set_begin_index(self, begin_index: int = 0) -> None:
        """Start at ``timesteps[begin_index]`` (img2img, which skips the noisiest steps)."""
        n = len(self.timesteps)
        if not 0 <= begin_index < max(n, 1):
            raise ValueError(
                f"{type(self).__name__}.set_begin_index: {begin_index} is outside the {n} timesteps"
            )
        self._begin_index = int(begin_index)

    def index_for_timestep(self, t) -> int:
        """Position of ``t`` in ``timesteps``; the second match when t repeats (so a schedule
        started mid-way does not skip a σ), as diffusers."""
        value = _scalar_t(t)
        matches = np.flatnonzero(self.timesteps == value)
        if len(matches) == 0:
            raise ValueError(
                f"{type(self).__name__}: timestep {value} is not in the schedule "
                f"{self.timesteps.tolist()}; pass values of .timesteps"
            )
        return int(matches[1] if len(matches) > 1 else matches[0])

    def _init_step_index(self, t) -> None:
        if self._step_index is None:
            self._step_index = (
                self.index_for_timestep(t) if self._begin_index is None else self._begin_index
            )

    def _noise_indices(self, t, batch: int) -> list[int]:
        """Schedule positions for ``add_noise`` (diffusers' rule)."""
        if self._begin_index is None:
            return [self.index_for_timestep(v) for v in _batch_t(t, batch)]
        index = self._step_index if self._step_index is not None else self._begin_index
        return [index] * batch

    def scale_model_input(self, sample: Tensor, t) -> Tensor:
        """The UNet's input at ``t`` (identity unless the scheduler says otherwise)."""
        return sample

    def _draw(self, like: Tensor, noise: Tensor | None, rng: np.random.Generator | None) -> Tensor:
        if noise is not None:
            if noise.shape != like.shape:
                raise ShapeError(
                    f"{type(self).__name__}.step: noise {noise.shape} must match the model "
                    f"output {like.shape}"
                )
            return _f32(noise.to(like.device))
        rng = np.random.default_rng() if rng is None else rng
        return creation.from_numpy(rng.standard_normal(like.shape, dtype=np.float32), like.device)

    def __repr__(self) -> str:
        c = self.config
        steps = self.num_inference_steps
        return (
            f"{type(self).__name__}({c.prediction_type}, spacing={c.timestep_spacing}, "
            f"karras={c.use_karras_sigmas}, steps={steps})"
        )

    def __len__(self) -> int:
        return self.config.num_train_timesteps


# -- Euler --------------------------------------------------------------------------------------
class _SigmaScheduler(_Scheduler):
    """Euler-family state: σ per timestep (σ_n = 0 appended), model input x / √(σ² + 1)."""

    def __init__(self, config=None, **overrides):
        super().__init__(config, **overrides)
        ac = self.alphas_cumprod
        self._train_sigmas = np.sqrt((1 - ac) / ac)  # f32, increasing in t
        self.sigmas = np.concatenate([self._train_sigmas[::-1], [0.0]]).astype(np.float32)
        big_t = self.config.num_train_timesteps
        self.timesteps = np.linspace(0, big_t - 1, big_t)[::-1].astype(np.float32)

    @property
    def init_noise_sigma(self) -> float:
        """Scale of the starting noise: σ_max for linspace/trailing spacing, √(σ_max² + 1)
        for leading (diffusers' rule)."""
        top = float(self.sigmas.max())
        if self.config.timestep_spacing in ("linspace", "trailing"):
            return top
        return (top * top + 1) ** 0.5

    def scale_model_input(self, sample: Tensor, t) -> Tensor:
        """x / √(σ_t² + 1): the UNet sees unit-variance input."""
        self._init_step_index(t)
        sigma = float(self.sigmas[self._step_index])
        return sample / (sigma * sigma + 1) ** 0.5

    def _x0(self, model_output: Tensor, sample: Tensor, sigma: float) -> Tensor:
        kind = self.config.prediction_type
        if kind == "epsilon":
            return sample - model_output * sigma
        if kind == "v_prediction":
            return model_output * (-sigma / (sigma * sigma + 1) ** 0.5) + sample / (
                sigma * sigma + 1
            )
        return model_output

    def add_noise(self, original: Tensor, noise: Tensor, t) -> Tensor:
        """x₀ + σ_t ε (img2img), at ``begin_index`` once set, else looked up per sample."""
        self._require_timesteps("add_noise")
        sigma = self.sigmas[self._noise_indices(t, original.shape[0])]
        return _f32(original) + _f32(noise) * _per_sample(sigma, original)


class EulerDiscreteScheduler(_SigmaScheduler):
    """Euler's method on the probability-flow ODE dx/dσ = (x - x̂₀) / σ (Karras et al., 2022,
    Algorithm 2 without churn): x_{i+1} = x_i + (σ_{i+1} - σ_i) (x_i - x̂₀) / σ_i."""

    _defaults = {"timestep_spacing": "linspace"}

    def set_timesteps(self, num_inference_steps: int) -> None:
        n = self._check_steps(num_inference_steps)
        cfg, name = self.config, type(self).__name__
        timesteps = _spaced_timesteps(cfg, n, name).astype(np.float32)
        train = self._train_sigmas
        if cfg.interpolation_type != "linear":
            raise _unsupported(name, "interpolation_type", cfg.interpolation_type, ("linear",))
        sigmas = np.interp(timesteps, np.arange(len(train)), train)
        if cfg.use_karras_sigmas:
            lo = cfg.sigma_min if cfg.sigma_min is not None else float(sigmas[-1])
            hi = cfg.sigma_max if cfg.sigma_max is not None else float(sigmas[0])
            sigmas = _karras(lo, hi, n)
            timesteps = _sigma_to_t(sigmas, np.log(train)).astype(np.float32)
        if cfg.final_sigmas_type == "zero":
            last = 0.0
        elif cfg.final_sigmas_type == "sigma_min":
            last = float(train[0])
        else:
            raise _unsupported(
                name, "final_sigmas_type", cfg.final_sigmas_type, ("zero", "sigma_min")
            )
        self.sigmas = np.concatenate([sigmas, [last]]).astype(np.float32)
        self.timesteps = timesteps
        self.num_inference_steps = n
        self._step_index = self._begin_index = None

    def step(self, model_output: Tensor, t, sample: Tensor, noise=None, rng=None) -> Tensor:
        """x_{i+1} = x_i + (σ_{i+1} - σ_i) (x_i - x̂₀) / σ_i, with x̂₀ from the model output
        (ε: x - σε; v: -σ/√(σ²+1) v + x/(σ²+1))."""
        self._require_timesteps("step")
        self._init_step_index(t)
        i = self._step_index
        sigma, sigma_next = float(self.sigmas[i]), float(self.sigmas[i + 1])
        x = _f32(sample)
        x0 = self._x0(_f32(model_output), x, sigma)
        derivative = (x - x0) / sigma
        out = x + derivative * float(np.float32(sigma_next) - np.float32(sigma))
        self._step_index = i + 1
        return out.to_dtype(sample.dtype)


class EulerAncestralDiscreteScheduler(_SigmaScheduler):
    """Euler ancestral: an Euler step down to σ_down, then fresh noise of scale σ_up, with
    σ_up = √(σ_{i+1}² (σ_i² - σ_{i+1}²) / σ_i²) and σ_down = √(σ_{i+1}² - σ_up²).

    (diffusers' Euler ancestral has no Karras option; ``use_karras_sigmas`` is ignored.)
    """

    _defaults = {"timestep_spacing": "linspace"}
    _predictions = ("epsilon", "v_prediction")

    def set_timesteps(self, num_inference_steps: int) -> None:
        n = self._check_steps(num_inference_steps)
        timesteps = _spaced_timesteps(self.config, n, type(self).__name__).astype(np.float32)
        train = self._train_sigmas
        sigmas = np.interp(timesteps, np.arange(len(train)), train)
        self.sigmas = np.concatenate([sigmas, [0.0]]).astype(np.float32)
        self.timesteps = timesteps
        self.num_inference_steps = n
        self._step_index = self._begin_index = None

    def step(self, model_output: Tensor, t, sample: Tensor, noise=None, rng=None) -> Tensor:
        """x_{i+1} = x_i + (σ_down - σ_i)(x_i - x̂₀)/σ_i + σ_up z, z = ``noise`` or drawn from
        ``rng`` (a fresh generator when both are None)."""
        self._require_timesteps("step")
        self._init_step_index(t)
        i = self._step_index
        s_from, s_to = np.float32(self.sigmas[i]), np.float32(self.sigmas[i + 1])
        sigma_up = np.sqrt(s_to**2 * (s_from**2 - s_to**2) / s_from**2)
        sigma_down = np.sqrt(s_to**2 - sigma_up**2)
        x = _f32(sample)
        x0 = self._x0(_f32(model_output), x, float(s_from))
        derivative = (x - x0) / float(s_from)
        out = x + derivative * float(sigma_down - s_from)
        out = out + self._draw(model_output, noise, rng) * float(sigma_up)
        self._step_index = i + 1
        return out.to_dtype(sample.dtype)


# -- DDIM ---------------------------------------------------------------------------------------
class DDIMScheduler(_Scheduler):
    """DDIM (Song et al., 2021): with x̂₀ and ε̂ from the model output,
    x_prev = √ᾱ_prev x̂₀ + √(1 - ᾱ_prev - s²) ε̂ + s z, s = η √((1-ᾱ_prev)/(1-ᾱ_t) (1 - ᾱ_t/ᾱ_prev)),
    where prev = t - T/n and ᾱ_prev = 1 (``set_alpha_to_one``) or ᾱ_0 below t = 0.
    η = 0 (default) is deterministic. SDXL's config sets ``clip_sample=False`` (the class
    default clips x̂₀ to ±``clip_sample_range``, as diffusers).
    """

    _defaults = {"timestep_spacing": "leading"}

    def __init__(self, config=None, eta: float = 0.0, **overrides):
        super().__init__(config, **overrides)
        self.eta = float(eta)
        big_t = self.config.num_train_timesteps
        self.timesteps = np.arange(big_t)[::-1].astype(np.int64)
        self.final_alpha_cumprod = (
            np.float32(1.0) if self.config.set_alpha_to_one else self.alphas_cumprod[0]
        )
        self.init_noise_sigma = 1.0

    @classmethod
    def from_config(cls, config, eta: float = 0.0, **overrides) -> DDIMScheduler:
        out = super().from_config(config, **overrides)
        out.eta = float(eta)
        return out

    def set_timesteps(self, num_inference_steps: int) -> None:
        n = self._check_steps(num_inference_steps)
        cfg = self.config
        if cfg.timestep_spacing == "linspace":  # DDIM rounds linspace to integers
            timesteps = np.linspace(0, cfg.num_train_timesteps - 1, n).round()[::-1]
        else:
            timesteps = _spaced_timesteps(cfg, n, type(self).__name__)
        self.timesteps = timesteps.astype(np.int64)
        self.num_inference_steps = n
        self._step_index = self._begin_index = None

    def _alpha(self, t: int):
        return self.alphas_cumprod[t] if t >= 0 else self.final_alpha_cumprod

    def step(self, model_output: Tensor, t, sample: Tensor, noise=None, rng=None) -> Tensor:
        self._require_timesteps("step")
        cfg = self.config
        t = int(round(_scalar_t(t)))
        if not 0 <= t < cfg.num_train_timesteps:
            raise ValueError(
                f"DDIMScheduler.step: timestep {t} is outside [0, {cfg.num_train_timesteps})"
            )
        prev = t - cfg.num_train_timesteps // self.num_inference_steps
        a_t, a_prev = np.float32(self._alpha(t)), np.float32(self._alpha(prev))
        b_t = np.float32(1) - a_t
        x, m = _f32(sample), _f32(model_output)
        if cfg.prediction_type == "epsilon":
            x0 = (x - m * float(b_t**0.5)) / float(a_t**0.5)
            eps = m
        elif cfg.prediction_type == "v_prediction":
            x0 = x * float(a_t**0.5) - m * float(b_t**0.5)
            eps = m * float(a_t**0.5) + x * float(b_t**0.5)
        else:
            x0 = m
            eps = (x - x0 * float(a_t**0.5)) / float(b_t**0.5)
        if cfg.clip_sample:
            x0 = x0.clamp(-cfg.clip_sample_range, cfg.clip_sample_range)
        variance = (1 - a_prev) / b_t * (1 - a_t / a_prev)
        std = self.eta * float(variance) ** 0.5
        out = x0 * float(a_prev**0.5) + eps * float((1 - a_prev - std**2) ** 0.5)
        if self.eta > 0:
            out = out + self._draw(model_output, noise, rng) * std
        self._step_index = (self._step_index or 0) + 1
        return out.to_dtype(sample.dtype)

    def add_noise(self, original: Tensor, noise: Tensor, t) -> Tensor:
        """√ᾱ_t x₀ + √(1 - ᾱ_t) ε at the integer timestep(s) ``t``."""
        idx = np.round(_batch_t(t, original.shape[0])).astype(np.int64)
        ac = self.alphas_cumprod[idx]
        return _f32(original) * _per_sample(np.sqrt(ac), original) + _f32(noise) * _per_sample(
            np.sqrt(1 - ac), original
        )


# -- DPM-Solver++ -------------------------------------------------------------------------------
class DPMSolverMultistepScheduler(_Scheduler):
    """DPM-Solver++ (Lu et al., 2022) on data predictions x̂₀, multistep, order 1 or 2
    ("DPM++ 2M"; with ``use_karras_sigmas``: "DPM++ 2M Karras").

    With α = 1/√(σ²+1), σ' = σα, λ = log α - log σ' and h = λ_next - λ_i:
    first order x_next = (σ'_next/σ'_i) x - α_next (e^{-h} - 1) D₀,
    second order (midpoint) adds - ½ α_next (e^{-h} - 1) D₁ with D₁ = (D₀ - x̂₀_prev) h / h_prev.
    The first step, and the last one (σ_next = 0, or fewer than 15 steps with
    ``lower_order_final``), are first order.
    """

    _defaults = {"timestep_spacing": "linspace"}

    def __init__(self, config=None, **overrides):
        super().__init__(config, **overrides)
        cfg, name = self.config, type(self).__name__
        if cfg.algorithm_type != "dpmsolver++":
            raise _unsupported(name, "algorithm_type", cfg.algorithm_type, ("dpmsolver++",))
        if cfg.solver_order not in (1, 2):
            raise _unsupported(name, "solver_order", cfg.solver_order, (1, 2))
        if cfg.solver_type != "midpoint":
            raise _unsupported(name, "solver_type", cfg.solver_type, ("midpoint",))
        if cfg.final_sigmas_type not in ("zero", "sigma_min"):
            raise _unsupported(
                name, "final_sigmas_type", cfg.final_sigmas_type, ("zero", "sigma_min")
            )
        ac = self.alphas_cumprod
        self._train_sigmas = np.sqrt((1 - ac) / ac)
        self.sigmas = self._train_sigmas.copy()
        big_t = cfg.num_train_timesteps
        self.timesteps = np.linspace(0, big_t - 1, big_t)[::-1].astype(np.int64)
        self.init_noise_sigma = 1.0
        self._outputs: list[Tensor] = []

    def set_timesteps(self, num_inference_steps: int) -> None:
        n = self._check_steps(num_inference_steps)
        cfg = self.config
        big_t = cfg.num_train_timesteps
        if cfg.timestep_spacing == "linspace":
            timesteps = np.linspace(0, big_t - 1, n + 1).round()[::-1][:-1]
        elif cfg.timestep_spacing == "leading":
            ratio = big_t // (n + 1)
            timesteps = (np.arange(0, n + 1) * ratio).round()[::-1][:-1] + cfg.steps_offset
        else:
            timesteps = _spaced_timesteps(cfg, n, type(self).__name__)
        timesteps = timesteps.astype(np.int64)
        train = self._train_sigmas
        if cfg.use_karras_sigmas:
            lo = cfg.sigma_min if cfg.sigma_min is not None else float(train[0])
            hi = cfg.sigma_max if cfg.sigma_max is not None else float(train[-1])
            sigmas = _karras(lo, hi, n)
            timesteps = _sigma_to_t(sigmas, np.log(train))
            if cfg.beta_schedule != "squaredcos_cap_v2":
                timesteps = timesteps.round()
            timesteps = timesteps.astype(np.int64)
        else:
            sigmas = np.interp(timesteps, np.arange(len(train)), train)
        last = 0.0 if cfg.final_sigmas_type == "zero" else float(train[0])
        self.sigmas = np.concatenate([sigmas, [last]]).astype(np.float32)
        self.timesteps = timesteps
        self.num_inference_steps = len(timesteps)
        self._outputs = []
        self._step_index = self._begin_index = None

    def index_for_timestep(self, t) -> int:
        """As the base class, but an unknown t maps to the last step (diffusers' rule)."""
        value = _scalar_t(t)
        matches = np.flatnonzero(self.timesteps == value)
        if len(matches) == 0:
            return len(self.timesteps) - 1
        return int(matches[1] if len(matches) > 1 else matches[0])

    @staticmethod
    def _alpha_sigma(sigma: float) -> tuple[float, float]:
        alpha = 1 / (sigma * sigma + 1) ** 0.5
        return alpha, sigma * alpha

    def _lambda(self, sigma: float) -> float:
        alpha, s = self._alpha_sigma(sigma)
        with np.errstate(divide="ignore"):
            return float(np.log(alpha) - np.log(s))

    def step(self, model_output: Tensor, t, sample: Tensor, noise=None, rng=None) -> Tensor:
        self._require_timesteps("step")
        self._init_step_index(t)
        cfg, i, n = self.config, self._step_index, len(self.timesteps)
        lower_final = i == n - 1 and (
            cfg.euler_at_final
            or (cfg.lower_order_final and n < 15)
            or cfg.final_sigmas_type == "zero"
        )
        s_i, s_next = float(self.sigmas[i]), float(self.sigmas[i + 1])
        alpha_i, sig_i = self._alpha_sigma(s_i)
        alpha_next, sig_next = self._alpha_sigma(s_next)
        x, m = _f32(sample), _f32(model_output)
        if cfg.prediction_type == "epsilon":
            x0 = (x - m * sig_i) / alpha_i
        elif cfg.prediction_type == "v_prediction":
            x0 = x * alpha_i - m * sig_i
        else:
            x0 = m
        self._outputs = (
            [*self._outputs[-(cfg.solver_order - 1) :], x0] if cfg.solver_order > 1 else [x0]
        )
        h = self._lambda(s_next) - self._lambda(s_i)
        phi = alpha_next * math.expm1(-h)  # α_next (e^{-h} - 1)
        out = x * (sig_next / sig_i) - x0 * phi
        if cfg.solver_order == 2 and self._lower_order_nums >= 1 and not lower_final:
            h_prev = self._lambda(s_i) - self._lambda(float(self.sigmas[i - 1]))
            d1 = (x0 - self._outputs[-2]) * (h / h_prev)
            out = out - d1 * (0.5 * phi)
        self._step_index = i + 1
        return out.to_dtype(sample.dtype)

    @property
    def _lower_order_nums(self) -> int:
        """How many earlier model outputs the multistep update can use."""
        return len(self._outputs) - 1

    def add_noise(self, original: Tensor, noise: Tensor, t) -> Tensor:
        """α x₀ + σ' ε with α = 1/√(σ²+1), σ' = σα at the schedule position (img2img)."""
        self._require_timesteps("add_noise")
        sigma = self.sigmas[self._noise_indices(t, original.shape[0])].astype(np.float64)
        alpha = 1 / np.sqrt(sigma * sigma + 1)
        return _f32(original) * _per_sample(alpha, original) + _f32(noise) * _per_sample(
            sigma * alpha, original
        )


SCHEDULERS: dict[str, tuple[type[_Scheduler], dict[str, Any]]] = {
    "euler": (EulerDiscreteScheduler, {}),
    "euler_a": (EulerAncestralDiscreteScheduler, {}),
    "ddim": (DDIMScheduler, {}),
    "dpm++2m": (
        DPMSolverMultistepScheduler,
        {"algorithm_type": "dpmsolver++", "solver_order": 2, "use_karras_sigmas": False},
    ),
    "dpm++2m_karras": (
        DPMSolverMultistepScheduler,
        {"algorithm_type": "dpmsolver++", "solver_order": 2, "use_karras_sigmas": True},
    ),
}


def make_scheduler(name: str, config: dict[str, Any] | None = None) -> _Scheduler:
    """The scheduler called ``name`` ("euler", "euler_a", "ddim", "dpm++2m", "dpm++2m_karras")
    built from a diffusers scheduler config (default: SDXL base's), as diffusers'
    ``Scheduler.from_config(pipe.scheduler.config)``."""
    if name not in SCHEDULERS:
        raise ValueError(f"unknown scheduler {name!r}; choose one of {', '.join(SCHEDULERS)}")
    cls, overrides = SCHEDULERS[name]
    return cls.from_config(SDXL_BASE_SCHEDULER if config is None else config, **overrides)
