"""The converter's GGUF files in llama.cpp (through llama-cpp-python): they load, tokenize as
``workbench.models.llm`` does, and llama.cpp's logits agree with transformers' (F32 files: the
original model; F16 files: the model holding the file's decoded weights) and with workbench's
on the same quantized file.

llama-cpp-python builds llama.cpp from source (minutes), so ``make test`` does not install it:
``make test-llamacpp`` builds the wheel once and runs this file.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
from conftest import FAMILIES, ROPE_SCALED, dequantized_reference, hf_logits

from workbench.models import llm

llama_cpp = pytest.importorskip("llama_cpp")

PROMPT = "The model reads: numbers 12345, café, 東京 🙂.\n\tTabs and  spaces repeat. " * 2
ALL = FAMILIES + list(ROPE_SCALED)
GGML_TYPE_F32 = 0  # llama.cpp's KV cache in f32 (its default f16 would round every key)
# Largest |difference| / largest |logit| on F32 files: llama.cpp's GELU (gemma) reads a table
# indexed by the input rounded to f16; its SiLU is computed in f32.
F32_TOLERANCE = {"silu": 1e-4, "gemma": 1e-3}


def llama_cpp_logits(path, ids) -> tuple[np.ndarray, list[int]]:
    """(logits of every position (len(ids), n_vocab), llama.cpp's own ids for PROMPT)."""
    model = llama_cpp.Llama(
        model_path=str(path),
        n_ctx=256,
        n_batch=256,
        logits_all=True,
        n_threads=1,
        type_k=GGML_TYPE_F32,
        type_v=GGML_TYPE_F32,
        verbose=False,
    )
    try:
        own = model.tokenize(PROMPT.encode(), add_bos=False, special=False)
        model.eval(ids)
        return np.array(model.scores[: len(ids)], np.float64), own
    finally:
        model.close()


def _close(a, b, tol):
    scale = np.abs(b).max()
    assert np.abs(a - b).max() <= tol * scale, (np.abs(a - b).max(), scale)


def _full_attention(model):
    """Mistral's model with its sliding window off: llama.cpp's ``llama`` architecture has no
    sliding window (llama.cpp's converter drops Mistral's), so it computes this."""
    full = copy.deepcopy(model)
    full.config.sliding_window = None
    return full


@pytest.mark.parametrize("family", ALL)
def test_llama_cpp_f32_logits_match_transformers(tiny, family):
    model, path = tiny(family, "F32")
    lm = llm.load(path)
    ids = lm.tokenizer.encode(PROMPT)
    got, own_ids = llama_cpp_logits(path, ids)
    assert own_ids == ids  # the tokenizer metadata means the same to llama.cpp
    ref = hf_logits(model, ids)
    if family == "mistral":
        window = model.config.sliding_window
        _close(got[:window], ref[:window], 1e-4)  # the window has not started to slide yet
        ref = hf_logits(_full_attention(model), ids)
    _close(got, ref, F32_TOLERANCE["gemma" if family.startswith("gemma") else "silu"])


def _decoded_reference(model, path, family):
    reference = dequantized_reference(model, path, family)
    return _full_attention(reference) if family == "mistral" else reference


@pytest.mark.parametrize("family", ALL)
@pytest.mark.parametrize("ggml_type", ["F16", "Q8_0", "Q4_0"])
def test_llama_cpp_quantized_logits_match_transformers_on_decoded_weights(tiny, family, ggml_type):
    """Relative RMS error against transformers on the file's decoded weights: llama.cpp rounds
    the activations to f16 for f16 weights, to 8 bits per block for Q8_0/Q4_0 ones (as
    workbench does; test_llm_parity allows workbench the same 0.06)."""
    model, path = tiny(family, ggml_type)
    ids = llm.load(path).tokenizer.encode(PROMPT)[:40]
    got, _ = llama_cpp_logits(path, ids)
    ref = hf_logits(_decoded_reference(model, path, family), ids)
    bound = 5e-3 if ggml_type == "F16" else 0.06
    assert np.linalg.norm(got - ref) <= bound * np.linalg.norm(ref)
