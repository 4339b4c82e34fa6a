/* test_llvmgen.c - LLVM IR generation: module validity, loop arrangement per kernel, vector
 * code at the host's width after O3 (IR and assembly), reassociated reductions, OpenMP
 * outlining above the serial threshold, dumps. Set IC_TEST_DUMP=dir to keep the IR. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <criterion/criterion.h>
#include "ic/ic.h"
#include "ic/llvmgen.h"
#include "kbuild.h"
#include "testutil.h"

typedef struct {
    ic_ctx *c;
    ic_codegen_target *t;
    ic_llvm_module *m;
    char *pre, *ir, *as;
} gen_t;

static void dump(const char *name, const char *ext, const char *text)
{
    const char *dir = getenv("IC_TEST_DUMP");
    if (!dir || !text)
        return;
    char path[512];
    snprintf(path, sizeof path, "%s/%s.%s", dir, name, ext);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* Generates kernel kb (params p or defaults), optimises, keeps IR before/after and asm. */
static void gen(gen_t *G, kb_t *kb, int nb, const ic_buffer *bufs, const ic_codegen_params *p)
{
    memset(G, 0, sizeof *G);
    G->c = ict_ctx();
    cr_assert_eq(ic_codegen_target_create(G->c, &G->t), IC_OK, "%s", ic_last_error(G->c));
    ic_status s = ic_llvmgen_kernels(G->c, 1, &kb->k, nb, bufs, G->t, p, &G->m);
    cr_assert_eq(s, IC_OK, "llvmgen: %s", ic_last_error(G->c));
    G->pre = ic_llvm_module_ir_string(G->m);
    cr_assert_eq(ic_llvm_module_optimize(G->m), IC_OK, "%s", ic_last_error(G->c));
    cr_assert_eq(ic_llvm_module_verify(G->m), IC_OK, "%s", ic_last_error(G->c));
    G->ir = ic_llvm_module_ir_string(G->m);
    G->as = ic_llvm_module_asm_string(G->m);
    cr_assert(G->pre && G->ir && G->as);
    dump(kb->k.name, "pre.ll", G->pre);
    dump(kb->k.name, "ll", G->ir);
    dump(kb->k.name, "s", G->as);
}

static void gen_free(gen_t *G)
{
    free(G->pre), free(G->ir), free(G->as);
    ic_llvm_module_destroy(G->m);
    ic_codegen_target_destroy(G->t);
    ic_ctx_destroy(G->c);
}

/* The vector type and register names the host's width implies for f32. */
static void host_vec(const gen_t *G, char *ty, size_t n, const char **reg)
{
    int bits = ic_codegen_target_vector_bits(G->t);
    snprintf(ty, n, "<%d x float>", bits / 32);
    *reg = bits == 512 ? "zmm" : bits == 256 ? "ymm" : "xmm";
}

static void assert_vector_code(const gen_t *G, const char *what)
{
    char ty[32];
    const char *reg;
    host_vec(G, ty, sizeof ty, &reg);
    cr_assert(strstr(G->ir, ty) != NULL, "%s: no %s in the optimised IR (host %s)", what, ty,
              ic_codegen_target_cpu(G->t));
    cr_assert(strstr(G->as, reg) != NULL, "%s: no %s registers in the assembly", what, reg);
}

static kb_t *pointwise_kernel(int64_t rows, int64_t cols, ic_lop op)
{
    kb_t *kb = kb_new(op == IC_L_EXP ? "pw_exp" : "pw_add", 2, (int64_t[]){ rows, cols }, 0, NULL);
    kb_stage(kb, IC_STAGE_BODY);
    int i = kb_var(kb, 0), j = kb_var(kb, 1);
    int off = kb_off2(kb, i, cols, j);
    int a = kb_load(kb, 0, IC_F32, off), b = kb_load(kb, 1, IC_F32, j);
    int v = op == IC_L_EXP ? kb_un(kb, IC_L_EXP, IC_F32, a) : kb_bin(kb, IC_L_ADD, IC_F32, a, b);
    kb_store(kb, 2, off, v);
    return kb;
}

Test(llvmgen, target_detected_at_run_time)
{
    gen_t G;
    memset(&G, 0, sizeof G);
    G.c = ict_ctx();
    cr_assert_eq(ic_codegen_target_create(G.c, &G.t), IC_OK);
    cr_assert(strlen(ic_codegen_target_cpu(G.t)) > 0);
    cr_assert(strstr(ic_codegen_target_triple(G.t), "x86_64") || strstr(ic_codegen_target_triple(G.t), "aarch64"));
    int bits = ic_codegen_target_vector_bits(G.t);
    cr_assert(bits == 128 || bits == 256 || bits == 512, "vector bits %d", bits);
    bool avx512 = strstr(ic_codegen_target_features(G.t), "+avx512f") != NULL;
    cr_assert_eq(bits == 512, avx512, "512-bit vectors iff +avx512f (%d)", bits);
    ic_codegen_target_destroy(G.t);
    ic_ctx_destroy(G.c);
}

Test(llvmgen, pointwise_vectorises_at_host_width)
{
    kb_t *kb = pointwise_kernel(1024, 1000, IC_L_ADD);
    ic_buffer bufs[3] = { kb_buf(IC_BUF_ARG, IC_F32, 1024000, 0), kb_buf(IC_BUF_ARG, IC_F32, 1000, 1),
                          kb_buf(IC_BUF_OUTPUT, IC_F32, 1024000, 0) };
    cr_assert_eq(ic_kernel_mode_of(&kb->k), IC_KMODE_POINTWISE);
    gen_t G;
    gen(&G, kb, 3, bufs, NULL);
    assert_vector_code(&G, "pointwise add");
    /* exported kernel with the documented ABI, and the OpenMP fork above the threshold */
    cr_assert(strstr(G.ir, "define void @pw_add(ptr") != NULL, "kernel ABI missing:\n%.2000s", G.ir);
    cr_assert(strstr(G.ir, "@__kmpc_fork_call") != NULL, "no fork for a 1M-element kernel");
    cr_assert(strstr(G.pre, "llvm.loop.vectorize.width") != NULL);
    gen_free(&G);
    free(kb);
}

/* Params out of codegen's bounds (a damaged tuning record, a caller's typo) are refused with
 * the kernel, the field and the bounds; none reaches code generation. */
Test(llvmgen, out_of_range_params_are_refused)
{
    kb_t *kb = pointwise_kernel(64, 100, IC_L_ADD);
    ic_buffer bufs[3] = { kb_buf(IC_BUF_ARG, IC_F32, 6400, 0), kb_buf(IC_BUF_ARG, IC_F32, 100, 1),
                          kb_buf(IC_BUF_OUTPUT, IC_F32, 6400, 0) };
    ic_ctx *c = ict_ctx();
    ic_codegen_target *t;
    cr_assert_eq(ic_codegen_target_create(c, &t), IC_OK, "%s", ic_last_error(c));
    ic_codegen_params base;
    ic_codegen_params_default(t, &kb->k, bufs, &base);
    static const char *const fields[] = { "vector_width", "unroll", "strip", "gemm.mr", "parallel_depth" };
    for (int i = 0; i < 5; i++) {
        ic_codegen_params p = base;
        switch (i) {
        case 0: p.vector_width = -5; break;
        case 1: p.unroll = 1 << 20; break;
        case 2: p.strip = (int64_t)1 << 40; break;
        case 3: p.gemm.mr = -1; break;
        default: p.parallel_depth = 99; break;
        }
        const char *field = fields[i];
        ic_llvm_module *m = NULL;
        ict_assert_error(c, ic_llvmgen_kernels(c, 1, &kb->k, 3, bufs, t, &p, &m), IC_EINVAL, "pw_add", field);
        cr_assert_null(m);
    }
    ic_llvm_module *m = NULL;
    cr_assert_eq(ic_llvmgen_kernels(c, 1, &kb->k, 3, bufs, t, &base, &m), IC_OK, "%s", ic_last_error(c));
    ic_llvm_module_destroy(m);
    ic_codegen_target_destroy(t);
    ic_ctx_destroy(c);
    free(kb);
}

Test(llvmgen, small_kernels_run_serially)
{
    kb_t *kb = pointwise_kernel(4, 100, IC_L_ADD);
    ic_buffer bufs[3] = { kb_buf(IC_BUF_ARG, IC_F32, 400, 0), kb_buf(IC_BUF_ARG, IC_F32, 100, 1),
                          kb_buf(IC_BUF_OUTPUT, IC_F32, 400, 0) };
    gen_t G;
    gen(&G, kb, 3, bufs, NULL);
    cr_assert(strstr(G.ir, "__kmpc_fork_call") == NULL, "a 400-element kernel forked");
    gen_free(&G);
    /* threads = 1 never forks; an explicit team size pushes it */
    ic_codegen_params p;
    ic_codegen_params_default(NULL, &kb->k, bufs, &p);
    p.serial_threshold = 1;
    p.threads = 3;
    gen(&G, kb, 3, bufs, &p);
    cr_assert(strstr(G.ir, "__kmpc_fork_call") != NULL);
    cr_assert(strstr(G.ir, "__kmpc_push_num_threads") != NULL);
    gen_free(&G);
    p.threads = 1;
    gen(&G, kb, 3, bufs, &p);
    cr_assert(strstr(G.ir, "__kmpc_fork_call") == NULL);
    gen_free(&G);
    free(kb);
}

Test(llvmgen, exp_vectorises_without_libm)
{
    kb_t *kb = pointwise_kernel(64, 4096, IC_L_EXP);
    ic_buffer bufs[3] = { kb_buf(IC_BUF_ARG, IC_F32, 64 * 4096, 0), kb_buf(IC_BUF_ARG, IC_F32, 4096, 1),
                          kb_buf(IC_BUF_OUTPUT, IC_F32, 64 * 4096, 0) };
    gen_t G;
    gen(&G, kb, 3, bufs, NULL);
    assert_vector_code(&G, "exp");
    cr_assert(strstr(G.as, "expf") == NULL, "exp calls libm:\n");
    gen_free(&G);
    free(kb);
}

static kb_t *row_sum_kernel(int64_t rows, int64_t cols, ic_red red)
{
    kb_t *kb = kb_new("row_reduce", 1, (int64_t[]){ rows }, 1, (int64_t[]){ cols });
    kb_stage(kb, IC_STAGE_REDUCE);
    int i = kb_var(kb, 0), j = kb_var(kb, 1);
    int r = kb_reduce(kb, red, IC_F32, kb_load(kb, 0, IC_F32, kb_off2(kb, i, cols, j)), -1);
    kb_stage(kb, IC_STAGE_BODY);
    kb_store(kb, 1, kb_var(kb, 0), kb_acc(kb, IC_F32, 0, r));
    return kb;
}

Test(llvmgen, row_reductions_use_vector_accumulators)
{
    ic_red reds[2] = { IC_RED_SUM, IC_RED_MAX };
    for (int q = 0; q < 2; q++) {
        kb_t *kb = row_sum_kernel(16384, 4096, reds[q]);
        ic_buffer bufs[2] = { kb_buf(IC_BUF_ARG, IC_F32, 16384 * 4096, 0), kb_buf(IC_BUF_OUTPUT, IC_F32, 16384, 0) };
        cr_assert_eq(ic_kernel_mode_of(&kb->k), IC_KMODE_ROW);
        gen_t G;
        gen(&G, kb, 2, bufs, NULL);
        assert_vector_code(&G, reds[q] == IC_RED_SUM ? "row sum" : "row max");
        const char *acc = reds[q] == IC_RED_SUM ? "fadd reassoc <" : "llvm.maximum.v";
        cr_assert(strstr(G.ir, acc) != NULL, "no vector accumulator (%s) in the row reduction", acc);
        const char *hred = reds[q] == IC_RED_SUM ? "llvm.vector.reduce.fadd" : "llvm.vector.reduce.fmaximum";
        cr_assert(strstr(G.ir, hred) != NULL, "no horizontal reduction %s", hred);
        gen_free(&G);
        free(kb);
    }
}

/* Softmax's forms: a max that may drop NaNs (IC_LF_NAN_FREE) keeps vector accumulators as
 * a plain compare and select (on x86 one MAXPS, no NaN fixup); exp.le0 stays vector code
 * without libm and without the overflow compare; a * b + c is contractible into an fma. */
Test(llvmgen, softmax_forms)
{
    kb_t *kb = row_sum_kernel(16384, 128, IC_RED_MAX);
    kb->k.stages[0].instr[kb->k.stages[0].ninstr - 1].flags = IC_LF_NAN_FREE;
    ic_buffer bufs[2] = { kb_buf(IC_BUF_ARG, IC_F32, 16384 * 128, 0), kb_buf(IC_BUF_OUTPUT, IC_F32, 16384, 0) };
    gen_t G;
    gen(&G, kb, 2, bufs, NULL);
    assert_vector_code(&G, "nan_free max");
    cr_assert(strstr(G.ir, "llvm.maximum.v") == NULL, "nan_free max kept the NaN-propagating form");
    cr_assert(strstr(G.ir, "llvm.vector.reduce.fmax") != NULL, "no horizontal max");
    if (strstr(ic_codegen_target_triple(G.t), "x86_64"))
        cr_assert(strstr(G.as, "vcmpunordps") == NULL, "NaN fixups in a nan_free max");
    gen_free(&G);
    free(kb);

    /* exp(x - 3) with the LE0 flag next to a * 0.125 + b */
    kb = kb_new("le0_fma", 2, (int64_t[]){ 64, 4096 }, 0, NULL);
    kb_stage(kb, IC_STAGE_BODY);
    int i = kb_var(kb, 0), j = kb_var(kb, 1), off = kb_off2(kb, i, 4096, j);
    int a = kb_load(kb, 0, IC_F32, off), b = kb_load(kb, 1, IC_F32, j);
    int e = kb_un(kb, IC_L_EXP, IC_F32, kb_bin(kb, IC_L_SUB, IC_F32, a, kb_constf(kb, IC_F32, 3)));
    kb->k.stages[0].instr[e].flags = IC_LF_EXP_LE0;
    int f = kb_bin(kb, IC_L_ADD, IC_F32, kb_bin(kb, IC_L_MUL, IC_F32, a, kb_constf(kb, IC_F32, 0.125)), b);
    kb_store(kb, 2, off, kb_bin(kb, IC_L_ADD, IC_F32, e, f));
    ic_buffer b3[3] = { kb_buf(IC_BUF_ARG, IC_F32, 64 * 4096, 0), kb_buf(IC_BUF_ARG, IC_F32, 4096, 1),
                        kb_buf(IC_BUF_OUTPUT, IC_F32, 64 * 4096, 0) };
    gen(&G, kb, 3, b3, NULL);
    assert_vector_code(&G, "exp.le0");
    cr_assert(strstr(G.pre, "@ic.exp_le0.f32") != NULL, "exp.le0 did not take its own form");
    cr_assert(strstr(G.ir, "0x40562E42E0000000") == NULL, "exp.le0 kept the overflow bound 88.72");
    cr_assert(strstr(G.as, "expf") == NULL, "exp.le0 calls libm");
    cr_assert(strstr(G.pre, "fmul contract") != NULL && strstr(G.pre, "fadd contract") != NULL,
              "mul and add are not contractible");
    if (strstr(ic_codegen_target_features(G.t), "+fma"))
        cr_assert(strstr(G.as, "vfmadd") != NULL, "no fma for a * 0.125 + b");
    gen_free(&G);
    free(kb);
}

Test(llvmgen, column_reduction_walks_rows_with_a_vector_strip)
{
    int64_t rows = 16384, cols = 4096;
    kb_t *kb = kb_new("col_sum", 1, (int64_t[]){ cols }, 1, (int64_t[]){ rows });
    kb_stage(kb, IC_STAGE_REDUCE);
    int o = kb_var(kb, 0), r = kb_var(kb, 1);
    int s = kb_reduce(kb, IC_RED_SUM, IC_F32, kb_load(kb, 0, IC_F32, kb_off2(kb, r, cols, o)), -1);
    kb_stage(kb, IC_STAGE_BODY);
    kb_store(kb, 1, kb_var(kb, 0), kb_acc(kb, IC_F32, 0, s));
    ic_buffer bufs[2] = { kb_buf(IC_BUF_ARG, IC_F32, rows * cols, 0), kb_buf(IC_BUF_OUTPUT, IC_F32, cols, 0) };
    cr_assert_eq(ic_kernel_mode_of(&kb->k), IC_KMODE_COLUMN);
    ic_codegen_params p;
    ic_codegen_params_default(NULL, &kb->k, bufs, &p);
    cr_assert(p.strip >= 64 && p.strip % 64 == 0 && p.strip <= 4096, "strip %ld", (long)p.strip);
    gen_t G;
    gen(&G, kb, 2, bufs, NULL);
    assert_vector_code(&G, "column sum");
    /* contiguous vector loads of the input, not gathers */
    cr_assert(strstr(G.ir, "gather") == NULL, "column sum gathers");
    gen_free(&G);
    free(kb);
}

Test(llvmgen, scalar_when_vector_width_is_one)
{
    kb_t *kb = pointwise_kernel(64, 1000, IC_L_ADD);
    ic_buffer bufs[3] = { kb_buf(IC_BUF_ARG, IC_F32, 64000, 0), kb_buf(IC_BUF_ARG, IC_F32, 1000, 1),
                          kb_buf(IC_BUF_OUTPUT, IC_F32, 64000, 0) };
    ic_codegen_params p;
    ic_codegen_params_default(NULL, &kb->k, bufs, &p);
    p.vector_width = 1;
    p.threads = 1;
    gen_t G;
    gen(&G, kb, 3, bufs, &p);
    cr_assert(strstr(G.ir, "x float>") == NULL, "vector_width 1 still vectorised");
    gen_free(&G);
    free(kb);
}

Test(llvmgen, kernel_names_become_unique_symbols)
{
    ic_ctx *c = ict_ctx();
    ic_codegen_target *t;
    cr_assert_eq(ic_codegen_target_create(c, &t), IC_OK);
    kb_t *a = pointwise_kernel(2, 2, IC_L_ADD), *b = pointwise_kernel(2, 2, IC_L_ADD);
    a->k.name = "cpu fused/add";
    b->k.name = "cpu fused/add";
    ic_kernel ks[2] = { a->k, b->k };
    ic_buffer bufs[3] = { kb_buf(IC_BUF_ARG, IC_F32, 4, 0), kb_buf(IC_BUF_ARG, IC_F32, 2, 1),
                          kb_buf(IC_BUF_OUTPUT, IC_F32, 4, 0) };
    ic_llvm_module *m;
    cr_assert_eq(ic_llvmgen_kernels(c, 2, ks, 3, bufs, t, NULL, &m), IC_OK, "%s", ic_last_error(c));
    cr_assert_eq(ic_llvm_module_num_kernels(m), 2);
    cr_assert_str_eq(ic_llvm_module_kernel_symbol(m, 0), "cpu_fused_add");
    cr_assert_str_neq(ic_llvm_module_kernel_symbol(m, 1), "cpu_fused_add");
    ic_llvm_module_destroy(m);
    ic_codegen_target_destroy(t);
    free(a), free(b);
    ic_ctx_destroy(c);
}

Test(llvmgen, bad_operand_types_are_errors)
{
    ic_ctx *c = ict_ctx();
    ic_codegen_target *t;
    cr_assert_eq(ic_codegen_target_create(c, &t), IC_OK);
    kb_t *kb = kb_new("mixed", 1, (int64_t[]){ 8 }, 0, NULL);
    kb_stage(kb, IC_STAGE_BODY);
    int i = kb_var(kb, 0);
    int x = kb_load(kb, 0, IC_F32, i);
    kb_store(kb, 1, i, kb_bin(kb, IC_L_ADD, IC_F32, x, i)); /* f32 + i64 */
    ic_buffer bufs[2] = { kb_buf(IC_BUF_ARG, IC_F32, 8, 0), kb_buf(IC_BUF_OUTPUT, IC_F32, 8, 0) };
    ic_llvm_module *m = NULL;
    ic_status s = ic_llvmgen_kernels(c, 1, &kb->k, 2, bufs, t, NULL, &m);
    ict_assert_error(c, s, IC_EINVAL, "kernel 'mixed'", "operand types");
    cr_assert_null(m);
    /* f16 arithmetic in registers is refused: lowering computes in f32 */
    kb->st[0].ninstr = 0;
    i = kb_var(kb, 0);
    x = kb_load(kb, 0, IC_F16, i);
    kb_store(kb, 1, i, kb_un(kb, IC_L_NEG, IC_F16, x));
    bufs[0].dtype = bufs[1].dtype = IC_F16;
    s = ic_llvmgen_kernels(c, 1, &kb->k, 2, bufs, t, NULL, &m);
    ict_assert_error(c, s, IC_EINVAL, "f16/bf16");
    ic_codegen_target_destroy(t);
    free(kb);
    ic_ctx_destroy(c);
}

/* u8/i8/i16 exist in memory only: byte and 16-bit loads widen (u8 zero-, i8/i16
 * sign-extended) to i32, stores truncate, and the loop still vectorises; arithmetic on them,
 * or a cast between one and anything but i32, is refused. */
Test(llvmgen, narrow_integer_loads_and_stores_vectorise)
{
    kb_t *kb = kb_new("narrow", 1, (int64_t[]){ 4096 }, 0, NULL);
    kb_stage(kb, IC_STAGE_BODY);
    int i = kb_var(kb, 0);
    int a = kb_cast(kb, IC_I32, kb_load(kb, 0, IC_U8, i));
    int b = kb_cast(kb, IC_I32, kb_load(kb, 1, IC_I8, i));
    int s = kb_bin(kb, IC_L_ADD, IC_I32, a, b);
    kb_store(kb, 2, i, kb_cast(kb, IC_U8, s));
    kb_store(kb, 3, i, kb_cast(kb, IC_I16, kb_bin(kb, IC_L_MUL, IC_I32, s, b)));
    ic_buffer bufs[4] = { kb_buf(IC_BUF_ARG, IC_U8, 4096, 0), kb_buf(IC_BUF_ARG, IC_I8, 4096, 1),
                          kb_buf(IC_BUF_OUTPUT, IC_U8, 4096, 0), kb_buf(IC_BUF_OUTPUT, IC_I16, 4096, 1) };
    gen_t G;
    gen(&G, kb, 4, bufs, NULL);
    cr_assert(strstr(G.pre, "load i8") && strstr(G.pre, "zext i8") && strstr(G.pre, "sext i8"),
              "narrow loads:\n%.3000s", G.pre);
    cr_assert(strstr(G.pre, "trunc i32") && strstr(G.pre, "store i8") && strstr(G.pre, "store i16"),
              "narrow stores:\n%.3000s", G.pre);
    cr_assert(strstr(G.ir, " x i8>") && strstr(G.ir, " x i16>"), "not vectorised:\n%.3000s", G.ir);
    gen_free(&G);

    ic_ctx *c = ict_ctx();
    ic_codegen_target *t;
    cr_assert_eq(ic_codegen_target_create(c, &t), IC_OK);
    kb->st[0].ninstr = 0;
    i = kb_var(kb, 0);
    a = kb_load(kb, 0, IC_U8, i);
    kb_store(kb, 2, i, kb_bin(kb, IC_L_ADD, IC_U8, a, a));
    ic_llvm_module *m = NULL;
    ict_assert_error(c, ic_llvmgen_kernels(c, 1, &kb->k, 4, bufs, t, NULL, &m), IC_EINVAL, "u8/i8/i16");
    kb->st[0].ninstr = 0;
    i = kb_var(kb, 0);
    kb_store(kb, 2, i, kb_cast(kb, IC_U8, kb_cast(kb, IC_F32, kb_load(kb, 1, IC_I8, i))));
    ict_assert_error(c, ic_llvmgen_kernels(c, 1, &kb->k, 4, bufs, t, NULL, &m), IC_EINVAL, "only from and to i32");
    cr_assert_null(m);
    ic_codegen_target_destroy(t);
    free(kb);
    ic_ctx_destroy(c);
}

/* out[m, n] = sum_k a[m, k] * b[k, n]: vectorised along n (b's rows, a broadcast), no gathers */
Test(llvmgen, matmul_vectorises_along_columns)
{
    int64_t M = 64, K = 256, N = 512;
    kb_t *kb = kb_new("matmul", 2, (int64_t[]){ M, N }, 1, (int64_t[]){ K });
    kb_stage(kb, IC_STAGE_REDUCE);
    int m = kb_var(kb, 0), n = kb_var(kb, 1), k = kb_var(kb, 2);
    int a = kb_load(kb, 0, IC_F32, kb_off2(kb, m, K, k)), b = kb_load(kb, 1, IC_F32, kb_off2(kb, k, N, n));
    int s = kb_reduce(kb, IC_RED_SUM, IC_F32, kb_bin(kb, IC_L_MUL, IC_F32, a, b), -1);
    kb_stage(kb, IC_STAGE_BODY);
    m = kb_var(kb, 0), n = kb_var(kb, 1);
    kb_store(kb, 2, kb_off2(kb, m, N, n), kb_acc(kb, IC_F32, 0, s));
    ic_buffer bufs[3] = { kb_buf(IC_BUF_ARG, IC_F32, M * K, 0), kb_buf(IC_BUF_ARG, IC_F32, K * N, 1),
                          kb_buf(IC_BUF_OUTPUT, IC_F32, M * N, 0) };
    cr_assert_eq(ic_kernel_mode_of(&kb->k), IC_KMODE_COLUMN);
    gen_t G;
    gen(&G, kb, 3, bufs, NULL);
    assert_vector_code(&G, "matmul");
    cr_assert(strstr(G.ir, "gather") == NULL, "matmul gathers");
    gen_free(&G);
    free(kb);
}

/* a full reduction (no outer loops) above the threshold forks and combines partials */
Test(llvmgen, full_reduction_is_split_across_threads)
{
    int64_t n = 1 << 22;
    kb_t *kb = kb_new("full_sum", 0, NULL, 1, (int64_t[]){ n });
    kb_stage(kb, IC_STAGE_REDUCE);
    int r = kb_reduce(kb, IC_RED_SUM, IC_F32, kb_load(kb, 0, IC_F32, kb_var(kb, 0)), -1);
    kb_stage(kb, IC_STAGE_BODY);
    kb_store(kb, 1, kb_consti(kb, IC_I64, 0), kb_acc(kb, IC_F32, 0, r));
    ic_buffer bufs[2] = { kb_buf(IC_BUF_ARG, IC_F32, n, 0), kb_buf(IC_BUF_OUTPUT, IC_F32, 1, 0) };
    gen_t G;
    gen(&G, kb, 2, bufs, NULL);
    cr_assert(strstr(G.ir, "@__kmpc_fork_call") != NULL, "a 4M-element sum runs on one thread");
    cr_assert(strstr(G.ir, "omp_get_max_threads") != NULL);
    assert_vector_code(&G, "split sum");
    gen_free(&G);
    free(kb);
}
