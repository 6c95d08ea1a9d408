"""GGUF files: a bounded reader for versions 1 to 3 and a version 3 writer.

Layout (little-endian; "len" is u32 in version 1 and u64 from version 2 on)::

    header     magic "GGUF", version: u32, n_tensors: len, n_kv: len
    metadata   n_kv x (key: string, value_type: u32, value)
    tensors    n_tensors x (name: string, n_dims: u32, dims: len[n_dims], type: u32, offset: u64)
    padding    zeros up to a multiple of ``general.alignment`` (u32 metadata, default 32)
    data       tensor i at data_start + offset_i; every offset a multiple of the alignment

    string = len + UTF-8 bytes;  array = item_type: u32, count: len, count x item

``dims`` are ggml's ``ne``: fastest-varying first, so a workbench shape is ``dims`` reversed.

Reading never trusts a count: every length is checked against the bytes left in the file
before anything is allocated, and every tensor's offset, size and alignment is checked
before its data is touched; a bad file raises :class:`GgufError` naming the file, the field
and the problem, never another exception. What the reader builds is bounded per file byte
(slotted records, one shared object for every empty array), so a file of a million empty
arrays costs a few times its size, not tens. Dims follow ggml (int64 ``ne``, missing dims are
1): a dim of 2**63 or more is refused, as llama.cpp does, and so is an empty tensor whose
non-zero dims could not be counted in int64. Tensor data stays in the memory-mapped file
(``QTensor`` views, no copy).

The ``gguf`` package (gguf-py) is not used at run time: its reader handles neither version 1
nor hostile counts, and its writer rejects empty arrays; the tests check both directions
against it.
"""

from __future__ import annotations

import enum
import math
import os
import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..tensor import Tensor
from .dtype import GgmlDType
from .errors import GgmlTypeError, GgufError
from .qtensor import QTensor

MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32
MAX_DIMS = 4  # GGML_MAX_DIMS
MAX_ARRAY_DEPTH = 8  # arrays of arrays: deeper nesting is refused rather than recursed into


class GgufValueType(enum.IntEnum):
    """Metadata value types (ids as stored in the file)."""

    UINT8 = 0
    INT8 = 1
    UINT16 = 2
    INT16 = 3
    UINT32 = 4
    INT32 = 5
    FLOAT32 = 6
    BOOL = 7
    STRING = 8
    ARRAY = 9
    UINT64 = 10
    INT64 = 11
    FLOAT64 = 12


_T = GgufValueType
_NUMPY = {
    _T.UINT8: np.dtype("<u1"), _T.INT8: np.dtype("<i1"), _T.UINT16: np.dtype("<u2"),
    _T.INT16: np.dtype("<i2"), _T.UINT32: np.dtype("<u4"), _T.INT32: np.dtype("<i4"),
    _T.FLOAT32: np.dtype("<f4"), _T.BOOL: np.dtype("<u1"), _T.UINT64: np.dtype("<u8"),
    _T.INT64: np.dtype("<i8"), _T.FLOAT64: np.dtype("<f8"),
}  # fmt: skip
_STRUCT = {
    _T.UINT8: "<B", _T.INT8: "<b", _T.UINT16: "<H", _T.INT16: "<h", _T.UINT32: "<I",
    _T.INT32: "<i", _T.FLOAT32: "<f", _T.BOOL: "<B", _T.UINT64: "<Q", _T.INT64: "<q",
    _T.FLOAT64: "<d",
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class GgufValue:
    """A metadata value with its GGUF type.

    Scalars hold a Python ``int``/``float``/``bool``/``str``. Arrays (``type == ARRAY``) hold
    a 1-D numpy array for numeric and bool items, a ``list[str]`` for strings, and a list of
    ``GgufValue`` for arrays of arrays; ``item_type`` names the items' type.
    """

    value: Any
    type: GgufValueType
    item_type: GgufValueType | None = None

    def plain(self) -> Any:
        """The value without types (nested arrays become nested lists/arrays)."""
        if self.item_type is GgufValueType.ARRAY:
            return [v.plain() for v in self.value]
        return self.value


@dataclass(frozen=True, slots=True)
class GgufTensorInfo:
    """Where one tensor lives: ``shape`` in workbench order (ggml's dims reversed)."""

    name: str
    shape: tuple[int, ...]
    ggml_dtype: GgmlDType
    offset: int  # from the start of the data section
    nbytes: int


# ================================================================================ reading
class _Cursor:
    """Bounds-checked little-endian reads over a mapped file."""

    def __init__(self, buf: np.ndarray, path: str, wide: bool):
        self.buf, self.size, self.path, self.wide, self.pos = buf, buf.size, path, wide, 0
        self.view = memoryview(buf)  # slicing a memoryview is far cheaper than a memmap

    def error(self, field: str, problem: str) -> GgufError:
        return GgufError(self.path, field, problem)

    @property
    def left(self) -> int:
        return self.size - self.pos

    def take(self, n: int, field: str) -> int:
        if n > self.left:
            raise self.error(
                field,
                f"needs {n} bytes at offset {self.pos} but the file ends at byte {self.size} "
                "(truncated or corrupt)",
            )
        start = self.pos
        self.pos += n
        return start

    def unpack(self, fmt: str, field: str) -> Any:
        start = self.take(struct.calcsize(fmt), field)
        return struct.unpack_from(fmt, self.view, start)[0]

    def u32(self, field: str) -> int:
        return self.unpack("<I", field)

    def u64(self, field: str) -> int:
        return self.unpack("<Q", field)

    def length(self, field: str) -> int:
        return self.unpack("<Q" if self.wide else "<I", field)

    @property
    def len_size(self) -> int:
        return 8 if self.wide else 4

    def string(self, field: str) -> str:
        n = self.length(f"{field} (string length)")
        if n > self.left:
            raise self.error(
                field,
                f"string length {n} at offset {self.pos - self.len_size} is larger than the "
                f"{self.left} bytes left in the file",
            )
        start = self.take(n, field)
        return _decode(self.view[start : start + n].tobytes())

    def strings(self, count: int, field: str) -> list[str]:
        """``count`` strings in a row (a tokenizer's vocabulary: keep this loop tight)."""
        view, pos, size, width = self.view, self.pos, self.size, self.len_size
        read_len = struct.Struct("<Q" if self.wide else "<I").unpack_from
        out = []
        for i in range(count):
            if width > size - pos:
                self.pos = pos
                self.take(width, f"{field}[{i}] (string length)")  # raises
            (n,) = read_len(view, pos)
            pos += width
            if n > size - pos:
                raise self.error(
                    f"{field}[{i}]",
                    f"string length {n} at offset {pos - width} is larger than the "
                    f"{size - pos} bytes left in the file",
                )
            out.append(_decode(view[pos : pos + n].tobytes()))
            pos += n
        self.pos = pos
        return out

    def value_type(self, type_id: int, field: str) -> GgufValueType:
        try:
            return GgufValueType(type_id)
        except ValueError:
            raise self.error(
                field, f"unknown metadata value type {type_id} (valid: 0..12)"
            ) from None

    def min_size(self, t: GgufValueType) -> int:
        """Fewest bytes one value of type ``t`` can take (used to bound counts)."""
        if t is _T.STRING:
            return self.len_size
        if t is _T.ARRAY:
            return 4 + self.len_size
        return _NUMPY[t].itemsize

    def value(self, t: GgufValueType, field: str, depth: int = 0) -> GgufValue:
        if t is _T.STRING:
            return GgufValue(self.string(field), t)
        if t is _T.ARRAY:
            return self.array(field, depth)
        v = self.unpack(_STRUCT[t], field)
        if t is _T.BOOL:
            if v > 1:
                raise self.error(field, f"bool value {v} is neither 0 nor 1")
            v = bool(v)
        return GgufValue(v, t)

    def array(self, field: str, depth: int) -> GgufValue:
        if depth >= MAX_ARRAY_DEPTH:
            raise self.error(field, f"arrays nested more than {MAX_ARRAY_DEPTH} deep")
        item = self.value_type(self.u32(f"{field} (array item type)"), f"{field} (array item type)")
        count = self.length(f"{field} (array length)")
        need = count * self.min_size(item)
        if need > self.left:
            raise self.error(
                field,
                f"array of {count} {item.name} values needs at least {need} bytes but only "
                f"{self.left} are left in the file",
            )
        if item is _T.STRING:
            return GgufValue(self.strings(count, field), _T.ARRAY, item)
        if item is _T.ARRAY:
            values = [self.array(f"{field}[{i}]", depth + 1) for i in range(count)]
            return GgufValue(values, _T.ARRAY, item)
        if count == 0:
            return GgufValue(_EMPTY[item], _T.ARRAY, item)
        start = self.take(need, field)
        arr = np.frombuffer(self.buf, _NUMPY[item], count, start).copy()
        if item is _T.BOOL:
            if count and arr.max() > 1:
                raise self.error(field, f"bool array holds {arr.max()}, neither 0 nor 1")
            arr = arr.astype(bool)
        return GgufValue(arr, _T.ARRAY, item)


def _empty(dtype: np.dtype) -> np.ndarray:
    array = np.zeros(0, dtype)
    array.flags.writeable = False
    return array


# One read-only empty array per item type: a file of many empty arrays shares them.
_EMPTY = {t: _empty(np.dtype(bool) if t is _T.BOOL else d) for t, d in _NUMPY.items()}


def _decode(raw: bytes) -> str:
    # Trailing NULs and invalid UTF-8 both occur in real files (as candle notes).
    if raw.endswith(b"\0"):
        raw = raw.rstrip(b"\0")
    return raw.decode("utf-8", "replace")


class GgufFile:
    """A parsed, validated GGUF file; tensor data stays memory-mapped.

    ``metadata`` maps keys to plain values, ``kv`` to typed :class:`GgufValue` (so a file can
    be rewritten with the same types), ``tensors`` maps names to :class:`GgufTensorInfo`.
    ``qtensor(name)`` returns a :class:`QTensor` viewing the mapped bytes.
    """

    def __init__(
        self,
        path: str,
        version: int,
        alignment: int,
        data_offset: int,
        kv: dict[str, GgufValue],
        tensors: dict[str, GgufTensorInfo],
        buf: np.ndarray | None,
    ):
        self.path = path
        self.version = version
        self.alignment = alignment
        self.data_offset = data_offset
        self.kv = kv
        self.tensors = tensors
        self._buf = buf

    @property
    def metadata(self) -> dict[str, Any]:
        return {k: v.plain() for k, v in self.kv.items()}

    def tensor_bytes(self, name: str) -> np.ndarray:
        """The raw (read-only, mapped) bytes of tensor ``name``, flat uint8."""
        info = self._info(name)
        if self._buf is None:
            raise GgufError(self.path, f"tensor '{name}'", "the file has been closed")
        start = self.data_offset + info.offset
        return self._buf[start : start + info.nbytes]

    def qtensor(self, name: str) -> QTensor:
        """Tensor ``name`` as a QTensor over the mapped bytes (no copy)."""
        info = self._info(name)
        return QTensor(self.tensor_bytes(name), info.shape, info.ggml_dtype)

    def load(self) -> dict[str, QTensor]:
        """Every tensor, by name, as QTensors over the mapped file."""
        return {name: self.qtensor(name) for name in self.tensors}

    def _info(self, name: str) -> GgufTensorInfo:
        info = self.tensors.get(name)
        if info is None:
            raise KeyError(f"{self.path}: no tensor named {name!r}")
        return info

    def __contains__(self, name: object) -> bool:
        return name in self.tensors

    def __iter__(self) -> Iterator[str]:
        return iter(self.tensors)

    def __len__(self) -> int:
        return len(self.tensors)

    def close(self) -> None:
        """Drop this object's mapping (QTensors already handed out keep theirs alive)."""
        self._buf = None

    def __enter__(self) -> GgufFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"GgufFile({os.path.basename(self.path)!r}, v{self.version}, "
            f"{len(self.tensors)} tensors, {len(self.kv)} metadata keys)"
        )


def read_gguf(path: str | os.PathLike[str]) -> GgufFile:
    """Parse and validate a GGUF file (version 1, 2 or 3), memory-mapping its tensor data."""
    path = os.fspath(path)
    size = os.path.getsize(path)
    if size < 8:
        raise GgufError(path, "header", f"file is {size} bytes, too short for a GGUF header")
    buf = np.memmap(path, dtype=np.uint8, mode="r")
    magic = buf[:4].tobytes()
    if magic != MAGIC:
        raise GgufError(path, "magic", f"expected b'GGUF', found {magic!r}: not a GGUF file")
    (version,) = struct.unpack_from("<I", buf, 4)
    if version not in (1, 2, 3):
        if version & 0xFFFF == 0 and version >> 24 in (1, 2, 3):
            raise GgufError(path, "version", "big-endian GGUF files are not supported")
        raise GgufError(path, "version", f"unsupported version {version}; readable: 1, 2, 3")
    cur = _Cursor(buf, path, wide=version >= 2)
    cur.pos = 8
    n_tensors = cur.length("header tensor count")
    n_kv = cur.length("header metadata count")
    min_kv = cur.len_size + 4 + 1
    if n_kv * min_kv > cur.left:
        raise cur.error(
            "header metadata count",
            f"{n_kv} key-value pairs need at least {n_kv * min_kv} bytes, but the file has "
            f"{cur.left} bytes after the header",
        )
    min_info = cur.len_size + 4 + 4 + 8
    if n_tensors * min_info > cur.left:
        raise cur.error(
            "header tensor count",
            f"{n_tensors} tensor infos need at least {n_tensors * min_info} bytes, but the file "
            f"has {cur.left} bytes after the header",
        )

    kv: dict[str, GgufValue] = {}
    for i in range(n_kv):
        key = cur.string(f"metadata #{i} key")
        field = f"metadata '{key}'"
        if key in kv:
            raise cur.error(field, "duplicate key")
        t = cur.value_type(cur.u32(f"{field} type"), f"{field} type")
        kv[key] = cur.value(t, field)

    alignment = _alignment(kv, path)
    raw_infos = [_read_tensor_info(cur, i) for i in range(n_tensors)]
    data_offset = -(-cur.pos // alignment) * alignment
    tensors = _check_tensors(raw_infos, data_offset, alignment, size, path)
    return GgufFile(path, version, alignment, data_offset, kv, tensors, buf)


def _alignment(kv: dict[str, GgufValue], path: str) -> int:
    value = kv.get("general.alignment")
    if value is None:
        return DEFAULT_ALIGNMENT
    field = "metadata 'general.alignment'"
    if value.type is not _T.UINT32:
        raise GgufError(path, field, f"must be a UINT32, found {value.type.name}")
    a = value.value
    if a == 0 or a & (a - 1):
        raise GgufError(path, field, f"{a} is not a power of two")
    return a


def _read_tensor_info(cur: _Cursor, i: int) -> tuple[str, tuple[int, ...], int, int]:
    name = cur.string(f"tensor #{i} name")
    field = f"tensor '{name}'"
    n_dims = cur.u32(f"{field} n_dims")
    if n_dims > MAX_DIMS:
        raise cur.error(f"{field} n_dims", f"{n_dims} dimensions; ggml allows at most {MAX_DIMS}")
    dims = tuple([cur.length(f"{field} dims[{d}]") for d in range(n_dims)])
    if any(d >= 2**63 for d in dims):
        raise cur.error(f"{field} dims", f"{list(dims)}: ggml dims are int64, at most 2**63-1")
    type_id = cur.u32(f"{field} type")
    offset = cur.u64(f"{field} offset")
    return name, dims, type_id, offset


def _check_tensors(
    raw_infos: list[tuple[str, tuple[int, ...], int, int] | None],
    data_offset: int,
    alignment: int,
    size: int,
    path: str,
) -> dict[str, GgufTensorInfo]:
    tensors: dict[str, GgufTensorInfo] = {}
    for i, raw in enumerate(raw_infos):
        raw_infos[i] = None  # freed as it is checked: the infos are not held twice
        name, dims, type_id, offset = raw
        field = f"tensor '{name}'"
        if name in tensors:
            raise GgufError(path, field, "duplicate tensor name")
        try:
            gd = GgmlDType.from_id(type_id)
        except GgmlTypeError as e:
            raise GgufError(path, f"{field} type", str(e)) from None
        ne0 = dims[0] if dims else 1  # ggml: missing dims are 1
        if ne0 % gd.block_size:
            raise GgufError(
                path,
                f"{field} dims",
                f"first dimension {ne0} (ggml ne[0]) is not a multiple of {gd.name}'s "
                f"block size {gd.block_size}",
            )
        if offset % alignment:
            raise GgufError(
                path, f"{field} offset", f"{offset} is not a multiple of the alignment {alignment}"
            )
        numel = math.prod(dims)
        nbytes = numel // gd.block_size * gd.type_size
        start = data_offset + offset
        if start + nbytes > size:
            raise GgufError(
                path,
                f"{field} data",
                f"{gd.name} {list(reversed(dims))} takes {nbytes} bytes from byte {start}, past "
                f"the end of the file ({size} bytes)",
            )
        if math.prod(d for d in dims if d) * 8 >= 2**63:  # (only an empty tensor gets here)
            raise GgufError(
                path,
                f"{field} dims",
                f"{list(dims)}: the non-zero dims multiply past what int64 can count",
            )
        tensors[name] = GgufTensorInfo(name, tuple(reversed(dims)), gd, offset, nbytes)
    ordered = sorted((t for t in tensors.values() if t.nbytes), key=lambda t: t.offset)
    for a, b in zip(ordered, ordered[1:], strict=False):
        if a.offset + a.nbytes > b.offset:
            raise GgufError(path, f"tensor '{b.name}' offset", f"data overlaps tensor '{a.name}'")
    return tensors


# ================================================================================ writing
def _int_type(values: list[int] | int) -> GgufValueType:
    lo, hi = (min(values), max(values)) if isinstance(values, list) else (values, values)
    if -(2**31) <= lo and hi < 2**31:
        return _T.INT32
    if -(2**63) <= lo and hi < 2**63:
        return _T.INT64
    if 0 <= lo and hi < 2**64:
        return _T.UINT64
    raise ValueError(f"integer {hi if hi >= 2**63 else lo} does not fit in 64 bits")


_FROM_NUMPY = {d: t for t, d in _NUMPY.items() if t is not _T.BOOL}


def to_gguf_value(value: Any) -> GgufValue:
    """Infer a GGUF type for a Python/numpy value (as gguf-py does: int -> INT32 when it fits,
    float -> FLOAT32). Wrap a value in :class:`GgufValue` to choose the type yourself."""
    if isinstance(value, GgufValue):
        return value
    if isinstance(value, (bool, np.bool_)):
        return GgufValue(bool(value), _T.BOOL)
    if isinstance(value, str):
        return GgufValue(value, _T.STRING)
    if isinstance(value, np.generic):
        return GgufValue(value.item(), _FROM_NUMPY[value.dtype.newbyteorder("<")])
    if isinstance(value, int):
        return GgufValue(value, _int_type(value))
    if isinstance(value, float):
        return GgufValue(value, _T.FLOAT32)
    if isinstance(value, np.ndarray):
        if value.ndim != 1:
            raise ValueError(f"metadata arrays must be 1-D, found shape {value.shape}")
        if value.dtype == bool:
            return GgufValue(value, _T.ARRAY, _T.BOOL)
        item = _FROM_NUMPY.get(value.dtype.newbyteorder("<"))
        if item is None:
            raise ValueError(f"numpy dtype {value.dtype} has no GGUF metadata type")
        return GgufValue(value, _T.ARRAY, item)
    if isinstance(value, (list, tuple)):
        items = list(value)
        if not items:
            return GgufValue(np.zeros(0, np.int32), _T.ARRAY, _T.INT32)
        if all(isinstance(v, str) for v in items):
            return GgufValue(items, _T.ARRAY, _T.STRING)
        if all(isinstance(v, (bool, np.bool_)) for v in items):
            return GgufValue(np.array(items, bool), _T.ARRAY, _T.BOOL)
        if all(isinstance(v, int) and not isinstance(v, bool) for v in items):
            t = _int_type(items)
            return GgufValue(np.array(items, _NUMPY[t]), _T.ARRAY, t)
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in items):
            return GgufValue(np.array(items, np.float32), _T.ARRAY, _T.FLOAT32)
        if all(isinstance(v, (list, tuple, np.ndarray, GgufValue)) for v in items):
            return GgufValue([to_gguf_value(v) for v in items], _T.ARRAY, _T.ARRAY)
        raise ValueError(f"metadata array items must all have one type, found {items[:4]!r}...")
    raise ValueError(f"no GGUF metadata type for {type(value).__name__} value {value!r}")


def _encode_string(s: str | bytes) -> bytes:
    raw = s.encode("utf-8") if isinstance(s, str) else s
    return struct.pack("<Q", len(raw)) + raw


def _encode_value(v: GgufValue, out: bytearray, with_type: bool = True) -> None:
    if with_type:
        out += struct.pack("<I", v.type)
    if v.type is _T.STRING:
        out += _encode_string(v.value)
    elif v.type is _T.ARRAY:
        item = v.item_type
        if item is None:
            raise ValueError("array metadata needs an item_type")
        out += struct.pack("<IQ", item, len(v.value))
        if item is _T.STRING:
            for s in v.value:
                out += _encode_string(s)
        elif item is _T.ARRAY:
            for sub in v.value:
                _encode_value(to_gguf_value(sub), out, with_type=False)
        else:
            out += np.asarray(v.value).astype(_NUMPY[item], casting="unsafe").tobytes()
    else:
        value = int(v.value) if v.type is _T.BOOL else v.value
        out += struct.pack(_STRUCT[v.type], value)


def _tensor_payload(name: str, t: Any) -> tuple[np.ndarray, tuple[int, ...], GgmlDType]:
    if isinstance(t, QTensor):
        return t.data, t.shape, t.ggml_dtype
    if isinstance(t, Tensor):
        t = t.numpy()
    arr = np.ascontiguousarray(t)
    kinds = {"float32": GgmlDType.F32, "float16": GgmlDType.F16, "bfloat16": GgmlDType.BF16}
    gd = kinds.get(arr.dtype.name)
    if gd is None:
        raise ValueError(
            f"tensor '{name}': dtype {arr.dtype} cannot be stored; use f32, f16, bf16 or a QTensor"
        )
    if arr.dtype.byteorder == ">":
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    return arr.view(np.uint8).reshape(-1), arr.shape, gd


def write_gguf(
    path: str | os.PathLike[str],
    metadata: Mapping[str, Any] | None = None,
    tensors: Mapping[str, QTensor | Tensor | np.ndarray] | None = None,
    *,
    alignment: int | None = None,
) -> None:
    """Write a version 3 GGUF file.

    ``metadata`` values are typed by :func:`to_gguf_value` unless given as
    :class:`GgufValue`. ``tensors`` are QTensors (any :class:`GgmlDType`), or float32 /
    float16 / bfloat16 arrays or Tensors. ``alignment`` defaults to ``general.alignment``
    from ``metadata``, else 32. The file is written next to ``path`` and renamed into place.
    """
    path = os.fspath(path)
    kv = {str(k): to_gguf_value(v) for k, v in (metadata or {}).items()}
    if alignment is None:
        found = kv.get("general.alignment")
        alignment = DEFAULT_ALIGNMENT if found is None else int(found.value)
    if alignment <= 0 or alignment & (alignment - 1):
        raise ValueError(f"alignment {alignment} is not a power of two")
    if alignment != DEFAULT_ALIGNMENT or "general.alignment" in kv:
        kv["general.alignment"] = GgufValue(alignment, _T.UINT32)

    payloads = []
    offset = 0
    infos = bytearray()
    for name, t in (tensors or {}).items():
        data, shape, gd = _tensor_payload(name, t)
        if len(shape) > MAX_DIMS:
            raise ValueError(f"tensor '{name}': {len(shape)} dimensions, GGUF allows {MAX_DIMS}")
        dims = tuple(reversed(shape))
        infos += _encode_string(name)
        infos += struct.pack(f"<I{len(dims)}QIQ", len(dims), *dims, gd.value, offset)
        payloads.append((offset, data))
        offset += -(-data.size // alignment) * alignment

    head = bytearray(MAGIC)
    head += struct.pack("<IQQ", 3, len(payloads), len(kv))
    for key, value in kv.items():
        head += _encode_string(key)
        _encode_value(value, head)
    head += infos
    head += bytes(-len(head) % alignment)

    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(head)
            written = 0
            for start, data in payloads:
                f.write(bytes(start - written))
                f.write(memoryview(data))
                written = start + data.size
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
