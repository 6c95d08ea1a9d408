"""Continuous batching: exactness against sequential decoding, the bounded queue (429),
disconnecting clients, and a bounded load test on loopback."""

from __future__ import annotations

import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from workbench.models import llm
from workbench.serve import serve
from workbench.serve.engine import LlmEngine

httpx = pytest.importorskip("httpx")
openai = pytest.importorskip("openai")
pytest.importorskip("fastapi")

PROMPTS = ["The cat", "Once upon a time there", "In 1999, we", "Zebra", "A quiet evening in the",
           "Numbers: 1 2 3", "hello", "Why is the sky blue? Because the"]  # fmt: skip


def _client(server, **kw):
    return openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=120,
                         **kw)  # fmt: skip


def _wait_idle(server, timeout=30.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        h = httpx.get(server.url + "/health").json()
        if h["active"] == 0 and h["queue_depth"] == 0 or time.monotonic() > deadline:
            return h
        time.sleep(0.02)


def test_concurrent_greedy_requests_equal_sequential(tiny_path, tiny_model):
    lengths = [24, 9, 17, 30, 5, 21, 12, 26]  # different lengths: sequences join and leave
    ref = [tiny_model.generate(p, n) for p, n in zip(PROMPTS, lengths, strict=True)]
    with serve(llm.load(tiny_path), max_batch=4, max_len=128) as s, _client(s) as c:

        def ask(i):
            r = c.completions.create(model=s.model_id, prompt=PROMPTS[i], max_tokens=lengths[i],
                                     temperature=0)  # fmt: skip
            return r.choices[0].text

        with ThreadPoolExecutor(len(PROMPTS)) as pool:
            got = list(pool.map(ask, range(len(PROMPTS))))
        batches = s.monitor.values("batch_size")
    assert got == ref
    assert batches.max() == 4  # they really were decoded together
    assert len(set(ref)) == len(ref)  # the outputs depend on the prompt


def test_full_queue_answers_429_with_retry_after(tiny_path):
    with serve(llm.load(tiny_path), max_batch=1, max_queue=1, max_len=512) as s, _client(s) as c:
        results = []

        def ask(i):
            try:
                r = c.completions.create(model=s.model_id, prompt=PROMPTS[i % 8], max_tokens=150,
                                         temperature=0)  # fmt: skip
                results.append(("ok", r.usage.completion_tokens))
            except openai.RateLimitError as e:
                results.append((429, e.response.headers.get("retry-after")))

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert _wait_idle(s)["active"] == 0
    kinds = [k for k, _ in results]
    assert len(results) == 6 and kinds.count(429) >= 1 and kinds.count("ok") >= 2
    assert all(v == "1" for k, v in results if k == 429)
    assert all(v == 150 for k, v in results if k == "ok")


class SlowEngine(LlmEngine):
    """The tiny model at 5 ms a step: long enough that a request outlives its client."""

    def forward(self, tokens_per_seq, slots):
        time.sleep(0.005)
        return super().forward(tokens_per_seq, slots)


def test_disconnected_streams_free_their_slots(tiny_path):
    engine = SlowEngine(llm.load(tiny_path), n_slots=2, max_len=1024)
    with serve(engine, max_queue=4) as s:
        body = {"model": s.model_id, "prompt": "a long story", "max_tokens": 900, "stream": True,
                "temperature": 0}  # fmt: skip
        for _ in range(3):  # more than the slots: a leak would block the third round
            with httpx.Client(timeout=30) as h:
                streams = [h.stream("POST", s.base_url + "/completions", json=body)
                           for _ in range(2)]  # fmt: skip
                # Keep the line iterators: dropping one closes its connection.
                lines = [st.__enter__().iter_lines() for st in streams]
                for it in lines:
                    next(it)  # the generation is under way
                assert httpx.get(s.url + "/health").json()["active"] == 2
                for st in streams:
                    st.__exit__(None, None, None)  # hang up mid-stream
            assert _wait_idle(s)["active"] == 0
        # Non-streamed requests whose client gives up are freed too.
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(s.base_url + "/completions", json={**body, "stream": False}, timeout=0.5)
        assert _wait_idle(s)["active"] == 0
        with _client(s) as c:
            # Greedy, so that a sampled end-of-text token cannot end it early.
            r = c.completions.create(model=s.model_id, prompt="still there?", max_tokens=4,
                                     temperature=0)  # fmt: skip
        assert r.usage.completion_tokens == 4 and r.choices[0].finish_reason == "length"
        assert s.monitor.requests == 1  # the abandoned ones never counted as served


def test_bounded_load(tiny_path):
    """32 clients, 160 requests: each completes or gets 429, none lost or duplicated."""
    n_clients, n_requests, max_tokens = 32, 160, 8
    with serve(llm.load(tiny_path), max_batch=8, max_queue=8, max_len=128) as s, _client(s) as c:
        c.completions.create(model=s.model_id, prompt="warm up", max_tokens=2)
        s.monitor.reset()
        seen: dict[str, tuple] = {}
        lock = threading.Lock()

        refused = []

        def ask(i):
            tag = uuid.uuid4().hex[:8]
            out = (429, None, 0, 0.0)
            for attempt in range(20):  # a polite client: back off and retry on 429
                t0 = time.perf_counter()
                try:
                    r = c.completions.create(model=s.model_id, prompt=f"request {i} {tag}",
                                             max_tokens=max_tokens, temperature=0)  # fmt: skip
                    out = ("ok", r.id, r.usage.completion_tokens, time.perf_counter() - t0)
                    break
                except openai.RateLimitError as e:
                    assert e.response.headers["retry-after"] == "1"
                    refused.append(i)
                    time.sleep(0.02 * (attempt + 1))
            with lock:
                assert i not in seen
                seen[i] = out

        deadline = time.monotonic() + 240
        with ThreadPoolExecutor(n_clients) as pool:
            futures = [pool.submit(ask, i) for i in range(n_requests)]
            for f in futures:
                f.result(timeout=max(1.0, deadline - time.monotonic()))
        health = _wait_idle(s)
        mon = s.monitor
        ok = [v for v in seen.values() if v[0] == "ok"]
        limited = [v for v in seen.values() if v[0] == 429]
        assert len(seen) == n_requests and len(ok) + len(limited) == n_requests
        assert len({v[1] for v in ok}) == len(ok)  # no duplicated answers
        assert all(v[2] == max_tokens for v in ok)
        assert health["active"] == 0 and health["queue_depth"] == 0
        assert mon.requests == len(ok) and len(ok) >= n_requests // 2
        assert len(limited) <= len(refused)
        # The server times each request inside the client's own measurement of it.
        client_lat = np.array([v[3] for v in ok])
        server_lat = mon.values("latency")
        assert np.percentile(server_lat, 99) <= np.percentile(client_lat, 99)
        assert np.sort(server_lat)[-1] <= np.sort(client_lat)[-1]
        assert mon.values("batch_size").max() == 8
        mem = mon.values("memory")
        half = len(mem) // 2
        assert np.median(mem[half:]) - np.median(mem[:half]) < 64 << 20
