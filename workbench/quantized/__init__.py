"""Quantized tensors and GGUF files.

- :class:`GgmlDType` -- ggml's block types (Q4_0 ... Q8_K, IQ4_NL, IQ4_XS, F32/F16/BF16).
- :class:`QTensor` -- quantize float data to a ggml type, dequantize it back.
- :class:`QMatMul` -- ``x @ W.T`` with a quantized ``W``, decoded tile by tile.
- :func:`read_gguf` / :func:`write_gguf` -- GGUF v1-v3 reading (validated, memory-mapped),
  v3 writing.
"""

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
from .qmatmul import QMatMul
from .qtensor import QTensor

__all__ = [
    "GgmlDType",
    "GgmlTypeError",
    "GgufError",
    "GgufFile",
    "GgufTensorInfo",
    "GgufValue",
    "GgufValueType",
    "QMatMul",
    "QTensor",
    "read_gguf",
    "write_gguf",
]
