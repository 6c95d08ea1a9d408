// Elementwise kernels: unary, binary, scalar, comparison, where, affine, powf, elu, clamp,
// cast, strided copy and fill. Inputs are strided Layouts (broadcast = stride 0); outputs are
// contiguous (copy/fill write through a Layout). Names: <family>_<op>_<dtype>, cast_<src>_<dst>.
// Written in the portable dialect (common.h); the op lists come from optable.h.

// Float compute type of a dtype: halves and f32 -> float, f64 and integers -> wb_wide.
template <typename T> struct FAcc { typedef wb_wide type; };
template <> struct FAcc<f16> { typedef float type; };
template <> struct FAcc<bf16> { typedef float type; };
template <> struct FAcc<f32> { typedef float type; };

template <typename C> WB_FN C py_remainder(C a, C b) {
    C r = fmod(a, b);
    if (r != (C)0 && ((r < (C)0) != (b < (C)0))) r += b;
    return r;
}
template <typename C> WB_FN C int_floor_div(C a, C b) {
    if (b == (C)0) return (C)0;
    C q = a / b;
    if ((a % b != (C)0) && ((a < (C)0) != (b < (C)0))) q -= (C)1;
    return q;
}
template <typename C> WB_FN C int_remainder(C a, C b) {
    if (b == (C)0) return (C)0;
    C r = a % b;
    if (r != (C)0 && ((r < (C)0) != (b < (C)0))) r += b;
    return r;
}
template <typename C> WB_FN C int_pow(C a, C b) {
    if (b < (C)0) return a == (C)1 ? (C)1 : (C)0;
    C r = 1;
    while (b > (C)0) {
        if (b & (C)1) r *= a;
        a *= a;
        b >>= 1;
    }
    return r;
}
template <typename C> WB_FN C int_abs(C x) { return x < (C)0 ? (C)(-x) : x; }
template <typename C> WB_FN C int_sign(C x) {
    return (C)((x > (C)0) - (x < (C)0));
}
template <typename C> WB_FN C wb_scalar(wb_wide s) { return (C)(wb_i64)s; }
template <> WB_FN float wb_scalar<float>(wb_wide s) { return (float)s; }
WB_IF_F64(template <> WB_FN double wb_scalar<double>(double s) { return s; })

// ---- unary ----------------------------------------------------------------------------
#define UNARY_KERNEL(op, expr, name, T)                                             \
    WB_KERNEL unary_##op##_##name(WB_OUT(T, out, 0), WB_IN(T, a, 1), WB_ARG(wb_i64, n, 2), \
                                  WB_ARG(Layout, la, 3) WB_THREAD_ARGS) {           \
        typedef Acc<T>::type C;                                                     \
        WB_LOOP(i, n) {                                                             \
            C x = wb_load(a[wb_offset(la, i)]);                                     \
            out[i] = Store<T>::from(expr);                                          \
        }                                                                           \
    }

#define BOOL_UNARY_KERNEL(op, expr, name, T)                                        \
    WB_KERNEL unary_##op##_##name(WB_OUT(wb_bool, out, 0), WB_IN(T, a, 1),          \
                                  WB_ARG(wb_i64, n, 2), WB_ARG(Layout, la, 3) WB_THREAD_ARGS) { \
        typedef Acc<T>::type C;                                                     \
        WB_LOOP(i, n) {                                                             \
            C x = wb_load(a[wb_offset(la, i)]);                                     \
            out[i] = (wb_bool)(expr);                                               \
        }                                                                           \
    }

#define INST_FLOAT_UNARY(name, T)                                                   \
    WB_FLOAT_UNARY(UNARY_KERNEL, name, T) WB_FLOAT_BOOL_UNARY(BOOL_UNARY_KERNEL, name, T)
#define INST_INT_UNARY(name, T)                                                     \
    WB_INT_UNARY(UNARY_KERNEL, name, T) WB_INT_BOOL_UNARY(BOOL_UNARY_KERNEL, name, T)
#define INST_LOGICAL_NOT(name, T) WB_ANY_BOOL_UNARY(BOOL_UNARY_KERNEL, name, T)

WB_FLOAT_DTYPES(INST_FLOAT_UNARY)
WB_INT_DTYPES(INST_INT_UNARY)
WB_ALL_DTYPES(INST_LOGICAL_NOT)

// ---- binary (operands broadcast to the output's shape through their layouts) -----------
// Binary kernels store their result as O: T for arithmetic, wb_bool for the logical ops.
#define BINARY_KERNEL_TO(op, expr, name, T, O)                                      \
    WB_KERNEL binary_##op##_##name(WB_OUT(O, out, 0), WB_IN(T, pa, 1), WB_IN(T, pb, 2), \
                                   WB_ARG(wb_i64, n, 3), WB_ARG(Layout, la, 4),     \
                                   WB_ARG(Layout, lb, 5) WB_THREAD_ARGS) {          \
        typedef Acc<T>::type C;                                                     \
        WB_LOOP(i, n) {                                                             \
            C a = wb_load(pa[wb_offset(la, i)]);                                    \
            C b = wb_load(pb[wb_offset(lb, i)]);                                    \
            out[i] = Store<O>::from(expr);                                          \
        }                                                                           \
    }
#define BINARY_KERNEL(op, expr, name, T) BINARY_KERNEL_TO(op, expr, name, T, T)
#define BOOL_BINARY_KERNEL(op, expr, name, T) BINARY_KERNEL_TO(op, expr, name, T, wb_bool)

// x op s (or s op x when reverse); s arrives as wb_wide, converted to the compute type.
#define SCALAR_KERNEL_TO(op, expr, name, T, O)                                      \
    WB_KERNEL bscalar_##op##_##name(WB_OUT(O, out, 0), WB_IN(T, px, 1), WB_ARG(wb_i64, n, 2), \
                                    WB_ARG(Layout, lx, 3), WB_ARG(wb_wide, s, 4),   \
                                    WB_ARG(int, reverse, 5) WB_THREAD_ARGS) {       \
        typedef Acc<T>::type C;                                                     \
        C sv = wb_scalar<C>(s);                                                     \
        WB_LOOP(i, n) {                                                             \
            C x = wb_load(px[wb_offset(lx, i)]);                                    \
            C a = reverse ? sv : x;                                                 \
            C b = reverse ? x : sv;                                                 \
            out[i] = Store<O>::from(expr);                                          \
        }                                                                           \
    }
#define SCALAR_KERNEL(op, expr, name, T) SCALAR_KERNEL_TO(op, expr, name, T, T)
#define BOOL_SCALAR_KERNEL(op, expr, name, T) SCALAR_KERNEL_TO(op, expr, name, T, wb_bool)

#define INST_FLOAT_BINARY(name, T)                                                  \
    WB_FLOAT_BINARY(BINARY_KERNEL, name, T) WB_FLOAT_BINARY(SCALAR_KERNEL, name, T)
#define INST_INT_BINARY(name, T)                                                    \
    WB_INT_BINARY(BINARY_KERNEL, name, T) WB_INT_BINARY(SCALAR_KERNEL, name, T)
#define INST_LOGICAL_BINARY(name, T)                                                \
    WB_LOGICAL_BINARY(BOOL_BINARY_KERNEL, name, T) WB_LOGICAL_BINARY(BOOL_SCALAR_KERNEL, name, T)

WB_FLOAT_DTYPES(INST_FLOAT_BINARY)
WB_INT_DTYPES(INST_INT_BINARY)
WB_ALL_DTYPES(INST_LOGICAL_BINARY)

// ---- comparisons (bool out); scalars compare in the float compute type -------------------
#define CMP_KERNEL(op, expr, name, T)                                               \
    WB_KERNEL cmp_##op##_##name(WB_OUT(wb_bool, out, 0), WB_IN(T, pa, 1), WB_IN(T, pb, 2), \
                                WB_ARG(wb_i64, n, 3), WB_ARG(Layout, la, 4),        \
                                WB_ARG(Layout, lb, 5) WB_THREAD_ARGS) {             \
        WB_LOOP(i, n) {                                                             \
            Acc<T>::type a = wb_load(pa[wb_offset(la, i)]);                         \
            Acc<T>::type b = wb_load(pb[wb_offset(lb, i)]);                         \
            out[i] = (wb_bool)(expr);                                               \
        }                                                                           \
    }
#define CMPS_KERNEL(op, expr, name, T)                                              \
    WB_KERNEL cmps_##op##_##name(WB_OUT(wb_bool, out, 0), WB_IN(T, pa, 1),          \
                                 WB_ARG(wb_i64, n, 2), WB_ARG(Layout, la, 3),       \
                                 WB_ARG(wb_wide, s, 4) WB_THREAD_ARGS) {            \
        typedef FAcc<T>::type C;                                                    \
        C b = (C)s;                                                                 \
        WB_LOOP(i, n) {                                                             \
            C a = (C)wb_load(pa[wb_offset(la, i)]);                                 \
            out[i] = (wb_bool)(expr);                                               \
        }                                                                           \
    }
#define INST_CMP(name, T) WB_CMP_OPS(CMP_KERNEL, name, T) WB_CMP_OPS(CMPS_KERNEL, name, T)
WB_ALL_DTYPES(INST_CMP)

// ---- where, affine, powf, elu, clamp -------------------------------------------------------
#define WHERE_KERNEL(name, T)                                                       \
    WB_KERNEL where_##name(WB_OUT(T, out, 0), WB_IN(wb_bool, c, 1), WB_IN(T, a, 2),  \
                           WB_IN(T, b, 3), WB_ARG(wb_i64, n, 4), WB_ARG(Layout, lc, 5), \
                           WB_ARG(Layout, la, 6), WB_ARG(Layout, lb, 7) WB_THREAD_ARGS) { \
        WB_LOOP(i, n) {                                                             \
            out[i] = c[wb_offset(lc, i)] ? a[wb_offset(la, i)] : b[wb_offset(lb, i)]; \
        }                                                                           \
    }
WB_ALL_DTYPES(WHERE_KERNEL)

#define AFFINE_KERNEL(name, T)                                                      \
    WB_KERNEL affine_##name(WB_OUT(T, out, 0), WB_IN(T, a, 1), WB_ARG(wb_i64, n, 2), \
                            WB_ARG(Layout, la, 3), WB_ARG(wb_wide, mul, 4),          \
                            WB_ARG(wb_wide, add, 5) WB_THREAD_ARGS) {                \
        typedef FAcc<T>::type C;                                                    \
        C m = (C)mul, d = (C)add;                                                   \
        WB_LOOP(i, n) { out[i] = Store<T>::from((C)wb_load(a[wb_offset(la, i)]) * m + d); } \
    }
WB_NUM_DTYPES(AFFINE_KERNEL)

#define CLAMP_KERNEL(name, T)                                                       \
    WB_KERNEL clamp_##name(WB_OUT(T, out, 0), WB_IN(T, a, 1), WB_ARG(wb_i64, n, 2),  \
                           WB_ARG(Layout, la, 3), WB_ARG(wb_wide, lo, 4),            \
                           WB_ARG(wb_wide, hi, 5), WB_ARG(int, has_lo, 6),           \
                           WB_ARG(int, has_hi, 7) WB_THREAD_ARGS) {                  \
        typedef FAcc<T>::type C;                                                    \
        WB_LOOP(i, n) {                                                             \
            T v = a[wb_offset(la, i)];                                              \
            C x = (C)wb_load(v);                                                    \
            if (has_lo && x < (C)lo) v = Store<T>::from(lo);                        \
            else if (has_hi && x > (C)hi) v = Store<T>::from(hi);                   \
            out[i] = v;                                                             \
        }                                                                           \
    }
WB_NUM_DTYPES(CLAMP_KERNEL)

#define FLOAT_PARAM_KERNELS(name, T)                                                \
    WB_KERNEL powf_##name(WB_OUT(T, out, 0), WB_IN(T, a, 1), WB_ARG(wb_i64, n, 2),   \
                          WB_ARG(Layout, la, 3), WB_ARG(wb_wide, e, 4) WB_THREAD_ARGS) { \
        typedef Acc<T>::type C;                                                     \
        WB_LOOP(i, n) { out[i] = Store<T>::from(pow(wb_load(a[wb_offset(la, i)]), (C)e)); } \
    }                                                                               \
    WB_KERNEL elu_##name(WB_OUT(T, out, 0), WB_IN(T, a, 1), WB_ARG(wb_i64, n, 2),    \
                         WB_ARG(Layout, la, 3), WB_ARG(wb_wide, alpha, 4) WB_THREAD_ARGS) { \
        typedef Acc<T>::type C;                                                     \
        WB_LOOP(i, n) {                                                             \
            C x = wb_load(a[wb_offset(la, i)]);                                     \
            out[i] = Store<T>::from(x > (C)0 ? x : (C)alpha * expm1(x));            \
        }                                                                           \
    }
WB_FLOAT_DTYPES(FLOAT_PARAM_KERNELS)

// ---- casts: cast_<src>_<dst> ----------------------------------------------------------------
#define CAST_KERNEL(sname, S, dname, D)                                             \
    WB_KERNEL cast_##sname##_##dname(WB_OUT(D, out, 0), WB_IN(S, a, 1),             \
                                     WB_ARG(wb_i64, n, 2), WB_ARG(Layout, la, 3) WB_THREAD_ARGS) { \
        WB_LOOP(i, n) { out[i] = Store<D>::from(wb_load(a[wb_offset(la, i)])); }    \
    }
#define CAST_TO_BOOL(sname, S)                                                      \
    WB_KERNEL cast_##sname##_bool(WB_OUT(wb_bool, out, 0), WB_IN(S, a, 1),          \
                                  WB_ARG(wb_i64, n, 2), WB_ARG(Layout, la, 3) WB_THREAD_ARGS) { \
        WB_LOOP(i, n) { out[i] = (wb_bool)(wb_load(a[wb_offset(la, i)]) != 0); }     \
    }
#define CAST_FROM(sname, S)                                                         \
    CAST_TO_BOOL(sname, S)                                                          \
    CAST_KERNEL(sname, S, u8, u8) CAST_KERNEL(sname, S, u32, u32)                   \
    CAST_KERNEL(sname, S, i8, i8) CAST_KERNEL(sname, S, i16, i16)                   \
    CAST_KERNEL(sname, S, i32, i32)                                                 \
    CAST_KERNEL(sname, S, i64, i64) CAST_KERNEL(sname, S, f16, f16)                 \
    CAST_KERNEL(sname, S, bf16, bf16) CAST_KERNEL(sname, S, f32, f32)               \
    WB_IF_F64(CAST_KERNEL(sname, S, f64, f64))
WB_ALL_DTYPES(CAST_FROM)

// ---- strided copy and fill, by element size -------------------------------------------------
#define COPY_KERNELS(bytes, T)                                                      \
    WB_KERNEL copy_b##bytes(WB_OUT(T, dst, 0), WB_ARG(Layout, ld, 1), WB_IN(T, src, 2), \
                            WB_ARG(Layout, ls, 3), WB_ARG(wb_i64, n, 4) WB_THREAD_ARGS) { \
        WB_LOOP(i, n) { dst[wb_offset(ld, i)] = src[wb_offset(ls, i)]; }            \
    }                                                                               \
    WB_KERNEL fill_b##bytes(WB_OUT(T, dst, 0), WB_ARG(Layout, ld, 1), WB_ARG(wb_i64, n, 2), \
                            WB_ARG(T, value, 3) WB_THREAD_ARGS) {                    \
        WB_LOOP(i, n) { dst[wb_offset(ld, i)] = value; }                            \
    }
COPY_KERNELS(1, unsigned char)
COPY_KERNELS(2, unsigned short)
COPY_KERNELS(4, unsigned int)
COPY_KERNELS(8, wb_u64)
