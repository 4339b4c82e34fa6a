/* attn.c - fused attention (ic_kernel.attn) as one flash-attention kernel on tensor cores.
 *
 * A block of BM / 16 warps owns BM query rows of one batch index (warp w: rows 16w..16w+15;
 * BM = 64, or 128 for long sequences, where each K and V tile copied then serves twice the
 * rows) and walks the keys in tiles of BN = 64:
 *   1. Q's tile goes to shared memory once and stays in registers as mma A fragments;
 *   2. K's and V's tiles go to two shared buffers in turn, tile j + 1 copied by cp.async
 *      while tile j is computed on (operands whose rows are not 16-byte copies are loaded
 *      element by element, synchronously); per tile, S = Q K^T (16 x 64 a warp,
 *      mma.sync m16n8k16: K's rows, contiguous along E, are the col-major B operand, so
 *      ldmatrix without .trans), scaled, plus the mask (read from global memory, where it
 *      may broadcast), keys past S or right of the diagonal (causal) at -inf;
 *   3. online softmax in base 2 (scores times scale * log2(e), exp2 on the SFU): each row's
 *      running max m and sum l in f32 (a row lives on the 4 lanes
 *      of a quad: 2 shuffles for the max; the sum is reduced once at the end), the output
 *      accumulators rescaled by exp(m_old - m_new);
 *   4. P, rounded to the operands' dtype, is reused in registers as the A fragments of
 *      O += P V (S's accumulator layout is the A layout of the next mma); V's fragments
 *      through ldmatrix.trans;
 *   5. O / l stored through the output's strides.
 * A causal block stops after the tile holding its last row's diagonal. The exponent base of a
 * row that has seen only masked keys is 0 rather than -inf, so exp never sees -inf - -inf;
 * such a row ends as 0 / 0 = NaN, as the reference's. Tiles are copied 16 bytes at a time
 * when an operand's rows are contiguous and 16-byte aligned, else element by element (any
 * strides, broadcast batch dims included); both zero-fill past the edges. Shared rows
 * are padded by 16 bytes so the 8 rows an ldmatrix phase reads hit distinct banks.
 * The emulator gets the same code with ldmatrix, mma and shuffles as calls (emu.c). */
#include <math.h>
#include <string.h>
#include "pgemm-impl.h"

enum { BN = 64 };
#define LOG2E 1.4426950408889634

static bool is16(ic_dtype t) { return t == IC_F16 || t == IC_BF16; }
static int pitch_of(int64_t E) { return (int)(E + 8) * 2; }

/* ---- plan ---- */

int ic__pattn_smem_bytes(const ic__pplan *pl)
{
    if (pl->mode != IC_PTX_ATTENTION)
        return 0;
    return (pl->prm.tile_m + 4 * BN) * pitch_of(pl->k->attn->E); /* Q, 2 x (K, V) */
}

ic_status ic__pattn_plan(ic_ctx *c, const ic_kernel *k, const ic_buffer *bufs, const ic_ptx_params *in,
                         ic__pplan *pl)
{
    const ic_attention *a = k->attn;
    const char *nm = k->name ? k->name : "?";
    if (in->mode && in->mode != IC_PTX_ATTENTION)
        return ic__error(c, IC_EINVAL, "ptx: kernel '%s': bad params: an attention kernel takes mode "
                         "ATTENTION only", nm);
    ic_dtype t = bufs[a->q.buf].dtype;
    if (!is16(t) || bufs[a->k.buf].dtype != t || bufs[a->v.buf].dtype != t)
        return ic__error(c, IC_EUNSUPPORTED, "ptx: kernel '%s': attention needs q, k and v of one "
                         "dtype, f16 or bf16", nm);
    if (a->E % 16 || a->E < 16 || a->E > 128)
        return ic__error(c, IC_EUNSUPPORTED, "ptx: kernel '%s': attention needs a head dim that is a "
                         "multiple of 16 up to 128, got %lld", nm, (long long)a->E);
    if (in->tile_m && in->tile_m != 64 && in->tile_m != 128)
        return ic__error(c, IC_EINVAL, "ptx: kernel '%s': bad params: attention takes tile_m 64 or 128", nm);
    if (in->tile_n && in->tile_n != BN)
        return ic__error(c, IC_EINVAL, "ptx: kernel '%s': bad params: attention takes tile_n 64", nm);
    /* 128 query rows a block once rows are many and long: half the K/V copies per row; short
     * sequences keep 64 for more blocks */
    int BM = in->tile_m ? in->tile_m : a->L >= 512 && a->S >= 512 ? 128 : 64;
    int64_t nb = 1;
    for (int i = 0; i < a->nb; i++)
        nb *= a->batch[i];
    pl->mode = IC_PTX_ATTENTION;
    pl->block = BM * 2;
    pl->grid = nb * ((a->L + BM - 1) / BM);
    if (pl->grid > 0x7fffffff)
        return ic__error(c, IC_EUNSUPPORTED, "ptx: kernel '%s': %lld blocks exceed the grid limit", nm,
                         (long long)pl->grid);
    pl->V = pl->T = pl->R = pl->S = 1;
    pl->smem = 0;
    const ic_attn_operand *ops[5] = { &a->q, &a->k, &a->v, &a->mask, &a->out };
    for (int i = 0; i < 5; i++)
        if (ops[i]->buf >= 0)
            pl->used[ops[i]->buf] = true;
    pl->stored[a->out.buf] = true;
    memset(&pl->prm, 0, sizeof pl->prm);
    pl->prm.mode = IC_PTX_ATTENTION;
    pl->prm.block = pl->block;
    pl->prm.vec = pl->prm.ept = pl->prm.threads_per_row = pl->prm.blocks_per_row = 1;
    pl->prm.tile_m = BM;
    pl->prm.tile_n = BN;
    pl->prm.tile_k = (int)a->E;
    pl->prm.warps_m = BM / 16;
    pl->prm.warps_n = 1;
    pl->prm.stages = 1;
    pl->prm.split_k = 1;
    pl->prm.wgmma = -1;
    pl->prm.regs_elems = -1;
    return IC_OK;
}

/* ---- code generation ---- */

typedef struct {
    ic__pg *G;
    const ic_attention *a;
    ic_dtype dt;               /* q, k, v */
    int pitch;                 /* bytes per shared row */
    int bm, threads;           /* query rows and threads a block */
    LLVMValueRef smem;         /* i8 base */
    LLVMValueRef base[5];      /* i64 element offsets of this batch index: q, k, v, mask, out */
    LLVMValueRef tid, lane, gid, tig, warp;
} actx;

enum { OQ, OK, OV, OM, OO };
enum { SQ = 0 }; /* shared tiles: Q, K, V in turn */

static LLVMValueRef I32(ic__pg *G, int64_t v) { return ic__pg_i32(G, v); }
static LLVMValueRef I64(ic__pg *G, int64_t v) { return ic__pg_i64(G, v); }
static LLVMValueRef add(ic__pg *G, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildAdd(G->b, a, b, ""); }
static LLVMValueRef mul(ic__pg *G, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildMul(G->b, a, b, ""); }
static LLVMValueRef slt(ic__pg *G, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildICmp(G->b, LLVMIntSLT, a, b, ""); }
static LLVMValueRef sel(ic__pg *G, LLVMValueRef c, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildSelect(G->b, c, a, b, ""); }
static LLVMValueRef z64(ic__pg *G, LLVMValueRef a) { return LLVMBuildZExt(G->b, a, G->t_i64, ""); }
static LLVMValueRef f32c(ic__pg *G, double v) { return LLVMConstReal(G->t_f32, v); }
static LLVMValueRef fmax_(ic__pg *G, LLVMValueRef a, LLVMValueRef b)
{
    LLVMValueRef x[2] = { a, b };
    return ic__pg_call(G, "llvm.maxnum", &G->t_f32, 1, x, 2);
}

/* 2^x by the SFU (ex2.approx.ftz: 2 ulp, -inf -> 0): P is rounded to 16 bits before P V, so
 * a polynomial exp's last bits would buy nothing and cost a dozen FP32 instructions a score.
 * The emulator uses the host's exp2. */
static LLVMValueRef exp2_(ic__pg *G, LLVMValueRef x)
{
    if (G->emu)
        return ic__pg_call(G, "llvm.exp2", &G->t_f32, 1, &x, 1);
    return ic__pgemm_asm(G, G->t_f32, "ex2.approx.ftz.f32 $0, $1;", "=f,f", &x, 1, false);
}

static const ic_attn_operand *opnd(const actx *A, int which)
{
    const ic_attn_operand *o[5] = { &A->a->q, &A->a->k, &A->a->v, &A->a->mask, &A->a->out };
    return o[which];
}

static LLVMValueRef smem_at(actx *A, LLVMValueRef byte)
{
    return LLVMBuildGEP2(A->G->b, A->G->t_i8, A->smem, &byte, 1, "");
}

/* Element (r, c) of operand `which` of this batch index, i64 offset r * sr + c * sc added to
 * its base: a pointer of the buffer's element type. */
static LLVMValueRef gptr(actx *A, int which, LLVMValueRef r, LLVMValueRef c)
{
    ic__pg *G = A->G;
    const ic_attn_operand *o = opnd(A, which);
    LLVMValueRef off = add(G, A->base[which], add(G, mul(G, r, I64(G, o->sr)), mul(G, c, I64(G, o->sc))));
    LLVMTypeRef et = ic__pg_mem_type(G, G->bufs[o->buf].dtype);
    return LLVMBuildGEP2(G->b, et, G->bufptr[o->buf], &off, 1, "");
}

/* 16-byte copies: rows contiguous along E, every row start 16-byte aligned. */
static bool rows_aligned(const ic_attention *a, const ic_attn_operand *o)
{
    if (o->sc != 1 || o->sr % 8 || o->c0 % 8)
        return false;
    for (int i = 0; i < a->nb; i++)
        if (o->sb[i] % 8)
            return false;
    return true;
}

/* Rows r0 .. r0+n-1 (of `rows` in all) of operand `which` into the shared tile at byte off
 * (i32), zeros past the last row; with async, 16-byte copies go through cp.async (the caller
 * commits and waits), element copies stay synchronous. */
static void load_tile(actx *A, int which, LLVMValueRef off, LLVMValueRef r0, int n, int64_t rows, bool async)
{
    ic__pg *G = A->G;
    LLVMBuilderRef b = G->b;
    const ic_attn_operand *o = opnd(A, which);
    int64_t E = A->a->E;
    bool vec = rows_aligned(A->a, o);
    int per = vec ? 8 : 1, cpr = (int)(E / per), total = n * cpr, T = A->threads;
    LLVMTypeRef t = vec ? LLVMVectorType(G->t_i16, 8) : G->t_i16;
    for (int it = 0; it * T < total; it++) {
        LLVMValueRef ci = add(G, A->tid, I32(G, (int64_t)it * T));
        LLVMValueRef row = LLVMBuildUDiv(b, ci, I32(G, cpr), "");
        LLVMValueRef col = mul(G, LLVMBuildURem(b, ci, I32(G, cpr), ""), I32(G, per));
        LLVMValueRef r = add(G, r0, z64(G, row));
        LLVMValueRef ok = slt(G, r, I64(G, rows));
        LLVMValueRef src = gptr(A, which, sel(G, ok, r, I64(G, 0)), z64(G, col));
        LLVMValueRef dst = smem_at(A, add(G, off, add(G, mul(G, row, I32(G, A->pitch)), mul(G, col, I32(G, 2)))));
        if (vec && async) {
            ic__pgemm_cp_async(G, dst, src, 16, sel(G, ok, I32(G, 16), I32(G, 0)));
            continue;
        }
        LLVMValueRef v = LLVMBuildLoad2(b, t, src, "");
        LLVMSetAlignment(v, vec ? 16 : 2);
        v = sel(G, ok, v, LLVMConstNull(t));
        LLVMSetAlignment(LLVMBuildStore(b, v, dst), vec ? 16 : 2);
    }
}

/* The mask at (l, s) as an f32 to add (a bool mask: 0 or -inf); 0 where !ok. */
static LLVMValueRef mask_at(actx *A, LLVMValueRef l, LLVMValueRef s, LLVMValueRef ok)
{
    ic__pg *G = A->G;
    ic_dtype mt = G->bufs[A->a->mask.buf].dtype;
    LLVMValueRef p = gptr(A, OM, sel(G, ok, l, I64(G, 0)), sel(G, ok, s, I64(G, 0)));
    LLVMValueRef v = LLVMBuildLoad2(G->b, ic__pg_mem_type(G, mt), p, "");
    LLVMSetAlignment(v, (unsigned)ic_dtype_size(mt));
    if (mt == IC_BOOL) {
        LLVMValueRef t = LLVMBuildICmp(G->b, LLVMIntNE, v, LLVMConstNull(LLVMTypeOf(v)), "");
        v = sel(G, t, f32c(G, 0), f32c(G, -INFINITY));
    } else {
        v = ic__pg_convert(G, v, mt, IC_F32);
        if (mt == IC_F64)
            v = LLVMBuildFPTrunc(G->b, v, G->t_f32, "");
    }
    return sel(G, ok, v, f32c(G, 0));
}

/* v rounded to the operands' dtype, as f32. */
static LLVMValueRef round16(actx *A, LLVMValueRef v)
{
    return ic__pg_convert(A->G, ic__pg_convert(A->G, v, IC_F32, A->dt), A->dt, IC_F32);
}

/* Two f32 as the f16x2 / bf16x2 register of an mma operand (lo: the smaller column). */
static LLVMValueRef pack2(actx *A, LLVMValueRef lo, LLVMValueRef hi)
{
    ic__pg *G = A->G;
    LLVMBuilderRef b = G->b;
    LLVMValueRef x = LLVMBuildZExt(b, ic__pg_convert(G, lo, IC_F32, A->dt), G->t_i32, "");
    LLVMValueRef y = LLVMBuildZExt(b, ic__pg_convert(G, hi, IC_F32, A->dt), G->t_i32, "");
    return LLVMBuildOr(b, x, LLVMBuildShl(b, y, I32(G, 16), ""), "");
}

static LLVMValueRef ld(ic__pg *G, LLVMValueRef p) { return LLVMBuildLoad2(G->b, G->t_f32, p, ""); }
static void st(ic__pg *G, LLVMValueRef v, LLVMValueRef p) { LLVMBuildStore(G->b, v, p); }

/* The batch index of block part bflat: each operand's base offset. */
static void batch_bases(actx *A, LLVMValueRef bflat)
{
    ic__pg *G = A->G;
    for (int w = 0; w < 5; w++)
        A->base[w] = I64(G, opnd(A, w)->buf >= 0 ? opnd(A, w)->c0 : 0);
    LLVMValueRef rest = bflat;
    for (int i = A->a->nb - 1; i >= 0; i--) {
        LLVMValueRef bi = LLVMBuildURem(G->b, rest, I64(G, A->a->batch[i]), "");
        rest = LLVMBuildUDiv(G->b, rest, I64(G, A->a->batch[i]), "");
        for (int w = 0; w < 5; w++)
            if (opnd(A, w)->buf >= 0)
                A->base[w] = add(G, A->base[w], mul(G, bi, I64(G, opnd(A, w)->sb[i])));
    }
}

/* Q's A fragments of this warp for every k step of 16 (from the shared Q tile). */
static void q_fragments(actx *A, LLVMValueRef qf[8][4])
{
    ic__pg *G = A->G;
    LLVMBuilderRef b = G->b;
    LLVMValueRef row = add(G, mul(G, A->warp, I32(G, 16)), LLVMBuildURem(b, A->lane, I32(G, 16), ""));
    LLVMValueRef col0 = mul(G, LLVMBuildUDiv(b, A->lane, I32(G, 16), ""), I32(G, 8));
    for (int kk = 0; kk < A->a->E / 16; kk++) {
        LLVMValueRef col = add(G, col0, I32(G, kk * 16));
        LLVMValueRef at = add(G, I32(G, SQ), add(G, mul(G, row, I32(G, A->pitch)), mul(G, col, I32(G, 2))));
        ic__pgemm_ldmatrix4(G, smem_at(A, at), false, qf[kk]);
    }
}

/* s[ni][0..3] = this warp's 16 x 64 block of Q K^T, n pieces of 8 keys. */
static void scores(actx *A, LLVMValueRef qf[8][4], LLVMValueRef koff, LLVMValueRef s[8][4])
{
    ic__pg *G = A->G;
    LLVMBuilderRef b = G->b;
    int kind = A->dt == IC_BF16;
    LLVMValueRef q = LLVMBuildUDiv(b, A->lane, I32(G, 8), ""), r = LLVMBuildURem(b, A->lane, I32(G, 8), "");
    LLVMValueRef rowq = add(G, mul(G, LLVMBuildUDiv(b, q, I32(G, 2), ""), I32(G, 8)), r);
    LLVMValueRef colq = mul(G, LLVMBuildURem(b, q, I32(G, 2), ""), I32(G, 8));
    for (int ni = 0; ni < BN / 8; ni++)
        for (int i = 0; i < 4; i++)
            s[ni][i] = f32c(G, 0);
    for (int kk = 0; kk < A->a->E / 16; kk++)
        for (int ni = 0; ni < BN / 8; ni += 2) { /* rows: keys ni*8 + (q/2)*8 + r, cols: k (q%2)*8 */
            LLVMValueRef row = add(G, rowq, I32(G, ni * 8)), col = add(G, colq, I32(G, kk * 16)), o[4];
            LLVMValueRef at = add(G, koff, add(G, mul(G, row, I32(G, A->pitch)), mul(G, col, I32(G, 2))));
            ic__pgemm_ldmatrix4(G, smem_at(A, at), false, o);
            LLVMValueRef b0[2] = { o[0], o[1] }, b1[2] = { o[2], o[3] };
            ic__pgemm_mma(G, kind, qf[kk], b0, s[ni]);
            ic__pgemm_mma(G, kind, qf[kk], b1, s[ni + 1]);
        }
}

/* o[ni] += P V for this warp's P (p[ni][0..3], the scores' layout) and the shared V tile. */
static void accumulate_pv(actx *A, LLVMValueRef p[8][4], LLVMValueRef voff, LLVMValueRef (*o)[4])
{
    ic__pg *G = A->G;
    LLVMBuilderRef b = G->b;
    int kind = A->dt == IC_BF16, NE = (int)(A->a->E / 8);
    LLVMValueRef q = LLVMBuildUDiv(b, A->lane, I32(G, 8), ""), r = LLVMBuildURem(b, A->lane, I32(G, 8), "");
    LLVMValueRef rowq = add(G, mul(G, LLVMBuildURem(b, q, I32(G, 2), ""), I32(G, 8)), r);
    LLVMValueRef colq = mul(G, LLVMBuildUDiv(b, q, I32(G, 2), ""), I32(G, 8));
    for (int kk = 0; kk < BN / 16; kk++) {
        LLVMValueRef af[4] = {
            pack2(A, p[2 * kk][0], p[2 * kk][1]), pack2(A, p[2 * kk][2], p[2 * kk][3]),
            pack2(A, p[2 * kk + 1][0], p[2 * kk + 1][1]), pack2(A, p[2 * kk + 1][2], p[2 * kk + 1][3]),
        };
        for (int ni = 0; ni < NE; ni += 2) { /* rows: keys kk*16 + (q%2)*8 + r, cols: e ni*8 + (q/2)*8 */
            LLVMValueRef row = add(G, rowq, I32(G, kk * 16)), col = add(G, colq, I32(G, ni * 8)), t[4];
            LLVMValueRef at = add(G, voff, add(G, mul(G, row, I32(G, A->pitch)), mul(G, col, I32(G, 2))));
            ic__pgemm_ldmatrix4(G, smem_at(A, at), true, t);
            LLVMValueRef b0[2] = { t[0], t[1] }, b1[2] = { t[2], t[3] };
            ic__pgemm_mma(G, kind, af, b0, o[ni]);
            ic__pgemm_mma(G, kind, af, b1, o[ni + 1]);
        }
    }
}

/* Scale, mask and online softmax of one key tile (first key s0) in place: s becomes P; the
 * running max m[h] and sum l[h] (allocas, h: rows gid and gid + 8) and the accumulators o
 * are updated. */
static void softmax_tile(actx *A, LLVMValueRef s[8][4], LLVMValueRef s0, LLVMValueRef lrow[2],
                         LLVMValueRef m[2], LLVMValueRef l[2], LLVMValueRef (*o)[4])
{
    ic__pg *G = A->G;
    const ic_attention *a = A->a;
    LLVMValueRef ninf = f32c(G, -INFINITY);
    for (int ni = 0; ni < BN / 8; ni++)
        for (int i = 0; i < 4; i++) {
            int h = i / 2;
            LLVMValueRef col = add(G, s0, z64(G, add(G, mul(G, A->tig, I32(G, 2)), I32(G, ni * 8 + i % 2))));
            LLVMValueRef key = slt(G, col, I64(G, a->S));
            LLVMValueRef mok = LLVMBuildAnd(G->b, key, slt(G, lrow[h], I64(G, a->L)), ""), x;
            if (a->round) { /* the replaced chain's roundings: q . k, scaled, masked */
                x = LLVMBuildFMul(G->b, round16(A, s[ni][i]), f32c(G, a->scale), "");
                x = round16(A, x);
                if (a->mask.buf >= 0)
                    x = round16(A, LLVMBuildFAdd(G->b, x, mask_at(A, lrow[h], col, mok), ""));
                x = LLVMBuildFMul(G->b, x, f32c(G, LOG2E), "");
            } else { /* in base 2: scale * log2(e) * s + log2(e) * mask, one FFMA */
                LLVMValueRef madd = f32c(G, 0);
                if (a->mask.buf >= 0)
                    madd = LLVMBuildFMul(G->b, mask_at(A, lrow[h], col, mok), f32c(G, LOG2E), "");
                LLVMValueRef fa[3] = { s[ni][i], f32c(G, a->scale * LOG2E), madd };
                x = ic__pg_call(G, "llvm.fma", &G->t_f32, 1, fa, 3);
            }
            if (a->causal)
                key = LLVMBuildAnd(G->b, key, LLVMBuildICmp(G->b, LLVMIntSLE, col, lrow[h], ""), "");
            s[ni][i] = sel(G, key, x, ninf);
        }
    int NE = (int)(a->E / 8);
    for (int h = 0; h < 2; h++) {
        LLVMValueRef mx = ninf;
        for (int ni = 0; ni < BN / 8; ni++)
            mx = fmax_(G, mx, fmax_(G, s[ni][h * 2], s[ni][h * 2 + 1]));
        mx = fmax_(G, mx, ic__pg_shfl(G, mx, 1));
        mx = fmax_(G, mx, ic__pg_shfl(G, mx, 2));
        LLVMValueRef mold = ld(G, m[h]), mnew = fmax_(G, mold, mx);
        /* a row that has seen only masked keys: base 0, so every exp is of -inf (0) */
        LLVMValueRef base = sel(G, LLVMBuildFCmp(G->b, LLVMRealOEQ, mnew, ninf, ""), f32c(G, 0), mnew);
        LLVMValueRef alpha = exp2_(G, LLVMBuildFSub(G->b, mold, base, ""));
        LLVMValueRef sum = f32c(G, 0);
        for (int ni = 0; ni < BN / 8; ni++)
            for (int e = 0; e < 2; e++) {
                LLVMValueRef p = exp2_(G, LLVMBuildFSub(G->b, s[ni][h * 2 + e], base, ""));
                s[ni][h * 2 + e] = p;
                sum = LLVMBuildFAdd(G->b, sum, p, "");
            }
        st(G, mnew, m[h]);
        st(G, LLVMBuildFAdd(G->b, LLVMBuildFMul(G->b, ld(G, l[h]), alpha, ""), sum, ""), l[h]);
        for (int ni = 0; ni < NE; ni++)
            for (int e = 0; e < 2; e++)
                o[ni][h * 2 + e] = LLVMBuildFMul(G->b, o[ni][h * 2 + e], alpha, "");
    }
}

/* out rows lrow[h], columns ni*8 + tig*2 + e: o / l (reduced over the quad), rows < L only. */
static void store_out(actx *A, LLVMValueRef lrow[2], LLVMValueRef l[2], LLVMValueRef (*o)[4])
{
    ic__pg *G = A->G;
    ic_dtype ot = G->bufs[A->a->out.buf].dtype;
    int NE = (int)(A->a->E / 8);
    for (int h = 0; h < 2; h++) {
        LLVMValueRef sum = ld(G, l[h]);
        sum = LLVMBuildFAdd(G->b, sum, ic__pg_shfl(G, sum, 1), "");
        sum = LLVMBuildFAdd(G->b, sum, ic__pg_shfl(G, sum, 2), "");
        LLVMBasicBlockRef cont = ic__pg_if(G, slt(G, lrow[h], I64(G, A->a->L)), "rowok");
        for (int ni = 0; ni < NE; ni++)
            for (int e = 0; e < 2; e++) {
                LLVMValueRef col = z64(G, add(G, mul(G, A->tig, I32(G, 2)), I32(G, ni * 8 + e)));
                /* no keys at all: the empty sum, 0 (a row whose keys are all masked is NaN) */
                LLVMValueRef v = A->a->S ? LLVMBuildFDiv(G->b, o[ni][h * 2 + e], sum, "") : f32c(G, 0);
                v = ic__pg_convert(G, v, IC_F32, ot);
                LLVMSetAlignment(LLVMBuildStore(G->b, v, gptr(A, OO, lrow[h], col)), (unsigned)ic_dtype_size(ot));
            }
        ic__pg_endif(G, cont);
    }
}

void ic__pgen_attention(ic__pg *G)
{
    const ic_attention *a = G->k->attn;
    LLVMBuilderRef b = G->b;
    actx A;
    memset(&A, 0, sizeof A);
    A.G = G;
    A.a = a;
    A.dt = G->bufs[a->q.buf].dtype;
    A.pitch = pitch_of(a->E);
    A.smem = ic__pgemm_dynamic_smem(G, ic__pattn_smem_bytes(G->pl));
    A.tid = G->tid;
    A.warp = LLVMBuildUDiv(b, A.tid, I32(G, 32), "");
    A.lane = LLVMBuildURem(b, A.tid, I32(G, 32), "");
    A.gid = LLVMBuildUDiv(b, A.lane, I32(G, 4), "");
    A.tig = LLVMBuildURem(b, A.lane, I32(G, 4), "");
    int BM = A.bm = G->pl->prm.tile_m, tile = BN * A.pitch, qtile = BM * A.pitch, NE = (int)(a->E / 8);
    A.threads = BM * 2;
    /* E <= 64: 128 registers a thread, so that 65536 hold 2 blocks of 8 warps or 4 of 4 (ptxas
     * would otherwise take a few more and halve the warps an SM keeps in flight); E = 128
     * needs about 210 without spilling */
    if (!G->emu && a->E <= 64)
        ic__pg_annotate(G, "minctasm", BM == 128 ? 2 : 4);
    int64_t mt = (a->L + BM - 1) / BM;
    LLVMValueRef bid = z64(G, G->bid);
    LLVMValueRef l0 = mul(G, LLVMBuildURem(b, bid, I64(G, mt), ""), I64(G, BM));
    batch_bases(&A, LLVMBuildUDiv(b, bid, I64(G, mt), ""));
    LLVMValueRef lrow[2];
    for (int h = 0; h < 2; h++)
        lrow[h] = add(G, l0, z64(G, add(G, mul(G, A.warp, I32(G, 16)), add(G, A.gid, I32(G, h * 8)))));
    load_tile(&A, OQ, I32(G, SQ), l0, BM, a->L, false);
    ic__pg_barrier(G);
    LLVMValueRef qf[8][4];
    q_fragments(&A, qf);
    /* running state in allocas (promoted to registers) */
    LLVMValueRef m[2], l[2], oacc[16][4];
    for (int h = 0; h < 2; h++) {
        m[h] = ic__pg_alloca(G, G->t_f32);
        l[h] = ic__pg_alloca(G, G->t_f32);
        st(G, f32c(G, -INFINITY), m[h]);
        st(G, f32c(G, 0), l[h]);
    }
    for (int ni = 0; ni < NE; ni++)
        for (int i = 0; i < 4; i++) {
            oacc[ni][i] = ic__pg_alloca(G, G->t_f32);
            st(G, f32c(G, 0), oacc[ni][i]);
        }
    /* key tiles: all of them, or (causal) up to the one holding this block's last diagonal */
    LLVMValueRef kend = I64(G, a->S);
    if (a->causal) {
        LLVMValueRef diag = add(G, l0, I64(G, BM));
        kend = sel(G, slt(G, diag, kend), diag, kend);
    }
    LLVMValueRef nkt = LLVMBuildSDiv(b, add(G, kend, I64(G, BN - 1)), I64(G, BN), "");
    /* K and V tiles double-buffered after Q: tile j in buffer j % 2, tile j + 1 copied
     * (cp.async) while tile j is computed on */
    LLVMBasicBlockRef cont = ic__pg_if(G, slt(G, I64(G, 0), nkt), "first");
    load_tile(&A, OK, I32(G, qtile), I64(G, 0), BN, a->S, true);
    load_tile(&A, OV, I32(G, qtile + tile), I64(G, 0), BN, a->S, true);
    ic__pg_endif(G, cont);
    ic__pgemm_cp_commit(G);
    ic__pg_loop L;
    LLVMValueRef j = ic__pg_loop_begin(G, &L, I64(G, 0), LLVMIntSLT, nkt,
                                       (const char *const[]){ "ktile", "kbody", "kdone" });
    LLVMValueRef s0 = mul(G, j, I64(G, BN)), nxt = add(G, j, I64(G, 1));
    /* buffer j % 2: K at qtile + 2 tile (j % 2), V after it */
    LLVMValueRef cur = add(G, I32(G, qtile), mul(G, LLVMBuildTrunc(b, LLVMBuildAnd(b, j, I64(G, 1), ""), G->t_i32, ""), I32(G, 2 * tile)));
    LLVMValueRef other = LLVMBuildSub(b, I32(G, 2 * qtile + 2 * tile), cur, "");
    cont = ic__pg_if(G, slt(G, nxt, nkt), "prefetch");
    load_tile(&A, OK, other, mul(G, nxt, I64(G, BN)), BN, a->S, true);
    load_tile(&A, OV, add(G, other, I32(G, tile)), mul(G, nxt, I64(G, BN)), BN, a->S, true);
    ic__pg_endif(G, cont);
    ic__pgemm_cp_commit(G);
    ic__pgemm_cp_wait(G, 1); /* tile j has landed, tile j + 1 may be in flight */
    ic__pg_barrier(G);
    LLVMValueRef s[8][4], o[16][4];
    scores(&A, qf, cur, s);
    for (int ni = 0; ni < NE; ni++)
        for (int i = 0; i < 4; i++)
            o[ni][i] = ld(G, oacc[ni][i]);
    softmax_tile(&A, s, s0, lrow, m, l, o);
    accumulate_pv(&A, s, add(G, cur, I32(G, tile)), o);
    for (int ni = 0; ni < NE; ni++)
        for (int i = 0; i < 4; i++)
            st(G, o[ni][i], oacc[ni][i]);
    ic__pg_barrier(G); /* every warp is done with buffer j % 2 before tile j + 2 goes there */
    ic__pg_loop_end(G, &L, j, I64(G, 1));
    for (int ni = 0; ni < NE; ni++)
        for (int i = 0; i < 4; i++)
            o[ni][i] = ld(G, oacc[ni][i]);
    store_out(&A, lrow, l, o);
}
