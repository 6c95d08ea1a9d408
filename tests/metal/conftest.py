import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fake_metal import FakeDevice, FakeObjc, fake_metal  # noqa: E402

from workbench.backends.metal import driver as metal_driver  # noqa: E402
from workbench.backends.metal import runtime as metal_runtime  # noqa: E402


@pytest.fixture
def devices():
    return [FakeDevice("Apple M3 (fake)"), FakeDevice("AMD Radeon (fake)", capacity=1 << 20)]


@pytest.fixture
def objc():
    return FakeObjc()


@pytest.fixture
def driver(devices, objc):
    """The real ``MetalDriver`` over a fake ``Metal`` / ``objc``, installed for the runtime."""
    d = metal_driver.MetalDriver(fake_metal(devices), objc)
    previous = metal_driver.set_driver(d)
    metal_runtime.reset()
    yield d
    metal_driver.set_driver(previous)
    metal_runtime.reset()


@pytest.fixture(params=["mps", "kernels"])
def host(request):
    """A fake Metal device running the generated kernels on the CPU; matmuls through the
    fake MPS ("mps") or the dialect's tiled GEMM ("kernels")."""
    import sys

    if sys.platform == "darwin":
        pytest.skip("on macOS the real device runs the op tables (the fake host run is Linux's)")
    from host_metal import install_host_device

    d, device, previous = install_host_device(mps=request.param == "mps")
    yield device
    metal_driver.set_driver(previous)
    metal_runtime.reset()
