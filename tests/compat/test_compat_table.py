"""Every snippet of docs/pytorch_compat.md through ``op_check.check`` (values, shapes, dtypes and
the gradients of every float input, against torch), and the table kept current."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as torch_f
from compat_probe import Row, _rows, run, table
from op_check import check

import workbench as wb
import workbench.nn.functional as wb_f

ROWS = _rows()
DOC = Path(__file__).parents[2] / "docs" / "pytorch_compat.md"


class _Replay:
    """Stands in for ``m.tensor`` in a snippet: records the arrays on a first pass, then hands
    out the tensors ``check`` made from them, in the same order."""

    def __init__(self, tensors=None) -> None:
        self.arrays: list[np.ndarray] = []
        self.tensors = tensors

    def __call__(self, array):
        self.arrays.append(np.asarray(array))
        if self.tensors is None:
            return wb.tensor(array)
        return self.tensors[len(self.arrays) - 1]


def _is_tensors(result) -> bool:
    if isinstance(result, tuple | list):
        return all(isinstance(r, wb.Tensor) for r in result)
    return isinstance(result, wb.Tensor)


@pytest.mark.parametrize("row", ROWS, ids=[f"{r.area}: {r.name}" for r in ROWS])
def test_snippet_agrees_with_torch(row: Row) -> None:
    status, note = run(row)
    if status != "supported":
        pytest.skip(f"{status}: {note}")  # the table reports it; nothing to compare
    recorder = _Replay()
    result = row.snippet(wb, wb_f, recorder)
    if not _is_tensors(result):
        return  # a Python value or numpy array: the probe's comparison is the whole check

    def on(module, functional):
        return lambda *tensors: row.snippet(module, functional, _Replay(tensors))

    check(
        on(wb, wb_f),
        recorder.arrays,
        torch_fn=on(torch, torch_f),
        # in-place ops on leaves that require grad are errors; some ops torch cannot derive
        grad=row.area != "in place" and _torch_differentiates(on(torch, torch_f), recorder),
    )


def _torch_differentiates(fn, recorder: _Replay) -> bool:
    """Whether torch has a usable derivative for the snippet (``floor_divide`` has none)."""
    inputs = [torch.tensor(a, requires_grad=a.dtype.kind == "f") for a in recorder.arrays]
    out = fn(*inputs)
    outs = out if isinstance(out, tuple | list) else (out,)
    total = sum(o.float().sum() for o in outs if isinstance(o, torch.Tensor) and o.requires_grad)
    if not isinstance(total, torch.Tensor):
        return True  # nothing to derive: check() compares the values only
    try:
        total.backward()
    except RuntimeError as exc:
        if "is not implemented" not in str(exc):
            raise
        return False
    # a ZeroTensor gradient (torch.sgn's) cannot become numpy: the values are compared only
    return not any(t.grad is not None and torch._is_zerotensor(t.grad) for t in inputs)


def test_table_is_current() -> None:
    assert DOC.read_text() == table(), (
        "docs/pytorch_compat.md is stale: run `python tests/compat/compat_probe.py --write "
        "docs/pytorch_compat.md`"
    )
