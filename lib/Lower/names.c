/* names.c - kernel names say what was fused: "cpu_fused_add_mul_relu_3" (distinct op names
 * in graph order), "cpu_add_0" for a single op, "cpu_copy_2" for a copy into an output. */
#include <stdio.h>
#include <string.h>
#include "lower-impl.h"

#define MAX_NAMED_OPS 6

static const ic_node *lookup(const ic_graph *g, const char *name)
{
    for (int v = 0; v < ic_graph_num_nodes(g); v++)
        if (ic__node(g, v)->info.name == name)
            return ic__node(g, v);
    ic_value v;
    return ic_graph_find(g, name, &v) ? ic__node(g, v) : NULL;
}

void ic__kernel_name(char *buf, size_t n, const char *prefix, const ic_graph *g, int nnodes,
                     const char *const *nodes, int index)
{
    const char *ops[MAX_NAMED_OPS];
    int nops = 0, ncomp = 0;
    bool more = false;
    for (int i = 0; i < nnodes; i++) {
        const ic_node *nd = lookup(g, nodes[i]);
        ic__class k = nd ? ic__node_class(nd) : IC__CL_LEAF;
        if (k == IC__CL_LEAF || k == IC__CL_VIEW)
            continue;
        ncomp++;
        const char *op = k == IC__CL_ATTN ? "attention" : ic_op_name(nd->info.op);
        bool seen = false;
        for (int j = 0; j < nops; j++)
            seen |= strcmp(ops[j], op) == 0;
        if (!seen && nops < MAX_NAMED_OPS)
            ops[nops++] = op;
        else if (!seen)
            more = true;
    }
    if (ncomp == 0) {
        snprintf(buf, n, "%scopy_%d", prefix, index);
        return;
    }
    size_t k = (size_t)snprintf(buf, n, "%s%s", prefix, ncomp > 1 ? "fused_" : "");
    for (int j = 0; j < nops && k < n; j++)
        k += (size_t)snprintf(buf + k, n - k, "%s%s", j ? "_" : "", ops[j]);
    if (k < n)
        snprintf(buf + k, n - k, "%s_%d", more ? "_etc" : "", index);
}
