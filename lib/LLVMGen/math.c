/* math.c - exp log sin cos tanh erf sigmoid pow. In f32 they are branch-free polynomials
 * (range reduction, FMA, no divider, 1-2.5 ulp; bounds asserted by
 * unittests/LLVMGen/test_math_accuracy.c) emitted as small always-inline functions, so the
 * loop vectorizer turns them into vector code like any other arithmetic; f64 calls libm
 * through LLVM intrinsics or declarations (exact, scalar). Pointwise kernels that use them
 * are bound by the vector ports, so instruction count is what these are tuned for. */
#include <math.h>
#include <string.h>
#include "llvmgen-impl.h"

/* A tiny expression builder over one LLVM builder, f32 scalars. */
typedef struct { ic__cg *g; LLVMBuilderRef b; } M;

static LLVMValueRef K(M *m, double v) { return LLVMConstReal(m->g->t_f32, v); }
static LLVMValueRef KI(M *m, int64_t v) { return LLVMConstInt(m->g->t_i32, (unsigned long long)v, 1); }
static LLVMValueRef add(M *m, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFAdd(m->b, a, b, ""); }
static LLVMValueRef sub(M *m, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFSub(m->b, a, b, ""); }
static LLVMValueRef mul(M *m, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFMul(m->b, a, b, ""); }
static LLVMValueRef fdiv(M *m, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFDiv(m->b, a, b, ""); }
static LLVMValueRef sel(M *m, LLVMValueRef c, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildSelect(m->b, c, a, b, ""); }
static LLVMValueRef fcmp(M *m, LLVMRealPredicate p, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFCmp(m->b, p, a, b, ""); }
static LLVMValueRef bits(M *m, LLVMValueRef f) { return LLVMBuildBitCast(m->b, f, m->g->t_i32, ""); }
static LLVMValueRef flt(M *m, LLVMValueRef i) { return LLVMBuildBitCast(m->b, i, m->g->t_f32, ""); }

static LLVMValueRef call_intr(M *m, const char *name, LLVMValueRef *args, int n)
{
    LLVMBuilderRef save = m->g->b;
    m->g->b = m->b;
    LLVMTypeRef t = LLVMTypeOf(args[0]);
    LLVMValueRef r = ic__gen_intrinsic(m->g, name, &t, 1, args, n);
    m->g->b = save;
    return r;
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
static LLVMValueRef copysign_(M *m, LLVMValueRef mag, LLVMValueRef sgn) { return bin(m, "llvm.copysign", mag, sgn); }

/* Horner: c[0] * x^(n-1) + ... + c[n-1] */
static LLVMValueRef poly(M *m, LLVMValueRef x, const double *c, int n)
{
    LLVMValueRef p = K(m, c[0]);
    for (int i = 1; i < n; i++)
        p = fma3(m, p, x, K(m, c[i]));
    return p;
}

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
    return flt(m, LLVMBuildAdd(m->b, bits(m, y), pow2_bits(m, t), ""));
}

/* e^r - 1 for the reduced r as q, with s = 2^n, so that e^x - 1 = s q + (s - 1): relative
 * accuracy near 0 for erf and tanh. x in [-22, 0]. */
static LLVMValueRef expm1_parts(M *m, LLVMValueRef x, LLVMValueRef *s)
{
    LLVMValueRef t, r = reduce_ln2(m, x, &t, SHIFTER + 127, false);
    *s = flt(m, pow2_bits(m, t)); /* the shifter's low bits hold the bias: (n + 127) << 23 */
    return fma3(m, poly(m, r, EXP_P, 5), mul(m, r, r), r);
}

/* a / b to ~0.5 ulp without a divider: the target's reciprocal estimate of b (fdiv arcp ninf;
 * AVX-512: VRCP14PS and a Newton step, 3 instructions instead of a VDIVPS that blocks the
 * FMA port for 10 cycles per vector), then one correction of the quotient with an exact fma
 * residual. Callers guarantee finite a, b and a / b (ninf); on targets without an estimate
 * the fdiv stays exact and the correction is harmless. */
static LLVMValueRef fast_div(M *m, LLVMValueRef a, LLVMValueRef b)
{
    LLVMValueRef x0 = fdiv(m, K(m, 1.0), b);
    if (LLVMIsAInstruction(x0))
        LLVMSetFastMathFlags(x0, LLVMFastMathAllowReciprocal | LLVMFastMathNoInfs);
    LLVMValueRef q0 = mul(m, a, x0);
    LLVMValueRef res = fma3(m, LLVMBuildFNeg(m->b, b, ""), q0, a);
    return fma3(m, res, x0, q0);
}

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
    e = LLVMBuildSub(b, e, LLVMBuildZExt(b, small, m->g->t_i32, ""), "");
    LLVMValueRef f = sub(m, sel(m, small, add(m, mm, mm), mm), K(m, 1.0));
    LLVMValueRef ef = LLVMBuildSIToFP(b, e, m->g->t_f32, "");
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
    LLVMValueRef q = LLVMBuildFPToSI(b, jc, m->g->t_i32, "");
    if (want_cos)
        q = LLVMBuildAdd(b, q, KI(m, 1), "");
    LLVMValueRef z = mul(m, r, r);
    LLVMValueRef s = fma3(m, mul(m, z, r), poly(m, z, S, 3), r);
    LLVMValueRef cc = fma3(m, mul(m, z, z), poly(m, z, C, 3), fma3(m, z, K(m, -0.5), K(m, 1.0)));
    LLVMValueRef odd = LLVMBuildTrunc(b, q, m->g->t_i1, "");
    LLVMValueRef neg = LLVMBuildTrunc(b, LLVMBuildLShr(b, q, KI(m, 1), ""), m->g->t_i1, "");
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
    return copysign_(m, fast_div(m, num, den), x);
}

/* erf|x| = 1 - erfc|x| = -expm1(R) with R = log erfc|x| = |x| (C0 + |x| S(|x|)), S a degree-6
 * fit on [0, 3.92] weighted for erf's relative error (0.63 ulp; beyond 3.92 erf rounds to 1,
 * so |x| is clamped). One polynomial, one expm1, no division, no second branch: ~2.3 ulp
 * everywhere, relative near 0 (C0 = -2/sqrt(pi) in two parts). Against the previous
 * Abramowitz-Stegun form (5.4 ulp, a VDIVPS, two branches), GELU's loop went from 83 to 44
 * instructions per vector. */
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
    LLVMValueRef y = fast_div(m, K(m, 1.0), add(m, K(m, 1.0), e));
    return sel(m, fcmp(m, LLVMRealOGT, t, K(m, -EXP_LO)), K(m, 0.0), y);
}

/* pow(x, y) = e^{y log|x|}, with C99/PyTorch special cases: y == 0 or x == 1 give 1,
 * a negative x needs an integer y (sign from its parity), else NaN. */
static LLVMValueRef m_pow(M *m, LLVMValueRef x, LLVMValueRef y)
{
    LLVMValueRef ax = un(m, "llvm.fabs", x);
    LLVMValueRef r = m_exp(m, mul(m, y, m_log(m, ax)));
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

static const char *math_name(ic_lop op)
{
    switch (op) {
    case IC_L_EXP: return "ic.exp.f32";
    case IC_L_LOG: return "ic.log.f32";
    case IC_L_SIN: return "ic.sin.f32";
    case IC_L_COS: return "ic.cos.f32";
    case IC_L_TANH: return "ic.tanh.f32";
    case IC_L_ERF: return "ic.erf.f32";
    case IC_L_SIGMOID: return "ic.sigmoid.f32";
    case IC_L_POW: return "ic.pow.f32";
    default: return NULL;
    }
}

/* The always-inline f32 function for op (exp for x <= 0 with le0), created on first use in
 * the module. */
static LLVMValueRef f32_fn(ic__cg *g, ic_lop op, bool le0, LLVMTypeRef *fty)
{
    const char *name = le0 ? "ic.exp_le0.f32" : math_name(op);
    int n = op == IC_L_POW ? 2 : 1;
    LLVMTypeRef ps[2] = { g->t_f32, g->t_f32 };
    *fty = LLVMFunctionType(g->t_f32, ps, (unsigned)n, 0);
    LLVMValueRef fn = LLVMGetNamedFunction(g->mod, name);
    if (fn)
        return fn;
    fn = LLVMAddFunction(g->mod, name, *fty);
    LLVMSetLinkage(fn, LLVMInternalLinkage);
    unsigned ai = LLVMGetEnumAttributeKindForName("alwaysinline", 12);
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(g->ctx, ai, 0));
    M m = { g, LLVMCreateBuilderInContext(g->ctx) };
    LLVMPositionBuilderAtEnd(m.b, LLVMAppendBasicBlockInContext(g->ctx, fn, "entry"));
    LLVMValueRef x = LLVMGetParam(fn, 0), r;
    switch (op) {
    case IC_L_EXP: r = le0 ? m_exp_le0(&m, x) : m_exp(&m, x); break;
    case IC_L_LOG: r = m_log(&m, x); break;
    case IC_L_SIN: r = m_sincos(&m, x, false); break;
    case IC_L_COS: r = m_sincos(&m, x, true); break;
    case IC_L_TANH: r = m_tanh(&m, x); break;
    case IC_L_ERF: r = m_erf(&m, x); break;
    case IC_L_SIGMOID: r = m_sigmoid(&m, x); break;
    default: r = m_pow(&m, x, LLVMGetParam(fn, 1)); break;
    }
    LLVMBuildRet(m.b, r);
    LLVMDisposeBuilder(m.b);
    return fn;
}

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
    LLVMTypeRef fty;
    LLVMValueRef fn = f32_fn(g, op, false, &fty);
    LLVMValueRef a[2] = { x, y };
    return LLVMBuildCall2(g->b, fty, fn, a, op == IC_L_POW ? 2 : 1, "");
}

LLVMValueRef ic__gen_exp_le0(ic__cg *g, ic_dtype t, LLVMValueRef x)
{
    if (t == IC_F64)
        return f64_call(g, IC_L_EXP, x, NULL);
    LLVMTypeRef fty;
    LLVMValueRef fn = f32_fn(g, IC_L_EXP, true, &fty);
    return LLVMBuildCall2(g->b, fty, fn, &x, 1, "");
}
