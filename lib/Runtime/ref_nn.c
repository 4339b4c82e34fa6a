/* ref_nn.c - the reference executor's nn ops (issue 12): batch_norm, group_norm,
 * scaled_dot_product_attention, gather, index_select, cumsum, stack, masked_fill,
 * hardtanh, mish, elu, triu, tril. Written from PyTorch's kernels in plain C on doubles,
 * one element at a time; the compiled path writes most of them as other ops
 * (lib/Lower/expand_nn.c), so this file is the independent oracle for it. */
#include <string.h>
#include "ref-impl.h"

#define FAIL(g, n, code, ...) \
    ic__node_error((g), (n)->info.name, ic_op_name((n)->info.op), (code), __VA_ARGS__)

/* ---- helpers ---- */

/* The coordinates of flat element e of a row-major shape. */
static void unravel(int64_t e, int rank, const int64_t *shape, int64_t *coord)
{
    for (int d = rank - 1; d >= 0; d--) {
        coord[d] = shape[d] ? e % shape[d] : 0;
        e = shape[d] ? e / shape[d] : 0;
    }
}

/* The flat offset in t of coord (rank r), t right-aligned to it and broadcast (a dim of
 * size 1 reads element 0). */
static int64_t bcast_offset(const ic_tensor *t, int r, const int64_t *coord)
{
    int64_t off = 0;
    for (int d = 0; d < t->rank; d++) {
        int64_t c = t->shape[d] == 1 ? 0 : coord[d + r - t->rank];
        off = off * t->shape[d] + c;
    }
    return off;
}

/* Element i of t as a double (integers and bool exactly). */
static double getd(const ic_tensor *t, int64_t i)
{
    return ic_dtype_is_float(t->dtype) ? ic__ref_getf(t, i) : (double)ic__ref_geti(t, i);
}

/* Element i of x converted to out's dtype and stored at j (PyTorch's cast: float to
 * integer truncates, anything to bool is "nonzero"). */
static void convert(const ic_tensor *x, int64_t i, ic_tensor *out, int64_t j)
{
    if (out->dtype == IC_BOOL)
        ic__ref_seti(out, j, getd(x, i) != 0);
    else if (ic_dtype_is_float(out->dtype))
        ic__ref_setf(out, j, getd(x, i));
    else
        ic__ref_seti(out, j, ic__ref_geti(x, i));
}

static void copy_elem(const ic_tensor *x, int64_t i, ic_tensor *out, int64_t j)
{
    size_t es = ic_dtype_size(out->dtype);
    memcpy((char *)out->data + (size_t)j * es, (const char *)x->data + (size_t)i * es, es);
}

/* ---- pointwise: hardtanh, mish, elu, triu, tril ---- */

static double mish(double x) { return x * tanh(log1p(exp(x))); }

/* elu: x where x > 0, else alpha * (exp(x) - 1) (NaN stays NaN). */
static double elu(double x, double alpha) { return x > 0 || isnan(x) ? x : alpha * expm1(x); }

/* hardtanh is clamp(x, min_val, max_val), max applied last, NaN kept; on integers the
 * bounds are truncated to integers first, as PyTorch converts them to the tensor's type. */
static ic_status ref_pointwise(const ic_graph *g, const ic_node *n, const ic_tensor *const *ins, ic_tensor *out)
{
    const ic_tensor *x = ins[0];
    const ic_attrs *a = &n->attrs;
    int64_t total = ic_tensor_numel(out);
    bool fl = ic_dtype_is_float(out->dtype);
    for (int64_t i = 0; i < total; i++) {
        if (n->info.op == IC_OP_HARDTANH && !fl) {
            int64_t v = ic__ref_geti(x, i), lo = (int64_t)a->min_val, hi = (int64_t)a->max_val;
            ic__ref_seti(out, i, v < lo ? (lo > hi ? hi : lo) : v > hi ? hi : v);
            continue;
        }
        double v = ic__ref_getf(x, i), r;
        switch (n->info.op) {
        case IC_OP_HARDTANH:
            r = isnan(v) ? v : fmin(fmax(v, a->min_val), a->max_val);
            break;
        case IC_OP_MISH: r = mish(v); break;
        default: r = elu(v, ic__ref_round(n->compute, a->alpha)); break;
        }
        ic__ref_setf(out, i, r);
    }
    (void)g;
    return IC_OK;
}

/* triu keeps the elements with col - row >= diagonal, tril those with col - row <=
 * diagonal, over the last two dims; the others are 0 (false). */
static ic_status ref_tri(const ic_graph *g, const ic_node *n, const ic_tensor *const *ins, ic_tensor *out)
{
    const ic_tensor *x = ins[0];
    int r = x->rank;
    int64_t rows = x->shape[r - 2], cols = x->shape[r - 1], total = ic_tensor_numel(out);
    int64_t dg = n->attrs.diagonal;
    for (int64_t i = 0; i < total; i++) {
        int64_t col = i % cols, row = (i / cols) % rows;
        bool keep = n->info.op == IC_OP_TRIU ? col - row >= dg : col - row <= dg;
        if (keep)
            copy_elem(x, i, out, i);
        else
            ic__ref_seti(out, i, 0);
    }
    (void)g;
    return IC_OK;
}

/* ---- batch_norm, group_norm ---- */

static double param_or(const ic_tensor *t, int64_t c, double dflt) { return t ? getd(t, c) : dflt; }

/* (x - mean[c]) * (weight[c] / sqrt(var[c] + eps)) + bias[c], c = dim 1. */
static ic_status ref_batch_norm(const ic_graph *g, const ic_node *n, const ic_tensor *const *ins, ic_tensor *out)
{
    const ic_tensor *x = ins[0], *mean = ins[1], *var = ins[2];
    const ic_tensor *w = n->info.ninputs > 3 ? ins[3] : NULL, *b = n->info.ninputs > 4 ? ins[4] : NULL;
    int64_t C = x->shape[1], inner = 1, total = ic_tensor_numel(out);
    for (int d = 2; d < x->rank; d++)
        inner *= x->shape[d];
    for (int64_t i = 0; i < total; i++) {
        int64_t c = (i / inner) % C;
        double scale = param_or(w, c, 1) / sqrt(getd(var, c) + n->attrs.eps);
        ic__ref_setf(out, i, (getd(x, i) - getd(mean, c)) * scale + param_or(b, c, 0));
    }
    (void)g;
    return IC_OK;
}

/* Each (sample, group) block of C/G channels x spatial elements (contiguous) is
 * normalised by its mean and biased variance, then scaled per channel. */
static ic_status ref_group_norm(const ic_graph *g, const ic_node *n, const ic_tensor *const *ins, ic_tensor *out)
{
    const ic_tensor *x = ins[0];
    const ic_tensor *w = n->info.ninputs > 1 ? ins[1] : NULL, *b = n->info.ninputs > 2 ? ins[2] : NULL;
    int64_t N = x->shape[0], C = x->shape[1], G = n->attrs.num_groups, inner = 1;
    for (int d = 2; d < x->rank; d++)
        inner *= x->shape[d];
    int64_t M = C / G * inner;
    for (int64_t blk = 0; blk < N * G; blk++) {
        int64_t base = blk * M;
        double sum = 0, sq = 0;
        for (int64_t j = 0; j < M; j++)
            sum += getd(x, base + j);
        double mean = M ? sum / (double)M : 0;
        for (int64_t j = 0; j < M; j++) {
            double dv = getd(x, base + j) - mean;
            sq += dv * dv;
        }
        double rstd = 1 / sqrt((M ? sq / (double)M : 0) + n->attrs.eps);
        for (int64_t j = 0; j < M; j++) {
            int64_t c = (blk % G) * (C / G) + j / inner;
            double v = (getd(x, base + j) - mean) * rstd;
            ic__ref_setf(out, base + j, v * param_or(w, c, 1) + param_or(b, c, 0));
        }
    }
    (void)g;
    return IC_OK;
}

/* ---- scaled_dot_product_attention ---- */

/* v rounded to float dtype t. */
static double round_to(ic_dtype t, double v)
{
    return t == IC_F16 ? ic_f16_to_f32(ic_f32_to_f16((float)v))
         : t == IC_BF16 ? ic_bf16_to_f32(ic_f32_to_bf16((float)v))
         : t == IC_F32 ? (double)(float)v : v;
}

/* Offset in out of (batch.., l, 0): a fused sdpa with transpose_out stores [.., L, H, E]. */
static int64_t out_offset(const ic_node *n, const ic_tensor *out, const int64_t *co)
{
    int r = out->rank;
    if (!n->attrs.transpose_out)
        return bcast_offset(out, r, co);
    int64_t t[IC_MAX_RANK];
    memcpy(t, co, sizeof(int64_t) * (size_t)r);
    t[r - 3] = co[r - 2];
    t[r - 2] = co[r - 3];
    return bcast_offset(out, r, t);
}

/* softmax((q sqrt(scale)) (k sqrt(scale))^T + mask) v for each batch index and query row,
 * PyTorch 2.x's math path (E = 0 gives the mean of v; a negative scale NaN):
 * a bool mask's false and is_causal's upper triangle (col > row) are -inf, so a row with
 * every score masked is 0/0 = NaN (PyTorch >= 2.5 returns 0 there instead). */
static ic_status ref_sdpa(const ic_graph *g, const ic_node *n, const ic_tensor *const *ins, ic_tensor *out)
{
    const ic_tensor *q = ins[0], *k = ins[1], *v = ins[2];
    const ic_tensor *m = n->info.ninputs > 3 ? ins[3] : NULL;
    int r = out->rank;
    int64_t L = q->shape[q->rank - 2], E = q->shape[q->rank - 1], S = k->shape[k->rank - 2];
    int64_t Ev = v->shape[v->rank - 1], nb = 1, ls[IC_MAX_RANK]; /* ls: the logical shape */
    memcpy(ls, out->shape, sizeof(int64_t) * (size_t)r);
    if (n->attrs.transpose_out)
        ls[r - 3] = out->shape[r - 2], ls[r - 2] = out->shape[r - 3];
    for (int d = 0; d < r - 2; d++)
        nb *= ls[d];
    double root = sqrt(n->attrs.has_scale ? n->attrs.scale : 1 / sqrt((double)E));
    double *p = ic__malloc(g->c, sizeof(double) * (size_t)(S ? S : 1));
    if (!p)
        return FAIL(g, n, IC_ENOMEM, "out of memory");
    int64_t co[IC_MAX_RANK];
    for (int64_t bi = 0; bi < nb; bi++) {
        unravel(bi, r - 2, ls, co);
        for (int64_t l = 0; l < L; l++) {
            co[r - 2] = l, co[r - 1] = 0;
            int64_t qo = bcast_offset(q, r, co);
            double mx = -INFINITY, den = 0;
            for (int64_t s = 0; s < S; s++) {
                co[r - 2] = s, co[r - 1] = 0;
                int64_t ko = bcast_offset(k, r, co);
                double acc = 0;
                if (n->attrs.round_scores) { /* the chain it replaces: rounded q . k, then scaled */
                    for (int64_t e = 0; e < E; e++)
                        acc += getd(q, qo + e) * getd(k, ko + e);
                    acc = round_to(q->dtype, round_to(q->dtype, acc) * (n->attrs.has_scale ? n->attrs.scale : 1 / sqrt((double)E)));
                } else {
                    for (int64_t e = 0; e < E; e++)
                        acc += getd(q, qo + e) * root * (getd(k, ko + e) * root);
                }
                co[r - 2] = l, co[r - 1] = s;
                if (n->attrs.is_causal && s > l)
                    acc = -INFINITY;
                else if (m && m->dtype == IC_BOOL)
                    acc = ic__ref_geti(m, bcast_offset(m, r, co)) ? acc : -INFINITY;
                else if (m)
                    acc = n->attrs.round_scores ? round_to(q->dtype, acc + getd(m, bcast_offset(m, r, co)))
                                                : acc + getd(m, bcast_offset(m, r, co));
                p[s] = acc;
                mx = acc > mx ? acc : mx;
            }
            for (int64_t s = 0; s < S; s++) {
                p[s] = exp(p[s] - mx); /* all -inf: -inf - -inf = NaN, as PyTorch */
                den += p[s];
            }
            co[r - 2] = l, co[r - 1] = 0;
            int64_t oo = out_offset(n, out, co);
            for (int64_t e = 0; e < Ev; e++) {
                double acc = 0;
                for (int64_t s = 0; s < S; s++) {
                    co[r - 2] = s, co[r - 1] = e;
                    acc += p[s] / den * getd(v, bcast_offset(v, r, co));
                }
                ic__ref_setf(out, oo + e, acc);
            }
        }
    }
    ic__free(g->c, p);
    return IC_OK;
}

/* ---- gather, index_select ---- */

/* An index outside [0, size) is an error, as in PyTorch (negative ones too). */
static ic_status ref_gather(const ic_graph *g, const ic_node *n, const ic_tensor *const *ins, ic_tensor *out)
{
    const ic_tensor *x = ins[0], *ix = ins[1];
    int r = out->rank, d = n->axis;
    int64_t total = ic_tensor_numel(out), co[IC_MAX_RANK] = { 0 }, size = x->rank ? x->shape[d] : 1;
    bool gather = n->info.op == IC_OP_GATHER;
    for (int64_t e = 0; e < total; e++) {
        unravel(e, r, out->shape, co);
        int64_t at = gather ? e : ix->rank ? co[d] : 0, v = ic__ref_geti(ix, at);
        if (v < 0 || v >= size)
            return FAIL(g, n, IC_EINVAL, "index %lld (index element %lld) is out of range for dim %d of "
                        "size %lld", (long long)v, (long long)at, d, (long long)size);
        co[d] = v;
        int64_t off = 0;
        for (int k = 0; k < r; k++)
            off = off * x->shape[k] + co[k];
        copy_elem(x, off, out, e);
    }
    return IC_OK;
}

/* ---- cumsum, stack, masked_fill ---- */

/* Running sums along dim in the result dtype: exact (wrapping) for integers; floats
 * accumulate in double and round each output, as PyTorch's CPU kernel does. The input is
 * converted to the result dtype first (a dtype attr of i32 truncates floats). */
static ic_status ref_cumsum(const ic_graph *g, const ic_node *n, const ic_tensor *const *ins, ic_tensor *out)
{
    const ic_tensor *x = ins[0];
    int r = out->rank, d = n->axis;
    int64_t len = r ? out->shape[d] : 1, inner = 1, total = ic_tensor_numel(out);
    for (int k = d + 1; k < r; k++)
        inner *= out->shape[k];
    for (int64_t i = 0; i < total; i++)
        convert(x, i, out, i);
    bool fl = ic_dtype_is_float(out->dtype);
    for (int64_t o = 0; len && o < total / len; o++) {
        int64_t base = o / inner * inner * len + o % inner, iacc = 0;
        double facc = 0;
        for (int64_t j = 0; j < len; j++) {
            int64_t at = base + j * inner;
            if (fl) {
                facc += ic__ref_getf(out, at);
                ic__ref_setf(out, at, facc);
            } else {
                iacc = (int64_t)((uint64_t)iacc + (uint64_t)ic__ref_geti(out, at));
                ic__ref_seti(out, at, iacc);
            }
        }
    }
    (void)g;
    return IC_OK;
}

static ic_status ref_stack(const ic_graph *g, const ic_node *n, const ic_tensor *const *ins, ic_tensor *out)
{
    int r = out->rank, d = n->axis;
    int64_t total = ic_tensor_numel(out), co[IC_MAX_RANK];
    for (int64_t e = 0; e < total; e++) {
        unravel(e, r, out->shape, co);
        const ic_tensor *x = ins[co[d]];
        int64_t off = 0;
        for (int k = 0; k < r; k++)
            if (k != d)
                off = off * out->shape[k] + co[k];
        convert(x, off, out, e);
    }
    (void)g;
    return IC_OK;
}

/* value converted to x's dtype as PyTorch's fill does (a float to an integer truncates). */
static ic_status ref_masked_fill(const ic_graph *g, const ic_node *n, const ic_tensor *const *ins, ic_tensor *out)
{
    const ic_tensor *x = ins[0], *m = ins[1];
    ic_scalar val = n->attrs.value;
    int r = out->rank;
    int64_t total = ic_tensor_numel(out), co[IC_MAX_RANK];
    for (int64_t e = 0; e < total; e++) {
        unravel(e, r, out->shape, co);
        if (!ic__ref_geti(m, bcast_offset(m, r, co))) {
            copy_elem(x, bcast_offset(x, r, co), out, e);
        } else if (out->dtype == IC_BOOL) {
            ic__ref_seti(out, e, val.is_int ? val.i != 0 : val.f != 0);
        } else if (ic_dtype_is_float(out->dtype)) {
            ic__ref_setf(out, e, val.is_int ? (double)(float)val.i : val.f);
            if (val.is_int && out->dtype == IC_F64)
                ic__ref_setf(out, e, (double)val.i);
        } else {
            ic__ref_seti(out, e, val.is_int ? val.i : (int64_t)val.f);
        }
    }
    (void)g;
    return IC_OK;
}

ic__ref_fn ic__ref_nn_kernel(ic_op op)
{
    switch (op) {
    case IC_OP_HARDTANH: case IC_OP_MISH: case IC_OP_ELU: return ref_pointwise;
    case IC_OP_TRIU: case IC_OP_TRIL: return ref_tri;
    case IC_OP_BATCH_NORM: return ref_batch_norm;
    case IC_OP_GROUP_NORM: return ref_group_norm;
    case IC_OP_SDPA: return ref_sdpa;
    case IC_OP_GATHER: case IC_OP_INDEX_SELECT: return ref_gather;
    case IC_OP_CUMSUM: return ref_cumsum;
    case IC_OP_STACK: return ref_stack;
    case IC_OP_MASKED_FILL: return ref_masked_fill;
    default: return NULL;
    }
}
