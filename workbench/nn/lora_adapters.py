"""LoRA adapters on disk in peft's layout, so peft and workbench read each other's.

A folder holds ``adapter_config.json`` (``peft_type: "LORA"``, ``r``, ``lora_alpha``,
``target_modules``, ``use_rslora``, ...) and ``adapter_model.safetensors`` with, per adapted
module ``<name>``::

    base_model.model.<name>.lora_A.weight        (r, in)      Linear
    base_model.model.<name>.lora_B.weight        (out, r)
    base_model.model.<name>.lora_embedding_A     (r, num)     Embedding
    base_model.model.<name>.lora_embedding_B     (dim, r)
    base_model.model.<name>.base_layer.weight    peft's copy of an adapted embedding/head

``names`` maps workbench module names to the checkpoint's where a model's names differ from
its reference implementation's; ``convention`` (``from_file(module, attr, array)`` and
``to_file``) re-lays an adapter's arrays where the model stores a weight in another layout
(e.g. the row order of a GGUF file's Llama q/k projections).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..io.safetensors import load_safetensors, save_safetensors
from ..ops.creation import from_numpy
from ..tensor import Tensor
from . import lora
from .module import Module

CONFIG = "adapter_config.json"
WEIGHTS = "adapter_model.safetensors"
PREFIX = "base_model.model."

NameMap = Callable[[str], str]


class _AsStored:
    """The model holds its weights in the checkpoint's layout: arrays pass unchanged."""

    def from_file(self, module: str, attr: str, array):
        return array

    def to_file(self, module: str, attr: str, array):
        return array


def _identity(name: str) -> str:
    return name


def _parameter_keys(layer: lora._LoRALayer) -> dict[str, str]:
    """Attribute -> peft key suffix."""
    if isinstance(layer, lora.LoRAEmbedding):
        return {"lora_embedding_A": "lora_embedding_A", "lora_embedding_B": "lora_embedding_B"}
    return {"lora_A": "lora_A.weight", "lora_B": "lora_B.weight"}


def save_adapter(
    model: Module,
    path: str | Path,
    names: NameMap = _identity,
    base_model_name_or_path: str | None = None,
    task_type: str | None = "CAUSAL_LM",
    convention=None,
) -> Path:
    """Write ``model``'s LoRA adapters (see :func:`lora.apply`) to the folder ``path``."""
    convention = convention or _AsStored()
    layers = lora.lora_layers(model)
    if not layers:
        raise lora.LoRAError("save_adapter: the model has no LoRA layers (call lora.apply)")
    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {}
    for name, layer in layers.items():
        for attr, suffix in _parameter_keys(layer).items():
            array = getattr(layer, attr).detach().numpy()
            tensors[f"{PREFIX}{names(name)}.{suffix}"] = np.ascontiguousarray(
                convention.to_file(name, attr, array)
            )
    first = next(iter(layers.values()))
    settings = getattr(model, "lora_config", {})
    targets = sorted({names(n).rpartition(".")[2] for n in layers})
    config = {
        "peft_type": "LORA",
        "task_type": task_type,
        "base_model_name_or_path": base_model_name_or_path,
        "r": first.r,
        "lora_alpha": first.alpha,
        "lora_dropout": float(settings.get("lora_dropout", 0.0)),
        "use_rslora": first.use_rslora,
        "target_modules": targets,
        "layers_to_transform": settings.get("layers_to_transform"),
        "bias": "none",
        "fan_in_fan_out": False,
        "inference_mode": True,
        "init_lora_weights": True,
        "modules_to_save": None,
        "use_dora": False,
    }
    (folder / CONFIG).write_text(json.dumps(config, indent=2) + "\n")
    save_safetensors(tensors, folder / WEIGHTS)
    return folder


def read_config(path: str | Path) -> dict:
    """The folder's ``adapter_config.json``, checked for what workbench supports."""
    file = Path(path) / CONFIG
    try:
        config = json.loads(file.read_text())
    except FileNotFoundError:
        raise lora.LoRAError(f"load_adapter: {file} not found") from None
    except json.JSONDecodeError as exc:
        raise lora.LoRAError(f"load_adapter: {file} is not valid JSON ({exc})") from None
    if not isinstance(config, dict) or config.get("peft_type", "LORA") != "LORA":
        raise lora.LoRAError(
            f"load_adapter: {file} is not a LoRA adapter (peft_type "
            f"{config.get('peft_type') if isinstance(config, dict) else config!r})"
        )
    unsupported = [
        key
        for key, default in (("use_dora", False), ("fan_in_fan_out", False), ("bias", "none"))
        if config.get(key, default) not in (default, None)
    ]
    unsupported += [k for k in ("rank_pattern", "alpha_pattern") if config.get(k)]
    if unsupported:
        raise lora.LoRAError(f"load_adapter: {file} uses unsupported settings {unsupported}")
    if not isinstance(config.get("r"), int) or not config.get("target_modules"):
        raise lora.LoRAError(f"load_adapter: {file} needs an integer r and target_modules")
    return config


def load_adapter(
    model: Module, path: str | Path, names: NameMap = _identity, convention=None
) -> Module:
    """Add the adapter in folder ``path`` to ``model`` (in place; returns it).

    Every tensor's name and shape is checked against the model before anything changes: a
    missing or unexpected adapter tensor, or one of the wrong shape, raises ``LoRAError``
    naming it, and the model is left as it was.
    """
    folder = Path(path)
    config = read_config(folder)
    weights = load_safetensors(folder / WEIGHTS)
    targets = config["target_modules"]
    if isinstance(targets, str):  # peft also accepts one regular expression
        targets = ["re:" + targets]
    layers_to_transform = config.get("layers_to_transform")
    if isinstance(layers_to_transform, int):
        layers_to_transform = [layers_to_transform]
    plan = _plan(model, weights, targets, layers_to_transform, names, config["r"], folder)
    lora.apply(
        model,
        r=config["r"],
        alpha=config.get("lora_alpha", 8),
        target_modules=[f"re:{_escape(name)}" for name in plan],
        dropout=float(config.get("lora_dropout") or 0.0),
        use_rslora=bool(config.get("use_rslora", False)),
    )
    model.lora_config["target_modules"] = list(targets)
    model.lora_config["layers_to_transform"] = layers_to_transform
    for name, tensors in plan.items():
        layer = lora.submodule(model, name)
        for attr, value in tensors.items():
            target = getattr(layer, attr)
            array = (convention or _AsStored()).from_file(name, attr, value.numpy())
            target.detach().copy_(from_numpy(np.ascontiguousarray(array)).to_dtype(target.dtype))
    return model


def _escape(name: str) -> str:
    return "".join("\\." if c == "." else c for c in name)


def _plan(model, weights, targets, layers, names, r, folder) -> dict[str, dict[str, Tensor]]:
    """workbench module name -> {attribute: tensor}, every name and shape checked."""
    from ..quantized.nn import QLinear
    from .embedding import Embedding
    from .linear import Linear

    plan: dict[str, dict[str, Tensor]] = {}
    used: set[str] = set()
    problems: list[str] = []
    for name, module in model.named_modules():
        if not name or not lora.matches(names(name), targets):
            continue
        if layers is not None and lora._layer_index(name) not in set(layers):
            continue
        if isinstance(module, Embedding):
            shapes = {"lora_embedding_A": (r, module.num_embeddings),
                      "lora_embedding_B": (module.embedding_dim, r)}  # fmt: skip
            suffixes = {"lora_embedding_A": "lora_embedding_A",
                        "lora_embedding_B": "lora_embedding_B"}  # fmt: skip
        elif isinstance(module, (Linear, QLinear)):
            shapes = {"lora_A": (r, module.in_features), "lora_B": (module.out_features, r)}
            suffixes = {"lora_A": "lora_A.weight", "lora_B": "lora_B.weight"}
        else:
            continue
        entry = {}
        # peft also saves the base weight of an adapted embedding or output layer; the model's
        # own weights are the base here, so it is only checked for its shape.
        base_key = f"{PREFIX}{names(name)}.base_layer.weight"
        if base_key in weights:
            used.add(base_key)
            base_shape = tuple(module.weight.shape)
            if tuple(weights[base_key].shape) != base_shape:
                problems.append(
                    f"{base_key} has shape {list(weights[base_key].shape)}, module {name} "
                    f"has {list(base_shape)}"
                )
        for attr, suffix in suffixes.items():
            key = f"{PREFIX}{names(name)}.{suffix}"
            if key not in weights:
                problems.append(f"missing {key} for module {name}")
                continue
            used.add(key)
            if tuple(weights[key].shape) != shapes[attr]:
                problems.append(
                    f"{key} has shape {list(weights[key].shape)}, module {name} "
                    f"({type(module).__name__}) needs {list(shapes[attr])}"
                )
            entry[attr] = weights[key]
        plan[name] = entry
    unexpected = sorted(set(weights) - used)
    if unexpected:
        problems.append(
            f"{len(unexpected)} adapter tensors match no module of the model, e.g. "
            + ", ".join(unexpected[:5])
        )
    if not plan:
        problems.append(f"no module of the model matches target_modules {targets}")
    if problems:
        raise lora.LoRAError(
            f"load_adapter: the adapter in {folder} does not fit the model "
            f"({type(model).__name__}); nothing was loaded:\n  " + "\n  ".join(problems)
        )
    return plan
