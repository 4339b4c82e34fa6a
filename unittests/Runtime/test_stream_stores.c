/* test_stream_stores.c - software prefetches and non-temporal stores in CPU kernels
 * (lib/LLVMGen/prefetch.c, gen.c nt_plan): where the optimised IR has them and where it must
 * not, and that results match the reference executor with outputs 64-byte aligned (the
 * .range.nt version runs) and not (the plain one runs). */
#include <stdlib.h>
#include <string.h>
#include <criterion/criterion.h>
#include "ic/ic.h"
#include "testutil.h"

static void opts(ic_compile_options *o, int64_t stream, int prefetch)
{
    ic_compile_options_init(o);
    o->stream_bytes = stream;
    o->prefetch_bytes = prefetch;
}

/* The optimised IR ic_compile makes for g, malloc'd. */
static char *llvm_opt(ic_ctx *c, const ic_graph *g, const ic_compile_options *o)
{
    return ict_compile_dump(c, g, o, "llvm-opt");
}

static bool has(ic_ctx *c, const ic_graph *g, const ic_compile_options *o, const char *what)
{
    char *ir = llvm_opt(c, g, o);
    bool r = strstr(ir, what) != NULL;
    free(ir);
    return r;
}

/* A prefetch d bytes past a vector load's address (prefetch.c's GEP, then the call). */
#define PF_AT(d) "i64 " d "\n  call void @llvm.prefetch"

/* y = layer_norm(x, w, b) over rows of n (f32). */
static ic_graph *layer_norm_graph(ic_ctx *c, int64_t rows, int64_t n)
{
    char xs[64], ws[32];
    snprintf(xs, sizeof xs, "%lld,%lld", (long long)rows, (long long)n);
    snprintf(ws, sizeof ws, "%lld", (long long)n);
    ic_graph *g = ict_graph(c, "ln");
    ic_value x = ict_input(g, "x", IC_F32, xs), w = ict_input(g, "w", IC_F32, ws);
    ic_value b = ict_input(g, "b", IC_F32, ws), y;
    ic_attrs a;
    ic_attrs_init(&a, IC_OP_LAYER_NORM);
    a.nshape = 1, a.shape[0] = ic_dim_const(n), a.eps = 1e-5;
    ic_operand in[3] = { ic_val(x), ic_val(w), ic_val(b) };
    cr_assert_eq(ic_graph_add_node(g, "y", IC_OP_LAYER_NORM, 3, in, &a, &y), IC_OK);
    cr_assert_eq(ic_graph_add_output(g, y), IC_OK);
    return g;
}

/* y = op(x) for a reduction or softmax along dim. */
static ic_graph *reduce_graph(ic_ctx *c, ic_op op, const char *shape, int dim)
{
    ic_graph *g = ict_graph(c, "red");
    ic_value x = ict_input(g, "x", IC_F32, shape), y;
    ic_attrs a;
    ic_attrs_init(&a, op);
    if (op == IC_OP_SOFTMAX)
        a.dim = dim;
    else
        a.has_dims = true, a.ndims = 1, a.dims[0] = dim;
    ic_operand in[1] = { ic_val(x) };
    cr_assert_eq(ic_graph_add_node(g, "y", op, 1, in, &a, &y), IC_OK);
    cr_assert_eq(ic_graph_add_output(g, y), IC_OK);
    return g;
}

static void fill(ic_tensor *t, unsigned seed)
{
    int64_t n = ic_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        ic_tensor_set(t, i, ((int)((seed >> 8) % 2001) - 1000) / 250.0);
    }
}

/* Compiles g with o and checks its single output against the reference, written once into
 * a 64-byte aligned buffer and once at offset shift bytes from one. */
static void check_at(ic_ctx *c, const ic_graph *g, const ic_compile_options *o, size_t shift)
{
    int nargs = ic_graph_num_args(g);
    ic_tensor args[4], want, got;
    for (int i = 0; i < nargs; i++) {
        ic_node_info ni;
        ic_graph_node(g, ic_graph_arg(g, i), &ni);
        int64_t shape[IC_MAX_RANK];
        for (int d = 0; d < ni.rank; d++)
            shape[d] = ni.shape[d].coef;
        ic_tensor_init(&args[i], ni.dtype, ni.rank, shape, NULL);
        cr_assert_eq(ic_tensor_alloc(c, &args[i]), IC_OK);
        fill(&args[i], 7u + 31u * (unsigned)i);
    }
    cr_assert_eq(ic_ref_run(c, g, NULL, nargs, args, 1, &want), IC_OK, "ref: %s", ic_last_error(c));
    ic_compiled *cc;
    cr_assert_eq(ic_compile(c, g, o, &cc), IC_OK, "compile: %s", ic_last_error(c));
    size_t bytes = (size_t)ic_tensor_numel(&want) * sizeof(float);
    char *mem = aligned_alloc(64, (bytes + 128 + 63) / 64 * 64); /* C11: a multiple of 64 */
    cr_assert(mem);
    memset(mem, 0x7f, bytes + 128); /* not a plausible result */
    ic_tensor_init(&got, IC_F32, want.rank, want.shape, mem + shift);
    cr_assert_eq(ic_run(cc, nargs, args, 1, &got), IC_OK, "run: %s", ic_last_error(c));
    char m[1024];
    cr_assert(ict_allclose(&got, &want, m, sizeof m), "shift %zu: %s", shift, m);
    for (size_t i = 0; i < shift; i++) /* nothing written before the output */
        cr_assert_eq(mem[i], 0x7f);
    for (size_t i = shift + bytes; i < bytes + 128; i++) /* nor after it */
        cr_assert_eq(mem[i], 0x7f);
    free(mem);
    ic_compiled_destroy(cc);
    ic_tensor_free(c, &want);
    for (int i = 0; i < nargs; i++)
        ic_tensor_free(c, &args[i]);
}

Test(stream, layer_norm_writes_large_outputs_around_the_cache)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = layer_norm_graph(c, 37, 256); /* rows of 1 KB: whole lines */
    ic_compile_options o;
    opts(&o, 1, 0); /* every output is "large" */
    cr_assert(has(c, g, &o, "!nontemporal"), "no non-temporal store in the .nt version");
    cr_assert(has(c, g, &o, "llvm.x86.sse.sfence"), "the .nt version ends without sfence");
    check_at(c, g, &o, 0);  /* aligned: .range.nt */
    check_at(c, g, &o, 4);  /* unaligned: the plain version */
    check_at(c, g, &o, 64); /* aligned again, another line */
    opts(&o, -1, 0);
    cr_assert(!has(c, g, &o, "!nontemporal"), "stream_bytes -1 still streams");
    opts(&o, (int64_t)37 * 256 * 4 + 1, 0); /* one byte more than the output */
    cr_assert(!has(c, g, &o, "!nontemporal"), "an output below the threshold streams");
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

Test(stream, partial_lines_and_read_back_outputs_keep_plain_stores)
{
    ic_ctx *c = ict_ctx();
    ic_compile_options o;
    opts(&o, 1, 0);
    /* rows of 1000 floats are not whole lines: the next row starts mid-line */
    ic_graph *g = layer_norm_graph(c, 5, 1000);
    cr_assert(!has(c, g, &o, "!nontemporal"));
    check_at(c, g, &o, 0);
    ic_graph_destroy(g);
    /* softmax keeps exp(x - max) in y between its passes and reads it back: plain stores */
    g = reduce_graph(c, IC_OP_SOFTMAX, "7,512", -1);
    cr_assert(!has(c, g, &o, "!nontemporal"));
    check_at(c, g, &o, 0);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* Occurrences of what in the optimised IR of g. */
static int count(ic_ctx *c, const ic_graph *g, const ic_compile_options *o, const char *what)
{
    char *ir = llvm_opt(c, g, o);
    int n = 0;
    for (const char *p = strstr(ir, what); p; p = strstr(p + 1, what))
        n++;
    free(ir);
    return n;
}

/* y = x * m over x [512, 1024]: m "2" (a constant), "1024" (a row: 4 KB) or "512,1024". */
static ic_graph *scale_graph(ic_ctx *c, const char *mshape)
{
    ic_graph *g = ict_graph(c, "scale");
    ic_value x = ict_input(g, "x", IC_F32, "512,1024"), y;
    ic_operand m = *mshape ? ic_val(ict_input(g, "m", IC_F32, mshape)) : ic_scalar_f(2.0);
    cr_assert_eq(ic_graph_binary(g, "y", IC_OP_MUL, ic_val(x), m, &y), IC_OK);
    cr_assert_eq(ic_graph_add_output(g, y), IC_OK);
    return g;
}

/* A broadcast operand small enough to stay cached (a bias, a mask, a weight row) gets no
 * prefetches; a streamed one of the same role does. */
Test(stream, no_prefetches_for_cached_operands)
{
    ic_ctx *c = ict_ctx();
    ic_compile_options o;
    opts(&o, 0, 0);
    const char *call = "call void @llvm.prefetch";
    ic_graph *g0 = scale_graph(c, ""), *g1 = scale_graph(c, "1024"), *g2 = scale_graph(c, "512,1024");
    int n0 = count(c, g0, &o, call), n1 = count(c, g1, &o, call), n2 = count(c, g2, &o, call);
    cr_assert(n0 > 0, "x is not prefetched");
    cr_assert_eq(n1, n0, "a 4 KB row operand is prefetched (%d prefetches, %d without it)", n1, n0);
    cr_assert_gt(n2, n1, "a streamed operand is not prefetched (%d vs %d)", n2, n1);
    ic_graph_destroy(g0), ic_graph_destroy(g1), ic_graph_destroy(g2);
    ic_ctx_destroy(c);
}

Test(stream, prefetches_in_row_loops_not_in_column_walks)
{
    ic_ctx *c = ict_ctx();
    ic_compile_options o;
    opts(&o, 0, 0);
    ic_graph *g = reduce_graph(c, IC_OP_SUM, "33,1000", -1);
    cr_assert(has(c, g, &o, "@llvm.prefetch"), "a row sum has no prefetch");
    cr_assert(has(c, g, &o, PF_AT("2048")), "a row sum does not prefetch 2 KB ahead");
    check_at(c, g, &o, 0);
    opts(&o, 0, 1024);
    cr_assert(has(c, g, &o, PF_AT("1024")) && !has(c, g, &o, PF_AT("2048")), "prefetch_bytes 1024 ignored");
    opts(&o, 0, -1);
    cr_assert(!has(c, g, &o, "@llvm.prefetch"), "prefetch_bytes -1 still prefetches");
    check_at(c, g, &o, 0);
    ic_graph_destroy(g);
    opts(&o, 0, 0);
    g = reduce_graph(c, IC_OP_SUM, "1000,67", 0); /* sum over the first dim: a column walk */
    cr_assert(!has(c, g, &o, "@llvm.prefetch"), "a column walk prefetches");
    check_at(c, g, &o, 0);
    ic_graph_destroy(g);
    /* layer_norm, with the row ahead prefetched in its writing pass and streamed stores */
    opts(&o, 1, 4096);
    g = layer_norm_graph(c, 64, 1024);
    cr_assert(has(c, g, &o, "@llvm.prefetch"));
    check_at(c, g, &o, 0);
    check_at(c, g, &o, 8);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}
