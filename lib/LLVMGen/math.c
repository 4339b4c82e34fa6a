/* math.c - the math library of both backends (interface and design: math-impl.h): exp log sin
 * cos tanh erf sigmoid pow as internal functions of the caller's module, then the CPU's entry
 * points (ic__gen_math: f32 through the library, f64 through libm).
 *
 * f32 (the reference for every target): branch-free polynomials (range reduction, FMA, a
 * correctly rounded division in tanh and sigmoid only, 1-2.5 ulp) emitted as small always-inline functions, so the loop vectorizer turns
 * them into vector code like any other arithmetic. Pointwise CPU kernels that use them are
 * bound by the vector ports, so instruction count is what these are tuned for. They use only
 * IEEE-exact LLVM operations (fadd fmul fma fcmp select bitcast integer ops rint fabs
 * copysign floor fptosi sitofp, fdiv), which every target rounds the same way.
 * f64 without libm (the GPU): the same schemes with longer polynomials (d_* below). */
#include <math.h>
#include <string.h>
#include "llvmgen-impl.h"
#include "math-impl.h"

/* A tiny expression builder over one LLVM builder: scalars of float type t (f32 or f64, d)
 * with integer type ti of the same width. */
typedef struct {
    LLVMModuleRef mod;
    LLVMContextRef ctx;
    LLVMBuilderRef b;
    LLVMTypeRef t, ti, t1, t32;
    bool d;
} M;

static LLVMValueRef K(M *m, double v) { return LLVMConstReal(m->t, v); }
static LLVMValueRef KI(M *m, int64_t v) { return LLVMConstInt(m->ti, (unsigned long long)v, 1); }
static LLVMValueRef add(M *m, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFAdd(m->b, a, b, ""); }
static LLVMValueRef sub(M *m, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFSub(m->b, a, b, ""); }
static LLVMValueRef mul(M *m, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFMul(m->b, a, b, ""); }
static LLVMValueRef fdiv(M *m, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFDiv(m->b, a, b, ""); }
static LLVMValueRef sel(M *m, LLVMValueRef c, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildSelect(m->b, c, a, b, ""); }
static LLVMValueRef fcmp(M *m, LLVMRealPredicate p, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFCmp(m->b, p, a, b, ""); }
static LLVMValueRef bits(M *m, LLVMValueRef f) { return LLVMBuildBitCast(m->b, f, m->ti, ""); }
static LLVMValueRef flt(M *m, LLVMValueRef i) { return LLVMBuildBitCast(m->b, i, m->t, ""); }

LLVMValueRef ic__llvm_intrinsic(LLVMModuleRef mod, LLVMBuilderRef b, const char *name, LLVMTypeRef *over,
                                int nover, LLVMValueRef *args, int nargs)
{
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    IC_ASSERT(id != 0);
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(mod, id, over, (size_t)nover);
    LLVMTypeRef fty = LLVMIntrinsicGetType(LLVMGetModuleContext(mod), id, over, (size_t)nover);
    return LLVMBuildCall2(b, fty, fn, args, (unsigned)nargs, "");
}
LLVMBuilderRef ic__entry_builder(LLVMContextRef ctx, LLVMBasicBlockRef entry)
{
    LLVMBuilderRef b = LLVMCreateBuilderInContext(ctx);
    LLVMValueRef first = LLVMGetFirstInstruction(entry);
    if (first)
        LLVMPositionBuilderBefore(b, first);
    else
        LLVMPositionBuilderAtEnd(b, entry);
    return b;
}

static LLVMValueRef call(M *m, const char *name, LLVMTypeRef *over, int nover, LLVMValueRef *args,
                         int nargs)
{
    return ic__llvm_intrinsic(m->mod, m->b, name, over, nover, args, nargs);
}
static LLVMValueRef call_intr(M *m, const char *name, LLVMValueRef *args, int n)
{
    LLVMTypeRef t = LLVMTypeOf(args[0]);
    return call(m, name, &t, 1, args, n);
}
static LLVMValueRef fma3(M *m, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c)
{
    LLVMValueRef x[3] = { a, b, c };
    return call_intr(m, "llvm.fma", x, 3);
}
static LLVMValueRef un(M *m, const char *name, LLVMValueRef a) { return call_intr(m, name, &a, 1); }
static LLVMValueRef bin(M *m, const char *name, LLVMValueRef a, LLVMValueRef b)
{
    LLVMValueRef x[2] = { a, b };
    return call_intr(m, name, x, 2);
}
static LLVMValueRef isnan_(M *m, LLVMValueRef x) { return fcmp(m, LLVMRealUNO, x, x); }
/* copysign as the bit operation it is: one LOP3 on the GPU, where NVPTX's lowering of
 * llvm.copysign (abs, neg, a sign test, a select) assembles to two instructions (exact erf's
 * GELU loses one of its ~37 a bf16 element); x86 lowers both forms to the same and/or. */
static LLVMValueRef copysign_(M *m, LLVMValueRef mag, LLVMValueRef sgn)
{
    LLVMValueRef lo = KI(m, m->d ? INT64_MAX : INT32_MAX), hi = KI(m, m->d ? INT64_MIN : INT32_MIN);
    return flt(m, LLVMBuildOr(m->b, LLVMBuildAnd(m->b, bits(m, mag), lo, ""),
                              LLVMBuildAnd(m->b, bits(m, sgn), hi, ""), ""));
}

/* Horner: c[0] * x^(n-1) + ... + c[n-1] */
static LLVMValueRef poly(M *m, LLVMValueRef x, const double *c, int n)
{
    LLVMValueRef p = K(m, c[0]);
    for (int i = 1; i < n; i++)
        p = fma3(m, p, x, K(m, c[i]));
    return p;
}

/* ======== f32 ======== */

/* x = n ln2 + r with n = round(x log2 e), |r| <= ln2/2, for |x| < 2^21 ln2. n is rounded by
 * adding the shifter 1.5 * 2^23 inside the fma, so the sum's low mantissa bits hold n as an
 * integer: *t returns that sum, and pow2_bits(t) = n << 23 scales by 2^n with one integer add
 * on the exponent field. Unlike rint + fptosi, that is one instruction less and defined for
 * NaN (fptosi of NaN is poison). wide: ln2 split in two so that n * LN2_HI is exact (exp's
 * full range); else one f32 ln2 (expm1 of arguments in [-22, 0]). */
#define SHIFTER 12582912.0
static LLVMValueRef reduce_ln2(M *m, LLVMValueRef x, LLVMValueRef *t, double shifter, bool wide)
{
    *t = fma3(m, x, K(m, 1.44269504088896341), K(m, shifter));
    LLVMValueRef n = sub(m, *t, K(m, shifter));
    if (!wide) /* |n| <= 32: n (ln2 - LN2_F32) is below 6.1e-8 * 2^-n ln2 of the result */
        return fma3(m, n, K(m, -0.693147182464599609375), x);
    LLVMValueRef r = fma3(m, n, K(m, -0.693359375), x);
    return fma3(m, n, K(m, 2.12194440e-4), r);
}
static LLVMValueRef pow2_bits(M *m, LLVMValueRef t) { return LLVMBuildShl(m->b, bits(m, t), KI(m, 23), ""); }

/* (e^r - 1 - r) / r^2 on |r| <= ln2/2: a degree-4 fit weighted for the relative error of
 * expm1, 0.22 ulp (so e^r = 1 + r + r^2 P(r) to ~0.1 ulp). */
static const double EXP_P[] = { 1.38825132e-3, 8.36658385e-3, 4.16672006e-2, 1.66665435e-1,
                                4.99999970e-1 };

/* e^x for x in [-87.33654, 88.72283] (results normal, no lane computes a subnormal); wide
 * as reduce_ln2's. */
static LLVMValueRef exp_core(M *m, LLVMValueRef x, bool wide)
{
    LLVMValueRef t, r = reduce_ln2(m, x, &t, SHIFTER, wide);
    LLVMValueRef p = fma3(m, poly(m, r, EXP_P, 5), r, K(m, 1.0));
    LLVMValueRef y = fma3(m, p, r, K(m, 1.0));
    LLVMValueRef e = flt(m, LLVMBuildAdd(m->b, bits(m, y), pow2_bits(m, t), ""));
    /* A NaN's bits are the target's (x86 makes 0xffc00000, NVIDIA GPUs 0x7fffffff): added as
     * integers they can carry into a finite number (FLT_MAX on the GPU). */
    return sel(m, isnan_(m, y), y, e);
}

/* e^r - 1 for the reduced r as q, with s = 2^n, so that e^x - 1 = s q + (s - 1): relative
 * accuracy near 0 for erf and tanh. x in [-22, 0]. */
static LLVMValueRef expm1_parts(M *m, LLVMValueRef x, LLVMValueRef *s)
{
    LLVMValueRef t, r = reduce_ln2(m, x, &t, SHIFTER + 127, false);
    /* the shifter's low bits hold the bias: (n + 127) << 23. For a NaN x, s is whatever the
     * target's NaN bits make, but q is NaN, and every caller's result has q in it. */
    *s = flt(m, pow2_bits(m, t));
    return fma3(m, poly(m, r, EXP_P, 5), mul(m, r, r), r);
}

/* a / b, correctly rounded: the one operation here whose fast forms differ per target. A
 * reciprocal estimate (fdiv arcp: AVX-512 VRCP14PS and a Newton step, then a corrected
 * quotient) rounds differently from the GPU's rcp.rn wherever a / b lies within ~2^-24 ulp
 * of a midpoint: CPU and GPU differed on 0.15% of sigmoid's inputs (1 + e^-x = 2 - 2^-23 for
 * x near 1e-7), and the CPU's AVX-512, AVX2 and scalar loops from one another. Fixing the
 * estimate's rounding costs ~10 vector instructions; the divider itself (VDIVPS) is ~20%
 * faster than the estimate on this Xeon (sigmoid 0.0179 vs 0.0230 ms, tanh 0.0193 vs 0.0250
 * for 2^16 floats on one thread). Callers keep a / b finite. */
static LLVMValueRef div_rn(M *m, LLVMValueRef a, LLVMValueRef b) { return fdiv(m, a, b); }

/* exp(x) ~0.9 ulp. Results below FLT_MIN (x < ln FLT_MIN = -87.3365) are flushed to 0 (an
 * absolute error below 1.2e-38) and x is clamped above that, so no lane ever computes a
 * subnormal: on x86 every vector instruction with a subnormal result or operand takes a
 * microcode assist (~100 cycles), which made softmax rows with large logit gaps and erf (GELU)
 * of |x| > 9.3 run 5-10x slower. The clamps are written so that NaN passes through them. */
#define EXP_LO -87.33654022216797 /* ln FLT_MIN, rounded up */
#define EXP_HI 88.72283172607422  /* the largest f32 with a finite e^x */
static LLVMValueRef clamp_nan(M *m, LLVMValueRef x, double lo, double hi)
{
    x = sel(m, fcmp(m, LLVMRealOLT, x, K(m, lo)), K(m, lo), x);
    return sel(m, fcmp(m, LLVMRealOGT, x, K(m, hi)), K(m, hi), x);
}
static LLVMValueRef m_exp(M *m, LLVMValueRef x)
{
    LLVMValueRef y = exp_core(m, clamp_nan(m, x, EXP_LO, EXP_HI), true);
    y = sel(m, fcmp(m, LLVMRealOGT, x, K(m, EXP_HI)), K(m, INFINITY), y);
    return sel(m, fcmp(m, LLVMRealOLT, x, K(m, EXP_LO)), K(m, 0.0), y);
}

/* exp(x) for x <= 0 or NaN (IC_LF_EXP_LE0: softmax's x - max): m_exp without the overflow
 * side, and one f32 ln2: 4 vector instructions fewer. With n = round(x log2 e) in [-126, 0]
 * that costs up to |n| (LN2_F32 - ln2) = 2.4e-7 relative (2 ulp) for results near FLT_MIN,
 * under half an ulp above e^-20: softmax over rows (x, 0) is within 2.67 ulp of the truth
 * for x >= -20 (2.52 with the split ln2), 4.45 below (test_math_accuracy). */
static LLVMValueRef m_exp_le0(M *m, LLVMValueRef x)
{
    LLVMValueRef lo = fcmp(m, LLVMRealOLT, x, K(m, EXP_LO));
    return sel(m, lo, K(m, 0.0), exp_core(m, sel(m, lo, K(m, EXP_LO), x), false));
}

/* log(x): x = 2^e m with m in [sqrt(1/2), sqrt(2)), log(m) by a polynomial in m - 1. */
static LLVMValueRef m_log(M *m, LLVMValueRef x)
{
    static const double P[] = { 7.0376836292E-2, -1.1514610310E-1, 1.1676998740E-1,
                                -1.2420140846E-1, 1.4249322787E-1, -1.6668057665E-1,
                                2.0000714765E-1, -2.4999993993E-1, 3.3333331174E-1 };
    LLVMBuilderRef b = m->b;
    LLVMValueRef sub_ = fcmp(m, LLVMRealOLT, x, K(m, 1.17549435e-38));
    LLVMValueRef xs = sel(m, sub_, mul(m, x, K(m, 8388608.0)), x); /* subnormals: * 2^23 */
    LLVMValueRef eadj = sel(m, sub_, KI(m, -23), KI(m, 0));
    LLVMValueRef ib = bits(m, xs);
    LLVMValueRef e = LLVMBuildSub(b, LLVMBuildAnd(b, LLVMBuildLShr(b, ib, KI(m, 23), ""), KI(m, 0xff), ""),
                                  KI(m, 126), "");
    e = LLVMBuildAdd(b, e, eadj, "");
    LLVMValueRef mm = flt(m, LLVMBuildOr(b, LLVMBuildAnd(b, ib, KI(m, 0x007fffff), ""), KI(m, 0x3f000000), ""));
    LLVMValueRef small = fcmp(m, LLVMRealOLT, mm, K(m, 0.707106781186547524));
    e = LLVMBuildSub(b, e, LLVMBuildZExt(b, small, m->ti, ""), "");
    LLVMValueRef f = sub(m, sel(m, small, add(m, mm, mm), mm), K(m, 1.0));
    LLVMValueRef ef = LLVMBuildSIToFP(b, e, m->t, "");
    LLVMValueRef z = mul(m, f, f);
    LLVMValueRef y = mul(m, mul(m, f, z), poly(m, f, P, 9));
    y = fma3(m, ef, K(m, -2.12194440e-4), y);
    y = fma3(m, z, K(m, -0.5), y);
    LLVMValueRef r = add(m, f, y);
    r = fma3(m, ef, K(m, 0.693359375), r);
    r = sel(m, fcmp(m, LLVMRealOEQ, x, K(m, INFINITY)), x, r);
    r = sel(m, fcmp(m, LLVMRealOEQ, x, K(m, 0.0)), K(m, -INFINITY), r);
    r = sel(m, fcmp(m, LLVMRealOLT, x, K(m, 0.0)), K(m, NAN), r);
    return sel(m, isnan_(m, x), x, r);
}

/* sin/cos: x = j pi/2 + r with a 3-part pi/2 (exact products in fma), then the quadrant
 * picks +-sin(r) or +-cos(r). Accurate while j fits in f32 (|x| < ~1e7). |x| is reduced and
 * sin takes the sign of x at the end: odd symmetry is exact and sin(-0) = -0. */
static LLVMValueRef m_sincos(M *m, LLVMValueRef x, bool want_cos)
{
    static const double S[] = { -1.9515295891E-4, 8.3321608736E-3, -1.6666654611E-1 };
    static const double C[] = { 2.443315711809948E-005, -1.388731625493765E-003,
                                4.166664568298827E-002 };
    LLVMBuilderRef b = m->b;
    LLVMValueRef ax = un(m, "llvm.fabs", x);
    LLVMValueRef j = un(m, "llvm.rint", mul(m, ax, K(m, 0.636619772367581343)));
    LLVMValueRef r = fma3(m, j, K(m, -1.5707963705062866), ax);
    r = fma3(m, j, K(m, 4.371138828673793e-08), r);
    r = fma3(m, j, K(m, 1.7151245100058819e-15), r);
    LLVMValueRef jc = sel(m, fcmp(m, LLVMRealOLT, j, K(m, 1073741824.0)), j, K(m, 1073741824.0));
    LLVMValueRef q = LLVMBuildFPToSI(b, jc, m->ti, "");
    if (want_cos)
        q = LLVMBuildAdd(b, q, KI(m, 1), "");
    LLVMValueRef z = mul(m, r, r);
    LLVMValueRef s = fma3(m, mul(m, z, r), poly(m, z, S, 3), r);
    LLVMValueRef cc = fma3(m, mul(m, z, z), poly(m, z, C, 3), fma3(m, z, K(m, -0.5), K(m, 1.0)));
    LLVMValueRef odd = LLVMBuildTrunc(b, q, m->t1, "");
    LLVMValueRef neg = LLVMBuildTrunc(b, LLVMBuildLShr(b, q, KI(m, 1), ""), m->t1, "");
    LLVMValueRef v = sel(m, odd, cc, s);
    v = sel(m, neg, LLVMBuildFNeg(b, v, ""), v);
    if (!want_cos) /* sin(x) = sign(x) sin|x|: flip v's sign bit with x's (one VPTERNLOGD) */
        v = flt(m, LLVMBuildXor(b, bits(m, v), LLVMBuildAnd(b, bits(m, x), KI(m, INT32_MIN), ""), ""));
    return sel(m, fcmp(m, LLVMRealOLT, ax, K(m, INFINITY)), v, K(m, NAN));
}

/* tanh|x| = (1 - e) / (1 + e) with e = e^{-2|x|} = s (1 + q): numerator -(s q + s - 1) and
 * denominator s q + s + 1 each round once, so there is no cancellation near 0 and no second
 * branch; |x| is clamped at 9.1, where tanh rounds to 1. ~3 ulp. */
static LLVMValueRef m_tanh(M *m, LLVMValueRef x)
{
    LLVMValueRef a = un(m, "llvm.fabs", x);
    a = sel(m, fcmp(m, LLVMRealOGT, a, K(m, 9.1)), K(m, 9.1), a); /* NaN passes */
    LLVMValueRef s, q = expm1_parts(m, mul(m, a, K(m, -2.0)), &s);
    LLVMValueRef num = fma3(m, s, q, sub(m, s, K(m, 1.0)));
    LLVMValueRef den = fma3(m, s, q, add(m, s, K(m, 1.0)));
    return copysign_(m, div_rn(m, num, den), x);
}

/* erf|x| = 1 - erfc|x| = -expm1(R) with R = log erfc|x| = |x| (C0 + |x| S(|x|)), S a degree-6
 * fit on [0, 3.92] weighted for erf's relative error (0.63 ulp; beyond 3.92 erf rounds to 1,
 * so |x| is clamped). One polynomial, one expm1, no division, no second branch: ~2.3 ulp
 * everywhere, relative near 0 (C0 = -2/sqrt(pi) in two parts). Against an Abramowitz-Stegun
 * form (5.4 ulp, a VDIVPS, two branches), GELU's loop takes 44 instructions per vector
 * instead of 83. */
static LLVMValueRef m_erf(M *m, LLVMValueRef x)
{
    static const double S[] = { -4.15802497e-05, 3.87539214e-4, -1.27068162e-3, -1.78830538e-4,
                                1.93021186e-2, -1.02807425e-1, -6.36617541e-1 };
    LLVMValueRef a = un(m, "llvm.fabs", x);
    a = sel(m, fcmp(m, LLVMRealOGT, a, K(m, 3.92)), K(m, 3.92), a); /* NaN passes */
    LLVMValueRef t = fma3(m, poly(m, a, S, 7), a, K(m, 5.8635382771399236e-08));
    LLVMValueRef R = fma3(m, a, K(m, -1.128379225730896), mul(m, a, t));
    LLVMValueRef s, q = expm1_parts(m, R, &s);
    LLVMValueRef y = fma3(m, LLVMBuildFNeg(m->b, s, ""), q, sub(m, K(m, 1.0), s));
    return copysign_(m, y, x);
}

/* 1 / (1 + e^-x), e^-x clamped to [FLT_MIN, 8.5e37] so the quotient is finite and normal;
 * results below FLT_MIN (x < -87.3365) are flushed to 0. ~2.5 ulp. */
static LLVMValueRef m_sigmoid(M *m, LLVMValueRef x)
{
    LLVMValueRef t = LLVMBuildFNeg(m->b, x, "");
    LLVMValueRef e = exp_core(m, clamp_nan(m, t, EXP_LO, -EXP_LO), true);
    LLVMValueRef y = div_rn(m, K(m, 1.0), add(m, K(m, 1.0), e));
    return sel(m, fcmp(m, LLVMRealOGT, t, K(m, -EXP_LO)), K(m, 0.0), y);
}

static LLVMValueRef d_exp(M *m, LLVMValueRef x);
static LLVMValueRef d_log(M *m, LLVMValueRef x);

/* pow(x, y) = e^{y log|x|}, with C99/PyTorch special cases: y == 0 or x == 1 give 1,
 * a negative x needs an integer y (sign from its parity), else NaN. f32 and f64 (the
 * latter with d_exp, d_log). */
static LLVMValueRef m_pow(M *m, LLVMValueRef x, LLVMValueRef y)
{
    LLVMValueRef ax = un(m, "llvm.fabs", x);
    LLVMValueRef r = m->d ? d_exp(m, mul(m, y, d_log(m, ax))) : m_exp(m, mul(m, y, m_log(m, ax)));
    LLVMValueRef yint = fcmp(m, LLVMRealOEQ, un(m, "llvm.floor", y), y);
    LLVMValueRef half = mul(m, y, K(m, 0.5));
    LLVMValueRef yodd = LLVMBuildAnd(m->b, yint, fcmp(m, LLVMRealUNE, un(m, "llvm.floor", half), half), "");
    LLVMValueRef xneg = fcmp(m, LLVMRealOLT, x, K(m, 0.0));
    LLVMValueRef xzero = fcmp(m, LLVMRealOEQ, x, K(m, 0.0));
    /* odd integer powers keep the sign of x, -0 included */
    r = sel(m, LLVMBuildAnd(m->b, LLVMBuildOr(m->b, xneg, xzero, ""), yodd, ""), copysign_(m, r, x), r);
    r = sel(m, LLVMBuildAnd(m->b, xneg, LLVMBuildNot(m->b, yint, ""), ""), K(m, NAN), r);
    /* |x| == inf with an infinite y and x == -1 with y = +-inf are 1 only for |x| == 1 */
    LLVMValueRef ainf = fcmp(m, LLVMRealOEQ, un(m, "llvm.fabs", y), K(m, INFINITY));
    r = sel(m, LLVMBuildAnd(m->b, ainf, fcmp(m, LLVMRealOEQ, ax, K(m, 1.0)), ""), K(m, 1.0), r);
    r = sel(m, fcmp(m, LLVMRealOEQ, x, K(m, 1.0)), K(m, 1.0), r);
    return sel(m, fcmp(m, LLVMRealOEQ, y, K(m, 0.0)), K(m, 1.0), r);
}

/* ======== f64 without libm ======== */

static LLVMValueRef to_int(M *m, LLVMValueRef x, LLVMTypeRef it)
{
    LLVMTypeRef ov[2] = { it, m->t };
    return call(m, "llvm.fptosi.sat", ov, 2, &x, 1);
}

/* y * 2^n for an i64 n, in two steps so subnormals and overflow come out. */
static LLVMValueRef ldexp_(M *m, LLVMValueRef y, LLVMValueRef n)
{
    LLVMValueRef h = LLVMBuildAShr(m->b, n, KI(m, 1), "");
    LLVMValueRef r = LLVMBuildSub(m->b, n, h, "");
    LLVMValueRef s1 = flt(m, LLVMBuildShl(m->b, LLVMBuildAdd(m->b, h, KI(m, 1023), ""), KI(m, 52), ""));
    LLVMValueRef s2 = flt(m, LLVMBuildShl(m->b, LLVMBuildAdd(m->b, r, KI(m, 1023), ""), KI(m, 52), ""));
    return mul(m, mul(m, y, s1), s2);
}

/* x = k ln2 + r, |r| <= ln2/2, e^r by its Taylor series to r^13, times 2^k. */
static LLVMValueRef d_exp(M *m, LLVMValueRef x)
{
    LLVMValueRef xc = bin(m, "llvm.minnum", bin(m, "llvm.maxnum", x, K(m, -746.0)), K(m, 710.0));
    LLVMValueRef j = un(m, "llvm.rint", mul(m, xc, K(m, 1.4426950408889634)));
    LLVMValueRef nj = LLVMBuildFNeg(m->b, j, "");
    LLVMValueRef r = fma3(m, nj, K(m, 0.6931471805599453), xc);
    r = fma3(m, nj, K(m, 2.3190468138462996e-17), r);
    double c[14];
    double f = 1;
    for (int i = 0; i < 14; i++) { /* 1/13! ... 1/0! */
        c[13 - i] = 1.0 / f;
        f *= i + 1;
    }
    LLVMValueRef y = poly(m, r, c, 14);
    LLVMValueRef res = ldexp_(m, y, to_int(m, j, m->ti));
    return sel(m, isnan_(m, x), x, res);
}

/* x = 2^e m with m in (sqrt(1/2), sqrt(2)], log m = 2 atanh(f / (f + 2)) by its series. */
static LLVMValueRef d_log(M *m, LLVMValueRef x)
{
    LLVMBuilderRef b = m->b;
    LLVMValueRef sub_n = fcmp(m, LLVMRealOLT, x, K(m, 0x1p-1022));
    LLVMValueRef xs = sel(m, sub_n, mul(m, x, K(m, 0x1p54)), x);
    LLVMValueRef eadj = sel(m, sub_n, KI(m, -54), KI(m, 0));
    LLVMValueRef u = bits(m, xs);
    LLVMValueRef e = LLVMBuildSub(b, LLVMBuildAnd(b, LLVMBuildLShr(b, u, KI(m, 52), ""), KI(m, 0x7ff), ""),
                                  KI(m, 1023), "");
    e = LLVMBuildAdd(b, e, eadj, "");
    LLVMValueRef mm = flt(m, LLVMBuildOr(b, LLVMBuildAnd(b, u, KI(m, 0xfffffffffffffLL), ""),
                                         KI(m, 0x3ff0000000000000LL), ""));
    LLVMValueRef big = fcmp(m, LLVMRealOGT, mm, K(m, 1.4142135623730951));
    mm = sel(m, big, mul(m, mm, K(m, 0.5)), mm);
    e = sel(m, big, LLVMBuildAdd(b, e, KI(m, 1), ""), e);
    LLVMValueRef f = sub(m, mm, K(m, 1.0));
    LLVMValueRef s = fdiv(m, f, add(m, f, K(m, 2.0)));
    LLVMValueRef z = mul(m, s, s);
    double c[10];
    for (int i = 0; i < 10; i++) /* 2/(2k+1), k = 10..1 */
        c[i] = 2.0 / (2 * (10 - i) + 1);
    LLVMValueRef R = mul(m, z, poly(m, z, c, 10));
    LLVMValueRef hfsq = mul(m, K(m, 0.5), mul(m, f, f));
    LLVMValueRef l = sub(m, f, sub(m, hfsq, mul(m, s, add(m, hfsq, R))));
    LLVMValueRef ef = LLVMBuildSIToFP(b, e, m->t, "");
    LLVMValueRef res = fma3(m, ef, K(m, 6.93147180369123816490e-01),
                            fma3(m, ef, K(m, 1.90821492927058770002e-10), l));
    res = sel(m, fcmp(m, LLVMRealOEQ, x, K(m, INFINITY)), x, res);
    res = sel(m, fcmp(m, LLVMRealOEQ, x, K(m, 0.0)), K(m, -INFINITY), res);
    return sel(m, fcmp(m, LLVMRealULT, x, K(m, 0.0)), K(m, NAN), res);
}

/* x = k pi/2 + r (3-part pi/2), then the quadrant picks +-sin(r) or +-cos(r), each a Taylor
 * polynomial. */
static LLVMValueRef d_sincos(M *m, LLVMValueRef x, bool want_cos)
{
    LLVMBuilderRef b = m->b;
    LLVMValueRef k = un(m, "llvm.rint", mul(m, x, K(m, 0.6366197723675814)));
    LLVMValueRef nk = LLVMBuildFNeg(b, k, "");
    LLVMValueRef r = fma3(m, nk, K(m, 1.5707963267948966), x);
    r = fma3(m, nk, K(m, 6.123233995736766e-17), r);
    r = fma3(m, nk, K(m, -1.4973849048591698e-33), r);
    LLVMValueRef q = LLVMBuildAnd(b, to_int(m, k, m->t32), LLVMConstInt(m->t32, 3, 0), "");
    LLVMValueRef z = mul(m, r, r);
    /* sin r = r + r z (-1/3! + z (1/5! ...)), cos r = 1 + z (-1/2! + z (1/4! ...)) */
    double sc[8], cc[9];
    for (int i = 0; i < 8; i++) { /* (-1)^n/(2n+1)!, n = 8..1 */
        int nn = 8 - i;
        double f = 1;
        for (int t = 2; t <= 2 * nn + 1; t++)
            f *= t;
        sc[i] = (nn % 2 ? -1.0 : 1.0) / f;
    }
    for (int i = 0; i < 9; i++) { /* (-1)^n/(2n)!, n = 9..1 */
        int nn = 9 - i;
        double f = 1;
        for (int t = 2; t <= 2 * nn; t++)
            f *= t;
        cc[i] = (nn % 2 ? -1.0 : 1.0) / f;
    }
    LLVMValueRef s = fma3(m, mul(m, r, z), poly(m, z, sc, 8), r);
    LLVMValueRef co = fma3(m, z, poly(m, z, cc, 9), K(m, 1.0));
    LLVMValueRef one = LLVMConstInt(m->t32, 1, 0), two = LLVMConstInt(m->t32, 2, 0);
    LLVMValueRef q1 = LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildAnd(b, q, one, ""), one, "");
    LLVMValueRef q2 = LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildAnd(b, q, two, ""), two, "");
    LLVMValueRef v, neg;
    if (!want_cos) { /* 0: s, 1: c, 2: -s, 3: -c */
        v = sel(m, q1, co, s);
        neg = q2;
    } else { /* 0: c, 1: -s, 2: -c, 3: s */
        v = sel(m, q1, s, co);
        neg = LLVMBuildXor(b, q1, q2, "");
    }
    return sel(m, neg, LLVMBuildFNeg(b, v, ""), v);
}

/* |x| < 0.55: expm1(2x) / (expm1(2x) + 2), expm1 by its series; beyond 1 - 2 / (e^2|x| + 1)
 * with the sign of x. */
static LLVMValueRef d_tanh(M *m, LLVMValueRef x)
{
    LLVMValueRef a = un(m, "llvm.fabs", x);
    LLVMValueRef y = add(m, x, x);
    double c[20];
    double f = 1;
    for (int i = 0; i < 20; i++) { /* 1/(n+1)!, n = 19..0 */
        f *= i + 1;
        c[19 - i] = 1.0 / f;
    }
    LLVMValueRef e = mul(m, y, poly(m, y, c, 20));
    LLVMValueRef small = fdiv(m, e, add(m, e, K(m, 2.0)));
    LLVMValueRef e2 = d_exp(m, add(m, a, a));
    LLVMValueRef big = sub(m, K(m, 1.0), fdiv(m, K(m, 2.0), add(m, e2, K(m, 1.0))));
    big = copysign_(m, big, x);
    return sel(m, fcmp(m, LLVMRealOLT, a, K(m, 0.55)), small, big);
}

/* |x| < 1: 2/sqrt(pi) sum (-1)^n x^(2n+1) / (n! (2n+1)); beyond, 1 - erfc with erfc(a) =
 * t exp(-a^2 - 1.26551223 + t P(t)), t = 1/(1 + a/2) (Numerical Recipes' erfcc). */
static LLVMValueRef d_erf(M *m, LLVMValueRef x)
{
    LLVMValueRef a = un(m, "llvm.fabs", x);
    double c[18];
    double fact = 1;
    for (int k = 0; k < 18; k++) {
        if (k)
            fact *= k;
        c[17 - k] = 1.1283791670955126 * (k % 2 ? -1.0 : 1.0) / (fact * (2 * k + 1));
    }
    LLVMValueRef z = mul(m, x, x);
    LLVMValueRef small = mul(m, x, poly(m, z, c, 18));
    static const double P[] = { 0.17087277, -0.82215223, 1.48851587, -1.13520398, 0.27886807,
                                -0.18628806, 0.09678418, 0.37409196, 1.00002368, -1.26551223 };
    LLVMValueRef t = fdiv(m, K(m, 1.0), fma3(m, a, K(m, 0.5), K(m, 1.0)));
    LLVMValueRef arg = sub(m, mul(m, t, poly(m, t, P, 9)), K(m, 1.26551223));
    arg = sub(m, arg, mul(m, a, a));
    LLVMValueRef erfc = mul(m, t, d_exp(m, arg));
    LLVMValueRef big = copysign_(m, sub(m, K(m, 1.0), erfc), x);
    return sel(m, fcmp(m, LLVMRealOLT, a, K(m, 1.0)), small, big);
}

/* ======== the functions ======== */

static const char *op_name(ic_lop op)
{
    switch (op) {
    case IC_L_EXP: return "exp";
    case IC_L_LOG: return "log";
    case IC_L_SIN: return "sin";
    case IC_L_COS: return "cos";
    case IC_L_TANH: return "tanh";
    case IC_L_ERF: return "erf";
    case IC_L_SIGMOID: return "sigmoid";
    case IC_L_POW: return "pow";
    default: return NULL;
    }
}

/* The function "ic.<name>.<f32|f64>" of (t) or (t, t): NULL in *m when it exists already,
 * else a builder at its entry (the caller disposes it). */
static LLVMValueRef new_fn(LLVMModuleRef mod, const char *name, bool d, int nargs, bool inl, M *m)
{
    char fname[64];
    snprintf(fname, sizeof fname, "ic.%s.%s", name, d ? "f64" : "f32");
    LLVMValueRef fn = LLVMGetNamedFunction(mod, fname);
    m->b = NULL;
    if (fn)
        return fn;
    LLVMContextRef ctx = LLVMGetModuleContext(mod);
    *m = (M){ mod, ctx, NULL, d ? LLVMDoubleTypeInContext(ctx) : LLVMFloatTypeInContext(ctx),
              d ? LLVMInt64TypeInContext(ctx) : LLVMInt32TypeInContext(ctx), LLVMInt1TypeInContext(ctx),
              LLVMInt32TypeInContext(ctx), d };
    LLVMTypeRef ps[2] = { m->t, m->t };
    fn = LLVMAddFunction(mod, fname, LLVMFunctionType(m->t, ps, (unsigned)nargs, 0));
    LLVMSetLinkage(fn, LLVMInternalLinkage);
    if (inl) {
        unsigned ai = LLVMGetEnumAttributeKindForName("alwaysinline", 12);
        LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(ctx, ai, 0));
    }
    m->b = LLVMCreateBuilderInContext(ctx);
    LLVMPositionBuilderAtEnd(m->b, LLVMAppendBasicBlockInContext(ctx, fn, "entry"));
    return fn;
}

/* op of x (and y) in m's type: f32 (the reference polynomials) or f64 (d_*). */
static LLVMValueRef emit(M *m, ic_lop op, bool le0, LLVMValueRef x, LLVMValueRef y)
{
    bool d = m->d;
    switch (op) {
    case IC_L_EXP: return d ? d_exp(m, x) : le0 ? m_exp_le0(m, x) : m_exp(m, x);
    case IC_L_LOG: return d ? d_log(m, x) : m_log(m, x);
    case IC_L_SIN: return d ? d_sincos(m, x, false) : m_sincos(m, x, false);
    case IC_L_COS: return d ? d_sincos(m, x, true) : m_sincos(m, x, true);
    case IC_L_TANH: return d ? d_tanh(m, x) : m_tanh(m, x);
    case IC_L_ERF: return d ? d_erf(m, x) : m_erf(m, x);
    case IC_L_SIGMOID:
        return d ? fdiv(m, K(m, 1.0), add(m, K(m, 1.0), d_exp(m, LLVMBuildFNeg(m->b, x, "")))) : m_sigmoid(m, x);
    default: return m_pow(m, x, y);
    }
}

/* The function of op in f32 or f64 (d), made on first use: f32 ones always inline. */
static LLVMValueRef math_fn(LLVMModuleRef mod, ic_lop op, bool le0, bool d)
{
    const char *name = le0 && op == IC_L_EXP && !d ? "exp_le0" : op_name(op);
    if (!name)
        return NULL;
    M m;
    LLVMValueRef fn = new_fn(mod, name, d, op == IC_L_POW ? 2 : 1, !d, &m);
    if (!m.b)
        return fn;
    LLVMValueRef r = emit(&m, op, le0, LLVMGetParam(fn, 0), op == IC_L_POW ? LLVMGetParam(fn, 1) : NULL);
    LLVMBuildRet(m.b, r);
    LLVMDisposeBuilder(m.b);
    return fn;
}

LLVMValueRef ic__math_f32_fn(LLVMModuleRef mod, ic_lop op, bool le0) { return math_fn(mod, op, le0, false); }
LLVMValueRef ic__math_f64_fn(LLVMModuleRef mod, ic_lop op) { return math_fn(mod, op, false, true); }

LLVMValueRef ic__math_ipow_fn(LLVMModuleRef mod, LLVMTypeRef ty)
{
    char name[32];
    snprintf(name, sizeof name, "ic.ipow.i%u", LLVMGetIntTypeWidth(ty));
    LLVMValueRef fn = LLVMGetNamedFunction(mod, name);
    if (fn)
        return fn;
    LLVMContextRef ctx = LLVMGetModuleContext(mod);
    LLVMTypeRef params[2] = { ty, ty };
    fn = LLVMAddFunction(mod, name, LLVMFunctionType(ty, params, 2, 0));
    LLVMSetLinkage(fn, LLVMInternalLinkage);
    LLVMBuilderRef b = LLVMCreateBuilderInContext(ctx);
    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(ctx, fn, "entry");
    LLVMBasicBlockRef neg = LLVMAppendBasicBlockInContext(ctx, fn, "neg");
    LLVMBasicBlockRef loop = LLVMAppendBasicBlockInContext(ctx, fn, "loop");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(ctx, fn, "done");
    LLVMValueRef base = LLVMGetParam(fn, 0), e = LLVMGetParam(fn, 1);
    LLVMValueRef zero = LLVMConstInt(ty, 0, 0), one = LLVMConstInt(ty, 1, 0);
    LLVMTypeRef t1 = LLVMInt1TypeInContext(ctx);
    LLVMPositionBuilderAtEnd(b, entry);
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, e, zero, ""), neg, loop);
    /* negative exponents: 1 ** e = 1, (-1) ** e = +-1, anything else truncates to 0 */
    LLVMPositionBuilderAtEnd(b, neg);
    LLVMValueRef odd = LLVMBuildTrunc(b, e, t1, "");
    LLVMValueRef is1 = LLVMBuildICmp(b, LLVMIntEQ, base, one, "");
    LLVMValueRef ism1 = LLVMBuildICmp(b, LLVMIntEQ, base, LLVMConstAllOnes(ty), "");
    LLVMValueRef r = LLVMBuildSelect(b, ism1, LLVMBuildSelect(b, odd, base, one, ""), zero, "");
    LLVMBuildRet(b, LLVMBuildSelect(b, is1, one, r, ""));
    LLVMPositionBuilderAtEnd(b, loop);
    LLVMValueRef acc = LLVMBuildPhi(b, ty, "acc");
    LLVMValueRef bs = LLVMBuildPhi(b, ty, "b");
    LLVMValueRef ee = LLVMBuildPhi(b, ty, "e");
    LLVMValueRef bit = LLVMBuildTrunc(b, ee, t1, "");
    LLVMValueRef acc2 = LLVMBuildSelect(b, bit, LLVMBuildMul(b, acc, bs, ""), acc, "");
    LLVMValueRef bs2 = LLVMBuildMul(b, bs, bs, "");
    LLVMValueRef ee2 = LLVMBuildLShr(b, ee, one, "");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntEQ, ee2, zero, ""), done, loop);
    LLVMValueRef iv[2];
    LLVMBasicBlockRef ib[2] = { entry, loop };
    iv[0] = one, iv[1] = acc2;
    LLVMAddIncoming(acc, iv, ib, 2);
    iv[0] = base, iv[1] = bs2;
    LLVMAddIncoming(bs, iv, ib, 2);
    iv[0] = e, iv[1] = ee2;
    LLVMAddIncoming(ee, iv, ib, 2);
    LLVMPositionBuilderAtEnd(b, done);
    /* e == 0 enters the loop once with bit 0: acc stays 1 */
    LLVMBuildRet(b, acc2);
    LLVMDisposeBuilder(b);
    return fn;
}

LLVMValueRef ic__math_call(LLVMBuilderRef b, LLVMValueRef fn, LLVMValueRef x, LLVMValueRef y)
{
    LLVMValueRef a[2] = { x, y };
    return LLVMBuildCall2(b, LLVMGlobalGetValueType(fn), fn, a, y ? 2 : 1, "");
}

/* ======== the CPU's entry points ======== */

/* f64: libm, exact to its ulp. */
static LLVMValueRef f64_call(ic__cg *g, ic_lop op, LLVMValueRef x, LLVMValueRef y)
{
    LLVMBuilderRef b = g->b;
    LLVMTypeRef t = g->t_f64;
    LLVMValueRef a[2] = { x, y };
    const char *intr = NULL, *libm = NULL;
    switch (op) {
    case IC_L_EXP: intr = "llvm.exp"; break;
    case IC_L_LOG: intr = "llvm.log"; break;
    case IC_L_SIN: intr = "llvm.sin"; break;
    case IC_L_COS: intr = "llvm.cos"; break;
    case IC_L_POW: intr = "llvm.pow"; break;
    case IC_L_TANH: libm = "tanh"; break;
    case IC_L_ERF: libm = "erf"; break;
    case IC_L_SIGMOID: {
        LLVMValueRef one = LLVMConstReal(t, 1.0);
        LLVMValueRef e = f64_call(g, IC_L_EXP, LLVMBuildFNeg(b, x, ""), NULL);
        return LLVMBuildFDiv(b, one, LLVMBuildFAdd(b, one, e, ""), "");
    }
    default: return NULL;
    }
    if (intr)
        return ic__gen_intrinsic(g, intr, &t, 1, a, op == IC_L_POW ? 2 : 1);
    LLVMTypeRef fty = LLVMFunctionType(t, &t, 1, 0);
    LLVMValueRef fn = LLVMGetNamedFunction(g->mod, libm);
    if (!fn)
        fn = LLVMAddFunction(g->mod, libm, fty);
    return LLVMBuildCall2(b, fty, fn, a, 1, "");
}

LLVMValueRef ic__gen_math(ic__cg *g, ic_lop op, ic_dtype t, LLVMValueRef x, LLVMValueRef y)
{
    if (t == IC_F64)
        return f64_call(g, op, x, y);
    return ic__math_call(g->b, ic__math_f32_fn(g->mod, op, false), x, op == IC_L_POW ? y : NULL);
}

LLVMValueRef ic__gen_exp_le0(ic__cg *g, ic_dtype t, LLVMValueRef x)
{
    if (t == IC_F64)
        return f64_call(g, IC_L_EXP, x, NULL);
    return ic__math_call(g->b, ic__math_f32_fn(g->mod, IC_L_EXP, true), x, NULL);
}
