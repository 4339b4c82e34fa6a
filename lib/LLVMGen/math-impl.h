/* math-impl.h - the one math library of both backends (math.c): exp log sin cos tanh erf
 * sigmoid pow as internal LLVM functions built in the caller's module, so the CPU (LLVMGen)
 * and the GPU (PTX: NVPTX or the host emulator) compute the same f32 approximations, bit
 * for bit. It lives in LLVMGen because both backends build LLVM IR and PTX sits right of
 * LLVMGen (it may include this header); it needs no generator state, only a module.
 *
 *     LLVMValueRef fn = ic__math_f32_fn(mod, IC_L_TANH, false);
 *     LLVMValueRef y = ic__math_call(b, fn, x, NULL);
 *
 * f32: branch-free polynomials with FMA (range reduction, 1-3 ulp, bounds asserted by
 * unittests/LLVMGen/test_math_accuracy.c on both backends), always-inline so that the loop
 * vectorizer widens them. Nothing in them depends on the target: they use only operations
 * IEEE 754 defines exactly (no reciprocal or exp2 estimates, no contraction, no flush to
 * zero), so the library takes no parameters but the module; where a target has a faster
 * estimate of the same function it is not used (GPU: ex2.approx, rcp.approx). f64: the CPU
 * calls libm (math.c, ic__gen_math); targets without libm (the GPU) use ic__math_f64_fn,
 * longer polynomials within ~1e-15 relative of libm, not bit-identical to it. */
#ifndef IC_MATH_IMPL_H
#define IC_MATH_IMPL_H

#include <stdbool.h>
#include <llvm-c/Core.h>
#include "graph-impl.h"
#include "ic/lower.h"

/* The internal always-inline f32 function "ic.<op>.f32" of op in mod, made on first use
 * (EXP LOG SIN COS TANH ERF SIGMOID: (float); POW: (float, float)); le0 (EXP only):
 * "ic.exp_le0.f32", exp of an argument <= 0 or NaN (IC_LF_EXP_LE0). NULL for any other op. */
IC_HIDDEN LLVMValueRef ic__math_f32_fn(LLVMModuleRef mod, ic_lop op, bool le0);
/* The internal f64 function "ic.<op>.f64" for targets without libm (same ops). */
IC_HIDDEN LLVMValueRef ic__math_f64_fn(LLVMModuleRef mod, ic_lop op);
/* "ic.ipow.i<n>" (base, exponent) for integer type ty: x ** y by squaring; negative
 * exponents truncate to 0 except for bases 1 and -1. */
IC_HIDDEN LLVMValueRef ic__math_ipow_fn(LLVMModuleRef mod, LLVMTypeRef ty);
/* A call at b of the LLVM intrinsic name overloaded on over[0..nover), declared in mod on
 * first use (both backends' one way to call an intrinsic). */
IC_HIDDEN LLVMValueRef ic__llvm_intrinsic(LLVMModuleRef mod, LLVMBuilderRef b, const char *name,
                                          LLVMTypeRef *over, int nover, LLVMValueRef *args, int nargs);
/* A new builder (the caller disposes it) at the top of block entry, so that the allocas it
 * makes dominate every use and mem2reg promotes them. */
IC_HIDDEN LLVMBuilderRef ic__entry_builder(LLVMContextRef ctx, LLVMBasicBlockRef entry);
/* fn(x) or fn(x, y) (y non-NULL) at b. */
IC_HIDDEN LLVMValueRef ic__math_call(LLVMBuilderRef b, LLVMValueRef fn, LLVMValueRef x,
                                     LLVMValueRef y);

#endif
