/* test_cli_compiled.c - the compiled backends through the tools, as a user runs them:
 * ic-run --backend compiled / unfused on the bundled graphs with --check, --json parsed with
 * jansson, outputs saved from each backend compared here with values computed in plain C,
 * the mismatch exit (2) through --expect with the spec's tolerances at their edges, and every
 * ic-dump stage (banner, non-empty text, one kernel for the seed pattern). No timings are
 * asserted: only that they are reported and consistent. */
#define _GNU_SOURCE
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "testutil.h"
#include "cli_run.h"

/* Few timed runs: the tests check behaviour, not speed. */
#define FAST "--iters 2 --warmup 1"

/* ((a + b1) + c) * b2 + b3 with a, c [5, 7] and b1, b2, b3 [1, 7]. */
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

/* ---- helpers ---- */

static void save_tensors(ic_ctx *c, const char *path, int n, const char *const *names,
                         const ic_tensor *t)
{
    cr_assert_eq(ic_safetensors_save(c, path, n, names, t), IC_OK, "saving %s: %s", path,
                 ic_last_error(c));
}

/* Loads tensor `name` of file path into a fresh copy the caller frees with ic_tensor_free. */
static ic_tensor load_copy(ic_ctx *c, const char *path, const char *name)
{
    ic_safetensors *st = NULL;
    ic_tensor t, out;
    cr_assert_eq(ic_safetensors_open(c, path, &st), IC_OK, "opening %s: %s", path, ic_last_error(c));
    cr_assert_eq(ic_safetensors_get(st, name, &t), IC_OK, "%s has no '%s': %s", path, name,
                 ic_last_error(c));
    ic_tensor_init(&out, t.dtype, t.rank, t.shape, NULL);
    cr_assert_eq(ic_tensor_alloc(c, &out), IC_OK, "%s", ic_last_error(c));
    memcpy(out.data, t.data, (size_t)ic_tensor_numel(&t) * ic_dtype_size(t.dtype));
    ic_safetensors_close(st);
    return out;
}

/* The inputs of small_seed, chosen here, and y computed from them in plain C. */
typedef struct { float a[35], b1[7], c[35], b2[7], b3[7], y[35]; } seed_data;

static void seed_inputs(seed_data *d)
{
    for (int i = 0; i < 35; i++) {
        d->a[i] = (float)i * 0.25f - 3.0f;
        d->c[i] = (float)(i % 6) - 2.5f;
    }
    for (int j = 0; j < 7; j++) {
        d->b1[j] = (float)j;
        d->b2[j] = 0.5f * (float)(j - 3);
        d->b3[j] = -(float)j * 0.125f;
    }
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 7; j++)
            d->y[i * 7 + j] = ((d->a[i * 7 + j] + d->b1[j]) + d->c[i * 7 + j]) * d->b2[j] + d->b3[j];
}

static void save_seed_inputs(ic_ctx *c, const char *path, seed_data *d)
{
    const char *names[] = { "a", "b1", "c", "b2", "b3" };
    float *data[] = { d->a, d->b1, d->c, d->b2, d->b3 };
    int64_t rows[] = { 5, 1, 5, 1, 1 };
    ic_tensor t[5];
    for (int i = 0; i < 5; i++)
        ic_tensor_init(&t[i], IC_F32, 2, (int64_t[]){ rows[i], 7 }, data[i]);
    save_tensors(c, path, 5, names, t);
}

/* Lines of text that start with prefix. */
static int count_lines_starting(const char *text, const char *prefix)
{
    int n = 0;
    size_t k = strlen(prefix);
    for (const char *p = text; p && *p;) {
        n += strncmp(p, prefix, k) == 0;
        p = strchr(p, '\n');
        p = p ? p + 1 : NULL;
    }
    return n;
}

static json_t *parse_json(const char *text)
{
    json_error_t err;
    json_t *j = json_loads(text, 0, &err);
    cr_assert(j, "--json output is not JSON (line %d: %s):\n%s", err.line, err.text, text);
    cr_assert(json_is_object(j), "--json output is not an object:\n%s", text);
    return j;
}

/* Field `key` of o, asserted to exist with the given jansson type. */
static json_t *field(json_t *o, const char *key, json_type type, const char *what)
{
    json_t *v = json_object_get(o, key);
    cr_assert(v, "%s: no field '%s'", what, key);
    cr_assert_eq(json_typeof(v), type, "%s: field '%s' has JSON type %d, want %d", what, key,
                 (int)json_typeof(v), (int)type);
    return v;
}

/* ---- ic-run: the compiled backends on the bundled graphs ---- */

static const struct { const char *graph, *args; } bundled[] = {
    { "benchmarks/graphs/seed_pattern.json", "" },
    { "benchmarks/graphs/tiny_mlp.json", "" },
    { "benchmarks/graphs/attention.json", "--bind B=1" },
    { "benchmarks/graphs/bert_ffn.json", "--bind B=1" },
};

/* The default: fused and unfused, both checked against the reference executor. */
Test(cli_compiled, bundled_graphs_default_backend_checks)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", ict_tmpdir()); /* ict_path reuses its slots */
    for (size_t i = 0; i < sizeof bundled / sizeof bundled[0]; i++) {
        char args[8192];
        snprintf(args, sizeof args, "'%s' %s --check " FAST, src(bundled[i].graph), bundled[i].args);
        run_result r = run_tool(dir, "ic-run", args);
        assert_ok(r, bundled[i].graph);
        cr_assert_str_empty(r.err, "%s: nothing on stderr expected, got: %s", bundled[i].graph, r.err);
        cr_assert(count_lines_starting(r.out, "unfused ") == 1 &&
                      count_lines_starting(r.out, "compiled ") == 1,
                  "%s: the table should have an unfused and a compiled row:\n%s", bundled[i].graph, r.out);
        cr_assert(strstr(r.out, "speedup") && strstr(r.out, "GB/s") && strstr(r.out, "compile ms") &&
                      strstr(r.out, "median ms"),
                  "%s: the table should show compile time, median, GB/s and speedup:\n%s",
                  bundled[i].graph, r.out);
        cr_assert(strstr(r.out, "kernels (compiled, ") && strstr(r.out, "kernels (unfused, "),
                  "%s: the kernels of each backend should be named:\n%s", bundled[i].graph, r.out);
        cr_assert(strstr(r.out, "every output matches"), "%s: check line missing:\n%s",
                  bundled[i].graph, r.out);
        result_free(&r);
    }
    ict_rmtree(dir);
}

Test(cli_compiled, bundled_graphs_each_backend_checks)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", ict_tmpdir()); /* ict_path reuses its slots */
    const char *backends[] = { "unfused", "compiled", "ref" };
    for (size_t i = 0; i < sizeof bundled / sizeof bundled[0]; i++)
        for (int b = 0; b < 3; b++) {
            char args[8192], what[8192];
            /* --no-compare: the named backend alone (ignored by unfused and ref) */
            snprintf(args, sizeof args, "'%s' %s --backend %s --no-compare --check --iters 1 --warmup 0",
                     src(bundled[i].graph), bundled[i].args, backends[b]);
            snprintf(what, sizeof what, "%s --backend %s", bundled[i].graph, backends[b]);
            run_result r = run_tool(dir, "ic-run", args);
            assert_ok(r, what);
            char row[64];
            snprintf(row, sizeof row, "%s ", backends[b]);
            cr_assert(count_lines_starting(r.out, row) == 1, "%s: want one '%s' row:\n%s", what,
                      backends[b], r.out);
            cr_assert(b == 0 || count_lines_starting(r.out, "unfused ") == 0,
                      "%s: --no-compare should leave out the unfused row:\n%s", what, r.out);
            result_free(&r);
        }
    ict_rmtree(dir);
}

/* ---- outputs saved from each backend, compared here ---- */

Test(cli_compiled, saved_outputs_match_plain_c_and_a_wrong_value_is_caught)
{
    ic_ctx *c = ict_ctx();
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", ict_tmpdir()); /* ict_path reuses its slots */
    char graph[4096], in[4096], args[16384];
    snprintf(graph, sizeof graph, "%s", ict_path(dir, "small_seed.json"));
    snprintf(in, sizeof in, "%s", ict_path(dir, "in.safetensors"));
    write_text(graph, small_seed);
    seed_data d;
    seed_inputs(&d);
    save_seed_inputs(c, in, &d);
    ic_tensor want;
    ic_tensor_init(&want, IC_F32, 2, (int64_t[]){ 5, 7 }, d.y);

    const char *backends[] = { "ref", "unfused", "compiled" };
    ic_tensor got[3];
    for (int b = 0; b < 3; b++) {
        char out[4096], file[64];
        snprintf(file, sizeof file, "%s.safetensors", backends[b]);
        snprintf(out, sizeof out, "%s", ict_path(dir, file));
        snprintf(args, sizeof args, "'%s' --inputs '%s' --backend %s --no-compare " FAST
                 " --save-outputs '%s'", graph, in, backends[b], out);
        run_result r = run_tool(dir, "ic-run", args);
        assert_ok(r, backends[b]);
        result_free(&r);
        got[b] = load_copy(c, out, "y");
        char msg[1024];
        cr_assert(ict_allclose(&got[b], &want, msg, sizeof msg), "%s vs plain C: %s", backends[b], msg);
    }
    char msg[1024];
    cr_assert(ict_allclose(&got[2], &got[0], msg, sizeof msg), "compiled vs ref: %s", msg);

    /* The comparison is able to fail: one element off by 1e-3 (f32 allows ~1e-5 + 1e-4 |y|). */
    float *y = got[2].data;
    y[17] += 1e-3f + 2e-4f * fabsf(y[17]);
    cr_assert(!ict_allclose(&got[2], &want, msg, sizeof msg), "a wrong element must be detected");
    cr_assert(strstr(msg, "[2,3]") || strstr(msg, "[2, 3]") || strstr(msg, "17"),
              "the message should locate element 17 ([2, 3]): %s", msg);
    /* ... and so does ic-run: the corrupted values as --expect exit 2 naming that element. */
    char bad[4096];
    snprintf(bad, sizeof bad, "%s", ict_path(dir, "bad.safetensors"));
    const char *yname[] = { "y" };
    save_tensors(c, bad, 1, yname, &got[2]);
    snprintf(args, sizeof args, "'%s' --inputs '%s' --no-compare " FAST " --expect '%s'", graph, in, bad);
    run_result r = run_tool(dir, "ic-run", args);
    assert_mismatch(r, "compiled vs corrupted expectation", "compiled", "'y'", "worst at [2, 3]",
                    "(flat 17)", "got ", "expected ", "1 of 35");
    cr_assert(strstr(r.out, "MISMATCH"), "the table should say MISMATCH:\n%s", r.out);
    result_free(&r);
    /* the right values pass --expect */
    char good[4096];
    snprintf(good, sizeof good, "%s", ict_path(dir, "good.safetensors"));
    save_tensors(c, good, 1, yname, &want);
    snprintf(args, sizeof args, "'%s' --inputs '%s' " FAST " --check --expect '%s'", graph, in, good);
    r = run_tool(dir, "ic-run", args);
    assert_ok(r, "--expect with the plain-C values");
    result_free(&r);
    for (int b = 0; b < 3; b++)
        ic_tensor_free(c, &got[b]);
    ict_rmtree(dir);
    ic_ctx_destroy(c);
}

/* ---- --expect: the spec's tolerances at their edges, per dtype (backend ref: the comparison
 * is the tool's, whatever computed the values) ---- */

/* y = x + 0 over one dtype; x [2, 3] is supplied. */
static void identity_graph(const char *path, const char *dtype)
{
    char text[1024];
    snprintf(text, sizeof text,
             "{\"ic_graph\": 1, \"name\": \"ident\",\n"
             " \"inputs\": [{\"name\": \"x\", \"dtype\": \"%s\", \"shape\": [2, 3]}],\n"
             " \"nodes\": [{\"name\": \"y\", \"op\": \"add\", \"inputs\": [\"x\", 0]}],\n"
             " \"outputs\": [\"y\"]}\n", dtype);
    write_text(path, text);
}

/* Runs ident with x and --expect y (raw element bytes of dtype dt); returns the result. */
static run_result run_expect(ic_ctx *c, const char *dir, ic_dtype dt, const void *x,
                             const void *y, const char *backend)
{
    char graph[4096], in[4096], ex[4096], args[16384];
    snprintf(graph, sizeof graph, "%s", ict_path(dir, "ident.json"));
    snprintf(in, sizeof in, "%s", ict_path(dir, "x.safetensors"));
    snprintf(ex, sizeof ex, "%s", ict_path(dir, "y.safetensors"));
    identity_graph(graph, ic_dtype_name(dt));
    ic_tensor tx, ty;
    int64_t sh[2] = { 2, 3 };
    ic_tensor_init(&tx, dt, 2, sh, (void *)x);
    ic_tensor_init(&ty, dt, 2, sh, (void *)y);
    const char *nx[] = { "x" }, *ny[] = { "y" };
    save_tensors(c, in, 1, nx, &tx);
    save_tensors(c, ex, 1, ny, &ty);
    snprintf(args, sizeof args, "'%s' --inputs '%s' --expect '%s' --backend %s --no-compare " FAST,
             graph, in, ex, backend);
    return run_tool(dir, "ic-run", args);
}

Test(cli_compiled, expect_tolerances_per_dtype)
{
    ic_ctx *c = ict_ctx();
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", ict_tmpdir()); /* ict_path reuses its slots */
    /* f32: |d| <= 1e-5 + 1e-4 |want| around 2 is ~2.1e-4 */
    float xf[6] = { 1, -1, 0.5f, 2, 0, 3 }, yf[6];
    memcpy(yf, xf, sizeof yf);
    yf[3] = 2.00015f;
    run_result r = run_expect(c, dir, IC_F32, xf, yf, "ref");
    assert_ok(r, "f32 within 1e-4 relative");
    result_free(&r);
    yf[3] = 2.0003f;
    r = run_expect(c, dir, IC_F32, xf, yf, "ref");
    assert_mismatch(r, "f32 beyond", "'y'", "worst at [1, 0]", "got 2,", "expected 2.000299");
    result_free(&r);

    /* f64: 1e-7 + 1e-7 |want| around 2 is 3e-7 */
    double xd[6] = { 1, -1, 0.5, 2, 0, 3 }, yd[6];
    memcpy(yd, xd, sizeof yd);
    yd[3] = 2 + 2e-7;
    r = run_expect(c, dir, IC_F64, xd, yd, "ref");
    assert_ok(r, "f64 within");
    result_free(&r);
    yd[3] = 2 + 5e-7;
    r = run_expect(c, dir, IC_F64, xd, yd, "ref");
    assert_mismatch(r, "f64 beyond", "'y'", "worst at [1, 0]", "f64");
    result_free(&r);

    /* f16 around 2 (0x4000): one ulp 2^-9 ~ 1.95e-3 <= 1e-3 + 1e-3 * 2.002 passes, two fail */
    uint16_t xh[6] = { 0x3c00, 0xbc00, 0x3800, 0x4000, 0, 0x4200 }, yh[6];
    memcpy(yh, xh, sizeof yh);
    yh[3] = 0x4001;
    r = run_expect(c, dir, IC_F16, xh, yh, "ref");
    assert_ok(r, "f16 one ulp");
    result_free(&r);
    yh[3] = 0x4002;
    r = run_expect(c, dir, IC_F16, xh, yh, "ref");
    assert_mismatch(r, "f16 two ulps", "'y'", "worst at [1, 0]", "expected 2.0039");
    result_free(&r);

    /* bf16 around 2 (0x4000): one ulp 2^-6 passes 1e-2 + 1.6e-2 |want|; three ulps fail */
    /* bf16 bits are the top halves of the f32 bits: 1, -1, 0.5, 2, 0, 3 */
    uint16_t xb[6] = { 0x3f80, 0xbf80, 0x3f00, 0x4000, 0, 0x4040 }, yb[6];
    memcpy(yb, xb, sizeof yb);
    yb[3] = 0x4001;
    r = run_expect(c, dir, IC_BF16, xb, yb, "ref");
    assert_ok(r, "bf16 one ulp");
    result_free(&r);
    yb[3] = 0x4003;
    r = run_expect(c, dir, IC_BF16, xb, yb, "ref");
    assert_mismatch(r, "bf16 three ulps", "'y'", "worst at [1, 0]");
    result_free(&r);
    ict_rmtree(dir);
    ic_ctx_destroy(c);
}

Test(cli_compiled, expect_integers_exact_nan_equal_worst_is_largest)
{
    ic_ctx *c = ict_ctx();
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", ict_tmpdir()); /* ict_path reuses its slots */
    /* i64 above 2^53: a comparison through double would call these equal */
    int64_t big = (int64_t)1 << 60;
    int64_t xi[6] = { big + 1, 2, 3, -4, 5, 6 }, yi[6];
    memcpy(yi, xi, sizeof yi);
    run_result r = run_expect(c, dir, IC_I64, xi, yi, "ref");
    assert_ok(r, "i64 equal");
    result_free(&r);
    yi[0] = big;
    r = run_expect(c, dir, IC_I64, xi, yi, "ref");
    assert_mismatch(r, "i64 off by one at 2^60", "'y'", "worst at [0, 0]", "got 1152921504606846977",
                    "expected 1152921504606846976");
    result_free(&r);

    /* NaN equals NaN; a NaN where a number is expected does not */
    float xf[6] = { NAN, 1, 2, 3, 4, 5 }, yf[6];
    memcpy(yf, xf, sizeof yf);
    r = run_expect(c, dir, IC_F32, xf, yf, "ref");
    assert_ok(r, "NaN == NaN");
    result_free(&r);
    yf[0] = 0;
    r = run_expect(c, dir, IC_F32, xf, yf, "ref");
    assert_mismatch(r, "NaN vs 0", "worst at [0, 0]", "got nan", "expected 0");
    result_free(&r);

    /* two wrong elements: the worst is the one furthest beyond the tolerance */
    float ok[6] = { 1, 1, 1, 1, 1, 1 }, two[6] = { 1, 1.01f, 1, 1, 1.5f, 1 };
    r = run_expect(c, dir, IC_F32, ok, two, "ref");
    assert_mismatch(r, "two wrong", "2 of 6", "worst at [1, 1]", "expected 1.5");
    result_free(&r);
    ict_rmtree(dir);
    ic_ctx_destroy(c);
}

Test(cli_compiled, expect_file_must_hold_every_output)
{
    ic_ctx *c = ict_ctx();
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", ict_tmpdir()); /* ict_path reuses its slots */
    char graph[4096], ex[4096], args[16384];
    snprintf(graph, sizeof graph, "%s", ict_path(dir, "small_seed.json"));
    snprintf(ex, sizeof ex, "%s", ict_path(dir, "e.safetensors"));
    write_text(graph, small_seed);
    float z[35] = { 0 };
    ic_tensor t;
    ic_tensor_init(&t, IC_F32, 2, (int64_t[]){ 5, 7 }, z);
    const char *names[] = { "not_y" };
    save_tensors(c, ex, 1, names, &t);
    snprintf(args, sizeof args, "'%s' --expect '%s' --no-compare " FAST, graph, ex);
    run_result r = run_tool(dir, "ic-run", args);
    assert_fails(r, "ic-run", "no y in --expect", "e.safetensors", "'y'");
    result_free(&r);
    /* a wrong shape is a mismatch that says both shapes */
    ic_tensor_init(&t, IC_F32, 2, (int64_t[]){ 7, 5 }, z);
    const char *yn[] = { "y" };
    save_tensors(c, ex, 1, yn, &t);
    r = run_tool(dir, "ic-run", args);
    assert_mismatch(r, "wrong shape in --expect", "'y'", "[5, 7]", "[7, 5]");
    result_free(&r);
    ict_rmtree(dir);
    ic_ctx_destroy(c);
}

/* ---- --check on graphs beyond the bundled ones ---- */

Test(cli_compiled, check_symbolic_multi_output_and_integer_graphs)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", ict_tmpdir()); /* ict_path reuses its slots */
    static const struct { const char *name, *text, *args; } cases[] = {
        { "sym.json",
          "{\"ic_graph\": 1, \"name\": \"sym\",\n"
          " \"inputs\": [{\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [\"B\", 3]}],\n"
          " \"nodes\": [{\"name\": \"y\", \"op\": \"mul\", \"inputs\": [\"x\", 2]}],\n"
          " \"outputs\": [\"y\"]}\n",
          "--bind B=5" },
        { "two.json",
          "{\"ic_graph\": 1, \"name\": \"two\",\n"
          " \"inputs\": [{\"name\": \"a\", \"dtype\": \"f32\", \"shape\": [33, 17]},\n"
          "            {\"name\": \"b\", \"dtype\": \"f32\", \"shape\": [17]}],\n"
          " \"nodes\": [{\"name\": \"s\", \"op\": \"add\", \"inputs\": [\"a\", \"b\"]},\n"
          "           {\"name\": \"y\", \"op\": \"relu\", \"inputs\": [\"s\"]},\n"
          "           {\"name\": \"z\", \"op\": \"sum\", \"inputs\": [\"s\"], \"attrs\": {\"dims\": [1]}}],\n"
          " \"outputs\": [\"y\", \"z\", \"y\"]}\n",
          "" },
        { "ints.json",
          "{\"ic_graph\": 1, \"name\": \"ints\",\n"
          " \"inputs\": [{\"name\": \"i\", \"dtype\": \"i64\", \"shape\": [100], \"range\": [-50, 50]},\n"
          "            {\"name\": \"k\", \"dtype\": \"i32\", \"shape\": [100]},\n"
          "            {\"name\": \"m\", \"dtype\": \"bool\", \"shape\": [100]}],\n"
          " \"nodes\": [{\"name\": \"y\", \"op\": \"mul\", \"inputs\": [\"i\", 3]},\n"
          "           {\"name\": \"z\", \"op\": \"add\", \"inputs\": [\"k\", 7]},\n"
          "           {\"name\": \"w\", \"op\": \"logical_not\", \"inputs\": [\"m\"]}],\n"
          " \"outputs\": [\"y\", \"z\", \"w\"]}\n",
          "" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char graph[4096], args[8192];
        snprintf(graph, sizeof graph, "%s", ict_path(dir, cases[i].name));
        write_text(graph, cases[i].text);
        snprintf(args, sizeof args, "'%s' %s --check " FAST, graph, cases[i].args);
        run_result r = run_tool(dir, "ic-run", args);
        assert_ok(r, cases[i].name);
        cr_assert(strstr(r.out, "every output matches"), "%s:\n%s", cases[i].name, r.out);
        result_free(&r);
    }
    ict_rmtree(dir);
}

Test(cli_compiled, threads_option)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", ict_tmpdir()); /* ict_path reuses its slots */
    char args[8192];
    snprintf(args, sizeof args, "'%s' --threads 1 --check " FAST, src("benchmarks/graphs/seed_pattern.json"));
    run_result r = run_tool(dir, "ic-run", args);
    assert_ok(r, "--threads 1");
    result_free(&r);
    ict_rmtree(dir);
}

/* ---- --json ---- */

static void check_backend_json(json_t *bes, const char *name, bool compiled, int64_t bytes)
{
    json_t *b = field(bes, name, JSON_OBJECT, "backends");
    double med = json_number_value(field(b, "run_ms_median", JSON_REAL, name));
    double min = json_number_value(field(b, "run_ms_min", JSON_REAL, name));
    double gb = json_number_value(field(b, "gb_per_s", JSON_REAL, name));
    cr_assert(med > 0 && min > 0 && min <= med, "%s: run_ms min %g, median %g", name, min, med);
    /* GB/s is bytes in + out over the median, as the README says */
    double want = (double)bytes / (med * 1e6);
    cr_assert(fabs(gb - want) <= 1e-6 * want, "%s: gb_per_s %g, want %g from the bytes and median",
              name, gb, want);
    json_t *names = field(b, "kernel_names", JSON_ARRAY, name);
    if (!compiled) {
        cr_assert(json_is_null(json_object_get(b, "compile_ms")) &&
                      json_is_null(json_object_get(b, "kernels")),
                  "%s: compile_ms and kernels are null for the reference executor", name);
        cr_assert_eq(json_array_size(names), 0, "%s: no kernel names", name);
        return;
    }
    double cms = json_number_value(field(b, "compile_ms", JSON_REAL, name));
    cr_assert(cms > 0, "%s: compile_ms %g", name, cms);
    json_int_t nk = json_integer_value(field(b, "kernels", JSON_INTEGER, name));
    cr_assert(nk >= 1 && (size_t)nk == json_array_size(names), "%s: kernels %lld but %zu names",
              name, (long long)nk, json_array_size(names));
    for (size_t i = 0; i < json_array_size(names); i++) {
        const char *s = json_string_value(json_array_get(names, i));
        cr_assert(s && strncmp(s, "cpu_", 4) == 0, "%s: kernel name %zu is '%s'", name, i, s ? s : "(not a string)");
    }
    cr_assert_str_eq(json_string_value(field(b, "check", JSON_STRING, name)), "match",
                     "%s: check should be \"match\"", name);
}

Test(cli_compiled, json_report_has_the_fields)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", ict_tmpdir()); /* ict_path reuses its slots */
    char args[8192];
    snprintf(args, sizeof args, "'%s' --json --check --iters 3 --warmup 0",
             src("benchmarks/graphs/seed_pattern.json"));
    run_result r = run_tool(dir, "ic-run", args);
    assert_ok(r, "--json --check");
    cr_assert_str_empty(r.err, "stderr: %s", r.err);
    json_t *j = parse_json(r.out);
    cr_assert_str_eq(json_string_value(field(j, "graph", JSON_STRING, "top")), "seed_pattern", "graph");
    cr_assert_str_eq(json_string_value(field(j, "backend", JSON_STRING, "top")), "compiled", "backend");
    cr_assert_eq(json_integer_value(field(j, "iters", JSON_INTEGER, "top")), 3, "iters");
    /* a, c: 16384 x 512 f32; b1, b2, b3: 512 f32; y: 16384 x 512 f32 */
    int64_t in = (2 * 16384 * 512 + 3 * 512) * 4, out = 16384 * 512 * 4;
    cr_assert_eq(json_integer_value(field(j, "bytes_in", JSON_INTEGER, "top")), in, "bytes_in");
    cr_assert_eq(json_integer_value(field(j, "bytes_out", JSON_INTEGER, "top")), out, "bytes_out");
    json_t *bes = field(j, "backends", JSON_OBJECT, "top");
    check_backend_json(bes, "unfused", true, in + out);
    check_backend_json(bes, "compiled", true, in + out);
    /* unfused is one kernel per op: 4 */
    json_t *unf = json_object_get(bes, "unfused");
    cr_assert_eq(json_integer_value(json_object_get(unf, "kernels")), 4, "unfused kernels");
    double s = json_number_value(field(j, "speedup", JSON_REAL, "top"));
    double um = json_number_value(json_object_get(unf, "run_ms_median"));
    double cm = json_number_value(json_object_get(json_object_get(bes, "compiled"), "run_ms_median"));
    cr_assert(fabs(s - um / cm) <= 1e-6 * s, "speedup %g, want unfused/compiled median %g", s, um / cm);
    cr_assert(json_is_true(field(j, "check", JSON_TRUE, "top")), "check");
    json_t *outs = field(j, "outputs", JSON_ARRAY, "top");
    cr_assert_eq(json_array_size(outs), 1, "one output");
    json_t *o0 = json_array_get(outs, 0);
    cr_assert_str_eq(json_string_value(field(o0, "name", JSON_STRING, "output")), "y", "output name");
    cr_assert_str_eq(json_string_value(field(o0, "dtype", JSON_STRING, "output")), "f32", "dtype");
    json_t *sh = field(o0, "shape", JSON_ARRAY, "output");
    cr_assert(json_array_size(sh) == 2 && json_integer_value(json_array_get(sh, 0)) == 16384 &&
                  json_integer_value(json_array_get(sh, 1)) == 512,
              "output shape");
    json_decref(j);
    result_free(&r);
    ict_rmtree(dir);
}

Test(cli_compiled, json_for_ref_and_symbols)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", ict_tmpdir()); /* ict_path reuses its slots */
    char args[8192];
    snprintf(args, sizeof args, "'%s' --bind B=2 --backend ref --json --iters 2",
             src("benchmarks/graphs/attention.json"));
    run_result r = run_tool(dir, "ic-run", args);
    assert_ok(r, "ref --json");
    json_t *j = parse_json(r.out);
    json_t *syms = field(j, "symbols", JSON_OBJECT, "top");
    cr_assert_eq(json_integer_value(field(syms, "B", JSON_INTEGER, "symbols")), 2, "B");
    /* q, k, v: 2 x 12 x 128 x 64 f32 in; y the same size out */
    int64_t one = 2 * 12 * 128 * 64 * 4;
    cr_assert_eq(json_integer_value(field(j, "bytes_in", JSON_INTEGER, "top")), 3 * one, "bytes_in");
    json_t *bes = field(j, "backends", JSON_OBJECT, "top");
    cr_assert_eq(json_object_size(bes), 1, "only the ref backend ran");
    json_t *b = field(bes, "ref", JSON_OBJECT, "backends");
    cr_assert(json_is_null(json_object_get(b, "check")), "no check was asked");
    cr_assert(json_is_null(json_object_get(j, "speedup")) && json_is_null(json_object_get(j, "check")),
              "speedup and check are null");
    check_backend_json(bes, "ref", false, 4 * one);
    json_decref(j);
    result_free(&r);
    ict_rmtree(dir);
}

/* ---- environment: IC_COMPILE_DEBUG, IC_DEBUG, IC_NO_FUSION ---- */

Test(cli_compiled, compile_debug_writes_a_folder)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", ict_tmpdir()); /* ict_path reuses its slots */
    char graph[4096], args[8192];
    snprintf(graph, sizeof graph, "%s", ict_path(dir, "small_seed.json"));
    write_text(graph, small_seed);
    snprintf(args, sizeof args, "'%s' --no-compare --iters 1 --warmup 0", graph);
    run_result r = run_tool_env(dir, "IC_COMPILE_DEBUG=1", "ic-run", args);
    assert_ok(r, "IC_COMPILE_DEBUG=1");
    char *p = strstr(r.err, "ic_debug/");
    cr_assert(p, "the debug folder's path should be printed on stderr: %s", r.err);
    char rel[512], sub[4096], path[8192];
    size_t n = strcspn(p, " \n");
    snprintf(rel, sizeof rel, "%.*s", (int)(n < 500 ? n : 500), p);
    snprintf(sub, sizeof sub, "%s", ict_path(dir, rel));
    static const char *files[] = { "graph.txt", "ir_pre_fusion.txt", "ir_post_fusion.txt",
                                   "output_code.ll", "output_code.s" };
    static const char *stages[] = { "graph", "loops", "fused", "llvm-opt", "asm" };
    result_free(&r);
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", sub, files[i]);
        struct stat st;
        cr_assert(stat(path, &st) == 0 && st.st_size > 0, "%s should exist and not be empty", path);
        /* ic-dump runs the compile's pipeline, stopped after the stage: the same text */
        snprintf(args, sizeof args, "'%s' --stage %s", graph, stages[i]);
        r = run_tool(dir, "ic-dump", args);
        assert_ok(r, stages[i]);
        char *text = read_text(path);
        const char *body = strchr(r.out, '\n');
        cr_assert(text && body, "no text for %s", stages[i]);
        cr_assert_str_eq(body + 1, text, "ic-dump --stage %s differs from the compile's %s", stages[i], files[i]);
        free(text);
        result_free(&r);
    }
    ict_rmtree(dir);
}

Test(cli_compiled, debug_level_prints_library_messages)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", ict_tmpdir()); /* ict_path reuses its slots */
    char graph[4096], args[8192];
    snprintf(graph, sizeof graph, "%s", ict_path(dir, "small_seed.json"));
    write_text(graph, small_seed);
    snprintf(args, sizeof args, "'%s' --no-compare --iters 1 --warmup 0", graph);
    run_result r = run_tool_env(dir, "IC_DEBUG=", "ic-run", args);
    assert_ok(r, "IC_DEBUG unset");
    cr_assert_str_empty(r.err, "quiet without IC_DEBUG: %s", r.err);
    result_free(&r);
    r = run_tool_env(dir, "IC_DEBUG=1", "ic-run", args);
    assert_ok(r, "IC_DEBUG=1");
    cr_assert(strncmp(r.err, "ic-run: ", 8) == 0, "IC_DEBUG=1 prints the library's debug log: '%s'", r.err);
    result_free(&r);
    ict_rmtree(dir);
}

Test(cli_compiled, no_fusion_env_makes_compiled_unfused)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", ict_tmpdir()); /* ict_path reuses its slots */
    char args[8192];
    snprintf(args, sizeof args, "'%s' --json --iters 1 --warmup 0", src("benchmarks/graphs/seed_pattern.json"));
    run_result r = run_tool_env(dir, "IC_NO_FUSION=1", "ic-run", args);
    assert_ok(r, "IC_NO_FUSION=1");
    json_t *j = parse_json(r.out);
    json_t *cmp = json_object_get(field(j, "backends", JSON_OBJECT, "top"), "compiled");
    cr_assert_eq(json_integer_value(json_object_get(cmp, "kernels")), 4, "one kernel per op");
    json_decref(j);
    result_free(&r);
    snprintf(args, sizeof args, "'%s' --stage fused", src("benchmarks/graphs/seed_pattern.json"));
    r = run_tool_env(dir, "IC_NO_FUSION=1", "ic-dump", args);
    assert_ok(r, "ic-dump with IC_NO_FUSION=1");
    cr_assert_eq(count_lines_starting(r.out, "kernel "), 4, "one kernel per op:\n%s", r.out);
    cr_assert(strstr(r.out, "[no fusion]"), "the banner says so:\n%s", r.out);
    result_free(&r);
    ict_rmtree(dir);
}

/* ---- ic-dump: every stage ---- */

Test(cli_compiled, dump_every_stage_has_banner_and_text)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", ict_tmpdir()); /* ict_path reuses its slots */
    static const struct { const char *stage, *banner, *want; } stages[] = {
        { "graph", "== graph: seed_pattern, ", "= add(t2, b3)" },
        { "loops", "== loops: seed_pattern, ", "kernel " },
        { "fused", "== fused: seed_pattern, ", "kernel " },
        { "llvm", "; == llvm: seed_pattern, ", "define " },
        { "llvm-opt", "; == llvm-opt: seed_pattern, ", "define " },
        { "asm", "# == asm: seed_pattern, ", "cpu_" },
#if __has_include("ic/ptx.h")
        { "ptx", "// == ptx: seed_pattern, ", ".entry gpu_" },
#endif
    };
    for (size_t i = 0; i < sizeof stages / sizeof stages[0]; i++) {
        char args[8192];
        snprintf(args, sizeof args, "'%s' --stage %s", src("benchmarks/graphs/seed_pattern.json"),
                 stages[i].stage);
        run_result r = run_tool(dir, "ic-dump", args);
        assert_ok(r, stages[i].stage);
        cr_assert_str_empty(r.err, "%s: stderr: %s", stages[i].stage, r.err);
        cr_assert(strncmp(r.out, stages[i].banner, strlen(stages[i].banner)) == 0,
                  "%s: the first line should be the banner '%s...', got:\n%.300s", stages[i].stage,
                  stages[i].banner, r.out);
        const char *body = strchr(r.out, '\n');
        cr_assert(body && strlen(body + 1) > 20, "%s: the text after the banner is empty:\n%s",
                  stages[i].stage, r.out);
        cr_assert(strstr(body, stages[i].want), "%s: want '%s' in:\n%.2000s", stages[i].stage,
                  stages[i].want, r.out);
        result_free(&r);
    }
    ict_rmtree(dir);
}

Test(cli_compiled, dump_seed_pattern_fuses_into_one_kernel)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", ict_tmpdir()); /* ict_path reuses its slots */
    char args[8192];
    snprintf(args, sizeof args, "'%s' --stage loops", src("benchmarks/graphs/seed_pattern.json"));
    run_result r = run_tool(dir, "ic-dump", args);
    assert_ok(r, "loops");
    cr_assert_eq(count_lines_starting(r.out, "kernel "), 4, "loops: one kernel per op (4):\n%s", r.out);
    result_free(&r);
    snprintf(args, sizeof args, "'%s' --stage fused", src("benchmarks/graphs/seed_pattern.json"));
    r = run_tool(dir, "ic-dump", args);
    assert_ok(r, "fused");
    cr_assert_eq(count_lines_starting(r.out, "kernel "), 1, "fused: exactly one kernel:\n%s", r.out);
    result_free(&r);
    snprintf(args, sizeof args, "'%s' --stage fused --no-fusion", src("benchmarks/graphs/seed_pattern.json"));
    r = run_tool(dir, "ic-dump", args);
    assert_ok(r, "fused --no-fusion");
    cr_assert_eq(count_lines_starting(r.out, "kernel "), 4, "--no-fusion: 4 kernels:\n%s", r.out);
    result_free(&r);
#if __has_include("ic/ptx.h")
    /* the GPU code of the same fused program: one entry */
    snprintf(args, sizeof args, "'%s' --stage ptx", src("benchmarks/graphs/seed_pattern.json"));
    r = run_tool(dir, "ic-dump", args);
    assert_ok(r, "ptx");
    cr_assert_eq(count_lines_starting(r.out, ".visible .entry "), 1, "ptx: one entry:\n%.3000s", r.out);
    result_free(&r);
#endif
    ict_rmtree(dir);
}

Test(cli_compiled, dump_symbols_and_bad_stages)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", ict_tmpdir()); /* ict_path reuses its slots */
    const char *ffn = src("benchmarks/graphs/bert_ffn.json");
    char args[8192];
    snprintf(args, sizeof args, "'%s' --stage fused", ffn);
    run_result r = run_tool(dir, "ic-dump", args);
    assert_fails(r, "ic-dump", "unbound B", "'B'", "--bind B=");
    cr_assert_str_empty(r.out, "nothing on stdout when a stage fails:\n%s", r.out);
    result_free(&r);
    snprintf(args, sizeof args, "'%s' --stage llvm --bind B=2", ffn);
    r = run_tool(dir, "ic-dump", args);
    assert_ok(r, "llvm --bind B=2");
    cr_assert(strncmp(r.out, "; == llvm: bert_ffn, ", 21) == 0 && strstr(r.out, "(B=2)"),
              "the banner shows the binding:\n%.300s", r.out);
    result_free(&r);
    static const char *bad[] = { "nope", "LLVM", "",
#if !__has_include("ic/ptx.h")
                                 "ptx", /* known, not built */
#endif
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(args, sizeof args, "'%s' --stage '%s'", src("benchmarks/graphs/seed_pattern.json"), bad[i]);
        r = run_tool(dir, "ic-dump", args);
        assert_fails(r, "ic-dump", bad[i], "stage", "graph, loops, fused, llvm, llvm-opt, asm, ptx");
        cr_assert_str_empty(r.out, "--stage %s: stdout should be empty:\n%s", bad[i], r.out);
        result_free(&r);
    }
    ict_rmtree(dir);
}

/* The LLVM IR dump, banner included, is valid input for LLVM's own tools. */
Test(cli_compiled, dump_llvm_is_parseable)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", ict_tmpdir()); /* ict_path reuses its slots */
    const char *as = "/usr/lib/llvm-19/bin/llvm-as";
    if (access(as, X_OK) != 0) {
        ict_rmtree(dir);
        cr_skip_test("%s is not installed", as);
    }
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "'%s/ic-dump' '%s' --stage llvm-opt > '%s/k.ll' && '%s' '%s/k.ll' -o /dev/null",
             tool_dir(), src("benchmarks/graphs/seed_pattern.json"), dir, as, dir);
    cr_assert_eq(system(cmd), 0, "llvm-as rejects ic-dump --stage llvm-opt: %s", cmd);
    ict_rmtree(dir);
}

Test(cli_compiled, help_names_the_options)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", ict_tmpdir()); /* ict_path reuses its slots */
    run_result r = run_tool(dir, "ic-run", "--help");
    assert_ok(r, "ic-run --help");
    static const char *opts[] = { "--backend", "compiled", "unfused", "ref", "--check", "--json",
                                  "--iters", "--warmup", "--threads", "--expect", "--no-compare" };
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
        cr_assert(strstr(r.out, opts[i]), "ic-run --help should mention %s:\n%s", opts[i], r.out);
    result_free(&r);
    r = run_tool(dir, "ic-dump", "-h");
    assert_ok(r, "ic-dump -h");
    static const char *st[] = { "graph", "loops", "fused", "llvm", "llvm-opt", "asm", "ptx", "--no-fusion" };
    for (size_t i = 0; i < sizeof st / sizeof st[0]; i++)
        cr_assert(strstr(r.out, st[i]), "ic-dump -h should mention %s:\n%s", st[i], r.out);
    result_free(&r);
    ict_rmtree(dir);
}
