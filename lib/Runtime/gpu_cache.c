/* gpu_cache.c - compiled GPU code in the persistent cache (namespace IC__CACHE_GPU_CODE): one
 * entry per kernel, holding what the runtime needs to run it without emitting PTX or running
 * the driver's JIT: its launch data (ic_ptx_kernel), the PTX module of its code and that
 * module's cubin for this device and driver.
 *
 * Key: ic__kernel_key (the kernel's loop IR, its buffers, with freezing a hash of the params
 * it reads) plus everything else its code depends on: the PTX options, the device (name,
 * compute capability, multiprocessors, driver version: a cubin is never used on another),
 * IC_ICONV, the kernel's PTX name and requested params; and for a kernel of an implicit-GEMM
 * conv pair (lib/PTX/iconv.c: the GEMM reads x through its partner copy's index math, the
 * copy is not launched when the GEMM takes that path) a hash of the whole program and of all
 * requested params, as its code depends on other kernels.
 *
 * Use (cuda_run.c): ic__gcode_lookup before emission; when every kernel hit, the module is
 * made from the entries (ic__gcode_module) and the cubins loaded; otherwise PTX is emitted for
 * all kernels and ic__gcode_match keeps the cubins of the kernels whose PTX came out the same
 * as stored. After the load, ic__gcode_store writes the entries that were missing or whose
 * cubin was made anew. A saved compiled model (cuda_artifact.c) holds the same entries
 * (ic__gcode_entry) and loads them with ic__gcode_from_entries. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cache-impl.h"
#include "cuda-impl.h"
#include "ic/fuse.h"
#include "key-impl.h"
#include "llvmgen-impl.h" /* ic__program_arrays */
#include "pgemm-impl.h"   /* ic__iconv_find */
#include "tune_cuda-impl.h" /* ic__ptx_params_format */

/* A new field in either struct changes what code is made: it must enter the key below (and,
 * for the params, the entry), then these sizes move with it. */
_Static_assert(sizeof(ic_ptx_params) == 15 * sizeof(int), "ic_ptx_params changed: update gpu_cache.c");
_Static_assert(sizeof(ic_ptx_options) == 4 * sizeof(int) + 2 * sizeof(bool) + 2 + sizeof(int),
               "ic_ptx_options changed: update opts_text in gpu_cache.c");

/* The entry's own layout version: an entry of another layout is a miss (and is rewritten). */
static const char entry_magic[8] = "icgpu01";

/* ---- the key ---- */

/* Params as key text: the tuner's records use the same text (ic__ptx_params_format). */
static void params_text(FILE *f, const ic_ptx_params *p)
{
    char buf[IC__PTX_PARAMS_TEXT];
    ic__ptx_params_format(p, buf, sizeof buf);
    fputs(buf, f);
}

/* What every kernel's code depends on besides itself: device, driver, options, switches. */
static void common_text(FILE *f, ic_ctx *c, const ic_cuda *d, const ic_ptx_options *po)
{
    fprintf(f, "gpu code\ndevice '%s' sm %d sms %d driver %d\n", d->name, d->sm, d->nsms, d->driver_version);
    fprintf(f, "ptx sm=%d ptx_version=%d opt=%d num_sms=%d tf32=%d wgmma=%d iconv=%d\n", po->sm, po->ptx_version,
            po->opt_level, po->num_sms, (int)po->allow_tf32, po->wgmma, (int)!c->sw.no_iconv);
}

/* in_pair[k]: kernel k is the copy or the GEMM of an implicit-GEMM conv pair. */
static ic_status iconv_kernels(ic_ctx *c, const ic_program *p, bool *in_pair)
{
    int nk = ic_program_num_kernels(p);
    if (nk < 2 || c->sw.no_iconv)
        return IC_OK;
    ic_kernel *ks = NULL;
    ic_buffer *bs = NULL;
    ic__iconv *cv = ic__calloc(c, (size_t)nk, sizeof *cv);
    ic_status s = cv ? ic__program_arrays(c, p, "gpu cache", &ks, &bs) : ic__error(c, IC_ENOMEM, "cuda: out of memory");
    int n = s ? 0 : ic__iconv_find(nk, ks, ic_program_num_buffers(p), bs, cv);
    for (int i = 0; i < n; i++)
        in_pair[cv[i].producer] = in_pair[cv[i].gemm] = true;
    ic__free(c, ks);
    ic__free(c, bs);
    ic__free(c, cv);
    return s;
}

/* The whole program and every requested param, as a hash: the context of a conv pair. */
static uint64_t program_hash(const ic_program *p, const ic_ptx_params *params)
{
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    if (!f)
        return 0;
    ic_program_print(f, p);
    for (int k = 0; params && k < ic_program_num_kernels(p); k++)
        params_text(f, &params[k]), fputc('\n', f);
    uint64_t h = fclose(f) == 0 ? ic__hash_data(IC__HASH_SEED, text, n) : 0;
    free(text);
    return h;
}

/* Kernel k's key (malloc'd), or NULL when out of memory. */
static char *kernel_key(const ic_program *p, int k, bool freezing, const char *common,
                        const ic_ptx_params *params, bool pair, uint64_t ctx_hash)
{
    char *extra = NULL, name[256];
    size_t n = 0;
    FILE *f = open_memstream(&extra, &n);
    if (!f)
        return NULL;
    ic_kernel_format_name(name, sizeof name, "gpu_", p, ic_program_kernel(p, k), k);
    fprintf(f, "%sname %s\nparams ", common, name);
    if (params)
        params_text(f, &params[k]);
    else
        fputs("heuristic", f);
    if (pair)
        fprintf(f, "\nconv pair in program %016llx", (unsigned long long)ctx_hash);
    if (fclose(f) != 0) {
        free(extra);
        return NULL;
    }
    char *key = ic__kernel_key(p, k, freezing, extra);
    free(extra);
    return key;
}

static ic_status make_keys(ic_ctx *c, ic__gcode *g, const ic_program *p, bool freezing, const ic_cuda *d,
                           const ic_ptx_options *po, const ic_ptx_params *params)
{
    char *common = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&common, &n);
    if (f)
        common_text(f, c, d, po);
    if (!f || fclose(f) != 0) {
        free(common);
        return ic__error(c, IC_ENOMEM, "cuda: out of memory");
    }
    bool *pair = ic__calloc(c, (size_t)g->nk + 1, sizeof *pair);
    ic_status s = pair ? iconv_kernels(c, p, pair) : ic__error(c, IC_ENOMEM, "cuda: out of memory");
    uint64_t h = 0;
    for (int k = 0; !s && k < g->nk; k++)
        h = h ? h : pair[k] ? program_hash(p, params) : 0;
    for (int k = 0; !s && k < g->nk; k++)
        if (!(g->key[k] = kernel_key(p, k, freezing, common, params, pair[k], h)))
            s = ic__error(c, IC_ENOMEM, "cuda: out of memory");
    ic__free(c, pair);
    free(common);
    return s;
}

/* ---- entries: magic, launch data as i64s, name, entry, PTX, cubin ---- */

enum { NLAUNCH = 7 + 15 };

static void launch_fields(const ic_ptx_kernel *k, int64_t *v)
{
    const int *pp = (const int *)&k->params; /* 15 ints (the assertion above) */
    v[0] = k->mode, v[1] = k->grid, v[2] = k->block, v[3] = k->smem_bytes, v[4] = k->rows_per_block;
    v[5] = k->in_registers, v[6] = k->dyn_smem_bytes;
    for (int i = 0; i < 15; i++)
        v[7 + i] = pp[i];
}

static bool set_launch(ic_ptx_kernel *k, const int64_t *v)
{
    int *pp = (int *)&k->params;
    for (int i = 0; i < NLAUNCH; i++)
        if (i != 1 && (v[i] < -(1ll << 31) || v[i] >= (1ll << 31)))
            return false;
    k->mode = (ic_ptx_mode)v[0], k->grid = v[1], k->block = (int)v[2], k->smem_bytes = (int)v[3];
    k->rows_per_block = (int)v[4], k->in_registers = v[5] != 0, k->dyn_smem_bytes = (int)v[6];
    for (int i = 0; i < 15; i++)
        pp[i] = (int)v[7 + i];
    return v[0] >= 0 && v[0] <= IC_PTX_ATTENTION;
}

static bool put_blob(FILE *f, const void *p, uint64_t n)
{
    return fwrite(&n, 8, 1, f) == 1 && (!n || fwrite(p, 1, (size_t)n, f) == n);
}

/* Kernel i of pm with its code's PTX and cubin, as an entry (malloc'd into *out, *n bytes). */
bool ic__gcode_entry(const ic_ptx_module *pm, int i, const ic__cubin *cb, char **out, size_t *n)
{
    const ic_ptx_kernel *k = ic_ptx_module_kernel(pm, i);
    const char *ptx = ic_ptx_module_kernel_text(pm, i);
    int64_t v[NLAUNCH], na = k->nargs;
    launch_fields(k, v);
    FILE *f = open_memstream(out, n);
    if (!f)
        return false;
    bool ok = fwrite(entry_magic, 1, 8, f) == 8 && fwrite(v, 8, NLAUNCH, f) == NLAUNCH && fwrite(&na, 8, 1, f) == 1;
    for (int a = 0; ok && a < k->nargs; a++) {
        int64_t x = k->args[a];
        ok = fwrite(&x, 8, 1, f) == 1;
    }
    ok = ok && put_blob(f, k->name, strlen(k->name)) && put_blob(f, k->entry, strlen(k->entry)) &&
         put_blob(f, ptx, strlen(ptx)) && put_blob(f, cb->data, cb->data ? cb->size : 0);
    if (fclose(f) != 0 || !ok) {
        free(*out);
        *out = NULL;
        return false;
    }
    return true;
}

typedef struct {
    const char *p, *end;
} reader;

static bool take(reader *r, void *dst, size_t n)
{
    if ((size_t)(r->end - r->p) < n)
        return false;
    memcpy(dst, r->p, n);
    r->p += n;
    return true;
}

/* A blob as a new string (ic__malloc'd) or, for the cubin, bytes. */
static bool take_blob(ic_ctx *c, reader *r, char **out, size_t *len)
{
    uint64_t n;
    if (!take(r, &n, 8) || n > (uint64_t)(r->end - r->p) || !(*out = ic__malloc(c, (size_t)n + 1)))
        return false;
    memcpy(*out, r->p, (size_t)n);
    (*out)[n] = 0;
    r->p += n;
    if (len)
        *len = (size_t)n;
    return true;
}

/* Entry bytes -> kernel i's stored parts; false (nothing kept) when they do not parse or do
 * not fit the program (nbufs buffers). */
static bool parse(ic_ctx *c, ic__gcode *g, int i, const char *b, size_t n, int nbufs)
{
    reader r = { b, b + n };
    char magic[8];
    int64_t v[NLAUNCH], na;
    ic_ptx_kernel *k = &g->kern[i];
    if (!take(&r, magic, 8) || memcmp(magic, entry_magic, 8) || !take(&r, v, sizeof v) || !set_launch(k, v) ||
        !take(&r, &na, 8) || na < 0 || na > nbufs)
        return false;
    int *args = ic__calloc(c, (size_t)na + 1, sizeof *args);
    k->args = args;
    k->nargs = (int)na;
    for (int a = 0; args && a < na; a++) {
        int64_t x;
        if (!take(&r, &x, 8) || x < 0 || x >= nbufs || (a && x <= args[a - 1]))
            return false;
        args[a] = (int)x;
    }
    char *name = NULL, *entry = NULL, *cubin = NULL;
    size_t cn = 0;
    bool ok = args && take_blob(c, &r, &name, NULL) && (k->name = name) && take_blob(c, &r, &entry, NULL) &&
              (k->entry = entry) && take_blob(c, &r, &g->ptx[i], NULL) && take_blob(c, &r, &cubin, &cn) &&
              r.p == r.end;
    if (ok && cn)
        g->cubin[i] = (ic__cubin){ cubin, cn, false };
    else
        ic__free(c, cubin);
    return ok;
}

static void drop(ic_ctx *c, ic__gcode *g, int i)
{
    ic_ptx_kernel *k = &g->kern[i];
    ic__free(c, (void *)k->name);
    ic__free(c, (void *)k->entry);
    ic__free(c, (void *)k->args);
    memset(k, 0, sizeof *k);
    ic__free(c, g->ptx[i]);
    g->ptx[i] = NULL;
    ic__free(c, g->cubin[i].data);
    g->cubin[i] = (ic__cubin){ 0 };
    g->hit[i] = false;
}

/* code of every hit kernel: the kernel named by its entry (at or before it), else a miss. */
static void link_codes(ic_ctx *c, ic__gcode *g)
{
    for (int i = 0; i < g->nk; i++) {
        if (!g->hit[i])
            continue;
        int j = 0;
        while (j <= i && !(g->hit[j] && !strcmp(g->kern[j].name, g->kern[i].entry)))
            j++;
        if (j > i || (j < i && strcmp(g->ptx[j], g->ptx[i])))
            drop(c, g, i);
        else
            g->kern[i].code = j;
    }
}

/* A gcode of nk kernels with nothing hit yet. */
static ic__gcode *gcode_new(ic_ctx *c, int nk)
{
    ic__gcode *g = ic__calloc(c, 1, sizeof *g);
    if (!g)
        return NULL;
    g->nk = nk;
    g->key = ic__calloc(c, (size_t)nk + 1, sizeof *g->key);
    g->kern = ic__calloc(c, (size_t)nk + 1, sizeof *g->kern);
    g->ptx = ic__calloc(c, (size_t)nk + 1, sizeof *g->ptx);
    g->cubin = ic__calloc(c, (size_t)nk + 1, sizeof *g->cubin);
    g->hit = ic__calloc(c, (size_t)nk + 1, sizeof *g->hit);
    if (!g->key || !g->kern || !g->ptx || !g->cubin || !g->hit) {
        ic__gcode_free(c, g);
        return NULL;
    }
    return g;
}

/* Kernel i's entry bytes into g: a hit when they parse and fit nbufs buffers. */
static void take_entry(ic_ctx *c, ic__gcode *g, int i, const void *data, size_t n, int nbufs)
{
    g->hit[i] = parse(c, g, i, data, n, nbufs);
    if (!g->hit[i])
        drop(c, g, i);
}

ic_status ic__gcode_lookup(ic_ctx *c, const ic_program *p, bool freezing, const ic_cuda *d,
                           const ic_ptx_options *po, const ic_ptx_params *params, ic__gcode **out)
{
    *out = NULL;
    int nk = ic_program_num_kernels(p), nb = ic_program_num_buffers(p);
    ic__gcode *g = gcode_new(c, nk);
    ic_status s = !g ? ic__error(c, IC_ENOMEM, "cuda: out of memory") : make_keys(c, g, p, freezing, d, po, params);
    for (int i = 0; i < nk && !s; i++) {
        void *data;
        size_t n;
        if (!ic__cache_get(c, IC__CACHE_GPU_CODE, g->key[i], &data, &n))
            continue;
        take_entry(c, g, i, data, n, nb);
        free(data);
    }
    if (s) {
        ic__gcode_free(c, g);
        return s;
    }
    link_codes(c, g);
    *out = g;
    return IC_OK;
}

ic_status ic__gcode_from_entries(ic_ctx *c, const ic_program *p, int nk, const void *const *data, const size_t *n,
                                 ic__gcode **out)
{
    ic__gcode *g = *out = gcode_new(c, nk);
    if (!g)
        return ic__error(c, IC_ENOMEM, "cuda: out of memory");
    for (int i = 0; i < nk; i++)
        take_entry(c, g, i, data[i], n[i], ic_program_num_buffers(p));
    link_codes(c, g);
    return IC_OK;
}

int ic__gcode_hits(const ic__gcode *g)
{
    int n = 0;
    for (int i = 0; g && i < g->nk; i++)
        n += g->hit[i];
    return n;
}

ic_status ic__gcode_module(ic_ctx *c, ic__gcode *g, ic_ptx_module **pm)
{
    *pm = NULL;
    if (!g || ic__gcode_hits(g) != g->nk)
        return IC_OK;
    ic_status s = ic_ptx_module_from_parts(c, g->nk, g->kern, (const char *const *)g->ptx, pm);
    if (s == IC_EINVAL) { /* entries that do not fit together: compile as if none had hit */
        ic__logf(c, 1, "ic: cache: GPU code entries do not fit together (%s): compiling", ic_last_error(c));
        ic_clear_error(c);
        for (int i = 0; i < g->nk; i++)
            drop(c, g, i);
        return IC_OK;
    }
    return s;
}

/* Launch data a and b are the same (names, entry, geometry, params, args). */
static bool same_kernel(const ic_ptx_kernel *a, const ic_ptx_kernel *b)
{
    int64_t va[NLAUNCH], vb[NLAUNCH];
    launch_fields(a, va);
    launch_fields(b, vb);
    return !strcmp(a->name, b->name) && !strcmp(a->entry, b->entry) && a->code == b->code &&
           !memcmp(va, vb, sizeof va) && a->nargs == b->nargs &&
           !memcmp(a->args, b->args, sizeof *a->args * (size_t)a->nargs);
}

void ic__gcode_match(ic_ctx *c, ic__gcode *g, const ic_ptx_module *pm)
{
    for (int i = 0; g && i < g->nk; i++) {
        const ic_ptx_kernel *k = ic_ptx_module_kernel(pm, i);
        if (g->hit[i] && !(same_kernel(&g->kern[i], k) && !strcmp(g->ptx[i], ic_ptx_module_kernel_text(pm, i))))
            drop(c, g, i);
    }
}

void ic__gcode_store(ic_ctx *c, const ic__gcode *g, const ic_ptx_module *pm)
{
    for (int i = 0; g && i < g->nk; i++) {
        const ic__cubin *cb = &g->cubin[ic_ptx_module_kernel(pm, i)->code];
        if (g->hit[i] && !cb->made)
            continue;
        char *data = NULL;
        size_t n = 0;
        if (ic__gcode_entry(pm, i, cb, &data, &n))
            ic__cache_put(c, IC__CACHE_GPU_CODE, g->key[i], data, n);
        free(data);
    }
}

void ic__gcode_free(ic_ctx *c, ic__gcode *g)
{
    if (!g)
        return;
    for (int i = 0; i < g->nk; i++) {
        if (g->kern && g->ptx && g->cubin && g->hit)
            drop(c, g, i);
        if (g->key)
            free(g->key[i]);
    }
    ic__free(c, g->key);
    ic__free(c, g->kern);
    ic__free(c, g->ptx);
    ic__free(c, g->cubin);
    ic__free(c, g->hit);
    ic__free(c, g);
}
