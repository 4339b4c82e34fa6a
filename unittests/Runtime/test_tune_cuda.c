/* test_tune_cuda.c - the GPU autotuner without a GPU (lib/Runtime/tune_cuda.c):
 *   1. the search spaces: the heuristic's choice first, every candidate valid and distinct
 *      (ic_ptx_params_resolve), the pruned space inside the full one, and for small shapes
 *      every candidate of each kind (GEMM on wgmma, mma.sync and FFMA, pointwise, row and
 *      column reductions, attention) computing the default's results in the emulator;
 *   2. the selection with an injected timer: the margin, early stop, the budget, numerics
 *      rejection, failing candidates;
 *   3. params as text, record keys (equal kernels of other buffers share one) and the record
 *      round trip through the persistent cache;
 *   4. end to end through ic_cuda_compile on the stand-in driver (unittests/Tools/
 *      fake_libcuda.c, whose kernels do nothing): candidates timed, the record written, a
 *      second compile answered by it with no benchmarking. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "testutil.h"
#include "ic/fuse.h"
#include "ic/lower.h"
#include "ic/ptx.h"
#include "tune_cuda-impl.h"
#include "tune-impl.h"
#include "cache-impl.h"
#include "../Lower/lower-impl.h"

static ic_graph *graph_json(ic_ctx *c, const char *text)
{
    char *buf = strdup(text);
    cr_assert(buf);
    for (char *p = buf; *p; p++)
        if (*p == '\'')
            *p = '"';
    ic_graph *g = NULL;
    cr_assert_eq(ic_graph_load_json_string(c, buf, ".", &g), IC_OK, "graph %s: %s", buf, ic_last_error(c));
    free(buf);
    return g;
}

#define IN(n, t, s) "{'name':'" n "','dtype':'" t "','shape':" s "}"
#define GRAPH(ins, nodes) "{'ic_graph':1,'name':'t','inputs':[" ins "],'nodes':[" nodes "],'outputs':['y']}"

/* The GPU compile's fused program of g (the attention rewrite first, as the pipeline does). */
static ic_program *gpu_program(ic_ctx *c, const ic_graph *g, ic_graph **rewritten)
{
    cr_assert_eq(ic__graph_fuse_attention(c, g, rewritten), IC_OK, "%s", ic_last_error(c));
    ic_program *p = NULL, *f = NULL;
    cr_assert_eq(ic_lower_prefixed(c, *rewritten ? *rewritten : g, "gpu_", &p), IC_OK, "%s", ic_last_error(c));
    ic_fuse_options fo;
    ic_fuse_options_init(&fo);
    fo.prefix = "gpu_";
    fo.stash_norm_rows = false;
    cr_assert_eq(ic_fuse(c, p, &fo, &f), IC_OK, "%s", ic_last_error(c));
    ic_program_destroy(p);
    return f;
}

typedef struct {
    ic_kernel *ks;
    ic_buffer *bufs;
    int nk, nb;
} arrays;

static arrays arrays_of(const ic_program *p)
{
    arrays a = { NULL, NULL, ic_program_num_kernels(p), ic_program_num_buffers(p) };
    a.ks = calloc((size_t)a.nk + 1, sizeof *a.ks);
    a.bufs = calloc((size_t)a.nb + 1, sizeof *a.bufs);
    cr_assert(a.ks && a.bufs);
    for (int i = 0; i < a.nk; i++)
        a.ks[i] = *ic_program_kernel(p, i);
    for (int b = 0; b < a.nb; b++)
        a.bufs[b] = *ic_program_buffer(p, b);
    return a;
}

/* ---- 1. the spaces ---- */

/* Checks the space of kernel k: default first, all valid, resolve(in) == res, distinct. */
static void check_space(ic_ctx *c, const char *name, const arrays *a, int k, const ic_ptx_options *o,
                        bool exhaustive, ic__tcand **out, int *nout)
{
    ic__tcand *v;
    int n;
    cr_assert_eq(ic__tune_cuda_space(c, &a->ks[k], a->nb, a->bufs, o, NULL, exhaustive, &v, &n), IC_OK, "%s: %s",
                 name, ic_last_error(c));
    cr_assert_gt(n, 1, "%s kernel %d: a space of %d candidates", name, k, n);
    static const ic_ptx_params zero;
    cr_assert(!memcmp(&v[0].in, &zero, sizeof zero), "%s: candidate 0 is not the heuristic's", name);
    for (int j = 0; j < n; j++) {
        ic_ptx_params r;
        cr_assert_eq(ic_ptx_params_resolve(c, &a->ks[k], a->nb, a->bufs, o, &v[j].in, &r), IC_OK,
                     "%s candidate %d invalid: %s", name, j, ic_last_error(c));
        cr_assert(!memcmp(&r, &v[j].res, sizeof r), "%s candidate %d: res is not what it resolves to", name, j);
        for (int i = 0; i < j; i++)
            cr_assert(memcmp(&v[i].res, &v[j].res, sizeof r), "%s: candidates %d and %d are one plan", name, i, j);
    }
    *out = v;
    *nout = n;
}

/* Output 0 of p emulated with params prm (NULL: heuristic) into got (allocated here). */
static void emulate(ic_ctx *c, const ic_program *p, const ic_ptx_options *o, const ic_ptx_params *prm,
                    const ic_tensor *args, int nargs, ic_tensor *got)
{
    const ic_graph *g = ic_program_graph(p);
    ic_node_info ni;
    ic_graph_node(g, ic_graph_output(g, 0), &ni);
    int64_t sh[IC_MAX_RANK];
    for (int d = 0; d < ni.rank; d++)
        sh[d] = ni.shape[d].coef;
    ic_tensor_init(got, ni.dtype, ni.rank, sh, NULL);
    cr_assert_eq(ic_tensor_alloc(c, got), IC_OK);
    cr_assert_eq(ic_ptx_emulate_opts(c, p, o, prm, args, nargs, got, 1), IC_OK, "%s", ic_last_error(c));
}

static void make_args(ic_ctx *c, const ic_graph *g, ic_tensor *args, int *nargs)
{
    *nargs = ic_graph_num_args(g);
    uint64_t seed = 7;
    for (int i = 0; i < *nargs; i++) {
        ic_node_info ni;
        ic_graph_node(g, ic_graph_arg(g, i), &ni);
        int64_t sh[IC_MAX_RANK];
        for (int d = 0; d < ni.rank; d++)
            sh[d] = ni.shape[d].coef;
        ic_tensor_init(&args[i], ni.dtype, ni.rank, sh, NULL);
        cr_assert_eq(ic_tensor_alloc(c, &args[i]), IC_OK);
        for (int64_t e = 0; e < ic_tensor_numel(&args[i]); e++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            ic_tensor_set(&args[i], e, (double)(seed >> 40) / (double)(1 << 24) - 0.5);
        }
    }
}

/* Every candidate of every kernel of the graph against the default, in the emulator; the
 * kinds seen are or-ed into *kinds. Returns the candidates emulated. */
static int check_graph(const char *name, const char *json, const ic_ptx_options *o, int *kinds)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = graph_json(c, json), *rw = NULL;
    ic_program *p = gpu_program(c, g, &rw);
    arrays a = arrays_of(p);
    ic_tensor args[4], want, got;
    int nargs = 0, total = 0;
    make_args(c, g, args, &nargs);
    memset(&want, 0, sizeof want);
    emulate(c, p, o, NULL, args, nargs, &want);
    ic_ptx_params *prm = calloc((size_t)a.nk, sizeof *prm);
    for (int k = 0; k < a.nk; k++) {
        ic_ptx_params r;
        cr_assert_eq(ic_ptx_params_resolve(c, &a.ks[k], a.nb, a.bufs, o, NULL, &r), IC_OK, "%s", ic_last_error(c));
        *kinds |= ic__tune_cuda_kind(&r, false);
        ic__tcand *v;
        int n;
        check_space(c, name, &a, k, o, false, &v, &n);
        for (int j = 1; j < n; j++) {
            memset(prm, 0, sizeof *prm * (size_t)a.nk);
            prm[k] = v[j].in;
            memset(&got, 0, sizeof got);
            emulate(c, p, o, prm, args, nargs, &got);
            char label[64];
            ic__ptx_params_label(&v[j].res, label, sizeof label);
            cr_assert(ic__tune_close(want.dtype, ic_tensor_numel(&want), want.data, got.data),
                      "%s kernel %d candidate %d (%s) differs from the default", name, k, j, label);
            ic_tensor_free(c, &got);
            total++;
        }
        ic__free(c, v);
    }
    free(prm);
    for (int i = 0; i < nargs; i++)
        ic_tensor_free(c, &args[i]);
    ic_tensor_free(c, &want);
    free(a.ks);
    free(a.bufs);
    ic_program_destroy(p);
    ic_graph_destroy(rw);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
    return total;
}

Test(tune_space, gemm_candidates_match_the_default_in_the_emulator)
{
    ic_ptx_options o = { .sm = 90 };
    int kinds = 0;
    /* bf16 on wgmma by default (sm_90), mma.sync candidates too; f32 on FFMA */
    int n = check_graph("bf16 linear+relu", GRAPH(IN("a", "bf16", "[64,96]") "," IN("b", "bf16", "[96,128]"),
                        "{'name':'h','op':'matmul','inputs':['a','b']},{'name':'y','op':'relu','inputs':['h']}"), &o, &kinds);
    n += check_graph("f32 matmul", GRAPH(IN("a", "f32", "[40,72]") "," IN("b", "f32", "[72,48]"),
                     "{'name':'y','op':'matmul','inputs':['a','b']}"), &o, &kinds);
    cr_assert_eq(kinds, IC_TUNE_GEMM);
    cr_assert_gt(n, 20, "only %d GEMM candidates", n);
}

/* An implicit-GEMM conv (the wgmma path gathers im2col(x) itself; other candidates launch the
 * copy): every candidate of the GEMM and of the copy against the default. */
Test(tune_space, conv_candidates_match_the_default_in_the_emulator)
{
    ic_ptx_options o = { .sm = 90 };
    int kinds = 0;
    int n = check_graph("iconv bf16 3x3", GRAPH(IN("x", "bf16", "[2,16,9,11]") "," IN("w", "bf16", "[64,16,3,3]"),
                        "{'name':'y','op':'conv','inputs':['x','w'],'attrs':{'stride':[1,1],'padding':[1,1]}}"), &o, &kinds);
    cr_assert(kinds & IC_TUNE_GEMM, "no GEMM kernel (kinds %d)", kinds);
    cr_assert_gt(n, 10);
}

Test(tune_space, pointwise_and_reductions_match_the_default_in_the_emulator)
{
    ic_ptx_options o = { .sm = 90 };
    int kinds = 0;
    check_graph("pointwise bf16", GRAPH(IN("x", "bf16", "[37,129]"),
                "{'name':'t','op':'mul','inputs':['x',2.0]},{'name':'y','op':'gelu','inputs':['t']}"), &o, &kinds);
    check_graph("softmax rows", GRAPH(IN("x", "f32", "[9,300]"),
                "{'name':'y','op':'softmax','inputs':['x'],'attrs':{'dim':-1}}"), &o, &kinds);
    check_graph("column sum", GRAPH(IN("x", "f32", "[300,40]"),
                "{'name':'y','op':'sum','inputs':['x'],'attrs':{'dims':[0]}}"), &o, &kinds);
    cr_assert_eq(kinds, IC_TUNE_POINTWISE | IC_TUNE_REDUCTION);
}

Test(tune_space, attention_tiles_match_the_default_in_the_emulator)
{
    ic_ptx_options o = { .sm = 90 };
    int kinds = 0;
    check_graph("sdpa bf16", GRAPH(IN("q", "bf16", "[1,2,70,32]") "," IN("k", "bf16", "[1,2,50,32]") "," IN("v", "bf16", "[1,2,50,32]"),
                "{'name':'y','op':'scaled_dot_product_attention','inputs':['q','k','v']}"), &o, &kinds);
    cr_assert(kinds & IC_TUNE_ATTENTION, "no attention kernel (kinds %d)", kinds);
}

/* The full space holds the pruned one, is larger, and names the heuristic's choice first. */
Test(tune_space, exhaustive_holds_the_pruned_space)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = graph_json(c, GRAPH(IN("a", "bf16", "[4096,768]") "," IN("b", "bf16", "[768,3072]"),
                                       "{'name':'y','op':'matmul','inputs':['a','b']}")), *rw = NULL;
    ic_program *p = gpu_program(c, g, &rw);
    arrays a = arrays_of(p);
    ic_ptx_options o = { .sm = 90 };
    ic__tcand *pr, *ex;
    int np, ne;
    check_space(c, "pruned", &a, 0, &o, false, &pr, &np);
    check_space(c, "full", &a, 0, &o, true, &ex, &ne);
    cr_assert_gt(ne, np);
    cr_assert(!memcmp(&pr[0], &ex[0], sizeof pr[0]));
    cr_assert_eq(pr[0].res.wgmma, 1, "BERT's FFN GEMM is not on wgmma by default");
    for (int i = 0; i < np; i++) {
        bool found = false;
        for (int j = 0; j < ne && !found; j++)
            found = !memcmp(&pr[i].res, &ex[j].res, sizeof pr[i].res);
        cr_assert(found, "pruned candidate %d is not in the full space", i);
    }
    /* neighbours: one field away from the winner, none already seen */
    ic__tcand *nb;
    int nn;
    cr_assert_eq(ic__tune_cuda_neighbours(c, &a.ks[0], a.nb, a.bufs, &o, &pr[0].res, pr, np, &nb, &nn), IC_OK);
    for (int j = 0; j < nn; j++) {
        int diff = 0;
        for (size_t f = 0; f < sizeof(ic_ptx_params) / sizeof(int); f++)
            diff += ((int *)&nb[j].in)[f] != ((int *)&pr[0].res)[f];
        cr_assert_eq(diff, 1, "neighbour %d moves %d fields", j, diff);
        for (int i = 0; i < np; i++)
            cr_assert(memcmp(&nb[j].res, &pr[i].res, sizeof nb[j].res), "neighbour %d was seen", j);
    }
    ic__free(c, nb);
    /* no wgmma candidates where wgmma cannot run (sm_80, or wgmma off) */
    ic_ptx_options o80 = { .sm = 80 }, off = { .sm = 90, .wgmma = -1 };
    const ic_ptx_options *others[] = { &o80, &off };
    for (int i = 0; i < 2; i++) {
        ic__tcand *v;
        int n;
        check_space(c, "no wgmma", &a, 0, others[i], false, &v, &n);
        for (int j = 0; j < n; j++)
            cr_assert_leq(v[j].res.wgmma, 0, "option set %d: candidate %d on wgmma", i, j);
        ic__free(c, v);
    }
    ic__free(c, pr);
    ic__free(c, ex);
    free(a.ks);
    free(a.bufs);
    ic_program_destroy(p);
    ic_graph_destroy(rw);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* ---- 2. selection: the shared race (tune.c) as the GPU drives it, with an injected timer ---- */

typedef struct {
    double ms[8];       /* each candidate's time; < 0: the timer fails */
    bool bad[8];        /* its numerics check fails */
    int calls[8], checks[8];
    unsigned sleep_us;  /* real time each timing takes (the budget) */
} fake;

/* As run_cand in tune_cuda.c: K->reps is 1, one call is one timed group, ms per launch. */
static double fake_run(void *u, int j, int reps)
{
    fake *f = u;
    f->calls[j]++;
    if (f->sleep_us)
        usleep(f->sleep_us);
    if (f->ms[j] < 0)
        return -1;
    return reps * f->ms[j] * (1 + 0.001 * (f->calls[j] % 3)); /* noise below the margin */
}

typedef struct {
    double ms[8];       /* each candidate's time at the default's speed; -1: not in the running */
    int samples[8], state[8];
    int winner;
} picked;

/* Races candidates 0..n-1 (0: the default) as tune_cuda.c does: the winner, confirmed by a race
 * of its own, its outputs checked (fake bad: rejected, the next best tried). */
static picked pick(fake *f, int n, double budget_s, char **table)
{
    ic_ctx *c = ict_ctx();
    ic__tune_graph G;
    ic__tune_graph_init(&G, c, IC_TUNE_MAX, budget_s, NULL, 1, 1);
    ic__tune K;
    ic__tune_begin(&K, &G, "gpu_k", "(gemm)", 1, fake_run, f);
    K.reps = 1;
    int ids[8];
    for (int j = 0; j < n; j++) {
        char d[16];
        snprintf(d, sizeof d, "cand%d", j);
        cr_assert_eq(ic__tune_add(&K, d), j);
        ids[j] = j;
    }
    ic__tune_race(&K, n, ids);
    picked p = { .winner = 0 };
    for (int tries = 0; tries < 8; tries++) {
        int w = ic__tune_winner(&K);
        if (w && !ic__tune_confirm(&K, w))
            continue;
        if (w && (f->checks[w]++, f->bad[w])) {
            ic__tune_reject(&K, w);
            continue;
        }
        p.winner = w;
        break;
    }
    for (int j = 0; j < n; j++) {
        p.state[j] = K.cand[j].state;
        p.samples[j] = K.cand[j].nsamples;
        p.ms[j] = K.cand[j].state == IC__TC_TIMED ? K.cand[j].ms : -1;
    }
    size_t len = 0;
    FILE *t = table ? open_memstream(table, &len) : NULL;
    if (t) {
        ic__tune_print_table(t, &K, p.winner);
        fclose(t);
    }
    ic__tune_end(&K, p.winner);
    ic__tune_graph_end(&G);
    ic_ctx_destroy(c);
    return p;
}

Test(tune_select, margin)
{
    fake f = { .ms = { 1.0, 0.98, 1.2 } };
    cr_assert_eq(pick(&f, 3, 0, NULL).winner, 0, "2%% faster replaced the default");
    cr_assert_eq(f.checks[1], 0, "a candidate within the margin was checked");
    fake g = { .ms = { 1.0, 0.95, 0.90 } };
    picked p = pick(&g, 3, 0, NULL);
    cr_assert_eq(p.winner, 2);
    cr_assert_eq(p.samples[1], IC__TUNE_ROUNDS, "interleaved rounds: every live candidate timed each round");
    cr_assert_eq(p.samples[2], 2 * IC__TUNE_ROUNDS, "the winner raced the default again");
    cr_assert_eq(p.samples[0], 2 * IC__TUNE_ROUNDS);
    cr_assert_float_eq(p.ms[2], 0.90, 0.90 * 0.005, "the median of the rounds: %g", p.ms[2]);
}

Test(tune_select, early_stop_at_3x_the_best)
{
    fake f = { .ms = { 1.0, 1.6, 1.45, 0.5 } };
    picked p = pick(&f, 4, 0, NULL);
    cr_assert_eq(p.winner, 3);
    cr_assert_eq(p.samples[1], 1, "3.2x the best was timed %d times", p.samples[1]);
    cr_assert_eq(p.state[1], IC__TC_STOPPED);
    cr_assert_eq(p.samples[2], IC__TUNE_ROUNDS, "2.9x the best is not past 3x");
    cr_assert_geq(p.samples[0], IC__TUNE_ROUNDS, "the default is never stopped early");
}

Test(tune_select, budget)
{
    /* 4 candidates, 2 ms a timing, a budget of 1 ms: only the first round of each race runs,
     * which always ends (the default needs a time); the winner's confirmation race too */
    fake f = { .ms = { 1.0, 0.9, 0.8, 0.7 }, .sleep_us = 2000 };
    picked p = pick(&f, 4, 0.001, NULL);
    cr_assert_eq(p.winner, 3);
    cr_assert_eq(p.samples[1], 1, "rounds after the deadline ran (%d)", p.samples[1]);
    cr_assert_eq(p.samples[0], 2, "the race and the confirmation: one round each (%d)", p.samples[0]);
    cr_assert_eq(p.samples[3], 2);
}

Test(tune_select, numerics_rejection)
{
    fake f = { .ms = { 1.0, 0.5, 0.6, 0.99 }, .bad = { false, true, false, false } };
    picked p = pick(&f, 4, 0, NULL);
    cr_assert_eq(p.winner, 2, "the fastest candidate whose outputs match");
    cr_assert(p.state[1] == IC__TC_REJECTED && p.state[2] == IC__TC_TIMED && p.state[3] == IC__TC_TIMED);
    cr_assert_eq(f.checks[1], 1);
    fake g = { .ms = { 1.0, 0.5, 0.6 }, .bad = { false, true, true } };
    cr_assert_eq(pick(&g, 3, 0, NULL).winner, 0, "all faster ones wrong: the default stays");
}

Test(tune_select, failing_candidates)
{
    fake f = { .ms = { 1.0, -1, 0.5 } };
    picked p = pick(&f, 3, 0, NULL);
    cr_assert_eq(p.winner, 2);
    cr_assert_eq(f.calls[1], 1, "a failed candidate was timed again");
    cr_assert_eq(p.state[1], IC__TC_FAILED);
    fake g = { .ms = { -1, 0.5 } };
    p = pick(&g, 2, 0, NULL);
    cr_assert_eq(p.winner, 0, "a default that cannot be timed is never replaced");
    cr_assert_eq(p.samples[0], 0);
}

Test(tune_select, table)
{
    fake f = { .ms = { 2.0, 1.0, -1 } };
    char *text = NULL;
    picked p = pick(&f, 3, 0, &text);
    cr_assert_eq(p.winner, 1);
    cr_assert(text && strstr(text, "AUTOTUNE gpu_k (gemm)"), "%s", text);
    cr_assert(strstr(text, "cand1") < strstr(text, "cand0"), "fastest first: %s", text);
    cr_assert(strstr(text, "100.0%  <- chosen") && strstr(text, "(default)"), "%s", text);
    cr_assert(strstr(text, "cand2") && strstr(text, "(failed)"), "%s", text);
    free(text);
}

/* ---- 3. text, keys, records ---- */

Test(tune_records, params_text_round_trip)
{
    ic_ptx_params p = { IC_PTX_GEMM, 384, 1, 1, 1, -1, 1, 128, 192, 64, 0, 0, 4, 1, 1 }, q;
    char buf[512];
    ic__ptx_params_format(&p, buf, sizeof buf);
    memset(&q, 0, sizeof q);
    cr_assert(ic__ptx_params_parse(buf, &q), "%s", buf);
    cr_assert(!memcmp(&p, &q, sizeof p), "%s", buf);
    cr_assert(!ic__ptx_params_parse("tile_m=64 bogus=3", &q));
    cr_assert(!ic__ptx_params_parse("tile_m=6x4", &q));
    cr_assert(!ic__ptx_params_parse("mode=99", &q));
}

/* Two equal linears over other weights (Q and K projections) share a key; another shape not. */
Test(tune_records, keys_name_the_code_not_the_buffers)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = graph_json(c, "{'ic_graph':1,'name':'t','inputs':[" IN("x", "bf16", "[128,64]") "," IN("wq", "bf16", "[64,64]")
                                 "," IN("wk", "bf16", "[64,64]") "," IN("wv", "bf16", "[64,32]") "],'nodes':["
                                 "{'name':'q','op':'matmul','inputs':['x','wq']},{'name':'k','op':'matmul','inputs':['x','wk']},"
                                 "{'name':'v','op':'matmul','inputs':['x','wv']}],'outputs':['q','k','v']}"), *rw = NULL;
    ic_program *p = gpu_program(c, g, &rw);
    cr_assert_eq(ic_program_num_kernels(p), 3);
    int k0 = 0, k1 = 1, k2 = 2;
    char *a = ic__tune_cuda_key(p, 1, &k0, "dev"), *b = ic__tune_cuda_key(p, 1, &k1, "dev"),
         *d = ic__tune_cuda_key(p, 1, &k2, "dev"), *e = ic__tune_cuda_key(p, 1, &k0, "other");
    cr_assert(a && b && d && e);
    cr_assert_str_eq(a, b);
    cr_assert_str_neq(a, d);
    cr_assert_str_neq(a, e);
    cr_assert(!strstr(a, "wq") && !strstr(a, "matmul_q"), "names left in the key:\n%s", a);
    free(a), free(b), free(d), free(e);
    ic_program_destroy(p);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

Test(tune_records, round_trip_through_the_cache)
{
    const char *dir = ict_tmpdir();
    setenv("IC_CACHE_DIR", dir, 1);
    ic_ctx *c = ict_ctx();
    ic_ptx_params p[2] = { { .mode = IC_PTX_POINTWISE, .block = 512 }, { .tile_m = 64, .wgmma = 1, .stages = 3 } }, q[2];
    cr_assert(!ic__tune_cuda_record_get(c, "k1", 2, q), "a record before any was written");
    ic__tune_cuda_record_put(c, "k1", 2, p);
    char ns[1100];
    snprintf(ns, sizeof ns, "%s/%s", dir, IC__CACHE_GPU_TUNE);
    cr_assert_eq(ict_count_files(ns), 1);
    memset(q, 0, sizeof q);
    cr_assert(ic__tune_cuda_record_get(c, "k1", 2, q));
    cr_assert(!memcmp(p, q, sizeof p));
    cr_assert(!ic__tune_cuda_record_get(c, "k1", 1, q), "a record of 2 kernels read as 1");
    cr_assert(!ic__tune_cuda_record_get(c, "k2", 2, q), "another key hit");
    ic_ctx_destroy(c);
    ict_rmtree(dir);
    unsetenv("IC_CACHE_DIR");
}

/* ---- 4. end to end on the stand-in driver ---- */

static const char *fake_driver(const char *dir)
{
    static char so[1024];
    if (system("command -v cc >/dev/null 2>&1") != 0)
        cr_skip_test("no C compiler to build the stand-in driver");
    snprintf(so, sizeof so, "%s/libcuda-fake.so", dir);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "cc -shared -fPIC -O1 -o '%s' '%s/unittests/Tools/fake_libcuda.c'", so, IC_SOURCE_DIR);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    return so;
}

static void compile_once(ic_ctx *c, ic_cuda *d, const ic_graph *g, int flags, ic_autotune_stats *st)
{
    ic_cuda_options o;
    ic_cuda_options_init(&o);
    o.autotune = flags;
    o.autotune_budget_s = 30;
    ic_cuda_compiled *cc = NULL;
    cr_assert_eq(ic_cuda_compile(d, g, &o, &cc), IC_OK, "%s", ic_last_error(c));
    ic_cuda_compiled_autotune_stats(cc, st);
    ic_cuda_compiled_destroy(cc);
}

Test(tune_device, fake_driver_tunes_then_reads_the_record, .timeout = 600)
{
    const char *dir = ict_tmpdir();
    char cache[1024];
    snprintf(cache, sizeof cache, "%s/cache", dir);
    setenv("IC_CUDA_DRIVER", fake_driver(dir), 1);
    setenv("IC_CACHE_DIR", cache, 1);
    ic__tune_cuda_flush_bytes = 1 << 16;
    ic_ctx *c = ict_ctx();
    ic_cuda *d = NULL;
    cr_assert_eq(ic_cuda_open(c, 0, &d), IC_OK, "%s", ic_last_error(c));
    /* two kernels of one code (the rows of two softmaxes: tuned once) and a pointwise one */
    ic_graph *g = graph_json(c, "{'ic_graph':1,'name':'t','inputs':[" IN("x", "f32", "[64,256]") "," IN("z", "f32", "[64,256]")
                                "," IN("w", "bf16", "[1000]") "],'nodes':[{'name':'a','op':'softmax','inputs':['x'],'attrs':{'dim':-1}},"
                                "{'name':'b','op':'softmax','inputs':['z'],'attrs':{'dim':-1}},"
                                "{'name':'y','op':'gelu','inputs':['w']}],'outputs':['a','b','y']}");
    ic_autotune_stats st;
    compile_once(c, d, g, IC_TUNE_POINTWISE | IC_TUNE_REDUCTION, &st);
    cr_assert_eq(st.kernels, 2, "softmax (twice, one code) and gelu: %d kernels looked at", st.kernels);
    cr_assert_eq(st.tuned, st.kernels, "%d of %d kernels benchmarked", st.tuned, st.kernels);
    cr_assert_eq(st.record_hits, 0);
    cr_assert_gt(st.candidates, st.kernels);
    cr_assert_gt(st.bench_s, 0);
    char ns[1100];
    snprintf(ns, sizeof ns, "%s/%s", cache, IC__CACHE_GPU_TUNE);
    cr_assert_eq(ict_count_files(ns), st.kernels, "one record a kernel tuned");
    ic_autotune_stats again;
    compile_once(c, d, g, IC_TUNE_POINTWISE | IC_TUNE_REDUCTION, &again);
    cr_assert_eq(again.tuned, 0, "the second compile benchmarked");
    cr_assert_eq(again.record_hits, st.kernels);
    cr_assert_eq(again.candidates, 0);
    /* other tune flags: other records */
    compile_once(c, d, g, IC_TUNE_REDUCTION, &again);
    cr_assert_eq(again.record_hits, 0);
    /* nothing selected: the tuner does not run */
    compile_once(c, d, g, IC_TUNE_GEMM, &again);
    cr_assert_eq(again.kernels, 0);
    /* coordinate descent: benchmarks again (other flags, other records), at least as many */
    compile_once(c, d, g, IC_TUNE_POINTWISE | IC_TUNE_REDUCTION | IC_TUNE_COORDESC, &again);
    cr_assert_eq(again.tuned, st.kernels);
    cr_assert_geq(again.candidates, st.candidates);
    /* mode max-autotune-no-cudagraphs: autotune = IC_TUNE_MAX (no GEMM or attention here) */
    ic_cuda_options o;
    ic_cuda_options_init(&o);
    o.mode = IC_CUDA_MAX_AUTOTUNE_NO_CUDAGRAPHS;
    ic_cuda_compiled *cc = NULL;
    cr_assert_eq(ic_cuda_compile(d, g, &o, &cc), IC_OK, "%s", ic_last_error(c));
    ic_cuda_compiled_autotune_stats(cc, &again);
    ic_cuda_compiled_destroy(cc);
    cr_assert_eq(again.kernels, 2, "the mode tuned %d kernels", again.kernels);
    cr_assert_eq(again.tuned, 2);
    ic_graph_destroy(g);
    ic_cuda_close(d);
    ic_ctx_destroy(c);
    unsetenv("IC_CUDA_DRIVER");
    unsetenv("IC_CACHE_DIR");
    ict_rmtree(dir);
}
