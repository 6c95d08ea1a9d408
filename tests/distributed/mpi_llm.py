"""Run under MPI by test_tensor_parallel_llm.py: ``llm.load(path, tensor_parallel=W)``.

argv[1] is a JSON list of cases written by the test: a GGUF file, prompt ids, what one process
computed on the whole model (logits of every position, a greedy continuation with the logits
of each step, the text of ``generate``) and the tolerance ``atol`` (max abs logit error); or
an ``error`` that loading must raise on every rank. Each rank prints ``rank N: OK`` (with how
close each case came) or its failures.
"""

import json
import sys

import numpy as np
from dist_models import compare_greedy, greedy

from workbench import distributed as dist
from workbench.models import llm

comm = dist.init(timeout=120)
R = comm.rank
failures: list[str] = []
notes: list[str] = []

for case in json.loads(open(sys.argv[1]).read()):
    name = case["name"]
    if "error" in case:
        try:
            llm.load(case["path"], tensor_parallel=comm.world_size)
            failures.append(f"{name}: loaded, expected an error with {case['error']!r}")
        except Exception as e:  # noqa: BLE001  (the message is what is checked)
            if case["error"] not in str(e):
                failures.append(f"{name}: expected {case['error']!r} in the error, got {e!r}")
        continue
    lm = llm.load(case["path"], tensor_parallel=comm.world_size)
    kv_heads = lm.cache.v[0].shape[1]  # (slots, heads, positions, value dim)
    if kv_heads != case["n_head_kv"] // comm.world_size:
        failures.append(f"{name}: the KV cache holds {kv_heads} heads on rank {R}")
    atol = case["atol"]
    got = lm.logits(case["ids"])
    for ref_name in ("single", "transformers"):
        if ref_name not in case:
            continue
        want = np.load(case[ref_name])
        err = float(np.abs(got - want).max()) if got.shape == want.shape else np.inf
        if not err <= atol:
            failures.append(f"{name}: logits vs {ref_name}: max abs error {err:.3g} > {atol:.3g}")
        if ref_name == "single":
            notes.append(f"{name} {err / atol:.2f} of tolerance")
    tokens, steps = greedy(lm, case["ids"], case["new_tokens"])
    agreed, problem = compare_greedy(tokens, steps, case["greedy"], np.load(case["steps"]), atol)
    if problem:
        failures.append(f"{name}: greedy {problem}")
    elif agreed == len(tokens):  # the same tokens: generate must give the same text
        text = lm.generate(case["ids"], max_new_tokens=case["new_tokens"])
        if text != case["text"]:
            failures.append(f"{name}: generate gave {text!r}, one process {case['text']!r}")
    else:
        notes.append(f"{name}: a near tie after {agreed} greedy tokens")

comm.barrier()
if failures:
    print(f"rank {R}: FAILED:\n  " + "\n  ".join(failures), flush=True)
    sys.exit(1)
print(f"rank {R}: OK ({'; '.join(notes)})", flush=True)
