/* fold-impl.h - freezing's constant folding (fold.c), used by the pipeline (pipeline.c). */
#ifndef IC_FOLD_IMPL_H
#define IC_FOLD_IMPL_H

#include "graph-impl.h"

/* Folds the constant subgraphs of g: every computing node whose operands are all params with
 * data (or other constant nodes) and that a non-constant node reads, e.g. a cast of a weight,
 * is computed once by the reference executor and becomes a param holding the result. Pure
 * views of params stay views (they are index arithmetic, and matmul packing reads them).
 * *out is a new graph with the same args (in the same order) and outputs, or NULL when there
 * is nothing to fold or g has symbols; the caller owns it. */
IC_HIDDEN ic_status ic__graph_fold_constants(ic_ctx *c, const ic_graph *g, ic_graph **out);

/* Freezing's conv-bn folding (fold_bn.c): each batch_norm whose input is a convolution read
 * by nothing else, with constant weights and statistics, becomes one convolution with scaled
 * weights and bias (graph ops of the params, for ic__graph_fold_constants to compute). *out
 * is NULL when there is no such pair; it borrows g's param data. */
IC_HIDDEN ic_status ic__graph_fold_conv_bn(ic_ctx *c, const ic_graph *g, ic_graph **out);

#endif
