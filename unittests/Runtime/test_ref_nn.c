/* test_ref_nn.c - the reference executor's softmax, log_softmax, layer_norm, rms_norm,
 * matmul, linear and bmm, and two small blocks built from them (attention, a BERT-style
 * feed-forward), run through ic_ref_run. Expectations come from hand-worked values or
 * from PyTorch's documented formulas written out as plain loops here. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"

static const ic_dtype float_dtypes[] = { IC_F32, IC_F64, IC_F16, IC_BF16 };

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

/* Deterministic values uniform in [-scale, scale) (rounded to t's dtype when stored). */
static void fill_rand(ic_tensor *t, uint64_t seed, double scale)
{
    uint64_t s = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    for (int64_t i = 0; i < ic_tensor_numel(t); i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        double u = (double)(s >> 11) / 9007199254740992.0; /* [0, 1) */
        ic_tensor_set(t, i, (2 * u - 1) * scale);
    }
}

static void fill_vals(ic_tensor *t, const double *v)
{
    for (int64_t i = 0; i < ic_tensor_numel(t); i++)
        ic_tensor_set(t, i, v[i]);
}

/* The stored values of t as doubles (what the graph actually sees); caller frees. */
static double *values(const ic_tensor *t)
{
    int64_t n = ic_tensor_numel(t);
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    cr_assert(v != NULL);
    for (int64_t i = 0; i < n; i++)
        v[i] = ict_get_f(t, i);
    return v;
}

static ic_attrs attrs(ic_op op)
{
    ic_attrs a;
    ic_attrs_init(&a, op);
    return a;
}

static ic_value node(ic_graph *g, const char *name, ic_op op, int nin, const ic_operand *in,
                     const ic_attrs *a)
{
    ic_value v = -1;
    ic_status s = ic_graph_add_node(g, name, op, nin, in, a, &v);
    cr_assert_eq(s, IC_OK, "adding %s: %s", name, ic_last_error(ic_graph_ctx(g)));
    return v;
}

static ic_value node2(ic_graph *g, const char *name, ic_op op, ic_operand a, ic_operand b, const ic_attrs *at)
{
    ic_operand in[2] = { a, b };
    return node(g, name, op, 2, in, at);
}

static void output(ic_graph *g, ic_value v)
{
    cr_assert_eq(ic_graph_add_output(g, v), IC_OK, "add_output: %s", ic_last_error(ic_graph_ctx(g)));
}

static void run_vals(ic_ctx *c, ic_graph *g, const int64_t *vals, int nargs, const ic_tensor *args,
                     int nouts, ic_tensor *outs)
{
    ic_status s = ic_ref_run(c, g, vals, nargs, args, nouts, outs);
    cr_assert_eq(s, IC_OK, "ic_ref_run on graph '%s': %s", ic_graph_name(g), ic_last_error(c));
}

static void run(ic_ctx *c, ic_graph *g, int nargs, const ic_tensor *args, int nouts, ic_tensor *outs)
{
    run_vals(c, g, NULL, nargs, args, nouts, outs);
}

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

/* got against want (doubles, same element count) with the spec's tolerances for got's dtype. */
static void check_close(const ic_tensor *got, const double *want, const char *what)
{
    ic_tensor w;
    ic_tensor_init(&w, IC_F64, got->rank, got->shape, (void *)want);
    double rtol, atol;
    char msg[1024];
    ict_tol(got->dtype, &rtol, &atol);
    cr_assert(ict_allclose_tol(got, &w, rtol, atol, msg, sizeof msg), "%s (%s): %s", what,
              ic_dtype_name(got->dtype), msg);
}

static void check_ints(const ic_tensor *got, const int64_t *want, const char *what)
{
    for (int64_t i = 0; i < ic_tensor_numel(got); i++)
        cr_assert_eq(ict_get_i(got, i), want[i], "%s (%s): element %lld is %lld, want %lld", what,
                     ic_dtype_name(got->dtype), (long long)i, (long long)ict_get_i(got, i),
                     (long long)want[i]);
}

static void free_all(ic_ctx *c, int nouts, ic_tensor *outs, int nargs, ic_tensor *args)
{
    for (int i = 0; i < nouts; i++)
        ic_tensor_free(c, &outs[i]);
    for (int i = 0; i < nargs; i++)
        free(args[i].data);
}

/* ---- expectations: PyTorch's formulas as plain loops ---- */

/* softmax / log_softmax of x viewed as [outer, len, inner] along the middle dim. */
static void softmax_ref(const double *x, int64_t outer, int64_t len, int64_t inner, bool lg, double *y)
{
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            double m = -INFINITY, s = 0;
            for (int64_t k = 0; k < len; k++)
                m = fmax(m, x[(o * len + k) * inner + i]);
            for (int64_t k = 0; k < len; k++)
                s += exp(x[(o * len + k) * inner + i] - m);
            for (int64_t k = 0; k < len; k++) {
                double v = x[(o * len + k) * inner + i];
                y[(o * len + k) * inner + i] = lg ? v - m - log(s) : exp(v - m) / s;
            }
        }
}

/* layer_norm over rows of n: biased variance; w, b may be NULL. */
static void layer_norm_ref(const double *x, int64_t rows, int64_t n, const double *w, const double *b,
                           double eps, double *y)
{
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x + r * n;
        double mean = 0, var = 0;
        for (int64_t k = 0; k < n; k++)
            mean += xr[k];
        mean /= n;
        for (int64_t k = 0; k < n; k++)
            var += (xr[k] - mean) * (xr[k] - mean);
        var /= n;
        for (int64_t k = 0; k < n; k++)
            y[r * n + k] = (xr[k] - mean) / sqrt(var + eps) * (w ? w[k] : 1) + (b ? b[k] : 0);
    }
}

static void rms_norm_ref(const double *x, int64_t rows, int64_t n, const double *w, double eps, double *y)
{
    for (int64_t r = 0; r < rows; r++) {
        double ms = 0;
        for (int64_t k = 0; k < n; k++)
            ms += x[r * n + k] * x[r * n + k];
        ms /= n;
        for (int64_t k = 0; k < n; k++)
            y[r * n + k] = x[r * n + k] / sqrt(ms + eps) * (w ? w[k] : 1);
    }
}

/* C[M,N] = A[M,K] B[K,N] with row strides lda, ldb and column strides; written to c. */
static void mm_ref(const double *a, int64_t sa_m, int64_t sa_k, const double *b, int64_t sb_k, int64_t sb_n,
                   int64_t M, int64_t K, int64_t N, double *c)
{
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double s = 0;
            for (int64_t k = 0; k < K; k++)
                s += a[i * sa_m + k * sa_k] * b[k * sb_k + j * sb_n];
            c[i * N + j] = s;
        }
}

/* ---- softmax, log_softmax ---- */

/* [2,3,4]: softmax over the middle dim (dim -2) and log_softmax over the last (dim 2). */
Test(ref_softmax, middle_and_last_dim_every_float_dtype)
{
    for (int d = 0; d < 4; d++) {
        ic_dtype dt = float_dtypes[d];
        ic_ctx *c = ict_ctx();
        ic_graph *g = ict_graph(c, "softmax");
        ic_value x = ict_input(g, "x", dt, "2,3,4");
        ic_attrs a = attrs(IC_OP_SOFTMAX);
        a.dim = -2;
        ic_operand in[1] = { ic_val(x) };
        output(g, node(g, "sm", IC_OP_SOFTMAX, 1, in, &a));
        a = attrs(IC_OP_LOG_SOFTMAX);
        a.dim = 2;
        output(g, node(g, "lsm", IC_OP_LOG_SOFTMAX, 1, in, &a));
        ic_tensor xt = mkt(dt, "2,3,4"), outs[2];
        fill_rand(&xt, 1 + d, 4);
        run(c, g, 1, &xt, 2, outs);
        double *xv = values(&xt), want[24];
        check_shape(&outs[0], dt, "2,3,4", "softmax");
        softmax_ref(xv, 2, 3, 4, false, want);
        check_close(&outs[0], want, "softmax dim -2");
        softmax_ref(xv, 6, 4, 1, true, want);
        check_close(&outs[1], want, "log_softmax dim 2");
        free(xv);
        free_all(c, 2, outs, 1, &xt);
        ic_graph_destroy(g);
        ic_ctx_destroy(c);
    }
}

/* Worked by hand: large values and -inf must not overflow or poison other entries; a row
 * of only -inf gives NaN, as in PyTorch. Dim 1 of [5, 3] (dim -1). */
Test(ref_softmax, stable_with_large_values_and_minus_inf)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "stable");
    ic_value x = ict_input(g, "x", IC_F32, "5,3");
    ic_attrs a = attrs(IC_OP_SOFTMAX);
    a.dim = -1;
    ic_operand in[1] = { ic_val(x) };
    output(g, node(g, "sm", IC_OP_SOFTMAX, 1, in, &a));
    a = attrs(IC_OP_LOG_SOFTMAX);
    a.dim = -1;
    output(g, node(g, "lsm", IC_OP_LOG_SOFTMAX, 1, in, &a));
    ic_tensor xt = mkt(IC_F32, "5,3"), outs[2];
    const double inf = INFINITY;
    fill_vals(&xt, (double[]){ 1000, 1000, -1000,  -inf, 0, -inf,  88, 89, 90,
                               -inf, -inf, -inf,   3e38, -3e38, 3e38 });
    run(c, g, 1, &xt, 2, outs);
    double e = exp(1), z = 1 + e + e * e, l2 = log(2);
    double sm[15] = { 0.5, 0.5, 0,  0, 1, 0,  1 / z, e / z, e * e / z,  NAN, NAN, NAN,  0.5, 0, 0.5 };
    double r = log(1 + exp(-1) + exp(-2)); /* 88, 89, 90 shifted by the max 90 */
    double lsm[15] = { -l2, -l2, -2000 - l2,  -inf, 0, -inf,  -2 - r, -1 - r, -r,
                       NAN, NAN, NAN,  -l2, -inf, -l2 };
    check_close(&outs[0], sm, "softmax");
    check_close(&outs[1], lsm, "log_softmax");
    free_all(c, 2, outs, 1, &xt);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

Test(ref_softmax, sizes_one_three_and_a_million)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "sizes");
    ic_value x1 = ict_input(g, "x1", IC_F32, "3,1");
    ic_value x3 = ict_input(g, "x3", IC_F64, "3");
    ic_value xb = ict_input(g, "xb", IC_F32, "1000003");
    ic_attrs a = attrs(IC_OP_SOFTMAX);
    a.dim = 1;
    ic_operand in1[1] = { ic_val(x1) }, in3[1] = { ic_val(x3) }, inb[1] = { ic_val(xb) };
    output(g, node(g, "s1", IC_OP_SOFTMAX, 1, in1, &a));
    a.dim = 0;
    output(g, node(g, "s3", IC_OP_SOFTMAX, 1, in3, &a));
    output(g, node(g, "sb", IC_OP_SOFTMAX, 1, inb, &a));
    a = attrs(IC_OP_LOG_SOFTMAX);
    a.dim = -1;
    output(g, node(g, "lb", IC_OP_LOG_SOFTMAX, 1, inb, &a));
    ic_tensor args[3] = { mkt(IC_F32, "3,1"), mkt(IC_F64, "3"), mkt(IC_F32, "1000003") }, outs[4];
    fill_vals(&args[0], (double[]){ 5, -7, 0 });
    fill_vals(&args[1], (double[]){ 0, log(2), log(5) }); /* softmax = 1/8, 2/8, 5/8 */
    fill_rand(&args[2], 7, 20);
    run(c, g, 3, args, 4, outs);
    check_close(&outs[0], (double[]){ 1, 1, 1 }, "softmax over a size-1 dim");
    check_close(&outs[1], (double[]){ 0.125, 0.25, 0.625 }, "softmax of log(1,2,5)");
    double *xv = values(&args[2]), *want = malloc(1000003 * sizeof *want);
    softmax_ref(xv, 1, 1000003, 1, false, want);
    check_close(&outs[2], want, "softmax of 1000003");
    softmax_ref(xv, 1, 1000003, 1, true, want);
    check_close(&outs[3], want, "log_softmax of 1000003");
    double sum = 0;
    for (int64_t i = 0; i < 1000003; i++)
        sum += ict_get_f(&outs[2], i);
    cr_assert(fabs(sum - 1) < 1e-3, "softmax of 1000003 sums to %.9g", sum);
    free(xv), free(want);
    free_all(c, 4, outs, 3, args);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* ---- layer_norm, rms_norm ---- */

static ic_attrs norm_attrs(ic_op op, int n, const int64_t *shape)
{
    ic_attrs a = attrs(op);
    a.nshape = n;
    for (int i = 0; i < n; i++)
        a.shape[i] = ic_dim_const(shape[i]);
    return a;
}

/* x [3,4,5] over normalized_shape [4,5]: weight and bias given, weight only, bias only
 * (weight null), neither (null, null), and x alone. */
Test(ref_layer_norm, with_and_without_weight_and_bias)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "ln");
    ic_value x = ict_input(g, "x", IC_F32, "3,4,5");
    ic_value w = ict_input(g, "w", IC_F32, "4,5"), b = ict_input(g, "b", IC_F32, "4,5");
    ic_attrs a = norm_attrs(IC_OP_LAYER_NORM, 2, (int64_t[]){ 4, 5 });
    ic_operand wb[3] = { ic_val(x), ic_val(w), ic_val(b) }, wo[2] = { ic_val(x), ic_val(w) };
    ic_operand bo[3] = { ic_val(x), ic_none(), ic_val(b) }, nn[3] = { ic_val(x), ic_none(), ic_none() };
    ic_operand xo[1] = { ic_val(x) };
    output(g, node(g, "wb", IC_OP_LAYER_NORM, 3, wb, &a));
    output(g, node(g, "wo", IC_OP_LAYER_NORM, 2, wo, &a));
    output(g, node(g, "bo", IC_OP_LAYER_NORM, 3, bo, &a));
    output(g, node(g, "nn", IC_OP_LAYER_NORM, 3, nn, &a));
    output(g, node(g, "xo", IC_OP_LAYER_NORM, 1, xo, &a));
    ic_tensor args[3] = { mkt(IC_F32, "3,4,5"), mkt(IC_F32, "4,5"), mkt(IC_F32, "4,5") }, outs[5];
    fill_rand(&args[0], 11, 3);
    fill_rand(&args[1], 12, 2);
    fill_rand(&args[2], 13, 1);
    run(c, g, 3, args, 5, outs);
    double *xv = values(&args[0]), *wv = values(&args[1]), *bv = values(&args[2]), want[60];
    const double *ws[5] = { wv, wv, NULL, NULL, NULL }, *bs[5] = { bv, NULL, bv, NULL, NULL };
    const char *names[5] = { "weight and bias", "weight only", "bias only", "null weight and bias", "x only" };
    for (int k = 0; k < 5; k++) {
        check_shape(&outs[k], IC_F32, "3,4,5", names[k]);
        layer_norm_ref(xv, 3, 20, ws[k], bs[k], 1e-5, want);
        check_close(&outs[k], want, names[k]);
    }
    free(xv), free(wv), free(bv);
    free_all(c, 5, outs, 3, args);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

Test(ref_layer_norm, every_float_dtype_and_eps)
{
    for (int d = 0; d < 4; d++) {
        ic_dtype dt = float_dtypes[d];
        ic_ctx *c = ict_ctx();
        ic_graph *g = ict_graph(c, "ln_dt");
        ic_value x = ict_input(g, "x", dt, "2,7");
        ic_value w = ict_input(g, "w", dt, "7"), b = ict_input(g, "b", dt, "7");
        ic_attrs a = norm_attrs(IC_OP_LAYER_NORM, 1, (int64_t[]){ 7 });
        a.eps = 0.5; /* large enough to matter in every dtype */
        ic_operand in[3] = { ic_val(x), ic_val(w), ic_val(b) };
        output(g, node(g, "ln", IC_OP_LAYER_NORM, 3, in, &a));
        ic_tensor args[3] = { mkt(dt, "2,7"), mkt(dt, "7"), mkt(dt, "7") }, out;
        fill_rand(&args[0], 21 + d, 2);
        fill_rand(&args[1], 22 + d, 2);
        fill_rand(&args[2], 23 + d, 1);
        run(c, g, 3, args, 1, &out);
        double *xv = values(&args[0]), *wv = values(&args[1]), *bv = values(&args[2]), want[14];
        layer_norm_ref(xv, 2, 7, wv, bv, 0.5, want);
        check_shape(&out, dt, "2,7", "layer_norm");
        check_close(&out, want, "layer_norm eps 0.5");
        free(xv), free(wv), free(bv);
        free_all(c, 1, &out, 3, args);
        ic_graph_destroy(g);
        ic_ctx_destroy(c);
    }
}

/* A constant row has variance 0: the result is exactly the bias. One row of 1000003. */
Test(ref_layer_norm, constant_rows_and_a_million_elements)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "ln_big");
    ic_value k = ict_input(g, "k", IC_F32, "2,3");
    ic_value b = ict_input(g, "b", IC_F32, "3");
    ic_value x = ict_input(g, "x", IC_F32, "1000003");
    ic_attrs a = norm_attrs(IC_OP_LAYER_NORM, 1, (int64_t[]){ 3 });
    ic_operand kn[3] = { ic_val(k), ic_none(), ic_val(b) };
    output(g, node(g, "kn", IC_OP_LAYER_NORM, 3, kn, &a));
    a = norm_attrs(IC_OP_LAYER_NORM, 1, (int64_t[]){ 1000003 });
    ic_operand xn[1] = { ic_val(x) };
    output(g, node(g, "xn", IC_OP_LAYER_NORM, 1, xn, &a));
    ic_tensor args[3] = { mkt(IC_F32, "2,3"), mkt(IC_F32, "3"), mkt(IC_F32, "1000003") }, outs[2];
    fill_vals(&args[0], (double[]){ 5, 5, 5, -2.5, -2.5, -2.5 });
    fill_vals(&args[1], (double[]){ 0.5, -1, 3 });
    for (int64_t i = 0; i < 1000003; i++) /* mean 3 + 1/1000003-ish, far from 0: tests the centring */
        ((float *)args[2].data)[i] = (float)(1000 + (i % 7));
    run(c, g, 3, args, 2, outs);
    check_close(&outs[0], (double[]){ 0.5, -1, 3, 0.5, -1, 3 }, "layer_norm of constant rows");
    double *xv = values(&args[2]), *want = malloc(1000003 * sizeof *want);
    layer_norm_ref(xv, 1, 1000003, NULL, NULL, 1e-5, want);
    check_close(&outs[1], want, "layer_norm of 1000003");
    free(xv), free(want);
    free_all(c, 2, outs, 3, args);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

Test(ref_rms_norm, with_and_without_weight_every_float_dtype)
{
    for (int d = 0; d < 4; d++) {
        ic_dtype dt = float_dtypes[d];
        ic_ctx *c = ict_ctx();
        ic_graph *g = ict_graph(c, "rms");
        ic_value x = ict_input(g, "x", dt, "3,2,3");
        ic_value w = ict_input(g, "w", dt, "2,3");
        ic_attrs a = norm_attrs(IC_OP_RMS_NORM, 2, (int64_t[]){ 2, 3 });
        ic_operand in_w[2] = { ic_val(x), ic_val(w) }, in_n[2] = { ic_val(x), ic_none() }, in_x[1] = { ic_val(x) };
        output(g, node(g, "rw", IC_OP_RMS_NORM, 2, in_w, &a));
        output(g, node(g, "rn", IC_OP_RMS_NORM, 2, in_n, &a));
        a.eps = 0.25;
        output(g, node(g, "rx", IC_OP_RMS_NORM, 1, in_x, &a));
        ic_tensor args[2] = { mkt(dt, "3,2,3"), mkt(dt, "2,3") }, outs[3];
        fill_rand(&args[0], 31 + d, 2);
        fill_rand(&args[1], 32 + d, 2);
        run(c, g, 2, args, 3, outs);
        double *xv = values(&args[0]), *wv = values(&args[1]), want[18];
        rms_norm_ref(xv, 3, 6, wv, 1e-6, want);
        check_close(&outs[0], want, "rms_norm with weight");
        rms_norm_ref(xv, 3, 6, NULL, 1e-6, want);
        check_close(&outs[1], want, "rms_norm with null weight");
        rms_norm_ref(xv, 3, 6, NULL, 0.25, want);
        check_close(&outs[2], want, "rms_norm eps 0.25, x only");
        free(xv), free(wv);
        free_all(c, 3, outs, 2, args);
        ic_graph_destroy(g);
        ic_ctx_destroy(c);
    }
}

/* ---- matmul ---- */

/* Every rank combination of torch.matmul, f32: a 1-d operand is promoted and its dim removed. */
Test(ref_matmul, vector_and_matrix_ranks)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "mm_ranks");
    ic_value v4 = ict_input(g, "v4", IC_F32, "4"), u4 = ict_input(g, "u4", IC_F32, "4");
    ic_value m34 = ict_input(g, "m34", IC_F32, "3,4"), m42 = ict_input(g, "m42", IC_F32, "4,2");
    ic_value b243 = ict_input(g, "b243", IC_F32, "2,4,3"), b234 = ict_input(g, "b234", IC_F32, "2,3,4");
    output(g, node2(g, "dot", IC_OP_MATMUL, ic_val(v4), ic_val(u4), NULL));    /* [] */
    output(g, node2(g, "mv", IC_OP_MATMUL, ic_val(m34), ic_val(v4), NULL));   /* [3] */
    output(g, node2(g, "vm", IC_OP_MATMUL, ic_val(v4), ic_val(m42), NULL));   /* [2] */
    output(g, node2(g, "mm", IC_OP_MATMUL, ic_val(m34), ic_val(m42), NULL));  /* [3,2] */
    output(g, node2(g, "vb", IC_OP_MATMUL, ic_val(v4), ic_val(b243), NULL));  /* [2,3] */
    output(g, node2(g, "bv", IC_OP_MATMUL, ic_val(b234), ic_val(u4), NULL));  /* [2,3] */
    ic_tensor args[6] = { mkt(IC_F32, "4"), mkt(IC_F32, "4"), mkt(IC_F32, "3,4"), mkt(IC_F32, "4,2"),
                          mkt(IC_F32, "2,4,3"), mkt(IC_F32, "2,3,4") }, outs[6];
    fill_vals(&args[0], (double[]){ 1, 2, 3, 4 });
    fill_vals(&args[1], (double[]){ 0.5, -1, 2, 0 });
    for (int i = 2; i < 6; i++)
        fill_rand(&args[i], 40 + i, 2);
    run(c, g, 6, args, 6, outs);
    double *v = values(&args[0]), *u = values(&args[1]), *a = values(&args[2]), *b = values(&args[3]);
    double *p = values(&args[4]), *q = values(&args[5]), want[6];
    check_shape(&outs[0], IC_F32, "", "dot");
    check_close(&outs[0], (double[]){ 0.5 - 2 + 6 }, "[1,2,3,4] . [0.5,-1,2,0]");
    mm_ref(a, 4, 1, v, 1, 1, 3, 4, 1, want);
    check_shape(&outs[1], IC_F32, "3", "matrix x vector");
    check_close(&outs[1], want, "matrix x vector");
    mm_ref(v, 4, 1, b, 2, 1, 1, 4, 2, want);
    check_shape(&outs[2], IC_F32, "2", "vector x matrix");
    check_close(&outs[2], want, "vector x matrix");
    mm_ref(a, 4, 1, b, 2, 1, 3, 4, 2, want);
    check_shape(&outs[3], IC_F32, "3,2", "matrix x matrix");
    check_close(&outs[3], want, "matrix x matrix");
    for (int t = 0; t < 2; t++)
        mm_ref(v, 4, 1, p + t * 12, 3, 1, 1, 4, 3, want + t * 3);
    check_shape(&outs[4], IC_F32, "2,3", "vector x batch");
    check_close(&outs[4], want, "vector x batch");
    for (int t = 0; t < 2; t++)
        mm_ref(q + t * 12, 4, 1, u, 1, 1, 3, 4, 1, want + t * 3);
    check_shape(&outs[5], IC_F32, "2,3", "batch x vector");
    check_close(&outs[5], want, "batch x vector");
    free(v), free(u), free(a), free(b), free(p), free(q);
    free_all(c, 6, outs, 6, args);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* [2,1,3,4] x [5,4,2] -> [2,5,3,2]: batch dims broadcast, out[i,j] = a[i,0] @ b[j]. */
Test(ref_matmul, batch_broadcast_every_float_dtype)
{
    for (int d = 0; d < 4; d++) {
        ic_dtype dt = float_dtypes[d];
        ic_ctx *c = ict_ctx();
        ic_graph *g = ict_graph(c, "mm_bcast");
        ic_value a = ict_input(g, "a", dt, "2,1,3,4"), b = ict_input(g, "b", dt, "5,4,2");
        ic_value b1 = ict_input(g, "b1", dt, "1,4,2");
        output(g, node2(g, "ab", IC_OP_MATMUL, ic_val(a), ic_val(b), NULL));
        output(g, node2(g, "ab1", IC_OP_MATMUL, ic_val(a), ic_val(b1), NULL));
        ic_tensor args[3] = { mkt(dt, "2,1,3,4"), mkt(dt, "5,4,2"), mkt(dt, "1,4,2") }, outs[2];
        fill_rand(&args[0], 50 + d, 2);
        fill_rand(&args[1], 51 + d, 2);
        fill_rand(&args[2], 52 + d, 2);
        run(c, g, 3, args, 2, outs);
        double *av = values(&args[0]), *bv = values(&args[1]), *b1v = values(&args[2]), want[60];
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 5; j++)
                mm_ref(av + i * 12, 4, 1, bv + j * 8, 2, 1, 3, 4, 2, want + (i * 5 + j) * 6);
        check_shape(&outs[0], dt, "2,5,3,2", "[2,1,3,4] x [5,4,2]");
        check_close(&outs[0], want, "[2,1,3,4] x [5,4,2]");
        for (int i = 0; i < 2; i++)
            mm_ref(av + i * 12, 4, 1, b1v, 2, 1, 3, 4, 2, want + i * 6);
        check_shape(&outs[1], dt, "2,1,3,2", "[2,1,3,4] x [1,4,2]");
        check_close(&outs[1], want, "[2,1,3,4] x [1,4,2]");
        free(av), free(bv), free(b1v);
        free_all(c, 2, outs, 3, args);
        ic_graph_destroy(g);
        ic_ctx_destroy(c);
    }
}

/* Integer matmul is exact, products and sums past 2^53 included. */
Test(ref_matmul, integer_dtypes_exact)
{
    ic_dtype dts[2] = { IC_I32, IC_I64 };
    for (int d = 0; d < 2; d++) {
        ic_ctx *c = ict_ctx();
        ic_graph *g = ict_graph(c, "mm_int");
        ic_value a = ict_input(g, "a", dts[d], "2,3"), b = ict_input(g, "b", dts[d], "3,2");
        output(g, node2(g, "ab", IC_OP_MATMUL, ic_val(a), ic_val(b), NULL));
        ic_tensor args[2] = { mkt(dts[d], "2,3"), mkt(dts[d], "3,2") }, out;
        fill_vals(&args[0], (double[]){ 1, 2, 3, 4, 5, 6 });
        fill_vals(&args[1], (double[]){ 7, 8, 9, 10, 11, -12 });
        run(c, g, 2, args, 1, &out);
        check_shape(&out, dts[d], "2,2", "int matmul");
        check_ints(&out, (int64_t[]){ 58, -8, 139, 10 }, "[[1,2,3],[4,5,6]] x [[7,8],[9,10],[11,-12]]");
        free_all(c, 1, &out, 2, args);
        ic_graph_destroy(g);
        ic_ctx_destroy(c);
    }
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "mm_i64");
    ic_value a = ict_input(g, "a", IC_I64, "2"), b = ict_input(g, "b", IC_I64, "2");
    output(g, node2(g, "dot", IC_OP_MATMUL, ic_val(a), ic_val(b), NULL));
    ic_tensor args[2] = { mkt(IC_I64, "2"), mkt(IC_I64, "2") }, out;
    int64_t *av = args[0].data, *bv = args[1].data;
    av[0] = (int64_t)1 << 40, av[1] = 3, bv[0] = ((int64_t)1 << 20) + 1, bv[1] = -5;
    run(c, g, 2, args, 1, &out);
    check_ints(&out, (int64_t[]){ ((int64_t)1 << 60) + ((int64_t)1 << 40) - 15 }, "2^40 (2^20 + 1) - 15");
    free_all(c, 1, &out, 2, args);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* Arguments given as strided views: a is the transpose of a row-major [4,3] buffer. */
Test(ref_matmul, strided_arguments)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "mm_strided");
    ic_value a = ict_input(g, "a", IC_F32, "3,4"), b = ict_input(g, "b", IC_F32, "4,2");
    output(g, node2(g, "ab", IC_OP_MATMUL, ic_val(a), ic_val(b), NULL));
    ic_tensor abuf = mkt(IC_F32, "4,3"), bbuf = mkt(IC_F32, "4,4"), args[2], out;
    fill_rand(&abuf, 60, 2);
    fill_rand(&bbuf, 61, 2);
    args[0] = abuf;
    args[0].shape[0] = 3, args[0].shape[1] = 4, args[0].strides[0] = 1, args[0].strides[1] = 3;
    args[1] = bbuf; /* columns 1 and 3 of a [4,4] buffer */
    args[1].shape[1] = 2, args[1].strides[1] = 2;
    args[1].data = (float *)bbuf.data + 1;
    run(c, g, 2, args, 1, &out);
    double *av = values(&abuf), *bv = values(&bbuf), want[6];
    mm_ref(av, 1, 3, bv + 1, 4, 2, 3, 4, 2, want);
    check_close(&out, want, "transposed a x column-sliced b");
    free(av), free(bv);
    ic_tensor_free(c, &out);
    free(abuf.data), free(bbuf.data);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* A symbolic batch bound at run time: x [B, 4] @ w [4, 3], then softmax over dim -1. */
Test(ref_matmul, symbolic_batch_bound_at_run_time)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "mm_sym");
    ic_value x = ict_input(g, "x", IC_F32, "B,4"), w = ict_input(g, "w", IC_F32, "4,3");
    ic_value y = node2(g, "y", IC_OP_MATMUL, ic_val(x), ic_val(w), NULL);
    ic_attrs a = attrs(IC_OP_SOFTMAX);
    a.dim = -1;
    ic_operand in[1] = { ic_val(y) };
    output(g, node(g, "p", IC_OP_SOFTMAX, 1, in, &a));
    ic_tensor args[2] = { mkt(IC_F32, "5,4"), mkt(IC_F32, "4,3") }, out;
    fill_rand(&args[0], 70, 2);
    fill_rand(&args[1], 71, 2);
    int64_t vals[1] = { 5 };
    run_vals(c, g, vals, 2, args, 1, &out);
    double *xv = values(&args[0]), *wv = values(&args[1]), yv[15], want[15];
    mm_ref(xv, 4, 1, wv, 3, 1, 5, 4, 3, yv);
    for (int i = 0; i < 15; i++)
        yv[i] = (float)yv[i]; /* y is an f32 tensor before the softmax */
    softmax_ref(yv, 5, 3, 1, false, want);
    check_shape(&out, IC_F32, "5,3", "softmax(x @ w) with B = 5");
    check_close(&out, want, "softmax(x @ w) with B = 5");
    free(xv), free(wv);
    free_all(c, 1, &out, 2, args);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* ---- bmm ---- */

Test(ref_bmm, batches_f32_f16_i64)
{
    ic_dtype dts[3] = { IC_F32, IC_F16, IC_I64 };
    for (int d = 0; d < 3; d++) {
        ic_ctx *c = ict_ctx();
        ic_graph *g = ict_graph(c, "bmm");
        ic_value a = ict_input(g, "a", dts[d], "3,2,4"), b = ict_input(g, "b", dts[d], "3,4,5");
        output(g, node2(g, "ab", IC_OP_BMM, ic_val(a), ic_val(b), NULL));
        ic_tensor args[2] = { mkt(dts[d], "3,2,4"), mkt(dts[d], "3,4,5") }, out;
        fill_rand(&args[0], 80 + d, dts[d] == IC_I64 ? 9 : 2);
        fill_rand(&args[1], 81 + d, dts[d] == IC_I64 ? 9 : 2);
        run(c, g, 2, args, 1, &out);
        double *av = values(&args[0]), *bv = values(&args[1]), want[30];
        for (int t = 0; t < 3; t++)
            mm_ref(av + t * 8, 4, 1, bv + t * 20, 5, 1, 2, 4, 5, want + t * 10);
        check_shape(&out, dts[d], "3,2,5", "bmm");
        check_close(&out, want, "bmm"); /* exact for i64: small integers */
        free(av), free(bv);
        free_all(c, 1, &out, 2, args);
        ic_graph_destroy(g);
        ic_ctx_destroy(c);
    }
}

/* ---- linear ---- */

/* x [2,3,4], weight [5,4]: bias [5], bias [3,1] (broadcast over the batch), 0-d bias,
 * null bias and no bias; a 1-d weight [4] drops the output dim. */
Test(ref_linear, bias_shapes_and_vector_weight)
{
    for (int d = 0; d < 4; d++) {
        ic_dtype dt = float_dtypes[d];
        ic_ctx *c = ict_ctx();
        ic_graph *g = ict_graph(c, "linear");
        ic_value x = ict_input(g, "x", dt, "2,3,4"), w = ict_input(g, "w", dt, "5,4");
        ic_value b5 = ict_input(g, "b5", dt, "5"), b31 = ict_input(g, "b31", dt, "3,1");
        ic_value b0 = ict_input(g, "b0", dt, ""), wv = ict_input(g, "wv", dt, "4");
        ic_operand l1[3] = { ic_val(x), ic_val(w), ic_val(b5) }, l2[3] = { ic_val(x), ic_val(w), ic_val(b31) };
        ic_operand l3[3] = { ic_val(x), ic_val(w), ic_none() }, l4[2] = { ic_val(x), ic_val(w) };
        ic_operand l5[3] = { ic_val(x), ic_val(wv), ic_val(b0) };
        output(g, node(g, "l1", IC_OP_LINEAR, 3, l1, NULL));
        output(g, node(g, "l2", IC_OP_LINEAR, 3, l2, NULL));
        output(g, node(g, "l3", IC_OP_LINEAR, 3, l3, NULL));
        output(g, node(g, "l4", IC_OP_LINEAR, 2, l4, NULL));
        output(g, node(g, "l5", IC_OP_LINEAR, 3, l5, NULL));
        ic_tensor args[6] = { mkt(dt, "2,3,4"), mkt(dt, "5,4"), mkt(dt, "5"), mkt(dt, "3,1"), mkt(dt, ""),
                              mkt(dt, "4") }, outs[5];
        for (int i = 0; i < 6; i++)
            fill_rand(&args[i], 90 + 10 * d + i, 2);
        run(c, g, 6, args, 5, outs);
        double *xv = values(&args[0]), *W = values(&args[1]), *B5 = values(&args[2]);
        double *B31 = values(&args[3]), *B0 = values(&args[4]), *WV = values(&args[5]);
        double base[30], want[30];
        mm_ref(xv, 4, 1, W, 1, 4, 6, 4, 5, base); /* x @ W^T: W read with row stride 1, column stride 4 */
        for (int r = 0; r < 6; r++)
            for (int o = 0; o < 5; o++)
                want[r * 5 + o] = base[r * 5 + o] + B5[o];
        check_shape(&outs[0], dt, "2,3,5", "linear bias [5]");
        check_close(&outs[0], want, "linear bias [5]");
        for (int r = 0; r < 6; r++)
            for (int o = 0; o < 5; o++)
                want[r * 5 + o] = base[r * 5 + o] + B31[r % 3];
        check_close(&outs[1], want, "linear bias [3,1]");
        check_close(&outs[2], base, "linear null bias");
        check_close(&outs[3], base, "linear without bias");
        mm_ref(xv, 4, 1, WV, 1, 1, 6, 4, 1, want);
        for (int r = 0; r < 6; r++)
            want[r] += B0[0];
        check_shape(&outs[4], dt, "2,3", "linear 1-d weight");
        check_close(&outs[4], want, "linear 1-d weight, 0-d bias");
        free(xv), free(W), free(B5), free(B31), free(B0), free(WV);
        free_all(c, 5, outs, 6, args);
        ic_graph_destroy(g);
        ic_ctx_destroy(c);
    }
}

Test(ref_linear, integer_exact)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "linear_int");
    ic_value x = ict_input(g, "x", IC_I64, "2,2"), w = ict_input(g, "w", IC_I64, "3,2"), b = ict_input(g, "b", IC_I64, "3");
    ic_operand in[3] = { ic_val(x), ic_val(w), ic_val(b) };
    output(g, node(g, "l", IC_OP_LINEAR, 3, in, NULL));
    ic_tensor args[3] = { mkt(IC_I64, "2,2"), mkt(IC_I64, "3,2"), mkt(IC_I64, "3") }, out;
    fill_vals(&args[0], (double[]){ 1, 2, -3, 4 });
    fill_vals(&args[1], (double[]){ 5, 6, 7, 8, 9, 10 });
    fill_vals(&args[2], (double[]){ 100, 200, 300 });
    run(c, g, 3, args, 1, &out);
    /* row [1,2]: 5+12, 7+16, 9+20; row [-3,4]: -15+24, -21+32, -27+40; plus bias */
    check_ints(&out, (int64_t[]){ 117, 223, 329, 109, 211, 313 }, "integer linear");
    free_all(c, 1, &out, 3, args);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* ---- blocks ---- */

/* softmax(q @ k^T / sqrt(d)) @ v with q, k, v [2, 2, 5, 4] (batch, heads, seq, dim). */
Test(ref_blocks, attention)
{
    enum { B = 2, H = 2, S = 5, D = 4 };
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "attention");
    ic_value q = ict_input(g, "q", IC_F32, "2,2,5,4"), k = ict_input(g, "k", IC_F32, "2,2,5,4");
    ic_value v = ict_input(g, "v", IC_F32, "2,2,5,4");
    ic_attrs a = attrs(IC_OP_TRANSPOSE);
    a.dim0 = -2, a.dim1 = -1;
    ic_operand kin[1] = { ic_val(k) };
    ic_value kt = node(g, "kt", IC_OP_TRANSPOSE, 1, kin, &a);
    ic_value s = node2(g, "scores", IC_OP_MATMUL, ic_val(q), ic_val(kt), NULL);
    ic_value sc = node2(g, "scaled", IC_OP_DIV, ic_val(s), ic_scalar_f(2.0), NULL); /* sqrt(4) */
    a = attrs(IC_OP_SOFTMAX);
    a.dim = -1;
    ic_operand pin[1] = { ic_val(sc) };
    ic_value p = node(g, "probs", IC_OP_SOFTMAX, 1, pin, &a);
    output(g, node2(g, "ctx", IC_OP_MATMUL, ic_val(p), ic_val(v), NULL));
    ic_tensor args[3] = { mkt(IC_F32, "2,2,5,4"), mkt(IC_F32, "2,2,5,4"), mkt(IC_F32, "2,2,5,4") }, out;
    for (int i = 0; i < 3; i++)
        fill_rand(&args[i], 100 + i, 2);
    run(c, g, 3, args, 1, &out);
    double *qv = values(&args[0]), *kv = values(&args[1]), *vv = values(&args[2]);
    double want[B * H * S * D];
    for (int bh = 0; bh < B * H; bh++) {
        const double *Q = qv + bh * S * D, *K = kv + bh * S * D, *V = vv + bh * S * D;
        for (int i = 0; i < S; i++) {
            double sc_row[S], m = -INFINITY, sum = 0;
            for (int j = 0; j < S; j++) {
                double dot = 0;
                for (int t = 0; t < D; t++)
                    dot += Q[i * D + t] * K[j * D + t];
                sc_row[j] = dot / sqrt((double)D);
                m = fmax(m, sc_row[j]);
            }
            for (int j = 0; j < S; j++)
                sum += exp(sc_row[j] - m);
            for (int t = 0; t < D; t++) {
                double o = 0;
                for (int j = 0; j < S; j++)
                    o += exp(sc_row[j] - m) / sum * V[j * D + t];
                want[(bh * S + i) * D + t] = o;
            }
        }
    }
    check_shape(&out, IC_F32, "2,2,5,4", "attention");
    check_close(&out, want, "attention");
    free(qv), free(kv), free(vv);
    free_all(c, 1, &out, 3, args);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* layer_norm(x + linear(gelu(linear(x, W1, b1)), W2, b2)) with x [4, 8], hidden 16. */
Test(ref_blocks, bert_feed_forward)
{
    enum { R = 4, E = 8, F = 16 };
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "ffn");
    ic_value x = ict_input(g, "x", IC_F32, "4,8");
    ic_value w1 = ict_input(g, "w1", IC_F32, "16,8"), b1 = ict_input(g, "b1", IC_F32, "16");
    ic_value w2 = ict_input(g, "w2", IC_F32, "8,16"), b2 = ict_input(g, "b2", IC_F32, "8");
    ic_value lw = ict_input(g, "lw", IC_F32, "8"), lb = ict_input(g, "lb", IC_F32, "8");
    ic_operand i1[3] = { ic_val(x), ic_val(w1), ic_val(b1) };
    ic_value h = node(g, "fc1", IC_OP_LINEAR, 3, i1, NULL);
    ic_operand ig[1] = { ic_val(h) };
    ic_value gl = node(g, "act", IC_OP_GELU, 1, ig, NULL);
    ic_operand i2[3] = { ic_val(gl), ic_val(w2), ic_val(b2) };
    ic_value y = node(g, "fc2", IC_OP_LINEAR, 3, i2, NULL);
    ic_value r = node2(g, "res", IC_OP_ADD, ic_val(y), ic_val(x), NULL);
    ic_attrs a = norm_attrs(IC_OP_LAYER_NORM, 1, (int64_t[]){ E });
    a.eps = 1e-12; /* BERT's */
    ic_operand il[3] = { ic_val(r), ic_val(lw), ic_val(lb) };
    output(g, node(g, "ln", IC_OP_LAYER_NORM, 3, il, &a));
    ic_tensor args[7] = { mkt(IC_F32, "4,8"), mkt(IC_F32, "16,8"), mkt(IC_F32, "16"), mkt(IC_F32, "8,16"),
                          mkt(IC_F32, "8"), mkt(IC_F32, "8"), mkt(IC_F32, "8") }, out;
    for (int i = 0; i < 7; i++)
        fill_rand(&args[i], 200 + i, i == 5 ? 1.5 : 1);
    run(c, g, 7, args, 1, &out);
    double *X = values(&args[0]), *W1 = values(&args[1]), *B1 = values(&args[2]), *W2 = values(&args[3]);
    double *B2 = values(&args[4]), *LW = values(&args[5]), *LB = values(&args[6]);
    double hid[R * F], res[R * E], want[R * E];
    for (int i = 0; i < R; i++)
        for (int j = 0; j < F; j++) {
            double s = B1[j];
            for (int k = 0; k < E; k++)
                s += X[i * E + k] * W1[j * E + k];
            s = (float)s;
            hid[i * F + j] = (float)(0.5 * s * (1 + erf(s / sqrt(2.0)))); /* exact gelu */
        }
    for (int i = 0; i < R; i++)
        for (int j = 0; j < E; j++) {
            double s = B2[j];
            for (int k = 0; k < F; k++)
                s += hid[i * F + k] * W2[j * F + k];
            res[i * E + j] = (float)((float)s + X[i * E + j]);
        }
    layer_norm_ref(res, R, E, LW, LB, 1e-12, want);
    check_shape(&out, IC_F32, "4,8", "feed-forward");
    check_close(&out, want, "feed-forward block");
    free(X), free(W1), free(B1), free(W2), free(B2), free(LW), free(LB);
    free_all(c, 1, &out, 7, args);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* ---- nn ops of issue 12 (reference ref_nn.c), hand-worked values ---- */

Test(ref_nn_ops, batch_norm_per_channel)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "bn");
    ic_value x = ict_input(g, "x", IC_F32, "1,2,2"), m = ict_input(g, "m", IC_F32, "2");
    ic_value v = ict_input(g, "v", IC_F32, "2"), w = ict_input(g, "w", IC_F32, "2");
    ic_value b = ict_input(g, "b", IC_F32, "2");
    ic_attrs a = attrs(IC_OP_BATCH_NORM);
    a.eps = 0;
    ic_operand in[5] = { ic_val(x), ic_val(m), ic_val(v), ic_val(w), ic_val(b) };
    output(g, node(g, "y", IC_OP_BATCH_NORM, 5, in, &a));
    ic_tensor args[5] = { mkt(IC_F32, "1,2,2"), mkt(IC_F32, "2"), mkt(IC_F32, "2"), mkt(IC_F32, "2"),
                          mkt(IC_F32, "2") }, out;
    fill_vals(&args[0], (double[]){ 1, 2, 3, 4 });
    fill_vals(&args[1], (double[]){ 1, 2 });
    fill_vals(&args[2], (double[]){ 4, 0.25 });
    fill_vals(&args[3], (double[]){ 2, 1 });
    fill_vals(&args[4], (double[]){ 0.5, -1 });
    run(c, g, 5, args, 1, &out);
    /* channel 0: (x - 1) * 2 / 2 + 0.5; channel 1: (x - 2) * 1 / 0.5 - 1 */
    check_close(&out, (double[]){ 0.5, 1.5, 1, 3 }, "batch_norm");
    for (int i = 0; i < 5; i++)
        free(args[i].data);
    ic_tensor_free(c, &out);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

Test(ref_nn_ops, attention_causal_and_fully_masked_rows)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "att");
    ic_value q = ict_input(g, "q", IC_F32, "2,1"), k = ict_input(g, "k", IC_F32, "2,1");
    ic_value v = ict_input(g, "v", IC_F32, "2,1"), m = ict_input(g, "m", IC_BOOL, "2,2");
    ic_attrs a = attrs(IC_OP_SDPA);
    ic_operand in[4] = { ic_val(q), ic_val(k), ic_val(v), ic_val(m) };
    output(g, node(g, "masked", IC_OP_SDPA, 4, in, &a));
    a.is_causal = true;
    output(g, node(g, "causal", IC_OP_SDPA, 3, in, &a));
    ic_tensor args[4] = { mkt(IC_F32, "2,1"), mkt(IC_F32, "2,1"), mkt(IC_F32, "2,1"), mkt(IC_BOOL, "2,2") };
    ic_tensor out[2];
    fill_vals(&args[0], (double[]){ 1, 1 });
    fill_vals(&args[1], (double[]){ 0, 0 });
    fill_vals(&args[2], (double[]){ 3, 5 });
    ((uint8_t *)args[3].data)[2] = 1; /* row 0: nothing kept (NaN, as PyTorch's math path) */
    run(c, g, 4, args, 2, out);
    cr_assert(isnan(ict_get_f(&out[0], 0)), "a fully masked row is NaN, got %g", ict_get_f(&out[0], 0));
    cr_assert_float_eq(ict_get_f(&out[0], 1), 3.0, 1e-6);
    /* causal, equal scores: row 0 sees v[0], row 1 the mean of both */
    check_close(&out[1], (double[]){ 3, 4 }, "causal");
    for (int i = 0; i < 4; i++)
        free(args[i].data);
    ic_tensor_free(c, &out[0]);
    ic_tensor_free(c, &out[1]);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

Test(ref_nn_ops, gather_index_select_and_their_range_errors)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "gi");
    ic_value x = ict_input(g, "x", IC_I32, "2,3"), ix = ict_input(g, "ix", IC_I64, "2,2");
    ic_value s = ict_input(g, "s", IC_I32, "3");
    ic_attrs a = attrs(IC_OP_GATHER);
    a.dim = 1;
    output(g, node2(g, "ga", IC_OP_GATHER, ic_val(x), ic_val(ix), &a));
    ic_attrs b = attrs(IC_OP_INDEX_SELECT);
    b.dim = 0;
    output(g, node2(g, "sel", IC_OP_INDEX_SELECT, ic_val(x), ic_val(s), &b));
    ic_tensor args[3] = { mkt(IC_I32, "2,3"), mkt(IC_I64, "2,2"), mkt(IC_I32, "3") }, out[2];
    fill_vals(&args[0], (double[]){ 10, 11, 12, 20, 21, 22 });
    fill_vals(&args[1], (double[]){ 2, 0, 1, 1 });
    fill_vals(&args[2], (double[]){ 1, 1, 0 });
    run(c, g, 3, args, 2, out);
    int64_t want_g[] = { 12, 10, 21, 21 }, want_s[] = { 20, 21, 22, 20, 21, 22, 10, 11, 12 };
    for (int i = 0; i < 4; i++)
        cr_assert_eq(ict_get_i(&out[0], i), want_g[i]);
    for (int i = 0; i < 9; i++)
        cr_assert_eq(ict_get_i(&out[1], i), want_s[i]);
    ic_tensor_free(c, &out[0]);
    ic_tensor_free(c, &out[1]);
    ((int64_t *)args[1].data)[3] = 3;
    ict_assert_error(c, ic_ref_run(c, g, NULL, 3, args, 2, out), IC_EINVAL, "node 'ga'", "(gather)",
                     "index 3", "size 3");
    ((int64_t *)args[1].data)[3] = 0;
    ((int32_t *)args[2].data)[1] = -1;
    ict_assert_error(c, ic_ref_run(c, g, NULL, 3, args, 2, out), IC_EINVAL, "node 'sel'", "(index_select)",
                     "index -1");
    for (int i = 0; i < 3; i++)
        free(args[i].data);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

Test(ref_nn_ops, cumsum_exact_and_triangles)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "cs");
    ic_value x = ict_input(g, "x", IC_I64, "2,3");
    ic_attrs a = attrs(IC_OP_CUMSUM);
    a.dim = 1;
    output(g, node(g, "cs", IC_OP_CUMSUM, 1, (ic_operand[]){ ic_val(x) }, &a));
    ic_attrs t = attrs(IC_OP_TRIU);
    t.diagonal = 1;
    output(g, node(g, "tu", IC_OP_TRIU, 1, (ic_operand[]){ ic_val(x) }, &t));
    t.diagonal = -1;
    output(g, node(g, "tl", IC_OP_TRIL, 1, (ic_operand[]){ ic_val(x) }, &t));
    ic_tensor arg = mkt(IC_I64, "2,3"), out[3];
    int64_t big = (int64_t)1 << 60, *d = arg.data;
    d[0] = big, d[1] = 1, d[2] = -big, d[3] = 4, d[4] = 5, d[5] = 6;
    run(c, g, 1, &arg, 3, out);
    int64_t want_cs[] = { big, big + 1, 1, 4, 9, 15 }, want_tu[] = { 0, 1, -big, 0, 0, 6 };
    int64_t want_tl[] = { 0, 0, 0, 4, 0, 0 };
    for (int i = 0; i < 6; i++) {
        cr_assert_eq(ict_get_i(&out[0], i), want_cs[i], "cumsum %d", i);
        cr_assert_eq(ict_get_i(&out[1], i), want_tu[i], "triu %d", i);
        cr_assert_eq(ict_get_i(&out[2], i), want_tl[i], "tril %d", i);
    }
    free(arg.data);
    for (int i = 0; i < 3; i++)
        ic_tensor_free(c, &out[i]);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}
