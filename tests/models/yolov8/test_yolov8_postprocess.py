"""Letterbox / resize, NMS, mapping boxes back, drawing."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.models.yolov8.draw import COCO_NAMES, COCO_SKELETON, draw_detections
from workbench.models.yolov8.postprocess import (
    Detections,
    Transform,
    box_iou,
    letterbox,
    nms,
    non_max_suppression,
    resize,
    to_detections,
    to_input,
    xywh_to_xyxy,
)


def _image(h, w, seed=0):
    return np.random.default_rng(seed).integers(0, 255, (h, w, 3), dtype=np.uint8)


@pytest.mark.parametrize(
    "shape, size, auto, expected",
    [
        ((480, 640), 640, True, (480, 640)),
        ((300, 500), 640, True, (384, 640)),  # 384 = 640·300/500, already a multiple of 32
        ((300, 500), 640, False, (640, 640)),
        ((1000, 200), 320, True, (320, 64)),
        ((17, 23), 64, True, (64, 64)),
    ],
)
def test_letterbox_shapes(shape, size, auto, expected):
    out, t = letterbox(_image(*shape), size, auto=auto)
    assert out.shape == (*expected, 3) and out.dtype == np.uint8
    assert out.shape[0] % 32 == 0 and out.shape[1] % 32 == 0
    assert t.shape == shape
    assert t.ratio[0] == pytest.approx(t.ratio[1], rel=0.05)


def test_letterbox_pads_gray_and_maps_back():
    image = np.full((100, 200, 3), 255, np.uint8)
    out, t = letterbox(image, 256, auto=False)
    assert out.shape == (256, 256, 3)
    assert (out[0, 0] == 114).all() and (out[128, 128] == 255).all()  # pad top, image centre
    # the image occupies rows 64..192 (128 rows); a box over it maps back to the whole image
    back = t.boxes_back(np.array([[0, 64, 256, 192]], np.float32))
    np.testing.assert_allclose(back, [[0, 0, 200, 100]], atol=1e-4)
    np.testing.assert_allclose(t.boxes_back(np.array([[-50, -50, 999, 999]])), [[0, 0, 200, 100]])
    pts = t.points_back(np.array([[[128.0, 128.0, 0.9]]]))
    np.testing.assert_allclose(pts, [[[100.0, 50.0, 0.9]]])


def test_resize_multiples_of_32():
    out, t = resize(_image(300, 500), 640)
    assert out.shape == (384, 640, 3) and t.pad == (0.0, 0.0)
    np.testing.assert_allclose(
        t.boxes_back(np.array([[0, 0, 640, 384]], np.float32)), [[0, 0, 500, 300]], atol=1e-3
    )


def test_letterbox_accepts_gray_float_rgba():
    gray, _ = letterbox(np.zeros((40, 40)), 64)
    rgba, _ = letterbox(np.zeros((40, 40, 4), np.uint8), 64)
    flt, _ = letterbox(np.ones((40, 40, 3), np.float32), 64)
    assert gray.shape == rgba.shape == flt.shape == (64, 64, 3)
    assert flt[32, 32, 0] == 255
    with pytest.raises(ValueError, match="needs an \\(H, W, 3\\) RGB image"):
        letterbox(np.zeros((4, 4, 5)), 64)


def test_to_input():
    x = to_input([np.full((64, 32, 3), 255, np.uint8)])
    assert x.shape == (1, 3, 64, 32) and x.dtype == np.float32 and x.flags.c_contiguous
    assert x.max() == 1.0


def test_box_iou_and_nms():
    boxes = np.array([[0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30], [0, 0, 10, 5]], np.float32)
    np.testing.assert_allclose(box_iou(boxes[0], boxes), [1.0, 81 / 119, 0.0, 0.5], rtol=1e-6)
    scores = np.array([0.9, 0.8, 0.7, 0.95], np.float32)
    assert nms(boxes, scores, 0.45).tolist() == [3, 1, 2]  # 3 removes 0 (IoU .5), 1 stays
    assert nms(boxes, scores, 0.6).tolist() == [3, 0, 2]  # 0 removes 1 (IoU .68)
    assert nms(boxes, scores, 0.7).tolist() == [3, 0, 1, 2]
    assert nms(boxes[:0], scores[:0], 0.5).tolist() == []


def _pred(rows):
    """rows of (cx, cy, w, h, p0, p1) -> (1, 6, A)."""
    return np.asarray(rows, np.float32).T[None]


def test_nms_is_class_aware_and_thresholded():
    pred = _pred(
        [
            [50, 50, 20, 20, 0.9, 0.1],
            [51, 51, 20, 20, 0.1, 0.8],  # same place, other class: kept
            [52, 50, 20, 20, 0.7, 0.0],  # same class, overlapping: suppressed
            [10, 10, 4, 4, 0.2, 0.1],  # below the confidence threshold
        ]
    )
    (det,) = non_max_suppression(pred, conf=0.25, iou=0.45)
    assert det.shape == (2, 6)
    np.testing.assert_allclose(det[:, 4], [0.9, 0.8])
    np.testing.assert_array_equal(det[:, 5], [0, 1])
    np.testing.assert_allclose(det[0, :4], [40, 40, 60, 60])
    (agnostic,) = non_max_suppression(pred, conf=0.25, iou=0.45, agnostic=True)
    assert len(agnostic) == 1
    (low,) = non_max_suppression(pred, conf=0.15, iou=0.45)
    assert len(low) == 3
    (capped,) = non_max_suppression(pred, conf=0.15, iou=0.45, max_det=1)
    assert len(capped) == 1
    (none,) = non_max_suppression(pred, conf=0.95)
    assert none.shape == (0, 6)


def test_nms_keeps_extra_columns():
    pred = np.concatenate([_pred([[50, 50, 20, 20, 0.9]]), np.arange(6.0).reshape(1, 6, 1)], 1)
    (det,) = non_max_suppression(pred, num_classes=1)
    np.testing.assert_array_equal(det[0, 6:], np.arange(6.0))
    d = to_detections(det, Transform((100, 100), (1.0, 1.0), (0.0, 0.0)), (2, 3), ["person"])
    assert d.keypoints.shape == (1, 2, 3) and d.labels() == ["person"] and len(d) == 1


def test_xywh_to_xyxy():
    np.testing.assert_allclose(xywh_to_xyxy(np.array([[5.0, 5, 4, 2]])), [[3, 4, 7, 6]])


def test_draw_boxes_and_skeleton():
    image = np.zeros((120, 160, 3), np.uint8)
    kpts = np.zeros((1, 17, 3), np.float32)
    kpts[0, :, 0] = np.linspace(20, 140, 17)
    kpts[0, :, 1] = 60
    kpts[0, :, 2] = 0.9
    det = Detections(
        np.array([[10, 20, 100, 110]], np.float32),
        np.array([0.8], np.float32),
        np.array([0]),
        kpts,
        list(COCO_NAMES),
    )
    out = draw_detections(image, det)
    assert out.shape == image.shape and out.dtype == np.uint8
    assert out[20:111, 10].any() and out[60, 70].any()  # box edge, skeleton line
    assert not image.any()  # input untouched
    assert det.labels() == ["person"]
    assert len(COCO_NAMES) == 80 and max(max(p) for p in COCO_SKELETON) == 16
