/* test_gpu_artifact.c - saved compiled models for the GPU (ic_cuda_compiled_save / _load,
 * lib/Runtime/cuda_artifact.c), through the stand-in driver unittests/Tools/fake_libcuda.c
 * (built here, loaded through the context's cuda_driver switch; its log, IC_FAKE_CUDA_LOG,
 * shows which modules were compiled by the linker, JIT-loaded from PTX or loaded from a
 * cubin, and every launch). Round trips with and without weights and with several variants
 * give the original compile's launch data and PTX, with no PTX emitted and no module compiled
 * (the loading context's cache is off), and run; a cubin the driver refuses is compiled from
 * its PTX, and without a linker the file holds PTX only (JIT-loaded); files for the CPU,
 * another compute capability, another ic version or build, or LLVM are refused by name;
 * truncated and damaged files are errors; a tuned model loads its tuned kernels, tuning
 * nothing. */
#define _GNU_SOURCE /* memmem */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "testutil.h"
#include "ic/ptx.h"
#include "ic/runtime.h"

enum { K = 64, N = 48 };

static const char *src_dir(void)
{
    const char *e = getenv("IC_SOURCE_DIR");
    return e && *e ? e : IC_SOURCE_DIR;
}

typedef struct {
    char dir[1024], so[1100], log[1100], cache[1100], model[1100], other[1100];
    int emits;                /* "ic: ptx:" log messages: ic_ptx_emit ran */
    int refused;              /* a cubin the driver refused */
    int other_gpu;            /* the load's note that the file was made on another GPU/driver */
} fixture;

static void on_log(void *user, int level, const char *msg)
{
    (void)level;
    fixture *f = user;
    f->emits += !strncmp(msg, "ic: ptx:", 8);
    f->refused += strstr(msg, "cached cubin was refused") != NULL;
    f->other_gpu += strstr(msg, "ic: artifact:") && strstr(msg, "made on") != NULL;
}

static void setup(fixture *f, const char *flags)
{
    memset(f, 0, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "%s", ict_tmpdir());
    snprintf(f->so, sizeof f->so, "%s/libcuda-fake.so", f->dir);
    snprintf(f->log, sizeof f->log, "%s/cuda.log", f->dir);
    snprintf(f->cache, sizeof f->cache, "%s/cache", f->dir);
    snprintf(f->model, sizeof f->model, "%s/m.icm", f->dir);
    snprintf(f->other, sizeof f->other, "%s/other.icm", f->dir);
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
    f->emits = f->refused = f->other_gpu = 0;
}

/* y = softmax(gelu(x @ w^T + b) * (x @ w2^T)), x [rows, 64] (rows: "128" or a symbol "B"). */
static float graph_w[N * K];

static ic_graph *make_graph(ic_ctx *c, const char *rows)
{
    static float w2[N * K], b[N];
    float *w = graph_w;
    for (int i = 0; i < N * K; i++)
        w[i] = (float)((i * 7) % 17 - 8) / 16.0f, w2[i] = (float)((i * 5) % 13 - 6) / 16.0f;
    for (int i = 0; i < N; i++)
        b[i] = (float)(i % 5 - 2) / 8.0f;
    char xs[64];
    snprintf(xs, sizeof xs, "%s,64", rows);
    ic_graph *g = ict_graph(c, "gsaved");
    ic_value x = ict_input(g, "x", IC_F32, xs), wv, w2v, bv, y, y2, ge, m, s;
    ic_dim ws[2], bs[1];
    ict_shape(g, "48,64", ws);
    ict_shape(g, "48", bs);
    cr_assert_eq(ic_graph_add_param(g, "w", IC_F32, 2, ws, w, sizeof graph_w, NULL, NULL, &wv), IC_OK);
    cr_assert_eq(ic_graph_add_param(g, "w2", IC_F32, 2, ws, w2, sizeof w2, NULL, NULL, &w2v), IC_OK);
    cr_assert_eq(ic_graph_add_param(g, "b", IC_F32, 1, bs, b, sizeof b, NULL, NULL, &bv), IC_OK);
    ic_operand in[3] = { { .node = x }, { .node = wv }, { .node = bv } };
    cr_assert_eq(ic_graph_add_node(g, "y", IC_OP_LINEAR, 3, in, NULL, &y), IC_OK);
    ic_operand in2[2] = { { .node = x }, { .node = w2v } };
    cr_assert_eq(ic_graph_add_node(g, "y2", IC_OP_LINEAR, 2, in2, NULL, &y2), IC_OK);
    cr_assert_eq(ic_graph_unary(g, "ge", IC_OP_GELU, (ic_operand){ .node = y }, &ge), IC_OK);
    cr_assert_eq(ic_graph_binary(g, "m", IC_OP_MUL, (ic_operand){ .node = ge }, (ic_operand){ .node = y2 }, &m),
                 IC_OK);
    ic_attrs a;
    ic_attrs_init(&a, IC_OP_SOFTMAX);
    a.dim = 1;
    cr_assert_eq(ic_graph_add_node(g, "s", IC_OP_SOFTMAX, 1, (ic_operand[]){ { .node = m } }, &a, &s), IC_OK);
    cr_assert_eq(ic_graph_add_output(g, s), IC_OK);
    return g;
}

/* Uploads rows x 64 inputs, launches, downloads (the stand-in's kernels do nothing: the run
 * shows only that every kernel launches). */
static void run_rows(ic_ctx *c, ic_cuda_compiled *cc, int rows)
{
    float *x = calloc((size_t)rows * K, sizeof *x), *out = calloc((size_t)rows * N, sizeof *out);
    ic_tensor arg, o;
    ic_tensor_init(&arg, IC_F32, 2, (int64_t[]){ rows, K }, x);
    ic_tensor_init(&o, IC_F32, 2, (int64_t[]){ rows, N }, out);
    cr_assert_eq(ic_cuda_run(cc, 1, &arg, 1, &o), IC_OK, "run: %s", ic_last_error(c));
    free(x);
    free(out);
}

/* What one variant has: its kernels' launch data and PTX. */
typedef struct {
    int nk, ncode;
    ic_ptx_kernel k[64];
    char names[64][256], entries[64][256];
    int args[64][64];
    char *ptx;
} result;

static void keep(result *r, const ic_cuda_compiled *cc)
{
    r->nk = ic_cuda_compiled_num_kernels(cc);
    r->ncode = 0;
    cr_assert(r->nk > 0 && r->nk <= 64);
    for (int i = 0; i < r->nk; i++) {
        const ic_ptx_kernel *k = ic_cuda_compiled_kernel(cc, i);
        r->k[i] = *k;
        r->ncode += k->code == i;
        snprintf(r->names[i], 256, "%s", k->name);
        snprintf(r->entries[i], 256, "%s", k->entry);
        cr_assert(k->nargs <= 64);
        memcpy(r->args[i], k->args, sizeof(int) * (size_t)k->nargs);
    }
    r->ptx = strdup(ic_cuda_compiled_ptx(cc));
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

/* Compiles g (cache on or off) on the stand-in, runs it at `rows`, saves it (f->model; and
 * f->other with the weights the other way); *r: its kernels. */
static void compile_and_save(fixture *f, ic_graph *(*make)(ic_ctx *, const char *), const char *rows, int run_rows_n,
                             bool no_cache, bool with_weights, result *r)
{
    ic_ctx *c = context(f, no_cache);
    ic_graph *g = make(c, rows);
    ic_cuda *d = NULL;
    cr_assert_eq(ic_cuda_open(c, 0, &d), IC_OK, "%s", ic_last_error(c));
    ic_cuda_compiled *cc = NULL;
    cr_assert_eq(ic_cuda_compile(d, g, NULL, &cc), IC_OK, "%s", ic_last_error(c));
    run_rows(c, cc, run_rows_n);
    keep(r, cc);
    cr_assert_eq(ic_cuda_compiled_save(cc, f->model, with_weights), IC_OK, "save: %s", ic_last_error(c));
    cr_assert_eq(ic_cuda_compiled_save(cc, f->other, !with_weights), IC_OK, "save: %s", ic_last_error(c));
    ic_cuda_compiled_destroy(cc);
    ic_graph_destroy(g);
    ic_cuda_close(d);
    ic_ctx_destroy(c);
}

/* Loads f->model in a fresh context with the cache off; NULL and *status on failure. */
static ic_cuda_compiled *load(fixture *f, ic_ctx **cp, ic_cuda **dp, ic_status *status)
{
    ic_ctx *c = *cp = context(f, true);
    cr_assert_eq(ic_cuda_open(c, 0, dp), IC_OK, "%s", ic_last_error(c));
    ic_cuda_compiled *cc = NULL;
    *status = ic_cuda_compiled_load(*dp, f->model, &cc);
    return cc;
}

static void close_all(ic_ctx *c, ic_cuda *d, ic_cuda_compiled *cc)
{
    ic_cuda_compiled_destroy(cc);
    ic_cuda_close(d);
    ic_ctx_destroy(c);
}

/* Loads f->model and checks: no PTX emitted, nothing compiled, every module from its cubin,
 * the same kernels as `want`, and it runs (every kernel launched). */
static void load_and_check(fixture *f, const result *want, int rows)
{
    clear_log(f);
    ic_ctx *c;
    ic_cuda *d;
    ic_status s;
    ic_cuda_compiled *cc = load(f, &c, &d, &s);
    cr_assert_eq(s, IC_OK, "load: %s", ic_last_error(c));
    cr_assert_eq(f->emits, 0, "no PTX emitted by a load");
    cr_assert_eq(logged(f, "link"), 0, "no PTX compiled by a load");
    cr_assert_eq(logged(f, "module_load"), 0, "no PTX JIT-loaded by a load");
    cr_assert_eq(logged(f, "module_load_cubin"), want->ncode, "every module from its cubin");
    cr_assert_not_null(ic_cuda_compiled_graph(cc));
    cr_assert_str_eq(ic_graph_name(ic_cuda_compiled_graph(cc)), "gsaved");
    run_rows(c, cc, rows);
    result got;
    keep(&got, cc);
    assert_same_kernels(want, &got);
    cr_assert_eq(logged(f, "launch"), want->nk, "every kernel launched once");
    cr_assert_eq(f->emits, 0, "no PTX emitted by the run either");
    free(got.ptx);
    close_all(c, d, cc);
}

Test(gpu_artifact, round_trip_with_weights_loads_cubins_and_emits_nothing)
{
    fixture f;
    setup(&f, "");
    result r;
    compile_and_save(&f, make_graph, "128", 128, false, true, &r);
    load_and_check(&f, &r, 128);
    free(r.ptx);
    ict_rmtree(f.dir);
}

Test(gpu_artifact, the_cache_off_still_saves_cubins)
{
    fixture f;
    setup(&f, "");
    result r;
    compile_and_save(&f, make_graph, "128", 128, true, true, &r);
    load_and_check(&f, &r, 128);
    free(r.ptx);
    ict_rmtree(f.dir);
}

/* Whether the file at path holds the data of param w (make_graph). */
static bool holds_weights(const char *path)
{
    size_t n = 0;
    char *data = ict_read_file(path, &n);
    bool found = memmem(data, n, graph_w, sizeof graph_w) != NULL;
    free(data);
    return found;
}

/* The graph saved to JSON (its weights into a safetensors file beside it) and loaded back. */
static char st_path[1200];
static ic_graph *file_graph(ic_ctx *c, const char *rows)
{
    ic_graph *mem = make_graph(c, rows), *g = NULL;
    char json[1200];
    snprintf(json, sizeof json, "%s", st_path);
    *strrchr(json, '.') = 0;
    strcat(json, ".json");
    cr_assert_eq(ic_graph_save_json(mem, json), IC_OK, "%s", ic_last_error(c));
    cr_assert_eq(ic_graph_load_json(c, json, &g), IC_OK, "%s", ic_last_error(c));
    ic_graph_destroy(mem);
    return g;
}

Test(gpu_artifact, round_trip_without_weights_reads_the_safetensors_file)
{
    fixture f;
    setup(&f, "");
    snprintf(st_path, sizeof st_path, "%s/g.safetensors", f.dir);
    result r;
    compile_and_save(&f, file_graph, "128", 128, false, false, &r);
    load_and_check(&f, &r, 128);
    /* the file names the safetensors file: gone, the load says which */
    cr_assert_eq(unlink(st_path), 0);
    ic_ctx *c;
    ic_cuda *d;
    ic_status s;
    ic_cuda_compiled *cc = load(&f, &c, &d, &s);
    ict_assert_error(c, s, IC_EIO, "m.icm", "g.safetensors");
    cr_assert_null(cc);
    close_all(c, d, NULL);
    /* with the weights the file holds them (w's data), without it does not, and it needs no
     * safetensors file */
    cr_assert(holds_weights(f.other), "w's data is not in the file saved with weights");
    cr_assert(!holds_weights(f.model), "w's data is in the file saved without weights");
    cr_assert_eq(rename(f.other, f.model), 0);
    load_and_check(&f, &r, 128);
    free(r.ptx);
    ict_rmtree(f.dir);
}

Test(gpu_artifact, every_variant_is_saved_and_a_new_size_compiles)
{
    fixture f;
    setup(&f, "");
    ic_ctx *c = context(&f, false);
    ic_graph *g = make_graph(c, "B");
    ic_cuda *d = NULL;
    cr_assert_eq(ic_cuda_open(c, 0, &d), IC_OK, "%s", ic_last_error(c));
    ic_cuda_compiled *cc = NULL;
    cr_assert_eq(ic_cuda_compile(d, g, NULL, &cc), IC_OK, "%s", ic_last_error(c));
    ic_status s = ic_cuda_compiled_save(cc, f.model, true);
    ict_assert_error(c, s, IC_EINVAL, "m.icm", "no compiled code yet");
    result r64, r256;
    run_rows(c, cc, 64);
    keep(&r64, cc);
    run_rows(c, cc, 256);
    keep(&r256, cc);
    cr_assert_eq(ic_cuda_compiled_save(cc, f.model, true), IC_OK, "%s", ic_last_error(c));
    ic_cuda_compiled_destroy(cc);
    ic_graph_destroy(g); /* the loaded model has its own */
    close_all(c, d, NULL);

    clear_log(&f);
    ic_cuda *d2;
    cc = load(&f, &c, &d2, &s);
    cr_assert_eq(s, IC_OK, "load: %s", ic_last_error(c));
    cr_assert_eq(f.emits, 0, "both variants from the file");
    cr_assert_eq(logged(&f, "link") + logged(&f, "module_load"), 0);
    result got;
    run_rows(c, cc, 64);
    keep(&got, cc);
    assert_same_kernels(&r64, &got);
    free(got.ptx);
    run_rows(c, cc, 256);
    keep(&got, cc);
    assert_same_kernels(&r256, &got);
    free(got.ptx);
    cr_assert_eq(f.emits, 0);
    run_rows(c, cc, 32); /* a size the file lacks compiles */
    cr_assert_eq(f.emits, 1, "a new size emits its PTX");
    close_all(c, d2, cc);
    free(r64.ptx);
    free(r256.ptx);
    ict_rmtree(f.dir);
}

Test(gpu_artifact, a_refused_cubin_is_compiled_from_its_ptx)
{
    fixture f;
    setup(&f, "");
    result r;
    compile_and_save(&f, make_graph, "128", 128, false, true, &r);
    clear_log(&f);
    setenv("IC_FAKE_CUDA_NAME", "Other GPU of the same sm", 1); /* its loader refuses our cubins */
    ic_ctx *c;
    ic_cuda *d;
    ic_status s;
    ic_cuda_compiled *cc = load(&f, &c, &d, &s);
    cr_assert_eq(s, IC_OK, "load: %s", ic_last_error(c));
    cr_assert_eq(f.other_gpu, 1, "the load says the file was made on another GPU");
    cr_assert_eq(f.refused, r.ncode, "each cubin refused, logged");
    cr_assert_eq(logged(&f, "link"), r.ncode, "and compiled from its PTX");
    cr_assert_eq(f.emits, 0, "the PTX comes from the file");
    run_rows(c, cc, 128);
    result got;
    keep(&got, cc);
    assert_same_kernels(&r, &got);
    free(got.ptx);
    close_all(c, d, cc);
    unsetenv("IC_FAKE_CUDA_NAME");
    free(r.ptx);
    ict_rmtree(f.dir);
}

/* Replaces the first `from` in the file by `to` (same length): a file made elsewhere. */
static void patch(const char *path, const char *from, const char *to)
{
    size_t n = 0;
    char *data = ict_read_file(path, &n);
    cr_assert_eq(strlen(from), strlen(to));
    char *at = memmem(data, n, from, strlen(from));
    cr_assert_not_null(at, "'%s' not in %s", from, path);
    memcpy(at, to, strlen(to));
    ict_write_file(path, data, n);
    free(data);
}

static void assert_refused(fixture *f, ic_status want, const char *part1, const char *part2)
{
    ic_ctx *c;
    ic_cuda *d;
    ic_status s;
    ic_cuda_compiled *cc = load(f, &c, &d, &s);
    ict_assert_error(c, s, want, "m.icm", part1, part2);
    cr_assert_null(cc);
    close_all(c, d, NULL);
}

Test(gpu_artifact, files_made_elsewhere_are_refused_by_name)
{
    fixture f;
    setup(&f, "");
    result r;
    compile_and_save(&f, make_graph, "128", 128, false, true, &r);
    free(r.ptx);
    size_t n = 0;
    char *orig = ict_read_file(f.model, &n), ver[64];

    patch(f.model, "\nsm 90\n", "\nsm 80\n");
    assert_refused(&f, IC_EUNSUPPORTED, "compute capability 8.0", "this GPU");
    ict_write_file(f.model, orig, n);

    patch(f.model, "device cuda", "device cpux");
    assert_refused(&f, IC_EUNSUPPORTED, "saved for device 'cpux'", "'cuda'");
    ict_write_file(f.model, orig, n);

    snprintf(ver, sizeof ver, "ic %s\n", ic_version());
    char other[64];
    snprintf(other, sizeof other, "%s", ver);
    other[3] = other[3] == '9' ? '8' : '9';
    patch(f.model, ver, other);
    assert_refused(&f, IC_EUNSUPPORTED, "saved by ic", "this is ic");
    ict_write_file(f.model, orig, n);

    snprintf(ver, sizeof ver, "\nbuild %s\n", ic_build_id());
    snprintf(other, sizeof other, "%s", ver);
    other[7] = other[7] == 'x' ? 'y' : 'x';
    patch(f.model, ver, other);
    assert_refused(&f, IC_EUNSUPPORTED, "another build", "save it again");
    ict_write_file(f.model, orig, n);

    patch(f.model, "\nllvm 1", "\nllvm 2");
    assert_refused(&f, IC_EUNSUPPORTED, "saved with LLVM 2", "this ic uses LLVM 1");
    ict_write_file(f.model, orig, n);

    /* a CPU loader refuses it too, and the GPU loader a CPU model */
    ic_ctx *c = context(&f, true);
    ic_compiled *ccpu = NULL;
    ic_status s = ic_compiled_load(c, f.model, &ccpu);
    ict_assert_error(c, s, IC_EUNSUPPORTED, "m.icm", "saved for device 'cuda'", "ic_compiled_load");
    ic_graph *g = make_graph(c, "16");
    cr_assert_eq(ic_compile(c, g, NULL, &ccpu), IC_OK, "%s", ic_last_error(c));
    cr_assert_eq(ic_compiled_save(ccpu, f.model, true), IC_OK, "%s", ic_last_error(c));
    ic_compiled_destroy(ccpu);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
    assert_refused(&f, IC_EUNSUPPORTED, "saved for device 'cpu'", "ic_cuda_compiled_load");
    free(orig);
    ict_rmtree(f.dir);
}

Test(gpu_artifact, truncated_and_damaged_files_are_errors)
{
    fixture f;
    setup(&f, "");
    result r;
    compile_and_save(&f, make_graph, "128", 128, false, true, &r);
    free(r.ptx);
    size_t n = 0;
    char *orig = ict_read_file(f.model, &n);
    ict_write_file(f.model, orig, n / 2);
    assert_refused(&f, IC_EFORMAT, "truncated", "section");
    ict_write_file(f.model, orig, 40);
    assert_refused(&f, IC_EFORMAT, "truncated", "header");
    /* a byte of the code changed: its section's checksum */
    char *bad = malloc(n);
    memcpy(bad, orig, n);
    char *at = memmem(bad, n, ".entry", 6);
    cr_assert_not_null(at);
    at[1] ^= 0x20;
    ict_write_file(f.model, bad, n);
    assert_refused(&f, IC_EFORMAT, "damaged", "gcode");
    free(bad);
    ict_write_file(f.model, "ICMODEL2", 8);
    assert_refused(&f, IC_EFORMAT, "truncated", "header");
    free(orig);
    ict_rmtree(f.dir);
}

Test(gpu_artifact, without_the_linker_the_file_holds_ptx_that_loading_jits)
{
    fixture f;
    setup(&f, "-DFAKE_NO_LINKER");
    result r;
    compile_and_save(&f, make_graph, "128", 128, false, true, &r);
    clear_log(&f);
    ic_ctx *c;
    ic_cuda *d;
    ic_status s;
    ic_cuda_compiled *cc = load(&f, &c, &d, &s);
    cr_assert_eq(s, IC_OK, "load: %s", ic_last_error(c));
    cr_assert_eq(f.emits, 0, "the PTX comes from the file");
    cr_assert_eq(logged(&f, "module_load"), r.ncode, "each module JIT-loaded from its PTX");
    cr_assert_eq(logged(&f, "module_load_cubin"), 0);
    run_rows(c, cc, 128);
    result got;
    keep(&got, cc);
    assert_same_kernels(&r, &got);
    free(got.ptx);
    close_all(c, d, cc);
    free(r.ptx);
    ict_rmtree(f.dir);
}

/* y = x @ w^T with w [1024, 768] f32: 3 MiB of weights, a section checked in several chunks. */
static ic_graph *large_graph(ic_ctx *c, const char *rows)
{
    enum { O = 1024, I = 768 };
    static float w[O * I];
    for (int i = 0; i < O * I; i++)
        w[i] = (float)(i % 29 - 14) / 32.0f;
    char xs[64];
    snprintf(xs, sizeof xs, "%s,768", rows);
    ic_graph *g = ict_graph(c, "gsaved");
    ic_value x = ict_input(g, "x", IC_F32, xs), wv, y;
    ic_dim ws[2];
    ict_shape(g, "1024,768", ws);
    cr_assert_eq(ic_graph_add_param(g, "w", IC_F32, 2, ws, w, sizeof w, NULL, NULL, &wv), IC_OK);
    ic_operand in[2] = { { .node = x }, { .node = wv } };
    cr_assert_eq(ic_graph_add_node(g, "y", IC_OP_LINEAR, 2, in, NULL, &y), IC_OK);
    cr_assert_eq(ic_graph_add_output(g, y), IC_OK);
    return g;
}

Test(gpu_artifact, large_weights_are_checked_in_chunks)
{
    fixture f;
    setup(&f, "");
    ic_ctx *c = context(&f, false);
    ic_graph *g = large_graph(c, "64");
    ic_cuda *d = NULL;
    cr_assert_eq(ic_cuda_open(c, 0, &d), IC_OK, "%s", ic_last_error(c));
    ic_cuda_compiled *cc = NULL;
    cr_assert_eq(ic_cuda_compile(d, g, NULL, &cc), IC_OK, "%s", ic_last_error(c));
    cr_assert_eq(ic_cuda_compiled_save(cc, f.model, true), IC_OK, "%s", ic_last_error(c));
    ic_cuda_compiled_destroy(cc);
    ic_graph_destroy(g);
    close_all(c, d, NULL);

    clear_log(&f);
    ic_status s;
    cc = load(&f, &c, &d, &s);
    cr_assert_eq(s, IC_OK, "load: %s", ic_last_error(c));
    cr_assert_eq(f.emits, 0);
    close_all(c, d, cc);
    /* one byte of the last MiB of the weights changed: its chunk's hash */
    size_t n = 0;
    unsigned char *data = ict_read_file(f.model, &n);
    cr_assert_gt(n, 3u << 20);
    size_t at = n - (1u << 19);
    while (data[at] == 0) /* a byte of the weights, not padding */
        at--;
    data[at] ^= 1;
    ict_write_file(f.model, data, n);
    free(data);
    assert_refused(&f, IC_EFORMAT, "damaged", "wdata");
    ict_rmtree(f.dir);
}

Test(gpu_artifact, a_tuned_model_loads_its_tuned_kernels_without_tuning)
{
    fixture f;
    setup(&f, "");
    ic_ctx *c = context(&f, true); /* no tuning records: the compile tunes */
    ic_graph *g = make_graph(c, "128");
    ic_cuda *d = NULL;
    cr_assert_eq(ic_cuda_open(c, 0, &d), IC_OK, "%s", ic_last_error(c));
    ic_cuda_options o;
    ic_cuda_options_init(&o);
    o.autotune = IC_TUNE_MAX;
    o.autotune_budget_s = 5;
    ic_cuda_compiled *cc = NULL;
    cr_assert_eq(ic_cuda_compile(d, g, &o, &cc), IC_OK, "%s", ic_last_error(c));
    ic_autotune_stats st;
    ic_cuda_compiled_autotune_stats(cc, &st);
    cr_assert_gt(st.tuned, 0, "the compile tuned");
    result r;
    keep(&r, cc);
    cr_assert_eq(ic_cuda_compiled_save(cc, f.model, false), IC_OK, "%s", ic_last_error(c));
    ic_cuda_compiled_destroy(cc);
    ic_graph_destroy(g);
    close_all(c, d, NULL);

    clear_log(&f);
    ic_status s;
    cc = load(&f, &c, &d, &s);
    cr_assert_eq(s, IC_OK, "load: %s", ic_last_error(c));
    ic_cuda_compiled_autotune_stats(cc, &st);
    cr_assert_eq(st.tuned + st.candidates + st.record_hits, 0, "a load tunes nothing");
    cr_assert_eq(f.emits, 0);
    result got;
    keep(&got, cc);
    assert_same_kernels(&r, &got);
    free(got.ptx);
    free(r.ptx);
    close_all(c, d, cc);
    ict_rmtree(f.dir);
}
