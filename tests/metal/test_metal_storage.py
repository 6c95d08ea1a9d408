"""MetalStorage end to end on the fake device whose kernels run on the CPU (``host_metal``):
the real host code and the real generated Metal sources, compared with numpy / torch. The
``host`` fixture runs each test with matmuls through the (fake) MPS and through the dialect's
tiled GEMM kernel."""

from __future__ import annotations

import struct

import ml_dtypes
import numpy as np
import pytest
import torch

from workbench.backends import metal
from workbench.backends.errors import UnsupportedOnDevice
from workbench.backends.layout import Layout
from workbench.backends.metal.storage import MetalStorage

RNG = np.random.default_rng(7)


def put(array) -> MetalStorage:
    return MetalStorage.from_numpy(np.ascontiguousarray(array))


def get(storage: MetalStorage, shape) -> np.ndarray:
    return storage.to_numpy(Layout.contiguous(tuple(shape)))


def full(shape) -> Layout:
    return Layout.contiguous(tuple(shape))


def test_elementwise_on_strided_and_broadcast_views(host):
    x = RNG.standard_normal((4, 6)).astype(np.float32)
    y = RNG.standard_normal((6,)).astype(np.float32)
    a, b = put(x), put(y)
    xt = Layout((6, 4), (1, 6))  # a transposed view, read in place
    out = a.binary("mul", xt, b, Layout((6, 4), (1, 0)))
    np.testing.assert_allclose(get(out, (6, 4)), x.T * y[:, None], rtol=1e-6)
    gelu = a.unary("gelu_erf", full((4, 6)))
    expected = torch.nn.functional.gelu(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(get(gelu, (4, 6)), expected, rtol=1e-5, atol=1e-6)
    scaled = a.affine(full((4, 6)), 0.5, -1.25)
    np.testing.assert_allclose(get(scaled, (4, 6)), x * 0.5 - 1.25, rtol=1e-6)
    assert get(a.cmp_scalar("gt", full((4, 6)), 0.0), (4, 6)).tolist() == (x > 0).tolist()


def test_scalars_travel_as_f32_bytes(host):
    a = put(np.ones(3, np.float32))
    a.binary_scalar("add", full((3,)), 0.1)
    metal.synchronize(0)
    _, state, _, _ = host.dispatched[-1]
    assert state["bytes"][4] == struct.pack("<f", 0.1)  # no f64 on Metal


def test_reductions_cumsum_and_sort(host):
    x = RNG.standard_normal((5, 37)).astype(np.float32)
    a = put(x)
    np.testing.assert_allclose(get(a.reduce("sum", full(x.shape), (1,), False, "f32"), (5,)),
                               x.sum(1), rtol=1e-5)  # fmt: skip
    np.testing.assert_array_equal(get(a.reduce("argmax", full(x.shape), (0,), False, "i64"),
                                      (37,)), x.argmax(0))  # fmt: skip
    np.testing.assert_allclose(get(a.cumsum(full(x.shape), 1, "f32"), x.shape),
                               np.cumsum(x, 1), rtol=1e-5, atol=1e-5)  # fmt: skip
    values, indices = a.sort(full(x.shape), 1, True)
    expected = torch.sort(torch.from_numpy(x), dim=1, descending=True, stable=True)
    np.testing.assert_array_equal(get(values, x.shape), expected.values.numpy())
    np.testing.assert_array_equal(get(indices, x.shape), expected.indices.numpy())


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_matmul_batched_and_transposed(host, dtype):
    np_dtype = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}[dtype]
    x = RNG.standard_normal((3, 17, 10)).astype(np_dtype)
    w = RNG.standard_normal((3, 20, 10)).astype(np_dtype)
    a, b = put(x), put(w)
    wt = Layout((3, 10, 20), (200, 1, 10))  # wᵀ per batch, a transposed view
    out = get(a.matmul(full(x.shape), b, wt), (3, 17, 20)).astype(np.float32)
    expected = x.astype(np.float32) @ np.swapaxes(w.astype(np.float32), 1, 2)
    tol = {"f32": 1e-5, "f16": 2e-2, "bf16": 5e-2}[dtype]
    np.testing.assert_allclose(out, expected, rtol=tol, atol=tol * 4)
    used_mps = host.mps_runs > 0
    assert used_mps == (dtype != "bf16" and _has_mps())  # bf16: the tiled GEMM kernel


def test_f16_rows_mps_cannot_take_go_to_the_kernel(host):
    x = RNG.standard_normal((4, 9)).astype(np.float16)  # 18-byte rows
    out = put(x).matmul(full((4, 9)), put(x.T.copy()), full((9, 4)))
    expected = x.astype(np.float32) @ x.T.astype(np.float32)
    np.testing.assert_allclose(get(out, (4, 4)).astype(np.float32), expected, rtol=2e-2, atol=5e-2)
    assert host.mps_runs == 0 and host.executor.runs[-1] == "gemm_f16"


def _has_mps() -> bool:
    from workbench.backends.metal.runtime import runtime

    return runtime().driver.has_mps()


def test_layer_norm_and_softmax(host):
    x = RNG.standard_normal((6, 40)).astype(np.float32)
    w = RNG.standard_normal(40).astype(np.float32)
    b = RNG.standard_normal(40).astype(np.float32)
    out, _, _ = put(x).layer_norm(full(x.shape), put(w), full((40,)), put(b), full((40,)), 1e-5)
    expected = torch.nn.functional.layer_norm(*(torch.from_numpy(v) for v in (x,)), (40,),
                                              torch.from_numpy(w), torch.from_numpy(b))  # fmt: skip
    np.testing.assert_allclose(get(out, x.shape), expected.numpy(), rtol=1e-4, atol=1e-5)
    sm = put(x).log_softmax(full(x.shape), 0)
    np.testing.assert_allclose(get(sm, x.shape), torch.log_softmax(torch.from_numpy(x), 0),
                               rtol=1e-5, atol=1e-6)  # fmt: skip


def test_attention_matches_torch(host):
    q, k, v = (RNG.standard_normal((2, 5, 8)).astype(np.float32) for _ in range(3))
    out, _ = put(q).scaled_dot_product_attention(
        full(q.shape), put(k), full(k.shape), put(v), full(v.shape), None, None, True, 8**-0.5
    )
    expected = torch.nn.functional.scaled_dot_product_attention(
        *(torch.from_numpy(t) for t in (q, k, v)), is_causal=True
    )
    np.testing.assert_allclose(get(out, q.shape), expected.numpy(), rtol=1e-4, atol=1e-5)


def test_conv2d_matches_torch(host):
    x = RNG.standard_normal((2, 3, 7, 6)).astype(np.float32)
    w = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
    out = put(x).conv2d(full(x.shape), put(w), full(w.shape), None, None, (1, 1),
                        ((1, 1), (1, 1)), (1, 1), 1)  # fmt: skip
    expected = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), padding=1)
    np.testing.assert_allclose(get(out, expected.shape), expected.numpy(), rtol=1e-4, atol=1e-5)


def test_gather_and_index_add(host):
    x = RNG.standard_normal((4, 5)).astype(np.float32)
    idx = np.array([[0, 4], [1, 1], [3, 2], [2, 0]], np.int64)
    got = put(x).gather(full(x.shape), 1, put(idx), full(idx.shape))
    np.testing.assert_array_equal(get(got, idx.shape), np.take_along_axis(x, idx, 1))
    src = np.ones((4, 3), np.float32)
    rows = np.array([0, 2, 0], np.int64)
    out = put(x).index_add(full(x.shape), 1, put(rows), full((3,)), put(src), full(src.shape))
    expected = x.copy()
    np.add.at(expected, (slice(None), rows), src)
    np.testing.assert_allclose(get(out, x.shape), expected, rtol=1e-6)


def test_f64_is_refused_naming_metal(host):
    with pytest.raises(UnsupportedOnDevice, match="f64 cannot be stored on metal"):
        put(np.zeros(3))
    with pytest.raises(UnsupportedOnDevice, match="f64 cannot be stored on metal"):
        put(np.zeros(3, np.float32)).cast(full((3,)), "f64")


def test_host_view_is_zero_copy_after_a_wait(host):
    x = np.arange(6, dtype=np.float32)
    a = put(x)
    out = a.affine(full((6,)), 2.0, 1.0)
    view = out.host_view(Layout((3,), (2,), 1))  # waits, then a strided view in place
    np.testing.assert_array_equal(view, (x * 2 + 1)[1::2])
    assert not view.flags.writeable
    from workbench.backends.metal.runtime import runtime

    shared = np.frombuffer(runtime().driver.contents(out.handle), np.float32)
    shared[1] = 42.0  # the same bytes: no copy in between
    assert view[0] == 42.0


def test_uploads_stage_only_behind_queued_work(host):
    a = put(np.zeros(4, np.float32))
    assert not host.command_buffers  # idle device: written straight into the shared buffer
    a.affine(full((4,)), 1.0, 1.0)  # queued, not committed
    put(np.ones(4, np.float32))  # behind queued work: staged and blit-copied in order
    work = host.command_buffers[-1].work
    assert [w[0] for w in work] == ["dispatch", "copy"]


def test_a_chain_is_one_submit_and_device_times_are_gpu_times(host):
    x = put(np.ones(64, np.float32))
    timer = metal.device_timer(0)
    timer.start()
    for _ in range(5):
        x = x.affine(full((64,)), 1.0, 1.0)
    ns = timer.stop_ns()
    assert len(host.commits) == 1  # five dispatches, one command buffer
    cb = host.commits[0]
    assert ns == int((cb.GPUEndTime() - cb.GPUStartTime()) * 1e9)
    assert get(x, (64,))[0] == 6.0


def test_every_encode_is_inside_an_autorelease_pool(host):
    from workbench.backends.metal.runtime import runtime

    objc = runtime().driver.objc
    before = objc.entered
    put(np.ones(8, np.float32)).unary("neg", full((8,)))
    assert objc.entered > before and objc.depth == 0


def test_memory_stats_report_the_metal_pool(host):
    a = put(np.ones(1000, np.float32))
    stats = metal.memory_stats(0)
    assert stats["active_bytes"] >= a.nbytes and stats["driver_allocations"] >= 1
    assert metal.is_available() == (True, "")


@pytest.mark.parametrize("name", ["Q8_0", "Q4_0", "Q6_K"])
@pytest.mark.parametrize("m", [1, 3, 9])
def test_qmatmul_matches_the_cpu_codec(host, name, m):
    """x (m, k) @ Wᵀ with W (n, k) as GGUF blocks: the matvec kernel for up to 8 rows of x,
    else the dequantize kernel and a GEMM; against the CPU codec's dequantized W."""
    from workbench.backends.cpu import ggml

    n, k = 8, 256
    w = RNG.standard_normal((n, k)).astype(np.float32)
    raw = ggml.quantize(w, name)
    dense = ggml.dequantize(raw, name).reshape(n, k)
    x = RNG.standard_normal((m, k)).astype(np.float32)
    out = put(x).qmatmul(full(x.shape), put(raw.reshape(-1)), name, n, k)
    np.testing.assert_allclose(get(out, (m, n)).reshape(m, n), x @ dense.T, rtol=1e-4, atol=1e-4)


def test_qmatmul_errors_name_metal(host):
    x, raw = put(np.ones((1, 256), np.float32)), put(np.zeros(66, np.uint8))
    with pytest.raises(UnsupportedOnDevice, match="IQ2_XXS is not implemented on metal"):
        x.qmatmul(full((1, 256)), raw, "IQ2_XXS", 1, 256)
    with pytest.raises(UnsupportedOnDevice, match="qmatmul on metal takes f32/f16/bf16"):
        put(np.ones((1, 256), np.int32)).qmatmul(full((1, 256)), raw, "Q8_0", 1, 256)


def test_block_kernels_take_fewer_threads_when_the_pipeline_allows_fewer(host, monkeypatch):
    from fake_metal import FakePipeline

    monkeypatch.setattr(FakePipeline, "maxTotalThreadsPerThreadgroup", lambda self: 96)
    x = RNG.standard_normal((3, 300)).astype(np.float32)
    total = put(x).reduce("sum", full(x.shape), (1,), False, "f32")
    np.testing.assert_allclose(get(total, (3,)), x.sum(1), rtol=1e-5)
    assert host.dispatched[-1][3] == (96, 1, 1)
    if not _has_mps():  # the tiled GEMM needs its 256 threads: a clear error, not a clamp
        with pytest.raises(ValueError, match="at most 96 threads per threadgroup on metal:0"):
            put(x).matmul(full((3, 300)), put(x.T.copy()), full((300, 3)))


TORCH_DTYPES = {"bool": torch.bool, "u8": torch.uint8, "u32": torch.uint32, "i8": torch.int8,
                "i16": torch.int16, "i32": torch.int32, "i64": torch.int64,
                "f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}  # fmt: skip


def as_numpy(t: torch.Tensor) -> np.ndarray:
    if t.dtype == torch.bfloat16:  # numpy has no bfloat16: the same bits as ml_dtypes'
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


@pytest.mark.parametrize("src", list(TORCH_DTYPES))
def test_casts_to_and_from_i8_match_torch(host, src):
    """cast_<src>_i8 and cast_i8_<src> over a strided (reversed) view, as PyTorch casts:
    integers wrap modulo 2^8, floats truncate toward zero."""
    values = {"bool": [0, 1, 1, 0], "u8": [0, 7, 200, 255], "u32": [1, 127, 128, 300],
              "f16": [-2.75, -0.5, 3.9, 100.0]}.get(src, [-128, -3, 5, 127])  # fmt: skip
    if src in ("i16", "i32", "i64"):
        values = [*values, 300, -200]
    if src in ("bf16", "f32"):
        values = [*values, 2.75, -1.5]
    t, n = torch.tensor(values, dtype=TORCH_DTYPES[src]), len(values)
    out = put(as_numpy(t)).cast(Layout((n,), (-1,), n - 1), "i8")
    expected = t.to(torch.int8).flip(0)  # (torch has no flip of u32)
    np.testing.assert_array_equal(get(out, (n,)), expected.numpy(), err_msg=f"{src} -> i8")
    back = get(out.cast(full((n,)), src), (n,))
    want = as_numpy(expected.to(TORCH_DTYPES[src]))
    np.testing.assert_array_equal(back, want, err_msg=f"i8 -> {src}")
