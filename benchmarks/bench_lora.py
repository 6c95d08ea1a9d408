"""LoRA and QLoRA training steps on a small Llama: workbench against peft + torch (CPU).

The same random Llama (d=512, 4 layers, 8/4 heads, ff 1408, vocab 4096) is a transformers
checkpoint for peft and its GGUF conversion for workbench (F32 for LoRA, Q4_0 for QLoRA: the
base stays quantized; peft has no 4-bit CPU path, so its QLoRA column is the f32 model). One
step: a batch of 4 × 128 tokens forward, causal-LM loss, backward, AdamW on the rank-8
adapters of q/k/v/o. Tokens per second are the timings' inverse, so the ratio workbench /
torch below the table is time; ``python -m benchmarks.bench_lora`` also reports each side's
peak resident memory, one process each (target: >= 1.0× peft's tokens/s at <= 0.7× its peak).

Needs ``peft`` and ``transformers`` (benchmark references only).
"""

from __future__ import annotations

import functools
import json
import tempfile
from pathlib import Path

import numpy as np

from ._harness import Skip, Workload

CONFIG = dict(
    vocab_size=4096, hidden_size=512, intermediate_size=1408, num_hidden_layers=4,
    num_attention_heads=8, num_key_value_heads=4, max_position_embeddings=512,
)  # fmt: skip
BATCH, LENGTH, RANK = 4, 128, 8
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj"]


def _build(folder: Path) -> None:
    """A transformers Llama (with a byte-level BPE) in ``folder`` and its F32/Q4_0 GGUFs."""
    try:
        import torch
        import transformers
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    except ImportError as e:
        raise Skip(f"transformers is not installed ({e})") from e
    from workbench.quantized.convert_hf import convert_hf_checkpoint

    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**CONFIG)).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.ndim > 1:
                p.normal_(0, 0.05)
    model.save_pretrained(folder, safe_serialization=True)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text().splitlines()
    trainer = trainers.BpeTrainer(vocab_size=CONFIG["vocab_size"] - 1, special_tokens=["<s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)  # fmt: skip
    tok.train_from_iterator(text, trainer)
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({"bos_token": "<s>"}))
    for ggml_type in ("F32", "Q4_0"):
        convert_hf_checkpoint(folder, folder / f"model-{ggml_type}.gguf", ggml_type)


@functools.cache
def _folder() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="bench-lora-"))
    _build(folder)
    return folder


def _batch() -> tuple[np.ndarray, np.ndarray]:
    ids = np.random.default_rng(0).integers(0, CONFIG["vocab_size"], (BATCH, LENGTH))
    return ids, ids.copy()


def _workbench_step(folder: Path, ggml_type: str):
    import workbench as wb
    from workbench.models.llm import finetune
    from workbench.nn import lora

    model = finetune.load(folder / f"model-{ggml_type}.gguf")
    lora.apply(model, r=RANK, alpha=2 * RANK, target_modules=TARGETS)
    opt = wb.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    ids, labels = _batch()

    def step():
        loss = finetune.causal_lm_loss(model(ids), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    return step


def _peft_step(folder: Path):
    try:
        import peft
        import torch
        import transformers
    except ImportError as e:
        raise Skip(f"peft is not installed ({e})") from e

    model = transformers.LlamaForCausalLM.from_pretrained(folder)
    config = peft.LoraConfig(r=RANK, lora_alpha=2 * RANK, target_modules=TARGETS)
    model = peft.get_peft_model(model, config)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    ids, labels = (torch.tensor(a) for a in _batch())

    def step():
        loss = model(input_ids=ids, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    return step


def _make(ggml_type: str):
    def make():
        folder = _folder()
        return {"workbench": _workbench_step(folder, ggml_type), "torch": _peft_step(folder)}

    return make


WORKLOADS = [
    Workload("lora/llama-d512-l4/b4x128", _make("F32"), target=1.0,
             note="LoRA r=8 on q/k/v/o, F32 base; torch = peft", tolerance=5e-2),
    Workload("qlora/llama-d512-l4/b4x128", _make("Q4_0"), target=1.0,
             note="QLoRA: Q4_0 base (peft: f32 base)", tolerance=5e-1),
]  # fmt: skip


def _peak(impl: str, folder: Path, ggml_type: str, repeats: int) -> None:
    import resource
    import time

    step = _workbench_step(folder, ggml_type) if impl == "workbench" else _peft_step(folder)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tokens = BATCH * LENGTH / float(np.median(times))
    kind = ggml_type if impl == "workbench" else "f32"
    print(
        f"{impl} ({kind}): {tokens:.0f} tokens/s, peak RSS {peak / 1024:.0f} MiB "
        f"(+{(peak - base) / 1024:.0f} MiB over the model)"
    )


if __name__ == "__main__":
    import argparse
    import subprocess
    import sys

    p = argparse.ArgumentParser(description="LoRA/QLoRA step: tokens/s and peak memory")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--impl", default=None, help=argparse.SUPPRESS)
    p.add_argument("--type", default="F32", help=argparse.SUPPRESS)
    p.add_argument("--folder", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.impl:
        _peak(args.impl, Path(args.folder), args.type, args.repeats)
    else:
        folder = _folder()
        for impl, ggml_type in (("torch", "F32"), ("workbench", "F32"), ("workbench", "Q4_0")):
            subprocess.run([sys.executable, "-m", "benchmarks.bench_lora", "--impl", impl,
                            "--type", ggml_type, "--folder", str(folder),
                            "--repeats", str(args.repeats)], check=True)  # fmt: skip
