/* test_compile_perf.c - the compile-time and run-time machinery added for speed (lib/Runtime/
 * backend_cpu.c, pool.c, jit.c): kernels that are the same code on other buffers share one compiled body
 * (and are run with a renamed buffer table, also from several threads at once), kernels are
 * compiled on several threads (IC_COMPILE_THREADS) without changing a bit of the results,
 * IC_PROFILE prints a per-kernel table, and f32 exp never computes subnormals (a flush that
 * stays within the spec's tolerances). Expected values come from the reference executor. */
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <criterion/criterion.h>
#include "ic/ic.h"
#include "testutil.h"

/* ---- helpers ---- */

static unsigned rng(unsigned *s)
{
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

static void fill(ic_tensor *t, unsigned seed, double scale)
{
    int64_t n = ic_tensor_numel(t);
    for (int64_t i = 0; i < n; i++)
        ic_tensor_set(t, i, scale * (((int)(rng(&seed) % 512) - 256) / 256.0));
}

static ic_value node(ic_graph *g, const char *name, ic_op op, int n, const ic_operand *in, const ic_attrs *a)
{
    ic_value v;
    cr_assert_eq(ic_graph_add_node(g, name, op, n, in, a, &v), IC_OK, "%s: %s", name, ic_last_error(ic_graph_ctx(g)));
    return v;
}

static ic_value op2(ic_graph *g, const char *name, ic_op op, ic_operand a, ic_operand b)
{
    ic_operand in[2] = { a, b };
    return node(g, name, op, 2, in, NULL);
}

static ic_value op1(ic_graph *g, const char *name, ic_op op, ic_value a)
{
    ic_operand in[1] = { ic_val(a) };
    return node(g, name, op, 1, in, NULL);
}

static ic_value linear(ic_graph *g, const char *name, ic_value x, ic_value w, ic_value b)
{
    ic_operand in[3] = { ic_val(x), ic_val(w), ic_val(b) };
    return node(g, name, IC_OP_LINEAR, 3, in, NULL);
}

/* A param with data (a compile-time constant when freezing). */
static ic_value param_data(ic_graph *g, const char *name, int rank, const int64_t *shape, unsigned seed)
{
    ic_tensor t;
    ic_tensor_init(&t, IC_F32, rank, shape, NULL);
    cr_assert_eq(ic_tensor_alloc(ic_graph_ctx(g), &t), IC_OK);
    fill(&t, seed, 1.0);
    ic_dim d[IC_MAX_RANK];
    for (int i = 0; i < rank; i++)
        d[i] = ic_dim_const(shape[i]);
    ic_value v;
    cr_assert_eq(ic_graph_add_param(g, name, IC_F32, rank, d, t.data, (size_t)ic_tensor_numel(&t) * 4, NULL, NULL, &v),
                 IC_OK, "%s", ic_last_error(ic_graph_ctx(g)));
    ic_tensor_free(ic_graph_ctx(g), &t);
    return v;
}

/* Tensors shaped like g's args (or outputs), filled (or zeroed) by seed. Caller frees. */
static ic_tensor *tensors(ic_ctx *c, const ic_graph *g, bool outs, unsigned seed, double scale)
{
    int n = outs ? ic_graph_num_outputs(g) : ic_graph_num_args(g);
    ic_tensor *t = calloc((size_t)n + 1, sizeof *t);
    for (int i = 0; i < n; i++) {
        ic_node_info ni;
        ic_graph_node(g, outs ? ic_graph_output(g, i) : ic_graph_arg(g, i), &ni);
        int64_t shape[IC_MAX_RANK];
        for (int d = 0; d < ni.rank; d++)
            shape[d] = ni.shape[d].coef;
        ic_tensor_init(&t[i], ni.dtype, ni.rank, shape, NULL);
        cr_assert_eq(ic_tensor_alloc(c, &t[i]), IC_OK);
        if (outs)
            memset(t[i].data, 0, (size_t)ic_tensor_numel(&t[i]) * ic_dtype_size(ni.dtype));
        else
            fill(&t[i], seed + 101u * (unsigned)i, scale);
    }
    return t;
}

static void free_tensors(ic_ctx *c, ic_tensor *t, int n)
{
    for (int i = 0; i < n; i++)
        ic_tensor_free(c, &t[i]);
    free(t);
}

/* Runs cc on args into fresh outputs (caller frees). */
static ic_tensor *run(ic_ctx *c, ic_compiled *cc, const ic_graph *g, const ic_tensor *args)
{
    ic_tensor *got = tensors(c, g, true, 0, 0);
    ic_status s = ic_run(cc, ic_graph_num_args(g), args, ic_graph_num_outputs(g), got);
    cr_assert_eq(s, IC_OK, "ic_run '%s': %s", ic_graph_name(g), ic_last_error(c));
    return got;
}

/* Compiles g (o: NULL = defaults), checks every output against ic_ref_run. */
static void check(ic_ctx *c, const ic_graph *g, const ic_compile_options *o, double scale)
{
    int nargs = ic_graph_num_args(g), nouts = ic_graph_num_outputs(g);
    ic_tensor *args = tensors(c, g, false, 77u, scale);
    ic_tensor *want = calloc((size_t)nouts + 1, sizeof *want);
    cr_assert_eq(ic_ref_run(c, g, NULL, nargs, args, nouts, want), IC_OK, "ref: %s", ic_last_error(c));
    ic_compiled *cc;
    cr_assert_eq(ic_compile(c, g, o, &cc), IC_OK, "compile '%s': %s", ic_graph_name(g), ic_last_error(c));
    ic_tensor *got = run(c, cc, g, args);
    for (int i = 0; i < nouts; i++) {
        char m[1024];
        cr_assert(ict_allclose(&got[i], &want[i], m, sizeof m), "'%s' output %d: %s", ic_graph_name(g), i, m);
    }
    ic_compiled_destroy(cc);
    free_tensors(c, got, nouts);
    free_tensors(c, want, nouts);
    free_tensors(c, args, nargs);
}

/* The optimised IR ic_compile makes for g (ic-dump's llvm-opt), malloc'd. */
static char *llvm_opt(ic_ctx *c, const ic_graph *g, const ic_compile_options *o)
{
    return ict_compile_dump(c, g, o, "llvm-opt");
}

static int count(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

/* Attention-like projections: q, k, v = linear(x) with their own weights (the same code three
 * times, each an operand of a matmul); and relu(a + b) twice on other tensors (args, temps,
 * outputs). */
static ic_graph *twins_graph(ic_ctx *c)
{
    ic_graph *g = ict_graph(c, "twins");
    ic_value x = ict_input(g, "x", IC_F32, "4,33");
    ic_value w[3], b[3], p[3];
    const char *wn[3] = { "wq", "wk", "wv" }, *bn[3] = { "bq", "bk", "bv" }, *pn[3] = { "q", "k", "v" };
    for (int i = 0; i < 3; i++) {
        w[i] = ict_input(g, wn[i], IC_F32, "17,33");
        b[i] = ict_input(g, bn[i], IC_F32, "17");
        p[i] = linear(g, pn[i], x, w[i], b[i]);
    }
    ic_attrs at;
    ic_attrs_init(&at, IC_OP_TRANSPOSE);
    at.dim0 = 0, at.dim1 = 1;
    ic_operand kin[1] = { ic_val(p[1]) };
    ic_value kt = node(g, "kt", IC_OP_TRANSPOSE, 1, kin, &at);
    ic_value sc = op2(g, "sc", IC_OP_MATMUL, ic_val(p[0]), ic_val(kt));
    ic_value s = op2(g, "s", IC_OP_MATMUL, ic_val(sc), ic_val(p[2]));
    cr_assert_eq(ic_graph_add_output(g, s), IC_OK);
    ic_value a = ict_input(g, "a", IC_F32, "4,17"), a2 = ict_input(g, "a2", IC_F32, "4,17");
    ic_value r1 = op1(g, "r1", IC_OP_RELU, op2(g, "ab", IC_OP_ADD, ic_val(a), ic_val(s)));
    ic_value r2 = op1(g, "r2", IC_OP_RELU, op2(g, "ab2", IC_OP_ADD, ic_val(a2), ic_val(r1)));
    cr_assert_eq(ic_graph_add_output(g, r2), IC_OK);
    return g;
}

/* ---- kernels that are the same code ---- */

Test(compile_perf, same_code_kernels_share_one_body)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = twins_graph(c);
    for (int fusion = 0; fusion < 2; fusion++) {
        ic_compile_options o;
        ic_compile_options_init(&o);
        o.fusion = fusion;
        check(c, g, &o, 1.0);
        char *ir = llvm_opt(c, g, &o);
        /* k and v run q's code; unfused also the second add and relu run the first ones' */
        int want = fusion ? 2 : 4;
        cr_assert_eq(count(ir, "': the code of kernel"), want, "fusion %d: %d kernels share code, want %d\n%s",
                     fusion, count(ir, "': the code of kernel"), want, ir);
        free(ir);
    }
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

Test(compile_perf, kernels_that_differ_keep_their_own_code)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "near_twins");
    ic_value x = ict_input(g, "x", IC_F32, "5,9"), y = ict_input(g, "y", IC_F32, "5,9");
    ic_value h = ict_input(g, "h", IC_F16, "5,9");
    /* a constant, a dtype and a shape apart */
    ic_value r1 = op2(g, "r1", IC_OP_MUL, ic_val(x), ic_scalar_f(2.0));
    ic_value r2 = op2(g, "r2", IC_OP_MUL, ic_val(y), ic_scalar_f(3.0));
    ic_value r3 = op2(g, "r3", IC_OP_MUL, ic_val(h), ic_scalar_f(3.0));
    ic_value z = ict_input(g, "z", IC_F32, "5,8");
    ic_value r4 = op2(g, "r4", IC_OP_MUL, ic_val(z), ic_scalar_f(3.0));
    ic_value outs[4] = { r1, r2, r3, r4 };
    for (int i = 0; i < 4; i++)
        cr_assert_eq(ic_graph_add_output(g, outs[i]), IC_OK);
    check(c, g, NULL, 1.0);
    char *ir = llvm_opt(c, g, NULL);
    cr_assert_eq(count(ir, "': the code of kernel"), 0, "kernels that differ share code:\n%s", ir);
    free(ir);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* Freezing packs each weight into the code: linears with other weights keep their own code,
 * the same weight applied twice shares it. */
Test(compile_perf, frozen_weights_share_code_only_when_the_same)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "frozen_twins");
    ic_value x = ict_input(g, "x", IC_F32, "6,40"), x2 = ict_input(g, "x2", IC_F32, "6,40");
    ic_value w1 = param_data(g, "w1", 2, (int64_t[]){ 24, 40 }, 5u), w2 = param_data(g, "w2", 2, (int64_t[]){ 24, 40 }, 6u);
    ic_value b = param_data(g, "b", 1, (int64_t[]){ 24 }, 7u);
    ic_value y1 = linear(g, "y1", x, w1, b), y2 = linear(g, "y2", x, w2, b), y3 = linear(g, "y3", x2, w1, b);
    ic_value outs[3] = { y1, y2, y3 };
    for (int i = 0; i < 3; i++)
        cr_assert_eq(ic_graph_add_output(g, outs[i]), IC_OK);
    ic_compile_options o;
    ic_compile_options_init(&o);
    o.freezing = 1;
    check(c, g, &o, 1.0);
    char *ir = llvm_opt(c, g, &o);
    cr_assert_eq(count(ir, "': the code of kernel"), 1, "want only y3 to run y1's code:\n%s", ir);
    cr_assert(strstr(ir, "'y3") == NULL || strstr(ir, "the code of kernel 0") != NULL, "%s", ir);
    free(ir);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

typedef struct {
    ic_ctx *c;
    ic_compiled *cc;
    const ic_graph *g;
    unsigned seed;
    bool ok;
    char msg[1024];
} runner_t;

static void *runner(void *arg)
{
    runner_t *r = arg;
    int nargs = ic_graph_num_args(r->g), nouts = ic_graph_num_outputs(r->g);
    ic_tensor *args = tensors(r->c, r->g, false, r->seed, 1.0);
    ic_tensor *want = calloc((size_t)nouts + 1, sizeof *want);
    r->ok = ic_ref_run(r->c, r->g, NULL, nargs, args, nouts, want) == IC_OK;
    for (int it = 0; it < 20 && r->ok; it++) {
        ic_tensor *got = tensors(r->c, r->g, true, 0, 0);
        r->ok = ic_run(r->cc, nargs, args, nouts, got) == IC_OK;
        for (int i = 0; i < nouts && r->ok; i++)
            r->ok = ict_allclose(&got[i], &want[i], r->msg, sizeof r->msg);
        free_tensors(r->c, got, nouts);
    }
    free_tensors(r->c, want, nouts);
    free_tensors(r->c, args, nargs);
    return NULL;
}

/* Each run renames the shared code's buffers in its own scratch: concurrent runs with other
 * data do not see each other's tables. */
Test(compile_perf, shared_code_runs_concurrently)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = twins_graph(c);
    ic_compiled *cc;
    cr_assert_eq(ic_compile(c, g, NULL, &cc), IC_OK, "%s", ic_last_error(c));
    enum { T = 4 };
    pthread_t tid[T];
    runner_t r[T];
    for (int i = 0; i < T; i++) {
        r[i] = (runner_t){ c, cc, g, 1000u + 17u * (unsigned)i, false, "" };
        cr_assert_eq(pthread_create(&tid[i], NULL, runner, &r[i]), 0);
    }
    for (int i = 0; i < T; i++) {
        pthread_join(tid[i], NULL);
        cr_assert(r[i].ok, "thread %d: %s", i, r[i].msg);
    }
    ic_compiled_destroy(cc);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* ---- parallel compilation ---- */

/* The context's IC_COMPILE_THREADS switch, through the API (the environment is read once,
 * when the context is made). */
static void set_compile_threads(ic_ctx *c, int n)
{
    ic_switches sw;
    ic_ctx_switches(c, &sw);
    sw.compile_threads = n;
    cr_assert_eq(ic_ctx_set_switches(c, &sw), IC_OK);
}

/* One compile with IC_COMPILE_THREADS=threads, run on fixed args; outputs returned. */
static ic_tensor *compile_run(ic_ctx *c, const ic_graph *g, const char *threads, const ic_tensor *args)
{
    set_compile_threads(c, atoi(threads));
    ic_compiled *cc;
    cr_assert_eq(ic_compile(c, g, NULL, &cc), IC_OK, "threads %s: %s", threads, ic_last_error(c));
    set_compile_threads(c, 0);
    ic_tensor *got = run(c, cc, g, args);
    ic_compiled_destroy(cc);
    return got;
}

Test(compile_perf, compile_threads_do_not_change_a_bit)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = twins_graph(c);
    int nargs = ic_graph_num_args(g), nouts = ic_graph_num_outputs(g);
    ic_tensor *args = tensors(c, g, false, 5u, 1.0);
    ic_tensor *one = compile_run(c, g, "1", args);
    static const char *const ns[] = { "2", "3", "16" };
    for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
        ic_tensor *many = compile_run(c, g, ns[k], args);
        for (int i = 0; i < nouts; i++)
            cr_assert(memcmp(one[i].data, many[i].data, (size_t)ic_tensor_numel(&one[i]) * 4) == 0,
                      "output %d differs between 1 and %s compile threads", i, ns[k]);
        free_tensors(c, many, nouts);
    }
    free_tensors(c, one, nouts);
    free_tensors(c, args, nargs);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* A kernel that cannot be generated (here: one that touches more buffers than a kernel may)
 * fails the whole compile with its message, whichever thread met it, while the other jobs
 * finish; nothing leaks (the sanitizer build checks). */
Test(compile_perf, a_failing_job_fails_the_compile)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = twins_graph(c);
    ic_value sum = -1;
    char name[32];
    for (int k = 0; k < 5; k++) {
        ic_operand in[60];
        for (int i = 0; i < 60; i++) {
            snprintf(name, sizeof name, "c%d_%d", k, i);
            in[i] = ic_val(ict_input(g, name, IC_F32, "2,3"));
        }
        snprintf(name, sizeof name, "cat%d", k);
        ic_value cv = node(g, name, IC_OP_CAT, 60, in, NULL);
        snprintf(name, sizeof name, "sum%d", k);
        sum = sum < 0 ? cv : op2(g, name, IC_OP_ADD, ic_val(sum), ic_val(cv));
    }
    cr_assert_eq(ic_graph_add_output(g, sum), IC_OK);
    for (int threads = 1; threads <= 3; threads += 2) {
        set_compile_threads(c, threads);
        ic_compiled *cc = (ic_compiled *)&cc;
        ic_status s = ic_compile(c, g, NULL, &cc);
        set_compile_threads(c, 0);
        ict_assert_error(c, s, IC_EUNSUPPORTED, "touches", "buffers");
        cr_assert(cc == NULL, "a failed compile left an object");
    }
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* ---- IC_PROFILE ---- */

Test(compile_perf, profile_prints_every_kernel_at_destroy)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = twins_graph(c);
    const char *dir = ict_tmpdir();
    char path[1024];
    snprintf(path, sizeof path, "%s", ict_path(dir, "stderr.txt"));
    ic_switches sw;
    ic_ctx_switches(c, &sw);
    sw.profile = true; /* IC_PROFILE=1, through the API */
    cr_assert_eq(ic_ctx_set_switches(c, &sw), IC_OK);
    ic_compiled *cc;
    cr_assert_eq(ic_compile(c, g, NULL, &cc), IC_OK, "%s", ic_last_error(c));
    ic_ctx_switches(c, &sw); /* its strings belong to the context: the last set freed the old ones */
    sw.profile = false;
    cr_assert_eq(ic_ctx_set_switches(c, &sw), IC_OK);
    int nargs = ic_graph_num_args(g), nouts = ic_graph_num_outputs(g), nk = ic_compiled_num_kernels(cc);
    char names[16][128];
    cr_assert(nk > 0 && nk <= 16, "%d kernels", nk);
    for (int k = 0; k < nk; k++)
        snprintf(names[k], sizeof names[k], "%s", ic_compiled_kernel_name(cc, k));
    ic_tensor *args = tensors(c, g, false, 3u, 1.0);
    for (int it = 0; it < 3; it++)
        free_tensors(c, run(c, cc, g, args), nouts);
    fflush(stderr);
    int saved = dup(2);
    FILE *f = freopen(path, "w", stderr);
    cr_assert(f, "cannot redirect stderr");
    ic_compiled_destroy(cc);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    size_t n;
    char *raw = ict_read_file(path, &n), *text = raw ? realloc(raw, n + 1) : NULL;
    cr_assert(text, "no profile written");
    text[n] = 0; /* ict_read_file does not terminate */
    cr_assert(strstr(text, "ic: profile of 'twins'") && strstr(text, "3 runs"), "%s", text);
    for (int k = 0; k < nk; k++)
        cr_assert(strstr(text, names[k]), "kernel '%s' missing from the profile:\n%s", names[k], text);
    cr_assert(strstr(text, "all kernels"), "%s", text);
    free(text);
    free_tensors(c, args, nargs);
    ict_rmtree(dir);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* ---- exp without subnormals ---- */

/* exp of x below ln(FLT_MIN) is flushed to 0 (within atol), above it normal and accurate:
 * no lane computes a subnormal, which x86 runs ~100x slower. softmax rows with large logit
 * gaps still match the reference. */
Test(compile_perf, exp_flushes_below_flt_min)
{
    static const float xs[] = { -87.0f, -87.33f, -87.3365f, -87.34f, -87.5f, -88.0f, -90.0f, -95.0f,
                                -100.0f, -103.9f, -104.0f, -110.0f, -1e4f, -1.0f, 0.0f, 1.0f };
    enum { N = sizeof xs / sizeof *xs };
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "exp_low");
    ic_value x = ict_input(g, "x", IC_F32, "16");
    cr_assert_eq(ic_graph_add_output(g, op1(g, "y", IC_OP_EXP, x)), IC_OK);
    ic_compiled *cc;
    cr_assert_eq(ic_compile(c, g, NULL, &cc), IC_OK, "%s", ic_last_error(c));
    float y[N];
    ic_tensor a, o;
    ic_tensor_init(&a, IC_F32, 1, (int64_t[]){ N }, (void *)xs);
    ic_tensor_init(&o, IC_F32, 1, (int64_t[]){ N }, y);
    cr_assert_eq(ic_run(cc, 1, &a, 1, &o), IC_OK, "%s", ic_last_error(c));
    for (int i = 0; i < N; i++) {
        double want = exp((double)xs[i]);
        cr_assert(y[i] == 0 || y[i] >= FLT_MIN, "exp(%g) = %g is subnormal", xs[i], y[i]);
        if (want >= 1.0000001 * FLT_MIN) /* normal results keep their accuracy */
            cr_assert(fabs(y[i] - want) <= 4e-7 * want, "exp(%g): got %.9g, want %.9g", xs[i], y[i], want);
        else
            cr_assert(fabs(y[i] - want) <= 1.2e-38, "exp(%g): got %g, want %g", xs[i], y[i], want);
    }
    ic_compiled_destroy(cc);
    ic_graph_destroy(g);
    /* softmax over rows whose logits span hundreds (scaled inputs) */
    g = ict_graph(c, "softmax_gaps");
    x = ict_input(g, "x", IC_F32, "8,128");
    ic_attrs at;
    ic_attrs_init(&at, IC_OP_SOFTMAX);
    at.dim = -1;
    ic_operand in[1] = { ic_val(x) };
    cr_assert_eq(ic_graph_add_output(g, node(g, "p", IC_OP_SOFTMAX, 1, in, &at)), IC_OK);
    check(c, g, NULL, 120.0);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}
