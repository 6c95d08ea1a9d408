"""The Metal backend (PyObjC, kernels from ``workbench.kernels/metal``), macOS only.

Until its storage lands, the backend only reports why it cannot be used.
"""

from __future__ import annotations

import sys
from functools import lru_cache


@lru_cache(maxsize=1)
def is_available() -> tuple[bool, str]:
    if sys.platform != "darwin":
        return False, f"Metal needs macOS; this machine runs {sys.platform}"
    try:
        import Metal  # noqa: F401
    except ImportError as err:
        return (
            False,
            f"PyObjC's Metal framework cannot be imported ({err}); install workbench[metal]",
        )
    return False, "the Metal storage is not implemented yet in this version of workbench"


def device_count() -> int:
    return 0


def synchronize(index: int = 0) -> None:
    """Nothing can be queued: no Metal storage exists yet."""
