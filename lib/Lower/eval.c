/* eval.c - the value of a node at a multi-index, as loop-IR instructions: loads of
 * materialised nodes, views folded into the index, pointwise ops (with PyTorch's type
 * promotion: operands converted to node->compute, f16/bf16 computed in f32), cat as selects
 * over clamped reads, embedding as an indirect (clamped) read, full and arange computed. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "gen.h"

bool ic__gen_fail(ic__gen *G, const char *fmt, ...)
{
    if (!G->failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(G->why, sizeof G->why, fmt, ap);
        va_end(ap);
        G->failed = true;
    }
    return false;
}

bool ic__computed_here(const ic__gen *G, ic_value v)
{
    ic__class k = ic__node_class(ic__gnode(G, v));
    if (k == IC__CL_LEAF || k == IC__CL_VIEW)
        return false;
    int grp = G->s->group[v];
    return grp < 0 || grp == G->group;
}

/* ---- memo: (stage, node, idx) -> instr ---- */

typedef struct {
    int stage, v, rank, instr;
    const ic__ix *idx[IC_MAX_RANK];
} memo_key;

static bool memo_eq(const void *item, const void *key)
{
    const memo_key *a = item, *b = key;
    if (a->stage != b->stage || a->v != b->v || a->rank != b->rank)
        return false;
    for (int i = 0; i < a->rank; i++)
        if (a->idx[i] != b->idx[i])
            return false;
    return true;
}

static uint64_t memo_hash(const memo_key *k)
{
    uint64_t h = ic__mix((uint64_t)k->stage, (uint64_t)k->v);
    for (int i = 0; i < k->rank; i++)
        h = ic__mix(h, k->idx[i] ? (uint64_t)k->idx[i]->id : ~0ull);
    return h;
}

/* ---- leaves ---- */

int ic__load_node(ic__gen *G, ic_value v, const ic__ix *const *idx)
{
    const ic_node *n = ic__gnode(G, v);
    int buf = G->p->node_buf[v];
    if (buf < 0)
        return ic__gen_fail(G, "'%s' has no buffer", n->info.name), -1;
    int64_t shape[IC_MAX_RANK];
    for (int i = 0; i < n->info.rank; i++)
        shape[i] = ic__dim(n, i);
    if (G->probe) {
        G->probe_buf = buf;
        G->probe_ix = ic__ix_linear(&G->ix, n->info.rank, shape, idx);
        return 0;
    }
    int off = ic__kb_ix(&G->kb, ic__ix_linear(&G->ix, n->info.rank, shape, idx));
    int x = ic__kb_load(&G->kb, buf, G->p->bufs[buf].dtype, off);
    return ic__kb_cast(&G->kb, ic__regty(n->info.dtype), x);
}

/* A number operand in compute dtype ct (rounded to it, as PyTorch casts wrapped numbers to
 * the common dtype), as a constant of ct's register type. */
static int scalar_const(ic__gen *G, ic_scalar s, ic_dtype ct)
{
    ic_dtype t = ic__regty(ct);
    if (ic__is_fp(ct)) {
        double f = s.is_int ? (ct == IC_F64 ? (double)s.i : (double)(float)s.i) : s.f;
        return ic__kb_const_f(&G->kb, t, ic__round_fp(ct, f));
    }
    if (t == IC_BOOL)
        return ic__kb_const_i(&G->kb, t, s.is_int ? s.i != 0 : s.f != 0);
    ic__val v = { .f = s.f };
    if (s.is_int)
        v.i = s.i;
    else
        v = ic__convert(v, IC_F64, IC_I64);
    return ic__kb_const_i(&G->kb, t, ic__wrap_int(v.i, ct)); /* u8: 300 is 44 */
}

/* Whether every value of integer (or bool) dtype a is one of integer dtype b. */
static bool int_within(ic_dtype a, ic_dtype b)
{
    int64_t alo, ahi, blo, bhi;
    return ic_dtype_int_range(a, &alo, &ahi) && ic_dtype_int_range(b, &blo, &bhi) &&
           alo >= blo && ahi <= bhi;
}

/* Operand i of n at n's index (broadcast), as register type t. Converted to n's compute
 * dtype first when that is f16/bf16 (an integer operand is rounded to it) or u8/i8/i16 (a
 * wider 0-d operand, a lower tier of the promotion, wraps to it). */
int ic__eval_operand(ic__gen *G, const ic_node *n, int i, const ic__ix *const *idx, ic_dtype t)
{
    const ic_operand *o = &n->in[i];
    bool via = t == ic__regty(n->compute);
    if (o->node == IC_SCALAR)
        return scalar_const(G, o->scalar, via ? n->compute : t);
    if (o->node < 0)
        return ic__gen_fail(G, "'%s': operand %d is absent", n->info.name, i), -1;
    const ic_node *s = ic__gnode(G, o->node);
    int r = n->info.rank, rs = s->info.rank;
    const ic__ix *sidx[IC_MAX_RANK];
    for (int j = 0; j < rs; j++)
        sidx[j] = ic__dim(s, j) == 1 || j + r - rs < 0 ? ic__ix_const(&G->ix, 0) : idx[j + r - rs];
    int v = ic__eval(G, o->node, sidx);
    bool mem_only = n->compute == IC_F16 || n->compute == IC_BF16 ||
                    (ic__narrow_int(n->compute) && !int_within(s->info.dtype, n->compute));
    if (via && mem_only && s->info.dtype != n->compute)
        v = ic__kb_cast(&G->kb, n->compute, ic__kb_cast(&G->kb, ic__regty(n->compute), v));
    return ic__kb_cast(&G->kb, t, v);
}

/* ---- views ---- */

static int64_t slice_start(const ic_node *n, int64_t size)
{
    const ic_attrs *at = &n->attrs;
    int64_t st = at->has_start ? at->start : 0;
    if (st < 0)
        st += size;
    return st < 0 ? 0 : st > size ? size : st;
}

/* Reshape of something stored contiguously: same flat offset, no div/mod. */
static bool flat_source(const ic__gen *G, ic_value v)
{
    const ic_node *s = ic__gnode(G, v);
    if (ic__node_class(s) == IC__CL_VIEW)
        return s->info.op == IC_OP_RESHAPE && flat_source(G, s->in[0].node);
    return !ic__computed_here(G, v);
}

static int eval_reshape(ic__gen *G, const ic_node *n, const ic__ix *const *idx)
{
    int64_t shape[IC_MAX_RANK], sshape[IC_MAX_RANK];
    ic_value sv = n->in[0].node;
    const ic_node *s = ic__gnode(G, sv);
    for (int i = 0; i < n->info.rank; i++)
        shape[i] = ic__dim(n, i);
    for (int i = 0; i < s->info.rank; i++)
        sshape[i] = ic__dim(s, i);
    const ic__ix *flat = ic__ix_linear(&G->ix, n->info.rank, shape, idx);
    const ic__ix *sidx[IC_MAX_RANK];
    if (flat_source(G, sv)) {
        while (ic__node_class(ic__gnode(G, sv)) == IC__CL_VIEW)
            sv = ic__gnode(G, sv)->in[0].node;
        s = ic__gnode(G, sv);
        for (int i = 0; i < s->info.rank; i++)
            sshape[i] = ic__dim(s, i);
    }
    ic__ix_delinear(&G->ix, flat, s->info.rank, sshape, sidx);
    return ic__eval(G, sv, sidx);
}

int ic__eval_view(ic__gen *G, const ic_node *n, const ic__ix *const *idx)
{
    const ic_node *s = ic__gnode(G, n->in[0].node);
    const ic__ix *sidx[IC_MAX_RANK], *zero = ic__ix_const(&G->ix, 0);
    int r = n->info.rank, rs = s->info.rank;
    switch (n->info.op) {
    case IC_OP_RESHAPE:
        return eval_reshape(G, n, idx);
    case IC_OP_PERMUTE: case IC_OP_TRANSPOSE:
        for (int i = 0; i < r; i++)
            sidx[n->perm[i]] = idx[i];
        break;
    case IC_OP_EXPAND:
        for (int j = 0; j < rs; j++)
            sidx[j] = ic__dim(s, j) == 1 ? zero : idx[j + r - rs];
        break;
    case IC_OP_UNSQUEEZE:
        for (int i = 0, k = 0; i < r; i++)
            if (i != n->axis)
                sidx[k++] = idx[i];
        break;
    case IC_OP_SQUEEZE:
        for (int i = 0, k = 0; i < rs; i++)
            sidx[i] = (n->axes & (1u << i)) ? zero : idx[k++];
        break;
    case IC_OP_FLIP: /* --- spatial ops: flip and unfold --- */
        for (int i = 0; i < rs; i++)
            sidx[i] = (n->axes & (1u << i)) ? ic__ix_addc(&G->ix, ic__ix_scale(&G->ix, idx[i], -1),
                                                          ic__dim(s, i) - 1) : idx[i];
        break;
    case IC_OP_UNFOLD: /* window idx[d] of the dim, element idx[last] of the window */
        for (int i = 0; i < rs; i++)
            sidx[i] = i != n->axis ? idx[i] :
                ic__ix_add(&G->ix, ic__ix_scale(&G->ix, idx[i], n->attrs.step), idx[r - 1]);
        break;
    default: { /* slice */
        int d = n->axis;
        for (int i = 0; i < rs; i++)
            sidx[i] = idx[i];
        int64_t st = slice_start(n, ic__dim(s, d));
        sidx[d] = ic__ix_addc(&G->ix, ic__ix_scale(&G->ix, idx[d], n->attrs.step), st);
        break;
    }
    }
    return ic__eval(G, n->in[0].node, sidx);
}

/* ---- pointwise ops ---- */

static int cf(ic__gen *G, ic_dtype t, double f) { return ic__kb_const_f(&G->kb, t, f); }

static int gelu(ic__gen *G, int x, ic_dtype t, bool tanh_form)
{
    ic__kb *b = &G->kb;
    int half_x = ic__kb_bin(b, IC_L_MUL, t, x, cf(G, t, 0.5));
    int inner;
    if (tanh_form) { /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
        int x3 = ic__kb_bin(b, IC_L_MUL, t, ic__kb_bin(b, IC_L_MUL, t, x, x), x);
        int u = ic__kb_bin(b, IC_L_ADD, t, x, ic__kb_bin(b, IC_L_MUL, t, x3, cf(G, t, 0.044715)));
        inner = ic__kb_un(b, IC_L_TANH, t, ic__kb_bin(b, IC_L_MUL, t, u, cf(G, t, 0.7978845608028654)));
    } else { /* 0.5 x (1 + erf(x / sqrt(2))) */
        inner = ic__kb_un(b, IC_L_ERF, t, ic__kb_bin(b, IC_L_MUL, t, x, cf(G, t, 0.7071067811865476)));
    }
    return ic__kb_bin(b, IC_L_MUL, t, half_x, ic__kb_bin(b, IC_L_ADD, t, inner, cf(G, t, 1.0)));
}

/* Shorthands for the decompositions below (t: the register type). */
#define BIN(op, x, y) ic__kb_bin(b, IC_L_##op, t, (x), (y))
#define UN(op, x) ic__kb_un(b, IC_L_##op, t, (x))
#define CMP(p, x, y) ic__kb_cmp(b, IC_CMP_##p, (x), (y))
#define SEL(c, x, y) ic__kb_select(b, (c), (x), (y))

/* log1p(x) = log(u) * (x / (u - 1)) with u = 1 + x (Goldberg: the rounding error of u
 * cancels), x itself where u == 1 (tiny x, -0 kept) and at x = +inf. */
static int log1p_of(ic__gen *G, int x, ic_dtype t)
{
    ic__kb *b = &G->kb;
    int one = cf(G, t, 1.0), u = BIN(ADD, x, one), um1 = BIN(SUB, u, one);
    int r = BIN(MUL, UN(LOG, u), BIN(DIV, x, um1));
    r = SEL(CMP(EQ, u, one), x, r);
    return SEL(CMP(EQ, x, cf(G, t, INFINITY)), x, r);
}

/* expm1(x) = (u - 1) * (x / log(u)) with u = exp(x) (Kahan's correction), x where u == 1,
 * -1 where u - 1 rounds to -1, u where it overflows. */
static int expm1_of(ic__gen *G, int x, ic_dtype t)
{
    ic__kb *b = &G->kb;
    int one = cf(G, t, 1.0), m1 = cf(G, t, -1.0);
    int u = UN(EXP, x), um1 = BIN(SUB, u, one);
    int r = BIN(MUL, um1, BIN(DIV, x, UN(LOG, u)));
    r = SEL(CMP(EQ, um1, m1), m1, r);
    r = SEL(CMP(EQ, u, one), x, r);
    return SEL(CMP(EQ, u, cf(G, t, INFINITY)), u, r);
}

/* sign: (x > 0) - (x < 0); -0 and NaN give +0, as in PyTorch. */
static int sign_of(ic__gen *G, int x, ic_dtype t)
{
    ic__kb *b = &G->kb;
    if (t == IC_BOOL)
        return x;
    int zero = ic__kb_const_i(b, t, 0);
    int r = SEL(CMP(LT, x, zero), ic__kb_const_i(b, t, -1), zero);
    return SEL(CMP(GT, x, zero), ic__kb_const_i(b, t, 1), r);
}

/* min(max(x + 3, 0), 6) / 6, NaN propagating */
static int hardsigmoid_of(ic__gen *G, int x, ic_dtype t)
{
    ic__kb *b = &G->kb;
    int h = BIN(MIN, BIN(MAX, BIN(ADD, x, cf(G, t, 3.0)), cf(G, t, 0.0)), cf(G, t, 6.0));
    return BIN(DIV, h, cf(G, t, 6.0));
}

/* An attr number as PyTorch's kernels use it: in the compute type (f32 for f16/bf16). */
static int attr_const(ic__gen *G, double v, ic_dtype t) { return cf(G, t, ic__round_fp(t, v)); }

/* softplus: x where x * beta > threshold, else log1p(exp(x * beta)) / beta */
static int softplus_of(ic__gen *G, const ic_node *n, int x, ic_dtype t)
{
    ic__kb *b = &G->kb;
    int beta = attr_const(G, n->attrs.beta, t), xb = BIN(MUL, x, beta);
    int soft = BIN(DIV, log1p_of(G, UN(EXP, xb), t), beta);
    return SEL(CMP(GT, xb, attr_const(G, n->attrs.threshold, t)), x, soft);
}

/* remainder, with the divisor's sign. Integers: floor modulo. Floats: PyTorch takes fmod
 * (exact) and adds b when the signs differ; here a - floor(a / b) * b, then corrected where
 * the rounded quotient is one off (r of the wrong sign, or |r| >= |b|), a zero given a's
 * sign (fmod's), and a finite a over an infinite b left alone (or b, when the signs
 * differ). f32 operands are taken in f64, which makes the result exact while the quotient
 * is below 2^29 (and rounds once, as PyTorch's fmod + b does); f64 results are exact while
 * q * b is (an fma makes it so), else within an ulp of a. */
static int remainder_of(ic__gen *G, int x, int y, ic_dtype t)
{
    ic__kb *b = &G->kb;
    if (!ic__is_fp(t))
        return BIN(MOD, x, y);
    if (t == IC_F32) {
        int r = remainder_of(G, ic__kb_cast(b, IC_F64, x), ic__kb_cast(b, IC_F64, y), IC_F64);
        return ic__kb_cast(b, IC_F32, r);
    }
    int zero = cf(G, t, 0.0), inf = cf(G, t, INFINITY);
    int r = BIN(SUB, x, BIN(MUL, UN(FLOOR, BIN(DIV, x, y)), y));
    int yneg = CMP(LT, y, zero);
    int off = ic__kb_bin(b, IC_L_AND, IC_BOOL, CMP(NE, r, zero), CMP(NE, CMP(LT, r, zero), yneg));
    r = SEL(off, BIN(ADD, r, y), r);
    r = SEL(CMP(GE, UN(ABS, r), UN(ABS, y)), BIN(SUB, r, y), r);
    r = SEL(CMP(EQ, r, zero), BIN(MUL, x, zero), r);
    int xoff = ic__kb_bin(b, IC_L_AND, IC_BOOL, CMP(NE, x, zero), CMP(NE, CMP(LT, x, zero), yneg));
    int big = ic__kb_bin(b, IC_L_AND, IC_BOOL, CMP(EQ, UN(ABS, y), inf), CMP(LT, UN(ABS, x), inf));
    return SEL(big, SEL(xoff, y, x), r);
}

/* --- nn ops --- */

/* hardtanh: clamp(x, min_val, max_val), max last, NaN kept (MAX/MIN propagate it); on
 * integers the bounds truncated, as PyTorch converts them to the tensor's type. */
static int hardtanh_of(ic__gen *G, const ic_node *n, int x, ic_dtype t)
{
    ic__kb *b = &G->kb;
    const ic_attrs *at = &n->attrs;
    if (!ic__is_fp(t))
        return BIN(MIN, BIN(MAX, x, ic__kb_const_i(b, t, (int64_t)at->min_val)),
                   ic__kb_const_i(b, t, (int64_t)at->max_val));
    return BIN(MIN, BIN(MAX, x, attr_const(G, at->min_val, t)), attr_const(G, at->max_val, t));
}

/* mish: x * tanh(log(1 + exp(x))), PyTorch's kernel (no softplus threshold). */
static int mish_of(ic__gen *G, int x, ic_dtype t)
{
    ic__kb *b = &G->kb;
    return BIN(MUL, x, UN(TANH, log1p_of(G, UN(EXP, x), t)));
}

/* elu: x where x > 0, else alpha * expm1(x) (NaN: alpha * NaN). */
static int elu_of(ic__gen *G, const ic_node *n, int x, ic_dtype t)
{
    ic__kb *b = &G->kb;
    int neg = BIN(MUL, expm1_of(G, x, t), attr_const(G, n->attrs.alpha, t));
    return SEL(CMP(GT, x, cf(G, t, 0.0)), x, neg);
}

/* triu keeps col - row >= diagonal, tril col - row <= diagonal (last two dims), else 0. */
static int tri_of(ic__gen *G, const ic_node *n, int x, ic_dtype t, const ic__ix *const *idx)
{
    ic__kb *b = &G->kb;
    int r = n->info.rank;
    int row = ic__kb_ix(b, idx[r - 2]), col = ic__kb_ix(b, idx[r - 1]);
    int off = ic__kb_bin(b, IC_L_SUB, IC_I64, col, row);
    int dg = ic__kb_const_i(b, IC_I64, n->attrs.diagonal);
    int keep = n->info.op == IC_OP_TRIU ? CMP(GE, off, dg) : CMP(LE, off, dg);
    return SEL(keep, x, ic__is_fp(t) ? cf(G, t, 0.0) : ic__kb_const_i(b, t, 0));
}

#undef BIN
#undef UN
#undef CMP
#undef SEL

static int clamp(ic__gen *G, const ic_node *n, int x, ic_dtype t)
{
    const ic_attrs *at = &n->attrs;
    if (at->has_min)
        x = ic__kb_bin(&G->kb, IC_L_MAX, t, x, scalar_const(G, at->min, n->compute));
    if (at->has_max)
        x = ic__kb_bin(&G->kb, IC_L_MIN, t, x, scalar_const(G, at->max, n->compute));
    return x;
}

static int eval_unary(ic__gen *G, const ic_node *n, const ic__ix *const *idx)
{
    ic__kb *b = &G->kb;
    ic_dtype t = ic__regty(n->compute);
    int x = ic__eval_operand(G, n, 0, idx, t);
    static const ic_lop simple[IC_OP_COUNT] = {
        [IC_OP_NEG] = IC_L_NEG, [IC_OP_ABS] = IC_L_ABS, [IC_OP_EXP] = IC_L_EXP,
        [IC_OP_LOG] = IC_L_LOG, [IC_OP_SQRT] = IC_L_SQRT, [IC_OP_RSQRT] = IC_L_RSQRT,
        [IC_OP_SIN] = IC_L_SIN, [IC_OP_COS] = IC_L_COS, [IC_OP_TANH] = IC_L_TANH,
        [IC_OP_SIGMOID] = IC_L_SIGMOID, [IC_OP_ERF] = IC_L_ERF, [IC_OP_RECIPROCAL] = IC_L_RECIP,
    };
    switch (n->info.op) {
    case IC_OP_RELU:
        return ic__kb_bin(b, IC_L_MAX, t, x, ic__kb_const_i(b, t, 0));
    case IC_OP_FLOOR: case IC_OP_CEIL:
        return ic__is_fp(t) ? ic__kb_un(b, n->info.op == IC_OP_FLOOR ? IC_L_FLOOR : IC_L_CEIL, t, x) : x;
    case IC_OP_LOGICAL_NOT:
        return t == IC_BOOL ? ic__kb_un(b, IC_L_NOT, IC_BOOL, x)
                            : ic__kb_cmp(b, IC_CMP_EQ, x, ic__kb_const_i(b, t, 0));
    case IC_OP_SILU:
        return ic__kb_bin(b, IC_L_MUL, t, x, ic__kb_un(b, IC_L_SIGMOID, t, x));
    case IC_OP_GELU:
        return gelu(G, x, t, n->attrs.approximate == 1);
    case IC_OP_CLAMP:
        return clamp(G, n, x, t);
    case IC_OP_LOG1P:
        return log1p_of(G, x, t);
    case IC_OP_EXPM1:
        return expm1_of(G, x, t);
    case IC_OP_SIGN:
        return sign_of(G, x, t);
    case IC_OP_ROUND: /* integers are already round */
        return ic__is_fp(t) ? ic__kb_un(b, IC_L_ROUND, t, x) : x;
    case IC_OP_HARDSIGMOID:
        return hardsigmoid_of(G, x, t);
    case IC_OP_HARDSWISH:
        return ic__kb_bin(b, IC_L_MUL, t, x, hardsigmoid_of(G, x, t));
    case IC_OP_LEAKY_RELU: {
        int neg = ic__kb_bin(b, IC_L_MUL, t, x, attr_const(G, n->attrs.negative_slope, t));
        return ic__kb_select(b, ic__kb_cmp(b, IC_CMP_GT, x, cf(G, t, 0.0)), x, neg);
    }
    case IC_OP_SOFTPLUS:
        return softplus_of(G, n, x, t);
    /* --- nn ops --- */
    case IC_OP_HARDTANH: return hardtanh_of(G, n, x, t);
    case IC_OP_MISH: return mish_of(G, x, t);
    case IC_OP_ELU: return elu_of(G, n, x, t);
    case IC_OP_TRIU: case IC_OP_TRIL: return tri_of(G, n, x, t, idx);
    case IC_OP_CAST: {
        ic_dtype to = n->info.dtype;
        if (ic__narrow_int(to)) /* through i32 (float: truncated), wrapped by compute() */
            return ic__kb_cast(b, IC_I32, x);
        int r = ic__kb_cast(b, to, x); /* an explicit cast to f16/bf16 always rounds */
        return ic__kb_cast(b, ic__regty(to), r);
    }
    default:
        return ic__kb_un(b, simple[n->info.op], t, x);
    }
}

static ic_lop binop(ic_op op, ic_dtype t)
{
    bool bl = t == IC_BOOL; /* PyTorch on two bools: + is or, * is and */
    switch (op) {
    case IC_OP_ADD: return bl ? IC_L_OR : IC_L_ADD;
    case IC_OP_SUB: return IC_L_SUB;
    case IC_OP_MUL: return bl ? IC_L_AND : IC_L_MUL;
    case IC_OP_DIV: return IC_L_DIV;
    case IC_OP_POW: return IC_L_POW;
    case IC_OP_MAXIMUM: return bl ? IC_L_OR : IC_L_MAX;
    case IC_OP_MINIMUM: return bl ? IC_L_AND : IC_L_MIN;
    case IC_OP_LOGICAL_AND: return IC_L_AND;
    default: return IC_L_OR;
    }
}

static int eval_binary(ic__gen *G, const ic_node *n, const ic__ix *const *idx)
{
    ic__kb *b = &G->kb;
    ic_dtype t = ic__regty(n->compute);
    ic_op op = n->info.op;
    if (op == IC_OP_LOGICAL_AND || op == IC_OP_LOGICAL_OR) {
        int x = ic__kb_cast(b, IC_BOOL, ic__eval_operand(G, n, 0, idx, t));
        int y = ic__kb_cast(b, IC_BOOL, ic__eval_operand(G, n, 1, idx, t));
        return ic__kb_bin(b, binop(op, IC_BOOL), IC_BOOL, x, y);
    }
    if (op >= IC_OP_EQ && op <= IC_OP_GE) {
        ic_dtype ct = t == IC_BOOL ? IC_I32 : t;
        int x = ic__eval_operand(G, n, 0, idx, ct), y = ic__eval_operand(G, n, 1, idx, ct);
        static const ic_cmp preds[] = { IC_CMP_EQ, IC_CMP_NE, IC_CMP_LT, IC_CMP_LE, IC_CMP_GT, IC_CMP_GE };
        return ic__kb_cmp(b, preds[op - IC_OP_EQ], x, y);
    }
    int x = ic__eval_operand(G, n, 0, idx, t), y = ic__eval_operand(G, n, 1, idx, t);
    if (op == IC_OP_REMAINDER)
        return remainder_of(G, x, y, t);
    return ic__kb_bin(b, binop(op, t), t, x, y);
}

static int eval_where(ic__gen *G, const ic_node *n, const ic__ix *const *idx)
{
    ic_dtype t = ic__regty(n->compute);
    int c = ic__eval_operand(G, n, 0, idx, IC_BOOL);
    int x = ic__eval_operand(G, n, 1, idx, t), y = ic__eval_operand(G, n, 2, idx, t);
    return ic__kb_select(&G->kb, c, x, y);
}

/* Every input is read at a clamped index (never out of bounds, even where not selected);
 * the selects pick the one whose range holds the index. */
static int eval_cat(ic__gen *G, const ic_node *n, const ic__ix *const *idx)
{
    ic_dtype t = ic__regty(n->compute);
    int d = n->axis, r = n->info.rank, res = -1;
    const ic__ix *i = idx[d], *sidx[IC_MAX_RANK];
    int64_t start[IC_MAX_INPUTS];
    int64_t acc = 0;
    for (int k = 0; k < n->info.ninputs; k++) {
        start[k] = acc;
        acc += ic__dim(ic__gnode(G, n->in[k].node), d);
    }
    for (int k = n->info.ninputs - 1; k >= 0; k--) {
        int64_t len = ic__dim(ic__gnode(G, n->in[k].node), d);
        if (len == 0)
            continue;
        for (int j = 0; j < r; j++)
            sidx[j] = idx[j];
        sidx[d] = ic__ix_clamp(&G->ix, ic__ix_addc(&G->ix, i, -start[k]), 0, len - 1);
        int v = ic__kb_cast(&G->kb, t, ic__eval(G, n->in[k].node, sidx));
        if (res < 0) {
            res = v;
            continue;
        }
        /* i < start of the next non-empty input -> this one */
        int64_t end = start[k] + len;
        if (i->hi < end)
            res = v;
        else if (i->lo >= end)
            continue;
        else
            res = ic__kb_select(&G->kb, ic__kb_cmp(&G->kb, IC_CMP_LT, ic__kb_ix(&G->kb, i),
                                                   ic__kb_const_i(&G->kb, IC_I64, end)), v, res);
    }
    return res >= 0 ? res : ic__kb_const_i(&G->kb, t, 0);
}

/* Indices outside [0, rows) are clamped: PyTorch raises an error there; compiled code
 * must at least never read out of bounds. */
static int eval_embedding(ic__gen *G, const ic_node *n, const ic__ix *const *idx)
{
    const ic_node *w = ic__gnode(G, n->in[0].node);
    int r = n->info.rank;
    int64_t rows = ic__dim(w, 0);
    if (rows == 0)
        return ic__kb_const_i(&G->kb, ic__regty(n->info.dtype), 0);
    int iv = ic__kb_cast(&G->kb, IC_I64, ic__eval(G, n->in[1].node, idx));
    iv = ic__kb_bin(&G->kb, IC_L_MAX, IC_I64, iv, ic__kb_const_i(&G->kb, IC_I64, 0));
    iv = ic__kb_bin(&G->kb, IC_L_MIN, IC_I64, iv, ic__kb_const_i(&G->kb, IC_I64, rows - 1));
    if (iv < 0)
        return -1;
    const ic__ix *widx[2] = { ic__ix_val(&G->ix, iv, G->kb.cur, 0, rows - 1), idx[r - 1] };
    return ic__eval(G, n->in[0].node, widx);
}

/* gather / index_select (nn ops): x read at the index's value in dim axis, clamped to
 * [0, size) like embedding's (the pipeline checks indices that come from arguments). */
static int eval_gather(ic__gen *G, const ic_node *n, const ic__ix *const *idx)
{
    if (n->info.op == IC_OP_EMBEDDING)
        return eval_embedding(G, n, idx);
    const ic_node *x = ic__gnode(G, n->in[0].node), *ix = ic__gnode(G, n->in[1].node);
    int r = n->info.rank, d = n->axis;
    int64_t size = r ? ic__dim(x, d) : 1; /* a 0-d x is one element */
    if (size == 0)
        return ic__kb_const_i(&G->kb, ic__regty(n->info.dtype), 0);
    const ic__ix *iidx[IC_MAX_RANK], *xidx[IC_MAX_RANK];
    if (n->info.op == IC_OP_GATHER)
        memcpy(iidx, idx, sizeof(*idx) * (size_t)r);
    else if (ix->info.rank == 1)
        iidx[0] = idx[d];
    int iv = ic__kb_cast(&G->kb, IC_I64, ic__eval(G, n->in[1].node, iidx));
    iv = ic__kb_bin(&G->kb, IC_L_MAX, IC_I64, iv, ic__kb_const_i(&G->kb, IC_I64, 0));
    iv = ic__kb_bin(&G->kb, IC_L_MIN, IC_I64, iv, ic__kb_const_i(&G->kb, IC_I64, size - 1));
    if (iv < 0)
        return -1;
    if (r == 0)
        return ic__eval(G, n->in[0].node, xidx);
    memcpy(xidx, idx, sizeof(*idx) * (size_t)r);
    xidx[d] = ic__ix_val(&G->ix, iv, G->kb.cur, 0, size - 1);
    return ic__eval(G, n->in[0].node, xidx);
}

static int eval_create(ic__gen *G, const ic_node *n, const ic__ix *const *idx)
{
    ic_dtype t = ic__regty(n->info.dtype);
    const ic_attrs *at = &n->attrs;
    if (n->info.op == IC_OP_FULL)
        return scalar_const(G, at->value, n->info.dtype);
    int i = ic__kb_ix(&G->kb, idx[0]);
    int64_t istart, istep; /* integer dtypes: PyTorch's int64 arithmetic, truncated start and step */
    ic__arange_int(at, &istart, &istep);
    if (ic_dtype_is_int(n->info.dtype) || (!ic__is_fp(t) && at->astart.is_int && at->astep.is_int)) {
        int v = ic__kb_bin(&G->kb, IC_L_MUL, IC_I64, i, ic__kb_const_i(&G->kb, IC_I64, istep));
        v = ic__kb_bin(&G->kb, IC_L_ADD, IC_I64, v, ic__kb_const_i(&G->kb, IC_I64, istart));
        return ic__kb_cast(&G->kb, t, v);
    }
    /* start + step * i in PyTorch's accumulate type (f32 for f16/bf16, else double), then
     * rounded to the dtype */
    double st = at->astart.is_int ? (double)at->astart.i : at->astart.f;
    double sp = at->astep.is_int ? (double)at->astep.i : at->astep.f;
    ic_dtype acc = n->info.dtype == IC_F16 || n->info.dtype == IC_BF16 ? IC_F32 : IC_F64;
    int v = ic__kb_cast(&G->kb, acc, i);
    v = ic__kb_bin(&G->kb, IC_L_MUL, acc, v, cf(G, acc, sp));
    v = ic__kb_bin(&G->kb, IC_L_ADD, acc, v, cf(G, acc, st));
    ic_dtype to = ic__narrow_int(n->info.dtype) ? IC_I32 : n->info.dtype; /* wrapped by compute() */
    return ic__kb_cast(&G->kb, ic__regty(t), ic__kb_cast(&G->kb, to, v));
}

/* ---- pad (spatial ops, issue 12) ---- */

/* |e| as index arithmetic: 2 * max(e, 0) - e. */
static const ic__ix *ix_abs(ic__ixtab *t, const ic__ix *e)
{
    const ic__ix *pos = ic__ix_clamp(t, e, 0, e->hi > 0 ? e->hi : 0);
    return ic__ix_add(t, ic__ix_scale(t, pos, 2), ic__ix_scale(t, e, -1));
}

/* Source index of output index o padded by (before, after) along a dim of size len, with
 * j = o - before: reflect is (len-1) - |(len-1) - |j||, replicate clamps, circular wraps
 * around the cropped input (ic__pad_source); constant clamps and *inside says where j is in
 * range. */
static const ic__ix *pad_source(ic__gen *G, const ic__ix *o, int64_t before, int64_t after,
                                int64_t len, int mode, int *inside)
{
    ic__ixtab *t = &G->ix;
    ic__kb *b = &G->kb;
    const ic__ix *j = ic__ix_addc(t, o, -before);
    if (mode == IC_PAD_CIRCULAR) {
        int64_t base = before < 0 ? -before : 0, m = len - base - (after < 0 ? -after : 0);
        int64_t lo = before > 0 ? before : 0, k = (lo + m - 1) / m + 1; /* o - lo + k*m >= 0 */
        return ic__ix_addc(t, ic__ix_mod(t, ic__ix_addc(t, o, k * m - lo), m), base);
    }
    switch (mode) {
    case IC_PAD_REFLECT:
        return ic__ix_addc(t, ic__ix_scale(t, ix_abs(t, ic__ix_addc(t, ic__ix_scale(t, ix_abs(t, j), -1),
                                                                    len - 1)), -1), len - 1);
    case IC_PAD_REPLICATE: return ic__ix_clamp(t, j, 0, len - 1);
    default: break;
    }
    int in = -1;
    if (j->lo < 0)
        in = ic__kb_cmp(b, IC_CMP_GE, ic__kb_ix(b, j), ic__kb_const_i(b, IC_I64, 0));
    if (j->hi >= len) {
        int c = ic__kb_cmp(b, IC_CMP_LT, ic__kb_ix(b, j), ic__kb_const_i(b, IC_I64, len));
        in = in < 0 ? c : ic__kb_bin(b, IC_L_AND, IC_BOOL, in, c);
    }
    if (in >= 0)
        *inside = *inside < 0 ? in : ic__kb_bin(b, IC_L_AND, IC_BOOL, *inside, in);
    return ic__ix_clamp(t, j, 0, len - 1);
}

/* pad: the input read at the source index (never out of bounds), the constant selected
 * where the index falls into constant padding. */
static int eval_pad(ic__gen *G, const ic_node *n, const ic__ix *const *idx)
{
    const ic_node *s = ic__gnode(G, n->in[0].node);
    const ic_attrs *at = &n->attrs;
    ic_dtype t = ic__regty(n->info.dtype);
    int r = n->info.rank, inside = -1;
    const ic__ix *sidx[IC_MAX_RANK];
    for (int d = 0; d < r; d++) {
        int p = r - 1 - d; /* F.pad order: last dim first */
        int64_t before = p < at->npad / 2 ? at->pad[2 * p] : 0, len = ic__dim(s, d);
        if (len == 0) /* nothing to read: all constant */
            return scalar_const(G, at->value, n->info.dtype);
        sidx[d] = idx[d];
        if (p < at->npad / 2)
            sidx[d] = pad_source(G, idx[d], before, at->pad[2 * p + 1], len, at->mode, &inside);
    }
    int v = ic__kb_cast(&G->kb, t, ic__eval(G, n->in[0].node, sidx));
    if (inside < 0 || v < 0)
        return v;
    return ic__kb_select(&G->kb, inside, v, scalar_const(G, at->value, n->info.dtype));
}

int ic__eval_pointwise(ic__gen *G, const ic_node *n, const ic__ix *const *idx)
{
    switch (ic_op_kind_of(n->info.op)) {
    case IC_KIND_UNARY: return eval_unary(G, n, idx);
    case IC_KIND_BINARY: return eval_binary(G, n, idx);
    case IC_KIND_TERNARY: return eval_where(G, n, idx);
    case IC_KIND_CAT: return eval_cat(G, n, idx);
    case IC_KIND_GATHER: return eval_gather(G, n, idx);
    case IC_KIND_CREATE: return eval_create(G, n, idx);
    case IC_KIND_SPATIAL:
        if (n->info.op == IC_OP_PAD)
            return eval_pad(G, n, idx);
        return ic__gen_fail(G, "'%s' (%s) is a composite: ic_graph_expand rewrites it", n->info.name,
                            ic_op_name(n->info.op)), -1;
    default: return ic__gen_fail(G, "'%s' is not pointwise", n->info.name), -1;
    }
}

/* ---- dispatch ---- */

static int compute(ic__gen *G, ic_value v, const ic__ix *const *idx)
{
    const ic_node *n = ic__gnode(G, v);
    /* a matmul operand computed inline is one Fuse chose to inline (a cheap producer the
     * GEMM applies as it loads); one materialised by this kernel would be recomputed per
     * output column */
    if (G->probe || ic__node_class(n) == IC__CL_ATTN)
        return ic__gen_fail(G, "'%s' is not stored before the attention kernel that reads it, or "
                            "is an attention that only its own kernel computes", n->info.name), -1;
    if (G->load_only && G->s->group[v] >= 0)
        return ic__gen_fail(G, "matmul operands are read from memory, '%s' would be recomputed "
                            "for every output column", n->info.name), -1;
    G->used[v] = true;
    int r = ic__reduce_like(ic__node_class(n)) ? ic__red_value(G, v, idx)
                                                : ic__eval_pointwise(G, n, idx);
    ic_dtype t = n->info.dtype;
    if (r >= 0 && G->s->emulate_casts && (t == IC_F16 || t == IC_BF16))
        r = ic__kb_cast(&G->kb, IC_F32, ic__kb_cast(&G->kb, t, r));
    /* u8/i8/i16 are computed in i32: every result wraps to its width (u8 200 + 100 is 44),
     * whether stored or used inline */
    if (r >= 0 && ic__narrow_int(t))
        r = ic__kb_cast(&G->kb, IC_I32, ic__kb_cast(&G->kb, t, r));
    return r;
}

int ic__eval(ic__gen *G, ic_value v, const ic__ix *const *idx)
{
    if (G->failed || G->kb.oom)
        return -1;
    const ic_node *n = ic__gnode(G, v);
    memo_key key;
    memset(&key, 0, sizeof key);
    key.stage = G->kb.cur;
    key.v = v;
    key.rank = n->info.rank;
    for (int i = 0; i < key.rank; i++)
        key.idx[i] = idx[i];
    uint64_t h = memo_hash(&key);
    memo_key *m = ic__tab_find(&G->memo, h, memo_eq, &key);
    if (m)
        return m->instr;
    for (int i = 0; i < key.rank; i++)
        if (!idx[i])
            return ic__gen_fail(G, "out of memory"), -1;
    int r;
    if (ic__node_class(n) == IC__CL_VIEW)
        r = ic__eval_view(G, n, idx);
    else if (!ic__computed_here(G, v))
        r = ic__load_node(G, v, idx);
    else
        r = compute(G, v, idx);
    if (r < 0) {
        if (!G->failed)
            ic__gen_fail(G, G->kb.oom ? "out of memory" : "'%s' could not be lowered", n->info.name);
        return -1;
    }
    m = ic__arena_alloc(&G->ar, sizeof *m);
    if (!m || !ic__tab_put(&G->memo, h, m))
        return ic__gen_fail(G, "out of memory"), -1;
    *m = key;
    m->instr = r;
    return r;
}
