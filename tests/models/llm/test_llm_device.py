"""``llm.load(path, device=...)``: the model on a GPU, against the CPU model and transformers.

On Linux the GPU is the fake Metal device whose generated kernels run on the host
(``tests/metal/host_metal.py``): the real Metal host code, the shared GPU storage
(``backends/gpu``) and the real kernel sources, quantized matvec included; a real CUDA or
Metal device runs the same tests where one is present. The host run is slow (a block's
threads are fibers), so the models are tiny and decoding runs a few steps.

The device multiplies with f32 activations where the CPU kernels round them to 8 bits per
block (as llama.cpp does), so on quantized files the device is compared tightly with
transformers holding the file's decoded weights, and within the activations' rounding with
the CPU model.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import dequantized_reference, greedy_ids, hf_logits
from devices import AVAILABILITY

import workbench as wb
from workbench.errors import WorkbenchError
from workbench.models import llm

PROMPT = "The model reads: numbers 12345, café, 東京 🙂.\n\tTabs and  spaces repeat. " * 2
# Q4_K needs rows of whole 256-value blocks (narrower matrices fall back to Q5_0 / Q8_0).
MODELS = {
    "F32": ("qwen2", {}),
    "Q8_0": ("qwen2", {}),
    "Q4_K": ("qwen3", {"hidden_size": 256, "intermediate_size": 256}),
}
ON_MACOS = pytest.mark.skipif(sys.platform == "darwin", reason="macOS: the real Metal runs")
DEVICES = [
    pytest.param("host-metal", marks=ON_MACOS),
    *(
        pytest.param(kind, marks=pytest.mark.skipif(not ok, reason=f"no {kind} device"))
        for kind, (ok, _) in AVAILABILITY.items()
        if kind != "cpu"
    ),
]


@pytest.fixture(scope="module", params=DEVICES)
def device(request):
    if request.param != "host-metal":
        yield wb.Device(request.param)
        return
    sys.path.insert(0, str(Path(__file__).parents[2] / "metal"))
    from host_metal import install_host_device

    from workbench.backends.metal import driver, runtime

    _, _, previous = install_host_device()
    metal = wb.Device("metal")
    yield metal
    driver.set_driver(previous)
    runtime.reset()
    object.__setattr__(metal, "_backend", None)  # the Device remembers the fake's backend


def _close(a, b, tol):
    scale = np.abs(b).max()
    assert np.abs(a - b).max() <= tol * scale, (np.abs(a - b).max(), scale)


def _model(tiny, ggml_type):
    family, overrides = MODELS[ggml_type]
    model, path = tiny(family, ggml_type, **overrides)
    return family, model, path


@pytest.mark.parametrize("ggml_type", list(MODELS))
def test_logits_at_every_position_match_cpu_and_transformers(tiny, device, ggml_type):
    family, model, path = _model(tiny, ggml_type)
    cpu = llm.load(path)
    gpu = llm.load(path, device=device, kv_dtype="f32")
    assert gpu.transformer.blocks[0].q.mm._on_device  # the blocks live on the device
    ids = cpu.tokenizer.encode(PROMPT)[:24]
    got, on_cpu = gpu.logits(ids), cpu.logits(ids)
    if ggml_type == "F32":
        _close(got, hf_logits(model, ids), 1e-5)
        _close(got, on_cpu, 1e-5)
    else:  # f32 activations: transformers on the decoded weights, up to f32 rounding
        _close(got, hf_logits(dequantized_reference(model, path, family), ids), 1e-4)
        assert np.linalg.norm(got - on_cpu) <= 0.06 * np.linalg.norm(on_cpu)


@pytest.mark.parametrize("ggml_type", list(MODELS))
def test_cached_decoding_equals_recompute_and_greedy_tokens(tiny, device, ggml_type):
    """Three decode steps (the quantized matvec: one row) with the KV cache give the logits
    of the full pass; the greedy tokens are the CPU model's (F32) or, where the CPU rounds
    its activations, those of transformers on the decoded weights (teacher-forced: the same
    argmaxes); ``generate`` (the default f16 cache) gives them too."""
    family, model, path = _model(tiny, ggml_type)
    cpu = llm.load(path)
    gpu = llm.load(path, device=device)
    ids = cpu.tokenizer.encode(PROMPT)[:12]
    tf = gpu.transformer
    cache = tf.new_cache(1, 32, kv_dtype="f32")
    logits = [tf.forward([ids], [0], cache)[0]]
    tokens = []
    for _ in range(3):
        tokens.append(int(np.argmax(logits[-1])))
        logits.append(tf.forward([[tokens[-1]]], [0], cache)[0])
    tokens.append(int(np.argmax(logits[-1])))
    recompute = tf.forward([ids + tokens], [0], tf.new_cache(1, 32, kv_dtype="f32"), True)[0]
    _close(np.stack(logits), recompute[len(ids) - 1 : -1], 1e-5)
    if ggml_type == "F32":
        assert tokens == greedy_ids(cpu, ids, 4)
    else:
        ref = hf_logits(dequantized_reference(model, path, family), ids + tokens[:-1])
        assert tokens == ref[len(ids) - 1 :].argmax(-1).tolist()
    first = tokens[:2]  # two tokens: one decode step
    stops = [i for i, t in enumerate(first) if t in cpu.tokenizer.stop_ids]
    text = cpu.tokenizer.decode(first[: stops[0] if stops else None], skip_special=True)
    assert gpu.generate(ids, 2) == text


@pytest.mark.parametrize("family", ["gemma2", "phi3"])
def test_ring_batch_and_fused_projections_on_f32(tiny, device, family):
    """gemma2: soft-capped scores, post norms, sliding-window rings that wrap (chunks of 4);
    phi3: fused qkv and gate/up. Several sequences in one step, each in its own slot."""
    _, path = tiny(family, "F32")
    cpu = llm.load(path)
    gpu = llm.load(path, device=device)
    ids = cpu.tokenizer.encode(PROMPT)[:18]
    tf = gpu.transformer
    cache = tf.new_cache(2, 32, chunk=4)
    got = tf.forward([ids, ids[:5]], [1, 0], cache, all_logits=True)
    _close(got[0], cpu.logits(ids), 1e-5)
    _close(got[1], cpu.logits(ids[:5]), 1e-5)
    if family == "gemma2":
        assert cache.cells[1] == 6 + 4 < len(ids)  # the ring wrapped
    step = tf.forward([[7], [9]], [0, 1], cache)
    _close(step[0], cpu.logits([*ids[:5], 7])[-1], 1e-5)
    _close(step[1], cpu.logits([*ids, 9])[-1], 1e-5)


def test_unknown_or_unusable_device_is_a_clear_error(tiny):
    _, path = tiny("qwen2", "F32")
    with pytest.raises(WorkbenchError, match=r"llm.load\(device='tpu'\): unknown device"):
        llm.load(path, device="tpu")
    if not AVAILABILITY["cuda"][0]:
        with pytest.raises(WorkbenchError, match=r"llm.load\(device='cuda:0'\).*not available"):
            llm.load(path, device="cuda:0")
    assert llm.load(path, device=wb.Device("cpu")).device.is_cpu
