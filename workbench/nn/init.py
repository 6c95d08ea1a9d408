"""Initialisation: hints for ``VarBuilder.get`` and PyTorch-style in-place functions.

A hint is a callable ``hint(shape, dtype, device) -> Tensor`` (candle's ``Init``):
``Const(0.0)``, ``Normal(0, 0.02)``, ``Uniform(-b, b)``, ``KaimingUniform()``,
``KaimingNormal(mode="fan_out", nonlinearity="relu")``, ``XavierUniform(gain)``,
``XavierNormal(gain)``. The in-place forms (``kaiming_uniform_(w, a=5 ** 0.5)`` ...) fill an
existing tensor, as ``torch.nn.init`` does.

Fans, for a weight of shape ``(out, in, *kernel)``: ``fan_in = in * prod(kernel)``,
``fan_out = out * prod(kernel)``.

- kaiming: std = gain / sqrt(fan); uniform bound = sqrt(3) * std
- xavier:  std = gain * sqrt(2 / (fan_in + fan_out)); uniform bound = sqrt(3) * std

Values are drawn from ``wb.manual_seed``'s generator (or ``generator=``) on the host.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from .. import dtype as dt
from ..autograd import no_grad
from ..device import Device
from ..errors import ShapeError, WorkbenchError
from ..ops.creation import from_numpy, full
from ..random import Generator, default_generator
from ..tensor import Tensor


class Init(Protocol):
    def __call__(self, shape: tuple[int, ...], dtype=dt.f32, device=None) -> Tensor: ...


def fans(shape: tuple[int, ...]) -> tuple[int, int]:
    """``(fan_in, fan_out)`` of a weight of shape ``(out, in, *kernel)``."""
    if len(shape) < 2:
        raise ShapeError(f"init: fan in and fan out need at least 2 dims, shape is {shape}")
    receptive = math.prod(shape[2:])
    return shape[1] * receptive, shape[0] * receptive


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for a nonlinearity (PyTorch's table)."""
    linear = (
        "linear",
        "conv1d",
        "conv2d",
        "conv3d",
        "conv_transpose1d",
        "conv_transpose2d",
        "conv_transpose3d",
        "sigmoid",
        "identity",
    )
    if nonlinearity in linear:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else float(param)
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise WorkbenchError(f"calculate_gain: unknown nonlinearity {nonlinearity!r}")


def _host(values: np.ndarray, dtype, device) -> Tensor:
    dtype = dt.dtype(dtype)
    return from_numpy(np.require(values, dtype.numpy, "C"), device)


def _rng(generator: Generator | None):
    return (generator or default_generator).rng


def _fan(shape, mode: str) -> int:
    fan_in, fan_out = fans(tuple(shape))
    if mode not in ("fan_in", "fan_out"):
        raise WorkbenchError(f"init: mode must be 'fan_in' or 'fan_out', found {mode!r}")
    return fan_in if mode == "fan_in" else fan_out


@dataclass(frozen=True)
class Const:
    """Every element ``value``."""

    value: float

    def __call__(self, shape, dtype=dt.f32, device=None) -> Tensor:
        return full(tuple(shape), fill_value=self.value, dtype=dtype, device=device)


@dataclass(frozen=True)
class Normal:
    """N(mean, std²)."""

    mean: float = 0.0
    std: float = 1.0
    generator: Generator | None = None

    def __call__(self, shape, dtype=dt.f32, device=None) -> Tensor:
        return _host(_rng(self.generator).normal(self.mean, self.std, tuple(shape)), dtype, device)


@dataclass(frozen=True)
class Uniform:
    """U(low, high)."""

    low: float = 0.0
    high: float = 1.0
    generator: Generator | None = None

    def __call__(self, shape, dtype=dt.f32, device=None) -> Tensor:
        values = _rng(self.generator).uniform(self.low, self.high, tuple(shape))
        return _host(values, dtype, device)


@dataclass(frozen=True)
class KaimingUniform:
    """U(-b, b), b = gain * sqrt(3 / fan). ``a`` is the leaky ReLU slope for the gain."""

    a: float = 0.0
    mode: str = "fan_in"
    nonlinearity: str = "leaky_relu"
    generator: Generator | None = None

    def __call__(self, shape, dtype=dt.f32, device=None) -> Tensor:
        gain = calculate_gain(self.nonlinearity, self.a)
        bound = gain * math.sqrt(3.0 / _fan(shape, self.mode))
        return Uniform(-bound, bound, self.generator)(shape, dtype, device)


@dataclass(frozen=True)
class KaimingNormal:
    """N(0, std²), std = gain / sqrt(fan)."""

    a: float = 0.0
    mode: str = "fan_in"
    nonlinearity: str = "leaky_relu"
    generator: Generator | None = None

    def __call__(self, shape, dtype=dt.f32, device=None) -> Tensor:
        std = calculate_gain(self.nonlinearity, self.a) / math.sqrt(_fan(shape, self.mode))
        return Normal(0.0, std, self.generator)(shape, dtype, device)


@dataclass(frozen=True)
class XavierUniform:
    """U(-b, b), b = gain * sqrt(6 / (fan_in + fan_out))."""

    gain: float = 1.0
    generator: Generator | None = None

    def __call__(self, shape, dtype=dt.f32, device=None) -> Tensor:
        fan_in, fan_out = fans(tuple(shape))
        bound = self.gain * math.sqrt(6.0 / (fan_in + fan_out))
        return Uniform(-bound, bound, self.generator)(shape, dtype, device)


@dataclass(frozen=True)
class XavierNormal:
    """N(0, std²), std = gain * sqrt(2 / (fan_in + fan_out))."""

    gain: float = 1.0
    generator: Generator | None = None

    def __call__(self, shape, dtype=dt.f32, device=None) -> Tensor:
        fan_in, fan_out = fans(tuple(shape))
        std = self.gain * math.sqrt(2.0 / (fan_in + fan_out))
        return Normal(0.0, std, self.generator)(shape, dtype, device)


ZEROS = Const(0.0)
ONES = Const(1.0)
# PyTorch's default for Linear and Conv weights: kaiming_uniform_(w, a=sqrt(5)), which is
# U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
DEFAULT_WEIGHT = KaimingUniform(a=math.sqrt(5.0))
# candle's default for Linear weights.
DEFAULT_KAIMING_NORMAL = KaimingNormal(nonlinearity="relu")


def default_bias(fan_in: int) -> Uniform:
    """PyTorch's default bias init for Linear/Conv: U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
    bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
    return Uniform(-bound, bound)


# -- in place, as torch.nn.init ----------------------------------------------------------------
def _fill(t: Tensor, hint: Init) -> Tensor:
    with no_grad():
        t.copy_(hint(t.shape, t.dtype, t.device))
    return t


def uniform_(t: Tensor, a: float = 0.0, b: float = 1.0, generator=None) -> Tensor:
    return _fill(t, Uniform(a, b, generator))


def normal_(t: Tensor, mean: float = 0.0, std: float = 1.0, generator=None) -> Tensor:
    return _fill(t, Normal(mean, std, generator))


def constant_(t: Tensor, val: float) -> Tensor:
    with no_grad():
        t.fill_(val)
    return t


def zeros_(t: Tensor) -> Tensor:
    return constant_(t, 0.0)


def ones_(t: Tensor) -> Tensor:
    return constant_(t, 1.0)


def kaiming_uniform_(
    t: Tensor,
    a: float = 0.0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator=None,
) -> Tensor:
    return _fill(t, KaimingUniform(a, mode, nonlinearity, generator))


def kaiming_normal_(
    t: Tensor,
    a: float = 0.0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator=None,
) -> Tensor:
    return _fill(t, KaimingNormal(a, mode, nonlinearity, generator))


def xavier_uniform_(t: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    return _fill(t, XavierUniform(gain, generator))


def xavier_normal_(t: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    return _fill(t, XavierNormal(gain, generator))


def make(hint: Init, shape, dtype=dt.f32, device: Device | str | None = None) -> Tensor:
    """A new tensor from ``hint`` (or from a plain number, as ``Const``)."""
    if isinstance(hint, int | float):
        hint = Const(float(hint))
    return hint(tuple(shape), dt.dtype(dtype), device)
