"""Tiny random models of every family, built with transformers offline and converted to GGUF.

A byte-level BPE is trained on local text (this repository's README) with the ``tokenizers``
package; each family's folder holds ``config.json``, ``model.safetensors`` and the tokenizer
files, as ``save_pretrained`` writes them. Weights are redrawn wider than transformers' init
(std 0.02 gives near-uniform logits that would hide mistakes) and norm weights away from their
identity value, so that a wrong norm offset, scale or rotation changes the logits.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[3]
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
VOCAB = 384
EXTRA_TEXT = (
    "Café naïve résumé — 東京は日本の首都です。 你好，世界！ Привет, мир. 🙂🚀 ünïcödé\n"
    "\tTabs\tand  double  spaces, numbers 12345 67.89 and 2024-01-01.\n"
)


def corpus() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8") + EXTRA_TEXT * 5
    return [line for line in text.splitlines() if line.strip()]


def train_bpe(folder: Path) -> None:
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    from workbench.quantized.convert_hf import PRE_TOKENIZERS

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRE_TOKENIZERS["qwen2"][0]), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB - len(SPECIALS),
        special_tokens=[],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus(), trainer)
    tok.add_special_tokens(SPECIALS)
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "eos_token": "<|im_end|>",
                "pad_token": "<|endoftext|>",
                "add_bos_token": False,
                "chat_template": CHATML,
            }
        )
    )


COMMON = dict(
    hidden_size=64,
    intermediate_size=96,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=256,
    rms_norm_eps=1e-5,
)


def family_config(family: str):
    import transformers as T

    if family == "llama":
        return T.LlamaConfig(
            vocab_size=VOCAB,
            num_hidden_layers=2,
            **COMMON,
            rope_scaling={
                "rope_type": "llama3",
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 16,
            },
        )
    if family == "mistral":
        return T.MistralConfig(vocab_size=VOCAB, num_hidden_layers=2, sliding_window=6, **COMMON)
    if family == "qwen2":
        return T.Qwen2Config(
            vocab_size=VOCAB, num_hidden_layers=2, **COMMON, tie_word_embeddings=True
        )
    if family == "qwen3":
        return T.Qwen3Config(vocab_size=VOCAB, num_hidden_layers=2, head_dim=32, **COMMON)
    if family == "phi3":
        return T.Phi3Config(
            vocab_size=VOCAB,
            num_hidden_layers=2,
            **COMMON,
            pad_token_id=0,
            eos_token_id=1,
            bos_token_id=2,
        )
    if family == "gemma2":
        return T.Gemma2Config(
            vocab_size=VOCAB,
            num_hidden_layers=3,
            head_dim=16,
            sliding_window=6,
            query_pre_attn_scalar=24,
            **COMMON,
        )
    if family == "gemma3":
        return T.Gemma3TextConfig(
            vocab_size=VOCAB,
            num_hidden_layers=7,
            head_dim=16,
            sliding_window=6,
            query_pre_attn_scalar=24,
            **COMMON,
        )
    if family in ROPE_SCALED:
        return ROPE_SCALED[family]()
    raise KeyError(family)


FAMILIES = ["llama", "mistral", "qwen2", "qwen3", "phi3", "gemma2", "gemma3"]

# LongRoPE's long factors take over past ``original_max_position_embeddings`` (16 here, fewer
# than a test prompt's tokens); both factor sets are far from 1 so that using either is visible.
LONGROPE_ORIGINAL = 16


def _phi3_longrope():
    import transformers as T

    half = COMMON["hidden_size"] // COMMON["num_attention_heads"] // 2
    return T.Phi3Config(
        vocab_size=VOCAB,
        num_hidden_layers=2,
        **COMMON,
        original_max_position_embeddings=LONGROPE_ORIGINAL,
        rope_scaling={
            "rope_type": "longrope",
            "long_factor": [1.0 + 1.5 * i for i in range(half)],
            "short_factor": [1.0 + 0.4 * i for i in range(half)],
        },
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=2,
    )


def _qwen2_yarn():
    import transformers as T

    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}
    return T.Qwen2Config(vocab_size=VOCAB, num_hidden_layers=2, **COMMON, rope_scaling=yarn)


def _llama_yarn():
    import transformers as T

    yarn = {
        "rope_type": "yarn",
        "factor": 8.0,
        "original_max_position_embeddings": 32,
        "attention_factor": 0.8,
    }
    return T.LlamaConfig(vocab_size=VOCAB, num_hidden_layers=2, **COMMON, rope_scaling=yarn)


# The GGUF architecture of a test family whose name is not one.
ARCHITECTURE = {
    "mistral": "llama",
    "phi3_longrope": "phi3",
    "qwen2_yarn": "qwen2",
    "llama_yarn": "llama",
}
ROPE_SCALED = {
    "phi3_longrope": _phi3_longrope,
    "qwen2_yarn": _qwen2_yarn,
    "llama_yarn": _llama_yarn,
}


def build_hf(family: str, folder: Path, **overrides):
    """``overrides``: config fields to change (e.g. a wider MLP that splits into whole
    quantization blocks over 2 ranks)."""
    import torch
    import transformers as T

    torch.manual_seed(sum(map(ord, family)))
    cfg = family_config(family)
    for key, value in overrides.items():
        setattr(cfg, key, value)
    cfg._attn_implementation = "eager"
    model = (
        T.Gemma3ForCausalLM(cfg) if family == "gemma3" else T.AutoModelForCausalLM.from_config(cfg)
    ).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 1 and "norm" in name:
                centre = 0.0 if family.startswith("gemma") else 1.0  # gemma's norms are (1 + w)
                p.copy_(centre + 0.3 * torch.randn_like(p))
            else:
                p.copy_(0.15 * torch.randn_like(p))
    model.save_pretrained(folder, safe_serialization=True)
    train_bpe(folder)
    return model


@pytest.fixture(scope="session")
def tiny(tmp_path_factory):
    """tiny(family, type, **config_overrides) -> (transformers model, gguf path); built once
    per session."""
    from workbench.quantized.convert_hf import convert_hf_checkpoint

    models: dict = {}
    files: dict = {}

    def get(family: str, ggml_type: str = "F32", **overrides):
        name = "".join([family, *(f"-{k}{v}" for k, v in sorted(overrides.items()))])
        if name not in models:
            folder = tmp_path_factory.mktemp(f"hf-{name}")
            models[name] = (build_hf(family, folder, **overrides), folder)
        model, folder = models[name]
        key = (name, ggml_type)
        if key not in files:
            path = folder.parent / f"{name}-{ggml_type}.gguf"
            convert_hf_checkpoint(folder, path, ggml_type)
            files[key] = path
        return model, files[key]

    return get


def hf_logits(model, ids) -> np.ndarray:
    import torch

    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].double().numpy()


# Where the converter folds gemma's query scale (gemma2: the q rows; gemma3: the q norm).
_FOLDED_QUERY = {False: ".attn_q.weight", True: ".attn_q_norm.weight"}


def query_fold(cfg) -> float:
    """√(head_dim / query_pre_attn_scalar): llama.cpp scales gemma's queries by 1/√head_dim
    (these small models are not the 27B exception), transformers by 1/√scalar."""
    return float(np.sqrt(cfg.head_dim / cfg.query_pre_attn_scalar))


def dequantized_reference(model, gguf_path: Path, family: str):
    """A copy of ``model`` holding the GGUF file's weights, decoded by gguf-py (independently of
    workbench), with the converter's transforms undone: transformers on the quantized weights."""
    import copy

    import torch
    from gguf import GGUFReader
    from gguf.quants import dequantize

    from workbench.quantized.convert_hf import _gguf_name

    reader = GGUFReader(str(gguf_path))
    stored = {
        t.name: dequantize(t.data, t.tensor_type).reshape(
            tuple(reversed([int(d) for d in t.shape]))
        )
        for t in reader.tensors
    }
    cfg = model.config
    ref = copy.deepcopy(model)
    state = {}
    for name, p in ref.named_parameters():
        arch = ARCHITECTURE.get(family, family)
        g = _gguf_name(name, arch)
        if g == "output.weight" and g not in stored:
            g = "token_embd.weight"
        w = np.array(stored[g], np.float32).reshape(p.shape)
        if arch == "llama" and ".attn_q." in g or arch == "llama" and ".attn_k." in g:
            heads = cfg.num_attention_heads if ".attn_q." in g else cfg.num_key_value_heads
            w = w.reshape(heads, w.shape[0] // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2)
            w = w.reshape(p.shape)
        if family.startswith("gemma") and g.endswith(_FOLDED_QUERY[family == "gemma3"]):
            w = w / query_fold(cfg)
        if family.startswith("gemma") and g.endswith("norm.weight"):
            w = w - 1.0
        state[name] = torch.from_numpy(np.ascontiguousarray(w))
    ref.load_state_dict(state, strict=False)
    return ref


def greedy_ids(lm, ids: list[int], n: int) -> list[int]:
    """``n`` greedy tokens after ``ids`` from ``lm``'s batch step, one cached step each."""
    tf = lm.transformer
    cache = tf.new_cache(1, len(ids) + n)
    logits = tf.forward([ids], [0], cache)[0]
    out = []
    for _ in range(n):
        out.append(int(np.argmax(logits)))
        logits = tf.forward([[out[-1]]], [0], cache)[0]
    return out
