"""int8 end to end and the dtype rules, against torch: the promotion table of every int/float
pair, casts to and from i8 (wrapping integers, out-of-range floats as torch's x86 casts),
ops on i8 (values, dtypes, overflow), conversions, interop, safetensors, and the exception
classes of bitwise ops on floats.

Run it on both CPU paths: ``pytest tests/compat/test_compat_dtypes.py`` (native kernels) and
``WORKBENCH_NATIVE=0 pytest tests/compat/test_compat_dtypes.py`` (numpy).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from op_check import check

import workbench as wb
from workbench.errors import DTypeNotImplemented, WorkbenchError

# Every dtype torch promotes (it refuses uint32 with any signed type: "Promotion for uint16,
# uint32, uint64 types is not supported"; tests/test_tensor.py checks workbench's u32 rules).
PROMOTED = (wb.bool, wb.u8, wb.i8, wb.i16, wb.i32, wb.i64, wb.f16, wb.bf16, wb.f32, wb.f64)
INT_AND_FLOAT = (wb.u8, wb.i8, wb.i16, wb.i32, wb.i64, wb.f16, wb.bf16, wb.f32, wb.f64)

rng = np.random.default_rng(0)
I8 = rng.integers(-128, 128, (3, 4)).astype(np.int8)
I8_POS = rng.integers(1, 8, (3, 4)).astype(np.int8)
SHIFTS = rng.integers(0, 9, (3, 4)).astype(np.int8)


def tdt(d: wb.DType) -> torch.dtype:
    return getattr(torch, d.torch_name)


def _lib(x):
    """The library a tensor belongs to (torch or workbench)."""
    return torch if isinstance(x, torch.Tensor) else wb


def as_f64(t) -> np.ndarray:
    return (t.float() if isinstance(t, torch.Tensor) and t.dtype == torch.bfloat16 else t) \
        .numpy().astype(np.float64)  # fmt: skip


# -- the dtype and its names -------------------------------------------------------------------
def test_int8_is_a_dtype_like_torch_int8():
    assert wb.int8 is wb.i8 and wb.dtype.dtype("int8") is wb.i8
    assert wb.dtype.dtype(torch.int8) is wb.i8 and wb.dtype.dtype(np.int8) is wb.i8
    assert (wb.i8.itemsize, wb.i8.is_signed, wb.i8.is_integer) == (1, True, True)
    assert wb.i8.numpy == np.dtype(np.int8) and wb.i8 in wb.dtype.ALL_DTYPES
    assert wb.dtype.dtype("short") is wb.i16 and wb.dtype.dtype(torch.short) is wb.i16


# -- promotion -------------------------------------------------------------------------------
@pytest.mark.parametrize("a", PROMOTED, ids=str)
def test_promotion_table_matches_torch(a):
    for b in PROMOTED:
        expected = torch.promote_types(tdt(a), tdt(b))
        assert wb.promote_types(a, b) is wb.dtype.dtype(expected), f"{a} with {b}"
        # and what an op on two tensors computes in
        out = wb.ones(2, dtype=a) + wb.ones(2, dtype=b)
        assert out.dtype is wb.dtype.dtype(
            (torch.ones(2, dtype=tdt(a)) + torch.ones(2, dtype=tdt(b))).dtype
        )


@pytest.mark.parametrize("scalar", [True, 3, -2, 2.5], ids=repr)
@pytest.mark.parametrize("a", PROMOTED, ids=str)
def test_scalar_promotion_matches_torch(a, scalar):
    w = wb.ones(2, dtype=a) * scalar
    t = torch.ones(2, dtype=tdt(a)) * scalar
    assert w.dtype is wb.dtype.dtype(t.dtype), f"{a} * {scalar!r}"


# -- casts -----------------------------------------------------------------------------------
INT_VALUES = [-300, -129, -128, -1, 0, 1, 5, 127, 128, 255, 256, 300, 70000, -70001]
# Out of i8's range, out of i32's (x86 gives INT32_MIN, whose low byte is 0), NaN, inf.
FLOAT_VALUES = [0.0, -0.0, 0.5, -0.75, 2.75, -1.5, 127.9, -128.9, 200.0, -200.0, 300.0,
                70000.5, -40000.0, 1e10, -1e10, 3e9, 5e9 + 7, 2.0**31, -(2.0**31),
                math.nan, math.inf, -math.inf]  # fmt: skip


@pytest.mark.parametrize("src", [wb.i16, wb.i32, wb.i64, wb.u8], ids=str)
def test_integers_to_i8_wrap_as_torch(src):
    values = [v for v in INT_VALUES if src.is_signed or v >= 0]
    if src is wb.i16:
        values = [v for v in values if -32768 <= v < 32768]
    if src is wb.u8:
        values = [v for v in values if v < 256]
    x, t = wb.tensor(values, dtype=src), torch.tensor(values, dtype=tdt(src))
    w, e = x.to(wb.i8), t.to(torch.int8)
    assert w.dtype is wb.i8
    np.testing.assert_array_equal(w.numpy(), e.numpy(), err_msg=f"{src} -> i8")


@pytest.mark.filterwarnings("ignore:overflow encountered in cast")  # 1e10 as f16 is inf
@pytest.mark.parametrize("src", [wb.f16, wb.bf16, wb.f32, wb.f64], ids=str)
@pytest.mark.parametrize("dst", [wb.i8, wb.i16, wb.i32], ids=str)
def test_floats_to_narrow_signed_integers_as_torch(src, dst):
    """Truncation toward zero; values outside i32 and NaN go through INT32_MIN (x86's cast,
    what torch and numpy compile to), then wrap: 300.0 -> 44 and 5e9 -> 0 as i8."""
    x, t = wb.tensor(FLOAT_VALUES, dtype=src), torch.tensor(FLOAT_VALUES, dtype=tdt(src))
    # a strided view too: the native cast reads it in place
    for w, e in ((x, t), (x[::2], t[::2])):
        with np.errstate(invalid="ignore"):
            np.testing.assert_array_equal(w.to(dst).numpy(), e.to(tdt(dst)).numpy(),
                                          err_msg=f"{src} -> {dst}")  # fmt: skip


@pytest.mark.parametrize("dst", PROMOTED + (wb.u32,), ids=str)
def test_i8_to_every_dtype_and_back_matches_torch(dst):
    values = list(range(-128, 128, 5)) + [127]
    x, t = wb.tensor(values, dtype=wb.i8), torch.tensor(values, dtype=torch.int8)
    w, e = x.to(dst), t.to(tdt(dst))
    assert w.dtype is dst
    np.testing.assert_array_equal(as_f64(w), as_f64(e), err_msg=f"i8 -> {dst}")
    np.testing.assert_array_equal(w.to(wb.i8).numpy(), e.to(torch.int8).numpy())


def test_conversion_methods():
    x = wb.tensor([1.9, -2.9, 300.0])
    assert x.char().dtype is wb.i8 and x.type(wb.int8).dtype is wb.i8
    np.testing.assert_array_equal(x.char().numpy(), torch.tensor([1.9, -2.9, 300.0]).char().numpy())
    check(lambda t: t.view(torch.int8 if isinstance(t, torch.Tensor) else wb.int8),
          [np.array([[1, -2], [300, 7]], np.int16)])  # fmt: skip
    check(lambda t: t.view(torch.uint8 if isinstance(t, torch.Tensor) else wb.uint8), [I8])


# -- ops on i8 -------------------------------------------------------------------------------
I8_OPS = {
    "abs": (lambda x: x.abs(), [I8]),
    "neg": (lambda x: -x, [I8]),
    "sign": (lambda x: x.sign(), [I8]),
    "relu": (lambda x: x.relu(), [I8]),
    "add": (lambda x, y: x + y, [I8, I8]),  # wraps
    "sub": (lambda x, y: x - y, [I8, I8]),
    "mul": (lambda x, y: x * y, [I8, I8]),
    "mul_scalar": (lambda x: x * 3, [I8]),
    "rsub_scalar": (lambda x: 100 - x, [I8]),
    "floor_divide": (lambda x, y: x // y, [I8, I8_POS]),
    "remainder": (lambda x, y: x % y, [I8, I8_POS]),
    "maximum": (lambda x, y: x.maximum(y), [I8, I8_POS]),
    "and": (lambda x, y: x & y, [I8, I8_POS]),
    "or": (lambda x, y: x | y, [I8, I8_POS]),
    "xor": (lambda x, y: 5 ^ x ^ y, [I8, I8_POS]),
    "invert": (lambda x: ~x, [I8]),
    "lshift": (lambda x, y: x << y, [I8, SHIFTS]),
    "rshift": (lambda x, y: x >> y, [I8, SHIFTS]),
    "eq": (lambda x, y: x == y, [I8, I8.T.copy().reshape(3, 4)]),
    "lt": (lambda x: x < 0, [I8]),
    "true_div": (lambda x, y: x / y, [I8, I8_POS]),
    "float_scalar": (lambda x: x * 0.5, [I8]),
    "with_u8": (lambda x, y: x + y, [I8, I8_POS.astype(np.uint8)]),
    "with_i16": (lambda x, y: x * y, [I8, I8_POS.astype(np.int16)]),
    "with_f16": (lambda x, y: x + y, [I8, I8_POS.astype(np.float16)]),
    "clamp": (lambda x: x.clamp(-50, 50), [I8]),
    "where": (lambda x, y: _lib(x).where(x > 0, x, y), [I8, I8_POS]),
    "sum": (lambda x: x.sum(1), [I8]),  # i64
    "sum_dtype": (lambda x: x.sum(1, dtype=x.dtype), [I8]),  # computed in i8: wraps
    "prod": (lambda x: x.prod(0), [I8_POS]),
    "cumsum": (lambda x: x.cumsum(1), [I8]),
    "amax": (lambda x: x.amax(0), [I8]),
    "amin": (lambda x: x.amin(1), [I8]),
    "argmax": (lambda x: x.argmax(1), [I8]),
    "max_dim": (lambda x: tuple(x.max(1)), [I8]),
    "sort": (lambda x: tuple(x.sort(1)), [I8]),
    "topk": (lambda x: tuple(x.topk(2)), [I8]),
    "any": (lambda x: x.any(1), [I8]),
    "getitem": (lambda x: x[1:, ::2], [I8]),
    "mask": (lambda x: x[x > 0], [I8]),
    "gather": (lambda x, i: x.gather(1, i), [I8, np.array([[0, 3], [1, 1], [2, 0]])]),
    "index_select": (lambda x, i: x.index_select(1, i), [I8, np.array([3, 0])]),
    "scatter_add": (
        lambda x, i, y: x.scatter_add(1, i, y),
        [I8, np.array([[0, 1, 0, 1]] * 3), I8_POS],
    ),  # fmt: skip
    "transpose": (lambda x: x.t().contiguous(), [I8]),
    "flip": (lambda x: x.flip(0), [I8]),
    "cat": (lambda x, y: _lib(x).cat([x, y]), [I8, I8_POS]),
    "matmul": (lambda x, y: x @ y.t(), [I8_POS, I8_POS]),
}


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("name", I8_OPS)
def test_i8_ops_match_torch(name, layout):
    fn, inputs = I8_OPS[name]
    layouts = [layout if i == 0 else "contiguous" for i in range(len(inputs))]
    check(fn, inputs, layouts=layouts)


def test_i8_overflow_wraps_as_torch():
    lo_hi = np.array([-128, 127, -1, 1], np.int8)
    for fn in (lambda x: -x, lambda x: x.abs(), lambda x: x + 1, lambda x: x * x,
               lambda x: x - 1, lambda x: x // -1, lambda x: x << 1):  # fmt: skip
        check(fn, [lo_hi], grad=False)


@pytest.mark.parametrize(
    "make",
    [
        lambda m: m.zeros((2, 3), dtype=m.int8),
        lambda m: m.ones(3, dtype=m.int8),
        lambda m: m.full((2,), -7, dtype=m.int8),
        lambda m: m.arange(-5, 5, 2, dtype=m.int8),
        lambda m: m.tensor([[1, -2], [127, -128]], dtype=m.int8),
        lambda m: m.eye(3, dtype=m.int8),
        lambda m: m.zeros_like(m.ones(2, dtype=m.int8)),
        lambda m: m.full_like(m.ones(2, dtype=m.int8), 3),
    ],
)
def test_i8_creation_matches_torch(make):
    w, t = make(wb), make(torch)
    assert w.dtype is wb.i8 and w.shape == tuple(t.shape)
    np.testing.assert_array_equal(w.numpy(), t.numpy())


def test_i8_random_ints_stay_in_range():
    x = wb.randint(-100, 100, (1000,), dtype=wb.int8)
    assert x.dtype is wb.i8 and -100 <= x.min().item() and x.max().item() < 100


def test_i8_interop_with_numpy_and_torch():
    a = np.array([-128, 0, 127], np.int8)
    assert wb.from_numpy(a).dtype is wb.i8 and wb.tensor(a).numpy().dtype == np.int8
    t = torch.tensor([-3, 4], dtype=torch.int8)
    assert wb.tensor(t).dtype is wb.i8 and wb.from_dlpack(t).dtype is wb.i8
    back = torch.from_dlpack(wb.tensor(a))
    assert back.dtype == torch.int8 and back.tolist() == [-128, 0, 127]


def test_i8_safetensors_round_trip_with_torch(tmp_path):
    safetensors_torch = pytest.importorskip("safetensors.torch")
    t = torch.tensor([[-128, 5], [127, -1]], dtype=torch.int8)
    safetensors_torch.save_file({"q": t}, str(tmp_path / "t.safetensors"))
    loaded = wb.io.load_safetensors(tmp_path / "t.safetensors")["q"]
    assert loaded.dtype is wb.i8
    np.testing.assert_array_equal(loaded.numpy(), t.numpy())
    wb.io.save_safetensors({"q": loaded * 2}, tmp_path / "w.safetensors")
    back = safetensors_torch.load_file(str(tmp_path / "w.safetensors"))["q"]
    assert back.dtype == torch.int8 and torch.equal(back, t * 2)


# -- errors: bitwise ops on floats -----------------------------------------------------------
FLOAT_BITWISE = {
    "and": lambda x, y: x & y,
    "or": lambda x, y: x | y,
    "xor": lambda x, y: x ^ y,
    "rand_scalar": lambda x, y: 3 & x,
    "int_and_float": lambda x, y: y.long() & x if hasattr(y, "long") else y & x,
    "lshift": lambda x, y: x << 1,
    "rshift": lambda x, y: x >> y,
    "int_shift_by_float": lambda x, y: (y * 0).long() << 2.0,
    "bitwise_and": lambda x, y: x.bitwise_and(y),
    "bitwise_not": lambda x, y: x.bitwise_not(),
    "invert": lambda x, y: ~x,
    "bool_shift_bool": lambda x, y: (x > 0) >> (y > 0),
}


def _raised(fn, *args) -> BaseException:
    try:
        fn(*args)
    except Exception as exc:  # noqa: BLE001  (the class is what is compared)
        return exc
    raise AssertionError("no exception raised")


@pytest.mark.parametrize("name", FLOAT_BITWISE)
def test_bitwise_ops_on_floats_raise_what_torch_raises(name):
    fn = FLOAT_BITWISE[name]
    a, b = np.array([1.5, 2.0], np.float32), np.array([1.0, 3.0], np.float32)
    expected = _raised(fn, torch.tensor(a), torch.tensor(b))
    got = _raised(fn, wb.tensor(a), wb.tensor(b))
    assert isinstance(got, WorkbenchError), repr(got)
    assert isinstance(got, type(expected)), f"torch raises {type(expected).__name__}, found {got!r}"


def test_float_bitwise_error_names_the_op_and_dtype():
    with pytest.raises(DTypeNotImplemented, match="bitwise_and: not implemented for f32"):
        wb.tensor([1.0]) & wb.tensor([2.0])
    # still a DTypeError (a TypeError) for code written against workbench
    assert issubclass(DTypeNotImplemented, wb.DTypeError | NotImplementedError)


def test_bool_shifted_by_int_is_i64_as_torch():
    check(lambda x: x << 2, [np.array([True, False])])
    check(lambda x, y: x << y, [np.array([True, True]), np.array([1, 3], np.int8)])


@pytest.mark.parametrize(
    "a, b", list(itertools.product([wb.i8, wb.i32, wb.i64], [wb.i8, wb.f64])), ids=str
)
def test_atan2_of_integers_is_float_as_torch(a, b):
    x = np.array([[1, -2, 3], [0, 5, -7]])
    y = np.array([[2, 2, -1], [3, 0, -4]])
    check(lambda u, v: u.atan2(v), [x.astype(a.numpy), y.astype(b.numpy)])
