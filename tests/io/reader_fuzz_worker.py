"""One batch of the reader fuzz corpus, run in its own process by ``test_reader_fuzz.py``.

``python reader_fuzz_worker.py FORMAT START STOP WORKDIR`` regenerates mutations START..STOP-1
of FORMAT ("safetensors" or "gguf") from fixed seeds, reads each one as a user would (open,
load every tensor, dequantize GGUF tensors), and prints one JSON line: the cases that raised
anything but the format's own error or hung, and the largest peak allocation per file byte.
Before each case it writes the case number to WORKDIR/progress, so that the parent can name
the case that crashed the process.

The process limits itself (``resource.setrlimit``): address space, CPU seconds, and an alarm
per case, so a hang or a runaway allocation is a reported failure rather than a stuck CI job.
"""

from __future__ import annotations

import json
import os
import random
import resource
import signal
import struct
import sys
import tempfile
import traceback
import tracemalloc

import numpy as np

CASE_SECONDS = 5.0  # a case that reads for longer is a hang
EXTRA_ADDRESS_SPACE = 3 * 2**30  # over what the process maps after its imports
CPU_SECONDS = 300
# Peak Python/numpy allocation (tracemalloc) allowed while reading a file of n bytes: the
# mapped file itself is not an allocation, so this is what the reader builds per byte.
MEMORY_PER_BYTE = 16
MEMORY_SLACK = 1 << 20
INTERESTING = [0, 1, 2, 3, 4, 7, 8, 31, 32, 63, 64, 65, 127, 128, 255, 256, 1023, 4096,
               2**15, 2**16 - 1, 2**16, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**53, 2**62,
               2**63 - 1, 2**63, 2**64 - 1]  # fmt: skip


class Hang(Exception):
    pass


# -- seeds: small valid files written by workbench's own writers ------------------------------
def safetensors_seeds() -> list[bytes]:
    import workbench as wb
    from workbench.io.safetensors import serialize

    rng = np.random.default_rng(0)
    first = {
        "a": rng.standard_normal((2, 3)).astype(np.float32),
        "b": np.array([True, False, True, True]),
        "c": wb.tensor([1.0, 2.0, 3.0], dtype="bf16"),
        "d": np.arange(6, dtype=np.int16).reshape(3, 2),
        "e": np.zeros((0, 4), np.float16),
        "f": np.array(7, np.int64),
        "layers.0.attn.q_proj.weight": rng.standard_normal((4, 4)).astype(np.float64),
    }
    second = {"w": rng.standard_normal((8, 8)).astype(np.float32)}
    return [
        serialize(first, metadata={"format": "pt", "note": "fuzz seed"}),
        serialize(second),
    ]


def gguf_seeds(workdir: str) -> list[bytes]:
    from workbench.quantized import QTensor, write_gguf

    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 256)).astype(np.float32)
    metadata = {
        "general.architecture": "llama",
        "general.name": "fuzz",
        "llama.block_count": 2,
        "llama.rope.freq_base": 10000.0,
        "flag": True,
        "tokenizer.ggml.tokens": ["<s>", "</s>", "a", "b"],
        "tokenizer.ggml.scores": [0.0, -1.0, -2.0, -3.0],
        "nested": [[1, 2], [3]],
    }
    tensors = {
        "f32": x[:, :32].copy(),
        "f16": x[0, :8].astype(np.float16),
        "q4_0": QTensor.quantize(x[:, :64], "Q4_0"),
        "q8_0": QTensor.quantize(x[:, :32], "Q8_0"),
        "q4_k": QTensor.quantize(x, "Q4_K"),
        "q6_k": QTensor.quantize(x[:1], "Q6_K"),
    }
    seeds = []
    for i, (md, ts) in enumerate([(metadata, tensors), ({"k": 1}, {"w": x[:1, :32].copy()})]):
        path = os.path.join(workdir, f"seed{i}.gguf")
        write_gguf(path, md, ts)
        with open(path, "rb") as f:
            seeds.append(f.read())
    return seeds


# -- mutations ----------------------------------------------------------------------------------
def _word(rng: random.Random) -> bytes:
    value = rng.choice(INTERESTING)
    if rng.random() < 0.3:
        value = max(0, value - rng.choice((1, 2)))
    if rng.random() < 0.5 and value < 2**32:
        return struct.pack("<I", value)
    return struct.pack("<Q", value % 2**64)


def mutate_bytes(data: bytes, rng: random.Random, hot: int) -> bytes:
    """Byte-level damage, aimed at the first ``hot`` bytes (the header) most of the time."""
    out = bytearray(data)
    for _ in range(rng.choice((1, 1, 1, 2, 3, 8))):
        if not out:
            break
        span = hot if rng.random() < 0.85 else len(out)
        pos = rng.randrange(max(1, min(span, len(out))))
        kind = rng.randrange(7)
        if kind == 0:
            out[pos] ^= 1 << rng.randrange(8)
        elif kind == 1:
            out[pos] = rng.randrange(256)
        elif kind == 2:
            word = _word(rng)
            out[pos : pos + len(word)] = word
        elif kind == 3:
            aligned = pos - pos % 4
            word = _word(rng)
            out[aligned : aligned + len(word)] = word
        elif kind == 4:
            del out[pos : pos + rng.randrange(1, 16)]
        elif kind == 5:
            out[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 9)))
        else:
            del out[rng.randrange(len(out) + 1) :]  # truncation
    return bytes(out)


_HOSTILE_JSON = [
    "[" * 3000 + "]" * 3000, "9" * 5000, "18446744073709551616", "9223372036854775808",
    "-1", "1.5", "1e400", "null", "true", '["F32"]', "{}", '"\\ud800"', '"\\udc00x"',
    '"F64"', '"BOOL"', '"F8_E4M3"', "[" + ",".join(["1"] * 65) + "]", "[9223372036854775808,0]",
    "[18446744073709551615,0]", "[0,18446744073709551615]", '{"dtype":"F32"}',
]  # fmt: skip


def mutate_safetensors_header(data: bytes, rng: random.Random) -> bytes:
    """Replace one JSON token of the header with a hostile one, or duplicate a key."""
    n = int.from_bytes(data[:8], "little")
    header, rest = data[8 : 8 + n].decode(), data[8 + n :]
    if rng.random() < 0.2:
        key = rng.choice(['"__metadata__":{}', '"a":{"dtype":"F32","shape":[0],'
                          '"data_offsets":[0,0]}', '"dtype":"U8"'])  # fmt: skip
        cut = header.index("{") + 1
        header = header[:cut] + key + "," + header[cut:]
    else:
        # a token boundary: after ':' , ',' or '['
        marks = [i + 1 for i, c in enumerate(header) if c in ":,["]
        start = rng.choice(marks)
        end = start
        depth = 0
        while end < len(header):
            c = header[end]
            if c in "[{":
                depth += 1
            elif c in "]}":
                if depth == 0:
                    break
                depth -= 1
            elif c == "," and depth == 0:
                break
            end += 1
        header = header[:start] + rng.choice(_HOSTILE_JSON) + header[end:]
    raw = header.encode("utf-8", "surrogatepass")
    return struct.pack("<Q", len(raw)) + raw + rest


def safetensors_case(seeds: list[bytes], i: int) -> bytes:
    rng = random.Random(f"safetensors-{i}")
    seed = rng.choice(seeds)
    if rng.random() < 0.4:
        return mutate_safetensors_header(seed, rng)
    return mutate_bytes(seed, rng, 8 + int.from_bytes(seed[:8], "little"))


def gguf_case(seeds: list[bytes], i: int) -> bytes:
    rng = random.Random(f"gguf-{i}")
    seed = rng.choice(seeds)
    from workbench.quantized.gguf_file import read_gguf

    hot = _GGUF_HEADER_BYTES.setdefault(id(seed), _gguf_header_bytes(seed, read_gguf))
    return mutate_bytes(seed, rng, hot)


_GGUF_HEADER_BYTES: dict[int, int] = {}


def _gguf_header_bytes(seed: bytes, read_gguf) -> int:
    with tempfile.NamedTemporaryFile(suffix=".gguf", delete=False) as f:
        f.write(seed)
    try:
        return read_gguf(f.name).data_offset
    finally:
        os.unlink(f.name)


# -- reading like a user ------------------------------------------------------------------------
def read_safetensors(path: str) -> None:
    from workbench.io.safetensors import load_safetensors

    for t in load_safetensors(path).values():
        t.numpy()


def read_gguf_all(path: str) -> None:
    from workbench.quantized.gguf_file import read_gguf

    f = read_gguf(path)
    for name in f:
        f.qtensor(name)
    return f


def dequantize_all(f) -> None:
    for name in f:
        f.qtensor(name).dequantize()


def main() -> None:
    fmt, start, stop, workdir = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    import workbench  # noqa: F401  (imports before the address-space limit is measured)
    from workbench.io.errors import SafetensorsError
    from workbench.quantized.errors import GgufError

    with open("/proc/self/statm") as f:
        mapped = int(f.read().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (mapped + EXTRA_ADDRESS_SPACE,) * 2)
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_SECONDS, CPU_SECONDS))

    def on_alarm(*_):
        raise Hang(f"no result after {CASE_SECONDS} s")

    signal.signal(signal.SIGALRM, on_alarm)
    if fmt == "safetensors":
        seeds, make, read, allowed = safetensors_seeds(), safetensors_case, read_safetensors, (
            SafetensorsError)  # fmt: skip
    else:
        seeds, make, read, allowed = gguf_seeds(workdir), gguf_case, read_gguf_all, GgufError
    path = os.path.join(workdir, f"case.{fmt}")
    progress = os.path.join(workdir, "progress")
    failures, worst, rejected = [], (0.0, -1), 0
    for seed in seeds:  # warm up: first-use imports and caches are not the file's
        with open(path, "wb") as f:
            f.write(seed)
        result = read(path)
        if result is not None:
            dequantize_all(result)
    tracemalloc.start()
    for i in range(start, stop):
        data = make(seeds, i)
        with open(path, "wb") as f:
            f.write(data)
        with open(progress, "w") as f:
            f.write(str(i))
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        signal.setitimer(signal.ITIMER_REAL, CASE_SECONDS)
        result = None
        try:
            result = read(path)
            peak = tracemalloc.get_traced_memory()[1] - base
            if result is not None:
                dequantize_all(result)
        except allowed:
            peak = tracemalloc.get_traced_memory()[1] - base
            rejected += 1
        except BaseException as e:  # noqa: BLE001  (everything else is what we are looking for)
            peak = tracemalloc.get_traced_memory()[1] - base
            failures.append({"case": i, "error": f"{type(e).__name__}: {str(e)[:300]}",
                             "traceback": traceback.format_exc()[-1500:]})  # fmt: skip
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            del result
        if peak > MEMORY_PER_BYTE * len(data) + MEMORY_SLACK:
            failures.append({"case": i, "error": f"peak allocation {peak} bytes for a "
                             f"{len(data)}-byte file", "traceback": ""})  # fmt: skip
        ratio = peak / len(data) if data else peak
        if ratio > worst[0]:
            worst = (ratio, i, peak, len(data))
    print(json.dumps({"failures": failures, "worst": worst, "rejected": rejected}))


if __name__ == "__main__":
    main()
