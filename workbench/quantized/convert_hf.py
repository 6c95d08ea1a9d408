"""A Hugging Face checkpoint folder -> a GGUF file llama.cpp (and ``workbench.models.llm``) runs.

Reads ``config.json``, the safetensors weights and the tokenizer (``tokenizer.model`` for
SentencePiece vocabularies, else ``tokenizer.json`` for byte-level BPE), and writes llama.cpp's
tensor names and metadata keys for the ``llama`` (and Mistral), ``qwen2``, ``qwen3``, ``phi3``,
``gemma2`` and ``gemma3`` families, with the transforms llama.cpp's converter applies:

- Llama's q/k rows are permuted so that rope rotates pairs (2i, 2i+1) instead of halves:
  row ``(h, s, j)`` of a head ``h`` (``s`` the half, ``j`` the index in it) moves to
  ``(h, j, s)``;
- Gemma's norms ``x̂·(1 + w)`` are stored as ``1 + w``;
- Llama 3's rope scaling becomes the ``rope_freqs.weight`` tensor of per-frequency divisors.
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
        scalar = cfg.get("query_pre_attn_scalar", head_dim)
        if scalar != head_dim:
            md[k + "attention.scale"] = float(scalar) ** -0.5
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
    kind = rope.get("rope_type") or rope.get("type")
    if kind == "linear":
        md[k + "rope.scaling.type"] = "linear"
        md[k + "rope.scaling.factor"] = float(rope["factor"])
    elif kind not in (None, "default", "llama3"):
        raise HfConvertError(name, f"rope scaling {kind!r} is not supported")
    return md


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
    md["general.file_type"] = {"F32": 0, "F16": 1, "Q4_0": 2, "Q8_0": 7}.get(target.name, 0)
    md["general.quantization_version"] = 2
    head_dim = md[f"{arch}.attention.key_length"]
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
    rope = cfg.get("rope_scaling") or cfg.get("rope_parameters") or {}
    if arch == "llama" and rope.get("rope_type") == "llama3":
        base = md["llama.rope.freq_base"]
        tensors["rope_freqs.weight"] = QTensor.quantize(
            _llama3_factors(rope, head_dim, base), "F32"
        )
    if "token_embd.weight" not in tensors:
        raise HfConvertError(str(folder), "no model.embed_tokens.weight in the safetensors")
    # llama.cpp reads its integer keys (counts, lengths, token ids, file type) as u32 only.
    md = {
        k: GgufValue(v, GgufValueType.UINT32) if type(v) is int and v >= 0 else v
        for k, v in md.items()
    }
    write_gguf(dst, md, tensors)
    return rows
