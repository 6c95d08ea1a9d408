"""The op table (``backends/optable.py``): the generated kernel header is current, it covers
every elementwise/reduction op the op layer dispatches, the CPU dispatch and CUDA kernel names
come from it, and the CPU's own implementations agree with the table's numpy references."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from workbench.backends import optable
from workbench.backends.cpu import elementwise as cpu_ew
from workbench.backends.cuda import kernels as cuda_kernels

ROOT = Path(__file__).resolve().parents[1]
FAMILY = {"unary": "unary", "binary": "binary", "binary_scalar": "binary", "cmp": "cmp",
          "cmp_scalar": "cmp", "reduce": "reduce"}  # fmt: skip


def test_generated_header_is_current():
    assert optable.HEADER.read_text() == optable.header(), (
        "kernels/gpu/optable.h is stale: run python -m workbench.backends.optable"
    )


def test_every_row_is_well_formed():
    seen = set()
    for op in optable.OPS:
        assert (op.kind, op.name) not in seen
        seen.add((op.kind, op.name))
        assert op.kind in ("unary", "binary", "cmp", "reduce")
        assert op.result in ("same", "bool")
        if op.kind != "reduce":
            assert op.dtypes, f"{op.name} has no kernel maths"
            assert op.arity == (1 if op.kind == "unary" else 2)


def _dispatched() -> set[tuple[str, str]]:
    """(family, op name) for every constant op name the op layer passes to a storage's
    unary/binary/cmp/reduce family, directly or through helpers that forward a parameter
    (``_unary(name, ...)`` -> ``x._storage.unary(name, ...)``), found by reading the source."""
    trees = [ast.parse(p.read_text()) for p in sorted((ROOT / "workbench").rglob("*.py"))]
    functions = [f for t in trees for f in ast.walk(t) if isinstance(f, ast.FunctionDef)]
    forwarders: dict[str, tuple[str, int]] = {}  # helper name -> (family, parameter index)

    def target(call: ast.Call) -> tuple[str, int] | None:
        fn = call.func
        if isinstance(fn, ast.Attribute) and fn.attr in FAMILY:
            base = fn.value
            if isinstance(base, ast.Attribute) and base.attr == "_storage":
                return FAMILY[fn.attr], 0
        if isinstance(fn, ast.Name) and fn.id in forwarders:
            return forwarders[fn.id]
        return None

    changed = True
    while changed:
        changed = False
        for f in functions:
            params = [a.arg for a in f.args.args]
            for call in (n for n in ast.walk(f) if isinstance(n, ast.Call)):
                hit = target(call)
                if hit is None or len(call.args) <= hit[1]:
                    continue
                arg = call.args[hit[1]]
                if isinstance(arg, ast.Name) and arg.id in params and f.name not in forwarders:
                    forwarders[f.name] = (hit[0], params.index(arg.id))
                    changed = True
    found = set()
    for f in functions:
        for call in (n for n in ast.walk(f) if isinstance(n, ast.Call)):
            hit = target(call)
            if hit is not None and len(call.args) > hit[1]:
                arg = call.args[hit[1]]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    found.add((hit[0], arg.value))
    return found


def test_table_covers_every_dispatched_op():
    dispatched = _dispatched()
    table = {(op.kind, op.name) for op in optable.OPS}
    missing = sorted(dispatched - table)
    assert not missing, f"the op layer dispatches ops the table lacks: {missing}"
    by_family = {f: {n for k, n in dispatched if k == f} for f in ("unary", "binary", "cmp")}
    # the scan sees the op layer (it cannot pass by finding nothing)
    assert {"exp", "gelu_erf", "isnan", "logical_not"} <= by_family["unary"]
    assert {"add", "atan2", "logical_xor"} <= by_family["binary"]
    assert {"eq", "ge"} <= by_family["cmp"]
    assert {("reduce", "sum"), ("reduce", "argmax"), ("reduce", "all")} <= dispatched


def test_cpu_dispatch_comes_from_the_table():
    for kind, table in (("unary", cpu_ew.UNARY), ("binary", cpu_ew.BINARY), ("cmp", cpu_ew.CMP)):
        assert list(table) == list(optable.numpy_table(kind))
    assert cpu_ew._BOOL_RESULT == {"isnan", "isinf", "logical_not"}
    assert cpu_ew._LOGICAL == {"logical_and", "logical_or", "logical_xor"}


def test_cuda_kernel_names_come_from_the_table():
    assert set(cuda_kernels.FLOAT_UNARY) == {
        op.name for op in optable.ops("unary") if op.gpu is not None
    }
    assert set(cuda_kernels.INT_BINARY) == {
        op.name for op in optable.ops("binary") if op.gpu_int is not None
    }
    assert cuda_kernels.unary_name("gelu_erf", "bf16") == "unary_gelu_erf_bf16"
    assert cuda_kernels.REDUCE == optable.names("reduce")


@pytest.mark.parametrize("name", [n for n, f in cpu_ew.UNARY.items()
                                  if f is not optable.numpy_table("unary")[n]])  # fmt: skip
def test_cpu_implementation_matches_the_reference(name):
    """The CPU's own functions (faster, or exact at ±inf) against the table's maths."""
    rng = np.random.default_rng(0)
    x64 = np.concatenate([rng.normal(0, 3, 4096), [0.0, -0.0, 1e-30, 30.0, -30.0]])
    reference = optable.numpy_table("unary")[name](x64)
    for dtype, tol in ((np.float64, 1e-12), (np.float32, 2e-6)):
        got = cpu_ew.UNARY[name](x64.astype(dtype)).astype(np.float64)
        np.testing.assert_allclose(got, reference, rtol=tol, atol=tol)
