"""``python -m workbench.quantized``: command-line tools for GGUF files.

::

    python -m workbench.quantized convert model.safetensors model-Q4_K.gguf --type Q4_K
    python -m workbench.quantized convert in.safetensors out.gguf --type Q8_0 --skip-pattern 'head'
    python -m workbench.quantized convert ./Qwen3-0.6B/ qwen3-Q8_0.gguf --type Q8_0   # HF folder
    python -m workbench.quantized info model-Q4_K.gguf
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Sequence

from ..errors import WorkbenchError
from .convert import ConvertedTensor, convert_safetensors, format_report, stored_bytes
from .convert_hf import convert_hf_checkpoint
from .dtype import GgmlDType
from .errors import GgmlTypeError
from .gguf_file import read_gguf


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m workbench.quantized", description="GGUF conversion tools."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    convert = commands.add_parser(
        "convert",
        help="convert safetensors to GGUF with a chosen ggml type",
        description=(
            "Convert a safetensors file (or an index JSON / list of shards) to GGUF. 1-D tensors "
            "(biases, norms) stay in F32; tensors whose last dimension does not fit the type's "
            "block size fall back to a 32-block type. Prints a per-tensor report."
        ),
    )
    convert.add_argument(
        "src",
        help="input .safetensors (or .safetensors.index.json), or a Hugging Face checkpoint "
        "folder (config.json + safetensors + tokenizer) of a llama / qwen2 / qwen3 / phi3 / "
        "gemma2 / gemma3 model, written with llama.cpp's names and metadata",
    )
    convert.add_argument("dst", help="output .gguf")
    convert.add_argument(
        "--type",
        default="Q8_0",
        help=f"ggml type (default Q8_0); one of {', '.join(t.name for t in GgmlDType)}",
    )
    convert.add_argument(
        "--skip-pattern",
        action="append",
        default=[],
        metavar="REGEX",
        help="keep tensors whose name matches REGEX in float (repeatable)",
    )
    convert.add_argument("-q", "--quiet", action="store_true", help="print only the total line")
    info = commands.add_parser("info", help="list a GGUF file's metadata and tensors")
    info.add_argument("path", help="a .gguf file")
    info.add_argument("--metadata", action="store_true", help="also print every metadata value")
    return parser


def _info(path: str, with_metadata: bool) -> int:
    try:
        f = read_gguf(path)
    except (WorkbenchError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"{f!r}, alignment {f.alignment}")
    if with_metadata:
        for key, value in f.metadata.items():
            text = repr(value)
            print(f"  {key} = {text if len(text) <= 80 else text[:77] + '...'}")
    rows = [
        ConvertedTensor(t.name, t.shape, t.ggml_dtype, t.nbytes, 0.0) for t in f.tensors.values()
    ]
    print(format_report(rows, rmse=False))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "info":
        return _info(args.path, args.metadata)
    try:
        target = GgmlDType.from_name(args.type)
    except GgmlTypeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    start = time.perf_counter()
    try:
        if os.path.isfile(os.path.join(args.src, "config.json")):
            rows = convert_hf_checkpoint(args.src, args.dst, target, skip=args.skip_pattern)
        else:
            rows = convert_safetensors(args.src, args.dst, target, skip=args.skip_pattern)
    except (WorkbenchError, OSError, ValueError, re.error) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    report = format_report(rows, stored_bytes(args.src))
    print(report.splitlines()[-1] if args.quiet else report)
    print(f"wrote {args.dst} ({target.name}) in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
