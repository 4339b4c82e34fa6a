/* test_artifact.c - saved compiled models (ic_compiled_save / ic_compiled_load): round trips
 * with and without weights and with several variants give the outputs of the original compile
 * with every kernel from the file (the loading context's cache is off); files made for another
 * device, ic build or version, LLVM or CPU are refused by name; truncated and damaged files are
 * errors. Every context's cache folder is a fresh temporary one. */
#define _GNU_SOURCE /* memmem */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "testutil.h"
#include "ic/runtime.h"

enum { K = 64, N = 48 };

/* A context whose persistent cache is dir; off: IC_CACHE=0. */
static ic_ctx *cache_ctx(const char *dir, bool off)
{
    ic_ctx *c = ict_ctx();
    ic_switches sw;
    ic_ctx_switches(c, &sw);
    sw.cache_dir = dir;
    sw.no_cache = off;
    cr_assert_eq(ic_ctx_set_switches(c, &sw), IC_OK);
    return c;
}

/* y = softmax(relu(x @ w^T + b)), x [rows, 64] (rows: "16" or a symbol "B"). */
static ic_graph *make_graph(ic_ctx *c, const char *rows)
{
    static float w[N * K], b[N];
    for (int i = 0; i < N * K; i++)
        w[i] = (float)((i * 7) % 17 - 8) / 16.0f;
    for (int i = 0; i < N; i++)
        b[i] = (float)(i % 5 - 2) / 8.0f;
    char xs[64];
    snprintf(xs, sizeof xs, "%s,64", rows);
    ic_graph *g = ict_graph(c, "saved");
    ic_value x = ict_input(g, "x", IC_F32, xs), wv, bv, y, r, s;
    ic_dim ws[2], bs[1];
    ict_shape(g, "48,64", ws);
    ict_shape(g, "48", bs);
    cr_assert_eq(ic_graph_add_param(g, "w", IC_F32, 2, ws, w, sizeof w, NULL, NULL, &wv), IC_OK);
    cr_assert_eq(ic_graph_add_param(g, "b", IC_F32, 1, bs, b, sizeof b, NULL, NULL, &bv), IC_OK);
    ic_operand in[3] = { { .node = x }, { .node = wv }, { .node = bv } };
    cr_assert_eq(ic_graph_add_node(g, "y", IC_OP_LINEAR, 3, in, NULL, &y), IC_OK);
    cr_assert_eq(ic_graph_unary(g, "r", IC_OP_RELU, (ic_operand){ .node = y }, &r), IC_OK);
    ic_attrs a;
    ic_attrs_init(&a, IC_OP_SOFTMAX);
    a.dim = 1;
    cr_assert_eq(ic_graph_add_node(g, "s", IC_OP_SOFTMAX, 1, (ic_operand[]){ { .node = r } }, &a, &s), IC_OK);
    cr_assert_eq(ic_graph_add_output(g, s), IC_OK);
    return g;
}

/* Runs cc on rows x 64 fixed inputs into out (rows x 48). */
static void run_rows(ic_ctx *c, ic_compiled *cc, int rows, float *out)
{
    float *x = malloc(sizeof(float) * (size_t)rows * K);
    for (int i = 0; i < rows * K; i++)
        x[i] = (float)(i % 23 - 11) / 8.0f;
    ic_tensor arg, o;
    ic_tensor_init(&arg, IC_F32, 2, (int64_t[]){ rows, K }, x);
    ic_tensor_init(&o, IC_F32, 2, (int64_t[]){ rows, N }, out);
    cr_assert_eq(ic_run(cc, 1, &arg, 1, &o), IC_OK, "run: %s", ic_last_error(c));
    free(x);
}

static ic_compiled *compile(ic_ctx *c, const ic_graph *g)
{
    ic_compiled *cc = NULL;
    cr_assert_eq(ic_compile(c, g, NULL, &cc), IC_OK, "compile: %s", ic_last_error(c));
    return cc;
}

/* Compiles the 16-row graph, runs it (want), saves it to path. */
static void save_model(const char *path, bool with_weights, float *want)
{
    const char *dir = ict_tmpdir();
    ic_ctx *c = cache_ctx(dir, false);
    ic_graph *g = make_graph(c, "16");
    ic_compiled *cc = compile(c, g);
    run_rows(c, cc, 16, want);
    cr_assert_eq(ic_compiled_save(cc, path, with_weights), IC_OK, "save: %s", ic_last_error(c));
    ic_compiled_destroy(cc);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
    ict_rmtree(dir);
}

/* Loads path in a context without a cache: everything must come from the file. */
static ic_compiled *load_model(ic_ctx *c, const char *path)
{
    ic_compiled *cc = NULL;
    ic_status s = ic_compiled_load(c, path, &cc);
    cr_assert_eq(s, IC_OK, "load: %s", ic_last_error(c));
    ic_autotune_stats st;
    ic_compiled_autotune_stats(cc, &st);
    cr_assert(st.code_hits >= 2 && st.code_misses == 0, "every kernel from the file: %d hits, %d misses",
              st.code_hits, st.code_misses);
    return cc;
}

Test(artifact, round_trip_with_weights)
{
    const char *dir = ict_tmpdir();
    const char *path = ict_path(dir, "model.icm");
    float want[16 * N], got[16 * N];
    save_model(path, true, want);
    cr_assert_eq(ict_count_files(dir), 1, "one file, no temporary left, no weights beside it");
    ic_ctx *c = cache_ctx(dir, true);
    ic_compiled *cc = load_model(c, path);
    const ic_graph *g = ic_compiled_graph(cc);
    cr_assert_str_eq(ic_graph_name(g), "saved");
    cr_assert_eq(ic_graph_num_args(g), 1, "the weights are in the file, not arguments");
    run_rows(c, cc, 16, got);
    cr_assert(memcmp(want, got, sizeof want) == 0, "the loaded model computes the saved one's outputs");
    ic_compiled_destroy(cc);
    ic_ctx_destroy(c);
    ict_rmtree(dir);
}

Test(artifact, round_trip_without_weights)
{
    const char *dir = ict_tmpdir();
    ic_ctx *c = cache_ctx(dir, false);
    /* a graph whose weights come from a safetensors file */
    ic_graph *mem = make_graph(c, "16"), *g = NULL;
    const char *json = ict_path(dir, "g.json"), *st = ict_path(dir, "g.safetensors");
    char jpath[4096], stpath[4096], with[4096], without[4096];
    snprintf(jpath, sizeof jpath, "%s", json);
    snprintf(stpath, sizeof stpath, "%s", st);
    snprintf(with, sizeof with, "%s", ict_path(dir, "with.icm"));
    snprintf(without, sizeof without, "%s", ict_path(dir, "without.icm"));
    cr_assert_eq(ic_graph_save_json(mem, jpath), IC_OK, "%s", ic_last_error(c));
    cr_assert_eq(ic_graph_load_json(c, jpath, &g), IC_OK, "%s", ic_last_error(c));
    ic_compiled *cc = compile(c, g);
    float want[16 * N], got[16 * N];
    run_rows(c, cc, 16, want);
    cr_assert_eq(ic_compiled_save(cc, with, true), IC_OK, "%s", ic_last_error(c));
    cr_assert_eq(ic_compiled_save(cc, without, false), IC_OK, "%s", ic_last_error(c));
    ic_compiled_destroy(cc);
    size_t nw, nwo;
    free(ict_read_file(with, &nw));
    free(ict_read_file(without, &nwo));
    cr_assert(nw >= nwo + sizeof(float) * N * K, "with weights %zu bytes, without %zu", nw, nwo);

    ic_ctx *c2 = cache_ctx(dir, true);
    cc = load_model(c2, without);
    run_rows(c2, cc, 16, got);
    cr_assert(memcmp(want, got, sizeof want) == 0);
    ic_compiled_destroy(cc);
    /* without weights, the file names the safetensors file: gone, the load says which */
    ic_graph_destroy(g);
    ic_graph_destroy(mem);
    cr_assert_eq(unlink(stpath), 0);
    ic_status s = ic_compiled_load(c2, without, &cc);
    ict_assert_error(c2, s, IC_EIO, "without.icm", "g.safetensors");
    cr_assert_null(cc);
    /* with them, it does not need it */
    cc = load_model(c2, with);
    run_rows(c2, cc, 16, got);
    cr_assert(memcmp(want, got, sizeof want) == 0);
    ic_compiled_destroy(cc);
    ic_ctx_destroy(c2);
    ic_ctx_destroy(c);
    ict_rmtree(dir);
}

Test(artifact, every_variant_is_saved)
{
    const char *dir = ict_tmpdir();
    const char *path = ict_path(dir, "sym.icm");
    char p[4096];
    snprintf(p, sizeof p, "%s", path);
    ic_ctx *c = cache_ctx(dir, false);
    ic_graph *g = make_graph(c, "B");
    ic_compiled *cc = compile(c, g);
    ic_status s = ic_compiled_save(cc, p, true);
    ict_assert_error(c, s, IC_EINVAL, "no compiled code yet");
    float want2[2 * N], want5[5 * N], got2[2 * N], got5[5 * N];
    run_rows(c, cc, 2, want2);
    run_rows(c, cc, 5, want5);
    cr_assert_eq(ic_compiled_save(cc, p, true), IC_OK, "%s", ic_last_error(c));
    ic_compiled_destroy(cc);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);

    ic_ctx *c2 = cache_ctx(dir, true);
    cc = load_model(c2, p);
    cr_assert_eq(ic_compiled_num_variants(cc), 2);
    run_rows(c2, cc, 5, got5);
    run_rows(c2, cc, 2, got2);
    cr_assert(memcmp(want2, got2, sizeof want2) == 0 && memcmp(want5, got5, sizeof want5) == 0);
    /* sizes the file has no code for compile as usual */
    float got3[3 * N];
    run_rows(c2, cc, 3, got3);
    cr_assert_eq(ic_compiled_num_variants(cc), 3);
    ic_compiled_destroy(cc);
    ic_ctx_destroy(c2);
    ict_rmtree(dir);
}

Test(artifact, frozen_weights_round_trip)
{
    /* freezing packs the weights into the GEMM's code: the loaded model finds that code by the
     * hash of the weights it holds */
    const char *dir = ict_tmpdir();
    char path[4096];
    snprintf(path, sizeof path, "%s", ict_path(dir, "frozen.icm"));
    ic_ctx *c = cache_ctx(dir, false);
    ic_graph *g = make_graph(c, "16");
    ic_compile_options o;
    ic_compile_options_init(&o);
    o.freezing = 1;
    ic_compiled *cc = NULL;
    cr_assert_eq(ic_compile(c, g, &o, &cc), IC_OK, "%s", ic_last_error(c));
    float want[16 * N], got[16 * N];
    run_rows(c, cc, 16, want);
    cr_assert_eq(ic_compiled_save(cc, path, true), IC_OK, "%s", ic_last_error(c));
    ic_compiled_destroy(cc);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
    ic_ctx *c2 = cache_ctx(dir, true);
    cc = load_model(c2, path);
    run_rows(c2, cc, 16, got);
    cr_assert(memcmp(want, got, sizeof want) == 0);
    ic_compiled_destroy(cc);
    ic_ctx_destroy(c2);
    ict_rmtree(dir);
}

Test(artifact, a_dump_of_llvm_text_compiles_the_kernels_again)
{
    const char *dir = ict_tmpdir();
    char path[4096];
    snprintf(path, sizeof path, "%s", ict_path(dir, "m.icm"));
    float want[16 * N], got[16 * N];
    save_model(path, true, want);
    ic_ctx *c = cache_ctx(dir, true);
    ic_switches sw;
    ic_ctx_switches(c, &sw);
    sw.dump = "llvm-opt"; /* IC_DUMP: the text is made, so the code is generated as usual */
    cr_assert_eq(ic_ctx_set_switches(c, &sw), IC_OK);
    ic_compiled *cc = NULL;
    cr_assert_eq(ic_compiled_load(c, path, &cc), IC_OK, "load with a dump: %s", ic_last_error(c));
    run_rows(c, cc, 16, got);
    cr_assert(memcmp(want, got, sizeof want) == 0);
    ic_compiled_destroy(cc);
    ic_ctx_destroy(c);
    ict_rmtree(dir);
}

/* ---- refusals and damage ---- */

/* A copy of src at dst with the first occurrence of `from` replaced by `to` (same length). */
static void patch_copy(const char *src, const char *dst, const char *from, const char *to)
{
    size_t n;
    char *b = ict_read_file(src, &n);
    cr_assert(b);
    size_t lf = strlen(from);
    cr_assert_eq(lf, strlen(to));
    char *at = memmem(b, n, from, lf);
    cr_assert(at, "'%s' not in the file", from);
    memcpy(at, to, lf);
    ict_write_file(dst, b, n);
    free(b);
}

/* The value of meta line "<key> <value>" (the first line: after the header's zero padding). */
static void meta_value(const char *path, const char *key, char *buf, size_t cap)
{
    size_t n;
    char *b = ict_read_file(path, &n), pat[64];
    snprintf(pat, sizeof pat, "\n%s ", key);
    size_t plen = strlen(pat);
    char *at = memmem(b, n, pat, plen);
    if (!at) {
        pat[0] = 0;
        at = memmem(b, n, pat, plen);
    }
    cr_assert(at, "no %s line", key);
    at += plen;
    size_t len = strcspn(at, "\n");
    snprintf(buf, cap, "%.*s", (int)(len < cap ? len : cap - 1), at);
    free(b);
}

static void assert_refused(const char *good, const char *from, const char *to, ic_status want,
                           const char *part)
{
    const char *bad = ict_path(ict_tmpdir(), "bad.icm");
    char b[4096];
    snprintf(b, sizeof b, "%s", bad);
    patch_copy(good, b, from, to);
    ic_ctx *c = cache_ctx(ict_tmpdir(), true);
    ic_compiled *cc = NULL;
    ic_status s = ic_compiled_load(c, b, &cc);
    ict_assert_error(c, s, want, "bad.icm", part);
    cr_assert_null(cc);
    ic_ctx_destroy(c);
}

Test(artifact, another_device_version_or_cpu_is_refused)
{
    const char *dir = ict_tmpdir();
    char good[4096], v[256], pat[300], rep[300];
    snprintf(good, sizeof good, "%s", ict_path(dir, "good.icm"));
    float want[16 * N];
    save_model(good, true, want);

    assert_refused(good, "\ndevice cpu\n", "\ndevice xpu\n", IC_EUNSUPPORTED, "device 'xpu'");

    meta_value(good, "ic", v, sizeof v);
    snprintf(pat, sizeof pat, "ic %s\nbuild ", v);
    snprintf(rep, sizeof rep, "ic %s\nbuild ", v);
    rep[3] = rep[3] == '9' ? '8' : '9';
    assert_refused(good, pat, rep, IC_EUNSUPPORTED, "saved by ic ");

    meta_value(good, "build", v, sizeof v);
    snprintf(pat, sizeof pat, "\nbuild %s\n", v);
    snprintf(rep, sizeof rep, "\nbuild %s\n", v);
    rep[7] = rep[7] == 'f' ? 'e' : 'f';
    assert_refused(good, pat, rep, IC_EUNSUPPORTED, "another build of ic");

    meta_value(good, "llvm", v, sizeof v);
    snprintf(pat, sizeof pat, "\nllvm %s\n", v);
    snprintf(rep, sizeof rep, "\nllvm %s\n", v);
    rep[6] = rep[6] == '9' ? '8' : '9';
    assert_refused(good, pat, rep, IC_EUNSUPPORTED, "saved with LLVM");

    /* a feature of the code's CPU that this host lacks: the first "+name" renamed */
    meta_value(good, "features", v, sizeof v);
    char *plus = strchr(v, '+');
    cr_assert(plus, "no features in '%s'", v);
    size_t len = strcspn(plus, ",");
    snprintf(pat, sizeof pat, "%.*s", (int)len, plus);
    snprintf(rep, sizeof rep, "%s", pat);
    for (size_t i = 1; i < len; i++)
        rep[i] = 'q';
    char want_msg[400];
    snprintf(want_msg, sizeof want_msg, "features this host lacks: %s", rep);
    assert_refused(good, pat, rep, IC_EUNSUPPORTED, want_msg);
    ict_rmtree(dir);
}

/* Loads a copy of good's first n bytes (flip >= 0: with that byte flipped instead). */
static void assert_damaged(const char *good, size_t n, long flip, const char *part)
{
    size_t sz;
    unsigned char *b = ict_read_file(good, &sz);
    cr_assert(b && n <= sz);
    if (flip >= 0)
        b[flip] ^= 0x20;
    const char *bad = ict_path(ict_tmpdir(), "bad.icm");
    char p[4096];
    snprintf(p, sizeof p, "%s", bad);
    ict_write_file(p, b, n);
    free(b);
    ic_ctx *c = cache_ctx(ict_tmpdir(), true);
    ic_compiled *cc = NULL;
    ic_status s = ic_compiled_load(c, p, &cc);
    ict_assert_error(c, s, IC_EFORMAT, "bad.icm", part);
    cr_assert_null(cc);
    ic_ctx_destroy(c);
}

Test(artifact, truncated_or_damaged_files_are_errors)
{
    const char *dir = ict_tmpdir();
    char good[4096];
    snprintf(good, sizeof good, "%s", ict_path(dir, "good.icm"));
    float want[16 * N];
    save_model(good, true, want);
    size_t sz;
    free(ict_read_file(good, &sz));
    assert_damaged(good, sz / 2, -1, "truncated");
    assert_damaged(good, sz - 1, -1, "truncated");
    assert_damaged(good, 12, -1, "truncated");
    assert_damaged(good, 0, -1, "empty");
    assert_damaged(good, sz, 20, "damaged header");
    assert_damaged(good, sz, (long)sz - 100, "damaged");   /* inside the last object */
    assert_damaged(good, sz, (long)(sz / 2), "damaged");
    /* not a model at all */
    const char *json = ict_path(dir, "g.json");
    char jp[4096];
    snprintf(jp, sizeof jp, "%s", json);
    ict_write_file(jp, "{\"ic_graph\": 1}", 15);
    ic_ctx *c = cache_ctx(dir, true);
    ic_compiled *cc = NULL;
    ict_assert_error(c, ic_compiled_load(c, jp, &cc), IC_EFORMAT, "g.json", "not a saved ic model");
    ict_assert_error(c, ic_compiled_load(c, ict_path(dir, "absent.icm"), &cc), IC_EIO, "absent.icm",
                     "cannot open");
    cr_assert_null(cc);
    ic_ctx_destroy(c);
    ict_rmtree(dir);
}
