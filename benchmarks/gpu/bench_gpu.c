/* bench_gpu.c - GPU benchmarks of the issue: pointwise (the seed pattern, scaled up),
 * softmax, layer_norm, row sums, full sums and column sums ([16384, 4096], dim 0) in f32 and
 * bf16, bias + gelu ([4096, 3072] + [3072], bf16), against the device-to-device copy
 * bandwidth measured in the same run; host overhead per call of a 3-op graph on 1024 floats
 * (reduce-overhead and default mode); graph -> loaded module time for the seed pattern.
 * Prints a table, and one JSON object per result on lines starting with "RESULT " (read by
 * benchmarks/gpu/compare.py).
 *
 *     bench_gpu [--iters N] [--quick] [--tune] [--gemm-only] [--no-gemm] [--only NAME[,NAME...]]
 *
 * GEMMs: 4096^3 matmul in bf16, f16, f32 and linear [16384, 512] x [512, 512] + bias + relu
 * (bf16, f32) in TFLOP/s, each checked on 256 sampled outputs against a double dot product;
 * the f32 ones again with ic_cuda_options.allow_tf32 (matmul_f32_tf32_4096,
 * linear_relu_f32_tf32: mma.sync m16n8k8 .tf32; their spot-check error is TF32's, about 1e-3
 * relative, against 1e-6 for FFMA). `bench_gpu --gemm-only --only tf32` runs those alone.
 * --tune also times each graph's kernel under a sweep of launch params (block, threads per
 * row, elements per thread), the search an autotuner would make, and prints the best.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "ic/ic.h"
#include "ic/ptx.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void die(ic_ctx *c, const char *what)
{
    fprintf(stderr, "bench_gpu: %s: %s\n", what, ic_last_error(c));
    exit(1);
}

static ic_graph *load(ic_ctx *c, const char *json)
{
    char *buf = strdup(json);
    for (char *p = buf; *p; p++)
        if (*p == '\'')
            *p = '"';
    ic_graph *g = NULL;
    if (ic_graph_load_json_string(c, buf, ".", &g))
        die(c, "graph");
    free(buf);
    return g;
}

/* Uniform values in [-1, 1) written straight into f32 / bf16 / f16 arrays. */
static void fill(ic_tensor *t, uint64_t seed)
{
    int64_t n = ic_tensor_numel(t);
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
    for (int64_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        float v = (float)((double)(s >> 40) / (double)(1 << 24) * 2 - 1);
        if (t->dtype == IC_F32)
            ((float *)t->data)[i] = v;
        else if (t->dtype == IC_BF16)
            ((uint16_t *)t->data)[i] = ic_f32_to_bf16(v);
        else if (t->dtype == IC_F16)
            ((uint16_t *)t->data)[i] = ic_f32_to_f16(v);
        else
            ic_tensor_set(t, i, v);
    }
}

static int make_args(ic_ctx *c, const ic_graph *g, ic_tensor *args)
{
    int n = ic_graph_num_args(g);
    for (int i = 0; i < n; i++) {
        ic_node_info ni;
        ic_graph_node(g, ic_graph_arg(g, i), &ni);
        int64_t sh[IC_MAX_RANK];
        for (int d = 0; d < ni.rank; d++)
            sh[d] = ni.shape[d].coef;
        ic_tensor_init(&args[i], ni.dtype, ni.rank, sh, NULL);
        if (ic_tensor_alloc(c, &args[i]))
            die(c, "host memory");
        fill(&args[i], (uint64_t)i + 1);
    }
    return n;
}

static int64_t node_bytes(const ic_node_info *ni)
{
    int64_t n = (int64_t)ic_dtype_size(ni->dtype);
    for (int d = 0; d < ni->rank; d++)
        n *= ni->shape[d].coef;
    return n;
}

/* Bytes a graph must move at least: every argument read once, every output written once. */
static int64_t graph_bytes(const ic_graph *g)
{
    int64_t b = 0;
    for (int i = 0; i < ic_graph_num_args(g); i++) {
        ic_node_info ni;
        ic_graph_node(g, ic_graph_arg(g, i), &ni);
        b += node_bytes(&ni);
    }
    for (int i = 0; i < ic_graph_num_outputs(g); i++) {
        ic_node_info ni;
        ic_graph_node(g, ic_graph_output(g, i), &ni);
        b += node_bytes(&ni);
    }
    return b;
}

typedef struct { const char *name; const char *json; } bench_graph;

#define SEED(dt, R, C)                                                                        \
    "{'ic_graph':1,'name':'pointwise','inputs':[{'name':'a','dtype':'" dt "','shape':[" R "," C "]},"  \
    "{'name':'b1','dtype':'" dt "','shape':[1," C "]},{'name':'c','dtype':'" dt "','shape':[" R "," C "]}," \
    "{'name':'b2','dtype':'" dt "','shape':[1," C "]},{'name':'b3','dtype':'" dt "','shape':[1," C "]}],"   \
    "'nodes':[{'name':'t0','op':'add','inputs':['a','b1']},{'name':'t1','op':'add','inputs':['t0','c']},"  \
    "{'name':'t2','op':'mul','inputs':['t1','b2']},{'name':'y','op':'add','inputs':['t2','b3']}],'outputs':['y']}"
#define SOFTMAX(dt)                                                                           \
    "{'ic_graph':1,'name':'softmax','inputs':[{'name':'x','dtype':'" dt "','shape':[8192,4096]}],"      \
    "'nodes':[{'name':'y','op':'softmax','inputs':['x'],'attrs':{'dim':-1}}],'outputs':['y']}"
#define LAYERNORM(dt)                                                                         \
    "{'ic_graph':1,'name':'layer_norm','inputs':[{'name':'x','dtype':'" dt "','shape':[8192,4096]},"    \
    "{'name':'w','dtype':'" dt "','shape':[4096]},{'name':'b','dtype':'" dt "','shape':[4096]}],"         \
    "'nodes':[{'name':'y','op':'layer_norm','inputs':['x','w','b'],'attrs':{'normalized_shape':[4096]}}],'outputs':['y']}"
#define ROWSUM(dt)                                                                            \
    "{'ic_graph':1,'name':'row_sum','inputs':[{'name':'x','dtype':'" dt "','shape':[16384,4096]}],"     \
    "'nodes':[{'name':'y','op':'sum','inputs':['x'],'attrs':{'dims':[-1]}}],'outputs':['y']}"

#define SUMALL(dt)                                                                            \
    "{'ic_graph':1,'name':'sum_all','inputs':[{'name':'x','dtype':'" dt "','shape':[67108864]}],"       \
    "'nodes':[{'name':'y','op':'sum','inputs':['x'],'attrs':{'dims':[0]}}],'outputs':['y']}"

/* issue 13's memory-bound pair: a column sum (dim 0 reduced, the kept dim contiguous) and
 * BERT's FC1 epilogue outside the GEMM, x + b then the exact (erf) gelu */
#define COLSUM(dt)                                                                            \
    "{'ic_graph':1,'name':'col_sum','inputs':[{'name':'x','dtype':'" dt "','shape':[16384,4096]}],"     \
    "'nodes':[{'name':'y','op':'sum','inputs':['x'],'attrs':{'dims':[0]}}],'outputs':['y']}"
#define BIASGELU(dt)                                                                          \
    "{'ic_graph':1,'name':'bias_gelu','inputs':[{'name':'x','dtype':'" dt "','shape':[4096,3072]},"     \
    "{'name':'b','dtype':'" dt "','shape':[3072]}],"                                                      \
    "'nodes':[{'name':'h','op':'add','inputs':['x','b']},{'name':'y','op':'gelu','inputs':['h']}],'outputs':['y']}"

static const bench_graph graphs[] = {
    { "pointwise_f32", SEED("f32", "65536", "1024") },  { "pointwise_bf16", SEED("bf16", "65536", "1024") },
    { "softmax_f32", SOFTMAX("f32") },                   { "softmax_bf16", SOFTMAX("bf16") },
    { "layer_norm_f32", LAYERNORM("f32") },              { "layer_norm_bf16", LAYERNORM("bf16") },
    { "row_sum_f32", ROWSUM("f32") },                    { "row_sum_bf16", ROWSUM("bf16") },
    { "sum_all_f32", SUMALL("f32") },                    { "sum_all_bf16", SUMALL("bf16") },
    { "col_sum_f32", COLSUM("f32") },                    { "col_sum_bf16", COLSUM("bf16") },
    { "bias_gelu_bf16", BIASGELU("bf16") },
};

/* GEMMs: 4096^3 matmuls and linear [16384, 512] x [512, 512] + bias + relu. */
#define MATMUL(dt, M, K, N)                                                                   \
    "{'ic_graph':1,'name':'mm','inputs':[{'name':'a','dtype':'" dt "','shape':[" M "," K "]},"         \
    "{'name':'b','dtype':'" dt "','shape':[" K "," N "]}],"                                              \
    "'nodes':[{'name':'y','op':'matmul','inputs':['a','b']}],'outputs':['y']}"
#define LINRELU(dt)                                                                           \
    "{'ic_graph':1,'name':'linear','inputs':[{'name':'x','dtype':'" dt "','shape':[16384,512]},"        \
    "{'name':'w','dtype':'" dt "','shape':[512,512]},{'name':'b','dtype':'" dt "','shape':[512]}],"       \
    "'nodes':[{'name':'h','op':'linear','inputs':['x','w','b']},{'name':'y','op':'relu','inputs':['h']}],'outputs':['y']}"

/* BERT-base's linears at B=32, S=128 (issue 13): x [4096, K] by w [N, K] + bias, FC1 with gelu */
#define BERTLIN(K, N, act)                                                                    \
    "{'ic_graph':1,'name':'bert_linear','inputs':[{'name':'x','dtype':'bf16','shape':[4096," K "]},"    \
    "{'name':'w','dtype':'bf16','shape':[" N "," K "]},{'name':'b','dtype':'bf16','shape':[" N "]}],"     \
    "'nodes':[{'name':'h','op':'linear','inputs':['x','w','b']},{'name':'y','op':'" act "','inputs':['h']}],'outputs':['y']}"

typedef struct { const char *name; const char *json; int64_t M, N, K; bool relu_bias, linear, tf32, gelu; } gemm_graph;

static const gemm_graph gemms[] = {
    { "matmul_bf16_4096", MATMUL("bf16", "4096", "4096", "4096"), 4096, 4096, 4096, false, false },
    { "matmul_f16_4096", MATMUL("f16", "4096", "4096", "4096"), 4096, 4096, 4096, false, false },
    { "matmul_f32_4096", MATMUL("f32", "4096", "4096", "4096"), 4096, 4096, 4096, false, false },
    { "linear_relu_bf16", LINRELU("bf16"), 16384, 512, 512, true, true },
    { "linear_relu_f32", LINRELU("f32"), 16384, 512, 512, true, true },
    { "matmul_f32_tf32_4096", MATMUL("f32", "4096", "4096", "4096"), 4096, 4096, 4096, false, false, true },
    { "linear_relu_f32_tf32", LINRELU("f32"), 16384, 512, 512, true, true, true },
    { "bert_qkv_bf16", BERTLIN("768", "768", "neg"), 4096, 768, 768, true, true, false, false },
    { "bert_fc1_gelu_bf16", BERTLIN("768", "3072", "gelu"), 4096, 3072, 768, true, true, false, true },
    { "bert_fc2_bf16", BERTLIN("3072", "768", "neg"), 4096, 768, 3072, true, true, false, false },
};

static double tget(const ic_tensor *t, int64_t i)
{
    if (t->dtype == IC_F32)
        return ((const float *)t->data)[i];
    if (t->dtype == IC_BF16)
        return ic_bf16_to_f32(((const uint16_t *)t->data)[i]);
    return ic_f16_to_f32(((const uint16_t *)t->data)[i]);
}

/* Largest error of 256 sampled outputs against a double-precision dot product, relative to
 * the largest |reference| among them. */
static double spot_check(const gemm_graph *gg, const ic_tensor *args, const ic_tensor *out)
{
    double maxerr = 0, maxref = 0;
    uint64_t s = 99;
    for (int t = 0; t < 256; t++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        int64_t m = (int64_t)((s >> 33) % (uint64_t)gg->M), n = (int64_t)((s >> 13) % (uint64_t)gg->N);
        double acc = 0;
        for (int64_t k = 0; k < gg->K; k++) /* matmul b[k, n]; linear w[n, k] */
            acc += tget(&args[0], m * gg->K + k) * tget(&args[1], gg->linear ? n * gg->K + k : k * gg->N + n);
        if (gg->relu_bias) { /* the BERT rows: bias, then gelu, or neg (a free epilogue op) */
            acc += tget(&args[2], n);
            bool bert = strstr(gg->name, "bert_") != NULL;
            acc = gg->gelu ? 0.5 * acc * (1 + erf(acc / sqrt(2.0))) : bert ? -acc : acc > 0 ? acc : 0;
        }
        double got = tget(out, m * gg->N + n), e = got - acc;
        e = e < 0 ? -e : e;
        maxerr = e > maxerr ? e : maxerr;
        maxref = (acc < 0 ? -acc : acc) > maxref ? (acc < 0 ? -acc : acc) : maxref;
    }
    return maxref > 0 ? maxerr / maxref : maxerr;
}

static double time_gemm(ic_ctx *c, ic_cuda *d, const ic_graph *g, const ic_tensor *args, int n,
                        const ic_ptx_params *p, bool tf32, int iters, ic_ptx_kernel *used)
{
    ic_cuda_options o = { .params = p, .nparams = p ? 1 : 0, .allow_tf32 = tf32 };
    ic_cuda_compiled *cc = NULL;
    double ms = -1;
    if (ic_cuda_compile(d, g, &o, &cc) == IC_OK && ic_cuda_upload(cc, n, args) == IC_OK &&
        ic_cuda_time(cc, iters, &ms) == IC_OK) {
        if (used)
            *used = *ic_cuda_compiled_kernel(cc, 0);
    } else {
        fprintf(stderr, "  (gemm params refused: %s)\n", ic_last_error(c));
        ms = -1;
    }
    ic_cuda_compiled_destroy(cc);
    return ms;
}

static void gemm_bench(ic_ctx *c, ic_cuda *d, const gemm_graph *gg, int iters, bool tuning)
{
    ic_graph *g = load(c, gg->json);
    ic_tensor args[8];
    int n = make_args(c, g, args);
    double flops = 2.0 * (double)gg->M * (double)gg->N * (double)gg->K;
    ic_cuda_compiled *cc = NULL;
    ic_cuda_options co = { .allow_tf32 = gg->tf32 };
    double t0 = now_ms();
    if (ic_cuda_compile(d, g, &co, &cc))
        die(c, gg->name);
    double tc = now_ms() - t0;
    ic_tensor out;
    memset(&out, 0, sizeof out);
    if (ic_cuda_run(cc, n, args, 1, &out))
        die(c, "gemm run");
    double err = spot_check(gg, args, &out);
    ic_tensor_free(c, &out);
    double ms = 0;
    if (ic_cuda_time(cc, iters, &ms))
        die(c, "gemm timing");
    const ic_ptx_kernel *k = ic_cuda_compiled_kernel(cc, 0);
    printf("%-18s %8.3f ms %8.1f TFLOP/s  spot-check rel err %.2e  compile %.1f ms  "
           "[%s mode %d tile %dx%dx%d warps %dx%d stages %d split_k %d smem %d]\n",
           gg->name, ms, flops / (ms * 1e-3) / 1e12, err, tc, k->name, (int)k->mode, k->params.tile_m,
           k->params.tile_n, k->params.tile_k, k->params.warps_m, k->params.warps_n, k->params.stages,
           k->params.split_k, k->dyn_smem_bytes);
    printf("RESULT {\"bench\":\"%s\",\"ms\":%.6f,\"tflops\":%.3f,\"err\":%.3e}\n", gg->name, ms,
           flops / (ms * 1e-3) / 1e12, err);
    fflush(stdout);
    ic_cuda_compiled_destroy(cc);
    if (tuning) {
        bool tc16 = strstr(gg->name, "f32") == NULL;
        static const ic_ptx_params tfp[] = { /* TF32: tile_k at most 32 (f32 tiles are twice the bytes) */
            { .tile_m = 128, .tile_n = 128, .tile_k = 32, .warps_m = 2, .warps_n = 4, .stages = 3 },
            { .tile_m = 128, .tile_n = 128, .tile_k = 16, .warps_m = 2, .warps_n = 4, .stages = 4 },
            { .tile_m = 128, .tile_n = 128, .tile_k = 32, .warps_m = 4, .warps_n = 2, .stages = 3 },
            { .tile_m = 128, .tile_n = 256, .tile_k = 16, .warps_m = 2, .warps_n = 4, .stages = 3 },
            { .tile_m = 256, .tile_n = 128, .tile_k = 16, .warps_m = 4, .warps_n = 2, .stages = 3 },
            { .tile_m = 64, .tile_n = 128, .tile_k = 32, .warps_m = 2, .warps_n = 2, .stages = 4 },
        };
        static const ic_ptx_params tcp[] = {
            { .tile_m = 128, .tile_n = 128, .tile_k = 32, .warps_m = 2, .warps_n = 4, .stages = 3 },
            { .tile_m = 128, .tile_n = 128, .tile_k = 64, .warps_m = 2, .warps_n = 4, .stages = 3 },
            { .tile_m = 128, .tile_n = 256, .tile_k = 32, .warps_m = 2, .warps_n = 4, .stages = 3 },
            { .tile_m = 256, .tile_n = 128, .tile_k = 32, .warps_m = 4, .warps_n = 2, .stages = 3 },
            { .tile_m = 128, .tile_n = 128, .tile_k = 32, .warps_m = 4, .warps_n = 2, .stages = 4 },
            { .tile_m = 64, .tile_n = 128, .tile_k = 32, .warps_m = 2, .warps_n = 2, .stages = 4 },
        };
        static const ic_ptx_params wgp[] = { /* Hopper warpgroup MMAs: tile and stages */
            { .wgmma = 1, .tile_m = 128, .tile_n = 256, .stages = 4 },
            { .wgmma = 1, .tile_m = 128, .tile_n = 192, .stages = 4 },
            { .wgmma = 1, .tile_m = 128, .tile_n = 192, .stages = 5 },
            { .wgmma = 1, .tile_m = 128, .tile_n = 128, .stages = 4 },
            { .wgmma = 1, .tile_m = 128, .tile_n = 128, .stages = 6 },
            { .wgmma = 1, .tile_m = 64, .tile_n = 256, .stages = 4 },
            { .wgmma = 1, .tile_m = 64, .tile_n = 128, .stages = 4 },
            { .wgmma = 1, .tile_m = 128, .tile_n = 64, .stages = 4 },
        };
        static const ic_ptx_params ffp[] = {
            { .tile_m = 128, .tile_n = 128, .tile_k = 8, .stages = 4 },
            { .tile_m = 128, .tile_n = 128, .tile_k = 16, .stages = 2 },
            { .tile_m = 64, .tile_n = 128, .tile_k = 16, .stages = 3 },
            { .tile_m = 128, .tile_n = 64, .tile_k = 16, .stages = 3 },
            { .tile_m = 64, .tile_n = 64, .tile_k = 16, .stages = 4 },
        };
        bool wg = tc16 && ic_cuda_sm(d) >= 90;
        const ic_ptx_params *ps = gg->tf32 ? tfp : wg ? wgp : tc16 ? tcp : ffp;
        int np = gg->tf32 ? (int)(sizeof tfp / sizeof *tfp)
                 : wg ? (int)(sizeof wgp / sizeof *wgp)
                 : tc16 ? (int)(sizeof tcp / sizeof *tcp) : (int)(sizeof ffp / sizeof *ffp);
        double best = ms;
        for (int i = 0; i < np; i++) {
            ic_ptx_kernel kk;
            memset(&kk, 0, sizeof kk);
            double t = time_gemm(c, d, g, args, n, &ps[i], gg->tf32, iters, &kk);
            if (t <= 0)
                continue;
            printf("  tune %-16s tile %3dx%3dx%2d warps %dx%d stages %d split %d wgmma %d: %8.4f ms %7.1f TFLOP/s\n",
                   gg->name, kk.params.tile_m, kk.params.tile_n, kk.params.tile_k, kk.params.warps_m,
                   kk.params.warps_n, kk.params.stages, kk.params.split_k, kk.params.wgmma, t,
                   flops / (t * 1e-3) / 1e12);
            best = t < best ? t : best;
        }
        printf("RESULT {\"bench\":\"tuned_%s\",\"ms\":%.6f,\"tflops\":%.3f}\n", gg->name, best,
               flops / (best * 1e-3) / 1e12);
        fflush(stdout);
    }
    for (int i = 0; i < n; i++)
        ic_tensor_free(c, &args[i]);
    ic_graph_destroy(g);
}

/* ms per run of g with params p on its single kernel (NULL = heuristic); -1 on failure. */
static double time_params(ic_ctx *c, ic_cuda *d, const ic_graph *g, const ic_tensor *args, int n,
                          const ic_ptx_params *p, int iters, ic_ptx_kernel *used)
{
    ic_cuda_options o = { .params = p, .nparams = p ? 1 : 0 };
    ic_cuda_compiled *cc = NULL;
    double ms = -1;
    if (ic_cuda_compile(d, g, &o, &cc) == IC_OK && ic_cuda_upload(cc, n, args) == IC_OK &&
        ic_cuda_time(cc, iters, &ms) == IC_OK && used)
        *used = *ic_cuda_compiled_kernel(cc, 0);
    else if (ms < 0)
        fprintf(stderr, "  (params refused: %s)\n", ic_last_error(c));
    ic_cuda_compiled_destroy(cc);
    return ms;
}

static void tune(ic_ctx *c, ic_cuda *d, const bench_graph *bg, const ic_graph *g, const ic_tensor *args,
                 int n, int iters, double base_ms, double copy_gbps)
{
    ic_ptx_params ps[40];
    int np = 0;
    if (!strncmp(bg->name, "pointwise", 9) || !strncmp(bg->name, "bias_gelu", 9)) {
        static const int blocks[] = { 128, 256, 512, 1024 }, epts[] = { 1, 2, 4 };
        for (int b = 0; b < 4; b++)
            for (int e = 0; e < 3; e++)
                ps[np++] = (ic_ptx_params){ .block = blocks[b], .ept = epts[e] };
    } else if (!strncmp(bg->name, "col_sum", 7)) {
        static const int Ts[] = { 8, 16, 32, 64 }, Ss[] = { 1, 4, 8, 16, 32 };
        for (int t = 0; t < 4; t++)
            for (int i = 0; i < 5; i++)
                ps[np++] = (ic_ptx_params){ .mode = IC_PTX_COLUMN, .threads_per_row = Ts[t], .blocks_per_row = Ss[i] };
    } else {
        if (!strncmp(bg->name, "sum_all", 7)) {
            static const int bs[] = { 64, 128, 256, 512, 1024 };
            for (int i = 0; i < 5; i++)
                ps[np++] = (ic_ptx_params){ .mode = IC_PTX_ROW, .threads_per_row = 512, .blocks_per_row = bs[i] };
            ps[np++] = (ic_ptx_params){ .mode = IC_PTX_ROW, .threads_per_row = 256, .blocks_per_row = 512 };
            ps[np++] = (ic_ptx_params){ .mode = IC_PTX_ROW, .threads_per_row = 1024, .blocks_per_row = 256 };
        }
        static const int Ts[] = { 32, 64, 128, 256, 512 };
        for (int t = 0; t < 5; t++) {
            ps[np++] = (ic_ptx_params){ .mode = IC_PTX_ROW, .threads_per_row = Ts[t] };
            if (Ts[t] < 256)
                ps[np++] = (ic_ptx_params){ .mode = IC_PTX_ROW, .threads_per_row = Ts[t], .block = 256 };
            if (Ts[t] < 512)
                ps[np++] = (ic_ptx_params){ .mode = IC_PTX_ROW, .threads_per_row = Ts[t], .block = 512 };
        }
        ps[np++] = (ic_ptx_params){ .mode = IC_PTX_ROW, .threads_per_row = 32, .regs_elems = 128 };
        ps[np++] = (ic_ptx_params){ .mode = IC_PTX_ROW, .threads_per_row = 64, .regs_elems = 128 };
        ps[np++] = (ic_ptx_params){ .mode = IC_PTX_ROW, .threads_per_row = 256, .regs_elems = -1 };
        ps[np++] = (ic_ptx_params){ .mode = IC_PTX_ROW, .threads_per_row = 128, .vec = 4 };
        ps[np++] = (ic_ptx_params){ .mode = IC_PTX_ROW, .threads_per_row = 256, .vec = 4 };
    }
    int64_t bytes = graph_bytes(g);
    double best = base_ms;
    int bi = -1;
    for (int i = 0; i < np; i++) {
        ic_ptx_kernel k;
        memset(&k, 0, sizeof k);
        double ms = time_params(c, d, g, args, n, &ps[i], iters, &k);
        if (ms <= 0)
            continue;
        printf("  tune %-16s block %4d vec %d ept %d T %4d S %3d regs %2d: %8.4f ms %7.1f GB/s %5.1f%%\n", bg->name,
               k.block, k.params.vec, k.params.ept, k.params.threads_per_row, k.params.blocks_per_row,
               k.params.regs_elems, ms,
               (double)bytes / (ms * 1e-3) / 1e9, 100 * (double)bytes / (ms * 1e-3) / 1e9 / copy_gbps);
        if (ms < best) {
            best = ms;
            bi = i;
        }
    }
    printf("  tune %-16s best %.4f ms (%s), heuristic %.4f ms\n", bg->name, best, bi < 0 ? "the heuristic" : "a sweep point", base_ms);
    printf("RESULT {\"bench\":\"tuned_%s\",\"ms\":%.6f,\"gbps\":%.3f,\"copy_gbps\":%.3f}\n", bg->name, best,
           (double)bytes / (best * 1e-3) / 1e9, copy_gbps);
    fflush(stdout);
}

static void bandwidth(ic_ctx *c, ic_cuda *d, const bench_graph *bg, int iters, double copy_gbps, bool tuning)
{
    ic_graph *g = load(c, bg->json);
    ic_tensor args[8];
    int n = make_args(c, g, args);
    ic_cuda_compiled *cc = NULL;
    double t0 = now_ms();
    if (ic_cuda_compile(d, g, NULL, &cc))
        die(c, bg->name);
    double tc = now_ms() - t0;
    double tu = now_ms();
    if (ic_cuda_upload(cc, n, args))
        die(c, "upload");
    if (ic_cuda_synchronize(d))
        die(c, "upload");
    tu = now_ms() - tu;
    double ms = 0;
    if (ic_cuda_time(cc, iters, &ms))
        die(c, "timing");
    int64_t bytes = graph_bytes(g);
    double gbps = (double)bytes / (ms * 1e-3) / 1e9;
    const ic_ptx_kernel *k = ic_cuda_compiled_kernel(cc, 0);
    printf("%-18s %3d kernel(s) %8.3f ms %8.1f GB/s %6.1f%% of copy   compile %6.1f ms  upload %6.1f ms  "
           "[%s mode %d block %d vec %d T %d S %d grid %lld]\n",
           bg->name, ic_cuda_compiled_num_kernels(cc), ms, gbps, 100 * gbps / copy_gbps, tc, tu,
           k ? k->name : "-", k ? (int)k->mode : 0, k ? k->block : 0, k ? k->params.vec : 0,
           k ? k->params.threads_per_row : 0, k ? k->params.blocks_per_row : 0, k ? (long long)k->grid : 0LL);
    printf("RESULT {\"bench\":\"%s\",\"ms\":%.6f,\"gbps\":%.3f,\"copy_gbps\":%.3f,\"bytes\":%lld,\"kernels\":%d}\n",
           bg->name, ms, gbps, copy_gbps, (long long)bytes, ic_cuda_compiled_num_kernels(cc));
    fflush(stdout);
    ic_cuda_compiled_destroy(cc);
    if (tuning)
        tune(c, d, bg, g, args, n, iters, ms, copy_gbps);
    for (int i = 0; i < n; i++)
        ic_tensor_free(c, &args[i]);
    ic_graph_destroy(g);
}

/* Host time per ic_cuda_launch (enqueue only), and per launch + synchronize. */
static void overhead(ic_ctx *c, ic_cuda *d, ic_cuda_mode mode, bool fused)
{
    ic_graph *g = load(c, "{'ic_graph':1,'name':'three_ops','inputs':[{'name':'x','dtype':'f32','shape':[1024]}],"
                          "'nodes':[{'name':'a','op':'mul','inputs':['x',2.0]},{'name':'b','op':'add','inputs':['a',1.0]},"
                          "{'name':'y','op':'relu','inputs':['b']}],'outputs':['y']}");
    ic_tensor x;
    make_args(c, g, &x);
    ic_cuda_options o = { .mode = mode, .no_fusion = !fused };
    ic_cuda_compiled *cc = NULL;
    if (ic_cuda_compile(d, g, &o, &cc) || ic_cuda_upload(cc, 1, &x))
        die(c, "three_ops");
    for (int i = 0; i < 200; i++)
        if (ic_cuda_launch(cc))
            die(c, "launch");
    ic_cuda_synchronize(d);
    enum { N = 5000 };
    double best = 1e30;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now_ms();
        for (int i = 0; i < N; i++)
            ic_cuda_launch(cc);
        double t1 = now_ms();
        ic_cuda_synchronize(d);
        double us = (t1 - t0) * 1e3 / N;
        best = us < best ? us : best;
    }
    double t0 = now_ms();
    for (int i = 0; i < 1000; i++) {
        ic_cuda_launch(cc);
        ic_cuda_synchronize(d);
    }
    double sync_us = (now_ms() - t0);
    const char *name = mode == IC_CUDA_REDUCE_OVERHEAD ? "overhead_reduce_overhead"
                     : fused ? "overhead_default" : "overhead_default_unfused";
    printf("%-26s %d kernel(s): host %.2f us per call (enqueue), %.2f us per call with synchronize\n",
           name, ic_cuda_compiled_num_kernels(cc), best, sync_us);
    printf("RESULT {\"bench\":\"%s\",\"host_us\":%.3f,\"sync_us\":%.3f,\"kernels\":%d}\n", name, best, sync_us,
           ic_cuda_compiled_num_kernels(cc));
    fflush(stdout);
    ic_cuda_compiled_destroy(cc);
    ic_tensor_free(c, &x);
    ic_graph_destroy(g);
}

static void compile_time(ic_ctx *c, ic_cuda *d, const char *path)
{
    ic_graph *g = NULL;
    if (ic_graph_load_json(c, path, &g))
        die(c, path);
    ic_tensor args[8];
    int n = make_args(c, g, args);
    for (int rep = 0; rep < 2; rep++) {
        ic_cuda_compiled *cc = NULL;
        double t0 = now_ms();
        if (ic_cuda_compile(d, g, NULL, &cc))
            die(c, "compile");
        double total = now_ms() - t0, lo, px, ld;
        ic_cuda_compiled_times(cc, &lo, &px, &ld);
        if (ic_cuda_upload(cc, n, args) || ic_cuda_synchronize(d))
            die(c, "upload");
        double t1 = now_ms();
        if (ic_cuda_launch(cc) || ic_cuda_synchronize(d))
            die(c, "first launch");
        double first = now_ms() - t1;
        printf("compile seed_pattern #%d: %.1f ms to a loaded module (lower+fuse %.1f, PTX %.1f, "
               "cuModuleLoadDataEx %.1f) %d kernel(s); first launch + sync %.2f ms\n", rep + 1, total, lo, px,
               ld, ic_cuda_compiled_num_kernels(cc), first);
        printf("RESULT {\"bench\":\"compile_seed_pattern_%d\",\"ms\":%.3f,\"lower_ms\":%.3f,\"ptx_ms\":%.3f,"
               "\"load_ms\":%.3f,\"first_launch_ms\":%.3f}\n", rep + 1, total, lo, px, ld, first);
        ic_cuda_compiled_destroy(cc);
    }
    for (int i = 0; i < n; i++)
        ic_tensor_free(c, &args[i]);
    ic_graph_destroy(g);
}

/* --only A,B: names containing any of the comma-separated parts (none given: every name). */
static bool selected(const char *only, const char *name)
{
    if (!only)
        return true;
    for (const char *p = only; *p;) {
        size_t n = strcspn(p, ",");
        char part[128];
        if (n > 0 && n < sizeof part) {
            memcpy(part, p, n);
            part[n] = 0;
            if (strstr(name, part))
                return true;
        }
        p += n + (p[n] == ',');
    }
    return false;
}

int main(int argc, char **argv)
{
    int iters = 50;
    bool quick = false, tuning = false, gemm_only = false, no_gemm = false;
    const char *only = NULL; /* benchmarks whose name contains one of these (commas) */
    const char *seed = "benchmarks/graphs/seed_pattern.json";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--iters") && i + 1 < argc)
            iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--quick"))
            quick = true;
        else if (!strcmp(argv[i], "--tune"))
            tuning = true;
        else if (!strcmp(argv[i], "--only") && i + 1 < argc)
            only = argv[++i];
        else if (!strcmp(argv[i], "--gemm-only"))
            gemm_only = true;
        else if (!strcmp(argv[i], "--no-gemm"))
            no_gemm = true;
        else if (!strcmp(argv[i], "--seed-graph") && i + 1 < argc)
            seed = argv[++i];
        else {
            fprintf(stderr, "usage: bench_gpu [--iters N] [--quick] [--tune] [--gemm-only] [--no-gemm] [--only NAME[,NAME...]] [--seed-graph PATH]\n");
            return 1;
        }
    }
    ic_ctx *c;
    if (ic_ctx_create(NULL, &c))
        return 1;
    ic_cuda *d = NULL;
    if (ic_cuda_open(c, 0, &d)) {
        printf("bench_gpu: skipped: %s\n", ic_last_error(c));
        ic_ctx_destroy(c);
        return 0;
    }
    printf("device: %s, sm_%d, %d SMs\n", ic_cuda_device_name(d), ic_cuda_sm(d), ic_cuda_num_sms(d));
    compile_time(c, d, seed); /* first: the driver's JIT is cold */
    double copy = 0;
    if (ic_cuda_copy_bandwidth(d, (size_t)512 << 20, 20, &copy))
        die(c, "copy bandwidth");
    printf("device-to-device copy: %.1f GB/s (read + write)\n", copy);
    printf("RESULT {\"bench\":\"copy\",\"gbps\":%.3f}\n", copy);
    int ng = (int)(sizeof graphs / sizeof *graphs);
    for (int i = 0; i < ng; i++)
        if ((!quick || i % 2 == 0) && !gemm_only && selected(only, graphs[i].name))
            bandwidth(c, d, &graphs[i], iters, copy, tuning);
    for (size_t i = 0; i < sizeof gemms / sizeof *gemms && !no_gemm; i++)
        if (selected(only, gemms[i].name))
            gemm_bench(c, d, &gemms[i], iters < 20 ? iters : 20, tuning);
    if (!gemm_only) {
        overhead(c, d, IC_CUDA_REDUCE_OVERHEAD, true);
        overhead(c, d, IC_CUDA_DEFAULT, true);
        overhead(c, d, IC_CUDA_DEFAULT, false);
    }
    ic_cuda_close(d);
    ic_ctx_destroy(c);
    return 0;
}
