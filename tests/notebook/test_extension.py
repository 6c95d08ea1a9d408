"""Load, unload and reload leave exactly one of everything."""

from __future__ import annotations

import threading

from conftest import DummyCommManager

import workbench as wb
from workbench.notebook import extension
from workbench.notebook.timings import COMM_TARGET


def _counts(shell, manager) -> dict:
    html = shell.display_formatter.formatters["text/html"]
    return {
        "pre": len(shell.events.callbacks["pre_run_cell"]),
        "post": len(shell.events.callbacks["post_run_cell"]),
        "html": len(html.type_printers) + len(html.deferred_printers),
        "line_magics": len(shell.magics_manager.magics["line"]),
        "cell_magics": len(shell.magics_manager.magics["cell"]),
        "targets": len(manager.targets),
        "threads": threading.active_count(),
        "views": hasattr(wb.Tensor, "plt"),
    }


def test_load_unload_leaves_no_trace(shell):
    manager = DummyCommManager()
    before = _counts(shell, manager)
    extension.load(shell, comm_manager=manager)
    loaded = _counts(shell, manager)
    assert loaded["pre"] == before["pre"] + 1 and loaded["post"] == before["post"] + 1
    assert loaded["targets"] == 1 and COMM_TARGET in manager.targets
    assert "wb_profile" in shell.magics_manager.magics["cell"]
    assert "wb_devices" in shell.magics_manager.magics["line"]
    for _ in range(3):  # a reload replaces everything instead of adding a copy
        extension.load(shell, comm_manager=manager)
        assert _counts(shell, manager) == loaded
    extension.unload(shell)
    assert _counts(shell, manager) == before
    assert "wb_profile" not in shell.magics_manager.magics["cell"]
    extension.unload(shell)  # unloading twice is harmless


def test_reload_ext_magic(shell):
    """``%reload_ext workbench`` through IPython's own extension manager."""
    shell.run_cell("%load_ext workbench").raise_error()
    try:
        once = _counts(shell, DummyCommManager())
        for _ in range(2):
            shell.run_cell("%reload_ext workbench").raise_error()
        assert _counts(shell, DummyCommManager()) == once
    finally:
        shell.run_cell("%unload_ext workbench").raise_error()
    assert extension.state(shell) is None


def test_widgets_stop_on_unload(shell, ext):
    widget = shell.run_line_magic("wb_memory", "0.05")
    assert widget.running
    extension.unload(shell)
    assert not widget.running
    extension.load(shell, comm_manager=DummyCommManager())


def test_tensor_html_formatter(shell, ext):
    x = wb.tensor([[1.0, 2.0], [3.0, float("nan")]])
    data, _ = shell.display_formatter.format(x)
    assert "Tensor[2, 2]" in data["text/html"] and "1 NaN</b>" in data["text/html"]
    assert "text/plain" in data


def test_module_html_formatter(shell, ext):
    nn = __import__("pytest").importorskip("workbench.nn")
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    data, _ = shell.display_formatter.format(model)
    assert "parameters" in data["text/html"]
    assert f"{4 * 3 + 3 + 3 * 2 + 2:,} parameters" in data["text/html"]
