/* runtime.h - executing graphs: the reference executor (the oracle every backend is
 * checked against) and argument binding. Compiled execution is added by later layers.
 *
 *     int64_t vals[8]; ic_tensor outs[1];
 *     ic_runtime_bind_args(g, nargs, args, vals);   // symbols from the supplied tensors
 *     ic_ref_run(c, g, vals, nargs, args, 1, outs); // outs[i] allocated: ic_tensor_free
 */
#ifndef IC_RUNTIME_H
#define IC_RUNTIME_H

#include "ic/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Fills vals[sym] from the shapes of args (ic_graph_arg order); symbols no arg fixes keep
 * their value (-1 = unbound). A symbol two args size differently is an error naming both;
 * so is a rank, dtype or fixed size that differs from the graph. */
IC_API ic_status ic_runtime_bind_args(const ic_graph *g, int nargs, const ic_tensor *args,
                                      int64_t *vals);

/* Runs g op by op in plain C. args follow ic_graph_arg order (any strides); vals binds
 * the symbols (every symbol must be bound; NULL when g has none). outs[i] receives freshly
 * allocated contiguous tensors that the caller frees with ic_tensor_free. Reductions
 * accumulate in double; f16/bf16 compute in f32 and round to nearest even. */
IC_API ic_status ic_ref_run(ic_ctx *c, const ic_graph *g, const int64_t *vals, int nargs,
                            const ic_tensor *args, int nouts, ic_tensor *outs);

#ifdef __cplusplus
}
#endif
#endif
