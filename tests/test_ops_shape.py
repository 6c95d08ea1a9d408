"""Shape ops against PyTorch: views (reshape, transpose, narrow, expand...) and the ops that
move data (cat, stack, flip, roll, repeat...), forward and gradient, across dtypes and layouts.
Storage sharing of views is tested in test_tensor.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from devices import OP_DEVICE_PARAMS
from op_check import check

import workbench as wb

FLOATS = (wb.f32, wb.f64, wb.f16, wb.bf16)
LAYOUTS = ("contiguous", "transposed", "sliced")


def uniform(shape, seed=0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-2.0, 2.0, shape)


# name: (fn for both libraries (or a pair), input shapes)
SAME = {  # one callable works for both libraries
    "reshape": (lambda x: x.reshape((4, 6)), [(2, 3, 4)]),
    "reshape_infer": (lambda x: x.reshape((-1, 2)), [(2, 3, 4)]),
    "reshape_varargs": (lambda x: x.reshape(3, 8), [(2, 3, 4)]),
    "reshape_0d": (lambda x: x.reshape(()), [(1, 1)]),
    "reshape_empty": (lambda x: x.reshape((3, 0)), [(0, 3)]),
    "flatten": (lambda x: x.flatten(), [(2, 3, 4)]),
    "flatten_range": (lambda x: x.flatten(1, 2), [(2, 3, 4, 5)]),
    "flatten_0d": (lambda x: x.flatten(), [()]),
    "squeeze_all": (lambda x: x.squeeze(), [(1, 3, 1, 4)]),
    "squeeze_dim": (lambda x: x.squeeze(2), [(1, 3, 1, 4)]),
    "squeeze_dims": (lambda x: x.squeeze((0, 2)), [(1, 3, 1, 4)]),
    "squeeze_noop": (lambda x: x.squeeze(1), [(1, 3, 1, 4)]),
    "unsqueeze0": (lambda x: x.unsqueeze(0), [(3, 4)]),
    "unsqueeze_mid": (lambda x: x.unsqueeze(1), [(3, 4)]),
    "unsqueeze_neg": (lambda x: x.unsqueeze(-1), [(3, 4)]),
    "unsqueeze_0d": (lambda x: x.unsqueeze(0), [()]),
    "transpose": (lambda x: x.transpose(0, 2), [(2, 3, 4)]),
    "transpose_neg": (lambda x: x.transpose(-1, -2), [(2, 3, 4)]),
    "permute": (lambda x: x.permute(2, 0, 1), [(2, 3, 4)]),
    "permute_tuple": (lambda x: x.permute((1, 2, 0)), [(2, 3, 4)]),
    "t": (lambda x: x.t(), [(3, 4)]),
    "t_1d": (lambda x: x.t(), [(4,)]),
    "T_2d": (lambda x: x.T, [(3, 4)]),
    "mT": (lambda x: x.mT, [(2, 3, 4)]),
    "broadcast_to": (lambda x: x.broadcast_to((2, 3, 4)), [(3, 1)]),
    "expand": (lambda x: x.expand(2, 3, 4), [(1, 4)]),
    "expand_keep": (lambda x: x.expand(-1, 5), [(3, 1)]),
    "narrow": (lambda x: x.narrow(1, 1, 2), [(3, 4)]),
    "narrow_neg_start": (lambda x: x.narrow(0, -2, 2), [(3, 4)]),
    "narrow_empty": (lambda x: x.narrow(1, 2, 0), [(3, 4)]),
    "movedim": (lambda x: x.movedim(0, -1), [(2, 3, 4)]),
    "movedim_back": (lambda x: x.movedim(2, 0), [(2, 3, 4)]),
    "roll": (lambda x: x.roll(1, 0), [(3, 4)]),
    "roll_neg": (lambda x: x.roll(-3, 1), [(3, 4)]),
    "roll_multi": (lambda x: x.roll((1, 2), (0, 1)), [(3, 4)]),
    "roll_flat": (lambda x: x.roll(5), [(3, 4)]),
    "roll_big": (lambda x: x.roll(9, -1), [(3, 4)]),
    "repeat": (lambda x: x.repeat(2, 3), [(2, 3)]),
    "repeat_more_dims": (lambda x: x.repeat(2, 1, 2), [(2, 3)]),
    "repeat_ones": (lambda x: x.repeat(1, 1), [(2, 3)]),
    "contiguous": (lambda x: x.contiguous(), [(3, 4)]),
    "clone": (lambda x: x.clone(), [(3, 4)]),
    "split_int": (lambda x: x.split(2, 1), [(3, 5)]),
    "split_sections": (lambda x: x.split([1, 3, 1], 1), [(3, 5)]),
    "split_dim0": (lambda x: x.split(1), [(3, 5)]),
    "chunk": (lambda x: x.chunk(3, 1), [(3, 5)]),
    "chunk_even": (lambda x: x.chunk(2, 0), [(4, 5)]),
    "chunk_more_than_size": (lambda x: x.chunk(4, 0), [(3, 5)]),
}
PAIRS = {  # (workbench fn, torch fn, input shapes)
    # x.T reverses all dims (PyTorch deprecates .T beyond 2-d, so compare with permute)
    "T_3d": (lambda x: x.T, lambda x: x.permute(2, 1, 0), [(2, 3, 4)]),
    "flip0": (lambda x: x.flip(0), lambda x: x.flip(0), [(3, 4)]),
    "flip_dims": (lambda x: x.flip((0, 2)), lambda x: x.flip((0, 2)), [(2, 3, 4)]),
    "flip_all": (lambda x: x.flip((0, 1, 2)), lambda x: x.flip((0, 1, 2)), [(2, 3, 4)]),
    "flip_neg": (lambda x: x.flip(-1), lambda x: x.flip(-1), [(2, 3, 4)]),
    "tile": (lambda x: x.tile(2, 2), lambda x: torch.tile(x, (2, 2)), [(2, 3)]),
    "tile_fewer_reps": (lambda x: x.tile(3), lambda x: torch.tile(x, (3,)), [(2, 3)]),
    "cat0": (lambda a, b: wb.cat([a, b]), lambda a, b: torch.cat([a, b]), [(2, 3), (4, 3)]),
    "cat1": (
        lambda a, b: wb.cat([a, b], 1),
        lambda a, b: torch.cat([a, b], 1),
        [(2, 3), (2, 1)],
    ),
    "cat_neg": (
        lambda a, b, c: wb.cat([a, b, c], -1),
        lambda a, b, c: torch.cat([a, b, c], -1),
        [(2, 2, 1), (2, 2, 3), (2, 2, 2)],
    ),
    "cat_empty_part": (
        lambda a, b: wb.cat([a, b], 0),
        lambda a, b: torch.cat([a, b], 0),
        [(0, 3), (2, 3)],
    ),
    "cat_one": (lambda a: wb.cat([a], 0), lambda a: torch.cat([a], 0), [(2, 3)]),
    "stack0": (
        lambda a, b: wb.stack([a, b]),
        lambda a, b: torch.stack([a, b]),
        [(2, 3), (2, 3)],
    ),
    "stack_last": (
        lambda a, b, c: wb.stack([a, b, c], -1),
        lambda a, b, c: torch.stack([a, b, c], -1),
        [(2, 3)] * 3,
    ),
    "stack_mid": (
        lambda a, b: wb.stack([a, b], 1),
        lambda a, b: torch.stack([a, b], 1),
        [(2, 3), (2, 3)],
    ),
    "stack_0d": (lambda a, b: wb.stack([a, b]), lambda a, b: torch.stack([a, b]), [(), ()]),
    "squeeze_dim_of_0d": (lambda x: x.squeeze(0), lambda x: x.squeeze(0), [()]),
}
CASES = {name: (fn, fn, shapes) for name, (fn, shapes) in SAME.items()} | PAIRS


def _inputs(shapes):
    return [uniform(s, seed=i) for i, s in enumerate(shapes)]


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_shape_ops(name, device):
    fn, torch_fn, shapes = CASES[name]
    check(fn, _inputs(shapes), torch_fn=torch_fn, device=device)


@pytest.mark.parametrize("layout", ["transposed", "sliced"])
@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_shape_ops_on_strided_inputs(name, layout, device):
    fn, torch_fn, shapes = CASES[name]
    check(fn, _inputs(shapes), torch_fn=torch_fn, layouts=[layout] * len(shapes), device=device)


@pytest.mark.parametrize("dtype", FLOATS[1:], ids=str)
@pytest.mark.parametrize(
    "name",
    [
        "reshape",
        "transpose",
        "expand",
        "narrow",
        "flip_dims",
        "roll_multi",
        "repeat",
        "tile",
        "cat1",
        "stack_mid",
        "split_sections",
        "clone",
    ],
)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_shape_ops_dtypes(name, dtype, device):
    fn, torch_fn, shapes = CASES[name]
    check(fn, _inputs(shapes), dtype=dtype, torch_fn=torch_fn, device=device)


@pytest.mark.parametrize(
    "np_dtype", [np.int64, np.int32, np.int8, np.uint8, np.bool_], ids=lambda d: d.__name__
)
@pytest.mark.parametrize(
    "name",
    [
        "reshape",
        "permute",
        "expand",
        "narrow",
        "flip_dims",
        "roll",
        "repeat",
        "cat1",
        "stack0",
        "split_int",
        "contiguous",
    ],
)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_shape_ops_integers(name, np_dtype, device):
    fn, torch_fn, shapes = CASES[name]
    rng = np.random.default_rng(0)
    inputs = [
        rng.integers(0, 2 if np_dtype is np.bool_ else 100, s).astype(np_dtype) for s in shapes
    ]
    check(fn, inputs, torch_fn=torch_fn, layouts=["transposed"] * len(inputs), device=device)


@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_view_of_contiguous_input(device):
    check(lambda x: x.view(6, 4), [uniform((2, 3, 4))], device=device)
    check(lambda x: x.view(-1), [uniform((2, 3, 4))], device=device)
    # A transposed tensor can still be viewed when the new shape only splits/merges dims that
    # are contiguous among themselves (PyTorch's rule).
    check(lambda x: x.transpose(0, 1).view(3, 2, 2, 2), [uniform((2, 3, 4))], device=device)
    check(lambda x: x.narrow(0, 1, 2).view(8, 3), [uniform((3, 4, 3))], device=device)
    check(lambda x: x.narrow(2, 1, 2).view(12, 2), [uniform((3, 4, 3))], device=device)


def test_reshape_copies_only_when_it_must():
    x = wb.tensor(uniform((2, 3, 4)))
    assert x.reshape(6, 4).shares_storage(x)
    assert x.transpose(1, 2).reshape(2, 2, 2, 3).shares_storage(x)
    copied = x.transpose(0, 2).reshape(24)
    assert not copied.shares_storage(x)
    np.testing.assert_array_equal(copied.numpy(), x.numpy().transpose(2, 1, 0).reshape(24))


@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_cat_and_stack_promote_dtypes(device):
    a = np.arange(6, dtype=np.int64).reshape(2, 3)
    b = uniform((2, 3))
    out = wb.cat([wb.tensor(a, device=device), wb.tensor(b, dtype=wb.f32, device=device)])
    assert out.dtype is wb.f32
    check(
        lambda x, y: wb.cat([x, y], 1),
        [a, b],
        torch_fn=lambda x, y: torch.cat([x, y], 1),
        device=device,
    )
    i32 = wb.tensor([1, 2], dtype=wb.i32, device=device)
    u8 = wb.tensor([3, 4], dtype=wb.u8, device=device)
    assert wb.stack([i32, u8]).dtype is wb.i32


@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_cat_gradient_through_repeated_input(device):
    check(
        lambda a: wb.cat([a, a * 2.0, a], 0),
        [uniform((2, 3))],
        torch_fn=lambda a: torch.cat([a, a * 2.0, a], 0),
        device=device,
    )


def test_split_and_chunk_return_views():
    x = wb.tensor(uniform((4, 6)))
    for part in (*x.split(2, 1), *x.chunk(2, 0)):
        assert part.shares_storage(x)


@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_split_pieces_sum_their_gradients(device):
    """Using only some pieces leaves zeros in the other positions of the input gradient."""
    check(
        lambda x: x.split([2, 1, 2], 1)[0] * x.split([2, 1, 2], 1)[2],
        [uniform((3, 5))],
        torch_fn=lambda x: x.split([2, 1, 2], 1)[0] * x.split([2, 1, 2], 1)[2],
        device=device,
    )


@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_flip_and_roll_of_empty_and_size_one(device):
    check(lambda x: x.flip(0), [uniform((0, 3))], device=device)
    check(lambda x: x.flip((0, 1)), [uniform((1, 3))], device=device)
    check(lambda x: x.roll(2, 0), [uniform((0, 3))], device=device)
    check(lambda x: x.roll(1, 1), [uniform((3, 1))], device=device)


@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_transpose_of_1d_and_identical_dims_is_identity(device):
    check(lambda x: x.transpose(0, 0), [uniform((3, 4))], device=device)
    x = wb.tensor(uniform((3,)), device=device)
    assert x.transpose(0, -1) is x


@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_broadcast_gradient_sums_over_expanded_dims(device):
    check(
        lambda x: x.expand(4, 2, 3) * 1.5,
        [uniform((2, 1))],
        torch_fn=lambda x: x.expand(4, 2, 3) * 1.5,
        device=device,
    )
    check(lambda x: x.broadcast_to((3, 2, 3)), [uniform((1, 3))], device=device)
