"""Hostile safetensors headers, each decided against the reference (the ``safetensors``
package, whose Rust parser is serde_json): rejected where it rejects, accepted where it
accepts, and a tensor that numpy cannot hold raises ``SafetensorsError`` when it is read."""

from __future__ import annotations

import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from safetensors import SafetensorError, safe_open

import workbench as wb
from workbench.io import SafetensorsError, load_safetensors, save_safetensors
from workbench.io.safetensors import SafetensorsFile, serialize

EMPTY = '"dtype":"F32","shape":[0],"data_offsets":[0,0]'


def _write(tmp_path, header: str, data: bytes = b""):
    raw = header.encode("utf-8")
    path = tmp_path / "h.safetensors"
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)
    return path


def _reference_accepts(path) -> bool:
    try:
        with safe_open(str(path), "np") as f:
            list(f.keys())
    except SafetensorError:
        return False
    return True


REJECTED = {
    "deep_nesting": '{"__metadata__":' + "[" * 100_000 + "]" * 100_000 + "}",
    "5000_digit_int": '{"a":{"dtype":"F32","shape":[' + "9" * 5000 + '],"data_offsets":[0,0]}}',
    "dim_past_u64": '{"a":{"dtype":"F32","shape":[18446744073709551616,0],'
    '"data_offsets":[0,0]}}',
    "dtype_list": '{"a":{"dtype":["F32"],"shape":[0],"data_offsets":[0,0]}}',
    "dtype_object": '{"a":{"dtype":{"F32":1},"shape":[0],"data_offsets":[0,0]}}',
    "lone_surrogate_name": '{"\\ud800":{' + EMPTY + "}}",
    "lone_surrogate_metadata": '{"__metadata__":{"k":"\\udc00"},"a":{' + EMPTY + "}}",
    "duplicate_metadata": '{"__metadata__":{},"__metadata__":{}}',
    "duplicate_field": '{"a":{"dtype":"F32","dtype":"F32","shape":[0],"data_offsets":[0,0]}}',
    "float_dim": '{"a":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}}',
    "count_past_u64": '{"a":{"dtype":"F32","shape":[1099511627776,1099511627776,0],'
    '"data_offsets":[0,0]}}',
}  # fmt: skip


@pytest.mark.parametrize("name", REJECTED)
def test_headers_the_reference_rejects_raise_safetensors_error(tmp_path, name):
    path = _write(tmp_path, REJECTED[name], bytes(4) if name == "float_dim" else b"")
    assert not _reference_accepts(path)
    with pytest.raises(SafetensorsError, match="h.safetensors"):
        load_safetensors(path)


def test_duplicate_tensor_names_are_refused_deliberately(tmp_path):
    """The reference keeps the last of two same-named entries; a writer that emits two is
    broken, and which one a reader keeps is arbitrary, so workbench refuses the file."""
    path = _write(tmp_path, '{"a":{' + EMPTY + '},"a":{' + EMPTY + "}}")
    assert _reference_accepts(path)
    with pytest.raises(SafetensorsError, match="'a' appears twice"):
        load_safetensors(path)


def test_surrogate_pairs_are_valid_names(tmp_path):
    path = _write(tmp_path, '{"\\ud83d\\ude00":{' + EMPTY + "}}")
    assert _reference_accepts(path)
    assert list(load_safetensors(path)) == ["\U0001f600"]


@pytest.mark.parametrize(
    "shape, data",
    [([2**63, 0], b""), ([0, 2**64 - 1], b""), ([1] * 65, bytes(4))],
    ids=["2**63_by_0", "0_by_u64_max", "65_dims"],
)
def test_valid_headers_numpy_cannot_hold_raise_on_read(tmp_path, shape, data):
    dims = ",".join(map(str, shape))
    header = f'{{"a":{{"dtype":"F32","shape":[{dims}],"data_offsets":[0,{len(data)}]}}}}'
    path = _write(tmp_path, header, data)
    assert _reference_accepts(path)
    f = SafetensorsFile(path)  # the header is valid: keys and info are readable
    assert f.info("a").shape == tuple(shape)
    with pytest.raises(SafetensorsError, match="tensor 'a'.*cannot be loaded"):
        f["a"]


def test_64_dims_and_large_empty_dims_load(tmp_path):
    path = tmp_path / "ok.safetensors"
    path.write_bytes(serialize({"a": np.ones((1,) * 64, np.float32)}))
    assert load_safetensors(path)["a"].shape == (1,) * 64
    header = '{"b":{"dtype":"F32","shape":[1000000000000,0],"data_offsets":[0,0]}}'
    assert load_safetensors(_write(tmp_path, header))["b"].shape == (10**12, 0)


def test_save_refuses_names_the_reference_could_not_read(tmp_path):
    with pytest.raises(SafetensorsError, match="valid Unicode"):
        save_safetensors({"bad\ud800": wb.ones(1)}, tmp_path / "s.safetensors")
    with pytest.raises(SafetensorsError, match="metadata must map strings"):
        save_safetensors({"a": wb.ones(1)}, tmp_path / "s.safetensors", metadata={"k": "\udc00"})
    save_safetensors({"ok\U0001f600": wb.ones(1)}, tmp_path / "s.safetensors")
    assert _reference_accepts(tmp_path / "s.safetensors")


# A header of many tiny entries (at the reference's 100 MB header limit this is 2 million
# tensors): what parsing costs per header byte, measured in a fresh process.
_MEMORY_SCRIPT = textwrap.dedent(
    """
    import struct, sys, tracemalloc
    from workbench.io.safetensors import SafetensorsFile
    n, path = int(sys.argv[1]), sys.argv[2]
    entry = '"dtype":"F32","shape":[0],"data_offsets":[0,0]'
    raw = ("{" + ",".join(f'"{i}":{{{entry}}}' for i in range(n)) + "}").encode()
    open(path, "wb").write(struct.pack("<Q", len(raw)) + raw)
    del raw
    SafetensorsFile(path)  # warm up
    tracemalloc.start()
    f = SafetensorsFile(path)
    print(len(f), tracemalloc.get_traced_memory()[1])
    """
)


def test_memory_per_header_byte_is_bounded(tmp_path):
    path = tmp_path / "many.safetensors"
    out = subprocess.run(
        [sys.executable, "-c", _MEMORY_SCRIPT, "20000", str(path)],
        capture_output=True, text=True, timeout=300, check=True,
    ).stdout.split()  # fmt: skip
    count, peak = int(out[0]), float(out[1])
    assert count == 20000
    assert peak < 12 * path.stat().st_size, peak / path.stat().st_size  # 10.2x; it was 15x
