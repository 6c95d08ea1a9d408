"""The native attention, group_norm and rope kernels (kernels/cpu/core/attention.c, rows.c)
against PyTorch (float64 references from the same rounded inputs) and against the numpy path.

Sizes straddle the kernel's query blocks (64) and key blocks (128), the dot-product path for a
few queries, and the register tiles (6 rows x 2 vectors), so every remainder branch runs.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import workbench as wb
from workbench.backends.cpu import fused
from workbench.backends.cpu.native import NATIVE
from workbench.backends.cpu.storage import CpuStorage
from workbench.layout import Layout

pytestmark = pytest.mark.skipif(NATIVE is None, reason="the native CPU kernels are not built")

rng = np.random.default_rng(7)
DTYPES = [wb.f32, wb.f64, wb.f16, wb.bf16]
NUMPY = {wb.f32: np.float32, wb.f64: np.float64, wb.f16: np.float16, wb.bf16: ml_dtypes.bfloat16}
# One rounding of an O(1) result in the storage dtype, plus f32 accumulation for the halves.
TOL = {
    wb.f32: dict(rtol=1e-5, atol=2e-6),
    wb.f64: dict(rtol=1e-12, atol=1e-13),
    wb.f16: dict(rtol=2e-3, atol=2e-3),
    wb.bf16: dict(rtol=1.6e-2, atol=1.6e-2),
}


def rounded(dtype: wb.DType, *shape: int, scale: float = 1.0) -> np.ndarray:
    """Random values already rounded to ``dtype``, as float64 (the reference's input)."""
    x = rng.standard_normal(shape) * scale
    return x.astype(NUMPY[dtype]).astype(np.float64)


def tensor(a: np.ndarray, dtype: wb.DType) -> wb.Tensor:
    return wb.tensor(a.astype(NUMPY[dtype]))


def torch_sdpa(q, k, v, mask=None, is_causal=False, scale=None, enable_gqa=False) -> np.ndarray:
    t = [torch.from_numpy(np.asarray(a, np.float64)) for a in (q, k, v)]
    m = None if mask is None else torch.from_numpy(mask if mask.dtype == bool else mask + 0.0)
    out = F.scaled_dot_product_attention(*t, attn_mask=m, is_causal=is_causal, scale=scale,
                                         enable_gqa=enable_gqa)  # fmt: skip
    return out.numpy()


def check_sdpa(dtype, q, k, v, mask=None, is_causal=False, scale=None, expect=None, tol=None):
    ref = torch_sdpa(q, k, v, mask, is_causal, scale) if expect is None else expect
    m = None
    if mask is not None:
        m = wb.tensor(mask) if mask.dtype == bool else tensor(mask, dtype)
    qkv = (tensor(a, dtype) for a in (q, k, v))
    out = wb.scaled_dot_product_attention(*qkv, attn_mask=m, is_causal=is_causal, scale=scale)
    assert out.dtype == dtype
    np.testing.assert_allclose(out.to(wb.f64).numpy(), ref, **(tol or TOL[dtype]))


# -- attention: values -------------------------------------------------------------------------
SHAPES = [
    # batch, L, S, E, Ev
    ((2, 3), 5, 7, 8, 8),
    ((1, 2), 64, 128, 64, 64),  # exactly one query block, one key block
    ((1, 2), 67, 131, 33, 17),  # odd everything: tile and vector remainders
    ((2,), 1, 300, 64, 64),  # decode: one query, dot-product scores
    ((3,), 3, 129, 16, 40),  # a few queries
    ((1,), 200, 100, 24, 8),  # L > S
    ((1,), 130, 260, 128, 96),  # wide heads
]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("batch,L,S,E,Ev", SHAPES)
@pytest.mark.parametrize("is_causal", [False, True])
def test_attention_matches_torch(dtype, batch, L, S, E, Ev, is_causal):
    q, k, v = (
        rounded(dtype, *batch, L, E),
        rounded(dtype, *batch, S, E),
        rounded(dtype, *batch, S, Ev),
    )
    check_sdpa(dtype, q, k, v, is_causal=is_causal)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("mask_shape", [(70, 150), (2, 1, 70, 150), (1, 3, 1, 150)])
def test_attention_bool_mask_broadcasts(dtype, mask_shape):
    q, k, v = (
        rounded(dtype, 2, 3, 70, 16),
        rounded(dtype, 2, 3, 150, 16),
        rounded(dtype, 2, 3, 150, 16),
    )
    mask = rng.uniform(size=mask_shape) > 0.4
    check_sdpa(dtype, q, k, v, mask=mask, scale=0.3)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_attention_float_mask_is_added(dtype):
    q, k, v = rounded(dtype, 2, 70, 32), rounded(dtype, 2, 140, 32), rounded(dtype, 2, 140, 24)
    mask = rounded(dtype, 1, 70, 140, scale=2.0)
    mask[0, 5, :] = -np.inf  # a fully masked row
    mask[0, 6, ::2] = -np.inf
    check_sdpa(dtype, q, k, v, mask=mask)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("L", [1, 3, 70])
def test_attention_fully_masked_rows_give_zeros(dtype, L):
    """As the op layer defines it (and PyTorch's CPU kernels): zeros, not NaN."""
    q, k, v = rounded(dtype, 2, L, 16), rounded(dtype, 2, 200, 16), rounded(dtype, 2, 200, 16)
    mask = rng.uniform(size=(2, L, 200)) > 0.5
    mask[0, L // 2, :] = False
    mask[1, :, :] = False
    expect = torch_sdpa(q, k, v, mask)
    expect[0, L // 2] = 0.0
    expect[1] = 0.0
    check_sdpa(dtype, q, k, v, mask=mask, expect=expect)


@pytest.mark.parametrize("dtype", [wb.f32, wb.bf16], ids=str)
@pytest.mark.parametrize("L,S", [(70, 200), (200, 70), (1, 50), (129, 129)])
def test_attention_causal_is_top_left_aligned(dtype, L, S):
    """is_causal keeps j <= i whatever L and S (torch's tril, not the bottom-right diagonal)."""
    q, k, v = rounded(dtype, 2, L, 16), rounded(dtype, 2, S, 16), rounded(dtype, 2, S, 16)
    expect = torch_sdpa(q, k, v, mask=np.tri(L, S, dtype=bool))
    check_sdpa(dtype, q, k, v, is_causal=True, expect=expect)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("L", [1, 70])
def test_attention_grouped_query_heads(dtype, L):
    """GQA: 8 query heads share 2 kv heads (head h reads kv head h // 4), as torch's
    enable_gqa. k and v are broadcast over the group dim: the kernel reads them in place."""
    b, hq, hkv, s, e = 2, 8, 2, 150, 32
    q, k, v = (
        rounded(dtype, b, hq, L, e),
        rounded(dtype, b, hkv, s, e),
        rounded(dtype, b, hkv, s, e),
    )
    expect = torch_sdpa(q, k, v, is_causal=L > 1, enable_gqa=True)
    qg = tensor(q, dtype).reshape((b, hkv, hq // hkv, L, e))
    kg, vg = (tensor(a, dtype).reshape((b, hkv, 1, s, e)) for a in (k, v))
    out = wb.scaled_dot_product_attention(qg, kg, vg, is_causal=L > 1)
    np.testing.assert_allclose(out.to(wb.f64).numpy().reshape(b, hq, L, e), expect, **TOL[dtype])


def test_attention_strided_inputs():
    """q, k, v as (B, L, H, E) views transposed to (B, H, L, E), k also sliced."""
    q = rounded(wb.f32, 2, 70, 4, 32)
    k = rounded(wb.f32, 2, 300, 4, 64)
    v = rounded(wb.f32, 2, 150, 4, 16)
    qt, kt, vt = (wb.tensor(a.astype(np.float32)).transpose(1, 2) for a in (q, k, v))
    kt = kt.narrow(2, 10, 150).narrow(3, 5, 32)
    out = wb.scaled_dot_product_attention(qt, kt, vt, is_causal=True)
    qr, kr, vr = (
        q.transpose(0, 2, 1, 3),
        k[:, 10:160, :, 5:37].transpose(0, 2, 1, 3),
        v.transpose(0, 2, 1, 3),
    )
    np.testing.assert_allclose(out.numpy(), torch_sdpa(qr, kr, vr, is_causal=True), **TOL[wb.f32])


def test_attention_long_sequence_causal():
    """Many key blocks per query block: the online softmax's rescaling, with large scores
    (|z| ~ 30: exp's relative error grows with |z|; torch's own f32 kernel is ~6e-6 off)."""
    q, k, v = (
        rounded(wb.f32, 1, 1100, 64, scale=4.0),
        rounded(wb.f32, 1, 1100, 64),
        rounded(wb.f32, 1, 1100, 64),
    )
    check_sdpa(wb.f32, q, k, v, is_causal=True, tol=dict(rtol=1e-4, atol=2e-5))


def test_attention_nan_propagates_to_its_row():
    q, k, v = rounded(wb.f32, 1, 70, 16), rounded(wb.f32, 1, 130, 16), rounded(wb.f32, 1, 130, 16)
    q[0, 3, 2] = np.nan
    out = wb.scaled_dot_product_attention(
        tensor(q, wb.f32), tensor(k, wb.f32), tensor(v, wb.f32)
    ).numpy()
    assert np.isnan(out[0, 3]).all()
    assert np.isfinite(np.delete(out[0], 3, axis=0)).all()


@pytest.mark.parametrize("S,E", [(0, 8), (5, 0)])
def test_attention_empty_keys_or_features(S, E):
    """No keys: every query is fully masked (zeros). E = 0: all scores are 0 (a mean of v)."""
    q, k, v = rounded(wb.f32, 2, 3, E), rounded(wb.f32, 2, S, E), rounded(wb.f32, 2, S, 4)
    expect = np.zeros((2, 3, 4)) if S == 0 else np.broadcast_to(v.mean(1, keepdims=True), (2, 3, 4))
    check_sdpa(wb.f32, q, k, v, scale=1.0, expect=expect)


# -- attention: native path against the numpy path, and the deferred probabilities ------------
def _storages(dtype, *arrays):
    out = []
    for a in arrays:
        a = np.ascontiguousarray(a.astype(NUMPY[dtype]) if a.dtype != bool else a)
        out += [CpuStorage(a), Layout.contiguous(a.shape)]
    return out


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("kind", ["causal", "bool", "float"])
def test_attention_native_matches_numpy_path(dtype, kind):
    q, k, v = rounded(dtype, 2, 90, 24), rounded(dtype, 2, 140, 24), rounded(dtype, 2, 140, 20)
    mask = None
    if kind == "bool":
        mask = rng.uniform(size=(2, 90, 140)) > 0.5
    elif kind == "float":
        mask = rounded(dtype, 2, 90, 140)
    qs, ql, ks, kl, vs, vl = _storages(dtype, q, k, v)
    ms, ml = _storages(dtype, mask) if mask is not None else (None, None)
    args = (ql, ks, kl, vs, vl, ms, ml, kind == "causal", 0.25)
    out, probs = qs.scaled_dot_product_attention(*args)
    ref_out, ref_probs = qs._attention_numpy(*args)
    assert type(probs).__name__ == "DeferredCpuStorage"
    np.testing.assert_allclose(
        out.array.astype(np.float64), ref_out.astype(np.float64), **TOL[dtype]
    )
    # computed now, as exp(z - lse) from the forward's log-normaliser (f32 for the halves)
    assert probs.array.dtype == ref_probs.dtype
    tol = dict(rtol=1e-10, atol=1e-12) if dtype == wb.f64 else dict(rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(probs.array, ref_probs, **tol)


def test_attention_forward_leaves_probabilities_uncomputed():
    qs, ql, ks, kl, vs, vl = _storages(wb.f32, *(rounded(wb.f32, 1, 600, 8) for _ in range(3)))
    _, probs = qs.scaled_dot_product_attention(ql, ks, kl, vs, vl, None, None, True, 1.0)
    assert type(probs).__name__ == "DeferredCpuStorage"
    assert not isinstance(CpuStorage.array.__get__(probs), np.ndarray)  # not computed yet
    assert probs.array.shape == (1, 600, 600)
    assert type(probs) is CpuStorage and probs.nbytes == 600 * 600 * 4


def _torch_lse(q, k, mask=None, is_causal=False, scale=None) -> np.ndarray:
    """log Σ_j exp(z_ij), z = q kᵀ · scale + mask, in f64 by torch."""
    z = torch.from_numpy(q) @ torch.from_numpy(k).transpose(-1, -2)
    z = z * (1.0 / np.sqrt(q.shape[-1]) if scale is None else scale)
    if is_causal:
        z = z.masked_fill(~torch.ones(z.shape[-2:], dtype=torch.bool).tril(), -torch.inf)
    if mask is not None:
        m = torch.from_numpy(mask)
        z = z.masked_fill(~m, -torch.inf) if mask.dtype == bool else z + m
    return torch.logsumexp(z, -1).numpy()


# L and S around the kernel's tiles: WB_BQ = 64 queries, WB_BK = 128 keys, and few-query rows
LSE_SHAPES = [(1, 300), (3, 129), (63, 127), (64, 128), (65, 129), (130, 257)]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("L,S", LSE_SHAPES)
@pytest.mark.parametrize("kind", ["none", "causal", "bool", "float"])
def test_attention_saves_the_log_normaliser(dtype, L, S, kind):
    """The forward's lse output is torch's logsumexp of the masked scores (in the compute
    type); a fully masked query gets -inf."""
    q, k, v = rounded(dtype, 2, L, 24), rounded(dtype, 2, S, 24), rounded(dtype, 2, S, 8)
    mask = None
    if kind == "bool":
        mask = rng.uniform(size=(2, L, S)) > 0.5
        mask[1, L // 2, :] = False
    elif kind == "float":
        mask = rounded(dtype, 2, L, S)
        mask[0, L - 1, :] = -np.inf
    qs, ql, ks, kl, vs, vl = _storages(dtype, q, k, v)
    ms, ml = _storages(dtype, mask) if mask is not None else (None, None)
    m = (None, 0, ()) if mask is None else (ms.array, 0, ml.strides)
    out = np.empty((2, L, 8), qs.array.dtype)
    lse = np.empty((2, L), np.float64 if dtype == wb.f64 else np.float32)
    operands = [(s.array, 0, lay.shape, lay.strides) for s, lay in ((qs, ql), (ks, kl), (vs, vl))]
    NATIVE.attention(*operands[0], *operands[1], *operands[2], *m, kind == "causal", 0.2, out, lse)
    ref = _torch_lse(q, k, mask if kind in ("bool", "float") else None, kind == "causal", 0.2)
    assert np.array_equal(np.isneginf(lse), np.isneginf(ref))
    tol = dict(rtol=1e-12, atol=1e-12) if dtype == wb.f64 else dict(rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        np.where(np.isneginf(ref), 0, lse), np.nan_to_num(ref, neginf=0), **tol
    )


def test_attention_lse_errors():
    q = np.zeros((2, 3, 4), np.float32)
    lay = ((2, 3, 4), (12, 4, 1))
    base = [q, 0, *lay, q, 0, *lay, q, 0, *lay, None, 0, (), False, 1.0, np.empty_like(q)]
    with pytest.raises(TypeError, match="lse must be f64 for f64 inputs, else f32"):
        NATIVE.attention(*base, np.empty((2, 3), np.float64))
    with pytest.raises(ValueError, match="expected 6 elements"):
        NATIVE.attention(*base, np.empty((2, 4), np.float32))


GRAD_CASES = [
    # kind, batch of q (k, v broadcast from the same), L, S
    ("bool", (2,), 70, 140),
    ("causal", (2,), 130, 130),  # a key block crossing the diagonal, tile remainders
    ("float", (2, 3), 65, 129),  # the float mask gets a gradient too
    ("none", (1,), 1, 300),  # decode: one query
]


def _sdpa_grads(dtype, kind, batch, L, S):
    """Gradients of Σ out² with respect to q, k, v (and a float mask) from workbench and from
    torch (f64), on one random problem."""
    q, k, v = (
        rounded(dtype, *batch, L, 16),
        rounded(dtype, *batch, S, 16),
        rounded(dtype, *batch, S, 12),
    )
    mask = None
    if kind == "bool":
        mask = rng.uniform(size=(L, S)) > 0.3
        mask[3, :] = False  # a fully masked query: zero output, zero gradients
    elif kind == "float":
        mask = rounded(dtype, 1, L, S)
    ws = [wb.Var(tensor(a, dtype)) for a in (q, k, v)]
    wm = None
    if mask is not None:
        wm = wb.tensor(mask) if mask.dtype == bool else wb.Var(tensor(mask, dtype))
    out = wb.scaled_dot_product_attention(*ws, attn_mask=wm, is_causal=kind == "causal")
    grads = (out * out).sum().backward()
    ts = [torch.from_numpy(a).requires_grad_() for a in (q, k, v)]
    tm = None if mask is None else torch.from_numpy(mask)
    if kind == "float":
        tm.requires_grad_()
    tout = F.scaled_dot_product_attention(*ts, attn_mask=tm, is_causal=kind == "causal")
    if kind == "bool":
        tout = torch.nan_to_num(tout)  # torch's math path gives NaN for the fully masked row
    (tout * tout).sum().backward()
    pairs = list(zip(ws, ts, strict=True))
    if kind == "float":
        pairs.append((wm, tm))
    return [(grads[w], t.grad.nan_to_num() if t.grad is not None else None) for w, t in pairs]


@pytest.mark.parametrize("dtype", [wb.f32, wb.f64], ids=str)
@pytest.mark.parametrize("kind,batch,L,S", GRAD_CASES)
def test_attention_gradients_match_torch(dtype, kind, batch, L, S):
    """The backward reads the probabilities exp(z - lse) rebuilt from the forward's saved
    log-normaliser."""
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == wb.f32 else dict(rtol=1e-9, atol=1e-10)
    for ours, ref in _sdpa_grads(dtype, kind, batch, L, S):
        np.testing.assert_allclose(ours.to(wb.f64).numpy(), ref.numpy(), **tol)


@pytest.mark.parametrize("dtype", [wb.f16, wb.bf16], ids=str)
def test_attention_gradients_of_halves_match_torch(dtype):
    """Halves: the forward and the probabilities are f32, the gradients rounded once."""
    for ours, ref in _sdpa_grads(dtype, "causal", (2,), 70, 70):
        scale = float(np.abs(ref.numpy()).max())
        np.testing.assert_allclose(
            ours.to(wb.f64).numpy(), ref.numpy(), rtol=TOL[dtype]["rtol"] * 4,
            atol=TOL[dtype]["atol"] * 4 * scale,
        )  # fmt: skip


def test_attention_kernel_errors():
    q = np.zeros((2, 3, 4), np.float32)
    lay = ((2, 3, 4), (12, 4, 1))
    base = [q, 0, *lay, q, 0, *lay, q, 0, *lay, None, 0, (), False, 1.0]
    with pytest.raises(TypeError, match="share one float dtype"):
        bad = list(base)
        bad[4] = q.astype(np.float64)
        NATIVE.attention(*bad, np.empty((2, 3, 4), np.float32))
    with pytest.raises(ValueError, match="out: expected 24 elements"):
        NATIVE.attention(*base, np.empty((2, 3, 5), np.float32))
    with pytest.raises(ValueError, match="k's last dim"):
        bad = list(base)
        bad[6], bad[7] = (2, 3, 2), (12, 4, 1)
        NATIVE.attention(*bad, np.empty((2, 3, 4), np.float32))
    with pytest.raises(TypeError, match="mask must be bool or q's dtype"):
        bad = list(base)
        bad[12], bad[14] = np.zeros((2, 3, 3), np.int32), (9, 3, 1)
        NATIVE.attention(*bad, np.empty((2, 3, 4), np.float32))


# -- group_norm ------------------------------------------------------------------------------
GROUP_NORM_CASES = [
    ((2, 64, 8, 8), 32),  # a UNet block at small size
    ((1, 6, 5), 3),
    ((3, 8, 7, 9), 1),  # one group: layer norm over everything
    ((2, 12, 33), 12),  # one channel per group: instance norm
]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape,groups", GROUP_NORM_CASES)
@pytest.mark.parametrize("affine", [False, True])
def test_group_norm_matches_torch(dtype, shape, groups, affine):
    x = rounded(dtype, *shape, scale=3.0) + 2.0  # an offset: the variance must be centred
    x = x.astype(NUMPY[dtype]).astype(np.float64)
    w = rounded(dtype, shape[1]) if affine else None
    b = rounded(dtype, shape[1]) if affine else None
    tw = None if w is None else torch.from_numpy(w)
    tb = None if b is None else torch.from_numpy(b)
    expect = F.group_norm(torch.from_numpy(x), groups, tw, tb, eps=1e-5).numpy()
    out = wb.group_norm(tensor(x, dtype), groups, None if w is None else tensor(w, dtype),
                        None if b is None else tensor(b, dtype), eps=1e-5)  # fmt: skip
    assert out.dtype == dtype
    np.testing.assert_allclose(out.to(wb.f64).numpy(), expect, **TOL[dtype])


@pytest.fixture
def numpy_path(monkeypatch):
    """Within the test, calling it runs the storage's numpy path (the native dtype set is empty)."""

    def run(fn, *args):
        with monkeypatch.context() as m:
            m.setattr(fused, "_NATIVE_FLOAT", "")
            return fn(*args)

    return run


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("affine", [False, True])
def test_group_norm_native_matches_numpy_path_and_statistics(dtype, affine, numpy_path):
    st = CpuStorage(np.ascontiguousarray(rounded(dtype, 2, 8, 30).astype(NUMPY[dtype])))
    lay = Layout((2, 8, 15), (240, 30, 2), 0)  # every other spatial element
    w = CpuStorage(rounded(dtype, 8).astype(NUMPY[dtype])) if affine else None
    b = CpuStorage(rounded(dtype, 8).astype(NUMPY[dtype])) if affine else None
    vec = Layout.contiguous((8,)) if affine else None
    args = (lay, 4, w, vec, b, vec, 1e-6)
    got = st.group_norm(*args)
    ref = numpy_path(st.group_norm, *args)
    for g, r in zip(got, ref, strict=True):
        assert g.array.dtype == r.array.dtype and g.array.shape == r.array.shape
        np.testing.assert_allclose(
            g.array.astype(np.float64), r.array.astype(np.float64), **TOL[dtype]
        )
    x3 = st.array[:, :, ::2].astype(np.float64).reshape(2, 4, 30)
    np.testing.assert_allclose(got[1].array, x3.mean(-1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[2].array, 1 / np.sqrt(x3.var(-1) + 1e-6), rtol=1e-5)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("interleaved", [False, True])
def test_rope_native_matches_numpy_path(dtype, interleaved, numpy_path):
    x = CpuStorage(rounded(dtype, 2, 3, 7, 10).astype(NUMPY[dtype]))
    c = CpuStorage(np.cos(rng.uniform(-3, 3, (7, 5))).astype(NUMPY[dtype]))
    s = CpuStorage(np.sin(rng.uniform(-3, 3, (7, 5))).astype(NUMPY[dtype]))
    table = Layout((2, 3, 7, 5), (0, 0, 5, 1), 0)  # broadcast over batch and heads
    args = (Layout.contiguous((2, 3, 7, 10)), c, table, s, table, interleaved)
    got, ref = x.rope(*args), numpy_path(x.rope, *args)
    assert got.array.dtype == ref.array.dtype
    np.testing.assert_array_equal(got.array, ref.array)  # the same two products and a sum


# -- rope ------------------------------------------------------------------------------------
def rope_reference(x, cos, sin, interleaved):
    """Rotation of each pair as a complex multiplication by e^{iθ} (float64)."""
    if interleaved:
        z = (x[..., 0::2] + 1j * x[..., 1::2]) * (cos + 1j * sin)
        return np.stack([z.real, z.imag], -1).reshape(x.shape)
    h = x.shape[-1] // 2
    z = (x[..., :h] + 1j * x[..., h:]) * (cos + 1j * sin)
    return np.concatenate([z.real, z.imag], -1)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("x_shape,table_shape", [((2, 4, 37, 64), (37, 32)), ((3, 5, 6), (5, 3)),
                                                 ((2, 3, 9, 128), (2, 1, 9, 64))])  # fmt: skip
def test_rope_matches_reference(dtype, interleaved, x_shape, table_shape):
    x = rounded(dtype, *x_shape)
    theta = rng.uniform(-np.pi, np.pi, table_shape)
    cos = np.cos(theta).astype(NUMPY[dtype]).astype(np.float64)
    sin = np.sin(theta).astype(NUMPY[dtype]).astype(np.float64)
    out = wb.rope(tensor(x, dtype), tensor(cos, dtype), tensor(sin, dtype), interleaved)
    assert out.dtype == dtype
    np.testing.assert_allclose(out.to(wb.f64).numpy(), rope_reference(x, cos, sin, interleaved),
                               **TOL[dtype])  # fmt: skip


@pytest.mark.parametrize("interleaved", [False, True])
def test_rope_strided_x_and_tables(interleaved):
    """x as a (B, T, H, D) view transposed to (B, H, T, D); cos/sin sliced from a wider table."""
    x = rounded(wb.f32, 2, 9, 3, 16)
    theta = rng.uniform(-3, 3, (20, 8))
    table_c, table_s = np.cos(theta), np.sin(theta)
    got = wb.rope(wb.tensor(x.astype(np.float32)).transpose(1, 2),
                  wb.tensor(table_c.astype(np.float32)).narrow(0, 4, 9),
                  wb.tensor(table_s.astype(np.float32)).narrow(0, 4, 9), interleaved)  # fmt: skip
    expect = rope_reference(x.transpose(0, 2, 1, 3), table_c[4:13], table_s[4:13], interleaved)
    np.testing.assert_allclose(got.numpy(), expect, rtol=1e-5, atol=1e-6)
