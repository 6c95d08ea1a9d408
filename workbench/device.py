"""Devices and how a device finds its backend.

A backend is the module ``workbench.backends.<kind>``; it exposes ``Storage`` (the class holding
device memory and implementing every op, see ``backends/base.py``), ``is_available()`` returning
``(ok, reason)``, ``device_count()`` and ``synchronize(index)``.
"""

from __future__ import annotations

import importlib
import sys
from functools import cache
from types import ModuleType

from .errors import DeviceUnavailable, WorkbenchError

KINDS = ("cpu", "cuda", "metal")


class Device:
    """A device: ``Device.cpu()``, ``Device.cuda(0)``, ``Device.metal(0)``, ``Device("cuda:1")``."""

    __slots__ = ("kind", "index", "_backend")

    def __new__(cls, spec: str | Device = "cpu", index: int | None = None) -> Device:
        if isinstance(spec, Device):
            return spec
        return _device(*_parse(spec, index))

    @staticmethod
    def cpu() -> Device:
        return CPU

    @staticmethod
    def cuda(index: int = 0) -> Device:
        return _device("cuda", index)

    @staticmethod
    def metal(index: int = 0) -> Device:
        return _device("metal", index)

    @property
    def backend(self) -> ModuleType:
        """The backend module, imported on first use; raises DeviceUnavailable with the reason."""
        backend = self._backend
        if backend is None:
            try:
                backend = _load_backend(self.kind)
            except ImportError as exc:
                raise DeviceUnavailable(
                    f"device {self} is not available: the {self.kind} backend cannot be "
                    f"imported ({exc})"
                ) from exc
            ok, reason = backend.is_available()
            if not ok:
                raise DeviceUnavailable(f"device {self} is not available: {reason}")
            count = backend.device_count()
            if self.index >= count:
                raise DeviceUnavailable(
                    f"device {self} is not available: "
                    f"this machine has {count} {self.kind} device(s)"
                )
            object.__setattr__(self, "_backend", backend)
        return backend

    @property
    def is_cpu(self) -> bool:
        return self.kind == "cpu"

    def synchronize(self) -> None:
        """Wait for all work queued on this device."""
        self.backend.synchronize(self.index)

    def __repr__(self) -> str:
        return "cpu" if self.kind == "cpu" else f"{self.kind}:{self.index}"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            other = Device(other)
        return self is other

    def __hash__(self) -> int:
        return hash((self.kind, self.index))

    def __reduce__(self):
        return (Device, (repr(self),))


def _parse(spec: str, index: int | None) -> tuple[str, int]:
    if not isinstance(spec, str):
        raise WorkbenchError(f"expected a device like 'cpu' or 'cuda:0', found {spec!r}")
    kind, _, idx = spec.partition(":")
    if kind not in KINDS:
        raise WorkbenchError(f"unknown device {spec!r}; expected one of {', '.join(KINDS)}")
    if idx:
        if not idx.isdigit():
            raise WorkbenchError(f"bad device index in {spec!r}")
        index = int(idx)
    return kind, 0 if index is None or kind == "cpu" else index


@cache
def _device(kind: str, index: int) -> Device:
    device = object.__new__(Device)
    object.__setattr__(device, "kind", kind)
    object.__setattr__(device, "index", index)
    object.__setattr__(device, "_backend", None)
    return device


@cache
def _load_backend(kind: str) -> ModuleType:
    """``workbench.backends.<kind>``; ImportError when it is missing or incomplete (a folder
    without its ``__init__.py`` imports as an empty namespace package)."""
    module = importlib.import_module(f"workbench.backends.{kind}")
    missing = [n for n in ("Storage", "is_available", "device_count") if not hasattr(module, n)]
    if missing:
        raise ImportError(f"workbench.backends.{kind} lacks {', '.join(missing)}")
    return module


CPU = _device("cpu", 0)


def is_available(kind: str) -> bool:
    """True if the backend for ``kind`` can run here (a driver and at least one device)."""
    try:
        backend = _load_backend(kind)
    except ImportError:
        return False
    ok, _ = backend.is_available()
    return bool(ok) and backend.device_count() > 0


def cuda_if_available(index: int = 0) -> Device:
    return Device.cuda(index) if is_available("cuda") else CPU


def metal_if_available(index: int = 0) -> Device:
    return Device.metal(index) if is_available("metal") else CPU


def device() -> Device:
    """The best device available here: on macOS Metal, elsewhere CUDA then Metal; else the
    CPU."""
    order = ("metal", "cuda") if sys.platform == "darwin" else ("cuda", "metal")
    for kind in order:
        if is_available(kind):
            return _device(kind, 0)
    return CPU
