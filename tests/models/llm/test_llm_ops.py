"""The fused LLM kernels (``workbench.backends.cpu.llm_ops``), native and numpy twins, against
torch written out from the definitions: rope + head norms + the blocked cache layout,
attention over cached cells (masks by position, windows, soft-caps, grouped heads, f16
caches), the residual + RMS norm rows and the gated activations."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from workbench.backends.cpu import llm_ops
from workbench.backends.cpu.native import NATIVE

IMPLS = {"numpy": llm_ops.NUMPY}
if NATIVE is not None:
    IMPLS["native"] = {n: getattr(llm_ops, n) for n in llm_ops.NUMPY}

F32 = np.float32


def _rms(x: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def _rope_ref(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, n_rot: int, neox: bool):
    """x (n, H, D); cos/sin (n, n_rot/2)."""
    x = x.clone()
    r = x[..., :n_rot]
    if neox:
        x1, x2 = r[..., : n_rot // 2], r[..., n_rot // 2 :]
    else:
        x1, x2 = r[..., 0::2], r[..., 1::2]
    c, s = cos[:, None], sin[:, None]
    y1, y2 = x1 * c - x2 * s, x2 * c + x1 * s
    if neox:
        x[..., :n_rot] = torch.cat([y1, y2], -1)
    else:
        x[..., :n_rot] = torch.stack([y1, y2], -1).reshape(r.shape)
    return x


@pytest.mark.parametrize("impl", list(IMPLS))
@pytest.mark.parametrize(
    "hq, hkv, d, dv, n_rot, neox, norms, kv",
    [
        (12, 4, 64, 64, 64, False, False, "f32"),
        (6, 2, 96, 72, 32, True, True, "f32"),
        (4, 4, 32, 32, 32, True, False, "f16"),
    ],
)
def test_rope_store_matches_torch(impl, hq, hkv, d, dv, n_rot, neox, norms, kv):
    rng = np.random.default_rng(1)
    n, cells, eps = 7, 48, 1e-5
    pos = rng.permutation(40)[:n].astype(np.int64)
    slot = rng.permutation(cells)[:n].astype(np.int64)
    angles = np.arange(40)[:, None] * (0.5 ** np.arange(n_rot // 2))[None]
    cos, sin = np.cos(angles).astype(F32), np.sin(angles).astype(F32)
    q = rng.standard_normal((n, hq * d)).astype(F32)
    k = rng.standard_normal((n, hkv * d)).astype(F32)
    v = rng.standard_normal((n, hkv * dv)).astype(F32)
    wq, wk = (rng.standard_normal(d).astype(F32) for _ in range(2)) if norms else (None, None)
    dtype = {"f32": F32, "f16": np.float16}[kv]
    kb = np.zeros((hkv, cells // 16, d, 16), dtype)
    vc = np.zeros((hkv, cells, dv), dtype)
    qn, kn = q.copy(), k.copy()
    IMPLS[impl]["rope_store"](qn, kn, v, pos, cos, sin, wq, wk, kb, vc, slot, (hq, hkv, d, dv),
                              n_rot, neox, eps)  # fmt: skip

    def ref(x, heads, w):
        t = torch.from_numpy(x).reshape(n, heads, d)
        if w is not None:
            t = _rms(t, eps) * torch.from_numpy(w)
        c, s = torch.from_numpy(cos[pos]), torch.from_numpy(sin[pos])
        return _rope_ref(t, c, s, n_rot, neox).reshape(n, -1).numpy()

    tol = 1e-5 if kv == "f32" else 2e-3
    np.testing.assert_allclose(qn, ref(q, hq, wq), atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(kn, ref(k, hkv, wk), atol=1e-5, rtol=1e-5)
    stored = llm_ops.key_rows(kb).astype(F32)  # (hkv, cells, d)
    np.testing.assert_allclose(stored[:, slot].transpose(1, 0, 2).reshape(n, -1), kn,
                               atol=tol, rtol=tol)  # fmt: skip
    np.testing.assert_allclose(vc[:, slot].astype(F32).transpose(1, 0, 2).reshape(n, -1), v,
                               atol=tol, rtol=tol)  # fmt: skip
    others = np.setdiff1d(np.arange(cells), slot)
    assert not stored[:, others].any() and not vc[:, others].any()


def _attention_ref(q, keys, values, kpos, qpos, scale, softcap, window, hkv):
    """torch, from the definition: q (n, Hq, D), keys/values (Hkv, S, D)."""
    qt = torch.from_numpy(q).double()
    k = torch.from_numpy(keys).double().repeat_interleave(q.shape[1] // hkv, 0)
    v = torch.from_numpy(values).double().repeat_interleave(q.shape[1] // hkv, 0)
    s = torch.einsum("nhd,hsd->hns", qt, k) * scale
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    kp, qp = torch.from_numpy(kpos)[None, :], torch.from_numpy(qpos)[:, None]
    mask = (kp >= 0) & (kp <= qp)
    if window:
        mask &= qp - kp < window
    p = torch.softmax(s.masked_fill(~mask, -torch.inf), -1).nan_to_num(0.0)
    return torch.einsum("hns,hsd->nhd", p, v).numpy()


@pytest.mark.parametrize("impl", list(IMPLS))
@pytest.mark.parametrize(
    "n, hq, hkv, d, dv, window, softcap, kv",
    [
        (1, 12, 4, 64, 64, 0, 0.0, "f32"),  # a decode step (grouped heads)
        (1, 12, 4, 64, 64, 0, 0.0, "f16"),
        (37, 8, 2, 64, 64, 0, 0.0, "f32"),  # a prompt chunk: several tiles of tokens
        (9, 6, 6, 80, 72, 5, 30.0, "f32"),  # window, soft-cap, ragged value width
        (5, 4, 1, 128, 128, 3, 50.0, "f16"),
    ],
)
def test_attention_matches_torch(impl, n, hq, hkv, d, dv, window, softcap, kv):
    rng = np.random.default_rng(2)
    cells = 80
    dtype = {"f32": F32, "f16": np.float16}[kv]
    keys = rng.standard_normal((hkv, cells, d)).astype(dtype)
    values = rng.standard_normal((hkv, cells, dv)).astype(dtype)
    # a ring: cells hold shuffled positions, some empty, some ahead of every query
    kpos = rng.permutation(cells).astype(np.int64) + 3
    kpos[rng.random(cells) < 0.2] = -1
    qpos = np.sort(rng.choice(np.arange(20, 70), n, replace=False)).astype(np.int64)
    qpos[0] = 1  # sees nothing (no cell holds a position <= 1): zeros
    q = rng.standard_normal((n, hq * d)).astype(F32)
    n_keys = cells - 16  # the last block is not scanned
    out, ref = _attend(impl, q, keys, values, kpos, qpos, n_keys, 0.11, softcap, window)
    np.testing.assert_allclose(out, ref, atol=2e-5, rtol=1e-4)
    assert not out[0].any()


def _attend(impl, q, keys, values, kpos, qpos, n_keys, scale, softcap, window):
    """The kernel's output (n, Hq, Dv), from a NaN-filled array so an unwritten row shows, and
    the reference's, for keys / values (Hkv, cells, D / Dv)."""
    (hkv, cells, d), dv, n = keys.shape, values.shape[-1], q.shape[0]
    hq = q.shape[1] // d
    kb = np.ascontiguousarray(keys.reshape(hkv, cells // 16, 16, d).swapaxes(-1, -2))
    out = np.full((n, hq * dv), np.nan, F32)
    IMPLS[impl]["attention"](q, kb, values, kpos, qpos, out, (hq, hkv, d, dv), n_keys, scale,
                             softcap, window)  # fmt: skip
    ref = _attention_ref(q.reshape(n, hq, d), keys[:, :n_keys].astype(F32),
                         values[:, :n_keys].astype(F32), kpos[:n_keys], qpos, scale, softcap,
                         window, hkv)  # fmt: skip
    return out.reshape(n, hq, dv), ref


@pytest.mark.parametrize("impl", list(IMPLS))
@pytest.mark.parametrize(
    "n, n_keys, hq, hkv, dv, window, softcap, kv",
    [
        (47, 47 + 16, 3, 1, 64, 0, 0.0, "f32"),  # rows around the score / value tile heights
        (100, 112, 12, 4, 64, 0, 0.0, "f32"),  # a causal prompt, several row tiles
        (33, 48, 4, 4, 80, 0, 0.0, "f16"),  # 48 keys: an odd number of 16-cell blocks
        (25, 80, 12, 3, 24, 7, 20.0, "f32"),  # a window; values narrower than a vector
        (13, 208, 4, 1, 64, 0, 0.0, "f16"),  # a single query head per group of 4
    ],
)
def test_prompt_attention_matches_torch(impl, n, n_keys, hq, hkv, dv, window, softcap, kv):
    """A prompt in a fresh cache: cell j holds position j, query i is at n_keys - n + i."""
    rng = np.random.default_rng(5)
    d, cells = 64, (n_keys + 31) // 16 * 16
    dtype = {"f32": F32, "f16": np.float16}[kv]
    keys = rng.standard_normal((hkv, cells, d)).astype(dtype)
    values = rng.standard_normal((hkv, cells, dv)).astype(dtype)
    kpos = np.arange(cells, dtype=np.int64)
    kpos[n_keys:] = -1
    qpos = np.arange(n_keys - n, n_keys, dtype=np.int64)
    q = (rng.standard_normal((n, hq * d)) * 2).astype(F32)
    out, ref = _attend(impl, q, keys, values, kpos, qpos, n_keys, 0.125, softcap, window)
    np.testing.assert_allclose(out, ref, atol=2e-6, rtol=1e-5)


@pytest.mark.parametrize("impl", list(IMPLS))
@pytest.mark.parametrize("post", [False, True])
def test_residual_norm_matches_torch(impl, post):
    rng = np.random.default_rng(3)
    x, a = (rng.standard_normal((5, 96)).astype(F32) for _ in range(2))
    pw, w = (rng.standard_normal(96).astype(F32) for _ in range(2))
    xt, at = torch.from_numpy(x.copy()), torch.from_numpy(a)
    xt += _rms(at, 1e-6) * torch.from_numpy(pw) if post else at
    out = np.empty_like(x)
    IMPLS[impl]["residual_norm"](x, a, pw if post else None, w, 1e-6, out)
    np.testing.assert_allclose(x, xt.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out, (_rms(xt, 1e-6) * torch.from_numpy(w)).numpy(), rtol=1e-5,
                               atol=1e-5)  # fmt: skip
    before = x.copy()
    IMPLS[impl]["residual_norm"](x, None, None, None, 1e-6, out)  # norm only, no weight
    np.testing.assert_array_equal(x, before)
    np.testing.assert_allclose(out, _rms(torch.from_numpy(x), 1e-6).numpy(), rtol=1e-5,
                               atol=1e-5)  # fmt: skip


@pytest.mark.parametrize("impl", list(IMPLS))
@pytest.mark.parametrize("gelu", [False, True])
@pytest.mark.parametrize("stacked", [False, True])
def test_glu_matches_torch(impl, gelu, stacked):
    rng = np.random.default_rng(4)
    g, u = (rng.standard_normal((3, 200)).astype(F32) * 4 for _ in range(2))
    act = torch.nn.functional.gelu(torch.from_numpy(g), approximate="tanh") if gelu else (
        torch.nn.functional.silu(torch.from_numpy(g)))  # fmt: skip
    out = np.empty_like(g)
    if stacked:
        IMPLS[impl]["glu"](np.concatenate([g, u], -1), None, gelu, out)
    else:
        IMPLS[impl]["glu"](g, u, gelu, out)
    np.testing.assert_allclose(out, (act * torch.from_numpy(u)).numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(NATIVE is None, reason="the native kernels check their arguments")
def test_native_kernels_name_bad_arguments():
    q = np.zeros((1, 4 * 16), F32)
    kb, vc = np.zeros((2, 1, 16, 16), F32), np.zeros((2, 16, 16), F32)
    kpos, qpos, out = np.zeros(16, np.int64), np.zeros(1, np.int64), np.zeros((1, 64), F32)
    with pytest.raises(ValueError, match="n_head_kv dividing n_head"):
        llm_ops.attention(q, kb, vc, kpos, qpos, out, (4, 3, 16, 16), 1, 1.0, 0.0, 0)
    with pytest.raises(ValueError, match="n_keys = 17 is outside the cache's 16 cells"):
        llm_ops.attention(q, kb, vc, kpos, qpos, out, (4, 2, 16, 16), 17, 1.0, 0.0, 0)
    with pytest.raises(TypeError, match="both be float32 or both float16"):
        llm_ops.attention(q, kb, vc.astype(np.float16), kpos, qpos, out, (4, 2, 16, 16), 1,
                          1.0, 0.0, 0)  # fmt: skip
    k = np.zeros((1, 2 * 16), F32)
    tab = np.zeros((4, 8), F32)
    with pytest.raises(ValueError, match="token 0 has cell 16 of 16"):
        llm_ops.rope_store(q, k, k, qpos, tab, tab, None, None, kb, vc, np.array([16]),
                           (4, 2, 16, 16), 16, True, 1e-6)  # fmt: skip
    with pytest.raises(ValueError, match="expected 64 elements, found 32"):
        llm_ops.rope_store(q[:, :32], k, k, qpos, tab, tab, None, None, kb, vc, qpos,
                           (4, 2, 16, 16), 16, True, 1e-6)  # fmt: skip
