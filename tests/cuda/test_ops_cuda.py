"""The op comparisons against PyTorch (CPU) run on device "cuda": forward and gradients, in
contiguous, transposed, sliced and broadcast layouts. Skipped without a CUDA GPU."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from devices import AVAILABILITY
from op_check import TOLERANCES, _to_numpy, assert_close, to_torch_dtype

import workbench as wb

CUDA_OK, CUDA_REASON = AVAILABILITY["cuda"]
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not CUDA_OK, reason=f"no usable CUDA device: {CUDA_REASON}"),
]
DTYPES = [wb.f32, wb.f16, wb.bf16]


def on_cuda(array: np.ndarray, layout: str, dtype) -> wb.Tensor:
    """``op_check.as_layout`` on the GPU: the same views of a device buffer."""
    array = np.asarray(array)
    if layout == "contiguous" or array.ndim == 0:
        return wb.tensor(array, dtype=dtype, device="cuda")
    if layout == "transposed" and array.ndim >= 2:
        order = tuple(reversed(range(array.ndim)))
        t = wb.tensor(np.ascontiguousarray(array.transpose(order)), dtype=dtype, device="cuda")
        return t.permute(order)
    if layout in ("sliced", "transposed"):
        bigger = np.zeros((*array.shape[:-1], array.shape[-1] * 2), dtype=array.dtype)
        bigger[..., ::2] = array
        t = wb.tensor(bigger, dtype=dtype, device="cuda")
        return t.reshape((*array.shape, 2)).narrow(-1, 0, 1).squeeze(-1)
    if layout == "broadcast" and array.shape[0] and np.all(array == array[:1]):
        return wb.tensor(array[:1], dtype=dtype, device="cuda").expand(array.shape)
    return wb.tensor(array, dtype=dtype, device="cuda")


def check_cuda(fn, inputs, dtype=wb.f32, torch_fn=None, layouts=None, grad=True, atol=None,
               rtol=None):  # fmt: skip
    torch_fn = torch_fn or fn
    layouts = layouts or ["contiguous"] * len(inputs)
    ws, ts = [], []
    for array, layout in zip(inputs, layouts, strict=True):
        array = np.asarray(array)
        is_float = array.dtype.kind == "f"
        in_dtype = dtype if is_float else wb.dtype.from_numpy_dtype(array.dtype)
        w = on_cuda(array, layout, in_dtype)
        t = torch.tensor(np.array(array), dtype=to_torch_dtype(in_dtype))
        if grad and is_float:
            w.requires_grad_()
            t.requires_grad_(True)
        ws.append(w)
        ts.append(t)
    out, expected = fn(*ws), torch_fn(*ts)
    assert out.device == wb.Device("cuda")
    assert_close(_to_numpy(out), _to_numpy(expected), dtype.name, "output", atol, rtol)
    if not grad or not any(t.requires_grad for t in ts):
        return
    g = np.random.default_rng(0).standard_normal(expected.shape).astype(np.float32)
    grads = (out * wb.tensor(g, dtype=out.dtype, device="cuda")).sum().backward()
    (expected * torch.tensor(g, dtype=expected.dtype)).sum().backward()
    for i, (w, t) in enumerate(zip(ws, ts, strict=True)):
        if t.requires_grad and t.grad is not None:
            assert_close(_to_numpy(grads[w]), _to_numpy(t.grad), dtype.name, f"grad {i}", atol,
                         rtol)  # fmt: skip


RNG = np.random.default_rng(0)
A = RNG.standard_normal((3, 4)).astype(np.float32)
B = RNG.standard_normal((3, 4)).astype(np.float32)
POS = (np.abs(A) + 0.5).astype(np.float32)

UNARY = [
    ("exp", lambda x: x.exp(), A), ("log", lambda x: x.log(), POS), ("tanh", lambda x: x.tanh(), A),
    ("sqrt", lambda x: x.sqrt(), POS), ("relu", lambda x: x.relu(), A),
    ("sigmoid", lambda x: x.sigmoid(), A), ("abs", lambda x: x.abs(), A),
    ("neg", lambda x: -x, A), ("sin", lambda x: x.sin(), A),
]  # fmt: skip


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(("name", "fn", "x"), UNARY, ids=[u[0] for u in UNARY])
def test_unary(name, fn, x, dtype, layout):
    check_cuda(fn, [x], dtype, layouts=[layout])


BINARY = [
    ("add", lambda a, b: a + b), ("sub", lambda a, b: a - b), ("mul", lambda a, b: a * b),
    ("div", lambda a, b: a / (b.abs() + 1)), ("maximum", lambda a, b: a.maximum(b)),
]  # fmt: skip


@pytest.mark.parametrize("layouts", [("contiguous", "contiguous"), ("transposed", "sliced")])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(("name", "fn"), BINARY, ids=[b[0] for b in BINARY])
def test_binary(name, fn, dtype, layouts):
    torch_fn = (lambda a, b: torch.maximum(a, b)) if name == "maximum" else fn
    check_cuda(fn, [A, B], dtype, layouts=list(layouts), torch_fn=torch_fn)


def test_broadcast_binary_and_scalar():
    check_cuda(lambda a, b: a * b + 2.0, [A, B[:1]])
    check_cuda(lambda a: 1.0 - a, [A])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_compare_and_where(dtype):
    check_cuda(lambda a, b: wb.where(a > b, a, b), [A, B], dtype,
               torch_fn=lambda a, b: torch.where(a > b, a, b))  # fmt: skip


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("dtype", [wb.f32, wb.f64, wb.f16, wb.bf16], ids=str)
def test_reductions(dtype, layout):
    x = RNG.standard_normal((4, 5, 6)).astype(np.float32)
    check_cuda(lambda t: t.sum(1), [x], dtype, layouts=[layout])
    check_cuda(lambda t: t.sum((0, 2)), [x], dtype, layouts=[layout])
    check_cuda(lambda t: t.max(-1) if isinstance(t, wb.Tensor) else t.max(-1).values, [x], dtype,
               layouts=[layout], grad=False)  # fmt: skip
    check_cuda(lambda t: t.argmax(1), [x], dtype, layouts=[layout], grad=False)
    check_cuda(lambda t: t.cumsum(2), [x], dtype, layouts=[layout])


@pytest.mark.parametrize("dtype", [wb.f32, wb.f16, wb.bf16, wb.f64], ids=str)
@pytest.mark.parametrize("layouts", [("contiguous", "contiguous"), ("transposed", "transposed")])
def test_matmul(dtype, layouts):
    a = RNG.standard_normal((2, 5, 7)).astype(np.float32)
    b = RNG.standard_normal((2, 7, 3)).astype(np.float32)
    tol = {"f16": 2e-2, "bf16": 5e-2}.get(dtype.name)
    check_cuda(lambda x, y: x @ y, [a, b], dtype, layouts=list(layouts), atol=tol, rtol=tol)
    check_cuda(lambda x, y: x @ y, [a[0], b[0]], dtype, atol=tol, rtol=tol)


@pytest.mark.parametrize("src", ["f32", "f16", "bf16", "i64", "bool"])
@pytest.mark.parametrize("dst", ["f32", "f16", "bf16", "i32", "bool"])
def test_cast(src, dst):
    x = (RNG.standard_normal((3, 4)) * 4).astype(np.float32)
    cpu = wb.tensor(x).to(src).to(dst).numpy()
    gpu = wb.tensor(x, device="cuda").to(src).to(dst).numpy()
    np.testing.assert_array_equal(gpu, cpu)


def test_memory_stats_and_timer():
    before = wb.memory_stats("cuda")
    x = wb.zeros(1024, 1024, device="cuda")
    assert wb.memory_stats("cuda")["active_bytes"] >= before["active_bytes"] + 4 * 1024 * 1024
    del x
    wb.clear_cache("cuda")
    assert wb.memory_stats("cuda")["cached_bytes"] == 0
    from workbench.backends.cuda import device_timer

    timer = device_timer(0)
    timer.start()
    wb.ones(256, 256, device="cuda").exp()
    assert timer.stop_ns() >= 0


def test_tolerances_cover_dtypes():
    assert set(TOLERANCES) >= {"f32", "f16", "bf16"}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_softmax_family(dtype, layout):
    x = RNG.standard_normal((4, 6)).astype(np.float32)
    check_cuda(lambda t: wb.softmax(t, -1), [x], dtype, layouts=[layout],
               torch_fn=lambda t: torch.softmax(t, -1))  # fmt: skip
    check_cuda(lambda t: wb.log_softmax(t, 0), [x], dtype, layouts=[layout],
               torch_fn=lambda t: torch.log_softmax(t, 0))  # fmt: skip


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_norms(dtype):
    x = RNG.standard_normal((3, 4, 16)).astype(np.float32)
    w = RNG.standard_normal(16).astype(np.float32)
    b = RNG.standard_normal(16).astype(np.float32)
    check_cuda(lambda t, w, b: wb.layer_norm(t, (16,), w, b), [x, w, b], dtype,
               torch_fn=lambda t, w, b: torch.nn.functional.layer_norm(t, (16,), w, b))  # fmt: skip
    check_cuda(lambda t, w: wb.rms_norm(t, w, 1e-6), [x, w], dtype,
               torch_fn=lambda t, w: torch.nn.functional.rms_norm(t, (16,), w, 1e-6))  # fmt: skip


@pytest.mark.parametrize("interleaved", [False, True])
def test_rope(interleaved):
    x = RNG.standard_normal((2, 3, 5, 8)).astype(np.float32)
    angles = RNG.standard_normal((5, 4)).astype(np.float32)
    cos, sin = np.cos(angles), np.sin(angles)
    cpu = wb.rope(wb.tensor(x), wb.tensor(cos), wb.tensor(sin), interleaved=interleaved)
    gpu = wb.rope(*(wb.tensor(a, device="cuda") for a in (x, cos, sin)), interleaved=interleaved)
    np.testing.assert_allclose(gpu.numpy(), cpu.numpy(), rtol=1e-5, atol=1e-6)


def test_indexing():
    x = RNG.standard_normal((4, 5)).astype(np.float32)
    idx = np.array([3, 0, 3], np.int64)
    check_cuda(lambda t, i: t.index_select(0, i), [x, idx],
               torch_fn=lambda t, i: t.index_select(0, i), grad=False)  # fmt: skip
    g = RNG.integers(0, 5, (4, 2)).astype(np.int64)
    check_cuda(lambda t, i: t.gather(1, i), [x, g], torch_fn=lambda t, i: t.gather(1, i),
               grad=False)  # fmt: skip
    src = RNG.standard_normal((4, 2)).astype(np.float32)
    check_cuda(lambda t, i, s: t.scatter_add(1, i, s), [x, g, src],
               torch_fn=lambda t, i, s: t.scatter_add(1, i, s), grad=False)  # fmt: skip
    with pytest.raises(IndexError, match="index out of range"):
        wb.tensor(x, device="cuda").index_select(0, wb.tensor([7], device="cuda"))


@pytest.mark.parametrize("groups", [1, 2])
@pytest.mark.parametrize("dtype", [wb.f32, wb.f16], ids=str)
def test_conv2d(groups, dtype):
    x = RNG.standard_normal((2, 4, 7, 6)).astype(np.float32)
    w = RNG.standard_normal((6, 4 // groups, 3, 3)).astype(np.float32)
    b = RNG.standard_normal(6).astype(np.float32)
    tol = 2e-2 if dtype == wb.f16 else 1e-4

    def ref(x, w, b):
        return torch.nn.functional.conv2d(x, w, b, (2, 1), 1, 1, groups)

    check_cuda(lambda x, w, b: wb.conv2d(x, w, b, stride=(2, 1), padding=1, groups=groups),
               [x, w, b], dtype, atol=tol, rtol=tol, torch_fn=ref)  # fmt: skip


def test_conv_transpose2d():
    x = RNG.standard_normal((2, 4, 5, 5)).astype(np.float32)
    w = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)

    def ref(x, w):
        return torch.nn.functional.conv_transpose2d(x, w, None, 2, 1, 1, 2)

    check_cuda(lambda x, w: wb.conv_transpose2d(x, w, None, stride=2, padding=1,
                                                output_padding=1, groups=2),
               [x, w], torch_fn=ref)  # fmt: skip


def test_pools_and_upsample():
    x = RNG.standard_normal((2, 3, 7, 8)).astype(np.float32)
    F = torch.nn.functional
    check_cuda(lambda t: wb.max_pool2d(t, 3, 2, 1), [x], grad=False,
               torch_fn=lambda t: F.max_pool2d(t, 3, 2, 1))  # fmt: skip
    check_cuda(lambda t: wb.avg_pool2d(t, 3, 2, 1, count_include_pad=False), [x], grad=False,
               torch_fn=lambda t: F.avg_pool2d(t, 3, 2, 1, count_include_pad=False))  # fmt: skip
    check_cuda(lambda t: wb.adaptive_avg_pool2d(t, (3, 5)), [x], grad=False,
               torch_fn=lambda t: F.adaptive_avg_pool2d(t, (3, 5)))  # fmt: skip
    check_cuda(lambda t: wb.upsample_nearest2d(t, scale_factor=2), [x], grad=False,
               torch_fn=lambda t: F.interpolate(t, scale_factor=2, mode="nearest"))  # fmt: skip
    for align in (False, True):
        check_cuda(lambda t, a=align: wb.upsample_bilinear2d(t, (11, 13), align_corners=a), [x],
                   grad=False, torch_fn=lambda t, a=align: F.interpolate(
                       t, (11, 13), mode="bilinear", align_corners=a))  # fmt: skip


@pytest.mark.parametrize("dtype", [wb.f32, wb.f16], ids=str)
@pytest.mark.parametrize("masking", ["none", "causal", "bool", "float"])
def test_attention(dtype, masking):
    q = RNG.standard_normal((2, 3, 5, 8)).astype(np.float32)
    k = RNG.standard_normal((2, 3, 7, 8)).astype(np.float32)
    v = RNG.standard_normal((2, 3, 7, 4)).astype(np.float32)
    mask = None
    if masking == "bool":
        mask = RNG.random((5, 7)) > 0.3
        mask[0] = False  # a fully masked row gives zeros
    elif masking == "float":
        mask = RNG.standard_normal((5, 7)).astype(np.float32)
    causal = masking == "causal"
    cpu = wb.scaled_dot_product_attention(
        *(wb.tensor(a, dtype=dtype) for a in (q, k, v)),
        attn_mask=None if mask is None else wb.tensor(mask, dtype=None if mask.dtype == bool
                                                       else dtype),
        is_causal=causal,
    )  # fmt: skip
    gpu = wb.scaled_dot_product_attention(
        *(wb.tensor(a, dtype=dtype, device="cuda") for a in (q, k, v)),
        attn_mask=None if mask is None else wb.tensor(mask, dtype=None if mask.dtype == bool
                                                       else dtype, device="cuda"),
        is_causal=causal,
    )  # fmt: skip
    tol = 2e-2 if dtype == wb.f16 else 1e-4
    assert_close(_to_numpy(gpu), _to_numpy(cpu), dtype.name, "attention", tol, tol)


def test_nonzero():
    x = wb.tensor([[0.0, 1.0], [2.0, 0.0]], device="cuda")
    np.testing.assert_array_equal(wb.nonzero(x).numpy(), [[0, 1], [1, 0]])


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dim", [0, 1])
def test_sort(dim, descending):
    x = RNG.integers(0, 4, (6, 37)).astype(np.float32)  # many ties: stability matters
    x[2, 5] = np.nan
    cpu_v, cpu_i = wb.sort(wb.tensor(x), dim, descending)
    gpu_v, gpu_i = wb.sort(wb.tensor(x, device="cuda"), dim, descending)
    np.testing.assert_array_equal(gpu_v.numpy(), cpu_v.numpy())
    np.testing.assert_array_equal(gpu_i.numpy(), cpu_i.numpy())
    with pytest.raises(wb.errors.UnsupportedOnDevice, match="longer than 1024"):
        wb.sort(wb.zeros(2000, device="cuda"), 0)


def test_pool_and_upsample_gradients():
    x = RNG.standard_normal((2, 3, 8, 8)).astype(np.float32)
    F = torch.nn.functional

    def bilinear(t):
        return F.interpolate(t, (11, 13), mode="bilinear", align_corners=True)

    check_cuda(lambda t: wb.max_pool2d(t, 2), [x], torch_fn=lambda t: F.max_pool2d(t, 2))
    check_cuda(lambda t: wb.avg_pool2d(t, 3, 2, 1), [x],
               torch_fn=lambda t: F.avg_pool2d(t, 3, 2, 1))  # fmt: skip
    check_cuda(lambda t: wb.adaptive_avg_pool2d(t, (3, 5)), [x],
               torch_fn=lambda t: F.adaptive_avg_pool2d(t, (3, 5)))  # fmt: skip
    check_cuda(lambda t: wb.upsample_nearest2d(t, (16, 12)), [x],
               torch_fn=lambda t: F.interpolate(t, (16, 12), mode="nearest"))  # fmt: skip
    check_cuda(lambda t: wb.upsample_bilinear2d(t, (11, 13), align_corners=True), [x],
               torch_fn=bilinear)  # fmt: skip
