/* test_red_reductions.c - the compiled reduction paths against expectations computed here in
 * double: column reductions split across threads (one thread, two, three: the combine order),
 * short rows run a few at a time (row counts that leave remainders), softmax keeping exp(x -
 * max) in its output, f32 two-pass layer_norm on rows with a large mean, and NaN / signed
 * zero in max reductions. */
#include <math.h>
#include "../Lower/lowertest.h"
#include "ic/runtime.h"

/* ---- helpers ---- */

static ic_compiled *compile(ic_ctx *c, const ic_graph *g, int threads)
{
    ic_compile_options o;
    ic_compile_options_init(&o);
    o.threads = threads;
    ic_compiled *cc = NULL;
    cr_assert_eq(ic_compile(c, g, &o, &cc), IC_OK, "ic_compile '%s': %s", ic_graph_name(g), ic_last_error(c));
    return cc;
}

static void tensor(ic_tensor *t, ic_dtype dt, int rank, const int64_t *shape)
{
    ic_tensor_init(t, dt, rank, shape, NULL);
    cr_assert_eq(ic_tensor_alloc(NULL, t), IC_OK, "alloc");
}

/* |got - want| <= atol + rtol |want|, NaN only where want is NaN. */
static void expect_close(const ic_tensor *got, const double *want, double rtol, double atol,
                         const char *what)
{
    int64_t n = ic_tensor_numel(got);
    for (int64_t i = 0; i < n; i++) {
        double g = ic_tensor_get(got, i), w = want[i];
        if (isnan(w)) {
            cr_assert(isnan(g), "%s[%lld]: got %.9g, want nan", what, (long long)i, g);
            continue;
        }
        cr_assert(fabs(g - w) <= atol + rtol * fabs(w), "%s[%lld]: got %.9g, want %.9g", what,
                  (long long)i, g, w);
    }
}

static double uniform(uint64_t *s) { return (double)(lt_rand(s) >> 11) / 9007199254740992.0; }

/* Compiles g on `threads` threads, runs it on in[0..nin) into its one f32 output of the
 * given shape and checks that against want. */
static void run_one(ic_ctx *c, const ic_graph *g, int threads, int nin, ic_tensor *in, int rank,
                    const int64_t *shape, const double *want, double rtol, double atol,
                    const char *what)
{
    ic_compiled *cc = compile(c, g, threads);
    ic_tensor out;
    tensor(&out, IC_F32, rank, shape);
    cr_assert_eq(ic_run(cc, nin, in, 1, &out), IC_OK, "ic_run: %s", ic_last_error(c));
    expect_close(&out, want, rtol, atol, what);
    ic_tensor_free(NULL, &out);
    ic_compiled_destroy(cc);
}

/* ---- column reductions: rows split across the threads ---- */

/* sum, amax, argmax and mean over dim 0 of [R, C], with C not a multiple of the vector width
 * and equal maxima in different row blocks (argmax is the first). */
Test(red, column_reductions_any_team)
{
    enum { R = 1003, C = 77 };
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "colred");
    ic_value x = ict_input(g, "x", IC_F32, "1003,77");
    ic_attrs d0 = lt_dims(IC_OP_SUM, 1, (int64_t[]){ 0 }, false);
    lt_out(g, lt_at(g, "s", IC_OP_SUM, x, &d0));
    d0 = lt_dims(IC_OP_AMAX, 1, (int64_t[]){ 0 }, false);
    lt_out(g, lt_at(g, "m", IC_OP_AMAX, x, &d0));
    ic_attrs am = lt_attrs(IC_OP_ARGMAX);
    am.dim = 0;
    lt_out(g, lt_at(g, "a", IC_OP_ARGMAX, x, &am));
    d0 = lt_dims(IC_OP_MEAN, 1, (int64_t[]){ 0 }, false);
    lt_out(g, lt_at(g, "mu", IC_OP_MEAN, x, &d0));
    ic_tensor in, out[4];
    tensor(&in, IC_F32, 2, (int64_t[]){ R, C });
    float *xv = in.data;
    uint64_t seed = 7;
    for (int i = 0; i < R * C; i++)
        xv[i] = (float)(uniform(&seed) * 4 - 2);
    for (int j = 0; j < C; j++) /* ties: column j's max 3 + j at rows j and R - 1 - j */
        xv[j * C + j] = xv[(R - 1 - j) * C + j] = 3.0f + (float)j;
    double ws[C], wm[C], wa[C], wmu[C];
    for (int j = 0; j < C; j++) {
        ws[j] = 0, wm[j] = -INFINITY, wa[j] = 0;
        for (int i = 0; i < R; i++) {
            double v = xv[i * C + j];
            ws[j] += v;
            if (v > wm[j])
                wm[j] = v, wa[j] = i;
        }
        wmu[j] = ws[j] / R;
    }
    for (int threads = 1; threads <= 3; threads++) {
        ic_compiled *cc = compile(c, g, threads);
        tensor(&out[0], IC_F32, 1, (int64_t[]){ C });
        tensor(&out[1], IC_F32, 1, (int64_t[]){ C });
        tensor(&out[2], IC_I64, 1, (int64_t[]){ C });
        tensor(&out[3], IC_F32, 1, (int64_t[]){ C });
        cr_assert_eq(ic_run(cc, 1, &in, 4, out), IC_OK, "ic_run: %s", ic_last_error(c));
        expect_close(&out[0], ws, 1e-4, 1e-4, "sum");
        expect_close(&out[1], wm, 0, 0, "amax");
        expect_close(&out[2], wa, 0, 0, "argmax");
        expect_close(&out[3], wmu, 1e-4, 1e-5, "mean");
        for (int i = 0; i < 4; i++)
            ic_tensor_free(NULL, &out[i]);
        ic_compiled_destroy(cc);
    }
    ic_tensor_free(NULL, &in);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* A NaN in one row block of a column makes that column's max NaN, whichever thread has it. */
Test(red, column_max_propagates_nan)
{
    enum { R = 600, C = 40 };
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "colnan");
    ic_value x = ict_input(g, "x", IC_F32, "600,40");
    ic_attrs d0 = lt_dims(IC_OP_AMAX, 1, (int64_t[]){ 0 }, false);
    lt_out(g, lt_at(g, "m", IC_OP_AMAX, x, &d0));
    ic_tensor in;
    tensor(&in, IC_F32, 2, (int64_t[]){ R, C });
    float *xv = in.data;
    for (int i = 0; i < R * C; i++)
        xv[i] = (float)((i * 37) % 101) - 50.0f;
    xv[3 * C + 5] = NAN;        /* first rows */
    xv[(R - 2) * C + 17] = NAN; /* last rows */
    double want[C];
    for (int j = 0; j < C; j++) {
        want[j] = -INFINITY;
        for (int i = 0; i < R; i++)
            want[j] = fmax(want[j], xv[i * C + j]);
    }
    want[5] = want[17] = NAN;
    for (int threads = 1; threads <= 2; threads++)
        run_one(c, g, threads, 1, &in, 1, (int64_t[]){ C }, want, 0, 0, "amax");
    ic_tensor_free(NULL, &in);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* Sums, minima and maxima over dim 0 fold blocks of rows in registers before each update of
 * a thread's accumulators: row counts that leave remainders on every thread (1003 over 1, 2
 * and 3 threads; one thread walks strips of columns instead, the baseline), a producer that
 * is also an output, a variance whose second pass reads the first's mean, an integer sum,
 * and NaNs in the first and last rows of a block. A kernel with an argmax (first index of
 * ties) keeps the row-by-row update. */
Test(red, column_blocks_of_rows)
{
    enum { R = 1003, C = 77 };
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "colblk");
    ic_value x = ict_input(g, "x", IC_F32, "1003,77");
    ic_value xi = ict_input(g, "xi", IC_I32, "1003,77");
    ic_value y = lt_bin(g, "y", IC_OP_MUL, ic_val(x), ic_scalar_f(3.0));
    lt_out(g, y);
    ic_attrs d0 = lt_dims(IC_OP_SUM, 1, (int64_t[]){ 0 }, false);
    lt_out(g, lt_at(g, "s", IC_OP_SUM, y, &d0));
    d0 = lt_dims(IC_OP_AMIN, 1, (int64_t[]){ 0 }, false);
    lt_out(g, lt_at(g, "mn", IC_OP_AMIN, x, &d0));
    d0 = lt_dims(IC_OP_MEAN, 1, (int64_t[]){ 0 }, true);
    ic_value mu = lt_at(g, "mu", IC_OP_MEAN, x, &d0);
    ic_value dx = lt_bin(g, "dx", IC_OP_SUB, ic_val(x), ic_val(mu));
    ic_value sq = lt_bin(g, "sq", IC_OP_MUL, ic_val(dx), ic_val(dx));
    d0 = lt_dims(IC_OP_SUM, 1, (int64_t[]){ 0 }, false);
    lt_out(g, lt_at(g, "v", IC_OP_SUM, sq, &d0));
    lt_out(g, lt_at(g, "si", IC_OP_SUM, xi, &d0));
    ic_tensor in[2], out[5];
    tensor(&in[0], IC_F32, 2, (int64_t[]){ R, C });
    tensor(&in[1], IC_I32, 2, (int64_t[]){ R, C });
    float *xv = in[0].data;
    int32_t *iv = in[1].data;
    uint64_t seed = 11;
    for (int i = 0; i < R * C; i++) {
        xv[i] = (float)(uniform(&seed) * 4 + 100); /* a large mean: the variance's two passes */
        iv[i] = (int32_t)(lt_rand(&seed) % 2000001) - 1000000;
    }
    xv[0 * C + 5] = NAN;       /* first row of the first block */
    xv[(R - 1) * C + 9] = NAN; /* the last row: a remainder row */
    xv[502 * C + 13] = NAN;    /* inside the second thread's blocks */
    double ws[C], wmn[C], wv[C], wsi[C];
    for (int j = 0; j < C; j++) {
        double sum = 0, xsum = 0, mn = INFINITY, isum = 0, m, var = 0;
        for (int i = 0; i < R; i++) {
            sum += 3.0f * xv[i * C + j];
            xsum += xv[i * C + j];
            mn = isnan(xv[i * C + j]) || isnan(mn) ? NAN : fmin(mn, xv[i * C + j]);
            isum += iv[i * C + j];
        }
        m = xsum / R;
        for (int i = 0; i < R; i++)
            var += ((double)xv[i * C + j] - m) * ((double)xv[i * C + j] - m);
        ws[j] = sum, wmn[j] = mn, wv[j] = var, wsi[j] = isum;
    }
    for (int threads = 1; threads <= 3; threads++) {
        ic_compile_options o;
        ic_compile_options_init(&o);
        o.threads = threads;
        char *ir = ict_compile_dump(c, g, &o, "llvm");
        cr_assert(threads == 1 || strstr(ir, "blk.head"), "no blocks of rows in the column kernels");
        free(ir);
        ic_compiled *cc = compile(c, g, threads);
        tensor(&out[0], IC_F32, 2, (int64_t[]){ R, C });
        for (int i = 1; i < 4; i++)
            tensor(&out[i], IC_F32, 1, (int64_t[]){ C });
        tensor(&out[4], IC_I64, 1, (int64_t[]){ C });
        cr_assert_eq(ic_run(cc, 2, in, 5, out), IC_OK, "ic_run: %s", ic_last_error(c));
        for (int i = 0; i < R * C; i++) {
            float want = 3.0f * xv[i];
            cr_assert(isnan(want) ? isnan(((float *)out[0].data)[i]) : ((float *)out[0].data)[i] == want,
                      "y[%d]", i);
        }
        expect_close(&out[1], ws, 1e-5, 1e-3, "sum");
        expect_close(&out[2], wmn, 0, 0, "amin");
        expect_close(&out[3], wv, 1e-4, 1e-3, "var");
        expect_close(&out[4], wsi, 0, 0, "int sum");
        for (int i = 0; i < 5; i++)
            ic_tensor_free(NULL, &out[i]);
        ic_compiled_destroy(cc);
    }
    /* an argmax in the kernel: row by row */
    ic_graph *ga = ict_graph(c, "colarg");
    ic_value xa = ict_input(ga, "x", IC_F32, "1003,77");
    ic_attrs am = lt_attrs(IC_OP_ARGMAX);
    am.dim = 0;
    lt_out(ga, lt_at(ga, "a", IC_OP_ARGMAX, xa, &am));
    ic_compile_options o;
    ic_compile_options_init(&o);
    o.threads = 2;
    char *ir = ict_compile_dump(c, ga, &o, "llvm");
    cr_assert(!strstr(ir, "blk.head"), "an argmax folded in blocks of rows");
    free(ir);
    ic_graph_destroy(ga);
    for (int i = 0; i < 2; i++)
        ic_tensor_free(NULL, &in[i]);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* ---- softmax ---- */

static void softmax_ref(const float *x, int rows, int n, double scale, const float *mask,
                        double *y, bool log_)
{
    for (int r = 0; r < rows; r++) {
        double m = -INFINITY, s = 0;
        for (int j = 0; j < n; j++)
            m = fmax(m, x[r * n + j] * scale + (mask ? mask[j] : 0));
        for (int j = 0; j < n; j++)
            s += exp(x[r * n + j] * scale + (mask ? mask[j] : 0) - m);
        for (int j = 0; j < n; j++) {
            double v = x[r * n + j] * scale + (mask ? mask[j] : 0) - m;
            y[r * n + j] = log_ ? v - log(s) : exp(v) / s;
        }
    }
}

/* softmax(x * 0.125 + mask) and log_softmax(x) over rows of 128 and 96 (run 3 at a time),
 * row counts that leave remainders on every thread, both softmaxes graph outputs and
 * softmax also read by a consumer in the same kernel (y * 2). */
Test(red, short_rows_softmax_with_producer_and_consumer)
{
    static const int widths[] = { 128, 96, 1000 };
    for (int w = 0; w < 3; w++) {
        int n = widths[w], rows = 4 * 7 + 3;
        char shape[32], mshape[32];
        snprintf(shape, sizeof shape, "%d,%d", rows, n);
        snprintf(mshape, sizeof mshape, "%d", n);
        ic_ctx *c = ict_ctx();
        ic_graph *g = ict_graph(c, "smrows");
        ic_value x = ict_input(g, "x", IC_F32, shape);
        ic_value mask = ict_input(g, "mask", IC_F32, mshape);
        ic_value sc = lt_bin(g, "sc", IC_OP_MUL, ic_val(x), ic_scalar_f(0.125));
        ic_value mk = lt_bin(g, "mk", IC_OP_ADD, ic_val(sc), ic_val(mask));
        ic_attrs at = lt_attrs(IC_OP_SOFTMAX);
        at.dim = -1;
        ic_value y = lt_at(g, "y", IC_OP_SOFTMAX, mk, &at);
        lt_out(g, y);
        lt_out(g, lt_bin(g, "y2", IC_OP_MUL, ic_val(y), ic_scalar_f(2.0)));
        lt_out(g, lt_at(g, "ly", IC_OP_LOG_SOFTMAX, x, &at));
        ic_tensor in[2], out[3];
        tensor(&in[0], IC_F32, 2, (int64_t[]){ rows, n });
        tensor(&in[1], IC_F32, 1, (int64_t[]){ n });
        uint64_t seed = 11 + (uint64_t)w;
        float *xv = in[0].data, *mv = in[1].data;
        for (int i = 0; i < rows * n; i++)
            xv[i] = (float)(uniform(&seed) * 40 - 20);
        for (int j = 0; j < n; j++)
            mv[j] = j % 5 == 4 ? -10000.0f : 0.0f;
        double *wy = malloc(sizeof(double) * (size_t)(rows * n) * 3);
        softmax_ref(xv, rows, n, 0.125, mv, wy, false);
        for (int i = 0; i < rows * n; i++)
            wy[rows * n + i] = 2 * wy[i];
        softmax_ref(xv, rows, n, 1.0, NULL, wy + 2 * rows * n, true);
        for (int threads = 1; threads <= 3; threads += 2) {
            ic_compiled *cc = compile(c, g, threads);
            for (int i = 0; i < 3; i++)
                tensor(&out[i], IC_F32, 2, (int64_t[]){ rows, n });
            cr_assert_eq(ic_run(cc, 2, in, 3, out), IC_OK, "ic_run: %s", ic_last_error(c));
            expect_close(&out[0], wy, 1e-4, 1e-6, "softmax");
            expect_close(&out[1], wy + rows * n, 1e-4, 1e-6, "2 softmax");
            expect_close(&out[2], wy + 2 * rows * n, 1e-4, 1e-5, "log_softmax");
            for (int i = 0; i < 3; i++)
                ic_tensor_free(NULL, &out[i]);
            ic_compiled_destroy(cc);
        }
        free(wy);
        ic_tensor_free(NULL, &in[0]);
        ic_tensor_free(NULL, &in[1]);
        ic_graph_destroy(g);
        ic_ctx_destroy(c);
    }
}

/* Softmax's max may drop a NaN (max.nan_free) and its exp leaves out the overflow side
 * (exp.le0): rows of 128 (run 3 at a time) with a NaN first or last, all -inf, a +inf, and
 * gaps whose exp underflows must still come out as the reference (NaN rows all NaN). */
Test(red, softmax_special_rows_short)
{
    enum { R = 11, N = 128 };
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "smspecial");
    ic_value x = ict_input(g, "x", IC_F32, "11,128");
    ic_attrs at = lt_attrs(IC_OP_SOFTMAX);
    at.dim = -1;
    lt_out(g, lt_at(g, "y", IC_OP_SOFTMAX, x, &at));
    at = lt_attrs(IC_OP_LOG_SOFTMAX);
    at.dim = -1;
    lt_out(g, lt_at(g, "ly", IC_OP_LOG_SOFTMAX, x, &at));
    ic_tensor in, out[2];
    tensor(&in, IC_F32, 2, (int64_t[]){ R, N });
    float *xv = in.data;
    uint64_t seed = 9;
    for (int i = 0; i < R * N; i++)
        xv[i] = (float)(uniform(&seed) * 20 - 10);
    xv[0 * N + 0] = NAN;
    xv[1 * N + 127] = NAN;
    for (int j = 0; j < N; j++)
        xv[3 * N + j] = -INFINITY, xv[6 * N + j] = j ? -200.0f : 0.0f;
    xv[4 * N + 64] = INFINITY;
    xv[9 * N + 5] = NAN, xv[9 * N + 6] = INFINITY;
    double *want = malloc(sizeof(double) * R * N), *lwant = malloc(sizeof(double) * R * N);
    softmax_ref(xv, R, N, 1.0, NULL, want, false);
    softmax_ref(xv, R, N, 1.0, NULL, lwant, true);
    ic_compile_options o;
    ic_compile_options_init(&o);
    char *dump = ict_compile_dump(c, g, &o, "fused");
    cr_assert(strstr(dump, "reduce max.nan_free") && strstr(dump, "exp.le0"), "%s", dump);
    free(dump);
    for (int threads = 1; threads <= 2; threads++) {
        ic_compiled *cc = compile(c, g, threads);
        for (int i = 0; i < 2; i++)
            tensor(&out[i], IC_F32, 2, (int64_t[]){ R, N });
        cr_assert_eq(ic_run(cc, 1, &in, 2, out), IC_OK, "ic_run: %s", ic_last_error(c));
        expect_close(&out[0], want, 1e-5, 1e-7, "softmax");
        expect_close(&out[1], lwant, 1e-5, 1e-5, "log_softmax");
        for (int i = 0; i < 2; i++)
            ic_tensor_free(NULL, &out[i]);
        ic_compiled_destroy(cc);
    }
    free(want), free(lwant);
    ic_tensor_free(NULL, &in);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* The same forms on the other loop arrangements: softmax over dim 0 (a column walk) with a
 * NaN and an all -inf column, and over one row of 1000003 (its max and sum split across the
 * threads), with and without a NaN. */
Test(red, softmax_special_columns_and_one_long_row)
{
    enum { R = 128, C = 11, L = 1000003 };
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "smcol");
    ic_value x = ict_input(g, "x", IC_F32, "128,11");
    ic_attrs at = lt_attrs(IC_OP_SOFTMAX);
    at.dim = 0;
    lt_out(g, lt_at(g, "y", IC_OP_SOFTMAX, x, &at));
    ic_tensor in;
    tensor(&in, IC_F32, 2, (int64_t[]){ R, C });
    float *xv = in.data, *xt = malloc(sizeof(float) * R * C);
    double *want = malloc(sizeof(double) * R * C), *wt = malloc(sizeof(double) * R * C);
    uint64_t seed = 21;
    for (int i = 0; i < R * C; i++)
        xv[i] = (float)(uniform(&seed) * 20 - 10);
    xv[5 * C + 2] = NAN;
    for (int i = 0; i < R; i++)
        xv[i * C + 7] = -INFINITY;
    for (int i = 0; i < R; i++) /* columns as rows for softmax_ref */
        for (int j = 0; j < C; j++)
            xt[j * R + i] = xv[i * C + j];
    softmax_ref(xt, C, R, 1.0, NULL, wt, false);
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++)
            want[i * C + j] = wt[j * R + i];
    for (int threads = 1; threads <= 2; threads++)
        run_one(c, g, threads, 1, &in, 2, (int64_t[]){ R, C }, want, 1e-5, 1e-7, "softmax dim 0");
    free(xt), free(want), free(wt);
    ic_tensor_free(NULL, &in);
    ic_graph_destroy(g);
    /* one long row */
    g = ict_graph(c, "smlong");
    x = ict_input(g, "x", IC_F32, "1,1000003");
    at.dim = -1;
    lt_out(g, lt_at(g, "y", IC_OP_SOFTMAX, x, &at));
    tensor(&in, IC_F32, 2, (int64_t[]){ 1, L });
    xv = in.data;
    want = malloc(sizeof(double) * L);
    for (int i = 0; i < L; i++)
        xv[i] = (float)(uniform(&seed) * 20 - 10);
    for (int nan = 0; nan < 2; nan++) {
        if (nan)
            xv[L - 2] = NAN;
        softmax_ref(xv, 1, L, 1.0, NULL, want, false);
        run_one(c, g, 2, 1, &in, 2, (int64_t[]){ 1, L }, want, 1e-4, 1e-9,
                nan ? "long row with a NaN" : "long row");
    }
    free(want);
    ic_tensor_free(NULL, &in);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* softmax into an intermediate that a later kernel reads (its exp is kept in that temp
 * between the kernel's passes), and a row holding NaN or +inf: all NaN, as torch. */
Test(red, softmax_into_temp_and_special_rows)
{
    enum { R = 9, N = 300 };
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "smtemp");
    ic_value x = ict_input(g, "x", IC_F32, "9,300");
    ic_attrs at = lt_attrs(IC_OP_SOFTMAX);
    at.dim = -1;
    ic_value y = lt_at(g, "y", IC_OP_SOFTMAX, x, &at);
    ic_attrs d1 = lt_dims(IC_OP_SUM, 1, (int64_t[]){ 1 }, false);
    ic_value t = lt_bin(g, "t", IC_OP_MUL, ic_val(y), ic_val(y));
    lt_out(g, lt_at(g, "s", IC_OP_SUM, t, &d1));
    ic_tensor in;
    tensor(&in, IC_F32, 2, (int64_t[]){ R, N });
    float *xv = in.data;
    uint64_t seed = 5;
    for (int i = 0; i < R * N; i++)
        xv[i] = (float)(uniform(&seed) * 10 - 5);
    xv[2 * N + 7] = NAN;
    xv[5 * N + 299] = INFINITY;
    double *sm = malloc(sizeof(double) * R * N), want[R];
    softmax_ref(xv, R, N, 1.0, NULL, sm, false);
    for (int r = 0; r < R; r++) {
        want[r] = 0;
        for (int j = 0; j < N; j++)
            want[r] += sm[r * N + j] * sm[r * N + j];
    }
    want[2] = want[5] = NAN;
    for (int threads = 1; threads <= 2; threads++)
        run_one(c, g, threads, 1, &in, 1, (int64_t[]){ R }, want, 1e-4, 1e-6, "sum softmax^2");
    free(sm);
    ic_tensor_free(NULL, &in);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* ---- layer_norm ---- */

/* f32 statistics in two passes: rows of 4096 around 1000 with a spread of 0.01 (a one-pass
 * E[x^2] - E[x]^2 in f32 would lose every digit), and a residual add fused in front. */
Test(red, layer_norm_f32_two_pass_accuracy)
{
    enum { R = 6, N = 4096 };
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "lnacc");
    ic_value x = ict_input(g, "x", IC_F32, "6,4096");
    ic_value r = ict_input(g, "r", IC_F32, "6,4096");
    ic_value h = lt_bin(g, "h", IC_OP_ADD, ic_val(x), ic_val(r));
    ic_attrs ln = lt_shape(IC_OP_LAYER_NORM, "4096");
    ln.eps = 1e-12;
    lt_out(g, lt_at(g, "y", IC_OP_LAYER_NORM, h, &ln));
    ic_tensor in[2];
    tensor(&in[0], IC_F32, 2, (int64_t[]){ R, N });
    tensor(&in[1], IC_F32, 2, (int64_t[]){ R, N });
    float *xv = in[0].data, *rv = in[1].data;
    uint64_t seed = 3;
    for (int i = 0; i < R * N; i++) {
        xv[i] = (float)(1000.0 + 0.01 * (uniform(&seed) - 0.5));
        rv[i] = (float)(0.005 * (uniform(&seed) - 0.5));
    }
    double *want = malloc(sizeof(double) * R * N);
    for (int row = 0; row < R; row++) {
        double m = 0, v = 0;
        for (int j = 0; j < N; j++) /* h as the kernel computes it: an f32 add */
            m += (double)(xv[row * N + j] + rv[row * N + j]);
        m /= N;
        for (int j = 0; j < N; j++) {
            double d = (double)(xv[row * N + j] + rv[row * N + j]) - m;
            v += d * d;
        }
        v /= N;
        for (int j = 0; j < N; j++)
            want[row * N + j] = ((double)(xv[row * N + j] + rv[row * N + j]) - m) / sqrt(v + 1e-12);
    }
    /* h itself is rounded to f32 (1000 has ulp 6e-5, the spread 1e-2): the values are known
     * to ~1e-2 of a standard deviation, whatever the statistics' precision */
    for (int threads = 1; threads <= 2; threads++)
        run_one(c, g, threads, 2, in, 2, (int64_t[]){ R, N }, want, 1e-2, 1e-2, "layer_norm");
    free(want);
    ic_tensor_free(NULL, &in[0]);
    ic_tensor_free(NULL, &in[1]);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* ---- max reductions without an order of signed zeros ---- */

/* Rows of zeros of both signs reduce to a zero (either sign compares equal), a NaN anywhere
 * in a row makes its max and min NaN. */
Test(red, row_max_min_zeros_and_nan)
{
    enum { R = 5, N = 70 };
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "rowmm");
    ic_value x = ict_input(g, "x", IC_F32, "5,70");
    ic_attrs d1 = lt_dims(IC_OP_AMAX, 1, (int64_t[]){ 1 }, false);
    lt_out(g, lt_at(g, "mx", IC_OP_AMAX, x, &d1));
    d1 = lt_dims(IC_OP_AMIN, 1, (int64_t[]){ 1 }, false);
    lt_out(g, lt_at(g, "mn", IC_OP_AMIN, x, &d1));
    ic_tensor in, out[2];
    tensor(&in, IC_F32, 2, (int64_t[]){ R, N });
    float *xv = in.data;
    for (int i = 0; i < R * N; i++)
        xv[i] = i % 2 ? -0.0f : 0.0f;
    for (int j = 0; j < N; j++)
        xv[2 * N + j] = (float)(j - 30);
    xv[3 * N + 69] = NAN;
    xv[4 * N] = NAN;
    double wmx[R] = { 0, 0, 39, NAN, NAN }, wmn[R] = { 0, 0, -30, NAN, NAN };
    ic_compiled *cc = compile(c, g, 0);
    tensor(&out[0], IC_F32, 1, (int64_t[]){ R });
    tensor(&out[1], IC_F32, 1, (int64_t[]){ R });
    cr_assert_eq(ic_run(cc, 1, &in, 2, out), IC_OK, "ic_run: %s", ic_last_error(c));
    expect_close(&out[0], wmx, 0, 0, "amax");
    expect_close(&out[1], wmn, 0, 0, "amin");
    ic_tensor_free(NULL, &out[0]);
    ic_tensor_free(NULL, &out[1]);
    ic_compiled_destroy(cc);
    ic_tensor_free(NULL, &in);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}
