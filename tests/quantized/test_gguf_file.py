"""GGUF reading and writing: interop with gguf-py both ways, versions 1-3, hostile files.

A hostile or broken file must raise ``GgufError`` naming the file and the field, never
another exception, and must not make the reader allocate more than the file's size.
"""

from __future__ import annotations

import struct
import tracemalloc

import gguf
import numpy as np
import pytest
from gguf import quants

from workbench.errors import WorkbenchError
from workbench.quantized import (
    GgmlDType,
    GgufError,
    GgufValue,
    GgufValueType,
    QTensor,
    read_gguf,
    write_gguf,
)

V = GgufValueType
GT = gguf.GGUFValueType
ALIGN = "general.alignment"
DATA = bytes(64)


# ----------------------------------------------------------------------- hand-built files
def _len(n: int, wide: bool) -> bytes:
    return struct.pack("<Q" if wide else "<I", n)


def gstr(text: str | bytes, wide: bool = True) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return _len(len(raw), wide) + raw


def kv(key: str, type_id: int, payload: bytes, wide: bool = True) -> bytes:
    return gstr(key, wide) + struct.pack("<I", type_id) + payload


def tinfo(name: str, dims, type_id: int, offset: int, wide: bool = True) -> bytes:
    out = gstr(name, wide) + struct.pack("<I", len(dims))
    out += b"".join(_len(d, wide) for d in dims)
    return out + struct.pack("<IQ", type_id, offset)


def build(kvs=(), infos=(), data=b"", version=3, n_kv=None, n_tensors=None, alignment=32):
    wide = version >= 2
    head = b"GGUF" + struct.pack("<I", version)
    head += _len(len(infos) if n_tensors is None else n_tensors, wide)
    head += _len(len(kvs) if n_kv is None else n_kv, wide)
    head += b"".join(kvs) + b"".join(infos)
    head += bytes(-len(head) % alignment)
    return head + data


def f32_tensor(name="w", rows=2, cols=4, offset=0, wide=True):
    data = np.arange(rows * cols, dtype="<f4").tobytes()
    return tinfo(name, [cols, rows], 0, offset, wide), data


@pytest.fixture
def write(tmp_path):
    def _write(content: bytes, name: str = "f.gguf") -> str:
        p = tmp_path / name
        p.write_bytes(content)
        return str(p)

    return _write


def expect_error(path: str, field: str) -> GgufError:
    with pytest.raises(GgufError) as info:
        read_gguf(path)
    err = info.value
    assert isinstance(err, WorkbenchError) and isinstance(err, ValueError)
    assert path in str(err), str(err)
    assert field in err.field, (field, str(err))
    return err


# --------------------------------------------------------------------------- sample model
def sample_metadata() -> dict:
    return {
        "general.architecture": "llama",
        "general.name": "tiny ünïcode",
        "u8": GgufValue(200, V.UINT8),
        "i8": GgufValue(-100, V.INT8),
        "u16": GgufValue(60000, V.UINT16),
        "i16": GgufValue(-30000, V.INT16),
        "u32": GgufValue(4_000_000_000, V.UINT32),
        "i32": -5,
        "f32": 0.25,
        "flag": True,
        "u64": GgufValue(2**63 + 5, V.UINT64),
        "i64": -(2**40),
        "f64": GgufValue(1.0 / 3.0, V.FLOAT64),
        "tokens": ["<s>", "</s>", "héllo", ""],
        "scores": np.array([0.5, -1.25, 3.0], np.float32),
        "types": np.array([1, 2, 3], np.int32),
        "bools": [True, False, True],
        "u64s": np.array([0, 2**64 - 1], np.uint64),
        "nested": [[1, 2], [3]],
        "empty": [],
    }


def sample_tensors() -> dict:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 256)).astype(np.float32)
    out = {f"q.{t.name}": QTensor.quantize(x, t) for t in GgmlDType}
    out["plain_f32"] = x[:2, :8]
    out["plain_f16"] = x[:3, :16].astype(np.float16)
    out["vector"] = x[0]
    return out


# ================================================================ writing, read by gguf-py
def test_written_file_reads_in_gguf_py(tmp_path):
    path = str(tmp_path / "m.gguf")
    md, ts = sample_metadata(), sample_tensors()
    write_gguf(path, md, ts)
    r = gguf.GGUFReader(path)
    assert r.fields["GGUF.version"].contents() == 3
    expected_types = {
        "u8": GT.UINT8, "i8": GT.INT8, "u16": GT.UINT16, "i16": GT.INT16, "u32": GT.UINT32,
        "i32": GT.INT32, "f32": GT.FLOAT32, "flag": GT.BOOL, "u64": GT.UINT64, "i64": GT.INT64,
        "f64": GT.FLOAT64, "general.name": GT.STRING,
    }  # fmt: skip
    for key, t in expected_types.items():
        assert r.fields[key].types == [t], key
        want = md[key].value if isinstance(md[key], GgufValue) else md[key]
        assert r.fields[key].contents() == pytest.approx(want), key
    assert r.fields["tokens"].types == [GT.ARRAY, GT.STRING]
    assert r.fields["tokens"].contents() == md["tokens"]
    assert r.fields["scores"].types == [GT.ARRAY, GT.FLOAT32]
    assert r.fields["scores"].contents() == [0.5, -1.25, 3.0]
    assert r.fields["u64s"].contents() == [0, 2**64 - 1]
    assert r.fields["bools"].contents() == [True, False, True]
    assert r.fields["nested"].types == [GT.ARRAY, GT.ARRAY, GT.INT32]
    tensors = {t.name: t for t in r.tensors}
    assert set(tensors) == set(ts)
    for name, t in ts.items():
        rt = tensors[name]
        if isinstance(t, QTensor):
            assert rt.tensor_type.value == t.ggml_dtype.value
            assert tuple(int(d) for d in rt.shape[::-1]) == t.shape
            if t.ggml_dtype is GgmlDType.Q8_1:
                continue  # gguf-py sizes Q8_1 blocks as 40 B (see test_table_matches_gguf_py)
            np.testing.assert_array_equal(rt.data.view(np.uint8).reshape(-1), t.data.reshape(-1))
            if rt.tensor_type.name not in ("Q8_1", "Q8_K"):  # gguf-py cannot decode these
                np.testing.assert_array_equal(
                    quants.dequantize(rt.data, rt.tensor_type).reshape(t.shape),
                    t.dequantize_numpy(),
                )
        else:
            np.testing.assert_array_equal(np.asarray(rt.data).reshape(t.shape), t)


# ================================================================ gguf-py files, read here
def test_reads_gguf_py_files(tmp_path):
    path = str(tmp_path / "g.gguf")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((8, 512)).astype(np.float32)
    w = gguf.GGUFWriter(path, arch="llama")
    ints = {"u8": GT.UINT8, "i8": GT.INT8, "u16": GT.UINT16, "i16": GT.INT16,
            "u32": GT.UINT32, "i32": GT.INT32, "u64": GT.UINT64, "i64": GT.INT64}  # fmt: skip
    for name, t in ints.items():
        w.add_key_value(name, 7, t)
    w.add_float32("f32", 1.5)
    w.add_float64("f64", 2.5)
    w.add_bool("flag", False)
    w.add_string("s", "text")
    w.add_array("strs", ["a", "bc"])
    w.add_array("ints", [1, -2, 3])
    w.add_array("floats", [0.5, 1.5])
    w.add_tensor("f32", x)
    w.add_tensor("f16", x.astype(np.float16))
    for t in (gguf.GGMLQuantizationType.Q4_0, gguf.GGMLQuantizationType.Q8_0,
              gguf.GGMLQuantizationType.BF16):  # fmt: skip
        w.add_tensor(f"gguf.{t.name}", quants.quantize(x, t), raw_dtype=t)
    for name in ("Q4_K", "Q6_K", "IQ4_XS"):
        q = QTensor.quantize(x, name)
        w.add_tensor(f"ours.{name}", q.data, raw_dtype=gguf.GGMLQuantizationType[name])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    f = read_gguf(path)
    assert f.version == 3
    md = f.metadata
    assert md["general.architecture"] == "llama"
    for name, t in [("u8", V.UINT8), ("i8", V.INT8), ("u64", V.UINT64), ("i64", V.INT64)]:
        assert md[name] == 7 and f.kv[name].type is t
    assert md["f32"] == 1.5 and md["f64"] == 2.5 and md["flag"] is False and md["s"] == "text"
    assert md["strs"] == ["a", "bc"]
    np.testing.assert_array_equal(md["ints"], [1, -2, 3])
    assert f.kv["ints"].item_type is V.INT32
    np.testing.assert_array_equal(md["floats"], [0.5, 1.5])
    np.testing.assert_array_equal(f.qtensor("f32").dequantize_numpy(), x)
    np.testing.assert_array_equal(f.qtensor("f16").dequantize_numpy(), x.astype(np.float16))
    for t in ("Q4_0", "Q8_0", "BF16"):
        q = f.qtensor(f"gguf.{t}")
        assert q.ggml_dtype is GgmlDType[t] and q.shape == (8, 512)
        ref = quants.dequantize(quants.quantize(x, gguf.GGMLQuantizationType[t]),
                                gguf.GGMLQuantizationType[t])  # fmt: skip
        np.testing.assert_array_equal(q.dequantize_numpy(), ref)
    for name in ("Q4_K", "Q6_K", "IQ4_XS"):
        np.testing.assert_array_equal(
            f.qtensor(f"ours.{name}").dequantize_numpy(),
            QTensor.quantize(x, name).dequantize_numpy(),
        )


# ================================================================ our own round trip
@pytest.mark.parametrize("alignment", [None, 8, 64])
def test_round_trip_keeps_types_values_and_tensors(tmp_path, alignment):
    path, again = str(tmp_path / "a.gguf"), str(tmp_path / "b.gguf")
    md, ts = sample_metadata(), sample_tensors()
    write_gguf(path, md, ts, alignment=alignment)
    f = read_gguf(path)
    assert f.alignment == (alignment or 32)
    assert f.data_offset % f.alignment == 0
    for name, info in f.tensors.items():
        assert info.offset % f.alignment == 0, name
    for key, value in md.items():
        got = f.kv[key]
        if isinstance(value, GgufValue):
            assert got.type is value.type and got.value == value.value, key
    assert f.kv["i32"].type is V.INT32 and f.kv["f32"].type is V.FLOAT32
    assert f.kv["i64"].type is V.INT64 and f.kv["flag"].type is V.BOOL
    assert f.kv["nested"].item_type is V.ARRAY
    assert [list(v) for v in f.metadata["nested"]] == [[1, 2], [3]]
    assert f.kv["empty"].type is V.ARRAY and len(f.metadata["empty"]) == 0
    assert f.metadata["general.name"] == "tiny ünïcode"
    for name, t in ts.items():
        q = f.qtensor(name)
        if isinstance(t, QTensor):
            assert q.ggml_dtype is t.ggml_dtype and q.shape == t.shape
            np.testing.assert_array_equal(q.data, t.data)
        else:
            np.testing.assert_array_equal(q.dequantize_numpy(), t.astype(np.float32))
    # Rewriting the typed metadata reproduces the file byte for byte.
    write_gguf(again, f.kv, f.load())
    with open(path, "rb") as a, open(again, "rb") as b:
        assert a.read() == b.read()


def test_tensor_data_is_memory_mapped(tmp_path):
    path = str(tmp_path / "m.gguf")
    write_gguf(path, {}, {"w": QTensor.quantize(np.ones((2, 256), np.float32), "Q4_K")})
    q = read_gguf(path).qtensor("w")
    assert isinstance(q.data.base, np.memmap) or isinstance(q.data.base.base, np.memmap)
    assert not q.data.flags.writeable


def test_writer_errors(tmp_path):
    p = str(tmp_path / "x.gguf")
    with pytest.raises(ValueError, match="alignment"):
        write_gguf(p, {}, {}, alignment=3)
    with pytest.raises(ValueError, match="int64"):
        write_gguf(p, {}, {"t": np.zeros(4, np.int64)})
    with pytest.raises(ValueError, match="one type"):
        write_gguf(p, {"bad": [1, "a"]}, {})
    with pytest.raises(ValueError, match="at most|allows"):
        write_gguf(p, {}, {"t": np.zeros((1, 1, 1, 1, 2), np.float32)})


# ================================================================ versions 1 and 2
def test_reads_version_1(write):
    info, data = f32_tensor(wide=False)
    content = build(
        kvs=[
            kv("general.name", 8, gstr("v1 model", wide=False), wide=False),
            kv("list", 9, struct.pack("<II", 5, 2) + struct.pack("<ii", 7, -7), wide=False),
            kv("words", 9, struct.pack("<II", 8, 2) + gstr("a", False) + gstr("b", False), False),
        ],
        infos=[info],
        data=data,
        version=1,
    )
    f = read_gguf(write(content))
    assert f.version == 1
    assert f.metadata["general.name"] == "v1 model"
    np.testing.assert_array_equal(f.metadata["list"], [7, -7])
    assert f.metadata["words"] == ["a", "b"]
    np.testing.assert_array_equal(
        f.qtensor("w").dequantize_numpy(), np.arange(8, dtype=np.float32).reshape(2, 4)
    )


def test_reads_version_2_like_gguf_py(tmp_path):
    path = str(tmp_path / "v2.gguf")
    write_gguf(path, {"k": 1}, {"w": np.ones((2, 32), np.float32)})
    with open(path, "r+b") as fh:
        fh.seek(4)
        fh.write(struct.pack("<I", 2))
    f = read_gguf(path)
    r = gguf.GGUFReader(path)
    assert f.version == 2 == r.fields["GGUF.version"].contents()
    np.testing.assert_array_equal(f.qtensor("w").dequantize_numpy(), r.tensors[0].data)


def test_strings_with_trailing_nul_and_bad_utf8(write):
    content = build(kvs=[kv("a", 8, gstr(b"name\0\0")), kv("b", 8, gstr(b"\xff\xfeok"))])
    md = read_gguf(write(content)).metadata
    assert md["a"] == "name" and md["b"].endswith("ok")


# ================================================================ hostile and broken files
def test_not_gguf(write):
    expect_error(write(b"PK\x03\x04" + bytes(40)), "magic")
    expect_error(write(b""), "header")
    expect_error(write(b"GGU"), "header")


@pytest.mark.parametrize("version", [0, 4, 99, 2**31])
def test_bad_version(write, version):
    expect_error(write(b"GGUF" + struct.pack("<I", version) + bytes(16)), "version")


def test_big_endian_is_named(write):
    err = expect_error(write(b"GGUF" + struct.pack(">I", 3) + bytes(16)), "version")
    assert "big-endian" in str(err)


@pytest.mark.parametrize(
    "field, content",
    [
        ("header tensor count", build(n_tensors=2**62)),
        ("header tensor count", build(n_tensors=2**64 - 1)),
        ("header metadata count", build(n_kv=2**40)),
        ("header metadata count", build(version=1, n_kv=2**32 - 1)),
        ("metadata #0 key", build(kvs=[struct.pack("<Q", 2**61)], data=bytes(64))),
        ("metadata 'k'", build(kvs=[kv("k", 8, struct.pack("<Q", 2**50))])),
        ("metadata 'k'", build(kvs=[kv("k", 9, struct.pack("<IQ", 4, 2**60))])),
        ("metadata 'k'", build(kvs=[kv("k", 9, struct.pack("<IQ", 8, 2**40))])),
        ("metadata 'k'", build(kvs=[kv("k", 9, struct.pack("<IQ", 9, 2**40))])),
        ("metadata 'k' type", build(kvs=[kv("k", 13, b"\0" * 8)])),
        ("metadata 'k' (array item type)", build(kvs=[kv("k", 9, struct.pack("<IQ", 77, 1))])),
        ("metadata 'k'", build(kvs=[kv("k", 7, b"\x02")])),
        ("metadata 'k'", build(kvs=[kv("k", 9, struct.pack("<IQ", 7, 2) + b"\x01\x05")])),
        ("metadata 'k'", build(kvs=[kv("k", 4, b"\1\0\0\0")] * 2)),
        ("metadata 'general.alignment'", build(kvs=[kv(ALIGN, 4, struct.pack("<I", 24))])),
        ("metadata 'general.alignment'", build(kvs=[kv(ALIGN, 4, struct.pack("<I", 0))])),
        ("metadata 'general.alignment'", build(kvs=[kv(ALIGN, 5, struct.pack("<i", 32))])),
        ("metadata 'deep'", build(kvs=[kv("deep", 9, struct.pack("<IQ", 9, 1) * 20)])),
    ],
)
def test_bad_metadata(write, field, content):
    path = write(content)
    tracemalloc.start()
    try:
        expect_error(path, field)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024 + 4 * len(content), peak


def _one_tensor(dims, type_id, offset, data=b"", **kw):
    return build(infos=[tinfo("t", dims, type_id, offset)], data=data, **kw)


@pytest.mark.parametrize(
    "field, content",
    [
        ("tensor #0 name", build(infos=[struct.pack("<Q", 2**63)], data=bytes(64))),
        ("tensor 't' n_dims", build(infos=[gstr("t") + struct.pack("<I", 5)])),
        ("tensor 't' n_dims", build(infos=[gstr("t") + struct.pack("<I", 2**31) + bytes(20)])),
        ("tensor 't' data", _one_tensor([2**60, 2**3], 0, 0)),
        ("tensor 't' dims", _one_tensor([2**63, 2**63, 2**63, 2**63], 0, 0)),  # int64 ne
        ("tensor 't' data", _one_tensor([4], 0, 2**63, b"\0" * 16)),
        ("tensor 't' data", _one_tensor([8], 0, 0, b"\0" * 16)),
        ("tensor 't' data", _one_tensor([32], 2, 0, b"\0" * 17)),
        ("tensor 't' offset", _one_tensor([4], 0, 4, b"\0" * 64)),
        ("tensor 't' offset", _one_tensor([4], 0, 33, b"\0" * 128)),
        ("tensor 't' type", _one_tensor([4], 99, 0, b"\0" * 16)),
        ("tensor 't' type", _one_tensor([4], 2**32 - 1, 0, b"\0" * 16)),
        ("tensor 't' type", _one_tensor([256], 16, 0, b"\0" * 66)),  # IQ2_XXS: known, no codec
        ("tensor 't' type", _one_tensor([4], 4, 0, b"\0" * 16)),  # retired Q4_2
        ("tensor 't' dims", _one_tensor([100], 12, 0, b"\0" * 144)),  # Q4_K needs 256 | ne[0]
        ("tensor 't'", build(infos=[tinfo("t", [4], 0, 0), tinfo("t", [4], 0, 32)], data=DATA)),
        (
            "tensor 'b' offset",
            build(infos=[tinfo("a", [16], 0, 0), tinfo("b", [4], 0, 32)], data=DATA),
        ),
        ("tensor 't' data", _one_tensor([4], 0, 0, b"\0" * 16, alignment=32)[:-1]),
    ],
)
def test_bad_tensor_infos(write, field, content):
    path = write(content)
    tracemalloc.start()
    try:
        expect_error(path, field)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024 + 4 * len(content), peak


def test_unsupported_type_message_names_it(write):
    err = expect_error(write(_one_tensor([256], 16, 0, b"\0" * 66)), "type")
    assert "IQ2_XXS" in str(err) and "not supported" in str(err)
    err = expect_error(write(_one_tensor([4], 99, 0, b"\0" * 16)), "type")
    assert "unknown ggml type id 99" in str(err)


@pytest.fixture(scope="module")
def valid_file(tmp_path_factory) -> bytes:
    path = str(tmp_path_factory.mktemp("valid") / "v.gguf")
    x = np.random.default_rng(2).standard_normal((2, 256)).astype(np.float32)
    write_gguf(
        path,
        {"general.name": "fuzz", "n": 3, "v": [1.0, 2.0], "s": ["ab", "c"], "b": True},
        {"a": QTensor.quantize(x, "Q4_K"), "b": x[:, :32], "c": QTensor.quantize(x, "Q8_0")},
    )
    with open(path, "rb") as fh:
        return fh.read()


def test_every_truncation_fails_cleanly(write, valid_file):
    assert read_gguf(write(valid_file)).metadata["general.name"] == "fuzz"
    for cut in range(len(valid_file)):
        path = write(valid_file[:cut], f"cut{cut}.gguf")
        with pytest.raises(GgufError) as info:
            read_gguf(path)
        assert path in str(info.value)


def _use(f) -> None:
    """Touch everything a user would: metadata and every tensor's values."""
    assert isinstance(f.metadata, dict)
    for name in f.tensors:
        with np.errstate(all="ignore"):
            f.qtensor(name).dequantize_numpy()


def test_fuzzed_files_fail_cleanly(write, valid_file):
    """Random byte flips, field overwrites with extreme values and cuts: either a valid file
    (the change hit data or a harmless byte) or a GgufError; never anything else, and the
    reader never allocates much more than the file."""
    rng = np.random.default_rng(1234)
    n = len(valid_file)
    head_end = n - 2 * 144 - 256 - 2 * 8 * 34  # mutate mostly the header/metadata/infos
    extremes = [0, 1, 2**31, 2**32 - 1, 2**63, 2**64 - 1, n, n - 1, 2 * n]
    outcomes = {"ok": 0, "error": 0}
    for i in range(400):
        data = bytearray(valid_file)
        kind = i % 4
        if kind == 0:
            for _ in range(rng.integers(1, 4)):
                data[rng.integers(0, head_end)] = rng.integers(0, 256)
        elif kind == 1:
            pos = int(rng.integers(4, head_end - 8))
            data[pos : pos + 8] = struct.pack("<Q", extremes[rng.integers(len(extremes))])
        elif kind == 2:
            pos = int(rng.integers(4, head_end - 4))
            value = extremes[rng.integers(len(extremes))] & 0xFFFFFFFF
            data[pos : pos + 4] = struct.pack("<I", value)
        else:
            data = data[: rng.integers(0, n)]
            data[rng.integers(0, max(1, len(data)))] ^= 0xFF if data else 0
        path = write(bytes(data), f"fuzz{i}.gguf")
        tracemalloc.start()
        try:
            try:
                f = read_gguf(path)
            except GgufError as e:
                assert path in str(e)
                outcomes["error"] += 1
            else:
                _use(f)
                outcomes["ok"] += 1
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 256 * 1024 + 8 * n, (i, peak)
    assert outcomes["error"] > 100 and outcomes["ok"] > 10, outcomes
