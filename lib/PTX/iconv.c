/* iconv.c - convolutions as implicit GEMMs on the wgmma path.
 *
 * Why: a k x k conv is expanded (lib/Lower/expand_spatial.c) into an im2col copy of the
 * padded input, [img, C*KH*KW, OH*OW], materialised for the GEMM that multiplies it by the
 * weight; at ResNet-50's shapes that copy is k*k times the input, written and read back,
 * several times the cost of the MMAs. Here the GEMM's producer warpgroup fills B's shared
 * stages straight from x with the im2col index math, and the copy kernel is not launched.
 *
 * Recognition (ic__iconv_find), per program: a kernel P that only copies (a BODY stage, one
 * store to a TEMP buffer T, loads of one buffer x of the same 16-bit dtype, the value either
 * x[...] through exact casts or +0 through a select) whose T no other kernel reads but one
 * GEMM Q, as its B operand. P's index math is evaluated on integers (a small interpreter of
 * its instructions), the conv geometry fitted to probe points of it (kernel, channels,
 * spatial sizes, strides, dilations, paddings), then checked at every (k, j) of the first
 * image (up to 4M points; beyond, at every k of 64 columns and every j of 64 rows) and at
 * the probes of the last image. Anything else keeps the im2col copy.
 *
 * Code (ic__iconv_chunk): per 16-byte chunk of a k row, (c, kh, kw) once; per element its
 * (oh, ow) and a predicated 2-byte load (x offsets are not 16-byte aligned at the taps'
 * shifts, so cp.async cannot copy them); the 8 values are stored with one st.shared.v4. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "pgemm-impl.h"

/* ---- evaluating the copy kernel ---- */

enum { EV_INT, EV_CONST, EV_X, EV_BAD };

typedef struct {
    int tag;
    int64_t i;          /* EV_INT: the integer (bool 0/1); EV_X: the offset into x */
    double f;           /* EV_CONST: the float */
} ev;

typedef struct {
    const ic_kernel *k;
    int xbuf, tbuf;
    ic_dtype xdt;
    ev *v;              /* [ninstr] */
    int nop;            /* the value's pointwise ops between the load and the store */
    int op[ICONV_MAXOPS];
    double c[ICONV_MAXOPS];
    bool cfirst[ICONV_MAXOPS];
} copyk;

static bool is16(ic_dtype t) { return t == IC_F16 || t == IC_BF16; }

/* f is exactly a value of dtype t (f16/bf16), so that a max or min with it stays in t */
static bool exact_in(double f, ic_dtype t)
{
    float x = (float)f;
    if ((double)x != f && !isnan(f))
        return false;
    if (isnan(f))
        return true;
    return t == IC_BF16 ? ic_bf16_to_f32(ic_f32_to_bf16(x)) == x : ic_f16_to_f32(ic_f32_to_f16(x)) == x;
}

/* The loop IR's max and min (lib/Lower/interp.c): NaN propagates, ties keep b. */
static double fmaxmin(int op, double a, double b)
{
    if (isnan(a) || isnan(b))
        return NAN;
    return op == IC_L_MAX ? (a > b ? a : b) : (a < b ? a : b);
}
static bool isint(ic_dtype t) { return t == IC_I32 || t == IC_I64 || t == IC_BOOL; }

static int64_t fdiv(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

static bool int_op(ic_lop op, int cmp, int64_t a, int64_t b, int64_t *r)
{
    switch (op) {
    case IC_L_ADD: *r = a + b; return true;
    case IC_L_SUB: *r = a - b; return true;
    case IC_L_MUL: *r = a * b; return true;
    case IC_L_MAX: *r = a > b ? a : b; return true;
    case IC_L_MIN: *r = a < b ? a : b; return true;
    case IC_L_AND: *r = a && b; return true;
    case IC_L_OR: *r = a || b; return true;
    case IC_L_IDIV: case IC_L_MOD:
        if (b == 0)
            return false;
        *r = op == IC_L_IDIV ? fdiv(a, b) : a - fdiv(a, b) * b;
        return true;
    case IC_L_CMP:
        switch (cmp) {
        case IC_CMP_EQ: *r = a == b; return true;
        case IC_CMP_NE: *r = a != b; return true;
        case IC_CMP_LT: *r = a < b; return true;
        case IC_CMP_LE: *r = a <= b; return true;
        case IC_CMP_GT: *r = a > b; return true;
        case IC_CMP_GE: *r = a >= b; return true;
        }
        return false;
    default: return false;
    }
}

/* One instruction of the copy; EV_BAD for anything a pure copy does not do. */
static ev eval1(const copyk *P, const ic_linstr *in, const int64_t *vars)
{
    ev r = { EV_BAD, 0 }, a = { EV_BAD, 0 }, b = { EV_BAD, 0 };
    int ar = ic_linstr_arity(in);
    if (ar > 0)
        a = P->v[in->a];
    if (ar > 1)
        b = P->v[in->b];
    switch (in->op) {
    case IC_L_VAR:
        return (ev){ EV_INT, vars[in->a] };
    case IC_L_CONST:
        if (isint(in->type))
            return (ev){ EV_INT, in->imm.is_int ? in->imm.i : (int64_t)in->imm.f };
        return (ev){ EV_CONST, 0, in->imm.is_int ? (double)in->imm.i : in->imm.f };
    case IC_L_LOAD:
        if (in->buf != P->xbuf || a.tag != EV_INT || in->type != P->xdt)
            return r;
        return (ev){ EV_X, a.i };
    case IC_L_CAST:
        if (isint(in->type))
            return a.tag == EV_INT ? (ev){ EV_INT, in->type == IC_BOOL ? a.i != 0 : a.i } : r;
        /* x's values survive widening and the cast back to x's dtype */
        if (a.tag == EV_X && (in->type == IC_F32 || in->type == IC_F64 || in->type == P->xdt))
            return a;
        if (a.tag == EV_CONST && (!is16(in->type) || exact_in(a.f, in->type)))
            return a;
        return r;
    case IC_L_SELECT: /* a ? b : c */
        return a.tag != EV_INT ? r : a.i ? b : P->v[in->c];
    case IC_L_MAX: case IC_L_MIN:
        if (isint(in->type))
            break;
        if (a.tag == EV_CONST && b.tag == EV_CONST)
            return (ev){ EV_CONST, 0, fmaxmin(in->op, a.f, b.f) };
        /* x's value through the op (ic__iconv's ops, copy_kernel's chain) */
        return (a.tag == EV_X && b.tag == EV_CONST) ? a : (a.tag == EV_CONST && b.tag == EV_X) ? b : r;
    case IC_L_NOT:
        return a.tag == EV_INT ? (ev){ EV_INT, !a.i } : r;
    default:
        break;
    }
    if (ar == 2 && isint(in->type) && a.tag == EV_INT && b.tag == EV_INT && int_op(in->op, in->cmp, a.i, b.i, &r.i))
        r.tag = EV_INT;
    return r;
}

/* Runs P at outer index vars: *off the store's offset, the stored value returned. */
static ev eval_copy(const copyk *P, const int64_t *vars, int64_t *off)
{
    const ic_stage *st = &P->k->stages[0];
    for (int i = 0; i < st->ninstr; i++) {
        const ic_linstr *in = &st->instr[i];
        if (in->op == IC_L_STORE) {
            ev o = P->v[in->a];
            *off = o.tag == EV_INT ? o.i : -1;
            return o.tag == EV_INT ? P->v[in->b] : (ev){ EV_BAD, 0 };
        }
        P->v[i] = eval1(P, in, vars);
    }
    return (ev){ EV_BAD, 0 };
}

static bool is_fconst(const ic_linstr *in, double *f)
{
    if (in->op != IC_L_CONST || isint(in->type))
        return false;
    *f = in->imm.is_int ? (double)in->imm.i : in->imm.f;
    return true;
}

/* The path of the stored value back to the load: casts, selects against a constant (the
 * padding) and max/min with a constant exact in x's dtype (a fused relu, clamp), recorded
 * load-first in P->op. Anything else (two values combined) is no copy. */
static bool value_chain(copyk *P)
{
    const ic_stage *st = &P->k->stages[0];
    int i = st->instr[st->ninstr - 1].b, n = 0;
    int op[ICONV_MAXOPS];
    double c[ICONV_MAXOPS];
    bool cf[ICONV_MAXOPS];
    for (int steps = 0; steps < 64; steps++) {
        const ic_linstr *in = &st->instr[i];
        double f;
        if (in->op == IC_L_LOAD)
            break;
        if (in->op == IC_L_CAST) {
            i = in->a;
        } else if (in->op == IC_L_SELECT) {
            bool cb = is_fconst(&st->instr[in->b], &f), cc = is_fconst(&st->instr[in->c], &f);
            if (cb == cc)
                return false;
            i = cb ? in->c : in->b;
        } else if ((in->op == IC_L_MAX || in->op == IC_L_MIN) && n < ICONV_MAXOPS) {
            bool ca = is_fconst(&st->instr[in->a], &f);
            if (!ca && !is_fconst(&st->instr[in->b], &f))
                return false;
            if (!exact_in(f, P->xdt))
                return false;
            op[n] = in->op, c[n] = f, cf[n++] = ca;
            i = ca ? in->b : in->a;
        } else {
            return false;
        }
    }
    if (st->instr[i].op != IC_L_LOAD)
        return false;
    P->nop = n;
    for (int q = 0; q < n; q++) /* load first */
        P->op[q] = op[n - 1 - q], P->c[q] = c[n - 1 - q], P->cfirst[q] = cf[n - 1 - q];
    return true;
}

/* P as a copy kernel: x and T found, every load of x, one store, outer dims row-major over T. */
static bool copy_kernel(const ic_kernel *k, const ic_buffer *bufs, copyk *P)
{
    if (k->ninner || k->nstages != 1 || k->stages[0].kind != IC_STAGE_BODY || k->nouter < 1)
        return false;
    const ic_stage *st = &k->stages[0];
    int nst = 0;
    P->k = k;
    P->xbuf = P->tbuf = -1;
    for (int i = 0; i < st->ninstr; i++) {
        const ic_linstr *in = &st->instr[i];
        if (in->op == IC_L_STORE) {
            if (nst++ || i != st->ninstr - 1)
                return false;
            P->tbuf = in->buf;
        } else if (in->op == IC_L_LOAD) {
            if (P->xbuf >= 0 && P->xbuf != in->buf)
                return false;
            P->xbuf = in->buf;
        }
    }
    if (P->xbuf < 0 || P->tbuf < 0 || P->xbuf == P->tbuf || bufs[P->tbuf].kind != IC_BUF_TEMP)
        return false;
    P->xdt = bufs[P->xbuf].dtype;
    return is16(P->xdt) && bufs[P->tbuf].dtype == P->xdt && value_chain(P);
}

/* ---- the geometry ---- */

typedef struct {
    copyk P;
    int64_t nimg, K, L, xper;
    int64_t vars[IC_MAX_RANK];
} fitctx;

/* The value P stores at T[(img * K + k) * L + j]: the offset into x, -1 for a zero, -2 when
 * P does something else there. */
static int64_t probe(fitctx *F, int64_t img, int64_t k, int64_t j)
{
    const ic_kernel *pk = F->P.k;
    int64_t t = (img * F->K + k) * F->L + j, off;
    for (int d = pk->nouter - 1; d >= 0; d--) {
        F->vars[d] = t % pk->outer[d];
        t /= pk->outer[d];
    }
    int64_t want = (img * F->K + k) * F->L + j;
    ev v = eval_copy(&F->P, F->vars, &off);
    if (off != want)
        return -2;
    if (v.tag == EV_CONST && v.f == 0 && !signbit(v.f))
        return -1;
    return v.tag == EV_X ? v.i : -2;
}

/* What geometry cv says B[img, k, j] is. */
static int64_t predict(const ic__iconv *g, int64_t xper, int64_t img, int64_t k, int64_t j)
{
    int64_t taps = g->KH * g->KW, c = k / taps, kh = k % taps / g->KW, kw = k % g->KW;
    int64_t ih = j / g->OW * g->sh + kh * g->dh - g->ph, iw = j % g->OW * g->sw + kw * g->dw - g->pw;
    if (ih < 0 || ih >= g->H || iw < 0 || iw >= g->W)
        return -1;
    return img * xper + (c * g->H + ih) * g->W + iw;
}

enum { NPK = 12, NPJ = 14 };

typedef struct {
    int n;
    int64_t k[NPK * NPJ], j[NPK * NPJ], v[NPK * NPJ];
} probes;

static void add_points(int64_t *out, int *n, int max, int64_t lim, const int64_t *cand, int nc)
{
    for (int i = 0; i < nc && *n < max; i++) {
        int64_t x = cand[i] < 0 ? 0 : cand[i] >= lim ? lim - 1 : cand[i];
        bool dup = false;
        for (int q = 0; q < *n; q++)
            dup |= out[q] == x;
        if (!dup)
            out[(*n)++] = x;
    }
}

static bool make_probes(fitctx *F, probes *pr)
{
    int64_t ks[NPK], js[NPJ], K = F->K, L = F->L;
    int nk = 0, nj = 0;
    add_points(ks, &nk, NPK, K, (int64_t[]){ 0, 1, 2, 3, 4, K / 3, K / 2, K / 2 + 1, K / 2 + 4, K - 3, K - 2, K - 1 }, 12);
    add_points(js, &nj, NPJ, L, (int64_t[]){ 0, 1, 2, 5, L / 3, L / 2, L / 2 + 1, L / 2 + 3, L / 2 + 9, 2 * L / 3 + 7,
                                           L - 9, L - 3, L - 2, L - 1 }, 14);
    pr->n = 0;
    for (int a = 0; a < nk; a++)
        for (int b = 0; b < nj; b++) {
            int64_t v = probe(F, 0, ks[a], js[b]);
            if (v == -2)
                return false;
            pr->k[pr->n] = ks[a], pr->j[pr->n] = js[b], pr->v[pr->n++] = v;
        }
    return true;
}

/* The probes agree with g along w (only_w) or in full. */
static bool agrees(const ic__iconv *g, int64_t xper, const probes *pr, bool only_w)
{
    for (int i = 0; i < pr->n; i++) {
        int64_t kw = pr->k[i] % g->KW, iw = pr->j[i] % g->OW * g->sw + kw * g->dw - g->pw, v = pr->v[i];
        if (only_w) {
            if ((iw < 0 || iw >= g->W) ? v != -1 : v >= 0 && v % g->W != iw)
                return false;
        } else if (predict(g, xper, 0, pr->k[i], pr->j[i]) != v) {
            return false;
        }
    }
    return true;
}

/* Every point of image 0 (or a cross of rows and columns when there are too many) and the
 * probes of the last image. */
static bool verify(fitctx *F, const ic__iconv *g, const probes *pr)
{
    bool all = F->K * F->L <= (1 << 22);
    for (int64_t k = 0; k < F->K; k++)
        for (int64_t j = 0; j < F->L; j++) {
            if (!all && !(k % (F->K / 64 + 1) == 0 || j % (F->L / 64 + 1) == 0))
                continue;
            if (probe(F, 0, k, j) != predict(g, F->xper, 0, k, j))
                return false;
        }
    for (int i = 0; i < pr->n; i++)
        if (probe(F, F->nimg - 1, pr->k[i], pr->j[i]) != predict(g, F->xper, F->nimg - 1, pr->k[i], pr->j[i]))
            return false;
    return true;
}

/* Fits (sh, dh, ph) once the w dim and the sizes are set. */
static bool fit_h(fitctx *F, ic__iconv *g, const probes *pr, int *tries)
{
    for (g->sh = 1; g->sh <= 4; g->sh++)
        for (g->dh = 1; g->dh <= (g->KH > 1 ? 3 : 1); g->dh++)
            for (g->ph = 0; g->ph <= (g->KH - 1) * g->dh; g->ph++)
                if (agrees(g, F->xper, pr, false) && (*tries)++ < 8 && verify(F, g, pr))
                    return true;
    return false;
}

static bool fit_sizes(fitctx *F, ic__iconv *g, const probes *pr, int *tries)
{
    int64_t HW = F->xper / g->C;
    for (g->OW = 1; g->OW <= F->L; g->OW++) {
        if (F->L % g->OW)
            continue;
        g->OH = F->L / g->OW;
        for (g->W = 1; g->W <= HW; g->W++) {
            if (HW % g->W)
                continue;
            g->H = HW / g->W;
            for (g->sw = 1; g->sw <= 4; g->sw++)
                for (g->dw = 1; g->dw <= (g->KW > 1 ? 3 : 1); g->dw++)
                    for (g->pw = 0; g->pw <= (g->KW - 1) * g->dw; g->pw++)
                        if (agrees(g, F->xper, pr, true) && fit_h(F, g, pr, tries))
                            return true;
        }
    }
    return false;
}

/* The conv geometry of copy P read as [nimg, K, L]. */
static bool fit(fitctx *F, const ic_buffer *bufs, ic__iconv *g)
{
    probes pr;
    int64_t xn = bufs[F->P.xbuf].numel;
    if (xn % F->nimg || !make_probes(F, &pr))
        return false;
    F->xper = xn / F->nimg;
    int tries = 0;
    for (g->KH = 1; g->KH <= 11; g->KH++)
        for (g->KW = 1; g->KW <= 11; g->KW++) {
            if (F->K % (g->KH * g->KW))
                continue;
            g->C = F->K / (g->KH * g->KW);
            if (F->xper % g->C == 0 && fit_sizes(F, g, &pr, &tries))
                return true;
        }
    return false;
}

/* ---- pairing ---- */

/* The GEMM kernel (and its B operand's layout) reading T, the only kernel that does. */
static int only_reader(int nk, const ic_kernel *ks, int self, int tbuf)
{
    int who = -1;
    for (int i = 0; i < nk; i++)
        for (int s = 0; s < ks[i].nstages; s++)
            for (int n = 0; n < ks[i].stages[s].ninstr; n++) {
                const ic_linstr *in = &ks[i].stages[s].instr[n];
                if ((in->op == IC_L_LOAD || in->op == IC_L_STORE) && in->buf == tbuf && i != self) {
                    if (in->op == IC_L_STORE || (who >= 0 && who != i))
                        return -1;
                    who = i;
                }
            }
    return who;
}

static bool overlap(const ic_buffer *a, const ic_buffer *b)
{
    if (a->kind != IC_BUF_TEMP || b->kind != IC_BUF_TEMP || a->arena_offset < 0 || b->arena_offset < 0)
        return false;
    int64_t as = a->numel * (int64_t)ic_dtype_size(a->dtype), bs = b->numel * (int64_t)ic_dtype_size(b->dtype);
    return a->arena_offset < b->arena_offset + bs && b->arena_offset < a->arena_offset + as;
}

/* x stays as P left it until Q has read it: no kernel after P up to Q stores to x or to a
 * temp sharing x's arena bytes (the arena reuses x's bytes once its last reader, P as
 * Lower planned it, is done). */
static bool x_lives_to(int nk, const ic_kernel *ks, const ic_buffer *bufs, int p, int q, int xbuf)
{
    for (int i = p + 1; i <= q && i < nk; i++)
        for (int s = 0; s < ks[i].nstages; s++)
            for (int n = 0; n < ks[i].stages[s].ninstr; n++) {
                const ic_linstr *in = &ks[i].stages[s].instr[n];
                if (in->op == IC_L_STORE && (in->buf == xbuf || overlap(&bufs[in->buf], &bufs[xbuf])))
                    return false;
            }
    return true;
}

/* Q's B operand reads T as [nimg, K, L]: Q's loads of T at (batch, k, n) */
static bool gemm_dims(const ic_kernel *q, int64_t *nimg, int64_t *K, int64_t *L)
{
    if (q->ninner != 1 || q->nouter < 2 || q->nouter > 3)
        return false;
    *K = q->inner[0];
    *L = q->outer[q->nouter - 1];
    *nimg = q->nouter == 3 ? q->outer[0] : 1;
    return true;
}

int ic__iconv_find(int nk, const ic_kernel *ks, int nbufs, const ic_buffer *bufs, ic__iconv *out)
{
    int n = 0;
    (void)nbufs;
    for (int p = 0; p < nk; p++) {
        fitctx F;
        memset(&F, 0, sizeof F);
        if (!copy_kernel(&ks[p], bufs, &F.P))
            continue;
        int q = only_reader(nk, ks, p, F.P.tbuf);
        if (q <= p || !gemm_dims(&ks[q], &F.nimg, &F.K, &F.L) || F.nimg * F.K * F.L != bufs[F.P.tbuf].numel ||
            !x_lives_to(nk, ks, bufs, p, q, F.P.xbuf))
            continue;
        F.P.v = calloc((size_t)ks[p].stages[0].ninstr, sizeof *F.P.v);
        ic__iconv g;
        memset(&g, 0, sizeof g);
        bool ok = F.P.v && fit(&F, bufs, &g);
        free(F.P.v);
        if (!ok)
            continue;
        g.producer = p;
        g.gemm = q;
        g.xbuf = F.P.xbuf;
        g.xdt = F.P.xdt;
        g.tbuf = F.P.tbuf;
        g.nop = F.P.nop;
        memcpy(g.op, F.P.op, sizeof g.op);
        memcpy(g.c, F.P.c, sizeof g.c);
        memcpy(g.cfirst, F.P.cfirst, sizeof g.cfirst);
        g.nimg = F.nimg;
        out[n++] = g;
    }
    return n;
}

bool ic__iconv_fits(const ic__pgemm *g, const ic__iconv *cv)
{
    const ic__gop *b = &g->B;
    if (b->buf != cv->tbuf || b->xform || b->c0 != 0 || b->so != 1 || b->sk != g->N)
        return false;
    if (g->N != cv->OH * cv->OW || g->K != cv->C * cv->KH * cv->KW)
        return false;
    /* 32-bit index math (ic__iconv_chunk), with room for the taps' shifts */
    const int64_t lim = (int64_t)1 << 30;
    if (cv->nimg * cv->C * cv->H * cv->W >= lim || g->N + 8 >= lim || g->K + 8 >= lim || cv->W * cv->sh >= lim / 4)
        return false;
    if (g->nbv == 0)
        return cv->nimg == 1;
    return g->nbv == 1 && g->Bt == cv->nimg && b->cb[0] == g->K * g->N;
}

/* ---- code ---- */

/* The copy's fused ops (a relu) on the 16-bit element bits v, in f32 as the loop IR computes
 * them; the result is exact in x's dtype (a value of it or a constant exact in it). */
static LLVMValueRef apply_ops(ic__pg *G, const ic__iconv *cv, LLVMValueRef v)
{
    LLVMBuilderRef b = G->b;
    bool bf = cv->xdt == IC_BF16;
    LLVMValueRef f = bf ? LLVMBuildBitCast(b, LLVMBuildShl(b, LLVMBuildZExt(b, v, G->t_i32, ""), ic__pg_i32(G, 16), ""), G->t_f32, "")
                        : LLVMBuildFPExt(b, LLVMBuildBitCast(b, v, G->t_f16, ""), G->t_f32, "");
    LLVMValueRef nan = LLVMConstReal(G->t_f32, NAN);
    for (int i = 0; i < cv->nop; i++) {
        LLVMValueRef k = LLVMConstReal(G->t_f32, cv->c[i]);
        LLVMValueRef x = cv->cfirst[i] ? k : f, y = cv->cfirst[i] ? f : k;
        LLVMValueRef pick = LLVMBuildFCmp(b, cv->op[i] == IC_L_MAX ? LLVMRealOGT : LLVMRealOLT, x, y, "");
        LLVMValueRef r = LLVMBuildSelect(b, pick, x, y, "");
        f = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealUNO, x, y, ""), nan, r, "");
    }
    if (bf)
        return LLVMBuildTrunc(b, LLVMBuildLShr(b, LLVMBuildBitCast(b, f, G->t_i32, ""), ic__pg_i32(G, 16), ""), G->t_i16, "");
    return LLVMBuildBitCast(b, LLVMBuildFPTrunc(b, f, G->t_f16, ""), G->t_i16, "");
}

/* x[off] as 16 bits where ok, else 0. The GPU: one predicated ld.global.nc (x is read-only
 * here) and no select of a safe address; the emulator: a load of x[0] when not ok. */
static LLVMValueRef load_or_zero(ic__pg *G, LLVMValueRef xp, LLVMValueRef off, LLVMValueRef ok)
{
    LLVMBuilderRef b = G->b;
    if (!G->emu) {
        LLVMValueRef a[2] = { LLVMBuildGEP2(b, G->t_i16, xp, &off, 1, ""), LLVMBuildZExt(b, ok, G->t_i32, "") };
        return ic__pgemm_asm(G, G->t_i16, "{ .reg .pred p; setp.ne.b32 p, $2, 0; mov.b16 $0, 0; @p ld.global.nc.b16 $0, [$1]; }",
                             "=h,l,r", a, 2, false);
    }
    LLVMValueRef safe = LLVMBuildSelect(b, ok, off, LLVMConstInt(LLVMTypeOf(off), 0, 0), ""); /* x[0] exists */
    LLVMValueRef v = LLVMBuildLoad2(b, G->t_i16, LLVMBuildGEP2(b, G->t_i16, xp, &safe, 1, ""), "");
    return LLVMBuildSelect(b, ok, v, LLVMConstInt(G->t_i16, 0, 0), "");
}

/* The chunk in 32-bit index math (the GPU's integer ops are 32-bit; 64-bit ones cost two or
 * more): every index of x, K and N is below 2^30 (ic__iconv_fits). Per chunk: the row's
 * (c, kh, kw) and the first column's (oh, ow), x's offset and the row checks; per element an
 * add, the row wrap (OW >= 8: at most one in 8 columns) and the column check. */
LLVMValueRef ic__iconv_chunk(ic__gctx *X, LLVMValueRef j0w, LLVMValueRef kw64)
{
    ic__pg *G = X->G;
    const ic__pgemm *g = X->g;
    const ic__iconv *cv = &g->cv;
    LLVMBuilderRef b = G->b;
#define C(v) ic__pg_i32(G, v)
#define ADD(x, y) LLVMBuildAdd(b, x, y, "")
#define MUL(x, y) LLVMBuildMul(b, x, y, "")
#define ULT(x, y) LLVMBuildICmp(b, LLVMIntULT, x, y, "")
#define SEL(c, x, y) LLVMBuildSelect(b, c, x, y, "")
    LLVMValueRef j0 = LLVMBuildTrunc(b, j0w, G->t_i32, ""), k = LLVMBuildTrunc(b, kw64, G->t_i32, "");
    LLVMValueRef img = g->nbv ? LLVMBuildTrunc(b, G->var[g->bv[0]], G->t_i32, "") : C(0);
    LLVMValueRef c = LLVMBuildUDiv(b, k, C(cv->KH * cv->KW), ""), r = LLVMBuildURem(b, k, C(cv->KH * cv->KW), "");
    LLVMValueRef kh = LLVMBuildUDiv(b, r, C(cv->KW), ""), kw = LLVMBuildURem(b, r, C(cv->KW), "");
    LLVMValueRef oh0 = LLVMBuildUDiv(b, j0, C(cv->OW), ""), ow0 = LLVMBuildURem(b, j0, C(cv->OW), "");
    LLVMValueRef ih0 = LLVMBuildSub(b, ADD(MUL(oh0, C(cv->sh)), MUL(kh, C(cv->dh))), C(cv->ph), "");
    LLVMValueRef iw0 = LLVMBuildSub(b, ADD(MUL(ow0, C(cv->sw)), MUL(kw, C(cv->dw))), C(cv->pw), "");
    LLVMValueRef off0 = ADD(ADD(MUL(img, C(cv->C * cv->H * cv->W)), MUL(c, C(cv->H * cv->W))), ADD(MUL(ih0, C(cv->W)), iw0));
    LLVMValueRef kok = ULT(k, C(g->K));
    LLVMValueRef rv0 = LLVMBuildAnd(b, kok, ULT(ih0, C(cv->H)), ""), rv1 = LLVMBuildAnd(b, kok, ULT(ADD(ih0, C(cv->sh)), C(cv->H)), "");
    bool whole = g->N % 8 == 0; /* chunks start at multiples of 8: all in or all out */
    LLVMValueRef jok = ULT(j0, C(g->N));
    LLVMValueRef vec = LLVMConstNull(LLVMVectorType(G->t_i16, 8));
    for (int e = 0; e < 8; e++) {
        LLVMValueRef iw, off, rv;
        if (cv->OW >= 8) {
            LLVMValueRef wrap = LLVMBuildICmp(b, LLVMIntUGE, ADD(ow0, C(e)), C(cv->OW), "");
            iw = ADD(iw0, SEL(wrap, C(e * cv->sw - cv->OW * cv->sw), C(e * cv->sw)));
            off = ADD(off0, SEL(wrap, C(e * cv->sw - cv->OW * cv->sw + cv->sh * cv->W), C(e * cv->sw)));
            rv = SEL(wrap, rv1, rv0);
        } else { /* several rows in 8 columns: each element's own (oh, ow) */
            LLVMValueRef j = ADD(j0, C(e));
            LLVMValueRef ih = ADD(MUL(LLVMBuildUDiv(b, j, C(cv->OW), ""), C(cv->sh)), LLVMBuildSub(b, ih0, MUL(oh0, C(cv->sh)), ""));
            iw = ADD(MUL(LLVMBuildURem(b, j, C(cv->OW), ""), C(cv->sw)), LLVMBuildSub(b, iw0, MUL(ow0, C(cv->sw)), ""));
            rv = LLVMBuildAnd(b, kok, ULT(ih, C(cv->H)), "");
            off = ADD(LLVMBuildSub(b, off0, ADD(MUL(ih0, C(cv->W)), iw0), ""), ADD(MUL(ih, C(cv->W)), iw));
        }
        /* unsigned compares: a negative index is out of range too */
        LLVMValueRef ok = LLVMBuildAnd(b, rv, ULT(iw, C(cv->W)), "");
        ok = LLVMBuildAnd(b, ok, whole ? jok : ULT(ADD(j0, C(e)), C(g->N)), "");
        LLVMValueRef v = load_or_zero(G, G->bufptr[cv->xbuf], LLVMBuildZExt(b, off, G->t_i64, ""), ok);
        if (cv->nop) /* a padding zero stays zero: the copy pads after its ops */
            v = SEL(ok, apply_ops(G, cv, v), LLVMConstInt(G->t_i16, 0, 0));
        vec = LLVMBuildInsertElement(b, vec, v, C(e), "");
    }
#undef C
#undef ADD
#undef MUL
#undef ULT
#undef SEL
    return LLVMBuildBitCast(b, vec, LLVMVectorType(G->t_i32, 4), "");
}

LLVMValueRef ic__iconv_elems(ic__gctx *X, const ic__gop *x, int which, LLVMValueRef o, LLVMValueRef k)
{
    ic__pg *G = X->G;
    const ic__pgemm *g = X->g;
    LLVMBuilderRef b = G->b;
    LLVMTypeRef v8 = LLVMVectorType(G->t_i16, 8);
    LLVMValueRef vec = LLVMConstNull(v8);
    for (int e = 0; e < 8; e++) {
        LLVMValueRef oe = x->kmajor ? o : LLVMBuildAdd(b, o, ic__pg_i64(G, e), "");
        LLVMValueRef ke = x->kmajor ? LLVMBuildAdd(b, k, ic__pg_i64(G, e), "") : k;
        LLVMValueRef ok = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntULT, oe, ic__pg_i64(G, x->O), ""),
                                       LLVMBuildICmp(b, LLVMIntULT, ke, ic__pg_i64(G, g->K), ""), "");
        LLVMValueRef off = LLVMBuildAdd(b, X->bbase[which],
                                        LLVMBuildAdd(b, LLVMBuildMul(b, oe, ic__pg_i64(G, x->so), ""),
                                                     LLVMBuildMul(b, ke, ic__pg_i64(G, x->sk), ""), ""), "");
        off = LLVMBuildSelect(b, ok, off, X->bbase[which], ""); /* the batch's first element: safe */
        LLVMValueRef v = LLVMBuildLoad2(b, G->t_i16, LLVMBuildGEP2(b, G->t_i16, G->bufptr[x->buf], &off, 1, ""), "");
        vec = LLVMBuildInsertElement(b, vec, LLVMBuildSelect(b, ok, v, LLVMConstInt(G->t_i16, 0, 0), ""),
                                     ic__pg_i32(G, e), "");
    }
    return LLVMBuildBitCast(b, vec, LLVMVectorType(G->t_i32, 4), "");
}
