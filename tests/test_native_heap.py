"""The C heap's policy set when the native module loads (kernels/cpu/core/heap.c): with it, a
16 MiB array comes from glibc's heap, not a fresh mmap() of its own; with
WORKBENCH_HEAP=system it is glibc's own mmapped block, as without workbench. Counted by glibc's
mallinfo2() in a fresh interpreter."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

from workbench.backends.cpu.native import NATIVE

pytestmark = [
    pytest.mark.skipif(NATIVE is None, reason="no native module"),
    pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the policy is glibc's"),
]

_PROBE = """
import ctypes
import numpy as np
import workbench as wb

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2
before = libc.mallinfo2().hblks
block = np.ones(4 << 20, np.float32)  # 16 MiB
print(libc.mallinfo2().hblks - before, wb.native_info()["heap"])
"""


def _probe(**env: str) -> tuple[int, str]:
    out = subprocess.run([sys.executable, "-c", _PROBE], env={**os.environ, **env},
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    new_blocks, policy = out.strip().split(" ", 1)
    return int(new_blocks), policy


def test_large_blocks_come_from_the_heap():
    new_blocks, policy = _probe()
    assert new_blocks == 0 and "kept for reuse" in policy


def test_workbench_heap_system_keeps_glibc_defaults():
    new_blocks, policy = _probe(WORKBENCH_HEAP="system")
    assert new_blocks == 1 and "WORKBENCH_HEAP=system" in policy


@pytest.mark.parametrize("args", [(0, 0), (64 << 20, 0), (1 << 20, -1)])
def test_bad_thresholds_are_refused(args):
    with pytest.raises(ValueError, match="expected 0 < mmap_from <= 32 MiB"):
        NATIVE.keep_large_blocks(*args)
