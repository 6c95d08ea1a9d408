"""Compare a workbench layer with its torch.nn twin: same weights, forward and backward.

    check_layer(nn.Linear(4, 3), torch.nn.Linear(4, 3), [x])

The torch layer's ``state_dict`` is loaded into the workbench layer (strict, so the names
must match), both run on the same inputs, a random upstream gradient is pulled back through
every floating point output, and the inputs' and every parameter's gradients are compared.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
from op_check import TOLERANCES, assert_close

import workbench as wb


def to_numpy(t) -> np.ndarray:
    if isinstance(t, torch.Tensor):
        t = t.detach()
        return (t.float() if t.dtype == torch.bfloat16 else t).numpy()
    a = t.detach().numpy()
    return a.astype(np.float32) if a.dtype.name == "bfloat16" else a


def load_from_torch(wb_layer, torch_layer, strict: bool = True):
    state = {k: to_numpy(v) for k, v in torch_layer.state_dict().items()}
    return wb_layer.load_state_dict(state, strict=strict)


def _flatten(out) -> list:
    if out is None:
        return []
    if isinstance(out, tuple | list):
        return [t for o in out for t in _flatten(o)]
    return [out]


def check_layer(
    wb_layer,
    torch_layer,
    inputs: Sequence[np.ndarray],
    dtype: wb.DType = wb.f32,
    wb_call: Callable | None = None,
    torch_call: Callable | None = None,
    grad: bool = True,
    atol: float | None = None,
    rtol: float | None = None,
    seed: int = 0,
) -> None:
    """Forward and backward of ``wb_layer`` vs ``torch_layer`` on ``inputs`` (numpy arrays;
    float ones are cast to ``dtype`` and get gradients)."""
    torch_dtype = getattr(torch, dtype.torch_name)
    torch_layer = torch_layer.to(torch_dtype)
    wb_layer.to(dtype)
    load_from_torch(wb_layer, torch_layer)
    wb_inputs, torch_inputs = [], []
    for a in inputs:
        a = np.asarray(a)
        if a.dtype.kind == "f":
            w = wb.tensor(a, dtype=dtype)
            t = torch.tensor(a, dtype=torch_dtype)
            if grad:
                w.requires_grad_()
                t.requires_grad_(True)
        else:
            w, t = wb.tensor(a), torch.tensor(a)
        wb_inputs.append(w)
        torch_inputs.append(t)
    out = (wb_call or (lambda m, *xs: m(*xs)))(wb_layer, *wb_inputs)
    expected = (torch_call or (lambda m, *xs: m(*xs)))(torch_layer, *torch_inputs)
    outs, expects = _flatten(out), _flatten(expected)
    assert len(outs) == len(expects), f"{len(outs)} outputs, torch gives {len(expects)}"
    for k, (o, e) in enumerate(zip(outs, expects, strict=True)):
        assert_close(to_numpy(o), to_numpy(e), dtype.name, f"output {k}", atol, rtol)
    if not grad:
        return
    rng = np.random.default_rng(seed)
    wb_loss = torch_loss = None
    for o, e in zip(outs, expects, strict=True):
        if not (e.dtype.is_floating_point and e.requires_grad):
            continue
        g = rng.standard_normal(e.shape).astype(np.float32)
        lw = (o * wb.tensor(g, dtype=o.dtype)).sum()
        lt = (e * torch.tensor(g, dtype=e.dtype)).sum()
        wb_loss = lw if wb_loss is None else wb_loss + lw
        torch_loss = lt if torch_loss is None else torch_loss + lt
    grads = wb_loss.backward()
    torch_loss.backward()
    r, a = TOLERANCES[dtype.name]
    grad_atol = a * 10 if atol is None else atol
    grad_rtol = r * 10 if rtol is None else rtol
    for i, (w, t) in enumerate(zip(wb_inputs, torch_inputs, strict=True)):
        if t.requires_grad and t.grad is not None:
            got = grads.get(w)
            assert got is not None, f"input {i}: no gradient"
            assert_close(
                to_numpy(got),
                to_numpy(t.grad),
                dtype.name,
                f"grad of input {i}",
                grad_atol,
                grad_rtol,
            )
    wb_params = dict(wb_layer.named_parameters())
    for name, p in torch_layer.named_parameters():
        if p.grad is None:
            continue
        got = grads.get(wb_params[name])
        assert got is not None, f"parameter {name}: no gradient"
        assert_close(
            to_numpy(got), to_numpy(p.grad), dtype.name, f"grad of {name}", grad_atol, grad_rtol
        )
