"""Choosing the next token from logits (llama.cpp's and Hugging Face's samplers).

In order, for logits ``z`` over the vocabulary and ``c[t]`` the count of token ``t`` in the
context so far (the last ``penalty_last_n`` tokens):

1. repetition penalty r (CTRL): ``z[t] /= r`` if ``z[t] > 0`` else ``z[t] *= r``, for c[t] > 0;
2. frequency f / presence p (OpenAI): ``z[t] -= f·c[t] + p·[c[t] > 0]``;
3. temperature 0: the argmax (greedy); else ``z / T``;
4. top-k keeps the k largest; top-p the smallest set whose probability reaches p;
   min-p drops tokens with ``prob < min_p · max prob``;
5. one draw from ``softmax(z)`` with ``numpy.random.Generator(PCG64(seed))``, over the kept
   tokens best first (top-k / top-p), or over the vocabulary in id order.

Nothing sorts the vocabulary: greedy is one argmax, top-k a partition, top-p a partition of a
set that holds the mass p (grown until it does).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import WorkbenchError


@dataclass
class SamplingParams:
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    penalty_last_n: int = 64
    seed: int | None = None

    def check(self) -> None:
        if self.temperature < 0 or not 0 < self.top_p <= 1 or not 0 <= self.min_p <= 1:
            raise WorkbenchError(
                f"sampling: expected temperature >= 0, 0 < top_p <= 1, 0 <= min_p <= 1; found "
                f"temperature={self.temperature}, top_p={self.top_p}, min_p={self.min_p}"
            )
        if self.top_k < 0 or self.repetition_penalty <= 0:
            raise WorkbenchError(
                f"sampling: expected top_k >= 0 and repetition_penalty > 0, found "
                f"top_k={self.top_k}, repetition_penalty={self.repetition_penalty}"
            )


class Sampler:
    """``sampler(logits, context_ids) -> token id`` for one sequence."""

    def __init__(self, params: SamplingParams):
        params.check()
        self.p = params
        self.rng = np.random.default_rng(params.seed)

    def penalize(self, logits: np.ndarray, context: list[int]) -> np.ndarray:
        p = self.p
        if not context or (
            p.repetition_penalty == 1.0 and not p.frequency_penalty and not p.presence_penalty
        ):
            return logits
        recent = context[-p.penalty_last_n :] if p.penalty_last_n > 0 else context
        ids, counts = np.unique(np.asarray(recent, np.int64), return_counts=True)
        z = logits.astype(np.float32, copy=True)
        sel = z[ids]
        if p.repetition_penalty != 1.0:
            sel = np.where(sel > 0, sel / p.repetition_penalty, sel * p.repetition_penalty)
        z[ids] = sel - p.frequency_penalty * counts - p.presence_penalty
        return z

    def __call__(self, logits: np.ndarray, context: list[int]) -> int:
        p = self.p
        z = self.penalize(np.asarray(logits, np.float32), context)
        if p.temperature == 0.0:
            return int(np.argmax(z))  # greedy: one pass, nothing sorted
        z = z.astype(np.float64) / p.temperature
        if not 0 < p.top_k < z.size and p.top_p >= 1.0:  # no order needed: no sort
            probs = np.exp(z - z.max())
            if p.min_p > 0.0:
                probs[probs < p.min_p] = 0.0  # the largest is 1
            return int(self.rng.choice(z.size, p=probs / probs.sum()))
        idx, total = self._candidates(z)
        zs = z[idx]
        probs = np.exp(zs - zs[0])
        probs /= probs.sum() if total is None else total
        keep = len(idx)
        if p.top_p < 1.0:
            keep = min(keep, int(np.searchsorted(np.cumsum(probs), p.top_p)) + 1)
        if p.min_p > 0.0:
            keep = min(keep, max(1, int(np.sum(probs >= p.min_p * probs[0]))))
        probs = probs[:keep] / probs[:keep].sum()
        return int(idx[self.rng.choice(keep, p=probs)])

    def _candidates(self, z: np.ndarray) -> tuple[np.ndarray, float | None]:
        """The ids that top-k / top-p can keep, best first (ties: lower id first), as a stable
        sort of the whole vocabulary would order them, without sorting it, and the softmax
        normaliser of their ``exp(z - max z)`` (None: their own sum). top-k takes the k
        largest (``np.partition``); top-p alone the smallest such set whose mass already
        passes top_p (growing 4x from 64), sorting everything only when none does."""
        p, n = self.p, z.size
        if 0 < p.top_k < n:
            return _top(z, p.top_k), None
        if p.top_p < 1.0:
            probs = np.exp(z - z.max())
            total = float(probs.sum())
            k = 64
            while k < n:
                top = _top(z, k)
                if probs[top].sum() >= p.top_p * total:
                    return top, total
                k *= 4
        return np.argsort(-z, kind="stable"), None


def _top(z: np.ndarray, k: int) -> np.ndarray:
    """The k largest of z, descending, ties by lower index (= argsort(-z, stable)[:k])."""
    if k >= z.size:
        return np.argsort(-z, kind="stable")
    kth = np.partition(z, z.size - k)[z.size - k]  # the k-th largest value
    above = np.flatnonzero(z > kth)
    ties = np.flatnonzero(z == kth)[: k - above.size]
    cand = np.concatenate([above, ties])
    return cand[np.lexsort((cand, -z[cand]))]
