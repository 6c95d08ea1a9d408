"""The ``workbench.timings`` comm and auto mode (docs/timings-payload.md).

The frontend opens a comm to the target ``workbench.timings``, or the kernel opens one itself
when auto mode is turned on (a frontend's own open waits behind queued cells under Run All,
while the kernel's reaches it at once). The kernel answers ``{"type": "hello"}`` with
``{"type": "ready", "version": 2, "auto": bool}``, tells every comm ``{"type": "state",
"auto": bool}`` when auto mode is turned on or off, and in auto mode sends ``{"type":
"timings", "payload": ...}`` after every cell (IPython's ``post_run_cell``), adding no outputs
to the notebook. Payloads made while no comm is open wait (the last ``BUFFERED``) and go out in
order on the next one to open.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from ..profiler import Profile

COMM_TARGET = "workbench.timings"
MIME = "application/vnd.workbench.timings+json"
# The comm protocol's version (docs/timings-payload.md); the payload has its own.
COMM_VERSION = 2
BUFFERED = 200


def _data(msg) -> dict:
    content = (msg or {}).get("content") or {}
    data = content.get("data")
    return data if isinstance(data, dict) else {}


class Timings:
    """Open comms, the current cell's id, and auto mode's per-cell profile."""

    def __init__(self, shell=None, create_comm: Callable[..., object] | None = None) -> None:
        self.shell = shell
        self.comms: list = []
        self.cell_id: str | None = None
        self.execution_count: int | None = None
        self._auto = False
        self._profile: Profile | None = None
        self._create_comm = create_comm  # (target_name=, data=) -> comm, from the kernel side
        self._waiting: deque[dict] = deque(maxlen=BUFFERED)

    @property
    def auto(self) -> bool:
        """Auto mode: every cell is profiled and its payload sent on the comms."""
        return self._auto

    @auto.setter
    def auto(self, on: bool) -> None:
        self._auto = bool(on)
        if self._auto and not self.comms:
            self._open_from_kernel()
        self._broadcast({"type": "state", "auto": self._auto})

    def _ready(self) -> dict:
        return {"type": "ready", "version": COMM_VERSION, "auto": self._auto}

    # -- comms -------------------------------------------------------------------------------
    def open_comm(self, comm, msg) -> None:
        """Target handler: keep ``comm`` until it closes; answer its hello; deliver what
        waited for a comm."""
        self._adopt(comm)
        if _data(msg).get("type") == "hello":
            comm.send(self._ready())
        self._flush()

    def _open_from_kernel(self) -> None:
        """Open a comm to the frontend (it travels on iopub, not behind queued cells)."""
        if self._create_comm is None:
            return
        try:
            comm = self._create_comm(target_name=COMM_TARGET, data=self._ready())
        except Exception:  # no frontend (a terminal IPython): payloads wait for one
            return
        self._adopt(comm)

    def _adopt(self, comm) -> None:
        self.comms.append(comm)
        comm.on_msg(lambda message: self._on_msg(comm, message))
        comm.on_close(lambda message: self._forget(comm))

    def _on_msg(self, comm, msg) -> None:
        if _data(msg).get("type") == "hello":
            comm.send(self._ready())

    def _forget(self, comm) -> None:
        if comm in self.comms:
            self.comms.remove(comm)

    def _broadcast(self, message: dict) -> bool:
        """Send on every comm; whether one took it."""
        sent = False
        for comm in list(self.comms):
            try:
                comm.send(message)
                sent = True
            except Exception:  # a comm whose frontend went away: drop it, keep the others
                self._forget(comm)
        return sent

    def send(self, payload: dict) -> None:
        """Send a cell's payload, or keep it for the next comm to open."""
        self._flush()
        if not self._broadcast({"type": "timings", "payload": payload}):
            self._waiting.append(payload)

    def _flush(self) -> None:
        while self._waiting and self.comms:
            payload = self._waiting[0]
            if not self._broadcast({"type": "timings", "payload": payload}):
                return
            self._waiting.popleft()

    # -- IPython events --------------------------------------------------------------------
    def pre_run_cell(self, info) -> None:
        self.cell_id = getattr(info, "cell_id", None)
        # The displayhook's count is the one Out[n] gets, whichever IPython advances
        # ``execution_count`` before or after the cell.
        hook = getattr(self.shell, "displayhook", None)
        store = getattr(info, "store_history", False)
        self.execution_count = hook.prompt_count if store and hook is not None else None
        if self.auto and self._profile is None:
            self._profile = Profile()
            self._profile.__enter__()

    def post_run_cell(self, result) -> None:
        profile, self._profile = self._profile, None
        if profile is None:
            return
        profile.__exit__(None, None, None)
        if self.auto and profile.events:  # a cell that ran no workbench op has no timings
            info = getattr(result, "info", None)
            self.send(
                profile.timings_payload(
                    getattr(info, "cell_id", None) or self.cell_id,
                    getattr(result, "execution_count", None),
                )
            )

    @property
    def profiling(self) -> Profile | None:
        """Auto mode's profile of the running cell, if any."""
        return self._profile

    def stop(self) -> None:
        """Leave auto mode, restoring the profiler hook if a cell is being profiled."""
        self._auto = False
        self._waiting.clear()
        if self._profile is not None:
            self._profile.__exit__(None, None, None)
            self._profile = None
