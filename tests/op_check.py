"""The one helper that compares a workbench op with PyTorch 2.13 (CPU): forward and gradients.

    check(lambda x, y: x + y, [a, b])                       # same callable for both libraries
    check(lambda x: wb.softmax(x, -1), [a], torch_fn=lambda x: torch.softmax(x, -1))

Inputs are numpy arrays. Each input is handed to workbench in a chosen ``layout``:
"contiguous", "transposed" (a permuted view of a contiguous buffer), "sliced" (every other
element of a bigger buffer) or "broadcast" (a stride-0 expansion of a smaller buffer), so
strided kernels are exercised; ``device="cuda"`` builds the same views of a GPU buffer (the
torch reference always runs on the CPU, results come back with ``.numpy()``). Every tensor
output must have torch's dtype, unless the call names why not (``dtype_differs="..."``).
Gradients: a random upstream gradient ``g`` is pulled back through both libraries
(``(out * g).sum().backward()``) and every float input's gradient is compared.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch

import workbench as wb

TOLERANCES = {
    "f64": (1e-9, 1e-9),
    "f32": (1e-4, 1e-5),
    "f16": (1e-2, 1e-2),
    "bf16": (2e-2, 2e-2),
}
LAYOUTS = ("contiguous", "transposed", "sliced", "broadcast")
# Off the CPU, half-precision kernels sum in another order (per-thread partials, then a tree in
# the block; cuBLAS's own tiling): a little more room than on the CPU. Explicit atol/rtol win.
DEVICE_TOLERANCES = {
    "cuda": {"f16": (2e-2, 2e-2), "bf16": (4e-2, 4e-2)},
    "metal": {"f16": (2e-2, 2e-2), "bf16": (4e-2, 4e-2)},
}


def tolerances(dtype_name: str, device: str = "cpu") -> tuple[float, float]:
    """The default ``(rtol, atol)`` for ``dtype_name`` results computed on ``device``."""
    kind = str(device).split(":")[0]
    return DEVICE_TOLERANCES.get(kind, {}).get(dtype_name) or TOLERANCES.get(dtype_name, (0, 0))


def to_torch_dtype(dtype: wb.DType) -> torch.dtype:
    return getattr(torch, dtype.torch_name)


def as_layout(array: np.ndarray, layout: str, dtype: wb.DType, device: str = "cpu") -> wb.Tensor:
    """A workbench tensor on ``device`` with ``array``'s values, laid out as ``layout`` (a view
    of a buffer on that device)."""
    array = np.asarray(array)
    if layout == "contiguous" or array.ndim == 0:
        return wb.tensor(array, dtype=dtype, device=device)
    if layout == "transposed":
        if array.ndim < 2:
            return as_layout(array, "sliced", dtype, device)
        order = tuple(reversed(range(array.ndim)))
        t = wb.tensor(np.ascontiguousarray(array.transpose(order)), dtype=dtype, device=device)
        return t.permute(order)
    if layout == "sliced":
        bigger = np.zeros((*array.shape[:-1], array.shape[-1] * 2), dtype=array.dtype)
        bigger[..., ::2] = array
        t = wb.tensor(bigger, dtype=dtype, device=device)
        # a strided view: every other element of the last dim
        return t.reshape((*array.shape, 2)).narrow(-1, 0, 1).squeeze(-1)
    if layout == "broadcast":
        if array.ndim == 0 or array.shape[0] == 0 or not np.all(array == array[:1]):
            return as_layout(array, "contiguous", dtype, device)
        return wb.tensor(array[:1], dtype=dtype, device=device).expand(array.shape)
    raise ValueError(layout)


def assert_close(actual: np.ndarray, expected: np.ndarray, dtype_name: str, what: str,
                 atol: float | None = None, rtol: float | None = None,
                 device: str = "cpu") -> None:  # fmt: skip
    r, a = tolerances(dtype_name, device)
    rtol = r if rtol is None else rtol
    atol = a if atol is None else atol
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    if actual.dtype.kind in "fc" or actual.dtype.name == "bfloat16":
        np.testing.assert_allclose(
            actual.astype(np.float64), expected.astype(np.float64), rtol=rtol, atol=atol,
            equal_nan=True, err_msg=what,
        )  # fmt: skip
    else:
        np.testing.assert_array_equal(actual, expected, err_msg=what)


def _to_numpy(t) -> np.ndarray:
    if isinstance(t, torch.Tensor):
        t = t.detach()
        if t.dtype == torch.bfloat16:
            return t.float().numpy()
        return t.numpy()
    array = t.detach().numpy()
    return array.astype(np.float32) if array.dtype.name == "bfloat16" else array


def check(
    fn: Callable,
    inputs: Sequence[np.ndarray],
    dtype: wb.DType = wb.f32,
    torch_fn: Callable | None = None,
    layouts: Sequence[str] | None = None,
    grad: bool = True,
    grad_inputs: Sequence[int] | None = None,
    atol: float | None = None,
    rtol: float | None = None,
    grad_atol: float | None = None,
    grad_rtol: float | None = None,
    seed: int = 0,
    device: str = "cpu",
    dtype_differs: str | None = None,
) -> None:
    """Compare ``fn(*wb_inputs)`` with ``torch_fn(*torch_inputs)``, then their gradients.

    ``layouts`` gives each input's layout (default: all contiguous). Integer/bool inputs keep
    their own dtype; float inputs are cast to ``dtype``. ``grad_inputs`` picks which inputs get
    a gradient (default: all float inputs). The workbench inputs live on ``device`` and every
    tensor output must come out on it; the torch reference runs on the CPU.
    ``dtype_differs``: the reason a known dtype difference from torch is accepted (the one
    opt-out of the dtype check; the reason is what the compatibility table reports).
    """
    wb_device = wb.Device(device)
    if wb_device.kind == "metal" and dtype == wb.f64:
        import pytest

        pytest.skip("Metal has no f64 (tensors of it raise UnsupportedOnDevice there)")
    torch_fn = torch_fn or fn
    layouts = layouts or ["contiguous"] * len(inputs)
    wb_inputs = []
    torch_inputs = []
    for i, (array, layout) in enumerate(zip(inputs, layouts, strict=True)):
        array = np.asarray(array)
        is_float = array.dtype.kind == "f"
        in_dtype = dtype if is_float else wb.dtype.from_numpy_dtype(array.dtype)
        w = as_layout(array, layout, in_dtype, device)
        tt = torch.tensor(np.array(array), dtype=to_torch_dtype(in_dtype))
        wants_grad = (
            grad
            and is_float
            and dtype.is_floating_point
            and (grad_inputs is None or i in grad_inputs)
        )
        if wants_grad:
            w.requires_grad_()
            tt.requires_grad_(True)
        wb_inputs.append(w)
        torch_inputs.append(tt)
    out = fn(*wb_inputs)
    expected = torch_fn(*torch_inputs)
    outs = out if isinstance(out, tuple | list) else (out,)
    expects = expected if isinstance(expected, tuple | list) else (expected,)
    for k, (o, e) in enumerate(zip(outs, expects, strict=True)):
        if isinstance(o, wb.Tensor):
            assert o.device == wb_device, f"output {k} is on {o.device}, expected {wb_device}"
            if isinstance(e, torch.Tensor) and dtype_differs is None:
                assert o.dtype is wb.dtype.dtype(e.dtype), (
                    f"output {k}: dtype {o.dtype.name}, torch gives {e.dtype}"
                )
        assert_close(_to_numpy(o), _to_numpy(e), dtype.name, f"output {k}", atol, rtol, device)
    if not any(t.requires_grad for t in torch_inputs):
        return
    rng = np.random.default_rng(seed)
    wb_loss = None
    torch_loss = None
    for o, e in zip(outs, expects, strict=True):
        if not (isinstance(e, torch.Tensor) and e.dtype.is_floating_point and e.requires_grad):
            continue
        g = rng.standard_normal(e.shape).astype(np.float32)
        term_wb = (o * wb.tensor(g, dtype=o.dtype, device=o.device)).sum()
        term_t = (e * torch.tensor(g, dtype=e.dtype)).sum()
        wb_loss = term_wb if wb_loss is None else wb_loss + term_wb
        torch_loss = term_t if torch_loss is None else torch_loss + term_t
    if wb_loss is None:
        return
    grads = wb_loss.backward()
    torch_loss.backward()
    for i, (w, tt) in enumerate(zip(wb_inputs, torch_inputs, strict=True)):
        if not tt.requires_grad:
            continue
        expected_grad = tt.grad
        got = grads.get(w)
        if expected_grad is None:
            assert got is None or np.all(_to_numpy(got) == 0), f"input {i}: unexpected grad"
            continue
        assert got is not None, f"input {i}: no gradient from workbench"
        assert got.device == wb_device, f"grad of input {i} is on {got.device}, not {wb_device}"
        assert_close(
            _to_numpy(got), _to_numpy(expected_grad), dtype.name, f"grad of input {i}",
            grad_atol if grad_atol is not None else atol,
            grad_rtol if grad_rtol is not None else rtol, device,
        )  # fmt: skip
