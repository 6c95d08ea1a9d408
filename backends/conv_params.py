"""``ConvParams``: stride, padding and dilation of a convolution or pooling window, and the
output sizes they give. The op layer (``workbench.ops.conv`` / ``pool``) and the backends use
this one definition, so the size a kernel writes is the size the op allocated."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ConvParams:
    """Per spatial dim: ``stride`` s, ``padding`` (before, after) and ``dilation`` d.

    A window of k taps spans d·(k-1) + 1 input elements.
    """

    stride: tuple[int, ...]
    padding: tuple[tuple[int, int], ...]
    dilation: tuple[int, ...]

    @classmethod
    def symmetric(cls, stride, padding, dilation) -> ConvParams:
        """``padding`` as one int per dim, the same before and after."""
        return cls(tuple(stride), tuple((p, p) for p in padding), tuple(dilation))

    def _axes(self, in_size, kernel):
        return zip(in_size, kernel, self.stride, self.padding, self.dilation, strict=True)

    def out_size(self, in_size, kernel) -> tuple[int, ...]:
        """Convolution: ⌊(n + before + after - d·(k-1) - 1) / s⌋ + 1 per dim."""
        return tuple(
            (n + lo + hi - d * (k - 1) - 1) // s + 1
            for n, k, s, (lo, hi), d in self._axes(in_size, kernel)
        )

    def transposed_out_size(self, in_size, kernel, output_padding) -> tuple[int, ...]:
        """Transposed convolution: (n - 1)·s - before - after + d·(k-1) + output_padding + 1."""
        return tuple(
            (n - 1) * s - lo - hi + d * (k - 1) + op + 1
            for (n, k, s, (lo, hi), d), op in zip(
                self._axes(in_size, kernel), output_padding, strict=True
            )
        )

    def pool_out_size(self, in_size, kernel, ceil_mode: bool = False) -> tuple[int, ...]:
        """Pooling (PyTorch's rule): ``out_size`` rounded up with ``ceil_mode``, where the last
        window must still start inside the input or its leading padding."""
        sizes = []
        for n, k, s, (lo, hi), d in self._axes(in_size, kernel):
            span = n + lo + hi - d * (k - 1) - 1
            out = (span + (s - 1 if ceil_mode else 0)) // s + 1
            if ceil_mode and (out - 1) * s >= n + lo:
                out -= 1
            sizes.append(out)
        return tuple(sizes)

    def avg_divisors(
        self, in_size, kernel, out_size, count_include_pad: bool
    ) -> tuple[list[int], ...]:
        """Per spatial dim, each output window's divisor as PyTorch's average pooling counts it:
        the window clipped to the padded input (``count_include_pad``), else to the input.
        An N-d window's divisor is the product of its per-dim ones."""
        divisors = []
        for (n, k, s, (lo, _), _), m in zip(self._axes(in_size, kernel), out_size, strict=True):
            row = []
            for i in range(m):
                start = i * s - lo
                end = min(start + k, n + lo)
                row.append(end - start if count_include_pad else min(end, n) - max(start, 0))
            divisors.append(row)
        return tuple(divisors)
