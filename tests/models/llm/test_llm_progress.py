"""Prompt processing shows a ``tqdm.auto`` bar of the tokens processed, a chunk at a time."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import hf_logits

from workbench.models import llm


class _Recorder:
    """Stands in for ``tqdm.auto.tqdm``: keeps what the bar was told."""

    bars: list[_Recorder] = []

    def __init__(self, total, desc, disable=False, **kwargs):
        self.total, self.desc, self.disable, self.updates, self.closed = (
            total,
            desc,
            disable,
            [],
            False,
        )
        self.bars.append(self)

    def update(self, n=1):
        self.updates.append(n)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.closed = True


@pytest.fixture
def bars(monkeypatch):
    import tqdm.auto

    _Recorder.bars = []
    monkeypatch.setattr(tqdm.auto, "tqdm", _Recorder)
    return _Recorder.bars


@pytest.fixture(scope="module")
def qwen2(tiny):
    return tiny("qwen2", "F32")


def test_long_prompt_moves_a_bar_chunk_by_chunk(qwen2, bars):
    model, path = qwen2
    ids = list(range(3, 14))  # 11 tokens in chunks of 4
    lm = llm.LLM(str(path), max_len=64, chunk=4)
    lm.generate(ids, 2)  # the first new token is run too, so the cache holds it
    (bar,) = bars
    assert bar.total == 11 and bar.updates == [4, 4, 3] and bar.closed and not bar.disable
    assert bar.desc == "prompt"
    # The chunked prompt gives the reference model's next token (greedy).
    assert lm.cache.tokens(0)[11] == int(np.argmax(hf_logits(model, ids)[-1]))


def test_bar_only_for_prompts_past_one_chunk_unless_asked(qwen2, bars):
    _, path = qwen2
    lm = llm.LLM(str(path), max_len=64, chunk=4)
    lm.generate([5, 6, 7, 8], 1)  # one chunk: no bar by default
    lm.generate(list(range(3, 20)), 1, progress=False)
    assert bars == []
    lm.generate([9, 10], 1, progress=True)
    (bar,) = bars
    assert bar.total == 2 and bar.updates == [2]
    # A chat's next turn only processes what the cache does not hold yet.
    lm.generate([9, 10, 11, 12, 13, 14, 15, 16, 17, 18], 1)  # 8 new tokens after [9, 10]
    assert bars[-1].total == 8 and bars[-1].updates == [4, 4]


def test_the_bar_prints_in_a_terminal(qwen2, capsys):
    _, path = qwen2
    lm = llm.LLM(str(path), max_len=64, chunk=4)
    lm.generate(list(range(3, 14)), 1)
    err = capsys.readouterr().err
    assert "prompt" in err and "/11" in err
