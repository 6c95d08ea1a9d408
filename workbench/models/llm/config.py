"""Hyper-parameters of a GGUF language model, read from its metadata (llama.cpp's key names).

Every family reads ``{arch}.block_count``, ``embedding_length``, ``feed_forward_length``,
``attention.head_count`` (``head_count_kv``, ``key_length``, ``value_length``,
``layer_norm_rms_epsilon``), ``rope.freq_base`` and ``rope.dimension_count``; what differs per
family is in :data:`FAMILIES`:

==========  ======  ==========  ==============================================================
family      rope    activation  extras
==========  ======  ==========  ==============================================================
llama       pairs   SiLU        rope_freqs.weight (Llama 3 rope scaling), Mistral's window
qwen2       halves  SiLU        q/k/v biases
qwen3       halves  SiLU        q/k RMS norms per head
phi3        halves  SiLU        fused attn_qkv and gate|up in ffn_up, LongRoPE factor tensors
gemma2      halves  GELU-tanh   x·√d embedding, post norms, soft-caps, every 2nd layer local
gemma3      halves  GELU-tanh   x·√d embedding, post norms, q/k norms, 5 local : 1 global layers,
                                local rope base ``rope.freq_base_swa`` (10 000), unscaled
==========  ======  ==========  ==============================================================

Rope scaling (``rope.scaling.type`` linear, yarn, longrope) is in :mod:`.rope`. The attention
scale is ``attention.scale`` where given, else ``1/√head_dim`` (gemma: llama.cpp's rule,
:func:`~workbench.quantized.convert_hf.gemma_query_dim`).

"pairs" rotates (x[2i], x[2i+1]) (llama.cpp's converter permutes Llama's q/k rows for it),
"halves" rotates (x[i], x[i + d/2]) (GPT-NeoX). Gemma's ``(1 + w)`` norms are stored with the
1 already added, as llama.cpp's converter writes them, so every norm here is ``x / rms(x) · w``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import WorkbenchError
from ...quantized.convert_hf import gemma_query_dim
from .rope import SCALING_TYPES, RopeScaling


class LlmFileError(WorkbenchError, ValueError):
    """A GGUF file that does not describe a model this package can run."""


@dataclass(frozen=True)
class Family:
    rope_pairs: bool  # True: (2i, 2i+1) pairs; False: halves (NeoX)
    activation: str  # "silu" | "gelu_tanh"
    embed_scale: bool = False  # x · sqrt(n_embd) after the embedding
    swa_pattern: int = 0  # every layer i with i % p < p - 1 is local; 0: from the file (all)


FAMILIES = {
    "llama": Family(True, "silu"),
    "mistral": Family(True, "silu"),
    "qwen2": Family(False, "silu"),
    "qwen3": Family(False, "silu"),
    "phi3": Family(False, "silu"),
    "gemma2": Family(False, "gelu_tanh", True, 2),
    "gemma3": Family(False, "gelu_tanh", True, 6),
}

MAX_LAYERS = 1024
MAX_HEADS = 4096


@dataclass(frozen=True)
class LlmConfig:
    """What the forward pass needs. ``local_layers[i]`` is True for sliding-window layers."""

    arch: str
    n_vocab: int
    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    head_dim: int
    value_dim: int
    n_ff: int
    context_length: int
    rms_eps: float
    rope_base: float
    rope_base_local: float
    n_rot: int
    rope_pairs: bool
    rope_scaling: RopeScaling  # of the global layers; gemma3's local layers are not scaled
    activation: str
    embed_scale: float
    attn_scale: float
    attn_softcap: float
    final_softcap: float
    sliding_window: int
    local_layers: tuple[bool, ...] = field(default=())

    @property
    def n_group(self) -> int:
        return self.n_head // self.n_head_kv


def _get(md: dict[str, Any], key: str, kind: type, default: Any = ...) -> Any:
    if key not in md:
        if default is ...:
            raise LlmFileError(f"GGUF metadata key {key!r} is missing")
        return default
    value = md[key]
    if kind is int:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise LlmFileError(f"GGUF metadata {key!r} should be an integer, found {value!r}")
        return int(value)
    if kind is float:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
            raise LlmFileError(f"GGUF metadata {key!r} should be a number, found {value!r}")
        if not math.isfinite(float(value)):
            raise LlmFileError(f"GGUF metadata {key!r} is not finite: {value!r}")
        return float(value)
    return value


def _positive(key: str, value: int, limit: int | None = None) -> int:
    if value <= 0 or (limit is not None and value > limit):
        bound = f" and at most {limit}" if limit else ""
        raise LlmFileError(f"GGUF metadata {key!r} = {value}: expected a positive value{bound}")
    return value


def _local_layers(md: dict[str, Any], arch: str, fam: Family, n_layer: int, window: int):
    if window <= 0:
        return (False,) * n_layer
    pattern = md.get(f"{arch}.attention.sliding_window_pattern", fam.swa_pattern)
    if isinstance(pattern, (list, np.ndarray)):
        flags = tuple(bool(v) for v in pattern)
        if len(flags) != n_layer:
            raise LlmFileError(
                f"GGUF metadata '{arch}.attention.sliding_window_pattern' has {len(flags)} "
                f"entries, expected one per layer ({n_layer})"
            )
        return flags
    p = int(pattern)
    if p < 0:
        raise LlmFileError(f"GGUF metadata sliding_window_pattern = {p} is negative")
    return tuple(p == 0 or i % p < p - 1 for i in range(n_layer))


def _rope_scaling(md: dict[str, Any], arch: str, context: int) -> RopeScaling:
    """The ``rope.scaling.*`` keys; yarn and longrope need the original context length."""

    def key(k: str) -> str:
        return f"{arch}.rope.scaling.{k}"

    given = next((k for k in (key("factor"), f"{arch}.rope.scale_linear") if k in md), None)
    # llama.cpp's default type is linear, which a missing factor makes the identity.
    kind = md.get(key("type"), "linear" if given else "none") or "none"
    if kind not in SCALING_TYPES:
        raise LlmFileError(
            f"GGUF metadata {key('type')!r} = {kind!r} is not supported (supported: "
            f"{', '.join(SCALING_TYPES)}; Llama 3 scaling comes as the rope_freqs.weight tensor)"
        )
    factor = _get(md, given, float) if given and kind in ("linear", "yarn") else 1.0
    if factor <= 0:
        raise LlmFileError(f"GGUF metadata {key('factor')!r} = {factor} must be positive")
    original = _get(md, key("original_context_length"), int, context)
    attn_factor = _get(md, key("attn_factor"), float, 1.0)
    beta_fast = _get(md, key("yarn_beta_fast"), float, 32.0)
    beta_slow = _get(md, key("yarn_beta_slow"), float, 1.0)
    if original <= 0 or attn_factor <= 0 or beta_fast <= 0 or beta_slow <= 0:
        raise LlmFileError(
            f"GGUF metadata rope scaling: original_context_length {original}, attn_factor "
            f"{attn_factor}, yarn_beta_fast {beta_fast} and yarn_beta_slow {beta_slow} must be "
            "positive"
        )
    return RopeScaling(kind, factor, original, attn_factor, beta_fast, beta_slow)


def config_from_metadata(md: dict[str, Any], n_vocab: int) -> LlmConfig:
    """Read and check the hyper-parameters; errors name the key and what was expected."""
    arch = _get(md, "general.architecture", str)
    fam = FAMILIES.get(arch)
    if fam is None:
        raise LlmFileError(
            f"GGUF architecture {arch!r} is not supported; expected one of {', '.join(FAMILIES)}"
        )

    def key(k: str) -> str:
        return f"{arch}.{k}"

    n_embd = _positive(key("embedding_length"), _get(md, key("embedding_length"), int), 1 << 16)
    n_layer = _positive(key("block_count"), _get(md, key("block_count"), int), MAX_LAYERS)
    n_head = _positive(
        key("attention.head_count"), _get(md, key("attention.head_count"), int), MAX_HEADS
    )
    n_head_kv = _get(md, key("attention.head_count_kv"), int, n_head)
    _positive(key("attention.head_count_kv"), n_head_kv, MAX_HEADS)
    if n_head % n_head_kv:
        raise LlmFileError(
            f"GGUF metadata: attention.head_count {n_head} is not a multiple of "
            f"attention.head_count_kv {n_head_kv}"
        )
    default_dim = n_embd // n_head
    head_dim = _get(md, key("attention.key_length"), int, default_dim)
    _positive(key("attention.key_length"), head_dim, 1 << 12)
    value_dim = _get(md, key("attention.value_length"), int, head_dim)
    _positive(key("attention.value_length"), value_dim, 1 << 12)
    n_ff = _positive(key("feed_forward_length"), _get(md, key("feed_forward_length"), int), 1 << 20)
    ctx = _positive(key("context_length"), _get(md, key("context_length"), int, 4096), 1 << 40)
    n_rot = _get(md, key("rope.dimension_count"), int, head_dim)
    if n_rot <= 0 or n_rot > head_dim or n_rot % 2:
        raise LlmFileError(
            f"GGUF metadata {key('rope.dimension_count')!r} = {n_rot}: expected an even "
            f"number in [2, {head_dim}] (the head dimension)"
        )
    eps = _get(md, key("attention.layer_norm_rms_epsilon"), float, 1e-5)
    base = _get(md, key("rope.freq_base"), float, 10000.0)
    base_local = _get(md, key("rope.freq_base_swa"), float, 10000.0 if arch == "gemma3" else base)
    scaling = _rope_scaling(md, arch, ctx)
    window = _get(md, key("attention.sliding_window"), int, 0)
    if window < 0:
        raise LlmFileError(f"GGUF metadata attention.sliding_window = {window} is negative")
    # gemma: llama.cpp's own rule (the converter folds query_pre_attn_scalar into the queries)
    scaled_dim = gemma_query_dim(arch, n_layer, n_embd, n_head, head_dim)
    scale = _get(md, key("attention.scale"), float, 0.0) or 1.0 / math.sqrt(scaled_dim)
    return LlmConfig(
        arch=arch,
        n_vocab=n_vocab,
        n_embd=n_embd,
        n_layer=n_layer,
        n_head=n_head,
        n_head_kv=n_head_kv,
        head_dim=head_dim,
        value_dim=value_dim,
        n_ff=n_ff,
        context_length=ctx,
        rms_eps=eps,
        rope_base=base,
        rope_base_local=base_local,
        n_rot=n_rot,
        rope_pairs=fam.rope_pairs,
        rope_scaling=scaling,
        activation=fam.activation,
        embed_scale=math.sqrt(n_embd) if fam.embed_scale else 1.0,
        attn_scale=scale,
        attn_softcap=_get(md, key("attn_logit_softcapping"), float, 0.0),
        final_softcap=_get(md, key("final_logit_softcapping"), float, 0.0),
        sliding_window=window,
        local_layers=_local_layers(md, arch, fam, n_layer, window),
    )
