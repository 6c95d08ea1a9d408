"""The one hook every public op goes through, so the profiler can see it.

With no profiler active, an op costs one attribute check more than its body. A profiler sets
``HOOK.active`` to an object with ``run(name, fn, args, kwargs)`` that times the call.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import TypeVar

F = TypeVar("F", bound=Callable)


class _Hook:
    active = None


HOOK = _Hook()


def op(fn: F) -> F:
    """Mark ``fn`` as a public op named after the function."""
    name = fn.__name__.rstrip("_") if not fn.__name__.startswith("__") else fn.__name__

    @wraps(fn)
    def wrapper(*args, **kwargs):
        profiler = HOOK.active
        if profiler is None:
            return fn(*args, **kwargs)
        return profiler.run(name, fn, args, kwargs)

    wrapper.op_name = name
    return wrapper  # type: ignore[return-value]


def hot_op(fn: F) -> F:
    """Mark ``fn`` as a public op that calls the hook itself (for the hottest ops, where the
    generic wrapper's argument packing is measurable): its body must go through
    ``HOOK.active`` like ``workbench.ops.elementwise._binary`` does."""
    fn.op_name = fn.__name__
    return fn
