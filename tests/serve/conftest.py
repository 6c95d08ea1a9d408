"""A tiny random GGUF model (tiny_gguf.py) and servers of it on free loopback ports."""

from __future__ import annotations

import pytest
from tiny_gguf import write_tiny_llama

from workbench.models import llm


@pytest.fixture(scope="session")
def tiny_path(tmp_path_factory):
    return write_tiny_llama(tmp_path_factory.mktemp("serve") / "tiny.gguf")


@pytest.fixture(scope="session")
def tiny_model(tiny_path):
    return llm.load(tiny_path)


@pytest.fixture(scope="module")
def server(tiny_path):
    pytest.importorskip("fastapi")  # the `serve` extra
    from workbench.serve import serve

    # Its own model (and cache), so that the reference model's cache is not shared.
    with serve(llm.load(tiny_path), max_batch=4, max_queue=16, max_len=256) as s:
        yield s


@pytest.fixture
def client(server):
    openai = pytest.importorskip("openai")
    with openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0,
                       timeout=60) as c:  # fmt: skip
        yield c
