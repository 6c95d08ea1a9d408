"""Quantized layers: ``QLinear`` and ``QEmbedding``, inference-only twins of ``nn.Linear`` and
``nn.Embedding`` whose weight is a :class:`QTensor`.

``QLinear``: ``y = x Wᵀ + b`` through :class:`QMatMul` (the f32 ``W`` is never built whole).
``QEmbedding``: ``out[..., :] = W[ids[...], :]``, decoding only the rows that ``ids`` pick.

Build them from a float layer (``QLinear.from_linear(linear, "Q4_K")``), from a GGUF file
through a :class:`QVarBuilder` (``QLinear.load(vb.pp("fc1"), 64, 128)``), or from a QTensor.
"""

from __future__ import annotations

import re
import warnings

import numpy as np

from .. import dtype as dt
from ..backends.cpu import ggml
from ..errors import DTypeError, ShapeError
from ..nn.embedding import Embedding
from ..nn.linear import Linear
from ..nn.module import Module
from ..tensor import Tensor
from .dtype import GgmlDType
from .qmatmul import QMatMul
from .qtensor import QTensor


def _check_weight(owner: str, weight: object) -> QTensor:
    if not isinstance(weight, QTensor):
        raise TypeError(f"{owner}: expected a QTensor weight, found {type(weight).__name__}")
    if weight.ndim != 2:
        raise ShapeError(f"{owner}: weight must be 2-D, found {list(weight.shape)}")
    return weight


def _frozen(t: Tensor | None) -> Tensor | None:
    return None if t is None else t.detach()


class QLinear(Module):
    """y = x Wᵀ + b with a quantized ``W``.

    x: (..., in_features) -> (..., out_features); ``weight``: QTensor (out_features,
    in_features); ``bias``: float Tensor (out_features,) or None. The product runs in f32 on
    the host (see :class:`QMatMul`); f16/bf16 inputs get their dtype back. No gradients.
    """

    bias: Tensor | None

    def __init__(self, weight: QTensor, bias: Tensor | None = None):
        super().__init__()
        self.weight = _check_weight("QLinear", weight)
        self.out_features, self.in_features = weight.shape
        if bias is not None and bias.shape != (self.out_features,):
            raise ShapeError(
                f"QLinear: bias of shape {list(bias.shape)} does not match weight "
                f"{list(weight.shape)} (expected [{self.out_features}])"
            )
        self.register_parameter("bias", _frozen(bias))
        self._matmul = QMatMul(weight)

    @classmethod
    def from_linear(cls, linear: Linear, ggml_dtype: GgmlDType | str) -> QLinear:
        """Quantize a float ``nn.Linear``'s weight to ``ggml_dtype``; the bias stays float."""
        return cls(QTensor.quantize(linear.weight.detach(), ggml_dtype), linear.bias)

    @classmethod
    def load(cls, vb, in_features: int, out_features: int, bias: bool = True) -> QLinear:
        """``vb.get_qtensor((out, in), "weight")`` and ``vb.get((out,), "bias")`` from a
        :class:`QVarBuilder` (candle's ``quantized_nn::linear``)."""
        weight = vb.get_qtensor((out_features, in_features), "weight")
        return cls(weight, vb.get((out_features,), "bias") if bias else None)

    @property
    def ggml_dtype(self) -> GgmlDType:
        return self.weight.ggml_dtype

    def forward(self, x: Tensor) -> Tensor:
        y = self._matmul(x)
        if self.bias is None:
            return y
        b = self.bias
        if b.dtype is not y.dtype:
            b = b.to_dtype(y.dtype)
        if b.device is not y.device:
            b = b.to(y.device)
        return y + b

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}, {self.weight.ggml_dtype.name}"
        )


class QEmbedding(Module):
    """ids (...) -> vectors (..., embedding_dim) from a quantized table ``weight``
    (num_embeddings, embedding_dim); only the distinct picked rows are decoded.

    ``dtype`` is the output's float dtype (default f32); the output lives on ``ids``' device.
    """

    def __init__(self, weight: QTensor, dtype: dt.DType | str = dt.f32):
        super().__init__()
        self.weight = _check_weight("QEmbedding", weight)
        self.num_embeddings, self.embedding_dim = weight.shape
        self.dtype = dt.dtype(dtype)
        if not self.dtype.is_floating_point:
            raise DTypeError(f"QEmbedding: expected a float output dtype, found {self.dtype}")

    @classmethod
    def from_embedding(cls, embedding: Embedding, ggml_dtype: GgmlDType | str) -> QEmbedding:
        """Quantize a float ``nn.Embedding``'s table to ``ggml_dtype``."""
        return cls(QTensor.quantize(embedding.weight.detach(), ggml_dtype))

    @classmethod
    def load(cls, vb, num_embeddings: int, embedding_dim: int) -> QEmbedding:
        """``vb.get_qtensor((num_embeddings, embedding_dim), "weight")``."""
        return cls(vb.get_qtensor((num_embeddings, embedding_dim), "weight"))

    @property
    def ggml_dtype(self) -> GgmlDType:
        return self.weight.ggml_dtype

    def forward(self, ids) -> Tensor:
        from ..ops.creation import from_numpy

        device = ids.device if isinstance(ids, Tensor) else None
        if isinstance(ids, Tensor):
            if ids.dtype.is_floating_point or ids.dtype is dt.bool_:
                raise DTypeError(f"QEmbedding: ids must be integers, found {ids.dtype}")
            idx = ids.numpy()
        else:
            idx = np.asarray(ids)
            if idx.dtype.kind not in "iu":
                raise DTypeError(f"QEmbedding: ids must be integers, found numpy {idx.dtype}")
        n = self.num_embeddings
        if idx.size and (idx.min() < -n or idx.max() >= n):
            bad = idx.min() if idx.min() < -n else idx.max()
            raise IndexError(
                f"QEmbedding: id {int(bad)} is out of range for {n} embeddings "
                f"(ids of shape {list(idx.shape)})"
            )
        rows, inverse = np.unique(idx.reshape(-1) % max(n, 1), return_inverse=True)
        # Fancy indexing copies only the picked rows' bytes; they decode as one batch.
        table = ggml.dequantize(self.weight.data[rows], self.weight.ggml_dtype.name)
        values = table.reshape(len(rows), self.embedding_dim)[inverse.reshape(-1)]
        values = values.reshape(*idx.shape, self.embedding_dim)
        if self.dtype is not dt.f32:
            values = values.astype(self.dtype.numpy)
        out = from_numpy(np.ascontiguousarray(values))
        return out if device is None or device.kind == "cpu" else out.to(device)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}, {self.weight.ggml_dtype.name}"


def _matches(name: str, skip) -> bool:
    return any(re.search(p, name) for p in skip)


def quantize_model(
    model: Module,
    ggml_dtype: GgmlDType | str,
    *,
    skip: str | tuple[str, ...] | list[str] = (),
    verbose: bool = False,
) -> Module:
    """Replace every ``nn.Linear`` of ``model`` by a :class:`QLinear` of ``ggml_dtype``, in place.

    Returns ``model`` (or a ``QLinear`` when ``model`` itself is a Linear). Layers are left in
    float, with a warning that lists them, when ``in_features`` is not a multiple of the
    type's block size (32 for Q4_0..Q8_0 and IQ4_NL, 256 for the K-quants and IQ4_XS), and
    silently when their dotted name matches one of the ``skip`` regular expressions (e.g.
    ``skip=[r"^head$"]``). ``verbose`` prints one line per Linear: name, shape, what it became.
    A Linear shared by several parents becomes one shared QLinear.
    """
    gd = GgmlDType.from_name(ggml_dtype)
    skip = (skip,) if isinstance(skip, str) else tuple(skip)
    lines: list[str] = []
    too_narrow: list[str] = []

    def convert(name: str, linear: Linear) -> Module:
        shape = f"[{linear.out_features}, {linear.in_features}]"
        if _matches(name, skip):
            lines.append(f"{name or '<model>'}: {shape} kept in float (skip pattern)")
            return linear
        if linear.in_features % gd.block_size:
            too_narrow.append(f"{name or '<model>'!r} (in_features={linear.in_features})")
            lines.append(
                f"{name or '<model>'}: {shape} kept in float (in_features "
                f"{linear.in_features} is not a multiple of {gd.block_size})"
            )
            return linear
        q = QLinear.from_linear(linear, gd)
        lines.append(f"{name or '<model>'}: {shape} -> {gd.name}")
        return q

    if isinstance(model, Linear):
        result: Module = convert("", model)
    else:
        done: dict[int, Module] = {}
        for prefix, parent in list(model.named_modules()):
            for child_name, child in list(parent.named_children()):
                if not isinstance(child, Linear):
                    continue
                if id(child) not in done:
                    done[id(child)] = convert(
                        f"{prefix}.{child_name}" if prefix else child_name, child
                    )
                if done[id(child)] is not child:
                    parent.register_module(child_name, done[id(child)])
        result = model
    if too_narrow:
        warnings.warn(
            f"quantize_model: {len(too_narrow)} Linear layer(s) kept in float because "
            f"in_features is not a multiple of {gd.name}'s block size {gd.block_size}: "
            + ", ".join(too_narrow),
            stacklevel=2,
        )
    if verbose:
        print("\n".join(lines))
    return result
