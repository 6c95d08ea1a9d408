"""safetensors -> GGUF conversion with a chosen ggml type, and its per-tensor report.

Which type each tensor gets (as llama.cpp's quantizer does):

- 1-D tensors (biases, norm weights) and tensors matching a ``skip`` pattern stay in float:
  F32 (F16 / BF16 when stored so);
- a tensor whose last dimension is not a multiple of the type's block size falls back to a
  32-block type of similar or better quality (Q2_K/Q3_K/IQ4_XS -> IQ4_NL, Q4_K -> Q5_0,
  Q5_K -> Q5_1, Q6_K -> Q8_0, else Q8_0), and to F16 when even 32 does not divide it;
- non-float tensors (e.g. BatchNorm's ``num_batches_tracked``) are not written and the
  report says so.

The rmse column is ``sqrt(mean((dequantize(q) - x)²))`` against the f32 original.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .dtype import GgmlDType
from .gguf_file import write_gguf
from .qtensor import QTensor, format_bytes

FALLBACK = {
    "Q2_K": "IQ4_NL", "Q3_K": "IQ4_NL", "IQ4_XS": "IQ4_NL", "Q4_K": "Q5_0", "Q5_K": "Q5_1",
    "Q6_K": "Q8_0", "Q8_K": "Q8_0",
}  # fmt: skip
_FLOAT_TYPES = {"F32": GgmlDType.F32, "F16": GgmlDType.F16, "BF16": GgmlDType.BF16}


@dataclass(frozen=True)
class ConvertedTensor:
    """One row of the conversion report; ``ggml_dtype`` None means "not written"."""

    name: str
    shape: tuple[int, ...]
    ggml_dtype: GgmlDType | None
    nbytes: int
    rmse: float
    note: str = ""


def choose_type(
    name: str, shape: tuple[int, ...], stored: str, target: GgmlDType, skip: Sequence[str] = ()
) -> tuple[GgmlDType, str]:
    """The ggml type tensor ``name`` gets, and why when it is not ``target``."""
    as_stored = _FLOAT_TYPES.get(stored, GgmlDType.F32)
    if len(shape) <= 1:
        return GgmlDType.F32, "1-D, kept in F32"
    if any(re.search(p, name) for p in skip):
        return as_stored, "skip pattern"
    cols = shape[-1]
    if cols % target.block_size == 0:
        return target, ""
    fallback = GgmlDType.from_name(FALLBACK.get(target.name, "Q8_0"))
    if cols % fallback.block_size == 0 and target.is_quantized:
        return fallback, f"{cols} columns: not a multiple of {target.block_size}"
    return GgmlDType.F16, f"{cols} columns: not a multiple of 32"


def convert_safetensors(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    ggml_dtype: GgmlDType | str,
    *,
    skip: Sequence[str] = (),
    metadata: dict | None = None,
) -> list[ConvertedTensor]:
    """Write the tensors of safetensors file(s) ``src`` to GGUF ``dst`` as ``ggml_dtype``.

    ``skip``: regular expressions (``re.search``) of names to keep in float. ``metadata`` is
    added to the GGUF metadata. Returns the report rows, in file order.
    """
    from ..io.safetensors import open_safetensors

    target = GgmlDType.from_name(ggml_dtype)
    reader = open_safetensors(src)
    tensors: dict[str, QTensor] = {}
    rows: list[ConvertedTensor] = []
    for name in reader:
        info = reader.info(name)
        shape = tuple(info.shape)
        x = reader.get_tensor(name)
        if not x.dtype.is_floating_point:
            rows.append(ConvertedTensor(name, shape, None, 0, 0.0, f"{x.dtype.name}: not written"))
            continue
        note = ""
        if not shape:  # GGUF tensors have at least one dimension
            shape, note = (1,), "scalar stored as [1]"
        gd, why = choose_type(name, shape, info.dtype, target, skip)
        note = note or why
        values = np.ascontiguousarray(x.numpy(), dtype=np.float32).reshape(shape)
        q = QTensor.quantize(values, gd)
        err = q.dequantize_numpy() - values
        rmse = float(np.sqrt(np.mean(np.square(err, dtype=np.float64)))) if err.size else 0.0
        tensors[name] = q
        rows.append(ConvertedTensor(name, shape, gd, q.nbytes, rmse, note))
    md = {"general.quantization_version": 2, "workbench.quantized_type": target.name}
    md.update(metadata or {})
    write_gguf(dst, md, tensors)
    return rows


def stored_bytes(src: str | os.PathLike[str]) -> int:
    """Bytes of tensor data in safetensors file(s) ``src``."""
    from ..io.safetensors import open_safetensors

    reader = open_safetensors(src)
    return sum(reader.info(n).end - reader.info(n).begin for n in reader)


def format_report(
    rows: Sequence[ConvertedTensor], source_bytes: int | None = None, *, rmse: bool = True
) -> str:
    """The report as an aligned text table (without the rmse column if not ``rmse``), with a
    total line; ``source_bytes`` adds the size ratio to it."""
    table = [["name", "shape", "type", "bytes", "rmse", ""]]
    for r in rows:
        table.append(
            [
                r.name,
                "[" + ", ".join(str(s) for s in r.shape) + "]",
                r.ggml_dtype.name if r.ggml_dtype is not None else "-",
                str(r.nbytes),
                f"{r.rmse:.3g}",
                r.note,
            ]
        )
    if not rmse:
        for row in table:
            del row[4]
    n = len(table[0]) - 1  # aligned columns; the note runs free
    widths = [max(len(row[i]) for row in table) for i in range(n)]
    lines = []
    for row in table:
        cells = [
            c.rjust(w) if i >= 3 else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=False))
        ]
        lines.append("  ".join([*cells, row[n]]).rstrip())
    total = sum(r.nbytes for r in rows)
    written = sum(r.ggml_dtype is not None for r in rows)
    summary = f"{written} tensors, {format_bytes(total)} of tensor data"
    if source_bytes:
        summary += f" ({total / source_bytes:.1%} of {format_bytes(source_bytes)} as stored)"
    lines.append(summary)
    return "\n".join(lines)
