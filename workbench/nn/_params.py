"""How layers make their parameters: fresh from an init hint, or through a ``VarBuilder``."""

from __future__ import annotations

from typing import Any

from .. import dtype as dt
from ..tensor import Tensor, Var
from . import init as init_


def make_param(vb, shape, name: str, init: Any, dtype=None, device=None) -> Tensor:
    """A parameter of ``shape``.

    Without a builder: a new ``Var`` from ``init`` (in ``dtype``, default f32, on ``device``).
    With one: ``vb.get(shape, name, init)``; a ``VarMap``-backed builder gives a ``Var``,
    a file- or dict-backed one a plain (frozen) tensor, as in candle.
    """
    if vb is None:
        return Var(init_.make(init, shape, dtype or dt.f32, device))
    return vb.get(shape, name, init, dtype)
