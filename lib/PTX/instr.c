/* instr.c - loop-IR instructions as NVPTX LLVM IR over the lanes of the current emission:
 * types, constants and conversions (f16/bf16 live as i16 bits in registers, bool as i1),
 * loads and stores (one 16-byte vector access when the plan proved it contiguous and
 * aligned, else one access per lane), arithmetic, comparisons, and reduction updates. */
#include <math.h>
#include <string.h>
#include "ptx-impl.h"

LLVMTypeRef ic__pg_type(ic__pg *G, ic_dtype t)
{
    switch (t) {
    case IC_F32: return G->t_f32;
    case IC_F64: return G->t_f64;
    case IC_F16:
    case IC_BF16: return G->t_i16;
    case IC_I32: return G->t_i32;
    case IC_I64: return G->t_i64;
    case IC_BOOL: return G->t_i1;
    case IC_U8: case IC_I8: return G->t_i8; /* in memory only: loads widen, stores truncate */
    case IC_I16: return G->t_i16;
    default: return G->t_i32;
    }
}

LLVMTypeRef ic__pg_mem_type(ic__pg *G, ic_dtype t)
{
    return t == IC_BOOL ? G->t_i8 : ic__pg_type(G, t);
}

static bool isf(ic_dtype t) { return t == IC_F32 || t == IC_F64; }
static bool is16(ic_dtype t) { return t == IC_F16 || t == IC_BF16; }

LLVMValueRef ic__pg_const(ic__pg *G, ic_dtype t, ic_scalar s)
{
    double f = s.is_int ? (double)s.i : s.f;
    int64_t i = s.is_int ? s.i : (int64_t)s.f;
    switch (t) {
    case IC_F32:
    case IC_F64:
        return LLVMConstReal(ic__pg_type(G, t), f);
    case IC_F16:
        return LLVMConstInt(G->t_i16, ic_f32_to_f16((float)f), 0);
    case IC_BF16:
        return LLVMConstInt(G->t_i16, ic_f32_to_bf16((float)f), 0);
    case IC_BOOL:
        return LLVMConstInt(G->t_i1, s.is_int ? s.i != 0 : s.f != 0, 0);
    default:
        if (!s.is_int && !(s.f >= -9.2e18 && s.f <= 9.2e18))
            i = 0;
        return LLVMConstInt(ic__pg_type(G, t), (unsigned long long)i, 1);
    }
}

/* ---- conversions ---- */

static LLVMValueRef h16_to_f32(ic__pg *G, LLVMValueRef x, ic_dtype from)
{
    LLVMBuilderRef b = G->b;
    if (from == IC_F16 && G->emu)
        return ic__pg_ext(G, "ic__emu_h2f", G->t_f32, &G->t_i16, 1, &x);
    if (from == IC_F16)
        return LLVMBuildFPExt(b, LLVMBuildBitCast(b, x, G->t_f16, ""), G->t_f32, "");
    LLVMValueRef w = LLVMBuildShl(b, LLVMBuildZExt(b, x, G->t_i32, ""), ic__pg_i32(G, 16), "");
    return LLVMBuildBitCast(b, w, G->t_f32, "");
}

/* f32 -> bf16 bits, round to nearest even; NaN stays a (quiet) NaN. */
static LLVMValueRef f32_to_bf16(ic__pg *G, LLVMValueRef x)
{
    LLVMBuilderRef b = G->b;
    if (G->sm >= 80)
        return LLVMBuildBitCast(b, LLVMBuildFPTrunc(b, x, G->t_bf16, ""), G->t_i16, "");
    LLVMValueRef u = LLVMBuildBitCast(b, x, G->t_i32, "");
    LLVMValueRef odd = LLVMBuildAnd(b, LLVMBuildLShr(b, u, ic__pg_i32(G, 16), ""), ic__pg_i32(G, 1), "");
    LLVMValueRef r = LLVMBuildAdd(b, u, LLVMBuildAdd(b, odd, ic__pg_i32(G, 0x7fff), ""), "");
    r = LLVMBuildLShr(b, r, ic__pg_i32(G, 16), "");
    LLVMValueRef q = LLVMBuildOr(b, LLVMBuildLShr(b, u, ic__pg_i32(G, 16), ""), ic__pg_i32(G, 0x40), "");
    LLVMValueRef nan = LLVMBuildFCmp(b, LLVMRealUNO, x, x, "");
    return LLVMBuildTrunc(b, LLVMBuildSelect(b, nan, q, r, ""), G->t_i16, "");
}

static LLVMValueRef f32_to_h16(ic__pg *G, LLVMValueRef x, ic_dtype to)
{
    if (to == IC_BF16)
        return f32_to_bf16(G, x);
    if (G->emu)
        return ic__pg_ext(G, "ic__emu_f2h", G->t_i16, &G->t_f32, 1, &x);
    return LLVMBuildBitCast(G->b, LLVMBuildFPTrunc(G->b, x, G->t_f16, ""), G->t_i16, "");
}

LLVMValueRef ic__pg_convert(ic__pg *G, LLVMValueRef x, ic_dtype from, ic_dtype to)
{
    LLVMBuilderRef b = G->b;
    if (from == to)
        return x;
    if (is16(from)) {
        if (to == IC_F64 && from == IC_F16 && !G->emu)
            return LLVMBuildFPExt(b, LLVMBuildBitCast(b, x, G->t_f16, ""), G->t_f64, "");
        return ic__pg_convert(G, h16_to_f32(G, x, from), IC_F32, to);
    }
    if (is16(to)) {
        if (from == IC_F64 && to == IC_F16 && G->emu)
            return ic__pg_ext(G, "ic__emu_d2h", G->t_i16, &G->t_f64, 1, &x);
        if (from == IC_F64 && to == IC_F16)
            return LLVMBuildBitCast(b, LLVMBuildFPTrunc(b, x, G->t_f16, ""), G->t_i16, "");
        return f32_to_h16(G, ic__pg_convert(G, x, from, IC_F32), to);
    }
    LLVMTypeRef tt = ic__pg_type(G, to);
    if (to == IC_BOOL) {
        if (isf(from))
            return LLVMBuildFCmp(b, LLVMRealUNE, x, LLVMConstNull(LLVMTypeOf(x)), "");
        return LLVMBuildICmp(b, LLVMIntNE, x, LLVMConstNull(LLVMTypeOf(x)), "");
    }
    if (from == IC_BOOL)
        return isf(to) ? LLVMBuildUIToFP(b, x, tt, "") : LLVMBuildZExt(b, x, tt, "");
    if (isf(from) && isf(to))
        return to == IC_F64 ? LLVMBuildFPExt(b, x, tt, "") : LLVMBuildFPTrunc(b, x, tt, "");
    if (isf(to))
        return from == IC_U8 ? LLVMBuildUIToFP(b, x, tt, "") : LLVMBuildSIToFP(b, x, tt, "");
    if (isf(from)) { /* truncates toward zero, saturates, NaN -> 0 (cvt.rzi semantics) */
        LLVMTypeRef ov[2] = { tt, LLVMTypeOf(x) };
        return ic__pg_call(G, "llvm.fptosi.sat", ov, 2, &x, 1);
    }
    return LLVMBuildIntCast2(b, x, tt, from != IC_U8, ""); /* u8 zero-extends; narrowing wraps */
}

/* ---- scalar operations ---- */

static LLVMValueRef fmaxmin(ic__pg *G, ic_dtype t, LLVMValueRef a, LLVMValueRef c, bool max)
{
    LLVMBuilderRef b = G->b;
    if (t == IC_F32 && G->sm >= 80) { /* max.NaN.f32 */
        LLVMTypeRef ty = G->t_f32;
        LLVMValueRef x[2] = { a, c };
        return ic__pg_call(G, max ? "llvm.maximum" : "llvm.minimum", &ty, 1, x, 2);
    }
    LLVMValueRef gt = LLVMBuildFCmp(b, max ? LLVMRealOGT : LLVMRealOLT, a, c, "");
    LLVMValueRef r = LLVMBuildSelect(b, gt, a, c, "");
    r = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealUNO, a, a, ""), a, r, "");
    return LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealUNO, c, c, ""), c, r, "");
}

static LLVMValueRef imaxmin(ic__pg *G, ic_dtype t, LLVMValueRef a, LLVMValueRef c, bool max)
{
    LLVMBuilderRef b = G->b;
    if (t == IC_BOOL)
        return max ? LLVMBuildOr(b, a, c, "") : LLVMBuildAnd(b, a, c, "");
    LLVMValueRef gt = LLVMBuildICmp(b, max ? LLVMIntSGT : LLVMIntSLT, a, c, "");
    return LLVMBuildSelect(b, gt, a, c, "");
}

/* Floor division and its remainder (sign of the divisor); a zero divisor gives 0. */
static LLVMValueRef idivmod(ic__pg *G, LLVMValueRef a, LLVMValueRef c, bool mod)
{
    LLVMBuilderRef b = G->b;
    LLVMTypeRef t = LLVMTypeOf(a);
    LLVMValueRef zero = LLVMConstNull(t), one = LLVMConstInt(t, 1, 0);
    if (LLVMIsAConstantInt(c)) {
        long long k = LLVMConstIntGetSExtValue(c);
        if (k > 0 && (k & (k - 1)) == 0) { /* power of two: shifts and masks floor exactly */
            int sh = 0;
            while ((1LL << sh) < k)
                sh++;
            return mod ? LLVMBuildAnd(b, a, LLVMConstInt(t, (unsigned long long)(k - 1), 0), "")
                       : LLVMBuildAShr(b, a, LLVMConstInt(t, (unsigned long long)sh, 0), "");
        }
        if (k == 0)
            return zero;
    }
    LLVMValueRef cz = LLVMBuildICmp(b, LLVMIntEQ, c, zero, "");
    LLVMValueRef d = LLVMBuildSelect(b, cz, one, c, "");
    LLVMValueRef q = LLVMBuildSDiv(b, a, d, "");
    LLVMValueRef r = LLVMBuildSRem(b, a, d, "");
    LLVMValueRef fix = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntNE, r, zero, ""),
                                    LLVMBuildICmp(b, LLVMIntSLT, LLVMBuildXor(b, r, d, ""), zero, ""), "");
    LLVMValueRef res = mod ? LLVMBuildSelect(b, fix, LLVMBuildAdd(b, r, d, ""), r, "")
                           : LLVMBuildSelect(b, fix, LLVMBuildSub(b, q, one, ""), q, "");
    return LLVMBuildSelect(b, cz, zero, res, "");
}

static LLVMValueRef binop(ic__pg *G, const ic_linstr *in, LLVMValueRef a, LLVMValueRef c,
                          ic_dtype ot)
{
    LLVMBuilderRef b = G->b;
    ic_dtype t = in->type;
    bool f = isf(t);
    switch (in->op) {
    case IC_L_ADD:
        return f ? LLVMBuildFAdd(b, a, c, "") : t == IC_BOOL ? LLVMBuildOr(b, a, c, "") : LLVMBuildAdd(b, a, c, "");
    case IC_L_SUB:
        return f ? LLVMBuildFSub(b, a, c, "") : t == IC_BOOL ? LLVMBuildXor(b, a, c, "") : LLVMBuildSub(b, a, c, "");
    case IC_L_MUL:
        return f ? LLVMBuildFMul(b, a, c, "") : t == IC_BOOL ? LLVMBuildAnd(b, a, c, "") : LLVMBuildMul(b, a, c, "");
    case IC_L_DIV:
        if (f)
            return LLVMBuildFDiv(b, a, c, "");
        if (t == IC_BOOL)
            return a;
        { /* truncating integer division; a zero divisor gives 0 rather than UB */
            LLVMValueRef zero = LLVMConstNull(LLVMTypeOf(a));
            LLVMValueRef cz = LLVMBuildICmp(b, LLVMIntEQ, c, zero, "");
            LLVMValueRef d = LLVMBuildSelect(b, cz, LLVMConstInt(LLVMTypeOf(a), 1, 0), c, "");
            return LLVMBuildSelect(b, cz, zero, LLVMBuildSDiv(b, a, d, ""), "");
        }
    case IC_L_POW:
        if (t == IC_BOOL)
            return LLVMBuildOr(b, a, LLVMBuildNot(b, c, ""), "");
        return ic__pmath(G, IC_L_POW, t, a, c);
    case IC_L_MAX:
        return f ? fmaxmin(G, t, a, c, true) : imaxmin(G, t, a, c, true);
    case IC_L_MIN:
        return f ? fmaxmin(G, t, a, c, false) : imaxmin(G, t, a, c, false);
    case IC_L_IDIV:
        return idivmod(G, a, c, false);
    case IC_L_MOD:
        return idivmod(G, a, c, true);
    case IC_L_AND:
        return LLVMBuildAnd(b, a, c, "");
    case IC_L_OR:
        return LLVMBuildOr(b, a, c, "");
    case IC_L_CMP: {
        static const LLVMRealPredicate fp[] = { LLVMRealOEQ, LLVMRealUNE, LLVMRealOLT,
                                                LLVMRealOLE, LLVMRealOGT, LLVMRealOGE };
        static const LLVMIntPredicate sp[] = { LLVMIntEQ, LLVMIntNE, LLVMIntSLT,
                                               LLVMIntSLE, LLVMIntSGT, LLVMIntSGE };
        static const LLVMIntPredicate up[] = { LLVMIntEQ, LLVMIntNE, LLVMIntULT,
                                               LLVMIntULE, LLVMIntUGT, LLVMIntUGE };
        if (isf(ot))
            return LLVMBuildFCmp(b, fp[in->cmp], a, c, "");
        return LLVMBuildICmp(b, ot == IC_BOOL ? up[in->cmp] : sp[in->cmp], a, c, "");
    }
    default:
        return NULL;
    }
}

static LLVMValueRef unop(ic__pg *G, const ic_linstr *in, LLVMValueRef x, ic_dtype ot)
{
    LLVMBuilderRef b = G->b;
    ic_dtype t = in->type;
    LLVMTypeRef ty = ic__pg_type(G, t);
    bool f = isf(t);
    switch (in->op) {
    case IC_L_NEG:
        return f ? LLVMBuildFNeg(b, x, "") : t == IC_BOOL ? x : LLVMBuildNeg(b, x, "");
    case IC_L_ABS:
        if (f)
            return ic__pg_call(G, "llvm.fabs", &ty, 1, &x, 1);
        if (t == IC_BOOL)
            return x;
        return LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, x, LLVMConstNull(ty), ""),
                               LLVMBuildNeg(b, x, ""), x, "");
    case IC_L_SQRT:
        return f ? ic__pg_call(G, "llvm.sqrt", &ty, 1, &x, 1) : x;
    case IC_L_RECIP:
        return f ? LLVMBuildFDiv(b, LLVMConstReal(ty, 1.0), x, "") : x;
    case IC_L_FLOOR:
        return f ? ic__pg_call(G, "llvm.floor", &ty, 1, &x, 1) : x;
    case IC_L_CEIL:
        return f ? ic__pg_call(G, "llvm.ceil", &ty, 1, &x, 1) : x;
    case IC_L_ROUND: /* cvt.rni */
        return f ? ic__pg_call(G, "llvm.roundeven", &ty, 1, &x, 1) : x;
    case IC_L_NOT:
        return t == IC_BOOL ? LLVMBuildNot(b, x, "")
                            : LLVMBuildZExt(b, LLVMBuildICmp(b, LLVMIntEQ, x, LLVMConstNull(ty), ""), ty, "");
    case IC_L_CAST:
        return ic__pg_convert(G, x, ot, t);
    default: /* exp log rsqrt sin cos tanh sigmoid erf */
        if (!f)
            return ic__pg_convert(G, ic__pmath(G, in->op, IC_F64, ic__pg_convert(G, x, t, IC_F64), NULL),
                                  IC_F64, t);
        if (in->flags & IC_LF_EXP_LE0)
            return ic__pmath_exp_le0(G, t, x);
        return ic__pmath(G, in->op, t, x, NULL);
    }
}

/* ---- reductions ---- */

LLVMValueRef ic__pg_red_init(ic__pg *G, ic_red red, ic_dtype t)
{
    LLVMTypeRef ty = ic__pg_type(G, t);
    switch (red) {
    case IC_RED_SUM:
        return LLVMConstNull(ty);
    case IC_RED_PROD:
        return isf(t) ? LLVMConstReal(ty, 1.0) : LLVMConstInt(ty, 1, 0);
    case IC_RED_MAX:
    case IC_RED_ARGMAX:
        if (isf(t))
            return LLVMConstReal(ty, -INFINITY);
        if (t == IC_BOOL)
            return LLVMConstInt(ty, 0, 0);
        return LLVMConstInt(ty, t == IC_I32 ? (unsigned long long)(int64_t)INT32_MIN
                                            : (unsigned long long)INT64_MIN, 1);
    case IC_RED_MIN:
        if (isf(t))
            return LLVMConstReal(ty, INFINITY);
        if (t == IC_BOOL)
            return LLVMConstInt(ty, 1, 0);
        return LLVMConstInt(ty, t == IC_I32 ? (unsigned long long)INT32_MAX
                                            : (unsigned long long)INT64_MAX, 1);
    }
    return LLVMConstNull(ty);
}

LLVMValueRef ic__pg_red_op(ic__pg *G, ic_red red, ic_dtype t, LLVMValueRef a, LLVMValueRef c)
{
    LLVMBuilderRef b = G->b;
    bool f = isf(t);
    switch (red) {
    case IC_RED_SUM:
        return f ? LLVMBuildFAdd(b, a, c, "") : t == IC_BOOL ? LLVMBuildOr(b, a, c, "") : LLVMBuildAdd(b, a, c, "");
    case IC_RED_PROD:
        return f ? LLVMBuildFMul(b, a, c, "") : t == IC_BOOL ? LLVMBuildAnd(b, a, c, "") : LLVMBuildMul(b, a, c, "");
    case IC_RED_MAX:
        return f ? fmaxmin(G, t, a, c, true) : imaxmin(G, t, a, c, true);
    case IC_RED_MIN:
        return f ? fmaxmin(G, t, a, c, false) : imaxmin(G, t, a, c, false);
    default:
        return a;
    }
}

/* True when candidate (vb, ib) replaces (va, ia) for argmax: the first index of the max, NaN
 * counting as the max; an index < 0 marks an empty partial. */
LLVMValueRef ic__pg_argmax_pick(ic__pg *G, ic_dtype t, LLVMValueRef va, LLVMValueRef ia,
                                LLVMValueRef vb, LLVMValueRef ib)
{
    LLVMBuilderRef b = G->b;
    LLVMValueRef zero = LLVMConstNull(G->t_i64);
    LLVMValueRef better, same;
    if (isf(t)) {
        LLVMValueRef na = LLVMBuildFCmp(b, LLVMRealUNO, va, va, "");
        LLVMValueRef nb = LLVMBuildFCmp(b, LLVMRealUNO, vb, vb, "");
        better = LLVMBuildOr(b, LLVMBuildAnd(b, nb, LLVMBuildNot(b, na, ""), ""),
                             LLVMBuildFCmp(b, LLVMRealOGT, vb, va, ""), "");
        same = LLVMBuildOr(b, LLVMBuildFCmp(b, LLVMRealOEQ, va, vb, ""), LLVMBuildAnd(b, na, nb, ""), "");
    } else {
        better = LLVMBuildICmp(b, t == IC_BOOL ? LLVMIntUGT : LLVMIntSGT, vb, va, "");
        same = LLVMBuildICmp(b, LLVMIntEQ, va, vb, "");
    }
    LLVMValueRef earlier = LLVMBuildAnd(b, same, LLVMBuildICmp(b, LLVMIntSLT, ib, ia, ""), "");
    LLVMValueRef ok = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSGE, ib, zero, ""),
                                   LLVMBuildOr(b, better, earlier, ""), "");
    return LLVMBuildOr(b, LLVMBuildICmp(b, LLVMIntSLT, ia, zero, ""), ok, "");
}

/* ---- memory ---- */

static LLVMValueRef lane(const ic__lv *v, int l) { return v->uni ? v->v[0] : v->v[l]; }

static LLVMValueRef addr(ic__pg *G, int buf, LLVMTypeRef mt, LLVMValueRef off)
{
    if (LLVMTypeOf(off) != G->t_i64)
        off = LLVMBuildSExt(G->b, off, G->t_i64, "");
    return LLVMBuildGEP2(G->b, mt, G->bufptr[buf], &off, 1, "");
}

static LLVMValueRef load1(ic__pg *G, int buf, LLVMValueRef off, ic_dtype to)
{
    ic_dtype bt = G->bufs[buf].dtype;
    LLVMTypeRef mt = ic__pg_mem_type(G, bt);
    LLVMValueRef x = LLVMBuildLoad2(G->b, mt, addr(G, buf, mt, off), "");
    LLVMSetAlignment(x, (unsigned)ic_dtype_size(bt));
    if (bt == IC_BOOL)
        x = LLVMBuildICmp(G->b, LLVMIntNE, x, LLVMConstNull(G->t_i8), "");
    return ic__pg_convert(G, x, bt, to);
}

/* Lanes 0..nl-1 from consecutive elements starting at off: 16-byte pieces. */
static void loadv(ic__pg *G, int buf, LLVMValueRef off, int nl, ic_dtype to, ic__lv *out)
{
    ic_dtype bt = G->bufs[buf].dtype;
    LLVMTypeRef mt = ic__pg_mem_type(G, bt);
    int sz = (int)ic_dtype_size(bt);
    int per = 16 / sz < nl ? 16 / sz : nl;
    for (int l0 = 0; l0 < nl; l0 += per) {
        LLVMValueRef o = l0 ? LLVMBuildAdd(G->b, off, LLVMConstInt(LLVMTypeOf(off), (unsigned)l0, 0), "") : off;
        LLVMTypeRef vt = LLVMVectorType(mt, (unsigned)per);
        LLVMValueRef p = addr(G, buf, mt, o);
        /* bf16 as 32-bit words: lane 2w is the low half, 2w + 1 the high one, so widening
         * to f32 becomes `w << 16` and `w & 0xffff0000` (one instruction each) instead of
         * a 16-bit extract, a zero-extension and a shift (ptxas: 1.75 an element) */
        bool words = bt == IC_BF16 && per % 2 == 0;
        if (words)
            vt = LLVMVectorType(G->t_i32, (unsigned)per / 2);
        LLVMValueRef v = LLVMBuildLoad2(G->b, vt, p, "");
        LLVMSetAlignment(v, (unsigned)(per * sz));
        for (int l = 0; l < per; l++) {
            LLVMValueRef x;
            if (words) {
                x = LLVMBuildExtractElement(G->b, v, ic__pg_i32(G, l / 2), "");
                if (l % 2)
                    x = LLVMBuildLShr(G->b, x, ic__pg_i32(G, 16), "");
                x = LLVMBuildTrunc(G->b, x, G->t_i16, "");
            } else {
                x = LLVMBuildExtractElement(G->b, v, ic__pg_i32(G, l), "");
            }
            if (bt == IC_BOOL)
                x = LLVMBuildICmp(G->b, LLVMIntNE, x, LLVMConstNull(G->t_i8), "");
            out->v[l0 + l] = ic__pg_convert(G, x, bt, to);
        }
    }
    out->uni = false;
}

static LLVMValueRef to_mem(ic__pg *G, LLVMValueRef x, ic_dtype from, ic_dtype bt)
{
    x = ic__pg_convert(G, x, from, bt);
    return bt == IC_BOOL ? LLVMBuildZExt(G->b, x, G->t_i8, "") : x;
}

static void store1(ic__pg *G, int buf, LLVMValueRef off, LLVMValueRef x, ic_dtype from)
{
    ic_dtype bt = G->bufs[buf].dtype;
    LLVMTypeRef mt = ic__pg_mem_type(G, bt);
    LLVMValueRef st = LLVMBuildStore(G->b, to_mem(G, x, from, bt), addr(G, buf, mt, off));
    LLVMSetAlignment(st, (unsigned)ic_dtype_size(bt));
}

static void storev(ic__pg *G, int buf, LLVMValueRef off, const ic__lv *val, int nl, ic_dtype from)
{
    ic_dtype bt = G->bufs[buf].dtype;
    LLVMTypeRef mt = ic__pg_mem_type(G, bt);
    int sz = (int)ic_dtype_size(bt);
    int per = 16 / sz < nl ? 16 / sz : nl;
    for (int l0 = 0; l0 < nl; l0 += per) {
        LLVMTypeRef vt = LLVMVectorType(mt, (unsigned)per);
        LLVMValueRef v = LLVMGetUndef(vt);
        for (int l = 0; l < per; l++)
            v = LLVMBuildInsertElement(G->b, v, to_mem(G, lane(val, l0 + l), from, bt),
                                       ic__pg_i32(G, l), "");
        LLVMValueRef o = l0 ? LLVMBuildAdd(G->b, off, LLVMConstInt(LLVMTypeOf(off), (unsigned)l0, 0), "") : off;
        LLVMValueRef st = LLVMBuildStore(G->b, v, addr(G, buf, mt, o));
        LLVMSetAlignment(st, (unsigned)(per * sz));
    }
}

static LLVMValueRef and_cond(ic__pg *G, LLVMValueRef a, LLVMValueRef c)
{
    if (!a)
        return c;
    if (!c)
        return a;
    return LLVMBuildAnd(G->b, a, c, "");
}

static void emit_load(ic__pg *G, int s, int i)
{
    const ic_linstr *in = &G->k->stages[s].instr[i];
    const ic__lv *off = &G->vals[in->a];
    ic__lv *out = &G->vals[i];
    if (off->uni || G->nl == 1) {
        out->v[0] = load1(G, in->buf, off->v[0], in->type);
        out->uni = true;
        return;
    }
    if (G->vec && ic__pplan_vec_ok(G->pl, &G->pl->info[s][in->a], G->nl)) {
        loadv(G, in->buf, off->v[0], G->nl, in->type, out);
        return;
    }
    for (int l = 0; l < G->nl; l++)
        out->v[l] = load1(G, in->buf, off->v[l], in->type);
    out->uni = false;
}

static void emit_store(ic__pg *G, int s, int i)
{
    const ic_linstr *in = &G->k->stages[s].instr[i];
    const ic__lv *off = &G->vals[in->a], *val = &G->vals[in->b];
    ic_dtype from = G->k->stages[s].instr[in->b].type;
    LLVMBasicBlockRef cont = ic__pg_if(G, and_cond(G, G->pvalid, G->valid), "st");
    if (off->uni || G->nl == 1) {
        int n = val->uni ? 1 : G->nl; /* same place: the last lane wins, as in a serial loop */
        for (int l = 0; l < n; l++)
            store1(G, in->buf, off->v[0], lane(val, val->uni ? 0 : l), from);
    } else if (G->vec && ic__pplan_vec_ok(G->pl, &G->pl->info[s][in->a], G->nl)) {
        storev(G, in->buf, off->v[0], val, G->nl, from);
    } else {
        for (int l = 0; l < G->nl; l++)
            store1(G, in->buf, off->v[l], lane(val, l), from);
    }
    ic__pg_endif(G, cont);
}

/* Accumulates the lanes of a REDUCE into its allocas, masked by G->valid. */
static void emit_reduce(ic__pg *G, int s, int i)
{
    const ic_linstr *in = &G->k->stages[s].instr[i];
    const ic__lv *val = &G->vals[in->a];
    ic_dtype vt = G->k->stages[s].instr[in->a].type;
    LLVMBuilderRef b = G->b;
    for (int l = 0; l < G->nl; l++) {
        LLVMValueRef pv = G->acc[s][i * IC__PTX_MAXV + l];
        LLVMTypeRef ty = ic__pg_type(G, vt);
        LLVMValueRef old = LLVMBuildLoad2(b, ty, pv, "");
        LLVMValueRef x = lane(val, l);
        if (in->red == IC_RED_ARGMAX) {
            LLVMValueRef pi = G->acci[s][i * IC__PTX_MAXV + l];
            LLVMValueRef oldi = LLVMBuildLoad2(b, G->t_i64, pi, "");
            LLVMValueRef idx = ic__pg_convert(G, lane(&G->vals[in->b], l),
                                              G->k->stages[s].instr[in->b].type, IC_I64);
            LLVMValueRef take = ic__pg_argmax_pick(G, vt, old, oldi, x, idx);
            if (G->valid)
                take = LLVMBuildAnd(b, take, G->valid, "");
            LLVMBuildStore(b, LLVMBuildSelect(b, take, x, old, ""), pv);
            LLVMBuildStore(b, LLVMBuildSelect(b, take, idx, oldi, ""), pi);
            continue;
        }
        LLVMValueRef nv = ic__pg_red_op(G, in->red, vt, old, x);
        if (G->valid)
            nv = LLVMBuildSelect(b, G->valid, nv, old, "");
        LLVMBuildStore(b, nv, pv);
    }
}

/* cast f32 (cast bf16 (x f32)): an f32 intermediate rounded to its bf16 dtype (x + b, then
 * gelu). One cvt.rn.bf16x2.f32 of (x, 0) puts bf16(x) over a zero low half, which is the
 * widened value itself: one instruction where a conversion and a shift were two. The same
 * rounding (to nearest even, NaN to 0x7fff) as the two-step form. */
static bool bf16_round_trip(ic__pg *G, const ic_stage *st, const ic_linstr *in, ic__lv *out)
{
    const ic_linstr *mid = &st->instr[in->a];
    if (G->emu || G->sm < 80 || in->type != IC_F32 || mid->op != IC_L_CAST || mid->type != IC_BF16 ||
        st->instr[mid->a].type != IC_F32)
        return false;
    const ic__lv *X = &G->vals[mid->a];
    int nl = X->uni ? 1 : G->nl;
    for (int l = 0; l < nl; l++) {
        LLVMValueRef a[2] = { lane(X, l), LLVMConstReal(G->t_f32, 0.0) };
        LLVMValueRef w = ic__pg_call(G, "llvm.nvvm.ff2bf16x2.rn", NULL, 0, a, 2);
        out->v[l] = LLVMBuildBitCast(G->b, w, G->t_f32, "");
    }
    out->uni = X->uni;
    return true;
}

void ic__pg_instr(ic__pg *G, int s, int i)
{
    const ic_linstr *in = &G->k->stages[s].instr[i];
    const ic_stage *st = &G->k->stages[s];
    ic__lv *out = &G->vals[i];
    memset(out, 0, sizeof *out);
    out->uni = true;
    switch (in->op) {
    case IC_L_VAR: {
        LLVMValueRef v = G->var[in->a];
        bool lanes = in->a == G->pl->lanevar && G->nl > 1;
        int n = lanes ? G->nl : 1;
        for (int l = 0; l < n; l++) {
            LLVMValueRef x = l ? LLVMBuildAdd(G->b, v, ic__pg_i64(G, l), "") : v;
            out->v[l] = in->type == IC_I64 ? x : LLVMBuildTrunc(G->b, x, ic__pg_type(G, in->type), "");
        }
        out->uni = !lanes;
        return;
    }
    case IC_L_CONST:
        out->v[0] = ic__pg_const(G, in->type, in->imm);
        return;
    case IC_L_LOAD:
        emit_load(G, s, i);
        return;
    case IC_L_STORE:
        emit_store(G, s, i);
        return;
    case IC_L_ACC:
        *out = G->accres[in->a][in->b];
        return;
    case IC_L_REDUCE:
        emit_reduce(G, s, i);
        return;
    default:
        break;
    }
    int n = ic_linstr_arity(in);
    const ic__lv *A = &G->vals[in->a];
    const ic__lv *B = n > 1 ? &G->vals[in->b] : NULL;
    const ic__lv *C = n > 2 ? &G->vals[in->c] : NULL;
    bool uni = A->uni && (!B || B->uni) && (!C || C->uni);
    int nl = uni ? 1 : G->nl;
    ic_dtype ot = st->instr[in->a].type;
    if (in->op == IC_L_CAST && bf16_round_trip(G, st, in, out))
        return;
    LLVMValueRef rcp = NULL;
    if (in->op == IC_L_DIV && isf(in->type) && !A->uni && B->uni) {
        /* one division per thread for a divisor shared by the lanes (softmax's row sum):
         * a * (1/b) is within 1.5 ulp of a / b */
        rcp = LLVMBuildFDiv(G->b, LLVMConstReal(ic__pg_type(G, in->type), 1.0), B->v[0], "");
    }
    for (int l = 0; l < nl; l++) {
        LLVMValueRef r;
        if (rcp)
            r = LLVMBuildFMul(G->b, lane(A, l), rcp, "");
        else if (in->op == IC_L_SELECT)
            r = LLVMBuildSelect(G->b, lane(A, l), lane(B, l), lane(C, l), "");
        else if (n == 2)
            r = binop(G, in, lane(A, l), lane(B, l), ot);
        else
            r = unop(G, in, lane(A, l), ot);
        out->v[l] = r;
    }
    out->uni = uni;
}
