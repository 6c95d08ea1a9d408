"""Chat templates (``tokenizer.chat_template``) rendered by jinja2's sandbox.

Templates inside downloaded files are untrusted: they run in an
``ImmutableSandboxedEnvironment`` (no attribute access to internals, no mutation of passed
objects), with the helpers Hugging Face templates use (``raise_exception``, ``tojson``,
``strftime_now``) and the same whitespace options (``trim_blocks``, ``lstrip_blocks``).
"""

from __future__ import annotations

import json
from datetime import datetime
from functools import lru_cache

from ...errors import WorkbenchError


class ChatTemplateError(WorkbenchError):
    """A chat template that is missing, does not compile, or fails (or misbehaves) rendering."""


def _raise(message: str):
    raise ChatTemplateError(f"chat template: {message}")


@lru_cache(maxsize=16)
def _compile(source: str):
    from jinja2 import TemplateError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = lambda x, indent=None, ensure_ascii=False, **_: json.dumps(
        x, indent=indent, ensure_ascii=ensure_ascii
    )
    env.globals["raise_exception"] = _raise
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    try:
        return env.from_string(source)
    except TemplateError as e:
        raise ChatTemplateError(f"chat template does not compile: {e}") from e


def render_chat(
    template: str | None,
    messages: list[dict],
    add_generation_prompt: bool = True,
    **variables,
) -> str:
    """The prompt text for ``messages`` (``[{"role": ..., "content": ...}, ...]``)."""
    from jinja2 import TemplateError
    from jinja2.exceptions import SecurityError

    if not template:
        raise ChatTemplateError(
            "this GGUF file has no chat template ('tokenizer.chat_template'); use generate() "
            "with a prompt you format yourself"
        )
    for m in messages:
        if not isinstance(m, dict) or "role" not in m:
            raise ChatTemplateError(f"chat messages need a 'role' key, found {m!r}")
    try:
        return _compile(template).render(
            messages=messages, add_generation_prompt=add_generation_prompt, **variables
        )
    except SecurityError as e:
        raise ChatTemplateError(f"chat template tried an unsafe operation: {e}") from e
    except (TemplateError, TypeError, ValueError, AttributeError, RecursionError) as e:
        raise ChatTemplateError(f"chat template failed: {type(e).__name__}: {e}") from e
