"""The scheduler against the engine protocol, with a deterministic counting engine: each
sequence's next token is its last one + 1 (so every output is known in advance), and every
forward call is recorded to check the batching itself."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from workbench.models.llm import SamplingParams
from workbench.serve.metrics import ServerMetrics
from workbench.serve.monitor import PerformanceMonitor
from workbench.serve.scheduler import QueueFull, Request, Scheduler

pytest.importorskip("prometheus_client")  # the `serve` extra
VOCAB = 50


class CountingEngine:
    model_id, max_len, n_vocab, stop_ids = "count", 64, VOCAB, {0}

    def __init__(self, n_slots: int = 3, fail_at: int = -1):
        self.n_slots = n_slots
        self.calls: list[list[tuple[int, int]]] = []  # per forward: (slot, n tokens)
        self.freed: list[int] = []
        self.fail_at = fail_at

    def encode(self, text):
        return [ord(c) % VOCAB for c in text]

    def chat_ids(self, messages):
        return self.encode(messages[-1]["content"])

    def decoder(self, prompt_ids):
        class Letters:
            def push(self, t):
                return chr(ord("a") + t % 26)

            def flush(self):
                return ""

        return Letters()

    def forward(self, tokens_per_seq, slots):
        self.calls.append([(s, len(t)) for s, t in zip(slots, tokens_per_seq, strict=True)])
        if len(self.calls) == self.fail_at:
            raise RuntimeError("boom")
        logits = np.zeros((len(slots), VOCAB), np.float32)
        for i, t in enumerate(tokens_per_seq):
            nxt = (t[-1] + 1) % VOCAB
            logits[i, nxt or 1] = 1.0  # never the stop token
        return logits

    def free(self, slot):
        self.freed.append(slot)


def expected(prompt: list[int], n: int) -> str:
    out, t = [], prompt[-1]
    for _ in range(n):
        t = (t + 1) % VOCAB or 1
        out.append(chr(ord("a") + t % 26))
    return "".join(out)


class Collector:
    def __init__(self):
        self.text, self.end, self.done = [], None, threading.Event()

    def __call__(self, event):
        kind, value = event
        if kind == "text":
            self.text.append(value)
        else:
            self.end = (kind, value)
            self.done.set()


def _scheduler(engine, max_queue=8):
    return Scheduler(engine, ServerMetrics(PerformanceMonitor()), max_queue)


def test_one_forward_per_step_over_all_active_sequences():
    engine = CountingEngine(n_slots=3)
    sch = _scheduler(engine)
    prompts = [[1, 2, 3], [7], [10, 11], [20, 21, 22, 23], [30]]
    lengths = [3, 6, 2, 4, 1]
    outs = [Collector() for _ in prompts]
    for p, n, out in zip(prompts, lengths, outs, strict=True):  # queued before the start
        sch.submit(Request(p, n, SamplingParams(), out))
    sch.start()
    try:
        assert all(out.done.wait(10) for out in outs)
    finally:
        sch.stop()
    for p, n, out in zip(prompts, lengths, outs, strict=True):
        assert "".join(out.text) == expected(p, n) and out.end == ("done", "length")
    calls = engine.calls
    # Step 1 runs the three prompts together; later steps feed one token per sequence.
    assert sorted(n for _, n in calls[0]) == [1, 2, 3]
    assert all(len(c) <= 3 and len({s for s, _ in c}) == len(c) for c in calls)
    # The third request (2 tokens) leaves after step 2; the fourth joins at step 3 with its
    # 4-token prompt, beside the two still decoding.
    assert (4 in [n for _, n in calls[2]]) and len(calls[2]) == 3
    assert sum(len(c) for c in calls) == sum(lengths)  # each token sampled from one row
    assert len(calls) < sum(lengths)  # really batched
    assert len(engine.freed) == 5 and set(engine.freed) <= {0, 1, 2}
    assert sch.gauges()["active"] == 0


def test_stop_string_and_cancellation_free_the_slot():
    engine = CountingEngine(n_slots=1)
    sch = _scheduler(engine)
    sch.start()
    try:
        out = Collector()
        sch.submit(Request([1], 40, SamplingParams(), out, stop=["fgh"]))
        assert out.done.wait(10)
        assert "".join(out.text) == "cde" and out.end == ("done", "stop")
        # A request cancelled after its third piece: its slot is freed at the next step.
        got = []
        three = threading.Event()

        def cancel_after_three(event):
            got.append(event)
            if len(got) == 3:
                sch.cancel(req)
                three.set()

        req = Request([1], 60, SamplingParams(), cancel_after_three)
        sch.submit(req)
        assert three.wait(10)
        follow = Collector()  # only one slot: this runs only once the cancelled one left
        sch.submit(Request([5], 2, SamplingParams(), follow))
        assert follow.done.wait(10) and "".join(follow.text) == expected([5], 2)
        assert len(got) <= 4 and req.finish_reason is None
    finally:
        sch.stop()
    assert engine.freed == [0, 0, 0]


def test_bounded_queue_and_cancel_while_waiting():
    engine = CountingEngine(n_slots=2)
    sch = _scheduler(engine, max_queue=1)  # not started: nothing leaves the queue
    reqs = [Request([1], 5, SamplingParams(), Collector()) for _ in range(3)]
    for r in reqs:
        sch.submit(r)
    with pytest.raises(QueueFull, match="max_queue=1"):
        sch.submit(Request([1], 5, SamplingParams(), Collector()))
    sch.cancel(reqs[0])
    sch.submit(Request([1], 5, SamplingParams(), Collector()))  # room again
    assert sch.gauges()["queue_depth"] == 3


def test_a_failing_step_fails_its_requests_not_the_scheduler():
    engine = CountingEngine(n_slots=2, fail_at=2)
    sch = _scheduler(engine)
    sch.start()
    try:
        bad = Collector()
        sch.submit(Request([1], 5, SamplingParams(), bad))
        assert bad.done.wait(10) and bad.end == ("error", "RuntimeError: boom")
        good = Collector()
        sch.submit(Request([3], 4, SamplingParams(), good))
        assert good.done.wait(10) and "".join(good.text) == expected([3], 4)
    finally:
        sch.stop()
