/* test_ref_graph.c - the reference executor on whole graphs: the seed pattern
 * ((a + b1) + c) * b2 + b3 in f32/f16/bf16 against plain C loops, outputs that repeat or
 * are inputs/params, long chains (intermediates freed early), symbolic dims bound from
 * arguments, argument binding, and errors in the middle of a graph. */
#include <math.h>
#include <string.h>
#include <criterion/criterion.h>
#include "ic/ic.h"
#include "testutil.h"

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

/* x stored in dt after an f32 computation (independent of the library's conversions). */
static double q_as(ic_dtype dt, double x)
{
    switch (dt) {
    case IC_F64: return x;
    case IC_F32: return (float)x;
    case IC_F16: return round_fmt((float)x, 11, -14, 65504);
    default: return round_fmt((float)x, 8, -126, 0x1.fep127);
    }
}

static ic_tensor tnew(ic_ctx *c, ic_dtype dt, int rank, const int64_t *shape)
{
    ic_tensor t;
    ic_tensor_init(&t, dt, rank, shape, NULL);
    cr_assert_eq(ic_tensor_alloc(c, &t), IC_OK, "alloc: %s", ic_last_error(c));
    return t;
}

static ic_value node2(ic_graph *g, const char *name, ic_op op, ic_operand a, ic_operand b)
{
    ic_value v;
    ic_status s = ic_graph_binary(g, name, op, a, b, &v);
    cr_assert_eq(s, IC_OK, "node %s: %s", name, ic_last_error(ic_graph_ctx(g)));
    return v;
}

static void out(ic_graph *g, ic_value v)
{
    cr_assert_eq(ic_graph_add_output(g, v), IC_OK, "%s", ic_last_error(ic_graph_ctx(g)));
}

static void check_shape(const ic_tensor *t, ic_dtype dt, int rank, const int64_t *shape, const char *what)
{
    cr_assert_eq(t->dtype, dt, "%s: dtype %s, want %s", what, ic_dtype_name(t->dtype), ic_dtype_name(dt));
    cr_assert_eq(t->rank, rank, "%s: rank %d, want %d", what, t->rank, rank);
    for (int i = 0; i < rank; i++)
        cr_assert_eq(t->shape[i], shape[i], "%s: dim %d is %lld, want %lld", what, i,
                     (long long)t->shape[i], (long long)shape[i]);
}

/* ---- the seed pattern ---- */

/* Inputs a, b1, c, b2, b3 (b's [1,8]) and y = ((a + b1) + c) * b2 + b3. */
static ic_graph *seed_graph(ic_ctx *c, ic_dtype dt)
{
    ic_graph *g = ict_graph(c, "seed_pattern");
    ic_value a = ict_input(g, "a", dt, "16,8"), b1 = ict_input(g, "b1", dt, "1,8");
    ic_value cc = ict_input(g, "c", dt, "16,8"), b2 = ict_input(g, "b2", dt, "1,8");
    ic_value b3 = ict_input(g, "b3", dt, "1,8");
    ic_value t0 = node2(g, "t0", IC_OP_ADD, ic_val(a), ic_val(b1));
    ic_value t1 = node2(g, "t1", IC_OP_ADD, ic_val(t0), ic_val(cc));
    ic_value t2 = node2(g, "t2", IC_OP_MUL, ic_val(t1), ic_val(b2));
    out(g, node2(g, "y", IC_OP_ADD, ic_val(t2), ic_val(b3)));
    return g;
}

/* Deterministic test data in [-2, 2) on a 1/64 grid (exact in every float dtype). */
static double data_at(int which, int64_t i)
{
    return (double)((i * 37 + which * 11) % 256) / 64.0 - 2.0;
}

static void run_seed(ic_dtype dt)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = seed_graph(c, dt);
    int64_t big[2] = { 16, 8 }, row[2] = { 1, 8 };
    ic_tensor args[5];
    for (int k = 0; k < 5; k++) {
        args[k] = tnew(c, dt, 2, (k == 0 || k == 2) ? big : row);
        for (int64_t i = 0; i < ic_tensor_numel(&args[k]); i++)
            ic_tensor_set(&args[k], i, data_at(k, i));
    }
    ic_tensor y;
    ic_status s = ic_ref_run(c, g, NULL, 5, args, 1, &y);
    cr_assert_eq(s, IC_OK, "%s", ic_last_error(c));
    check_shape(&y, dt, 2, big, "seed y");
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 8; j++) {
            double a = data_at(0, i * 8 + j), b1 = data_at(1, j), cc = data_at(2, i * 8 + j);
            double b2 = data_at(3, j), b3 = data_at(4, j), want;
            if (dt == IC_F32) {
                /* plain f32 arithmetic, each step rounded (volatile: no contraction) */
                volatile float t0 = (float)a + (float)b1;
                volatile float t1 = t0 + (float)cc;
                volatile float t2 = t1 * (float)b2;
                volatile float r = t2 + (float)b3;
                want = r;
            } else {
                /* each node stores its result in dt */
                double t0 = q_as(dt, a + b1), t1 = q_as(dt, t0 + cc), t2 = q_as(dt, t1 * b2);
                want = q_as(dt, t2 + b3);
            }
            double got = ict_get_f(&y, i * 8 + j);
            cr_assert_eq(got, want, "%s y[%d,%d]: got %.9g, want %.9g", ic_dtype_name(dt), i, j, got, want);
        }
    ic_tensor_free(c, &y);
    for (int k = 0; k < 5; k++)
        ic_tensor_free(c, &args[k]);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

Test(ref_graph, seed_pattern_f32) { run_seed(IC_F32); }
Test(ref_graph, seed_pattern_f16) { run_seed(IC_F16); }
Test(ref_graph, seed_pattern_bf16) { run_seed(IC_BF16); }

Test(ref_graph, seed_pattern_from_json)
{
    ic_ctx *c = ict_ctx();
    const char *text =
        "{\"ic_graph\": 1, \"name\": \"seed\", \"inputs\": ["
        "{\"name\": \"a\", \"dtype\": \"f32\", \"shape\": [16, 8]},"
        "{\"name\": \"b1\", \"dtype\": \"f32\", \"shape\": [1, 8]},"
        "{\"name\": \"c\", \"dtype\": \"f32\", \"shape\": [16, 8]},"
        "{\"name\": \"b2\", \"dtype\": \"f32\", \"shape\": [1, 8]},"
        "{\"name\": \"b3\", \"dtype\": \"f32\", \"shape\": [1, 8]}],"
        "\"nodes\": ["
        "{\"name\": \"t0\", \"op\": \"add\", \"inputs\": [\"a\", \"b1\"]},"
        "{\"name\": \"t1\", \"op\": \"add\", \"inputs\": [\"t0\", \"c\"]},"
        "{\"name\": \"t2\", \"op\": \"mul\", \"inputs\": [\"t1\", \"b2\"]},"
        "{\"name\": \"y\", \"op\": \"add\", \"inputs\": [\"t2\", \"b3\"]},"
        "{\"name\": \"h\", \"op\": \"mul\", \"inputs\": [\"y\", 0.5]}],"
        "\"outputs\": [\"y\", \"h\"]}";
    ic_graph *g = NULL;
    ic_status s = ic_graph_load_json_string(c, text, ".", &g);
    cr_assert_eq(s, IC_OK, "%s", ic_last_error(c));
    int64_t big[2] = { 16, 8 }, row[2] = { 1, 8 };
    ic_tensor args[5], outs[2];
    for (int k = 0; k < 5; k++) {
        args[k] = tnew(c, IC_F32, 2, (k == 0 || k == 2) ? big : row);
        for (int64_t i = 0; i < ic_tensor_numel(&args[k]); i++)
            ic_tensor_set(&args[k], i, data_at(k, i));
    }
    s = ic_ref_run(c, g, NULL, 5, args, 2, outs);
    cr_assert_eq(s, IC_OK, "%s", ic_last_error(c));
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 8; j++) {
            volatile float t0 = (float)data_at(0, i * 8 + j) + (float)data_at(1, j);
            volatile float t1 = t0 + (float)data_at(2, i * 8 + j);
            volatile float t2 = t1 * (float)data_at(3, j);
            volatile float y = t2 + (float)data_at(4, j);
            volatile float h = y * 0.5f;
            cr_assert_eq(ict_get_f(&outs[0], i * 8 + j), (double)y, "json seed y[%d,%d]", i, j);
            cr_assert_eq(ict_get_f(&outs[1], i * 8 + j), (double)h, "json seed h[%d,%d]", i, j);
        }
    for (int k = 0; k < 2; k++)
        ic_tensor_free(c, &outs[k]);
    for (int k = 0; k < 5; k++)
        ic_tensor_free(c, &args[k]);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* ---- outputs, params and lifetimes ---- */

Test(ref_graph, outputs_repeat_and_include_inputs_and_params)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "outs");
    ic_value x = ict_input(g, "x", IC_I64, "2,3");
    ic_value w = ict_param(g, "w", IC_I64, "3"); /* supplied at run time: argument 2 */
    /* a param with data, given from an unaligned buffer */
    unsigned char raw[1 + 3 * 8];
    int64_t kv[3] = { 100, 200, 300 };
    memcpy(raw + 1, kv, sizeof kv);
    ic_dim d3 = ic_dim_const(3);
    ic_value k;
    cr_assert_eq(ic_graph_add_param(g, "k", IC_I64, 1, &d3, raw + 1, sizeof kv, NULL, NULL, &k), IC_OK,
                 "%s", ic_last_error(c));
    ic_value z = ict_input(g, "z", IC_I64, "[]"); /* argument 1: inputs come before params */
    ic_value s1 = node2(g, "s1", IC_OP_ADD, ic_val(x), ic_val(w));
    ic_value s2 = node2(g, "s2", IC_OP_MUL, ic_val(s1), ic_val(k));
    ic_value s3 = node2(g, "s3", IC_OP_SUB, ic_val(s2), ic_val(z));
    out(g, s3);
    out(g, s1);
    out(g, s3);
    out(g, x);
    out(g, k);
    out(g, x);
    int64_t s23[2] = { 2, 3 }, s3s[1] = { 3 };
    ic_tensor args[3] = { tnew(c, IC_I64, 2, s23), tnew(c, IC_I64, 0, NULL), tnew(c, IC_I64, 1, s3s) };
    for (int i = 0; i < 6; i++)
        ((int64_t *)args[0].data)[i] = i - 2;
    *(int64_t *)args[1].data = 7;
    for (int i = 0; i < 3; i++)
        ((int64_t *)args[2].data)[i] = 10 * i;
    ic_tensor o[6];
    ic_status s = ic_ref_run(c, g, NULL, 3, args, 6, o);
    cr_assert_eq(s, IC_OK, "%s", ic_last_error(c));
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) {
            int64_t xv = i * 3 + j - 2, sum = xv + 10 * j, res = sum * kv[j] - 7;
            int64_t f = i * 3 + j;
            cr_assert_eq(ict_get_i(&o[0], f), res, "s3[%d,%d]", i, j);
            cr_assert_eq(ict_get_i(&o[1], f), sum, "s1[%d,%d]", i, j);
            cr_assert_eq(ict_get_i(&o[2], f), res, "s3 again [%d,%d]", i, j);
            cr_assert_eq(ict_get_i(&o[3], f), xv, "x [%d,%d]", i, j);
            cr_assert_eq(ict_get_i(&o[5], f), xv, "x again [%d,%d]", i, j);
        }
    for (int j = 0; j < 3; j++)
        cr_assert_eq(ict_get_i(&o[4], j), kv[j], "param k [%d]", j);
    /* every output owns distinct memory, never the caller's */
    for (int a = 0; a < 6; a++) {
        cr_assert_neq(o[a].data, args[0].data, "output %d aliases the input", a);
        for (int b = a + 1; b < 6; b++)
            cr_assert_neq(o[a].data, o[b].data, "outputs %d and %d share memory", a, b);
    }
    for (int a = 0; a < 6; a++)
        ic_tensor_free(c, &o[a]);
    for (int a = 0; a < 3; a++)
        ic_tensor_free(c, &args[a]);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

Test(ref_graph, long_chain_frees_intermediates)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "chain");
    ic_value x = ict_input(g, "x", IC_F64, "64"), y = x, early = -1;
    char name[16];
    for (int i = 0; i < 60; i++) {
        snprintf(name, sizeof name, "m%d", i);
        ic_value m = node2(g, name, IC_OP_MUL, ic_val(y), ic_scalar_f(0.5));
        snprintf(name, sizeof name, "a%d", i);
        y = node2(g, name, IC_OP_ADD, ic_val(m), ic_val(i % 2 ? x : m)); /* x read far ahead */
        if (i == 10)
            early = y;
        snprintf(name, sizeof name, "dead%d", i);
        node2(g, name, IC_OP_SUB, ic_val(y), ic_val(x)); /* nobody reads it */
    }
    out(g, y);
    out(g, early);
    int64_t n[1] = { 64 };
    ic_tensor xt = tnew(c, IC_F64, 1, n), o[2];
    for (int i = 0; i < 64; i++)
        ((double *)xt.data)[i] = i - 31.5;
    ic_status s = ic_ref_run(c, g, NULL, 1, &xt, 2, o);
    cr_assert_eq(s, IC_OK, "%s", ic_last_error(c));
    for (int e = 0; e < 64; e++) {
        double xv = e - 31.5, v = xv, at10 = 0;
        for (int i = 0; i < 60; i++) {
            double m = v * 0.5;
            v = m + (i % 2 ? xv : m);
            if (i == 10)
                at10 = v;
        }
        cr_assert_eq(ict_get_f(&o[0], e), v, "chain end [%d]: got %.17g, want %.17g", e, ict_get_f(&o[0], e), v);
        cr_assert_eq(ict_get_f(&o[1], e), at10, "chain a10 [%d]", e);
    }
    ic_tensor_free(c, &o[0]);
    ic_tensor_free(c, &o[1]);
    ic_tensor_free(c, &xt);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

Test(ref_graph, strided_input_through_a_view_and_reduction)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "mixed");
    ic_value x = ict_input(g, "x", IC_F32, "2,3"), b = ict_input(g, "b", IC_F32, "3,2");
    ic_attrs at;
    ic_attrs_init(&at, IC_OP_TRANSPOSE);
    at.dim0 = 0;
    at.dim1 = -1;
    ic_value xt;
    ic_operand xin = ic_val(x);
    cr_assert_eq(ic_graph_add_node(g, "xt", IC_OP_TRANSPOSE, 1, &xin, &at, &xt), IC_OK, "%s", ic_last_error(c));
    ic_value sum = node2(g, "s", IC_OP_ADD, ic_val(xt), ic_val(b));
    ic_attrs rat;
    ic_attrs_init(&rat, IC_OP_SUM);
    rat.has_dims = true;
    rat.ndims = 1;
    rat.dims[0] = 0;
    rat.keepdim = true;
    ic_value r;
    ic_operand sin_ = ic_val(sum);
    cr_assert_eq(ic_graph_add_node(g, "r", IC_OP_SUM, 1, &sin_, &rat, &r), IC_OK, "%s", ic_last_error(c));
    out(g, r);
    out(g, xt);
    /* x is given as a transposed [2,3] view of a [3,2] buffer */
    int64_t s32[2] = { 3, 2 };
    ic_tensor buf = tnew(c, IC_F32, 2, s32), bt = tnew(c, IC_F32, 2, s32);
    for (int i = 0; i < 6; i++) {
        ((float *)buf.data)[i] = (float)i;        /* buf[p][q] = 2p + q */
        ((float *)bt.data)[i] = 0.25f * (float)i; /* b[p][q] = (2p + q) / 4 */
    }
    ic_tensor xv = buf;
    xv.shape[0] = 2, xv.shape[1] = 3, xv.strides[0] = 1, xv.strides[1] = 2; /* x[i][j] = buf[j][i] */
    ic_tensor args[2] = { xv, bt }, o[2];
    ic_status s = ic_ref_run(c, g, NULL, 2, args, 2, o);
    cr_assert_eq(s, IC_OK, "%s", ic_last_error(c));
    int64_t s12[2] = { 1, 2 };
    check_shape(&o[0], IC_F32, 2, s12, "r");
    check_shape(&o[1], IC_F32, 2, s32, "xt");
    /* xt[p][q] = x[q][p] = buf[p][q]; r[0][q] = sum_p (buf[p][q] + b[p][q]) */
    for (int q = 0; q < 2; q++) {
        double want = 0;
        for (int p = 0; p < 3; p++)
            want += (2 * p + q) * 1.25;
        cr_assert_eq(ict_get_f(&o[0], q), want, "r[0][%d]: got %g, want %g", q, ict_get_f(&o[0], q), want);
    }
    for (int i = 0; i < 6; i++)
        cr_assert_eq(ict_get_f(&o[1], i), (double)i, "xt flat %d", i);
    ic_tensor_free(c, &o[0]);
    ic_tensor_free(c, &o[1]);
    ic_tensor_free(c, &buf);
    ic_tensor_free(c, &bt);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

Test(ref_graph, error_in_the_middle_names_the_node_and_zeroes_outputs)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "midfail");
    ic_value x = ict_input(g, "x", IC_I32, "4");
    ic_value a = node2(g, "ok1", IC_OP_ADD, ic_val(x), ic_scalar_i(1));
    ic_value p = node2(g, "bad_pow", IC_OP_POW, ic_val(a), ic_scalar_i(-1));
    ic_value z = node2(g, "after", IC_OP_ADD, ic_val(p), ic_val(a));
    out(g, a);
    out(g, z);
    int64_t n[1] = { 4 };
    ic_tensor xt = tnew(c, IC_I32, 1, n), o[2];
    memset(o, 0xab, sizeof o);
    ic_status s = ic_ref_run(c, g, NULL, 1, &xt, 2, o);
    ict_assert_error(c, s, IC_EINVAL, "graph 'midfail'", "node 'bad_pow'", "(pow)");
    cr_assert_null(o[0].data, "outputs are zeroed on error");
    cr_assert_null(o[1].data, "outputs are zeroed on error");
    /* the message goes to the caller's context even when it is not the graph's */
    ic_ctx *other = ict_ctx();
    s = ic_ref_run(other, g, NULL, 1, &xt, 2, o);
    ict_assert_error(other, s, IC_EINVAL, "node 'bad_pow'");
    ic_ctx_destroy(other);
    ic_tensor_free(c, &xt);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* ---- symbolic dims ---- */

/* x [B, 8] * y [B, 1] -> z */
static ic_graph *sym_graph(ic_ctx *c)
{
    ic_graph *g = ict_graph(c, "symbolic");
    ic_value x = ict_input(g, "x", IC_F32, "B,8"), y = ict_input(g, "y", IC_F32, "B,1");
    out(g, node2(g, "z", IC_OP_MUL, ic_val(x), ic_val(y)));
    return g;
}

Test(ref_graph, symbols_bound_from_arguments)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = sym_graph(c);
    for (int64_t B = 0; B <= 5; B += 5) {
        int64_t sx[2] = { B, 8 }, sy[2] = { B, 1 };
        ic_tensor args[2] = { tnew(c, IC_F32, 2, sx), tnew(c, IC_F32, 2, sy) }, z;
        for (int64_t i = 0; i < B * 8; i++)
            ((float *)args[0].data)[i] = (float)i;
        for (int64_t i = 0; i < B; i++)
            ((float *)args[1].data)[i] = (float)(i + 1);
        ic_status s = ic_ref_run(c, g, NULL, 2, args, 1, &z);
        cr_assert_eq(s, IC_OK, "B=%lld: %s", (long long)B, ic_last_error(c));
        check_shape(&z, IC_F32, 2, sx, "z");
        for (int64_t i = 0; i < B; i++)
            for (int j = 0; j < 8; j++)
                cr_assert_eq(ict_get_f(&z, i * 8 + j), (double)((i * 8 + j) * (i + 1)), "z[%lld,%d]",
                             (long long)i, j);
        ic_tensor_free(c, &z);
        /* explicit bindings that agree are fine */
        int64_t vals[1] = { B };
        s = ic_ref_run(c, g, vals, 2, args, 1, &z);
        cr_assert_eq(s, IC_OK, "%s", ic_last_error(c));
        ic_tensor_free(c, &z);
        ic_tensor_free(c, &args[0]);
        ic_tensor_free(c, &args[1]);
    }
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

Test(ref_graph, symbol_conflicts_name_both_inputs)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = sym_graph(c);
    int64_t sx[2] = { 3, 8 }, sy[2] = { 4, 1 };
    ic_tensor args[2] = { tnew(c, IC_F32, 2, sx), tnew(c, IC_F32, 2, sy) }, z;
    ic_status s = ic_ref_run(c, g, NULL, 2, args, 1, &z);
    ict_assert_error(c, s, IC_ESHAPE, "symbol 'B'", "'x'", "'y'", "size 3", "size 4");
    cr_assert_null(z.data);
    int64_t vals[1] = { -1 };
    s = ic_runtime_bind_args(g, 2, args, vals);
    ict_assert_error(c, s, IC_ESHAPE, "symbol 'B'", "'x'", "'y'", "size 3", "size 4");
    /* an explicit binding that disagrees with the arguments */
    args[1].shape[0] = 3;
    vals[0] = 6;
    s = ic_ref_run(c, g, vals, 2, args, 1, &z);
    ict_assert_error(c, s, IC_ESHAPE, "symbol 'B'", "bound to 6", "size 3");
    /* ic_runtime_bind_args fills (and replaces) the value from the arguments */
    s = ic_runtime_bind_args(g, 2, args, vals);
    cr_assert_eq(s, IC_OK, "%s", ic_last_error(c));
    cr_assert_eq(vals[0], 3, "B bound to %lld", (long long)vals[0]);
    /* rank, dtype and fixed-size mismatches */
    args[1].shape[1] = 2;
    s = ic_runtime_bind_args(g, 2, args, vals);
    ict_assert_error(c, s, IC_ESHAPE, "symbolic", "'y'", "dim 1");
    args[1].shape[1] = 1;
    args[1].dtype = IC_F16;
    s = ic_runtime_bind_args(g, 2, args, vals);
    ict_assert_error(c, s, IC_EDTYPE, "'y'", "f16", "f32");
    args[1].dtype = IC_F32;
    args[1].rank = 3;
    s = ic_runtime_bind_args(g, 2, args, vals);
    ict_assert_error(c, s, IC_ESHAPE, "'y'", "rank 3");
    args[1].rank = 2;
    s = ic_runtime_bind_args(g, 1, args, vals);
    ict_assert_error(c, s, IC_EINVAL, "expects 2 arguments");
    ic_tensor_free(c, &args[0]);
    ic_tensor_free(c, &args[1]);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

Test(ref_graph, scaled_and_product_symbols)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "products");
    ic_dim B, S;
    cr_assert_eq(ic_graph_symbol(g, "B", &B), IC_OK);
    cr_assert_eq(ic_graph_symbol(g, "S", &S), IC_OK);
    ic_dim twoB = B, BS = { 1, 2, { B.sym[0], S.sym[0] } };
    twoB.coef = 2;
    ic_value w, x, z;
    cr_assert_eq(ic_graph_add_input(g, "w", IC_I64, 1, &twoB, &w), IC_OK, "%s", ic_last_error(c));
    cr_assert_eq(ic_graph_add_input(g, "x", IC_I64, 1, &B, &x), IC_OK, "%s", ic_last_error(c));
    cr_assert_eq(ic_graph_add_input(g, "z", IC_I64, 1, &BS, &z), IC_OK, "%s", ic_last_error(c));
    ic_attrs at;
    ic_attrs_init(&at, IC_OP_SUM);
    ic_operand zin = ic_val(z);
    ic_value sz;
    cr_assert_eq(ic_graph_add_node(g, "sz", IC_OP_SUM, 1, &zin, &at, &sz), IC_OK, "%s", ic_last_error(c));
    out(g, node2(g, "xs", IC_OP_ADD, ic_val(x), ic_val(sz)));
    out(g, w);
    int64_t s10[1] = { 10 }, s5[1] = { 5 }, s15[1] = { 15 };
    ic_tensor args[3] = { tnew(c, IC_I64, 1, s10), tnew(c, IC_I64, 1, s5), tnew(c, IC_I64, 1, s15) }, o[2];
    for (int i = 0; i < 15; i++)
        ((int64_t *)args[2].data)[i] = i; /* sum 105 */
    for (int i = 0; i < 5; i++)
        ((int64_t *)args[1].data)[i] = i * 1000;
    /* S is fixed by no argument alone */
    ic_status s = ic_ref_run(c, g, NULL, 3, args, 2, o);
    ict_assert_error(c, s, IC_EINVAL, "symbol 'S'", "not bound");
    int64_t vals[2] = { -1, 3 };
    s = ic_ref_run(c, g, vals, 3, args, 2, o);
    cr_assert_eq(s, IC_OK, "%s", ic_last_error(c));
    for (int i = 0; i < 5; i++)
        cr_assert_eq(ict_get_i(&o[0], i), i * 1000 + 105, "xs[%d]", i);
    cr_assert_eq(o[1].shape[0], 10);
    ic_tensor_free(c, &o[0]);
    ic_tensor_free(c, &o[1]);
    /* B*S must match the bound values: 5*2 = 10, not 15 */
    vals[1] = 2;
    s = ic_ref_run(c, g, vals, 3, args, 2, o);
    ict_assert_error(c, s, IC_ESHAPE, "'z'", "expected 10");
    /* w's 2*B must be even, and agree with x's B */
    vals[1] = 3;
    args[0].shape[0] = 9;
    s = ic_ref_run(c, g, vals, 3, args, 2, o);
    ict_assert_error(c, s, IC_ESHAPE, "'w'", "not a multiple of 2");
    args[0].shape[0] = 8;
    s = ic_ref_run(c, g, vals, 3, args, 2, o);
    ict_assert_error(c, s, IC_ESHAPE, "symbol 'B'", "'w'", "'x'", "size 8", "size 5");
    args[0].shape[0] = 10;
    for (int k = 0; k < 3; k++)
        ic_tensor_free(c, &args[k]);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}
