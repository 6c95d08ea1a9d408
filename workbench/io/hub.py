"""The Hugging Face Hub through ``huggingface_hub``: files and snapshots at a pinned revision,
the local cache when offline, progress bars, sharded safetensors checkpoints.

    path = hub.file("org/model", "config.json", revision="a1b2c3...")   # a commit pins it
    folder = hub.snapshot("org/model", allow_patterns=["*.json", "*.safetensors"])
    tensors = hub.load_safetensors("org/model")         # model.safetensors or its shards
    vb = hub.var_builder("org/model", dtype=wb.f16)

Offline (``HF_HUB_OFFLINE=1``, read at each call, or ``offline=True``) only the cache is used
(``HF_HUB_CACHE``, ``HF_HOME/hub`` or ``~/.cache/huggingface/hub``; ``cache_dir=`` overrides);
a file that is not there raises :class:`HubOfflineError` naming the repo, the file, the
revision and the cache folder.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

from .errors import HubError, HubOfflineError

INDEX_NAME = "model.safetensors.index.json"
SINGLE_NAME = "model.safetensors"
_TRUE = {"1", "on", "yes", "true"}


def is_offline() -> bool:
    """True when ``HF_HUB_OFFLINE`` is set (checked now, not when huggingface_hub was imported)."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in _TRUE


def cache_path(override: str | os.PathLike | None = None) -> Path:
    """The Hub cache folder in use."""
    if override is not None:
        return Path(override)
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]) / "hub"
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


@contextlib.contextmanager
def _progress(enabled: bool):
    from huggingface_hub.utils import (
        are_progress_bars_disabled,
        disable_progress_bars,
        enable_progress_bars,
    )

    was_disabled = are_progress_bars_disabled()
    if not enabled and not was_disabled:
        disable_progress_bars()
    try:
        yield
    finally:
        if not enabled and not was_disabled:
            enable_progress_bars()


def _what(repo_id: str, filename: str | None, revision: str) -> str:
    item = f"file {filename!r} of {repo_id!r}" if filename else f"a snapshot of {repo_id!r}"
    return f"{item} at revision {revision!r}"


def _translate(
    e: Exception, repo_id: str, filename: str | None, revision: str, cache: Path, offline: bool
) -> HubError:
    from huggingface_hub import errors as hf

    what = _what(repo_id, filename, revision)
    args = (repo_id, filename, revision, str(cache))
    fetch = (
        f"hf download {repo_id}" + (f" {filename}" if filename else "") + f" --revision {revision}"
    )
    if isinstance(e, hf.LocalEntryNotFoundError | hf.OfflineModeIsEnabled):
        if offline:
            return HubOfflineError(
                f"offline (HF_HUB_OFFLINE=1 or offline=True) and {what} is not in the local "
                f"cache {cache}; download it once while online (`{fetch}`), or pass the "
                "cache_dir that has it",
                *args,
            )
        return HubError(
            f"cannot reach the Hugging Face Hub and {what} is not in the local cache {cache} "
            f"({e.__class__.__name__}); check the network, or download it elsewhere (`{fetch}`)",
            *args,
        )
    if isinstance(e, hf.RepositoryNotFoundError):
        return HubError(
            f"repository {repo_id!r} not found on the Hub (or it is private/gated "
            f"and needs a token); cache {cache}",
            *args,
        )
    if isinstance(e, hf.RevisionNotFoundError):
        return HubError(f"revision {revision!r} not found in {repo_id!r}; cache {cache}", *args)
    if isinstance(e, hf.EntryNotFoundError):
        return HubError(f"{what} does not exist on the Hub; cache {cache}", *args)
    return HubError(f"could not get {what} ({e.__class__.__name__}: {e}); cache {cache}", *args)


def file(
    repo_id: str,
    filename: str,
    revision: str | None = None,
    *,
    repo_type: str = "model",
    cache_dir: str | os.PathLike | None = None,
    offline: bool | None = None,
    progress: bool = True,
    token: str | bool | None = None,
) -> Path:
    """The local path of ``filename`` from ``repo_id`` at ``revision`` (a branch, tag or commit;
    default "main"), downloaded into the cache when needed."""
    from huggingface_hub import hf_hub_download

    revision = revision or "main"
    offline = is_offline() if offline is None else offline
    cache = cache_path(cache_dir)
    try:
        with _progress(progress):
            path = hf_hub_download(
                repo_id,
                filename,
                revision=revision,
                repo_type=repo_type,
                cache_dir=cache,
                local_files_only=offline,
                token=token,
            )
    except Exception as e:  # huggingface_hub's errors, HTTP or OS errors
        raise _translate(e, repo_id, filename, revision, cache, offline) from e
    return Path(path)


def snapshot(
    repo_id: str,
    revision: str | None = None,
    *,
    allow_patterns=None,
    ignore_patterns=None,
    repo_type: str = "model",
    cache_dir: str | os.PathLike | None = None,
    offline: bool | None = None,
    progress: bool = True,
    token: str | bool | None = None,
) -> Path:
    """The local folder of a snapshot of ``repo_id`` at ``revision`` (only the files matching
    ``allow_patterns`` / not matching ``ignore_patterns``)."""
    from huggingface_hub import snapshot_download

    revision = revision or "main"
    offline = is_offline() if offline is None else offline
    cache = cache_path(cache_dir)
    try:
        with _progress(progress):
            path = snapshot_download(
                repo_id,
                revision=revision,
                repo_type=repo_type,
                cache_dir=cache,
                local_files_only=offline,
                allow_patterns=allow_patterns,
                ignore_patterns=ignore_patterns,
                token=token,
            )
    except Exception as e:
        raise _translate(e, repo_id, None, revision, cache, offline) from e
    return Path(path)


def _commit_of(path: Path) -> str | None:
    """The commit a cached file belongs to (``.../snapshots/<commit>/file``)."""
    parts = path.parts
    if "snapshots" in parts:
        i = len(parts) - 1 - parts[::-1].index("snapshots")
        if i + 1 < len(parts):
            return parts[i + 1]
    return None


def safetensors_files(repo_id: str, revision: str | None = None, **kwargs) -> list[Path]:
    """The safetensors weights of a repo: the shards listed by ``model.safetensors.index.json``
    (all at the index's commit) or else ``model.safetensors``. ``kwargs`` go to ``file``."""
    try:
        index = file(repo_id, INDEX_NAME, revision, **kwargs)
    except HubError as index_error:
        try:
            return [file(repo_id, SINGLE_NAME, revision, **kwargs)]
        except HubError as e:
            raise type(e)(
                f"{e} (nor is {INDEX_NAME}: {index_error.__class__.__name__})",
                e.repo_id,
                e.filename,
                e.revision,
                e.cache_dir,
            ) from e
    try:
        weight_map = json.loads(index.read_text())["weight_map"]
    except (ValueError, KeyError, TypeError) as e:
        from .errors import SafetensorsError

        raise SafetensorsError(str(index), f"not a valid index JSON ({e})") from None
    pinned = _commit_of(index) or revision
    shards = sorted(set(weight_map.values()))
    for shard in shards:
        file(repo_id, shard, pinned, **kwargs)
    return [index]


def load_safetensors(repo_id: str, revision: str | None = None, device=None, **kwargs):
    """Every tensor of the repo's safetensors weights (sharded or not), by name."""
    from .safetensors import load_safetensors as load

    files = safetensors_files(repo_id, revision, **kwargs)
    return load(files[0] if len(files) == 1 else files, device)


def var_builder(repo_id: str, revision: str | None = None, dtype=None, device=None, **kwargs):
    """A ``VarBuilder`` over the repo's safetensors weights (memory-mapped)."""
    from ..nn.var_builder import VarBuilder

    files = safetensors_files(repo_id, revision, **kwargs)
    return VarBuilder.from_safetensors(files[0] if len(files) == 1 else files, dtype, device)
