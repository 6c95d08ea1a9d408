"""The memory widget: bars per device plus RAM, a refresher thread that stops cleanly."""

from __future__ import annotations

import threading
import time

import pytest

import workbench as wb
from workbench.notebook.memory_widget import MemoryWidget

pytest.importorskip("ipywidgets")


def _wait(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def test_bars_and_refresh():
    widget = MemoryWidget(start=False)
    assert not widget.running
    labels = [row.children[0].description for row in widget.box.children]
    assert labels[0] == "cpu" and labels[-1] == "system RAM"
    x = wb.zeros(256, 1024)  # 1 MiB
    widget.refresh()
    bar, label = widget.box.children[0].children
    assert bar.value >= x.nbytes and "active" in label.value and "peak" in label.value
    # The CPU bar is scaled to workbench's peak, not to all of RAM, so it shows something.
    stats = wb.memory_stats("cpu")
    assert bar.max == max(stats["peak_bytes"], stats["active_bytes"] + stats["cached_bytes"])
    assert (
        bar.value / bar.max >= x.nbytes / stats["peak_bytes"] and "share of the peak" in label.value
    )
    assert "used of" in widget.box.children[-1].children[1].value


def test_thread_refreshes_and_stops():
    widget = MemoryWidget(interval=0.05)
    assert widget.running
    label = widget.box.children[0].children[1]
    label.value = "stale"
    assert _wait(lambda: label.value != "stale")  # refreshed by the thread
    stopped = []
    widget.on_stop(stopped.append)
    thread = widget._thread
    widget.stop()
    assert not widget.running and not thread.is_alive() and stopped == [widget]
    widget.stop()  # idempotent
    assert stopped == [widget]


def test_closing_the_widget_stops_the_thread():
    before = threading.active_count()
    widget = MemoryWidget(interval=0.05)
    assert threading.active_count() == before + 1
    widget.box.close()
    assert _wait(lambda: not widget.running)
    assert threading.active_count() == before


def test_magic_registers_and_unload_stops(shell, ext):
    widget = shell.run_line_magic("wb_memory", "0.05")
    assert widget in ext.widgets and widget.running
    widget.stop()
    assert widget not in ext.widgets  # forgotten once stopped
    widget = shell.run_line_magic("wb_memory", "")
    assert widget.interval == 1.0
    ext.stop_widgets()  # what atexit runs at kernel shutdown
    assert not widget.running and ext.widgets == []
