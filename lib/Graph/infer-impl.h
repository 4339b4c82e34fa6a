/* infer-impl.h - shape and dtype inference entry used by the builder. */
#ifndef IC_INFER_IMPL_H
#define IC_INFER_IMPL_H
#include "graph-impl.h"

/* Infers n's dtype, rank, shape and normalised fields from its operands and attrs,
 * validating everything; n is not yet part of g. */
IC_HIDDEN ic_status ic__infer(ic_graph *g, ic_node *n);
IC_HIDDEN ic_status ic__dim_mul(ic_dim a, ic_dim b, ic_dim *out);

#endif
