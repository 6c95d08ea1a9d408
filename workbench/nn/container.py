"""Containers: ``Sequential``, ``ModuleList``, ``ModuleDict``."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Generic, cast, overload

from .module import Module

if TYPE_CHECKING:  # a default for the type parameter (PEP 696): ``ModuleList()`` is of Module
    from typing_extensions import TypeVar

    M = TypeVar("M", bound=Module, default=Module)
else:
    from typing import TypeVar

    M = TypeVar("M", bound=Module)


class Sequential(Module):
    """Call the modules in order, each on the previous one's output. Children are named
    ``"0"``, ``"1"``, ... (or by the keys of an ``OrderedDict``)."""

    def __init__(self, *modules: Module | Mapping[str, Module]):
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], Mapping):
            for name, module in modules[0].items():
                self.register_module(name, module)
        else:
            for i, module in enumerate(modules):
                self.register_module(str(i), module)

    def forward(self, x: Any) -> Any:
        d = self.__dict__
        for name in self._modules:
            x = d[name](x)
        return x

    def append(self, module: Module) -> Sequential:
        self.register_module(str(len(self._modules)), module)
        return self

    @overload
    def __getitem__(self, index: int) -> Module: ...
    @overload
    def __getitem__(self, index: slice) -> Sequential: ...
    def __getitem__(self, index: int | slice) -> Module | Sequential:
        items = list(self.named_children())
        if isinstance(index, slice):
            return Sequential(OrderedDict(items[index]))
        return items[index][1]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self.children())


class ModuleList(Module, Generic[M]):
    """A list of modules, registered as children ``"0"``, ``"1"``, ... (no ``forward``).

    Typed by its items: ``ModuleList([Block(), Block()])`` is a ``ModuleList[Block]``, so
    ``layers[0].attn`` type-checks."""

    def __init__(self, modules: Iterable[M] = ()):
        super().__init__()
        for module in modules:
            self.append(module)

    def append(self, module: M) -> ModuleList[M]:
        self.register_module(str(len(self._modules)), module)
        return self

    def extend(self, modules: Iterable[M]) -> ModuleList[M]:
        for module in modules:
            self.append(module)
        return self

    @overload
    def __getitem__(self, index: int) -> M: ...
    @overload
    def __getitem__(self, index: slice) -> ModuleList[M]: ...
    def __getitem__(self, index: int | slice) -> M | ModuleList[M]:
        items = cast("list[M]", list(self.children()))
        if isinstance(index, slice):
            return ModuleList(items[index])
        return items[index]

    def __setitem__(self, index: int, module: M) -> None:
        name = str(range(len(self))[index])
        self.register_module(name, module)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[M]:
        return cast("Iterator[M]", self.children())


class ModuleDict(Module):
    """Modules by name, registered as children (no ``forward``)."""

    def __init__(self, modules: Mapping[str, Module] | None = None):
        super().__init__()
        for name, module in (modules or {}).items():
            self[name] = module

    def __getitem__(self, name: str) -> Module:
        if name not in self._modules:
            raise KeyError(name)
        return self.__dict__[name]

    def __setitem__(self, name: str, module: Module) -> None:
        self.register_module(name, module)

    def __delitem__(self, name: str) -> None:
        delattr(self, name)

    def __contains__(self, name: object) -> bool:
        return name in self._modules

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def keys(self):
        return self._modules.keys()

    def items(self):
        return [(name, self.__dict__[name]) for name in self._modules]

    def values(self):
        return [self.__dict__[name] for name in self._modules]
