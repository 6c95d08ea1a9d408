"""Quantized tensors and GGUF files.

- :class:`GgmlDType` -- ggml's block types (Q4_0 ... Q8_K, IQ4_NL, IQ4_XS, F32/F16/BF16).
- :class:`QTensor` -- quantize float data to a ggml type, dequantize it back.
- :class:`QMatMul` -- ``x @ W.T`` with a quantized ``W``, decoded tile by tile.
- :func:`read_gguf` / :func:`write_gguf` -- GGUF v1-v3 reading (validated, memory-mapped),
  v3 writing.
- :class:`QLinear` / :class:`QEmbedding` -- inference layers with a quantized weight;
  :func:`quantize_model` turns a float model's ``nn.Linear`` layers into ``QLinear``.
- :class:`QVarBuilder` -- a ``VarBuilder`` over a GGUF file (``get_qtensor`` / ``get``).
- :func:`convert_safetensors` -- safetensors to GGUF (``python -m workbench.quantized convert``).
"""

from .convert import ConvertedTensor, convert_safetensors
from .dtype import GgmlDType
from .errors import GgmlTypeError, GgufError
from .gguf_file import (
    GgufFile,
    GgufTensorInfo,
    GgufValue,
    GgufValueType,
    read_gguf,
    write_gguf,
)
from .nn import QEmbedding, QLinear, quantize_model
from .qmatmul import QMatMul
from .qtensor import QTensor
from .var_builder import QVarBuilder

__all__ = [
    "ConvertedTensor",
    "GgmlDType",
    "GgmlTypeError",
    "GgufError",
    "GgufFile",
    "GgufTensorInfo",
    "GgufValue",
    "GgufValueType",
    "QEmbedding",
    "QLinear",
    "QMatMul",
    "QTensor",
    "QVarBuilder",
    "convert_safetensors",
    "quantize_model",
    "read_gguf",
    "write_gguf",
]
