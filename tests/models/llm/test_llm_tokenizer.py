"""GGUF tokenizers against the reference implementations (sentencepiece, tokenizers) and
against transformers' own GGUF tokenizer conversion, on a few hundred varied strings."""

from __future__ import annotations

import random

import pytest
from conftest import SPECIALS, corpus, train_bpe

from workbench.models import llm
from workbench.quantized import read_gguf, write_gguf
from workbench.quantized.convert_hf import tokenizer_metadata

PIECES = [
    "hello",
    "Hello",
    " world",
    "  ",
    "   ",
    "\t",
    "\t\t",
    "\n",
    "\n\n",
    " \n ",
    "café",
    "naïve",
    "résumé",
    "Ünïcödé",
    "東京",
    "你好，世界",
    "日本語のテキスト",
    "🙂",
    "🚀🚀",
    "👩‍👩‍👧",
    "123",
    "4567",
    "3.14159",
    "2024-01-01",
    "don't",
    "I'll",
    "x=y+1;",
    "<tag>",
    "##",
    "Привет",
    "مرحبا",
    "a",
    "THE",
    " the",
    "model",
    "tokenizer",
    "—",
    "…",
    "$%&",
    "'s",
    "e\u0301",
]


def strings(specials: list[str], n: int = 300) -> list[str]:
    rng = random.Random(0)
    out = ["", " ", "a", " leading space", "trailing space ", "\ttab first", "\n"]
    while len(out) < n:
        parts = [
            rng.choice(PIECES + specials * (1 if specials else 0)) for _ in range(rng.randint(1, 8))
        ]
        out.append(rng.choice(["", " "]).join(parts))
    return out


@pytest.fixture(scope="module")
def spm_folder(tmp_path_factory):
    import sentencepiece as spm

    folder = tmp_path_factory.mktemp("spm")
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(corpus()),
        model_prefix=str(folder / "tokenizer"),
        vocab_size=400,
        model_type="bpe",
        byte_fallback=True,
        character_coverage=0.995,
        normalization_rule_name="identity",
        remove_extra_whitespaces=False,
        split_digits=True,
        bos_id=1,
        eos_id=2,
        unk_id=0,
        minloglevel=2,
    )
    (folder / "tokenizer_config.json").write_text('{"bos_token": "<s>", "eos_token": "</s>"}')
    return folder


@pytest.fixture(scope="module")
def bpe_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bpe")
    train_bpe(folder)
    return folder


def _gguf(folder, arch: str):
    """A metadata-only GGUF file of the folder's tokenizer (what the converter writes)."""
    md = {"general.architecture": arch, **tokenizer_metadata(folder, {})}
    (folder / "gguf").mkdir(exist_ok=True)  # alone: transformers must read only the GGUF
    path = folder / "gguf" / "tok.gguf"
    write_gguf(path, md, {})
    return read_gguf(path).metadata, path


def test_sentencepiece_vocabulary_matches_sentencepiece(spm_folder):
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(spm_folder / "tokenizer.model"))
    md, _ = _gguf(spm_folder, "llama")
    tok = llm.GgufTokenizer(md)
    assert tok.kind == "llama" and tok.add_bos and tok.bos_id == 1
    texts = strings([])
    mismatches = [s for s in texts if tok.encode(s) != [1, *sp.encode(s)]]
    assert not mismatches, mismatches[:5]
    for s in texts:
        ids = sp.encode(s)
        assert tok.decode(ids) == sp.decode(ids)
    byte_ids = tok.encode("ﬀ\U0001f9ea", add_special=False)  # unseen: byte fallback
    assert all(tok.tokens[i].startswith("<0x") for i in byte_ids[1:])


def test_sentencepiece_matches_transformers_gguf_conversion(spm_folder):
    """transformers' conversion agrees except where it departs from SentencePiece and
    llama.cpp: its Metaspace adds no prefix to text starting with a space, and none after a
    special token in the text (llama.cpp adds one after every special token)."""
    from transformers import AutoTokenizer

    md, path = _gguf(spm_folder, "llama")
    tok = llm.GgufTokenizer(md)
    ref = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    texts = [s for s in strings([]) if not s.startswith(" ")]
    assert len(texts) > 200
    mismatches = [s for s in texts if tok.encode(s) != ref.encode(s)]
    assert not mismatches, mismatches[:5]
    ids = tok.encode("a</s>b<s>")
    assert ids[0] == 1 and ids[2] == 2 and ids[-1] == 1
    assert tok.tokens[ids[3]].startswith("▁") and ref.encode("a</s>b")[2] == 2


def test_byte_level_bpe_matches_tokenizers_and_transformers(bpe_folder):
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer

    md, path = _gguf(bpe_folder, "qwen2")
    assert md["tokenizer.ggml.pre"] == "qwen2"
    tok = llm.GgufTokenizer(md)
    assert not tok.add_bos
    reference = Tokenizer.from_file(str(bpe_folder / "tokenizer.json"))
    hf = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    texts = strings(SPECIALS)
    for s in texts:
        ids = tok.encode(s)
        assert ids == reference.encode(s).ids, s
        assert ids == hf.encode(s), s
        assert tok.decode(ids) == s  # byte-level BPE is lossless
    im_end = SPECIALS.index("<|im_end|>") - len(SPECIALS) + len(tok)
    assert tok.encode("a<|im_end|>b")[1] == im_end
    assert im_end not in tok.encode("a<|im_end|>b", parse_special=False)
    assert im_end in tok.stop_ids


@pytest.mark.parametrize("kind", ["spm", "bpe"])
def test_stream_decoder_never_splits_a_character(kind, spm_folder, bpe_folder):
    md, _ = _gguf(spm_folder if kind == "spm" else bpe_folder, "llama")
    tok = llm.GgufTokenizer(md)
    for s in strings([], 60):
        ids = tok.encode(s, add_special=False)
        dec = llm.StreamDecoder(tok)
        pieces = [dec.push(i) for i in ids] + [dec.flush()]
        assert all("\ufffd" not in p for p in pieces)
        assert "".join(pieces) == tok.decode(ids)


def test_pre_tokenizer_names_follow_the_split(bpe_folder):
    import json

    from workbench.quantized.convert_hf import _pre_name

    tj = json.loads((bpe_folder / "tokenizer.json").read_text())
    assert _pre_name(tj) == "qwen2"
    tj["pre_tokenizer"] = {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True}
    assert _pre_name(tj) == "gpt-2"
    md = {
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.pre": "no-such-split",
        "tokenizer.ggml.tokens": ["a"],
        "tokenizer.ggml.merges": [],
    }
    with pytest.raises(llm.LlmFileError, match="no-such-split"):
        llm.GgufTokenizer(md)
