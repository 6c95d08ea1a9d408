"""safetensors: every dtype both ways with the `safetensors` package, metadata, memory mapping,
and clear errors for truncated or corrupted files."""

from __future__ import annotations

import json
import mmap
import struct

import ml_dtypes
import numpy as np
import pytest
import safetensors.numpy as st_np
import safetensors.torch as st_torch
import torch

import workbench as wb
from workbench.io import (
    SafetensorsError,
    SafetensorsFile,
    load_safetensors,
    open_safetensors,
    save_safetensors,
)
from workbench.io.safetensors import deserialize, serialize

R = np.random.default_rng(0)
DTYPES = [wb.bool, wb.u8, wb.u32, wb.i8, wb.i16, wb.i32, wb.i64, wb.f16, wb.bf16, wb.f32, wb.f64]


def _sample(dtype, shape=(3, 5)):
    if dtype is wb.bool:
        return wb.tensor(R.random(shape) > 0.5)
    if dtype.is_floating_point:
        return wb.tensor(R.standard_normal(shape), dtype=dtype)
    return wb.tensor(R.integers(0, 100, shape), dtype=dtype)


def _host(t) -> np.ndarray:
    return t.numpy()


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_written_by_workbench_read_by_safetensors(tmp_path, dtype):
    tensors = {"a": _sample(dtype), "scalar": _sample(dtype, ()), "empty": _sample(dtype, (0, 2))}
    path = tmp_path / "x.safetensors"
    save_safetensors(tensors, path, metadata={"format": "pt", "note": "ünïcode"})
    if dtype is wb.u32:  # safetensors' torch API (torch has no full uint32 support) via numpy
        loaded = st_np.load_file(str(path))
    else:
        loaded = {
            k: v.float().numpy() if v.dtype == torch.bfloat16 else v.numpy()
            for k, v in st_torch.load_file(str(path)).items()
        }
    for name, t in tensors.items():
        expected = _host(t)
        if dtype is wb.bf16:
            expected = expected.astype(np.float32)
        np.testing.assert_array_equal(loaded[name], expected)
        assert loaded[name].shape == t.shape
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    assert header["__metadata__"] == {"format": "pt", "note": "ünïcode"}
    assert (8 + n) % 8 == 0  # data starts aligned


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_written_by_safetensors_read_by_workbench(tmp_path, dtype):
    arrays = {"a": _host(_sample(dtype)), "b": _host(_sample(dtype, (4,)))}
    path = tmp_path / "x.safetensors"
    st_np.save_file(arrays, str(path), metadata={"k": "v"})
    tensors, metadata = load_safetensors(path, with_metadata=True)
    assert metadata == {"k": "v"}
    for name, a in arrays.items():
        assert tensors[name].dtype is dtype
        np.testing.assert_array_equal(tensors[name].numpy(), a)


def test_torch_bf16_file(tmp_path):
    t = torch.randn(4, 3).to(torch.bfloat16)
    path = tmp_path / "bf16.safetensors"
    st_torch.save_file({"w": t}, str(path))
    w = load_safetensors(path)["w"]
    assert w.dtype is wb.bf16
    np.testing.assert_array_equal(w.numpy().astype(np.float32), t.float().numpy())


def test_widened_dtypes(tmp_path):
    arrays = {
        "u16": np.array([0, 65535], np.uint16),
        "u64": np.array([1, 2**40], np.uint64),
        "f8": np.array([0.5, -448.0, 0.001953125], ml_dtypes.float8_e4m3fn),
        "f8_e5m2": np.array([57344.0, -1.5], ml_dtypes.float8_e5m2),
    }
    path = tmp_path / "w.safetensors"
    st_np.save_file(arrays, str(path))
    t = load_safetensors(path)
    assert (t["u16"].dtype, t["u64"].dtype) == (wb.i32, wb.i64)
    assert t["f8"].dtype is wb.bf16 and t["f8_e5m2"].dtype is wb.bf16
    for name, a in arrays.items():
        np.testing.assert_array_equal(t[name].numpy().astype(np.float64), a.astype(np.float64))


def test_memory_mapped_zero_copy(tmp_path):
    path = tmp_path / "m.safetensors"
    save_safetensors({"w": wb.randn(64, 64), "b": wb.randn(64)}, path)
    w = load_safetensors(path)["w"]
    array = w.numpy()
    assert not array.flags.writeable
    base = array
    while getattr(base, "base", None) is not None and not isinstance(base, mmap.mmap):
        base = base.base
    assert isinstance(base.obj if isinstance(base, memoryview) else base, mmap.mmap)
    # overwriting the file (written beside and renamed) leaves the mapped tensor intact
    before = array.copy()
    save_safetensors({"w": wb.zeros(64, 64), "b": wb.zeros(64)}, path)
    np.testing.assert_array_equal(w.numpy(), before)
    np.testing.assert_array_equal(load_safetensors(path)["w"].numpy(), np.zeros((64, 64)))
    # computing with the mapped tensor works as with any other
    assert (w * 2).sum().item() == pytest.approx(float(before.sum() * 2), rel=1e-4)


def test_lazy_file_reader(tmp_path):
    path = tmp_path / "lazy.safetensors"
    save_safetensors({"x": wb.ones(2, 3), "y": wb.zeros(4, dtype=wb.i32)}, path, {"a": "b"})
    f = open_safetensors(path)
    assert isinstance(f, SafetensorsFile)
    assert sorted(f) == ["x", "y"] and len(f) == 2 and "x" in f
    assert f.info("y").shape == (4,) and f.info("y").dtype == "I32"
    assert f.metadata == {"a": "b"}
    assert f["x"].shape == (2, 3)
    with pytest.raises(KeyError, match="no tensor named 'z'"):
        f["z"]


def test_bytes_round_trip_and_non_contiguous():
    t = wb.arange(12, dtype=wb.f32).reshape(3, 4).transpose(0, 1)  # a strided view
    data = serialize({"t": t, "n": np.arange(3, dtype=np.int64)}, {"m": "1"})
    assert st_np.load(data)["t"].tolist() == t.tolist()
    back = deserialize(data)
    np.testing.assert_array_equal(back["t"].numpy(), t.numpy())
    np.testing.assert_array_equal(back["n"].numpy(), [0, 1, 2])


def test_write_errors(tmp_path):
    with pytest.raises(SafetensorsError, match="metadata must map strings to strings"):
        save_safetensors({"a": wb.ones(1)}, tmp_path / "a", metadata={"k": 1})
    with pytest.raises(SafetensorsError, match="numpy dtype complex128"):
        save_safetensors({"c": np.zeros(2, complex)}, tmp_path / "a")
    assert not list(tmp_path.iterdir())  # nothing half-written left behind


# -- broken files ------------------------------------------------------------------------------
def _file(tmp_path, header: dict | bytes, data: bytes = b"", n: int | None = None):
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    path = tmp_path / "bad.safetensors"
    path.write_bytes(struct.pack("<Q", len(raw) if n is None else n) + raw + data)
    return path


def _entry(dtype="F32", shape=(2,), offsets=(0, 8)):
    return {"dtype": dtype, "shape": list(shape), "data_offsets": list(offsets)}


BROKEN = [
    ("empty", lambda p: p / "e.safetensors", "holds 0 bytes"),
    ("header_past_end", lambda p: _file(p, b"{}", n=1000), "runs past the end"),
    ("huge_header", lambda p: _file(p, b"{}", n=2**60), "over the 100000000-byte limit"),
    ("not_json", lambda p: _file(p, b"{not json"), "not valid UTF-8 JSON"),
    ("not_an_object", lambda p: _file(p, b"[1, 2]"), "does not start with '{'"),
    ("bad_metadata", lambda p: _file(p, {"__metadata__": {"a": 1}}), "__metadata__ must map"),
    ("bad_dtype", lambda p: _file(p, {"w": _entry("F13")}, bytes(8)), "dtype 'F13'"),
    ("bad_shape", lambda p: _file(p, {"w": _entry(shape=(-2,))}, bytes(8)), "shape \\[-2\\]"),
    ("missing_key", lambda p: _file(p, {"w": {"dtype": "F32", "shape": [2]}}, bytes(8)),
     "exactly the keys"),
    ("size_mismatch", lambda p: _file(p, {"w": _entry(shape=(3,))}, bytes(8)),
     "needs 12 bytes but data_offsets \\[0, 8\\] span 8"),
    ("truncated", lambda p: _file(p, {"w": _entry(offsets=(0, 8))}, bytes(5)),
     "tensor 'w'.*go past the end of the data \\(5 bytes\\).*truncated"),
    ("overlap", lambda p: _file(p, {"a": _entry(), "b": _entry(offsets=(4, 12))}, bytes(12)),
     "tensor 'b'.*overlaps the previous tensor"),
    ("gap", lambda p: _file(p, {"a": _entry(offsets=(4, 12))}, bytes(12)), "leaves a gap"),
    ("trailing_bytes", lambda p: _file(p, {"a": _entry()}, bytes(16)),
     "cover 8 bytes of data but the file holds 16"),
    ("reversed_offsets", lambda p: _file(p, {"a": _entry(offsets=(8, 0))}, bytes(8)),
     "are not \\[begin, end\\]"),
    ("bool_bytes", lambda p: _file(p, {"a": _entry("BOOL", (2,), (0, 2))}, b"\x00\x07"),
     "BOOL data holds bytes other than 0 and 1"),
]  # fmt: skip


@pytest.mark.parametrize("make, message", [c[1:] for c in BROKEN], ids=[c[0] for c in BROKEN])
def test_broken_files_raise_clear_errors(tmp_path, make, message):
    path = make(tmp_path)
    if not path.exists():
        path.write_bytes(b"")
    with pytest.raises(SafetensorsError, match=message) as e:
        load_safetensors(path)
    assert str(path) in str(e.value)
    assert isinstance(e.value, wb.WorkbenchError)


def test_truncated_real_file(tmp_path):
    path = tmp_path / "t.safetensors"
    save_safetensors({"a": wb.randn(10, 10), "b": wb.randn(100)}, path)
    data = path.read_bytes()
    for cut in (4, 20, len(data) - 1):
        path.write_bytes(data[:cut])
        with pytest.raises(SafetensorsError, match=str(path)):
            load_safetensors(path)
    path.write_bytes(data[:-10])
    with pytest.raises(SafetensorsError, match="tensor 'b'.*truncated"):
        load_safetensors(path)


def test_missing_file(tmp_path):
    with pytest.raises(SafetensorsError, match="cannot open the file"):
        load_safetensors(tmp_path / "nope.safetensors")
