// Block (threadgroup) reductions in the portable dialect, for kernels that give one block to
// each row: every thread folds its share of the row, then the block folds the threads'
// partials with warp (simdgroup) shuffles and one shared slot per warp. The combining ops
// are the op table's reductions (optable.h): wb_reduce_<op>::combine(a, b), ::identity<A>().
// Blocks must be a multiple of 32 threads, at most 1024 (32 warps of 32 lanes).
#pragma once

// The identities of max and min: the lowest and highest value of the accumulator type.
template <typename A> WB_FN A wb_lowest();
template <typename A> WB_FN A wb_highest();
#define WB_LIMITS(T, lo, hi)                                                        \
    template <> WB_FN T wb_lowest<T>() { return lo; }                               \
    template <> WB_FN T wb_highest<T>() { return hi; }
WB_LIMITS(float, -INFINITY, INFINITY)
WB_IF_F64(WB_LIMITS(double, -(double)INFINITY, (double)INFINITY))
WB_LIMITS(wb_bool, 0, 255)  // also u8 (the same C type)
WB_LIMITS(u32, 0u, 0xffffffffu)
WB_LIMITS(i8, -128, 127)
WB_LIMITS(i16, -32768, 32767)
WB_LIMITS(i32, -2147483647 - 1, 2147483647)
WB_LIMITS(i64, -9223372036854775807L - 1, 9223372036854775807L)

#define WB_REDUCE_FUNCTOR(op, combine_expr, identity_expr, name, T)                 \
    struct wb_reduce_##op {                                                         \
        template <typename A> WB_FN static A combine(A a, A b) { return combine_expr; } \
        template <typename A> WB_FN static A identity() { return identity_expr; }   \
    };
WB_WIDENING_REDUCE(WB_REDUCE_FUNCTOR, _, _)
WB_VALUE_REDUCE(WB_REDUCE_FUNCTOR, _, _)
WB_BOOL_REDUCE(WB_REDUCE_FUNCTOR, _, _)

// Op over the 32 lanes of a warp: lane 0 ends with the result.
template <typename Op, typename A> WB_FN A wb_warp_reduce(A v) {
    for (int o = 16; o > 0; o >>= 1) v = Op::combine(v, wb_shuffle_down(v, o));
    return v;
}

// Op over every thread's v, returned to all of them; buf holds 32 values.
template <typename Op, typename A>
WB_DEVICE A wb_block_reduce(A v, WB_SHARED_PTR(A) buf WB_THREAD_PARAMS) {
    v = wb_warp_reduce<Op>(v);
    int lane = WB_THREAD & 31, warp = WB_THREAD >> 5;
    if (lane == 0) buf[warp] = v;
    WB_BARRIER();
    if (warp == 0) {
        v = WB_THREAD < (WB_THREADS >> 5) ? buf[lane] : Op::template identity<A>();
        v = wb_warp_reduce<Op>(v);
        if (lane == 0) buf[0] = v;
    }
    WB_BARRIER();
    A r = buf[0];
    WB_BARRIER();  // buf is free again when this returns
    return r;
}
template <typename A> WB_DEVICE A wb_block_sum(A v, WB_SHARED_PTR(A) buf WB_THREAD_PARAMS) {
    return wb_block_reduce<wb_reduce_sum>(v, buf WB_THREAD_PASS);
}
template <typename A> WB_DEVICE A wb_block_max(A v, WB_SHARED_PTR(A) buf WB_THREAD_PARAMS) {
    return wb_block_reduce<wb_reduce_max>(v, buf WB_THREAD_PASS);
}
