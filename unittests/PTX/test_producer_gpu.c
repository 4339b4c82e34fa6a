/* test_producer_gpu.c - a matmul's cheap pointwise producers fused into the GPU GEMM's operand
 * loads, checked without a GPU: the fused program is one kernel mapped to the GEMM (for
 * outputs of 64 elements and more) whose PTX assembles with ptxas -arch=sm_90, and the host
 * emulator of the generated code matches the reference executor. A producer makes every
 * element of its operand go through the element-wise copy (the producer's instructions run
 * between the load and shared memory); x.to(bf16) @ w_bf16 stays on the bf16 tensor cores
 * (the cast's result is exact in bf16), x_bf16.to(f32) @ w_f32 takes FFMA, or TF32 with
 * allow_tf32. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "testutil.h"
#include "ic/lower.h"
#include "ic/fuse.h"
#include "ic/ptx.h"
#include "ptx_cases.h"
#include "ptxas.h"


#define MM(xdt, xs, wdt, ws, nodes) \
    "{'ic_graph':1,'name':'t','inputs':[{'name':'x','dtype':'" xdt "','shape':" xs "},{'name':'w','dtype':'" wdt \
    "','shape':" ws "}],'nodes':[" nodes "],'outputs':['y']}"
#define CAST(n, in, dt) "{'name':'" n "','op':'cast','inputs':['" in "'],'attrs':{'dtype':'" dt "'}},"

/* Fuses json, emits it (allow_tf32 as given), checks one kernel (GEMM when gemm), the PTX
 * instructions `want` (NULL: none), assembles, emulates and compares with the reference. */
static void check(const char *what, const char *json, bool gemm, bool tf32, const char *want)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = graph_json(c, json);
    ic_tensor args[8], ref, got;
    int nargs = 0;
    make_args(c, g, 0, args, &nargs);
    cr_assert_eq(ic_ref_run(c, g, NULL, nargs, args, 1, &ref), IC_OK, "%s: %s", what, ic_last_error(c));
    ic_program *p = NULL, *f = NULL;
    cr_assert_eq(ic_lower(c, g, &p), IC_OK, "%s", ic_last_error(c));
    ic_fuse_options fo;
    ic_fuse_options_init(&fo);
    fo.prefix = "gpu_";
    cr_assert_eq(ic_fuse(c, p, &fo, &f), IC_OK, "%s", ic_last_error(c));
    cr_assert_eq(ic_program_num_kernels(f), 1, "%s: %d kernels", what, ic_program_num_kernels(f));
    ic_ptx_options o = { .sm = 90, .allow_tf32 = tf32, .wgmma = -1 };
    ic_ptx_module *m = NULL;
    cr_assert_eq(ic_ptx_emit(c, f, &o, NULL, &m), IC_OK, "%s: %s", what, ic_last_error(c));
    const ic_ptx_kernel *k = ic_ptx_module_kernel(m, 0);
    cr_assert(strncmp(k->name, "gpu_fused_", 10) == 0, "%s: kernel %s", what, k->name);
    cr_assert_eq(k->mode == IC_PTX_GEMM, gemm, "%s: kernel %s mode %d", what, k->name, (int)k->mode);
    const char *text = ic_ptx_module_text(m);
    if (want)
        cr_assert(strstr(text, want), "%s: no '%s' in the PTX", what, want);
    char log[4096];
    cr_assert(assemble(text, log, sizeof log), "%s: ptxas refused the PTX:\n%s", what, log);
    ic_ptx_module_destroy(m);
    ic_tensor_init(&got, ref.dtype, ref.rank, ref.shape, NULL);
    cr_assert_eq(ic_tensor_alloc(c, &got), IC_OK);
    memset(got.data, 0xcd, (size_t)ic_tensor_numel(&got) * ic_dtype_size(got.dtype));
    cr_assert_eq(ic_ptx_emulate_opts(c, f, &o, NULL, args, nargs, &got, 1), IC_OK, "%s: %s", what, ic_last_error(c));
    char msg[1024];
    if (tf32) { /* TF32: bf16's tolerances (K <= 129 here: TF32's error is far below them) */
        cr_assert(ict_allclose_tol(&got, &ref, 1.6e-2, 1e-2, msg, sizeof msg), "%s: %s", what, msg);
    } else {
        cr_assert(ict_allclose(&got, &ref, msg, sizeof msg), "%s: %s", what, msg);
    }
    ic_tensor_free(c, &got);
    ic_tensor_free(c, &ref);
    for (int i = 0; i < nargs; i++)
        ic_tensor_free(c, &args[i]);
    ic_program_destroy(p);
    ic_program_destroy(f);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* Sizes from {1, 3, 17, 64, 129}: (M, N, K) spanning edges, tiny outputs (row reductions) and
 * whole tiles. */
static const int64_t shapes[][3] = {
    { 129, 64, 17 }, { 17, 129, 64 }, { 64, 17, 129 }, { 3, 129, 129 }, { 129, 3, 64 },
    { 1, 64, 129 }, { 64, 64, 64 }, { 129, 129, 3 }, { 3, 17, 17 },
};

Test(producer_gpu, casts_fuse_into_the_gemm_loads)
{
    char json[2048], what[256];
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        long long M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        bool gemm = M * N >= 64 && K > 1;
        snprintf(what, sizeof what, "x_bf16.to(f32) @ w_f32 %lldx%lldx%lld", M, K, N);
        snprintf(json, sizeof json, MM("bf16", "[%lld,%lld]", "f32", "[%lld,%lld]",
                                       CAST("xc", "x", "f32") "{'name':'y','op':'matmul','inputs':['xc','w']}"), M, K, K, N);
        check(what, json, gemm, false, NULL);
        snprintf(what, sizeof what, "(TF32) x_bf16.to(f32) @ w_f32 %lldx%lldx%lld", M, K, N);
        check(what, json, gemm, true, gemm ? "m16n8k8.row.col.f32.tf32" : NULL);
        snprintf(what, sizeof what, "x_f32.to(bf16) @ w_bf16 %lldx%lldx%lld", M, K, N);
        snprintf(json, sizeof json, MM("f32", "[%lld,%lld]", "bf16", "[%lld,%lld]",
                                       CAST("xc", "x", "bf16") "{'name':'y','op':'matmul','inputs':['xc','w']}"), M, K, K, N);
        check(what, json, gemm, false, gemm ? "m16n8k16.row.col.f32.bf16" : NULL);
        snprintf(what, sizeof what, "linear(x_f16.to(f32) * 0.5, w_f32) %lldx%lldx%lld", M, K, N);
        snprintf(json, sizeof json, MM("f16", "[%lld,%lld]", "f32", "[%lld,%lld]",
                                       CAST("xc", "x", "f32") "{'name':'xs','op':'mul','inputs':['xc',0.5]},"
                                       "{'name':'y','op':'linear','inputs':['xs','w']}"), M, K, N, K);
        check(what, json, gemm, false, NULL);
    }
}

/* Batch broadcasting, transposed views on both sides, a 16-bit cast on both operands
 * (tensor cores with converting copies on both), an epilogue. */
Test(producer_gpu, batches_views_epilogues)
{
    check("x_bf16[2,1,17,33].to(f32) @ w[3,33,24]",
          MM("bf16", "[2,1,17,33]", "f32", "[3,33,24]", CAST("xc", "x", "f32") "{'name':'y','op':'matmul','inputs':['xc','w']}"),
          true, false, NULL);
    check("x_bf16[64,129].T.to(f32) @ w_bf16[17,64].to(f32).T",
          MM("bf16", "[64,129]", "bf16", "[17,64]",
             "{'name':'xt','op':'transpose','inputs':['x'],'attrs':{'dim0':0,'dim1':1}}," CAST("xc", "xt", "f32")
             CAST("wc", "w", "f32") "{'name':'wt','op':'transpose','inputs':['wc'],'attrs':{'dim0':0,'dim1':1}},"
             "{'name':'y','op':'matmul','inputs':['xc','wt']}"),
          true, false, NULL);
    check("x_f32.to(f16) @ w_f32.to(f16), relu",
          MM("f32", "[97,64]", "f32", "[64,40]",
             CAST("xc", "x", "f16") CAST("wc", "w", "f16") "{'name':'h','op':'matmul','inputs':['xc','wc']},"
             "{'name':'y','op':'relu','inputs':['h']}"),
          true, false, "m16n8k16.row.col.f32.f16");
}
