"""Modules imported on first use, so that ``import workbench`` stays fast.

``ml_dtypes`` (bfloat16) and ``scipy`` cost far more to import than numpy; most sessions never
touch them, or only later. A module-level ``special = lazy_module("scipy.special")`` reads like
the import it replaces (``special.erf(x)``), and imports ``scipy.special`` at that first use.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


class LazyModule:
    """Stands for the module ``name`` and imports it at the first attribute read; each
    attribute is then kept on this object, so later reads cost an ordinary attribute lookup."""

    def __init__(self, name: str):
        self.__dict__["_lazy_name"] = name

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):  # introspection (copy, pickle, inspect) must not import it
            raise AttributeError(attr)
        value = getattr(importlib.import_module(self._lazy_name), attr)
        self.__dict__[attr] = value
        return value

    def __repr__(self) -> str:
        return f"<lazy module {self._lazy_name!r}>"


def lazy_module(name: str) -> LazyModule:
    """The module ``name``, imported when one of its attributes is first read."""
    return LazyModule(name)


class LazyValues(dict):
    """A dict some of whose values are made at their first lookup: ``d[key]`` for a key of
    ``lazy`` calls ``lazy[key]()`` once and stores the result as a plain entry. Until then
    ``get``, ``in`` and iteration do not see that key: look such tables up with ``d[key]``."""

    def __init__(self, ready: Mapping[Any, Any], lazy: Mapping[Any, Callable[[], Any]]):
        super().__init__(ready)
        self._lazy = dict(lazy)

    def __missing__(self, key: Any) -> Any:
        make = self._lazy.get(key)
        if make is None:
            raise KeyError(key)
        value = self[key] = make()
        return value
