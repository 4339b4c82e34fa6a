/* bench_autotune.c - the CPU autotuner's benchmark (issue 14, section 2 and its Targets): for
 * 20 GEMM shapes (BERT-base, resnet50's convolutions as im2col GEMMs, GraphNet models)
 * compiles a matmul graph three ways -- default, max-autotune (IC_TUNE_MAX) and exhaustive
 * (IC_TUNE_MAX | IC_TUNE_EXHAUSTIVE) -- with the persistent cache off, times the three in
 * interleaved rounds (median) and checks the targets: the tuned time within 5% of the
 * exhaustive search's, and never more than 2% slower than the default. With --graph it
 * compares max-autotune with the default on a JSON graph and reports the cold tuning time.
 *
 *     bench_autotune [--scale S] [--only NAME[,NAME..]] [--no-exhaustive] [--rounds R]
 *     bench_autotune --graph benchmarks/cpu/bert_layer.json --bind B=8 [--budget S]
 *
 * --scale S divides every M above 512 by S, down to 512 at least (default 4, so that a 2-core
 * machine finishes in reasonable time).
 * Exit status: 0 when everything compiled and ran, 1 on an error, 2 on bad usage. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "ic/ic.h"

typedef struct {
    const char *name;
    int64_t batch, M, N, K;
} shape;

static const shape shapes[] = {
    /* BERT-base, 32 x 128 tokens */
    { "bert_qkv", 1, 4096, 768, 768 },
    { "bert_ffn1", 1, 4096, 3072, 768 },
    { "bert_ffn2", 1, 4096, 768, 3072 },
    { "bert_qk", 12, 128, 128, 64 },
    { "bert_pv", 12, 128, 64, 128 },
    /* resnet50 convolutions as im2col GEMMs (M = output pixels, N = out channels, K = kh*kw*cin) */
    { "r50_stem", 1, 12544, 64, 147 },
    { "r50_c2_3x3", 1, 3136, 64, 576 },
    { "r50_c2_1x1", 1, 3136, 64, 64 },
    { "r50_c2_exp", 1, 3136, 256, 64 },
    { "r50_c3_3x3", 1, 784, 128, 1152 },
    { "r50_c3_exp", 1, 784, 512, 128 },
    { "r50_c4_3x3", 1, 196, 256, 2304 },
    { "r50_c4_exp", 1, 196, 1024, 256 },
    { "r50_c5_3x3", 1, 49, 512, 4608 },
    { "r50_c5_exp", 1, 49, 2048, 512 },
    /* GraphNet models */
    { "r50_fc", 1, 64, 1000, 2048 },
    { "gpt_mlp", 1, 1024, 4096, 1024 },
    { "mobilebert", 1, 2048, 512, 512 },
    { "lm_head", 1, 128, 8192, 768 },
    { "square_1k", 1, 1024, 1024, 1024 },
};
enum { NSHAPES = sizeof shapes / sizeof *shapes, NMODES = 3 };
static const int mode_flags[NMODES] = { 0, IC_TUNE_MAX, IC_TUNE_MAX | IC_TUNE_EXHAUSTIVE };

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

static void fill(ic_tensor *t, unsigned seed)
{
    int64_t n = ic_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        double v = (double)(seed >> 8) / (1 << 24) * 2 - 1;
        if (t->dtype == IC_F32)
            ((float *)t->data)[i] = (float)v;
        else
            ic_tensor_set(t, i, ic_dtype_is_float(t->dtype) ? v : t->dtype == IC_BOOL ? (seed >> 20) & 1 : 0);
    }
}

/* Arguments and outputs of a specialised graph. */
typedef struct {
    int nargs, nouts;
    ic_tensor *args, *outs;
} io;

static int make_io(ic_ctx *c, const ic_graph *g, io *x)
{
    x->nargs = ic_graph_num_args(g), x->nouts = ic_graph_num_outputs(g);
    x->args = calloc((size_t)x->nargs + 1, sizeof *x->args);
    x->outs = calloc((size_t)x->nouts + 1, sizeof *x->outs);
    for (int i = 0; i < x->nargs + x->nouts; i++) {
        ic_node_info ni;
        ic_graph_node(g, i < x->nargs ? ic_graph_arg(g, i) : ic_graph_output(g, i - x->nargs), &ni);
        int64_t sh[IC_MAX_RANK];
        for (int d = 0; d < ni.rank; d++)
            if (ic_graph_eval_dim(g, ni.shape[d], NULL, &sh[d]))
                return 1;
        ic_tensor *t = i < x->nargs ? &x->args[i] : &x->outs[i - x->nargs];
        ic_tensor_init(t, ni.dtype, ni.rank, sh, NULL);
        if (ic_tensor_alloc(c, t))
            return 1;
        if (i < x->nargs)
            fill(t, 777u * (unsigned)(i + 1));
    }
    return 0;
}

static void free_io(ic_ctx *c, io *x)
{
    for (int i = 0; i < x->nargs; i++)
        ic_tensor_free(c, &x->args[i]);
    for (int i = 0; i < x->nouts; i++)
        ic_tensor_free(c, &x->outs[i]);
    free(x->args), free(x->outs);
}

typedef struct {
    ic_compiled *cc;
    double compile_ms, med_ms;
    ic_autotune_stats st;
} compiled;

/* cache: the options' (-1: off, so that every mode tunes from scratch). */
static int compile_mode(ic_ctx *c, const ic_graph *g, int flags, double budget, int cache, compiled *r)
{
    ic_compile_options o;
    ic_compile_options_init(&o);
    o.autotune = flags;
    o.autotune_budget_s = budget;
    o.cache = cache;
    double t0 = now_ms();
    if (ic_compile(c, g, &o, &r->cc)) {
        fprintf(stderr, "compile (%s): %s\n", flags ? "tuned" : "default", ic_last_error(c));
        return 1;
    }
    r->compile_ms = now_ms() - t0;
    ic_compiled_autotune_stats(r->cc, &r->st);
    return 0;
}

/* Median run time of each compiled graph, in interleaved rounds of `reps` runs. */
static int time_all(compiled *r, int n, io *x, int rounds)
{
    double t0 = now_ms();
    if (ic_run(r[0].cc, x->nargs, x->args, x->nouts, x->outs))
        return 1;
    double one = now_ms() - t0;
    int reps = one > 0 ? (int)fmax(1, fmin(200, ceil(20.0 / one))) : 1;
    double (*s)[64] = calloc((size_t)n, sizeof *s);
    for (int i = 0; i < n; i++) /* warm-up */
        for (int k = 0; k < reps; k++)
            ic_run(r[i].cc, x->nargs, x->args, x->nouts, x->outs);
    for (int rd = 0; rd < rounds && rd < 64; rd++)
        for (int q = 0; q < n; q++) {
            int i = (q + rd) % n;
            double a = now_ms();
            for (int k = 0; k < reps; k++)
                ic_run(r[i].cc, x->nargs, x->args, x->nouts, x->outs);
            s[i][rd] = (now_ms() - a) / reps;
        }
    for (int i = 0; i < n; i++) {
        qsort(s[i], (size_t)rounds, sizeof(double), cmp_double);
        r[i].med_ms = s[i][rounds / 2];
    }
    free(s);
    return 0;
}

/* M divided by scale, but not below 512 (nor above M). */
static int64_t scaled_m(const shape *sh, int scale)
{
    return sh->M <= 512 ? sh->M : sh->M / scale > 512 ? sh->M / scale : 512;
}

static ic_graph *matmul_graph(ic_ctx *c, const shape *sh, int scale)
{
    int64_t M = scaled_m(sh, scale);
    char text[1024], a[64], b[64];
    if (sh->batch > 1) {
        snprintf(a, sizeof a, "%lld, %lld, %lld", (long long)sh->batch, (long long)M, (long long)sh->K);
        snprintf(b, sizeof b, "%lld, %lld, %lld", (long long)sh->batch, (long long)sh->K, (long long)sh->N);
    } else {
        snprintf(a, sizeof a, "%lld, %lld", (long long)M, (long long)sh->K);
        snprintf(b, sizeof b, "%lld, %lld", (long long)sh->K, (long long)sh->N);
    }
    snprintf(text, sizeof text,
             "{\"ic_graph\": 1, \"name\": \"%s\", \"inputs\": [{\"name\": \"a\", \"dtype\": \"f32\", \"shape\": [%s]},"
             " {\"name\": \"b\", \"dtype\": \"f32\", \"shape\": [%s]}], \"nodes\": [{\"name\": \"y\", \"op\": "
             "\"matmul\", \"inputs\": [\"a\", \"b\"]}], \"outputs\": [\"y\"]}",
             sh->name, a, b);
    ic_graph *g = NULL;
    if (ic_graph_load_json_string(c, text, NULL, &g))
        fprintf(stderr, "%s: %s\n", sh->name, ic_last_error(c));
    return g;
}

static bool selected(const char *only, const char *name)
{
    if (!only)
        return true;
    size_t n = strlen(name);
    for (const char *p = only; (p = strstr(p, name)); p += n)
        if ((p == only || p[-1] == ',') && (p[n] == 0 || p[n] == ','))
            return true;
    return false;
}

static int run_gemms(ic_ctx *c, int scale, const char *only, bool exhaustive, int rounds, double budget)
{
    int nmodes = exhaustive ? 3 : 2, n = 0, ok5 = 0, ok2 = 0, err = 0;
    printf("%-12s %24s | %9s %9s %9s | %8s %8s | %7s %7s | %5s %5s\n", "shape", "B x M x N x K", "default",
           "max", "exhaust", "max/exh", "max/def", "tune s", "exh s", "cands", "ex.c");
    for (int i = 0; i < NSHAPES; i++) {
        const shape *sh = &shapes[i];
        if (!selected(only, sh->name))
            continue;
        ic_graph *g = matmul_graph(c, sh, scale);
        compiled r[NMODES] = { 0 };
        io x = { 0 };
        bool bad = !g || make_io(c, g, &x);
        for (int m = 0; m < nmodes && !bad; m++)
            bad = compile_mode(c, g, mode_flags[m], budget, -1, &r[m]) != 0;
        bad = bad || time_all(r, nmodes, &x, rounds);
        if (bad) {
            err = 1;
            printf("%-12s error\n", sh->name);
        } else {
            char dims[64];
            snprintf(dims, sizeof dims, "%lld x %lld x %lld x %lld", (long long)sh->batch,
                     (long long)scaled_m(sh, scale), (long long)sh->N,
                     (long long)sh->K);
            double vs_exh = exhaustive ? r[1].med_ms / r[2].med_ms : NAN, vs_def = r[1].med_ms / r[0].med_ms;
            n++;
            ok5 += !exhaustive || vs_exh <= 1.05;
            ok2 += vs_def <= 1.02;
            printf("%-12s %24s | %9.3f %9.3f %9.3f | %8.3f %8.3f | %7.1f %7.1f | %5d %5d\n", sh->name, dims,
                   r[0].med_ms, r[1].med_ms, exhaustive ? r[2].med_ms : NAN, vs_exh, vs_def,
                   r[1].compile_ms / 1e3, exhaustive ? r[2].compile_ms / 1e3 : NAN, r[1].st.candidates,
                   exhaustive ? r[2].st.candidates : 0);
            fflush(stdout);
        }
        for (int m = 0; m < nmodes; m++)
            ic_compiled_destroy(r[m].cc);
        free_io(c, &x);
        ic_graph_destroy(g);
    }
    printf("\nshapes %d: max-autotune within 5%% of exhaustive: %d/%d%s; not more than 2%% slower than default: "
           "%d/%d\n", n, ok5, n, exhaustive ? "" : " (not measured: --no-exhaustive)", ok2, n);
    printf("(times: ms per run, median of %d interleaved rounds; tune s / exh s: compile wall time with tuning)\n",
           rounds);
    return err;
}

static int bind_all(const ic_graph *g, const char *binds, int64_t *vals)
{
    char buf[256];
    for (int i = 0; i < 64; i++)
        vals[i] = -1;
    snprintf(buf, sizeof buf, "%s", binds ? binds : "");
    for (char *sv = NULL, *t = strtok_r(buf, ",", &sv); t; t = strtok_r(NULL, ",", &sv)) {
        char *eq = strchr(t, '=');
        if (!eq)
            return 1;
        *eq = 0;
        if (ic_graph_bind(g, t, strtoll(eq + 1, NULL, 10), vals))
            return 1;
    }
    return 0;
}

static int run_graph(ic_ctx *c, const char *path, const char *binds, int rounds, double budget)
{
    ic_graph *g0 = NULL, *g = NULL;
    int64_t vals[64];
    if (ic_graph_load_json(c, path, &g0) || ic_graph_num_symbols(g0) > 64 || bind_all(g0, binds, vals) ||
        ic_graph_specialize(g0, vals, &g)) {
        fprintf(stderr, "%s: %s\n", path, ic_last_error(c));
        return 1;
    }
    /* max-autotune cold (records written to IC_CACHE_DIR: give it an empty folder), then warm */
    compiled r[3] = { 0 };
    io x = { 0 };
    int err = make_io(c, g, &x) || compile_mode(c, g, 0, budget, -1, &r[0]) ||
              compile_mode(c, g, IC_TUNE_MAX, budget, 1, &r[1]) || compile_mode(c, g, IC_TUNE_MAX, budget, 1, &r[2]) ||
              time_all(r, 2, &x, rounds);
    if (!err) {
        const ic_autotune_stats *s = &r[1].st;
        printf("%s %s: default %.3f ms, max-autotune %.3f ms: speed-up %.3fx\n", path, binds ? binds : "",
               r[0].med_ms, r[1].med_ms, r[0].med_ms / r[1].med_ms);
        printf("  compile: default %.1f s, max-autotune (cold) %.1f s; tuned %d of %d kernels, %d candidates, "
               "%d replaced, benchmarking %.1f s, compiling candidates %.1f s\n",
               r[0].compile_ms / 1e3, r[1].compile_ms / 1e3, s->tuned, s->kernels, s->candidates, s->replaced,
               s->bench_s, s->compile_s);
        printf("  warm (records in the cache): %.1f ms, %d record hits, %d candidates (default compile %.1f ms)\n",
               r[2].compile_ms, r[2].st.record_hits, r[2].st.candidates, r[0].compile_ms);
    }
    for (int i = 0; i < 3; i++)
        ic_compiled_destroy(r[i].cc);
    free_io(c, &x);
    ic_graph_destroy(g);
    ic_graph_destroy(g0);
    return err;
}

int main(int argc, char **argv)
{
    int scale = 4, rounds = 9;
    const char *only = NULL, *graph = NULL, *binds = NULL;
    bool exhaustive = true;
    double budget = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--scale") && v)
            scale = atoi(v), i++;
        else if (!strcmp(a, "--only") && v)
            only = v, i++;
        else if (!strcmp(a, "--rounds") && v)
            rounds = atoi(v), i++;
        else if (!strcmp(a, "--graph") && v)
            graph = v, i++;
        else if (!strcmp(a, "--bind") && v)
            binds = v, i++;
        else if (!strcmp(a, "--budget") && v)
            budget = atof(v), i++;
        else if (!strcmp(a, "--no-exhaustive"))
            exhaustive = false;
        else {
            fprintf(stderr, "usage: %s [--scale S] [--only NAMES] [--no-exhaustive] [--rounds R] [--budget S]\n"
                            "       %s --graph FILE.json [--bind SYM=N[,SYM=N]] [--rounds R] [--budget S]\n",
                    argv[0], argv[0]);
            return 2;
        }
    }
    if (scale < 1 || rounds < 1 || rounds > 64) {
        fprintf(stderr, "--scale >= 1, --rounds 1..64\n");
        return 2;
    }
    ic_ctx *c;
    if (ic_ctx_create(NULL, &c))
        return 1;
    int err = graph ? run_graph(c, graph, binds, rounds, budget) : run_gemms(c, scale, only, exhaustive, rounds, budget);
    ic_ctx_destroy(c);
    return err;
}
