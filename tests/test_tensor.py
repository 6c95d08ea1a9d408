"""The Tensor itself: creation, dtypes and promotion (against PyTorch), devices, views and
storage sharing, host interop (numpy, ``__array__``, DLPack with numpy and PyTorch),
``item``/``tolist`` and the repr."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import workbench as wb

ALL = (wb.bool, wb.u8, wb.u32, wb.i8, wb.i16, wb.i32, wb.i64, wb.f16, wb.bf16, wb.f32, wb.f64)


def tdt(dtype: wb.DType) -> torch.dtype:
    return getattr(torch, dtype.torch_name)


def as_f64(t) -> np.ndarray:
    """Values of a workbench or torch tensor as f64 numpy (bf16 included)."""
    if isinstance(t, torch.Tensor):
        return t.detach().to(torch.float64).numpy()
    return t.numpy().astype(np.float64)


# -- creation ----------------------------------------------------------------------------------
def test_tensor_from_python_data_uses_torch_default_dtypes():
    cases = [1.5, 3, True, [1.0, 2.0], [[1, 2], [3, 4]], [True, False], [], [[1.5], [2]]]
    for data in cases:
        w, t = wb.tensor(data), torch.tensor(data)
        assert w.dtype.torch_name == str(t.dtype).removeprefix("torch."), data
        assert w.shape == tuple(t.shape)
        assert w.tolist() == t.tolist()


def test_tensor_from_numpy_keeps_its_dtype_and_copies():
    for np_dtype in (np.float64, np.float32, np.float16, np.int64, np.int32, np.uint8, np.bool_):
        a = np.ones((2, 3), dtype=np_dtype)
        w = wb.tensor(a)
        assert w.dtype is wb.dtype.from_numpy_dtype(np.dtype(np_dtype))
        assert not np.shares_memory(w.numpy(), a)
    assert wb.tensor(np.float32(2.5)).shape == ()
    assert wb.tensor(np.array(2.5)).shape == ()


def test_tensor_with_dtype_device_and_requires_grad():
    x = wb.tensor([1, 2], dtype=wb.f16, device="cpu", requires_grad=True)
    assert x.dtype is wb.f16 and x.device == "cpu" and x.requires_grad
    assert wb.tensor([1.7, -1.7], dtype="i32").tolist() == [1, -1]
    assert wb.tensor([1.0], dtype="float64").dtype is wb.f64
    assert wb.tensor([1.0], dtype=np.float16).dtype is wb.f16
    assert wb.tensor([1.0], dtype=torch.bfloat16).dtype is wb.bf16


def test_tensor_of_a_tensor_is_a_detached_copy():
    x = wb.tensor([1.0, 2.0], requires_grad=True)
    y = wb.tensor(x)
    assert not y.shares_storage(x) and not y.requires_grad
    assert wb.tensor(x, dtype=wb.f64).dtype is wb.f64


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_constant_constructors(dtype):
    for fn, value in ((wb.zeros, 0), (wb.ones, 1)):
        for args in (((2, 3),), (2, 3), ((),), ((0, 4),)):
            w = fn(*args, dtype=dtype)
            shape = args[0] if len(args) == 1 else args
            expected = np.full(shape, value).astype(dtype.numpy)
            assert w.shape == expected.shape and w.dtype is dtype
            np.testing.assert_array_equal(w.numpy(), expected)
    full = wb.full((2, 2), fill_value=3, dtype=dtype)
    assert full.dtype is dtype and full.numpy().astype(np.float64).tolist() == (
        np.full((2, 2), 3).astype(dtype.numpy).astype(np.float64).tolist()
    )
    assert wb.empty(3, 4, dtype=dtype).shape == (3, 4)


def test_full_infers_its_dtype_like_torch():
    for value in (2, 2.5, True):
        assert wb.full((2,), fill_value=value).dtype.torch_name == str(
            torch.full((2,), value).dtype
        ).removeprefix("torch.")


def test_like_constructors():
    x = wb.tensor(np.ones((2, 3), dtype=np.float16))
    for fn in (wb.zeros_like, wb.ones_like, wb.empty_like, wb.rand_like, wb.randn_like):
        out = fn(x)
        assert out.shape == (2, 3) and out.dtype is wb.f16
    assert wb.zeros_like(x, dtype=wb.i32).dtype is wb.i32
    assert wb.full_like(x, 7.0).tolist() == [[7.0] * 3] * 2
    r = wb.randint_like(x, 0, 5)
    assert r.dtype is wb.f16 and r.shape == (2, 3)


@pytest.mark.parametrize(
    "args",
    [(5,), (2, 7), (1, 2, 0.25), (0.5, 3.0), (-3, 3, 2), (0, 1, 0.1), (10, 0, -3), (3, 3)],
    ids=str,
)
def test_arange_matches_torch(args):
    w, t = wb.arange(*args), torch.arange(*args)
    assert w.dtype.torch_name == str(t.dtype).removeprefix("torch.")
    np.testing.assert_allclose(w.numpy(), t.numpy(), rtol=1e-6)


def test_arange_linspace_eye_with_dtypes():
    np.testing.assert_allclose(wb.linspace(0, 1, 5).numpy(), torch.linspace(0, 1, 5).numpy())
    assert wb.linspace(0, 1, 5, dtype=wb.f64).dtype is wb.f64
    assert wb.arange(4, dtype=wb.f32).tolist() == [0.0, 1.0, 2.0, 3.0]
    np.testing.assert_array_equal(wb.eye(3).numpy(), torch.eye(3).numpy())
    np.testing.assert_array_equal(wb.eye(2, 3, dtype=wb.i64).numpy(), torch.eye(2, 3).long())


def test_random_constructors_are_seeded_and_in_range():
    wb.manual_seed(3)
    a = wb.randn(1000)
    wb.manual_seed(3)
    assert wb.randn(1000).tolist() == a.tolist()
    assert abs(a.mean().item()) < 0.2 and abs(a.std().item() - 1.0) < 0.1
    u = wb.rand(1000, dtype=wb.f64)
    assert u.dtype is wb.f64 and 0.0 <= u.min().item() and u.max().item() < 1.0
    r = wb.randint(3, 7, (500,))
    assert r.dtype is wb.i64 and r.min().item() >= 3 and r.max().item() <= 6
    assert wb.randint(4, size=(2, 2)).max().item() < 4
    g1, g2 = wb.Generator(5), wb.Generator(5)
    assert wb.rand(4, generator=g1).tolist() == wb.rand(4, generator=g2).tolist()
    assert wb.randn((2, 3), dtype=wb.bf16).dtype is wb.bf16
    assert wb.randn(()).shape == ()


def test_negative_sizes_are_rejected():
    with pytest.raises(wb.WorkbenchError, match="negative size"):
        wb.zeros(2, -1)


# -- dtypes and promotion ----------------------------------------------------------------------
def test_dtype_lookup_by_any_name():
    assert wb.dtype.dtype("f32") is wb.f32 is wb.float32
    assert wb.dtype.dtype("bfloat16") is wb.bf16 is wb.bfloat16
    assert wb.dtype.dtype(np.dtype(np.int16)) is wb.i16
    assert wb.dtype.dtype(torch.uint8) is wb.u8
    assert wb.bool is wb.bool_
    with pytest.raises(wb.DTypeError, match="unknown dtype 'f8'"):
        wb.dtype.dtype("f8")
    assert [d.itemsize for d in ALL] == [1, 1, 4, 1, 2, 4, 8, 2, 2, 4, 8]
    assert repr(wb.f32) == "wb.f32"


# PyTorch has only limited support for uint32 ("promotion for uint16, uint32, uint64 types is not
# supported" with signed ints and bools). workbench promotes it like numpy: the narrowest type
# that holds both.
U32_RULES = {
    wb.bool: wb.u32,
    wb.u8: wb.u32,
    wb.i8: wb.i64,
    wb.i16: wb.i64,
    wb.i32: wb.i64,
    wb.i64: wb.i64,
}


@pytest.mark.parametrize("a", ALL, ids=str)
def test_promote_types_matches_torch(a):
    for b in ALL:
        got = wb.promote_types(a, b)
        assert got is wb.promote_types(b, a)
        try:
            expected = torch.promote_types(tdt(a), tdt(b))
        except RuntimeError:
            other = b if a is wb.u32 else a
            assert got is U32_RULES[other], (a, b)
            continue
        assert got.torch_name == str(expected).removeprefix("torch."), (a, b)


# Dtypes PyTorch's CPU arithmetic supports (it has no add/mul kernels for uint32).
ARITH = tuple(d for d in ALL if d is not wb.u32)


@pytest.mark.parametrize("a", ARITH, ids=str)
def test_binary_result_dtypes_and_values_match_torch(a):
    for b in ARITH:
        x_np = np.array([0, 1, 3]) if a is not wb.bool else np.array([True, False, True])
        y_np = np.array([1, 2, 1]) if b is not wb.bool else np.array([True, True, False])
        x, y = wb.tensor(x_np, dtype=a), wb.tensor(y_np, dtype=b)
        tx, ty = torch.tensor(x_np, dtype=tdt(a)), torch.tensor(y_np, dtype=tdt(b))
        for op in (
            lambda p, q: p + q,
            lambda p, q: p * q,
            lambda p, q: p / q,
            lambda p, q: p == q,
            lambda p, q: wb.maximum(p, q) if isinstance(p, wb.Tensor) else torch.maximum(p, q),
        ):
            w, t = op(x, y), op(tx, ty)
            assert w.dtype.torch_name == str(t.dtype).removeprefix("torch."), (a, b)
            np.testing.assert_allclose(as_f64(w), as_f64(t), rtol=1e-3)


@pytest.mark.parametrize("scalar", [True, 2, -1, 2.5], ids=repr)
@pytest.mark.parametrize("a", ARITH, ids=str)
def test_tensor_scalar_result_dtypes_match_torch(a, scalar):
    """A Python scalar changes the type only when its category is higher (int tensor * 0.5 is
    f32; f16 tensor * 2.0 stays f16; u8 tensor + 2 stays u8)."""
    if a is wb.bool and scalar is not True and isinstance(scalar, int) and scalar < 0:
        scalar = 2
    x_np = np.array([0, 1, 3]) if a is not wb.bool else np.array([True, False, True])
    x, tx = wb.tensor(x_np, dtype=a), torch.tensor(x_np, dtype=tdt(a))
    ops = [
        lambda p, s: p + s,
        lambda p, s: s + p,
        lambda p, s: p * s,
        lambda p, s: s * p,
        lambda p, s: p / s,
    ]
    if not (a is wb.u8 and scalar == -1):  # see test_comparison_with_out_of_range_scalar
        ops.append(lambda p, s: p > s)
    if a is not wb.bool and scalar is not True:  # PyTorch has no subtraction of bools
        ops.append(lambda p, s: s - p)
    for op in ops:
        w, t = op(x, scalar), op(tx, scalar)
        assert w.dtype.torch_name == str(t.dtype).removeprefix("torch."), (a, scalar)
        np.testing.assert_allclose(as_f64(w), as_f64(t), rtol=1e-3)


def test_comparison_with_out_of_range_scalar():
    """Documented difference: PyTorch casts the scalar to the tensor's type first (u8 > -1
    compares with 255: all false); workbench compares the values exactly (all true).
    Arithmetic wraps in both (u8 + -1 is u8 - 1 modulo 256)."""
    x = wb.tensor([0, 1, 3], dtype=wb.u8)
    assert (x > -1).tolist() == [True, True, True]
    assert (x + -1).tolist() == (torch.tensor([0, 1, 3], dtype=torch.uint8) + -1).tolist()
    assert (x + 300).tolist() == (torch.tensor([0, 1, 3], dtype=torch.uint8) + 300).tolist()


def test_zero_dim_tensors_promote_like_dimensioned_ones():
    """Documented difference: PyTorch lets a 0-d tensor promote like a scalar (f16 tensor *
    tensor(2.0) stays f16); workbench promotes every tensor by dtype (here: f32). Use a Python
    scalar to keep the tensor's dtype."""
    x = wb.ones(3, dtype=wb.f16)
    assert (x * wb.tensor(2.0)).dtype is wb.f32
    assert (x * 2.0).dtype is wb.f16


def _cast_values(src: wb.DType, dst: wb.DType) -> list:
    """Values with a well-defined conversion from src to dst in both libraries."""
    if src is wb.bool:
        return [True, False, True]
    values = [0, 1, 2, 5, 100]
    if src.is_signed and (dst.is_signed or dst is wb.bool):
        values += [-3, -100]
    if src.is_floating_point:
        values += [2.75, 0.5]
        if dst.is_signed or dst.is_floating_point:
            values += [-1.5, -0.25]
    if src in (wb.i16, wb.i32, wb.i64) and dst in (wb.u8, wb.i8, wb.i16) and dst is not src:
        values += [300, -200] if src is wb.i16 else [300, 70000]  # wraps modulo 2^bits in both
    return values


@pytest.mark.parametrize("src", ALL, ids=str)
def test_to_dtype_round_trips_match_torch(src):
    for dst in ALL:
        values = _cast_values(src, dst)
        x = wb.tensor(values, dtype=src)
        t = torch.tensor(values, dtype=tdt(src))
        w, e = x.to_dtype(dst), t.to(tdt(dst))
        assert w.dtype is dst
        np.testing.assert_array_equal(as_f64(w), as_f64(e), err_msg=f"{src} -> {dst}")
        back_w, back_e = w.to_dtype(src), e.to(tdt(src))
        np.testing.assert_array_equal(as_f64(back_w), as_f64(back_e), err_msg=f"{dst} -> {src}")


def test_to_dtype_of_a_strided_view_and_to():
    x = wb.tensor(np.arange(12.0).reshape(3, 4)).transpose(0, 1)
    np.testing.assert_array_equal(x.to_dtype(wb.i32).numpy(), np.arange(12).reshape(3, 4).T)
    assert x.to(wb.f16).dtype is wb.f16 and x.to("f16").dtype is wb.f16
    assert x.to("cpu") is x and x.to(dtype=x.dtype) is x and x.to_dtype(x.dtype) is x
    assert x.to("cpu", wb.i64).dtype is wb.i64
    assert x.cpu() is x


# -- devices -----------------------------------------------------------------------------------
def test_devices():
    cpu = wb.Device("cpu")
    assert cpu is wb.Device.cpu() is wb.Device(cpu) and cpu.is_cpu
    assert cpu == "cpu" and repr(cpu) == "cpu" and hash(cpu) == hash(wb.Device("cpu:0"))
    assert wb.Device("cuda:1") is wb.Device.cuda(1) and repr(wb.Device.cuda(1)) == "cuda:1"
    assert wb.Device("cuda") is wb.Device.cuda(0) != cpu
    assert wb.zeros(2).device is cpu
    cpu.synchronize()
    assert wb.device() is cpu or wb.is_available(wb.device().kind)
    if not wb.is_available("cuda"):
        assert wb.cuda_if_available() is cpu
    if not wb.is_available("metal"):
        assert wb.metal_if_available() is cpu


# -- views -------------------------------------------------------------------------------------
VIEWS = {
    "narrow": lambda t: t.narrow(1, 1, 2),
    "transpose": lambda t: t.transpose(0, 1),
    "permute": lambda t: t.permute(1, 0),
    "T": lambda t: t.T,
    "broadcast": lambda t: t.unsqueeze(0).expand(2, 3, 4),
    "squeeze": lambda t: t.unsqueeze(1).squeeze(1),
    "unsqueeze": lambda t: t.unsqueeze(-1),
    "reshape": lambda t: t.reshape(2, 6),
    "view": lambda t: t.view(12),
    "flatten": lambda t: t.flatten(),
    "split": lambda t: t.split(2, 1)[1],
    "detach": lambda t: t.detach(),
    "contiguous": lambda t: t.contiguous(),
    "chained": lambda t: t.transpose(0, 1).narrow(0, 1, 2).unsqueeze(0),
}


@pytest.mark.parametrize("name", VIEWS)
def test_views_share_storage_both_ways(name):
    base_np = np.arange(12, dtype=np.float32).reshape(3, 4)
    w, t = wb.tensor(base_np), torch.tensor(base_np)
    vw, vt = VIEWS[name](w), VIEWS[name](t)
    assert vw.shares_storage(w)
    np.testing.assert_array_equal(vw.numpy(), vt.numpy())
    # a write to the base shows in the view...
    w.add_(100.0)
    t.add_(100.0)
    np.testing.assert_array_equal(vw.numpy(), vt.numpy())
    # ...and a write to the view shows in the base (broadcast views are read-only in torch)
    if name != "broadcast":
        vw.mul_(-1.0)
        vt.mul_(-1.0)
        np.testing.assert_array_equal(w.numpy(), t.numpy())


def test_contiguous_copies_only_when_needed():
    x = wb.tensor(np.arange(12.0).reshape(3, 4))
    assert x.contiguous() is x and x.is_contiguous
    y = x.transpose(0, 1)
    assert not y.is_contiguous
    c = y.contiguous()
    assert c.is_contiguous and not c.shares_storage(x)
    np.testing.assert_array_equal(c.numpy(), x.numpy().T)
    assert x.narrow(0, 1, 2).is_contiguous  # a row slice is contiguous (with an offset)
    assert not x.narrow(1, 1, 2).is_contiguous
    assert x.unsqueeze(0).expand(2, 3, 4).contiguous().strides == (12, 4, 1)


def test_clone_is_a_copy():
    x = wb.tensor([1.0, 2.0])
    c = x.clone()
    assert not c.shares_storage(x)
    c.add_(1.0)
    assert x.tolist() == [1.0, 2.0]


def test_layout_metadata_like_torch():
    w, t = wb.zeros(2, 3, 4), torch.zeros(2, 3, 4)
    for f in (
        lambda x: x,
        lambda x: x.transpose(0, 2),
        lambda x: x.narrow(1, 1, 2),
        lambda x: x.unsqueeze(0).expand(5, 2, 3, 4),
    ):
        vw, vt = f(w), f(t)
        assert vw.strides == vt.stride() and vw.stride(0) == vt.stride(0)
        assert vw.offset == vt.storage_offset()
        assert vw.shape == tuple(vt.shape) and vw.size() == tuple(vt.size())
        assert vw.size(-1) == vt.size(-1) and vw.ndim == vt.ndim == vw.dim()
        assert vw.numel == vt.numel() and vw.is_contiguous == vt.is_contiguous()
    assert wb.zeros(2, 3, dtype=wb.f16).nbytes == 12


# -- host interop ------------------------------------------------------------------------------
def test_from_numpy_shares_memory():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = wb.from_numpy(a)
    assert t.dtype is wb.f32 and t.shape == (2, 3)
    a[0, 0] = 42.0
    assert t.tolist()[0][0] == 42.0
    t.mul_(2.0)
    assert a[0, 1] == 2.0


@pytest.mark.parametrize(
    "make",
    [
        lambda a: a.T,
        lambda a: a[:, ::2],
        lambda a: a[1:, 1:3],
        lambda a: np.broadcast_to(a[0], (5, 4)),
    ],
    ids=["T", "step", "slice", "broadcast"],
)
def test_from_numpy_of_strided_arrays_is_zero_copy(make):
    a = np.arange(12, dtype=np.float64).reshape(3, 4)
    v = make(a)
    t = wb.from_numpy(v)
    np.testing.assert_array_equal(t.numpy(), v)
    assert np.shares_memory(t.numpy(), a)
    np.testing.assert_array_equal((t * 2.0).numpy(), v * 2.0)


def test_from_numpy_copies_negative_strides_and_converts_narrow_types():
    a = np.arange(6, dtype=np.float32)
    t = wb.from_numpy(a[::-1])
    assert t.tolist() == a[::-1].tolist() and not np.shares_memory(t.numpy(), a)
    assert wb.from_numpy(np.array([1, -2], dtype=np.int8)).dtype is wb.i8
    assert wb.from_numpy(np.array([1], dtype=np.uint16)).dtype is wb.i32
    with pytest.raises(wb.DTypeError, match="complex"):
        wb.from_numpy(np.array([1j]))


def test_numpy_shares_memory_with_the_tensor():
    t = wb.zeros(2, 3)
    a = t.numpy()
    a[1, 2] = 5.0
    assert t.tolist()[1][2] == 5.0
    v = t.transpose(0, 1).numpy()  # a strided view, still no copy
    assert v.shape == (3, 2) and np.shares_memory(v, a)


def test_array_protocol():
    t = wb.tensor([[1.0, 2.0], [3.0, 4.0]])
    a = np.asarray(t)
    assert np.shares_memory(a, t.numpy())
    assert np.asarray(t, dtype=np.float64).dtype == np.float64
    assert not np.shares_memory(np.array(t, copy=True), t.numpy())
    assert float(np.asarray(t).sum()) == 10.0
    np.testing.assert_allclose(np.exp(t), np.exp(t.numpy()))  # ufuncs go through __array__
    out = np.ones(2) + t  # numpy defers to the tensor (higher __array_priority__)
    assert isinstance(out, wb.Tensor) and out.tolist() == [[2.0, 3.0], [4.0, 5.0]]


def test_dlpack_with_torch_both_ways_is_zero_copy():
    w = wb.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    t = torch.from_dlpack(w)
    t[0, 0] = 9.0
    assert w.tolist()[0][0] == 9.0
    tv = torch.from_dlpack(w.transpose(0, 1))
    assert tv.shape == (3, 2) and tv.stride() == (1, 3) and tv.data_ptr() == t.data_ptr()
    src = torch.arange(6, dtype=torch.float64).reshape(2, 3)
    back = wb.from_dlpack(src)
    src[1, 1] = -1.0
    assert back.dtype is wb.f64 and back.tolist()[1][1] == -1.0
    strided = wb.from_dlpack(src.t())
    assert strided.shape == (3, 2) and strided.strides == (1, 3)
    src[0, 1] = 7.0
    assert strided.tolist()[1][0] == 7.0
    for dtype in (torch.int64, torch.int32, torch.uint8, torch.bool, torch.float16):
        assert wb.from_dlpack(torch.zeros(2, dtype=dtype)).dtype.torch_name == str(dtype)[6:]
    assert w.__dlpack_device__() == (1, 0)


def test_dlpack_with_numpy_both_ways():
    w = wb.tensor([1.0, 2.0, 3.0])
    a = np.from_dlpack(w)
    assert np.shares_memory(a, w.numpy())
    src = np.arange(4, dtype=np.int32)
    back = wb.from_dlpack(src)
    src[0] = 10
    assert back.dtype is wb.i32 and back.tolist()[0] == 10


def test_dlpack_bf16_is_refused_clearly():
    """numpy (the CPU's DLPack path) has no bfloat16."""
    with pytest.raises(wb.WorkbenchError, match="bf16"):
        torch.from_dlpack(wb.ones(2, dtype=wb.bf16))
    with pytest.raises(wb.DTypeError, match="bfloat16"):
        wb.from_dlpack(torch.ones(2, dtype=torch.bfloat16))


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_item_and_tolist_match_torch(dtype):
    data = [[1, 0], [2, 1]] if dtype is not wb.bool else [[True, False], [False, True]]
    w, t = wb.tensor(data, dtype=dtype), torch.tensor(data, dtype=tdt(dtype))
    assert w.tolist() == t.tolist()
    assert type(w.tolist()[0][0]) is type(t.tolist()[0][0])
    one = w.narrow(0, 1, 1).narrow(1, 1, 1)
    assert one.item() == t[1, 1].item() and type(one.item()) is type(t[1, 1].item())
    assert wb.tensor(3, dtype=dtype).tolist() == torch.tensor(3, dtype=tdt(dtype)).tolist()


def test_item_needs_one_element_and_python_protocols():
    x = wb.tensor([1.5, 2.5])
    with pytest.raises(wb.WorkbenchError, match=r"item\(\) needs exactly one element"):
        x.item()
    with pytest.raises(wb.WorkbenchError, match="ambiguous"):
        bool(x)
    assert bool(wb.tensor([0.5])) and not bool(wb.tensor(0.0))
    assert len(x) == 2
    with pytest.raises(wb.WorkbenchError, match="len"):
        len(wb.tensor(1.0))
    assert f"{wb.tensor(math.pi):.3f}" == "3.142"
    assert {x: 1}[x] == 1 and hash(x) != hash(wb.tensor([1.5, 2.5]))  # hashed by identity


# -- repr --------------------------------------------------------------------------------------
def test_repr_small_tensors():
    assert repr(wb.tensor([[1.0, 2.0], [3.0, 4.0]])).splitlines()[0] == "Tensor[2, 2] f32 cpu"
    assert repr(wb.tensor(2.5)).splitlines() == ["Tensor[] f32 cpu", "2.5"]
    assert repr(wb.zeros(0, 3)).startswith("Tensor[0, 3] f32 cpu")
    assert "bf16" in repr(wb.ones(2, dtype=wb.bf16)) and "1." in repr(wb.ones(2, dtype=wb.bf16))
    assert "True" in repr(wb.tensor([True, False]))
    x = wb.tensor([1.0], requires_grad=True)
    assert repr(x).splitlines()[0].endswith("requires_grad")
    assert "grad_fn=mul" in repr(x * 2.0)
    assert str(x) == repr(x)


def test_repr_of_big_tensors_has_a_stats_line_that_shouts_problems():
    x = wb.tensor(np.linspace(-1.0, 1.0, 1000, dtype=np.float32).reshape(10, 100))
    header = repr(x).splitlines()[0]
    assert header.startswith("Tensor[10, 100] f32 cpu")
    assert "n=1000" in header and "3.9 KiB" in header and "x∈[-1, 1]" in header
    assert "μ=" in header and "σ=" in header and "..." in repr(x)
    bad = wb.tensor(np.r_[np.ones(200), [np.nan, np.inf, np.nan]].astype(np.float32))
    assert repr(bad).splitlines()[0].endswith("σ=0 2 NaNs, 1 Inf")
    one_each = wb.tensor(np.r_[np.ones(200), [np.nan, -np.inf]].astype(np.float32))
    assert repr(one_each).splitlines()[0].endswith(" 1 NaN, 1 Inf")
    only_infs = wb.tensor(np.r_[np.ones(200), [np.inf, -np.inf]].astype(np.float32))
    assert "NaN" not in repr(only_infs) and repr(only_infs).splitlines()[0].endswith(" 2 Infs")
    assert "true=150" in repr(wb.tensor(np.arange(300) % 2 == 0))
    assert "x∈[0, 299]" in repr(wb.arange(300))
