"""Errors are part of the API: each names the op, the operands (shape, dtype, device) and what
was expected, and belongs to the ``WorkbenchError`` hierarchy."""

from __future__ import annotations

import re
import sys

import numpy as np
import pytest

import workbench as wb
from workbench.backends.base import BackendStorage
from workbench.errors import ArgumentError, DimensionError
from workbench.layout import Layout
from workbench.tensor import make

X = wb.zeros(2, 3)
E = re.escape

SHAPE_ERRORS = {
    "add": (lambda: X + wb.zeros(4, 3), E("add: shapes (2, 3) and (4, 3) cannot be broadcast")),
    "mul_3d": (lambda: wb.zeros(2, 3, 4) * wb.zeros(5, 1), E("mul: shapes (2, 3, 4) and (5, 1)")),
    "lt": (lambda: X < wb.zeros(3, 3), E("lt: shapes (2, 3) and (3, 3) cannot be broadcast")),
    "where": (lambda: wb.where(wb.zeros(4, dtype=wb.bool), X, 0.0), "where: shapes"),
    "matmul": (
        lambda: X @ wb.zeros(4, 2),
        E("matmul: inner dims differ: Tensor[2, 3] f32 cpu @ Tensor[4, 2] f32 cpu"),
    ),
    "matmul_batch": (
        lambda: wb.zeros(2, 2, 3) @ wb.zeros(3, 3, 1),
        E(
            "matmul: batch dims (2,) and (3,) cannot be broadcast: Tensor[2, 2, 3] f32 cpu @ "
            "Tensor[3, 3, 1] f32 cpu"
        ),
    ),
    "matmul_0d": (lambda: wb.tensor(1.0) @ X, "matmul: both operands need at least 1 dim"),
    "reshape": (
        lambda: X.reshape(4),
        E("reshape: cannot reshape Tensor[2, 3] f32 cpu (6 elements) to (4,)"),
    ),
    "reshape_two_minus_one": (lambda: X.reshape(-1, -1), "reshape: only one dim can be -1"),
    "view": (lambda: X.t().view(6), E("view: Tensor[3, 2] f32 cpu with strides (1, 3)")),
    "transpose": (
        lambda: X.transpose(0, 2),
        "transpose: dim 2 is out of range for a tensor with 2 dims",
    ),
    "permute": (lambda: X.permute(0, 0), E("permute: (0, 0) is not a permutation")),
    "permute_rank": (lambda: X.permute(0), "permute: Tensor.2, 3. f32 cpu has 2 dims"),
    "narrow": (lambda: X.narrow(1, 2, 2), "narrow: start 2 . length 2 is out of range"),
    "squeeze": (lambda: X.squeeze(3), "squeeze: dim 3 is out of range"),
    "unsqueeze": (lambda: X.unsqueeze(4), "unsqueeze: dim 4 is out of range"),
    "broadcast_to": (
        lambda: X.broadcast_to((4, 3)),
        E("broadcast_to: cannot broadcast Tensor[2, 3] f32 cpu to (4, 3)"),
    ),
    "expand_fewer": (lambda: X.expand(3), "broadcast_to: cannot broadcast .* to fewer dims"),
    "flatten": (lambda: X.flatten(1, 0), "flatten: start_dim 1 comes after end_dim 0"),
    "cat": (
        lambda: wb.cat([X, wb.zeros(3, 3)], 1),
        E("cat: shapes must match except in dim 1: (2, 3), (3, 3)"),
    ),
    "cat_empty": (lambda: wb.cat([]), "cat: expected a non-empty list"),
    "stack": (lambda: wb.stack([X, wb.zeros(3, 2)]), "stack: all tensors need one shape"),
    "split": (lambda: X.split([1, 1], 1), E("split: sections [1, 1] do not add up")),
    "chunk": (lambda: X.chunk(0), "chunk: the number of chunks must be positive"),
    "roll": (lambda: X.roll((1, 2), (0,)), "roll: 2 shifts for 1 dims"),
    "repeat": (lambda: X.repeat(2), "repeat: 1 repeats for Tensor.2, 3. f32 cpu"),
    "sum_dim": (lambda: X.sum(5), "sum: dim 5 is out of range for a tensor with 2 dims"),
    "sum_repeated": (lambda: X.sum((0, 0)), E("sum: repeated dims in (0, 0)")),
    "max_empty": (
        lambda: wb.zeros(0, 3).max(0),
        E("max: cannot reduce over dim 0 of size 0 (Tensor[0, 3] f32 cpu)"),
    ),
    "argmin_empty": (lambda: wb.zeros(0, 3).argmin(0), "argmin: cannot reduce over dim 0"),
    "argmax_dim": (lambda: X.argmax(3), "argmax: dim 3 is out of range"),
    "cumsum": (lambda: X.cumsum(2), "cumsum: dim 2 is out of range"),
    "topk": (lambda: X.topk(4), "topk: k=4 is out of range for dim 1 of size 3"),
    "inplace": (
        lambda: wb.zeros(2, 3).add_(wb.zeros(2, 1, 3)),
        E("add_: a result of shape (2, 2, 3) does not fit into Tensor[2, 3] f32 cpu"),
    ),
}


@pytest.mark.parametrize("name", SHAPE_ERRORS)
def test_shape_errors_name_the_op_and_operands(name):
    fn, pattern = SHAPE_ERRORS[name]
    with pytest.raises(wb.ShapeError, match=pattern):
        fn()


DTYPE_ERRORS = {
    "str_operand": (lambda: X + "a", "add: Tensor.2, 3. f32 cpu with str operand"),
    "str_left": (lambda: "a" * X, "mul: Tensor.2, 3. f32 cpu with str operand"),
    "list_operand": (lambda: X - [1, 2], "sub: .* with list operand"),
    "str_compare": (lambda: X == "a", "eq: Tensor.2, 3. f32 cpu with str operand"),
    "no_tensor": (lambda: wb.add(1, 2), "add: expected at least one tensor, found 1 and 2"),
    "matmul_list": (lambda: wb.matmul(X, [[1.0]]), "matmul: expected tensors, found list"),
    "where_condition": (lambda: wb.where(True, X, X), "where: condition must be a tensor"),
    "unknown_dtype": (lambda: X.to_dtype("f8"), "unknown dtype 'f8'"),
    "from_numpy": (lambda: wb.from_numpy(np.array(["a"])), "from_numpy: numpy dtype <U1"),
    "tensor_of_strings": (lambda: wb.tensor(["a", "b"]), "cannot make a tensor from list"),
}


@pytest.mark.parametrize("name", DTYPE_ERRORS)
def test_dtype_errors_name_the_op_and_operands(name):
    fn, pattern = DTYPE_ERRORS[name]
    with pytest.raises(wb.DTypeError, match=pattern):
        fn()


def test_requires_grad_on_integers_is_an_autograd_error():
    with pytest.raises(wb.AutogradError, match="only floating point tensors can require grad"):
        wb.tensor([1, 2]).requires_grad_()
    with pytest.raises(wb.AutogradError, match="a Var must be floating point, found wb.i64"):
        wb.Var([1, 2])


# -- devices -----------------------------------------------------------------------------------
def _cuda_missing() -> bool:
    return not wb.is_available("cuda")


@pytest.mark.skipif(not _cuda_missing(), reason="a CUDA device is present")
@pytest.mark.parametrize(
    "use",
    [
        lambda: wb.Device.cuda(0).backend,
        lambda: wb.zeros(2, device="cuda"),
        lambda: wb.tensor([1.0], device="cuda:0"),
        lambda: X.to("cuda"),
        lambda: X.cuda(),
        lambda: wb.Device("cuda:1").synchronize(),
        lambda: wb.ones(2, device=wb.Device.cuda(0)),
    ],
    ids=["backend", "zeros", "tensor", "to", "cuda", "synchronize", "ones"],
)
def test_cuda_use_without_a_gpu_raises_device_unavailable_with_the_reason(use):
    with pytest.raises(wb.DeviceUnavailable, match=r"device cuda:\d is not available: .+"):
        use()


@pytest.mark.skipif(wb.is_available("metal"), reason="a Metal device is present")
def test_metal_use_raises_device_unavailable():
    with pytest.raises(wb.DeviceUnavailable, match="device metal:0 is not available: .+"):
        wb.zeros(2, device="metal")


def test_a_missing_or_incomplete_backend_is_a_clear_device_unavailable(monkeypatch):
    """``workbench.backends.cuda`` may be absent (or an empty folder, a namespace package):
    the ImportError becomes DeviceUnavailable naming the backend."""
    device_module = sys.modules["workbench.device"]  # wb.device is the function

    def missing(kind):
        raise ImportError(f"No module named 'workbench.backends.{kind}'")

    monkeypatch.setattr(device_module, "_load_backend", missing)
    fresh = device_module.Device.__new__(device_module.Device, "metal", 7)
    with pytest.raises(wb.DeviceUnavailable, match="the metal backend cannot be imported"):
        _ = fresh.backend
    assert not wb.is_available("metal")


def test_unknown_devices_are_rejected():
    with pytest.raises(wb.WorkbenchError, match="unknown device 'tpu'; expected one of cpu"):
        X.to("tpu")
    with pytest.raises(wb.WorkbenchError, match="bad device index in 'cuda:x'"):
        wb.Device("cuda:x")
    with pytest.raises(wb.WorkbenchError, match="expected a device like"):
        wb.Device(3)


def _on_fake_gpu(t: wb.Tensor) -> wb.Tensor:
    """A stand-in for a tensor on cuda:0 (no GPU here): CPU memory, a CUDA device label. Ops
    check devices before they touch memory, so the mismatch is caught all the same."""
    return make(t._storage, t._layout, t.dtype, wb.Device.cuda(0))


DEVICE_MISMATCHES = {
    "add": lambda g: X + g,
    "lt": lambda g: X < g,
    "matmul": lambda g: X @ g.t(),
    "cat": lambda g: wb.cat([X, g]),
    "add_": lambda g: wb.zeros(2, 3).add_(g),
}


@pytest.mark.parametrize("name", DEVICE_MISMATCHES)
def test_device_mismatch_names_the_op_and_both_devices(name):
    fake = _on_fake_gpu(wb.ones(2, 3))
    with pytest.raises(
        wb.DeviceMismatch, match=f"{name.rstrip('_')}.*cpu.*cuda:0|{name}.*cuda:0.*cpu"
    ):
        DEVICE_MISMATCHES[name](fake)


def test_unsupported_op_on_a_device_names_the_op_and_device():
    class ToyStorage(BackendStorage):
        device_kind = "toy"

    with pytest.raises(wb.UnsupportedOnDevice, match="op conv2d is not implemented on toy"):
        _ = ToyStorage().conv2d
    with pytest.raises(AttributeError):
        _ = ToyStorage().not_an_op


def test_error_hierarchy():
    for cls in (
        wb.ShapeError,
        wb.DTypeError,
        wb.DeviceMismatch,
        wb.AutogradError,
        wb.IndexingError,
        wb.DeviceUnavailable,
        wb.UnsupportedOnDevice,
        wb.OutOfMemory,
    ):
        assert issubclass(cls, wb.WorkbenchError)
    # each also derives from the matching builtin, so generic handlers keep working
    assert issubclass(wb.ShapeError, ValueError) and issubclass(wb.DTypeError, TypeError)
    assert issubclass(wb.IndexingError, IndexError) and issubclass(wb.OutOfMemory, MemoryError)
    assert issubclass(wb.UnsupportedOnDevice, NotImplementedError)
    assert issubclass(wb.AutogradError, RuntimeError)
    assert issubclass(wb.WorkbenchError, RuntimeError)  # what torch raises for most misuse


# What torch raises for the same mistake (run on both): each workbench error must also be an
# instance of torch's class, so ``except IndexError`` / ``except RuntimeError`` written for
# PyTorch catches it.
LIKE_TORCH = {
    "broadcast": lambda m: m.zeros(2, 3) + m.zeros(4, 3),
    "matmul_inner": lambda m: m.zeros(2, 3) @ m.zeros(4, 2),
    "reshape": lambda m: m.zeros(2, 3).reshape(4),
    "view_strided": lambda m: m.zeros(2, 3).t().view(6),
    "transpose_dim": lambda m: m.zeros(2, 3).transpose(0, 2),
    "sum_dim": lambda m: m.zeros(2, 3).sum(5),
    "squeeze_dim": lambda m: m.zeros(2, 3).squeeze(3),
    "unsqueeze_dim": lambda m: m.zeros(2, 3).unsqueeze(4),
    "softmax_dim": lambda m: m.softmax(m.zeros(2, 3), 4),
    "cat_shapes": lambda m: m.cat([m.zeros(2, 3), m.zeros(3, 3)], 1),
    "stack_shapes": lambda m: m.stack([m.zeros(2, 3), m.zeros(3, 2)]),
    "getitem_range": lambda m: m.zeros(2, 3)[5],
    "gather_range": lambda m: m.zeros(2, 3).gather(1, m.tensor([[7]])),
    "index_select_range": lambda m: m.zeros(2, 3).index_select(0, m.tensor([4])),
    "cross_entropy_target": lambda m: m.nn.functional.cross_entropy(
        m.zeros(4, 5), m.tensor([0, 1, 7, 2])
    ),
    "str_operand": lambda m: m.zeros(2) + "a",
    "float_dim": lambda m: m.zeros(2, 3).sum(1.5),
    "len_0d": lambda m: len(m.tensor(1.0)),
    "requires_grad_int": lambda m: m.tensor([1, 2]).requires_grad_(),
    "backward_non_scalar": lambda m: (m.tensor([1.0, 2.0], requires_grad=True) * 2).backward(),
    "int_division_by_zero": lambda m: m.tensor([1]) // m.tensor([0]),
    "item_of_many": lambda m: m.zeros(2).item(),
    "truth_of_many": lambda m: bool(m.zeros(2)),
    "topk_k": lambda m: m.zeros(2, 3).topk(4),
    "amax_of_empty": lambda m: m.zeros(0, 3).amax(0),
    "permute": lambda m: m.zeros(2, 3).permute(0, 0),
    "narrow": lambda m: m.zeros(2, 3).narrow(1, 2, 2),
    "expand": lambda m: m.zeros(2, 3).expand(4, 3),
    "negative_size": lambda m: m.zeros(-1, 3),
    "masked_fill_float_mask": lambda m: m.zeros(2, 3).masked_fill(m.ones(2, 3), 0.0),
    "conv_channels": lambda m: m.nn.functional.conv2d(m.zeros(1, 3, 5, 5), m.zeros(2, 4, 3, 3)),
    "div_rounding_mode": lambda m: m.div(m.ones(2), 2, rounding_mode="round"),
    "setitem_shape": lambda m: m.zeros(2, 3).__setitem__(0, m.ones(4)),
    "linear_shapes": lambda m: m.nn.functional.linear(m.zeros(2, 3), m.zeros(4, 5)),
}


def _raised(fn, module) -> BaseException:
    try:
        fn(module)
    except Exception as exc:  # noqa: BLE001 (the class is what is compared)
        return exc
    raise AssertionError(f"{module.__name__} raised nothing")


@pytest.mark.parametrize("name", LIKE_TORCH)
def test_errors_are_instances_of_the_class_torch_raises(name):
    torch = pytest.importorskip("torch")
    expected = type(_raised(LIKE_TORCH[name], torch))
    got = _raised(LIKE_TORCH[name], wb)
    assert isinstance(got, wb.WorkbenchError), f"{type(got).__name__}: {got}"
    assert isinstance(got, expected), f"torch raises {expected.__name__}, workbench {got!r}"


def test_dim_errors_are_index_errors_and_shape_errors():
    with pytest.raises(DimensionError) as e:
        X.sum(2)
    assert isinstance(e.value, IndexError) and isinstance(e.value, wb.ShapeError)
    with pytest.raises(ArgumentError, match="got dim=1 and axis=0; give one of them"):
        X.sum(1, axis=0)


def test_layout_errors_are_shape_errors():
    with pytest.raises(wb.ShapeError, match=E("cannot broadcast shape (2,) to (3,)")):
        Layout.contiguous((2,)).broadcast_to((3,))


# -- misuse that used to give silent results or foreign exceptions (issue 15) -----------------
I = wb.tensor([7, -7])


def _torch_raises(fn) -> bool:
    torch = pytest.importorskip("torch")
    try:
        fn(torch)
    except (RuntimeError, TypeError, ValueError, IndexError):
        return True
    return False


INTEGER_DIVISION = {
    "floor_div": (lambda: wb.floor_div(I, wb.tensor([0, 0])),
                  lambda t: t.floor_divide(t.tensor([7, -7]), t.tensor([0, 0]))),
    "floor_div_scalar": (lambda: I // 0, lambda t: t.tensor([7, -7]) // 0),
    "remainder": (lambda: wb.remainder(I, wb.tensor([1, 0])),
                  lambda t: t.remainder(t.tensor([7, -7]), t.tensor([1, 0]))),
    "remainder_scalar": (lambda: I % 0, lambda t: t.tensor([7, -7]) % 0),
    "rfloordiv": (lambda: 5 // wb.tensor([1, 0]), lambda t: 5 // t.tensor([1, 0])),
}  # fmt: skip


@pytest.mark.parametrize("name", INTEGER_DIVISION)
def test_integer_division_by_zero_raises_like_torch(name):
    ours, reference = INTEGER_DIVISION[name]
    assert _torch_raises(reference)
    with pytest.raises(wb.DivisionByZero, match="integer division by zero") as e:
        ours()
    assert isinstance(e.value, ZeroDivisionError) and isinstance(e.value, wb.WorkbenchError)


def test_float_division_by_zero_still_follows_ieee():
    out = wb.floor_div(wb.tensor([7.0, -7.0, 0.0]), wb.tensor([0.0, 0.0, 0.0])).numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = np.floor_divide(np.array([7.0, -7.0, 0.0]), 0.0)
    np.testing.assert_array_equal(out, expected.astype(np.float32))
    assert wb.floor_div(I, wb.tensor([2, -2])).tolist() == [3, 3]  # numpy: 7 // 2, -7 // -2


MISUSE = {
    "zeros_float_size": (lambda: wb.zeros((2, 3.5)), wb.ShapeError,
                         E("zeros: sizes must be integers, found (2, 3.5)"),
                         lambda t: t.zeros((2, 3.5))),
    "zeros_negative": (lambda: wb.zeros(-1, 3), wb.ShapeError,
                       E("zeros: negative size in shape (-1, 3)"), lambda t: t.zeros(-1, 3)),
    "zeros_overflow": (lambda: wb.zeros(2**62, 2**62), wb.ShapeError,
                       "zeros: shape .* more than 2\\*\\*63-1", None),
    "to_dtype_none": (lambda: X.to_dtype(None), wb.DTypeError,
                      E("to_dtype: cannot convert Tensor[2, 3] f32 cpu: expected a dtype, "
                        "found None"), None),
    "to_dtype_unknown": (lambda: X.to_dtype("f7"), wb.DTypeError,
                         E("to_dtype: cannot convert Tensor[2, 3] f32 cpu: unknown dtype 'f7'"),
                         None),
    "masked_fill_float_mask": (lambda: X.masked_fill(wb.ones(2, 3), 0.0), wb.DTypeError,
                               E("masked_fill: the mask must be a bool tensor, found "
                                 "Tensor[2, 3] f32 cpu"),
                               lambda t: t.zeros(2, 3).masked_fill(t.ones(2, 3), 0.0)),
    "arange_zero_step": (lambda: wb.arange(0, 10, 0), wb.ShapeError,
                         E("arange: step must be non-zero"), lambda t: t.arange(0, 10, 0)),
    "ragged_tensor": (lambda: wb.tensor([[1, 2], [3]]), wb.ShapeError,
                      E("tensor(): nested sequences of different lengths"),
                      lambda t: t.tensor([[1, 2], [3]])),
    "randint_empty_range": (lambda: wb.randint(5, 1, (3,)), wb.WorkbenchError,
                            E("randint: low must be less than high, found [5, 1)"),
                            lambda t: t.randint(5, 1, (3,))),
    "linspace_negative": (lambda: wb.linspace(0, 1, -1), wb.ShapeError,
                          E("linspace: negative size in shape (-1,)"),
                          lambda t: t.linspace(0, 1, -1)),
    "sum_float_dim": (lambda: X.sum(1.5), ArgumentError,
                      E("sum: dim must be an int, a sequence of ints or None, found 1.5"),
                      lambda t: t.zeros(2, 3).sum(1.5)),
    "argmax_float_dim": (lambda: X.argmax(0.5), ArgumentError, "argmax: dim must be an int",
                         lambda t: t.zeros(2, 3).argmax(0.5)),
    "cross_entropy_target": (
        lambda: wb.nn.functional.cross_entropy(wb.zeros(4, 5), wb.tensor([0, 1, 7, 2])),
        wb.IndexingError,
        E("cross_entropy: target class indices must be in [0, 5) or ignore_index=-100, found "
          "values in [0, 7] (input (4, 5) f32, target (4,) i64)"),
        lambda t: t.nn.functional.cross_entropy(t.zeros(4, 5), t.tensor([0, 1, 7, 2])),
    ),
    "nll_negative_target": (
        lambda: wb.nn.functional.nll_loss(wb.zeros(2, 3), wb.tensor([-1, 0])),
        wb.IndexingError, E("nll_loss: target class indices must be in [0, 3)"),
        lambda t: t.nn.functional.nll_loss(t.zeros(2, 3), t.tensor([-1, 0])),
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", MISUSE)
def test_misuse_raises_a_workbench_error_naming_the_op(name):
    fn, cls, pattern, reference = MISUSE[name]
    if reference is not None:
        assert _torch_raises(reference)  # torch refuses it too
    with pytest.raises(cls, match=pattern):
        fn()


def test_cpu_out_of_memory_names_the_size_asked_for():
    with pytest.raises(wb.OutOfMemory, match=E("allocating 4000000000000 bytes")) as e:
        wb.zeros(10**12)
    assert "shape (1000000000000,) f32" in str(e.value)
    with pytest.raises(wb.OutOfMemory, match="allocating 8000000000000 bytes"):
        wb.empty(10**12, dtype="f64")


def test_valid_shapes_and_ranges_still_work():
    assert wb.zeros(np.int64(2), 3).shape == (2, 3)  # numpy ints are sizes
    assert wb.zeros(np.int64(5)).shape == (5,) and wb.zeros(np.array([2, 3])).shape == (2, 3)
    assert wb.linspace(0, 1, 0).shape == (0,)
    assert wb.randint(0, 1, 4).tolist() == [0, 0, 0, 0]
    assert wb.arange(3, 0, -1).tolist() == [3, 2, 1]
    assert X.masked_fill(wb.zeros(3, dtype=wb.bool), 1.0).tolist() == X.tolist()
