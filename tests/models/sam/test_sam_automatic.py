"""Automatic masks against segment-anything's SamAutomaticMaskGenerator (goldens), plus the
helpers on hand-made inputs."""

from __future__ import annotations

import numpy as np
import pytest

# The generator settings the goldens were made with (the script imports segment-anything only
# when it runs, so importing its constants needs nothing beyond numpy).
from fixtures.make_sam_goldens import AMG, AMG_CASES

from workbench.models.sam.automatic import (
    SamAutomaticMaskGenerator,
    crop_boxes,
    mask_to_box,
    nms,
    point_grid,
    remove_small_regions,
    stability_score,
)


@pytest.fixture(scope="module")
def golden(sam_model, sam_golden):
    return sam_model, sam_golden[1]


@pytest.mark.parametrize("case", list(AMG_CASES))
def test_generate_matches_reference(golden, case):
    sam, g = golden
    layers, box_nms, crop_nms, min_area = AMG_CASES[case]
    gen = SamAutomaticMaskGenerator(
        sam,
        **AMG,
        crop_n_layers=layers,
        box_nms_thresh=box_nms,
        crop_nms_thresh=crop_nms,
        min_mask_region_area=min_area,
    )
    anns = gen.generate(g["image.0"].astype(np.uint8))
    assert len(anns) == len(g[f"{case}.area"])
    seg = np.stack([a["segmentation"] for a in anns])
    np.testing.assert_array_equal(seg, g[f"{case}.segmentation"].astype(bool))
    for key in ("bbox", "crop_box", "point_coords"):
        np.testing.assert_allclose([np.ravel(a[key]) for a in anns], g[f"{case}.{key}"])
    np.testing.assert_array_equal([a["area"] for a in anns], g[f"{case}.area"])
    for key in ("predicted_iou", "stability_score"):
        np.testing.assert_allclose([a[key] for a in anns], g[f"{case}.{key}"], atol=1e-5)


def test_point_grid():
    np.testing.assert_allclose(
        point_grid(2), [[0.25, 0.25], [0.75, 0.25], [0.25, 0.75], [0.75, 0.75]]
    )


def test_crop_boxes():
    boxes, layers = crop_boxes(100, 200, 1, 0.5)
    assert boxes[0] == [0, 0, 200, 100] and layers == [0, 1, 1, 1, 1]
    for x0, y0, x1, y1 in boxes[1:]:
        assert 0 <= x0 < x1 <= 200 and 0 <= y0 < y1 <= 100


def test_stability_mask_box_nms():
    logits = np.full((2, 5, 6), -5.0)
    logits[0, 1:3, 2:5] = 5.0
    logits[1, 0, 0] = 0.5  # only above the low threshold
    np.testing.assert_allclose(stability_score(logits, 0.0, 1.0), [1.0, 0.0])
    np.testing.assert_array_equal(mask_to_box(logits > 0), [[2, 1, 4, 2], [0, 0, 0, 0]])
    boxes = np.array([[0, 0, 10, 10], [1, 1, 10, 10], [20, 20, 30, 30]], float)
    np.testing.assert_array_equal(nms(boxes, np.array([0.5, 0.9, 0.1]), 0.5), [1, 2])


def test_remove_small_regions():
    m = np.zeros((6, 8), bool)
    m[0:4, 0:5] = True
    m[1, 1] = False  # a 1-pixel hole
    m[5, 7] = True  # a 1-pixel island
    m[4, 5] = True  # touches the big region diagonally: 8-connected, so not an island
    holes, changed = remove_small_regions(m, 2, "holes")
    assert changed and holes[1, 1] and holes.sum() == m.sum() + 1
    islands, changed = remove_small_regions(m, 2, "islands")
    assert changed and not islands[5, 7] and islands[4, 5] and islands.sum() == m.sum() - 1
    same, changed = remove_small_regions(m, 1, "islands")
    assert not changed and same is m
    # every island small: the largest stays
    tiny = np.zeros((5, 5), bool)
    tiny[0, 0] = tiny[3, 3] = tiny[3, 4] = True
    kept, changed = remove_small_regions(tiny, 10, "islands")
    assert changed and kept.sum() == 2 and kept[3, 3] and kept[3, 4]
    with pytest.raises(ValueError, match="holes"):
        remove_small_regions(m, 2, "both")
