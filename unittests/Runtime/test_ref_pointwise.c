/* test_ref_pointwise.c - the reference executor's unary, binary and where ops: every op for
 * every dtype it takes, broadcasting, numbers as operands, promotion, odd sizes, strided
 * arguments, f16/bf16 rounding, NaN/inf and integer exactness. Expected values come from
 * the documented PyTorch formulas, evaluated here in plain C with an independent rounding. */
#include <math.h>
#include <string.h>
#include <criterion/criterion.h>
#include "ic/ic.h"
#include "testutil.h"

/* ---- independent rounding and tensor helpers ---- */

/* Round to nearest even into a binary format with p significand bits, smallest normal
 * exponent emin and largest finite value maxv: the quantum is 2^(e-p) for |x| in
 * [2^(e-1), 2^e), fixed below the normal range; beyond maxv it is infinity. */
static double round_fmt(double x, int p, int emin, double maxv)
{
    if (!isfinite(x) || x == 0)
        return x;
    int e;
    frexp(x, &e);
    if (e - 1 < emin)
        e = emin + 1;
    double q = ldexp(1.0, e - p);
    double r = nearbyint(x / q) * q;
    return fabs(r) > maxv ? copysign(INFINITY, x) : r;
}

/* x as dtype dt stores it (f16/bf16 via f32, as PyTorch converts from its f32 opmath). */
static double q_as(ic_dtype dt, double x)
{
    switch (dt) {
    case IC_F64: return x;
    case IC_F32: return (float)x;
    case IC_F16: return round_fmt((float)x, 11, -14, 65504);
    case IC_BF16: return round_fmt((float)x, 8, -126, 0x1.fep127);
    default: return x;
    }
}

static const ic_dtype FLOATS[] = { IC_F32, IC_F64, IC_F16, IC_BF16 };
static const ic_dtype INTS[] = { IC_I32, IC_I64 };

static ic_tensor tnew(ic_ctx *c, ic_dtype dt, int rank, const int64_t *shape)
{
    ic_tensor t;
    ic_tensor_init(&t, dt, rank, shape, NULL);
    cr_assert_eq(ic_tensor_alloc(c, &t), IC_OK, "alloc: %s", ic_last_error(c));
    return t;
}

/* Writes an exact integer into a contiguous integer/bool tensor. */
static void put_i(ic_tensor *t, int64_t i, int64_t v)
{
    switch (t->dtype) {
    case IC_I32: ((int32_t *)t->data)[i] = (int32_t)v; break;
    case IC_I64: ((int64_t *)t->data)[i] = v; break;
    case IC_BOOL: ((uint8_t *)t->data)[i] = v != 0; break;
    default: ic_tensor_set(t, i, (double)v); break;
    }
}

/* A 1-d tensor of dtype dt from values (already representable in dt). */
static ic_tensor vec(ic_ctx *c, ic_dtype dt, int n, const double *v)
{
    int64_t sh[1] = { n };
    ic_tensor t = tnew(c, dt, 1, sh);
    for (int i = 0; i < n; i++) {
        if (ic_dtype_is_float(dt))
            ic_tensor_set(&t, i, v[i]);
        else
            put_i(&t, i, (int64_t)v[i]);
    }
    return t;
}

static ic_tensor veci(ic_ctx *c, ic_dtype dt, int n, const int64_t *v)
{
    int64_t sh[1] = { n };
    ic_tensor t = tnew(c, dt, 1, sh);
    for (int i = 0; i < n; i++)
        put_i(&t, i, v[i]);
    return t;
}

/* An operand of run_op: a tensor argument, or a number written into the graph. */
typedef struct { const ic_tensor *t; ic_operand num; } opnd;
static opnd T(const ic_tensor *t) { opnd o = { t, ic_none() }; return o; }
static opnd NI(int64_t v) { opnd o = { NULL, ic_scalar_i(v) }; return o; }
static opnd NF(double v) { opnd o = { NULL, ic_scalar_f(v) }; return o; }

/* Builds y = op(operands) with one graph input per tensor operand, runs the reference
 * executor and returns its status; *out is the result (caller frees). */
static ic_status try_op(ic_ctx *c, ic_op op, int n, const opnd *in, const ic_attrs *at, ic_tensor *out)
{
    ic_graph *g = ict_graph(c, "pointwise");
    ic_operand ops[4];
    ic_tensor args[4];
    int na = 0;
    for (int i = 0; i < n; i++) {
        if (!in[i].t) {
            ops[i] = in[i].num;
            continue;
        }
        ic_dim d[IC_MAX_RANK];
        for (int k = 0; k < in[i].t->rank; k++)
            d[k] = ic_dim_const(in[i].t->shape[k]);
        char name[8];
        snprintf(name, sizeof name, "x%d", i);
        ic_value v;
        cr_assert_eq(ic_graph_add_input(g, name, in[i].t->dtype, in[i].t->rank, d, &v), IC_OK,
                     "%s", ic_last_error(c));
        ops[i] = ic_val(v);
        args[na++] = *in[i].t;
    }
    ic_value y;
    ic_status s = ic_graph_add_node(g, "y", op, n, ops, at, &y);
    cr_assert_eq(s, IC_OK, "building %s: %s", ic_op_name(op), ic_last_error(c));
    cr_assert_eq(ic_graph_add_output(g, y), IC_OK);
    s = ic_ref_run(c, g, NULL, na, args, 1, out);
    ic_graph_destroy(g);
    return s;
}

static ic_tensor run_op(ic_ctx *c, ic_op op, int n, const opnd *in, const ic_attrs *at)
{
    ic_tensor out;
    ic_status s = try_op(c, op, n, in, at, &out);
    cr_assert_eq(s, IC_OK, "running %s: %s", ic_op_name(op), ic_last_error(c));
    return out;
}

static ic_tensor run1(ic_ctx *c, ic_op op, opnd a, const ic_attrs *at)
{
    return run_op(c, op, 1, &a, at);
}

static ic_tensor run2(ic_ctx *c, ic_op op, opnd a, opnd b)
{
    opnd in[2] = { a, b };
    return run_op(c, op, 2, in, NULL);
}

/* got[i] == want exactly (NaN matches NaN). */
static void check_exact(const ic_tensor *got, int64_t i, double want, const char *what)
{
    double v = ict_get_f(got, i);
    cr_assert((isnan(want) && isnan(v)) || v == want, "%s [%lld] (%s): got %.17g, want %.17g", what,
              (long long)i, ic_dtype_name(got->dtype), v, want);
}

/* got[i] within the spec's tolerance of want for got's dtype. */
static void check_close(const ic_tensor *got, int64_t i, double want, const char *what)
{
    double v = ict_get_f(got, i), rtol, atol;
    ict_tol(got->dtype, &rtol, &atol);
    if (isnan(want) || isinf(want))
        check_exact(got, i, want, what);
    else
        cr_assert(fabs(v - want) <= atol + rtol * fabs(want), "%s [%lld] (%s): got %.17g, want %.17g",
                  what, (long long)i, ic_dtype_name(got->dtype), v, want);
}

static void check_int(const ic_tensor *got, int64_t i, int64_t want, const char *what)
{
    int64_t v = ict_get_i(got, i);
    cr_assert_eq(v, want, "%s [%lld] (%s): got %lld, want %lld", what, (long long)i,
                 ic_dtype_name(got->dtype), (long long)v, (long long)want);
}

static void check_meta(const ic_tensor *t, ic_dtype dt, int rank, const int64_t *shape, const char *what)
{
    cr_assert_eq(t->dtype, dt, "%s: dtype %s, want %s", what, ic_dtype_name(t->dtype), ic_dtype_name(dt));
    cr_assert_eq(t->rank, rank, "%s: rank %d, want %d", what, t->rank, rank);
    for (int i = 0; i < rank; i++)
        cr_assert_eq(t->shape[i], shape[i], "%s: dim %d is %lld, want %lld", what, i,
                     (long long)t->shape[i], (long long)shape[i]);
}

/* ---- unary ---- */

static double r_neg(double x) { return -x; }
static double r_rsqrt(double x) { return 1 / sqrt(x); }
static double r_sigmoid(double x) { return 1 / (1 + exp(-x)); }
static double r_relu(double x) { return isnan(x) ? x : x > 0 ? x : 0; }
static double r_silu(double x) { return x * r_sigmoid(x); }
static double r_recip(double x) { return 1 / x; }
static double r_gelu(double x) { return 0.5 * x * (1 + erf(x / sqrt(2.0))); }
static double r_gelu_tanh(double x)
{
    return 0.5 * x * (1 + tanh(sqrt(2 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
}

static double r_sign(double x) { return (x > 0) - (x < 0); }
static double r_hardsigmoid(double x) { return isnan(x) ? x : x <= -3 ? 0 : x >= 3 ? 1 : (x + 3) / 6; }
static double r_hardswish(double x) { return x * r_hardsigmoid(x); }
static double r_leaky_relu(double x) { return x > 0 ? x : x * (double)0.01f; }
static double r_softplus(double x) { return x > 20 ? x : log(1 + exp(x)); }

typedef struct {
    ic_op op;
    double (*f)(double);
    bool exact;       /* a single correctly rounded step: must match bit for bit */
    int approximate;  /* gelu */
} unop;

static const unop FLOAT_UNARY[] = {
    { IC_OP_NEG, r_neg, true, 0 }, { IC_OP_ABS, fabs, true, 0 }, { IC_OP_EXP, exp, false, 0 },
    { IC_OP_LOG, log, false, 0 }, { IC_OP_SQRT, sqrt, true, 0 }, { IC_OP_RSQRT, r_rsqrt, false, 0 },
    { IC_OP_SIN, sin, false, 0 }, { IC_OP_COS, cos, false, 0 }, { IC_OP_TANH, tanh, false, 0 },
    { IC_OP_SIGMOID, r_sigmoid, false, 0 }, { IC_OP_RELU, r_relu, true, 0 },
    { IC_OP_SILU, r_silu, false, 0 }, { IC_OP_ERF, erf, false, 0 },
    { IC_OP_RECIPROCAL, r_recip, true, 0 }, { IC_OP_FLOOR, floor, true, 0 },
    { IC_OP_CEIL, ceil, true, 0 }, { IC_OP_GELU, r_gelu, false, 0 },
    { IC_OP_GELU, r_gelu_tanh, false, 1 }, { IC_OP_LOG1P, log1p, false, 0 },
    { IC_OP_EXPM1, expm1, false, 0 }, { IC_OP_SIGN, r_sign, true, 0 },
    { IC_OP_ROUND, rint, true, 0 }, { IC_OP_HARDSWISH, r_hardswish, false, 0 },
    { IC_OP_HARDSIGMOID, r_hardsigmoid, false, 0 }, { IC_OP_LEAKY_RELU, r_leaky_relu, false, 0 },
    { IC_OP_SOFTPLUS, r_softplus, false, 0 },
};

static const double XS[] = { -3.25, -1.5, -1, -0.5, -0.0, 0, 0.375, 0.5, 1, 1.75, 2.5, 4,
                             NAN, INFINITY, -INFINITY };
#define NXS ((int)(sizeof XS / sizeof XS[0]))

Test(ref_pointwise, unary_float_ops_every_float_dtype)
{
    ic_ctx *c = ict_ctx();
    for (size_t d = 0; d < 4; d++) {
        ic_dtype dt = FLOATS[d];
        ic_tensor x = vec(c, dt, NXS, XS);
        for (size_t k = 0; k < sizeof FLOAT_UNARY / sizeof FLOAT_UNARY[0]; k++) {
            const unop *u = &FLOAT_UNARY[k];
            ic_attrs at;
            ic_attrs_init(&at, u->op);
            at.approximate = u->approximate;
            ic_tensor y = run1(c, u->op, T(&x), &at);
            int64_t sh[1] = { NXS };
            check_meta(&y, dt, 1, sh, ic_op_name(u->op));
            for (int i = 0; i < NXS; i++) {
                /* computed in f32 (f64 for f64), then stored in dt */
                double want = q_as(dt, dt == IC_F64 ? u->f(XS[i]) : (float)u->f(XS[i]));
                char what[64];
                snprintf(what, sizeof what, "%s(%g)%s", ic_op_name(u->op), XS[i], u->approximate ? " tanh" : "");
                if (u->exact)
                    check_exact(&y, i, want, what);
                else
                    check_close(&y, i, want, what);
            }
            ic_tensor_free(c, &y);
        }
        ic_tensor_free(c, &x);
    }
    ic_ctx_destroy(c);
}

Test(ref_pointwise, unary_float_ops_on_integers_give_f32)
{
    ic_ctx *c = ict_ctx();
    static const double xs[] = { -3, -1, 0, 1, 2, 5 };
    const ic_dtype dts[] = { IC_I32, IC_I64, IC_BOOL };
    const ic_op ops[] = { IC_OP_EXP, IC_OP_LOG, IC_OP_SQRT, IC_OP_RSQRT, IC_OP_SIN, IC_OP_COS,
                          IC_OP_TANH, IC_OP_SIGMOID, IC_OP_ERF, IC_OP_RECIPROCAL, IC_OP_LOG1P,
                          IC_OP_EXPM1 };
    double (*fs[])(double) = { exp, log, sqrt, r_rsqrt, sin, cos, tanh, r_sigmoid, erf, r_recip,
                               log1p, expm1 };
    for (int d = 0; d < 3; d++) {
        ic_tensor x = vec(c, dts[d], 6, xs);
        for (int k = 0; k < 12; k++) {
            ic_tensor y = run1(c, ops[k], T(&x), NULL);
            int64_t sh[1] = { 6 };
            check_meta(&y, IC_F32, 1, sh, ic_op_name(ops[k]));
            for (int i = 0; i < 6; i++) {
                double xv = dts[d] == IC_BOOL ? (xs[i] != 0) : xs[i];
                check_close(&y, i, (float)fs[k](xv), ic_op_name(ops[k]));
            }
            ic_tensor_free(c, &y);
        }
        ic_tensor_free(c, &x);
    }
    ic_ctx_destroy(c);
}

Test(ref_pointwise, unary_integer_ops_are_exact_and_wrap)
{
    ic_ctx *c = ict_ctx();
    for (int d = 0; d < 2; d++) {
        ic_dtype dt = INTS[d];
        int64_t lo = dt == IC_I32 ? INT32_MIN : INT64_MIN, hi = dt == IC_I32 ? INT32_MAX : INT64_MAX;
        int64_t xs[] = { lo, lo + 1, -7, -1, 0, 1, 9, hi };
        ic_tensor x = veci(c, dt, 8, xs);
        const ic_op ops[] = { IC_OP_NEG, IC_OP_ABS, IC_OP_RELU, IC_OP_FLOOR, IC_OP_CEIL,
                              IC_OP_ROUND, IC_OP_SIGN };
        for (int k = 0; k < 7; k++) {
            ic_tensor y = run1(c, ops[k], T(&x), NULL);
            cr_assert_eq(y.dtype, dt, "%s keeps %s", ic_op_name(ops[k]), ic_dtype_name(dt));
            for (int i = 0; i < 8; i++) {
                int64_t v = xs[i], want;
                switch (ops[k]) {
                /* -min wraps to min in two's complement, as PyTorch's integer neg/abs */
                case IC_OP_NEG: want = v == lo ? lo : -v; break;
                case IC_OP_ABS: want = v == lo ? lo : v < 0 ? -v : v; break;
                case IC_OP_RELU: want = v > 0 ? v : 0; break;
                case IC_OP_SIGN: want = (v > 0) - (v < 0); break;
                default: want = v; break;
                }
                check_int(&y, i, want, ic_op_name(ops[k]));
            }
            ic_tensor_free(c, &y);
        }
        ic_tensor_free(c, &x);
    }
    ic_ctx_destroy(c);
}

Test(ref_pointwise, round_halves_to_even_and_sign_of_zero_nan_bool)
{
    ic_ctx *c = ict_ctx();
    static const double xs[] = { 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, 8388609, -0.0, NAN };
    static const double rounded[] = { 0, 2, 2, -0.0, -2, -2, 0, 8388609, -0.0, NAN };
    ic_tensor x = vec(c, IC_F32, 10, xs);
    ic_tensor y = run1(c, IC_OP_ROUND, T(&x), NULL), sg = run1(c, IC_OP_SIGN, T(&x), NULL);
    for (int i = 0; i < 10; i++) {
        check_exact(&y, i, rounded[i], "round");
        cr_assert_eq(signbit(ict_get_f(&y, i)), signbit(rounded[i]), "round(%g) keeps the sign", xs[i]);
    }
    check_exact(&sg, 8, 0, "sign(-0)");
    cr_assert(!signbit(ict_get_f(&sg, 8)), "sign(-0) is +0, as in PyTorch");
    check_exact(&sg, 9, 0, "sign(NaN)");
    int64_t bs[] = { 1, 0 };
    ic_tensor b = veci(c, IC_BOOL, 2, bs), bsg = run1(c, IC_OP_SIGN, T(&b), NULL);
    cr_assert_eq(bsg.dtype, IC_BOOL, "sign of bool is bool");
    check_int(&bsg, 0, 1, "sign(true)");
    check_int(&bsg, 1, 0, "sign(false)");
    ic_tensor *ts[] = { &x, &y, &sg, &b, &bsg };
    for (int i = 0; i < 5; i++)
        ic_tensor_free(c, ts[i]);
    ic_ctx_destroy(c);
}

Test(ref_pointwise, remainder_has_the_divisors_sign)
{
    ic_ctx *c = ict_ctx();
    static const double a[] = { 5, -5, 5, -5, -6, 6, 7.5, 1, NAN, INFINITY, 5, -5, 1e10, -0.0 };
    static const double b[] = { 3, 3, -3, -3, 3, -3, 2, 0, 1, 1, INFINITY, INFINITY, 3, 2 };
    static const double want[] = { 2, 1, -1, -2, -0.0, 0, 1.5, NAN, NAN, NAN, 5, INFINITY, 1, -0.0 };
    for (int d = 0; d < 2; d++) {
        ic_tensor x = vec(c, FLOATS[d], 14, a), z = vec(c, FLOATS[d], 14, b);
        ic_tensor y = run2(c, IC_OP_REMAINDER, T(&x), T(&z));
        for (int i = 0; i < 14; i++) {
            check_exact(&y, i, want[i], "remainder");
            if (want[i] == 0)
                cr_assert_eq(signbit(ict_get_f(&y, i)), signbit(want[i]), "remainder(%g, %g): fmod's zero",
                             a[i], b[i]);
        }
        ic_tensor_free(c, &x), ic_tensor_free(c, &z), ic_tensor_free(c, &y);
    }
    int64_t ia[] = { 5, -5, 5, -5, 0, INT64_MIN, 7 }, ib[] = { 3, 3, -3, -3, 5, -1, 1 };
    int64_t iw[] = { 2, 1, -1, -2, 0, 0, 0 };
    ic_tensor x = veci(c, IC_I64, 7, ia), z = veci(c, IC_I64, 7, ib);
    ic_tensor y = run2(c, IC_OP_REMAINDER, T(&x), T(&z));
    cr_assert_eq(y.dtype, IC_I64);
    for (int i = 0; i < 7; i++)
        check_int(&y, i, iw[i], "remainder i64");
    ic_tensor_free(c, &y);
    y = run2(c, IC_OP_REMAINDER, T(&x), NI(-4)); /* Python's -5 % -4 == -1, 5 % -4 == -3 */
    check_int(&y, 0, -3, "5 % -4");
    check_int(&y, 1, -1, "-5 % -4");
    ic_tensor_free(c, &y);
    ic_tensor_free(c, &z);
    int64_t zs[] = { 1, 1, 1, 0, 1, 1, 1 };
    z = veci(c, IC_I64, 7, zs);
    opnd in[2] = { T(&x), T(&z) };
    ict_assert_error(c, try_op(c, IC_OP_REMAINDER, 2, in, NULL, &y), IC_EINVAL, "'y' (remainder)",
                     "remainder by zero");
    ic_tensor_free(c, &x), ic_tensor_free(c, &z);
    ic_ctx_destroy(c);
}

Test(ref_pointwise, leaky_relu_and_softplus_attrs)
{
    ic_ctx *c = ict_ctx();
    static const double xs[] = { -2, -0.0, 0.5, 4.9, 5.1, NAN };
    ic_tensor x = vec(c, IC_F64, 6, xs);
    ic_attrs at;
    ic_attrs_init(&at, IC_OP_LEAKY_RELU);
    cr_assert_eq(at.negative_slope, 0.01);
    at.negative_slope = 0.25;
    ic_tensor y = run1(c, IC_OP_LEAKY_RELU, T(&x), &at);
    check_exact(&y, 0, -0.5, "leaky_relu(-2)");
    cr_assert(signbit(ict_get_f(&y, 1)), "leaky_relu(-0) is -0");
    check_exact(&y, 5, NAN, "leaky_relu(NaN)");
    ic_tensor_free(c, &y);
    ic_attrs_init(&at, IC_OP_SOFTPLUS);
    cr_assert(at.beta == 1 && at.threshold == 20, "softplus defaults");
    at.beta = 2, at.threshold = 10;
    y = run1(c, IC_OP_SOFTPLUS, T(&x), &at);
    for (int i = 0; i < 6; i++) /* linear where x * beta > threshold */
        check_close(&y, i, xs[i] * 2 > 10 ? xs[i] : log1p(exp(2 * xs[i])) / 2, "softplus");
    ic_tensor_free(c, &y);
    ic_tensor_free(c, &x);
    ic_ctx_destroy(c);
}

Test(ref_pointwise, logical_not_every_dtype)
{
    ic_ctx *c = ict_ctx();
    static const double xs[] = { 0, -0.0, 1, -2, 0.5, NAN };
    const ic_dtype all[] = { IC_F32, IC_F64, IC_F16, IC_BF16, IC_I32, IC_I64, IC_BOOL };
    for (int d = 0; d < 7; d++) {
        int n = ic_dtype_is_float(all[d]) ? 6 : 4;
        double v[6];
        for (int i = 0; i < n; i++)
            v[i] = ic_dtype_is_float(all[d]) ? xs[i] : all[d] == IC_BOOL ? (xs[i] != 0) : trunc(xs[i]);
        ic_tensor x = vec(c, all[d], n, v);
        ic_tensor y = run1(c, IC_OP_LOGICAL_NOT, T(&x), NULL);
        cr_assert_eq(y.dtype, IC_BOOL);
        for (int i = 0; i < n; i++)
            check_int(&y, i, !(v[i] != 0), "logical_not"); /* NaN is true, so not NaN is false */
        ic_tensor_free(c, &x);
        ic_tensor_free(c, &y);
    }
    ic_ctx_destroy(c);
}

static double r_clamp(double x, bool hmin, double mn, bool hmax, double mx)
{
    if (isnan(x))
        return x;
    if (hmin && x < mn)
        x = mn;
    if (hmax && x > mx)
        x = mx;
    return x;
}

Test(ref_pointwise, clamp_floats_bounds_nan_and_min_above_max)
{
    ic_ctx *c = ict_ctx();
    struct { bool hmin; double mn; bool hmax; double mx; } cases[] = {
        { true, -1, true, 2 }, { true, 0.1, false, 0 }, { false, 0, true, -0.5 },
        { true, 3, true, 1 }, /* min > max: everything becomes max, as in PyTorch */
    };
    for (int d = 0; d < 4; d++) {
        ic_dtype dt = FLOATS[d];
        ic_tensor x = vec(c, dt, NXS, XS);
        for (int k = 0; k < 4; k++) {
            ic_attrs at;
            ic_attrs_init(&at, IC_OP_CLAMP);
            at.has_min = cases[k].hmin;
            at.min = ic_scalar_f(cases[k].mn).scalar;
            at.has_max = cases[k].hmax;
            at.max = ic_scalar_f(cases[k].mx).scalar;
            ic_tensor y = run1(c, IC_OP_CLAMP, T(&x), &at);
            cr_assert_eq(y.dtype, dt);
            /* bounds are numbers of the tensor's dtype */
            double mn = q_as(dt, cases[k].mn), mx = q_as(dt, cases[k].mx);
            for (int i = 0; i < NXS; i++)
                check_exact(&y, i, r_clamp(XS[i], cases[k].hmin, mn, cases[k].hmax, mx), "clamp");
            ic_tensor_free(c, &y);
        }
        ic_tensor_free(c, &x);
    }
    ic_ctx_destroy(c);
}

Test(ref_pointwise, clamp_integers_and_float_bounds_promote)
{
    ic_ctx *c = ict_ctx();
    int64_t xs[] = { -100, -3, 0, 4, 70000 };
    for (int d = 0; d < 2; d++) {
        ic_tensor x = veci(c, INTS[d], 5, xs);
        ic_attrs at;
        ic_attrs_init(&at, IC_OP_CLAMP);
        at.has_min = at.has_max = true;
        at.min = ic_scalar_i(-3).scalar;
        at.max = ic_scalar_i(5).scalar;
        ic_tensor y = run1(c, IC_OP_CLAMP, T(&x), &at);
        cr_assert_eq(y.dtype, INTS[d]);
        for (int i = 0; i < 5; i++)
            check_int(&y, i, xs[i] < -3 ? -3 : xs[i] > 5 ? 5 : xs[i], "clamp int");
        ic_tensor_free(c, &y);
        /* a float bound makes the result float, as torch.clamp(int_tensor, 0.5) */
        at.min = ic_scalar_f(-2.5).scalar;
        at.max = ic_scalar_f(4.5).scalar;
        y = run1(c, IC_OP_CLAMP, T(&x), &at);
        cr_assert_eq(y.dtype, IC_F32, "clamp with float bounds gives %s", ic_dtype_name(y.dtype));
        for (int i = 0; i < 5; i++)
            check_exact(&y, i, r_clamp((double)xs[i], true, -2.5, true, 4.5), "clamp int/float");
        ic_tensor_free(c, &y);
        ic_tensor_free(c, &x);
    }
    ic_ctx_destroy(c);
}

/* What cast gives for a value v already of dtype src (PyTorch: float -> int truncates toward
 * zero, anything -> bool is "nonzero", bool -> 0/1, int -> float rounds once). */
static double r_cast(double v, ic_dtype dst)
{
    if (dst == IC_BOOL)
        return v != 0;
    if (dst == IC_I32 || dst == IC_I64)
        return trunc(v);
    return q_as(dst, v);
}

Test(ref_pointwise, cast_every_dtype_pair)
{
    ic_ctx *c = ict_ctx();
    static const double xs[] = { -2.75, -1, -0.5, 0, 0.5, 1, 3.5, 300, 1e5 };
    const ic_dtype all[] = { IC_F32, IC_F64, IC_F16, IC_BF16, IC_I32, IC_I64, IC_BOOL };
    for (int s = 0; s < 7; s++) {
        ic_dtype src = all[s];
        double v[9];
        int n = 9;
        for (int i = 0; i < n; i++) {
            double x = xs[i];
            if (src == IC_BOOL)
                x = x != 0;
            else if (!ic_dtype_is_float(src))
                x = trunc(x);
            else
                x = q_as(src, x); /* 1e5 overflows f16 to inf */
            v[i] = x;
        }
        ic_tensor x = vec(c, src, n, v);
        for (int d = 0; d < 7; d++) {
            ic_dtype dst = all[d];
            ic_attrs at;
            ic_attrs_init(&at, IC_OP_CAST);
            at.has_dtype = true;
            at.dtype = dst;
            ic_tensor y = run1(c, IC_OP_CAST, T(&x), &at);
            cr_assert_eq(y.dtype, dst);
            for (int i = 0; i < n; i++) {
                char what[64];
                snprintf(what, sizeof what, "cast %s %g -> %s", ic_dtype_name(src), v[i], ic_dtype_name(dst));
                if (isinf(v[i]) && !ic_dtype_is_float(dst) && dst != IC_BOOL)
                    continue; /* inf -> int is undefined in PyTorch too */
                if (ic_dtype_is_float(dst))
                    check_exact(&y, i, r_cast(v[i], dst), what);
                else
                    check_int(&y, i, (int64_t)r_cast(v[i], dst), what);
            }
            ic_tensor_free(c, &y);
        }
        ic_tensor_free(c, &x);
    }
    ic_ctx_destroy(c);
}

Test(ref_pointwise, cast_nan_and_large_integers)
{
    ic_ctx *c = ict_ctx();
    double nan1[1] = { NAN };
    ic_tensor x = vec(c, IC_F32, 1, nan1);
    ic_attrs at;
    ic_attrs_init(&at, IC_OP_CAST);
    at.has_dtype = true;
    at.dtype = IC_BOOL;
    ic_tensor y = run1(c, IC_OP_CAST, T(&x), &at);
    check_int(&y, 0, 1, "NaN -> bool is true");
    ic_tensor_free(c, &y);
    ic_tensor_free(c, &x);
    /* 2^53 + 1 is exact in i64; to f32 it must round once (to 2^53), to f64 it is a tie
     * that rounds to even (2^53) too; 2^62 + 2^38 + 1 rounds up to 2^62 + 2^39 in f32 */
    int64_t big[3] = { (1LL << 53) + 1, (1LL << 62) + (1LL << 38) + 1, -((1LL << 24) + 1) };
    x = veci(c, IC_I64, 3, big);
    at.dtype = IC_F32;
    y = run1(c, IC_OP_CAST, T(&x), &at);
    check_exact(&y, 0, 0x1p53, "i64 -> f32");
    check_exact(&y, 1, 0x1p62 + 0x1p39, "i64 -> f32 round up");
    check_exact(&y, 2, -0x1p24, "i64 -> f32 tie to even");
    ic_tensor_free(c, &y);
    at.dtype = IC_I32; /* i64 -> i32 keeps the low 32 bits */
    y = run1(c, IC_OP_CAST, T(&x), &at);
    check_int(&y, 0, 1, "i64 -> i32 wraps");
    check_int(&y, 2, -((1LL << 24) + 1), "i64 -> i32 in range");
    ic_tensor_free(c, &y);
    ic_tensor_free(c, &x);
    ic_ctx_destroy(c);
}

/* ---- binary ---- */

static double r_max(double a, double b) { return isnan(a) || isnan(b) ? NAN : a > b ? a : b; }
static double r_min(double a, double b) { return isnan(a) || isnan(b) ? NAN : a < b ? a : b; }

static double r_binary(ic_op op, double a, double b)
{
    switch (op) {
    case IC_OP_ADD: return a + b;
    case IC_OP_SUB: return a - b;
    case IC_OP_MUL: return a * b;
    case IC_OP_DIV: return a / b;
    case IC_OP_POW: return pow(a, b);
    case IC_OP_MAXIMUM: return r_max(a, b);
    case IC_OP_MINIMUM: return r_min(a, b);
    case IC_OP_EQ: return a == b;
    case IC_OP_NE: return a != b;
    case IC_OP_LT: return a < b;
    case IC_OP_LE: return a <= b;
    case IC_OP_GT: return a > b;
    case IC_OP_GE: return a >= b;
    case IC_OP_LOGICAL_AND: return (a != 0) && (b != 0);
    default: return (a != 0) || (b != 0);
    }
}

static bool is_predicate(ic_op op) { return op >= IC_OP_EQ && op <= IC_OP_LOGICAL_OR; }

static const ic_op BINARY[] = { IC_OP_ADD, IC_OP_SUB, IC_OP_MUL, IC_OP_DIV, IC_OP_POW, IC_OP_MAXIMUM,
                                IC_OP_MINIMUM, IC_OP_EQ, IC_OP_NE, IC_OP_LT, IC_OP_LE, IC_OP_GT,
                                IC_OP_GE, IC_OP_LOGICAL_AND, IC_OP_LOGICAL_OR };
#define NBINARY ((int)(sizeof BINARY / sizeof BINARY[0]))

Test(ref_pointwise, binary_ops_every_float_dtype)
{
    ic_ctx *c = ict_ctx();
    static const double A[] = { -2.5, -1, -0.0, 0, 0.5, 1.5, 3, NAN, INFINITY, -INFINITY, 1, 7 };
    static const double B[] = { 2, -0.5, 0, -0.0, 1.5, 1.5, -4, 1, INFINITY, 2, NAN, 0.1 };
    for (int d = 0; d < 4; d++) {
        ic_dtype dt = FLOATS[d];
        double qa[12], qb[12];
        for (int i = 0; i < 12; i++)
            qa[i] = q_as(dt, A[i]), qb[i] = q_as(dt, B[i]);
        ic_tensor a = vec(c, dt, 12, qa), b = vec(c, dt, 12, qb);
        for (int k = 0; k < NBINARY; k++) {
            ic_op op = BINARY[k];
            ic_tensor y = run2(c, op, T(&a), T(&b));
            cr_assert_eq(y.dtype, is_predicate(op) ? IC_BOOL : dt, "%s on %s gives %s", ic_op_name(op),
                         ic_dtype_name(dt), ic_dtype_name(y.dtype));
            for (int i = 0; i < 12; i++) {
                char what[64];
                snprintf(what, sizeof what, "%s(%g, %g)", ic_op_name(op), qa[i], qb[i]);
                double r = r_binary(op, qa[i], qb[i]);
                if (is_predicate(op))
                    check_int(&y, i, (int64_t)r, what);
                else if (op == IC_OP_POW)
                    check_close(&y, i, q_as(dt, dt == IC_F64 ? r : (float)r), what);
                else /* + - * / max min round once: bit exact */
                    check_exact(&y, i, q_as(dt, dt == IC_F64 ? r : (float)r), what);
            }
            ic_tensor_free(c, &y);
        }
        ic_tensor_free(c, &a);
        ic_tensor_free(c, &b);
    }
    ic_ctx_destroy(c);
}

/* PyTorch's integer pow: repeated multiplication; a negative exponent gives 1 for base 1,
 * +-1 for base -1, and 0 otherwise. */
static int64_t r_ipow(int64_t a, int64_t b)
{
    if (b < 0)
        return a == 1 ? 1 : a == -1 ? (b % 2 ? -1 : 1) : 0;
    int64_t r = 1;
    for (int64_t i = 0; i < b; i++)
        r *= a;
    return r;
}

Test(ref_pointwise, binary_ops_integers)
{
    ic_ctx *c = ict_ctx();
    static const int64_t A[] = { -7, -1, 0, 1, 5, 100, 3, -1, 0, 2, 12 };
    static const int64_t B[] = { 3, -1, 0, 2, 5, -100, 4, -3, 1, 30, -5 };
    for (int d = 0; d < 2; d++) {
        ic_dtype dt = INTS[d];
        ic_tensor a = veci(c, dt, 11, A), b = veci(c, dt, 11, B);
        for (int k = 0; k < NBINARY; k++) {
            ic_op op = BINARY[k];
            ic_tensor y = run2(c, op, T(&a), T(&b));
            ic_dtype want_dt = is_predicate(op) ? IC_BOOL : op == IC_OP_DIV ? IC_F32 : dt;
            cr_assert_eq(y.dtype, want_dt, "%s on %s gives %s", ic_op_name(op), ic_dtype_name(dt),
                         ic_dtype_name(y.dtype));
            for (int i = 0; i < 11; i++) {
                char what[64];
                snprintf(what, sizeof what, "%s(%lld, %lld)", ic_op_name(op), (long long)A[i], (long long)B[i]);
                if (op == IC_OP_DIV) /* true division in f32 */
                    check_exact(&y, i, (float)((double)(float)A[i] / (double)(float)B[i]), what);
                else if (op == IC_OP_POW)
                    check_int(&y, i, r_ipow(A[i], B[i]), what);
                else
                    check_int(&y, i, (int64_t)r_binary(op, (double)A[i], (double)B[i]), what);
            }
            ic_tensor_free(c, &y);
        }
        ic_tensor_free(c, &a);
        ic_tensor_free(c, &b);
    }
    ic_ctx_destroy(c);
}

Test(ref_pointwise, binary_ops_bool)
{
    ic_ctx *c = ict_ctx();
    static const int64_t A[] = { 0, 0, 1, 1 }, B[] = { 0, 1, 0, 1 };
    ic_tensor a = veci(c, IC_BOOL, 4, A), b = veci(c, IC_BOOL, 4, B);
    const ic_op ops[] = { IC_OP_ADD, IC_OP_MUL, IC_OP_MAXIMUM, IC_OP_MINIMUM, IC_OP_EQ, IC_OP_NE,
                          IC_OP_LT, IC_OP_LE, IC_OP_GT, IC_OP_GE, IC_OP_LOGICAL_AND, IC_OP_LOGICAL_OR };
    for (int k = 0; k < 12; k++) {
        ic_tensor y = run2(c, ops[k], T(&a), T(&b));
        cr_assert_eq(y.dtype, IC_BOOL, "%s on bool", ic_op_name(ops[k]));
        for (int i = 0; i < 4; i++) {
            /* bool + bool is "or", bool * bool is "and" (results are stored as bool) */
            double r = r_binary(ops[k], (double)A[i], (double)B[i]);
            check_int(&y, i, r != 0, ic_op_name(ops[k]));
        }
        ic_tensor_free(c, &y);
    }
    ic_tensor y = run2(c, IC_OP_DIV, T(&a), T(&b));
    cr_assert_eq(y.dtype, IC_F32);
    for (int i = 0; i < 4; i++)
        check_exact(&y, i, (double)A[i] / (double)B[i], "bool / bool");
    ic_tensor_free(c, &y);
    ic_tensor_free(c, &a);
    ic_tensor_free(c, &b);
    ic_ctx_destroy(c);
}

Test(ref_pointwise, i64_add_is_exact_near_2_pow_62_and_wraps)
{
    ic_ctx *c = ict_ctx();
    int64_t A[] = { (1LL << 62) + 1, (1LL << 53) + 1, INT64_MAX, INT64_MIN, 3037000499LL, -(1LL << 62) };
    int64_t B[] = { (1LL << 53) + 1, (1LL << 53) + 2, 1, -1, 3037000499LL, -(1LL << 62) };
    ic_tensor a = veci(c, IC_I64, 6, A), b = veci(c, IC_I64, 6, B);
    ic_tensor y = run2(c, IC_OP_ADD, T(&a), T(&b));
    check_int(&y, 0, (1LL << 62) + (1LL << 53) + 2, "2^62+1 + 2^53+1");
    check_int(&y, 1, (1LL << 54) + 3, "2^53+1 + 2^53+2");
    check_int(&y, 2, INT64_MIN, "INT64_MAX + 1 wraps");
    check_int(&y, 3, INT64_MAX, "INT64_MIN - 1 wraps");
    check_int(&y, 5, INT64_MIN, "-2^62 + -2^62");
    ic_tensor_free(c, &y);
    y = run2(c, IC_OP_MUL, T(&a), T(&b));
    check_int(&y, 4, 9223372030926249001LL, "3037000499^2");
    ic_tensor_free(c, &y);
    y = run2(c, IC_OP_SUB, T(&a), T(&b));
    check_int(&y, 0, (1LL << 62) - (1LL << 53), "2^62+1 - (2^53+1)");
    ic_tensor_free(c, &y);
    /* a number operand stays exact too */
    y = run2(c, IC_OP_ADD, T(&a), NI((1LL << 53) + 1));
    check_int(&y, 1, (1LL << 54) + 2, "2^53+1 + number 2^53+1");
    ic_tensor_free(c, &y);
    ic_tensor_free(c, &a);
    ic_tensor_free(c, &b);
    /* i32 wraps as PyTorch's int32 */
    int64_t A32[] = { INT32_MAX, INT32_MIN, 65536 };
    int64_t B32[] = { 1, -1, 65536 };
    a = veci(c, IC_I32, 3, A32);
    b = veci(c, IC_I32, 3, B32);
    y = run2(c, IC_OP_ADD, T(&a), T(&b));
    check_int(&y, 0, INT32_MIN, "INT32_MAX + 1");
    check_int(&y, 1, INT32_MAX, "INT32_MIN - 1");
    ic_tensor_free(c, &y);
    y = run2(c, IC_OP_MUL, T(&a), T(&b));
    check_int(&y, 2, 0, "65536 * 65536 wraps to 0 in i32");
    ic_tensor_free(c, &y);
    ic_tensor_free(c, &a);
    ic_tensor_free(c, &b);
    ic_ctx_destroy(c);
}

Test(ref_pointwise, pow_integers_negative_exponents)
{
    ic_ctx *c = ict_ctx();
    int64_t A[] = { 2, 1, -1, -1, 0, 3 }, B[] = { -1, -5, -3, -2, 2, 0 };
    ic_tensor a = veci(c, IC_I64, 6, A), b = veci(c, IC_I64, 6, B);
    ic_tensor y = run2(c, IC_OP_POW, T(&a), T(&b));
    int64_t want[] = { 0, 1, -1, 1, 0, 1 };
    for (int i = 0; i < 6; i++)
        check_int(&y, i, want[i], "int pow");
    ic_tensor_free(c, &y);
    /* an integer tensor raised to a negative integer number is an error in PyTorch */
    opnd in[2] = { T(&a), NI(-2) };
    ic_tensor out;
    ic_status s = try_op(c, IC_OP_POW, 2, in, NULL, &out);
    ict_assert_error(c, s, IC_EINVAL, "node 'y'", "pow", "negative");
    cr_assert_null(out.data, "no output on error");
    /* number base, tensor exponent; float exponent number makes it float */
    y = run2(c, IC_OP_POW, NI(2), T(&a));
    check_int(&y, 0, 4, "2 ** 2");
    check_int(&y, 1, 2, "2 ** 1");
    check_int(&y, 4, 1, "2 ** 0");
    ic_tensor_free(c, &y);
    y = run2(c, IC_OP_POW, T(&a), NF(0.5));
    cr_assert_eq(y.dtype, IC_F32);
    check_close(&y, 0, (float)sqrt(2.0), "2 ** 0.5");
    check_exact(&y, 2, NAN, "(-1) ** 0.5");
    ic_tensor_free(c, &y);
    ic_tensor_free(c, &a);
    ic_tensor_free(c, &b);
    ic_ctx_destroy(c);
}

Test(ref_pointwise, promotion_between_dtypes_and_numbers)
{
    ic_ctx *c = ict_ctx();
    static const double v[] = { 1.5, -2, 3 };
    static const double iv[] = { 1, -2, 3 };
    struct { ic_dtype a, b; ic_dtype want; } pairs[] = {
        { IC_I32, IC_F16, IC_F16 }, { IC_F16, IC_BF16, IC_F32 }, { IC_I32, IC_I64, IC_I64 },
        { IC_BOOL, IC_I32, IC_I32 }, { IC_F32, IC_F64, IC_F64 }, { IC_I64, IC_BF16, IC_BF16 },
        { IC_BOOL, IC_F16, IC_F16 },
    };
    for (int k = 0; k < 7; k++) {
        double va[3], vb[3];
        for (int i = 0; i < 3; i++) {
            va[i] = ic_dtype_is_float(pairs[k].a) ? v[i] : pairs[k].a == IC_BOOL ? (iv[i] > 0) : iv[i];
            vb[i] = ic_dtype_is_float(pairs[k].b) ? v[i] : pairs[k].b == IC_BOOL ? (iv[i] > 0) : iv[i];
        }
        ic_tensor a = vec(c, pairs[k].a, 3, va), b = vec(c, pairs[k].b, 3, vb);
        ic_tensor y = run2(c, IC_OP_MUL, T(&a), T(&b));
        cr_assert_eq(y.dtype, pairs[k].want, "%s * %s gives %s, want %s", ic_dtype_name(pairs[k].a),
                     ic_dtype_name(pairs[k].b), ic_dtype_name(y.dtype), ic_dtype_name(pairs[k].want));
        for (int i = 0; i < 3; i++)
            check_exact(&y, i, va[i] * vb[i], "promoted mul");
        ic_tensor_free(c, &y);
        ic_tensor_free(c, &a);
        ic_tensor_free(c, &b);
    }
    /* numbers: a float number lifts integer tensors to f32, an int number keeps the
     * tensor's dtype (bool tensors go to i64); the number takes the result's precision */
    ic_tensor ti = vec(c, IC_I32, 3, iv), tb = vec(c, IC_BOOL, 3, (double[]){ 1, 0, 1 });
    ic_tensor th = vec(c, IC_F16, 3, v);
    ic_tensor y = run2(c, IC_OP_ADD, T(&ti), NF(0.5));
    cr_assert_eq(y.dtype, IC_F32);
    check_exact(&y, 1, -1.5, "i32 + 0.5");
    ic_tensor_free(c, &y);
    y = run2(c, IC_OP_ADD, T(&ti), NI(2));
    cr_assert_eq(y.dtype, IC_I32);
    check_int(&y, 2, 5, "i32 + 2");
    ic_tensor_free(c, &y);
    y = run2(c, IC_OP_ADD, T(&tb), NI(1));
    cr_assert_eq(y.dtype, IC_I64);
    check_int(&y, 0, 2, "true + 1");
    ic_tensor_free(c, &y);
    y = run2(c, IC_OP_MUL, T(&th), NF(0.1));
    cr_assert_eq(y.dtype, IC_F16);
    for (int i = 0; i < 3; i++) /* 0.1 becomes f16(0.1) before multiplying */
        check_exact(&y, i, q_as(IC_F16, (float)(v[i] * q_as(IC_F16, 0.1))), "f16 * 0.1");
    ic_tensor_free(c, &y);
    y = run2(c, IC_OP_EQ, T(&th), NF(1.5));
    check_int(&y, 0, 1, "f16 == 1.5");
    check_int(&y, 1, 0, "f16 == 1.5");
    ic_tensor_free(c, &y);
    ic_tensor_free(c, &ti);
    ic_tensor_free(c, &tb);
    ic_tensor_free(c, &th);
    ic_ctx_destroy(c);
}

Test(ref_pointwise, numbers_on_either_side)
{
    ic_ctx *c = ict_ctx();
    static const double v[] = { 0.5, -2, 4 };
    ic_tensor x = vec(c, IC_F32, 3, v);
    ic_tensor y = run2(c, IC_OP_SUB, NF(1), T(&x));
    for (int i = 0; i < 3; i++)
        check_exact(&y, i, 1 - v[i], "1 - x");
    ic_tensor_free(c, &y);
    y = run2(c, IC_OP_DIV, NI(2), T(&x));
    for (int i = 0; i < 3; i++)
        check_exact(&y, i, 2 / v[i], "2 / x");
    ic_tensor_free(c, &y);
    y = run2(c, IC_OP_POW, NF(2), T(&x));
    for (int i = 0; i < 3; i++)
        check_close(&y, i, pow(2, v[i]), "2 ** x");
    ic_tensor_free(c, &y);
    y = run2(c, IC_OP_LT, T(&x), NI(0));
    for (int i = 0; i < 3; i++)
        check_int(&y, i, v[i] < 0, "x < 0");
    ic_tensor_free(c, &y);
    y = run2(c, IC_OP_MAXIMUM, NF(NAN), T(&x));
    for (int i = 0; i < 3; i++)
        check_exact(&y, i, NAN, "maximum(nan, x)");
    ic_tensor_free(c, &y);
    ic_tensor_free(c, &x);
    ic_ctx_destroy(c);
}

Test(ref_pointwise, broadcasting_shapes)
{
    ic_ctx *c = ict_ctx();
    /* [3,1] + [1,4] -> [3,4] */
    int64_t s31[2] = { 3, 1 }, s14[2] = { 1, 4 };
    ic_tensor a = tnew(c, IC_F32, 2, s31), b = tnew(c, IC_F32, 2, s14);
    for (int i = 0; i < 3; i++)
        ic_tensor_set(&a, i, 10 * (i + 1));
    for (int j = 0; j < 4; j++)
        ic_tensor_set(&b, j, j + 0.5);
    ic_tensor y = run2(c, IC_OP_ADD, T(&a), T(&b));
    int64_t s34[2] = { 3, 4 };
    check_meta(&y, IC_F32, 2, s34, "[3,1]+[1,4]");
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++)
            check_exact(&y, i * 4 + j, 10 * (i + 1) + j + 0.5, "[3,1]+[1,4]");
    ic_tensor_free(c, &y);
    /* [] tensor * [3,1] */
    ic_tensor s = tnew(c, IC_F32, 0, NULL);
    ic_tensor_set(&s, 0, -2);
    y = run2(c, IC_OP_MUL, T(&s), T(&a));
    int64_t s31b[2] = { 3, 1 };
    check_meta(&y, IC_F32, 2, s31b, "[] * [3,1]");
    for (int i = 0; i < 3; i++)
        check_exact(&y, i, -20.0 * (i + 1), "[] * [3,1]");
    ic_tensor_free(c, &y);
    /* [] op [] is [] */
    y = run2(c, IC_OP_SUB, T(&s), T(&s));
    check_meta(&y, IC_F32, 0, NULL, "[] - []");
    check_exact(&y, 0, 0, "[] - []");
    ic_tensor_free(c, &y);
    /* [2,1,3] vs [4,1] -> [2,4,3] (rank-extended) */
    int64_t s213[3] = { 2, 1, 3 }, s41[2] = { 4, 1 };
    ic_tensor p = tnew(c, IC_I64, 3, s213), q = tnew(c, IC_I64, 2, s41);
    for (int i = 0; i < 6; i++)
        put_i(&p, i, i * 100);
    for (int i = 0; i < 4; i++)
        put_i(&q, i, i);
    y = run2(c, IC_OP_SUB, T(&p), T(&q));
    int64_t s243[3] = { 2, 4, 3 };
    check_meta(&y, IC_I64, 3, s243, "[2,1,3]-[4,1]");
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 4; j++)
            for (int k = 0; k < 3; k++)
                check_int(&y, (i * 4 + j) * 3 + k, (i * 3 + k) * 100 - j, "[2,1,3]-[4,1]");
    ic_tensor_free(c, &y);
    ic_tensor_free(c, &p);
    ic_tensor_free(c, &q);
    ic_tensor_free(c, &a);
    ic_tensor_free(c, &b);
    ic_tensor_free(c, &s);
    ic_ctx_destroy(c);
}

Test(ref_pointwise, odd_sizes_0_1_3)
{
    ic_ctx *c = ict_ctx();
    int64_t sizes[3] = { 0, 1, 3 };
    for (int k = 0; k < 3; k++) {
        int64_t sh[2] = { 2, sizes[k] };
        ic_tensor x = tnew(c, IC_F64, 2, sh);
        for (int64_t i = 0; i < 2 * sizes[k]; i++)
            ic_tensor_set(&x, i, (double)i - 1.25);
        ic_tensor y = run2(c, IC_OP_MUL, T(&x), NF(4));
        check_meta(&y, IC_F64, 2, sh, "size");
        for (int64_t i = 0; i < 2 * sizes[k]; i++)
            check_exact(&y, i, ((double)i - 1.25) * 4, "x * 4");
        ic_tensor_free(c, &y);
        y = run1(c, IC_OP_EXP, T(&x), NULL);
        check_meta(&y, IC_F64, 2, sh, "exp size");
        ic_tensor_free(c, &y);
        ic_tensor_free(c, &x);
    }
    /* [0,3] + [1,3] broadcasts to [0,3] */
    int64_t s03[2] = { 0, 3 }, s13[2] = { 1, 3 };
    ic_tensor e = tnew(c, IC_F32, 2, s03), r = tnew(c, IC_F32, 2, s13);
    ic_tensor y = run2(c, IC_OP_ADD, T(&e), T(&r));
    check_meta(&y, IC_F32, 2, s03, "[0,3]+[1,3]");
    ic_tensor_free(c, &y);
    ic_tensor_free(c, &e);
    ic_tensor_free(c, &r);
    ic_ctx_destroy(c);
}

Test(ref_pointwise, one_million_and_three_elements)
{
    ic_ctx *c = ict_ctx();
    const int64_t n = 1000003;
    int64_t sh[1] = { n }, one[1] = { 1 };
    ic_tensor x = tnew(c, IC_F32, 1, sh), b = tnew(c, IC_F32, 1, one);
    float *xd = x.data;
    for (int64_t i = 0; i < n; i++)
        xd[i] = (float)(i % 1013) * 0.25f - 100.0f;
    ic_tensor_set(&b, 0, 0.5);
    ic_tensor y = run2(c, IC_OP_ADD, T(&x), T(&b));
    check_meta(&y, IC_F32, 1, sh, "1000003");
    const float *yd = y.data;
    for (int64_t i = 0; i < n; i++)
        if (yd[i] != xd[i] + 0.5f)
            cr_assert_fail("[%lld]: got %.9g, want %.9g", (long long)i, yd[i], xd[i] + 0.5f);
    ic_tensor_free(c, &y);
    y = run1(c, IC_OP_RELU, T(&x), NULL);
    yd = y.data;
    for (int64_t i = 0; i < n; i++)
        if (yd[i] != (xd[i] > 0 ? xd[i] : 0))
            cr_assert_fail("relu [%lld]: got %.9g for %.9g", (long long)i, yd[i], xd[i]);
    ic_tensor_free(c, &y);
    ic_tensor_free(c, &x);
    ic_tensor_free(c, &b);
    ic_ctx_destroy(c);
}

Test(ref_pointwise, strided_arguments)
{
    ic_ctx *c = ict_ctx();
    /* base is [3,4] row-major; the argument is its transpose [4,3] with strides [1,4] */
    int64_t s34[2] = { 3, 4 };
    ic_tensor base = tnew(c, IC_F32, 2, s34);
    for (int i = 0; i < 12; i++)
        ((float *)base.data)[i] = (float)i;
    ic_tensor t = base;
    t.shape[0] = 4, t.shape[1] = 3, t.strides[0] = 1, t.strides[1] = 4;
    int64_t s3[1] = { 3 };
    ic_tensor row = tnew(c, IC_F32, 1, s3);
    for (int j = 0; j < 3; j++)
        ic_tensor_set(&row, j, 100 * (j + 1));
    ic_tensor y = run2(c, IC_OP_ADD, T(&t), T(&row));
    int64_t s43[2] = { 4, 3 };
    check_meta(&y, IC_F32, 2, s43, "transposed + row");
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++)
            check_exact(&y, i * 3 + j, (j * 4 + i) + 100 * (j + 1), "transposed + row");
    ic_tensor_free(c, &y);
    /* every other element of an 8-vector, and a [] view over element 5 */
    int64_t s8[1] = { 8 };
    ic_tensor v8 = tnew(c, IC_I64, 1, s8);
    for (int i = 0; i < 8; i++)
        put_i(&v8, i, i * i);
    ic_tensor ev = v8;
    ev.shape[0] = 4, ev.strides[0] = 2;
    y = run1(c, IC_OP_NEG, T(&ev), NULL);
    for (int i = 0; i < 4; i++)
        check_int(&y, i, -(2 * i) * (2 * i), "neg of stride-2 view");
    ic_tensor_free(c, &y);
    ic_tensor_free(c, &v8);
    ic_tensor_free(c, &row);
    ic_tensor_free(c, &base);
    ic_ctx_destroy(c);
}

Test(ref_pointwise, f16_bf16_round_to_nearest_even)
{
    ic_ctx *c = ict_ctx();
    /* f16 has 10 fraction bits: 1 + 2^-11 is halfway between 1 and 1 + 2^-10 -> 1 (even);
     * 1 + 3*2^-11 is halfway between 1 + 2^-10 and 1 + 2^-9 -> 1 + 2^-9 (even) */
    double one[3] = { 1, 1, 2048 };
    double h[3] = { 0x1p-11, 3 * 0x1p-11, 1 };
    ic_tensor a = vec(c, IC_F16, 3, one), b = vec(c, IC_F16, 3, h);
    ic_tensor y = run2(c, IC_OP_ADD, T(&a), T(&b));
    check_exact(&y, 0, 1.0, "f16 1 + 2^-11");
    check_exact(&y, 1, 1 + 0x1p-9, "f16 1 + 3*2^-11");
    check_exact(&y, 2, 2048, "f16 2048 + 1 (ulp 2, tie to even)");
    ic_tensor_free(c, &y);
    ic_tensor_free(c, &a);
    ic_tensor_free(c, &b);
    /* bf16 has 7 fraction bits */
    double bh[3] = { 0x1p-8, 3 * 0x1p-8, 1 };
    double bone[3] = { 1, 1, 256 };
    a = vec(c, IC_BF16, 3, bone);
    b = vec(c, IC_BF16, 3, bh);
    y = run2(c, IC_OP_ADD, T(&a), T(&b));
    check_exact(&y, 0, 1.0, "bf16 1 + 2^-8");
    check_exact(&y, 1, 1 + 0x1p-6, "bf16 1 + 3*2^-8");
    check_exact(&y, 2, 256, "bf16 256 + 1");
    ic_tensor_free(c, &y);
    ic_tensor_free(c, &a);
    ic_tensor_free(c, &b);
    /* overflow: 65504 + 16 is exactly halfway to 65536, which rounds (even) to infinity */
    double big[2] = { 65504, 65504 }, add[2] = { 8, 16 };
    a = vec(c, IC_F16, 2, big);
    b = vec(c, IC_F16, 2, add);
    y = run2(c, IC_OP_ADD, T(&a), T(&b));
    check_exact(&y, 0, 65504, "f16 65504 + 8");
    check_exact(&y, 1, INFINITY, "f16 65504 + 16");
    ic_tensor_free(c, &y);
    ic_tensor_free(c, &a);
    ic_tensor_free(c, &b);
    ic_ctx_destroy(c);
}

Test(ref_pointwise, nan_and_inf)
{
    ic_ctx *c = ict_ctx();
    double a[] = { NAN, 1, INFINITY, -INFINITY, 0, -1, 0 };
    double b[] = { 1, NAN, INFINITY, INFINITY, 0, 0, -1 };
    for (int d = 0; d < 4; d++) {
        ic_tensor ta = vec(c, FLOATS[d], 7, a), tb = vec(c, FLOATS[d], 7, b);
        ic_tensor y = run2(c, IC_OP_MAXIMUM, T(&ta), T(&tb));
        check_exact(&y, 0, NAN, "maximum(nan, 1)");
        check_exact(&y, 1, NAN, "maximum(1, nan)");
        ic_tensor_free(c, &y);
        y = run2(c, IC_OP_MINIMUM, T(&ta), T(&tb));
        check_exact(&y, 0, NAN, "minimum(nan, 1)");
        check_exact(&y, 1, NAN, "minimum(1, nan)");
        check_exact(&y, 3, -INFINITY, "minimum(-inf, inf)");
        ic_tensor_free(c, &y);
        y = run2(c, IC_OP_DIV, T(&ta), T(&tb));
        check_exact(&y, 2, NAN, "inf / inf");
        check_exact(&y, 4, NAN, "0 / 0");
        check_exact(&y, 5, -INFINITY, "-1 / 0");
        ic_tensor_free(c, &y);
        y = run2(c, IC_OP_SUB, T(&ta), T(&tb));
        check_exact(&y, 2, NAN, "inf - inf");
        ic_tensor_free(c, &y);
        y = run2(c, IC_OP_NE, T(&ta), T(&ta));
        check_int(&y, 0, 1, "nan != nan");
        check_int(&y, 1, 0, "1 != 1");
        ic_tensor_free(c, &y);
        y = run2(c, IC_OP_LOGICAL_AND, T(&ta), T(&tb));
        check_int(&y, 0, 1, "nan and 1 (nan is nonzero)");
        check_int(&y, 4, 0, "0 and 0");
        ic_tensor_free(c, &y);
        y = run1(c, IC_OP_LOG, T(&ta), NULL);
        check_exact(&y, 4, -INFINITY, "log(0)");
        check_exact(&y, 5, NAN, "log(-1)");
        check_exact(&y, 2, INFINITY, "log(inf)");
        ic_tensor_free(c, &y);
        y = run1(c, IC_OP_SIGMOID, T(&ta), NULL);
        check_exact(&y, 2, 1, "sigmoid(inf)");
        check_exact(&y, 3, 0, "sigmoid(-inf)");
        ic_tensor_free(c, &y);
        ic_tensor_free(c, &ta);
        ic_tensor_free(c, &tb);
    }
    ic_ctx_destroy(c);
}

/* ---- where ---- */

Test(ref_pointwise, where_every_dtype_and_broadcast)
{
    ic_ctx *c = ict_ctx();
    int64_t s31[2] = { 3, 1 }, s14[2] = { 1, 4 };
    const ic_dtype all[] = { IC_F32, IC_F64, IC_F16, IC_BF16, IC_I32, IC_I64, IC_BOOL };
    ic_tensor cond = tnew(c, IC_BOOL, 2, s31);
    int64_t cv[3] = { 1, 0, 1 };
    for (int i = 0; i < 3; i++)
        put_i(&cond, i, cv[i]);
    for (int d = 0; d < 7; d++) {
        ic_dtype dt = all[d];
        ic_tensor a = tnew(c, dt, 2, s14), b = tnew(c, dt, 2, s31);
        for (int j = 0; j < 4; j++)
            put_i(&a, j, dt == IC_BOOL ? j & 1 : j + 1);
        for (int i = 0; i < 3; i++)
            put_i(&b, i, dt == IC_BOOL ? 0 : -(i + 1));
        opnd in[3] = { T(&cond), T(&a), T(&b) };
        ic_tensor y = run_op(c, IC_OP_WHERE, 3, in, NULL);
        int64_t s34[2] = { 3, 4 };
        check_meta(&y, dt, 2, s34, "where");
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++) {
                int64_t av = dt == IC_BOOL ? j & 1 : j + 1, bv = dt == IC_BOOL ? 0 : -(i + 1);
                check_int(&y, i * 4 + j, cv[i] ? av : bv, "where");
            }
        ic_tensor_free(c, &y);
        ic_tensor_free(c, &a);
        ic_tensor_free(c, &b);
    }
    /* numbers as branches; an i32 tensor with a float number gives f32 */
    ic_tensor ti = tnew(c, IC_I32, 2, s14);
    for (int j = 0; j < 4; j++)
        put_i(&ti, j, 7 * j);
    opnd in[3] = { T(&cond), T(&ti), NF(0.25) };
    ic_tensor y = run_op(c, IC_OP_WHERE, 3, in, NULL);
    cr_assert_eq(y.dtype, IC_F32, "where(c, i32, 0.25) gives %s", ic_dtype_name(y.dtype));
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++)
            check_exact(&y, i * 4 + j, cv[i] ? 7 * j : 0.25, "where(c, i32, 0.25)");
    ic_tensor_free(c, &y);
    opnd in2[3] = { T(&cond), NI(5), NI(-5) };
    y = run_op(c, IC_OP_WHERE, 3, in2, NULL);
    check_meta(&y, IC_I64, 2, s31, "where(c, 5, -5)");
    for (int i = 0; i < 3; i++)
        check_int(&y, i, cv[i] ? 5 : -5, "where(c, 5, -5)");
    ic_tensor_free(c, &y);
    /* f16 with bf16 promotes to f32; values come through exactly */
    ic_tensor h = vec(c, IC_F16, 1, (double[]){ 0.1 }), bb = vec(c, IC_BF16, 1, (double[]){ 0.1 });
    opnd in3[3] = { T(&cond), T(&h), T(&bb) };
    y = run_op(c, IC_OP_WHERE, 3, in3, NULL);
    cr_assert_eq(y.dtype, IC_F32);
    check_exact(&y, 0, q_as(IC_F16, 0.1), "where f16 branch");
    check_exact(&y, 1, q_as(IC_BF16, 0.1), "where bf16 branch");
    ic_tensor_free(c, &y);
    ic_tensor_free(c, &h);
    ic_tensor_free(c, &bb);
    ic_tensor_free(c, &ti);
    ic_tensor_free(c, &cond);
    ic_ctx_destroy(c);
}

/* ---- argument errors ---- */

Test(ref_pointwise, argument_errors_name_the_input)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "errs");
    ic_value x = ict_input(g, "x", IC_F32, "2,3"), y;
    cr_assert_eq(ic_graph_binary(g, "y", IC_OP_ADD, ic_val(x), ic_scalar_f(1), &y), IC_OK);
    cr_assert_eq(ic_graph_add_output(g, y), IC_OK);
    int64_t s23[2] = { 2, 3 }, s32[2] = { 3, 2 }, s6[1] = { 6 };
    ic_tensor good = tnew(c, IC_F32, 2, s23), out[2];
    /* wrong dtype */
    ic_tensor bad = good;
    bad.dtype = IC_F64;
    ic_status s = ic_ref_run(c, g, NULL, 1, &bad, 1, out);
    ict_assert_error(c, s, IC_EDTYPE, "graph 'errs'", "'x'", "f64", "f32");
    cr_assert_null(out[0].data);
    /* wrong rank */
    ic_tensor r1;
    ic_tensor_init(&r1, IC_F32, 1, s6, good.data);
    s = ic_ref_run(c, g, NULL, 1, &r1, 1, out);
    ict_assert_error(c, s, IC_ESHAPE, "'x'", "rank 1");
    /* wrong size */
    ic_tensor ws;
    ic_tensor_init(&ws, IC_F32, 2, s32, good.data);
    s = ic_ref_run(c, g, NULL, 1, &ws, 1, out);
    ict_assert_error(c, s, IC_ESHAPE, "'x'", "[3, 2]", "dim 0");
    /* wrong counts */
    s = ic_ref_run(c, g, NULL, 0, NULL, 1, out);
    ict_assert_error(c, s, IC_EINVAL, "expects 1 argument");
    s = ic_ref_run(c, g, NULL, 1, &good, 2, out);
    ict_assert_error(c, s, IC_EINVAL, "1 outputs");
    cr_assert_null(out[0].data, "outs are zeroed on error");
    cr_assert_null(out[1].data, "outs are zeroed on error");
    /* no data */
    ic_tensor nd = good;
    nd.data = NULL;
    s = ic_ref_run(c, g, NULL, 1, &nd, 1, out);
    ict_assert_error(c, s, IC_EINVAL, "'x'", "no data");
    /* and the good one runs */
    s = ic_ref_run(c, g, NULL, 1, &good, 1, out);
    cr_assert_eq(s, IC_OK, "%s", ic_last_error(c));
    check_exact(&out[0], 5, 1, "0 + 1");
    ic_tensor_free(c, &out[0]);
    ic_tensor_free(c, &good);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}
