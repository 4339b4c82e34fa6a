/* test_ref_shape.c - the reference executor's views, cat, embedding, full and arange, run
 * through ic_ref_run on built graphs. Expectations are written by hand or as index maps
 * from PyTorch's definitions, never computed by the code under test. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"

static const ic_dtype all_dtypes[] = { IC_F32, IC_F64, IC_F16, IC_BF16, IC_I32, IC_I64, IC_BOOL };
#define NDT ((int)(sizeof all_dtypes / sizeof all_dtypes[0]))

/* ---- helpers ---- */

/* A zeroed heap tensor of shape "2,3,4" ("" = 0-d); free with free(t.data). */
static ic_tensor mkt(ic_dtype dt, const char *shape)
{
    int64_t sh[IC_MAX_RANK];
    int r = 0;
    for (const char *p = shape; *p;) {
        char *end;
        sh[r++] = strtoll(p, &end, 10);
        p = *end ? end + 1 : end;
    }
    ic_tensor t;
    ic_tensor_init(&t, dt, r, sh, NULL);
    size_t bytes = (size_t)ic_tensor_numel(&t) * ic_dtype_size(dt);
    t.data = calloc(bytes ? bytes : 1, 1);
    cr_assert(t.data != NULL);
    return t;
}

/* Distinct, dtype-representable values: small integers (and halves for floats). */
static void fill(ic_tensor *t, int seed)
{
    int64_t n = ic_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        int64_t k = (i * 7 + seed * 13) % 61 - 30;
        if (t->dtype == IC_BOOL)
            ic_tensor_set(t, i, (i + seed) % 3 == 0);
        else
            ic_tensor_set(t, i, ic_dtype_is_float(t->dtype) ? k * 0.5 : (double)k);
    }
}

static void fill_vals(ic_tensor *t, const double *v)
{
    for (int64_t i = 0; i < ic_tensor_numel(t); i++)
        ic_tensor_set(t, i, v[i]);
}

static ic_attrs attrs(ic_op op)
{
    ic_attrs a;
    ic_attrs_init(&a, op);
    return a;
}

static void set_shape(ic_attrs *a, int n, const int64_t *dims)
{
    a->nshape = n;
    for (int i = 0; i < n; i++)
        a->shape[i] = ic_dim_const(dims[i]);
}

static ic_value node(ic_graph *g, const char *name, ic_op op, int nin, const ic_operand *in,
                     const ic_attrs *a)
{
    ic_value v = -1;
    ic_status s = ic_graph_add_node(g, name, op, nin, in, a, &v);
    cr_assert_eq(s, IC_OK, "adding %s: %s", name, ic_last_error(ic_graph_ctx(g)));
    return v;
}

static ic_value node1(ic_graph *g, const char *name, ic_op op, ic_value x, const ic_attrs *a)
{
    ic_operand in[1] = { ic_val(x) };
    return node(g, name, op, 1, in, a);
}

static void output(ic_graph *g, ic_value v)
{
    cr_assert_eq(ic_graph_add_output(g, v), IC_OK, "add_output: %s", ic_last_error(ic_graph_ctx(g)));
}

static void run(ic_ctx *c, ic_graph *g, int nargs, const ic_tensor *args, int nouts, ic_tensor *outs)
{
    ic_status s = ic_ref_run(c, g, NULL, nargs, args, nouts, outs);
    cr_assert_eq(s, IC_OK, "ic_ref_run on graph '%s': %s", ic_graph_name(g), ic_last_error(c));
}

static void free_outs(ic_ctx *c, int n, ic_tensor *outs)
{
    for (int i = 0; i < n; i++)
        ic_tensor_free(c, &outs[i]);
}

/* t has dtype dt and shape "a,b,c". */
static void check_shape(const ic_tensor *t, ic_dtype dt, const char *shape, const char *what)
{
    ic_tensor w = mkt(dt, shape);
    cr_assert_eq(t->dtype, dt, "%s: dtype %s, want %s", what, ic_dtype_name(t->dtype), ic_dtype_name(dt));
    cr_assert_eq(t->rank, w.rank, "%s: rank %d, want %d (%s)", what, t->rank, w.rank, shape);
    for (int i = 0; i < w.rank; i++)
        cr_assert_eq(t->shape[i], w.shape[i], "%s: dim %d is %lld, want %lld (%s)", what, i,
                     (long long)t->shape[i], (long long)w.shape[i], shape);
    free(w.data);
}

/* Exact element equality of got[i] and src[j] (floats widen exactly, ints compare as int64). */
static bool same_elem(const ic_tensor *got, int64_t i, const ic_tensor *src, int64_t j)
{
    if (ic_dtype_is_float(got->dtype))
        return ict_get_f(got, i) == ict_get_f(src, j);
    return ict_get_i(got, i) == ict_get_i(src, j);
}

/* got[i] == src[map[i]] exactly, for every i. */
static void check_map(const ic_tensor *got, const ic_tensor *src, const int64_t *map, const char *what)
{
    int64_t n = ic_tensor_numel(got);
    for (int64_t i = 0; i < n; i++)
        cr_assert(same_elem(got, i, src, map[i]), "%s (%s): element %lld is %g, want src[%lld] = %g",
                  what, ic_dtype_name(got->dtype), (long long)i, ict_get_f(got, i),
                  (long long)map[i], ict_get_f(src, map[i]));
}

/* got[i] == want[i] exactly (as double; every value used here is representable). */
static void check_vals(const ic_tensor *got, const double *want, const char *what)
{
    int64_t n = ic_tensor_numel(got);
    for (int64_t i = 0; i < n; i++)
        cr_assert(ict_get_f(got, i) == want[i], "%s (%s): element %lld is %.17g, want %.17g", what,
                  ic_dtype_name(got->dtype), (long long)i, ict_get_f(got, i), want[i]);
}

static void check_ints(const ic_tensor *got, const int64_t *want, const char *what)
{
    int64_t n = ic_tensor_numel(got);
    for (int64_t i = 0; i < n; i++)
        cr_assert_eq(ict_get_i(got, i), want[i], "%s (%s): element %lld is %lld, want %lld", what,
                     ic_dtype_name(got->dtype), (long long)i, (long long)ict_get_i(got, i),
                     (long long)want[i]);
}

/* ---- reshape, squeeze, unsqueeze ---- */

Test(ref_view, reshape_squeeze_unsqueeze_every_dtype)
{
    for (int d = 0; d < NDT; d++) {
        ic_dtype dt = all_dtypes[d];
        ic_ctx *c = ict_ctx();
        ic_graph *g = ict_graph(c, "reshape");
        ic_value x = ict_input(g, "x", dt, "2,3,4");
        ic_attrs a = attrs(IC_OP_RESHAPE);
        set_shape(&a, 2, (int64_t[]){ 4, -1 });
        ic_value r = node1(g, "r", IC_OP_RESHAPE, x, &a);
        a = attrs(IC_OP_UNSQUEEZE);
        a.dim = -1;
        ic_value u = node1(g, "u", IC_OP_UNSQUEEZE, r, &a);
        a = attrs(IC_OP_UNSQUEEZE);
        a.dim = 0;
        ic_value u0 = node1(g, "u0", IC_OP_UNSQUEEZE, u, &a); /* [1, 4, 6, 1] */
        a = attrs(IC_OP_SQUEEZE);
        a.has_dims = true, a.ndims = 1, a.dims[0] = -1;
        ic_value s1 = node1(g, "s1", IC_OP_SQUEEZE, u0, &a); /* [1, 4, 6] */
        ic_value s = node1(g, "s", IC_OP_SQUEEZE, u0, NULL);   /* [4, 6] */
        output(g, r), output(g, u0), output(g, s1), output(g, s);
        ic_tensor xt = mkt(dt, "2,3,4"), outs[4];
        fill(&xt, d);
        run(c, g, 1, &xt, 4, outs);
        int64_t id[24];
        for (int i = 0; i < 24; i++)
            id[i] = i;
        check_shape(&outs[0], dt, "4,6", "reshape");
        check_shape(&outs[1], dt, "1,4,6,1", "unsqueeze");
        check_shape(&outs[2], dt, "1,4,6", "squeeze dim -1");
        check_shape(&outs[3], dt, "4,6", "squeeze all");
        for (int k = 0; k < 4; k++)
            check_map(&outs[k], &xt, id, "row-major order kept");
        free_outs(c, 4, outs);
        free(xt.data);
        ic_graph_destroy(g);
        ic_ctx_destroy(c);
    }
}

/* ---- permute, transpose ---- */

Test(ref_view, permute_transpose_every_dtype)
{
    for (int d = 0; d < NDT; d++) {
        ic_dtype dt = all_dtypes[d];
        ic_ctx *c = ict_ctx();
        ic_graph *g = ict_graph(c, "permute");
        ic_value x = ict_input(g, "x", dt, "2,3,4");
        ic_attrs a = attrs(IC_OP_PERMUTE);
        a.has_dims = true, a.ndims = 3;
        a.dims[0] = 2, a.dims[1] = 0, a.dims[2] = -2; /* out dims read x dims 2, 0, 1 */
        ic_value p = node1(g, "p", IC_OP_PERMUTE, x, &a);
        a = attrs(IC_OP_TRANSPOSE);
        a.dim0 = -1, a.dim1 = 0;
        ic_value t = node1(g, "t", IC_OP_TRANSPOSE, x, &a);
        output(g, p), output(g, t);
        ic_tensor xt = mkt(dt, "2,3,4"), outs[2];
        fill(&xt, d + 1);
        run(c, g, 1, &xt, 2, outs);
        int64_t mp[24], mt[24];
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 2; j++)
                for (int k = 0; k < 3; k++)
                    mp[(i * 2 + j) * 3 + k] = (j * 3 + k) * 4 + i; /* p[i,j,k] = x[j,k,i] */
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 3; j++)
                for (int k = 0; k < 2; k++)
                    mt[(i * 3 + j) * 2 + k] = (k * 3 + j) * 4 + i; /* t[i,j,k] = x[k,j,i] */
        check_shape(&outs[0], dt, "4,2,3", "permute");
        check_shape(&outs[1], dt, "4,3,2", "transpose");
        check_map(&outs[0], &xt, mp, "permute [2,0,-2]");
        check_map(&outs[1], &xt, mt, "transpose(-1, 0)");
        free_outs(c, 2, outs);
        free(xt.data);
        ic_graph_destroy(g);
        ic_ctx_destroy(c);
    }
}

/* ---- expand ---- */

Test(ref_view, expand_every_dtype)
{
    for (int d = 0; d < NDT; d++) {
        ic_dtype dt = all_dtypes[d];
        ic_ctx *c = ict_ctx();
        ic_graph *g = ict_graph(c, "expand");
        ic_value x = ict_input(g, "x", dt, "3,1");
        ic_value s = ict_input(g, "s", dt, "");
        ic_attrs a = attrs(IC_OP_EXPAND);
        set_shape(&a, 3, (int64_t[]){ 2, -1, 4 });
        ic_value e = node1(g, "e", IC_OP_EXPAND, x, &a);
        set_shape(&a, 2, (int64_t[]){ 3, 1 });
        ic_value es = node1(g, "es", IC_OP_EXPAND, s, &a);
        output(g, e), output(g, es);
        ic_tensor args[2] = { mkt(dt, "3,1"), mkt(dt, "") }, outs[2];
        fill(&args[0], d);
        fill(&args[1], d + 5);
        run(c, g, 2, args, 2, outs);
        int64_t me[24], ms[3] = { 0, 0, 0 };
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++)
                for (int k = 0; k < 4; k++)
                    me[(i * 3 + j) * 4 + k] = j; /* e[i,j,k] = x[j,0] */
        check_shape(&outs[0], dt, "2,3,4", "expand");
        check_shape(&outs[1], dt, "3,1", "expand 0-d");
        check_map(&outs[0], &args[0], me, "expand [3,1] -> [2,-1,4]");
        check_map(&outs[1], &args[1], ms, "expand [] -> [3,1]");
        free_outs(c, 2, outs);
        free(args[0].data), free(args[1].data);
        ic_graph_destroy(g);
        ic_ctx_destroy(c);
    }
}

/* ---- slice ---- */

typedef struct {
    bool has_start, has_end;
    int64_t start, end, step;
    int n;
    int64_t want[10];
} slice_case;

/* Python's clamping on x = arange(10): x[start:end:step]. */
Test(ref_view, slice_python_clamping)
{
    static const slice_case cases[] = {
        { false, false, 0, 0, 1, 10, { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9 } },
        { true, false, -3, 0, 1, 3, { 7, 8, 9 } },
        { false, true, 0, -8, 1, 2, { 0, 1 } },
        { true, true, 2, 100, 3, 3, { 2, 5, 8 } },
        { true, true, -100, 4, 1, 4, { 0, 1, 2, 3 } },
        { true, true, 8, 3, 1, 0, { 0 } },
        { true, false, 1, 0, 4, 3, { 1, 5, 9 } },
        { true, true, 9, 10, 5, 1, { 9 } },
        { true, true, 10, 20, 1, 0, { 0 } },
        { true, false, -1, 0, INT64_MAX, 1, { 9 } },
        { false, false, 0, 0, INT64_MAX, 1, { 0 } },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const slice_case *sc = &cases[k];
        ic_ctx *c = ict_ctx();
        ic_graph *g = ict_graph(c, "slice");
        ic_value x = ict_input(g, "x", IC_I64, "10");
        ic_attrs a = attrs(IC_OP_SLICE);
        a.dim = -1, a.has_start = sc->has_start, a.start = sc->start;
        a.has_end = sc->has_end, a.end = sc->end, a.step = sc->step;
        output(g, node1(g, "sl", IC_OP_SLICE, x, &a));
        ic_tensor xt = mkt(IC_I64, "10"), out;
        for (int i = 0; i < 10; i++)
            ((int64_t *)xt.data)[i] = i;
        run(c, g, 1, &xt, 1, &out);
        cr_assert_eq(out.rank, 1);
        cr_assert_eq(out.shape[0], sc->n, "case %zu: %lld elements, want %d", k, (long long)out.shape[0], sc->n);
        check_ints(&out, sc->want, "slice of arange(10)");
        ic_tensor_free(c, &out);
        free(xt.data);
        ic_graph_destroy(g);
        ic_ctx_destroy(c);
    }
}

Test(ref_view, slice_2d_every_dtype)
{
    for (int d = 0; d < NDT; d++) {
        ic_dtype dt = all_dtypes[d];
        ic_ctx *c = ict_ctx();
        ic_graph *g = ict_graph(c, "slice2");
        ic_value x = ict_input(g, "x", dt, "3,5");
        ic_attrs a = attrs(IC_OP_SLICE);
        a.dim = -1, a.has_start = true, a.start = 1, a.has_end = true, a.end = 4, a.step = 2;
        ic_value cols = node1(g, "cols", IC_OP_SLICE, x, &a); /* x[:, 1:4:2] */
        a = attrs(IC_OP_SLICE);
        a.dim = -2, a.has_start = true, a.start = -2;
        ic_value rows = node1(g, "rows", IC_OP_SLICE, x, &a); /* x[-2:] */
        output(g, cols), output(g, rows);
        ic_tensor xt = mkt(dt, "3,5"), outs[2];
        fill(&xt, d + 2);
        run(c, g, 1, &xt, 2, outs);
        int64_t mc[6], mr[10];
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 2; j++)
                mc[i * 2 + j] = i * 5 + 1 + 2 * j;
        for (int i = 0; i < 10; i++)
            mr[i] = 5 + i;
        check_shape(&outs[0], dt, "3,2", "x[:, 1:4:2]");
        check_shape(&outs[1], dt, "2,5", "x[-2:]");
        check_map(&outs[0], &xt, mc, "x[:, 1:4:2]");
        check_map(&outs[1], &xt, mr, "x[-2:]");
        free_outs(c, 2, outs);
        free(xt.data);
        ic_graph_destroy(g);
        ic_ctx_destroy(c);
    }
}

/* ---- non-contiguous arguments, chained views ---- */

/* x is a transposed view of buf ([4,6] row-major seen as [6,4]); permute -> reshape ->
 * slice reads buf back in its own order. y takes every other element of a buffer. */
Test(ref_view, strided_args_through_a_chain)
{
    ic_dtype dts[] = { IC_F32, IC_I64, IC_F16 };
    for (int d = 0; d < 3; d++) {
        ic_dtype dt = dts[d];
        ic_ctx *c = ict_ctx();
        ic_graph *g = ict_graph(c, "chain");
        ic_value x = ict_input(g, "x", dt, "6,4");
        ic_value y = ict_input(g, "y", dt, "5");
        ic_attrs a = attrs(IC_OP_PERMUTE);
        a.has_dims = true, a.ndims = 2, a.dims[0] = 1, a.dims[1] = 0;
        ic_value p = node1(g, "p", IC_OP_PERMUTE, x, &a);
        a = attrs(IC_OP_RESHAPE);
        set_shape(&a, 2, (int64_t[]){ 2, 12 });
        ic_value r = node1(g, "r", IC_OP_RESHAPE, p, &a);
        a = attrs(IC_OP_SLICE);
        a.dim = 1, a.has_start = true, a.start = 1, a.step = 5;
        ic_value s = node1(g, "s", IC_OP_SLICE, r, &a); /* [2, 3] */
        a = attrs(IC_OP_UNSQUEEZE);
        a.dim = 0;
        ic_value yu = node1(g, "yu", IC_OP_UNSQUEEZE, y, &a);
        a = attrs(IC_OP_EXPAND);
        set_shape(&a, 2, (int64_t[]){ 2, 5 });
        ic_value ye = node1(g, "ye", IC_OP_EXPAND, yu, &a);
        output(g, s), output(g, ye);

        ic_tensor buf = mkt(dt, "4,6"), ybuf = mkt(dt, "10"), args[2], outs[2];
        fill(&buf, 3);
        fill(&ybuf, 4);
        args[0] = buf;
        args[0].shape[0] = 6, args[0].shape[1] = 4;
        args[0].strides[0] = 1, args[0].strides[1] = 6; /* x[i, j] = buf[j, i] */
        args[1] = ybuf;
        args[1].shape[0] = 5, args[1].strides[0] = 2; /* y[i] = ybuf[2i] */
        run(c, g, 2, args, 2, outs);
        int64_t ms[6], my[10];
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++)
                ms[i * 3 + j] = i * 12 + 1 + 5 * j;
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 5; j++)
                my[i * 5 + j] = 2 * j;
        check_shape(&outs[0], dt, "2,3", "permute->reshape->slice");
        check_shape(&outs[1], dt, "2,5", "unsqueeze->expand");
        check_map(&outs[0], &buf, ms, "chain over a transposed arg");
        check_map(&outs[1], &ybuf, my, "chain over a stride-2 arg");
        free_outs(c, 2, outs);
        free(buf.data), free(ybuf.data);
        ic_graph_destroy(g);
        ic_ctx_destroy(c);
    }
}

/* ---- odd sizes: 1, 3, 0 and 1000003 elements ---- */

Test(ref_view, sizes_one_three_zero)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "odd");
    ic_value x = ict_input(g, "x", IC_F32, "1,3,1");
    ic_value z = ict_input(g, "z", IC_F32, "0,3");
    ic_attrs a = attrs(IC_OP_PERMUTE);
    a.has_dims = true, a.ndims = 3, a.dims[0] = 2, a.dims[1] = 1, a.dims[2] = 0;
    ic_value p = node1(g, "p", IC_OP_PERMUTE, x, &a);
    ic_value sq = node1(g, "sq", IC_OP_SQUEEZE, p, NULL);
    a = attrs(IC_OP_TRANSPOSE);
    a.dim0 = 0, a.dim1 = 1;
    ic_value zt = node1(g, "zt", IC_OP_TRANSPOSE, z, &a);
    a = attrs(IC_OP_SLICE);
    a.dim = 1, a.has_start = true, a.start = 2, a.has_end = true, a.end = 2;
    ic_value empty = node1(g, "empty", IC_OP_SLICE, x, &a);
    output(g, p), output(g, sq), output(g, zt), output(g, empty);
    ic_tensor args[2] = { mkt(IC_F32, "1,3,1"), mkt(IC_F32, "0,3") }, outs[4];
    fill_vals(&args[0], (double[]){ 1.5, -2, 7 });
    run(c, g, 2, args, 4, outs);
    check_shape(&outs[0], IC_F32, "1,3,1", "permute [2,1,0] of [1,3,1]");
    check_shape(&outs[1], IC_F32, "3", "squeeze");
    check_shape(&outs[2], IC_F32, "3,0", "transpose of [0,3]");
    check_shape(&outs[3], IC_F32, "1,0,1", "empty slice");
    check_vals(&outs[0], (double[]){ 1.5, -2, 7 }, "permute");
    check_vals(&outs[1], (double[]){ 1.5, -2, 7 }, "squeeze");
    free_outs(c, 4, outs);
    free(args[0].data), free(args[1].data);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

Test(ref_view, million_elements_transpose_slice)
{
    const int64_t n = 1000003;
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "big");
    ic_value x = ict_input(g, "x", IC_F32, "1000003");
    ic_attrs a = attrs(IC_OP_RESHAPE);
    set_shape(&a, 2, (int64_t[]){ n, 1 });
    ic_value r = node1(g, "r", IC_OP_RESHAPE, x, &a);
    a = attrs(IC_OP_TRANSPOSE);
    a.dim0 = 0, a.dim1 = -1;
    ic_value t = node1(g, "t", IC_OP_TRANSPOSE, r, &a); /* [1, n] */
    a = attrs(IC_OP_SLICE);
    a.dim = -1, a.has_start = true, a.start = 5, a.step = 3;
    ic_value s = node1(g, "s", IC_OP_SLICE, t, &a); /* [1, ceil((n - 5) / 3)] */
    a = attrs(IC_OP_EXPAND);
    set_shape(&a, 2, (int64_t[]){ 2, -1 });
    ic_value e = node1(g, "e", IC_OP_EXPAND, s, &a);
    output(g, e);
    ic_tensor xt = mkt(IC_F32, "1000003"), out;
    for (int64_t i = 0; i < n; i++)
        ((float *)xt.data)[i] = (float)i; /* exact below 2^24 */
    run(c, g, 1, &xt, 1, &out);
    int64_t m = (n - 5 + 2) / 3;
    cr_assert_eq(m, 333333);
    check_shape(&out, IC_F32, "2,333333", "expand of a sliced transpose");
    for (int64_t i = 0; i < 2 * m; i++) {
        double want = (double)(5 + 3 * (i % m));
        cr_assert_eq(ict_get_f(&out, i), want, "element %lld: %g, want %g", (long long)i, ict_get_f(&out, i), want);
    }
    ic_tensor_free(c, &out);
    free(xt.data);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* ---- cat ---- */

Test(ref_cat, along_last_and_first_dim_every_dtype)
{
    for (int d = 0; d < NDT; d++) {
        ic_dtype dt = all_dtypes[d];
        ic_ctx *c = ict_ctx();
        ic_graph *g = ict_graph(c, "cat");
        ic_value a = ict_input(g, "a", dt, "2,3"), b = ict_input(g, "b", dt, "2,1");
        ic_value e = ict_input(g, "e", dt, "2,0"), f = ict_input(g, "f", dt, "1,3");
        ic_attrs at = attrs(IC_OP_CAT);
        at.dim = -1;
        ic_operand in3[3] = { ic_val(a), ic_val(e), ic_val(b) };
        ic_value c1 = node(g, "c1", IC_OP_CAT, 3, in3, &at);
        at.dim = 0;
        ic_operand in2[2] = { ic_val(f), ic_val(a) };
        ic_value c0 = node(g, "c0", IC_OP_CAT, 2, in2, &at);
        output(g, c1), output(g, c0);
        ic_tensor args[4] = { mkt(dt, "2,3"), mkt(dt, "2,1"), mkt(dt, "2,0"), mkt(dt, "1,3") }, outs[2];
        fill(&args[0], d);
        fill(&args[1], d + 7);
        fill(&args[3], d + 11);
        run(c, g, 4, args, 2, outs);
        check_shape(&outs[0], dt, "2,4", "cat dim -1");
        check_shape(&outs[1], dt, "3,3", "cat dim 0");
        /* c1 = [[a00 a01 a02 b0], [a10 a11 a12 b1]] */
        const ic_tensor *src1[8] = { &args[0], &args[0], &args[0], &args[1], &args[0], &args[0], &args[0], &args[1] };
        int64_t idx1[8] = { 0, 1, 2, 0, 3, 4, 5, 1 };
        for (int i = 0; i < 8; i++)
            cr_assert(same_elem(&outs[0], i, src1[i], idx1[i]), "%s cat dim -1: element %d is %g, want %g",
                      ic_dtype_name(dt), i, ict_get_f(&outs[0], i), ict_get_f(src1[i], idx1[i]));
        for (int i = 0; i < 9; i++) {
            const ic_tensor *src = i < 3 ? &args[3] : &args[0];
            int64_t j = i < 3 ? i : i - 3;
            cr_assert(same_elem(&outs[1], i, src, j), "%s cat dim 0: element %d is %g, want %g",
                      ic_dtype_name(dt), i, ict_get_f(&outs[1], i), ict_get_f(src, j));
        }
        free_outs(c, 2, outs);
        for (int i = 0; i < 4; i++)
            free(args[i].data);
        ic_graph_destroy(g);
        ic_ctx_destroy(c);
    }
}

/* PyTorch's promotion: a float operand wins over ints (keeping its own width), f16 with
 * bf16 gives f32, bool joins any integer type. Values convert exactly here. */
Test(ref_cat, promotes_and_converts)
{
    struct { ic_dtype a, b, out; double va[2], vb[2]; } cases[] = {
        { IC_I32, IC_F16, IC_F16, { 1, -3 }, { 0.5, 70 } },
        { IC_BOOL, IC_I32, IC_I32, { 1, 0 }, { -7, 100000 } },
        { IC_F16, IC_BF16, IC_F32, { 0.25, -2048 }, { 3.5, 256 } },
        { IC_I64, IC_F64, IC_F64, { 9007199254740992.0, -5 }, { 0.125, 1e300 } },
        { IC_BOOL, IC_F32, IC_F32, { 0, 1 }, { -1.5, 2 } },
        { IC_I32, IC_I64, IC_I64, { -2147483648.0, 7 }, { 4294967296.0, 1 } },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        ic_ctx *c = ict_ctx();
        ic_graph *g = ict_graph(c, "catp");
        ic_value a = ict_input(g, "a", cases[k].a, "2"), b = ict_input(g, "b", cases[k].b, "2");
        ic_operand in[2] = { ic_val(b), ic_val(a) };
        output(g, node(g, "c", IC_OP_CAT, 2, in, NULL));
        ic_tensor args[2] = { mkt(cases[k].a, "2"), mkt(cases[k].b, "2") }, out;
        fill_vals(&args[0], cases[k].va);
        fill_vals(&args[1], cases[k].vb);
        run(c, g, 2, args, 1, &out);
        check_shape(&out, cases[k].out, "4", "promoted cat");
        double want[4] = { cases[k].vb[0], cases[k].vb[1], cases[k].va[0], cases[k].va[1] };
        check_vals(&out, want, "cat(b, a)");
        ic_tensor_free(c, &out);
        free(args[0].data), free(args[1].data);
        ic_graph_destroy(g);
        ic_ctx_destroy(c);
    }
}

Test(ref_cat, large_i64_stays_exact)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "cati");
    ic_value a = ict_input(g, "a", IC_I64, "1,2"), b = ict_input(g, "b", IC_BOOL, "1,1");
    ic_attrs at = attrs(IC_OP_CAT);
    at.dim = 1;
    ic_operand in[2] = { ic_val(a), ic_val(b) };
    output(g, node(g, "c", IC_OP_CAT, 2, in, &at));
    ic_tensor args[2] = { mkt(IC_I64, "1,2"), mkt(IC_BOOL, "1,1") }, out;
    ((int64_t *)args[0].data)[0] = INT64_MAX;
    ((int64_t *)args[0].data)[1] = (int64_t)1 << 53 | 1;
    ((uint8_t *)args[1].data)[0] = 1;
    run(c, g, 2, args, 1, &out);
    check_ints(&out, (int64_t[]){ INT64_MAX, ((int64_t)1 << 53) + 1, 1 }, "cat i64 with bool");
    ic_tensor_free(c, &out);
    free(args[0].data), free(args[1].data);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* ---- embedding ---- */

Test(ref_embedding, rows_every_weight_dtype_and_index_dtype)
{
    for (int d = 0; d < NDT; d++)
        for (int ix = 0; ix < 2; ix++) {
            ic_dtype dt = all_dtypes[d], it = ix ? IC_I32 : IC_I64;
            ic_ctx *c = ict_ctx();
            ic_graph *g = ict_graph(c, "emb");
            ic_value i = ict_input(g, "i", it, "2,2"); /* first: args are inputs, then params */
            ic_value w = ict_param(g, "w", dt, "5,3");
            ic_operand in[2] = { ic_val(w), ic_val(i) };
            output(g, node(g, "e", IC_OP_EMBEDDING, 2, in, NULL));
            ic_tensor args[2] = { mkt(it, "2,2"), mkt(dt, "5,3") }, out;
            fill_vals(&args[0], (double[]){ 4, 0, 2, 4 });
            fill(&args[1], d + 3);
            run(c, g, 2, args, 1, &out);
            check_shape(&out, dt, "2,2,3", "embedding");
            int64_t rows[4] = { 4, 0, 2, 4 }, map[12];
            for (int r = 0; r < 4; r++)
                for (int k = 0; k < 3; k++)
                    map[r * 3 + k] = rows[r] * 3 + k;
            check_map(&out, &args[1], map, "embedding rows");
            ic_tensor_free(c, &out);
            free(args[0].data), free(args[1].data);
            ic_graph_destroy(g);
            ic_ctx_destroy(c);
        }
}

Test(ref_embedding, index_out_of_range_is_an_error)
{
    int64_t bad[] = { 5, -1, INT64_MAX };
    const char *text[] = { "index 5 ", "index -1 ", "index 9223372036854775807 " };
    for (int k = 0; k < 3; k++) {
        ic_ctx *c = ict_ctx();
        ic_graph *g = ict_graph(c, "emb_oob");
        ic_value w = ict_input(g, "w", IC_F32, "5,3");
        ic_value i = ict_input(g, "ids", IC_I64, "3");
        ic_operand in[2] = { ic_val(w), ic_val(i) };
        output(g, node(g, "tok_emb", IC_OP_EMBEDDING, 2, in, NULL));
        ic_tensor args[2] = { mkt(IC_F32, "5,3"), mkt(IC_I64, "3") }, out = { 0 };
        ((int64_t *)args[1].data)[0] = 1;
        ((int64_t *)args[1].data)[2] = bad[k];
        ic_status s = ic_ref_run(c, g, NULL, 2, args, 1, &out);
        ict_assert_error(c, s, IC_EINVAL, "tok_emb", "embedding", text[k], "5 rows");
        free(args[0].data), free(args[1].data);
        ic_graph_destroy(g);
        ic_ctx_destroy(c);
    }
}

/* ---- full ---- */

static ic_value add_full(ic_graph *g, const char *name, ic_dtype dt, int rank, const int64_t *shape, ic_scalar v)
{
    ic_attrs a = attrs(IC_OP_FULL);
    set_shape(&a, rank, shape);
    a.has_dtype = true, a.dtype = dt, a.value = v;
    return node(g, name, IC_OP_FULL, 0, NULL, &a);
}

static ic_scalar sf(double f) { return (ic_scalar){ f, (int64_t)f, false }; }
static ic_scalar si(int64_t i) { return (ic_scalar){ (double)i, i, true }; }

Test(ref_full, value_converted_to_each_dtype)
{
    struct { ic_dtype dt; ic_scalar v; double want; } cases[] = {
        { IC_F32, sf(2.5), 2.5 },        { IC_F64, sf(0.1), 0.1 },
        { IC_F16, sf(0.1), 0.0999755859375 }, /* nearest f16 to 0.1 */
        { IC_BF16, sf(0.1), 0.10009765625 },  /* nearest bf16 to 0.1 */
        { IC_F16, si(7), 7 },            { IC_I32, sf(-2.7), -2 },  /* truncates toward zero */
        { IC_I64, sf(2.7), 2 },          { IC_I32, si(-5), -5 },
        { IC_BOOL, sf(0.5), 1 },         { IC_BOOL, si(0), 0 },
        { IC_F32, sf(-INFINITY), -INFINITY },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        ic_ctx *c = ict_ctx();
        ic_graph *g = ict_graph(c, "full");
        output(g, add_full(g, "f", cases[k].dt, 2, (int64_t[]){ 2, 3 }, cases[k].v));
        output(g, add_full(g, "f0", cases[k].dt, 0, NULL, cases[k].v));
        ic_tensor outs[2];
        run(c, g, 0, NULL, 2, outs);
        check_shape(&outs[0], cases[k].dt, "2,3", "full");
        check_shape(&outs[1], cases[k].dt, "", "0-d full");
        double want[6];
        for (int i = 0; i < 6; i++)
            want[i] = cases[k].want;
        check_vals(&outs[0], want, "full [2,3]");
        check_vals(&outs[1], want, "full []");
        free_outs(c, 2, outs);
        ic_graph_destroy(g);
        ic_ctx_destroy(c);
    }
}

Test(ref_full, large_integers_exact)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "fulli");
    int64_t big = ((int64_t)1 << 53) + 1;
    output(g, add_full(g, "f", IC_I64, 1, (int64_t[]){ 3 }, si(big)));
    output(g, add_full(g, "m", IC_I64, 1, (int64_t[]){ 1 }, si(INT64_MIN)));
    ic_tensor outs[2];
    run(c, g, 0, NULL, 2, outs);
    check_ints(&outs[0], (int64_t[]){ big, big, big }, "full i64 2^53+1");
    check_ints(&outs[1], (int64_t[]){ INT64_MIN }, "full i64 min");
    free_outs(c, 2, outs);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* torch.full refuses a value the dtype cannot hold ("cannot be converted ... without overflow"). */
Test(ref_full, overflowing_value_is_an_error)
{
    struct { ic_dtype dt; ic_scalar v; } cases[] = {
        { IC_F32, sf(1e40) }, { IC_F16, sf(70000) }, { IC_F16, si(65536) },
        { IC_I32, si(3000000000LL) }, { IC_I64, sf(1e19) }, { IC_I32, sf(NAN) },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        ic_ctx *c = ict_ctx();
        ic_graph *g = ict_graph(c, "fullbad");
        output(g, add_full(g, "filler", cases[k].dt, 1, (int64_t[]){ 2 }, cases[k].v));
        ic_tensor out = { 0 };
        ic_status s = ic_ref_run(c, g, NULL, 0, NULL, 1, &out);
        ict_assert_error(c, s, IC_EINVAL, "filler", "(full)", ic_dtype_name(cases[k].dt), "overflow");
        ic_graph_destroy(g);
        ic_ctx_destroy(c);
    }
}

/* ---- arange ---- */

static ic_value add_arange(ic_graph *g, const char *name, ic_dtype dt, ic_scalar st, ic_scalar en, ic_scalar sp)
{
    ic_attrs a = attrs(IC_OP_ARANGE);
    a.astart = st, a.aend = en, a.astep = sp, a.has_dtype = true, a.dtype = dt;
    return node(g, name, IC_OP_ARANGE, 0, NULL, &a);
}

Test(ref_arange, integer_exact)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "arange");
    int64_t b = (int64_t)1 << 53; /* b + odd is not a double: a double computation fails */
    output(g, add_arange(g, "a", IC_I64, si(0), si(5), si(1)));
    output(g, add_arange(g, "big", IC_I64, si(b + 1), si(b + 6), si(2)));
    output(g, add_arange(g, "i32", IC_I32, si(-3), si(4), si(2)));
    output(g, add_arange(g, "neg", IC_I64, si(10), si(0), si(-3)));
    output(g, add_arange(g, "one", IC_I64, si(7), si(8), si(5)));
    ic_tensor outs[5];
    run(c, g, 0, NULL, 5, outs);
    check_shape(&outs[0], IC_I64, "5", "arange(5)");
    check_ints(&outs[0], (int64_t[]){ 0, 1, 2, 3, 4 }, "arange(5)");
    check_shape(&outs[1], IC_I64, "3", "arange near 2^53");
    check_ints(&outs[1], (int64_t[]){ b + 1, b + 3, b + 5 }, "arange near 2^53");
    check_shape(&outs[2], IC_I32, "4", "arange i32");
    check_ints(&outs[2], (int64_t[]){ -3, -1, 1, 3 }, "arange(-3, 4, 2)");
    check_shape(&outs[3], IC_I64, "4", "arange(10, 0, -3)");
    check_ints(&outs[3], (int64_t[]){ 10, 7, 4, 1 }, "arange(10, 0, -3)");
    check_ints(&outs[4], (int64_t[]){ 7 }, "arange(7, 8, 5)");
    free_outs(c, 5, outs);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* Float steps: start + i*step (double, then rounded), never a running sum. */
Test(ref_arange, float_steps_every_float_dtype)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "arangef");
    output(g, add_arange(g, "f32", IC_F32, si(0), si(1), sf(0.1)));
    output(g, add_arange(g, "f64", IC_F64, sf(1.5), sf(-1.5), sf(-0.5)));
    output(g, add_arange(g, "f16", IC_F16, si(0), si(2), sf(0.25)));
    output(g, add_arange(g, "bf16", IC_BF16, sf(-1), sf(1), sf(0.5)));
    output(g, add_arange(g, "f64b", IC_F64, sf(0.1), sf(0.5), sf(0.05)));
    ic_tensor outs[5];
    run(c, g, 0, NULL, 5, outs);
    check_shape(&outs[0], IC_F32, "10", "arange(0, 1, 0.1)");
    double w0[10];
    for (int i = 0; i < 10; i++)
        w0[i] = (float)(0.1 * i);
    check_vals(&outs[0], w0, "arange(0, 1, 0.1) f32");
    check_shape(&outs[1], IC_F64, "6", "arange(1.5, -1.5, -0.5)");
    check_vals(&outs[1], (double[]){ 1.5, 1, 0.5, 0, -0.5, -1 }, "arange(1.5, -1.5, -0.5)");
    check_shape(&outs[2], IC_F16, "8", "arange(0, 2, 0.25) f16");
    check_vals(&outs[2], (double[]){ 0, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 1.75 }, "arange f16");
    check_shape(&outs[3], IC_BF16, "4", "arange(-1, 1, 0.5) bf16");
    check_vals(&outs[3], (double[]){ -1, -0.5, 0, 0.5 }, "arange bf16");
    check_shape(&outs[4], IC_F64, "8", "arange(0.1, 0.5, 0.05)"); /* numpy agrees: 8 */
    double w4[8];
    for (int i = 0; i < 8; i++)
        w4[i] = 0.1 + 0.05 * i;
    check_vals(&outs[4], w4, "arange(0.1, 0.5, 0.05)");
    free_outs(c, 5, outs);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* An integer dtype with float numbers: as torch.arange(..., dtype=int) (1.13), start + i * step
 * in int64 from the truncated start and step; the length from the truncated bounds for i64,
 * from the numbers otherwise (numpy's arange(...).astype would give 0 1 3 4 and 2 1 0 0). */
Test(ref_arange, float_step_into_integer_dtype)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "arangei");
    output(g, add_arange(g, "a", IC_I64, si(0), si(5), sf(1.5)));
    output(g, add_arange(g, "b", IC_I32, sf(2.5), sf(-1), sf(-1)));
    ic_tensor outs[2];
    run(c, g, 0, NULL, 2, outs);
    check_shape(&outs[0], IC_I64, "5", "arange(0, 5, 1.5) i64");
    check_ints(&outs[0], (int64_t[]){ 0, 1, 2, 3, 4 }, "arange(0, 5, 1.5) i64");
    check_shape(&outs[1], IC_I32, "4", "arange(2.5, -1, -1) i32");
    check_ints(&outs[1], (int64_t[]){ 2, 1, 0, -1 }, "arange(2.5, -1, -1) i32");
    free_outs(c, 2, outs);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}
