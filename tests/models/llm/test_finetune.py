"""LoRA fine-tuning of GGUF models against peft + transformers on the same tiny checkpoints.

``TrainableTransformer`` (autograd over the GGUF weights) must compute transformers' logits;
then LoRA on both sides, started from the same adapter weights and fed the same batches, must
follow the same losses for 20 AdamW steps, and adapters must move between the two.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")
peft = pytest.importorskip("peft")
pytest.importorskip("transformers")

from conftest import hf_logits  # noqa: E402

import workbench as wb  # noqa: E402
from workbench.models import llm  # noqa: E402
from workbench.models.llm import finetune  # noqa: E402
from workbench.models.llm.trainable import FrozenQLinear as TrainableQLinear  # noqa: E402
from workbench.models.llm.trainable import TrainableTransformer  # noqa: E402
from workbench.nn import lora  # noqa: E402

IDS = [3, 17, 250, 9, 41, 77, 5, 120, 33, 8, 61]


@pytest.mark.parametrize("family", ["llama", "qwen2", "phi3", "gemma3"])
def test_trainable_logits_match_transformers(tiny, family):
    model, path = tiny(family)
    trainable = TrainableTransformer(llm.load(path).transformer)
    ours = trainable(np.array([IDS])).numpy()[0]
    np.testing.assert_allclose(ours, hf_logits(model, IDS), rtol=1e-4, atol=1e-4)


def _pair(tiny, family, targets, folder):
    """(peft model, workbench TrainableTransformer with LoRA), same base and adapter weights:
    peft's adapter (B redrawn non-zero, so that it changes the output) goes through a file."""
    model, path = tiny(family)
    config = peft.LoraConfig(r=4, lora_alpha=8, target_modules=targets)
    theirs = peft.get_peft_model(copy.deepcopy(model), config)
    rng = np.random.default_rng(1)
    for p in theirs.parameters():
        if p.requires_grad:
            with torch.no_grad():
                p.copy_(torch.tensor(rng.normal(0, 0.1, p.shape), dtype=torch.float32))
    theirs.save_pretrained(folder)
    return theirs, finetune.load(path, adapter=folder)


@pytest.mark.parametrize("family", ["llama", "qwen2"])
def test_lora_training_follows_peft(tiny, family, tmp_path):
    theirs, ours = _pair(tiny, family, ["q_proj", "v_proj", "down_proj"], tmp_path / "a")
    trainable, _ = theirs.get_nb_trainable_parameters()
    assert ours.num_trainable_parameters() == trainable
    t_opt = torch.optim.AdamW([p for p in theirs.parameters() if p.requires_grad], lr=5e-3)
    o_opt = wb.optim.AdamW([p for p in ours.parameters() if p.requires_grad], lr=5e-3)
    rng = np.random.default_rng(0)
    batches = [rng.integers(0, 300, (2, 9)) for _ in range(2)]
    t_losses, o_losses = [], []
    for step in range(20):
        ids = batches[step % 2]
        labels = ids.copy()
        labels[:, :3] = -100  # a "prompt" that is not trained on
        out = theirs(input_ids=torch.tensor(ids), labels=torch.tensor(labels))
        t_opt.zero_grad()
        out.loss.backward()
        t_opt.step()
        loss = finetune.causal_lm_loss(ours(ids), labels)
        o_opt.zero_grad()
        loss.backward()
        o_opt.step()
        t_losses.append(out.loss.item())
        o_losses.append(loss.item())
    np.testing.assert_allclose(o_losses, t_losses, rtol=1e-4, atol=1e-5)
    assert t_losses[-1] < t_losses[0] - 0.05


@pytest.mark.parametrize("family", ["llama", "qwen2"])
def test_adapters_move_between_peft_and_workbench(tiny, family, tmp_path):
    theirs, ours = _pair(tiny, family, ["q_proj", "k_proj", "o_proj"], tmp_path / "a")
    ids = np.array([IDS])
    with torch.no_grad():
        reference = theirs(torch.tensor(ids)).logits.numpy()
    np.testing.assert_allclose(ours(ids).numpy(), reference, rtol=1e-4, atol=1e-4)
    # workbench -> file -> peft
    finetune.save_adapter(ours, tmp_path / "ours")
    model, path = tiny(family)
    loaded = peft.PeftModel.from_pretrained(copy.deepcopy(model), tmp_path / "ours")
    with torch.no_grad():
        np.testing.assert_allclose(
            loaded(torch.tensor(ids)).logits.numpy(), reference, rtol=1e-4, atol=1e-4
        )
    # peft -> file -> workbench happened in _pair: ours matched the reference above
    base = TrainableTransformer(llm.load(path).transformer)
    assert not np.allclose(base(ids).numpy(), reference, atol=1e-3)  # the adapter matters


def test_adapter_for_another_model_is_refused_before_loading(tiny, tmp_path):
    _pair(tiny, "qwen2", ["q_proj"], tmp_path / "qwen2")
    _, llama_path = tiny("llama")
    model = finetune.load(llama_path)
    bigger = wb.quantized.QTensor.quantize(wb.zeros(32, 64), "F32")
    model.model.layers[0].self_attn.q_proj = TrainableQLinear(bigger)
    with pytest.raises(lora.LoRAError, match=r"q_proj\.lora_B\.weight has shape \[64, 4\]"):
        finetune.load_adapter(model, tmp_path / "qwen2")
    assert not lora.lora_layers(model) and model.num_trainable_parameters() == 0


def test_causal_lm_loss_masks_prompts_and_padding():
    logits = wb.tensor(np.random.default_rng(0).normal(size=(2, 4, 7)).astype(np.float32))
    labels = np.array([[1, 2, 3, 4], [-100, -100, 5, -100]])
    ours = finetune.causal_lm_loss(logits, labels).item()
    t = torch.nn.functional.cross_entropy(
        torch.tensor(logits.numpy())[:, :-1].reshape(-1, 7),
        torch.tensor(labels)[:, 1:].reshape(-1),
        ignore_index=-100,
    )
    assert ours == pytest.approx(t.item(), rel=1e-6)
    assert finetune.perplexity([ours]) == pytest.approx(np.exp(ours))


@pytest.mark.parametrize("ggml_type", [None, "Q8_0"])
def test_merged_gguf_runs_like_the_adapter(tiny, tmp_path, ggml_type):
    # llama: q_proj's rows are permuted in the file; its head is not tied to the embedding
    _, ours = _pair(tiny, "llama", ["q_proj", "down_proj", "lm_head"], tmp_path / "a")
    _, path = tiny("llama")
    merged = finetune.merge_to_gguf(ours, path, tmp_path / "merged.gguf", ggml_type)
    lm = llm.load(merged)
    expected = ours(np.array([IDS])).numpy()[0]
    tol = 1e-4 if ggml_type is None else 0.05 * np.abs(expected).max()
    np.testing.assert_allclose(lm.logits(IDS), expected, rtol=1e-4, atol=tol)
    base = llm.load(path).logits(IDS)
    assert np.abs(base - expected).max() > 10 * tol  # the merge changed the model


def test_gradient_checkpointing_gives_the_same_gradients(tiny, tmp_path):
    _, plain = _pair(tiny, "qwen2", ["q_proj", "down_proj"], tmp_path / "a")
    _, path = tiny("qwen2")
    checkpointed = finetune.load(path, adapter=tmp_path / "a")
    checkpointed.gradient_checkpointing = True
    ids = np.array([IDS, IDS[::-1]])
    grads = []
    for model in (plain, checkpointed):
        loss = finetune.causal_lm_loss(model(ids), ids)
        assert ("checkpoint" in _node_names(loss)) == model.gradient_checkpointing
        loss.backward()
        grads.append({n: p.grad.numpy() for n, p in model.named_parameters() if p.requires_grad})
    assert grads[0].keys() == grads[1].keys() and len(grads[0]) == 8
    for name in grads[0]:
        np.testing.assert_allclose(grads[1][name], grads[0][name], rtol=1e-5, atol=1e-6)


def _node_names(t) -> set[str]:
    names, stack, seen = set(), [t], set()
    while stack:
        node = stack.pop()._node
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        names.add(node.name)
        stack.extend(i for i in node.inputs if i is not None)
    return names


def test_cli_applies_an_adapter(tiny, tmp_path, capsys):
    from workbench.models.llm.__main__ import main

    theirs, _ = _pair(tiny, "llama", ["q_proj", "down_proj"], tmp_path / "a")
    _, path = tiny("llama")
    lm = llm.load(path)
    prompt = lm.tokenizer.encode("Hello there")
    with torch.no_grad():
        out = theirs.generate(torch.tensor([prompt]), max_new_tokens=6, do_sample=False)
    expected = lm.tokenizer.decode(out[0, len(prompt) :].tolist())
    assert expected != lm.generate(prompt, 6)  # the adapter changes the continuation
    argv = ["--gguf", str(path), "--prompt", "Hello there", "-n", "6"]
    assert main([*argv, "--adapter", str(tmp_path / "a")]) == 0
    assert capsys.readouterr().out.rstrip("\n") == expected
    assert main([*argv, "--adapter", str(tmp_path / "missing")]) == 1
    assert "missing" in capsys.readouterr().err
