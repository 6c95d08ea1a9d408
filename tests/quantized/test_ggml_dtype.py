"""GgmlDType: ids, sizes and lookups agree with ggml (via gguf-py's tables)."""

from __future__ import annotations

import gguf
import pytest

from workbench.errors import WorkbenchError
from workbench.quantized import GgmlDType, GgmlTypeError


@pytest.mark.parametrize("t", list(GgmlDType))
def test_ids_and_sizes_match_ggml(t):
    ref = gguf.GGMLQuantizationType[t.name]
    assert t.value == ref.value
    block, size = gguf.GGML_QUANT_SIZES[ref]
    if t is GgmlDType.Q8_1:
        size = 36  # gguf-py's table predates ggml's f16 d/s (ggml static_asserts 36 bytes)
    assert (t.block_size, t.type_size) == (block, size)
    assert t.bits_per_weight == pytest.approx(8 * size / block)
    assert t.is_quantized == (block > 1)


def test_the_issue_list_including_iq4():
    names = {t.name for t in GgmlDType}
    assert names == {
        "F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q8_1", "Q2_K", "Q3_K",
        "Q4_K", "Q5_K", "Q6_K", "Q8_K", "IQ4_NL", "IQ4_XS",
    }  # fmt: skip


def test_bits_per_weight():
    assert GgmlDType.Q4_K.bits_per_weight == 4.5
    assert GgmlDType.IQ4_XS.bits_per_weight == 4.25
    assert GgmlDType.Q6_K.bits_per_weight == 6.5625
    assert GgmlDType.Q4_K.row_bytes(4096) == 16 * 144


def test_lookups_and_errors():
    assert GgmlDType.from_id(12) is GgmlDType.Q4_K
    assert GgmlDType.from_name("q4_k") is GgmlDType.Q4_K
    assert GgmlDType.from_name(GgmlDType.F16) is GgmlDType.F16
    with pytest.raises(GgmlTypeError, match=r"IQ2_XXS \(id 16\) is not supported"):
        GgmlDType.from_id(16)
    with pytest.raises(GgmlTypeError, match="unknown ggml type id 4"):
        GgmlDType.from_id(4)
    with pytest.raises(GgmlTypeError, match="unknown ggml type 'Q9'") as info:
        GgmlDType.from_name("Q9")
    assert isinstance(info.value, WorkbenchError)
    with pytest.raises(GgmlTypeError, match="multiple of the block size 256"):
        GgmlDType.Q4_K.row_bytes(100)
