"""The SDXL text-to-image and image-to-image pipeline, step for step as diffusers'
``StableDiffusionXLPipeline`` / ``StableDiffusionXLImg2ImgPipeline``.

    pipe = StableDiffusionXL.from_pretrained("stabilityai/sdxl-turbo")      # or a folder
    out = pipe("a photo of an astronaut riding a horse on mars", seed=0)   # turbo: 1 step
    out.images[0]                                   # (512, 512, 3) uint8

One denoising step, with classifier-free guidance (CFG) of scale g:

    c   = [CLIP-L penultimate ; bigG penultimate]       (B, 77, 768 + 1280) per prompt
    eps = UNet(scale(x_t), t, [c_neg; c], [pooled_neg; pooled], [ids; ids])   (batched)
    eps = eps_neg + g (eps - eps_neg)                   (when g > 1)
    x_{t-1} = scheduler.step(eps, t, x_t)

with ``ids`` SDXL's micro-conditioning ``original_size + crop_top_left + target_size``
(6 numbers per image). The image is ``VAE.decode(x_0 / scaling_factor)``.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np

from ... import nn
from ...autograd import no_grad
from ...device import Device
from ...dtype import f32
from ...memory import memory_stats, reset_peak_memory_stats
from ...ops.creation import from_numpy, zeros_like
from ...ops.shape import cat
from ...tensor import Tensor
from . import load as _load
from . import schedulers as _schedulers
from .clip import ClipTextConfig, ClipTextModel
from .tokenizer import ClipTokenizer
from .unet import UNet2DConditionModel, UNetConfig
from .vae import AutoencoderKL, VaeConfig

__all__ = ["SCHEDULER_CLASSES", "SdxlOutput", "StableDiffusionXL", "to_uint8"]

# diffusers' class names (scheduler_config.json "_class_name") -> ``make_scheduler`` names
SCHEDULER_CLASSES = {
    "EulerDiscreteScheduler": "euler",
    "EulerAncestralDiscreteScheduler": "euler_a",
    "DDIMScheduler": "ddim",
    "DPMSolverMultistepScheduler": "dpm++2m",
}


@dataclass
class SdxlOutput:
    """What a pipeline call returns.

    ``images``: one ``(H, W, 3)`` uint8 array per prompt; ``latents``: the final latents
    ``(B, 4, H/8, W/8)`` f32 (before the VAE); ``seed``: the seed used (drawn when none was
    given, so any result can be made again); ``peak_bytes``: the device's peak allocation
    during the call (``wb.memory_stats``; memory-mapped weights are not counted on the CPU).
    """

    images: list[np.ndarray]
    latents: np.ndarray
    seed: int | None = None
    peak_bytes: int = 0
    timesteps: np.ndarray = field(default_factory=lambda: np.zeros(0))


def to_uint8(decoded: np.ndarray) -> list[np.ndarray]:
    """VAE output ``(B, 3, H, W)`` in about [-1, 1] -> ``(H, W, 3)`` uint8 images, as
    diffusers' image processor: ``round(255 * clip(x / 2 + 0.5, 0, 1))``."""
    images = np.clip(np.asarray(decoded, np.float32) / 2 + 0.5, 0.0, 1.0)
    images = np.round(images * 255).astype(np.uint8)
    return [np.ascontiguousarray(im.transpose(1, 2, 0)) for im in images]


def _image_array(image, height: int | None, width: int | None, factor: int) -> np.ndarray:
    """An RGB image (array, PIL image or path) -> ``(H, W, 3)`` uint8, resized (Lanczos, as
    diffusers) to ``height x width`` or cut down to a multiple of ``factor``."""
    from PIL import Image

    if isinstance(image, str | os.PathLike):
        with Image.open(Path(image).expanduser()) as im:
            picture = im.convert("RGB")
    elif isinstance(image, Image.Image):
        picture = image.convert("RGB")
    else:
        array = np.asarray(image)
        if array.ndim != 3 or array.shape[-1] not in (3, 4):
            raise ValueError(f"image: expected (H, W, 3) RGB, found shape {array.shape}")
        if array.dtype.kind == "f":
            array = np.round(np.clip(array, 0.0, 1.0) * 255)
        picture = Image.fromarray(array[..., :3].astype(np.uint8))
    w, h = picture.size
    height = height or h - h % factor
    width = width or w - w % factor
    if (width, height) != (w, h):
        picture = picture.resize((width, height), Image.LANCZOS)
    return np.asarray(picture)


class StableDiffusionXL:
    """SDXL (and SDXL-Turbo): two CLIP text encoders, the UNet, the VAE and a scheduler.

    ``dtype`` is the compute dtype of the text encoders and the UNet; the VAE runs in f32 when
    its config says ``force_upcast`` (the original SDXL VAE overflows in f16), else in
    ``dtype``. Latents and scheduler maths stay f32.
    """

    def __init__(
        self,
        tokenizer: ClipTokenizer,
        tokenizer_2: ClipTokenizer,
        text_encoder: ClipTextModel,
        text_encoder_2: ClipTextModel,
        unet: UNet2DConditionModel,
        vae: AutoencoderKL,
        scheduler_config: dict,
        *,
        unet_config: UNetConfig,
        vae_config: VaeConfig,
        max_length: int = 77,
        force_zeros_for_empty_prompt: bool = True,
        turbo: bool = False,
        dtype=f32,
        vae_dtype=f32,
        device=None,
        source: str = "",
    ):
        self.tokenizer, self.tokenizer_2 = tokenizer, tokenizer_2
        self.text_encoder, self.text_encoder_2 = text_encoder, text_encoder_2
        self.unet, self.vae = unet, vae
        self.scheduler_config = dict(scheduler_config)
        self.unet_config, self.vae_config = unet_config, vae_config
        self.max_length = max_length
        self.force_zeros_for_empty_prompt = force_zeros_for_empty_prompt
        self.turbo = turbo
        self.dtype, self.vae_dtype = dtype, vae_dtype
        self.device = Device("cpu") if device is None else Device(device)
        self.source = source
        # the VAE halves the size per level after the first
        self.vae_scale_factor = 2 ** (len(vae_config.block_out_channels) - 1)

    # -- loading ----------------------------------------------------------------------------
    @classmethod
    def from_pretrained(
        cls,
        repo_or_dir: str | os.PathLike = _load.SDXL_BASE_REPO,
        variant: str | None = None,
        dtype=None,
        device=None,
        vae: str | os.PathLike | None = None,
        scheduler: str | None = None,
        turbo: bool | None = None,
        revision: str | None = None,
    ) -> StableDiffusionXL:
        """A pipeline from a diffusers-layout folder or hub repo (see ``load.resolve``).

        ``variant="fp16"`` reads ``*.fp16.safetensors`` (the plain file where a component has
        none); ``vae`` swaps the VAE (e.g. ``load.VAE_FP16_FIX_REPO``); ``scheduler`` is a
        ``make_scheduler`` name (default: the repo's scheduler); ``turbo`` (default: guessed
        from the name) sets SDXL-Turbo's defaults (1 step, guidance 0). ``dtype`` defaults to
        f32 on the CPU (f16 is computed through f32 there anyway) and to the stored dtype of
        the UNet weights elsewhere.
        """
        from ...dtype import dtype as as_dtype
        from ...nn.var_builder import build_checked

        components = ("text_encoder", "text_encoder_2", "tokenizer", "tokenizer_2", "unet")
        components += ("scheduler",) if vae is not None else ("vae", "scheduler")
        folder = _load.resolve(repo_or_dir, variant, components, revision)
        vae_folder = _load.resolve_vae(vae) if vae is not None else folder / "vae"
        dev = Device("cpu") if device is None else Device(device)
        if dtype is not None:
            dtype = as_dtype(dtype)
        elif dev.is_cpu:
            dtype = f32

        def builder(component: str, path: Path | None = None, dt=dtype) -> nn.VarBuilder:
            path = path or _load.weights_path(folder, component, variant)
            return nn.VarBuilder.from_safetensors(path, dtype=dt, device=dev)

        unet_vb = builder("unet")
        if dtype is None:  # an accelerator: keep the stored f16/bf16/f32 of the UNet
            dtype = unet_vb.get_unchecked("conv_in.weight").dtype
            unet_vb = unet_vb.to_dtype(dtype)
        unet_config = UNetConfig.from_json(folder / "unet" / "config.json")
        vae_config = VaeConfig.from_json(vae_folder / "config.json")
        vae_dtype = f32 if (vae_config.force_upcast or dev.is_cpu) else dtype
        vae_path = (
            vae_folder / "diffusion_pytorch_model.safetensors"
            if vae is not None
            else _load.weights_path(folder, "vae", variant)
        )
        vae_vb = nn.VarBuilder.from_safetensors(vae_path, vae_dtype, dev)
        te_configs = [ClipTextConfig.from_json(folder / c / "config.json")
                      for c in ("text_encoder", "text_encoder_2")]  # fmt: skip
        text_encoders = []
        for component, cfg in zip(("text_encoder", "text_encoder_2"), te_configs, strict=True):
            vb = builder(component)
            build = partial(ClipTextModel, cfg=cfg,
                            with_projection=vb.contains("text_projection.weight"))  # fmt: skip
            text_encoders.append(build_checked(f"SDXL {component}", build, vb))
        index = _load.read_json(folder / "model_index.json")
        scheduler_config = _load.read_json(folder / "scheduler" / "scheduler_config.json")
        if scheduler is not None:
            _schedulers.make_scheduler(scheduler, scheduler_config)  # fails early on a bad name
            scheduler_config = {**scheduler_config, "_workbench_name": scheduler}
        return cls(
            ClipTokenizer.from_dir(folder / "tokenizer"),
            ClipTokenizer.from_dir(folder / "tokenizer_2"),
            *text_encoders,
            build_checked("SDXL unet", partial(UNet2DConditionModel, cfg=unet_config), unet_vb),
            build_checked("SDXL vae", partial(AutoencoderKL, cfg=vae_config), vae_vb),
            scheduler_config,
            unet_config=unet_config,
            vae_config=vae_config,
            max_length=te_configs[0].max_position_embeddings,
            force_zeros_for_empty_prompt=bool(index.get("force_zeros_for_empty_prompt", True)),
            turbo=_load.is_turbo(repo_or_dir) if turbo is None else turbo,
            dtype=dtype,
            vae_dtype=vae_dtype,
            device=dev,
            source=str(repo_or_dir),
        )

    def __repr__(self) -> str:
        kind = "SDXL-Turbo" if self.turbo else "SDXL"
        return (
            f"StableDiffusionXL({kind} from {self.source!r}, {self.dtype.name} on {self.device}, "
            f"VAE {self.vae_dtype.name}, scheduler {self.scheduler_name})"
        )

    # -- parts --------------------------------------------------------------------------------
    @property
    def scheduler_name(self) -> str:
        name = self.scheduler_config.get("_workbench_name")
        return name or SCHEDULER_CLASSES.get(self.scheduler_config.get("_class_name"), "euler")

    def make_scheduler(self, name: str | None = None):
        """A fresh scheduler (they keep per-run state): ``name`` for ``make_scheduler`` or the
        repo's own class with its config."""
        config = {k: v for k, v in self.scheduler_config.items() if k != "_workbench_name"}
        if name is None and "_workbench_name" not in self.scheduler_config:
            class_name = config.get("_class_name", "EulerDiscreteScheduler")
            own = getattr(_schedulers, class_name, None)
            if own is not None:
                return own.from_config(config)
            warnings.warn(f"scheduler {class_name!r} is not implemented; using Euler", stacklevel=3)
        return _schedulers.make_scheduler(name or self.scheduler_name, config)

    @property
    def default_size(self) -> int:
        """The UNet's training resolution in pixels (1024 for SDXL, 512 for SDXL-Turbo)."""
        return self.unet_config.sample_size * self.vae_scale_factor

    def _ids(self, tokenizer: ClipTokenizer, texts: list[str]) -> Tensor:
        ids = np.asarray(tokenizer(texts, max_length=self.max_length), dtype=np.int64)
        return from_numpy(ids).to(self.device)

    def encode_prompt(self, prompts: list[str]) -> tuple[Tensor, Tensor]:
        """Prompts -> (embeddings ``(B, 77, H1 + H2)``, pooled ``(B, P)``): the penultimate
        hidden states of both encoders side by side, and encoder 2's projected pooled output."""
        hidden = []
        pooled = None
        for tokenizer, encoder in ((self.tokenizer, self.text_encoder),
                                   (self.tokenizer_2, self.text_encoder_2)):  # fmt: skip
            out = encoder(self._ids(tokenizer, prompts))
            hidden.append(out.hidden_states[-2])
            pooled = out.text_embeds if out.text_embeds is not None else out.pooled
        return cat(hidden, dim=-1), pooled

    def decode(self, latents: Tensor | np.ndarray) -> list[np.ndarray]:
        """Latents ``(B, 4, h, w)`` -> ``(8h, 8w, 3)`` uint8 images through the VAE."""
        z = latents if isinstance(latents, Tensor) else from_numpy(np.asarray(latents, np.float32))
        mean = getattr(self.vae_config, "latents_mean", None)
        std = getattr(self.vae_config, "latents_std", None)
        z = z.to(self.device).to_dtype(f32)
        if mean is not None and std is not None:
            m = from_numpy(np.asarray(mean, np.float32).reshape(1, -1, 1, 1)).to(self.device)
            s = from_numpy(np.asarray(std, np.float32).reshape(1, -1, 1, 1)).to(self.device)
            z = z * s / self.vae_config.scaling_factor + m
        else:
            z = z / self.vae_config.scaling_factor
        with no_grad():
            decoded = self.vae.decode(z.to_dtype(self.vae_dtype))
        return to_uint8(decoded.to_dtype(f32).numpy())

    def encode_image(self, image: np.ndarray, batch: int, rng, sample_mode: str) -> Tensor:
        """``(H, W, 3)`` uint8 -> scaled latents ``(batch, 4, H/8, W/8)`` f32: the VAE
        posterior's sample (``sample_mode="sample"``, from ``rng``) or mode, times the
        scaling factor (normalised by ``latents_mean/std`` where the config has them)."""
        x = image.astype(np.float32).transpose(2, 0, 1)[None] / 127.5 - 1.0
        x = from_numpy(np.ascontiguousarray(np.repeat(x, batch, axis=0))).to(self.device)
        with no_grad():
            dist = self.vae.encode(x.to_dtype(self.vae_dtype))
            z = dist.sample(rng) if sample_mode == "sample" else dist.mode()
        z = z.to_dtype(f32)
        mean = getattr(self.vae_config, "latents_mean", None)
        std = getattr(self.vae_config, "latents_std", None)
        if mean is not None and std is not None:
            m = from_numpy(np.asarray(mean, np.float32).reshape(1, -1, 1, 1)).to(self.device)
            s = from_numpy(np.asarray(std, np.float32).reshape(1, -1, 1, 1)).to(self.device)
            return (z - m) * self.vae_config.scaling_factor / s
        return z * self.vae_config.scaling_factor

    # -- generation ---------------------------------------------------------------------------
    def __call__(
        self,
        prompt: str | list[str],
        negative_prompt: str | list[str] | None = None,
        num_inference_steps: int | None = None,
        guidance_scale: float | None = None,
        seed: int | None = None,
        height: int | None = None,
        width: int | None = None,
        image=None,
        strength: float = 0.3,
        latents=None,
        scheduler: str | None = None,
        original_size: tuple[int, int] | None = None,
        crops_coords_top_left: tuple[int, int] = (0, 0),
        target_size: tuple[int, int] | None = None,
        guidance_rescale: float = 0.0,
        sample_mode: str = "sample",
        preview=None,
        preview_every: int = 5,
        callback=None,
        progress: bool = True,
    ) -> SdxlOutput:
        """Generate one image per prompt.

        Defaults follow diffusers (50 steps, guidance 5.0, the UNet's resolution), or
        SDXL-Turbo's (1 step, guidance 0, 512x512) for a turbo pipeline. ``seed`` seeds a
        ``numpy.random.Generator`` for the initial noise (and the ancestral / VAE samples):
        the same seed gives the same image. ``latents`` (``(B, 4, H/8, W/8)``) replaces that
        noise, as diffusers' argument does (it is scaled by ``init_noise_sigma`` too).

        ``image`` (``(H, W, 3)`` uint8, PIL image or path) turns on img2img: it is encoded by
        the VAE (posterior ``sample`` or ``mode``), noised to the timestep that ``strength``
        in (0, 1] picks and denoised for the last ``int(steps * strength)`` steps
        (``latents``, when given, is then the noise added to the encoded image).

        ``guidance_scale`` > 1 turns on classifier-free guidance; with no
        ``negative_prompt`` the unconditional embeddings are zeros (SDXL's
        ``force_zeros_for_empty_prompt``). ``original_size``, ``crops_coords_top_left`` and
        ``target_size`` are the micro-conditioning (default: the output size, (0, 0)).

        ``preview(step, image)`` gets the first image decoded by the VAE from the current
        (still noisy) latents every ``preview_every`` steps; each costs one VAE decode.
        ``callback(step, total)`` is called after every step (cheap: progress reports).
        """
        prompts = [prompt] if isinstance(prompt, str) else prompt
        if (
            not isinstance(prompts, list | tuple)
            or not prompts
            or not all(isinstance(p, str) for p in prompts)
        ):
            raise TypeError(f"prompt: expected a string or a list of strings, found {prompt!r}")
        prompts, batch = list(prompts), len(prompts)
        steps = (1 if self.turbo else 50) if num_inference_steps is None else num_inference_steps
        if not isinstance(steps, int | np.integer) or steps < 1:
            raise ValueError(f"num_inference_steps must be an integer >= 1, found {steps!r}")
        g = float((0.0 if self.turbo else 5.0) if guidance_scale is None else guidance_scale)
        if sample_mode not in ("sample", "mode"):
            raise ValueError(f"sample_mode: 'sample' or 'mode', found {sample_mode!r}")
        if preview_every < 1:
            raise ValueError(f"preview_every must be >= 1, found {preview_every}")
        init_image = None
        if image is not None:
            if not 0.0 < float(strength) <= 1.0:
                raise ValueError(f"strength must be in (0, 1], found {strength}")
            init_image = _image_array(image, height, width, self.vae_scale_factor)
            height, width = init_image.shape[:2]
        height = self.default_size if height is None else int(height)
        width = self.default_size if width is None else int(width)
        factor = max(8, self.vae_scale_factor)
        if height % factor or width % factor or height <= 0 or width <= 0:
            raise ValueError(
                f"height and width must be positive multiples of {factor}, found "
                f"{height}x{width} (height x width)"
            )
        negatives = None
        if negative_prompt is not None:
            negatives = (
                [negative_prompt] * batch
                if isinstance(negative_prompt, str)
                else list(negative_prompt)
            )
            if len(negatives) != batch:
                raise ValueError(
                    f"negative_prompt has {len(negatives)} entries, prompt has {batch}"
                )
        if seed is None:
            seed = int(np.random.SeedSequence().entropy % (2**63))
        rng = np.random.default_rng(seed)
        cfg = g > 1.0

        reset_peak_memory_stats(self.device)
        with no_grad():
            sched = self.make_scheduler(scheduler)
            sched.set_timesteps(steps)
            shape = (batch, self.unet_config.in_channels,
                     height // self.vae_scale_factor, width // self.vae_scale_factor)  # fmt: skip
            if init_image is None:
                timesteps = np.asarray(sched.timesteps)
                x = self._noise(latents, shape, rng) * float(sched.init_noise_sigma)
            else:
                timesteps, x = self._img2img_start(
                    sched, steps, strength, init_image, latents, shape, rng, sample_mode
                )
            size = (height, width)
            text, pooled, time_ids = self.conditioning(
                prompts, negatives if cfg else None, cfg, original_size or size,
                crops_coords_top_left, target_size or size,
            )  # fmt: skip

            from tqdm.auto import tqdm

            bar = tqdm(total=len(timesteps), desc="SDXL", disable=not progress, leave=False)
            try:
                for i, t in enumerate(timesteps):
                    model_in = cat([x, x], dim=0) if cfg else x
                    model_in = sched.scale_model_input(model_in, t).to_dtype(self.dtype)
                    eps = self.unet(model_in, float(t), text, pooled, time_ids).to_dtype(f32)
                    if cfg:
                        eps_neg, eps_text = eps.chunk(2, dim=0)
                        eps = eps_neg + (eps_text - eps_neg) * g
                        if guidance_rescale > 0:
                            eps = _rescale(eps, eps_text, guidance_rescale)
                    x = sched.step(eps, t, x, rng=rng)
                    bar.update()
                    if callback is not None:
                        callback(i + 1, len(timesteps))
                    if (
                        preview is not None
                        and (i + 1) % preview_every == 0
                        and i + 1 < len(timesteps)
                    ):
                        preview(i + 1, self.decode(x[:1])[0])
            finally:
                bar.close()
            final = x.to_dtype(f32).numpy()
            images = self.decode(x)
        peak = int(memory_stats(self.device)["peak_bytes"])
        return SdxlOutput(images, final, seed, peak, timesteps)

    def conditioning(self, prompts, negatives, cfg: bool, original_size, crops_top_left,
                     target_size) -> tuple[Tensor, Tensor, Tensor]:  # fmt: skip
        """The UNet's conditioning, ``[negative; prompt]`` along the batch when ``cfg``:
        token embeddings ``(B', 77, 2048)``, pooled ``(B', 1280)`` and the micro-conditioning
        ``time_ids`` ``(B', 6)`` = original (h, w), crop top-left (y, x), target (h, w); in
        the compute dtype. Without negative prompts the negative half is zeros
        (``force_zeros_for_empty_prompt``), else the embeddings of ``negatives`` (or "")."""
        text, pooled = self.encode_prompt(prompts)
        if cfg:
            if negatives is None and self.force_zeros_for_empty_prompt:
                neg_text, neg_pooled = zeros_like(text), zeros_like(pooled)
            else:
                neg_text, neg_pooled = self.encode_prompt(negatives or [""] * len(prompts))
            text, pooled = cat([neg_text, text], dim=0), cat([neg_pooled, pooled], dim=0)
        ids = np.array([*original_size, *crops_top_left, *target_size], np.float32)
        time_ids = from_numpy(np.tile(ids, (text.shape[0], 1))).to(self.device)
        dt = self.dtype
        return text.to_dtype(dt), pooled.to_dtype(dt), time_ids.to_dtype(dt)

    def _img2img_start(self, sched, steps, strength, image, latents, shape, rng, sample_mode):
        """diffusers' ``get_timesteps`` + ``prepare_latents``: keep the last
        ``int(steps * strength)`` steps and noise the encoded image to the first of them."""
        init_steps = min(int(steps * float(strength)), steps)
        if init_steps < 1:
            raise ValueError(
                f"strength {strength} x {steps} steps leaves no denoising step; "
                "raise strength or num_inference_steps"
            )
        start = (steps - init_steps) * sched.order
        timesteps = np.asarray(sched.timesteps)[start:]
        sched.set_begin_index(start)
        encoded = self.encode_image(image, shape[0], rng, sample_mode)
        noise = self._noise(latents, shape, rng)
        return timesteps, sched.add_noise(encoded, noise, timesteps[:1])

    def _noise(self, latents, shape: tuple[int, ...], rng) -> Tensor:
        """Standard normal noise of ``shape`` from ``rng``, or the given ``latents``."""
        if latents is None:
            array = rng.standard_normal(shape).astype(np.float32)
        else:
            array = np.asarray(
                latents.numpy() if isinstance(latents, Tensor) else latents, np.float32
            )
            if array.shape != shape:
                raise ValueError(f"latents: expected shape {shape}, found {array.shape}")
        return from_numpy(np.ascontiguousarray(array)).to(self.device)


def _rescale(eps: Tensor, eps_text: Tensor, phi: float) -> Tensor:
    """Guidance rescale (Lin et al. 2023, 3.4): match the std of the guided noise to the
    text-conditioned one, then mix: ``phi * eps * std_text / std_cfg + (1 - phi) * eps``."""
    dims = tuple(range(1, eps.ndim))
    ratio = eps_text.std(dim=dims, keepdim=True) / eps.std(dim=dims, keepdim=True)
    return eps * ratio * phi + eps * (1.0 - phi)
