"""Packing of kernel parameters (Layout structs, alignment), broadcasting, and the cuBLAS
operand logic and library discovery: pure Python."""

from __future__ import annotations

import struct

import pytest
from fakes import element_offset, unpack_layout

from workbench.backends.cuda import cublas
from workbench.backends.gpu.params import F32, I32, LAYOUT_SIZE, Ptr, Raw, pack_args, pack_layout
from workbench.backends.layout import Layout, contiguous_strides


def test_layout_struct_size():
    assert LAYOUT_SIZE == 144  # int, int, long long, long long[8], long long[8]


def test_contiguous_layout_packs_merged_with_flag():
    fields = unpack_layout(pack_layout(Layout.contiguous((2, 3, 4), offset=5)), 0)
    assert fields == {"ndim": 1, "contiguous": 1, "offset": 5, "shape": (24,), "strides": (1,)}


def test_transposed_layout_keeps_strides():
    t = Layout((4, 3), (1, 4))
    fields = unpack_layout(pack_layout(t), 0)
    assert fields["contiguous"] == 0 and fields["shape"] == (4, 3) and fields["strides"] == (1, 4)
    # the kernels' wb_offset walks the transposed buffer
    assert [element_offset(fields, i) for i in range(4)] == [0, 4, 8, 1]


def test_broadcast_and_size_one_dims():
    b = Layout.contiguous((3,)).broadcast_to((2, 1, 3))
    assert b.strides == (0, 0, 1)
    fields = unpack_layout(pack_layout(b), 0)
    assert fields["shape"] == (2, 3) and fields["strides"] == (0, 1)
    assert [element_offset(fields, i) for i in range(6)] == [0, 1, 2, 0, 1, 2]
    with pytest.raises(ValueError, match="cannot broadcast"):
        Layout.contiguous((3,)).broadcast_to((4,))


def test_scalar_and_empty_layouts():
    fields = unpack_layout(pack_layout(Layout((), (), 7)), 0)
    assert fields["ndim"] == 0 and fields["contiguous"] == 1 and fields["offset"] == 7
    assert contiguous_strides((2, 0, 3)) == (0, 3, 1)  # the core's rule (no element is read)


def test_too_many_dims_is_a_clear_error():
    shape = (2,) * 9
    strides = tuple(2 ** (2 * i + 1) for i in reversed(range(9)))  # nothing merges
    with pytest.raises(ValueError, match="at most 8 non-mergeable dims"):
        pack_layout(Layout(shape, strides))


def test_pack_args_alignment():
    buf = pack_args(Ptr(0x1000), I32(7), Layout.contiguous((4,)), 3, F32(0.5), 2.0)
    assert struct.unpack_from("<Q", buf, 0)[0] == 0x1000
    assert struct.unpack_from("<i", buf, 8)[0] == 7
    # the struct is 8-aligned: 4 bytes of padding after the int
    assert unpack_layout(buf, 16)["shape"] == (4,)
    pos = 16 + LAYOUT_SIZE
    assert struct.unpack_from("<q", buf, pos)[0] == 3
    assert struct.unpack_from("<f", buf, pos + 8)[0] == 0.5
    assert struct.unpack_from("<d", buf, pos + 16)[0] == 2.0  # 8-aligned after the float
    assert len(buf) == pos + 24


def test_pack_args_raw_and_errors():
    buf = pack_args(Ptr(1), 5, I32(1), Raw(b"\x01\x02", 2))
    assert buf[20:22] == b"\x01\x02" and len(buf) == 22
    with pytest.raises(TypeError, match="cannot pass str"):
        pack_args("x")


@pytest.mark.parametrize(
    ("shape", "strides", "expected"),
    [((3, 4), (4, 1), (False, 4)), ((3, 4), (1, 3), (True, 3)), ((3, 4), (8, 1), (False, 8)),
     ((1, 4), (4, 1), (False, 4)), ((3, 4), (8, 2), None)],
)  # fmt: skip
def test_gemm_operand(shape, strides, expected):
    assert cublas.gemm_operand(shape, strides) == expected


@pytest.mark.parametrize(
    ("shape", "strides", "expected"),
    [((5, 3, 4), (12, 4, 1), 12), ((3, 4), (4, 1), 0), ((2, 5, 3, 4), (60, 12, 4, 1), 12),
     ((2, 5, 3, 4), (0, 12, 4, 1), None), ((5, 3, 4), (0, 4, 1), 0),
     ((2, 1, 3, 4), (12, 12, 4, 1), 12)],
)  # fmt: skip
def test_batch_stride(shape, strides, expected):
    assert cublas.batch_stride(shape, strides) == expected


def test_find_library_search_order(tmp_path):
    home = tmp_path / "cuda"
    (home / "lib64").mkdir(parents=True)
    wheel = tmp_path / "site" / "nvidia" / "cublas" / "lib"
    wheel.mkdir(parents=True)
    (wheel / "libcublas.so.12").write_bytes(b"")
    (wheel / "libcublas.so.13").write_bytes(b"")
    env = {"CUDA_HOME": str(home)}
    site_dirs = [str(tmp_path / "site")]
    found = cublas.find_library(env=env, site_dirs=site_dirs)
    if found is not None and found.startswith("/usr/local/cuda"):
        pytest.skip("a system CUDA toolkit with cuBLAS comes first on this machine")
    assert found == str(wheel / "libcublas.so.13")  # the newest wheel version
    (home / "lib64" / "libcublas.so").write_bytes(b"")
    assert cublas.find_library(env=env, site_dirs=site_dirs) == str(home / "lib64" / "libcublas.so")


def test_candidate_dirs_cover_toolkit_and_wheels(tmp_path):
    dirs = [str(d) for d in cublas.candidate_dirs(env={"CUDA_PATH": "/opt/cuda"},
                                                  site_dirs=[str(tmp_path)])]  # fmt: skip
    assert dirs[0] == "/opt/cuda/lib64"
    assert "/usr/local/cuda/lib64" in dirs
    assert str(tmp_path / "nvidia" / "cublas" / "lib") in dirs
