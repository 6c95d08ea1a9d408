"""The devices op tests can run on: cpu always, cuda and metal where their backend works.

    from devices import DEVICES

    @pytest.mark.parametrize("device", DEVICES)
    def test_add(device): ...

``DEVICE_PARAMS`` holds the same devices as pytest params with every device this machine
lacks included as a skipped param (its reason shown by ``-ra``), so a run says what it left out.

Metal has no f64: a test whose ``metal`` param builds an f64 tensor there is skipped, by one
hook (``device_skips.py``, registered by ``tests/conftest.py``), not by copies in each test.
"""

from __future__ import annotations

import pytest

from workbench.device import _load_backend


def availability(kind: str) -> tuple[bool, str]:
    """``(ok, reason)`` for a device kind, never raising."""
    if kind == "cpu":
        return True, ""
    try:
        backend = _load_backend(kind)
    except ImportError as err:
        return False, f"the {kind} backend cannot be imported: {err}"
    ok, reason = backend.is_available()
    if ok and backend.device_count() == 0:
        return False, f"no {kind} device"
    return bool(ok), reason


def _fake_metal() -> None:
    """``WORKBENCH_FAKE_METAL=1``: the metal params run on the fake device whose generated
    kernels execute on the CPU (``tests/metal/host_metal.py``), so the op tables check the Metal
    host code and kernel sources on Linux."""
    import os
    import sys
    from pathlib import Path

    if os.environ.get("WORKBENCH_FAKE_METAL") == "1":
        sys.path.insert(0, str(Path(__file__).parent / "metal"))
        from host_metal import install_host_device

        install_host_device()


_fake_metal()
AVAILABILITY = {kind: availability(kind) for kind in ("cpu", "cuda", "metal")}
DEVICES = [kind for kind, (ok, _) in AVAILABILITY.items() if ok]
DEVICE_PARAMS = [
    pytest.param(kind, marks=() if ok else pytest.mark.skip(reason=f"{kind} unavailable: {reason}"))
    for kind, (ok, reason) in AVAILABILITY.items()
]
GPU_DEVICES = [kind for kind in DEVICES if kind != "cpu"]


def _op_param(kind: str):
    ok, reason = AVAILABILITY[kind]
    marks = [] if kind == "cpu" else [pytest.mark.gpu]
    if not ok:
        marks.append(pytest.mark.skip(reason=f"{kind} unavailable: {reason}"))
    return pytest.param(kind, marks=marks)


# The op-comparison tables run on the CPU, CUDA and Metal (the GPUs marked ``gpu``: ``-m gpu``,
# ``-k cuda`` or ``-k metal`` selects them; a skipped param without the device).
OP_DEVICE_PARAMS = [_op_param(kind) for kind in ("cpu", "cuda", "metal")]
