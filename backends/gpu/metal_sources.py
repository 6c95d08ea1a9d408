"""Metal sources generated from the portable kernel bodies in ``kernels/gpu``.

``kernels/metal/<name>.metal`` is the Metal prelude followed by the headers of ``kernels/gpu``
that ``kernels/cuda/<name>.cu`` includes after the CUDA prelude, in its order (the dialect's
common part, then e.g. the op table's lists, the block reductions and the body
``kernels/gpu/<name>.h``), inlined: Metal compiles one source string at run time.
Regenerate with ``python -m workbench.backends.gpu.metal_sources``; a test fails when stale.

``PORTABLE`` lists the kernel families (every ``kernels/cuda/*.cu``: all are written in the
dialect).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

KERNELS = Path(__file__).resolve().parent.parent.parent / "kernels"
PORTABLE = ("conv", "elementwise", "fused", "indexing", "matmul", "norm", "pad", "pool",
            "quantized", "reduce", "upsample")  # fmt: skip
_INCLUDE = re.compile(r'^#include "\.\./gpu/(\w+\.h)"', re.MULTILINE)


def _strip(text: str) -> str:
    lines = text.splitlines(keepends=True)
    return "".join(line for line in lines if line.strip() != "#pragma once")


def parts(name: str, kernels: Path = KERNELS) -> list[str]:
    """The ``kernels/gpu`` headers of family ``name`` after the prelude: ``common.h`` (which
    ``common.cuh`` includes), then those ``kernels/cuda/<name>.cu`` includes, in order."""
    cu = (kernels / "cuda" / f"{name}.cu").read_text()
    return ["common.h", *_INCLUDE.findall(cu)]


def metal_source(name: str, kernels: Path = KERNELS) -> str:
    """The generated ``kernels/metal/<name>.metal``."""
    gpu = kernels / "gpu"
    pieces = [
        f"// Generated from kernels/gpu/{name}.h by\n"
        "// `python -m workbench.backends.gpu.metal_sources`: do not edit.\n",
        (gpu / "prelude_metal.h").read_text(),
        *(_strip((gpu / part).read_text()) for part in parts(name, kernels)),
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
