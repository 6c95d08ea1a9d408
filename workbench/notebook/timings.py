"""The ``workbench.timings`` comm and auto mode (docs/timings-payload.md).

The frontend opens a comm to the target ``workbench.timings``; the kernel keeps the open comms,
answers ``{"type": "hello"}`` with ``{"type": "ready", "version": 1}``, and in auto mode sends
``{"type": "timings", "payload": ...}`` on each of them after every cell (IPython's
``post_run_cell``), adding no outputs to the notebook.
"""

from __future__ import annotations

from ..profiler import PAYLOAD_VERSION, Profile

COMM_TARGET = "workbench.timings"
MIME = "application/vnd.workbench.timings+json"


def _data(msg) -> dict:
    content = (msg or {}).get("content") or {}
    data = content.get("data")
    return data if isinstance(data, dict) else {}


class Timings:
    """Open comms, the current cell's id, and auto mode's per-cell profile."""

    def __init__(self, shell=None) -> None:
        self.shell = shell
        self.comms: list = []
        self.auto = False
        self.cell_id: str | None = None
        self.execution_count: int | None = None
        self._profile: Profile | None = None

    # -- comm target ---------------------------------------------------------------------
    def open_comm(self, comm, msg) -> None:
        """Target handler: keep ``comm`` until it closes; answer its hello."""
        self.comms.append(comm)
        comm.on_msg(lambda message: self._on_msg(comm, message))
        comm.on_close(lambda message: self._forget(comm))
        if _data(msg).get("type") == "hello":
            comm.send({"type": "ready", "version": PAYLOAD_VERSION})

    def _on_msg(self, comm, msg) -> None:
        if _data(msg).get("type") == "hello":
            comm.send({"type": "ready", "version": PAYLOAD_VERSION})

    def _forget(self, comm) -> None:
        if comm in self.comms:
            self.comms.remove(comm)

    def send(self, payload: dict) -> None:
        for comm in list(self.comms):
            try:
                comm.send({"type": "timings", "payload": payload})
            except Exception:  # a comm whose frontend went away: drop it, keep the others
                self._forget(comm)

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
        self.auto = False
        if self._profile is not None:
            self._profile.__exit__(None, None, None)
            self._profile = None
