"""``LLM``: a GGUF model with its tokenizer and chat template, and text generation.

``generate`` / ``stream`` / ``chat`` run slot 0 of the model's own :class:`KVCache`; a new
prompt first reuses the longest prefix already in the cache (a chat's earlier turns), so only
the new tokens are processed. Prompts run in chunks of ``cache.chunk`` tokens, then one token
per step; generation stops at ``max_new_tokens``, at an end-of-generation token (EOS, EOT and
the file's end-of-turn control tokens), or when the text contains one of ``stop`` (the stop
string itself is not returned).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from ...device import CPU, Device
from ...distributed import Communicator, TensorParallel, get_communicator, is_initialized
from ...errors import WorkbenchError
from ...quantized import QVarBuilder
from .chat_template import render_chat
from .device_model import DeviceTransformer
from .model import Transformer
from .sampling import Sampler, SamplingParams
from .tokenizer import GgufTokenizer, StreamDecoder


@dataclass
class GenerationStats:
    prompt_tokens: int = 0
    cached_tokens: int = 0
    new_tokens: int = 0
    prompt_seconds: float = 0.0
    decode_seconds: float = 0.0
    stop_reason: str = ""

    @property
    def prompt_tokens_per_second(self) -> float:
        run = self.prompt_tokens - self.cached_tokens
        return run / self.prompt_seconds if self.prompt_seconds else 0.0

    @property
    def tokens_per_second(self) -> float:
        n = self.new_tokens - 1  # the first token comes with the prompt
        return n / self.decode_seconds if n > 0 and self.decode_seconds else 0.0


class LLM:
    """A loaded model: ``tokenizer``, ``config``, ``transformer`` (the batch-step forward:
    a :class:`Transformer` on the CPU, a :class:`DeviceTransformer` on ``device`` otherwise).

    ``tp`` splits the transformer over the ranks of a communicator (see :func:`load`); every
    rank then runs the same calls and gets the same logits and tokens.
    """

    def __init__(
        self,
        path: str,
        max_len: int | None = None,
        chunk: int = 256,
        tp: TensorParallel | None = None,
        kv_dtype: str | None = None,
        device: Device = CPU,
    ):
        vb = QVarBuilder.from_gguf(path)
        md = vb.metadata
        self.path = os.fspath(path)
        self.metadata = md
        self.tokenizer = GgufTokenizer(md)
        self.transformer: Transformer | DeviceTransformer = Transformer(vb, md, tp)
        if not device.is_cpu:
            self.transformer = DeviceTransformer(self.transformer, device)
        self.device = device
        self.tp = self.transformer.tp
        self.config = self.transformer.config
        if self.tokenizer.vocab_size > self.config.n_vocab:
            raise WorkbenchError(
                f"{path}: the tokenizer has {self.tokenizer.vocab_size} tokens but the embedding "
                f"only {self.config.n_vocab} rows"
            )
        self.chat_template = md.get("tokenizer.chat_template")
        self.cache = self.transformer.new_cache(1, max_len, chunk, kv_dtype)
        self.last_stats = GenerationStats()

    # -- scoring -----------------------------------------------------------------------------
    def logits(self, ids: Sequence[int]) -> np.ndarray:
        """(len(ids), n_vocab) f32 logits of every position, in a fresh sequence."""
        cache = self.transformer.new_cache(1, max(len(ids), 1), self.cache.chunk, self.cache.dtype)
        return self.transformer.forward([list(ids)], [0], cache, all_logits=True)[0]

    # -- generation --------------------------------------------------------------------------
    def stream(
        self,
        prompt: str | Sequence[int],
        max_new_tokens: int = 256,
        *,
        temperature: float = 0.0,
        top_k: int = 0,
        top_p: float = 1.0,
        min_p: float = 0.0,
        repetition_penalty: float = 1.0,
        frequency_penalty: float = 0.0,
        presence_penalty: float = 0.0,
        seed: int | None = None,
        stop: Sequence[str] = (),
        add_special: bool = True,
        progress: bool | None = None,
    ) -> Iterator[str]:
        """Yield the continuation of ``prompt`` (text, or token ids) piece by piece.

        ``progress``: a ``tqdm.auto`` bar of the prompt tokens processed (True, False, or
        None: for prompts of more than one chunk of new tokens)."""
        params = SamplingParams(
            temperature,
            top_k,
            top_p,
            min_p,
            repetition_penalty,
            frequency_penalty,
            presence_penalty,
            seed=seed,
        )
        sampler = Sampler(params)
        ids = (
            list(prompt)
            if not isinstance(prompt, str)
            else self.tokenizer.encode(prompt, add_special=add_special)
        )
        if not ids:
            raise WorkbenchError("generate: the prompt has no tokens")
        stats = self.last_stats = GenerationStats(prompt_tokens=len(ids))
        t0 = time.perf_counter()
        kept = self.cache.reuse_prefix(0, ids)
        stats.cached_tokens = kept
        if len(ids) + max_new_tokens > self.cache.max_len:
            max_new_tokens = max(0, self.cache.max_len - len(ids))
        logits = self._prefill(ids[kept:], progress)
        stats.prompt_seconds = time.perf_counter() - t0
        t1 = time.perf_counter()
        context = list(ids)
        decoder = StreamDecoder(self.tokenizer, ids)
        stops = [s for s in stop if s]
        hold = max((len(s) for s in stops), default=1) - 1
        text, sent = "", 0
        stats.stop_reason = "length"
        for step in range(max_new_tokens):
            token = self.tp.from_rank0(sampler(logits, context))
            context.append(token)
            stats.new_tokens += 1
            if token in self.tokenizer.stop_ids:
                stats.stop_reason = "eos"
                break
            text += decoder.push(token)
            cut = min((text.find(s) for s in stops if s in text), default=-1)
            if cut >= 0:
                if cut > sent:
                    yield text[sent:cut]
                stats.stop_reason = "stop"
                break
            if len(text) - hold > sent:
                yield text[sent : len(text) - hold]
                sent = len(text) - hold
            if step + 1 < max_new_tokens:
                logits = self.transformer.forward([[token]], [0], self.cache)[0]
        else:
            text += decoder.flush()
        stats.decode_seconds = time.perf_counter() - t1
        if stats.stop_reason != "stop" and len(text) > sent:
            yield text[sent:]

    def _prefill(self, ids: list[int], progress: bool | None) -> np.ndarray:
        """Run the new prompt tokens ``ids`` into slot 0 of the cache, ``cache.chunk`` at a
        time; the logits of the last one. With a bar (see :meth:`stream`), one chunk per call,
        so that the bar moves; every rank makes the same calls, rank 0 shows the bar."""
        chunk = self.cache.chunk
        if not (len(ids) > chunk if progress is None else progress):
            return self.transformer.forward([ids], [0], self.cache)[0]
        from tqdm.auto import tqdm

        with tqdm(total=len(ids), desc="prompt", unit="tok", leave=False,
                  disable=self.tp.rank != 0) as bar:  # fmt: skip
            for start in range(0, len(ids), chunk):
                piece = ids[start : start + chunk]
                logits = self.transformer.forward([piece], [0], self.cache)[0]
                bar.update(len(piece))
        return logits

    def generate(self, prompt: str | Sequence[int], max_new_tokens: int = 256, **kw) -> str:
        """The continuation of ``prompt`` as one string (see :meth:`stream` for the options)."""
        return "".join(self.stream(prompt, max_new_tokens, **kw))

    def apply_chat_template(self, messages: list[dict], add_generation_prompt: bool = True) -> str:
        tok = self.tokenizer
        return render_chat(
            self.chat_template,
            messages,
            add_generation_prompt,
            bos_token=tok.bos_token,
            eos_token=tok.eos_token,
        )

    def chat_stream(self, messages: list[dict], max_new_tokens: int = 256, **kw) -> Iterator[str]:
        prompt = self.apply_chat_template(messages)
        ids = self.tokenizer.encode(prompt, add_special=False)
        bos = self.tokenizer.bos_id
        if self.tokenizer.add_bos and (not ids or ids[0] != bos):
            ids = [bos, *ids]  # the template did not write BOS itself
        return self.stream(ids, max_new_tokens, **kw)

    def chat(self, messages: list[dict], max_new_tokens: int = 256, **kw) -> str:
        """The assistant's reply to ``messages``, through the file's chat template."""
        return "".join(self.chat_stream(messages, max_new_tokens, **kw))

    def __repr__(self) -> str:
        c = self.config
        split = f", tensor parallel rank {self.tp.rank} of {self.tp.world_size}"
        return (
            f"LLM({os.path.basename(self.path)!r}, {c.arch}, {c.n_layer} layers, d={c.n_embd}, "
            f"{c.n_head}/{c.n_head_kv} heads, vocab {c.n_vocab}"
            f"{split if self.tp.world_size > 1 else ''})"
        )


def load(
    path: str | os.PathLike[str],
    device=None,
    max_len: int | None = None,
    tensor_parallel: int | Communicator | None = None,
    kv_dtype: str | None = None,
) -> LLM:
    """Load a GGUF model: architecture, hyper-parameters, tokenizer and chat template all come
    from the file's metadata; weights stay quantized and memory-mapped.

    ``tensor_parallel=W`` splits the model over the W ranks of the communicator of
    ``wb.distributed.init()`` (a job started by ``python -m workbench.distributed.run -n W``
    or ``mpiexec``), or pass a communicator: each rank loads and multiplies only its share of
    the heads and MLP features (quantized blocks stay quantized) and holds only its heads'
    keys and values; two all-reduces per layer make every rank's logits the model's.

    ``kv_dtype`` ("f32" or "f16") is the KV cache's; by default f16 for quantized files and
    f32 for float ones (see :meth:`Transformer.new_cache`).

    ``device`` ("cpu", the default, "cuda", "cuda:1", "metal" or a :class:`wb.Device`): on a
    GPU the weights (still quantized), the KV cache and the forward pass live there, and
    decoding multiplies with the device's quantized matvec kernels (see
    :mod:`.device_model`); on the CPU the fused native kernels run (:mod:`.model`).
    """
    where = _device(device)
    tp = _tensor_parallel(tensor_parallel)
    if not where.is_cpu and tp.world_size > 1:
        raise WorkbenchError(
            f"llm.load: tensor_parallel runs on the CPU only, found device={device!r}"
        )
    return LLM(os.fspath(path), max_len, tp=tp, kv_dtype=kv_dtype, device=where)


def _device(spec) -> Device:
    """The device of ``llm.load(device=spec)``; its backend must be usable here."""
    if spec is None:
        return CPU
    try:
        device = Device(spec)
        device.backend  # noqa: B018 -- raises DeviceUnavailable with the reason
    except WorkbenchError as e:
        raise WorkbenchError(f"llm.load(device={spec!r}): {e}") from e
    return device


def _tensor_parallel(spec: int | Communicator | None) -> TensorParallel:
    if spec is None or isinstance(spec, Communicator):
        return TensorParallel(spec)
    if isinstance(spec, bool) or not isinstance(spec, int) or spec < 1:
        raise WorkbenchError(
            f"llm.load: tensor_parallel should be a number of ranks or a communicator, found "
            f"{spec!r}"
        )
    if spec == 1:
        return TensorParallel()
    if not is_initialized():
        raise WorkbenchError(
            f"llm.load(tensor_parallel={spec}): no communicator; call wb.distributed.init() "
            f"first, in a job of {spec} ranks (python -m workbench.distributed.run -n {spec} "
            "script.py)"
        )
    comm = get_communicator()
    if comm.world_size != spec:
        raise WorkbenchError(
            f"llm.load(tensor_parallel={spec}): the communicator has {comm.world_size} ranks; "
            "tensor parallelism runs over all of them"
        )
    return TensorParallel(comm)
