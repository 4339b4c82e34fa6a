/* llvmgen-impl.h - private structures of the LLVMGen layer: the host target, the module
 * wrapper handed to the JIT, and the generator state shared by gen.c, instr.c and math.c. */
#ifndef IC_LLVMGEN_IMPL_H
#define IC_LLVMGEN_IMPL_H

#include <llvm-c/Core.h>
#include <llvm-c/Orc.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include "graph-impl.h"
#include "ic/llvmgen.h"

struct ic_codegen_target {
    ic_ctx *c;
    char *triple, *cpu, *features;  /* owned (ic__malloc) */
    int vector_bits;
    LLVMTargetRef target;
    LLVMTargetMachineRef tm;        /* optimisation and assembly dumps */
};

/* A fresh target machine for t's host (the JIT's own; the caller owns it). */
IC_HIDDEN LLVMTargetMachineRef ic__codegen_target_machine(const ic_codegen_target *t);
/* Initialises LLVM's native target, asm printer and parser once per process. */
IC_HIDDEN void ic__llvm_init(void);
/* LLVM's message as a context error: "what: message"; disposes msg. Returns code. */
IC_HIDDEN ic_status ic__llvm_error(ic_ctx *c, LLVMErrorRef e, const char *what);

struct ic_llvm_module {
    ic_ctx *c;
    LLVMOrcThreadSafeContextRef tsc; /* owns ctx */
    LLVMContextRef ctx;
    LLVMModuleRef mod;               /* NULL once handed to the JIT */
    const ic_codegen_target *t;      /* borrowed */
    int nkernels;
    char **syms;                     /* [nkernels], owned */
};

/* Hands the module to the caller as a thread-safe module (for LLJIT); m keeps only the
 * kernel symbols. */
IC_HIDDEN LLVMOrcThreadSafeModuleRef ic__llvm_module_take(ic_llvm_module *m);

/* ---- the generator ---- */

#define IC__MAX_KBUFS 256  /* buffers one kernel may touch (function arguments) */

typedef struct ic__cg {
    ic_ctx *c;
    const ic_codegen_target *t;
    LLVMContextRef ctx;
    LLVMModuleRef mod;
    LLVMBuilderRef b;
    LLVMTypeRef t_void, t_i1, t_i8, t_i16, t_i32, t_i64, t_f16, t_f32, t_f64, t_ptr;
    unsigned md_loop;
    /* the kernel being generated */
    const ic_kernel *k;
    const char *sym;
    const ic_buffer *bufs;
    int nbufs;
    const ic_codegen_params *p;
    ic_kernel_mode mode;
    int64_t strip;                        /* COLUMN mode */
    LLVMValueRef fn;                      /* the .range function being filled */
    LLVMBasicBlockRef entry;              /* its entry block: allocas go here */
    LLVMValueRef *bufptr;                 /* [nbufs]: pointer argument, NULL if unused */
    bool *used;                           /* [nbufs]: the kernel loads or stores it */
    LLVMValueRef vars[2 * IC_MAX_RANK];   /* loop variables (i64) at the insert point */
    LLVMValueRef lane;                    /* COLUMN mode: position in the strip (i64) */
    LLVMValueRef **acc, **acc_idx;        /* [stage][instr]: accumulator storage */
    LLVMValueRef *vals;                   /* SSA values of the stage being emitted */
} ic__cg;

IC_HIDDEN LLVMTypeRef ic__gen_type(ic__cg *g, ic_dtype t);      /* in registers */
IC_HIDDEN LLVMTypeRef ic__gen_mem_type(ic__cg *g, ic_dtype t);  /* in memory */
IC_HIDDEN LLVMValueRef ic__gen_const(ic__cg *g, ic_dtype t, ic_scalar s);
IC_HIDDEN LLVMValueRef ic__gen_i64(ic__cg *g, int64_t v);
IC_HIDDEN LLVMValueRef ic__gen_f32(ic__cg *g, double v);
IC_HIDDEN LLVMValueRef ic__gen_intrinsic(ic__cg *g, const char *name, LLVMTypeRef *over,
                                         int nover, LLVMValueRef *args, int nargs);
IC_HIDDEN LLVMValueRef ic__gen_reduce_init(ic__cg *g, ic_red red, ic_dtype t);
IC_HIDDEN const char *ic__lop_name(ic_lop op);
/* Storage for the accumulators of REDUCE instr i of stage s (row: scalar, column: array). */
IC_HIDDEN LLVMValueRef ic__gen_acc_ptr(ic__cg *g, LLVMValueRef slot, LLVMTypeRef ty);
/* Folds v (and idx for ARGMAX) into the accumulator at pv (pi); see instr.c. */
IC_HIDDEN LLVMValueRef ic__gen_combine(ic__cg *g, ic_red red, ic_dtype vt, LLVMValueRef pv,
                                       LLVMValueRef pi, LLVMValueRef v, LLVMValueRef idx);
/* Emits stage s's instructions for one iteration at the builder's position. */
IC_HIDDEN ic_status ic__gen_stage(ic__cg *g, int s);
/* Only the instructions i with need[i] (their operands must be needed too): e.g. the index
 * expression of one load (gemm_emit.c packs an operand whose index is not affine). */
IC_HIDDEN ic_status ic__gen_stage_subset(ic__cg *g, int s, const bool *need);
/* Static validation of a kernel (operand order and types) before any IR is built. */
IC_HIDDEN ic_status ic__gen_check_kernel(ic_ctx *c, const ic_kernel *k, int nbufs,
                                         const ic_buffer *bufs);
/* f32/f64 math: exp log sin cos tanh erf sigmoid pow for type t. */
IC_HIDDEN LLVMValueRef ic__gen_math(ic__cg *g, ic_lop op, ic_dtype t, LLVMValueRef x,
                                    LLVMValueRef y);
/* A loop attribute node: vectorize width/interleave per params (innermost loops). */
IC_HIDDEN LLVMValueRef ic__gen_loop_md(ic__cg *g);

#endif
