"""Errors of the io package, rooted at ``WorkbenchError``."""

from __future__ import annotations

from ..errors import WorkbenchError


class SafetensorsError(WorkbenchError, ValueError):
    """A safetensors file that is not valid or not readable: the message names the file, the
    tensor (when one is at fault) and the problem.

    Attributes: ``path``, ``tensor`` (a name or None), ``problem``.
    """

    def __init__(self, path: str, problem: str, tensor: str | None = None):
        self.path, self.tensor, self.problem = str(path), tensor, problem
        where = f"{path}: tensor {tensor!r}" if tensor is not None else str(path)
        super().__init__(f"{where}: {problem}")


class NpzError(WorkbenchError, ValueError):
    """A ``.npy`` / ``.npz`` file that cannot be read as tensors."""


class HubError(WorkbenchError, OSError):
    """A file or snapshot that the Hugging Face Hub (or its local cache) cannot provide.

    Attributes: ``repo_id``, ``filename`` (None for a snapshot), ``revision``, ``cache_dir``.
    """

    def __init__(
        self, message: str, repo_id: str, filename: str | None, revision: str, cache_dir: str
    ):
        super().__init__(message)
        self.message = message
        self.repo_id, self.filename, self.revision, self.cache_dir = (
            repo_id,
            filename,
            revision,
            cache_dir,
        )

    def __str__(self) -> str:  # OSError would format its arguments as errno and strerror
        return self.message


class HubOfflineError(HubError):
    """Offline (``HF_HUB_OFFLINE=1`` or ``offline=True``) and the file is not in the cache."""
