"""The seedable random generator behind rand, randn, randint, dropout and init.

Values are drawn on the host with numpy's PCG64 and copied to the target device, so a seed
gives the same numbers on every device.
"""

from __future__ import annotations

import numpy as np


class Generator:
    """A random stream; ``wb.manual_seed(s)`` reseeds the default one."""

    def __init__(self, seed: int | None = None):
        self.rng = np.random.Generator(np.random.PCG64(seed))

    def manual_seed(self, seed: int) -> Generator:
        self.rng = np.random.Generator(np.random.PCG64(seed))
        return self


default_generator = Generator()


def manual_seed(seed: int) -> Generator:
    """Reseed the default generator: the same seed gives the same tensors."""
    return default_generator.manual_seed(seed)
