/* backend_cpu.c - the CPU backend of the pipeline: fused loop IR -> per-kernel codegen
 * parameters -> kernels that are the same code found once -> a module per distinct kernel,
 * optimised and compiled to object code on several threads (pool.c) -> LLJIT links them;
 * then the run plan (signatures, embedding index checks). */
#define _GNU_SOURCE /* asprintf */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cache-impl.h"
#include "cpu-impl.h"
#include "tune-impl.h"

/* Codegen parameters for every kernel: the heuristic, then the options' overrides. */
static ic_codegen_params *kernel_params(ic_ctx *c, const ic_program *p, const ic_codegen_target *t,
                                        const ic_compile_options *o)
{
    int nk = ic_program_num_kernels(p);
    ic_codegen_params *ps = ic__calloc(c, (size_t)nk + 1, sizeof *ps);
    if (!ps)
        return NULL;
    const ic_buffer *b0 = ic_program_num_buffers(p) ? ic_program_buffer(p, 0) : NULL;
    for (int i = 0; i < nk; i++) {
        ic_codegen_params_default(t, ic_program_kernel(p, i), b0, &ps[i]);
        ps[i].threads = o->threads;
        if (o->vector_width)
            ps[i].vector_width = o->vector_width;
        if (o->serial_threshold)
            ps[i].serial_threshold = o->serial_threshold;
        if (o->stream_bytes)
            ps[i].stream_bytes = o->stream_bytes < 0 ? 0 : o->stream_bytes;
        if (o->prefetch_bytes)
            ps[i].prefetch_bytes = o->prefetch_bytes < 0 ? 0 : o->prefetch_bytes;
        ps[i].gemm.prepack = o->freezing; /* freezing packs weights at compile time */
    }
    return ps;
}

static ic_status make_signatures(ic_ctx *c, ic__variant *v)
{
    const ic_graph *g = v->b.g;
    v->nargs = ic_graph_num_args(g);
    v->nouts = ic_graph_num_outputs(g);
    v->argsig = ic__calloc(c, (size_t)v->nargs + 1, sizeof(ic_tensor));
    v->outsig = ic__calloc(c, (size_t)v->nouts + 1, sizeof(ic_tensor));
    if (!v->argsig || !v->outsig)
        return ic__error(c, IC_ENOMEM, "out of memory");
    for (int i = 0; i < v->nargs + v->nouts; i++) {
        bool arg = i < v->nargs;
        ic_node_info ni;
        ic_graph_node(g, arg ? ic_graph_arg(g, i) : ic_graph_output(g, i - v->nargs), &ni);
        int64_t shape[IC_MAX_RANK];
        for (int d = 0; d < ni.rank; d++)
            shape[d] = ni.shape[d].coef; /* specialised: constant */
        ic_tensor_init(arg ? &v->argsig[i] : &v->outsig[i - v->nargs], ni.dtype, ni.rank, shape, NULL);
    }
    return IC_OK;
}

/* ---- kernels that are the same code (dedup) ---- */

/* Kernel b is kernel a with its buffers renamed: the same loops, instructions and parameters,
 * and a one-to-one map between the buffers they touch of equal dtype (the code depends on
 * nothing else of a buffer, whether argument, temporary or output; only frozen weights, packed
 * at compile time, must be the same weight). Then b runs a's code on a buffer table in
 * which a's buffer numbers point at b's buffers (the attention's q, k and v projections, the
 * layers of a model). fwd/bwd: [nbufs] scratch; on success the pairs (a's buffer, b's buffer)
 * are appended to pairs (room for nbufs) and their count returned, else -1. */
static int same_code(const ic_kernel *a, const ic_kernel *b, const ic_codegen_params *pa,
                     const ic_codegen_params *pb, const ic_program *p, int *fwd, int *bwd, int *pairs)
{
    if (a->attn || b->attn || a->nouter != b->nouter || a->ninner != b->ninner || a->nstages != b->nstages ||
        memcmp(a->outer, b->outer, sizeof a->outer) || memcmp(a->inner, b->inner, sizeof a->inner) ||
        memcmp(pa, pb, sizeof *pa))
        return -1;
    int nb = ic_program_num_buffers(p), n = 0;
    for (int i = 0; i < nb; i++)
        fwd[i] = bwd[i] = -1;
    for (int s = 0; s < a->nstages; s++) {
        const ic_stage *sa = &a->stages[s], *sb = &b->stages[s];
        if (sa->kind != sb->kind || sa->ninstr != sb->ninstr)
            return -1;
        for (int i = 0; i < sa->ninstr; i++) {
            const ic_linstr *x = &sa->instr[i], *y = &sb->instr[i];
            if (x->op != y->op || x->type != y->type || x->a != y->a || x->b != y->b || x->c != y->c ||
                x->cmp != y->cmp || x->red != y->red || x->flags != y->flags || x->imm.is_int != y->imm.is_int || x->imm.i != y->imm.i ||
                memcmp(&x->imm.f, &y->imm.f, sizeof x->imm.f))
                return -1;
            if (x->op != IC_L_LOAD && x->op != IC_L_STORE)
                continue;
            if (x->buf < 0 || y->buf < 0 || x->buf >= nb || y->buf >= nb)
                return -1;
            if (fwd[x->buf] < 0 && bwd[y->buf] < 0) {
                const ic_buffer *bx = ic_program_buffer(p, x->buf), *by = ic_program_buffer(p, y->buf);
                bool frozen = pa->gemm.prepack == 1 && (bx->kind == IC_BUF_PARAM || by->kind == IC_BUF_PARAM);
                if (bx->dtype != by->dtype || (frozen && (bx->kind != by->kind || bx->data != by->data)))
                    return -1;
                fwd[x->buf] = y->buf, bwd[y->buf] = x->buf;
                pairs[2 * n] = x->buf, pairs[2 * n + 1] = y->buf;
                n++;
            }
            if (fwd[x->buf] != y->buf || bwd[y->buf] != x->buf)
                return -1;
        }
    }
    return n;
}

/* v->code[k]: the kernel whose code kernel k runs (k itself, or an earlier kernel that is the
 * same code) and v->remap[k] its buffer pairs. */
static ic_status find_same_code(ic_ctx *c, ic__variant *v, const ic_codegen_params *params)
{
    int nk = v->nkernels, nb = ic_program_num_buffers(v->b.prog);
    v->code = ic__calloc(c, (size_t)nk + 1, sizeof *v->code);
    v->remap = ic__calloc(c, (size_t)nk + 1, sizeof *v->remap);
    int *scratch = ic__calloc(c, (size_t)(4 * nb) + 1, sizeof(int));
    if (!v->code || !v->remap || !scratch) {
        ic__free(c, scratch);
        return ic__error(c, IC_ENOMEM, "compile: out of memory");
    }
    ic_status s = IC_OK;
    for (int k = 0; k < nk && !s; k++) {
        v->code[k] = k;
        const ic_kernel *kk = ic_program_kernel(v->b.prog, k);
        for (int j = 0; j < k; j++) {
            if (v->code[j] != j)
                continue;
            int n = same_code(ic_program_kernel(v->b.prog, j), kk, &params[j], &params[k], v->b.prog, scratch,
                              scratch + nb, scratch + 2 * nb);
            if (n < 0)
                continue;
            ic__remap *r = &v->remap[k];
            if (!(r->pairs = ic__malloc(c, sizeof(int) * (size_t)(2 * n + 1)))) {
                s = ic__error(c, IC_ENOMEM, "compile: out of memory");
                break;
            }
            memcpy(r->pairs, scratch + 2 * nb, sizeof(int) * (size_t)(2 * n));
            r->n = n;
            v->code[k] = j;
            break;
        }
    }
    ic__free(c, scratch);
    return s;
}

/* ---- codegen and load ---- */

static void cpu_variant_free(ic_ctx *c, const void *bopts, ic__vbase *b)
{
    ic__variant *v = (ic__variant *)b;
    ic__slots_free(c, v);
    ic__jit_destroy(v->jit);
    ic__free(c, v->fns);
    for (int k = 0; v->remap && k < v->nkernels; k++)
        ic__free(c, v->remap[k].pairs);
    ic__free(c, v->remap);
    ic__free(c, v->code);
    ic__free(c, v->argsig);
    ic__free(c, v->outsig);
    if (v->build)
        ic__build_free(v->build);
    ic__free(c, v->build);
    ic__free(c, v->params);
    ic__free(c, v->target_text);
    ic_codegen_target_destroy(v->target);
}

static void print_module(FILE *f, const void *m)
{
    ic_llvm_module_print(f, (ic_llvm_module *)m);
}

/* Stage llvm: the whole program as one module before O3 (what ic_llvmgen makes of it), only
 * when someone wants its text: the compile itself builds a module per distinct kernel. */
static ic_status emit_whole_module(ic__pipe *P, ic__variant *v)
{
    if (!ic__pipe_wants(P, IC_PIPE_LLVM))
        return IC_OK;
    ic_llvm_module *m = NULL;
    ic_status s = ic_llvmgen(P->c, v->b.prog, v->target, v->params, &m);
    if (!s)
        ic__pipe_emit(P, IC_PIPE_LLVM, print_module, m);
    ic_llvm_module_destroy(m);
    return s;
}

/* Stages llvm-opt and asm: the optimised modules' IR and assembly, kernel by kernel. */
static ic_status emit_modules(ic__pipe *P, ic__build *B)
{
    char *ir = B->want_ir ? ic__build_text(B, B->ir) : NULL;
    char *as = B->want_as ? ic__build_text(B, B->as) : NULL;
    ic_status s = (B->want_ir && !ir) || (B->want_as && !as) ? ic__error(P->c, IC_ENOMEM, "compile: out of memory")
                                                            : IC_OK;
    if (!s && ir)
        ic__pipe_emit_text(P, IC_PIPE_LLVM_OPT, ir);
    if (!s && as)
        ic__pipe_emit_text(P, IC_PIPE_ASM, as);
    free(ir);
    free(as);
    return s;
}

/* The target part of the kernels' cache keys (ic__build.target_text). */
static char *target_text(ic_ctx *c, const ic_codegen_target *t)
{
    char *s = NULL;
    if (asprintf(&s, "target %s cpu %s features %s", ic_codegen_target_triple(t), ic_codegen_target_cpu(t),
                 ic_codegen_target_features(t)) < 0)
        return NULL;
    char *r = ic__strdup(c, s);
    free(s);
    return r;
}

/* v->params and v->target_text: those the store saved for v's symbol values (a loaded
 * artifact's variant: its kernels are then looked up there only), else the heuristic's for
 * this host. */
static ic_status variant_params(ic__pipe *P, ic__variant *v, bool *saved)
{
    ic_ctx *c = P->c;
    int nk = 0;
    const char *target = NULL;
    const ic_codegen_params *sp = P->store ? ic__store_variant(P->store, v->b.vals, ic_graph_num_symbols(P->g), &nk,
                                                              &target) : NULL;
    *saved = sp != NULL;
    if (sp && nk != v->nkernels)
        return ic__node_error(P->g, NULL, NULL, IC_EFORMAT, "the saved model has %d kernels for these sizes, "
                              "this build lowers the graph to %d (made by another build of ic?)", nk, v->nkernels);
    if (sp && (v->params = ic__calloc(c, (size_t)nk + 1, sizeof *v->params)))
        memcpy(v->params, sp, sizeof *sp * (size_t)nk);
    else if (!sp)
        v->params = kernel_params(c, v->b.prog, v->target, P->bopts);
    v->target_text = sp ? ic__strdup(c, target) : target_text(c, v->target);
    return v->params && v->target_text ? IC_OK : ic__error(c, IC_ENOMEM, "compile: out of memory");
}

/* requires: v->b.prog. makes: per-kernel params, v->code/remap (kernels that are the same
 * code), and (running to the end) v->build with every distinct kernel's object code, from
 * the saved model or the persistent cache where they hold it. */
static ic_status cpu_codegen(ic__pipe *P, ic__vbase *b)
{
    ic__variant *v = (ic__variant *)b;
    ic_ctx *c = P->c;
    ic_status s = ic_codegen_target_create(c, &v->target);
    if (s)
        return s;
    v->nkernels = ic_program_num_kernels(v->b.prog);
    for (int k = 0; k < v->nkernels; k++) /* the CPU keeps attention expanded (no fused_attention) */
        if (ic_program_kernel(v->b.prog, k)->attn)
            return ic__error(c, IC_EUNSUPPORTED, "compile: kernel '%s': attention kernels run on the GPU only",
                             ic_program_kernel(v->b.prog, k)->name);
    bool saved = false;
    if ((s = variant_params(P, v, &saved)))
        return s;
    if (!(v->build = ic__calloc(c, 1, sizeof *v->build)))
        return ic__error(c, IC_ENOMEM, "compile: out of memory");
    if ((s = emit_whole_module(P, v)) || P->stop_after == IC_PIPE_LLVM)
        return s;
    if ((s = find_same_code(c, v, v->params)) ||
        (!saved && (s = ic__tune_cpu(P, v->b.prog, v->target, v->code, v->params))) || /* saved: tuned already */
        (s = ic__build_init(c, v->b.prog, v->code, v->params, v->build)))
        return s;
    ic__build *B = v->build;
    B->want_ir = ic__pipe_wants(P, IC_PIPE_LLVM_OPT);
    B->want_as = ic__pipe_wants(P, IC_PIPE_ASM);
    B->want_obj = P->stop_after < 0;
    B->target_text = v->target_text;
    B->use_cache = ic__cache_on(c, ((const ic_compile_options *)P->bopts)->cache);
    B->store = P->store;
    B->store_only = saved;
    double t0 = ic__now_ms();
    s = ic__build_run(B);
    if (P->tune)
        P->tune->code_hits += B->hits, P->tune->code_misses += B->misses;
    if (s || (s = emit_modules(P, B)))
        return s;
    int w = snprintf(v->stats, sizeof v->stats, "codegen %.1f", ic__now_ms() - t0);
    if (B->nthreads > 0)
        w += snprintf(v->stats + w, sizeof v->stats - (size_t)w, " on %d thread%s [cpu ms: llvmgen %.1f, optimise "
                      "%.1f, object code %.1f]", B->nthreads, B->nthreads > 1 ? "s" : "", B->cpu_gen, B->cpu_opt,
                      B->cpu_obj);
    if (B->hits + B->misses > 0)
        snprintf(v->stats + w, sizeof v->stats - (size_t)w, " (code %s: %d hit%s, %d miss%s)",
                 B->store ? "from the saved model or cache" : "cache", B->hits, B->hits == 1 ? "" : "s", B->misses,
                 B->misses == 1 ? "" : "es");
    return IC_OK;
}

/* The JIT links the objects; every kernel's function is looked up (at once). */
static ic_status link_objects(ic_ctx *c, ic__variant *v)
{
    ic__build *B = v->build;
    if (!(v->fns = ic__calloc(c, (size_t)v->nkernels + 1, sizeof(ic__kernel_fn))))
        return ic__error(c, IC_ENOMEM, "compile: out of memory");
    ic_status s = ic__jit_create(c, v->target, &v->jit);
    for (int j = 0; j < B->njobs && !s; j++) {
        s = ic__jit_add_object(v->jit, B->obj[j]);
        B->obj[j] = NULL;
    }
    void **job_fn = ic__calloc(c, (size_t)B->njobs + 1, sizeof *job_fn);
    if (!s && !job_fn)
        s = ic__error(c, IC_ENOMEM, "compile: out of memory");
    if (!s)
        s = ic__jit_lookup_all(v->jit, B->njobs, (const char *const *)B->sym, job_fn);
    for (int k = 0; k < v->nkernels && !s; k++)
        v->fns[k] = (ic__kernel_fn)job_fn[B->job_of[v->code[k]]];
    ic__free(c, job_fn);
    return s;
}

/* The JIT owns the code; the run plan: TEMP offsets from the program's arena plan, the
 * signatures ic_run checks. v->build (keys and packed objects), v->params and v->target_text
 * stay, for ic_compiled_save. */
static ic_status cpu_load(ic__pipe *P, ic__vbase *b)
{
    ic__variant *v = (ic__variant *)b;
    ic_ctx *c = P->c;
    double t0 = ic__now_ms();
    ic_status s = link_objects(c, v);
    ic_codegen_target_destroy(v->target);
    v->target = NULL;
    if (s)
        return s;
    v->nbufs = ic_program_num_buffers(v->b.prog);
    v->arena_bytes = ic_program_arena_size(v->b.prog);
    if ((s = make_signatures(c, v)))
        return s;
    int ncode = 0;
    for (int k = 0; k < v->nkernels; k++)
        ncode += v->code[k] == k;
    double link = ic__now_ms() - t0;
    ic__logf(c, 1, "ic: compiled '%s': %d kernels (%d distinct) in %.1f ms (lower+fuse %.1f, %s, link %.1f)",
             ic_graph_name(P->g), v->nkernels, ncode, v->b.lower_ms + v->b.codegen_ms + link, v->b.lower_ms,
             v->stats, link);
    return IC_OK;
}

const ic__backend ic__backend_cpu = {
    .name = "cpu",
    .prefix = "cpu_",
    .stash_norm_rows = true,
    .variant_size = sizeof(ic__variant),
    .codegen = cpu_codegen,
    .load = cpu_load,
    .variant_free = cpu_variant_free,
};
