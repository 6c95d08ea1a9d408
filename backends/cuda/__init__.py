"""The CUDA backend (pycuda driver API, kernels from ``workbench.kernels/cuda``).

Until its storage lands, the backend only reports why it cannot be used.
"""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=1)
def is_available() -> tuple[bool, str]:
    try:
        import pycuda.driver as driver
    except ImportError as err:
        return False, f"pycuda cannot be imported ({err}); install workbench[cuda] on a machine with an NVIDIA driver"
    try:
        driver.init()
        if driver.Device.count() == 0:
            return False, "the NVIDIA driver reports no CUDA device"
    except driver.Error as err:
        return False, f"the CUDA driver failed to initialise: {err}"
    return False, "the CUDA storage is not implemented yet in this version of workbench"


def device_count() -> int:
    return 0


def synchronize(index: int = 0) -> None:
    """Nothing can be queued: no CUDA storage exists yet."""
