// Generated from backends/optable.py by `python -m workbench.backends.optable`:
// do not edit. Each list is K(op, expr, name, T) per op; the kernel sources define K.
#pragma once

#define WB_FLOAT_UNARY(K, name, T) \
    K(exp, exp(x), name, T) \
    K(log, log(x), name, T) \
    K(sin, sin(x), name, T) \
    K(cos, cos(x), name, T) \
    K(tan, tan(x), name, T) \
    K(tanh, tanh(x), name, T) \
    K(abs, fabs(x), name, T) \
    K(neg, -x, name, T) \
    K(recip, (C)1 / x, name, T) \
    K(sqr, x * x, name, T) \
    K(sqrt, sqrt(x), name, T) \
    K(rsqrt, (C)1 / sqrt(x), name, T) \
    K(gelu, (x < (C)0 && isinf(x)) ? -(C)0 : (C)0.5 * x * ((C)1 + tanh((C)0.7978845608028654 * (x + (C)0.044715 * x * x * x))), name, T) \
    K(gelu_erf, (x < (C)0 && isinf(x)) ? -(C)0 : (C)0.5 * x * ((C)1 + erf(x * (C)0.7071067811865476)), name, T) \
    K(erf, erf(x), name, T) \
    K(relu, (x != x || x > (C)0) ? x : (C)0, name, T) \
    K(silu, (x < (C)0 && isinf(x)) ? -(C)0 : x / ((C)1 + exp(-x)), name, T) \
    K(sigmoid, (C)1 / ((C)1 + exp(-x)), name, T) \
    K(ceil, ceil(x), name, T) \
    K(floor, floor(x), name, T) \
    K(round, rint(x), name, T) \
    K(sign, x != x ? x : (C)((x > (C)0) - (x < (C)0)), name, T) \
    K(log1p, log1p(x), name, T) \
    K(expm1, expm1(x), name, T) \
    K(asin, asin(x), name, T) \
    K(acos, acos(x), name, T) \
    K(atan, atan(x), name, T) \
    K(sinh, sinh(x), name, T) \
    K(cosh, cosh(x), name, T) \
    /* end */

#define WB_FLOAT_BOOL_UNARY(K, name, T) \
    K(isnan, x != x, name, T) \
    K(isinf, isinf(x), name, T) \
    /* end */

#define WB_INT_UNARY(K, name, T) \
    K(abs, int_abs(x), name, T) \
    K(neg, (C)(-x), name, T) \
    K(sqr, (C)(x * x), name, T) \
    K(relu, x > (C)0 ? x : (C)0, name, T) \
    K(ceil, x, name, T) \
    K(floor, x, name, T) \
    K(round, x, name, T) \
    K(sign, int_sign(x), name, T) \
    K(bitwise_not, (C)(~x), name, T) \
    /* end */

#define WB_INT_BOOL_UNARY(K, name, T) \
    K(isnan, false, name, T) \
    K(isinf, false, name, T) \
    /* end */

#define WB_ANY_BOOL_UNARY(K, name, T) \
    K(logical_not, x == (C)0, name, T) \
    /* end */

#define WB_FLOAT_BINARY(K, name, T) \
    K(add, a + b, name, T) \
    K(sub, a - b, name, T) \
    K(mul, a * b, name, T) \
    K(div, a / b, name, T) \
    K(maximum, (a != a || a > b) ? a : b, name, T) \
    K(minimum, (a != a || a < b) ? a : b, name, T) \
    K(pow, pow(a, b), name, T) \
    K(floor_div, floor(a / b), name, T) \
    K(remainder, py_remainder(a, b), name, T) \
    K(atan2, atan2(a, b), name, T) \
    K(fmod, fmod(a, b), name, T) \
    K(copysign, copysign(a, b), name, T) \
    /* end */

#define WB_INT_BINARY(K, name, T) \
    K(add, a + b, name, T) \
    K(sub, a - b, name, T) \
    K(mul, a * b, name, T) \
    K(maximum, a > b ? a : b, name, T) \
    K(minimum, a < b ? a : b, name, T) \
    K(pow, int_pow(a, b), name, T) \
    K(floor_div, int_floor_div(a, b), name, T) \
    K(remainder, int_remainder(a, b), name, T) \
    K(fmod, b == (C)0 ? (C)0 : (C)(a % b), name, T) \
    K(bitwise_and, (C)(a & b), name, T) \
    K(bitwise_or, (C)(a | b), name, T) \
    K(bitwise_xor, (C)(a ^ b), name, T) \
    K(left_shift, (b < (C)0 || b >= (C)(sizeof(C) * 8)) ? (C)0 : (C)(a << b), name, T) \
    K(right_shift, (b < (C)0 || b >= (C)(sizeof(C) * 8)) ? (C)(a < (C)0 ? -1 : 0) : (C)(a >> b), name, T) \
    /* end */

#define WB_LOGICAL_BINARY(K, name, T) \
    K(logical_and, (a != (C)0) && (b != (C)0), name, T) \
    K(logical_or, (a != (C)0) || (b != (C)0), name, T) \
    K(logical_xor, (a != (C)0) != (b != (C)0), name, T) \
    /* end */

#define WB_CMP_OPS(K, name, T) \
    K(eq, a == b, name, T) \
    K(ne, a != b, name, T) \
    K(lt, a < b, name, T) \
    K(le, a <= b, name, T) \
    K(gt, a > b, name, T) \
    K(ge, a >= b, name, T) \
    /* end */

#define WB_WIDENING_REDUCE(K, name, T) \
    K(sum, a + b, (A)0, name, T) \
    K(prod, a * b, (A)1, name, T) \
    /* end */

#define WB_VALUE_REDUCE(K, name, T) \
    K(max, (a != a || a > b) ? a : b, wb_lowest<A>(), name, T) \
    K(min, (a != a || a < b) ? a : b, wb_highest<A>(), name, T) \
    /* end */

#define WB_BOOL_REDUCE(K, name, T) \
    K(any, (A)((a != (A)0) || (b != (A)0)), (A)0, name, T) \
    K(all, (A)((a != (A)0) && (b != (A)0)), (A)1, name, T) \
    /* end */

#define WB_ARG_REDUCE(K, name, T) \
    K(argmax, a > b, name, T) \
    K(argmin, a < b, name, T) \
    /* end */
