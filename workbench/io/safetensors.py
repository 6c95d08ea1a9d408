"""safetensors files: a validating, memory-mapped reader and an aligned writer.

Layout (little-endian)::

    n       u64, the length of the header in bytes
    header  n bytes of UTF-8 JSON: {"__metadata__": {str: str}, name: {"dtype": "F32",
            "shape": [2, 3], "data_offsets": [begin, end]}, ...}, padded with spaces
    data    the tensors' bytes, row-major; offsets are relative to the start of data

The header is read and checked completely (size, JSON, dtype names, shapes, offsets inside
the file, no overlaps or gaps, ``prod(shape) * itemsize == end - begin``) before any tensor
data is touched; a bad file raises :class:`SafetensorsError` naming the file and the tensor,
never another exception. As the reference (the ``safetensors`` package, serde_json) does, the
reader rejects duplicate keys, lone surrogates, numbers outside u64 and headers nested past
what JSON parsers allow, and accepts any number of dims of any u64 size; a tensor that numpy
cannot hold (more than 64 dims, or dims whose product overflows) raises when it is read.
Parsing costs a bounded amount of memory per header byte (``TensorInfo`` has slots; the JSON
tree is freed entry by entry as it is checked).
Reading maps the file (``mmap``, read-only): a CPU tensor in a dtype workbench has is a view
of the mapping, no copy. ``U16``/``U64`` are widened to i32/i64 and ``F8_*`` to bf16
(exactly), which copies. Writing pads the header to 8 bytes and orders tensors by
decreasing item size, so every tensor starts aligned to its own item size.
"""

from __future__ import annotations

import json
import math
import mmap
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NamedTuple, overload

import numpy as np

from .. import dtype as dt
from ..backends.lazy import LazyValues, lazy_module
from ..device import Device
from ..ops.creation import from_numpy
from ..tensor import Tensor
from .errors import SafetensorsError

MAX_HEADER_BYTES = 100_000_000  # the reference implementation's limit
ALIGNMENT = 8
INDEX_NAME = "model.safetensors.index.json"

ml_dtypes = lazy_module("ml_dtypes")

# safetensors dtype name -> bytes per element (what a header is checked against).
ITEMSIZE: dict[str, int] = {
    "BOOL": 1, "U8": 1, "I8": 1, "I16": 2, "U16": 2, "I32": 4, "U32": 4, "I64": 8, "U64": 8,
    "F16": 2, "BF16": 2, "F32": 4, "F64": 8, "F8_E4M3": 1, "F8_E5M2": 1,
}  # fmt: skip
# safetensors dtype name -> numpy dtype stored in the file; ml_dtypes' types (slow to import)
# are made at their first lookup.
FILE_DTYPES: dict[str, np.dtype] = LazyValues({
    "BOOL": np.dtype(np.bool_), "U8": np.dtype("u1"), "I8": np.dtype("i1"),
    "I16": np.dtype("<i2"), "U16": np.dtype("<u2"), "I32": np.dtype("<i4"),
    "U32": np.dtype("<u4"), "I64": np.dtype("<i8"), "U64": np.dtype("<u8"),
    "F16": np.dtype("<f2"), "F32": np.dtype("<f4"), "F64": np.dtype("<f8"),
}, lazy={
    "BF16": lambda: dt.bf16.numpy,
    "F8_E4M3": lambda: np.dtype(ml_dtypes.float8_e4m3fn),
    "F8_E5M2": lambda: np.dtype(ml_dtypes.float8_e5m2),
})  # fmt: skip
# File dtypes without a workbench twin, and the type they load as (exact for every value
# except U64 above 2**63 - 1).
WIDENED = {"U16": dt.i32, "U64": dt.i64, "F8_E4M3": dt.bf16, "F8_E5M2": dt.bf16}
# workbench dtype name -> safetensors dtype name (every workbench dtype can be written).
NAME_BY_DTYPE = {
    "bool": "BOOL", "u8": "U8", "u32": "U32", "i8": "I8", "i16": "I16", "i32": "I32",
    "i64": "I64", "f16": "F16", "bf16": "BF16", "f32": "F32", "f64": "F64",
}  # fmt: skip
_DTYPE_BY_NAME = {v: dt.dtype(k) for k, v in NAME_BY_DTYPE.items()}


@dataclass(frozen=True, slots=True)
class TensorInfo:
    """One header entry: the file's dtype name, the shape and the byte span in the data."""

    dtype: str
    shape: tuple[int, ...]
    begin: int
    end: int

    @property
    def wb_dtype(self) -> dt.DType:
        """The workbench dtype the tensor loads as."""
        return _DTYPE_BY_NAME.get(self.dtype) or WIDENED[self.dtype]


# -- reading -----------------------------------------------------------------------------------
_U64 = 2**64


class _DuplicateKey(ValueError):
    pass


class _Entry(NamedTuple):
    """A tensor's header object while parsing: a tuple is a quarter of a dict's memory, which
    bounds what a header of many tiny entries costs per byte."""

    dtype: Any
    shape: Any
    offsets: Any


_ENTRY_KEYS = frozenset(("dtype", "shape", "data_offsets"))


def _object(pairs: list[tuple[str, Any]]) -> dict | _Entry:
    """A JSON object, refusing duplicate keys (serde_json does; "last wins" hides edits)."""
    if len(pairs) == 3 and {k for k, _ in pairs} == _ENTRY_KEYS:
        obj = dict(pairs)
        return _Entry(obj["dtype"], obj["shape"], obj["data_offsets"])
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(f"the key {key!r} appears twice in one object")
            seen.add(key)
    return obj


def _is_text(value: object) -> bool:
    """A str that is valid Unicode: JSON's ``\\ud800`` escapes can make lone surrogates."""
    if not isinstance(value, str):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def parse_header(raw: bytes, data_len: int, path: str) -> tuple[dict[str, TensorInfo], dict]:
    """Check a header (the JSON bytes) against a data section of ``data_len`` bytes."""
    try:
        header = json.loads(raw.decode("utf-8"), object_pairs_hook=_object)
    except (UnicodeDecodeError, ValueError) as e:  # JSONDecodeError, duplicates, huge ints
        raise SafetensorsError(path, f"the header is not valid UTF-8 JSON ({e})") from None
    except RecursionError:
        raise SafetensorsError(path, "the header nests JSON values too deeply") from None
    if not isinstance(header, dict):
        raise SafetensorsError(path, f"the header is a JSON {type(header).__name__}, not an object")
    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(
        _is_text(k) and _is_text(v) for k, v in metadata.items()
    ):
        raise SafetensorsError(path, "__metadata__ must map strings to strings")
    infos = {}
    for name in list(header):
        if not _is_text(name):
            raise SafetensorsError(path, f"tensor name {name!r} is not valid Unicode")
        infos[name] = _parse_entry(name, header.pop(name), path)
    # The data must be exactly the tensors, in offset order, without gaps or overlaps.
    position = 0
    # (names sorted by one int per tensor: a pair per tensor would cost more per header byte)
    for name in sorted(infos, key=lambda n: infos[n].begin << 64 | infos[n].end):
        info = infos[name]
        if info.end > data_len:
            raise SafetensorsError(
                path,
                f"data_offsets [{info.begin}, {info.end}] go past the end of the data "
                f"({data_len} bytes): the file is truncated or the header is wrong",
                name,
            )
        if info.begin != position:
            problem = "overlaps the previous tensor" if info.begin < position else "leaves a gap"
            raise SafetensorsError(
                path,
                f"data_offsets [{info.begin}, {info.end}] {problem} (expected it to "
                f"start at byte {position} of the data)",
                name,
            )
        position = info.end
    if position != data_len:
        raise SafetensorsError(
            path, f"the tensors cover {position} bytes of data but the file holds {data_len}"
        )
    return infos, metadata


def _parse_entry(name: str, entry: Any, path: str) -> TensorInfo:
    if not isinstance(entry, _Entry):
        raise SafetensorsError(
            path, "a header entry needs exactly the keys dtype, shape and data_offsets", name
        )
    dtype, shape, offsets = entry
    if not isinstance(dtype, str) or dtype not in ITEMSIZE:
        raise SafetensorsError(
            path, f"dtype {dtype!r} is not supported; expected one of {sorted(ITEMSIZE)}", name
        )
    if not isinstance(shape, list) or not all(
        type(s) is int and 0 <= s < _U64
        for s in shape  # noqa: E721  (bool is an int subclass)
    ):
        raise SafetensorsError(path, f"shape {shape!r} is not a list of u64 sizes", name)
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(type(o) is int and 0 <= o < _U64 for o in offsets)  # noqa: E721
        or offsets[0] > offsets[1]
    ):
        raise SafetensorsError(path, f"data_offsets {offsets!r} are not [begin, end]", name)
    count = 1
    for size in shape:  # in order, as the reference's checked multiplication
        count *= size
        if count >= _U64:
            raise SafetensorsError(path, f"shape {shape} counts past u64 elements", name)
    nbytes = count * ITEMSIZE[dtype]
    if offsets[1] - offsets[0] != nbytes:
        raise SafetensorsError(
            path,
            f"shape {shape} of {dtype} needs {nbytes} bytes but data_offsets {offsets} span "
            f"{offsets[1] - offsets[0]}",
            name,
        )
    return TensorInfo(dtype, tuple(shape), offsets[0], offsets[1])


def _read_header(f, path: str, size: int) -> tuple[int, bytes]:
    if size < 8:
        raise SafetensorsError(
            path,
            f"the file holds {size} bytes; a safetensors file starts with an 8-byte "
            "header length (empty or truncated file?)",
        )
    n = int.from_bytes(f.read(8), "little")
    if n > MAX_HEADER_BYTES:
        raise SafetensorsError(
            path,
            f"header length {n} is over the {MAX_HEADER_BYTES}-byte limit (not a "
            "safetensors file?)",
        )
    if n > size - 8:
        raise SafetensorsError(
            path, f"header length {n} runs past the end of the {size}-byte file (truncated?)"
        )
    raw = f.read(n)
    if not raw.lstrip().startswith(b"{"):
        raise SafetensorsError(path, "the header does not start with '{' (not a safetensors file?)")
    return n, raw


class SafetensorsFile(Mapping):
    """One safetensors file, memory-mapped, read lazily: ``f["name"]`` is a tensor.

    ``keys()`` lists the names, ``info(name)`` gives dtype, shape and offsets without reading,
    ``metadata`` is the ``__metadata__`` dict. On the CPU a tensor is a read-only view of the
    mapping (zero-copy); ``get(name, device=...)`` copies it to another device.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = str(path)
        try:
            f = open(self.path, "rb")  # noqa: SIM115  (closed below; the map outlives it)
        except OSError as e:
            raise SafetensorsError(self.path, f"cannot open the file ({e.strerror})") from None
        with f:
            size = os.fstat(f.fileno()).st_size
            n, raw = _read_header(f, self.path, size)
            self._data_start = 8 + n
            self._infos, self.metadata = parse_header(raw, size - 8 - n, self.path)
            # mmap cannot map an empty file; a header-only file has no data to map.
            self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else None

    # -- Mapping -------------------------------------------------------------------------
    def __getitem__(self, name: str) -> Tensor:
        return self.get_tensor(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._infos)

    def __len__(self) -> int:
        return len(self._infos)

    def __contains__(self, name: object) -> bool:
        return name in self._infos

    def info(self, name: str) -> TensorInfo:
        try:
            return self._infos[name]
        except KeyError:
            raise KeyError(f"{self.path}: no tensor named {name!r}") from None

    def array(self, name: str) -> np.ndarray:
        """The tensor's bytes as a read-only numpy array (a view of the mapping)."""
        info = self.info(name)
        np_dtype = FILE_DTYPES[info.dtype]
        count = info.end - info.begin
        _check_representable(info, self.path, name)
        if count == 0:
            return np.empty(info.shape, np_dtype)
        array = np.frombuffer(
            self._map, np_dtype, count // np_dtype.itemsize, self._data_start + info.begin
        )
        return array.reshape(info.shape)

    def get_tensor(self, name: str, device: Device | str | None = None) -> Tensor:
        """The tensor ``name``; zero-copy on the CPU unless its dtype is widened."""
        info = self.info(name)
        array = self.array(name)
        if info.dtype in WIDENED:
            array = array.astype(WIDENED[info.dtype].numpy)
        elif info.dtype == "BOOL" and np.any(array.view(np.uint8) > 1):
            raise SafetensorsError(self.path, "BOOL data holds bytes other than 0 and 1", name)
        return from_numpy(array, device)

    def __repr__(self) -> str:
        return f"SafetensorsFile({self.path!r}, {len(self)} tensors)"


def _check_representable(info: TensorInfo, path: str, name: str) -> None:
    """Raise when numpy (so workbench) cannot make an array of this shape: the header is
    valid (the reference reads it) but the tensor cannot be loaded."""
    nonzero = math.prod(s for s in info.shape if s)
    if len(info.shape) > 64 or nonzero * ITEMSIZE[info.dtype] >= 2**63:
        raise SafetensorsError(
            path,
            f"shape {list(info.shape)} cannot be loaded: tensors have at most 64 dims and "
            "the product of the non-zero sizes times the item size must be under 2**63",
            name,
        )


class ShardedSafetensors(Mapping):
    """Several safetensors files read as one: from ``model.safetensors.index.json`` (its
    ``weight_map`` names each tensor's file) or from a list of files."""

    def __init__(self, source: str | os.PathLike | list):
        self.files: dict[str, SafetensorsFile] = {}
        self.weight_map: dict[str, str] = {}
        self.metadata: dict = {}
        if isinstance(source, list | tuple):
            for p in source:
                file = self.files[str(p)] = SafetensorsFile(p)
                for name in file:
                    self._claim(name, str(p))
            return
        self.index_path = str(source)
        try:
            index = json.loads(Path(source).read_text())
        except (OSError, ValueError) as e:
            raise SafetensorsError(self.index_path, f"cannot read the index JSON ({e})") from None
        weight_map = index.get("weight_map") if isinstance(index, dict) else None
        if not isinstance(weight_map, dict) or not all(
            isinstance(v, str) for v in weight_map.values()
        ):
            raise SafetensorsError(self.index_path, "the index has no weight_map of name -> file")
        self.metadata = index.get("metadata") or {}
        folder = Path(source).parent
        for name, file_name in weight_map.items():
            path = str(folder / file_name)
            if path not in self.files:
                self.files[path] = SafetensorsFile(path)
            if name not in self.files[path]:
                raise SafetensorsError(path, "listed in the index but not in this shard", name)
            self.weight_map[name] = path

    def _claim(self, name: str, path: str) -> None:
        if name in self.weight_map:
            raise SafetensorsError(path, f"also stored in {self.weight_map[name]}", name)
        self.weight_map[name] = path

    def __getitem__(self, name: str) -> Tensor:
        return self.get_tensor(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self.weight_map)

    def __len__(self) -> int:
        return len(self.weight_map)

    def __contains__(self, name: object) -> bool:
        return name in self.weight_map

    def _file(self, name: str) -> SafetensorsFile:
        try:
            return self.files[self.weight_map[name]]
        except KeyError:
            raise KeyError(f"no tensor named {name!r} in {len(self.files)} files") from None

    def info(self, name: str) -> TensorInfo:
        return self._file(name).info(name)

    def get_tensor(self, name: str, device: Device | str | None = None) -> Tensor:
        return self._file(name).get_tensor(name, device)

    def __repr__(self) -> str:
        return f"ShardedSafetensors({len(self.files)} files, {len(self)} tensors)"


def open_safetensors(source) -> SafetensorsFile | ShardedSafetensors:
    """A lazy reader for a file, a list of files, an index JSON, or a folder holding either
    ``model.safetensors.index.json`` or safetensors files."""
    if isinstance(source, list | tuple):
        return ShardedSafetensors(list(source))
    path = Path(source)
    if path.is_dir():
        if (path / INDEX_NAME).exists():
            return ShardedSafetensors(path / INDEX_NAME)
        files = sorted(path.glob("*.safetensors"))
        if not files:
            raise SafetensorsError(str(path), "the folder holds no .safetensors file")
        return SafetensorsFile(files[0]) if len(files) == 1 else ShardedSafetensors(files)
    if path.name.endswith(".json"):
        return ShardedSafetensors(path)
    return SafetensorsFile(path)


@overload
def load_safetensors(
    path, device: Device | str | None = None, with_metadata: Literal[False] = False
) -> dict[str, Tensor]: ...
@overload
def load_safetensors(
    path, device: Device | str | None = None, *, with_metadata: Literal[True]
) -> tuple[dict[str, Tensor], dict[str, str]]: ...
@overload
def load_safetensors(
    path, device: Device | str | None = None, with_metadata: bool = False
) -> dict[str, Tensor] | tuple[dict[str, Tensor], dict[str, str]]: ...


def load_safetensors(
    path, device: Device | str | None = None, with_metadata: bool = False
) -> dict[str, Tensor] | tuple[dict[str, Tensor], dict[str, str]]:
    """Every tensor of a safetensors file (or sharded checkpoint: an index JSON, a folder, a
    list of files) by name. On the CPU the tensors are read-only views of the memory-mapped
    file, no copy. ``with_metadata=True`` also returns the ``__metadata__`` dict."""
    reader = open_safetensors(path)
    tensors = {name: reader.get_tensor(name, device) for name in reader}
    return (tensors, dict(reader.metadata)) if with_metadata else tensors


def deserialize(data: bytes, device: Device | str | None = None) -> dict[str, Tensor]:
    """Tensors from safetensors bytes held in memory (views of ``data`` where possible)."""
    label = "<bytes>"
    if len(data) < 8:
        raise SafetensorsError(label, f"{len(data)} bytes is too short for a safetensors buffer")
    n = int.from_bytes(data[:8], "little")
    if n > min(MAX_HEADER_BYTES, len(data) - 8):
        raise SafetensorsError(label, f"header length {n} runs past the end of the buffer")
    infos, _ = parse_header(bytes(data[8 : 8 + n]), len(data) - 8 - n, label)
    out = {}
    for name, info in infos.items():
        np_dtype = FILE_DTYPES[info.dtype]
        _check_representable(info, label, name)
        array = np.frombuffer(
            data, np_dtype, (info.end - info.begin) // np_dtype.itemsize, 8 + n + info.begin
        ).reshape(info.shape)
        if info.dtype in WIDENED:
            array = array.astype(WIDENED[info.dtype].numpy)
        out[name] = from_numpy(array, device)
    return out


# -- writing -----------------------------------------------------------------------------------
def _host_array(name: str, value) -> tuple[np.ndarray, str]:
    """``value`` as a C-contiguous host array and its safetensors dtype name."""
    if isinstance(value, Tensor):
        array = value.detach().numpy()
        file_dtype = NAME_BY_DTYPE[value.dtype.name]
    else:
        array = np.asarray(value)
        try:
            wb_dtype = dt.widened_from_numpy(array.dtype)
        except TypeError:
            wb_dtype = None
        if wb_dtype is None or array.dtype != wb_dtype.numpy:
            raise SafetensorsError(
                "<write>", f"numpy dtype {array.dtype} has no workbench dtype to store", name
            )
        file_dtype = NAME_BY_DTYPE[wb_dtype.name]
    return np.require(array, requirements="C"), file_dtype


def _layout(tensors: Mapping[str, Any], metadata: Mapping[str, str] | None):
    """(header bytes padded to ALIGNMENT, [(array, nbytes)] in file order)."""
    if metadata is not None and not all(_is_text(k) and _is_text(v) for k, v in metadata.items()):
        raise SafetensorsError("<write>", "metadata must map strings to strings (valid Unicode)")
    entries = []
    for name, value in tensors.items():
        if not _is_text(name) or name == "__metadata__":
            raise SafetensorsError(
                "<write>",
                "tensor names must be valid Unicode strings other than __metadata__",
                repr(name),
            )
        array, file_dtype = _host_array(name, value)
        entries.append((name, array, file_dtype))
    # Larger items first: every offset is then a multiple of the item size (aligned reads).
    entries.sort(key=lambda e: (-e[1].dtype.itemsize, e[0]))
    header: dict[str, Any] = {}
    if metadata:
        header["__metadata__"] = dict(metadata)
    position = 0
    arrays = []
    for name, array, file_dtype in entries:
        header[name] = {
            "dtype": file_dtype,
            "shape": list(array.shape),
            "data_offsets": [position, position + array.nbytes],
        }
        position += array.nbytes
        arrays.append(array)
    raw = json.dumps(header, separators=(",", ":")).encode("utf-8")
    raw += b" " * (-len(raw) % ALIGNMENT)
    return raw, arrays


def _bytes_of(array: np.ndarray) -> memoryview:
    return memoryview(array.reshape(-1).view(np.uint8))


def save_safetensors(
    tensors: Mapping[str, Tensor | np.ndarray],
    path: str | os.PathLike,
    metadata: Mapping[str, str] | None = None,
) -> None:
    """Write ``tensors`` (name -> tensor or numpy array, any workbench dtype) to ``path``.

    The file is written beside the target and renamed over it, so a file that is memory-mapped
    by earlier ``load_safetensors`` calls stays intact for those tensors.
    """
    raw, arrays = _layout(tensors, metadata)
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(len(raw).to_bytes(8, "little"))
            f.write(raw)
            for array in arrays:
                if array.nbytes:
                    f.write(_bytes_of(array))
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def serialize(
    tensors: Mapping[str, Tensor | np.ndarray], metadata: Mapping[str, str] | None = None
) -> bytes:
    """The safetensors bytes of ``tensors`` (what ``save_safetensors`` writes)."""
    raw, arrays = _layout(tensors, metadata)
    return b"".join([len(raw).to_bytes(8, "little"), raw, *(_bytes_of(a) for a in arrays)])
