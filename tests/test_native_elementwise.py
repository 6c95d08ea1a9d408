"""The native CPU elementwise kernels (kernels/cpu/core) against the numpy path.

Both paths run in this process through the same ``CpuStorage`` methods: the numpy path by
emptying the backend's native op maps for the duration of a call. Random shapes, strides
(transposes, steps, offsets) and broadcasts come from hypothesis; sizes around the chunk and
threading thresholds are checked one by one. Exact ops (IEEE-rounded arithmetic, rounding,
selects) must agree bit for bit, transcendental ones within a few f32 ulp; special values are
checked against the maths (float64 numpy/scipy), not against either path.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import dataclass

import ml_dtypes
import numpy as np
import pytest
import torch
from scipy import special

from workbench.backends.cpu import elementwise as ew
from workbench.backends.cpu import fused, threads
from workbench.backends.cpu.native import NATIVE
from workbench.backends.cpu.storage import CpuStorage

hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies

pytestmark = pytest.mark.skipif(NATIVE is None, reason="the native CPU kernels are not built")

DTYPES = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "bf16": ml_dtypes.bfloat16}
# Results that are correctly rounded (or selects) in both paths: equal bit for bit.
EXACT_UNARY = ["neg", "abs", "sqr", "sqrt", "recip", "ceil", "floor", "round", "sign", "relu"]
APPROX_UNARY = ["exp", "log", "tanh", "sigmoid", "silu", "gelu", "gelu_erf", "erf", "rsqrt"]
BINARY = ["add", "sub", "mul", "div", "maximum", "minimum"]
CMP = ["eq", "ne", "lt", "le", "gt", "ge"]
SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 1e-30, -1e-30, 3e38])


@dataclass
class Layout:
    """What a backend reads of a layout: shape, strides in elements, offset."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int

    @property
    def is_contiguous(self) -> bool:
        expected, s = [], 1
        for d in reversed(self.shape):
            expected.append(s)
            s *= d
        return tuple(reversed(expected)) == self.strides or 0 in self.shape


def operand(view: np.ndarray, base: np.ndarray) -> tuple[CpuStorage, Layout]:
    """``view`` (a strided view of the contiguous ``base``) as a storage and a layout."""
    item = base.itemsize
    offset = (view.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // item
    return CpuStorage(base, owned=False), Layout(
        view.shape, tuple(s // item for s in view.strides), offset
    )


@contextmanager
def numpy_path():
    """The numpy path: every native op lookup misses while inside."""
    maps = (ew._NATIVE_UNARY, ew._NATIVE_BINARY, ew._NATIVE_CMP)
    saved = [dict(m) for m in maps]
    names = ("_AFFINE", "_CLAMP", "_POWF", "_ELU", "NATIVE")
    old = {n: getattr(ew, n) for n in names}
    rows = fused._NATIVE_ROWS
    for m in maps:
        m.clear()
    for n in names:
        setattr(ew, n, None)
    fused._NATIVE_ROWS = ""
    try:
        yield
    finally:
        for m, s in zip(maps, saved, strict=True):
            m.update(s)
        for n, v in old.items():
            setattr(ew, n, v)
        fused._NATIVE_ROWS = rows


def both(fn):
    """(native, numpy path) results of ``fn()`` as numpy arrays (``fn`` returns a storage or a
    tuple of storages: then tuples of arrays)."""

    def arrays(r):
        return (
            tuple(np.asarray(s.array) for s in r) if isinstance(r, tuple) else np.asarray(r.array)
        )

    native = arrays(fn())
    with numpy_path():
        reference = arrays(fn())
    return native, reference


def check(native, reference, dtype: str, exact: bool):
    # (the numpy path may hold a 0-d result as shape (1,): storages are read through layouts)
    assert native.dtype == reference.dtype and native.size == reference.size
    native, reference = native.reshape(-1), reference.reshape(-1)
    if exact:
        np.testing.assert_array_equal(native, reference)
        return
    rtol, atol = {"f32": (2e-6, 3e-7), "f64": (1e-12, 1e-300), "f16": (1e-3, 1e-6),
                  "bf16": (8e-3, 1e-6)}[dtype]  # fmt: skip
    np.testing.assert_allclose(
        native.astype(np.float64), reference.astype(np.float64), rtol=rtol, atol=atol
    )


@st.composite
def strided(
    draw,
    dtype: str,
    shape: tuple[int, ...] | None = None,
    positive: bool = False,
    specials: np.ndarray = SPECIAL,
):
    """A strided, possibly transposed, offset and broadcast view of a random buffer."""
    if shape is None:
        shape = tuple(draw(st.lists(st.integers(0, 6), min_size=0, max_size=4)))
    ndim = len(shape)
    steps = [draw(st.integers(1, 3)) for _ in shape]
    broadcast = [draw(st.booleans()) and draw(st.booleans()) for _ in shape]
    perm = draw(st.permutations(range(ndim)))
    # the buffer holds the source of the view in ``perm`` order, plus a leading offset
    src_shape = [1 if broadcast[i] else shape[i] for i in range(ndim)]
    full = [max(1, (src_shape[p] - 1) * steps[p] + 1) for p in perm]
    lead = draw(st.integers(0, 3))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    size = lead + int(np.prod(full))
    values = rng.standard_normal(size) * draw(st.sampled_from([0.5, 3.0, 30.0]))
    if positive:
        values = np.abs(values) + 1e-3
    if draw(st.booleans()):  # sprinkle special values
        idx = rng.integers(0, size, size=max(1, size // 8))
        values[idx] = rng.choice(specials, size=idx.size)
    with np.errstate(over="ignore"):  # 3e38 is inf in the half types
        base = values.astype(DTYPES[dtype])
    view = base[lead:].reshape(full)
    if ndim:  # (indexing a 0-d array with () would give a scalar, not a view)
        view = view[tuple(slice(None, None, steps[p]) for p in perm)]
        view = view[tuple(slice(0, src_shape[p]) for p in perm)]
        view = np.transpose(view, np.argsort(perm))
    return operand(np.broadcast_to(view, shape), base)


SETTINGS = hypothesis.settings(max_examples=40, deadline=None, derandomize=True)
dtypes = st.sampled_from(list(DTYPES))


@SETTINGS
@hypothesis.given(data=st.data(), dtype=dtypes, op=st.sampled_from(EXACT_UNARY + APPROX_UNARY))
def test_unary_matches_numpy_path(data, dtype, op):
    # silu(-inf) is -0 natively (the limit), NaN on the numpy path (-inf / inf)
    specials = SPECIAL[SPECIAL != -np.inf] if op == "silu" else SPECIAL
    x, layout = data.draw(strided(dtype, None, op in ("log", "rsqrt", "sqrt"), specials))
    native, reference = both(lambda: x.unary(op, layout))
    check(native, reference, dtype, op in EXACT_UNARY)


@SETTINGS
@hypothesis.given(data=st.data(), dtype=dtypes, op=st.sampled_from(BINARY + CMP))
def test_binary_and_cmp_match_numpy_path(data, dtype, op):
    shape = tuple(data.draw(st.lists(st.integers(0, 6), max_size=4)))
    a, la = data.draw(strided(dtype, shape))
    b, lb = data.draw(strided(dtype, shape))
    method = a.cmp if op in CMP else a.binary
    native, reference = both(lambda: method(op, la, b, lb))
    check(native, reference, dtype, exact=True)


@SETTINGS
@hypothesis.given(data=st.data(), dtype=dtypes)
def test_parametric_unary_and_where_match_numpy_path(data, dtype):
    shape = tuple(data.draw(st.lists(st.integers(0, 6), max_size=4)))
    x, lx = data.draw(strided(dtype, shape))
    y, ly = data.draw(strided(dtype, shape))
    mul, add = data.draw(st.sampled_from([(2.0, 0.5), (-0.3, 1e-3), (1.0, 0.0)]))
    check(*both(lambda: x.affine(lx, mul, add)), dtype, exact=True)
    lo, hi = data.draw(st.sampled_from([(-0.5, 0.5), (None, 0.0), (0.0, None), (1.0, -1.0)]))
    check(*both(lambda: x.clamp(lx, lo, hi)), dtype, exact=True)
    check(*both(lambda: x.powf(lx, 2.0)), dtype, exact=True)
    check(*both(lambda: x.elu(lx, 1.0)), dtype, exact=False)
    mask = np.random.default_rng(0).random(shape) > 0.5
    cond, lc = operand(mask, mask)
    check(*both(lambda: cond.where(lc, x, lx, y, ly)), dtype, exact=True)


ROW_DTYPES = st.sampled_from(["f32", "f16", "bf16"])


@SETTINGS
@hypothesis.given(data=st.data(), dtype=ROW_DTYPES, log=st.booleans())
def test_softmax_any_dim_matches_numpy_path(data, dtype, log):
    shape = tuple(data.draw(st.lists(st.integers(1, 9), min_size=1, max_size=4)))
    x, lx = data.draw(strided(dtype, shape, specials=SPECIAL[np.isfinite(SPECIAL)]))
    dim = data.draw(st.integers(0, len(shape) - 1))
    op = x.log_softmax if log else x.softmax
    check(*both(lambda: op(lx, dim)), dtype, exact=False)


@pytest.mark.parametrize(
    "shape, dim",
    [((3, 5, 16), 1), ((2, 7, 63), 1), ((1, 4, 16, 8400), 2), ((2, 3, 65, 2), 1),
     ((130, 4, 1, 33), 1), ((1, 1024, 17), 1), ((1, 1025, 17), 1), ((1, 1, 70), 1)],
)  # fmt: skip
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("log", [False, True])
def test_softmax_over_inner_columns_matches_torch(shape, dim, dtype, log):
    """Lines along a dim with contiguous dims after it: the column blocks (64 lines) of
    rows.c, around the block width, the longest dim they take (1024) and the first beyond,
    with a column of -inf (NaN, as torch), one with a -inf entry and an outer dim stepped."""
    rng = np.random.default_rng(sum(shape))
    full = rng.standard_normal((shape[0] * 2, *shape[1:])) * 4
    full[(0,) * (dim) + (slice(None),) + (0,) * (len(shape) - dim - 1)] = -np.inf
    full[(0,) * (len(shape) - 1) + (-1,)] = -np.inf
    base = full.astype(DTYPES[dtype])
    view = base[::2]  # the outer dim stepped: the column path reads it in place
    x, lx = operand(view, base)
    op = x.log_softmax if log else x.softmax
    native, numpy = both(lambda: op(lx, dim))
    ref = (torch.log_softmax if log else torch.softmax)(torch.tensor(view.astype(np.float64)), dim)
    want = ref.numpy()
    # log_softmax subtracts a shift of up to ~15 (max + log Σ): a few f32 ulp of it, 1e-5
    rtol, atol = (1e-2, 1e-2) if dtype == "bf16" else (2e-6, 1e-5 if log else 2e-6)
    for got in (native, numpy):
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=rtol, atol=atol)


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_softmax_rows_with_nan_or_inf_match_torch(dtype):
    """Rows of 100 (vector lanes and a tail): a NaN anywhere makes the row NaN, +inf too
    (inf - inf), -inf entries get 0 and a row of -inf is NaN, as torch; a row whose maximum
    (500, in a vector lane) would overflow exp if the vector max missed it."""
    x = np.random.default_rng(3).standard_normal((7, 100)) * 5
    x[0, 3], x[1, 47], x[2, 99] = np.nan, np.nan, np.nan  # first vector, middle, tail
    x[3, 50] = np.inf
    x[4, :60] = -np.inf
    x[5, :] = -np.inf
    x[6, 20] = 500.0
    x = x.astype(DTYPES[dtype])
    s, layout = operand(x, x)
    want = torch.softmax(torch.tensor(x.astype(np.float64)), -1).numpy()
    for got in both(lambda: s.softmax(layout, 1)):
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=2e-3, atol=1e-6)


@SETTINGS
@hypothesis.given(data=st.data(), dtype=ROW_DTYPES, affine=st.booleans())
def test_layer_and_rms_norm_match_numpy_path(data, dtype, affine):
    shape = tuple(data.draw(st.lists(st.integers(1, 9), min_size=1, max_size=3)))
    finite = SPECIAL[np.isfinite(SPECIAL) & (np.abs(SPECIAL) < 1e3)]
    x, lx = data.draw(strided(dtype, shape, specials=finite))
    w = b = lw = lb = None
    if affine:
        w, lw = data.draw(strided(dtype, shape[-1:], specials=finite))
        b, lb = data.draw(strided(dtype, shape[-1:], specials=finite))
    (out, mean, rstd), (r_out, r_mean, r_rstd) = both(lambda: x.layer_norm(lx, w, lw, b, lb, 1e-5))
    for got, want in ((out, r_out), (mean, r_mean), (rstd, r_rstd)):
        check(got, want, dtype if got is out else "f32", exact=False)
    (out, rstd), (r_out, r_rstd) = both(lambda: x.rms_norm(lx, w, lw, 1e-6))
    check(out, r_out, dtype, exact=False)
    check(rstd, r_rstd, "f32", exact=False)


# Sizes around WB_CHUNK (1024), WB_PAR_COSTLY (8192) and WB_PAR_CHEAP (65536) elements, on two
# threads, contiguous and with a transposed operand.
@pytest.mark.parametrize("n", [1, 1023, 1024, 1025, 8191, 8192, 8193, 65535, 65536, 65537])
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_size_boundaries_on_two_threads(n, dtype):
    old = threads.get_num_threads()
    threads.set_num_threads(2)
    try:
        rng = np.random.default_rng(n)
        base = rng.standard_normal(n).astype(DTYPES[dtype])
        x, lx = operand(base, base)
        check(*both(lambda: x.unary("exp", lx)), dtype, exact=False)
        check(*both(lambda: x.binary("mul", lx, x, lx)), dtype, exact=True)
        rows = max(1, n // 7)
        grid = rng.standard_normal(rows * 7).astype(DTYPES[dtype])
        g, lg = operand(grid.reshape(rows, 7).T, grid)  # inner stride 7
        check(*both(lambda: g.unary("tanh", lg)), dtype, exact=False)
        check(*both(lambda: g.binary("add", lg, g, lg)), dtype, exact=True)
    finally:
        threads.set_num_threads(old)


def _native(op: str, x: np.ndarray) -> np.ndarray:
    s, layout = operand(x, x)
    return np.asarray(s.unary(op, layout).array)


MATHS = {
    "exp": np.exp, "log": np.log, "tanh": np.tanh, "erf": special.erf, "sigmoid": special.expit,
    "silu": lambda x: x * special.expit(x),
    "gelu_erf": lambda x: x / 2 * special.erfc(-x / np.sqrt(2)),
    "gelu": lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3))),
}  # fmt: skip


@pytest.mark.parametrize("op", list(MATHS))
@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_transcendental_accuracy_against_float64_maths(op, dtype):
    """Within 4 ulp of the float64 result over |x| up to 60 (absolute 3e-7 where the result
    is near 0: A&S erfc), special values as C99 Annex F says."""
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.standard_normal(50000) * s for s in (0.01, 1, 8, 60)])
    if op == "log":
        x = np.abs(x) + 1e-38
    x = x.astype(DTYPES[dtype])
    with np.errstate(all="ignore"):
        want = MATHS[op](x.astype(np.float64))
        ulp = np.spacing(np.abs(want).astype(DTYPES[dtype])).astype(np.float64)
    got = _native(op, x).astype(np.float64)
    finite = np.isfinite(want) & np.isfinite(ulp)
    err = np.abs(got - want)[finite]
    assert np.all(err <= np.maximum(4 * ulp[finite], 3e-7 if dtype == "f32" else 1e-15))


SPECIALS = {
    "exp": {0.0: 1.0, np.inf: np.inf, -np.inf: 0.0, 1000.0: np.inf, -1000.0: 0.0},
    "log": {0.0: -np.inf, np.inf: np.inf, -1.0: np.nan, 1.0: 0.0},
    "tanh": {0.0: 0.0, np.inf: 1.0, -np.inf: -1.0, 20.0: 1.0},
    "erf": {0.0: 0.0, np.inf: 1.0, -np.inf: -1.0},
    "sigmoid": {np.inf: 1.0, -np.inf: 0.0, 0.0: 0.5},
    "silu": {np.inf: np.inf, -np.inf: 0.0, 0.0: 0.0},
    "gelu": {np.inf: np.inf, -np.inf: 0.0, 0.0: 0.0},
    "gelu_erf": {np.inf: np.inf, -np.inf: 0.0, 0.0: 0.0},
    "relu": {-np.inf: 0.0, np.inf: np.inf, -1.0: 0.0},
}  # fmt: skip


@pytest.mark.parametrize("op", list(SPECIALS))
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_special_values(op, dtype):
    cases = SPECIALS[op]
    x = np.array([*cases, np.nan], dtype=DTYPES[dtype])
    want = np.array([*cases.values(), np.nan])
    got = _native(op, x).astype(np.float64)
    np.testing.assert_array_equal(got, want.astype(DTYPES[dtype]).astype(np.float64))


@pytest.mark.parametrize("dtype", ["f32", "f64", "bf16"])
def test_gelu_erf_gives_no_subnormals(dtype):
    """x Φ(x) is subnormal just above where it underflows (f32 from x = -13.146, f64 from
    -37.616); both paths give -0 there instead (subnormal inputs slow BLAS products 20x),
    within the accuracy test's absolute bound."""
    lo, hi = (-40.0, -35.0) if dtype == "f64" else (-15.0, -12.0)
    x = np.linspace(lo, hi, 100_001).astype(DTYPES[dtype])
    tiny = np.finfo(np.float64 if dtype == "f64" else np.float32).tiny
    want = MATHS["gelu_erf"](x.astype(np.float64))
    s, layout = operand(x, x)
    for got in both(lambda: s.unary("gelu_erf", layout)):
        got = got.astype(np.float64)
        assert not np.any((got != 0) & (np.abs(got) < tiny))
        assert np.all(np.abs(got - want) <= (1e-15 if dtype == "f64" else 3e-7))


def test_calls_from_several_python_threads():
    """The kernels release the GIL; concurrent calls (each threaded) give the serial results."""
    rng = np.random.default_rng(2)
    inputs = [rng.standard_normal(200_000).astype(np.float32) for _ in range(4)]
    expected = [_native("tanh", x) for x in inputs]
    results = [None] * 4

    def work(i):
        for _ in range(5):
            results[i] = _native("tanh", inputs[i])

    workers = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    for r, e in zip(results, expected, strict=True):
        np.testing.assert_array_equal(r, e)


def test_bad_arguments_raise_instead_of_crashing():
    x = np.zeros(10, np.float32)
    code = ew._NATIVE_UNARY["exp"]
    add = ew._NATIVE_BINARY["add"]
    flat = Layout((10,), (1,), 0)
    with pytest.raises(ValueError, match="addresses elements"):
        NATIVE.unary(code, x, Layout((10,), (1,), 5), 0.0, 0.0)
    with pytest.raises(ValueError, match="addresses elements"):
        NATIVE.unary(code, x, Layout((2, 5), (6, 1), 0), 0.0, 0.0)
    with pytest.raises(ValueError, match="addresses elements"):
        NATIVE.binary(add, x, flat, x, Layout((10,), (2,), 0))
    with pytest.raises(ValueError, match="shapes differ"):
        NATIVE.binary(add, x, flat, x, Layout((2, 5), (5, 1), 0))
    with pytest.raises(ValueError, match="shapes differ"):
        NATIVE.cmp(ew._NATIVE_CMP["lt"], x, Layout((4,), (1,), 0), x, Layout((2, 2), (2, 1), 0))
    with pytest.raises(TypeError, match="unsupported dtype"):
        NATIVE.unary(code, x.astype(">f4"), flat, 0.0, 0.0)
    with pytest.raises(ValueError, match="no op with code"):
        NATIVE.unary(10_000, x, flat, 0.0, 0.0)
    with pytest.raises(ValueError, match="C-contiguous"):
        NATIVE.unary(code, np.zeros(20, np.float32)[::2], flat, 0.0, 0.0)
    with pytest.raises(AttributeError):
        NATIVE.unary(code, x, (10,), 0.0, 0.0)
    with pytest.raises(TypeError, match="expected 5 arguments"):
        NATIVE.unary(code, x)
    # operands the kernels do not compute: None, so that the caller takes numpy's path
    assert NATIVE.unary(code, [0.0] * 10, flat, 0.0, 0.0) is None
    assert NATIVE.unary(code, x.astype(np.int32), flat, 0.0, 0.0) is None
    assert NATIVE.binary(add, x, flat, x.astype(np.float64), flat) is None
    assert NATIVE.binary(add, x, flat, np.ma.masked_array(x), flat) is None


def test_native_results_are_new_arrays_of_the_input_dtype():
    x = np.arange(12, dtype=np.float16).reshape(3, 4)
    transposed = Layout((4, 3), (1, 4), 0)
    out = NATIVE.binary(ew._NATIVE_BINARY["sub"], x, transposed, x, Layout((4, 3), (0, 1), 0))
    assert out.dtype == np.float16 and out.flags.c_contiguous and out.shape == (4, 3)
    np.testing.assert_array_equal(out, x.T - x[0, :3])
    less = NATIVE.cmp(ew._NATIVE_CMP["lt"], x, transposed, x, Layout((4, 3), (0, 1), 0))
    np.testing.assert_array_equal(less, x.T < x[0, :3])
    assert less.dtype == np.bool_
    y = NATIVE.unary(ew._NATIVE_UNARY["affine"], x, transposed, 2.0, 1.0)
    np.testing.assert_array_equal(y, x.T * 2 + 1)


def test_num_threads_api():
    import workbench as wb

    old = wb.get_num_threads()
    try:
        wb.set_num_threads(1)
        assert wb.get_num_threads() == 1 == NATIVE.get_num_threads()
        with pytest.raises(wb.WorkbenchError, match="expected an int >= 1"):
            wb.set_num_threads(0)
    finally:
        wb.set_num_threads(old)
    info = wb.native_info()
    assert info["variant"] == NATIVE.variant() and info["num_threads"] == old
    assert old == threads.physical_cores() or "OMP_NUM_THREADS" in __import__("os").environ


def _cast(x: np.ndarray, dtype: str) -> np.ndarray:
    s, layout = operand(x, x)
    return np.asarray(s.cast(layout, dtype).array)


def test_bf16_conversions_are_exact_over_all_bit_patterns():
    """bf16 -> f32 is the bits shifted left by 16 (every one of the 65536 patterns, NaNs
    included); f32 -> bf16 rounds to nearest even as ml_dtypes does, keeping a NaN's sign and
    high payload with the quiet bit set: (bits >> 16) | 0x40. Odd lengths reach the
    vector body and the scalar tail."""
    bits = np.arange(1 << 16, dtype=np.uint32)
    halves = bits.astype(np.uint16).view(ml_dtypes.bfloat16)
    for n in (len(halves), len(halves) - 5):
        np.testing.assert_array_equal(_cast(halves[:n], "f32").view(np.uint32), bits[:n] << 16)

    rng = np.random.default_rng(3)
    pattern = bits << 16
    words = np.concatenate([
        rng.integers(0, 1 << 32, 1 << 20, dtype=np.uint32),  # any f32, NaNs and subnormals too
        pattern | 0x8000, pattern | 0x7FFF, pattern | 0x8001, pattern,  # ties and neighbours
        pattern | 0x18000, pattern | 0xFFFF,
    ]).astype(np.uint32)  # fmt: skip
    x = words.view(np.float32)
    nan = np.isnan(x)
    with np.errstate(all="ignore"):
        rounded = x.astype(ml_dtypes.bfloat16).view(np.uint16)
    want = np.where(nan, (words >> 16) | 0x40, rounded).astype(np.uint16)
    for n in (len(x), len(x) - 3):
        np.testing.assert_array_equal(_cast(x[:n], "bf16").view(np.uint16), want[:n])


def _layouts(v: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray, slice]]:
    """name -> (view, its base, the elements of ``v`` it holds): contiguous, an odd length at an
    offset (the kernels' scalar tail) and stride 3."""
    wide = np.repeat(v, 3)
    return {"contiguous": (v, v, slice(None)), "tail": (v[3:-2], v, slice(3, -2)),
            "strided": (wide[::3], wide, slice(None))}  # fmt: skip


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_half_kernels_round_once_over_all_bit_patterns(dtype):
    """f16/bf16 ops widen to f32, compute, round to nearest even once: a + b and a * b equal
    numpy's f32 result cast by numpy / ml_dtypes for each of the 65536 patterns against a
    shuffle of them (contiguous, odd length, strided, and a broadcast scalar). NaN results are
    NaN; a bf16 NaN keeps its sign and high payload, quietened: -x is (bits ^ 0x8000) | 0x40."""
    half = DTYPES[dtype]
    bits = np.arange(1 << 16, dtype=np.uint16)
    x = bits.view(half)
    y = np.random.default_rng(5).permutation(bits).view(half)
    xf, yf = x.astype(np.float32), y.astype(np.float32)
    scalar = y[7:8]
    with np.errstate(all="ignore"):
        cases = [("add", y, xf + yf), ("mul", y, xf * yf), ("mul", scalar, xf * yf[7])]
    for op, other, want_f32 in cases:
        with np.errstate(all="ignore"):
            want = want_f32.astype(half).view(np.uint16)
        others = _layouts(other) if other.size > 1 else None
        for name, (va, ba, part) in _layouts(x).items():
            vb, bb, _ = others[name] if others else (np.broadcast_to(scalar, va.shape), scalar, 0)
            (sa, la), (sb, lb) = operand(va, ba), operand(vb, bb)
            got = np.asarray(sa.binary(op, la, sb, lb).array).view(np.uint16)
            nan = np.isnan(want_f32[part])
            np.testing.assert_array_equal(got[~nan], want[part][~nan], err_msg=f"{op} {name}")
            assert np.isnan(got[nan].view(half).astype(np.float32)).all(), f"{op} {name}"
    if dtype == "bf16":
        s, layout = operand(x, x)
        got = np.asarray(s.unary("neg", layout).array).view(np.uint16)
        nan = np.isnan(xf)
        np.testing.assert_array_equal(got, np.where(nan, (bits ^ 0x8000) | 0x40, bits ^ 0x8000))


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("op", ["sqr", "sqrt", "recip", "abs"])
def test_half_unary_kernels_round_once_over_all_bit_patterns(dtype, op):
    """Unary ops that IEEE f32 arithmetic rounds exactly (x², √x, 1/x, |x|) equal numpy's f32
    result cast by numpy / ml_dtypes for each of the 65536 patterns, in every layout. In bf16,
    x², 1/x and |x| span the f32 subnormals, which vcvtneps2bf16 (the avx512 variant's bf16
    store on CPUs with AVX512-BF16) would flush to zero: vectors holding one must take the
    integer rounding."""
    half = DTYPES[dtype]
    x = np.arange(1 << 16, dtype=np.uint16).view(half)
    reference = {"sqr": np.square, "sqrt": np.sqrt, "recip": np.reciprocal, "abs": np.abs}[op]
    with np.errstate(all="ignore"):
        want_f32 = reference(x.astype(np.float32))
        want = want_f32.astype(half).view(np.uint16)
    if dtype == "bf16" and op != "sqrt":  # the subnormal results are met
        assert ((want_f32 != 0) & (np.abs(want_f32) < 2.0**-126)).sum() > 100
    for name, (view, base, part) in _layouts(x).items():
        s, layout = operand(view, base)
        got = np.asarray(s.unary(op, layout).array).view(np.uint16)
        nan = np.isnan(want_f32[part])
        np.testing.assert_array_equal(got[~nan], want[part][~nan], err_msg=f"{op} {name}")
        assert np.isnan(got[nan].view(half).astype(np.float32)).all(), f"{op} {name}"
