"""Hostile or broken files: clear errors, no hang, no giant allocation."""

from __future__ import annotations

import pytest

from workbench.models import llm
from workbench.quantized import read_gguf, write_gguf


def _rewrite(src, dst, **changes):
    """Copy GGUF ``src`` to ``dst`` with metadata keys changed (None deletes a key)."""
    f = read_gguf(src)
    md = dict(f.kv)
    for key, value in changes.items():
        key = key.replace("__", ".")
        if value is None:
            md.pop(key, None)
        else:
            md[key] = value
    write_gguf(dst, md, f.load())
    return dst


@pytest.fixture(scope="module")
def src(tiny):
    return tiny("qwen2", "Q8_0")[1]


def test_sandbox_escape_is_refused(src, tmp_path):
    evil = "{{ ''.__class__.__mro__[1].__subclasses__() }}"
    lm = llm.load(_rewrite(src, tmp_path / "t.gguf", tokenizer__chat_template=evil))
    with pytest.raises(llm.ChatTemplateError, match="unsafe"):
        lm.chat([{"role": "user", "content": "hi"}], 2)
    mutate = "{% set _ = messages.append({'role': 'x'}) %}{{ messages|length }}"
    with pytest.raises(llm.ChatTemplateError, match="unsafe"):
        llm.render_chat(mutate, [{"role": "user", "content": "hi"}])
    with pytest.raises(llm.ChatTemplateError, match="no chat template"):
        llm.render_chat(None, [])
    with pytest.raises(llm.ChatTemplateError, match="boom"):
        llm.render_chat("{{ raise_exception('boom') }}", [])


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"qwen2.attention.head_count_kv": 3}, "not a multiple"),
        ({"qwen2.attention.head_count": 0}, "positive"),
        ({"qwen2.block_count": 10**9}, "at most"),
        ({"qwen2.block_count": None}, "'qwen2.block_count' is missing"),
        ({"qwen2.embedding_length": "x"}, "integer"),
        ({"qwen2.rope.dimension_count": 7}, "even"),
        ({"general.architecture": "mamba9"}, "'mamba9' is not supported"),
        ({"qwen2.rope.scaling.type": "ntk"}, "not supported"),
        ({"qwen2.block_count": 3}, "layer 2"),
    ],
)
def test_bad_hyper_parameters(src, tmp_path, changes, match):
    path = _rewrite(
        src, tmp_path / "bad.gguf", **{k.replace(".", "__"): v for k, v in changes.items()}
    )
    with pytest.raises(llm.LlmFileError, match=match):
        llm.load(path)


def test_huge_context_length_allocates_nothing_huge(src, tmp_path):
    lm = llm.load(_rewrite(src, tmp_path / "ctx.gguf", qwen2__context_length=2**40))
    assert lm.config.context_length == 2**40
    assert lm.cache.max_len == 4096 and lm.cache.nbytes < 2**24
    assert lm.generate("Hello", 3) is not None


@pytest.mark.parametrize(
    ("key", "cut", "match"),
    [("tokenizer.ggml.token_type", 5, "one per token"), ("tokenizer.ggml.tokens", None, "missing")],
)
def test_truncated_tokenizer_arrays(src, tmp_path, key, cut, match):
    md = read_gguf(src).metadata
    value = None if cut is None else md[key][:cut]
    path = _rewrite(src, tmp_path / "tok.gguf", **{key.replace(".", "__"): value})
    with pytest.raises(llm.LlmFileError, match=match):
        llm.load(path)


def test_bad_special_token_id(src, tmp_path):
    path = _rewrite(src, tmp_path / "eos.gguf", tokenizer__ggml__eos_token_id=10**6)
    with pytest.raises(llm.LlmFileError, match="eos_token_id"):
        llm.load(path)
