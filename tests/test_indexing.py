"""Indexing ops and ``x[key]`` / ``x[key] = value`` against PyTorch: values and gradients."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from devices import OP_DEVICE_PARAMS
from op_check import check

import workbench as wb

RNG = np.random.default_rng(0)
FLOATS = [wb.f32, wb.f64]
HALVES = [wb.f16, wb.bf16]


def randn(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def randint(high: int, *shape: int, dtype=np.int64) -> np.ndarray:
    return RNG.integers(0, high, shape).astype(dtype)


def unique_along(shape_x: tuple[int, ...], dim: int, shape_i: tuple[int, ...]) -> np.ndarray:
    """Indices into ``shape_x[dim]`` with no repeats along ``dim`` (scatter is then exact)."""
    full = list(shape_i)
    full[dim] = shape_x[dim]
    perm = np.argsort(RNG.random(full), axis=dim)
    return perm[tuple(slice(0, n) for n in shape_i)].astype(np.int64)


def long(t: torch.Tensor) -> torch.Tensor:
    return t.long()


# -- gather ------------------------------------------------------------------------------------
GATHER_CASES = [
    # (x shape, dim, index shape)
    ((5,), 0, (7,)),
    ((4, 6), 1, (4, 9)),
    ((4, 6), 0, (3, 6)),
    ((4, 6), -1, (2, 3)),  # index smaller than x outside dim
    ((3, 4, 5), 1, (3, 6, 5)),
    ((3, 1, 5), 1, (3, 4, 5)),  # size-1 dim, repeated indices
    ((3, 4, 5), 2, (3, 4, 0)),  # empty index
]


@pytest.mark.parametrize("dtype", FLOATS + HALVES, ids=str)
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced"])
@pytest.mark.parametrize("shape,dim,ishape", GATHER_CASES)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_gather(shape, dim, ishape, layout, dtype, device):
    index = randint(shape[dim], *ishape)
    check(
        lambda x, i: wb.gather(x, dim, i), [randn(*shape), index], dtype=dtype,
        torch_fn=lambda x, i: torch.gather(x, dim, i), layouts=[layout, layout], device=device,
    )  # fmt: skip


@pytest.mark.parametrize("index_dtype", [np.int32, np.uint32])
def test_gather_narrow_index_dtypes(index_dtype):
    index = randint(6, 4, 5, dtype=index_dtype)
    x = randn(4, 6)
    out = wb.gather(wb.tensor(x), 1, wb.tensor(index))
    np.testing.assert_array_equal(out.numpy(), np.take_along_axis(x, index.astype(np.int64), 1))


@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_gather_0d(device):
    check(lambda x, i: x.gather(0, i), [np.array(2.5, np.float32), np.array(0)], device=device)


# -- scatter / scatter_add ---------------------------------------------------------------------
SCATTER_CASES = [
    # (x shape, dim, index shape, src shape)
    ((6,), 0, (4,), (4,)),
    ((4, 6), 1, (4, 3), (4, 3)),
    ((5, 3), 0, (2, 3), (4, 3)),  # src bigger than index
    ((3, 4, 5), 1, (2, 4, 5), (2, 4, 5)),
    ((3, 4, 5), 2, (3, 4, 0), (3, 4, 0)),  # empty
    ((1, 4), 0, (1, 4), (1, 4)),
]


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced"])
@pytest.mark.parametrize("shape,dim,ishape,sshape", SCATTER_CASES)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_scatter(shape, dim, ishape, sshape, layout, dtype, device):
    index = unique_along(shape, dim, ishape)
    grad_inputs = None if sshape == ishape else [0]  # torch refuses a src grad of another shape
    check(
        lambda x, i, s: wb.scatter(x, dim, i, s), [randn(*shape), index, randn(*sshape)],
        dtype=dtype, torch_fn=lambda x, i, s: torch.scatter(x, dim, i, s),
        layouts=[layout] * 3, grad_inputs=grad_inputs, device=device,
    )  # fmt: skip


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_scatter_scalar(dtype, device):
    index = unique_along((4, 6), 1, (4, 2))
    check(
        lambda x, i: x.scatter(1, i, 2.5), [randn(4, 6), index], dtype=dtype,
        torch_fn=lambda x, i: x.scatter(1, i, 2.5), device=device,
    )  # fmt: skip


def test_scatter_src_bigger_grad_is_padded():
    x = wb.zeros(3, 4).requires_grad_()
    src = wb.tensor(randn(3, 5)).requires_grad_()
    index = wb.tensor(unique_along((3, 4), 1, (2, 3)))
    grads = wb.scatter(x, 1, index, src).sum().backward()
    expected = np.zeros((3, 5), np.float32)
    expected[:2, :3] = 1
    np.testing.assert_array_equal(grads[src].numpy(), expected)


@pytest.mark.parametrize("dtype", FLOATS + HALVES, ids=str)
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced"])
@pytest.mark.parametrize("shape,dim,ishape,sshape", SCATTER_CASES + [((3, 2), 1, (3, 7), (3, 7))])
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_scatter_add(shape, dim, ishape, sshape, layout, dtype, device):
    index = randint(shape[dim], *ishape)  # repeats accumulate
    grad_inputs = None if sshape == ishape else [0]
    check(
        lambda x, i, s: wb.scatter_add(x, dim, i, s), [randn(*shape), index, randn(*sshape)],
        dtype=dtype, torch_fn=lambda x, i, s: torch.scatter_add(x, dim, i, s),
        layouts=[layout] * 3, grad_inputs=grad_inputs, device=device,
    )  # fmt: skip


def test_scatter_add_ints():
    x = wb.zeros(5, dtype=wb.i64)
    out = x.scatter_add(0, wb.tensor([0, 0, 4, 0]), wb.tensor([1, 2, 3, 4]))
    assert out.tolist() == [7, 0, 0, 0, 3]


# -- index_select / index_add / embedding ------------------------------------------------------
SELECT_CASES = [
    # (x shape, dim, index)
    ((5,), 0, [4, 0, 0, 2]),
    ((4, 6), 0, [3, 1, 3]),
    ((4, 6), 1, [5, 0, 5, 5, 1]),
    ((3, 4, 5), -1, [4]),
    ((3, 4, 5), 1, []),
    ((1, 4), 0, [0, 0, 0]),
]


@pytest.mark.parametrize("dtype", FLOATS + HALVES, ids=str)
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced"])
@pytest.mark.parametrize("shape,dim,index", SELECT_CASES)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_index_select(shape, dim, index, layout, dtype, device):
    check(
        lambda x, i: wb.index_select(x, dim, i), [randn(*shape), np.array(index, np.int64)],
        dtype=dtype, torch_fn=lambda x, i: torch.index_select(x, dim, i),
        layouts=[layout, "sliced"], device=device,
    )  # fmt: skip


@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_index_select_i32_and_0d_index(device):
    check(
        lambda x, i: x.index_select(1, i), [randn(3, 4), np.array([3, 0], np.int32)],
        torch_fn=lambda x, i: x.index_select(1, i), device=device,
    )  # fmt: skip
    check(
        lambda x, i: x.index_select(0, i), [randn(3, 4), np.array(2)],
        torch_fn=lambda x, i: x.index_select(0, i), device=device,
    )  # fmt: skip


ADD_CASES = SELECT_CASES + [
    ((40, 64), 0, list(RNG.integers(0, 40, 300))),  # many rows: the sparse matmul path
    ((3, 40, 16), 1, list(RNG.integers(0, 40, 200))),  # ... with leading dims
    ((50, 3), 0, list(RNG.integers(0, 50, 5000))),  # short rows: the add.at path
]


@pytest.mark.parametrize("dtype", FLOATS + HALVES, ids=str)
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("alpha", [1, -0.5])
@pytest.mark.parametrize("shape,dim,index", ADD_CASES)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_index_add(shape, dim, index, alpha, layout, dtype, device):
    sshape = list(shape)
    sshape[dim] = len(index)

    def torch_fn(x, i, s):  # accumulate in f32 as workbench does (torch sums halves in halves)
        if dtype in FLOATS:
            return torch.index_add(x, dim, i, s, alpha=alpha)
        return torch.index_add(x.float(), dim, i, s.float(), alpha=alpha).to(x.dtype)

    check(
        lambda x, i, s: wb.index_add(x, dim, i, s, alpha=alpha),
        [randn(*shape), np.array(index, np.int64), randn(*sshape)], dtype=dtype,
        torch_fn=torch_fn, layouts=[layout, "contiguous", layout], device=device,
    )  # fmt: skip


@pytest.mark.parametrize("dtype", FLOATS + HALVES, ids=str)
@pytest.mark.parametrize(
    "vocab,dim,ids_shape", [(10, 4, (7,)), (10, 4, (2, 3)), (10, 4, ()), (10, 4, (0,)),
                            (50, 32, (8, 64)), (1, 3, (5,))],
)  # fmt: skip
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_embedding(vocab, dim, ids_shape, dtype, device):
    tol = {"atol": 0.1, "rtol": 0.05} if dtype in HALVES else {}
    check(
        lambda w, i: wb.embedding(w, i), [randn(vocab, dim), randint(vocab, *ids_shape)],
        dtype=dtype, torch_fn=lambda w, i: torch.nn.functional.embedding(i, w), **tol,
        device=device,
    )  # fmt: skip


@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_embedding_method_and_transposed_weight(device):
    check(
        lambda w, i: w.embedding(i), [randn(6, 5), randint(6, 3, 4)],
        torch_fn=lambda w, i: torch.nn.functional.embedding(i, w), layouts=["transposed", "sliced"],
        device=device,
    )  # fmt: skip


# -- nonzero / masked_select -------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(6,), (3, 4), (2, 3, 4), (0, 3), ()])
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_nonzero(shape, device):
    a = RNG.integers(0, 2, shape).astype(np.float32)
    out = wb.nonzero(wb.tensor(a, device=device))
    assert out.dtype is wb.i64 and out.device == wb.Device(device)
    np.testing.assert_array_equal(out.numpy(), torch.nonzero(torch.tensor(a)).numpy())


@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_masked_select_broadcasts(device):
    mask = RNG.random((1, 5)) > 0.5
    check(
        lambda x, m: wb.masked_select(x, m), [randn(3, 5), mask],
        torch_fn=lambda x, m: torch.masked_select(x, m), layouts=["transposed", "contiguous"],
        device=device,
    )  # fmt: skip


# -- x[key] ------------------------------------------------------------------------------------
I = np.array  # numpy index arrays turn into index tensors on both sides


def _keys(key, x_wb=None, x_t=None):
    """The same key for workbench and torch (numpy arrays -> tensors on ``x_wb``'s device;
    callables -> masks)."""
    if callable(key):
        return (key(x_wb) if x_wb is not None else None), (key(x_t) if x_t is not None else None)
    device = "cpu" if x_wb is None else x_wb.device
    items = key if isinstance(key, tuple) else (key,)
    wb_items, t_items = [], []
    for k in items:
        if isinstance(k, np.ndarray):
            wb_items.append(wb.tensor(k, device=device))
            t_items.append(torch.tensor(k))
        else:
            wb_items.append(k)
            t_items.append(k)
    if isinstance(key, tuple):
        return tuple(wb_items), tuple(t_items)
    return wb_items[0], t_items[0]


GETITEM_CASES = [
    # (shape, key)
    ((4, 5, 6), 1),
    ((4, 5, 6), -1),
    ((4, 5, 6), (-1, slice(None, None, 2))),
    ((4, 5, 6), (None, Ellipsis, slice(1, 3))),
    ((4, 5, 6), (slice(1, None), None, 2, slice(None, None, 3))),
    ((4, 5, 6), (Ellipsis, -2)),
    ((4, 5, 6), (slice(-100, 100), slice(3, 1))),  # clamped and empty slices
    ((4, 5, 6), Ellipsis),
    ((4, 5, 6), (1, 2, 3)),
    ((4, 5, 6), I([0, 3, 3, 1])),  # repeats accumulate in the gradient
    ((4, 5, 6), I([-1, 0])),
    ((4, 5, 6), I([[0, 1], [3, 3]])),
    ((4, 5, 6), (slice(None), I([4, 0, 4]))),
    ((4, 5, 6), (Ellipsis, I([5, 5, 0]))),
    ((4, 5, 6), (I([0, 2]), I([1, 4]))),
    ((4, 5, 6), (I([[0], [2]]), I([1, 4, 4]))),  # broadcast together
    ((4, 5, 6), (I([0, 2]), slice(1, 3), I([1, 5]))),  # not adjacent: result dims in front
    ((4, 5, 6), (slice(None), I([0, 2]), I([1, -1]))),  # adjacent: stay in place
    ((4, 5, 6), (1, slice(None), I([0, 2]))),  # ints are basic (torch)
    ((4, 5, 6), (I([3, 1]), 2, I([0, 5]))),
    ((4, 5, 6), (I([0, 2]), None, I([1, 4]))),
    ((4, 5, 6), I([], dtype=np.int64)),
    ((4, 5, 6), (1, I(2))),  # 0-d index tensor
    ((4, 5, 6), I([True, False, True, True])),  # mask over the first dim
    ((4, 5, 6), (slice(None), I([True, False, True, False, False]))),
    ((4, 5, 6), (Ellipsis, I([False] * 6))),
    ((4, 5, 6), lambda x: x > 0),  # full mask: 1-d selection
    ((4, 5, 6), lambda x: x[:, :, 0] > 0),  # mask over leading dims
    ((4, 5, 6), lambda x: (slice(1, 3), x[0] > 0)),  # mask over trailing dims
    ((4, 5, 6), lambda x: (slice(1, 3), x[0, :, 0] > 0, 2)),  # mask over a middle dim
    ((1, 3), (0, I([2, 2, 0]))),
    ((5,), slice(None, None, 3)),
]


def _getitem_fns(key):
    def wb_fn(x):
        return x[_keys(key, x_wb=x)[0]]

    def torch_fn(x):
        return x[_keys(key, x_t=x)[1]] if callable(key) else x[_keys(key)[1]]

    return wb_fn, torch_fn


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced"])
@pytest.mark.parametrize("shape,key", GETITEM_CASES, ids=lambda v: repr(v)[:40])
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_getitem(shape, key, layout, dtype, device):
    wb_fn, torch_fn = _getitem_fns(key)
    check(wb_fn, [randn(*shape)], dtype=dtype, torch_fn=torch_fn, layouts=[layout], device=device)


def _mask_and_index(x):
    mask = x[:, 0, 0] > 0
    if isinstance(x, wb.Tensor):
        idx = wb.tensor(np.array([1, 2]), device=x.device)
    else:
        idx = torch.tensor(np.array([1, 2]))
    return x[mask, :, idx]


@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_getitem_mask_with_index(device):
    x = randn(4, 5, 6)
    x[:, 0, 0] = [1, -1, 2, -3]
    check(_mask_and_index, [x], device=device)


def test_getitem_lists_and_numpy_arrays():
    x = wb.tensor(randn(4, 5))
    np.testing.assert_array_equal(x[[2, 0]].numpy(), x.numpy()[[2, 0]])
    np.testing.assert_array_equal(x[:, np.array([4, 1])].numpy(), x.numpy()[:, [4, 1]])
    np.testing.assert_array_equal(x[np.int64(3)].numpy(), x.numpy()[3])
    mask = np.array([True, False, True, False])
    np.testing.assert_array_equal(x[mask.tolist()].numpy(), x.numpy()[mask])
    assert x[True].shape == (1, 4, 5) and x[False].shape == (0, 4, 5)


@pytest.mark.parametrize("dtype", HALVES, ids=str)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_getitem_half(dtype, device):
    wb_fn, torch_fn = _getitem_fns((slice(None), I([3, 0, 3])))
    check(
        wb_fn, [randn(4, 5)], dtype=dtype, torch_fn=torch_fn, layouts=["transposed"], device=device
    )


@pytest.mark.parametrize("key", [1, (slice(1, 3), None), (Ellipsis, slice(None, None, 2)), -1])
def test_basic_getitem_is_a_view(key):
    x = wb.tensor(randn(4, 6))
    y = x[key]
    assert y.shares_storage(x)
    np.testing.assert_array_equal(y.numpy(), x.numpy()[key])


def test_advanced_getitem_copies():
    x = wb.tensor(randn(4, 6))
    assert not x[[0, 1]].shares_storage(x)
    assert not x[x > 0].shares_storage(x)


def test_iteration_uses_getitem():
    x = wb.tensor(randn(3, 2))
    rows = list(x)
    assert len(rows) == 3 and all(r.shares_storage(x) for r in rows)


def test_getitem_int_tensor_values():
    x = wb.arange(12).reshape(3, 4)
    assert x[1, [0, 3]].tolist() == [4, 7]
    assert x[x % 5 == 0].tolist() == [0, 5, 10]


# -- x[key] = value ----------------------------------------------------------------------------
SETITEM_CASES = [
    # (shape, key, value shape or None for a scalar)
    ((4, 5), 1, (5,)),
    ((4, 5), (slice(1, 3),), (2, 5)),
    ((4, 5), (slice(1, 3),), (5,)),  # broadcast value
    ((4, 5), (slice(None), slice(None, None, 2)), (4, 1)),
    ((4, 5), (-1, slice(1, 4)), None),
    ((4, 5), (None, 2), (1, 1, 5)),  # leading ones of the value are dropped
    ((4, 5), Ellipsis, (4, 5)),
    ((4, 5), I([0, 2]), (2, 5)),
    ((4, 5), I([-1, 0]), None),
    ((4, 5), (slice(None), I([4, 1])), (4, 2)),
    ((4, 5), (I([0, 3]), I([1, 4])), (2,)),
    ((4, 5), I([True, False, True, True]), (5,)),
    ((4, 5), lambda x: x > 0, None),
    ((3, 4, 5), (I([0, 2]), slice(1, 3), I([1, 4])), (2, 2)),
    ((3, 4, 5), (1, I([], dtype=np.int64)), (5,)),
    ((3, 4, 5), lambda x: x[:, :, 0] > 0, (1,)),  # one-element value: the where path
    ((4, 5), I([True, False, True, True]), None),
    ((3, 4, 5), (slice(1, None, 2), I([[0], [3]])), (2, 1, 5)),
    ((3, 4, 5), (None, slice(None), I([-1, 1])), (2, 5)),
    ((3, 4, 5), (1, slice(None), I([4, 0, 2])), None),
    ((3, 4, 5), (I([2, 0]), 1, I([0, 4])), (2,)),
    ((3, 4, 5), (I([2, 0]), None, I([0, 3])), (2, 1, 5)),
    ((3, 4, 5), lambda x: (slice(None), x[0] > 0), (3, 1)),
    ((3, 4, 5), lambda x: (x[:, :, 0] > 0, slice(1, 4)), (3,)),
]


def _setitem_fns(key, scalar: bool):
    def make(side: int):
        def fn(x, *v):
            y = x * 1
            k = _keys(key, *((y, None) if side == 0 else (None, y)))[side]
            y[k] = 1.5 if scalar else v[0]
            return y

        return fn

    return make(0), make(1)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("shape,key,vshape", SETITEM_CASES, ids=lambda v: repr(v)[:40])
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_setitem(shape, key, vshape, layout, dtype, device):
    wb_fn, torch_fn = _setitem_fns(key, vshape is None)
    inputs = [randn(*shape)] + ([] if vshape is None else [randn(*vshape)])
    check(
        wb_fn, inputs, dtype=dtype, torch_fn=torch_fn, layouts=[layout] * len(inputs), device=device
    )


def test_setitem_example_from_torch():
    x = wb.tensor(randn(4, 3)).requires_grad_()
    v = wb.tensor(randn(2, 3)).requires_grad_()
    y = x * 1
    y[1:3] = v
    grads = (y * y).sum().backward()
    tx = torch.tensor(x.numpy(), requires_grad=True)
    tv = torch.tensor(v.numpy(), requires_grad=True)
    ty = tx * 1
    ty[1:3] = tv
    (ty * ty).sum().backward()
    np.testing.assert_allclose(grads[x].numpy(), tx.grad.numpy())
    np.testing.assert_allclose(grads[v].numpy(), tv.grad.numpy())
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy())


def test_setitem_writes_in_place_without_grad():
    x = wb.zeros(3, 4)
    base_version = x._storage.version
    view = x[1]
    x[1, 1:3] = 7.0
    x[[0, 2], 0] = wb.tensor([1.0, 2.0])
    x[x > 6] = -1.0
    assert x._storage.version > base_version
    assert view.tolist() == [0, -1, -1, 0]
    assert x[:, 0].tolist() == [1, 0, 2]


def test_setitem_through_a_view_reaches_the_base():
    x = wb.zeros(3, 4)
    row = x[2]
    row[::2] = wb.tensor([5.0, 6.0])
    assert x[2].tolist() == [5, 0, 6, 0]


def test_setitem_advanced_through_a_transposed_view():
    x = wb.zeros(4, 5)
    xt = x.T
    xt[[0, 3]] = wb.tensor([[1.0], [2.0]])
    xt[xt > 1.5] = 3.0
    expected = np.zeros((4, 5), np.float32)
    expected[:, 0] = 1
    expected[:, 3] = 3
    np.testing.assert_array_equal(x.numpy(), expected)


def test_setitem_casts_and_accepts_lists():
    x = wb.zeros(2, 3, dtype=wb.i64)
    x[0] = wb.tensor([1.7, 2.2, -3.9])
    x[1] = [4, 5, 6]
    assert x.tolist() == [[1, 2, -3], [4, 5, 6]]


def test_setitem_under_no_grad_on_a_leaf():
    w = wb.Var(wb.zeros(3))
    with wb.no_grad():
        w[1] = 2.0
        w[[0]] = 1.0
    assert w.tolist() == [1, 2, 0]


def test_setitem_on_leaf_that_requires_grad_raises():
    w = wb.Var(wb.zeros(3))
    with pytest.raises(wb.AutogradError, match="leaf that requires grad"):
        w[0] = 1.0
    with pytest.raises(wb.AutogradError, match="leaf that requires grad"):
        w[[0, 1]] = 1.0


def test_setitem_on_view_of_graph_tensor_raises():
    x = wb.tensor(randn(3, 4)).requires_grad_()
    y = x * 2
    with pytest.raises(wb.AutogradError, match="view of a tensor in an autograd graph"):
        y[0][1] = 5.0


def test_saved_index_modified_in_place_raises():
    x = wb.tensor(randn(5)).requires_grad_()
    index = wb.tensor([0, 1])
    out = x.gather(0, index)
    index[0] = 3
    with pytest.raises(wb.AutogradError, match="modified in place"):
        out.sum().backward()


# -- users of indexing elsewhere ---------------------------------------------------------------
@pytest.mark.parametrize("dims", [0, 1, (0, 1)])
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_flip_gradient(dims, device):
    check(lambda x: x.flip(dims), [randn(3, 4)], torch_fn=lambda x: x.flip(dims),
          layouts=["transposed"], device=device)  # fmt: skip


@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_sort_gradient(device):
    check(
        lambda x: wb.sort(x, 1)[0],
        [randn(3, 5)],
        torch_fn=lambda x: torch.sort(x, 1)[0],
        device=device,
    )


# -- errors ------------------------------------------------------------------------------------
def test_out_of_range_errors_name_op_range_and_size():
    x = wb.tensor(randn(4, 5))
    with pytest.raises(wb.IndexingError, match=r"gather: .*\[0, 7\] for dim 1 of size 5"):
        x.gather(1, wb.tensor([[0, 7]]))
    with pytest.raises(wb.IndexingError, match=r"index_select: .*\[-1, 2\] for dim 0 of size 4"):
        x.index_select(0, wb.tensor([-1, 2]))
    with pytest.raises(wb.IndexingError, match=r"embedding: .*\[0, 9\].*size 4"):
        wb.embedding(x, wb.tensor([[0, 9]]))
    with pytest.raises(wb.IndexingError, match=r"scatter_add: .*\[5, 5\]"):
        x.scatter_add(1, wb.tensor([[5]]), wb.ones(1, 1))
    with pytest.raises(wb.IndexingError, match=r"scatter: .*\[-2, -2\]"):
        x.scatter(0, wb.tensor([[-2]]), 1.0)
    with pytest.raises(wb.IndexingError, match=r"index_add: .*\[4, 4\] for dim 0 of size 4"):
        x.index_add(0, wb.tensor([4]), wb.ones(1, 5))
    with pytest.raises(wb.IndexingError, match="index 4 is out of range for dim 0 of size 4"):
        x[4]
    with pytest.raises(wb.IndexingError, match="index -6 is out of range for dim 1 of size 5"):
        x[0, -6]
    with pytest.raises(wb.IndexingError, match=r"getitem: .*\[-5, 0\] for dim 0 of size 4"):
        x[[-5, 0]]
    with pytest.raises(wb.IndexingError, match=r"getitem: .*\[1, 5\] for dim 1 of size 5"):
        x[[0, 1], [1, 5]]


def test_index_dtype_errors():
    x = wb.tensor(randn(4, 5))
    with pytest.raises(wb.DTypeError, match="gather: index must be i64, i32, u32 or i16"):
        x.gather(0, wb.tensor([[0.0]]))
    with pytest.raises(wb.DTypeError, match="index_select: index must be"):
        x.index_select(0, wb.tensor([True]))
    with pytest.raises(wb.IndexingError, match="index tensors must be .* or bool, found .*f32"):
        x[wb.tensor([1.0])]
    with pytest.raises(wb.IndexingError, match="indices must be integers or bools"):
        x[[0.5, 1.0]]
    with pytest.raises(wb.IndexingError, match="cannot index with str"):
        x["a"]


def test_key_errors():
    x = wb.tensor(randn(4, 5))
    with pytest.raises(wb.IndexingError, match="too many indices .* indexes 3 dims"):
        x[0, 1, 2]
    with pytest.raises(wb.IndexingError, match="slice step must be positive, found -1"):
        x[::-1]
    with pytest.raises(wb.IndexingError, match="found 0"):
        x[:, ::0]
    with pytest.raises(wb.IndexingError, match="single ellipsis"):
        x[..., 0, ...]
    with pytest.raises(wb.IndexingError, match=r"mask of shape \(3,\) does not match"):
        x[wb.tensor([True, False, True])]
    with pytest.raises(wb.IndexingError, match="setitem: index 4 is out of range"):
        x[4] = 1.0
    with pytest.raises(wb.IndexingError, match=r"setitem: .*\[0, 5\] for dim 1 of size 5"):
        x[[0, 1], [0, 5]] = 1.0
    with pytest.raises(wb.ShapeError, match="cannot be broadcast"):
        x[0] = wb.ones(3)
    with pytest.raises(wb.ShapeError, match="cannot be broadcast"):
        x[[0, 1]] = wb.ones(3, 5)


def test_shape_errors():
    x = wb.tensor(randn(4, 5))
    with pytest.raises(wb.ShapeError, match="gather: index .* must have as many dims"):
        x.gather(0, wb.tensor([0, 1]))
    with pytest.raises(wb.ShapeError, match=r"gather: index .* bigger .* in dim 0 \(6 > 4\)"):
        x.gather(1, wb.zeros(6, 5, dtype=wb.i64))
    with pytest.raises(wb.ShapeError, match="scatter: index .* no bigger than src"):
        x.scatter(1, wb.zeros(4, 5, dtype=wb.i64), wb.ones(4, 2))
    with pytest.raises(wb.ShapeError, match="index_select: index must be 0-d or 1-d"):
        x.index_select(0, wb.zeros(2, 2, dtype=wb.i64))
    with pytest.raises(wb.ShapeError, match=r"index_add: source .* must have shape \(2, 5\)"):
        x.index_add(0, wb.tensor([0, 1]), wb.ones(3, 5))
    with pytest.raises(wb.ShapeError, match="embedding: weight must be 2-d"):
        wb.embedding(wb.ones(3), wb.tensor([0]))
