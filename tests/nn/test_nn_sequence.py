"""MultiheadAttention, LSTM and GRU against torch.nn; the KV caches."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from nn_check import check_layer

import workbench as wb
from workbench import nn

R = np.random.default_rng(0)


def randn(*shape) -> np.ndarray:
    return R.standard_normal(shape).astype(np.float32)


# -- MultiheadAttention ------------------------------------------------------------------------
def _mha_pair(**kwargs):
    torch.manual_seed(0)
    t = torch.nn.MultiheadAttention(8, 2, **kwargs)
    with torch.no_grad():  # torch starts its biases at 0: make them count
        for name, p in t.named_parameters():
            if "bias" in name:
                p.normal_()
    return nn.MultiheadAttention(8, 2, **kwargs), t


def test_mha_self_attention():
    m, t = _mha_pair()
    x = randn(5, 2, 8)
    check_layer(m, t, [x], wb_call=lambda m, x: m(x, x, x), torch_call=lambda m, x: m(x, x, x))


def test_mha_cross_attention_batch_first_with_masks():
    m, t = _mha_pair(batch_first=True)
    q, kv = randn(2, 3, 8), randn(2, 6, 8)
    pad = np.zeros((2, 6), bool)
    pad[1, 4:] = True
    causal = np.triu(np.ones((3, 6), bool), k=4)

    def wb_call(m, q, kv):
        return m(
            q,
            kv,
            kv,
            key_padding_mask=wb.tensor(pad),
            attn_mask=wb.tensor(causal),
            average_attn_weights=False,
        )

    def torch_call(m, q, kv):
        return m(
            q,
            kv,
            kv,
            key_padding_mask=torch.tensor(pad),
            attn_mask=torch.tensor(causal),
            average_attn_weights=False,
        )

    check_layer(m, t, [q, kv], wb_call=wb_call, torch_call=torch_call)


def test_mha_no_weights_float_mask_and_kdim():
    m, t = _mha_pair(kdim=5, vdim=3)
    q, k, v = randn(4, 2, 8), randn(6, 2, 5), randn(6, 2, 3)
    mask = randn(4, 6)

    def wb_call(m, q, k, v):
        return m(q, k, v, attn_mask=wb.tensor(mask), need_weights=False)

    def torch_call(m, q, k, v):
        return m(q, k, v, attn_mask=torch.tensor(mask), need_weights=False)

    check_layer(m, t, [q, k, v], wb_call=wb_call, torch_call=torch_call)
    assert "q_proj_weight" in dict(m.named_parameters())


def test_mha_unbatched_and_causal():
    m, t = _mha_pair()
    x = randn(4, 8)
    causal = np.triu(np.ones((4, 4), bool), k=1)

    def wb_call(m, x):
        return m(x, x, x, is_causal=True, attn_mask=wb.tensor(causal))

    def torch_call(m, x):
        return m(x, x, x, is_causal=True, attn_mask=torch.tensor(causal))

    check_layer(m, t, [x], wb_call=wb_call, torch_call=torch_call)
    # is_causal alone builds the same mask
    xw = wb.tensor(x)
    np.testing.assert_allclose(
        m(xw, xw, xw, is_causal=True)[0].numpy(),
        m(xw, xw, xw, attn_mask=wb.tensor(causal))[0].numpy(),
    )


def test_mha_errors():
    with pytest.raises(wb.ShapeError, match="not divisible by num_heads"):
        nn.MultiheadAttention(10, 3)
    m = nn.MultiheadAttention(8, 2)
    x = wb.randn(3, 2, 8)
    with pytest.raises(wb.ShapeError, match=r"key_padding_mask must be \(2, 3\)"):
        m(x, x, x, key_padding_mask=wb.zeros(3, 3, dtype=wb.bool))


# -- LSTM / GRU --------------------------------------------------------------------------------
RNN_CASES = [
    ("lstm", dict()),
    ("lstm", dict(num_layers=2, batch_first=True)),
    ("lstm", dict(bidirectional=True, bias=False)),
    ("gru", dict()),
    ("gru", dict(num_layers=2, bidirectional=True, batch_first=True)),
]


@pytest.mark.parametrize("kind, kwargs", RNN_CASES)
def test_rnn_matches_torch(kind, kwargs):
    torch.manual_seed(0)
    wb_cls, torch_cls = (nn.LSTM, torch.nn.LSTM) if kind == "lstm" else (nn.GRU, torch.nn.GRU)
    m, t = wb_cls(3, 4, **kwargs), torch_cls(3, 4, **kwargs)
    x = randn(2, 5, 3) if kwargs.get("batch_first") else randn(5, 2, 3)
    check_layer(m, t, [x])


def test_lstm_with_initial_state_unbatched():
    torch.manual_seed(0)
    m, t = nn.LSTM(3, 4, num_layers=2), torch.nn.LSTM(3, 4, num_layers=2)
    x, h0, c0 = randn(6, 3), randn(2, 4), randn(2, 4)
    check_layer(
        m,
        t,
        [x, h0, c0],
        wb_call=lambda m, x, h, c: m(x, (h, c)),
        torch_call=lambda m, x, h, c: m(x, (h, c)),
    )


def test_gru_with_initial_state():
    torch.manual_seed(0)
    m, t = nn.GRU(3, 4), torch.nn.GRU(3, 4)
    check_layer(m, t, [randn(4, 2, 3), randn(1, 2, 4)])


def test_lstm_step_matches_sequence():
    m = nn.LSTM(3, 4)
    x = wb.tensor(randn(5, 2, 3))
    out, (h, c) = m(x)
    state = None
    for t in range(5):
        state = m.step(x.narrow(0, t, 1).squeeze(0), state)
    np.testing.assert_allclose(state[0].numpy(), h.numpy()[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(state[1].numpy(), c.numpy()[0], rtol=1e-5, atol=1e-6)
    g = nn.GRU(3, 4)
    _, hn = g(x)
    hs = None
    for t in range(5):
        hs = g.step(x.narrow(0, t, 1).squeeze(0), hs)
    np.testing.assert_allclose(hs.numpy(), hn.numpy()[0], rtol=1e-5, atol=1e-6)


def test_rnn_errors():
    with pytest.raises(wb.ShapeError, match="input has 5 features, expected 3"):
        nn.GRU(3, 4)(wb.randn(2, 2, 5))
    with pytest.raises(wb.ShapeError, match=r"initial state must be \(1, 2, 4\)"):
        nn.GRU(3, 4)(wb.randn(2, 2, 3), wb.zeros(1, 3, 4))


# -- KV caches ---------------------------------------------------------------------------------
def test_kv_cache_appends_in_place():
    cache = nn.KvCache(2, 10)
    ks, vs = [], []
    for n in (3, 1, 2):
        k, v = randn(1, 2, n, 4), randn(1, 2, n, 4)
        ks.append(k)
        vs.append(v)
        k_all, v_all = cache.append(wb.tensor(k), wb.tensor(v))
        np.testing.assert_array_equal(k_all.numpy(), np.concatenate(ks, 2))
        np.testing.assert_array_equal(v_all.numpy(), np.concatenate(vs, 2))
    assert cache.current_seq_len == 6
    assert k_all.shares_storage(cache.k())
    with pytest.raises(wb.WorkbenchError, match="exceed max_seq_len=10"):
        cache.append(wb.randn(1, 2, 5, 4), wb.randn(1, 2, 5, 4))
    with pytest.raises(wb.ShapeError, match="does not match the cached"):
        cache.append(wb.randn(1, 3, 1, 4), wb.randn(1, 3, 1, 4))
    cache.reset()
    assert cache.k() is None and cache.current_seq_len == 0


def test_kv_cache_keeps_gradients():
    cache = nn.KvCache(0, 8)
    a, b = wb.Var(wb.randn(2, 3)), wb.Var(wb.randn(1, 3))
    cache.append(a, a)
    k, _ = cache.append(b, b)
    grads = (k * 2).sum().backward()
    np.testing.assert_array_equal(grads[a].numpy(), np.full((2, 3), 2.0))
    np.testing.assert_array_equal(grads[b].numpy(), np.full((1, 3), 2.0))


def test_rotating_kv_cache():
    cache = nn.RotatingKvCache(1, 4)
    seq = randn(1, 9, 2)
    k, _ = cache.append(wb.tensor(seq[:, :3]), wb.tensor(seq[:, :3]))
    np.testing.assert_array_equal(k.numpy(), seq[:, :3])
    k, _ = cache.append(wb.tensor(seq[:, 3:6]), wb.tensor(seq[:, 3:6]))
    # ring of 4: positions 4, 5 overwrite 0, 1 -> storage order [4, 5, 2, 3]
    np.testing.assert_array_equal(k.numpy(), seq[:, [4, 5, 2, 3]])
    assert cache.offset == 2 and cache.current_seq_len == 6
    k, _ = cache.append(wb.tensor(seq[:, 6:7]), wb.tensor(seq[:, 6:7]))
    np.testing.assert_array_equal(k.numpy(), seq[:, [4, 5, 6, 3]])
    # a chunk longer than the window returns itself and keeps its last 4 positions
    long = randn(1, 6, 2)
    k, _ = cache.append(wb.tensor(long), wb.tensor(long))
    np.testing.assert_array_equal(k.numpy(), long)
    np.testing.assert_array_equal(cache.k().numpy(), long[:, 2:])
