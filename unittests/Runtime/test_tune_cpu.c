/* test_tune_cpu.c - the CPU autotuner (tune.c, tune_cpu.c): the search space (the default first,
 * valid and distinct candidates), the decisions under a rigged timer (the margin, the early
 * stop, the budget, a winner with wrong outputs), tuning records (a second compile reads the
 * record and benchmarks nothing), the record text, and outputs of tuned graphs against the
 * reference executor. Every test compiles into its own cache folder (IC_CACHE_DIR). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include "ic/ic.h"
#include "testutil.h"
#include "key-impl.h"
#include "tune-impl.h"

/* ---- what the hooks saw ---- */

#define MAXC 4096
typedef struct {
    double rig[MAXC];       /* > 0: the time of candidate i; 0: `other` */
    double other;           /* times of candidates not rigged (0: measured) */
    int corrupt;            /* candidate whose outputs are spoiled (0: none) */
    int fade;               /* candidate whose rigged time holds for its first race only */
    int samples[MAXC];      /* samples timed per candidate */
    char desc[MAXC][IC__TUNE_DESC];
    int ncand;              /* highest candidate index seen + 1 */
    int chosen;             /* the last choice (-2: none) */
    char chosen_desc[IC__TUNE_DESC];
    int timed;              /* calls of the timer */
} seen;

static double hook_time(void *user, const char *kernel, int cand, const char *desc, double measured)
{
    (void)kernel, (void)measured;
    seen *s = user;
    cr_assert(cand >= 0 && cand < MAXC);
    s->timed++;
    s->samples[cand]++;
    snprintf(s->desc[cand], sizeof s->desc[cand], "%s", desc);
    if (cand + 1 > s->ncand)
        s->ncand = cand + 1;
    if (cand == s->fade && s->samples[cand] > IC__TUNE_ROUNDS)
        return s->other;
    return s->rig[cand] > 0 ? s->rig[cand] : s->other > 0 ? s->other : -1;
}

static bool hook_corrupt(void *user, const char *kernel, int cand, const char *desc)
{
    (void)kernel, (void)desc;
    return cand == ((seen *)user)->corrupt && cand > 0;
}

static void hook_chosen(void *user, const char *kernel, int cand, const char *desc)
{
    (void)kernel;
    seen *s = user;
    s->chosen = cand;
    snprintf(s->chosen_desc, sizeof s->chosen_desc, "%s", desc);
}

static seen *watch(void)
{
    seen *s = calloc(1, sizeof *s);
    s->chosen = -2;
    ic__tune_hooks h = { .user = s, .time = hook_time, .corrupt = hook_corrupt, .chosen = hook_chosen };
    ic__tune_set_hooks(&h);
    return s;
}

static void unwatch(seen *s)
{
    ic__tune_set_hooks(NULL);
    free(s);
}

/* ---- graphs, compiles ---- */

static const char *cache_dir;

/* A context whose persistent cache is a fresh temporary folder. */
static ic_ctx *tune_ctx(void)
{
    ic_ctx *c = ict_ctx();
    ic_switches sw;
    ic_ctx_switches(c, &sw);
    static char dir[1024];
    snprintf(dir, sizeof dir, "%s", ict_tmpdir());
    cache_dir = dir;
    sw.cache_dir = dir;
    sw.autotune_log = false;
    cr_assert_eq(ic_ctx_set_switches(c, &sw), IC_OK);
    return c;
}

static void done(ic_ctx *c)
{
    ic_ctx_destroy(c);
    ict_rmtree(cache_dir);
}

static ic_graph *load(ic_ctx *c, const char *inputs, const char *nodes)
{
    char text[4096];
    snprintf(text, sizeof text, "{\"ic_graph\": 1, \"name\": \"t\", \"inputs\": [%s], \"nodes\": [%s], "
             "\"outputs\": [\"y\"]}", inputs, nodes);
    ic_graph *g = NULL;
    cr_assert_eq(ic_graph_load_json_string(c, text, NULL, &g), IC_OK, "%s", ic_last_error(c));
    return g;
}

static ic_graph *matmul_graph(ic_ctx *c, int M, int N, int K)
{
    char in[256];
    snprintf(in, sizeof in, "{\"name\": \"a\", \"dtype\": \"f32\", \"shape\": [%d, %d]}, "
             "{\"name\": \"b\", \"dtype\": \"f32\", \"shape\": [%d, %d]}", M, K, K, N);
    return load(c, in, "{\"name\": \"y\", \"op\": \"matmul\", \"inputs\": [\"a\", \"b\"]}");
}

/* A pointwise kernel: small and quick to compile, for the decision tests. */
static ic_graph *pointwise_graph(ic_ctx *c)
{
    return load(c, "{\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [64, 1000]}",
                "{\"name\": \"e\", \"op\": \"exp\", \"inputs\": [\"x\"]}, "
                "{\"name\": \"y\", \"op\": \"mul\", \"inputs\": [\"e\", 2.0]}");
}

static ic_autotune_stats compile_tuned(ic_ctx *c, const ic_graph *g, int flags, double budget, ic_compiled **out)
{
    ic_compile_options o;
    ic_compile_options_init(&o);
    o.autotune = flags;
    o.autotune_budget_s = budget;
    ic_compiled *cc = NULL;
    cr_assert_eq(ic_compile(c, g, &o, &cc), IC_OK, "%s", ic_last_error(c));
    ic_autotune_stats st;
    ic_compiled_autotune_stats(cc, &st);
    if (out)
        *out = cc;
    else
        ic_compiled_destroy(cc);
    return st;
}

/* ---- the space ---- */

static int field(const char *desc, const char *name)
{
    const char *p = strstr(desc, name);
    cr_assert(p, "'%s' has no %s", desc, name);
    return atoi(p + strlen(name));
}

Test(tune_cpu, gemm_space_default_first_valid_distinct)
{
    ic_ctx *c = tune_ctx();
    ic_graph *g = matmul_graph(c, 96, 160, 128);
    seen *s = watch();
    s->other = 1.0;
    ic_autotune_stats st = compile_tuned(c, g, IC_TUNE_GEMM, 0, NULL);
    cr_assert_eq(st.kernels, 1);
    cr_assert_eq(st.tuned, 1);
    cr_assert_gt(s->ncand, 8, "only %d candidates", s->ncand);
    cr_assert_eq(st.candidates, s->ncand);
    ic_codegen_target *t;
    cr_assert_eq(ic_codegen_target_create(c, &t), IC_OK);
    int bits = ic_codegen_target_vector_bits(t), vl = bits / 32, regs = bits >= 512 ? 32 : 16;
    ic_gemm_params def = { 0 };
    ic_gemm_params_default(t, NULL, NULL, &def);
    ic_codegen_target_destroy(t);
    /* candidate 0 is the heuristic's tile */
    cr_assert_eq(field(s->desc[0], "mr="), def.mr, "%s", s->desc[0]);
    cr_assert_eq(field(s->desc[0], "nr="), def.nr, "%s", s->desc[0]);
    for (int i = 0; i < s->ncand; i++) {
        cr_assert_gt(s->samples[i], 0, "candidate %d never timed", i);
        int mr = field(s->desc[i], "mr="), nr = field(s->desc[i], "nr="), nv = nr / vl;
        cr_assert(nr % vl == 0 && mr >= 1 && mr * nv + nv + 1 <= regs, "invalid tile: %s", s->desc[i]);
        cr_assert_leq(field(s->desc[i], "kc="), 128, "kc past K: %s", s->desc[i]);
        for (int j = 0; j < i; j++)
            cr_assert_str_neq(s->desc[i], s->desc[j], "candidates %d and %d are the same", j, i);
    }
    cr_assert_eq(s->chosen, 0, "all rigged equal: the default stays");
    unwatch(s);
    ic_graph_destroy(g);
    done(c);
}

Test(tune_cpu, loop_space_exhaustive_valid_distinct)
{
    ic_ctx *c = tune_ctx();
    ic_graph *g = pointwise_graph(c);
    seen *s = watch();
    s->other = 1.0;
    ic_autotune_stats st = compile_tuned(c, g, IC_TUNE_POINTWISE | IC_TUNE_EXHAUSTIVE, 0, NULL);
    cr_assert_eq(st.tuned, 1);
    cr_assert_gt(s->ncand, 6);
    for (int i = 0; i < s->ncand; i++) {
        cr_assert_gt(field(s->desc[i], "vector_width="), 0, "%s", s->desc[i]);
        for (int j = 0; j < i; j++)
            cr_assert_str_neq(s->desc[i], s->desc[j]);
    }
    unwatch(s);
    ic_graph_destroy(g);
    done(c);
}

Test(tune_cpu, kernels_not_selected_are_not_tuned)
{
    ic_ctx *c = tune_ctx();
    ic_graph *g = pointwise_graph(c);
    seen *s = watch();
    ic_autotune_stats st = compile_tuned(c, g, IC_TUNE_GEMM | IC_TUNE_REDUCTION, 0, NULL);
    cr_assert_eq(st.kernels, 0);
    cr_assert_eq(s->timed, 0);
    st = compile_tuned(c, g, 0, 0, NULL);
    cr_assert_eq(st.kernels, 0);
    unwatch(s);
    ic_graph_destroy(g);
    done(c);
}

/* ---- decisions ---- */

/* Compiles the pointwise graph with candidate `fast` rigged at `t` ms, every other at 1 ms. */
static seen *rigged(int flags, int fast, double t, int corrupt, ic_autotune_stats *st)
{
    ic_ctx *c = tune_ctx();
    ic_graph *g = pointwise_graph(c);
    seen *s = watch();
    s->other = 1.0;
    s->rig[fast] = t;
    s->corrupt = corrupt;
    *st = compile_tuned(c, g, flags, 0, NULL);
    ic_graph_destroy(g);
    done(c);
    ic__tune_set_hooks(NULL);
    return s;
}

Test(tune_cpu, margin)
{
    ic_autotune_stats st;
    seen *s = rigged(IC_TUNE_POINTWISE, 3, 0.98, 0, &st); /* 2% faster: not enough */
    cr_assert_eq(s->chosen, 0);
    cr_assert_eq(st.replaced, 0);
    free(s);
    s = rigged(IC_TUNE_POINTWISE, 3, 0.90, 0, &st); /* 10% faster: taken */
    cr_assert_eq(s->chosen, 3);
    cr_assert_eq(st.replaced, 1);
    free(s);
}

Test(tune_cpu, early_stop)
{
    ic_autotune_stats st;
    seen *s = rigged(IC_TUNE_POINTWISE, 2, 10.0, 0, &st); /* 10x the best */
    cr_assert_eq(s->samples[2], 1, "stopped after its first sample (got %d)", s->samples[2]);
    cr_assert_eq(s->samples[1], IC__TUNE_ROUNDS);
    free(s);
    s = rigged(IC_TUNE_POINTWISE | IC_TUNE_EXHAUSTIVE, 2, 10.0, 0, &st); /* exhaustive: no early stop */
    cr_assert_eq(s->samples[2], IC__TUNE_ROUNDS);
    cr_assert_eq(s->chosen, 0);
    free(s);
}

Test(tune_cpu, a_lucky_winner_is_not_confirmed)
{
    ic_ctx *c = tune_ctx();
    ic_graph *g = pointwise_graph(c);
    seen *s = watch();
    s->other = 1.0;
    int last = 9; /* of the last batch: no later race re-times it before the confirmation */
    s->rig[last] = 0.5;
    s->fade = last; /* fast in its race, as slow as the default when raced again */
    ic_autotune_stats st = compile_tuned(c, g, IC_TUNE_POINTWISE, 0, NULL);
    cr_assert_eq(s->ncand, last + 1, "the space changed: rig the last candidate (%d)", s->ncand - 1);
    cr_assert_eq(s->samples[last], 2 * IC__TUNE_ROUNDS, "raced again");
    cr_assert_eq(s->chosen, 0);
    cr_assert_eq(st.replaced, 0);
    unwatch(s);
    ic_graph_destroy(g);
    done(c);
}

Test(tune_cpu, budget)
{
    ic_ctx *c = tune_ctx();
    ic_graph *g = matmul_graph(c, 64, 64, 64);
    seen *s = watch();
    ic_autotune_stats st = compile_tuned(c, g, IC_TUNE_MAX, 1e-6, NULL); /* spent at once */
    cr_assert_eq(st.tuned, 1);
    cr_assert_eq(st.candidates, 1, "only the default is compiled (got %d)", st.candidates);
    cr_assert_eq(st.replaced, 0);
    cr_assert_leq(s->ncand, 1);
    unwatch(s);
    ic_graph_destroy(g);
    done(c);
}

Test(tune_cpu, wrong_outputs_rejected)
{
    ic_autotune_stats st;
    ic_ctx *c = tune_ctx();
    ic_graph *g = pointwise_graph(c);
    seen *s = watch();
    s->other = 1.0;
    s->rig[2] = 0.5, s->rig[4] = 0.8;
    s->corrupt = 2; /* the fastest computes garbage: the next best is taken */
    st = compile_tuned(c, g, IC_TUNE_POINTWISE, 0, NULL);
    cr_assert_eq(s->chosen, 4);
    cr_assert_eq(st.replaced, 1);
    unwatch(s);
    ic_graph_destroy(g);
    done(c);
}

/* ---- records ---- */

Test(tune_cpu, record_round_trip)
{
    ic_ctx *c = tune_ctx();
    ic_graph *g = matmul_graph(c, 64, 96, 80);
    seen *s = watch();
    s->other = 1.0;
    s->rig[3] = 0.5;
    ic_autotune_stats st = compile_tuned(c, g, IC_TUNE_GEMM, 0, NULL);
    cr_assert_eq(s->chosen, 3);
    cr_assert_eq(st.tuned, 1);
    cr_assert_eq(st.record_hits, 0);
    char first[IC__TUNE_DESC];
    snprintf(first, sizeof first, "%s", s->chosen_desc);
    int timed = s->timed;
    ic_compiled *cc;
    st = compile_tuned(c, g, IC_TUNE_GEMM, 0, &cc); /* a new compile: the record answers */
    cr_assert_eq(st.record_hits, 1);
    cr_assert_eq(st.tuned, 0);
    cr_assert_eq(st.candidates, 0);
    cr_assert_eq(st.bench_s, 0);
    cr_assert_eq(s->timed, timed, "benchmarked again");
    cr_assert_eq(s->chosen, -1);
    cr_assert_str_eq(s->chosen_desc, first);
    /* the record's code computes the product */
    float a[64 * 80], b[80 * 96], y[64 * 96];
    for (int i = 0; i < 64 * 80; i++)
        a[i] = (float)((i * 7) % 13) - 6;
    for (int i = 0; i < 80 * 96; i++)
        b[i] = (float)((i * 5) % 11) - 5;
    ic_tensor args[2], out;
    ic_tensor_init(&args[0], IC_F32, 2, (int64_t[]){ 64, 80 }, a);
    ic_tensor_init(&args[1], IC_F32, 2, (int64_t[]){ 80, 96 }, b);
    ic_tensor_init(&out, IC_F32, 2, (int64_t[]){ 64, 96 }, y);
    cr_assert_eq(ic_run(cc, 2, args, 1, &out), IC_OK);
    for (int i = 0; i < 64; i += 7)
        for (int j = 0; j < 96; j += 5) {
            double want = 0;
            for (int k = 0; k < 80; k++)
                want += (double)a[i * 80 + k] * b[k * 96 + j];
            cr_assert_float_eq(y[i * 96 + j], want, 1e-3);
        }
    ic_compiled_destroy(cc);
    /* other tuning flags: another record */
    st = compile_tuned(c, g, IC_TUNE_GEMM | IC_TUNE_COORDESC, 0, NULL);
    cr_assert_eq(st.record_hits, 0);
    cr_assert_eq(st.tuned, 1);
    unwatch(s);
    ic_graph_destroy(g);
    done(c);
}

Test(tune_cpu, record_text)
{
    ic__tune_record r = { .ms = 1.25, .default_ms = 2.5 }, back;
    snprintf(r.params, sizeof r.params, "vector_width=16 unroll=2");
    char buf[2048];
    cr_assert(ic__tune_record_format(&r, buf, sizeof buf));
    cr_assert(ic__tune_record_parse(buf, strlen(buf), &back));
    cr_assert_str_eq(back.params, r.params);
    cr_assert_eq(back.ms, 1.25);
    cr_assert_eq(back.default_ms, 2.5);
    cr_assert_not(ic__tune_record_parse(buf, strlen(buf) - 1, &back), "truncated");
    cr_assert_not(ic__tune_record_parse("params x\nms nan\ndefault_ms 1\n", 29, &back));
    cr_assert_not(ic__tune_record_parse("ms 1\nparams x\ndefault_ms 1\n", 27, &back));
    cr_assert_not(ic__tune_record_format(&r, buf, 10), "does not fit");
}

/* ---- outputs against the reference executor ---- */

static void check_graph(const char *inputs, const char *nodes, const int64_t (*shapes)[3], int nargs)
{
    ic_ctx *c = tune_ctx();
    ic_graph *g = load(c, inputs, nodes);
    ic_tensor args[4], want, got;
    unsigned seed = 99;
    for (int i = 0; i < nargs; i++) {
        int rank = shapes[i][2] ? 3 : shapes[i][1] ? 2 : 1;
        ic_tensor_init(&args[i], IC_F32, rank, shapes[i], NULL);
        cr_assert_eq(ic_tensor_alloc(c, &args[i]), IC_OK);
        for (int64_t j = 0; j < ic_tensor_numel(&args[i]); j++) {
            seed = seed * 1664525u + 1013904223u;
            ((float *)args[i].data)[j] = (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
        }
    }
    cr_assert_eq(ic_ref_run(c, g, NULL, nargs, args, 1, &want), IC_OK, "%s", ic_last_error(c));
    ic_compiled *cc;
    ic_autotune_stats st = compile_tuned(c, g, IC_TUNE_MAX, 4, &cc);
    cr_assert_geq(st.tuned, 1);
    ic_tensor_init(&got, want.dtype, want.rank, want.shape, NULL);
    cr_assert_eq(ic_tensor_alloc(c, &got), IC_OK);
    cr_assert_eq(ic_run(cc, nargs, args, 1, &got), IC_OK, "%s", ic_last_error(c));
    ict_assert_allclose(&got, &want);
    ic_tensor_free(c, &got);
    ic_tensor_free(c, &want);
    for (int i = 0; i < nargs; i++)
        ic_tensor_free(c, &args[i]);
    ic_compiled_destroy(cc);
    ic_graph_destroy(g);
    done(c);
}

Test(tune_cpu, reference_matmul)
{
    check_graph("{\"name\": \"a\", \"dtype\": \"f32\", \"shape\": [70, 90]}, "
                "{\"name\": \"b\", \"dtype\": \"f32\", \"shape\": [90, 50]}",
                "{\"name\": \"y\", \"op\": \"matmul\", \"inputs\": [\"a\", \"b\"]}",
                (const int64_t[][3]){ { 70, 90 }, { 90, 50 } }, 2);
}

Test(tune_cpu, reference_linear_gelu)
{
    check_graph("{\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [40, 64]}, "
                "{\"name\": \"w\", \"dtype\": \"f32\", \"shape\": [96, 64]}, "
                "{\"name\": \"b\", \"dtype\": \"f32\", \"shape\": [96]}",
                "{\"name\": \"l\", \"op\": \"linear\", \"inputs\": [\"x\", \"w\", \"b\"]}, "
                "{\"name\": \"y\", \"op\": \"gelu\", \"inputs\": [\"l\"]}",
                (const int64_t[][3]){ { 40, 64 }, { 96, 64 }, { 96 } }, 3);
}

Test(tune_cpu, reference_softmax)
{
    check_graph("{\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [33, 300]}",
                "{\"name\": \"y\", \"op\": \"softmax\", \"inputs\": [\"x\"], \"attrs\": {\"dim\": -1}}",
                (const int64_t[][3]){ { 33, 300 } }, 1);
}

Test(tune_cpu, reference_layer_norm)
{
    check_graph("{\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [48, 256]}, "
                "{\"name\": \"w\", \"dtype\": \"f32\", \"shape\": [256]}, "
                "{\"name\": \"b\", \"dtype\": \"f32\", \"shape\": [256]}",
                "{\"name\": \"y\", \"op\": \"layer_norm\", \"inputs\": [\"x\", \"w\", \"b\"], "
                "\"attrs\": {\"normalized_shape\": [256], \"eps\": 1e-5}}",
                (const int64_t[][3]){ { 48, 256 }, { 256 }, { 256 } }, 3);
}

Test(tune_cpu, reference_column_sum)
{
    check_graph("{\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [500, 200]}",
                "{\"name\": \"y\", \"op\": \"sum\", \"inputs\": [\"x\"], \"attrs\": {\"dims\": [0]}}",
                (const int64_t[][3]){ { 500, 200 } }, 1);
}

/* ---- the AUTOTUNE table (IC_AUTOTUNE_LOG) ---- */

Test(tune_cpu, autotune_table, .init = cr_redirect_stderr)
{
    ic_ctx *c = tune_ctx();
    ic_switches sw;
    ic_ctx_switches(c, &sw);
    sw.autotune_log = true;
    cr_assert_eq(ic_ctx_set_switches(c, &sw), IC_OK);
    ic_graph *g = pointwise_graph(c);
    seen *s = watch();
    s->other = 1.0;
    s->rig[3] = 0.5;
    compile_tuned(c, g, IC_TUNE_POINTWISE, 0, NULL);
    fflush(stderr);
    static char text[1 << 16];
    size_t n = fread(text, 1, sizeof text - 1, cr_get_redirected_stderr());
    text[n] = 0;
    const char *head = strstr(text, "AUTOTUNE cpu_");
    cr_assert(head, "no table in:\n%s", text);
    cr_assert(strstr(head, "(pointwise, 64000 x 1)"), "%s", head);
    /* the first row is the chosen one, at 100%; the default at half its speed */
    const char *row = strchr(head, '\n') + 1;
    const char *eol = strchr(row, '\n');
    cr_assert(strstr(row, "100.0%") && strstr(row, "<- chosen") && strstr(row, "<- chosen") < eol, "%s", head);
    cr_assert(strncmp(row + 2, s->desc[3], strlen(s->desc[3])) == 0, "%s", head);
    const char *def = strstr(head, "(default)");
    cr_assert(def, "%s", head);
    const char *line = def;
    while (line > head && line[-1] != '\n')
        line--;
    cr_assert(strstr(line, " 50.0%") && strstr(line, " 50.0%") < def, "%s", head);
    cr_assert(strstr(head, "SingleProcess AUTOTUNE benchmarking takes"), "%s", head);
    unwatch(s);
    ic_graph_destroy(g);
    done(c);
}

Test(tune_cpu, no_records_with_the_cache_off)
{
    ic_ctx *c = tune_ctx();
    ic_graph *g = pointwise_graph(c);
    seen *s = watch();
    s->other = 1.0;
    ic_compile_options o;
    ic_compile_options_init(&o);
    o.autotune = IC_TUNE_POINTWISE;
    o.cache = -1;
    for (int i = 0; i < 2; i++) {
        ic_compiled *cc;
        cr_assert_eq(ic_compile(c, g, &o, &cc), IC_OK, "%s", ic_last_error(c));
        ic_autotune_stats st;
        ic_compiled_autotune_stats(cc, &st);
        cr_assert_eq(st.tuned, 1, "compile %d searched again", i);
        cr_assert_eq(st.record_hits, 0);
        ic_compiled_destroy(cc);
    }
    cr_assert_eq(ict_count_files(cache_dir), 0, "the cache folder was written");
    unwatch(s);
    ic_graph_destroy(g);
    done(c);
}

/* A tuning record's params are read back only within codegen's bounds: a damaged or hand-made
 * record is a miss (the kernel is tuned again), never params that reach code generation. */
Test(tune_cpu, params_text_is_bounded)
{
    ic_codegen_params p;
    memset(&p, 0, sizeof p);
    cr_assert(ic__cg_params_parse("vector_width=16 unroll=4 strip=1024 gemm.mr=8 prefetch_bytes=-1", &p));
    cr_assert_eq(p.vector_width, 16);
    cr_assert_eq(p.strip, 1024);
    cr_assert_eq(p.prefetch_bytes, -1);
    static const char *const bad[] = { "vector_width=-5", "unroll=1048576", "strip=1099511627776",
                                       "gemm.mr=-1", "parallel_depth=99", "gemm.pack_a=2",
                                       "vector_width=99999999999", "no_such_field=1" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ic_codegen_params q = p;
        cr_assert(!ic__cg_params_parse(bad[i], &q), "'%s' was accepted", bad[i]);
    }
}
