"""Rotary position embedding frequencies, with every scaling llama.cpp's GGUF keys express.

A rotated pair ``i`` (of ``n_rot / 2``) of a token at position ``p`` turns by ``θ = p·ω_i``, and
its cos/sin carry a magnitude ``m`` (1 unless the scaling says otherwise)::

    ω_i = base^(-2i / n_rot) / f_i

``f_i`` is the ``rope_freqs.weight`` tensor (Llama 3's per-frequency divisors) or, for LongRoPE
(Phi-3), ``rope_factors_long.weight`` when the context is longer than the original one and
``rope_factors_short.weight`` otherwise. Then, by ``rope.scaling.type``:

- ``linear``: ``ω_i / factor`` (positions interpolated);
- ``yarn``: ``ω_i/factor·(1 − γ_i) + ω_i·γ_i`` with ``γ_i = 1 − clamp((i − lo)/(hi − lo), 0, 1)``,
  ``lo = ⌊d(β_fast)⌋``, ``hi = ⌈d(β_slow)⌉`` clamped to ``[0, n_rot − 1]``, where
  ``d(β) = n_rot·ln(L / (2πβ)) / (2 ln base)`` and ``L`` the original context length; and
  ``m = 1 + 0.1·ln(factor)``;
- ``longrope``: the factors above;

and ``m`` is multiplied by ``rope.scaling.attn_factor`` (LongRoPE's ``√(1 + ln s / ln L)``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

SCALING_TYPES = ("none", "linear", "yarn", "longrope")


@dataclass(frozen=True)
class RopeScaling:
    """The ``{arch}.rope.scaling.*`` keys; ``original_context`` is the context the model was
    trained at (``original_context_length``, else the file's ``context_length``)."""

    kind: str = "none"
    factor: float = 1.0
    original_context: int = 0
    attn_factor: float = 1.0
    beta_fast: float = 32.0
    beta_slow: float = 1.0


def base_frequencies(n_rot: int, base: float) -> np.ndarray:
    """ω_i = base^(-2i / n_rot), i < n_rot / 2 (f64)."""
    return 1.0 / base ** (np.arange(0, n_rot, 2, dtype=np.float64) / n_rot)


def yarn_mscale(factor: float) -> float:
    """YaRN's cos/sin magnitude 1 + 0.1·ln(factor) (1 when not stretched)."""
    return 1.0 + 0.1 * math.log(factor) if factor > 1.0 else 1.0


def yarn_frequencies(omega: np.ndarray, n_rot: int, base: float, s: RopeScaling) -> np.ndarray:
    """Blend interpolated (ω/factor) and original frequencies by YaRN's ramp (module docs)."""

    def dim(beta: float) -> float:
        return n_rot * math.log(s.original_context / (2 * math.pi * beta)) / (2 * math.log(base))

    lo = max(math.floor(dim(s.beta_fast)), 0)
    hi = min(math.ceil(dim(s.beta_slow)), n_rot - 1)
    ramp = np.clip((np.arange(omega.size) - lo) / max(hi - lo, 0.001), 0.0, 1.0)
    keep = 1.0 - ramp  # γ_i: 1 for the fast-turning pairs, which keep their frequency
    return omega / s.factor * (1.0 - keep) + omega * keep


class Rope:
    """The frequencies of one kind of layer; :meth:`tables` gives the cos/sin to rotate by.

    ``freq_factors`` divides the frequencies (``rope_freqs.weight``); ``long_factors`` /
    ``short_factors`` are LongRoPE's pair, chosen by the context length a cache holds.
    """

    def __init__(
        self,
        n_rot: int,
        base: float,
        scaling: RopeScaling = RopeScaling(),
        freq_factors: np.ndarray | None = None,
        long_factors: np.ndarray | None = None,
        short_factors: np.ndarray | None = None,
    ):
        if (long_factors is None) != (short_factors is None):
            raise ValueError("Rope: LongRoPE needs both the long and the short factors")
        if scaling.kind == "longrope" and long_factors is None:
            raise ValueError("Rope: longrope scaling without its long and short factors")
        self.n_rot, self.base, self.scaling = n_rot, base, scaling
        self.freq_factors = freq_factors
        self.long_factors, self.short_factors = long_factors, short_factors
        self._memo: dict[bool, tuple[np.ndarray, float]] = {}

    def frequencies(self, context: int) -> tuple[np.ndarray, float]:
        """(ω (n_rot/2,) f64, magnitude m) for a cache of ``context`` positions."""
        s = self.scaling
        # As llama.cpp: the pair of factors, where present, is chosen whatever the type says.
        long = self.long_factors is not None and context > s.original_context
        if long not in self._memo:
            omega = base_frequencies(self.n_rot, self.base)
            factors = self.freq_factors
            if self.long_factors is not None:
                factors = self.long_factors if long else self.short_factors
            if factors is not None:
                omega = omega / factors.astype(np.float64)
            m = s.attn_factor
            if s.kind == "linear":
                omega = omega / s.factor
            elif s.kind == "yarn":
                omega = yarn_frequencies(omega, self.n_rot, self.base, s)
                m *= yarn_mscale(s.factor)
            self._memo[long] = (omega, m)
        return self._memo[long]

    def tables(self, positions: np.ndarray, context: int) -> tuple[np.ndarray, np.ndarray]:
        """(m·cos θ, m·sin θ), each (N, n_rot/2) f32, for positions (N,)."""
        omega, m = self.frequencies(context)
        angles = np.asarray(positions, np.float64)[:, None] * omega[None, :]
        return (m * np.cos(angles)).astype(np.float32), (m * np.sin(angles)).astype(np.float32)
