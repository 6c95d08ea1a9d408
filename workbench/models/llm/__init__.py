"""Quantized language models from GGUF files: Llama (Mistral, TinyLlama, SmolLM), Qwen 2/3,
Gemma 2/3 and Phi-3.

::

    from workbench.models import llm
    model = llm.load("model.gguf")
    ids = model.tokenizer.encode("The capital of France is")
    logits = model.logits(ids)                                  # (len(ids), vocab) f32
    out = model.generate("The capital of France is", max_new_tokens=32)
    for piece in model.stream(prompt, max_new_tokens=256, temperature=0.7, top_p=0.9, seed=0): ...
    reply = model.chat([{"role": "user", "content": "Hi"}], max_new_tokens=64)

Batch step (for servers that batch several requests): a :class:`KVCache` holds ``n_slots``
sequences; ``Transformer.forward(tokens_per_seq, slots, cache)`` appends each list of ids to
its slot, runs them all in one pass (projections over the packed tokens, attention per slot
with its own positions) and returns each sequence's last-position logits ``(n_seq, vocab)``::

    tf = model.transformer
    cache = tf.new_cache(n_slots=8, max_len=4096)
    logits = tf.forward([prompt_a, prompt_b], slots=[0, 1], cache=cache)
    logits = tf.forward([[next_a], [next_b]], slots=[0, 1], cache=cache)
    cache.reset(1)                       # slot 1 is free for a new request

``cache.tokens(slot)``, ``truncate(slot, n)`` and ``reuse_prefix(slot, ids)`` manage what a
slot holds. The file's metadata is read by :mod:`.config`, the tokenizer by :mod:`.tokenizer`.
"""

from .cache import CacheFullError, KVCache
from .chat_template import ChatTemplateError, render_chat
from .config import FAMILIES, LlmConfig, LlmFileError
from .llm import LLM, GenerationStats, load
from .model import Transformer
from .sampling import Sampler, SamplingParams
from .tokenizer import GgufTokenizer, StreamDecoder

__all__ = [
    "FAMILIES",
    "LLM",
    "CacheFullError",
    "ChatTemplateError",
    "GenerationStats",
    "GgufTokenizer",
    "KVCache",
    "LlmConfig",
    "LlmFileError",
    "Sampler",
    "SamplingParams",
    "StreamDecoder",
    "Transformer",
    "load",
    "render_chat",
]
