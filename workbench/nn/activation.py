"""Activation layers: candle's list (``Activation`` by name, as in a model's config) and the
PyTorch modules. The maths is in ``nn.functional``'s docstring."""

from __future__ import annotations

from ..errors import WorkbenchError
from ..ops import fused
from ..tensor import Tensor
from . import functional as F
from . import init
from ._params import make_param
from .module import Module


class _Elementwise(Module):
    _fn = staticmethod(F.relu)

    def forward(self, x: Tensor) -> Tensor:
        return self._fn(x)


class ReLU(_Elementwise):
    _fn = staticmethod(F.relu)


class ReLU2(_Elementwise):
    """relu(x)²"""

    _fn = staticmethod(F.relu2)


class ReLU6(_Elementwise):
    _fn = staticmethod(F.relu6)


class SiLU(_Elementwise):
    """x σ(x), also called Swish."""

    _fn = staticmethod(F.silu)


Swish = SiLU


class Sigmoid(_Elementwise):
    _fn = staticmethod(F.sigmoid)


class Tanh(_Elementwise):
    _fn = staticmethod(F.tanh)


class HardSigmoid(_Elementwise):
    _fn = staticmethod(F.hardsigmoid)


class HardSwish(_Elementwise):
    _fn = staticmethod(F.hardswish)


class Mish(_Elementwise):
    _fn = staticmethod(F.mish)


class QuickGELU(_Elementwise):
    _fn = staticmethod(F.quick_gelu)


class SELU(_Elementwise):
    _fn = staticmethod(F.selu)


class Softsign(_Elementwise):
    _fn = staticmethod(F.softsign)


class LogSigmoid(_Elementwise):
    _fn = staticmethod(F.logsigmoid)


class SwiGLU(_Elementwise):
    """silu(a) b, (a, b) = the halves of the last dim: (..., 2d) -> (..., d)."""

    _fn = staticmethod(F.swiglu)


class GELU(Module):
    """GELU; ``approximate="none"`` (exact, PyTorch's default) or ``"tanh"``."""

    def __init__(self, approximate: str = "none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise WorkbenchError(
                f"GELU: approximate must be 'none' or 'tanh', found {approximate!r}"
            )
        self.approximate = approximate

    def forward(self, x: Tensor) -> Tensor:
        return F.gelu(x, self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class ELU(Module):
    def __init__(self, alpha: float = 1.0):
        super().__init__()
        self.alpha = alpha

    def forward(self, x: Tensor) -> Tensor:
        return F.elu(x, self.alpha)


class CELU(Module):
    def __init__(self, alpha: float = 1.0):
        super().__init__()
        self.alpha = alpha

    def forward(self, x: Tensor) -> Tensor:
        return F.celu(x, self.alpha)


class LeakyReLU(Module):
    def __init__(self, negative_slope: float = 0.01):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: Tensor) -> Tensor:
        return F.leaky_relu(x, self.negative_slope)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}"


class Hardtanh(Module):
    def __init__(self, min_val: float = -1.0, max_val: float = 1.0):
        super().__init__()
        self.min_val, self.max_val = min_val, max_val

    def forward(self, x: Tensor) -> Tensor:
        return F.hardtanh(x, self.min_val, self.max_val)


class Softplus(Module):
    def __init__(self, beta: float = 1.0, threshold: float = 20.0):
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, x: Tensor) -> Tensor:
        return F.softplus(x, self.beta, self.threshold)


class GLU(Module):
    def __init__(self, dim: int = -1):
        super().__init__()
        self.dim = dim

    def forward(self, x: Tensor) -> Tensor:
        return F.glu(x, self.dim)


class PReLU(Module):
    """leaky_relu with a learned slope (``weight``: (num_parameters,), one per channel or
    one shared), initialised to ``init``."""

    def __init__(
        self, num_parameters: int = 1, init: float = 0.25, *, vb=None, dtype=None, device=None
    ):
        super().__init__()
        self.num_parameters = num_parameters
        self.register_parameter(
            "weight", make_param(vb, (num_parameters,), "weight", init_const(init), dtype, device)
        )

    def forward(self, x: Tensor) -> Tensor:
        return F.prelu(x, self.weight)


def init_const(value: float):
    return init.Const(float(value))


class Softmax(Module):
    def __init__(self, dim: int = -1):
        super().__init__()
        self.dim = dim

    def forward(self, x: Tensor) -> Tensor:
        return fused.softmax(x, self.dim)


class LogSoftmax(Module):
    def __init__(self, dim: int = -1):
        super().__init__()
        self.dim = dim

    def forward(self, x: Tensor) -> Tensor:
        return fused.log_softmax(x, self.dim)


# candle's Activation names (and Hugging Face config ``hidden_act`` values) -> modules.
_BY_NAME = {
    "gelu": lambda: GELU("none"),
    "gelu_new": lambda: GELU("tanh"),
    "new_gelu": lambda: GELU("tanh"),
    "gelu_pytorch_tanh": lambda: GELU("tanh"),
    "gelu_fast": lambda: GELU("tanh"),
    "quick_gelu": QuickGELU,
    "relu": ReLU,
    "relu2": ReLU2,
    "relu6": ReLU6,
    "silu": SiLU,
    "swish": SiLU,
    "sigmoid": Sigmoid,
    "hard_sigmoid": HardSigmoid,
    "hardsigmoid": HardSigmoid,
    "hard_swish": HardSwish,
    "hardswish": HardSwish,
    "swiglu": SwiGLU,
    "mish": Mish,
    "tanh": Tanh,
    "elu": ELU,
    "selu": SELU,
    "leaky_relu": LeakyReLU,
    "softplus": Softplus,
}


def Activation(name: str, *args) -> Module:  # noqa: N802  (reads like candle's enum)
    """The activation layer called ``name`` (a config's ``hidden_act``): ``"gelu"`` (exact),
    ``"gelu_pytorch_tanh"``, ``"silu"``, ``"relu"``, ``"swiglu"``, ... ; extra arguments go to
    the layer (``Activation("leaky_relu", 0.2)``)."""
    key = name.lower()
    if key not in _BY_NAME:
        raise WorkbenchError(f"unknown activation {name!r}; expected one of {sorted(_BY_NAME)}")
    return _BY_NAME[key](*args)
