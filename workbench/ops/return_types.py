"""Named ``(values, indices)`` results, as ``torch.return_types``: ``x.max(1).values``,
``values, indices = x.sort()`` and ``x.topk(2)[1]`` all work, since each is a tuple."""

from __future__ import annotations

from typing import NamedTuple

from ..tensor import Tensor


class ValuesIndices(NamedTuple):
    """``values`` and the ``indices`` (i64) they were taken from."""

    values: Tensor
    indices: Tensor


# One class per op, named after it, as PyTorch's (``type(x.sort()).__name__ == "sort"``).
class max(ValuesIndices):  # noqa: A001
    __slots__ = ()


class min(ValuesIndices):  # noqa: A001
    __slots__ = ()


class sort(ValuesIndices):
    __slots__ = ()


class topk(ValuesIndices):
    __slots__ = ()


class mode(ValuesIndices):
    __slots__ = ()


class cummax(ValuesIndices):
    __slots__ = ()


class cummin(ValuesIndices):
    __slots__ = ()


class median(ValuesIndices):
    __slots__ = ()
