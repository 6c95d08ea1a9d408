"""The one hook every public op goes through, so the profiler can see it.

With no profiler active anywhere, an op costs one attribute check more than its body
(``HOOK.active is None``). While any profile records, in any thread, ``HOOK.active`` is the
router below: its ``run(name, fn, args, kwargs)`` hands the call to the profile of the calling
thread / asyncio task (a ``ContextVar``), else to the newest profile recording all threads,
else just runs it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextvars import ContextVar
from functools import wraps
from typing import TypeVar

F = TypeVar("F", bound=Callable)

# The profile of this thread / task; set by ``Profile.__enter__``.
CURRENT: ContextVar = ContextVar("workbench_profile", default=None)


class _Hook:
    active = None


HOOK = _Hook()


class _Router:
    """Routes op calls to the right profile while at least one is recording."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.recording = 0  # profiles entered and not yet exited, in every thread
        self.everywhere: list = []  # profiles recording all threads, oldest first

    def run(self, name: str, fn: Callable, args: tuple, kwargs: dict):
        profile = CURRENT.get()
        if profile is None:
            everywhere = self.everywhere
            if not everywhere:
                return fn(*args, **kwargs)
            profile = everywhere[-1]
        return profile.run(name, fn, args, kwargs)

    def start(self, profile, all_threads: bool) -> None:
        with self.lock:
            self.recording += 1
            if all_threads:
                self.everywhere = [*self.everywhere, profile]  # copied: readers hold no lock
            HOOK.active = self

    def stop(self, profile, all_threads: bool) -> None:
        with self.lock:
            self.recording -= 1
            if all_threads:
                kept = list(self.everywhere)
                kept.remove(profile)
                self.everywhere = kept
            if self.recording == 0:
                HOOK.active = None


ROUTER = _Router()


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
