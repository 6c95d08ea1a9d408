"""``.npy`` and ``.npz`` files (numpy's formats), without pickle.

``load_npy`` memory-maps the file (a zero-copy, read-only tensor on the CPU); ``.npz`` members
are zip entries, so ``load_npz`` copies them. numpy has no bfloat16 type of its own, so bf16
tensors are stored as f32 (exactly) and load back as f32.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Mapping

import numpy as np

from .. import dtype as dt
from ..device import Device
from ..ops.creation import from_numpy
from ..tensor import Tensor
from .errors import NpzError


def _to_array(name: str, value) -> np.ndarray:
    if isinstance(value, Tensor):
        array = value.detach().numpy()
    else:
        array = np.asarray(value)
    if dt.widened_from_numpy(array.dtype) is dt.bf16:  # (bf16.numpy would import ml_dtypes)
        array = array.astype(np.float32)
    if dt.widened_from_numpy(array.dtype) is None:
        raise NpzError(f"{name!r}: numpy dtype {array.dtype} has no workbench dtype")
    return array


def _to_tensor(path, name: str, array: np.ndarray, device) -> Tensor:
    if dt.widened_from_numpy(array.dtype) is None:
        raise NpzError(
            f"{path}: array {name!r} has dtype {array.dtype}, which workbench cannot hold"
        )
    return from_numpy(array, device)


def save_npz(
    path: str | os.PathLike, tensors: Mapping[str, Tensor | np.ndarray], compressed: bool = False
) -> None:
    """Write ``tensors`` by name to an ``.npz`` archive (``compressed`` uses zip deflate)."""
    arrays = {name: _to_array(name, value) for name, value in tensors.items()}
    (np.savez_compressed if compressed else np.savez)(path, **arrays)


def load_npz(path: str | os.PathLike, device: Device | str | None = None) -> dict[str, Tensor]:
    """Every array of an ``.npz`` archive as a tensor, by name (pickled objects are refused)."""
    try:
        with np.load(path, allow_pickle=False) as archive:
            return {name: _to_tensor(path, name, archive[name], device) for name in archive.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as e:
        raise NpzError(f"{path}: cannot read as .npz ({e})") from None


def save_npy(path: str | os.PathLike, tensor: Tensor | np.ndarray) -> None:
    np.save(path, _to_array(str(path), tensor), allow_pickle=False)


def load_npy(path: str | os.PathLike, device: Device | str | None = None) -> Tensor:
    """An ``.npy`` file as a tensor, memory-mapped (read-only, no copy on the CPU)."""
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError, EOFError) as e:
        raise NpzError(f"{path}: cannot read as .npy ({e})") from None
    if not array.flags.c_contiguous:  # Fortran order
        array = np.ascontiguousarray(array)
    return _to_tensor(path, "array", array, device)
