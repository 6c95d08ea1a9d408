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

This is the CPU model (numpy and the fused kernels of ``llm_ops``); on a GPU,
``device_model.DeviceTransformer`` runs the same maths over device tensors, driven by the
same :class:`BatchForward`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Literal, overload

import numpy as np

from ...backends.cpu import llm_ops
from ...device import CPU
from ...distributed.shard import ShardedVarBuilder, shard_qtensor
from ...distributed.tensor_parallel import TensorParallel
from ...dtype import from_numpy_dtype
from ...errors import ShapeError, WorkbenchError
from ...nn.var_builder import VarBuilderError
from ...profiler import current_profile
from ...quantized import QEmbedding, QMatMul, QTensor, QVarBuilder
from .cache import GLOBAL, LOCAL, KVCache, SlotCache
from .config import LlmConfig, LlmFileError, config_from_metadata
from .rope import Rope, RopeScaling


def _softcap(x: np.ndarray, cap: float) -> np.ndarray:
    return np.tanh(x / cap) * cap if cap else x


class _ArrayArg:
    """A numpy argument as the profiler reads a tensor argument: ``_layout.shape``,
    ``dtype.name`` and ``device``."""

    __slots__ = ("_layout", "device", "dtype")

    def __init__(self, array: np.ndarray):
        self._layout = array  # the profiler reads only ``.shape``
        self.dtype = from_numpy_dtype(array.dtype)
        self.device = CPU


class _ProfiledKernels:
    """``llm_ops`` with every kernel call recorded by ``profile`` as the op ``llm.<name>``
    with its array arguments' shapes and dtypes, so that ``wb.profile()`` and the notebook's
    per-op timings still see the per-token path."""

    def __init__(self, profile):
        self._profile = profile

    def __getattr__(self, name: str):
        kernel = getattr(llm_ops, name)

        def run(*args):
            arrays = tuple([_ArrayArg(a) for a in args if isinstance(a, np.ndarray)])
            return self._profile.run(f"llm.{name}", lambda *_: kernel(*args), arrays, {})

        return run


def _kernels():
    """The kernels of the forward pass: ``llm_ops`` itself, or recorded when profiling."""
    profile = current_profile()
    return llm_ops if profile is None else _ProfiledKernels(profile)


class _Proj:
    """``x @ W.T (+ b)`` with a quantized W; ``reduce`` (tensor parallel, a row-split W) sums
    the ranks' partial products before the bias is added. Block types the native kernels
    multiply run straight into ``out`` (no op-layer dispatch: this is the per-token path);
    the others through :class:`QMatMul`."""

    def __init__(self, weight: QTensor, bias: np.ndarray | None = None, reduce=None):
        self.mm = QMatMul(weight)
        self.bias = bias
        self.reduce = reduce
        self.out_features = weight.shape[0]
        self.type_id = llm_ops.native_qmatmul_type(weight.ggml_dtype.name)
        self.raw = weight.data.reshape(-1) if self.type_id is not None else None

    def __call__(self, x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """x (n, K) f32 C-contiguous -> (n, N), into ``out`` when given (and no reduce)."""
        kernels = _kernels()
        if self.type_id is not None:
            if out is None:
                out = np.empty((x.shape[0], self.out_features), np.float32)
            kernels.qmatmul_into(self.raw, self.type_id, x, out)
            y = out
        else:
            y = np.require(self.mm.matmul_numpy(x), np.float32, ["C", "W"])
        if self.reduce is not None:
            y = self.reduce(y)
        if self.bias is not None:
            y += self.bias
        return y

    def fuses_with(self, up: _Proj) -> bool:
        """Whether this (a gate) and ``up`` can run as one gated product
        (``llm_ops.qmatmul_glu_into``): native weights of one type and shape, no bias or
        reduce."""
        return (
            self.type_id is not None
            and self.type_id == up.type_id
            and self.weight.shape == up.weight.shape
            and self.bias is None
            and up.bias is None
            and self.reduce is None
            and up.reduce is None
        )

    @property
    def weight(self) -> QTensor:
        return self.mm.weight


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
            self.glu_fuses = self.gate.fuses_with(self.up)
        else:  # phi3: gate and up stacked in ffn_up, gate first
            self.gate = self.up = None
            self.gate_up = proj("ffn_up", 2 * c.n_ff, d, 0, (c.n_ff, c.n_ff))
            self.glu_fuses = False
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


class BatchForward:
    """The batch step's driver, shared by the CPU :class:`Transformer` and the GPU model
    (``device_model.DeviceTransformer``): validation and chunking around ``_step``, which
    runs one chunk of each sequence and returns the wanted logits rows as numpy arrays."""

    config: LlmConfig

    @overload
    def forward(
        self,
        tokens_per_seq: Sequence[Sequence[int]],
        slots: Sequence[int],
        cache: SlotCache,
        all_logits: Literal[False] = False,
    ) -> np.ndarray: ...
    @overload
    def forward(
        self,
        tokens_per_seq: Sequence[Sequence[int]],
        slots: Sequence[int],
        cache: SlotCache,
        all_logits: Literal[True],
    ) -> list[np.ndarray]: ...
    @overload
    def forward(
        self,
        tokens_per_seq: Sequence[Sequence[int]],
        slots: Sequence[int],
        cache: SlotCache,
        all_logits: bool = False,
    ) -> np.ndarray | list[np.ndarray]: ...
    def forward(
        self,
        tokens_per_seq: Sequence[Sequence[int]],
        slots: Sequence[int],
        cache: SlotCache,
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

    def _step(self, pieces, slots, cache, want, all_rows: bool) -> list[np.ndarray | None]:
        raise NotImplementedError


class Transformer(BatchForward):
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
        self.rank_config = rc = _rank_config(c, tp)
        self._dims = (rc.n_head, rc.n_head_kv, rc.head_dim, rc.value_dim)  # the kernels' dims
        self.embedding = QEmbedding(embed)
        self._embed_type = llm_ops.native_qmatmul_type(embed.ggml_dtype.name)
        self.blocks = []
        svb = tp.builder(vb)
        for i in range(c.n_layer):
            try:
                self.blocks.append(_Block(svb.pp(f"blk.{i}"), c, tp))
            except (VarBuilderError, ShapeError) as e:
                raise LlmFileError(f"layer {i} of {c.n_layer} ({c.arch}): {e}") from e
        self.output_norm = np.ascontiguousarray(
            vb.get((c.n_embd,), "output_norm.weight").to_dtype("f32").numpy()
        )
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
        self.output = _Proj(head)
        b0 = self.blocks[0] if self.blocks else None
        weights = [] if b0 is None else [p.weight for p in (b0.q, b0.qkv, b0.down) if p]
        quantized = any(w.ggml_dtype.name not in ("F32", "F16", "BF16") for w in weights)
        self.kv_dtype = "f16" if quantized else "f32"  # new_cache's default
        self._rope = _ropes(vb, c)  # per cache kind (GLOBAL, LOCAL)
        self._table_memo: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}

    @classmethod
    def from_gguf(cls, path) -> Transformer:
        vb = QVarBuilder.from_gguf(path)
        return cls(vb, vb.metadata)

    # -- the batch step ----------------------------------------------------------------------
    def new_cache(
        self,
        n_slots: int = 1,
        max_len: int | None = None,
        chunk: int = 256,
        kv_dtype: str | None = None,
    ) -> KVCache:
        """A cache of ``n_slots`` sequences (``max_len`` defaults to min(context, 4096)).

        ``kv_dtype``: "f32" or "f16"; by default f16 when the file's projections are
        quantized (as llama.cpp: the cache then costs half the memory and the bytes each token
        reads, an error far below the 8-bit activations'), f32 for float files."""
        max_len = max_len or min(self.config.context_length, 4096)
        return KVCache(self.rank_config, n_slots, max_len, chunk, kv_dtype or self.kv_dtype)

    def _step(self, pieces, slots, cache: KVCache, want, all_rows: bool):
        c, kernels = self.rank_config, _kernels()
        ids = np.concatenate(pieces) if len(pieces) > 1 else pieces[0]
        bounds = np.cumsum([0] + [len(p) for p in pieces])
        positions = [cache.begin(s, p.tolist()) for s, p in zip(slots, pieces, strict=True)]
        tables = [self._tables(kind, cache.max_len) for kind in (GLOBAL, LOCAL)]
        # per kind of layer and sequence: the cells its tokens go to, the cells to scan
        cells = [[p % n for p in positions] for n in cache.cells]
        scans = [[int(p[-1]) + 1 for p in positions], [cache.cells[LOCAL]] * len(positions)]
        x = self._embed(ids)
        if c.embed_scale != 1.0:
            x *= np.float32(c.embed_scale)
        ws = _Workspace(len(ids), c)
        h, eps = ws.h, c.rms_eps
        for layer, blk in enumerate(self.blocks):
            if layer == 0:
                kernels.residual_norm(x, None, None, blk.attn_norm, eps, h)
            kind = cache.kinds[layer]
            a = self._attention(layer, blk, h, ws, tables[kind], slots, positions, cells[kind],
                                scans[kind], bounds, cache)  # fmt: skip
            kernels.residual_norm(x, a, blk.post_attn_norm, blk.ffn_norm, eps, h)
            m = self._mlp(blk, h, ws)
            nxt = self.blocks[layer + 1].attn_norm if layer + 1 < len(self.blocks) else None
            kernels.residual_norm(x, m, blk.post_ffw_norm, nxt, eps, h if nxt is not None else None)
        out = []
        for i, w in enumerate(want):
            if not w:
                out.append(None)
                continue
            first = bounds[i] if all_rows else bounds[i + 1] - 1
            rows = x[first : bounds[i + 1]]
            normed = np.empty_like(rows)
            kernels.residual_norm(rows, None, None, self.output_norm, eps, normed)
            logits = self.output(normed)
            if self._gather_logits is not None:
                logits = self._gather_logits(logits)
            out.append(_softcap(logits, c.final_softcap))
        return out

    def _embed(self, ids: np.ndarray) -> np.ndarray:
        """(n, n_embd) f32 rows of the token embedding, a new array (updated in place)."""
        kernels = _kernels()
        if self._embed_type is not None:
            x = np.empty((len(ids), self.config.n_embd), np.float32)
            kernels.embed_into(self.embedding.weight.data, self._embed_type, ids, x)
            return x
        return np.array(self.embedding(ids).numpy(), dtype=np.float32)

    def _tables(self, kind: int, context: int) -> tuple[np.ndarray, np.ndarray]:
        """The rope cos/sin of every position of a ``context``-long cache, (context, n_rot/2)
        each (made once per cache length)."""
        key = (kind, context)
        table = self._table_memo.get(key)
        if table is None:
            table = self._rope[kind].tables(np.arange(context), context)
            self._table_memo[key] = table
        return table

    def _mlp(self, blk: _Block, h: np.ndarray, ws: _Workspace) -> np.ndarray:
        kernels = _kernels()
        gelu = self.config.activation != "silu"  # else GELU, tanh form
        if blk.gate_up is not None:
            kernels.glu(blk.gate_up(h), None, gelu, ws.act)
        elif not blk.glu_fuses or not kernels.qmatmul_glu_into(
            blk.gate.raw, blk.up.raw, blk.gate.type_id, h, gelu, ws.act
        ):
            kernels.glu(blk.gate(h, ws.g), blk.up(h, ws.u), gelu, ws.act)
        return blk.down(ws.act, ws.m)

    def _attention(self, layer, blk: _Block, h, ws: _Workspace, table, slots, positions, cells,
                   scans, bounds, cache: KVCache):  # fmt: skip
        """q/k/v of the new tokens; each sequence's keys and values stored in its cache slot,
        its queries attending to the slot (kernels in ``llm_ops``, reading the cache in place)."""
        c, kernels = self.rank_config, _kernels()
        if blk.qkv is not None:
            hq, hk = c.n_head * c.head_dim, c.n_head_kv * c.head_dim
            qkv = blk.qkv(h)
            q = np.ascontiguousarray(qkv[:, :hq])
            k = np.ascontiguousarray(qkv[:, hq : hq + hk])
            v = np.ascontiguousarray(qkv[:, hq + hk :])
        else:
            q, k, v = blk.q(h, ws.q), blk.k(h, ws.k), blk.v(h, ws.v)
        cos, sin = table
        local = cache.kinds[layer] == LOCAL
        window = c.sliding_window if local else 0
        dims = self._dims
        out = ws.att
        for i, slot in enumerate(slots):
            a, b, qpos = bounds[i], bounds[i + 1], positions[i]
            kb, vc, kpos = cache.slot_arrays(layer, slot)
            qi = q[a:b]
            kernels.rope_store(qi, k[a:b], v[a:b], qpos, cos, sin, blk.q_norm, blk.k_norm, kb, vc,
                               cells[i], dims, c.n_rot, not c.rope_pairs, c.rms_eps)  # fmt: skip
            kernels.attention(qi, kb, vc, kpos, qpos, out[a:b], dims, scans[i], c.attn_scale,
                              c.attn_softcap, window)  # fmt: skip
        return blk.o(out, ws.o)


class _Workspace:
    """The activations of one step of ``n`` tokens, allocated once and reused by every layer."""

    def __init__(self, n: int, c: LlmConfig):
        def buf(width: int) -> np.ndarray:
            return np.empty((n, width), np.float32)

        self.h, self.o, self.m = buf(c.n_embd), buf(c.n_embd), buf(c.n_embd)
        self.q, self.k = buf(c.n_head * c.head_dim), buf(c.n_head_kv * c.head_dim)
        self.v = buf(c.n_head_kv * c.value_dim)
        self.att = buf(c.n_head * c.value_dim)
        self.g, self.u, self.act = buf(c.n_ff), buf(c.n_ff), buf(c.n_ff)


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
