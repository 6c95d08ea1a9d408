"""Key/value caches for autoregressive attention, as in candle's ``kv_cache``.

``Cache`` keeps one tensor growing along ``dim`` in a buffer of ``max_seq_len`` allocated on
the first append (appends write in place; what ``append`` returns is a view, no copy).
``RotatingCache`` keeps the last ``max_seq_len`` positions as a ring (sliding-window
attention): once full, new positions overwrite the oldest and ``append`` returns the whole
buffer in storage order (attention does not care about the order of keys once positions are
encoded). ``KvCache`` / ``RotatingKvCache`` pair two of them for keys and values.

When grad mode is on and the appended tensor requires a gradient, the cache concatenates
instead of writing in place, so gradients flow through it.
"""

from __future__ import annotations

from ..autograd import is_grad_enabled, no_grad
from ..errors import ShapeError, WorkbenchError
from ..ops.creation import zeros
from ..ops.shape import cat
from ..tensor import Tensor


class Cache:
    """One tensor grown along ``dim``, up to ``max_seq_len`` positions."""

    def __init__(self, dim: int, max_seq_len: int):
        self.dim = dim
        self.max_seq_len = max_seq_len
        self.reset()

    def reset(self) -> None:
        self._buffer: Tensor | None = None
        self._concat: Tensor | None = None
        self.current_seq_len = 0

    def _check(self, src: Tensor) -> int:
        dim = self.dim % src.ndim
        ref = self._buffer if self._buffer is not None else self._concat
        if ref is not None:
            expected = ref.shape[:dim] + ref.shape[dim + 1 :]
            if src.shape[:dim] + src.shape[dim + 1 :] != expected or src.dtype is not ref.dtype:
                raise ShapeError(
                    f"Cache.append: {src.shape} {src.dtype.name} does not match the cached "
                    f"{ref.shape} {ref.dtype.name} outside dim {self.dim}"
                )
        return dim

    def current_data(self) -> Tensor | None:
        if self._concat is not None:
            return self._concat
        if self._buffer is None:
            return None
        return self._buffer.narrow(self.dim % self._buffer.ndim, 0, self.current_seq_len)

    def append(self, src: Tensor) -> Tensor:
        """Add ``src`` after the cached positions and return everything cached so far."""
        dim = self._check(src)
        n = src.shape[dim]
        if self.current_seq_len + n > self.max_seq_len:
            raise WorkbenchError(
                f"Cache.append: {self.current_seq_len} cached + {n} new positions exceed "
                f"max_seq_len={self.max_seq_len}; reset() or use a larger cache"
            )
        if self._concat is not None or (src.requires_grad and is_grad_enabled()):
            previous = self.current_data()
            self._concat = src if previous is None else cat([previous, src], dim)
            self._buffer = None
        else:
            if self._buffer is None:
                shape = src.shape[:dim] + (self.max_seq_len,) + src.shape[dim + 1 :]
                self._buffer = zeros(shape, dtype=src.dtype, device=src.device)
            with no_grad():
                self._buffer.narrow(dim, self.current_seq_len, n).copy_(src)
        self.current_seq_len += n
        return self.current_data()


class RotatingCache(Cache):
    """The last ``max_seq_len`` positions along ``dim``, as a ring buffer."""

    def reset(self) -> None:
        super().reset()
        self.offset = 0  # where the next position is written

    def current_data(self) -> Tensor | None:
        if self._buffer is None:
            return None
        if self.current_seq_len >= self.max_seq_len:
            return self._buffer
        return self._buffer.narrow(self.dim % self._buffer.ndim, 0, self.current_seq_len)

    def append(self, src: Tensor) -> Tensor:
        """Write ``src``, overwriting the oldest positions once full. Returns the cached
        positions, or ``src`` itself when it alone is longer than the window (so a long prompt
        attends to all of itself)."""
        dim = self._check(src)
        n = src.shape[dim]
        size = self.max_seq_len
        if self._buffer is None:
            shape = src.shape[:dim] + (size,) + src.shape[dim + 1 :]
            self._buffer = zeros(shape, dtype=src.dtype, device=src.device)
        buf = self._buffer
        self.current_seq_len += n
        with no_grad():
            if n >= size:
                buf.copy_(src.narrow(dim, n - size, size))
                self.offset = 0
                return src
            first = min(n, size - self.offset)
            buf.narrow(dim, self.offset, first).copy_(src.narrow(dim, 0, first))
            if first < n:
                buf.narrow(dim, 0, n - first).copy_(src.narrow(dim, first, n - first))
            self.offset = (self.offset + n) % size
        return self.current_data()


class KvCache:
    """Keys and values cached along ``dim`` (2 for (B, H, T, D) tensors)."""

    _cache = Cache

    def __init__(self, dim: int, max_seq_len: int):
        self.k_cache = self._cache(dim, max_seq_len)
        self.v_cache = self._cache(dim, max_seq_len)

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Cache the new keys and values; return all the cached ones."""
        return self.k_cache.append(k), self.v_cache.append(v)

    def k(self) -> Tensor | None:
        return self.k_cache.current_data()

    def v(self) -> Tensor | None:
        return self.v_cache.current_data()

    @property
    def current_seq_len(self) -> int:
        return self.k_cache.current_seq_len

    def reset(self) -> None:
        self.k_cache.reset()
        self.v_cache.reset()


class RotatingKvCache(KvCache):
    """Keys and values of the last ``max_seq_len`` positions (sliding-window attention)."""

    _cache = RotatingCache

    @property
    def offset(self) -> int:
        return self.k_cache.offset
