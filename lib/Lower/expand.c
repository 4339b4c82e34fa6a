/* expand.c - ic_graph_expand: composite ops as existing graph ops (see expand-impl.h). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "expand-impl.h"

static ic__expand_fn expander(ic_op op)
{
    ic__expand_fn f = ic__expand_spatial(op);
    return f ? f : ic__expand_nn(op);
}

/* The expander of node ni, NULL when it stays as it is: no composite, or an attention that
 * one fused kernel computes (ic_attrs.fused). */
static ic__expand_fn node_expander(const ic_node_info *ni)
{
    if (ni->op == IC_OP_INPUT || ni->op == IC_OP_PARAM || (ni->attrs && ni->attrs->fused))
        return NULL;
    return expander(ni->op);
}

bool ic_graph_has_composites(const ic_graph *g)
{
    int n = ic_graph_num_nodes(g);
    for (int v = 0; v < n; v++) {
        ic_node_info ni;
        ic_graph_node(g, v, &ni);
        if (node_expander(&ni))
            return true;
        if (ic__exp_mm_operand_needs_contig(g, &ni, 0) || ic__exp_mm_operand_needs_contig(g, &ni, 1))
            return true;
    }
    return false;
}

static const char *helper_name(ic__exp *E, const char *what)
{
    if (!what)
        return E->n.name;
    snprintf(E->name, sizeof E->name, "%s.%s", E->n.name, what);
    return E->name;
}

ic_status ic__exp_node(ic__exp *E, const char *what, ic_op op, int nin, const ic_operand *in,
                       const ic_attrs *a, ic_value *out)
{
    return ic_graph_add_node(E->dst, helper_name(E, what), op, nin, in, a, out);
}

ic_status ic__exp_const(ic__exp *E, const char *what, ic_dtype dt, int rank, const int64_t *shape,
                        const void *data, ic_value *out)
{
    ic_dim sh[IC_MAX_RANK];
    int64_t numel = 1;
    for (int d = 0; d < rank; d++) {
        sh[d] = ic_dim_const(shape[d]);
        numel *= shape[d];
    }
    return ic_graph_add_param(E->dst, helper_name(E, what), dt, rank, sh, data,
                              (size_t)numel * ic_dtype_size(dt), NULL, NULL, out);
}

void ic__exp_info(const ic__exp *E, ic_value v, ic_node_info *out) { ic_graph_node(E->dst, v, out); }

ic_status ic__exp_fail(ic__exp *E, const char *fmt, ...)
{
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return ic__error(E->c, IC_EINVAL, "expand: node '%s' (%s): %s", E->n.name, ic_op_name(E->n.op),
                     why);
}

/* A matmul whose operands read through views no strides describe reads copies of them
 * ("<node>.a_contiguous", "<node>.b_contiguous": casts to their own dtype). */
static ic_status copy_matmul(ic__exp *E, ic_value *out)
{
    ic_value saved[2] = { -1, -1 }, keys[2] = { -1, -1 };
    ic_status s = IC_OK;
    for (int i = 0; i < 2 && !s; i++) {
        ic_value src = E->n.inputs[i].node, copy;
        if (!ic__exp_mm_operand_needs_contig(E->src, &E->n, i) || src == keys[0]) /* x @ x: one copy */
            continue;
        ic_node_info vi;
        ic_graph_node(E->src, src, &vi);
        ic_attrs a;
        ic_attrs_init(&a, IC_OP_CAST);
        a.has_dtype = true;
        a.dtype = vi.dtype;
        ic_operand x = ic_val(E->map[src]);
        s = ic__exp_node(E, i ? "b_contiguous" : "a_contiguous", IC_OP_CAST, 1, &x, &a, &copy);
        if (!s) {
            keys[i] = src;
            saved[i] = E->map[src];
            E->map[src] = copy;
        }
    }
    if (!s)
        s = ic__graph_copy_node(E->dst, &E->n, E->map, out);
    for (int i = 1; i >= 0; i--) /* the views' other readers keep reading the views */
        if (keys[i] >= 0)
            E->map[keys[i]] = saved[i];
    return s;
}

static ic_status copy_node(ic__exp *E, ic_value v, ic_value *out)
{
    ic_graph_node(E->src, v, &E->n);
    ic__expand_fn f = node_expander(&E->n);
    if (!f && (ic__exp_mm_operand_needs_contig(E->src, &E->n, 0) || ic__exp_mm_operand_needs_contig(E->src, &E->n, 1)))
        return copy_matmul(E, out);
    if (!f)
        return ic__graph_copy_node(E->dst, &E->n, E->map, out);
    ic_operand in[IC_MAX_INPUTS];
    ic_node_info infos[IC_MAX_INPUTS];
    for (int i = 0; i < E->n.ninputs && i < IC_MAX_INPUTS; i++) {
        in[i] = E->n.inputs[i];
        if (in[i].node >= 0) {
            ic_graph_node(E->src, in[i].node, &infos[i]);
            in[i].node = E->map[in[i].node];
        }
    }
    E->in = infos;
    return f(E, in, out);
}

ic_status ic_graph_expand(ic_ctx *c, const ic_graph *g, ic_graph **out)
{
    if (!out)
        return ic__error(c, IC_EINVAL, "ic_graph_expand: out is NULL");
    *out = NULL;
    if (!g)
        return ic__error(c, IC_EINVAL, "ic_graph_expand: graph is NULL");
    if (!ic_graph_has_composites(g))
        return IC_OK;
    ic_status s = ic__check_specialised(c, g);
    if (s)
        return s;
    int n = ic_graph_num_nodes(g);
    ic__exp E = { .c = c, .src = g };
    if (!(E.map = ic__calloc(c, (size_t)n + 1, sizeof *E.map)))
        return ic__error(c, IC_ENOMEM, "expand: out of memory");
    s = ic_graph_create(c, ic_graph_name(g), &E.dst);
    if (!s)
        s = ic__graph_set_source(E.dst, ic_graph_source(g));
    for (int v = 0; !s && v < n; v++)
        s = copy_node(&E, v, &E.map[v]);
    for (int i = 0; !s && i < ic_graph_num_outputs(g); i++)
        s = ic_graph_add_output(E.dst, E.map[ic_graph_output(g, i)]);
    if (!s)
        s = ic_graph_verify(E.dst);
    ic__free(c, E.map);
    if (s) {
        ic_graph_destroy(E.dst);
        return s;
    }
    *out = E.dst;
    return IC_OK;
}
