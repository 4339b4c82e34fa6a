/* cuda_run.c - graphs compiled for a GPU: the pipeline's CUDA backend (PTX, module load,
 * device buffers from the caching allocator, params uploaded once) and, per bound shape, a
 * variant from the shared variant cache. Runs are upload / launch / download; in reduce-overhead mode the
 * launches of a variant are captured once into a CUDA graph and replayed with cuGraphLaunch,
 * which is valid because a variant's buffers never move. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "ic/options.h"
#include "ic/runtime.h"
#include "cuda-impl.h"
#include "cache-impl.h"
#include "pipeline-impl.h"
#include "tune_cuda-impl.h"

typedef struct ic__cvar {
    ic__vbase b;              /* graph, loop IR, LRU state */
    ic_ptx_module *pm;
    ic_cuda_module *cm;
    ic__gcode *gc;            /* the persistent cache's entries, from codegen until stored */
    bool from_store;          /* gc came from a saved compiled model (nothing to store) */
    ic__cubin *cubins;        /* [kernels] the cubin of each kernel's own code module (code ==
                               * i) where one was loaded or made, kept for ic_cuda_compiled_save */
    int nbufs;
    uint64_t *dev;            /* [nbufs] device address of each buffer */
    void **kargs;             /* [nbufs] one launch's parameters: &dev[b] for its args */
    uint64_t arena;
    CUgraph graph;
    CUgraphExec exec;
    ic__cprof prof;           /* IC_PROFILE */
} ic__cvar;

struct ic_cuda_compiled {
    ic_cuda *d;
    ic_ctx *c;
    const ic_graph *g;
    ic_cuda_options o;
    ic_ptx_params *params;    /* copy of o.params */
    ic__cuda_bopts bopts;     /* d and &o, for the backend */
    int nsyms;
    ic__vcache vc;            /* ic__cvar's */
    ic__cvar *cur;
    void *staging;            /* host packing of strided arguments */
    size_t staging_bytes;
    bool profile;             /* IC_PROFILE: events around every kernel, no CUDA graph */
    ic_autotune_stats tune;   /* the autotuner's and the cache's work, all variants */
    ic__artifact *art;        /* ic_cuda_compiled_load: the file's mapping, graph, code (owned) */
};

void ic_cuda_options_init(ic_cuda_options *o)
{
    memset(o, 0, sizeof *o);
}

#define CU(cc, call, what)                                                                 \
    do {                                                                                   \
        CUresult r_ = (call);                                                              \
        if (r_ != CUDA_SUCCESS)                                                            \
            return ic__cuda_error((cc)->d, r_, (what));                                    \
    } while (0)

static void cuda_variant_free(ic_ctx *c, const void *bopts, ic__vbase *b)
{
    ic__cvar *v = (ic__cvar *)b;
    ic_cuda *d = ((const ic__cuda_bopts *)bopts)->d;
    if (v->exec)
        d->cu.GraphExecDestroy(v->exec);
    if (v->graph)
        d->cu.GraphDestroy(v->graph);
    if (v->dev) {
        d->cu.StreamSynchronize(d->stream); /* nothing may still use the buffers */
        for (int i = 0; i < v->nbufs; i++) {
            const ic_buffer *buf = ic_program_buffer(v->b.prog, i);
            if (!(buf->kind == IC_BUF_TEMP && buf->arena_offset >= 0))
                ic_cuda_free(d, v->dev[i]);
        }
        ic_cuda_free(d, v->arena);
    }
    ic__cprof_free(d, &v->prof);
    ic__gcode_free(c, v->gc);
    for (int i = 0; v->cubins && v->pm && i < ic_ptx_module_num_kernels(v->pm); i++)
        ic__free(c, v->cubins[i].data);
    ic__free(c, v->cubins);
    ic_cuda_module_unload(v->cm);
    ic_ptx_module_destroy(v->pm);
    ic__free(c, v->dev);
    ic__free(c, v->kargs);
}

/* Device memory for every buffer; params are uploaded. */
static ic_status var_buffers(ic_ctx *c, ic_cuda *d, ic__cvar *v)
{
    int nb = ic_program_num_buffers(v->b.prog);
    v->nbufs = nb;
    v->dev = ic__calloc(c, (size_t)nb + 1, sizeof *v->dev);
    v->kargs = ic__calloc(c, (size_t)nb + 1, sizeof *v->kargs);
    if (!v->dev || !v->kargs)
        return ic__error(c, IC_ENOMEM, "cuda: out of memory");
    int64_t arena = ic_program_arena_size(v->b.prog);
    ic_status s;
    if (arena > 0 && (s = ic_cuda_alloc(d, (size_t)arena, &v->arena)))
        return s;
    for (int i = 0; i < nb; i++) {
        const ic_buffer *b = ic_program_buffer(v->b.prog, i);
        size_t bytes = (size_t)b->numel * ic_dtype_size(b->dtype);
        if (b->kind == IC_BUF_TEMP && b->arena_offset >= 0) {
            v->dev[i] = v->arena + (uint64_t)b->arena_offset;
            continue;
        }
        if ((s = ic_cuda_alloc(d, bytes ? bytes : 1, &v->dev[i])))
            return s;
        CUresult r = b->kind == IC_BUF_PARAM && bytes ? d->cu.MemcpyHtoDAsync(v->dev[i], b->data, bytes, d->stream)
                                                      : CUDA_SUCCESS;
        if (r != CUDA_SUCCESS)
            return ic__cuda_error(d, r, "uploading a param");
    }
    return IC_OK;
}

/* PTX options for the device (none: the defaults, sm_90) and the cuda options. */
static void ptx_options(const ic__cuda_bopts *bo, bool keep_ir, ic_ptx_options *po)
{
    ic_ptx_options_init(po);
    if (bo->d) {
        po->sm = bo->d->sm;
        po->num_sms = bo->d->nsms;
    }
    if (bo->o) {
        po->opt_level = bo->o->ptx_opt_level;
        po->allow_tf32 = bo->o->allow_tf32;
        po->wgmma = bo->o->wgmma;
    }
    po->keep_ir = keep_ir;
}

/* The autotuner's params for prog when the options select some kind of kernel (*tuned NULL:
 * every kernel keeps params). Only compiles that load onto a device tune: not dumps. */
static ic_status tune_params(ic__pipe *P, const ic__cuda_bopts *bo, const ic_program *prog,
                             const ic_ptx_options *po, const ic_ptx_params *params, ic_ptx_params **tuned)
{
    *tuned = NULL;
    if (!bo->o || !bo->o->autotune || P->stop_after >= 0)
        return IC_OK;
    return ic__cuda_tune(P, bo->d, prog, po, params, bo->o, tuned);
}

/* v->pm for po and params: made from the persistent cache's entries when every kernel has
 * one (no emission, and cuda_load loads their cubins: no JIT), else emitted, keeping the
 * cached cubins of kernels whose PTX came out as stored. Only when compiling for a device
 * (a cubin is for one device and driver) with the cache on, and not when the NVPTX IR is
 * wanted (entries hold no IR). */
static ic_status cached_or_emit(ic__pipe *P, ic__cvar *v, const ic_ptx_options *po, const ic_ptx_params *params)
{
    const ic__cuda_bopts *bo = P->bopts;
    ic_status s = IC_OK;
    double t0 = ic__now_ms();
    if (bo->d && P->tune && ic__cache_on(P->c, bo->o ? bo->o->cache : 0))
        s = ic__gcode_lookup(P->c, v->b.prog, P->freezing, bo->d, po, params, &v->gc);
    if (!s && v->gc && !po->keep_ir)
        s = ic__gcode_module(P->c, v->gc, &v->pm);
    double t1 = ic__now_ms();
    if (!s && !v->pm && !(s = ic_ptx_emit(P->c, v->b.prog, po, params, &v->pm)))
        ic__gcode_match(P->c, v->gc, v->pm);
    if (!s && v->gc) {
        int hits = ic__gcode_hits(v->gc);
        P->tune->code_hits += hits;
        P->tune->code_misses += v->gc->nk - hits;
        ic__logf(P->c, 1, "ic: cache: GPU code of %d of %d kernels found in %.2f ms%s", hits, v->gc->nk, t1 - t0,
                 hits == v->gc->nk && !po->keep_ir ? " (no PTX emitted)" : "");
    }
    return s;
}

/* v->pm from a saved compiled model's entries for v's symbol values (*found), as a cache hit
 * for every kernel: no emission, and cuda_load loads the saved cubins. The file was checked
 * (same ic build, checksums), so code that does not fit the lowered graph is an error. */
static ic_status from_store(ic__pipe *P, ic__cvar *v, bool *found)
{
    int nk = 0;
    const void *const *entry;
    const size_t *n;
    *found = ic__store_gpu_variant(P->store, v->b.vals, ic_graph_num_symbols(P->g), &nk, &entry, &n);
    if (!*found)
        return IC_OK;
    if (nk != ic_program_num_kernels(v->b.prog))
        return ic__error(P->c, IC_EFORMAT, "%s: its graph lowers to %d kernels here but the file has code for %d",
                         ic_graph_source(P->g), ic_program_num_kernels(v->b.prog), nk);
    v->from_store = true;
    ic_status s = ic__gcode_from_entries(P->c, v->b.prog, nk, entry, n, &v->gc);
    if (!s && ic__gcode_hits(v->gc) == nk)
        s = ic__gcode_module(P->c, v->gc, &v->pm); /* entries that do not fit: v->pm NULL */
    if (s)
        return s;
    if (!v->pm)
        return ic__error(P->c, IC_EFORMAT, "%s: the saved code of %d kernels does not fit the graph's kernels",
                         ic_graph_source(P->g), nk);
    ic__pipe_emit_text(P, IC_PIPE_PTX, ic_ptx_module_text(v->pm));
    return IC_OK;
}

/* requires: v->b.prog. makes: v->pm, one PTX module [stages llvm-opt (NVPTX IR), ptx]. */
static ic_status cuda_codegen(ic__pipe *P, ic__vbase *b)
{
    ic__cvar *v = (ic__cvar *)b;
    const ic__cuda_bopts *bo = P->bopts;
    bool saved = false;
    ic_status s0 = P->store ? from_store(P, v, &saved) : IC_OK;
    if (s0 || saved)
        return s0;
    const ic_ptx_params *params = bo->o && bo->o->params ? bo->o->params : NULL;
    int nk = ic_program_num_kernels(v->b.prog);
    if (params && bo->o->nparams != nk)
        return ic__error(P->c, IC_EINVAL, "cuda: %d launch params given for %d kernels of graph '%s'",
                         bo->o->nparams, nk, ic_graph_name(P->g));
    ic_ptx_options po;
    ptx_options(bo, ic__pipe_wants(P, IC_PIPE_LLVM_OPT), &po);
    ic_ptx_params *tuned = NULL;
    ic_status s = tune_params(P, bo, v->b.prog, &po, params, &tuned);
    if (!s)
        s = cached_or_emit(P, v, &po, tuned ? tuned : params);
    ic__free(P->c, tuned);
    if (s)
        return s;
    if (po.keep_ir)
        ic__pipe_emit_text(P, IC_PIPE_LLVM_OPT, ic_ptx_module_llvm_ir(v->pm));
    ic__pipe_emit_text(P, IC_PIPE_PTX, ic_ptx_module_text(v->pm));
    return IC_OK;
}

/* The modules of the kernels that have their own code (texts[m]) loaded, with the persistent
 * cache's cubins where it has them; the cubins made meanwhile are stored with the kernels'
 * entries. part[i]: kernel i's module. */
static ic_status load_modules(ic__pipe *P, ic__cvar *v, int n, const char **texts, const int *part)
{
    ic_cuda *d = ((const ic__cuda_bopts *)P->bopts)->d;
    ic__gcode *g = v->gc;
    int nk = ic_ptx_module_num_kernels(v->pm);
    ic__cubin *mc = g ? ic__calloc(P->c, (size_t)n, sizeof *mc) : NULL;
    v->cubins = ic__calloc(P->c, (size_t)nk, sizeof *v->cubins);
    if ((g && !mc) || !v->cubins) {
        ic__free(P->c, mc);
        return ic__error(P->c, IC_ENOMEM, "cuda: out of memory");
    }
    for (int i = 0; mc && i < nk; i++)
        if (ic_ptx_module_kernel(v->pm, i)->code == i)
            mc[part[i]] = g->cubin[i], g->cubin[i] = (ic__cubin){ 0 };
    ic_status s = ic__cuda_load_code(d, n, texts, mc, &v->cm);
    for (int i = 0; mc && i < nk; i++) /* the cubins go back to their kernels, to be stored */
        if (ic_ptx_module_kernel(v->pm, i)->code == i)
            g->cubin[i] = mc[part[i]];
    ic__free(P->c, mc);
    if (!s && !v->from_store)
        ic__gcode_store(P->c, g, v->pm);
    for (int i = 0; g && i < nk; i++) /* kept for ic_cuda_compiled_save */
        v->cubins[i] = g->cubin[i], g->cubin[i] = (ic__cubin){ 0 };
    ic__gcode_free(P->c, g);
    v->gc = NULL;
    return s;
}

/* The kernels' modules loaded, in parallel: one per kernel that has its own code (a kernel
 * of an earlier one's code launches that one's entry), each kernel's entry looked up in its
 * code's module; then the device buffers. */
static ic_status cuda_load(ic__pipe *P, ic__vbase *b)
{
    ic__cvar *v = (ic__cvar *)b;
    ic_cuda *d = ((const ic__cuda_bopts *)P->bopts)->d;
    if (!d)
        return ic__error(P->c, IC_EINVAL, "cuda: no device to load graph '%s' on", ic_graph_name(P->g));
    int nk = ic_ptx_module_num_kernels(v->pm), n = 0;
    if (!nk)
        return var_buffers(P->c, d, v);
    const char **texts = ic__calloc(P->c, (size_t)nk, sizeof *texts);
    int *part = ic__calloc(P->c, (size_t)nk, sizeof *part); /* [kernel] its code's module */
    if (!texts || !part) {
        ic__free(P->c, texts);
        ic__free(P->c, part);
        return ic__error(P->c, IC_ENOMEM, "cuda: out of memory");
    }
    for (int i = 0; i < nk; i++) {
        int code = ic_ptx_module_kernel(v->pm, i)->code;
        if (code == i)
            texts[part[i] = n++] = ic_ptx_module_kernel_text(v->pm, i);
        else
            part[i] = part[code];
    }
    ic_status s = load_modules(P, v, n, texts, part);
    for (int i = 0; i < nk && !s; i++) {
        CUfunction f;
        s = ic__cuda_function_in(v->cm, part[i], ic_ptx_module_kernel(v->pm, i)->entry, &f);
    }
    ic__free(P->c, texts);
    ic__free(P->c, part);
    return s ? s : var_buffers(P->c, d, v);
}

const ic__backend ic__backend_cuda = {
    .name = "cuda",
    .prefix = "gpu_",
    .stash_norm_rows = false, /* rows stay in registers; an extra global write costs bandwidth */
    .fused_attention = true,  /* lib/PTX/attn.c */
    .variant_size = sizeof(ic__cvar),
    .codegen = cuda_codegen,
    .load = cuda_load,
    .variant_free = cuda_variant_free,
};

/* Copies o into cc (params and debug_dir owned by cc, first, so that a failed check leaves
 * nothing of the caller's for ic_cuda_compiled_destroy to free) and checks it. */
static ic_status take_options(ic_cuda_compiled *cc, const ic_cuda_options *o)
{
    ic_ctx *c = cc->c;
    if (o)
        cc->o = *o;
    const char *dir = cc->o.debug_dir;
    cc->o.debug_dir = NULL;
    const ic_ptx_params *params = cc->o.params;
    cc->o.params = NULL;
    if (dir && !(cc->o.debug_dir = ic__strdup(c, dir)))
        return ic__error(c, IC_ENOMEM, "cuda: out of memory");
    if (params && cc->o.nparams > 0) {
        if (!(cc->params = ic__calloc(c, (size_t)cc->o.nparams, sizeof *cc->params)))
            return ic__error(c, IC_ENOMEM, "cuda: out of memory");
        memcpy(cc->params, params, sizeof *cc->params * (size_t)cc->o.nparams);
    }
    cc->o.params = cc->params;
    const ic_mode_info *m = ic_mode_get((int)cc->o.mode);
    if (!m)
        return ic__error(c, IC_EINVAL, "cuda: unknown mode %d (ic_cuda_mode: 0 to %d, as %s)",
                         (int)cc->o.mode, ic_mode_count() - 1, ic_mode_names());
    /* A mode is its options: the launch path asks only whether to capture a CUDA graph. */
    if (cc->o.autotune == 0)
        cc->o.autotune = m->autotune;
    cc->o.mode = m->cuda_graphs ? IC_CUDA_REDUCE_OVERHEAD : IC_CUDA_DEFAULT;
    if (cc->o.wgmma != 0 && cc->o.wgmma != -1)
        return ic__error(c, IC_EINVAL, "cuda: wgmma %d (0: when the device is sm_90, -1: never)",
                         cc->o.wgmma);
    if (cc->o.max_variants < -1)
        return ic__error(c, IC_EINVAL, "cuda: max_variants %d (0: 16, -1: no limit, or a count)",
                         cc->o.max_variants);
    return IC_OK;
}

ic_status ic__cuda_compiled_create(ic_cuda *d, const ic_graph *g, const ic_cuda_options *o, ic__artifact *art,
                                   ic_cuda_compiled **out)
{
    *out = NULL;
    ic_ctx *c = d->c;
    ic_status s = ic_graph_verify(g);
    ic_cuda_compiled *cc = s ? NULL : ic__calloc(c, 1, sizeof *cc);
    if (!cc) {
        ic__artifact_free(art);
        return s ? s : ic__error(c, IC_ENOMEM, "cuda: out of memory");
    }
    cc->d = d;
    cc->c = c;
    cc->g = g;
    cc->art = art;
    cc->nsyms = ic_graph_num_symbols(g);
    cc->profile = c->sw.profile;
    s = take_options(cc, o);
    cc->bopts = (ic__cuda_bopts){ d, &cc->o };
    ic__pipe P;
    ic__pipe_init(&P, c, &ic__backend_cuda, &cc->bopts, g);
    P.fusion = P.fusion && !cc->o.no_fusion;
    P.freezing = cc->o.freezing;
    P.tune = &cc->tune;
    P.store = art ? ic__artifact_store(art) : NULL;
    ic__pipe_set_debug(&P, cc->o.debug, cc->o.debug_dir);
    ic__vcache_init(&cc->vc, &P, cc->o.max_variants);
    ic__vbase *v = NULL;
    if (!s && !cc->nsyms)
        s = ic__vcache_get(&cc->vc, NULL, &v);
    for (int i = 0; !s && art && cc->nsyms && i < ic__store_gpu_count(P.store); i++)
        s = ic__vcache_get(&cc->vc, ic__store_gpu_vals(P.store, i), &v);
    if (s) {
        ic_cuda_compiled_destroy(cc);
        return s;
    }
    cc->cur = (ic__cvar *)v;
    *out = cc;
    return IC_OK;
}

ic_status ic_cuda_compile(ic_cuda *d, const ic_graph *g, const ic_cuda_options *o,
                          ic_cuda_compiled **out)
{
    return ic__cuda_compiled_create(d, g, o, NULL, out);
}

void ic_cuda_compiled_destroy(ic_cuda_compiled *cc)
{
    if (!cc)
        return;
    for (int i = 0; i < cc->vc.n && cc->profile; i++) {
        const ic__cvar *v = (const ic__cvar *)cc->vc.v[i];
        ic__cprof_print(&v->prof, ic_graph_name(cc->g), v->pm);
    }
    ic__vcache_free(&cc->vc);
    ic__artifact_free(cc->art); /* after the variants, which read its store */
    ic__free(cc->c, cc->params);
    ic__free(cc->c, (void *)cc->o.debug_dir);
    ic__free(cc->c, cc->staging);
    ic__free(cc->c, cc);
}

/* The variant for the symbols the args fix (compiled on first sight, cached). */
static ic_status select_variant(ic_cuda_compiled *cc, int nargs, const ic_tensor *args)
{
    int64_t vals[64];
    if (cc->nsyms > 64)
        return ic__error(cc->c, IC_EUNSUPPORTED, "cuda: more than 64 symbols");
    for (int i = 0; i < cc->nsyms; i++)
        vals[i] = -1;
    ic_status s = ic_runtime_bind_args(cc->g, nargs, args, vals);
    if (s)
        return s;
    for (int i = 0; i < cc->nsyms; i++)
        if (vals[i] < 0)
            return ic__error(cc->c, IC_EINVAL, "graph '%s': symbol '%s' is not fixed by any argument",
                             ic_graph_name(cc->g), ic_graph_symbol_name(cc->g, i));
    ic__vbase *v;
    if ((s = ic__vcache_get(&cc->vc, vals, &v)))
        return s;
    cc->cur = (ic__cvar *)v;
    return IC_OK;
}

ic_status ic_cuda_upload(ic_cuda_compiled *cc, int nargs, const ic_tensor *args)
{
    int want = ic_graph_num_args(cc->g);
    if (nargs != want || (nargs && !args))
        return ic__error(cc->c, IC_EINVAL, "graph '%s' takes %d arguments, got %d",
                         ic_graph_name(cc->g), want, nargs);
    ic_status s = select_variant(cc, nargs, args);
    if (s || (s = ic__check_indices(cc->g, &cc->cur->b, args)))
        return s;
    ic__cvar *v = cc->cur;
    ic_cuda *d = cc->d;
    for (int b = 0; b < v->nbufs; b++) {
        const ic_buffer *buf = ic_program_buffer(v->b.prog, b);
        if (buf->kind != IC_BUF_ARG)
            continue;
        const ic_tensor *t = &args[buf->index];
        size_t es = ic_dtype_size(t->dtype), bytes = (size_t)buf->numel * es;
        if (!bytes)
            continue;
        const void *src = t->data;
        if (!ic_tensor_is_contiguous(t)) { /* pack into staging memory */
            if (cc->staging_bytes < bytes) {
                void *n = ic__realloc(cc->c, cc->staging, bytes);
                if (!n)
                    return ic__error(cc->c, IC_ENOMEM, "cuda: out of memory for staging");
                cc->staging = n;
                cc->staging_bytes = bytes;
            }
            /* the previous async copy may still read staging: wait for it */
            CU(cc, d->cu.StreamSynchronize(d->stream), "cuStreamSynchronize");
            ic__copy_strided(cc->staging, t);
            src = cc->staging;
        }
        CU(cc, d->cu.MemcpyHtoDAsync(v->dev[b], src, bytes, d->stream), "uploading an argument");
    }
    return IC_OK;
}

static ic_status launch_all(ic_cuda_compiled *cc, ic__cvar *v)
{
    int nk = ic_ptx_module_num_kernels(v->pm);
    ic_status s = cc->profile ? ic__cprof_begin(cc->d, &v->prof, nk) : IC_OK;
    for (int i = 0; i < nk && !s; i++) {
        const ic_ptx_kernel *k = ic_ptx_module_kernel(v->pm, i);
        for (int j = 0; j < k->nargs; j++)  /* the launch copies the values: kargs is reused */
            v->kargs[j] = &v->dev[k->args[j]];
        s = ic_cuda_module_launch_smem(v->cm, k->entry, k->grid, k->block, k->dyn_smem_bytes, v->kargs);
        if (!s && cc->profile)
            s = ic__cprof_mark(cc->d, &v->prof, i + 1);
    }
    if (!s && cc->profile)
        s = ic__cprof_end(cc->d, &v->prof);
    return s;
}

static ic_status capture(ic_cuda_compiled *cc, ic__cvar *v)
{
    ic_cuda *d = cc->d;
    CU(cc, d->cu.StreamBeginCapture(d->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "cuStreamBeginCapture");
    ic_status s = launch_all(cc, v);
    CUgraph graph = NULL;
    CUresult r = d->cu.StreamEndCapture(d->stream, &graph);
    if (s) {
        if (graph)
            d->cu.GraphDestroy(graph);
        return s;
    }
    if (r != CUDA_SUCCESS)
        return ic__cuda_error(d, r, "cuStreamEndCapture");
    r = d->cu.GraphInstantiate(&v->exec, graph, 0);
    if (r != CUDA_SUCCESS) {
        d->cu.GraphDestroy(graph);
        v->exec = NULL;
        return ic__cuda_error(d, r, "cuGraphInstantiate");
    }
    v->graph = graph;
    return IC_OK;
}

ic_status ic_cuda_launch(ic_cuda_compiled *cc)
{
    ic__cvar *v = cc->cur;
    if (!v)
        return ic__error(cc->c, IC_EINVAL, "graph '%s': nothing uploaded yet (its shapes are not bound)",
                         ic_graph_name(cc->g));
    /* profiled runs launch kernel by kernel: events inside a CUDA graph would time the graph */
    if (cc->o.mode != IC_CUDA_REDUCE_OVERHEAD || cc->profile)
        return launch_all(cc, v);
    if (!v->exec) {
        ic_status s = capture(cc, v);
        if (s)
            return s;
    }
    CU(cc, cc->d->cu.GraphLaunch(v->exec, cc->d->stream), "cuGraphLaunch");
    return IC_OK;
}

ic_status ic_cuda_download(ic_cuda_compiled *cc, int nouts, ic_tensor *outs)
{
    ic__cvar *v = cc->cur;
    ic_cuda *d = cc->d;
    if (!v)
        return ic__error(cc->c, IC_EINVAL, "graph '%s': nothing was run", ic_graph_name(cc->g));
    int want = ic_graph_num_outputs(v->b.g);
    if (nouts != want || (nouts && !outs))
        return ic__error(cc->c, IC_EINVAL, "graph '%s' has %d outputs, got %d", ic_graph_name(v->b.g), want, nouts);
    CU(cc, d->cu.StreamSynchronize(d->stream), "running the kernels");
    for (int b = 0; b < v->nbufs; b++) {
        const ic_buffer *buf = ic_program_buffer(v->b.prog, b);
        if (buf->kind != IC_BUF_OUTPUT)
            continue;
        ic_tensor *t = &outs[buf->index];
        ic_node_info ni;
        ic_graph_node(v->b.g, ic_graph_output(v->b.g, buf->index), &ni);
        int64_t shape[IC_MAX_RANK];
        for (int k = 0; k < ni.rank; k++)
            shape[k] = ni.shape[k].coef;
        if (!t->data) {
            ic_tensor_init(t, ni.dtype, ni.rank, shape, NULL);
            ic_status s = ic_tensor_alloc(cc->c, t);
            if (s)
                return s;
        } else {
            bool ok = t->dtype == ni.dtype && t->rank == ni.rank && ic_tensor_is_contiguous(t);
            for (int k = 0; ok && k < ni.rank; k++)
                ok = t->shape[k] == shape[k];
            if (!ok)
                return ic__error(cc->c, IC_EINVAL, "graph '%s': output %d ('%s') must be a contiguous %s "
                                 "tensor of its shape", ic_graph_name(v->b.g), buf->index, ni.name,
                                 ic_dtype_name(ni.dtype));
        }
        size_t bytes = (size_t)buf->numel * ic_dtype_size(buf->dtype);
        if (bytes)
            CU(cc, d->cu.MemcpyDtoHAsync(t->data, v->dev[b], bytes, d->stream), "downloading an output");
    }
    CU(cc, d->cu.StreamSynchronize(d->stream), "downloading the outputs");
    return IC_OK;
}

ic_status ic_cuda_run(ic_cuda_compiled *cc, int nargs, const ic_tensor *args, int nouts,
                      ic_tensor *outs)
{
    ic_status s = ic_cuda_upload(cc, nargs, args);
    if (!s)
        s = ic_cuda_launch(cc);
    if (!s)
        s = ic_cuda_download(cc, nouts, outs);
    return s;
}

ic_status ic_cuda_time(ic_cuda_compiled *cc, int iters, double *ms)
{
    *ms = 0;
    ic_cuda *d = cc->d;
    CUevent e0 = NULL, e1 = NULL;
    ic_status s = ic_cuda_launch(cc); /* warm-up (and capture) */
    CUresult r = CUDA_SUCCESS;
    if (!s && (r = d->cu.EventCreate(&e0, CU_EVENT_DEFAULT)) == CUDA_SUCCESS &&
        (r = d->cu.EventCreate(&e1, CU_EVENT_DEFAULT)) == CUDA_SUCCESS &&
        (r = d->cu.EventRecord(e0, d->stream)) == CUDA_SUCCESS) {
        for (int i = 0; i < iters && !s; i++)
            s = ic_cuda_launch(cc);
        float t = 0;
        if (!s && (r = d->cu.EventRecord(e1, d->stream)) == CUDA_SUCCESS &&
            (r = d->cu.EventSynchronize(e1)) == CUDA_SUCCESS &&
            (r = d->cu.EventElapsedTime(&t, e0, e1)) == CUDA_SUCCESS)
            *ms = iters > 0 ? t / iters : 0;
    }
    if (!s && r != CUDA_SUCCESS)
        s = ic__cuda_error(d, r, "timing with events");
    if (e0) d->cu.EventDestroy(e0);
    if (e1) d->cu.EventDestroy(e1);
    return s;
}

int ic_cuda_compiled_num_kernels(const ic_cuda_compiled *cc)
{
    return cc && cc->cur ? ic_ptx_module_num_kernels(cc->cur->pm) : 0;
}

const ic_ptx_kernel *ic_cuda_compiled_kernel(const ic_cuda_compiled *cc, int i)
{
    return cc && cc->cur ? ic_ptx_module_kernel(cc->cur->pm, i) : NULL;
}

void ic_cuda_compiled_times(const ic_cuda_compiled *cc, double *lower_ms, double *ptx_ms,
                            double *load_ms)
{
    const ic__cvar *v = cc ? cc->cur : NULL;
    if (lower_ms) *lower_ms = v ? v->b.lower_ms : 0;
    if (ptx_ms) *ptx_ms = v ? v->b.codegen_ms : 0;
    if (load_ms) *load_ms = v ? v->b.load_ms : 0;
}

void ic_cuda_compiled_autotune_stats(const ic_cuda_compiled *cc, ic_autotune_stats *out)
{
    *out = cc->tune;
}

const char *ic_cuda_compiled_ptx(const ic_cuda_compiled *cc)
{
    return cc && cc->cur ? ic_ptx_module_text(cc->cur->pm) : NULL;
}

const ic_graph *ic_cuda_compiled_graph(const ic_cuda_compiled *cc)
{
    return cc ? cc->g : NULL;
}

/* ---- what ic_cuda_compiled_save (cuda_artifact.c) reads ---- */

ic_cuda *ic__cuda_compiled_device(const ic_cuda_compiled *cc) { return cc->d; }
const ic_cuda_options *ic__cuda_compiled_options(const ic_cuda_compiled *cc) { return &cc->o; }
int ic__cuda_compiled_num_variants(const ic_cuda_compiled *cc) { return cc->vc.n; }

void ic__cuda_compiled_variant(const ic_cuda_compiled *cc, int i, const int64_t **vals, const ic_ptx_module **pm,
                               ic__cubin **cubins)
{
    const ic__cvar *v = (const ic__cvar *)cc->vc.v[i];
    *vals = v->b.vals;
    *pm = v->pm;
    *cubins = v->cubins;
}
