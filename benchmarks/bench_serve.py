"""Serving: throughput and latency of ``workbench.serve`` next to llama.cpp's server.

``python -m benchmarks.bench_serve [--gguf FILE] [--threads 1] [--clients 1,4,16]``

Both servers run as subprocesses on loopback with the same GGUF and thread count; for each
number of concurrent clients the two are measured one after the other (the order alternates)
in this one process. Each client streams ``--requests`` completions of ``--max-tokens`` tokens
and measures time to first token (the first chunk with text) and total latency; aggregate
throughput is completion tokens / wall time of the round. Without ``--gguf`` a random Llama
(``--size``) is written with tests/serve/tiny_gguf.py. llama.cpp's server is
``llama-cpp-python[server]``; it is skipped, with the reason, when missing.
Not part of ``python -m benchmarks`` (no ``WORKLOADS``): it needs free ports and minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SIZES = {  # name -> tiny_gguf.write_tiny_llama arguments
    "tiny": dict(n_embd=64, n_layer=2, n_head=4, n_head_kv=2, n_ff=128),
    "small": dict(n_embd=512, n_layer=8, n_head=8, n_head_kv=4, n_ff=1536, qtype="Q8_0"),
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_ready(url: str, proc: subprocess.Popen, timeout: float = 300.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode}")
        try:
            if httpx.get(url + "/v1/models", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer in {timeout:.0f} s")


def _commands(gguf: str, port: int, threads: int, batch: int) -> dict[str, list[str]]:
    return {
        "workbench": [sys.executable, "-m", "workbench.serve", "--gguf", gguf, "--port", str(port),
                      "--threads", str(threads), "--max-batch", str(batch),
                      "--max-queue", "256", "--model-id", "bench", "--log-level", "warning"],
        "llama.cpp": [sys.executable, "-m", "llama_cpp.server", "--model", gguf,
                      "--port", str(port), "--n_threads", str(threads),
                      "--n_threads_batch", str(threads), "--model_alias", "bench",
                      # Its default (interrupt_requests) aborts a running stream when another
                      # request comes in: those count as failed. With it off, 0.3.36 hung here.
                      "--n_ctx", "2048"],
    }  # fmt: skip


def _one_request(url: str, prompt: str, max_tokens: int) -> tuple[float, float, int]:
    """(ttft, latency, completion tokens) of one streamed greedy completion."""
    import httpx

    body = {"model": "bench", "prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
            "stream": True, "stream_options": {"include_usage": True}}  # fmt: skip
    t0 = time.perf_counter()
    ttft, chunks, usage = None, 0, None
    with httpx.stream("POST", url + "/v1/completions", json=body, timeout=600) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            data = json.loads(line[6:])
            if data.get("usage"):
                usage = data["usage"]["completion_tokens"]
            if data.get("choices") and data["choices"][0].get("text"):
                chunks += 1
                if ttft is None:
                    ttft = time.perf_counter() - t0
    latency = time.perf_counter() - t0
    return ttft if ttft is not None else latency, latency, usage if usage is not None else chunks


def _round(url: str, clients: int, requests: int, max_tokens: int) -> dict:
    import httpx

    results: list[tuple[float, float, int]] = []
    failed: list[str] = []
    lock = threading.Lock()

    def client(c: int) -> None:
        for i in range(requests):
            try:
                out = _one_request(url, f"Client {c} asks question number {i}: why", max_tokens)
            except httpx.HTTPError as e:  # counted, not timed: the server dropped the request
                with lock:
                    failed.append(f"{type(e).__name__}: {e}")
                continue
            with lock:
                results.append(out)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    ttft = np.array([r[0] for r in results])
    lat = np.array([r[1] for r in results])
    tokens = sum(r[2] for r in results)
    return {"tokens_per_s": tokens / wall, "tokens": tokens, "failed": len(failed),
            "ttft_p50": float(np.percentile(ttft, 50)), "ttft_p99": float(np.percentile(ttft, 99)),
            "latency_p50": float(np.percentile(lat, 50)),
            "latency_p99": float(np.percentile(lat, 99))}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.bench_serve", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--gguf", help="the model (default: a random one of --size)")
    p.add_argument("--size", choices=sorted(SIZES), default="small")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--clients", default="1,4,16")
    p.add_argument("--requests", type=int, default=4, help="per client and round")
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args(argv)
    levels = [int(c) for c in args.clients.split(",")]

    with tempfile.TemporaryDirectory() as tmp:
        gguf = args.gguf
        if gguf is None:
            sys.path.insert(0, str(ROOT / "tests" / "serve"))
            from tiny_gguf import write_tiny_llama

            gguf = write_tiny_llama(Path(tmp) / f"random-{args.size}.gguf", **SIZES[args.size])
        servers: dict[str, tuple[subprocess.Popen, str]] = {}
        skipped: dict[str, str] = {}
        env = {**os.environ, "OMP_NUM_THREADS": str(args.threads),
               "OPENBLAS_NUM_THREADS": str(args.threads)}  # fmt: skip
        for name in ("workbench", "llama.cpp"):
            if name == "llama.cpp":
                try:
                    import llama_cpp.server  # noqa: F401
                except ImportError as e:
                    skipped[name] = f"llama-cpp-python[server] is not installed ({e})"
                    continue
            port = _free_port()
            cmd = _commands(gguf, port, args.threads, max(levels))[name]
            proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE)  # fmt: skip
            url = f"http://127.0.0.1:{port}"
            try:
                _wait_ready(url, proc)
            except RuntimeError as e:
                proc.kill()
                skipped[name] = f"{e}: {proc.stderr.read().decode(errors='replace')[-400:]}"
                continue
            servers[name] = (proc, url)
        try:
            for _, url in servers.values():  # warm-up: first calls, caches
                _round(url, 2, 1, 4)
            report = {}
            for k, clients in enumerate(levels):
                order = list(servers) if k % 2 == 0 else list(servers)[::-1]
                for name in order:
                    report[(name, clients)] = _round(servers[name][1], clients, args.requests,
                                                     args.max_tokens)  # fmt: skip
        finally:
            for proc, _ in servers.values():
                proc.terminate()
                proc.wait(30)
    _print(report, levels, skipped, args, gguf)
    if args.json:
        rows = [{"server": n, "clients": c, **v} for (n, c), v in report.items()]
        Path(args.json).write_text(json.dumps({"results": rows, "skipped": skipped}, indent=2))
    return 0


def _print(report: dict, levels: list[int], skipped: dict, args, gguf: str) -> None:
    sys.path.insert(0, str(ROOT))
    from benchmarks.machine import cpu_model

    print(f"serving {os.path.basename(gguf)}, {args.threads} thread(s), {args.requests} "
          f"requests/client of {args.max_tokens} tokens, CPU: {cpu_model()}")  # fmt: skip
    head = f"{'server':<10} {'clients':>7} {'tok/s':>9} {'ttft p50':>9} {'ttft p99':>9} " \
           f"{'lat p50':>9} {'lat p99':>9}"  # fmt: skip
    print(head + "  failed")
    for clients in levels:
        for name in ("workbench", "llama.cpp"):
            r = report.get((name, clients))
            if r:
                ms = [r[k] * 1e3 for k in ("ttft_p50", "ttft_p99", "latency_p50", "latency_p99")]
                print(f"{name:<10} {clients:>7} {r['tokens_per_s']:>9.1f} "
                      + " ".join(f"{v:>7.1f}ms" for v in ms) + f"  {r['failed']}")  # fmt: skip
        w, peer = report.get(("workbench", clients)), report.get(("llama.cpp", clients))
        if w and peer:
            print(f"{'ratio':<10} {clients:>7} {w['tokens_per_s'] / peer['tokens_per_s']:>8.2f}x "
                  f"{'':>9} {w['ttft_p99'] / peer['ttft_p99']:>8.2f}x  (workbench / llama.cpp: "
                  f"throughput, p99 time to first token)")  # fmt: skip
    for name, why in skipped.items():
        print(f"{name}: skipped, {why}")


if __name__ == "__main__":
    raise SystemExit(main())
