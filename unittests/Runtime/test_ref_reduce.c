/* test_ref_reduce.c - the reference executor's reductions (sum mean amax amin prod argmax):
 * every dtype each takes, every axis set with and without keepdim, negative dims, empty
 * and 0-d inputs, NaN, ties, integer exactness and large sizes. Expected values come from
 * plain loops here, accumulated in double (int64 for integers). */
#include <math.h>
#include <string.h>
#include <criterion/criterion.h>
#include "ic/ic.h"
#include "testutil.h"

/* Independent round to nearest even into a format with p significand bits (see
 * test_ref_pointwise.c); f16 and bf16 are reached through f32, as PyTorch stores them. */
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

static const ic_dtype ALL[] = { IC_F32, IC_F64, IC_F16, IC_BF16, IC_I32, IC_I64, IC_BOOL };

static ic_tensor tnew(ic_ctx *c, ic_dtype dt, int rank, const int64_t *shape)
{
    ic_tensor t;
    ic_tensor_init(&t, dt, rank, shape, NULL);
    cr_assert_eq(ic_tensor_alloc(c, &t), IC_OK, "alloc: %s", ic_last_error(c));
    return t;
}

static void put(ic_tensor *t, int64_t i, int64_t v)
{
    switch (t->dtype) {
    case IC_I32: ((int32_t *)t->data)[i] = (int32_t)v; break;
    case IC_I64: ((int64_t *)t->data)[i] = v; break;
    case IC_BOOL: ((uint8_t *)t->data)[i] = v != 0; break;
    default: ic_tensor_set(t, i, (double)v); break;
    }
}

/* Runs y = op(x) with attrs (dims/keepdim or dim) on the reference executor. */
static ic_status try_reduce(ic_ctx *c, ic_op op, const ic_tensor *x, const ic_attrs *at, ic_tensor *out)
{
    ic_graph *g = ict_graph(c, "reduce");
    ic_dim d[IC_MAX_RANK];
    for (int k = 0; k < x->rank; k++)
        d[k] = ic_dim_const(x->shape[k]);
    ic_value xv, y;
    cr_assert_eq(ic_graph_add_input(g, "x", x->dtype, x->rank, d, &xv), IC_OK, "%s", ic_last_error(c));
    ic_operand in = ic_val(xv);
    ic_status s = ic_graph_add_node(g, "y", op, 1, &in, at, &y);
    cr_assert_eq(s, IC_OK, "building %s: %s", ic_op_name(op), ic_last_error(c));
    cr_assert_eq(ic_graph_add_output(g, y), IC_OK);
    s = ic_ref_run(c, g, NULL, 1, x, 1, out);
    ic_graph_destroy(g);
    return s;
}

static ic_tensor reduce(ic_ctx *c, ic_op op, const ic_tensor *x, const ic_attrs *at)
{
    ic_tensor out;
    ic_status s = try_reduce(c, op, x, at, &out);
    cr_assert_eq(s, IC_OK, "running %s: %s", ic_op_name(op), ic_last_error(c));
    return out;
}

static ic_attrs dims_attrs(ic_op op, int n, const int64_t *dims, bool keepdim)
{
    ic_attrs at;
    ic_attrs_init(&at, op);
    at.has_dims = n > 0;
    at.ndims = n;
    for (int i = 0; i < n; i++)
        at.dims[i] = dims[i];
    at.keepdim = keepdim;
    return at;
}

static ic_attrs dim_attrs(int64_t dim, bool keepdim)
{
    ic_attrs at;
    ic_attrs_init(&at, IC_OP_ARGMAX);
    at.dim = dim;
    at.keepdim = keepdim;
    return at;
}

static void check_val(const ic_tensor *got, int64_t i, double want, const char *what)
{
    double v = ict_get_f(got, i), rtol, atol;
    ict_tol(got->dtype, &rtol, &atol);
    bool ok = isnan(want) ? isnan(v) : isinf(want) ? v == want : fabs(v - want) <= atol + rtol * fabs(want);
    cr_assert(ok, "%s [%lld] (%s): got %.17g, want %.17g", what, (long long)i,
              ic_dtype_name(got->dtype), v, want);
}

static void check_int(const ic_tensor *got, int64_t i, int64_t want, const char *what)
{
    int64_t v = ict_get_i(got, i);
    cr_assert_eq(v, want, "%s [%lld] (%s): got %lld, want %lld", what, (long long)i,
                 ic_dtype_name(got->dtype), (long long)v, (long long)want);
}

static void check_shape(const ic_tensor *t, ic_dtype dt, int rank, const int64_t *shape, const char *what)
{
    cr_assert_eq(t->dtype, dt, "%s: dtype %s, want %s", what, ic_dtype_name(t->dtype), ic_dtype_name(dt));
    cr_assert_eq(t->rank, rank, "%s: rank %d, want %d", what, t->rank, rank);
    for (int i = 0; i < rank; i++)
        cr_assert_eq(t->shape[i], shape[i], "%s: dim %d is %lld, want %lld", what, i,
                     (long long)t->shape[i], (long long)shape[i]);
}

/* ---- a [2,3,4] input and every axis set ---- */

#define D0 2
#define D1 3
#define D2 4

/* Value at (i,j,k): small integers with repeats and signs, so that every dtype holds them
 * exactly and products stay small; bool gets a pattern with both values. */
static int64_t val_at(ic_dtype dt, int i, int j, int k)
{
    if (dt == IC_BOOL)
        return (i + 2 * j + k) % 3 != 0;
    static const int pat[] = { 3, -1, 2, 2, -2, 1, 0, 4, 1, -3, 2, 1 };
    return pat[(j * D2 + k) % 12] + (i ? 1 : 0) * ((k % 2) ? -1 : 1);
}

/* The expected reduction of the [2,3,4] input over mask (bit per dim), by plain loops:
 * out[o] for the kept coordinates in row-major order. */
static void expect_reduce(ic_op op, ic_dtype dt, unsigned mask, double *want, int64_t *nout)
{
    int ext[3] = { D0, D1, D2 }, n = 1;
    for (int d = 0; d < 3; d++)
        if (!(mask & (1u << d)))
            n *= ext[d];
    *nout = n;
    for (int o = 0; o < n; o++) {
        double acc = op == IC_OP_PROD ? 1 : op == IC_OP_AMAX ? -INFINITY : op == IC_OP_AMIN ? INFINITY : 0;
        int cnt = 0;
        for (int i = 0; i < D0; i++)
            for (int j = 0; j < D1; j++)
                for (int k = 0; k < D2; k++) {
                    /* row-major index over the kept dims */
                    int oi = 0;
                    int cs[3] = { i, j, k };
                    for (int d = 0; d < 3; d++)
                        if (!(mask & (1u << d)))
                            oi = oi * ext[d] + cs[d];
                    if (oi != o)
                        continue;
                    double v = (double)val_at(dt, i, j, k);
                    cnt++;
                    if (op == IC_OP_SUM || op == IC_OP_MEAN)
                        acc += v;
                    else if (op == IC_OP_PROD)
                        acc *= v;
                    else if (op == IC_OP_AMAX)
                        acc = v > acc ? v : acc;
                    else
                        acc = v < acc ? v : acc;
                }
        want[o] = op == IC_OP_MEAN ? acc / cnt : acc;
    }
}

static ic_tensor input_234(ic_ctx *c, ic_dtype dt)
{
    int64_t sh[3] = { D0, D1, D2 };
    ic_tensor x = tnew(c, dt, 3, sh);
    for (int i = 0; i < D0; i++)
        for (int j = 0; j < D1; j++)
            for (int k = 0; k < D2; k++)
                put(&x, (i * D1 + j) * D2 + k, val_at(dt, i, j, k));
    return x;
}

static bool takes(ic_op op, ic_dtype dt)
{
    if (op == IC_OP_MEAN)
        return ic_dtype_is_float(dt);
    if (op == IC_OP_ARGMAX)
        return dt != IC_BOOL;
    return true;
}

static ic_dtype result_dtype(ic_op op, ic_dtype dt)
{
    if ((op == IC_OP_SUM || op == IC_OP_PROD) && !ic_dtype_is_float(dt))
        return IC_I64;
    return op == IC_OP_ARGMAX ? IC_I64 : dt;
}

/* dims lists (with negative dims) and the mask each means for rank 3 */
static const struct { int n; int64_t dims[3]; unsigned mask; } AXES[] = {
    { 0, { 0 }, 7 }, { 1, { 0 }, 1 }, { 1, { 1 }, 2 }, { 1, { 2 }, 4 }, { 1, { -1 }, 4 },
    { 2, { 0, 2 }, 5 }, { 2, { -3, -1 }, 5 }, { 2, { 2, -2 }, 6 }, { 3, { 0, 1, 2 }, 7 },
    { 3, { -1, 0, 1 }, 7 },
};

Test(ref_reduce, every_reduction_dtype_axes_keepdim)
{
    ic_ctx *c = ict_ctx();
    const ic_op ops[] = { IC_OP_SUM, IC_OP_MEAN, IC_OP_AMAX, IC_OP_AMIN, IC_OP_PROD };
    for (int d = 0; d < 7; d++) {
        ic_dtype dt = ALL[d];
        ic_tensor x = input_234(c, dt);
        for (int k = 0; k < 5; k++) {
            ic_op op = ops[k];
            if (!takes(op, dt))
                continue;
            for (size_t a = 0; a < sizeof AXES / sizeof AXES[0]; a++)
                for (int keep = 0; keep < 2; keep++) {
                    ic_attrs at = dims_attrs(op, AXES[a].n, AXES[a].dims, keep);
                    ic_tensor y = reduce(c, op, &x, &at);
                    int64_t sh[3], ext[3] = { D0, D1, D2 };
                    int r = 0;
                    for (int q = 0; q < 3; q++)
                        if (!(AXES[a].mask & (1u << q)))
                            sh[r++] = ext[q];
                        else if (keep)
                            sh[r++] = 1;
                    char what[96];
                    snprintf(what, sizeof what, "%s %s axes#%zu keepdim=%d", ic_op_name(op),
                             ic_dtype_name(dt), a, keep);
                    check_shape(&y, result_dtype(op, dt), r, sh, what);
                    double want[24];
                    int64_t nout;
                    expect_reduce(op, dt, AXES[a].mask, want, &nout);
                    for (int64_t o = 0; o < nout; o++) {
                        if (ic_dtype_is_float(y.dtype))
                            check_val(&y, o, q_as(y.dtype, dt == IC_F64 ? want[o] : (float)want[o]), what);
                        else
                            check_int(&y, o, (int64_t)want[o], what);
                    }
                    ic_tensor_free(c, &y);
                }
        }
        ic_tensor_free(c, &x);
    }
    ic_ctx_destroy(c);
}

Test(ref_reduce, argmax_every_dtype_and_dim)
{
    ic_ctx *c = ict_ctx();
    for (int d = 0; d < 7; d++) {
        ic_dtype dt = ALL[d];
        if (!takes(IC_OP_ARGMAX, dt))
            continue;
        ic_tensor x = input_234(c, dt);
        for (int dim = -3; dim < 3; dim++)
            for (int keep = 0; keep < 2; keep++) {
                ic_attrs at = dim_attrs(dim, keep);
                ic_tensor y = reduce(c, IC_OP_ARGMAX, &x, &at);
                int ax = dim < 0 ? dim + 3 : dim;
                int64_t ext[3] = { D0, D1, D2 }, sh[3];
                int r = 0;
                for (int q = 0; q < 3; q++)
                    if (q != ax)
                        sh[r++] = ext[q];
                    else if (keep)
                        sh[r++] = 1;
                char what[64];
                snprintf(what, sizeof what, "argmax %s dim=%d keepdim=%d", ic_dtype_name(dt), dim, keep);
                check_shape(&y, IC_I64, r, sh, what);
                /* first index of the largest value along ax */
                int o = 0;
                for (int i = 0; i < (ax == 0 ? 1 : D0); i++)
                    for (int j = 0; j < (ax == 1 ? 1 : D1); j++)
                        for (int k = 0; k < (ax == 2 ? 1 : D2); k++, o++) {
                            int best = 0;
                            int64_t bv = 0;
                            for (int t = 0; t < ext[ax]; t++) {
                                int cs[3] = { i, j, k };
                                cs[ax] = t;
                                int64_t v = val_at(dt, cs[0], cs[1], cs[2]);
                                if (t == 0 || v > bv)
                                    best = t, bv = v;
                            }
                            check_int(&y, o, best, what);
                        }
                ic_tensor_free(c, &y);
            }
        ic_tensor_free(c, &x);
    }
    ic_ctx_destroy(c);
}

Test(ref_reduce, argmax_ties_nan_and_rank0)
{
    ic_ctx *c = ict_ctx();
    int64_t s6[1] = { 6 };
    ic_tensor x = tnew(c, IC_F32, 1, s6);
    double v[6] = { 1, 5, 2, 5, NAN, NAN };
    for (int i = 0; i < 6; i++)
        ic_tensor_set(&x, i, v[i]);
    ic_attrs at = dim_attrs(0, false);
    ic_tensor y = reduce(c, IC_OP_ARGMAX, &x, &at);
    check_int(&y, 0, 4, "argmax: NaN counts as the max, first one wins");
    ic_tensor_free(c, &y);
    x.shape[0] = 4; /* [1, 5, 2, 5]: a tie */
    y = reduce(c, IC_OP_ARGMAX, &x, &at);
    check_int(&y, 0, 1, "argmax tie -> first index");
    ic_tensor_free(c, &y);
    x.shape[0] = 6;
    ic_tensor_free(c, &x);
    /* integers: the smallest int64 values still compare right */
    ic_tensor xi = tnew(c, IC_I64, 1, s6);
    int64_t iv[6] = { INT64_MIN, INT64_MIN + 1, INT64_MIN, -5, -5, -6 };
    for (int i = 0; i < 6; i++)
        put(&xi, i, iv[i]);
    y = reduce(c, IC_OP_ARGMAX, &xi, &at);
    check_int(&y, 0, 3, "argmax i64");
    ic_tensor_free(c, &y);
    ic_tensor_free(c, &xi);
    /* a 0-d input: argmax is 0, the others return the value itself */
    ic_tensor s = tnew(c, IC_F32, 0, NULL);
    ic_tensor_set(&s, 0, -2.5);
    at = dim_attrs(-1, false);
    y = reduce(c, IC_OP_ARGMAX, &s, &at);
    check_shape(&y, IC_I64, 0, NULL, "argmax of []");
    check_int(&y, 0, 0, "argmax of []");
    ic_tensor_free(c, &y);
    const ic_op ops[] = { IC_OP_SUM, IC_OP_MEAN, IC_OP_AMAX, IC_OP_AMIN, IC_OP_PROD };
    for (int k = 0; k < 5; k++) {
        ic_attrs a = dims_attrs(ops[k], 0, NULL, false);
        y = reduce(c, ops[k], &s, &a);
        check_shape(&y, IC_F32, 0, NULL, ic_op_name(ops[k]));
        check_val(&y, 0, -2.5, ic_op_name(ops[k]));
        ic_tensor_free(c, &y);
    }
    ic_tensor_free(c, &s);
    ic_ctx_destroy(c);
}

Test(ref_reduce, nan_and_inf_propagate)
{
    ic_ctx *c = ict_ctx();
    const ic_dtype fl[] = { IC_F32, IC_F64, IC_F16, IC_BF16 };
    int64_t s23[2] = { 2, 3 };
    for (int d = 0; d < 4; d++) {
        ic_tensor x = tnew(c, fl[d], 2, s23);
        double v[6] = { 1, NAN, -3, INFINITY, -INFINITY, 2 };
        for (int i = 0; i < 6; i++)
            ic_tensor_set(&x, i, v[i]);
        int64_t last[1] = { -1 };
        ic_attrs at = dims_attrs(IC_OP_AMAX, 1, last, false);
        ic_tensor y = reduce(c, IC_OP_AMAX, &x, &at);
        check_val(&y, 0, NAN, "amax row with NaN");
        check_val(&y, 1, INFINITY, "amax row 2");
        ic_tensor_free(c, &y);
        y = reduce(c, IC_OP_AMIN, &x, &at);
        check_val(&y, 0, NAN, "amin row with NaN");
        check_val(&y, 1, -INFINITY, "amin row 2");
        ic_tensor_free(c, &y);
        y = reduce(c, IC_OP_SUM, &x, &at);
        check_val(&y, 0, NAN, "sum with NaN");
        check_val(&y, 1, NAN, "inf + -inf");
        ic_tensor_free(c, &y);
        int64_t first[1] = { 0 };
        at = dims_attrs(IC_OP_PROD, 1, first, true);
        y = reduce(c, IC_OP_PROD, &x, &at);
        int64_t s13[2] = { 1, 3 };
        check_shape(&y, fl[d], 2, s13, "prod dim 0 keepdim");
        check_val(&y, 0, INFINITY, "1 * inf");
        check_val(&y, 1, NAN, "nan * -inf");
        check_val(&y, 2, -6, "-3 * 2");
        ic_tensor_free(c, &y);
        ic_tensor_free(c, &x);
    }
    ic_ctx_destroy(c);
}

Test(ref_reduce, empty_reductions)
{
    ic_ctx *c = ict_ctx();
    int64_t s30[2] = { 3, 0 };
    for (int d = 0; d < 7; d++) {
        ic_dtype dt = ALL[d];
        ic_tensor x = tnew(c, dt, 2, s30);
        int64_t last[1] = { -1 };
        const ic_op ops[] = { IC_OP_SUM, IC_OP_PROD, IC_OP_MEAN };
        for (int k = 0; k < 3; k++) {
            if (!takes(ops[k], dt))
                continue;
            for (int keep = 0; keep < 2; keep++) {
                ic_attrs at = dims_attrs(ops[k], 1, last, keep);
                ic_tensor y = reduce(c, ops[k], &x, &at);
                int64_t sh[2] = { 3, 1 };
                check_shape(&y, result_dtype(ops[k], dt), keep ? 2 : 1, sh, ic_op_name(ops[k]));
                /* empty sum 0, empty product 1, empty mean 0/0 = NaN */
                double want = ops[k] == IC_OP_SUM ? 0 : ops[k] == IC_OP_PROD ? 1 : NAN;
                for (int i = 0; i < 3; i++)
                    check_val(&y, i, want, ic_op_name(ops[k]));
                ic_tensor_free(c, &y);
            }
            /* over everything: a 0-d result */
            ic_attrs all = dims_attrs(ops[k], 0, NULL, false);
            ic_tensor y = reduce(c, ops[k], &x, &all);
            check_shape(&y, result_dtype(ops[k], dt), 0, NULL, "empty full reduction");
            check_val(&y, 0, ops[k] == IC_OP_SUM ? 0 : ops[k] == IC_OP_PROD ? 1 : NAN, ic_op_name(ops[k]));
            ic_tensor_free(c, &y);
        }
        /* reducing the non-empty dim of [3,0] gives [0] */
        int64_t first[1] = { 0 };
        ic_attrs at = dims_attrs(IC_OP_SUM, 1, first, false);
        ic_tensor y = reduce(c, IC_OP_SUM, &x, &at);
        int64_t s0[1] = { 0 };
        check_shape(&y, result_dtype(IC_OP_SUM, dt), 1, s0, "sum dim 0 of [3,0]");
        ic_tensor_free(c, &y);
        ic_tensor_free(c, &x);
    }
    ic_ctx_destroy(c);
}

Test(ref_reduce, integer_sums_are_exact_int64)
{
    ic_ctx *c = ict_ctx();
    int64_t s5[1] = { 5 };
    ic_tensor x = tnew(c, IC_I64, 1, s5);
    int64_t v[5] = { 1LL << 62, (1LL << 62) - 1, -(1LL << 62), 3, (1LL << 53) + 1 };
    for (int i = 0; i < 5; i++)
        put(&x, i, v[i]);
    ic_attrs at = dims_attrs(IC_OP_SUM, 0, NULL, false);
    ic_tensor y = reduce(c, IC_OP_SUM, &x, &at);
    /* a double accumulator would lose the low bits here */
    check_int(&y, 0, (1LL << 62) + (1LL << 53) + 3, "exact i64 sum");
    ic_tensor_free(c, &y);
    ic_tensor_free(c, &x);
    /* i32 sums and products go to i64 without wrapping at 32 bits */
    ic_tensor x32 = tnew(c, IC_I32, 1, s5);
    int64_t w[5] = { INT32_MAX, INT32_MAX, 100000, 100000, -1 };
    for (int i = 0; i < 5; i++)
        put(&x32, i, w[i]);
    y = reduce(c, IC_OP_SUM, &x32, &at);
    check_shape(&y, IC_I64, 0, NULL, "sum i32");
    check_int(&y, 0, 2LL * INT32_MAX + 200000 - 1, "sum i32 in i64");
    ic_tensor_free(c, &y);
    x32.shape[0] = 2;
    x32.data = (int32_t *)x32.data + 2; /* a view of [100000, 100000] */
    at = dims_attrs(IC_OP_PROD, 0, NULL, false);
    y = reduce(c, IC_OP_PROD, &x32, &at);
    check_int(&y, 0, 10000000000LL, "prod i32 in i64");
    ic_tensor_free(c, &y);
    x32.data = (int32_t *)x32.data - 2;
    ic_tensor_free(c, &x32);
    /* bool sums count the true values */
    int64_t s7[1] = { 7 };
    ic_tensor b = tnew(c, IC_BOOL, 1, s7);
    for (int i = 0; i < 7; i++)
        put(&b, i, i % 3 != 1);
    at = dims_attrs(IC_OP_SUM, 0, NULL, false);
    y = reduce(c, IC_OP_SUM, &b, &at);
    check_shape(&y, IC_I64, 0, NULL, "sum bool");
    check_int(&y, 0, 5, "sum of bools");
    ic_tensor_free(c, &y);
    ic_tensor_free(c, &b);
    ic_ctx_destroy(c);
}

Test(ref_reduce, f16_bf16_accumulate_wide)
{
    ic_ctx *c = ict_ctx();
    /* 4096 ones: an f16 accumulator would stop at 2048 (2048 + 1 rounds back to 2048) */
    int64_t n[1] = { 4096 };
    ic_tensor x = tnew(c, IC_F16, 1, n);
    for (int i = 0; i < 4096; i++)
        ic_tensor_set(&x, i, 1.0);
    ic_attrs at = dims_attrs(IC_OP_SUM, 0, NULL, false);
    ic_tensor y = reduce(c, IC_OP_SUM, &x, &at);
    cr_assert_eq(ict_get_f(&y, 0), 4096.0, "f16 sum of 4096 ones: got %g", ict_get_f(&y, 0));
    ic_tensor_free(c, &y);
    ic_tensor_free(c, &x);
    /* 3000 values of bf16(0.1): sum and mean rounded once at the end */
    int64_t m[1] = { 3000 };
    const ic_dtype dts[2] = { IC_F16, IC_BF16 };
    for (int d = 0; d < 2; d++) {
        x = tnew(c, dts[d], 1, m);
        double tenth = q_as(dts[d], 0.1);
        for (int i = 0; i < 3000; i++)
            ic_tensor_set(&x, i, tenth);
        y = reduce(c, IC_OP_SUM, &x, &at);
        double want = q_as(dts[d], (float)(3000 * tenth));
        cr_assert_eq(ict_get_f(&y, 0), want, "%s sum: got %.9g, want %.9g", ic_dtype_name(dts[d]),
                     ict_get_f(&y, 0), want);
        ic_tensor_free(c, &y);
        at = dims_attrs(IC_OP_MEAN, 0, NULL, false);
        y = reduce(c, IC_OP_MEAN, &x, &at);
        want = q_as(dts[d], (float)(3000 * tenth / 3000));
        cr_assert_eq(ict_get_f(&y, 0), want, "%s mean: got %.9g, want %.9g", ic_dtype_name(dts[d]),
                     ict_get_f(&y, 0), want);
        ic_tensor_free(c, &y);
        at = dims_attrs(IC_OP_SUM, 0, NULL, false);
        ic_tensor_free(c, &x);
    }
    ic_ctx_destroy(c);
}

Test(ref_reduce, one_million_and_three_elements)
{
    ic_ctx *c = ict_ctx();
    const int64_t n = 1000003;
    int64_t sh[1] = { n };
    ic_tensor x = tnew(c, IC_F32, 1, sh);
    float *xd = x.data;
    for (int64_t i = 0; i < n; i++)
        xd[i] = (float)(i % 7) - 3.0f; /* each 7 sum to 0; the last 4 are -3 -2 -1 0 */
    ic_attrs at = dims_attrs(IC_OP_SUM, 0, NULL, false);
    ic_tensor y = reduce(c, IC_OP_SUM, &x, &at);
    check_val(&y, 0, -6, "sum of 1000003");
    ic_tensor_free(c, &y);
    at = dims_attrs(IC_OP_MEAN, 0, NULL, false);
    y = reduce(c, IC_OP_MEAN, &x, &at);
    check_val(&y, 0, (float)(-6.0 / 1000003), "mean of 1000003");
    ic_tensor_free(c, &y);
    at = dim_attrs(0, false);
    xd[777777] = 3.5f;
    y = reduce(c, IC_OP_ARGMAX, &x, &at);
    check_int(&y, 0, 777777, "argmax of 1000003");
    ic_tensor_free(c, &y);
    /* as [1000003, 1] reduced over dim 1: a million one-element rows */
    ic_tensor x2 = x;
    int64_t sh2[2] = { n, 1 };
    ic_tensor_init(&x2, IC_F32, 2, sh2, x.data);
    int64_t one[1] = { 1 };
    at = dims_attrs(IC_OP_AMAX, 1, one, false);
    y = reduce(c, IC_OP_AMAX, &x2, &at);
    for (int64_t i = 0; i < n; i++)
        if (((float *)y.data)[i] != xd[i])
            cr_assert_fail("amax row %lld: got %g, want %g", (long long)i, ((float *)y.data)[i], xd[i]);
    ic_tensor_free(c, &y);
    ic_tensor_free(c, &x);
    ic_ctx_destroy(c);
}

Test(ref_reduce, strided_argument)
{
    ic_ctx *c = ict_ctx();
    /* a [3,2] transposed view of a [2,3] buffer, summed over dim 1 */
    int64_t s23[2] = { 2, 3 };
    ic_tensor base = tnew(c, IC_F64, 2, s23);
    for (int i = 0; i < 6; i++)
        ic_tensor_set(&base, i, i * 1.5);
    ic_tensor t = base;
    t.shape[0] = 3, t.shape[1] = 2, t.strides[0] = 1, t.strides[1] = 3;
    int64_t one[1] = { 1 };
    ic_attrs at = dims_attrs(IC_OP_SUM, 1, one, false);
    ic_tensor y = reduce(c, IC_OP_SUM, &t, &at);
    for (int j = 0; j < 3; j++) /* row j of the view is column j of base */
        check_val(&y, j, j * 1.5 + (3 + j) * 1.5, "sum of transposed rows");
    ic_tensor_free(c, &y);
    ic_tensor_free(c, &base);
    ic_ctx_destroy(c);
}
