"""Packaging: backends/ and kernels/ install as workbench.backends and workbench.kernels.

The folders sit at the top of the repo and join the package through setuptools' package-dir
mapping, which serves wheels and editable installs alike. A wheel only holds the packages that
pyproject.toml lists, while an editable install finds nested packages by itself, so a package
missing from the list works in the repo and breaks for users: these tests catch that.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import site
import subprocess
import sys
import sysconfig
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[1]
# Import name -> folder in the repo. Nested packages follow their folder.
MAPPED = {
    "workbench": "workbench",
    "workbench.backends": "backends",
    "workbench.kernels": "kernels",
}
KERNEL_SUFFIXES = {".cu", ".cuh", ".metal", ".h"}
SKIP_DIRS = {"__pycache__"}


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _walk(folder: Path):
    """Files under ``folder``, skipping caches and hidden folders."""
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS and not d.startswith(".")]
        for name in filenames:
            yield Path(dirpath) / name


def _source_files() -> dict[str, Path]:
    """Path inside the wheel -> file in the repo, for every module and kernel source."""
    files = {}
    for name, folder in MAPPED.items():
        base = ROOT / folder
        for path in _walk(base):
            if path.suffix == ".py" or (
                name == "workbench.kernels" and path.suffix in KERNEL_SUFFIXES
            ):
                inside = path.relative_to(base).as_posix()
                files[f"{name.replace('.', '/')}/{inside}"] = path
    return files


def _source_packages() -> set[str]:
    """Import names of the folders that hold an ``__init__.py`` (nested ones in mapped folders)."""
    packages = set()
    for name, folder in MAPPED.items():
        base = ROOT / folder
        for init in _walk(base):
            if init.name == "__init__.py":
                parts = init.parent.relative_to(base).parts
                packages.add(".".join((name, *parts)))
    return packages


def _clean_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _run_python(python: str | Path, code: str, cwd: Path) -> dict:
    """Run ``code`` in a fresh interpreter outside the repo; it prints one JSON object."""
    done = subprocess.run(
        [str(python), "-c", code], cwd=cwd, env=_clean_env(), capture_output=True, text=True
    )
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    return json.loads(done.stdout.strip().splitlines()[-1])


PROBE = """
import importlib.resources, json, workbench, workbench.backends.cpu

def walk(node, prefix=""):
    for child in node.iterdir():
        if child.is_dir():
            yield from walk(child, prefix + child.name + "/")
        elif child.name.endswith(SUFFIXES):
            yield prefix + child.name

kernels = importlib.resources.files("workbench.kernels")
print(json.dumps({
    "workbench": workbench.__file__,
    "cpu": workbench.backends.cpu.__file__,
    "kernels": str(kernels),
    "kernel_files": sorted(walk(kernels)),
}))
""".replace("SUFFIXES", repr(tuple(sorted(KERNEL_SUFFIXES))))


def _kernel_sources() -> list[str]:
    """Kernel sources in the repo, relative to kernels/."""
    base = ROOT / "kernels"
    return sorted(
        p.relative_to(base).as_posix() for p in _walk(base) if p.suffix in KERNEL_SUFFIXES
    )


def test_every_package_is_listed():
    listed = set(_pyproject()["tool"]["setuptools"]["packages"])
    found = _source_packages()
    missing, stale = sorted(found - listed), sorted(listed - found)
    assert not missing, f"add to [tool.setuptools] packages in pyproject.toml: {missing}"
    assert not stale, f"listed in pyproject.toml but no folder with __init__.py: {stale}"


def test_package_dir_maps_the_folders():
    assert _pyproject()["tool"]["setuptools"]["package-dir"] == MAPPED


def test_no_module_outside_a_package():
    """A .py file in a folder without __init__.py would be left out of the wheel."""
    orphans = [
        path.relative_to(ROOT).as_posix()
        for path in _source_files().values()
        if path.suffix == ".py" and not (path.parent / "__init__.py").exists()
    ]
    assert not orphans, f"these folders need an __init__.py: {orphans}"


def _build_wheel(tmp: Path, files: tuple[str, ...] = (), env: dict | None = None) -> Path:
    """Build the wheel from a copy of the sources (plus top-level ``files``), so the repo gets
    no build/ or egg-info."""
    src = tmp / "src"
    src.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".*", "fatbin")
    for folder in MAPPED.values():
        shutil.copytree(ROOT / folder, src / folder, ignore=ignore)
    for path in ROOT.iterdir():
        if path.is_file() and (
            path.name in ("pyproject.toml", *files) or path.name.startswith(("README", "LICEN"))
        ):
            shutil.copy2(path, src / path.name)
    out = tmp / "dist"
    # Without build isolation: offline and quick; the dev extra brings setuptools.
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
        + ["-w", str(out), str(src)],
        check=True,
        env={**_clean_env(), **(env or {})},
    )
    (built,) = out.glob("workbench-*.whl")
    return built


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    return _build_wheel(tmp_path_factory.mktemp("wheel"))


def test_wheel_holds_the_mapped_folders(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for required in (
        "workbench/backends/__init__.py",
        "workbench/backends/cpu/__init__.py",
        "workbench/kernels/__init__.py",
    ):
        assert required in names
    missing = sorted(set(_source_files()) - names)
    assert not missing, f"in the repo but not in the wheel: {missing}"
    top = {name.split("/")[0] for name in names}
    extra = sorted(t for t in top if t != "workbench" and not t.endswith(".dist-info"))
    assert not extra, f"the wheel installs more than workbench: {extra}"


def _install(wheel: Path, tmp_path: Path) -> tuple[Path, Path]:
    """(python, purelib) of a fresh venv holding ``wheel`` and this environment's packages."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    zipfile.ZipFile(wheel).extractall(purelib)
    # The dependencies (numpy, ...) come from this interpreter's environment. Paths in a .pth are
    # appended after the venv's own site-packages, so the wheel's workbench wins, and .pth files
    # in them (such as an editable install's finder) are not run.
    here = {
        *site.getsitepackages(),
        sysconfig.get_paths()["purelib"],
        sysconfig.get_paths()["platlib"],
    }
    (purelib / "_workbench_test_deps.pth").write_text("\n".join(sorted(here)) + "\n")
    return python, purelib


def test_installed_wheel_imports_outside_the_repo(wheel, tmp_path):
    python, purelib = _install(wheel, tmp_path)
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    seen = _run_python(python, PROBE, cwd)
    for key in ("workbench", "cpu", "kernels"):
        assert Path(seen[key]).is_relative_to(purelib), (key, seen[key])
    assert Path(seen["cpu"]) == purelib / "workbench" / "backends" / "cpu" / "__init__.py"
    assert seen["kernel_files"] == _kernel_sources()


def _editable_install() -> bool:
    # Every workbench on sys.path: the repo's own workbench.egg-info carries no direct_url.json.
    for dist in metadata.distributions(name="workbench"):
        direct_url = json.loads(dist.read_text("direct_url.json") or "{}")
        if direct_url.get("dir_info", {}).get("editable"):
            return True
    return False


@pytest.mark.skipif(not _editable_install(), reason="workbench is not installed with pip -e here")
def test_editable_install_maps_to_the_repo(tmp_path):
    seen = _run_python(sys.executable, PROBE, tmp_path)
    assert Path(seen["workbench"]) == ROOT / "workbench" / "__init__.py"
    assert Path(seen["cpu"]) == ROOT / "backends" / "cpu" / "__init__.py"
    assert Path(seen["kernels"]) == ROOT / "kernels"
    assert seen["kernel_files"] == _kernel_sources()


# -- prebuilt CUDA kernels ------------------------------------------------------------------------
def _cuda_compile():
    from workbench.backends.cuda import compile as cuda_compile

    return cuda_compile


NVCC = _cuda_compile().find_nvcc()
# PTX-only fatbins for one arch keep this quick (one PTX pass per source, no ptxas); the release
# build's cubins for every arch go through the same build_fatbins.
FATBIN_TARGETS = "compute_90"


@pytest.fixture(scope="module")
def fatbin_wheel(tmp_path_factory) -> Path:
    """A wheel built through setup.py (its build_py compiles the fatbins; no native CPU
    variant is built: none is named ``skip``)."""
    env = {"WORKBENCH_CUDA_ARCHS": FATBIN_TARGETS, "WORKBENCH_NATIVE_VARIANTS": "skip"}
    return _build_wheel(tmp_path_factory.mktemp("fatbin_wheel"), ("setup.py",), env)


@pytest.mark.skipif(NVCC is None, reason="nvcc not found: no fatbins are built here")
def test_wheel_carries_the_fatbins(fatbin_wheel):
    cuda_compile = _cuda_compile()
    archive = zipfile.ZipFile(fatbin_wheel)
    base = "workbench/kernels/cuda/fatbin/"
    manifest = json.loads(archive.read(base + "manifest.json"))
    names = cuda_compile.sources()
    assert manifest["targets"] == [FATBIN_TARGETS]
    assert manifest["kernels"] == {n: cuda_compile.source_key(n) for n in names}
    for name in names:
        assert archive.read(f"{base}{name}.fatbin")[:4] == bytes.fromhex("50ed55ba"), name


FAKE_GPU_PROBE = """
import json, subprocess, sys
sys.path.insert(0, TESTS_CUDA)
from fakes import FakeDriver
from workbench.backends.cuda import compile as cuda_compile, driver, runtime

def refuse(*args, **kwargs):
    raise AssertionError("nvcc was needed")

cuda_compile.find_nvcc = lambda: None  # as on a machine with only the NVIDIA driver
cuda_compile.compile_ptx = refuse
fake = FakeDriver()
driver.set_driver(fake)
runtime.reset()
import numpy as np
from workbench.backends.cuda import Storage
from workbench.backends.layout import Layout
x = Storage.from_numpy(np.ones((2, 3), np.float32))
x.unary("exp", Layout.contiguous((2, 3)))
x.reduce("sum", Layout.contiguous((2, 3)), (1,), False, "f32")
print(json.dumps({"loaded": [[kind, len(image)] for kind, image in fake.loaded],
                  "kernels": str(cuda_compile.kernel_dir())}))
""".replace("TESTS_CUDA", repr(str(ROOT / "tests" / "cuda")))


@pytest.mark.skipif(NVCC is None, reason="nvcc not found: no fatbins are built here")
def test_cuda_backend_from_the_wheel_needs_no_nvcc(fatbin_wheel, tmp_path):
    """The installed wheel's CUDA backend imports and loads its kernels from the fatbins with
    nvcc unreachable (a fake driver stands in for the GPU)."""
    python, purelib = _install(fatbin_wheel, tmp_path)
    (tmp_path / "elsewhere").mkdir()
    seen = _run_python(python, FAKE_GPU_PROBE, tmp_path / "elsewhere")
    kernels = purelib / "workbench" / "kernels" / "cuda"
    assert Path(seen["kernels"]) == kernels
    fatbins = kernels / "fatbin"
    size = {n: (fatbins / f"{n}.fatbin").stat().st_size for n in ("elementwise", "reduce")}
    assert seen["loaded"] == [["fatbin", size["elementwise"]], ["fatbin", size["reduce"]]]


# -- compiled CPU kernels ---------------------------------------------------------------------
NATIVE_PROBE = """
import json
import numpy as np
import workbench as wb
from workbench.backends.cpu import native
x = wb.tensor(np.array([0.0, 1.0], np.float32))
print(json.dumps({"info": wb.native_info(), "file": native.NATIVE.__file__,
                  "exp": (x.exp() + x).numpy().tolist()}))
"""


@pytest.fixture(scope="module")
def native_wheel(tmp_path_factory) -> Path:
    """A wheel built through setup.py with the baseline CPU variant only (quick), no fatbins."""
    env = {"WORKBENCH_NATIVE_VARIANTS": "base", "WORKBENCH_FATBIN": "0"}
    return _build_wheel(tmp_path_factory.mktemp("native_wheel"), ("setup.py",), env)


@pytest.mark.skipif(not (shutil.which("cc") or shutil.which("gcc")), reason="no C compiler")
def test_wheel_carries_the_native_cpu_kernels(native_wheel, tmp_path):
    """The wheel holds the compiled ``_cpuid`` and ``_native_base`` modules, and the installed
    wheel runs its ops through them (no compiler needed at run time)."""
    names = zipfile.ZipFile(native_wheel).namelist()
    ext = sysconfig.get_config_var("EXT_SUFFIX")
    for module in ("_cpuid", "_native_base"):
        assert f"workbench/backends/cpu/{module}{ext}" in names, module
    python, purelib = _install(native_wheel, tmp_path)
    (tmp_path / "elsewhere").mkdir()
    seen = _run_python(python, NATIVE_PROBE, tmp_path / "elsewhere")
    assert seen["info"]["variant"] == "base", seen["info"]
    assert Path(seen["file"]).is_relative_to(purelib)
    assert seen["exp"] == pytest.approx([1.0, math.e + 1.0], rel=1e-6)
