"""Serving and monitoring: an OpenAI-compatible HTTP server with continuous batching, and the
:class:`PerformanceMonitor` (p50 / p95 / p99 over a sliding window) it reports with.

::

    server = wb.serve(llm.load("model.gguf"))          # background thread, free port
    client = openai.OpenAI(base_url=server.base_url, api_key="none")
    client.chat.completions.create(model=server.model_id, messages=[...])
    server.monitor.p99, server.stop()

From a shell: ``python -m workbench.serve --gguf model.gguf --port 8000``. The HTTP side needs
the ``serve`` extra (FastAPI, uvicorn, prometheus-client); the monitor needs only numpy.
"""

import sys
import types

from .monitor import PerformanceMonitor, monitor

__all__ = ["PerformanceMonitor", "Server", "create_app", "monitor", "serve"]


class _CallableModule(types.ModuleType):
    # ``import workbench.serve`` binds the package as ``workbench.serve``, so ``wb.serve``
    # is this module whichever is imported first; calling it starts a server.
    def __call__(self, model, *args, **kwargs):
        from .server import serve

        return serve(model, *args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule


def __getattr__(name: str):
    # The HTTP stack (FastAPI, uvicorn) is imported only when asked for.
    if name in ("Server", "serve"):
        from . import server

        return getattr(server, name)
    if name == "create_app":
        from .app import create_app

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
