import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fakes import FakeDriver, installed  # noqa: E402

from workbench.backends.cuda import runtime as cuda_runtime  # noqa: E402


@pytest.fixture
def fake(monkeypatch):
    """A FakeDriver installed as the CUDA driver layer (no nvcc compile on launches)."""
    fake = FakeDriver(devices=2)
    with installed(fake, monkeypatch):
        fake.gemms = []
        monkeypatch.setattr(
            cuda_runtime.Runtime,
            "gemm",
            lambda self, *args, **kw: fake.gemms.append(args),
            raising=True,
        )
        yield fake
