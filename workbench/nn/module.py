"""``Module``: a tree of parameters, buffers and child modules, as in PyTorch.

Assigning a ``Var`` to an attribute registers a parameter, a ``Module`` a child;
``register_buffer`` adds a non-trainable tensor (running statistics) that ``state_dict``
saves. Names form a dotted tree: ``"encoder.layers.0.weight"``.

Parameters may also be plain tensors (weights read through a ``VarBuilder`` for inference):
``register_parameter`` accepts them, and they stay out of the optimizer's way because they
never get a gradient.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple

from ..autograd import no_grad
from ..device import Device
from ..dtype import DType
from ..dtype import dtype as to_dtype
from ..errors import ShapeError, WorkbenchError
from ..tensor import Tensor, Var


class IncompatibleKeys(NamedTuple):
    """What ``load_state_dict`` found: names the module has that the dict lacks, and the
    reverse."""

    missing_keys: list[str]
    unexpected_keys: list[str]


class StateDictError(WorkbenchError, KeyError):
    """``load_state_dict(strict=True)`` with missing or unexpected names, or wrong shapes."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


def swap_values(target: Tensor, source: Tensor) -> None:
    """Make ``target`` hold ``source``'s storage, layout, dtype and device (no copy).

    The tensor object stays the same, so an optimizer holding it keeps working after
    ``module.to(...)``.
    """
    target._storage = source._storage
    target._layout = source._layout
    target.dtype = source.dtype
    target.device = source.device
    target.grad = None


class Module:
    """Base class of every layer: subclasses set attributes in ``__init__`` and define
    ``forward``; calling the module calls ``forward``."""

    training: bool

    def __init__(self) -> None:
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = OrderedDict()  # name -> None (values live in __dict__)
        d["_buffers"] = OrderedDict()  # name -> persistent?
        d["_modules"] = OrderedDict()

    # -- registration -----------------------------------------------------------------------
    def _registry(self) -> tuple[dict, dict, dict]:
        try:
            return self._parameters, self._buffers, self._modules
        except AttributeError:
            raise WorkbenchError(
                f"{type(self).__name__}.__init__ must call super().__init__() before setting "
                "parameters, buffers or modules"
            ) from None

    def _forget(self, name: str, keep: str = "") -> None:
        """Drop ``name`` from every registry but ``keep`` (where it keeps its position)."""
        registries = self._registry()
        keep_registry = self.__dict__.get(keep)
        if not name or "." in name or hasattr(type(self), name):
            raise WorkbenchError(
                f"{type(self).__name__}: cannot register {name!r} (names must be non-empty, "
                "without '.', and not an attribute of the class)"
            )
        for registry in registries:
            if registry is not keep_registry:
                registry.pop(name, None)

    def __setattr__(self, name: str, value: Any) -> None:
        d = self.__dict__
        if isinstance(value, Var):
            self._forget(name, "_parameters")
            self._parameters[name] = None
        elif isinstance(value, Module):
            self._forget(name, "_modules")
            self._modules[name] = None
        elif "_parameters" in d and (name in d["_parameters"] or name in d["_buffers"]):
            if value is not None and not isinstance(value, Tensor):
                kind = "parameter" if name in d["_parameters"] else "buffer"
                raise WorkbenchError(
                    f"cannot assign {type(value).__name__} to {kind} {name!r} of "
                    f"{type(self).__name__} (expected a Tensor or None)"
                )
        elif "_modules" in d and name in d["_modules"]:
            del d["_modules"][name]
        d[name] = value

    def __delattr__(self, name: str) -> None:
        if "_parameters" in self.__dict__:
            self._forget(name)
        del self.__dict__[name]

    def register_parameter(self, name: str, value: Tensor | None) -> None:
        """Register ``value`` (a ``Var``, a plain tensor kept frozen, or None) as a parameter."""
        self._registry()
        self._forget(name, "_parameters")
        self._parameters[name] = None
        self.__dict__[name] = value

    def register_buffer(self, name: str, value: Tensor | None, persistent: bool = True) -> None:
        """A tensor that moves with the module and (when ``persistent``) is in ``state_dict``,
        but is not trained: running statistics, masks, position tables."""
        self._registry()
        self._forget(name, "_buffers")
        self._buffers[name] = persistent
        self.__dict__[name] = value

    def register_module(self, name: str, module: Module | None) -> None:
        self._registry()
        self._forget(name, "_modules")
        self._modules[name] = None
        self.__dict__[name] = module

    add_module = register_module

    # -- calling ----------------------------------------------------------------------------
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not define forward()")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward(*args, **kwargs)

    # -- the tree ---------------------------------------------------------------------------
    def named_children(self) -> Iterator[tuple[str, Module]]:
        d = self.__dict__
        for name in self._modules:
            module = d[name]
            if module is not None:
                yield name, module

    def children(self) -> Iterator[Module]:
        for _, module in self.named_children():
            yield module

    def named_modules(self, prefix: str = "") -> Iterator[tuple[str, Module]]:
        """Every module of the tree (this one first, as ``prefix``), each once."""
        seen: set[int] = set()
        stack = [(prefix, self)]
        while stack:
            name, module = stack.pop()
            if id(module) in seen:
                continue
            seen.add(id(module))
            yield name, module
            kids = [(f"{name}.{n}" if name else n, m) for n, m in module.named_children()]
            stack.extend(reversed(kids))

    def modules(self) -> Iterator[Module]:
        for _, module in self.named_modules():
            yield module

    def _named_members(self, kind: str, recurse: bool) -> Iterator[tuple[str, Tensor]]:
        seen: set[int] = set()
        modules = self.named_modules() if recurse else iter([("", self)])
        for prefix, module in modules:
            d = module.__dict__
            for name in getattr(module, kind):
                value = d[name]
                if value is None or id(value) in seen:
                    continue
                seen.add(id(value))
                yield (f"{prefix}.{name}" if prefix else name), value

    def named_parameters(self, recurse: bool = True) -> Iterator[tuple[str, Tensor]]:
        """``(dotted name, parameter)`` pairs; a parameter shared by two modules comes once."""
        return self._named_members("_parameters", recurse)

    def parameters(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, p in self.named_parameters(recurse):
            yield p

    def named_buffers(self, recurse: bool = True) -> Iterator[tuple[str, Tensor]]:
        return self._named_members("_buffers", recurse)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, b in self.named_buffers(recurse):
            yield b

    def num_parameters(self, trainable_only: bool = False) -> int:
        """How many scalars the parameters hold (shared ones counted once)."""
        return sum(p.numel for p in self.parameters() if not trainable_only or p.requires_grad)

    def num_trainable_parameters(self) -> int:
        """How many scalars the trainable parameters hold (e.g. LoRA adapters only)."""
        return self.num_parameters(trainable_only=True)

    def apply(self, fn: Callable[[Module], Any]) -> Module:
        """Call ``fn`` on every submodule (children first) and on this module."""
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    # -- modes ------------------------------------------------------------------------------
    def train(self, mode: bool = True) -> Module:
        for module in self.modules():
            module.__dict__["training"] = mode
        return self

    def eval(self) -> Module:
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        """Freeze (False) or unfreeze the ``Var`` parameters."""
        for p in self.parameters():
            if isinstance(p, Var):
                p.requires_grad = requires_grad
        return self

    def zero_grad(self) -> None:
        for p in self.parameters():
            p.grad = None

    # -- state ------------------------------------------------------------------------------
    def state_dict(self, prefix: str = "") -> OrderedDict[str, Tensor]:
        """Parameters and persistent buffers by dotted name (the tensors themselves, detached
        views sharing memory)."""
        out: OrderedDict[str, Tensor] = OrderedDict()
        for mod_prefix, module in self.named_modules(prefix.rstrip(".")):
            d = module.__dict__
            for name in module._parameters:
                if d[name] is not None:
                    out[f"{mod_prefix}.{name}" if mod_prefix else name] = d[name].detach()
            for name, persistent in module._buffers.items():
                if persistent and d[name] is not None:
                    out[f"{mod_prefix}.{name}" if mod_prefix else name] = d[name].detach()
        return out

    def load_state_dict(self, state: Mapping[str, Any], strict: bool = True) -> IncompatibleKeys:
        """Copy values into the parameters and buffers (shapes must match; dtypes and devices
        are converted). With ``strict``, a name missing on either side raises listing them all;
        otherwise the lists are returned."""
        own = self._state_slots()
        missing = [name for name in own if name not in state]
        unexpected = [name for name in state if name not in own]
        if strict and (missing or unexpected):
            raise StateDictError(_keys_message(type(self).__name__, missing, unexpected))
        wrong = []
        for name, (module, attr) in own.items():
            if name in state:
                value = state[name]
                current = module.__dict__[attr]
                shape = tuple(getattr(value, "shape", ()))
                if shape != current.shape:
                    wrong.append(f"{name}: expected {current.shape}, found {shape}")
        if wrong:
            raise StateDictError(
                f"load_state_dict for {type(self).__name__}: shapes differ:\n  "
                + "\n  ".join(wrong)
            )
        with no_grad():
            for name, (module, attr) in own.items():
                if name in state:
                    _assign(module.__dict__[attr], state[name])
        return IncompatibleKeys(missing, unexpected)

    def _state_slots(self) -> dict[str, tuple[Module, str]]:
        slots = {}
        for prefix, module in self.named_modules():
            d = module.__dict__
            names = [n for n in module._parameters if d[n] is not None]
            names += [n for n, keep in module._buffers.items() if keep and d[n] is not None]
            for name in names:
                slots[f"{prefix}.{name}" if prefix else name] = (module, name)
        return slots

    # -- devices and dtypes -----------------------------------------------------------------
    def to(self, device: Device | str | DType | None = None, dtype: DType | str | None = None):
        """Move parameters and buffers to ``device`` and/or cast the floating point ones to
        ``dtype``, in place: the parameter objects stay the same (an optimizer built before
        keeps working). ``m.to("cuda")``, ``m.to(wb.f16)``, ``m.to("cuda", wb.bf16)``."""
        if isinstance(device, DType) or (isinstance(device, str) and _is_dtype(device)):
            device, dtype = None, device
        device = None if device is None else Device(device)
        dtype = None if dtype is None else to_dtype(dtype)

        def convert(t: Tensor) -> None:
            new = t.detach()
            if dtype is not None and t.dtype.is_floating_point:
                new = new.to_dtype(dtype)
            if device is not None:
                new = new.to(device)
            if new._storage is not t._storage or new.dtype is not t.dtype:
                swap_values(t, new)

        with no_grad():
            for t in list(self.parameters()) + list(self.buffers()):
                convert(t)
        return self

    def float(self) -> Module:
        return self.to(dtype="f32")

    def half(self) -> Module:
        return self.to(dtype="f16")

    def bfloat16(self) -> Module:
        return self.to(dtype="bf16")

    def cpu(self) -> Module:
        return self.to("cpu")

    def cuda(self, index: int = 0) -> Module:
        return self.to(Device.cuda(index))

    # -- repr -------------------------------------------------------------------------------
    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        if "_modules" not in self.__dict__:
            return f"{type(self).__name__}(<not initialised>)"
        lines = []
        for name, module in self.named_children():
            body = repr(module).replace("\n", "\n  ")
            lines.append(f"({name}): {body}")
        extra = self.extra_repr()
        if not lines:
            return f"{type(self).__name__}({extra})"
        head = f"{type(self).__name__}({extra}" if extra else f"{type(self).__name__}("
        return head + "\n  " + "\n  ".join(lines) + "\n)"

    def __dir__(self):
        return sorted(set(super().__dir__()))


def _is_dtype(name: str) -> bool:
    try:
        to_dtype(name)
    except Exception:
        return False
    return True


def _assign(target: Tensor, value: Any) -> None:
    """Copy ``value`` into ``target`` (cast and moved), bumping its version."""
    from ..ops.creation import tensor as make_tensor

    if not isinstance(value, Tensor):
        value = make_tensor(value)
    if value.device is not target.device:
        value = value.to(target.device)
    if not is_writable(target):  # e.g. a read-only view of a memory-mapped file
        swap_values(target, value.to_dtype(target.dtype).clone())
        return
    target.detach().copy_(value)


def is_writable(t: Tensor) -> bool:
    """False for CPU tensors over read-only memory (memory-mapped safetensors)."""
    return not t.device.is_cpu or t.numpy().flags.writeable


def _keys_message(owner: str, missing: list[str], unexpected: list[str]) -> str:
    parts = [f"load_state_dict for {owner}:"]
    if missing:
        parts.append(f"  missing keys ({len(missing)}): {', '.join(missing)}")
    if unexpected:
        parts.append(f"  unexpected keys ({len(unexpected)}): {', '.join(unexpected)}")
    parts.append("  pass strict=False to load the matching names only")
    return "\n".join(parts)


def check_shape(owner: str, name: str, t: Tensor, shape: tuple[int, ...]) -> None:
    if t.shape != tuple(shape):
        raise ShapeError(f"{owner}: {name} has shape {t.shape}, expected {tuple(shape)}")
