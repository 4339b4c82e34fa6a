/* test_attention.c - the fused attention kernel (ic_kernel.attn, lib/PTX/attn.c) without a GPU:
 * hand-built kernels over strided operands (q, k, v read as [B, H, S, E] views of a
 * [B, S, H*E] layout, broadcast masks, unaligned element-wise copies) are emitted, assembled by
 * ptxas -arch=sm_90 when the toolkit is here, run by the host emulator of the generated code
 * and compared with the definition of lower.h computed in double here: bf16 and f16, head dims
 * 16 to 128, sizes that are no multiple of the 64-row tiles, Sq != Sk, additive (f32, bf16)
 * and bool masks, causal. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "ic/lower.h"
#include "ic/ptx.h"
#include "ptxas.h"

typedef struct {
    const char *what;
    ic_dtype dt, mdt;          /* mdt IC_DTYPE_COUNT: no mask */
    int64_t B, H, L, S, E;
    bool causal, bert, unaligned;
    int mask_kind;             /* 0: [B,1,1,S] 1: [L,S] over every batch index */
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
    cr_assert_eq(ic_ptx_emit_kernels(c, 1, &kn, 5, bufs, &o, NULL, &mod), IC_OK, "%s: %s", t->what, ic_last_error(c));
    const ic_ptx_kernel *pk = ic_ptx_module_kernel(mod, 0);
    cr_assert_eq(pk->mode, IC_PTX_ATTENTION, "%s", t->what);
    cr_assert(pk->dyn_smem_bytes > 0, "%s", t->what);
    const char *text = ic_ptx_module_text(mod);
    cr_assert(strstr(text, "mma.sync.aligned.m16n8k16"), "%s: no mma in the PTX", t->what);
    cr_assert(strstr(text, "ldmatrix.sync.aligned.m8n8.x4.trans"), "%s: no ldmatrix.trans in the PTX", t->what);
    char log[4096];
    cr_assert(assemble(text, log, sizeof log), "%s: ptxas refused the PTX:\n%s", t->what, log);
    ic_ptx_module_destroy(mod);
    void *mem[5] = { q, k, v, m, out };
    cr_assert_eq(ic_ptx_emulate_kernels(c, 1, &kn, 5, bufs, NULL, mem), IC_OK, "%s: %s", t->what, ic_last_error(c));
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

Test(attention, bf16_e16_bool_mask)
{
    run_case(&(acase){ "bf16 E16 L=65 S=3, bool [B,1,1,S] mask", IC_BF16, IC_BOOL, 2, 1, 65, 3, 16, false, false, false, 0 });
}
