"""The one driver layer of a GPU backend per process: made at first use, replaceable by tests.

    HOLDER = DriverHolder(PycudaDriver, describe)
    get_driver, set_driver = HOLDER.get, HOLDER.set

``describe(err)`` turns a failure to make the driver into the reason users read (None: not an
expected failure, re-raised as is); the reason is remembered, so a process without the library
does not retry the import on every ``is_available()``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class DriverHolder:
    """``get()`` the driver (``RuntimeError`` with the reason when unusable); ``set(driver)``
    installs another (a fake; None to re-detect) and returns the previous one."""

    def __init__(self, make: Callable[[], Any], describe: Callable[[Exception], str | None]):
        self.make = make
        self.describe = describe
        self.driver: Any = None
        self.error: str | None = None

    def get(self) -> Any:
        if self.driver is None:
            if self.error is not None:
                raise RuntimeError(self.error)
            try:
                self.driver = self.make()
            except Exception as err:
                reason = self.describe(err)
                if reason is None:
                    raise
                self.error = reason
                raise RuntimeError(reason) from err
        return self.driver

    def set(self, driver: Any) -> Any:
        previous = self.driver
        self.driver = driver
        self.error = None
        return previous
