"""LLM inference on one GGUF file: workbench vs transformers (CPU, f32) vs llama.cpp.

    python -m benchmarks.bench_llm                         # Q8_0 and Q4_0, 1 and 2 threads
    python -m benchmarks.bench_llm --types Q4_0 --threads 1 --prompt 128 --decode 32
    python -m benchmarks.bench_llm --types Q4_K --threads 1 --clock cpu   # a loaded machine

A random-weight Llama of a realistic small size (d=768, 12 layers, 12/4 heads, ff 2048, vocab
32000: about 125M parameters) is built with transformers and converted to GGUF by
``python -m workbench.quantized convert``; every engine runs that same file (transformers the
float checkpoint it came from). Per engine and thread count, in a fresh subprocess each (so
peak RSS is its own), interleaved round by round, best of ``--rounds``:

- prompt: tokens/s processing ``--prompt`` random tokens (batched; every engine computes the
  logits of the last position only), time to first token (prompt + the first logits), then
- decode: tokens/s over ``--decode`` single-token steps with the KV cache, and peak RSS.

llama.cpp runs through llama-cpp-python when it is installed (it builds from source; see
ENVIRONMENT.md), otherwise its rows say it is missing. Not part of the default suite
(``WORKLOADS`` is empty): it takes minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

WORKLOADS: list = []
CLOCK = time.perf_counter  # --clock cpu: time.process_time (this process's CPU time, all threads)
CONFIG = dict(
    vocab_size=32000,
    hidden_size=768,
    intermediate_size=2048,
    num_hidden_layers=12,
    num_attention_heads=12,
    num_key_value_heads=4,
    max_position_embeddings=2048,
)


def build(folder: Path, types: list[str]) -> dict[str, Path]:
    """The float checkpoint in ``folder`` and one GGUF per type (made once, then reused)."""
    files = {t: folder / f"bench-{t}.gguf" for t in types}
    if not (folder / "config.json").exists():
        import torch
        import transformers as T

        torch.manual_seed(0)
        model = T.LlamaForCausalLM(T.LlamaConfig(**CONFIG))
        model.save_pretrained(folder, safe_serialization=True)
        vocab = {f"t{i}": i for i in range(CONFIG["vocab_size"])}  # ids are drawn, not encoded
        (folder / "tokenizer.json").write_text(
            json.dumps(
                {
                    "model": {"type": "BPE", "vocab": vocab, "merges": []},
                    "pre_tokenizer": {
                        "type": "ByteLevel",
                        "add_prefix_space": False,
                        "use_regex": True,
                    },
                    "added_tokens": [],
                }
            )
        )
    for t, path in files.items():
        if not path.exists():
            from workbench.quantized.convert_hf import convert_hf_checkpoint

            convert_hf_checkpoint(folder, path, t)
    return files


def _ids(n: int) -> list[int]:
    import numpy as np

    return np.random.default_rng(0).integers(100, CONFIG["vocab_size"], n).tolist()


def run_workbench(gguf: Path, threads: int, n_prompt: int, n_decode: int) -> dict:
    import numpy as np
    from threadpoolctl import threadpool_limits

    import workbench as wb
    from workbench.models import llm

    wb.set_num_threads(threads)
    with threadpool_limits(threads):
        model = llm.load(gguf, max_len=n_prompt + n_decode + 8)
        tf = model.transformer
        cache = tf.new_cache(1, n_prompt + n_decode + 8, chunk=n_prompt)
        t0 = CLOCK()
        logits = tf.forward([_ids(n_prompt)], [0], cache)[0]
        token = int(np.argmax(logits))
        t1 = CLOCK()
        for _ in range(n_decode):
            token = int(np.argmax(tf.forward([[token]], [0], cache)[0]))
        t2 = CLOCK()
    return {"prompt_s": t1 - t0, "decode_s": t2 - t1}


def run_transformers(folder: Path, threads: int, n_prompt: int, n_decode: int) -> dict:
    import torch
    import transformers as T

    torch.set_num_threads(threads)
    model = T.LlamaForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    with torch.no_grad():
        t0 = CLOCK()
        out = model(torch.tensor([_ids(n_prompt)]), use_cache=True, logits_to_keep=1)
        token = out.logits[0, -1].argmax().view(1, 1)
        t1 = CLOCK()
        past = out.past_key_values
        for _ in range(n_decode):
            out = model(token, past_key_values=past, use_cache=True)
            past, token = out.past_key_values, out.logits[0, -1].argmax().view(1, 1)
        t2 = CLOCK()
    return {"prompt_s": t1 - t0, "decode_s": t2 - t1}


def run_llama_cpp(gguf: Path, threads: int, n_prompt: int, n_decode: int) -> dict:
    import numpy as np
    from llama_cpp import Llama

    model = Llama(
        str(gguf),
        n_ctx=n_prompt + n_decode + 8,
        n_batch=n_prompt,
        n_threads=threads,
        n_threads_batch=threads,
        verbose=False,
        logits_all=False,  # as the other engines: the logits of the last position only
    )
    n_vocab = model.n_vocab()

    def last_logits() -> np.ndarray:
        return np.ctypeslib.as_array(model._ctx.get_logits(), shape=(n_vocab,))

    t0 = CLOCK()
    model.eval(_ids(n_prompt))
    token = int(np.argmax(last_logits()))
    t1 = CLOCK()
    for _ in range(n_decode):
        model.eval([token])
        token = int(np.argmax(last_logits()))
    t2 = CLOCK()
    return {"prompt_s": t1 - t0, "decode_s": t2 - t1}


def _peak_rss() -> int:
    """This process's peak resident bytes: VmHWM (ru_maxrss survives exec, so a child would
    report its parent's peak when that was higher)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def child(args) -> None:
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    fn = {"workbench": run_workbench, "transformers": run_transformers, "llama.cpp": run_llama_cpp}[
        args.engine
    ]
    target = Path(args.target)
    r = fn(target, args.threads[0], args.prompt, args.decode)
    r["peak_rss"] = _peak_rss()
    print("RESULT " + json.dumps(r))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--types", nargs="+", default=["Q8_0", "Q4_0"])
    p.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    p.add_argument("--prompt", type=int, default=512)
    p.add_argument("--decode", type=int, default=128)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument(
        "--clock",
        choices=["wall", "cpu"],
        default="wall",
        help="cpu: process CPU time, steadier on a loaded machine (use 1 thread: "
        "spinning worker threads count)",
    )
    p.add_argument("--folder", default=os.path.expanduser("~/.cache/workbench/bench-llm"))
    p.add_argument("--engines", nargs="+", default=["workbench", "transformers", "llama.cpp"])
    p.add_argument("--engine", help=argparse.SUPPRESS)
    p.add_argument("--target", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.engine:
        child(args)
        return 0
    from benchmarks.machine import cpu_model

    folder = Path(args.folder)
    folder.mkdir(parents=True, exist_ok=True)
    files = build(folder, args.types)
    print(
        f"# {cpu_model()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; prompt "
        f"{args.prompt}, decode {args.decode}; best of {args.rounds}; {args.clock} clock"
    )
    best: dict = {}
    for _ in range(args.rounds):
        for t in args.types:
            for threads in args.threads:
                for engine in args.engines:
                    target = folder if engine == "transformers" else files[t]
                    cmd = [
                        sys.executable,
                        "-m",
                        "benchmarks.bench_llm",
                        "--engine",
                        engine,
                        "--target",
                        str(target),
                        "--threads",
                        str(threads),
                        "--clock",
                        args.clock,
                        "--prompt",
                        str(args.prompt),
                        "--decode",
                        str(args.decode),
                    ]
                    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
                    lines = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
                    key = (t, threads, engine)
                    if not lines:
                        best.setdefault(
                            key,
                            {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1][:100]},
                        )
                        continue
                    r = json.loads(lines[-1][7:])
                    old = best.get(key, {})
                    if "prompt_s" not in old or r["prompt_s"] + r["decode_s"] < (
                        old["prompt_s"] + old["decode_s"]
                    ):
                        best[key] = r
    print(
        f"{'type':6} {'thr':>3} {'engine':13} {'prompt tok/s':>12} {'TTFT s':>7} "
        f"{'decode tok/s':>12} {'peak RSS':>9}  ratios (workbench / engine)"
    )
    for (t, threads, engine), r in best.items():
        if "error" in r:
            print(f"{t:6} {threads:>3} {engine:13} {r['error']}")
            continue
        pp, dec = args.prompt / r["prompt_s"], args.decode / r["decode_s"]
        ratio = ""
        wbr = best.get((t, threads, "workbench"), {})
        if engine != "workbench" and "prompt_s" in wbr:
            ratio = (
                f"prompt {r['prompt_s'] / wbr['prompt_s']:.2f}x, "
                f"decode {r['decode_s'] / wbr['decode_s']:.2f}x"
            )
        print(
            f"{t:6} {threads:>3} {engine:13} {pp:12.1f} {r['prompt_s']:7.2f} {dec:12.1f} "
            f"{r['peak_rss'] / 2**20:7.0f} MiB  {ratio}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
