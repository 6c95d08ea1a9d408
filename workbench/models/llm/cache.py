"""``KVCache``: preallocated keys and values for several sequences ("slots").

Per layer and slot, in the layout the attention kernels read in place
(``workbench.backends.cpu.llm_ops``): values ``v[layer][slot, head_kv, cell, value_dim]`` and
keys ``kb[layer][slot, head_kv, cell // 16, head_dim, cell % 16]`` (blocks of 16 cells,
dimension-major), f32 or f16 (``dtype``: f16 halves the memory and the bytes each decoded
token reads, as llama.cpp's default cache; attention still computes in f32). A global layer
has one cell per position (``max_len`` cells); a sliding-window layer has a ring of
``window + chunk`` cells, position ``p`` living in cell ``p % ring``: a chunk of up to
``chunk`` new tokens can be written before its queries attend, and no query of the chunk loses
a key it still needs (query ``p`` reads positions ``p - window + 1 .. p``). Cell counts are
padded to whole key blocks; padding cells stay empty.

``positions[kind][slot, cell]`` is the position held by a cell (-1: empty), from which the
attention masks are built; ``tokens(slot)`` are the ids the slot has seen, which is what lets a
new prompt reuse the longest cached prefix (:meth:`reuse_prefix`). That bookkeeping is
:class:`SlotCache`'s, shared with the cache of a GPU model (``device_model.DeviceKVCache``).
"""

from __future__ import annotations

import numpy as np

from ...backends.cpu.llm_ops import KEY_BLOCK, key_rows, padded_cells
from ...errors import WorkbenchError
from .config import LlmConfig

GLOBAL, LOCAL = 0, 1
KV_DTYPES = {"f32": np.float32, "f16": np.float16}


class CacheFullError(WorkbenchError):
    """A sequence grew past the cache's ``max_len``."""


class SlotCache:
    """Which positions and ids each of ``n_slots`` sequences holds (up to ``max_len`` each):
    the bookkeeping every KV cache shares, whatever holds its keys and values.

    ``pad(n)``: the cells allocated for ``n`` (the CPU kernels' whole key blocks)."""

    def __init__(
        self,
        config: LlmConfig,
        n_slots: int = 1,
        max_len: int = 4096,
        chunk: int = 256,
        dtype: str = "f32",
        pad=padded_cells,
    ):
        if dtype not in KV_DTYPES:
            raise WorkbenchError(
                f"KVCache: dtype must be one of {list(KV_DTYPES)}, found {dtype!r}"
            )
        if n_slots <= 0 or max_len <= 0 or chunk <= 0:
            raise WorkbenchError(
                f"KVCache: n_slots, max_len and chunk must be positive, found {n_slots}, "
                f"{max_len}, {chunk}"
            )
        self.config = config
        self.n_slots = n_slots
        self.max_len = max_len
        self.chunk = chunk
        self.dtype = dtype
        window = config.sliding_window
        ring = min(max_len, window + chunk) if window else max_len
        self.cells = (max_len, ring)
        self.kinds = [LOCAL if local else GLOBAL for local in config.local_layers]
        self.positions = [np.full((n_slots, pad(n)), -1, np.int64) for n in self.cells]
        self._tokens: list[list[int]] = [[] for _ in range(n_slots)]

    def tokens(self, slot: int) -> list[int]:
        """The ids whose keys/values slot ``slot`` holds, in order (a copy)."""
        return list(self._tokens[self._check(slot)])

    def length(self, slot: int) -> int:
        return len(self._tokens[self._check(slot)])

    def reset(self, slot: int | None = None) -> None:
        """Forget slot ``slot`` (every slot when None)."""
        slots = range(self.n_slots) if slot is None else [self._check(slot)]
        for s in slots:
            self._tokens[s] = []
            for pos in self.positions:
                pos[s] = -1

    def truncate(self, slot: int, n: int) -> bool:
        """Keep the first ``n`` positions of ``slot``. False (and the slot is reset) when a
        ring has already overwritten keys that position ``n`` would need."""
        self._check(slot)
        n = max(0, min(n, self.length(slot)))
        length = self.length(slot)
        ring = self.cells[LOCAL]
        if (
            LOCAL in self.kinds
            and n < length
            and n - self.config.sliding_window + 1 < length - ring
        ):
            self.reset(slot)
            return False
        self._tokens[slot] = self._tokens[slot][:n]
        for pos in self.positions:
            pos[slot][pos[slot] >= n] = -1
        return True

    def reuse_prefix(self, slot: int, ids: list[int]) -> int:
        """Truncate ``slot`` to its longest prefix shared with ``ids``, keeping at least the
        last id of ``ids`` to be run (its logits are needed). Returns the kept length."""
        cached = self._tokens[self._check(slot)]
        n = 0
        limit = min(len(cached), len(ids) - 1)
        while n < limit and cached[n] == ids[n]:
            n += 1
        return n if self.truncate(slot, n) else 0

    # -- used by the forward pass ------------------------------------------------------------
    def begin(self, slot: int, ids: list[int]) -> np.ndarray:
        """Reserve positions for ``ids`` appended to ``slot``; returns their positions."""
        start = self.length(slot)
        if start + len(ids) > self.max_len:
            raise CacheFullError(
                f"KVCache: slot {slot} would hold {start + len(ids)} positions, more than "
                f"max_len={self.max_len}"
            )
        pos = np.arange(start, start + len(ids), dtype=np.int64)
        for kind, cells in enumerate(self.cells):
            self.positions[kind][slot, pos % cells] = pos
        self._tokens[slot].extend(int(i) for i in ids)
        return pos

    def _check(self, slot: int) -> int:
        if not 0 <= slot < self.n_slots:
            raise IndexError(f"KVCache: slot {slot} out of range (the cache has {self.n_slots})")
        return slot

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.n_slots} slots, max_len={self.max_len}, "
            f"ring={self.cells[LOCAL]}, {self.dtype}, {self.nbytes / 2**20:.1f} MiB)"
        )


class KVCache(SlotCache):
    """Keys/values of ``n_slots`` sequences of up to ``max_len`` positions each, as numpy
    arrays in the layout of the CPU kernels (see the module docs)."""

    def __init__(
        self,
        config: LlmConfig,
        n_slots: int = 1,
        max_len: int = 4096,
        chunk: int = 256,
        dtype: str = "f32",
    ):
        super().__init__(config, n_slots, max_len, chunk, dtype)
        c, store = config, KV_DTYPES[dtype]
        alloc = [pos.shape[1] for pos in self.positions]
        # np.zeros maps zero pages lazily: an unused slot or cell costs no resident memory.
        self.kb = [
            np.zeros((n_slots, c.n_head_kv, alloc[kd] // KEY_BLOCK, c.head_dim, KEY_BLOCK), store)
            for kd in self.kinds
        ]
        self.v = [
            np.zeros((n_slots, c.n_head_kv, alloc[kd], c.value_dim), store) for kd in self.kinds
        ]

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.kb) + sum(a.nbytes for a in self.v)

    def slot_arrays(self, layer: int, slot: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Slot ``slot`` of ``layer`` as the kernels take it: keys (head_kv, cells/16,
        head_dim, 16), values (head_kv, cells, value_dim), the cells' positions (views)."""
        return self.kb[layer][slot], self.v[layer][slot], self.positions[self.kinds[layer]][slot]

    def keys(self, layer: int, slot: int) -> np.ndarray:
        """The keys of a slot as rows (head_kv, cells, head_dim) (a copy, for inspection)."""
        return key_rows(self.kb[layer][slot])[:, : self.cells[self.kinds[layer]]]
