"""Stable Diffusion XL and SDXL-Turbo, step for step as diffusers: two CLIP text encoders
(ViT-L/14 and OpenCLIP ViT-bigG/14), the SDXL UNet with its micro-conditioning, the VAE,
schedulers (Euler, Euler ancestral, DDIM, DPM++ 2M (Karras)), text-to-image and img2img.
Importing this package registers gallery entries (``wb.gallery()``).

    from workbench.models import stable_diffusion as sd
    pipe = sd.StableDiffusionXL.from_pretrained(sd.SDXL_TURBO_REPO)    # or a local folder
    out = pipe("a photo of an astronaut riding a horse on mars", seed=0)
    out.images[0]                                 # (512, 512, 3) uint8; out.latents, out.seed
    sd.SdxlPanel(sd.SDXL_TURBO_REPO)              # prompt form with live preview and history

From the shell: ``python -m workbench.models.stable_diffusion "PROMPT" --turbo --out a.png``.
"""

from . import gallery as _gallery  # noqa: F401  (registers the gallery entries)
from .clip import VIT_BIGG14, VIT_L14, ClipTextConfig, ClipTextModel, ClipTextOutput
from .gallery import GalleryResult, SdxlPanel
from .load import KNOWN_REPOS, SDXL_BASE_REPO, SDXL_TURBO_REPO, VAE_FP16_FIX_REPO, resolve
from .pipeline import SCHEDULER_CLASSES, SdxlOutput, StableDiffusionXL, to_uint8
from .schedulers import (
    SCHEDULERS,
    SDXL_BASE_SCHEDULER,
    SDXL_TURBO_SCHEDULER,
    DDIMScheduler,
    DPMSolverMultistepScheduler,
    EulerAncestralDiscreteScheduler,
    EulerDiscreteScheduler,
    SchedulerConfig,
    make_scheduler,
)
from .tokenizer import ClipTokenizer
from .unet import UNet2DConditionModel, UNetConfig
from .vae import SDXL_VAE, SDXL_VAE_FP16_FIX, AutoencoderKL, DiagonalGaussian, VaeConfig

__all__ = [
    "AutoencoderKL", "ClipTextConfig", "ClipTextModel", "ClipTextOutput", "ClipTokenizer",
    "DDIMScheduler", "DPMSolverMultistepScheduler", "DiagonalGaussian",
    "EulerAncestralDiscreteScheduler", "EulerDiscreteScheduler", "GalleryResult", "KNOWN_REPOS",
    "SCHEDULERS", "SCHEDULER_CLASSES", "SDXL_BASE_REPO", "SDXL_BASE_SCHEDULER", "SDXL_TURBO_REPO",
    "SDXL_TURBO_SCHEDULER", "SDXL_VAE", "SDXL_VAE_FP16_FIX", "SchedulerConfig", "SdxlOutput",
    "SdxlPanel", "StableDiffusionXL", "UNet2DConditionModel", "UNetConfig", "VAE_FP16_FIX_REPO",
    "VIT_BIGG14", "VIT_L14", "VaeConfig", "make_scheduler", "resolve", "to_uint8",
]  # fmt: skip
