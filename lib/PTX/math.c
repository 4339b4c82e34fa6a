/* math.c - the GPU's entry to the math library (lib/LLVMGen/math.c, math-impl.h): f32 exp log
 * sin cos tanh erf sigmoid pow are the CPU's functions, bit for bit; f64 the library's
 * polynomials for targets without libm (the CPU calls libm: f64 results agree to ~1e-15
 * relative, not bit for bit); integer pow the shared loop. rsqrt is the one GPU-specific
 * path: f64 by rsqrt.approx and Newton steps, f32 1 / sqrt (correctly rounded, as the CPU). */
#include <math.h>
#include <string.h>
#include "ptx-impl.h"
#include "math-impl.h"

static LLVMValueRef K(ic__pg *G, LLVMTypeRef t, double v) { return LLVMConstReal(t, v); }

static LLVMValueRef fma3(ic__pg *G, LLVMTypeRef t, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c)
{
    LLVMValueRef x[3] = { a, b, c };
    return ic__pg_call(G, "llvm.fma", &t, 1, x, 3);
}

/* f64 rsqrt: sqrt.rn.f64 and rcp.rn.f64 are long software sequences (layer_norm computes one
 * per thread); rsqrt.approx.f64 refined by two Newton steps is within a few ulp. The approx
 * result stands for 0, inf, negatives and NaN (inf, 0, NaN, NaN), where a Newton step would
 * give NaN. f32 and the emulator: 1 / sqrt. */
static LLVMValueRef rsqrt(ic__pg *G, ic_dtype t, LLVMValueRef x)
{
    LLVMBuilderRef b = G->b;
    LLVMTypeRef ty = ic__pg_type(G, t);
    if (t != IC_F64 || G->emu)
        return LLVMBuildFDiv(b, K(G, ty, 1.0), ic__pg_call(G, "llvm.sqrt", &ty, 1, &x, 1), "");
    LLVMValueRef y0 = ic__pg_call(G, "llvm.nvvm.rsqrt.approx.d", NULL, 0, &x, 1), y = y0;
    for (int it = 0; it < 2; it++) {
        LLVMValueRef r = fma3(G, ty, LLVMBuildFNeg(b, LLVMBuildFMul(b, x, y, ""), ""), y, K(G, ty, 1.0)); /* 1 - x y^2 */
        y = fma3(G, ty, LLVMBuildFMul(b, y, K(G, ty, 0.5), ""), r, y);
    }
    LLVMValueRef ok = LLVMBuildAnd(b, LLVMBuildFCmp(b, LLVMRealOGT, x, K(G, ty, 0.0), ""),
                                   LLVMBuildFCmp(b, LLVMRealOLT, x, K(G, ty, INFINITY), ""), "");
    return LLVMBuildSelect(b, ok, y, y0, "");
}

static LLVMValueRef call(ic__pg *G, LLVMValueRef fn, LLVMValueRef x, LLVMValueRef y)
{
    IC_ASSERT(fn);
    unsigned nu = LLVMGetEnumAttributeKindForName("nounwind", 8);
    LLVMAddAttributeAtIndex(fn, (unsigned)LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(G->ctx, nu, 0));
    return ic__math_call(G->b, fn, x, y);
}

LLVMValueRef ic__pmath(ic__pg *G, ic_lop op, ic_dtype t, LLVMValueRef x, LLVMValueRef y)
{
    if (op == IC_L_RSQRT)
        return rsqrt(G, t, x);
    if (t == IC_I32 || t == IC_I64)
        return call(G, ic__math_ipow_fn(G->mod, ic__pg_type(G, t)), x, y);
    LLVMValueRef fn = t == IC_F64 ? ic__math_f64_fn(G->mod, op) : ic__math_f32_fn(G->mod, op, false);
    return call(G, fn, x, op == IC_L_POW ? y : NULL);
}

LLVMValueRef ic__pmath_exp_le0(ic__pg *G, ic_dtype t, LLVMValueRef x)
{
    if (t == IC_F64)
        return ic__pmath(G, IC_L_EXP, t, x, NULL);
    return call(G, ic__math_f32_fn(G->mod, IC_L_EXP, true), x, NULL);
}
