"""The seedable random generator behind rand, randn, randint, dropout and init.

Values are drawn on the host with numpy's PCG64 and copied to the target device, so a seed
gives the same numbers on every device.

The default generator is deliberately process-wide, as in PyTorch: ``wb.manual_seed(s)`` seeds
it for every thread, and threads drawing from it at once get disjoint numbers (numpy locks the
stream) in an order the scheduler picks. For a reproducible stream per thread or asyncio task,
draw inside ``with wb.Generator(seed):``: the ops of that context (and of the tasks it starts)
then use that generator instead of the default one.
"""

from __future__ import annotations

from contextvars import ContextVar, Token

import numpy as np

_CURRENT: ContextVar[Generator | None] = ContextVar("workbench_generator", default=None)


class Generator:
    """A random stream; ``wb.manual_seed(s)`` reseeds the default one. As a context manager,
    the default stream of the current thread / asyncio task while inside."""

    def __init__(self, seed: int | None = None):
        self.rng = np.random.Generator(np.random.PCG64(seed))
        self._tokens: list[Token] = []

    def manual_seed(self, seed: int) -> Generator:
        self.rng = np.random.Generator(np.random.PCG64(seed))
        return self

    def __enter__(self) -> Generator:
        self._tokens.append(_CURRENT.set(self))
        return self

    def __exit__(self, *exc: object) -> None:
        _CURRENT.reset(self._tokens.pop())


class _DefaultGenerator(Generator):
    """The process-wide generator, unless the context entered a ``Generator`` of its own. Its
    stream is made at the first draw: ``numpy.random`` is slow to import."""

    def __init__(self):
        self._rng: np.random.Generator | None = None
        self._tokens = []

    @property
    def rng(self) -> np.random.Generator:
        local = _CURRENT.get()
        if local is not None:
            return local.rng
        if self._rng is None:
            self._rng = np.random.Generator(np.random.PCG64())
        return self._rng

    @rng.setter
    def rng(self, value: np.random.Generator) -> None:
        self._rng = value


default_generator = _DefaultGenerator()


def manual_seed(seed: int) -> Generator:
    """Reseed the process-wide default generator: the same seed gives the same tensors."""
    return default_generator.manual_seed(seed)
