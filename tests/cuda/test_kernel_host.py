"""The portable kernel bodies' numerics without a GPU: the pad, upsample, pool, conv and
indexing families compiled for the CPU (``host_kernels.py``: g++ and ``host_prelude.h``) and
run under the real CUDA host code, against PyTorch. This checks the bodies the CUDA and Metal
sources share (index maths, modes, rounding, the atomic scatters' sums) and the arguments the
host packs for them; what only a GPU shows (threads racing, the targets' own compilers) is for
the ``gpu``-marked tests."""

from __future__ import annotations

import shutil

import ml_dtypes
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from fakes import installed
from host_kernels import host_driver

import workbench as wb
from workbench.backends.cuda import compile as cuda_compile
from workbench.backends.cuda.indexing import IndexingOps
from workbench.backends.cuda.storage import CudaStorage
from workbench.backends.gpu.params import Dims, geometry
from workbench.backends.layout import Layout

NVCC = cuda_compile.find_nvcc()
pytestmark = pytest.mark.skipif(
    NVCC is None or shutil.which("g++") is None,
    reason="needs nvcc (the kernels' parameter lists) and g++ (the host build)",
)
# dtype -> (numpy type, tolerance: a few units in the last place)
DTYPES = {"f32": (np.float32, 1e-6), "f64": (np.float64, 1e-12), "f16": (np.float16, 2e-3),
          "bf16": (ml_dtypes.bfloat16, 1.6e-2)}  # fmt: skip


@pytest.fixture(scope="module")
def built():
    return host_driver(cuda_compile.cache_root().parent / "host", NVCC)


@pytest.fixture
def host(built, monkeypatch):
    built.launches.clear()
    with installed(built, monkeypatch):
        yield built


def _input(shape, dtype, transpose=False, seed=0):
    """A random (numpy, torch, cuda tensor) triple; ``transpose``: a strided view of the last
    two dims (the kernels read it through its layout)."""
    x = np.random.default_rng(seed).standard_normal(shape).astype(DTYPES[dtype][0])
    t = torch.from_numpy(x.astype(np.float64))
    c = wb.tensor(x, device="cuda")
    if transpose:
        t, c = t.transpose(-1, -2), c.transpose(-1, -2)
    return t, c


def _check(got, expected, dtype):
    tol = DTYPES[dtype][1]
    np.testing.assert_allclose(got.numpy().astype(np.float64), expected.numpy(), rtol=tol,
                               atol=tol)  # fmt: skip


def _expected(t, dtype):
    """The float64 reference rounded to ``dtype`` (the kernels write ``dtype``)."""
    return torch.from_numpy(t.numpy().astype(DTYPES[dtype][0]).astype(np.float64))


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_pad(host, mode, dtype):
    t, c = _input((2, 3, 5, 6), dtype, transpose=True)
    pads = (2, 1, 0, 3)
    kw = {"value": 1.5} if mode == "constant" else {}
    _check(wb.pad(c, pads, mode, **kw), F.pad(t, pads, mode=mode, **kw), dtype)
    assert host.launches[-1][0] == f"pad_b{2 if dtype == 'bf16' else 4}"


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_pad_backward(host, mode):
    t, c = _input((2, 5, 6), "f64", transpose=True)
    pads = (2, 1, 3, 2)
    t.requires_grad_(True)
    out = F.pad(t, pads, mode=mode)
    g = torch.from_numpy(np.random.default_rng(1).standard_normal(out.shape))
    out.backward(g)
    gc = CudaStorage.from_numpy(g.numpy())
    per_dim = [(0, 0), (3, 2), (2, 1)]  # the storage's (before, after) for every dim
    got = gc.pad_backward(Layout.contiguous(tuple(g.shape)), per_dim, mode)
    np.testing.assert_allclose(got.to_numpy(Layout.contiguous(tuple(t.shape))), t.grad.numpy(),
                               rtol=1e-12, atol=1e-12)  # fmt: skip


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize(
    ("mode", "kw"),
    [("nearest", {"size": (7, 9)}), ("nearest", {"scale_factor": 2}),
     ("bilinear", {"size": (7, 9), "align_corners": False}),
     ("bilinear", {"size": (7, 9), "align_corners": True}),
     ("bilinear", {"scale_factor": 0.5, "align_corners": False})],
)  # fmt: skip
def test_upsample(host, mode, kw, dtype):
    t, c = _input((2, 3, 5, 4), dtype, transpose=True)
    expected = F.interpolate(t.float(), mode=mode, **kw).double()
    _check(wb.interpolate(c, mode=mode, **kw), _expected(expected, dtype), dtype)


@pytest.mark.parametrize(
    ("mode", "kw"),
    [("nearest", {"size": (7, 9)}), ("bilinear", {"size": (7, 9), "align_corners": False}),
     ("bilinear", {"size": (3, 2), "align_corners": True})],
)  # fmt: skip
def test_upsample_backward(host, mode, kw):
    """The scattered (atomic) sums of every output gradient into its source pixels."""
    t, _ = _input((2, 3, 5, 4), "f64")
    t.requires_grad_(True)
    out = F.interpolate(t, mode=mode, **kw)
    g = torch.from_numpy(np.random.default_rng(1).standard_normal(out.shape))
    out.backward(g)
    gc = CudaStorage.from_numpy(g.numpy())
    layout = Layout.contiguous(tuple(g.shape))
    if mode == "nearest":
        got = gc.upsample_nearest2d_backward(layout, (5, 4), (None, None))
    else:
        got = gc.upsample_bilinear2d_backward(layout, (5, 4), kw["align_corners"], (None, None))
    np.testing.assert_allclose(got.to_numpy(Layout.contiguous(tuple(t.shape))), t.grad.numpy(),
                               rtol=1e-12, atol=1e-12)  # fmt: skip


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_max_pool(host, dtype):
    t, c = _input((2, 3, 7, 8), dtype, transpose=True)
    t = _expected(t, dtype)  # the same (rounded) values on both sides: ties agree
    t[0, 0, :3, :3] = float("nan")  # a NaN wins its windows
    t[0, 1] = float("-inf")  # windows of -inf report their first element
    c = wb.tensor(t.numpy().astype(DTYPES[dtype][0]), device="cuda")
    kw = {"kernel_size": 3, "stride": 2, "padding": 1, "dilation": 1}
    expected, index = F.max_pool2d(t, return_indices=True, **kw)
    got, got_index = wb.max_pool2d(c, return_indices=True, **kw)
    _check(got, expected, dtype)
    np.testing.assert_array_equal(got_index.numpy(), index.numpy())


@pytest.mark.parametrize("count_include_pad", [True, False])
@pytest.mark.parametrize("divisor_override", [None, 5])
def test_avg_pool(host, count_include_pad, divisor_override):
    t, c = _input((2, 3, 7, 8), "f32", transpose=True)
    kw = {"kernel_size": (3, 2), "stride": (2, 1), "padding": (1, 1),
          "count_include_pad": count_include_pad, "divisor_override": divisor_override}  # fmt: skip
    _check(wb.avg_pool2d(c, **kw), F.avg_pool2d(t, **kw), "f32")


def test_adaptive_avg_pool(host):
    t, c = _input((2, 3, 7, 10), "f32", transpose=True)
    _check(wb.adaptive_avg_pool2d(c, (4, 3)), F.adaptive_avg_pool2d(t, (4, 3)), "f32")


@pytest.mark.parametrize("kind", ["max", "avg", "adaptive"])
def test_pool_backward(host, kind):
    t, _ = _input((2, 3, 7, 8), "f64")
    t.requires_grad_(True)
    layout_in = (7, 8)
    if kind == "max":
        out, index = F.max_pool2d(t, 3, 2, 1, return_indices=True)
    elif kind == "avg":
        out = F.avg_pool2d(t, 3, 2, 1, count_include_pad=False)
    else:
        out = F.adaptive_avg_pool2d(t, (3, 5))
    g = torch.from_numpy(np.random.default_rng(1).standard_normal(out.shape))
    out.backward(g)
    gc = CudaStorage.from_numpy(g.numpy())
    layout = Layout.contiguous(tuple(g.shape))
    if kind == "max":
        ic = CudaStorage.from_numpy(index.numpy())
        got = gc.max_pool2d_backward(layout, ic, layout, layout_in)
    elif kind == "avg":
        got = gc.avg_pool2d_backward(layout, layout_in, (3, 3), (2, 2), (1, 1), False, None)
    else:
        got = gc.adaptive_avg_pool2d_backward(layout, layout_in)
    np.testing.assert_allclose(got.to_numpy(Layout.contiguous(tuple(t.shape))), t.grad.numpy(),
                               rtol=1e-12, atol=1e-12)  # fmt: skip


@pytest.fixture
def unchecked_index(monkeypatch):
    """The indexing ops' range check reduces on the device (a block kernel, not host-run):
    pass the (in-range, i64) index through."""
    monkeypatch.setattr(IndexingOps, "_checked_index", lambda self, i, lay, *a: (i, lay))


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_index_select_gather_scatter(host, unchecked_index, dtype):
    t, c = _input((4, 5, 6), dtype, transpose=True)
    t = _expected(t, dtype)
    idx = torch.tensor([3, 0, 3, 5])
    _check(wb.index_select(c, 1, wb.tensor(idx.numpy(), device="cuda")),
           torch.index_select(t, 1, idx), dtype)  # fmt: skip
    gidx = torch.from_numpy(np.random.default_rng(2).integers(0, 6, (4, 3, 5)))
    ci = wb.tensor(gidx.numpy(), device="cuda")
    _check(wb.gather(c, 1, ci), torch.gather(t, 1, gidx), dtype)
    src_t, src = _input((4, 3, 5), dtype, seed=3)
    src_t = _expected(src_t, dtype)
    # 3 distinct rows of 6 for each (i, k): scatter's writes never collide
    perm = torch.from_numpy(np.argsort(np.random.default_rng(4).random((4, 6, 5)), axis=1)[:, :3])
    _check(wb.scatter(c, 1, wb.tensor(perm.numpy(), device="cuda"), src),
           torch.scatter(t, 1, perm, src_t), dtype)  # fmt: skip


@pytest.mark.parametrize("dtype", ["f32", "f64", "i64", "i32"])  # halves add in f32 (a cast)
def test_scatter_add_and_index_add(host, unchecked_index, dtype):
    """Repeated indices accumulate (the atomic adds)."""
    rng = np.random.default_rng(0)
    np_dtype = {"i64": np.int64, "i32": np.int32}.get(dtype) or DTYPES[dtype][0]
    x = (rng.standard_normal((4, 6, 5)) * 4).astype(np_dtype)
    src = (rng.standard_normal((4, 8, 5)) * 4).astype(np_dtype)
    index = rng.integers(0, 6, (4, 8, 5))
    t, ts = (torch.from_numpy(a.astype(np.float64)) for a in (x, src))
    expected = torch.scatter_add(t, 1, torch.from_numpy(index), ts)
    got = wb.scatter_add(wb.tensor(x, device="cuda"), 1, wb.tensor(index, device="cuda"),
                         wb.tensor(src, device="cuda"))  # fmt: skip
    tol = 1e-12 if dtype in ("f64", "i64", "i32") else 1e-5 if dtype == "f32" else 0.1
    np.testing.assert_allclose(got.numpy().astype(np.float64), expected.numpy(), rtol=tol,
                               atol=tol)  # fmt: skip
    rows = np.array([5, 0, 5, 2, 5, 1, 0, 3])
    expected = torch.index_add(t, 1, torch.from_numpy(rows), ts)
    got = wb.index_add(wb.tensor(x, device="cuda"), 1, wb.tensor(rows, device="cuda"),
                       wb.tensor(src, device="cuda"))  # fmt: skip
    np.testing.assert_allclose(got.numpy().astype(np.float64), expected.numpy(), rtol=tol,
                               atol=tol)  # fmt: skip


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_im2col_and_col2im_are_adjoint(host, dtype):
    """im2col against torch's unfold, and col2im against fold (its adjoint)."""
    t, c = _input((2, 3, 7, 6), dtype, transpose=True)
    geom = dict(kernel_size=(3, 2), dilation=(2, 1), padding=(1, 2), stride=(2, 3))
    cols = F.unfold(t, **geom)  # (N, C kh kw, L)
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = (geom[k] for k in geom)
    n, ch, h, w = t.shape
    ho, wo = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1, (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    g = geometry(ch, h, w, kh, kw, sh, sw, ph, pw, dh, dw, ho, wo)
    x = c._storage
    col = x._new(ch * kh * kw * ho * wo)
    for img in range(n):
        x._launch("conv", f"im2col_{dtype}", col.size, col._at(), x._at(), Dims(c._layout),
                  img, g)  # fmt: skip
        got = col.to_numpy(Layout.contiguous((ch * kh * kw, ho * wo)))
        np.testing.assert_allclose(got, cols[img].numpy(), rtol=1e-6, atol=1e-6)
    folded = F.fold(cols, (h, w), **geom)
    image = x._new(ch * h * w)
    col_all = CudaStorage.from_numpy(cols[1].numpy().astype(DTYPES[dtype][0]))
    x._launch("conv", f"col2im_{dtype}", image.size, image._at(), col_all._at(), g)
    np.testing.assert_allclose(image.to_numpy(Layout.contiguous((ch, h, w))), folded[1].numpy(),
                               rtol=1e-5, atol=1e-5)  # fmt: skip


@pytest.fixture(scope="module")
def built_elementwise():
    return host_driver(cuda_compile.cache_root().parent / "host", NVCC, ("elementwise",))


@pytest.mark.parametrize(
    "name, op",
    [("gelu_erf", wb.nn.functional.gelu), ("silu", wb.nn.functional.silu),
     ("gelu", lambda t: wb.nn.functional.gelu(t, approximate="tanh"))],
)  # fmt: skip
@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_activations_take_their_limits(built_elementwise, monkeypatch, name, op, dtype):
    """x·g(x) at ±inf, nan and -0: the limits (-0 at -inf, not 0·inf = nan), as the CPU gives."""
    x = np.array([-np.inf, np.inf, np.nan, -0.0, 0.0, -1e4, 1.5], DTYPES[dtype][0])
    expected = np.array([-0.0, np.inf, np.nan, -0.0, 0.0, -0.0], np.float64)
    with installed(built_elementwise, monkeypatch):
        got = op(wb.tensor(x, device="cuda")).numpy().astype(np.float64)
    cpu = op(wb.tensor(x)).numpy().astype(np.float64)
    np.testing.assert_array_equal(got[:6], expected)
    np.testing.assert_array_equal(np.signbit(got[:6]), np.signbit(expected))
    np.testing.assert_array_equal(cpu[:6], expected)
    np.testing.assert_allclose(got, cpu, rtol=DTYPES[dtype][1])
