"""Skips that follow from what a device cannot do, applied to every test by one hook.

Metal has no f64 (neither has PyTorch's MPS): a test parametrized with the ``metal`` device
that builds an f64 tensor there (``wb.tensor(np.float64 array, device=device)``, ``dtype=
wb.f64``) is skipped with the device's own error as the reason, instead of each test carrying
its own ``if device == "metal"`` copy. Any other error still fails the test.
"""

from __future__ import annotations

import re

import pytest

METAL_F64 = re.compile(r"dtype (f64|float64) cannot be stored on metal\b")


def skip_f64_on_metal(test, err: BaseException) -> None:
    """Skip ``test`` (a pytest item) if ``err`` is Metal refusing an f64 tensor in a test whose
    params include the ``metal`` device; otherwise return (the caller re-raises ``err``)."""
    from workbench.errors import UnsupportedOnDevice

    params = getattr(getattr(test, "callspec", None), "params", {})
    if isinstance(err, UnsupportedOnDevice) and METAL_F64.search(str(err)):
        if "metal" in params.values():
            pytest.skip(f"Metal has no f64 ({err})")


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem):
    """Run the test; an f64 tensor refused by its ``metal`` param turns it into a skip."""
    try:
        return (yield)
    except Exception as err:
        skip_f64_on_metal(pyfuncitem, err)
        raise
