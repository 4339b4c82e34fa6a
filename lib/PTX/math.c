/* math.c - exp log sin cos tanh erf sigmoid pow rsqrt for the GPU without libdevice, each an
 * internal function of the module (made once, inlined by LLVM). f32: exp through
 * ex2.approx (relative error below 5e-6); log by exponent split and
 * a short atanh series (~1 ulp); sin/cos reduced by pi/2 in f64 then Taylor polynomials; tanh
 * by a series near 0 and 1 - 2/(e^2x + 1) beyond; erf by its series below 1 and a rational
 * erfc approximation (relative error 1.1e-7) above. f64 uses the same schemes with longer
 * polynomials. Results are well inside the spec's tolerances (f32 rtol 1e-4, f64 1e-7). */
#include <math.h>
#include <string.h>
#include "ptx-impl.h"

typedef struct {
    ic__pg *G;
    LLVMBuilderRef b;
    LLVMTypeRef t, ti;   /* float type and the integer type of its bits */
    bool d;              /* f64 */
} M;

static LLVMValueRef K(M *m, double v) { return LLVMConstReal(m->t, v); }
static LLVMValueRef KI(M *m, int64_t v) { return LLVMConstInt(m->ti, (unsigned long long)v, 1); }
static LLVMValueRef add(M *m, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFAdd(m->b, a, b, ""); }
static LLVMValueRef sub(M *m, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFSub(m->b, a, b, ""); }
static LLVMValueRef mul(M *m, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFMul(m->b, a, b, ""); }
static LLVMValueRef fdiv(M *m, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFDiv(m->b, a, b, ""); }
static LLVMValueRef sel(M *m, LLVMValueRef c, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildSelect(m->b, c, a, b, ""); }
static LLVMValueRef cmp(M *m, LLVMRealPredicate p, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFCmp(m->b, p, a, b, ""); }
static LLVMValueRef isnan_(M *m, LLVMValueRef x) { return cmp(m, LLVMRealUNO, x, x); }
static LLVMValueRef bits(M *m, LLVMValueRef f) { return LLVMBuildBitCast(m->b, f, m->ti, ""); }
static LLVMValueRef flt(M *m, LLVMValueRef i) { return LLVMBuildBitCast(m->b, i, m->t, ""); }

static LLVMValueRef call(M *m, const char *name, LLVMTypeRef *over, int nover, LLVMValueRef *args,
                         int nargs)
{
    LLVMBuilderRef save = m->G->b;
    m->G->b = m->b;
    LLVMValueRef r = ic__pg_call(m->G, name, over, nover, args, nargs);
    m->G->b = save;
    return r;
}
static LLVMValueRef un(M *m, const char *name, LLVMValueRef x) { return call(m, name, &m->t, 1, &x, 1); }
static LLVMValueRef bin(M *m, const char *name, LLVMValueRef x, LLVMValueRef y)
{
    LLVMValueRef a[2] = { x, y };
    return call(m, name, &m->t, 1, a, 2);
}
static LLVMValueRef fma3(M *m, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c)
{
    LLVMValueRef x[3] = { a, b, c };
    return call(m, "llvm.fma", &m->t, 1, x, 3);
}
static LLVMValueRef to_int(M *m, LLVMValueRef x, LLVMTypeRef it)
{
    LLVMTypeRef ov[2] = { it, m->t };
    return call(m, "llvm.fptosi.sat", ov, 2, &x, 1);
}

/* Horner: c[0] x^(n-1) + ... + c[n-1] */
static LLVMValueRef poly(M *m, LLVMValueRef x, const double *c, int n)
{
    LLVMValueRef p = K(m, c[0]);
    for (int i = 1; i < n; i++)
        p = fma3(m, p, x, K(m, c[i]));
    return p;
}

/* y * 2^n for n (ti) in [-2*bias-ish, ...], in two steps so subnormals and overflow come out. */
static LLVMValueRef ldexp_(M *m, LLVMValueRef y, LLVMValueRef n)
{
    int shift = m->d ? 52 : 23, bias = m->d ? 1023 : 127;
    LLVMValueRef h = LLVMBuildAShr(m->b, n, KI(m, 1), "");
    LLVMValueRef r = LLVMBuildSub(m->b, n, h, "");
    LLVMValueRef s1 = flt(m, LLVMBuildShl(m->b, LLVMBuildAdd(m->b, h, KI(m, bias), ""), KI(m, shift), ""));
    LLVMValueRef s2 = flt(m, LLVMBuildShl(m->b, LLVMBuildAdd(m->b, r, KI(m, bias), ""), KI(m, shift), ""));
    return mul(m, mul(m, y, s1), s2);
}

/* f32: 2^(x log2 e) by the hardware (ex2.approx.ftz, ~2 ulp); rounding x log2 e costs
 * |x| 6e-8 relative, at most 5e-6 where the result is finite and normal: well inside rtol
 * 1e-4, and two instructions, so exp-heavy kernels (softmax) stay memory-bound. Results
 * below 2^-126 flush to 0 (an absolute error under 1.2e-38). f64: x = k ln2 + r, |r| <=
 * ln2/2, e^r by its Taylor series to r^13, times 2^k. */
static LLVMValueRef m_exp(M *m, LLVMValueRef x)
{
    if (!m->d) {
        LLVMValueRef t = mul(m, x, K(m, 1.4426950408889634));
        if (m->G->emu) {
            LLVMBuilderRef save = m->G->b;
            m->G->b = m->b;
            LLVMValueRef r = ic__pg_ext(m->G, "ic__emu_ex2", m->t, &m->t, 1, &t);
            m->G->b = save;
            return r;
        }
        return call(m, "llvm.nvvm.ex2.approx.ftz.f", NULL, 0, &t, 1);
    }
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

static LLVMValueRef m_log(M *m, LLVMValueRef x)
{
    LLVMBuilderRef b = m->b;
    int shift = m->d ? 52 : 23, bias = m->d ? 1023 : 127;
    int64_t mant = m->d ? 0xfffffffffffffLL : 0x7fffff, one = m->d ? 0x3ff0000000000000LL : 0x3f800000;
    LLVMValueRef sub_n = cmp(m, LLVMRealOLT, x, K(m, m->d ? 0x1p-1022 : 0x1p-126));
    LLVMValueRef xs = sel(m, sub_n, mul(m, x, K(m, m->d ? 0x1p54 : 0x1p23)), x);
    LLVMValueRef eadj = sel(m, sub_n, KI(m, m->d ? -54 : -23), KI(m, 0));
    LLVMValueRef u = bits(m, xs);
    LLVMValueRef e = LLVMBuildSub(b, LLVMBuildAnd(b, LLVMBuildLShr(b, u, KI(m, shift), ""), KI(m, m->d ? 0x7ff : 0xff), ""),
                                  KI(m, bias), "");
    e = LLVMBuildAdd(b, e, eadj, "");
    LLVMValueRef mm = flt(m, LLVMBuildOr(b, LLVMBuildAnd(b, u, KI(m, mant), ""), KI(m, one), ""));
    LLVMValueRef big = cmp(m, LLVMRealOGT, mm, K(m, 1.4142135623730951));
    mm = sel(m, big, mul(m, mm, K(m, 0.5)), mm);
    e = sel(m, big, LLVMBuildAdd(b, e, KI(m, 1), ""), e);
    LLVMValueRef f = sub(m, mm, K(m, 1.0));
    LLVMValueRef s = fdiv(m, f, add(m, f, K(m, 2.0)));
    LLVMValueRef z = mul(m, s, s);
    double c[10];
    int n = m->d ? 10 : 4;
    for (int i = 0; i < n; i++) /* 2/(2k+1), k = n..1 */
        c[i] = 2.0 / (2 * (n - i) + 1);
    LLVMValueRef R = mul(m, z, poly(m, z, c, n));
    LLVMValueRef hfsq = mul(m, K(m, 0.5), mul(m, f, f));
    LLVMValueRef l = sub(m, f, sub(m, hfsq, mul(m, s, add(m, hfsq, R))));
    LLVMValueRef ef = LLVMBuildSIToFP(b, e, m->t, "");
    double ln2_hi = m->d ? 6.93147180369123816490e-01 : 0.693145751953125;
    double ln2_lo = m->d ? 1.90821492927058770002e-10 : 1.428606765330187e-06;
    LLVMValueRef res = fma3(m, ef, K(m, ln2_hi), fma3(m, ef, K(m, ln2_lo), l));
    res = sel(m, cmp(m, LLVMRealOEQ, x, K(m, INFINITY)), x, res);
    res = sel(m, cmp(m, LLVMRealOEQ, x, K(m, 0.0)), K(m, -INFINITY), res);
    return sel(m, cmp(m, LLVMRealULT, x, K(m, 0.0)), K(m, NAN), res);
}

/* sin or cos: x = k pi/2 + r (in f64), then the quadrant picks +-sin(r) or +-cos(r). */
static LLVMValueRef m_sincos(M *m, LLVMValueRef x, bool want_cos)
{
    ic__pg *G = m->G;
    LLVMBuilderRef b = m->b;
    M md = { G, b, G->t_f64, G->t_i64, true };
    LLVMValueRef xd = m->d ? x : LLVMBuildFPExt(b, x, G->t_f64, "");
    LLVMValueRef k = un(&md, "llvm.rint", mul(&md, xd, K(&md, 0.6366197723675814)));
    LLVMValueRef nk = LLVMBuildFNeg(b, k, "");
    LLVMValueRef r = fma3(&md, nk, K(&md, 1.5707963267948966), xd);
    r = fma3(&md, nk, K(&md, 6.123233995736766e-17), r);
    r = fma3(&md, nk, K(&md, -1.4973849048591698e-33), r);
    LLVMValueRef rf = m->d ? r : LLVMBuildFPTrunc(b, r, G->t_f32, "");
    LLVMValueRef q = LLVMBuildAnd(b, to_int(&md, k, G->t_i32), LLVMConstInt(G->t_i32, 3, 0), "");
    LLVMValueRef z = mul(m, rf, rf);
    /* Taylor: sin r = r + r z (-1/3! + z (1/5! ...)), cos r = 1 + z (-1/2! + z (1/4! ...)) */
    double sc[8], cc[9];
    int ns = m->d ? 8 : 4, nc = m->d ? 9 : 5;
    for (int i = 0; i < ns; i++) { /* (-1)^n/(2n+1)!, n = ns..1 */
        int nn = ns - i;
        double f = 1;
        for (int t = 2; t <= 2 * nn + 1; t++)
            f *= t;
        sc[i] = (nn % 2 ? -1.0 : 1.0) / f;
    }
    for (int i = 0; i < nc; i++) { /* (-1)^n/(2n)!, n = nc..1 */
        int nn = nc - i;
        double f = 1;
        for (int t = 2; t <= 2 * nn; t++)
            f *= t;
        cc[i] = (nn % 2 ? -1.0 : 1.0) / f;
    }
    LLVMValueRef s = fma3(m, mul(m, rf, z), poly(m, z, sc, ns), rf);
    LLVMValueRef co = fma3(m, z, poly(m, z, cc, nc), K(m, 1.0));
    LLVMValueRef q1 = LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildAnd(b, q, LLVMConstInt(G->t_i32, 1, 0), ""),
                                    LLVMConstInt(G->t_i32, 1, 0), "");
    LLVMValueRef q2 = LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildAnd(b, q, LLVMConstInt(G->t_i32, 2, 0), ""),
                                    LLVMConstInt(G->t_i32, 2, 0), "");
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

static LLVMValueRef m_tanh(M *m, LLVMValueRef x)
{
    LLVMValueRef a = un(m, "llvm.fabs", x);
    LLVMValueRef small;
    if (!m->d) { /* Taylor to x^17 (|x| < 0.55: next term < 1 ulp) */
        static const double c[] = { 6404582.0 / 10854718875.0, -929569.0 / 638512875.0,
                                    21844.0 / 6081075.0, -1382.0 / 155925.0, 62.0 / 2835.0,
                                    -17.0 / 315.0, 2.0 / 15.0, -1.0 / 3.0 };
        LLVMValueRef z = mul(m, x, x);
        small = fma3(m, mul(m, x, z), poly(m, z, c, 8), x);
    } else { /* expm1(2x) / (expm1(2x) + 2), expm1 by its series (|2x| < 1.1) */
        LLVMValueRef y = add(m, x, x);
        double c[20];
        double f = 1;
        for (int i = 0; i < 20; i++) { /* 1/(n+1)!, n = 19..0 */
            f *= i + 1;
            c[19 - i] = 1.0 / f;
        }
        LLVMValueRef e = mul(m, y, poly(m, y, c, 20));
        small = fdiv(m, e, add(m, e, K(m, 2.0)));
    }
    LLVMValueRef e2 = m_exp(m, add(m, a, a));
    LLVMValueRef big = sub(m, K(m, 1.0), fdiv(m, K(m, 2.0), add(m, e2, K(m, 1.0))));
    big = bin(m, "llvm.copysign", big, x);
    return sel(m, cmp(m, LLVMRealOLT, a, K(m, 0.55)), small, big);
}

static LLVMValueRef m_erf(M *m, LLVMValueRef x)
{
    LLVMValueRef a = un(m, "llvm.fabs", x);
    /* |x| < 1: 2/sqrt(pi) sum (-1)^n x^(2n+1) / (n! (2n+1)) */
    int n = m->d ? 18 : 11;
    double c[18];
    double fact = 1;
    for (int k = 0; k < n; k++) {
        if (k)
            fact *= k;
        c[n - 1 - k] = 1.1283791670955126 * (k % 2 ? -1.0 : 1.0) / (fact * (2 * k + 1));
    }
    LLVMValueRef z = mul(m, x, x);
    LLVMValueRef small = mul(m, x, poly(m, z, c, n));
    /* |x| >= 1: erfc(a) = t exp(-a^2 - 1.26551223 + t P(t)), t = 1/(1 + a/2) */
    static const double P[] = { 0.17087277, -0.82215223, 1.48851587, -1.13520398, 0.27886807,
                                -0.18628806, 0.09678418, 0.37409196, 1.00002368, -1.26551223 };
    LLVMValueRef t = fdiv(m, K(m, 1.0), fma3(m, a, K(m, 0.5), K(m, 1.0)));
    LLVMValueRef arg = sub(m, mul(m, t, poly(m, t, P, 9)), K(m, 1.26551223));
    arg = sub(m, arg, mul(m, a, a));
    LLVMValueRef erfc = mul(m, t, m_exp(m, arg));
    LLVMValueRef big = bin(m, "llvm.copysign", sub(m, K(m, 1.0), erfc), x);
    return sel(m, cmp(m, LLVMRealOLT, a, K(m, 1.0)), small, big);
}

static LLVMValueRef m_pow(M *m, LLVMValueRef x, LLVMValueRef y)
{
    LLVMBuilderRef b = m->b;
    LLVMValueRef ax = un(m, "llvm.fabs", x);
    LLVMValueRef r = m_exp(m, mul(m, y, m_log(m, ax)));
    LLVMValueRef yi = cmp(m, LLVMRealOEQ, un(m, "llvm.rint", y), y);
    LLVMValueRef half = un(m, "llvm.floor", mul(m, y, K(m, 0.5)));
    LLVMValueRef odd = LLVMBuildAnd(b, yi, cmp(m, LLVMRealOEQ, sub(m, y, add(m, half, half)), K(m, 1.0)), "");
    LLVMValueRef neg = cmp(m, LLVMRealOLT, x, K(m, 0.0));
    LLVMValueRef rn = sel(m, yi, sel(m, odd, LLVMBuildFNeg(b, r, ""), r), K(m, NAN));
    r = sel(m, neg, rn, r);
    LLVMValueRef one = LLVMBuildOr(b, cmp(m, LLVMRealOEQ, y, K(m, 0.0)), cmp(m, LLVMRealOEQ, x, K(m, 1.0)), "");
    return sel(m, one, K(m, 1.0), r);
}

/* Integer power by squaring (a loop); negative exponents give 0 except for bases 1 and -1. */
static void int_pow_body(ic__pg *G, LLVMValueRef fn, LLVMTypeRef t)
{
    LLVMBuilderRef b = LLVMCreateBuilderInContext(G->ctx);
    LLVMValueRef x = LLVMGetParam(fn, 0), y = LLVMGetParam(fn, 1);
    LLVMValueRef zero = LLVMConstNull(t), one = LLVMConstInt(t, 1, 0), mone = LLVMConstAllOnes(t);
    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(G->ctx, fn, "entry");
    LLVMBasicBlockRef negb = LLVMAppendBasicBlockInContext(G->ctx, fn, "neg");
    LLVMBasicBlockRef head = LLVMAppendBasicBlockInContext(G->ctx, fn, "loop");
    LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(G->ctx, fn, "body");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(G->ctx, fn, "done");
    LLVMPositionBuilderAtEnd(b, entry);
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, y, zero, ""), negb, head);
    LLVMPositionBuilderAtEnd(b, negb);
    LLVMValueRef yodd = LLVMBuildICmp(b, LLVMIntNE, LLVMBuildAnd(b, y, one, ""), zero, "");
    LLVMValueRef m1 = LLVMBuildSelect(b, yodd, mone, one, "");
    LLVMValueRef rv = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, x, one, ""), one,
                                      LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, x, mone, ""), m1, zero, ""), "");
    LLVMBuildRet(b, rv);
    LLVMPositionBuilderAtEnd(b, head);
    LLVMValueRef r = LLVMBuildPhi(b, t, "r"), base = LLVMBuildPhi(b, t, "b"), e = LLVMBuildPhi(b, t, "e");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntEQ, e, zero, ""), done, body);
    LLVMPositionBuilderAtEnd(b, body);
    LLVMValueRef bit = LLVMBuildICmp(b, LLVMIntNE, LLVMBuildAnd(b, e, one, ""), zero, "");
    LLVMValueRef r2 = LLVMBuildSelect(b, bit, LLVMBuildMul(b, r, base, ""), r, "");
    LLVMValueRef b2 = LLVMBuildMul(b, base, base, "");
    LLVMValueRef e2 = LLVMBuildLShr(b, e, one, "");
    LLVMBuildBr(b, head);
    LLVMValueRef rin[2] = { one, r2 }, bin_[2] = { x, b2 }, ein[2] = { y, e2 };
    LLVMBasicBlockRef from[2] = { entry, body };
    LLVMAddIncoming(r, rin, from, 2);
    LLVMAddIncoming(base, bin_, from, 2);
    LLVMAddIncoming(e, ein, from, 2);
    LLVMPositionBuilderAtEnd(b, done);
    LLVMBuildRet(b, r);
    LLVMDisposeBuilder(b);
}

/* f64 rsqrt: sqrt.rn.f64 and rcp.rn.f64 are long software sequences (layer_norm computes one
 * per thread); rsqrt.approx.f64 refined by two Newton steps is within a few ulp. The approx
 * result stands for 0, inf, negatives and NaN (inf, 0, NaN, NaN), where a Newton step would
 * give NaN. f32 and the emulator: 1 / sqrt. */
static LLVMValueRef m_rsqrt(M *m, LLVMValueRef x)
{
    if (!m->d || m->G->emu)
        return fdiv(m, K(m, 1.0), un(m, "llvm.sqrt", x));
    LLVMValueRef y0 = call(m, "llvm.nvvm.rsqrt.approx.d", NULL, 0, &x, 1), y = y0;
    for (int it = 0; it < 2; it++) {
        LLVMValueRef r = fma3(m, LLVMBuildFNeg(m->b, mul(m, x, y), ""), y, K(m, 1.0)); /* 1 - x y^2 */
        y = fma3(m, mul(m, y, K(m, 0.5)), r, y);
    }
    LLVMValueRef ok = LLVMBuildAnd(m->b, cmp(m, LLVMRealOGT, x, K(m, 0.0)),
                                   cmp(m, LLVMRealOLT, x, K(m, INFINITY)), "");
    return sel(m, ok, y, y0);
}

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
    case IC_L_RSQRT: return "rsqrt";
    default: return NULL;
    }
}

LLVMValueRef ic__pmath(ic__pg *G, ic_lop op, ic_dtype t, LLVMValueRef x, LLVMValueRef y)
{
    const char *name = op_name(op);
    IC_ASSERT(name && (unsigned)op < 64);
    int slot = (int)op * 4 + (t == IC_F64 ? 1 : t == IC_I32 ? 2 : t == IC_I64 ? 3 : 0);
    IC_ASSERT(slot < 256);
    LLVMTypeRef ty = ic__pg_type(G, t);
    bool two = op == IC_L_POW;
    LLVMValueRef fn = G->mathfn[slot];
    if (!fn) {
        char fname[64];
        snprintf(fname, sizeof fname, "ic.%s.%s", name, ic_dtype_name(t));
        LLVMTypeRef pt[2] = { ty, ty };
        fn = LLVMAddFunction(G->mod, fname, LLVMFunctionType(ty, pt, two ? 2 : 1, 0));
        LLVMSetLinkage(fn, LLVMInternalLinkage);
        unsigned ai = LLVMGetEnumAttributeKindForName("alwaysinline", 12);
        unsigned nu = LLVMGetEnumAttributeKindForName("nounwind", 8);
        LLVMAddAttributeAtIndex(fn, (unsigned)LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(G->ctx, nu, 0));
        if (t == IC_I32 || t == IC_I64) {
            int_pow_body(G, fn, ty);
        } else {
            if (t == IC_F32)
                LLVMAddAttributeAtIndex(fn, (unsigned)LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(G->ctx, ai, 0));
            M m = { G, LLVMCreateBuilderInContext(G->ctx), ty, t == IC_F64 ? G->t_i64 : G->t_i32, t == IC_F64 };
            LLVMPositionBuilderAtEnd(m.b, LLVMAppendBasicBlockInContext(G->ctx, fn, "entry"));
            LLVMValueRef a = LLVMGetParam(fn, 0), r = NULL;
            switch (op) {
            case IC_L_EXP: r = m_exp(&m, a); break;
            case IC_L_LOG: r = m_log(&m, a); break;
            case IC_L_SIN: r = m_sincos(&m, a, false); break;
            case IC_L_COS: r = m_sincos(&m, a, true); break;
            case IC_L_TANH: r = m_tanh(&m, a); break;
            case IC_L_ERF: r = m_erf(&m, a); break;
            case IC_L_SIGMOID:
                r = fdiv(&m, K(&m, 1.0), add(&m, K(&m, 1.0), m_exp(&m, LLVMBuildFNeg(m.b, a, ""))));
                break;
            case IC_L_POW: r = m_pow(&m, a, LLVMGetParam(fn, 1)); break;
            case IC_L_RSQRT: r = m_rsqrt(&m, a); break;
            default: break;
            }
            LLVMBuildRet(m.b, r);
            LLVMDisposeBuilder(m.b);
        }
        G->mathfn[slot] = fn;
    }
    LLVMValueRef args[2] = { x, y };
    return LLVMBuildCall2(G->b, LLVMGlobalGetValueType(fn), fn, args, two ? 2 : 1, "");
}
