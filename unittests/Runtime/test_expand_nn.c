/* test_expand_nn.c - the nn composites of issue 12 (lib/Lower/expand_nn.c): ic_graph_expand
 * leaves only existing ops, keeps the composite's name, dtype and shape on its last node, and
 * names its helpers "<node>.<what>"; freezing folds batch_norm's weight * rsqrt(var + eps)
 * into a constant; the compiled graph matches the reference executor. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "ic/ic.h"
#include "testutil.h"

static ic_value add(ic_graph *g, const char *name, ic_op op, int n, const ic_operand *in, const ic_attrs *a)
{
    ic_value v = -1;
    cr_assert_eq(ic_graph_add_node(g, name, op, n, in, a, &v), IC_OK, "%s: %s", name,
                 ic_last_error(ic_graph_ctx(g)));
    return v;
}

static ic_value param(ic_graph *g, const char *name, int64_t n, const float *data)
{
    ic_dim d = ic_dim_const(n);
    ic_value v;
    cr_assert_eq(ic_graph_add_param(g, name, IC_F32, 1, &d, data, sizeof(float) * (size_t)n, NULL, NULL, &v), IC_OK);
    return v;
}

/* x [2, 4, 3, 3] through every nn composite: batch_norm with weights, group_norm, cumsum,
 * stack, masked_fill, attention over the flattened spatial dims. */
static ic_graph *composites(ic_ctx *c)
{
    static float m[4] = { 0.5f, -1, 0, 2 }, v[4] = { 1, 0.25f, 4, 2 }, w[4] = { 1, 2, -1, 0.5f },
                 b[4] = { 0, 1, -2, 3 };
    ic_graph *g = ict_graph(c, "nn");
    ic_value x = ict_input(g, "x", IC_F32, "2,4,3,3"), mask = ict_input(g, "mask", IC_BOOL, "3,3");
    ic_value pm = param(g, "m", 4, m), pv = param(g, "v", 4, v), pw = param(g, "w", 4, w), pb = param(g, "b", 4, b);
    ic_attrs a;
    ic_attrs_init(&a, IC_OP_BATCH_NORM);
    ic_value bn = add(g, "bn", IC_OP_BATCH_NORM, 5, (ic_operand[]){ ic_val(x), ic_val(pm), ic_val(pv), ic_val(pw), ic_val(pb) }, &a);
    ic_attrs_init(&a, IC_OP_GROUP_NORM);
    a.num_groups = 2;
    ic_value gn = add(g, "gn", IC_OP_GROUP_NORM, 2, (ic_operand[]){ ic_val(bn), ic_val(pw) }, &a);
    ic_attrs_init(&a, IC_OP_CUMSUM);
    a.dim = -1;
    ic_value cs = add(g, "cs", IC_OP_CUMSUM, 1, (ic_operand[]){ ic_val(gn) }, &a);
    ic_attrs_init(&a, IC_OP_MASKED_FILL);
    a.value = (ic_scalar){ -3, -3, true };
    ic_value mf = add(g, "mf", IC_OP_MASKED_FILL, 2, (ic_operand[]){ ic_val(cs), ic_val(mask) }, &a);
    ic_attrs_init(&a, IC_OP_RESHAPE);
    a.nshape = 3;
    a.shape[0] = ic_dim_const(2), a.shape[1] = ic_dim_const(4), a.shape[2] = ic_dim_const(9);
    ic_value r = add(g, "r", IC_OP_RESHAPE, 1, (ic_operand[]){ ic_val(mf) }, &a);
    ic_attrs_init(&a, IC_OP_SDPA);
    a.is_causal = true;
    ic_value at = add(g, "att", IC_OP_SDPA, 3, (ic_operand[]){ ic_val(r), ic_val(r), ic_val(r) }, &a);
    ic_attrs_init(&a, IC_OP_STACK);
    a.dim = 1;
    ic_value st = add(g, "st", IC_OP_STACK, 2, (ic_operand[]){ ic_val(at), ic_val(r) }, &a);
    cr_assert_eq(ic_graph_add_output(g, st), IC_OK);
    cr_assert_eq(ic_graph_add_output(g, bn), IC_OK);
    return g;
}

Test(expand_nn, leaves_existing_ops_and_keeps_names)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = composites(c), *e = NULL;
    cr_assert(ic_graph_has_composites(g));
    cr_assert_eq(ic_graph_expand(c, g, &e), IC_OK, "%s", ic_last_error(c));
    cr_assert(e && !ic_graph_has_composites(e));
    static const char *const names[] = { "bn", "gn", "cs", "mf", "att", "st" };
    for (int i = 0; i < 6; i++) {
        ic_value a, b;
        cr_assert(ic_graph_find(g, names[i], &a) && ic_graph_find(e, names[i], &b), "%s", names[i]);
        cr_assert_str_eq(ict_shape_of(g, a), ict_shape_of(e, b), "%s", names[i]);
        cr_assert_eq(ict_dtype_of(g, a), ict_dtype_of(e, b), "%s", names[i]);
    }
    int helpers = 0;
    for (int v = 0; v < ic_graph_num_nodes(e); v++) {
        ic_node_info ni;
        ic_graph_node(e, v, &ni);
        const char *dot = strchr(ni.name, '.');
        if (!dot)
            continue;
        helpers++;
        bool known = false;
        for (int i = 0; i < 6; i++)
            known |= (size_t)(dot - ni.name) == strlen(names[i]) && !strncmp(ni.name, names[i], strlen(names[i]));
        cr_assert(known, "helper '%s' is named after no composite", ni.name);
    }
    cr_assert(helpers > 10, "%d helper nodes", helpers);
    ic_graph_destroy(e);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

static void fill(ic_tensor *t, uint64_t seed)
{
    for (int64_t i = 0; i < ic_tensor_numel(t); i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        if (t->dtype == IC_BOOL)
            ((uint8_t *)t->data)[i] = (seed >> 40) & 1;
        else
            ic_tensor_set(t, i, (double)(seed >> 11) / 9007199254740992.0 * 4 - 2);
    }
}

/* freezing: the batch_norm scale and shift come from weights, so the graph stage holds no
 * rsqrt; the compiled results (frozen and not) agree with the reference executor. */
Test(expand_nn, freezing_folds_batch_norm_scale_and_runs_right)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = composites(c);
    ic_compile_options o;
    ic_compile_options_init(&o);
    o.freezing = 1;
    char *graph = ict_compile_dump(c, g, &o, "graph");
    cr_assert(!strstr(graph, "rsqrt") && !strstr(graph, "bn.var_eps"), "not folded:\n%s", graph);
    cr_assert(strstr(graph, "bn.") && strstr(graph, " bn "), "%s", graph);
    free(graph);
    ic_tensor args[2], ref[2], got[2];
    int64_t xs[4] = { 2, 4, 3, 3 }, ms[2] = { 3, 3 };
    ic_tensor_init(&args[0], IC_F32, 4, xs, NULL);
    ic_tensor_init(&args[1], IC_BOOL, 2, ms, NULL);
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(ic_tensor_alloc(c, &args[i]), IC_OK);
        fill(&args[i], 7 + (uint64_t)i);
    }
    cr_assert_eq(ic_ref_run(c, g, NULL, 2, args, 2, ref), IC_OK, "%s", ic_last_error(c));
    for (int frozen = 0; frozen < 2; frozen++) {
        o.freezing = frozen;
        ic_compiled *cc;
        cr_assert_eq(ic_compile(c, g, &o, &cc), IC_OK, "%s", ic_last_error(c));
        for (int i = 0; i < 2; i++) {
            ic_tensor_init(&got[i], ref[i].dtype, ref[i].rank, ref[i].shape, NULL);
            cr_assert_eq(ic_tensor_alloc(c, &got[i]), IC_OK);
        }
        cr_assert_eq(ic_run(cc, 2, args, 2, got), IC_OK, "%s", ic_last_error(c));
        for (int i = 0; i < 2; i++) {
            char msg[512];
            cr_assert(ict_allclose(&got[i], &ref[i], msg, sizeof msg), "output %d (freezing %d): %s", i, frozen, msg);
            ic_tensor_free(c, &got[i]);
        }
        ic_compiled_destroy(cc);
    }
    for (int i = 0; i < 2; i++) {
        ic_tensor_free(c, &args[i]);
        ic_tensor_free(c, &ref[i]);
    }
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* A matmul operand read through a view no strides describe (BERT's context: [B,H,S,D]
 * permuted to [B,S,H,D] and reshaped to [B,S,H*D]) gets one copy, "<node>.a_contiguous", so
 * the GEMM reads it affinely; a view strides describe (the split-heads view of the other
 * operand, a transpose) stays a view; results match the reference executor. */
Test(expand_nn, matmul_operands_through_merging_views_get_one_copy)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "ctx");
    ic_value x = ict_input(g, "x", IC_F32, "2,4,3,8"), w = ict_input(g, "w", IC_F32, "5,32");
    ic_value q = ict_input(g, "q", IC_F32, "2,3,32");
    ic_attrs a;
    ic_attrs_init(&a, IC_OP_PERMUTE);
    a.has_dims = true, a.ndims = 4, a.dims[0] = 0, a.dims[1] = 2, a.dims[2] = 1, a.dims[3] = 3;
    ic_value p = add(g, "p", IC_OP_PERMUTE, 1, (ic_operand[]){ ic_val(x) }, &a);
    ic_attrs_init(&a, IC_OP_RESHAPE);
    a.nshape = 3, a.shape[0] = ic_dim_const(2), a.shape[1] = ic_dim_const(3), a.shape[2] = ic_dim_const(32);
    ic_value r = add(g, "r", IC_OP_RESHAPE, 1, (ic_operand[]){ ic_val(p) }, &a);
    ic_attrs_init(&a, IC_OP_LINEAR);
    ic_value lin = add(g, "lin", IC_OP_LINEAR, 2, (ic_operand[]){ ic_val(r), ic_val(w) }, &a);
    ic_attrs_init(&a, IC_OP_RESHAPE); /* q split into heads and permuted: strided, no copy */
    a.nshape = 4, a.shape[0] = ic_dim_const(2), a.shape[1] = ic_dim_const(3), a.shape[2] = ic_dim_const(4),
    a.shape[3] = ic_dim_const(8);
    ic_value qs = add(g, "qs", IC_OP_RESHAPE, 1, (ic_operand[]){ ic_val(q) }, &a);
    ic_attrs_init(&a, IC_OP_PERMUTE);
    a.has_dims = true, a.ndims = 4, a.dims[0] = 0, a.dims[1] = 2, a.dims[2] = 1, a.dims[3] = 3;
    ic_value qh = add(g, "qh", IC_OP_PERMUTE, 1, (ic_operand[]){ ic_val(qs) }, &a);
    ic_attrs_init(&a, IC_OP_TRANSPOSE);
    a.dim0 = -2, a.dim1 = -1;
    ic_value xt = add(g, "xt", IC_OP_TRANSPOSE, 1, (ic_operand[]){ ic_val(x) }, &a);
    ic_attrs_init(&a, IC_OP_MATMUL);
    ic_value s = add(g, "s", IC_OP_MATMUL, 2, (ic_operand[]){ ic_val(qh), ic_val(xt) }, &a);
    cr_assert_eq(ic_graph_add_output(g, lin), IC_OK);
    cr_assert_eq(ic_graph_add_output(g, s), IC_OK);
    cr_assert(ic_graph_has_composites(g), "the merging view is not seen");
    ic_graph *e = NULL;
    cr_assert_eq(ic_graph_expand(c, g, &e), IC_OK, "%s", ic_last_error(c));
    ic_value v;
    cr_assert(ic_graph_find(e, "lin.a_contiguous", &v), "no copy of the merged view");
    cr_assert(!ic_graph_find(e, "lin.b_contiguous", &v) && !ic_graph_find(e, "s.a_contiguous", &v) &&
              !ic_graph_find(e, "s.b_contiguous", &v), "a strided view was copied");
    cr_assert(!ic_graph_has_composites(e));
    ic_graph_destroy(e);
    ic_tensor args[3], ref[2], got[2];
    int64_t shapes[3][4] = { { 2, 4, 3, 8 }, { 5, 32 }, { 2, 3, 32 } };
    int ranks[3] = { 4, 2, 3 };
    for (int i = 0; i < 3; i++) {
        ic_tensor_init(&args[i], IC_F32, ranks[i], shapes[i], NULL);
        cr_assert_eq(ic_tensor_alloc(c, &args[i]), IC_OK);
        fill(&args[i], 11 + (uint64_t)i);
    }
    cr_assert_eq(ic_ref_run(c, g, NULL, 3, args, 2, ref), IC_OK, "%s", ic_last_error(c));
    ic_compiled *cc;
    cr_assert_eq(ic_compile(c, g, NULL, &cc), IC_OK, "%s", ic_last_error(c));
    for (int i = 0; i < 2; i++) {
        ic_tensor_init(&got[i], ref[i].dtype, ref[i].rank, ref[i].shape, NULL);
        cr_assert_eq(ic_tensor_alloc(c, &got[i]), IC_OK);
    }
    cr_assert_eq(ic_run(cc, 3, args, 2, got), IC_OK, "%s", ic_last_error(c));
    for (int i = 0; i < 2; i++) {
        char msg[512];
        cr_assert(ict_allclose(&got[i], &ref[i], msg, sizeof msg), "output %d: %s", i, msg);
        ic_tensor_free(c, &got[i]);
        ic_tensor_free(c, &ref[i]);
    }
    for (int i = 0; i < 3; i++)
        ic_tensor_free(c, &args[i]);
    ic_compiled_destroy(cc);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}
