"""LoRA / QLoRA fine-tuning of a GGUF model, with adapters in peft's layout.

::

    from workbench.models.llm import finetune
    model = finetune.load("model.gguf")                    # TrainableTransformer, frozen base
    lora.apply(model, r=8, alpha=16)                      # the family's default targets
    data = finetune.ChatDataset.from_jsonl("chats.jsonl", llm.load("model.gguf"))
    for stats in finetune.train(model, data, steps=100, lr=2e-4, grad_accum=4): ...
    finetune.save_adapter(model, "adapter/")              # peft reads it; so does --adapter

The loss is the mean next-token cross-entropy over the labelled positions::

    L = -1/|M| Σ_{(b,t) ∈ M} log softmax(logits[b, t])[labels[b, t+1]]

with ``M`` the positions whose next label is not ``IGNORE`` (-100: prompts, padding), as
transformers computes it. Perplexity is ``exp(L)``.

Weight layout: the GGUF converter stores Llama's q/k projection rows permuted (llama.cpp rotates
pairs (2i, 2i+1), Hugging Face halves), so a Llama adapter's ``lora_B`` for ``q_proj`` /
``k_proj`` is permuted the same way on load and back on save: adapters stay exchangeable with
peft on the Hugging Face checkpoint.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...nn import lora_adapters
from ...nn.module import Module
from ...ops.creation import from_numpy
from ...ops.fused import log_softmax
from ...ops.indexing import gather
from ...optim import AdamW, clip_grad_norm_
from ...optim.lr_scheduler import LambdaLR
from ...quantized.convert_hf import _permute
from ...tensor import Tensor
from .llm import LLM
from .llm import load as load_llm
from .trainable import TrainableTransformer

IGNORE = -100


def causal_lm_loss(logits: Tensor, labels, ignore_index: int = IGNORE) -> Tensor:
    """Mean cross-entropy of ``logits[:, t]`` against ``labels[:, t + 1]`` (see module docs).

    logits: (B, T, V); labels: (B, T) integers, ``ignore_index`` where nothing is learnt.
    """
    labels = np.asarray(labels.numpy() if isinstance(labels, Tensor) else labels, np.int64)
    batch, length, vocab = logits.shape
    if labels.shape != (batch, length):
        raise ValueError(
            f"causal_lm_loss: labels of shape {labels.shape} do not match logits "
            f"{list(logits.shape)} (expected ({batch}, {length}))"
        )
    target = labels[:, 1:]
    keep = target != ignore_index
    count = int(keep.sum())
    if count == 0:
        raise ValueError("causal_lm_loss: every label is ignored: nothing to learn from")
    logp = log_softmax(logits.narrow(1, 0, length - 1), -1)
    picked = gather(logp, -1, from_numpy(np.where(keep, target, 0)[..., None]))
    weights = from_numpy((keep / count).astype(np.float32)[..., None])
    return -(picked * weights).sum()


def perplexity(losses: Sequence[float]) -> float:
    """exp of the mean loss."""
    return math.exp(float(np.mean(losses)))


# -- adapters ------------------------------------------------------------------------------
class _LlamaRows:
    """Llama's q/k rows as the GGUF file holds them (``lora_B`` rows follow the weight's)."""

    def __init__(self, n_head: int, n_head_kv: int):
        self.heads = {"q_proj": n_head, "k_proj": n_head_kv}

    def _heads(self, module: str, attr: str) -> int | None:
        return self.heads.get(module.rpartition(".")[2]) if attr == "lora_B" else None

    def from_file(self, module: str, attr: str, array: np.ndarray) -> np.ndarray:
        heads = self._heads(module, attr)
        return array if heads is None else _permute(array, heads)  # the converter's row order

    def to_file(self, module: str, attr: str, array: np.ndarray) -> np.ndarray:
        heads = self._heads(module, attr)
        if heads is None:
            return array
        rows = array.shape[0]
        return array.reshape(heads, rows // heads // 2, 2, -1).swapaxes(1, 2).reshape(array.shape)


def _convention(model: TrainableTransformer):
    c = model.config
    return _LlamaRows(c.n_head, c.n_head_kv) if c.arch == "llama" else None


def save_adapter(model: TrainableTransformer, path: str | os.PathLike) -> Path:
    """The model's adapters in peft's layout (``adapter_config.json`` + safetensors)."""
    return lora_adapters.save_adapter(
        model,
        path,
        base_model_name_or_path=getattr(model, "source", None),
        convention=_convention(model),
    )


def load_adapter(model: TrainableTransformer, path: str | os.PathLike) -> TrainableTransformer:
    """Add a peft-layout adapter to ``model`` (checked whole before anything changes)."""
    return lora_adapters.load_adapter(model, path, convention=_convention(model))


def load(path: str | os.PathLike, adapter: str | os.PathLike | None = None) -> TrainableTransformer:
    """A trainable model over the GGUF file's (quantized, frozen) weights, with an adapter."""
    model = TrainableTransformer(load_llm(path).transformer)
    model.source = os.fspath(path)
    return load_adapter(model, adapter) if adapter is not None else model


# Module names of TrainableTransformer -> the GGUF tensor each projection reads.
_GGUF_PROJECTIONS = {
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "self_attn.qkv_proj": "attn_qkv",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
    "mlp.gate_up_proj": "ffn_up",
}


def gguf_tensor_name(module: str) -> str:
    """``model.layers.3.mlp.down_proj`` -> ``blk.3.ffn_down.weight``; ``lm_head`` -> ``output``."""
    if module == "lm_head":
        return "output.weight"
    parts = module.split(".")
    if len(parts) == 5 and parts[:2] == ["model", "layers"]:
        suffix = _GGUF_PROJECTIONS.get(".".join(parts[3:]))
        if suffix is not None:
            return f"blk.{parts[2]}.{suffix}.weight"
    raise ValueError(f"merge: no GGUF tensor for module {module!r}")


def merge_to_gguf(
    model: TrainableTransformer,
    source: str | os.PathLike,
    path: str | os.PathLike,
    ggml_type: str | None = None,
) -> Path:
    """Write ``source`` with every adapter folded into its weight: W' = W + s · B A, encoded
    as ``ggml_type`` (default: the weight's own type). Other tensors and the metadata are
    copied unchanged, so the result loads anywhere a GGUF does (llama.cpp too)."""
    from ...nn.lora import lora_layers
    from ...quantized import QTensor
    from ...quantized.gguf_file import read_gguf, write_gguf

    layers = lora_layers(model)
    if not layers:
        raise ValueError("merge_to_gguf: the model has no LoRA layers")
    original = read_gguf(source)
    tensors = original.load()
    for name, layer in layers.items():
        target = gguf_tensor_name(name)
        base = tensors.get(target)
        if base is None:  # a tied head gets its own output matrix
            base = tensors["token_embd.weight"]
        merged = base.dequantize() + layer.delta_weight().detach()
        tensors[target] = QTensor.quantize(merged, ggml_type or base.ggml_dtype)
    write_gguf(path, original.kv, tensors)
    return Path(path)


# -- data ----------------------------------------------------------------------------------
@dataclass
class Example:
    ids: list[int]
    labels: list[int]  # IGNORE where the token is context, not a target


class ChatDataset:
    """Examples from JSONL: ``{"messages": [...]}`` (only the assistant turns are learnt),
    ``{"prompt": ..., "completion": ...}`` (only the completion) or ``{"text": ...}`` (all).
    Chats are rendered with the model file's chat template."""

    def __init__(self, examples: list[Example]):
        self.examples = examples

    def __len__(self) -> int:
        return len(self.examples)

    @classmethod
    def from_records(cls, records: Sequence[dict], lm: LLM, max_len: int = 1024) -> ChatDataset:
        return cls([_truncate(_example(r, lm, i), max_len) for i, r in enumerate(records)])

    @classmethod
    def from_jsonl(cls, path: str | os.PathLike, lm: LLM, max_len: int = 1024) -> ChatDataset:
        records = []
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{number}: not valid JSON ({exc})") from None
        return cls.from_records(records, lm, max_len)

    def batches(self, batch_size: int, pad_id: int, seed: int = 0) -> Iterator[tuple]:
        """Endless shuffled ``(ids, labels)`` batches, right-padded to the longest example."""
        rng = np.random.default_rng(seed)
        while True:
            order = rng.permutation(len(self.examples))
            for start in range(0, len(order) - batch_size + 1, batch_size):
                yield collate([self.examples[i] for i in order[start : start + batch_size]], pad_id)


def collate(examples: Sequence[Example], pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    length = max(len(e.ids) for e in examples)
    ids = np.full((len(examples), length), pad_id, np.int64)
    labels = np.full((len(examples), length), IGNORE, np.int64)
    for row, e in enumerate(examples):
        ids[row, : len(e.ids)] = e.ids
        labels[row, : len(e.labels)] = e.labels
    return ids, labels


def _example(record: dict, lm: LLM, index: int) -> Example:
    tok = lm.tokenizer
    if "messages" in record:
        ids: list[int] = []
        labels: list[int] = []
        messages = record["messages"]
        for turn in range(len(messages)):
            if messages[turn].get("role") != "assistant":
                continue
            context = _encode(lm, lm.apply_chat_template(messages[:turn], True))
            full = _encode(lm, lm.apply_chat_template(messages[: turn + 1], False))
            if full[: len(context)] != context:
                raise ValueError(
                    f"example {index}: the chat template's rendering of the "
                    "conversation does not extend its prompt"
                )
            labels += [IGNORE] * (len(context) - len(labels)) + full[len(context) :]
            ids = full
        if not ids:
            raise ValueError(f"example {index}: no assistant message to learn from")
        return Example(ids, labels)
    if "prompt" in record and "completion" in record:
        prompt = tok.encode(record["prompt"])
        completion = tok.encode(record["completion"], add_special=False)
        return Example(prompt + completion, [IGNORE] * len(prompt) + completion)
    if "text" in record:
        ids = tok.encode(record["text"])
        return Example(ids, list(ids))
    raise ValueError(
        f"example {index}: expected 'messages', 'prompt'+'completion' or 'text' "
        f"keys, found {sorted(record)}"
    )


def _encode(lm: LLM, text: str) -> list[int]:
    ids = lm.tokenizer.encode(text, add_special=False)
    tok = lm.tokenizer
    if tok.add_bos and (not ids or ids[0] != tok.bos_id):
        ids = [tok.bos_id, *ids]
    return ids


def _truncate(example: Example, max_len: int) -> Example:
    return Example(example.ids[:max_len], example.labels[:max_len])


# -- the loop ------------------------------------------------------------------------------
@dataclass
class StepStats:
    step: int
    loss: float
    lr: float
    grad_norm: float
    tokens: int


def warmup_cosine(warmup: int, steps: int, floor: float = 0.1):
    """lr factor: linear from 0 over ``warmup`` steps, then cosine down to ``floor``."""

    def factor(t: int) -> float:
        if t < warmup:
            return (t + 1) / warmup
        progress = min(1.0, (t - warmup) / max(1, steps - warmup))
        return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))

    return factor


def train(
    model: Module,
    data: ChatDataset,
    steps: int,
    lr: float = 2e-4,
    batch_size: int = 4,
    grad_accum: int = 1,
    warmup: int = 10,
    weight_decay: float = 0.0,
    max_grad_norm: float | None = 1.0,
    pad_id: int = 0,
    seed: int = 0,
) -> Iterator[StepStats]:
    """AdamW over the trainable (adapter) parameters with warm-up and cosine decay; each
    optimizer step sums ``grad_accum`` micro-batches (each loss divided by ``grad_accum``).
    Yields the statistics of every step (feed them to a live plot or a progress bar)."""
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("train: the model has no trainable parameters (call lora.apply)")
    optimizer = AdamW(params, lr=lr, weight_decay=weight_decay)
    schedule = LambdaLR(optimizer, warmup_cosine(warmup, steps))
    batches = data.batches(batch_size, pad_id, seed)
    model.train()
    for step in range(steps):
        optimizer.zero_grad()
        total, tokens = 0.0, 0
        for _ in range(grad_accum):
            ids, labels = next(batches)
            loss = causal_lm_loss(model(ids), labels) / grad_accum
            loss.backward()
            total += loss.item()
            tokens += int((labels[:, 1:] != IGNORE).sum())
        norm = clip_grad_norm_(params, max_grad_norm).item() if max_grad_norm else float("nan")
        current = optimizer.param_groups[0]["lr"]
        optimizer.step()
        schedule.step()
        yield StepStats(step, total, current, float(norm), tokens)


def evaluate(model: Module, data: ChatDataset, batch_size: int = 4, pad_id: int = 0) -> float:
    """Perplexity over every example of ``data`` (no gradients)."""
    from ...autograd import no_grad

    losses, weights = [], []
    with no_grad():
        for start in range(0, len(data), batch_size):
            ids, labels = collate(data.examples[start : start + batch_size], pad_id)
            losses.append(causal_lm_loss(model(ids), labels).item())
            weights.append(int((labels[:, 1:] != IGNORE).sum()))
    return math.exp(float(np.average(losses, weights=weights)))
