/* decompose.c - reductions, normalisations and contractions as stages of one kernel:
 *   sum mean prod amax amin argmax: one REDUCE (float sums and products accumulate in f64,
 *     as the reference does; mean = sum / n);
 *   softmax / log_softmax: REDUCE max, then REDUCE sum exp(x - max) (in the compute type:
 *     the terms lie in (0, 1]), then the row; exp(x - max) (x - max for log_softmax) is
 *     stashed in the output buffer by the second pass, when the kernel stores the node there
 *     in the compute type, so the row pass rescales it instead of computing exp again;
 *   layer_norm: two passes over the row (it is in cache) in the compute type: REDUCE sum x,
 *     then REDUCE sum d and sum d^2 with d = x - mean (the sum of d corrects the mean's
 *     rounding), then the row with weight/bias; an input computed in the kernel is stashed in
 *     the output buffer by the first pass instead of being recomputed by the later ones;
 *   rms_norm: one REDUCE of the sum of squares in f64;
 *   matmul / bmm / linear: a REDUCE over K of a * b (accumulated in the compute type, f32 for
 *     f16/bf16, as a BLAS would), operands always loaded, never recomputed inline.
 * The value of such a node is only available at its natural index, after its stages. */
#include <string.h>
#include "gen.h"

bool ic__idx_eq(int rank, const ic__ix *const *a, const ic__ix *const *b)
{
    for (int i = 0; i < rank; i++)
        if (a[i] != b[i])
            return false;
    return true;
}

enum { ALL_DIMS, IN_MASK, NOT_IN_MASK };

/* Dims i.. of shape (from i, those of `sel`) that together hold domain dim d (their sizes
 * multiply to its size): their indices delinearise d's; the count of dims used, 0 when none
 * fits. A conv's matmul runs over [Cout, H*W] while its epilogue reads [N, Cout, H, W]. */
static int split_dim(ic__gen *G, int rank, const ic_dim *shape, int i, const ic__ldim *d,
                     const ic__ix **idx)
{
    int64_t p = 1, sizes[IC_MAX_RANK];
    int j = i;
    while (j < rank && p < d->size && shape[j].coef > 0 && d->size % (p * shape[j].coef) == 0)
        p *= shape[j].coef, sizes[j - i] = shape[j].coef, j++;
    if (p != d->size || j - i < 2)
        return 0;
    ic__ix_delinear(&G->ix, d->ix, j - i, sizes, idx + i);
    return j - i;
}

/* Domain dims k.. that together make dim `size` of the node: its index is their linear
 * index; the count used, 0 when none fits. */
static int merge_dims(ic__gen *G, int64_t size, int k, int nd, const ic__ldim *dims, const ic__ix **out)
{
    int64_t p = 1, sizes[IC_MAX_RANK];
    const ic__ix *ix[IC_MAX_RANK];
    int m = k;
    while (m < nd && p < size && size % (p * dims[m].size) == 0)
        p *= dims[m].size, sizes[m - k] = dims[m].size, ix[m - k] = dims[m].ix, m++;
    if (p != size || m - k < 2)
        return 0;
    *out = ic__ix_linear(&G->ix, m - k, sizes, ix);
    return m - k;
}

/* Maps the non-1 dims of shape chosen by (mask, sel), in order, onto the domain dims. With
 * ALL_DIMS a domain dim may also hold several consecutive dims of the shape, or a dim of the
 * shape several domain dims (the same elements in the same row-major order). */
static bool match(ic__gen *G, int rank, const ic_dim *shape, uint32_t mask, int sel, int nd,
                  const ic__ldim *dims, const ic__ix **idx)
{
    int k = 0;
    for (int i = 0; i < rank; i++) {
        bool in = (mask >> i) & 1u;
        if ((sel == IN_MASK && !in) || (sel == NOT_IN_MASK && in))
            continue;
        if (shape[i].coef == 1) {
            idx[i] = ic__ix_const(&G->ix, 0);
            continue;
        }
        if (k >= nd)
            return false;
        if (dims[k].size == shape[i].coef) {
            idx[i] = dims[k++].ix;
            continue;
        }
        int n;
        if (sel != ALL_DIMS)
            return false;
        if ((n = split_dim(G, rank, shape, i, &dims[k], idx)) > 0) {
            i += n - 1;
            k++;
        } else if ((n = merge_dims(G, shape[i].coef, k, nd, dims, &idx[i])) > 0) {
            k += n;
        } else {
            return false;
        }
    }
    return k == nd;
}

bool ic__nat_outer(ic__gen *G, int rank, const ic_dim *shape, const ic__ix **idx)
{
    return match(G, rank, shape, 0, ALL_DIMS, G->nodims, G->od, idx);
}

bool ic__nat_row(ic__gen *G, int rank, const ic_dim *shape, const ic__ix **idx)
{
    return G->has_row && match(G, rank, shape, 0, ALL_DIMS, G->nrdims, G->rd, idx);
}

bool ic__nat_input(ic__gen *G, const ic_node *n, const ic__ix **idx)
{
    const ic_node *x = ic__gnode(G, n->in[0].node);
    int r = x->info.rank;
    uint32_t mask = n->axes & (r ? (1u << r) - 1 : 0);
    const ic__ix *a[IC_MAX_RANK], *b[IC_MAX_RANK];
    if (!match(G, r, x->shape, mask, NOT_IN_MASK, G->nodims, G->od, a) ||
        !match(G, r, x->shape, mask, IN_MASK, G->nidims, G->id, b))
        return false;
    for (int i = 0; i < r; i++)
        idx[i] = (mask >> i) & 1u ? b[i] : a[i];
    return true;
}

bool ic__nat_output(ic__gen *G, const ic_node *n, const ic__ix **idx)
{
    if (ic__node_class(n) == IC__CL_NORM)
        return ic__nat_input(G, n, idx);
    return ic__nat_outer(G, n->info.rank, n->shape, idx);
}

/* ---- planning ---- */

static int max_avail(ic__gen *G, const ic_node *n, int from, int to)
{
    int a = 0;
    for (int i = from; i < to && i < n->info.ninputs; i++)
        if (n->in[i].node >= 0) {
            int b = ic__avail(G, n->in[i].node);
            a = b > a ? b : a;
        }
    return a;
}

/* Operands [0, nmain) feed the reduces; the rest (weight, bias) only the final value. */
static int nmain(const ic_node *n) { return ic__node_class(n) == IC__CL_MM ? 2 : 1; }

static bool is_softmax(const ic_node *n)
{
    return n->info.op == IC_OP_SOFTMAX || n->info.op == IC_OP_LOG_SOFTMAX;
}

/* The buffer this kernel stores norm n (value v) into, when a per-element intermediate of
 * the compute type can live there between passes: it is overwritten by the final value at
 * the same index in the row pass, which comes after every pass that reads it. */
static int stash_buf(const ic__gen *G, ic_value v, const ic_node *n)
{
    if (!G->s->stash_rows || ic__node_class(n) != IC__CL_NORM || n->info.op == IC_OP_RMS_NORM ||
        !ic__computed_here(G, v))
        return -1;
    int b = G->p->node_buf[v];
    if (b < 0)
        return -1;
    const ic_buffer *bf = &G->p->bufs[b];
    if ((bf->kind != IC_BUF_OUTPUT && bf->kind != IC_BUF_TEMP) || bf->dtype != ic__regty(n->info.dtype))
        return -1;
    /* layer_norm: only an input computed here is worth keeping (a plain load is as cheap) */
    if (n->info.op == IC_OP_LAYER_NORM && !ic__computed_here(G, n->in[0].node))
        return -1;
    return b;
}

static int plan(ic__gen *G, ic_value v, const ic_node *n)
{
    ic__redinfo *ri = &G->red[v];
    if (!ri->planned) {
        int first = max_avail(G, n, 0, nmain(n));
        bool two = is_softmax(n) || n->info.op == IC_OP_LAYER_NORM;
        ri->planned = true;
        ri->stage0 = first;
        ri->stage1 = two ? first + 1 : -1;
        ri->last = two ? first + 1 : first;
        ri->r0 = ri->r1 = ri->r2 = -1;
        ri->stash = stash_buf(G, v, n);
    }
    int post = max_avail(G, n, nmain(n), n->info.ninputs);
    return post > ri->last + 1 ? post : ri->last + 1;
}

int ic__avail(ic__gen *G, ic_value v)
{
    if (G->avail[v] >= 0)
        return G->avail[v];
    const ic_node *n = ic__gnode(G, v);
    ic__class k = ic__node_class(n);
    int a = 0;
    if (k == IC__CL_VIEW)
        a = ic__avail(G, n->in[0].node);
    else if (!ic__computed_here(G, v))
        a = 0;
    else if (ic__reduce_like(k))
        a = plan(G, v, n);
    else
        a = max_avail(G, n, 0, n->info.ninputs);
    G->avail[v] = a;
    return a;
}

/* ---- reduces ---- */

static ic_dtype sum_type(ic_dtype t) { return ic__is_fp(t) ? IC_F64 : IC_I64; }

static int64_t reduced_count(const ic__gen *G, const ic_node *n)
{
    const ic_node *x = ic__gnode(G, n->in[0].node);
    int64_t c = 1;
    for (int i = 0; i < x->info.rank; i++)
        if ((n->axes >> i) & 1u)
            c *= ic__dim(x, i);
    return c;
}

static int emit_red(ic__gen *G, const ic_node *n, const ic__ix *const *nidx)
{
    ic__kb *b = &G->kb;
    const ic_node *xn = ic__gnode(G, n->in[0].node);
    ic_dtype xt = ic__regty(xn->info.dtype);
    int x = ic__eval(G, n->in[0].node, nidx);
    switch (n->info.op) {
    case IC_OP_SUM: case IC_OP_MEAN: case IC_OP_PROD: {
        ic_dtype t = sum_type(xt);
        ic_red red = n->info.op == IC_OP_PROD ? IC_RED_PROD : IC_RED_SUM;
        return ic__kb_reduce(b, red, t, ic__kb_cast(b, t, x), -1);
    }
    case IC_OP_AMAX: case IC_OP_AMIN: {
        ic_dtype t = xt == IC_BOOL ? IC_I32 : xt;
        return ic__kb_reduce(b, n->info.op == IC_OP_AMAX ? IC_RED_MAX : IC_RED_MIN, t,
                             ic__kb_cast(b, t, x), -1);
    }
    default: { /* argmax: the position along the reduced dim */
        int pos = xn->info.rank ? ic__kb_ix(b, nidx[n->axis]) : ic__kb_const_i(b, IC_I64, 0);
        return ic__kb_reduce(b, IC_RED_ARGMAX, xt, x, pos);
    }
    }
}

/* Whether the first pass keeps norm n's input in the stash for the second: when it is
 * computed in the kernel (a plain load is as cheap as reading it back). */
static bool stash_input(const ic__gen *G, const ic_node *n, const ic__redinfo *ri)
{
    return ri->stash >= 0 && ic__computed_here(G, n->in[0].node);
}

/* Flat offset of norm n's element idx in its own (stash) buffer. */
static int stash_off(ic__gen *G, const ic_node *n, const ic__ix *const *idx)
{
    int64_t shape[IC_MAX_RANK];
    for (int i = 0; i < n->info.rank; i++)
        shape[i] = ic__dim(n, i);
    return ic__kb_ix(&G->kb, ic__ix_linear(&G->ix, n->info.rank, shape, idx));
}

/* Softmax: stage 0 max, stage 1 sum of exp(x - max) (stashing exp(x - max), or x - max for
 * log_softmax). layer_norm: stage 0 sum x (stashing x), stage 1 sums of d and d^2, d = x -
 * mean. rms_norm: sum of x^2 in f64. Statistics of softmax and layer_norm are lane-wise
 * partial sums in the compute type: vector accumulators at full width, no conversions. */
static bool emit_norm(ic__gen *G, const ic_node *n, ic__redinfo *ri, const ic__ix *const *nidx,
                      bool second)
{
    ic__kb *b = &G->kb;
    ic_dtype t = ic__regty(n->info.dtype);
    ic_op op = n->info.op;
    int x;
    bool keep_x = stash_input(G, n, ri);
    if (second && keep_x)
        x = ic__kb_load(b, ri->stash, t, stash_off(G, n, nidx));
    else
        x = ic__kb_cast(b, t, ic__eval(G, n->in[0].node, nidx));
    if (!second && keep_x)
        ic__kb_store(b, ri->stash, stash_off(G, n, nidx), x);
    if (is_softmax(n)) {
        if (!second)
            return (ri->r0 = ic__kb_max_nan_free(b, t, x)) >= 0; /* NaN: a NaN sum */
        int xm = ic__kb_bin(b, IC_L_SUB, t, x, ic__kb_acc(b, ri->stage0, ri->r0));
        int e = ic__kb_exp_le0(b, t, xm); /* x <= max */
        if (ri->stash >= 0)
            ic__kb_store(b, ri->stash, stash_off(G, n, nidx), op == IC_OP_SOFTMAX ? e : xm);
        /* exp(x - max) lies in (0, 1]: lane-wise partial sums in the compute type keep the
         * spec's tolerance and keep twice the vector lanes of an f64 sum. */
        return (ri->r1 = ic__kb_reduce(b, IC_RED_SUM, t, e, -1)) >= 0;
    }
    if (op == IC_OP_LAYER_NORM) {
        if (!second)
            return (ri->r0 = ic__kb_reduce(b, IC_RED_SUM, t, x, -1)) >= 0;
        int cnt = ic__kb_const_f(b, t, (double)reduced_count(G, n));
        int d = ic__kb_bin(b, IC_L_SUB, t, x, ic__kb_bin(b, IC_L_DIV, t, ic__kb_acc(b, ri->stage0, ri->r0), cnt));
        ri->r1 = ic__kb_reduce(b, IC_RED_SUM, t, d, -1);
        ri->r2 = ic__kb_reduce(b, IC_RED_SUM, t, ic__kb_bin(b, IC_L_MUL, t, d, d), -1);
        return ri->r1 >= 0 && ri->r2 >= 0;
    }
    int xd = ic__kb_cast(b, IC_F64, x);
    int sq = ic__kb_bin(b, IC_L_MUL, IC_F64, xd, xd);
    return (ri->r0 = ic__kb_reduce(b, IC_RED_SUM, IC_F64, sq, -1)) >= 0;
}

/* Operand indices of a contraction from its output index o and k. */
static void mm_indices(ic__gen *G, const ic_node *n, const ic__ix *const *o, const ic__ix *k,
                       const ic__ix **ia, const ic__ix **ib)
{
    const ic_node *a = ic__gnode(G, n->in[0].node), *bn = ic__gnode(G, n->in[1].node);
    int ra = a->info.rank, rb = bn->info.rank, ro = n->info.rank;
    const ic__ix *zero = ic__ix_const(&G->ix, 0);
    if (n->info.op == IC_OP_LINEAR) {
        for (int j = 0; j < ra - 1; j++)
            ia[j] = o[j];
        ia[ra - 1] = k;
        ib[0] = rb == 2 ? o[ro - 1] : k;
        ib[1] = k;
        return;
    }
    int nbo = ro - (ra >= 2) - (rb >= 2);
    if (ra == 1) {
        ia[0] = k;
    } else {
        for (int j = 0; j < ra - 2; j++)
            ia[j] = ic__dim(a, j) == 1 ? zero : o[j + nbo - (ra - 2)];
        ia[ra - 2] = o[nbo];
        ia[ra - 1] = k;
    }
    if (rb == 1) {
        ib[0] = k;
    } else {
        for (int j = 0; j < rb - 2; j++)
            ib[j] = ic__dim(bn, j) == 1 ? zero : o[j + nbo - (rb - 2)];
        ib[rb - 2] = k;
        ib[rb - 1] = o[nbo + (ra >= 2)];
    }
}

static bool mm_k(ic__gen *G, const ic_node *n, const ic__ix **k)
{
    const ic_node *a = ic__gnode(G, n->in[0].node);
    int64_t K = ic__dim(a, a->info.rank - 1);
    if (K == 1 && G->nidims == 0)
        *k = ic__ix_const(&G->ix, 0);
    else if (G->nidims == 1 && G->id[0].size == K)
        *k = G->id[0].ix;
    else
        return ic__gen_fail(G, "matmul '%s' reduces over %lld, the kernel over other sizes",
                            n->info.name, (long long)K);
    return true;
}

static int emit_mm(ic__gen *G, const ic_node *n)
{
    const ic__ix *o[IC_MAX_RANK], *ia[IC_MAX_RANK], *ib[IC_MAX_RANK], *k = NULL;
    if (!ic__nat_outer(G, n->info.rank, n->shape, o))
        return ic__gen_fail(G, "matmul '%s' does not fit the kernel's loops", n->info.name), -1;
    if (!mm_k(G, n, &k))
        return -1;
    mm_indices(G, n, o, k, ia, ib);
    ic_dtype t = ic__regty(n->compute);
    G->load_only = true;
    int x = ic__kb_cast(&G->kb, t, ic__eval(G, n->in[0].node, ia));
    int y = ic__kb_cast(&G->kb, t, ic__eval(G, n->in[1].node, ib));
    G->load_only = false;
    return ic__kb_reduce(&G->kb, IC_RED_SUM, t, ic__kb_bin(&G->kb, IC_L_MUL, t, x, y), -1);
}

bool ic__red_emit(ic__gen *G, ic_value v, int stage)
{
    const ic_node *n = ic__gnode(G, v);
    ic__redinfo *ri = &G->red[v];
    if (!ri->planned || (ri->stage0 != stage && ri->stage1 != stage))
        return true;
    ic__class k = ic__node_class(n);
    if (k == IC__CL_MM)
        return (ri->r0 = emit_mm(G, n)) >= 0;
    const ic__ix *nidx[IC_MAX_RANK];
    if (!ic__nat_input(G, n, nidx))
        return ic__gen_fail(G, "'%s' (%s) reduces over other dims than the kernel's loops",
                            n->info.name, ic_op_name(n->info.op));
    if (k == IC__CL_RED)
        return (ri->r0 = emit_red(G, n, nidx)) >= 0;
    return emit_norm(G, n, ri, nidx, ri->stage1 == stage);
}

/* ---- values ---- */

static int red_final(ic__gen *G, const ic_node *n, const ic__redinfo *ri)
{
    ic__kb *b = &G->kb;
    ic_dtype out = ic__regty(n->info.dtype);
    int acc = ic__kb_acc(b, ri->stage0, ri->r0);
    if (n->info.op == IC_OP_MEAN)
        acc = ic__kb_bin(b, IC_L_DIV, IC_F64, acc,
                         ic__kb_const_f(b, IC_F64, (double)reduced_count(G, n)));
    return ic__kb_cast(b, out, acc);
}

/* mean and 1/std of layer_norm n from its two passes: the mean of the first pass plus the
 * mean deviation from it, the variance of the deviations (biased, as torch). */
static void ln_stats(ic__gen *G, const ic_node *n, const ic__redinfo *ri, ic_dtype t, int *mean,
                     int *rstd)
{
    ic__kb *b = &G->kb;
    int cnt = ic__kb_const_f(b, t, (double)reduced_count(G, n));
    int m0 = ic__kb_bin(b, IC_L_DIV, t, ic__kb_acc(b, ri->stage0, ri->r0), cnt);
    int dm = ic__kb_bin(b, IC_L_DIV, t, ic__kb_acc(b, ri->stage1, ri->r1), cnt);
    int d2 = ic__kb_bin(b, IC_L_DIV, t, ic__kb_acc(b, ri->stage1, ri->r2), cnt);
    int var = ic__kb_bin(b, IC_L_SUB, t, d2, ic__kb_bin(b, IC_L_MUL, t, dm, dm));
    var = ic__kb_bin(b, IC_L_MAX, t, var, ic__kb_const_f(b, t, 0));
    *mean = ic__kb_bin(b, IC_L_ADD, t, m0, dm);
    *rstd = ic__kb_un(b, IC_L_RSQRT, t, ic__kb_bin(b, IC_L_ADD, t, var, ic__kb_const_f(b, t, n->attrs.eps)));
}

static int norm_final(ic__gen *G, const ic_node *n, const ic__redinfo *ri, const ic__ix *const *idx)
{
    ic__kb *b = &G->kb;
    ic_dtype t = ic__regty(n->info.dtype);
    ic_op op = n->info.op;
    int x = ri->stash >= 0 ? ic__kb_load(b, ri->stash, t, stash_off(G, n, idx))
                           : ic__kb_cast(b, t, ic__eval(G, n->in[0].node, idx));
    if (is_softmax(n)) {
        int xm = x; /* stashed: exp(x - max) for softmax, x - max for log_softmax */
        if (ri->stash < 0) {
            xm = ic__kb_bin(b, IC_L_SUB, t, x, ic__kb_acc(b, ri->stage0, ri->r0));
            if (op == IC_OP_SOFTMAX)
                xm = ic__kb_exp_le0(b, t, xm);
        }
        int s = ic__kb_acc(b, ri->stage1, ri->r1);
        if (op == IC_OP_SOFTMAX) /* one division per row, a multiply per element */
            return ic__kb_bin(b, IC_L_MUL, t, xm, ic__kb_bin(b, IC_L_DIV, t, ic__kb_const_f(b, t, 1.0), s));
        return ic__kb_bin(b, IC_L_SUB, t, xm, ic__kb_un(b, IC_L_LOG, t, s));
    }
    int y;
    if (op == IC_OP_LAYER_NORM) {
        int mean, rstd;
        ln_stats(G, n, ri, t, &mean, &rstd);
        y = ic__kb_bin(b, IC_L_MUL, t, ic__kb_bin(b, IC_L_SUB, t, x, mean), rstd);
    } else {
        int cnt = ic__kb_const_f(b, IC_F64, (double)reduced_count(G, n));
        int eps = ic__kb_const_f(b, IC_F64, n->attrs.eps);
        int ms = ic__kb_bin(b, IC_L_DIV, IC_F64, ic__kb_acc(b, ri->stage0, ri->r0), cnt);
        int r = ic__kb_un(b, IC_L_RSQRT, IC_F64, ic__kb_bin(b, IC_L_ADD, IC_F64, ms, eps));
        y = ic__kb_bin(b, IC_L_MUL, t, x, ic__kb_cast(b, t, r));
    }
    for (int i = 1; i < n->info.ninputs; i++)
        if (n->in[i].node >= 0)
            y = ic__kb_bin(b, i == 1 ? IC_L_MUL : IC_L_ADD, t, y, ic__eval_operand(G, n, i, idx, t));
    return y;
}

static int mm_final(ic__gen *G, const ic_node *n, const ic__redinfo *ri, const ic__ix *const *idx)
{
    ic_dtype t = ic__regty(n->compute);
    int y = ic__kb_acc(&G->kb, ri->stage0, ri->r0);
    if (n->info.op == IC_OP_LINEAR && n->info.ninputs == 3 && n->in[2].node >= 0)
        y = ic__kb_bin(&G->kb, IC_L_ADD, t, y, ic__eval_operand(G, n, 2, idx, t));
    return ic__kb_cast(&G->kb, ic__regty(n->info.dtype), y);
}

int ic__red_value(ic__gen *G, ic_value v, const ic__ix *const *idx)
{
    const ic_node *n = ic__gnode(G, v);
    const ic__redinfo *ri = &G->red[v];
    if (!ri->planned || G->kb.cur <= ri->last || ri->r0 < 0)
        return ic__gen_fail(G, "'%s' (%s) is read before it is reduced", n->info.name,
                            ic_op_name(n->info.op)), -1;
    const ic__ix *nat[IC_MAX_RANK];
    if (!ic__nat_output(G, n, nat) || !ic__idx_eq(n->info.rank, idx, nat))
        return ic__gen_fail(G, "'%s' (%s) is read at other positions than it is computed at "
                            "(it would be recomputed)", n->info.name, ic_op_name(n->info.op)), -1;
    switch (ic__node_class(n)) {
    case IC__CL_RED: return red_final(G, n, ri);
    case IC__CL_NORM: return norm_final(G, n, ri, idx);
    default: return mm_final(G, n, ri, idx);
    }
}
