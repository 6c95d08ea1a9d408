"""Autograd: graph shapes (reuse, diamonds, long chains), grad modes, leaves and ``Var``,
``GradStore``, ``.grad`` accumulation, and the in-place safety checks, against PyTorch where
PyTorch defines the behaviour."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from op_check import check

import workbench as wb


def uniform(shape, seed=0, low=-1.0, high=1.0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(low, high, shape)


def leaf(array, dtype=wb.f32) -> wb.Tensor:
    return wb.tensor(array, dtype=dtype, requires_grad=True)


# -- graph shapes, against PyTorch -------------------------------------------------------------
GRAPHS = {  # name: fn for both libraries, or (workbench fn, torch fn)
    "used_twice": lambda x: x * x + x,
    "used_by_many_ops": lambda x: x.exp() * x.sin() + x / (x * x + 1.0) - x,
    "diamond": lambda x: _diamond(x),
    "nested_diamonds": lambda x: _diamond(_diamond(x) * 0.5),
    "through_views": lambda x: (
        x.transpose(0, 1).reshape((-1,)).narrow(0, 2, 6) * x.flatten().narrow(0, 0, 6)
    ),
    "broadcast_reuse": lambda x: (x.unsqueeze(0) * x.unsqueeze(1)).sum(-1),
    "reductions": lambda x: x.sum(0) * x.mean(1).sum() + x.amax(0) - x.logsumexp(1).sum(),
    "mixed_dtypes": (
        lambda x: (x.to_dtype(wb.f64) * 2.0).to_dtype(wb.f32) + x,
        lambda x: (x.double() * 2.0).float() + x,
    ),
}


def _diamond(x):
    a = x.exp() if isinstance(x, wb.Tensor) else torch.exp(x)
    b = a * 2.0
    c = a.sin()
    return b + c * a


@pytest.mark.parametrize("name", GRAPHS)
def test_graph_gradients_match_torch(name):
    fn, torch_fn = GRAPHS[name] if isinstance(GRAPHS[name], tuple) else (GRAPHS[name],) * 2
    check(fn, [uniform((3, 4))], torch_fn=torch_fn)


def test_two_inputs_sharing_subexpressions():
    def f(x, w):
        h = x @ w
        return (h.relu() * h).sum(-1, keepdim=True) * h

    check(f, [uniform((4, 3)), uniform((3, 5), seed=1)])


def test_mlp_step_gradients_match_torch():
    """A small two-layer MLP with a log-softmax-free loss: every parameter's gradient."""

    def f(x, w1, b1, w2, b2):
        h = (x @ w1 + b1).relu()
        out = h @ w2 + b2
        return ((out - 0.5) * (out - 0.5)).mean()

    inputs = [
        uniform((8, 6)),
        uniform((6, 5), 1),
        uniform((5,), 2),
        uniform((5, 3), 3),
        uniform((3,), 4),
    ]
    check(f, inputs, grad_inputs=[1, 2, 3, 4])


def test_long_chain_does_not_recurse():
    x = leaf(np.ones(3))
    y = x
    for _ in range(3000):
        y = y * 1.0001
    grads = y.sum().backward()
    np.testing.assert_allclose(grads[x].numpy(), np.full(3, 1.0001**3000), rtol=1e-3)


# -- grad modes --------------------------------------------------------------------------------
def test_no_grad_records_nothing():
    x = leaf(uniform((2, 3)))
    with wb.no_grad():
        assert not wb.is_grad_enabled()
        y = x * 2.0
        z = y.exp().sum()
    assert wb.is_grad_enabled()
    assert not y.requires_grad and y.grad_fn is None
    assert not z.requires_grad
    with pytest.raises(wb.AutogradError, match="does not require grad"):
        z.backward()


def test_no_grad_as_decorator_and_enable_grad_inside():
    @wb.no_grad()
    def double(t):
        """Doc."""
        return t * 2.0

    x = leaf(uniform((2,)))
    assert not double(x).requires_grad
    assert double.__name__ == "double" and double.__doc__ == "Doc."
    with wb.no_grad():
        with wb.enable_grad():
            assert wb.is_grad_enabled()
            assert (x * 2.0).requires_grad
        assert not wb.is_grad_enabled()


def test_grad_mode_restored_after_an_exception():
    with pytest.raises(RuntimeError), wb.no_grad():
        raise RuntimeError("boom")
    assert wb.is_grad_enabled()


def test_detach_shares_storage_and_cuts_the_graph():
    x = leaf(uniform((2, 3)))
    y = x * 3.0
    d = y.detach()
    assert d.shares_storage(y) and not d.requires_grad and d.is_leaf
    grads = (y + d).sum().backward()
    np.testing.assert_allclose(grads[x].numpy(), np.full((2, 3), 3.0))
    t = torch.tensor(uniform((2, 3)), requires_grad=True)
    ty = t * 3.0
    (ty + ty.detach()).sum().backward()
    np.testing.assert_allclose(grads[x].numpy(), t.grad.numpy())


def test_requires_grad_rules():
    x = wb.tensor([1.0, 2.0])
    assert not x.requires_grad and x.is_leaf
    assert x.requires_grad_() is x and x.requires_grad
    y = x * 2.0
    assert y.requires_grad and not y.is_leaf and y.grad_fn == "mul"
    with pytest.raises(wb.AutogradError, match="non-leaf"):
        y.requires_grad_(False)
    with pytest.raises(wb.AutogradError, match="floating point"):
        wb.tensor([1, 2]).requires_grad_()
    x.requires_grad_(False)
    assert not (x * 2.0).requires_grad


def test_integer_outputs_do_not_require_grad():
    x = leaf(uniform((3, 4)))
    assert not x.argmax(1).requires_grad
    assert not (x > 0).requires_grad
    assert not x.to_dtype(wb.i32).requires_grad
    assert x.to_dtype(wb.f16).requires_grad


# -- Var and GradStore -------------------------------------------------------------------------
def test_var_is_a_trainable_leaf():
    t = wb.tensor(uniform((2, 2)), dtype=wb.f32)
    v = wb.Var(t)
    assert isinstance(v, wb.Tensor) and v.requires_grad and v.is_leaf
    assert v.shares_storage(t)  # no copy of a float tensor
    assert wb.Var([1.0, 2.0]).dtype is wb.f32
    assert wb.Var([1.0, 2.0], dtype=wb.f64).dtype is wb.f64
    with pytest.raises(wb.AutogradError, match="floating point"):
        wb.Var([1, 2])
    grads = (v * v).sum().backward()
    np.testing.assert_allclose(grads[v].numpy(), 2 * t.numpy())
    assert not v.as_tensor().requires_grad and v.as_tensor().shares_storage(v)


def test_var_set_replaces_values_without_a_graph():
    v = wb.Var(wb.zeros(2, 2))
    v.set(wb.ones(2, 2))
    assert v.tolist() == [[1.0, 1.0], [1.0, 1.0]] and v.is_leaf
    with pytest.raises(wb.WorkbenchError, match=r"Var.set: expected shape \(2, 2\)"):
        v.set(wb.ones(3))


def test_grad_store_api():
    w = wb.Var(uniform((3,)))
    b = wb.Var(uniform((3,), 1))
    unused = wb.Var(uniform((3,), 2))
    c = wb.tensor(uniform((3,), 3))  # no grad wanted
    loss = (w * c + b).sum()
    grads = loss.backward()
    assert isinstance(grads, wb.GradStore)
    assert w in grads and b in grads and loss in grads
    assert unused not in grads and c not in grads
    assert grads.get(unused) is None
    with pytest.raises(KeyError, match="no gradient"):
        grads[unused]
    np.testing.assert_allclose(grads[w].numpy(), c.numpy())
    np.testing.assert_allclose(grads[b].numpy(), np.ones(3))
    assert grads[loss].item() == 1.0
    by_tensor = dict((id(t), g) for t, g in grads.items())
    assert id(w) in by_tensor and id(b) in by_tensor
    n = len(grads)
    removed = grads.remove(b)
    assert removed is not None and b not in grads and len(grads) == n - 1
    assert grads.remove(b) is None
    grads.insert(unused, wb.zeros(3))
    assert unused in grads and grads[unused].shape == (3,)
    assert "GradStore" in repr(grads)


def test_grad_accumulates_across_backward_calls_like_torch():
    x_np = uniform((2, 3))
    x = leaf(x_np)
    t = torch.tensor(x_np, dtype=torch.float32, requires_grad=True)
    for k in range(1, 4):
        (x * x * float(k)).sum().backward()
        (t * t * float(k)).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-6)
    x.zero_grad()
    assert x.grad is None
    (x * 2.0).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full((2, 3), 2.0))


def test_only_leaves_get_dot_grad():
    x = leaf(uniform((3,)))
    y = x * 2.0
    (y * y).sum().backward()
    assert x.grad is not None and y.grad is None


def test_backward_with_an_explicit_gradient():
    x_np, g_np = uniform((2, 3)), uniform((2, 3), 1)
    x = leaf(x_np)
    grads = (x * x).backward(wb.tensor(g_np, dtype=wb.f32))
    t = torch.tensor(x_np, dtype=torch.float32, requires_grad=True)
    (t * t).backward(torch.tensor(g_np, dtype=torch.float32))
    np.testing.assert_allclose(grads[x].numpy(), t.grad.numpy(), rtol=1e-6)


def test_backward_on_a_non_scalar_needs_a_gradient():
    x = leaf(uniform((2, 3)))
    with pytest.raises(wb.AutogradError, match=r"non-scalar tensor of shape \(2, 3\)"):
        (x * 2.0).backward()
    # a one-element tensor of any rank is fine, as in PyTorch
    grads = (x * 2.0).sum((0, 1), keepdim=True).backward()
    assert grads[x].shape == (2, 3)


def test_backward_twice_through_one_graph_is_allowed():
    """PyTorch frees the graph after a backward (retain_graph=False); workbench keeps it, so a
    second backward gives the same gradients (documented difference)."""
    x = leaf(uniform((3,)))
    y = (x.exp() * x).sum()
    g1 = y.backward()[x].numpy().copy()
    g2 = y.backward()[x].numpy()
    np.testing.assert_allclose(g1, g2)


def test_gradient_dtype_matches_the_input():
    for dtype in (wb.f16, wb.bf16, wb.f64):
        x = leaf(uniform((3,)), dtype=dtype)
        grads = (x.to_dtype(wb.f32).exp() * 2.0).sum().backward()
        assert grads[x].dtype is dtype


# -- in-place safety ---------------------------------------------------------------------------
def test_inplace_on_a_leaf_that_requires_grad_raises():
    x = leaf(uniform((3,)))
    for fn in (
        lambda: x.add_(1.0),
        lambda: x.mul_(2.0),
        lambda: x.zero_(),
        lambda: x.copy_(x),
        lambda: x.clamp_(0.0, 1.0),
        lambda: x.fill_(1.0),
    ):
        with pytest.raises(wb.AutogradError, match="leaf that requires grad"):
            fn()
    with pytest.raises(wb.AutogradError, match="add_"):
        x += 1.0
    t = torch.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        t.add_(1.0)


def test_inplace_on_a_leaf_inside_no_grad_is_allowed():
    """The optimizer update pattern."""
    w = wb.Var(np.ones(3, dtype=np.float32))
    grads = (w * 2.0).sum().backward()
    with wb.no_grad():
        w -= grads[w] * 0.5
        w.add_(1.0)
    assert w.tolist() == [1.0, 1.0, 1.0]
    assert w.is_leaf and w.requires_grad


def test_modifying_a_saved_tensor_raises_like_torch():
    x_np = uniform((3,))
    x = leaf(x_np)
    y = x.exp()  # exp saves its output
    z = y.sum()
    y.add_(1.0)
    with pytest.raises(wb.AutogradError, match="saved for the gradient of exp"):
        z.backward()
    t = torch.tensor(x_np, requires_grad=True)
    ty = t.exp()
    tz = ty.sum()
    ty.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        tz.backward()


def test_modifying_an_input_saved_by_mul_raises():
    x = leaf(uniform((3,)))
    a = x * 1.0
    b = leaf(uniform((3,), 1))
    z = (a * b).sum()  # mul saves both operands
    a.mul_(2.0)
    with pytest.raises(wb.AutogradError, match="modified in place"):
        z.backward()


def test_inplace_on_an_unsaved_tensor_keeps_gradients_right():
    """add does not read its operands in backward: changing one afterwards is harmless."""

    def f(x):
        a = x * 2.0
        z = a + 1.0
        a.add_(3.0)
        return z * 1.0 + a

    check(f, [uniform((3, 4))])


def test_inplace_chain_gradients_match_torch():
    def f(x, y):
        z = x * 1.0
        z.mul_(y)
        z.add_(x)
        z.div_(2.0)
        z.sub_(y, alpha=0.5)
        z.clamp_(-0.5, 0.5)
        return z

    check(f, [uniform((3, 4)), uniform((4,), 1)])


def test_inplace_on_a_view_of_a_graph_tensor_raises():
    """PyTorch rebases views through CopySlices; workbench refuses (documented difference)."""
    x = leaf(uniform((3, 4)))
    y = x * 1.0
    with pytest.raises(wb.AutogradError, match="view of a tensor in an autograd graph"):
        y.narrow(0, 0, 1).add_(1.0)
    with wb.no_grad():
        y.narrow(0, 0, 1).add_(1.0)  # without a graph, a view can be written
