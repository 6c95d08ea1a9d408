"""A shared IPython test shell with the extension loaded against a dummy comm manager."""

from __future__ import annotations

import pytest
from IPython.testing.globalipapp import get_ipython


class DummyComm:
    """Records what the kernel sends; ``deliver`` plays a frontend message."""

    def __init__(self) -> None:
        self.sent: list[dict] = []
        self.closed = False
        self._on_msg = None
        self._on_close = None

    def send(self, data=None, **kwargs) -> None:
        self.sent.append(data)

    def on_msg(self, callback) -> None:
        self._on_msg = callback

    def on_close(self, callback) -> None:
        self._on_close = callback

    def close(self, data=None, **kwargs) -> None:
        self.closed = True
        if self._on_close is not None:
            self._on_close({"content": {"data": data}})

    def deliver(self, data: dict) -> None:
        self._on_msg({"content": {"data": data}})


class DummyCommManager:
    def __init__(self) -> None:
        self.targets: dict = {}
        self.kernel_opened: list[tuple[str, dict, DummyComm]] = []

    def create_comm(self, target_name: str, data: dict | None = None) -> DummyComm:
        """What ``comm.create_comm`` does: a comm the kernel opens towards the frontend."""
        comm = DummyComm()
        self.kernel_opened.append((target_name, data, comm))
        return comm

    def register_target(self, name, fn) -> None:
        self.targets[name] = fn

    def unregister_target(self, name, fn):
        return self.targets.pop(name)

    def open(self, name: str, data: dict | None = None) -> DummyComm:
        """What a frontend's ``kernel.createComm(name).open(data)`` does on the kernel side."""
        comm = DummyComm()
        self.targets[name](comm, {"content": {"data": data or {}}})
        return comm


@pytest.fixture(scope="session")
def shell():
    """IPython's test shell; HTML and PNG output enabled as in a notebook kernel."""
    ip = get_ipython()
    for mime in ("text/html", "image/png"):
        ip.display_formatter.formatters[mime].enabled = True
    return ip


@pytest.fixture
def ext(shell):
    """The extension loaded in the test shell; unloaded afterwards."""
    from workbench.notebook import extension

    manager = DummyCommManager()
    state = extension.load(shell, comm_manager=manager)
    state.comm_manager_for_tests = manager
    yield state
    extension.unload(shell)


def run(shell, code: str, cell_id: str | None = None):
    """Run a cell like the kernel does; raise the cell's exception if any."""
    result = shell.run_cell(code, store_history=True, cell_id=cell_id)
    result.raise_error()
    return result
