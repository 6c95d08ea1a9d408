"""Logits of every family against transformers: the original model for F32 files, and the
model holding the file's decoded weights (gguf-py's decoder) for F16 / Q8_0 / Q4_0 files."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FAMILIES, dequantized_reference, greedy_ids, hf_logits

from workbench.models import llm

PROMPT = "The model reads: numbers 12345, café, 東京 🙂.\n\tTabs and  spaces repeat. " * 2


def _close(a, b, tol):
    scale = np.abs(b).max()
    assert np.abs(a - b).max() <= tol * scale, (np.abs(a - b).max(), scale)


@pytest.mark.parametrize("family", FAMILIES)
def test_f32_logits_match_transformers(tiny, family):
    model, path = tiny(family, "F32")
    lm = llm.load(path)
    ids = lm.tokenizer.encode(PROMPT)
    assert len(ids) > 2 * 6, "the prompt must pass the sliding windows (6)"
    ref = hf_logits(model, ids)
    _close(lm.logits(ids), ref, 1e-5)
    other = hf_logits(model, ids[::-1])  # the logits depend on the input
    assert np.abs(other[-1] - ref[-1]).max() > 0.1 * np.abs(ref).max()


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("ggml_type", ["F16", "Q8_0", "Q4_0"])
def test_quantized_logits_match_transformers_on_decoded_weights(tiny, family, ggml_type):
    model, path = tiny(family, ggml_type)
    lm = llm.load(path)
    ids = lm.tokenizer.encode(PROMPT)[:40]
    ref = hf_logits(dequantized_reference(model, path, family), ids)
    got = lm.logits(ids)
    if ggml_type == "F16":
        _close(got, ref, 1e-4)
    else:  # QMatMul rounds the activations to 8 bits per block as well (as llama.cpp does)
        assert np.linalg.norm(got - ref) <= 0.06 * np.linalg.norm(ref)
    # ... and within the quantization's reach of the float model: relative RMS error.
    bound = {"F16": 5e-3, "Q8_0": 0.1, "Q4_0": 0.8}[ggml_type]  # random nets amplify
    a, b = lm.logits(ids), hf_logits(model, ids)
    assert np.linalg.norm(a - b) <= bound * np.linalg.norm(b)


@pytest.mark.parametrize("family", ["llama", "qwen3", "gemma2", "gemma3"])
def test_greedy_continuation_equals_transformers(tiny, family):
    import torch

    model, path = tiny(family, "F32")
    lm = llm.load(path)
    ids = lm.tokenizer.encode("Hello world, the")
    with torch.no_grad():
        out = model.generate(
            torch.tensor([ids]),
            max_new_tokens=20,
            do_sample=False,
            min_new_tokens=20,
            eos_token_id=None,
            pad_token_id=0,
        )
    expected = out[0, len(ids) :].tolist()
    assert greedy_ids(lm, ids, 20) == expected
    stops = [i for i, t in enumerate(expected) if t in lm.tokenizer.stop_ids]
    text = lm.tokenizer.decode(expected[: stops[0] if stops else None], skip_special=True)
    assert lm.generate(ids, 20) == text


@pytest.mark.parametrize("family", ["llama", "mistral", "gemma2", "gemma3"])
def test_cached_decoding_equals_full_recompute(tiny, family):
    """Token-by-token and chunked (ring-wrapping) decoding give the full pass's logits.

    F16 weights: their products take exact f32 activations. With Q8_0/Q4_0 weights the
    activations are rounded to 8 bits per block (as llama.cpp does), so a last-bit difference
    from another attention length can move a value across a rounding boundary and the paths
    then differ by one quantization step; the quantized kernels' own tests check that a row
    gives the same result alone or in a batch."""
    _, path = tiny(family, "F16")
    lm = llm.load(path)
    ids = lm.tokenizer.encode(PROMPT)[:30]
    full = lm.logits(ids)
    tf = lm.transformer
    for chunk in (1, 4):
        cache = tf.new_cache(1, 64, chunk=chunk)
        step = tf.forward([ids[:5]], [0], cache, all_logits=True)[0]
        rows = [step]
        for i in range(5, len(ids), 3):
            rows.append(tf.forward([ids[i : i + 3]], [0], cache, all_logits=True)[0])
        np.testing.assert_allclose(np.concatenate(rows), full, rtol=0, atol=2e-4)
        if family != "llama":
            assert cache.cells[1] == 6 + chunk < len(ids)  # the ring wrapped


@pytest.mark.parametrize("family", ["qwen2", "gemma3", "phi3"])
def test_batch_step_equals_each_sequence_alone(tiny, family):
    _, path = tiny(family, "F16")  # exact activations: see test_cached_decoding_...
    lm = llm.load(path)
    tf = lm.transformer
    seqs = [lm.tokenizer.encode(t) for t in ("Hello there", PROMPT[:50], "x")]
    alone = [lm.logits(s)[-1] for s in seqs]
    cache = tf.new_cache(4, 96, chunk=8)
    got = tf.forward(seqs, [3, 0, 1], cache)
    np.testing.assert_allclose(got, np.stack(alone), atol=2e-4, rtol=0)
    nxt = [int(np.argmax(g)) for g in got]  # one decode step of all three, then of two
    got2 = tf.forward([[t] for t in nxt], [3, 0, 1], cache)
    for s, t, g in zip(seqs, nxt, got2, strict=True):
        np.testing.assert_allclose(g, lm.logits([*s, t])[-1], atol=2e-4, rtol=0)
    cache.reset(0)
    got3 = tf.forward([seqs[1][:7], [nxt[2]]], [0, 1], cache)
    np.testing.assert_allclose(got3[0], lm.logits(seqs[1][:7])[-1], atol=2e-4, rtol=0)
    np.testing.assert_allclose(
        got3[1], lm.logits([*seqs[2], nxt[2], nxt[2]])[-1], atol=2e-4, rtol=0
    )


def test_gguf_py_writer_file_runs_the_same(tiny, tmp_path):
    """The same tensors and metadata written by gguf-py's GGUFWriter load and give the same
    logits."""
    import gguf

    _, path = tiny("qwen3", "Q8_0")
    reader = gguf.GGUFReader(str(path))
    out = tmp_path / "gguf-py.gguf"
    writer = gguf.GGUFWriter(str(out), arch="qwen3")
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name == "general.architecture":
            continue
        vtype = field.types[0]
        if vtype == gguf.GGUFValueType.ARRAY:
            writer.add_array(field.name, field.contents())
        else:
            writer.add_key_value(field.name, field.contents(), vtype)
    for t in reader.tensors:
        shape = tuple(reversed([int(d) for d in t.shape]))
        writer.add_tensor(
            t.name,
            np.asarray(t.data),
            raw_shape=shape if t.tensor_type in (gguf.GGMLQuantizationType.F32,) else None,
            raw_dtype=t.tensor_type,
        )
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    a, b = llm.load(path), llm.load(out)
    ids = a.tokenizer.encode(PROMPT)
    assert b.tokenizer.encode(PROMPT) == ids
    np.testing.assert_array_equal(a.logits(ids), b.logits(ids))
