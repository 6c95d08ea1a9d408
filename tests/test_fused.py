"""Fused ops (softmax, log_softmax, layer/rms/group norm, rope, attention) against PyTorch:
forward and gradients, across dtypes, layouts, size-1 and empty dims."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from devices import OP_DEVICE_PARAMS
from op_check import check

import workbench as wb

rng = np.random.default_rng(1234)
FLOATS = [wb.f32, wb.f64, wb.f16, wb.bf16]
# Half precision: the reference rounds differently; loosen forward and gradient tolerances.
HALF_TOL = {wb.f16: dict(atol=2e-2, rtol=2e-2), wb.bf16: dict(atol=6e-2, rtol=6e-2)}


def randn(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def tol(dtype: wb.DType, scale: float = 1.0) -> dict:
    t = HALF_TOL.get(dtype)
    return {} if t is None else {k: v * scale for k, v in t.items()}


# -- softmax / log_softmax -------------------------------------------------------------------
SOFTMAX_CASES = [
    ((5,), 0),
    ((3, 4), 0),
    ((3, 4), 1),
    ((3, 4), -1),
    ((2, 3, 4), 0),
    ((2, 3, 4), 1),
    ((2, 3, 4), 2),
    ((2, 3, 4), -2),
    ((1, 7), 0),  # a size-1 softmax dim: all ones
    ((4, 1), -1),
    ((), 0),
    ((0, 4), -1),  # empty
    ((4, 0), 0),
    ((40, 2000), -1),  # several row blocks in the CPU kernel
    ((2, 70000), -1),  # one row per block
    ((40, 2000), 0),  # one (D, Q) plane
    ((30, 50, 60), 1),  # several (p, D, q) slabs
]


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape,dim", SOFTMAX_CASES)
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_softmax(name, shape, dim, dtype, device):
    ref = torch.softmax if name == "softmax" else F.log_softmax
    fn = getattr(wb, name)
    big = np.prod(shape) > 10_000
    if big and dtype in (wb.f64, wb.bf16):
        pytest.skip("the big shapes exercise blocking; f32 and f16 cover it")
    t = tol(dtype, 2 if name == "log_softmax" else 1)
    check(lambda x: fn(x, dim), [randn(*shape) * 3], dtype=dtype,
          torch_fn=lambda x: ref(x, dim), **t, device=device)  # fmt: skip


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("layout", ["transposed", "sliced"])
@pytest.mark.parametrize("dim", [0, 1, 2])
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_softmax_strided(name, layout, dim, device):
    ref = torch.softmax if name == "softmax" else F.log_softmax
    fn = getattr(wb, name)
    check(lambda x: fn(x, dim), [randn(3, 4, 5)], torch_fn=lambda x: ref(x, dim),
          layouts=[layout], device=device)  # fmt: skip


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", [wb.f32, wb.f64], ids=str)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_softmax_infinities(name, dtype, device):
    """-inf entries get probability 0; a row of -inf gives NaN, as in PyTorch."""
    x = randn(4, 6)
    x[0, :2] = -np.inf
    x[1, :] = -np.inf
    x[2, 5] = -np.inf
    ref = torch.softmax if name == "softmax" else F.log_softmax
    fn = getattr(wb, name)
    check(lambda x: fn(x, -1), [x], dtype=dtype, torch_fn=lambda x: ref(x, -1), device=device)
    check(lambda x: fn(x, 0), [x], dtype=dtype, torch_fn=lambda x: ref(x, 0), device=device)


def test_softmax_is_a_method_and_rows_sum_to_one():
    x = wb.tensor(randn(3, 4, 5))
    y = x.softmax(1)
    np.testing.assert_allclose(y.sum(1).numpy(), np.ones((3, 5)), rtol=1e-6)
    np.testing.assert_allclose(x.log_softmax(1).exp().numpy(), y.numpy(), rtol=1e-5)


# -- layer_norm ------------------------------------------------------------------------------
LAYER_NORM_CASES = [
    # x shape, normalized_shape, weight, bias
    ((4, 8), (8,), True, True),
    ((2, 3, 4), (3, 4), True, True),
    ((2, 3, 4), 4, True, False),
    ((2, 3, 4), (4,), False, True),
    ((2, 3, 4), (2, 3, 4), False, False),
    ((5,), (5,), True, True),
    ((3, 1), (1,), True, True),  # variance 0: the output is the bias
    ((0, 8), (8,), True, True),
    ((40, 2000), (2000,), True, True),  # several row blocks
]


def _layer_norm_inputs(shape, normalized, weight, bias):
    normalized = (normalized,) if isinstance(normalized, int) else normalized
    inputs = [randn(*shape) * 2 + 0.5]
    if weight:
        inputs.append(randn(*normalized))
    if bias:
        inputs.append(randn(*normalized))
    return inputs


@pytest.mark.parametrize("shape,normalized,weight,bias", LAYER_NORM_CASES)
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_layer_norm(shape, normalized, weight, bias, dtype, device):
    if np.prod(shape) > 10_000 and dtype in (wb.f64, wb.bf16):
        pytest.skip("the big shape exercises blocking; f32 and f16 cover it")
    inputs = _layer_norm_inputs(shape, normalized, weight, bias)
    ns = (normalized,) if isinstance(normalized, int) else normalized

    def affine(args):
        return (args[0] if weight else None), (args[-1] if bias else None)

    extra = tol(dtype, 2)
    if ns == (1,):  # x̂ is exactly 0 here; PyTorch's mean rounds, its weight grad is ~1e-5
        extra.setdefault("grad_atol", 1e-3)
    check(lambda x, *a: wb.layer_norm(x, normalized, *affine(a), 1e-5), inputs, dtype=dtype,
          torch_fn=lambda x, *a: F.layer_norm(x, ns, *affine(a), 1e-5), **extra,
          device=device)  # fmt: skip


@pytest.mark.parametrize("layouts", [["transposed", "contiguous", "contiguous"],
                                     ["sliced", "sliced", "sliced"]])  # fmt: skip
@pytest.mark.parametrize("normalized", [(5,), (4, 5)])
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_layer_norm_strided(layouts, normalized, device):
    inputs = [randn(3, 4, 5), randn(*normalized), randn(*normalized)]
    if len(normalized) == 2 and layouts[1] == "contiguous":
        layouts = [layouts[0], "transposed", "transposed"]
    check(lambda x, w, b: wb.layer_norm(x, normalized, w, b),
          inputs, torch_fn=lambda x, w, b: F.layer_norm(x, normalized, w, b),
          layouts=layouts, device=device)  # fmt: skip


@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_layer_norm_eps(device):
    x = randn(3, 6) * 1e-3
    check(lambda x: wb.layer_norm(x, (6,), eps=1e-2), [x], dtype=wb.f64,
          torch_fn=lambda x: F.layer_norm(x, (6,), eps=1e-2), device=device)  # fmt: skip


# -- rms_norm --------------------------------------------------------------------------------
RMS_CASES = [((4, 8), True), ((2, 3, 16), True), ((2, 3, 16), False), ((7,), True),
             ((3, 1), True), ((0, 4), True), ((40, 2000), True)]  # fmt: skip


@pytest.mark.parametrize("shape,weight", RMS_CASES)
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_rms_norm(shape, weight, dtype, device):
    if np.prod(shape) > 10_000 and dtype in (wb.f64, wb.bf16):
        pytest.skip("the big shape exercises blocking; f32 and f16 cover it")
    d = shape[-1]
    inputs = [randn(*shape) + 0.3] + ([randn(d)] if weight else [])
    check(lambda x, *w: wb.rms_norm(x, *w, eps=1e-6), inputs, dtype=dtype,
          torch_fn=lambda x, *w: F.rms_norm(x, (d,), *w, eps=1e-6), **tol(dtype, 2),
          device=device)  # fmt: skip


@pytest.mark.parametrize("layouts", [["transposed", "sliced"], ["sliced", "contiguous"]])
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_rms_norm_strided(layouts, device):
    check(lambda x, w: wb.rms_norm(x, w), [randn(3, 4, 6), randn(6)],
          torch_fn=lambda x, w: F.rms_norm(x, (6,), w, eps=1e-6), layouts=layouts,
          device=device)  # fmt: skip


# -- group_norm ------------------------------------------------------------------------------
GROUP_NORM_CASES = [
    # x shape, groups, affine
    ((2, 6, 4, 3), 3, True),
    ((2, 6, 4, 3), 1, True),  # one group: layer norm over (C, H, W)
    ((2, 6, 4, 3), 6, False),  # one channel per group: instance norm
    ((2, 4), 2, True),  # no spatial dims
    ((3, 4, 5), 2, True),
    ((1, 2, 1), 1, True),  # size-1 dims
    ((0, 4, 3), 2, True),
    ((2, 8, 64, 64), 4, True),  # several samples per block... and one block per sample
]


@pytest.mark.parametrize("shape,groups,affine", GROUP_NORM_CASES)
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_group_norm(shape, groups, affine, dtype, device):
    if np.prod(shape) > 10_000 and dtype in (wb.f64, wb.bf16):
        pytest.skip("the big shape exercises blocking; f32 and f16 cover it")
    c = shape[1]
    inputs = [randn(*shape) * 2 - 0.5] + ([randn(c), randn(c)] if affine else [])
    check(lambda x, *wb_: wb.group_norm(x, groups, *wb_), inputs, dtype=dtype,
          torch_fn=lambda x, *wb_: F.group_norm(x, groups, *wb_), **tol(dtype, 2),
          device=device)  # fmt: skip


@pytest.mark.parametrize("layout", ["transposed", "sliced"])
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_group_norm_strided(layout, device):
    check(lambda x, w, b: wb.group_norm(x, 2, w, b), [randn(2, 4, 3, 5), randn(4), randn(4)],
          torch_fn=lambda x, w, b: F.group_norm(x, 2, w, b),
          layouts=[layout, "sliced", "contiguous"], device=device)  # fmt: skip


# -- rope ------------------------------------------------------------------------------------
def torch_rope(x, cos, sin, interleaved):
    """The reference, from plain torch ops."""
    if cos.ndim == 3 and x.ndim == 4:  # (B, T, D/2)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    if interleaved:
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1).flatten(-2)
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)


def _angles(*shape: int) -> tuple[np.ndarray, np.ndarray]:
    theta = rng.uniform(-np.pi, np.pi, shape).astype(np.float32)
    return np.cos(theta), np.sin(theta)


ROPE_CASES = [
    # x shape, cos/sin shape
    ((2, 3, 5, 8), (5, 4)),
    ((2, 3, 5, 8), (2, 5, 4)),  # (B, T, D/2), candle's batched tables
    ((2, 3, 5, 8), (2, 1, 5, 4)),
    ((2, 3, 5, 8), (1, 1, 5, 4)),
    ((3, 5, 8), (5, 4)),
    ((1, 1, 1, 2), (1, 1)),
    ((2, 3, 0, 8), (0, 4)),
]


@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("x_shape,table_shape", ROPE_CASES)
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_rope(x_shape, table_shape, interleaved, dtype, device):
    cos, sin = _angles(*table_shape)
    check(lambda x, c, s: wb.rope(x, c, s, interleaved), [randn(*x_shape), cos, sin],
          dtype=dtype, torch_fn=lambda x, c, s: torch_rope(x, c, s, interleaved),
          **tol(dtype, 2), device=device)  # fmt: skip


@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("layouts", [["transposed", "contiguous", "contiguous"],
                                     ["sliced", "transposed", "sliced"]])  # fmt: skip
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_rope_strided(interleaved, layouts, device):
    cos, sin = _angles(5, 4)
    check(lambda x, c, s: wb.rope(x, c, s, interleaved), [randn(2, 3, 5, 8), cos, sin],
          torch_fn=lambda x, c, s: torch_rope(x, c, s, interleaved), layouts=layouts,
          device=device)  # fmt: skip


def test_rope_matches_rotation_of_complex_numbers():
    """Interleaved rope is multiplication by e^{iθ} of x[2i] + i x[2i+1]."""
    x = randn(1, 2, 3, 6)
    theta = rng.uniform(-3, 3, (3, 3)).astype(np.float32)
    got = wb.rope(wb.tensor(x), wb.tensor(np.cos(theta)), wb.tensor(np.sin(theta)), True)
    z = (x[..., 0::2] + 1j * x[..., 1::2]) * np.exp(1j * theta)
    np.testing.assert_allclose(got.numpy()[..., 0::2], z.real, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got.numpy()[..., 1::2], z.imag, rtol=1e-5, atol=1e-6)


# -- scaled dot-product attention ------------------------------------------------------------
def _sdpa(is_causal=False, scale=None, with_mask=False):
    def wb_fn(q, k, v, *mask):
        return wb.scaled_dot_product_attention(q, k, v, *mask, is_causal=is_causal, scale=scale)

    def torch_fn(q, k, v, *mask):
        return F.scaled_dot_product_attention(q, k, v, *mask, is_causal=is_causal, scale=scale)

    return wb_fn, torch_fn


def _bool_mask(*shape: int, fully_masked_row: bool = False) -> np.ndarray:
    mask = rng.uniform(size=shape) > 0.3
    mask[..., 0] = True
    if fully_masked_row:
        mask[..., 1, :] = False
    return mask


SDPA_CASES = [
    # id, q shape, k shape, v shape, mask, is_causal, scale
    ("plain", (2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 5), None, False, None),
    ("3d", (3, 4, 8), (3, 6, 8), (3, 6, 8), None, False, None),
    ("2d", (4, 8), (6, 8), (6, 5), None, False, None),
    ("scale", (2, 4, 8), (2, 6, 8), (2, 6, 5), None, False, 0.3),
    ("causal", (2, 3, 6, 8), (2, 3, 6, 8), (2, 3, 6, 4), None, True, None),
    ("causal L>S", (2, 6, 8), (2, 4, 8), (2, 4, 4), None, True, None),
    ("causal L<S", (2, 4, 8), (2, 6, 8), (2, 6, 4), None, True, None),
    ("bool mask", (2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 5), "bool", False, None),
    ("float mask", (2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 5), "float", False, None),
    ("masked row", (2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 5), "bool_row", False, None),
    ("-inf row", (2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 5), "float_row", False, None),
    ("batch bcast", (1, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 5), None, False, None),
    ("size 1", (1, 1, 1, 8), (1, 1, 1, 8), (1, 1, 1, 1), None, False, None),
    ("L=0", (2, 0, 8), (2, 6, 8), (2, 6, 5), None, False, None),
    ("S=0", (2, 4, 8), (2, 0, 8), (2, 0, 5), None, False, None),
    ("long", (1, 2, 64, 16), (1, 2, 1100, 16), (1, 2, 1100, 16), None, False, None),
]


def _mask(kind: str | None, length: int, source: int) -> list[np.ndarray]:
    if kind is None:
        return []
    if kind.startswith("bool"):
        return [_bool_mask(length, source, fully_masked_row=kind == "bool_row")]
    mask = randn(3, 1, length, source)[:1]  # (1, 1, L, S): broadcast over batch and heads
    mask[..., 2] = -np.inf
    if kind == "float_row":
        mask[..., 1, :] = -np.inf
    return [mask]


@pytest.mark.parametrize("case", SDPA_CASES, ids=[c[0] for c in SDPA_CASES])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_scaled_dot_product_attention(case, dtype, device):
    _, qs, ks, vs, mask_kind, is_causal, scale = case
    if case[0] == "long" and dtype in (wb.f64, wb.bf16):
        pytest.skip("the long case exercises blocking; f32 and f16 cover it")
    wb_fn, torch_fn = _sdpa(is_causal, scale)
    inputs = [randn(*qs), randn(*ks), randn(*vs), *_mask(mask_kind, qs[-2], ks[-2])]
    check(wb_fn, inputs, dtype=dtype, torch_fn=torch_fn, grad_inputs=[0, 1, 2],
          **tol(dtype, 2), device=device)  # fmt: skip


@pytest.mark.parametrize("layouts", [["transposed", "transposed", "transposed"],
                                     ["sliced", "contiguous", "sliced"]])  # fmt: skip
@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_scaled_dot_product_attention_strided(layouts, is_causal, device):
    wb_fn, torch_fn = _sdpa(is_causal)
    check(wb_fn, [randn(2, 3, 5, 8), randn(2, 3, 5, 8), randn(2, 3, 5, 4)],
          torch_fn=torch_fn, layouts=layouts, device=device)  # fmt: skip


@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_scaled_dot_product_attention_broadcast_mask_layout(device):
    """A bool mask (L, S) expanded over (B, H) with stride 0, and a transposed one."""
    wb_fn, torch_fn = _sdpa()
    mask = _bool_mask(5, 5)
    inputs = [randn(2, 3, 5, 8), randn(2, 3, 5, 8), randn(2, 3, 5, 4), mask]
    check(wb_fn, inputs, torch_fn=torch_fn, grad_inputs=[0, 1, 2],
          layouts=["contiguous", "contiguous", "contiguous", "transposed"],
          device=device)  # fmt: skip
    full = np.broadcast_to(mask[None, None, :1], (2, 3, 5, 5)).copy()  # equal rows: broadcast
    check(wb_fn, inputs[:3] + [full], torch_fn=torch_fn, grad_inputs=[0, 1, 2],
          layouts=["contiguous", "contiguous", "contiguous", "broadcast"],
          device=device)  # fmt: skip


def test_attention_fully_masked_query_gives_zeros():
    q = wb.tensor(randn(1, 2, 4)).requires_grad_()
    k = wb.tensor(randn(1, 3, 4))
    v = wb.tensor(randn(1, 3, 5))
    mask = wb.tensor(np.array([[True, True, False], [False, False, False]]))
    out = wb.scaled_dot_product_attention(q, k, v, mask)
    np.testing.assert_array_equal(out.numpy()[0, 1], np.zeros(5, np.float32))
    grads = out.sum().backward()
    np.testing.assert_array_equal(grads[q].numpy()[0, 1], np.zeros(4, np.float32))


# -- errors ----------------------------------------------------------------------------------
def _t(*shape: int, dtype=wb.f32) -> wb.Tensor:
    return wb.tensor(randn(*shape), dtype=dtype)


def test_errors_softmax():
    with pytest.raises(wb.DTypeError, match="softmax: expected a floating point"):
        wb.softmax(wb.tensor(np.arange(4)), -1)
    with pytest.raises(wb.ShapeError, match="log_softmax: dim 2 is out of range"):
        wb.log_softmax(_t(2, 3), 2)


def test_errors_norms():
    with pytest.raises(wb.ShapeError, match=r"layer_norm: normalized_shape \(4,\) must be"):
        wb.layer_norm(_t(2, 3), (4,))
    with pytest.raises(wb.ShapeError, match=r"layer_norm: normalized_shape \(2, 3, 4\)"):
        wb.layer_norm(_t(3, 4), (2, 3, 4))
    with pytest.raises(wb.ShapeError, match=r"layer_norm: weight must have shape \(3,\)"):
        wb.layer_norm(_t(2, 3), 3, _t(4))
    with pytest.raises(wb.ShapeError, match=r"layer_norm: bias must have shape \(3,\)"):
        wb.layer_norm(_t(2, 3), 3, None, _t(3, 1))
    with pytest.raises(wb.ShapeError, match=r"rms_norm: weight must have shape \(3,\)"):
        wb.rms_norm(_t(2, 3), _t(2))
    with pytest.raises(wb.ShapeError, match="group_norm: num_groups=4 must be a positive divisor"):
        wb.group_norm(_t(2, 6, 3), 4)
    with pytest.raises(wb.ShapeError, match="group_norm: num_groups=0"):
        wb.group_norm(_t(2, 6, 3), 0)
    with pytest.raises(wb.ShapeError, match=r"group_norm: weight must have shape \(6,\)"):
        wb.group_norm(_t(2, 6, 3), 3, _t(3))
    with pytest.raises(wb.ShapeError, match=r"group_norm: expected an input \(N, C, \*\)"):
        wb.group_norm(_t(6), 3)
    with pytest.raises(wb.DTypeError, match="layer_norm: expected a floating point"):
        wb.layer_norm(wb.tensor(np.arange(6).reshape(2, 3)), 3)


def test_errors_rope():
    x = _t(1, 2, 5, 8)
    with pytest.raises(wb.ShapeError, match=r"rope: cos Tensor\[5, 3\].*does not fit x"):
        wb.rope(x, _t(5, 3), _t(5, 4))
    with pytest.raises(wb.ShapeError, match=r"rope: sin Tensor\[6, 4\]"):
        wb.rope(x, _t(5, 4), _t(6, 4))
    with pytest.raises(wb.ShapeError, match="rope: expected x .* with an even D"):
        wb.rope(_t(1, 2, 5, 7), _t(5, 3), _t(5, 3))


def test_errors_attention():
    sdpa = wb.scaled_dot_product_attention
    with pytest.raises(wb.ShapeError, match=r"q and k need the same last dim.*Tensor\[2, 6, 4\]"):
        sdpa(_t(2, 4, 8), _t(2, 6, 4), _t(2, 6, 5))
    with pytest.raises(wb.ShapeError, match="k and v need the same sequence length"):
        sdpa(_t(2, 4, 8), _t(2, 6, 8), _t(2, 5, 5))
    with pytest.raises(wb.ShapeError, match="cannot be broadcast"):
        sdpa(_t(2, 4, 8), _t(3, 6, 8), _t(3, 6, 5))
    with pytest.raises(wb.ShapeError, match=r"attn_mask Tensor\[4, 5\] bool cpu does not"):
        sdpa(_t(2, 4, 8), _t(2, 6, 8), _t(2, 6, 5), wb.tensor(np.ones((4, 5), bool)))
    with pytest.raises(wb.DTypeError, match="attn_mask must be bool or float"):
        sdpa(_t(2, 4, 8), _t(2, 6, 8), _t(2, 6, 5), wb.tensor(np.ones((4, 6), np.int64)))
    with pytest.raises(wb.DTypeError, match="q, k and v must share one dtype"):
        sdpa(_t(2, 4, 8), _t(2, 6, 8, dtype=wb.f64), _t(2, 6, 5))
    with pytest.raises(wb.WorkbenchError, match="dropout_p=0.1 is not supported"):
        sdpa(_t(2, 4, 8), _t(2, 6, 8), _t(2, 6, 5), dropout_p=0.1)
    with pytest.raises(wb.WorkbenchError, match="attn_mask and is_causal=True cannot be combined"):
        sdpa(_t(2, 4, 8), _t(2, 6, 8), _t(2, 6, 5), wb.tensor(np.ones((4, 6), bool)), True)
    with pytest.raises(wb.ShapeError, match="k needs at least 2 dims"):
        sdpa(_t(2, 4, 8), _t(8), _t(2, 6, 5))
