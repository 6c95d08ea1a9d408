"""The gallery entries of the models workbench ships, described without importing their code.

``workbench.registry`` reads ``SPECS`` the first time the gallery is listed; running an entry
imports its ``code`` module (``workbench.models.<model>.gallery``), which registers the full
``registry.Entry`` built from the same ``Spec``. A new model adds its specs here.
"""

from __future__ import annotations

from ..registry import Spec

_CACHE = "~/.cache/workbench/"
_YOLO = "workbench.models.yolov8.gallery"
_SAM = "workbench.models.sam.gallery"
_SDXL = "workbench.models.stable_diffusion.gallery"
_LLM = "workbench.models.llm.gallery"

SPECS: dict[str, Spec] = {
    "yolov8n": Spec(
        display_name="YOLOv8n",
        description="Object detection: boxes for the 80 COCO classes.",
        weights="lmz/candle-yolo-v8",
        local_path=_CACHE + "yolov8n.safetensors",
        samples=("synthetic",),
        code=_YOLO,
    ),
    "yolov8n-pose": Spec(
        display_name="YOLOv8n pose",
        description="Person boxes and 17-keypoint skeletons.",
        weights="lmz/candle-yolo-v8",
        local_path=_CACHE + "yolov8n-pose.safetensors",
        samples=("synthetic",),
        code=_YOLO,
    ),
    "sam-vit-b": Spec(
        display_name="SAM ViT-B (automatic)",
        description="Segment Anything: every object, from a grid of point prompts.",
        weights="lmz/candle-sam",
        local_path=_CACHE + "sam_vit_b_01ec64.safetensors",
        samples=("synthetic",),
        code=_SAM,
    ),
    "sam-vit-b-point": Spec(
        display_name="SAM ViT-B (point)",
        description="Segment Anything: the masks under a point (for clicks, see ClickSegmenter).",
        weights="lmz/candle-sam",
        local_path=_CACHE + "sam_vit_b_01ec64.safetensors",
        samples=("synthetic",),
        code=_SAM,
    ),
    "mobile-sam-point": Spec(
        display_name="MobileSAM (point)",
        description="MobileSAM: SAM's decoder on a TinyViT encoder (about 6M parameters).",
        weights="lmz/candle-sam",
        local_path=_CACHE + "mobile_sam-tiny-vitt.safetensors",
        samples=("synthetic",),
        code=_SAM,
    ),
    "sdxl-turbo": Spec(
        display_name="SDXL-Turbo (text to image)",
        description="Stable Diffusion XL Turbo: 512x512 images in 1-4 steps, no guidance.",
        weights="stabilityai/sdxl-turbo",
        has_panel=True,
        code=_SDXL,
    ),
    "sdxl-base": Spec(
        display_name="SDXL 1.0 base (text to image)",
        description="Stable Diffusion XL base: 1024x1024 images, 25-50 steps, guidance 5.",
        weights="stabilityai/stable-diffusion-xl-base-1.0",
        has_panel=True,
        code=_SDXL,
    ),
    "llm-chat": Spec(
        display_name="LLM chat (GGUF)",
        description=(
            "Chat with a quantized Llama / Qwen / Gemma / Phi-3 GGUF file, tokens streamed."
        ),
        weights=_CACHE + "llm.gguf",
        local_path=_CACHE + "llm.gguf",
        has_panel=True,
        code=_LLM,
    ),
}
