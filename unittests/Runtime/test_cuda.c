/* test_cuda.c - graphs run on a GPU through the CUDA driver (ic_cuda_*), compared with the
 * reference executor: the same cases as the PTX tests (every op, dtypes, launch-geometry
 * variants), the bundled graphs, reduce-overhead replays, symbolic shapes, the JIT error
 * log, the caching allocator and argument errors. Without a driver every GPU test is
 * skipped with the reason, and the "no CUDA driver found" message itself is checked. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "testutil.h"
#include "ic/lower.h"
#include "ic/fuse.h"
#include "ic/ptx.h"
#include "../PTX/ptx_cases.h"

static ic_cuda *open_or_skip(ic_ctx *c)
{
    ic_cuda *d = NULL;
    if (ic_cuda_open(c, 0, &d) != IC_OK)
        cr_skip_test("no CUDA GPU here: %s", ic_last_error(c));
    return d;
}

Test(cuda, a_missing_driver_is_reported)
{
    setenv("IC_CUDA_DRIVER", "libcuda-ic-missing.so.1", 1);
    ic_ctx *c = ict_ctx(); /* reads IC_CUDA_DRIVER */
    unsetenv("IC_CUDA_DRIVER");
    ic_cuda *d = (ic_cuda *)1;
    ic_status s = ic_cuda_open(c, 0, &d);
    ict_assert_error(c, s, IC_ECUDA, "no CUDA driver found (libcuda-ic-missing.so.1: ");
    cr_assert_null(d);
    ic_switches sw;
    ic_ctx_switches(c, &sw);
    sw.cuda_driver = NULL;
    cr_assert_eq(ic_ctx_set_switches(c, &sw), IC_OK);
    /* and the real one: found, or refused with that message */
    s = ic_cuda_open(c, 0, &d);
    if (s) {
        cr_assert_eq(s, IC_ECUDA, "%s", ic_last_error(c));
        const char *m = ic_last_error(c);
        cr_assert(strstr(m, "no CUDA driver found (libcuda.so.1: ") || strstr(m, "cuda: "),
                  "unexpected message: %s", m);
        /* visible in the plain output (cr_log_warn would turn the exit status to 1) */
        fprintf(stderr, "[SKIP] cuda: no CUDA driver, the GPU execution tests skip: %s\n", m);
    } else {
        ic_cuda_close(d);
    }
    ic_ctx_destroy(c);
}

static ic_cuda_options opts(ic_cuda_mode mode, bool no_fusion)
{
    ic_cuda_options o;
    ic_cuda_options_init(&o);
    o.mode = mode;
    o.no_fusion = no_fusion;
    return o;
}

/* Compiles g for d, runs args, compares every output with ref. */
static void run_and_compare(ic_ctx *c, ic_cuda *d, const char *name, const ic_graph *g,
                            const ic_cuda_options *o, const ic_tensor *args, int nargs,
                            const ic_tensor *ref, int nouts)
{
    ic_cuda_compiled *cc = NULL;
    ic_status s = ic_cuda_compile(d, g, o, &cc);
    cr_assert_eq(s, IC_OK, "%s: ic_cuda_compile: %s", name, ic_last_error(c));
    ic_tensor got[8];
    memset(got, 0, sizeof got);
    for (int rep = 0; rep < 2; rep++) { /* twice: a reduce-overhead replay too */
        s = ic_cuda_run(cc, nargs, args, nouts, got);
        cr_assert_eq(s, IC_OK, "%s: ic_cuda_run: %s", name, ic_last_error(c));
        for (int i = 0; i < nouts; i++) {
            char msg[1024];
            cr_assert(ict_allclose(&got[i], &ref[i], msg, sizeof msg), "%s (run %d): output %d: %s",
                      name, rep, i, msg);
            memset(got[i].data, 0xcd, (size_t)ic_tensor_numel(&got[i]) * ic_dtype_size(got[i].dtype));
        }
    }
    for (int i = 0; i < nouts; i++)
        ic_tensor_free(c, &got[i]);
    ic_cuda_compiled_destroy(cc);
}

static int kernels_of(ic_ctx *c, const ic_graph *g, bool fused)
{
    ic_program *p = NULL, *f = NULL;
    cr_assert_eq(ic_lower(c, g, &p), IC_OK, "%s", ic_last_error(c));
    if (fused) {
        ic_fuse_options fo;
        ic_fuse_options_init(&fo);
        cr_assert_eq(ic_fuse(c, p, &fo, &f), IC_OK, "%s", ic_last_error(c));
        ic_program_destroy(p);
        p = f;
    }
    int n = ic_program_num_kernels(p);
    ic_program_destroy(p);
    return n;
}

/* One device per test process: opening a primary context costs a few hundred ms. */
static ic_ctx *case_ctx;
static ic_cuda *case_dev;

static void gpu_case(const char *name, const char *json, unsigned flags, const ic_ptx_params *params)
{
    ic_ctx *c = case_ctx;
    ic_cuda *d = case_dev;
    ic_graph *g = graph_json(c, json);
    ic_tensor args[8], ref[8];
    int nargs = 0, nouts = ic_graph_num_outputs(g);
    make_args(c, g, flags, args, &nargs);
    cr_assert_eq(ic_ref_run(c, g, NULL, nargs, args, nouts, ref), IC_OK, "%s: %s", name, ic_last_error(c));
    char what[300];
    if (params) { /* one kernel per op (FUSEDONLY: the fused kernels), the params on each */
        bool fused = flags & FUSEDONLY;
        ic_cuda_options o = opts(IC_CUDA_DEFAULT, !fused);
        int nk = kernels_of(c, g, fused);
        ic_ptx_params *pp = calloc((size_t)nk, sizeof *pp);
        for (int i = 0; i < nk; i++)
            pp[i] = *params;
        o.params = pp;
        o.nparams = nk;
        snprintf(what, sizeof what, "%s (params)", name);
        run_and_compare(c, d, what, g, &o, args, nargs, ref, nouts);
        free(pp);
    } else {
        ic_cuda_options o = opts(IC_CUDA_DEFAULT, true);
        snprintf(what, sizeof what, "%s (unfused)", name);
        run_and_compare(c, d, what, g, &o, args, nargs, ref, nouts);
        if (!(flags & NOFUSE)) {
            o = opts(IC_CUDA_REDUCE_OVERHEAD, false);
            snprintf(what, sizeof what, "%s (fused, reduce-overhead)", name);
            run_and_compare(c, d, what, g, &o, args, nargs, ref, nouts);
        }
    }
    for (int i = 0; i < nargs; i++)
        ic_tensor_free(c, &args[i]);
    for (int i = 0; i < nouts; i++)
        ic_tensor_free(c, &ref[i]);
    ic_graph_destroy(g);
}

#define GPU_GROUP(name, group)                                                             \
    Test(cuda, name)                                                                       \
    {                                                                                      \
        case_ctx = ict_ctx();                                                              \
        case_dev = open_or_skip(case_ctx);                                                 \
        ptx_cases(group, gpu_case);                                                        \
        ic_cuda_close(case_dev);                                                           \
        ic_ctx_destroy(case_ctx);                                                          \
    }

GPU_GROUP(unary_ops_f32, CASES_UNARY)
GPU_GROUP(unary_ops_other_dtypes, CASES_UNARY_DTYPES)
GPU_GROUP(casts, CASES_CASTS)
GPU_GROUP(binary_ops, CASES_BINARY)
GPU_GROUP(reductions, CASES_REDUCE)
GPU_GROUP(normalisations, CASES_NORM)
GPU_GROUP(views_cat_gather_creation, CASES_VIEW)
GPU_GROUP(contractions, CASES_CONTRACT)
GPU_GROUP(geometry_rows, CASES_GEO_ROW)
GPU_GROUP(geometry_columns, CASES_GEO_COLUMN)
GPU_GROUP(geometry_pointwise, CASES_GEO_POINTWISE)
GPU_GROUP(gemm_f32, CASES_GEMM_F32)
GPU_GROUP(gemm_f16, CASES_GEMM_F16)
GPU_GROUP(gemm_bf16, CASES_GEMM_BF16)
GPU_GROUP(gemm_params, CASES_GEMM_PARAMS)
GPU_GROUP(rows_split_across_blocks, CASES_SPLIT_ROWS)
GPU_GROUP(gemm_wgmma, CASES_WGMMA)
GPU_GROUP(columns_split_across_blocks, CASES_SPLIT_COLUMNS)
GPU_GROUP(implicit_gemm_convs, CASES_ICONV)

Test(cuda, bundled_graphs)
{
    static const char *files[] = { "seed_pattern.json", "bert_ffn.json", "attention.json", "tiny_mlp.json" };
    ic_ctx *c = ict_ctx();
    ic_cuda *d = open_or_skip(c);
    for (size_t f = 0; f < sizeof files / sizeof *files; f++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/benchmarks/graphs/%s", source_dir(), files[f]);
        ic_graph *g = NULL, *sg = NULL;
        cr_assert_eq(ic_graph_load_json(c, path, &g), IC_OK, "%s", ic_last_error(c));
        int64_t vals[8] = { 1, 1, 1, 1, 1, 1, 1, 1 };
        cr_assert_eq(ic_graph_specialize(g, vals, &sg), IC_OK, "%s", ic_last_error(c));
        ic_tensor args[8], ref[8];
        int nargs = 0, nouts = ic_graph_num_outputs(sg);
        make_args(c, sg, 0, args, &nargs);
        cr_assert_eq(ic_ref_run(c, sg, NULL, nargs, args, nouts, ref), IC_OK, "%s", ic_last_error(c));
        ic_cuda_options o = opts(IC_CUDA_DEFAULT, false);
        run_and_compare(c, d, files[f], sg, &o, args, nargs, ref, nouts);
        o = opts(IC_CUDA_REDUCE_OVERHEAD, false);
        run_and_compare(c, d, files[f], sg, &o, args, nargs, ref, nouts);
        for (int i = 0; i < nargs; i++)
            ic_tensor_free(c, &args[i]);
        for (int i = 0; i < nouts; i++)
            ic_tensor_free(c, &ref[i]);
        ic_graph_destroy(sg);
        ic_graph_destroy(g);
    }
    ic_cuda_close(d);
    ic_ctx_destroy(c);
}

Test(cuda, reduce_overhead_replays_see_new_data_and_shapes)
{
    ic_ctx *c = ict_ctx();
    ic_cuda *d = open_or_skip(c);
    ic_graph *g = graph_json(c, "{'ic_graph':1,'name':'sym','inputs':[{'name':'x','dtype':'f32','shape':['B',64]}],"
                                "'nodes':[{'name':'e','op':'exp','inputs':['x']},"
                                "{'name':'y','op':'softmax','inputs':['e'],'attrs':{'dim':-1}}],'outputs':['y']}");
    ic_cuda_options o = opts(IC_CUDA_REDUCE_OVERHEAD, false);
    ic_cuda_compiled *cc = NULL;
    cr_assert_eq(ic_cuda_compile(d, g, &o, &cc), IC_OK, "%s", ic_last_error(c));
    static const int64_t Bs[] = { 2, 5, 2, 7, 5 };
    for (size_t r = 0; r < sizeof Bs / sizeof *Bs; r++) {
        int64_t sh[2] = { Bs[r], 64 };
        ic_tensor x, got, want;
        ic_tensor_init(&x, IC_F32, 2, sh, NULL);
        cr_assert_eq(ic_tensor_alloc(c, &x), IC_OK);
        for (int64_t i = 0; i < Bs[r] * 64; i++)
            ic_tensor_set(&x, i, sin((double)(i + 7 * r)));
        int64_t vals[1] = { Bs[r] };
        cr_assert_eq(ic_ref_run(c, g, vals, 1, &x, 1, &want), IC_OK, "%s", ic_last_error(c));
        memset(&got, 0, sizeof got);
        cr_assert_eq(ic_cuda_run(cc, 1, &x, 1, &got), IC_OK, "B=%lld: %s", (long long)Bs[r], ic_last_error(c));
        char msg[1024];
        cr_assert(ict_allclose(&got, &want, msg, sizeof msg), "B=%lld run %zu: %s", (long long)Bs[r], r, msg);
        ic_tensor_free(c, &x);
        ic_tensor_free(c, &got);
        ic_tensor_free(c, &want);
    }
    cr_assert_eq(ic_cuda_compiled_num_kernels(cc), 1, "exp + softmax fuse into one kernel, got %d",
                 ic_cuda_compiled_num_kernels(cc));
    ic_cuda_compiled_destroy(cc);
    ic_graph_destroy(g);
    ic_cuda_close(d);
    ic_ctx_destroy(c);
}

/* IC_PROFILE on the GPU: events around each kernel, the table printed at destroy names every
 * kernel and counts every run, in reduce-overhead mode too (profiled runs skip the graph). */
Test(cuda, profile_prints_every_kernel_at_destroy)
{
    ic_ctx *c = ict_ctx();
    ic_cuda *d = open_or_skip(c);
    ic_graph *g = graph_json(c, "{'ic_graph':1,'name':'prof','inputs':[{'name':'x','dtype':'f32','shape':[64,64]}],"
                                "'nodes':[{'name':'m','op':'matmul','inputs':['x','x']},"
                                "{'name':'y','op':'softmax','inputs':['m'],'attrs':{'dim':-1}}],'outputs':['y']}");
    ic_switches sw;
    ic_ctx_switches(c, &sw);
    sw.profile = true;
    cr_assert_eq(ic_ctx_set_switches(c, &sw), IC_OK);
    ic_cuda_options o = opts(IC_CUDA_REDUCE_OVERHEAD, false);
    ic_cuda_compiled *cc = NULL;
    cr_assert_eq(ic_cuda_compile(d, g, &o, &cc), IC_OK, "%s", ic_last_error(c));
    int nk = ic_cuda_compiled_num_kernels(cc);
    cr_assert_eq(nk, 2, "matmul and softmax: %d kernels", nk);
    char names[2][128];
    for (int k = 0; k < nk; k++)
        snprintf(names[k], sizeof names[k], "%s", ic_cuda_compiled_kernel(cc, k)->name);
    int64_t sh[2] = { 64, 64 };
    ic_tensor x, got, want;
    ic_tensor_init(&x, IC_F32, 2, sh, NULL);
    cr_assert_eq(ic_tensor_alloc(c, &x), IC_OK);
    for (int64_t i = 0; i < 64 * 64; i++)
        ic_tensor_set(&x, i, sin((double)i) * 0.1);
    cr_assert_eq(ic_ref_run(c, g, NULL, 1, &x, 1, &want), IC_OK, "%s", ic_last_error(c));
    for (int r = 0; r < 3; r++) {
        memset(&got, 0, sizeof got);
        cr_assert_eq(ic_cuda_run(cc, 1, &x, 1, &got), IC_OK, "%s", ic_last_error(c));
        char msg[1024];
        cr_assert(ict_allclose(&got, &want, msg, sizeof msg), "run %d: %s", r, msg);
        ic_tensor_free(c, &got);
    }
    const char *dir = ict_tmpdir();
    char path[1024];
    snprintf(path, sizeof path, "%s", ict_path(dir, "stderr.txt"));
    fflush(stderr);
    int saved = dup(2);
    cr_assert(freopen(path, "w", stderr), "cannot redirect stderr");
    ic_cuda_compiled_destroy(cc);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    size_t n;
    char *raw = ict_read_file(path, &n), *text = raw ? realloc(raw, n + 1) : NULL;
    cr_assert(text, "no profile written");
    text[n] = 0;
    cr_assert(strstr(text, "ic: profile of 'prof' on the GPU (2 kernels, 3 runs)"), "%s", text);
    for (int k = 0; k < nk; k++)
        cr_assert(strstr(text, names[k]), "kernel '%s' missing from the profile:\n%s", names[k], text);
    cr_assert(strstr(text, "all kernels"), "%s", text);
    free(text);
    ict_rmtree(dir);
    ic_tensor_free(c, &x);
    ic_tensor_free(c, &want);
    ic_graph_destroy(g);
    ic_cuda_close(d);
    ic_ctx_destroy(c);
}

Test(cuda, the_jit_log_is_in_the_message)
{
    ic_ctx *c = ict_ctx();
    ic_cuda *d = open_or_skip(c);
    ic_cuda_module *m = NULL;
    ic_status s = ic_cuda_module_load(d, ".version 8.0\n.target sm_90\n.address_size 64\n"
                                         ".visible .entry broken()\n{\n  frobnicate.u32 %r1;\n}\n", &m);
    ict_assert_error(c, s, IC_ECUDA, "cuModuleLoadDataEx", "line");
    cr_assert_null(m);
    ic_cuda_close(d);
    ic_ctx_destroy(c);
}

Test(cuda, the_caching_allocator_reuses_blocks)
{
    ic_ctx *c = ict_ctx();
    ic_cuda *d = open_or_skip(c);
    uint64_t a = 0, b = 0, e = 0;
    size_t cached, used;
    cr_assert_eq(ic_cuda_alloc(d, 1000, &a), IC_OK, "%s", ic_last_error(c));
    ic_cuda_alloc_stats(d, &cached, &used);
    cr_assert(used >= 1000 && cached == 0, "in use %zu cached %zu", used, cached);
    ic_cuda_free(d, a);
    ic_cuda_alloc_stats(d, &cached, &used);
    cr_assert(used == 0 && cached >= 1000, "in use %zu cached %zu", used, cached);
    cr_assert_eq(ic_cuda_alloc(d, 900, &b), IC_OK);
    cr_assert_eq(a, b, "a block of the same bucket is reused: %llx vs %llx", (unsigned long long)a,
                 (unsigned long long)b);
    cr_assert_eq(ic_cuda_alloc(d, 5000, &e), IC_OK);
    cr_assert_neq(e, b);
    ic_cuda_free(d, b);
    ic_cuda_free(d, e);
    ic_cuda_trim(d);
    ic_cuda_alloc_stats(d, &cached, &used);
    cr_assert(cached == 0 && used == 0, "after trim: cached %zu in use %zu", cached, used);
    double gbps = 0;
    cr_assert_eq(ic_cuda_copy_bandwidth(d, (size_t)64 << 20, 5, &gbps), IC_OK, "%s", ic_last_error(c));
    cr_assert(gbps > 1, "device-to-device copies at %g GB/s", gbps);
    ic_cuda_close(d);
    ic_ctx_destroy(c);
}

Test(cuda, bad_arguments_are_refused)
{
    ic_ctx *c = ict_ctx();
    ic_cuda *d = open_or_skip(c);
    ic_graph *g = graph_json(c, GRAPH(IN("x", "f32", "[4,8]"), "{'name':'y','op':'exp','inputs':['x']}", "'y'"));
    ic_cuda_compiled *cc = NULL;
    cr_assert_eq(ic_cuda_compile(d, g, NULL, &cc), IC_OK, "%s", ic_last_error(c));
    float buf[32] = { 0 };
    ic_tensor x, y;
    ic_tensor_init(&x, IC_F32, 2, (int64_t[]){ 4, 7 }, buf);
    /* the shared variant cache binds the arguments first, as ic_run does: a located shape error */
    ict_assert_error(c, ic_cuda_run(cc, 1, &x, 1, &y), IC_ESHAPE, "'x'", "[4, 7]", "[4, 8]");
    ict_assert_error(c, ic_cuda_run(cc, 0, NULL, 1, &y), IC_EINVAL, "takes 1 arguments");
    ic_tensor_init(&x, IC_F32, 2, (int64_t[]){ 4, 8 }, buf);
    ic_tensor_init(&y, IC_F32, 2, (int64_t[]){ 8, 4 }, buf);
    ict_assert_error(c, ic_cuda_run(cc, 1, &x, 1, &y), IC_EINVAL, "output 0");
    ic_cuda_options bad = opts(IC_CUDA_DEFAULT, false);
    ic_ptx_params p[2] = { { .vec = 3 }, { 0 } };
    bad.params = p;
    bad.nparams = 1;
    ic_cuda_compiled *cc2 = NULL;
    ict_assert_error(c, ic_cuda_compile(d, g, &bad, &cc2), IC_EINVAL, "vec");
    bad.nparams = 2;
    ict_assert_error(c, ic_cuda_compile(d, g, &bad, &cc2), IC_EINVAL, "2 launch params");
    ic_cuda_compiled_destroy(cc);
    ic_graph_destroy(g);
    ic_cuda_close(d);
    ic_ctx_destroy(c);
}
