/* bench_cpu.c - the CPU compiler's benchmark (issue 3, item 9 and its Targets): compiles each
 * graph of benchmarks/cpu fused and unfused, checks both against the reference executor, times
 * ic_run and compares the bandwidth with a STREAM-like C copy of the same size measured in the
 * same run. Ends with PASS/FAIL per target. benchmarks/cpu/run.sh builds and runs it.
 *
 *     bench_cpu [--quick] [--json] [--only NAME[,NAME..]] [--graphs DIR] [--time-ms MS]
 *               [--iters N] [--list] [--verbose] [--dump STAGE | --dump-unfused STAGE]
 *
 * Exit status: 0 when every graph compiled, ran and matched the reference (targets missed or
 * not, they are performance), 1 on a wrong result or an error, 2 on bad usage. */
#define _GNU_SOURCE
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "ic/ic.h"

/* ---- the cases ---- */

typedef enum {
    CLS_POINTWISE, /* >= 85% of copy */
    CLS_SOFTMAX,   /* >= 85% */
    CLS_LAYER_NORM,/* >= 85% */
    CLS_ROW_SUM,   /* >= 85% */
    CLS_COL_SUM,   /* >= 70% */
    CLS_LATENCY,   /* too small to be bandwidth-bound: reported, no target */
    CLS_COPY,      /* our compiler's own copy: a second reference point */
    CLS_LAYER,     /* the BERT layer: compile time and fused/unfused only */
} bench_class;

static const char *const class_name[] = { "pointwise", "softmax", "layer_norm", "row_sum",
                                          "col_sum", "latency", "copy", "layer" };

typedef struct {
    const char *name;  /* unique, what --only matches */
    const char *file;  /* in the graphs folder */
    const char *binds, *quick_binds; /* "SYM=N[,SYM=N]" */
    bench_class cls;
} bench_case;

static const bench_case cases[] = {
    { "seed_pattern", "seed_pattern.json", "N=16384", "N=1024", CLS_POINTWISE },
    /* x * 1.0 folds to x and the loop to memcpy (streaming stores); x + 0.0 cannot fold
     * (-0.0 + 0.0 is +0.0), so it is the generated pointwise loop's own copy. */
    { "copy_mul1", "copy_mul1.json", "N=67108864", "N=1048576", CLS_COPY },
    { "copy_add0", "copy_add0.json", "N=67108864", "N=1048576", CLS_COPY },
    { "cos_sin_10k", "cos_sin.json", "N=10000", "N=10000", CLS_LATENCY },
    { "cos_sin_2^26", "cos_sin.json", "N=67108864", "N=1048576", CLS_POINTWISE },
    { "softmax", "softmax.json", "M=8192", "M=256", CLS_SOFTMAX },
    { "layer_norm", "layer_norm.json", "M=8192", "M=256", CLS_LAYER_NORM },
    { "sum_last", "sum_last.json", "M=16384", "M=512", CLS_ROW_SUM },
    { "sum_first", "sum_first.json", "M=16384", "M=512", CLS_COL_SUM },
    { "bert_bias_gelu", "bert_bias_gelu.json", "T=4096", "T=256", CLS_POINTWISE },
    { "bert_residual_ln", "bert_residual_ln.json", "T=4096", "T=256", CLS_LAYER_NORM },
    { "bert_attn_softmax", "bert_attn_softmax.json", "B=32", "B=2", CLS_SOFTMAX },
    { "bert_layer", "bert_layer.json", "B=8", "B=1", CLS_LAYER },
};
enum { NCASES = sizeof cases / sizeof *cases };

typedef struct {
    bool config;
    int kernels;
    char names[2048];    /* kernel names, ", "-separated */
    double compile_ms;   /* best wall time of ic_compile (others' load inflates the rest) */
    double compile_med_ms, compile_first_ms;
    double med_ms, min_ms;
    double copy_med_ms, copy_min_ms; /* the copy interleaved with the runs */
    int iters;
    bool ok;             /* compiled, ran and matched */
    char err[512];       /* why not */
} run_result;

typedef struct {
    const bench_case *bc;
    bool ran;
    char shape[128];     /* the binds actually used */
    double bytes;        /* args + outputs per run */
    double copy_gbs;     /* C copy of the same traffic, median of the interleaved copies */
    double copy_best_gbs;/* and at the fastest of them */
    double ref_ms;
    run_result r[3];     /* [0] fused, taking turns with the copy; [1] unfused and [2] fused,
                          * each back to back (the speedup; [2] not run for layers: [0] is) */
    char err[512];       /* load/alloc/reference errors */
} case_result;

typedef struct {
    bool quick, json, verbose;
    const char *graphs;
    char only[256];
    double time_ms;      /* timing budget per configuration */
    int iters;           /* fixed count (0 = from time_ms) */
    int ncompile;        /* fused compiles per case (median reported) */
    int threads;         /* cores (the report's header) */
    const char *dump;    /* --dump STAGE: print that stage of each case instead of timing */
    int dump_fusion;
} bench_opts;

/* ---- time ---- */

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median of v[0..n) (sorts v). */
static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Smallest of v[0..n). */
static double min_of(const double *v, int n)
{
    double m = v[0];
    for (int i = 1; i < n; i++)
        m = v[i] < m ? v[i] : m;
    return m;
}

/* ---- the STREAM-like copy, on the kernels' own OpenMP team ----
 *
 * The copy forks libomp's team through __kmpc_fork_call, as the generated kernels do: the
 * same threads, the same fork/join, and no second pool of threads spinning against the
 * kernels' on a small machine. (bench_cpu links libomp through libic-llvm.) */

typedef struct {
    int32_t reserved_1, flags, reserved_2, reserved_3;
    const char *psource;
} kmp_ident;
typedef void (*kmp_micro)(int32_t *gtid, int32_t *btid, ...);
extern void __kmpc_fork_call(kmp_ident *loc, int32_t argc, kmp_micro fn, ...);
extern int omp_get_thread_num(void);
extern int omp_get_num_threads(void);
static kmp_ident copy_ident = { 0, 2 /* KMP_IDENT_KMPC */, 0, 0, ";bench_cpu;copy;0;0;;" };

typedef struct {
    float *dst;
    const float *src;
    size_t n; /* floats */
} copy_buf;

/* A plain loop, as STREAM's Copy: gcc would otherwise turn it into a memcpy call, whose
 * non-temporal stores measure something else. */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("no-tree-loop-distribute-patterns")))
#endif
static void copy_floats(float *restrict d, const float *restrict s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        d[i] = s[i];
}

/* This thread's share of the copy: 16-float (64-byte) aligned chunks. */
static void copy_share(int32_t *gtid, int32_t *btid, copy_buf *cb)
{
    (void)gtid, (void)btid;
    size_t nt = (size_t)omp_get_num_threads(), id = (size_t)omp_get_thread_num();
    size_t lines = (cb->n + 15) / 16, per = (lines + nt - 1) / nt;
    size_t b = per * id * 16, e = per * (id + 1) * 16;
    if (e > cb->n)
        e = cb->n;
    if (b < e)
        copy_floats(cb->dst + b, cb->src + b, e - b);
}

/* Two buffers of bytes/2 each, every page touched; false when out of memory. */
static bool copy_init(copy_buf *cb, double bytes)
{
    size_t n = (size_t)(bytes / 2 / sizeof(float));
    n = n < 16 ? 16 : (n + 15) / 16 * 16;
    cb->n = n;
    float *src = aligned_alloc(64, n * sizeof(float)), *dst = aligned_alloc(64, n * sizeof(float));
    if (!src || !dst) {
        free(src), free(dst);
        return false;
    }
    for (size_t i = 0; i < n; i++)
        src[i] = (float)(i & 1023), dst[i] = 0;
    cb->src = src, cb->dst = dst;
    return true;
}

static void copy_free(copy_buf *cb)
{
    free(cb->dst), free((void *)cb->src);
    cb->dst = NULL, cb->src = NULL;
}

static double copy_bytes(const copy_buf *cb) { return 2.0 * (double)cb->n * sizeof(float); }

/* One timed copy, ms. */
static double copy_once(copy_buf *cb)
{
    double t0 = now_ms();
    __kmpc_fork_call(&copy_ident, 1, (kmp_micro)copy_share, cb);
    double ms = now_ms() - t0;
    volatile float sink = cb->dst[cb->n - 1]; /* the copy has an observer */
    (void)sink;
    return ms;
}

/* The machine's copy bandwidth alone (the report's header): median and best of reps. */
static void copy_alone(double bytes, int reps, double *med_gbs, double *best_gbs)
{
    copy_buf cb;
    *med_gbs = *best_gbs = NAN;
    if (!copy_init(&cb, bytes))
        return;
    double ms[64];
    reps = reps > 64 ? 64 : reps;
    copy_once(&cb);
    for (int k = 0; k < reps; k++)
        ms[k] = copy_once(&cb);
    double best = min_of(ms, reps);
    *med_gbs = copy_bytes(&cb) / (median(ms, reps) * 1e6);
    *best_gbs = copy_bytes(&cb) / (best * 1e6);
    copy_free(&cb);
}

/* ---- data ---- */

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Deterministic uniform data in [-1, 1) (integers: the input's range, or [0, 8)). Matrix
 * params get PyTorch's default Linear init, U(-1/sqrt(in), 1/sqrt(in)): with U(-1, 1) weights
 * a BERT layer's activations grow to hundreds, and f32 accumulation (which the spec allows)
 * then misses the f64 reference's rtol 1e-4 on elements near zero. */
static void fill(ic_tensor *t, uint64_t seed, const ic_node_info *ni)
{
    int64_t n = ic_tensor_numel(t);
    uint64_t st = seed;
    double scale = ni->op == IC_OP_PARAM && t->rank == 2 && t->shape[1] > 0
                       ? 1.0 / sqrt((double)t->shape[1]) : 1.0;
    if (t->dtype == IC_F32) {
        float *d = t->data, sc = (float)scale;
        for (int64_t i = 0; i < n; i++)
            d[i] = sc * ((float)(splitmix64(&st) >> 40) * 0x1p-23f - 1.0f);
        return;
    }
    int64_t lo = ni->has_range ? ni->range_lo : 0, hi = ni->has_range ? ni->range_hi : 8;
    for (int64_t i = 0; i < n; i++) {
        uint64_t r = splitmix64(&st);
        if (ic_dtype_is_float(t->dtype))
            ic_tensor_set(t, i, scale * ((double)(r >> 11) * 0x1p-52 - 1.0));
        else if (t->dtype == IC_BOOL)
            ic_tensor_set(t, i, (double)(r >> 63));
        else
            ic_tensor_set(t, i, (double)(lo + (int64_t)(r % (uint64_t)(hi - lo))));
    }
}

/* Poisons an output so a kernel that writes nothing cannot pass on the last run's data. */
static void poison(ic_tensor *t)
{
    memset(t->data, 0xff, (size_t)ic_tensor_numel(t) * ic_dtype_size(t->dtype));
}

/* torch.allclose with the spec's tolerances; on a mismatch msg names the worst element. */
static bool allclose(const ic_tensor *got, const ic_tensor *want, const char *name, char *msg,
                     size_t msz)
{
    double rtol, atol, worst_excess = -1;
    ic_dtype_tolerance(want->dtype, &rtol, &atol);
    int64_t n = ic_tensor_numel(want), bad = 0, worst = -1;
    bool f32 = got->dtype == IC_F32 && want->dtype == IC_F32 &&
               ic_tensor_is_contiguous(got) && ic_tensor_is_contiguous(want);
    for (int64_t i = 0; i < n; i++) {
        double a = f32 ? ((const float *)got->data)[i] : ic_tensor_get(got, i);
        double b = f32 ? ((const float *)want->data)[i] : ic_tensor_get(want, i);
        double excess;
        if (isnan(a) || isnan(b))
            excess = isnan(a) && isnan(b) ? 0 : INFINITY;
        else if (isinf(a) || isinf(b))
            excess = a == b ? 0 : INFINITY;
        else
            excess = fabs(a - b) - (atol + rtol * fabs(b));
        if (excess > 0) {
            bad++;
            if (excess > worst_excess)
                worst_excess = excess, worst = i;
        }
    }
    if (!bad)
        return true;
    snprintf(msg, msz, "output '%s': %lld of %lld elements differ (rtol %g atol %g); worst at "
             "flat index %lld: got %.9g, want %.9g", name, (long long)bad, (long long)n, rtol,
             atol, (long long)worst, ic_tensor_get(got, worst), ic_tensor_get(want, worst));
    return false;
}

/* ---- one case ---- */

typedef struct {
    ic_graph *g, *gs;     /* as loaded; specialised */
    int nargs, nouts;
    ic_tensor *args, *outs, *ref;
    const char **out_names;
} case_data;

static void case_data_free(ic_ctx *c, case_data *d)
{
    for (int i = 0; d->args && i < d->nargs; i++)
        if (d->args[i].data)
            ic_tensor_free(c, &d->args[i]);
    for (int i = 0; d->outs && i < d->nouts; i++)
        if (d->outs[i].data)
            ic_tensor_free(c, &d->outs[i]);
    for (int i = 0; d->ref && i < d->nouts; i++)
        if (d->ref[i].data)
            ic_tensor_free(c, &d->ref[i]);
    free(d->args), free(d->outs), free(d->ref), free(d->out_names);
    if (d->gs)
        ic_graph_destroy(d->gs);
    if (d->g)
        ic_graph_destroy(d->g);
    memset(d, 0, sizeof *d);
}

/* Allocates t with node v's (constant) shape. */
static ic_status alloc_like(ic_ctx *c, const ic_graph *g, ic_value v, ic_tensor *t)
{
    ic_node_info ni;
    ic_graph_node(g, v, &ni);
    int64_t sh[IC_MAX_RANK];
    for (int d = 0; d < ni.rank; d++) {
        ic_status s = ic_graph_eval_dim(g, ni.shape[d], NULL, &sh[d]);
        if (s)
            return s;
    }
    ic_tensor_init(t, ni.dtype, ni.rank, sh, NULL);
    return ic_tensor_alloc(c, t);
}

/* Records why a case or configuration has no numbers; returns false for `return CASE_ERR()`. */
__attribute__((format(printf, 3, 4)))
static bool set_err(char *err, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
    return false;
}
#define CASE_ERR(x, ...) set_err((x)->err, sizeof (x)->err, __VA_ARGS__)

enum { MAX_SYMS = 64 };

/* Binds "SYM=N[,SYM=N]" (the table's own strings) into vals[MAX_SYMS]. */
static ic_status bind_all(const ic_graph *g, const char *binds, int64_t *vals)
{
    char buf[128];
    ic_status s = IC_OK;
    if (ic_graph_num_symbols(g) > MAX_SYMS)
        return IC_EINVAL;
    for (int i = 0; i < MAX_SYMS; i++)
        vals[i] = -1;
    snprintf(buf, sizeof buf, "%s", binds);
    for (char *sv = NULL, *t = strtok_r(buf, ",", &sv); t && !s; t = strtok_r(NULL, ",", &sv)) {
        char *eq = strchr(t, '=');
        if (!eq)
            return IC_EINVAL;
        *eq = 0;
        s = ic_graph_bind(g, t, strtoll(eq + 1, NULL, 10), vals);
    }
    return s;
}

/* Loads the graph, specialises it to binds, allocates and fills its arguments, allocates the
 * outputs once (reused by every run) and computes the reference outputs. */
static bool case_prepare(ic_ctx *c, const bench_opts *o, case_result *cr, case_data *d)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", o->graphs, cr->bc->file);
    if (ic_graph_load_json(c, path, &d->g))
        return CASE_ERR(cr, "load: %s", ic_last_error(c));
    int64_t vals[MAX_SYMS];
    snprintf(cr->shape, sizeof cr->shape, "%s", o->quick ? cr->bc->quick_binds : cr->bc->binds);
    if (bind_all(d->g, cr->shape, vals))
        return CASE_ERR(cr, "bind %s: %s", cr->shape, ic_last_error(c));
    if (ic_graph_specialize(d->g, vals, &d->gs))
        return CASE_ERR(cr, "specialize: %s", ic_last_error(c));
    d->nargs = ic_graph_num_args(d->gs);
    d->nouts = ic_graph_num_outputs(d->gs);
    d->args = calloc((size_t)d->nargs + 1, sizeof *d->args);
    d->outs = calloc((size_t)d->nouts + 1, sizeof *d->outs);
    d->ref = calloc((size_t)d->nouts + 1, sizeof *d->ref);
    d->out_names = calloc((size_t)d->nouts + 1, sizeof *d->out_names);
    if (!d->args || !d->outs || !d->ref || !d->out_names)
        return CASE_ERR(cr, "out of memory");
    cr->bytes = 0;
    for (int i = 0; i < d->nargs; i++) {
        ic_node_info ni;
        ic_graph_node(d->gs, ic_graph_arg(d->gs, i), &ni);
        if (alloc_like(c, d->gs, ic_graph_arg(d->gs, i), &d->args[i]))
            return CASE_ERR(cr, "argument '%s': %s", ni.name, ic_last_error(c));
        fill(&d->args[i], 0x1234567ull * (uint64_t)(i + 1), &ni);
        cr->bytes += (double)ic_tensor_numel(&d->args[i]) * ic_dtype_size(ni.dtype);
    }
    for (int i = 0; i < d->nouts; i++) {
        ic_node_info ni;
        ic_graph_node(d->gs, ic_graph_output(d->gs, i), &ni);
        d->out_names[i] = ni.name;
        if (alloc_like(c, d->gs, ic_graph_output(d->gs, i), &d->outs[i]))
            return CASE_ERR(cr, "output '%s': %s", ni.name, ic_last_error(c));
        poison(&d->outs[i]);
        cr->bytes += (double)ic_tensor_numel(&d->outs[i]) * ic_dtype_size(ni.dtype);
    }
    double t0 = now_ms();
    if (ic_ref_run(c, d->gs, NULL, d->nargs, d->args, d->nouts, d->ref))
        return CASE_ERR(cr, "reference: %s", ic_last_error(c));
    cr->ref_ms = now_ms() - t0;
    return true;
}

static bool run_checked(ic_ctx *c, ic_compiled *cc, case_data *d, run_result *r)
{
    for (int i = 0; i < d->nouts; i++)
        poison(&d->outs[i]);
    ic_status s = ic_run(cc, d->nargs, d->args, d->nouts, d->outs);
    if (s)
        return CASE_ERR(r, "run: %s", ic_last_error(c));
    for (int i = 0; i < d->nouts; i++)
        if (!allclose(&d->outs[i], &d->ref[i], d->out_names[i], r->err, sizeof r->err))
            return false;
    return true;
}

/* Compiles (ncompile times, keeping the last), checks one run, then times
 * warmup + iterations. With cb, every run is preceded by a copy of cb, timed too: kernel and
 * copy take turns, a few milliseconds apart, so a change in what the machine's neighbours
 * do moves both (measured apart, seconds apart, the ratio swung by 2x on a shared VM). */
static void bench_config(ic_ctx *c, const bench_opts *o, case_data *d, int fusion, int ncompile,
                         bool slow, copy_buf *cb, run_result *r)
{
    ic_compile_options co;
    ic_compile_options_init(&co);
    co.fusion = fusion;
    r->config = true;
    double cms[16];
    ic_compiled *cc = NULL;
    for (int k = 0; k < ncompile; k++) {
        if (cc)
            ic_compiled_destroy(cc);
        cc = NULL;
        double t0 = now_ms();
        if (ic_compile(c, d->gs, &co, &cc)) {
            CASE_ERR(r, "compile: %s", ic_last_error(c));
            return;
        }
        cms[k] = now_ms() - t0;
    }
    r->compile_first_ms = cms[0];
    r->compile_med_ms = median(cms, ncompile); /* sorts cms */
    r->compile_ms = cms[0];
    r->kernels = ic_compiled_num_kernels(cc);
    size_t len = 0;
    r->names[0] = 0;
    for (int k = 0; k < r->kernels && len + 4 < sizeof r->names; k++) {
        const char *nm = ic_compiled_kernel_name(cc, k);
        len += (size_t)snprintf(r->names + len, sizeof r->names - len, "%s%s", k ? ", " : "",
                                nm ? nm : "?");
    }
    if (len >= sizeof r->names)
        strcpy(r->names + sizeof r->names - 5, "...");
    if (!run_checked(c, cc, d, r)) {
        ic_compiled_destroy(cc);
        return;
    }
    /* One checked run is done; the warmup sizes the iteration count. */
    double t0 = now_ms();
    ic_status s = ic_run(cc, d->nargs, d->args, d->nouts, d->outs);
    double first = now_ms() - t0;
    int warm = first > 300 ? 0 : first > 30 ? 1 : 3;
    for (int k = 0; k < warm && !s; k++)
        s = ic_run(cc, d->nargs, d->args, d->nouts, d->outs);
    int iters = o->iters;
    if (!iters) {
        iters = first > 0 ? (int)(o->time_ms / first) : 1000;
        int lo = slow ? 3 : 5;
        iters = iters < lo ? lo : iters > 2000 ? 2000 : iters;
    }
    if (cb)
        iters = iters / 2 > 5 ? iters / 2 : 5; /* the copies take half the budget */
    double *ms = malloc(sizeof *ms * 2 * (size_t)iters), *cms_ = ms ? ms + iters : NULL;
    for (int k = 0; k < iters && ms && !s; k++) {
        if (cb)
            cms_[k] = copy_once(cb);
        double a = now_ms();
        s = ic_run(cc, d->nargs, d->args, d->nouts, d->outs);
        ms[k] = now_ms() - a;
    }
    if (!ms || s) {
        CASE_ERR(r, "run: %s", ms ? ic_last_error(c) : "out of memory");
    } else {
        r->iters = iters;
        r->min_ms = min_of(ms, iters);
        r->med_ms = median(ms, iters);
        if (cb) {
            r->copy_min_ms = min_of(cms_, iters);
            r->copy_med_ms = median(cms_, iters);
        }
        /* The timed runs wrote the outputs too: they must still be right. */
        r->ok = true;
        for (int i = 0; i < d->nouts && r->ok; i++)
            r->ok = allclose(&d->outs[i], &d->ref[i], d->out_names[i], r->err, sizeof r->err);
    }
    free(ms);
    ic_compiled_destroy(cc);
}

/* --dump: the stage of the specialised graph as ic_compile_dump prints it. */
static void dump_case(ic_ctx *c, const bench_opts *o, case_result *cr)
{
    case_data d = { 0 };
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", o->graphs, cr->bc->file);
    ic_compile_options co;
    ic_compile_options_init(&co);
    co.fusion = o->dump_fusion;
    printf("==== %s (%s, %s) --stage %s, fusion %d ====\n", cr->bc->name, cr->bc->file,
           o->quick ? cr->bc->quick_binds : cr->bc->binds, o->dump, co.fusion);
    fflush(stdout);
    int64_t vals[MAX_SYMS];
    ic_status s = ic_graph_load_json(c, path, &d.g);
    if (!s)
        s = bind_all(d.g, o->quick ? cr->bc->quick_binds : cr->bc->binds, vals);
    if (!s)
        s = ic_compile_dump(c, d.g, &co, vals, o->dump, stdout);
    if (s)
        fprintf(stderr, "bench_cpu: %s: %s\n", cr->bc->name, ic_last_error(c));
    case_data_free(c, &d);
}

static void run_case(ic_ctx *c, const bench_opts *o, case_result *cr)
{
    case_data d = { 0 };
    cr->ran = true;
    fprintf(stderr, "bench_cpu: %-18s %s ...\n", cr->bc->name,
            o->quick ? cr->bc->quick_binds : cr->bc->binds);
    if (!case_prepare(c, o, cr, &d)) {
        case_data_free(c, &d);
        return;
    }
    /* The copy takes turns with the runs (bench_config); a compute-bound layer has no copy to
     * compare with. */
    bool layer = cr->bc->cls == CLS_LAYER;
    copy_buf cb = { 0 };
    cr->copy_gbs = cr->copy_best_gbs = NAN;
    bool have_copy = !layer && copy_init(&cb, cr->bytes);
    bench_config(c, o, &d, 1, o->ncompile, layer, have_copy ? &cb : NULL, &cr->r[0]);
    /* fused/unfused compares each configuration in its steady state, runs back to back, as
     * PyTorch's eager-vs-compiled harness and ic-run do: after a copy, a run also writes back
     * the copy's dirty lines, a fixed cost that shrinks the ratio of a fast kernel to a slow
     * one (the seed pattern: 2.4-3.3x that way, ~4.5x back to back) */
    bench_config(c, o, &d, 0, 1, layer, NULL, &cr->r[1]);
    if (have_copy)
        bench_config(c, o, &d, 1, 1, layer, NULL, &cr->r[2]);
    if (have_copy && cr->r[0].ok) {
        cr->copy_gbs = copy_bytes(&cb) / (cr->r[0].copy_med_ms * 1e6);
        cr->copy_best_gbs = copy_bytes(&cb) / (cr->r[0].copy_min_ms * 1e6);
    }
    if (have_copy)
        copy_free(&cb);
    case_data_free(c, &d);
}

/* ---- reports ---- */

static bool case_ok(const case_result *cr)
{
    return cr->ran && !cr->err[0] && cr->r[0].ok && cr->r[1].ok && (!cr->r[2].config || cr->r[2].ok);
}

static double gbs(const case_result *cr, int i)
{
    return cr->r[i].ok ? cr->bytes / (cr->r[i].med_ms * 1e6) : NAN;
}

static double pct_copy(const case_result *cr)
{
    return 100 * gbs(cr, 0) / cr->copy_gbs;
}

/* The same at the fastest run: closer to what a quiet machine gives when others are busy. */
static double pct_copy_min(const case_result *cr)
{
    return case_ok(cr) ? 100 * cr->bytes / (cr->r[0].min_ms * 1e6) / cr->copy_best_gbs : NAN;
}

static double speedup(const case_result *cr)
{
    const run_result *f = cr->r[2].config ? &cr->r[2] : &cr->r[0];
    return case_ok(cr) ? cr->r[1].med_ms / f->med_ms : NAN;
}

/* Why a case has no numbers (borrowed until the next call). */
static const char *why(const case_result *cr)
{
    static char buf[1200];
    if (cr->err[0])
        return cr->err;
    snprintf(buf, sizeof buf, "%s%s%s%s%s", cr->r[0].ok ? "" : "fused: ",
             cr->r[0].ok ? "" : cr->r[0].err, !cr->r[0].ok && !cr->r[1].ok ? "; " : "",
             cr->r[1].ok ? "" : "unfused: ", cr->r[1].ok ? "" : cr->r[1].err);
    return buf;
}

static void print_table(FILE *f, const case_result *res, int n, double stream, bool quick)
{
    fprintf(f, "\nSTREAM-like copy (C loop, 2 x %d MB, libomp team on all cores): median %.2f GB/s\n\n",
            quick ? 32 : 256, stream);
    fprintf(f, "%-18s %-11s %7s %9s %9s %7s %7s %6s %7s %9s %7s %3s/%-3s %7s\n", "case", "size",
            "MB/run", "fused ms", "min ms", "GB/s", "copy", "%copy", "(min)", "unfus ms", "speedup",
            "kf", "ku", "comp ms");
    for (int i = 0; i < n; i++) {
        const case_result *cr = &res[i];
        if (!cr->ran)
            continue;
        if (!case_ok(cr)) {
            fprintf(f, "%-18s %-11s %8.1f  NO NUMBERS: %s\n", cr->bc->name, cr->shape,
                    cr->bytes / 1e6, why(cr));
            if (cr->r[0].config && cr->r[0].names[0])
                fprintf(f, "%18s fused kernels: %s\n", "", cr->r[0].names);
            continue;
        }
        char bw[64] = "      -       -      -       -"; /* the layer is compute-bound */
        if (cr->bc->cls != CLS_LAYER)
            snprintf(bw, sizeof bw, "%7.2f %7.2f %5.1f%% %6.1f%%", gbs(cr, 0), cr->copy_gbs,
                     pct_copy(cr), pct_copy_min(cr));
        fprintf(f, "%-18s %-11s %7.1f %9.3f %9.3f %s %9.3f %6.2fx %3d/%-3d %7.1f\n",
                cr->bc->name, cr->shape, cr->bytes / 1e6, cr->r[0].med_ms, cr->r[0].min_ms, bw,
                cr->r[1].med_ms, speedup(cr), cr->r[0].kernels, cr->r[1].kernels,
                cr->r[0].compile_ms);
        fprintf(f, "%18s fused kernels: %s\n", "", cr->r[0].names);
    }
}

/* ---- targets ---- */

typedef struct {
    char text[256];
    char name[64];
    double measured, target;
    int pass; /* 1 pass, 0 fail, -1 info */
} target_line;

static const case_result *find(const case_result *res, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (res[i].ran && strcmp(res[i].bc->name, name) == 0)
            return &res[i];
    return NULL;
}

static int targets(const case_result *res, int n, int ncompile, target_line *t)
{
    int k = 0;
    const case_result *seed = find(res, n, "seed_pattern");
    if (seed) {
        bool ok = case_ok(seed);
        t[k] = (target_line){ "", "seed_kernels", ok ? seed->r[0].kernels : NAN, 1,
                              ok && seed->r[0].kernels == 1 };
        if (ok)
            snprintf(t[k].text, sizeof t[k].text, "seed pattern compiles to %d kernel%s "
                     "(target == 1)", seed->r[0].kernels, seed->r[0].kernels == 1 ? "" : "s");
        else
            snprintf(t[k].text, sizeof t[k].text, "seed pattern kernel count: no result (target == 1)");
        k++;
        t[k] = (target_line){ "", "seed_speedup", speedup(seed), 2.7, ok && speedup(seed) >= 2.7 };
        snprintf(t[k].text, sizeof t[k].text, "seed pattern fused/unfused %.2fx (target >= 2.7x)",
                 speedup(seed));
        k++;
    }
    for (int i = 0; i < n; i++) {
        const case_result *cr = &res[i];
        bench_class cl = cr->bc->cls;
        if (!cr->ran || cl > CLS_COL_SUM)
            continue;
        double want = cl == CLS_COL_SUM ? 70 : 85, got = case_ok(cr) ? pct_copy(cr) : NAN;
        t[k] = (target_line){ "", "", got, want, got >= want };
        snprintf(t[k].name, sizeof t[k].name, "%s_pct_copy", cr->bc->name);
        snprintf(t[k].text, sizeof t[k].text, "%s (%s) %.1f%% of copy: %.2f of %.2f GB/s "
                 "(target >= %.0f%%; fastest run %.1f%%)", cr->bc->name, class_name[cl], got,
                 gbs(cr, 0), cr->copy_gbs, want, pct_copy_min(cr));
        k++;
    }
    const char *comp[2][2] = { { "seed_pattern", "50" }, { "bert_layer", "500" } };
    for (int j = 0; j < 2; j++) {
        const case_result *cr = find(res, n, comp[j][0]);
        if (!cr)
            continue;
        bool ok = cr->r[0].ok; /* a compile that gives wrong results has no time to report */
        double got = ok ? cr->r[0].compile_ms : NAN, want = atof(comp[j][1]);
        t[k] = (target_line){ "", "", got, want, ok && got <= want };
        snprintf(t[k].name, sizeof t[k].name, "%s_compile_ms", cr->bc->name);
        snprintf(t[k].text, sizeof t[k].text, "compile %s %.1f ms, best of %d (median %.1f ms) "
                 "(target <= %s ms)", cr->bc->name, got, ncompile, ok ? cr->r[0].compile_med_ms : NAN,
                 comp[j][1]);
        k++;
    }
    const case_result *bert = find(res, n, "bert_layer");
    if (bert) {
        t[k] = (target_line){ "", "bert_layer_speedup", speedup(bert), NAN, -1 };
        snprintf(t[k].text, sizeof t[k].text, "bert_layer run fused %.1f ms vs unfused %.1f ms: "
                 "%.2fx (reported, no target)", case_ok(bert) ? bert->r[0].med_ms : NAN,
                 case_ok(bert) ? bert->r[1].med_ms : NAN, speedup(bert));
        k++;
    }
    int ran = 0, good = 0;
    char bad[160] = "";
    for (int i = 0; i < n; i++) {
        if (!res[i].ran)
            continue;
        ran++;
        if (case_ok(&res[i]))
            good++;
        else if (strlen(bad) + strlen(res[i].bc->name) + 3 < sizeof bad)
            snprintf(bad + strlen(bad), sizeof bad - strlen(bad), "%s%s", bad[0] ? ", " : ": ",
                     res[i].bc->name);
    }
    t[k] = (target_line){ "", "graphs_match_reference", good, ran, good == ran };
    snprintf(t[k].text, sizeof t[k].text, "%d of %d graphs compile, run and match the reference, "
             "fused and unfused%s (target: all)", good, ran, bad);
    k++;
    return k;
}

static void print_targets(FILE *f, const target_line *t, int n, bool quick)
{
    fprintf(f, "\nTargets (issue 3)%s:\n", quick ? " -- QUICK SIZES, ratios not meaningful" : "");
    for (int i = 0; i < n; i++)
        fprintf(f, "  %-4s %s\n", t[i].pass < 0 ? "INFO" : t[i].pass ? "PASS" : "FAIL", t[i].text);
}

/* ---- JSON (by hand: names here are identifiers, numbers may be NaN -> null) ---- */

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(f, "\\u%04x", *s);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}

static void json_num(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.6g", v);
    else
        fputs("null", f);
}

static void json_run(FILE *f, const run_result *r)
{
    fprintf(f, "{\"ok\": %s, \"kernels\": %d, \"kernel_names\": [", r->ok ? "true" : "false",
            r->kernels);
    const char *p = r->names;
    for (int k = 0; *p; k++) { /* split the ", "-joined names back */
        const char *e = strstr(p, ", ");
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char nm[256];
        snprintf(nm, sizeof nm, "%.*s", (int)(len < 255 ? len : 255), p);
        fputs(k ? ", " : "", f);
        json_str(f, nm);
        p += len + (e ? 2 : 0);
    }
    fputs("], \"compile_ms\": ", f);
    json_num(f, r->config ? r->compile_ms : NAN);
    fputs(", \"compile_median_ms\": ", f);
    json_num(f, r->config ? r->compile_med_ms : NAN);
    fputs(", \"compile_first_ms\": ", f);
    json_num(f, r->config ? r->compile_first_ms : NAN);
    fputs(", \"median_ms\": ", f);
    json_num(f, r->ok ? r->med_ms : NAN);
    fputs(", \"min_ms\": ", f);
    json_num(f, r->ok ? r->min_ms : NAN);
    fprintf(f, ", \"iters\": %d, \"error\": ", r->iters);
    json_str(f, r->err);
    fputc('}', f);
}

static void print_json(FILE *f, const bench_opts *o, const char *cpu, double others,
                       double stream, const case_result *res, int n, const target_line *t, int nt)
{
    fprintf(f, "{\n  \"machine\": {\"cpu\": ");
    json_str(f, cpu);
    fprintf(f, ", \"threads\": %d, \"others_cpu_pct\": ", o->threads);
    json_num(f, others);
    fputs("}", f);
    fprintf(f, ",\n  \"quick\": %s,\n  \"stream_copy_gbs\": ", o->quick ? "true" : "false");
    json_num(f, stream);
    fputs(",\n  \"cases\": [\n", f);
    bool first = true;
    for (int i = 0; i < n; i++) {
        const case_result *cr = &res[i];
        if (!cr->ran)
            continue;
        fprintf(f, "%s    {\"name\": ", first ? "" : ",\n");
        first = false;
        json_str(f, cr->bc->name);
        fputs(", \"graph\": ", f);
        json_str(f, cr->bc->file);
        fputs(", \"binds\": ", f);
        json_str(f, cr->shape);
        fprintf(f, ", \"class\": \"%s\", \"ok\": %s, \"bytes\": %.0f, \"copy_gbs\": ",
                class_name[cr->bc->cls], case_ok(cr) ? "true" : "false", cr->bytes);
        json_num(f, cr->copy_gbs);
        fputs(", \"gbs\": ", f);
        json_num(f, gbs(cr, 0));
        fputs(", \"pct_copy\": ", f);
        json_num(f, pct_copy(cr));
        fputs(", \"pct_copy_at_min\": ", f);
        json_num(f, pct_copy_min(cr));
        fputs(", \"pct_stream\": ", f);
        json_num(f, 100 * gbs(cr, 0) / stream);
        fputs(", \"unfused_gbs\": ", f);
        json_num(f, gbs(cr, 1));
        fputs(", \"speedup\": ", f);
        json_num(f, speedup(cr));
        fputs(", \"ref_ms\": ", f);
        json_num(f, cr->ref_ms);
        fputs(",\n     \"fused\": ", f);
        json_run(f, &cr->r[0]);
        fputs(",\n     \"unfused\": ", f);
        json_run(f, &cr->r[1]);
        if (cr->r[2].config) {
            fputs(",\n     \"fused_back_to_back\": ", f);
            json_run(f, &cr->r[2]);
        }
        fputs(", \"error\": ", f);
        json_str(f, cr->err);
        fputc('}', f);
    }
    fputs("\n  ],\n  \"targets\": [\n", f);
    for (int i = 0; i < nt; i++) {
        fputs("    {\"name\": ", f);
        json_str(f, t[i].name);
        fputs(", \"measured\": ", f);
        json_num(f, t[i].measured);
        fputs(", \"target\": ", f);
        json_num(f, t[i].target);
        fprintf(f, ", \"result\": \"%s\", \"text\": ",
                t[i].pass < 0 ? "INFO" : t[i].pass ? "PASS" : "FAIL");
        json_str(f, t[i].text);
        fprintf(f, "}%s\n", i + 1 < nt ? "," : "");
    }
    fputs("  ]\n}\n", f);
}

/* ---- main ---- */

static void cpu_name(char *buf, size_t n)
{
    snprintf(buf, n, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "model name", 10) == 0 && strchr(line, ':')) {
            snprintf(buf, n, "%s", strchr(line, ':') + 2);
            buf[strcspn(buf, "\n")] = 0;
            break;
        }
    if (f)
        fclose(f);
}

/* How busy the machine is apart from us: on a shared 2-core machine other people's builds
 * halve the numbers, so the report says how much CPU time others took during the run (all
 * cores' busy time from /proc/stat less this process's own, over the cores' wall time). */
typedef struct {
    double busy, total; /* seconds, all cores */
    double self;        /* this process, all threads (libomp's spinning ones included) */
} cpu_sample;

static cpu_sample cpu_now(void)
{
    cpu_sample s = { NAN, NAN, NAN };
    unsigned long long v[8] = { 0 };
    FILE *f = fopen("/proc/stat", "r");
    if (f && fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                    &v[4], &v[5], &v[6], &v[7]) == 8) {
        double hz = (double)sysconf(_SC_CLK_TCK);
        s.busy = (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / hz;
        s.total = s.busy + (double)(v[3] + v[4]) / hz;
    }
    if (f)
        fclose(f);
    struct timespec ts;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) == 0)
        s.self = (double)ts.tv_sec + ts.tv_nsec / 1e9;
    return s;
}

/* Percent of the machine's CPU time that other processes used between a and b. */
static double others_pct(cpu_sample a, cpu_sample b)
{
    double others = (b.busy - a.busy) - (b.self - a.self), total = b.total - a.total;
    return total > 0 ? fmax(0, 100 * others / total) : NAN;
}

static void log_cb(void *user, int level, const char *msg)
{
    (void)user;
    fprintf(stderr, "ic[%d]: %s\n", level, msg);
}

static bool selected(const bench_opts *o, const char *name)
{
    if (!o->only[0])
        return true;
    char list[256];
    snprintf(list, sizeof list, "%s", o->only);
    for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save))
        if (strcmp(t, name) == 0)
            return true;
    return false;
}

static int usage(FILE *f, int rc)
{
    fprintf(f,
            "usage: bench_cpu [options]\n\n"
            "Compiles each graph of benchmarks/cpu fused and unfused, checks both against the\n"
            "reference executor, times ic_run and reports GB/s against a STREAM-like copy of\n"
            "the same size measured in the same run, then PASS/FAIL per target of issue 3.\n\n"
            "options:\n"
            "  --quick          small sizes, short timing (a smoke run)\n"
            "  --json           the results as JSON on stdout (progress stays on stderr)\n"
            "  --only A,B       only these cases (see --list)\n"
            "  --graphs DIR     folder of the graphs (default: %s)\n"
            "  --time-ms MS     timing budget per configuration (default 1000; quick 100)\n"
            "  --iters N        fixed iteration count instead of the budget\n"
            "  --list           the cases and their sizes\n"
            "  --dump STAGE     print a stage (graph loops fused llvm llvm-opt asm) of the\n"
            "                   selected cases, fused, instead of timing them\n"
            "  --dump-unfused STAGE  the same for the unfused compile\n"
            "  --verbose        the library's log on stderr\n",
            "the benchmarks/cpu beside this source");
    return rc;
}

static void default_graphs(char *buf, size_t n)
{
    /* CMake compiles with the absolute source path, so __FILE__ locates the graphs. */
    snprintf(buf, n, "%s", __FILE__);
    char *slash = strrchr(buf, '/');
    if (slash)
        snprintf(slash, n - (size_t)(slash - buf), "/cpu");
    else
        snprintf(buf, n, "benchmarks/cpu");
}

static int parse_args(int argc, char **argv, bench_opts *o, char *graphs, size_t gn)
{
    default_graphs(graphs, gn);
    o->graphs = graphs;
    o->time_ms = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has = i + 1 < argc;
        if (!strcmp(a, "--quick"))
            o->quick = true;
        else if (!strcmp(a, "--json"))
            o->json = true;
        else if (!strcmp(a, "--verbose"))
            o->verbose = true;
        else if (!strcmp(a, "--only") && has)
            snprintf(o->only, sizeof o->only, "%s", argv[++i]);
        else if (!strcmp(a, "--graphs") && has)
            o->graphs = argv[++i];
        else if (!strcmp(a, "--time-ms") && has)
            o->time_ms = atof(argv[++i]);
        else if ((!strcmp(a, "--dump") || !strcmp(a, "--dump-unfused")) && has)
            o->dump_fusion = !strcmp(a, "--dump"), o->dump = argv[++i];
        else if (!strcmp(a, "--iters") && has)
            o->iters = atoi(argv[++i]);
        else if (!strcmp(a, "--list")) {
            for (int k = 0; k < NCASES; k++)
                printf("%-18s %-22s %-11s (quick %s) %s\n", cases[k].name, cases[k].file,
                       cases[k].binds, cases[k].quick_binds, class_name[cases[k].cls]);
            return 0;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help"))
            return usage(stdout, 0);
        else {
            fprintf(stderr, "bench_cpu: unknown or incomplete option '%s'\n", a);
            return usage(stderr, 2);
        }
    }
    if (o->iters < 0 || o->time_ms == 0) {
        fprintf(stderr, "bench_cpu: --iters and --time-ms take positive numbers\n");
        return 2;
    }
    if (o->time_ms < 0)
        o->time_ms = o->quick ? 100 : 1000;
    o->ncompile = o->quick ? 1 : 3;
    long np = sysconf(_SC_NPROCESSORS_ONLN);
    o->threads = np > 0 ? (int)np : 1;
    return -1;
}

int main(int argc, char **argv)
{
    bench_opts o = { 0 };
    char graphs[1024], cpu[256];
    int rc = parse_args(argc, argv, &o, graphs, sizeof graphs);
    if (rc >= 0)
        return rc;
    if (o.only[0]) {
        char list[256];
        snprintf(list, sizeof list, "%s", o.only);
        for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            int k = 0;
            while (k < NCASES && strcmp(cases[k].name, t))
                k++;
            if (k == NCASES) {
                fprintf(stderr, "bench_cpu: no case '%s' (see --list)\n", t);
                return 2;
            }
        }
    }
    cpu_name(cpu, sizeof cpu);
    ic_ctx *c;
    ic_ctx_options co;
    ic_ctx_options_init(&co);
    if (o.verbose)
        co.log = log_cb;
    if (ic_ctx_create(&co, &c)) {
        fprintf(stderr, "bench_cpu: cannot create a context\n");
        return 1;
    }
    ic_switches sw;
    ic_ctx_switches(c, &sw);
    if (sw.no_fusion)
        fprintf(stderr, "bench_cpu: warning: IC_NO_FUSION is set; 'fused' may not be fused\n");
    if (o.dump) {
        for (int i = 0; i < NCASES; i++) {
            case_result cr = { .bc = &cases[i] };
            if (selected(&o, cases[i].name))
                dump_case(c, &o, &cr);
        }
        ic_ctx_destroy(c);
        return 0;
    }
    double t_start = now_ms();
    cpu_sample cpu0 = cpu_now();
    double stream, stream_best;
    copy_alone(o.quick ? 64e6 : 512e6, 9, &stream, &stream_best);
    fprintf(stderr, "bench_cpu: %s, %d threads; STREAM-like copy %.2f GB/s (best %.2f)\n", cpu,
            o.threads, stream, stream_best);
    case_result res[NCASES];
    memset(res, 0, sizeof res);
    for (int i = 0; i < NCASES; i++) {
        res[i].bc = &cases[i];
        if (selected(&o, cases[i].name))
            run_case(c, &o, &res[i]);
    }
    double others = others_pct(cpu0, cpu_now());
    target_line t[NCASES + 8];
    int nt = targets(res, NCASES, o.ncompile, t);
    if (o.json) {
        print_json(stdout, &o, cpu, others, stream, res, NCASES, t, nt);
    } else {
        printf("bench_cpu on %s, %d threads%s; other processes took %.0f%% of the CPU time\n",
               cpu, o.threads, o.quick ? " (--quick)" : "", others);
        print_table(stdout, res, NCASES, stream, o.quick);
        printf("\nGB/s: (argument + output bytes) / fused median; copy: a C copy of as many bytes"
               "\n(read + written), median of copies run in turn with the fused runs; %%copy: GB/s / copy,"
               "\n(min) the same for the fastest run and the fastest copy;"
               "\nunfus ms, speedup: unfused median, and it over the fused median, both timed back to back"
               "\n(no copy between runs); kf/ku: kernels fused/unfused; comp ms: best of the fused compiles.\n");
        print_targets(stdout, t, nt, o.quick);
    }
    fflush(stdout);
    fprintf(stderr, "bench_cpu: done in %.1f s\n", (now_ms() - t_start) / 1e3);
    if (others > 5)
        fprintf(stderr, "bench_cpu: warning: other processes took %.0f%% of the CPU time during "
                "the run: the numbers are unreliable\n", others);
    bool all_ok = true;
    for (int i = 0; i < NCASES; i++)
        if (res[i].ran && !case_ok(&res[i]))
            all_ok = false;
    ic_ctx_destroy(c);
    return all_ok ? 0 : 1;
}
