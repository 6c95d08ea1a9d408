"""The native CPU reductions, cumsum and casts (kernels/cpu/core/reduce.c, cast.c) against
float64 numpy maths, the numpy path and PyTorch.

Random shapes, dims, strides (steps, transposes, negative steps), offsets, broadcasts and
special values come from hypothesis (the view strategy of test_native_elementwise). Sums are
checked against the float64 sum of the same (rounded) inputs within a bound proportional to
sum |x|; extrema, arg-extrema and casts must agree bit for bit with numpy. Sizes around the
chunk, block and threading thresholds and a 16M-element f32 sum are checked one by one.
"""

from __future__ import annotations

from contextlib import contextmanager

import ml_dtypes
import numpy as np
import pytest
import torch
from scipy import special
from test_native_elementwise import DTYPES, Layout, operand, strided

import workbench as wb
from workbench.backends.cpu import reduce as red
from workbench.backends.cpu import storage, threads
from workbench.backends.cpu.native import NATIVE
from workbench.backends.cpu.storage import CpuStorage

hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies

pytestmark = pytest.mark.skipif(NATIVE is None, reason="the native CPU kernels are not built")

EPS = {"f32": 2.0**-24, "f64": 2.0**-53, "f16": 2.0**-11, "bf16": 2.0**-8}
ALL_DTYPES = {**DTYPES, "bool": np.bool_, "u8": np.uint8, "u32": np.uint32, "i8": np.int8,
              "i16": np.int16, "i32": np.int32, "i64": np.int64}  # fmt: skip
FLOATS = st.sampled_from(list(DTYPES))
SETTINGS = hypothesis.settings(max_examples=60, deadline=None, derandomize=True)


@contextmanager
def numpy_path():
    """The numpy path: the native reductions, cumsum and cast are out of reach while inside."""
    saved, native = dict(red._NATIVE_REDUCE), red.NATIVE
    red._NATIVE_REDUCE.clear()
    red.NATIVE = storage.NATIVE = None
    try:
        yield
    finally:
        red._NATIVE_REDUCE.update(saved)
        red.NATIVE = storage.NATIVE = native


def result(s: CpuStorage, shape) -> np.ndarray:
    return np.asarray(s.array).reshape(shape)


def reduced_shape(shape, dims, keepdim):
    return tuple(1 if i in dims else n for i, n in enumerate(shape) if keepdim or i not in dims)


def f64_view(x: CpuStorage, layout: Layout) -> np.ndarray:
    return storage.view(x.array, layout).astype(np.float64)


@st.composite
def reduction(draw, dtype: str, one_dim: bool = False):
    """(storage, layout, dims, keepdim): a random view and a random set of its dims."""
    x, layout = draw(strided(dtype))
    ndim = len(layout.shape)
    if one_dim:
        dims = (draw(st.integers(0, ndim - 1)),) if ndim else ()
    else:
        dims = tuple(sorted(draw(st.sets(st.integers(0, ndim - 1), max_size=ndim)))) if ndim else ()
    return x, layout, dims, draw(st.booleans())


def assert_close_to_f64(got, ref, scale, dtype: str, factor: float = 8.0):
    """|got - ref| <= the rounding of the result plus factor eps(f32 or f64) sum |x|."""
    compute = EPS["f64"] if dtype == "f64" else EPS["f32"]
    tol = EPS[dtype] * np.abs(ref) + factor * compute * scale + 1e-300
    got = got.astype(np.float64)
    finite = np.isfinite(ref)
    # rounding to a half type may overflow where f64 does not
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    assert np.all(np.abs(got - ref)[finite & np.isfinite(got)] <= tol[finite & np.isfinite(got)])
    np.testing.assert_array_equal(got[~finite], ref[~finite])


@SETTINGS
@hypothesis.given(data=st.data(), dtype=st.sampled_from(list(DTYPES)))
def test_sum_matches_float64(data, dtype):
    x, layout, dims, keepdim = data.draw(reduction(dtype))
    v = f64_view(x, layout)
    with np.errstate(invalid="ignore"):
        ref = np.sum(v, axis=dims, keepdims=keepdim)
        scale = np.sum(np.abs(v), axis=dims, keepdims=keepdim)
    got = result(x.reduce("sum", layout, dims, keepdim, dtype), ref.shape)
    assert_close_to_f64(got, np.asarray(ref), np.nan_to_num(scale), dtype)
    with numpy_path():
        theirs = result(x.reduce("sum", layout, dims, keepdim, dtype), ref.shape)
    assert_close_to_f64(theirs, np.asarray(ref), np.nan_to_num(scale), dtype, factor=64.0)


@SETTINGS
@hypothesis.given(
    data=st.data(), dtype=st.sampled_from(list(DTYPES)), op=st.sampled_from(["max", "min"])
)
def test_extrema_match_numpy_path_exactly(data, dtype, op):
    x, layout, dims, keepdim = data.draw(reduction(dtype))
    hypothesis.assume(all(layout.shape[d] > 0 for d in dims))
    shape = reduced_shape(layout.shape, dims, keepdim)
    got = result(x.reduce(op, layout, dims, keepdim, dtype), shape)
    with numpy_path():
        ref = result(x.reduce(op, layout, dims, keepdim, dtype), shape)
    np.testing.assert_array_equal(got.astype(np.float64), ref.astype(np.float64))


@SETTINGS
@hypothesis.given(
    data=st.data(), dtype=st.sampled_from(list(DTYPES)), op=st.sampled_from(["argmax", "argmin"])
)
def test_arg_extrema_match_numpy(data, dtype, op):
    x, layout, dims, keepdim = data.draw(reduction(dtype, one_dim=True))
    hypothesis.assume(all(layout.shape[d] > 0 for d in dims))
    shape = reduced_shape(layout.shape, dims, keepdim)
    got = result(x.reduce(op, layout, dims, keepdim, "i64"), shape)
    v = storage.view(x.array, layout)
    fn = np.argmax if op == "argmax" else np.argmin
    ref = fn(v, axis=dims[0], keepdims=keepdim) if dims else np.zeros(shape, np.int64)
    np.testing.assert_array_equal(got, ref)  # the first extremum, the first NaN


@SETTINGS
@hypothesis.given(data=st.data(), dtype=st.sampled_from(list(DTYPES)))
def test_prod_matches_float64(data, dtype):
    x, layout, dims, keepdim = data.draw(reduction(dtype))
    v = f64_view(x, layout)
    v = np.where(np.isfinite(v), np.clip(np.abs(v), 0.5, 2.0) * np.sign(v), v)  # no overflow
    base = np.ascontiguousarray(v.astype(DTYPES[dtype]))
    y, ly = operand(base, base)
    ref = np.prod(base.astype(np.float64), axis=dims, keepdims=keepdim)
    got = result(y.reduce("prod", ly, dims, keepdim, dtype), np.shape(ref))
    n = max(1, int(np.prod([layout.shape[d] for d in dims])))
    tol = (EPS[dtype] + 2 * n * (EPS["f64"] if dtype == "f64" else EPS["f32"])) * np.abs(ref)
    with np.errstate(invalid="ignore"):
        ok = np.isclose(got.astype(np.float64), ref, rtol=0, atol=0) | (
            np.abs(got.astype(np.float64) - ref) <= tol
        )
    assert np.all(ok | (np.isnan(ref) & np.isnan(got.astype(np.float64))))


def statistic_reference(op: str, v: np.ndarray, dims, keepdim: bool, param: float):
    """The fused statistics in float64, by numpy/scipy's own functions."""
    if op == "mean":
        return np.mean(v, axis=dims, keepdims=keepdim)
    if op in ("var", "std"):
        fn = np.var if op == "var" else np.std
        return fn(v, axis=dims, ddof=param, keepdims=keepdim)
    if op == "logsumexp":
        return special.logsumexp(v, axis=dims, keepdims=keepdim)
    a = np.abs(v)
    if np.isinf(param):
        return np.max(a, axis=dims, keepdims=keepdim)
    return np.sum(a**param, axis=dims, keepdims=keepdim) ** (1 / param)


STATISTICS = [("mean", 0.0), ("var", 1.0), ("var", 0.0), ("std", 1.0), ("logsumexp", 0.0),
              ("norm", 2.0), ("norm", 1.0), ("norm", np.inf), ("norm", 3.0)]  # fmt: skip
RTOL = {"f32": 2e-5, "f64": 1e-12, "f16": 2e-3, "bf16": 1.6e-2}


def statistic(x: CpuStorage, op: str, layout, dims, keepdim: bool, param: float):
    if op == "norm":
        return x.norm(layout, param, dims, keepdim)
    if op in ("var", "std"):
        return getattr(x, op)(layout, dims, keepdim, param)
    return getattr(x, op)(layout, dims, keepdim)


@SETTINGS
@hypothesis.given(data=st.data(), dtype=FLOATS, case=st.sampled_from(STATISTICS))
def test_fused_statistics_match_float64(data, dtype, case):
    op, param = case
    x, layout, dims, keepdim = data.draw(reduction(dtype))
    n = int(np.prod([layout.shape[d] for d in dims]))
    v = f64_view(x, layout)
    hypothesis.assume((n > 0 and v.size > 0) or op not in ("norm", "logsumexp"))  # max of {}
    if dtype in ("f32", "bf16"):  # f32 accumulation overflows (as PyTorch's) past 3e38
        hypothesis.assume(np.all(np.abs(np.nan_to_num(v, posinf=0, neginf=0)) < 1e18))
    with np.errstate(all="ignore"):
        ref = np.asarray(statistic_reference(op, v, dims, keepdim, param))
        ref = ref.astype(DTYPES[dtype]).astype(np.float64)  # the result's own rounding
        scale = np.max(np.abs(np.nan_to_num(v, posinf=0, neginf=0)), initial=1.0)
    # var/std: absolute error ~ eps * scale² (cancellation in the deviations); others relative
    atol = RTOL[dtype] * (scale * scale if op in ("var", "std") else 1e-3)
    got = result(statistic(x, op, layout, dims, keepdim, param), ref.shape)
    np.testing.assert_allclose(got.astype(np.float64), ref, rtol=RTOL[dtype], atol=atol)
    with numpy_path():
        theirs = result(statistic(x, op, layout, dims, keepdim, param), ref.shape)
    np.testing.assert_allclose(theirs.astype(np.float64), ref, rtol=RTOL[dtype], atol=atol)


@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32"])
def test_fused_statistics_match_torch_where_half_sums_overflow(dtype):
    """92400 half values: their sum of squares (~92400) overflows f16, the f32 accumulation
    does not (PyTorch's CPU kernels accumulate halves in f32 too)."""
    base = np.random.default_rng(1).standard_normal((40, 33, 70)).astype(np.float32)
    t = torch.from_numpy(base).to(TORCH[dtype]).permute(2, 0, 1)
    held = base.astype(DTYPES[dtype])  # (numpy and torch both round to nearest even)
    x, layout = operand(held.transpose(2, 0, 1), held)
    for dims in ((0, 1, 2), (1,), (0, 2)):
        pairs = [
            (x.mean(layout, dims, False), t.mean(dims)),
            (x.var(layout, dims, False, 1.0), t.var(dims)),
            (x.std(layout, dims, True, 0.0), t.std(dims, correction=0, keepdim=True)),
            (x.logsumexp(layout, dims, False), t.logsumexp(dims)),
            (x.norm(layout, 2.0, dims, False), torch.linalg.vector_norm(t, 2, dims)),
        ]
        for ours, theirs in pairs:
            np.testing.assert_allclose(
                np.asarray(ours.array, np.float64).reshape(theirs.shape),
                theirs.double().numpy(),
                rtol=RTOL[dtype],
                atol=1e-2 * RTOL[dtype],  # (means near 0: cancellation)
            )


@SETTINGS
@hypothesis.given(data=st.data(), dtype=st.sampled_from(list(DTYPES)))
def test_cumsum_matches_float64(data, dtype):
    x, layout = data.draw(strided(dtype))
    hypothesis.assume(len(layout.shape) > 0)
    dim = data.draw(st.integers(0, len(layout.shape) - 1))
    v = f64_view(x, layout)
    with np.errstate(invalid="ignore"):
        ref = np.cumsum(v, axis=dim)
        scale = np.cumsum(np.abs(v), axis=dim)
    got = result(x.cumsum(layout, dim, dtype), layout.shape)
    # f64 accumulation: only the final rounding (and f64's own for f64 inputs)
    factor = 4.0 * v.shape[dim] if dtype == "f64" else 0.0
    assert_close_to_f64(got, ref, np.nan_to_num(scale), dtype, factor=factor)


def in_range(a: np.ndarray, dtype: str) -> np.ndarray:
    """``a`` with the values outside ``dtype``'s range (and below 2^62) set to 0."""
    lo, hi = (
        (-1, 2)
        if dtype == "bool"
        else (np.iinfo(ALL_DTYPES[dtype]).min, np.iinfo(ALL_DTYPES[dtype]).max)
    )
    lo, hi = max(lo, -(2**62)), min(hi, 2**62)
    return np.where((a > lo) & (a < hi), a, 0.0)


@SETTINGS
@hypothesis.given(
    data=st.data(),
    src=st.sampled_from(list(ALL_DTYPES)),
    dst=st.sampled_from(list(ALL_DTYPES)),
)
def test_cast_matches_numpy_bit_for_bit(data, src, dst):
    float_src = src in DTYPES
    x, layout = data.draw(strided(src if float_src else "f64"))
    a = np.nan_to_num(x.array.astype(np.float64), posinf=7, neginf=-7)
    if not float_src:  # integers from the float buffer, with negatives for the wraparound
        x = CpuStorage(in_range(a * 1000, src).astype(np.int64).astype(ALL_DTYPES[src]))
    elif dst not in DTYPES:  # float -> int is defined in range only
        x = CpuStorage(in_range(a, dst).astype(ALL_DTYPES[src]))
    v = storage.view(x.array, layout)
    with np.errstate(all="ignore"):
        ref = v.astype(ALL_DTYPES[dst])
    got = x.cast(layout, dst).array.reshape(layout.shape)
    assert got.dtype == ref.dtype and got.flags.c_contiguous
    bits = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[ref.itemsize]
    if dst in DTYPES:  # NaN payloads may differ; NaN must stay NaN
        nan = np.isnan(ref.astype(np.float64))
        np.testing.assert_array_equal(np.isnan(got.astype(np.float64)), nan)
        np.testing.assert_array_equal(got.view(bits)[~nan], ref.view(bits)[~nan])
    else:
        np.testing.assert_array_equal(got.view(bits), ref.view(bits))


def test_f64_to_half_rounds_once():
    """Values a detour through f32 would round twice (to a tie, then to even)."""
    for ulp_bits, dst in ((10, np.float16), (7, ml_dtypes.bfloat16)):
        tie = 1.0 + 2.0 ** -(ulp_bits + 1)
        d = np.array([tie + 2.0**-40, -(tie + 2.0**-40), tie - 2.0**-40, tie, 3.0 + 2.0**-41],
                     np.float64)  # fmt: skip
        x, layout = operand(d, d)
        got = x.cast(layout, "f16" if dst is np.float16 else "bf16").array.astype(np.float64)
        # the correctly rounded values, from the maths
        up, down = 1.0 + 2.0**-ulp_bits, 1.0
        np.testing.assert_array_equal(got, [up, -up, down, down, 3.0])


def test_cast_special_values_and_wraparound():
    x = np.array([np.nan, np.inf, -np.inf, -0.0, 65520.0, 65519.0, 1e-8, -1.5, 2.5], np.float32)
    s, layout = operand(x, x)
    f16 = s.cast(layout, "f16").array
    assert np.isnan(f16[0]) and f16[1] == np.inf and f16[2] == -np.inf
    assert np.signbit(f16[3]) and f16[4] == np.inf and f16[5] == 65504.0
    np.testing.assert_array_equal(s.cast(layout, "bool").array, x != 0)
    ints = np.array([-1, 255, 256, 70000], np.int64)
    si, li = operand(ints, ints)
    np.testing.assert_array_equal(si.cast(li, "u8").array, ints.astype(np.uint8))
    np.testing.assert_array_equal(si.cast(li, "i16").array, ints.astype(np.int16))
    big = np.array([2**24 + 1, 2**53 + 1, -(2**40) - 3], np.int64)
    sb, lb = operand(big, big)
    np.testing.assert_array_equal(sb.cast(lb, "f32").array, big.astype(np.float32))
    np.testing.assert_array_equal(sb.cast(lb, "f16").array, big.astype(np.float16))


def test_large_f32_sum_is_accurate():
    """16M f32 values: blocked summation stays within a few ulp of the float64 sum; naive
    f32 accumulation is off by ~1e-3 here."""
    n = 16 * 1024 * 1024
    x = np.random.default_rng(0).random(n, dtype=np.float32) + np.float32(0.5)
    ref = np.sum(x, dtype=np.float64)
    s, layout = operand(x, x)
    got = float(s.reduce("sum", layout, (0,), False, "f32").array)
    assert abs(got - ref) <= 4 * EPS["f32"] * ref
    # the same elements as columns (a 4096 x 4096 view summed over both dims in turn)
    m, lm = operand(x.reshape(4096, 4096), x)
    cols = m.reduce("sum", lm, (0,), False, "f32").array.astype(np.float64)
    ref_cols = x.reshape(4096, 4096).sum(axis=0, dtype=np.float64)
    assert np.max(np.abs(cols - ref_cols) / ref_cols) <= 8 * EPS["f32"]
    t = Layout((4096, 4096), (1, 4096), 0)  # transposed: the whole sum through strided rows
    got_t = float(m.reduce("sum", t, (0, 1), False, "f32").array)
    assert abs(got_t - ref) <= 4 * EPS["f32"] * ref


@pytest.mark.parametrize("n", [1, 63, 64, 65, 1023, 1024, 1025, 4097, 70000])
@pytest.mark.parametrize("nthreads", [1, 2])
def test_sizes_around_chunks_and_threads(n, nthreads):
    old = threads.get_num_threads()
    threads.set_num_threads(nthreads)
    try:
        rng = np.random.default_rng(n)
        x = rng.standard_normal((3, n)).astype(np.float32)
        x[1, n // 2] = np.nan
        x[2, n - 1] = 100.0  # the arg-extremum at the end
        for dims, axis in (((1,), 1), ((0,), 0), ((0, 1), None)):
            s, layout = operand(x, x)
            got = s.reduce("sum", layout, dims, False, "f32").array
            with np.errstate(invalid="ignore"):
                ref = x.astype(np.float64).sum(axis=axis)
                scale = np.abs(x.astype(np.float64)).sum(axis=axis)
            assert_close_to_f64(
                np.atleast_1d(got), np.atleast_1d(ref), np.atleast_1d(np.nan_to_num(scale)), "f32"
            )
            got_max = s.reduce("max", layout, dims, False, "f32").array
            np.testing.assert_array_equal(np.atleast_1d(got_max), np.atleast_1d(x.max(axis=axis)))
        for d in (0, 1):
            got = s.reduce("argmax", layout, (d,), False, "i64").array
            np.testing.assert_array_equal(got, np.argmax(x, axis=d))
    finally:
        threads.set_num_threads(old)


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("n", [15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 257, 300])
def test_row_extrema_around_the_lane_blocks(dtype, n):
    """Row max / min whose extremum or NaN sits in the lane blocks, their last lane or the tail
    (8 vectors of lanes: 128 f32 / 64 f64 with AVX-512, 64 / 32 with AVX2, 32 / 16 with SSE),
    as numpy finds them (WORKBENCH_NATIVE_VARIANT picks the variant under test)."""
    rng = np.random.default_rng(n)
    for at in sorted({0, n // 2, n - n % 16 - 1, n - n % 64 - 1, n - 1} - {-1}):
        x = rng.standard_normal((3, n)).astype(DTYPES[dtype])
        x[0, at], x[1, at], x[2, at] = 50.0, -50.0, np.nan
        s, layout = operand(x, x)
        for op, ref in (("max", x.max(axis=1)), ("min", x.min(axis=1))):
            got = s.reduce(op, layout, (1,), False, dtype).array
            np.testing.assert_array_equal(got, ref, err_msg=f"{op} at {at}")


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("n", [1, 7, 15, 16, 17, 47, 63, 64, 65, 79, 127, 128, 129, 1100])
def test_row_statistics_around_the_lane_blocks(dtype, n):
    """Rows whose sums end in the 4-vector blocks, the single vectors after them (16 f32 / 8
    f64 lanes) or the scalar tail, a large value in each part, read as one line per output:
    contiguous rows, and rows of a view with a gap between them (a row stride of n + 3)."""
    rng = np.random.default_rng(n)
    base = rng.standard_normal((5, 7, n + 3)).astype(DTYPES[dtype])
    for i, at in enumerate(sorted({0, n // 2, n - n % 16, n - n % 64, n - 1} & set(range(n)))):
        base.reshape(-1, n + 3)[i, at] = 40.0
    rows, gapped = np.ascontiguousarray(base[..., :n]), base[..., :n]
    for x, (s, layout) in ((rows, operand(rows, rows)), (gapped, operand(gapped, base))):
        v = x.astype(np.float64)
        for op, param in STATISTICS:
            if op in ("var", "std") and n == 1 and param == 1.0:
                continue  # 0 / 0
            ref = np.asarray(statistic_reference(op, v, (2,), False, param))
            got = result(statistic(s, op, layout, (2,), False, param), ref.shape)
            # (atol: a mean near 0 is a sum's cancellation, relative to sum |x| / n)
            np.testing.assert_allclose(got, ref, rtol=RTOL[dtype], atol=1e-3 * RTOL[dtype],
                                       err_msg=f"{op} {param}")  # fmt: skip
        got = result(s.reduce("sum", layout, (2,), False, dtype), (5, 7))
        assert_close_to_f64(got, v.sum(axis=2), np.abs(v).sum(axis=2), dtype)


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("n", [7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 100, 255, 256, 257])
@pytest.mark.parametrize("rows, nthreads", [(1, 1), (8, 1), (11, 1), (23, 2), (1027, 2)])
def test_short_lines_eight_at_a_time(dtype, n, rows, nthreads):
    """Many short contiguous rows, one per output (reduce_impl.h's short lines: eight rows'
    lanes meet at once, 8 f64 / 16 f32 lanes to a vector): row counts on either side of a group
    of eight, lengths around the vectors, the 4-vector blocks and WB_SHORT_LINE (256), a large
    value, a NaN and an infinity in rows of their own; on two threads past the threading
    threshold. Extrema must equal numpy's, sums and statistics float64's."""
    old = threads.get_num_threads()
    threads.set_num_threads(nthreads)
    try:
        rng = np.random.default_rng(n * 1000 + rows)
        x = rng.standard_normal((rows, n)).astype(DTYPES[dtype])
        x[rows // 2, n - 1] = 30.0  # in the last vector's freshly read lanes
        x[rows - 1, 0] = -30.0
        if rows >= 8:
            x[5, n // 3] = np.nan
            x[7, n // 2] = np.inf
        s, layout = operand(x, x)
        v = x.astype(np.float64)
        with np.errstate(invalid="ignore"):
            for op, ref in (("max", x.max(axis=1)), ("min", x.min(axis=1))):
                np.testing.assert_array_equal(s.reduce(op, layout, (1,), False, dtype).array, ref)
            got = result(s.reduce("sum", layout, (1,), False, dtype), (rows,))
            assert_close_to_f64(got, v.sum(axis=1), np.nan_to_num(np.abs(v).sum(axis=1)), dtype)
            finite = np.isfinite(v).all(axis=1)
            for op, param in (("var", 1.0), ("norm", 2.0), ("norm", 1.0), ("norm", np.inf)):
                ref = np.asarray(statistic_reference(op, v, (1,), False, param))
                got = result(statistic(s, op, layout, (1,), False, param), (rows,))
                np.testing.assert_allclose(got[finite], ref[finite], rtol=RTOL[dtype],
                                           err_msg=f"{op} {param}")  # fmt: skip
                np.testing.assert_array_equal(np.isnan(got), np.isnan(ref), err_msg=op)
    finally:
        threads.set_num_threads(old)


TORCH = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16}


@pytest.mark.parametrize("dtype", list(TORCH))
@pytest.mark.parametrize("dims", [(0,), (1,), (0, 2), (0, 1, 2)])
def test_tensor_reductions_match_torch(dtype, dims):
    """Through the public API, on a transposed view: values as PyTorch computes them."""
    rng = np.random.default_rng(1)
    base = rng.standard_normal((40, 33, 70)).astype(np.float32)
    t = torch.from_numpy(base).to(TORCH[dtype]).permute(2, 0, 1)
    x = wb.tensor(base).to_dtype(getattr(wb, dtype)).permute((2, 0, 1))
    rtol = {"f32": 1e-5, "f64": 1e-12, "f16": 2e-3, "bf16": 1.6e-2}[dtype]
    pairs = [
        (x.sum(dims), t.sum(dims)),
        (x.amax(dims), t.amax(dims)),
        (x.amin(dims, keepdim=True), t.amin(dims, keepdim=True)),
        (x.cumsum(dims[0]), t.cumsum(dims[0])),
    ]
    for ours, theirs in pairs:
        np.testing.assert_allclose(
            ours.to_dtype(wb.f64).numpy(), theirs.double().numpy(), rtol=rtol, atol=rtol
        )
    if len(dims) == 1:
        np.testing.assert_array_equal(x.argmax(dims[0]).numpy(), t.argmax(dims[0]).numpy())
        np.testing.assert_array_equal(x.argmin(dims[0]).numpy(), t.argmin(dims[0]).numpy())


def test_special_values_follow_the_maths():
    x = np.array([[1.0, np.inf, 2.0], [np.inf, -np.inf, 0.0], [np.nan, 1.0, np.inf],
                  [-np.inf, -np.inf, -np.inf]], np.float32)  # fmt: skip
    s, layout = operand(x, x)
    sums = s.reduce("sum", layout, (1,), False, "f32").array
    np.testing.assert_array_equal(sums, [np.inf, np.nan, np.nan, -np.inf])
    np.testing.assert_array_equal(s.reduce("max", layout, (1,), False, "f32").array,
                                  [np.inf, np.inf, np.nan, -np.inf])  # fmt: skip
    np.testing.assert_array_equal(s.reduce("argmin", layout, (1,), False, "i64").array,
                                  [0, 1, 0, 0])  # fmt: skip


def test_empty_reductions_and_bad_arguments():
    x = np.zeros((3, 0), np.float32)
    s, layout = operand(x, x)
    np.testing.assert_array_equal(s.reduce("sum", layout, (1,), False, "f32").array, [0, 0, 0])
    np.testing.assert_array_equal(s.reduce("prod", layout, (1,), False, "f32").array, [1, 1, 1])
    assert s.reduce("sum", layout, (0,), False, "f32").array.shape == (0,)
    z = np.zeros((2, 3, 0, 4), np.float32)  # an empty line among dims that would run split
    sz, lz = operand(z, z)
    np.testing.assert_array_equal(sz.reduce("sum", lz, (0, 2, 3), False, "f32").array, [0, 0, 0])
    code = red._NATIVE_REDUCE
    with pytest.raises(ValueError, match="cannot reduce an empty dim"):
        NATIVE.reduce(code["max"], x, 0, (3, 0), (0, 1), (1,), np.empty(3, np.float32), 0.0)
    y = np.zeros((3, 4), np.float32)
    with pytest.raises(ValueError, match="dim 2 is out of range"):
        NATIVE.reduce(code["sum"], y, 0, (3, 4), (4, 1), (2,), np.empty(3, np.float32), 0.0)
    with pytest.raises(ValueError, match="expected 3 elements, found 4"):
        NATIVE.reduce(code["sum"], y, 0, (3, 4), (4, 1), (1,), np.empty(4, np.float32), 0.0)
    with pytest.raises(TypeError, match="unsupported dtype"):
        NATIVE.reduce(code["sum"], y, 0, (3, 4), (4, 1), (1,), np.empty(3, np.float64), 0.0)
    with pytest.raises(ValueError, match="layout addresses elements"):
        NATIVE.cast(y, 5, (3, 4), (4, 1), np.empty((3, 4), np.float16))
    with pytest.raises(ValueError, match="at most one dim"):
        NATIVE.reduce(code["argmax"], y, 0, (3, 4), (4, 1), (0, 1), np.empty((), np.int64), 0.0)


@pytest.mark.parametrize("native", [True, False])
def test_integer_sums_stay_on_numpy(native):
    """ints and bools sum to i64 on either path (the native kernels take floats only)."""
    x = wb.tensor(np.arange(12, dtype=np.int32).reshape(3, 4))
    if native:
        assert x.sum(1).numpy().tolist() == [6, 22, 38]
    else:
        with numpy_path():
            assert x.sum(1).numpy().tolist() == [6, 22, 38]
    assert wb.tensor(np.ones(5, np.bool_)).sum().item() == 5


SPLIT_CASES = [  # (shape, dims): short contiguous lines, many per output (split, or in lanes)
    ((64, 16, 8, 8), (0, 2, 3)),  # a bias gradient: lines of 64, 64 per output
    ((64, 32, 4, 4), (0, 2, 3)),
    ((33, 5, 3, 3), (0, 2, 3)),  # 45 widened outputs: no whole vector
    ((16, 20, 4, 4), (0, 2, 3)),  # 320: five tiles of 4 vectors
    ((40, 7, 17), (0, 2)),  # 119: a tile, whole vectors and single outputs
    ((16, 64, 8, 8), (0, 2, 3)),  # n = 4 x lines: the bound
    ((15, 64, 8, 8), (0, 2, 3)),  # one line fewer: rows
    ((200, 3, 2, 5), (0, 3)),  # lines of 5 over two kept dims
    # lines in lanes (f32 and f64 lines of a vector or more, rows form): f32 lanes go into f64
    # before a lane sums more than 1024 / 64 elements
    ((7, 6, 28, 28), (0, 2, 3)),  # 784: into f64 after every line
    ((20, 9, 100), (0, 2)),  # 100: after every 10 lines
    ((3, 5, 33, 31), (0, 2, 3)),  # 1023: a tail of 15 f32 / 7 f64
    ((4, 3, 32, 32), (0, 2, 3)),  # 1024: the longest line in lanes
    ((4, 3, 1025), (0, 2)),  # 1025: per line again
]


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("nthreads", [1, 2])
@pytest.mark.parametrize(("shape", "dims"), SPLIT_CASES)
def test_rows_of_many_lines_per_output(shape, dims, nthreads, dtype):
    """Outputs of many lines each: split (short lines as columns over the widened outputs,
    then each output's line) or in lanes (f32/f64 lines of a vector or more, several lines
    into one set of lanes). Sums (their maps with vector tiles and without), extrema and
    products, on a contiguous tensor and on a view whose kept dim does not merge with its
    lines (every other channel)."""
    rng = np.random.default_rng(len(shape) * 100 + shape[0])
    wide = shape[:1] + (2 * shape[1],) + shape[2:]
    held = (rng.standard_normal(wide) + 0.25).astype(DTYPES[dtype])
    factors = np.exp(0.002 * rng.standard_normal(wide)).astype(DTYPES[dtype])  # products ~ 1
    old = threads.get_num_threads()
    threads.set_num_threads(nthreads)
    try:
        for channels in (slice(0, shape[1]), slice(None, None, 2)):
            view = held[:, channels]
            x, layout = operand(view, held)
            v = view.astype(np.float64)
            for op, param in STATISTICS:
                ref = np.asarray(statistic_reference(op, v, dims, False, param))
                got = result(statistic(x, op, layout, dims, False, param), ref.shape)
                np.testing.assert_allclose(got.astype(np.float64), ref, rtol=RTOL[dtype],
                                           atol=RTOL[dtype], err_msg=f"{op} {param}")  # fmt: skip
            ref = v.sum(axis=dims)
            got = result(x.reduce("sum", layout, dims, False, dtype), ref.shape)
            assert_close_to_f64(got, ref, np.abs(v).sum(axis=dims), dtype)
            for op in ("max", "min"):
                got = result(x.reduce(op, layout, dims, False, dtype), ref.shape)
                np.testing.assert_array_equal(got, getattr(view, op)(axis=dims))
            y, ly = operand(factors[:, channels], factors)
            ref = np.prod(factors[:, channels].astype(np.float64), axis=dims)
            got = result(y.reduce("prod", ly, dims, False, dtype), ref.shape)
            np.testing.assert_allclose(got.astype(np.float64), ref, rtol=RTOL[dtype])
    finally:
        threads.set_num_threads(old)
