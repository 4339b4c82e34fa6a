/* reference.c - the reference executor: binds arguments to symbols, runs a graph node by
 * node, and computes the pointwise ops (unary, binary, where) and the reductions; views,
 * cat, norms, contractions, embedding and creation are in ref_shape.c. It is the oracle
 * every backend is checked against, so every element goes through one plain N-d walker. */
#include <stdlib.h>
#include <string.h>
#include "ref-impl.h"

#define NODE_FAIL(g, n, code, ...) \
    ic__node_error((g), (n)->info.name, ic_op_name((n)->info.op), (code), __VA_ARGS__)

/* ---- the N-d walker ----
 * Visits every index of a shape in row-major order and keeps, for up to 3 operands, the
 * element offset of that index (a broadcast or reduced dim has stride 0). */

#define WALK_OPS 3

typedef struct {
    int rank;
    int64_t shape[IC_MAX_RANK], coord[IC_MAX_RANK];
    int64_t stride[WALK_OPS][IC_MAX_RANK];
    int64_t off[WALK_OPS];
} walker;

static void walk_init(walker *w, int rank, const int64_t *shape)
{
    memset(w, 0, sizeof *w);
    w->rank = rank;
    memcpy(w->shape, shape, sizeof(int64_t) * (size_t)rank);
}

/* Operand k is a contiguous tensor broadcast to the walked shape (right-aligned, NumPy
 * rules); NULL (a number) keeps stride 0 everywhere. */
static void walk_broadcast(walker *w, int k, const ic_tensor *t)
{
    if (!t)
        return;
    int64_t st = 1;
    for (int d = t->rank - 1; d >= 0; d--) {
        int od = d + w->rank - t->rank;
        w->stride[k][od] = t->shape[d] == 1 ? 0 : st;
        st *= t->shape[d];
    }
}

static void walk_next(walker *w)
{
    for (int d = w->rank - 1; d >= 0; d--) {
        for (int k = 0; k < WALK_OPS; k++)
            w->off[k] += w->stride[k][d];
        if (++w->coord[d] < w->shape[d])
            return;
        for (int k = 0; k < WALK_OPS; k++)
            w->off[k] -= w->stride[k][d] * w->shape[d];
        w->coord[d] = 0;
    }
}

static int64_t numel_of(const ic_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++)
        n *= t->shape[i];
    return n;
}

/* ---- values in the compute dtype ---- */

/* v as float dtype t stores it (f16 and bf16 through f32, as their conversions do). */
static double quantize(ic_dtype t, double v)
{
    switch (t) {
    case IC_F64: return v;
    case IC_F16: return ic_f16_to_f32(ic_f32_to_f16((float)v));
    case IC_BF16: return ic_bf16_to_f32(ic_f32_to_bf16((float)v));
    default: return (float)v;
    }
}

/* An integer as float dtype t: int -> f32 rounds once (as C++ and PyTorch convert), not
 * through double, which could round twice. */
static double quantize_int(ic_dtype t, int64_t v)
{
    return t == IC_F64 ? (double)v : quantize(t, (float)v);
}

/* A float truncated toward zero into int64 (saturating; NaN -> 0), without C's UB. */
static int64_t trunc_i64(double f)
{
    return isnan(f) ? 0 : f >= 9.2e18 ? INT64_MAX : f <= -9.2e18 ? INT64_MIN : (int64_t)f;
}

/* One operand of a pointwise op, promoted to the node's compute dtype. */
typedef struct {
    const ic_tensor *t;   /* NULL: the number below */
    ic_dtype compute;
    double f;             /* the number, when compute is a float dtype */
    int64_t i;            /* the number, when compute is an integer dtype or bool */
} operand;

/* A number (operand or clamp bound) in the compute dtype: rounded to it when float, like
 * PyTorch's wrapped numbers, which are cast to the common dtype. */
static void number_as(ic_dtype compute, const ic_scalar *s, double *f, int64_t *i)
{
    *f = s->is_int ? quantize_int(compute, s->i) : quantize(compute, s->f);
    *i = ic__wrap_int(s->is_int ? s->i : trunc_i64(s->f), compute);
}

static void operand_init(operand *o, const ic_node *n, int k, const ic_tensor *t, ic_dtype compute)
{
    o->t = t;
    o->compute = compute;
    number_as(compute, &n->in[k].scalar, &o->f, &o->i);
}

static double opf(const operand *o, int64_t off)
{
    if (!o->t)
        return o->f;
    if (ic_dtype_is_float(o->t->dtype)) {
        double v = ic__ref_getf(o->t, off);
        return o->t->dtype == o->compute ? v : quantize(o->compute, v);
    }
    return quantize_int(o->compute, ic__ref_geti(o->t, off));
}

/* An integer operand converted to the compute dtype: a 0-d tensor of a wider type (a
 * lower tier of the promotion) wraps to it, as PyTorch casts it. */
static int64_t opi(const operand *o, int64_t off)
{
    return o->t ? ic__wrap_int(ic__ref_geti(o->t, off), o->compute) : o->i;
}

/* Integer arithmetic wraps like PyTorch's two's complement (unsigned: no C overflow UB). */
static int64_t wrap_add(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static int64_t wrap_sub(int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); }
static int64_t wrap_mul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }

/* ---- unary ---- */

static double gelu(double x, int approximate)
{
    if (approximate == 1)
        return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    return 0.5 * x * (1 + erf(x / M_SQRT2));
}

static double sigmoid(double x) { return 1 / (1 + exp(-x)); }

/* clamp: NaN stays NaN; min > max gives max (PyTorch applies max last). */
static double clamp_f(const ic_attrs *a, double lo, double hi, double x)
{
    if (isnan(x))
        return x;
    if (a->has_min && x < lo)
        x = lo;
    if (a->has_max && x > hi)
        x = hi;
    return x;
}

/* An attr number as PyTorch's kernels use it: converted to the compute type (f32 for
 * f16/bf16, whose kernels compute in f32). */
static double attr_f(const ic_node *n, double v) { return ic__ref_round(n->compute, v); }

/* softplus: x where x * beta > threshold, else log1p(exp(x * beta)) / beta. */
static double softplus(const ic_node *n, double x)
{
    double beta = attr_f(n, n->attrs.beta), xb = ic__ref_round(n->compute, x * beta);
    return xb > attr_f(n, n->attrs.threshold) ? x : log1p(exp(xb)) / beta;
}

/* remainder: the sign of the divisor, as PyTorch computes it from fmod (exact), so a zero
 * result has the dividend's sign and an infinite divisor leaves a finite dividend alone. */
static double remainder_f(double a, double b)
{
    double m = fmod(a, b);
    if (m != 0 && (b < 0) != (m < 0))
        m += b;
    return m;
}

static double hardsigmoid(double x) { return isnan(x) ? x : fmin(fmax(x + 3, 0), 6) / 6; }

static double unary_f(const ic_node *n, double x)
{
    switch (n->info.op) {
    case IC_OP_NEG: return -x;
    case IC_OP_ABS: return fabs(x);
    case IC_OP_EXP: return exp(x);
    case IC_OP_LOG: return log(x);
    case IC_OP_SQRT: return sqrt(x);
    case IC_OP_RSQRT: return 1 / sqrt(x);
    case IC_OP_SIN: return sin(x);
    case IC_OP_COS: return cos(x);
    case IC_OP_TANH: return tanh(x);
    case IC_OP_SIGMOID: return sigmoid(x);
    case IC_OP_RELU: return isnan(x) || x > 0 ? x : 0;
    case IC_OP_SILU: return x * sigmoid(x);
    case IC_OP_ERF: return erf(x);
    case IC_OP_RECIPROCAL: return 1 / x;
    case IC_OP_FLOOR: return floor(x);
    case IC_OP_CEIL: return ceil(x);
    case IC_OP_GELU: return gelu(x, n->attrs.approximate);
    case IC_OP_LOG1P: return log1p(x);
    case IC_OP_EXPM1: return expm1(x);
    case IC_OP_SIGN: return (x > 0) - (x < 0); /* -0 and NaN give +0, as in PyTorch */
    case IC_OP_ROUND: return nearbyint(x);     /* halves to even (default rounding mode) */
    case IC_OP_HARDSWISH: return x * hardsigmoid(x);
    case IC_OP_HARDSIGMOID: return hardsigmoid(x);
    case IC_OP_LEAKY_RELU: return x > 0 ? x : x * attr_f(n, n->attrs.negative_slope);
    case IC_OP_SOFTPLUS: return softplus(n, x);
    default: IC_ASSERT(!"not a float unary op"); return 0;
    }
}

static int64_t unary_i(const ic_node *n, int64_t x, int64_t lo, int64_t hi)
{
    switch (n->info.op) {
    case IC_OP_NEG: return wrap_sub(0, x);
    case IC_OP_ABS: return x < 0 ? wrap_sub(0, x) : x;
    case IC_OP_RELU: return x > 0 ? x : 0;
    case IC_OP_FLOOR: case IC_OP_CEIL: case IC_OP_ROUND: return x; /* integers are their own floor */
    case IC_OP_SIGN: return (x > 0) - (x < 0);
    case IC_OP_CLAMP:
        if (n->attrs.has_min && x < lo)
            x = lo;
        if (n->attrs.has_max && x > hi)
            x = hi;
        return x;
    default: IC_ASSERT(!"not an integer unary op"); return 0;
    }
}

/* cast: float -> int truncates toward zero, float -> bool is "nonzero" (NaN is true),
 * int -> float rounds once. */
static void cast_one(const ic_tensor *x, int64_t i, ic_tensor *out)
{
    bool from_float = ic_dtype_is_float(x->dtype);
    if (out->dtype == IC_BOOL)
        ic__ref_seti(out, i, from_float ? ic__ref_getf(x, i) != 0 : ic__ref_geti(x, i) != 0);
    else if (!ic_dtype_is_float(out->dtype))
        ic__ref_seti(out, i, ic__ref_geti(x, i));
    else if (from_float)
        ic__ref_setf(out, i, ic__ref_getf(x, i));
    else
        ic__ref_setf(out, i, quantize_int(out->dtype == IC_F64 ? IC_F64 : IC_F32, ic__ref_geti(x, i)));
}

static ic_status ref_unary(const ic_graph *g, const ic_node *n, const ic_tensor *const *ins,
                           ic_tensor *out)
{
    const ic_tensor *x = ins[0];
    int64_t total = numel_of(out);
    ic_op op = n->info.op;
    if (op == IC_OP_CAST) {
        for (int64_t i = 0; i < total; i++)
            cast_one(x, i, out);
        return IC_OK;
    }
    if (op == IC_OP_LOGICAL_NOT) {
        bool fl = ic_dtype_is_float(x->dtype);
        for (int64_t i = 0; i < total; i++)
            ic__ref_seti(out, i, fl ? !(ic__ref_getf(x, i) != 0) : !ic__ref_geti(x, i));
        return IC_OK;
    }
    operand a;
    operand_init(&a, n, 0, x, n->compute);
    double lof, hif; /* clamp bounds (unused by other ops) */
    int64_t loi, hii;
    number_as(n->compute, &n->attrs.min, &lof, &loi);
    number_as(n->compute, &n->attrs.max, &hif, &hii);
    if (ic_dtype_is_float(n->compute)) {
        for (int64_t i = 0; i < total; i++) {
            double v = opf(&a, i);
            double r = op == IC_OP_CLAMP ? clamp_f(&n->attrs, lof, hif, v) : unary_f(n, v);
            ic__ref_setf(out, i, ic__ref_round(n->compute, r));
        }
    } else {
        for (int64_t i = 0; i < total; i++)
            ic__ref_seti(out, i, unary_i(n, opi(&a, i), loi, hii));
    }
    (void)g;
    return IC_OK;
}

/* ---- binary ---- */

static double binary_f(ic_op op, double a, double b)
{
    switch (op) {
    case IC_OP_ADD: return a + b;
    case IC_OP_SUB: return a - b;
    case IC_OP_MUL: return a * b;
    case IC_OP_DIV: return a / b;
    case IC_OP_POW: return pow(a, b);
    case IC_OP_MAXIMUM: return isnan(a) ? a : isnan(b) ? b : a > b ? a : b;
    case IC_OP_MINIMUM: return isnan(a) ? a : isnan(b) ? b : a < b ? a : b;
    case IC_OP_EQ: return a == b;
    case IC_OP_NE: return a != b;
    case IC_OP_LT: return a < b;
    case IC_OP_LE: return a <= b;
    case IC_OP_GT: return a > b;
    case IC_OP_GE: return a >= b;
    case IC_OP_LOGICAL_AND: return a != 0 && b != 0;
    case IC_OP_LOGICAL_OR: return a != 0 || b != 0;
    case IC_OP_REMAINDER: return remainder_f(a, b);
    default: IC_ASSERT(!"not a binary op"); return 0;
    }
}

/* Integer power by repeated squaring (wrapping). A negative exponent gives what PyTorch's
 * integer pow gives for tensor exponents: 1 for base 1, +-1 for base -1, else 0. */
static int64_t ipow(int64_t a, int64_t b)
{
    if (b < 0)
        return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;
    int64_t r = 1;
    while (b) {
        if (b & 1)
            r = wrap_mul(r, a);
        a = wrap_mul(a, a);
        b >>= 1;
    }
    return r;
}

static int64_t binary_i(ic_op op, int64_t a, int64_t b)
{
    switch (op) {
    case IC_OP_ADD: return wrap_add(a, b);
    case IC_OP_SUB: return wrap_sub(a, b);
    case IC_OP_MUL: return wrap_mul(a, b);
    case IC_OP_POW: return ipow(a, b);
    case IC_OP_MAXIMUM: return a > b ? a : b;
    case IC_OP_MINIMUM: return a < b ? a : b;
    case IC_OP_EQ: return a == b;
    case IC_OP_NE: return a != b;
    case IC_OP_LT: return a < b;
    case IC_OP_LE: return a <= b;
    case IC_OP_GT: return a > b;
    case IC_OP_GE: return a >= b;
    case IC_OP_LOGICAL_AND: return a != 0 && b != 0;
    case IC_OP_LOGICAL_OR: return a != 0 || b != 0;
    case IC_OP_REMAINDER: { /* b != 0 (checked by the caller); INT64_MIN % -1 is 0 */
        int64_t r = b == -1 ? 0 : a % b;
        return r != 0 && (r < 0) != (b < 0) ? r + b : r;
    }
    default: IC_ASSERT(!"not an integer binary op"); return 0;
    }
}

static ic_status ref_binary(const ic_graph *g, const ic_node *n, const ic_tensor *const *ins,
                            ic_tensor *out)
{
    ic_op op = n->info.op;
    bool fl = ic_dtype_is_float(n->compute);
    /* PyTorch refuses an integer tensor raised to a negative integer number */
    if (op == IC_OP_POW && !fl && n->in[1].node == IC_SCALAR && n->in[1].scalar.i < 0)
        return NODE_FAIL(g, n, IC_EINVAL, "integers to negative integer powers are not allowed "
                         "(exponent %lld)", (long long)n->in[1].scalar.i);
    operand a, b;
    operand_init(&a, n, 0, ins[0], n->compute);
    operand_init(&b, n, 1, ins[1], n->compute);
    walker w;
    walk_init(&w, out->rank, out->shape);
    walk_broadcast(&w, 0, ins[0]);
    walk_broadcast(&w, 1, ins[1]);
    int64_t total = numel_of(out);
    bool to_bool = out->dtype == IC_BOOL;
    for (int64_t o = 0; o < total; o++, walk_next(&w)) {
        if (!fl) {
            int64_t y = opi(&b, w.off[1]);
            if (op == IC_OP_REMAINDER && y == 0) /* PyTorch: ZeroDivisionError */
                return NODE_FAIL(g, n, IC_EINVAL, "integer remainder by zero");
            ic__ref_seti(out, o, binary_i(op, opi(&a, w.off[0]), y));
            continue;
        }
        double r = binary_f(op, opf(&a, w.off[0]), opf(&b, w.off[1]));
        if (to_bool)
            ic__ref_seti(out, o, r != 0);
        else
            ic__ref_setf(out, o, ic__ref_round(n->compute, r));
    }
    return IC_OK;
}

/* where(cond, a, b): cond is a bool tensor; a and b are promoted to the node's dtype. */
static ic_status ref_where(const ic_graph *g, const ic_node *n, const ic_tensor *const *ins,
                           ic_tensor *out)
{
    operand a, b;
    operand_init(&a, n, 1, ins[1], n->compute);
    operand_init(&b, n, 2, ins[2], n->compute);
    walker w;
    walk_init(&w, out->rank, out->shape);
    for (int k = 0; k < 3; k++)
        walk_broadcast(&w, k, ins[k]);
    int64_t total = numel_of(out);
    bool fl = ic_dtype_is_float(n->compute);
    for (int64_t o = 0; o < total; o++, walk_next(&w)) {
        bool c = ic__ref_geti(ins[0], w.off[0]) != 0;
        if (fl)
            ic__ref_setf(out, o, c ? opf(&a, w.off[1]) : opf(&b, w.off[2]));
        else
            ic__ref_seti(out, o, c ? opi(&a, w.off[1]) : opi(&b, w.off[2]));
    }
    (void)g;
    return IC_OK;
}

/* ---- reductions ----
 * Walk the input once in row-major order; operand 1 of the walker is the offset of the
 * output element each input element folds into (reduced dims have stride 0). Elements of
 * one output are then met in increasing index along every reduced dim, which makes
 * argmax's "first index" fall out of a strict comparison. */

typedef struct {
    double *f;     /* float accumulators (sum prod amax amin argmax's best) */
    int64_t *i;    /* integer accumulators, or argmax's best index */
    int64_t *ib;   /* argmax over integers: best value */
    int64_t *cnt;  /* elements folded so far */
} accum;

static void reduce_walker(const ic_node *n, const ic_tensor *x, walker *w)
{
    int64_t st = 1;
    walk_init(w, x->rank, x->shape);
    walk_broadcast(w, 0, x);
    /* output strides: contiguous over the kept dims, 0 over the reduced ones */
    for (int d = x->rank - 1; d >= 0; d--) {
        if (n->axes & (1u << d)) {
            w->stride[1][d] = 0;
        } else {
            w->stride[1][d] = st;
            st *= x->shape[d];
        }
    }
}

static void fold_f(ic_op op, accum *acc, int64_t o, double v, int64_t pos)
{
    double *a = &acc->f[o];
    switch (op) {
    case IC_OP_SUM: case IC_OP_MEAN: *a += v; break;
    case IC_OP_PROD: *a *= v; break;
    case IC_OP_AMAX: if (!isnan(*a) && (isnan(v) || v > *a)) *a = v; break;
    case IC_OP_AMIN: if (!isnan(*a) && (isnan(v) || v < *a)) *a = v; break;
    default: /* argmax: NaN counts as the largest value */
        if (acc->cnt[o] == 0 || (!isnan(*a) && (isnan(v) || v > *a))) {
            *a = v;
            acc->i[o] = pos;
        }
    }
    acc->cnt[o]++;
}

static void fold_i(ic_op op, accum *acc, int64_t o, int64_t v, int64_t pos)
{
    int64_t *a = &acc->i[o];
    switch (op) {
    case IC_OP_SUM: *a = wrap_add(*a, v); break;
    case IC_OP_PROD: *a = wrap_mul(*a, v); break;
    case IC_OP_AMAX: if (v > *a) *a = v; break;
    case IC_OP_AMIN: if (v < *a) *a = v; break;
    default:
        if (acc->cnt[o] == 0 || v > acc->ib[o]) {
            acc->ib[o] = v;
            acc->i[o] = pos;
        }
    }
    acc->cnt[o]++;
}

static void accum_free(ic_ctx *c, accum *acc)
{
    ic__free(c, acc->f);
    ic__free(c, acc->i);
    ic__free(c, acc->ib);
    ic__free(c, acc->cnt);
}

/* Identity of each reduction: 0 for sums, 1 for products, -inf/+inf (or the integer
 * extremes) for amax/amin, so that an empty sum is 0 and an empty product is 1. */
static void accum_start(ic_op op, bool fl, accum *acc, int64_t nout)
{
    for (int64_t o = 0; o < nout; o++) {
        if (fl)
            acc->f[o] = op == IC_OP_PROD ? 1 : op == IC_OP_AMAX ? -INFINITY : op == IC_OP_AMIN ? INFINITY : 0;
        else
            acc->i[o] = op == IC_OP_PROD ? 1 : op == IC_OP_AMAX ? INT64_MIN : op == IC_OP_AMIN ? INT64_MAX : 0;
    }
}

static ic_status ref_reduce(const ic_graph *g, const ic_node *n, const ic_tensor *const *ins,
                            ic_tensor *out)
{
    const ic_tensor *x = ins[0];
    ic_op op = n->info.op;
    bool fl = ic_dtype_is_float(n->compute), arg = op == IC_OP_ARGMAX;
    int64_t nout = numel_of(out), nin = numel_of(x);
    size_t m = (size_t)(nout ? nout : 1);
    accum acc = { NULL, NULL, NULL, NULL };
    acc.cnt = ic__calloc(g->c, m, sizeof(int64_t));
    acc.f = fl ? ic__calloc(g->c, m, sizeof(double)) : NULL;
    acc.i = (!fl || arg) ? ic__calloc(g->c, m, sizeof(int64_t)) : NULL;
    acc.ib = (!fl && arg) ? ic__calloc(g->c, m, sizeof(int64_t)) : NULL;
    if (!acc.cnt || (fl && !acc.f) || ((!fl || arg) && !acc.i) || (!fl && arg && !acc.ib)) {
        accum_free(g->c, &acc);
        return NODE_FAIL(g, n, IC_ENOMEM, "out of memory for %lld accumulators", (long long)nout);
    }
    accum_start(op, fl, &acc, nout);
    walker w;
    reduce_walker(n, x, &w);
    int ax = x->rank ? n->axis : 0;
    for (int64_t i = 0; i < nin; i++, walk_next(&w)) {
        int64_t pos = x->rank ? w.coord[ax] : 0;
        if (fl)
            fold_f(op, &acc, w.off[1], ic__ref_getf(x, i), pos);
        else
            fold_i(op, &acc, w.off[1], ic__ref_geti(x, i), pos);
    }
    for (int64_t o = 0; o < nout; o++) {
        if (arg)
            ic__ref_seti(out, o, acc.i[o]);
        else if (op == IC_OP_MEAN)
            ic__ref_setf(out, o, acc.cnt[o] ? acc.f[o] / (double)acc.cnt[o] : NAN);
        else if (fl)
            ic__ref_setf(out, o, acc.f[o]);
        else
            ic__ref_seti(out, o, acc.i[o]);
    }
    accum_free(g->c, &acc);
    return IC_OK;
}

/* ---- binding arguments ---- */

static const char *arg_kind(const ic_node *n) { return n->info.op == IC_OP_INPUT ? "input" : "param"; }

static void shape_text(int rank, const int64_t *shape, char *buf, size_t size)
{
    int k = snprintf(buf, size, "[");
    for (int i = 0; i < rank && k < (int)size; i++)
        k += snprintf(buf + k, size - (size_t)k, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (k < (int)size)
        snprintf(buf + k, size - (size_t)k, "]");
}

/* Rank, dtype and data of argument k against its declaration. */
static ic_status check_arg(const ic_graph *g, const ic_node *n, const ic_tensor *a)
{
    char want[160], got[160];
    ic_graph_shape_str(g, n->info.rank, n->shape, want, sizeof want);
    if (a->dtype != n->info.dtype)
        return ic__node_error(g, n->info.name, arg_kind(n), IC_EDTYPE,
                              "argument is %s, the graph declares %s",
                              (unsigned)a->dtype < IC_DTYPE_COUNT ? ic_dtype_name(a->dtype) : "an unknown dtype",
                              ic_dtype_name(n->info.dtype));
    if (a->rank != n->info.rank)
        return ic__node_error(g, n->info.name, arg_kind(n), IC_ESHAPE,
                              "argument has rank %d, the graph declares %s", a->rank, want);
    for (int j = 0; j < a->rank; j++)
        if (a->shape[j] < 0)
            return ic__node_error(g, n->info.name, arg_kind(n), IC_ESHAPE,
                                  "argument dim %d is negative (%lld)", j, (long long)a->shape[j]);
    int64_t numel = ic_tensor_numel(a);
    shape_text(a->rank, a->shape, got, sizeof got);
    if (numel < 0)
        return ic__node_error(g, n->info.name, arg_kind(n), IC_ESHAPE,
                              "argument %s has too many elements", got);
    if (numel > 0 && !a->data)
        return ic__node_error(g, n->info.name, arg_kind(n), IC_EINVAL, "argument %s has no data", got);
    return IC_OK;
}

/* Who fixed each symbol first: argument, dim and size, to name both sides of a conflict. */
typedef struct { int arg, dim; int64_t size; } sym_src;

/* Binds the symbols of single-symbol dims (coef * S) from argument sizes. strict: a value
 * already in vals must agree (ic_ref_run); otherwise an argument replaces it. */
static ic_status bind_dims(const ic_graph *g, int nargs, const ic_tensor *args, int64_t *vals,
                           sym_src *src, bool strict)
{
    for (int k = 0; k < nargs; k++) {
        const ic_node *n = g->nodes[ic_graph_arg(g, k)];
        for (int j = 0; j < n->info.rank; j++) {
            ic_dim d = n->shape[j];
            int64_t size = args[k].shape[j];
            if (d.nsym != 1)
                continue;
            int s = d.sym[0];
            const char *sym = ic_graph_symbol_name(g, s);
            if (size % d.coef)
                return ic__node_error(g, n->info.name, arg_kind(n), IC_ESHAPE,
                                      "argument dim %d is %lld, not a multiple of %lld for %lld*%s",
                                      j, (long long)size, (long long)d.coef, (long long)d.coef, sym);
            int64_t v = size / d.coef;
            if (src[s].arg >= 0) {
                if (vals[s] != v) {
                    const ic_node *f = g->nodes[ic_graph_arg(g, src[s].arg)];
                    return ic__node_error(g, n->info.name, arg_kind(n), IC_ESHAPE,
                                          "symbol '%s' is %lld from %s '%s' (dim %d has size %lld), "
                                          "but %lld from %s '%s' (dim %d has size %lld)",
                                          sym, (long long)vals[s], arg_kind(f), f->info.name,
                                          src[s].dim, (long long)src[s].size, (long long)v,
                                          arg_kind(n), n->info.name, j, (long long)size);
                }
                continue;
            }
            if (strict && vals[s] >= 0 && vals[s] != v)
                return ic__node_error(g, n->info.name, arg_kind(n), IC_ESHAPE,
                                      "symbol '%s' is bound to %lld, but the argument's dim %d "
                                      "has size %lld", sym, (long long)vals[s], j, (long long)size);
            vals[s] = v;
            src[s] = (sym_src){ k, j, size };
        }
    }
    return IC_OK;
}

/* Every dim whose symbols are all bound must equal the argument's size. */
static ic_status check_dims(const ic_graph *g, int nargs, const ic_tensor *args, const int64_t *vals)
{
    for (int k = 0; k < nargs; k++) {
        const ic_node *n = g->nodes[ic_graph_arg(g, k)];
        for (int j = 0; j < n->info.rank; j++) {
            ic_dim d = n->shape[j];
            bool bound = true;
            int64_t want = d.coef;
            for (int i = 0; i < d.nsym; i++)
                bound = bound && vals[d.sym[i]] >= 0;
            if (!bound)
                continue;
            for (int i = 0; i < d.nsym; i++)
                if (!ic__mul_ok(want, vals[d.sym[i]], &want))
                    return ic__node_error(g, n->info.name, arg_kind(n), IC_ESHAPE,
                                          "dim %d overflows under the bound symbols", j);
            if (want != args[k].shape[j]) {
                char decl[160], got[160];
                ic_graph_shape_str(g, n->info.rank, n->shape, decl, sizeof decl);
                shape_text(args[k].rank, args[k].shape, got, sizeof got);
                return ic__node_error(g, n->info.name, arg_kind(n), IC_ESHAPE,
                                      "argument %s does not match the declared %s: dim %d is "
                                      "%lld, expected %lld", got, decl, j,
                                      (long long)args[k].shape[j], (long long)want);
            }
        }
    }
    return IC_OK;
}

static ic_status bind_args(const ic_graph *g, int nargs, const ic_tensor *args, int64_t *vals,
                           bool strict)
{
    int want = ic_graph_num_args(g);
    if (nargs != want)
        return ic__node_error(g, NULL, NULL, IC_EINVAL,
                              "expects %d arguments (the inputs, then the params without data), got %d",
                              want, nargs);
    if (nargs > 0 && !args)
        return ic__node_error(g, NULL, NULL, IC_EINVAL, "arguments are NULL");
    if (g->nsyms > 0 && !vals)
        return ic__node_error(g, NULL, NULL, IC_EINVAL, "the graph has symbols but vals is NULL");
    ic_status s;
    for (int k = 0; k < nargs; k++)
        if ((s = check_arg(g, g->nodes[ic_graph_arg(g, k)], &args[k])))
            return s;
    sym_src *src = ic__malloc(g->c, sizeof(sym_src) * (size_t)(g->nsyms ? g->nsyms : 1));
    if (!src)
        return ic__error(g->c, IC_ENOMEM, "out of memory");
    for (int i = 0; i < g->nsyms; i++)
        src[i].arg = -1;
    s = bind_dims(g, nargs, args, vals, src, strict);
    ic__free(g->c, src);
    return s ? s : check_dims(g, nargs, args, vals);
}

ic_status ic_runtime_bind_args(const ic_graph *g, int nargs, const ic_tensor *args, int64_t *vals)
{
    return bind_args(g, nargs, args, vals, false);
}

/* ---- the driver ---- */

typedef struct {
    const ic_graph *g;   /* the graph run: specialised when the original had symbols */
    ic_tensor *val;      /* value of each node (contiguous) */
    bool *owned;         /* val[v].data was allocated here */
    int *last;           /* the last node that reads v (v itself when none does) */
    bool *is_out;
    int *argno;          /* index in args of an input/run-time param, else -1 */
} run_state;

static void release(run_state *r, int v)
{
    if (r->owned[v])
        ic_tensor_free(r->g->c, &r->val[v]);
    r->owned[v] = false;
    r->val[v].data = NULL;
}

/* A node's output tensor, allocated: its dtype and (concrete) shape. */
static ic_status alloc_value(const ic_graph *g, const ic_node *n, ic_tensor *t)
{
    int64_t shape[IC_MAX_RANK];
    for (int i = 0; i < n->info.rank; i++) {
        IC_ASSERT(n->shape[i].nsym == 0); /* specialised before running */
        shape[i] = n->shape[i].coef;
    }
    ic_tensor_init(t, n->info.dtype, n->info.rank, shape, NULL);
    ic_status s = ic_tensor_alloc(g->c, t);
    if (s) {
        char buf[160];
        return ic__node_error(g, n->info.name, ic_op_name(n->info.op), s,
                              "cannot allocate the %s result %s: %s", ic_dtype_name(n->info.dtype),
                              ic_graph_shape_str(g, n->info.rank, n->shape, buf, sizeof buf),
                              ic_last_error(g->c));
    }
    return IC_OK;
}

/* Argument a as a contiguous value: borrowed when it already is, else copied. */
static ic_status load_arg(run_state *r, int v, const ic_tensor *a)
{
    const ic_node *n = r->g->nodes[v];
    if (ic_tensor_is_contiguous(a)) {
        ic_tensor_init(&r->val[v], a->dtype, a->rank, a->shape, a->data);
        return IC_OK;
    }
    ic_status s = alloc_value(r->g, n, &r->val[v]);
    if (s)
        return s;
    r->owned[v] = true;
    size_t es = ic_dtype_size(a->dtype);
    walker w;
    walk_init(&w, a->rank, a->shape);
    memcpy(w.stride[0], a->strides, sizeof(int64_t) * (size_t)a->rank);
    int64_t total = numel_of(a);
    for (int64_t i = 0; i < total; i++, walk_next(&w))
        memcpy((char *)r->val[v].data + i * (int64_t)es, (const char *)a->data + w.off[0] * (int64_t)es, es);
    return IC_OK;
}

/* Param data is row-major in the graph's dtype but may sit unaligned in a mapped file:
 * copy it into an aligned value. */
static ic_status load_param(run_state *r, int v)
{
    const ic_node *n = r->g->nodes[v];
    ic_status s = alloc_value(r->g, n, &r->val[v]);
    if (s)
        return s;
    r->owned[v] = true;
    memcpy(r->val[v].data, n->info.data, (size_t)numel_of(&r->val[v]) * ic_dtype_size(n->info.dtype));
    return IC_OK;
}

static ic__ref_fn kernel_of(ic_op op)
{
    ic__ref_fn nn = ic__ref_nn_kernel(op); /* --- nn ops (ref_nn.c) --- */
    if (nn)
        return nn;
    switch (ic_op_kind_of(op)) {
    case IC_KIND_UNARY: return ref_unary;
    case IC_KIND_BINARY: return ref_binary;
    case IC_KIND_TERNARY: return ref_where;
    case IC_KIND_REDUCE: return ref_reduce;
    case IC_KIND_NORM: return ic__ref_norm;
    case IC_KIND_VIEW: return ic__ref_view;
    case IC_KIND_CAT: return ic__ref_cat;
    case IC_KIND_CONTRACT: return ic__ref_contract;
    case IC_KIND_GATHER: return ic__ref_gather;
    case IC_KIND_CREATE: return ic__ref_create;
    case IC_KIND_SPATIAL: return ic__ref_spatial;
    default: return NULL;
    }
}

static ic_status compute_node(run_state *r, int v)
{
    const ic_node *n = r->g->nodes[v];
    const ic_tensor *ins[IC_MAX_INPUTS];
    for (int i = 0; i < n->info.ninputs; i++) {
        int u = n->in[i].node;
        ins[i] = u >= 0 ? &r->val[u] : NULL;
    }
    ic__ref_fn fn = kernel_of(n->info.op);
    if (!fn)
        return NODE_FAIL(r->g, n, IC_EINVAL, "not an op the reference executor knows");
    ic_status s = alloc_value(r->g, n, &r->val[v]);
    if (s)
        return s;
    r->owned[v] = true;
    return fn(r->g, n, ins, &r->val[v]);
}

/* Frees what no later node and no output reads once node v has run. */
static void free_dead(run_state *r, int v)
{
    const ic_node *n = r->g->nodes[v];
    for (int i = 0; i < n->info.ninputs; i++) {
        int u = n->in[i].node;
        if (u >= 0 && r->last[u] == v && !r->is_out[u])
            release(r, u);
    }
    if (r->last[v] == v && !r->is_out[v])
        release(r, v);
}

/* Each output gets its own tensor: the value itself the first time when it was allocated
 * here, a copy otherwise (an input, or an output listed twice). */
static ic_status hand_out(run_state *r, int nouts, ic_tensor *outs)
{
    for (int i = 0; i < nouts; i++) {
        int v = r->g->outputs[i];
        if (r->owned[v]) {
            outs[i] = r->val[v];
            r->owned[v] = false; /* val[v] stays readable for later copies */
            continue;
        }
        ic_status s = alloc_value(r->g, r->g->nodes[v], &outs[i]);
        if (s) {
            for (int j = 0; j < i; j++)
                ic_tensor_free(r->g->c, &outs[j]);
            memset(outs, 0, sizeof *outs * (size_t)nouts);
            return s;
        }
        memcpy(outs[i].data, r->val[v].data, (size_t)numel_of(&outs[i]) * ic_dtype_size(outs[i].dtype));
    }
    return IC_OK;
}

static ic_status execute(const ic_graph *g, int nargs, const ic_tensor *args, int nouts, ic_tensor *outs)
{
    int nn = g->nnodes ? g->nnodes : 1;
    run_state r = { g, ic__calloc(g->c, (size_t)nn, sizeof(ic_tensor)),
                    ic__calloc(g->c, (size_t)nn, sizeof(bool)), ic__calloc(g->c, (size_t)nn, sizeof(int)),
                    ic__calloc(g->c, (size_t)nn, sizeof(bool)), ic__calloc(g->c, (size_t)nn, sizeof(int)) };
    ic_status s = IC_OK;
    if (!r.val || !r.owned || !r.last || !r.is_out || !r.argno) {
        s = ic__error(g->c, IC_ENOMEM, "out of memory");
        goto done;
    }
    for (int v = 0; v < g->nnodes; v++) {
        r.argno[v] = -1;
        r.last[v] = v;
        for (int i = 0; i < g->nodes[v]->info.ninputs; i++)
            if (g->nodes[v]->in[i].node >= 0)
                r.last[g->nodes[v]->in[i].node] = v;
    }
    for (int i = 0; i < g->noutputs; i++)
        r.is_out[g->outputs[i]] = true;
    /* args follow ic_graph_arg order (inputs, then params without data), not node order */
    for (int k = 0; k < nargs; k++)
        r.argno[ic_graph_arg(g, k)] = k;
    for (int v = 0; v < g->nnodes && !s; v++) {
        const ic_node *n = g->nodes[v];
        if (r.argno[v] >= 0)
            s = load_arg(&r, v, &args[r.argno[v]]);
        else if (n->info.op == IC_OP_PARAM)
            s = load_param(&r, v);
        else
            s = compute_node(&r, v);
        if (!s)
            free_dead(&r, v);
    }
    if (!s)
        s = hand_out(&r, nouts, outs);
done:
    for (int v = 0; r.owned && v < g->nnodes; v++)
        release(&r, v);
    ic__free(g->c, r.val);
    ic__free(g->c, r.owned);
    ic__free(g->c, r.last);
    ic__free(g->c, r.is_out);
    ic__free(g->c, r.argno);
    return s;
}

static ic_status run(const ic_graph *g, const int64_t *vals, int nargs, const ic_tensor *args,
                     int nouts, ic_tensor *outs)
{
    if (nouts != g->noutputs || (nouts > 0 && !outs))
        return ic__node_error(g, NULL, NULL, IC_EINVAL, "has %d outputs, the caller asked for %d%s",
                              g->noutputs, nouts, nouts > 0 && !outs ? " into NULL" : "");
    int64_t *sv = ic__malloc(g->c, sizeof(int64_t) * (size_t)(g->nsyms ? g->nsyms : 1));
    if (!sv)
        return ic__error(g->c, IC_ENOMEM, "out of memory");
    for (int i = 0; i < g->nsyms; i++)
        sv[i] = vals ? vals[i] : -1;
    ic_graph *sg = NULL;
    ic_status s = bind_args(g, nargs, args, sv, true);
    for (int i = 0; !s && i < g->nsyms; i++)
        if (sv[i] < 0)
            s = ic__node_error(g, NULL, NULL, IC_EINVAL,
                               "symbol '%s' is not bound: no argument fixes it (bind it, e.g. --bind %s=8)",
                               g->syms[i], g->syms[i]);
    if (!s && g->nsyms > 0)
        s = ic_graph_specialize(g, sv, &sg);
    if (!s)
        s = execute(sg ? sg : g, nargs, args, nouts, outs);
    ic_graph_destroy(sg);
    ic__free(g->c, sv);
    return s;
}

ic_status ic_ref_run(ic_ctx *c, const ic_graph *g, const int64_t *vals, int nargs,
                     const ic_tensor *args, int nouts, ic_tensor *outs)
{
    if (outs && nouts > 0)
        memset(outs, 0, sizeof *outs * (size_t)nouts);
    ic_status s = run(g, vals, nargs, args, nouts, outs);
    if (s && c && c != g->c) /* messages were written to the graph's context */
        ic__error(c, s, "%s", ic_last_error(g->c));
    return s;
}
