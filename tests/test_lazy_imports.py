"""``import workbench`` stays light: the slow imports (ml_dtypes, scipy, the model code, the
notebook stack) wait for their first use, and then work. What a fresh interpreter has loaded is
a behaviour, checked here; the time it takes is measured by ``benchmarks/bench_import.py``."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from workbench.backends.lazy import LazyValues, lazy_module

# Never imported by ``import workbench`` (third-party packages and workbench's own heavy parts).
HEAVY = (
    "ml_dtypes", "scipy", "numpy.f2py", "numpy.testing", "numpy.random", "torch", "jinja2",
    "tokenizers", "ipywidgets", "IPython", "matplotlib", "tqdm", "workbench.quantized",
    "workbench.models", "workbench.registry", "workbench.notebook", "workbench.serve",
    "workbench.distributed", "workbench.backends.cpu.ggml",
)  # fmt: skip
# Imported at the first ``wb.nn`` / ``wb.optim`` / ``wb.io`` (or one of their names).
DEFERRED = ("workbench.nn", "workbench.optim", "workbench.io")


def _fresh(script: str, **env: str) -> dict:
    """Run ``script`` in a new interpreter (after ``import workbench as wb``); it prints JSON."""
    import os

    code = "import sys, json\nimport workbench as wb\n" + textwrap.dedent(script)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, **env}, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])


def _loaded(names) -> str:
    return f"[m for m in {list(names)!r} if m in sys.modules]"


def test_import_workbench_leaves_the_heavy_modules_unloaded():
    found = _fresh(f"print(json.dumps(dict(heavy={_loaded(HEAVY)}, deferred={_loaded(DEFERRED)})))")
    assert found == {"heavy": [], "deferred": []}


def test_bf16_and_the_deferred_packages_work_after_a_light_import(tmp_path):
    """bf16 made by workbench, bf16 arrays the user brings (ml_dtypes imported by the user, after
    workbench), bf16 safetensors, and ``wb.nn`` / ``wb.io`` names reached through the package."""
    path = tmp_path / "w.safetensors"
    found = _fresh(f"""
        import numpy as np
        values = [1.5, -2.25, 3.0e38, 1.0 / 3.0]
        t = wb.tensor(values).to_dtype(wb.bf16)
        import ml_dtypes  # the reference rounding, imported only now
        ref = np.array(values, np.float32).astype(ml_dtypes.bfloat16)
        own = np.array([0.5, 7.0, -1.0], ml_dtypes.bfloat16)
        u = wb.from_numpy(own)
        doubled = (u * 2).numpy()
        wb.save_safetensors({{"t": t}}, {str(path)!r})
        back = wb.io.load_safetensors({str(path)!r})["t"]
        layer = wb.nn.Linear(3, 2)
        print(json.dumps(dict(
            same_bits=t.numpy().view(np.uint16).tolist() == ref.view(np.uint16).tolist(),
            t_dtype=str(t.numpy().dtype), u_dtype=repr(u.dtype),
            doubled=doubled.astype(np.float32).tolist(), doubled_dtype=str(doubled.dtype),
            half_compute=repr((u.softmax(-1)).dtype),
            back=back.numpy().view(np.uint16).tolist() == ref.view(np.uint16).tolist(),
            back_dtype=repr(back.dtype), layer=tuple(layer.weight.shape),
        )))
    """)
    assert found == {
        "same_bits": True, "t_dtype": "bfloat16", "u_dtype": "wb.bf16",
        "doubled": [1.0, 14.0, -2.0], "doubled_dtype": "bfloat16", "half_compute": "wb.bf16",
        "back": True, "back_dtype": "wb.bf16", "layer": [2, 3],
    }  # fmt: skip


def test_scipy_backed_ops_import_scipy_at_first_use():
    """On the numpy path (``WORKBENCH_NATIVE=0``) erf and sigmoid are scipy's ufuncs and the
    embedding-style ``index_add`` a scipy.sparse product: compared with math / numpy."""
    found = _fresh(
        """
        import math
        import numpy as np
        before = "scipy" in sys.modules
        xs = [-3.0, -0.5, 0.0, 0.25, 2.0]
        erf = wb.erf(wb.tensor(xs, dtype=wb.f64)).numpy()
        sig = wb.sigmoid(wb.tensor(xs, dtype=wb.f64)).numpy()
        rng = np.random.default_rng(0)
        idx = rng.integers(0, 100, 300)
        src = rng.standard_normal((300, 64)).astype(np.float32)
        got = wb.index_add(wb.zeros(100, 64), 0, wb.tensor(idx), wb.tensor(src)).numpy()
        ref = np.zeros((100, 64), np.float32)
        np.add.at(ref, idx, src)
        print(json.dumps(dict(
            before=before, special="scipy.special" in sys.modules,
            sparse="scipy.sparse" in sys.modules,
            erf=max(abs(e - math.erf(x)) for e, x in zip(erf, xs)),
            sig=max(abs(s - 1 / (1 + math.exp(-x))) for s, x in zip(sig, xs)),
            index_add=float(np.abs(got - ref).max()),
        )))
        """,
        WORKBENCH_NATIVE="0",
    )
    assert found["before"] is False and found["special"] and found["sparse"]
    assert found["erf"] < 1e-15 and found["sig"] < 1e-15 and found["index_add"] < 1e-5


def test_lazy_module_imports_at_the_first_attribute_and_keeps_it():
    json_module = lazy_module("json")
    assert json_module.dumps is json.dumps and "dumps" in vars(json_module)
    with pytest.raises(AttributeError):
        json_module.__wrapped__  # noqa: B018  (introspection never imports)
    missing = lazy_module("workbench_no_such_module")
    with pytest.raises(ModuleNotFoundError):
        missing.anything  # noqa: B018


def test_lazy_values_are_made_once_at_their_first_lookup():
    calls = []
    table = LazyValues({"a": 1}, lazy={"b": lambda: calls.append("b") or 2})
    assert "b" not in table and calls == []
    assert table["b"] == 2 and table["b"] == 2 and calls == ["b"] and table == {"a": 1, "b": 2}
    with pytest.raises(KeyError):
        table["c"]
