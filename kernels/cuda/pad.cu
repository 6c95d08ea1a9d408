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
#include "common.cuh"

#define WB_PAD_CONSTANT 0
#define WB_PAD_REFLECT 1
#define WB_PAD_REPLICATE 2
#define WB_PAD_CIRCULAR 3

struct PadGeom {
    long long lo[WB_MAX_DIMS];   // pad before each dim (negative: crop, constant mode only)
    long long out[WB_MAX_DIMS];  // output size of each dim: n + lo + hi
};

// The source coordinate of output coordinate o along a dim of size n, or -1 for `value`.
__device__ __forceinline__ long long pad_source(long long o, long long lo, long long n,
                                                int mode) {
    long long i = o - lo;
    if (i >= 0 && i < n) return i;
    switch (mode) {
    case WB_PAD_REFLECT: return i < 0 ? -i : 2 * (n - 1) - i;
    case WB_PAD_REPLICATE: return i < 0 ? 0 : n - 1;
    case WB_PAD_CIRCULAR: return ((i % n) + n) % n;
    default: return -1;
    }
}

#define PAD_KERNEL(size, U)                                                         \
    extern "C" __global__ void pad_b##size(U* __restrict__ out, const U* __restrict__ x, \
                                           Layout lx, PadGeom p, long long total, int mode, \
                                           U value) {                               \
        const PadGeom& g = p; /* read in place: indexing a copy would use the stack */ \
        WB_LOOP(e, total) {                                                         \
            long long rem = e, off = lx.offset;                                     \
            bool inside = true;                                                     \
            for (int d = lx.ndim - 1; d >= 0; --d) {                                \
                long long q = rem / g.out[d];                                       \
                long long i = pad_source(rem - q * g.out[d], g.lo[d], lx.shape[d], mode); \
                rem = q;                                                            \
                if (i < 0) {                                                        \
                    inside = false;                                                 \
                    break;                                                          \
                }                                                                   \
                off += i * lx.strides[d];                                           \
            }                                                                       \
            out[e] = inside ? x[off] : value;                                       \
        }                                                                           \
    }
PAD_KERNEL(1, unsigned char)
PAD_KERNEL(2, unsigned short)
PAD_KERNEL(4, unsigned int)
PAD_KERNEL(8, unsigned long long)

// The input gradient (outer, n, inner) of a pad along one dim from g (outer, n + lo + hi,
// inner) (element order of g's Layout). Input element i receives g at o = i + lo, plus:
//   reflect:   o = lo - i when 1 <= i <= lo;  o = lo + 2 (n - 1) - i when n - 1 - hi <= i <= n - 2
//   replicate: every o < lo when i == 0;  every o >= lo + n when i == n - 1
//   circular:  o = i + lo - n when i >= n - lo;  o = i + lo + n when i < hi
#define PAD_BACKWARD_KERNEL(name, T)                                                \
    extern "C" __global__ void pad_backward_##name(                                 \
        Acc<T>::type* __restrict__ out, const T* __restrict__ g, Layout lg, long long total, \
        long long inner, long long n, long long lo, long long hi, int mode) {       \
        typedef Acc<T>::type C;                                                     \
        long long m = n + lo + hi;                                                  \
        WB_LOOP(e, total) {                                                         \
            long long j = e % inner, t = e / inner;                                 \
            long long i = t % n, outer = t / n;                                     \
            long long base = outer * m * inner + j;                                 \
            C acc = wb_load(g[wb_offset(lg, base + (i + lo) * inner)]);             \
            if (mode == WB_PAD_REFLECT) {                                           \
                if (i >= 1 && i <= lo) acc += wb_load(g[wb_offset(lg, base + (lo - i) * inner)]); \
                if (i >= n - 1 - hi && i <= n - 2)                                  \
                    acc += wb_load(g[wb_offset(lg, base + (lo + 2 * (n - 1) - i) * inner)]); \
            } else if (mode == WB_PAD_REPLICATE) {                                  \
                if (i == 0)                                                         \
                    for (long long o = 0; o < lo; ++o)                              \
                        acc += wb_load(g[wb_offset(lg, base + o * inner)]);         \
                if (i == n - 1)                                                     \
                    for (long long o = lo + n; o < m; ++o)                          \
                        acc += wb_load(g[wb_offset(lg, base + o * inner)]);         \
            } else if (mode == WB_PAD_CIRCULAR) {                                   \
                if (i >= n - lo) acc += wb_load(g[wb_offset(lg, base + (i + lo - n) * inner)]); \
                if (i < hi) acc += wb_load(g[wb_offset(lg, base + (i + lo + n) * inner)]); \
            }                                                                       \
            out[e] = acc;                                                           \
        }                                                                           \
    }
WB_FLOAT_DTYPES(PAD_BACKWARD_KERNEL)
