/* fold_bn.c - freezing: a batch_norm reading a convolution that nothing else reads becomes
 * that convolution with scaled weights, as Inductor's conv-bn folding does:
 *     s = gamma * rsqrt(var + eps),  W' = W * s[o],  b' = (b - mean) * s + beta.
 * The scaling is written as graph ops of the params (in f32, cast back to the weights'
 * dtype), which the constant folding that runs next computes once at compile time. */
#include <stdio.h>
#include <stdlib.h>
#include "fold-impl.h"

typedef struct {
    const ic_graph *g;
    ic_graph *dst;
    ic_value *map;
    int *uses;         /* readers per node, outputs counted */
    char name[300];
} bnf;

static bool is_const(const ic_graph *g, ic_operand o)
{
    if (o.node == IC_NONE)
        return true;
    if (o.node < 0)
        return false;
    ic_node_info ni;
    ic_graph_node(g, o.node, &ni);
    return ni.op == IC_OP_PARAM && ni.data;
}

/* The conv node a batch_norm at v folds into, or -1. */
static ic_value foldable(const bnf *F, ic_value v)
{
    ic_node_info bn, cv, w;
    ic_graph_node(F->g, v, &bn);
    if (bn.op != IC_OP_BATCH_NORM || bn.inputs[0].node < 0)
        return -1;
    ic_value x = bn.inputs[0].node;
    ic_graph_node(F->g, x, &cv);
    if (cv.op != IC_OP_CONV || F->uses[x] != 1 || cv.dtype != bn.dtype)
        return -1;
    ic_graph_node(F->g, cv.inputs[1].node, &w);
    if (cv.inputs[0].node < 0 || w.rank != cv.rank) /* batched: channels are dim 1 */
        return -1;
    for (int i = 1; i < bn.ninputs; i++)
        if (!is_const(F->g, bn.inputs[i]))
            return -1;
    for (int i = 1; i < cv.ninputs; i++)
        if (!is_const(F->g, cv.inputs[i]))
            return -1;
    return x;
}

static ic_status op(bnf *F, const char *base, const char *what, ic_op o, int n,
                    const ic_operand *in, const ic_attrs *a, ic_value *out)
{
    snprintf(F->name, sizeof F->name, "%s.%s", base, what);
    return ic_graph_add_node(F->dst, F->name, o, n, in, a, out);
}

static ic_status cast(bnf *F, const char *base, const char *what, ic_operand x, ic_dtype t, ic_value *out)
{
    ic_attrs a;
    ic_attrs_init(&a, IC_OP_CAST);
    a.has_dtype = true, a.dtype = t;
    return op(F, base, what, IC_OP_CAST, 1, &x, &a, out);
}

static ic_status bin(bnf *F, const char *base, const char *what, ic_op o, ic_operand x,
                     ic_operand y, ic_value *out)
{
    ic_operand in[2] = { x, y };
    return op(F, base, what, o, 2, in, NULL, out);
}

static ic_operand mapped(const bnf *F, ic_operand o)
{
    if (o.node >= 0)
        o.node = F->map[o.node];
    return o;
}

/* The conv of cv with the batch_norm bn folded in, named as bn. */
static ic_status fold_pair(bnf *F, const ic_node_info *bn, const ic_node_info *cv, ic_value *out)
{
    const char *nm = bn->name;
    ic_node_info w;
    ic_graph_node(F->g, cv->inputs[1].node, &w);
    ic_value mean, var, s, t, wf, ws, wq, b, bq;
    ic_status st = cast(F, nm, "mean", mapped(F, bn->inputs[1]), IC_F32, &mean);
    if (!st) st = cast(F, nm, "var", mapped(F, bn->inputs[2]), IC_F32, &var);
    if (!st) st = bin(F, nm, "var_eps", IC_OP_ADD, ic_val(var), ic_scalar_f(bn->attrs->eps), &t);
    if (!st) st = op(F, nm, "rstd", IC_OP_RSQRT, 1, (ic_operand[]){ ic_val(t) }, NULL, &s);
    if (!st && bn->ninputs > 3 && bn->inputs[3].node >= 0) {
        ic_value g;
        st = cast(F, nm, "gamma", mapped(F, bn->inputs[3]), IC_F32, &g);
        if (!st) st = bin(F, nm, "scale", IC_OP_MUL, ic_val(s), ic_val(g), &s);
    }
    ic_attrs ra;  /* s as [Cout, 1, ...] against W [Cout, Cin/g, *k] */
    ic_attrs_init(&ra, IC_OP_RESHAPE);
    ra.nshape = w.rank;
    for (int i = 0; i < w.rank; i++)
        ra.shape[i] = ic_dim_const(i == 0 ? w.shape[0].coef : 1);
    ic_value s4;
    if (!st) st = op(F, nm, "scale_w", IC_OP_RESHAPE, 1, (ic_operand[]){ ic_val(s) }, &ra, &s4);
    if (!st) st = cast(F, nm, "w32", mapped(F, cv->inputs[1]), IC_F32, &wf);
    if (!st) st = bin(F, nm, "w_scaled", IC_OP_MUL, ic_val(wf), ic_val(s4), &ws);
    if (!st) st = cast(F, nm, "weight", ic_val(ws), w.dtype, &wq);
    /* b' = (b - mean) * s + beta */
    if (!st && cv->ninputs > 2 && cv->inputs[2].node >= 0) {
        ic_value b0;
        st = cast(F, nm, "b32", mapped(F, cv->inputs[2]), IC_F32, &b0);
        if (!st) st = bin(F, nm, "b_centred", IC_OP_SUB, ic_val(b0), ic_val(mean), &b);
    } else if (!st) {
        st = op(F, nm, "b_centred", IC_OP_NEG, 1, (ic_operand[]){ ic_val(mean) }, NULL, &b);
    }
    if (!st) st = bin(F, nm, "b_scaled", IC_OP_MUL, ic_val(b), ic_val(s), &b);
    if (!st && bn->ninputs > 4 && bn->inputs[4].node >= 0) {
        ic_value beta;
        st = cast(F, nm, "beta", mapped(F, bn->inputs[4]), IC_F32, &beta);
        if (!st) st = bin(F, nm, "b_shifted", IC_OP_ADD, ic_val(b), ic_val(beta), &b);
    }
    if (!st) st = cast(F, nm, "bias", ic_val(b), w.dtype, &bq);
    if (st)
        return st;
    ic_operand in[3] = { mapped(F, cv->inputs[0]), ic_val(wq), ic_val(bq) };
    return ic_graph_add_node(F->dst, nm, IC_OP_CONV, 3, in, cv->attrs, out);
}

static void count_uses(bnf *F, int n)
{
    for (int v = 0; v < n; v++) {
        ic_node_info ni;
        ic_graph_node(F->g, v, &ni);
        for (int i = 0; ni.op != IC_OP_INPUT && ni.op != IC_OP_PARAM && i < ni.ninputs; i++)
            if (ni.inputs[i].node >= 0)
                F->uses[ni.inputs[i].node]++;
    }
    for (int i = 0; i < ic_graph_num_outputs(F->g); i++)
        F->uses[ic_graph_output(F->g, i)] += 2; /* an output conv keeps its value */
}

ic_status ic__graph_fold_conv_bn(ic_ctx *c, const ic_graph *g, ic_graph **out)
{
    *out = NULL;
    int n = ic_graph_num_nodes(g), nfold = 0;
    bnf F = { .g = g };
    F.map = calloc((size_t)n + 1, sizeof *F.map);
    F.uses = calloc((size_t)n + 1, sizeof *F.uses);
    ic_value *conv_of = calloc((size_t)n + 1, sizeof *conv_of);
    char *absorbed = calloc((size_t)n + 1, 1);
    ic_status s = IC_OK;
    if (!F.map || !F.uses || !conv_of || !absorbed) {
        s = ic__error(c, IC_ENOMEM, "freezing: out of memory");
        goto done;
    }
    count_uses(&F, n);
    for (int v = 0; v < n; v++)
        if ((conv_of[v] = foldable(&F, v)) >= 0)
            absorbed[conv_of[v]] = 1, nfold++;
    if (!nfold || (s = ic_graph_create(c, ic_graph_name(g), &F.dst)) ||
        (s = ic__graph_set_source(F.dst, ic_graph_source(g))))
        goto done;
    for (int v = 0; v < n && !s; v++) {
        ic_node_info ni, cv;
        ic_graph_node(g, v, &ni);
        if (absorbed[v])
            continue;  /* its batch_norm writes it */
        if (conv_of[v] >= 0) {
            ic_graph_node(g, conv_of[v], &cv);
            s = fold_pair(&F, &ni, &cv, &F.map[v]);
        } else {
            s = ic__graph_copy_node(F.dst, &ni, F.map, &F.map[v]);
        }
    }
    for (int i = 0; i < ic_graph_num_outputs(g) && !s; i++)
        s = ic_graph_add_output(F.dst, F.map[ic_graph_output(g, i)]);
    if (!s)
        s = ic_graph_verify(F.dst);
done:
    if (s)
        ic_graph_destroy(F.dst);
    else
        *out = F.dst;
    free(F.map), free(F.uses), free(conv_of), free(absorbed);
    return s;
}
