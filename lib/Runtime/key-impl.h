/* key-impl.h - names of compiled kernels for the persistent cache (key.c): the text a cache key
 * is made of, and codegen parameters as text (tuning records store them that way). */
#ifndef IC_KEY_IMPL_H
#define IC_KEY_IMPL_H

#include "graph-impl.h"
#include "ic/llvmgen.h"

/* Everything kernel k of p's generated code depends on in p: its loop IR text, then each buffer
 * it reads or writes (kind, dtype, elements; for a PARAM when hash_params, a hash of its data,
 * as frozen weights are packed into the code), then `extra` (the caller's: target, params,
 * options). malloc'd (free()); NULL on OOM. */
IC_HIDDEN char *ic__kernel_key(const ic_program *p, int k, bool hash_params, const char *extra);

/* p as one line "vector_width=8 unroll=0 ... gemm.mr=8 ..." (every field, fixed order). */
IC_HIDDEN void ic__cg_params_format(const ic_codegen_params *p, char *buf, size_t n);
/* Parses that text back into *p (fields it does not name keep their value); false when a field
 * is unknown or a value is not an integer. */
IC_HIDDEN bool ic__cg_params_parse(const char *text, ic_codegen_params *p);

/* A fast 64-bit hash of n bytes (8 at a time), continuing from h: for weights. */
IC_HIDDEN uint64_t ic__hash_data(uint64_t h, const void *p, size_t n);

#endif
