"""CUDA-only checks against PyTorch (CPU) and the CPU backend: transfers, casts between every
dtype, the memory pool and the stream, cuBLAS paths (TF32, strided batched, half precision) and
fused kernels at sizes that take several blocks or a block-wide reduction. Skipped without a
CUDA GPU.

The op tables themselves (elementwise, reductions, shape, matmul, conv/pool, fused, indexing) run
on cuda through their ``device`` parameter: ``pytest tests -k cuda``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from devices import AVAILABILITY
from op_check import check

import workbench as wb

CUDA_OK, CUDA_REASON = AVAILABILITY["cuda"]
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not CUDA_OK, reason=f"no usable CUDA device: {CUDA_REASON}"),
]
RNG = np.random.default_rng(0)
HALVES = [wb.f16, wb.bf16]


def randn(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


# -- transfers and casts ----------------------------------------------------------------------
@pytest.mark.parametrize("name", ["f32", "f64", "f16", "bf16", "i64", "i32", "i16", "u8", "bool"])
def test_transfer_round_trip(name):
    x = wb.tensor(RNG.integers(0, 7, (5, 7)) * 0.5).to(name)
    gpu = x.to("cuda")
    assert gpu.device == wb.Device("cuda") and gpu.dtype is x.dtype
    np.testing.assert_array_equal(gpu.numpy(), x.numpy())
    np.testing.assert_array_equal(gpu.cpu().numpy(), x.numpy())
    # strided views go up and come back with their own values only
    for view in (x.T, x[1:4, ::2], x[:1].expand(3, 7)):
        np.testing.assert_array_equal(view.to("cuda").numpy(), view.numpy())
    # and a strided view of a device buffer comes down with its own values only
    np.testing.assert_array_equal(gpu[1:4, ::2].numpy(), x[1:4, ::2].numpy())
    np.testing.assert_array_equal(gpu.T.numpy(), x.T.numpy())


def test_transfers_of_empty_and_0d_and_big_tensors():
    for shape in [(), (0,), (3, 0, 2)]:
        x = wb.tensor(np.full(shape, 1.5, np.float32))
        np.testing.assert_array_equal(x.to("cuda").numpy(), x.numpy())
    big = randn(3, 3 << 20)  # 36 MiB: two trips through the 32 MiB pinned staging buffer
    np.testing.assert_array_equal(wb.tensor(big).cuda().cpu().numpy(), big)


def test_mixed_devices_are_refused():
    a, b = wb.ones(2, 3, device="cuda"), wb.ones(2, 3)
    with pytest.raises(wb.errors.DeviceMismatch, match="cuda"):
        a + b


@pytest.mark.parametrize("src", ["f32", "f64", "f16", "bf16", "i64", "i32", "u8", "bool"])
@pytest.mark.parametrize("dst", ["f32", "f64", "f16", "bf16", "i64", "i32", "u8", "bool"])
def test_cast(src, dst):
    x = (RNG.standard_normal((3, 4)) * 4).astype(np.float32)
    if src == "u8" or dst == "u8":
        x = np.abs(x)  # negative floats to u8 wrap differently per platform
    cpu = wb.tensor(x).to(src).to(dst).numpy()
    gpu = wb.tensor(x, device="cuda").to(src).to(dst)
    assert gpu.device == wb.Device("cuda")
    np.testing.assert_array_equal(gpu.numpy(), cpu)
    # a strided source casts its own elements only
    np.testing.assert_array_equal(
        wb.tensor(x, device="cuda").to(src).T.to(dst).numpy(),
        wb.tensor(x).to(src).T.to(dst).numpy(),
    )


# -- memory pool, stream, timer ---------------------------------------------------------------
def test_memory_stats_and_timer():
    before = wb.memory_stats("cuda")
    x = wb.zeros(1024, 1024, device="cuda")
    assert wb.memory_stats("cuda")["active_bytes"] >= before["active_bytes"] + 4 * 1024 * 1024
    assert wb.memory_stats("cuda")["peak_bytes"] >= wb.memory_stats("cuda")["active_bytes"]
    del x
    wb.reset_peak_memory_stats("cuda")
    stats = wb.memory_stats("cuda")
    assert stats["peak_bytes"] == stats["active_bytes"]
    wb.clear_cache("cuda")
    assert wb.memory_stats("cuda")["cached_bytes"] == 0
    from workbench.backends.cuda import device_timer

    timer = device_timer(0)
    timer.start()
    wb.ones(256, 256, device="cuda").exp()
    assert timer.stop_ns() >= 0


def test_the_pool_reuses_freed_blocks():
    wb.clear_cache("cuda")
    x = wb.zeros(256, 256, device="cuda")
    del x
    driver_allocations = wb.memory_stats("cuda")["driver_allocations"]
    y = wb.zeros(256, 256, device="cuda")
    assert wb.memory_stats("cuda")["driver_allocations"] == driver_allocations
    assert y.sum().item() == 0


def test_queued_ops_run_in_order_on_the_stream():
    """Many launches (and in-place writes) without a sync in between: the host copy waits."""
    x = randn(64, 128)
    w, expected = wb.tensor(x, device="cuda"), x.astype(np.float64)
    for i in range(50):
        w = (w * 0.5 + 1.0).tanh()
        expected = np.tanh(expected * 0.5 + 1.0)
        if i % 10 == 0:
            w.add_(1.0)
            expected = expected + 1.0
    wb.Device("cuda").synchronize()
    np.testing.assert_allclose(w.numpy(), expected, rtol=1e-5, atol=1e-5)


# -- cuBLAS -----------------------------------------------------------------------------------
def test_tf32_matmul_is_opt_in():
    from workbench.backends.cuda import set_allow_tf32

    a, b = randn(96, 512), randn(512, 80)
    check(lambda x, y: x @ y, [a, b], device="cuda", grad=False, atol=1e-3, rtol=1e-4)
    set_allow_tf32(True)
    try:  # inputs rounded to a 10-bit mantissa: about 1e-3 of each product
        check(lambda x, y: x @ y, [a, b], device="cuda", atol=0.1, rtol=2e-2)
    finally:
        set_allow_tf32(False)


STRIDED_BATCHED = [
    ((4, 33, 70), (4, 70, 17)),
    ((4, 33, 70), (70, 17)),  # one matrix for the whole batch: batch stride 0
    ((33, 70), (3, 70, 17)),
    ((2, 1, 5, 8), (3, 8, 4)),  # batch dims broadcast to (2, 3)
    ((2, 3, 1, 8), (2, 3, 8, 1)),
]


@pytest.mark.parametrize("layouts", [("contiguous", "contiguous"), ("transposed", "contiguous"),
                                     ("contiguous", "transposed"), ("sliced", "transposed")],
                         ids=str)  # fmt: skip
@pytest.mark.parametrize("dtype", [wb.f32, wb.f64, wb.f16, wb.bf16], ids=str)
@pytest.mark.parametrize("shapes", STRIDED_BATCHED, ids=str)
def test_strided_batched_matmul(shapes, dtype, layouts):
    tol = {"f16": 3e-2, "bf16": 8e-2}.get(dtype.name)
    check(wb.matmul, [randn(*shapes[0]), randn(*shapes[1])], dtype=dtype, torch_fn=torch.matmul,
          layouts=list(layouts), atol=tol, rtol=tol, device="cuda")  # fmt: skip


@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_half_matmul_accumulates_in_f32(dtype):
    """k = 1024 half-precision products: a half accumulator would be off by far more."""
    a, b = randn(64, 1024) * 0.5, randn(1024, 48) * 0.5
    tol = 0.06 if dtype is wb.f16 else 0.5  # a few output ulps at |out| ~ 8
    check(wb.matmul, [a, b], dtype=dtype, torch_fn=torch.matmul, device="cuda", atol=tol,
          rtol=1e-2, grad=False)  # fmt: skip


def test_integer_matmul():
    a = RNG.integers(-5, 5, (3, 17, 9))
    b = RNG.integers(-5, 5, (9, 6))
    check(wb.matmul, [a, b], torch_fn=torch.matmul, device="cuda")


# -- long lines: several blocks or a block-wide tree ------------------------------------------
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("shape,dim", [((3, 5000), -1), ((4097, 2), 0), ((2, 1025), 1)], ids=str)
def test_long_sort(shape, dim, descending):
    """Lines longer than one block's shared memory take the global-memory bitonic network."""
    x = RNG.integers(0, 50, shape).astype(np.float32)  # many ties: stability matters
    x[1, 1] = np.nan
    check(lambda t: wb.sort(t, dim, descending), [x],
          torch_fn=lambda t: torch.sort(t, dim=dim, descending=descending, stable=True),
          grad=False, device="cuda")  # fmt: skip
    distinct = RNG.permutation(x.size).reshape(shape).astype(np.float32)
    check(lambda t: wb.topk(t, 7, dim), [distinct], torch_fn=lambda t: torch.topk(t, 7, dim),
          grad=False, device="cuda")  # fmt: skip


@pytest.mark.parametrize("dtype", [wb.f32, wb.f16], ids=str)
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_wide_softmax(name, layout, dtype):
    ref = torch.softmax if name == "softmax" else F.log_softmax
    fn = getattr(wb, name)
    tol = {"atol": 2e-2, "rtol": 2e-2} if dtype is wb.f16 else {}
    check(lambda t: fn(t, -1), [randn(3, 5000) * 3], dtype=dtype, layouts=[layout],
          torch_fn=lambda t: ref(t, -1), device="cuda", **tol)  # fmt: skip


@pytest.mark.parametrize("dtype", [wb.f32, wb.f16], ids=str)
@pytest.mark.parametrize("width", [4097, 1023])
def test_wide_norms(width, dtype):
    tol = {"atol": 4e-2, "rtol": 4e-2} if dtype is wb.f16 else {"atol": 1e-4, "rtol": 1e-3}
    x, w, b = randn(5, width) * 2 + 0.5, randn(width), randn(width)
    check(lambda t, w, b: wb.layer_norm(t, (width,), w, b), [x, w, b], dtype=dtype,
          torch_fn=lambda t, w, b: F.layer_norm(t, (width,), w, b), device="cuda",
          **tol)  # fmt: skip
    check(lambda t, w: wb.rms_norm(t, w, 1e-6), [x, w], dtype=dtype,
          torch_fn=lambda t, w: F.rms_norm(t, (width,), w, 1e-6), device="cuda",
          **tol)  # fmt: skip


REDUCE_CASES = [
    # (shape, layout, dims): one output per block, long rows, more outputs than blocks
    ((64, 33, 70), "transposed", 0),
    ((64, 33, 70), "transposed", (0, 2)),
    ((64, 33, 70), "sliced", 1),
    ((3, 9000), "contiguous", 1),
    ((9000, 3), "transposed", 0),
    ((70000, 3), "contiguous", 1),
    ((4, 70000), "sliced", None),
]


@pytest.mark.parametrize("name", ["sum", "mean", "max", "var", "logsumexp"])
@pytest.mark.parametrize("shape,layout,dim", REDUCE_CASES, ids=str)
def test_reductions_over_strided_and_long_dims(shape, layout, dim, name):
    fn = getattr(wb, name)
    dims = tuple(range(len(shape))) if dim is None else dim
    refs = {"sum": torch.sum, "mean": torch.mean, "max": torch.amax, "var": torch.var,
            "logsumexp": torch.logsumexp}  # fmt: skip
    x = RNG.permutation(np.prod(shape)).reshape(shape).astype(np.float32) / np.prod(shape)
    # max: distinct values, so the gradient goes to one element in both libraries
    check(lambda t: fn(t, dim), [x], layouts=[layout], torch_fn=lambda t: refs[name](t, dims),
          device="cuda", atol=1e-4, rtol=1e-4)  # fmt: skip


def test_long_cumsum_and_argmax():
    check(lambda t: wb.cumsum(t, -1), [randn(3, 5000)], torch_fn=lambda t: torch.cumsum(t, -1),
          device="cuda", atol=2e-3, rtol=1e-4)  # fmt: skip
    distinct = RNG.permutation(15000).reshape(3, 5000).astype(np.float32)
    check(lambda t: wb.argmax(t, -1), [distinct], torch_fn=lambda t: torch.argmax(t, -1),
          layouts=["sliced"], device="cuda")  # fmt: skip


# -- indexing ---------------------------------------------------------------------------------
def test_out_of_range_index_is_an_error():
    x = wb.tensor(randn(4, 5), device="cuda")
    with pytest.raises(wb.IndexingError, match=r"index_select: index out of range.*\[7, 7\]"):
        x.index_select(0, wb.tensor([7], device="cuda"))
