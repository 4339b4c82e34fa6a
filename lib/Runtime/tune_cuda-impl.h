/* tune_cuda-impl.h - the GPU autotuner (tune_cuda.c): per distinct kernel of a variant, a
 * statically pruned space of ic_ptx_params (the heuristic's choice first), candidates emitted
 * on the compile threads and loaded together, timed on the device with CUDA events (random
 * inputs, an L2 flush before each launch when the data outgrows the L2), the default replaced
 * only by a candidate faster by the margin, confirmed in a race of its own, whose outputs
 * match the default's; winners kept as tuning records of the persistent cache
 * (IC__CACHE_GPU_TUNE). The races, the margin, the budget, the progress line and the AUTOTUNE
 * table are the shared machinery of tune.c (tune-impl.h); this file supplies the space, the
 * device timer and the numerics check.
 *
 *     ic_ptx_params *tuned = NULL;   // [nkernels] or NULL when nothing was tuned
 *     ic__cuda_tune(P, d, prog, &po, given, o, &tuned);
 *     ic_ptx_emit(c, prog, &po, tuned ? tuned : given, &m);
 */
#ifndef IC_TUNE_CUDA_IMPL_H
#define IC_TUNE_CUDA_IMPL_H

#include <stdio.h>
#include "pipeline-impl.h"
#include "cuda-impl.h"

/* One candidate: the params given to the PTX layer (`in`, sparse: 0 = heuristic) and what
 * they resolve to (`res`, every field set; two candidates of equal res are one). */
typedef struct ic__tcand {
    ic_ptx_params in, res;
} ic__tcand;

/* The IC_TUNE_* flag that selects kernel k (resolved params r; conv: the GEMM of an im2col
 * copy): GEMM, CONV, POINTWISE, REDUCTION (ROW, COLUMN) or ATTENTION. */
IC_HIDDEN int ic__tune_cuda_kind(const ic_ptx_params *r, bool conv);

/* The search space of kernel k under options po: *out[0] is the heuristic's choice (in =
 * *base, NULL: all zero), then every other candidate of the pruned space (exhaustive: the full
 * space) that ic_ptx_params_resolve accepts, distinct by resolved params. IC_EINVAL when the
 * default itself does not resolve. *out: ic__free. */
IC_HIDDEN ic_status ic__tune_cuda_space(ic_ctx *c, const ic_kernel *k, int nbufs, const ic_buffer *bufs,
                                        const ic_ptx_options *po, const ic_ptx_params *base,
                                        bool exhaustive, ic__tcand **out, int *n);
/* Coordinate-descent neighbours of w (resolved): w with one field moved to the next smaller or
 * larger value of the full space, valid and not in seen[0..nseen) (by res). *out: ic__free. */
IC_HIDDEN ic_status ic__tune_cuda_neighbours(ic_ctx *c, const ic_kernel *k, int nbufs, const ic_buffer *bufs,
                                             const ic_ptx_options *po, const ic_ptx_params *w,
                                             const ic__tcand *seen, int nseen, ic__tcand **out, int *n);

/* Params as one line "mode=3 block=256 ... wgmma=1" (every field; IC__PTX_PARAMS_TEXT bytes
 * hold it) and back (fields it does not name keep their value; false on an unknown field or a
 * bad integer). The one text of params: tuning records and the GPU code cache's keys. */
#define IC__PTX_PARAMS_TEXT 512
IC_HIDDEN void ic__ptx_params_format(const ic_ptx_params *p, char *buf, size_t n);
IC_HIDDEN bool ic__ptx_params_parse(const char *text, ic_ptx_params *p);
/* A short label of resolved params for the AUTOTUNE table: "wgmma 128x192x64 st4". */
IC_HIDDEN void ic__ptx_params_label(const ic_ptx_params *r, char *buf, size_t n);

/* Tuning records: the params of the n kernels of one tuning unit under key (what
 * ic__tune_cuda_key made). get: true and out[0..n) filled, or false (a miss). */
IC_HIDDEN bool ic__tune_cuda_record_get(ic_ctx *c, const char *key, int n, ic_ptx_params *out);
IC_HIDDEN void ic__tune_cuda_record_put(ic_ctx *c, const char *key, int n, const ic_ptx_params *p);
/* The record key of kernels ks[0..n) of prog (a tuning unit: an im2col copy and its GEMM, or
 * one kernel), with kernel names, graph node names and buffer numbers taken out so that equal
 * kernels of other layers share it, followed by `extra` (device, options, tune flags).
 * malloc'd (free()); NULL on OOM. */
IC_HIDDEN char *ic__tune_cuda_key(const ic_program *prog, int n, const int *ks, const char *extra);

/* The tuner (the CUDA backend's codegen calls it when o->autotune selects some kind): o's
 * autotune flags, autotune_budget_s and cache; given: the caller's params per kernel or NULL
 * (kernels with given params are not tuned). d NULL (dumps: no device): nothing is tuned.
 * *out: [nkernels] params to emit with (ic__free), or NULL when every kernel keeps its
 * default. Stats go to P->tune. Tuning is an optimisation: a candidate or a kernel that fails
 * is logged and left out; only running out of memory is an error. */
IC_HIDDEN ic_status ic__cuda_tune(ic__pipe *P, ic_cuda *d, const ic_program *prog, const ic_ptx_options *po,
                                  const ic_ptx_params *given, const ic_cuda_options *o, ic_ptx_params **out);

/* Hidden knob for tests with the fake driver: bytes of the L2 flush buffer (0: 4x the device's
 * L2, 200 MB on an H100). */
IC_HIDDEN extern size_t ic__tune_cuda_flush_bytes;

#endif
