"""The HTTP API (FastAPI): OpenAI's ``/v1/models``, ``/v1/completions`` and
``/v1/chat/completions`` (plain or streamed as server-sent events), ``/health``, ``/metrics``.

Each request becomes a :class:`~.scheduler.Request`; the scheduler's thread hands its events
to the request's asyncio queue. A streamed answer is ``data: {chunk}`` lines ending with
``data: [DONE]``; a client that disconnects cancels its request, which frees the slot.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from ..models.llm import SamplingParams
from .engine import Engine
from .metrics import CONTENT_TYPE, ServerMetrics
from .monitor import PerformanceMonitor
from .scheduler import QueueFull, Scheduler
from .scheduler import Request as GenRequest
from .schemas import ApiError, ChatRequest, CompletionRequest, parse

MAX_BODY = 16 << 20  # bytes; a body this large is refused before it is decoded


def create_app(engine: Engine, max_queue: int = 64,
               monitor: PerformanceMonitor | None = None) -> FastAPI:  # fmt: skip
    """The ASGI app serving ``engine``; its scheduler runs while the app's lifespan does."""
    monitor = monitor or PerformanceMonitor()
    metrics = ServerMetrics(monitor)
    scheduler = Scheduler(engine, metrics, max_queue)
    metrics.gauges = scheduler.gauges

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        scheduler.start()
        try:
            yield
        finally:
            scheduler.stop()

    app = FastAPI(title="workbench", lifespan=lifespan)
    app.state.scheduler, app.state.metrics, app.state.monitor = scheduler, metrics, monitor
    app.state.engine = engine

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, e: ApiError):
        return JSONResponse(e.body(), status_code=e.status, headers=e.headers)

    @app.exception_handler(HTTPException)
    async def _http_error(request: Request, e: HTTPException):
        kind = "not_found_error" if e.status_code == 404 else "invalid_request_error"
        body = ApiError(e.status_code, f"{request.method} {request.url.path}: {e.detail}", kind)
        return JSONResponse(body.body(), status_code=e.status_code)

    app.add_middleware(_CountRequests, metrics=metrics)

    @app.get("/health")
    async def health():
        return {"status": "ok", "model": engine.model_id, **scheduler.gauges()}

    @app.get("/metrics")
    async def prometheus():
        return Response(metrics.render(), media_type=CONTENT_TYPE)

    @app.get("/v1/models")
    async def models():
        return {"object": "list", "data": [_model_card(engine)]}

    @app.get("/v1/models/{name}")
    async def model(name: str):
        _check_model(engine, name)
        return _model_card(engine)

    @app.post("/v1/completions")
    async def completions(request: Request):
        body = parse(CompletionRequest, await _json(request))
        _check_model(engine, body.model)
        if isinstance(body.prompt, str):
            ids = await run_in_threadpool(engine.encode, body.prompt)
        else:
            ids = _check_ids(engine, body.prompt)
        prefix = body.prompt if body.echo and isinstance(body.prompt, str) else ""
        return await _generate(request, scheduler, body, ids, body.max_tokens, "text_completion",
                               prefix)  # fmt: skip

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        body = parse(ChatRequest, await _json(request))
        _check_model(engine, body.model)
        messages = [{"role": m.role, "content": m.text()} for m in body.messages]
        try:
            ids = await run_in_threadpool(engine.chat_ids, messages)
        except Exception as e:  # the file's template refused the conversation
            raise ApiError(400, f"messages: {e}", param="messages") from None
        return await _generate(request, scheduler, body, ids,
                               body.max_completion_tokens or body.max_tokens,
                               "chat.completion")  # fmt: skip

    return app


class _CountRequests:
    """ASGI middleware counting responses by endpoint and status (a plain ASGI wrapper: it
    leaves streaming and disconnect detection alone)."""

    ENDPOINTS = {"/health", "/metrics", "/v1/models", "/v1/completions", "/v1/chat/completions"}

    def __init__(self, app, metrics: ServerMetrics):
        self.app, self.metrics = app, metrics

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        status = 500

        async def send_status(message):
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            path = scope["path"] if scope["path"] in self.ENDPOINTS else "other"
            self.metrics.requests.labels(path, str(status)).inc()


async def _json(request: Request) -> Any:
    raw = await request.body()
    if len(raw) > MAX_BODY:
        raise ApiError(413, f"the request body has {len(raw)} bytes, more than {MAX_BODY}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ApiError(400, f"the request body is not valid UTF-8 ({e.reason} at byte "
                            f"{e.start})") from None  # fmt: skip
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ApiError(400, f"the request body is not valid JSON: {e}") from None


def _model_card(engine: Engine) -> dict[str, Any]:
    return {"id": engine.model_id, "object": "model", "created": 0, "owned_by": "workbench",
            "max_model_len": engine.max_len}  # fmt: skip


def _check_model(engine: Engine, name: str) -> None:
    if name != engine.model_id:
        raise ApiError(404, f"The model {name!r} does not exist; this server serves "
                            f"{engine.model_id!r}", param="model",
                       code="model_not_found")  # fmt: skip


def _check_ids(engine: Engine, ids: list[int]) -> list[int]:
    bad = [i for i in ids if not 0 <= i < engine.n_vocab]
    if bad:
        raise ApiError(400, f"prompt: token id {bad[0]} is outside the vocabulary", param="prompt")
    return list(ids)


def _budget(engine: Engine, n_prompt: int, max_tokens: int | None, param: str) -> int:
    """How many tokens to generate; a 400 when the prompt (and max_tokens) exceed the context."""
    if n_prompt >= engine.max_len:
        raise ApiError(400, f"This model's maximum context length is {engine.max_len} tokens, "
                            f"but the prompt has {n_prompt} tokens", param=param,
                       code="context_length_exceeded")  # fmt: skip
    if max_tokens is None:
        return engine.max_len - n_prompt
    if n_prompt + max_tokens > engine.max_len:
        raise ApiError(400, f"This model's maximum context length is {engine.max_len} tokens, "
                            f"but {n_prompt} prompt tokens + max_tokens={max_tokens} exceed it",
                       param="max_tokens", code="context_length_exceeded")  # fmt: skip
    return max_tokens


async def _generate(request: Request, scheduler: Scheduler, body, ids: list[int],
                    max_tokens: int | None, kind: str, prefix: str = ""):  # fmt: skip
    if not ids:
        raise ApiError(400, "the prompt has no tokens", param="prompt")
    param = "messages" if kind == "chat.completion" else "prompt"
    budget = _budget(scheduler.engine, len(ids), max_tokens, param)
    loop = asyncio.get_running_loop()
    events: asyncio.Queue = asyncio.Queue()
    params = SamplingParams(temperature=body.temperature, top_p=body.top_p,
                            frequency_penalty=body.frequency_penalty,
                            presence_penalty=body.presence_penalty, seed=body.seed)  # fmt: skip

    def emit(event) -> None:  # from the scheduler's thread
        loop.call_soon_threadsafe(events.put_nowait, event)

    job = GenRequest(ids, budget, params, emit, stop=body.stop or ())
    try:
        scheduler.submit(job)
    except QueueFull as e:
        raise ApiError(429, str(e), "rate_limit_error", code="queue_full",
                       headers={"Retry-After": "1"}) from None  # fmt: skip
    meta = {"id": f"{'chatcmpl' if kind == 'chat.completion' else 'cmpl'}-{uuid.uuid4().hex[:24]}",
            "created": int(time.time()), "model": body.model}  # fmt: skip
    if body.stream:
        usage = body.stream_options is not None and body.stream_options.include_usage
        return StreamingResponse(_sse(scheduler, job, events, kind, meta, prefix, usage),
                                 media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache"})  # fmt: skip
    watcher = asyncio.create_task(_watch_disconnect(request, events))
    try:
        pieces = [prefix]
        while True:
            what, value = await events.get()
            if what == "text":
                pieces.append(value)
            elif what == "gone":
                return Response(status_code=499)  # nobody reads it
            elif what == "error":
                raise ApiError(500, value, "server_error")
            else:
                break
    finally:
        watcher.cancel()
        if job.finish_reason is None:
            scheduler.cancel(job)
    text = "".join(pieces)
    if kind == "chat.completion":
        choice = {"index": 0, "message": {"role": "assistant", "content": text},
                  "finish_reason": job.finish_reason, "logprobs": None}  # fmt: skip
    else:
        choice = {"index": 0, "text": text, "finish_reason": job.finish_reason, "logprobs": None}
    return {**meta, "object": kind, "choices": [choice], "usage": _usage(job)}


async def _watch_disconnect(request: Request, events: asyncio.Queue) -> None:
    """Wake the handler of a non-streamed request when its client hangs up."""
    while (await request.receive())["type"] != "http.disconnect":
        pass
    events.put_nowait(("gone", ""))


def _usage(job: GenRequest) -> dict[str, int]:
    n, m = len(job.prompt_ids), job.completion_tokens
    return {"prompt_tokens": n, "completion_tokens": m, "total_tokens": n + m}


async def _sse(scheduler: Scheduler, job: GenRequest, events: asyncio.Queue, kind: str,
               meta: dict, prefix: str, include_usage: bool) -> AsyncIterator[str]:  # fmt: skip
    chat = kind == "chat.completion"
    obj = "chat.completion.chunk" if chat else "text_completion"

    def chunk(piece: str | None, finish: str | None, first: bool = False) -> str:
        if chat:
            delta = {} if piece is None else {"content": piece}
            if first:
                delta = {"role": "assistant", "content": ""}
            choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        else:
            choice = {"index": 0, "text": piece or "", "finish_reason": finish, "logprobs": None}
        out = {**meta, "object": obj, "choices": [choice]}
        if include_usage:
            out["usage"] = None
        return f"data: {json.dumps(out)}\n\n"

    try:
        if chat:
            yield chunk(None, None, first=True)
        if prefix:
            yield chunk(prefix, None)
        while True:
            what, value = await events.get()
            if what == "text":
                yield chunk(value, None)
            elif what == "error":
                err = ApiError(500, value, "server_error").body()
                yield f"data: {json.dumps(err)}\n\n"
                break
            else:
                yield chunk(None if chat else "", job.finish_reason)
                if include_usage:
                    tail = {**meta, "object": obj, "choices": [], "usage": _usage(job)}
                    yield f"data: {json.dumps(tail)}\n\n"
                break
        yield "data: [DONE]\n\n"
    finally:  # also when the client went away and the stream was cancelled
        if job.finish_reason is None:
            scheduler.cancel(job)
