"""The engine protocol the scheduler drives, and its adapter for ``workbench.models.llm``.

An engine owns ``n_slots`` sequences of up to ``max_len`` positions. One call of
``forward(tokens_per_seq, slots)`` appends each list of ids to its slot (a new request's
prompt, or the one token an active sequence sampled last step) and returns the logits of each
sequence's last position, ``(n_seq, n_vocab)``; ``free(slot)`` forgets a slot. Text goes
through ``encode`` / ``chat_ids`` / ``decoder`` and generation ends at ``stop_ids``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np


class TextDecoder(Protocol):
    def push(self, token_id: int) -> str: ...
    def flush(self) -> str: ...


class Engine(Protocol):
    model_id: str
    n_slots: int
    max_len: int
    n_vocab: int
    stop_ids: set[int]

    def encode(self, text: str) -> list[int]: ...
    def chat_ids(self, messages: list[dict[str, Any]]) -> list[int]: ...
    def decoder(self, prompt_ids: list[int]) -> TextDecoder: ...
    def forward(
        self, tokens_per_seq: Sequence[Sequence[int]], slots: Sequence[int]
    ) -> np.ndarray: ...
    def free(self, slot: int) -> None: ...


class LlmEngine:
    """A :class:`workbench.models.llm.LLM` with a :class:`KVCache` of ``n_slots`` slots."""

    def __init__(self, model: Any, n_slots: int = 8, max_len: int | None = None,
                 model_id: str | None = None):  # fmt: skip
        from ..models.llm import StreamDecoder

        self.model = model
        self.model_id = model_id or os.path.splitext(os.path.basename(model.path))[0]
        self.cache = model.transformer.new_cache(n_slots, max_len)
        self.n_slots = n_slots
        self.max_len = self.cache.max_len
        self.n_vocab = model.config.n_vocab
        self.stop_ids = set(model.tokenizer.stop_ids)
        self._decoder = StreamDecoder

    def encode(self, text: str) -> list[int]:
        return self.model.tokenizer.encode(text)

    def chat_ids(self, messages: list[dict[str, Any]]) -> list[int]:
        # Same ids as LLM.chat_stream: the template's text, BOS added when it did not write it.
        tok = self.model.tokenizer
        ids = tok.encode(self.model.apply_chat_template(messages), add_special=False)
        if tok.add_bos and (not ids or ids[0] != tok.bos_id):
            ids = [tok.bos_id, *ids]
        return ids

    def decoder(self, prompt_ids: list[int]) -> TextDecoder:
        return self._decoder(self.model.tokenizer, prompt_ids)

    def forward(self, tokens_per_seq: Sequence[Sequence[int]], slots: Sequence[int]) -> np.ndarray:
        return self.model.transformer.forward(tokens_per_seq, slots, self.cache)

    def free(self, slot: int) -> None:
        self.cache.reset(slot)
