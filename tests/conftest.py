import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from device_skips import pytest_pyfunc_call  # noqa: E402,F401  (Metal's f64 skip, every test)
