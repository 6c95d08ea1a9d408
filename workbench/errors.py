"""workbench's errors: one hierarchy rooted at ``WorkbenchError``.

Messages name the op, the operands' shapes/dtypes/devices and what was expected.
"""

from __future__ import annotations

from workbench.backends.errors import (
    DeviceUnavailable,
    OutOfMemory,
    ShapeError,
    UnsupportedOnDevice,
    WorkbenchError,
)

__all__ = [
    "WorkbenchError",
    "DeviceUnavailable",
    "UnsupportedOnDevice",
    "OutOfMemory",
    "ShapeError",
    "DTypeError",
    "DeviceMismatch",
    "AutogradError",
    "IndexingError",
    "DivisionByZero",
]


class DTypeError(WorkbenchError, TypeError):
    """A dtype the op does not accept, or operands whose dtypes do not match."""


class DeviceMismatch(WorkbenchError, ValueError):
    """Operands that live on different devices."""


class AutogradError(WorkbenchError, RuntimeError):
    """Gradient requests that cannot be honoured (non-scalar loss, in-place on a leaf...)."""


class IndexingError(WorkbenchError, IndexError):
    """An index out of range or of the wrong kind."""


class DivisionByZero(WorkbenchError, ZeroDivisionError):
    """Integer division or remainder by zero (floats give inf/nan instead, as IEEE says)."""
