/* test_compile.c - ic_compile / ic_run end to end against the reference executor (ic_ref_run)
 * with the spec's tolerances: every op in every dtype it takes, fused and unfused, odd sizes,
 * broadcasting, negative dims, strided arguments, symbolic dims (recompile + cache),
 * concurrent runs, threads, errors, the debug folder and the dumps. */
#include <math.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <criterion/criterion.h>
#include "ic/ic.h"
#include "testutil.h"

/* ---- helpers ---- */

static unsigned rng_next(unsigned *s)
{
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

/* Random contents for an argument of node v: floats in [-2, 2], ints in [-20, 20] (or the
 * input's range), bools 50/50. */
static void fill(const ic_graph *g, ic_value v, ic_tensor *t, unsigned *seed)
{
    ic_node_info ni;
    ic_graph_node(g, v, &ni);
    int64_t n = ic_tensor_numel(t);
    int64_t lo = -20, hi = 21;
    if (ni.has_range)
        lo = ni.range_lo, hi = ni.range_hi;
    for (int64_t i = 0; i < n; i++) {
        unsigned r = rng_next(seed);
        if (ic_dtype_is_float(t->dtype))
            ic_tensor_set(t, i, -2.0 + 4.0 * (r & 0xffff) / 65536.0);
        else if (t->dtype == IC_BOOL)
            ic_tensor_set(t, i, r & 1);
        else
            ic_tensor_set(t, i, (double)(lo + (int64_t)(r % (unsigned)(hi - lo))));
    }
}

/* Contiguous tensors for every argument of g at the sizes of vals (NULL: none). */
static ic_tensor *make_args(ic_ctx *c, const ic_graph *g, const int64_t *vals, unsigned seed)
{
    int n = ic_graph_num_args(g);
    ic_tensor *a = calloc((size_t)n + 1, sizeof *a);
    for (int i = 0; i < n; i++) {
        ic_node_info ni;
        ic_graph_node(g, ic_graph_arg(g, i), &ni);
        int64_t shape[IC_MAX_RANK];
        for (int d = 0; d < ni.rank; d++)
            cr_assert_eq(ic_graph_eval_dim(g, ni.shape[d], vals, &shape[d]), IC_OK);
        ic_tensor_init(&a[i], ni.dtype, ni.rank, shape, NULL);
        cr_assert_eq(ic_tensor_alloc(c, &a[i]), IC_OK);
        fill(g, ic_graph_arg(g, i), &a[i], &seed);
    }
    return a;
}

static void free_tensors(ic_ctx *c, ic_tensor *t, int n)
{
    for (int i = 0; i < n; i++)
        ic_tensor_free(c, &t[i]);
    free(t);
}

/* Runs cc on args and compares every output with ic_ref_run; on a mismatch writes a message
 * into msg and returns false. */
static bool run_and_compare(ic_ctx *c, const ic_graph *g, ic_compiled *cc, const ic_tensor *args,
                            char *msg, size_t n)
{
    int nargs = ic_graph_num_args(g), nouts = ic_graph_num_outputs(g);
    int64_t vals[16];
    for (int i = 0; i < 16; i++)
        vals[i] = -1;
    ic_status s = ic_runtime_bind_args(g, nargs, args, vals);
    if (s) {
        snprintf(msg, n, "bind: %s", ic_last_error(c));
        return false;
    }
    ic_tensor *want = calloc((size_t)nouts + 1, sizeof *want);
    if ((s = ic_ref_run(c, g, ic_graph_num_symbols(g) ? vals : NULL, nargs, args, nouts, want))) {
        snprintf(msg, n, "ic_ref_run: %s", ic_last_error(c));
        free(want);
        return false;
    }
    ic_tensor *got = calloc((size_t)nouts + 1, sizeof *got);
    for (int i = 0; i < nouts; i++) {
        ic_tensor_init(&got[i], want[i].dtype, want[i].rank, want[i].shape, NULL);
        cr_assert_eq(ic_tensor_alloc(c, &got[i]), IC_OK);
    }
    bool ok = true;
    if ((s = ic_run(cc, nargs, args, nouts, got))) {
        snprintf(msg, n, "ic_run: %s", ic_last_error(c));
        ok = false;
    }
    for (int i = 0; ok && i < nouts; i++) {
        char m[700];
        if (!ict_allclose(&got[i], &want[i], m, sizeof m)) {
            snprintf(msg, n, "output %d: %s", i, m);
            ok = false;
        }
    }
    free_tensors(c, got, nouts);
    free_tensors(c, want, nouts);
    return ok;
}

/* Compiles g (fusion on or off) and checks it against the reference on random args. */
static bool check_graph(ic_ctx *c, const ic_graph *g, int fusion, char *msg, size_t n)
{
    ic_compile_options o;
    ic_compile_options_init(&o);
    o.fusion = fusion;
    ic_compiled *cc = NULL;
    ic_status s = ic_compile(c, g, &o, &cc);
    if (s) {
        snprintf(msg, n, "ic_compile (%s): %s", ic_status_str(s), ic_last_error(c));
        return false;
    }
    ic_tensor *args = make_args(c, g, NULL, 12345);
    bool ok = run_and_compare(c, g, cc, args, msg, n);
    free_tensors(c, args, ic_graph_num_args(g));
    ic_compiled_destroy(cc);
    return ok;
}

#define assert_graph_ok(c, g, fusion)                                                        \
    do {                                                                                     \
        char m_[1024];                                                                       \
        cr_assert(check_graph((c), (g), (fusion), m_, sizeof m_), "graph '%s' (fusion %d): %s", \
                  ic_graph_name(g), (fusion), m_);                                           \
    } while (0)

/* ---- the op corpus: every op in every dtype it takes ---- */

static const ic_dtype ALL[] = { IC_F32, IC_F64, IC_F16, IC_BF16, IC_I32, IC_I64, IC_BOOL };

typedef struct {
    int tried, built, failed;
    char log[16384];
    size_t len;
} corpus;

static void note(corpus *k, const char *what, const char *msg)
{
    k->failed++;
    if (k->len < sizeof k->log - 600)
        k->len += (size_t)snprintf(k->log + k->len, sizeof k->log - k->len, "\n  %s: %.500s", what, msg);
}

/* Adds node `op` on inputs of dtype dt with the attrs of variant `var`. Returns false when
 * the op refuses dt (or the variant does not apply). */
static bool build_op(ic_graph *g, ic_op op, ic_dtype dt, int var, ic_value *y)
{
    ic_attrs a;
    ic_attrs_init(&a, op);
    ic_operand in[4];
    int nin = 1;
    ic_value x, w, b;
    switch (ic_op_kind_of(op)) {
    case IC_KIND_UNARY:
        if (var > 1)
            return false;
        x = ict_input(g, "x", dt, var ? "1" : "4,33");
        in[0] = ic_val(x);
        if (op == IC_OP_GELU)
            a.approximate = var;
        if (op == IC_OP_CLAMP) {
            a.has_min = true, a.min = (ic_scalar){ -0.5, 0, false };
            a.has_max = var == 0, a.max = (ic_scalar){ 1.25, 1, false };
            if (!ic_dtype_is_float(dt))
                a.min = (ic_scalar){ -3, -3, true }, a.max = (ic_scalar){ 7, 7, true };
        }
        if (op == IC_OP_CAST) {
            if (var > 0)
                return false;
            a.has_dtype = true, a.dtype = IC_F32;
        }
        break;
    case IC_KIND_BINARY:
        if (var > 2)
            return false;
        x = ict_input(g, "a", dt, var == 1 ? "33" : "4,33");
        in[0] = ic_val(x);
        if (var == 2) {
            in[1] = dt == IC_BOOL ? ic_scalar_i(1) : ic_dtype_is_float(dt) ? ic_scalar_f(1.5) : ic_scalar_i(3);
        } else {
            in[1] = ic_val(ict_input(g, "b", dt, var == 1 ? "4,1" : "1,33"));
            if (op == IC_OP_REMAINDER && !ic_dtype_is_float(dt)) /* PyTorch refuses 0 */
                cr_assert_eq(ic_graph_set_input_range(g, in[1].node, var ? 1 : -9, var ? 9 : -1), IC_OK);
        }
        nin = 2;
        break;
    case IC_KIND_TERNARY:
        if (var > 0)
            return false;
        in[0] = ic_val(ict_input(g, "cond", IC_BOOL, "4,33"));
        in[1] = ic_val(ict_input(g, "a", dt, "4,1"));
        in[2] = ic_val(ict_input(g, "b", dt, "33"));
        nin = 3;
        break;
    case IC_KIND_REDUCE:
        x = ict_input(g, "x", dt, "5,6,7");
        in[0] = ic_val(x);
        if (op == IC_OP_ARGMAX) {
            if (var > 2)
                return false;
            a.dim = var == 0 ? -1 : var == 1 ? 0 : 1;
            a.keepdim = var == 1;
            break;
        }
        if (var > 4)
            return false;
        a.has_dims = var != 4;
        a.keepdim = var == 1;
        if (var == 0) a.ndims = 1, a.dims[0] = -1;
        if (var == 1) a.ndims = 1, a.dims[0] = 0;
        if (var == 2) a.ndims = 2, a.dims[0] = 0, a.dims[1] = -1;
        if (var == 3) a.ndims = 1, a.dims[0] = 1;
        break;
    case IC_KIND_NORM:
        if (op == IC_OP_SOFTMAX || op == IC_OP_LOG_SOFTMAX) {
            if (var > 2)
                return false;
            x = ict_input(g, "x", dt, "6,37");
            in[0] = ic_val(x);
            a.dim = var == 0 ? -1 : var == 1 ? 0 : 1;
            break;
        }
        if (var > 1)
            return false;
        x = ict_input(g, "x", dt, "6,37");
        in[0] = ic_val(x);
        a.nshape = 1, a.shape[0] = ic_dim_const(37);
        if (var == 0) {
            in[nin++] = ic_val(ict_input(g, "w", dt, "37"));
            if (op == IC_OP_LAYER_NORM)
                in[nin++] = ic_val(ict_input(g, "bias", dt, "37"));
        }
        break;
    case IC_KIND_VIEW:
        if (var > 1)
            return false;
        x = ict_input(g, "x", dt, "5,6,7");
        in[0] = ic_val(x);
        switch (op) {
        case IC_OP_RESHAPE: a.nshape = 2, a.shape[0] = ic_dim_const(-1), a.shape[1] = ic_dim_const(var ? 5 : 7); if (var) { a.nshape = 3; a.shape[0] = ic_dim_const(6); a.shape[1] = ic_dim_const(7); a.shape[2] = ic_dim_const(5); } break;
        case IC_OP_PERMUTE: a.has_dims = true, a.ndims = 3, a.dims[0] = 2, a.dims[1] = 0, a.dims[2] = var ? -2 : 1; break;
        case IC_OP_TRANSPOSE: a.dim0 = 0, a.dim1 = var ? -1 : 1; break;
        case IC_OP_EXPAND:
            x = ict_input(g, "y", dt, "5,1,7");
            in[0] = ic_val(x);
            a.nshape = var ? 4 : 3;
            for (int i = 0; i < a.nshape; i++)
                a.shape[i] = ic_dim_const(var ? (int64_t[]){ 2, 5, 6, 7 }[i] : (int64_t[]){ -1, 6, 7 }[i]);
            break;
        case IC_OP_UNSQUEEZE: a.dim = var ? -1 : 1; break;
        case IC_OP_SQUEEZE:
            x = ict_input(g, "y", dt, "5,1,7");
            in[0] = ic_val(x);
            a.has_dims = var, a.ndims = 1, a.dims[0] = -2;
            break;
        case IC_OP_SLICE:
            a.dim = var ? -1 : 1, a.has_start = true, a.start = 1, a.has_end = true, a.end = var ? -1 : 6, a.step = var ? 3 : 2;
            break;
        default: return false;
        }
        break;
    case IC_KIND_CAT:
        if (var > 1)
            return false;
        in[0] = ic_val(ict_input(g, "x0", dt, var ? "2,3" : "2,7"));
        in[1] = ic_val(ict_input(g, "x1", dt, var ? "2,5" : "3,7"));
        in[2] = ic_val(ict_input(g, "x2", dt, var ? "2,1" : "1,7"));
        nin = 3;
        a.dim = var ? -1 : 0;
        break;
    case IC_KIND_CONTRACT:
        if (op == IC_OP_MATMUL) {
            if (var > 2)
                return false;
            const char *sa[] = { "5,7", "2,5,7", "7" }, *sb[] = { "7,3", "7,3", "7,3" };
            in[0] = ic_val(ict_input(g, "a", dt, sa[var]));
            in[1] = ic_val(ict_input(g, "b", dt, sb[var]));
            nin = 2;
        } else if (op == IC_OP_LINEAR) {
            if (var > 1)
                return false;
            in[0] = ic_val(ict_input(g, "x", dt, "4,7"));
            w = ict_input(g, "w", dt, "3,7");
            in[1] = ic_val(w);
            nin = 2;
            if (var == 0) {
                b = ict_input(g, "bias", dt, "3");
                in[nin++] = ic_val(b);
            }
        } else {
            if (var > 0)
                return false;
            in[0] = ic_val(ict_input(g, "a", dt, "2,4,5"));
            in[1] = ic_val(ict_input(g, "b", dt, "2,5,3"));
            nin = 2;
        }
        break;
    case IC_KIND_GATHER:
        if (var > 0)
            return false;
        in[0] = ic_val(ict_input(g, "weight", dt, "10,6"));
        x = ict_input(g, "idx", IC_I64, "3,4");
        ic_graph_set_input_range(g, x, 0, 10);
        in[1] = ic_val(x);
        nin = 2;
        break;
    case IC_KIND_CREATE:
        if (var > 0)
            return false;
        nin = 0;
        a.has_dtype = true, a.dtype = dt;
        if (op == IC_OP_FULL) {
            a.nshape = 2, a.shape[0] = ic_dim_const(3), a.shape[1] = ic_dim_const(4);
            a.value = dt == IC_BOOL ? (ic_scalar){ 1, 1, true } : (ic_scalar){ 1.5, 1, false };
            if (!ic_dtype_is_float(dt))
                a.value = (ic_scalar){ 3, 3, true };
        } else {
            a.has_start = true;
            a.astart = (ic_scalar){ 2, 2, true };
            a.aend = (ic_scalar){ 23, 23, true };
            a.astep = (ic_scalar){ 3, 3, true };
        }
        break;
    default:
        return false;
    }
    return ic_graph_add_node(g, "y", op, nin, in, &a, y) == IC_OK;
}

static void run_corpus(corpus *k, int fusion)
{
    ic_ctx *c = ict_ctx();
    for (int op = 0; op < IC_OP_COUNT; op++)
        for (size_t d = 0; d < sizeof ALL / sizeof *ALL; d++)
            for (int var = 0; var < 5; var++) {
                char name[96];
                snprintf(name, sizeof name, "%s_%s_%d", ic_op_name((ic_op)op), ic_dtype_name(ALL[d]), var);
                ic_graph *g = ict_graph(c, name);
                ic_value y;
                k->tried++;
                if (!build_op(g, (ic_op)op, ALL[d], var, &y)) {
                    ic_graph_destroy(g);
                    continue;
                }
                k->built++;
                cr_assert_eq(ic_graph_add_output(g, y), IC_OK);
                char msg[1024];
                if (!check_graph(c, g, fusion, msg, sizeof msg))
                    note(k, name, msg);
                ic_graph_destroy(g);
            }
    ic_ctx_destroy(c);
}

Test(compile, every_op_every_dtype_unfused, .timeout = 600)
{
    static corpus k;
    run_corpus(&k, 0);
    cr_assert(k.built > 300, "only %d op/dtype cases built", k.built);
    cr_assert_eq(k.failed, 0, "%d of %d cases differ from the reference:%s", k.failed, k.built, k.log);
}

Test(compile, every_op_every_dtype_fused, .timeout = 600)
{
    static corpus k;
    run_corpus(&k, 1);
    cr_assert_eq(k.failed, 0, "%d of %d cases differ from the reference:%s", k.failed, k.built, k.log);
}

/* ---- patterns ---- */

static ic_graph *seed_graph(ic_ctx *c, const char *rows)
{
    ic_graph *g = ict_graph(c, "seed_pattern");
    char sh[32];
    snprintf(sh, sizeof sh, "%s,512", rows);
    ic_value a = ict_input(g, "a", IC_F32, sh), c_ = ict_input(g, "c", IC_F32, sh);
    ic_value b1 = ict_input(g, "b1", IC_F32, "1,512"), b2 = ict_input(g, "b2", IC_F32, "1,512");
    ic_value b3 = ict_input(g, "b3", IC_F32, "1,512");
    ic_value t0, t1, t2, y;
    cr_assert_eq(ic_graph_binary(g, "t0", IC_OP_ADD, ic_val(a), ic_val(b1), &t0), IC_OK);
    cr_assert_eq(ic_graph_binary(g, "t1", IC_OP_ADD, ic_val(t0), ic_val(c_), &t1), IC_OK);
    cr_assert_eq(ic_graph_binary(g, "t2", IC_OP_MUL, ic_val(t1), ic_val(b2), &t2), IC_OK);
    cr_assert_eq(ic_graph_binary(g, "y", IC_OP_ADD, ic_val(t2), ic_val(b3), &y), IC_OK);
    cr_assert_eq(ic_graph_add_output(g, y), IC_OK);
    return g;
}

Test(compile, seed_pattern_fused_and_unfused)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = seed_graph(c, "1000");
    assert_graph_ok(c, g, 1);
    assert_graph_ok(c, g, 0);
    ic_compile_options o;
    ic_compile_options_init(&o);
    ic_compiled *fused, *unfused;
    cr_assert_eq(ic_compile(c, g, &o, &fused), IC_OK, "%s", ic_last_error(c));
    o.fusion = 0;
    cr_assert_eq(ic_compile(c, g, &o, &unfused), IC_OK, "%s", ic_last_error(c));
    cr_assert_eq(ic_compiled_num_kernels(unfused), 4, "unfused: %d kernels", ic_compiled_num_kernels(unfused));
    cr_assert_eq(ic_compiled_num_kernels(fused), 1, "fused seed pattern: %d kernels",
                 ic_compiled_num_kernels(fused));
    cr_assert(ic_compiled_compile_ms(fused) > 0);
    cr_assert(ic_compiled_kernel_name(unfused, 0) != NULL);
    cr_assert_null(ic_compiled_kernel_name(unfused, 4));
    ic_compiled_destroy(fused);
    ic_compiled_destroy(unfused);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* chains that mix reductions with their producers and consumers, as fusion sees them */
Test(compile, normalisation_patterns)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "bert_bits");
    ic_value x = ict_input(g, "x", IC_F32, "9,65"), r = ict_input(g, "res", IC_F32, "9,65");
    ic_value w = ict_input(g, "w", IC_F32, "65"), bb = ict_input(g, "b", IC_F32, "65");
    ic_value t, ln, ge, sm, sum;
    cr_assert_eq(ic_graph_binary(g, "t", IC_OP_ADD, ic_val(x), ic_val(r), &t), IC_OK);
    ic_attrs a;
    ic_attrs_init(&a, IC_OP_LAYER_NORM);
    a.nshape = 1, a.shape[0] = ic_dim_const(65), a.eps = 1e-12;
    ic_operand lin[3] = { ic_val(t), ic_val(w), ic_val(bb) };
    cr_assert_eq(ic_graph_add_node(g, "ln", IC_OP_LAYER_NORM, 3, lin, &a, &ln), IC_OK);
    cr_assert_eq(ic_graph_unary(g, "ge", IC_OP_GELU, ic_val(ln), &ge), IC_OK);
    ic_attrs_init(&a, IC_OP_SOFTMAX);
    a.dim = -1;
    ic_operand sin_[1] = { ic_val(ge) };
    cr_assert_eq(ic_graph_add_node(g, "sm", IC_OP_SOFTMAX, 1, sin_, &a, &sm), IC_OK);
    ic_attrs_init(&a, IC_OP_SUM);
    a.has_dims = true, a.ndims = 1, a.dims[0] = 0;
    ic_operand rin[1] = { ic_val(sm) };
    cr_assert_eq(ic_graph_add_node(g, "sum", IC_OP_SUM, 1, rin, &a, &sum), IC_OK);
    cr_assert_eq(ic_graph_add_output(g, sm), IC_OK);
    cr_assert_eq(ic_graph_add_output(g, sum), IC_OK);
    cr_assert_eq(ic_graph_add_output(g, ln), IC_OK);
    assert_graph_ok(c, g, 1);
    assert_graph_ok(c, g, 0);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* contractions big enough to take the strip (column) arrangement */
Test(compile, matmul_shapes)
{
    ic_ctx *c = ict_ctx();
    const char *sa[] = { "33,70", "3,17,33", "20,64", "70" }, *sb[] = { "70,50", "3,33,40", "48,64", "70,50" };
    ic_op ops[] = { IC_OP_MATMUL, IC_OP_BMM, IC_OP_LINEAR, IC_OP_MATMUL };
    for (int i = 0; i < 4; i++) {
        ic_graph *g = ict_graph(c, "mm");
        ic_operand in[3] = { ic_val(ict_input(g, "a", IC_F32, sa[i])), ic_val(ict_input(g, "b", IC_F32, sb[i])) };
        int n = 2;
        if (ops[i] == IC_OP_LINEAR)
            in[n++] = ic_val(ict_input(g, "bias", IC_F32, "48"));
        ic_value y, r;
        cr_assert_eq(ic_graph_add_node(g, "y", ops[i], n, in, NULL, &y), IC_OK, "%s", ic_last_error(c));
        cr_assert_eq(ic_graph_unary(g, "r", IC_OP_RELU, ic_val(y), &r), IC_OK);
        cr_assert_eq(ic_graph_add_output(g, r), IC_OK);
        assert_graph_ok(c, g, 1);
        assert_graph_ok(c, g, 0);
        ic_graph_destroy(g);
    }
    ic_ctx_destroy(c);
}

static ic_graph *unary_graph(ic_ctx *c, const char *shape, ic_op red)
{
    ic_graph *g = ict_graph(c, "odd");
    ic_value x = ict_input(g, "x", IC_F32, shape), y, s;
    cr_assert_eq(ic_graph_unary(g, "y", IC_OP_TANH, ic_val(x), &y), IC_OK);
    ic_attrs a;
    ic_attrs_init(&a, red);
    ic_operand in[1] = { ic_val(y) };
    cr_assert_eq(ic_graph_add_node(g, "s", red, 1, in, &a, &s), IC_OK);
    cr_assert_eq(ic_graph_add_output(g, y), IC_OK);
    cr_assert_eq(ic_graph_add_output(g, s), IC_OK);
    return g;
}

Test(compile, odd_sizes)
{
    ic_ctx *c = ict_ctx();
    const char *shapes[] = { "1", "3", "1000003", "", "3,1,5" };
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        ic_graph *g = unary_graph(c, shapes[i], i % 2 ? IC_OP_AMAX : IC_OP_SUM);
        assert_graph_ok(c, g, 1);
        assert_graph_ok(c, g, 0);
        ic_graph_destroy(g);
    }
    ic_ctx_destroy(c);
}

Test(compile, strided_arguments_are_staged)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = seed_graph(c, "37");
    ic_compiled *cc;
    cr_assert_eq(ic_compile(c, g, NULL, &cc), IC_OK, "%s", ic_last_error(c));
    ic_tensor *args = make_args(c, g, NULL, 99);
    /* a: a transposed view of a [512, 37] buffer */
    ic_tensor big;
    ic_tensor_init(&big, IC_F32, 2, (int64_t[]){ 512, 37 }, NULL);
    cr_assert_eq(ic_tensor_alloc(c, &big), IC_OK);
    for (int64_t i = 0; i < 37 * 512; i++)
        ((float *)big.data)[i] = (float)(i % 101) * 0.01f;
    ic_tensor at = big;
    at.shape[0] = 37, at.shape[1] = 512, at.strides[0] = 1, at.strides[1] = 37;
    ic_tensor_free(c, &args[0]);
    args[0] = at;
    char msg[1024];
    for (int rep = 0; rep < 3; rep++)
        cr_assert(run_and_compare(c, g, cc, args, msg, sizeof msg), "strided run %d: %s", rep, msg);
    args[0].data = NULL;
    ic_tensor_free(c, &big);
    free_tensors(c, args, ic_graph_num_args(g));
    ic_compiled_destroy(cc);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* y = sum(x * b, -1) over x [B, 17]: the symbolic graph of the variant tests. */
static ic_graph *sym_graph(ic_ctx *c)
{
    ic_graph *g = ict_graph(c, "symv");
    ic_value x = ict_input(g, "x", IC_F32, "B,17"), b = ict_input(g, "b", IC_F32, "17"), y, s;
    cr_assert_eq(ic_graph_binary(g, "y", IC_OP_MUL, ic_val(x), ic_val(b), &y), IC_OK);
    ic_attrs a;
    ic_attrs_init(&a, IC_OP_SUM);
    a.has_dims = true, a.ndims = 1, a.dims[0] = -1;
    ic_operand in[1] = { ic_val(y) };
    cr_assert_eq(ic_graph_add_node(g, "s", IC_OP_SUM, 1, in, &a, &s), IC_OK);
    cr_assert_eq(ic_graph_add_output(g, s), IC_OK);
    return g;
}

static ic_compiled *compile_limited(ic_ctx *c, const ic_graph *g, int max_variants)
{
    ic_compile_options o;
    ic_compile_options_init(&o);
    o.max_variants = max_variants;
    ic_compiled *cc = NULL;
    cr_assert_eq(ic_compile(c, g, &o, &cc), IC_OK, "%s", ic_last_error(c));
    return cc;
}

Test(compile, symbolic_dims_recompile_and_cache)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = sym_graph(c);
    ic_compiled *cc = compile_limited(c, g, 0);
    cr_assert_eq(ic_compiled_num_variants(cc), 0);
    int64_t sizes[] = { 3, 5, 3, 1000, 5 };
    int want_variants[] = { 1, 2, 2, 3, 3 };
    for (int i = 0; i < 5; i++) {
        int64_t vals[1] = { sizes[i] };
        ic_tensor *args = make_args(c, g, vals, (unsigned)i);
        char msg[1024];
        cr_assert(run_and_compare(c, g, cc, args, msg, sizeof msg), "B=%ld: %s", (long)sizes[i], msg);
        cr_assert_eq(ic_compiled_num_variants(cc), want_variants[i], "after B=%ld: %d variants",
                     (long)sizes[i], ic_compiled_num_variants(cc));
        int64_t osh[IC_MAX_RANK];
        cr_assert_eq(ic_compiled_output_shape(cc, 0, osh), 1);
        cr_assert_eq(osh[0], sizes[i]);
        free_tensors(c, args, 2);
    }
    ic_compiled_destroy(cc);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* max_variants keeps the cache bounded: the least recently used goes, and comes back as a
 * fresh compile that still gives the right answer; a bad limit is refused. */
Test(compile, variant_cache_is_bounded)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = sym_graph(c);
    ic_compiled *cc = compile_limited(c, g, 2);
    int64_t sizes[] = { 3, 5, 3, 7, 5, 3, 9, 9 };
    int want[] = { 1, 2, 2, 2, 2, 2, 2, 2 };
    for (int i = 0; i < 8; i++) {
        int64_t vals[1] = { sizes[i] };
        ic_tensor *args = make_args(c, g, vals, (unsigned)i);
        char msg[1024];
        cr_assert(run_and_compare(c, g, cc, args, msg, sizeof msg), "B=%ld: %s", (long)sizes[i], msg);
        cr_assert_eq(ic_compiled_num_variants(cc), want[i], "after B=%ld: %d variants", (long)sizes[i],
                     ic_compiled_num_variants(cc));
        free_tensors(c, args, 2);
    }
    ic_compiled_destroy(cc);
    ic_compile_options o;
    ic_compile_options_init(&o);
    o.max_variants = -2;
    ict_assert_error(c, ic_compile(c, g, &o, &cc), IC_EINVAL, "max_variants -2");
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

Test(compile, unbound_symbol_needs_a_binding)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "create");
    ic_attrs a;
    ic_attrs_init(&a, IC_OP_FULL);
    ic_dim n;
    cr_assert_eq(ic_graph_symbol(g, "N", &n), IC_OK);
    a.nshape = 1, a.shape[0] = n, a.value = (ic_scalar){ 2.5, 2, false }, a.has_dtype = true, a.dtype = IC_F32;
    ic_value y;
    cr_assert_eq(ic_graph_add_node(g, "y", IC_OP_FULL, 0, NULL, &a, &y), IC_OK);
    cr_assert_eq(ic_graph_add_output(g, y), IC_OK);
    ic_compiled *cc;
    cr_assert_eq(ic_compile(c, g, NULL, &cc), IC_OK, "%s", ic_last_error(c));
    float buf[7];
    ic_tensor out;
    ic_tensor_init(&out, IC_F32, 1, (int64_t[]){ 7 }, buf);
    ict_assert_error(c, ic_run(cc, 0, NULL, 1, &out), IC_EINVAL, "symbol 'N'");
    cr_assert_eq(ic_compiled_bind(cc, "N", 7), IC_OK);
    cr_assert_eq(ic_run(cc, 0, NULL, 1, &out), IC_OK, "%s", ic_last_error(c));
    for (int i = 0; i < 7; i++)
        cr_assert_eq(buf[i], 2.5f);
    ic_compiled_destroy(cc);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* ---- concurrency and threads ---- */

typedef struct {
    ic_ctx *c;
    const ic_graph *g;
    ic_compiled *cc;
    unsigned seed;
    int ok;
    char msg[1024];
} worker;

static void *work(void *p)
{
    worker *w = p;
    w->ok = 1;
    for (int rep = 0; rep < 6 && w->ok; rep++) {
        ic_tensor *args = make_args(w->c, w->g, NULL, w->seed + (unsigned)rep);
        w->ok = run_and_compare(w->c, w->g, w->cc, args, w->msg, sizeof w->msg);
        free_tensors(w->c, args, ic_graph_num_args(w->g));
    }
    return NULL;
}

Test(compile, concurrent_runs_of_one_compiled_graph)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "concurrent");
    ic_value x = ict_input(g, "x", IC_F32, "64,301"), y, s, z;
    cr_assert_eq(ic_graph_unary(g, "y", IC_OP_EXP, ic_val(x), &y), IC_OK);
    ic_attrs a;
    ic_attrs_init(&a, IC_OP_SUM);
    a.has_dims = true, a.ndims = 1, a.dims[0] = 1, a.keepdim = true;
    ic_operand in[1] = { ic_val(y) };
    cr_assert_eq(ic_graph_add_node(g, "s", IC_OP_SUM, 1, in, &a, &s), IC_OK);
    cr_assert_eq(ic_graph_binary(g, "z", IC_OP_DIV, ic_val(y), ic_val(s), &z), IC_OK);
    cr_assert_eq(ic_graph_add_output(g, z), IC_OK);
    ic_compiled *cc;
    cr_assert_eq(ic_compile(c, g, NULL, &cc), IC_OK, "%s", ic_last_error(c));
    enum { N = 4 };
    worker w[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        w[i] = (worker){ c, g, cc, 1000u * (unsigned)i, 0, "" };
        pthread_create(&th[i], NULL, work, &w[i]);
    }
    for (int i = 0; i < N; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < N; i++)
        cr_assert(w[i].ok, "thread %d: %s", i, w[i].msg);
    ic_compiled_destroy(cc);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

static void *sym_work(void *p)
{
    worker *w = p;
    w->ok = 1;
    for (int rep = 0; rep < 8 && w->ok; rep++) {
        int64_t vals[1] = { 2 + ((int)w->seed + rep) % 5 };
        ic_tensor *args = make_args(w->c, w->g, vals, 100u * w->seed + (unsigned)rep);
        w->ok = run_and_compare(w->c, w->g, w->cc, args, w->msg, sizeof w->msg);
        free_tensors(w->c, args, 2);
    }
    return NULL;
}

/* Threads running five sizes through a cache of one: a variant in use is never dropped
 * under a run (each run's results are checked). */
Test(compile, variant_cache_of_one_under_threads)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = sym_graph(c);
    ic_compiled *cc = compile_limited(c, g, 1);
    enum { N = 3 };
    worker w[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        w[i] = (worker){ c, g, cc, (unsigned)i, 0, "" };
        pthread_create(&th[i], NULL, sym_work, &w[i]);
    }
    for (int i = 0; i < N; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < N; i++)
        cr_assert(w[i].ok, "thread %d: %s", i, w[i].msg);
    cr_assert_leq(ic_compiled_num_variants(cc), N, "%d variants", ic_compiled_num_variants(cc));
    ic_compiled_destroy(cc);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

Test(compile, two_threads_match_one)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = seed_graph(c, "2048");
    ic_compile_options o;
    ic_compile_options_init(&o);
    ic_compiled *one, *two;
    o.threads = 1;
    cr_assert_eq(ic_compile(c, g, &o, &one), IC_OK, "%s", ic_last_error(c));
    o.threads = 2;
    o.serial_threshold = 1;
    cr_assert_eq(ic_compile(c, g, &o, &two), IC_OK, "%s", ic_last_error(c));
    ic_tensor *args = make_args(c, g, NULL, 5);
    ic_tensor r1, r2;
    ic_tensor_init(&r1, IC_F32, 2, (int64_t[]){ 2048, 512 }, NULL);
    r2 = r1;
    cr_assert_eq(ic_tensor_alloc(c, &r1), IC_OK);
    cr_assert_eq(ic_tensor_alloc(c, &r2), IC_OK);
    cr_assert_eq(ic_run(one, 5, args, 1, &r1), IC_OK, "%s", ic_last_error(c));
    cr_assert_eq(ic_run(two, 5, args, 1, &r2), IC_OK, "%s", ic_last_error(c));
    cr_assert_eq(memcmp(r1.data, r2.data, 2048 * 512 * 4), 0, "threads=2 differs from threads=1");
    ic_tensor_free(c, &r1);
    ic_tensor_free(c, &r2);
    free_tensors(c, args, 5);
    ic_compiled_destroy(one);
    ic_compiled_destroy(two);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* ---- errors ---- */

Test(compile, run_errors_name_what_is_wrong)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = seed_graph(c, "8");
    ic_compiled *cc;
    cr_assert_eq(ic_compile(c, g, NULL, &cc), IC_OK, "%s", ic_last_error(c));
    ic_tensor *args = make_args(c, g, NULL, 1);
    ic_tensor out;
    ic_tensor_init(&out, IC_F32, 2, (int64_t[]){ 8, 512 }, NULL);
    cr_assert_eq(ic_tensor_alloc(c, &out), IC_OK);
    cr_assert_eq(ic_run(cc, 5, args, 1, &out), IC_OK, "%s", ic_last_error(c));
    /* wrong number of args */
    cr_assert_neq(ic_run(cc, 4, args, 1, &out), IC_OK);
    ict_assert_error(c, ic_run(cc, 4, args, 1, &out), IC_EINVAL, "5 arguments");
    /* an argument of the wrong shape */
    ic_tensor bad = args[1];
    bad.shape[0] = 9;
    ic_tensor saved = args[1];
    args[1] = bad;
    ic_status s = ic_run(cc, 5, args, 1, &out);
    cr_assert(s == IC_ESHAPE || s == IC_EINVAL, "status %d", s);
    cr_assert(strstr(ic_last_error(c), "'c'") != NULL, "message: %s", ic_last_error(c));
    args[1] = saved;
    /* an output of the wrong shape, dtype, strides */
    ic_tensor o2 = out;
    o2.shape[1] = 511;
    ict_assert_error(c, ic_run(cc, 5, args, 1, &o2), IC_ESHAPE, "output 0", "[8, 512]", "[8, 511]");
    o2 = out;
    o2.dtype = IC_F64;
    ict_assert_error(c, ic_run(cc, 5, args, 1, &o2), IC_ESHAPE, "output 0", "f64");
    o2 = out;
    o2.strides[0] = 1, o2.strides[1] = 8;
    ict_assert_error(c, ic_run(cc, 5, args, 1, &o2), IC_ESHAPE, "strided");
    /* an output that is an argument's memory */
    ict_assert_error(c, ic_run(cc, 5, args, 1, &args[0]), IC_EINVAL, "overlaps argument 0");
    ict_assert_error(c, ic_run(cc, 5, args, 0, NULL), IC_EINVAL, "1 outputs");
    ic_tensor_free(c, &out);
    free_tensors(c, args, 5);
    ic_compiled_destroy(cc);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

Test(compile, unknown_mode_is_refused)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = seed_graph(c, "2");
    ic_compile_options o;
    ic_compile_options_init(&o);
    o.mode = "turbo";
    ic_compiled *cc = (ic_compiled *)&o;
    ict_assert_error(c, ic_compile(c, g, &o, &cc), IC_EINVAL, "turbo");
    cr_assert_null(cc);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* ---- dumps ---- */

static bool nonempty(const char *dir, const char *file)
{
    struct stat st;
    return stat(ict_path(dir, file), &st) == 0 && st.st_size > 0;
}

Test(compile, debug_folder_has_every_stage)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = seed_graph(c, "4");
    const char *tmp = ict_tmpdir();
    char dir[512];
    snprintf(dir, sizeof dir, "%s", tmp);
    ic_compile_options o;
    ic_compile_options_init(&o);
    o.debug = 1;
    o.debug_dir = dir;
    ic_compiled *cc;
    cr_assert_eq(ic_compile(c, g, &o, &cc), IC_OK, "%s", ic_last_error(c));
    cr_assert_eq(ict_count_files(dir), 1, "one debug folder per compile");
    char sub[600];
    snprintf(sub, sizeof sub, "%s/seed_pattern_%ld_0", dir, (long)getpid());
    const char *files[] = { "graph.txt", "ir_pre_fusion.txt", "ir_post_fusion.txt", "output_code.ll", "output_code.s" };
    for (size_t i = 0; i < 5; i++)
        cr_assert(nonempty(sub, files[i]), "%s/%s missing or empty", sub, files[i]);
    cr_assert_eq(ict_count_files(sub), 5, "stray files in %s", sub);
    size_t n;
    char *ll = ict_read_file(ict_path(sub, "output_code.ll"), &n);
    cr_assert(ll && strstr(ll, "define void @"), "output_code.ll has no kernel");
    free(ll);
    ic_compiled_destroy(cc);
    ict_rmtree(dir);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

Test(compile, dump_each_stage)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = seed_graph(c, "4");
    const char *stages[] = { "graph", "loops", "fused", "llvm", "llvm-opt", "asm" };
    const char *marks[] = { "t0", "cpu_", "cpu_", "define void @", "define void @", "ret" };
    for (int i = 0; i < 6; i++) {
        char *buf = NULL;
        size_t n = 0;
        FILE *f = open_memstream(&buf, &n);
        cr_assert_eq(ic_compile_dump(c, g, NULL, NULL, stages[i], f), IC_OK, "%s: %s", stages[i], ic_last_error(c));
        fclose(f);
        cr_assert(strstr(buf, marks[i]) != NULL, "stage %s lacks '%s':\n%.1000s", stages[i], marks[i], buf);
        free(buf);
    }
    FILE *f = fopen("/dev/null", "w");
    ict_assert_error(c, ic_compile_dump(c, g, NULL, NULL, "nonsense", f), IC_EINVAL, "unknown stage 'nonsense'",
                     "graph, loops, fused, llvm, llvm-opt, asm, ptx");
    ict_assert_error(c, ic_compile_dump(c, g, NULL, NULL, "sass", f), IC_EINVAL, "stage 'sass' is made by ic-dump");
    fclose(f);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* ---- one pipeline: dumps, IC_DUMP and the debug folder show the same text ---- */

/* A file's contents, NUL-terminated (malloc'd). */
static char *slurp(const char *dir, const char *file)
{
    size_t n = 0;
    char *raw = ict_read_file(ict_path(dir, file), &n), *t = raw ? realloc(raw, n + 1) : NULL;
    cr_assert(t, "cannot read %s/%s", dir, file);
    t[n] = 0;
    return t;
}

static char *dump_text(ic_ctx *c, const ic_graph *g, const ic_compile_options *o, const char *stage)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    cr_assert_eq(ic_compile_dump(c, g, o, NULL, stage, f), IC_OK, "%s: %s", stage, ic_last_error(c));
    fclose(f);
    return buf;
}

static void set_switches(ic_ctx *c, const char *dump, bool no_fusion)
{
    ic_switches sw;
    ic_ctx_switches(c, &sw);
    sw.dump = dump;
    sw.no_fusion = no_fusion;
    cr_assert_eq(ic_ctx_set_switches(c, &sw), IC_OK, "%s", ic_last_error(c));
}

/* stderr of ic_compile(c, g, o) (IC_DUMP prints there); the compiled graph in *cc. */
static char *compile_stderr(ic_ctx *c, const ic_graph *g, const ic_compile_options *o, ic_compiled **cc)
{
    char path[1024];
    const char *dir = ict_tmpdir();
    snprintf(path, sizeof path, "%s", ict_path(dir, "stderr.txt"));
    fflush(stderr);
    int saved = dup(2);
    cr_assert(freopen(path, "w", stderr), "cannot redirect stderr");
    ic_status s = ic_compile(c, g, o, cc);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    cr_assert_eq(s, IC_OK, "%s", ic_last_error(c));
    char *text = slurp(dir, "stderr.txt");
    ict_rmtree(dir);
    return text;
}

Test(compile, dump_and_debug_folder_are_the_compiles_own_stages)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "frozen");
    ic_value x = ict_input(g, "x", IC_F32, "4,8"), w, wt, y, z;
    static float wdata[8 * 8];
    for (int i = 0; i < 64; i++)
        wdata[i] = (float)(i % 7) - 3.0f;
    ic_dim d[2] = { ic_dim_const(8), ic_dim_const(8) };
    cr_assert_eq(ic_graph_add_param(g, "w", IC_F32, 2, d, wdata, sizeof wdata, NULL, NULL, &w), IC_OK);
    /* a constant subgraph: folded when freezing */
    cr_assert_eq(ic_graph_unary(g, "wt", IC_OP_NEG, ic_val(w), &wt), IC_OK);
    cr_assert_eq(ic_graph_binary(g, "y", IC_OP_MATMUL, ic_val(x), ic_val(wt), &y), IC_OK);
    cr_assert_eq(ic_graph_unary(g, "z", IC_OP_RELU, ic_val(y), &z), IC_OK);
    cr_assert_eq(ic_graph_add_output(g, z), IC_OK);
    const char *dir = ict_tmpdir();
    char parent[512];
    snprintf(parent, sizeof parent, "%s", dir);
    ic_compile_options o;
    ic_compile_options_init(&o);
    o.debug = 1;
    o.debug_dir = parent;
    o.freezing = 1;
    set_switches(c, "llvm,fuse", false);
    ic_compiled *cc;
    char *err = compile_stderr(c, g, &o, &cc);
    char sub[600];
    snprintf(sub, sizeof sub, "%s/frozen_%ld_0", parent, (long)getpid());
    static const char *const stages[] = { "graph", "loops", "fused", "llvm-opt", "asm" };
    static const char *const files[] = { "graph.txt", "ir_pre_fusion.txt", "ir_post_fusion.txt", "output_code.ll",
                                         "output_code.s" };
    for (int i = 0; i < 5; i++) {
        char *want = slurp(sub, files[i]), *got = dump_text(c, g, &o, stages[i]);
        cr_assert_str_eq(got, want, "ic_compile_dump '%s' differs from the compile's %s", stages[i], files[i]);
        free(want);
        free(got);
    }
    char *graph = slurp(sub, "graph.txt");
    cr_assert(!strstr(graph, "neg("), "freezing folds the negated weight:\n%s", graph);
    free(graph);
    /* IC_DUMP=llvm,fuse (an alias): the same text on stderr, after a banner each */
    char *fused = dump_text(c, g, &o, "fused"), *llvm = dump_text(c, g, &o, "llvm");
    char *want = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&want, &n);
    fprintf(f, "== after fused ==\n%s== after llvm ==\n%s", fused, llvm);
    fclose(f);
    cr_assert(strstr(err, want), "IC_DUMP output differs from the dumps:\n%.3000s", err);
    free(want);
    free(fused);
    free(llvm);
    free(err);
    ic_compiled_destroy(cc);
    ict_rmtree(dir);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

Test(compile, stage_names_and_aliases)
{
    static const char *const names[][2] = { { "graph", "spec" }, { "loops", "lower" }, { "fused", "fuse" },
                                            { "llvm-opt", "opt" }, { "asm", "assembly" } };
    ic_ctx *c = ict_ctx();
    ic_graph *g = seed_graph(c, "4");
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        ic_pipe_stage a, b;
        cr_assert(ic_pipe_stage_find(names[i][0], &a) && ic_pipe_stage_find(names[i][1], &b), "%s", names[i][0]);
        cr_assert_eq(a, b, "'%s' is an alias of '%s'", names[i][1], names[i][0]);
        cr_assert_str_eq(ic_pipe_stage_get(a)->name, names[i][0]);
        char *x = dump_text(c, g, NULL, names[i][0]), *y = dump_text(c, g, NULL, names[i][1]);
        cr_assert_str_eq(x, y, "stage %s", names[i][0]);
        free(x);
        free(y);
    }
    ic_pipe_stage st;
    cr_assert(!ic_pipe_stage_find("fusedx", &st) && !ic_pipe_stage_find("", &st));
    cr_assert_null(ic_pipe_stage_get(IC_PIPE_COUNT));
    /* the GPU backend's stage, no GPU needed: kernels named as ic_cuda_compile names them */
    char *ptx = dump_text(c, g, NULL, "ptx");
    cr_assert(strstr(ptx, ".entry gpu_fused_"), "%.2000s", ptx);
    free(ptx);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* The GPU's pipeline is the same one with the CUDA backend: its own fuse options (gpu_
 * kernels), freezing folds constants there too, and the CPU-only stages are refused. */
Test(compile, gpu_dump_runs_the_gpu_pipeline)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "frozen");
    ic_value x = ict_input(g, "x", IC_F32, "4,8"), w, wt, y;
    static float wdata[4 * 8];
    ic_dim d[2] = { ic_dim_const(4), ic_dim_const(8) };
    cr_assert_eq(ic_graph_add_param(g, "w", IC_F32, 2, d, wdata, sizeof wdata, NULL, NULL, &w), IC_OK);
    cr_assert_eq(ic_graph_unary(g, "wt", IC_OP_NEG, ic_val(w), &wt), IC_OK);
    cr_assert_eq(ic_graph_binary(g, "y", IC_OP_ADD, ic_val(x), ic_val(wt), &y), IC_OK);
    cr_assert_eq(ic_graph_add_output(g, y), IC_OK);
    ic_cuda_options o;
    ic_cuda_options_init(&o);
    o.freezing = true;
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    cr_assert_eq(ic_cuda_compile_dump(c, g, &o, NULL, "fuse", f), IC_OK, "%s", ic_last_error(c));
    fclose(f);
    cr_assert(strstr(buf, "gpu_") && !strstr(buf, "cpu_"), "GPU kernel names:\n%s", buf);
    cr_assert(!strstr(buf, "neg"), "freezing folded neg(w) into a param:\n%s", buf);
    free(buf);
    /* the loop IR before fusion is the GPU's too: its kernels are named for it */
    f = open_memstream(&buf, &n);
    cr_assert_eq(ic_cuda_compile_dump(c, g, &o, NULL, "loops", f), IC_OK, "%s", ic_last_error(c));
    fclose(f);
    cr_assert(strstr(buf, "gpu_add_0") && !strstr(buf, "cpu_"), "GPU loop IR names:\n%s", buf);
    free(buf);
    f = fopen("/dev/null", "w");
    ict_assert_error(c, ic_cuda_compile_dump(c, g, &o, NULL, "asm", f), IC_EINVAL, "stage 'asm' is made by the cpu");
    ict_assert_error(c, ic_compile_dump(c, g, NULL, NULL, "ptxx", f), IC_EINVAL, "unknown stage 'ptxx'");
    fclose(f);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

Test(compile, switches_are_read_once_and_settable)
{
    unsetenv("IC_NO_FUSION");
    ic_ctx *c = ict_ctx();
    ic_graph *g = seed_graph(c, "4");
    setenv("IC_NO_FUSION", "1", 1); /* too late for c */
    ic_compiled *cc;
    cr_assert_eq(ic_compile(c, g, NULL, &cc), IC_OK, "%s", ic_last_error(c));
    cr_assert_eq(ic_compiled_num_kernels(cc), 1, "IC_NO_FUSION set after ic_ctx_create has no effect");
    ic_compiled_destroy(cc);
    ic_switches sw;
    ic_ctx_switches(c, &sw);
    cr_assert(!sw.no_fusion);
    set_switches(c, NULL, true);
    cr_assert_eq(ic_compile(c, g, NULL, &cc), IC_OK, "%s", ic_last_error(c));
    cr_assert_eq(ic_compiled_num_kernels(cc), 4, "ic_ctx_set_switches: one kernel per op");
    ic_compiled_destroy(cc);
    setenv("IC_COMPILE_THREADS", "3", 1);
    setenv("IC_COMPILE_DEBUG", "0", 1);
    setenv("IC_DUMP", "fused", 1);
    ic_ctx *c2 = ict_ctx(); /* reads them now */
    unsetenv("IC_NO_FUSION");
    unsetenv("IC_COMPILE_THREADS");
    unsetenv("IC_COMPILE_DEBUG");
    unsetenv("IC_DUMP");
    ic_ctx_switches(c2, &sw);
    cr_assert(sw.no_fusion && sw.compile_threads == 3 && !sw.compile_debug, "switches of a new context");
    cr_assert_str_eq(sw.dump, "fused");
    /* IC_COMPILE_DEBUG through the API: options' debug 0 follows it, -1 turns it off */
    sw.compile_debug = true;
    sw.no_fusion = false;
    sw.dump = NULL;
    cr_assert_eq(ic_ctx_set_switches(c, &sw), IC_OK);
    char dir[512];
    snprintf(dir, sizeof dir, "%s", ict_tmpdir());
    ic_compile_options o;
    ic_compile_options_init(&o);
    o.debug_dir = dir;
    for (int debug = -1; debug <= 0; debug++) {
        o.debug = debug;
        cr_assert_eq(ic_compile(c, g, &o, &cc), IC_OK, "%s", ic_last_error(c));
        ic_compiled_destroy(cc);
        cr_assert_eq(ict_count_files(dir), debug + 1, "debug %d: %d folders", debug, ict_count_files(dir));
    }
    ict_rmtree(dir);
    ic_graph_destroy(g);
    ic_ctx_destroy(c2);
    ic_ctx_destroy(c);
}

/* ---- allocation ---- */

typedef struct {
    long count;     /* allocations and reallocations so far */
    long fail_at;   /* the one that fails (0 = none) */
} alloc_probe;

static void *probe_alloc(void *user, void *ptr, size_t size)
{
    alloc_probe *p = user;
    if (size == 0) {
        free(ptr);
        return NULL;
    }
    if (++p->count == p->fail_at)
        return NULL;
    return realloc(ptr, size);
}

Test(compile, no_allocation_in_steady_state)
{
    alloc_probe probe = { 0, 0 };
    ic_ctx_options co = { probe_alloc, &probe, NULL, NULL };
    ic_ctx *c;
    cr_assert_eq(ic_ctx_create(&co, &c), IC_OK);
    ic_graph *g = ict_graph(c, "steady");
    ic_value x = ict_input(g, "x", IC_F32, "64,300"), y, s, z;
    cr_assert_eq(ic_graph_unary(g, "y", IC_OP_EXP, ic_val(x), &y), IC_OK);
    ic_attrs a;
    ic_attrs_init(&a, IC_OP_SUM);
    a.has_dims = true, a.ndims = 1, a.dims[0] = 1, a.keepdim = true;
    ic_operand in[1] = { ic_val(y) };
    cr_assert_eq(ic_graph_add_node(g, "s", IC_OP_SUM, 1, in, &a, &s), IC_OK);
    cr_assert_eq(ic_graph_binary(g, "z", IC_OP_DIV, ic_val(y), ic_val(s), &z), IC_OK);
    cr_assert_eq(ic_graph_add_output(g, z), IC_OK);
    cr_assert_eq(ic_graph_add_output(g, s), IC_OK);
    ic_compile_options o;
    ic_compile_options_init(&o);
    o.fusion = 0; /* keeps intermediates in the arena */
    ic_compiled *cc;
    cr_assert_eq(ic_compile(c, g, &o, &cc), IC_OK, "%s", ic_last_error(c));
    ic_tensor *args = make_args(c, g, NULL, 3);
    /* a strided view of x exercises the staging buffer too */
    ic_tensor xt;
    ic_tensor_init(&xt, IC_F32, 2, (int64_t[]){ 300, 64 }, NULL);
    cr_assert_eq(ic_tensor_alloc(c, &xt), IC_OK);
    ic_tensor xs = xt;
    xs.shape[0] = 64, xs.shape[1] = 300, xs.strides[0] = 1, xs.strides[1] = 64;
    ic_tensor outs[2];
    ic_tensor_init(&outs[0], IC_F32, 2, (int64_t[]){ 64, 300 }, NULL);
    ic_tensor_init(&outs[1], IC_F32, 2, (int64_t[]){ 64, 1 }, NULL);
    cr_assert_eq(ic_tensor_alloc(c, &outs[0]), IC_OK);
    cr_assert_eq(ic_tensor_alloc(c, &outs[1]), IC_OK);
    cr_assert_eq(ic_run(cc, 1, args, 2, outs), IC_OK, "%s", ic_last_error(c));
    cr_assert_eq(ic_run(cc, 1, &xs, 2, outs), IC_OK, "%s", ic_last_error(c));
    long before = probe.count;
    for (int i = 0; i < 20; i++) {
        cr_assert_eq(ic_run(cc, 1, i % 2 ? &xs : args, 2, outs), IC_OK, "%s", ic_last_error(c));
    }
    cr_assert_eq(probe.count, before, "%ld allocations in 20 steady-state runs", probe.count - before);
    ic_tensor_free(c, &outs[0]);
    ic_tensor_free(c, &outs[1]);
    ic_tensor_free(c, &xt);
    free_tensors(c, args, 1);
    ic_compiled_destroy(cc);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* Fails the Nth allocation of the first run (slot, arena, staging) for every N: an error,
 * never a crash or a leak, and the next run works. */
Test(compile, out_of_memory_in_a_run_is_an_error)
{
    alloc_probe probe = { 0, 0 };
    ic_ctx_options co = { probe_alloc, &probe, NULL, NULL };
    ic_ctx *c;
    cr_assert_eq(ic_ctx_create(&co, &c), IC_OK);
    ic_graph *g = seed_graph(c, "3");
    ic_compile_options o;
    ic_compile_options_init(&o);
    o.fusion = 0;
    ic_tensor *args = make_args(c, g, NULL, 1);
    ic_tensor at;
    ic_tensor_init(&at, IC_F32, 2, (int64_t[]){ 512, 3 }, NULL);
    cr_assert_eq(ic_tensor_alloc(c, &at), IC_OK);
    ic_tensor keep = args[0];
    args[0] = at;
    args[0].shape[0] = 3, args[0].shape[1] = 512, args[0].strides[0] = 1, args[0].strides[1] = 3;
    ic_tensor out;
    ic_tensor_init(&out, IC_F32, 2, (int64_t[]){ 3, 512 }, NULL);
    cr_assert_eq(ic_tensor_alloc(c, &out), IC_OK);
    bool done = false;
    for (long n = 1; !done && n < 100; n++) {
        ic_compiled *cc;
        cr_assert_eq(ic_compile(c, g, &o, &cc), IC_OK, "%s", ic_last_error(c));
        probe.fail_at = probe.count + n;
        ic_status s = ic_run(cc, 5, args, 1, &out);
        done = probe.count < probe.fail_at;
        probe.fail_at = 0;
        cr_assert(done ? s == IC_OK : s == IC_ENOMEM, "n=%ld: status %d (%s)", n, s, ic_last_error(c));
        cr_assert_eq(ic_run(cc, 5, args, 1, &out), IC_OK, "after n=%ld: %s", n, ic_last_error(c));
        ic_compiled_destroy(cc);
    }
    cr_assert(done);
    args[0] = keep;
    ic_tensor_free(c, &at);
    ic_tensor_free(c, &out);
    free_tensors(c, args, 5);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* embedding indices outside [0, num_embeddings) are refused, as PyTorch refuses them */
Test(compile, embedding_index_out_of_range_is_an_error)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "emb");
    ic_value w = ict_input(g, "w", IC_F32, "10,6"), idx = ict_input(g, "idx", IC_I64, "12"), r, y;
    ic_attrs a;
    ic_attrs_init(&a, IC_OP_RESHAPE);
    a.nshape = 2, a.shape[0] = ic_dim_const(3), a.shape[1] = ic_dim_const(4);
    ic_operand rin[1] = { ic_val(idx) };
    cr_assert_eq(ic_graph_add_node(g, "r", IC_OP_RESHAPE, 1, rin, &a, &r), IC_OK);
    ic_operand ein[2] = { ic_val(w), ic_val(r) };
    cr_assert_eq(ic_graph_add_node(g, "y", IC_OP_EMBEDDING, 2, ein, NULL, &y), IC_OK);
    cr_assert_eq(ic_graph_add_output(g, y), IC_OK);
    ic_compiled *cc;
    cr_assert_eq(ic_compile(c, g, NULL, &cc), IC_OK, "%s", ic_last_error(c));
    ic_tensor args[2], out;
    float wd[60];
    int64_t id[12];
    for (int i = 0; i < 60; i++)
        wd[i] = (float)i;
    for (int i = 0; i < 12; i++)
        id[i] = (i * 7) % 10;
    ic_tensor_init(&args[0], IC_F32, 2, (int64_t[]){ 10, 6 }, wd);
    ic_tensor_init(&args[1], IC_I64, 1, (int64_t[]){ 12 }, id);
    float od[72];
    ic_tensor_init(&out, IC_F32, 3, (int64_t[]){ 3, 4, 6 }, od);
    cr_assert_eq(ic_run(cc, 2, args, 1, &out), IC_OK, "%s", ic_last_error(c));
    for (int i = 0; i < 72; i++)
        cr_assert_eq(od[i], wd[id[i / 6] * 6 + i % 6]);
    id[5] = 10;
    ict_assert_error(c, ic_run(cc, 2, args, 1, &out), IC_EINVAL, "'y'", "index 10 out of range [0, 10)");
    id[5] = -1;
    ict_assert_error(c, ic_run(cc, 2, args, 1, &out), IC_EINVAL, "index -1");
    ic_compiled_destroy(cc);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* ---- freezing folds batch_norm into the convolution before it ---- */

static ic_value const_param(ic_graph *g, const char *name, int rank, const int64_t *shape,
                            float lo, float step)
{
    ic_dim d[IC_MAX_RANK];
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        d[i] = ic_dim_const(shape[i]), n *= shape[i];
    float *data = malloc((size_t)n * sizeof *data);
    for (int64_t i = 0; i < n; i++)
        data[i] = lo + step * (float)(i % 11);
    ic_value v;
    cr_assert_eq(ic_graph_add_param(g, name, IC_F32, rank, d, data, (size_t)n * sizeof *data, NULL,
                                    NULL, &v), IC_OK);
    free(data);
    return v;
}

/* conv -> bn (foldable) -> relu -> conv (also an output: not foldable) -> bn */
static ic_graph *conv_bn_graph(ic_ctx *c)
{
    ic_graph *g = ict_graph(c, "convbn");
    ic_value x = ict_input(g, "x", IC_F32, "2,3,9,8"), y, z;
    int64_t w1s[4] = { 4, 3, 3, 3 }, w2s[4] = { 4, 4, 1, 1 }, cs[1] = { 4 };
    ic_value w1 = const_param(g, "w1", 4, w1s, -0.5f, 0.1f), b1 = const_param(g, "b1", 1, cs, -0.2f, 0.1f);
    ic_value w2 = const_param(g, "w2", 4, w2s, -0.4f, 0.08f);
    ic_value bn[2][4];
    for (int k = 0; k < 2; k++) {
        char nm[16];
        snprintf(nm, sizeof nm, "m%d", k), bn[k][0] = const_param(g, nm, 1, cs, -0.3f, 0.05f);
        snprintf(nm, sizeof nm, "v%d", k), bn[k][1] = const_param(g, nm, 1, cs, 0.5f, 0.2f);
        snprintf(nm, sizeof nm, "g%d", k), bn[k][2] = const_param(g, nm, 1, cs, 0.7f, 0.1f);
        snprintf(nm, sizeof nm, "be%d", k), bn[k][3] = const_param(g, nm, 1, cs, -0.1f, 0.03f);
    }
    ic_attrs ca, ba;
    ic_attrs_init(&ca, IC_OP_CONV);
    ca.npadding = 1, ca.padding[0] = 1;
    ic_attrs_init(&ba, IC_OP_BATCH_NORM);
    ba.eps = 1e-3;
    ic_operand c1[3] = { ic_val(x), ic_val(w1), ic_val(b1) };
    cr_assert_eq(ic_graph_add_node(g, "conv1", IC_OP_CONV, 3, c1, &ca, &y), IC_OK);
    ic_operand n1[5] = { ic_val(y), ic_val(bn[0][0]), ic_val(bn[0][1]), ic_val(bn[0][2]), ic_val(bn[0][3]) };
    cr_assert_eq(ic_graph_add_node(g, "bn1", IC_OP_BATCH_NORM, 5, n1, &ba, &y), IC_OK);
    cr_assert_eq(ic_graph_unary(g, "relu", IC_OP_RELU, ic_val(y), &y), IC_OK);
    ic_attrs_init(&ca, IC_OP_CONV);
    ic_operand c2[2] = { ic_val(y), ic_val(w2) };
    cr_assert_eq(ic_graph_add_node(g, "conv2", IC_OP_CONV, 2, c2, &ca, &y), IC_OK);
    ic_operand n2[5] = { ic_val(y), ic_val(bn[1][0]), ic_val(bn[1][1]), ic_none(), ic_val(bn[1][3]) };
    cr_assert_eq(ic_graph_add_node(g, "bn2", IC_OP_BATCH_NORM, 5, n2, &ba, &z), IC_OK);
    cr_assert_eq(ic_graph_add_output(g, z), IC_OK);
    cr_assert_eq(ic_graph_add_output(g, y), IC_OK);
    return g;
}

Test(compile, freezing_folds_batch_norm_into_the_conv_before_it)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = conv_bn_graph(c);
    ic_compile_options o;
    ic_compile_options_init(&o);
    o.freezing = 1;
    char *graph = ict_compile_dump(c, g, &o, "graph");
    /* bn1 became the convolution (its expansion is named after it), conv1 is gone */
    cr_assert(strstr(graph, "bn1.") && !strstr(graph, "conv1"), "bn1 folded into conv1:\n%s", graph);
    /* conv2 is an output too: its batch_norm stays */
    cr_assert(strstr(graph, "conv2.") && strstr(graph, "bn2."), "conv2 and bn2 kept:\n%s", graph);
    free(graph);
    for (int fz = 0; fz <= 1; fz++) {
        o.freezing = fz;
        ic_compiled *cc;
        cr_assert_eq(ic_compile(c, g, &o, &cc), IC_OK, "%s", ic_last_error(c));
        ic_tensor *args = make_args(c, g, NULL, 777);
        char msg[1024];
        cr_assert(run_and_compare(c, g, cc, args, msg, sizeof msg), "freezing %d: %s", fz, msg);
        free_tensors(c, args, ic_graph_num_args(g));
        ic_compiled_destroy(cc);
    }
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}
