/* test_producer_fusion.c - a matmul's cheap pointwise producers (casts between float dtypes,
 * scaling by a number, neg) fuse into the GEMM's operand loads on the CPU: the graph compiles
 * to one kernel named after the producer and the matmul, which goes through the packed GEMM
 * path (the producer runs as the panels are packed), and matches the reference executor for
 * odd sizes (M, N, K in {1, 3, 17, 64, 129}), batch broadcasting and transposed views.
 * Expensive producers, and producers of computed values (which their own kernel applies as an
 * epilogue), are still materialised. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "ic/lower.h"
#include "ic/fuse.h"
#include "../PTX/ptx_cases.h"

typedef struct {
    const char *name;
    const char *name_has; /* the producer in the kernel's name */
} variant;

enum { V_CAST_A, V_CAST_B, V_LINEAR, V_TO_BF16, V_SCALE_NEG, V_BROADCAST, V_TRANSPOSED, V_F64, NVARIANTS };

static const variant variants[NVARIANTS] = {
    { "matmul(x_bf16.to(f32), w)", "cast_matmul" },
    { "matmul(x, w_f16.to(f32))", "cast_matmul" },
    { "linear(x_bf16.to(f32), w, b)", "cast_linear" },
    { "matmul(x_f32.to(bf16), w_bf16)", "cast_matmul" },
    { "matmul(x * 0.125, -w)", "mul_neg_matmul" },
    { "matmul(x_bf16[2,1,M,K].to(f32), w[3,K,N])", "cast_matmul" },
    { "matmul(x_bf16[K,M].T.to(f32), w_bf16[N,K].to(f32).T)", "cast" },
    { "matmul(x_f64.to(f32), w)", "cast_matmul" },
};

/* The graph of variant v for sizes M, N, K (JSON, single quotes). */
static const char *variant_json(char *buf, size_t n, int v, int64_t M, int64_t N, int64_t K)
{
    long long m = M, nn = N, k = K;
    switch (v) {
    case V_CAST_A:
        snprintf(buf, n, GRAPH("{'name':'x','dtype':'bf16','shape':[%lld,%lld]},{'name':'w','dtype':'f32','shape':[%lld,%lld]}",
                               "{'name':'xc','op':'cast','inputs':['x'],'attrs':{'dtype':'f32'}},"
                               "{'name':'y','op':'matmul','inputs':['xc','w']}", "'y'"), m, k, k, nn);
        break;
    case V_CAST_B:
        snprintf(buf, n, GRAPH("{'name':'x','dtype':'f32','shape':[%lld,%lld]},{'name':'w','dtype':'f16','shape':[%lld,%lld]}",
                               "{'name':'wc','op':'cast','inputs':['w'],'attrs':{'dtype':'f32'}},"
                               "{'name':'y','op':'matmul','inputs':['x','wc']}", "'y'"), m, k, k, nn);
        break;
    case V_LINEAR:
        snprintf(buf, n, GRAPH("{'name':'x','dtype':'bf16','shape':[%lld,%lld]},{'name':'w','dtype':'f32','shape':[%lld,%lld]},"
                               "{'name':'b','dtype':'f32','shape':[%lld]}",
                               "{'name':'xc','op':'cast','inputs':['x'],'attrs':{'dtype':'f32'}},"
                               "{'name':'y','op':'linear','inputs':['xc','w','b']}", "'y'"), m, k, nn, k, nn);
        break;
    case V_TO_BF16:
        snprintf(buf, n, GRAPH("{'name':'x','dtype':'f32','shape':[%lld,%lld]},{'name':'w','dtype':'bf16','shape':[%lld,%lld]}",
                               "{'name':'xc','op':'cast','inputs':['x'],'attrs':{'dtype':'bf16'}},"
                               "{'name':'y','op':'matmul','inputs':['xc','w']}", "'y'"), m, k, k, nn);
        break;
    case V_SCALE_NEG:
        snprintf(buf, n, GRAPH("{'name':'x','dtype':'f32','shape':[%lld,%lld]},{'name':'w','dtype':'f32','shape':[%lld,%lld]}",
                               "{'name':'xs','op':'mul','inputs':['x',0.125]},{'name':'wn','op':'neg','inputs':['w']},"
                               "{'name':'y','op':'matmul','inputs':['xs','wn']}", "'y'"), m, k, k, nn);
        break;
    case V_BROADCAST:
        snprintf(buf, n, GRAPH("{'name':'x','dtype':'bf16','shape':[2,1,%lld,%lld]},{'name':'w','dtype':'f32','shape':[3,%lld,%lld]}",
                               "{'name':'xc','op':'cast','inputs':['x'],'attrs':{'dtype':'f32'}},"
                               "{'name':'y','op':'matmul','inputs':['xc','w']}", "'y'"), m, k, k, nn);
        break;
    case V_TRANSPOSED:
        snprintf(buf, n, GRAPH("{'name':'x','dtype':'bf16','shape':[%lld,%lld]},{'name':'w','dtype':'bf16','shape':[%lld,%lld]}",
                               "{'name':'xt','op':'transpose','inputs':['x'],'attrs':{'dim0':0,'dim1':1}},"
                               "{'name':'xc','op':'cast','inputs':['xt'],'attrs':{'dtype':'f32'}},"
                               "{'name':'wc','op':'cast','inputs':['w'],'attrs':{'dtype':'f32'}},"
                               "{'name':'wt','op':'transpose','inputs':['wc'],'attrs':{'dim0':0,'dim1':1}},"
                               "{'name':'y','op':'matmul','inputs':['xc','wt']}", "'y'"), k, m, nn, k);
        break;
    default:
        snprintf(buf, n, GRAPH("{'name':'x','dtype':'f64','shape':[%lld,%lld]},{'name':'w','dtype':'f32','shape':[%lld,%lld]}",
                               "{'name':'xc','op':'cast','inputs':['x'],'attrs':{'dtype':'f32'}},"
                               "{'name':'y','op':'matmul','inputs':['xc','w']}", "'y'"), m, k, k, nn);
        break;
    }
    return buf;
}

/* Compiles json, checks one kernel named after the producer (and, when gemm, the packed GEMM
 * path), runs it and compares with the reference executor. */
static void check(const char *what, const char *json, const char *name_has, bool gemm)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = graph_json(c, json);
    ic_tensor args[8], want;
    int nargs = 0;
    make_args(c, g, 0, args, &nargs);
    cr_assert_eq(ic_ref_run(c, g, NULL, nargs, args, 1, &want), IC_OK, "%s: %s", what, ic_last_error(c));
    ic_compile_options o;
    ic_compile_options_init(&o);
    ic_compiled *cc = NULL;
    cr_assert_eq(ic_compile(c, g, &o, &cc), IC_OK, "%s: %s", what, ic_last_error(c));
    cr_assert_eq(ic_compiled_num_kernels(cc), 1, "%s: %d kernels (%s, ...)", what, ic_compiled_num_kernels(cc),
                 ic_compiled_kernel_name(cc, 0));
    const char *kn = ic_compiled_kernel_name(cc, 0);
    cr_assert(strstr(kn, name_has) && !strncmp(kn, "cpu_fused_", 10), "%s: kernel '%s' lacks '%s'", what, kn, name_has);
    if (gemm) {
        char *ir = ict_compile_dump(c, g, &o, "llvm");
        cr_assert(strstr(ir, ".gemm.packA") || strstr(ir, ".gemm.packB"), "%s: no packed GEMM", what);
        free(ir);
    }
    ic_tensor got;
    ic_tensor_init(&got, want.dtype, want.rank, want.shape, NULL);
    cr_assert_eq(ic_tensor_alloc(c, &got), IC_OK);
    memset(got.data, 0xff, (size_t)ic_tensor_numel(&got) * ic_dtype_size(got.dtype));
    cr_assert_eq(ic_run(cc, nargs, args, 1, &got), IC_OK, "%s: %s", what, ic_last_error(c));
    char msg[1024];
    cr_assert(ict_allclose(&got, &want, msg, sizeof msg), "%s: %s", what, msg);
    ic_tensor_free(c, &got);
    ic_tensor_free(c, &want);
    for (int i = 0; i < nargs; i++)
        ic_tensor_free(c, &args[i]);
    ic_compiled_destroy(cc);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* Every variant over M, N, K in {1, 3, 17, 64, 129}: each M with five (N, K) pairs, every size
 * once per M along N and along K. The packed-GEMM check on one mid-sized shape per variant. */
Test(producer, casts_and_scales_fuse_into_the_gemm_loads)
{
    static const int64_t sz[5] = { 1, 3, 17, 64, 129 };
    char json[2048], what[256];
    for (int v = 0; v < NVARIANTS; v++)
        for (int i = 0; i < 5; i++)
            for (int j = 0; j < 5; j++) {
                int64_t M = sz[i], N = sz[j], K = sz[(i + 2 * j) % 5];
                snprintf(what, sizeof what, "%s M %lld N %lld K %lld", variants[v].name, (long long)M, (long long)N,
                         (long long)K);
                check(what, variant_json(json, sizeof json, v, M, N, K), variants[v].name_has, false);
            }
    for (int v = 0; v < NVARIANTS; v++) {
        snprintf(what, sizeof what, "%s M 64 N 17 K 129", variants[v].name);
        check(what, variant_json(json, sizeof json, v, 64, 17, 129), variants[v].name_has, true);
    }
}

/* ic-dump --stage fused: the kernel names the producer, and the cast is not materialised. */
Test(producer, the_fused_stage_shows_one_kernel)
{
    ic_ctx *c = ict_ctx();
    char json[2048];
    ic_graph *g = graph_json(c, variant_json(json, sizeof json, V_CAST_A, 33, 40, 65));
    ic_compile_options o;
    ic_compile_options_init(&o);
    char *text = ict_compile_dump(c, g, &o, "fused");
    cr_assert(strstr(text, "kernel 0 cpu_fused_cast_matmul_0"), "fused stage:\n%s", text);
    cr_assert(!strstr(text, "kernel 1 "), "more than one kernel:\n%s", text);
    cr_assert(!strstr(text, "temp"), "the cast is materialised:\n%s", text);
    free(text);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* What stays materialised: an expensive producer (tanh: it would be recomputed per packing of
 * a panel), a producer of a computed value (relu of a matmul: the first matmul's epilogue),
 * and a producer that is also a graph output (stored once, then read). */
Test(producer, expensive_or_computed_producers_are_materialised)
{
    ic_ctx *c = ict_ctx();
    const char *cases[3] = {
        GRAPH(IN("x", "f32", "[17,33]") "," IN("w", "f32", "[33,9]"),
              "{'name':'t','op':'tanh','inputs':['x']},{'name':'y','op':'matmul','inputs':['t','w']}", "'y'"),
        GRAPH(IN("x", "f32", "[17,33]") "," IN("w", "f32", "[33,33]"),
              "{'name':'h','op':'matmul','inputs':['x','w']},{'name':'r','op':'relu','inputs':['h']},"
              "{'name':'y','op':'matmul','inputs':['r','w']}", "'y'"),
        GRAPH(IN("x", "bf16", "[17,33]") "," IN("w", "f32", "[33,9]"),
              "{'name':'xc','op':'cast','inputs':['x'],'attrs':{'dtype':'f32'}},{'name':'y','op':'matmul','inputs':['xc','w']}",
              "'y','xc'"),
    };
    static const char *first[3] = { "cpu_tanh_0", "cpu_fused_matmul_relu_0", "cpu_cast_0" };
    for (int i = 0; i < 3; i++) {
        ic_graph *g = graph_json(c, cases[i]);
        ic_program *p, *f;
        cr_assert_eq(ic_lower(c, g, &p), IC_OK, "%s", ic_last_error(c));
        cr_assert_eq(ic_fuse(c, p, NULL, &f), IC_OK, "%s", ic_last_error(c));
        cr_assert_eq(ic_program_num_kernels(f), 2, "case %d: %d kernels", i, ic_program_num_kernels(f));
        cr_assert_str_eq(ic_program_kernel(f, 0)->name, first[i], "case %d", i);
        ic_tensor args[8], want[2], got[2];
        int nargs = 0, nouts = ic_graph_num_outputs(g);
        make_args(c, g, 0, args, &nargs);
        cr_assert_eq(ic_ref_run(c, g, NULL, nargs, args, nouts, want), IC_OK);
        ic_compiled *cc;
        cr_assert_eq(ic_compile(c, g, NULL, &cc), IC_OK, "%s", ic_last_error(c));
        for (int o = 0; o < nouts; o++) {
            ic_tensor_init(&got[o], want[o].dtype, want[o].rank, want[o].shape, NULL);
            cr_assert_eq(ic_tensor_alloc(c, &got[o]), IC_OK);
        }
        cr_assert_eq(ic_run(cc, nargs, args, nouts, got), IC_OK, "%s", ic_last_error(c));
        for (int o = 0; o < nouts; o++) {
            ict_assert_allclose(&got[o], &want[o]);
            ic_tensor_free(c, &got[o]);
            ic_tensor_free(c, &want[o]);
        }
        for (int a = 0; a < nargs; a++)
            ic_tensor_free(c, &args[a]);
        ic_compiled_destroy(cc);
        ic_program_destroy(p);
        ic_program_destroy(f);
        ic_graph_destroy(g);
    }
    ic_ctx_destroy(c);
}
