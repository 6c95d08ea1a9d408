"""Run under MPI by test_tensor_parallel_llm.py: ``llm.load(path, tensor_parallel=2)``.

argv[1] is a JSON list of cases written by the test: a GGUF file, prompt ids, and what one
process computed on the whole model (logits of every position, a greedy continuation); or an
``error`` that loading must raise on every rank. Each rank prints ``rank N: OK`` or failures.
"""

import json
import sys

import numpy as np

from workbench import distributed as dist
from workbench.models import llm

comm = dist.init(timeout=120)
R = comm.rank
failures: list[str] = []

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
    kv_heads = lm.cache.k[0].shape[1]
    if kv_heads != case["n_head_kv"] // comm.world_size:
        failures.append(f"{name}: the KV cache holds {kv_heads} heads on rank {R}")
    for ref_name in ("single", "transformers"):
        if ref_name not in case:
            continue
        want = np.load(case[ref_name])
        got = lm.logits(case["ids"])
        err = np.abs(got - want).max() / np.abs(want).max()
        if got.shape != want.shape or not err <= case["rtol"]:
            failures.append(f"{name}: logits vs {ref_name}: relative max error {err:.2e}")
    text = lm.generate(case["ids"], max_new_tokens=case["new_tokens"])
    if text != case["text"]:
        failures.append(f"{name}: greedy text {text!r}, one process gave {case['text']!r}")

comm.barrier()
if failures:
    print(f"rank {R}: FAILED:\n  " + "\n  ".join(failures), flush=True)
    sys.exit(1)
print(f"rank {R}: OK", flush=True)
