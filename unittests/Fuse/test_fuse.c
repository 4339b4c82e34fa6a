/* test_fuse.c - kernel fusion: the seed pattern, softmax and layer_norm with their pointwise
 * neighbours, BERT FFN and attention shapes, multi-output kernels, what must not fuse, names
 * and reasons, buffer reuse, IC_NO_FUSION, and random graphs, each fused program run by
 * ic_program_interpret and compared with the reference executor. */
#include <stdlib.h>
#include "../Lower/lowertest.h"

static ic_program *fused(ic_ctx *c, ic_graph *g, uint64_t seed)
{
    ic_program *f;
    lt_check2(c, g, seed, NULL, &f);
    return f;
}

static const ic_kernel *kernel_with(const ic_program *p, const char *node)
{
    for (int i = 0; i < ic_program_num_kernels(p); i++)
        if (lt_kernel_has_node(ic_program_kernel(p, i), node))
            return ic_program_kernel(p, i);
    return NULL;
}

static void dump_if(bool bad, const ic_program *p)
{
    if (bad)
        ic_program_print(stderr, p);
}

#define ASSERT_KERNELS(p, n)                                                                 \
    do {                                                                                     \
        int k_ = ic_program_num_kernels(p);                                                  \
        dump_if(k_ != (n), (p));                                                             \
        cr_assert_eq(k_, (n), "%d kernels, want %d", k_, (n));                               \
    } while (0)

/* ((a + b1) + c) * b2 + b3 */
static ic_graph *seed_graph(ic_ctx *c, ic_dtype dt, const char *big, const char *row)
{
    ic_graph *g = ict_graph(c, "seed");
    ic_value a = ict_input(g, "a", dt, big), b1 = ict_input(g, "b1", dt, row);
    ic_value cc = ict_input(g, "c", dt, big), b2 = ict_input(g, "b2", dt, row);
    ic_value b3 = ict_input(g, "b3", dt, row);
    ic_value t0 = lt_bin(g, "t0", IC_OP_ADD, ic_val(a), ic_val(b1));
    ic_value t1 = lt_bin(g, "t1", IC_OP_ADD, ic_val(t0), ic_val(cc));
    ic_value t2 = lt_bin(g, "t2", IC_OP_MUL, ic_val(t1), ic_val(b2));
    lt_out(g, lt_bin(g, "y", IC_OP_ADD, ic_val(t2), ic_val(b3)));
    return g;
}

Test(fuse, seed_pattern_is_one_kernel)
{
    static const ic_dtype dts[] = { IC_F32, IC_F16, IC_BF16, IC_F64, IC_I32, IC_I64 };
    ic_ctx *c = ict_ctx();
    for (int d = 0; d < 6; d++) {
        ic_graph *g = seed_graph(c, dts[d], "33,17", "1,17");
        ic_program *f = fused(c, g, 1 + (uint64_t)d);
        ASSERT_KERNELS(f, 1);
        const ic_kernel *k = ic_program_kernel(f, 0);
        cr_assert_str_eq(k->name, "cpu_fused_add_mul_0");
        cr_assert_eq(k->nnodes, 4, "nodes t0 t1 t2 y: %d", k->nnodes);
        cr_assert(strstr(k->why, "'y' is a graph output"), "why: %s", k->why);
        cr_assert_eq(k->nstages, 1, "one body stage");
        cr_assert_eq(lt_count_op(f, IC_L_LOAD), 5, "each input loaded once: %d", lt_count_op(f, IC_L_LOAD));
        cr_assert_eq(lt_count_op(f, IC_L_STORE), 1, "one store");
        cr_assert_eq(ic_program_arena_size(f), 0, "no temps");
        ic_program_destroy(f);
        ic_graph_destroy(g);
    }
    ic_ctx_destroy(c);
}

/* Contiguous operands: the two loop dims merge into one without div/mod. */
Test(fuse, contiguous_pointwise_collapses_loops)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "cos_sin");
    ic_value x = ict_input(g, "x", IC_F32, "7,9,5"), y = ict_input(g, "y", IC_F32, "7,9,5");
    ic_value cx = lt_un(g, "cx", IC_OP_COS, x), sy = lt_un(g, "sy", IC_OP_SIN, y);
    lt_out(g, lt_bin(g, "z", IC_OP_ADD, ic_val(cx), ic_val(sy)));
    ic_program *f = fused(c, g, 2);
    ASSERT_KERNELS(f, 1);
    const ic_kernel *k = ic_program_kernel(f, 0);
    cr_assert_eq(k->nouter, 1, "one loop of 315: %d loops", k->nouter);
    cr_assert_eq(k->outer[0], 315);
    cr_assert_str_eq(k->name, "cpu_fused_cos_sin_add_0");
    cr_assert_eq(lt_count_op(f, IC_L_IDIV) + lt_count_op(f, IC_L_MOD), 0, "no div/mod");
    ic_program_destroy(f);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

Test(fuse, softmax_with_neighbours_is_one_kernel)
{
    static const ic_dtype dts[] = { IC_F32, IC_F16, IC_BF16, IC_F64 };
    ic_ctx *c = ict_ctx();
    for (int d = 0; d < 4; d++) {
        ic_graph *g = ict_graph(c, "softmax");
        ic_value x = ict_input(g, "x", dts[d], "6,37"), z = ict_input(g, "z", dts[d], "37");
        ic_value s = lt_bin(g, "scaled", IC_OP_MUL, ic_val(x), ic_scalar_f(0.125));
        ic_attrs at = lt_attrs(IC_OP_SOFTMAX);
        at.dim = -1;
        ic_value sm = lt_at(g, "sm", IC_OP_SOFTMAX, s, &at);
        lt_out(g, lt_bin(g, "y", IC_OP_ADD, ic_val(lt_bin(g, "y0", IC_OP_MUL, ic_val(sm), ic_scalar_i(2))), ic_val(z)));
        ic_program *f = fused(c, g, 3 + (uint64_t)d);
        ASSERT_KERNELS(f, 1);
        const ic_kernel *k = ic_program_kernel(f, 0);
        cr_assert_str_eq(k->name, "cpu_fused_mul_softmax_add_0");
        cr_assert_eq(k->nstages, 3, "max, sum, row");
        cr_assert(lt_kernel_has_node(k, "scaled") && lt_kernel_has_node(k, "sm"), "nodes listed");
        ic_program_destroy(f);
        ic_graph_destroy(g);
    }
    ic_ctx_destroy(c);
}

Test(fuse, plain_softmax_and_log_softmax_one_kernel_each)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "sm");
    ic_value x = ict_input(g, "x", IC_F32, "5,64");
    ic_attrs at = lt_attrs(IC_OP_SOFTMAX);
    at.dim = -1;
    lt_out(g, lt_at(g, "sm", IC_OP_SOFTMAX, x, &at));
    at.dim = 0;
    lt_out(g, lt_at(g, "lsm", IC_OP_LOG_SOFTMAX, x, &at));
    ic_program *f = fused(c, g, 4);
    ASSERT_KERNELS(f, 2);
    cr_assert_str_eq(ic_program_kernel(f, 0)->name, "cpu_softmax_0");
    ic_program_destroy(f);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* h = x + residual is an output too: one kernel stores both h and the norm. */
Test(fuse, layer_norm_of_residual_is_one_multi_output_kernel)
{
    static const ic_dtype dts[] = { IC_F32, IC_F16, IC_BF16 };
    ic_ctx *c = ict_ctx();
    for (int d = 0; d < 3; d++) {
        ic_graph *g = ict_graph(c, "ln");
        ic_value x = ict_input(g, "x", dts[d], "9,48"), r = ict_input(g, "r", dts[d], "9,48");
        ic_value w = ict_input(g, "w", dts[d], "48"), b = ict_input(g, "b", dts[d], "48");
        ic_value h = lt_bin(g, "h", IC_OP_ADD, ic_val(x), ic_val(r));
        ic_attrs ln = lt_shape(IC_OP_LAYER_NORM, "48");
        ic_operand o[3] = { ic_val(h), ic_val(w), ic_val(b) };
        ic_value y = lt_node(g, "ln", IC_OP_LAYER_NORM, 3, o, &ln);
        lt_out(g, lt_un(g, "act", IC_OP_RELU, y));
        lt_out(g, h);
        ic_program *f = fused(c, g, 5 + (uint64_t)d);
        ASSERT_KERNELS(f, 1);
        const ic_kernel *k = ic_program_kernel(f, 0);
        cr_assert_str_eq(k->name, "cpu_fused_add_layer_norm_relu_0");
        cr_assert_eq(lt_count_op(f, IC_L_STORE), 2, "stores h and act");
        cr_assert(strstr(k->why, "'act' is a graph output") && strstr(k->why, "'h' is a graph output"),
                  "why: %s", k->why);
        ic_program_destroy(f);
        ic_graph_destroy(g);
    }
    ic_ctx_destroy(c);
}

/* mean, x - mean, mean of squares, rsqrt: three dependent reductions in one kernel. */
Test(fuse, hand_written_layer_norm_is_one_kernel)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "manual_ln");
    ic_value x = ict_input(g, "x", IC_F32, "8,33");
    int64_t last[1] = { -1 };
    ic_attrs mean = lt_dims(IC_OP_MEAN, 1, last, true);
    ic_value m = lt_at(g, "m", IC_OP_MEAN, x, &mean);
    ic_value dlt = lt_bin(g, "d", IC_OP_SUB, ic_val(x), ic_val(m));
    ic_value sq = lt_bin(g, "sq", IC_OP_MUL, ic_val(dlt), ic_val(dlt));
    ic_value v = lt_at(g, "v", IC_OP_MEAN, sq, &mean);
    ic_value rs = lt_un(g, "rs", IC_OP_RSQRT, lt_bin(g, "ve", IC_OP_ADD, ic_val(v), ic_scalar_f(1e-5)));
    lt_out(g, lt_bin(g, "y", IC_OP_MUL, ic_val(dlt), ic_val(rs)));
    ic_program *f = fused(c, g, 6);
    ASSERT_KERNELS(f, 1);
    cr_assert_eq(ic_program_kernel(f, 0)->nstages, 3, "mean, variance, row");
    ic_program_destroy(f);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

Test(fuse, reduction_takes_producers_and_consumers)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "red");
    ic_value x = ict_input(g, "x", IC_F32, "10,12"), y = ict_input(g, "y", IC_F32, "10,1");
    int64_t d1[1] = { 1 }, d0[1] = { 0 };
    ic_attrs s1 = lt_dims(IC_OP_SUM, 1, d1, false), s0 = lt_dims(IC_OP_AMAX, 1, d0, true);
    ic_attrs am = lt_attrs(IC_OP_ARGMAX);
    am.dim = 1;
    ic_value p = lt_bin(g, "p", IC_OP_MUL, ic_val(x), ic_val(y));
    lt_out(g, lt_un(g, "rs", IC_OP_SQRT, lt_at(g, "s", IC_OP_SUM, lt_un(g, "e", IC_OP_EXP, p), &s1)));
    lt_out(g, lt_bin(g, "cm", IC_OP_SUB, ic_val(lt_at(g, "mx", IC_OP_AMAX, p, &s0)), ic_scalar_i(1)));
    lt_out(g, lt_at(g, "am", IC_OP_ARGMAX, lt_un(g, "ng", IC_OP_NEG, p), &am));
    ic_program *f = fused(c, g, 7);
    ASSERT_KERNELS(f, 2); /* row sum and row argmax share a kernel; the column max does not */
    cr_assert_str_eq(kernel_with(f, "s")->name, "cpu_fused_mul_exp_sum_sqrt_neg_argmax_0");
    cr_assert(lt_kernel_has_node(kernel_with(f, "am"), "ng"), "argmax takes its producer");
    cr_assert(!lt_kernel_has_node(kernel_with(f, "mx"), "s"), "the column max is its own kernel");
    ic_program_destroy(f);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* x / sum(x) over rows: the consumer goes into the reduction's row stage. */
Test(fuse, normalise_by_row_sum_is_one_kernel)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "rownorm");
    ic_value x = ict_input(g, "x", IC_F32, "6,10");
    int64_t last[1] = { -1 };
    ic_attrs s = lt_dims(IC_OP_SUM, 1, last, false), un = lt_attrs(IC_OP_UNSQUEEZE);
    un.dim = 1;
    ic_value sum = lt_at(g, "s", IC_OP_SUM, x, &s);
    lt_out(g, lt_bin(g, "y", IC_OP_DIV, ic_val(x), ic_val(lt_at(g, "su", IC_OP_UNSQUEEZE, sum, &un))));
    lt_out(g, sum);
    ic_program *f = fused(c, g, 8);
    ASSERT_KERNELS(f, 1);
    ic_program_destroy(f);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* Linear -> gelu -> linear -> + residual -> layer_norm (BERT's FFN). */
Test(fuse, bert_ffn)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "ffn");
    ic_value x = ict_input(g, "x", IC_F32, "2,5,16");
    ic_value w1 = ict_input(g, "w1", IC_F32, "32,16"), b1 = ict_input(g, "b1", IC_F32, "32");
    ic_value w2 = ict_input(g, "w2", IC_F32, "16,32"), b2 = ict_input(g, "b2", IC_F32, "16");
    ic_value lw = ict_input(g, "lw", IC_F32, "16"), lb = ict_input(g, "lb", IC_F32, "16");
    ic_operand o1[3] = { ic_val(x), ic_val(w1), ic_val(b1) };
    ic_value l1 = lt_node(g, "fc1", IC_OP_LINEAR, 3, o1, NULL);
    ic_value ge = lt_un(g, "gelu", IC_OP_GELU, l1);
    ic_operand o2[3] = { ic_val(ge), ic_val(w2), ic_val(b2) };
    ic_value l2 = lt_node(g, "fc2", IC_OP_LINEAR, 3, o2, NULL);
    ic_value h = lt_bin(g, "res", IC_OP_ADD, ic_val(l2), ic_val(x));
    ic_attrs ln = lt_shape(IC_OP_LAYER_NORM, "16");
    ic_operand o3[3] = { ic_val(h), ic_val(lw), ic_val(lb) };
    lt_out(g, lt_node(g, "ln", IC_OP_LAYER_NORM, 3, o3, &ln));
    ic_program *f = fused(c, g, 9);
    ASSERT_KERNELS(f, 3);
    cr_assert_str_eq(ic_program_kernel(f, 0)->name, "cpu_fused_linear_gelu_0");
    cr_assert_str_eq(ic_program_kernel(f, 1)->name, "cpu_linear_1");
    cr_assert_str_eq(ic_program_kernel(f, 2)->name, "cpu_fused_add_layer_norm_2");
    cr_assert(strstr(ic_program_kernel(f, 0)->why, "matmul 'fc2'"), "why: %s", ic_program_kernel(f, 0)->why);
    ic_program_destroy(f);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* softmax(q @ k^T * scale) @ v with heads split by views. */
Test(fuse, attention)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "attn");
    ic_value q = ict_input(g, "q", IC_F32, "2,7,12"), k = ict_input(g, "k", IC_F32, "2,7,12");
    ic_value v = ict_input(g, "v", IC_F32, "2,7,12");
    ic_attrs rs = lt_shape(IC_OP_RESHAPE, "2,7,3,4");
    ic_attrs pm = lt_dims(IC_OP_PERMUTE, 4, (int64_t[]){ 0, 2, 1, 3 }, false);
    ic_attrs kt = lt_dims(IC_OP_PERMUTE, 4, (int64_t[]){ 0, 2, 3, 1 }, false);
    ic_value qh = lt_at(g, "qh", IC_OP_PERMUTE, lt_at(g, "qr", IC_OP_RESHAPE, q, &rs), &pm);
    ic_value kh = lt_at(g, "kh", IC_OP_PERMUTE, lt_at(g, "kr", IC_OP_RESHAPE, k, &rs), &kt);
    ic_value vh = lt_at(g, "vh", IC_OP_PERMUTE, lt_at(g, "vr", IC_OP_RESHAPE, v, &rs), &pm);
    ic_value sc = lt_bin(g, "scores", IC_OP_MATMUL, ic_val(qh), ic_val(kh));
    ic_value ss = lt_bin(g, "scaled", IC_OP_MUL, ic_val(sc), ic_scalar_f(0.5));
    ic_attrs sm = lt_attrs(IC_OP_SOFTMAX);
    sm.dim = -1;
    ic_value p = lt_at(g, "probs", IC_OP_SOFTMAX, ss, &sm);
    ic_value o = lt_bin(g, "ctx", IC_OP_MATMUL, ic_val(p), ic_val(vh));
    ic_attrs back = lt_dims(IC_OP_PERMUTE, 4, (int64_t[]){ 0, 2, 1, 3 }, false), flat = lt_shape(IC_OP_RESHAPE, "2,7,12");
    lt_out(g, lt_at(g, "out", IC_OP_RESHAPE, lt_at(g, "ob", IC_OP_PERMUTE, o, &back), &flat));
    ic_program *f = fused(c, g, 10);
    ASSERT_KERNELS(f, 3);
    cr_assert_str_eq(ic_program_kernel(f, 0)->name, "cpu_matmul_0");
    cr_assert_str_eq(ic_program_kernel(f, 1)->name, "cpu_fused_mul_softmax_1");
    cr_assert(lt_kernel_has_node(ic_program_kernel(f, 2), "out"), "the output view is stored by the matmul");
    ic_program_destroy(f);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

Test(fuse, views_cat_embedding_where_fuse_into_pointwise)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "gathers");
    ic_value w = ict_input(g, "w", IC_F32, "11,6"), ix = ict_input(g, "ix", IC_I64, "4,5");
    cr_assert_eq(ic_graph_set_input_range(g, ix, 0, 11), IC_OK);
    ic_value a = ict_input(g, "a", IC_F32, "4,5,2"), cond = ict_input(g, "cond", IC_BOOL, "5,1");
    ic_operand eo[2] = { ic_val(w), ic_val(ix) };
    ic_value e = lt_node(g, "emb", IC_OP_EMBEDDING, 2, eo, NULL);          /* [4, 5, 6] */
    ic_value ea = lt_bin(g, "ea", IC_OP_MUL, ic_val(e), ic_scalar_f(3));
    ic_attrs ct = lt_attrs(IC_OP_CAT);
    ct.dim = -1;
    ic_operand co[2] = { ic_val(ea), ic_val(a) };
    ic_value cat = lt_node(g, "cat", IC_OP_CAT, 2, co, &ct);               /* [4, 5, 8] */
    ic_attrs tr = lt_attrs(IC_OP_TRANSPOSE);
    tr.dim0 = 0;
    tr.dim1 = 1;
    ic_value t = lt_at(g, "t", IC_OP_TRANSPOSE, cat, &tr);                  /* [5, 4, 8] */
    ic_attrs un = lt_attrs(IC_OP_UNSQUEEZE);
    un.dim = 2;
    ic_value cu = lt_at(g, "cu", IC_OP_UNSQUEEZE, cond, &un);               /* [5, 1, 1] */
    ic_operand wo[3] = { ic_val(cu), ic_val(t), ic_scalar_f(-1) };
    lt_out(g, lt_node(g, "y", IC_OP_WHERE, 3, wo, NULL));
    ic_program *f = fused(c, g, 11);
    ASSERT_KERNELS(f, 1);
    cr_assert_str_eq(ic_program_kernel(f, 0)->name, "cpu_fused_embedding_mul_cat_where_0");
    ic_program_destroy(f);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* ---- what must not fuse ---- */

Test(fuse, matmul_operands_are_materialised)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "mmop");
    ic_value x = ict_input(g, "x", IC_F32, "6,8"), w = ict_input(g, "w", IC_F32, "8,5");
    ic_value a = lt_un(g, "a", IC_OP_TANH, x);
    lt_out(g, lt_bin(g, "y", IC_OP_MATMUL, ic_val(a), ic_val(w)));
    ic_program *f = fused(c, g, 12);
    ASSERT_KERNELS(f, 2);
    const ic_kernel *k = ic_program_kernel(f, 0);
    cr_assert_str_eq(k->name, "cpu_tanh_0");
    cr_assert(strstr(k->why, "operand of matmul 'y'"), "why: %s", k->why);
    ic_program_destroy(f);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* A matmul read with a broadcasting index is not recomputed per broadcast copy. */
Test(fuse, no_matmul_into_broadcasting_consumer)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "bcast");
    ic_value x = ict_input(g, "x", IC_F32, "4,6"), w = ict_input(g, "w", IC_F32, "6,5");
    ic_value big = ict_input(g, "big", IC_F32, "3,4,5");
    ic_value m = lt_bin(g, "m", IC_OP_MATMUL, ic_val(x), ic_val(w));
    lt_out(g, lt_bin(g, "y", IC_OP_ADD, ic_val(m), ic_val(big)));
    ic_program *f = fused(c, g, 13);
    ASSERT_KERNELS(f, 2);
    const ic_kernel *k = ic_program_kernel(f, 0);
    cr_assert(strstr(k->why, "'m' is read by the kernel of 'y'"), "why: %s", k->why);
    ic_program_destroy(f);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* sum over dim 0 added back: fuses when the row loop can hold the consumer, else not. */
Test(fuse, reduction_consumer_with_other_domain_is_separate)
{
    ic_ctx *c = ict_ctx();
    for (int same = 0; same < 2; same++) {
        ic_graph *g = ict_graph(c, "colsum");
        ic_value x = ict_input(g, "x", IC_F32, "7,5"), z = ict_input(g, "z", IC_F32, same ? "7,5" : "3,5");
        int64_t d0[1] = { 0 };
        ic_attrs s = lt_dims(IC_OP_SUM, 1, d0, false);
        ic_value cs = lt_at(g, "cs", IC_OP_SUM, x, &s);
        lt_out(g, lt_bin(g, "y", IC_OP_ADD, ic_val(z), ic_val(cs)));
        ic_program *f = fused(c, g, 14 + (uint64_t)same);
        ASSERT_KERNELS(f, same ? 1 : 2);
        ic_program_destroy(f);
        ic_graph_destroy(g);
    }
    ic_ctx_destroy(c);
}

Test(fuse, pointwise_siblings_and_outputs_share_a_kernel)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "multi");
    ic_value x = ict_input(g, "x", IC_F32, "5,6");
    ic_value y1 = lt_bin(g, "y1", IC_OP_ADD, ic_val(x), ic_scalar_i(1));
    lt_out(g, y1);
    lt_out(g, lt_bin(g, "y2", IC_OP_MUL, ic_val(y1), ic_scalar_i(2)));
    ic_attrs rs = lt_shape(IC_OP_RESHAPE, "30");
    lt_out(g, lt_at(g, "y3", IC_OP_RESHAPE, y1, &rs));
    ic_program *f = fused(c, g, 15);
    ASSERT_KERNELS(f, 1);
    cr_assert_eq(lt_count_op(f, IC_L_STORE), 3, "three outputs stored by one kernel");
    cr_assert_eq(lt_count_op(f, IC_L_LOAD), 1, "x loaded once");
    ic_program_destroy(f);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* s feeds a matmul whose result (transposed) meets s again: fusing s into the consumer
 * would need the matmul in between, so they stay apart. */
Test(fuse, no_fusion_across_a_kernel_in_between)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "cycle");
    ic_value x = ict_input(g, "x", IC_F32, "6,6"), w = ict_input(g, "w", IC_F32, "1,6");
    ic_attrs su = lt_dims(IC_OP_SUM, 1, (int64_t[]){ 1 }, true);
    ic_value s = lt_at(g, "s", IC_OP_SUM, x, &su);                            /* [6, 1] */
    ic_value m = lt_bin(g, "m", IC_OP_MATMUL, ic_val(s), ic_val(w));          /* [6, 6] */
    ic_attrs tr = lt_attrs(IC_OP_TRANSPOSE);
    tr.dim1 = 1;
    ic_value mt = lt_at(g, "mt", IC_OP_TRANSPOSE, m, &tr);
    ic_value t = lt_bin(g, "t", IC_OP_SUB, ic_val(x), ic_val(s));
    lt_out(g, lt_bin(g, "y", IC_OP_ADD, ic_val(t), ic_val(mt)));
    ic_program *f = fused(c, g, 18);
    ASSERT_KERNELS(f, 3);
    cr_assert_str_eq(ic_program_kernel(f, 0)->name, "cpu_sum_0");
    cr_assert_str_eq(ic_program_kernel(f, 1)->name, "cpu_matmul_1");
    ic_program_destroy(f);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* One reduction read by a row consumer and an outer consumer: computed once. */
Test(fuse, one_reduction_feeds_row_and_outer_consumers)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "shared");
    ic_value x = ict_input(g, "x", IC_F32, "5,9");
    ic_attrs su = lt_dims(IC_OP_AMAX, 1, (int64_t[]){ -1 }, true);
    ic_value s = lt_at(g, "s", IC_OP_AMAX, x, &su);
    lt_out(g, lt_bin(g, "centered", IC_OP_SUB, ic_val(x), ic_val(s)));
    lt_out(g, lt_bin(g, "twice", IC_OP_MUL, ic_val(s), ic_scalar_i(2)));
    lt_out(g, s);
    ic_program *f = fused(c, g, 19);
    ASSERT_KERNELS(f, 1);
    cr_assert_eq(lt_count_op(f, IC_L_REDUCE), 1, "the max is reduced once");
    cr_assert_eq(lt_count_op(f, IC_L_STORE), 3, "three outputs");
    ic_program_destroy(f);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

Test(fuse, repeated_outputs_and_outputs_that_are_inputs)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "repeat");
    ic_value x = ict_input(g, "x", IC_I32, "3,4");
    ic_value y = lt_bin(g, "y", IC_OP_MUL, ic_val(x), ic_scalar_i(3));
    ic_attrs tr = lt_attrs(IC_OP_TRANSPOSE);
    tr.dim1 = 1;
    lt_out(g, y);
    lt_out(g, y);
    lt_out(g, x);
    lt_out(g, lt_at(g, "yt", IC_OP_TRANSPOSE, y, &tr));
    lt_out(g, lt_at(g, "xt", IC_OP_TRANSPOSE, x, &tr));
    ic_program *f = fused(c, g, 20);
    cr_assert_leq(ic_program_num_kernels(f), 3, "%d kernels", ic_program_num_kernels(f));
    ic_program_destroy(f);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* An expensive value read by several kernels is computed once. */
Test(fuse, expensive_shared_value_is_materialised)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "costly");
    ic_value x = ict_input(g, "x", IC_F32, "4,8");
    ic_value t = x;
    for (int i = 0; i < 12; i++) {
        char name[16];
        snprintf(name, sizeof name, "g%d", i);
        t = lt_un(g, name, IC_OP_GELU, t);
    }
    ic_attrs s0 = lt_dims(IC_OP_SUM, 1, (int64_t[]){ 0 }, false), s1 = lt_dims(IC_OP_SUM, 1, (int64_t[]){ 1 }, false);
    lt_out(g, lt_at(g, "rows", IC_OP_SUM, t, &s1));
    lt_out(g, lt_at(g, "cols", IC_OP_SUM, t, &s0));
    ic_program *f = fused(c, g, 21);
    ASSERT_KERNELS(f, 2); /* gelus + row sums, storing g11 for the column sums */
    const ic_kernel *k = kernel_with(f, "g11");
    cr_assert(k && strstr(k->why, "costly"), "why: %s", k ? k->why : "-");
    cr_assert(!lt_kernel_has_node(kernel_with(f, "cols"), "g0"), "the column sums do not recompute");
    ic_program_destroy(f);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* Broadcast copies of an expensive value are not recomputed; of a cheap one they are. */
Test(fuse, expensive_value_under_broadcast_is_materialised)
{
    ic_ctx *c = ict_ctx();
    for (int costly = 0; costly < 2; costly++) {
        ic_graph *g = ict_graph(c, "bcast_cost");
        ic_value x = ict_input(g, "x", IC_F32, "8"), z = ict_input(g, "z", IC_F32, "16,8");
        ic_value t = x;
        for (int i = 0; i < (costly ? 12 : 1); i++) {
            char name[16];
            snprintf(name, sizeof name, "g%d", i);
            t = lt_un(g, name, costly ? IC_OP_GELU : IC_OP_EXP, t);
        }
        lt_out(g, lt_bin(g, "y", IC_OP_ADD, ic_val(t), ic_val(z)));
        ic_program *f = fused(c, g, 22 + (uint64_t)costly);
        ASSERT_KERNELS(f, costly ? 2 : 1);
        if (costly)
            cr_assert(strstr(ic_program_kernel(f, 0)->why, "broadcast"), "why: %s", ic_program_kernel(f, 0)->why);
        ic_program_destroy(f);
        ic_graph_destroy(g);
    }
    ic_ctx_destroy(c);
}

/* Independent reductions of the same rows read them once; other axes stay apart. */
Test(fuse, sibling_reductions_share_a_kernel)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "siblings");
    ic_value x = ict_input(g, "x", IC_F32, "9,20");
    ic_attrs r1 = lt_dims(IC_OP_SUM, 1, (int64_t[]){ 1 }, false), r0 = lt_dims(IC_OP_SUM, 1, (int64_t[]){ 0 }, false);
    ic_attrs am = lt_attrs(IC_OP_ARGMAX), ln = lt_shape(IC_OP_LAYER_NORM, "20");
    am.dim = -1;
    lt_out(g, lt_at(g, "rowsum", IC_OP_SUM, x, &r1));
    lt_out(g, lt_at(g, "rowmax", IC_OP_AMAX, x, &r1));
    lt_out(g, lt_at(g, "rowarg", IC_OP_ARGMAX, x, &am));
    lt_out(g, lt_at(g, "colsum", IC_OP_SUM, x, &r0));
    lt_out(g, lt_at(g, "colmean", IC_OP_MEAN, x, &r0));
    lt_out(g, lt_at(g, "norm", IC_OP_LAYER_NORM, x, &ln));
    ic_value e = lt_un(g, "e", IC_OP_EXP, x);
    lt_out(g, lt_un(g, "t", IC_OP_TANH, x));
    lt_out(g, e);
    ic_program *f = fused(c, g, 24);
    ASSERT_KERNELS(f, 3); /* row reductions + norm, column reductions, pointwise */
    cr_assert_eq(kernel_with(f, "rowsum"), kernel_with(f, "rowarg"), "row reductions together");
    cr_assert_eq(kernel_with(f, "rowsum"), kernel_with(f, "norm"), "the norm of the same rows too");
    cr_assert_eq(kernel_with(f, "colsum"), kernel_with(f, "colmean"), "column reductions together");
    cr_assert_neq(kernel_with(f, "colsum"), kernel_with(f, "rowsum"), "rows and columns apart");
    cr_assert_eq(kernel_with(f, "t"), kernel_with(f, "e"), "pointwise siblings together");
    ic_program_destroy(f);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* ---- program properties ---- */

Test(fuse, temps_share_arena_when_lifetimes_are_disjoint)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "mlp");
    ic_value x = ict_input(g, "x", IC_F32, "4,8"), w = ict_input(g, "w", IC_F32, "8,8");
    ic_value t = lt_un(g, "t", IC_OP_EXP, x);
    ic_value r1 = lt_un(g, "r1", IC_OP_RELU, lt_bin(g, "m1", IC_OP_MATMUL, ic_val(t), ic_val(w)));
    ic_value r2 = lt_un(g, "r2", IC_OP_RELU, lt_bin(g, "m2", IC_OP_MATMUL, ic_val(r1), ic_val(w)));
    lt_out(g, lt_bin(g, "m3", IC_OP_MATMUL, ic_val(r2), ic_val(w)));
    ic_program *f = fused(c, g, 16);
    ASSERT_KERNELS(f, 4);
    int64_t off[3] = { -2, -2, -2 };
    for (int i = 0; i < ic_program_num_buffers(f); i++) {
        const ic_buffer *b = ic_program_buffer(f, i);
        for (int j = 0; j < 3; j++)
            if (strcmp(b->name, (const char *[]){ "t", "r1", "r2" }[j]) == 0 && b->kind == IC_BUF_TEMP)
                off[j] = b->arena_offset;
    }
    cr_assert(off[0] >= 0 && off[1] >= 0 && off[2] >= 0, "three temps");
    cr_assert_eq(off[0], off[2], "t and r2 share bytes: %lld vs %lld", (long long)off[0], (long long)off[2]);
    cr_assert_neq(off[0], off[1], "t and r1 overlap in time");
    cr_assert_eq(ic_program_arena_size(f), 2 * 128, "arena of two temps: %lld", (long long)ic_program_arena_size(f));
    ic_program_destroy(f);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

Test(fuse, no_fusion_option_and_env)
{
    for (int how = 0; how < 2; how++) {
        if (how)
            setenv("IC_NO_FUSION", "1", 1);
        ic_ctx *c = ict_ctx();
        ic_graph *g = seed_graph(c, IC_F32, "8,4", "1,4");
        ic_program *p, *f;
        cr_assert_eq(ic_lower(c, g, &p), IC_OK);
        ic_fuse_options o;
        ic_fuse_options_init(&o);
        o.no_fusion = how == 0;
        cr_assert_eq(ic_fuse(c, p, &o, &f), IC_OK, "%s", ic_last_error(c));
        ASSERT_KERNELS(f, 4);
        cr_assert(strstr(ic_program_kernel(f, 0)->why, how ? "IC_NO_FUSION" : "no_fusion"), "why: %s",
                  ic_program_kernel(f, 0)->why);
        cr_assert_str_eq(ic_program_kernel(f, 1)->name, "cpu_add_1");
        ic_program_destroy(f);
        ic_program_destroy(p);
        ic_graph_destroy(g);
        ic_ctx_destroy(c);
    }
    unsetenv("IC_NO_FUSION");
}

static char *print_to_string(const ic_program *p)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ic_program_print(f, p);
    fclose(f);
    return text;
}

Test(fuse, input_program_is_unchanged_and_names_take_prefixes)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = seed_graph(c, IC_F32, "8,4", "1,4");
    ic_program *p, *f;
    cr_assert_eq(ic_lower(c, g, &p), IC_OK);
    char *before = print_to_string(p);
    cr_assert_eq(ic_fuse(c, p, NULL, &f), IC_OK, "%s", ic_last_error(c));
    char *after = print_to_string(p);
    cr_assert_str_eq(before, after, "ic_fuse must not change its input");
    char name[64];
    ic_kernel_format_name(name, sizeof name, "gpu_", f, ic_program_kernel(f, 0), 7);
    cr_assert_str_eq(name, "gpu_fused_add_mul_7");
    ic_kernel_format_name(name, sizeof name, "gpu_", p, ic_program_kernel(p, 2), 2);
    cr_assert_str_eq(name, "gpu_mul_2");
    free(before);
    free(after);
    ic_program_destroy(f);
    ic_program_destroy(p);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* f16 intermediates rounded as if stored: fused and unfused results are bit-identical. */
Test(fuse, f16_fused_equals_unfused_exactly)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "half");
    ic_value x = ict_input(g, "x", IC_F16, "4,33"), y = ict_input(g, "y", IC_F16, "33");
    ic_value t = lt_un(g, "t", IC_OP_EXP, lt_bin(g, "s", IC_OP_SUB, ic_val(x), ic_val(y)));
    lt_out(g, lt_un(g, "z", IC_OP_TANH, lt_bin(g, "m", IC_OP_MUL, ic_val(t), ic_val(x))));
    ic_program *p, *f;
    lt_check2(c, g, 17, &p, &f);
    lt_data d;
    lt_data_make(c, g, 17, &d);
    ic_tensor o1, o2;
    ic_tensor_init(&o1, IC_F16, 2, d.want[0].shape, NULL);
    ic_tensor_init(&o2, IC_F16, 2, d.want[0].shape, NULL);
    cr_assert_eq(ic_tensor_alloc(c, &o1), IC_OK);
    cr_assert_eq(ic_tensor_alloc(c, &o2), IC_OK);
    cr_assert_eq(ic_program_interpret(c, p, d.args, d.nargs, &o1, 1), IC_OK);
    cr_assert_eq(ic_program_interpret(c, f, d.args, d.nargs, &o2, 1), IC_OK);
    cr_assert(memcmp(o1.data, o2.data, 4 * 33 * 2) == 0, "fused f16 differs from unfused");
    ic_tensor_free(c, &o1);
    ic_tensor_free(c, &o2);
    lt_data_free(&d);
    ic_program_destroy(p);
    ic_program_destroy(f);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* Options: without cast emulation f16 results stay within tolerance; without collapsing
 * the loops keep the tensor's dims. */
Test(fuse, options_emulate_casts_off_and_collapse_off)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "opts");
    ic_value x = ict_input(g, "x", IC_F16, "7,9,5"), y = ict_input(g, "y", IC_F16, "7,9,5");
    ic_value t = lt_bin(g, "t", IC_OP_MUL, ic_val(x), ic_val(y));
    lt_out(g, lt_un(g, "z", IC_OP_SIGMOID, t));
    lt_data d;
    lt_data_make(c, g, 25, &d);
    ic_program *p, *f;
    cr_assert_eq(ic_lower(c, g, &p), IC_OK);
    ic_fuse_options o;
    ic_fuse_options_init(&o);
    o.emulate_precision_casts = false;
    o.collapse_dims = false;
    o.prefix = "test_";
    cr_assert_eq(ic_fuse(c, p, &o, &f), IC_OK, "%s", ic_last_error(c));
    lt_compare(c, f, &d, "fused, no emulation");
    const ic_kernel *k = ic_program_kernel(f, 0);
    cr_assert_eq(k->nouter, 3, "dims kept: %d loops", k->nouter);
    cr_assert_str_eq(k->name, "test_fused_mul_sigmoid_0");
    cr_assert_eq(lt_count_op(f, IC_L_CAST), 3, "two loads and the store convert, nothing rounds in "
                 "between: %d casts", lt_count_op(f, IC_L_CAST));
    lt_data_free(&d);
    ic_program_destroy(f);
    ic_program_destroy(p);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* ---- random graphs ---- */

typedef struct {
    ic_graph *g;
    ic_value v[64];
    int n;
    uint64_t rng;
} rg;

static int pick(rg *r, int n) { return (int)(lt_rand(&r->rng) % (uint64_t)n); }

static void add_random_node(rg *r, int i)
{
    char name[16];
    snprintf(name, sizeof name, "n%d", i);
    ic_value a = r->v[pick(r, r->n)], b = r->v[pick(r, r->n)], y = -1;
    ic_operand o[3] = { ic_val(a), ic_val(b), ic_scalar_f(0.5) };
    ic_attrs at;
    switch (pick(r, 12)) {
    case 0: case 1: {
        static const ic_op ops[] = { IC_OP_ADD, IC_OP_MUL, IC_OP_MAXIMUM, IC_OP_SUB };
        ic_graph_add_node(r->g, name, ops[pick(r, 4)], 2, o, NULL, &y);
        break;
    }
    case 2: {
        static const ic_op ops[] = { IC_OP_EXP, IC_OP_TANH, IC_OP_NEG, IC_OP_RELU, IC_OP_SIGMOID };
        ic_graph_add_node(r->g, name, ops[pick(r, 5)], 1, o, NULL, &y);
        break;
    }
    case 3: {
        ic_op op = pick(r, 2) ? IC_OP_SUM : IC_OP_AMAX;
        at = lt_dims(op, 1, (int64_t[]){ pick(r, 2) }, pick(r, 3) != 0);
        ic_graph_add_node(r->g, name, op, 1, o, &at, &y);
        break;
    }
    case 4:
        at = lt_attrs(IC_OP_SOFTMAX);
        at.dim = pick(r, 2);
        ic_graph_add_node(r->g, name, IC_OP_SOFTMAX, 1, o, &at, &y);
        break;
    case 5:
        at = lt_shape(IC_OP_LAYER_NORM, "6");
        ic_graph_add_node(r->g, name, IC_OP_LAYER_NORM, 1, o, &at, &y);
        break;
    case 6:
        ic_graph_add_node(r->g, name, IC_OP_MATMUL, 2, o, NULL, &y);
        break;
    case 7:
        at = lt_attrs(IC_OP_TRANSPOSE);
        at.dim0 = 0;
        at.dim1 = 1;
        ic_graph_add_node(r->g, name, IC_OP_TRANSPOSE, 1, o, &at, &y);
        break;
    case 8:
        at = lt_shape(IC_OP_EXPAND, "6,6");
        ic_graph_add_node(r->g, name, IC_OP_EXPAND, 1, o, &at, &y);
        break;
    case 9: {
        ic_operand w[3] = { ic_val(r->v[1]), ic_val(a), ic_val(b) };
        ic_graph_add_node(r->g, name, IC_OP_WHERE, 3, w, NULL, &y);
        break;
    }
    case 10: {
        int k = pick(r, 4);
        if (k == 0) {
            at = lt_attrs(IC_OP_CAT);
            at.dim = pick(r, 2);
            ic_graph_add_node(r->g, name, IC_OP_CAT, 2, o, &at, &y);
        } else if (k == 1) {
            at = lt_attrs(IC_OP_SLICE);
            at.dim = pick(r, 2);
            at.has_start = true;
            at.start = pick(r, 2);
            at.step = 1 + pick(r, 2);
            ic_graph_add_node(r->g, name, IC_OP_SLICE, 1, o, &at, &y);
        } else if (k == 2) {
            at = lt_attrs(IC_OP_ARGMAX);
            at.dim = pick(r, 2);
            at.keepdim = true;
            ic_graph_add_node(r->g, name, IC_OP_ARGMAX, 1, o, &at, &y);
        } else {
            ic_operand l[3] = { ic_val(a), ic_val(b), ic_val(r->v[2]) };
            ic_graph_add_node(r->g, name, IC_OP_LINEAR, 2, l, NULL, &y);
        }
        break;
    }
    default:
        at = lt_shape(IC_OP_RESHAPE, pick(r, 2) ? "36" : "6,6");
        ic_graph_add_node(r->g, name, IC_OP_RESHAPE, 1, o, &at, &y);
        at = lt_shape(IC_OP_RESHAPE, "6,6");
        if (y >= 0) {
            snprintf(name, sizeof name, "n%db", i);
            ic_operand q = ic_val(y);
            ic_graph_add_node(r->g, name, IC_OP_RESHAPE, 1, &q, &at, &y);
        }
    }
    if (y >= 0 && r->n < 64)
        r->v[r->n++] = y;
}

/* Random graphs over [6, 6] tensors (and [6, 1] / [1, 6] reductions): whatever the
 * scheduler decides, the fused program computes what the reference computes. */
Test(fuse, random_graphs_match_the_reference)
{
    ic_ctx *c = ict_ctx();
    int total_kernels = 0, total_nodes = 0;
    for (int t = 0; t < 150; t++) {
        ic_dtype dt = t % 5 == 4 ? IC_F16 : t % 5 == 3 ? IC_F64 : IC_F32;
        rg r = { ict_graph(c, "random"), { 0 }, 0, 1234567u + (uint64_t)t * 7919u };
        r.v[r.n++] = ict_input(r.g, "x", dt, "6,6");
        r.v[r.n++] = ict_input(r.g, "m", IC_BOOL, "6,6");
        r.v[r.n++] = ict_input(r.g, "y", dt, "6,1");
        for (int i = 0; i < 14; i++)
            add_random_node(&r, i);
        for (int k = 0; k < 3; k++)
            if (r.n > 3)
                lt_out(r.g, r.v[3 + pick(&r, r.n - 3)]);
        if (pick(&r, 2))
            lt_out(r.g, r.v[r.n - 1]);
        if (ic_graph_num_outputs(r.g) == 0)
            lt_out(r.g, r.v[0]);
        ic_program *f = fused(c, r.g, 100 + (uint64_t)t);
        total_kernels += ic_program_num_kernels(f);
        total_nodes += ic_graph_num_nodes(r.g);
        ic_program_destroy(f);
        ic_graph_destroy(r.g);
    }
    cr_assert_lt(total_kernels * 3, total_nodes, "fusion should cut kernels: %d kernels for %d nodes",
                 total_kernels, total_nodes);
    ic_ctx_destroy(c);
}

/* ---- out of memory ---- */

typedef struct {
    long left;  /* allocations that still succeed */
    bool once;  /* fail only allocation number `left`, not every one after it */
} failing;

static void *failing_alloc(void *user, void *ptr, size_t size)
{
    failing *f = user;
    if (size == 0) {
        free(ptr);
        return NULL;
    }
    long k = f->left--;
    if (f->once ? k == 0 : k <= 0)
        return NULL;
    return realloc(ptr, size);
}

/* Every allocation of lowering, fusion and interpretation may fail: an error, never a
 * crash or a leak (the sanitizer build checks the leaks). */
Test(fuse, allocation_failures_are_errors)
{
    ic_ctx *c0 = ict_ctx();
    ic_graph *g = ict_graph(c0, "oom");
    ic_value x = ict_input(g, "x", IC_F32, "4,8"), w = ict_input(g, "w", IC_F32, "8,8");
    ic_value h = lt_bin(g, "h", IC_OP_ADD, ic_val(lt_un(g, "e", IC_OP_EXP, x)), ic_scalar_i(1));
    ic_attrs ln = lt_shape(IC_OP_LAYER_NORM, "8"), tr = lt_attrs(IC_OP_TRANSPOSE);
    tr.dim1 = 1;
    ic_value y = lt_at(g, "ln", IC_OP_LAYER_NORM, h, &ln);
    lt_out(g, lt_bin(g, "m", IC_OP_MATMUL, ic_val(y), ic_val(lt_at(g, "wt", IC_OP_TRANSPOSE, w, &tr))));
    lt_out(g, h);
    for (int once = 0; once < 2; once++) {
    int ok_at = -1;
    for (long n = 0; n < 20000 && ok_at < 0; n += n < 200 ? 1 : 7) {
        failing f = { n, once };
        ic_ctx_options o = { failing_alloc, &f, NULL, NULL };
        ic_ctx *c;
        if (ic_ctx_create(&o, &c) != IC_OK)
            continue;
        ic_program *p = NULL, *fp = NULL;
        ic_status s = ic_lower(c, g, &p);
        if (s == IC_OK)
            s = ic_fuse(c, p, NULL, &fp);
        if (s == IC_OK && f.left >= 0)
            ok_at = (int)n; /* the failing allocation never came: past the last one */
        else if (s != IC_OK)
            cr_assert(ic_last_error(c)[0] != 0, "status %d without a message", s);
        ic_program_destroy(fp);
        ic_program_destroy(p);
        ic_ctx_destroy(c);
    }
    cr_assert_gt(ok_at, 100, "lowering succeeded after %d allocations: too few to be real", ok_at);
    }
    ic_graph_destroy(g);
    ic_ctx_destroy(c0);
}

/* conv -> scale, shift, relu -> conv: the pointwise chain the second conv's window copy
 * gathers is materialised, so it runs once as the first conv's GEMM epilogue (not once per
 * tap inside the copy) and the copy is a pure gather (the GPU's implicit GEMM skips it). */
Test(fuse, values_gathered_by_conv_windows_are_epilogues)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "convs");
    ic_value x = ict_input(g, "x", IC_F32, "2,4,7,6"), w = ict_input(g, "w", IC_F32, "5,4,3,3");
    ic_value s = ict_input(g, "s", IC_F32, "5,1,1"), w2 = ict_input(g, "w2", IC_F32, "3,5,3,3");
    ic_attrs a;
    ic_attrs_init(&a, IC_OP_CONV);
    a.npadding = 2, a.padding[0] = a.padding[1] = 1;
    ic_value c1;
    cr_assert_eq(ic_graph_add_node(g, "c1", IC_OP_CONV, 2, (ic_operand[]){ ic_val(x), ic_val(w) }, &a, &c1), IC_OK,
                 "%s", ic_last_error(c));
    ic_value r = lt_un(g, "r", IC_OP_RELU, lt_bin(g, "sc", IC_OP_MUL, ic_val(c1), ic_val(s)));
    ic_value c2;
    cr_assert_eq(ic_graph_add_node(g, "c2", IC_OP_CONV, 2, (ic_operand[]){ ic_val(r), ic_val(w2) }, &a, &c2), IC_OK,
                 "%s", ic_last_error(c));
    lt_out(g, c2);
    ic_graph *e = NULL;
    cr_assert_eq(ic_graph_expand(c, g, &e), IC_OK, "%s", ic_last_error(c));
    ic_program *f = fused(c, e, 21);
    const ic_kernel *k = kernel_with(f, "r"), *win = NULL;
    bool has_mm = false;
    for (int i = 0; k && i < k->nnodes; i++)
        has_mm |= !strncmp(k->nodes[i], "c1.mm", 5);
    for (int i = 0; i < ic_program_num_kernels(f); i++)
        for (int j = 0; j < ic_program_kernel(f, i)->nnodes; j++)
            if (!strncmp(ic_program_kernel(f, i)->nodes[j], "c2.im2col", 9))
                win = ic_program_kernel(f, i);
    dump_if(!has_mm || !win, f);
    cr_assert(has_mm, "relu is not the first conv's epilogue");
    cr_assert(strstr(k->why, "gathered by the window copy 'c2.im2col"), "why: %s", k->why);
    cr_assert(win && !lt_kernel_has_node(win, "sc") && !lt_kernel_has_node(win, "r"), "the copy computes");
    ic_program_destroy(f);
    ic_graph_destroy(e);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}
