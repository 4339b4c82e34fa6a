/* math-impl.h - the one math library of both backends (math.c): exp log sin cos tanh erf
 * sigmoid pow as internal LLVM functions built in the caller's module, so the CPU (LLVMGen)
 * and the GPU (PTX: NVPTX or the host emulator) compute the same f32 approximations,
 * bit for bit. It lives in LLVMGen because both backends build LLVM IR and PTX sits right of
 * LLVMGen (it may include this header); it needs no generator state, only a module.
 *
 *     ic__math ml = { mod, .exact_div = true };               (the GPU's settings)
 *     LLVMValueRef fn = ic__math_f32_fn(&ml, IC_L_TANH, false);
 *     LLVMValueRef y = ic__math_call(b, fn, x, NULL);
 *
 * f32: branch-free polynomials with FMA (range reduction, 1-3 ulp, bounds asserted by
 * unittests/LLVMGen/test_math_accuracy.c on both backends), always-inline so that the loop
 * vectorizer widens them. f64: the CPU calls libm (math.c, ic__gen_math); targets without
 * libm (the GPU) use ic__math_f64_fn, longer polynomials within 1e-15 relative of libm, not
 * bit-identical to it. */
#ifndef IC_MATH_IMPL_H
#define IC_MATH_IMPL_H

#include <stdbool.h>
#include <llvm-c/Core.h>
#include "graph-impl.h"
#include "ic/lower.h"

/* What differs between targets. Nothing else does: the f32 functions are the same IR. */
typedef struct ic__math {
    LLVMModuleRef mod;  /* the functions are added here, once each (found again by name) */
    bool exact_div;     /* a / b in tanh and sigmoid starts from the correctly rounded 1 / b
                         * (GPU: rcp.rn; the emulator's scalar code rounds the same) instead
                         * of the target's reciprocal estimate (arcp: AVX-512 VRCP14PS and a
                         * Newton step); the corrected quotient is the same but within ~2^-23
                         * ulp of a rounding midpoint (the CPU's own scalar tail is exact too) */
} ic__math;

/* The internal always-inline f32 function "ic.<op>.f32" of op (EXP LOG SIN COS TANH ERF
 * SIGMOID: (float); POW: (float, float)); le0 (EXP only): "ic.exp_le0.f32", exp of an
 * argument <= 0 or NaN (IC_EXP_LE0). NULL for any other op. */
IC_HIDDEN LLVMValueRef ic__math_f32_fn(const ic__math *ml, ic_lop op, bool le0);
/* The internal f64 function "ic.<op>.f64" for targets without libm (same ops). */
IC_HIDDEN LLVMValueRef ic__math_f64_fn(const ic__math *ml, ic_lop op);
/* "ic.ipow.i<n>" (base, exponent) for integer type ty: x ** y by squaring; negative
 * exponents truncate to 0 except for bases 1 and -1. */
IC_HIDDEN LLVMValueRef ic__math_ipow_fn(const ic__math *ml, LLVMTypeRef ty);
/* A call at b of the LLVM intrinsic name overloaded on over[0..nover), declared in mod on
 * first use (both backends' one way to call an intrinsic). */
IC_HIDDEN LLVMValueRef ic__llvm_intrinsic(LLVMModuleRef mod, LLVMBuilderRef b, const char *name,
                                          LLVMTypeRef *over, int nover, LLVMValueRef *args, int nargs);
/* fn(x) or fn(x, y) (y non-NULL) at b. */
IC_HIDDEN LLVMValueRef ic__math_call(LLVMBuilderRef b, LLVMValueRef fn, LLVMValueRef x,
                                     LLVMValueRef y);

#endif
