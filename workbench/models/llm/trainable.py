"""A differentiable twin of :class:`Transformer` for LoRA / QLoRA fine-tuning.

The inference model runs numpy over a packed batch and a KV cache; training needs autograd.
``TrainableTransformer`` holds the same (quantized, memory-mapped) weights as ``nn`` modules
named as the Hugging Face checkpoints name them, so peft adapters match by name
(``model.layers.{i}.self_attn.q_proj``, ``mlp.down_proj``, ``lm_head``; phi3's fused
``qkv_proj`` / ``gate_up_proj``), and runs the same maths as the inference pass on a padded
batch ``ids: (B, T)`` with positions ``0..T-1``::

    h = x + post_attn_norm(attn(input_layernorm(x)))
    x = h + post_ffw_norm(down(act(gate(ffn_norm(h))) * up(ffn_norm(h))))
    logits = cap(lm_head(norm(x)))

``gradient_checkpointing = True`` keeps only each layer's input in training and recomputes
the layer in the backward pass. Every frozen projection is a :class:`FrozenQLinear`: its
quantized weight gets no gradient, but the gradient reaches its input (``g W``, decoded a tile
at a time), so adapters anywhere in the network train. Right padding needs no attention
mask: a padded position only feeds positions after it, whose labels are ignored.
"""

from __future__ import annotations

import math

import numpy as np

from ...nn.checkpoint import checkpoint
from ...nn.container import ModuleList
from ...nn.lora import quantized_linear_with_input_grad
from ...nn.module import Module
from ...ops import elementwise as ew
from ...ops.creation import from_numpy
from ...ops.fused import rms_norm, rope, scaled_dot_product_attention, softmax
from ...ops.shape import cat
from ...quantized import QLinear
from ...tensor import Tensor
from .model import Transformer
from .rope import Rope


class FrozenQLinear(QLinear):
    """A quantized projection that passes gradients to its input (never to its weight)."""

    def forward(self, x: Tensor) -> Tensor:
        return quantized_linear_with_input_grad(self, x)


def _frozen(proj) -> FrozenQLinear:
    bias = None if proj.bias is None else from_numpy(np.ascontiguousarray(proj.bias))
    return FrozenQLinear(proj.mm.weight, bias)


def _vector(values: np.ndarray | None) -> Tensor | None:
    return None if values is None else from_numpy(np.ascontiguousarray(values, np.float32))


class Attention(Module):
    def __init__(self, block):
        super().__init__()
        if block.qkv is not None:
            self.qkv_proj = _frozen(block.qkv)
        else:
            self.q_proj, self.k_proj = _frozen(block.q), _frozen(block.k)
            self.v_proj = _frozen(block.v)
        self.o_proj = _frozen(block.o)
        self._fused = block.qkv is not None
        self.q_norm, self.k_norm = _vector(block.q_norm), _vector(block.k_norm)


class Mlp(Module):
    def __init__(self, block):
        super().__init__()
        if block.gate_up is not None:
            self.gate_up_proj = _frozen(block.gate_up)
        else:
            self.gate_proj, self.up_proj = _frozen(block.gate), _frozen(block.up)
        self.down_proj = _frozen(block.down)
        self._fused = block.gate_up is not None


class DecoderLayer(Module):
    def __init__(self, block):
        super().__init__()
        self.self_attn = Attention(block)
        self.mlp = Mlp(block)
        self.attn_norm = _vector(block.attn_norm)
        self.post_attn_norm = _vector(block.post_attn_norm)
        self.ffn_norm = _vector(block.ffn_norm)
        self.post_ffw_norm = _vector(block.post_ffw_norm)


class _Body(Module):
    """``model.*`` of the Hugging Face layout: the layers (the embedding stays quantized)."""

    def __init__(self, tf: Transformer):
        super().__init__()
        self.layers = ModuleList([DecoderLayer(b) for b in tf.blocks])
        self.norm = _vector(tf.output_norm)


class TrainableTransformer(Module):
    """``forward(ids: (B, T)) -> logits (B, T, n_vocab)`` with autograd, from a loaded
    :class:`Transformer` (the weights are shared, not copied)."""

    def __init__(self, tf: Transformer):
        super().__init__()
        if tf.tp.world_size > 1:
            raise ValueError(
                "TrainableTransformer: the model is split over "
                f"{tf.tp.world_size} tensor-parallel ranks; fine-tuning needs the whole model "
                "(load it with tensor_parallel=None)"
            )
        self.config = tf.config
        self.architecture = tf.config.arch
        self.embedding = tf.embedding
        self.model = _Body(tf)
        self.lm_head = FrozenQLinear(tf.output.weight)
        self._rope = tf._rope
        # recompute each layer in the backward pass instead of keeping its activations
        self.gradient_checkpointing = False

    def forward(self, ids) -> Tensor:
        c = self.config
        ids = np.asarray(ids, dtype=np.int64)
        if ids.ndim != 2:
            raise ValueError(f"TrainableTransformer: expected ids (B, T), found shape {ids.shape}")
        batch, length = ids.shape
        x = self.embedding(from_numpy(ids.reshape(-1))).reshape(batch, length, c.n_embd)
        if c.embed_scale != 1.0:
            x = x * c.embed_scale
        tables = [self._tables(freqs, length) for freqs in self._rope]
        masks = {False: self._mask(length, None), True: self._mask(length, c.sliding_window)}
        for i, layer in enumerate(self.model.layers):
            local = bool(c.local_layers[i]) if c.local_layers else False
            table, mask = tables[1 if local else 0], masks[local]

            def run(h: Tensor, layer=layer, table=table, mask=mask) -> Tensor:
                return self._layer(layer, h, table, mask)

            if self.gradient_checkpointing and self.training:
                x = checkpoint(run, x, layer.parameters())
            else:
                x = run(x)
        logits = self.lm_head(rms_norm(x, self.model.norm, c.rms_eps))
        if c.final_softcap:
            logits = ew.tanh(logits / c.final_softcap) * c.final_softcap
        return logits

    def _layer(self, layer: DecoderLayer, x: Tensor, table, mask: Tensor) -> Tensor:
        c = self.config
        h = rms_norm(x, layer.attn_norm, c.rms_eps)
        a = self._attention(layer.self_attn, h, table, mask)
        if layer.post_attn_norm is not None:
            a = rms_norm(a, layer.post_attn_norm, c.rms_eps)
        x = x + a
        h = rms_norm(x, layer.ffn_norm, c.rms_eps)
        m = self._mlp(layer.mlp, h)
        if layer.post_ffw_norm is not None:
            m = rms_norm(m, layer.post_ffw_norm, c.rms_eps)
        return x + m

    def _tables(self, freqs: Rope, length: int):
        cos, sin = freqs.tables(np.arange(length), length)
        return from_numpy(cos), from_numpy(sin)

    def _mask(self, length: int, window: int | None) -> Tensor:
        """(T, T) bool: key j is visible to query i when j <= i (and i - j < window)."""
        i = np.arange(length)[:, None]
        j = np.arange(length)[None, :]
        keep = j <= i
        if window:
            keep &= i - j < window
        return from_numpy(keep)

    def _rotate(self, x: Tensor, table) -> Tensor:
        c = self.config
        cos, sin = table
        if c.n_rot == c.head_dim:
            return rope(x, cos, sin, interleaved=c.rope_pairs)
        rotated = rope(x.narrow(-1, 0, c.n_rot).contiguous(), cos, sin, interleaved=c.rope_pairs)
        return cat([rotated, x.narrow(-1, c.n_rot, c.head_dim - c.n_rot)], -1)

    def _attention(self, attn: Attention, h: Tensor, table, mask: Tensor) -> Tensor:
        c = self.config
        batch, length, _ = h.shape
        hq, hk = c.n_head * c.head_dim, c.n_head_kv * c.head_dim
        if attn._fused:
            qkv = attn.qkv_proj(h)
            hv = c.n_head_kv * c.value_dim
            q, k, v = qkv.narrow(-1, 0, hq), qkv.narrow(-1, hq, hk), qkv.narrow(-1, hq + hk, hv)
        else:
            q, k, v = attn.q_proj(h), attn.k_proj(h), attn.v_proj(h)
        q = q.reshape(batch, length, c.n_head, c.head_dim)
        k = k.reshape(batch, length, c.n_head_kv, c.head_dim)
        v = v.reshape(batch, length, c.n_head_kv, c.value_dim)
        if attn.q_norm is not None:
            q = rms_norm(q, attn.q_norm, c.rms_eps)
        if attn.k_norm is not None:
            k = rms_norm(k, attn.k_norm, c.rms_eps)
        q = self._rotate(q.permute(0, 2, 1, 3), table)  # (B, H, T, D)
        k = self._rotate(k.permute(0, 2, 1, 3), table)
        v = v.permute(0, 2, 1, 3)
        # grouped-query heads: query heads of a group share their key/value head
        q = q.reshape(batch, c.n_head_kv, c.n_group, length, c.head_dim)
        k, v = k.unsqueeze(2), v.unsqueeze(2)
        if c.attn_softcap:
            scores = (q @ k.transpose(-1, -2)) * c.attn_scale
            scores = ew.tanh(scores / c.attn_softcap) * c.attn_softcap
            scores = ew.where(mask, scores, -math.inf)
            out = softmax(scores, -1) @ v
        else:
            out = scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=c.attn_scale)
        out = out.reshape(batch, c.n_head, length, c.value_dim).permute(0, 2, 1, 3)
        return attn.o_proj(out.reshape(batch, length, c.n_head * c.value_dim))

    def _mlp(self, mlp: Mlp, h: Tensor) -> Tensor:
        c = self.config
        if mlp._fused:
            gate_up = mlp.gate_up_proj(h)
            gate, up = gate_up.narrow(-1, 0, c.n_ff), gate_up.narrow(-1, c.n_ff, c.n_ff)
        else:
            gate, up = mlp.gate_proj(h), mlp.up_proj(h)
        act = ew.silu(gate) if c.activation == "silu" else ew.gelu(gate, approximate="tanh")
        return mlp.down_proj(act * up)
