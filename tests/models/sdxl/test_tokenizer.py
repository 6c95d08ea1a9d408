"""The CLIP tokenizer against transformers' ``CLIPTokenizer`` (ids in
tests/fixtures/sdxl/clip.safetensors, from tests/fixtures/sdxl_goldens/clip.py), for both
tokenizer folders of the tiny SDXL pipeline."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from workbench.io import load_safetensors
from workbench.models.stable_diffusion.tokenizer import ClipTokenizer

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sdxl"
TINY = FIXTURES / "tiny"
FOLDERS = ("tokenizer", "tokenizer_2")
BOS, EOS = 567, 568  # the tiny vocab puts the specials last
PAD = {"tokenizer": EOS, "tokenizer_2": 33}  # "<|endoftext|>" and "!"


@pytest.fixture(scope="module")
def golden() -> tuple[dict[str, np.ndarray], list[str]]:
    tensors, meta = load_safetensors(FIXTURES / "clip.safetensors", with_metadata=True)
    ids = {
        k: v.numpy()
        for k, v in tensors.items()
        if k.endswith("tokenizer.ids") or k.endswith("tokenizer_2.ids")
    }
    return ids, json.loads(meta["tokenizer_prompts"])


@pytest.fixture(scope="module", params=FOLDERS)
def folder(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def tok(folder) -> ClipTokenizer:
    return ClipTokenizer.from_dir(TINY / folder)


def test_matches_transformers(golden, folder, tok):
    ids, prompts = golden
    ref = ids[f"{folder}.ids"]
    got = tok(prompts)
    assert got.dtype == np.int64 and got.shape == ref.shape == (len(prompts), 77)
    for prompt, g, r in zip(prompts, got, ref, strict=True):
        np.testing.assert_array_equal(g, r, err_msg=repr(prompt))


def test_one_prompt_at_a_time_matches_the_batch(golden, folder, tok):
    ids, prompts = golden
    for i, prompt in enumerate(prompts):
        np.testing.assert_array_equal(tok(prompt)[0], ids[f"{folder}.ids"][i])


def test_special_ids(folder, tok):
    assert (tok.bos_id, tok.eos_id, tok.pad_id) == (BOS, EOS, PAD[folder])
    empty = tok("")
    assert empty.shape == (1, 77)
    np.testing.assert_array_equal(empty[0, :3], [BOS, EOS, PAD[folder]])
    assert (empty[0, 2:] == PAD[folder]).all()


@pytest.mark.parametrize("max_length", [2, 5, 16])
def test_truncation_keeps_eos(tok, max_length):
    out = tok(["a photo of the cat riding a horse on mars " * 3, ""], max_length=max_length)
    assert out.shape == (2, max_length)
    assert out[0, 0] == BOS and out[0, -1] == EOS
    assert out[1, 0] == BOS and out[1, 1] == EOS


def test_words_and_case(tok):
    """Whole words of the tiny vocab are one token each; case and spacing do not matter."""
    words = tok.tokenize("astronaut riding horse")
    assert len(words) == 3 and words == tok.tokenize("  ASTRONAUT\t Riding\nhorse ")
    assert tok.tokenize("") == []


def test_pad_token_splits_in_tokenizer_2():
    """SDXL's tokenizer_2 pads with "!": as a special token it is always its own id."""
    one = ClipTokenizer.from_dir(TINY / "tokenizer").tokenize("cat!!")
    two = ClipTokenizer.from_dir(TINY / "tokenizer_2").tokenize("cat!!")
    assert two[-2:] == [33, 33] and one[-1] != 33


def test_special_tokens_from_added_token_dicts(tmp_path):
    """Real checkpoints may write the special tokens as AddedToken dicts, or only in
    special_tokens_map.json."""
    for name in ("vocab.json", "merges.txt"):
        shutil.copy(TINY / "tokenizer_2" / name, tmp_path / name)
    (tmp_path / "special_tokens_map.json").write_text(
        json.dumps({"pad_token": {"content": "!", "lstrip": False}, "eos_token": "<|endoftext|>"})
    )
    assert ClipTokenizer.from_dir(tmp_path).pad_id == 33
    (tmp_path / "tokenizer_config.json").write_text(
        json.dumps({"pad_token": {"__type": "AddedToken", "content": "<|endoftext|>"}})
    )
    assert ClipTokenizer.from_dir(tmp_path).pad_id == EOS  # tokenizer_config.json wins


def test_errors(tmp_path, tok):
    with pytest.raises(FileNotFoundError, match="no vocab.json in"):
        ClipTokenizer.from_dir(tmp_path)
    with pytest.raises(ValueError, match="max_length must be >= 2.*found 1"):
        tok("a cat", max_length=1)
    with pytest.raises(
        TypeError, match="texts must be a str or a list of str, found list of int, str"
    ):
        tok(["a cat", 3])
    with pytest.raises(TypeError, match="found int"):
        tok(3)
    with pytest.raises(ValueError, match="pad token '#' is not in the vocab"):
        ClipTokenizer({"<|startoftext|>": 0, "<|endoftext|>": 1}, [], pad_token="#")
    shutil.copy(TINY / "tokenizer" / "vocab.json", tmp_path / "vocab.json")
    (tmp_path / "merges.txt").write_text("#version: 0.2\na b c\n")
    with pytest.raises(ValueError, match="line 2 is not a merge"):
        ClipTokenizer.from_dir(tmp_path)
