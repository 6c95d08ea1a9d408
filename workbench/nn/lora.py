"""LoRA (Hu et al. 2021) and QLoRA (Dettmers et al. 2023) adapters, in peft's layout.

A frozen layer ``W`` gets a trainable low-rank update::

    y = base(x) + s · B(A(dropout(x)))      A: (r, in), B: (out, r), s = alpha / r
                                             (rsLoRA: s = alpha / √r)

``A`` starts as PyTorch's default Linear init (kaiming-uniform, a = √5) and ``B`` at zeros, so
the adapted model starts equal to the base (peft's ``init_lora_weights=True``); for an
embedding the roles swap (A zeros, B ~ N(0, 1)) and the update is ``s · E_A[ids] Bᵀ``.

The base may be an ``nn.Linear``, a quantized ``QLinear`` (QLoRA: the weight stays quantized;
the gradient reaches the input through ``g W``, with ``W`` decoded a tile of rows at a time,
never whole) or an ``nn.Embedding``. ``apply`` wraps the modules whose names match
``target_modules`` as peft matches them (the name, or its dotted suffix), and freezes the rest.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence

import numpy as np

from ..autograd import record
from ..errors import WorkbenchError
from ..ops import indexing
from ..ops.creation import from_numpy
from ..tensor import Tensor, Var
from . import functional as F
from . import init
from .embedding import Embedding
from .linear import Linear
from .module import Module

# Decoded rows of a quantized weight per step of the input gradient (f32 bytes = rows * in * 4).
QLORA_TILE_BYTES = 1 << 22

# Modules LoRA adapts by default, per model family (peft's defaults: the attention projections).
DEFAULT_TARGETS = {
    "llama": ("q_proj", "v_proj"),
    "mistral": ("q_proj", "v_proj"),
    "qwen2": ("q_proj", "v_proj"),
    "qwen3": ("q_proj", "v_proj"),
    "gemma2": ("q_proj", "v_proj"),
    "gemma3": ("q_proj", "v_proj"),
    "phi3": ("qkv_proj",),
}


class LoRAError(WorkbenchError, ValueError):
    """An adapter that does not fit the model, or a bad LoRA setting."""


def lora_scaling(r: int, alpha: float, use_rslora: bool = False) -> float:
    """s = alpha / r, or alpha / √r with rsLoRA (Kalajdzievski 2023)."""
    if r < 1:
        raise LoRAError(f"LoRA: rank r must be >= 1, found {r}")
    return alpha / math.sqrt(r) if use_rslora else alpha / r


def _qlinear_class() -> type:
    # quantized.nn builds on nn's Linear and Embedding: imported when first needed, not at
    # nn's import (which would be circular).
    from ..quantized.nn import QLinear

    return QLinear


def quantized_linear_with_input_grad(layer, x: Tensor) -> Tensor:
    """``layer(x)`` recording a gradient for ``x`` only: dx = g W, with the quantized ``W``
    (out, in) decoded ``QLORA_TILE_BYTES`` of rows at a time (never the whole f32 matrix)."""
    y = _qlinear_class().forward(layer, x)  # the plain product (layer may override forward)
    if not x.requires_grad:
        return y
    weight = layer.weight
    out_features, in_features = weight.shape
    rows = max(1, QLORA_TILE_BYTES // (4 * in_features))

    def backward(g: Tensor):
        g2 = g.reshape(-1, out_features).to_dtype("f32").numpy()
        dx = np.zeros((g2.shape[0], in_features), np.float32)
        tile = np.empty((min(rows, out_features), in_features), np.float32)
        for start in range(0, out_features, rows):
            stop = min(start + rows, out_features)
            w = weight.dequantize_rows(start, stop, out=tile[: stop - start])
            dx += g2[:, start:stop] @ w
        grad = from_numpy(dx.reshape(*x.shape), device=x.device)
        return (grad.to_dtype(x.dtype),)

    return record(y, "qlora_linear", (x,), backward)


class _LoRALayer(Module):
    """What LoRALinear and LoRAEmbedding share: rank, scaling, merge state."""

    def __init__(self, base: Module, r: int, alpha: float, use_rslora: bool):
        super().__init__()
        self.r = r
        self.alpha = alpha
        self.use_rslora = use_rslora
        self.scaling = lora_scaling(r, alpha, use_rslora)
        self.merged = False
        base.requires_grad_(False)
        self.base_layer = base

    def delta_weight(self) -> Tensor:
        """The update s · B A in the base weight's layout."""
        raise NotImplementedError

    def extra_repr(self) -> str:
        extra = ", rsLoRA" if self.use_rslora else ""
        return f"r={self.r}, alpha={self.alpha}, scaling={self.scaling:g}{extra}"


class LoRALinear(_LoRALayer):
    """y = base(x) + s · (dropout(x) Aᵀ) Bᵀ around a frozen ``Linear`` or ``QLinear``.

    x: (..., in) -> (..., out); ``lora_A``: (r, in), ``lora_B``: (out, r), as peft stores them.
    """

    def __init__(
        self,
        base: Module,
        r: int = 8,
        alpha: float = 16.0,
        dropout: float = 0.0,
        use_rslora: bool = False,
    ):
        if not isinstance(base, (Linear, _qlinear_class())):
            raise LoRAError(
                f"LoRALinear: expected an nn.Linear or QLinear base, found {type(base).__name__}"
            )
        super().__init__(base, r, alpha, use_rslora)
        self.dropout = dropout
        self.in_features, self.out_features = base.in_features, base.out_features
        self.lora_A = Var(init.make(init.DEFAULT_WEIGHT, (r, self.in_features)))
        self.lora_B = Var(init.make(init.Const(0.0), (self.out_features, r)))
        self._quantized = isinstance(base, _qlinear_class())
        self._unmerged_qweight = None

    def forward(self, x: Tensor) -> Tensor:
        base = self.base_layer
        if self._quantized:
            y = quantized_linear_with_input_grad(base, x)
        else:
            y = base(x)
        if self.merged:
            return y
        h = F.dropout(x, self.dropout, self.training) if self.dropout else x
        update = F.linear(F.linear(h.to_dtype(self.lora_A.dtype), self.lora_A), self.lora_B)
        return y + (update * self.scaling).to_dtype(y.dtype)

    def delta_weight(self) -> Tensor:
        return (self.lora_B @ self.lora_A) * self.scaling

    def merge(self) -> None:
        """Fold s · B A into the base weight (a quantized base is decoded, updated and
        re-quantized to its type; ``unmerge`` restores its original blocks exactly)."""
        if self.merged:
            return
        base = self.base_layer
        delta = self.delta_weight().detach()
        if self._quantized:
            self._unmerged_qweight = base.weight
            merged = base.weight.dequantize() + delta
            _set_qweight(base, type(base.weight).quantize(merged, base.weight.ggml_dtype))
        else:
            base.weight.detach().add_(delta.to_dtype(base.weight.dtype))
        self.merged = True

    def unmerge(self) -> None:
        """Take the update back out of the base weight."""
        if not self.merged:
            return
        base = self.base_layer
        if self._quantized:
            _set_qweight(base, self._unmerged_qweight)
            self._unmerged_qweight = None
        else:
            base.weight.detach().sub_(self.delta_weight().detach().to_dtype(base.weight.dtype))
        self.merged = False


def _set_qweight(layer, weight) -> None:
    """Swap a QLinear's quantized weight (and the product that reads it)."""
    fresh = type(layer)(weight, layer.bias)
    layer.weight = fresh.weight
    layer._matmul = fresh._matmul


class LoRAEmbedding(_LoRALayer):
    """out = base(ids) + s · E_A[ids] Bᵀ around a frozen ``Embedding``.

    ``lora_embedding_A``: (r, num_embeddings) zeros, ``lora_embedding_B``: (dim, r) ~ N(0, 1),
    as peft initialises and stores them.
    """

    def __init__(self, base: Embedding, r: int = 8, alpha: float = 16.0, use_rslora=False):
        if not isinstance(base, Embedding):
            raise LoRAError(
                f"LoRAEmbedding: expected an nn.Embedding base, found {type(base).__name__}"
            )
        super().__init__(base, r, alpha, use_rslora)
        self.num_embeddings, self.embedding_dim = base.num_embeddings, base.embedding_dim
        self.lora_embedding_A = Var(init.make(init.Const(0.0), (r, self.num_embeddings)))
        self.lora_embedding_B = Var(init.make(init.Normal(0.0, 1.0), (self.embedding_dim, r)))

    def forward(self, ids: Tensor) -> Tensor:
        out = self.base_layer(ids)
        if self.merged:
            return out
        rows = indexing.embedding(self.lora_embedding_A.transpose(0, 1), ids)
        return out + (F.linear(rows, self.lora_embedding_B) * self.scaling).to_dtype(out.dtype)

    def delta_weight(self) -> Tensor:
        return (self.lora_embedding_B @ self.lora_embedding_A).transpose(0, 1) * self.scaling

    def merge(self) -> None:
        if not self.merged:
            weight = self.base_layer.weight
            weight.detach().add_(self.delta_weight().detach().to_dtype(weight.dtype))
            self.merged = True

    def unmerge(self) -> None:
        if self.merged:
            weight = self.base_layer.weight
            weight.detach().sub_(self.delta_weight().detach().to_dtype(weight.dtype))
            self.merged = False


def matches(name: str, targets: Iterable[str]) -> bool:
    """peft's rule: a target is the module's full name or a dotted suffix of it; a target
    starting with ``re:`` is a regular expression matched against the whole name."""
    for target in targets:
        if target.startswith("re:"):
            if re.fullmatch(target[3:], name):
                return True
        elif name == target or name.endswith("." + target):
            return True
    return False


_LAYER_INDEX = re.compile(r"(?:^|\.)(?:layers|h|blocks|blk)\.(\d+)\.")


def _layer_index(name: str) -> int | None:
    match = _LAYER_INDEX.search(name)
    return int(match.group(1)) if match else None


def apply(
    model: Module,
    r: int = 8,
    alpha: float = 16.0,
    target_modules: Sequence[str] | None = None,
    layers: Iterable[int] | None = None,
    dropout: float = 0.0,
    use_rslora: bool = False,
    family: str | None = None,
) -> Module:
    """Wrap ``model``'s matching Linear / QLinear / Embedding modules in LoRA layers, in place.

    ``target_modules``: module names (or dotted suffixes, or ``re:`` patterns); default: the
    family's (``DEFAULT_TARGETS``, ``family`` or ``model.architecture``). ``layers``: only
    blocks with these indices (``layers.<i>.``/``blk.<i>.`` in the name). Every other parameter
    is frozen; returns ``model`` (``model.num_trainable_parameters()`` counts the adapters).
    """
    if target_modules is None:
        family = family or getattr(model, "architecture", None)
        if family not in DEFAULT_TARGETS:
            raise LoRAError(
                f"lora.apply: no default target_modules for model family {family!r}; pass "
                f"target_modules (known families: {', '.join(sorted(DEFAULT_TARGETS))})"
            )
        target_modules = DEFAULT_TARGETS[family]
    wanted_layers = None if layers is None else set(layers)
    model.requires_grad_(False)
    replaced = []
    linear_types = (Linear, _qlinear_class())
    for name, module in list(model.named_modules()):
        if not name or not matches(name, target_modules):
            continue
        if wanted_layers is not None and _layer_index(name) not in wanted_layers:
            continue
        if isinstance(module, linear_types):
            wrapped = LoRALinear(module, r, alpha, dropout, use_rslora)
        elif isinstance(module, Embedding):
            wrapped = LoRAEmbedding(module, r, alpha, use_rslora)
        elif isinstance(module, _LoRALayer):
            raise LoRAError(f"lora.apply: {name} already has a LoRA adapter")
        else:
            raise LoRAError(
                f"lora.apply: {name} is a {type(module).__name__}; LoRA adapts Linear, "
                "QLinear and Embedding modules"
            )
        _replace(model, name, wrapped)
        replaced.append(name)
    if not replaced:
        raise LoRAError(
            f"lora.apply: no module matches target_modules {list(target_modules)}"
            + ("" if wanted_layers is None else f" in layers {sorted(wanted_layers)}")
        )
    model.lora_config = {
        "r": r, "lora_alpha": alpha, "lora_dropout": dropout, "use_rslora": use_rslora,
        "target_modules": list(target_modules),
        "layers_to_transform": None if wanted_layers is None else sorted(wanted_layers),
    }  # fmt: skip
    return model


def submodule(model: Module, name: str) -> Module:
    """The module at dotted ``name`` (``""``: the model itself)."""
    module = model
    for part in name.split(".") if name else ():
        module = dict(module.named_children())[part]
    return module


def _replace(model: Module, name: str, module: Module) -> None:
    parent_name, _, child = name.rpartition(".")
    setattr(submodule(model, parent_name), child, module)


def lora_layers(model: Module) -> dict[str, _LoRALayer]:
    """The model's LoRA layers by module name."""
    return {name: m for name, m in model.named_modules() if isinstance(m, _LoRALayer)}


def merge(model: Module) -> Module:
    """Fold every adapter into its base weight (inference at the base's speed)."""
    for layer in lora_layers(model).values():
        layer.merge()
    return model


def unmerge(model: Module) -> Module:
    for layer in lora_layers(model).values():
        layer.unmerge()
    return model
