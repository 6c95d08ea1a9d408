"""The fused row and attention kernels of a language model's forward pass, on numpy arrays.

``workbench.models.llm`` runs its layers here so that one token costs a few calls per layer
(kernels/cpu/core/llm_*.c), not dozens of numpy passes. Each function has a numpy twin, used
without the native extension (``WORKBENCH_NATIVE=0``) and as the reference in tests; both
take the same arguments and write into the arrays they are given. All arrays C-contiguous;
values f32, positions and cells int64.

KV cache layout of one slot (``C`` cells, a multiple of ``KEY_BLOCK``): values ``vc (Hkv, C,
Dv)``; keys ``kb (Hkv, C / 16, D, 16)``, blocks of 16 cells stored dimension-major, so that the
scores of a block are 16-wide multiply-adds for any number of queries.

- ``residual_norm(x, a, post_w, w, eps, out)``: ``x += rms(a)·post_w`` (or ``x += a``) in
  place, then ``out = rms(x)·w``, ``rms(y) = y / sqrt(mean(y²) + eps)`` over the last dim;
  ``a`` / ``post_w`` / ``w`` / ``out`` may be None.
- ``glu(g, u, gelu, out)``: ``out = act(g)·u``, SiLU ``z σ(z)`` or tanh-GELU; ``u`` None: ``g``
  is ``(n, 2F)``, gate then up.
- ``rope_store(q, k, v, pos, cos, sin, q_norm, k_norm, kb, vc, cells, dims, n_rot, neox,
  eps)``: per head of q ``(n, Hq, D)`` and k ``(n, Hkv, D)``, RMS norm (weights given), then
  rope on the first ``n_rot`` dims with the table rows ``pos``; k and v ``(n, Hkv, Dv)`` go to
  cache cells ``cells``. ``dims = (Hq, Hkv, D, Dv)``.
- ``attention(q, kb, vc, kpos, qpos, out, dims, n_keys, scale, softcap, window)``: per query
  head, ``softmax(cap(scale·q kᵀ) + mask) v`` over the first ``n_keys`` cells, query ``i``
  seeing cell ``j`` when ``0 <= kpos[j] <= qpos[i]`` (and ``qpos[i] - kpos[j] < window``).
- ``qmatmul_into(raw, type_id, x, out)``: the native quantized product ``out = x @ W.T``
  without the op layer, or False where it does not apply (the caller uses ``QMatMul``);
  ``embed_into(table, type_id, ids, out)`` likewise decodes the rows ``ids`` of a quantized
  ``(rows, row_bytes)`` table (``QEmbedding`` otherwise).
- ``qmatmul_glu_into(gate, up, type_id, x, gelu, out)``: ``out = act(x @ G.T)·(x @ U.T)`` in
  one product (AMX tiles, from 32 rows: neither product is written), or False where that
  kernel does not run (the caller takes the two products and ``glu``).
"""

from __future__ import annotations

import numpy as np

from .native import NATIVE
from .quantized import NATIVE_TYPES

KEY_BLOCK = 16
F32 = np.float32


def padded_cells(n: int) -> int:
    """Cells allocated for ``n`` (a whole number of key blocks)."""
    return -(-n // KEY_BLOCK) * KEY_BLOCK


def key_rows(kb: np.ndarray) -> np.ndarray:
    """The keys of a blocked cache ``(..., C/16, D, 16)`` as rows ``(..., C, D)`` (a copy)."""
    *lead, nb, d, lanes = kb.shape
    return np.swapaxes(kb, -1, -2).reshape(*lead, nb * lanes, d)


def _inv_rms(x: np.ndarray, eps: float) -> np.ndarray:
    ms = np.einsum("...i,...i->...", x, x, dtype=F32)[..., None] / F32(x.shape[-1])
    return 1.0 / np.sqrt(ms + F32(eps))


def _residual_norm_numpy(x, a, post_w, w, eps, out) -> None:
    if a is not None:
        x += a * _inv_rms(a, eps) * post_w if post_w is not None else a
    if out is not None:
        y = x * _inv_rms(x, eps)
        out[...] = y * w if w is not None else y


def _glu_numpy(g, u, gelu, out) -> None:
    if u is None:
        f = out.shape[-1]
        g, u = g[..., :f], g[..., f:]
    if gelu:  # g/2 · (1 + tanh(√(2/π)(g + 0.044715 g³)))
        inner = F32(0.7978845608028654) * (g + F32(0.044715) * g * g * g)
        out[...] = 0.5 * g * (1.0 + np.tanh(inner)) * u
    else:
        out[...] = g / (1.0 + np.exp(-g)) * u


def _rotate(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, n_rot: int, neox: bool) -> None:
    """x (n, H, D) in place: the first n_rot dims of each head; cos/sin (n, n_rot/2)."""
    r = x[..., :n_rot]
    if neox:
        x1, x2 = r[..., : n_rot // 2], r[..., n_rot // 2 :]
    else:
        x1, x2 = r[..., 0::2], r[..., 1::2]
    c, s = cos[:, None, :], sin[:, None, :]
    r1, r2 = x1 * c - x2 * s, x2 * c + x1 * s
    x1[...], x2[...] = r1, r2


def _rope_store_numpy(q, k, v, pos, cos, sin, q_norm, k_norm, kb, vc, cells, dims, n_rot,
                      neox, eps) -> None:  # fmt: skip
    hq, hkv, d, dv = dims
    n = len(pos)
    q3, k3 = q.reshape(n, hq, d), k.reshape(n, hkv, d)
    for x, w in ((q3, q_norm), (k3, k_norm)):
        if w is not None:
            x[...] = x * _inv_rms(x, eps) * w
        if n_rot:
            _rotate(x, cos[pos], sin[pos], n_rot, neox)
    blocks = np.swapaxes(kb, -1, -2)  # (Hkv, C/16, 16, D), a view
    blocks[:, cells // KEY_BLOCK, cells % KEY_BLOCK, :] = k3.transpose(1, 0, 2)
    vc[:, cells, :] = v.reshape(n, hkv, dv).transpose(1, 0, 2)


def _attention_numpy(q, kb, vc, kpos, qpos, out, dims, n_keys, scale, softcap, window) -> None:
    hq, hkv, d, dv = dims
    n, g = len(qpos), hq // hkv
    keys = key_rows(kb)[:, :n_keys]  # (Hkv, S, D)
    qg = q.reshape(n, hkv, g, d).transpose(1, 2, 0, 3)  # (Hkv, G, n, D)
    s = np.matmul(qg * F32(scale), np.swapaxes(keys, -1, -2)[:, None])  # (Hkv, G, n, S)
    if softcap:
        s = np.tanh(s / F32(softcap)) * F32(softcap)
    kp = kpos[None, :n_keys]
    mask = (kp >= 0) & (kp <= qpos[:, None])
    if window > 0:
        mask &= qpos[:, None] - kp < window
    s = np.where(mask, s, -np.inf)
    mx = s.max(axis=-1, keepdims=True)
    p = np.exp(s - np.where(np.isfinite(mx), mx, 0))
    tot = p.sum(axis=-1, keepdims=True)
    p = p / np.where(tot > 0, tot, 1)
    o = np.matmul(p, vc[:, None, :n_keys])  # (Hkv, G, n, Dv)
    out[...] = o.transpose(2, 0, 1, 3).reshape(out.shape)


def _qmatmul_native(raw: np.ndarray, type_id: int, x: np.ndarray, out: np.ndarray) -> bool:
    NATIVE.qmatmul(raw, type_id, out.shape[-1], x.shape[-1], x, out)
    return True


def _qmatmul_none(raw, type_id, x, out) -> bool:
    return False


def _qmatmul_glu_native(gate, up, type_id: int, x, gelu: bool, out) -> bool:
    return NATIVE.qmatmul_glu(gate, up, type_id, out.shape[-1], x.shape[-1], x, gelu, out)


def _qmatmul_glu_none(gate, up, type_id, x, gelu, out) -> bool:
    return False


def _embed_native(table: np.ndarray, type_id: int, ids: np.ndarray, out: np.ndarray) -> bool:
    NATIVE.dequantize(table[ids], type_id, out.shape[-1], out)
    return True


# Without the extension (WORKBENCH_NATIVE=0, no compiler at install): the numpy twins.
if NATIVE is not None:
    residual_norm = NATIVE.llm_residual_norm
    glu = NATIVE.llm_glu
    rope_store = NATIVE.llm_rope_store
    attention = NATIVE.llm_attention
    qmatmul_into, embed_into = _qmatmul_native, _embed_native
    qmatmul_glu_into = _qmatmul_glu_native
else:
    residual_norm = _residual_norm_numpy
    glu = _glu_numpy
    rope_store = _rope_store_numpy
    attention = _attention_numpy
    qmatmul_into = embed_into = _qmatmul_none
    qmatmul_glu_into = _qmatmul_glu_none


def native_qmatmul_type(type_name: str) -> int | None:
    """The ggml type id ``qmatmul_into`` / ``embed_into`` handle natively, or None."""
    if NATIVE is None or type_name not in NATIVE_TYPES:
        return None
    from .ggml import BY_NAME

    return BY_NAME[type_name].id


NUMPY = {
    "residual_norm": _residual_norm_numpy,
    "glu": _glu_numpy,
    "rope_store": _rope_store_numpy,
    "attention": _attention_numpy,
}
"""The numpy twins by name (the reference the native kernels are tested against)."""
