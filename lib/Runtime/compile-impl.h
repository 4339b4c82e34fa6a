/* compile-impl.h - private interface of the JIT (jit.c), used by the CPU backend
 * (backend_cpu.c, pool.c) and tests. Free of LLVM headers, so tests can include it. */
#ifndef IC_COMPILE_IMPL_H
#define IC_COMPILE_IMPL_H

#include "graph-impl.h"
#include "ic/llvmgen.h"

/* A generated kernel: bufs[i] is the base pointer of program buffer i. */
typedef void (*ic__kernel_fn)(void *const *bufs);

/* One LLJIT instance; destroying it frees the code of every module added to it. */
typedef struct ic__jit ic__jit;
/* The JIT takes t's target machine (t keeps none: use it for nothing but destroying it). */
IC_HIDDEN ic_status ic__jit_create(ic_ctx *c, ic_codegen_target *t, ic__jit **out);
/* Hands m's module to the JIT (m keeps its kernel symbols). */
IC_HIDDEN ic_status ic__jit_add(ic__jit *jit, ic_llvm_module *m);
IC_HIDDEN ic_status ic__jit_lookup(ic__jit *jit, const char *sym, void **fn);
/* fns[i] = the address of syms[i], all in one lookup (one linking pass over their objects). */
IC_HIDDEN ic_status ic__jit_lookup_all(ic__jit *jit, int n, const char *const *syms, void **fns);

/* Machine code of one module made outside the JIT, so that several threads can compile the
 * modules of one graph at once (each module has its own LLVM context); the JIT then only
 * links it. */
typedef struct ic__object ic__object;
/* Code generation of m's (optimised) module for m's target into *out (caller owns it). Its
 * large zero-initialised globals become blocks the JIT maps (m is changed that way), for the
 * caller to destroy. Thread-safe across distinct modules. */
IC_HIDDEN ic_status ic__jit_emit_object(ic_ctx *c, ic_llvm_module *m, ic__object **out);
/* o and its kernel's symbol as bytes (*data malloc'd: free()). */
IC_HIDDEN ic_status ic__jit_object_pack(ic_ctx *c, const ic__object *o, const char *sym,
                                        void **data, size_t *n);
/* The object that ic__jit_object_pack made data from, and its symbol (*sym: ic__free); false
 * when data is not such bytes. copy false: the object reads data in place (keep it alive
 * until the JIT is destroyed). */
IC_HIDDEN bool ic__jit_object_unpack(ic_ctx *c, const void *data, size_t n, bool copy,
                                     ic__object **out, char **sym);
/* Hands o to the JIT (o is consumed, on failure too); its symbols resolve on lookup. */
IC_HIDDEN ic_status ic__jit_add_object(ic__jit *jit, ic__object *o);
IC_HIDDEN void ic__jit_object_free(ic_ctx *c, ic__object *o);
IC_HIDDEN void ic__jit_destroy(ic__jit *jit);

/* Generates, optimises (O3) and JIT-compiles explicit kernels: fns[i] runs kernel i.
 * params: one per kernel or NULL for the defaults. The caller owns *out. */
IC_HIDDEN ic_status ic__jit_kernels(ic_ctx *c, int nk, const ic_kernel *k, int nb,
                                    const ic_buffer *b, const ic_codegen_params *params,
                                    ic__jit **out, ic__kernel_fn *fns);

#endif
