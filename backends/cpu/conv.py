"""Convolutions on the CPU (2-d; the ops run 1-d convolutions through a unit height).

``conv2d`` picks one of four paths, all built on numpy's BLAS matmul:
- 1×1, stride 1, no padding: one matmul per group, no copy;
- stride 1 along H with many input channels: columns over the kernel's WIDTH only (kw copies
  of the input, not kh·kw), one matmul per group that stacks the kernel's rows as outputs, then
  kh - 1 adds of row-shifted results (``_conv_rows``; a cost model, ``_columns_cheaper``,
  sends few input channels and tiny images to full im2col instead);
- small depthwise kernels: elementwise multiply-adds of the shifted windows (``_depthwise``);
- otherwise: im2col into one column buffer and ONE matmul per group.
Column buffers are built a batch chunk at a time so they stay bounded.
With the native kernels, an f32 (or half) convolution of one group runs as an implicit matrix
product over a zero-padded copy of the input, with no column buffer
(``kernels/cpu/core/conv_direct.c``, in the AVX2 and AVX-512 variants): on YOLOv8n's 3×3 layers
of up to 80 channels it took 0.2–0.55 of the time of im2col and OpenBLAS, about the same at 128
(2 threads, AVX-512 Xeon). A 1×1 convolution at stride 1 takes it only from up to 64 input
channels (0.6 of one matmul and a bias pass there; even or slower beyond), and on AVX2 batches
of at most 400 output pixels with 128 input channels or more take im2col (1.05–1.6× faster;
on AVX-512 the implicit product is 0.7–0.95 of im2col's time there). A stride-1
transposed convolution (the input gradient) goes there through its flipped kernel, and the
weight gradient of such a convolution has a kernel of its own over the same zero-padded copy
(on the MNIST CNN's layers, batch 64: 0.2 and 0.75 of im2col and OpenBLAS's time). Grouped
convolutions, f64 and the baseline variant take the im2col path (``kernels/cpu/core/conv.c``),
with the copies done natively, by blocks of images (or rows) whose columns fit in the L2 cache:
this machine streams from memory at a few GB/s, so a column buffer of the whole batch costs
more to write and read back than its product. The forward's product goes into (N, O, Ho·Wo)
with the bias in the same pass; the weight gradient reads the same columns (at every stride and
on every variant); a transposed convolution that the implicit product does not take is one
matmul per group, wᵀ @ x, and a native col2im (depthwise ones excepted).
Depthwise convolutions and both their gradients run natively, in one pass over each plane
(``kernels/cpu/core/depthwise.c``).

``conv_transpose2d`` at stride 1 is a convolution with the kernel flipped (the paths above);
strided, it is one matmul per group (weightᵀ @ x, the columns) and col2im, kh·kw strided adds.
``conv2d_backward_weight`` is conv_direct.c's kernel where the forward's implicit product runs
(but AVX2 from 576 taps), else grad @ columnsᵀ over the same columns (row-shifted at stride 1
on images over 32×32 that the cost model sends to ``_conv_rows``).

f16/bf16 are computed in f32 and rounded once at the end.
"""

from __future__ import annotations

import threading

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..conv_params import ConvParams
from ..layout import Layout
from ._arrays import F32, contiguous, is_half, view
from .native import NATIVE

# A column buffer larger than this is built a batch chunk at a time.
_CHUNK_BYTES = 1 << 27
# The native path's blocks: columns of about this size, the two cores' L2 caches (2 MiB
# each), stay in cache from the copy to the product. Measured on the MNIST CNN's convs: 1 MiB
# blocks run 20% slower (more, smaller products), 16 MiB ones 10% slower, whole batches 25%.
_CACHE_BYTES = 1 << 22
_NATIVE_CONV = NATIVE is not None and hasattr(NATIVE, "conv_im2col")
# The implicit-GEMM kernel (conv_direct.c) is in the AVX2 and AVX-512 variants only.
_DIRECT_CONV = _NATIVE_CONV and hasattr(NATIVE, "conv_direct")


def _compute_dtype(a: np.ndarray) -> np.dtype:
    return F32 if is_half(a.dtype) else a.dtype


def _padded(x: np.ndarray, pads, dtype: np.dtype) -> np.ndarray:
    """``x`` (N, C, H, W) padded with zeros by ``pads`` = ((top, bottom), (left, right)), in
    the "padded" scratch buffer.

    A negative pad crops. Without padding this is ``x`` itself (cast to ``dtype``).
    """
    (top, bottom), (left, right) = pads
    if not (top or bottom or left or right):
        return x.astype(dtype, copy=False)
    n, c, h, w = x.shape
    src = x[:, :, max(-top, 0) : h - max(-bottom, 0), max(-left, 0) : w - max(-right, 0)]
    out = _scratch("padded", (n, c, h + top + bottom, w + left + right), dtype)
    t, lf = max(top, 0), max(left, 0)
    b, r = t + src.shape[2], lf + src.shape[3]
    out[:, :, :t] = 0  # the borders only: the rest is overwritten
    out[:, :, b:] = 0
    out[:, :, t:b, :lf] = 0
    out[:, :, t:b, r:] = 0
    out[:, :, t:b, lf:r] = src
    return out


def _windows(xp: np.ndarray, kernel, stride, dilation, out_hw) -> np.ndarray:
    """The (N, C, kh, kw, Ho, Wo) read-only view of the windows of ``xp`` (N, C, Hp, Wp)."""
    sn, sc, sh, sw = xp.strides
    return as_strided(
        xp,
        (*xp.shape[:2], *kernel, *out_hw),
        (sn, sc, sh * dilation[0], sw * dilation[1], sh * stride[0], sw * stride[1]),
        writeable=False,
    )


def _blocks(n: int, rows: int, row_bytes: int, halo: int = 0, limit: int = _CHUNK_BYTES):
    """(first image, images, first row, end row) blocks whose buffers stay near ``limit``
    bytes: whole images when one fits (``rows`` + ``halo`` rows of ``row_bytes``), else row
    bands of one image (a band of r rows needs r + ``halo`` rows of buffer)."""
    image = row_bytes * (rows + halo)
    if image <= limit:
        m = max(1, min(n, limit // max(image, 1)))
        if n:  # as many blocks, of even sizes (64 = 8 × 8, not 7 × 9 + 1)
            m = -(-n // -(-n // m))
        for n0 in range(0, n, m):
            yield n0, min(m, n - n0), 0, rows
        return
    band = max(1, limit // max(row_bytes, 1) - halo)
    for n0 in range(n):
        for r0 in range(0, rows, band):
            yield n0, 1, r0, min(rows, r0 + band)


# Scratch buffers (im2col columns, padded inputs, partial products) are kept per thread and
# reused: a fresh multi-MiB numpy array costs a page fault (and the kernel zeroing the page)
# for every 4 KiB touched, as much as the copy into it. Buffers above this are not kept.
_KEEP_BYTES = 1 << 25
_SCRATCH = threading.local()


def _scratch(slot: str, shape, dtype) -> np.ndarray:
    """An uninitialised C-contiguous array of ``shape`` from this thread's buffer ``slot``
    (valid until the next request of the same slot)."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape)) * dtype.itemsize
    if nbytes > _KEEP_BYTES:
        return np.empty(shape, dtype)
    buffers = getattr(_SCRATCH, "buffers", None)
    if buffers is None:
        buffers = _SCRATCH.buffers = {}
    buf = buffers.get(slot)
    if buf is None or buf.size < nbytes:
        buf = buffers[slot] = np.empty(max(nbytes, 1), np.uint8)
    return buf[:nbytes].view(dtype).reshape(shape)


def conv2d_array(x, w, bias, stride, pads, dilation, groups: int) -> np.ndarray:
    """y[n, o] = Σ_{c ∈ group(o), i, j} w[o, c, i, j] · x_pad[n, c, s·h + d·i, s·w + d·j] + b[o].

    x: (N, C, H, W), w: (O, C/groups, kh, kw), bias: (O,) or None -> (N, O, Ho, Wo), in the
    compute dtype (f32 for half inputs).
    """
    ct = _compute_dtype(x)
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    og = o // groups
    (top, bottom), (left, right) = pads
    ho, wo = ConvParams(stride, pads, dilation).out_size(x.shape[2:], w.shape[2:])
    w = w.astype(ct, copy=False)
    length = ho * wo
    if 0 in (n, c, h, wd, o, ho, wo):  # no terms: the bias alone (the kernels take sizes >= 1)
        out = np.zeros((n, o, ho, wo), ct)
        return out if bias is None else out + bias.astype(ct).reshape(1, o, 1, 1)
    out = conv2d_activated_array(x, w, bias, stride, pads, dilation, groups, 0)
    if out is not None:
        return out
    if _pointwise((kh, kw), stride, pads):
        cols = x.astype(ct, copy=False).reshape(n, groups, cg, h * wd)
        out = np.matmul(w.reshape(groups, og, cg), cols)
    elif cg == 1 and groups > 1 and _native(x):
        return _depthwise_native(0, x, w, bias, (n, c, h, wd), w.shape, stride, dilation,
                                 (top, left), (ho, wo))  # fmt: skip
    elif cg == 1 and groups > 1 and (stride[0] > 1 or kh * kw <= 9):
        # small depthwise kernels: elementwise multiply-adds beat tiny matmuls
        out = _depthwise(x, w, pads, stride, dilation, (ho, wo), ct)
    elif stride[0] == 1 and not _columns_cheaper(c, o, groups, (kh, kw), (ho, wo), dilation[0]):
        b = None if bias is None else bias.astype(ct, copy=False)
        out = _conv_rows(_padded(x, pads, ct), w, groups, stride[1], dilation, (ho, wo), b)
        return out.reshape(n, o, ho, wo)  # the bias is added in the rows' first pass
    else:
        win = _windows(_padded(x, pads, ct), (kh, kw), stride, dilation, (ho, wo))
        k = cg * kh * kw
        wm = w.reshape(groups, og, k)
        out = np.empty((n, groups, og, length), ct)
        for n0, m, r0, r1 in _blocks(n, ho, c * kh * kw * wo * ct.itemsize):
            cols = _scratch("cols", (m, c, kh, kw, r1 - r0, wo), ct)
            np.copyto(cols, win[n0 : n0 + m, ..., r0:r1, :])
            cols = cols.reshape(m, groups, k, (r1 - r0) * wo)
            np.matmul(wm, cols, out=out[n0 : n0 + m, :, :, r0 * wo : r1 * wo])
    out = out.reshape(n, o, ho, wo)
    if bias is not None:
        out += bias.astype(ct, copy=False).reshape(1, o, 1, 1)
    return out


def conv2d_activated_array(x, w, bias, stride, pads, dilation, groups: int, act: int):
    """act(``conv2d_array``) where a native kernel applies the activation ``act`` (a code of
    ``ACTIVATIONS``, 0 for none) as it stores each tile or row of outputs, in the compute
    dtype: conv_direct.c's implicit product and the native im2col path (not 1×1 stride-1
    products, depthwise convolutions or the numpy paths). None where neither takes it;
    sizes >= 1."""
    ct = _compute_dtype(x)
    (top, _), (left, _) = pads
    kernel, cg = w.shape[2:], w.shape[1]
    out_hw = ConvParams(stride, pads, dilation).out_size(x.shape[2:], kernel)
    w = w.astype(ct, copy=False)
    if _direct_conv(x, w.shape, stride, pads, groups, out_hw):
        return _conv_direct(x, w, bias, stride, (top, left), dilation, out_hw, act)
    if _native(x) and not _pointwise(kernel, stride, pads) and not (cg == 1 and groups > 1):
        return _conv_native(x, w, bias, stride, pads, dilation, groups, out_hw, act)
    return None


# The activations a convolution can apply as it stores: kernels/cpu/core/activation.h's codes.
ACTIVATIONS = {"silu": 1, "relu": 2, "gelu": 3, "gelu_erf": 4}


def _pointwise(kernel, stride, pads) -> bool:
    """A 1×1 convolution at stride 1 without padding: one matrix product over the pixels."""
    return tuple(kernel) == (1, 1) and tuple(stride) == (1, 1) and not any(map(any, pads))


def _native(x: np.ndarray) -> bool:
    """Whether the native copies (conv.c) take ``x``: a plain numpy array of a float dtype."""
    if not _NATIVE_CONV or type(x) is not np.ndarray:
        return False
    return x.dtype in (F32, np.float64) or is_half(x.dtype)


def _depthwise_native(
    mode: int, a, b, bias, x_shape, w_shape, stride, dilation, origin, out_hw
) -> np.ndarray:
    """A depthwise convolution (one input channel per group) by conv.c's sibling
    depthwise.c, in one pass over each plane: mode 0, y = conv(x = a, k = b) + bias; 1, the
    input gradient dx of g = a; 2, the weight gradient dk of x = a and g = b. ``x_shape``
    (N, C, H, W) and ``w_shape`` (C·M, 1, kh, kw) are the forward's, ``origin`` its (top,
    left) padding (negative: a crop), ``out_hw`` its output's size; the result is in the
    compute dtype (f32 for halves)."""
    n, c, h, wd = x_shape
    o, _, kh, kw = w_shape
    ct = _compute_dtype(a)
    a, b = np.ascontiguousarray(a, ct), np.ascontiguousarray(b, ct)
    bias = None if bias is None else np.ascontiguousarray(bias, ct)
    shape = ((n, o, *out_hw), (n, c, h, wd), (o, 1, kh, kw))[mode]
    # No terms: the gradients of an empty batch or image (conv2d_array answers the forward);
    # the kernel takes sizes >= 1.
    if 0 in (n, c, h, wd, *out_hw):
        return np.zeros(shape, ct)
    out = np.empty(shape, ct)
    NATIVE.conv_depthwise(mode, a, b, out, bias, n, c, o // c, h, wd, *out_hw, kh, kw,
                          *stride, *dilation, *origin)  # fmt: skip
    return out


def _takes_direct(x: np.ndarray, groups: int) -> bool:
    """Whether a convolution of ``x`` may run as conv_direct.c's implicit product: one group,
    computed in f32, on a variant that has the kernel (``_direct_conv`` adds the 1×1 rule)."""
    return _DIRECT_CONV and groups == 1 and _native(x) and _compute_dtype(x) == F32


# Input channels up to which a 1×1 stride-1 convolution runs as conv_direct.c rather than one
# BLAS product and a bias pass. Measured at 2 threads, batch 1, on YOLOv8n's 1×1 shapes (Xeon,
# OpenBLAS), direct / (matmul + bias): 0.57-0.63 from 16, 32 and 64 input channels; 0.99-1.24
# from 48, 96, 192, 256 and 384.
_POINTWISE_DIRECT_MAX_C = 64


# On the AVX2 variant (4 output channels per micro-tile) batches of up to this many output
# pixels (all images) take im2col and BLAS from _FEW_PIXELS_MIN_C input channels. Measured at
# 2 threads (Zen 4, AVX2 variant), 3×3, direct / im2col time: 1.05-1.25 from 128 to 512
# channels at 8², 16² and 20², batch 1 and 2 (1.6 at 512 channels of 20²). The AVX-512
# variant's kernel (8 channels) runs them in 0.7-0.95 of im2col's time.
_FEW_PIXELS = 400
_FEW_PIXELS_MIN_C = 128
_FEW_PIXELS_IM2COL = _DIRECT_CONV and NATIVE.variant() != "avx512"


def _direct_conv(x: np.ndarray, w_shape, stride, pads, groups: int, out_hw) -> bool:
    """Whether ``conv2d_array`` runs this convolution as conv_direct.c's implicit product:
    ``_takes_direct``, a 1×1 one at stride 1 unpadded only up to 64 input channels, and on
    AVX2 not a batch of at most 400 output pixels with 128 input channels or more."""
    if not _takes_direct(x, groups):
        return False
    pixels = x.shape[0] * out_hw[0] * out_hw[1]
    if _FEW_PIXELS_IM2COL and w_shape[1] >= _FEW_PIXELS_MIN_C and pixels <= _FEW_PIXELS:
        return False
    return not _pointwise(w_shape[2:], stride, pads) or w_shape[1] <= _POINTWISE_DIRECT_MAX_C


def _conv_direct(x, w, bias, stride, origin, dilation, out_hw, act: int = 0) -> np.ndarray:
    """``conv2d_array`` of one group in f32 by conv_direct.c's implicit-GEMM micro-kernel (no
    column buffer); ``origin`` is the (top, left) padding, negative for a crop; ``act`` an
    ``ACTIVATIONS`` code."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    out = np.empty((n, o, *out_hw), F32)
    x, w = np.ascontiguousarray(x, F32), np.ascontiguousarray(w, F32)
    b = None if bias is None else np.ascontiguousarray(bias, F32)
    NATIVE.conv_direct(x, w, b, out, n, c, h, wd, o, kh, kw, *stride, *dilation, *out_hw,
                       *origin, act)  # fmt: skip
    return out


def _native_blocks(n: int, c: int, kernel, out_hw, ct):
    """``_blocks`` of the native path: columns of c·kh·kw rows near _CACHE_BYTES."""
    row_bytes = c * kernel[0] * kernel[1] * out_hw[1] * ct.itemsize
    return _blocks(n, out_hw[0], row_bytes, limit=_CACHE_BYTES)


def _channels_first(a: np.ndarray, block, wo: int, ct) -> np.ndarray:
    """The (C, m·Lb) matrix of ``block``'s images and rows of ``a`` (N, C, Ho·Wo): a view for
    a band of one image, else moved there by conv.c's swap01 (whole images)."""
    n0, m, r0, r1 = block
    if m == 1:
        return a[n0, :, r0 * wo : r1 * wo]
    c, length = a.shape[1:]
    out = _scratch("grad", (c, m * length), ct)
    NATIVE.conv_swap01(a[n0 : n0 + m], out, None, m, c, length, 0, m * length, length, 0)
    return out


def _native_columns(x, block, kernel, stride, pads, dilation, wo: int, ct) -> np.ndarray:
    """cols[k, n·Lb + l] (C·kh·kw, m·Lb): the im2col of ``block`` = (first image, images m,
    first row, end row) of the output, Lb = rows · Wo, from contiguous ``x`` (conv.c)."""
    n0, m, r0, r1 = block
    n, c, h, w = x.shape
    kh, kw = kernel
    cols = _scratch("cols", (c * kh * kw, m * (r1 - r0) * wo), ct)
    top, left = pads[0][0], pads[1][0]
    NATIVE.conv_im2col(
        x, cols, n, c, h, w, kh, kw, *stride, *dilation, wo, top, left, n0, m, r0, r1
    )
    return cols


def _conv_native(x, w, bias, stride, pads, dilation, groups: int, out_hw, act: int = 0):
    """``conv2d_array`` a cache-sized block at a time: native im2col, one matmul per group
    (O/G, K) @ (K, m·Lb), and the native move of that (O, m, Lb) product into y (N, O, Ho·Wo)
    with the bias added and the activation ``act`` (an ``ACTIVATIONS`` code) applied."""
    ct = w.dtype
    n = x.shape[0]
    o, cg, kh, kw = w.shape
    ho, wo = out_hw
    x = np.ascontiguousarray(x)
    wm = w.reshape(groups, o // groups, cg * kh * kw)
    b = None if bias is None else np.ascontiguousarray(bias, ct)
    out = np.empty((n, o, ho * wo), ct)
    for block in _native_blocks(n, x.shape[1], (kh, kw), out_hw, ct):
        n0, m, r0, r1 = block
        lb = (r1 - r0) * wo
        cols = _native_columns(x, block, (kh, kw), stride, pads, dilation, wo, ct)
        y = _scratch("rows", (groups, o // groups, m * lb), ct)
        np.matmul(wm, cols.reshape(groups, cg * kh * kw, m * lb), out=y)
        NATIVE.conv_swap01(y, out, b, o, m, lb, n0 * o * ho * wo + r0 * wo, o * ho * wo, ho * wo,
                           act)  # fmt: skip
    return out.reshape(n, o, ho, wo)


def _columns_cheaper(c: int, o: int, groups: int, kernel, out_hw, dilation_h: int) -> bool:
    """Whether full im2col (kh·kw copies of the input, one matmul) beats ``_conv_rows`` (kw
    copies over ho + halo rows, kh times the outputs, kh - 1 adds of them) at stride 1 along H.

    A cheap cost model in element moves, a multiply-add counted as 1/100 of a move: full
    columns win for few input channels (1→32 on 28×28: 9 input copies vs 2 adds of 32
    channels) and tiny images (where the halo rows are a large share); ``_conv_rows`` for
    wide layers (32→64 on 14×14, 64→64 on 160×160).
    """
    kh, kw = kernel
    ho, wo = out_hw
    og = o // groups
    length = ho * wo
    rows_len = (ho + dilation_h * (kh - 1)) * wo
    rows = c * kw * rows_len * (1 + 0.01 * kh * og) + (kh - 1) * o * length
    cols = c * kh * kw * length * (1 + 0.01 * og)
    return cols < rows


def _conv_rows(xp, w, groups: int, stride_w: int, dilation, out_hw, bias=None) -> np.ndarray:
    """A convolution of stride 1 along H, with columns over the kernel's width only.

    cols[n, c, j, r, q] = xp[n, c, r, s·q + d·j] holds kw (not kh·kw) copies of the input;
    one matmul per group stacks the kernel's rows as outputs, Y_i = w[:, :, i, :] @ cols, and
    y[.., h, q] = b + Σ_i Y_i[.., h + dh·i, q] is a sum of shifts of the flattened rows (the
    bias ``b`` (O,), when given, joins the first of them: no pass of its own).
    """
    n, c, hp, _ = xp.shape
    o, cg, kh, kw = w.shape
    og = o // groups
    ho, wo = out_hw
    dh, dw = dilation
    ct = xp.dtype
    sn, sc, sh, sw = xp.strides
    win = as_strided(xp, (n, c, kw, hp, wo), (sn, sc, sw * dw, sh, sw * stride_w), writeable=False)
    wr = (
        w.reshape(groups, og, cg, kh, kw).transpose(0, 3, 1, 2, 4).reshape(groups, kh * og, cg * kw)
    )
    halo = dh * (kh - 1)
    out = np.empty((n, groups, og, ho * wo), ct)
    for n0, m, r0, r1 in _blocks(n, ho, (c * kw + o * kh) * wo * ct.itemsize, halo):
        rows = (r1 - r0 + halo) * wo
        cols = _scratch("cols", (m, c, kw, r1 - r0 + halo, wo), ct)
        np.copyto(cols, win[n0 : n0 + m, :, :, r0 : r1 + halo])
        y = _scratch("rows", (m, groups, kh * og, rows), ct)
        np.matmul(wr, cols.reshape(m, groups, cg * kw, rows), out=y)
        y = y.reshape(m, groups, kh, og, rows)
        length = (r1 - r0) * wo
        dst = out[n0 : n0 + m, :, :, r0 * wo : r1 * wo]
        if bias is None:
            np.copyto(dst, y[:, :, 0, :, :length])
        else:
            np.add(y[:, :, 0, :, :length], bias.reshape(groups, og, 1), out=dst)
        for i in range(1, kh):
            dst += y[:, :, i, :, i * dh * wo : i * dh * wo + length]
    return out


def _depthwise(x, w, pads, stride, dilation, out_hw, ct) -> np.ndarray:
    """Convolution with one input channel per group: Σ over the kh·kw shifted windows, each
    scaled by its per-channel weight.

    At stride 1 every window is a contiguous shift of the flattened padded plane (computed on
    the padded width, then cropped), so each step is one long multiply-add.
    """
    o, _, kh, kw = w.shape
    n, groups = x.shape[:2]
    og = o // groups
    ho, wo = out_hw
    dh, dw = dilation
    wv = w.reshape(groups, og, kh, kw)
    if stride == (1, 1):
        (top, bottom), sides = pads
        xp = _padded(x, ((top, bottom + 1), sides), ct)  # a spare row for the last shift
        wp = xp.shape[3]
        flat = np.ascontiguousarray(xp).reshape(n, groups, 1, xp.shape[2] * wp)
        length = ho * wp
        terms = (
            (flat[..., i * dh * wp + j * dw :][..., :length], wv[:, :, i, j, None])
            for i in range(kh)
            for j in range(kw)
        )
    else:
        win = _windows(_padded(x, pads, ct), (kh, kw), stride, dilation, out_hw)
        terms = (
            (win[:, :, None, i, j], wv[:, :, i, j, None, None])
            for i in range(kh)
            for j in range(kw)
        )
    window, scale = next(terms)
    out = np.multiply(window, scale, dtype=ct)
    tmp = np.empty_like(out)
    for window, scale in terms:
        out += np.multiply(window, scale, out=tmp)
    if stride == (1, 1):
        return out.reshape(n, groups, og, ho, wp)[..., :wo]
    return out


def conv_transpose2d_array(x, w, bias, stride, padding, dilation, groups: int, out_hw):
    """The adjoint of ``conv2d_array`` in its input, cropped to ``out_hw``.

    y_full[n, o, s·h + d·i, s·w + d·j] += Σ_c x[n, c, h, w] · w[c, o, i, j]; y = y_full[p:p+Ho].
    x: (N, C, H, W), w: (C, O/groups, kh, kw) -> (N, O, Ho, Wo) in the compute dtype.
    """
    ct = _compute_dtype(x)
    n, c, h, wd = x.shape
    _, og, kh, kw = w.shape
    cg = c // groups
    o = og * groups
    ho, wo = out_hw
    ph, pw = padding
    sh, sw = stride
    dh, dw = dilation
    if _native(x) and og == 1 and groups > 1:
        # the input gradient of a depthwise convolution of multiplier cg
        y = _depthwise_native(1, x, w, None, (n, groups, ho, wo), (c, 1, kh, kw), stride,
                              dilation, padding, (h, wd))  # fmt: skip
        if bias is not None:
            y += bias.astype(ct, copy=False).reshape(1, o, 1, 1)
        return y
    if _native(x) and cg > 1 and not (stride == (1, 1) and _takes_direct(x, groups)):
        y = _conv_transpose_native(
            x, w.astype(ct, copy=False), stride, padding, dilation, groups, out_hw
        )
        if bias is not None:
            y += bias.astype(ct, copy=False).reshape(1, o, 1, 1)
        return y
    if stride == (1, 1):
        # A stride-1 transposed convolution is a convolution with the kernel flipped and its
        # channel dims swapped, padded by d·(k-1) - p: the fast forward path serves it.
        flipped = w.reshape(groups, cg, og, kh, kw).transpose(0, 2, 1, 3, 4)[..., ::-1, ::-1]
        top, left = dh * (kh - 1) - ph, dw * (kw - 1) - pw
        pads = ((top, ho - h - top + dh * (kh - 1)), (left, wo - wd - left + dw * (kw - 1)))
        weight = flipped.reshape(o, cg, kh, kw)
        return conv2d_array(x, weight, bias, (1, 1), pads, dilation, groups)
    w = w.astype(ct, copy=False)
    full_h = max((h - 1) * sh + dh * (kh - 1) + 1, ph + ho)
    full_w = max((wd - 1) * sw + dw * (kw - 1) + 1, pw + wo)
    full = np.zeros((n, groups, og, full_h, full_w), ct)
    span_w = sw * (wd - 1) + 1

    def target(i: int, j: int, r0: int = 0, r1: int = h) -> np.ndarray:
        """Where input rows r0..r1 land for kernel tap (i, j)."""
        top = i * dh + r0 * sh
        return full[..., top : top + sh * (r1 - r0 - 1) + 1 : sh, j * dw : j * dw + span_w : sw]

    if cg == 1:
        xg = x.astype(ct, copy=False).reshape(n, groups, 1, h, wd)
        wv = w.reshape(groups, og, kh, kw)
        for i in range(kh):
            for j in range(kw):
                target(i, j)[...] += xg * wv[None, :, :, i, j, None, None]
    else:
        wm = w.reshape(groups, cg, og * kh * kw).transpose(0, 2, 1)  # (G, O/G·kh·kw, C/G)
        xm = x.astype(ct, copy=False).reshape(n, groups, cg, h, wd)
        for n0, m, r0, r1 in _blocks(n, h, o * kh * kw * wd * ct.itemsize):
            rows = xm[n0 : n0 + m, :, :, r0:r1].reshape(m, groups, cg, (r1 - r0) * wd)
            cols = _scratch("cols", (m, groups, og * kh * kw, (r1 - r0) * wd), ct)
            np.matmul(wm, rows, out=cols)
            cols = cols.reshape(m, groups, og, kh, kw, r1 - r0, wd)
            for i in range(kh):
                for j in range(kw):
                    target(i, j, r0, r1)[n0 : n0 + m] += cols[:, :, :, i, j]
    out = full[..., ph : ph + ho, pw : pw + wo].reshape(n, o, ho, wo)
    if bias is not None:
        out += bias.astype(ct, copy=False).reshape(1, o, 1, 1)
    return out


def _conv_transpose_native(x, w, stride, padding, dilation, groups: int, out_hw) -> np.ndarray:
    """``conv_transpose2d_array`` (no bias) a cache-sized block of x at a time: x's block as
    (C, m·Lb), one matmul per group, cols = w_gᵀ (O/G·kh·kw, C/G) @ x_g, and col2im into y."""
    ct = w.dtype
    n, c, h, wd = x.shape
    _, og, kh, kw = w.shape
    o = og * groups
    k = og * kh * kw
    x = np.ascontiguousarray(x, ct).reshape(n, c, h * wd)
    wm = w.reshape(groups, c // groups, k).transpose(0, 2, 1)
    y = np.zeros((n, o, *out_hw), ct)
    for block in _native_blocks(n, o, (kh, kw), (h, wd), ct):
        n0, m, r0, r1 = block
        xm = _channels_first(x, block, wd, ct).reshape(groups, c // groups, -1)
        cols = _scratch("cols", (groups, k, xm.shape[2]), ct)
        np.matmul(wm, xm, out=cols)
        geometry = (kh, kw, *stride, *dilation, wd, *padding, n0, m, r0, r1)
        NATIVE.conv_col2im(y, cols, n, o, *out_hw, *geometry)
    return y


def conv2d_weight_grad_array(x, g, kernel, stride, pads, dilation, groups: int) -> np.ndarray:
    """dL/dw[o, c, i, j] = Σ_{n, h, w} g[n, o, h, w] · x_pad[n, c, s·h + d·i, s·w + d·j].

    x: (N, C, H, W), g: (N, O, Ho, Wo) -> (O, C/groups, kh, kw) in the compute dtype.
    """
    ct = _compute_dtype(x)
    n, c, h, wd = x.shape
    _, o, ho, wo = g.shape
    kh, kw = kernel
    cg = c // groups
    og = o // groups
    length = ho * wo
    g = g.astype(ct, copy=False)
    (top, bottom), (left, right) = pads
    if _pointwise(kernel, stride, pads):
        xm = x.astype(ct, copy=False).reshape(n, groups, cg, length)
        gm = g.reshape(n, groups, og, length)
        return np.matmul(gm, xm.transpose(0, 1, 3, 2)).sum(0).reshape(o, cg, 1, 1)
    if cg == 1 and groups > 1 and _native(x):
        return _depthwise_native(2, x, g, None, x.shape, (o, 1, *kernel), stride, dilation,
                                 (top, left), (ho, wo))  # fmt: skip
    if cg == 1 and groups > 1 and stride == (1, 1):
        return _depthwise_weight_grad(x, g, kernel, pads, dilation, ct)
    if _takes_direct(x, groups):
        dk = _weight_grad_direct(x, g, kernel, stride, (top, left), dilation)
        if dk is not None:
            return dk
    if _native(x):
        return _weight_grad_native(x, g, kernel, stride, pads, dilation, groups)
    xp = _padded(x, pads, ct)
    # Small images: the columns of the whole block make ONE matmul with a long inner dim,
    # where the row path would run kh tiny matmuls per image.
    small = length <= 1024
    if stride[0] == 1 and not (
        small or _columns_cheaper(c, o, groups, kernel, (ho, wo), dilation[0])
    ):
        return _weight_grad_rows(xp, g, kernel, groups, stride[1], dilation)
    win = _windows(xp, kernel, stride, dilation, (ho, wo))
    k = cg * kh * kw
    out = np.zeros((groups, og, k), ct)
    for n0, m, r0, r1 in _blocks(n, ho, c * kh * kw * wo * ct.itemsize):
        # columns laid out (G, K, m·L) so one matmul per group covers the whole block
        length = (r1 - r0) * wo
        cols = _scratch("cols", (groups, cg, kh, kw, m, r1 - r0, wo), ct)
        block = win[n0 : n0 + m, ..., r0:r1, :].reshape(m, groups, cg, kh, kw, r1 - r0, wo)
        np.copyto(cols, block.transpose(1, 2, 3, 4, 0, 5, 6))
        gm = g[n0 : n0 + m, :, r0:r1].reshape(m, groups, og, length).transpose(1, 2, 0, 3)
        gm = gm.reshape(groups, og, m * length)
        out += np.matmul(gm, cols.reshape(groups, k, m * length).transpose(0, 2, 1))
    return out.reshape(o, cg, kh, kw)


def _weight_grad_direct(x, g, kernel, stride, origin, dilation) -> np.ndarray | None:
    """``conv2d_weight_grad_array`` of one group in f32 by conv_direct.c's weight-gradient
    kernel, over the forward's phase planes (no column buffer); ``origin`` is the (top, left)
    padding, negative for a crop. None where the variant leaves the geometry to im2col (AVX2
    from 576 taps: measured faster there)."""
    n, c, h, wd = x.shape
    _, o, ho, wo = g.shape
    if 0 in (n, c, h, wd, o, ho, wo):  # no terms (the kernel takes sizes >= 1)
        return np.zeros((o, c, *kernel), F32)
    out = np.empty((o, c, *kernel), F32)
    x, g = np.ascontiguousarray(x, F32), np.ascontiguousarray(g, F32)
    ran = NATIVE.conv_direct_wgrad(x, g, out, n, c, h, wd, o, *kernel, *stride, *dilation, ho,
                                   wo, *origin)  # fmt: skip
    return out if ran else None


def _weight_grad_native(x, g, kernel, stride, pads, dilation, groups: int) -> np.ndarray:
    """``conv2d_weight_grad_array`` a cache-sized block at a time, over the native im2col:
    (dL/dw)ᵀ += cols_block (K, m·Lb) @ g_blockᵀ (m·Lb, O/G) per group. OpenBLAS runs this
    product 15-45% faster than its transpose g_block @ colsᵀ (measured on the MNIST and
    YOLO-sized layers: the long inner dim of both operands is then contiguous)."""
    ct = g.dtype
    n, c = x.shape[:2]
    _, o, ho, wo = g.shape
    kh, kw = kernel
    og, k = o // groups, c // groups * kh * kw
    x = np.ascontiguousarray(x)
    g = np.ascontiguousarray(g).reshape(n, o, ho * wo)
    out_t = np.zeros((groups, k, og), ct)
    for block in _native_blocks(n, c, kernel, (ho, wo), ct):
        n0, m, r0, r1 = block
        lb = (r1 - r0) * wo
        cols = _native_columns(x, block, kernel, stride, pads, dilation, wo, ct)
        gm_t = _channels_first(g, block, wo, ct).reshape(groups, og, m * lb).transpose(0, 2, 1)
        out_t += np.matmul(cols.reshape(groups, k, m * lb), gm_t)
    return np.ascontiguousarray(out_t.transpose(0, 2, 1)).reshape(o, c // groups, kh, kw)


def _weight_grad_rows(xp, g, kernel, groups: int, stride_w: int, dilation) -> np.ndarray:
    """The weight gradient of a stride-1 (along H) convolution from ``_conv_rows``' columns:
    dL/dw[:, :, i, :] = g @ (the columns shifted down by dh·i rows)ᵀ, one matmul per kernel row.
    """
    n, c, hp, _ = xp.shape
    _, o, ho, wo = g.shape
    kh, kw = kernel
    dh, dw = dilation
    cg = c // groups
    og = o // groups
    ct = xp.dtype
    sn, sc, sh, sw = xp.strides
    win = as_strided(xp, (n, c, kw, hp, wo), (sn, sc, sw * dw, sh, sw * stride_w), writeable=False)
    halo = dh * (kh - 1)
    out = np.zeros((groups, og, kh, cg * kw), ct)
    for n0, m, r0, r1 in _blocks(n, ho, c * kw * wo * ct.itemsize, halo):
        length = (r1 - r0) * wo
        cols = _scratch("cols", (m, c, kw, r1 - r0 + halo, wo), ct)
        np.copyto(cols, win[n0 : n0 + m, :, :, r0 : r1 + halo])
        cols = cols.reshape(m, groups, cg * kw, (r1 - r0 + halo) * wo)
        gm = g[n0 : n0 + m, :, r0:r1].reshape(m, groups, og, length)
        for i in range(kh):
            shifted = cols[..., i * dh * wo : i * dh * wo + length].transpose(0, 1, 3, 2)
            out[:, :, i] += np.matmul(gm, shifted).sum(0)
    return out.reshape(groups, og, kh, cg, kw).transpose(0, 1, 3, 2, 4).reshape(o, cg, kh, kw)


def _depthwise_weight_grad(x, g, kernel, pads, dilation, ct) -> np.ndarray:
    """The weight gradient of a stride-1 depthwise convolution: per tap, one dot product per
    (image, channel) of the output gradient with the shifted flattened plane (see _depthwise)."""
    n, groups = x.shape[:2]
    _, o, ho, wo = g.shape
    og = o // groups
    kh, kw = kernel
    dh, dw = dilation
    (top, bottom), sides = pads
    xp = _padded(x, ((top, bottom + 1), sides), ct)
    wp = xp.shape[3]
    flat = np.ascontiguousarray(xp).reshape(n, groups, 1, xp.shape[2] * wp)
    # the gradient on the padded width, zero in the columns no output came from
    gq = np.zeros((n, groups, og, ho, wp), ct)
    gq[..., :wo] = g.reshape(n, groups, og, ho, wo)
    gq = gq.reshape(n, groups, og, 1, ho * wp)
    length = ho * wp
    out = np.empty((groups, og, kh, kw), ct)
    for i in range(kh):
        for j in range(kw):
            shift = i * dh * wp + j * dw
            window = flat[..., shift : shift + length, None]
            out[:, :, i, j] = np.matmul(gq, window)[..., 0, 0].sum(0)
    return out.reshape(o, 1, kh, kw)


class ConvOps:
    __slots__ = ()

    def conv2d(
        self, layout, weight, w_layout, bias, b_layout, stride, padding, dilation, groups: int
    ):
        """x: (N, C, H, W), weight: (O, C/groups, kh, kw), bias: (O,) or None.

        ``padding`` is ((top, bottom), (left, right)); a negative bottom/right pad crops.
        """
        x = view(self.array, layout)
        b = None if bias is None else view(bias.array, b_layout)
        out = conv2d_array(x, view(weight.array, w_layout), b, stride, padding, dilation, groups)
        return type(self)(contiguous(out, x.dtype))

    def conv2d_activated(
        self, layout, weight, w_layout, bias, b_layout, stride, padding, dilation, groups: int,
        activation: str,
    ):  # fmt: skip
        """activation(conv2d(x)), applied as the native kernels store the outputs where they
        can (``conv2d_activated_array``; half outputs are then rounded once), else by the
        separate elementwise op."""
        act = ACTIVATIONS[activation]
        x = view(self.array, layout)
        w = view(weight.array, w_layout)
        b = None if bias is None else view(bias.array, b_layout)
        if x.size and w.size:
            out = conv2d_activated_array(x, w, b, stride, padding, dilation, groups, act)
            if out is not None:
                return type(self)(contiguous(out, x.dtype))
        out = conv2d_array(x, w, b, stride, padding, dilation, groups)
        return type(self)(contiguous(out, x.dtype)).unary(activation, Layout.contiguous(out.shape))

    def conv_transpose2d(
        self,
        layout,
        weight,
        w_layout,
        bias,
        b_layout,
        stride,
        padding,
        dilation,
        groups: int,
        output_size,
    ):
        """x: (N, C, H, W), weight: (C, O/groups, kh, kw) -> (N, O, *output_size).

        ``padding`` is (top, left): the full transposed output is cropped from there.
        """
        x = view(self.array, layout)
        b = None if bias is None else view(bias.array, b_layout)
        w = view(weight.array, w_layout)
        out = conv_transpose2d_array(x, w, b, stride, padding, dilation, groups, output_size)
        return type(self)(contiguous(out, x.dtype))

    def conv2d_backward_weight(
        self, layout, grad, grad_layout, kernel_size, stride, padding, dilation, groups: int
    ):
        """The gradient of ``conv2d`` in its weight: ``self`` is the input x (N, C, H, W),
        ``grad`` the output gradient (N, O, Ho, Wo) -> (O, C/groups, kh, kw)."""
        x = view(self.array, layout)
        g = view(grad.array, grad_layout)
        out = conv2d_weight_grad_array(x, g, kernel_size, stride, padding, dilation, groups)
        return type(self)(contiguous(out, x.dtype))
