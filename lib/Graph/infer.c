/* infer.c - shape and dtype inference with PyTorch's rules (broadcasting, type promotion,
 * negative dims, keepdim, reshape -1, matmul batch broadcasting), one function per op group. */
#include <math.h>
#include <string.h>
#include "infer-impl.h"
#include "spatial-impl.h"

void ic_attrs_init(ic_attrs *a, ic_op op)
{
    memset(a, 0, sizeof *a);
    a->step = 1;
    a->astart = (ic_scalar){ 0, 0, true };
    a->astep = (ic_scalar){ 1, 1, true };
    a->eps = op == IC_OP_RMS_NORM ? 1e-6 : 1e-5;
    a->dtype = op == IC_OP_ARANGE ? IC_I64 : IC_F32;
    a->negative_slope = 0.01;
    a->beta = 1;
    a->threshold = 20;
    a->groups = 1;              /* --- spatial ops --- */
    a->count_include_pad = true;
    /* --- nn ops --- */
    a->min_val = -1;
    a->max_val = 1;
    a->alpha = 1;
}

/* ---- helpers ---- */

typedef struct {
    ic_graph *g;
    ic_node *n;
    const char *name, *op;
} cx;

#define FAIL(x, code, ...) ic__node_error((x)->g, (x)->name, (x)->op, code, __VA_ARGS__)

static const ic_node *arg(const cx *x, int i) { return x->g->nodes[x->n->in[i].node]; }

static const char *shp(const cx *x, const ic_node *t, char *buf)
{
    return ic_graph_shape_str(x->g, t->info.rank, t->shape, buf, 160);
}

ic_status ic__dim_mul(ic_dim a, ic_dim b, ic_dim *out)
{
    ic_dim r;
    if (!ic__mul_ok(a.coef, b.coef, &r.coef) || a.nsym + b.nsym > IC_DIM_MAX_SYMS)
        return IC_ESHAPE;
    if (r.coef == 0) {
        *out = ic_dim_const(0);
        return IC_OK;
    }
    int i = 0, j = 0, k = 0;
    while (i < a.nsym || j < b.nsym)
        r.sym[k++] = (j >= b.nsym || (i < a.nsym && a.sym[i] <= b.sym[j])) ? a.sym[i++] : b.sym[j++];
    r.nsym = (uint16_t)k;
    *out = r;
    return IC_OK;
}

/* a / b when exact: b's symbols are a sub-multiset of a's and coefs divide. */
static bool dim_div(ic_dim a, ic_dim b, ic_dim *out)
{
    if (b.coef == 0 || a.coef % b.coef)
        return false;
    ic_dim r = { a.coef / b.coef, 0, { 0 } };
    int j = 0;
    for (int i = 0; i < a.nsym; i++) {
        if (j < b.nsym && a.sym[i] == b.sym[j])
            j++;
        else
            r.sym[r.nsym++] = a.sym[i];
    }
    if (j != b.nsym)
        return false;
    *out = r;
    return true;
}

static ic_status numel(const cx *x, int rank, const ic_dim *s, ic_dim *out)
{
    ic_dim p = ic_dim_const(1);
    for (int i = 0; i < rank; i++)
        if (ic__dim_mul(p, s[i], &p))
            return FAIL(x, IC_ESHAPE, "element count overflows or has too many symbols");
    *out = p;
    return IC_OK;
}

static bool is_one(ic_dim d) { return d.nsym == 0 && d.coef == 1; }

/* Normalises dim d of a rank-r tensor (PyTorch: -r..r-1; rank 0 takes -1..0). */
static ic_status norm_dim(const cx *x, int64_t d, int rank, const char *what, int *out)
{
    int r = rank ? rank : 1;
    if (d < -r || d >= r)
        return FAIL(x, IC_EINVAL, "%s %lld is out of range for rank %d (expected %d..%d)", what,
                    (long long)d, rank, -r, r - 1);
    *out = (int)(d < 0 ? d + r : d);
    return IC_OK;
}

static void set_shape(ic_node *n, int rank, const ic_dim *s)
{
    n->info.rank = rank;
    memmove(n->shape, s, sizeof(ic_dim) * (size_t)rank);
}

/* Broadcasts shapes a and b into out (NumPy rules; a symbol broadcasts only with 1 or itself). */
static ic_status broadcast(const cx *x, int ra, const ic_dim *a, int rb, const ic_dim *b,
                           int *rout, ic_dim *out)
{
    int r = ra > rb ? ra : rb;
    for (int i = 0; i < r; i++) {
        int ia = i - (r - ra), ib = i - (r - rb);
        ic_dim da = ia >= 0 ? a[ia] : ic_dim_const(1), db = ib >= 0 ? b[ib] : ic_dim_const(1);
        if (ic_dim_eq(da, db) || is_one(db))
            out[i] = da;
        else if (is_one(da))
            out[i] = db;
        else {
            char sa[160], sb[160];
            return FAIL(x, IC_ESHAPE, "shapes %s and %s cannot be broadcast (dim %d)",
                        ic_graph_shape_str(x->g, ra, a, sa, sizeof sa),
                        ic_graph_shape_str(x->g, rb, b, sb, sizeof sb), i - r);
        }
    }
    *rout = r;
    return IC_OK;
}

static ic_status need_tensor(const cx *x, int i)
{
    if (x->n->in[i].node < 0)
        return FAIL(x, IC_EINVAL, "input %d must be a tensor, not a %s", i,
                    x->n->in[i].node == IC_NONE ? "null" : "number");
    return IC_OK;
}

static ic_status need_float(const cx *x, ic_dtype t)
{
    if (!ic_dtype_is_float(t))
        return FAIL(x, IC_EDTYPE, "takes floating-point tensors, not %s", ic_dtype_name(t));
    return IC_OK;
}

/* PyTorch's combine_categories: a lower tier (0-d tensors, then numbers) only counts when
 * it is of a higher category (bool < integer < float) than the tier above. -1 = none. */
static int combine_tiers(int hi, int lo)
{
    if (hi < 0 || lo < 0)
        return hi < 0 ? lo : hi;
    if (ic_dtype_is_float((ic_dtype)hi))
        return hi;
    if (hi == IC_BOOL || ic_dtype_is_float((ic_dtype)lo))
        return ic__promote((ic_dtype)hi, (ic_dtype)lo);
    return hi;
}

/* The dtype of operands promoted together as torch.result_type does: tensors with dims,
 * then 0-d tensors, then numbers (wrapped as i64 or f32) as three tiers, e.g.
 * f16[3] + f32[] stays f16, i32[3] + 0.5 is f32. */
static ic_dtype promote_operands(const cx *x, int from, int to)
{
    int tier[3] = { -1, -1, -1 };
    for (int i = from; i < to; i++) {
        const ic_operand *o = &x->n->in[i];
        int k;
        ic_dtype t;
        if (o->node >= 0) {
            const ic_node *a = x->g->nodes[o->node];
            k = a->info.rank == 0 ? 1 : 0;
            t = a->info.dtype;
        } else if (o->node == IC_SCALAR) {
            k = 2;
            t = o->scalar.is_int ? IC_I64 : IC_F32;
        } else {
            continue;
        }
        tier[k] = tier[k] < 0 ? (int)t : (int)ic__promote((ic_dtype)tier[k], t);
    }
    int r = combine_tiers(tier[0], combine_tiers(tier[1], tier[2]));
    return r < 0 ? IC_I64 : (ic_dtype)r;
}

/* ---- op groups ---- */

static ic_status infer_unary(cx *x)
{
    ic_status s;
    if ((s = need_tensor(x, 0)))
        return s;
    const ic_node *a = arg(x, 0);
    ic_dtype t = a->info.dtype, out = t;
    ic_op op = x->n->info.op;
    switch (op) {
    case IC_OP_NEG: case IC_OP_ABS: case IC_OP_RELU: case IC_OP_FLOOR: case IC_OP_CEIL:
    case IC_OP_ROUND:
        if (t == IC_BOOL)
            return FAIL(x, IC_EDTYPE, "does not take bool tensors");
        break;
    case IC_OP_SIGN: /* bool stays bool, as in PyTorch */
        break;
    case IC_OP_SILU: case IC_OP_GELU: case IC_OP_HARDSWISH: case IC_OP_HARDSIGMOID:
    case IC_OP_LEAKY_RELU: case IC_OP_SOFTPLUS:
        if ((s = need_float(x, t)))
            return s;
        if (op == IC_OP_GELU && x->n->attrs.approximate != 0 && x->n->attrs.approximate != 1)
            return FAIL(x, IC_EINVAL, "approximate must be \"none\" or \"tanh\"");
        break;
    case IC_OP_LOGICAL_NOT:
        out = IC_BOOL;
        break;
    /* --- nn ops --- */
    case IC_OP_HARDTANH: /* integers clamp to the bounds truncated, as PyTorch */
        if (t == IC_BOOL)
            return FAIL(x, IC_EDTYPE, "does not take bool tensors");
        break;
    case IC_OP_MISH: case IC_OP_ELU:
        if ((s = need_float(x, t)))
            return s;
        break;
    case IC_OP_TRIU: case IC_OP_TRIL: {
        char b1[160];
        if (a->info.rank < 2)
            return FAIL(x, IC_ESHAPE, "needs at least 2 dims, got %s", shp(x, a, b1));
        break;
    }
    case IC_OP_CLAMP: {
        const ic_attrs *at = &x->n->attrs;
        bool fbound = (at->has_min && !at->min.is_int) || (at->has_max && !at->max.is_int);
        /* the bounds are numbers, promoted as PyTorch's wrapped numbers: bool -> i64 */
        if (!ic_dtype_is_float(t) && fbound)
            out = IC_F32;
        else if (t == IC_BOOL && (at->has_min || at->has_max))
            out = IC_I64;
        for (int i = 0; ic_dtype_is_int(out) && i < 2; i++) /* PyTorch converts the bounds */
            if ((i ? at->has_max : at->has_min) && !ic__scalar_fits(i ? at->max : at->min, out))
                return FAIL(x, IC_EINVAL, "%s %lld cannot be converted to %s without overflow",
                            i ? "max" : "min", (long long)(i ? at->max.i : at->min.i),
                            ic_dtype_name(out));
        break;
    }
    case IC_OP_CAST:
        if (!x->n->attrs.has_dtype || (unsigned)x->n->attrs.dtype >= IC_DTYPE_COUNT)
            return FAIL(x, IC_EINVAL, "needs attr 'dtype'");
        out = x->n->attrs.dtype;
        break;
    default: /* exp log sqrt rsqrt sin cos tanh sigmoid erf reciprocal log1p expm1: ints
              * become f32 */
        out = ic__float_result(t);
    }
    x->n->info.dtype = out;
    x->n->compute = op == IC_OP_CAST || op == IC_OP_LOGICAL_NOT ? t : out;
    set_shape(x->n, a->info.rank, a->shape);
    return IC_OK;
}

/* Shape of operand i (a number is a 0-d tensor). */
static int operand_shape(const cx *x, int i, const ic_dim **s)
{
    static const ic_dim none[1] = { { 1, 0, { 0 } } };
    if (x->n->in[i].node < 0) {
        *s = none;
        return 0;
    }
    const ic_node *a = arg(x, i);
    *s = a->shape;
    return a->info.rank;
}

static ic_status infer_binary(cx *x)
{
    ic_node *n = x->n;
    for (int i = 0; i < 2; i++)
        if (n->in[i].node == IC_NONE)
            return FAIL(x, IC_EINVAL, "input %d is null", i);
    if (n->in[0].node < 0 && n->in[1].node < 0)
        return FAIL(x, IC_EINVAL, "needs at least one tensor operand");
    const ic_dim *sa, *sb;
    int ra = operand_shape(x, 0, &sa), rb = operand_shape(x, 1, &sb), r;
    ic_dim out[IC_MAX_RANK];
    ic_status s = broadcast(x, ra, sa, rb, sb, &r, out);
    if (s)
        return s;
    ic_dtype t = promote_operands(x, 0, 2);
    ic_op op = n->info.op;
    n->compute = t;
    switch (op) {
    case IC_OP_SUB: case IC_OP_POW: case IC_OP_REMAINDER:
        if (t == IC_BOOL)
            return FAIL(x, IC_EDTYPE, "does not take two bool operands");
        n->info.dtype = t;
        break;
    case IC_OP_DIV:
        n->compute = n->info.dtype = ic__float_result(t);
        break;
    case IC_OP_EQ: case IC_OP_NE: case IC_OP_LT: case IC_OP_LE: case IC_OP_GT: case IC_OP_GE:
    case IC_OP_LOGICAL_AND: case IC_OP_LOGICAL_OR:
        n->info.dtype = IC_BOOL;
        break;
    default:
        n->info.dtype = t;
    }
    set_shape(n, r, out);
    return IC_OK;
}

static ic_status infer_where(cx *x)
{
    ic_node *n = x->n;
    ic_status s;
    if ((s = need_tensor(x, 0)))
        return s;
    if (arg(x, 0)->info.dtype != IC_BOOL)
        return FAIL(x, IC_EDTYPE, "condition must be bool, not %s", ic_dtype_name(arg(x, 0)->info.dtype));
    for (int i = 1; i < 3; i++)
        if (n->in[i].node == IC_NONE)
            return FAIL(x, IC_EINVAL, "input %d is null", i);
    const ic_dim *s0, *s1, *s2;
    int r0 = operand_shape(x, 0, &s0), r1 = operand_shape(x, 1, &s1), r2 = operand_shape(x, 2, &s2);
    ic_dim t[IC_MAX_RANK], out[IC_MAX_RANK];
    int rt, r;
    if ((s = broadcast(x, r0, s0, r1, s1, &rt, t)) || (s = broadcast(x, rt, t, r2, s2, &r, out)))
        return s;
    n->info.dtype = n->compute = promote_operands(x, 1, 3);
    set_shape(n, r, out);
    return IC_OK;
}

/* Reads a list of dims (reductions, squeeze) into a bitmask of normalised axes. */
static ic_status axes_mask(cx *x, int rank, uint32_t *mask)
{
    const ic_attrs *a = &x->n->attrs;
    *mask = 0;
    if (!a->has_dims || a->ndims == 0) {
        *mask = rank ? (1u << rank) - 1 : 0;
        return IC_OK;
    }
    if (a->ndims < 0 || a->ndims > IC_MAX_RANK)
        return FAIL(x, IC_EINVAL, "too many dims");
    for (int i = 0; i < a->ndims; i++) {
        int d = 0;
        ic_status s = norm_dim(x, a->dims[i], rank, "dim", &d);
        if (s)
            return s;
        if (rank == 0)
            continue;
        if (*mask & (1u << d))
            return FAIL(x, IC_EINVAL, "dim %d appears twice in dims", d);
        *mask |= 1u << d;
    }
    return IC_OK;
}

static ic_status reduce_shape(cx *x, const ic_node *a, uint32_t mask)
{
    ic_dim out[IC_MAX_RANK];
    int r = 0;
    for (int i = 0; i < a->info.rank; i++) {
        if (!(mask & (1u << i)))
            out[r++] = a->shape[i];
        else if (x->n->attrs.keepdim)
            out[r++] = ic_dim_const(1);
    }
    x->n->axes = mask;
    set_shape(x->n, r, out);
    return IC_OK;
}

/* The node's one axis attrs.dim over a's dims: sets n->axis, and *mask to its bit (none for a
 * scalar), as softmax and argmax reduce over one dim. */
static ic_status one_axis(cx *x, const ic_node *a, uint32_t *mask)
{
    int d = 0;
    ic_status s = norm_dim(x, x->n->attrs.dim, a->info.rank, "dim", &d);
    if (s)
        return s;
    x->n->axis = d;
    *mask = a->info.rank ? 1u << d : 0;
    return IC_OK;
}

static ic_status infer_reduce(cx *x)
{
    ic_status s;
    if ((s = need_tensor(x, 0)))
        return s;
    const ic_node *a = arg(x, 0);
    ic_node *n = x->n;
    ic_dtype t = a->info.dtype;
    uint32_t mask;
    switch (n->info.op) {
    case IC_OP_SUM: case IC_OP_PROD:
        n->info.dtype = ic__sum_result(t);
        break;
    case IC_OP_MEAN:
        if ((s = need_float(x, t)))
            return s;
        n->info.dtype = t;
        break;
    case IC_OP_ARGMAX:
        if (t == IC_BOOL)
            return FAIL(x, IC_EDTYPE, "does not take bool tensors");
        n->info.dtype = IC_I64;
        break;
    default:
        n->info.dtype = t;
    }
    n->compute = t;
    if ((s = n->info.op == IC_OP_ARGMAX ? one_axis(x, a, &mask) : axes_mask(x, a->info.rank, &mask)))
        return s;
    bool needs_elems = n->info.op == IC_OP_AMAX || n->info.op == IC_OP_AMIN || n->info.op == IC_OP_ARGMAX;
    for (int i = 0; i < a->info.rank; i++)
        if ((mask & (1u << i)) && needs_elems && a->shape[i].nsym == 0 && a->shape[i].coef == 0)
            return FAIL(x, IC_ESHAPE, "reduces dim %d of size 0, which has no identity", i);
    return reduce_shape(x, a, mask);
}

static ic_status check_norm_operand(cx *x, int i, int rank, const ic_dim *shape, ic_dtype t)
{
    if (i >= x->n->info.ninputs || x->n->in[i].node == IC_NONE)
        return IC_OK;
    ic_status s;
    if ((s = need_tensor(x, i)))
        return s;
    const ic_node *w = arg(x, i);
    char b1[160], b2[160];
    if (w->info.dtype != t)
        return FAIL(x, IC_EDTYPE, "input %d is %s, expected %s like the input", i,
                    ic_dtype_name(w->info.dtype), ic_dtype_name(t));
    bool same = w->info.rank == rank;
    for (int k = 0; same && k < rank; k++)
        same = ic_dim_eq(w->shape[k], shape[k]);
    if (!same)
        return FAIL(x, IC_ESHAPE, "input %d has shape %s, expected normalized_shape %s", i,
                    shp(x, w, b1), ic_graph_shape_str(x->g, rank, shape, b2, sizeof b2));
    return IC_OK;
}

static ic_status infer_norm(cx *x)
{
    ic_status s;
    if ((s = need_tensor(x, 0)))
        return s;
    const ic_node *a = arg(x, 0);
    ic_node *n = x->n;
    if ((s = need_float(x, a->info.dtype)))
        return s;
    n->info.dtype = n->compute = a->info.dtype;
    if (n->info.op == IC_OP_SOFTMAX || n->info.op == IC_OP_LOG_SOFTMAX) {
        if ((s = one_axis(x, a, &n->axes)))
            return s;
        set_shape(n, a->info.rank, a->shape);
        return IC_OK;
    }
    const ic_attrs *at = &n->attrs;
    char b1[160], b2[160];
    if (at->nshape < 1 || at->nshape > a->info.rank)
        return FAIL(x, IC_ESHAPE, "normalized_shape has %d dims, input %s has %d", at->nshape,
                    shp(x, a, b1), a->info.rank);
    int off = a->info.rank - at->nshape;
    for (int i = 0; i < at->nshape; i++)
        if (!ic_dim_eq(at->shape[i], a->shape[off + i]))
            return FAIL(x, IC_ESHAPE, "normalized_shape %s does not match the last dims of %s",
                        ic_graph_shape_str(x->g, at->nshape, at->shape, b2, sizeof b2), shp(x, a, b1));
    if (!(at->eps >= 0) || isinf(at->eps))
        return FAIL(x, IC_EINVAL, "eps must be a non-negative number");
    for (int i = 1; i < n->info.ninputs; i++)
        if ((s = check_norm_operand(x, i, at->nshape, at->shape, a->info.dtype)))
            return s;
    n->axes = 0;
    for (int i = off; i < a->info.rank; i++)
        n->axes |= 1u << i;
    set_shape(n, a->info.rank, a->shape);
    return IC_OK;
}

static ic_status infer_reshape(cx *x, const ic_node *a)
{
    const ic_attrs *at = &x->n->attrs;
    ic_dim out[IC_MAX_RANK], total, known = ic_dim_const(1);
    int infer_at = -1;
    ic_status s;
    char b1[160], b2[160];
    if (at->nshape < 0 || at->nshape > IC_MAX_RANK)
        return FAIL(x, IC_ESHAPE, "shape has more than %d dims", IC_MAX_RANK);
    for (int i = 0; i < at->nshape; i++) {
        ic_dim d = at->shape[i];
        if (d.nsym == 0 && d.coef == -1) {
            if (infer_at >= 0)
                return FAIL(x, IC_ESHAPE, "shape has more than one -1");
            infer_at = i;
            continue;
        }
        if (d.coef < 0)
            return FAIL(x, IC_ESHAPE, "shape has negative size %lld", (long long)d.coef);
        if (ic__dim_mul(known, d, &known))
            return FAIL(x, IC_ESHAPE, "shape's element count overflows");
        out[i] = d;
    }
    if ((s = numel(x, a->info.rank, a->shape, &total)))
        return s;
    const char *ts = ic_graph_shape_str(x->g, at->nshape, at->shape, b2, sizeof b2);
    if (infer_at >= 0) {
        ic_dim q;
        if (known.nsym == 0 && known.coef == 0)
            return FAIL(x, IC_ESHAPE, "cannot infer -1 in %s for %s: other dims are 0", ts, shp(x, a, b1));
        if (!dim_div(total, known, &q))
            return FAIL(x, IC_ESHAPE, "shape %s is invalid for input %s", ts, shp(x, a, b1));
        out[infer_at] = q;
    } else if (!ic_dim_eq(total, known)) {
        return FAIL(x, IC_ESHAPE, "shape %s is invalid for input %s", ts, shp(x, a, b1));
    }
    set_shape(x->n, at->nshape, out);
    return IC_OK;
}

static ic_status infer_permute(cx *x, const ic_node *a, const int64_t *dims, int nd)
{
    int r = a->info.rank;
    uint32_t seen = 0;
    ic_dim out[IC_MAX_RANK];
    if (nd != r)
        return FAIL(x, IC_EINVAL, "dims has %d entries, input has rank %d", nd, r);
    for (int i = 0; i < r; i++) {
        int d = 0;
        ic_status s = norm_dim(x, dims[i], r, "dim", &d);
        if (s)
            return s;
        if (seen & (1u << d))
            return FAIL(x, IC_EINVAL, "dim %d repeats in dims", d);
        seen |= 1u << d;
        x->n->perm[i] = d;
        out[i] = a->shape[d];
    }
    set_shape(x->n, r, out);
    return IC_OK;
}

static ic_status infer_expand(cx *x, const ic_node *a)
{
    const ic_attrs *at = &x->n->attrs;
    int r = at->nshape, ra = a->info.rank;
    ic_dim out[IC_MAX_RANK];
    char b1[160], b2[160];
    if (r < ra || r > IC_MAX_RANK)
        return FAIL(x, IC_ESHAPE, "cannot expand %s to %d dims", shp(x, a, b1), r);
    for (int i = 0; i < r; i++) {
        ic_dim d = at->shape[i];
        int ia = i - (r - ra);
        bool keep = d.nsym == 0 && d.coef == -1;
        if (ia < 0) {
            if (keep || d.coef < 0)
                return FAIL(x, IC_ESHAPE, "new leading dim %d cannot be %lld", i, (long long)d.coef);
            out[i] = d;
        } else if (keep || ic_dim_eq(d, a->shape[ia])) {
            out[i] = a->shape[ia];
        } else if (is_one(a->shape[ia]) && d.coef >= 0) {
            out[i] = d;
        } else {
            return FAIL(x, IC_ESHAPE, "cannot expand %s to %s (dim %d)", shp(x, a, b1),
                        ic_graph_shape_str(x->g, r, at->shape, b2, sizeof b2), i);
        }
    }
    set_shape(x->n, r, out);
    return IC_OK;
}

static ic_status infer_slice(cx *x, const ic_node *a)
{
    const ic_attrs *at = &x->n->attrs;
    int d = 0;
    ic_status s;
    char b1[160];
    if (a->info.rank == 0)
        return FAIL(x, IC_ESHAPE, "cannot slice a 0-d tensor");
    if ((s = norm_dim(x, at->dim, a->info.rank, "dim", &d)))
        return s;
    if (at->step <= 0)
        return FAIL(x, IC_EINVAL, "step must be positive, not %lld", (long long)at->step);
    ic_dim out[IC_MAX_RANK];
    memcpy(out, a->shape, sizeof(ic_dim) * (size_t)a->info.rank);
    ic_dim sz = a->shape[d];
    x->n->axis = d;
    if (sz.nsym) {
        if ((at->has_start && at->start != 0) || (at->has_end && at->end < INT64_MAX) || at->step != 1)
            return FAIL(x, IC_EUNSUPPORTED, "slicing symbolic dim %d of %s needs fixed sizes", d, shp(x, a, b1));
        set_shape(x->n, a->info.rank, out);
        return IC_OK;
    }
    int64_t n = sz.coef, st = at->has_start ? at->start : 0, en = at->has_end ? at->end : n;
    if (st < 0) st += n;
    if (en < 0) en += n;
    st = st < 0 ? 0 : st > n ? n : st;
    en = en < st ? st : en > n ? n : en;
    out[d] = ic_dim_const(en == st ? 0 : (en - st - 1) / at->step + 1); /* no overflow for huge steps */
    set_shape(x->n, a->info.rank, out);
    return IC_OK;
}

static ic_status infer_view(cx *x)
{
    ic_status s;
    if ((s = need_tensor(x, 0)))
        return s;
    const ic_node *a = arg(x, 0);
    ic_node *n = x->n;
    const ic_attrs *at = &n->attrs;
    n->info.dtype = n->compute = a->info.dtype;
    int r = a->info.rank, d = 0;
    ic_dim out[IC_MAX_RANK];
    switch (n->info.op) {
    case IC_OP_UNFOLD: case IC_OP_FLIP: /* --- spatial ops --- */
        return ic__infer_spatial(x->g, x->n);
    case IC_OP_RESHAPE:
        return infer_reshape(x, a);
    case IC_OP_PERMUTE:
        return infer_permute(x, a, at->dims, at->has_dims ? at->ndims : -1);
    case IC_OP_TRANSPOSE: {
        int64_t dims[IC_MAX_RANK];
        int d0 = 0, d1 = 0;
        if ((s = norm_dim(x, at->dim0, r, "dim0", &d0)) || (s = norm_dim(x, at->dim1, r, "dim1", &d1)))
            return s;
        if (r == 0) { /* PyTorch lets a 0-d tensor name dim 0 / -1: the identity */
            set_shape(n, 0, a->shape);
            return IC_OK;
        }
        for (int i = 0; i < r; i++)
            dims[i] = i == d0 ? d1 : i == d1 ? d0 : i;
        return infer_permute(x, a, dims, r);
    }
    case IC_OP_EXPAND:
        return infer_expand(x, a);
    case IC_OP_UNSQUEEZE:
        if (r >= IC_MAX_RANK)
            return FAIL(x, IC_ESHAPE, "rank would exceed %d", IC_MAX_RANK);
        if ((s = norm_dim(x, at->dim, r + 1, "dim", &d)))
            return s;
        for (int i = 0, k = 0; i <= r; i++)
            out[i] = i == d ? ic_dim_const(1) : a->shape[k++];
        n->axis = d;
        set_shape(n, r + 1, out);
        return IC_OK;
    case IC_OP_SQUEEZE: {
        uint32_t mask;
        if ((s = axes_mask(x, r, &mask)))
            return s;
        int k = 0;
        n->axes = 0;
        for (int i = 0; i < r; i++) {
            if ((mask & (1u << i)) && is_one(a->shape[i]))
                n->axes |= 1u << i;
            else
                out[k++] = a->shape[i];
        }
        set_shape(n, k, out);
        return IC_OK;
    }
    default:
        return infer_slice(x, a);
    }
}

static ic_status infer_cat(cx *x)
{
    ic_node *n = x->n;
    ic_status s;
    char b1[160], b2[160];
    for (int i = 0; i < n->info.ninputs; i++)
        if ((s = need_tensor(x, i)))
            return s;
    const ic_node *a = arg(x, 0);
    int r = a->info.rank, d = 0;
    if (r == 0)
        return FAIL(x, IC_ESHAPE, "cannot concatenate 0-d tensors");
    if ((s = norm_dim(x, n->attrs.dim, r, "dim", &d)))
        return s;
    ic_dim out[IC_MAX_RANK];
    memcpy(out, a->shape, sizeof(ic_dim) * (size_t)r);
    for (int i = 1; i < n->info.ninputs; i++) {
        const ic_node *b = arg(x, i);
        bool ok = b->info.rank == r;
        for (int k = 0; ok && k < r; k++)
            ok = k == d || ic_dim_eq(b->shape[k], a->shape[k]);
        if (!ok)
            return FAIL(x, IC_ESHAPE, "input %d has shape %s, input 0 has %s (cat dim %d)", i,
                        shp(x, b, b1), shp(x, a, b2), d);
        ic_dim bd = b->shape[d];
        if (bd.nsym || out[d].nsym)
            return FAIL(x, IC_EUNSUPPORTED, "concatenating along symbolic dim %d", d);
        if (__builtin_add_overflow(out[d].coef, bd.coef, &out[d].coef))
            return FAIL(x, IC_ESHAPE, "size overflows");
    }
    n->axis = d;
    n->info.dtype = n->compute = promote_operands(x, 0, n->info.ninputs);
    set_shape(n, r, out);
    return IC_OK;
}

static ic_status contract_dtypes(cx *x, const ic_node *a, const ic_node *b)
{
    if (a->info.dtype != b->info.dtype)
        return FAIL(x, IC_EDTYPE, "operands are %s and %s; both must have the same dtype",
                    ic_dtype_name(a->info.dtype), ic_dtype_name(b->info.dtype));
    if (a->info.dtype == IC_BOOL)
        return FAIL(x, IC_EDTYPE, "does not take bool tensors");
    x->n->info.dtype = x->n->compute = a->info.dtype;
    return IC_OK;
}

static ic_status inner_mismatch(cx *x, const ic_node *a, const ic_node *b)
{
    char b1[160], b2[160];
    return FAIL(x, IC_ESHAPE, "%s x %s: inner dims differ", shp(x, a, b1), shp(x, b, b2));
}

static ic_status infer_matmul(cx *x, const ic_node *a, const ic_node *b)
{
    int ra = a->info.rank, rb = b->info.rank;
    char b1[160], b2[160];
    if (ra == 0 || rb == 0)
        return FAIL(x, IC_ESHAPE, "both operands need at least 1 dim, got %s x %s", shp(x, a, b1), shp(x, b, b2));
    ic_dim ka = a->shape[ra - 1], kb = b->shape[rb >= 2 ? rb - 2 : 0];
    if (!ic_dim_eq(ka, kb))
        return inner_mismatch(x, a, b);
    ic_dim out[IC_MAX_RANK];
    int r = 0;
    if (ra >= 2 || rb >= 2) {
        int nba = ra > 2 ? ra - 2 : 0, nbb = rb > 2 ? rb - 2 : 0;
        ic_status s = broadcast(x, nba, a->shape, nbb, b->shape, &r, out);
        if (s)
            return s;
    }
    if (ra >= 2)
        out[r++] = a->shape[ra - 2];
    if (rb >= 2)
        out[r++] = b->shape[rb - 1];
    if (r > IC_MAX_RANK)
        return FAIL(x, IC_ESHAPE, "rank exceeds %d", IC_MAX_RANK);
    set_shape(x->n, r, out);
    return IC_OK;
}

static ic_status infer_linear(cx *x, const ic_node *a, const ic_node *w)
{
    char b1[160], b2[160];
    int ra = a->info.rank, rw = w->info.rank;
    if (ra < 1 || rw < 1 || rw > 2)
        return FAIL(x, IC_ESHAPE, "input %s and weight %s: weight must be [out, in] or [in]",
                    shp(x, a, b1), shp(x, w, b2));
    if (!ic_dim_eq(a->shape[ra - 1], w->shape[rw - 1]))
        return FAIL(x, IC_ESHAPE, "input %s and weight %s: in_features differ", shp(x, a, b1), shp(x, w, b2));
    ic_dim out[IC_MAX_RANK];
    memcpy(out, a->shape, sizeof(ic_dim) * (size_t)ra);
    int r = ra;
    if (rw == 2)
        out[r - 1] = w->shape[0];
    else
        r--;
    set_shape(x->n, r, out);
    if (x->n->info.ninputs == 3 && x->n->in[2].node != IC_NONE) {
        ic_status s;
        if ((s = need_tensor(x, 2)))
            return s;
        const ic_node *bias = arg(x, 2);
        int rr;
        ic_dim tmp[IC_MAX_RANK];
        if (bias->info.dtype != a->info.dtype)
            return FAIL(x, IC_EDTYPE, "bias is %s, input is %s", ic_dtype_name(bias->info.dtype),
                        ic_dtype_name(a->info.dtype));
        if ((s = broadcast(x, r, out, bias->info.rank, bias->shape, &rr, tmp)))
            return s;
        if (rr != r)
            return FAIL(x, IC_ESHAPE, "bias %s has more dims than the output", shp(x, bias, b1));
        for (int i = 0; i < r; i++)
            if (!ic_dim_eq(tmp[i], out[i]))
                return FAIL(x, IC_ESHAPE, "bias %s does not broadcast to the output", shp(x, bias, b1));
    }
    return IC_OK;
}

static ic_status infer_contract(cx *x)
{
    ic_status s;
    if ((s = need_tensor(x, 0)) || (s = need_tensor(x, 1)))
        return s;
    const ic_node *a = arg(x, 0), *b = arg(x, 1);
    if ((s = contract_dtypes(x, a, b)))
        return s;
    switch (x->n->info.op) {
    case IC_OP_MATMUL:
        return infer_matmul(x, a, b);
    case IC_OP_LINEAR:
        return infer_linear(x, a, b);
    default: {
        char b1[160], b2[160];
        if (a->info.rank != 3 || b->info.rank != 3)
            return FAIL(x, IC_ESHAPE, "needs 3-d operands, got %s x %s", shp(x, a, b1), shp(x, b, b2));
        if (!ic_dim_eq(a->shape[0], b->shape[0]))
            return FAIL(x, IC_ESHAPE, "batch sizes differ: %s x %s", shp(x, a, b1), shp(x, b, b2));
        if (!ic_dim_eq(a->shape[2], b->shape[1]))
            return inner_mismatch(x, a, b);
        ic_dim out[3] = { a->shape[0], a->shape[1], b->shape[2] };
        set_shape(x->n, 3, out);
        return IC_OK;
    }
    }
}

static ic_status infer_embedding(cx *x)
{
    ic_status s;
    char b1[160];
    if ((s = need_tensor(x, 0)) || (s = need_tensor(x, 1)))
        return s;
    const ic_node *w = arg(x, 0), *ix = arg(x, 1);
    if (w->info.rank != 2)
        return FAIL(x, IC_ESHAPE, "weight must be 2-d, got %s", shp(x, w, b1));
    if (ix->info.dtype != IC_I32 && ix->info.dtype != IC_I64)
        return FAIL(x, IC_EDTYPE, "indices must be i32 or i64, not %s", ic_dtype_name(ix->info.dtype));
    if (ix->info.rank + 1 > IC_MAX_RANK)
        return FAIL(x, IC_ESHAPE, "rank exceeds %d", IC_MAX_RANK);
    ic_dim out[IC_MAX_RANK];
    memcpy(out, ix->shape, sizeof(ic_dim) * (size_t)ix->info.rank);
    out[ix->info.rank] = w->shape[1];
    x->n->info.dtype = x->n->compute = w->info.dtype;
    set_shape(x->n, ix->info.rank + 1, out);
    return IC_OK;
}

static ic_status infer_create(cx *x)
{
    ic_node *n = x->n;
    const ic_attrs *at = &n->attrs;
    if ((unsigned)at->dtype >= IC_DTYPE_COUNT)
        return FAIL(x, IC_EINVAL, "bad dtype");
    n->info.dtype = n->compute = at->dtype;
    if (n->info.op == IC_OP_FULL) {
        if (!at->has_dtype)
            return FAIL(x, IC_EINVAL, "needs attr 'dtype'");
        if (at->nshape < 0 || at->nshape > IC_MAX_RANK)
            return FAIL(x, IC_ESHAPE, "shape has more than %d dims", IC_MAX_RANK);
        ic_dim tot;
        for (int i = 0; i < at->nshape; i++)
            if (at->shape[i].coef < 0)
                return FAIL(x, IC_ESHAPE, "shape has negative size %lld", (long long)at->shape[i].coef);
        ic_status s = numel(x, at->nshape, at->shape, &tot);
        if (s)
            return s;
        set_shape(n, at->nshape, at->shape);
        return IC_OK;
    }
    double st = at->astart.f, en = at->aend.f, sp = at->astep.f;
    if (!(sp != 0) || !isfinite(st) || !isfinite(en) || !isfinite(sp))
        return FAIL(x, IC_EINVAL, "start, end and step must be finite and step non-zero");
    double len = ceil((en - st) / sp);
    if (len < 0 || (en - st) * sp < 0)
        return FAIL(x, IC_EINVAL, "end %g is on the wrong side of start %g for step %g", en, st, sp);
    if (len > 4e18)
        return FAIL(x, IC_ESHAPE, "too many elements");
    int64_t ilen = (int64_t)len;
    bool exact = at->astart.is_int && at->aend.is_int && at->astep.is_int;
    if (ic_dtype_is_int(at->dtype) && !exact) { /* in int64 from truncated start and step */
        int64_t s0, p0, e0 = at->aend.is_int ? at->aend.i : ic__float_to_int(en, IC_I64);
        ic__arange_int(at, &s0, &p0);
        if (p0 == 0)
            return FAIL(x, IC_EINVAL, "step must be nonzero (step %g truncates to 0 for %s)", sp,
                        ic_dtype_name(at->dtype));
        if (!((p0 > 0 && e0 >= s0) || (p0 < 0 && e0 <= s0)))
            return FAIL(x, IC_EINVAL, "end %g is on the wrong side of start %g for step %g", en, st, sp);
        /* PyTorch's length: from the truncated bounds for i64, from the numbers otherwise */
        if (at->dtype == IC_I64)
            ilen = (int64_t)ceil((double)((__int128)e0 - s0) / (double)p0);
    }
    if (exact) {
        /* exact for large i64 bounds, where doubles lose the low bits */
        __int128 span = (__int128)at->aend.i - at->astart.i, step = at->astep.i;
        __int128 q = span / step + ((span % step) != 0 && ((span < 0) == (step < 0)));
        if (q < 0)
            return FAIL(x, IC_EINVAL, "end is on the wrong side of start for the step");
        ilen = (int64_t)q;
    }
    ic_dim d = ic_dim_const(ilen);
    set_shape(n, 1, &d);
    return IC_OK;
}

/* ---- nn ops (issue 12) ---- */

/* Checks that input i, when present, is a 1-d tensor of c elements (a per-channel
 * parameter of batch_norm / group_norm). */
static ic_status channel_param(cx *x, int i, ic_dim c, const char *what)
{
    if (i >= x->n->info.ninputs || x->n->in[i].node == IC_NONE)
        return IC_OK;
    ic_status s;
    if ((s = need_tensor(x, i)))
        return s;
    const ic_node *w = arg(x, i);
    char b1[160], b2[160];
    if (w->info.rank != 1 || !ic_dim_eq(w->shape[0], c))
        return FAIL(x, IC_ESHAPE, "%s (input %d) has shape %s, expected [%s] (the channels, dim 1 "
                    "of the input)", what, i, shp(x, w, b1), ic_graph_shape_str(x->g, 1, &c, b2, sizeof b2) + 1);
    return IC_OK;
}

/* batch_norm(x, running_mean, running_var, weight?, bias?): inference with the running
 * statistics over channel dim 1. The parameters share one dtype: x's, or f32 for f16/bf16
 * x (PyTorch's mixed-precision batch_norm). */
static ic_status infer_batch_norm(cx *x)
{
    static const char *const what[] = { "", "running_mean", "running_var", "weight", "bias" };
    ic_status s;
    char b1[160];
    if ((s = need_tensor(x, 0)) || (s = need_tensor(x, 1)) || (s = need_tensor(x, 2)))
        return s;
    const ic_node *a = arg(x, 0);
    ic_dtype t = a->info.dtype, pt = arg(x, 1)->info.dtype;
    if ((s = need_float(x, t)))
        return s;
    if (a->info.rank < 2)
        return FAIL(x, IC_ESHAPE, "expects an input of at least 2 dims [N, C, ...], got %s", shp(x, a, b1));
    if (!(x->n->attrs.eps >= 0) || isinf(x->n->attrs.eps))
        return FAIL(x, IC_EINVAL, "eps must be a non-negative number");
    for (int i = 1; i < x->n->info.ninputs; i++) {
        if ((s = channel_param(x, i, a->shape[1], what[i])))
            return s;
        if (x->n->in[i].node == IC_NONE)
            continue;
        ic_dtype wt = arg(x, i)->info.dtype;
        if (wt != pt || !(wt == t || (wt == IC_F32 && (t == IC_F16 || t == IC_BF16))))
            return FAIL(x, IC_EDTYPE, "%s is %s; the parameters must all be %s like the input%s", what[i],
                        ic_dtype_name(wt), ic_dtype_name(t), t == IC_F16 || t == IC_BF16 ? " (or all f32)" : "");
    }
    x->n->info.dtype = t;
    x->n->compute = pt;
    x->n->axis = 1;
    set_shape(x->n, a->info.rank, a->shape);
    return IC_OK;
}

/* group_norm(x [N, C, *], weight?, bias?): C split into num_groups groups, each normalised
 * over its channels and the spatial dims. */
static ic_status infer_group_norm(cx *x)
{
    ic_status s;
    char b1[160];
    if ((s = need_tensor(x, 0)))
        return s;
    const ic_node *a = arg(x, 0);
    const ic_attrs *at = &x->n->attrs;
    if ((s = need_float(x, a->info.dtype)))
        return s;
    if (a->info.rank < 2)
        return FAIL(x, IC_ESHAPE, "expects an input of at least 2 dims [N, C, ...], got %s", shp(x, a, b1));
    if (at->num_groups <= 0)
        return FAIL(x, IC_EINVAL, "num_groups must be positive, not %lld", (long long)at->num_groups);
    ic_dim c = a->shape[1];
    if (c.nsym || c.coef % at->num_groups)
        return FAIL(x, IC_ESHAPE, "the channels of input %s (dim 1) must be a multiple of num_groups=%lld",
                    shp(x, a, b1), (long long)at->num_groups);
    if (!(at->eps >= 0) || isinf(at->eps))
        return FAIL(x, IC_EINVAL, "eps must be a non-negative number");
    for (int i = 1; i < x->n->info.ninputs; i++) {
        if ((s = channel_param(x, i, c, i == 1 ? "weight" : "bias")))
            return s;
        if (x->n->in[i].node != IC_NONE && arg(x, i)->info.dtype != a->info.dtype)
            return FAIL(x, IC_EDTYPE, "input %d is %s, expected %s like the input", i,
                        ic_dtype_name(arg(x, i)->info.dtype), ic_dtype_name(a->info.dtype));
    }
    x->n->info.dtype = x->n->compute = a->info.dtype;
    set_shape(x->n, a->info.rank, a->shape);
    return IC_OK;
}

/* scaled_dot_product_attention(q [..., L, E], k [..., S, E], v [..., S, Ev], mask?):
 * [..., L, Ev], batch dims broadcast as matmul's. The mask is bool (true = attend), or
 * float (added): of q's dtype, or f32 (PyTorch 2.x takes it for any q) and broadcasts to
 * [..., L, S]. */
static ic_status infer_sdpa(cx *x)
{
    ic_status s;
    char b1[160], b2[160], b3[160];
    for (int i = 0; i < 3; i++)
        if ((s = need_tensor(x, i)))
            return s;
    const ic_node *q = arg(x, 0), *k = arg(x, 1), *v = arg(x, 2);
    ic_dtype t = q->info.dtype;
    if ((s = need_float(x, t)))
        return s;
    if (k->info.dtype != t || v->info.dtype != t)
        return FAIL(x, IC_EDTYPE, "q, k and v must have one dtype, got %s, %s and %s", ic_dtype_name(t),
                    ic_dtype_name(k->info.dtype), ic_dtype_name(v->info.dtype));
    int rq = q->info.rank, rk = k->info.rank, rv = v->info.rank;
    if (rq < 2 || rk < 2 || rv < 2)
        return FAIL(x, IC_ESHAPE, "q, k and v need at least 2 dims, got %s, %s and %s", shp(x, q, b1),
                    shp(x, k, b2), shp(x, v, b3));
    if (!ic_dim_eq(q->shape[rq - 1], k->shape[rk - 1]) || !ic_dim_eq(k->shape[rk - 2], v->shape[rv - 2]))
        return FAIL(x, IC_ESHAPE, "q %s, k %s and v %s: q and k must share the last dim (E) and k and v "
                    "the second last (S)", shp(x, q, b1), shp(x, k, b2), shp(x, v, b3));
    ic_dim bqk[IC_MAX_RANK], out[IC_MAX_RANK];
    int r1, r;
    if ((s = broadcast(x, rq - 2, q->shape, rk - 2, k->shape, &r1, bqk)) ||
        (s = broadcast(x, r1, bqk, rv - 2, v->shape, &r, out)))
        return s;
    out[r] = q->shape[rq - 2];
    out[r + 1] = v->shape[rv - 1];
    if (x->n->attrs.has_scale && !isfinite(x->n->attrs.scale))
        return FAIL(x, IC_EINVAL, "scale must be a finite number");
    if (x->n->info.ninputs == 4 && x->n->in[3].node != IC_NONE) {
        if ((s = need_tensor(x, 3)))
            return s;
        const ic_node *m = arg(x, 3);
        if (x->n->attrs.is_causal)
            return FAIL(x, IC_EINVAL, "takes attn_mask or is_causal, not both");
        if (m->info.dtype != IC_BOOL && m->info.dtype != IC_F32 && m->info.dtype != t)
            return FAIL(x, IC_EDTYPE, "attn_mask must be bool, f32 or %s like q, not %s", ic_dtype_name(t),
                        ic_dtype_name(m->info.dtype));
        ic_dim sc[IC_MAX_RANK], tmp[IC_MAX_RANK];
        memcpy(sc, out, sizeof(ic_dim) * (size_t)r);
        sc[r] = q->shape[rq - 2];
        sc[r + 1] = k->shape[rk - 2];
        int rr;
        bool same = !broadcast(x, r + 2, sc, m->info.rank, m->shape, &rr, tmp) && rr == r + 2;
        for (int i = 0; same && i < rr; i++)
            same = ic_dim_eq(tmp[i], sc[i]);
        if (!same)
            return FAIL(x, IC_ESHAPE, "attn_mask %s does not broadcast to the scores %s", shp(x, m, b1),
                        ic_graph_shape_str(x->g, r + 2, sc, b2, sizeof b2));
    }
    if (x->n->attrs.transpose_out) {
        if (!x->n->attrs.fused || r < 1)
            return FAIL(x, IC_EINVAL, "transpose_out needs a fused attention with a batch dim");
        ic_dim h = out[r - 1];
        out[r - 1] = out[r];
        out[r] = h;
    }
    x->n->info.dtype = x->n->compute = t;
    set_shape(x->n, r + 2, out);
    return IC_OK;
}

/* gather(x, index, dim): index has x's rank and no dim larger than x's but dim; the
 * result has index's shape. index_select(x, index (1-d or 0-d), dim): x with dim resized
 * to the number of indices. */
static ic_status infer_gather(cx *x)
{
    ic_status s;
    char b1[160], b2[160];
    if ((s = need_tensor(x, 0)) || (s = need_tensor(x, 1)))
        return s;
    const ic_node *a = arg(x, 0), *ix = arg(x, 1);
    int r = a->info.rank, d = 0;
    if (ix->info.dtype != IC_I32 && ix->info.dtype != IC_I64)
        return FAIL(x, IC_EDTYPE, "index must be i32 or i64, not %s", ic_dtype_name(ix->info.dtype));
    if ((s = norm_dim(x, x->n->attrs.dim, r, "dim", &d)))
        return s;
    x->n->axis = d;
    x->n->info.dtype = x->n->compute = a->info.dtype;
    if (x->n->info.op == IC_OP_GATHER) {
        if (ix->info.rank != r)
            return FAIL(x, IC_ESHAPE, "index %s must have as many dims as the input %s", shp(x, ix, b1),
                        shp(x, a, b2));
        for (int i = 0; i < r; i++) {
            ic_dim di = ix->shape[i], da = a->shape[i];
            bool ok = i == d || ic_dim_eq(di, da) || (!di.nsym && !da.nsym && di.coef <= da.coef);
            if (!ok)
                return FAIL(x, IC_ESHAPE, "index %s is larger than the input %s in dim %d (only dim %d may be)",
                            shp(x, ix, b1), shp(x, a, b2), i, d);
        }
        set_shape(x->n, r, ix->shape);
        return IC_OK;
    }
    if (ix->info.rank > 1)
        return FAIL(x, IC_ESHAPE, "index must be 1-d or 0-d, got %s", shp(x, ix, b1));
    if (r == 0)
        return FAIL(x, IC_EUNSUPPORTED, "a 0-d input is not supported");
    ic_dim out[IC_MAX_RANK];
    memcpy(out, a->shape, sizeof(ic_dim) * (size_t)r);
    out[d] = ix->info.rank ? ix->shape[0] : ic_dim_const(1);
    set_shape(x->n, r, out);
    return IC_OK;
}

/* cumsum(x, dim, dtype?): integers and bool sum in i64 unless dtype says otherwise. */
static ic_status infer_cumsum(cx *x)
{
    ic_status s;
    if ((s = need_tensor(x, 0)))
        return s;
    const ic_node *a = arg(x, 0);
    const ic_attrs *at = &x->n->attrs;
    int d = 0;
    if ((s = norm_dim(x, at->dim, a->info.rank, "dim", &d)))
        return s;
    ic_dtype t = a->info.dtype, out = ic_dtype_is_float(t) ? t : IC_I64;
    if (at->has_dtype) {
        if ((unsigned)at->dtype >= IC_DTYPE_COUNT || at->dtype == IC_BOOL)
            return FAIL(x, IC_EDTYPE, "cannot sum into dtype %s", ic_dtype_name(at->dtype));
        out = at->dtype;
    }
    x->n->axis = d;
    x->n->info.dtype = x->n->compute = out;
    set_shape(x->n, a->info.rank, a->shape);
    return IC_OK;
}

/* stack(x0, x1, ..., dim): equal shapes, a new dim at dim, dtypes promoted as cat's. */
static ic_status infer_stack(cx *x)
{
    ic_node *n = x->n;
    ic_status s;
    char b1[160], b2[160];
    for (int i = 0; i < n->info.ninputs; i++)
        if ((s = need_tensor(x, i)))
            return s;
    const ic_node *a = arg(x, 0);
    int r = a->info.rank, d = 0;
    if (r + 1 > IC_MAX_RANK)
        return FAIL(x, IC_ESHAPE, "rank would exceed %d", IC_MAX_RANK);
    if ((s = norm_dim(x, n->attrs.dim, r + 1, "dim", &d)))
        return s;
    for (int i = 1; i < n->info.ninputs; i++) {
        const ic_node *b = arg(x, i);
        bool ok = b->info.rank == r;
        for (int k = 0; ok && k < r; k++)
            ok = ic_dim_eq(b->shape[k], a->shape[k]);
        if (!ok)
            return FAIL(x, IC_ESHAPE, "input %d has shape %s, input 0 has %s; stack needs equal shapes", i,
                        shp(x, b, b1), shp(x, a, b2));
    }
    ic_dim out[IC_MAX_RANK];
    for (int i = 0, k = 0; i <= r; i++)
        out[i] = i == d ? ic_dim_const(n->info.ninputs) : a->shape[k++];
    n->axis = d;
    n->info.dtype = n->compute = promote_operands(x, 0, n->info.ninputs);
    set_shape(n, r + 1, out);
    return IC_OK;
}

/* Whether number v converts to dtype t without overflow, as PyTorch checks masked_fill's
 * value (infinities and NaN pass for floats, not for integers). */
static bool fits_dtype(ic_scalar v, ic_dtype t)
{
    double f = v.is_int ? (double)v.i : v.f;
    switch (t) {
    case IC_BOOL: return true;
    case IC_F64: return true;
    case IC_F32: return !isfinite(f) || fabs(f) <= 3.4028234663852886e38;
    case IC_F16: return !isfinite(f) || fabs(f) <= 65504.0;
    case IC_BF16: return !isfinite(f) || fabs(f) <= 3.3895313892515355e38;
    case IC_I32: return v.is_int ? v.i >= INT32_MIN && v.i <= INT32_MAX : f > -2147483649.0 && f < 2147483648.0;
    default: return v.is_int || (f >= -9.2233720368547758e18 && f < 9.2233720368547758e18);
    }
}

/* masked_fill(x, mask, value): x where mask is false, value (as x's dtype) where true;
 * the result has the broadcast shape of x and mask. */
static ic_status infer_masked_fill(cx *x)
{
    ic_status s;
    if ((s = need_tensor(x, 0)) || (s = need_tensor(x, 1)))
        return s;
    const ic_node *a = arg(x, 0), *m = arg(x, 1);
    ic_dtype t = a->info.dtype;
    if (m->info.dtype != IC_BOOL)
        return FAIL(x, IC_EDTYPE, "mask must be bool, not %s", ic_dtype_name(m->info.dtype));
    if (!fits_dtype(x->n->attrs.value, t))
        return FAIL(x, IC_EINVAL, "value %g cannot be converted to %s without overflow",
                    x->n->attrs.value.is_int ? (double)x->n->attrs.value.i : x->n->attrs.value.f,
                    ic_dtype_name(t));
    ic_dim out[IC_MAX_RANK];
    int r;
    if ((s = broadcast(x, a->info.rank, a->shape, m->info.rank, m->shape, &r, out)))
        return s;
    x->n->info.dtype = x->n->compute = t;
    set_shape(x->n, r, out);
    return IC_OK;
}

/* The nn ops with rules of their own (their kind's group does not apply); false for
 * the others. */
static bool infer_nn(cx *x, ic_status *s)
{
    switch (x->n->info.op) {
    case IC_OP_BATCH_NORM: *s = infer_batch_norm(x); return true;
    case IC_OP_GROUP_NORM: *s = infer_group_norm(x); return true;
    case IC_OP_SDPA: *s = infer_sdpa(x); return true;
    case IC_OP_GATHER: case IC_OP_INDEX_SELECT: *s = infer_gather(x); return true;
    case IC_OP_CUMSUM: *s = infer_cumsum(x); return true;
    case IC_OP_STACK: *s = infer_stack(x); return true;
    case IC_OP_MASKED_FILL: *s = infer_masked_fill(x); return true;
    default: return false;
    }
}

ic_status ic__infer(ic_graph *g, ic_node *n)
{
    cx x = { g, n, n->info.name, ic_op_name(n->info.op) };
    int mn = 0, mx = 0;
    switch (n->info.op) {
#define IC_OP(E, nm, a, b, k) case IC_OP_##E: mn = a; mx = b; break;
#include "ic/ops.def"
#undef IC_OP
    default:
        return FAIL(&x, IC_EINVAL, "unknown op");
    }
    if (n->info.ninputs < mn || (mx >= 0 && n->info.ninputs > mx)) {
        if (mn == mx)
            return FAIL(&x, IC_EINVAL, "takes %d inputs, got %d", mn, n->info.ninputs);
        return FAIL(&x, IC_EINVAL, "takes %d to %d inputs, got %d", mn, mx < 0 ? IC_MAX_INPUTS : mx,
                    n->info.ninputs);
    }
    ic_status s;
    if (infer_nn(&x, &s))
        return s;
    switch (ic_op_kind_of(n->info.op)) {
    case IC_KIND_UNARY: return infer_unary(&x);
    case IC_KIND_BINARY: return infer_binary(&x);
    case IC_KIND_TERNARY: return infer_where(&x);
    case IC_KIND_REDUCE: return infer_reduce(&x);
    case IC_KIND_NORM: return infer_norm(&x);
    case IC_KIND_VIEW: return infer_view(&x);
    case IC_KIND_CAT: return infer_cat(&x);
    case IC_KIND_CONTRACT: return infer_contract(&x);
    case IC_KIND_GATHER: return infer_embedding(&x);
    case IC_KIND_CREATE: return infer_create(&x);
    case IC_KIND_SPATIAL: return ic__infer_spatial(g, n);
    default: return FAIL(&x, IC_EINVAL, "not an op");
    }
}
