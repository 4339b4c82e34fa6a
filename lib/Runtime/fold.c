/* fold.c - freezing: constant subgraphs computed at compile time. A cast (or any other
 * computation) of params with data runs once through the reference executor and its result
 * replaces it as a new param, so compiled code reads a constant (which a matmul then packs at
 * compile time) instead of recomputing it at every run. */
#include <stdlib.h>
#include <string.h>
#include "fold-impl.h"
#include "ic/runtime.h"

typedef struct {
    const ic_graph *g;
    int n;
    ic_node_info *ni;
    bool *cnst;     /* a param with data, or computed only from constants */
    bool *compute;  /* constant and something in it computes (not only views of params) */
    bool *fold;     /* computed at compile time: a constant read by a non-constant node */
    bool *live;     /* needed by the outputs of the folded graph */
} fold_t;

static bool node_operand(const ic_operand *o) { return o->node >= 0; }

static void classify(fold_t *F)
{
    for (int v = 0; v < F->n; v++) {
        const ic_node_info *ni = &F->ni[v];
        F->cnst[v] = F->compute[v] = false;
        if (ni->op == IC_OP_PARAM) {
            F->cnst[v] = ni->data != NULL;
            continue;
        }
        if (ni->op == IC_OP_INPUT)
            continue;
        bool all = true, any = false, comp = ic_op_kind_of(ni->op) != IC_KIND_VIEW;
        for (int i = 0; i < ni->ninputs; i++) {
            const ic_operand *o = &ni->inputs[i];
            if (!node_operand(o))
                continue;
            any = true;
            all &= o->node < v && F->cnst[o->node];
            if (all)
                comp |= F->compute[o->node];
        }
        F->cnst[v] = all && any; /* creation ops (full, arange) stay run-time code */
        F->compute[v] = F->cnst[v] && comp;
    }
    /* fold the computing constants that something non-constant reads */
    memset(F->fold, 0, (size_t)(unsigned)F->n);
    for (int v = 0; v < F->n; v++) {
        const ic_node_info *ni = &F->ni[v];
        if (F->cnst[v])
            continue;
        for (int i = 0; i < ni->ninputs; i++) {
            const ic_operand *o = &ni->inputs[i];
            if (node_operand(o) && F->compute[o->node] && F->ni[o->node].op != IC_OP_PARAM)
                F->fold[o->node] = true;
        }
    }
    /* liveness from the outputs, not looking past folded nodes */
    memset(F->live, 0, (size_t)(unsigned)F->n);
    for (int i = 0; i < ic_graph_num_outputs(F->g); i++)
        F->live[ic_graph_output(F->g, i)] = true;
    for (int v = F->n - 1; v >= 0; v--) {
        if (!F->live[v] || F->fold[v])
            continue;
        for (int i = 0; i < F->ni[v].ninputs; i++)
            if (node_operand(&F->ni[v].inputs[i]))
                F->live[F->ni[v].inputs[i].node] = true;
    }
}

/* Adds node v of F->g to dst with operands renamed through map. */
static ic_status copy_node(fold_t *F, ic_graph *dst, int v, const ic_value *map, ic_value *out)
{
    const ic_node_info *ni = &F->ni[v];
    if (ni->op == IC_OP_INPUT) {
        ic_status s = ic_graph_add_input(dst, ni->name, ni->dtype, ni->rank, ni->shape, out);
        if (!s && ni->has_range)
            s = ic_graph_set_input_range(dst, *out, ni->range_lo, ni->range_hi);
        return s;
    }
    if (ni->op == IC_OP_PARAM) {
        int64_t numel = 1;
        for (int d = 0; d < ni->rank; d++)
            numel *= ni->shape[d].coef;
        return ic_graph_add_param(dst, ni->name, ni->dtype, ni->rank, ni->shape, ni->data,
                                  ni->data ? (size_t)numel * ic_dtype_size(ni->dtype) : 0, ni->file,
                                  ni->key, out);
    }
    ic_operand in[IC_MAX_INPUTS];
    for (int i = 0; i < ni->ninputs && i < IC_MAX_INPUTS; i++) {
        in[i] = ni->inputs[i];
        if (node_operand(&in[i]))
            in[i].node = map[in[i].node];
    }
    return ic_graph_add_node(dst, ni->name, ni->op, ni->ninputs, in, ni->attrs, out);
}

/* The constant part needed by the folded nodes, with them as outputs; run by the reference. */
static ic_status evaluate(fold_t *F, ic_ctx *c, int nfold, ic_tensor *vals)
{
    ic_graph *e = NULL;
    ic_value *map = calloc((size_t)F->n, sizeof *map);
    bool *need = calloc((size_t)F->n, 1);
    ic_status s = map && need ? ic_graph_create(c, "fold", &e) : ic__error(c, IC_ENOMEM, "freezing: out of memory");
    for (int v = F->n - 1; v >= 0 && !s; v--) {
        need[v] |= F->fold[v] && F->live[v];
        if (need[v])
            for (int i = 0; i < F->ni[v].ninputs; i++)
                if (node_operand(&F->ni[v].inputs[i]))
                    need[F->ni[v].inputs[i].node] = true;
    }
    for (int v = 0; v < F->n && !s; v++)
        if (need[v])
            s = copy_node(F, e, v, map, &map[v]);
    for (int v = 0; v < F->n && !s; v++)
        if (F->fold[v] && F->live[v])
            s = ic_graph_add_output(e, map[v]);
    if (!s)
        s = ic_ref_run(c, e, NULL, 0, NULL, nfold, vals);
    ic_graph_destroy(e);
    free(map);
    free(need);
    return s;
}

ic_status ic__graph_fold_constants(ic_ctx *c, const ic_graph *g, ic_graph **out)
{
    *out = NULL;
    if (ic_graph_num_symbols(g) > 0 || ic_graph_num_nodes(g) <= 0)
        return IC_OK;
    fold_t F = { g, ic_graph_num_nodes(g), NULL, NULL, NULL, NULL, NULL };
    F.ni = calloc((size_t)F.n + 1, sizeof *F.ni);
    char *flags = calloc((size_t)F.n + 1, 4);
    ic_value *map = calloc((size_t)F.n + 1, sizeof *map);
    if (!F.ni || !flags || !map) {
        free(F.ni), free(flags), free(map);
        return ic__error(c, IC_ENOMEM, "freezing: out of memory");
    }
    F.cnst = (bool *)flags, F.compute = F.cnst + F.n, F.fold = F.compute + F.n, F.live = F.fold + F.n;
    for (int v = 0; v < F.n; v++)
        ic_graph_node(g, v, &F.ni[v]);
    classify(&F);
    int nfold = 0;
    for (int v = 0; v < F.n; v++)
        nfold += F.fold[v] && F.live[v];
    ic_status s = IC_OK;
    ic_tensor *vals = NULL;
    ic_graph *dst = NULL;
    if (nfold == 0)
        goto done;
    if (!(vals = calloc((size_t)nfold, sizeof *vals))) {
        s = ic__error(c, IC_ENOMEM, "freezing: out of memory");
        goto done;
    }
    if ((s = evaluate(&F, c, nfold, vals)) || (s = ic_graph_create(c, ic_graph_name(g), &dst)))
        goto done;
    /* the same nodes in the same order (so the args keep theirs), folded ones as params */
    for (int v = 0, f = 0; v < F.n && !s; v++) {
        const ic_node_info *ni = &F.ni[v];
        bool keep = F.live[v] || ni->op == IC_OP_INPUT || (ni->op == IC_OP_PARAM && !ni->data);
        if (F.fold[v] && F.live[v]) {
            ic_tensor *t = &vals[f++];
            size_t bytes = (size_t)ic_tensor_numel(t) * ic_dtype_size(t->dtype);
            s = ic_graph_add_param(dst, ni->name, ni->dtype, ni->rank, ni->shape, t->data, bytes, NULL, NULL, &map[v]);
        } else if (keep) {
            s = copy_node(&F, dst, v, map, &map[v]);
        }
    }
    for (int i = 0; i < ic_graph_num_outputs(g) && !s; i++)
        s = ic_graph_add_output(dst, map[ic_graph_output(g, i)]);
    if (!s)
        s = ic_graph_verify(dst);
done:
    for (int i = 0; vals && i < nfold; i++)
        ic_tensor_free(c, &vals[i]);
    free(vals);
    free(F.ni), free(flags), free(map);
    if (s) {
        ic_graph_destroy(dst);
        return s;
    }
    *out = dst;
    return IC_OK;
}
