"""Errors of the quantized package, rooted at ``WorkbenchError``."""

from __future__ import annotations

from ..errors import WorkbenchError


class GgmlTypeError(WorkbenchError, ValueError):
    """A ggml type id or name that is unknown, or known but not supported by workbench."""


class GgufError(WorkbenchError, ValueError):
    """A GGUF file that is not valid: the message names the file, the field and the problem.

    Attributes: ``path``, ``field`` (e.g. ``"tensor 'output.weight' offset"``), ``problem``.
    """

    def __init__(self, path: str, field: str, problem: str):
        self.path, self.field, self.problem = path, field, problem
        super().__init__(f"{path}: {field}: {problem}")
