/* test_cpu_cache.c - the CPU object-code cache (pool.c): a second compile of a graph in a
 * fresh context takes every kernel from the cache and computes the same outputs; options that
 * change code (vector width, frozen weights) miss; a damaged entry is ignored and rewritten;
 * a cache turned off (option or IC_CACHE=0) writes nothing. Every test's cache is a fresh
 * folder (IC_CACHE_DIR through the context's switches). */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "ic/runtime.h"

enum { M = 16, K = 64, N = 48 };

/* A context whose persistent cache is dir (off: as IC_CACHE=0). */
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

/* y = softmax(relu(x @ w^T + b)): a GEMM kernel (with its epilogue) and a row kernel. The
 * weights come from seed. */
static ic_graph *make_graph(ic_ctx *c, int seed)
{
    static float w[N * K], b[N];
    for (int i = 0; i < N * K; i++)
        w[i] = (float)((i * 7 + seed * 13) % 17 - 8) / 16.0f;
    for (int i = 0; i < N; i++)
        b[i] = (float)(i % 5 - 2) / 8.0f;
    ic_graph *g = ict_graph(c, "cached");
    ic_value x = ict_input(g, "x", IC_F32, "16,64"), wv, bv, y, r, s;
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

typedef struct {
    ic_autotune_stats st;
    float out[M * N];
} result;

/* Compiles g under o, runs it on fixed data; the stats and the output. */
static result compile_run(ic_ctx *c, const ic_graph *g, const ic_compile_options *o)
{
    static float x[M * K];
    for (int i = 0; i < M * K; i++)
        x[i] = (float)(i % 23 - 11) / 8.0f;
    result r;
    ic_compiled *cc = NULL;
    ic_status s = ic_compile(c, g, o, &cc);
    cr_assert_eq(s, IC_OK, "compile: %s", ic_last_error(c));
    ic_tensor arg, out;
    ic_tensor_init(&arg, IC_F32, 2, (int64_t[]){ M, K }, x);
    ic_tensor_init(&out, IC_F32, 2, (int64_t[]){ M, N }, r.out);
    cr_assert_eq(ic_run(cc, 1, &arg, 1, &out), IC_OK, "run: %s", ic_last_error(c));
    ic_compiled_autotune_stats(cc, &r.st);
    ic_compiled_destroy(cc);
    return r;
}

static result compile_default(const char *dir, bool off, int seed)
{
    ic_ctx *c = cache_ctx(dir, off);
    ic_graph *g = make_graph(c, seed);
    result r = compile_run(c, g, NULL);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
    return r;
}

/* Files under dir/cpu-obj (0 when the folder does not exist). */
static int entries(const char *dir)
{
    int n = ict_count_files(ict_path(dir, "cpu-obj"));
    return n < 0 ? 0 : n;
}

Test(cpu_cache, second_compile_hits_every_kernel)
{
    const char *dir = ict_tmpdir();
    result a = compile_default(dir, false, 1);
    cr_assert(a.st.code_misses >= 2, "a GEMM and a softmax kernel: %d misses", a.st.code_misses);
    cr_assert_eq(a.st.code_hits, 0);
    cr_assert_eq(entries(dir), a.st.code_misses, "one entry per kernel compiled");
    result b = compile_default(dir, false, 1);
    cr_assert_eq(b.st.code_hits, a.st.code_misses, "a fresh context finds every kernel: %d of %d",
                 b.st.code_hits, a.st.code_misses);
    cr_assert_eq(b.st.code_misses, 0);
    cr_assert(memcmp(a.out, b.out, sizeof a.out) == 0, "the cached code computes the same outputs");
    cr_assert_eq(entries(dir), a.st.code_misses, "nothing new written");
    ict_rmtree(dir);
}

Test(cpu_cache, code_changing_options_miss)
{
    const char *dir = ict_tmpdir();
    ic_ctx *c = cache_ctx(dir, false);
    ic_graph *g1 = make_graph(c, 1), *g2 = make_graph(c, 2);
    ic_compile_options o;
    result base = compile_run(c, g1, NULL);
    int nk = base.st.code_misses;
    /* another vector width: every kernel's code differs */
    ic_compile_options_init(&o);
    o.vector_width = 1;
    result scalar = compile_run(c, g1, &o);
    cr_assert_eq(scalar.st.code_hits, 0, "vector_width 1 must not reuse vector code");
    cr_assert_eq(scalar.st.code_misses, nk);
    /* frozen weights are packed into the GEMM's code: other weights, another GEMM; the
     * softmax kernel does not read them and is found */
    ic_compile_options_init(&o);
    o.freezing = 1;
    result f1 = compile_run(c, g1, &o);
    result f1again = compile_run(c, g1, &o);
    result f2 = compile_run(c, g2, &o);
    cr_assert_eq(f1again.st.code_hits, f1.st.code_misses, "the same frozen weights hit");
    cr_assert_eq(f2.st.code_misses, 1, "other frozen weights: the GEMM misses (%d misses)", f2.st.code_misses);
    cr_assert_eq(f2.st.code_hits, f1.st.code_misses - 1);
    cr_assert(memcmp(f1.out, f2.out, sizeof f1.out) != 0, "other weights, other outputs");
    ic_graph_destroy(g1);
    ic_graph_destroy(g2);
    ic_ctx_destroy(c);
    ict_rmtree(dir);
}

/* Flips a byte in the middle of every entry. */
static void damage_entries(const char *dir)
{
    const char *objs = ict_path(dir, "cpu-obj");
    DIR *d = opendir(objs);
    cr_assert(d);
    char names[64][256];
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < 64;)
        if (e->d_name[0] != '.')
            snprintf(names[n++], sizeof names[0], "%s", e->d_name);
    closedir(d);
    for (int i = 0; i < n; i++) {
        const char *path = ict_path(objs, names[i]);
        size_t sz;
        unsigned char *b = ict_read_file(path, &sz);
        cr_assert(b && sz > 100);
        b[sz / 2] ^= 0x5a;
        ict_write_file(path, b, sz);
        free(b);
    }
}

Test(cpu_cache, damaged_entry_is_ignored_and_rewritten)
{
    const char *dir = ict_tmpdir();
    result a = compile_default(dir, false, 1);
    damage_entries(dir);
    result b = compile_default(dir, false, 1);
    cr_assert_eq(b.st.code_hits, 0, "a damaged entry is a miss");
    cr_assert_eq(b.st.code_misses, a.st.code_misses);
    cr_assert(memcmp(a.out, b.out, sizeof a.out) == 0);
    result c = compile_default(dir, false, 1);
    cr_assert_eq(c.st.code_hits, a.st.code_misses, "the entries were written again");
    cr_assert(memcmp(a.out, c.out, sizeof a.out) == 0);
    ict_rmtree(dir);
}

Test(cpu_cache, off_writes_nothing)
{
    const char *dir = ict_tmpdir();
    /* IC_CACHE=0 */
    result a = compile_default(dir, true, 1);
    cr_assert_eq(a.st.code_hits + a.st.code_misses, 0, "no lookups with the cache off");
    cr_assert_eq(ict_count_files(dir), 0, "IC_CACHE=0 wrote into the cache folder");
    /* the option, in a context whose cache is on */
    ic_ctx *c = cache_ctx(dir, false);
    ic_graph *g = make_graph(c, 1);
    ic_compile_options o;
    ic_compile_options_init(&o);
    o.cache = -1;
    result b = compile_run(c, g, &o);
    cr_assert_eq(b.st.code_hits + b.st.code_misses, 0);
    cr_assert_eq(ict_count_files(dir), 0, "cache = -1 wrote into the cache folder");
    cr_assert(memcmp(a.out, b.out, sizeof a.out) == 0);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
    ict_rmtree(dir);
}

Test(cpu_cache, dumps_still_print_llvm_text)
{
    const char *dir = ict_tmpdir();
    compile_default(dir, false, 1); /* the cache holds every kernel */
    ic_ctx *c = cache_ctx(dir, false);
    ic_graph *g = make_graph(c, 1);
    char *ir = ict_compile_dump(c, g, NULL, "llvm-opt");
    char *as = ict_compile_dump(c, g, NULL, "asm");
    cr_assert(strstr(ir, "define") && strstr(ir, "; ---- kernel 0"), "llvm-opt text: %.200s", ir);
    cr_assert(strstr(as, "ret"), "asm text: %.200s", as);
    free(ir);
    free(as);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
    ict_rmtree(dir);
}
