"""The root of workbench's error hierarchy.

It lives in the hardware layer so that backends can raise it without importing the layers
above; ``workbench.errors`` re-exports it next to the core's own errors.
"""


class WorkbenchError(RuntimeError):
    """Base class of every error workbench raises on purpose.

    It is a ``RuntimeError``, the class PyTorch raises for most misuse, and each subclass also
    derives from the builtin PyTorch raises for the same mistake (``IndexError`` for an index
    or dim out of range, ``TypeError`` for an argument of the wrong kind...), so code written
    against PyTorch's exceptions catches workbench's.
    """


class DeviceUnavailable(WorkbenchError):
    """The requested device (or its backend) cannot be used on this machine."""


class ShapeError(WorkbenchError, ValueError):
    """Shapes that do not fit the op (broadcasting, matmul, reshape, conv...)."""


class UnsupportedOnDevice(WorkbenchError, NotImplementedError):  # (a RuntimeError too)
    """An op exists in workbench but its device has no implementation of it."""


class OutOfMemory(WorkbenchError, MemoryError):
    """An allocation on a device failed."""
