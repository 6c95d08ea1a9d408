"""``QVarBuilder``: a ``VarBuilder`` over a GGUF file that also hands out QTensors.

::

    vb = QVarBuilder.from_gguf("model-Q4_K.gguf")
    fc1 = QLinear.load(vb.pp("fc1"), 64, 128)           # weight stays quantized
    norm = vb.pp("norm").get((128,), "weight")          # dequantized to a float Tensor
    head = nn.Linear(128, 10, vb=vb.pp("head"))          # plain layers work too (dequantized)

Shapes are in workbench (row-major) order everywhere: a GGUF file stores ggml's ``ne``
(fastest dimension first), which the reader reverses, so a ``(out, in)`` Linear weight is
``dims = [in, out]`` in the file and ``(out, in)`` here. A missing name raises
``VarBuilderError`` listing the closest names, as ``nn.VarBuilder`` does.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from .. import dtype as dt
from ..errors import ShapeError
from ..nn.var_builder import VarBuilder, _missing
from ..tensor import Tensor
from .gguf_file import GgufFile, read_gguf
from .qtensor import QTensor


def _ggml_dims(shape: tuple[int, ...]) -> list[int]:
    return list(reversed(shape))


class _QTensors:
    """VarBuilder backend over named QTensors (a GGUF file or a dict)."""

    def __init__(self, tensors: Mapping[str, QTensor], where: str, file: GgufFile | None = None):
        self.tensors = tensors
        self.where = where
        self.file = file

    def names(self) -> list[str]:
        return list(self.tensors)

    def contains(self, name: str) -> bool:
        return name in self.tensors

    def qtensor(self, name: str, shape: tuple[int, ...] | None) -> QTensor:
        if name not in self.tensors:
            raise _missing(name, self.where, self.names())
        q = self.tensors[name]
        if shape is not None and q.shape != shape:
            raise ShapeError(
                f"VarBuilder: {name!r} has shape {q.shape} in {self.where} (ggml dims "
                f"{_ggml_dims(q.shape)}), expected {shape} (ggml dims {_ggml_dims(shape)})"
            )
        return q

    def get(self, name, shape, init, dtype, device) -> Tensor:
        q = self.qtensor(name, shape)
        if dtype is None:  # keep F16 / BF16 as stored; block types decode to f32
            dtype = {"F16": dt.f16, "BF16": dt.bf16}.get(q.ggml_dtype.name, dt.f32)
        out = q.dequantize(dtype if dtype.is_floating_point else dt.f32)
        return out if device.kind == "cpu" else out.to(device)


class QVarBuilder(VarBuilder):
    """A :class:`~workbench.nn.VarBuilder` whose tensors are QTensors.

    ``get_qtensor(shape, name)`` returns the stored QTensor (a view of the mapped file);
    ``get(shape, name)`` dequantizes it to a float Tensor (``dtype`` None keeps F16/BF16 as
    stored and gives f32 for block types). ``metadata`` is the GGUF file's metadata.
    """

    _backend: _QTensors

    @classmethod
    def from_gguf(cls, path: str | os.PathLike[str], dtype=None, device=None) -> QVarBuilder:  # type: ignore[override]
        """Read (memory-map) a GGUF file; its tensors are looked up by their GGUF names."""
        f = read_gguf(path)
        return cls(_QTensors(f.load(), f.path, f), dtype, device)

    @classmethod
    def from_qtensors(cls, tensors: Mapping[str, QTensor], dtype=None, device=None) -> QVarBuilder:
        """QTensors by full name."""
        return cls(_QTensors(dict(tensors), "the QTensor dict"), dtype, device)

    @property
    def metadata(self) -> dict[str, Any]:
        """The GGUF metadata (plain values); empty for a dict of QTensors."""
        f = self._backend.file
        return {} if f is None else f.metadata

    # -- prefixes keep the class ------------------------------------------------------------
    def pp(self, name: str | int) -> QVarBuilder:
        return QVarBuilder(self._backend, self.dtype, self.device, (*self._prefix, str(name)))

    push_prefix = pp

    def root(self) -> QVarBuilder:
        return QVarBuilder(self._backend, self.dtype, self.device)

    def to_dtype(self, dtype) -> QVarBuilder:
        return QVarBuilder(self._backend, dtype, self.device, self._prefix)

    def to_device(self, device) -> QVarBuilder:
        return QVarBuilder(self._backend, self.dtype, device, self._prefix)

    # -- quantized tensors ------------------------------------------------------------------
    def get_qtensor(self, shape, name: str) -> QTensor:
        """The QTensor ``prefix.name``, which must have ``shape`` (workbench order)."""
        shape = tuple(int(s) for s in ((shape,) if isinstance(shape, int) else shape))
        return self._backend.qtensor(self.path(name), shape)

    def get_qtensor_unchecked(self, name: str) -> QTensor:
        """The QTensor ``prefix.name`` whatever its shape."""
        return self._backend.qtensor(self.path(name), None)

    def __repr__(self) -> str:
        dtype = self.dtype.name if self.dtype else "stored dtypes"
        return f"QVarBuilder({self._backend.where}, prefix={self.prefix!r}, {dtype}, {self.device})"
