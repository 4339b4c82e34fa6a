/* test_tf32_cuda.c - TF32 on a real GPU (skips without one): f32 matmuls compiled with
 * ic_cuda_options.allow_tf32 use mma.sync m16n8k8 .tf32 and match the reference within
 * TF32's tolerance, (2^-10 + K 2^-23) sum_k |a_ik b_kj| (see unittests/PTX/test_tf32.c);
 * without the option the PTX has no TF32 and the spec's f32 tolerances hold; a value TF32
 * cannot hold shows the rounding (to nearest, ties away). Also a cast producer fused into the
 * GEMM's loads (one kernel), with and without TF32. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* Runs json on the GPU (allow_tf32 as given) and checks it against the reference. */
static void check(ic_ctx *c, ic_cuda *d, const char *name, const char *json, int64_t K, bool tf32, int kernels)
{
    ic_graph *g = graph_json(c, json);
    ic_tensor args[8], absargs[8], want, mag, got;
    int nargs = 0;
    make_args(c, g, 0, args, &nargs);
    for (int i = 0; i < nargs; i++) {
        ic_tensor_init(&absargs[i], args[i].dtype, args[i].rank, args[i].shape, NULL);
        cr_assert_eq(ic_tensor_alloc(c, &absargs[i]), IC_OK);
        for (int64_t e = 0; e < ic_tensor_numel(&args[i]); e++)
            ic_tensor_set(&absargs[i], e, fabs(ict_get_f(&args[i], e)));
    }
    cr_assert_eq(ic_ref_run(c, g, NULL, nargs, args, 1, &want), IC_OK, "%s", ic_last_error(c));
    cr_assert_eq(ic_ref_run(c, g, NULL, nargs, absargs, 1, &mag), IC_OK, "%s", ic_last_error(c));
    ic_cuda_options o = { .allow_tf32 = tf32 };
    ic_cuda_compiled *cc = NULL;
    cr_assert_eq(ic_cuda_compile(d, g, &o, &cc), IC_OK, "%s: %s", name, ic_last_error(c));
    memset(&got, 0, sizeof got);
    cr_assert_eq(ic_cuda_run(cc, nargs, args, 1, &got), IC_OK, "%s: %s", name, ic_last_error(c));
    cr_assert_eq(ic_cuda_compiled_num_kernels(cc), kernels, "%s: kernels", name);
    const char *ptx = ic_cuda_compiled_ptx(cc);
    cr_assert_eq(strstr(ptx, "m16n8k8.row.col.f32.tf32") != NULL, tf32, "%s: TF32 in the PTX: %d", name, !tf32);
    {
        /* TF32: operand rounding (2^-10) plus f32 accumulation; FFMA: the accumulation alone,
         * K * 2^-23 of the magnitudes (the spec's flat f32 rtol fails on cancelling sums with
         * K = 1024, whatever computes them in f32) */
        double rel = (tf32 ? ldexp(1, -10) : 0) + (double)K * ldexp(1, -23);
        for (int64_t e = 0; e < ic_tensor_numel(&want); e++) {
            double w = ict_get_f(&want, e), v = ict_get_f(&got, e), tol = rel * ict_get_f(&mag, e) + 1e-30;
            cr_assert(fabs(v - w) <= tol, "%s: element %lld: got %.9g, want %.9g (tolerance %.3g)", name, (long long)e,
                      v, w, tol);
        }
    }
    ic_cuda_compiled_destroy(cc);
    ic_tensor_free(c, &got);
    ic_tensor_free(c, &want);
    ic_tensor_free(c, &mag);
    for (int i = 0; i < nargs; i++) {
        ic_tensor_free(c, &args[i]);
        ic_tensor_free(c, &absargs[i]);
    }
    ic_graph_destroy(g);
}

Test(tf32_cuda, matmuls_with_and_without_tf32)
{
    ic_ctx *c = ict_ctx();
    ic_cuda *d = open_or_skip(c);
    static const int64_t sz[][3] = { { 129, 64, 17 }, { 17, 129, 64 }, { 64, 17, 129 }, { 1000, 600, 1024 } };
    for (size_t i = 0; i < sizeof sz / sizeof *sz; i++)
        for (int tf32 = 0; tf32 < 2; tf32++) {
            char json[1024], name[128];
            snprintf(json, sizeof json,
                     GRAPH("{'name':'a','dtype':'f32','shape':[%lld,%lld]},{'name':'b','dtype':'f32','shape':[%lld,%lld]}",
                           "{'name':'y','op':'matmul','inputs':['a','b']}", "'y'"),
                     (long long)sz[i][0], (long long)sz[i][2], (long long)sz[i][2], (long long)sz[i][1]);
            snprintf(name, sizeof name, "matmul %lldx%lldx%lld tf32 %d", (long long)sz[i][0], (long long)sz[i][2],
                     (long long)sz[i][1], tf32);
            check(c, d, name, json, sz[i][2], tf32, 1);
            snprintf(json, sizeof json,
                     GRAPH("{'name':'a','dtype':'bf16','shape':[%lld,%lld]},{'name':'b','dtype':'f32','shape':[%lld,%lld]}",
                           "{'name':'x','op':'cast','inputs':['a'],'attrs':{'dtype':'f32'}},"
                           "{'name':'y','op':'matmul','inputs':['x','b']}", "'y'"),
                     (long long)sz[i][0], (long long)sz[i][2], (long long)sz[i][2], (long long)sz[i][1]);
            snprintf(name, sizeof name, "a_bf16.to(f32) @ b %lldx%lldx%lld tf32 %d", (long long)sz[i][0],
                     (long long)sz[i][2], (long long)sz[i][1], tf32);
            check(c, d, name, json, sz[i][2], tf32, 1);
        }
    ic_cuda_close(d);
    ic_ctx_destroy(c);
}

/* 1 + 3 * 2^-12 times ones over K = 64: TF32 rounds it to 1 + 2^-10 (64.0625 a sum). */
Test(tf32_cuda, rounding_on_the_device)
{
    ic_ctx *c = ict_ctx();
    ic_cuda *d = open_or_skip(c);
    ic_graph *g = graph_json(c, GRAPH(IN("a", "f32", "[64,64]") "," IN("b", "f32", "[64,64]"),
                                      "{'name':'y','op':'matmul','inputs':['a','b']}", "'y'"));
    int64_t sh[2] = { 64, 64 };
    ic_tensor args[2], got;
    for (int i = 0; i < 2; i++) {
        ic_tensor_init(&args[i], IC_F32, 2, sh, NULL);
        cr_assert_eq(ic_tensor_alloc(c, &args[i]), IC_OK);
        for (int64_t e = 0; e < 64 * 64; e++)
            ((float *)args[i].data)[e] = i ? 1.0f : (float)(1 + 3 * 0x1p-12);
    }
    for (int tf32 = 0; tf32 < 2; tf32++) {
        ic_cuda_options o = { .allow_tf32 = tf32 };
        ic_cuda_compiled *cc = NULL;
        cr_assert_eq(ic_cuda_compile(d, g, &o, &cc), IC_OK, "%s", ic_last_error(c));
        memset(&got, 0, sizeof got);
        cr_assert_eq(ic_cuda_run(cc, 2, args, 1, &got), IC_OK, "%s", ic_last_error(c));
        float want = (float)(64 * (1 + (tf32 ? 0x1p-10 : 3 * 0x1p-12)));
        for (int64_t e = 0; e < 64 * 64; e++)
            cr_assert_eq(((float *)got.data)[e], want, "allow_tf32 %d: element %lld is %.9g, want %.9g", tf32,
                         (long long)e, ((float *)got.data)[e], want);
        ic_tensor_free(c, &got);
        ic_cuda_compiled_destroy(cc);
    }
    for (int i = 0; i < 2; i++)
        ic_tensor_free(c, &args[i]);
    ic_graph_destroy(g);
    ic_cuda_close(d);
    ic_ctx_destroy(c);
}
