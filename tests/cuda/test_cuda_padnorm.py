"""``pad``, ``pad_backward`` and ``group_norm`` on CUDA.

Without a GPU: the storage runs against the fake driver, whose launches of ``pad_b*``,
``pad_backward_*``, ``group_norm_*`` and ``cast_*`` are emulated here in Python, statement for
statement after ``kernels/gpu/pad.h`` and ``kernels/gpu/norm.h``, from the packed argument
buffer. That checks the argument packing, the dim merging, grid sizes and the index maths
against the CPU storage; the kernels' own compilation is ``test_cuda_kernels_compile.py``'s.
With a GPU (``gpu`` marker): the ops against PyTorch, forward and gradients.
"""

from __future__ import annotations

import struct

import ml_dtypes
import numpy as np
import pytest

from workbench.backends.cpu.storage import CpuStorage
from workbench.backends.cuda.storage import CudaStorage
from workbench.backends.errors import UnsupportedOnDevice
from workbench.backends.gpu.padnorm import pad_dims
from workbench.backends.gpu.params import LAYOUT_FORMAT, LAYOUT_SIZE, MAX_DIMS
from workbench.backends.gpu.plan import group_norm_threads
from workbench.backends.layout import Layout

NP = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "f64": np.float64,
      "i64": np.int64, "i32": np.int32, "u8": np.uint8, "bool": np.bool_}  # fmt: skip
BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
ACC = {"f16": np.float32, "bf16": np.float32, "f32": np.float32, "f64": np.float64}
MODES = ("constant", "reflect", "replicate", "circular")


# -- the kernels, emulated ---------------------------------------------------------------------
class Args:
    """Reads a packed argument buffer in order, with the alignment ``pack_args`` uses."""

    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def take(self, fmt: str, align: int):
        self.pos += -self.pos % align
        values = struct.unpack_from("<" + fmt, self.data, self.pos)
        self.pos += struct.calcsize("<" + fmt)
        return values if len(values) > 1 else values[0]

    def ptr(self) -> int:
        return self.take("Q", 8)

    def i64(self) -> int:
        return self.take("q", 8)

    def i32(self) -> int:
        return self.take("i", 4)

    def f64(self) -> float:
        return self.take("d", 8)

    def layout(self) -> dict:
        fields = self.take(LAYOUT_FORMAT[1:], 8)
        ndim, contiguous, offset = fields[:3]
        return {"ndim": ndim, "contiguous": contiguous, "offset": offset,
                "shape": fields[3 : 3 + MAX_DIMS], "strides": fields[3 + MAX_DIMS :]}  # fmt: skip


def offset_of(layout: dict, i: int) -> int:
    """``wb_offset``."""
    if layout["contiguous"]:
        return layout["offset"] + i
    off = layout["offset"]
    for d in range(layout["ndim"] - 1, -1, -1):
        i, r = divmod(i, layout["shape"][d])
        off += r * layout["strides"][d]
    return off


def memory(fake, ptr: int, dtype) -> np.ndarray:
    """A writable view of device memory from ``ptr`` to the end of its allocation."""
    dtype = np.dtype(dtype)
    if ptr == 0:  # an empty storage (never dereferenced)
        return np.empty(0, dtype)
    for base, buf in fake.memory.items():
        if base <= ptr < base + len(buf):
            return np.frombuffer(buf, dtype, (len(buf) - (ptr - base)) // dtype.itemsize,
                                 ptr - base)  # fmt: skip
    raise AssertionError(f"address {ptr:#x} is outside every allocation")


def pad_source(o: int, lo: int, n: int, mode: int) -> int:
    i = o - lo
    if 0 <= i < n:
        return i
    if mode == 1:
        return -i if i < 0 else 2 * (n - 1) - i
    if mode == 2:
        return 0 if i < 0 else n - 1
    if mode == 3:
        return ((i % n) + n) % n  # C's % truncates; Python's floors: the same result here
    return -1


def emulate_pad(fake, size: int, a: Args) -> None:
    out_ptr, x_ptr, lx = a.ptr(), a.ptr(), a.layout()
    geom = a.take(f"{2 * MAX_DIMS}q", 8)
    lo, outs = geom[:MAX_DIMS], geom[MAX_DIMS:]
    total, mode = a.i64(), a.i32()
    value = a.take({1: "B", 2: "H", 4: "I", 8: "Q"}[size], size)
    out = memory(fake, out_ptr, BITS[size])
    x = memory(fake, x_ptr, BITS[size])
    for e in range(total):
        rem, off, inside = e, lx["offset"], True
        for d in range(lx["ndim"] - 1, -1, -1):
            q = rem // outs[d]
            i = pad_source(rem - q * outs[d], lo[d], lx["shape"][d], mode)
            rem = q
            if i < 0:
                inside = False
                break
            off += i * lx["strides"][d]
        out[e] = x[off] if inside else value


def emulate_pad_backward(fake, dtype: str, a: Args) -> None:
    out_ptr, g_ptr, lg = a.ptr(), a.ptr(), a.layout()
    total, inner, n, lo, hi = a.i64(), a.i64(), a.i64(), a.i64(), a.i64()
    mode = a.i32()
    acc_t = ACC[dtype]
    out, g = memory(fake, out_ptr, acc_t), memory(fake, g_ptr, NP[dtype])
    m = n + lo + hi
    for e in range(total):
        j, t = e % inner, e // inner
        i, outer = t % n, t // n
        base = outer * m * inner + j

        def at(o, base=base):
            return acc_t(g[offset_of(lg, base + o * inner)])

        acc = at(i + lo)
        if mode == 1:
            if 1 <= i <= lo:
                acc += at(lo - i)
            if n - 1 - hi <= i <= n - 2:
                acc += at(lo + 2 * (n - 1) - i)
        elif mode == 2:
            if i == 0:
                for o in range(lo):
                    acc += at(o)
            if i == n - 1:
                for o in range(lo + n, m):
                    acc += at(o)
        elif mode == 3:
            if i >= n - lo:
                acc += at(i + lo - n)
            if i < hi:
                acc += at(i + lo + n)
        out[e] = acc


def emulate_group_norm(fake, dtype: str, a: Args) -> None:
    out_ptr, mean_ptr, rstd_ptr, x_ptr, lx = a.ptr(), a.ptr(), a.ptr(), a.ptr(), a.layout()
    w_ptr, lw, b_ptr, lb = a.ptr(), a.layout(), a.ptr(), a.layout()
    rows, groups, k_, s_, cpg = a.i64(), a.i64(), a.i64(), a.i64(), a.i64()
    eps, has_w, has_b = a.f64(), a.i32(), a.i32()
    c_t = ACC[dtype]
    out = memory(fake, out_ptr, NP[dtype])
    mean_out, rstd_out = memory(fake, mean_ptr, c_t), memory(fake, rstd_ptr, c_t)
    x = memory(fake, x_ptr, NP[dtype])
    w = memory(fake, w_ptr, NP[dtype]) if has_w else None
    b = memory(fake, b_ptr, NP[dtype]) if has_b else None
    with np.errstate(invalid="ignore", divide="ignore"):
        for row in range(rows):
            base = row * k_
            xs = np.array([x[offset_of(lx, base + k)] for k in range(k_)], c_t)
            mean = c_t(xs.sum(dtype=c_t) / c_t(k_))
            rstd = c_t(1) / np.sqrt(((xs - mean) ** 2).sum(dtype=c_t) / c_t(k_) + c_t(eps))
            mean_out[row], rstd_out[row] = mean, rstd
            c0 = (row % groups) * cpg
            for k in range(k_):
                y = (xs[k] - mean) * rstd
                c = c0 + k // s_
                if has_w:
                    y *= c_t(w[offset_of(lw, c)])
                if has_b:
                    y += c_t(b[offset_of(lb, c)])
                out[base + k] = y


def emulate_cast(fake, name: str, a: Args) -> None:
    _, src, dst = name.split("_")
    out_ptr, in_ptr, n, layout = a.ptr(), a.ptr(), a.i64(), a.layout()
    out, x = memory(fake, out_ptr, NP[dst]), memory(fake, in_ptr, NP[src])
    for i in range(n):
        out[i] = x[offset_of(layout, i)]


@pytest.fixture
def gpu(fake, monkeypatch):
    """The fake driver with this file's kernels emulated at launch."""
    launch = fake.launch

    def emulating(index, function, grid, block, args, shared=0, stream=None):
        launch(index, function, grid, block, args, shared, stream)
        a = Args(args)
        if function.startswith("pad_backward_"):
            emulate_pad_backward(fake, function.rsplit("_", 1)[1], a)
        elif function.startswith("pad_b"):
            emulate_pad(fake, int(function[5:]), a)
        elif function.startswith("group_norm_"):
            emulate_group_norm(fake, function.rsplit("_", 1)[1], a)
        elif function.startswith("cast_"):
            emulate_cast(fake, function, a)

    monkeypatch.setattr(fake, "launch", emulating)
    return fake


# -- helpers -----------------------------------------------------------------------------------
def make(shape, dtype: str, layout: str, seed: int = 0):
    """(host array, its buffer on the fake device, a CPU storage of the buffer, the Layout)."""
    rng = np.random.default_rng(seed)
    shape = tuple(shape)
    if layout == "transposed" and len(shape) >= 2:
        buf_shape = shape[::-1]
    elif layout == "sliced":
        buf_shape = (*shape[:-1], shape[-1] * 2 + 1) if shape else ()
    else:
        buf_shape = shape
    if dtype == "bool":
        buf = rng.random(buf_shape) > 0.5
    elif dtype in ("i64", "i32", "u8"):
        buf = rng.integers(0, 100, buf_shape).astype(NP[dtype])
    else:
        buf = rng.standard_normal(buf_shape).astype(NP[dtype])
    flat = np.ascontiguousarray(buf).reshape(-1)
    strides = Layout.contiguous(buf_shape).strides
    if layout == "transposed" and len(shape) >= 2:
        lay = Layout(shape, strides[::-1])
    elif layout == "sliced" and shape:
        lay = Layout(shape, (*strides[:-1], 2), 1)
    else:
        lay = Layout.contiguous(shape)
    return CudaStorage.from_numpy(flat), CpuStorage(flat.copy()), lay


def download(storage: CudaStorage, shape) -> np.ndarray:
    return storage.to_numpy(Layout.contiguous(tuple(shape)))


# -- pad ---------------------------------------------------------------------------------------
PAD_CASES = [
    # (shape, pads per dim, mode)
    ((5,), ((2, 3),), "constant"),
    ((5,), ((-2, 1),), "constant"),
    ((0,), ((2, 1),), "constant"),
    ((3, 4), ((1, -2), (0, 0)), "constant"),
    ((2, 3, 4), ((0, 0), (2, 1), (3, 3)), "reflect"),
    ((2, 3, 4), ((0, 0), (1, 0), (0, 3)), "reflect"),
    ((2, 1, 6), ((0, 0), (0, 0), (5, 5)), "reflect"),
    ((2, 3, 4), ((0, 0), (4, 2), (1, 5)), "replicate"),
    ((1, 4), ((0, 0), (3, 3)), "replicate"),
    ((2, 3, 4), ((0, 0), (3, 2), (4, 4)), "circular"),
    ((2, 3, 5), ((1, 1), (0, 0), (0, 2)), "circular"),
    ((2, 3, 4, 5, 2), ((0, 0), (0, 0), (1, 1), (2, 1), (0, 0)), "reflect"),
    ((3, 4), ((0, 0), (0, 0)), "replicate"),
    ((), (), "constant"),
]


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced"])
@pytest.mark.parametrize(("shape", "pads", "mode"), PAD_CASES)
def test_pad_matches_cpu(gpu, shape, pads, mode, layout):
    for dtype in ("f32", "bf16", "i64", "bool"):
        x, ref, lay = make(shape, dtype, layout)
        out = x.pad(lay, pads, mode, 7 if mode == "constant" else 0)
        expected = ref.pad(lay, pads, mode, 7 if mode == "constant" else 0).array
        assert out.dtype == dtype and out.size == expected.size
        np.testing.assert_array_equal(download(out, expected.shape), expected)


def test_pad_launch_merges_unpadded_dims(gpu):
    x, _, lay = make((2, 3, 4, 5), "f16", "contiguous")
    out = x.pad(lay, ((0, 0), (0, 0), (0, 0), (1, 2)), "constant", 1.5)
    name, grid, block, args = gpu.launches[-1]
    total = 2 * 3 * 4 * 8
    assert name == "pad_b2" and grid == (1, 1, 1) and block == (256, 1, 1)
    a = Args(args)
    assert (a.ptr(), a.ptr()) == (out.ptr, x.ptr)
    lx = a.layout()
    assert lx["ndim"] == 2 and lx["shape"][:2] == (24, 5) and lx["strides"][:2] == (5, 1)
    geom = a.take(f"{2 * MAX_DIMS}q", 8)
    assert geom[:2] == (0, 1) and geom[MAX_DIMS : MAX_DIMS + 2] == (24, 8)
    assert (a.i64(), a.i32()) == (total, 0)
    assert np.array(a.take("H", 2), np.uint16).view(np.float16) == np.float16(1.5)
    assert a.pos == len(args)
    assert out.size == total


def test_pad_dims():
    # unpadded dims merge when contiguous with each other, size-1 ones go
    assert pad_dims((2, 3, 4), (12, 4, 1), ((0, 0), (0, 0), (1, 1))) == (
        (6, 4), (4, 1), (0, 1), (6, 6),
    )  # fmt: skip
    assert pad_dims((2, 1, 3), (3, 3, 1), ((0, 0), (0, 0), (0, 0))) == ((6,), (1,), (0,), (6,))
    # transposed dims do not merge; padded dims never do
    assert pad_dims((3, 2), (1, 3), ((0, 0), (0, 0))) == ((3, 2), (1, 3), (0, 0), (3, 2))
    assert pad_dims((1, 2), (2, 1), ((1, 0), (0, 0))) == ((1, 2), (2, 1), (1, 0), (2, 2))
    assert pad_dims((), (), ()) == ((), (), (), ())


def test_pad_empty_output_launches_nothing(gpu):
    x, _, lay = make((2, 0, 3), "f32", "contiguous")
    before = len(gpu.launches)
    out = x.pad(lay, ((0, 0), (0, 0), (1, 1)), "reflect")
    assert out.size == 0 and len(gpu.launches) == before


def test_pad_too_many_dims(gpu):
    shape = (2,) * 9
    x, _, lay = make(shape, "f32", "contiguous")
    with pytest.raises(UnsupportedOnDevice, match="op pad on cuda takes at most 8 dims"):
        x.pad(lay, ((1, 0),) * 9, "constant")
    # unpadded dims merge, so many dims are fine when few are padded
    out = x.pad(lay, ((0, 0),) * 8 + ((1, 1),), "replicate")
    assert out.size == 2**8 * 4


def test_pad_bad_mode(gpu):
    x, _, lay = make((3,), "f32", "contiguous")
    with pytest.raises(UnsupportedOnDevice, match="op pad is not implemented on cuda for mode"):
        x.pad(lay, ((1, 1),), "wrap")


# -- pad_backward ------------------------------------------------------------------------------
PAD_BACKWARD_CASES = [case for case in PAD_CASES if case[2] != "constant"]


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced"])
@pytest.mark.parametrize(("shape", "pads", "mode"), PAD_BACKWARD_CASES)
def test_pad_backward_matches_cpu(gpu, shape, pads, mode, layout):
    out_shape = tuple(n + lo + hi for n, (lo, hi) in zip(shape, pads, strict=True))
    for dtype in ("f32", "f16", "bf16", "f64"):
        g, ref, lay = make(out_shape, dtype, layout, seed=1)
        grad = g.pad_backward(lay, pads, mode)
        expected = ref.pad_backward(lay, pads, mode).array
        assert grad.dtype == dtype and expected.shape == shape
        got = download(grad, shape)
        tol = {"f16": 2e-3, "bf16": 1e-2}.get(dtype, 1e-6)
        np.testing.assert_allclose(got.astype(np.float64), expected.astype(np.float64),
                                   rtol=tol, atol=tol)  # fmt: skip


def test_pad_backward_launches(gpu):
    g, _, lay = make((2, 5, 7), "bf16", "transposed")
    pads = ((0, 0), (1, 1), (2, 2))
    before = len(gpu.launches)
    out = g.pad_backward(lay, pads, "reflect")
    names = [launch[0] for launch in gpu.launches[before:]]
    # one pass per padded dim (bf16 in, f32 after), then one rounding to bf16
    assert names == ["pad_backward_bf16", "pad_backward_f32", "cast_f32_bf16"]
    a = Args(gpu.launches[before][3])
    a.ptr(), a.ptr()
    lg = a.layout()
    assert lg["shape"][: lg["ndim"]] == (2, 5, 7) and lg["strides"][: lg["ndim"]] == (1, 2, 10)
    # pass 1 along dim 1: out (2, 3, 7), inner 7, n 3, lo 1, hi 1, reflect
    assert (a.i64(), a.i64(), a.i64(), a.i64(), a.i64(), a.i32()) == (42, 7, 3, 1, 1, 1)
    a = Args(gpu.launches[before + 1][3])
    a.ptr(), a.ptr(), a.layout()
    assert (a.i64(), a.i64(), a.i64(), a.i64(), a.i64(), a.i32()) == (18, 1, 3, 2, 2, 1)
    assert out.dtype == "bf16" and out.size == 18


def test_pad_backward_f32_needs_no_cast_and_unpadded_is_a_copy(gpu):
    g, _, lay = make((4, 6), "f32", "contiguous")
    before = len(gpu.launches)
    g.pad_backward(lay, ((0, 0), (1, 2)), "circular")
    assert [launch[0] for launch in gpu.launches[before:]] == ["pad_backward_f32"]
    out = g.pad_backward(lay, ((0, 0), (0, 0)), "replicate")
    assert out is not g and gpu.launches[-1][0].startswith("copy_b4")


def test_pad_backward_errors(gpu):
    g, _, lay = make((4,), "i32", "contiguous")
    with pytest.raises(UnsupportedOnDevice, match="op pad_backward is not implemented on cuda "
                       "for dtype i32"):  # fmt: skip
        g.pad_backward(lay, ((1, 1),), "reflect")
    g, _, lay = make((4,), "f32", "contiguous")
    with pytest.raises(UnsupportedOnDevice, match="mode 'constant'"):
        g.pad_backward(lay, ((1, 1),), "constant")


# -- group_norm --------------------------------------------------------------------------------
GN_CASES = [
    # (shape (N, C, S), groups)
    ((2, 6, 5), 3),
    ((1, 4, 1), 4),
    ((3, 8, 7), 1),
    ((2, 4, 0), 2),
    ((0, 4, 3), 2),
]


@pytest.mark.filterwarnings("ignore:Mean of empty slice")  # the CPU storage, for S = 0
@pytest.mark.parametrize("affine", ["none", "weight", "both"])
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced"])
@pytest.mark.parametrize(("shape", "groups"), GN_CASES)
def test_group_norm_matches_cpu(gpu, shape, groups, layout, affine):
    c = shape[1]
    for dtype in ("f32", "f16", "bf16", "f64"):
        x, xr, lay = make(shape, dtype, layout, seed=2)
        w = wr = b = br = None
        wl = bl = None
        if affine != "none":
            w, wr, wl = make((c,), dtype, "sliced", seed=3)
        if affine == "both":
            b, br, bl = make((c,), dtype, "contiguous", seed=4)
        out, mean, rstd = x.group_norm(lay, groups, w, wl, b, bl, 1e-5)
        eo, em, er = (s.array for s in xr.group_norm(lay, groups, wr, wl, br, bl, 1e-5))
        cdt = "f64" if dtype == "f64" else "f32"
        assert (out.dtype, mean.dtype, rstd.dtype) == (dtype, cdt, cdt)
        tol = {"f16": 2e-3, "bf16": 1e-2}.get(dtype, 1e-5)
        for got, want, shp in ((out, eo, shape), (mean, em, em.shape), (rstd, er, er.shape)):
            np.testing.assert_allclose(
                download(got, shp).astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol
            )


def test_group_norm_launch(gpu):
    x, _, lay = make((2, 6, 5), "f16", "transposed")
    w, _, wl = make((6,), "f32", "contiguous")  # another dtype: cast first
    out, mean, rstd = x.group_norm(lay, 3, w, wl, None, None, 1e-3)
    names = [launch[0] for launch in gpu.launches[-2:]]
    assert names == ["cast_f32_f16", "group_norm_f16"]
    name, grid, block, args = gpu.launches[-1]
    assert grid == (6, 1, 1) and block == (32, 1, 1)  # 10 elements a group
    a = Args(args)
    assert (a.ptr(), a.ptr(), a.ptr(), a.ptr()) == (out.ptr, mean.ptr, rstd.ptr, x.ptr)
    lx = a.layout()
    assert lx["shape"][: lx["ndim"]] == (2, 6, 5) and lx["strides"][: lx["ndim"]] == (1, 2, 12)
    assert a.ptr() != w.ptr  # the f16 copy of w
    a.layout()
    assert a.ptr() == 0
    a.layout()
    assert (a.i64(), a.i64(), a.i64(), a.i64(), a.i64()) == (6, 3, 10, 5, 2)
    assert (a.f64(), a.i32(), a.i32()) == (1e-3, 1, 0)
    assert a.pos == len(args)
    assert (mean.size, rstd.size, mean.dtype) == (6, 6, "f32")


@pytest.mark.parametrize(
    ("k", "threads"),
    [(0, 32), (1, 32), (33, 64), (500, 512), (5000, 512), (16383, 512), (16384, 1024),
     (10**6, 1024)],
)  # fmt: skip
def test_group_norm_threads(k, threads):
    assert group_norm_threads(k) == threads


def test_group_norm_many_rows_grid_is_capped(gpu, monkeypatch):
    import workbench.backends.gpu.plan as plan

    monkeypatch.setattr(plan, "MAX_BLOCKS", 4)
    x, xr, lay = make((5, 2, 3), "f32", "contiguous")
    out, _, _ = x.group_norm(lay, 2, None, None, None, None, 1e-5)
    assert gpu.launches[-1][1] == (4, 1, 1)  # 10 rows: the kernel's grid-stride loop covers them


def test_group_norm_errors(gpu):
    x, _, lay = make((2, 4, 3), "i32", "contiguous")
    with pytest.raises(UnsupportedOnDevice, match="op group_norm is not implemented on cuda for "
                       "dtype i32"):  # fmt: skip
        x.group_norm(lay, 2, None, None, None, None, 1e-5)
    x, _, lay = make((2, 4, 3), "f32", "contiguous")
    with pytest.raises(ValueError, match="3 groups do not divide 4 channels"):
        x.group_norm(lay, 3, None, None, None, None, 1e-5)


def test_layout_struct_size():
    assert LAYOUT_SIZE == 144


def test_ops_forward_through_the_fake(gpu):
    """``wb.pad`` / ``wb.group_norm`` on a "cuda" tensor reach these methods (PyTorch's values)."""
    import torch

    import workbench as wb

    x = np.random.default_rng(0).standard_normal((2, 6, 3, 4)).astype(np.float32)
    for mode in MODES:
        kw = {"value": 0.5} if mode == "constant" else {}
        out = wb.pad(wb.tensor(x, device="cuda"), (2, 1, 1, 2), mode, **kw)
        ref = torch.nn.functional.pad(torch.tensor(x), (2, 1, 1, 2), mode, **kw)
        assert out.device == wb.Device("cuda")
        np.testing.assert_array_equal(out.numpy(), ref.numpy())
    w, b = x[0, :, 0, 0].copy(), x[1, :, 1, 1].copy()
    xt = wb.tensor(x, device="cuda").transpose(2, 3)
    out = wb.group_norm(xt, 3, wb.tensor(w, device="cuda"), wb.tensor(b, device="cuda"))
    ref = torch.nn.functional.group_norm(
        torch.tensor(x).transpose(2, 3), 3, torch.tensor(w), torch.tensor(b)
    )
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-5, atol=1e-5)


# -- on a GPU ----------------------------------------------------------------------------------
# The op tables (tests/test_conv_pool.py::test_pad, tests/test_fused.py::test_group_norm) run
# these ops on cuda too; here are the cases they leave out: 3 padded dims of a 5-d view, and
# groups of every block size (32, 512 and 1024 threads).
def _cuda_check():
    devices = pytest.importorskip("devices")
    ok, reason = devices.AVAILABILITY["cuda"]
    if not ok:
        pytest.skip(f"no usable CUDA device: {reason}")
    return pytest.importorskip("op_check").check


@pytest.mark.gpu
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced"])
@pytest.mark.parametrize("mode", MODES)
def test_pad_5d_on_gpu(mode, layout):
    check = _cuda_check()
    import torch

    import workbench as wb

    x = np.random.default_rng(0).standard_normal((2, 3, 4, 5, 6)).astype(np.float32)
    pad = (2, 1, 3, 4, 1, 2)  # D 4, H 5, W 6: within every mode's limit
    kw = {"value": 0.5} if mode == "constant" else {}
    # bf16 forward only: PyTorch's CPU sums the gradients of replicated edges in bf16
    for dtype in (wb.f32, wb.bf16):
        check(lambda t: wb.pad(t, pad, mode, **kw), [x], dtype=dtype, layouts=[layout],
              torch_fn=lambda t: torch.nn.functional.pad(t, pad, mode, **kw),
              grad=dtype is wb.f32, device="cuda")  # fmt: skip


@pytest.mark.gpu
@pytest.mark.parametrize("shape,groups", [((3, 4, 5), 4), ((2, 64, 12, 12), 2),
                                          ((1, 64, 64, 64), 2)], ids=str)  # fmt: skip
@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_group_norm_block_sizes_on_gpu(shape, groups, dtype):
    check = _cuda_check()
    import torch

    import workbench as wb

    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32) * 3 + 1
    w, b = rng.standard_normal(shape[1]).astype(np.float32), rng.standard_normal(shape[1])
    tol = {"atol": 2e-2, "rtol": 2e-2} if dtype == "f16" else {"atol": 1e-4, "rtol": 1e-4}
    check(lambda t, w, b: wb.group_norm(t, groups, w, b), [x, w, b.astype(np.float32)],
          dtype=getattr(wb, dtype), device="cuda",
          torch_fn=lambda t, w, b: torch.nn.functional.group_norm(t, groups, w, b),
          grad=shape[-1] != 64, **tol)  # fmt: skip
