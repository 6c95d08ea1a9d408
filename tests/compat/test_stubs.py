"""The shipped type stubs are what tests/compat/stubgen.py writes from the live op registry,
and the typed example of the public API runs."""

from __future__ import annotations

import runpy
from pathlib import Path

import stubgen

import workbench as wb


def test_stubs_are_current() -> None:
    for path, make in stubgen.STUBS.items():
        assert path.read_text() == stubgen._formatted(make(), path), (
            f"{path.name} is stale: run `python tests/compat/stubgen.py`"
        )


def test_every_op_and_method_is_in_the_stubs() -> None:
    tensor_stub = (Path(wb.__file__).parent / "tensor.pyi").read_text()
    init_stub = (Path(wb.__file__).parent / "__init__.pyi").read_text()
    for name in ("silu", "softmax", "conv2d", "einsum", "cumprod", "float", "long", "type"):
        assert f"def {name}(" in tensor_stub or name == "einsum"
    for name in wb.__all__:
        assert (
            f" as {name}\n" in init_stub
            or f"\n{name}: " in init_stub
            or (f"def {name}(" in init_stub)
        ), name


def test_py_typed_ships() -> None:
    assert (Path(wb.__file__).parent / "py.typed").exists()


def test_typed_example_runs() -> None:
    runpy.run_path(str(Path(__file__).parents[1] / "typing" / "public_api_usage.py"),
                   run_name="__main__")  # fmt: skip
