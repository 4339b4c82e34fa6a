/* test_gemm.c - the GEMM path of LLVMGen (gemm.c, gemm_emit.c) end to end: matmul (1-d, 2-d,
 * batched with broadcasting), bmm and linear (with and without bias) compiled with ic_compile
 * and checked against the reference executor (ic_ref_run) within the spec's tolerances, for
 * odd, prime and tiny M, N, K, transposed operands, f32/f16/bf16, fused epilogues (bias,
 * relu, gelu, residual add, scaling, casts), threads, concurrent runs and freezing. Every
 * case also checks that the kernel really went through the GEMM path (the IR has the
 * packed micro-kernel) and the recogniser is tested on hand-built loop IR. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <criterion/criterion.h>
#include "ic/ic.h"
#include "kbuild.h"
#include "../../lib/Runtime/compile-impl.h"
#include "testutil.h"

/* ---- helpers ---- */

static unsigned rng(unsigned *s)
{
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

/* Values in [-1, 1) on a grid of 1/256 (exact in bf16 and f16). */
static double rnd(unsigned *s)
{
    return ((int)(rng(s) % 512) - 256) / 256.0;
}

static void fill(ic_tensor *t, unsigned seed)
{
    int64_t n = ic_tensor_numel(t);
    for (int64_t i = 0; i < n; i++)
        ic_tensor_set(t, i, rnd(&seed));
}

/* A param with random data (a frozen weight when freezing is on). */
static ic_value param_data(ic_graph *g, const char *name, ic_dtype dt, int rank, const int64_t *shape,
                           unsigned seed)
{
    ic_tensor t;
    ic_tensor_init(&t, dt, rank, shape, NULL);
    cr_assert_eq(ic_tensor_alloc(ic_graph_ctx(g), &t), IC_OK);
    fill(&t, seed);
    ic_dim d[IC_MAX_RANK];
    for (int i = 0; i < rank; i++)
        d[i] = ic_dim_const(shape[i]);
    ic_value v;
    size_t bytes = (size_t)ic_tensor_numel(&t) * ic_dtype_size(dt);
    cr_assert_eq(ic_graph_add_param(g, name, dt, rank, d, t.data, bytes, NULL, NULL, &v), IC_OK,
                 "%s", ic_last_error(ic_graph_ctx(g)));
    ic_tensor_free(ic_graph_ctx(g), &t);
    return v;
}

static ic_value input(ic_graph *g, const char *name, ic_dtype dt, int rank, const int64_t *shape)
{
    ic_dim d[IC_MAX_RANK];
    for (int i = 0; i < rank; i++)
        d[i] = ic_dim_const(shape[i]);
    ic_value v;
    cr_assert_eq(ic_graph_add_input(g, name, dt, rank, d, &v), IC_OK, "%s", ic_last_error(ic_graph_ctx(g)));
    return v;
}

static ic_value node(ic_graph *g, const char *name, ic_op op, int n, const ic_operand *in,
                     const ic_attrs *a)
{
    ic_value v;
    ic_status s = ic_graph_add_node(g, name, op, n, in, a, &v);
    cr_assert_eq(s, IC_OK, "%s: %s", name, ic_last_error(ic_graph_ctx(g)));
    return v;
}

static ic_value op2(ic_graph *g, const char *name, ic_op op, ic_value a, ic_value b)
{
    ic_operand in[2] = { ic_val(a), ic_val(b) };
    return node(g, name, op, 2, in, NULL);
}

static ic_value op1(ic_graph *g, const char *name, ic_op op, ic_value a)
{
    ic_operand in[1] = { ic_val(a) };
    return node(g, name, op, 1, in, NULL);
}

static ic_value transpose(ic_graph *g, const char *name, ic_value a, int d0, int d1)
{
    ic_attrs at;
    ic_attrs_init(&at, IC_OP_TRANSPOSE);
    at.dim0 = d0, at.dim1 = d1;
    ic_operand in[1] = { ic_val(a) };
    return node(g, name, IC_OP_TRANSPOSE, 1, in, &at);
}

static ic_value cast(ic_graph *g, const char *name, ic_value a, ic_dtype dt)
{
    ic_attrs at;
    ic_attrs_init(&at, IC_OP_CAST);
    at.has_dtype = true, at.dtype = dt;
    ic_operand in[1] = { ic_val(a) };
    return node(g, name, IC_OP_CAST, 1, in, &at);
}

static void output(ic_graph *g, ic_value v)
{
    cr_assert_eq(ic_graph_add_output(g, v), IC_OK);
}

/* Lines of text that start with `prefix` and contain `needle`. */
static int count_lines(const char *text, const char *prefix, const char *needle)
{
    int n = 0;
    for (const char *p = text; p && *p;) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (strncmp(p, prefix, strlen(prefix)) == 0) {
            char line[512];
            size_t k = len < sizeof line - 1 ? len : sizeof line - 1;
            memcpy(line, p, k);
            line[k] = 0;
            n += strstr(line, needle) != NULL;
        }
        p = e ? e + 1 : NULL;
    }
    return n;
}

/* The generated IR defines a GEMM micro-kernel (the packed, register-blocked path). */
static void assert_gemm_path(ic_ctx *c, const ic_graph *g, const ic_compile_options *o, int want)
{
    char *ir = ict_compile_dump(c, g, o, "llvm");
    int n = count_lines(ir, "define", ".gemm.work(");
    cr_assert(strstr(ir, ".gemm.micro.") != NULL, "graph '%s': no GEMM micro-kernel in the IR",
              ic_graph_name(g));
    cr_assert(strstr(ir, "@llvm.fma.v") != NULL || strstr(ir, "@llvm.x86.avx512bf16.dpbf16ps") != NULL,
              "graph '%s': micro-kernel without vector fma or bf16 dot products", ic_graph_name(g));
    cr_assert_eq(n, want, "graph '%s': %d GEMM kernels, want %d", ic_graph_name(g), n, want);
    free(ir);
}

/* Random args for g (contiguous). */
static ic_tensor *make_args(ic_ctx *c, const ic_graph *g, unsigned seed)
{
    int n = ic_graph_num_args(g);
    ic_tensor *a = calloc((size_t)n + 1, sizeof *a);
    for (int i = 0; i < n; i++) {
        ic_node_info ni;
        ic_graph_node(g, ic_graph_arg(g, i), &ni);
        int64_t shape[IC_MAX_RANK];
        for (int d = 0; d < ni.rank; d++)
            shape[d] = ni.shape[d].coef;
        ic_tensor_init(&a[i], ni.dtype, ni.rank, shape, NULL);
        cr_assert_eq(ic_tensor_alloc(c, &a[i]), IC_OK);
        fill(&a[i], seed + 977u * (unsigned)i);
    }
    return a;
}

static void free_tensors(ic_ctx *c, ic_tensor *t, int n)
{
    for (int i = 0; i < n; i++)
        ic_tensor_free(c, &t[i]);
    free(t);
}

/* Compiles g under o, runs it on args, returns the outputs (caller frees). */
static ic_tensor *run(ic_ctx *c, const ic_graph *g, const ic_compile_options *o, const ic_tensor *args)
{
    int nargs = ic_graph_num_args(g), nouts = ic_graph_num_outputs(g);
    ic_compiled *cc = NULL;
    ic_status s = ic_compile(c, g, o, &cc);
    cr_assert_eq(s, IC_OK, "ic_compile '%s': %s", ic_graph_name(g), ic_last_error(c));
    ic_tensor *got = calloc((size_t)nouts + 1, sizeof *got);
    for (int i = 0; i < nouts; i++) {
        ic_node_info ni;
        ic_graph_node(g, ic_graph_output(g, i), &ni);
        int64_t shape[IC_MAX_RANK];
        for (int d = 0; d < ni.rank; d++)
            shape[d] = ni.shape[d].coef;
        ic_tensor_init(&got[i], ni.dtype, ni.rank, shape, NULL);
        cr_assert_eq(ic_tensor_alloc(c, &got[i]), IC_OK);
    }
    s = ic_run(cc, nargs, args, nouts, got);
    cr_assert_eq(s, IC_OK, "ic_run '%s': %s", ic_graph_name(g), ic_last_error(c));
    ic_compiled_destroy(cc);
    return got;
}

/* Checks g (compiled under o, default options when NULL) against ic_ref_run; asserts that
 * ngemm kernels took the GEMM path. */
static void check_opts(ic_ctx *c, const ic_graph *g, const ic_compile_options *o, int ngemm)
{
    ic_compile_options d;
    if (!o)
        ic_compile_options_init(&d), o = &d;
    assert_gemm_path(c, g, o, ngemm);
    int nargs = ic_graph_num_args(g), nouts = ic_graph_num_outputs(g);
    ic_tensor *args = make_args(c, g, 4242u);
    ic_tensor *want = calloc((size_t)nouts + 1, sizeof *want);
    cr_assert_eq(ic_ref_run(c, g, NULL, nargs, args, nouts, want), IC_OK, "ref: %s", ic_last_error(c));
    ic_tensor *got = run(c, g, o, args);
    for (int i = 0; i < nouts; i++) {
        char m[1024];
        cr_assert(ict_allclose(&got[i], &want[i], m, sizeof m), "graph '%s' output %d: %s",
                  ic_graph_name(g), i, m);
    }
    free_tensors(c, got, nouts);
    free_tensors(c, want, nouts);
    free_tensors(c, args, nargs);
}

static void check(ic_ctx *c, const ic_graph *g, int ngemm) { check_opts(c, g, NULL, ngemm); }

static const int64_t SIZES[] = { 1, 2, 3, 7, 17, 31, 64, 97, 128, 257 };
#define NSIZES ((int)(sizeof SIZES / sizeof *SIZES))

/* C = A[M, K] @ B[K, N] in dtype dt (A an input, B an input or a param with data). */
static ic_graph *mm_graph(ic_ctx *c, int64_t M, int64_t N, int64_t K, ic_dtype dt, bool bparam)
{
    char name[96];
    snprintf(name, sizeof name, "mm_%lldx%lldx%lld_%s", (long long)M, (long long)N, (long long)K,
             ic_dtype_name(dt));
    ic_graph *g = ict_graph(c, name);
    ic_value a = input(g, "a", dt, 2, (int64_t[]){ M, K });
    ic_value b = bparam ? param_data(g, "b", dt, 2, (int64_t[]){ K, N }, 7u)
                        : input(g, "b", dt, 2, (int64_t[]){ K, N });
    output(g, op2(g, "c", IC_OP_MATMUL, a, b));
    return g;
}

/* ---- matmul shapes ---- */

Test(gemm, matmul_2d_odd_prime_and_tiny_shapes)
{
    ic_ctx *c = ict_ctx();
    /* every size as M, N and K at least once, with mixes of the others */
    for (int i = 0; i < NSIZES; i++)
        for (int r = 0; r < 3; r++) {
            int64_t M = SIZES[i], N = SIZES[(i + 3 + r * 2) % NSIZES], K = SIZES[(i + 7 + r * 5) % NSIZES];
            int64_t s3[3] = { M, N, K };
            ic_graph *g = mm_graph(c, s3[r % 3], s3[(r + 1) % 3], s3[(r + 2) % 3], IC_F32, false);
            check(c, g, 1);
            ic_graph_destroy(g);
        }
    ic_ctx_destroy(c);
}

Test(gemm, matmul_extremes)
{
    ic_ctx *c = ict_ctx();
    static const int64_t cases[][3] = { { 1, 1, 1 }, { 1, 1, 257 }, { 257, 1, 1 }, { 1, 257, 1 },
                                        { 257, 257, 257 }, { 2, 257, 97 }, { 97, 2, 31 },
                                        { 300, 200, 1100 } /* several passes over K */ };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ic_graph *g = mm_graph(c, cases[i][0], cases[i][1], cases[i][2], IC_F32, false);
        check(c, g, 1);
        ic_graph_destroy(g);
    }
    ic_ctx_destroy(c);
}

Test(gemm, matmul_1d_operands)
{
    ic_ctx *c = ict_ctx();
    struct { int ra, rb; int64_t a[2], b[2]; } cs[] = {
        { 1, 2, { 97 }, { 97, 31 } },      /* vector @ matrix */
        { 2, 1, { 17, 64 }, { 64 } },      /* matrix @ vector */
        { 1, 2, { 3 }, { 3, 257 } },
        { 2, 1, { 257, 7 }, { 7 } },
        { 1, 1, { 97 }, { 97 } },          /* dot product: no outer loop at all */
    };
    for (size_t i = 0; i < sizeof cs / sizeof *cs; i++) {
        ic_graph *g = ict_graph(c, "mm1d");
        ic_value a = input(g, "a", IC_F32, cs[i].ra, cs[i].a), b = input(g, "b", IC_F32, cs[i].rb, cs[i].b);
        output(g, op2(g, "c", IC_OP_MATMUL, a, b));
        check(c, g, 1);
        ic_graph_destroy(g);
    }
    ic_ctx_destroy(c);
}

Test(gemm, matmul_batched_broadcast)
{
    ic_ctx *c = ict_ctx();
    struct { int ra, rb; int64_t a[4], b[4]; } cs[] = {
        { 3, 2, { 3, 17, 31 }, { 31, 7 } },            /* batch @ matrix */
        { 2, 3, { 17, 31 }, { 3, 31, 7 } },            /* matrix @ batch */
        { 4, 3, { 3, 1, 7, 17 }, { 2, 17, 97 } },      /* [3,1] x [2] -> [3,2] */
        { 3, 3, { 2, 64, 3 }, { 2, 3, 64 } },
        { 4, 4, { 2, 3, 1, 33 }, { 2, 3, 33, 1 } },    /* batched dot products */
        { 3, 1, { 5, 31, 17 }, { 17 } },               /* batch @ vector */
    };
    for (size_t i = 0; i < sizeof cs / sizeof *cs; i++) {
        ic_graph *g = ict_graph(c, "mmb");
        ic_value a = input(g, "a", IC_F32, cs[i].ra, cs[i].a), b = input(g, "b", IC_F32, cs[i].rb, cs[i].b);
        output(g, op2(g, "c", IC_OP_MATMUL, a, b));
        check(c, g, 1);
        ic_graph_destroy(g);
    }
    ic_ctx_destroy(c);
}

Test(gemm, bmm)
{
    ic_ctx *c = ict_ctx();
    static const int64_t cs[][4] = { { 4, 17, 31, 7 }, { 1, 64, 64, 64 }, { 3, 1, 97, 2 }, { 7, 3, 2, 129 } };
    for (size_t i = 0; i < sizeof cs / sizeof *cs; i++) {
        ic_graph *g = ict_graph(c, "bmm");
        ic_value a = input(g, "a", IC_F32, 3, (int64_t[]){ cs[i][0], cs[i][1], cs[i][3] });
        ic_value b = input(g, "b", IC_F32, 3, (int64_t[]){ cs[i][0], cs[i][3], cs[i][2] });
        output(g, op2(g, "c", IC_OP_BMM, a, b));
        check(c, g, 1);
        ic_graph_destroy(g);
    }
    ic_ctx_destroy(c);
}

Test(gemm, transposed_operands)
{
    ic_ctx *c = ict_ctx();
    for (int t = 1; t < 4; t++) {
        ic_graph *g = ict_graph(c, "mmt");
        /* a^T is [M=31, K=17], b^T is [K=17, N=97] */
        ic_value a = input(g, "a", IC_F32, 2, (t & 1) ? (int64_t[]){ 17, 31 } : (int64_t[]){ 31, 17 });
        ic_value b = input(g, "b", IC_F32, 2, (t & 2) ? (int64_t[]){ 97, 17 } : (int64_t[]){ 17, 97 });
        if (t & 1)
            a = transpose(g, "at", a, 0, 1);
        if (t & 2)
            b = transpose(g, "bt", b, 0, 1);
        output(g, op2(g, "c", IC_OP_MATMUL, a, b));
        check(c, g, 1);
        ic_graph_destroy(g);
    }
    /* batched, transposed inner dims of a batch */
    ic_graph *g = ict_graph(c, "bmmt");
    ic_value a = input(g, "a", IC_F32, 3, (int64_t[]){ 3, 7, 64 });
    ic_value b = input(g, "b", IC_F32, 3, (int64_t[]){ 3, 33, 7 });
    output(g, op2(g, "c", IC_OP_MATMUL, transpose(g, "at", a, 1, 2), transpose(g, "bt", b, 1, 2)));
    check(c, g, 1);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* ---- linear and epilogues ---- */

static ic_graph *linear_graph(ic_ctx *c, int64_t rows, int64_t in, int64_t outf, bool bias, ic_op act,
                              bool residual, ic_dtype dt, bool frozen)
{
    ic_graph *g = ict_graph(c, "linear");
    ic_value x = input(g, "x", dt, 3, (int64_t[]){ 2, rows, in });
    ic_value w = frozen ? param_data(g, "w", dt, 2, (int64_t[]){ outf, in }, 11u)
                        : input(g, "w", dt, 2, (int64_t[]){ outf, in });
    ic_operand ops[3] = { ic_val(x), ic_val(w), ic_none() };
    int n = 2;
    if (bias) {
        ic_value b = frozen ? param_data(g, "b", dt, 1, (int64_t[]){ outf }, 13u)
                            : input(g, "b", dt, 1, (int64_t[]){ outf });
        ops[2] = ic_val(b);
        n = 3;
    }
    ic_value y = node(g, "fc", IC_OP_LINEAR, n, ops, NULL);
    if (act != IC_OP_INPUT)
        y = op1(g, "act", act, y);
    if (residual)
        y = op2(g, "res", IC_OP_ADD, y, input(g, "r", dt, 3, (int64_t[]){ 2, rows, outf }));
    output(g, y);
    return g;
}

Test(gemm, linear_with_and_without_bias)
{
    ic_ctx *c = ict_ctx();
    static const int64_t cs[][3] = { { 1, 1, 1 }, { 7, 17, 31 }, { 64, 97, 3 }, { 31, 128, 257 }, { 2, 257, 64 } };
    for (size_t i = 0; i < sizeof cs / sizeof *cs; i++)
        for (int bias = 0; bias < 2; bias++) {
            ic_graph *g = linear_graph(c, cs[i][0], cs[i][1], cs[i][2], bias, IC_OP_INPUT, false, IC_F32, false);
            check(c, g, 1);
            ic_graph_destroy(g);
        }
    ic_ctx_destroy(c);
}

Test(gemm, epilogues_relu_gelu_residual)
{
    ic_ctx *c = ict_ctx();
    ic_op acts[] = { IC_OP_RELU, IC_OP_GELU, IC_OP_SIGMOID, IC_OP_INPUT };
    for (size_t i = 0; i < sizeof acts / sizeof *acts; i++)
        for (int res = 0; res < 2; res++) {
            ic_graph *g = linear_graph(c, 33, 65, 47, true, acts[i], res, IC_F32, false);
            /* one kernel: the epilogue is fused into the GEMM's store */
            check(c, g, 1);
            ic_compiled *cc;
            cr_assert_eq(ic_compile(c, g, NULL, &cc), IC_OK);
            cr_assert_eq(ic_compiled_num_kernels(cc), 1, "%d kernels for linear+epilogue",
                         ic_compiled_num_kernels(cc));
            ic_compiled_destroy(cc);
            ic_graph_destroy(g);
        }
    ic_ctx_destroy(c);
}

Test(gemm, epilogue_scaling_and_casts)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "scaled");
    ic_value a = input(g, "a", IC_F32, 3, (int64_t[]){ 2, 31, 17 });
    ic_value b = input(g, "b", IC_F32, 3, (int64_t[]){ 2, 17, 33 });
    ic_operand in[2] = { ic_val(op2(g, "s", IC_OP_MATMUL, a, b)), ic_scalar_f(0.125) };
    ic_value y = node(g, "scaled", IC_OP_MUL, 2, in, NULL);
    output(g, cast(g, "h", y, IC_F16));
    output(g, cast(g, "bf", y, IC_BF16));
    check(c, g, 1);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* ---- dtypes ---- */

Test(gemm, f16_and_bf16_inputs)
{
    ic_ctx *c = ict_ctx();
    ic_dtype dts[] = { IC_F16, IC_BF16 };
    static const int64_t cs[][3] = { { 1, 1, 1 }, { 17, 31, 7 }, { 64, 97, 128 }, { 3, 257, 64 } };
    for (int d = 0; d < 2; d++) {
        for (size_t i = 0; i < sizeof cs / sizeof *cs; i++) {
            ic_graph *g = mm_graph(c, cs[i][0], cs[i][1], cs[i][2], dts[d], false);
            check(c, g, 1);
            ic_graph_destroy(g);
        }
        ic_graph *g = linear_graph(c, 17, 64, 31, true, IC_OP_RELU, true, dts[d], false);
        check(c, g, 1);
        ic_graph_destroy(g);
        /* transposed half-precision operand */
        g = ict_graph(c, "mmt16");
        ic_value a = input(g, "a", dts[d], 2, (int64_t[]){ 33, 17 });
        ic_value b = input(g, "b", dts[d], 2, (int64_t[]){ 33, 65 });
        output(g, op2(g, "c", IC_OP_MATMUL, transpose(g, "at", a, 0, 1), b));
        check(c, g, 1);
        ic_graph_destroy(g);
    }
    ic_ctx_destroy(c);
}

/* ---- threads, concurrency, freezing ---- */

static bool bitwise_equal(const ic_tensor *a, const ic_tensor *b)
{
    size_t n = (size_t)ic_tensor_numel(a) * ic_dtype_size(a->dtype);
    return a->dtype == b->dtype && ic_tensor_numel(a) == ic_tensor_numel(b) && memcmp(a->data, b->data, n) == 0;
}

Test(gemm, threads_do_not_change_results)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = mm_graph(c, 257, 97, 300, IC_F32, false);
    ic_tensor *args = make_args(c, g, 99u);
    ic_compile_options o;
    ic_compile_options_init(&o);
    o.threads = 1;
    ic_tensor *one = run(c, g, &o, args);
    o.threads = 2;
    ic_tensor *two = run(c, g, &o, args);
    o.threads = 3; /* more threads than cores: odd shares */
    ic_tensor *three = run(c, g, &o, args);
    cr_assert(bitwise_equal(&one[0], &two[0]), "1 and 2 threads differ");
    cr_assert(bitwise_equal(&one[0], &three[0]), "1 and 3 threads differ");
    free_tensors(c, one, 1);
    free_tensors(c, two, 1);
    free_tensors(c, three, 1);
    free_tensors(c, args, 2);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

typedef struct { ic_compiled *cc; ic_tensor *args; ic_tensor out; ic_status s; } conc_t;

static void *conc_run(void *p)
{
    conc_t *t = p;
    for (int i = 0; i < 4 && !t->s; i++)
        t->s = ic_run(t->cc, 2, t->args, 1, &t->out);
    return NULL;
}

Test(gemm, concurrent_runs_share_nothing)
{
    ic_ctx *c = ict_ctx();
    /* big enough that the packing scratch is the kernel's own block (not the stack) */
    ic_graph *g = mm_graph(c, 300, 200, 256, IC_F32, false);
    ic_tensor *args = make_args(c, g, 5u);
    ic_tensor want;
    cr_assert_eq(ic_ref_run(c, g, NULL, 2, args, 1, &want), IC_OK);
    ic_compiled *cc;
    cr_assert_eq(ic_compile(c, g, NULL, &cc), IC_OK);
    conc_t t[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        t[i] = (conc_t){ cc, args, { 0 }, IC_OK };
        ic_tensor_init(&t[i].out, IC_F32, 2, want.shape, NULL);
        cr_assert_eq(ic_tensor_alloc(c, &t[i].out), IC_OK);
        pthread_create(&th[i], NULL, conc_run, &t[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        cr_assert_eq(t[i].s, IC_OK);
        char m[1024];
        cr_assert(ict_allclose(&t[i].out, &want, m, sizeof m), "thread %d: %s", i, m);
        ic_tensor_free(c, &t[i].out);
    }
    ic_compiled_destroy(cc);
    ic_tensor_free(c, &want);
    free_tensors(c, args, 2);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

Test(gemm, freezing_prepacks_weights_with_identical_results)
{
    ic_ctx *c = ict_ctx();
    ic_dtype dts[] = { IC_F32, IC_BF16, IC_F16 };
    for (int d = 0; d < 3; d++) {
        ic_graph *g = linear_graph(c, 37, 65, 129, true, IC_OP_RELU, false, dts[d], true);
        ic_compile_options o;
        ic_compile_options_init(&o);
        char *ir0 = ict_compile_dump(c, g, &o, "llvm");
        o.freezing = 1;
        char *ir1 = ict_compile_dump(c, g, &o, "llvm");
        /* frozen: constant panels, no run-time packing of the weight */
        cr_assert(strstr(ir1, ".gemm.panels") != NULL, "no prepacked panels with freezing");
        cr_assert(strstr(ir1, ".gemm.packB") == NULL, "weight still packed at run time");
        cr_assert(strstr(ir0, ".gemm.panels") == NULL && strstr(ir0, ".gemm.packB") != NULL,
                  "params packed at compile time without freezing");
        free(ir0);
        free(ir1);
        check_opts(c, g, &o, 1);
        ic_tensor *args = make_args(c, g, 77u);
        ic_tensor *frozen = run(c, g, &o, args);
        o.freezing = 0;
        ic_tensor *plain = run(c, g, &o, args);
        cr_assert(bitwise_equal(&frozen[0], &plain[0]), "%s: freezing changed the results",
                  ic_dtype_name(dts[d]));
        free_tensors(c, frozen, 1);
        free_tensors(c, plain, 1);
        free_tensors(c, args, ic_graph_num_args(g));
        ic_graph_destroy(g);
    }
    ic_ctx_destroy(c);
}

Test(gemm, frozen_matmul_batched_weight)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "frozen_bmm");
    ic_value a = input(g, "a", IC_F32, 3, (int64_t[]){ 3, 17, 31 });
    ic_value b = param_data(g, "b", IC_F32, 3, (int64_t[]){ 3, 31, 40 }, 3u);
    output(g, op2(g, "c", IC_OP_MATMUL, a, b));
    ic_compile_options o;
    ic_compile_options_init(&o);
    o.freezing = 1;
    check_opts(c, g, &o, 1);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* ---- the recogniser on hand-built loop IR ---- */

/* C[m, n] = sum_k A[m * K + k] * B[k * N + n] over buffers 0, 1 -> 2. with_div 1 (2): A's (B's)
 * k index goes through a floor division by 1, an index that is not affine. */
static kb_t *kb_matmul(int64_t M, int64_t N, int64_t K, int with_div)
{
    /* K = 1: no inner loop at all (as Lower makes it), the k index is the constant 0 */
    kb_t *kb = kb_new("mm", 2, (int64_t[]){ M, N }, K == 1 ? 0 : 1, (int64_t[]){ K });
    kb->buftype[0] = kb->buftype[1] = kb->buftype[2] = IC_F32;
    kb_stage(kb, IC_STAGE_REDUCE);
    int m = kb_var(kb, 0), n = kb_var(kb, 1), k = K == 1 ? kb_consti(kb, IC_I64, 0) : kb_var(kb, 2);
    int kd = with_div ? kb_bin(kb, IC_L_IDIV, IC_I64, k, kb_consti(kb, IC_I64, 1)) : k;
    int ka = with_div == 1 ? kd : k, kbi = with_div == 2 ? kd : k;
    int oa = kb_bin(kb, IC_L_ADD, IC_I64, kb_bin(kb, IC_L_MUL, IC_I64, m, kb_consti(kb, IC_I64, K)), ka);
    int ob = kb_bin(kb, IC_L_ADD, IC_I64, kb_bin(kb, IC_L_MUL, IC_I64, kbi, kb_consti(kb, IC_I64, N)), n);
    int x = kb_load(kb, 0, IC_F32, oa), y = kb_load(kb, 1, IC_F32, ob);
    int r = kb_reduce(kb, IC_RED_SUM, IC_F32, kb_bin(kb, IC_L_MUL, IC_F32, x, y), -1);
    kb_stage(kb, IC_STAGE_BODY);
    int acc = kb_acc(kb, IC_F32, 0, r);
    int m2 = kb_var(kb, 0), n2 = kb_var(kb, 1);
    int oc = kb_bin(kb, IC_L_ADD, IC_I64, kb_bin(kb, IC_L_MUL, IC_I64, m2, kb_consti(kb, IC_I64, N)), n2);
    kb_store(kb, 2, oc, acc);
    return kb;
}

Test(gemm, recogniser)
{
    ic_buffer bufs[3];
    memset(bufs, 0, sizeof bufs);
    for (int i = 0; i < 3; i++)
        bufs[i].dtype = IC_F32, bufs[i].kind = i < 2 ? IC_BUF_ARG : IC_BUF_OUTPUT;
    kb_t *kb = kb_matmul(5, 6, 7, 0);
    cr_assert(ic_kernel_is_gemm(&kb->k, bufs), "a plain matmul kernel is not recognised");
    free(kb);
    /* a rows operand with a non-affine index (floor division) is packed through its index
     * expression (gemm_emit.c); the columns operand needs strides: the loop nest keeps it */
    kb = kb_matmul(5, 6, 7, 1);
    cr_assert(ic_kernel_is_gemm(&kb->k, bufs), "non-affine rows operand not recognised");
    free(kb);
    kb = kb_matmul(5, 6, 7, 2);
    cr_assert(!ic_kernel_is_gemm(&kb->k, bufs), "non-affine columns operand recognised");
    free(kb);
    /* a product reduced with max is no GEMM */
    kb = kb_matmul(5, 6, 7, 0);
    kb->ins[0][kb->st[0].ninstr - 1].red = IC_RED_MAX;
    cr_assert(!ic_kernel_is_gemm(&kb->k, bufs), "max-reduction recognised");
    free(kb);
    /* an empty sum (K = 0) is left to the loop nests */
    kb = kb_matmul(5, 6, 0, 0);
    cr_assert(!ic_kernel_is_gemm(&kb->k, bufs), "K = 0 recognised");
    free(kb);
    /* f64 products stay generic */
    bufs[0].dtype = bufs[1].dtype = IC_F64;
    kb = kb_matmul(5, 6, 7, 0);
    cr_assert(!ic_kernel_is_gemm(&kb->k, bufs), "f64 recognised");
    free(kb);
}

Test(gemm, params_default_fills_every_field)
{
    ic_ctx *c = ict_ctx();
    ic_codegen_target *t;
    cr_assert_eq(ic_codegen_target_create(c, &t), IC_OK);
    ic_gemm_params p;
    memset(&p, 0, sizeof p);
    ic_gemm_params_default(t, NULL, NULL, &p);
    int vl = ic_codegen_target_vector_bits(t) / 32;
    cr_assert(p.mr > 0 && p.nr > 0 && p.nr % vl == 0, "tile %dx%d (lanes %d)", p.mr, p.nr, vl);
    cr_assert(p.mc > 0 && p.mc % p.mr == 0 && p.kc > 0 && p.nc > 0 && p.nc % p.nr == 0,
              "blocks mc %lld kc %lld nc %lld", (long long)p.mc, (long long)p.kc, (long long)p.nc);
    cr_assert(p.unroll > 0 && p.serial_flops > 0 && p.bf16_dot != 0);
    /* the accumulators, a row of B and a broadcast fit the register file */
    int regs = vl == 16 ? 32 : 16;
    cr_assert_leq(p.mr * (p.nr / vl) + p.nr / vl + 1, regs);
    /* given fields are kept */
    ic_gemm_params q;
    memset(&q, 0, sizeof q);
    q.mr = 4, q.kc = 64;
    ic_gemm_params_default(t, NULL, NULL, &q);
    cr_assert(q.mr == 4 && q.kc == 64);
    ic_codegen_target_destroy(t);
    ic_ctx_destroy(c);
}

/* Runs the single kernel of program p (ARG and OUTPUT buffers only) generated with params cp. */
static void run_kernel(ic_ctx *c, const ic_program *p, const ic_codegen_params *cp, const ic_tensor *args,
                       ic_tensor *out)
{
    int nb = ic_program_num_buffers(p);
    ic_buffer *bufs = calloc((size_t)nb, sizeof *bufs);
    void **tab = calloc((size_t)nb, sizeof *tab);
    for (int i = 0; i < nb; i++) {
        bufs[i] = *ic_program_buffer(p, i);
        cr_assert(bufs[i].kind == IC_BUF_ARG || bufs[i].kind == IC_BUF_OUTPUT);
        tab[i] = bufs[i].kind == IC_BUF_ARG ? args[bufs[i].index].data : out->data;
    }
    ic__jit *jit;
    ic__kernel_fn fn;
    cr_assert_eq(ic__jit_kernels(c, 1, ic_program_kernel(p, 0), nb, bufs, cp, &jit, &fn), IC_OK, "%s",
                 ic_last_error(c));
    fn(tab);
    ic__jit_destroy(jit);
    free(tab);
    free(bufs);
}

/* Odd tile and block parameters (as an autotuner would try) still give correct results. */
Test(gemm, explicit_params)
{
    ic_ctx *c = ict_ctx();
    ic_codegen_target *t;
    cr_assert_eq(ic_codegen_target_create(c, &t), IC_OK);
    int vl = ic_codegen_target_vector_bits(t) / 32;
    ic_gemm_params ps[] = {
        { .mr = 1, .nr = vl, .mc = 5, .kc = 3, .nc = vl, .unroll = 1, .pack_a = 1 },
        { .mr = 3, .nr = 2 * vl, .mc = 7, .kc = 16, .nc = 3 * vl, .unroll = 3, .pack_a = -1 },
        { .mr = 5, .nr = vl, .mc = 64, .kc = 100, .nc = 1000, .threads = 2, .serial_flops = 1, .pack_a = -1 },
        { .mr = 16, .nr = 2 * vl, .mc = 16, .kc = 1000, .nc = 2 * vl, .threads = 3, .serial_flops = 1 },
    };
    ic_graph *g = linear_graph(c, 45, 129, 67, true, IC_OP_GELU, true, IC_F32, false);
    ic_program *p0, *p;
    cr_assert_eq(ic_lower(c, g, &p0), IC_OK);
    cr_assert_eq(ic_fuse(c, p0, NULL, &p), IC_OK);
    cr_assert_eq(ic_program_num_kernels(p), 1);
    int nargs = ic_graph_num_args(g);
    ic_tensor *args = make_args(c, g, 31u);
    ic_tensor want;
    cr_assert_eq(ic_ref_run(c, g, NULL, nargs, args, 1, &want), IC_OK);
    for (size_t i = 0; i < sizeof ps / sizeof *ps; i++) {
        ic_codegen_params cp;
        ic_codegen_params_default(t, ic_program_kernel(p, 0), ic_program_buffer(p, 0), &cp);
        cp.gemm = ps[i];
        ic_llvm_module *m;
        cr_assert_eq(ic_llvmgen(c, p, t, &cp, &m), IC_OK, "%s", ic_last_error(c));
        char *ir = ic_llvm_module_ir_string(m);
        cr_assert(strstr(ir, ".gemm.micro.") != NULL, "params %zu: no GEMM path", i);
        free(ir);
        ic_llvm_module_destroy(m);
        ic_tensor got;
        ic_tensor_init(&got, IC_F32, want.rank, want.shape, NULL);
        cr_assert_eq(ic_tensor_alloc(c, &got), IC_OK);
        run_kernel(c, p, &cp, args, &got);
        char msg[1024];
        cr_assert(ict_allclose(&got, &want, msg, sizeof msg), "params %zu: %s", i, msg);
        ic_tensor_free(c, &got);
    }
    ic_tensor_free(c, &want);
    free_tensors(c, args, nargs);
    ic_program_destroy(p);
    ic_program_destroy(p0);
    ic_graph_destroy(g);
    ic_codegen_target_destroy(t);
    ic_ctx_destroy(c);
}

/* Hand-built loop IR: K = 1 without an inner loop, and the generic path when disabled. */
Test(gemm, hand_built_kernels_run)
{
    ic_ctx *c = ict_ctx();
    static const int64_t cs[][3] = { { 5, 6, 7 }, { 33, 17, 1 }, { 1, 40, 9 } };
    for (size_t i = 0; i < sizeof cs / sizeof *cs; i++) {
        int64_t M = cs[i][0], N = cs[i][1], K = cs[i][2];
        kb_t *kb = kb_matmul(M, N, K, (int)(i % 2)); /* i odd: A read through an expression */
        ic_buffer bufs[3] = { kb_buf(IC_BUF_ARG, IC_F32, M * K, 0), kb_buf(IC_BUF_ARG, IC_F32, K * N, 1),
                              kb_buf(IC_BUF_OUTPUT, IC_F32, M * N, 0) };
        float *A = malloc(sizeof(float) * (size_t)(M * K)), *B = malloc(sizeof(float) * (size_t)(K * N));
        float *C = malloc(sizeof(float) * (size_t)(M * N)), *W = malloc(sizeof(float) * (size_t)(M * N));
        unsigned seed = 3;
        for (int64_t j = 0; j < M * K; j++)
            A[j] = (float)rnd(&seed);
        for (int64_t j = 0; j < K * N; j++)
            B[j] = (float)rnd(&seed);
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                double s = 0;
                for (int64_t k = 0; k < K; k++)
                    s += (double)A[m * K + k] * B[k * N + n];
                W[m * N + n] = (float)s;
            }
        for (int disable = 0; disable < 2; disable++) {
            ic_codegen_params cp;
            memset(&cp, 0, sizeof cp);
            ic_codegen_params_default(NULL, &kb->k, bufs, &cp);
            cp.gemm.disable = disable;
            memset(C, 0, sizeof(float) * (size_t)(M * N));
            ic__jit *jit;
            ic__kernel_fn fn;
            cr_assert_eq(ic__jit_kernels(c, 1, &kb->k, 3, bufs, &cp, &jit, &fn), IC_OK, "%s", ic_last_error(c));
            void *tab[3] = { A, B, C };
            fn(tab);
            ic__jit_destroy(jit);
            for (int64_t j = 0; j < M * N; j++)
                cr_assert(fabsf(C[j] - W[j]) <= 1e-5f + 1e-4f * fabsf(W[j]), "%lldx%lldx%lld [%lld]: %g vs %g",
                          (long long)M, (long long)N, (long long)K, (long long)j, C[j], W[j]);
        }
        free(A), free(B), free(C), free(W);
        free(kb);
    }
    ic_ctx_destroy(c);
}

/* bf16 x bf16: vdpbf16ps on pairs along k when the host has AVX512-BF16 (odd K, several passes
 * over K, edges), the f32 conversion otherwise; both match the reference. */
Test(gemm, bf16_dot_products_and_conversion)
{
    ic_ctx *c = ict_ctx();
    ic_codegen_target *t;
    cr_assert_eq(ic_codegen_target_create(c, &t), IC_OK);
    bool host = strstr(ic_codegen_target_features(t), "+avx512bf16") != NULL;
    ic_graph *g = linear_graph(c, 19, 45, 37, true, IC_OP_RELU, false, IC_BF16, false);
    ic_program *p0, *p;
    cr_assert_eq(ic_lower(c, g, &p0), IC_OK);
    cr_assert_eq(ic_fuse(c, p0, NULL, &p), IC_OK);
    int nargs = ic_graph_num_args(g);
    ic_tensor *args = make_args(c, g, 8u);
    ic_tensor want;
    cr_assert_eq(ic_ref_run(c, g, NULL, nargs, args, 1, &want), IC_OK);
    ic_gemm_params ps[] = {
        { .bf16_dot = 1 }, { .bf16_dot = -1 },
        { .bf16_dot = 1, .kc = 7, .mr = 3, .mc = 5, .nc = 16, .threads = 2, .serial_flops = 1 },
    };
    for (size_t i = 0; i < sizeof ps / sizeof *ps; i++) {
        ic_codegen_params cp;
        ic_codegen_params_default(t, ic_program_kernel(p, 0), ic_program_buffer(p, 0), &cp);
        cp.gemm = ps[i];
        ic_llvm_module *m;
        cr_assert_eq(ic_llvmgen(c, p, t, &cp, &m), IC_OK, "%s", ic_last_error(c));
        char *ir = ic_llvm_module_ir_string(m);
        bool dot = strstr(ir, "@llvm.x86.avx512bf16.dpbf16ps") != NULL;
        cr_assert_eq(dot, host && ps[i].bf16_dot == 1, "params %zu: dot products %d, host avx512bf16 %d", i, dot, host);
        free(ir);
        ic_llvm_module_destroy(m);
        ic_tensor got;
        ic_tensor_init(&got, IC_BF16, want.rank, want.shape, NULL);
        cr_assert_eq(ic_tensor_alloc(c, &got), IC_OK);
        run_kernel(c, p, &cp, args, &got);
        char msg[1024];
        cr_assert(ict_allclose(&got, &want, msg, sizeof msg), "params %zu: %s", i, msg);
        ic_tensor_free(c, &got);
    }
    ic_tensor_free(c, &want);
    free_tensors(c, args, nargs);
    ic_program_destroy(p);
    ic_program_destroy(p0);
    ic_graph_destroy(g);
    ic_codegen_target_destroy(t);
    ic_ctx_destroy(c);
}

/* Freezing folds constant subgraphs: a cast of a bf16 weight is computed once at compile time
 * and packed, so the compiled graph is the GEMM alone. */
Test(gemm, freezing_folds_a_cast_of_a_weight)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "cast_weight");
    ic_value x = input(g, "x", IC_F32, 2, (int64_t[]){ 37, 65 });
    ic_value w = param_data(g, "w", IC_BF16, 2, (int64_t[]){ 129, 65 }, 21u);
    ic_value b = param_data(g, "b", IC_F16, 1, (int64_t[]){ 129 }, 22u);
    ic_value w32 = cast(g, "w32", w, IC_F32), b32 = cast(g, "b32", b, IC_F32);
    ic_operand in[3] = { ic_val(x), ic_val(w32), ic_val(b32) };
    output(g, op1(g, "y", IC_OP_RELU, node(g, "fc", IC_OP_LINEAR, 3, in, NULL)));
    ic_compile_options o;
    ic_compile_options_init(&o);
    ic_compiled *cc;
    cr_assert_eq(ic_compile(c, g, &o, &cc), IC_OK);
    int plain = ic_compiled_num_kernels(cc);
    ic_compiled_destroy(cc);
    o.freezing = 1;
    cr_assert_eq(ic_compile(c, g, &o, &cc), IC_OK, "%s", ic_last_error(c));
    int frozen = ic_compiled_num_kernels(cc);
    ic_compiled_destroy(cc);
    /* without freezing the cast runs as the GEMM packs w (a producer fused into its loads) */
    cr_assert(plain >= 1 && frozen == 1, "kernels: %d without freezing, %d with", plain, frozen);
    check_opts(c, g, &o, 1);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* Scalar code (vector_width 1) keeps the generic loop nest, with the same results. */
Test(gemm, scalar_code_keeps_the_loop_nest)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = mm_graph(c, 17, 31, 7, IC_F32, false);
    ic_compile_options o;
    ic_compile_options_init(&o);
    o.vector_width = 1;
    char *ir = ict_compile_dump(c, g, &o, "llvm");
    cr_assert(strstr(ir, ".gemm.") == NULL, "GEMM path taken for scalar code");
    free(ir);
    ic_tensor *args = make_args(c, g, 5u);
    ic_tensor want;
    cr_assert_eq(ic_ref_run(c, g, NULL, 2, args, 1, &want), IC_OK);
    ic_tensor *got = run(c, g, &o, args);
    char m[1024];
    cr_assert(ict_allclose(&got[0], &want, m, sizeof m), "%s", m);
    free_tensors(c, got, 1);
    ic_tensor_free(c, &want);
    free_tensors(c, args, 2);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* ---- operands read through views whose index is not affine ---- */

static ic_value permute(ic_graph *g, const char *name, ic_value a, int n, const int64_t *dims)
{
    ic_attrs at;
    ic_attrs_init(&at, IC_OP_PERMUTE);
    at.has_dims = true, at.ndims = n;
    memcpy(at.dims, dims, sizeof(int64_t) * (size_t)n);
    ic_operand in[1] = { ic_val(a) };
    return node(g, name, IC_OP_PERMUTE, 1, in, &at);
}

static ic_value reshape(ic_graph *g, const char *name, ic_value a, int n, const int64_t *shape)
{
    ic_attrs at;
    ic_attrs_init(&at, IC_OP_RESHAPE);
    at.nshape = n;
    for (int i = 0; i < n; i++)
        at.shape[i] = ic_dim_const(shape[i]);
    ic_operand in[1] = { ic_val(a) };
    return node(g, name, IC_OP_RESHAPE, 1, in, &at);
}

/* Attention's output projection: heads [B, H, S, D] -> permute(0, 2, 1, 3) -> reshape [B, S, H*D]
 * -> linear: the rows operand's k index is (k mod D) + (k div D) * S * D, packed through that
 * expression; also rows that mix the batch with a permuted dim (div/mod on the row index). */
Test(gemm, view_operands_pack_through_their_index)
{
    ic_ctx *c = ict_ctx();
    /* B H S D out; the last: K = 1105 takes several passes over K */
    static const int64_t cs[][5] = { { 2, 3, 17, 5, 7 }, { 1, 12, 9, 64, 33 }, { 3, 2, 64, 16, 48 },
                                     { 1, 17, 5, 65, 9 } };
    for (size_t i = 0; i < sizeof cs / sizeof *cs; i++)
        for (int d = 0; d < 3; d++) { /* f32, f16, bf16 (converted when packed: no dot products) */
            int64_t B = cs[i][0], H = cs[i][1], S = cs[i][2], D = cs[i][3], O = cs[i][4];
            ic_dtype dt = d == 0 ? IC_F32 : d == 1 ? IC_F16 : IC_BF16;
            ic_graph *g = ict_graph(c, "heads_linear");
            ic_value x = input(g, "x", dt, 4, (int64_t[]){ B, H, S, D });
            ic_value w = input(g, "w", dt, 2, (int64_t[]){ O, H * D });
            ic_value b = input(g, "b", dt, 1, (int64_t[]){ O });
            ic_value v = reshape(g, "ctx2", permute(g, "ctxp", x, 4, (int64_t[]){ 0, 2, 1, 3 }), 3,
                                 (int64_t[]){ B, S, H * D });
            ic_operand ops[3] = { ic_val(v), ic_val(w), ic_val(b) };
            output(g, node(g, "attn", IC_OP_LINEAR, 3, ops, NULL));
            check(c, g, 1);
            ic_graph_destroy(g);
        }
    /* rows [3, 4] from a permuted [2, 6] (the row index divides and wraps), K = 5 */
    ic_graph *g = ict_graph(c, "rows_view");
    ic_value a = input(g, "a", IC_F32, 3, (int64_t[]){ 2, 5, 6 });
    ic_value bm = input(g, "b", IC_F32, 2, (int64_t[]){ 5, 7 });
    ic_value v = reshape(g, "av", permute(g, "ap", a, 3, (int64_t[]){ 0, 2, 1 }), 3, (int64_t[]){ 3, 4, 5 });
    output(g, op2(g, "c", IC_OP_MATMUL, v, bm));
    check(c, g, 1);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}
