// Reductions over the LAST axis of a (M, K) view: the host permutes the reduced dims to the end
// of the input Layout, so row m, column k is element m * K + k of that Layout. One block per
// row (grid-stride over rows, a multiple of 32 threads): each thread folds its columns, then
// block.h folds the threads. The ops and their maths are the op table's (optable.h):
// reduce_<op>_<in dtype>; sum/prod write f16/bf16/f32/f64 as the input, integers and bool as
// i64; max/min keep the dtype; argmax/argmin write i64; any/all write bool.
// Also: cumsum, and the stable sorts (in shared memory, or in global memory for long rows).
// Written in the portable dialect (common.h).

// Sum/prod accumulator: float for halves and f32, double for f64, i64 for integers and bool.
template <typename T> struct SumAcc { typedef i64 type; };
template <> struct SumAcc<f16> { typedef float type; };
template <> struct SumAcc<bf16> { typedef float type; };
template <> struct SumAcc<f32> { typedef float type; };
WB_IF_F64(template <> struct SumAcc<f64> { typedef double type; };)
template <typename T> struct SumOut { typedef i64 type; };
template <> struct SumOut<f16> { typedef f16 type; };
template <> struct SumOut<bf16> { typedef bf16 type; };
template <> struct SumOut<f32> { typedef f32 type; };
WB_IF_F64(template <> struct SumOut<f64> { typedef f64 type; };)
// The value type max/min compare in.
template <typename T> struct CmpAcc { typedef typename Acc<T>::type type; };

// out[row] = the op over row `row`, accumulated in A and written as O.
#define REDUCE_KERNEL(op, O, A, name, T)                                            \
    WB_KERNEL reduce_##op##_##name(WB_OUT(O, out, 0), WB_IN(T, in, 1), WB_ARG(wb_i64, M, 2), \
                                   WB_ARG(wb_i64, K, 3), WB_ARG(Layout, l, 4) WB_THREAD_ARGS) { \
        WB_SHARED A buf[32];                                                        \
        for (wb_i64 row = WB_BLOCK_ID; row < M; row += WB_BLOCKS) {                 \
            A acc = wb_reduce_##op::identity<A>();                                  \
            for (wb_i64 k = WB_THREAD; k < K; k += WB_THREADS)                      \
                acc = wb_reduce_##op::combine(acc, (A)wb_load(in[wb_offset(l, row * K + k)])); \
            acc = wb_block_reduce<wb_reduce_##op>(acc, buf WB_THREAD_PASS);         \
            if (WB_THREAD == 0) out[row] = Store<O>::from(acc);                     \
        }                                                                           \
    }
#define WIDENING_KERNEL(op, combine, identity, name, T)                             \
    REDUCE_KERNEL(op, SumOut<T>::type, SumAcc<T>::type, name, T)
#define VALUE_KERNEL(op, combine, identity, name, T)                                \
    REDUCE_KERNEL(op, T, CmpAcc<T>::type, name, T)
#define BOOL_KERNEL(op, combine, identity, name, T)                                 \
    REDUCE_KERNEL(op, wb_bool, CmpAcc<T>::type, name, T)
#define INST_REDUCE(name, T)                                                        \
    WB_WIDENING_REDUCE(WIDENING_KERNEL, name, T) WB_VALUE_REDUCE(VALUE_KERNEL, name, T) \
    WB_BOOL_REDUCE(BOOL_KERNEL, name, T)
WB_ALL_DTYPES(INST_REDUCE)

// ---- argmax / argmin: the first index of the max (min); a NaN counts as the largest and
// smallest value. wb_arg_<op>::beats(a, b) is the op table's "a beats b".
#define WB_ARG_FUNCTOR(op, beats_expr, name, T)                                     \
    struct wb_arg_##op {                                                            \
        template <typename A> WB_FN static bool beats(A a, A b) { return beats_expr; } \
    };
WB_ARG_REDUCE(WB_ARG_FUNCTOR, _, _)

// Does value w at index wi replace v at vi? (index -1: no value yet)
template <typename Op, typename A> WB_FN bool arg_replaces(A w, wb_i64 wi, A v, wb_i64 vi) {
    if (wi < 0) return false;
    if (vi < 0) return true;
    if (v != v) return w != w && wi < vi;  // a NaN held: only an earlier NaN replaces it
    return w != w || Op::beats(w, v) || (w == v && wi < vi);
}

// A value and its index (i < 0: none yet), folded by arg_fold.
template <typename A> struct ArgBest {
    A v;
    wb_i64 i;
};
template <typename Op, typename A> WB_FN ArgBest<A> arg_fold(ArgBest<A> best, A w, wb_i64 wi) {
    if (arg_replaces<Op>(w, wi, best.v, best.i)) {
        best.v = w;
        best.i = wi;
    }
    return best;
}
template <typename Op, typename A> WB_FN ArgBest<A> arg_warp(ArgBest<A> b) {
    for (int o = 16; o > 0; o >>= 1)
        b = arg_fold<Op>(b, wb_shuffle_down(b.v, o), wb_shuffle_down(b.i, o));
    return b;
}
// The best index over every thread's (v, i) (block.h's scheme, for pairs), to all threads.
template <typename Op, typename A>
WB_DEVICE wb_i64 arg_block(ArgBest<A> b, WB_SHARED_PTR(A) vals,
                           WB_SHARED_PTR(wb_i64) idxs WB_THREAD_PARAMS) {
    b = arg_warp<Op>(b);
    int lane = WB_THREAD & 31, warp = WB_THREAD >> 5;
    if (lane == 0) {
        vals[warp] = b.v;
        idxs[warp] = b.i;
    }
    WB_BARRIER();
    if (warp == 0) {
        b.i = -1;
        if (WB_THREAD < (WB_THREADS >> 5)) {
            b.v = vals[lane];
            b.i = idxs[lane];
        }
        b = arg_warp<Op>(b);
        if (lane == 0) idxs[0] = b.i;
    }
    WB_BARRIER();
    wb_i64 r = idxs[0];
    WB_BARRIER();
    return r;
}

#define ARG_KERNEL(op, beats, name, T)                                              \
    WB_KERNEL reduce_##op##_##name(WB_OUT(i64, out, 0), WB_IN(T, in, 1), WB_ARG(wb_i64, M, 2), \
                                   WB_ARG(wb_i64, K, 3), WB_ARG(Layout, l, 4) WB_THREAD_ARGS) { \
        typedef CmpAcc<T>::type A;                                                  \
        WB_SHARED A vals[32];                                                       \
        WB_SHARED wb_i64 idxs[32];                                                  \
        for (wb_i64 row = WB_BLOCK_ID; row < M; row += WB_BLOCKS) {                 \
            ArgBest<A> b;                                                           \
            b.v = 0;                                                                \
            b.i = -1;                                                               \
            for (wb_i64 k = WB_THREAD; k < K; k += WB_THREADS)                      \
                b = arg_fold<wb_arg_##op>(b, (A)wb_load(in[wb_offset(l, row * K + k)]), k); \
            wb_i64 best = arg_block<wb_arg_##op>(b, vals, idxs WB_THREAD_PASS);     \
            if (WB_THREAD == 0) out[row] = best < 0 ? 0 : best;                     \
        }                                                                           \
    }
#define INST_ARG(name, T) WB_ARG_REDUCE(ARG_KERNEL, name, T)
WB_ALL_DTYPES(INST_ARG)

// ---- cumsum: inclusive scan along the last axis of (M, K); one thread per row (the host
// permutes the scan dim last in both Layouts, the output Layout being the permuted
// contiguous result).
#define CUMSUM_KERNEL(name, T)                                                      \
    WB_KERNEL cumsum_##name(WB_OUT(SumOut<T>::type, out, 0), WB_ARG(Layout, lo, 1), \
                            WB_IN(T, in, 2), WB_ARG(Layout, li, 3), WB_ARG(wb_i64, M, 4), \
                            WB_ARG(wb_i64, K, 5) WB_THREAD_ARGS) {                  \
        typedef SumAcc<T>::type A;                                                  \
        WB_LOOP(row, M) {                                                           \
            A acc = 0;                                                              \
            for (wb_i64 k = 0; k < K; ++k) {                                        \
                acc += (A)wb_load(in[wb_offset(li, row * K + k)]);                  \
                out[wb_offset(lo, row * K + k)] = Store<SumOut<T>::type>::from(acc); \
            }                                                                       \
        }                                                                           \
    }
WB_ALL_DTYPES(CUMSUM_KERNEL)

// ---- sort: stable sort of each row of (M, K) (K <= 1024): a bitonic network in shared
// memory over (value, index) keys, so equal values keep their order; NaN sorts as the largest
// value. Shared memory: P * (8 + sizeof(compute type)) bytes, P = the power of two >= K
// (the host's plan.sort_shared_bytes).
template <typename C> WB_FN bool sort_before(C va, wb_i64 ia, C vb, wb_i64 ib, int desc) {
    if (ia < 0) return false;  // padding goes last
    if (ib < 0) return true;
    bool na = va != va, nb = vb != vb;
    if (na || nb) {
        if (na && nb) return ia < ib;
        return desc ? na : nb;  // NaN first when descending, last when ascending
    }
    if (va != vb) return desc ? va > vb : va < vb;
    return ia < ib;
}

#define SORT_KERNEL(name, T)                                                        \
    WB_KERNEL sort_##name(WB_OUT(T, vals, 0), WB_OUT(i64, idx, 1), WB_ARG(Layout, lo, 2), \
                          WB_IN(T, in, 3), WB_ARG(Layout, li, 4), WB_ARG(wb_i64, M, 5), \
                          WB_ARG(wb_i64, K, 6), WB_ARG(wb_i64, P, 7),               \
                          WB_ARG(int, desc, 8) WB_DYNAMIC_SHARED_ARG(wb_i64, smem)  \
                          WB_THREAD_ARGS) {                                         \
        typedef CmpAcc<T>::type C;                                                  \
        WB_DYNAMIC_SHARED(wb_i64, smem);                                            \
        WB_SHARED_PTR(wb_i64) si = smem;                                            \
        WB_SHARED_PTR(C) sv = (WB_SHARED_PTR(C))(smem + P);                         \
        for (wb_i64 row = WB_BLOCK_ID; row < M; row += WB_BLOCKS) {                 \
            for (wb_i64 i = WB_THREAD; i < P; i += WB_THREADS) {                    \
                if (i < K) {                                                        \
                    sv[i] = (C)wb_load(in[wb_offset(li, row * K + i)]);             \
                    si[i] = i;                                                      \
                } else {                                                            \
                    si[i] = -1;                                                     \
                }                                                                   \
            }                                                                       \
            WB_BARRIER();                                                           \
            for (wb_i64 size = 2; size <= P; size <<= 1) {                          \
                for (wb_i64 stride = size / 2; stride > 0; stride >>= 1) {          \
                    for (wb_i64 i = WB_THREAD; i < P; i += WB_THREADS) {            \
                        wb_i64 j = i ^ stride;                                      \
                        if (j <= i) continue;                                       \
                        bool asc = (i & size) == 0;                                 \
                        bool swap = asc ? sort_before(sv[j], si[j], sv[i], si[i], desc) \
                                        : sort_before(sv[i], si[i], sv[j], si[j], desc); \
                        if (swap) {                                                 \
                            C tv = sv[i];                                           \
                            sv[i] = sv[j];                                          \
                            sv[j] = tv;                                             \
                            wb_i64 ti = si[i];                                      \
                            si[i] = si[j];                                          \
                            si[j] = ti;                                             \
                        }                                                           \
                    }                                                               \
                    WB_BARRIER();                                                   \
                }                                                                   \
            }                                                                       \
            for (wb_i64 i = WB_THREAD; i < K; i += WB_THREADS) {                    \
                wb_i64 o = wb_offset(lo, row * K + i);                              \
                vals[o] = in[wb_offset(li, row * K + si[i])];                       \
                idx[o] = si[i];                                                     \
            }                                                                       \
            WB_BARRIER();                                                           \
        }                                                                           \
    }
WB_ALL_DTYPES(SORT_KERNEL)

// Rows longer than 1024: the same network over an index scratch (M, P) in global memory, one
// launch per (size, stride) step; values are read through the input layout when compared.
WB_KERNEL sort_long_init(WB_OUT(i64, si, 0), WB_ARG(wb_i64, M, 1), WB_ARG(wb_i64, K, 2),
                         WB_ARG(wb_i64, P, 3) WB_THREAD_ARGS) {
    WB_LOOP(t, M * P) {
        wb_i64 i = t % P;
        si[t] = i < K ? i : -1;
    }
}

#define SORT_LONG_KERNELS(name, T)                                                  \
    WB_KERNEL sort_long_step_##name(WB_OUT(i64, si, 0), WB_IN(T, in, 1), WB_ARG(Layout, li, 2), \
                                    WB_ARG(wb_i64, M, 3), WB_ARG(wb_i64, K, 4),     \
                                    WB_ARG(wb_i64, P, 5), WB_ARG(wb_i64, size, 6),  \
                                    WB_ARG(wb_i64, stride, 7),                      \
                                    WB_ARG(int, desc, 8) WB_THREAD_ARGS) {          \
        typedef CmpAcc<T>::type C;                                                  \
        WB_LOOP(t, M * P) {                                                         \
            wb_i64 row = t / P, i = t % P, j = i ^ stride;                          \
            if (j <= i) continue;                                                   \
            wb_i64 a = si[row * P + i], b = si[row * P + j];                        \
            C va = a >= 0 ? (C)wb_load(in[wb_offset(li, row * K + a)]) : (C)0;      \
            C vb = b >= 0 ? (C)wb_load(in[wb_offset(li, row * K + b)]) : (C)0;      \
            bool asc = (i & size) == 0;                                             \
            bool swap = asc ? sort_before(vb, b, va, a, desc) : sort_before(va, a, vb, b, desc); \
            if (swap) {                                                             \
                si[row * P + i] = b;                                                \
                si[row * P + j] = a;                                                \
            }                                                                       \
        }                                                                           \
    }                                                                               \
    WB_KERNEL sort_long_gather_##name(WB_OUT(T, vals, 0), WB_OUT(i64, idx, 1),      \
                                      WB_ARG(Layout, lo, 2), WB_IN(T, in, 3),       \
                                      WB_ARG(Layout, li, 4), WB_IN(i64, si, 5),     \
                                      WB_ARG(wb_i64, M, 6), WB_ARG(wb_i64, K, 7),   \
                                      WB_ARG(wb_i64, P, 8) WB_THREAD_ARGS) {        \
        WB_LOOP(t, M * K) {                                                         \
            wb_i64 row = t / K, s = si[row * P + t % K];                            \
            wb_i64 o = wb_offset(lo, t);                                            \
            vals[o] = in[wb_offset(li, row * K + s)];                               \
            idx[o] = s;                                                             \
        }                                                                           \
    }
WB_ALL_DTYPES(SORT_LONG_KERNELS)
