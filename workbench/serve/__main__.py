"""``python -m workbench.serve --gguf FILE [--host 127.0.0.1 --port 8000 --max-batch 8
--max-queue 64 --threads N]``: serve a GGUF model over the OpenAI API until interrupted."""

from __future__ import annotations

import argparse
import os


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m workbench.serve", description=__doc__)
    p.add_argument("--gguf", required=True, help="the model file")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--max-batch", type=int, default=8, help="sequences decoded together")
    p.add_argument("--max-queue", type=int, default=64, help="requests waiting beyond that")
    p.add_argument("--max-len", type=int, default=None, help="context per sequence")
    p.add_argument("--threads", type=int, default=None, help="CPU threads")
    p.add_argument("--model-id", default=None, help="the name clients ask for")
    p.add_argument("--log-level", default="info")
    args = p.parse_args(argv)
    if not os.path.isfile(args.gguf):
        p.error(f"--gguf {args.gguf}: no such file")
    if args.threads:
        from ..threads import set_num_threads  # the native kernels and BLAS alike

        set_num_threads(args.threads)

    import uvicorn

    from ..models import llm
    from .app import create_app
    from .engine import LlmEngine

    engine = LlmEngine(llm.load(args.gguf), args.max_batch, args.max_len, args.model_id)
    app = create_app(engine, args.max_queue)
    print(f"workbench.serve: {engine.model_id} ({args.max_batch} slots of {engine.max_len} "
          f"positions) on http://{args.host}:{args.port}/v1", flush=True)  # fmt: skip
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)


if __name__ == "__main__":
    main()
