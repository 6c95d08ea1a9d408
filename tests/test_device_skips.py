"""The Metal f64 skip of ``device_skips.py``: only Metal's refusal of f64, only for a test
parametrized with the metal device, becomes a skip."""

from types import SimpleNamespace

import pytest
from device_skips import skip_f64_on_metal

from workbench.errors import UnsupportedOnDevice

REFUSAL = UnsupportedOnDevice("dtype f64 cannot be stored on metal (it holds bool, u8, ...)")


def item(**params):
    return SimpleNamespace(callspec=SimpleNamespace(params=params))


def test_metal_refusing_f64_is_a_skip():
    with pytest.raises(pytest.skip.Exception, match="Metal has no f64"):
        skip_f64_on_metal(item(device="metal", dtype="f64"), REFUSAL)
    numpy_name = UnsupportedOnDevice("dtype float64 cannot be stored on metal")
    with pytest.raises(pytest.skip.Exception):
        skip_f64_on_metal(item(device="metal"), numpy_name)


@pytest.mark.parametrize(
    "test, err",
    [
        (item(device="cuda"), REFUSAL),  # not a metal param
        (SimpleNamespace(), REFUSAL),  # not parametrized
        (item(device="metal"), UnsupportedOnDevice("op sort is not implemented on metal")),
        (item(device="metal"), ValueError("dtype f64 cannot be stored on metal")),
        (item(device="metal"), UnsupportedOnDevice("dtype f16 cannot be stored on metal")),
    ],
)
def test_any_other_error_is_left_to_fail(test, err):
    assert skip_f64_on_metal(test, err) is None
