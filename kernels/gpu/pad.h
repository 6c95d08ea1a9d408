// Padding of an n-d tensor (any rank up to WB_MAX_DIMS after the host merges unpadded dims).
//   pad_b<size>: out (contiguous, shape p.out) from x read through an UNMERGED Layout whose
//     dims match p.out one to one. Per dim, output coordinate o reads x at i = o - lo:
//       constant (0):  i outside [0, n) -> the whole element is `value` (a negative lo crops)
//       reflect (1):   i < 0 -> -i;  i >= n -> 2 (n - 1) - i   (pads < n: one reflection)
//       replicate (2): i clamped to [0, n - 1]
//       circular (3):  i wrapped modulo n
//     Data movement only, so one kernel per element size (any dtype).
//   pad_backward_<dt>: the gradient of a non-constant pad along ONE dim (the host runs one
//     pass per padded dim): each input element gathers the output gradients that copied it.
//     Reads g (T) through a Layout, writes the compute type (f32 for halves), contiguous.
// Written in the portable dialect (common.h).

#define WB_PAD_CONSTANT 0
#define WB_PAD_REFLECT 1
#define WB_PAD_REPLICATE 2
#define WB_PAD_CIRCULAR 3

struct PadGeom {
    wb_i64 lo[WB_MAX_DIMS];   // pad before each dim (negative: crop, constant mode only)
    wb_i64 out[WB_MAX_DIMS];  // output size of each dim: n + lo + hi
};

// The source coordinate of output coordinate o along a dim of size n, or -1 for `value`.
WB_FN wb_i64 pad_source(wb_i64 o, wb_i64 lo, wb_i64 n, int mode) {
    wb_i64 i = o - lo;
    if (i >= 0 && i < n) return i;
    switch (mode) {
    case WB_PAD_REFLECT: return i < 0 ? -i : 2 * (n - 1) - i;
    case WB_PAD_REPLICATE: return i < 0 ? 0 : n - 1;
    case WB_PAD_CIRCULAR: return ((i % n) + n) % n;
    default: return -1;
    }
}

#define PAD_KERNEL(size, U)                                                         \
    WB_KERNEL pad_b##size(WB_OUT(U, out, 0), WB_IN(U, x, 1), WB_ARG(Layout, lx, 2), \
                          WB_ARG(PadGeom, p, 3), WB_ARG(wb_i64, total, 4),          \
                          WB_ARG(int, mode, 5), WB_ARG(U, value, 6) WB_THREAD_ARGS) { \
        WB_LOOP(e, total) {                                                         \
            wb_i64 rem = e, off = lx.offset;                                        \
            bool inside = true;                                                     \
            for (int d = lx.ndim - 1; d >= 0; --d) {                                \
                wb_i64 q = rem / p.out[d];                                          \
                wb_i64 i = pad_source(rem - q * p.out[d], p.lo[d], lx.shape[d], mode); \
                rem = q;                                                            \
                if (i < 0) {                                                        \
                    inside = false;                                                 \
                    break;                                                          \
                }                                                                   \
                off += i * lx.strides[d];                                           \
            }                                                                       \
            out[e] = inside ? (U)x[off] : (U)value; /* both prvalues (Metal spaces) */ \
        }                                                                           \
    }
PAD_KERNEL(1, unsigned char)
PAD_KERNEL(2, unsigned short)
PAD_KERNEL(4, unsigned int)
PAD_KERNEL(8, wb_u64)

// The input gradient (outer, n, inner) of a pad along one dim from g (outer, n + lo + hi,
// inner) (element order of g's Layout). Input element i receives g at o = i + lo, plus:
//   reflect:   o = lo - i when 1 <= i <= lo;  o = lo + 2 (n - 1) - i when n - 1 - hi <= i <= n - 2
//   replicate: every o < lo when i == 0;  every o >= lo + n when i == n - 1
//   circular:  o = i + lo - n when i >= n - lo;  o = i + lo + n when i < hi
#define PAD_BACKWARD_KERNEL(name, T)                                                \
    WB_KERNEL pad_backward_##name(                                                  \
        WB_OUT(Acc<T>::type, out, 0), WB_IN(T, g, 1), WB_ARG(Layout, lg, 2),        \
        WB_ARG(wb_i64, total, 3), WB_ARG(wb_i64, inner, 4), WB_ARG(wb_i64, n, 5),   \
        WB_ARG(wb_i64, lo, 6), WB_ARG(wb_i64, hi, 7), WB_ARG(int, mode, 8) WB_THREAD_ARGS) { \
        typedef Acc<T>::type C;                                                     \
        wb_i64 m = n + lo + hi;                                                     \
        WB_LOOP(e, total) {                                                         \
            wb_i64 j = e % inner, t = e / inner;                                    \
            wb_i64 i = t % n, outer = t / n;                                        \
            wb_i64 base = outer * m * inner + j;                                    \
            C acc = wb_load(g[wb_offset(lg, base + (i + lo) * inner)]);             \
            if (mode == WB_PAD_REFLECT) {                                           \
                if (i >= 1 && i <= lo) acc += wb_load(g[wb_offset(lg, base + (lo - i) * inner)]); \
                if (i >= n - 1 - hi && i <= n - 2)                                  \
                    acc += wb_load(g[wb_offset(lg, base + (lo + 2 * (n - 1) - i) * inner)]); \
            } else if (mode == WB_PAD_REPLICATE) {                                  \
                if (i == 0)                                                         \
                    for (wb_i64 o = 0; o < lo; ++o)                                 \
                        acc += wb_load(g[wb_offset(lg, base + o * inner)]);         \
                if (i == n - 1)                                                     \
                    for (wb_i64 o = lo + n; o < m; ++o)                             \
                        acc += wb_load(g[wb_offset(lg, base + o * inner)]);         \
            } else if (mode == WB_PAD_CIRCULAR) {                                   \
                if (i >= n - lo) acc += wb_load(g[wb_offset(lg, base + (i + lo - n) * inner)]); \
                if (i < hi) acc += wb_load(g[wb_offset(lg, base + (i + lo + n) * inner)]); \
            }                                                                       \
            out[e] = acc;                                                           \
        }                                                                           \
    }
WB_FLOAT_DTYPES(PAD_BACKWARD_KERNEL)
