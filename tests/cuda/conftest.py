import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fakes import FakeDriver  # noqa: E402

from workbench.backends.cuda import compile as cuda_compile  # noqa: E402
from workbench.backends.cuda import driver as cuda_driver  # noqa: E402
from workbench.backends.cuda import runtime as cuda_runtime  # noqa: E402


@pytest.fixture
def fake(monkeypatch):
    """A FakeDriver installed as the CUDA driver layer (no nvcc compile on launches)."""
    fake = FakeDriver(devices=2)
    previous = cuda_driver.set_driver(fake)
    cuda_runtime.reset()
    monkeypatch.setattr(cuda_compile, "ptx_path", lambda name, arch, *a, **k: f"{arch}/{name}")
    monkeypatch.setattr(cuda_compile, "fatbin_image", lambda name, capability, *a: None)
    fake.gemms = []
    monkeypatch.setattr(
        cuda_runtime.Runtime,
        "gemm",
        lambda self, *args, **kw: fake.gemms.append(args),
        raising=True,
    )
    yield fake
    cuda_driver.set_driver(previous)
    cuda_runtime.reset()
    # the cuda Devices used under the fake remember its backend (wb.device is the function)
    make_device = sys.modules["workbench.device"]._device
    for index in range(fake.devices):
        object.__setattr__(make_device("cuda", index), "_backend", None)
