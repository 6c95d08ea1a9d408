"""Tokenizers from a GGUF file's metadata, run by the ``tokenizers`` package.

``tokenizer.ggml.model`` picks the kind:

- ``llama`` (SentencePiece BPE): ``tokens``, ``scores``, ``token_type``. Merges are rebuilt
  from the vocabulary (each way of cutting a token into two tokens is a merge, ranked by the
  merged token's score), so BPE reproduces SentencePiece's highest-score-first merging. Spaces
  become ``▁``, one is prepended to the text when ``add_space_prefix`` (default true), and
  characters outside the vocabulary fall back to ``<0xNN>`` byte tokens.
- ``gpt2`` (byte-level BPE): ``tokens`` in GPT-2's byte alphabet, ``merges`` ("a b"), and the
  pre-tokenizer regex that ``tokenizer.ggml.pre`` names (:data:`PRE_TOKENIZERS`).

Tokens of type 3 (control, e.g. ``<|im_end|>``) and 4 (user-defined) are matched whole in the
text. ``encode`` adds BOS / EOS as ``add_bos_token`` / ``add_eos_token`` say.
:class:`StreamDecoder` turns ids into text as they come, never cutting a UTF-8 character.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ...quantized.convert_hf import LLAMA3_SPLIT, PRE_TOKENIZERS
from .config import LlmFileError

CONTROL, USER_DEFINED, UNUSED, BYTE = 3, 4, 5, 6


def _array(md: dict[str, Any], key: str, n: int | None = None) -> list:
    if key not in md:
        raise LlmFileError(f"GGUF metadata key {key!r} is missing (the tokenizer needs it)")
    value = md[key]
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
        raise LlmFileError(
            f"GGUF metadata {key!r} should be an array, found {type(value).__name__}"
        )
    if n is not None and len(value) != n:
        raise LlmFileError(
            f"GGUF metadata {key!r} has {len(value)} entries, expected one per token ({n})"
        )
    return list(value.tolist() if isinstance(value, np.ndarray) else value)


def _spm_merges(tokens: list[str], scores: list[float], types: list[int]) -> list[tuple[str, str]]:
    vocab = {t: i for i, t in enumerate(tokens) if types[i] not in (CONTROL, BYTE, UNUSED)}
    ranked = []
    for token, i in vocab.items():
        for cut in range(1, len(token)):
            left, right = token[:cut], token[cut:]
            if left in vocab and right in vocab:
                ranked.append((-scores[i], vocab[left], vocab[right], left, right))
    ranked.sort()
    return [(left, right) for *_, left, right in ranked]


class GgufTokenizer:
    """``encode(text) -> list[int]``, ``decode(ids) -> str``; built from GGUF metadata."""

    def __init__(self, md: dict[str, Any]):
        from tokenizers import (
            AddedToken,
            Regex,
            Tokenizer,
            decoders,
            models,
            normalizers,
            pre_tokenizers,
        )

        kind = md.get("tokenizer.ggml.model")
        if kind is None:
            raise LlmFileError("GGUF metadata key 'tokenizer.ggml.model' is missing")
        tokens = [str(t) for t in _array(md, "tokenizer.ggml.tokens")]
        n = len(tokens)
        if n == 0:
            raise LlmFileError("GGUF metadata 'tokenizer.ggml.tokens' is empty")
        types = (
            [int(t) for t in _array(md, "tokenizer.ggml.token_type", n)]
            if ("tokenizer.ggml.token_type" in md)
            else [1] * n
        )
        self.kind = kind
        self.tokens = tokens
        self.token_types = types
        self.pre = str(md.get("tokenizer.ggml.pre", "default"))
        if kind == "llama":
            scores = [float(s) for s in _array(md, "tokenizer.ggml.scores", n)]
            unk = int(md.get("tokenizer.ggml.unknown_token_id", 0))
            model = models.BPE(
                {t: i for i, t in enumerate(tokens)},
                _spm_merges(tokens, scores, types),
                unk_token=tokens[unk] if 0 <= unk < n else None,
                fuse_unk=True,
                byte_fallback=True,
            )
            self.space_prefix = bool(md.get("tokenizer.ggml.add_space_prefix", True))
            tok = Tokenizer(model)
            # A normalizer, not Metaspace: Metaspace skips the prefix when the text already
            # starts with a space, which SentencePiece and llama.cpp do not.
            prefix = [normalizers.Prepend("▁")] if self.space_prefix else []
            tok.normalizer = normalizers.Sequence([*prefix, normalizers.Replace(" ", "▁")])
            steps = [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()]
            if self.space_prefix:
                steps.append(decoders.Strip(" ", 1, 0))
            tok.decoder = decoders.Sequence(steps)
            default_bos = True
        elif kind == "gpt2":
            merges = _array(md, "tokenizer.ggml.merges")
            pairs = []
            for m in merges:
                parts = str(m).split(" ")
                if len(parts) != 2:
                    raise LlmFileError(f"GGUF tokenizer merge {m!r} is not two tokens")
                pairs.append((parts[0], parts[1]))
            regexes = PRE_TOKENIZERS.get(self.pre)
            if regexes is None:
                raise LlmFileError(
                    f"GGUF tokenizer.ggml.pre = {self.pre!r} is not supported; expected one of "
                    + ", ".join(PRE_TOKENIZERS)
                )
            model = models.BPE(
                {t: i for i, t in enumerate(tokens)},
                pairs,
                ignore_merges=regexes == (LLAMA3_SPLIT,),
            )
            tok = Tokenizer(model)
            splits = [pre_tokenizers.Split(Regex(r), behavior="isolated") for r in regexes]
            tok.pre_tokenizer = pre_tokenizers.Sequence(
                [*splits, pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
            )
            tok.decoder = decoders.ByteLevel()
            default_bos = False
        else:
            raise LlmFileError(
                f"GGUF tokenizer.ggml.model = {kind!r} is not supported (expected llama or gpt2)"
            )
        added = [
            AddedToken(t, special=types[i] == CONTROL, normalized=False)
            for i, t in enumerate(tokens)
            if types[i] in (CONTROL, USER_DEFINED) and t
        ]
        tok.add_tokens(added)
        self._tok = tok
        self.bos_id = self._special(md, "bos")
        self.eos_id = self._special(md, "eos")
        self.eot_id = self._special(md, "eot")
        self.eom_id = self._special(md, "eom")
        self.pad_id = self._special(md, "padding")
        self.add_bos = bool(md.get("tokenizer.ggml.add_bos_token", default_bos)) and (
            self.bos_id is not None
        )
        self.add_eos = bool(md.get("tokenizer.ggml.add_eos_token", False)) and (
            self.eos_id is not None
        )
        # Control tokens that end a turn (<|im_end|>, <end_of_turn>, <|eot_id|>, ...).
        self.stop_ids = {i for i in (self.eos_id, self.eot_id, self.eom_id) if i is not None}
        for i, t in enumerate(tokens):
            if types[i] == CONTROL and t in _END_OF_TURN:
                self.stop_ids.add(i)

    def _special(self, md: dict[str, Any], name: str) -> int | None:
        value = md.get(f"tokenizer.ggml.{name}_token_id")
        if value is None:
            return None
        value = int(value)
        if not 0 <= value < len(self.tokens):
            raise LlmFileError(
                f"GGUF metadata 'tokenizer.ggml.{name}_token_id' = {value} is outside the "
                f"vocabulary of {len(self.tokens)} tokens"
            )
        return value

    @property
    def vocab_size(self) -> int:
        return len(self.tokens)

    @property
    def bos_token(self) -> str:
        return "" if self.bos_id is None else self.tokens[self.bos_id]

    @property
    def eos_token(self) -> str:
        return "" if self.eos_id is None else self.tokens[self.eos_id]

    def encode(self, text: str, add_special: bool = True, parse_special: bool = True) -> list[int]:
        """Token ids of ``text``; ``add_special`` adds BOS/EOS as the file says,
        ``parse_special`` turns control tokens written in the text into their ids."""
        self._tok.encode_special_tokens = not parse_special
        ids = self._tok.encode(text, add_special_tokens=False).ids
        if add_special and self.add_bos:
            ids = [self.bos_id, *ids]
        if add_special and self.add_eos:
            ids = [*ids, self.eos_id]
        return ids

    def decode(self, ids: Iterable[int], skip_special: bool = False) -> str:
        return self._tok.decode([int(i) for i in ids], skip_special_tokens=skip_special)

    def __len__(self) -> int:
        return len(self.tokens)

    def __repr__(self) -> str:
        return f"GgufTokenizer({self.kind}, pre={self.pre!r}, {len(self.tokens)} tokens)"


_END_OF_TURN = {
    "<|im_end|>",
    "<end_of_turn>",
    "<|eot_id|>",
    "<|end|>",
    "<|endoftext|>",
    "<|eom_id|>",
}


class StreamDecoder:
    """Incremental detokenization: ``push(id)`` returns the new text (maybe ""), holding back
    bytes of a character not yet complete; ``flush()`` returns what is left. Control tokens
    are not shown unless ``skip_special`` is False."""

    def __init__(
        self, tokenizer: GgufTokenizer, context: list[int] | None = None, skip_special: bool = True
    ):
        self.tok = tokenizer
        self.skip = skip_special
        self.ids = list(context or [])[-4:]  # a little left context keeps spacing right
        self.prefix = 0
        self.read = len(self.ids)

    def push(self, token_id: int) -> str:
        self.ids.append(int(token_id))
        before = self.tok.decode(self.ids[self.prefix : self.read], self.skip)
        text = self.tok.decode(self.ids[self.prefix :], self.skip)
        if len(text) > len(before) and not text.endswith("\ufffd"):
            new = text[len(before) :]
            self.prefix, self.read = self.read, len(self.ids)
            return new
        return ""

    def flush(self) -> str:
        before = self.tok.decode(self.ids[self.prefix : self.read], self.skip)
        text = self.tok.decode(self.ids[self.prefix :], self.skip)
        self.prefix = self.read = len(self.ids)
        return text[len(before) :]
