"""The OpenAI API through the official ``openai`` client; the reference for the generated
text is ``LLM.generate`` / ``LLM.chat`` (one sequence, the model's own cache, no server)."""

from __future__ import annotations

import json

import pytest

httpx = pytest.importorskip("httpx")
openai = pytest.importorskip("openai")
pytest.importorskip("fastapi")
text_string_to_metric_families = pytest.importorskip(
    "prometheus_client.parser"
).text_string_to_metric_families

PROMPT = "Hello there, the weather"
CHAT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}]


def test_models_lists_the_served_model(client, server):
    ids = [m.id for m in client.models.list().data]
    assert ids == [server.model_id] == ["tiny"]


def test_greedy_completion_equals_llm_generate(client, server, tiny_model):
    ref = tiny_model.generate(PROMPT, 24)
    r = client.completions.create(model=server.model_id, prompt=PROMPT, max_tokens=24,
                                  temperature=0)  # fmt: skip
    assert r.choices[0].text == ref
    assert r.choices[0].finish_reason == "length"
    n_prompt = len(tiny_model.tokenizer.encode(PROMPT))
    assert (r.usage.prompt_tokens, r.usage.completion_tokens) == (n_prompt, 24)
    assert r.usage.total_tokens == n_prompt + 24


def test_seeded_sampling_equals_llm_and_depends_on_the_seed(client, server, tiny_model):
    kw = dict(temperature=0.9, top_p=0.95)
    texts = []
    for seed in (1, 2):
        r = client.completions.create(model=server.model_id, prompt=PROMPT, max_tokens=20,
                                      seed=seed, **kw)  # fmt: skip
        assert r.choices[0].text == tiny_model.generate(PROMPT, 20, seed=seed, **kw)
        texts.append(r.choices[0].text)
    assert texts[0] != texts[1]


def test_streamed_text_equals_non_streamed(client, server):
    kw = dict(model=server.model_id, prompt=PROMPT, max_tokens=30, temperature=0.8, seed=7)
    whole = client.completions.create(**kw)
    chunks = list(client.completions.create(stream=True, **kw))
    assert "".join(c.choices[0].text for c in chunks) == whole.choices[0].text
    assert chunks[-1].choices[0].finish_reason == whole.choices[0].finish_reason
    assert all(c.choices[0].finish_reason is None for c in chunks[:-1])
    assert len(chunks) > 3  # it really streamed


def test_chat_equals_llm_chat_streamed_or_not(client, server, tiny_model):
    kw = dict(model=server.model_id, messages=CHAT, max_tokens=16, temperature=0.7, seed=3)
    ref = tiny_model.chat(CHAT, 16, temperature=0.7, seed=3)
    whole = client.chat.completions.create(**kw)
    assert whole.choices[0].message.content == ref
    assert whole.choices[0].message.role == "assistant"
    chunks = list(
        client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kw)
    )
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == ref
    assert chunks[-1].choices == [] and chunks[-1].usage == whole.usage
    assert chunks[-2].choices[0].finish_reason == whole.choices[0].finish_reason


def test_sse_wire_format_ends_with_done(server):
    # greedy: sampled at the default temperature, the tiny model's end-of-text token came up
    # within 5 tokens now and then ("stop", not "length")
    body = {"model": server.model_id, "prompt": PROMPT, "max_tokens": 5, "stream": True,
            "temperature": 0}  # fmt: skip
    with httpx.stream("POST", server.base_url + "/completions", json=body, timeout=30) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in r.iter_lines() if line]
    assert all(line.startswith("data: ") for line in lines)
    assert lines[-1] == "data: [DONE]"
    last = json.loads(lines[-2][6:])
    assert last["choices"][0]["finish_reason"] == "length"


def test_stop_string_cuts_the_text(client, server, tiny_model):
    full = tiny_model.generate(PROMPT, 24)
    stop = full[8:10]
    cut = full[: full.find(stop)]
    r = client.completions.create(model=server.model_id, prompt=PROMPT, max_tokens=24,
                                  temperature=0, stop=[stop])  # fmt: skip
    assert r.choices[0].text == cut
    assert r.choices[0].finish_reason == "stop"
    chunks = client.completions.create(model=server.model_id, prompt=PROMPT, max_tokens=24,
                                       temperature=0, stop=stop, stream=True)  # fmt: skip
    assert "".join(c.choices[0].text for c in chunks) == cut


def test_token_id_prompt(client, server, tiny_model):
    ids = tiny_model.tokenizer.encode(PROMPT)
    r = client.completions.create(model=server.model_id, prompt=ids, max_tokens=8, temperature=0)
    assert r.choices[0].text == tiny_model.generate(PROMPT, 8)


def _post(server, path, content, headers=None):
    headers = {"content-type": "application/json", **(headers or {})}
    return httpx.post(server.url + path, content=content, headers=headers, timeout=30)


@pytest.mark.parametrize(
    ("body", "status", "param"),
    [
        (b'{"model": "tiny", "prompt": "x"', 400, None),  # malformed JSON
        (b'{"model": "tiny", "prompt": "\xff\xfe"}', 400, None),  # invalid UTF-8
        (b"[1, 2]", 400, None),
        (b'{"model": "gpt-9", "prompt": "x"}', 404, "model"),
        (b'{"model": "tiny", "prompt": "x", "max_tokens": -1}', 400, "max_tokens"),
        (b'{"model": "tiny", "prompt": "x", "temperature": 5}', 400, "temperature"),
        (b'{"model": "tiny", "prompt": "x", "n": 2}', 400, "n"),
        (b'{"model": "tiny"}', 400, "prompt"),
        (b'{"model": "tiny", "prompt": [999999]}', 400, "prompt"),
        (json.dumps({"model": "tiny", "prompt": "word " * 300}).encode(), 400, "prompt"),
        (b'{"model": "tiny", "prompt": "x", "max_tokens": 100000}', 400, "max_tokens"),
    ],
)
def test_bad_completion_requests_get_openai_errors(server, body, status, param):
    r = _post(server, "/v1/completions", body)
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert err["message"] and err["type"]
    assert err["param"] == param


def test_bad_chat_requests_and_server_keeps_serving(client, server):
    assert (
        _post(server, "/v1/chat/completions", b'{"model": "tiny", "messages": []}').status_code
        == 400
    )
    r = _post(server, "/v1/chat/completions", b'{"model": "tiny", "messages": [{"role": "x"}]}')
    assert r.status_code == 400 and r.json()["error"]["param"].startswith("messages")
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="nope", messages=CHAT)
    with pytest.raises(openai.BadRequestError, match="context length"):
        long = [{"role": "user", "content": "many words " * 200}]
        client.chat.completions.create(model=server.model_id, messages=long)
    r = httpx.get(server.url + "/no/such/route")
    assert r.status_code == 404 and r.json()["error"]["type"] == "not_found_error"
    r = client.chat.completions.create(model=server.model_id, messages=CHAT, max_tokens=4)
    assert r.usage.completion_tokens <= 4
    assert httpx.get(server.url + "/health").json()["active"] == 0


def test_health_and_prometheus_metrics(client, server):
    client.completions.create(model=server.model_id, prompt="abc", max_tokens=3)
    health = httpx.get(server.url + "/health").json()
    assert health["status"] == "ok" and health["model"] == "tiny" and health["slots"] == 4
    r = httpx.get(server.url + "/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    fams = {f.name: f for f in text_string_to_metric_families(r.text)}
    done = {tuple(sorted(s.labels.items())): s.value for s in fams["workbench_requests"].samples
            if s.name == "workbench_requests_total"}  # fmt: skip
    assert done[(("endpoint", "/v1/completions"), ("status", "200"))] >= 1
    lat = fams["workbench_request_latency_seconds"]
    count = [s.value for s in lat.samples if s.name.endswith("_count")][0]
    assert count == server.monitor.requests
    window = {s.labels["quantile"]: s.value for s in fams["workbench_latency_window"].samples}
    assert window["0.99"] == pytest.approx(server.monitor.p99)
    assert fams["workbench_memory_rss_bytes"].samples[0].value > 1 << 20
    assert fams["workbench_slots"].samples[0].value == 4
