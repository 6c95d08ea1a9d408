"""CLIP's byte-level BPE tokenizer, built with the ``tokenizers`` package from a checkpoint's
``vocab.json`` + ``merges.txt`` (the SDXL repos ship no ``tokenizer.json``).

Text -> ids, as transformers' ``CLIPTokenizer`` with ``padding="max_length"``,
``truncation=True``:

1. normalise: NFC, every run of whitespace -> one space, lower case;
2. split out the special tokens (bos, eos, and the pad token, which is ``!`` in SDXL's
   ``tokenizer_2``, so a ``!`` in a prompt is always its own token);
3. pre-tokenise with CLIP's pattern (contractions, letter runs, single digits, runs of other
   non-space characters), then map each byte to its printable stand-in;
4. BPE each word, its last symbol carrying the end-of-word suffix ``</w>``;
5. ``[bos] + ids[: max_length - 2] + [eos]``, padded with the pad id to ``max_length``.

    tok = ClipTokenizer.from_dir("stable-diffusion-xl-base-1.0/tokenizer_2")
    ids = tok(["a photo of a cat", ""])          # (2, 77) int64
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
from tokenizers import AddedToken, Regex, Tokenizer, normalizers, pre_tokenizers
from tokenizers.models import BPE

BOS = "<|startoftext|>"
EOS = "<|endoftext|>"
END_OF_WORD = "</w>"
MAX_LENGTH = 77
# CLIP's word pattern: special tokens, contractions, letter runs, one digit, other symbol runs.
WORD_PATTERN = (
    r"<\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]"
    r"|[^\s\p{L}\p{N}]+"
)


def _token_text(value) -> str | None:
    """A special token as written in ``tokenizer_config.json``: a string or an AddedToken
    dict (``{"content": "!", ...}``)."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def _read_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def _read_merges(path: Path) -> list[tuple[str, str]]:
    """Pairs from ``merges.txt`` (one ``left right`` per line after a ``#version`` header)."""
    merges = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        if not line.strip() or (n == 0 and line.startswith("#version")):
            continue
        parts = line.split()
        if len(parts) != 2:
            raise ValueError(f"{path}: line {n + 1} is not a merge 'left right': {line!r}")
        merges.append((parts[0], parts[1]))
    return merges


class ClipTokenizer:
    """CLIP BPE tokenizer: ``tokenizer(texts, max_length=77) -> (B, max_length) int64``.

    ``vocab``: token -> id; ``merges``: BPE merges in priority order; ``pad_token`` is what
    fills the rows after the eos (SDXL: ``<|endoftext|>`` for ``tokenizer``, ``!`` for
    ``tokenizer_2``).
    """

    def __init__(
        self,
        vocab: dict[str, int],
        merges: list[tuple[str, str]],
        bos_token: str = BOS,
        eos_token: str = EOS,
        pad_token: str = EOS,
        unk_token: str = EOS,
    ):
        for what, token in (("bos", bos_token), ("eos", eos_token), ("pad", pad_token)):
            if token not in vocab:
                raise ValueError(f"ClipTokenizer: the {what} token {token!r} is not in the vocab")
        self.bos_token, self.eos_token, self.pad_token = bos_token, eos_token, pad_token
        self.bos_id, self.eos_id, self.pad_id = vocab[bos_token], vocab[eos_token], vocab[pad_token]
        self.vocab_size = len(vocab)
        model = BPE(
            vocab=vocab,
            merges=merges,
            unk_token=unk_token,
            continuing_subword_prefix="",
            end_of_word_suffix=END_OF_WORD,
            fuse_unk=False,
        )
        tok = Tokenizer(model)
        tok.normalizer = normalizers.Sequence(
            [normalizers.NFC(), normalizers.Replace(Regex(r"\s+"), " "), normalizers.Lowercase()]
        )
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(WORD_PATTERN), behavior="removed", invert=True),
                pre_tokenizers.ByteLevel(add_prefix_space=False),
            ]
        )
        # Matched in the raw text before normalisation, as transformers does.
        specials = dict.fromkeys([bos_token, eos_token, pad_token, unk_token])
        tok.add_special_tokens([AddedToken(t, normalized=False, special=True) for t in specials])
        self._tokenizer = tok

    @classmethod
    def from_dir(cls, path: str | os.PathLike) -> ClipTokenizer:
        """From a tokenizer folder: ``vocab.json``, ``merges.txt`` and the special tokens of
        ``tokenizer_config.json`` (or ``special_tokens_map.json``; CLIP's defaults else)."""
        path = Path(os.path.expanduser(str(path)))
        for name in ("vocab.json", "merges.txt"):
            if not (path / name).is_file():
                raise FileNotFoundError(f"ClipTokenizer: no {name} in {path}")
        vocab = _read_json(path / "vocab.json")
        specials = {
            **_read_json(path / "special_tokens_map.json"),
            **_read_json(path / "tokenizer_config.json"),
        }
        tokens = {
            key: _token_text(specials.get(f"{key}_token")) or default
            for key, default in (("bos", BOS), ("eos", EOS), ("pad", EOS), ("unk", EOS))
        }
        return cls(
            vocab,
            _read_merges(path / "merges.txt"),
            bos_token=tokens["bos"],
            eos_token=tokens["eos"],
            pad_token=tokens["pad"],
            unk_token=tokens["unk"],
        )

    def tokenize(self, text: str) -> list[int]:
        """The BPE ids of ``text`` without bos/eos, padding or truncation."""
        return self._tokenizer.encode(text, add_special_tokens=False).ids

    def __call__(self, texts: str | list[str], max_length: int = MAX_LENGTH) -> np.ndarray:
        """(B, max_length) int64: bos, the ids (truncated to max_length - 2), eos, pad ids.

        A single string gives B = 1."""
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, (list, tuple)) or not all(isinstance(t, str) for t in texts):
            inner = ""
            if isinstance(texts, (list, tuple)):
                inner = f" of {', '.join(sorted({type(t).__name__ for t in texts}))}"
            raise TypeError(
                "ClipTokenizer: texts must be a str or a list of str, found "
                f"{type(texts).__name__}{inner}"
            )
        if max_length < 2:
            raise ValueError(
                f"ClipTokenizer: max_length must be >= 2 (bos + eos), found {max_length}"
            )
        out = np.full((len(texts), max_length), self.pad_id, dtype=np.int64)
        out[:, 0] = self.bos_id
        encodings = self._tokenizer.encode_batch(list(texts), add_special_tokens=False)
        for row, enc in zip(out, encodings, strict=True):
            ids = enc.ids[: max_length - 2]
            row[1 : 1 + len(ids)] = ids
            row[1 + len(ids)] = self.eos_id
        return out

    def __repr__(self) -> str:
        return (
            f"ClipTokenizer(vocab={self.vocab_size}, bos={self.bos_id}, eos={self.eos_id}, "
            f"pad={self.pad_id} {self.pad_token!r})"
        )
