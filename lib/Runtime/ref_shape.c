/* ref_shape.c - the reference executor's second half: views (materialised as copies), cat,
 * softmax and the norms, contractions, embedding and creation, in plain loops that favour
 * clarity over speed. Inputs and outputs are contiguous row-major tensors (ref-impl.h). */
#include <float.h>
#include <stdio.h>
#include <string.h>
#include "ref-impl.h"

#define FAIL(g, n, code, ...) \
    ic__node_error((g), (n)->info.name, ic_op_name((n)->info.op), (code), __VA_ARGS__)

/* ---- helpers ---- */

/* "[2, 3]" into buf, for messages. */
static const char *tshape(const ic_tensor *t, char *buf, size_t size)
{
    size_t k = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < t->rank && k < size; i++)
        k += (size_t)snprintf(buf + k, size - k, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    if (k < size)
        snprintf(buf + k, size - k, "]");
    return buf;
}

/* Product of shape[from..to); the shapes come from allocated tensors, so no overflow. */
static int64_t prod(const int64_t *shape, int from, int to)
{
    int64_t p = 1;
    for (int i = from; i < to; i++)
        p *= shape[i];
    return p;
}

static void contig_strides(int rank, const int64_t *shape, int64_t *st)
{
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        st[i] = s;
        s *= shape[i];
    }
}

/* The driver allocates out from the node; a disagreement with the inputs is a bug upstream,
 * reported rather than trusted so that nothing is read or written out of bounds. */
static ic_status check_numel(const ic_graph *g, const ic_node *n, const ic_tensor *out, int64_t want)
{
    char b[160];
    int64_t got = ic_tensor_numel(out);
    if (got != want)
        return FAIL(g, n, IC_ESHAPE, "output %s has %lld elements, the inputs give %lld",
                    tshape(out, b, sizeof b), (long long)got, (long long)want);
    return IC_OK;
}

static ic_status need_input(const ic_graph *g, const ic_node *n, const ic_tensor *const *ins, int i)
{
    if (i >= n->info.ninputs || !ins[i] || (!ins[i]->data && ic_tensor_numel(ins[i]) != 0))
        return FAIL(g, n, IC_EINVAL, "input %d is missing", i);
    return IC_OK;
}

/* Copies the strided view (shape, strides in elements, first element at base) of src into
 * dst, row-major: the one loop behind permute, expand and slice. */
static void copy_view(const ic_tensor *src, int rank, const int64_t *shape, const int64_t *strides,
                      int64_t base, ic_tensor *dst)
{
    size_t es = ic_dtype_size(src->dtype);
    int64_t total = prod(shape, 0, rank), idx[IC_MAX_RANK] = { 0 }, off = base;
    const char *s = src->data;
    char *d = dst->data;
    for (int64_t i = 0; i < total; i++) {
        memcpy(d + (size_t)i * es, s + (size_t)off * es, es);
        for (int k = rank - 1; k >= 0; k--) { /* odometer: bump the last dim, carry left */
            off += strides[k];
            if (++idx[k] < shape[k])
                break;
            off -= strides[k] * shape[k];
            idx[k] = 0;
        }
    }
}

/* Element i of s stored as element j of d, converted as PyTorch's .to(): integers reach
 * f32/f16/bf16 through float (as c10::Half(float) does), everything else through double. */
static void convert(const ic_tensor *s, int64_t i, ic_tensor *d, int64_t j)
{
    if (s->dtype == d->dtype) {
        size_t es = ic_dtype_size(s->dtype);
        memcpy((char *)d->data + (size_t)j * es, (const char *)s->data + (size_t)i * es, es);
    } else if (!ic_dtype_is_float(d->dtype)) {
        ic__ref_seti(d, j, ic__ref_geti(s, i));
    } else if (ic_dtype_is_float(s->dtype)) {
        ic__ref_setf(d, j, ic__ref_getf(s, i));
    } else {
        int64_t v = ic__ref_geti(s, i);
        ic__ref_setf(d, j, d->dtype == IC_F64 ? (double)v : (double)(float)v);
    }
}

/* ---- views ---- */

static ic_status view_permute(const ic_graph *g, const ic_node *n, const ic_tensor *x, ic_tensor *out)
{
    int64_t cs[IC_MAX_RANK], st[IC_MAX_RANK];
    char b1[160], b2[160];
    contig_strides(x->rank, x->shape, cs);
    bool ok = out->rank == x->rank;
    for (int i = 0; ok && i < out->rank; i++) {
        int p = n->perm[i];
        ok = p >= 0 && p < x->rank && out->shape[i] == x->shape[p];
        st[i] = ok ? cs[p] : 0;
    }
    if (!ok)
        return FAIL(g, n, IC_ESHAPE, "output %s is not a permutation of input %s",
                    tshape(out, b1, sizeof b1), tshape(x, b2, sizeof b2));
    copy_view(x, out->rank, out->shape, st, 0, out);
    return IC_OK;
}

static ic_status view_expand(const ic_graph *g, const ic_node *n, const ic_tensor *x, ic_tensor *out)
{
    int64_t cs[IC_MAX_RANK], st[IC_MAX_RANK];
    char b1[160], b2[160];
    int r = out->rank, lead = out->rank - x->rank;
    bool ok = lead >= 0;
    contig_strides(x->rank, x->shape, cs);
    for (int i = 0; ok && i < r; i++) {
        int ix = i - lead;
        if (ix < 0 || x->shape[ix] == 1) /* new or size-1 dims repeat one element: stride 0 */
            st[i] = 0;
        else if (x->shape[ix] == out->shape[i])
            st[i] = cs[ix];
        else
            ok = false;
    }
    if (!ok)
        return FAIL(g, n, IC_ESHAPE, "cannot expand %s to %s", tshape(x, b1, sizeof b1),
                    tshape(out, b2, sizeof b2));
    copy_view(x, r, out->shape, st, 0, out);
    return IC_OK;
}

/* start/end clamped as Python slices: negatives count from the end, then into [0, size]. */
static ic_status view_slice(const ic_graph *g, const ic_node *n, const ic_tensor *x, ic_tensor *out)
{
    const ic_attrs *at = &n->attrs;
    int d = n->axis;
    char b1[160], b2[160];
    if (d < 0 || d >= x->rank || out->rank != x->rank || at->step <= 0)
        return FAIL(g, n, IC_ESHAPE, "cannot slice %s along dim %d", tshape(x, b1, sizeof b1), d);
    int64_t size = x->shape[d], st = at->has_start ? at->start : 0, en = at->has_end ? at->end : size;
    if (st < 0)
        st += size;
    if (en < 0)
        en += size;
    st = st < 0 ? 0 : st > size ? size : st;
    en = en < st ? st : en > size ? size : en;
    int64_t count = (en - st) / at->step + ((en - st) % at->step != 0);
    bool ok = out->shape[d] == count;
    for (int i = 0; ok && i < x->rank; i++)
        ok = i == d || out->shape[i] == x->shape[i];
    if (!ok)
        return FAIL(g, n, IC_ESHAPE, "output %s does not match slicing %s at %lld:%lld:%lld",
                    tshape(out, b1, sizeof b1), tshape(x, b2, sizeof b2), (long long)st,
                    (long long)en, (long long)at->step);
    int64_t cs[IC_MAX_RANK];
    contig_strides(x->rank, x->shape, cs);
    int64_t base = count ? st * cs[d] : 0;
    cs[d] = count > 1 ? cs[d] * at->step : 0; /* a huge step with one element must not overflow */
    copy_view(x, x->rank, out->shape, cs, base, out);
    return IC_OK;
}

ic_status ic__ref_view(const ic_graph *g, const ic_node *n, const ic_tensor *const *ins, ic_tensor *out)
{
    ic_status s;
    if ((s = need_input(g, n, ins, 0)))
        return s;
    const ic_tensor *x = ins[0];
    if (x->dtype != out->dtype)
        return FAIL(g, n, IC_EDTYPE, "input is %s, output %s", ic_dtype_name(x->dtype),
                    ic_dtype_name(out->dtype));
    switch (n->info.op) {
    case IC_OP_RESHAPE: case IC_OP_UNSQUEEZE: case IC_OP_SQUEEZE: {
        /* row-major order is unchanged: the copy is the whole buffer */
        int64_t total = ic_tensor_numel(x);
        if ((s = check_numel(g, n, out, total)))
            return s;
        if (total)
            memcpy(out->data, x->data, (size_t)total * ic_dtype_size(x->dtype));
        return IC_OK;
    }
    case IC_OP_PERMUTE: case IC_OP_TRANSPOSE:
        return view_permute(g, n, x, out);
    case IC_OP_EXPAND:
        return view_expand(g, n, x, out);
    case IC_OP_SLICE:
        return view_slice(g, n, x, out);
    case IC_OP_UNFOLD: case IC_OP_FLIP: /* --- spatial ops --- */
        return ic__ref_spatial(g, n, ins, out);
    default:
        return FAIL(g, n, IC_EINVAL, "is not a view op");
    }
}

/* ---- cat ---- */

/* Input k's block of each outer row lands at offset off (along the axis) in out's row. */
ic_status ic__ref_cat(const ic_graph *g, const ic_node *n, const ic_tensor *const *ins, ic_tensor *out)
{
    int d = n->axis, r = out->rank;
    char b1[160], b2[160];
    ic_status s;
    if (d < 0 || d >= r)
        return FAIL(g, n, IC_ESHAPE, "cat dim %d is out of range for output %s", d, tshape(out, b1, sizeof b1));
    int64_t total = 0;
    for (int k = 0; k < n->info.ninputs; k++) { /* check everything before writing anything */
        if ((s = need_input(g, n, ins, k)))
            return s;
        bool ok = ins[k]->rank == r;
        for (int i = 0; ok && i < r; i++)
            ok = i == d || ins[k]->shape[i] == out->shape[i];
        if (!ok)
            return FAIL(g, n, IC_ESHAPE, "input %d %s does not fit output %s along dim %d", k,
                        tshape(ins[k], b1, sizeof b1), tshape(out, b2, sizeof b2), d);
        total += ins[k]->shape[d];
    }
    if (total != out->shape[d])
        return FAIL(g, n, IC_ESHAPE, "inputs add up to %lld along dim %d, output %s", (long long)total,
                    d, tshape(out, b1, sizeof b1));
    int64_t outer = prod(out->shape, 0, d), inner = prod(out->shape, d + 1, r), off = 0;
    for (int k = 0; k < n->info.ninputs; k++) {
        int64_t len = ins[k]->shape[d] * inner;
        for (int64_t o = 0; o < outer; o++)
            for (int64_t j = 0; j < len; j++)
                convert(ins[k], o * len + j, out, (o * out->shape[d] + off) * inner + j);
        off += ins[k]->shape[d];
    }
    return IC_OK;
}

/* ---- softmax, log_softmax, layer_norm, rms_norm ---- */

/* Over the axis, for each (outer, inner) lane: m = max, s = sum exp(x - m) in double;
 * softmax = exp(x - m) / s, log_softmax = x - m - log(s); rounded once to the output. */
static void softmax(const ic_node *n, const ic_tensor *x, ic_tensor *out)
{
    int d = n->axis;
    bool lg = n->info.op == IC_OP_LOG_SOFTMAX;
    int64_t len = x->rank ? x->shape[d] : 1;
    int64_t outer = x->rank ? prod(x->shape, 0, d) : 1, inner = x->rank ? prod(x->shape, d + 1, x->rank) : 1;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) {
            int64_t base = o * len * inner + in;
            double m = -INFINITY, sum = 0;
            for (int64_t k = 0; k < len; k++) {
                double v = ic__ref_getf(x, base + k * inner);
                m = v > m || isnan(v) ? v : m;
            }
            for (int64_t k = 0; k < len; k++)
                sum += exp(ic__ref_getf(x, base + k * inner) - m);
            for (int64_t k = 0; k < len; k++) {
                double v = ic__ref_getf(x, base + k * inner) - m;
                ic__ref_setf(out, base + k * inner, lg ? v - log(sum) : exp(v) / sum);
            }
        }
}

/* An optional operand (weight, bias): NULL when absent or not given at all. */
static const ic_tensor *optional(const ic_node *n, const ic_tensor *const *ins, int i)
{
    return i < n->info.ninputs && ins[i] ? ins[i] : NULL;
}

/* layer_norm: (x - mean) / sqrt(var + eps) * w + b with the biased variance; rms_norm:
 * x / sqrt(mean(x^2) + eps) * w. Statistics in double over the trailing `len` elements. */
static void norm_rows(const ic_node *n, const ic_tensor *x, const ic_tensor *w, const ic_tensor *b,
                      int64_t rows, int64_t len, ic_tensor *out)
{
    bool rms = n->info.op == IC_OP_RMS_NORM;
    double eps = n->attrs.eps;
    for (int64_t r = 0; r < rows; r++) {
        int64_t base = r * len;
        double mean = 0, var = 0;
        if (!rms) {
            for (int64_t k = 0; k < len; k++)
                mean += ic__ref_getf(x, base + k);
            mean /= (double)len;
        }
        for (int64_t k = 0; k < len; k++) {
            double c = ic__ref_getf(x, base + k) - mean;
            var += c * c;
        }
        double denom = sqrt(var / (double)len + eps);
        for (int64_t k = 0; k < len; k++) {
            double y = (ic__ref_getf(x, base + k) - mean) / denom;
            if (w)
                y *= ic__ref_getf(w, k);
            if (b)
                y += ic__ref_getf(b, k);
            ic__ref_setf(out, base + k, y);
        }
    }
}

ic_status ic__ref_norm(const ic_graph *g, const ic_node *n, const ic_tensor *const *ins, ic_tensor *out)
{
    ic_status s;
    char b1[160], b2[160];
    if ((s = need_input(g, n, ins, 0)))
        return s;
    const ic_tensor *x = ins[0];
    int64_t total = ic_tensor_numel(x);
    if (!ic_dtype_is_float(x->dtype) || !ic_dtype_is_float(out->dtype))
        return FAIL(g, n, IC_EDTYPE, "takes floating-point tensors, not %s", ic_dtype_name(x->dtype));
    if ((s = check_numel(g, n, out, total)))
        return s;
    if (n->info.op == IC_OP_SOFTMAX || n->info.op == IC_OP_LOG_SOFTMAX) {
        if (x->rank && (n->axis < 0 || n->axis >= x->rank))
            return FAIL(g, n, IC_ESHAPE, "dim %d is out of range for %s", n->axis, tshape(x, b1, sizeof b1));
        softmax(n, x, out);
        return IC_OK;
    }
    int ns = n->attrs.nshape;
    if (ns < 1 || ns > x->rank)
        return FAIL(g, n, IC_ESHAPE, "normalized_shape has %d dims, input %s", ns, tshape(x, b1, sizeof b1));
    int64_t len = prod(x->shape, x->rank - ns, x->rank);
    if (total == 0 || len == 0)
        return IC_OK;
    const ic_tensor *w = optional(n, ins, 1), *b = n->info.op == IC_OP_LAYER_NORM ? optional(n, ins, 2) : NULL;
    for (int i = 0; i < 2; i++) {
        const ic_tensor *t = i ? b : w;
        if (t && ic_tensor_numel(t) != len)
            return FAIL(g, n, IC_ESHAPE, "%s %s does not match the %lld normalized elements of %s",
                        i ? "bias" : "weight", tshape(t, b1, sizeof b1), (long long)len,
                        tshape(x, b2, sizeof b2));
    }
    norm_rows(n, x, w, b, total / len, len, out);
    return IC_OK;
}

/* ---- matmul, linear, bmm ---- */

/* Operands loaded once as double (floats) or int64 (integers): one element type per loop. */
typedef struct {
    bool is_int;
    double *f;
    int64_t *i;
} vals;

static ic_status load(const ic_graph *g, const ic_node *n, const ic_tensor *t, vals *v)
{
    int64_t k = ic_tensor_numel(t);
    void *p = ic__malloc(g->c, (size_t)(k ? k : 1) * 8);
    v->is_int = !ic_dtype_is_float(t->dtype);
    v->f = v->is_int ? NULL : p;
    v->i = v->is_int ? p : NULL;
    if (!p)
        return FAIL(g, n, IC_ENOMEM, "out of memory loading a %lld-element operand", (long long)k);
    for (int64_t j = 0; j < k; j++) {
        if (v->is_int)
            v->i[j] = ic__ref_geti(t, j);
        else
            v->f[j] = ic__ref_getf(t, j);
    }
    return IC_OK;
}

static void unload(const ic_graph *g, vals *v)
{
    ic__free(g->c, v->is_int ? (void *)v->i : (void *)v->f);
    v->f = NULL;
    v->i = NULL;
}

/* Offset in t of element `flat` of out, t broadcasting to out (trailing dims aligned). */
static int64_t bcast_offset(const ic_tensor *out, const ic_tensor *t, int64_t flat)
{
    int64_t off = 0, st = 1;
    for (int d = out->rank - 1, dt = t->rank - 1; d >= 0; d--, dt--) {
        int64_t ix = flat % out->shape[d];
        flat /= out->shape[d];
        if (dt >= 0) {
            if (t->shape[dt] != 1)
                off += ix * st;
            st *= t->shape[dt];
        }
    }
    return off;
}

/* out[o] = sum_k a[abase + m*K + k] * b[bbase + k*N + j] (+ bias broadcast to out) for
 * o = obase + m*N + j: k ascending, in double (floats) or wrapping int64 (integers), then
 * rounded once. acc holds one output row, so the inner loop runs along contiguous rows. */
static void mm_block(const vals *a, int64_t abase, const vals *b, int64_t bbase, int64_t M, int64_t K,
                     int64_t N, const ic_tensor *bias, void *acc, ic_tensor *out, int64_t obase)
{
    for (int64_t m = 0; m < M; m++) {
        int64_t o = obase + m * N;
        if (a->is_int) {
            uint64_t *s = acc; /* unsigned: overflow wraps as torch's int64 does, without UB */
            memset(s, 0, (size_t)N * sizeof *s);
            for (int64_t k = 0; k < K; k++) {
                uint64_t av = (uint64_t)a->i[abase + m * K + k];
                for (int64_t j = 0; j < N; j++)
                    s[j] += av * (uint64_t)b->i[bbase + k * N + j];
            }
            for (int64_t j = 0; j < N; j++) {
                if (bias)
                    s[j] += (uint64_t)ic__ref_geti(bias, bcast_offset(out, bias, o + j));
                ic__ref_seti(out, o + j, (int64_t)s[j]);
            }
        } else {
            double *s = acc;
            for (int64_t j = 0; j < N; j++)
                s[j] = 0;
            for (int64_t k = 0; k < K; k++) {
                double av = a->f[abase + m * K + k];
                for (int64_t j = 0; j < N; j++)
                    s[j] += av * b->f[bbase + k * N + j];
            }
            for (int64_t j = 0; j < N; j++) {
                if (bias)
                    s[j] += ic__ref_getf(bias, bcast_offset(out, bias, o + j));
                ic__ref_setf(out, o + j, s[j]);
            }
        }
    }
}

/* torch.matmul as batches of [M, K] x [K, N]: a 1-d a is [1, K], a 1-d b is [K, 1] (the
 * unit dims are absent from out, which leaves its row-major layout unchanged); batch dims
 * broadcast, a broadcast dim reading the same matrix again (stride 0). */
typedef struct {
    int64_t M, K, N, nbatch;
    int nb;
    int64_t bshape[IC_MAX_RANK], sa[IC_MAX_RANK], sb[IC_MAX_RANK]; /* strides in elements */
} mm_plan;

static void batch_strides(const ic_tensor *t, int nbt, int nb, int64_t mat, int64_t *st)
{
    int64_t cs[IC_MAX_RANK];
    for (int j = nbt - 1; j >= 0; j--) {
        cs[j] = mat;
        mat *= t->shape[j];
    }
    for (int i = 0; i < nb; i++) {
        int j = i - (nb - nbt);
        st[i] = j < 0 || t->shape[j] == 1 ? 0 : cs[j];
    }
}

static ic_status mm_plan_make(const ic_graph *g, const ic_node *n, const ic_tensor *a,
                              const ic_tensor *b, mm_plan *p)
{
    char b1[160], b2[160];
    int ra = a->rank, rb = b->rank;
    if (ra < 1 || rb < 1)
        return FAIL(g, n, IC_ESHAPE, "both operands need at least 1 dim, got %s x %s",
                    tshape(a, b1, sizeof b1), tshape(b, b2, sizeof b2));
    p->M = ra >= 2 ? a->shape[ra - 2] : 1;
    p->K = a->shape[ra - 1];
    p->N = rb >= 2 ? b->shape[rb - 1] : 1;
    if (b->shape[rb >= 2 ? rb - 2 : 0] != p->K)
        return FAIL(g, n, IC_ESHAPE, "%s x %s: inner dims differ", tshape(a, b1, sizeof b1),
                    tshape(b, b2, sizeof b2));
    int nba = ra > 2 ? ra - 2 : 0, nbb = rb > 2 ? rb - 2 : 0;
    p->nb = nba > nbb ? nba : nbb;
    p->nbatch = 1;
    for (int i = 0; i < p->nb; i++) {
        int ja = i - (p->nb - nba), jb = i - (p->nb - nbb);
        int64_t da = ja >= 0 ? a->shape[ja] : 1, db = jb >= 0 ? b->shape[jb] : 1;
        if (da != db && da != 1 && db != 1)
            return FAIL(g, n, IC_ESHAPE, "batch dims of %s and %s cannot be broadcast",
                        tshape(a, b1, sizeof b1), tshape(b, b2, sizeof b2));
        p->bshape[i] = da == 1 ? db : da;
        p->nbatch *= p->bshape[i];
    }
    batch_strides(a, nba, p->nb, p->M * p->K, p->sa);
    batch_strides(b, nbb, p->nb, p->K * p->N, p->sb);
    return IC_OK;
}

/* Size of out when every product fits; -1 otherwise (a broadcast result can exceed both
 * operands, so this one is checked). */
static int64_t mm_numel(const mm_plan *p)
{
    int64_t t;
    if (!ic__mul_ok(p->nbatch, p->M, &t) || !ic__mul_ok(t, p->N, &t))
        return -1;
    return t;
}

static ic_status contract_matmul(const ic_graph *g, const ic_node *n, const ic_tensor *a,
                                 const ic_tensor *b, ic_tensor *out)
{
    mm_plan p;
    ic_status s;
    if ((s = mm_plan_make(g, n, a, b, &p)) || (s = check_numel(g, n, out, mm_numel(&p))))
        return s;
    vals va, vb;
    if ((s = load(g, n, a, &va)))
        return s;
    if ((s = load(g, n, b, &vb))) {
        unload(g, &va);
        return s;
    }
    void *acc = ic__malloc(g->c, (size_t)(p.N ? p.N : 1) * 8);
    if (!acc)
        s = FAIL(g, n, IC_ENOMEM, "out of memory");
    for (int64_t t = 0; acc && t < p.nbatch; t++) {
        int64_t rest = t, oa = 0, ob = 0; /* batch t's multi-index, last dim fastest */
        for (int i = p.nb - 1; i >= 0; i--) {
            int64_t ix = rest % p.bshape[i];
            rest /= p.bshape[i];
            oa += ix * p.sa[i];
            ob += ix * p.sb[i];
        }
        mm_block(&va, oa, &vb, ob, p.M, p.K, p.N, NULL, acc, out, t * p.M * p.N);
    }
    ic__free(g->c, acc);
    unload(g, &va);
    unload(g, &vb);
    return s;
}

static bool broadcasts_to(const ic_tensor *t, const ic_tensor *out)
{
    if (t->rank > out->rank)
        return false;
    for (int i = 1; i <= t->rank; i++)
        if (t->shape[t->rank - i] != 1 && t->shape[t->rank - i] != out->shape[out->rank - i])
            return false;
    return true;
}

/* Replaces v (a [rows, cols] matrix) by its transpose. */
static ic_status transpose_vals(const ic_graph *g, const ic_node *n, vals *v, int64_t rows, int64_t cols)
{
    vals t = *v;
    int64_t total = rows * cols;
    void *p = ic__malloc(g->c, (size_t)(total ? total : 1) * 8);
    if (!p)
        return FAIL(g, n, IC_ENOMEM, "out of memory transposing a %lld x %lld weight", (long long)rows,
                    (long long)cols);
    t.f = v->is_int ? NULL : p;
    t.i = v->is_int ? p : NULL;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            if (v->is_int)
                t.i[c * rows + r] = v->i[r * cols + c];
            else
                t.f[c * rows + r] = v->f[r * cols + c];
        }
    unload(g, v);
    *v = t;
    return IC_OK;
}

/* linear: out[r, o] = sum_k x[r, k] * w[o, k] + bias (broadcast), i.e. x @ w^T; a 1-d w
 * is one row whose output dim is absent. */
static ic_status contract_linear(const ic_graph *g, const ic_node *n, const ic_tensor *x,
                                 const ic_tensor *w, const ic_tensor *bias, ic_tensor *out)
{
    char b1[160], b2[160];
    ic_status s;
    if (x->rank < 1 || w->rank < 1 || w->rank > 2 || x->shape[x->rank - 1] != w->shape[w->rank - 1])
        return FAIL(g, n, IC_ESHAPE, "input %s and weight %s: in_features differ",
                    tshape(x, b1, sizeof b1), tshape(w, b2, sizeof b2));
    int64_t in = x->shape[x->rank - 1], no = w->rank == 2 ? w->shape[0] : 1;
    int64_t rows = prod(x->shape, 0, x->rank - 1), want;
    if (!ic__mul_ok(rows, no, &want))
        want = -1;
    if ((s = check_numel(g, n, out, want)))
        return s;
    if (bias && !broadcasts_to(bias, out))
        return FAIL(g, n, IC_ESHAPE, "bias %s does not broadcast to the output %s",
                    tshape(bias, b1, sizeof b1), tshape(out, b2, sizeof b2));
    vals vx = { 0 }, vw = { 0 };
    void *acc = NULL;
    if (!(s = load(g, n, x, &vx)) && !(s = load(g, n, w, &vw)) && !(s = transpose_vals(g, n, &vw, no, in))) {
        acc = ic__malloc(g->c, (size_t)(no ? no : 1) * 8);
        if (!acc)
            s = FAIL(g, n, IC_ENOMEM, "out of memory");
        else
            mm_block(&vx, 0, &vw, 0, rows, in, no, bias, acc, out, 0);
    }
    ic__free(g->c, acc);
    unload(g, &vx);
    unload(g, &vw);
    return s;
}

ic_status ic__ref_contract(const ic_graph *g, const ic_node *n, const ic_tensor *const *ins, ic_tensor *out)
{
    ic_status s;
    if ((s = need_input(g, n, ins, 0)) || (s = need_input(g, n, ins, 1)))
        return s;
    const ic_tensor *a = ins[0], *b = ins[1];
    if (a->dtype != b->dtype || a->dtype == IC_BOOL)
        return FAIL(g, n, IC_EDTYPE, "operands are %s and %s; both must have the same non-bool dtype",
                    ic_dtype_name(a->dtype), ic_dtype_name(b->dtype));
    switch (n->info.op) {
    case IC_OP_MATMUL:
        return contract_matmul(g, n, a, b, out);
    case IC_OP_BMM:
        if (a->rank != 3 || b->rank != 3 || a->shape[0] != b->shape[0]) {
            char b1[160], b2[160];
            return FAIL(g, n, IC_ESHAPE, "needs 3-d operands with one batch size, got %s x %s",
                        tshape(a, b1, sizeof b1), tshape(b, b2, sizeof b2));
        }
        return contract_matmul(g, n, a, b, out);
    case IC_OP_LINEAR:
        return contract_linear(g, n, a, b, optional(n, ins, 2), out);
    default:
        return FAIL(g, n, IC_EINVAL, "is not a contraction");
    }
}

/* ---- embedding ---- */

ic_status ic__ref_gather(const ic_graph *g, const ic_node *n, const ic_tensor *const *ins, ic_tensor *out)
{
    ic_status s;
    char b1[160];
    if ((s = need_input(g, n, ins, 0)) || (s = need_input(g, n, ins, 1)))
        return s;
    const ic_tensor *w = ins[0], *ix = ins[1];
    if (w->rank != 2)
        return FAIL(g, n, IC_ESHAPE, "weight must be 2-d, got %s", tshape(w, b1, sizeof b1));
    if (ix->dtype != IC_I32 && ix->dtype != IC_I64)
        return FAIL(g, n, IC_EDTYPE, "indices must be i32 or i64, not %s", ic_dtype_name(ix->dtype));
    if (out->dtype != w->dtype)
        return FAIL(g, n, IC_EDTYPE, "weight is %s, output %s", ic_dtype_name(w->dtype),
                    ic_dtype_name(out->dtype));
    int64_t rows = w->shape[0], dim = w->shape[1], count = ic_tensor_numel(ix), want;
    if (!ic__mul_ok(count, dim, &want))
        want = -1;
    if ((s = check_numel(g, n, out, want)))
        return s;
    size_t row = (size_t)dim * ic_dtype_size(w->dtype);
    for (int64_t i = 0; i < count; i++) {
        int64_t v = ic__ref_geti(ix, i);
        if (v < 0 || v >= rows)
            return FAIL(g, n, IC_EINVAL, "index %lld (at flat position %lld) is out of range for "
                        "weight %s with %lld rows", (long long)v, (long long)i,
                        tshape(w, b1, sizeof b1), (long long)rows);
        if (row) /* a [rows, 0] weight may have no data at all */
            memcpy((char *)out->data + (size_t)i * row, (const char *)w->data + (size_t)v * row, row);
    }
    return IC_OK;
}

/* ---- full, arange ---- */

/* Largest finite value of each float dtype, for PyTorch's "cannot be converted without
 * overflow" check on full's value (infinities and NaN pass, as there). */
static double float_max(ic_dtype t)
{
    switch (t) {
    case IC_F16: return 65504.0;
    case IC_BF16: return 3.38953138925153547590470800371487866880e38;
    case IC_F32: return FLT_MAX;
    default: return DBL_MAX;
    }
}

static ic_status full(const ic_graph *g, const ic_node *n, ic_tensor *out)
{
    ic_scalar v = n->attrs.value;
    ic_dtype t = out->dtype;
    int64_t total = ic_tensor_numel(out), iv = v.i;
    double fv = v.is_int ? (t == IC_F64 ? (double)v.i : (double)(float)v.i) : v.f;
    bool bad;
    if (t == IC_BOOL) {
        iv = v.is_int ? v.i != 0 : v.f != 0; /* NaN is true, as bool(nan) */
        bad = false;
    } else if (ic_dtype_is_float(t)) {
        bad = isfinite(fv) && fabs(fv) > float_max(t);
    } else if (v.is_int) {
        bad = !ic__scalar_fits(v, t);
    } else { /* a float value truncates toward zero, as PyTorch's conversion */
        double lo = t == IC_I32 ? -2147483649.0 : -9223372036854775808.0;
        double hi = t == IC_I32 ? 2147483648.0 : 9223372036854775808.0;
        bad = ic__narrow_int(t) ? !ic__scalar_fits(v, t) : !(v.f > lo && v.f < hi);
        iv = bad ? 0 : (int64_t)v.f;
    }
    if (bad)
        return FAIL(g, n, IC_EINVAL, "value %.17g cannot be converted to %s without overflow",
                    v.is_int ? (double)v.i : v.f, ic_dtype_name(t));
    for (int64_t i = 0; i < total; i++) {
        if (ic_dtype_is_float(t))
            ic__ref_setf(out, i, fv);
        else
            ic__ref_seti(out, i, iv);
    }
    return IC_OK;
}

static double scalar_f(ic_scalar s) { return s.is_int ? (double)s.i : s.f; }

/* start + i*step: exact (wrapping) int64 for integer dtypes with integer start and step;
 * float for f16/bf16 (PyTorch's CPU accumulate type), double otherwise. A float value for
 * an integer dtype truncates toward zero. */
static ic_status arange(const ic_graph *g, const ic_node *n, ic_tensor *out)
{
    const ic_attrs *at = &n->attrs;
    ic_dtype t = out->dtype;
    char b1[160];
    if (out->rank != 1)
        return FAIL(g, n, IC_ESHAPE, "output %s is not 1-d", tshape(out, b1, sizeof b1));
    int64_t len = out->shape[0];
    double start = scalar_f(at->astart), step = scalar_f(at->astep);
    int64_t istart, istep; /* integer dtypes: PyTorch's int64 arithmetic */
    ic__arange_int(at, &istart, &istep);
    for (int64_t i = 0; i < len; i++) {
        if (ic_dtype_is_int(t) || (t == IC_BOOL && at->astart.is_int && at->astep.is_int)) {
            ic__ref_seti(out, i, (int64_t)((uint64_t)istart + (uint64_t)i * (uint64_t)istep));
        } else if (t == IC_F16 || t == IC_BF16) {
            float v = (float)start + (float)step * (float)i;
            ic__ref_setf(out, i, v);
        } else {
            double v = start + step * (double)i;
            if (ic_dtype_is_float(t))
                ic__ref_setf(out, i, v);
            else /* through geti's saturating truncation: no undefined float-to-int cast */
                ic__ref_seti(out, i, ic__ref_geti(&(ic_tensor){ .dtype = IC_F64, .data = &v }, 0));
        }
    }
    return IC_OK;
}

ic_status ic__ref_create(const ic_graph *g, const ic_node *n, const ic_tensor *const *ins, ic_tensor *out)
{
    (void)ins;
    switch (n->info.op) {
    case IC_OP_FULL:
        return full(g, n, out);
    case IC_OP_ARANGE:
        return arange(g, n, out);
    default:
        return FAIL(g, n, IC_EINVAL, "is not a creation op");
    }
}
