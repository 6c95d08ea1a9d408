"""Packaging: backends/ and kernels/ install as workbench.backends and workbench.kernels.

The folders sit at the top of the repo and join the package through setuptools' package-dir
mapping, which serves wheels and editable installs alike. A wheel only holds the packages that
pyproject.toml lists, while an editable install finds nested packages by itself, so a package
missing from the list works in the repo and breaks for users: these tests catch that.
"""

from __future__ import annotations

import json
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


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """Build the wheel from a copy of the sources, so the repo gets no build/ or egg-info."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".*")
    for folder in MAPPED.values():
        shutil.copytree(ROOT / folder, src / folder, ignore=ignore)
    for path in ROOT.iterdir():
        if path.is_file() and (
            path.name == "pyproject.toml" or path.name.startswith(("README", "LICEN"))
        ):
            shutil.copy2(path, src / path.name)
    out = tmp / "dist"
    # Without build isolation: offline and quick; the dev extra brings setuptools.
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
        + ["-w", str(out), str(src)],
        check=True,
        env=_clean_env(),
    )
    (built,) = out.glob("workbench-*.whl")
    return built


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


def test_installed_wheel_imports_outside_the_repo(wheel, tmp_path):
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
