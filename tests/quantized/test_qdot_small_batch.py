"""The small-batch paths of the native quantized kernels at their boundaries.

Up to 4 activation rows the kernels read the raw blocks (kernels/cpu/quant/qdot_raw.c): on
AVX-512 two 32-element blocks a step, two steps an iteration, then a lone pair and a lone
block; on AVX2 one block at a time. Activations of 32-element types also come in 8-lane
forms (block scale, minus the offset times the level sum). So the block counts 1..9 take
every tail, batches 1..5 cross from the raw kernels to the decoded rows, 63..65 the row
groups of the decoded path. Every case uses activations Q8 represents exactly (integers with
127 in each block: d = 1, q = x), so the result must equal the float64 product with
gguf-py's decoded weight up to f32 rounding.
"""

from __future__ import annotations

import ctypes
import mmap

import gguf
import numpy as np
import pytest
from gguf import quants
from quantized_helpers import (
    NATIVE_TYPES,
    assert_exact,
    exact_case,
    integer_kernels_fixture,
    native_qmatmul,
    native_variants,
)

from workbench.backends.cpu import ggml

VARIANTS = native_variants()
pytestmark = pytest.mark.skipif(not VARIANTS, reason="the native extension is not built")
native = integer_kernels_fixture()
LEGACY = tuple(t for t in NATIVE_TYPES if ggml.BY_NAME[t].block_size == 32)
KQUANTS = tuple(t for t in NATIVE_TYPES if ggml.BY_NAME[t].block_size == 256)


@pytest.mark.parametrize("name", LEGACY)
@pytest.mark.parametrize("blocks", [1, 2, 3, 4, 5, 6, 7, 9])
@pytest.mark.parametrize("batch", [1, 2, 3, 4, 5])
def test_legacy_block_counts(native, name, blocks, batch):
    n, k = 7, 32 * blocks
    raw, x, ref, scale = exact_case(name, n, k, batch, seed=blocks * 10 + batch)
    assert_exact(native_qmatmul(native, raw, name, n, k, x), ref, scale)


@pytest.mark.parametrize("name", KQUANTS)
@pytest.mark.parametrize("blocks", [1, 2, 3])
@pytest.mark.parametrize("batch", [1, 2, 5])
def test_kquant_block_counts(native, name, blocks, batch):
    n, k = 5, 256 * blocks
    raw, x, ref, scale = exact_case(name, n, k, batch, seed=blocks * 10 + batch)
    assert_exact(native_qmatmul(native, raw, name, n, k, x), ref, scale)


@pytest.mark.parametrize("name", ["Q4_0", "Q5_1", "Q8_0", "IQ4_NL", "Q4_K", "Q6_K"])
@pytest.mark.parametrize("batch", [63, 64, 65])
def test_batch_boundaries(native, name, batch):
    n, k = 11, 768
    raw, x, ref, scale = exact_case(name, n, k, batch, seed=batch)
    assert_exact(native_qmatmul(native, raw, name, n, k, x), ref, scale)


@pytest.mark.parametrize("name", ["Q4_0", "Q5_0", "Q5_1", "Q8_0", "IQ4_NL", "Q4_K"])
@pytest.mark.parametrize("blocks", [1, 3, 8])
def test_weight_ending_at_a_page_boundary(native, name, blocks):
    """The last weight row ends where readable memory ends: a kernel that reads a byte past
    the blocks it was given faults here instead of passing by luck."""
    info = ggml.BY_NAME[name]
    k = info.block_size * blocks
    n = 3
    raw, x, ref, scale = exact_case(name, n, k, 1, seed=blocks)
    page = mmap.PAGESIZE
    size = -(-raw.nbytes // page) * page
    region = mmap.mmap(-1, size + page)
    base = ctypes.addressof(ctypes.c_char.from_buffer(region))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    if libc.mprotect(ctypes.c_void_p(base + size), page, 0) != 0:  # PROT_NONE
        pytest.skip("mprotect is not available")
    try:
        buf = np.frombuffer(region, np.uint8, count=raw.nbytes, offset=size - raw.nbytes)
        buf[:] = raw.reshape(-1)
        assert_exact(native_qmatmul(native, buf, name, n, k, x), ref, scale)
        del buf
    finally:
        libc.mprotect(ctypes.c_void_p(base + size), page, 3)  # PROT_READ | PROT_WRITE
        region.close()


@pytest.mark.parametrize("target", ["Q8_0", "Q8_1"])
def test_activation_rounding_at_halves(native, target):
    """Values whose scaled level is exactly n + 1/2 round away from zero (ggml's roundf), as
    do the nearest floats on either side of a half."""
    rng = np.random.default_rng(9)
    x = np.empty((8, 32), np.float32)
    for b in range(8):
        halves = (rng.integers(-126, 126, 31) + 0.5).astype(np.float32)
        if b % 2:  # one float below / above the half
            halves = np.nextafter(halves, np.float32(np.inf if b % 4 == 1 else -np.inf))
        x[b] = np.concatenate([[127.0], halves]).astype(np.float32) * np.float32(2.0 ** (b - 3))
    x = x.reshape(-1)
    info = ggml.BY_NAME[target]
    out = np.empty(x.size // 32 * info.type_size, np.uint8)
    native.quantize_activations(x, info.id, out)
    if target == "Q8_0":
        ref = quants.quantize(x.reshape(-1, 32), gguf.GGMLQuantizationType.Q8_0).reshape(-1)
    else:
        ref = ggml.quantize(x, "Q8_1").reshape(-1)
    np.testing.assert_array_equal(out, ref)
