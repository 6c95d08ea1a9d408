"""The devices this machine has, with their memory: the data behind ``%wb_devices`` and the
memory widget."""

from __future__ import annotations

import html

from ..device import KINDS, Device, _load_backend
from ..memory import memory_stats
from ..printing import human_bytes


def available() -> list[Device]:
    """Every usable device: the CPU, then each CUDA and Metal device."""
    devices = [Device.cpu()]
    for kind in KINDS[1:]:
        try:
            backend = _load_backend(kind)
            ok, _ = backend.is_available()
            count = backend.device_count() if ok else 0
        except Exception:  # a backend that cannot even import is simply absent here
            count = 0
        devices.extend(Device(kind, i) for i in range(count))
    return devices


def synchronize_all(devices: list[Device]) -> None:
    for device in devices:
        if not device.is_cpu:
            device.synchronize()


def describe(device: Device) -> dict:
    """``device``, ``backend``, ``name`` and the ``*_bytes`` of ``memory_stats`` plus
    ``total_bytes`` (None when the backend cannot tell)."""
    backend = device.backend
    name_fn = getattr(backend, "device_name", None)
    total_fn = getattr(backend, "total_memory", None)
    row = {
        "device": str(device),
        "backend": backend.__name__.rsplit(".", 1)[-1],
        "name": name_fn(device.index) if name_fn else _cpu_name() if device.is_cpu else device.kind,
        "total_bytes": total_fn(device.index)
        if total_fn
        else (_system_ram()[0] if device.is_cpu else None),
    }
    row.update({k: v for k, v in memory_stats(device).items() if k.endswith("_bytes")})
    return row


def _cpu_name() -> str:
    import platform

    return platform.processor() or platform.machine() or "cpu"


def _system_ram() -> tuple[int | None, int | None]:
    """(total, available) bytes of system RAM, from /proc/meminfo or sysconf; None if unknown."""
    try:
        with open("/proc/meminfo") as f:
            info = {line.split(":")[0]: int(line.split()[1]) * 1024 for line in f}
        return info.get("MemTotal"), info.get("MemAvailable")
    except (OSError, ValueError, IndexError):
        pass
    try:
        import os

        page = os.sysconf("SC_PAGE_SIZE")
        return page * os.sysconf("SC_PHYS_PAGES"), page * os.sysconf("SC_AVPHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None, None


def system_ram() -> tuple[int | None, int | None]:
    return _system_ram()


_COLUMNS = (
    "device",
    "backend",
    "name",
    "active_bytes",
    "peak_bytes",
    "cached_bytes",
    "total_bytes",
)


def _cell(key: str, value) -> str:
    if key.endswith("_bytes"):
        return "-" if value is None else human_bytes(value)
    return str(value)


class DeviceTable:
    """What ``%wb_devices`` shows: text and HTML tables of ``describe(d)`` for every device."""

    def __init__(self, rows: list[dict]) -> None:
        self.rows = rows

    def __repr__(self) -> str:
        header = [c.replace("_bytes", "") for c in _COLUMNS]
        body = [[_cell(c, r[c]) for c in _COLUMNS] for r in self.rows]
        widths = [max(len(x) for x in col) for col in zip(header, *body, strict=False)]
        lines = [
            "  ".join(x.ljust(w) for x, w in zip(row, widths, strict=True))
            for row in [header, *body]
        ]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{c.replace('_bytes', '')}</th>" for c in _COLUMNS)
        rows = "".join(
            "<tr>" + "".join(f"<td>{html.escape(_cell(c, r[c]))}</td>" for c in _COLUMNS) + "</tr>"
            for r in self.rows
        )
        return f"<table class='wb-devices'><tr>{head}</tr>{rows}</table>"


def device_table() -> DeviceTable:
    return DeviceTable([describe(d) for d in available()])
