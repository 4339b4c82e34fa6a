/* math.c - exp log sin cos tanh erf sigmoid pow. In f32 they are branch-free polynomials
 * (Cephes-style range reduction, ~1-2 ulp) emitted as small always-inline functions, so the
 * loop vectorizer turns them into vector code like any other arithmetic; f64 calls libm
 * through LLVM intrinsics or declarations (exact, scalar). */
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
/* x clamped to [lo, hi]; NaN becomes lo. A compare and a select each, which x86 turns into
 * one MAXPS/MINPS (minnum/maxnum would add NaN fix-ups); callers restore NaN at the end. */
static LLVMValueRef clamp(M *m, LLVMValueRef x, double lo, double hi)
{
    x = sel(m, fcmp(m, LLVMRealOGT, x, K(m, lo)), x, K(m, lo));
    return sel(m, fcmp(m, LLVMRealOLT, x, K(m, hi)), x, K(m, hi));
}
static LLVMValueRef copysign_(M *m, LLVMValueRef mag, LLVMValueRef sgn) { return bin(m, "llvm.copysign", mag, sgn); }

/* Horner: c[0] * x^(n-1) + ... + c[n-1] */
static LLVMValueRef poly(M *m, LLVMValueRef x, const double *c, int n)
{
    LLVMValueRef p = K(m, c[0]);
    for (int i = 1; i < n; i++)
        p = fma3(m, p, x, K(m, c[i]));
    return p;
}

/* 2^n for integer n in [-252, 254] (i32), as y * 2^n split in two steps to reach the
 * subnormals. */
static LLVMValueRef ldexp_(M *m, LLVMValueRef y, LLVMValueRef n)
{
    LLVMValueRef h = LLVMBuildAShr(m->b, n, KI(m, 1), "");
    LLVMValueRef r = LLVMBuildSub(m->b, n, h, "");
    LLVMValueRef s1 = flt(m, LLVMBuildShl(m->b, LLVMBuildAdd(m->b, h, KI(m, 127), ""), KI(m, 23), ""));
    LLVMValueRef s2 = flt(m, LLVMBuildShl(m->b, LLVMBuildAdd(m->b, r, KI(m, 127), ""), KI(m, 23), ""));
    return mul(m, mul(m, y, s1), s2);
}

/* exp(x): x = n ln2 + r, |r| <= ln2/2, e^r by a degree-6 polynomial, times 2^n.
 * Results below FLT_MIN (x < ln FLT_MIN = -87.3365) are flushed to 0 (an absolute error below
 * 1.2e-38) and x is clamped above that, so no lane ever computes a subnormal: on x86 every
 * vector instruction with a subnormal result or operand takes a microcode assist (~100
 * cycles), which made softmax rows with large logit gaps and erf (GELU) of |x| > 9.3 run
 * 5-10x slower. */
static LLVMValueRef m_exp(M *m, LLVMValueRef x)
{
    static const double P[] = { 1.9875691500E-4, 1.3981999507E-3, 8.3334519073E-3,
                                4.1665795894E-2, 1.6666665459E-1, 5.0000001201E-1 };
    LLVMValueRef xc = clamp(m, x, -87.33654022216797, 89.0);
    LLVMValueRef n = un(m, "llvm.rint", mul(m, xc, K(m, 1.44269504088896341)));
    LLVMValueRef r = fma3(m, n, K(m, -0.693359375), xc);
    r = fma3(m, n, K(m, 2.12194440e-4), r);
    LLVMValueRef p = poly(m, r, P, 6);
    LLVMValueRef r2 = mul(m, r, r);
    LLVMValueRef y = add(m, fma3(m, p, r2, r), K(m, 1.0));
    LLVMValueRef ni = LLVMBuildFPToSI(m->b, n, m->g->t_i32, "");
    y = ldexp_(m, y, ni);
    y = sel(m, fcmp(m, LLVMRealOGT, x, K(m, 88.72283935546875)), K(m, INFINITY), y);
    y = sel(m, fcmp(m, LLVMRealOLT, x, K(m, -87.33654022216797)), K(m, 0.0), y);
    return sel(m, isnan_(m, x), x, y);
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
 * picks +-sin(r) or +-cos(r). Accurate while j fits in f32 (|x| < ~1e7). */
static LLVMValueRef m_sincos(M *m, LLVMValueRef x, bool want_cos)
{
    static const double S[] = { -1.9515295891E-4, 8.3321608736E-3, -1.6666654611E-1 };
    static const double C[] = { 2.443315711809948E-005, -1.388731625493765E-003,
                                4.166664568298827E-002 };
    LLVMBuilderRef b = m->b;
    LLVMValueRef j = un(m, "llvm.rint", mul(m, x, K(m, 0.636619772367581343)));
    LLVMValueRef r = fma3(m, j, K(m, -1.5707963705062866), x);
    r = fma3(m, j, K(m, 4.371138828673793e-08), r);
    r = fma3(m, j, K(m, 1.7151245100058819e-15), r);
    LLVMValueRef jc = clamp(m, j, -1073741824.0, 1073741824.0);
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
    LLVMValueRef fin = fcmp(m, LLVMRealOLT, un(m, "llvm.fabs", x), K(m, INFINITY));
    return sel(m, fin, v, K(m, NAN));
}

/* tanh: an odd polynomial below 0.625, 1 - 2 / (e^{2|x|} + 1) above. */
static LLVMValueRef m_tanh(M *m, LLVMValueRef x)
{
    static const double P[] = { -5.70498872745E-3, 2.06390887954E-2, -5.37397155531E-2,
                                1.33314422036E-1, -3.33332819422E-1 };
    LLVMValueRef a = un(m, "llvm.fabs", x);
    LLVMValueRef z = mul(m, x, x);
    LLVMValueRef small = fma3(m, mul(m, poly(m, z, P, 5), z), x, x);
    LLVMValueRef e = m_exp(m, add(m, a, a));
    LLVMValueRef big = sub(m, K(m, 1.0), fdiv(m, K(m, 2.0), add(m, e, K(m, 1.0))));
    big = copysign_(m, big, x);
    return sel(m, fcmp(m, LLVMRealOLT, a, K(m, 0.625)), small, big);
}

/* erf: a Taylor polynomial below 0.5 (relative accuracy near 0), above it
 * 1 - t P(t) e^{-x^2} with t = 1 / (1 + p|x|) (Abramowitz-Stegun 7.1.26, |err| < 1.5e-7). */
static LLVMValueRef m_erf(M *m, LLVMValueRef x)
{
    static const double T[] = { -1.0 / 1320, 1.0 / 216, -1.0 / 42, 1.0 / 10, -1.0 / 3, 1.0 };
    static const double A[] = { 1.061405429, -1.453152027, 1.421413741, -0.284496736,
                                0.254829592, 0.0 };
    LLVMValueRef a = un(m, "llvm.fabs", x);
    LLVMValueRef z = mul(m, x, x);
    LLVMValueRef small = mul(m, mul(m, x, K(m, 1.12837916709551257)), poly(m, z, T, 6));
    LLVMValueRef t = fdiv(m, K(m, 1.0), fma3(m, a, K(m, 0.3275911), K(m, 1.0)));
    LLVMValueRef p = poly(m, t, A, 6);
    LLVMValueRef big = sub(m, K(m, 1.0), mul(m, p, m_exp(m, LLVMBuildFNeg(m->b, z, ""))));
    big = copysign_(m, big, x);
    LLVMValueRef r = sel(m, fcmp(m, LLVMRealOLT, a, K(m, 0.5)), small, big);
    return sel(m, isnan_(m, x), x, r);
}

static LLVMValueRef m_sigmoid(M *m, LLVMValueRef x)
{
    return fdiv(m, K(m, 1.0), add(m, K(m, 1.0), m_exp(m, LLVMBuildFNeg(m->b, x, ""))));
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

/* The always-inline f32 function for op, created on first use in the module. */
static LLVMValueRef f32_fn(ic__cg *g, ic_lop op, LLVMTypeRef *fty)
{
    const char *name = math_name(op);
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
    case IC_L_EXP: r = m_exp(&m, x); break;
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
    LLVMValueRef fn = f32_fn(g, op, &fty);
    LLVMValueRef a[2] = { x, y };
    return LLVMBuildCall2(g->b, fty, fn, a, op == IC_L_POW ? 2 : 1, "");
}
