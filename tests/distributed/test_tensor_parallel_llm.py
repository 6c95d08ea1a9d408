"""``llm.load(path, tensor_parallel=2)`` against one process on the whole model.

The tiny random models of tests/models/llm (transformers, converted to GGUF) with a wider MLP
(128 features: 64 per rank, whole Q8_0 blocks). Under ``mpiexec -n 2`` (mpi_llm.py) every
position's logits equal one process's (F32 and Q8_0) and transformers' (F32), and a greedy
continuation is the same text; errors are checked in-process on thread ranks.
"""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from workbench import distributed as dist
from workbench.errors import WorkbenchError
from workbench.models import llm

HERE = Path(__file__).parent
_spec = importlib.util.spec_from_file_location(
    "llm_test_models", HERE.parent / "models" / "llm" / "conftest.py"
)
builders = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(builders)
tiny = builders.tiny  # the session fixture: tiny(family, type, **config) -> (hf model, gguf)

FAMILIES = ["llama", "qwen2", "gemma2", "phi3"]  # phi3: fused qkv and gate|up
WIDE = {"intermediate_size": 128}
PROMPT = "The tensor is sharded over two ranks; each one holds half of the heads."
HANG = 300  # seconds; a launch still running then has hung


def _mpiexec_env():
    try:
        import mpi4py  # noqa: F401

        from workbench.distributed import run

        run.find_mpiexec()
    except Exception as e:  # noqa: BLE001
        pytest.fail(f"MPI is part of the dev extra (mpi4py + mpich); not usable here: {e}")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env.pop("WORKBENCH_DIST_TIMEOUT", None)
    return env


def test_tensor_parallel_logits_and_generation_equal_one_process(tiny, tmp_path):
    cases = []
    for family in FAMILIES:
        for ggml_type in ("F32", "Q8_0"):
            model, path = tiny(family, ggml_type, **WIDE)
            one = llm.load(path)
            ids = one.tokenizer.encode(PROMPT)
            case = {"name": f"{family} {ggml_type}", "path": str(path), "ids": ids,
                    "n_head_kv": one.config.n_head_kv, "new_tokens": 8,
                    # Q8_0: the all-reduce adds partial sums in another order, so an activation
                    # can round to the neighbouring Q8 step (1/127 of its block's largest)
                    "rtol": 1e-5 if ggml_type == "F32" else 1e-2}  # fmt: skip
            logits = one.logits(ids)
            case["single"] = str(tmp_path / f"{family}-{ggml_type}-single.npy")
            np.save(case["single"], logits)
            if ggml_type == "F32":  # and the independent reference
                case["transformers"] = str(tmp_path / f"{family}-transformers.npy")
                np.save(case["transformers"], builders.hf_logits(model, ids))
            case["text"] = one.generate(ids, max_new_tokens=case["new_tokens"])
            assert len(one.tokenizer.encode(case["text"], add_special=False)) > 2
            cases.append(case)
    _, narrow = tiny("qwen2", "Q8_0")  # 96 MLP features: 48 per rank, not whole blocks
    cases.append({"name": "qwen2 Q8_0 n_ff=96", "path": str(narrow),
                  "error": "not a multiple of the Q8_0 block size 32"})  # fmt: skip
    spec = tmp_path / "cases.json"
    spec.write_text(json.dumps(cases))
    cmd = [sys.executable, "-m", "workbench.distributed.run", "-n", "2",
           str(HERE / "mpi_llm.py"), str(spec)]  # fmt: skip
    try:
        done = subprocess.run(cmd, env=_mpiexec_env(), capture_output=True, text=True, timeout=HANG)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{' '.join(cmd)} hung for {HANG} s:\n{e.stdout}\n{e.stderr}")
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "rank 0: OK" in out and "rank 1: OK" in out, out


def test_thread_ranks_match_one_process(tiny):
    """The same split on in-process thread ranks (FakeCommunicator): phi3's fused tensors."""
    _, path = tiny("phi3", "Q8_0", **WIDE)
    one = llm.load(path)
    ids = one.tokenizer.encode(PROMPT)[:20]
    want = one.logits(ids)
    got = dist.run_threads(2, lambda comm: llm.load(path, tensor_parallel=comm).logits(ids))
    for rank_logits in got:
        np.testing.assert_allclose(rank_logits, want, rtol=0, atol=1e-5 * np.abs(want).max())


def test_heads_that_do_not_split_are_refused(tiny):
    _, path = tiny("llama", "F32", **WIDE)  # 4 query heads, 2 key/value heads
    with pytest.raises(dist.DistributedError, match="the model's 4 attention heads do not split"):
        dist.run_threads(3, lambda comm: llm.load(path, tensor_parallel=comm))
    with pytest.raises(dist.DistributedError, match="2 key/value heads do not split evenly"):
        dist.run_threads(4, lambda comm: llm.load(path, tensor_parallel=comm))


def test_tensor_parallel_needs_a_communicator_of_that_size(tiny):
    _, path = tiny("llama", "F32", **WIDE)
    dist.set_communicator(None)
    with pytest.raises(WorkbenchError, match=r"no communicator; call wb.distributed.init\(\)"):
        llm.load(path, tensor_parallel=2)
    world = dist.FakeWorld(4)
    dist.set_communicator(world.communicators[0])
    try:
        with pytest.raises(WorkbenchError, match="the communicator has 4 ranks"):
            llm.load(path, tensor_parallel=2)
    finally:
        dist.set_communicator(None)
    with pytest.raises(WorkbenchError, match="a number of ranks or a communicator"):
        llm.load(path, tensor_parallel="2")
    assert llm.load(path, tensor_parallel=1).tp.world_size == 1


def test_a_split_model_cannot_be_fine_tuned(tiny):
    from workbench.models.llm.trainable import TrainableTransformer

    _, path = tiny("llama", "F32", **WIDE)

    def build(comm):
        return TrainableTransformer(llm.load(path, tensor_parallel=comm).transformer)

    with pytest.raises(dist.DistributedError, match="split over 2 tensor-parallel ranks"):
        dist.run_threads(2, build)
