"""Automatic masks: prompt SAM with a grid of points and keep the good, distinct masks.

    gen = SamAutomaticMaskGenerator(sam)
    masks = gen.generate(rgb)    # list of dicts

For every crop (the whole image, plus with ``crop_n_layers`` ≥ 1 overlapping 2ⁱ×2ⁱ tiles),
points of an ``n×n`` grid each give 3 masks; kept are those whose predicted IoU is at least
``pred_iou_thresh`` and whose stability score (IoU of the mask thresholded at ±offset around
0) is at least ``stability_score_thresh``; boxes that duplicate one another (IoU >
``box_nms_thresh``) are removed with NMS, first inside a crop (by predicted IoU), then across
crops (smaller crops win). With ``min_mask_region_area`` > 0, each mask then loses its
holes and islands (8-connected) smaller than that many pixels, and NMS (IoU > max(box, crop
thresholds)) runs again on the new boxes, preferring masks that did not change.
"""

from __future__ import annotations

import numpy as np

from .model import MASK_THRESHOLD
from .predictor import SamPredictor


def point_grid(n: int) -> np.ndarray:
    """(n², 2) x, y cell centres of an n×n grid over [0, 1]²."""
    c = (np.arange(n, dtype=np.float64) + 0.5) / n
    xs, ys = np.meshgrid(c, c)
    return np.stack([xs.reshape(-1), ys.reshape(-1)], -1)


def crop_boxes(h: int, w: int, n_layers: int, overlap_ratio: float) -> tuple[list, list]:
    """Crop boxes (x0, y0, x1, y1) and their layer: the image, then per layer i a
    2ⁱ×2ⁱ tiling whose tiles overlap by ``overlap_ratio`` of the short side (at layer i)."""
    boxes, layers = [[0, 0, w, h]], [0]
    short = min(h, w)
    for i in range(n_layers):
        n = 2 ** (i + 1)
        overlap = int(overlap_ratio * short * (2 / n))
        cw = int(np.ceil((overlap * (n - 1) + w) / n))
        ch = int(np.ceil((overlap * (n - 1) + h) / n))
        for y0 in [int((ch - overlap) * k) for k in range(n)]:
            for x0 in [int((cw - overlap) * k) for k in range(n)]:
                boxes.append([x0, y0, min(x0 + cw, w), min(y0 + ch, h)])
                layers.append(i + 1)
    return boxes, layers


def stability_score(logits: np.ndarray, threshold: float, offset: float) -> np.ndarray:
    """|logits > t + o| / |logits > t - o| per mask: (..., H, W) -> (...)."""
    inter = (logits > threshold + offset).sum((-1, -2), dtype=np.int64)
    union = (logits > threshold - offset).sum((-1, -2), dtype=np.int64)
    return inter / np.maximum(union, 1)


def mask_to_box(masks: np.ndarray) -> np.ndarray:
    """(N, H, W) bool -> (N, 4) x0, y0, x1, y1 (inclusive pixel indices; zeros if empty)."""
    n = masks.shape[0]
    out = np.zeros((n, 4), np.int64)
    rows, cols = masks.any(2), masks.any(1)
    for i in range(n):
        ys, xs = np.flatnonzero(rows[i]), np.flatnonzero(cols[i])
        if len(ys):
            out[i] = xs[0], ys[0], xs[-1], ys[-1]
    return out


def nms(boxes: np.ndarray, scores: np.ndarray, iou: float) -> np.ndarray:
    """Greedy NMS: indices of kept boxes, best score first."""
    order = np.argsort(-scores, kind="stable")
    boxes = boxes.astype(np.float64)
    area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    keep = []
    while len(order):
        i, rest = order[0], order[1:]
        keep.append(i)
        lt = np.maximum(boxes[i, :2], boxes[rest, :2])
        rb = np.minimum(boxes[i, 2:], boxes[rest, 2:])
        inter = np.prod(np.clip(rb - lt, 0, None), 1)
        ious = inter / np.maximum(area[i] + area[rest] - inter, 1e-9)
        order = rest[ious <= iou]
    return np.array(keep, np.int64)


def _near_edge(boxes, crop, image_wh, atol: float = 20.0) -> np.ndarray:
    """Boxes (in image pixels) touching a crop edge that is not an image edge."""
    crop = np.asarray(crop, np.float64)
    full = np.array([0, 0, image_wh[0], image_wh[1]], np.float64)
    b = boxes.astype(np.float64)
    near_crop = np.isclose(b, crop[None], atol=atol, rtol=0)
    near_image = np.isclose(b, full[None], atol=atol, rtol=0)
    return (near_crop & ~near_image).any(1)


def remove_small_regions(mask: np.ndarray, area: float, mode: str) -> tuple[np.ndarray, bool]:
    """(H, W) bool mask without its 8-connected ``"holes"`` (background regions) or
    ``"islands"`` (foreground regions) of fewer than ``area`` pixels; if every island is
    small, the largest stays. Returns (mask, whether it changed)."""
    if mode not in ("holes", "islands"):
        raise ValueError(f"remove_small_regions: mode must be 'holes' or 'islands', not {mode!r}")
    from scipy import ndimage

    holes = mode == "holes"
    work = mask != holes  # the regions to look at: background for holes, else foreground
    labels, n = ndimage.label(work, structure=np.ones((3, 3), bool))
    sizes = np.bincount(labels.ravel(), minlength=n + 1)[1:]
    small = sizes < area
    if not small.any():
        return mask, False
    if holes:
        return mask | small[labels - 1] & (labels > 0), True
    keep = ~small
    if not keep.any():
        keep[np.argmax(sizes)] = True
    return keep[labels - 1] & (labels > 0), True


class SamAutomaticMaskGenerator:
    """Masks for everything in an image (SAM's automatic mask generation)."""

    def __init__(
        self,
        model,
        points_per_side: int = 32,
        points_per_batch: int = 64,
        pred_iou_thresh: float = 0.88,
        stability_score_thresh: float = 0.95,
        stability_score_offset: float = 1.0,
        box_nms_thresh: float = 0.7,
        crop_n_layers: int = 0,
        crop_nms_thresh: float = 0.7,
        crop_overlap_ratio: float = 512 / 1500,
        crop_n_points_downscale_factor: int = 1,
        min_mask_region_area: int = 0,
    ):
        self.predictor = SamPredictor(model)
        self.points_per_side = points_per_side
        self.points_per_batch = points_per_batch
        self.pred_iou_thresh = pred_iou_thresh
        self.stability_score_thresh = stability_score_thresh
        self.stability_score_offset = stability_score_offset
        self.box_nms_thresh = box_nms_thresh
        self.crop_n_layers = crop_n_layers
        self.crop_nms_thresh = crop_nms_thresh
        self.crop_overlap_ratio = crop_overlap_ratio
        self.crop_n_points_downscale_factor = crop_n_points_downscale_factor
        self.min_mask_region_area = min_mask_region_area

    def generate(self, image: np.ndarray) -> list[dict]:
        """(H, W, 3) RGB -> list (in NMS order: best predicted IoU first) of dicts:
        segmentation (H, W) bool, area, bbox (x, y, w, h), predicted_iou, stability_score,
        point_coords [[x, y]], crop_box (x, y, w, h)."""
        image = np.asarray(image)
        h, w = image.shape[:2]
        boxes, layers = crop_boxes(h, w, self.crop_n_layers, self.crop_overlap_ratio)
        found = []
        for crop, layer in zip(boxes, layers, strict=True):
            found.extend(self._crop(image, crop, layer))
        if not found:
            return []
        if len(boxes) > 1:  # the same object found in several crops: keep the smallest crop's
            bx = np.array([f["box"] for f in found], np.float64)
            crop_area = np.array(
                [(f["crop"][2] - f["crop"][0]) * (f["crop"][3] - f["crop"][1]) for f in found]
            )
            found = [found[i] for i in nms(bx, 1.0 / crop_area, self.crop_nms_thresh)]
        segs = []
        for f in found:
            cx0, cy0, cx1, cy1 = f["crop"]
            seg = np.zeros((h, w), bool)
            seg[cy0:cy1, cx0:cx1] = f["mask"]
            segs.append(seg)
        if self.min_mask_region_area > 0:
            found, segs = self._remove_small_regions(found, segs)
        out = []
        for f, seg in zip(found, segs, strict=True):
            x0, y0, x1, y1 = (int(v) for v in f["box"])
            cx0, cy0, cx1, cy1 = f["crop"]
            out.append(
                {
                    "segmentation": seg,
                    "area": int(seg.sum()),
                    "bbox": [x0, y0, x1 - x0, y1 - y0],
                    "predicted_iou": float(f["iou"]),
                    "stability_score": float(f["stability"]),
                    "point_coords": [list(map(float, f["point"]))],
                    "crop_box": [cx0, cy0, cx1 - cx0, cy1 - cy0],
                }
            )
        return out

    def _remove_small_regions(self, found: list[dict], segs: list[np.ndarray]):
        """Fill small holes, drop small islands, then NMS on the new boxes with the
        unchanged masks first (score 1, changed ones 0)."""
        area = self.min_mask_region_area
        changed = []
        for i, seg in enumerate(segs):
            segs[i], holes = remove_small_regions(seg, area, "holes")
            segs[i], islands = remove_small_regions(segs[i], area, "islands")
            changed.append(holes or islands)
        boxes = mask_to_box(np.stack(segs))
        scores = 1.0 - np.array(changed, np.float64)
        keep = nms(boxes, scores, max(self.box_nms_thresh, self.crop_nms_thresh))
        kept = [{**found[i], "box": boxes[i]} if changed[i] else found[i] for i in keep]
        return kept, [segs[i] for i in keep]

    def _crop(self, image: np.ndarray, crop, layer: int) -> list[dict]:
        x0, y0, x1, y1 = crop
        image_box = (0, 0, image.shape[1], image.shape[0])
        tile = image[y0:y1, x0:x1]
        th, tw = tile.shape[:2]
        p = self.predictor
        p.set_image(tile)
        n = int(self.points_per_side / (self.crop_n_points_downscale_factor**layer))
        points = point_grid(max(n, 1)) * np.array([tw, th])
        kept, boxes = [], []
        for s in range(0, len(points), self.points_per_batch):
            batch = points[s : s + self.points_per_batch]
            logits, iou = p.predict_batch(batch[:, None, :], np.ones((len(batch), 1)))
            b, m = iou.shape
            logits, iou, pts = (
                logits.reshape(b * m, th, tw),
                iou.reshape(-1),
                np.repeat(batch, m, 0),
            )
            good = np.ones(b * m, bool)
            if self.pred_iou_thresh > 0:
                good &= iou > self.pred_iou_thresh
            stab = stability_score(logits, MASK_THRESHOLD, self.stability_score_offset)
            if self.stability_score_thresh > 0:
                good &= stab >= self.stability_score_thresh
            idx = np.flatnonzero(good)
            if not len(idx):
                continue
            masks = logits[idx] > MASK_THRESHOLD
            bx = mask_to_box(masks) + np.array([x0, y0, x0, y0])
            edge = _near_edge(bx, crop, image_box[2:])
            for j, i in enumerate(idx):
                if not edge[j]:
                    boxes.append(bx[j])
                    kept.append(
                        {"mask": masks[j], "iou": iou[i], "stability": stab[i], "point": pts[i]}
                    )
        if not kept:
            return []
        keep = nms(np.stack(boxes), np.array([k["iou"] for k in kept]), self.box_nms_thresh)
        return [
            {**kept[i], "box": boxes[i], "crop": tuple(crop), "point": kept[i]["point"] + (x0, y0)}
            for i in keep
        ]
