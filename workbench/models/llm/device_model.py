"""The transformer of :mod:`.model` on a GPU (CUDA or Metal): weights, KV cache and the
forward pass live on the device, as workbench Tensors.

``DeviceTransformer(cpu_model, device)`` moves a loaded :class:`~.model.Transformer` there:
every projection keeps its GGUF blocks (``QMatMul`` uploads them once), so a decoding step
multiplies with the device's quantized matvec for every block type and never expands a
weight; norm vectors, biases and the keys/values (:class:`DeviceKVCache`) are device
tensors. The maths is the CPU model's (see its module docs), op by op: ``rms_norm``,
``rope``, ``scaled_dot_product_attention`` (or softmax of capped scores), ``silu`` / ``gelu``
dispatch to the device storage. What crosses to the device per step is small: the token
embeddings (the table stays on the host, as llama.cpp keeps it, rows decoded by the CPU
kernels), the rope rows of the new positions and the attention masks; the logits come back
(``forward`` returns numpy, so sampling and :class:`~.llm.LLM` run unchanged).

Sequences of a batch share every projection; attention runs per sequence against its slot's
cells, masked by the positions the cells hold (causal, and ``p_q - p_k < window`` on
sliding-window layers), exactly the cells the CPU kernels scan.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ...device import Device
from ...errors import WorkbenchError
from ...ops import elementwise as ew
from ...ops.creation import from_numpy, zeros
from ...ops.fused import rms_norm, rope, scaled_dot_product_attention, softmax
from ...ops.shape import cat
from ...tensor import Tensor
from .cache import GLOBAL, LOCAL, SlotCache
from .config import LlmConfig
from .model import BatchForward, Transformer, _Block, _Proj


class DeviceKVCache(SlotCache):
    """Keys ``k[layer]: (n_slots, head_kv, cells, head_dim)`` and values
    ``v[layer]: (n_slots, head_kv, cells, value_dim)`` as tensors on ``device`` (f32 or f16,
    ``dtype``); positions and ids on the host (:class:`~.cache.SlotCache`)."""

    def __init__(
        self,
        config: LlmConfig,
        device: Device,
        n_slots: int = 1,
        max_len: int = 4096,
        chunk: int = 256,
        dtype: str = "f32",
    ):
        super().__init__(config, n_slots, max_len, chunk, dtype, pad=lambda n: n)
        self.device = device
        c = config

        def alloc(width: int, kind: int) -> Tensor:
            shape = (n_slots, c.n_head_kv, self.cells[kind], width)
            return zeros(shape, dtype=dtype, device=device)

        self.k = [alloc(c.head_dim, kind) for kind in self.kinds]
        self.v = [alloc(c.value_dim, kind) for kind in self.kinds]

    @property
    def nbytes(self) -> int:
        return sum(t.nbytes for t in (*self.k, *self.v))

    def store(self, layer: int, slot: int, positions: np.ndarray, k: Tensor, v: Tensor) -> None:
        """Write k (head_kv, n, head_dim) and v of ``positions`` into their cells (a ring's
        cells wrap at most once: a chunk is never longer than the ring)."""
        cells = self.cells[self.kinds[layer]]
        n, first = len(positions), int(positions[0]) % cells
        head = min(n, cells - first)
        runs = [(0, first, head)] + ([(head, 0, n - head)] if head < n else [])
        for start, cell, count in runs:
            self.k[layer][slot].narrow(1, cell, count).copy_(k.narrow(1, start, count))
            self.v[layer][slot].narrow(1, cell, count).copy_(v.narrow(1, start, count))

    def keys(self, layer: int, slot: int) -> np.ndarray:
        """The keys of a slot as rows (head_kv, cells, head_dim) (a host copy)."""
        return self.k[layer][slot].numpy()


class _DeviceProj:
    """A :class:`~.model._Proj` on the device: the same ``QMatMul`` (its blocks uploaded
    once), the bias as a device tensor."""

    def __init__(self, proj: _Proj, device: Device):
        self.mm = proj.mm
        self.mm._raw_on(device)  # upload now, not during the first step
        self.bias = None if proj.bias is None else _put(proj.bias, device)

    def __call__(self, x: Tensor) -> Tensor:
        y = self.mm(x)
        return y if self.bias is None else y + self.bias


class _DeviceBlock:
    """The weights of one :class:`~.model._Block`, on the device (same names)."""

    def __init__(self, blk: _Block, device: Device):
        for name, value in vars(blk).items():
            if isinstance(value, _Proj):
                value = _DeviceProj(value, device)
            elif isinstance(value, np.ndarray):
                value = _put(value, device)
            setattr(self, name, value)


def _put(values: np.ndarray, device: Device) -> Tensor:
    return from_numpy(np.ascontiguousarray(values, np.float32), device)


def _softcap(x: Tensor, cap: float) -> Tensor:
    return ew.tanh(x / cap) * cap if cap else x


class DeviceTransformer(BatchForward):
    """The weights of ``model`` on ``device`` and the batched forward pass there; the same
    ``forward`` / ``new_cache`` interface as :class:`~.model.Transformer`."""

    def __init__(self, model: Transformer, device: Device):
        if model.tp.world_size > 1:
            raise WorkbenchError(
                f"DeviceTransformer: tensor parallelism runs on the CPU only; load the model "
                f"on {device} without tensor_parallel"
            )
        self.device = device
        self.host = model  # the embedding table and the rope tables
        self.tp = model.tp
        self.config = model.config
        self.rank_config = model.rank_config
        self.kv_dtype = model.kv_dtype
        self.blocks = [_DeviceBlock(b, device) for b in model.blocks]
        self.output_norm = _put(model.output_norm, device)
        self.output = _DeviceProj(model.output, device)

    def new_cache(
        self,
        n_slots: int = 1,
        max_len: int | None = None,
        chunk: int = 256,
        kv_dtype: str | None = None,
    ) -> DeviceKVCache:
        """A cache on the device (see :meth:`.model.Transformer.new_cache`)."""
        max_len = max_len or min(self.config.context_length, 4096)
        dtype = kv_dtype or self.kv_dtype
        return DeviceKVCache(self.rank_config, self.device, n_slots, max_len, chunk, dtype)

    def _step(self, pieces, slots, cache: DeviceKVCache, want, all_rows: bool):
        c = self.config
        ids = np.concatenate(pieces) if len(pieces) > 1 else pieces[0]
        bounds = np.cumsum([0] + [len(p) for p in pieces]).tolist()
        positions = [cache.begin(s, p.tolist()) for s, p in zip(slots, pieces, strict=True)]
        seqs = list(zip(slots, positions, bounds[:-1], strict=True))
        views = {kind: [self._view(kind, cache, *seq) for seq in seqs] for kind in set(cache.kinds)}
        x = self.host._embed(ids)
        if c.embed_scale != 1.0:
            x *= np.float32(c.embed_scale)
        x = from_numpy(x, self.device)
        for layer, blk in enumerate(self.blocks):
            h = rms_norm(x, blk.attn_norm, c.rms_eps)
            a = self._attention(layer, blk, h, views[cache.kinds[layer]], cache)
            x = x + _norm(a, blk.post_attn_norm, c.rms_eps)
            m = self._mlp(blk, rms_norm(x, blk.ffn_norm, c.rms_eps))
            x = x + _norm(m, blk.post_ffw_norm, c.rms_eps)
        out = []
        for i, wanted in enumerate(want):
            if not wanted:
                out.append(None)
                continue
            first = bounds[i] if all_rows else bounds[i + 1] - 1
            rows = x.narrow(0, first, bounds[i + 1] - first)
            logits = self.output(rms_norm(rows, self.output_norm, c.rms_eps))
            out.append(_softcap(logits, c.final_softcap).numpy())
        return out

    def _view(self, kind: int, cache: DeviceKVCache, slot: int, positions: np.ndarray,
              row: int) -> _View:  # fmt: skip
        """What the layers of ``kind`` need of one sequence in this step, made once: the
        rope rows of its positions and the mask of the cells its queries see."""
        cos, sin = self.host._tables(kind, cache.max_len)
        scan = int(positions[-1]) + 1 if kind == GLOBAL else cache.cells[LOCAL]
        held = cache.positions[kind][slot, :scan][None, :]
        keep = (held >= 0) & (held <= positions[:, None])
        if kind == LOCAL:
            keep &= positions[:, None] - held < self.config.sliding_window
        put = self.device
        return _View(slot, positions, row, _put(cos[positions], put), _put(sin[positions], put),
                     from_numpy(keep, put), scan)  # fmt: skip

    def _mlp(self, blk: _DeviceBlock, h: Tensor) -> Tensor:
        c = self.config
        if blk.gate_up is not None:
            gate_up = blk.gate_up(h)
            gate, up = gate_up.narrow(-1, 0, c.n_ff), gate_up.narrow(-1, c.n_ff, c.n_ff)
        else:
            gate, up = blk.gate(h), blk.up(h)
        act = ew.silu(gate) if c.activation == "silu" else ew.gelu(gate, approximate="tanh")
        return blk.down(act * up)

    def _attention(self, layer: int, blk: _DeviceBlock, h: Tensor, views: list[_View],
                   cache: DeviceKVCache) -> Tensor:  # fmt: skip
        c = self.config
        hq, hk, hv = c.n_head * c.head_dim, c.n_head_kv * c.head_dim, c.n_head_kv * c.value_dim
        if blk.qkv is not None:
            qkv = blk.qkv(h)
            q, k, v = qkv.narrow(-1, 0, hq), qkv.narrow(-1, hq, hk), qkv.narrow(-1, hq + hk, hv)
        else:
            q, k, v = blk.q(h), blk.k(h), blk.v(h)
        outs = []
        for view in views:
            n = len(view.positions)
            qi = self._heads(q.narrow(0, view.row, n), c.n_head, c.head_dim, blk.q_norm, view)
            ki = self._heads(k.narrow(0, view.row, n), c.n_head_kv, c.head_dim, blk.k_norm, view)
            vi = v.narrow(0, view.row, n).reshape(n, c.n_head_kv, c.value_dim).permute(1, 0, 2)
            cache.store(layer, view.slot, view.positions, ki, vi)
            outs.append(self._attend(layer, qi, view, cache))
        return blk.o(outs[0] if len(outs) == 1 else cat(outs, 0))

    def _heads(self, x: Tensor, heads: int, dim: int, norm, view: _View) -> Tensor:
        """(n, heads·dim) -> (heads, n, dim): per-head norm (qwen3, gemma3), then rope."""
        c = self.config
        x = x.reshape(x.shape[0], heads, dim)
        if norm is not None:
            x = rms_norm(x, norm, c.rms_eps)
        x = x.permute(1, 0, 2).contiguous()
        cos, sin, pairs = view.cos, view.sin, c.rope_pairs
        if c.n_rot == dim:
            return rope(x, cos, sin, interleaved=pairs)
        rotated = rope(x.narrow(-1, 0, c.n_rot).contiguous(), cos, sin, interleaved=pairs)
        return cat([rotated, x.narrow(-1, c.n_rot, dim - c.n_rot)], -1)

    def _attend(self, layer: int, q: Tensor, view: _View, cache: DeviceKVCache) -> Tensor:
        """q (head, n, head_dim) against the slot's first ``view.scan`` cells (masked by
        ``view.mask``) -> (n, head·value_dim)."""
        c = self.config
        k = cache.k[layer][view.slot].narrow(1, 0, view.scan).unsqueeze(1)  # (head_kv, 1, S, D)
        v = cache.v[layer][view.slot].narrow(1, 0, view.scan).unsqueeze(1)
        if k.dtype != q.dtype:
            k, v = k.to_dtype(q.dtype), v.to_dtype(q.dtype)
        n = q.shape[1]
        q = q.reshape(c.n_head_kv, c.n_group, n, c.head_dim)  # query heads share a kv head
        if c.attn_softcap:
            scores = _softcap((q @ k.transpose(-1, -2)) * c.attn_scale, c.attn_softcap)
            out = softmax(ew.where(view.mask, scores, -math.inf), -1) @ v
        else:
            out = scaled_dot_product_attention(q, k, v, attn_mask=view.mask, scale=c.attn_scale)
        out = out.reshape(c.n_head, n, c.value_dim).permute(1, 0, 2)
        return out.contiguous().reshape(n, c.n_head * c.value_dim)


class _View(NamedTuple):
    """One sequence of a step as its layers of one kind see it (see ``_view``)."""

    slot: int
    positions: np.ndarray  # (n,) of its new tokens
    row: int  # of its first token in the step's packed rows
    cos: Tensor  # (n, n_rot/2)
    sin: Tensor
    mask: Tensor  # (n, scan) bool: cell j is visible to query i
    scan: int  # cells read


def _norm(x: Tensor, weight: Tensor | None, eps: float) -> Tensor:
    """rms_norm(x) · weight where the layer has the (gemma) post norm, else x."""
    return x if weight is None else rms_norm(x, weight, eps)
