/* test_cli.c - ic-run and ic-dump as a user runs them: the bundled graphs, usage and input
 * errors (exit 1, one line on stderr, never a crash), --inputs/--save-outputs round trips
 * checked against independent C, --bind, --seed determinism, refusal to write over inputs,
 * and the README's C example (compiled here from readme_example.inc, kept identical to the
 * README by a test). These run ic-run's default backend (compiled) unless a test is about
 * the reference executor; test_cli_compiled.c covers the backends, --check, --json and the
 * compiler stages of ic-dump. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <fcntl.h>
#include "testutil.h"
#include "cli_run.h"

/* ---- the documented generator (README "Generated data"), written out independently ---- */

static uint64_t sm64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t fnv(const char *s)
{
    uint64_t h = 14695981039346656037ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* f32 values of generated argument `name`: k / 2^23 - 1, k the top 24 bits. */
static void gen_f32(uint64_t seed, const char *name, float *out, int n)
{
    uint64_t s = seed ^ fnv(name);
    for (int i = 0; i < n; i++)
        out[i] = (float)((double)(sm64(&s) >> 40) / 8388608.0 - 1.0);
}

/* ---- small graphs written for the tests ---- */

/* The seed pattern ((a + b1) + c) * b2 + b3 with a, c [5, 7] and b1, b2, b3 [1, 7]. */
static const char small_seed[] =
    "{\"ic_graph\": 1, \"name\": \"small_seed\",\n"
    " \"inputs\": [{\"name\": \"a\", \"dtype\": \"f32\", \"shape\": [5, 7]},\n"
    "            {\"name\": \"b1\", \"dtype\": \"f32\", \"shape\": [1, 7]},\n"
    "            {\"name\": \"c\", \"dtype\": \"f32\", \"shape\": [5, 7]},\n"
    "            {\"name\": \"b2\", \"dtype\": \"f32\", \"shape\": [1, 7]},\n"
    "            {\"name\": \"b3\", \"dtype\": \"f32\", \"shape\": [1, 7]}],\n"
    " \"nodes\": [{\"name\": \"t0\", \"op\": \"add\", \"inputs\": [\"a\", \"b1\"]},\n"
    "           {\"name\": \"t1\", \"op\": \"add\", \"inputs\": [\"t0\", \"c\"]},\n"
    "           {\"name\": \"t2\", \"op\": \"mul\", \"inputs\": [\"t1\", \"b2\"]},\n"
    "           {\"name\": \"y\", \"op\": \"add\", \"inputs\": [\"t2\", \"b3\"]}],\n"
    " \"outputs\": [\"y\"]}\n";

/* y = x * 2 with x of [B, 3]. */
static const char sym_graph[] =
    "{\"ic_graph\": 1, \"name\": \"sym\",\n"
    " \"inputs\": [{\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [\"B\", 3]}],\n"
    " \"nodes\": [{\"name\": \"y\", \"op\": \"mul\", \"inputs\": [\"x\", 2]}],\n"
    " \"outputs\": [\"y\"]}\n";

static void save_f32(ic_ctx *c, const char *path, int n, const char *const *names,
                     float *const *data, const int64_t (*shapes)[2])
{
    ic_tensor t[8];
    for (int i = 0; i < n; i++)
        ic_tensor_init(&t[i], IC_F32, 2, shapes[i], data[i]);
    cr_assert_eq(ic_safetensors_save(c, path, n, names, t), IC_OK, "saving %s: %s", path,
                 ic_last_error(c));
}

/* Opens path and checks that it holds `name` as f32 of shape [rows, cols]. */
static ic_safetensors *open_out(ic_ctx *c, const char *path, const char *name, int64_t rows,
                                int64_t cols, ic_tensor *t)
{
    ic_safetensors *st = NULL;
    cr_assert_eq(ic_safetensors_open(c, path, &st), IC_OK, "opening %s: %s", path, ic_last_error(c));
    cr_assert_eq(ic_safetensors_get(st, name, t), IC_OK, "%s has no '%s': %s", path, name,
                 ic_last_error(c));
    cr_assert(t->dtype == IC_F32 && t->rank == 2 && t->shape[0] == rows && t->shape[1] == cols,
              "%s: '%s' is %s rank %d [%lld, %lld], want f32 [%lld, %lld]", path, name,
              ic_dtype_name(t->dtype), t->rank, (long long)t->shape[0],
              (long long)(t->rank > 1 ? t->shape[1] : -1), (long long)rows, (long long)cols);
    return st;
}

static void assert_close_f32(const float *got, const float *want, int n, const char *what)
{
    for (int i = 0; i < n; i++)
        cr_assert(fabsf(got[i] - want[i]) <= 1e-5f + 1e-4f * fabsf(want[i]),
                  "%s: element %d: got %.9g, want %.9g", what, i, got[i], want[i]);
}

/* ---- bundled graphs ---- */

Test(cli, bundled_graphs_run)
{
    const char *dir = ict_tmpdir();
    static const struct { const char *graph, *args, *want; } cases[] = {
        { "benchmarks/graphs/seed_pattern.json", "", "[16384, 512]" },
        { "benchmarks/graphs/tiny_mlp.json", "", "[4, 4]" },
        { "benchmarks/graphs/attention.json", "--bind B=1", "[1, 12, 128, 64]" },
        { "benchmarks/graphs/bert_ffn.json", "--bind B=1", "[1, 128, 768]" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[8192];
        snprintf(args, sizeof args, "'%s' %s --backend ref", src(cases[i].graph), cases[i].args);
        run_result r = run_tool(dir, "ic-run", args);
        assert_ok(r, cases[i].graph);
        cr_assert(strstr(r.out, cases[i].want) && strstr(r.out, " y ") && strstr(r.out, "mean"),
                  "%s: summary should show output y %s with stats, got:\n%s", cases[i].graph,
                  cases[i].want, r.out);
        cr_assert(strstr(r.out, "ms"), "%s: summary should show the run time:\n%s", cases[i].graph, r.out);
        result_free(&r);
    }
    ict_rmtree(dir);
}

Test(cli, bundled_graphs_dump)
{
    const char *dir = ict_tmpdir();
    /* nodes = inputs + params + ops; ic-dump's banner, ic_graph_print's header and outputs line */
    static const struct { const char *graph; int nodes; const char *want; } cases[] = {
        { "benchmarks/graphs/seed_pattern.json", 9, "[16384, 512]" },
        { "benchmarks/graphs/bert_ffn.json", 12, "[B, 128, 3072]" },
        { "benchmarks/graphs/attention.json", 8, "[B, 12, 128, 128]" },
        { "benchmarks/graphs/tiny_mlp.json", 8, "[4, 16]" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[4096];
        snprintf(args, sizeof args, "'%s'", src(cases[i].graph));
        run_result r = run_tool(dir, "ic-dump", args);
        assert_ok(r, cases[i].graph);
        cr_assert_eq(count_char(r.out, '\n'), cases[i].nodes + 3,
                     "%s: want %d nodes, one a line (+ banner, header and outputs), got:\n%s",
                     cases[i].graph, cases[i].nodes, r.out);
        cr_assert(strstr(r.out, cases[i].want), "%s: want inferred shape %s in:\n%s",
                  cases[i].graph, cases[i].want, r.out);
        result_free(&r);
    }
    ict_rmtree(dir);
}

Test(cli, dump_stages_and_bind)
{
    const char *dir = ict_tmpdir();
    char args[4096];
    snprintf(args, sizeof args, "'%s' --stage graph --bind B=2", src("benchmarks/graphs/bert_ffn.json"));
    run_result r = run_tool(dir, "ic-dump", args);
    assert_ok(r, "ic-dump --stage graph --bind B=2");
    cr_assert(strstr(r.out, "[2, 128, 3072]"), "want the specialised shape in:\n%s", r.out);
    result_free(&r);

    snprintf(args, sizeof args, "'%s' --stage nope", src("benchmarks/graphs/seed_pattern.json"));
    r = run_tool(dir, "ic-dump", args);
    assert_fails(r, "ic-dump", "unknown stage", "nope", "graph", "loops", "fused", "llvm", "asm", "ptx");
    result_free(&r);

    /* ptx: built when the GPU layer's header is there (test_cli_compiled.c checks its text) */
    snprintf(args, sizeof args, "'%s' --stage ptx", src("benchmarks/graphs/seed_pattern.json"));
    r = run_tool(dir, "ic-dump", args);
#if __has_include("ic/ptx.h")
    assert_ok(r, "--stage ptx");
#else
    assert_fails(r, "ic-dump", "stage not built yet", "ptx", "not available");
#endif
    result_free(&r);
    ict_rmtree(dir);
}

/* ---- usage errors ---- */

Test(cli, usage_errors)
{
    const char *dir = ict_tmpdir();
    const char *g = src("benchmarks/graphs/seed_pattern.json");
    static const struct { const char *tool, *fmt, *part; } cases[] = {
        { "ic-run", "", "no graph" },
        { "ic-run", "'%s' --frobnicate", "--frobnicate" },
        { "ic-run", "'%s' --seed", "--seed" },
        { "ic-run", "'%s' --seed abc", "abc" },
        { "ic-run", "'%s' --seed -3", "-3" },
        { "ic-run", "'%s' --bind B", "SYM=N" },
        { "ic-run", "'%s' --bind =4", "SYM=N" },
        { "ic-run", "'%s' --bind B=x", "B=x" },
        { "ic-run", "'%s' --bind B=-1", "B=-1" },
        { "ic-run", "'%s' --backend cuda9", "cuda9" },
        { "ic-run", "'%s' --backend", "--backend" },
        { "ic-run", "'%s' --iters 0", "--iters" },
        { "ic-run", "'%s' --iters x", "'x'" },
        { "ic-run", "'%s' --iters=-2", "'-2'" },
        { "ic-run", "'%s' --warmup -1", "--warmup" },
        { "ic-run", "'%s' --warmup", "--warmup" },
        { "ic-run", "'%s' --threads 0", "--threads" },
        { "ic-run", "'%s' --threads 2x", "'2x'" },
        { "ic-run", "'%s' --expect", "--expect" },
        { "ic-run", "'%s' --expect=", "--expect" },
        { "ic-run", "'%s' --backend ref --expect /nonexistent/e.safetensors", "/nonexistent/e.safetensors" },
        { "ic-run", "'%s' --check=yes", "--check=yes" },
        { "ic-run", "'%s' '%s'", "one graph" },
        { "ic-run", "'%s' --inputs", "--inputs" },
        { "ic-run", "'%s' --save-outputs=", "--save-outputs" },
        { "ic-run", "'%s' --bind Z=3", "'Z'" },
        { "ic-run", "/nonexistent/graph.json", "/nonexistent/graph.json" },
        { "ic-run", "'%s' --save-outputs /", "folder" },
        { "ic-run", "'%s' --save-outputs /nonexistent/out.safetensors", "/nonexistent" },
        { "ic-dump", "", "no graph" },
        { "ic-dump", "'%s' --stage", "--stage" },
        { "ic-dump", "'%s' -x", "-x" },
        { "ic-dump", "/nonexistent/graph.json", "/nonexistent/graph.json" },
        { "ic-dump", "'%s' --stage=", "stage ''" },
        { "ic-dump", "'%s' --bind", "--bind" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[4096], what[4096];
        snprintf(args, sizeof args, cases[i].fmt, g, g);
        run_result r = run_tool(dir, cases[i].tool, args);
        snprintf(what, sizeof what, "%s %.2000s", cases[i].tool, args);
        assert_fails(r, cases[i].tool, what, cases[i].part);
        result_free(&r);
    }
    ict_rmtree(dir);
}

Test(cli, help_exits_zero)
{
    const char *dir = ict_tmpdir();
    const char *tools[] = { "ic-run", "ic-dump" };
    for (int i = 0; i < 2; i++) {
        run_result r = run_tool(dir, tools[i], "-h");
        assert_ok(r, tools[i]);
        cr_assert(strstr(r.out, "usage:") && strstr(r.out, "--bind"), "%s -h: got:\n%s", tools[i], r.out);
        cr_assert_str_empty(r.err, "%s -h printed on stderr: %s", tools[i], r.err);
        result_free(&r);
    }
    run_result r = run_tool(dir, "ic-run", "--help");
    cr_assert(r.rc == 0 && strstr(r.out, "--save-outputs") && strstr(r.out, "--seed"),
              "ic-run --help: exit %d:\n%s", r.rc, r.out);
    result_free(&r);
    ict_rmtree(dir);
}

/* --version: what an installed ic-run says it is (scripts/ci-install.sh runs it too) */
Test(cli, version)
{
    const char *dir = ict_tmpdir();
    run_result r = run_tool(dir, "ic-run", "--version");
    assert_ok(r, "ic-run --version");
    char want[128];
    snprintf(want, sizeof want, "ic-run (ic-llvm) %s, build %s\n", ic_version(), ic_build_id());
    cr_assert_str_eq(r.out, want, "ic-run --version");
    cr_assert_eq(strlen(ic_build_id()), 16, "build id: %s", ic_build_id());
    result_free(&r);
    ict_rmtree(dir);
}

/* ---- malformed files ---- */

Test(cli, malformed_graphs)
{
    const char *dir = ict_tmpdir();
    static const struct { const char *name, *text, *part; } cases[] = {
        { "notjson.json", "{ this is not json", NULL },
        { "truncated.json", "{\"ic_graph\": 1, \"name\": \"t\", \"inputs\": [{\"name\": \"a\", \"dty", NULL },
        { "empty.json", "", NULL },
        { "version.json", "{\"ic_graph\": 99, \"name\": \"v\", \"inputs\": [], \"nodes\": [], \"outputs\": []}", "99" },
        { "badop.json",
          "{\"ic_graph\": 1, \"name\": \"b\", \"inputs\": [{\"name\": \"a\", \"dtype\": \"f32\", \"shape\": [2]}],"
          " \"nodes\": [{\"name\": \"z\", \"op\": \"frobnicate\", \"inputs\": [\"a\"]}], \"outputs\": [\"z\"]}",
          "frobnicate" },
    };
    const char *tools[] = { "ic-run", "ic-dump" };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *p = ict_path(dir, cases[i].name);
        char path[4096], args[4200];
        snprintf(path, sizeof path, "%s", p);
        write_text(path, cases[i].text);
        snprintf(args, sizeof args, "'%s'", path);
        for (int t = 0; t < 2; t++) {
            run_result r = run_tool(dir, tools[t], args);
            if (cases[i].part)
                assert_fails(r, tools[t], cases[i].name, cases[i].name, cases[i].part);
            else
                assert_fails(r, tools[t], cases[i].name, cases[i].name);
            result_free(&r);
        }
    }
    ict_rmtree(dir);
}

Test(cli, malformed_inputs_file)
{
    const char *dir = ict_tmpdir();
    char graph[4096], in[4096], args[9000];
    snprintf(graph, sizeof graph, "%s", ict_path(dir, "g.json"));
    snprintf(in, sizeof in, "%s", ict_path(dir, "in.safetensors"));
    write_text(graph, small_seed);
    /* a header length far beyond the file */
    const unsigned char bad[16] = { 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, '{', '}' };
    ict_write_file(in, bad, sizeof bad);
    snprintf(args, sizeof args, "'%s' --inputs '%s'", graph, in);
    run_result r = run_tool(dir, "ic-run", args);
    assert_fails(r, "ic-run", "corrupt inputs file", "in.safetensors");
    result_free(&r);

    snprintf(args, sizeof args, "'%s' --inputs '%s'", graph, ict_path(dir, "missing.safetensors"));
    r = run_tool(dir, "ic-run", args);
    assert_fails(r, "ic-run", "missing inputs file", "missing.safetensors");
    result_free(&r);
    ict_rmtree(dir);
}

/* ---- inputs, outputs and generated data ---- */

Test(cli, inputs_round_trip)
{
    ic_ctx *c = ict_ctx();
    const char *dir = ict_tmpdir();
    char graph[4096], in[4096], out[4096], args[16384];
    snprintf(graph, sizeof graph, "%s", ict_path(dir, "small_seed.json"));
    snprintf(in, sizeof in, "%s", ict_path(dir, "in.safetensors"));
    snprintf(out, sizeof out, "%s", ict_path(dir, "out.safetensors"));
    write_text(graph, small_seed);

    float a[35], c_[35], b1[7], b2[7], b3[7];
    for (int i = 0; i < 35; i++) {
        a[i] = (float)i * 0.25f - 3.0f;
        c_[i] = (float)(i % 6) - 2.5f;
    }
    for (int j = 0; j < 7; j++) {
        b1[j] = (float)j;
        b2[j] = 0.5f * (float)(j - 3);
        b3[j] = -(float)j * 0.125f;
    }
    const char *names[] = { "a", "b1", "c", "b2", "b3" };
    float *data[] = { a, b1, c_, b2, b3 };
    const int64_t shapes[][2] = { { 5, 7 }, { 1, 7 }, { 5, 7 }, { 1, 7 }, { 1, 7 } };
    save_f32(c, in, 5, names, data, shapes);

    snprintf(args, sizeof args, "'%s' --inputs '%s' --save-outputs '%s'", graph, in, out);
    run_result r = run_tool(dir, "ic-run", args);
    assert_ok(r, "ic-run --inputs --save-outputs");
    cr_assert(strstr(r.out, "0 generated"), "every argument was supplied:\n%s", r.out);
    result_free(&r);

    float want[35];
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 7; j++)
            want[i * 7 + j] = ((a[i * 7 + j] + b1[j]) + c_[i * 7 + j]) * b2[j] + b3[j];
    ic_tensor y;
    ic_safetensors *st = open_out(c, out, "y", 5, 7, &y);
    float got[35];
    memcpy(got, y.data, sizeof got);
    assert_close_f32(got, want, 35, "y");
    cr_assert_eq(ic_safetensors_count(st), 1, "one output saved, got %d", ic_safetensors_count(st));
    ic_safetensors_close(st);
    ict_rmtree(dir);
    ic_ctx_destroy(c);
}

/* Supplying some arguments: the others follow the documented generator exactly. */
Test(cli, generated_arguments_follow_the_documented_generator)
{
    ic_ctx *c = ict_ctx();
    const char *dir = ict_tmpdir();
    char graph[4096], in[4096], out[4096], args[16384];
    snprintf(graph, sizeof graph, "%s", ict_path(dir, "small_seed.json"));
    snprintf(in, sizeof in, "%s", ict_path(dir, "in.safetensors"));
    snprintf(out, sizeof out, "%s", ict_path(dir, "out.safetensors"));
    write_text(graph, small_seed);
    float a[35], c_[35];
    for (int i = 0; i < 35; i++) {
        a[i] = (float)i;
        c_[i] = 1.0f - (float)i * 0.5f;
    }
    const char *names[] = { "c", "a" }; /* any order */
    float *data[] = { c_, a };
    const int64_t shapes[][2] = { { 5, 7 }, { 5, 7 } };
    save_f32(c, in, 2, names, data, shapes);

    snprintf(args, sizeof args, "'%s' --inputs '%s' --save-outputs '%s' --seed 12345", graph, in, out);
    run_result r = run_tool(dir, "ic-run", args);
    assert_ok(r, "partial inputs");
    cr_assert(strstr(r.out, "3 generated") && strstr(r.out, "seed 12345"), "summary:\n%s", r.out);
    result_free(&r);

    float b1[7], b2[7], b3[7], want[35], got[35];
    gen_f32(12345, "b1", b1, 7);
    gen_f32(12345, "b2", b2, 7);
    gen_f32(12345, "b3", b3, 7);
    for (int j = 0; j < 7; j++)
        cr_assert(b1[j] >= -1 && b1[j] < 1, "generated values lie in [-1, 1): %g", b1[j]);
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 7; j++)
            want[i * 7 + j] = ((a[i * 7 + j] + b1[j]) + c_[i * 7 + j]) * b2[j] + b3[j];
    ic_tensor y;
    ic_safetensors *st = open_out(c, out, "y", 5, 7, &y);
    memcpy(got, y.data, sizeof got);
    assert_close_f32(got, want, 35, "y with generated b1, b2, b3");
    ic_safetensors_close(st);
    ict_rmtree(dir);
    ic_ctx_destroy(c);
}

Test(cli, integer_inputs_respect_range)
{
    ic_ctx *c = ict_ctx();
    const char *dir = ict_tmpdir();
    char graph[4096], out[4096], args[9000];
    snprintf(graph, sizeof graph, "%s", ict_path(dir, "ids.json"));
    snprintf(out, sizeof out, "%s", ict_path(dir, "out.safetensors"));
    write_text(graph,
               "{\"ic_graph\": 1, \"name\": \"ids\",\n"
               " \"inputs\": [{\"name\": \"ids\", \"dtype\": \"i64\", \"shape\": [1000], \"range\": [-5, 3]},\n"
               "            {\"name\": \"k\", \"dtype\": \"i32\", \"shape\": [1000]},\n"
               "            {\"name\": \"m\", \"dtype\": \"bool\", \"shape\": [1000]}],\n"
               " \"nodes\": [{\"name\": \"y\", \"op\": \"add\", \"inputs\": [\"ids\", 0]},\n"
               "           {\"name\": \"z\", \"op\": \"add\", \"inputs\": [\"k\", 0]},\n"
               "           {\"name\": \"w\", \"op\": \"logical_not\", \"inputs\": [\"m\"]}],\n"
               " \"outputs\": [\"y\", \"z\", \"w\"]}\n");
    snprintf(args, sizeof args, "'%s' --save-outputs '%s' --seed 3", graph, out);
    run_result r = run_tool(dir, "ic-run", args);
    assert_ok(r, "integer inputs");
    result_free(&r);
    ic_safetensors *st = NULL;
    cr_assert_eq(ic_safetensors_open(c, out, &st), IC_OK, "%s", ic_last_error(c));
    ic_tensor y, z, w;
    cr_assert_eq(ic_safetensors_get(st, "y", &y), IC_OK, "%s", ic_last_error(c));
    cr_assert_eq(ic_safetensors_get(st, "z", &z), IC_OK, "%s", ic_last_error(c));
    cr_assert_eq(ic_safetensors_get(st, "w", &w), IC_OK, "%s", ic_last_error(c));
    cr_assert(y.dtype == IC_I64 && z.dtype == IC_I32 && w.dtype == IC_BOOL, "dtypes %s %s %s",
              ic_dtype_name(y.dtype), ic_dtype_name(z.dtype), ic_dtype_name(w.dtype));
    bool seen_lo = false, seen_hi = false, seen_t = false, seen_f = false;
    for (int i = 0; i < 1000; i++) {
        int64_t v = ict_get_i(&y, i), k = ict_get_i(&z, i), m = ict_get_i(&w, i);
        cr_assert(v >= -5 && v < 3, "ids[%d] = %lld outside range [-5, 3)", i, (long long)v);
        cr_assert(k >= 0 && k < 10, "k[%d] = %lld outside the default [0, 10)", i, (long long)k);
        cr_assert(m == 0 || m == 1, "bool %lld", (long long)m);
        seen_lo |= v == -5, seen_hi |= v == 2, seen_t |= m == 1, seen_f |= m == 0;
    }
    cr_assert(seen_lo && seen_hi && seen_t && seen_f, "1000 draws should cover both ends");
    /* the documented formula: lo + x mod (hi - lo) */
    uint64_t s = 3 ^ fnv("ids");
    for (int i = 0; i < 4; i++) {
        int64_t want = -5 + (int64_t)(sm64(&s) % 8);
        cr_assert_eq(ict_get_i(&y, i), want, "ids[%d]: got %lld, want %lld", i,
                     (long long)ict_get_i(&y, i), (long long)want);
    }
    ic_safetensors_close(st);
    ict_rmtree(dir);
    ic_ctx_destroy(c);
}

Test(cli, seed_is_deterministic)
{
    const char *dir = ict_tmpdir();
    char graph[4096], o1[4096], o2[4096], o3[4096], args[16384];
    snprintf(graph, sizeof graph, "%s", ict_path(dir, "g.json"));
    snprintf(o1, sizeof o1, "%s", ict_path(dir, "o1.safetensors"));
    snprintf(o2, sizeof o2, "%s", ict_path(dir, "o2.safetensors"));
    snprintf(o3, sizeof o3, "%s", ict_path(dir, "o3.safetensors"));
    write_text(graph, small_seed);
    const char *outs[] = { o1, o2, o3 };
    const char *seeds[] = { "--seed 7", "--seed=7", "--seed 8" };
    for (int i = 0; i < 3; i++) {
        snprintf(args, sizeof args, "'%s' %s --save-outputs '%s'", graph, seeds[i], outs[i]);
        run_result r = run_tool(dir, "ic-run", args);
        assert_ok(r, seeds[i]);
        result_free(&r);
    }
    cr_assert(files_equal(o1, o2), "the same seed must give the same outputs");
    cr_assert(!files_equal(o1, o3), "a different seed must give different outputs");
    ict_rmtree(dir);
}

/* ---- symbols ---- */

Test(cli, bind_symbolic_graph)
{
    ic_ctx *c = ict_ctx();
    const char *dir = ict_tmpdir();
    char graph[4096], in[4096], out[4096], args[16384];
    snprintf(graph, sizeof graph, "%s", ict_path(dir, "sym.json"));
    snprintf(in, sizeof in, "%s", ict_path(dir, "x.safetensors"));
    snprintf(out, sizeof out, "%s", ict_path(dir, "out.safetensors"));
    write_text(graph, sym_graph);

    /* --bind sizes the generated input */
    snprintf(args, sizeof args, "'%s' --bind B=4 --save-outputs '%s'", graph, out);
    run_result r = run_tool(dir, "ic-run", args);
    assert_ok(r, "--bind B=4");
    cr_assert(strstr(r.out, "B=4"), "summary should show B=4:\n%s", r.out);
    result_free(&r);
    ic_tensor y;
    ic_safetensors *st = open_out(c, out, "y", 4, 3, &y);
    ic_safetensors_close(st);

    /* a supplied tensor binds B by itself */
    float x[15];
    for (int i = 0; i < 15; i++)
        x[i] = (float)i - 7.0f;
    const char *names[] = { "x" };
    float *data[] = { x };
    const int64_t shapes[][2] = { { 5, 3 } };
    save_f32(c, in, 1, names, data, shapes);
    snprintf(args, sizeof args, "'%s' --inputs '%s' --save-outputs '%s'", graph, in, out);
    r = run_tool(dir, "ic-run", args);
    assert_ok(r, "B from --inputs");
    result_free(&r);
    st = open_out(c, out, "y", 5, 3, &y);
    float want[15], got[15];
    for (int i = 0; i < 15; i++)
        want[i] = x[i] * 2.0f;
    memcpy(got, y.data, sizeof got);
    assert_close_f32(got, want, 15, "y = x * 2");
    ic_safetensors_close(st);

    /* --bind that contradicts the supplied tensor */
    snprintf(args, sizeof args, "'%s' --inputs '%s' --bind B=4", graph, in);
    r = run_tool(dir, "ic-run", args);
    assert_fails(r, "ic-run", "conflicting B", "'B'", "5", "4");
    result_free(&r);
    ict_rmtree(dir);
    ic_ctx_destroy(c);
}

Test(cli, missing_bind_names_the_symbol)
{
    const char *dir = ict_tmpdir();
    char graph[4096], args[8192];
    snprintf(graph, sizeof graph, "%s", ict_path(dir, "sym.json"));
    write_text(graph, sym_graph);
    snprintf(args, sizeof args, "'%s'", graph);
    run_result r = run_tool(dir, "ic-run", args);
    assert_fails(r, "ic-run", "unbound B", "'B'", "--bind B=");
    result_free(&r);
    snprintf(args, sizeof args, "'%s' --bind B=2", src("benchmarks/graphs/attention.json"));
    r = run_tool(dir, "ic-run", args);
    assert_ok(r, "attention --bind B=2");
    result_free(&r);
    ict_rmtree(dir);
}

Test(cli, inputs_file_checked_against_the_graph)
{
    ic_ctx *c = ict_ctx();
    const char *dir = ict_tmpdir();
    char graph[4096], in[4096], args[9000];
    snprintf(graph, sizeof graph, "%s", ict_path(dir, "small_seed.json"));
    snprintf(in, sizeof in, "%s", ict_path(dir, "in.safetensors"));
    write_text(graph, small_seed);
    float buf[64] = { 0 };
    const int64_t ok_shape[][2] = { { 5, 7 } }, bad_shape[][2] = { { 5, 8 } };
    float *data[] = { buf };

    const char *extra[] = { "zeta" }; /* not an argument of the graph */
    save_f32(c, in, 1, extra, data, ok_shape);
    snprintf(args, sizeof args, "'%s' --inputs '%s'", graph, in);
    run_result r = run_tool(dir, "ic-run", args);
    assert_fails(r, "ic-run", "extra tensor", "'zeta'", "in.safetensors");
    result_free(&r);

    const char *a[] = { "a" };
    save_f32(c, in, 1, a, data, bad_shape);
    r = run_tool(dir, "ic-run", args);
    assert_fails(r, "ic-run", "wrong shape", "'a'", "[5, 8]", "[5, 7]");
    result_free(&r);

    ic_tensor t;
    int64_t sh[2] = { 5, 7 };
    double dbuf[35] = { 0 };
    ic_tensor_init(&t, IC_F64, 2, sh, dbuf);
    cr_assert_eq(ic_safetensors_save(c, in, 1, a, &t), IC_OK, "%s", ic_last_error(c));
    r = run_tool(dir, "ic-run", args);
    assert_fails(r, "ic-run", "wrong dtype", "'a'", "f64", "f32");
    result_free(&r);
    ict_rmtree(dir);
    ic_ctx_destroy(c);
}

/* ---- never write over an input ---- */

Test(cli, refuses_to_overwrite_inputs)
{
    ic_ctx *c = ict_ctx();
    const char *dir = ict_tmpdir();
    char graph[4096], in[4096], args[16384], mlp[4096], w[4096];
    snprintf(graph, sizeof graph, "%s", ict_path(dir, "small_seed.json"));
    snprintf(in, sizeof in, "%s", ict_path(dir, "in.safetensors"));
    write_text(graph, small_seed);
    float buf[35] = { 1 };
    const char *a[] = { "a" };
    float *data[] = { buf };
    const int64_t sh[][2] = { { 5, 7 } };
    save_f32(c, in, 1, a, data, sh);
    size_t n_in, n_g;
    void *in_before = ict_read_file(in, &n_in), *g_before = ict_read_file(graph, &n_g);

    snprintf(args, sizeof args, "'%s' --inputs '%s' --save-outputs '%s'", graph, in, in);
    run_result r = run_tool(dir, "ic-run", args);
    assert_fails(r, "ic-run", "output = inputs", "in.safetensors");
    result_free(&r);
    /* the same file under another name */
    snprintf(args, sizeof args, "'%s' --inputs '%s' --save-outputs '%s/./in.safetensors'", graph, in, dir);
    r = run_tool(dir, "ic-run", args);
    assert_fails(r, "ic-run", "output = inputs (other spelling)", "in.safetensors");
    result_free(&r);
    snprintf(args, sizeof args, "'%s' --save-outputs '%s'", graph, graph);
    r = run_tool(dir, "ic-run", args);
    assert_fails(r, "ic-run", "output = graph", "small_seed.json");
    result_free(&r);

    size_t n;
    void *in_after = ict_read_file(in, &n);
    cr_assert(in_after && n == n_in && memcmp(in_before, in_after, n) == 0, "the inputs file changed");
    free(in_after);
    void *g_after = ict_read_file(graph, &n);
    cr_assert(g_after && n == n_g && memcmp(g_before, g_after, n) == 0, "the graph file changed");
    free(g_after);

    /* the weights of a param: copy tiny_mlp into dir, so the repository is never at risk */
    snprintf(mlp, sizeof mlp, "%s", ict_path(dir, "tiny_mlp.json"));
    snprintf(w, sizeof w, "%s", ict_path(dir, "tiny_mlp.safetensors"));
    size_t nm, nw;
    void *dm = ict_read_file(src("benchmarks/graphs/tiny_mlp.json"), &nm);
    void *dw = ict_read_file(src("benchmarks/graphs/tiny_mlp.safetensors"), &nw);
    cr_assert(dm && dw, "cannot read the bundled tiny_mlp");
    ict_write_file(mlp, dm, nm);
    ict_write_file(w, dw, nw);
    snprintf(args, sizeof args, "'%s' --save-outputs '%s'", mlp, w);
    r = run_tool(dir, "ic-run", args);
    assert_fails(r, "ic-run", "output = weights", "tiny_mlp.safetensors", "w1");
    result_free(&r);
    cr_assert(files_equal(w, src("benchmarks/graphs/tiny_mlp.safetensors")), "the weights changed");
    free(dm);
    free(dw);
    free(in_before);
    free(g_before);
    ict_rmtree(dir);
    ic_ctx_destroy(c);
}

/* ---- the bundled weights ---- */

/* tiny_mlp: weights from its safetensors file, x supplied; y = relu(x W1^T + b1) W2^T + b2. */
Test(cli, tiny_mlp_uses_its_weights_file)
{
    ic_ctx *c = ict_ctx();
    const char *dir = ict_tmpdir();
    char in[4096], out[4096], args[16384];
    snprintf(in, sizeof in, "%s", ict_path(dir, "x.safetensors"));
    snprintf(out, sizeof out, "%s", ict_path(dir, "y.safetensors"));
    float x[32];
    for (int i = 0; i < 32; i++)
        x[i] = (float)((i * 7) % 11) * 0.2f - 1.0f;
    const char *names[] = { "x" };
    float *data[] = { x };
    const int64_t sh[][2] = { { 4, 8 } };
    save_f32(c, in, 1, names, data, sh);
    snprintf(args, sizeof args, "'%s' --inputs '%s' --save-outputs '%s'",
             src("benchmarks/graphs/tiny_mlp.json"), in, out);
    run_result r = run_tool(dir, "ic-run", args);
    assert_ok(r, "tiny_mlp");
    result_free(&r);

    /* the weights, read as raw little-endian f32 at the header's offsets (fixed layout) */
    size_t n;
    unsigned char *f = ict_read_file(src("benchmarks/graphs/tiny_mlp.safetensors"), &n);
    cr_assert(f && n == 1128, "tiny_mlp.safetensors: %zu bytes, want 1128", n);
    uint64_t hl = 0;
    for (int b = 0; b < 8; b++)
        hl |= (uint64_t)f[b] << (8 * b);
    const float *wts = (const float *)(void *)(f + 8 + hl);
    float w1[128], b1[16], w2[64], b2[4];
    memcpy(w1, wts, sizeof w1);
    memcpy(b1, wts + 128, sizeof b1);
    memcpy(w2, wts + 144, sizeof w2);
    memcpy(b2, wts + 208, sizeof b2);
    float want[16];
    for (int i = 0; i < 4; i++)
        for (int o = 0; o < 4; o++) {
            double acc = b2[o];
            for (int h = 0; h < 16; h++) {
                double t = b1[h];
                for (int k = 0; k < 8; k++)
                    t += (double)x[i * 8 + k] * w1[h * 8 + k];
                acc += (t > 0 ? t : 0) * w2[o * 16 + h];
            }
            want[i * 4 + o] = (float)acc;
        }
    free(f);
    ic_tensor y;
    ic_safetensors *st = open_out(c, out, "y", 4, 4, &y);
    float got[16];
    memcpy(got, y.data, sizeof got);
    assert_close_f32(got, want, 16, "tiny_mlp y");
    ic_safetensors_close(st);
    ict_rmtree(dir);
    ic_ctx_destroy(c);
}

Test(cli, tiny_mlp_weights_are_reproducible)
{
    const char *dir = ict_tmpdir();
    char cmd[16384], gen[4096], w[4096];
    snprintf(gen, sizeof gen, "%s", ict_path(dir, "gen"));
    snprintf(w, sizeof w, "%s", ict_path(dir, "w.safetensors"));
    snprintf(cmd, sizeof cmd, "cc -std=c11 -o '%s' '%s' && '%s' '%s'", gen,
             src("benchmarks/graphs/gen_tiny_mlp.c"), gen, w);
    int st = system(cmd);
    cr_assert(st == 0, "building or running gen_tiny_mlp failed: %s", cmd);
    cr_assert(files_equal(w, src("benchmarks/graphs/tiny_mlp.safetensors")),
              "benchmarks/graphs/tiny_mlp.safetensors differs from what gen_tiny_mlp.c writes");
    ict_rmtree(dir);
}

/* ---- the README's C example ---- */

#define main readme_example_main
#include "readme_example.inc"
#undef main

Test(cli, readme_example_is_the_readme_text)
{
    char *readme = read_text(src("README.md"));
    char *inc = read_text(src("unittests/Tools/readme_example.inc"));
    cr_assert(readme && inc, "cannot read README.md or readme_example.inc");
    char *start = strstr(readme, "```c\n");
    cr_assert(start, "README.md has no ```c block");
    start += 5;
    char *end = strstr(start, "```");
    cr_assert(end, "README.md: unterminated ```c block");
    *end = 0;
    cr_assert_str_eq(start, inc, "README's C example and unittests/Tools/readme_example.inc differ");
    free(readme);
    free(inc);
}

Test(cli, readme_example_runs)
{
    const char *dir = ict_tmpdir();
    char path[4096];
    snprintf(path, sizeof path, "%s", ict_path(dir, "stdout"));
    fflush(stdout);
    int saved = dup(1);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    cr_assert(saved >= 0 && fd >= 0, "cannot redirect stdout");
    dup2(fd, 1);
    close(fd);
    int rc = readme_example_main();
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    char *out = read_text(path);
    cr_assert_eq(rc, 0, "the README example returned %d", rc);
    cr_assert(out, "no output");
    cr_assert_str_eq(out, "2 4 6 8 \n", "the README example printed '%s'", out);
    free(out);
    ict_rmtree(dir);
}
