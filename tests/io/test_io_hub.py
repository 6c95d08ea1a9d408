"""wb.io.hub over a fake local Hub cache (no network here): offline loading, pinned
revisions, sharded checkpoints, and the error when offline and not cached."""

from __future__ import annotations

import json

import numpy as np
import pytest

import workbench as wb
from workbench.io import HubError, HubOfflineError, hub, save_safetensors

SHA = "0123456789abcdef0123456789abcdef01234567"
OLD = "fedcba9876543210fedcba9876543210fedcba98"


def _repo(cache, repo_id: str, files: dict, commit: str = SHA, ref: str | None = "main"):
    folder = cache / f"models--{repo_id.replace('/', '--')}"
    snap = folder / "snapshots" / commit
    snap.mkdir(parents=True, exist_ok=True)
    for name, write in files.items():
        write(snap / name)
    if ref:
        (folder / "refs").mkdir(exist_ok=True)
        (folder / "refs" / ref).write_text(commit)
    return snap


@pytest.fixture
def cache(tmp_path, monkeypatch):
    cache = tmp_path / "hub"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    weights = {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.ones(2, np.float32)}
    _repo(cache, "org/tiny", {
        "model.safetensors": lambda p: save_safetensors(weights, p),
        "config.json": lambda p: p.write_text('{"hidden": 3}'),
    })  # fmt: skip
    _repo(
        cache,
        "org/tiny",
        {"config.json": lambda p: p.write_text('{"hidden": 2}')},
        commit=OLD,
        ref=None,
    )
    index = {
        "weight_map": {
            "w": "model-00001-of-00002.safetensors",
            "b": "model-00002-of-00002.safetensors",
        }
    }
    _repo(cache, "org/sharded", {
        "model.safetensors.index.json": lambda p: p.write_text(json.dumps(index)),
        "model-00001-of-00002.safetensors": lambda p: save_safetensors({"w": weights["w"]}, p),
        "model-00002-of-00002.safetensors": lambda p: save_safetensors({"b": weights["b"]}, p),
    })  # fmt: skip
    return cache


def test_offline_file_from_cache(cache):
    assert hub.is_offline()
    path = hub.file("org/tiny", "config.json")
    assert json.loads(path.read_text()) == {"hidden": 3}
    assert SHA in str(path) and str(cache) in str(path)
    pinned = hub.file("org/tiny", "config.json", revision=OLD, progress=False)
    assert json.loads(pinned.read_text()) == {"hidden": 2}


def test_offline_snapshot(cache):
    folder = hub.snapshot("org/tiny")
    assert (folder / "model.safetensors").exists() and folder.name == SHA


def test_load_single_and_sharded(cache):
    single = hub.load_safetensors("org/tiny")
    sharded = hub.load_safetensors("org/sharded")
    for tensors in (single, sharded):
        np.testing.assert_array_equal(tensors["w"].numpy(), np.arange(6).reshape(2, 3))
        np.testing.assert_array_equal(tensors["b"].numpy(), np.ones(2))
    vb = hub.var_builder("org/sharded", dtype=wb.f64)
    assert vb.get((2, 3), "w").dtype is wb.f64
    assert [p.name for p in hub.safetensors_files("org/sharded")] == [
        "model.safetensors.index.json"
    ]


def test_offline_and_not_cached_error(cache):
    with pytest.raises(HubOfflineError) as e:
        hub.file("org/tiny", "tokenizer.json", revision=OLD)
    message = str(e.value)
    for part in ("org/tiny", "tokenizer.json", OLD, str(cache), "HF_HUB_OFFLINE=1", "hf download"):
        assert part in message
    assert (e.value.repo_id, e.value.filename, e.value.revision) == (
        "org/tiny",
        "tokenizer.json",
        OLD,
    )
    assert isinstance(e.value, wb.WorkbenchError)
    with pytest.raises(HubOfflineError, match="'org/missing'.*revision 'main'"):
        hub.snapshot("org/missing")
    with pytest.raises(HubOfflineError, match="model.safetensors.*nor is model.safetensors.index"):
        hub.load_safetensors("org/missing")


def test_offline_argument_and_cache_dir(cache, monkeypatch, tmp_path):
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.delenv("HF_HUB_CACHE")
    assert not hub.is_offline()
    path = hub.file("org/tiny", "config.json", offline=True, cache_dir=cache)
    assert path.exists()
    empty = tmp_path / "empty"
    with pytest.raises(HubOfflineError, match=str(empty)):
        hub.file("org/tiny", "config.json", offline=True, cache_dir=empty)
    assert issubclass(HubOfflineError, HubError)
