"""Continuous batching: every active sequence advances by one forward pass per step.

A worker thread loops: admit waiting requests into free slots, drop the cancelled ones, then
one ``engine.forward`` over all active sequences (a new request contributes its prompt, an
active one the token it sampled last step), sample each sequence's next token, emit its new
text, and free the slots of the sequences that finished. Requests join and leave between
steps, so a short request never waits for a long one. At most ``max_queue`` requests wait for
a slot; :meth:`Scheduler.submit` raises :class:`QueueFull` beyond that.

Generation ends like ``LLM.stream``: at ``max_tokens`` (``"length"``), at an end-of-generation
token or when the text contains one of ``stop`` (``"stop"``; the stop string is not sent).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..errors import WorkbenchError
from ..models.llm import Sampler, SamplingParams
from .engine import Engine, TextDecoder
from .metrics import ServerMetrics

Event = tuple[str, str]  # ("text", piece) | ("done", finish_reason) | ("error", message)


class QueueFull(WorkbenchError):
    """Every slot is busy and ``max_queue`` requests already wait (HTTP 429)."""


@dataclass(eq=False)  # identity: the queue and the batch look requests up by object
class Request:
    """One generation: prompt ids, limits and sampling; ``emit`` receives its events (called
    from the scheduler's thread)."""

    prompt_ids: list[int]
    max_tokens: int
    params: SamplingParams
    emit: Callable[[Event], None]
    stop: Sequence[str] = ()
    submitted: float = field(default_factory=time.perf_counter)
    first_token: float | None = None
    completion_tokens: int = 0
    finish_reason: str | None = None
    cancelled: bool = False


class _Text:
    """Turns sampled ids into text deltas, holding back what could still become a stop string."""

    def __init__(self, decoder: TextDecoder, stops: Sequence[str]):
        self.decoder = decoder
        self.stops = [s for s in stops if s]
        self.hold = max((len(s) for s in self.stops), default=1) - 1
        self.text = ""
        self.sent = 0

    def _cut(self) -> int:
        return min((self.text.find(s) for s in self.stops if s in self.text), default=-1)

    def push(self, token: int) -> tuple[str, bool]:
        """The new text to send, and whether a stop string appeared."""
        self.text += self.decoder.push(token)
        cut = self._cut()
        end = cut if cut >= 0 else len(self.text) - self.hold
        delta = self.text[self.sent : end] if end > self.sent else ""
        self.sent = max(self.sent, end)
        return delta, cut >= 0

    def rest(self, flush: bool) -> str:
        """What is held back, at the end (``flush``: with the decoder's incomplete bytes)."""
        if flush:
            self.text += self.decoder.flush()
        cut = self._cut()
        return self.text[self.sent : cut if cut >= 0 else len(self.text)]


@dataclass(eq=False)
class _Seq:
    req: Request
    slot: int
    sampler: Sampler
    context: list[int]
    pending: list[int]
    text: _Text


class Scheduler:
    """Runs ``engine`` for up to ``engine.n_slots`` sequences at a time (see the module docs)."""

    def __init__(self, engine: Engine, metrics: ServerMetrics, max_queue: int = 64):
        if max_queue < 0:
            raise WorkbenchError(f"Scheduler: max_queue must be >= 0, found {max_queue}")
        self.engine = engine
        self.metrics = metrics
        self.max_queue = max_queue
        self.steps = 0
        self._waiting: deque[Request] = deque()
        self._active: list[_Seq] = []
        self._free = list(range(engine.n_slots - 1, -1, -1))
        self._cond = threading.Condition()
        self._stopping = False
        self._thread: threading.Thread | None = None

    # -- the API used by the HTTP layer (any thread) -------------------------------------------
    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="workbench-scheduler",
                                            daemon=True)  # fmt: skip
            self._thread.start()

    def submit(self, req: Request) -> None:
        with self._cond:
            if self._stopping:
                raise WorkbenchError("the server is shutting down")
            # Waiting requests take the free slots first; max_queue bounds the rest.
            if len(self._waiting) >= len(self._free) + self.max_queue:
                raise QueueFull(
                    f"all {self.engine.n_slots} slots are busy and {len(self._waiting)} requests "
                    f"wait (max_queue={self.max_queue}); retry later"
                )
            self._waiting.append(req)
            self._cond.notify()

    def cancel(self, req: Request) -> None:
        """The client went away: forget ``req``; its slot is freed before the next step."""
        with self._cond:
            req.cancelled = True
            if req in self._waiting:
                self._waiting.remove(req)
            self._cond.notify()

    def gauges(self) -> dict[str, int]:
        with self._cond:
            return {"queue_depth": len(self._waiting), "active": len(self._active),
                    "slots": self.engine.n_slots}  # fmt: skip

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        for req in [*self._waiting, *(s.req for s in self._active)]:
            self._emit(req, ("error", "the server shut down"))
        self._waiting.clear()
        self._active.clear()

    # -- the worker ----------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopping and not self._waiting and not self._active:
                    self._cond.wait()
                if self._stopping:
                    return
                while self._waiting and self._free:
                    req = self._waiting.popleft()
                    try:
                        self._admit(req)
                    except Exception as e:  # a request that cannot start fails alone
                        self._emit(req, ("error", f"{type(e).__name__}: {e}"))
                for seq in [s for s in self._active if s.req.cancelled]:
                    self._release(seq)
                batch = list(self._active)
                queued = len(self._waiting)
            if batch:
                self._step(batch, queued)

    def _admit(self, req: Request) -> None:
        slot = self._free.pop()
        decoder = self.engine.decoder(req.prompt_ids)
        seq = _Seq(req, slot, Sampler(req.params), list(req.prompt_ids), list(req.prompt_ids),
                   _Text(decoder, req.stop))  # fmt: skip
        self._active.append(seq)

    def _step(self, batch: list[_Seq], queued: int) -> None:
        try:
            logits = self.engine.forward([s.pending for s in batch], [s.slot for s in batch])
        except Exception as e:  # a bad step fails its requests, never the server
            with self._cond:
                for seq in batch:
                    self._emit(seq.req, ("error", f"{type(e).__name__}: {e}"))
                    self._release(seq)
            return
        self.steps += 1
        self.metrics.batch.observe(len(batch))
        self.metrics.monitor.sample(queue_depth=queued, batch_size=len(batch))
        finished = [seq for seq, row in zip(batch, logits, strict=True) if self._advance(seq, row)]
        if finished:
            with self._cond:
                for seq in finished:
                    self._release(seq)

    def _advance(self, seq: _Seq, logits) -> bool:
        """Sample, emit, and say whether the sequence is done."""
        req = seq.req
        token = seq.sampler(logits, seq.context)
        seq.context.append(token)
        req.completion_tokens += 1
        if req.first_token is None:
            req.first_token = time.perf_counter()
        if token in self.engine.stop_ids:
            return self._finish(seq, "stop", seq.text.rest(flush=False))
        delta, stopped = seq.text.push(token)
        if stopped:
            return self._finish(seq, "stop", delta)
        if req.completion_tokens >= req.max_tokens or len(seq.context) >= self.engine.max_len:
            return self._finish(seq, "length", delta + seq.text.rest(flush=True))
        if delta:
            self._emit(req, ("text", delta))
        seq.pending = [token]
        return False

    def _finish(self, seq: _Seq, reason: str, delta: str) -> bool:
        req = seq.req
        if delta:
            self._emit(req, ("text", delta))
        req.finish_reason = reason
        now = time.perf_counter()
        ttft = None if req.first_token is None else req.first_token - req.submitted
        self.metrics.finished(now - req.submitted, ttft, len(req.prompt_ids), req.completion_tokens)
        self._emit(req, ("done", reason))
        return True

    def _release(self, seq: _Seq) -> None:
        # Called with the lock held.
        self._active.remove(seq)
        self.engine.free(seq.slot)
        self._free.append(seq.slot)

    @staticmethod
    def _emit(req: Request, event: Event) -> None:
        try:
            req.emit(event)
        except RuntimeError:  # the request's event loop is closed: nobody is listening
            req.cancelled = True
