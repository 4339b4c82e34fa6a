/* test_ptx.c - the GPU backend without a GPU: every op of the spec (lowered, and fused) is
 * emitted as PTX, assembled with `ptxas -arch=sm_90` when ptxas exists, and run through the
 * host emulator of the generated kernels (same code as on the GPU except thread ids,
 * shuffles, barriers and f16 conversions), whose results must match the reference executor within the
 * spec's tolerances. Also: launch-geometry variants (every mapping and combine path),
 * special values and accuracy sweeps of the math functions against libm, hand-built
 * kernels (integer floor division), malformed kernels and bad params. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "testutil.h"
#include "ic/lower.h"
#include "ic/fuse.h"
#include "ic/ptx.h"
#include "ptx_cases.h"
#include "ptxas.h"
#include "../LLVMGen/kbuild.h"

static void free_tensors(ic_ctx *c, ic_tensor *t, int n)
{
    for (int i = 0; i < n; i++)
        ic_tensor_free(c, &t[i]);
}

/* The program for g: one kernel per op, or fused (kernels named gpu_...). */
static ic_program *program(ic_ctx *c, const ic_graph *g, bool fused)
{
    ic_program *p = NULL, *f = NULL;
    ic_status s = ic_lower(c, g, &p);
    cr_assert_eq(s, IC_OK, "ic_lower: %s", ic_last_error(c));
    if (!fused)
        return p;
    ic_fuse_options fo;
    ic_fuse_options_init(&fo);
    fo.prefix = "gpu_";
    fo.stash_norm_rows = false; /* as the CUDA runtime fuses */
    s = ic_fuse(c, p, &fo, &f);
    cr_assert_eq(s, IC_OK, "ic_fuse: %s", ic_last_error(c));
    ic_program_destroy(p);
    return f;
}

static int nchecked, nassembled;

/* Kernel i takes exactly the buffers its loop IR loads or stores, in buffer order, and its
 * PTX entry (params: the text after "(") declares that many parameters: a large program's
 * kernels must not carry every buffer (PTX allows 4 KiB of parameters). */
static void kernel_buffers(const ic_kernel *lk, bool *used, bool *stored)
{
    for (int s = 0; s < lk->nstages; s++)
        for (int j = 0; j < lk->stages[s].ninstr; j++) {
            const ic_linstr *in = &lk->stages[s].instr[j];
            if (in->op == IC_L_LOAD || in->op == IC_L_STORE)
                used[in->buf] = true;
            if (in->op == IC_L_STORE && stored)
                stored[in->buf] = true;
        }
}

/* An implicit-GEMM conv (lib/PTX/iconv.c): the GEMM reads what the skipped (grid 0) copy
 * kernel j read instead of the buffer j stored. */
static void iconv_buffers(const ic_program *p, const ic_ptx_module *m, int i, bool *used, int nb)
{
    for (int j = 0; j < i; j++) {
        if (ic_ptx_module_kernel(m, j)->grid != 0)
            continue;
        bool *ju = calloc((size_t)nb + 1, 1), *js = calloc((size_t)nb + 1, 1);
        kernel_buffers(ic_program_kernel(p, j), ju, js);
        for (int b = 0; b < nb; b++)
            if (js[b] && used[b]) {
                used[b] = false;
                for (int x = 0; x < nb; x++)
                    used[x] |= ju[x] && !js[x];
            }
        free(ju);
        free(js);
    }
}

static void check_kernel_params(const char *name, const ic_program *p, const ic_ptx_module *m, int i,
                                const ic_ptx_kernel *k, const char *params)
{
    const ic_kernel *lk = ic_program_kernel(p, i);
    int nb = ic_program_num_buffers(p), n = 0;
    bool *used = calloc((size_t)nb + 1, 1);
    kernel_buffers(lk, used, NULL);
    if (k->mode == IC_PTX_GEMM)
        iconv_buffers(p, m, i, used, nb);
    for (int b = 0; b < nb; b++)
        if (used[b]) {
            cr_assert(n < k->nargs && k->args[n] == b, "%s: kernel %s: parameter %d is not buffer %d",
                      name, k->name, n, b);
            n++;
        }
    cr_assert_eq(n, k->nargs, "%s: kernel %s takes %d buffers, uses %d", name, k->name, k->nargs, n);
    int declared = 0;
    for (const char *q = params; *q && *q != ')'; q++)
        declared += !strncmp(q, ".param", 6);
    cr_assert_eq(declared, k->nargs, "%s: kernel %s declares %d parameters, takes %d", name, k->name,
                 declared, k->nargs);
    free(used);
}

/* Emits p (sm_90), assembles it, emulates it and compares with ref. */
static void check_program(ic_ctx *c, const char *name, const ic_program *p, const ic_ptx_params *params,
                          const ic_tensor *args, int nargs, const ic_tensor *ref, int nouts)
{
    ic_ptx_options o = { .sm = 90 };
    ic_ptx_module *m = NULL;
    ic_status s = ic_ptx_emit(c, p, &o, params, &m);
    cr_assert_eq(s, IC_OK, "%s: ic_ptx_emit: %s", name, ic_last_error(c));
    cr_assert_eq(ic_ptx_module_num_kernels(m), ic_program_num_kernels(p), "%s: kernel count", name);
    const char *text = ic_ptx_module_text(m);
    for (int i = 0; i < ic_ptx_module_num_kernels(m); i++) {
        const ic_ptx_kernel *k = ic_ptx_module_kernel(m, i);
        char entry[300]; /* a kernel with the code of an earlier one launches that one's entry */
        snprintf(entry, sizeof entry, ".entry %s(", k->entry ? k->entry : k->name);
        cr_assert(strstr(text, entry), "%s: no '%s' in the PTX", name, entry);
        cr_assert(!strncmp(k->name, "gpu_", 4), "%s: kernel name '%s' lacks gpu_", name, k->name);
        check_kernel_params(name, p, m, i, k, strstr(text, entry) + strlen(entry));
    }
    if (!strncmp(name, "iconv", 5)) /* the im2col copy is not launched: the GEMM gathers x */
        cr_assert_eq(ic_ptx_module_kernel(m, 0)->grid, 0, "%s: the im2col copy still runs", name);
    if (!strncmp(name, "stacked iconv", 13)) {
        int skipped = 0;
        for (int i = 0; i < ic_ptx_module_num_kernels(m); i++)
            skipped += ic_ptx_module_kernel(m, i)->grid == 0;
        cr_assert_eq(skipped, 2, "%s: %d of 2 im2col copies skipped", name, skipped);
    }
    if (!strncmp(name, "gemm", 4) && !(params && params[0].mode == IC_PTX_ROW)) {
        /* the contraction went through the GEMM kernels, tensor cores for 16-bit operands */
        bool gemm = false;
        for (int i = 0; i < ic_ptx_module_num_kernels(m); i++)
            gemm |= ic_ptx_module_kernel(m, i)->mode == IC_PTX_GEMM;
        cr_assert(gemm, "%s: no kernel was mapped to GEMM", name);
        if (strstr(name, "f16") || strstr(name, "bf16"))
            cr_assert((strstr(text, "mma.sync.aligned.m16n8k16") && strstr(text, "ldmatrix")) ||
                      strstr(text, "wgmma.mma_async"), "%s: no mma.sync / ldmatrix / wgmma in the PTX", name);
        if (strstr(name, "16-byte"))
            cr_assert(strstr(text, "cp.async.cg.shared.global"), "%s: no 16-byte cp.async", name);
    }
    if (!strncmp(name, "wgmma", 5)) /* sm_90 takes these on warpgroup MMAs */
        cr_assert(strstr(text, "wgmma.mma_async.sync.aligned.m64n") && strstr(text, ".target sm_90a") &&
                  strstr(text, "mbarrier.try_wait.parity"), "%s: no wgmma pipeline in the PTX", name);
    char log[4096];
    cr_assert(assemble(text, log, sizeof log), "%s: ptxas refused the PTX:\n%s", name, log);
    nassembled += ptxas_path() != NULL;
    ic_ptx_module_destroy(m);

    ic_tensor got[8];
    for (int i = 0; i < nouts; i++) {
        ic_tensor_init(&got[i], ref[i].dtype, ref[i].rank, ref[i].shape, NULL);
        cr_assert_eq(ic_tensor_alloc(c, &got[i]), IC_OK);
        memset(got[i].data, 0xcd, (size_t)ic_tensor_numel(&got[i]) * ic_dtype_size(got[i].dtype));
    }
    s = ic_ptx_emulate(c, p, params, args, nargs, got, nouts);
    cr_assert_eq(s, IC_OK, "%s: ic_ptx_emulate: %s", name, ic_last_error(c));
    for (int i = 0; i < nouts; i++) {
        char msg[1024];
        cr_assert(ict_allclose(&got[i], &ref[i], msg, sizeof msg), "%s: output %d: %s", name, i, msg);
    }
    free_tensors(c, got, nouts);
    nchecked++;
}

/* Reference vs the GPU kernels of g, unfused and fused; params (one for every kernel) may
 * be NULL. */
static void check_graph_params(const char *name, const char *json, unsigned flags,
                               const ic_ptx_params *params)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = graph_json(c, json);
    ic_tensor args[8], ref[8];
    int nargs = 0, nouts = ic_graph_num_outputs(g);
    make_args(c, g, flags, args, &nargs);
    ic_status s = ic_ref_run(c, g, NULL, nargs, args, nouts, ref);
    cr_assert_eq(s, IC_OK, "%s: ic_ref_run: %s", name, ic_last_error(c));
    for (int fused = 0; fused < 2; fused++) {
        if ((fused && (flags & NOFUSE)) || (!fused && (flags & FUSEDONLY)))
            continue;
        ic_program *p = program(c, g, fused);
        int nk = ic_program_num_kernels(p);
        ic_ptx_params *pp = NULL;
        if (params) {
            pp = calloc((size_t)nk + 1, sizeof *pp);
            for (int i = 0; i < nk; i++)
                pp[i] = *params;
        }
        char what[300];
        snprintf(what, sizeof what, "%s (%s)", name, fused ? "fused" : "unfused");
        check_program(c, what, p, pp, args, nargs, ref, nouts);
        free(pp);
        ic_program_destroy(p);
    }
    free_tensors(c, args, nargs);
    free_tensors(c, ref, nouts);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

static void check_case(const char *name, const char *json, unsigned flags, const ic_ptx_params *params)
{
    check_graph_params(name, json, flags, params);
}

Test(ptx, ptxas_available)
{
    if (!ptxas_path())
        cr_skip_test("ptxas not found (" PTXAS_DEFAULT " or $IC_PTXAS): PTX is emitted and emulated "
                     "but not assembled");
    char log[4096];
    cr_assert(!assemble(".version 8.0\n.target sm_90\n.address_size 64\nthis is not ptx\n", log, sizeof log),
              "ptxas accepted garbage, so its verdicts mean nothing");
}

/* ---- every op ---- */

Test(ptx, unary_ops_f32)
{
    ptx_cases(CASES_UNARY, check_case);
}

Test(ptx, unary_ops_other_dtypes)
{
    ptx_cases(CASES_UNARY_DTYPES, check_case);
}

Test(ptx, casts_between_every_dtype)
{
    ptx_cases(CASES_CASTS, check_case);
}

Test(ptx, binary_ops_with_broadcasting)
{
    ptx_cases(CASES_BINARY, check_case);
}

Test(ptx, reductions_over_every_axis_kind)
{
    ptx_cases(CASES_REDUCE, check_case);
}

Test(ptx, normalisations)
{
    ptx_cases(CASES_NORM, check_case);
}

Test(ptx, views_cat_gather_creation)
{
    ptx_cases(CASES_VIEW, check_case);
}

Test(ptx, contractions)
{
    ptx_cases(CASES_CONTRACT, check_case);
}

/* ---- GEMM: tensor cores (emulated mma/ldmatrix/cp.async) and FFMA, epilogues, params ---- */

Test(ptx, gemm_f32)
{
    ptx_cases(CASES_GEMM_F32, check_case);
}

Test(ptx, gemm_f16)
{
    ptx_cases(CASES_GEMM_F16, check_case);
}

Test(ptx, gemm_bf16)
{
    ptx_cases(CASES_GEMM_BF16, check_case);
}

Test(ptx, gemm_params_split_k_tiles_stages)
{
    ptx_cases(CASES_GEMM_PARAMS, check_case);
}

Test(ptx, wgmma_shapes)
{
    ptx_cases(CASES_WGMMA, check_case);
}

Test(ptx, iconv_shapes)
{
    ptx_cases(CASES_ICONV, check_case);
}

/* Which GEMM path a bf16 matmul takes: wgmma on sm_90 (target sm_90a), mma.sync elsewhere or
 * when the options or params say never; f32 never. The shape fills an H100 with 128 x 256
 * tiles (smaller problems take smaller tiles, wgmma.c's tile_cycles). */
static const char *gemm_ptx(ic_ctx *c, const char *dt, int sm, int opt, int param, ic_ptx_module **m)
{
    char json[600];
    snprintf(json, sizeof json, GRAPH(IN("a", "%s", "[2048,1024]") "," IN("b", "%s", "[1024,2048]"),
                                      "{'name':'y','op':'matmul','inputs':['a','b']}", "'y'"), dt, dt);
    ic_graph *g = graph_json(c, json);
    ic_program *p = program(c, g, true);
    ic_ptx_options o = { .sm = sm, .wgmma = opt };
    ic_ptx_params pp = { .wgmma = param };
    cr_assert_eq(ic_ptx_emit(c, p, &o, &pp, m), IC_OK, "%s", ic_last_error(c));
    ic_program_destroy(p);
    ic_graph_destroy(g);
    return ic_ptx_module_text(*m);
}

Test(ptx, wgmma_is_chosen_on_sm90_only)
{
    ic_ctx *c = ict_ctx();
    ic_ptx_module *m = NULL;
    const char *t = gemm_ptx(c, "bf16", 90, 0, 0, &m);
    const ic_ptx_kernel *k = ic_ptx_module_kernel(m, 0);
    cr_assert(strstr(t, ".target sm_90a") && strstr(t, "wgmma.mma_async.sync.aligned.m64n"), "sm_90: no wgmma");
    cr_assert_eq(k->block, 384, "a producer and two consumer warpgroups, got %d threads", k->block);
    cr_assert_eq(k->params.wgmma, 1);
    cr_assert_eq(k->params.tile_m, 128);
    cr_assert(k->dyn_smem_bytes > 4 * 1024 && k->dyn_smem_bytes <= 227 * 1024, "smem %d", k->dyn_smem_bytes);
    char log[4096];
    cr_assert(assemble(t, log, sizeof log), "ptxas refused the wgmma PTX:\n%s", log);
    ic_ptx_module_destroy(m);
    static const int cases[][3] = { { 80, 0, 0 }, { 90, -1, 0 }, { 90, 0, -1 } }; /* sm, option, param */
    for (int i = 0; i < 3; i++) {
        t = gemm_ptx(c, "bf16", cases[i][0], cases[i][1], cases[i][2], &m);
        cr_assert(!strstr(t, "wgmma") && !strstr(t, "sm_90a") && strstr(t, "mma.sync.aligned.m16n8k16"),
                  "case %d: expected mma.sync", i);
        cr_assert_eq(ic_ptx_module_kernel(m, 0)->params.wgmma, -1);
        ic_ptx_module_destroy(m);
    }
    t = gemm_ptx(c, "f32", 90, 0, 0, &m);
    cr_assert(!strstr(t, "wgmma"), "f32 took wgmma");
    ic_ptx_module_destroy(m);
    /* forced where the heuristic says no (sm_80): the module targets sm_90a */
    t = gemm_ptx(c, "f16", 80, 0, 1, &m);
    cr_assert(strstr(t, ".target sm_90a") && strstr(t, "wgmma.mma_async"), "forced wgmma missing");
    ic_ptx_module_destroy(m);
    ic_ctx_destroy(c);
}

/* ResNet-50's convs on sm_90: the GEMM gathers im2col(x) itself (iconv.c), so the copy
 * kernel is not launched (grid 0) and the GEMM takes x; f32 keeps the copy, and so do
 * outputs of fewer than 64 positions an image. */
static void conv_module(ic_ctx *c, const char *dt, const char *x, const char *w, const char *attrs, bool want)
{
    char json[1200];
    snprintf(json, sizeof json, GRAPH(IN("x", "%s", "%s") "," IN("w", "%s", "%s"),
                                      "{'name':'c','op':'conv','inputs':['x','w'],'attrs':%s},"
                                      "{'name':'y','op':'relu','inputs':['c']}", "'y'"), dt, x, dt, w, attrs);
    ic_graph *g = graph_json(c, json);
    ic_program *p = program(c, g, true);
    ic_ptx_options o = { .sm = 90 };
    ic_ptx_module *m = NULL;
    cr_assert_eq(ic_ptx_emit(c, p, &o, NULL, &m), IC_OK, "%s", ic_last_error(c));
    cr_assert_eq(ic_ptx_module_num_kernels(m), 2, "%s: im2col copy + GEMM expected", x);
    const ic_ptx_kernel *cp = ic_ptx_module_kernel(m, 0), *mm = ic_ptx_module_kernel(m, 1);
    bool takes_x = false;
    for (int i = 0; i < mm->nargs; i++)
        takes_x |= mm->args[i] == 0;
    cr_assert_eq(cp->grid == 0, want, "%s %s: copy grid %lld", dt, x, (long long)cp->grid);
    cr_assert_eq(takes_x, want, "%s %s: the GEMM %s x", dt, x, takes_x ? "takes" : "does not take");
    if (want) {
        cr_assert_eq(mm->params.wgmma, 1);
        char log[4096];
        cr_assert(assemble(ic_ptx_module_text(m), log, sizeof log), "ptxas refused:\n%s", log);
    }
    ic_ptx_module_destroy(m);
    ic_program_destroy(p);
    ic_graph_destroy(g);
}

Test(ptx, iconv_skips_the_im2col_copy)
{
    ic_ctx *c = ict_ctx();
    const char *p1 = "{'padding':[1,1]}", *s2 = "{'padding':[1,1],'stride':[2,2]}";
    conv_module(c, "bf16", "[32,64,56,56]", "[64,64,3,3]", p1, true);
    conv_module(c, "f16", "[32,256,14,14]", "[256,256,3,3]", p1, true);
    conv_module(c, "bf16", "[32,256,28,28]", "[256,256,3,3]", s2, true);
    /* 7x7 outputs: 49 columns an image, under wgmma's 64 (images are not merged into n) */
    conv_module(c, "bf16", "[32,512,7,7]", "[512,512,3,3]", p1, false);
    conv_module(c, "bf16", "[32,3,224,224]", "[64,3,7,7]", "{'padding':[3,3],'stride':[2,2]}", true);
    /* ResNet's downsampling 1x1 stride 2: a strided gather, no taps */
    conv_module(c, "bf16", "[32,256,56,56]", "[512,256,1,1]", "{'stride':[2,2]}", true);
    conv_module(c, "f32", "[2,64,56,56]", "[64,64,3,3]", p1, false);
    /* IC_ICONV=0 (read into the context's switches) keeps the copy */
    ic_switches sw;
    ic_ctx_switches(c, &sw);
    sw.no_iconv = true;
    cr_assert_eq(ic_ctx_set_switches(c, &sw), IC_OK);
    conv_module(c, "bf16", "[32,64,56,56]", "[64,64,3,3]", p1, false);
    ic_ctx_destroy(c);
}

/* Occurrences of needle in text. */
static int count_of(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* A wgmma GEMM whose epilogue calls the math library (gelu's erf) stages the accumulators
 * through shared memory and runs the epilogue as one loop body: erf's code appears a few
 * times, not once per accumulator (128 a thread for a 128x256 tile), and the consumers meet
 * on named barrier 1. A cheap epilogue (relu) stays on the registers. */
Test(ptx, wgmma_math_epilogue_is_one_loop)
{
    ic_ctx *c = ict_ctx();
    static const char *const acts[] = { "gelu", "relu" };
    for (int i = 0; i < 2; i++) {
        char json[1000];
        snprintf(json, sizeof json, GRAPH(IN("x", "bf16", "[512,256]") "," IN("w", "bf16", "[512,256]") "," IN("c", "bf16", "[512]"),
                                          "{'name':'h','op':'linear','inputs':['x','w','c']},{'name':'y','op':'%s','inputs':['h']}",
                                          "'y'"), acts[i]);
        ic_graph *g = graph_json(c, json);
        ic_program *p = program(c, g, true);
        ic_ptx_options o = { .sm = 90 };
        ic_ptx_params pp = { .wgmma = 1, .tile_m = 128, .tile_n = 256 };
        ic_ptx_module *m = NULL;
        cr_assert_eq(ic_ptx_emit(c, p, &o, &pp, &m), IC_OK, "%s", ic_last_error(c));
        cr_assert_eq(ic_ptx_module_num_kernels(m), 1, "%s: one fused kernel", acts[i]);
        const char *t = ic_ptx_module_kernel_text(m, 0);
        cr_assert(strstr(t, "wgmma.mma_async"), "%s: no wgmma", acts[i]);
        bool staged = i == 0;
        cr_assert_eq(strstr(t, "bar.sync 1, 256;") != NULL, staged, "%s: consumer barrier %s", acts[i],
                     staged ? "missing" : "where none is needed");
        if (staged) /* erf's clamp |x| <= 3.92: once per unrolled copy of the loop body */
            cr_assert(count_of(t, "0f407AE148") <= 8, "gelu unrolled: %d copies of erf", count_of(t, "0f407AE148"));
        char log[4096];
        cr_assert(assemble(t, log, sizeof log), "%s: ptxas:\n%s", acts[i], log);
        ic_ptx_module_destroy(m);
        ic_program_destroy(p);
        ic_graph_destroy(g);
    }
    ic_ctx_destroy(c);
}

/* Each kernel is a PTX module of its own: ic_ptx_module_kernel_text holds a header and only
 * that kernel's entry; the joined text is those modules in kernel order after their lines,
 * the same whatever IC_COMPILE_THREADS says (the threads only make them in parallel). */
Test(ptx, a_module_per_kernel_in_kernel_order)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = graph_json(c, GRAPH(IN("x", "f32", "[64,96]") "," IN("w", "f32", "[48,96]"),
                                      "{'name':'h','op':'linear','inputs':['x','w']},{'name':'s','op':'softmax','inputs':['h'],'attrs':{'dim':1}},"
                                      "{'name':'y','op':'exp','inputs':['s']}", "'y'"));
    ic_program *p = program(c, g, false);
    int nk = ic_program_num_kernels(p);
    cr_assert_geq(nk, 3);
    char *texts[2] = { NULL, NULL };
    for (int threads = 1; threads <= 2; threads++) {
        cr_assert_eq(setenv("IC_COMPILE_THREADS", threads == 1 ? "1" : "3", 1), 0);
        ic_ctx *ct = ict_ctx();
        ic_ptx_module *m = NULL;
        cr_assert_eq(ic_ptx_emit(ct, p, NULL, NULL, &m), IC_OK, "%s", ic_last_error(ct));
        const char *all = ic_ptx_module_text(m);
        const char *at = all;
        for (int i = 0; i < nk; i++) {
            const ic_ptx_kernel *k = ic_ptx_module_kernel(m, i);
            const char *own = ic_ptx_module_kernel_text(m, i);
            char line[300];
            snprintf(line, sizeof line, "// ---- kernel %d '%s' ----\n", i, k->name);
            const char *l = strstr(at, line);
            cr_assert(l, "no line '%s' after kernel %d's module", line, i - 1);
            cr_assert(strncmp(l + strlen(line), own, strlen(own)) == 0, "kernel %d: joined text is not its module", i);
            at = l + strlen(line) + strlen(own);
            cr_assert_eq(count_of(own, ".entry "), 1, "kernel %d: one entry a module", i);
            cr_assert_eq(count_of(own, ".version "), 1, "kernel %d: a complete module", i);
            char entry[300];
            snprintf(entry, sizeof entry, ".entry %s(", k->name);
            cr_assert(strstr(own, entry), "kernel %d: its module lacks %s", i, entry);
        }
        cr_assert_eq(*at, 0, "text after the last module");
        cr_assert_null(ic_ptx_module_kernel_text(m, nk));
        cr_assert_null(ic_ptx_module_kernel_text(m, -1));
        texts[threads - 1] = strdup(all);
        ic_ptx_module_destroy(m);
        ic_ctx_destroy(ct);
    }
    unsetenv("IC_COMPILE_THREADS");
    cr_assert_str_eq(texts[0], texts[1], "the PTX depends on the number of threads");
    free(texts[0]);
    free(texts[1]);
    ic_program_destroy(p);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* Kernels whose IR is the same but for the name (two projections of one input by weights of
 * one shape) share one PTX module: the second launches the first's entry on its own args,
 * and the text says whose code it runs. */
Test(ptx, kernels_of_the_same_code_share_a_module)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = graph_json(c, "{'ic_graph':1,'name':'t','inputs':[" IN("x", "f32", "[64,96]") "," IN("w", "f32", "[48,96]") ","
                                IN("v", "f32", "[48,96]") "],'nodes':[{'name':'h','op':'linear','inputs':['x','w']},"
                                "{'name':'k','op':'linear','inputs':['x','v']}],'outputs':['h','k']}");
    ic_program *p = program(c, g, true);
    cr_assert_eq(ic_program_num_kernels(p), 2);
    ic_ptx_module *m = NULL;
    cr_assert_eq(ic_ptx_emit(c, p, NULL, NULL, &m), IC_OK, "%s", ic_last_error(c));
    const ic_ptx_kernel *k0 = ic_ptx_module_kernel(m, 0), *k1 = ic_ptx_module_kernel(m, 1);
    cr_assert_eq(k0->code, 0);
    cr_assert_eq(k1->code, 0, "the second projection has its own code");
    cr_assert_str_neq(k0->name, k1->name);
    cr_assert_str_eq(k0->entry, k0->name);
    cr_assert_str_eq(k1->entry, k0->name, "kernel 1 launches %s", k1->entry);
    cr_assert_neq(k0->args[1], k1->args[1], "each runs on its own weight");
    cr_assert(ic_ptx_module_kernel_text(m, 1) == ic_ptx_module_kernel_text(m, 0));
    char line[300];
    snprintf(line, sizeof line, "// ---- kernel 1 '%s': the code of kernel 0 '%s' ----\n", k1->name, k0->name);
    cr_assert(strstr(ic_ptx_module_text(m), line), "no line '%s' in\n%.400s", line, ic_ptx_module_text(m));
    cr_assert_eq(count_of(ic_ptx_module_text(m), ".entry "), 1, "one module for both");
    ic_ptx_module_destroy(m);
    ic_program_destroy(p);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

Test(ptx, bad_wgmma_params_are_refused)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = graph_json(c, GRAPH(IN("a", "bf16", "[128,64]") "," IN("b", "bf16", "[64,128]"),
                                      "{'name':'y','op':'matmul','inputs':['a','b']}", "'y'"));
    ic_program *p = program(c, g, true);
    ic_ptx_module *m = NULL;
    ic_ptx_params pp = { .wgmma = 2 };
    ict_assert_error(c, ic_ptx_emit(c, p, NULL, &pp, &m), IC_EINVAL, "gpu_matmul", "wgmma must be -1, 0 or 1");
    cr_assert_null(m);
    /* tiles wgmma cannot take fall back to mma.sync rather than fail */
    pp = (ic_ptx_params){ .wgmma = 1, .tile_m = 64, .tile_n = 32 };
    cr_assert_eq(ic_ptx_emit(c, p, NULL, &pp, &m), IC_OK, "%s", ic_last_error(c));
    cr_assert(!strstr(ic_ptx_module_text(m), "wgmma"));
    ic_ptx_module_destroy(m);
    ic_program_destroy(p);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

Test(ptx, rows_split_across_blocks)
{
    ptx_cases(CASES_SPLIT_ROWS, check_case);
}

/* ---- launch geometry: every mapping and combine path ---- */

Test(ptx, columns_split_across_blocks)
{
    ptx_cases(CASES_SPLIT_COLUMNS, check_case);
}

Test(ptx, geometry_variants_of_row_kernels)
{
    ptx_cases(CASES_GEO_ROW, check_case);
}

Test(ptx, geometry_variants_of_column_kernels)
{
    ptx_cases(CASES_GEO_COLUMN, check_case);
}

Test(ptx, geometry_variants_of_pointwise_kernels)
{
    ptx_cases(CASES_GEO_POINTWISE, check_case);
}

Test(ptx, heuristic_geometry)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = graph_json(c, GRAPH(IN("x", "f32", "[8192,4096]"),
                                      "{'name':'y','op':'softmax','inputs':['x'],'attrs':{'dim':-1}},"
                                      "{'name':'s','op':'sum','inputs':['x'],'attrs':{'dims':[0]}},"
                                      "{'name':'e','op':'exp','inputs':['x']}", "'y','s','e'"));
    ic_program *p = program(c, g, false);
    ic_ptx_module *m = NULL;
    cr_assert_eq(ic_ptx_emit(c, p, NULL, NULL, &m), IC_OK, "%s", ic_last_error(c));
    const ic_ptx_kernel *k0 = ic_ptx_module_kernel(m, 0), *k1 = ic_ptx_module_kernel(m, 1),
                        *k2 = ic_ptx_module_kernel(m, 2);
    cr_assert_eq(k0->mode, IC_PTX_ROW, "softmax rows map to ROW, got %d", k0->mode);
    cr_assert_eq(k0->params.vec, 4, "16-byte accesses for f32 rows, got vec %d", k0->params.vec);
    cr_assert(k0->in_registers, "a 4096-float row fits in the registers of its threads");
    cr_assert_eq(k0->grid * k0->rows_per_block, 8192, "one group per row: %lld x %d",
                 (long long)k0->grid, k0->rows_per_block);
    cr_assert_eq(k1->mode, IC_PTX_COLUMN, "a sum over dim 0 maps to COLUMN, got %d", k1->mode);
    /* 128 tiles of 8 groups x 32 threads would leave 256 threads an SM: 4 blocks share each
     * column (about 1024 threads an SM) */
    cr_assert(k1->params.blocks_per_row == 4 && k1->grid == 512 && k1->params.vec == 4,
              "column split: blocks_per_row %d grid %lld vec %d", k1->params.blocks_per_row,
              (long long)k1->grid, k1->params.vec);
    cr_assert_eq(k2->mode, IC_PTX_POINTWISE, "exp is POINTWISE, got %d", k2->mode);
    cr_assert_eq(k2->grid * k2->block * k2->params.vec, 8192LL * 4096, "grid %lld block %d vec %d",
                 (long long)k2->grid, k2->block, k2->params.vec);
    cr_assert(strstr(ic_ptx_module_text(m), "ld.global.nc.v4.f32"), "no 16-byte loads in the PTX");
    cr_assert(strstr(ic_ptx_module_text(m), "st.global.v4.f32"), "no 16-byte stores in the PTX");
    cr_assert(strstr(ic_ptx_module_text(m), "shfl.sync.bfly"), "no warp shuffles in the PTX");
    ic_ptx_params r;
    cr_assert_eq(ic_ptx_params_resolve(c, ic_program_kernel(p, 0), ic_program_num_buffers(p),
                                       ic_program_buffer(p, 0), NULL, NULL, &r), IC_OK);
    cr_assert(r.block == k0->block && r.threads_per_row == k0->params.threads_per_row,
              "resolve agrees with emit: block %d/%d T %d/%d", r.block, k0->block,
              r.threads_per_row, k0->params.threads_per_row);
    ic_ptx_module_destroy(m);
    ic_program_destroy(p);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

Test(ptx, the_bundled_graphs)
{
    static const char *files[] = { "seed_pattern.json", "bert_ffn.json", "attention.json", "tiny_mlp.json" };
    for (size_t f = 0; f < sizeof files / sizeof *files; f++) {
        ic_ctx *c = ict_ctx();
        char path[1024];
        snprintf(path, sizeof path, "%s/benchmarks/graphs/%s", source_dir(), files[f]);
        ic_graph *g = NULL, *sg = NULL;
        cr_assert_eq(ic_graph_load_json(c, path, &g), IC_OK, "%s", ic_last_error(c));
        int64_t vals[8] = { 1, 1, 1, 1, 1, 1, 1, 1 };
        cr_assert_eq(ic_graph_specialize(g, vals, &sg), IC_OK, "%s", ic_last_error(c));
        for (int fused = 0; fused < 2; fused++) {
            ic_program *p = program(c, sg, fused);
            ic_ptx_module *m = NULL;
            cr_assert_eq(ic_ptx_emit(c, p, NULL, NULL, &m), IC_OK, "%s: %s", files[f], ic_last_error(c));
            char log[4096];
            cr_assert(assemble(ic_ptx_module_text(m), log, sizeof log), "%s: ptxas:\n%s", files[f], log);
            ic_ptx_module_destroy(m);
            ic_program_destroy(p);
        }
        ic_graph_destroy(sg);
        ic_graph_destroy(g);
        ic_ctx_destroy(c);
    }
}

/* bf16 x + b, then gelu, fused: 16-byte loads as 32-bit words (widened by a shift and a
 * mask), the rounded sum widened again by one cvt.rn.bf16x2.f32, 16-byte stores. The
 * emulator runs the portable form of that conversion (no NVVM intrinsics): the GPU tests
 * (Runtime test_cuda, geometry_pointwise) run this one. */
Test(ptx, bf16_bias_gelu_instructions)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = graph_json(c, GRAPH(IN("x", "bf16", "[64,3072]") "," IN("b", "bf16", "[3072]"),
                                      "{'name':'h','op':'add','inputs':['x','b']},"
                                      "{'name':'y','op':'gelu','inputs':['h']}", "'y'"));
    ic_program *p = program(c, g, true);
    cr_assert_eq(ic_program_num_kernels(p), 1, "add and gelu fuse");
    ic_ptx_options o = { .sm = 90 };
    ic_ptx_module *m = NULL;
    cr_assert_eq(ic_ptx_emit(c, p, &o, NULL, &m), IC_OK, "%s", ic_last_error(c));
    const char *text = ic_ptx_module_text(m);
    static const char *const want[] = { "ld.global.nc.v4.u32", "cvt.rn.bf16x2.f32", "st.global.v4" };
    for (int i = 0; i < 3; i++)
        cr_assert(strstr(text, want[i]), "no '%s' in the PTX", want[i]);
    cr_assert(!strstr(text, "cvt.u32.u16"), "a bf16 lane zero-extended from 16 bits");
    char log[4096];
    cr_assert(assemble(text, log, sizeof log), "ptxas:\n%s", log);
    ic_ptx_module_destroy(m);
    ic_program_destroy(p);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* ---- narrow integers (u8 i8 i16) ---- */

/* The PTX of g (one kernel per op) contains every string of want. */
static void ptx_has(const char *json, const char *const *want, int n)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = graph_json(c, json);
    ic_program *p = program(c, g, false);
    ic_ptx_options o = { .sm = 90 };
    ic_ptx_module *m = NULL;
    cr_assert_eq(ic_ptx_emit(c, p, &o, NULL, &m), IC_OK, "%s", ic_last_error(c));
    for (int i = 0; i < n; i++)
        cr_assert(strstr(ic_ptx_module_text(m), want[i]), "no '%s' in the PTX of %s", want[i], json);
    ic_ptx_module_destroy(m);
    ic_program_destroy(p);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* u8/i8/i16 live in memory only: 8- and 16-bit global loads widen them to 32-bit registers
 * (zero-extended for u8, sign-extended for i8/i16), arithmetic wraps to their width as
 * PyTorch's does, and stores truncate. Includes the uint8 example of PyTorch's Inductor
 * debugging tutorial (benchmarks/graphs/inductor_uint8.json). */
Test(ptx, narrow_integers)
{
    /* (NVPTX loads 8/16 bits unsigned and sign-extends i8/i16 with cvt) */
    static const char *const ld[] = { "ld.global.nc.u8", "ld.global.nc.u16", "cvt.s16.s8", "st.global.u8",
                                      "st.global.u16" };
    ptx_has(GRAPH(IN("a", "u8", "[37]") "," IN("b", "i8", "[37]") "," IN("c", "i16", "[37]"),
                  "{'name':'x','op':'add','inputs':['a','b']},{'name':'y','op':'mul','inputs':['x','c']},"
                  "{'name':'z','op':'neg','inputs':['a']}",
                  "'y','z'"), ld, 5);
    static const char *const dts[] = { "u8", "i8", "i16" };
    for (int d = 0; d < 3; d++) {
        char json[1024], name[128];
        snprintf(json, sizeof json, GRAPH(IN("a", "%s", "[5,67]") "," IN("b", "%s", "[67]"),
                 "{'name':'s','op':'add','inputs':['a','b']},{'name':'m','op':'mul','inputs':['s',3]},"
                 "{'name':'n','op':'neg','inputs':['m']},{'name':'r','op':'remainder','inputs':['n',7]},"
                 "{'name':'f','op':'cast','inputs':['n'],'attrs':{'dtype':'f32'}},"
                 "{'name':'h','op':'mul','inputs':['f',0.5]},"
                 "{'name':'t','op':'cast','inputs':['h'],'attrs':{'dtype':'%s'}},"
                 "{'name':'u','op':'sum','inputs':['t'],'attrs':{'dims':[1]}},"
                 "{'name':'v','op':'amax','inputs':['a'],'attrs':{'dims':[0]}}",
                 "'n','r','t','u','v'"), dts[d], dts[d], dts[d]);
        snprintf(name, sizeof name, "narrow %s wraparound chain", dts[d]);
        check_graph_params(name, json, 0, NULL);
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/benchmarks/graphs/inductor_uint8.json", source_dir());
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s", path);
    static char text[4096];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    check_graph_params("inductor uint8 neg maximum cat", text, 0, NULL);
}

/* ---- math: special values and accuracy against libm ---- */

/* Runs y = op(x) over the given values (f32 or f64) on the emulated GPU and compares with
 * libm in double, with the spec's tolerance of the dtype. */
static void math_sweep(const char *op, ic_dtype dt, const double *xs, int64_t n, double (*ref)(double))
{
    ic_ctx *c = ict_ctx();
    char json[512];
    snprintf(json, sizeof json,
             "{'ic_graph':1,'name':'m','inputs':[{'name':'x','dtype':'%s','shape':[%lld]}],"
             "'nodes':[{'name':'y','op':'%s','inputs':['x']}],'outputs':['y']}",
             ic_dtype_name(dt), (long long)n, op);
    ic_graph *g = graph_json(c, json);
    ic_tensor x, got, want;
    ic_tensor_init(&x, dt, 1, &n, NULL);
    ic_tensor_init(&got, dt, 1, &n, NULL);
    ic_tensor_init(&want, IC_F64, 1, &n, NULL);
    cr_assert(!ic_tensor_alloc(c, &x) && !ic_tensor_alloc(c, &got) && !ic_tensor_alloc(c, &want));
    for (int64_t i = 0; i < n; i++) {
        ic_tensor_set(&x, i, xs[i]);
        double w = ref(ic_tensor_get(&x, i)); /* of the value as stored, rounded to dt */
        ((double *)want.data)[i] = dt == IC_F32 ? (double)(float)w : w;
    }
    ic_program *p = program(c, g, false);
    cr_assert_eq(ic_ptx_emulate(c, p, NULL, &x, 1, &got, 1), IC_OK, "%s", ic_last_error(c));
    double rtol, atol;
    ict_tol(dt, &rtol, &atol);
    char msg[1024];
    cr_assert(ict_allclose_tol(&got, &want, rtol, atol, msg, sizeof msg), "%s %s: %s", op,
              ic_dtype_name(dt), msg);
    ic_program_destroy(p);
    ic_tensor_free(c, &x);
    ic_tensor_free(c, &got);
    ic_tensor_free(c, &want);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

static double d_sigmoid(double x) { return 1 / (1 + exp(-x)); }
static double d_rsqrt(double x) { return 1 / sqrt(x); }

static void sweep(const char *op, double lo, double hi, bool geometric, double (*ref)(double))
{
    enum { N = 4099 };
    static double xs[N];
    for (int i = 0; i < N; i++) {
        double t = (double)i / (N - 1);
        xs[i] = geometric ? lo * pow(hi / lo, t) : lo + (hi - lo) * t;
    }
    math_sweep(op, IC_F32, xs, N, ref);
    math_sweep(op, IC_F64, xs, N, ref);
}

Test(ptx, math_accuracy_sweeps)
{
    sweep("exp", -87, 88, false, exp);
    sweep("exp", -0.01, 0.01, false, exp);
    sweep("log", 1e-37, 3e38, true, log);
    sweep("log", 0.5, 2, false, log);
    sweep("sin", -1e4, 1e4, false, sin);
    sweep("cos", -1e4, 1e4, false, cos);
    sweep("sin", -4, 4, false, sin);
    sweep("cos", -4, 4, false, cos);
    sweep("tanh", -10, 10, false, tanh);
    sweep("tanh", -0.7, 0.7, false, tanh);
    sweep("erf", -5, 5, false, erf);
    sweep("erf", -1.2, 1.2, false, erf);
    sweep("sigmoid", -30, 30, false, d_sigmoid);
    sweep("rsqrt", 1e-30, 1e30, true, d_rsqrt);
}

Test(ptx, math_special_values)
{
    static const double xs[] = { INFINITY, -INFINITY, NAN, 0.0, -0.0, 1e-40, -1e-40, 1.0, -1.0,
                                 88.8, -104.0, 1e10, -1e10, 3.4e38, 0.5, -0.5, 1e-8, -1e-8 };
    int n = sizeof xs / sizeof *xs;
    math_sweep("exp", IC_F32, xs, n, exp);
    math_sweep("tanh", IC_F32, xs, n, tanh);
    math_sweep("erf", IC_F32, xs, n, erf);
    math_sweep("sigmoid", IC_F32, xs, n, d_sigmoid);
    math_sweep("exp", IC_F64, xs, n, exp);
    math_sweep("tanh", IC_F64, xs, n, tanh);
    math_sweep("erf", IC_F64, xs, n, erf);
    static const double ls[] = { INFINITY, NAN, 0.0, -0.0, 1e-40, -1.0, 1.0, 3.4e38, 1e-45 };
    math_sweep("log", IC_F32, ls, 9, log);
    math_sweep("log", IC_F64, ls, 9, log);
    math_sweep("rsqrt", IC_F32, ls, 9, d_rsqrt);
    static const double ss[] = { INFINITY, -INFINITY, NAN, 0.0, -0.0, 1e-30, 3.14159265, 1e5, -1e5 };
    math_sweep("sin", IC_F32, ss, 9, sin);
    math_sweep("cos", IC_F32, ss, 9, cos);
    math_sweep("sin", IC_F64, ss, 9, sin);
    math_sweep("cos", IC_F64, ss, 9, cos);
}

Test(ptx, pow_special_cases)
{
    ic_ctx *c = ict_ctx();
    static const double a[] = { 2, -2, -2, 0, 0, 1, -1, 4, NAN, NAN, -8, 1e-3, 10, -0.5 };
    static const double b[] = { 10, 3, 0.5, 2, -1, NAN, 4, -0.5, 0, 1, 1.0 / 3, 2.5, 30, 2 };
    int64_t n = sizeof a / sizeof *a;
    ic_graph *g = graph_json(c, GRAPH(IN("a", "f32", "[14]") "," IN("b", "f32", "[14]"),
                                      "{'name':'y','op':'pow','inputs':['a','b']}", "'y'"));
    ic_tensor in[2], got, want;
    for (int i = 0; i < 2; i++) {
        ic_tensor_init(&in[i], IC_F32, 1, &n, NULL);
        cr_assert(!ic_tensor_alloc(c, &in[i]));
    }
    ic_tensor_init(&got, IC_F32, 1, &n, NULL);
    ic_tensor_init(&want, IC_F64, 1, &n, NULL);
    cr_assert(!ic_tensor_alloc(c, &got) && !ic_tensor_alloc(c, &want));
    for (int64_t i = 0; i < n; i++) {
        ic_tensor_set(&in[0], i, a[i]);
        ic_tensor_set(&in[1], i, b[i]);
        ((double *)want.data)[i] = pow((float)a[i], (float)b[i]);
    }
    ic_program *p = program(c, g, false);
    cr_assert_eq(ic_ptx_emulate(c, p, NULL, in, 2, &got, 1), IC_OK, "%s", ic_last_error(c));
    char msg[1024];
    cr_assert(ict_allclose_tol(&got, &want, 1e-4, 1e-5, msg, sizeof msg), "pow: %s", msg);
    ic_program_destroy(p);
    ic_tensor_free(c, &in[0]);
    ic_tensor_free(c, &in[1]);
    ic_tensor_free(c, &got);
    ic_tensor_free(c, &want);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* ---- hand-built kernels ---- */

static int64_t floordiv(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

Test(ptx, integer_floor_division_and_modulo)
{
    ic_ctx *c = ict_ctx();
    enum { N = 64 };
    int64_t a[N], b[N], q[N], r[N];
    for (int i = 0; i < N; i++) {
        a[i] = (i * 37) % 101 - 50;
        b[i] = (i % 2 ? 1 : -1) * (1 + i % 7);
    }
    kb_t *kb = kb_new("cpu_idiv", 1, (int64_t[]){ N }, 0, NULL);
    kb_stage(kb, IC_STAGE_BODY);
    int v = kb_var(kb, 0);
    int x = kb_load(kb, 0, IC_I64, v), y = kb_load(kb, 1, IC_I64, v);
    kb_store(kb, 2, v, kb_bin(kb, IC_L_IDIV, IC_I64, x, y));
    kb_store(kb, 3, v, kb_bin(kb, IC_L_MOD, IC_I64, x, y));
    int c7 = kb_consti(kb, IC_I64, 8);
    kb_store(kb, 4, v, kb_bin(kb, IC_L_IDIV, IC_I64, x, c7)); /* power of two: shifts */
    kb_store(kb, 5, v, kb_bin(kb, IC_L_MOD, IC_I64, x, c7));
    ic_buffer bufs[6];
    for (int i = 0; i < 6; i++)
        bufs[i] = kb_buf(i < 2 ? IC_BUF_ARG : IC_BUF_OUTPUT, IC_I64, N, i);
    int64_t q8[N], r8[N];
    void *mem[6] = { a, b, q, r, q8, r8 };
    cr_assert_eq(ic_ptx_emulate_kernels(c, 1, &kb->k, 6, bufs, NULL, mem), IC_OK, "%s", ic_last_error(c));
    for (int i = 0; i < N; i++) {
        int64_t wq = floordiv(a[i], b[i]), wr = a[i] - wq * b[i];
        cr_assert(q[i] == wq && r[i] == wr, "%lld // %lld: got %lld rem %lld, want %lld rem %lld",
                  (long long)a[i], (long long)b[i], (long long)q[i], (long long)r[i], (long long)wq, (long long)wr);
        int64_t w8 = floordiv(a[i], 8);
        cr_assert(q8[i] == w8 && r8[i] == a[i] - w8 * 8, "%lld // 8: got %lld rem %lld", (long long)a[i],
                  (long long)q8[i], (long long)r8[i]);
    }
    ic_ptx_module *m = NULL;
    cr_assert_eq(ic_ptx_emit_kernels(c, 1, &kb->k, 6, bufs, NULL, NULL, &m), IC_OK, "%s", ic_last_error(c));
    cr_assert_str_eq(ic_ptx_module_kernel(m, 0)->name, "gpu_idiv");
    char log[4096];
    cr_assert(assemble(ic_ptx_module_text(m), log, sizeof log), "ptxas:\n%s", log);
    ic_ptx_module_destroy(m);
    free(kb);
    ic_ctx_destroy(c);
}

Test(ptx, kernel_names)
{
    char buf[64];
    ic_ptx_kernel_name("cpu_fused_add_mul_relu_3", buf, sizeof buf);
    cr_assert_str_eq(buf, "gpu_fused_add_mul_relu_3");
    ic_ptx_kernel_name("odd name-1.x", buf, sizeof buf);
    cr_assert_str_eq(buf, "gpu_odd_name_1_x");
    ic_ptx_kernel_name("cpu_abcdefghijklmnopqrstuvwxyz", buf, 10);
    cr_assert_str_eq(buf, "gpu_abcde");
    /* two kernels of one name get distinct entries */
    ic_ctx *c = ict_ctx();
    kb_t *k1 = kb_new("cpu_same", 1, (int64_t[]){ 4 }, 0, NULL), *k2 = kb_new("cpu_same", 1, (int64_t[]){ 4 }, 0, NULL);
    kb_t *ks[2] = { k1, k2 };
    for (int i = 0; i < 2; i++) {
        kb_stage(ks[i], IC_STAGE_BODY);
        int v = kb_var(ks[i], 0);
        kb_store(ks[i], 1, v, kb_load(ks[i], 0, IC_F32, v));
    }
    ic_kernel kk[2] = { k1->k, k2->k };
    ic_buffer bufs[2] = { kb_buf(IC_BUF_ARG, IC_F32, 4, 0), kb_buf(IC_BUF_OUTPUT, IC_F32, 4, 0) };
    ic_ptx_module *m = NULL;
    cr_assert_eq(ic_ptx_emit_kernels(c, 2, kk, 2, bufs, NULL, NULL, &m), IC_OK, "%s", ic_last_error(c));
    cr_assert_str_neq(ic_ptx_module_kernel(m, 0)->name, ic_ptx_module_kernel(m, 1)->name);
    ic_ptx_module_destroy(m);
    free(k1);
    free(k2);
    ic_ctx_destroy(c);
}

/* ---- errors ---- */

Test(ptx, malformed_kernels_and_bad_params_are_refused)
{
    ic_ctx *c = ict_ctx();
    ic_buffer bufs[2] = { kb_buf(IC_BUF_PARAM, IC_F32, 8, 0), kb_buf(IC_BUF_OUTPUT, IC_F32, 8, 0) };
    ic_ptx_module *m = NULL;

    kb_t *kb = kb_new("cpu_bad", 1, (int64_t[]){ 8 }, 0, NULL);
    kb_stage(kb, IC_STAGE_BODY);
    int v = kb_var(kb, 0);
    int x = kb_load(kb, 0, IC_F32, v);
    kb_store(kb, 1, v, x);
    kb->ins[0][2].a = 7; /* operand from the future */
    ict_assert_error(c, ic_ptx_emit_kernels(c, 1, &kb->k, 2, bufs, NULL, NULL, &m), IC_EINVAL,
                     "cpu_bad", "operand");
    cr_assert_null(m);
    kb->ins[0][2].a = 0;
    kb->ins[0][2].buf = 0; /* store into a param */
    ict_assert_error(c, ic_ptx_emit_kernels(c, 1, &kb->k, 2, bufs, NULL, NULL, &m), IC_EINVAL,
                     "cpu_bad", "param");
    kb->ins[0][2].buf = 5; /* no such buffer */
    ict_assert_error(c, ic_ptx_emit_kernels(c, 1, &kb->k, 2, bufs, NULL, NULL, &m), IC_EINVAL,
                     "cpu_bad", "buffer");
    kb->ins[0][2].buf = 1;
    int a = kb_acc(kb, IC_F32, 0, 1); /* acc of a non-reduce */
    (void)a;
    ict_assert_error(c, ic_ptx_emit_kernels(c, 1, &kb->k, 2, bufs, NULL, NULL, &m), IC_EINVAL,
                     "cpu_bad", "acc");
    kb->st[0].ninstr--;

    ic_ptx_params bad[] = { { .vec = 3 }, { .block = 48 }, { .block = 2048 }, { .ept = 99 },
                            { .mode = IC_PTX_COLUMN }, { .mode = 7 } };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        ict_assert_error(c, ic_ptx_emit_kernels(c, 1, &kb->k, 2, bufs, NULL, &bad[i], &m), IC_EINVAL,
                         "cpu_bad", "params");
    cr_assert_eq(ic_ptx_emit_kernels(c, 1, &kb->k, 2, bufs, NULL, NULL, &m), IC_OK, "%s", ic_last_error(c));
    ic_ptx_module_destroy(m);

    kb_t *rk = kb_new("cpu_rows", 1, (int64_t[]){ 4 }, 1, (int64_t[]){ 64 });
    kb_stage(rk, IC_STAGE_REDUCE);
    int i0 = kb_var(rk, 0), i1 = kb_var(rk, 1);
    int off = kb_off2(rk, i0, 64, i1);
    int ld = kb_load(rk, 0, IC_F32, off);
    kb_reduce(rk, IC_RED_SUM, IC_F32, ld, -1);
    ic_buffer rb[2] = { kb_buf(IC_BUF_ARG, IC_F32, 256, 0), kb_buf(IC_BUF_OUTPUT, IC_F32, 4, 0) };
    ic_ptx_params t3 = { .mode = IC_PTX_ROW, .threads_per_row = 3 };
    ict_assert_error(c, ic_ptx_emit_kernels(c, 1, &rk->k, 2, rb, NULL, &t3, &m), IC_EINVAL, "cpu_rows", "threads_per_row");
    ic_ptx_params t64 = { .mode = IC_PTX_ROW, .threads_per_row = 64, .block = 32 };
    ict_assert_error(c, ic_ptx_emit_kernels(c, 1, &rk->k, 2, rb, NULL, &t64, &m), IC_EINVAL, "cpu_rows", "block");
    ict_assert_error(c, ic_ptx_emulate_kernels(c, 1, &rk->k, 2, rb, &t3, (void *[]){ NULL, NULL }), IC_EINVAL,
                     "cpu_rows");
    free(rk);
    free(kb);
    ic_ctx_destroy(c);
}
