/* expand-impl.h - composite graph ops (conv, pooling, batch_norm, attention...) written as
 * existing graph ops before lowering, so every backend (interpreter, CPU JIT, PTX) runs them
 * with no code of its own. The reference executor implements each composite directly: it
 * stays the independent oracle.
 *
 * ic_graph_expand copies a specialised graph node by node; a composite node is handed to the
 * expander its op's family registers (expand_spatial.c, expand_nn.c), which adds helper nodes
 * named "<node>.<what>" and a last node named as the composite itself (what = NULL), so
 * outputs, dumps and kernel names keep the user's names. */
#ifndef IC_EXPAND_IMPL_H
#define IC_EXPAND_IMPL_H

#include "lower-impl.h"

typedef struct ic__exp {
    ic_ctx *c;
    const ic_graph *src;
    ic_graph *dst;
    ic_value *map;          /* src value -> dst value */
    ic_node_info n;         /* the composite node being expanded (src) */
    ic_node_info *in;       /* n.ninputs infos of its node operands (src), NULL entries for
                             * scalar / none operands */
    char name[256];
} ic__exp;

/* Expands node n (in already mapped to dst values, scalars and IC_NONE kept) into E->dst;
 * *out = the value that replaces it. Errors name the node and op (ic__exp_fail). */
typedef ic_status (*ic__expand_fn)(ic__exp *E, const ic_operand *in, ic_value *out);

/* The expander of op, NULL when op is no composite of that family. */
IC_HIDDEN ic__expand_fn ic__expand_spatial(ic_op op);
IC_HIDDEN ic__expand_fn ic__expand_nn(ic_op op);

/* expand_contig.c: operand i of matmul/linear/bmm node ni is a view chain no strides describe
 * (a reshape merging dims a permute separated): it gets a copy first. */
IC_HIDDEN bool ic__exp_mm_operand_needs_contig(const ic_graph *g, const ic_node_info *ni, int i);

/* Adds a helper node "<node>.<what>" (what NULL: the node's own name; use it for the last
 * node only). Shape and dtype are inferred by ic_graph_add_node. */
IC_HIDDEN ic_status ic__exp_node(ic__exp *E, const char *what, ic_op op, int nin,
                                 const ic_operand *in, const ic_attrs *a, ic_value *out);
/* Adds a constant param "<node>.<what>" with data (row-major, dt, copied). */
IC_HIDDEN ic_status ic__exp_const(ic__exp *E, const char *what, ic_dtype dt, int rank,
                                  const int64_t *shape, const void *data, ic_value *out);
/* The dst node info of value v (its inferred shape and dtype). */
IC_HIDDEN void ic__exp_info(const ic__exp *E, ic_value v, ic_node_info *out);
/* IC_EINVAL "expand: node 'x' (op): <why>" on E->c. */
IC_HIDDEN ic_status ic__exp_fail(ic__exp *E, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
