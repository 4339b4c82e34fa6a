/* test_threads.c - the threading contract (include/ic/status.h, "Threads"), end to end: several
 * threads on ONE context build, compile and run the same graph and different graphs (pointwise,
 * a row reduction, a GEMM with its epilogue, a symbolic graph whose variants are compiled under
 * concurrent runs; autotuned, frozen, unfused), several threads run one compiled graph at once
 * (and save it, load it, ask what it ran), the persistent cache is shared by the threads and by
 * another process (and off), errors provoked at the same time in several threads each stay
 * their own thread's, and threads compile and run for GPUs of their own through the stand-in
 * driver unittests/Tools/fake_libcuda.c. Every CPU result is checked against the reference
 * executor (the stand-in's kernels do nothing: there only the calls are checked). Kernels run
 * on OpenMP teams of two (serial_threshold 1), so libomp is entered from several threads at
 * once.
 *
 * It runs in the ASan suite like every test, and under ThreadSanitizer in scripts/ci-tsan.sh,
 * where a data race anywhere on these paths fails it. Worker threads never call Criterion's
 * asserts (they must run on the test's own thread): each keeps its first failure in its
 * 'worker' record, asserted after the join. */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <criterion/criterion.h>
#include "graph-impl.h"
#include "ic/ic.h"
#include "ic/ptx.h"
#include "testutil.h"

enum { NTHREADS = 6, ROUNDS = 3 };

/* One thread's work and its first failure. */
typedef struct {
    ic_ctx *c;
    int id;
    const ic_graph *shared;  /* the graph every thread compiles (and runs) */
    ic_compiled *cc[4];      /* the compiled graphs every thread runs (one_compiled_graph) */
    const ic_graph *ccg[4];
    char path[512];          /* where it saves a compiled graph (run_one_compiled_graph) */
    char json[512];          /* the shared graph's file, loaded by every thread ("" = none) */
    char debug[512];         /* the debug folders' parent of its debug compiles ("" = none) */
    bool ok;
    char msg[1024];
} worker;

static bool fail(worker *w, const char *fmt, ...)
{
    if (w->ok) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(w->msg, sizeof w->msg, fmt, ap);
        va_end(ap);
    }
    w->ok = false;
    return false;
}

/* ---- the graphs, built through the C API by whichever thread needs one ---- */

enum { G_POINTWISE, G_REDUCTION, G_GEMM, G_SYMBOLIC, G_KINDS };

static ic_graph *new_graph(ic_ctx *c, const char *name)
{
    ic_graph *g = NULL;
    return ic_graph_create(c, name, &g) ? NULL : g;
}

static bool input(ic_graph *g, const char *name, int rank, const ic_dim *shape, ic_value *v)
{
    return ic_graph_add_input(g, name, IC_F32, rank, shape, v) == IC_OK;
}

/* y = exp(x) * 0.5 + x, x [64, 129] */
static ic_graph *pointwise_graph(ic_ctx *c, const char *name)
{
    ic_graph *g = new_graph(c, name);
    ic_dim sh[2] = { ic_dim_const(64), ic_dim_const(129) };
    ic_value x, e, h, y;
    bool ok = g && input(g, "x", 2, sh, &x) && !ic_graph_unary(g, "e", IC_OP_EXP, ic_val(x), &e) &&
              !ic_graph_binary(g, "h", IC_OP_MUL, ic_val(e), ic_scalar_f(0.5), &h) &&
              !ic_graph_binary(g, "y", IC_OP_ADD, ic_val(h), ic_val(x), &y) && !ic_graph_add_output(g, y);
    return ok ? g : (ic_graph_destroy(g), NULL);
}

/* y = softmax(x * x, dim 1) and s = sum(x, dim 1): row kernels, x [37, 300] */
static ic_graph *reduction_graph(ic_ctx *c, const char *name)
{
    ic_graph *g = new_graph(c, name);
    ic_dim sh[2] = { ic_dim_const(37), ic_dim_const(300) };
    ic_value x, q, y, s;
    ic_attrs sm, sum;
    ic_attrs_init(&sm, IC_OP_SOFTMAX);
    sm.dim = 1;
    ic_attrs_init(&sum, IC_OP_SUM);
    sum.has_dims = true, sum.ndims = 1, sum.dims[0] = 1;
    bool ok = g && input(g, "x", 2, sh, &x) && !ic_graph_binary(g, "q", IC_OP_MUL, ic_val(x), ic_val(x), &q) &&
              !ic_graph_add_node(g, "y", IC_OP_SOFTMAX, 1, (ic_operand[]){ ic_val(q) }, &sm, &y) &&
              !ic_graph_add_node(g, "s", IC_OP_SUM, 1, (ic_operand[]){ ic_val(x) }, &sum, &s) &&
              !ic_graph_add_output(g, y) && !ic_graph_add_output(g, s);
    return ok ? g : (ic_graph_destroy(g), NULL);
}

/* y = relu(linear(x, w, b)): the packed GEMM path with a fused epilogue, x [48, 96], w [80, 96] */
static ic_graph *gemm_graph(ic_ctx *c, const char *name)
{
    enum { M = 48, K = 96, N = 80 };
    float *w = malloc(sizeof(float) * N * K), b[N];
    for (int i = 0; i < N * K; i++)
        w[i] = (float)((i * 7) % 17 - 8) / 16.0f;
    for (int i = 0; i < N; i++)
        b[i] = (float)(i % 5 - 2) / 8.0f;
    ic_graph *g = new_graph(c, name);
    ic_dim xs[2] = { ic_dim_const(M), ic_dim_const(K) }, ws[2] = { ic_dim_const(N), ic_dim_const(K) },
           bs[1] = { ic_dim_const(N) };
    ic_value x, wv, bv, l, y;
    bool ok = w && g && input(g, "x", 2, xs, &x) &&
              !ic_graph_add_param(g, "w", IC_F32, 2, ws, w, sizeof(float) * N * K, NULL, NULL, &wv) &&
              !ic_graph_add_param(g, "b", IC_F32, 1, bs, b, sizeof b, NULL, NULL, &bv) &&
              !ic_graph_add_node(g, "l", IC_OP_LINEAR, 3, (ic_operand[]){ ic_val(x), ic_val(wv), ic_val(bv) },
                                 NULL, &l) &&
              !ic_graph_unary(g, "y", IC_OP_RELU, ic_val(l), &y) && !ic_graph_add_output(g, y);
    free(w);
    return ok ? g : (ic_graph_destroy(g), NULL);
}

/* y = tanh(x) - x, x [B, 33]: each size B is a variant compiled on first sight */
static ic_graph *symbolic_graph(ic_ctx *c, const char *name)
{
    ic_graph *g = new_graph(c, name);
    ic_dim sh[2];
    ic_value x, t, y;
    bool ok = g && !ic_graph_symbol(g, "B", &sh[0]);
    sh[1] = ic_dim_const(33);
    ok = ok && input(g, "x", 2, sh, &x) && !ic_graph_unary(g, "t", IC_OP_TANH, ic_val(x), &t) &&
         !ic_graph_binary(g, "y", IC_OP_SUB, ic_val(t), ic_val(x), &y) && !ic_graph_add_output(g, y);
    return ok ? g : (ic_graph_destroy(g), NULL);
}

static ic_graph *make_graph(ic_ctx *c, int kind, const char *name)
{
    switch (kind) {
    case G_POINTWISE: return pointwise_graph(c, name);
    case G_REDUCTION: return reduction_graph(c, name);
    case G_GEMM: return gemm_graph(c, name);
    default: return symbolic_graph(c, name);
    }
}

/* ---- compile, run, compare ---- */

/* Kernels on OpenMP teams of two whatever their size: libomp entered from every thread. */
static ic_compile_options options(int fusion)
{
    ic_compile_options o;
    ic_compile_options_init(&o);
    o.fusion = fusion;
    o.threads = 2;
    o.serial_threshold = 1;
    return o;
}

static void free_tensors(ic_ctx *c, ic_tensor *t, int n)
{
    for (int i = 0; i < n; i++)
        ic_tensor_free(c, &t[i]);
}

/* g's arguments (a symbolic dim of size b), filled from seed in [-2, 2); false on OOM. */
static bool make_args(ic_ctx *c, const ic_graph *g, int64_t b, unsigned seed, ic_tensor *args)
{
    int n = ic_graph_num_args(g);
    memset(args, 0, sizeof *args * (size_t)n);
    for (int i = 0; i < n; i++) {
        ic_node_info ni;
        ic_graph_node(g, ic_graph_arg(g, i), &ni);
        int64_t shape[IC_MAX_RANK];
        for (int d = 0; d < ni.rank; d++)
            shape[d] = ic_dim_is_const(ni.shape[d]) ? ni.shape[d].coef : b;
        ic_tensor_init(&args[i], ni.dtype, ni.rank, shape, NULL);
        if (ic_tensor_alloc(c, &args[i]))
            return false;
        for (int64_t k = 0; k < ic_tensor_numel(&args[i]); k++) {
            seed = seed * 1664525u + 1013904223u;
            ic_tensor_set(&args[i], k, -2.0 + 4.0 * ((seed >> 8) & 0xffff) / 65536.0);
        }
    }
    return true;
}

/* Runs cc on fresh args (symbolic size b) and compares every output with ic_ref_run. */
static bool run_checked(worker *w, const ic_graph *g, ic_compiled *cc, int64_t b, unsigned seed)
{
    ic_ctx *c = w->c;
    int nargs = ic_graph_num_args(g), nouts = ic_graph_num_outputs(g);
    ic_tensor args[4], want[4] = { { 0 } }, got[4] = { { 0 } };
    int64_t vals[1] = { b };
    bool ok = make_args(c, g, b, seed, args) || fail(w, "out of memory for arguments");
    if (ok && ic_ref_run(c, g, ic_graph_num_symbols(g) ? vals : NULL, nargs, args, nouts, want))
        ok = fail(w, "ic_ref_run '%s': %s", ic_graph_name(g), ic_last_error(c));
    for (int i = 0; ok && i < nouts; i++) {
        ic_tensor_init(&got[i], want[i].dtype, want[i].rank, want[i].shape, NULL);
        ok = !ic_tensor_alloc(c, &got[i]) || fail(w, "out of memory for outputs");
    }
    if (ok && ic_run(cc, nargs, args, nouts, got))
        ok = fail(w, "ic_run '%s': %s", ic_graph_name(g), ic_last_error(c));
    for (int i = 0; ok && i < nouts; i++) {
        char m[700];
        if (!ict_allclose(&got[i], &want[i], m, sizeof m))
            ok = fail(w, "graph '%s' output %d differs from the reference: %s", ic_graph_name(g), i, m);
    }
    free_tensors(c, args, nargs);
    free_tensors(c, want, nouts);
    free_tensors(c, got, nouts);
    return ok;
}

/* Compiles g under o and checks two runs of it (two sizes when symbolic). */
static bool compile_checked(worker *w, const ic_graph *g, const ic_compile_options *o, unsigned seed)
{
    ic_compiled *cc = NULL;
    if (ic_compile(w->c, g, o, &cc))
        return fail(w, "ic_compile '%s': %s", ic_graph_name(g), ic_last_error(w->c));
    bool ok = run_checked(w, g, cc, 5 + w->id % 3, seed) && run_checked(w, g, cc, 11, seed + 1);
    ic_compiled_destroy(cc);
    return ok;
}

/* Round r of thread w: fusion on or off, and in turn the autotuner (a short budget: its
 * records go to the shared cache), freezing (GEMM weights packed at compile time) or a debug
 * folder. */
static ic_compile_options round_options(const worker *w, int r)
{
    ic_compile_options o = options((w->id + r) % 2);
    if ((w->id + r) % 3 == 0 && w->debug[0]) {
        o.debug = 1;
        o.debug_dir = w->debug;
    } else if ((w->id + r) % 3 == 1) {
        o.autotune = IC_TUNE_GEMM | IC_TUNE_POINTWISE | IC_TUNE_REDUCTION;
        o.autotune_budget_s = 1;
    } else if ((w->id + r) % 3 == 2) {
        o.freezing = 1;
    }
    return o;
}

/* Each round: a graph of its own (the kinds rotate, so different graphs compile at once), then
 * the shared one, which every thread compiles into a compiled graph of its own, then the same
 * graph loaded from its file by every thread. */
static void *compile_work(void *p)
{
    worker *w = p;
    for (int r = 0; r < ROUNDS && w->ok; r++) {
        int kind = (w->id + r) % G_KINDS;
        char name[32];
        snprintf(name, sizeof name, "t%d_r%d", w->id, r);
        ic_graph *g = make_graph(w->c, kind, name);
        if (!g) {
            fail(w, "building graph %s: %s", name, ic_last_error(w->c));
            break;
        }
        unsigned seed = 100u * (unsigned)w->id + (unsigned)r;
        ic_compile_options o = round_options(w, r);
        if (compile_checked(w, g, &o, seed))
            compile_checked(w, w->shared, &o, seed);
        ic_graph_destroy(g);
        ic_graph *loaded = NULL;
        if (w->ok && w->json[0] && ic_graph_load_json(w->c, w->json, &loaded))
            fail(w, "ic_graph_load_json: %s", ic_last_error(w->c));
        if (loaded)
            compile_checked(w, loaded, &o, seed);
        ic_graph_destroy(loaded);
    }
    return NULL;
}

static void start_all(worker *w, int n, void *(*fn)(void *))
{
    pthread_t th[NTHREADS];
    for (int i = 0; i < n; i++)
        cr_assert_eq(pthread_create(&th[i], NULL, fn, &w[i]), 0);
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < n; i++)
        cr_assert(w[i].ok, "thread %d: %s", i, w[i].msg);
}

static void init_workers(worker *w, int n, ic_ctx *c, const ic_graph *shared)
{
    for (int i = 0; i < n; i++)
        w[i] = (worker){ .c = c, .id = i, .shared = shared, .ok = true };
}

/* A context whose persistent cache is dir (off when dir is NULL). */
static ic_ctx *cache_ctx(const char *dir)
{
    ic_ctx *c = ict_ctx();
    ic_switches sw;
    ic_ctx_switches(c, &sw);
    sw.cache_dir = dir;
    sw.no_cache = !dir;
    cr_assert_eq(ic_ctx_set_switches(c, &sw), IC_OK);
    return c;
}

/* Another process compiling the same graphs into the same cache meanwhile: its own context,
 * the same work as one thread. Exits 0 when every result matched. */
static pid_t start_process(const char *dir)
{
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0, "fork");
    if (pid > 0)
        return pid;
    ic_ctx *c = cache_ctx(dir);
    ic_graph *shared = gemm_graph(c, "shared");
    worker w = { .c = c, .id = NTHREADS, .shared = shared, .ok = shared != NULL };
    compile_work(&w);
    if (!w.ok)
        fprintf(stderr, "the other process: %s\n", w.msg);
    ic_graph_destroy(shared);
    ic_ctx_destroy(c);
    _exit(w.ok ? 0 : 1);
}

/* N threads on one context in the folder work: the persistent cache in work/cache (off when
 * !cache), the shared graph saved as work/shared.json, debug folders under work/debug. With
 * other_process, another process shares the cache meanwhile (forked first, while this one has
 * no threads yet: a child of a process with threads may not start threads under TSan). */
static void compile_on_one_context(const char *work, bool cache, bool other_process)
{
    char dir[300], json[300], debug[300];
    snprintf(dir, sizeof dir, "%s/cache", work);
    snprintf(json, sizeof json, "%s/shared.json", work);
    snprintf(debug, sizeof debug, "%s/debug", work);
    pid_t other = other_process ? start_process(dir) : -1;
    ic_ctx *c = cache_ctx(cache ? dir : NULL);
    ic_graph *shared = gemm_graph(c, "shared");
    cr_assert(shared, "%s", ic_last_error(c));
    cr_assert_eq(ic_graph_save_json(shared, json), IC_OK, "%s", ic_last_error(c));
    worker w[NTHREADS];
    init_workers(w, NTHREADS, c, shared);
    for (int i = 0; i < NTHREADS; i++) {
        snprintf(w[i].json, sizeof w[i].json, "%s", json);
        snprintf(w[i].debug, sizeof w[i].debug, "%s", debug);
    }
    start_all(w, NTHREADS, compile_work);
    if (other_process) {
        int st = 0;
        cr_assert_eq(waitpid(other, &st, 0), other);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the other process failed (status %#x)", st);
    }
    if (cache) { /* what the threads cached serves a compile here */
        ic_compile_options o = options(1);
        ic_compiled *cc;
        ic_autotune_stats st;
        cr_assert_eq(ic_compile(c, shared, &o, &cc), IC_OK, "%s", ic_last_error(c));
        ic_compiled_autotune_stats(cc, &st);
        cr_assert(st.code_hits > 0 && st.code_misses == 0, "cache: %d hits, %d misses", st.code_hits,
                  st.code_misses);
        ic_compiled_destroy(cc);
    }
    cr_assert_gt(ict_count_files(debug), 0, "no debug folder in %s", debug);
    ic_graph_destroy(shared);
    ic_ctx_destroy(c);
}

Test(threads, compile_same_and_different_graphs_cache_on)
{
    char work[256];
    snprintf(work, sizeof work, "%s", ict_tmpdir());
    compile_on_one_context(work, true, true);
    /* warm: the same compiles again, the code from the cache */
    compile_on_one_context(work, true, false);
    ict_rmtree(work);
}

Test(threads, compile_same_and_different_graphs_cache_off)
{
    char work[256];
    snprintf(work, sizeof work, "%s", ict_tmpdir());
    compile_on_one_context(work, false, false);
    ict_rmtree(work);
}

/* ---- one compiled graph, many runners ---- */

/* Saves the compiled GEMM (while the others run it) into w->path, which another thread writes
 * too, loads that file and checks the loaded graph. */
static void save_and_load(worker *w, unsigned seed)
{
    ic_compiled *loaded = NULL;
    if (ic_compiled_save(w->cc[G_GEMM], w->path, true))
        fail(w, "ic_compiled_save: %s", ic_last_error(w->c));
    else if (ic_compiled_load(w->c, w->path, &loaded))
        fail(w, "ic_compiled_load: %s", ic_last_error(w->c));
    else
        run_checked(w, ic_compiled_graph(loaded), loaded, 1, seed);
    ic_compiled_destroy(loaded);
}

/* What a compiled graph says of itself while others run it (and compile its variants). */
static void introspect(worker *w, const ic_compiled *cc)
{
    ic_autotune_stats st;
    int64_t shape[IC_MAX_RANK];
    int n = ic_compiled_num_kernels(cc), nv = ic_compiled_num_variants(cc);
    ic_compiled_autotune_stats(cc, &st);
    if (n < 1 || nv < 1 || ic_compiled_compile_ms(cc) <= 0 || ic_compiled_output_shape(cc, 0, shape) < 1 ||
        !ic_compiled_kernel_name(cc, 0))
        fail(w, "introspection: %d kernels, %d variants", n, nv);
}

static void *run_work(void *p)
{
    worker *w = p;
    for (int r = 0; r < 4 && w->ok; r++) {
        for (int k = 0; k < G_KINDS && w->ok; k++) {
            run_checked(w, w->ccg[k], w->cc[k], 1 + (w->id + r) % 7, 10u * (unsigned)w->id + (unsigned)r);
            introspect(w, w->cc[k]);
        }
        if (w->path[0] && w->ok)
            save_and_load(w, (unsigned)r);
    }
    return NULL;
}

/* Every thread runs the same four compiled graphs at once; the symbolic one meets new sizes
 * in several threads, so variants are compiled while other threads run it. Two threads also
 * save the GEMM into one file meanwhile and load it back. */
Test(threads, run_one_compiled_graph_from_many_threads)
{
    char dir[256];
    snprintf(dir, sizeof dir, "%s", ict_tmpdir());
    ic_ctx *c = cache_ctx(dir);
    ic_graph *g[G_KINDS];
    ic_compiled *cc[G_KINDS];
    for (int k = 0; k < G_KINDS; k++) {
        cr_assert((g[k] = make_graph(c, k, "runners")), "%s", ic_last_error(c));
        ic_compile_options o = options(1);
        o.max_variants = 3; /* fewer than the sizes: variants are dropped and made again */
        cr_assert_eq(ic_compile(c, g[k], &o, &cc[k]), IC_OK, "%s", ic_last_error(c));
    }
    worker w[NTHREADS];
    init_workers(w, NTHREADS, c, NULL);
    for (int i = 0; i < NTHREADS; i++)
        for (int k = 0; k < G_KINDS; k++)
            w[i].cc[k] = cc[k], w[i].ccg[k] = g[k];
    snprintf(w[1].path, sizeof w[1].path, "%s/gemm.icm", dir);
    snprintf(w[2].path, sizeof w[2].path, "%s/gemm.icm", dir);
    start_all(w, NTHREADS, run_work);
    for (int k = 0; k < G_KINDS; k++) {
        ic_compiled_destroy(cc[k]);
        ic_graph_destroy(g[k]);
    }
    ic_ctx_destroy(c);
    ict_rmtree(dir);
}

/* ---- errors stay in their thread ---- */

/* Status s must be want and this thread's message must contain text. */
static void expect_error(worker *w, const char *what, ic_status s, ic_status want, const char *text)
{
    const char *msg = ic_last_error(w->c);
    if (w->ok && (s != want || !strstr(msg, text)))
        fail(w, "%s: status %d, message '%s', want %d and '%s'", what, s, msg, want, text);
}

/* Three failures naming this thread: a node that does not infer in graph bad<id>, an unknown
 * mode, a run with a wrong output. */
static void fail_three_ways(worker *w)
{
    ic_ctx *c = w->c;
    char name[32], node[16], mode[32], want[160];
    snprintf(name, sizeof name, "bad%d", w->id);
    snprintf(node, sizeof node, "y%d", w->id);
    snprintf(mode, sizeof mode, "mode-of-%d", w->id);
    ic_graph *g = pointwise_graph(c, name);
    if (!g) {
        fail(w, "building %s: %s", name, ic_last_error(c));
        return;
    }
    ic_value y;
    snprintf(want, sizeof want, "graph '%s' node '%s' (matmul)", name, node);
    /* x [64, 129] @ x [64, 129] */
    expect_error(w, "shape error", ic_graph_binary(g, node, IC_OP_MATMUL, ic_val(0), ic_val(0), &y),
                 IC_ESHAPE, want);
    ic_compile_options o = options(1);
    o.mode = mode;
    ic_compiled *cc = NULL;
    snprintf(want, sizeof want, "unknown compile mode '%s'", mode);
    expect_error(w, "mode error", ic_compile(c, g, &o, &cc), IC_EINVAL, want);
    o = options(1);
    if (w->ok && ic_compile(c, g, &o, &cc))
        fail(w, "compiling %s: %s", name, ic_last_error(c));
    static const float xs[64 * 129];
    float ys[3];
    ic_tensor arg, out;
    ic_tensor_init(&arg, IC_F32, 2, (int64_t[]){ 64, 129 }, (void *)xs);
    ic_tensor_init(&out, IC_F32, 1, (int64_t[]){ 3 }, ys);
    snprintf(want, sizeof want, "graph '%s' node 'y' (output)", name);
    if (cc)
        expect_error(w, "run error", ic_run(cc, 1, &arg, 1, &out), IC_ESHAPE, want);
    ic_compiled_destroy(cc);
    ic_graph_destroy(g);
}

/* Odd threads fail (fail_three_ways) while even threads compile and run: every message must be
 * its thread's own, and a thread that never failed must see none. */
static void *error_work(void *p)
{
    worker *w = p;
    for (int r = 0; r < 4 && w->ok; r++) {
        if (w->id % 2) {
            fail_three_ways(w);
            continue;
        }
        ic_compile_options o = options(1);
        compile_checked(w, w->shared, &o, (unsigned)r);
        if (w->ok && ic_last_error(w->c)[0])
            fail(w, "a thread with no error sees '%s'", ic_last_error(w->c));
    }
    return NULL;
}

Test(threads, errors_are_per_thread)
{
    ic_ctx *c = cache_ctx(NULL);
    ic_graph *shared = reduction_graph(c, "shared");
    cr_assert(shared, "%s", ic_last_error(c));
    worker w[NTHREADS];
    init_workers(w, NTHREADS, c, shared);
    start_all(w, NTHREADS, error_work);
    cr_assert_str_empty(ic_last_error(c), "the main thread never failed: '%s'", ic_last_error(c));
    ic_graph_destroy(shared);
    ic_ctx_destroy(c);
}

/* A job that fails on a compile thread other than the caller's: the caller gets its message.
 * The caller's own job waits until a compile thread has failed, so one always does. */
typedef struct {
    ic_ctx *c;
    pthread_t caller;
    atomic_bool failed;
} jobs_arg;

static ic_status job(void *arg, int j, int thread)
{
    jobs_arg *J = arg;
    if (!pthread_equal(pthread_self(), J->caller)) {
        ic_status s = ic__error(J->c, IC_EINVAL, "job %d failed on a compile thread", j);
        atomic_store(&J->failed, true);
        return s;
    }
    for (int i = 0; i < 1000 && !atomic_load(&J->failed); i++) /* 10 s at most, once */
        usleep(10000);
    atomic_store(&J->failed, true);
    return IC_OK;
}

Test(threads, compile_thread_errors_reach_the_caller)
{
    ic_ctx *c = cache_ctx(NULL);
    ic_switches sw;
    ic_ctx_switches(c, &sw);
    sw.compile_threads = 4;
    cr_assert_eq(ic_ctx_set_switches(c, &sw), IC_OK);
    jobs_arg J = { c, pthread_self(), false };
    int nthreads = 0;
    ic_status s = ic__run_jobs(c, 16, job, &J, &nthreads);
    cr_assert_gt(nthreads, 1, "no compile thread started");
    cr_assert_eq(s, IC_EINVAL);
    cr_assert(strstr(ic_last_error(c), "failed on a compile thread"), "the caller's message: '%s'",
              ic_last_error(c));
    ic_ctx_destroy(c);
}

/* ---- GPUs through the stand-in driver ---- */

/* Each thread opens a device of its own (a device is used by one thread at a time) on the
 * shared context, and compiles (PTX on the compile threads, modules loaded, the shared cache)
 * and runs the three fixed-size graphs, twice: the second compile of each finds its code in
 * the cache the threads share. */
static void *cuda_work(void *p)
{
    worker *w = p;
    ic_cuda *d = NULL;
    if (ic_cuda_open(w->c, 0, &d)) {
        fail(w, "ic_cuda_open: %s", ic_last_error(w->c));
        return NULL;
    }
    for (int r = 0; r < 2 * G_SYMBOLIC && w->ok; r++) {
        int kind = (w->id + r) % G_SYMBOLIC;
        ic_graph *g = make_graph(w->c, kind, "gpu");
        ic_cuda_compiled *cc = NULL;
        ic_tensor args[1], outs[2] = { { 0 } };
        int nouts = g ? ic_graph_num_outputs(g) : 0;
        if (!g || ic_cuda_compile(d, g, NULL, &cc))
            fail(w, "ic_cuda_compile (kind %d): %s", kind, ic_last_error(w->c));
        else if (!make_args(w->c, g, 1, (unsigned)r, args))
            fail(w, "out of memory for arguments");
        else {
            if (ic_cuda_run(cc, 1, args, nouts, outs))
                fail(w, "ic_cuda_run (kind %d): %s", kind, ic_last_error(w->c));
            free_tensors(w->c, args, 1);
            free_tensors(w->c, outs, nouts);
        }
        ic_cuda_compiled_destroy(cc);
        ic_graph_destroy(g);
    }
    ic_cuda_close(d);
    return NULL;
}

Test(threads, cuda_compile_and_run_through_the_stand_in_driver)
{
    char dir[256], so[300], cmd[1024], cache[300];
    snprintf(dir, sizeof dir, "%s", ict_tmpdir());
    snprintf(so, sizeof so, "%s/libcuda-fake.so", dir);
    snprintf(cache, sizeof cache, "%s/cache", dir);
    /* built with the plain compiler: a driver is never instrumented */
    snprintf(cmd, sizeof cmd, "cc -shared -fPIC -O1 -o '%s' '%s/unittests/Tools/fake_libcuda.c'", so, IC_SOURCE_DIR);
    cr_assert_eq(system(cmd), 0, "building the stand-in driver failed: %s", cmd);
    unsetenv("IC_FAKE_CUDA_LOG");
    ic_ctx *c = cache_ctx(cache);
    ic_switches sw;
    ic_ctx_switches(c, &sw);
    sw.cuda_driver = so;
    cr_assert_eq(ic_ctx_set_switches(c, &sw), IC_OK);
    worker w[NTHREADS];
    init_workers(w, NTHREADS, c, NULL);
    start_all(w, NTHREADS, cuda_work);
    ic_ctx_destroy(c);
    ict_rmtree(dir);
}
