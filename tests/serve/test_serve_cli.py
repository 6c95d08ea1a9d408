"""``python -m workbench.serve`` in a subprocess, and ``wb.serve`` from Python."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest

import workbench as wb

httpx = pytest.importorskip("httpx")
openai = pytest.importorskip("openai")
pytest.importorskip("fastapi")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_cli_serves_until_terminated(tiny_path):
    port = _free_port()
    cmd = [sys.executable, "-m", "workbench.serve", "--gguf", tiny_path, "--port", str(port),
           "--max-batch", "2", "--threads", "1", "--model-id", "cli-model",
           "--log-level", "warning"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, proc.stderr.read()
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).json()
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.2)
        assert health["model"] == "cli-model" and health["slots"] == 2
        base = f"http://127.0.0.1:{port}/v1"
        with openai.OpenAI(base_url=base, api_key="unused", max_retries=0) as c:
            # Greedy, so that a sampled end-of-text token cannot end it early.
            r = c.completions.create(model="cli-model", prompt="hello", max_tokens=3,
                                     temperature=0)  # fmt: skip
        assert r.usage.completion_tokens == 3 and r.choices[0].finish_reason == "length"
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    assert "cli-model (2 slots of 512 positions)" in out


def test_cli_refuses_a_missing_file(tmp_path):
    missing = str(tmp_path / "none.gguf")
    r = subprocess.run([sys.executable, "-m", "workbench.serve", "--gguf", missing],
                       capture_output=True, text=True, timeout=120)  # fmt: skip
    assert r.returncode == 2 and "no such file" in r.stderr


def test_wb_serve_is_callable_and_stoppable(tiny_model):
    server = wb.serve(tiny_model, max_batch=1, model_id="nb")
    try:
        assert server.running and server.model_id == "nb"
        assert httpx.get(server.url + "/health").json()["status"] == "ok"
    finally:
        server.stop()
    assert not server.running
    assert wb.serve.PerformanceMonitor is wb.PerformanceMonitor
