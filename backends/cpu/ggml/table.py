"""ggml's tensor types: id (as stored in GGUF files), block size, bytes per block.

Every type ggml defines is listed so that a file can be sized and checked even when it holds
a type workbench cannot decode; ``supported`` says whether this package has a codec for it.
Ids 4 and 5 (the retired Q4_2 / Q4_3) and 31..33, 36..38 are unassigned.
"""

from __future__ import annotations

from typing import NamedTuple


class GgmlTypeInfo(NamedTuple):
    name: str
    id: int
    block_size: int  # elements per block
    type_size: int  # bytes per block
    supported: bool

    @property
    def bits_per_weight(self) -> float:
        return 8.0 * self.type_size / self.block_size


_ROWS = (
    # name,      id, block, bytes, codec
    ("F32",       0,   1,   4, True),
    ("F16",       1,   1,   2, True),
    ("Q4_0",      2,  32,  18, True),
    ("Q4_1",      3,  32,  20, True),
    ("Q5_0",      6,  32,  22, True),
    ("Q5_1",      7,  32,  24, True),
    ("Q8_0",      8,  32,  34, True),
    ("Q8_1",      9,  32,  36, True),
    ("Q2_K",     10, 256,  84, True),
    ("Q3_K",     11, 256, 110, True),
    ("Q4_K",     12, 256, 144, True),
    ("Q5_K",     13, 256, 176, True),
    ("Q6_K",     14, 256, 210, True),
    ("Q8_K",     15, 256, 292, True),
    ("IQ2_XXS",  16, 256,  66, False),
    ("IQ2_XS",   17, 256,  74, False),
    ("IQ3_XXS",  18, 256,  98, False),
    ("IQ1_S",    19, 256,  50, False),
    ("IQ4_NL",   20,  32,  18, True),
    ("IQ3_S",    21, 256, 110, False),
    ("IQ2_S",    22, 256,  82, False),
    ("IQ4_XS",   23, 256, 136, True),
    ("I8",       24,   1,   1, False),
    ("I16",      25,   1,   2, False),
    ("I32",      26,   1,   4, False),
    ("I64",      27,   1,   8, False),
    ("F64",      28,   1,   8, False),
    ("IQ1_M",    29, 256,  56, False),
    ("BF16",     30,   1,   2, True),
    ("TQ1_0",    34, 256,  54, False),
    ("TQ2_0",    35, 256,  66, False),
    ("MXFP4",    39,  32,  17, False),
)  # fmt: skip

TYPES: tuple[GgmlTypeInfo, ...] = tuple(GgmlTypeInfo(*row) for row in _ROWS)
BY_ID: dict[int, GgmlTypeInfo] = {t.id: t for t in TYPES}
BY_NAME: dict[str, GgmlTypeInfo] = {t.name: t for t in TYPES}
SUPPORTED: tuple[str, ...] = tuple(t.name for t in TYPES if t.supported)
