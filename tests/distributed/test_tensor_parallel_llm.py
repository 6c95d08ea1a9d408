"""``llm.load(path, tensor_parallel=W)`` against one process on the whole model.

The tiny random models of tests/models/llm (transformers, converted to GGUF): with a wider MLP
(128 features: 64 per rank at 2 ranks, whole Q8_0 blocks) in F32 and Q8_0; and K-quant files
(Q4_K, Q6_K: 256-element blocks) shaped so that the input columns of o and down split into
whole blocks over 4 ranks (n_embd 256, 8 heads of 128, 1024 MLP features). Under ``mpiexec``
(mpi_llm.py; 2 ranks, and 4 for the K-quant files) every position's logits are within a
tolerance of one process's (and of transformers' for F32), and the greedy continuation picks
the same tokens, up to a near tie (see ``dist_models.compare_greedy``); errors are checked
in-process on thread ranks.

Tolerances (max abs logit error, see ``_tolerance``): F32 files only change the order of
float sums (1e-5 of the largest logit). Quantized products quantize their activations too
(Q8_0 / Q8_K blocks, a step of 1/127 of the block's largest value): a split model rounds
them elsewhere (each rank its own slice before o and down, and the all-reduced sum's last
bits flip a rounding now and then), another draw of the error that one process makes against
float activations. That error, measured per file (one process against transformers on the
file's dequantized weights), is the bound; the split models measured here came within 0 to
0.24 of it (mpi_llm.py prints each), with two different builds of the kernels.
"""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from dist_models import greedy

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
# K-quants: 256 columns per block; o (8·128 inputs) and down (1024) give 256 per rank at 4.
KQUANT = {"hidden_size": 256, "intermediate_size": 1024, "num_attention_heads": 8,
          "num_key_value_heads": 8, "head_dim": 128}  # fmt: skip
KQUANT_FILES = [("llama", "Q4_K"), ("phi3", "Q6_K")]
PROMPT = "The tensor is sharded over two ranks; each one holds half of the heads."
NEW_TOKENS = 8
HANG = 300  # seconds; a launch still running then has hung


def _mpiexec_env():
    try:
        import mpi4py  # noqa: F401

        from workbench.distributed import run

        run.find_mpiexec()
    except Exception as e:  # noqa: BLE001
        pytest.fail(f"MPI is part of the dev extra (mpi4py + mpich); not usable here: {e}")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")  # ranks may outnumber cores
    env.pop("WORKBENCH_DIST_TIMEOUT", None)
    return env


def _tolerance(model, path, family: str, ggml_type: str, want: np.ndarray, ids) -> float:
    """Max abs error of a split model's logits against one process's ``want`` (module doc);
    never below the float-rounding bound of F32 files."""
    floats = 1e-5 * float(np.abs(want).max())
    if ggml_type == "F32":
        return floats
    reference = builders.hf_logits(builders.dequantized_reference(model, path, family), ids)
    return max(float(np.abs(want - reference).max()), floats)


def _case(tiny, tmp_path, family: str, ggml_type: str, config: dict) -> dict:
    """One model, and what one process computes with it, for mpi_llm.py."""
    model, path = tiny(family, ggml_type, **config)
    one = llm.load(path)
    ids = one.tokenizer.encode(PROMPT)
    name = f"{family}-{ggml_type}" + ("-kquant" if config is KQUANT else "")
    logits = one.logits(ids)
    case = {"name": name, "path": str(path), "ids": ids, "n_head_kv": one.config.n_head_kv,
            "new_tokens": NEW_TOKENS,
            "atol": _tolerance(model, path, family, ggml_type, logits, ids)}  # fmt: skip
    saved = {"single": logits}
    if ggml_type == "F32":  # and the independent reference
        saved["transformers"] = builders.hf_logits(model, ids)
    case["greedy"], saved["steps"] = greedy(one, ids, NEW_TOKENS)
    for key, array in saved.items():
        case[key] = str(tmp_path / f"{name}-{key}.npy")
        np.save(case[key], array)
    case["text"] = one.generate(ids, max_new_tokens=NEW_TOKENS)
    assert len(one.tokenizer.encode(case["text"], add_special=False)) > 2
    return case


@pytest.mark.parametrize("world", [2, 4], ids=["2ranks", "4ranks"])
def test_tensor_parallel_logits_and_generation_equal_one_process(tiny, tmp_path, world):
    cases = [_case(tiny, tmp_path, f, t, KQUANT) for f, t in KQUANT_FILES]
    if world == 2:  # these have 2 key/value heads
        cases += [_case(tiny, tmp_path, f, t, WIDE) for f in FAMILIES for t in ("F32", "Q8_0")]
        _, narrow = tiny("qwen2", "Q8_0")  # 96 MLP features: 48 per rank, not whole blocks
        cases.append({"name": "qwen2 Q8_0 n_ff=96", "path": str(narrow),
                      "error": "48 of its 96 columns, not a multiple of the Q8_0 block size "
                               "32"})  # fmt: skip
    spec = tmp_path / "cases.json"
    spec.write_text(json.dumps(cases))
    cmd = [sys.executable, "-m", "workbench.distributed.run", "-n", str(world),
           str(HERE / "mpi_llm.py"), str(spec)]  # fmt: skip
    try:
        done = subprocess.run(cmd, env=_mpiexec_env(), capture_output=True, text=True, timeout=HANG)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{' '.join(cmd)} hung for {HANG} s:\n{e.stdout}\n{e.stderr}")
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    for rank in range(world):
        assert f"rank {rank}: OK" in out, out
    print(out)  # how close each case came (pytest -s shows it)


@pytest.mark.parametrize(
    ("family", "ggml_type", "config", "world"),
    [("phi3", "Q8_0", WIDE, 2), ("llama", "Q4_K", KQUANT, 4)],
    ids=["phi3-Q8_0-fused-2ranks", "llama-Q4_K-4ranks"],
)
def test_thread_ranks_match_one_process(tiny, family, ggml_type, config, world):
    """The same split on in-process thread ranks (FakeCommunicator)."""
    model, path = tiny(family, ggml_type, **config)
    one = llm.load(path)
    ids = one.tokenizer.encode(PROMPT)[:20]
    want = one.logits(ids)
    atol = _tolerance(model, path, family, ggml_type, want, ids)
    got = dist.run_threads(world, lambda comm: llm.load(path, tensor_parallel=comm).logits(ids))
    for rank_logits in got:
        np.testing.assert_allclose(rank_logits, want, rtol=0, atol=atol)


def test_kquant_columns_that_do_not_split_into_blocks_are_refused(tiny):
    _, path = tiny("llama", "Q4_K", **KQUANT)  # o: 8 heads of 128 inputs, 128 per rank at 8
    message = (
        r"layer 0 of 2 \(llama\): Shard: blk.0.attn_output.weight \(Q4_K, shape \(256, "
        r"1024\)\) does not split over 8 ranks along its last dim: rank \d would hold 128 of its "
        "1024 columns, not a multiple of the Q4_K block size 256"
    )
    with pytest.raises(dist.DistributedError, match=message):
        dist.run_threads(8, lambda comm: llm.load(path, tensor_parallel=comm))


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
