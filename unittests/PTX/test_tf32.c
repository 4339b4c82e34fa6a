/* test_tf32.c - f32 contractions on tensor cores in TF32 (ic_ptx_options.allow_tf32), without
 * a GPU: the PTX uses mma.sync m16n8k8 .tf32 with operands rounded by cvt.rna.tf32.f32 only
 * when the option is set (FFMA otherwise, the default), assembles with ptxas -arch=sm_90 when
 * ptxas exists, and the emulator (which implements the mma shape and the rounding) matches
 * the reference executor within TF32's tolerance:
 *
 *     |got - want| <= (2^-10 + K * 2^-23) * sum_k |a_ik| |b_kj|
 *
 * Each operand rounded to TF32 (10-bit mantissa, unit roundoff 2^-11) makes a product off by
 * at most 2 * 2^-11 of its magnitude; accumulating K products in f32 adds at most about
 * K * 2^-24 of the magnitude sum (2^-23 leaves room for the reference's own rounding). The
 * magnitude sum is the same graph run by the reference on |args|. Probes with values TF32
 * cannot hold check the rounding itself (to nearest, ties away: not truncation). */
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

#define MMA_TF32 "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"

static ic_program *fused(ic_ctx *c, const ic_graph *g)
{
    ic_program *p = NULL, *f = NULL;
    cr_assert_eq(ic_lower(c, g, &p), IC_OK, "ic_lower: %s", ic_last_error(c));
    ic_fuse_options fo;
    ic_fuse_options_init(&fo);
    fo.prefix = "gpu_";
    cr_assert_eq(ic_fuse(c, p, &fo, &f), IC_OK, "ic_fuse: %s", ic_last_error(c));
    ic_program_destroy(p);
    return f;
}

/* Emits p with allow_tf32 as given; checks which instructions the PTX has, assembles it. */
static void check_ptx(ic_ctx *c, const char *name, const ic_program *p, const ic_ptx_params *prm, bool tf32)
{
    ic_ptx_options o = { .sm = 90, .allow_tf32 = tf32 };
    ic_ptx_module *m = NULL;
    cr_assert_eq(ic_ptx_emit(c, p, &o, prm, &m), IC_OK, "%s: ic_ptx_emit: %s", name, ic_last_error(c));
    const char *text = ic_ptx_module_text(m);
    bool gemm = false;
    for (int i = 0; i < ic_ptx_module_num_kernels(m); i++)
        gemm |= ic_ptx_module_kernel(m, i)->mode == IC_PTX_GEMM;
    if (gemm && tf32)
        cr_assert(strstr(text, MMA_TF32) && strstr(text, "cvt.rna.tf32.f32"), "%s: no TF32 mma / cvt in the PTX", name);
    else
        cr_assert(!strstr(text, ".tf32"), "%s: TF32 without allow_tf32", name);
    char log[4096];
    cr_assert(assemble(text, log, sizeof log), "%s: ptxas refused the PTX:\n%s", name, log);
    ic_ptx_module_destroy(m);
}

/* The graph's output 0 emulated with allow_tf32 against the reference, within TF32's
 * tolerance for depth K (see the top of the file). */
static void check_case(const char *name, const char *json, int64_t K, const ic_ptx_params *prm)
{
    ic_ctx *c = ict_ctx();
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
    ic_program *p = fused(c, g);
    int nk = ic_program_num_kernels(p);
    ic_ptx_params *pp = NULL;
    if (prm) {
        pp = calloc((size_t)nk + 1, sizeof *pp);
        for (int i = 0; i < nk; i++)
            pp[i] = *prm;
    }
    check_ptx(c, name, p, pp, true);
    if (!prm || !(prm->warps_m || prm->warps_n)) /* (FFMA takes no warps) */
        check_ptx(c, name, p, pp, false);
    ic_tensor_init(&got, want.dtype, want.rank, want.shape, NULL);
    cr_assert_eq(ic_tensor_alloc(c, &got), IC_OK);
    ic_ptx_options o = { .allow_tf32 = true };
    cr_assert_eq(ic_ptx_emulate_opts(c, p, &o, pp, args, nargs, &got, 1), IC_OK, "%s: %s", name, ic_last_error(c));
    double rel = ldexp(1, -10) + (double)K * ldexp(1, -23);
    for (int64_t e = 0; e < ic_tensor_numel(&want); e++) {
        double w = ict_get_f(&want, e), v = ict_get_f(&got, e), tol = rel * ict_get_f(&mag, e) + 1e-30;
        cr_assert(fabs(v - w) <= tol, "%s: element %lld: got %.9g, want %.9g (tolerance %.3g)", name,
                  (long long)e, v, w, tol);
    }
    free(pp);
    ic_program_destroy(p);
    for (int i = 0; i < nargs; i++) {
        ic_tensor_free(c, &args[i]);
        ic_tensor_free(c, &absargs[i]);
    }
    ic_tensor_free(c, &want);
    ic_tensor_free(c, &mag);
    ic_tensor_free(c, &got);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

static const char *mm_json(char *buf, size_t n, const char *a, const char *b, const char *nodes)
{
    snprintf(buf, n, "{'ic_graph':1,'name':'t','inputs':[{'name':'a','dtype':'f32','shape':%s},"
             "{'name':'b','dtype':'f32','shape':%s}],'nodes':[%s],'outputs':['y']}", a, b, nodes);
    return buf;
}

/* M, N, K over {1, 3, 17, 64, 129}: every M with five (N, K) pairs, each size of N and K
 * once per M; the tiny ones forced onto the GEMM kernel (the heuristic makes row reductions
 * of outputs under 64 elements; K = 1 has no k loop, so no GEMM). */
Test(tf32, odd_shapes_match_within_tf32_tolerance)
{
    static const int64_t sz[5] = { 1, 3, 17, 64, 129 };
    static const ic_ptx_params forced = { .mode = IC_PTX_GEMM };
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 5; j++) {
            int64_t M = sz[i], N = sz[j], K = sz[(i + 2 * j) % 5];
            char a[64], b[64], json[1024], name[128];
            snprintf(a, sizeof a, "[%lld,%lld]", (long long)M, (long long)K);
            snprintf(b, sizeof b, "[%lld,%lld]", (long long)K, (long long)N);
            mm_json(json, sizeof json, a, b, "{'name':'y','op':'matmul','inputs':['a','b']}");
            snprintf(name, sizeof name, "matmul %lldx%lldx%lld", (long long)M, (long long)K, (long long)N);
            check_case(name, json, K, M * N < 64 && K > 1 ? &forced : NULL);
        }
}

/* Layouts (k-contiguous rows, m/n-contiguous through transposes, 16-byte and 4-byte copies),
 * batches with broadcasting, an epilogue, split-k and explicit tiles. */
Test(tf32, layouts_batches_epilogues_params)
{
    char json[1024];
    check_case("both k-contiguous 129x64 @ (17x64)^T",
               mm_json(json, sizeof json, "[129,64]", "[17,64]",
                       "{'name':'u','op':'transpose','inputs':['b'],'attrs':{'dim0':0,'dim1':1}},"
                       "{'name':'y','op':'matmul','inputs':['a','u']}"), 64, NULL);
    check_case("transposed a (m contiguous) 64x129 -> 129x64 @ 64x24",
               mm_json(json, sizeof json, "[64,129]", "[64,24]",
                       "{'name':'t','op':'transpose','inputs':['a'],'attrs':{'dim0':0,'dim1':1}},"
                       "{'name':'y','op':'matmul','inputs':['t','b']}"), 64, NULL);
    check_case("odd strides 33x17 @ 17x9 (element copies)",
               mm_json(json, sizeof json, "[33,17]", "[17,9]", "{'name':'y','op':'matmul','inputs':['a','b']}"), 17, NULL);
    check_case("broadcast batch 2x1x17x33 @ 3x33x24",
               mm_json(json, sizeof json, "[2,1,17,33]", "[3,33,24]", "{'name':'y','op':'matmul','inputs':['a','b']}"), 33, NULL);
    check_case("bmm 2x64x128 @ 2x128x64 (whole tiles)",
               mm_json(json, sizeof json, "[2,64,128]", "[2,128,64]", "{'name':'y','op':'bmm','inputs':['a','b']}"), 128, NULL);
    check_case("linear relu 97x200 -> 40",
               mm_json(json, sizeof json, "[97,200]", "[40,200]",
                       "{'name':'h','op':'linear','inputs':['a','b']},{'name':'y','op':'relu','inputs':['h']}"), 200, NULL);
    static const ic_ptx_params prm[] = {
        { .split_k = 3 },
        { .tile_m = 32, .tile_n = 64, .tile_k = 8, .warps_m = 2, .warps_n = 2, .stages = 2 },
        { .tile_m = 64, .tile_n = 128, .tile_k = 32, .warps_m = 1, .warps_n = 4, .stages = 4, .split_k = 2 },
    };
    for (size_t i = 0; i < sizeof prm / sizeof *prm; i++) {
        char name[64];
        snprintf(name, sizeof name, "matmul 97x200x40 params %zu", i);
        check_case(name, mm_json(json, sizeof json, "[97,200]", "[200,40]", "{'name':'y','op':'matmul','inputs':['a','b']}"),
                   200, &prm[i]);
    }
}

/* a = 1 + d (every element), b = 1: the sum over K = 64 is exact in f32, so the result shows
 * what a became: 1 + 3 * 2^-12 rounds up to 1 + 2^-10 (truncation would give 1), 1 + 2^-12
 * rounds down to 1, 1 + 2^-11 (a tie) away from zero to 1 + 2^-10, and below 1, where TF32's
 * spacing is 2^-11, 1 - 3 * 2^-12 (a tie again) to 1 - 2^-11. Without allow_tf32 the
 * products are exact: K (1 + d). */
Test(tf32, operands_are_rounded_to_nearest_ties_away)
{
    static const struct { double d, tf32; } probe[] = {
        { 3 * 0x1p-12, 0x1p-10 }, { 0x1p-12, 0 }, { 0x1p-11, 0x1p-10 }, { -3 * 0x1p-12, -0x1p-11 },
    };
    ic_ctx *c = ict_ctx();
    char json[1024];
    ic_graph *g = graph_json(c, mm_json(json, sizeof json, "[64,64]", "[64,64]",
                                        "{'name':'y','op':'matmul','inputs':['a','b']}"));
    ic_program *p = fused(c, g);
    int64_t sh[2] = { 64, 64 };
    ic_tensor args[2], got;
    for (int i = 0; i < 2; i++) {
        ic_tensor_init(&args[i], IC_F32, 2, sh, NULL);
        cr_assert_eq(ic_tensor_alloc(c, &args[i]), IC_OK);
    }
    ic_tensor_init(&got, IC_F32, 2, sh, NULL);
    cr_assert_eq(ic_tensor_alloc(c, &got), IC_OK);
    for (size_t q = 0; q < sizeof probe / sizeof *probe; q++)
        for (int tf32 = 0; tf32 < 2; tf32++) {
            for (int64_t e = 0; e < 64 * 64; e++) {
                ((float *)args[0].data)[e] = (float)(1 + probe[q].d);
                ((float *)args[1].data)[e] = 1;
            }
            ic_ptx_options o = { .allow_tf32 = tf32 };
            cr_assert_eq(ic_ptx_emulate_opts(c, p, &o, NULL, args, 2, &got, 1), IC_OK, "%s", ic_last_error(c));
            double want = 64 * (1 + (tf32 ? probe[q].tf32 : probe[q].d));
            for (int64_t e = 0; e < 64 * 64; e++)
                cr_assert_eq(((float *)got.data)[e], (float)want, "1 + %g, allow_tf32 %d: element %lld is %.9g, want %.9g",
                             probe[q].d, tf32, (long long)e, ((float *)got.data)[e], want);
        }
    for (int i = 0; i < 2; i++)
        ic_tensor_free(c, &args[i]);
    ic_tensor_free(c, &got);
    ic_program_destroy(p);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* f16/bf16 contractions keep their mma shapes; the option only concerns f32. */
Test(tf32, sixteen_bit_contractions_are_unaffected)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = graph_json(c, GRAPH(IN("a", "bf16", "[64,64]") "," IN("b", "bf16", "[64,64]"),
                                      "{'name':'y','op':'matmul','inputs':['a','b']}", "'y'"));
    ic_program *p = fused(c, g);
    ic_ptx_options o = { .sm = 90, .allow_tf32 = true, .wgmma = -1 };
    ic_ptx_module *m = NULL;
    cr_assert_eq(ic_ptx_emit(c, p, &o, NULL, &m), IC_OK, "%s", ic_last_error(c));
    const char *text = ic_ptx_module_text(m);
    cr_assert(strstr(text, "m16n8k16.row.col.f32.bf16") && !strstr(text, ".tf32"), "bf16 GEMM changed with allow_tf32");
    ic_ptx_module_destroy(m);
    ic_program_destroy(p);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* Bad TF32 tiles are refused with the reason. */
Test(tf32, bad_params_are_refused)
{
    ic_ctx *c = ict_ctx();
    char json[1024];
    ic_graph *g = graph_json(c, mm_json(json, sizeof json, "[97,200]", "[200,40]",
                                        "{'name':'y','op':'matmul','inputs':['a','b']}"));
    ic_program *p = fused(c, g);
    ic_ptx_options o = { .sm = 90, .allow_tf32 = true };
    ic_ptx_module *m = NULL;
    ic_ptx_params bad = { .tile_k = 64 };
    ict_assert_error(c, ic_ptx_emit(c, p, &o, &bad, &m), IC_EINVAL, "tile_k must be 8, 16 or 32 for TF32");
    ic_ptx_params bad2 = { .tile_m = 64, .tile_n = 64, .warps_m = 8, .warps_n = 1 };
    ict_assert_error(c, ic_ptx_emit(c, p, &o, &bad2, &m), IC_EINVAL, "warps must split the tile");
    ic_program_destroy(p);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}
