"""Segment Anything (SAM ViT-B/L/H, MobileSAM's TinyViT): image encoder, prompt encoder,
mask decoder, predictor, automatic masks. Importing this package registers gallery entries
(``wb.gallery()``).

    from workbench.models import sam
    model = sam.load("lmz/candle-sam")          # or a .safetensors file with official names
    mobile = sam.load("lmz/candle-sam", which="mobile_sam")   # TinyViT encoder, same decoder
    predictor = sam.SamPredictor(model)
    predictor.set_image(rgb)                    # (H, W, 3) uint8, embedded once
    masks, scores, low_res = predictor.predict(point_coords=[[x, y]], point_labels=[1])
    everything = sam.SamAutomaticMaskGenerator(model).generate(rgb)
"""

from . import gallery as _gallery  # noqa: F401  (registers the gallery entries)
from .automatic import SamAutomaticMaskGenerator
from .draw import overlay
from .gallery import ClickSegmenter
from .load import HUB_FILES, HUB_REPO, convert_checkpoint, infer_config, load, load_weights
from .model import (
    MASK_THRESHOLD,
    PIXEL_MEAN,
    PIXEL_STD,
    ImageEncoderViT,
    MaskDecoder,
    PromptEncoder,
    Sam,
    SamConfig,
)
from .predictor import SamPredictor, preprocess_shape
from .tiny_vit import TinyViT, TinyViTConfig

__all__ = [
    "ClickSegmenter", "HUB_FILES", "HUB_REPO", "ImageEncoderViT", "MASK_THRESHOLD", "MaskDecoder",
    "PIXEL_MEAN", "PIXEL_STD", "PromptEncoder", "Sam", "SamAutomaticMaskGenerator", "SamConfig",
    "SamPredictor", "TinyViT", "TinyViTConfig", "convert_checkpoint", "infer_config", "load",
    "load_weights", "overlay", "preprocess_shape",
]  # fmt: skip
