"""Hostile GGUF files: zero and huge dims, scalars of block types, and metadata built to
amplify memory. Each either reads into usable QTensors (as gguf-py reads it) or raises
``GgufError`` naming the field, as llama.cpp refuses it (ggml's ``ne`` are int64)."""

from __future__ import annotations

import struct
import subprocess
import sys
import textwrap

import gguf
import numpy as np
import pytest
from test_gguf_file import build, expect_error, kv, tinfo

from workbench.quantized import read_gguf

Q4_0, F32 = 2, 0


def _put(tmp_path, content: bytes, name: str = "f.gguf") -> str:
    path = tmp_path / name
    path.write_bytes(content)
    return str(path)


def _gguf_py_shapes(path: str) -> list[tuple[int, ...]]:
    return [tuple(t.data.shape) for t in gguf.GGUFReader(path).tensors]


@pytest.mark.parametrize(
    "dims, shape, row_bytes",
    [([32, 0], (0, 32), 18), ([0, 2], (2, 0), 0), ([0], (0,), 0)],
)
def test_zero_dims_in_quantized_tensors_read_as_empty(tmp_path, dims, shape, row_bytes):
    path = _put(tmp_path, build(infos=[tinfo("t", dims, Q4_0, 0)]))
    q = read_gguf(path).qtensor("t")
    assert q.shape == shape and q.dequantize().shape == shape
    # gguf-py keeps the raw blocks as (rows, row bytes): the same rows, no data
    (raw,) = _gguf_py_shapes(path)
    assert raw[0] == (shape[0] if len(shape) == 2 else 0)


def test_a_block_type_scalar_is_refused(tmp_path):
    """n_dims = 0 means ne = [1, 1, 1, 1] in ggml: one element, not a whole Q4_0 block."""
    err = expect_error(
        _put(tmp_path, build(infos=[tinfo("t", [], Q4_0, 0)], data=bytes(32))), "dims"
    )
    assert "not a multiple of Q4_0's block size 32" in str(err)
    f = read_gguf(
        _put(tmp_path, build(infos=[tinfo("t", [], F32, 0)], data=bytes(32)), "scalar.gguf")
    )
    assert f.qtensor("t").dequantize().shape == ()


@pytest.mark.parametrize(
    "dims, problem",
    [
        ([2**63, 0], "ggml dims are int64"),
        ([0, 2**64 - 1], "ggml dims are int64"),
        ([2**62, 0], "multiply past what int64 can count"),
        ([0, 2**40, 2**40], "multiply past what int64 can count"),
    ],
)
def test_huge_dims_of_empty_tensors_are_refused(tmp_path, dims, problem):
    err = expect_error(_put(tmp_path, build(infos=[tinfo("t", dims, F32, 0)])), "dims")
    assert problem in str(err)


def test_large_dims_of_empty_tensors_that_fit_are_read(tmp_path):
    f = read_gguf(_put(tmp_path, build(infos=[tinfo("t", [0, 2**30, 2**20], F32, 0)])))
    assert f.qtensor("t").dequantize().shape == (2**20, 2**30, 0)


# 30k empty arrays inside one array (12 bytes each in the file), empty strings (8 bytes),
# empty tensors (25 bytes): what the reader builds per file byte, in a fresh process.
_MEMORY_SCRIPT = textwrap.dedent(
    """
    import sys, tracemalloc
    from workbench.quantized import read_gguf
    read_gguf(sys.argv[1])  # warm up
    tracemalloc.start()
    f = read_gguf(sys.argv[1])
    assert len(f.kv["k"].value) == int(sys.argv[2])
    print(tracemalloc.get_traced_memory()[1])
    """
)


@pytest.mark.parametrize("item", ["empty_arrays", "empty_strings", "tensor_infos"])
def test_memory_per_file_byte_is_bounded(tmp_path, item):
    n = 30_000
    if item == "empty_arrays":
        content = build(kvs=[kv("k", 9, struct.pack("<IQ", 9, n) + struct.pack("<IQ", 5, 0) * n)])
    elif item == "empty_strings":
        content = build(kvs=[kv("k", 9, struct.pack("<IQ", 8, n) + bytes(8) * n)])
    else:  # many empty tensors with one-letter names
        infos = [tinfo(chr(97 + i % 26) + str(i), [0], F32, 0) for i in range(n)]
        content = build(kvs=[kv("k", 9, struct.pack("<IQ", 5, n) + bytes(4) * n)], infos=infos)
    path = tmp_path / "big.gguf"
    path.write_bytes(content)
    out = subprocess.run(
        [sys.executable, "-c", _MEMORY_SCRIPT, str(path), str(n)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    peak = int(out.stdout.split()[-1])
    assert peak < 8 * len(content), peak / len(content)  # measured 5.4x; it was 18x


def test_the_reader_keeps_every_empty_array_usable(tmp_path):
    path = _put(
        tmp_path, build(kvs=[kv("k", 9, struct.pack("<IQ", 9, 3) + struct.pack("<IQ", 5, 0) * 3)])
    )
    plain = read_gguf(path).metadata["k"]
    assert [a.tolist() for a in plain] == [[], [], []]
    assert all(a.dtype == np.int32 for a in plain)
