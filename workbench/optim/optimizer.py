"""The ``Optimizer`` base class: parameter groups, state, ``step`` and ``backward_step``.

``step()`` reads the gradients from ``param.grad`` (PyTorch's way) or from a ``GradStore``
(candle's: ``opt.step(loss.backward())``); ``backward_step(loss)`` does both halves and clears
``.grad`` afterwards. Updates run under ``no_grad`` and write into the parameters in place
(the ``Var`` objects never change, so a model's layers keep pointing at them).

Each optimizer writes its update rule once against a small kernel interface (``_Kernels``):
on the CPU the rule runs on numpy views of the parameter and state buffers with ``out=``
writes (no graph, few temporaries); on other devices it runs the same rule with tensor ops.
On the CPU a rule may also run whole as one optional storage method (Adam's ``adam_step``: a
native pass per parameter) where the storage's kernel takes the operands.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from ..autograd import GradStore, enable_grad, no_grad
from ..backends.base import supports
from ..errors import WorkbenchError
from ..ops.creation import zeros_like
from ..tensor import Tensor


class OptimizerError(WorkbenchError, ValueError):
    """Bad hyper-parameters or parameters the optimizer cannot update."""


def _as_param_list(params: Any) -> list:
    if hasattr(params, "parameters") and callable(params.parameters):  # a Module
        params = params.parameters()
    elif hasattr(params, "all_vars"):  # a VarMap
        params = params.all_vars()
    if isinstance(params, Tensor):
        raise OptimizerError("params must be an iterable of tensors (or of dicts), not a tensor")
    return list(params)


class Optimizer:
    """Base class. ``param_groups`` is a list of dicts holding ``"params"`` and the
    hyper-parameters (``"lr"``, ...) that schedulers and users may change between steps."""

    def __init__(self, params: Any, defaults: dict[str, Any]):
        self.defaults = defaults
        self.param_groups: list[dict[str, Any]] = []
        self.state: dict[int, dict[str, Any]] = {}
        items = _as_param_list(params)
        if not items:
            raise OptimizerError(f"{type(self).__name__}: got an empty parameter list")
        if isinstance(items[0], dict):
            for group in items:
                self.add_param_group(group)
        else:
            self.add_param_group({"params": items})

    def add_param_group(self, group: dict[str, Any]) -> None:
        group = dict(group)
        params = group["params"]
        params = [params] if isinstance(params, Tensor) else _as_param_list(params)
        for p in params:
            if not isinstance(p, Tensor):
                raise OptimizerError(
                    f"{type(self).__name__}: expected tensors, found {type(p).__name__}"
                )
            if not p.dtype.is_floating_point:
                raise OptimizerError(
                    f"{type(self).__name__}: cannot optimise a {p.dtype.name} tensor"
                )
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in params):
            raise OptimizerError("a parameter appears in more than one parameter group")
        group["params"] = params
        for key, value in self.defaults.items():
            group.setdefault(key, value)
        self.param_groups.append(group)

    # -- learning rate (candle's names) -----------------------------------------------------
    @property
    def lr(self) -> float:
        return self.param_groups[0]["lr"]

    @lr.setter
    def lr(self, value: float) -> None:
        self.set_learning_rate(value)

    def learning_rate(self) -> float:
        return self.lr

    def set_learning_rate(self, lr: float) -> None:
        for group in self.param_groups:
            group["lr"] = lr

    # -- steps ------------------------------------------------------------------------------
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Forget the ``.grad`` of every parameter."""
        for group in self.param_groups:
            for p in group["params"]:
                p.grad = None

    def step(self, grads: GradStore | Callable | None = None) -> Any:
        """One update of every parameter that has a gradient: from ``grads`` (a
        ``GradStore``) or, when None, from ``param.grad``. A callable is a closure that
        recomputes the loss (it is called with grad mode on and its value returned)."""
        loss = None
        if callable(grads) and not isinstance(grads, GradStore):
            with enable_grad():
                loss = grads()
            grads = None
        with no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    g = p.grad if grads is None else grads.get(p)
                    if g is None:
                        continue
                    if g.shape != p.shape:
                        raise OptimizerError(
                            f"{type(self).__name__}: gradient {g.shape} does "
                            f"not match its parameter {p.shape}"
                        )
                    state = self.state.get(id(p))
                    if state is None:
                        state = self.state[id(p)] = {"step": 0}
                    state["step"] += 1
                    k = _kernels_for(p, type(self).__name__)
                    self._update(k, p, g, state, group)
                    k.touch(p)
        return loss

    def backward_step(self, loss: Tensor) -> GradStore:
        """``loss.backward()`` then ``step`` with those gradients; ``.grad`` is cleared after,
        so gradients never pile up across steps. Returns the ``GradStore``."""
        grads = loss.backward()
        self.step(grads)
        self.zero_grad()
        return grads

    def _update(self, k: _Kernels, p: Tensor, g: Tensor, state: dict, group: dict) -> None:
        """Update ``p`` in place from ``g``; ``k.view(t)`` gives the arrays the rule works on."""
        raise NotImplementedError

    @staticmethod
    def _state_tensor(state: dict, name: str, p: Tensor) -> Tensor:
        """The state buffer ``name`` (zeros like ``p`` the first time)."""
        t = state.get(name)
        if t is None:
            t = state[name] = zeros_like(p)
        return t

    @classmethod
    def _buffer(cls, k: _Kernels, state: dict, name: str, p: Tensor) -> Any:
        """The state buffer ``name`` (zeros like ``p`` the first time), as a kernel array."""
        return k.view(cls._state_tensor(state, name, p))

    # -- checkpoints ------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """``{"state": {index: {...}}, "param_groups": [{..., "params": [index, ...]}]}`` with
        parameters numbered in group order, as PyTorch."""
        index: dict[int, int] = {}
        groups = []
        for group in self.param_groups:
            ids = []
            for p in group["params"]:
                index.setdefault(id(p), len(index))
                ids.append(index[id(p)])
            groups.append({**{k: v for k, v in group.items() if k != "params"}, "params": ids})
        state = {index[pid]: dict(s) for pid, s in self.state.items() if pid in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups) or any(
            len(a["params"]) != len(b["params"])
            for a, b in zip(groups, self.param_groups, strict=True)
        ):
            raise OptimizerError(
                "load_state_dict: the parameter groups do not match this optimizer's"
            )
        by_index = {}
        for saved, group in zip(groups, self.param_groups, strict=True):
            for i, p in zip(saved["params"], group["params"], strict=True):
                by_index[i] = p
            group.update({k: v for k, v in saved.items() if k != "params"})
        self.state = {}
        for i, s in state_dict["state"].items():
            p = by_index[int(i)]
            self.state[id(p)] = {
                k: (v.to(p.device).clone() if isinstance(v, Tensor) else v) for k, v in s.items()
            }

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for key in sorted(k for k in group if k != "params"):
                lines.append(f"    {key}: {group[key]}")
        return "\n".join(lines) + "\n)"


def _positive(name: str, what: str, value: float, allow_zero: bool = True) -> None:
    if not (value >= 0 if allow_zero else value > 0) or math.isnan(value):
        raise OptimizerError(f"{name}: invalid {what} {value}")


# -- kernels -----------------------------------------------------------------------------------
class _Kernels:
    """The few in-place vector operations the update rules need (``x_`` writes into x)."""

    def view(self, t: Tensor): ...
    def touch(self, p: Tensor) -> None: ...

    def fused(self, p: Tensor, method: str) -> bool:
        """Whether a rule may run whole as the parameter storage's optional ``method``."""
        return False


class _NumpyKernels(_Kernels):
    """CPU: numpy views of the tensors' memory, written with ``out=``."""

    def view(self, t: Tensor) -> np.ndarray:
        return t.numpy()

    def touch(self, p: Tensor) -> None:
        p._storage.version += 1  # like any in-place write: stale graphs must not reuse p

    def fused(self, p: Tensor, method: str) -> bool:
        # (the tensor-op kernels never are: tests select them to check the rules themselves)
        return supports(p._storage, method)

    @staticmethod
    def scale_(a, s):
        np.multiply(a, s, out=a)

    @staticmethod
    def add_(a, b, alpha=1.0):
        if alpha == 1.0:
            np.add(a, b, out=a)
        else:
            np.add(a, np.multiply(b, alpha), out=a)

    @staticmethod
    def add_scalar_(a, s):
        np.add(a, s, out=a)

    @staticmethod
    def div_scalar_(a, s):
        np.divide(a, s, out=a)

    @staticmethod
    def lerp_(a, b, w):
        """a += w (b - a)"""
        tmp = np.subtract(b, a)
        np.multiply(tmp, w, out=tmp)
        np.add(a, tmp, out=a)

    @staticmethod
    def addcmul_(a, b, c, value):
        """a += value b c"""
        tmp = np.multiply(b, value)
        np.multiply(tmp, c, out=tmp)
        np.add(a, tmp, out=a)

    @staticmethod
    def addcdiv_(a, b, c, value):
        """a += value b / c"""
        tmp = np.divide(b, c)
        np.multiply(tmp, value, out=tmp)
        np.add(a, tmp, out=a)

    @staticmethod
    def maximum_(a, b):
        np.maximum(a, b, out=a)

    @staticmethod
    def copy_(a, b):
        np.copyto(a, b)

    @staticmethod
    def sqrt(a):
        return np.sqrt(a)

    @staticmethod
    def axpy(y, x, alpha):
        """y + alpha x (new)"""
        return np.add(y, np.multiply(x, alpha))

    @staticmethod
    def neg(a):
        return np.negative(a)

    @staticmethod
    def clone(a):
        return np.array(a)


class _TensorKernels(_Kernels):
    """Any device: the same operations with tensor ops (under ``no_grad``)."""

    def view(self, t: Tensor) -> Tensor:
        return t.detach()

    def touch(self, p: Tensor) -> None:
        pass  # the in-place ops bumped the version

    @staticmethod
    def scale_(a, s):
        a.mul_(s)

    @staticmethod
    def add_(a, b, alpha=1.0):
        a.add_(b if alpha == 1.0 else b * alpha)

    @staticmethod
    def add_scalar_(a, s):
        a.add_(s)

    @staticmethod
    def div_scalar_(a, s):
        a.div_(s)

    @staticmethod
    def lerp_(a, b, w):
        a.add_((b - a) * w)

    @staticmethod
    def addcmul_(a, b, c, value):
        a.add_(b * value * c)

    @staticmethod
    def addcdiv_(a, b, c, value):
        a.add_((b / c) * value)

    @staticmethod
    def maximum_(a, b):
        a.copy_(a.maximum(b))

    @staticmethod
    def copy_(a, b):
        a.copy_(b)

    @staticmethod
    def sqrt(a):
        return a.sqrt()

    @staticmethod
    def axpy(y, x, alpha):
        return y + x * alpha

    @staticmethod
    def neg(a):
        return -a

    @staticmethod
    def clone(a):
        return a.clone()


NUMPY_KERNELS = _NumpyKernels()
TENSOR_KERNELS = _TensorKernels()
# Tests flip this to run the tensor-op rules on the CPU too.
USE_NUMPY_ON_CPU = True


def _kernels_for(p: Tensor, owner: str) -> _Kernels:
    if p.device.is_cpu and USE_NUMPY_ON_CPU:
        if not p.numpy().flags.writeable:
            raise OptimizerError(
                f"{owner}: a parameter of shape {p.shape} is read-only (a view of a "
                "memory-mapped file?); train a copy (VarMap.load, or Var(t.clone()))"
            )
        return NUMPY_KERNELS
    return TENSOR_KERNELS


def _params_of(parameters: Iterable | Tensor) -> list[Tensor]:
    if isinstance(parameters, Tensor):
        return [parameters]
    return _as_param_list(parameters)
