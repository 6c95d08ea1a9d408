// Elementwise kernels: unary, binary, scalar, comparison, where, affine, powf, elu, clamp,
// cast, strided copy and fill. Inputs are strided Layouts (broadcast = stride 0); outputs are
// contiguous (copy/fill write through a Layout). Names: <family>_<op>_<dtype>, cast_<src>_<dst>.
#include "common.cuh"

// Float compute type of a dtype: halves and f32 -> float, f64 and integers -> double.
template <typename T> struct FAcc { typedef double type; };
template <> struct FAcc<f16> { typedef float type; };
template <> struct FAcc<bf16> { typedef float type; };
template <> struct FAcc<f32> { typedef float type; };

template <typename C> __device__ __forceinline__ C py_remainder(C a, C b) {
    C r = fmod(a, b);
    if (r != (C)0 && ((r < (C)0) != (b < (C)0))) r += b;
    return r;
}
template <typename C> __device__ __forceinline__ C int_floor_div(C a, C b) {
    if (b == (C)0) return (C)0;
    C q = a / b;
    if ((a % b != (C)0) && ((a < (C)0) != (b < (C)0))) q -= (C)1;
    return q;
}
template <typename C> __device__ __forceinline__ C int_remainder(C a, C b) {
    if (b == (C)0) return (C)0;
    C r = a % b;
    if (r != (C)0 && ((r < (C)0) != (b < (C)0))) r += b;
    return r;
}
template <typename C> __device__ __forceinline__ C int_pow(C a, C b) {
    if (b < (C)0) return a == (C)1 ? (C)1 : (C)0;
    C r = 1;
    while (b > (C)0) {
        if (b & (C)1) r *= a;
        a *= a;
        b >>= 1;
    }
    return r;
}
template <typename C> __device__ __forceinline__ C int_abs(C x) { return x < (C)0 ? (C)(-x) : x; }
template <typename C> __device__ __forceinline__ C int_sign(C x) {
    return (C)((x > (C)0) - (x < (C)0));
}
template <typename C> __device__ __forceinline__ C wb_scalar(double s) { return (C)(long long)s; }
template <> __device__ __forceinline__ float wb_scalar<float>(double s) { return (float)s; }
template <> __device__ __forceinline__ double wb_scalar<double>(double s) { return s; }

// ---- unary ----------------------------------------------------------------------------
#define FLOAT_UNARY(K, name, T)                                                     \
    K(exp, exp(x), name, T) K(log, log(x), name, T) K(sin, sin(x), name, T)         \
    K(cos, cos(x), name, T) K(tan, tan(x), name, T) K(tanh, tanh(x), name, T)       \
    K(abs, fabs(x), name, T) K(neg, -x, name, T) K(recip, (C)1 / x, name, T)        \
    K(sqr, x * x, name, T) K(sqrt, sqrt(x), name, T) K(rsqrt, (C)1 / sqrt(x), name, T) \
    K(gelu, (C)0.5 * x * ((C)1 + tanh((C)0.7978845608028654 * (x + (C)0.044715 * x * x * x))), \
      name, T)                                                                      \
    K(gelu_erf, (C)0.5 * x * ((C)1 + erf(x * (C)0.7071067811865476)), name, T)     \
    K(erf, erf(x), name, T) K(relu, (x != x || x > (C)0) ? x : (C)0, name, T)      \
    K(silu, x / ((C)1 + exp(-x)), name, T) K(sigmoid, (C)1 / ((C)1 + exp(-x)), name, T) \
    K(ceil, ceil(x), name, T) K(floor, floor(x), name, T) K(round, rint(x), name, T) \
    K(sign, x != x ? x : (C)((x > (C)0) - (x < (C)0)), name, T)                    \
    K(log1p, log1p(x), name, T) K(expm1, expm1(x), name, T) K(asin, asin(x), name, T) \
    K(acos, acos(x), name, T) K(atan, atan(x), name, T) K(sinh, sinh(x), name, T)   \
    K(cosh, cosh(x), name, T)

#define INT_UNARY(K, name, T)                                                       \
    K(abs, int_abs(x), name, T) K(neg, (C)(-x), name, T) K(sqr, (C)(x * x), name, T) \
    K(sign, int_sign(x), name, T) K(relu, x > (C)0 ? x : (C)0, name, T)            \
    K(ceil, x, name, T) K(floor, x, name, T) K(round, x, name, T)

#define UNARY_KERNEL(op, expr, name, T)                                             \
    extern "C" __global__ void unary_##op##_##name(T* __restrict__ out,             \
                                                   const T* __restrict__ a, long long n, \
                                                   Layout la) {                      \
        typedef Acc<T>::type C;                                                     \
        WB_LOOP(i, n) {                                                             \
            C x = wb_load(a[wb_offset(la, i)]);                                     \
            out[i] = Store<T>::from(expr);                                          \
        }                                                                           \
    }

#define BOOL_UNARY_KERNEL(op, expr, name, T)                                        \
    extern "C" __global__ void unary_##op##_##name(wb_bool* __restrict__ out,       \
                                                   const T* __restrict__ a, long long n, \
                                                   Layout la) {                      \
        typedef Acc<T>::type C;                                                     \
        WB_LOOP(i, n) {                                                             \
            C x = wb_load(a[wb_offset(la, i)]);                                     \
            out[i] = (wb_bool)(expr);                                               \
        }                                                                           \
    }

#define INST_FLOAT_UNARY(name, T)                                                   \
    FLOAT_UNARY(UNARY_KERNEL, name, T)                                              \
    BOOL_UNARY_KERNEL(isnan, x != x, name, T)                                       \
    BOOL_UNARY_KERNEL(isinf, isinf(x), name, T)
#define INST_INT_UNARY(name, T)                                                     \
    INT_UNARY(UNARY_KERNEL, name, T)                                                \
    BOOL_UNARY_KERNEL(isnan, false, name, T)                                        \
    BOOL_UNARY_KERNEL(isinf, false, name, T)
#define INST_LOGICAL_NOT(name, T) BOOL_UNARY_KERNEL(logical_not, x == (C)0, name, T)

WB_FLOAT_DTYPES(INST_FLOAT_UNARY)
WB_INT_DTYPES(INST_INT_UNARY)
WB_ALL_DTYPES(INST_LOGICAL_NOT)

// ---- binary (operands broadcast to the output's shape through their layouts) -----------
#define FLOAT_BINARY(K, name, T)                                                    \
    K(add, a + b, name, T) K(sub, a - b, name, T) K(mul, a * b, name, T)            \
    K(div, a / b, name, T) K(maximum, (a != a || a > b) ? a : b, name, T)           \
    K(minimum, (a != a || a < b) ? a : b, name, T) K(pow, pow(a, b), name, T)       \
    K(floor_div, floor(a / b), name, T) K(remainder, py_remainder(a, b), name, T)   \
    K(atan2, atan2(a, b), name, T)

#define INT_BINARY(K, name, T)                                                      \
    K(add, a + b, name, T) K(sub, a - b, name, T) K(mul, a * b, name, T)            \
    K(maximum, a > b ? a : b, name, T) K(minimum, a < b ? a : b, name, T)           \
    K(pow, int_pow(a, b), name, T) K(floor_div, int_floor_div(a, b), name, T)       \
    K(remainder, int_remainder(a, b), name, T)

#define LOGICAL_BINARY(K, name, T)                                                  \
    K(logical_and, (a != (C)0) && (b != (C)0), name, T)                             \
    K(logical_or, (a != (C)0) || (b != (C)0), name, T)                              \
    K(logical_xor, (a != (C)0) != (b != (C)0), name, T)

// Binary kernels store their result as O: T for arithmetic, wb_bool for the logical ops.
#define BINARY_KERNEL_TO(op, expr, name, T, O)                                      \
    extern "C" __global__ void binary_##op##_##name(                                \
        O* __restrict__ out, const T* __restrict__ pa, const T* __restrict__ pb,    \
        long long n, Layout la, Layout lb) {                                        \
        typedef Acc<T>::type C;                                                     \
        WB_LOOP(i, n) {                                                             \
            C a = wb_load(pa[wb_offset(la, i)]);                                    \
            C b = wb_load(pb[wb_offset(lb, i)]);                                    \
            out[i] = Store<O>::from(expr);                                          \
        }                                                                           \
    }
#define BINARY_KERNEL(op, expr, name, T) BINARY_KERNEL_TO(op, expr, name, T, T)
#define BOOL_BINARY_KERNEL(op, expr, name, T) BINARY_KERNEL_TO(op, expr, name, T, wb_bool)

// x op s (or s op x when reverse); s is a double converted to the compute type.
#define SCALAR_KERNEL_TO(op, expr, name, T, O)                                      \
    extern "C" __global__ void bscalar_##op##_##name(                               \
        O* __restrict__ out, const T* __restrict__ px, long long n, Layout lx, double s, \
        int reverse) {                                                              \
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
    FLOAT_BINARY(BINARY_KERNEL, name, T) FLOAT_BINARY(SCALAR_KERNEL, name, T)
#define INST_INT_BINARY(name, T)                                                    \
    INT_BINARY(BINARY_KERNEL, name, T) INT_BINARY(SCALAR_KERNEL, name, T)
#define INST_LOGICAL_BINARY(name, T)                                                \
    LOGICAL_BINARY(BOOL_BINARY_KERNEL, name, T) LOGICAL_BINARY(BOOL_SCALAR_KERNEL, name, T)

WB_FLOAT_DTYPES(INST_FLOAT_BINARY)
WB_INT_DTYPES(INST_INT_BINARY)
WB_ALL_DTYPES(INST_LOGICAL_BINARY)

// ---- comparisons (bool out); scalars compare in the float compute type -------------------
#define CMP_OPS(K, name, T)                                                         \
    K(eq, a == b, name, T) K(ne, a != b, name, T) K(lt, a < b, name, T)             \
    K(le, a <= b, name, T) K(gt, a > b, name, T) K(ge, a >= b, name, T)

#define CMP_KERNEL(op, expr, name, T)                                               \
    extern "C" __global__ void cmp_##op##_##name(                                   \
        wb_bool* __restrict__ out, const T* __restrict__ pa, const T* __restrict__ pb, \
        long long n, Layout la, Layout lb) {                                        \
        WB_LOOP(i, n) {                                                             \
            Acc<T>::type a = wb_load(pa[wb_offset(la, i)]);                         \
            Acc<T>::type b = wb_load(pb[wb_offset(lb, i)]);                         \
            out[i] = (wb_bool)(expr);                                               \
        }                                                                           \
    }
#define CMPS_KERNEL(op, expr, name, T)                                              \
    extern "C" __global__ void cmps_##op##_##name(wb_bool* __restrict__ out,        \
                                                  const T* __restrict__ pa, long long n, \
                                                  Layout la, double s) {             \
        typedef FAcc<T>::type C;                                                    \
        C b = (C)s;                                                                 \
        WB_LOOP(i, n) {                                                             \
            C a = (C)wb_load(pa[wb_offset(la, i)]);                                 \
            out[i] = (wb_bool)(expr);                                               \
        }                                                                           \
    }
#define INST_CMP(name, T) CMP_OPS(CMP_KERNEL, name, T) CMP_OPS(CMPS_KERNEL, name, T)
WB_ALL_DTYPES(INST_CMP)

// ---- where, affine, powf, elu, clamp -------------------------------------------------------
#define WHERE_KERNEL(name, T)                                                       \
    extern "C" __global__ void where_##name(                                        \
        T* __restrict__ out, const wb_bool* __restrict__ c, const T* __restrict__ a, \
        const T* __restrict__ b, long long n, Layout lc, Layout la, Layout lb) {    \
        WB_LOOP(i, n) {                                                             \
            out[i] = c[wb_offset(lc, i)] ? a[wb_offset(la, i)] : b[wb_offset(lb, i)]; \
        }                                                                           \
    }
WB_ALL_DTYPES(WHERE_KERNEL)

#define AFFINE_KERNEL(name, T)                                                      \
    extern "C" __global__ void affine_##name(T* __restrict__ out, const T* __restrict__ a, \
                                             long long n, Layout la, double mul, double add) { \
        typedef FAcc<T>::type C;                                                    \
        C m = (C)mul, d = (C)add;                                                   \
        WB_LOOP(i, n) { out[i] = Store<T>::from((C)wb_load(a[wb_offset(la, i)]) * m + d); } \
    }
WB_NUM_DTYPES(AFFINE_KERNEL)

#define CLAMP_KERNEL(name, T)                                                       \
    extern "C" __global__ void clamp_##name(T* __restrict__ out, const T* __restrict__ a, \
                                            long long n, Layout la, double lo, double hi, \
                                            int has_lo, int has_hi) {                \
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
    extern "C" __global__ void powf_##name(T* __restrict__ out, const T* __restrict__ a, \
                                           long long n, Layout la, double e) {       \
        typedef Acc<T>::type C;                                                     \
        WB_LOOP(i, n) { out[i] = Store<T>::from(pow(wb_load(a[wb_offset(la, i)]), (C)e)); } \
    }                                                                               \
    extern "C" __global__ void elu_##name(T* __restrict__ out, const T* __restrict__ a, \
                                          long long n, Layout la, double alpha) {    \
        typedef Acc<T>::type C;                                                     \
        WB_LOOP(i, n) {                                                             \
            C x = wb_load(a[wb_offset(la, i)]);                                     \
            out[i] = Store<T>::from(x > (C)0 ? x : (C)alpha * expm1(x));            \
        }                                                                           \
    }
WB_FLOAT_DTYPES(FLOAT_PARAM_KERNELS)

// ---- casts: cast_<src>_<dst> ----------------------------------------------------------------
#define CAST_KERNEL(sname, S, dname, D)                                             \
    extern "C" __global__ void cast_##sname##_##dname(D* __restrict__ out,          \
                                                      const S* __restrict__ a, long long n, \
                                                      Layout la) {                   \
        WB_LOOP(i, n) { out[i] = Store<D>::from(wb_load(a[wb_offset(la, i)])); }    \
    }
#define CAST_TO_BOOL(sname, S)                                                      \
    extern "C" __global__ void cast_##sname##_bool(wb_bool* __restrict__ out,       \
                                                   const S* __restrict__ a, long long n, \
                                                   Layout la) {                      \
        WB_LOOP(i, n) { out[i] = (wb_bool)(wb_load(a[wb_offset(la, i)]) != 0); }     \
    }
#define CAST_FROM(sname, S)                                                         \
    CAST_TO_BOOL(sname, S)                                                          \
    CAST_KERNEL(sname, S, u8, u8) CAST_KERNEL(sname, S, u32, u32)                   \
    CAST_KERNEL(sname, S, i16, i16) CAST_KERNEL(sname, S, i32, i32)                 \
    CAST_KERNEL(sname, S, i64, i64) CAST_KERNEL(sname, S, f16, f16)                 \
    CAST_KERNEL(sname, S, bf16, bf16) CAST_KERNEL(sname, S, f32, f32)               \
    CAST_KERNEL(sname, S, f64, f64)
WB_ALL_DTYPES(CAST_FROM)

// ---- strided copy and fill, by element size -------------------------------------------------
#define COPY_KERNELS(bytes, T)                                                      \
    extern "C" __global__ void copy_b##bytes(T* __restrict__ dst, Layout ld,        \
                                             const T* __restrict__ src, Layout ls, long long n) { \
        WB_LOOP(i, n) { dst[wb_offset(ld, i)] = src[wb_offset(ls, i)]; }            \
    }                                                                               \
    extern "C" __global__ void fill_b##bytes(T* __restrict__ dst, Layout ld, long long n, \
                                             T value) {                              \
        WB_LOOP(i, n) { dst[wb_offset(ld, i)] = value; }                            \
    }
COPY_KERNELS(1, unsigned char)
COPY_KERNELS(2, unsigned short)
COPY_KERNELS(4, unsigned int)
COPY_KERNELS(8, unsigned long long)
