"""Reading and writing tensors: safetensors, npz, the Hugging Face Hub.

wb.io.save_safetensors({"w": w}, "model.safetensors", metadata={"step": "10"})
tensors = wb.io.load_safetensors("model.safetensors")   # memory-mapped, zero-copy on CPU
path = wb.io.hub.file("org/model", "model.safetensors", revision="<commit>")
"""

from . import hub
from .errors import HubError, HubOfflineError, NpzError, SafetensorsError
from .npz import load_npy, load_npz, save_npy, save_npz
from .safetensors import (
    SafetensorsFile,
    ShardedSafetensors,
    load_safetensors,
    open_safetensors,
    save_safetensors,
)

__all__ = [
    "HubError", "HubOfflineError", "NpzError", "SafetensorsError", "SafetensorsFile",
    "ShardedSafetensors", "hub", "load_npy", "load_npz", "load_safetensors", "open_safetensors",
    "save_npy", "save_npz", "save_safetensors",
]  # fmt: skip
