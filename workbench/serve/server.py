"""``serve(model)``: the HTTP server in a background thread, for notebooks and tests.

uvicorn runs the app on its own event loop in a daemon thread; :meth:`Server.stop` asks it to
exit (finishing the open responses), then stops the scheduler. ``port=0`` takes a free port.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from ..errors import WorkbenchError
from .engine import LlmEngine
from .monitor import PerformanceMonitor


class Server:
    """A running server: ``url``, ``base_url`` (for ``openai.OpenAI(base_url=...)``),
    ``model_id``, ``monitor``; ``stop()`` or use it as a context manager."""

    def __init__(
        self, app: Any, host: str = "127.0.0.1", port: int = 0, log_level: str = "warning"
    ):
        import uvicorn

        self.app = app
        self.monitor: PerformanceMonitor = app.state.monitor
        self.model_id: str = app.state.engine.model_id
        config = uvicorn.Config(app, host=host, port=port, log_level=log_level, lifespan="on",
                                timeout_graceful_shutdown=5)  # fmt: skip
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="workbench-serve",
                                        daemon=True)  # fmt: skip
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if not self._thread.is_alive():
                raise WorkbenchError(f"serve: the server did not start on {host}:{port} (is the "
                                     f"port in use?)")  # fmt: skip
            if time.monotonic() > deadline:
                self.stop()
                raise WorkbenchError(f"serve: the server did not start on {host}:{port} in 30 s")
            time.sleep(0.01)
        sock = self._server.servers[0].sockets[0]
        self.host, self.port = sock.getsockname()[:2]
        self.url = f"http://{self.host}:{self.port}"
        self.base_url = f"{self.url}/v1"

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop accepting requests, let the open ones finish (``timeout`` s), stop the thread."""
        self._server.should_exit = True
        self._thread.join(timeout)
        if self._thread.is_alive():
            self._server.force_exit = True
            self._thread.join(timeout)

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"Server({self.model_id!r} at {self.url}, {state})"


def serve(
    model: Any,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    max_batch: int = 8,
    max_queue: int = 64,
    max_len: int | None = None,
    model_id: str | None = None,
    monitor: PerformanceMonitor | None = None,
    log_level: str = "warning",
) -> Server:
    """Serve ``model`` (an ``llm.LLM``, a GGUF path, or an :class:`~.engine.Engine`) over the
    OpenAI API in the background; returns the running :class:`Server`.

    ``max_batch`` sequences are decoded together (one forward pass per step), ``max_queue``
    more may wait, further requests get 429. ``max_len`` is the context per sequence.
    """
    from .app import create_app

    if max_batch <= 0:
        raise WorkbenchError(f"serve: max_batch must be positive, found {max_batch}")
    if isinstance(model, (str, os.PathLike)):
        from ..models import llm

        model = llm.load(model)
    engine = model if hasattr(model, "free") else LlmEngine(model, max_batch, max_len, model_id)
    return Server(create_app(engine, max_queue, monitor), host, port, log_level)
