import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

# `python -m pytest` puts the repo root first on sys.path, where kernels/ (workbench.kernels'
# sources) hides the `kernels` package that transformers (>= 5.2x) imports: the root goes last.
ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT] + [str(ROOT)]

from device_skips import pytest_pyfunc_call  # noqa: E402,F401  (Metal's f64 skip, every test)
