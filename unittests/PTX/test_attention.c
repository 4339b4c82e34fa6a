/* test_attention.c - the fused attention kernel (ic_kernel.attn, lib/PTX/attn.c) without a GPU.
 * 1. Hand-built kernels over strided operands (q, k, v read as [B, H, S, E] views of a
 * [B, S, H*E] layout, broadcast masks, unaligned element-wise copies) are emitted, assembled by
 * ptxas -arch=sm_90 when the toolkit is here, run by the host emulator of the generated code
 * and compared with the definition of lower.h computed in double here: bf16 and f16, head dims
 * 16 to 128, sizes that are no multiple of the 64-row tiles, Sq != Sk, additive (f32, bf16)
 * and bool masks, causal.
 * 2. Graphs through the GPU compile's path (the attention rewrite, lower, fuse with gpu_
 * names): scaled_dot_product_attention and the matmul -> scale -> mask -> softmax -> matmul
 * pattern of exported graphs (a small bf16 BERT attention block over [B, S, H*D] projections)
 * become one gpu_attention kernel whose emulation matches the reference executor on the
 * original graph; patterns with other semantics keep their kernels; the bf16 BERT layer's
 * fused stage for the GPU names the attention kernel. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "ic/lower.h"
#include "ic/ptx.h"
#include "ptxas.h"
#include "ptx_cases.h"
#include "ic/fuse.h"
#include "../Lower/lower-impl.h"

typedef struct {
    const char *what;
    ic_dtype dt, mdt;          /* mdt IC_DTYPE_COUNT: no mask */
    int64_t B, H, L, S, E;
    bool causal, bert, unaligned;
    int mask_kind;             /* 0: [B,1,1,S] 1: [L,S] over every batch index */
    int tile_m;                /* ic_ptx_params.tile_m: 0 heuristic, 64, 128 */
} acase;

static uint64_t st_ = 99;
static double rnd(void)
{
    st_ = st_ * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(st_ >> 11) / (double)(1ull << 53) * 2 - 1;
}

static void put(void *p, ic_dtype t, int64_t i, double v)
{
    if (t == IC_F32)
        ((float *)p)[i] = (float)v;
    else if (t == IC_BF16)
        ((uint16_t *)p)[i] = ic_f32_to_bf16((float)v);
    else if (t == IC_F16)
        ((uint16_t *)p)[i] = ic_f32_to_f16((float)v);
    else
        ((uint8_t *)p)[i] = v != 0;
}

static double get(const void *p, ic_dtype t, int64_t i)
{
    if (t == IC_F32)
        return ((const float *)p)[i];
    if (t == IC_BF16)
        return ic_bf16_to_f32(((const uint16_t *)p)[i]);
    if (t == IC_F16)
        return ic_f16_to_f32(((const uint16_t *)p)[i]);
    return ((const uint8_t *)p)[i];
}

/* operand (b, h, r, c) of a [B, R, H, C] layout (bert) or [B, H, R, C], plus a leading pad */
static void layout(const acase *t, int64_t R, int64_t C, ic_attn_operand *o, int buf, int64_t pad)
{
    memset(o, 0, sizeof *o);
    o->buf = buf;
    o->c0 = pad;
    o->sc = 1;
    if (t->bert) {
        o->sr = t->H * C;
        o->sb[0] = R * t->H * C;
        o->sb[1] = C;
    } else {
        o->sr = C;
        o->sb[0] = t->H * R * C;
        o->sb[1] = R * C;
    }
}

static double at(const ic_attention *a, const ic_attn_operand *o, const void *p, ic_dtype t, int64_t b, int64_t h,
                 int64_t r, int64_t c)
{
    return get(p, t, o->c0 + o->sb[0] * b + o->sb[1] * h + o->sr * r + o->sc * c);
    (void)a;
}

static void run_case(const acase *t)
{
    ic_ctx *c = ict_ctx();
    int64_t pad = t->unaligned ? 3 : 0;
    int64_t nq = t->B * t->H * t->L * t->E + pad, nk = t->B * t->H * t->S * t->E + pad;
    bool has_mask = t->mdt != IC_DTYPE_COUNT;
    int64_t nm = t->mask_kind == 0 ? t->B * t->S : t->L * t->S, no = t->B * t->H * t->L * t->E;
    size_t es = ic_dtype_size(t->dt);
    void *q = calloc((size_t)nq, es), *k = calloc((size_t)nk, es), *v = calloc((size_t)nk, es);
    void *m = calloc((size_t)nm, 4), *out = malloc((size_t)no * es);
    cr_assert(q && k && v && m && out);
    for (int64_t i = 0; i < nq; i++)
        put(q, t->dt, i, rnd());
    for (int64_t i = 0; i < nk; i++) {
        put(k, t->dt, i, rnd());
        put(v, t->dt, i, rnd());
    }
    for (int64_t i = 0; i < nm && has_mask; i++) /* padding-style: some keys off */
        put(m, t->mdt, i, t->mdt == IC_BOOL ? (i % 7 != 3) : (i % 7 == 3 ? -10000.0 : rnd()));
    memset(out, 0xcd, (size_t)no * es);
    ic_attention a;
    memset(&a, 0, sizeof a);
    a.nb = 2;
    a.batch[0] = t->B;
    a.batch[1] = t->H;
    a.L = t->L, a.S = t->S, a.E = t->E;
    a.scale = 1 / sqrt((double)t->E);
    a.causal = t->causal;
    layout(t, t->L, t->E, &a.q, 0, pad);
    layout(t, t->S, t->E, &a.k, 1, pad);
    layout(t, t->S, t->E, &a.v, 2, pad);
    acase plain = *t;
    plain.bert = false;
    layout(&plain, t->L, t->E, &a.out, 4, 0);
    memset(&a.mask, 0, sizeof a.mask);
    a.mask.buf = has_mask ? 3 : -1;
    if (has_mask && t->mask_kind == 0) {
        a.mask.sb[0] = t->S;
        a.mask.sc = 1;
    } else if (has_mask) {
        a.mask.sr = t->S;
        a.mask.sc = 1;
    }
    ic_kernel kn;
    memset(&kn, 0, sizeof kn);
    kn.name = "gpu_attention_0";
    kn.nouter = 4;
    kn.outer[0] = t->B, kn.outer[1] = t->H, kn.outer[2] = t->L, kn.outer[3] = t->E;
    kn.ninner = 1;
    kn.inner[0] = t->S;
    kn.attn = &a;
    ic_buffer bufs[5];
    memset(bufs, 0, sizeof bufs);
    int64_t numel[5] = { nq, nk, nk, nm, no };
    for (int i = 0; i < 5; i++) {
        bufs[i].kind = i < 4 ? IC_BUF_ARG : IC_BUF_OUTPUT;
        bufs[i].dtype = i == 3 ? (has_mask ? t->mdt : IC_F32) : t->dt;
        bufs[i].numel = numel[i];
        bufs[i].index = i < 4 ? i : 0;
        bufs[i].name = (const char *[]){ "q", "k", "v", "mask", "out" }[i];
        bufs[i].arena_offset = -1;
    }
    ic_ptx_module *mod = NULL;
    ic_ptx_options o = { .sm = 90 };
    ic_ptx_params prm = { .tile_m = t->tile_m };
    cr_assert_eq(ic_ptx_emit_kernels(c, 1, &kn, 5, bufs, &o, &prm, &mod), IC_OK, "%s: %s", t->what, ic_last_error(c));
    const ic_ptx_kernel *pk = ic_ptx_module_kernel(mod, 0);
    cr_assert_eq(pk->mode, IC_PTX_ATTENTION, "%s", t->what);
    if (t->tile_m)
        cr_assert(pk->params.tile_m == t->tile_m && pk->block == 2 * t->tile_m, "%s: tile_m %d block %d", t->what,
                  pk->params.tile_m, pk->block);
    cr_assert(pk->dyn_smem_bytes > 0, "%s", t->what);
    const char *text = ic_ptx_module_text(mod);
    cr_assert(strstr(text, "mma.sync.aligned.m16n8k16"), "%s: no mma in the PTX", t->what);
    cr_assert(strstr(text, "ldmatrix.sync.aligned.m8n8.x4.trans"), "%s: no ldmatrix.trans in the PTX", t->what);
    char log[4096];
    cr_assert(assemble(text, log, sizeof log), "%s: ptxas refused the PTX:\n%s", t->what, log);
    ic_ptx_module_destroy(mod);
    void *mem[5] = { q, k, v, m, out };
    cr_assert_eq(ic_ptx_emulate_kernels(c, 1, &kn, 5, bufs, &prm, mem), IC_OK, "%s: %s", t->what, ic_last_error(c));
    /* the definition, in double */
    double *p = malloc(sizeof(double) * (size_t)t->S);
    double rtol = t->dt == IC_BF16 ? 1.6e-2 : 1e-3, atol = t->dt == IC_BF16 ? 1e-2 : 1e-3;
    int bad = 0;
    for (int64_t b = 0; b < t->B; b++)
        for (int64_t h = 0; h < t->H; h++)
            for (int64_t l = 0; l < t->L; l++) {
                double mx = -INFINITY, den = 0;
                for (int64_t s = 0; s < t->S; s++) {
                    double x = 0;
                    for (int64_t e = 0; e < t->E; e++)
                        x += at(&a, &a.q, q, t->dt, b, h, l, e) * at(&a, &a.k, k, t->dt, b, h, s, e);
                    x *= a.scale;
                    if (has_mask) {
                        double mv = get(m, t->mdt, t->mask_kind == 0 ? b * t->S + s : l * t->S + s);
                        x = t->mdt == IC_BOOL ? (mv != 0 ? x : -INFINITY) : x + mv;
                    }
                    if (t->causal && s > l)
                        x = -INFINITY;
                    p[s] = x;
                    mx = x > mx ? x : mx;
                }
                for (int64_t s = 0; s < t->S; s++)
                    den += p[s] = exp(p[s] - mx);
                for (int64_t e = 0; e < t->E; e++) {
                    double want = 0;
                    for (int64_t s = 0; s < t->S; s++)
                        want += p[s] / den * at(&a, &a.v, v, t->dt, b, h, s, e);
                    double got = get(out, t->dt, ((b * t->H + h) * t->L + l) * t->E + e);
                    if (!(fabs(got - want) <= atol + rtol * fabs(want)) && bad++ < 5)
                        fprintf(stderr, "%s: [%lld,%lld,%lld,%lld] got %g want %g\n", t->what, (long long)b,
                                (long long)h, (long long)l, (long long)e, got, want);
                }
            }
    cr_assert_eq(bad, 0, "%s: %d elements differ", t->what, bad);
    free(p);
    free(q), free(k), free(v), free(m), free(out);
    ic_ctx_destroy(c);
}

Test(attention, bf16_bert_layout_mask_77)
{
    run_case(&(acase){ "bf16 E64 L=S=77 bert layout, [B,1,1,S] bf16 mask", IC_BF16, IC_BF16, 2, 2, 77, 77, 64, false, true, false, 0 });
}

Test(attention, f16_sq_ne_sk_no_mask_e32)
{
    run_case(&(acase){ "f16 E32 L=33 S=100, no mask", IC_F16, IC_DTYPE_COUNT, 2, 1, 33, 100, 32, false, false, false, 0 });
}

Test(attention, bf16_causal_130)
{
    run_case(&(acase){ "bf16 E64 L=S=130 causal", IC_BF16, IC_DTYPE_COUNT, 1, 1, 130, 130, 64, true, false, false, 0 });
}

Test(attention, f16_causal_mask_sq_ne_sk)
{
    run_case(&(acase){ "f16 E64 L=70 S=90 causal, f32 [L,S] mask", IC_F16, IC_F32, 1, 2, 70, 90, 64, true, true, false, 1 });
}

Test(attention, f16_e128_unaligned)
{
    run_case(&(acase){ "f16 E128 L=20 S=70, unaligned element copies, f32 mask", IC_F16, IC_F32, 1, 1, 20, 70, 128, false, false, true, 1 });
}

Test(attention, tile_m_128)
{
    run_case(&(acase){ "bf16 E64 L=150 S=77 causal, 128 rows a block, bert layout, bf16 mask", IC_BF16, IC_BF16, 1, 2, 150, 77, 64, true, true, false, 0, 128 });
    run_case(&(acase){ "f16 E32 L=130 S=200, 128 rows a block, unaligned", IC_F16, IC_DTYPE_COUNT, 1, 1, 130, 200, 32, false, false, true, 0, 128 });
}

Test(attention, bf16_e16_bool_mask)
{
    run_case(&(acase){ "bf16 E16 L=65 S=3, bool [B,1,1,S] mask", IC_BF16, IC_BOOL, 2, 1, 65, 3, 16, false, false, false, 0 });
}

/* ---- 2. graphs ---- */

/* Inputs in [-2, 2) rather than [-0.5, 0.5). */
static bool full_range;

/* The GPU compile's graph -> fused program: the attention rewrite, then lower and fuse. */
static ic_program *gpu_program(ic_ctx *c, const ic_graph *g, ic_graph **rewritten)
{
    cr_assert_eq(ic__graph_fuse_attention(c, g, rewritten), IC_OK, "%s", ic_last_error(c));
    ic_program *p = NULL, *f = NULL;
    cr_assert_eq(ic_lower_prefixed(c, *rewritten ? *rewritten : g, "gpu_", &p), IC_OK, "%s", ic_last_error(c));
    ic_fuse_options fo;
    ic_fuse_options_init(&fo);
    fo.prefix = "gpu_";
    fo.stash_norm_rows = false;
    cr_assert_eq(ic_fuse(c, p, &fo, &f), IC_OK, "%s", ic_last_error(c));
    ic_program_destroy(p);
    return f;
}

static int attention_kernels(const ic_program *f)
{
    int n = 0;
    for (int k = 0; k < ic_program_num_kernels(f); k++)
        if (ic_program_kernel(f, k)->attn) {
            cr_assert(strncmp(ic_program_kernel(f, k)->name, "gpu_attention_", 14) == 0, "kernel %s",
                      ic_program_kernel(f, k)->name);
            n++;
        }
    return n;
}

/* json fused into `want` attention kernels (and `nk` kernels in all, -1: any; out_sr: the
 * attention's output row stride, 0: any), emulated and compared with the reference on the
 * original graph (the output dtype's tolerances). */
static void check_graph_sr(const char *what, const char *json, int want, int nk, int64_t out_sr)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = graph_json(c, json), *rw = NULL;
    ic_tensor args[8], ref, got;
    int nargs = 0;
    make_args(c, g, 0, args, &nargs);
    /* values in [-0.5, 0.5) unless full_range: scores of a few units, as in trained models
     * (the reference computes sdpa in double, the GPU's expansion in bf16 steps) */
    for (int i = 0; !full_range && i < nargs; i++)
        for (int64_t e = 0; ic_dtype_is_float(args[i].dtype) && e < ic_tensor_numel(&args[i]); e++)
            ic_tensor_set(&args[i], e, ic_tensor_get(&args[i], e) / 4);
    cr_assert_eq(ic_ref_run(c, g, NULL, nargs, args, 1, &ref), IC_OK, "%s: %s", what, ic_last_error(c));
    ic_program *f = gpu_program(c, g, &rw);
    cr_assert_eq(attention_kernels(f), want, "%s: %d attention kernels", what, attention_kernels(f));
    if (nk >= 0)
        cr_assert_eq(ic_program_num_kernels(f), nk, "%s: %d kernels", what, ic_program_num_kernels(f));
    for (int k = 0; out_sr && k < ic_program_num_kernels(f); k++)
        if (ic_program_kernel(f, k)->attn)
            cr_assert_eq(ic_program_kernel(f, k)->attn->out.sr, out_sr, "%s: output row stride %lld", what,
                         (long long)ic_program_kernel(f, k)->attn->out.sr);
    ic_ptx_options o = { .sm = 90, .wgmma = -1 };
    ic_ptx_module *m = NULL;
    cr_assert_eq(ic_ptx_emit(c, f, &o, NULL, &m), IC_OK, "%s: %s", what, ic_last_error(c));
    char log[4096];
    cr_assert(assemble(ic_ptx_module_text(m), log, sizeof log), "%s: ptxas refused the PTX:\n%s", what, log);
    ic_ptx_module_destroy(m);
    ic_tensor_init(&got, ref.dtype, ref.rank, ref.shape, NULL);
    cr_assert_eq(ic_tensor_alloc(c, &got), IC_OK);
    memset(got.data, 0xcd, (size_t)ic_tensor_numel(&got) * ic_dtype_size(got.dtype));
    cr_assert_eq(ic_ptx_emulate_opts(c, f, &o, NULL, args, nargs, &got, 1), IC_OK, "%s: %s", what, ic_last_error(c));
    char msg[1024];
    cr_assert(ict_allclose(&got, &ref, msg, sizeof msg), "%s: %s", what, msg); /* the dtype's tolerances */
    /* the loop-IR interpreter runs the same program (attention kernels by their definition) */
    memset(got.data, 0xcd, (size_t)ic_tensor_numel(&got) * ic_dtype_size(got.dtype));
    cr_assert_eq(ic_program_interpret(c, f, args, nargs, &got, 1), IC_OK, "%s: %s", what, ic_last_error(c));
    cr_assert(ict_allclose(&got, &ref, msg, sizeof msg), "%s (interpreter): %s", what, msg);
    ic_tensor_free(c, &got);
    ic_tensor_free(c, &ref);
    for (int i = 0; i < nargs; i++)
        ic_tensor_free(c, &args[i]);
    ic_program_destroy(f);
    ic_graph_destroy(rw);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

static void check_graph(const char *what, const char *json, int want, int nk)
{
    check_graph_sr(what, json, want, nk, 0);
}

#define SDPA(dt, q, k, m, attrs) GRAPH(IN("q", dt, q) "," IN("k", dt, k) "," IN("v", dt, k) m, \
    "{'name':'y','op':'scaled_dot_product_attention','inputs':['q','k','v'" attrs "}", "'y'")

Test(attention_graph, sdpa_bf16_77)
{
    check_graph("sdpa bf16 [2,2,77,64]", SDPA("bf16", "[2,2,77,64]", "[2,2,77,64]", "", "]"), 1, 1);
}

Test(attention_graph, sdpa_f16_causal_sq_ne_sk)
{
    check_graph("sdpa f16 causal L=40 S=100 E=32", SDPA("f16", "[1,3,40,32]", "[1,3,100,32]", "", "],'attrs':{'is_causal':true}"), 1, 1);
    check_graph_sr("sdpa f16 causal, transposed back", GRAPH(IN("q", "f16", "[2,3,40,32]") "," IN("k", "f16", "[2,3,50,32]") "," IN("v", "f16", "[2,3,50,32]"),
        "{'name':'a','op':'scaled_dot_product_attention','inputs':['q','k','v'],'attrs':{'is_causal':true}},"
        "{'name':'y','op':'transpose','inputs':['a'],'attrs':{'dim0':1,'dim1':2}}", "'y'"), 1, 1, 96);
}

Test(attention_graph, sdpa_broadcast_kv)
{
    check_graph("sdpa bf16 q [2,2,20,32], k and v [1,2,33,32]", SDPA("bf16", "[2,2,20,32]", "[1,2,33,32]", "", "]"), 1, 1);
}

Test(attention_graph, sdpa_rank2_and_no_keys)
{
    check_graph("sdpa f16 [20,32] x [33,32]", SDPA("f16", "[20,32]", "[33,32]", "", "]"), 1, 1);
    check_graph("sdpa bf16 with no keys", SDPA("bf16", "[1,3,20,16]", "[1,3,0,16]", "", "]"), 1, 1);
}

Test(attention_graph, sdpa_bf16_mask_scale_e128)
{
    check_graph("sdpa bf16 E=128 scale 0.3, mask [2,1,20,33]",
                SDPA("bf16", "[2,2,20,128]", "[2,2,33,128]", ",{'name':'m','dtype':'bf16','shape':[2,1,20,33]}",
                     ",'m'],'attrs':{'scale':0.3}"), 1, 1);
}

/* q, k, v projections [B, S, H*D] seen as [B, H, S, D]; the context permuted back */
#define BERT(scale_node, add_node, sm_dim) GRAPH( \
    IN("qp", "bf16", "[2,77,128]") "," IN("kp", "bf16", "[2,77,128]") "," IN("vp", "bf16", "[2,77,128]") "," \
    IN("mask", "bf16", "[2,1,1,77]"), \
    "{'name':'q4','op':'reshape','inputs':['qp'],'attrs':{'shape':[2,77,2,64]}}," \
    "{'name':'k4','op':'reshape','inputs':['kp'],'attrs':{'shape':[2,77,2,64]}}," \
    "{'name':'v4','op':'reshape','inputs':['vp'],'attrs':{'shape':[2,77,2,64]}}," \
    "{'name':'qh','op':'permute','inputs':['q4'],'attrs':{'dims':[0,2,1,3]}}," \
    "{'name':'kh','op':'permute','inputs':['k4'],'attrs':{'dims':[0,2,1,3]}}," \
    "{'name':'vh','op':'permute','inputs':['v4'],'attrs':{'dims':[0,2,1,3]}}," \
    "{'name':'kt','op':'transpose','inputs':['kh'],'attrs':{'dim0':-2,'dim1':-1}}," \
    "{'name':'scores','op':'matmul','inputs':['qh','kt']}," scale_node add_node \
    "{'name':'probs','op':'softmax','inputs':['masked'],'attrs':{'dim':" sm_dim "}}," \
    "{'name':'ctx','op':'matmul','inputs':['probs','vh']}," \
    "{'name':'ctxp','op':'permute','inputs':['ctx'],'attrs':{'dims':[0,2,1,3]}}," \
    "{'name':'y','op':'reshape','inputs':['ctxp'],'attrs':{'shape':[2,77,128]}}", "'y'")
#define MUL8 "{'name':'scaled','op':'mul','inputs':['scores',0.125]},"
#define ADDM "{'name':'masked','op':'add','inputs':['scaled','mask']},"

Test(attention_graph, bert_pattern_bf16)
{
    /* the context stored as [B, S, H, D] (the permute back absorbed): rows of H * D */
    check_graph_sr("bert attention bf16 (mul 0.125, add mask)", BERT(MUL8, ADDM, "-1"), 1, 2, 128);
    /* scores of tens, where bf16 steps of 0.25 decide the softmax: the fused kernel rounds the
     * scores where the chain stores them (round_scores), so it still matches the reference */
    full_range = true;
    check_graph_sr("bert attention bf16, large scores", BERT(MUL8, ADDM, "-1"), 1, 2, 128);
    check_graph_sr("bert attention bf16, large scores, no scale", BERT("", "{'name':'masked','op':'mul','inputs':['scores',1.0]},", "-1"), 1, 2, 128);
    full_range = false;
}

Test(attention_graph, bert_pattern_div_mask_first)
{
    check_graph("bert attention bf16 (div 8, mask + scores)",
                BERT("{'name':'scaled','op':'div','inputs':['scores',8.0]},",
                     "{'name':'masked','op':'add','inputs':['mask','scaled']},", "3"), 1, 2);
}

Test(attention_graph, pattern_no_mask_no_scale)
{
    check_graph("bert attention bf16 (no scale, no mask)",
                BERT("", "{'name':'masked','op':'mul','inputs':['scores',1.0]},", "-1"), 1, 2);
}

/* other semantics keep the matmul / softmax / matmul kernels */
Test(attention_graph, not_fused)
{
    check_graph("softmax over dim 2", BERT(MUL8, ADDM, "2"), 0, -1);
    check_graph("scale by a tensor", BERT("{'name':'scaled','op':'mul','inputs':['scores','mask']},",
                                          "{'name':'masked','op':'add','inputs':['scaled',0.5]},", "-1"), 0, -1);
    check_graph("scale before the matmul's output is subtracted",
                BERT("{'name':'scaled','op':'sub','inputs':['scores',0.125]},", ADDM, "-1"), 0, -1);
}

Test(attention_graph, scores_read_twice)
{
    check_graph("scores also an output",
                GRAPH(IN("q", "bf16", "[2,32,32]") "," IN("k", "bf16", "[2,32,32]") "," IN("v", "bf16", "[2,32,32]"),
                      "{'name':'kt','op':'transpose','inputs':['k'],'attrs':{'dim0':1,'dim1':2}},"
                      "{'name':'s','op':'matmul','inputs':['q','kt']},"
                      "{'name':'p','op':'softmax','inputs':['s'],'attrs':{'dim':-1}},"
                      "{'name':'o','op':'matmul','inputs':['p','v']},"
                      "{'name':'y','op':'add','inputs':['o','s']}", "'y'"), 0, -1);
}

Test(attention_graph, f32_keeps_the_expansion)
{
    (void)ptx_cases; /* ptx_cases.h's shared cases: not used here */
    check_graph("sdpa f32", SDPA("f32", "[1,2,17,64]", "[1,2,17,64]", "", "]"), 0, -1);
}

/* The bf16 BERT layer compiled for the GPU: one attention kernel in its fused stage. */
Test(attention_graph, bert_layer_dump)
{
    ic_ctx *c = ict_ctx();
    char path[1024];
    snprintf(path, sizeof path, "%s/benchmarks/cpu/bert_layer.json", source_dir());
    FILE *in = fopen(path, "rb");
    cr_assert(in, "%s", path);
    char *raw = malloc(1 << 20), *text = malloc(2 << 20);
    cr_assert(raw && text);
    size_t n = fread(raw, 1, (1 << 20) - 1, in), k = 0;
    fclose(in);
    raw[n] = 0;
    for (const char *p = raw; *p;) /* sed 's/"f32"/"bf16"/g' */
        if (strncmp(p, "\"f32\"", 5) == 0)
            memcpy(text + k, "\"bf16\"", 6), k += 6, p += 5;
        else
            text[k++] = *p++;
    text[k] = 0;
    free(raw);
    ic_graph *g = NULL;
    cr_assert_eq(ic_graph_load_json_string(c, text, source_dir(), &g), IC_OK, "%s", ic_last_error(c));
    free(text);
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    int64_t b = 2;
    cr_assert_eq(ic_cuda_compile_dump(c, g, NULL, &b, "fused", f), IC_OK, "%s", ic_last_error(c));
    fclose(f);
    cr_assert(strstr(out, "gpu_attention_3"), "%s", out);
    cr_assert(strstr(out, "attention: batch [2, 12] L 128 S 128 E 64 scale 0.125"), "%s", out);
    cr_assert(!strstr(out, "softmax"), "%s", out);
    free(out);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* Kernels the GPU refuses, with a message that names the kernel and the reason. */
Test(attention, refused)
{
    ic_ctx *c = ict_ctx();
    ic_attention a;
    memset(&a, 0, sizeof a);
    a.nb = 1, a.batch[0] = 2, a.L = 5, a.S = 7, a.E = 24, a.scale = 1;
    ic_attn_operand *ops[4] = { &a.q, &a.k, &a.v, &a.out };
    int64_t rows[4] = { 5, 7, 7, 5 };
    for (int i = 0; i < 4; i++) {
        ops[i]->buf = i;
        ops[i]->sb[0] = rows[i] * 24, ops[i]->sr = 24, ops[i]->sc = 1;
    }
    a.mask.buf = -1;
    ic_kernel kn;
    memset(&kn, 0, sizeof kn);
    kn.name = "gpu_attention_0";
    kn.attn = &a;
    ic_buffer bufs[4];
    memset(bufs, 0, sizeof bufs);
    for (int i = 0; i < 4; i++) {
        bufs[i].kind = i < 3 ? IC_BUF_ARG : IC_BUF_OUTPUT;
        bufs[i].dtype = IC_BF16;
        bufs[i].numel = 2 * rows[i] * 24;
        bufs[i].index = i < 3 ? i : 0;
        bufs[i].arena_offset = -1;
    }
    ic_ptx_module *m = NULL;
    ict_assert_error(c, ic_ptx_emit_kernels(c, 1, &kn, 4, bufs, NULL, NULL, &m), IC_EUNSUPPORTED, "gpu_attention_0",
                     "head dim that is a multiple of 16 up to 128, got 24");
    a.E = 32; /* rows of 24 elements no longer hold it: out of the buffers */
    ict_assert_error(c, ic_ptx_emit_kernels(c, 1, &kn, 4, bufs, NULL, NULL, &m), IC_EINVAL, "gpu_attention_0",
                     "outside its buffer");
    for (int i = 0; i < 4; i++) {
        bufs[i].numel = 2 * rows[i] * 32;
        ops[i]->sb[0] = rows[i] * 32, ops[i]->sr = 32;
    }
    bufs[0].dtype = IC_F32;
    ict_assert_error(c, ic_ptx_emit_kernels(c, 1, &kn, 4, bufs, NULL, NULL, &m), IC_EUNSUPPORTED, "gpu_attention_0",
                     "one dtype, f16 or bf16");
    bufs[0].dtype = IC_BF16;
    ic_ptx_params bad = { .mode = IC_PTX_ROW };
    ict_assert_error(c, ic_ptx_emit_kernels(c, 1, &kn, 4, bufs, NULL, &bad, &m), IC_EINVAL, "gpu_attention_0",
                     "mode ATTENTION only");
    bad = (ic_ptx_params){ .tile_m = 32 };
    ict_assert_error(c, ic_ptx_emit_kernels(c, 1, &kn, 4, bufs, NULL, &bad, &m), IC_EINVAL, "gpu_attention_0",
                     "tile_m 64 or 128");
    cr_assert_eq(ic_ptx_emit_kernels(c, 1, &kn, 4, bufs, NULL, NULL, &m), IC_OK, "%s", ic_last_error(c));
    ic_ptx_module_destroy(m);
    ic_ctx_destroy(c);
}
