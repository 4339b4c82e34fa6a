/* expand_nn.c - the nn composites as existing graph ops (see expand-impl.h):
 * batch_norm, group_norm, scaled_dot_product_attention, cumsum, stack, masked_fill.
 * (hardtanh, mish, elu, triu, tril are formulas in eval.c; gather and index_select are
 * indirect reads there, like embedding.) f16/bf16 inputs of the norms are computed in f32
 * and rounded once at the end, as PyTorch's kernels do. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "expand-impl.h"

/* ---- helpers ---- */

/* what: the helper's suffix ("<node>.<what>"), or NULL for the composite's last node, which
 * takes the node's own name. */
static ic_status add1(ic__exp *E, const char *what, ic_op op, ic_operand x, const ic_attrs *a, ic_value *out)
{
    return ic__exp_node(E, what, op, 1, &x, a, out);
}

static ic_status add2(ic__exp *E, const char *what, ic_op op, ic_operand x, ic_operand y, ic_value *out)
{
    ic_operand in[2] = { x, y };
    return ic__exp_node(E, what, op, 2, in, NULL, out);
}

static ic_status add_where(ic__exp *E, const char *what, ic_operand c, ic_operand x, ic_operand y, ic_value *out)
{
    ic_operand in[3] = { c, x, y };
    return ic__exp_node(E, what, IC_OP_WHERE, 3, in, NULL, out);
}

static ic_dtype dtype_of(const ic__exp *E, ic_value v)
{
    ic_node_info ni;
    ic__exp_info(E, v, &ni);
    return ni.dtype;
}

/* v as dtype t: v itself when it already is, else a cast node. */
static ic_status cast_to(ic__exp *E, const char *what, ic_value v, ic_dtype t, ic_value *out)
{
    if (dtype_of(E, v) == t) {
        *out = v;
        return IC_OK;
    }
    ic_attrs a;
    ic_attrs_init(&a, IC_OP_CAST);
    a.has_dtype = true;
    a.dtype = t;
    return add1(E, what, IC_OP_CAST, ic_val(v), &a, out);
}

static ic_status reshape_to(ic__exp *E, const char *what, ic_value v, int rank, const int64_t *shape, ic_value *out)
{
    ic_attrs a;
    ic_attrs_init(&a, IC_OP_RESHAPE);
    a.nshape = rank;
    for (int i = 0; i < rank; i++)
        a.shape[i] = ic_dim_const(shape[i]);
    return add1(E, what, IC_OP_RESHAPE, ic_val(v), &a, out);
}

/* A 0-d constant of dtype t (full), which keeps the other operand's dtype in where. */
static ic_status scalar_of(ic__exp *E, const char *what, ic_dtype t, ic_scalar v, ic_value *out)
{
    ic_attrs a;
    ic_attrs_init(&a, IC_OP_FULL);
    a.has_dtype = true;
    a.dtype = t;
    a.value = v;
    return ic__exp_node(E, what, IC_OP_FULL, 0, NULL, &a, out);
}

static int64_t src_dim(const ic__exp *E, int i, int d) { return E->in[i].shape[d].coef; }

static bool is_half(ic_dtype t) { return t == IC_F16 || t == IC_BF16; }

/* A composite computed in ct for a result of dtype t ends in a cast when they differ: its
 * last computing op is then a helper (what), else the node itself (NULL). */
static const char *last_name(ic_dtype ct, ic_dtype t, const char *what) { return ct == t ? NULL : what; }

/* y, the last computing op, as the result: cast to t (named as the node) when needed. */
static ic_status finish(ic__exp *E, ic_value y, ic_dtype t, ic_value *out)
{
    if (dtype_of(E, y) == t) {
        *out = y;
        return IC_OK;
    }
    return cast_to(E, NULL, y, t, out);
}

/* Input i (a per-channel [C] param, or IC_NONE) in dtype ct, reshaped to [C, 1, ...] so it
 * broadcasts over dim 1 of a rank-r input; *out = -1 when absent. */
static ic_status channel_operand(ic__exp *E, const ic_operand *in, int i, ic_dtype ct, int r, const char *what,
                                 ic_value *out)
{
    *out = -1;
    if (i >= E->n.ninputs || in[i].node == IC_NONE)
        return IC_OK;
    char nm[64];
    int64_t shape[IC_MAX_RANK];
    shape[0] = src_dim(E, i, 0);
    for (int d = 1; d < r - 1; d++)
        shape[d] = 1;
    ic_value v;
    snprintf(nm, sizeof nm, "%s_%s", what, ic_dtype_name(ct));
    ic_status s = cast_to(E, nm, in[i].node, ct, &v);
    if (!s && r > 2) {
        snprintf(nm, sizeof nm, "%s_c", what);
        s = reshape_to(E, nm, v, r - 1, shape, &v);
    }
    *out = v;
    return s;
}

/* mask[i, j, 1...] = j <= i (ones: trailing size-1 dims), computed from two aranges rather
 * than stored: no L x S constant (freezing folds it where that pays). */
static ic_status lower_triangle(ic__exp *E, int64_t L, int64_t S, int ones, ic_value *out)
{
    ic_attrs ar;
    ic_attrs_init(&ar, IC_OP_ARANGE);
    ar.has_dtype = true;
    ar.dtype = IC_I64;
    int64_t rshape[IC_MAX_RANK], cshape[IC_MAX_RANK];
    rshape[0] = L, rshape[1] = 1, cshape[0] = S;
    for (int k = 0; k < ones; k++)
        rshape[2 + k] = cshape[1 + k] = 1;
    ic_value i, j;
    ic_status s;
    ar.aend = (ic_scalar){ (double)L, L, true };
    if ((s = ic__exp_node(E, "row", IC_OP_ARANGE, 0, NULL, &ar, &i)) || (s = reshape_to(E, "rows", i, 2 + ones, rshape, &i)))
        return s;
    ar.aend = (ic_scalar){ (double)S, S, true };
    if ((s = ic__exp_node(E, "col", IC_OP_ARANGE, 0, NULL, &ar, &j)) || (s = reshape_to(E, "cols", j, 1 + ones, cshape, &j)))
        return s;
    return add2(E, "lower", IC_OP_LE, ic_val(j), ic_val(i), out);
}

/* ---- batch_norm ---- */

/* (x - mean) * (weight * rsqrt(var + eps)) + bias per channel (dim 1): freezing folds the
 * scale when the statistics are weights. */
static ic_status expand_batch_norm(ic__exp *E, const ic_operand *in, ic_value *out)
{
    ic_dtype t = E->n.dtype, ct = is_half(t) || E->in[1].dtype == IC_F32 ? IC_F32 : t;
    int r = E->n.rank;
    ic_value xc, mean, var, w, b, ve, scale, y;
    ic_status s;
    if ((s = channel_operand(E, in, 1, ct, r, "mean", &mean)) || (s = channel_operand(E, in, 2, ct, r, "var", &var)) ||
        (s = channel_operand(E, in, 3, ct, r, "weight", &w)) || (s = channel_operand(E, in, 4, ct, r, "bias", &b)))
        return s;
    if ((s = add2(E, "var_eps", IC_OP_ADD, ic_val(var), ic_scalar_f(E->n.attrs->eps), &ve)) ||
        (s = add1(E, "rstd", IC_OP_RSQRT, ic_val(ve), NULL, &scale)))
        return s;
    if (w >= 0 && (s = add2(E, "scale", IC_OP_MUL, ic_val(w), ic_val(scale), &scale)))
        return s;
    if ((s = cast_to(E, "x_f32", in[0].node, ct, &xc)) ||
        (s = add2(E, "centered", IC_OP_SUB, ic_val(xc), ic_val(mean), &y)))
        return s;
    const char *last = last_name(ct, t, "y_f32");
    if ((s = add2(E, b >= 0 ? "scaled" : last, IC_OP_MUL, ic_val(y), ic_val(scale), &y)))
        return s;
    if (b >= 0 && (s = add2(E, last, IC_OP_ADD, ic_val(y), ic_val(b), &y)))
        return s;
    return finish(E, y, t, out);
}

/* ---- group_norm ---- */

/* x [N, C, *] as [N, G, C/G * prod(*)], layer_norm over the last dim, back to x's shape,
 * then weight and bias per channel. */
static ic_status expand_group_norm(ic__exp *E, const ic_operand *in, ic_value *out)
{
    ic_dtype t = E->n.dtype, ct = is_half(t) ? IC_F32 : t;
    int r = E->n.rank;
    int64_t G = E->n.attrs->num_groups, N = src_dim(E, 0, 0), C = src_dim(E, 0, 1), inner = 1;
    int64_t shape[IC_MAX_RANK];
    for (int d = 0; d < r; d++)
        shape[d] = src_dim(E, 0, d);
    for (int d = 2; d < r; d++)
        inner *= shape[d];
    int64_t grouped[3] = { N, G, C / G * inner };
    ic_value xc, y, w, b;
    ic_status s;
    ic_attrs ln;
    ic_attrs_init(&ln, IC_OP_LAYER_NORM);
    ln.nshape = 1;
    ln.shape[0] = ic_dim_const(grouped[2]);
    ln.eps = E->n.attrs->eps;
    if ((s = channel_operand(E, in, 1, ct, r, "weight", &w)) || (s = channel_operand(E, in, 2, ct, r, "bias", &b)))
        return s;
    const char *last = last_name(ct, t, "y_f32");
    if ((s = cast_to(E, "x_f32", in[0].node, ct, &xc)) || (s = reshape_to(E, "grouped", xc, 3, grouped, &y)) ||
        (s = add1(E, "normed", IC_OP_LAYER_NORM, ic_val(y), &ln, &y)) ||
        (s = reshape_to(E, w < 0 && b < 0 ? last : "ungrouped", y, r, shape, &y)))
        return s;
    if (w >= 0 && (s = add2(E, b >= 0 ? "scaled" : last, IC_OP_MUL, ic_val(y), ic_val(w), &y)))
        return s;
    if (b >= 0 && (s = add2(E, last, IC_OP_ADD, ic_val(y), ic_val(b), &y)))
        return s;
    return finish(E, y, t, out);
}

/* ---- scaled_dot_product_attention ---- */

/* softmax((q * sqrt(scale)) @ (k^T * sqrt(scale)) + mask) @ v, PyTorch 2.x's math path (its
 * scaling too, which sets the half roundings and makes E = 0 give the mean of v, not NaN; a
 * negative scale gives NaN there as here): a bool mask (and is_causal's
 * lower triangle) picks the scores, the others become -inf; a float mask is
 * added. A row with every score masked is NaN, as there (PyTorch >= 2.5 gives 0). */
static ic_status expand_sdpa(ic__exp *E, const ic_operand *in, ic_value *out)
{
    const ic_attrs *at = E->n.attrs;
    int rq = E->in[0].rank, rk = E->in[1].rank;
    int64_t L = src_dim(E, 0, rq - 2), S = src_dim(E, 1, rk - 2), Ed = src_dim(E, 0, rq - 1);
    double scale = at->has_scale ? at->scale : 1 / sqrt((double)Ed);
    ic_value kt, qs, sc, p;
    ic_status s;
    ic_attrs tr, sm;
    ic_attrs_init(&tr, IC_OP_TRANSPOSE);
    tr.dim0 = -2, tr.dim1 = -1;
    ic_attrs_init(&sm, IC_OP_SOFTMAX);
    sm.dim = -1;
    ic_operand root = ic_scalar_f(sqrt(scale));
    if ((s = add1(E, "kt", IC_OP_TRANSPOSE, ic_val(in[1].node), &tr, &kt)) ||
        (s = add2(E, "kt_scaled", IC_OP_MUL, ic_val(kt), root, &kt)) ||
        (s = add2(E, "q_scaled", IC_OP_MUL, ic_val(in[0].node), root, &qs)) ||
        (s = add2(E, "scores", IC_OP_MATMUL, ic_val(qs), ic_val(kt), &sc)))
        return s;
    ic_operand ninf = ic_scalar_f(-INFINITY);
    if (at->is_causal) {
        ic_value cm;
        if ((s = lower_triangle(E, L, S, 0, &cm)) || (s = add_where(E, "masked", ic_val(cm), ic_val(sc), ninf, &sc)))
            return s;
    } else if (E->n.ninputs > 3 && in[3].node != IC_NONE) {
        ic_dtype mt = E->in[3].dtype;
        s = mt == IC_BOOL ? add_where(E, "masked", ic_val(in[3].node), ic_val(sc), ninf, &sc)
                          : add2(E, "masked", IC_OP_ADD, ic_val(sc), ic_val(in[3].node), &sc);
        /* an f32 mask on half scores: PyTorch adds it in place (scores.add_(mask)), so the
         * sum is rounded to the scores' dtype */
        if (s || (mt != IC_BOOL && (s = cast_to(E, "masked_cast", sc, E->n.dtype, &sc))))
            return s;
    }
    if ((s = add1(E, "probs", IC_OP_SOFTMAX, ic_val(sc), &sm, &p)))
        return s;
    return add2(E, NULL, IC_OP_MATMUL, ic_val(p), ic_val(in[2].node), out);
}

/* ---- cumsum, stack, masked_fill ---- */

/* y[.., i, ..] = sum over j <= i of x[.., j, ..]: x (in the result dtype) with a new dim at
 * dim, where(mask[i, j] = j <= i, x, 0), summed over j. n^2 work along dim, all in one
 * fused reduction; exact for integers. */
static ic_status expand_cumsum(ic__exp *E, const ic_operand *in, ic_value *out)
{
    ic_dtype t = E->n.dtype;
    int r = E->n.rank, d = r ? (int)(E->n.attrs->dim < 0 ? E->n.attrs->dim + r : E->n.attrs->dim) : 0;
    int64_t n = r ? src_dim(E, 0, d) : 1;
    ic_value xc, xe, zero, cm, w, y;
    ic_status s;
    if (n <= 1) { /* nothing to add up: the input in the result dtype */
        if (E->in[0].dtype != t)
            return cast_to(E, NULL, in[0].node, t, out);
        int64_t shape[IC_MAX_RANK];
        for (int k = 0; k < r; k++)
            shape[k] = src_dim(E, 0, k);
        return reshape_to(E, NULL, in[0].node, r, shape, out);
    }
    s = lower_triangle(E, n, n, r - 1 - d, &cm);
    ic_attrs un, sum;
    ic_attrs_init(&un, IC_OP_UNSQUEEZE);
    un.dim = d;
    ic_attrs_init(&sum, IC_OP_SUM);
    sum.has_dims = true;
    sum.ndims = 1;
    sum.dims[0] = d + 1;
    if (s || (s = cast_to(E, "x_cast", in[0].node, t, &xc)) || (s = add1(E, "x_unsqueezed", IC_OP_UNSQUEEZE, ic_val(xc), &un, &xe)) ||
        (s = scalar_of(E, "zero", t, (ic_scalar){ 0, 0, true }, &zero)) ||
        (s = add_where(E, "terms", ic_val(cm), ic_val(xe), ic_val(zero), &w)))
        return s;
    /* sum takes integers in i64: an i32 result is the wrapped i64 sum, as PyTorch's */
    ic_dtype st = ic_dtype_is_float(t) ? t : IC_I64;
    if ((s = add1(E, st == t ? NULL : "sum", IC_OP_SUM, ic_val(w), &sum, &y)))
        return s;
    return finish(E, y, t, out);
}

static ic_status expand_stack(ic__exp *E, const ic_operand *in, ic_value *out)
{
    ic_operand u[IC_MAX_INPUTS];
    ic_attrs un, cat;
    ic_attrs_init(&un, IC_OP_UNSQUEEZE);
    un.dim = E->n.attrs->dim;
    ic_attrs_init(&cat, IC_OP_CAT);
    cat.dim = E->n.attrs->dim;
    for (int k = 0; k < E->n.ninputs; k++) {
        char nm[32];
        snprintf(nm, sizeof nm, "item%d", k);
        ic_value v;
        ic_status s = add1(E, nm, IC_OP_UNSQUEEZE, in[k], &un, &v);
        if (s)
            return s;
        u[k] = ic_val(v);
    }
    return ic__exp_node(E, NULL, IC_OP_CAT, E->n.ninputs, u, &cat, out);
}

/* where(mask, value, x) with value a 0-d constant of x's dtype (so x's dtype stays; a
 * float value on an integer x truncates, as PyTorch's fill converts it). */
static ic_status expand_masked_fill(ic__exp *E, const ic_operand *in, ic_value *out)
{
    ic_value fill;
    ic_status s = scalar_of(E, "value", E->in[0].dtype, E->n.attrs->value, &fill);
    return s ? s : add_where(E, NULL, in[1], ic_val(fill), in[0], out);
}

ic__expand_fn ic__expand_nn(ic_op op)
{
    switch (op) {
    case IC_OP_BATCH_NORM: return expand_batch_norm;
    case IC_OP_GROUP_NORM: return expand_group_norm;
    case IC_OP_SDPA: return expand_sdpa;
    case IC_OP_CUMSUM: return expand_cumsum;
    case IC_OP_STACK: return expand_stack;
    case IC_OP_MASKED_FILL: return expand_masked_fill;
    default: return NULL;
    }
}
