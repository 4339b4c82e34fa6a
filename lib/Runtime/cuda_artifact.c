/* cuda_artifact.c - saved compiled models for the GPU (ic_cuda_compiled_save / _load): the
 * container of the CPU's (artifact.c, artifact-impl.h) with the GPU's code sections. Loading
 * lowers and fuses the graph again (cheap), then makes each saved variant's PTX module from
 * the file's per-kernel entries, as a persistent cache hit would (gpu_cache.c: same entries),
 * and loads the saved cubins: no PTX emission, no driver JIT. A cubin the driver refuses (the
 * same compute capability on another GPU or driver that cannot take it) is compiled from the
 * PTX beside it, with a log line (cuda.c).
 *
 * Sections: meta, graph, weights, wdata (as on the CPU; meta has "device cuda", "gpu <name>",
 * "sm <compute capability as 90>", "driver <cuDriverGetVersion>" and the options), then
 *     gvariants  u32 count; per variant: u32 nsyms + i64 values, u32 kernels, per kernel
 *                u64 offset in gcode, u64 bytes
 *     gcode      each kernel's entry (ic__gcode_entry: launch data, its code's PTX, and for a
 *                kernel that has its own code, its module's cubin), each at a 64-byte offset */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include "artifact-impl.h"
#include "cuda-impl.h"
#include "pipeline-impl.h" /* ic__now_ms */

static const char *const gpu_sections[] = { "meta", "graph", "weights", "wdata", "gvariants", "gcode" };

/* ======================================================================================
 * Saving
 * ==================================================================================== */

typedef struct {
    const ic_cuda_compiled *cc;
    ic__art_wsec *data;       /* gcode */
    char **entry;             /* [nentries] owned until the file is written */
    int nentries, cap;
} code_arg;

static ic_status fill_meta(ic__art_writer *W, FILE *f, const void *arg)
{
    (void)W;
    const ic_cuda_compiled *cc = arg;
    const ic_cuda *d = ic__cuda_compiled_device(cc);
    const ic_cuda_options *o = ic__cuda_compiled_options(cc);
    ic__art_meta_versions(f);
    fprintf(f, "device cuda\ngpu %s\nsm %d\ndriver %d\ngraph %s\n", d->name, d->sm, d->driver_version,
            ic_graph_name(ic_cuda_compiled_graph(cc)));
    fprintf(f, "option mode %d\noption no_fusion %d\noption ptx_opt_level %d\noption allow_tf32 %d\n"
            "option wgmma %d\noption freezing %d\noption max_variants %d\noption autotune %d\noption cache %d\n",
            (int)o->mode, (int)o->no_fusion, o->ptx_opt_level, (int)o->allow_tf32, o->wgmma, (int)o->freezing,
            o->max_variants, o->autotune, o->cache);
    return IC_OK;
}

/* The cubins of variant i's code modules that were JIT-loaded from PTX (the cache off, which
 * keeps no cubin) made now with the driver's linker, so that loading needs no JIT. Without a
 * linker the file holds only PTX, which loading JIT-compiles. */
static ic_status make_cubins(const ic_cuda_compiled *cc, int i)
{
    ic_cuda *d = ic__cuda_compiled_device(cc);
    const int64_t *vals;
    const ic_ptx_module *pm;
    ic__cubin *cb;
    ic__cuda_compiled_variant(cc, i, &vals, &pm, &cb);
    for (int k = 0; cb && ic__cuda_has_linker(d) && k < ic_ptx_module_num_kernels(pm); k++) {
        if (ic_ptx_module_kernel(pm, k)->code != k || cb[k].data)
            continue;
        const char *ptx = ic_ptx_module_kernel_text(pm, k);
        ic_cuda_module *m = NULL;
        ic_status s = ic__cuda_load_code(d, 1, &ptx, &cb[k], &m);
        ic_cuda_module_unload(m);
        if (s)
            return s;
    }
    return IC_OK;
}

static bool keep_entry(code_arg *a, char *e)
{
    if (a->nentries == a->cap) {
        int cap = a->cap ? 2 * a->cap : 64;
        char **n = realloc(a->entry, sizeof *n * (size_t)cap);
        if (!n)
            return false;
        a->entry = n, a->cap = cap;
    }
    a->entry[a->nentries++] = e;
    return true;
}

/* Variant i's table row, its kernels' entries appended to gcode. */
static ic_status put_variant(ic__art_writer *W, FILE *f, code_arg *a, int i)
{
    const int64_t *vals;
    const ic_ptx_module *pm;
    ic__cubin *cb, none = { 0 };
    ic__cuda_compiled_variant(a->cc, i, &vals, &pm, &cb);
    int nsyms = ic_graph_num_symbols(ic_cuda_compiled_graph(a->cc)), nk = ic_ptx_module_num_kernels(pm);
    ic__art_put32(f, (uint32_t)nsyms);
    for (int s = 0; s < nsyms; s++)
        ic__art_put64(f, (uint64_t)vals[s]);
    ic__art_put32(f, (uint32_t)nk);
    for (int k = 0; k < nk; k++) {
        char *e = NULL;
        size_t n = 0;
        /* a kernel running another's code needs no cubin of its own: that one's is loaded */
        const ic__cubin *own = cb && ic_ptx_module_kernel(pm, k)->code == k ? &cb[k] : &none;
        if (!ic__gcode_entry(pm, k, own, &e, &n) || !keep_entry(a, e)) {
            free(e);
            return ic__error(W->c, IC_ENOMEM, "%s: out of memory", W->path);
        }
        ic__art_put64(f, ic__art_piece_offset(a->data, a->data->n));
        ic__art_put64(f, n);
        if (!ic__art_add_piece(W, a->data, e, n))
            return ic__error(W->c, IC_ENOMEM, "%s: out of memory", W->path);
    }
    return IC_OK;
}

static ic_status fill_variants(ic__art_writer *W, FILE *f, const void *arg)
{
    code_arg *a = (code_arg *)arg;
    int nv = ic__cuda_compiled_num_variants(a->cc);
    ic__art_put32(f, (uint32_t)nv);
    ic_status s = IC_OK;
    for (int i = 0; i < nv && !s; i++)
        if (!(s = make_cubins(a->cc, i)))
            s = put_variant(W, f, a, i);
    return s;
}

ic_status ic_cuda_compiled_save(const ic_cuda_compiled *cc, const char *path, bool with_weights)
{
    if (!cc || !path || !*path)
        return cc ? ic__error(ic__cuda_compiled_device(cc)->c, IC_EINVAL, "ic_cuda_compiled_save: no file name")
                  : IC_EINVAL;
    ic_ctx *c = ic__cuda_compiled_device(cc)->c;
    const ic_graph *g = ic_cuda_compiled_graph(cc);
    if (ic__cuda_compiled_num_variants(cc) == 0)
        return ic__error(c, IC_EINVAL, "%s: '%s' has no compiled code yet (a graph with symbols compiles at its "
                         "first upload)", path, ic_graph_name(g));
    ic__art_writer W = { .c = c, .path = path };
    ic__art_wsec gcode = { .n = 0 };
    code_arg a = { cc, &gcode, NULL, 0, 0 };
    ic_status s;
    if (!(s = ic__art_text_section(&W, "meta", fill_meta, cc)) && !(s = ic__art_graph_sections(&W, g, with_weights)) &&
        !(s = ic__art_text_section(&W, "gvariants", fill_variants, &a))) {
        ic__art_add_data_section(&W, &gcode, "gcode");
        s = ic__art_write(&W);
    }
    ic__free(c, gcode.pc);
    ic__art_writer_free(&W);
    for (int i = 0; i < a.nentries; i++)
        free(a.entry[i]);
    free(a.entry);
    return s;
}

/* ======================================================================================
 * Loading
 * ==================================================================================== */

/* The GPU's part of the meta check: the compute capability must be this device's (PTX and
 * cubins are made for one); another GPU or driver of it is only logged, as the driver may
 * refuse a cubin (then its PTX is compiled). */
static ic_status check_gpu(ic__artifact *A, const void *arg)
{
    const ic_cuda *d = arg;
    char name[256], sm[32], drv[32];
    if (!ic__art_meta_get(A, "gpu", name, sizeof name) || !ic__art_meta_get(A, "sm", sm, sizeof sm) ||
        !ic__art_meta_get(A, "driver", drv, sizeof drv))
        return IC__ART_BAD(A, "damaged: the meta section lacks a field");
    int want = atoi(sm);
    if (want != d->sm)
        return ic__art_error(A, IC_EUNSUPPORTED, "made for compute capability %d.%d (sm_%d, '%s'); this GPU ('%s') "
                             "is %d.%d (sm_%d): save it again on this one", want / 10, want % 10, want, name,
                             d->name, d->sm / 10, d->sm % 10, d->sm);
    if (strcmp(name, d->name) != 0 || atoi(drv) != d->driver_version)
        ic__logf(A->c, 1, "ic: artifact: %s: made on '%s' with driver %s, loaded on '%s' with driver %d: a cubin "
                 "the driver refuses is compiled from its PTX", A->path, name, drv, d->name, d->driver_version);
    return IC_OK;
}

static ic_status read_gvariant(ic__artifact *A, ic__art_rd *r, const ic__art_rd *data, ic__art_gvariant *gv)
{
    ic_ctx *c = A->c;
    uint32_t nsyms, nk;
    if (!ic__art_get32(r, &nsyms) || nsyms != (uint32_t)A->store.nsyms)
        return IC__ART_BAD(A, "damaged gvariants table (symbols)");
    if (!(gv->vals = ic__calloc(c, nsyms + 1, sizeof *gv->vals)))
        return ic__art_error(A, IC_ENOMEM, "out of memory");
    for (uint32_t i = 0; i < nsyms; i++)
        if (!ic__art_get64(r, (uint64_t *)&gv->vals[i]) || gv->vals[i] < 0)
            return IC__ART_BAD(A, "damaged gvariants table (values)");
    if (!ic__art_get32(r, &nk) || nk > 1u << 20)
        return IC__ART_BAD(A, "damaged gvariants table (kernels)");
    gv->nkernels = (int)nk;
    gv->entry = ic__calloc(c, nk + 1, sizeof *gv->entry);
    gv->nentry = ic__calloc(c, nk + 1, sizeof *gv->nentry);
    if (!gv->entry || !gv->nentry)
        return ic__art_error(A, IC_ENOMEM, "out of memory");
    uint64_t size = (uint64_t)(data->end - data->p);
    for (uint32_t k = 0; k < nk; k++) {
        uint64_t off, bytes;
        if (!ic__art_get64(r, &off) || !ic__art_get64(r, &bytes) || off > size || bytes > size - off ||
            off % IC__ART_ALIGN != 0)
            return IC__ART_BAD(A, "damaged gvariants table (kernel %u's entry)", k);
        gv->entry[k] = data->p + off;
        gv->nentry[k] = (size_t)bytes;
    }
    return IC_OK;
}

static ic_status load_gstore(ic__artifact *A)
{
    ic__art_rd r = ic__art_reader(A, "gvariants"), data = ic__art_reader(A, "gcode");
    uint32_t nv;
    A->store.nsyms = ic_graph_num_symbols(A->g);
    if (!ic__art_get32(&r, &nv) || nv == 0 || nv > 1u << 16)
        return IC__ART_BAD(A, "damaged gvariants table");
    if (!(A->store.gvar = ic__calloc(A->c, nv, sizeof *A->store.gvar)))
        return ic__art_error(A, IC_ENOMEM, "out of memory");
    for (uint32_t i = 0; i < nv; i++) {
        A->store.ngvar++;
        ic_status s = read_gvariant(A, &r, &data, &A->store.gvar[i]);
        if (s)
            return s;
    }
    return r.p == r.end || r.end - r.p < IC__ART_ALIGN ? IC_OK : IC__ART_BAD(A, "damaged gvariants table (size)");
}

/* The options the model was compiled with (meta "option" lines). */
static void load_options(const ic__artifact *A, ic_cuda_options *o)
{
    char v[64];
    ic_cuda_options_init(o);
#define OPT(name, type)                                     \
    if (ic__art_meta_get(A, "option " #name, v, sizeof v))  \
        o->name = (type)strtol(v, NULL, 10);
    OPT(mode, ic_cuda_mode)
    OPT(no_fusion, bool)
    OPT(ptx_opt_level, int)
    OPT(allow_tf32, bool)
    OPT(wgmma, int)
    OPT(freezing, bool)
    OPT(max_variants, int)
    OPT(autotune, int)
    OPT(cache, int)
#undef OPT
}

ic_status ic__cuda_artifact_open(ic_cuda *d, const char *path, ic__artifact **out)
{
    ic_status s = ic__art_open(d->c, path, "cuda", "ic_cuda_compiled_load", gpu_sections,
                               (int)(sizeof gpu_sections / sizeof *gpu_sections), check_gpu, d, out);
    return s ? s : load_gstore(*out);
}

ic_status ic_cuda_compiled_load(ic_cuda *d, const char *path, ic_cuda_compiled **out)
{
    if (!d || !out)
        return d ? ic__error(d->c, IC_EINVAL, "ic_cuda_compiled_load: out is NULL") : IC_EINVAL;
    *out = NULL;
    if (!path || !*path)
        return ic__error(d->c, IC_EINVAL, "ic_cuda_compiled_load: no file name");
    ic__artifact *A = NULL;
    double t0 = ic__now_ms();
    ic_status s = ic__cuda_artifact_open(d, path, &A);
    if (s) {
        ic__artifact_free(A);
        return s;
    }
    ic_cuda_options o;
    load_options(A, &o);
    double t1 = ic__now_ms();
    if ((s = ic__cuda_compiled_create(d, A->g, &o, A, out))) /* owns A from here */
        return s;
    double lower = 0, load = 0;
    ic_cuda_compiled_times(*out, &lower, NULL, &load);
    ic__logf(d->c, 1, "ic: artifact: %s loaded in %.2f ms: file checked and graph read %.2f ms, lower+fuse "
             "%.2f ms, modules and buffers %.2f ms", path, ic__now_ms() - t0, t1 - t0, lower, load);
    return IC_OK;
}

/* ---- the store of a loaded file, for the CUDA backend (cuda_run.c) ---- */

bool ic__store_gpu_variant(const ic__store *st, const int64_t *vals, int nsyms, int *nk, const void *const **entry,
                           const size_t **n)
{
    for (int i = 0; i < st->ngvar && nsyms == st->nsyms; i++)
        if (nsyms == 0 || memcmp(st->gvar[i].vals, vals, sizeof *vals * (size_t)nsyms) == 0) {
            *nk = st->gvar[i].nkernels;
            *entry = st->gvar[i].entry;
            *n = st->gvar[i].nentry;
            return true;
        }
    return false;
}

int ic__store_gpu_count(const ic__store *st) { return st->ngvar; }
const int64_t *ic__store_gpu_vals(const ic__store *st, int i) { return st->gvar[i].vals; }
const ic__store *ic__artifact_store(const ic__artifact *A) { return &A->store; }
