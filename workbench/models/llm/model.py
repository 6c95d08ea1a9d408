"""The decoder-only transformer of every supported family, over quantized GGUF weights.

One forward pass runs several sequences at once, each in its own :class:`KVCache` slot with
its own positions (the batch step that continuous batching builds on)::

    logits = model.forward([[1, 15, 27], [1, 99]], slots=[0, 3], cache=cache)  # (2, n_vocab)

Tokens of all sequences are packed into one ``(N, n_embd)`` matrix, so every projection is
one quantized matrix product for the whole batch; attention runs per sequence against its
slot's cached keys (masked by position: causal, and ``p_q - p_k < window`` on sliding-window
layers). Per layer (pre-norm; gemma's post norms where the file has them)::

    h = x + post_attn_norm(attn(attn_norm(x)))
    x = h + post_ffw_norm(down(act(gate(ffn_norm(h))) * up(ffn_norm(h))))

with ``attn = softmax(cap(q kᵀ · scale) + mask) v`` (q/k rotated by rope, q/k norms before the
rotation on qwen3/gemma3, ``cap(s) = c·tanh(s/c)`` on gemma2), grouped-query heads sharing a
key/value head, then ``logits = cap(output(output_norm(x)))`` with the output matrix tied to the
token embedding when the file has no ``output.weight``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from ...distributed.shard import ShardedVarBuilder, shard_qtensor
from ...distributed.tensor_parallel import TensorParallel
from ...errors import ShapeError, WorkbenchError
from ...nn.var_builder import VarBuilderError
from ...ops.creation import from_numpy
from ...ops.fused import scaled_dot_product_attention
from ...quantized import QEmbedding, QMatMul, QTensor, QVarBuilder
from .cache import LOCAL, KVCache
from .config import LlmConfig, LlmFileError, config_from_metadata
from .rope import Rope, RopeScaling


def _norm(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    """RMSNorm over the last dim in f32: x / sqrt(mean(x²) + eps) · w."""
    ms = np.einsum("...i,...i->...", x, x, dtype=np.float32)[..., None] / np.float32(x.shape[-1])
    return x * (1.0 / np.sqrt(ms + np.float32(eps))) * w


def _rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, pairs: bool) -> np.ndarray:
    """Rotate each pair (x₁, x₂) of x (H, N, d) by θ: (x₁ cos − x₂ sin, x₂ cos + x₁ sin);
    pairs are (x[2i], x[2i+1]) or, NeoX style, (x[i], x[i + d/2]). cos, sin: (N, d/2)."""
    if pairs:
        x1, x2 = x[..., 0::2], x[..., 1::2]
    else:
        h = x.shape[-1] // 2
        x1, x2 = x[..., :h], x[..., h:]
    r1, r2 = x1 * cos - x2 * sin, x2 * cos + x1 * sin
    if pairs:
        return np.stack([r1, r2], axis=-1).reshape(x.shape)
    return np.concatenate([r1, r2], axis=-1)


def _softcap(x: np.ndarray, cap: float) -> np.ndarray:
    return np.tanh(x / cap) * cap if cap else x


class _Proj:
    """``x @ W.T (+ b)`` with a quantized W; ``reduce`` (tensor parallel, a row-split W) sums
    the ranks' partial products before the bias is added."""

    def __init__(self, weight: QTensor, bias: np.ndarray | None = None, reduce=None):
        self.mm = QMatMul(weight)
        self.bias = bias
        self.reduce = reduce
        self.out_features = weight.shape[0]

    def __call__(self, x: np.ndarray) -> np.ndarray:
        y = self.mm.matmul_numpy(x)
        if self.reduce is not None:
            y = self.reduce(y)
        return y if self.bias is None else y + self.bias


class _Block:
    """The weights of one layer, by GGUF name (``blk.{i}.*``).

    Under tensor parallelism (``tp``) each rank holds its heads' rows of q/k/v (each part of a
    fused qkv on its own), its rows of gate/up, the matching columns of o and down, whose
    products ``tp.reduce`` sums over the ranks; norms are replicated.
    """

    def __init__(self, vb: ShardedVarBuilder, c: LlmConfig, tp: TensorParallel):
        d, hq, hk = c.n_embd, c.n_head * c.head_dim, c.n_head_kv * c.head_dim
        hv = c.n_head_kv * c.value_dim

        def vec(name: str, n: int, parts=None) -> np.ndarray:
            t = vb.get((n,), name) if parts is None else vb.get_sharded((n,), name, 0, parts=parts)
            return np.ascontiguousarray(t.to_dtype("f32").numpy())

        def opt_vec(name: str, n: int, parts=None) -> np.ndarray | None:
            return vec(name, n, parts) if vb.contains(name) else None

        def proj(name: str, rows: int, cols: int, split: int, parts=None) -> _Proj:
            """split 0: this rank's rows (of each of ``parts``), 1: its columns."""
            weight = vb.get_qtensor_sharded((rows, cols), f"{name}.weight", split, parts or ())
            if split == 0:
                return _Proj(weight, opt_vec(f"{name}.bias", rows, parts or (rows,)))
            return _Proj(weight, opt_vec(f"{name}.bias", rows), tp.reduce)

        self.attn_norm = vec("attn_norm.weight", d)
        if vb.contains("attn_qkv.weight"):
            self.qkv = proj("attn_qkv", hq + hk + hv, d, 0, (hq, hk, hv))
            self.q = self.k = self.v = None
        else:
            self.qkv = None
            self.q, self.k, self.v = (
                proj("attn_q", hq, d, 0),
                proj("attn_k", hk, d, 0),
                proj("attn_v", hv, d, 0),
            )
        self.q_norm = opt_vec("attn_q_norm.weight", c.head_dim)
        self.k_norm = opt_vec("attn_k_norm.weight", c.head_dim)
        self.o = proj("attn_output", d, c.n_head * c.value_dim, 1)
        self.post_attn_norm = opt_vec("post_attention_norm.weight", d)
        self.ffn_norm = vec("ffn_norm.weight", d)
        if vb.contains("ffn_gate.weight"):
            self.gate, self.up = proj("ffn_gate", c.n_ff, d, 0), proj("ffn_up", c.n_ff, d, 0)
            self.gate_up = None
        else:  # phi3: gate and up stacked in ffn_up, gate first
            self.gate = self.up = None
            self.gate_up = proj("ffn_up", 2 * c.n_ff, d, 0, (c.n_ff, c.n_ff))
        self.down = proj("ffn_down", d, c.n_ff, 1)
        self.post_ffw_norm = opt_vec("post_ffw_norm.weight", d)


def _rank_config(c: LlmConfig, tp: TensorParallel) -> LlmConfig:
    """The sizes one rank runs: its share of the query and key/value heads and of the MLP."""
    return replace(
        c,
        n_head=tp.split(c.n_head, "attention heads"),
        n_head_kv=tp.split(c.n_head_kv, "key/value heads"),
        n_ff=tp.split(c.n_ff, "feed-forward features"),
    )


class Transformer:
    """Weights and the batched forward pass; built by :meth:`from_gguf` (see module docs).

    ``tp`` (a :class:`~workbench.distributed.TensorParallel` over a communicator) splits the
    model over ranks: ``config`` stays the model's, ``rank_config`` has this rank's heads and
    MLP features (the KV cache holds only those heads). Embeddings are replicated; the output
    matrix is split by vocabulary rows when they divide evenly, the logits all-gathered.
    """

    def __init__(self, vb: QVarBuilder, metadata: dict, tp: TensorParallel | None = None):
        tp = TensorParallel() if tp is None else tp
        self.tp = tp
        embed = _tensor(vb, "token_embd.weight")
        if embed.ndim != 2:
            raise LlmFileError(f"token_embd.weight should be 2-D, found {list(embed.shape)}")
        self.config = c = config_from_metadata(metadata, embed.shape[0])
        if embed.shape[1] != c.n_embd:
            raise LlmFileError(
                f"token_embd.weight has {embed.shape[1]} columns, metadata embedding_length is "
                f"{c.n_embd}"
            )
        self.rank_config = _rank_config(c, tp)
        self.embedding = QEmbedding(embed)
        self.blocks = []
        svb = tp.builder(vb)
        for i in range(c.n_layer):
            try:
                self.blocks.append(_Block(svb.pp(f"blk.{i}"), c, tp))
            except (VarBuilderError, ShapeError) as e:
                raise LlmFileError(f"layer {i} of {c.n_layer} ({c.arch}): {e}") from e
        self.output_norm = np.ascontiguousarray(vb.get((c.n_embd,), "output_norm.weight").numpy())
        head = _tensor(vb, "output.weight") if vb.contains("output.weight") else embed
        if head.shape != (c.n_vocab, c.n_embd):
            raise LlmFileError(
                f"output.weight has shape {list(head.shape)}, expected {[c.n_vocab, c.n_embd]}"
            )
        self.tied = head is embed
        self._gather_logits = None  # replicated output
        if c.n_vocab % tp.world_size == 0:
            head = shard_qtensor(head, tp.shard(0), "output.weight")
            self._gather_logits = tp.gather
        self.output = QMatMul(head)
        self._rope = _ropes(vb, c)  # per cache kind (GLOBAL, LOCAL)

    @classmethod
    def from_gguf(cls, path) -> Transformer:
        vb = QVarBuilder.from_gguf(path)
        return cls(vb, vb.metadata)

    # -- the batch step ----------------------------------------------------------------------
    def new_cache(self, n_slots: int = 1, max_len: int | None = None, chunk: int = 256) -> KVCache:
        """A cache of ``n_slots`` sequences (``max_len`` defaults to min(context, 4096))."""
        max_len = max_len or min(self.config.context_length, 4096)
        return KVCache(self.rank_config, n_slots, max_len, chunk)

    def forward(
        self,
        tokens_per_seq: Sequence[Sequence[int]],
        slots: Sequence[int],
        cache: KVCache,
        all_logits: bool = False,
    ) -> np.ndarray | list[np.ndarray]:
        """Append ``tokens_per_seq[i]`` to slot ``slots[i]`` of ``cache`` and run them.

        Returns the logits of each sequence's last new token, ``(n_seq, n_vocab)`` f32, or
        with ``all_logits`` a list of ``(len(tokens_per_seq[i]), n_vocab)``. Sequences longer
        than ``cache.chunk`` run in successive chunks (the sliding-window rings rely on it).
        """
        seqs = [np.asarray(t, dtype=np.int64).reshape(-1) for t in tokens_per_seq]
        slots = [int(s) for s in slots]
        if len(seqs) != len(slots) or len(set(slots)) != len(slots):
            raise WorkbenchError(
                f"forward: expected one distinct slot per sequence, found {len(seqs)} "
                f"sequences and slots {slots}"
            )
        for s, ids in zip(slots, seqs, strict=True):
            if ids.size == 0:
                raise WorkbenchError(f"forward: the sequence for slot {s} has no tokens")
            if ids.min() < 0 or ids.max() >= self.config.n_vocab:
                raise WorkbenchError(
                    f"forward: token id {int(ids.max() if ids.max() >= 0 else ids.min())} is "
                    f"out of range for a vocabulary of {self.config.n_vocab}"
                )
        parts: list[list[np.ndarray]] = [[] for _ in seqs]
        done = [0] * len(seqs)
        while True:
            active = [i for i, ids in enumerate(seqs) if done[i] < len(ids)]
            if not active:
                break
            pieces = [seqs[i][done[i] : done[i] + cache.chunk] for i in active]
            last = [done[i] + len(p) >= len(seqs[i]) for i, p in zip(active, pieces, strict=True)]
            want = [all_logits or is_last for is_last in last]
            out = self._step(pieces, [slots[i] for i in active], cache, want, all_logits)
            for i, p, logits in zip(active, pieces, out, strict=True):
                done[i] += len(p)
                if logits is not None:
                    parts[i].append(logits)
        if all_logits:
            return [np.concatenate(p) for p in parts]
        return np.stack([p[-1][-1] for p in parts])

    def _step(self, pieces, slots, cache: KVCache, want, all_rows: bool):
        c = self.rank_config
        ids = np.concatenate(pieces)
        bounds = np.cumsum([0] + [len(p) for p in pieces])
        positions = [cache.begin(s, p.tolist()) for s, p in zip(slots, pieces, strict=True)]
        pos = np.concatenate(positions)
        tables = [rope.tables(pos, cache.max_len) for rope in self._rope]
        x = self.embedding(ids).numpy()
        if c.embed_scale != 1.0:
            x = x * np.float32(c.embed_scale)
        for layer, blk in enumerate(self.blocks):
            h = _norm(x, blk.attn_norm, c.rms_eps)
            a = self._attention(
                layer, blk, h, tables[cache.kinds[layer]], slots, positions, bounds, cache
            )
            if blk.post_attn_norm is not None:
                a = _norm(a, blk.post_attn_norm, c.rms_eps)
            x = x + a
            h = _norm(x, blk.ffn_norm, c.rms_eps)
            m = self._mlp(blk, h)
            if blk.post_ffw_norm is not None:
                m = _norm(m, blk.post_ffw_norm, c.rms_eps)
            x = x + m
        out = []
        for i, w in enumerate(want):
            if not w:
                out.append(None)
                continue
            rows = (
                x[bounds[i] : bounds[i + 1]] if all_rows else x[bounds[i + 1] - 1 : bounds[i + 1]]
            )
            logits = self.output.matmul_numpy(_norm(rows, self.output_norm, c.rms_eps))
            if self._gather_logits is not None:
                logits = self._gather_logits(logits)
            out.append(_softcap(logits, c.final_softcap))
        return out

    def _mlp(self, blk: _Block, h: np.ndarray) -> np.ndarray:
        if blk.gate_up is not None:
            gu = blk.gate_up(h)
            g, u = gu[:, : self.rank_config.n_ff], gu[:, self.rank_config.n_ff :]
        else:
            g, u = blk.gate(h), blk.up(h)
        if self.config.activation == "silu":  # g·σ(g)
            act = g / (1.0 + np.exp(-g))
        else:  # GELU, tanh form: g/2 · (1 + tanh(√(2/π)(g + 0.044715 g³)))
            act = (
                0.5
                * g
                * (
                    1.0
                    + np.tanh(
                        np.float32(0.7978845608028654) * (g + np.float32(0.044715) * g * g * g)
                    )
                )
            )
        return blk.down(act * u)

    def _rotate(self, x: np.ndarray, table) -> np.ndarray:
        """Rope on x (heads, N, head_dim): the first n_rot dims of each head."""
        c = self.rank_config
        cos, sin = table
        if c.n_rot == c.head_dim:
            return _rope(x, cos, sin, c.rope_pairs)
        rot = _rope(x[..., : c.n_rot], cos, sin, c.rope_pairs)
        return np.concatenate([rot, x[..., c.n_rot :]], axis=-1)

    def _attention(self, layer, blk: _Block, h, table, slots, positions, bounds, cache):
        c = self.rank_config
        n = h.shape[0]
        hq, hk = c.n_head * c.head_dim, c.n_head_kv * c.head_dim
        if blk.qkv is not None:
            qkv = blk.qkv(h)
            q, k, v = qkv[:, :hq], qkv[:, hq : hq + hk], qkv[:, hq + hk :]
        else:
            q, k, v = blk.q(h), blk.k(h), blk.v(h)
        q = np.ascontiguousarray(q).reshape(n, c.n_head, c.head_dim)
        k = np.ascontiguousarray(k).reshape(n, c.n_head_kv, c.head_dim)
        v = v.reshape(n, c.n_head_kv, c.value_dim)
        if blk.q_norm is not None:
            q = _norm(q, blk.q_norm, c.rms_eps)
        if blk.k_norm is not None:
            k = _norm(k, blk.k_norm, c.rms_eps)
        q = self._rotate(np.ascontiguousarray(q.transpose(1, 0, 2)), table)  # (H, N, D)
        k = self._rotate(np.ascontiguousarray(k.transpose(1, 0, 2)), table)
        v = v.transpose(1, 0, 2)
        local = cache.kinds[layer] == LOCAL
        out = np.empty((n, c.n_head, c.value_dim), np.float32)
        for i, (slot, qpos) in enumerate(zip(slots, positions, strict=True)):
            a, b = bounds[i], bounds[i + 1]
            keys, values, kpos = cache.write(layer, slot, qpos, k[:, a:b], v[:, a:b])
            mask = (kpos[None, :] >= 0) & (kpos[None, :] <= qpos[:, None])
            if local:
                mask &= qpos[:, None] - kpos[None, :] < c.sliding_window
            qi = np.ascontiguousarray(q[:, a:b]).reshape(c.n_head_kv, c.n_group, b - a, c.head_dim)
            o = self._attend(qi, keys[:, None], values[:, None], mask)
            out[a:b] = o.reshape(c.n_head, b - a, c.value_dim).transpose(1, 0, 2)
        return blk.o(out.reshape(n, c.n_head * c.value_dim))

    def _attend(self, q, k, v, mask):
        """q (Hkv, G, L, D), k/v (Hkv, 1, S, D), mask (L, S) bool -> (Hkv, G, L, Dv)."""
        c = self.rank_config
        if not c.attn_softcap:
            return scaled_dot_product_attention(
                from_numpy(q),
                from_numpy(k),
                from_numpy(v),
                attn_mask=from_numpy(mask),
                scale=c.attn_scale,
            ).numpy()
        # Soft-capping sits between the product and the softmax, which the fused op cannot do.
        s = _softcap(
            np.matmul(q, np.swapaxes(k, -1, -2)) * np.float32(c.attn_scale), c.attn_softcap
        )
        s = np.where(mask, s, -np.inf)
        s = np.exp(s - s.max(axis=-1, keepdims=True))
        return np.matmul(s / s.sum(axis=-1, keepdims=True), v)


def _ropes(vb: QVarBuilder, c: LlmConfig) -> tuple[Rope, Rope]:
    """The rope of global and of local layers, with the file's frequency-factor tensors
    (``rope_freqs``: Llama 3; ``rope_factors_long`` / ``_short``: LongRoPE)."""
    factors = {}
    for name in ("rope_freqs", "rope_factors_long", "rope_factors_short"):
        if vb.contains(f"{name}.weight"):
            factors[name] = vb.get((c.n_rot // 2,), f"{name}.weight").to_dtype("f32").numpy()
    tensors = dict(
        freq_factors=factors.get("rope_freqs"),
        long_factors=factors.get("rope_factors_long"),
        short_factors=factors.get("rope_factors_short"),
    )
    local_scaling = RopeScaling() if c.arch == "gemma3" else c.rope_scaling  # as llama.cpp
    try:
        return (
            Rope(c.n_rot, c.rope_base, c.rope_scaling, **tensors),
            Rope(c.n_rot, c.rope_base_local, local_scaling, **tensors),
        )
    except ValueError as e:
        raise LlmFileError(f"{c.arch} rope: {e}") from e


def _tensor(vb: QVarBuilder, name: str) -> QTensor:
    try:
        return vb.get_qtensor_unchecked(name)
    except VarBuilderError as e:
        raise LlmFileError(f"the GGUF file has no tensor {name!r}: {e}") from e
