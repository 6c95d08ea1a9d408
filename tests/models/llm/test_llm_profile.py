"""``wb.profile()`` sees the CPU model's fused kernels as ops ``llm.<kernel>`` with the
shapes and dtypes of their array arguments, as it records any op's tensor inputs."""

from __future__ import annotations

import workbench as wb
from workbench.models import llm


def test_llm_kernels_are_profiled_with_their_shapes(tiny):
    _, path = tiny("qwen2", "Q8_0")
    lm = llm.load(path)
    c = lm.config
    ids = lm.tokenizer.encode("Hello there, the model reads")
    with wb.profile() as p:
        lm.logits(ids)
    by_name: dict = {}
    for e in p.events:
        by_name.setdefault(e.name, []).append(e)
    products = by_name["llm.qmatmul_into"]
    assert all(e.device == "cpu" for e in products)
    # x (n, K) and out (n, N) after the raw blocks (u8): the first layer's q projection
    q = products[0]
    assert q.shapes[1:] == ((len(ids), c.n_embd), (len(ids), c.n_head * c.head_dim))
    assert q.dtypes == ("u8", "f32", "f32")
    attention = by_name["llm.attention"][0]
    assert attention.shapes[0] == (len(ids), c.n_head * c.head_dim)  # the queries
    assert "llm.residual_norm" in p.table()
