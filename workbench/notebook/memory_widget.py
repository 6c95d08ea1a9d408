"""The live device/memory widget behind ``%wb_memory``: one bar per device plus system RAM.

A background thread refreshes the bars every ``interval`` seconds, sleeping on an
``Event`` (no busy loop); it stops on ``.stop()``, when the widget is closed, on
``%unload_ext workbench`` and at interpreter shutdown.
"""

from __future__ import annotations

import threading

from ..memory import STAT_KEYS
from ..printing import human_bytes
from .devices import available, describe, system_ram


def _bar(description: str):
    import ipywidgets as w

    bar = w.FloatProgress(value=0.0, min=0.0, max=1.0, description=description,
                          layout=w.Layout(width="320px"))  # fmt: skip
    label = w.Label(value="")
    return bar, label, w.HBox([bar, label])


class MemoryWidget:
    """``MemoryWidget(interval=1.0)``; display it in a notebook, ``.stop()`` to end refreshing."""

    def __init__(self, interval: float = 1.0, start: bool = True) -> None:
        import ipywidgets as w

        self.interval = max(0.05, float(interval))
        self.devices = available()
        self._bars = {str(d): _bar(str(d)) for d in self.devices}
        self._bars["RAM"] = _bar("system RAM")
        self.box = w.VBox([row for _, _, row in self._bars.values()])
        self.box.observe(self._closed, names="comm")
        self._stop = threading.Event()
        self._on_stop: list = []
        self._thread: threading.Thread | None = None
        self.refresh()
        if start:
            self._thread = threading.Thread(target=self._loop, name="wb-memory-widget", daemon=True)
            self._thread.start()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def refresh(self) -> None:
        """Read the memory stats once and update the bars."""
        for device in self.devices:
            row = describe(device)
            bar, label, _ = self._bars[str(device)]
            total = row.get("total_bytes") or 0
            used = row["active_bytes"] + row["cached_bytes"]
            # The CPU's "total" is all of RAM (the bar below): against it workbench's own
            # tensors would look like nothing, so its bar is scaled to the session's peak.
            scale = 0 if device.is_cpu else total
            bar.max = float(scale or max(row["peak_bytes"], used, 1))
            bar.value = float(min(used, bar.max))
            active, peak, cached = (human_bytes(row[k]) for k in STAT_KEYS)
            label.value = f"active {active}, peak {peak}, cached {cached}" + (
                f" of {human_bytes(total)}" if scale else " (bar: share of the peak)"
            )
        total, free = system_ram()
        bar, label, _ = self._bars["RAM"]
        if total and free is not None:
            bar.max = float(total)
            bar.value = float(total - free)
            label.value = f"{human_bytes(total - free)} used of {human_bytes(total)}"
        else:
            label.value = "unknown"

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.refresh()
            except Exception:  # a closed comm or a device gone: stop quietly
                break

    def on_stop(self, callback) -> None:
        self._on_stop.append(callback)

    def stop(self) -> None:
        """Stop the refresher thread (idempotent); the bars keep their last values."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)
        callbacks, self._on_stop = self._on_stop, []
        for callback in callbacks:
            callback(self)

    def close(self) -> None:
        self.stop()
        self.box.close()

    def _closed(self, change) -> None:
        if change["new"] is None:
            self.stop()

    def _repr_mimebundle_(self, **kwargs):
        return self.box._repr_mimebundle_(**kwargs)

    def __repr__(self) -> str:
        return f"MemoryWidget({len(self.devices)} device(s), running={self.running})"
