/* test_conv_cpu.c - convolutions on the CPU: a conv larger than 1x1 compiles to an im2col
 * kernel (pad + windows materialised over [N, C, *k, *out], its loads and stores affine: no
 * div/mod per element) and a packed GEMM reading the columns through their reshape with
 * affine offsets (no div/mod either), and matches the reference executor for odd shapes:
 * channels that are no multiple of the vector width, odd H and W, stride 2, padding 0/1/3,
 * dilation, groups, batch 1 and 3, f32 and bf16, bias, relu and a residual epilogue. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "ic/lower.h"
#include "ic/fuse.h"
#include "ic/llvmgen.h"
#include "../PTX/ptx_cases.h"

typedef struct {
    const char *dt;
    int64_t n, c, h, w, cout, kh, kw, stride, pad, dil, groups;
    bool bias, relu, residual;
} conv_case;

static const conv_case CASES[] = {
    { "f32", 1, 64, 14, 14, 64, 3, 3, 1, 1, 1, 1, true, true, false },  /* resnet's 3x3 */
    { "f32", 3, 5, 13, 11, 7, 3, 3, 1, 1, 1, 1, true, false, false },   /* odd everything */
    { "f32", 2, 17, 15, 9, 19, 3, 3, 2, 1, 1, 1, true, true, false },   /* stride 2 */
    { "f32", 1, 3, 33, 31, 16, 7, 7, 2, 3, 1, 1, true, true, false },   /* the 7x7 stem */
    { "f32", 2, 6, 9, 10, 5, 3, 2, 1, 0, 1, 1, false, false, false },   /* padding 0 */
    { "f32", 1, 8, 11, 12, 8, 3, 3, 1, 2, 2, 1, true, false, false },   /* dilation 2 */
    { "f32", 2, 6, 9, 7, 9, 3, 3, 2, 1, 1, 3, true, true, false },      /* groups 3 */
    { "f32", 2, 9, 7, 7, 9, 3, 3, 1, 1, 1, 1, true, true, true },       /* relu(conv + x) */
    { "f32", 1, 32, 56, 56, 32, 3, 3, 1, 1, 1, 1, true, true, false },  /* several GEMM blocks */
    { "bf16", 2, 12, 9, 11, 20, 3, 3, 1, 1, 1, 1, true, true, false },
    { "bf16", 1, 3, 17, 15, 8, 5, 5, 2, 3, 1, 1, false, true, false },
};

static const char *case_json(char *buf, size_t n, const conv_case *k)
{
    char nodes[768];
    int len = snprintf(nodes, sizeof nodes,
                       "{'name':'c','op':'conv','inputs':['x','w'%s],'attrs':{'stride':[%lld,%lld],"
                       "'padding':[%lld,%lld],'dilation':[%lld,%lld],'groups':%lld}}",
                       k->bias ? ",'b'" : "", (long long)k->stride, (long long)k->stride, (long long)k->pad,
                       (long long)k->pad, (long long)k->dil, (long long)k->dil, (long long)k->groups);
    const char *last = "c";
    if (k->residual) {
        len += snprintf(nodes + len, sizeof nodes - (size_t)len, ",{'name':'r','op':'add','inputs':['c','x']}");
        last = "r";
    }
    if (k->relu) {
        len += snprintf(nodes + len, sizeof nodes - (size_t)len, ",{'name':'y','op':'relu','inputs':['%s']}", last);
        last = "y";
    }
    char bias[128] = "";
    if (k->bias)
        snprintf(bias, sizeof bias, ",{'name':'b','dtype':'%s','shape':[%lld]}", k->dt, (long long)k->cout);
    snprintf(buf, n,
             "{'ic_graph':1,'name':'t','inputs':[{'name':'x','dtype':'%s','shape':[%lld,%lld,%lld,%lld]},"
             "{'name':'w','dtype':'%s','shape':[%lld,%lld,%lld,%lld]}%s],'nodes':[%s],'outputs':['%s']}",
             k->dt, (long long)k->n, (long long)k->c, (long long)k->h, (long long)k->w, k->dt, (long long)k->cout,
             (long long)(k->c / k->groups), (long long)k->kh, (long long)k->kw, bias, nodes, last);
    return buf;
}

/* The fused program's kernel whose name has `has`, or NULL. */
static const ic_kernel *kernel_named(const ic_program *p, const char *has)
{
    for (int i = 0; i < ic_program_num_kernels(p); i++)
        if (strstr(ic_program_kernel(p, i)->name, has))
            return ic_program_kernel(p, i);
    return NULL;
}

static int count_divmod(const ic_kernel *k)
{
    int n = 0;
    for (int s = 0; s < k->nstages; s++)
        for (int i = 0; i < k->stages[s].ninstr; i++)
            n += k->stages[s].instr[i].op == IC_L_IDIV || k->stages[s].instr[i].op == IC_L_MOD;
    return n;
}

/* The im2col kernel and the GEMM's kernel have no div/mod, and the GEMM is recognised. */
static void check_kernels(ic_ctx *c, ic_graph *g, const char *what)
{
    ic_program *p, *f;
    cr_assert_eq(ic_lower(c, g, &p), IC_OK, "%s: %s", what, ic_last_error(c));
    cr_assert_eq(ic_fuse(c, p, NULL, &f), IC_OK, "%s: %s", what, ic_last_error(c));
    const ic_kernel *cols = kernel_named(f, "pad"), *mm = kernel_named(f, "matmul");
    cr_assert(cols && mm, "%s: no im2col or matmul kernel", what);
    cr_assert_eq(count_divmod(cols), 0, "%s: div/mod in %s", what, cols->name);
    cr_assert_eq(count_divmod(mm), 0, "%s: div/mod in %s", what, mm->name);
    cr_assert(ic_kernel_is_gemm(mm, ic_program_buffer(f, 0)), "%s: %s is no GEMM", what, mm->name);
    ic_program_destroy(f);
    ic_program_destroy(p);
}

static void run_case(const conv_case *k)
{
    char json[2048], what[256];
    snprintf(what, sizeof what, "%s x [%lld,%lld,%lld,%lld] w [%lld,%lld,%lld,%lld] s%lld p%lld d%lld g%lld", k->dt,
             (long long)k->n, (long long)k->c, (long long)k->h, (long long)k->w, (long long)k->cout,
             (long long)(k->c / k->groups), (long long)k->kh, (long long)k->kw, (long long)k->stride,
             (long long)k->pad, (long long)k->dil, (long long)k->groups);
    ic_ctx *c = ict_ctx();
    ic_graph *g = graph_json(c, case_json(json, sizeof json, k));
    check_kernels(c, g, what);
    ic_tensor args[8], want, got;
    int nargs = 0;
    make_args(c, g, 0, args, &nargs);
    cr_assert_eq(ic_ref_run(c, g, NULL, nargs, args, 1, &want), IC_OK, "%s: %s", what, ic_last_error(c));
    ic_compiled *cc = NULL;
    cr_assert_eq(ic_compile(c, g, NULL, &cc), IC_OK, "%s: %s", what, ic_last_error(c));
    ic_tensor_init(&got, want.dtype, want.rank, want.shape, NULL);
    cr_assert_eq(ic_tensor_alloc(c, &got), IC_OK);
    memset(got.data, 0xff, (size_t)ic_tensor_numel(&got) * ic_dtype_size(got.dtype));
    cr_assert_eq(ic_run(cc, nargs, args, 1, &got), IC_OK, "%s: %s", what, ic_last_error(c));
    /* the spec's tolerances, with an absolute one growing with the depth K of the sums in
     * f32 (the GEMM and the reference add in different orders; outputs near 0 are
     * differences of terms of size ~K) */
    double rtol, atol;
    ict_tol(want.dtype, &rtol, &atol);
    int64_t depth = k->c / k->groups * k->kh * k->kw;
    if (want.dtype == IC_F32)
        atol = 1e-6 * (double)depth;
    char msg[1024];
    cr_assert(ict_allclose_tol(&got, &want, rtol, atol, msg, sizeof msg), "%s: %s", what, msg);
    ic_tensor_free(c, &got);
    ic_tensor_free(c, &want);
    for (int i = 0; i < nargs; i++)
        ic_tensor_free(c, &args[i]);
    ic_compiled_destroy(cc);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

Test(conv_cpu, im2col_and_gemm_match_the_reference, .timeout = 600)
{
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++)
        run_case(&CASES[i]);
}
