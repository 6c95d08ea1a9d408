"""``python -m workbench.models.llm --gguf FILE``: one prompt, or an interactive chat.

::

    python -m workbench.models.llm --gguf qwen3-Q8_0.gguf --prompt "The capital of France is"
    python -m workbench.models.llm --gguf qwen3-Q8_0.gguf            # chat; empty line quits
    python -m workbench.models.llm --gguf qwen3-Q8_0.gguf --adapter adapter/   # a LoRA adapter

An adapter (peft's layout, from ``finetune.save_adapter`` or peft) is folded into the weights
it targets, W' = W + s · B A re-encoded in W's own type, in a temporary GGUF that lives as
long as the command.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from ...errors import WorkbenchError
from .llm import LLM, load


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m workbench.models.llm", description="Run a GGUF language model."
    )
    p.add_argument("--gguf", required=True, help="the model file")
    p.add_argument("--adapter", help="a LoRA adapter folder (peft layout) to apply")
    p.add_argument("--prompt", help="complete this text and exit (default: interactive chat)")
    p.add_argument("--system", help="system message for the chat")
    p.add_argument("-n", "--max-new-tokens", type=int, default=256)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--top-k", type=int, default=0)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--min-p", type=float, default=0.0)
    p.add_argument("--repetition-penalty", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--stop", action="append", default=[], help="stop string (repeatable)")
    p.add_argument("--max-len", type=int, default=None, help="KV cache length (positions)")
    return p


def _print_stream(pieces, model: LLM) -> str:
    out = []
    for piece in pieces:
        out.append(piece)
        print(piece, end="", flush=True)
    s = model.last_stats
    print(
        f"\n[{s.prompt_tokens} prompt tokens ({s.cached_tokens} cached) at "
        f"{s.prompt_tokens_per_second:.1f} tok/s, {s.new_tokens} new at "
        f"{s.tokens_per_second:.1f} tok/s, stop: {s.stop_reason}]",
        file=sys.stderr,
    )
    return "".join(out)


def _load(args: argparse.Namespace, scratch: contextlib.ExitStack) -> LLM:
    if args.adapter is None:
        return load(args.gguf, max_len=args.max_len)
    from . import finetune

    folder = Path(scratch.enter_context(tempfile.TemporaryDirectory(prefix="wb-adapter-")))
    model = finetune.load(args.gguf, adapter=args.adapter)
    merged = finetune.merge_to_gguf(model, args.gguf, folder / "merged.gguf")
    print(f"adapter {args.adapter} merged into {args.gguf}", file=sys.stderr)
    return load(merged, max_len=args.max_len)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    with contextlib.ExitStack() as scratch:
        try:
            model = _load(args, scratch)
        except (WorkbenchError, OSError, ValueError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        return _run(model, args)


def _run(model: LLM, args: argparse.Namespace) -> int:
    opts = dict(
        temperature=args.temperature,
        top_k=args.top_k,
        top_p=args.top_p,
        min_p=args.min_p,
        repetition_penalty=args.repetition_penalty,
        seed=args.seed,
        stop=args.stop,
    )
    print(model, file=sys.stderr)
    if args.prompt is not None:
        _print_stream(model.stream(args.prompt, args.max_new_tokens, **opts), model)
        return 0
    messages = [{"role": "system", "content": args.system}] if args.system else []
    while True:
        try:
            line = input("> ")
        except EOFError:
            break
        if not line.strip():
            break
        messages.append({"role": "user", "content": line})
        try:
            reply = _print_stream(model.chat_stream(messages, args.max_new_tokens, **opts), model)
        except WorkbenchError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        messages.append({"role": "assistant", "content": reply})
    return 0


if __name__ == "__main__":
    sys.exit(main())
