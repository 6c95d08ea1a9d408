"""workbench.nn: modules, layers, losses, initialisation and weight loading.

    from workbench import nn
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    loss = nn.functional.cross_entropy(model(x), y)

Layers follow PyTorch's names, arguments, weight layouts and default initialisation, so
``state_dict`` keys match; every layer also takes ``vb=`` (a ``VarBuilder``) to read its
weights candle-style.
"""

from . import functional, init
from .activation import (
    CELU,
    ELU,
    GELU,
    GLU,
    SELU,
    Activation,
    HardSigmoid,
    HardSwish,
    Hardtanh,
    LeakyReLU,
    LogSigmoid,
    LogSoftmax,
    Mish,
    PReLU,
    QuickGELU,
    ReLU,
    ReLU2,
    ReLU6,
    Sigmoid,
    SiLU,
    Softmax,
    Softplus,
    Softsign,
    SwiGLU,
    Swish,
    Tanh,
)
from .attention import MultiheadAttention
from .container import ModuleDict, ModuleList, Sequential
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from .data import Batcher
from .dropout import Dropout
from .embedding import Embedding
from .kv_cache import Cache, KvCache, RotatingCache, RotatingKvCache
from .linear import Flatten, Identity, Linear, Unflatten
from .loss_modules import (
    BCELoss,
    BCEWithLogitsLoss,
    CrossEntropyLoss,
    HuberLoss,
    KLDivLoss,
    L1Loss,
    MSELoss,
    NLLLoss,
    SmoothL1Loss,
)
from .module import IncompatibleKeys, Module, StateDictError
from .norm import BatchNorm1d, BatchNorm2d, GroupNorm, LayerNorm, RMSNorm, RmsNorm
from .pooling import (
    AdaptiveAvgPool1d,
    AdaptiveAvgPool2d,
    AdaptiveAvgPool3d,
    AdaptiveMaxPool1d,
    AdaptiveMaxPool2d,
    AdaptiveMaxPool3d,
    AvgPool1d,
    AvgPool2d,
    AvgPool3d,
    MaxPool1d,
    MaxPool2d,
    MaxPool3d,
    Upsample,
)
from .rnn import GRU, LSTM
from .var_builder import VarBuilder, VarBuilderError, VarMap

F = functional

__all__ = [
    "Activation", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d",
    "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d", "AvgPool1d", "AvgPool2d",
    "AvgPool3d",
    "BCELoss", "BCEWithLogitsLoss", "Batcher", "BatchNorm1d", "BatchNorm2d", "CELU", "Cache",
    "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d",
    "CrossEntropyLoss", "Dropout",
    "ELU", "Embedding", "F", "Flatten", "GELU", "GLU", "GRU", "GroupNorm", "HardSigmoid",
    "HardSwish", "Hardtanh", "HuberLoss", "Identity", "IncompatibleKeys", "KLDivLoss",
    "KvCache", "L1Loss", "LSTM", "LayerNorm", "LeakyReLU", "Linear", "LogSigmoid",
    "LogSoftmax", "MSELoss", "MaxPool1d", "MaxPool2d", "MaxPool3d", "Mish", "Module", "ModuleDict",
    "ModuleList", "MultiheadAttention", "NLLLoss", "PReLU", "QuickGELU", "RMSNorm", "ReLU",
    "ReLU2", "ReLU6", "RmsNorm", "RotatingCache", "RotatingKvCache", "SELU", "SiLU", "Sequential",
    "Sigmoid", "SmoothL1Loss", "Softmax", "Softplus", "Softsign", "StateDictError", "SwiGLU",
    "Swish", "Tanh", "Unflatten", "Upsample", "VarBuilder", "VarBuilderError", "VarMap",
    "functional", "init",
]  # fmt: skip
