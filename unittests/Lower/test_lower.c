/* test_lower.c - graph -> loop IR: every op of the spec, every dtype it takes, views folded
 * into indices, decompositions, run by ic_program_interpret and compared with the
 * reference executor (ic_ref_run) or with values computed by hand. */
#include "lowertest.h"

static const ic_dtype all_dtypes[] = { IC_F32, IC_F64, IC_F16, IC_BF16, IC_I32, IC_I64, IC_BOOL,
                                       IC_U8, IC_I8, IC_I16 };
#define NDT 10

static ic_graph *graph1(ic_ctx *c, const char *name, ic_dtype dt, const char *shape, ic_value *x)
{
    ic_graph *g = ict_graph(c, name);
    *x = ict_input(g, "x", dt, shape);
    return g;
}

/* Adds node `name` if the builder accepts it (some ops refuse some dtypes). */
static bool try_node(ic_graph *g, const char *name, ic_op op, int n, const ic_operand *in,
                     const ic_attrs *at, ic_value *out)
{
    return ic_graph_add_node(g, name, op, n, in, at, out) == IC_OK;
}

/* ---- pointwise ---- */

Test(lower, seed_pattern_unfused)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "seed");
    ic_value a = ict_input(g, "a", IC_F32, "16,8"), b1 = ict_input(g, "b1", IC_F32, "1,8");
    ic_value cc = ict_input(g, "c", IC_F32, "16,8"), b2 = ict_input(g, "b2", IC_F32, "1,8");
    ic_value b3 = ict_input(g, "b3", IC_F32, "1,8");
    ic_value t0 = lt_bin(g, "t0", IC_OP_ADD, ic_val(a), ic_val(b1));
    ic_value t1 = lt_bin(g, "t1", IC_OP_ADD, ic_val(t0), ic_val(cc));
    ic_value t2 = lt_bin(g, "t2", IC_OP_MUL, ic_val(t1), ic_val(b2));
    lt_out(g, lt_bin(g, "y", IC_OP_ADD, ic_val(t2), ic_val(b3)));
    ic_program *p;
    lt_check2(c, g, 1, &p, NULL);
    cr_assert_eq(ic_program_num_kernels(p), 4, "one kernel per op: got %d", ic_program_num_kernels(p));
    cr_assert_str_eq(ic_program_kernel(p, 0)->name, "cpu_add_0");
    cr_assert_str_eq(ic_program_kernel(p, 2)->name, "cpu_mul_2");
    cr_assert_eq(ic_program_num_buffers(p), 5 + 1 + 3, "5 args, 1 output, 3 temps: %d",
                 ic_program_num_buffers(p));
    ic_program_destroy(p);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* Values by hand: y = ((a + b1) + c) * b2 + b3 on [2, 3]. */
Test(lower, seed_pattern_by_hand)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "seed");
    ic_value a = ict_input(g, "a", IC_F32, "2,3"), b1 = ict_input(g, "b1", IC_F32, "1,3");
    ic_value cc = ict_input(g, "c", IC_F32, "2,3"), b2 = ict_input(g, "b2", IC_F32, "1,3");
    ic_value b3 = ict_input(g, "b3", IC_F32, "1,3");
    ic_value t0 = lt_bin(g, "t0", IC_OP_ADD, ic_val(a), ic_val(b1));
    ic_value t1 = lt_bin(g, "t1", IC_OP_ADD, ic_val(t0), ic_val(cc));
    ic_value t2 = lt_bin(g, "t2", IC_OP_MUL, ic_val(t1), ic_val(b2));
    lt_out(g, lt_bin(g, "y", IC_OP_ADD, ic_val(t2), ic_val(b3)));
    float av[6] = { 1, 2, 3, 4, 5, 6 }, b1v[3] = { 10, 20, 30 }, cv[6] = { 1, 1, 1, 2, 2, 2 };
    float b2v[3] = { 2, 3, 4 }, b3v[3] = { 0.5f, 0.25f, -1 }, out[6];
    int64_t s23[2] = { 2, 3 }, s13[2] = { 1, 3 };
    ic_tensor args[5], o;
    ic_tensor_init(&args[0], IC_F32, 2, s23, av);
    ic_tensor_init(&args[1], IC_F32, 2, s13, b1v);
    ic_tensor_init(&args[2], IC_F32, 2, s23, cv);
    ic_tensor_init(&args[3], IC_F32, 2, s13, b2v);
    ic_tensor_init(&args[4], IC_F32, 2, s13, b3v);
    ic_tensor_init(&o, IC_F32, 2, s23, out);
    ic_program *p;
    cr_assert_eq(ic_lower(c, g, &p), IC_OK, "%s", ic_last_error(c));
    cr_assert_eq(ic_program_interpret(c, p, args, 5, &o, 1), IC_OK, "%s", ic_last_error(c));
    float want[6] = { (1 + 10 + 1) * 2 + 0.5f, (2 + 20 + 1) * 3 + 0.25f, (3 + 30 + 1) * 4 - 1,
                      (4 + 10 + 2) * 2 + 0.5f, (5 + 20 + 2) * 3 + 0.25f, (6 + 30 + 2) * 4 - 1 };
    for (int i = 0; i < 6; i++)
        cr_assert_float_eq(out[i], want[i], 1e-6, "y[%d] = %g, want %g", i, out[i], want[i]);
    ic_program_destroy(p);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

static const ic_op unary_ops[] = {
    IC_OP_NEG, IC_OP_ABS, IC_OP_EXP, IC_OP_LOG, IC_OP_SQRT, IC_OP_RSQRT, IC_OP_SIN, IC_OP_COS,
    IC_OP_TANH, IC_OP_SIGMOID, IC_OP_RELU, IC_OP_SILU, IC_OP_ERF, IC_OP_RECIPROCAL, IC_OP_FLOOR,
    IC_OP_CEIL, IC_OP_LOGICAL_NOT, IC_OP_GELU,
};

Test(lower, every_unary_op_every_dtype)
{
    ic_ctx *c = ict_ctx();
    int checked = 0;
    for (size_t k = 0; k < sizeof unary_ops / sizeof *unary_ops; k++)
        for (int d = 0; d < NDT; d++) {
            ic_value x, y;
            ic_graph *g = graph1(c, ic_op_name(unary_ops[k]), all_dtypes[d], "3,5", &x);
            ic_operand o = ic_val(x);
            if (try_node(g, "y", unary_ops[k], 1, &o, NULL, &y)) {
                lt_out(g, y);
                lt_check(c, g, 10 + (uint64_t)k);
                checked++;
            }
            ic_graph_destroy(g);
        }
    cr_assert_geq(checked, 70, "only %d op/dtype pairs lowered", checked);
    ic_ctx_destroy(c);
}

Test(lower, gelu_tanh_and_clamp_and_cast)
{
    ic_ctx *c = ict_ctx();
    for (int d = 0; d < NDT; d++) {
        ic_value x, y;
        ic_graph *g = graph1(c, "attrs", all_dtypes[d], "4,3", &x);
        ic_attrs at = lt_attrs(IC_OP_GELU);
        at.approximate = 1;
        ic_operand o = ic_val(x);
        if (try_node(g, "gelu_tanh", IC_OP_GELU, 1, &o, &at, &y))
            lt_out(g, y);
        ic_attrs cl = lt_attrs(IC_OP_CLAMP);
        cl.has_min = cl.has_max = true;
        cl.min = (ic_scalar){ -1, -1, true };
        cl.max = (ic_scalar){ 1.5, 1, false };
        if (try_node(g, "clamp_both", IC_OP_CLAMP, 1, &o, &cl, &y))
            lt_out(g, y);
        cl.has_max = false;
        cl.min = (ic_scalar){ 0.25, 0, false };
        if (try_node(g, "clamp_min", IC_OP_CLAMP, 1, &o, &cl, &y))
            lt_out(g, y);
        for (int t = 0; t < NDT; t++) {
            ic_attrs ca = lt_attrs(IC_OP_CAST);
            char name[32];
            snprintf(name, sizeof name, "to_%s", ic_dtype_name(all_dtypes[t]));
            ca.has_dtype = true;
            ca.dtype = all_dtypes[t];
            lt_out(g, lt_node(g, name, IC_OP_CAST, 1, &o, &ca));
        }
        lt_check(c, g, 77 + (uint64_t)d);
        ic_graph_destroy(g);
    }
    ic_ctx_destroy(c);
}

static const ic_op binary_ops[] = {
    IC_OP_ADD, IC_OP_SUB, IC_OP_MUL, IC_OP_DIV, IC_OP_POW, IC_OP_MAXIMUM, IC_OP_MINIMUM, IC_OP_EQ,
    IC_OP_NE, IC_OP_LT, IC_OP_LE, IC_OP_GT, IC_OP_GE, IC_OP_LOGICAL_AND, IC_OP_LOGICAL_OR,
};

/* Every binary op on every pair of dtypes, broadcasting [4,1,3] with [5,1]. */
Test(lower, every_binary_op_every_dtype_pair)
{
    ic_ctx *c = ict_ctx();
    int checked = 0;
    for (size_t k = 0; k < sizeof binary_ops / sizeof *binary_ops; k++) {
        ic_graph *g = ict_graph(c, ic_op_name(binary_ops[k]));
        ic_value in[NDT][2];
        for (int d = 0; d < NDT; d++) {
            char n0[16], n1[16];
            snprintf(n0, sizeof n0, "a_%s", ic_dtype_name(all_dtypes[d]));
            snprintf(n1, sizeof n1, "b_%s", ic_dtype_name(all_dtypes[d]));
            in[d][0] = ict_input(g, n0, all_dtypes[d], "4,1,3");
            in[d][1] = ict_input(g, n1, all_dtypes[d], "5,1");
        }
        for (int d = 0; d < NDT; d++)
            for (int e = 0; e < NDT; e++) {
                char name[48];
                ic_value y;
                ic_operand o[2] = { ic_val(in[d][0]), ic_val(in[e][1]) };
                snprintf(name, sizeof name, "y_%s_%s", ic_dtype_name(all_dtypes[d]), ic_dtype_name(all_dtypes[e]));
                if (try_node(g, name, binary_ops[k], 2, o, NULL, &y) && ic_graph_num_outputs(g) < 16) {
                    lt_out(g, y);
                    checked++;
                }
            }
        if (ic_graph_num_outputs(g) > 0)
            lt_check(c, g, 300 + (uint64_t)k);
        ic_graph_destroy(g);
    }
    cr_assert_geq(checked, 150, "only %d binary op/dtype pairs lowered", checked);
    ic_ctx_destroy(c);
}

/* Numbers as operands: promotion of wrapped numbers, both sides, int and float. */
Test(lower, binary_with_scalars)
{
    ic_ctx *c = ict_ctx();
    for (int d = 0; d < NDT; d++)
        for (size_t k = 0; k < sizeof binary_ops / sizeof *binary_ops; k++) {
            ic_graph *g = ict_graph(c, "scalars");
            ic_value x = ict_input(g, "x", all_dtypes[d], "2,3"), y;
            ic_operand ops[4][2] = {
                { ic_val(x), ic_scalar_i(2) }, { ic_scalar_f(0.3), ic_val(x) },
                { ic_val(x), ic_scalar_f(-1.7) }, { ic_scalar_i(-3), ic_val(x) },
            };
            for (int i = 0; i < 4; i++) {
                char name[16];
                snprintf(name, sizeof name, "y%d", i);
                if (try_node(g, name, binary_ops[k], 2, ops[i], NULL, &y))
                    lt_out(g, y);
            }
            if (ic_graph_num_outputs(g) > 0) {
                ic_program *p = NULL;
                if (ic_lower(c, g, &p) == IC_OK) { /* int ** negative number is refused, like PyTorch */
                    ic_program_destroy(p);
                    lt_check(c, g, 500 + (uint64_t)(d * 31) + k);
                } else {
                    cr_assert(binary_ops[k] == IC_OP_POW, "%s on %s: %s", ic_op_name(binary_ops[k]),
                              ic_dtype_name(all_dtypes[d]), ic_last_error(c));
                }
            }
            ic_graph_destroy(g);
        }
    ic_ctx_destroy(c);
}

Test(lower, where_broadcasting)
{
    ic_ctx *c = ict_ctx();
    for (int d = 0; d < NDT; d++) {
        ic_graph *g = ict_graph(c, "where");
        ic_value cond = ict_input(g, "cond", IC_BOOL, "4,1");
        ic_value a = ict_input(g, "a", all_dtypes[d], "1,3"), b = ict_input(g, "b", IC_F32, "3");
        ic_operand o1[3] = { ic_val(cond), ic_val(a), ic_val(b) };
        ic_operand o2[3] = { ic_val(cond), ic_val(a), ic_scalar_i(7) };
        ic_operand o3[3] = { ic_val(cond), ic_scalar_f(0.5), ic_val(a) };
        lt_out(g, lt_node(g, "w1", IC_OP_WHERE, 3, o1, NULL));
        lt_out(g, lt_node(g, "w2", IC_OP_WHERE, 3, o2, NULL));
        lt_out(g, lt_node(g, "w3", IC_OP_WHERE, 3, o3, NULL));
        lt_check(c, g, 40 + (uint64_t)d);
        ic_graph_destroy(g);
    }
    ic_ctx_destroy(c);
}

/* ---- reductions ---- */

Test(lower, every_reduction_any_axes_keepdim)
{
    static const ic_op ops[] = { IC_OP_SUM, IC_OP_MEAN, IC_OP_AMAX, IC_OP_AMIN, IC_OP_PROD };
    static const int64_t dsets[][3] = { { 0 }, { 1 }, { -1 }, { 0, 2 }, { 2, 0 }, { 0, 1, 2 } };
    static const int dn[] = { 0, 1, 1, 2, 2, 3 };
    ic_ctx *c = ict_ctx();
    for (size_t k = 0; k < sizeof ops / sizeof *ops; k++)
        for (int d = 0; d < NDT; d++) {
            ic_graph *g = ict_graph(c, ic_op_name(ops[k]));
            ic_value x = ict_input(g, "x", all_dtypes[d], "3,4,5");
            for (int s = 0; s < 6; s++)
                for (int keep = 0; keep < 2; keep++) {
                    char name[32];
                    ic_value y;
                    snprintf(name, sizeof name, "r%d_%d", s, keep);
                    ic_attrs at = lt_dims(ops[k], dn[s], dsets[s] + (s == 0 ? 0 : 0), keep);
                    if (s == 0) { /* dims absent: all */
                        at.has_dims = false;
                        at.ndims = 0;
                    }
                    ic_operand o = ic_val(x);
                    if (try_node(g, name, ops[k], 1, &o, &at, &y))
                        lt_out(g, y);
                }
            if (ic_graph_num_outputs(g))
                lt_check(c, g, 60 + (uint64_t)d);
            ic_graph_destroy(g);
        }
    ic_ctx_destroy(c);
}

Test(lower, argmax_every_dim)
{
    ic_ctx *c = ict_ctx();
    for (int d = 0; d < NDT; d++) {
        ic_graph *g = ict_graph(c, "argmax");
        ic_value x = ict_input(g, "x", all_dtypes[d], "3,4,5"), y;
        for (int dim = -1; dim < 3; dim++)
            for (int keep = 0; keep < 2; keep++) {
                char name[32];
                snprintf(name, sizeof name, "am%d_%d", dim + 1, keep);
                ic_attrs at = lt_attrs(IC_OP_ARGMAX);
                at.dim = dim;
                at.keepdim = keep;
                ic_operand o = ic_val(x);
                if (try_node(g, name, IC_OP_ARGMAX, 1, &o, &at, &y))
                    lt_out(g, y);
            }
        if (ic_graph_num_outputs(g))
            lt_check(c, g, 90 + (uint64_t)d);
        ic_graph_destroy(g);
    }
    ic_ctx_destroy(c);
}

/* Hand-computed: row sums, mean, argmax with ties (first index wins) and a NaN (NaN is max). */
Test(lower, reductions_by_hand)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "red");
    ic_value x = ict_input(g, "x", IC_F32, "2,4");
    int64_t last[1] = { -1 };
    ic_attrs s = lt_dims(IC_OP_SUM, 1, last, false), am = lt_attrs(IC_OP_ARGMAX);
    am.dim = 1;
    lt_out(g, lt_at(g, "s", IC_OP_SUM, x, &s));
    lt_out(g, lt_at(g, "m", IC_OP_MEAN, x, &s));
    lt_out(g, lt_at(g, "am", IC_OP_ARGMAX, x, &am));
    float xv[8] = { 1, 3, 3, 2, -1, NAN, 5, NAN };
    float sv[2], mv[2];
    int64_t amv[2], sh[2] = { 2, 4 }, s2[1] = { 2 };
    ic_tensor arg, outs[3];
    ic_tensor_init(&arg, IC_F32, 2, sh, xv);
    ic_tensor_init(&outs[0], IC_F32, 1, s2, sv);
    ic_tensor_init(&outs[1], IC_F32, 1, s2, mv);
    ic_tensor_init(&outs[2], IC_I64, 1, s2, amv);
    ic_program *p;
    cr_assert_eq(ic_lower(c, g, &p), IC_OK, "%s", ic_last_error(c));
    cr_assert_eq(ic_program_interpret(c, p, &arg, 1, outs, 3), IC_OK, "%s", ic_last_error(c));
    cr_assert_float_eq(sv[0], 9.0f, 1e-6, "sum row 0 = %g", sv[0]);
    cr_assert(isnan(sv[1]), "sum with NaN = %g", sv[1]);
    cr_assert_float_eq(mv[0], 2.25f, 1e-6, "mean row 0 = %g", mv[0]);
    cr_assert_eq(amv[0], 1, "argmax with a tie picks the first: %lld", (long long)amv[0]);
    cr_assert_eq(amv[1], 1, "argmax picks the first NaN: %lld", (long long)amv[1]);
    ic_program_destroy(p);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* ---- normalisations ---- */

Test(lower, softmax_log_softmax_every_dim)
{
    static const ic_dtype fdt[] = { IC_F32, IC_F64, IC_F16, IC_BF16 };
    ic_ctx *c = ict_ctx();
    for (int d = 0; d < 4; d++) {
        ic_graph *g = ict_graph(c, "softmax");
        ic_value x = ict_input(g, "x", fdt[d], "3,4,5");
        for (int dim = -1; dim < 3; dim++) {
            char n1[16], n2[16];
            snprintf(n1, sizeof n1, "sm%d", dim + 1);
            snprintf(n2, sizeof n2, "lsm%d", dim + 1);
            ic_attrs at = lt_attrs(IC_OP_SOFTMAX);
            at.dim = dim;
            lt_out(g, lt_at(g, n1, IC_OP_SOFTMAX, x, &at));
            lt_out(g, lt_at(g, n2, IC_OP_LOG_SOFTMAX, x, &at));
        }
        ic_program *p;
        lt_check2(c, g, 120 + (uint64_t)d, &p, NULL);
        cr_assert_eq(ic_program_num_kernels(p), 8, "one kernel per softmax: %d", ic_program_num_kernels(p));
        for (int k = 0; k < 8; k++)
            cr_assert_eq(ic_program_kernel(p, k)->nstages, 3, "max, sum, row: %d stages",
                         ic_program_kernel(p, k)->nstages);
        ic_program_destroy(p);
        ic_graph_destroy(g);
    }
    ic_ctx_destroy(c);
}

Test(lower, softmax_by_hand)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "sm");
    ic_value x = ict_input(g, "x", IC_F32, "3");
    ic_attrs at = lt_attrs(IC_OP_SOFTMAX);
    at.dim = 0;
    lt_out(g, lt_at(g, "y", IC_OP_SOFTMAX, x, &at));
    float xv[3] = { 1, 2, 3 }, yv[3];
    int64_t sh[1] = { 3 };
    ic_tensor a, o;
    ic_tensor_init(&a, IC_F32, 1, sh, xv);
    ic_tensor_init(&o, IC_F32, 1, sh, yv);
    ic_program *p;
    cr_assert_eq(ic_lower(c, g, &p), IC_OK, "%s", ic_last_error(c));
    cr_assert_eq(ic_program_interpret(c, p, &a, 1, &o, 1), IC_OK, "%s", ic_last_error(c));
    double s = exp(1.0) + exp(2.0) + exp(3.0);
    for (int i = 0; i < 3; i++)
        cr_assert_float_eq(yv[i], exp(i + 1.0) / s, 1e-6, "softmax[%d] = %g, want %g", i, yv[i], exp(i + 1.0) / s);
    ic_program_destroy(p);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

Test(lower, layer_norm_and_rms_norm_variants)
{
    static const ic_dtype fdt[] = { IC_F32, IC_F64, IC_F16, IC_BF16 };
    ic_ctx *c = ict_ctx();
    for (int d = 0; d < 4; d++) {
        ic_graph *g = ict_graph(c, "norms");
        ic_value x = ict_input(g, "x", fdt[d], "3,4,8");
        ic_value w = ict_input(g, "w", fdt[d], "8"), b = ict_input(g, "b", fdt[d], "8");
        ic_value w2 = ict_input(g, "w2", fdt[d], "4,8");
        ic_attrs ln = lt_shape(IC_OP_LAYER_NORM, "8"), ln2 = lt_shape(IC_OP_LAYER_NORM, "4,8");
        ic_attrs rms = lt_shape(IC_OP_RMS_NORM, "8");
        ic_operand o0[3] = { ic_val(x), ic_val(w), ic_val(b) };
        ic_operand o1[3] = { ic_val(x), ic_none(), ic_val(b) };
        ic_operand o2[2] = { ic_val(x), ic_val(w2) };
        lt_out(g, lt_node(g, "ln_wb", IC_OP_LAYER_NORM, 3, o0, &ln));
        lt_out(g, lt_node(g, "ln_plain", IC_OP_LAYER_NORM, 1, o0, &ln));
        lt_out(g, lt_node(g, "ln_b", IC_OP_LAYER_NORM, 3, o1, &ln));
        lt_out(g, lt_node(g, "ln_2d", IC_OP_LAYER_NORM, 2, o2, &ln2));
        lt_out(g, lt_node(g, "rms_w", IC_OP_RMS_NORM, 2, o0, &rms));
        lt_out(g, lt_node(g, "rms", IC_OP_RMS_NORM, 1, o0, &rms));
        ic_program *p;
        lt_check2(c, g, 150 + (uint64_t)d, &p, NULL);
        cr_assert_eq(ic_program_num_kernels(p), 6, "one kernel per norm: %d", ic_program_num_kernels(p));
        ic_program_destroy(p);
        ic_graph_destroy(g);
    }
    ic_ctx_destroy(c);
}

/* Rows of 4096 with a large mean: f64 statistics keep f32 results within 1e-4. */
Test(lower, layer_norm_long_rows_accuracy)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "ln4096");
    ic_value x = ict_input(g, "x", IC_F32, "4,4096");
    ic_value big = lt_bin(g, "shifted", IC_OP_ADD, ic_val(x), ic_scalar_f(100.0));
    ic_attrs ln = lt_shape(IC_OP_LAYER_NORM, "4096");
    lt_out(g, lt_at(g, "y", IC_OP_LAYER_NORM, big, &ln));
    lt_check(c, g, 4096);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

Test(lower, layer_norm_by_hand)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "ln");
    ic_value x = ict_input(g, "x", IC_F32, "1,4");
    ic_attrs ln = lt_shape(IC_OP_LAYER_NORM, "4");
    ln.eps = 0;
    lt_out(g, lt_at(g, "y", IC_OP_LAYER_NORM, x, &ln));
    float xv[4] = { 1, 2, 3, 4 }, yv[4];
    int64_t sh[2] = { 1, 4 };
    ic_tensor a, o;
    ic_tensor_init(&a, IC_F32, 2, sh, xv);
    ic_tensor_init(&o, IC_F32, 2, sh, yv);
    ic_program *p;
    cr_assert_eq(ic_lower(c, g, &p), IC_OK, "%s", ic_last_error(c));
    cr_assert_eq(ic_program_interpret(c, p, &a, 1, &o, 1), IC_OK, "%s", ic_last_error(c));
    double sd = sqrt(1.25); /* mean 2.5, biased variance 1.25 */
    for (int i = 0; i < 4; i++)
        cr_assert_float_eq(yv[i], (xv[i] - 2.5) / sd, 1e-6, "y[%d] = %g", i, yv[i]);
    ic_program_destroy(p);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* ---- views ---- */

Test(lower, every_view_op)
{
    ic_ctx *c = ict_ctx();
    for (int d = 0; d < NDT; d++) {
        ic_graph *g = ict_graph(c, "views");
        ic_value x = ict_input(g, "x", all_dtypes[d], "2,3,4");
        ic_value one = ict_input(g, "one", all_dtypes[d], "3,1");
        ic_attrs r = lt_shape(IC_OP_RESHAPE, "4,-1"), pm = lt_dims(IC_OP_PERMUTE, 3, (int64_t[]){ 2, 0, 1 }, false);
        ic_attrs tr = lt_attrs(IC_OP_TRANSPOSE), ex = lt_shape(IC_OP_EXPAND, "2,3,5");
        ic_attrs un = lt_attrs(IC_OP_UNSQUEEZE), sq = lt_attrs(IC_OP_SQUEEZE), sl = lt_attrs(IC_OP_SLICE);
        tr.dim0 = 0;
        tr.dim1 = 2;
        un.dim = 1;
        sl.dim = 2;
        sl.has_start = sl.has_end = true;
        sl.start = 1;
        sl.end = -1;
        ic_value vr = lt_at(g, "r", IC_OP_RESHAPE, x, &r), vp = lt_at(g, "p", IC_OP_PERMUTE, x, &pm);
        ic_value vt = lt_at(g, "t", IC_OP_TRANSPOSE, x, &tr), ve = lt_at(g, "e", IC_OP_EXPAND, one, &ex);
        ic_value vu = lt_at(g, "u", IC_OP_UNSQUEEZE, x, &un), vs = lt_at(g, "s", IC_OP_SQUEEZE, one, &sq);
        ic_value vl = lt_at(g, "l", IC_OP_SLICE, x, &sl);
        /* each view feeds a computation and is an output itself */
        ic_value vals[7] = { vr, vp, vt, ve, vu, vs, vl };
        const char *names[7] = { "nr", "np", "nt", "ne", "nu", "ns", "nl" };
        for (int i = 0; i < 7; i++) {
            lt_out(g, vals[i]);
            lt_out(g, lt_un(g, names[i], IC_OP_LOGICAL_NOT, vals[i]));
        }
        lt_check(c, g, 200 + (uint64_t)d);
        ic_graph_destroy(g);
    }
    ic_ctx_destroy(c);
}

Test(lower, slice_with_step_and_negative_bounds)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "slices");
    ic_value x = ict_input(g, "x", IC_F32, "7,9");
    int k = 0;
    static const int64_t cfg[][4] = { { 0, 1, 6, 2 }, { 1, -7, 100, 3 }, { 1, 0, 9, 4 }, { 0, -3, -1, 1 }, { 1, 5, 2, 1 } };
    for (int i = 0; i < 5; i++) {
        ic_attrs sl = lt_attrs(IC_OP_SLICE);
        char n1[16], n2[16];
        sl.dim = cfg[i][0];
        sl.has_start = sl.has_end = true;
        sl.start = cfg[i][1];
        sl.end = cfg[i][2];
        sl.step = cfg[i][3];
        snprintf(n1, sizeof n1, "s%d", i);
        snprintf(n2, sizeof n2, "y%d", i);
        ic_value s = lt_at(g, n1, IC_OP_SLICE, x, &sl);
        lt_out(g, lt_bin(g, n2, IC_OP_MUL, ic_val(s), ic_scalar_f(2)));
        k++;
    }
    lt_check(c, g, 7);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* permute -> reshape -> slice -> expand, then a computation: no kernel for any view. */
Test(lower, view_chain_folds_into_one_kernel)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "chain");
    ic_value x = ict_input(g, "x", IC_F32, "2,3,4");
    ic_attrs pm = lt_dims(IC_OP_PERMUTE, 3, (int64_t[]){ 1, 0, 2 }, false);
    ic_attrs rs = lt_shape(IC_OP_RESHAPE, "6,1,4"), sl = lt_attrs(IC_OP_SLICE), ex = lt_shape(IC_OP_EXPAND, "3,5,2");
    sl.dim = 2;
    sl.has_start = true;
    sl.start = 1;
    sl.step = 2;
    ic_value p = lt_at(g, "p", IC_OP_PERMUTE, x, &pm), r = lt_at(g, "r", IC_OP_RESHAPE, p, &rs);
    ic_value s = lt_at(g, "s", IC_OP_SLICE, r, &sl);
    ic_attrs rs2 = lt_shape(IC_OP_RESHAPE, "3,2,2"), sq = lt_dims(IC_OP_SQUEEZE, 1, (int64_t[]){ 1 }, false);
    ic_value q = lt_at(g, "q", IC_OP_SQUEEZE, s, &sq); /* [6, 2] */
    ic_value r2 = lt_at(g, "r2", IC_OP_RESHAPE, q, &rs2); /* [3, 2, 2] */
    ic_attrs sl2 = lt_attrs(IC_OP_SLICE);
    sl2.dim = 1;
    sl2.has_end = true;
    sl2.end = 1;
    ic_value s2 = lt_at(g, "s2", IC_OP_SLICE, r2, &sl2); /* [3, 1, 2] */
    ic_value e = lt_at(g, "e", IC_OP_EXPAND, s2, &ex);    /* [3, 5, 2] */
    lt_out(g, lt_un(g, "y", IC_OP_EXP, e));
    ic_program *pr;
    lt_check2(c, g, 3, &pr, NULL);
    cr_assert_eq(ic_program_num_kernels(pr), 1, "views make no kernels: %d", ic_program_num_kernels(pr));
    cr_assert_eq(ic_program_num_buffers(pr), 2, "no temps for views: %d buffers", ic_program_num_buffers(pr));
    ic_program_destroy(pr);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

Test(lower, reshape_of_stored_tensor_needs_no_divmod)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "reshape");
    ic_value x = ict_input(g, "x", IC_F32, "6,4");
    ic_attrs rs = lt_shape(IC_OP_RESHAPE, "2,3,4");
    ic_value r = lt_at(g, "r", IC_OP_RESHAPE, x, &rs);
    ic_value b = ict_input(g, "b", IC_F32, "3,1");
    lt_out(g, lt_bin(g, "y", IC_OP_ADD, ic_val(r), ic_val(b)));
    ic_program *p;
    lt_check2(c, g, 5, &p, NULL);
    cr_assert_eq(lt_count_op(p, IC_L_IDIV) + lt_count_op(p, IC_L_MOD), 0, "reshape of a stored "
                 "tensor keeps the flat offset");
    ic_program_destroy(p);
    /* nor does a matmul reading a reshape that merges dims of a stored tensor ([2, 3, 4, 5]
     * as [6, 20]: the offset 20 k + j, whose (20 k + j) / 60 is k / 3 for j in [0, 20)), as
     * the GEMM of a conv reads its im2col columns */
    ic_graph *g3 = ict_graph(c, "reshape3");
    x = ict_input(g3, "x", IC_F32, "2,3,4,5");
    ic_value w = ict_input(g3, "w", IC_F32, "7,6");
    ic_attrs rs3 = lt_shape(IC_OP_RESHAPE, "6,20");
    ic_value cols = lt_at(g3, "r", IC_OP_RESHAPE, lt_un(g3, "n", IC_OP_NEG, x), &rs3);
    lt_out(g3, lt_bin(g3, "y", IC_OP_MATMUL, ic_val(w), ic_val(cols)));
    lt_check2(c, g3, 4, NULL, &p);
    cr_assert_eq(lt_count_op(p, IC_L_IDIV) + lt_count_op(p, IC_L_MOD), 0, "merged dims of a stored tensor "
                 "keep the flat offset");
    ic_program_destroy(p);
    ic_graph_destroy(g3);
    /* a reshape that merges permuted dims does need div/mod */
    ic_graph *g2 = ict_graph(c, "reshape2");
    x = ict_input(g2, "x", IC_F32, "2,3,4");
    ic_attrs pm = lt_dims(IC_OP_PERMUTE, 3, (int64_t[]){ 1, 0, 2 }, false), rs2 = lt_shape(IC_OP_RESHAPE, "6,4");
    ic_value pp = lt_at(g2, "p", IC_OP_PERMUTE, x, &pm);
    lt_out(g2, lt_un(g2, "y", IC_OP_NEG, lt_at(g2, "r", IC_OP_RESHAPE, pp, &rs2)));
    lt_check2(c, g2, 6, &p, NULL);
    cr_assert_gt(lt_count_op(p, IC_L_IDIV) + lt_count_op(p, IC_L_MOD), 0, "merging permuted dims needs div/mod");
    ic_program_destroy(p);
    ic_graph_destroy(g);
    ic_graph_destroy(g2);
    ic_ctx_destroy(c);
}

/* Outputs that are inputs, params or views of them are copied into the output buffer. */
Test(lower, outputs_that_are_arguments_or_views)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "copies");
    ic_value x = ict_input(g, "x", IC_I64, "3,4");
    float wv[4] = { 1, 2, 3, 4 };
    ic_dim ws[1] = { ic_dim_const(4) };
    ic_value w;
    cr_assert_eq(ic_graph_add_param(g, "w", IC_F32, 1, ws, wv, sizeof wv, NULL, NULL, &w), IC_OK);
    ic_attrs tr = lt_attrs(IC_OP_TRANSPOSE);
    tr.dim0 = 0;
    tr.dim1 = 1;
    lt_out(g, x);
    lt_out(g, w);
    lt_out(g, lt_at(g, "xt", IC_OP_TRANSPOSE, x, &tr));
    lt_out(g, x);
    ic_program *p;
    lt_check2(c, g, 8, &p, NULL);
    cr_assert_eq(ic_program_num_kernels(p), 4, "one copy per output: %d", ic_program_num_kernels(p));
    cr_assert_str_eq(ic_program_kernel(p, 0)->name, "cpu_copy_0");
    ic_program_destroy(p);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* ---- cat, embedding, creation ---- */

Test(lower, cat_dims_dtypes_and_empty_inputs)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "cat");
    ic_value a = ict_input(g, "a", IC_F32, "2,3"), b = ict_input(g, "b", IC_I32, "1,3");
    ic_value e = ict_input(g, "e", IC_F16, "0,3"), d = ict_input(g, "d", IC_F32, "2,5");
    ic_attrs c0 = lt_attrs(IC_OP_CAT), c1 = lt_attrs(IC_OP_CAT);
    c1.dim = -1;
    ic_operand o0[4] = { ic_val(a), ic_val(e), ic_val(b), ic_val(a) };
    ic_operand o1[3] = { ic_val(a), ic_val(d), ic_val(a) };
    ic_value y0 = lt_node(g, "y0", IC_OP_CAT, 4, o0, &c0); /* [5, 3], promoted to f32 */
    lt_out(g, y0);
    lt_out(g, lt_node(g, "y1", IC_OP_CAT, 3, o1, &c1)); /* [2, 11] */
    lt_out(g, lt_un(g, "z", IC_OP_EXP, y0));
    lt_check(c, g, 9);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

Test(lower, embedding_i32_i64_indices)
{
    static const ic_dtype idt[] = { IC_I32, IC_I64 };
    static const ic_dtype wdt[] = { IC_F32, IC_F16, IC_I64 };
    ic_ctx *c = ict_ctx();
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 3; k++) {
            ic_graph *g = ict_graph(c, "emb");
            ic_value w = ict_input(g, "w", wdt[k], "10,4");
            ic_value ix = ict_input(g, "ix", idt[i], "2,3");
            cr_assert_eq(ic_graph_set_input_range(g, ix, 0, 10), IC_OK);
            ic_operand o[2] = { ic_val(w), ic_val(ix) };
            ic_value e = lt_node(g, "e", IC_OP_EMBEDDING, 2, o, NULL);
            lt_out(g, e);
            lt_out(g, lt_bin(g, "e2", IC_OP_MUL, ic_val(e), ic_scalar_i(2)));
            lt_check(c, g, 11 + (uint64_t)(i * 3 + k));
            ic_graph_destroy(g);
        }
    ic_ctx_destroy(c);
}

/* Out-of-range indices never read outside the table: they are clamped (documented). */
Test(lower, embedding_clamps_out_of_range_indices)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "emb");
    ic_value w = ict_input(g, "w", IC_F32, "3,2"), ix = ict_input(g, "ix", IC_I64, "3");
    ic_operand o[2] = { ic_val(w), ic_val(ix) };
    lt_out(g, lt_node(g, "e", IC_OP_EMBEDDING, 2, o, NULL));
    float wv[6] = { 1, 2, 3, 4, 5, 6 }, out[6];
    int64_t iv[3] = { -5, 1, 99 }, ws[2] = { 3, 2 }, is[1] = { 3 }, os[2] = { 3, 2 };
    ic_tensor args[2], res;
    ic_tensor_init(&args[0], IC_F32, 2, ws, wv);
    ic_tensor_init(&args[1], IC_I64, 1, is, iv);
    ic_tensor_init(&res, IC_F32, 2, os, out);
    ic_program *p;
    cr_assert_eq(ic_lower(c, g, &p), IC_OK, "%s", ic_last_error(c));
    cr_assert_eq(ic_program_interpret(c, p, args, 2, &res, 1), IC_OK, "%s", ic_last_error(c));
    float want[6] = { 1, 2, 3, 4, 5, 6 };
    for (int i = 0; i < 6; i++)
        cr_assert_float_eq(out[i], want[i], 0, "e[%d] = %g, want %g", i, out[i], want[i]);
    ic_program_destroy(p);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

Test(lower, full_and_arange)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "create");
    ic_value x = ict_input(g, "x", IC_F32, "5");
    for (int d = 0; d < 7; d++) { /* the harness takes 16 outputs: u8 i8 i16 in narrow_integers... */
        char n1[16], n2[16];
        ic_attrs f = lt_shape(IC_OP_FULL, "2,3"), a = lt_attrs(IC_OP_ARANGE);
        f.has_dtype = true;
        f.dtype = all_dtypes[d];
        f.value = (ic_scalar){ 2.5, 2, false };
        a.has_dtype = true;
        a.dtype = all_dtypes[d];
        a.astart = (ic_scalar){ 1, 1, true };
        a.aend = (ic_scalar){ 7, 7, true };
        a.astep = (ic_scalar){ 1.5, 1, false };
        snprintf(n1, sizeof n1, "full_%s", ic_dtype_name(all_dtypes[d]));
        snprintf(n2, sizeof n2, "ar_%s", ic_dtype_name(all_dtypes[d]));
        ic_value v;
        if (try_node(g, n1, IC_OP_FULL, 0, NULL, &f, &v))
            lt_out(g, v);
        if (all_dtypes[d] != IC_BOOL && try_node(g, n2, IC_OP_ARANGE, 0, NULL, &a, &v))
            lt_out(g, v);
    }
    ic_attrs ai = lt_attrs(IC_OP_ARANGE);
    ai.aend = (ic_scalar){ 5, 5, true };
    ic_value ar = lt_node(g, "ar", IC_OP_ARANGE, 0, NULL, &ai);
    lt_out(g, lt_bin(g, "xa", IC_OP_MUL, ic_val(x), ic_val(ar)));
    lt_check(c, g, 12);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* ---- contractions ---- */

Test(lower, matmul_every_rank_combination)
{
    static const char *shapes[][2] = {
        { "5", "5" }, { "3,5", "5" }, { "5", "5,4" }, { "3,5", "5,4" }, { "2,3,5", "5,4" },
        { "5", "2,5,4" }, { "2,1,3,5", "4,5,2" }, { "1,3,5", "2,5,1" }, { "3,1", "1,4" },
    };
    static const ic_dtype dts[] = { IC_F32, IC_F64, IC_F16, IC_BF16, IC_I32, IC_I64 };
    ic_ctx *c = ict_ctx();
    for (int d = 0; d < 6; d++) {
        ic_graph *g = ict_graph(c, "matmul");
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
            char na[8], nb[8], ny[8];
            snprintf(na, sizeof na, "a%zu", s);
            snprintf(nb, sizeof nb, "b%zu", s);
            snprintf(ny, sizeof ny, "y%zu", s);
            ic_value a = ict_input(g, na, dts[d], shapes[s][0]), b = ict_input(g, nb, dts[d], shapes[s][1]);
            lt_out(g, lt_bin(g, ny, IC_OP_MATMUL, ic_val(a), ic_val(b)));
        }
        lt_check(c, g, 20 + (uint64_t)d);
        ic_graph_destroy(g);
    }
    ic_ctx_destroy(c);
}

Test(lower, linear_and_bmm)
{
    static const ic_dtype dts[] = { IC_F32, IC_F16, IC_BF16, IC_I64 };
    ic_ctx *c = ict_ctx();
    for (int d = 0; d < 4; d++) {
        ic_graph *g = ict_graph(c, "linear");
        ic_value x = ict_input(g, "x", dts[d], "2,3,6"), w = ict_input(g, "w", dts[d], "5,6");
        ic_value b = ict_input(g, "b", dts[d], "5"), w1 = ict_input(g, "w1", dts[d], "6");
        ic_value b1 = ict_input(g, "b1", dts[d], "1");
        ic_value p = ict_input(g, "p", dts[d], "4,3,6"), q = ict_input(g, "q", dts[d], "4,6,2");
        ic_operand o0[3] = { ic_val(x), ic_val(w), ic_val(b) };
        ic_operand o1[3] = { ic_val(x), ic_val(w1), ic_val(b1) };
        lt_out(g, lt_node(g, "lin", IC_OP_LINEAR, 3, o0, NULL));
        lt_out(g, lt_node(g, "lin_nobias", IC_OP_LINEAR, 2, o0, NULL));
        lt_out(g, lt_node(g, "lin_vec", IC_OP_LINEAR, 3, o1, NULL));
        lt_out(g, lt_bin(g, "bmm", IC_OP_BMM, ic_val(p), ic_val(q)));
        lt_check(c, g, 30 + (uint64_t)d);
        ic_graph_destroy(g);
    }
    ic_ctx_destroy(c);
}

/* ---- sizes ---- */

Test(lower, odd_sizes_1_3_and_1000003)
{
    static const char *shapes[] = { "1", "3", "1000003", "1,1", "3,1" };
    ic_ctx *c = ict_ctx();
    for (int s = 0; s < 5; s++) {
        ic_graph *g = ict_graph(c, "odd");
        ic_value x = ict_input(g, "x", IC_F32, shapes[s]), y = ict_input(g, "y", IC_F32, shapes[s]);
        ic_value t = lt_bin(g, "t", IC_OP_ADD, ic_val(x), ic_val(y));
        int64_t last[1] = { -1 };
        ic_attrs sm = lt_attrs(IC_OP_SOFTMAX), su = lt_dims(IC_OP_SUM, 1, last, false);
        sm.dim = -1;
        lt_out(g, t);
        lt_out(g, lt_at(g, "s", IC_OP_SUM, t, &su));
        lt_out(g, lt_at(g, "sm", IC_OP_SOFTMAX, t, &sm));
        lt_check(c, g, 1000 + (uint64_t)s);
        ic_graph_destroy(g);
    }
    ic_ctx_destroy(c);
}

Test(lower, scalars_and_empty_tensors)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "edge");
    ic_value s = ict_input(g, "s", IC_F32, ""), e = ict_input(g, "e", IC_F32, "0,4");
    ic_attrs all = lt_attrs(IC_OP_SUM), last = lt_dims(IC_OP_PROD, 1, (int64_t[]){ 0 }, false);
    lt_out(g, lt_un(g, "ns", IC_OP_NEG, s));
    lt_out(g, lt_at(g, "ss", IC_OP_SUM, s, &all));
    lt_out(g, lt_bin(g, "se", IC_OP_ADD, ic_val(e), ic_val(s)));
    lt_out(g, lt_at(g, "sume", IC_OP_SUM, e, &all));
    lt_out(g, lt_at(g, "prode", IC_OP_PROD, e, &last));
    lt_out(g, lt_at(g, "meane", IC_OP_MEAN, e, &all));
    lt_check(c, g, 13);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* ---- program-level properties ---- */

Test(lower, temps_with_disjoint_lifetimes_share_arena_bytes)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "chain");
    ic_value x = ict_input(g, "x", IC_F32, "64");
    ic_value t0 = lt_un(g, "t0", IC_OP_EXP, x), t1 = lt_un(g, "t1", IC_OP_NEG, t0);
    ic_value t2 = lt_un(g, "t2", IC_OP_EXP, t1), t3 = lt_un(g, "t3", IC_OP_NEG, t2);
    lt_out(g, lt_un(g, "y", IC_OP_ABS, t3));
    ic_program *p;
    lt_check2(c, g, 14, &p, NULL);
    const ic_buffer *b0 = NULL, *b2 = NULL, *b1 = NULL;
    for (int i = 0; i < ic_program_num_buffers(p); i++) {
        const ic_buffer *b = ic_program_buffer(p, i);
        if (strcmp(b->name, "t0") == 0) b0 = b;
        if (strcmp(b->name, "t1") == 0) b1 = b;
        if (strcmp(b->name, "t2") == 0) b2 = b;
    }
    cr_assert(b0 && b1 && b2 && b0->kind == IC_BUF_TEMP, "temps t0 t1 t2 exist");
    cr_assert_eq(b0->arena_offset, b2->arena_offset, "t0 (dead after kernel 1) and t2 share: %lld vs %lld",
                 (long long)b0->arena_offset, (long long)b2->arena_offset);
    cr_assert_neq(b0->arena_offset, b1->arena_offset, "t0 and t1 are alive together");
    cr_assert_leq(ic_program_arena_size(p), 2 * 256, "arena holds two temps: %lld",
                  (long long)ic_program_arena_size(p));
    ic_program_destroy(p);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

Test(lower, print_is_readable)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "pr");
    ic_value x = ict_input(g, "x", IC_F16, "4,8");
    ic_attrs su = lt_dims(IC_OP_SUM, 1, (int64_t[]){ 1 }, false);
    lt_out(g, lt_at(g, "s", IC_OP_SUM, lt_un(g, "t", IC_OP_EXP, x), &su));
    ic_program *p;
    cr_assert_eq(ic_lower(c, g, &p), IC_OK, "%s", ic_last_error(c));
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ic_program_print(f, p);
    fclose(f);
    const char *want[] = { "program 'pr': ", "buf0 = arg 0 f16[32] x", "kernel 0 cpu_exp_0: outer [32]",
                           "load f16 buf0[%0]  ; x", "cast f32", "kernel 1 cpu_sum_1: outer [4] inner [8]",
                           "reduce sum f64", "stage 1 body:", "acc f64 stage0.", "store f16 buf1[" };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        cr_assert(strstr(text, want[i]), "missing '%s' in:\n%s", want[i], text);
    free(text);
    ic_program_destroy(p);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* u8/i8/i16 live in memory only: loads widen to i32 (u8 zero-extends), every result wraps
 * to its width as PyTorch's does, stores truncate; promotion mixes them (u8 + i8 is i16). */
Test(lower, narrow_integers_wrap_and_promote)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "nw");
    ic_value u = ict_input(g, "u", IC_U8, "4,6"), i = ict_input(g, "i", IC_I8, "6");
    ic_value s = ict_input(g, "s", IC_I16, "4,1"), f = ict_input(g, "f", IC_F32, "4,6");
    ic_value ui = lt_bin(g, "ui", IC_OP_ADD, ic_val(u), ic_val(i));
    lt_out(g, ui);
    lt_out(g, lt_bin(g, "us", IC_OP_MUL, ic_val(ui), ic_val(s)));
    ic_value uu = lt_bin(g, "uu", IC_OP_ADD, ic_val(u), ic_val(u));
    lt_out(g, lt_bin(g, "uum", IC_OP_MUL, ic_val(uu), ic_scalar_i(3)));  /* wrapped before the mul */
    lt_out(g, lt_un(g, "un", IC_OP_NEG, u));
    lt_out(g, lt_un(g, "ia", IC_OP_ABS, i));
    lt_out(g, lt_bin(g, "ur", IC_OP_REMAINDER, ic_val(u), ic_scalar_i(7)));
    lt_out(g, lt_bin(g, "il", IC_OP_LT, ic_val(i), ic_scalar_i(300)));   /* 300 is 44 in i8 */
    lt_out(g, lt_bin(g, "ud", IC_OP_DIV, ic_val(u), ic_scalar_i(3)));
    ic_attrs ca = lt_attrs(IC_OP_CAST);
    ca.has_dtype = true;
    ca.dtype = IC_U8;
    lt_out(g, lt_at(g, "fu", IC_OP_CAST, f, &ca));
    ca.dtype = IC_F32;
    lt_out(g, lt_at(g, "sf", IC_OP_CAST, s, &ca));
    ic_attrs su = lt_dims(IC_OP_SUM, 1, (int64_t[]){ 1 }, false);
    lt_out(g, lt_at(g, "usum", IC_OP_SUM, u, &su));
    ic_attrs am = lt_dims(IC_OP_AMAX, 1, (int64_t[]){ 0 }, false);
    lt_out(g, lt_at(g, "uamax", IC_OP_AMAX, uu, &am));
    ic_attrs fa = lt_shape(IC_OP_FULL, "3");
    fa.has_dtype = true;
    fa.dtype = IC_I8;
    fa.value = (ic_scalar){ -7, -7, true };
    lt_out(g, lt_node(g, "full_i8", IC_OP_FULL, 0, NULL, &fa));
    ic_attrs ar = lt_attrs(IC_OP_ARANGE);
    ar.has_dtype = true;
    ar.dtype = IC_I16;
    ar.astart = (ic_scalar){ -3, -3, true };
    ar.aend = (ic_scalar){ 7, 7, true };
    lt_out(g, lt_node(g, "ar_i16", IC_OP_ARANGE, 0, NULL, &ar));
    lt_check(c, g, 77);
    ic_program *p;
    cr_assert_eq(ic_lower(c, g, &p), IC_OK, "%s", ic_last_error(c));
    char *text = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&text, &len);
    ic_program_print(fp, p);
    fclose(fp);
    const char *want[] = { "load u8", "load i8", "load i16", "cast i32", "store u8", "store i16" };
    for (size_t k = 0; k < sizeof want / sizeof *want; k++)
        cr_assert(strstr(text, want[k]), "missing '%s' in:\n%s", want[k], text);
    free(text);
    ic_program_destroy(p);
    ic_graph_destroy(g);

    /* by hand: u8 200 + 100 = 44, i8 -128 * -1 = -128 */
    g = ict_graph(c, "nh");
    ic_value a = ict_input(g, "a", IC_U8, "2"), b = ict_input(g, "b", IC_I8, "2");
    lt_out(g, lt_bin(g, "x", IC_OP_ADD, ic_val(a), ic_scalar_i(100)));
    lt_out(g, lt_bin(g, "y", IC_OP_MUL, ic_val(b), ic_scalar_i(-1)));
    cr_assert_eq(ic_lower(c, g, &p), IC_OK, "%s", ic_last_error(c));
    uint8_t av[2] = { 200, 155 }, xo[2];
    int8_t bv[2] = { -128, 127 }, yo[2];
    ic_tensor args[2], outs[2];
    ic_tensor_init(&args[0], IC_U8, 1, (int64_t[]){ 2 }, av);
    ic_tensor_init(&args[1], IC_I8, 1, (int64_t[]){ 2 }, bv);
    ic_tensor_init(&outs[0], IC_U8, 1, (int64_t[]){ 2 }, xo);
    ic_tensor_init(&outs[1], IC_I8, 1, (int64_t[]){ 2 }, yo);
    cr_assert_eq(ic_program_interpret(c, p, args, 2, outs, 2), IC_OK, "%s", ic_last_error(c));
    cr_assert(xo[0] == 44 && xo[1] == 255 && yo[0] == -128 && yo[1] == -127, "%d %d %d %d", xo[0], xo[1],
              yo[0], yo[1]);
    ic_program_destroy(p);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

Test(lower, refuses_symbolic_shapes)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "sym");
    ic_value x = ict_input(g, "x", IC_F32, "B,4");
    lt_out(g, lt_un(g, "y", IC_OP_EXP, x));
    ic_program *p = (ic_program *)1;
    ic_status s = ic_lower(c, g, &p);
    ict_assert_error(c, s, IC_EUNSUPPORTED, "'x'", "[B, 4]", "ic_graph_specialize");
    cr_assert_null(p, "no program on error");
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

Test(lower, interpret_checks_its_arguments)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "args");
    ic_value x = ict_input(g, "x", IC_F32, "2,3");
    lt_out(g, lt_un(g, "y", IC_OP_NEG, x));
    ic_program *p;
    cr_assert_eq(ic_lower(c, g, &p), IC_OK);
    float xv[6] = { 1, 2, 3, 4, 5, 6 }, yv[6];
    int64_t sh[2] = { 2, 3 }, wrong[2] = { 3, 3 };
    ic_tensor a, o;
    ic_tensor_init(&a, IC_F64, 2, sh, xv);
    ic_tensor_init(&o, IC_F32, 2, sh, yv);
    ict_assert_error(c, ic_program_interpret(c, p, &a, 1, &o, 1), IC_EINVAL, "argument 0 'x'", "f64");
    ic_tensor_init(&a, IC_F32, 2, wrong, xv);
    ict_assert_error(c, ic_program_interpret(c, p, &a, 1, &o, 1), IC_EINVAL, "9 elements");
    ict_assert_error(c, ic_program_interpret(c, p, &a, 0, &o, 1), IC_EINVAL, "takes 1 arguments");
    /* a transposed (strided) argument is read through its strides */
    float tv[6] = { 1, 4, 2, 5, 3, 6 };
    ic_tensor_init(&a, IC_F32, 2, sh, tv);
    a.strides[0] = 1;
    a.strides[1] = 2;
    cr_assert_eq(ic_program_interpret(c, p, &a, 1, &o, 1), IC_OK, "%s", ic_last_error(c));
    for (int i = 0; i < 6; i++)
        cr_assert_float_eq(yv[i], -(float)(i + 1), 0, "y[%d] = %g", i, yv[i]);
    ic_program_destroy(p);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

Test(lower, errors_pytorch_raises)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "pow");
    ic_value x = ict_input(g, "x", IC_I32, "3");
    lt_out(g, lt_bin(g, "y", IC_OP_POW, ic_val(x), ic_scalar_i(-2)));
    ic_program *p = NULL;
    ict_assert_error(c, ic_lower(c, g, &p), IC_EINVAL, "'y'", "negative integer powers");
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}
