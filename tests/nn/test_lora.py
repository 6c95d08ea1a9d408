"""LoRA / QLoRA against peft 0.21 on the same small model, weights and data.

The model (embedding, attention-style projections, an MLP, a head) exists twice with the
same module names: once in torch (wrapped by peft), once in workbench. Its base weights are
copied from torch to workbench, and peft's freshly initialised adapter weights too, so both
start identical; then trainable names/counts, 20 AdamW steps of losses, adapter files in both
directions, merging, QLoRA gradients and bad adapters are compared.
"""

from __future__ import annotations

import json
import tracemalloc

import numpy as np
import pytest

torch = pytest.importorskip("torch")
peft = pytest.importorskip("peft")

import workbench as wb  # noqa: E402
from workbench import nn  # noqa: E402
from workbench.nn import lora  # noqa: E402
from workbench.nn.lora_adapters import load_adapter, save_adapter  # noqa: E402
from workbench.quantized import QLinear  # noqa: E402

VOCAB, DIM, HIDDEN = 17, 12, 24
TARGETS = ["q_proj", "v_proj", "mlp.up", "embed"]


class TorchBlock(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, DIM)
        self.q_proj = torch.nn.Linear(DIM, DIM)
        self.v_proj = torch.nn.Linear(DIM, DIM, bias=False)
        self.mlp = torch.nn.ModuleDict(
            {"up": torch.nn.Linear(DIM, HIDDEN), "down": torch.nn.Linear(HIDDEN, DIM)}
        )
        self.head = torch.nn.Linear(DIM, VOCAB)

    def forward(self, ids):
        h = self.embed(ids)
        h = h + torch.tanh(self.q_proj(h)) * self.v_proj(h)
        h = h + self.mlp["down"](torch.nn.functional.silu(self.mlp["up"](h)))
        return self.head(h)


class WbBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.q_proj = nn.Linear(DIM, DIM)
        self.v_proj = nn.Linear(DIM, DIM, bias=False)
        self.mlp = nn.ModuleDict({"up": nn.Linear(DIM, HIDDEN), "down": nn.Linear(HIDDEN, DIM)})
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, ids):
        h = self.embed(ids)
        h = h + wb.tanh(self.q_proj(h)) * self.v_proj(h)
        h = h + self.mlp["down"](wb.silu(self.mlp["up"](h)))
        return self.head(h)


def _pair(r=4, alpha=8.0, use_rslora=False):
    """(peft model, workbench model), identical base and adapter weights."""
    torch.manual_seed(0)
    base = TorchBlock()
    ours = WbBlock()
    ours.load_state_dict({k: v.detach().numpy() for k, v in base.state_dict().items()})
    config = peft.LoraConfig(r=r, lora_alpha=alpha, target_modules=TARGETS, use_rslora=use_rslora)
    theirs = peft.get_peft_model(base, config)
    lora.apply(ours, r=r, alpha=alpha, target_modules=TARGETS, use_rslora=use_rslora)
    _copy_adapters(theirs, ours)
    return theirs, ours


def _copy_adapters(theirs, ours) -> None:
    for name, p in theirs.named_parameters():
        if p.requires_grad:
            ours_name = _our_name(name)
            target = dict(ours.named_parameters())[ours_name]
            target.detach().copy_(wb.tensor(p.detach().numpy()))


def _our_name(peft_name: str) -> str:
    name = peft_name.removeprefix("base_model.model.")
    return name.replace(".default.weight", "").replace(".default", "")


def _batch(seed):
    rng = np.random.default_rng(seed)
    return rng.integers(0, VOCAB, (3, 5)), rng.integers(0, VOCAB, (3, 5))


def _logits_both(theirs, ours, ids):
    t = theirs(torch.tensor(ids)).detach().numpy()
    o = ours(wb.tensor(ids)).numpy()
    return t, o


def test_trainable_parameters_match_peft():
    theirs, ours = _pair()
    peft_names = sorted(_our_name(n) for n, p in theirs.named_parameters() if p.requires_grad)
    our_names = sorted(n for n, p in ours.named_parameters() if p.requires_grad)
    assert our_names == peft_names
    trainable, _ = theirs.get_nb_trainable_parameters()
    assert ours.num_trainable_parameters() == trainable
    # the adapters depend on the input: a trained B makes outputs move
    assert len(our_names) == 2 * len(TARGETS)


@pytest.mark.parametrize("use_rslora", [False, True])
def test_twenty_adamw_steps_match_peft(use_rslora):
    theirs, ours = _pair(use_rslora=use_rslora)
    t_opt = torch.optim.AdamW([p for p in theirs.parameters() if p.requires_grad], lr=1e-2)
    o_opt = wb.optim.AdamW([p for p in ours.parameters() if p.requires_grad], lr=1e-2)
    t_losses, o_losses = [], []
    for step in range(20):
        ids, labels = _batch(step % 2)  # two batches, so that the loss falls
        t_loss = torch.nn.functional.cross_entropy(
            theirs(torch.tensor(ids)).reshape(-1, VOCAB), torch.tensor(labels).reshape(-1)
        )
        t_opt.zero_grad()
        t_loss.backward()
        t_opt.step()
        o_loss = nn.functional.cross_entropy(
            ours(wb.tensor(ids)).reshape(-1, VOCAB), wb.tensor(labels).reshape(-1)
        )
        o_opt.zero_grad()
        o_loss.backward()
        o_opt.step()
        t_losses.append(t_loss.item())
        o_losses.append(o_loss.item())
    np.testing.assert_allclose(o_losses, t_losses, rtol=2e-5, atol=2e-6)
    assert t_losses[-1] < t_losses[0] - 0.1  # it trained: the comparison is not vacuous
    ids, _ = _batch(99)
    t, o = _logits_both(theirs, ours, ids)
    np.testing.assert_allclose(o, t, rtol=1e-4, atol=1e-5)


def _trained_pair():
    theirs, ours = _pair()
    # give B (zeros at init) values so that the adapters change the output
    rng = np.random.default_rng(3)
    for p in theirs.parameters():
        if p.requires_grad:
            with torch.no_grad():
                p.copy_(torch.tensor(rng.normal(0, 0.3, p.shape), dtype=torch.float32))
    _copy_adapters(theirs, ours)
    return theirs, ours


def test_workbench_adapter_loads_into_peft(tmp_path):
    theirs, ours = _trained_pair()
    save_adapter(ours, tmp_path / "adapter", task_type=None)  # not a transformers model
    config = json.loads((tmp_path / "adapter" / "adapter_config.json").read_text())
    assert config["peft_type"] == "LORA" and config["r"] == 4
    torch.manual_seed(0)
    fresh = peft.PeftModel.from_pretrained(TorchBlock(), tmp_path / "adapter")
    ids, _ = _batch(5)
    np.testing.assert_allclose(
        fresh(torch.tensor(ids)).detach().numpy(), ours(wb.tensor(ids)).numpy(), rtol=1e-5,
        atol=1e-5,
    )  # fmt: skip
    torch.manual_seed(0)
    plain = TorchBlock()  # the same seed-0 base without the adapter differs
    assert not np.allclose(plain(torch.tensor(ids)).detach().numpy(), ours(wb.tensor(ids)).numpy())


def test_peft_adapter_loads_into_workbench(tmp_path):
    theirs, _ = _trained_pair()
    theirs.save_pretrained(tmp_path / "peft")
    ours = WbBlock()
    ours.load_state_dict(
        {k: v.detach().numpy() for k, v in theirs.get_base_model().state_dict().items()
         if "lora_" not in k and "base_layer" not in k} | _base_weights(theirs)
    )  # fmt: skip
    load_adapter(ours, tmp_path / "peft")
    ids, _ = _batch(6)
    t, o = _logits_both(theirs, ours, ids)
    np.testing.assert_allclose(o, t, rtol=1e-5, atol=1e-5)


def _base_weights(theirs) -> dict:
    """Base weights of adapted modules (peft renames them ``<name>.base_layer.weight``)."""
    return {
        k.replace(".base_layer", ""): v.detach().numpy()
        for k, v in theirs.get_base_model().state_dict().items()
        if ".base_layer." in k
    }


def test_merge_and_unmerge_agree_with_the_unmerged_output():
    _, ours = _trained_pair()
    ids, _ = _batch(7)
    before = ours(wb.tensor(ids)).numpy()
    lora.merge(ours)
    np.testing.assert_allclose(ours(wb.tensor(ids)).numpy(), before, rtol=1e-5, atol=1e-5)
    lora.unmerge(ours)
    np.testing.assert_allclose(ours(wb.tensor(ids)).numpy(), before, rtol=1e-5, atol=1e-5)


def test_bad_adapters_name_the_problem_and_load_nothing(tmp_path):
    _, ours = _trained_pair()
    save_adapter(ours, tmp_path / "a")

    class Smaller(WbBlock):
        def __init__(self):
            super().__init__()
            self.q_proj = nn.Linear(DIM, DIM - 2)

    other = Smaller()
    params_before = {n: p.numpy().copy() for n, p in other.named_parameters()}
    with pytest.raises(lora.LoRAError, match=r"q_proj\.lora_B\.weight has shape \[12, 4\]"):
        load_adapter(other, tmp_path / "a")
    assert not lora.lora_layers(other)
    for n, p in other.named_parameters():
        np.testing.assert_array_equal(p.numpy(), params_before[n])

    renamed = WbBlock()
    renamed.mlp = nn.ModuleDict({"gate": nn.Linear(DIM, HIDDEN), "down": nn.Linear(HIDDEN, DIM)})
    with pytest.raises(lora.LoRAError, match=r"match no module.*mlp\.up"):
        load_adapter(renamed, tmp_path / "a")
    with pytest.raises(lora.LoRAError, match="not found"):
        load_adapter(WbBlock(), tmp_path / "missing")


def test_apply_errors_are_clear():
    with pytest.raises(lora.LoRAError, match="no module matches"):
        lora.apply(WbBlock(), target_modules=["k_proj"])
    with pytest.raises(lora.LoRAError, match="no default target_modules"):
        lora.apply(WbBlock())
    with pytest.raises(lora.LoRAError, match="rank r must be >= 1"):
        lora.apply(WbBlock(), r=0, target_modules=["q_proj"])


@pytest.mark.parametrize("ggml_type", ["Q8_0", "Q4_K"])
def test_qlora_gradients_equal_the_dequantized_base(ggml_type):
    """QLoRA on a quantized base: adapter and input gradients equal LoRA on the same weights
    decoded to f32 (the quantization is in both; only the product differs)."""
    rng = np.random.default_rng(0)
    in_features, out_features = 256, 96
    float_base = nn.Linear(in_features, out_features)
    q_base = QLinear.from_linear(float_base, ggml_type)
    float_base.weight.detach().copy_(q_base.weight.dequantize())
    qlayer, flayer = (
        lora.LoRALinear(q_base, r=4, alpha=8),
        lora.LoRALinear(float_base, r=4, alpha=8),
    )
    b = rng.normal(0, 0.2, (out_features, 4)).astype(np.float32)
    for layer in (qlayer, flayer):
        layer.lora_A.detach().copy_(flayer.lora_A.detach())
        layer.lora_B.detach().copy_(wb.tensor(b))
    x_np = rng.normal(0, 1, (3, in_features)).astype(np.float32)
    g_np = rng.normal(0, 1, (3, out_features)).astype(np.float32)
    grads = []
    for layer in (qlayer, flayer):
        x = wb.Var(wb.tensor(x_np))
        (layer(x) * wb.tensor(g_np)).sum().backward()
        grads.append((x.grad.numpy(), layer.lora_A.grad.numpy(), layer.lora_B.grad.numpy()))
    for q, f in zip(grads[0], grads[1], strict=True):
        np.testing.assert_allclose(q, f, rtol=1e-4, atol=1e-4)
    assert float_base.weight.grad is None and np.abs(grads[0][0]).max() > 0.1


def test_qlora_training_memory_stays_below_the_f32_weight():
    """One QLoRA step on a Q4_0 base of 2048 x 2048 (16 MiB as f32): the step's peak of new
    allocations (tracemalloc sees numpy's) stays well below the f32 weight's size."""
    float_base = nn.Linear(2048, 2048, bias=False)
    layer = lora.LoRALinear(QLinear.from_linear(float_base, "Q4_0"), r=8, alpha=16)
    del float_base
    x = wb.Var(wb.randn(4, 2048))
    tracemalloc.start()
    try:
        layer(x).sum().backward()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    f32_bytes = 2048 * 2048 * 4
    assert x.grad is not None and layer.lora_A.grad is not None
    assert peak < 0.5 * f32_bytes, f"peak {peak / 2**20:.1f} MiB"
