/* llvmgen.h - loop IR (lower.h) -> LLVM IR for the host CPU: vectorised innermost loops,
 * OpenMP-parallel outer loops, the O3 pipeline, and text dumps of the IR and the assembly.
 *
 * Every kernel becomes `void <name>(void *const *bufs)` where bufs[i] is the base pointer of
 * program buffer i. Kernels are generated as clean loop nests (canonical i64 induction
 * variables, accumulators LLVM promotes to registers) that LLVM's loop vectorizer turns into
 * vector code at the host's width; float reductions carry the `reassoc` flag so they get
 * vector accumulators. exp/log/sin/cos/tanh/erf in f32 are branch-free polynomials emitted
 * in IR, so they vectorise too. The outer iteration space is split across threads by
 * __kmpc_fork_call (libomp) unless the kernel is below the serial threshold.
 *
 *     ic_codegen_target *t; ic_llvm_module *m;
 *     ic_codegen_target_create(c, &t);            // host CPU name + features, at run time
 *     ic_llvmgen(c, program, t, NULL, &m);        // NULL: heuristic params for each kernel
 *     ic_llvm_module_optimize(m);                 // default<O3>, vectorizers on
 *     ic_llvm_module_print(stdout, m);            // or ic_llvm_module_print_asm
 *     ic_llvm_module_destroy(m);
 *     ic_codegen_target_destroy(t);
 *
 * This header needs no LLVM headers; the Runtime layer takes the module into its JIT.
 */
#ifndef IC_LLVMGEN_H
#define IC_LLVMGEN_H

#include "ic/lower.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How one kernel is generated: the knobs an autotuner searches. 0 means "the default". */
typedef struct ic_codegen_params {
    int vector_width;          /* lanes of the innermost loop; 0 = host width for 32-bit
                                * elements, 1 = scalar code (no vectorization) */
    int unroll;                /* interleave count of the innermost loop (0 = LLVM decides) */
    int64_t strip;             /* column reductions: columns of the contiguous outer dim
                                * accumulated together while walking the reduced rows */
    int threads;               /* OpenMP team size (0 = the runtime's default) */
    int parallel_depth;        /* 0 = serial; >= 1 = the outer iteration space is split
                                * across threads */
    int64_t serial_threshold;  /* kernels touching fewer elements than this run serially */
    int64_t grain;             /* each thread's share is a multiple of this many iterations */
    int prefer_vector_bits;    /* function attribute prefer-vector-width (0 = host's widest) */
} ic_codegen_params;

/* The host as LLVM sees it: triple, CPU name and features detected at run time. */
typedef struct ic_codegen_target ic_codegen_target;

/* Detects the host (LLVMGetHostCPUName / LLVMGetHostCPUFeatures) and makes a target machine
 * for it. The caller owns *out (ic_codegen_target_destroy). IC_ELLVM if LLVM has no target. */
IC_API ic_status ic_codegen_target_create(ic_ctx *c, ic_codegen_target **out);
IC_API void ic_codegen_target_destroy(ic_codegen_target *t);
IC_API const char *ic_codegen_target_cpu(const ic_codegen_target *t);      /* "sapphirerapids" */
IC_API const char *ic_codegen_target_features(const ic_codegen_target *t); /* "+avx512f,..." */
IC_API const char *ic_codegen_target_triple(const ic_codegen_target *t);
/* Widest native vector register for floats in bits: 512 (AVX-512), 256 (AVX) or 128. */
IC_API int ic_codegen_target_vector_bits(const ic_codegen_target *t);

/* Heuristic parameters for kernel k over buffers bufs on target t. */
IC_API void ic_codegen_params_default(const ic_codegen_target *t, const ic_kernel *k,
                                      const ic_buffer *bufs, ic_codegen_params *out);

/* How a kernel's loops are arranged (chosen from its index expressions). */
typedef enum {
    IC_KMODE_POINTWISE, /* no reduction: outer space flattened, innermost outer dim vectorised */
    IC_KMODE_ROW,       /* per outer point, the stages' inner loops; innermost inner dim vectorised */
    IC_KMODE_COLUMN,    /* reduced dim not contiguous: a strip of the innermost outer dim is
                         * accumulated while walking the inner dims; the strip is vectorised */
} ic_kernel_mode;
IC_API ic_kernel_mode ic_kernel_mode_of(const ic_kernel *k);

/* An LLVM module (and its own LLVM context) holding generated kernels. */
typedef struct ic_llvm_module ic_llvm_module;

/* Generates one function per kernel of p. params: one per kernel, or NULL for
 * ic_codegen_params_default. The module borrows t (keep t alive until the module is
 * destroyed or handed to the JIT). The caller owns *out. Errors name the kernel and the
 * instruction (IC_EINVAL for malformed loop IR, IC_EUNSUPPORTED for ops it cannot emit). */
IC_API ic_status ic_llvmgen(ic_ctx *c, const ic_program *p, const ic_codegen_target *t,
                            const ic_codegen_params *params, ic_llvm_module **out);
/* The same over explicit kernels and buffers (tests and tools that build loop IR by hand). */
IC_API ic_status ic_llvmgen_kernels(ic_ctx *c, int nkernels, const ic_kernel *kernels,
                                    int nbufs, const ic_buffer *bufs,
                                    const ic_codegen_target *t, const ic_codegen_params *params,
                                    ic_llvm_module **out);
IC_API void ic_llvm_module_destroy(ic_llvm_module *m);

/* LLVMVerifyModule; IC_ELLVM with LLVM's message. */
IC_API ic_status ic_llvm_module_verify(ic_llvm_module *m);
/* Runs default<O3> (loop and SLP vectorization, interleaving, unrolling) for the target. */
IC_API ic_status ic_llvm_module_optimize(ic_llvm_module *m);

IC_API int ic_llvm_module_num_kernels(const ic_llvm_module *m);
/* Symbol of kernel i in the module (kernel names made unique and symbol-safe). */
IC_API const char *ic_llvm_module_kernel_symbol(const ic_llvm_module *m, int i);

/* Textual LLVM IR of the module. The _string forms return malloc'd text (free()). */
IC_API ic_status ic_llvm_module_print(FILE *f, const ic_llvm_module *m);
IC_API char *ic_llvm_module_ir_string(const ic_llvm_module *m);
/* Host assembly of the module (codegen runs on a copy; the module is unchanged). */
IC_API ic_status ic_llvm_module_print_asm(FILE *f, ic_llvm_module *m);
IC_API char *ic_llvm_module_asm_string(ic_llvm_module *m);

#ifdef __cplusplus
}
#endif
#endif
