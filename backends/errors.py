"""The root of workbench's error hierarchy.

It lives in the hardware layer so that backends can raise it without importing the layers
above; ``workbench.errors`` re-exports it next to the core's own errors.
"""


class WorkbenchError(Exception):
    """Base class of every error workbench raises on purpose."""


class DeviceUnavailable(WorkbenchError):
    """The requested device (or its backend) cannot be used on this machine."""


class ShapeError(WorkbenchError, ValueError):
    """Shapes that do not fit the op (broadcasting, matmul, reshape, conv...)."""


class UnsupportedOnDevice(WorkbenchError, NotImplementedError):
    """An op exists in workbench but its device has no implementation of it."""


class OutOfMemory(WorkbenchError, MemoryError):
    """An allocation on a device failed."""
