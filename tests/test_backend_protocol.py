"""Every backend's storage against the protocol in ``backends/base.py``: each core method is
there with the protocol's parameters (names, kinds, defaults), each optional one it has too, and
the op layer calls nothing outside the protocol."""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import numpy as np
import pytest

import workbench as wb
from workbench.backends import base

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("cpu", "cuda", "metal")


def _storages() -> dict[str, type]:
    """Device kind -> Storage class, for every backend that has one (metal has none yet)."""
    found = {}
    for kind in KINDS:
        module = importlib.import_module(f"workbench.backends.{kind}")
        if hasattr(module, "Storage"):
            found[kind] = module.Storage
    return found


STORAGES = _storages()


def _params(fn) -> list[tuple[str, object, object]]:
    """(name, kind, default) of each parameter after ``self``/``cls`` (annotations differ:
    each backend names its own storage class)."""
    if isinstance(fn, property):
        return []
    params = list(inspect.signature(fn).parameters.values())
    if isinstance(inspect.getattr_static(fn, "__self__", None), type) or (
        params and params[0].name in ("self", "cls")
    ):
        params = params[1:] if params and params[0].name in ("self", "cls") else params
    return [(p.name, p.kind, p.default) for p in params]


def _protocol_member(protocol: type, name: str):
    member = vars(protocol)[name]
    return member.__func__ if isinstance(member, classmethod) else member


def _backend_member(cls: type, name: str):
    member = inspect.getattr_static(cls, name)
    return member.__func__ if isinstance(member, classmethod | staticmethod) else member


def test_the_backends_are_found():
    assert {"cpu", "cuda"} <= set(STORAGES)


@pytest.mark.parametrize("kind", sorted(STORAGES))
@pytest.mark.parametrize("name", base.CORE_METHODS)
def test_core_method_matches_the_protocol(kind, name):
    cls = STORAGES[kind]
    assert hasattr(cls, name), f"{kind} storage lacks the core method {name}"
    expected = _params(_protocol_member(base.CoreStorage, name))
    found = _params(_backend_member(cls, name))
    assert found == expected, f"{kind}.{name}{found} differs from the protocol's {expected}"


@pytest.mark.parametrize("kind", sorted(STORAGES))
@pytest.mark.parametrize("name", base.FUSED_METHODS)
def test_optional_method_matches_the_protocol(kind, name):
    cls = STORAGES[kind]
    if not callable(getattr(cls, name, None)):
        pytest.skip(f"{kind} has no {name} (optional)")
    expected = _params(_protocol_member(base.FusedStorage, name))
    found = _params(_backend_member(cls, name))
    assert found == expected, f"{kind}.{name}{found} differs from the protocol's {expected}"


def test_a_changed_signature_is_caught():
    """The comparison sees a renamed parameter and a changed default (the test can fail)."""
    expected = _params(_protocol_member(base.CoreStorage, "binary_scalar"))

    def renamed(self, op, layout, value, reverse=False): ...

    def other_default(self, op, layout, scalar, reverse=True): ...

    assert _params(renamed) != expected
    assert _params(other_default) != expected


def test_storages_satisfy_the_runtime_protocol():
    cpu = STORAGES["cpu"].from_numpy(np.zeros(3, np.float32))
    assert isinstance(cpu, base.CoreStorage)


def test_optional_tier_is_checked_explicitly():
    class ToyStorage(base.BackendStorage):  # a device with no fused kernels
        device_kind = "toy"

    toy, cpu = ToyStorage(), wb.zeros(2, 3)._storage
    assert base.supports(cpu, "softmax") and not base.supports(toy, "softmax")
    with pytest.raises(wb.UnsupportedOnDevice, match="op rope is not implemented on toy"):
        base.require(toy, "rope")
    with pytest.raises(wb.UnsupportedOnDevice, match="op qmatmul is not implemented on toy"):
        toy.qmatmul  # noqa: B018  (reading the attribute raises)
    assert base.require(cpu, "softmax").__name__ == "softmax"
    with pytest.raises(ValueError, match="not an optional storage method"):
        base.supports(cpu, "unary")


def test_the_op_layer_calls_only_protocol_methods():
    called = set()
    for path in (ROOT / "workbench").rglob("*.py"):
        called |= set(re.findall(r"_storage\.([a-z_0-9]+)\(", path.read_text()))
        called |= set(re.findall(r"\bStorage\.([a-z_0-9]+)\(", path.read_text()))
    unknown = sorted(called - set(base.METHODS))
    assert not unknown, f"the op layer calls storage methods outside the protocol: {unknown}"
    assert {"unary", "conv2d", "rope", "from_numpy"} <= called  # the scan sees calls
