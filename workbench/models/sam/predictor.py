"""``SamPredictor``: embed an image once, then answer many prompts.

    predictor = SamPredictor(sam)
    predictor.set_image(rgb)                       # (H, W, 3) uint8; runs the image encoder
    masks, scores, low_res = predictor.predict(point_coords=[[x, y]], point_labels=[1])

Prompts are in pixels of the original image; masks come back at the original size (bool,
or logits with ``return_logits=True``) with the predicted IoU of each.
"""

from __future__ import annotations

import numpy as np

from ...autograd import no_grad
from ...ops import creation, pool
from ...tensor import Tensor
from .model import MASK_THRESHOLD, Sam


def preprocess_shape(h: int, w: int, long_side: int) -> tuple[int, int]:
    """(h, w) scaled so that the long side is ``long_side`` (rounded half up)."""
    scale = long_side / max(h, w)
    return int(h * scale + 0.5), int(w * scale + 0.5)


class SamPredictor:
    """Cache an image embedding and decode prompts against it."""

    def __init__(self, model: Sam):
        self.model = model
        self.features: Tensor | None = None  # the image embedding, once set_image ran
        self.original_size: tuple[int, int] | None = None
        self.input_size: tuple[int, int] | None = None

    def set_image(self, image: np.ndarray) -> None:
        """(H, W, 3) RGB image (uint8 range): resize the long side to S, normalise, pad and run
        the image encoder once. The resize is bilinear (half-pixel centres) and rounded to
        integers; the original goes through PIL, whose bilinear filter also antialiases when
        shrinking, so large images differ slightly from the reference's input."""
        image = np.asarray(image)
        if image.ndim != 3 or image.shape[2] != 3:
            raise ValueError(f"SamPredictor.set_image: expected (H, W, 3) RGB, found {image.shape}")
        h, w = image.shape[:2]
        s = self.model.cfg.img_size
        nh, nw = preprocess_shape(h, w, s)
        if (nh, nw) != (h, w):
            t = creation.from_numpy(image.astype(np.float32).transpose(2, 0, 1)[None].copy())
            t = pool.interpolate(t, (nh, nw), mode="bilinear", align_corners=False)
            image = np.clip(np.rint(t.numpy()[0].transpose(1, 2, 0)), 0, 255)
        with no_grad():
            self.features = self.model.image_encoder(self.model.preprocess(image))
        self.original_size, self.input_size = (h, w), (nh, nw)

    def _scale(self, xy: np.ndarray) -> np.ndarray:
        (h, w), (nh, nw) = self.original_size, self.input_size
        out = np.array(xy, np.float32, copy=True)
        out[..., 0] *= nw / w
        out[..., 1] *= nh / h
        return out

    def predict(
        self,
        point_coords=None,
        point_labels=None,
        box=None,
        mask_input=None,
        multimask_output: bool = True,
        return_logits: bool = False,
    ):
        """point_coords (N, 2) x, y pixels with point_labels (N,) (1 fg, 0 bg); box (4,)
        x0, y0, x1, y1; mask_input (1, 4E, 4E) low-res logits from an earlier call ->
        masks (M, H, W), scores (M,), low-res logits (M, 4E, 4E); M = 3 or 1."""
        if self.features is None:
            raise RuntimeError("SamPredictor.predict: call set_image first")
        points = boxes = masks = None
        if point_coords is not None:
            if point_labels is None:
                raise ValueError("SamPredictor.predict: point_coords needs point_labels")
            coords = self._scale(np.asarray(point_coords, np.float32).reshape(1, -1, 2))
            points = (coords, np.asarray(point_labels).reshape(1, -1).astype(np.int64))
        if box is not None:
            boxes = self._scale(np.asarray(box, np.float32).reshape(1, 2, 2)).reshape(1, 4)
        if mask_input is not None:
            m = np.asarray(mask_input, np.float32).reshape(1, 1, *np.shape(mask_input)[-2:])
            masks = creation.from_numpy(m).to_dtype(self.features.dtype)
        m, iou, low = self._decode(points, boxes, masks, multimask_output)
        masks_np = m.numpy()[0]
        if not return_logits:
            masks_np = masks_np > MASK_THRESHOLD
        return masks_np, iou.numpy()[0], low.numpy()[0]

    def predict_batch(self, point_coords, point_labels, multimask_output: bool = True):
        """B prompts at once: point_coords (B, N, 2) pixels, point_labels (B, N) -> mask
        logits (B, M, H, W), predicted IoU (B, M) as numpy."""
        if self.features is None:
            raise RuntimeError("SamPredictor.predict_batch: call set_image first")
        coords = self._scale(np.asarray(point_coords, np.float32))
        labels = np.asarray(point_labels).astype(np.int64)
        m, iou, _ = self._decode((coords, labels), None, None, multimask_output)
        return m.numpy(), iou.numpy()

    def _decode(self, points, boxes, masks, multimask_output: bool):
        model = self.model
        with no_grad():
            sparse, dense = model.prompt_encoder(points, boxes, masks)
            low, iou = model.mask_decoder(
                self.features, model.prompt_encoder.dense_pe(), sparse, dense, multimask_output
            )
            up = model.postprocess_masks(low, self.input_size, self.original_size)
        return up, iou, low
