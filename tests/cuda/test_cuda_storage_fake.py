"""CudaStorage and the backend module against the fake driver: transfers through pinned
staging, strided copies and fills (emulated), which kernel each op launches with which
layouts, the memory API and the event timer. No GPU; the kernels' maths is tested on one."""

from __future__ import annotations

import struct

import ml_dtypes
import numpy as np
import pytest
from fakes import unpack_layout

from workbench.backends import cuda
from workbench.backends.cuda import runtime as cuda_runtime
from workbench.backends.cuda.storage import CudaStorage
from workbench.backends.errors import UnsupportedOnDevice
from workbench.backends.gpu.params import LAYOUT_SIZE
from workbench.backends.layout import Layout


def kernel_launches(fake, prefix=""):
    return [launch for launch in fake.launches if launch[0].startswith(prefix)]


@pytest.mark.parametrize(
    "dtype", [np.float32, np.float16, ml_dtypes.bfloat16, np.int64, np.uint8, np.bool_]
)
def test_roundtrip(fake, dtype):
    host = (np.arange(24).reshape(2, 3, 4) % 5).astype(dtype)
    storage = CudaStorage.from_numpy(host, 1)
    assert storage.index == 1 and storage.size == 24
    back = storage.to_numpy(Layout.contiguous((2, 3, 4)))
    assert back.dtype == host.dtype
    np.testing.assert_array_equal(back, host)


def test_large_transfer_goes_through_staging_in_chunks(fake, monkeypatch):
    monkeypatch.setattr(cuda_runtime, "STAGING_BYTES", 64)
    host = np.arange(100, dtype=np.float32)
    storage = CudaStorage.from_numpy(host)
    np.testing.assert_array_equal(storage.to_numpy(Layout.contiguous((100,))), host)


def test_strided_views_download(fake):
    host = np.arange(12, dtype=np.float32).reshape(3, 4)
    storage = CudaStorage.from_numpy(host)
    transposed = Layout((4, 3), (1, 4))
    np.testing.assert_array_equal(storage.to_numpy(transposed), host.T)
    sliced = Layout((3, 2), (4, 2), 1)
    np.testing.assert_array_equal(storage.to_numpy(sliced), host[:, 1::2])
    assert kernel_launches(fake, "copy_b4")


def test_full_const_set_and_copy_strided(fake):
    storage = CudaStorage.full((2, 3), 1.5, "f32")
    np.testing.assert_array_equal(storage.to_numpy(Layout.contiguous((2, 3))), np.full((2, 3), 1.5))
    storage.const_set(Layout((2,), (3,), 1), 7.0)  # column 1
    row = CudaStorage.from_numpy(np.array([10, 20, 30], np.float32))
    dst = CudaStorage.full((2, 3), 0, "f32")
    row.copy_strided(Layout.contiguous((3,)), dst, Layout.contiguous((2, 3)))  # broadcast
    np.testing.assert_array_equal(
        storage.to_numpy(Layout.contiguous((2, 3))), [[1.5, 7, 1.5], [1.5, 7, 1.5]]
    )
    np.testing.assert_array_equal(dst.to_numpy(Layout.contiguous((2, 3))), [[10, 20, 30]] * 2)
    half = CudaStorage.full((3,), 0.5, "bf16")
    np.testing.assert_array_equal(half.to_numpy(Layout.contiguous((3,))).astype(np.float32), 0.5)
    flags = CudaStorage.full((2,), True, "bool")
    assert flags.to_numpy(Layout.contiguous((2,))).tolist() == [True, True]


def test_unary_launch(fake):
    x = CudaStorage.from_numpy(np.ones((4, 3), np.float32))
    out = x.unary("exp", Layout((3, 4), (1, 3)))
    name, grid, block, args = fake.launches[-1]
    assert name == "unary_exp_f32" and block == (256, 1, 1) and grid == (1, 1, 1)
    assert struct.unpack_from("<QQq", args, 0) == (out.ptr, x.ptr, 12)
    assert unpack_layout(args, 24)["strides"] == (1, 3)
    assert x.unary("isnan", Layout.contiguous((4, 3))).dtype == "bool"


def test_binary_broadcasts_layouts(fake):
    a = CudaStorage.from_numpy(np.ones((2, 3), np.float16))
    b = CudaStorage.from_numpy(np.ones((3,), np.float16))
    out = a.binary(
        "mul", Layout.contiguous((2, 3)), b, Layout.contiguous((3,)).broadcast_to((2, 3))
    )
    name, _, _, args = fake.launches[-1]
    assert name == "binary_mul_f16" and out.size == 6 and out.dtype == "f16"
    rhs = unpack_layout(args, 32 + LAYOUT_SIZE)
    assert rhs["shape"] == (2, 3) and rhs["strides"] == (0, 1)
    assert (
        a.binary("logical_and", Layout.contiguous((2, 3)), a, Layout.contiguous((2, 3))).dtype
        == "bool"
    )


def test_scalar_cmp_and_params(fake):
    x = CudaStorage.from_numpy(np.arange(4, dtype=np.int32))
    lay = Layout.contiguous((4,))
    x.binary_scalar("sub", lay, 3, reverse=True)
    name, _, _, args = fake.launches[-1]
    assert name == "bscalar_sub_i32"
    assert struct.unpack_from("<di", args, 24 + LAYOUT_SIZE) == (3.0, 1)
    assert x.cmp_scalar("lt", lay, 2).dtype == "bool" and fake.launches[-1][0] == "cmps_lt_i32"
    x.clamp(lay, None, 2)
    assert fake.launches[-1][0] == "clamp_i32"
    assert struct.unpack_from("<ddii", fake.launches[-1][3], 24 + LAYOUT_SIZE) == (0.0, 2.0, 0, 1)


def test_unsupported_dtype_names_op(fake):
    x = CudaStorage.from_numpy(np.arange(4, dtype=np.int32))
    with pytest.raises(
        UnsupportedOnDevice, match="op exp is not implemented on cuda for dtype i32"
    ):
        x.unary("exp", Layout.contiguous((4,)))
    flags = CudaStorage.from_numpy(np.ones(4, np.bool_))
    with pytest.raises(UnsupportedOnDevice, match="op matmul is not implemented on cuda for bool"):
        flags.matmul(Layout.contiguous((2, 2)), flags, Layout.contiguous((2, 2)))


def test_reduce_permutes_reduced_dims_last(fake):
    x = CudaStorage.from_numpy(np.ones((2, 3, 4), np.float32))
    out = x.reduce("sum", Layout.contiguous((2, 3, 4)), (1,), False, "f32")
    name, grid, _, args = fake.launches[-1]
    assert name == "reduce_sum_f32" and out.size == 8 and grid == (8, 1, 1)
    m, k = struct.unpack_from("<qq", args, 16)
    assert (m, k) == (8, 3)
    view = unpack_layout(args, 32)
    assert view["shape"] == (2, 4, 3) and view["strides"] == (12, 1, 4)
    arg = x.reduce("argmax", Layout.contiguous((2, 3, 4)), (2,), True, "i64")
    assert arg.dtype == "i64" and fake.launches[-1][0] == "reduce_argmax_f32"
    ints = CudaStorage.from_numpy(np.ones(5, np.int32))
    total = ints.reduce("sum", Layout.contiguous((5,)), (0,), False, "i32")
    assert [launch[0] for launch in fake.launches[-2:]] == ["reduce_sum_i32", "cast_i64_i32"]
    assert total.dtype == "i32"


def test_cumsum_layouts(fake):
    x = CudaStorage.from_numpy(np.ones((3, 5), np.float32))
    x.cumsum(Layout.contiguous((3, 5)), 0, "f32")
    name, _, _, args = fake.launches[-1]
    assert name == "cumsum_f32"
    out_layout = unpack_layout(args, 8)
    assert out_layout["shape"] == (5, 3) and out_layout["strides"] == (1, 5)


def test_memory_api_follows_the_pool(fake):
    before = cuda.memory_stats(0)
    x = CudaStorage.from_numpy(np.ones(1000, np.float32))
    stats = cuda.memory_stats(0)
    assert stats["active_bytes"] == before["active_bytes"] + 4096
    del x
    assert cuda.memory_stats(0)["cached_bytes"] >= 4096
    cuda.clear_cache(0)
    assert cuda.memory_stats(0)["cached_bytes"] == 0
    cuda.reset_peak_memory_stats(0)
    assert cuda.memory_stats(0)["peak_bytes"] == cuda.memory_stats(0)["active_bytes"]


def test_backend_module_with_fake(fake):
    assert cuda.is_available() == (True, "")
    assert cuda.device_count() == 2
    cuda.synchronize(1)
    assert fake.synced == [1]
    timer = cuda.device_timer(0)
    timer.start()
    assert timer.stop_ns() == 1_500_000


def test_no_driver_reason():
    from workbench.backends.cuda import driver

    if driver.HOLDER.driver is not None:
        pytest.skip("a CUDA driver is loaded in this process")
    ok, reason = cuda.is_available()
    try:
        import pycuda  # noqa: F401
    except ImportError:
        assert not ok and "pycuda cannot be imported" in reason
    assert cuda.device_count() == (0 if not ok else cuda.device_count())


def test_softmax_puts_dim_last(fake):
    x = CudaStorage.from_numpy(np.ones((4, 6), np.float32))
    out = x.log_softmax(Layout.contiguous((4, 6)), 0)
    name, grid, _, args = fake.launches[-1]
    assert name == "softmax_f32" and out.size == 24 and grid == (6, 1, 1)
    dst, src = unpack_layout(args, 8), unpack_layout(args, 16 + LAYOUT_SIZE)
    assert dst["shape"] == (6, 4) and dst["strides"] == (1, 6)
    assert src == dst
    pos = 16 + 2 * LAYOUT_SIZE
    assert struct.unpack_from("<qqi", args, pos) == (6, 4, 1)


def test_norms_return_statistics(fake):
    x = CudaStorage.from_numpy(np.ones((3, 8), np.float16))
    w = CudaStorage.from_numpy(np.ones(8, np.float32))  # another dtype: cast to f16 first
    out, mean, rstd = x.layer_norm(Layout.contiguous((3, 8)), w, Layout.contiguous((8,)), None,
                                   None, 1e-5)  # fmt: skip
    assert out.dtype == "f16" and mean.dtype == "f32" and rstd.size == 3
    assert [launch[0] for launch in fake.launches[-2:]] == ["cast_f32_f16", "norm_f16"]
    out, rstd = x.rms_norm(Layout.contiguous((3, 8)), None, None, 1e-6)
    args = fake.launches[-1][3]
    assert struct.unpack_from("<Q", args, 8)[0] == 0  # no mean buffer for rms_norm


def test_rope_broadcasts_tables(fake):
    x = CudaStorage.from_numpy(np.ones((2, 5, 8), np.float32))
    cos = CudaStorage.from_numpy(np.ones((5, 4), np.float32))
    x.rope(Layout.contiguous((2, 5, 8)), cos, Layout.contiguous((5, 4)), cos,
           Layout.contiguous((5, 4)), False)  # fmt: skip
    name, _, _, args = fake.launches[-1]
    assert name == "rope_f32"
    lc = unpack_layout(args, 16 + LAYOUT_SIZE + 8)
    assert lc["shape"] == (2, 20) and lc["strides"] == (0, 1)


def test_matmul_operands_reach_cublas_without_copies(fake):
    a = CudaStorage.from_numpy(np.ones((2, 3, 4), np.float32))
    b = CudaStorage.from_numpy(np.ones((2, 5, 4), np.float32))
    out = a.matmul(Layout.contiguous((2, 3, 4)), b, Layout((2, 4, 5), (20, 1, 4)))  # bᵀ view
    (index, dtype, tb, ta, n, m, k, pb, ldb, sb, pa, lda, sa, pc, ldc, sc, batch) = fake.gemms[-1]
    assert (dtype, tb, ta, n, m, k, batch) == ("f32", True, False, 5, 3, 4, 2)
    assert (ldb, sb, lda, sa, ldc, sc) == (4, 20, 4, 12, 5, 15)
    assert (pa, pb, pc) == (a.ptr, b.ptr, out.ptr) and out.size == 30
    assert not kernel_launches(fake, "copy")  # no operand was copied


def test_gather_passes_unmerged_dims(fake):
    x = CudaStorage.from_numpy(np.ones((2, 3, 4), np.float32))
    idx = CudaStorage.from_numpy(np.zeros((2, 2, 4), np.int64))
    x.gather(Layout.contiguous((2, 3, 4)), 1, idx, Layout.contiguous((2, 2, 4)))
    name, _, _, args = fake.launches[-1]
    assert name == "gather_f32"
    assert unpack_layout(args, 16)["shape"] == (2, 3, 4)  # x's own dims, not merged
    names = [launch[0] for launch in fake.launches]
    assert "reduce_min_i64" in names and "reduce_max_i64" in names  # the range check


def test_index_out_of_range_is_checked_on_host(fake):
    x = CudaStorage.from_numpy(np.ones((3, 4), np.float32))
    idx = CudaStorage.from_numpy(np.array([0, 5], np.int64))
    # the fake runs no reduce kernel: the min/max buffers hold zeros, so plant the max
    real_reduce = CudaStorage.reduce

    def reduce(self, op, layout, dims, keepdim, dtype):
        if op == "max":
            return CudaStorage.from_numpy(np.array(5, np.int64))
        return real_reduce(self, op, layout, dims, keepdim, dtype)

    CudaStorage.reduce = reduce
    try:
        with pytest.raises(IndexError, match="index out of range"):
            x.index_select(Layout.contiguous((3, 4)), 0, idx, Layout.contiguous((2,)))
    finally:
        CudaStorage.reduce = real_reduce


def test_conv2d_im2col_then_gemm_per_group(fake):
    x = CudaStorage.from_numpy(np.ones((2, 4, 5, 5), np.float32))
    w = CudaStorage.from_numpy(np.ones((6, 2, 3, 3), np.float32))
    b = CudaStorage.from_numpy(np.ones(6, np.float32))
    out = x.conv2d(Layout.contiguous((2, 4, 5, 5)), w, Layout.contiguous((6, 2, 3, 3)), b,
                   Layout.contiguous((6,)), (1, 1), ((1, 1), (1, 1)), (1, 1), 2)  # fmt: skip
    assert out.size == 2 * 6 * 5 * 5
    assert len(kernel_launches(fake, "im2col_f32")) == 2 and len(fake.gemms) == 4
    _, _, _, _, n, m, k, *_ = fake.gemms[0]
    assert (n, m, k) == (25, 3, 18)
    assert fake.launches[-1][0] == "binary_add_f32"  # the bias


def test_pool_and_upsample_geometry(fake):
    x = CudaStorage.from_numpy(np.ones((1, 2, 6, 6), np.float32))
    lay = Layout.contiguous((1, 2, 6, 6))
    values, idx = x.max_pool2d(lay, (2, 2), (2, 2), (0, 0), (1, 1), (3, 3))
    assert idx.dtype == "i64" and values.size == 18
    args = fake.launches[-1][3]
    assert struct.unpack_from("<14q", args, 24 + LAYOUT_SIZE) == (1, 2, 6, 6, 2, 2, 2, 2, 0, 0,
                                                                 1, 1, 3, 3)  # fmt: skip
    x.upsample_bilinear2d(lay, (12, 6), False, (None, None))
    args = fake.launches[-1][3]
    pos = 16 + LAYOUT_SIZE + 48  # scales are doubles (positions in f64 for f64 tensors)
    assert struct.unpack_from("<ddii", args, pos) == (0.5, 1.0, 0, 1)


def test_attention_is_two_gemms_around_a_softmax(fake):
    q = CudaStorage.from_numpy(np.ones((2, 3, 4), np.float16))
    k = CudaStorage.from_numpy(np.ones((2, 5, 4), np.float16))
    out, probs = q.scaled_dot_product_attention(
        Layout.contiguous((2, 3, 4)), k, Layout.contiguous((2, 5, 4)), k,
        Layout.contiguous((2, 5, 4)), None, None, True, 0.5,
    )  # fmt: skip
    assert out.dtype == "f16" and out.size == 2 * 3 * 4
    assert probs.dtype == "f32" and probs.size == 2 * 3 * 5
    assert len(fake.gemms) == 2
    names = [launch[0] for launch in fake.launches]
    assert names.index("softmax_f32") > names.index("where_f32") > names.index("affine_f32")
    assert fake.gemms[0][2] is True  # kᵀ read as a transposed operand, not copied


def test_nonzero_on_host(fake):
    x = CudaStorage.from_numpy(np.array([[0, 1], [2, 0]], np.float32))
    coords, n = x.nonzero(Layout.contiguous((2, 2)))
    assert n == 2
    np.testing.assert_array_equal(coords.to_numpy(Layout.contiguous((2, 2))), [[0, 1], [1, 0]])


def test_sort_launch(fake):
    x = CudaStorage.from_numpy(np.ones((3, 100), np.float64))
    values, indices = x.sort(Layout.contiguous((3, 100)), 0, True)
    name, grid, _, args = fake.launches[-1]
    assert name == "sort_f64" and grid == (100, 1, 1)
    assert values.dtype == "f64" and indices.dtype == "i64"
    pos = 24 + 2 * LAYOUT_SIZE  # vals, idx, dst layout, input, src layout
    assert struct.unpack_from("<qqqi", args, pos) == (100, 3, 4, 1)


def test_long_sort_runs_the_network_in_global_memory(fake):
    """A 3000-long line: an index scratch of 4096 per line, 12·13/2 = 78 network steps, then
    one gather through the layouts."""
    x = CudaStorage.from_numpy(np.ones((2, 3000), np.float32))
    values, indices = x.sort(Layout.contiguous((2, 3000)), 1, False)
    names = [launch[0] for launch in fake.launches[-80:]]
    assert names[0] == "sort_long_init" and names[-1] == "sort_long_gather_f32"
    assert names[1:-1] == ["sort_long_step_f32"] * 78
    assert values.size == indices.size == 6000 and indices.dtype == "i64"
    # last step: size 4096, stride 1, ascending
    step_args = fake.launches[-2][3]
    assert struct.unpack_from("<qqqqqi", step_args, 16 + LAYOUT_SIZE) == (2, 3000, 4096, 4096, 1, 0)


def test_integer_matmul_kernel(fake):
    a = CudaStorage.from_numpy(np.ones((2, 3, 4), np.int64))
    b = CudaStorage.from_numpy(np.ones((4, 5), np.int64))
    out = a.matmul(Layout.contiguous((2, 3, 4)), b, Layout((2, 4, 5), (0, 5, 1)))
    name, _, _, args = fake.launches[-1]
    assert name == "matmul_int_i64" and out.size == 30 and not fake.gemms
    assert struct.unpack_from("<qqqq", args, 24 + 2 * LAYOUT_SIZE) == (2, 3, 5, 4)


def test_conv_transpose_and_weight_grad_gemms(fake):
    x = CudaStorage.from_numpy(np.ones((2, 4, 3, 3), np.float32))
    w = CudaStorage.from_numpy(np.ones((4, 3, 2, 2), np.float32))  # (C, O/g, kh, kw), g = 2
    out = x.conv_transpose2d(Layout.contiguous((2, 4, 3, 3)), w, Layout.contiguous((4, 3, 2, 2)),
                             None, None, (2, 2), (0, 0), (1, 1), 2, (6, 6))  # fmt: skip
    assert out.size == 2 * 6 * 6 * 6
    assert len(fake.gemms) == 4 and len(kernel_launches(fake, "col2im_f32")) == 2
    _, _, tb, ta, n, m, k, *_ = fake.gemms[0]
    assert (tb, ta, n, m, k) == (False, True, 9, 12, 2)  # W_gᵀ read transposed
    fake.gemms.clear()
    g = CudaStorage.from_numpy(np.ones((2, 6, 3, 3), np.float32))
    dw = x.conv2d_backward_weight(Layout.contiguous((2, 4, 3, 3)), g,
                                  Layout.contiguous((2, 6, 3, 3)), (3, 3), (1, 1),
                                  ((1, 1), (1, 1)), (1, 1), 2)  # fmt: skip
    assert dw.size == 6 * 2 * 3 * 3 and len(fake.gemms) == 4
    _, _, tb, ta, n, m, k, *_ = fake.gemms[0]
    assert (tb, ta, n, m, k) == (True, False, 18, 3, 9)


def test_pool_and_upsample_backward_accumulate_in_f32(fake):
    """Halves and f32 accumulate in f32, f64 in f64."""
    g = CudaStorage.from_numpy(np.ones((1, 2, 3, 3), np.float16))
    lay = Layout.contiguous((1, 2, 3, 3))
    grad = g.avg_pool2d_backward(lay, (6, 6), (2, 2), (2, 2), (0, 0), True, None)
    assert grad.dtype == "f16" and grad.size == 72
    names = [launch[0] for launch in fake.launches[-3:]]
    assert names == ["fill_b4", "avg_pool2d_backward_f16", "cast_f32_f16"]
    g.upsample_bilinear2d_backward(lay, (2, 3), True, (None, None))
    args = [launch for launch in fake.launches if launch[0].startswith("upsample")][-1][3]
    assert struct.unpack_from("<ddii", args, 16 + 48) == (0.5, 1.0, 1, 1)  # (2-1)/(3-1); copy
    g.adaptive_avg_pool2d_backward(lay, (5, 7))
    g.upsample_nearest2d_backward(lay, (2, 2), (None, None))
    assert fake.launches[-2][0] == "upsample_nearest2d_backward_f16"
    wide = CudaStorage.from_numpy(np.ones((1, 2, 3, 3), np.float64))
    grad = wide.avg_pool2d_backward(lay, (6, 6), (2, 2), (2, 2), (0, 0), True, None)
    assert grad.dtype == "f64" and [launch[0] for launch in fake.launches[-2:]] == [
        "fill_b8", "avg_pool2d_backward_f64"]  # fmt: skip
