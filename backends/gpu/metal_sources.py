"""Metal sources generated from the portable kernel bodies in ``kernels/gpu``.

``kernels/metal/<name>.metal`` is the Metal prelude, the dialect's common part, the op table's
lists and the body ``kernels/gpu/<name>.h`` (the one ``kernels/cuda/<name>.cu`` includes after
the CUDA prelude), with the includes inlined: Metal compiles one source string at run time.
Regenerate with ``python -m workbench.backends.gpu.metal_sources``; a test fails when stale.

``PORTABLE`` lists the kernel families whose bodies are written in the dialect; the others are
still CUDA-only sources in ``kernels/cuda``.
"""

from __future__ import annotations

import sys
from pathlib import Path

KERNELS = Path(__file__).resolve().parent.parent.parent / "kernels"
PORTABLE = ("elementwise", "matmul", "norm")
# What each portable body needs, in order, after the prelude.
PARTS = ("common.h", "optable.h")


def _strip(text: str) -> str:
    lines = text.splitlines(keepends=True)
    return "".join(line for line in lines if line.strip() != "#pragma once")


def metal_source(name: str, kernels: Path = KERNELS) -> str:
    """The generated ``kernels/metal/<name>.metal``."""
    gpu = kernels / "gpu"
    pieces = [
        f"// Generated from kernels/gpu/{name}.h by\n"
        "// `python -m workbench.backends.gpu.metal_sources`: do not edit.\n",
        (gpu / "prelude_metal.h").read_text(),
        *(_strip((gpu / part).read_text()) for part in PARTS),
        _strip((gpu / f"{name}.h").read_text()),
    ]
    return "\n".join(pieces)


def metal_path(name: str, kernels: Path = KERNELS) -> Path:
    return kernels / "metal" / f"{name}.metal"


def main() -> None:
    for name in PORTABLE:
        path = metal_path(name)
        path.parent.mkdir(exist_ok=True)
        path.write_text(metal_source(name))
        print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
