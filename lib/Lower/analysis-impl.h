/* analysis-impl.h - loop-IR analyses both code generators use (LLVMGen for the CPU, PTX for
 * the GPU), so that they see the same facts: affine forms of integer values (affine.c) and
 * the contraction a GEMM path generates (contract.c). They live in Lower because they read
 * only loop IR; each backend keeps only its target limits (which kernels its GEMM path takes,
 * how long a fused producer may be, how it plans tiles).
 *
 *     ic__affine f[n];                      (n = the stage's instructions)
 *     ic__affine_stage(&k->stages[0], k->nouter + k->ninner, f);
 *     if (f[off].ok) ... f[off].c0 + sum_v f[off].coef[v] * var_v ...
 *
 *     ic__contract m;
 *     if (ic__contract_match(k, &m)) ... m.op[0].ld, m.op[1].ld: the two LOADs multiplied ...
 */
#ifndef IC_ANALYSIS_IMPL_H
#define IC_ANALYSIS_IMPL_H

#include "graph-impl.h"
#include "ic/lower.h"

#define IC__NVARS (2 * IC_MAX_RANK)   /* loop variables of a kernel: outer, then inner */

/* An integer value of the form c0 + sum coef[v] * (loop variable v), when ok. */
typedef struct ic__affine {
    bool ok;
    int64_t c0;
    int64_t coef[IC__NVARS];
} ic__affine;

/* The form of instruction i of a stage (in) from the forms of the instructions before it
 * (f[0..i-1]); nvars loop variables. VAR, integer CONST, and CAST NEG ADD SUB of affine
 * integers are affine, and MUL when one side is a constant; anything else is not. */
IC_HIDDEN void ic__affine_instr(const ic_linstr *in, int i, int nvars, const ic__affine *f,
                                ic__affine *out);
/* The forms of every instruction of st (f has st->ninstr entries). */
IC_HIDDEN void ic__affine_stage(const ic_stage *st, int nvars, ic__affine *f);
/* f is a constant (no loop variable). */
IC_HIDDEN bool ic__affine_is_const(const ic__affine *f);

#define IC__CONTRACT_MAXCHAIN 32   /* chain entries (instructions and their constants) */

/* One multiplicand of a contraction: the f32 value val, computed from the float LOAD ld (at
 * offset instruction off) through a chain of float pointwise instructions whose other
 * operands are constants (a cast to f32, or a producer Fuse left inline: a cast, a scale). */
typedef struct ic__contract_opnd {
    int val, ld, off;
    int nch, ch[IC__CONTRACT_MAXCHAIN]; /* the chain, constants included, ascending */
    int ninstr;                 /* its instructions (constants not counted) */
    bool xform;                 /* more than the conversion of the loaded dtype to f32 */
    ic_dtype vt;                /* the dtype the value is exact in: the load's, or f16/bf16
                                 * after a cast to it, else F32 */
} ic__contract_opnd;

/* sum_k op[0] * op[1]: stage 0 of a kernel is a REDUCE stage without STORE whose one REDUCE
 * (instruction red) sums in f32 the f32 MUL mul of two multiplicands. */
typedef struct ic__contract {
    int red, mul;
    ic__contract_opnd op[2];    /* MUL's a and b */
} ic__contract;

/* Matches stage 0 of k as a contraction (no check of the loop nest, the later stages or
 * the offsets: the backends' limits). False when it is none. */
IC_HIDDEN bool ic__contract_match(const ic_kernel *k, ic__contract *m);

#endif
