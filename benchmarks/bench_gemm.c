/* bench_gemm.c - the CPU GEMM benchmark (issue 5, item 6 and its CPU targets): f32 1024^3
 * matmul and linear [16384, 512] x [512, 512]^T + bias + relu through ic_compile / ic_run,
 * against OpenBLAS's cblas_sgemm (and, for the linear, sgemm followed by a separate bias+relu
 * pass on the same threads) in the same run. Every result is checked before it is timed.
 * benchmarks/gemm/run.sh builds and runs it.
 *
 *     bench_gemm [--threads T] [--reps R] [--quick] [--sweep]
 *
 * With --threads 1 every time is the calling thread's CPU time (both libraries then run in
 * it), which stays meaningful on a machine other processes load.
 * --sweep times the matmul kernel under a grid of ic_gemm_params (tile, blocks, packing)
 * through the internal JIT, for choosing the heuristic defaults; with --threads 1 it reports
 * the thread's CPU time, which the load of other processes does not inflate.
 * Exit status: 0 when every result matched, 1 on a wrong result or an error, 2 on bad usage. */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "ic/ic.h"
#include "compile-impl.h" /* the internal JIT, for --sweep */

#ifdef IC_HAVE_OPENBLAS
/* cblas (declared here: Debian ships several cblas.h alternatives) */
enum { CblasRowMajor = 101, CblasNoTrans = 111, CblasTrans = 112 };
void cblas_sgemm(int order, int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                 const float *B, int ldb, float beta, float *C, int ldc);
void openblas_set_num_threads(int n);
int openblas_get_num_threads(void);
char *openblas_get_corename(void);
#endif

static int g_threads = 2, g_reps = 20;
static bool g_quick;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void loadavg(char *buf, size_t n)
{
    FILE *f = fopen("/proc/loadavg", "r");
    buf[0] = 0;
    if (f) {
        if (!fgets(buf, (int)n, f))
            buf[0] = 0;
        fclose(f);
    }
    char *nl = strchr(buf, '\n');
    if (nl)
        *nl = 0;
}

/* Wall time; with one thread the thread's CPU time (robust to other processes' load: ic and
 * OpenBLAS then both run in this thread). */
static double clk(void)
{
    return g_threads == 1 ? cpu_s() : now_s();
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct { double med, best; } timing;

static timing summarize(double *t, int n)
{
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    timing r = { t[n / 2], t[0] };
    return r;
}

static void fill(float *p, int64_t n, unsigned seed)
{
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (float)(((int)((seed >> 8) % 2001u) - 1000) / 1000.0);
    }
}

/* Spot check against double-precision dot products: C[m, n] = sum_k A[m, k] * B(k, n) with
 * B(k, n) = b[k * bk + n * bn]; then + bias[n] and relu when given. */
static bool spot_check(const char *what, const float *C, const float *A, const float *b, int64_t bk,
                       int64_t bn, const float *bias, bool relu, int64_t M, int64_t N, int64_t K)
{
    unsigned s = 12345;
    double worst = 0;
    for (int t = 0; t < 2000; t++) {
        s = s * 1664525u + 1013904223u;
        int64_t m = (int64_t)((s >> 4) % (unsigned)M);
        s = s * 1664525u + 1013904223u;
        int64_t n = (int64_t)((s >> 4) % (unsigned)N);
        if (t < 4) /* the corners */
            m = (t & 1) ? M - 1 : 0, n = (t & 2) ? N - 1 : 0;
        double acc = 0;
        for (int64_t k = 0; k < K; k++)
            acc += (double)A[m * K + k] * b[k * bk + n * bn];
        if (bias)
            acc += bias[n];
        if (relu && acc < 0)
            acc = 0;
        double err = fabs(C[m * N + n] - acc) / (1e-5 + 1e-4 * fabs(acc) + 2e-7 * sqrt((double)K) * 4);
        if (err > worst)
            worst = err;
        if (err > 1) {
            fprintf(stderr, "%s: wrong result at [%lld, %lld]: %.7g, want %.7g\n", what, (long long)m,
                    (long long)n, C[m * N + n], acc);
            return false;
        }
    }
    return true;
}

/* ---- ic graphs ---- */

static ic_graph *matmul_graph(ic_ctx *c, int64_t M, int64_t N, int64_t K)
{
    ic_graph *g;
    ic_value a, b, y;
    ic_dim da[2] = { ic_dim_const(M), ic_dim_const(K) }, db[2] = { ic_dim_const(K), ic_dim_const(N) };
    if (ic_graph_create(c, "matmul", &g) || ic_graph_add_input(g, "a", IC_F32, 2, da, &a) ||
        ic_graph_add_input(g, "b", IC_F32, 2, db, &b) ||
        ic_graph_binary(g, "y", IC_OP_MATMUL, ic_val(a), ic_val(b), &y) || ic_graph_add_output(g, y))
        return NULL;
    return g;
}

/* y = relu(x @ w^T + bias) with w, bias params holding data (constants when freezing). */
static ic_graph *linear_graph(ic_ctx *c, int64_t M, int64_t N, int64_t K, const float *w,
                              const float *bias)
{
    ic_graph *g;
    ic_value x, wv, bv, h, y;
    ic_dim dx[2] = { ic_dim_const(M), ic_dim_const(K) }, dw[2] = { ic_dim_const(N), ic_dim_const(K) };
    ic_dim dbias[1] = { ic_dim_const(N) };
    if (ic_graph_create(c, "linear_relu", &g) || ic_graph_add_input(g, "x", IC_F32, 2, dx, &x) ||
        ic_graph_add_param(g, "w", IC_F32, 2, dw, w, sizeof(float) * (size_t)(N * K), NULL, NULL, &wv) ||
        ic_graph_add_param(g, "b", IC_F32, 1, dbias, bias, sizeof(float) * (size_t)N, NULL, NULL, &bv))
        return NULL;
    ic_operand in[3] = { ic_val(x), ic_val(wv), ic_val(bv) };
    if (ic_graph_add_node(g, "fc", IC_OP_LINEAR, 3, in, NULL, &h) ||
        ic_graph_unary(g, "y", IC_OP_RELU, ic_val(h), &y) || ic_graph_add_output(g, y))
        return NULL;
    return g;
}

static ic_compiled *compile(ic_ctx *c, const ic_graph *g, int freezing)
{
    ic_compile_options o;
    ic_compile_options_init(&o);
    o.threads = g_threads;
    o.freezing = freezing;
    ic_compiled *cc = NULL;
    if (ic_compile(c, g, &o, &cc)) {
        fprintf(stderr, "bench_gemm: compile '%s': %s\n", ic_graph_name(g), ic_last_error(c));
        return NULL;
    }
    return cc;
}

/* ---- the separate bias + relu pass (OpenBLAS baseline), on g_threads threads ---- */

typedef struct { float *y; const float *bias; int64_t r0, r1, N; } pass_t;

static void *pass_rows(void *p)
{
    pass_t *a = p;
    for (int64_t r = a->r0; r < a->r1; r++) {
        float *row = a->y + r * a->N;
        for (int64_t n = 0; n < a->N; n++) {
            float v = row[n] + a->bias[n];
            row[n] = v > 0 ? v : 0;
        }
    }
    return NULL;
}

static void bias_relu(float *y, const float *bias, int64_t M, int64_t N)
{
    pthread_t th[64];
    pass_t a[64];
    int T = g_threads < 64 ? g_threads : 64;
    for (int t = 0; t < T; t++) {
        a[t] = (pass_t){ y, bias, M * t / T, M * (t + 1) / T, N };
        if (t)
            pthread_create(&th[t], NULL, pass_rows, &a[t]);
    }
    pass_rows(&a[0]);
    for (int t = 1; t < T; t++)
        pthread_join(th[t], NULL);
}

/* ---- cases ---- */

typedef struct {
    const char *name;
    double flops;
    timing t;
    bool have;
} row_t;

static void print_row(const row_t *r, const row_t *ref)
{
    if (!r->have)
        return;
    printf("  %-40s %9.3f ms  %9.3f ms  %8.1f GFLOP/s", r->name, r->t.med * 1e3, r->t.best * 1e3,
           r->flops / r->t.med * 1e-9);
    if (ref && ref->have && ref != r)
        printf("  %5.1f%% (median)  %5.1f%% (best)", 100 * ref->t.med / r->t.med, 100 * ref->t.best / r->t.best);
    printf("\n");
}

/* A timed runner: fn(arg) once. */
typedef struct { const char *name; void (*fn)(void *); void *arg; } runner;

static void pause_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

/* Times every runner R times, in rounds of 3 calls each, so all see the same machine load.
 * Before a runner's round: a pause, then an untimed call. The pause lets the previous
 * library's idle threads stop spinning (libomp's blocktime, OpenBLAS's thread timeout), so
 * no runner pays for another's threads; the untimed call wakes this runner's own team, as in
 * back-to-back use. */
static void measure(int n, const runner *rs, int R, timing *out)
{
    double *t = calloc((size_t)(n * R), sizeof(double));
    for (int i = 0; i < n; i++)
        rs[i].fn(rs[i].arg);
    for (int r = 0; r < R; r += 3)
        for (int i = 0; i < n; i++) {
            if (g_threads > 1)
                pause_ms(300);
            rs[i].fn(rs[i].arg);
            for (int j = r; j < r + 3 && j < R; j++) {
                double t0 = clk();
                rs[i].fn(rs[i].arg);
                t[i * R + j] = clk() - t0;
            }
        }
    for (int i = 0; i < n; i++)
        out[i] = summarize(&t[i * R], R);
    free(t);
}

typedef struct { ic_compiled *cc; int nargs; ic_tensor *args; ic_tensor *out; } ic_call;

static void run_ic(void *p)
{
    ic_call *a = p;
    ic_run(a->cc, a->nargs, a->args, 1, a->out);
}

typedef struct { int64_t M, N, K; const float *A, *B, *bias; float *C; bool transb, pass; } blas_call;

#ifdef IC_HAVE_OPENBLAS
static void run_blas(void *p)
{
    blas_call *a = p;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, a->transb ? CblasTrans : CblasNoTrans, (int)a->M, (int)a->N,
                (int)a->K, 1, a->A, (int)a->K, a->B, a->transb ? (int)a->K : (int)a->N, 0, a->C, (int)a->N);
    if (a->pass)
        bias_relu(a->C, a->bias, a->M, a->N);
}
#endif

static int bench_matmul(ic_ctx *c, int64_t M, int64_t N, int64_t K)
{
    double flops = 2.0 * M * N * K;
    float *A = malloc(sizeof(float) * (size_t)(M * K)), *B = malloc(sizeof(float) * (size_t)(K * N));
    float *C1 = malloc(sizeof(float) * (size_t)(M * N)), *C2 = malloc(sizeof(float) * (size_t)(M * N));
    fill(A, M * K, 1), fill(B, K * N, 2);
    ic_graph *g = matmul_graph(c, M, N, K);
    ic_compiled *cc = g ? compile(c, g, 0) : NULL;
    if (!cc)
        return 1;
    ic_tensor args[2], out;
    ic_tensor_init(&args[0], IC_F32, 2, (int64_t[]){ M, K }, A);
    ic_tensor_init(&args[1], IC_F32, 2, (int64_t[]){ K, N }, B);
    ic_tensor_init(&out, IC_F32, 2, (int64_t[]){ M, N }, C1);
    if (ic_run(cc, 2, args, 1, &out)) {
        fprintf(stderr, "bench_gemm: run: %s\n", ic_last_error(c));
        return 1;
    }
    if (!spot_check("ic matmul", C1, A, B, N, 1, NULL, false, M, N, K))
        return 1;
    ic_call ia = { cc, 2, args, &out };
    runner rs[2] = { { "ic matmul (GEMM path)", run_ic, &ia } };
    int n = 1;
#ifdef IC_HAVE_OPENBLAS
    blas_call ba = { M, N, K, A, B, NULL, C2, false, false };
    run_blas(&ba);
    if (!spot_check("openblas matmul", C2, A, B, N, 1, NULL, false, M, N, K))
        return 1;
    rs[n++] = (runner){ "OpenBLAS cblas_sgemm", run_blas, &ba };
#endif
    timing t[2];
    measure(n, rs, g_reps, t);
    row_t ric = { rs[0].name, flops, t[0], true };
    row_t rb = { n > 1 ? rs[1].name : "OpenBLAS (not built in)", flops, n > 1 ? t[1] : t[0], n > 1 };
    printf("\nmatmul f32 [%lld, %lld] x [%lld, %lld]   (median, best of %d; %% = share of OpenBLAS speed)\n",
           (long long)M, (long long)K, (long long)K, (long long)N, g_reps);
    print_row(&rb, NULL);
    print_row(&ric, &rb);
    if (rb.have)
        printf("  target >= 80%% of OpenBLAS: %s (median %.1f%%, best %.1f%%)\n",
               rb.t.med / ric.t.med >= 0.8 ? "PASS" : "MISS", 100 * rb.t.med / ric.t.med,
               100 * rb.t.best / ric.t.best);
    ic_compiled_destroy(cc);
    ic_graph_destroy(g);
    free(A), free(B), free(C1), free(C2);
    return 0;
}

static int bench_linear(ic_ctx *c, int64_t M, int64_t N, int64_t K)
{
    double flops = 2.0 * M * N * K;
    float *X = malloc(sizeof(float) * (size_t)(M * K)), *W = malloc(sizeof(float) * (size_t)(N * K));
    float *bias = malloc(sizeof(float) * (size_t)N), *Y1 = malloc(sizeof(float) * (size_t)(M * N));
    float *Y2 = malloc(sizeof(float) * (size_t)(M * N)), *Y3 = malloc(sizeof(float) * (size_t)(M * N));
    fill(X, M * K, 3), fill(W, N * K, 4), fill(bias, N, 5);
    ic_graph *g = linear_graph(c, M, N, K, W, bias);
    ic_compiled *cc = g ? compile(c, g, 0) : NULL, *cf = g ? compile(c, g, 1) : NULL;
    if (!cc || !cf)
        return 1;
    ic_tensor x, y, yf;
    ic_tensor_init(&x, IC_F32, 2, (int64_t[]){ M, K }, X);
    ic_tensor_init(&y, IC_F32, 2, (int64_t[]){ M, N }, Y1);
    ic_tensor_init(&yf, IC_F32, 2, (int64_t[]){ M, N }, Y3);
    if (ic_compiled_num_kernels(cc) != 1)
        fprintf(stderr, "bench_gemm: linear+bias+relu is %d kernels, not one\n", ic_compiled_num_kernels(cc));
    if (ic_run(cc, 1, &x, 1, &y) || ic_run(cf, 1, &x, 1, &yf)) {
        fprintf(stderr, "bench_gemm: run: %s\n", ic_last_error(c));
        return 1;
    }
    if (!spot_check("ic linear", Y1, X, W, 1, K, bias, true, M, N, K) ||
        !spot_check("ic linear (frozen)", Y3, X, W, 1, K, bias, true, M, N, K))
        return 1;
    if (memcmp(Y1, Y3, sizeof(float) * (size_t)(M * N)) != 0) {
        fprintf(stderr, "bench_gemm: freezing changed the linear's results\n");
        return 1;
    }
    ic_call ia = { cc, 1, &x, &y }, fa = { cf, 1, &x, &yf };
    runner rs[4] = { { "ic linear+bias+relu (fused)", run_ic, &ia },
                     { "ic linear+bias+relu (fused, frozen)", run_ic, &fa } };
    int n = 2;
#ifdef IC_HAVE_OPENBLAS
    blas_call b1 = { M, N, K, X, W, bias, Y2, true, false }, b2 = b1;
    b2.pass = true;
    run_blas(&b2);
    if (!spot_check("openblas linear", Y2, X, W, 1, K, bias, true, M, N, K))
        return 1;
    rs[n++] = (runner){ "OpenBLAS sgemm alone", run_blas, &b1 };
    rs[n++] = (runner){ "OpenBLAS sgemm + bias+relu pass", run_blas, &b2 };
#endif
    timing t[4];
    measure(n, rs, g_reps, t);
    row_t rows[4];
    for (int i = 0; i < 4; i++)
        rows[i] = (row_t){ i < n ? rs[i].name : "", flops, i < n ? t[i] : t[0], i < n };
    printf("\nlinear f32 [%lld, %lld] x [%lld, %lld]^T + bias + relu   (median, best of %d; %% = share of the "
           "speed of OpenBLAS sgemm + separate pass)\n", (long long)M, (long long)K, (long long)N, (long long)K,
           g_reps);
    const row_t *ref = rows[3].have ? &rows[3] : NULL;
    for (int i = 3; i >= 0; i--)
        print_row(&rows[i], ref);
    if (ref) {
        printf("  target fused >= OpenBLAS sgemm + pass: %s (median %.1f%%, best %.1f%%; frozen: median %.1f%%)\n",
               ref->t.med / rows[0].t.med >= 1.0 ? "PASS" : "MISS", 100 * ref->t.med / rows[0].t.med,
               100 * ref->t.best / rows[0].t.best, 100 * ref->t.med / rows[1].t.med);
        printf("  vs OpenBLAS sgemm alone: %.1f%% (median), frozen %.1f%%\n", 100 * rows[2].t.med / rows[0].t.med,
               100 * rows[2].t.med / rows[1].t.med);
    }
    ic_compiled_destroy(cc);
    ic_compiled_destroy(cf);
    ic_graph_destroy(g);
    free(X), free(W), free(bias), free(Y1), free(Y2), free(Y3);
    return 0;
}

/* ---- --sweep: the matmul kernel under explicit ic_gemm_params ---- */

static int sweep(ic_ctx *c, int64_t M, int64_t N, int64_t K)
{
    ic_graph *g = matmul_graph(c, M, N, K);
    ic_program *p0, *p;
    ic_codegen_target *t;
    if (!g || ic_lower(c, g, &p0) || ic_fuse(c, p0, NULL, &p) || ic_codegen_target_create(c, &t)) {
        fprintf(stderr, "bench_gemm: sweep: %s\n", ic_last_error(c));
        return 1;
    }
    int nb = ic_program_num_buffers(p);
    ic_buffer bufs[8];
    void *tab[8];
    float *A = malloc(sizeof(float) * (size_t)(M * K)), *B = malloc(sizeof(float) * (size_t)(K * N));
    float *C = malloc(sizeof(float) * (size_t)(M * N));
    fill(A, M * K, 1), fill(B, K * N, 2);
    for (int i = 0; i < nb && i < 8; i++) {
        bufs[i] = *ic_program_buffer(p, i);
        tab[i] = bufs[i].kind == IC_BUF_OUTPUT ? (void *)C : bufs[i].index == 0 ? (void *)A : (void *)B;
    }
    int vl = ic_codegen_target_vector_bits(t) / 32;
    /* mr, vectors per row, kc, nc, pack_a (0 = the heuristic's value) */
    static const int cfgs[][5] = {
        { 0, 0, 0, 0, 0 },          { 8, 3, 1024, 1056, 1 }, { 8, 3, 512, 0, 1 },    { 8, 3, 256, 0, 1 },
        { 8, 3, 0, 0, -1 },         { 8, 3, 0, 1056, -1 },   { 6, 4, 0, 0, 1 },      { 6, 4, 0, 1024, -1 },
        { 10, 2, 0, 0, 1 },         { 10, 2, 0, 1024, -1 },  { 14, 2, 0, 0, 1 },     { 12, 2, 0, 1024, 1 },
        { 4, 4, 0, 0, 1 },          { 7, 3, 0, 0, -1 },
    };
    printf("\nsweep: matmul f32 %lldx%lldx%lld, %d threads (median of %d)\n", (long long)M, (long long)N,
           (long long)K, g_threads, g_reps / 2 + 1);
    for (size_t ci = 0; ci < sizeof cfgs / sizeof *cfgs; ci++) {
                ic_codegen_params cp;
                ic_codegen_params_default(t, ic_program_kernel(p, 0), bufs, &cp);
                cp.threads = g_threads;
                cp.gemm.mr = cfgs[ci][0];
                cp.gemm.nr = cfgs[ci][1] * vl;
                cp.gemm.kc = cfgs[ci][2];
                cp.gemm.nc = cfgs[ci][3];
                cp.gemm.pack_a = cfgs[ci][4];
                int pa = cp.gemm.pack_a;
                ic_gemm_params_default(t, ic_program_kernel(p, 0), bufs, &cp.gemm);
                ic__jit *jit;
                ic__kernel_fn fn;
                if (ic__jit_kernels(c, 1, ic_program_kernel(p, 0), nb, bufs, &cp, &jit, &fn)) {
                    fprintf(stderr, "bench_gemm: sweep: %s\n", ic_last_error(c));
                    return 1;
                }
                fn(tab);
                if (!spot_check("sweep", C, A, B, N, 1, NULL, false, M, N, K))
                    return 1;
                int R = g_reps / 2 + 1;
                double ts[64];
                for (int r = 0; r < R && r < 64; r++) {
                    /* one thread: its CPU time, which other processes' load does not inflate */
                    double t0 = g_threads == 1 ? cpu_s() : now_s();
                    fn(tab);
                    ts[r] = (g_threads == 1 ? cpu_s() : now_s()) - t0;
                }
                timing tm = summarize(ts, R < 64 ? R : 64);
                printf("  mr %2d nr %3d kc %4lld nc %4lld pack_a %2d: median %8.3f ms %7.1f GFLOP/s, best %8.3f ms %7.1f GFLOP/s\n",
                       cp.gemm.mr, cp.gemm.nr, (long long)cp.gemm.kc, (long long)cp.gemm.nc, pa, tm.med * 1e3,
                       2.0 * M * N * K / tm.med * 1e-9, tm.best * 1e3, 2.0 * M * N * K / tm.best * 1e-9);
                fflush(stdout);
                ic__jit_destroy(jit);
    }
    ic_codegen_target_destroy(t);
    ic_program_destroy(p);
    ic_program_destroy(p0);
    ic_graph_destroy(g);
    free(A), free(B), free(C);
    return 0;
}

int main(int argc, char **argv)
{
    bool do_sweep = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            g_threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            g_reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--quick"))
            g_quick = true;
        else if (!strcmp(argv[i], "--sweep"))
            do_sweep = true;
        else {
            fprintf(stderr, "usage: bench_gemm [--threads T] [--reps R] [--quick] [--sweep]\n");
            return 2;
        }
    }
    if (g_threads < 1 || g_reps < 1)
        return 2;
    ic_ctx *c;
    if (ic_ctx_create(NULL, &c))
        return 1;
#ifdef IC_HAVE_OPENBLAS
    openblas_set_num_threads(g_threads);
#endif
    ic_codegen_target *t;
    if (ic_codegen_target_create(c, &t))
        return 1;
    char la[128];
    loadavg(la, sizeof la);
    const char *f = ic_codegen_target_features(t);
    printf("bench_gemm: cpu %s (%d-bit vectors%s%s), %d threads for ic and OpenBLAS%s, load average %s\n",
           ic_codegen_target_cpu(t), ic_codegen_target_vector_bits(t),
           strstr(f, "+avx512bf16") ? ", avx512bf16" : "", strstr(f, "+amx-bf16") ? ", amx-bf16" : "", g_threads,
#ifdef IC_HAVE_OPENBLAS
           "",
#else
           " (OpenBLAS not found at build time: no comparison)",
#endif
           la);
    ic_codegen_target_destroy(t);
#ifdef IC_HAVE_OPENBLAS
    printf("OpenBLAS kernel: %s, %d threads\n", openblas_get_corename(), openblas_get_num_threads());
#endif
    int64_t s = g_quick ? 256 : 1024, lm = g_quick ? 2048 : 16384;
    int rc = 0;
    if (do_sweep)
        rc = sweep(c, s, s, s);
    else
        rc = bench_matmul(c, s, s, s) || bench_linear(c, lm, 512, 512);
    loadavg(la, sizeof la);
    printf("\nload average after: %s\n", la);
    ic_ctx_destroy(c);
    return rc ? 1 : 0;
}
