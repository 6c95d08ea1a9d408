"""Recurrent layers ``LSTM`` and ``GRU`` with PyTorch's weight names, shapes and gates.

For layer k (suffix ``_reverse`` for the backward direction): ``weight_ih_l{k}``
(G·H, in), ``weight_hh_l{k}`` (G·H, H), ``bias_ih_l{k}``, ``bias_hh_l{k}`` (G·H,), with G = 4
gates (i, f, g, o) for the LSTM and 3 (r, z, n) for the GRU::

    LSTM: i, f, g, o = σ, σ, tanh, σ of (x W_ihᵀ + b_ih + h W_hhᵀ + b_hh)
          c' = f c + i g;  h' = o tanh(c')
    GRU:  r = σ(x W_irᵀ + b_ir + h W_hrᵀ + b_hr);  z = σ(... z ...)
          n = tanh(x W_inᵀ + b_in + r (h W_hnᵀ + b_hn));  h' = (1 - z) n + z h

Input (T, N, in) (``batch_first``: (N, T, in); unbatched: (T, in)); output (T, N, dirs·H) and
the final states (layers·dirs, N, H). The input projection of all time steps is one matmul;
the recurrence is a Python loop over time.
"""

from __future__ import annotations

import math

from ..errors import ShapeError
from ..ops import elementwise as ew
from ..ops.creation import zeros
from ..ops.shape import cat, stack
from ..tensor import Tensor
from . import functional as F
from . import init
from ._params import make_param
from .module import Module


class _RNNBase(Module):
    _gates = 4

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        *,
        vb=None,
        dtype=None,
        device=None,
    ):
        super().__init__()
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, dropout
        self.bidirectional = bidirectional
        self.num_directions = 2 if bidirectional else 1
        bound = 1.0 / math.sqrt(hidden_size) if hidden_size else 0.0
        hint = init.Uniform(-bound, bound)
        gh = self._gates * hidden_size
        for layer in range(num_layers):
            in_size = input_size if layer == 0 else hidden_size * self.num_directions
            for suffix in self._suffixes():
                names = [
                    (f"weight_ih_l{layer}{suffix}", (gh, in_size)),
                    (f"weight_hh_l{layer}{suffix}", (gh, hidden_size)),
                ]
                if bias:
                    names += [
                        (f"bias_ih_l{layer}{suffix}", (gh,)),
                        (f"bias_hh_l{layer}{suffix}", (gh,)),
                    ]
                for name, shape in names:
                    self.register_parameter(name, make_param(vb, shape, name, hint, dtype, device))

    def _suffixes(self) -> tuple[str, ...]:
        return ("", "_reverse") if self.bidirectional else ("",)

    def _weights(self, layer: int, suffix: str):
        d = self.__dict__
        return (
            d[f"weight_ih_l{layer}{suffix}"],
            d[f"weight_hh_l{layer}{suffix}"],
            d.get(f"bias_ih_l{layer}{suffix}"),
            d.get(f"bias_hh_l{layer}{suffix}"),
        )

    def _prepare(self, x: Tensor) -> tuple[Tensor, bool]:
        name = type(self).__name__
        unbatched = x.ndim == 2
        if unbatched:
            x = x.unsqueeze(1)
        elif x.ndim != 3:
            raise ShapeError(
                f"{name}: input must be (T, N, {self.input_size}) or unbatched "
                f"(T, {self.input_size}), found {x.shape}"
            )
        elif self.batch_first:
            x = x.transpose(0, 1)
        if x.shape[-1] != self.input_size:
            raise ShapeError(
                f"{name}: input has {x.shape[-1]} features, expected {self.input_size}"
            )
        return x, unbatched

    def _initial(self, state, n: int, like: Tensor, unbatched: bool) -> Tensor:
        shape = (self.num_layers * self.num_directions, n, self.hidden_size)
        if state is None:
            return zeros(shape, dtype=like.dtype, device=like.device)
        if unbatched:
            state = state.unsqueeze(1)
        if state.shape != shape:
            raise ShapeError(
                f"{type(self).__name__}: initial state must be {shape}, found {state.shape}"
            )
        return state

    def _finish(self, out: Tensor, unbatched: bool) -> Tensor:
        if unbatched:
            return out.squeeze(1)
        return out.transpose(0, 1) if self.batch_first else out

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.batch_first:
            s += ", batch_first=True"
        if self.bidirectional:
            s += ", bidirectional=True"
        return s


def _row(t: Tensor, i: int) -> Tensor:
    return t.narrow(0, i, 1).squeeze(0)


def _input_projection(x: Tensor, w_ih: Tensor, b_ih: Tensor | None) -> list[Tensor]:
    """x W_ihᵀ + b_ih for every time step at once, then split into steps."""
    T = x.shape[0]
    proj = F.linear(x, w_ih, b_ih)
    return [_row(proj, t) for t in range(T)]


class LSTM(_RNNBase):
    """Long short-term memory; ``forward(x, (h0, c0))`` -> ``(output, (h_n, c_n))``."""

    _gates = 4

    def cell(self, gx: Tensor, h: Tensor, c: Tensor, w_hh: Tensor, b_hh: Tensor | None):
        """One step from the projected input ``gx`` (N, 4H): returns (h', c')."""
        gates = gx + F.linear(h, w_hh, b_hh)
        i, f, g, o = gates.chunk(4, -1)
        c = ew.sigmoid(f) * c + ew.sigmoid(i) * ew.tanh(g)
        h = ew.sigmoid(o) * ew.tanh(c)
        return h, c

    def step(self, x: Tensor, state: tuple[Tensor, Tensor] | None = None, layer: int = 0):
        """One time step of one (forward) layer, candle style: x (N, in) -> (h, c)."""
        w_ih, w_hh, b_ih, b_hh = self._weights(layer, "")
        if state is None:
            h = c = zeros((x.shape[0], self.hidden_size), dtype=x.dtype, device=x.device)
        else:
            h, c = state
        return self.cell(F.linear(x, w_ih, b_ih), h, c, w_hh, b_hh)

    def forward(self, x: Tensor, state: tuple[Tensor, Tensor] | None = None):
        x, unbatched = self._prepare(x)
        T, N = x.shape[0], x.shape[1]
        h0 = self._initial(None if state is None else state[0], N, x, unbatched)
        c0 = self._initial(None if state is None else state[1], N, x, unbatched)
        hs, cs = [], []
        for layer in range(self.num_layers):
            outs = []
            for d, suffix in enumerate(self._suffixes()):
                w_ih, w_hh, b_ih, b_hh = self._weights(layer, suffix)
                k = layer * self.num_directions + d
                h, c = _row(h0, k), _row(c0, k)
                steps = _input_projection(x, w_ih, b_ih)
                order = range(T - 1, -1, -1) if d == 1 else range(T)
                seq: list[Tensor] = [None] * T  # type: ignore[list-item]
                for t in order:
                    h, c = self.cell(steps[t], h, c, w_hh, b_hh)
                    seq[t] = h
                outs.append(stack(seq) if T else zeros((0, N, self.hidden_size), dtype=x.dtype))
                hs.append(h)
                cs.append(c)
            x = outs[0] if len(outs) == 1 else cat(outs, -1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout)
        h_n, c_n = stack(hs), stack(cs)
        if unbatched:
            h_n, c_n = h_n.squeeze(1), c_n.squeeze(1)
        return self._finish(x, unbatched), (h_n, c_n)


class GRU(_RNNBase):
    """Gated recurrent unit; ``forward(x, h0)`` -> ``(output, h_n)``."""

    _gates = 3

    def cell(self, gx: Tensor, h: Tensor, w_hh: Tensor, b_hh: Tensor | None) -> Tensor:
        """One step from the projected input ``gx`` (N, 3H): returns h'."""
        xr, xz, xn = gx.chunk(3, -1)
        hr, hz, hn = F.linear(h, w_hh, b_hh).chunk(3, -1)
        r = ew.sigmoid(xr + hr)
        z = ew.sigmoid(xz + hz)
        n = ew.tanh(xn + r * hn)
        return n + z * (h - n)  # (1 - z) n + z h

    def step(self, x: Tensor, h: Tensor | None = None, layer: int = 0) -> Tensor:
        """One time step of one (forward) layer: x (N, in) -> h."""
        w_ih, w_hh, b_ih, b_hh = self._weights(layer, "")
        if h is None:
            h = zeros((x.shape[0], self.hidden_size), dtype=x.dtype, device=x.device)
        return self.cell(F.linear(x, w_ih, b_ih), h, w_hh, b_hh)

    def forward(self, x: Tensor, state: Tensor | None = None):
        x, unbatched = self._prepare(x)
        T, N = x.shape[0], x.shape[1]
        h0 = self._initial(state, N, x, unbatched)
        hs = []
        for layer in range(self.num_layers):
            outs = []
            for d, suffix in enumerate(self._suffixes()):
                w_ih, w_hh, b_ih, b_hh = self._weights(layer, suffix)
                h = _row(h0, layer * self.num_directions + d)
                steps = _input_projection(x, w_ih, b_ih)
                order = range(T - 1, -1, -1) if d == 1 else range(T)
                seq: list[Tensor] = [None] * T  # type: ignore[list-item]
                for t in order:
                    h = self.cell(steps[t], h, w_hh, b_hh)
                    seq[t] = h
                outs.append(stack(seq) if T else zeros((0, N, self.hidden_size), dtype=x.dtype))
                hs.append(h)
            x = outs[0] if len(outs) == 1 else cat(outs, -1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout)
        h_n = stack(hs)
        return self._finish(x, unbatched), (h_n.squeeze(1) if unbatched else h_n)
