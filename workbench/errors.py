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
    "DimensionError",
    "DTypeError",
    "DTypeNotImplemented",
    "ArgumentError",
    "DeviceMismatch",
    "AutogradError",
    "IndexingError",
    "DivisionByZero",
]


class DimensionError(ShapeError, IndexError):
    """A dim out of range for the tensor (or empty where the op needs elements): an
    ``IndexError``, as in PyTorch."""


class DTypeError(WorkbenchError, TypeError):
    """A dtype the op does not accept, or operands whose dtypes do not match."""


class DTypeNotImplemented(DTypeError, NotImplementedError):
    """An op that has no definition for the operands' dtype (bitwise ops and shifts of floats):
    a ``NotImplementedError`` (so a ``RuntimeError``) as PyTorch's "not implemented for
    'Float'", and a ``DTypeError`` (a ``TypeError``, what ``~float_tensor`` raises there)."""


class ArgumentError(WorkbenchError, TypeError):
    """An argument of the wrong kind (a float dim, both ``dim`` and ``axis``, ``len()`` of a
    0-d tensor): a ``TypeError``, as Python and PyTorch raise."""


class DeviceMismatch(WorkbenchError, ValueError):
    """Operands that live on different devices."""


class AutogradError(WorkbenchError, RuntimeError):
    """Gradient requests that cannot be honoured (non-scalar loss, in-place on a leaf...)."""


class IndexingError(WorkbenchError, IndexError):
    """An index out of range or of the wrong kind."""


class DivisionByZero(WorkbenchError, ZeroDivisionError):
    """Integer division or remainder by zero (floats give inf/nan instead, as IEEE says)."""
