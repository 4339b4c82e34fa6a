/* fuse.h - kernel fusion: regroups the one-kernel-per-op program of ic_lower into fused
 * kernels, in the spirit of TorchInductor's scheduler:
 *   - pointwise ops are computed inline where they are read (chains become one kernel,
 *     the seed pattern ((a + b1) + c) * b2 + b3 is one kernel);
 *   - reductions and normalisations take their pointwise producers into their loads and
 *     their pointwise consumers into their last stage (softmax, layer_norm(x + residual)
 *     each one kernel); matmuls take pointwise consumers as an epilogue;
 *   - a value is materialised only when a graph output, a matmul operand, read by a kernel
 *     that cannot compute it inline, or too costly to recompute; a kernel then stores
 *     several outputs;
 *   - TEMP buffers share arena bytes when their lifetimes are disjoint
 *     (ic_buffer.arena_offset).
 * Each kernel is named after what it computes ("cpu_fused_add_mul_relu_3") and says why it
 * ends where it does (ic_kernel.why, shown by ic_program_print / ic-dump --stage fused).
 *
 *     ic_program *loops, *fused;
 *     ic_lower(c, g, &loops);
 *     ic_fuse(c, loops, NULL, &fused);     // loops is unchanged
 *     ic_program_print(stdout, fused);
 */
#ifndef IC_FUSE_H
#define IC_FUSE_H

#include "ic/lower.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ic_fuse_options {
    bool no_fusion;               /* one kernel per op (also IC_NO_FUSION=1 in the context) */
    bool emulate_precision_casts; /* fused f16/bf16 intermediates are rounded as if they had
                                   * been stored, so fused results equal unfused ones (true) */
    bool collapse_dims;           /* merge adjacent loop dims where no index needs div/mod (true) */
    int max_inline_ops;           /* a pointwise value read by several kernels is materialised
                                   * once its inlined expression has more ops than this (32) */
    const char *prefix;           /* kernel name prefix ("cpu_") */
    bool stash_norm_rows;         /* softmax and layer_norm store a per-element intermediate
                                   * (exp(x - max), a computed input) in their output between
                                   * passes and re-read it from cache instead of recomputing
                                   * it (true: CPUs, where exp costs more than a cached load;
                                   * the GPU backend sets false: its rows stay in registers and
                                   * the extra global write would cost bandwidth) */
} ic_fuse_options;

/* The defaults above. */
IC_API void ic_fuse_options_init(ic_fuse_options *o);

/* A new fused program computing what `in` computes (in is not changed; both borrow in's
 * graph). opt may be NULL for the defaults. The caller owns *out (ic_program_destroy). */
IC_API ic_status ic_fuse(ic_ctx *c, const ic_program *in, const ic_fuse_options *opt,
                         ic_program **out);

/* Writes the name kernel k of p would have with another prefix and position, e.g.
 * ("gpu_", ...) -> "gpu_fused_add_mul_3": the one naming scheme for every backend. */
IC_API void ic_kernel_format_name(char *buf, size_t n, const char *prefix, const ic_program *p,
                                  const ic_kernel *k, int index);

#ifdef __cplusplus
}
#endif
#endif
