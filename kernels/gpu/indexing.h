// Index ops along one dim. Index tensors are i64 (the host casts others). With ``wrap``,
// negative indices count from the end. Layouts here are NOT merged by the host (ndim and dims
// are the tensor's own), since the kernels need each coordinate.
//   index_select_<dt>: out (pre, k, post) = x[.., idx[j], ..]
//   gather_<dt>:       out[c] = x[c with c[dim] = idx[c]] (out has idx's shape)
//   scatter_<dt>:      out[c with c[dim] = idx[c]] = src[c] (out is a copy of x made first)
//   scatter_add_<dt>, index_add_<dt>: the same with wb_atomic_add (f16 bf16 f32 f64 i32 i64)
// Written in the portable dialect (common.h).

WB_FN wb_i64 wb_wrap(wb_i64 i, wb_i64 n, int wrap) { return (wrap && i < 0) ? i + n : i; }

// The element at linear index i of a tensor shaped like `shape` but with `size` at `dim`:
// its coordinate along `dim`, and the offset in x of the element with the same coordinates
// except `at` along `dim`.
WB_FN wb_i64 wb_coord(WB_LAYOUT_REF shape, wb_i64 i, int dim, wb_i64 size) {
    for (int d = shape.ndim - 1; d > dim; --d) i /= shape.shape[d];
    return i % size;
}
WB_FN wb_i64 wb_offset_at(WB_LAYOUT_REF x, WB_LAYOUT_REF shape, wb_i64 i, int dim, wb_i64 size,
                          wb_i64 at) {
    wb_i64 off = x.offset;
    for (int d = shape.ndim - 1; d >= 0; --d) {
        wb_i64 s = d == dim ? size : shape.shape[d];
        wb_i64 q = i / s;
        off += (d == dim ? at : i - q * s) * x.strides[d];
        i = q;
    }
    return off;
}

#define INDEX_KERNELS(name, T)                                                      \
    WB_KERNEL index_select_##name(WB_OUT(T, out, 0), WB_IN(T, x, 1), WB_ARG(Layout, lx, 2), \
                                  WB_IN(i64, idx, 3), WB_ARG(Layout, li, 4),        \
                                  WB_ARG(wb_i64, n, 5), WB_ARG(int, dim, 6),        \
                                  WB_ARG(int, wrap, 7) WB_THREAD_ARGS) {            \
        /* out has x's shape with len(idx) at dim; lx.shape[dim] is the source size */ \
        wb_i64 k = li.shape[0];                                                     \
        WB_LOOP(i, n) {                                                             \
            wb_i64 c = wb_coord(lx, i, dim, k);                                     \
            wb_i64 at = wb_wrap(idx[wb_offset(li, c)], lx.shape[dim], wrap);        \
            out[i] = x[wb_offset_at(lx, lx, i, dim, k, at)];                        \
        }                                                                           \
    }                                                                               \
    WB_KERNEL gather_##name(WB_OUT(T, out, 0), WB_IN(T, x, 1), WB_ARG(Layout, lx, 2), \
                            WB_IN(i64, idx, 3), WB_ARG(Layout, li, 4), WB_ARG(wb_i64, n, 5), \
                            WB_ARG(int, dim, 6), WB_ARG(int, wrap, 7) WB_THREAD_ARGS) { \
        WB_LOOP(i, n) {                                                             \
            wb_i64 at = wb_wrap(idx[wb_offset(li, i)], lx.shape[dim], wrap);        \
            out[i] = x[wb_offset_at(lx, li, i, dim, li.shape[dim], at)];            \
        }                                                                           \
    }                                                                               \
    WB_KERNEL scatter_##name(WB_OUT(T, out, 0), WB_ARG(Layout, lo, 1), WB_IN(i64, idx, 2), \
                             WB_ARG(Layout, li, 3), WB_IN(T, src, 4), WB_ARG(Layout, ls, 5), \
                             WB_ARG(wb_i64, n, 6), WB_ARG(int, dim, 7),             \
                             WB_ARG(int, wrap, 8) WB_THREAD_ARGS) {                 \
        WB_LOOP(i, n) {                                                             \
            wb_i64 at = wb_wrap(idx[wb_offset(li, i)], lo.shape[dim], wrap);        \
            out[wb_offset_at(lo, li, i, dim, li.shape[dim], at)] = src[wb_offset(ls, i)]; \
        }                                                                           \
    }
WB_ALL_DTYPES(INDEX_KERNELS)

#define ADD_KERNELS(name, T)                                                        \
    WB_KERNEL scatter_add_##name(WB_OUT(T, out, 0), WB_ARG(Layout, lo, 1),          \
                                 WB_IN(i64, idx, 2), WB_ARG(Layout, li, 3),         \
                                 WB_IN(T, src, 4), WB_ARG(Layout, ls, 5),           \
                                 WB_ARG(wb_i64, n, 6), WB_ARG(int, dim, 7),         \
                                 WB_ARG(int, wrap, 8) WB_THREAD_ARGS) {             \
        WB_LOOP(i, n) {                                                             \
            wb_i64 at = wb_wrap(idx[wb_offset(li, i)], lo.shape[dim], wrap);        \
            wb_atomic_add(out, wb_offset_at(lo, li, i, dim, li.shape[dim], at),     \
                          (T)src[wb_offset(ls, i)]);                                \
        }                                                                           \
    }                                                                               \
    WB_KERNEL index_add_##name(WB_OUT(T, out, 0), WB_ARG(Layout, lo, 1), WB_IN(i64, idx, 2), \
                               WB_ARG(Layout, li, 3), WB_IN(T, src, 4), WB_ARG(Layout, ls, 5), \
                               WB_ARG(wb_i64, n, 6), WB_ARG(int, dim, 7),           \
                               WB_ARG(int, wrap, 8) WB_THREAD_ARGS) {               \
        /* src has out's shape with len(idx) at dim; ls carries that shape */       \
        wb_i64 k = ls.shape[dim];                                                   \
        WB_LOOP(i, n) {                                                             \
            wb_i64 at = wb_wrap(idx[wb_offset(li, wb_coord(ls, i, dim, k))], lo.shape[dim], wrap); \
            wb_atomic_add(out, wb_offset_at(lo, ls, i, dim, k, at), (T)src[wb_offset(ls, i)]); \
        }                                                                           \
    }
#define WB_ATOMIC_DTYPES(X) X(f16, f16) X(bf16, bf16) X(f32, f32) WB_IF_F64(X(f64, f64)) \
    X(i32, i32) X(i64, i64)
WB_ATOMIC_DTYPES(ADD_KERNELS)
