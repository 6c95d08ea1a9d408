"""A Hugging Face checkpoint folder -> a GGUF file llama.cpp (and ``workbench.models.llm``) runs.

Reads ``config.json``, the safetensors weights and the tokenizer (``tokenizer.model`` for
SentencePiece vocabularies, else ``tokenizer.json`` for byte-level BPE), and writes llama.cpp's
tensor names and metadata keys for the ``llama`` (and Mistral), ``qwen2``, ``qwen3``, ``phi3``,
``gemma2`` and ``gemma3`` families, with the transforms llama.cpp's converter applies:

- Llama's q/k rows are permuted so that rope rotates pairs (2i, 2i+1) instead of halves:
  row ``(h, s, j)`` of a head ``h`` (``s`` the half, ``j`` the index in it) moves to
  ``(h, j, s)``;
- Gemma's norms ``x̂·(1 + w)`` are stored as ``1 + w``;
- Llama 3's rope scaling becomes the ``rope_freqs.weight`` tensor of per-frequency divisors,
  Phi-3's LongRoPE the ``rope_factors_long/short.weight`` pair plus ``rope.scaling.attn_factor``,
  YaRN the ``rope.scaling.type/factor/original_context_length`` keys;
- Gemma's ``query_pre_attn_scalar``: llama.cpp reads no scale key for gemma (it takes
  ``1/√head_dim``, see :func:`gemma_query_dim`), so the ratio ``c = √(dim / scalar)`` is folded
  into the queries, exactly (``(c·q)·k`` is the score scaled by ``c``; rope is linear): into
  ``attn_q`` for gemma2, into ``attn_q_norm`` (after the RMS norm) for gemma3.

llama.cpp runs its ``llama`` and ``qwen2`` architectures with full attention; the
``attention.sliding_window`` written for Mistral-style checkpoints is honoured by
``workbench.models.llm`` only (llama.cpp's own converter drops it).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .convert import ConvertedTensor, choose_type
from .dtype import GgmlDType
from .errors import GgufError
from .gguf_file import GgufValue, GgufValueType, write_gguf
from .qtensor import QTensor

ARCHITECTURES = {
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "llama",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",
    "Phi3ForCausalLM": "phi3",
    "Gemma2ForCausalLM": "gemma2",
    "Gemma3ForCausalLM": "gemma3",
}

_LAYER = {
    "input_layernorm": "attn_norm",
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "self_attn.qkv_proj": "attn_qkv",
    "self_attn.q_norm": "attn_q_norm",
    "self_attn.k_norm": "attn_k_norm",
    "pre_feedforward_layernorm": "ffn_norm",
    "post_feedforward_layernorm": "post_ffw_norm",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.gate_up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}
_TOP = {"model.embed_tokens": "token_embd", "model.norm": "output_norm", "lm_head": "output"}


_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_QWEN2 = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# tokenizer.ggml.pre -> the regular expressions that split text before byte-level BPE, in
# order (llama.cpp's names; the first of several names for one split is what is written).
PRE_TOKENIZERS: dict[str, tuple[str, ...]] = {
    "gpt-2": (_GPT2,),
    "default": (_GPT2,),
    "llama-bpe": (LLAMA3_SPLIT,),
    "llama3": (LLAMA3_SPLIT,),
    "smaug-bpe": (LLAMA3_SPLIT,),
    "qwen2": (_QWEN2,),
    "deepseek-r1-qwen": (_QWEN2,),
    "smollm": (r"\p{N}", _GPT2),
}


class HfConvertError(GgufError):
    def __init__(self, folder: str, problem: str):
        super().__init__(folder, "checkpoint", problem)


def _gguf_name(hf: str, arch: str) -> str | None:
    m = re.fullmatch(r"model\.layers\.(\d+)\.(.+)\.(weight|bias)", hf)
    if m:
        part = m.group(2)
        if part == "post_attention_layernorm":
            mapped = "post_attention_norm" if arch.startswith("gemma") else "ffn_norm"
        else:
            mapped = _LAYER.get(part)
        return None if mapped is None else f"blk.{m.group(1)}.{mapped}.{m.group(3)}"
    m = re.fullmatch(r"(.+)\.(weight|bias)", hf)
    if m and m.group(1) in _TOP:
        return f"{_TOP[m.group(1)]}.{m.group(2)}"
    return None


def _permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """Rows (h, half, j) -> (h, j, half): rope on halves becomes rope on adjacent pairs."""
    rows = w.shape[0]
    return w.reshape(n_head, 2, rows // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _llama3_factors(s: dict, head_dim: int, base: float) -> np.ndarray:
    factor, low, high = s["factor"], s.get("low_freq_factor", 1.0), s.get("high_freq_factor", 4.0)
    old = s.get("original_max_position_embeddings", 8192)
    inv = 1.0 / base ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    wavelen = 2 * math.pi / inv
    smooth = (old / wavelen - low) / (high - low)
    out = np.where(wavelen < old / high, 1.0, np.where(wavelen > old / low, factor, 0.0))
    medium = out == 0.0
    out[medium] = 1.0 / ((1 - smooth[medium]) / factor + smooth[medium])
    return out.astype(np.float32)


def gemma_query_dim(arch: str, n_layer: int, n_embd: int, n_head: int, head_dim: int) -> int:
    """The d of llama.cpp's gemma query scale 1/√d: ``head_dim``, except for the 27B models
    (46 layers for gemma2, 62 for gemma3) whose ``query_pre_attn_scalar`` is ``n_embd/n_head``."""
    wide = {"gemma2": 46, "gemma3": 62}.get(arch)
    return n_embd // n_head if n_layer == wide else head_dim


def _query_fold(cfg: dict, arch: str, head_dim: int) -> float:
    """c with llama.cpp's score of (c·q, k) equal to the model's of (q, k) (module docs)."""
    if not arch.startswith("gemma"):
        return 1.0
    d = gemma_query_dim(
        arch, cfg["num_hidden_layers"], cfg["hidden_size"], cfg["num_attention_heads"], head_dim
    )
    return math.sqrt(d / float(cfg.get("query_pre_attn_scalar") or head_dim))


def _yarn_mscale(factor: float, m: float = 1.0) -> float:
    """YaRN's cos/sin magnitude 1 + 0.1·m·ln(factor) (1 when not stretched)."""
    return 1.0 + 0.1 * m * math.log(factor) if factor > 1 else 1.0


def _rope_scaling(cfg: dict, rope: dict, k: str, name: str) -> dict[str, Any]:
    """The ``rope.scaling.*`` keys of linear, YaRN and LongRoPE scaling (as transformers
    computes them: factors from ``rope`` or else max/original positions)."""
    kind = rope.get("rope_type") or rope.get("type")
    if kind in (None, "default", "llama3"):
        return {}
    md: dict[str, Any] = {}
    original = rope.get("original_max_position_embeddings") or cfg.get(
        "original_max_position_embeddings"
    )
    if kind == "linear":
        return {k + "rope.scaling.type": "linear", k + "rope.scaling.factor": float(rope["factor"])}
    if kind not in ("yarn", "longrope", "su") or not original:
        missing = " without original_max_position_embeddings" if original is None else ""
        raise HfConvertError(name, f"rope scaling {kind!r}{missing} is not supported")
    factor = float(rope.get("factor") or cfg["max_position_embeddings"] / original)
    md[k + "rope.scaling.original_context_length"] = int(original)
    attention = rope.get("attention_factor")
    if kind == "yarn":
        if (rope.get("beta_fast") or 32) != 32 or (rope.get("beta_slow") or 1) != 1:
            raise HfConvertError(
                name, "yarn beta_fast/beta_slow other than 32/1: llama.cpp reads no such key here"
            )
        if rope.get("truncate") is False:
            raise HfConvertError(name, "yarn with truncate=False is not supported")
        if attention is None and rope.get("mscale") and rope.get("mscale_all_dim"):
            attention = _yarn_mscale(factor, rope["mscale"]) / _yarn_mscale(
                factor, rope["mscale_all_dim"]
            )
        md[k + "rope.scaling.type"] = "yarn"
        md[k + "rope.scaling.factor"] = factor
        if attention is not None:  # llama.cpp multiplies its own magnitude by this
            md[k + "rope.scaling.attn_factor"] = float(attention) / _yarn_mscale(factor)
        return md
    if attention is None:
        attention = math.sqrt(1 + math.log(factor) / math.log(original)) if factor > 1 else 1.0
    md[k + "rope.scaling.type"] = "longrope"
    md[k + "rope.scaling.attn_factor"] = float(attention)
    return md


def _rope_tensors(cfg: dict, arch: str, md: dict, name: str) -> dict[str, np.ndarray]:
    """Llama 3's ``rope_freqs`` or LongRoPE's ``rope_factors_long/short`` (n_rot/2 each)."""
    rope = cfg.get("rope_scaling") or cfg.get("rope_parameters") or {}
    kind = rope.get("rope_type") or rope.get("type")
    n_rot = md[f"{arch}.rope.dimension_count"]
    if kind == "llama3" and arch == "llama":
        return {"rope_freqs.weight": _llama3_factors(rope, n_rot, md["llama.rope.freq_base"])}
    if kind not in ("longrope", "su"):
        return {}
    out = {}
    for which in ("long", "short"):
        f = np.asarray(rope.get(f"{which}_factor") or [], np.float32)
        if f.shape != (n_rot // 2,):
            raise HfConvertError(
                name, f"rope {which}_factor has {f.size} values, expected n_rot/2 = {n_rot // 2}"
            )
        out[f"rope_factors_{which}.weight"] = f
    return out


def _metadata(cfg: dict, arch: str, name: str) -> dict[str, Any]:
    d = cfg["hidden_size"]
    n_head = cfg["num_attention_heads"]
    head_dim = cfg.get("head_dim") or d // n_head
    rope = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
    rot = int(head_dim * cfg.get("partial_rotary_factor", rope.get("partial_rotary_factor", 1.0)))
    base = float(cfg.get("rope_theta") or rope.get("rope_theta") or 10000.0)
    k = f"{arch}."
    md: dict[str, Any] = {
        "general.architecture": arch,
        "general.name": name,
        k + "context_length": int(cfg.get("max_position_embeddings", 4096)),
        k + "embedding_length": d,
        k + "block_count": cfg["num_hidden_layers"],
        k + "feed_forward_length": cfg["intermediate_size"],
        k + "attention.head_count": n_head,
        k + "attention.head_count_kv": cfg.get("num_key_value_heads") or n_head,
        k + "attention.key_length": head_dim,
        k + "attention.value_length": head_dim,
        k + "attention.layer_norm_rms_epsilon": float(cfg.get("rms_norm_eps", 1e-6)),
        k + "rope.freq_base": base,
        k + "rope.dimension_count": rot,
        k + "vocab_size": cfg["vocab_size"],
    }
    window = cfg.get("sliding_window")
    if window and (arch != "qwen2" or cfg.get("use_sliding_window")):
        md[k + "attention.sliding_window"] = int(window)
    if arch.startswith("gemma"):
        for cap in ("attn_logit_softcapping", "final_logit_softcapping"):
            if cfg.get(cap):
                md[k + cap] = float(cfg[cap])
        types = cfg.get("layer_types")
        if types:
            md[k + "attention.sliding_window_pattern"] = GgufValue(
                np.array([t == "sliding_attention" for t in types]),
                GgufValueType.ARRAY,
                GgufValueType.BOOL,
            )
    if arch == "gemma3":
        local = cfg.get("rope_local_base_freq")
        params = cfg.get("rope_parameters") or {}
        if isinstance(params.get("sliding_attention"), dict):
            local = params["sliding_attention"].get("rope_theta", local)
            full = params.get("full_attention") or {}
            md[k + "rope.freq_base"] = float(full.get("rope_theta", base))
            rope = full
        if local:
            md[k + "rope.freq_base_swa"] = float(local)
    md.update(_rope_scaling(cfg, rope, k, name))
    return md


# llama.cpp sets attributes of these tokens in every model whose general.name contains "phi3" or
# "phi-3" (any case) and fails to load one whose vocabulary lacks any of them.
_PHI3_PATCHED = {"</s>", "<unk>", "<s>", "<|endoftext|>"}


def _loadable_name(name: str, tokens: Sequence[str]) -> str:
    """``name``, with "phi3"/"phi-3" written "phi 3" where llama.cpp would fail on it."""
    if re.search("phi-?3", name, re.IGNORECASE) and not _PHI3_PATCHED <= set(tokens):
        return re.sub("(phi)-?(3)", r"\1 \2", name, flags=re.IGNORECASE)
    return name


def _special_id(value: Any, vocab: dict[str, int]) -> int | None:
    if isinstance(value, dict):
        value = value.get("content")
    return vocab.get(value) if isinstance(value, str) else None


def tokenizer_metadata(folder: Path, cfg: dict) -> dict[str, Any]:
    tcfg_path = folder / "tokenizer_config.json"
    tcfg = json.loads(tcfg_path.read_text()) if tcfg_path.exists() else {}
    md: dict[str, Any] = {}
    if (folder / "tokenizer.model").exists():
        import sentencepiece as spm  # the converter's only extra need for SentencePiece files

        sp = spm.SentencePieceProcessor(model_file=str(folder / "tokenizer.model"))
        n = sp.get_piece_size()
        tokens = [sp.id_to_piece(i) for i in range(n)]
        types = []
        for i in range(n):
            types.append(
                2
                if sp.is_unknown(i)
                else 3
                if sp.is_control(i)
                else 6
                if sp.is_byte(i)
                else 5
                if sp.is_unused(i)
                else 1
            )
        md.update(
            {
                "tokenizer.ggml.model": "llama",
                "tokenizer.ggml.tokens": tokens,
                "tokenizer.ggml.scores": np.array([sp.get_score(i) for i in range(n)], np.float32),
                "tokenizer.ggml.token_type": np.array(types, np.int32),
            }
        )
        vocab = {t: i for i, t in enumerate(tokens)}
        if sp.unk_id() >= 0:
            md["tokenizer.ggml.unknown_token_id"] = sp.unk_id()
        default_bos = True
    elif (folder / "tokenizer.json").exists():
        tj = json.loads((folder / "tokenizer.json").read_text())
        model = tj["model"]
        if model.get("type") != "BPE" or model.get("byte_fallback"):
            raise HfConvertError(
                str(folder),
                "tokenizer.json is not a byte-level BPE; a "
                "SentencePiece vocabulary needs tokenizer.model",
            )
        vocab = dict(model["vocab"])
        for added in tj.get("added_tokens", []):
            vocab[added["content"]] = added["id"]
        n = max(vocab.values()) + 1
        tokens = [f"[PAD{i}]" for i in range(n)]
        for t, i in vocab.items():
            tokens[i] = t
        types = np.ones(n, np.int32)
        for added in tj.get("added_tokens", []):
            types[added["id"]] = 3 if added.get("special") else 4
        merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]
        md.update(
            {
                "tokenizer.ggml.model": "gpt2",
                "tokenizer.ggml.pre": _pre_name(tj),
                "tokenizer.ggml.tokens": tokens,
                "tokenizer.ggml.token_type": types,
                "tokenizer.ggml.merges": GgufValue(
                    merges, GgufValueType.ARRAY, GgufValueType.STRING
                ),
            }
        )
        default_bos = False
    else:
        raise HfConvertError(str(folder), "no tokenizer.model or tokenizer.json")
    for name, key in (
        ("bos", "bos_token"),
        ("eos", "eos_token"),
        ("unknown", "unk_token"),
        ("padding", "pad_token"),
    ):
        tid = _special_id(tcfg.get(key), vocab)
        if tid is None and isinstance(cfg.get(f"{key}_id"), int):
            tid = cfg[f"{key}_id"]
        if tid is not None:
            md[f"tokenizer.ggml.{name}_token_id"] = int(tid)
    md["tokenizer.ggml.add_bos_token"] = bool(tcfg.get("add_bos_token", default_bos))
    md["tokenizer.ggml.add_eos_token"] = bool(tcfg.get("add_eos_token", False))
    template = tcfg.get("chat_template")
    if (folder / "chat_template.jinja").exists():
        template = (folder / "chat_template.jinja").read_text()
    if isinstance(template, str) and template:
        md["tokenizer.chat_template"] = template
    return md


def _splits(pre: dict | None) -> list[dict]:
    if not pre:
        return []
    if pre.get("type") == "Sequence":
        return [p for sub in pre.get("pretokenizers", []) for p in _splits(sub)]
    return [pre]


def _pre_name(tj: dict) -> str:
    """llama.cpp's pre-tokenizer name for a tokenizer.json, recognised by its split regexes."""
    steps = _splits(tj.get("pre_tokenizer"))
    regexes = []
    for step in steps:
        kind = step.get("type")
        if kind == "Split":
            regexes.append(step.get("pattern", {}).get("Regex"))
        elif kind == "Digits" and step.get("individual_digits"):
            regexes.append(r"\p{N}")
        elif kind == "ByteLevel" and step.get("use_regex", True):
            regexes.append(PRE_TOKENIZERS["gpt-2"][0])
    for name, known in PRE_TOKENIZERS.items():
        if tuple(regexes) == known:
            return name
    raise HfConvertError(
        "tokenizer.json",
        f"pre-tokenizer splits {regexes} match none of {', '.join(PRE_TOKENIZERS)}",
    )


def convert_hf_checkpoint(
    folder: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    ggml_dtype: GgmlDType | str,
    *,
    skip: Sequence[str] = (),
) -> list[ConvertedTensor]:
    """Convert a Hugging Face model folder to GGUF ``dst`` with weights as ``ggml_dtype``.

    1-D tensors stay F32, matrices whose width does not fit the block size fall back as in
    :func:`~workbench.quantized.convert_safetensors`. Returns the per-tensor report.
    """
    from ..io.safetensors import open_safetensors

    folder = Path(folder)
    cfg_path = folder / "config.json"
    if not cfg_path.exists():
        raise HfConvertError(str(folder), "no config.json")
    cfg = json.loads(cfg_path.read_text())
    cfg = cfg.get("text_config", cfg) | {"architectures": cfg.get("architectures", [])}
    names = [a for a in cfg["architectures"] if a in ARCHITECTURES]
    if not names:
        raise HfConvertError(
            str(folder),
            f"architectures {cfg['architectures']} are not supported; expected one "
            f"of {', '.join(ARCHITECTURES)}",
        )
    arch = ARCHITECTURES[names[0]]
    target = GgmlDType.from_name(ggml_dtype)
    md = _metadata(cfg, arch, folder.name)
    md.update(tokenizer_metadata(folder, cfg))
    md["general.name"] = _loadable_name(md["general.name"], md["tokenizer.ggml.tokens"])
    md["general.file_type"] = {"F32": 0, "F16": 1, "Q4_0": 2, "Q8_0": 7}.get(target.name, 0)
    md["general.quantization_version"] = 2
    fold = _query_fold(cfg, arch, md[f"{arch}.attention.key_length"])
    reader = open_safetensors(folder)
    tensors: dict[str, QTensor] = {}
    rows: list[ConvertedTensor] = []
    tied = cfg.get("tie_word_embeddings", arch.startswith("gemma"))
    for hf in reader:
        name = _gguf_name(hf, arch)
        if name is None or (name == "output.weight" and tied):
            continue
        x = np.ascontiguousarray(reader.get_tensor(hf).to_dtype("f32").numpy(), np.float32)
        if arch == "llama" and name.endswith(("attn_q.weight", "attn_q.bias")):
            x = _permute(x, md["llama.attention.head_count"])
        if arch == "llama" and name.endswith(("attn_k.weight", "attn_k.bias")):
            x = _permute(x, md["llama.attention.head_count_kv"])
        if arch.startswith("gemma") and name.endswith("norm.weight"):
            x = x + np.float32(1.0)
        if fold != 1.0 and name.endswith(
            "attn_q_norm.weight" if arch == "gemma3" else "attn_q.weight"
        ):
            x = x * np.float32(fold)
        gd, note = choose_type(name, x.shape, "F32", target, skip)
        if target in (GgmlDType.F32, GgmlDType.F16) and x.ndim > 1 and not note:
            gd = target
        q = QTensor.quantize(x, gd)
        err = q.dequantize_numpy() - x
        rows.append(
            ConvertedTensor(
                name,
                x.shape,
                gd,
                q.nbytes,
                float(np.sqrt(np.mean(np.square(err, dtype=np.float64)))),
                note,
            )
        )
        tensors[name] = q
    for rope_name, factors in _rope_tensors(cfg, arch, md, folder.name).items():
        tensors[rope_name] = QTensor.quantize(factors, "F32")
    if "token_embd.weight" not in tensors:
        raise HfConvertError(str(folder), "no model.embed_tokens.weight in the safetensors")
    # llama.cpp reads its integer keys (counts, lengths, token ids, file type) as u32 only.
    md = {
        k: GgufValue(v, GgufValueType.UINT32) if type(v) is int and v >= 0 else v
        for k, v in md.items()
    }
    write_gguf(dst, md, tensors)
    return rows
