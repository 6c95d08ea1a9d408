"""A tiny random Llama GGUF with a GPT-2 byte-level tokenizer, written with gguf-py.

Shared by the serving tests, the serving notebook and ``benchmarks/bench_serve.py``: the
weights are random (seeded), the tokenizer is GPT-2's 256-byte alphabet plus a few merges,
ChatML's control tokens and template, and ``<|endoftext|>`` as end of sequence, so any text
encodes and decodes.
"""

from __future__ import annotations

import os

import gguf
import numpy as np

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _byte_alphabet() -> list[str]:
    """GPT-2's printable stand-in for each byte (the byte-level BPE alphabet)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
    chars, extra = {}, 0
    for b in range(256):
        if b in keep:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return [chars[b] for b in range(256)]


def write_tiny_llama(
    path: str | os.PathLike[str],
    *,
    n_embd: int = 64,
    n_layer: int = 2,
    n_head: int = 4,
    n_head_kv: int = 2,
    n_ff: int = 128,
    context: int = 512,
    seed: int = 0,
    qtype: str = "F32",
) -> str:
    """Write the model to ``path`` and return the path. ``qtype``: F32 or Q8_0 weights."""
    rng = np.random.default_rng(seed)
    alphabet = _byte_alphabet()
    space = alphabet[ord(" ")]
    merges = [f"{space} t", "h e", f"{space} a", "i n", f"{space}t he", "e r", "o n", "r e"]
    special = ["<|im_start|>", "<|im_end|>", "<|endoftext|>"]
    tokens = [*alphabet, *("".join(m.split(" ")) for m in merges), *special]
    types = [1] * (len(tokens) - len(special)) + [3] * len(special)
    n_vocab = len(tokens)
    head_dim = n_embd // n_head

    w = gguf.GGUFWriter(os.fspath(path), "llama")
    w.add_name("tiny-random-llama")
    w.add_context_length(context)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_eos_token_id(n_vocab - 1)
    w.add_bos_token_id(n_vocab - 1)
    w.add_add_bos_token(False)
    w.add_chat_template(CHATML)

    def tensor(name: str, *shape: int, scale: float | None = None) -> None:
        # Shapes are (rows, cols) as numpy sees them; gguf-py writes them in ggml order.
        s = scale if scale is not None else 1.0 / np.sqrt(shape[-1])
        a = (rng.standard_normal(shape) * s).astype(np.float32)
        if qtype == "Q8_0" and a.ndim == 2 and a.shape[-1] % 32 == 0:
            q = gguf.quantize(a, gguf.GGMLQuantizationType.Q8_0)
            w.add_tensor(name, q, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            w.add_tensor(name, a)

    tensor("token_embd.weight", n_vocab, n_embd, scale=1.0)
    for i in range(n_layer):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", np.ones(n_embd, np.float32))
        w.add_tensor(p + "ffn_norm.weight", np.ones(n_embd, np.float32))
        tensor(p + "attn_q.weight", n_head * head_dim, n_embd)
        tensor(p + "attn_k.weight", n_head_kv * head_dim, n_embd)
        tensor(p + "attn_v.weight", n_head_kv * head_dim, n_embd)
        tensor(p + "attn_output.weight", n_embd, n_head * head_dim)
        tensor(p + "ffn_gate.weight", n_ff, n_embd)
        tensor(p + "ffn_up.weight", n_ff, n_embd)
        tensor(p + "ffn_down.weight", n_embd, n_ff)
    w.add_tensor("output_norm.weight", np.ones(n_embd, np.float32))
    head = (rng.standard_normal((n_vocab, n_embd)) * 2.0 / np.sqrt(n_embd)).astype(np.float32)
    # Zero logits for the control tokens: random text then (almost) never ends on its own,
    # so a request runs for its whole max_tokens (the batching tests count on it).
    head[-len(special) :] = 0.0
    w.add_tensor("output.weight", head)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return os.fspath(path)
