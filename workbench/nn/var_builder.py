"""``VarBuilder`` and ``VarMap``, as in candle: where layers find their weights.

A ``VarBuilder`` hands out tensors by dotted name with a shape check::

    vb = VarBuilder.from_safetensors("model.safetensors", dtype=wb.f16, device="cuda")
    w = vb.pp("encoder").pp("fc1").get((128, 64), "weight")   # "encoder.fc1.weight"

Backed by safetensors files (memory-mapped; several shards through
``model.safetensors.index.json``), by a dict of tensors, or by a ``VarMap``. A ``VarMap`` is
the trainable case: ``get`` creates a ``Var`` from the init hint the first time a name is asked
for and returns the same ``Var`` after that, so ``varmap.all_vars()`` is what the optimizer
trains and ``varmap.save(path)`` / ``varmap.load(path)`` round-trip it through safetensors.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from .. import dtype as dt
from ..autograd import no_grad
from ..device import CPU, Device
from ..errors import ShapeError, WorkbenchError
from ..ops.creation import from_numpy
from ..tensor import Tensor, Var
from . import init as init_
from .module import is_writable, swap_values


class VarBuilderError(WorkbenchError, KeyError):
    """A name a ``VarBuilder`` or ``VarMap`` does not hold; the message lists close names."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class WeightsMismatch(VarBuilderError):
    """Weights that do not fit the model being built (``build_checked``): the message names the
    model, the missing, mis-shaped and unexpected tensors. ``missing``, ``unexpected`` and
    ``mis_shaped`` (``{name: (stored, expected)}``) hold them all."""

    def __init__(self, message: str, missing=(), unexpected=(), mis_shaped=None):
        super().__init__(message)
        self.missing, self.unexpected = list(missing), list(unexpected)
        self.mis_shaped = dict(mis_shaped or {})


def _listing(names, shown: int = 4) -> str:
    names = list(names)
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def mismatch(model: str, where: str, missing, unexpected=(), mis_shaped=None) -> WeightsMismatch:
    """The ``WeightsMismatch`` for ``model``'s weights read from ``where``."""
    mis_shaped = dict(mis_shaped or {})
    parts = []
    if missing:
        parts.append(f"{len(missing)} missing ({_listing(missing)})")
    if mis_shaped:
        shapes = [f"{n} is {tuple(a)}, expected {tuple(b)}" for n, (a, b) in mis_shaped.items()]
        parts.append(f"{len(mis_shaped)} with another shape ({_listing(shapes, 2)})")
    if unexpected:
        parts.append(f"{len(unexpected)} unexpected ({_listing(unexpected)})")
    return WeightsMismatch(
        f"these weights are not a {model}: in {where}, " + "; ".join(parts)
        + ". Are they the weights of another model or variant?",
        missing, unexpected, mis_shaped,
    )  # fmt: skip


def _missing(name: str, where: str, names: list[str]) -> VarBuilderError:
    close = difflib.get_close_matches(name, names, n=5, cutoff=0.6)
    if not close:  # same leaf name under another prefix, e.g. a renamed block
        leaf = name.rsplit(".", 1)[-1]
        close = [n for n in names if n.rsplit(".", 1)[-1] == leaf][:5]
    hint = f"; closest names: {', '.join(close)}" if close else f" ({len(names)} names)"
    return VarBuilderError(f"VarBuilder: no tensor named {name!r} in {where}{hint}")


def _convert(t: Tensor, dtype: dt.DType | None, device: Device) -> Tensor:
    if dtype is not None and t.dtype.is_floating_point and t.dtype is not dtype:
        t = t.to_dtype(dtype)
    return t.to(device) if t.device is not device else t


# -- VarMap ------------------------------------------------------------------------------------
class VarMap:
    """Named ``Var``s created on demand by a ``VarBuilder`` (the trainable weights)."""

    def __init__(self) -> None:
        self._vars: dict[str, Var] = {}

    def get(self, shape, name: str, init: Any = None, dtype=dt.f32, device=None) -> Var:
        """The ``Var`` called ``name``, created from ``init`` (default zeros) the first time."""
        shape = tuple(shape)
        var = self._vars.get(name)
        if var is None:
            value = init_.make(init_.ZEROS if init is None else init, shape, dtype, device)
            var = self._vars[name] = Var(value)
        elif var.shape != shape:
            raise ShapeError(f"VarMap: {name!r} has shape {var.shape}, asked for {shape}")
        return var

    def all_vars(self) -> list[Var]:
        return list(self._vars.values())

    def __getitem__(self, name: str) -> Var:
        try:
            return self._vars[name]
        except KeyError:
            raise _missing(name, "the VarMap", list(self._vars)) from None

    def __contains__(self, name: object) -> bool:
        return name in self._vars

    def __iter__(self) -> Iterator[str]:
        return iter(self._vars)

    def __len__(self) -> int:
        return len(self._vars)

    def keys(self):
        return self._vars.keys()

    def items(self):
        return self._vars.items()

    def insert(self, name: str, var: Tensor) -> Var:
        """Add (or replace) a variable."""
        var = var if isinstance(var, Var) else Var(var)
        self._vars[name] = var
        return var

    def set(self, name: str, value: Tensor) -> None:
        """Overwrite the values of an existing variable (same shape)."""
        var = self[name]
        if value.shape != var.shape:
            raise ShapeError(f"VarMap.set: {name!r} has shape {var.shape}, found {value.shape}")
        with no_grad():
            var.copy_(value)

    def save(self, path: str | os.PathLike, metadata: Mapping[str, str] | None = None) -> None:
        """Write every variable to a safetensors file."""
        from ..io.safetensors import save_safetensors

        save_safetensors(self._vars, path, metadata)

    def load(self, path, strict: bool = True) -> list[str]:
        """Overwrite the variables with the values in a safetensors file (or shards).

        Every variable must be in the file (``strict``); names in the file without a variable
        are ignored and returned.
        """
        from ..io.safetensors import open_safetensors

        reader = open_safetensors(path)
        missing = [name for name in self._vars if name not in reader]
        if strict and missing:
            raise (
                _missing(missing[0], str(path), list(reader))
                if len(missing) == 1
                else VarBuilderError(
                    f"VarMap.load: {len(missing)} variables are not in {path}: {', '.join(missing)}"
                )
            )
        with no_grad():
            for name, var in self._vars.items():
                if name not in reader:
                    continue
                value = reader.get_tensor(name)
                if value.shape != var.shape:
                    raise ShapeError(
                        f"VarMap.load: {name!r} has shape {value.shape} in {path}, the "
                        f"variable has {var.shape}"
                    )
                if is_writable(var):
                    var.copy_(value)
                else:
                    swap_values(var, _convert(value, var.dtype, var.device).clone())
        return [name for name in reader if name not in self._vars]

    def __repr__(self) -> str:
        return f"VarMap({len(self)} vars, {sum(v.numel for v in self._vars.values())} values)"


# -- backends ----------------------------------------------------------------------------------
class _Backend:
    where = "?"

    def names(self) -> list[str]:
        raise NotImplementedError

    def contains(self, name: str) -> bool:
        raise NotImplementedError

    def get(self, name: str, shape, init, dtype, device) -> Tensor:
        raise NotImplementedError

    def nbytes(self, name: str) -> int:
        """Stored bytes of ``name`` (for progress bars), 0 when unknown."""
        return 0


class _Files(_Backend):
    def __init__(self, reader):
        self.reader = reader
        self.where = getattr(reader, "path", None) or getattr(reader, "index_path", "safetensors")

    def names(self) -> list[str]:
        return list(self.reader)

    def contains(self, name: str) -> bool:
        return name in self.reader

    def get(self, name, shape, init, dtype, device) -> Tensor:
        if name not in self.reader:
            raise _missing(name, self.where, self.names())
        if shape is not None:
            found = self.reader.info(name).shape
            if found != shape:
                raise ShapeError(
                    f"VarBuilder: {name!r} has shape {found} in {self.where}, expected {shape}"
                )
        # Read on the CPU (a view of the mapped file) and convert once.
        return _convert(self.reader.get_tensor(name), dtype, device)

    def nbytes(self, name: str) -> int:
        info = self.reader.info(name)
        return info.end - info.begin


class _Dict(_Backend):
    where = "the tensor dict"

    def __init__(self, tensors: Mapping[str, Any]):
        self.tensors = tensors

    def names(self) -> list[str]:
        return list(self.tensors)

    def contains(self, name: str) -> bool:
        return name in self.tensors

    def get(self, name, shape, init, dtype, device) -> Tensor:
        if name not in self.tensors:
            raise _missing(name, self.where, self.names())
        value = self.tensors[name]
        if not isinstance(value, Tensor):
            value = from_numpy(np.require(value, requirements="C"))
        if shape is not None and value.shape != shape:
            raise ShapeError(f"VarBuilder: {name!r} has shape {value.shape}, expected {shape}")
        return _convert(value, dtype, device)

    def nbytes(self, name: str) -> int:
        return int(getattr(self.tensors[name], "nbytes", 0))


class _VarMapBackend(_Backend):
    where = "the VarMap"

    def __init__(self, varmap: VarMap):
        self.varmap = varmap

    def names(self) -> list[str]:
        return list(self.varmap)

    def contains(self, name: str) -> bool:
        return name in self.varmap

    def get(self, name, shape, init, dtype, device) -> Tensor:
        if shape is None:
            return self.varmap[name]
        return self.varmap.get(shape, name, init, dtype or dt.f32, device)


class _Zeros(_Backend):
    where = "zeros"

    def names(self) -> list[str]:
        return []

    def contains(self, name: str) -> bool:
        return True

    def get(self, name, shape, init, dtype, device) -> Tensor:
        if shape is None:
            raise WorkbenchError(f"VarBuilder.zeros: {name!r} needs a shape")
        return init_.ZEROS(shape, dtype or dt.f32, device)


class _Survey(_Backend):
    """Wraps a backend to see everything a build asks for: a missing or mis-shaped tensor is
    recorded and stands in as a zero-stride zero, so the build goes on to the end."""

    def __init__(self, inner: _Backend):
        self.inner, self.where = inner, inner.where
        self.used: set[str] = set()
        self.missing: list[str] = []
        self.mis_shaped: dict[str, tuple] = {}

    def names(self) -> list[str]:
        return self.inner.names()

    def contains(self, name: str) -> bool:
        return self.inner.contains(name)

    def get(self, name, shape, init, dtype, device) -> Tensor:
        self.used.add(name)
        if self.inner.contains(name):
            stored = self.inner.get(name, None, init, dtype, device)
            if shape is None or stored.shape == shape:
                return stored
            self.mis_shaped[name] = (stored.shape, shape)
        elif name not in self.missing:
            self.missing.append(name)
        if shape is None:
            raise WorkbenchError(f"VarBuilder: {name!r} is missing and has no expected shape")
        zero = np.zeros((), (dtype or dt.f32).numpy)
        return from_numpy(np.broadcast_to(zero, shape)).to(device)


class _Counted(_Backend):
    """Wraps a backend to advance a progress bar by the stored bytes of each tensor read."""

    def __init__(self, inner: _Backend, bar):
        self.inner, self.where, self.bar = inner, inner.where, bar

    def names(self) -> list[str]:
        return self.inner.names()

    def contains(self, name: str) -> bool:
        return self.inner.contains(name)

    def get(self, name, shape, init, dtype, device) -> Tensor:
        tensor = self.inner.get(name, shape, init, dtype, device)
        self.bar.update(self.inner.nbytes(name))
        return tensor

    def nbytes(self, name: str) -> int:
        return self.inner.nbytes(name)


PROGRESS_MIN_BYTES = 64 * 2**20


def _progress_bar(model: str, vb: VarBuilder, where: str, progress: bool | None):
    """A ``tqdm.auto`` bar over the stored bytes under ``vb`` (a widget in JupyterLab, text in
    a terminal); ``progress=None`` shows one from ``PROGRESS_MIN_BYTES`` on."""
    if progress is False:
        return None
    backend = vb._backend
    total = sum(backend.nbytes(name) for name in vb.names())
    if not total or (progress is None and total < PROGRESS_MIN_BYTES):
        return None
    from tqdm.auto import tqdm

    name = os.path.basename(str(where)) or str(where)
    return tqdm(total=total, desc=f"loading {model} ({name})", unit="B", unit_scale=True,
                unit_divisor=1024, leave=False)  # fmt: skip


def build_checked(model: str, build, vb: VarBuilder, where: str | None = None,
                  progress: bool | None = None):  # fmt: skip
    """``build(vb)``; when a tensor is missing or mis-shaped, build once more with every tensor
    surveyed and raise ``WeightsMismatch`` naming ``model``, the weights (``where``, default
    the builder's source) and all the missing, mis-shaped and unexpected (stored but never
    asked for) tensors. Costs nothing when the weights fit.

    ``progress``: a ``tqdm.auto`` bar of the bytes read while building (True, False, or None:
    for weights of ``PROGRESS_MIN_BYTES`` or more)."""
    bar = _progress_bar(model, vb, where or vb._backend.where, progress)
    try:
        if bar is None:
            return build(vb)
        return build(VarBuilder(_Counted(vb._backend, bar), vb.dtype, vb.device, vb._prefix))
    except (VarBuilderError, ShapeError) as error:
        survey = _Survey(vb._backend)
        finished = True
        try:
            build(VarBuilder(survey, vb.dtype, vb.device, vb._prefix))
        except Exception:  # the survey is best effort: report what it saw
            finished = False
        if not survey.missing and not survey.mis_shaped:
            raise
        # Names nobody asked for are only known when the whole model was built.
        unexpected = sorted(set(vb.names()) - survey.used) if finished else []
        raise mismatch(model, where or vb._backend.where, survey.missing, unexpected,
                       survey.mis_shaped) from error  # fmt: skip
    finally:
        if bar is not None:
            bar.close()


# -- VarBuilder --------------------------------------------------------------------------------
class VarBuilder:
    """Tensors by dotted name for building layers (see the module docstring).

    ``dtype`` (None keeps each stored tensor's own) applies to floating point tensors; ``device``
    is where tensors end up.
    """

    def __init__(
        self,
        backend: _Backend,
        dtype: dt.DType | str | None = None,
        device: Device | str | None = None,
        prefix: tuple[str, ...] = (),
    ):
        self._backend = backend
        self.dtype = None if dtype is None else dt.dtype(dtype)
        self.device = CPU if device is None else Device(device)
        self._prefix = prefix

    @classmethod
    def from_safetensors(cls, paths, dtype=None, device=None) -> VarBuilder:
        """Memory-mapped safetensors: a file, a list of files, an index JSON or a folder."""
        from ..io.safetensors import open_safetensors

        return cls(_Files(open_safetensors(paths)), dtype, device)

    @classmethod
    def from_dict(cls, tensors: Mapping[str, Any], dtype=None, device=None) -> VarBuilder:
        """Tensors (or numpy arrays) by full name."""
        return cls(_Dict(tensors), dtype, device)

    @classmethod
    def from_varmap(cls, varmap: VarMap, dtype=dt.f32, device=None) -> VarBuilder:
        """Trainable: names not seen before become new ``Var``s from their init hint."""
        return cls(_VarMapBackend(varmap), dtype, device)

    @classmethod
    def zeros(cls, dtype=dt.f32, device=None) -> VarBuilder:
        """Every name exists and is zeros (to build a model's shapes without weights)."""
        return cls(_Zeros(), dtype, device)

    # -- prefixes ---------------------------------------------------------------------------
    @property
    def prefix(self) -> str:
        return ".".join(self._prefix)

    def pp(self, name: str | int) -> VarBuilder:
        """The same builder under ``prefix.name`` (``vb.pp("layers").pp(0)``)."""
        return VarBuilder(self._backend, self.dtype, self.device, (*self._prefix, str(name)))

    push_prefix = pp

    def root(self) -> VarBuilder:
        return VarBuilder(self._backend, self.dtype, self.device)

    def to_dtype(self, dtype) -> VarBuilder:
        return VarBuilder(self._backend, dtype, self.device, self._prefix)

    def to_device(self, device) -> VarBuilder:
        return VarBuilder(self._backend, self.dtype, device, self._prefix)

    def path(self, name: str) -> str:
        return ".".join((*self._prefix, name)) if self._prefix else name

    # -- tensors ----------------------------------------------------------------------------
    def get(self, shape, name: str, init: Any = None, dtype=None) -> Tensor:
        """The tensor ``prefix.name``, which must have ``shape``.

        ``init`` (a hint from ``nn.init`` or a number) is used only when the backend creates
        variables (``VarMap``); ``dtype`` overrides the builder's.
        """
        shape = tuple(int(s) for s in ((shape,) if isinstance(shape, int) else shape))
        dtype = self.dtype if dtype is None else dt.dtype(dtype)
        return self._backend.get(self.path(name), shape, init, dtype, self.device)

    def get_with_hints(self, shape, name: str, init: Any) -> Tensor:
        return self.get(shape, name, init)

    def get_unchecked(self, name: str, dtype=None) -> Tensor:
        """The tensor ``prefix.name`` whatever its shape."""
        dtype = self.dtype if dtype is None else dt.dtype(dtype)
        return self._backend.get(self.path(name), None, None, dtype, self.device)

    def contains(self, name: str) -> bool:
        return self._backend.contains(self.path(name))

    contains_tensor = contains

    def names(self) -> list[str]:
        """Every stored name under this builder's prefix (full names)."""
        head = self.prefix + "." if self._prefix else ""
        return [n for n in self._backend.names() if n.startswith(head)]

    def __repr__(self) -> str:
        dtype = self.dtype.name if self.dtype else "stored dtypes"
        return f"VarBuilder({self._backend.where}, prefix={self.prefix!r}, {dtype}, {self.device})"
