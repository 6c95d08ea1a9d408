"""The devices op tests can run on: cpu always, cuda and metal where their backend works.

    from devices import DEVICES

    @pytest.mark.parametrize("device", DEVICES)
    def test_add(device): ...

``DEVICE_PARAMS`` holds the same devices as pytest params with every device this machine
lacks included as a skipped param (its reason shown by ``-ra``), so a run says what it left out.
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


# The op-comparison tables run on the CPU and on CUDA (marked ``gpu``: ``-m gpu`` or ``-k cuda``
# selects it; a skipped param without a GPU). The metal backend is a stub: its params would only
# add as many skipped items again.
OP_DEVICE_PARAMS = [_op_param(kind) for kind in ("cpu", "cuda")]
