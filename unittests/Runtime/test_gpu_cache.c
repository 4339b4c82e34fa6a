/* test_gpu_cache.c - compiled GPU code in the persistent cache (lib/Runtime/gpu_cache.c),
 * through the stand-in driver unittests/Tools/fake_libcuda.c (built here, loaded through the
 * context's cuda_driver switch; its log, IC_FAKE_CUDA_LOG, shows which modules were compiled
 * by the linker, JIT-loaded from PTX or loaded from a cubin). Each test has its own cache
 * folder (a fresh temporary folder): a second compile in a fresh context hits for every
 * kernel and neither emits PTX nor compiles any, with the same launch data and PTX text;
 * a code-changing option, another device or driver miss; a corrupt entry is ignored and
 * rewritten; the cache off writes nothing; a driver without the linker still caches PTX. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <dirent.h>
#include <unistd.h>
#include "testutil.h"
#include "ic/ptx.h"
#include "cuda-impl.h" /* ic__cuda_load_code */

static const char *src_dir(void)
{
    const char *e = getenv("IC_SOURCE_DIR");
    return e && *e ? e : IC_SOURCE_DIR;
}

/* Two projections of x of the same shape (one kernel's code for both: shared code), a sum,
 * a GELU and a softmax: GEMMs, pointwise and row kernels. */
static const char *graph_json =
    "{\"ic_graph\": 1, \"name\": \"gc\",\n"
    " \"inputs\": [{\"name\": \"x\", \"dtype\": \"bf16\", \"shape\": [128, 256]}],\n"
    " \"params\": [{\"name\": \"wq\", \"dtype\": \"bf16\", \"shape\": [256, 256]},\n"
    "            {\"name\": \"bq\", \"dtype\": \"bf16\", \"shape\": [256]},\n"
    "            {\"name\": \"wk\", \"dtype\": \"bf16\", \"shape\": [256, 256]},\n"
    "            {\"name\": \"bk\", \"dtype\": \"bf16\", \"shape\": [256]}],\n"
    " \"nodes\": [{\"name\": \"q\", \"op\": \"linear\", \"inputs\": [\"x\", \"wq\", \"bq\"]},\n"
    "           {\"name\": \"k\", \"op\": \"linear\", \"inputs\": [\"x\", \"wk\", \"bk\"]},\n"
    "           {\"name\": \"g\", \"op\": \"gelu\", \"inputs\": [\"k\"]},\n"
    "           {\"name\": \"s\", \"op\": \"mul\", \"inputs\": [\"q\", \"g\"]},\n"
    "           {\"name\": \"y\", \"op\": \"softmax\", \"inputs\": [\"s\"], \"attrs\": {\"dim\": -1}}],\n"
    " \"outputs\": [\"y\"]}\n";

typedef struct {
    char dir[1024], so[1100], log[1100], cache[1100];
    int emits;                /* "ic: ptx:" log messages: ic_ptx_emit ran */
    int refused;              /* a cached cubin the driver refused */
} fixture;

static void on_log(void *user, int level, const char *msg)
{
    (void)level;
    fixture *f = user;
    f->emits += !strncmp(msg, "ic: ptx:", 8);
    f->refused += strstr(msg, "cached cubin was refused") != NULL;
}

/* A fresh folder with the stand-in driver (built with `flags`), its log and a cache folder. */
static void setup(fixture *f, const char *flags)
{
    memset(f, 0, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "%s", ict_tmpdir());
    snprintf(f->so, sizeof f->so, "%s/libcuda-fake.so", f->dir);
    snprintf(f->log, sizeof f->log, "%s/cuda.log", f->dir);
    snprintf(f->cache, sizeof f->cache, "%s/cache", f->dir);
    if (system("command -v cc >/dev/null 2>&1") != 0)
        cr_skip_test("no C compiler (cc) to build the stand-in CUDA driver");
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "cc -shared -fPIC -O1 %s -o '%s' '%s/unittests/Tools/fake_libcuda.c'", flags, f->so,
             src_dir());
    cr_assert_eq(system(cmd), 0, "building the stand-in driver failed: %s", cmd);
    setenv("IC_FAKE_CUDA_LOG", f->log, 1);
    unsetenv("IC_FAKE_CUDA_NAME");
    unsetenv("IC_FAKE_CUDA_DRIVER_VERSION");
}

/* A fresh context on the stand-in driver and f's cache (no_cache: IC_CACHE=0). */
static ic_ctx *context(fixture *f, bool no_cache)
{
    ic_ctx *c = ict_ctx();
    ic_switches sw;
    ic_switches_init(&sw);
    sw.cuda_driver = f->so;
    sw.cache_dir = f->cache;
    sw.no_cache = no_cache;
    cr_assert_eq(ic_ctx_set_switches(c, &sw), IC_OK);
    ic_log_set(c, on_log, f);
    return c;
}

/* Lines of the driver's log starting with `word ` since the last clear. */
static int logged(const fixture *f, const char *word)
{
    size_t n = 0;
    char *raw = ict_read_file(f->log, &n), *text = raw ? ict_text(raw, n) : NULL, *line = text;
    free(raw);
    int count = 0;
    size_t wl = strlen(word);
    while (line && *line) {
        count += !strncmp(line, word, wl) && line[wl] == ' ';
        char *nl = strchr(line, '\n');
        line = nl ? nl + 1 : NULL;
    }
    free(text);
    return count;
}

static void clear_log(fixture *f)
{
    unlink(f->log);
    f->emits = f->refused = 0;
}

static ic_graph *load_graph(ic_ctx *c, const fixture *f, const char *json)
{
    const char *path = ict_path(f->dir, "g.json");
    ict_write_file(path, json, strlen(json));
    ic_graph *g = NULL;
    cr_assert_eq(ic_graph_load_json(c, path, &g), IC_OK, "%s", ic_last_error(c));
    return g;
}

/* What one compile left: its kernels' launch data and PTX, the cache's counts. */
typedef struct {
    int nk;
    ic_ptx_kernel k[64];
    char names[64][256], entries[64][256];
    int args[64][64];
    char *ptx;
    ic_autotune_stats st;
} result;

static char *kept[64]; /* the results' PTX texts, freed by teardown */
static int nkept;

static void keep(result *r, const ic_cuda_compiled *cc)
{
    r->nk = ic_cuda_compiled_num_kernels(cc);
    cr_assert(r->nk > 0 && r->nk <= 64);
    for (int i = 0; i < r->nk; i++) {
        const ic_ptx_kernel *k = ic_cuda_compiled_kernel(cc, i);
        r->k[i] = *k;
        snprintf(r->names[i], 256, "%s", k->name);
        snprintf(r->entries[i], 256, "%s", k->entry);
        cr_assert(k->nargs <= 64);
        memcpy(r->args[i], k->args, sizeof(int) * (size_t)k->nargs);
    }
    cr_assert_lt(nkept, 64);
    r->ptx = kept[nkept++] = strdup(ic_cuda_compiled_ptx(cc));
    ic_cuda_compiled_autotune_stats(cc, &r->st);
}

/* The end of a test: the texts kept, the test's folder. */
static void teardown(fixture *f)
{
    while (nkept > 0)
        free(kept[--nkept]);
    ict_rmtree(f->dir);
}

/* Compiles graph json in a fresh context (device 0 of the stand-in) under o; runs it once. */
static void compile_once(fixture *f, const char *json, const ic_cuda_options *o, bool no_cache, result *r)
{
    ic_ctx *c = context(f, no_cache);
    ic_graph *g = load_graph(c, f, json);
    ic_cuda *d = NULL;
    cr_assert_eq(ic_cuda_open(c, 0, &d), IC_OK, "%s", ic_last_error(c));
    ic_cuda_compiled *cc = NULL;
    cr_assert_eq(ic_cuda_compile(d, g, o, &cc), IC_OK, "%s", ic_last_error(c));
    keep(r, cc);
    ic_cuda_compiled_destroy(cc);
    ic_graph_destroy(g);
    ic_cuda_close(d);
    ic_ctx_destroy(c);
}

/* Kernels whose code is their own: the modules. */
static int distinct(const result *r)
{
    int n = 0;
    for (int i = 0; i < r->nk; i++)
        n += r->k[i].code == i;
    return n;
}

static void assert_same_kernels(const result *a, const result *b)
{
    cr_assert_eq(a->nk, b->nk);
    for (int i = 0; i < a->nk; i++) {
        const ic_ptx_kernel *x = &a->k[i], *y = &b->k[i];
        cr_assert_str_eq(a->names[i], b->names[i], "kernel %d", i);
        cr_assert_str_eq(a->entries[i], b->entries[i], "kernel %d", i);
        cr_assert_eq(x->code, y->code, "kernel %d code", i);
        cr_assert_eq(x->mode, y->mode, "kernel %d mode", i);
        cr_assert_eq(memcmp(&x->params, &y->params, sizeof x->params), 0, "kernel %d params", i);
        cr_assert_eq(x->grid, y->grid, "kernel %d grid", i);
        cr_assert_eq(x->block, y->block, "kernel %d block", i);
        cr_assert_eq(x->smem_bytes, y->smem_bytes, "kernel %d smem", i);
        cr_assert_eq(x->rows_per_block, y->rows_per_block, "kernel %d rows", i);
        cr_assert_eq(x->in_registers, y->in_registers, "kernel %d in_registers", i);
        cr_assert_eq(x->dyn_smem_bytes, y->dyn_smem_bytes, "kernel %d dyn smem", i);
        cr_assert_eq(x->nargs, y->nargs, "kernel %d nargs", i);
        cr_assert_eq(memcmp(a->args[i], b->args[i], sizeof(int) * (size_t)x->nargs), 0, "kernel %d args", i);
    }
    cr_assert_str_eq(a->ptx, b->ptx, "the PTX text");
}

static int entries(const fixture *f)
{
    char p[1200];
    snprintf(p, sizeof p, "%s/gpu-code", f->cache);
    return ict_count_files(p);
}

/* A cold compile, then a warm one in a fresh context: every kernel hits, no emission, no
 * compile of any PTX, only cubins loaded, the same launch data and text. */
static void cold_then_warm(fixture *f, const char *json, result *cold, result *warm)
{
    compile_once(f, json, NULL, false, cold);
    cr_assert_eq(cold->st.code_hits, 0);
    cr_assert_eq(cold->st.code_misses, cold->nk);
    cr_assert_eq(f->emits, 1);
    cr_assert_eq(logged(f, "link"), distinct(cold), "every module compiled by the linker");
    cr_assert_eq(logged(f, "module_load"), 0, "no PTX JIT-loaded when the linker is there");
    cr_assert_eq(entries(f), cold->nk, "an entry per kernel");
    clear_log(f);
    compile_once(f, json, NULL, false, warm);
    cr_assert_eq(warm->st.code_hits, warm->nk);
    cr_assert_eq(warm->st.code_misses, 0);
    cr_assert_eq(f->emits, 0, "no PTX emitted on a warm start");
    cr_assert_eq(logged(f, "link"), 0, "no PTX compiled on a warm start");
    cr_assert_eq(logged(f, "module_load"), 0);
    cr_assert_eq(logged(f, "module_load_cubin"), distinct(warm));
    assert_same_kernels(cold, warm);
}

Test(gpu_cache, a_warm_start_hits_every_kernel_and_compiles_nothing)
{
    fixture f;
    setup(&f, "");
    result cold, warm;
    cold_then_warm(&f, graph_json, &cold, &warm);
    cr_assert_lt(distinct(&cold), cold.nk, "the graph has kernels of shared code (its two projections)");
    /* and the rebuilt variant runs: every kernel launched with its entry */
    clear_log(&f);
    ic_ctx *c = context(&f, false);
    ic_graph *g = load_graph(c, &f, graph_json);
    ic_cuda *d = NULL;
    ic_cuda_compiled *cc = NULL;
    cr_assert_eq(ic_cuda_open(c, 0, &d), IC_OK, "%s", ic_last_error(c));
    cr_assert_eq(ic_cuda_compile(d, g, NULL, &cc), IC_OK, "%s", ic_last_error(c));
    ic_tensor args[5], out;
    memset(args, 0, sizeof args);
    memset(&out, 0, sizeof out);
    int64_t shapes[5][2] = { { 128, 256 }, { 256, 256 }, { 256 }, { 256, 256 }, { 256 } };
    int ranks[5] = { 2, 2, 1, 2, 1 };
    for (int i = 0; i < 5; i++) {
        ic_tensor_init(&args[i], IC_BF16, ranks[i], shapes[i], NULL);
        cr_assert_eq(ic_tensor_alloc(c, &args[i]), IC_OK);
    }
    cr_assert_eq(ic_cuda_run(cc, 5, args, 1, &out), IC_OK, "%s", ic_last_error(c));
    int launched = 0;
    for (int i = 0; i < warm.nk; i++)
        launched += warm.k[i].grid > 0;
    cr_assert_eq(logged(&f, "launch"), launched);
    for (int i = 0; i < 5; i++)
        ic_tensor_free(c, &args[i]);
    ic_tensor_free(c, &out);
    ic_cuda_compiled_destroy(cc);
    ic_graph_destroy(g);
    ic_cuda_close(d);
    ic_ctx_destroy(c);
    teardown(&f);
}

Test(gpu_cache, a_code_changing_option_misses)
{
    fixture f;
    setup(&f, "");
    result cold, other, again;
    compile_once(&f, graph_json, NULL, false, &cold);
    ic_cuda_options o;
    ic_cuda_options_init(&o);
    o.ptx_opt_level = 1;
    clear_log(&f);
    compile_once(&f, graph_json, &o, false, &other);
    cr_assert_eq(other.st.code_hits, 0);
    cr_assert_eq(other.st.code_misses, other.nk);
    cr_assert_eq(f.emits, 1);
    cr_assert_eq(logged(&f, "link"), distinct(&other));
    cr_assert_eq(entries(&f), 2 * cold.nk, "both kept");
    ic_ptx_params prm[64];
    memset(prm, 0, sizeof prm);
    for (int i = 0; i < cold.nk; i++)
        prm[i] = cold.k[i].params; /* the heuristic's own choice, but requested */
    ic_cuda_options_init(&o);
    o.params = prm;
    o.nparams = cold.nk;
    clear_log(&f);
    compile_once(&f, graph_json, &o, false, &again);
    cr_assert_eq(again.st.code_misses, again.nk, "requested params are another key");
    clear_log(&f);
    compile_once(&f, graph_json, NULL, false, &again);
    cr_assert_eq(again.st.code_hits, again.nk, "the default's entries are still there");
    cr_assert_eq(f.emits, 0);
    teardown(&f);
}

/* The path of the cache's gpu-code entry number `which` (in readdir order) into path; false
 * when there are fewer. */
static bool entry_path(const fixture *f, int which, char *path, size_t n)
{
    char p[1200];
    snprintf(p, sizeof p, "%s/gpu-code", f->cache);
    DIR *dir = opendir(p);
    cr_assert(dir);
    struct dirent *e;
    int i = 0;
    while ((e = readdir(dir)) && (e->d_name[0] == '.' || i++ < which))
        ;
    if (e)
        cr_assert_lt((size_t)snprintf(path, n, "%s/%s", p, e->d_name), n);
    closedir(dir);
    return e != NULL;
}

/* Damages the entry at path with `how` (0 a flipped byte, 1 truncation); the kernel it was
 * for (its key's "name <kernel>" line) goes into kname. */
static void damage(const char *path, int how, char *kname, size_t kn)
{
    size_t sz = 0;
    char *b = ict_read_file(path, &sz);
    cr_assert(b && sz > 64);
    const char *at = memmem(b, sz, "\nname ", 6);
    cr_assert(at, "the key names its kernel");
    size_t l = strcspn(at + 6, "\n");
    cr_assert_lt(l, kn);
    memcpy(kname, at + 6, l);
    kname[l] = 0;
    if (how == 0)
        b[sz / 2] ^= 0x55;
    ict_write_file(path, b, how == 0 ? sz : sz / 3);
    free(b);
}

/* Kernels that miss when kernel `name`'s entry is gone: it, and the kernels of its code. */
static int misses_without(const result *r, const char *name)
{
    int k = 0, n = 0;
    while (k < r->nk && strcmp(r->names[k], name))
        k++;
    cr_assert_lt(k, r->nk, "kernel '%s' is one of the graph's", name);
    for (int i = 0; i < r->nk; i++)
        n += i == k || (r->k[k].code == k && r->k[i].code == k);
    return n;
}

/* Each entry in turn damaged: a miss (with the kernels of its code), PTX emitted again, the
 * other modules' cubins reused, the same kernels, the entry rewritten and hit next time. */
static void corrupt_entry_case(int how)
{
    fixture f;
    setup(&f, "");
    result cold, hurt, healed;
    compile_once(&f, graph_json, NULL, false, &cold);
    char path[1600], kname[256];
    bool shared = false;
    for (int e = 0; entry_path(&f, e, path, sizeof path); e++) {
        damage(path, how, kname, sizeof kname);
        size_t before = 0;
        free(ict_read_file(path, &before));
        clear_log(&f);
        compile_once(&f, graph_json, NULL, false, &hurt);
        int want = misses_without(&cold, kname);
        shared |= want > 1;
        cr_assert_eq(hurt.st.code_misses, want, "the damaged entry of '%s' is a miss (with its code's sharers)", kname);
        cr_assert_eq(hurt.st.code_hits, hurt.nk - want);
        cr_assert_eq(f.emits, 1, "PTX emitted again");
        cr_assert_leq(logged(&f, "link"), 1, "only that kernel's module compiled, the others' cubins reused");
        cr_assert_eq(f.refused, 0);
        assert_same_kernels(&cold, &hurt);
        size_t after = 0;
        free(ict_read_file(path, &after));
        cr_assert(how == 0 ? after == before : after > before, "the entry of '%s' was rewritten", kname);
        clear_log(&f);
        compile_once(&f, graph_json, NULL, false, &healed);
        cr_assert_eq(healed.st.code_hits, healed.nk, "the rewritten entry of '%s' hits", kname);
        cr_assert_eq(f.emits, 0);
    }
    cr_assert(shared, "one damaged entry was of a kernel whose code another kernel runs");
    teardown(&f);
}

Test(gpu_cache, a_corrupt_entry_is_ignored_and_rewritten) { corrupt_entry_case(0); }
Test(gpu_cache, a_truncated_entry_is_ignored_and_rewritten) { corrupt_entry_case(1); }

Test(gpu_cache, the_cache_off_writes_nothing)
{
    fixture f;
    setup(&f, "");
    result r;
    ic_cuda_options o;
    ic_cuda_options_init(&o);
    o.cache = -1;
    compile_once(&f, graph_json, &o, false, &r);
    cr_assert_eq(r.st.code_hits + r.st.code_misses, 0);
    cr_assert_eq(ict_count_files(f.cache), -1, "no cache folder");
    cr_assert_eq(logged(&f, "module_load"), distinct(&r), "PTX JIT-loaded as without a cache");
    cr_assert_eq(logged(&f, "link"), 0);
    clear_log(&f);
    compile_once(&f, graph_json, NULL, true, &r); /* IC_CACHE=0 */
    cr_assert_eq(r.st.code_hits + r.st.code_misses, 0);
    cr_assert_eq(ict_count_files(f.cache), -1, "no cache folder");
    o.cache = 1; /* an option cannot turn on what IC_CACHE=0 turned off */
    compile_once(&f, graph_json, &o, true, &r);
    cr_assert_eq(ict_count_files(f.cache), -1, "no cache folder");
    teardown(&f);
}

Test(gpu_cache, another_device_or_driver_never_uses_a_cubin)
{
    fixture f;
    setup(&f, "");
    result cold, r;
    compile_once(&f, graph_json, NULL, false, &cold);
    const char *env[2][2] = { { "IC_FAKE_CUDA_NAME", "ic fake device two" }, { "IC_FAKE_CUDA_DRIVER_VERSION", "12080" } };
    for (int i = 0; i < 2; i++) {
        setenv(env[i][0], env[i][1], 1);
        clear_log(&f);
        compile_once(&f, graph_json, NULL, false, &r);
        cr_assert_eq(r.st.code_misses, r.nk, "%s=%s: every kernel misses", env[i][0], env[i][1]);
        cr_assert_eq(f.refused, 0, "no cubin of another device was offered to the driver");
        cr_assert_eq(logged(&f, "link"), distinct(&r));
        unsetenv(env[i][0]);
    }
    clear_log(&f);
    compile_once(&f, graph_json, NULL, false, &r);
    cr_assert_eq(r.st.code_hits, r.nk, "the first device's entries are still there");
    teardown(&f);
}

Test(gpu_cache, without_the_linker_the_ptx_is_cached)
{
    fixture f;
    setup(&f, "-DFAKE_NO_LINKER");
    result cold, warm;
    compile_once(&f, graph_json, NULL, false, &cold);
    cr_assert_eq(logged(&f, "module_load"), distinct(&cold), "JIT-loaded from PTX");
    cr_assert_eq(entries(&f), cold.nk);
    clear_log(&f);
    compile_once(&f, graph_json, NULL, false, &warm);
    cr_assert_eq(warm.st.code_hits, warm.nk);
    cr_assert_eq(f.emits, 0, "no emission: the PTX came from the cache");
    cr_assert_eq(logged(&f, "module_load"), distinct(&warm), "and the driver JITs it");
    assert_same_kernels(&cold, &warm);
    teardown(&f);
}

/* An implicit-GEMM conv (lib/PTX/iconv.c: its im2col copy is not launched, the GEMM gathers):
 * kernels whose code depends on each other come back the same. */
Test(gpu_cache, a_conv_pair_comes_back_the_same)
{
    fixture f;
    setup(&f, "");
    char path[1200];
    snprintf(path, sizeof path, "%s/benchmarks/graphs/conv3x3_14_bf16.json", src_dir());
    size_t n = 0;
    char *raw = ict_read_file(path, &n), *json = raw ? ict_text(raw, n) : NULL;
    free(raw);
    cr_assert(json, "%s", path);
    result cold, warm;
    cold_then_warm(&f, json, &cold, &warm);
    int skipped = 0;
    for (int i = 0; i < cold.nk; i++)
        skipped += cold.k[i].grid == 0;
    cr_assert_geq(skipped, 1, "the im2col copy is not launched (the conv pair was found)");
    free(json);
    teardown(&f);
}

/* ic_ptx_module_from_parts: the texts read as an emission's; parts that do not fit together
 * are refused with the kernel named. */
Test(gpu_cache, a_module_from_parts_checks_them)
{
    ic_ctx *c = ict_ctx();
    int args0[2] = { 0, 1 }, args1[2] = { 1, 2 };
    ic_ptx_kernel ks[2] = {
        { .name = "gpu_a_0", .entry = "gpu_a_0", .code = 0, .grid = 4, .block = 128, .nargs = 2, .args = args0 },
        { .name = "gpu_a_1", .entry = "gpu_a_0", .code = 0, .grid = 8, .block = 128, .nargs = 2, .args = args1 },
    };
    const char *ptx[2] = { ".entry gpu_a_0(\n", NULL };
    ic_ptx_module *m = NULL;
    cr_assert_eq(ic_ptx_module_from_parts(c, 2, ks, ptx, &m), IC_OK, "%s", ic_last_error(c));
    cr_assert_str_eq(ic_ptx_module_text(m), "// ---- kernel 0 'gpu_a_0' ----\n.entry gpu_a_0(\n"
                                            "// ---- kernel 1 'gpu_a_1': the code of kernel 0 'gpu_a_0' ----\n");
    cr_assert_str_eq(ic_ptx_module_kernel_text(m, 1), ptx[0]);
    cr_assert_str_eq(ic_ptx_module_kernel(m, 1)->entry, "gpu_a_0");
    cr_assert_eq(ic_ptx_module_kernel(m, 1)->args[1], 2);
    cr_assert_null(ic_ptx_module_llvm_ir(m));
    ic_ptx_module_destroy(m);
    ks[1].entry = "gpu_b";
    ict_assert_error(c, ic_ptx_module_from_parts(c, 2, ks, ptx, &m), IC_EINVAL, "kernel 1 'gpu_a_1'",
                     "not that of an earlier kernel");
    cr_assert_null(m);
    ks[1].entry = "gpu_a_1", ks[1].code = 1;
    ict_assert_error(c, ic_ptx_module_from_parts(c, 2, ks, ptx, &m), IC_EINVAL, "kernel 1 'gpu_a_1'", "no PTX");
    ks[1].name = "gpu_a_0", ks[1].entry = "gpu_a_0", ks[1].code = 0;
    ict_assert_error(c, ic_ptx_module_from_parts(c, 2, ks, ptx, &m), IC_EINVAL, "name is taken");
    ks[1].name = "gpu_a_1", ks[1].block = 2048;
    ict_assert_error(c, ic_ptx_module_from_parts(c, 2, ks, ptx, &m), IC_EINVAL, "a bad launch");
    ic_ctx_destroy(c);
}

/* A cubin the driver refuses (another device's, damaged) is dropped and made again from the
 * PTX; the new one is handed back to be stored. */
Test(gpu_cache, a_refused_cubin_is_made_again)
{
    fixture f;
    setup(&f, "");
    ic_ctx *c = context(&f, false);
    ic_cuda *d = NULL;
    cr_assert_eq(ic_cuda_open(c, 0, &d), IC_OK, "%s", ic_last_error(c));
    const char *ptx = ".visible .entry gpu_k(\n)\n{\n ret;\n}\n";
    char *bad = malloc(64);
    snprintf(bad, 64, "FAKECUBIN another device\n%s", ".visible .entry gpu_k(");
    ic__cubin cb = { bad, strlen(bad) + 1, false };
    ic_cuda_module *m = NULL;
    cr_assert_eq(ic__cuda_load_code(d, 1, &ptx, &cb, &m), IC_OK, "%s", ic_last_error(c));
    cr_assert_eq(f.refused, 1);
    cr_assert_eq(logged(&f, "link"), 1);
    cr_assert(cb.made && cb.data && !strncmp(cb.data, "FAKECUBIN ic fake device\n", 25), "a new cubin");
    cr_assert_eq(ic_cuda_module_launch(m, "gpu_k", 1, 32, NULL), IC_OK, "%s", ic_last_error(c));
    ic_cuda_module_unload(m);
    free(cb.data);
    ic_cuda_close(d);
    ic_ctx_destroy(c);
    teardown(&f);
}
