/* test_compile_kernels.c - hand-built loop-IR kernels JIT-compiled and run against scalar C
 * expectations: pointwise ops, math accuracy, casts (f16/bf16 rounding), integer semantics,
 * reductions (row, column, argmax), multi-stage kernels, OpenMP, odd sizes. */
#include <math.h>
#include <float.h>
#include <criterion/criterion.h>
#include "ic/ic.h"
#include "compile-impl.h"
#include "../LLVMGen/kbuild.h"
#include "testutil.h"

static ic__kernel_fn jit1(ic_ctx *c, kb_t *kb, int nb, const ic_buffer *bufs,
                          const ic_codegen_params *p, ic__jit **jit)
{
    ic__kernel_fn fn = NULL;
    ic_status s = ic__jit_kernels(c, 1, &kb->k, nb, bufs, p, jit, &fn);
    cr_assert_eq(s, IC_OK, "jit failed: %s", ic_last_error(c));
    cr_assert(fn != NULL);
    return fn;
}

static float frand(unsigned *st, float lo, float hi)
{
    *st = *st * 1664525u + 1013904223u;
    return lo + (hi - lo) * (float)((*st >> 8) & 0xffffff) / 16777216.0f;
}

/* ---- pointwise ---- */

/* out[i, j] = a[i, j] + b[j] * 2 over [rows, cols]: broadcasting, segments, tails */
static void run_bcast_add(int64_t rows, int64_t cols, int threads)
{
    ic_ctx *c = ict_ctx();
    kb_t *kb = kb_new("bcast_add", 2, (int64_t[]){ rows, cols }, 0, NULL);
    kb_stage(kb, IC_STAGE_BODY);
    int i = kb_var(kb, 0), j = kb_var(kb, 1);
    int off = kb_off2(kb, i, cols, j);
    int a = kb_load(kb, 0, IC_F32, off), b = kb_load(kb, 1, IC_F32, j);
    int two = kb_constf(kb, IC_F32, 2.0);
    kb_store(kb, 2, off, kb_bin(kb, IC_L_ADD, IC_F32, a, kb_bin(kb, IC_L_MUL, IC_F32, b, two)));
    ic_buffer bufs[3] = { kb_buf(IC_BUF_ARG, IC_F32, rows * cols, 0), kb_buf(IC_BUF_ARG, IC_F32, cols, 1),
                          kb_buf(IC_BUF_OUTPUT, IC_F32, rows * cols, 0) };
    ic_codegen_params p;
    ic_codegen_params_default(NULL, &kb->k, bufs, &p);
    p.threads = threads;
    p.serial_threshold = 1;
    ic__jit *jit;
    ic__kernel_fn fn = jit1(c, kb, 3, bufs, &p, &jit);
    float *A = malloc(sizeof(float) * (size_t)(rows * cols + 1)), *B = malloc(sizeof(float) * (size_t)cols);
    float *O = malloc(sizeof(float) * (size_t)(rows * cols + 1));
    unsigned st = 1;
    for (int64_t k = 0; k < rows * cols; k++)
        A[k] = frand(&st, -10, 10), O[k] = NAN;
    for (int64_t k = 0; k < cols; k++)
        B[k] = frand(&st, -10, 10);
    void *ptrs[3] = { A, B, O };
    fn(ptrs);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t k = 0; k < cols; k++) {
            float want = A[r * cols + k] + B[k] * 2.0f;
            cr_assert_eq(O[r * cols + k], want, "[%ld,%ld] of [%ld,%ld]: got %g, want %g", (long)r,
                         (long)k, (long)rows, (long)cols, O[r * cols + k], want);
        }
    free(A), free(B), free(O), free(kb);
    ic__jit_destroy(jit);
    ic_ctx_destroy(c);
}

Test(compile_kernels, pointwise_broadcast_sizes)
{
    run_bcast_add(37, 1000, 0);
    run_bcast_add(1, 1, 0);
    run_bcast_add(3, 3, 0);
    run_bcast_add(1, 1000003, 0);
    run_bcast_add(1000003, 1, 0);
}

Test(compile_kernels, pointwise_threads_match_serial)
{
    run_bcast_add(513, 1027, 2);
    run_bcast_add(2, 1000003, 2);
    run_bcast_add(7, 5, 2);
}

/* y = op(x) for f32 unary math against libm in double */
typedef struct { ic_lop op; double (*ref)(double); double rtol, atol; } unary_case;

static const char *lop_str(ic_lop op)
{
    static char buf[16];
    snprintf(buf, sizeof buf, "lop#%d", (int)op);
    return buf;
}

static double ref_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
static double ref_rsqrt(double x) { return 1.0 / sqrt(x); }
static double ref_recip(double x) { return 1.0 / x; }
static double ref_neg(double x) { return -x; }

static void check_unary(ic_lop op, double (*ref)(double), const float *xs, int n, double rtol,
                        double atol)
{
    ic_ctx *c = ict_ctx();
    kb_t *kb = kb_new("unary", 1, (int64_t[]){ n }, 0, NULL);
    kb_stage(kb, IC_STAGE_BODY);
    int i = kb_var(kb, 0);
    kb_store(kb, 1, i, kb_un(kb, op, IC_F32, kb_load(kb, 0, IC_F32, i)));
    ic_buffer bufs[2] = { kb_buf(IC_BUF_ARG, IC_F32, n, 0), kb_buf(IC_BUF_OUTPUT, IC_F32, n, 0) };
    ic__jit *jit;
    ic__kernel_fn fn = jit1(c, kb, 2, bufs, NULL, &jit);
    float *y = malloc(sizeof(float) * (size_t)n);
    void *ptrs[2] = { (void *)xs, y };
    fn(ptrs);
    for (int k = 0; k < n; k++) {
        double want = (double)(float)ref((double)xs[k]);
        double got = y[k];
        if (isnan(want)) {
            cr_assert(isnan(got), "%s(%.9g): got %.9g, want nan", lop_str(op), xs[k], got);
            continue;
        }
        if (isinf(want)) {
            cr_assert_eq(got, want, "%s(%.9g): got %.9g, want %.9g", lop_str(op), xs[k], got, want);
            continue;
        }
        cr_assert(fabs(got - want) <= atol + rtol * fabs(want), "%s(%.9g): got %.9g, want %.9g (err %.3g)",
                  lop_str(op), xs[k], got, want, fabs(got - want));
    }
    free(y), free(kb);
    ic__jit_destroy(jit);
    ic_ctx_destroy(c);
}

static int math_inputs(float *xs, int cap, float lo, float hi)
{
    static const float special[] = { 0.0f, -0.0f, 1.0f, -1.0f, 0.5f, -0.5f, 1e-30f, -1e-30f,
                                     1e-40f, 88.0f, -88.0f, 89.0f, -104.0f, -120.0f, 100.0f,
                                     INFINITY, -INFINITY, NAN, 3.14159265f, 1.5707964f,
                                     1e-4f, 0.625f, 0.6249f, 9.5f, -9.5f, 20.0f, 1e5f, -3e4f };
    int n = 0;
    for (size_t i = 0; i < sizeof special / sizeof *special && n < cap; i++)
        xs[n++] = special[i];
    unsigned st = 7;
    while (n < cap)
        xs[n++] = frand(&st, lo, hi);
    return n;
}

Test(compile_kernels, math_f32_accuracy)
{
    enum { N = 4099 };
    float *xs = malloc(sizeof(float) * N);
    int n = math_inputs(xs, N, -30, 30);
    check_unary(IC_L_EXP, exp, xs, n, 4e-7, 1e-37);
    check_unary(IC_L_SIGMOID, ref_sigmoid, xs, n, 6e-7, 1e-37);
    check_unary(IC_L_TANH, tanh, xs, n, 6e-7, 1e-37);
    check_unary(IC_L_ERF, erf, xs, n, 2e-6, 2e-7);
    check_unary(IC_L_SIN, sin, xs, n, 4e-7, 3e-7);
    check_unary(IC_L_COS, cos, xs, n, 4e-7, 3e-7);
    check_unary(IC_L_SQRT, sqrt, xs, n, 0, 0);
    check_unary(IC_L_RSQRT, ref_rsqrt, xs, n, 1.2e-7, 0);
    check_unary(IC_L_RECIP, ref_recip, xs, n, 0, 0);
    check_unary(IC_L_FLOOR, floor, xs, n, 0, 0);
    check_unary(IC_L_CEIL, ceil, xs, n, 0, 0);
    check_unary(IC_L_ROUND, rint, xs, n, 0, 0); /* halves to even: 0.5, -0.5, 9.5, -9.5 */
    check_unary(IC_L_ABS, fabs, xs, n, 0, 0);
    check_unary(IC_L_NEG, ref_neg, xs, n, 0, 0);
    int m = math_inputs(xs, N, 0, 1000);
    check_unary(IC_L_LOG, log, xs, m, 3e-7, 1e-37);
    m = math_inputs(xs, N, -5000, 5000);
    check_unary(IC_L_SIN, sin, xs, m, 4e-7, 5e-7);
    check_unary(IC_L_COS, cos, xs, m, 4e-7, 5e-7);
    free(xs);
}

Test(compile_kernels, pow_f32_special_cases)
{
    static const float xs[] = { 2, 2, -2, -2, -2, 0, 0, -0.0f, 1, NAN, NAN, 1, -1, 10, 0.5f, 3, -8, INFINITY, 1.5f, 7 };
    static const float ys[] = { 10, -1, 3, 2, 0.5f, 2, -1, -1, NAN, 0, 2, INFINITY, INFINITY, 38, -100, 0.5f, 1.0f / 3, 2, 80, -3.5f };
    int n = sizeof xs / sizeof *xs;
    ic_ctx *c = ict_ctx();
    kb_t *kb = kb_new("pow", 1, (int64_t[]){ n }, 0, NULL);
    kb_stage(kb, IC_STAGE_BODY);
    int i = kb_var(kb, 0);
    int x = kb_load(kb, 0, IC_F32, i), y = kb_load(kb, 1, IC_F32, i);
    kb_store(kb, 2, i, kb_bin(kb, IC_L_POW, IC_F32, x, y));
    ic_buffer bufs[3] = { kb_buf(IC_BUF_ARG, IC_F32, n, 0), kb_buf(IC_BUF_ARG, IC_F32, n, 1),
                          kb_buf(IC_BUF_OUTPUT, IC_F32, n, 0) };
    ic__jit *jit;
    ic__kernel_fn fn = jit1(c, kb, 3, bufs, NULL, &jit);
    float out[32];
    void *ptrs[3] = { (void *)xs, (void *)ys, out };
    fn(ptrs);
    for (int k = 0; k < n; k++) {
        double want = (float)pow(xs[k], ys[k]);
        if (isnan(want)) {
            cr_assert(isnan(out[k]), "pow(%g, %g): got %g, want nan", xs[k], ys[k], out[k]);
            continue;
        }
        /* e^{y log x} in f32: relative error about (1 + |y log x|) 2^-23 */
        double tol = (1 + fabs(ys[k] * log(fabs(xs[k])))) * 2.4e-7 * fabs(want);
        if (isinf(want) || want == 0 || !isfinite(tol))
            cr_assert_eq(out[k], want, "pow(%g, %g): got %g, want %g", xs[k], ys[k], out[k], want);
        else
            cr_assert(fabs(out[k] - want) <= tol, "pow(%g, %g): got %.9g, want %.9g", xs[k], ys[k],
                      out[k], want);
    }
    free(kb);
    ic__jit_destroy(jit);
    ic_ctx_destroy(c);
}

/* ---- casts and narrow floats ---- */

Test(compile_kernels, f16_bf16_round_trip_rne)
{
    enum { N = 70000 };
    ic_ctx *c = ict_ctx();
    kb_t *kb = kb_new("narrow", 1, (int64_t[]){ N }, 0, NULL);
    kb_stage(kb, IC_STAGE_BODY);
    int i = kb_var(kb, 0);
    int x = kb_load(kb, 0, IC_F32, i);
    kb_store(kb, 1, i, kb_cast(kb, IC_F16, x));
    kb_store(kb, 2, i, kb_cast(kb, IC_BF16, x));
    /* and back: f16/bf16 loads widened to f32 */
    int h = kb_cast(kb, IC_F32, kb_load(kb, 3, IC_F16, i));
    int bf = kb_cast(kb, IC_F32, kb_load(kb, 4, IC_BF16, i));
    kb_store(kb, 5, i, kb_bin(kb, IC_L_ADD, IC_F32, h, bf));
    ic_buffer bufs[6] = { kb_buf(IC_BUF_ARG, IC_F32, N, 0), kb_buf(IC_BUF_OUTPUT, IC_F16, N, 0),
                          kb_buf(IC_BUF_OUTPUT, IC_BF16, N, 1), kb_buf(IC_BUF_ARG, IC_F16, N, 1),
                          kb_buf(IC_BUF_ARG, IC_BF16, N, 2), kb_buf(IC_BUF_OUTPUT, IC_F32, N, 2) };
    ic__jit *jit;
    ic__kernel_fn fn = jit1(c, kb, 6, bufs, NULL, &jit);
    float *X = malloc(sizeof(float) * N), *S = malloc(sizeof(float) * N);
    uint16_t *H = malloc(2 * N), *B = malloc(2 * N), *Hin = malloc(2 * N), *Bin = malloc(2 * N);
    unsigned st = 3;
    for (int k = 0; k < N; k++) {
        uint32_t bits;
        st = st * 1664525u + 1013904223u;
        bits = st;
        if (k < 65536) {
            /* every bf16 neighbourhood: exact ties, halfway-ish and NaNs */
            bits = ((uint32_t)k << 16) | (k % 3 == 0 ? 0x8000u : k % 3 == 1 ? 0x7fffu : (st & 0xffffu));
        }
        memcpy(&X[k], &bits, 4);
        if (k >= 65536 && k % 2)
            X[k] = frand(&st, -70000, 70000);
        Hin[k] = (uint16_t)(st >> 7);
        Bin[k] = (uint16_t)(st >> 3);
    }
    void *ptrs[6] = { X, H, B, Hin, Bin, S };
    fn(ptrs);
    for (int k = 0; k < N; k++) {
        uint16_t wb = ic_f32_to_bf16(X[k]), wh = ic_f32_to_f16(X[k]);
        if (isnan(X[k])) {
            cr_assert(isnan(ic_bf16_to_f32(B[k])) && isnan(ic_f16_to_f32(H[k])), "NaN %08x lost",
                      (unsigned)*(uint32_t *)&X[k]);
            continue;
        }
        cr_assert_eq(B[k], wb, "bf16(%.9g = %08x): got %04x, want %04x", X[k], *(uint32_t *)&X[k], B[k], wb);
        cr_assert_eq(H[k], wh, "f16(%.9g): got %04x, want %04x", X[k], H[k], wh);
        float want = ic_f16_to_f32(Hin[k]) + ic_bf16_to_f32(Bin[k]);
        if (isnan(want))
            cr_assert(isnan(S[k]));
        else
            cr_assert_eq(S[k], want, "widen %04x + %04x: got %g, want %g", Hin[k], Bin[k], S[k], want);
    }
    free(X), free(S), free(H), free(B), free(Hin), free(Bin), free(kb);
    ic__jit_destroy(jit);
    ic_ctx_destroy(c);
}

Test(compile_kernels, casts_and_integer_semantics)
{
    static const float xs[] = { 0, -0.0f, 1.5f, -1.5f, 2.5f, NAN, INFINITY, -INFINITY, 3e9f, -3e9f, 1e20f, 7, -7, 0.25f };
    static const int64_t as[] = { 7, -7, 7, -7, 0, 5, INT64_MIN, 9, -1, 100 };
    static const int64_t bs[] = { 2, 2, -2, -2, 3, 0, -1, 1, 3, -7 };
    int n = sizeof xs / sizeof *xs, m = sizeof as / sizeof *as;
    ic_ctx *c = ict_ctx();
    /* kernel 0: float -> i32 / i64 / bool */
    kb_t *kb = kb_new("casts", 1, (int64_t[]){ n }, 0, NULL);
    kb_stage(kb, IC_STAGE_BODY);
    int i = kb_var(kb, 0);
    int x = kb_load(kb, 0, IC_F32, i);
    kb_store(kb, 1, i, kb_cast(kb, IC_I32, x));
    kb_store(kb, 2, i, kb_cast(kb, IC_I64, x));
    kb_store(kb, 3, i, kb_cast(kb, IC_BOOL, x));
    kb_store(kb, 4, i, kb_un(kb, IC_L_NOT, IC_BOOL, kb_cast(kb, IC_BOOL, x))); /* not takes bools */
    ic_buffer bufs[5] = { kb_buf(IC_BUF_ARG, IC_F32, n, 0), kb_buf(IC_BUF_OUTPUT, IC_I32, n, 0),
                          kb_buf(IC_BUF_OUTPUT, IC_I64, n, 1), kb_buf(IC_BUF_OUTPUT, IC_BOOL, n, 2),
                          kb_buf(IC_BUF_OUTPUT, IC_BOOL, n, 3) };
    ic__jit *jit;
    ic__kernel_fn fn = jit1(c, kb, 5, bufs, NULL, &jit);
    int32_t o32[16];
    int64_t o64[16];
    uint8_t ob[16], on[16];
    void *ptrs[5] = { (void *)xs, o32, o64, ob, on };
    fn(ptrs);
    for (int k = 0; k < n; k++) {
        double v = xs[k];
        int64_t w64 = isnan(v) ? 0 : v >= 9.2e18 ? INT64_MAX : v <= -9.2e18 ? INT64_MIN : (int64_t)v;
        int32_t w32 = isnan(v) ? 0 : v >= 2147483647.0 ? INT32_MAX : v <= -2147483648.0 ? INT32_MIN : (int32_t)v;
        cr_assert_eq(o64[k], w64, "i64(%g): got %ld, want %ld", v, (long)o64[k], (long)w64);
        cr_assert_eq(o32[k], w32, "i32(%g): got %d, want %d", v, o32[k], w32);
        cr_assert_eq(ob[k], v != 0 || isnan(v), "bool(%g): got %d", v, ob[k]);
        cr_assert_eq(on[k], !(v != 0 || isnan(v)), "not(%g): got %d", v, on[k]);
    }
    free(kb);
    ic__jit_destroy(jit);
    /* kernel 1: i64 floor division, remainder, division by zero, pow */
    kb = kb_new("intops", 1, (int64_t[]){ m }, 0, NULL);
    kb_stage(kb, IC_STAGE_BODY);
    i = kb_var(kb, 0);
    int a = kb_load(kb, 0, IC_I64, i), b = kb_load(kb, 1, IC_I64, i);
    kb_store(kb, 2, i, kb_bin(kb, IC_L_IDIV, IC_I64, a, b));
    kb_store(kb, 3, i, kb_bin(kb, IC_L_MOD, IC_I64, a, b));
    kb_store(kb, 4, i, kb_bin(kb, IC_L_MAX, IC_I64, a, b));
    kb_store(kb, 5, i, kb_cmp(kb, IC_CMP_LT, a, b));
    int three = kb_consti(kb, IC_I64, 3);
    kb_store(kb, 6, i, kb_bin(kb, IC_L_POW, IC_I64, b, three));
    ic_buffer ib[7] = { kb_buf(IC_BUF_ARG, IC_I64, m, 0), kb_buf(IC_BUF_ARG, IC_I64, m, 1),
                        kb_buf(IC_BUF_OUTPUT, IC_I64, m, 0), kb_buf(IC_BUF_OUTPUT, IC_I64, m, 1),
                        kb_buf(IC_BUF_OUTPUT, IC_I64, m, 2), kb_buf(IC_BUF_OUTPUT, IC_BOOL, m, 3),
                        kb_buf(IC_BUF_OUTPUT, IC_I64, m, 4) };
    fn = jit1(c, kb, 7, ib, NULL, &jit);
    int64_t q[16], r[16], mx[16], pw[16];
    uint8_t lt[16];
    void *p2[7] = { (void *)as, (void *)bs, q, r, mx, lt, pw };
    fn(p2);
    for (int k = 0; k < m; k++) {
        int64_t A = as[k], B = bs[k], wq, wr;
        if (B == 0)
            wq = 0, wr = 0;
        else if (B == -1)
            wq = (int64_t)(0ull - (uint64_t)A), wr = 0;
        else {
            wq = A / B, wr = A % B;
            if (wr != 0 && ((wr < 0) != (B < 0)))
                wq--, wr += B;
        }
        cr_assert_eq(q[k], wq, "%ld // %ld: got %ld, want %ld", (long)A, (long)B, (long)q[k], (long)wq);
        cr_assert_eq(r[k], wr, "%ld %% %ld: got %ld, want %ld", (long)A, (long)B, (long)r[k], (long)wr);
        cr_assert_eq(mx[k], A > B ? A : B);
        cr_assert_eq(lt[k], A < B);
        cr_assert_eq(pw[k], B * B * B, "%ld ** 3: got %ld", (long)B, (long)pw[k]);
    }
    free(kb);
    ic__jit_destroy(jit);
    ic_ctx_destroy(c);
}

/* ---- reductions ---- */

/* Row reductions over [rows, cols]: sum, max (NaN), min, prod and argmax (first index). */
static void run_row_reduce(int64_t rows, int64_t cols, int threads, bool with_nan)
{
    ic_ctx *c = ict_ctx();
    kb_t *kb = kb_new("rowred", 1, (int64_t[]){ rows }, 1, (int64_t[]){ cols });
    kb_stage(kb, IC_STAGE_REDUCE);
    int i = kb_var(kb, 0), j = kb_var(kb, 1);
    int x = kb_load(kb, 0, IC_F32, kb_off2(kb, i, cols, j));
    int rs = kb_reduce(kb, IC_RED_SUM, IC_F32, x, -1);
    int rmax = kb_reduce(kb, IC_RED_MAX, IC_F32, x, -1);
    int rmin = kb_reduce(kb, IC_RED_MIN, IC_F32, x, -1);
    int ram = kb_reduce(kb, IC_RED_ARGMAX, IC_I64, x, j);
    kb_stage(kb, IC_STAGE_BODY);
    int o = kb_var(kb, 0);
    kb_store(kb, 1, o, kb_acc(kb, IC_F32, 0, rs));
    kb_store(kb, 2, o, kb_acc(kb, IC_F32, 0, rmax));
    kb_store(kb, 3, o, kb_acc(kb, IC_F32, 0, rmin));
    kb_store(kb, 4, o, kb_acc(kb, IC_I64, 0, ram));
    ic_buffer bufs[5] = { kb_buf(IC_BUF_ARG, IC_F32, rows * cols, 0), kb_buf(IC_BUF_OUTPUT, IC_F32, rows, 0),
                          kb_buf(IC_BUF_OUTPUT, IC_F32, rows, 1), kb_buf(IC_BUF_OUTPUT, IC_F32, rows, 2),
                          kb_buf(IC_BUF_OUTPUT, IC_I64, rows, 3) };
    cr_assert_eq(ic_kernel_mode_of(&kb->k), IC_KMODE_ROW);
    ic_codegen_params p;
    ic_codegen_params_default(NULL, &kb->k, bufs, &p);
    p.threads = threads;
    p.serial_threshold = 1;
    ic__jit *jit;
    ic__kernel_fn fn = jit1(c, kb, 5, bufs, &p, &jit);
    float *X = malloc(sizeof(float) * (size_t)(rows * cols)), *S = malloc(sizeof(float) * (size_t)rows);
    float *MX = malloc(sizeof(float) * (size_t)rows), *MN = malloc(sizeof(float) * (size_t)rows);
    int64_t *AM = malloc(sizeof(int64_t) * (size_t)rows);
    unsigned st = 11;
    for (int64_t k = 0; k < rows * cols; k++)
        X[k] = (float)(int)frand(&st, -50, 50) * 0.25f; /* ties for argmax */
    if (with_nan && cols > 2)
        for (int64_t r = 0; r < rows; r += 3)
            X[r * cols + (r * 7) % cols] = NAN;
    void *ptrs[5] = { X, S, MX, MN, AM };
    fn(ptrs);
    for (int64_t r = 0; r < rows; r++) {
        double sum = 0;
        float mx = -INFINITY, mn = INFINITY;
        int64_t am = 0;
        bool nan = false;
        for (int64_t k = 0; k < cols; k++) {
            float v = X[r * cols + k];
            sum += v;
            if (isnan(v)) {
                if (!nan)
                    am = k;
                nan = true;
            } else if (!nan && v > X[r * cols + am]) {
                am = k;
            }
            mx = v > mx ? v : mx;
            mn = v < mn ? v : mn;
        }
        if (nan) {
            cr_assert(isnan(S[r]) && isnan(MX[r]) && isnan(MN[r]), "row %ld with NaN: sum %g max %g min %g",
                      (long)r, S[r], MX[r], MN[r]);
        } else {
            cr_assert(fabs(S[r] - sum) <= 1e-5 * (1 + fabs(sum)), "row %ld sum: got %g, want %g", (long)r, S[r], sum);
            cr_assert_eq(MX[r], mx, "row %ld max: got %g, want %g", (long)r, MX[r], mx);
            cr_assert_eq(MN[r], mn, "row %ld min: got %g, want %g", (long)r, MN[r], mn);
        }
        cr_assert_eq(AM[r], am, "row %ld argmax: got %ld, want %ld", (long)r, (long)AM[r], (long)am);
    }
    free(X), free(S), free(MX), free(MN), free(AM), free(kb);
    ic__jit_destroy(jit);
    ic_ctx_destroy(c);
}

Test(compile_kernels, row_reductions)
{
    run_row_reduce(129, 1003, 0, false);
    run_row_reduce(5, 3, 0, true);
    run_row_reduce(64, 1000, 2, true);
    run_row_reduce(1, 1, 0, false);
    run_row_reduce(2, 1000003, 2, false);
}

/* Column sums over dim 0 of [rows, cols] (and a mean-like epilogue): the strip mode. */
static void run_col_sum(int64_t rows, int64_t cols, int threads, int64_t strip)
{
    ic_ctx *c = ict_ctx();
    kb_t *kb = kb_new("colsum", 1, (int64_t[]){ cols }, 1, (int64_t[]){ rows });
    kb_stage(kb, IC_STAGE_REDUCE);
    int o = kb_var(kb, 0), r = kb_var(kb, 1);
    int x = kb_load(kb, 0, IC_F32, kb_off2(kb, r, cols, o));
    int rs = kb_reduce(kb, IC_RED_SUM, IC_F32, x, -1);
    int rmax = kb_reduce(kb, IC_RED_MAX, IC_F32, x, -1);
    int ram = kb_reduce(kb, IC_RED_ARGMAX, IC_I64, x, r);
    kb_stage(kb, IC_STAGE_BODY);
    o = kb_var(kb, 0);
    int n = kb_constf(kb, IC_F32, (double)rows);
    kb_store(kb, 1, o, kb_bin(kb, IC_L_DIV, IC_F32, kb_acc(kb, IC_F32, 0, rs), n));
    kb_store(kb, 2, o, kb_acc(kb, IC_F32, 0, rmax));
    kb_store(kb, 3, o, kb_acc(kb, IC_I64, 0, ram));
    ic_buffer bufs[4] = { kb_buf(IC_BUF_ARG, IC_F32, rows * cols, 0), kb_buf(IC_BUF_OUTPUT, IC_F32, cols, 0),
                          kb_buf(IC_BUF_OUTPUT, IC_F32, cols, 1), kb_buf(IC_BUF_OUTPUT, IC_I64, cols, 2) };
    cr_assert_eq(ic_kernel_mode_of(&kb->k), IC_KMODE_COLUMN);
    ic_codegen_params p;
    ic_codegen_params_default(NULL, &kb->k, bufs, &p);
    p.threads = threads;
    p.serial_threshold = 1;
    if (strip)
        p.strip = strip;
    ic__jit *jit;
    ic__kernel_fn fn = jit1(c, kb, 4, bufs, &p, &jit);
    float *X = malloc(sizeof(float) * (size_t)(rows * cols)), *M = malloc(sizeof(float) * (size_t)cols);
    float *MX = malloc(sizeof(float) * (size_t)cols);
    int64_t *AM = malloc(sizeof(int64_t) * (size_t)cols);
    unsigned st = 5;
    for (int64_t k = 0; k < rows * cols; k++)
        X[k] = (float)(int)frand(&st, -20, 20);
    void *ptrs[4] = { X, M, MX, AM };
    fn(ptrs);
    for (int64_t k = 0; k < cols; k++) {
        double sum = 0;
        float mx = -INFINITY;
        int64_t am = 0;
        for (int64_t q = 0; q < rows; q++) {
            sum += X[q * cols + k];
            if (X[q * cols + k] > mx)
                mx = X[q * cols + k], am = q;
        }
        double want = (float)sum / (float)rows;
        cr_assert(fabs(M[k] - want) <= 1e-6 * (1 + fabs(want)), "col %ld mean: got %g, want %g", (long)k, M[k], want);
        cr_assert_eq(MX[k], mx, "col %ld max: got %g, want %g", (long)k, MX[k], mx);
        cr_assert_eq(AM[k], am, "col %ld argmax: got %ld, want %ld", (long)k, (long)AM[k], (long)am);
    }
    free(X), free(M), free(MX), free(AM), free(kb);
    ic__jit_destroy(jit);
    ic_ctx_destroy(c);
}

Test(compile_kernels, column_reductions)
{
    run_col_sum(1000, 777, 0, 0);
    run_col_sum(3, 1000, 2, 64);
    run_col_sum(333, 4096, 2, 0);
    run_col_sum(17, 130, 0, 64);
}

/* softmax over the last dim as three stages: max, sum of exp, normalised store */
static void run_softmax(int64_t rows, int64_t cols, bool over_dim0, int threads)
{
    ic_ctx *c = ict_ctx();
    /* over_dim0: softmax over dim 0 of [cols_red = rows, cols]: outer = cols, inner = rows */
    int64_t outer = over_dim0 ? cols : rows, inner = over_dim0 ? rows : cols;
    kb_t *kb = kb_new("softmax", 1, (int64_t[]){ outer }, 1, (int64_t[]){ inner });
    int s0 = kb_stage(kb, IC_STAGE_REDUCE);
    int o = kb_var(kb, 0), r = kb_var(kb, 1);
    int off = over_dim0 ? kb_off2(kb, r, cols, o) : kb_off2(kb, o, cols, r);
    int mx = kb_reduce(kb, IC_RED_MAX, IC_F32, kb_load(kb, 0, IC_F32, off), -1);
    int s1 = kb_stage(kb, IC_STAGE_REDUCE);
    o = kb_var(kb, 0), r = kb_var(kb, 1);
    off = over_dim0 ? kb_off2(kb, r, cols, o) : kb_off2(kb, o, cols, r);
    int e = kb_un(kb, IC_L_EXP, IC_F32, kb_bin(kb, IC_L_SUB, IC_F32, kb_load(kb, 0, IC_F32, off), kb_acc(kb, IC_F32, s0, mx)));
    int sm = kb_reduce(kb, IC_RED_SUM, IC_F32, e, -1);
    kb_stage(kb, IC_STAGE_INNER);
    o = kb_var(kb, 0), r = kb_var(kb, 1);
    off = over_dim0 ? kb_off2(kb, r, cols, o) : kb_off2(kb, o, cols, r);
    e = kb_un(kb, IC_L_EXP, IC_F32, kb_bin(kb, IC_L_SUB, IC_F32, kb_load(kb, 0, IC_F32, off), kb_acc(kb, IC_F32, s0, mx)));
    kb_store(kb, 1, off, kb_bin(kb, IC_L_DIV, IC_F32, e, kb_acc(kb, IC_F32, s1, sm)));
    ic_buffer bufs[2] = { kb_buf(IC_BUF_ARG, IC_F32, rows * cols, 0), kb_buf(IC_BUF_OUTPUT, IC_F32, rows * cols, 0) };
    cr_assert_eq(ic_kernel_mode_of(&kb->k), over_dim0 ? IC_KMODE_COLUMN : IC_KMODE_ROW);
    ic_codegen_params p;
    ic_codegen_params_default(NULL, &kb->k, bufs, &p);
    p.threads = threads;
    ic__jit *jit;
    ic__kernel_fn fn = jit1(c, kb, 2, bufs, &p, &jit);
    float *X = malloc(sizeof(float) * (size_t)(rows * cols)), *Y = malloc(sizeof(float) * (size_t)(rows * cols));
    unsigned st = 9;
    for (int64_t k = 0; k < rows * cols; k++)
        X[k] = frand(&st, -8, 8);
    void *ptrs[2] = { X, Y };
    fn(ptrs);
    for (int64_t a = 0; a < outer; a++) {
        double m = -INFINITY, s = 0;
        for (int64_t b = 0; b < inner; b++) {
            int64_t q = over_dim0 ? b * cols + a : a * cols + b;
            m = X[q] > m ? X[q] : m;
        }
        for (int64_t b = 0; b < inner; b++) {
            int64_t q = over_dim0 ? b * cols + a : a * cols + b;
            s += exp(X[q] - m);
        }
        for (int64_t b = 0; b < inner; b++) {
            int64_t q = over_dim0 ? b * cols + a : a * cols + b;
            double want = exp(X[q] - m) / s;
            cr_assert(fabs(Y[q] - want) <= 1e-5 + 1e-4 * want, "softmax[%ld]: got %g, want %g", (long)q, Y[q], want);
        }
    }
    free(X), free(Y), free(kb);
    ic__jit_destroy(jit);
    ic_ctx_destroy(c);
}

Test(compile_kernels, softmax_rows_and_columns)
{
    run_softmax(67, 1001, false, 0);
    run_softmax(300, 257, true, 2);
    run_softmax(1, 1, false, 0);
}

/* an integer and bool reduction, and the empty reduction */
Test(compile_kernels, integer_and_empty_reductions)
{
    ic_ctx *c = ict_ctx();
    int64_t rows = 9, cols = 1001;
    kb_t *kb = kb_new("ired", 1, (int64_t[]){ rows }, 1, (int64_t[]){ cols });
    kb_stage(kb, IC_STAGE_REDUCE);
    int i = kb_var(kb, 0), j = kb_var(kb, 1);
    int x = kb_load(kb, 0, IC_I32, kb_off2(kb, i, cols, j));
    int x64 = kb_cast(kb, IC_I64, x);
    int rs = kb_reduce(kb, IC_RED_SUM, IC_I64, x64, -1);
    int rm = kb_reduce(kb, IC_RED_MIN, IC_I32, x, -1);
    int any = kb_reduce(kb, IC_RED_MAX, IC_BOOL, kb_cmp(kb, IC_CMP_GT, x, kb_consti(kb, IC_I32, 990)), -1);
    kb_stage(kb, IC_STAGE_BODY);
    int o = kb_var(kb, 0);
    kb_store(kb, 1, o, kb_acc(kb, IC_I64, 0, rs));
    kb_store(kb, 2, o, kb_acc(kb, IC_I32, 0, rm));
    kb_store(kb, 3, o, kb_acc(kb, IC_BOOL, 0, any));
    ic_buffer bufs[4] = { kb_buf(IC_BUF_ARG, IC_I32, rows * cols, 0), kb_buf(IC_BUF_OUTPUT, IC_I64, rows, 0),
                          kb_buf(IC_BUF_OUTPUT, IC_I32, rows, 1), kb_buf(IC_BUF_OUTPUT, IC_BOOL, rows, 2) };
    ic__jit *jit;
    ic__kernel_fn fn = jit1(c, kb, 4, bufs, NULL, &jit);
    int32_t *X = malloc(sizeof(int32_t) * (size_t)(rows * cols));
    int64_t S[16];
    int32_t M[16];
    uint8_t A[16];
    for (int64_t k = 0; k < rows * cols; k++)
        X[k] = (int32_t)((k * 7919) % 1000) - (int32_t)(k % 5) * 100000000;
    void *ptrs[4] = { X, S, M, A };
    fn(ptrs);
    for (int64_t r = 0; r < rows; r++) {
        int64_t s = 0;
        int32_t m = INT32_MAX;
        bool a = false;
        for (int64_t k = 0; k < cols; k++) {
            int32_t v = X[r * cols + k];
            s += v, m = v < m ? v : m, a |= v > 990;
        }
        cr_assert_eq(S[r], s, "row %ld sum: got %ld, want %ld", (long)r, (long)S[r], (long)s);
        cr_assert_eq(M[r], m, "row %ld min: got %d, want %d", (long)r, M[r], m);
        cr_assert_eq(A[r], a, "row %ld any: got %d, want %d", (long)r, A[r], a);
    }
    free(X);
    free(kb);
    ic__jit_destroy(jit);
    /* sum over an empty dim: 0; max: -inf */
    kb = kb_new("empty", 1, (int64_t[]){ 4 }, 1, (int64_t[]){ 0 });
    kb_stage(kb, IC_STAGE_REDUCE);
    i = kb_var(kb, 0), j = kb_var(kb, 1);
    x = kb_load(kb, 0, IC_F32, j);
    rs = kb_reduce(kb, IC_RED_SUM, IC_F32, x, -1);
    rm = kb_reduce(kb, IC_RED_MAX, IC_F32, x, -1);
    kb_stage(kb, IC_STAGE_BODY);
    o = kb_var(kb, 0);
    kb_store(kb, 1, o, kb_acc(kb, IC_F32, 0, rs));
    kb_store(kb, 2, o, kb_acc(kb, IC_F32, 0, rm));
    ic_buffer eb[3] = { kb_buf(IC_BUF_ARG, IC_F32, 0, 0), kb_buf(IC_BUF_OUTPUT, IC_F32, 4, 0),
                        kb_buf(IC_BUF_OUTPUT, IC_F32, 4, 1) };
    fn = jit1(c, kb, 3, eb, NULL, &jit);
    float es[4] = { 1, 1, 1, 1 }, em[4] = { 1, 1, 1, 1 };
    void *ep[3] = { NULL, es, em };
    fn(ep);
    for (int k = 0; k < 4; k++) {
        cr_assert_eq(es[k], 0.0f, "empty sum: got %g", es[k]);
        cr_assert(isinf(em[k]) && em[k] < 0, "empty max: got %g", em[k]);
    }
    free(kb);
    ic__jit_destroy(jit);
    ic_ctx_destroy(c);
}

Test(compile_kernels, zero_size_kernel_does_nothing)
{
    ic_ctx *c = ict_ctx();
    kb_t *kb = kb_new("zero", 2, (int64_t[]){ 0, 5 }, 0, NULL);
    kb_stage(kb, IC_STAGE_BODY);
    int i = kb_var(kb, 0), j = kb_var(kb, 1);
    int off = kb_off2(kb, i, 5, j);
    kb_store(kb, 1, off, kb_load(kb, 0, IC_F32, off));
    ic_buffer bufs[2] = { kb_buf(IC_BUF_ARG, IC_F32, 0, 0), kb_buf(IC_BUF_OUTPUT, IC_F32, 0, 0) };
    ic__jit *jit;
    ic__kernel_fn fn = jit1(c, kb, 2, bufs, NULL, &jit);
    void *ptrs[2] = { NULL, NULL };
    fn(ptrs); /* must not touch memory */
    free(kb);
    ic__jit_destroy(jit);
    ic_ctx_destroy(c);
}

Test(compile_kernels, malformed_kernel_is_an_error)
{
    ic_ctx *c = ict_ctx();
    kb_t *kb = kb_new("bad", 1, (int64_t[]){ 4 }, 0, NULL);
    kb_stage(kb, IC_STAGE_BODY);
    int i = kb_var(kb, 0);
    int x = kb_load(kb, 0, IC_F32, i);
    kb_store(kb, 1, i, kb_bin(kb, IC_L_ADD, IC_F32, x, 7)); /* operand 7 does not exist yet */
    ic_buffer bufs[2] = { kb_buf(IC_BUF_ARG, IC_F32, 4, 0), kb_buf(IC_BUF_OUTPUT, IC_F32, 4, 0) };
    ic__jit *jit = NULL;
    ic__kernel_fn fn = NULL;
    ic_status s = ic__jit_kernels(c, 1, &kb->k, 2, bufs, NULL, &jit, &fn);
    ict_assert_error(c, s, IC_EINVAL, "kernel 'bad'", "stage 0 instr 2", "add");
    cr_assert_null(jit);
    /* a store into an argument */
    kb->st[0].instr[2].b = x;
    kb->st[0].instr[3].buf = 0;
    s = ic__jit_kernels(c, 1, &kb->k, 2, bufs, NULL, &jit, &fn);
    ict_assert_error(c, s, IC_EINVAL, "store into an argument");
    free(kb);
    ic_ctx_destroy(c);
}

/* Fails the Nth allocation of codegen + JIT for every N: an error, never a crash or a leak. */
typedef struct { long count, fail_at; } probe_t;

static void *probe_alloc(void *user, void *ptr, size_t size)
{
    probe_t *p = user;
    if (size == 0) {
        free(ptr);
        return NULL;
    }
    if (++p->count == p->fail_at)
        return NULL;
    return realloc(ptr, size);
}

Test(compile_kernels, out_of_memory_in_codegen_is_an_error)
{
    probe_t probe = { 0, 0 };
    ic_ctx_options co = { probe_alloc, &probe, NULL, NULL };
    ic_ctx *c;
    cr_assert_eq(ic_ctx_create(&co, &c), IC_OK);
    int64_t cols = 100;
    kb_t *kb = kb_new("oom", 1, (int64_t[]){ 8 }, 1, (int64_t[]){ cols });
    kb_stage(kb, IC_STAGE_REDUCE);
    int i = kb_var(kb, 0), j = kb_var(kb, 1);
    int r = kb_reduce(kb, IC_RED_SUM, IC_F32, kb_load(kb, 0, IC_F32, kb_off2(kb, i, cols, j)), -1);
    kb_stage(kb, IC_STAGE_BODY);
    kb_store(kb, 1, kb_var(kb, 0), kb_acc(kb, IC_F32, 0, r));
    ic_buffer bufs[2] = { kb_buf(IC_BUF_ARG, IC_F32, 8 * cols, 0), kb_buf(IC_BUF_OUTPUT, IC_F32, 8, 0) };
    bool done = false;
    for (long n = 1; !done && n < 500; n++) {
        ic__jit *jit = NULL;
        ic__kernel_fn fn = NULL;
        probe.fail_at = probe.count + n;
        ic_status s = ic__jit_kernels(c, 1, &kb->k, 2, bufs, NULL, &jit, &fn);
        done = probe.count < probe.fail_at;
        probe.fail_at = 0;
        cr_assert(done ? s == IC_OK : s == IC_ENOMEM, "n=%ld: status %d (%s)", n, s, ic_last_error(c));
        cr_assert(done ? jit != NULL : jit == NULL);
        ic__jit_destroy(jit);
    }
    cr_assert(done);
    free(kb);
    ic_ctx_destroy(c);
}

/* A kernel without outer loops (a full reduction) splits its inner space across threads
 * and combines per-thread partials: sums, NaN-propagating max, argmax ties and NaNs that
 * straddle the threads' shares, then a softmax over everything (REDUCE, REDUCE, INNER). */
static void run_split(int64_t n, int threads, int nan_at, int tie_at)
{
    ic_ctx *c = ict_ctx();
    kb_t *kb = kb_new("split", 0, NULL, 2, (int64_t[]){ 1, n });
    int s0 = kb_stage(kb, IC_STAGE_REDUCE);
    int j = kb_var(kb, 1);
    int x = kb_load(kb, 0, IC_F32, j);
    int rs = kb_reduce(kb, IC_RED_SUM, IC_F64, kb_cast(kb, IC_F64, x), -1);
    int rmax = kb_reduce(kb, IC_RED_MAX, IC_F32, x, -1);
    int ram = kb_reduce(kb, IC_RED_ARGMAX, IC_I64, x, j);
    int s1 = kb_stage(kb, IC_STAGE_REDUCE);
    j = kb_var(kb, 1);
    int e = kb_un(kb, IC_L_EXP, IC_F32, kb_bin(kb, IC_L_SUB, IC_F32, kb_load(kb, 0, IC_F32, j), kb_acc(kb, IC_F32, s0, rmax)));
    int se = kb_reduce(kb, IC_RED_SUM, IC_F32, e, -1);
    kb_stage(kb, IC_STAGE_INNER);
    j = kb_var(kb, 1);
    e = kb_un(kb, IC_L_EXP, IC_F32, kb_bin(kb, IC_L_SUB, IC_F32, kb_load(kb, 0, IC_F32, j), kb_acc(kb, IC_F32, s0, rmax)));
    kb_store(kb, 4, j, kb_bin(kb, IC_L_DIV, IC_F32, e, kb_acc(kb, IC_F32, s1, se)));
    kb_stage(kb, IC_STAGE_BODY);
    int z = kb_consti(kb, IC_I64, 0);
    kb_store(kb, 1, z, kb_cast(kb, IC_F32, kb_acc(kb, IC_F64, s0, rs)));
    kb_store(kb, 2, z, kb_acc(kb, IC_F32, s0, rmax));
    kb_store(kb, 3, z, kb_acc(kb, IC_I64, s0, ram));
    ic_buffer bufs[5] = { kb_buf(IC_BUF_ARG, IC_F32, n, 0), kb_buf(IC_BUF_OUTPUT, IC_F32, 1, 0),
                          kb_buf(IC_BUF_OUTPUT, IC_F32, 1, 1), kb_buf(IC_BUF_OUTPUT, IC_I64, 1, 2),
                          kb_buf(IC_BUF_OUTPUT, IC_F32, n, 3) };
    ic_codegen_params p;
    ic_codegen_params_default(NULL, &kb->k, bufs, &p);
    p.threads = threads;
    p.serial_threshold = 1;
    ic__jit *jit;
    ic__kernel_fn fn = jit1(c, kb, 5, bufs, &p, &jit);
    float *X = malloc(sizeof(float) * (size_t)n), *Y = malloc(sizeof(float) * (size_t)n);
    unsigned st = 21;
    for (int64_t k = 0; k < n; k++)
        X[k] = frand(&st, -4, 4);
    if (tie_at >= 0) /* the max twice: in both threads' shares */
        X[tie_at] = X[n - 1 - tie_at] = 9.0f;
    if (nan_at >= 0)
        X[nan_at] = X[n - 1] = NAN;
    float sum, mx;
    int64_t am;
    void *ptrs[5] = { X, &sum, &mx, &am, Y };
    fn(ptrs);
    double ws = 0, wm = -INFINITY;
    int64_t wam = 0;
    bool nan = false;
    for (int64_t k = 0; k < n; k++) {
        ws += X[k];
        if (isnan(X[k]) && !nan)
            nan = true, wam = k;
        if (!nan && X[k] > X[wam])
            wam = k;
        wm = X[k] > wm ? X[k] : wm;
    }
    cr_assert_eq(am, wam, "n=%ld threads=%d argmax: got %ld, want %ld", (long)n, threads, (long)am, (long)wam);
    if (nan) {
        cr_assert(isnan(sum) && isnan(mx), "NaN lost: sum %g max %g", sum, mx);
    } else {
        cr_assert(fabs(sum - ws) <= 1e-4 * (1 + fabs(ws)), "sum: got %.9g, want %.9g", sum, ws);
        cr_assert_eq(mx, (float)wm, "max: got %g, want %g", mx, wm);
        double se_ = 0;
        for (int64_t k = 0; k < n; k++)
            se_ += exp((double)X[k] - wm);
        for (int64_t k = 0; k < n; k += 997) {
            double want = exp((double)X[k] - wm) / se_;
            cr_assert(fabs(Y[k] - want) <= 1e-5 * want + 1e-12, "softmax[%ld]: got %g, want %g", (long)k, Y[k], want);
        }
    }
    free(X), free(Y), free(kb);
    ic__jit_destroy(jit);
    ic_ctx_destroy(c);
}

Test(compile_kernels, split_full_reductions)
{
    run_split(1000003, 2, -1, 1000);
    run_split(1000003, 2, 700001, 10);
    run_split(1000003, 3, -1, 333335);
    run_split(5, 4, -1, 1);      /* more threads than work */
    run_split(130, 0, 64, -1);
}
