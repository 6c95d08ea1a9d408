"""Sampling, stopping, streaming, chat templates and prefix reuse."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import CHATML

from workbench.errors import WorkbenchError
from workbench.models import llm
from workbench.models.llm import Sampler, SamplingParams


@pytest.fixture(scope="module")
def lm(tiny):
    return llm.load(tiny("qwen2", "Q8_0")[1])


def _softmax(z):
    e = np.exp(z - z.max())
    return e / e.sum()


def test_sampler_filters_match_their_definitions():
    rng = np.random.default_rng(1)
    z = rng.normal(size=50).astype(np.float32) * 3
    assert Sampler(SamplingParams())(z, []) == int(np.argmax(z))
    assert Sampler(SamplingParams(temperature=1.0, top_k=1, seed=3))(z, []) == int(np.argmax(z))
    # Draws stay inside the nucleus / the min-p set, and cover them.
    p = _softmax(z.astype(np.float64))
    order = np.argsort(-p)
    nucleus = set(order[: int(np.searchsorted(np.cumsum(p[order]), 0.8)) + 1].tolist())
    s = Sampler(SamplingParams(temperature=1.0, top_p=0.8, seed=0))
    draws = {s(z, []) for _ in range(400)}
    assert draws == nucleus
    s = Sampler(SamplingParams(temperature=1.0, min_p=0.2, seed=0))
    assert {s(z, []) for _ in range(400)} == set(np.nonzero(p >= 0.2 * p.max())[0].tolist())
    # Same seed, same draws; another seed, other draws.
    s1, s2, s3 = (Sampler(SamplingParams(temperature=1.5, seed=seed)) for seed in (7, 7, 8))
    draws = [s1(z, []) for _ in range(30)]
    assert draws == [s2(z, []) for _ in range(30)] != [s3(z, []) for _ in range(30)]


def test_penalties():
    z = np.array([2.0, -1.0, 0.5, 3.0], np.float32)
    s = Sampler(
        SamplingParams(repetition_penalty=2.0, frequency_penalty=0.5, presence_penalty=0.25)
    )
    out = s.penalize(z, [0, 1, 1])
    np.testing.assert_allclose(out, [2.0 / 2 - 0.5 - 0.25, -1.0 * 2 - 1.0 - 0.25, 0.5, 3.0])
    with pytest.raises(WorkbenchError, match="top_p"):
        Sampler(SamplingParams(top_p=0.0))


def test_stream_equals_generate_and_stops(lm):
    prompt = "Hello world"
    full = lm.generate(prompt, 24)
    pieces = list(lm.stream(prompt, 24))
    assert "".join(pieces) == full and len(pieces) > 1
    stats = lm.last_stats
    assert stats.new_tokens >= 1 and stats.stop_reason in ("length", "eos")
    if len(full) > 4:
        stop = full[2:4]
        cut = lm.generate(prompt, 24, stop=[stop])
        assert cut == full[: full.find(stop)] and lm.last_stats.stop_reason == "stop"
    a = lm.generate(prompt, 16, temperature=0.9, top_p=0.95, seed=5)
    assert a == lm.generate(prompt, 16, temperature=0.9, top_p=0.95, seed=5)


def test_eos_stops_generation(lm):
    tf = lm.transformer
    ids = lm.tokenizer.encode("Hello")
    eos = lm.tokenizer.eos_id
    # Force the end token through a huge bias on its logit: generation stops right there.
    bias = np.zeros(lm.config.n_vocab, np.float32)
    bias[eos] = 1e4
    forward = tf.forward
    tf.forward = lambda *a, **k: forward(*a, **k) + bias
    try:
        assert lm.generate(ids, 10) == "" and lm.last_stats.stop_reason == "eos"
    finally:
        tf.forward = forward


@pytest.fixture
def batch_invariant_kernels():
    """The integer kernels only, whose results do not depend on how many tokens one call
    takes, so a reused prefix and a fresh prompt must give the same tokens. (On AMX, calls of
    32 tokens or more round through bf16 tiles instead, so a near tie of the random model's
    logits may go the other way.)"""
    from workbench.backends.cpu import native

    with native.integer_kernels():
        yield


@pytest.mark.usefixtures("batch_invariant_kernels")
def test_chat_template_matches_transformers_and_prefix_is_reused(lm, tiny):
    from transformers import PreTrainedTokenizerFast

    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    ref = PreTrainedTokenizerFast(tokenizer_object=lm.tokenizer._tok, chat_template=CHATML)
    assert lm.apply_chat_template(msgs) == ref.apply_chat_template(
        msgs, tokenize=False, add_generation_prompt=True
    )
    reply = lm.chat(msgs, 8)
    turn2 = [*msgs, {"role": "assistant", "content": reply}, {"role": "user", "content": "More"}]
    second = lm.chat(turn2, 8)
    assert lm.last_stats.cached_tokens > 10  # the first turn was not recomputed
    fresh = llm.load(tiny("qwen2", "Q8_0")[1])
    assert fresh.chat(turn2, 8) == second and fresh.last_stats.cached_tokens == 0


def test_kv_cache_api(lm):
    cache = lm.transformer.new_cache(2, 32, chunk=4)
    lm.transformer.forward([[1, 2, 3], [4]], [0, 1], cache)
    assert cache.tokens(0) == [1, 2, 3] and cache.length(1) == 1
    assert cache.reuse_prefix(0, [1, 2, 9, 9]) == 2 and cache.tokens(0) == [1, 2]
    with pytest.raises(llm.CacheFullError):
        lm.transformer.forward([list(range(40))], [1], cache)
    with pytest.raises(IndexError):
        cache.reset(5)
