"""The GPU base shared by CUDA and Metal: kernel-name tables per device, the driver holder."""

from __future__ import annotations

import pytest

from workbench.backends.cuda import kernels as cuda_kernels
from workbench.backends.errors import UnsupportedOnDevice
from workbench.backends.gpu.driver_holder import DriverHolder
from workbench.backends.metal.storage import NAMES as METAL_NAMES


def test_unsupported_names_the_device():
    with pytest.raises(
        UnsupportedOnDevice, match="op exp is not implemented on metal for dtype f64"
    ):
        METAL_NAMES.unary_name("exp", "f64")
    with pytest.raises(UnsupportedOnDevice, match="op exp is not implemented on cuda for dtype u8"):
        cuda_kernels.unary_name("exp", "u8")
    assert cuda_kernels.unary_name("exp", "f64") == "unary_exp_f64"


def test_metal_tables_are_cuda_less_f64():
    cuda, metal = cuda_kernels.all_names(), METAL_NAMES.all_names()
    assert cuda.keys() == metal.keys()
    for family in cuda:
        assert set(metal[family]) == {k for k in cuda[family] if "f64" not in k}, family
    assert "i8" in METAL_NAMES.INT and "gemm_bf16" in metal["matmul"]


def test_driver_holder_remembers_the_reason_and_swaps():
    calls = []

    def make():
        calls.append(1)
        raise ImportError("no module named Metal")

    holder = DriverHolder(make, lambda err: f"cannot import: {err}")
    for _ in range(2):
        with pytest.raises(RuntimeError, match="cannot import: no module named Metal"):
            holder.get()
    assert len(calls) == 1  # the failure is remembered
    fake = object()
    assert holder.set(fake) is None and holder.get() is fake
    assert holder.set(None) is fake
    with pytest.raises(RuntimeError):
        holder.get()  # None re-detects
    assert len(calls) == 2


def test_unexpected_failures_propagate():
    holder = DriverHolder(lambda: 1 / 0, lambda err: None)
    with pytest.raises(ZeroDivisionError):
        holder.get()


def test_wb_device_prefers_metal_on_macos(monkeypatch):
    import sys

    device_mod = sys.modules["workbench.device"]
    monkeypatch.setattr(device_mod, "is_available", lambda kind: kind in ("cuda", "metal"))
    monkeypatch.setattr(device_mod.sys, "platform", "darwin")
    assert str(device_mod.device()) == "metal:0"
    monkeypatch.setattr(device_mod.sys, "platform", "linux")
    assert str(device_mod.device()) == "cuda:0"
