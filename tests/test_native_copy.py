"""Copies by the native cast kernel (kernels/cpu/core/cast.c): ``CpuStorage.copy_strided`` of one
dtype into a contiguous region of another buffer (``cat`` of a batch of one) and
``contiguous`` from 64k elements, against torch and numpy; overlapping and broadcast copies
keep numpy's assignment, small ones numpy's copy."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import torch

import workbench as wb
from workbench.backends.cpu import storage
from workbench.backends.cpu.native import NATIVE

pytestmark = pytest.mark.skipif(NATIVE is None, reason="the native CPU kernels are not built")

DTYPES = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16, "i64": np.int64}


@pytest.fixture
def native_copies(monkeypatch):
    """(size, whether into a view) of each copy the native kernel makes while the test runs:
    copies into views are ``copy_strided``'s, the others casts' and ``contiguous``'s."""
    copies = []
    kernel = storage._NATIVE_CAST

    def spy(src, offset, shape, strides, out):
        copies.append((out.size, out.base is not None))
        return kernel(src, offset, shape, strides, out)

    monkeypatch.setattr(storage, "_NATIVE_CAST", spy)
    return copies


def into_views(copies) -> list[int]:
    return sorted(size for size, view in copies if view)


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_cat_of_one_image_copies_natively_and_matches_torch(native_copies, dtype):
    rng = np.random.default_rng(0)
    parts = [(rng.standard_normal((1, c, 96, 96)) * 50).astype(DTYPES[dtype]) for c in (8, 12)]
    # a transposed third part: read through its strides
    parts.append(np.ascontiguousarray(parts[0].transpose(0, 1, 3, 2)).transpose(0, 1, 3, 2))
    got = wb.cat([wb.tensor(p) for p in parts], 1).numpy()
    as_torch = [
        torch.from_numpy(np.asarray(p, np.float32 if dtype == "bf16" else None)) for p in parts
    ]
    want = torch.cat(as_torch, 1).numpy()
    np.testing.assert_array_equal(got.astype(want.dtype), want)
    assert into_views(native_copies) == [8 * 96 * 96, 8 * 96 * 96, 12 * 96 * 96]


def test_overlapping_copy_within_one_buffer_stays_numpys(native_copies):
    """x[1:] = x[:-1] reads what it writes: numpy's assignment, which buffers overlaps."""
    x = np.arange(300_000, dtype=np.float32)
    t = wb.tensor(x.copy())
    t[1:] = t[:-1]
    want = x.copy()
    want[1:] = x[:-1]
    np.testing.assert_array_equal(t.numpy(), want)
    assert into_views(native_copies) == []


def test_broadcast_copy_stays_numpys_and_a_converted_value_lands_rounded(native_copies):
    t = wb.zeros((4, 100_000))
    t[...] = wb.tensor(np.arange(100_000, dtype=np.float32))
    assert into_views(native_copies) == []  # a broadcast source: numpy's assignment
    t[1:3] = wb.tensor(np.full((2, 100_000), 0.1, np.float64))  # cast to f32, then copied
    want = np.tile(np.arange(100_000, dtype=np.float32), (4, 1))
    want[1:3] = np.float32(0.1)
    np.testing.assert_array_equal(t.numpy(), want)
    assert into_views(native_copies) == [200_000]


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("size", [(4, 16, 1024), (4, 16, 1023)])
def test_contiguous_of_a_permuted_view_copies_natively_from_64k_elements(
    native_copies, dtype, size
):
    x = (np.random.default_rng(1).standard_normal(size) * 50).astype(DTYPES[dtype])
    got = wb.tensor(x).permute(2, 0, 1).contiguous().numpy()
    np.testing.assert_array_equal(got, np.ascontiguousarray(x.transpose(2, 0, 1)))
    native = [n for n, view in native_copies if not view]
    assert native == ([x.size] if x.size >= 1 << 16 else [])
