"""Errors of ``workbench.distributed``."""

from __future__ import annotations

from ..errors import WorkbenchError


class DistributedError(WorkbenchError, RuntimeError):
    """A collective that cannot run: no launcher or library, mismatched ranks, a bad argument."""


class CommunicatorTimeout(DistributedError, TimeoutError):
    """A collective waited longer than the communicator's timeout (a rank exited or hangs)."""
