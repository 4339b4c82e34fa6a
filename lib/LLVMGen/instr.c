/* instr.c - loop IR instructions -> LLVM IR: types, constants, casts (f16/bf16 included),
 * arithmetic with PyTorch's NaN and integer semantics, loads, stores and reductions. */
#include <math.h>
#include <string.h>
#include "llvmgen-impl.h"
#include "math-impl.h"

LLVMTypeRef ic__gen_type(ic__cg *g, ic_dtype t)
{
    switch (t) {
    case IC_F32: return g->t_f32;
    case IC_F64: return g->t_f64;
    case IC_F16: return g->t_f16;
    case IC_BF16: return g->t_i16; /* bits; converted with integer ops (no libcalls) */
    case IC_I32: return g->t_i32;
    case IC_I64: return g->t_i64;
    case IC_U8: case IC_I8: return g->t_i8; /* in memory only: loads widen, stores truncate */
    case IC_I16: return g->t_i16;
    default: return g->t_i1;
    }
}

LLVMTypeRef ic__gen_mem_type(ic__cg *g, ic_dtype t)
{
    return t == IC_BOOL ? g->t_i8 : ic__gen_type(g, t);
}

LLVMValueRef ic__gen_i64(ic__cg *g, int64_t v)
{
    return LLVMConstInt(g->t_i64, (unsigned long long)v, 1);
}

LLVMValueRef ic__gen_f32(ic__cg *g, double v)
{
    return LLVMConstReal(g->t_f32, v);
}

static bool is_fp(ic_dtype t) { return t == IC_F32 || t == IC_F64; }
static bool is_int(ic_dtype t) { return ic_dtype_is_int(t); }

LLVMValueRef ic__gen_const(ic__cg *g, ic_dtype t, ic_scalar s)
{
    double f = s.is_int ? (double)s.i : s.f;
    int64_t i = s.is_int ? s.i : (isnan(s.f) ? 0 : (int64_t)s.f);
    switch (t) {
    case IC_F32: case IC_F64: case IC_F16:
        return LLVMConstReal(ic__gen_type(g, t), f);
    case IC_BF16:
        return LLVMConstInt(g->t_i16, ic_f32_to_bf16((float)f), 0);
    case IC_I32: case IC_I64:
        return LLVMConstInt(ic__gen_type(g, t), (unsigned long long)i, 1);
    default:
        return LLVMConstInt(g->t_i1, s.is_int ? s.i != 0 : s.f != 0, 0);
    }
}

LLVMValueRef ic__gen_intrinsic(ic__cg *g, const char *name, LLVMTypeRef *over, int nover,
                               LLVMValueRef *args, int nargs)
{
    return ic__llvm_intrinsic(g->mod, g->b, name, over, nover, args, nargs);
}

static LLVMValueRef intr1(ic__cg *g, const char *name, LLVMValueRef x)
{
    LLVMTypeRef t = LLVMTypeOf(x);
    return ic__gen_intrinsic(g, name, &t, 1, &x, 1);
}

static LLVMValueRef intr2(ic__cg *g, const char *name, LLVMValueRef x, LLVMValueRef y)
{
    LLVMTypeRef t = LLVMTypeOf(x);
    LLVMValueRef a[2] = { x, y };
    return ic__gen_intrinsic(g, name, &t, 1, a, 2);
}

LLVMValueRef ic__gen_reduce_init(ic__cg *g, ic_red red, ic_dtype t)
{
    LLVMTypeRef ty = ic__gen_type(g, t);
    bool fp = is_fp(t);
    switch (red) {
    case IC_RED_SUM:
        return fp ? LLVMConstReal(ty, 0.0) : LLVMConstInt(ty, 0, 0);
    case IC_RED_PROD:
        return fp ? LLVMConstReal(ty, 1.0) : LLVMConstInt(ty, 1, 0);
    case IC_RED_MAX:
    case IC_RED_ARGMAX:
        if (fp)
            return LLVMConstReal(ty, -INFINITY);
        return t == IC_BOOL ? LLVMConstInt(ty, 0, 0)
               : LLVMConstInt(ty, t == IC_I32 ? (unsigned long long)(int64_t)INT32_MIN
                                               : (unsigned long long)INT64_MIN, 1);
    case IC_RED_MIN:
        if (fp)
            return LLVMConstReal(ty, INFINITY);
        return t == IC_BOOL ? LLVMConstInt(ty, 1, 0)
               : LLVMConstInt(ty, t == IC_I32 ? (unsigned long long)INT32_MAX
                                               : (unsigned long long)INT64_MAX, 1);
    }
    return LLVMConstNull(ty);
}

/* ---- casts ---- */

/* bf16 bits -> f32: the bits are the top half of an f32. */
static LLVMValueRef bf16_to_f32(ic__cg *g, LLVMValueRef v)
{
    LLVMValueRef w = LLVMBuildZExt(g->b, v, g->t_i32, "");
    w = LLVMBuildShl(g->b, w, LLVMConstInt(g->t_i32, 16, 0), "");
    return LLVMBuildBitCast(g->b, w, g->t_f32, "");
}

/* f32 -> bf16 bits, round to nearest even; NaN stays (quiet) NaN. Integer ops only, so no
 * libcall (__truncsfbf2 is not in every libgcc) and it vectorises. */
static LLVMValueRef f32_to_bf16(ic__cg *g, LLVMValueRef f)
{
    LLVMBuilderRef b = g->b;
    LLVMValueRef bits = LLVMBuildBitCast(b, f, g->t_i32, "");
    LLVMValueRef c16 = LLVMConstInt(g->t_i32, 16, 0);
    LLVMValueRef lsb = LLVMBuildAnd(b, LLVMBuildLShr(b, bits, c16, ""), LLVMConstInt(g->t_i32, 1, 0), "");
    LLVMValueRef bias = LLVMBuildAdd(b, lsb, LLVMConstInt(g->t_i32, 0x7fff, 0), "");
    LLVMValueRef rne = LLVMBuildLShr(b, LLVMBuildAdd(b, bits, bias, ""), c16, "");
    LLVMValueRef qnan = LLVMBuildOr(b, LLVMBuildLShr(b, bits, c16, ""), LLVMConstInt(g->t_i32, 0x40, 0), "");
    LLVMValueRef isnan = LLVMBuildFCmp(b, LLVMRealUNO, f, f, "");
    LLVMValueRef r = LLVMBuildSelect(b, isnan, qnan, rne, "");
    return LLVMBuildTrunc(b, r, g->t_i16, "");
}

/* Any value -> f32 (or f64 when `to` is F64). */
static LLVMValueRef to_float(ic__cg *g, LLVMValueRef v, ic_dtype from, ic_dtype to)
{
    LLVMTypeRef ft = to == IC_F64 ? g->t_f64 : g->t_f32;
    switch (from) {
    case IC_F32: return to == IC_F64 ? LLVMBuildFPExt(g->b, v, ft, "") : v;
    case IC_F64: return to == IC_F64 ? v : LLVMBuildFPTrunc(g->b, v, ft, "");
    case IC_F16: return LLVMBuildFPExt(g->b, v, ft, "");
    case IC_BF16: {
        LLVMValueRef f = bf16_to_f32(g, v);
        return to == IC_F64 ? LLVMBuildFPExt(g->b, f, ft, "") : f;
    }
    case IC_BOOL: case IC_U8: return LLVMBuildUIToFP(g->b, v, ft, "");
    default: return LLVMBuildSIToFP(g->b, v, ft, "");
    }
}

static LLVMValueRef build_cast(ic__cg *g, LLVMValueRef v, ic_dtype from, ic_dtype to)
{
    LLVMBuilderRef b = g->b;
    LLVMTypeRef ty = ic__gen_type(g, to);
    if (from == to)
        return v;
    if (to == IC_BOOL) {
        if (from == IC_F16 || from == IC_BF16)
            v = to_float(g, v, from, IC_F32), from = IC_F32;
        if (is_fp(from)) /* NaN is true, as bool(nan) */
            return LLVMBuildFCmp(b, LLVMRealUNE, v, LLVMConstReal(LLVMTypeOf(v), 0.0), "");
        return LLVMBuildICmp(b, LLVMIntNE, v, LLVMConstInt(LLVMTypeOf(v), 0, 0), "");
    }
    switch (to) {
    case IC_F32: case IC_F64:
        return to_float(g, v, from, to);
    case IC_F16:
        /* via f32 (as c10::Half(float)); LLVM's fptrunc rounds to nearest even */
        return LLVMBuildFPTrunc(b, to_float(g, v, from, IC_F32), g->t_f16, "");
    case IC_BF16:
        return f32_to_bf16(g, to_float(g, v, from, IC_F32));
    default: /* integers */
        if (from == IC_BOOL)
            return LLVMBuildZExt(b, v, ty, "");
        if (is_int(from)) /* widening u8 zero-extends; narrowing truncates (wraps) */
            return LLVMBuildIntCast2(b, v, ty, from != IC_U8, "");
        if (from == IC_F16 || from == IC_BF16)
            v = to_float(g, v, from, IC_F32);
        {   /* saturating: NaN -> 0, out of range clamps (no poison) */
            LLVMTypeRef ov[2] = { ty, LLVMTypeOf(v) };
            return ic__gen_intrinsic(g, "llvm.fptosi.sat", ov, 2, &v, 1);
        }
    }
}

/* ---- integer division without traps ---- */

/* Floor division (want_mod = false) or its remainder, Python style; b == 0 gives 0 and
 * INT_MIN / -1 wraps, instead of a SIGFPE. */
static LLVMValueRef int_divmod(ic__cg *g, LLVMValueRef a, LLVMValueRef bb, bool floor_,
                               bool want_mod)
{
    LLVMBuilderRef b = g->b;
    LLVMTypeRef ty = LLVMTypeOf(a);
    LLVMValueRef zero = LLVMConstInt(ty, 0, 0), one = LLVMConstInt(ty, 1, 0);
    LLVMValueRef m1 = LLVMConstAllOnes(ty);
    LLVMValueRef bz = LLVMBuildICmp(b, LLVMIntEQ, bb, zero, "");
    LLVMValueRef bm1 = LLVMBuildICmp(b, LLVMIntEQ, bb, m1, "");
    LLVMValueRef safe = LLVMBuildSelect(b, LLVMBuildOr(b, bz, bm1, ""), one, bb, "");
    LLVMValueRef q = LLVMBuildSDiv(b, a, safe, "");
    LLVMValueRef r = LLVMBuildSRem(b, a, safe, "");
    if (floor_) {
        LLVMValueRef nz = LLVMBuildICmp(b, LLVMIntNE, r, zero, "");
        LLVMValueRef sg = LLVMBuildICmp(b, LLVMIntSLT, LLVMBuildXor(b, r, safe, ""), zero, "");
        LLVMValueRef adj = LLVMBuildAnd(b, nz, sg, "");
        q = LLVMBuildSelect(b, adj, LLVMBuildSub(b, q, one, ""), q, "");
        r = LLVMBuildSelect(b, adj, LLVMBuildAdd(b, r, safe, ""), r, "");
    }
    LLVMValueRef res = want_mod ? r : q;
    LLVMValueRef neg = want_mod ? zero : LLVMBuildSub(b, zero, a, "");
    res = LLVMBuildSelect(b, bm1, neg, res, "");
    return LLVMBuildSelect(b, bz, zero, res, "");
}

/* Integer power by squaring, as an internal function (a loop; not vectorised). */
static LLVMValueRef int_pow(ic__cg *g, LLVMValueRef x, LLVMValueRef y)
{
    return ic__math_call(g->b, ic__math_ipow_fn(g->mod, LLVMTypeOf(x)), x, y);
}

/* ---- accumulators ---- */

LLVMValueRef ic__gen_acc_ptr(ic__cg *g, LLVMValueRef slot, LLVMTypeRef ty)
{
    if (g->mode != IC_KMODE_COLUMN)
        return slot;
    return LLVMBuildInBoundsGEP2(g->b, ty, slot, &g->lane, 1, "");
}

static void set_reassoc(LLVMValueRef v)
{
    if (LLVMIsAInstruction(v) && LLVMCanValueUseFastMathFlags(v))
        LLVMSetFastMathFlags(v, LLVMFastMathAllowReassoc);
}

/* cur (+) v for reduction red (not ARGMAX) over values of type vt. */
LLVMValueRef ic__gen_fold(ic__cg *g, ic_red red, ic_dtype vt, LLVMValueRef cur, LLVMValueRef v)
{
    LLVMBuilderRef b = g->b;
    bool fp = is_fp(vt), bl = vt == IC_BOOL;
    LLVMValueRef r;
    switch (red) {
    case IC_RED_SUM:
        r = fp ? LLVMBuildFAdd(b, cur, v, "") : bl ? LLVMBuildOr(b, cur, v, "") : LLVMBuildAdd(b, cur, v, "");
        break;
    case IC_RED_PROD:
        r = fp ? LLVMBuildFMul(b, cur, v, "") : bl ? LLVMBuildAnd(b, cur, v, "") : LLVMBuildMul(b, cur, v, "");
        break;
    case IC_RED_MAX:
        r = fp ? intr2(g, "llvm.maximum", cur, v) : bl ? LLVMBuildOr(b, cur, v, "") : intr2(g, "llvm.smax", cur, v);
        break;
    default:
        r = fp ? intr2(g, "llvm.minimum", cur, v) : bl ? LLVMBuildAnd(b, cur, v, "") : intr2(g, "llvm.smin", cur, v);
        break;
    }
    if (fp) /* vector accumulators need reassociation */
        set_reassoc(r);
    /* A max/min reduction does not order -0 and +0 (either is the max of {-0, +0}, and they
     * compare equal): x86 then needs no operand swap by sign, only the NaN fixup (3 vector
     * ops instead of 6 per element). */
    if (fp && (red == IC_RED_MAX || red == IC_RED_MIN) && LLVMIsAInstruction(r))
        LLVMSetFastMathFlags(r, LLVMFastMathAllowReassoc | LLVMFastMathNoSignedZeros);
    return r;
}

/* Folds value v (index idx for ARGMAX) into the accumulator at pv (pi) with reduction red;
 * vt is v's type. Returns the new accumulator (the index for ARGMAX). Shared by the
 * accumulating loops and the combine of per-thread partials. */
LLVMValueRef ic__gen_combine(ic__cg *g, ic_red red, ic_dtype vt, LLVMValueRef pv, LLVMValueRef pi,
                             LLVMValueRef v, LLVMValueRef idx)
{
    LLVMBuilderRef b = g->b;
    LLVMTypeRef ty = ic__gen_type(g, vt);
    LLVMValueRef cur = LLVMBuildLoad2(b, ty, pv, "");
    bool fp = is_fp(vt), bl = vt == IC_BOOL;
    if (red == IC_RED_ARGMAX) {
        LLVMValueRef ci = LLVMBuildLoad2(b, g->t_i64, pi, "");
        /* first index of the max; the first NaN wins and stays */
        LLVMValueRef upd = LLVMBuildICmp(b, LLVMIntSLT, ci, ic__gen_i64(g, 0), "");
        if (fp) {
            LLVMValueRef gt = LLVMBuildFCmp(b, LLVMRealOGT, v, cur, "");
            LLVMValueRef vn = LLVMBuildFCmp(b, LLVMRealUNO, v, v, "");
            LLVMValueRef cn = LLVMBuildFCmp(b, LLVMRealORD, cur, cur, "");
            upd = LLVMBuildOr(b, upd, LLVMBuildOr(b, gt, LLVMBuildAnd(b, vn, cn, ""), ""), "");
        } else {
            LLVMIntPredicate p = bl ? LLVMIntUGT : LLVMIntSGT;
            upd = LLVMBuildOr(b, upd, LLVMBuildICmp(b, p, v, cur, ""), "");
        }
        LLVMBuildStore(b, LLVMBuildSelect(b, upd, v, cur, ""), pv);
        LLVMValueRef ni = LLVMBuildSelect(b, upd, idx, ci, "");
        LLVMBuildStore(b, ni, pi);
        return ni;
    }
    LLVMValueRef r = ic__gen_fold(g, red, vt, cur, v);
    LLVMBuildStore(b, r, pv);
    return r;
}

/* The running max for IC_LF_NAN_FREE: a NaN operand may be dropped (x86: one MAXPS instead
 * of three instructions). The flags let the loop vectorizer keep vector accumulators; a NaN
 * operand is then poison, which only reaches values that are NaN anyway, and nothing
 * branches on them. */
static LLVMValueRef nan_free_max(ic__cg *g, ic_dtype vt, LLVMValueRef pv, LLVMValueRef v)
{
    LLVMValueRef cur = LLVMBuildLoad2(g->b, ic__gen_type(g, vt), pv, "");
    LLVMValueRef c = LLVMBuildFCmp(g->b, LLVMRealOGT, v, cur, "");
    LLVMValueRef r = LLVMBuildSelect(g->b, c, v, cur, "");
    LLVMSetFastMathFlags(c, LLVMFastMathNoNaNs | LLVMFastMathNoSignedZeros);
    LLVMSetFastMathFlags(r, LLVMFastMathNoNaNs | LLVMFastMathNoSignedZeros);
    LLVMBuildStore(g->b, r, pv);
    return r;
}

static LLVMValueRef emit_reduce(ic__cg *g, int s, int i)
{
    const ic_linstr *in = &g->k->stages[s].instr[i];
    const ic_linstr *vin = &g->k->stages[s].instr[in->a];
    if (g->deferred) {
        g->deferred[i] = g->vals[in->a];
        return NULL;
    }
    ic_dtype vt = in->red == IC_RED_ARGMAX ? vin->type : in->type;
    LLVMValueRef pv = ic__gen_acc_ptr(g, g->acc[s][i], ic__gen_type(g, vt));
    if ((in->flags & IC_LF_NAN_FREE) && in->red == IC_RED_MAX && is_fp(vt))
        return nan_free_max(g, vt, pv, g->vals[in->a]);
    LLVMValueRef pi = NULL, idx = NULL;
    if (in->red == IC_RED_ARGMAX) {
        pi = ic__gen_acc_ptr(g, g->acc_idx[s][i], g->t_i64);
        idx = build_cast(g, g->vals[in->b], g->k->stages[s].instr[in->b].type, IC_I64);
    }
    LLVMValueRef r = ic__gen_combine(g, in->red, vt, pv, pi, g->vals[in->a], idx);
    return in->red == IC_RED_ARGMAX ? build_cast(g, r, IC_I64, in->type) : r;
}

static LLVMValueRef emit_acc(ic__cg *g, const ic_linstr *in)
{
    const ic_linstr *red = &g->k->stages[in->a].instr[in->b];
    if (red->red == IC_RED_ARGMAX) {
        LLVMValueRef p = ic__gen_acc_ptr(g, g->acc_idx[in->a][in->b], g->t_i64);
        LLVMValueRef idx = LLVMBuildLoad2(g->b, g->t_i64, p, "");
        /* an empty reduction never set the index */
        idx = intr2(g, "llvm.smax", idx, ic__gen_i64(g, 0));
        return build_cast(g, idx, IC_I64, in->type);
    }
    LLVMTypeRef ty = ic__gen_type(g, red->type);
    LLVMValueRef p = ic__gen_acc_ptr(g, g->acc[in->a][in->b], ty);
    return build_cast(g, LLVMBuildLoad2(g->b, ty, p, ""), red->type, in->type);
}

/* ---- loads and stores ---- */

static LLVMValueRef elem_ptr(ic__cg *g, int buf, LLVMValueRef off)
{
    LLVMTypeRef mt = ic__gen_mem_type(g, g->bufs[buf].dtype);
    if (LLVMTypeOf(off) != g->t_i64)
        off = LLVMBuildSExt(g->b, off, g->t_i64, "");
    return LLVMBuildInBoundsGEP2(g->b, mt, g->bufptr[buf], &off, 1, "");
}

static LLVMValueRef emit_load(ic__cg *g, const ic_linstr *in, LLVMValueRef off)
{
    ic_dtype dt = g->bufs[in->buf].dtype;
    LLVMTypeRef mt = ic__gen_mem_type(g, dt);
    LLVMValueRef v = LLVMBuildLoad2(g->b, mt, elem_ptr(g, in->buf, off), "");
    LLVMSetAlignment(v, (unsigned)ic_dtype_size(dt));
    if (dt == IC_BOOL)
        v = LLVMBuildICmp(g->b, LLVMIntNE, v, LLVMConstInt(g->t_i8, 0, 0), "");
    return build_cast(g, v, dt, in->type);
}

static void emit_store(ic__cg *g, const ic_linstr *in, LLVMValueRef off, LLVMValueRef v,
                       ic_dtype vt)
{
    ic_dtype dt = g->bufs[in->buf].dtype;
    v = build_cast(g, v, vt, dt);
    if (dt == IC_BOOL)
        v = LLVMBuildZExt(g->b, v, g->t_i8, "");
    LLVMValueRef st = LLVMBuildStore(g->b, v, elem_ptr(g, in->buf, off));
    LLVMSetAlignment(st, (unsigned)ic_dtype_size(dt));
}

/* ---- arithmetic ---- */

static LLVMValueRef emit_unary(ic__cg *g, ic_lop op, ic_dtype t, LLVMValueRef x, ic_dtype xt)
{
    LLVMBuilderRef b = g->b;
    bool fp = is_fp(t);
    LLVMTypeRef ty = ic__gen_type(g, t);
    switch (op) {
    case IC_L_NEG:
        return fp ? LLVMBuildFNeg(b, x, "") : t == IC_BOOL ? x : LLVMBuildSub(b, LLVMConstNull(ty), x, "");
    case IC_L_ABS:
        if (fp)
            return intr1(g, "llvm.fabs", x);
        if (t == IC_BOOL)
            return x;
        {
            LLVMTypeRef tt = ty;
            LLVMValueRef a[2] = { x, LLVMConstInt(g->t_i1, 0, 0) };
            return ic__gen_intrinsic(g, "llvm.abs", &tt, 1, a, 2);
        }
    case IC_L_SQRT: return intr1(g, "llvm.sqrt", x);
    case IC_L_RSQRT: return LLVMBuildFDiv(b, LLVMConstReal(ty, 1.0), intr1(g, "llvm.sqrt", x), "");
    case IC_L_RECIP: return LLVMBuildFDiv(b, LLVMConstReal(ty, 1.0), x, "");
    case IC_L_FLOOR: return fp ? intr1(g, "llvm.floor", x) : x;
    case IC_L_CEIL: return fp ? intr1(g, "llvm.ceil", x) : x;
    case IC_L_ROUND: return fp ? intr1(g, "llvm.roundeven", x) : x;
    case IC_L_NOT:
        if (xt == IC_BOOL)
            return LLVMBuildXor(b, x, LLVMConstInt(g->t_i1, 1, 0), "");
        return LLVMBuildXor(b, build_cast(g, x, xt, IC_BOOL), LLVMConstInt(g->t_i1, 1, 0), "");
    default: /* exp log sin cos tanh sigmoid erf */
        return ic__gen_math(g, op, t, x, NULL);
    }
}

static LLVMValueRef emit_cmp(ic__cg *g, ic_cmp pred, ic_dtype t, LLVMValueRef x, LLVMValueRef y)
{
    static const LLVMRealPredicate fp[] = { LLVMRealOEQ, LLVMRealUNE, LLVMRealOLT,
                                            LLVMRealOLE, LLVMRealOGT, LLVMRealOGE };
    static const LLVMIntPredicate si[] = { LLVMIntEQ, LLVMIntNE, LLVMIntSLT,
                                           LLVMIntSLE, LLVMIntSGT, LLVMIntSGE };
    static const LLVMIntPredicate ui[] = { LLVMIntEQ, LLVMIntNE, LLVMIntULT,
                                           LLVMIntULE, LLVMIntUGT, LLVMIntUGE };
    if (is_fp(t))
        return LLVMBuildFCmp(g->b, fp[pred], x, y, "");
    return LLVMBuildICmp(g->b, t == IC_BOOL ? ui[pred] : si[pred], x, y, "");
}

/* A graph's a * b + c may become one fma (one rounding instead of two), as in Inductor's
 * C++ (-ffast-math: -ffp-contract=fast) and Triton (enable_fp_fusion) kernels: the scaled
 * and masked attention scores, a bias after a scale, an affine layer_norm. */
static LLVMValueRef contract(LLVMValueRef v)
{
    if (LLVMIsAInstruction(v) && LLVMCanValueUseFastMathFlags(v))
        LLVMSetFastMathFlags(v, LLVMGetFastMathFlags(v) | LLVMFastMathAllowContract);
    return v;
}

static LLVMValueRef emit_binary(ic__cg *g, const ic_linstr *in, LLVMValueRef x, LLVMValueRef y,
                                ic_dtype xt)
{
    LLVMBuilderRef b = g->b;
    ic_dtype t = in->type;
    bool fp = is_fp(t), bl = t == IC_BOOL;
    switch (in->op) {
    case IC_L_ADD: return fp ? contract(LLVMBuildFAdd(b, x, y, "")) : bl ? LLVMBuildOr(b, x, y, "") : LLVMBuildAdd(b, x, y, "");
    case IC_L_SUB: return fp ? contract(LLVMBuildFSub(b, x, y, "")) : bl ? LLVMBuildXor(b, x, y, "") : LLVMBuildSub(b, x, y, "");
    case IC_L_MUL: return fp ? contract(LLVMBuildFMul(b, x, y, "")) : bl ? LLVMBuildAnd(b, x, y, "") : LLVMBuildMul(b, x, y, "");
    case IC_L_DIV:
        if (fp) {
            LLVMValueRef q = LLVMBuildFDiv(b, x, y, "");
            /* f32: a loop-invariant divisor becomes one reciprocal and a multiply per element
             * (LICM), as ATen's softmax does; at most an ulp from the exact quotient. */
            if (t == IC_F32 && LLVMIsAInstruction(q))
                LLVMSetFastMathFlags(q, LLVMFastMathAllowReciprocal);
            return q;
        }
        return bl ? x : int_divmod(g, x, y, false, false);
    case IC_L_POW:
        if (fp)
            return ic__gen_math(g, IC_L_POW, t, x, y);
        return bl ? LLVMBuildOr(b, x, LLVMBuildNot(b, y, ""), "") : int_pow(g, x, y);
    case IC_L_MAX:
        return fp ? intr2(g, "llvm.maximum", x, y) : bl ? LLVMBuildOr(b, x, y, "") : intr2(g, "llvm.smax", x, y);
    case IC_L_MIN:
        return fp ? intr2(g, "llvm.minimum", x, y) : bl ? LLVMBuildAnd(b, x, y, "") : intr2(g, "llvm.smin", x, y);
    case IC_L_IDIV:
        if (fp)
            return intr1(g, "llvm.floor", LLVMBuildFDiv(b, x, y, ""));
        return bl ? x : int_divmod(g, x, y, true, false);
    case IC_L_MOD:
        if (fp) { /* torch.remainder: a - floor(a / b) * b */
            LLVMValueRef q = intr1(g, "llvm.floor", LLVMBuildFDiv(b, x, y, ""));
            return LLVMBuildFSub(b, x, LLVMBuildFMul(b, q, y, ""), "");
        }
        return bl ? LLVMConstInt(g->t_i1, 0, 0) : int_divmod(g, x, y, true, true);
    case IC_L_AND: return LLVMBuildAnd(b, x, y, "");
    case IC_L_OR: return LLVMBuildOr(b, x, y, "");
    case IC_L_CMP: return emit_cmp(g, in->cmp, xt, x, y);
    default: return NULL;
    }
}

ic_status ic__gen_stage(ic__cg *g, int s)
{
    return ic__gen_stage_subset(g, s, NULL);
}

ic_status ic__gen_stage_subset(ic__cg *g, int s, const bool *need)
{
    const ic_stage *st = &g->k->stages[s];
    for (int i = 0; i < st->ninstr; i++) {
        const ic_linstr *in = &st->instr[i];
        if (need && !need[i])
            continue;
        LLVMValueRef a = NULL, bv = NULL, c = NULL, v = NULL;
        ic_dtype at = IC_F32;
        switch (in->op == IC_L_REDUCE ? 1 : ic_linstr_arity(in)) { /* emit_reduce reads argmax's b */
        case 0: break;
        case 3: c = g->vals[in->c]; /* fallthrough */
        case 2: bv = g->vals[in->b]; /* fallthrough */
        default:
            a = g->vals[in->a];
            at = st->instr[in->a].type;
            break;
        }
        switch (in->op) {
        case IC_L_VAR: v = g->vars[in->a]; break;
        case IC_L_CONST: v = ic__gen_const(g, in->type, in->imm); break;
        case IC_L_LOAD: v = emit_load(g, in, a); break;
        case IC_L_STORE: emit_store(g, in, a, bv, st->instr[in->b].type); break;
        case IC_L_ACC: v = emit_acc(g, in); break;
        case IC_L_REDUCE: v = emit_reduce(g, s, i); break;
        case IC_L_CAST: v = build_cast(g, a, at, in->type); break;
        case IC_L_SELECT: v = LLVMBuildSelect(g->b, a, bv, c, ""); break;
        case IC_L_EXP:
            v = (in->flags & IC_LF_EXP_LE0) ? ic__gen_exp_le0(g, in->type, a)
                                       : emit_unary(g, in->op, in->type, a, at);
            break;
        default:
            if (ic_lop_is_unary(in->op))
                v = emit_unary(g, in->op, in->type, a, at);
            else
                v = emit_binary(g, in, a, bv, at);
            break;
        }
        g->vals[i] = v;
    }
    return IC_OK;
}
