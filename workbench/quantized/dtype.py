"""``GgmlDType``: the element types of ggml / GGUF tensors.

Values are ggml's type ids, the ones stored in GGUF tensor infos. Each type packs
``block_size`` elements into ``type_size`` bytes, so ``bits_per_weight = 8 * type_size /
block_size`` (Q4_K: 144 bytes per 256 weights = 4.5 bpw).
"""

from __future__ import annotations

import enum

from ..backends.cpu.ggml import table
from .errors import GgmlTypeError


class GgmlDType(enum.IntEnum):
    """A ggml tensor type; the value is its id in GGUF files."""

    F32 = 0
    F16 = 1
    Q4_0 = 2
    Q4_1 = 3
    Q5_0 = 6
    Q5_1 = 7
    Q8_0 = 8
    Q8_1 = 9
    Q2_K = 10
    Q3_K = 11
    Q4_K = 12
    Q5_K = 13
    Q6_K = 14
    Q8_K = 15
    IQ4_NL = 20
    IQ4_XS = 23
    BF16 = 30

    @property
    def block_size(self) -> int:
        """Elements per block (1 for F32/F16/BF16, 32 for Q4_0..Q8_1 and IQ4_NL, else 256)."""
        return table.BY_ID[self.value].block_size

    @property
    def type_size(self) -> int:
        """Bytes per block."""
        return table.BY_ID[self.value].type_size

    @property
    def bits_per_weight(self) -> float:
        return 8.0 * self.type_size / self.block_size

    @property
    def is_quantized(self) -> bool:
        """True for the block types, False for F32, F16 and BF16."""
        return self.block_size > 1

    def row_bytes(self, n: int) -> int:
        """Bytes taken by ``n`` consecutive elements; ``n`` must be a multiple of the block."""
        if n % self.block_size:
            raise GgmlTypeError(
                f"{self.name}: {n} elements is not a multiple of the block size {self.block_size}"
            )
        return n // self.block_size * self.type_size

    @classmethod
    def from_id(cls, type_id: int) -> GgmlDType:
        """The type with ggml id ``type_id``; ``GgmlTypeError`` names unknown or unsupported ids."""
        try:
            return cls(type_id)
        except ValueError:
            pass
        known = table.BY_ID.get(type_id)
        if known is not None:
            raise GgmlTypeError(
                f"ggml type {known.name} (id {type_id}) is not supported by workbench; "
                f"supported: {_supported()}"
            ) from None
        raise GgmlTypeError(f"unknown ggml type id {type_id}; supported: {_supported()}") from None

    @classmethod
    def from_name(cls, name: str | GgmlDType) -> GgmlDType:
        """Look a type up by name, case-insensitively (``"q4_k"`` -> ``GgmlDType.Q4_K``)."""
        if isinstance(name, GgmlDType):
            return name
        try:
            return cls[str(name).upper()]
        except KeyError:
            raise GgmlTypeError(f"unknown ggml type {name!r}; supported: {_supported()}") from None

    def __repr__(self) -> str:
        return f"GgmlDType.{self.name}"

    def __str__(self) -> str:
        return self.name


def _supported() -> str:
    return ", ".join(t.name for t in GgmlDType)


# The enum and the codec table must agree on every id.
assert {t.name: t.value for t in GgmlDType} == {t.name: t.id for t in table.TYPES if t.supported}, (
    "GgmlDType and backends/cpu/ggml/table.py disagree"
)
