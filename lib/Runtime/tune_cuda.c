/* tune_cuda.c - the GPU autotuner (tune_cuda-impl.h).
 *
 * Requires: a fused program and the PTX options it is emitted with. Makes: params per kernel
 * (ic_ptx_params) that ic_ptx_emit takes; never changes what a kernel computes, only how it
 * maps onto the GPU (the winner's outputs are checked against the default's).
 *
 * Algorithm, per tuning unit (a kernel of a selected kind; the GEMM of an im2col copy together
 * with that copy, as the wgmma path may read x directly and skip the copy):
 *   1. key: the unit's loop IR without names and buffer numbers, the device, the options and
 *      the tune flags. Units of one key are tuned once; a tuning record of the key answers it
 *      with no benchmarking.
 *   2. space: Cartesian products of per-field value lists for the kernel's mapping (pruned, or
 *      the full lists under IC_TUNE_EXHAUSTIVE), each candidate resolved by the PTX layer's
 *      own planner (ic_ptx_params_resolve): invalid ones dropped, equal plans merged, the
 *      heuristic's choice first.
 *   3. candidates emitted on the compile threads and loaded by the driver together, then raced
 *      by tune.c's shared machinery (interleaved rounds, medians, early stop, budget, margin,
 *      confirmation race, table) with this file's device timer: buffers of the kernel's sizes
 *      (params with their data, the rest random), an L2 flush before every launch when the data
 *      outgrows the L2 (flushed); under IC_TUNE_COORDESC the current point's neighbours (one
 *      field moved) race it until none is faster by the margin; the winner's outputs must
 *      match the default's.
 *   4. the winner (also when it is the default) recorded in the persistent cache. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "tune_cuda-impl.h"
#include "tune-impl.h"
#include "cache-impl.h"
#include "key-impl.h"
#include "pgemm-impl.h" /* ic__iconv_find (the im2col copies a GEMM may read through) and
                         * ic__pplan_make (a GEMM's M, N, K, to leave out dominated tiles) */

size_t ic__tune_cuda_flush_bytes;

/* ---------------------------------- params as text ---------------------------------- */

static const struct {
    const char *name;
    size_t off;
} pfields[] = {
#define F(x) { #x, offsetof(ic_ptx_params, x) }
    F(block), F(vec), F(ept), F(threads_per_row), F(regs_elems), F(blocks_per_row), F(tile_m), F(tile_n),
    F(tile_k), F(warps_m), F(warps_n), F(stages), F(split_k), F(wgmma),
#undef F
};
#define NPFIELDS ((int)(sizeof pfields / sizeof *pfields))

static int *pfield(ic_ptx_params *p, int i) { return (int *)((char *)p + pfields[i].off); }

void ic__ptx_params_format(const ic_ptx_params *p, char *buf, size_t n)
{
    ic_ptx_params q = *p;
    size_t w = (size_t)snprintf(buf, n, "mode=%d", (int)q.mode);
    for (int i = 0; i < NPFIELDS && w < n; i++)
        w += (size_t)snprintf(buf + w, n - w, " %s=%d", pfields[i].name, *pfield(&q, i));
}

bool ic__ptx_params_parse(const char *text, ic_ptx_params *p)
{
    const char *s = text;
    while (*s) {
        while (*s == ' ' || *s == '\t')
            s++;
        if (!*s || *s == '\n')
            break;
        const char *eq = strchr(s, '=');
        if (!eq)
            return false;
        size_t nl = (size_t)(eq - s);
        char *end;
        long v = strtol(eq + 1, &end, 10);
        if (end == eq + 1 || (*end && *end != ' ' && *end != '\n') || v < -(1L << 30) || v > (1L << 30))
            return false;
        if (nl == 4 && !strncmp(s, "mode", 4)) {
            if (v < 0 || v > IC_PTX_ATTENTION)
                return false;
            p->mode = (ic_ptx_mode)v;
        } else {
            int i = 0;
            while (i < NPFIELDS && !(strlen(pfields[i].name) == nl && !strncmp(s, pfields[i].name, nl)))
                i++;
            if (i == NPFIELDS)
                return false;
            *pfield(p, i) = (int)v;
        }
        s = end;
    }
    return true;
}

void ic__ptx_params_label(const ic_ptx_params *r, char *buf, size_t n)
{
    switch (r->mode) {
    case IC_PTX_GEMM:
        if (r->wgmma > 0)
            snprintf(buf, n, "wgmma %dx%dx%d st%d", r->tile_m, r->tile_n, r->tile_k, r->stages);
        else if (r->warps_m)
            snprintf(buf, n, "mma %dx%dx%d w%dx%d st%d sk%d", r->tile_m, r->tile_n, r->tile_k, r->warps_m,
                     r->warps_n, r->stages, r->split_k);
        else
            snprintf(buf, n, "ffma %dx%dx%d st%d sk%d", r->tile_m, r->tile_n, r->tile_k, r->stages, r->split_k);
        break;
    case IC_PTX_POINTWISE:
        snprintf(buf, n, "block %d vec %d ept %d", r->block, r->vec, r->ept);
        break;
    case IC_PTX_ATTENTION:
        snprintf(buf, n, "attention %dx%d", r->tile_m, r->tile_n);
        break;
    default:
        snprintf(buf, n, "%s T%d S%d block %d vec %d regs %d", r->mode == IC_PTX_ROW ? "row" : "column",
                 r->threads_per_row, r->blocks_per_row, r->block, r->vec, r->regs_elems);
        break;
    }
}

/* ------------------------------------- the space ------------------------------------- */

int ic__tune_cuda_kind(const ic_ptx_params *r, bool conv)
{
    switch (r->mode) {
    case IC_PTX_GEMM: return conv ? IC_TUNE_CONV : IC_TUNE_GEMM;
    case IC_PTX_POINTWISE: return IC_TUNE_POINTWISE;
    case IC_PTX_ROW:
    case IC_PTX_COLUMN: return IC_TUNE_REDUCTION;
    case IC_PTX_ATTENTION: return IC_TUNE_ATTENTION;
    default: return 0;
    }
}

/* One field's values: the pruned list and the full one. 0 means "the heuristic's". */
typedef struct {
    size_t off;
    const int *pruned;
    int npruned;
    const int *full;
    int nfull;
} axis;

#define VALS(...) (const int[]){ __VA_ARGS__ }, (int)(sizeof((const int[]){ __VA_ARGS__ }) / sizeof(int))
#define AXIS(field, pr, fu) { offsetof(ic_ptx_params, field), pr, fu }

/* wgmma: tiles pick_tile considers (wgmma.c), stages up to the shared memory */
static const axis ax_wgmma[] = {
    AXIS(tile_m, VALS(64, 128), VALS(64, 128)),
    AXIS(tile_n, VALS(64, 128, 192, 256), VALS(64, 128, 192, 256)),
    AXIS(stages, VALS(0, 3, 4), VALS(0, 2, 3, 4, 5, 6)),
};
/* mma.sync / FFMA / TF32 (gemm.c): tiles, depth, stages, split-K; warps follow the tile */
/* pruned: the values exhaustive searches picked on the 20 shapes of
 * benchmarks/autotune/gpu_gemm_shapes.py (256 x 32 tiles and 2 stages won convolutions) */
static const axis ax_mma[] = {
    AXIS(tile_m, VALS(0, 32, 64, 128, 256), VALS(0, 32, 64, 128, 256)),
    AXIS(tile_n, VALS(0, 32, 64, 128), VALS(0, 32, 64, 128, 256)),
    AXIS(tile_k, VALS(0, 32), VALS(0, 8, 16, 32, 64)),
    AXIS(stages, VALS(0, 2, 3, 4), VALS(0, 2, 3, 4)),
    AXIS(split_k, VALS(0, 1, 2, 4, 8), VALS(0, 1, 2, 4, 8, 16)),
};
static const axis ax_pointwise[] = {
    AXIS(block, VALS(128, 256, 512, 1024), VALS(64, 128, 256, 512, 1024)),
    AXIS(vec, VALS(0), VALS(0, 1, 2, 4, 8)),
    AXIS(ept, VALS(1, 2, 4), VALS(1, 2, 4, 8, 16)),
};
static const axis ax_row[] = {
    AXIS(threads_per_row, VALS(0, 32, 64, 128, 256, 512), VALS(0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)),
    AXIS(blocks_per_row, VALS(0, 1), VALS(0, 1, 2, 4, 8, 16, 32, 64)),
    AXIS(block, VALS(0), VALS(0, 128, 256, 512, 1024)),
    AXIS(regs_elems, VALS(0, -1), VALS(0, -1, 256)),
    AXIS(vec, VALS(0), VALS(0, 1, 2, 4, 8)),
};
static const axis ax_column[] = {
    AXIS(threads_per_row, VALS(0, 1, 4, 8, 16, 32), VALS(0, 1, 2, 4, 8, 16, 32, 64)),
    AXIS(blocks_per_row, VALS(0, 1, 2, 4, 8), VALS(0, 1, 2, 4, 8, 16, 32)),
    AXIS(block, VALS(0, 128, 256, 512), VALS(0, 64, 128, 256, 512, 1024)),
    AXIS(regs_elems, VALS(0, -1), VALS(0, -1, 256)),
    AXIS(vec, VALS(0), VALS(0, 1, 2, 4, 8)),
};
static const axis ax_attention[] = {
    AXIS(tile_m, VALS(0, 64, 128), VALS(0, 64, 128)),
};

typedef struct {
    ic_ctx *c;
    const ic_kernel *k;
    int nbufs;
    const ic_buffer *bufs;
    const ic_ptx_options *po;
    ic__tcand *v;
    int n, cap;
    const ic__tcand *seen;    /* neighbours: candidates already timed */
    int nseen;
    int64_t dims[4];          /* GEMM: M, N, K, batch (gemm_dims) */
} space;

static bool has_res(const ic__tcand *v, int n, const ic_ptx_params *r)
{
    for (int i = 0; i < n; i++)
        if (!memcmp(&v[i].res, r, sizeof *r))
            return true;
    return false;
}

static int64_t pow2_ceil(int64_t x)
{
    int64_t p = 1;
    while (p < x)
        p *= 2;
    return p;
}

/* GEMM candidates that cannot win, left out of both spaces: a tile past the next power of two
 * of its dim and 32 (the same blocks, more padding); a split-K whose grid passes 2 waves (the tiles
 * already fill the GPU; each split adds a pass over partial tiles) or that leaves a split
 * fewer than 2 k-tiles. */
static bool dominated(const space *S, const ic_ptx_params *r)
{
    if (r->mode != IC_PTX_GEMM || !S->dims[0])
        return false;
    int64_t M = S->dims[0], N = S->dims[1], K = S->dims[2], Bt = S->dims[3];
    if (r->tile_m > 32 && r->tile_m > pow2_ceil(M))
        return true;
    if (r->tile_n > 32 && r->tile_n > pow2_ceil(N))
        return true;
    if (r->split_k <= 1)
        return false;
    int nsms = S->po && S->po->num_sms > 0 ? S->po->num_sms : 132;
    int64_t tiles = (M + r->tile_m - 1) / r->tile_m * ((N + r->tile_n - 1) / r->tile_n) * Bt;
    return tiles * r->split_k > 2 * (int64_t)nsms || (K + r->tile_k - 1) / r->tile_k < 2 * r->split_k;
}

/* M, N, K and the batch of a GEMM kernel (the PTX layer's own analysis), else zeros. */
static void gemm_dims(space *S)
{
    ic__pplan pl;
    memset(S->dims, 0, sizeof S->dims);
    if (ic__pplan_make(S->c, S->k, S->nbufs, S->bufs, S->po, NULL, &pl)) {
        ic_clear_error(S->c);
        return;
    }
    if (pl.gemm) {
        S->dims[0] = pl.gemm->M, S->dims[1] = pl.gemm->N, S->dims[2] = pl.gemm->K, S->dims[3] = pl.gemm->Bt;
    }
    ic__pplan_free(S->c, &pl);
}

/* Resolves in; adds it when valid and new. IC_ENOMEM is the only error. */
static ic_status add_cand(space *S, const ic_ptx_params *in)
{
    ic__tcand t;
    t.in = *in;
    if (ic_ptx_params_resolve(S->c, S->k, S->nbufs, S->bufs, S->po, in, &t.res)) {
        ic_clear_error(S->c);
        return IC_OK;
    }
    if (dominated(S, &t.res) || has_res(S->v, S->n, &t.res) || has_res(S->seen, S->nseen, &t.res))
        return IC_OK;
    if (S->n == S->cap) {
        int cap = S->cap ? S->cap * 2 : 64;
        ic__tcand *nv = ic__realloc(S->c, S->v, sizeof *nv * (size_t)cap);
        if (!nv)
            return ic__error(S->c, IC_ENOMEM, "autotune: out of memory for the search space");
        S->v = nv;
        S->cap = cap;
    }
    S->v[S->n++] = t;
    return IC_OK;
}

/* Every combination of the axes' values over in (recursively, axis i onwards). */
static ic_status product(space *S, const axis *ax, int nax, int i, bool full, ic_ptx_params *in)
{
    if (i == nax)
        return add_cand(S, in);
    const int *vals = full ? ax[i].full : ax[i].pruned;
    int nv = full ? ax[i].nfull : ax[i].npruned;
    int *f = (int *)((char *)in + ax[i].off), keep = *f;
    for (int j = 0; j < nv; j++) {
        *f = vals[j];
        ic_status s = product(S, ax, nax, i + 1, full, in);
        if (s)
            return s;
    }
    *f = keep;
    return IC_OK;
}

/* The axes of a kernel resolved to r (GEMM: two families, wgmma and the rest). */
static int axes_of(const ic_ptx_params *r, const axis **a, int *na)
{
#define SET(i, x) (a[i] = x, na[i] = (int)(sizeof x / sizeof *x))
    switch (r->mode) {
    case IC_PTX_GEMM: SET(0, ax_wgmma); SET(1, ax_mma); return 2;
    case IC_PTX_POINTWISE: SET(0, ax_pointwise); return 1;
    case IC_PTX_ROW: SET(0, ax_row); return 1;
    case IC_PTX_COLUMN: SET(0, ax_column); return 1;
    case IC_PTX_ATTENTION: SET(0, ax_attention); return 1;
    default: return 0;
    }
#undef SET
}

/* The fixed fields of a family: wgmma on or off for GEMMs, the mapping for the others. */
static void family_base(const ic_ptx_params *r, int fam, ic_ptx_params *in)
{
    if (r->mode == IC_PTX_GEMM)
        in->wgmma = fam == 0 ? 1 : -1;
    else if (r->mode != IC_PTX_ATTENTION)
        in->mode = r->mode;
}

/* Whether the target runs warpgroup GEMMs (sm_90 exactly: their sm_90a PTX runs nowhere else;
 * a forced wgmma candidate would only fail to load). */
static bool wgmma_target(const ic_ptx_options *po)
{
    int sm = po && po->sm > 0 ? po->sm : 90;
    return sm == 90 && !(po && po->wgmma < 0);
}

ic_status ic__tune_cuda_space(ic_ctx *c, const ic_kernel *k, int nbufs, const ic_buffer *bufs,
                              const ic_ptx_options *po, const ic_ptx_params *base, bool exhaustive,
                              ic__tcand **out, int *n)
{
    *out = NULL;
    *n = 0;
    space S = { c, k, nbufs, bufs, po, NULL, 0, 0, NULL, 0, { 0 } };
    gemm_dims(&S);
    ic_ptx_params in0;
    memset(&in0, 0, sizeof in0);
    if (base)
        in0 = *base;
    ic__tcand d = { in0, in0 };
    ic_status s = ic_ptx_params_resolve(c, k, nbufs, bufs, po, &in0, &d.res);
    if (s)
        return s;
    if (!(S.v = ic__malloc(c, sizeof *S.v * 64)))
        return ic__error(c, IC_ENOMEM, "autotune: out of memory for the search space");
    S.cap = 64;
    S.v[S.n++] = d;
    const axis *ax[2];
    int na[2], nf = axes_of(&d.res, ax, na);
    for (int f = 0; f < nf && !s; f++) {
        if (d.res.mode == IC_PTX_GEMM && f == 0 && !wgmma_target(po))
            continue;
        ic_ptx_params in = in0;
        family_base(&d.res, f, &in);
        s = product(&S, ax[f], na[f], 0, exhaustive, &in);
    }
    if (s) {
        ic__free(c, S.v);
        return s;
    }
    *out = S.v;
    *n = S.n;
    return IC_OK;
}

/* The index of v in vals, or of the nearest value below it (-1 when none). */
static int nearest_index(const int *vals, int n, int v)
{
    int best = -1;
    for (int i = 0; i < n; i++)
        if (vals[i] != 0 && vals[i] <= v && (best < 0 || vals[i] >= vals[best]))
            best = i;
    return best;
}

ic_status ic__tune_cuda_neighbours(ic_ctx *c, const ic_kernel *k, int nbufs, const ic_buffer *bufs,
                                   const ic_ptx_options *po, const ic_ptx_params *w, const ic__tcand *seen,
                                   int nseen, ic__tcand **out, int *n)
{
    *out = NULL;
    *n = 0;
    space S = { c, k, nbufs, bufs, po, NULL, 0, 0, seen, nseen, { 0 } };
    gemm_dims(&S);
    const axis *ax[2];
    int na[2], nf = axes_of(w, ax, na);
    int fam = w->mode == IC_PTX_GEMM && w->wgmma <= 0 ? 1 : 0;
    if (fam >= nf)
        return IC_OK;
    for (int i = 0; i < na[fam]; i++) {
        const axis *a = &ax[fam][i];
        int cur = *(const int *)((const char *)w + a->off), at = nearest_index(a->full, a->nfull, cur);
        /* the full lists are ascending after their leading 0 (regs_elems: 0, -1, 256) */
        for (int d = -1; d <= 1; d += 2) {
            int j = at + d;
            if (at < 0 || j < 0 || j >= a->nfull || a->full[j] == 0)
                continue;
            ic_ptx_params in = *w;
            *(int *)((char *)&in + a->off) = a->full[j];
            ic_status s = add_cand(&S, &in);
            if (s) {
                ic__free(c, S.v);
                return s;
            }
        }
    }
    *out = S.v;
    *n = S.n;
    return IC_OK;
}

/* ---------------------------------- keys and records ---------------------------------- */

/* Appends text[0..n) to the growing string *b (length *len, capacity *cap). */
static bool put(char **b, size_t *len, size_t *cap, const char *text, size_t n)
{
    if (*len + n + 1 > *cap) {
        size_t nc = (*len + n + 1) * 2;
        char *nb = realloc(*b, nc);
        if (!nb)
            return false;
        *b = nb;
        *cap = nc;
    }
    memcpy(*b + *len, text, n);
    *len += n;
    (*b)[*len] = 0;
    return true;
}

/* One line of a kernel key without what names it: the kernel's index and name, its graph
 * nodes, the reason it ends there, and instruction comments (buffer names). */
static bool canon_line(const char *l, size_t n, char **b, size_t *len, size_t *cap)
{
    if ((n >= 8 && !strncmp(l, "  nodes:", 8)) || (n >= 6 && !strncmp(l, "  why:", 6)))
        return true;
    if (n >= 7 && !strncmp(l, "kernel ", 7)) {
        const char *o = strstr(l, ": outer");
        if (o && o < l + n) {
            n -= (size_t)(o - l);
            l = o;
        }
        return put(b, len, cap, "kernel", 6) && put(b, len, cap, l, n);
    }
    for (size_t i = 0; i + 3 < n; i++)
        if (!strncmp(l + i, "  ; ", 4)) {
            n = i;
            break;
        }
    return put(b, len, cap, l, n);
}

/* "buf<N>" renumbered by first appearance: the same kernel over other buffers (the Q, K and V
 * projections, the layers of a model) has the same key. */
static char *renumber_buffers(const char *t)
{
    int map[4096], nmap = 0;
    char *b = NULL;
    size_t len = 0, cap = 0;
    if (!put(&b, &len, &cap, "", 0))
        return NULL;
    while (*t) {
        if (!strncmp(t, "buf", 3) && t[3] >= '0' && t[3] <= '9') {
            char *end;
            long v = strtol(t + 3, &end, 10);
            int i = 0;
            while (i < nmap && map[i] != v)
                i++;
            if (i == nmap && nmap < 4096)
                map[nmap++] = (int)v;
            char num[32];
            int w = snprintf(num, sizeof num, "buf%d", i);
            if (!put(&b, &len, &cap, num, (size_t)w))
                return free(b), NULL;
            t = end;
            continue;
        }
        if (!put(&b, &len, &cap, t, 1))
            return free(b), NULL;
        t++;
    }
    return b;
}

char *ic__tune_cuda_key(const ic_program *prog, int n, const int *ks, const char *extra)
{
    char *b = NULL;
    size_t len = 0, cap = 0;
    bool ok = put(&b, &len, &cap, "", 0);
    for (int i = 0; i < n && ok; i++) {
        char *text = ic__kernel_key(prog, ks[i], false, "");
        ok = text != NULL;
        for (const char *l = text; ok && l && *l;) {
            const char *e = strchr(l, '\n');
            size_t ln = e ? (size_t)(e - l) : strlen(l);
            ok = canon_line(l, ln, &b, &len, &cap) && put(&b, &len, &cap, "\n", 1);
            l = e ? e + 1 : l + ln;
        }
        free(text);
    }
    char *r = ok ? renumber_buffers(b) : NULL;
    free(b);
    if (!r)
        return NULL;
    size_t rl = strlen(r), el = strlen(extra ? extra : "");
    char *full = malloc(rl + el + 2);
    if (full)
        snprintf(full, rl + el + 2, "%s%s\n", r, extra ? extra : "");
    free(r);
    return full;
}

#define RECORD_HEAD "ic-gpu-tune 1\n"

bool ic__tune_cuda_record_get(ic_ctx *c, const char *key, int n, ic_ptx_params *out)
{
    void *data;
    size_t sz;
    if (!ic__cache_get(c, IC__CACHE_GPU_TUNE, key, &data, &sz))
        return false;
    char *t = malloc(sz + 1);
    bool ok = t != NULL;
    if (ok) {
        memcpy(t, data, sz);
        t[sz] = 0;
        ok = !strncmp(t, RECORD_HEAD, strlen(RECORD_HEAD));
    }
    const char *l = ok ? t + strlen(RECORD_HEAD) : NULL;
    for (int i = 0; i < n && ok; i++) {
        const char *e = strchr(l, '\n');
        ic_ptx_params p;
        memset(&p, 0, sizeof p);
        ok = e && ic__ptx_params_parse(l, &p);
        if (ok)
            out[i] = p;
        l = e ? e + 1 : l;
    }
    ok = ok && !*l;
    free(t);
    free(data);
    return ok;
}

void ic__tune_cuda_record_put(ic_ctx *c, const char *key, int n, const ic_ptx_params *p)
{
    char *text = malloc(strlen(RECORD_HEAD) + (size_t)n * (IC__PTX_PARAMS_TEXT + 1) + 1);
    if (!text)
        return;
    size_t w = (size_t)sprintf(text, "%s", RECORD_HEAD);
    for (int i = 0; i < n; i++) {
        ic__ptx_params_format(&p[i], text + w, IC__PTX_PARAMS_TEXT);
        w += strlen(text + w);
        text[w++] = '\n';
    }
    ic__cache_put(c, IC__CACHE_GPU_TUNE, key, text, w);
    free(text);
}

/* ------------------------------------- the device ------------------------------------- */

#ifndef IC_HAVE_CUDA_H
#define CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE 38 /* cuda-impl.h declares only what cuda.c needs */
#endif

#define MAXREPS 32          /* launches of one timed group, each after its own L2 flush */
#define GROUP_MS 0.5        /* kernel time a timed group aims at */
#define COORDESC_STEPS 4
#define CONFIRMATIONS 3     /* winners raced again before the default is kept */

/* What one graph's tuning shares: the program, the device, the flush buffer and events. */
typedef struct tctx {
    ic_ctx *c;
    ic_cuda *d;
    const ic_program *prog;
    const ic_ptx_options *po;
    int flags;
    int nbufs, nk;
    ic_kernel *ks;            /* [nk] copies of the program's kernels */
    ic_buffer *bufs;          /* [nbufs] copies of its buffers */
    ic_ptx_params *params;    /* [nk] the result */
    uint64_t flush;
    size_t flush_bytes;
    CUevent ev[2 * MAXREPS];
    bool have_ev;
    ic__tune_graph G;         /* the budget, progress line, stats (tune.c) */
    ic_autotune_stats *st;
} tctx;

/* One unit being benchmarked: its buffers on the device and its candidates (K's, by index),
 * each loaded until the unit ends so that any of them can race again or be checked. */
typedef struct tbench {
    tctx *T;
    int nu, tk;               /* kernels of the unit; which one is tuned */
    int kid[2];
    uint64_t *dev;            /* [nbufs] device memory of the buffers the unit uses (0: none) */
    bool *out;                /* [nbufs] the unit's results (stored, not read back by it) */
    void **ref, **got;        /* [nbufs] host copies: the default's results, a candidate's */
    bool have_ref;
    void **kargs;             /* [nbufs] one launch's parameters */
    ic__tune K;               /* the race (tune.c) */
    int n, cap, from;         /* candidates; the current round's are [from, n) */
    ic__tcand *cand;          /* [n] */
    ic_ptx_module **pm;       /* [n] NULL: failed to emit or load */
    ic_cuda_module **cm;      /* [n] where its entries are */
    bool *own;                /* [n] cm[j] is its own (else its round's shared one) */
    ic_cuda_module *shared[1 + COORDESC_STEPS]; /* one per round */
    int nshared;
    char (*names)[2][160];    /* [n] its kernels' entry names */
    int *reps;                /* [n] launches per timed group (0: not yet calibrated) */
    bool *confirmed;          /* [n] raced again against the default (ic__tune_confirm) */
    size_t bytes;             /* device memory of the unit's buffers (ensure_buffers) */
} tbench;

static ic_status cu_err(tctx *T, CUresult r, const char *what)
{
    return ic__cuda_error(T->d, r, what);
}

static ic_status emit_job(void *arg, int job, int thread)
{
    (void)thread;
    tbench *B = arg;
    int j = B->from + job;
    tctx *T = B->T;
    ic_kernel ks[2];
    ic_ptx_params prm[2];
    for (int i = 0; i < B->nu; i++) {
        ks[i] = T->ks[B->kid[i]];
        snprintf(B->names[j][i], sizeof B->names[j][i], "%s_t%d", ks[i].name ? ks[i].name : "k", j);
        ks[i].name = B->names[j][i];
        prm[i] = T->params[B->kid[i]];
    }
    prm[B->tk] = B->cand[j].in;
    ic_ptx_options po = *T->po;
    po.keep_ir = false;
    if (ic_ptx_emit_kernels(T->c, B->nu, ks, T->nbufs, T->bufs, &po, prm, &B->pm[j])) {
        ic__logf(T->c, 1, "autotune: candidate %d of '%s' not emitted: %s", j, T->ks[B->kid[B->tk]].name,
                 ic_last_error(T->c));
        B->pm[j] = NULL;
    }
    return IC_OK;
}

/* The texts of candidate j's modules appended to texts (*nt of them). */
static void cand_texts(const tbench *B, int j, const char **texts, int *nt)
{
    const ic_ptx_module *m = B->pm[j];
    for (int i = 0; m && i < ic_ptx_module_num_kernels(m); i++)
        if (ic_ptx_module_kernel(m, i)->code == i)
            texts[(*nt)++] = ic_ptx_module_kernel_text(m, i);
}

/* Every candidate's modules loaded at once (the driver JITs them in parallel); when one fails
 * to JIT, each candidate alone, dropping those that fail. */
static ic_status load_round(tbench *B)
{
    tctx *T = B->T;
    const char **texts = ic__calloc(T->c, (size_t)(B->n - B->from) * 2 + 1, sizeof *texts);
    if (!texts)
        return ic__error(T->c, IC_ENOMEM, "autotune: out of memory");
    int nt = 0;
    for (int j = B->from; j < B->n; j++)
        cand_texts(B, j, texts, &nt);
    ic_cuda_module **sh = &B->shared[B->nshared];
    if (nt && !ic_cuda_module_load_many(T->d, nt, texts, sh)) {
        for (int j = B->from; j < B->n; j++)
            B->cm[j] = *sh;
        B->nshared++;
        ic__free(T->c, texts);
        return IC_OK;
    }
    ic_clear_error(T->c);
    for (int j = B->from; j < B->n; j++) {
        int n = 0;
        cand_texts(B, j, texts, &n);
        if (n && !ic_cuda_module_load_many(T->d, n, texts, &B->cm[j])) {
            B->own[j] = true;
            continue;
        }
        ic__logf(T->c, 1, "autotune: candidate %d not loaded: %s", j, ic_last_error(T->c));
        ic_clear_error(T->c);
        ic_ptx_module_destroy(B->pm[j]);
        B->pm[j] = NULL;
    }
    ic__free(T->c, texts);
    return IC_OK;
}

static uint64_t rnd(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Host contents of buffer b for the benchmark: a param's data, floats uniform in [-1, 1),
 * booleans true and integers 0 (always in range where they index). */
static void fill_host(const ic_buffer *b, void *h, size_t bytes, uint64_t seed)
{
    if (b->kind == IC_BUF_PARAM && b->data) {
        memcpy(h, b->data, bytes);
        return;
    }
    memset(h, 0, bytes);
    for (int64_t i = 0; i < b->numel; i++) {
        float f = (float)((double)(rnd(&seed) >> 11) / 4503599627370496.0 - 1.0);
        switch (b->dtype) {
        case IC_F32: ((float *)h)[i] = f; break;
        case IC_F64: ((double *)h)[i] = f; break;
        case IC_F16: ((uint16_t *)h)[i] = ic_f32_to_f16(f); break;
        case IC_BF16: ((uint16_t *)h)[i] = ic_f32_to_bf16(f); break;
        case IC_BOOL: ((unsigned char *)h)[i] = 1; break;
        default: return;
        }
    }
}

static size_t buf_bytes(const ic_buffer *b)
{
    size_t n = (size_t)b->numel * ic_dtype_size(b->dtype);
    return n ? n : 1;
}

/* Device memory for every buffer a loaded candidate uses and the unit has none for yet. */
static ic_status ensure_buffers(tbench *B)
{
    tctx *T = B->T;
    for (int j = 0; j < B->n; j++)
        for (int i = 0; B->pm[j] && i < ic_ptx_module_num_kernels(B->pm[j]); i++) {
            const ic_ptx_kernel *k = ic_ptx_module_kernel(B->pm[j], i);
            for (int a = 0; a < k->nargs; a++) {
                int b = k->args[a];
                if (B->dev[b])
                    continue;
                size_t bytes = buf_bytes(&T->bufs[b]);
                B->bytes += bytes;
                void *h = ic__malloc(T->c, bytes);
                if (!h)
                    return ic__error(T->c, IC_ENOMEM, "autotune: out of memory for buffer %d", b);
                fill_host(&T->bufs[b], h, bytes, 0x1234u + (uint64_t)b);
                ic_status s = ic_cuda_alloc(T->d, bytes, &B->dev[b]);
                CUresult r = s ? CUDA_SUCCESS : T->d->cu.MemcpyHtoDAsync(B->dev[b], h, bytes, T->d->stream);
                if (!s && r == CUDA_SUCCESS)
                    r = T->d->cu.StreamSynchronize(T->d->stream);
                ic__free(T->c, h);
                if (s)
                    return s;
                if (r != CUDA_SUCCESS)
                    return cu_err(T, r, "autotune: uploading inputs");
            }
        }
    return IC_OK;
}

/* The unit's results: buffers its kernels store and do not load (an im2col copy's buffer is
 * read by its GEMM, or not written at all when the GEMM gathers from x). */
static void mark_outputs(tbench *B)
{
    tctx *T = B->T;
    bool *loaded = ic__calloc(T->c, (size_t)T->nbufs + 1, sizeof *loaded);
    if (!loaded)
        return;
    for (int u = 0; u < B->nu; u++) {
        const ic_kernel *k = &T->ks[B->kid[u]];
        if (k->attn) {
            const ic_attn_operand *ops[5];
            ic_attention_operands(k->attn, ops);
            for (int i = 0; i < 4; i++)
                if (ops[i]->buf >= 0)
                    loaded[ops[i]->buf] = true;
            B->out[ops[4]->buf] = true;
            continue;
        }
        for (int s = 0; s < k->nstages; s++)
            for (int i = 0; i < k->stages[s].ninstr; i++) {
                const ic_linstr *in = &k->stages[s].instr[i];
                if (in->op == IC_L_LOAD && in->buf >= 0)
                    loaded[in->buf] = true;
                if (in->op == IC_L_STORE && in->buf >= 0)
                    B->out[in->buf] = true;
            }
    }
    for (int b = 0; b < T->nbufs; b++)
        B->out[b] = B->out[b] && !loaded[b];
    ic__free(T->c, loaded);
}

static ic_status launch(tbench *B, int j)
{
    const ic_ptx_module *m = B->pm[j];
    for (int i = 0; i < ic_ptx_module_num_kernels(m); i++) {
        const ic_ptx_kernel *k = ic_ptx_module_kernel(m, i);
        if (!k->grid)
            continue;
        for (int a = 0; a < k->nargs; a++)
            B->kargs[a] = &B->dev[k->args[a]];
        ic_status s = ic_cuda_module_launch_smem(B->cm[j], k->entry, k->grid, k->block, k->dyn_smem_bytes,
                                                 B->kargs);
        if (s)
            return s;
    }
    return IC_OK;
}

/* Launches in a group: enough for GROUP_MS of kernel time, after a warm-up launch; *one: the
 * time of one launch. */
static ic_status calibrate(tbench *B, int j, double *one)
{
    tctx *T = B->T;
    ic__cu *cu = &T->d->cu;
    ic_status s = launch(B, j);
    CUresult r = s ? CUDA_SUCCESS : cu->EventRecord(T->ev[0], T->d->stream);
    if (!s && r == CUDA_SUCCESS && !(s = launch(B, j)))
        r = cu->EventRecord(T->ev[1], T->d->stream);
    float ms = 0;
    if (!s && r == CUDA_SUCCESS && (r = cu->EventSynchronize(T->ev[1])) == CUDA_SUCCESS)
        r = cu->EventElapsedTime(&ms, T->ev[0], T->ev[1]);
    if (s)
        return s;
    if (r != CUDA_SUCCESS)
        return cu_err(T, r, "autotune: timing a candidate");
    int reps = ms > 0 ? (int)(GROUP_MS / ms) : MAXREPS;
    B->reps[j] = reps < 1 ? 1 : reps > MAXREPS ? MAXREPS : reps;
    *one = ms;
    return IC_OK;
}

/* Whether launches are timed on a flushed L2: when the unit's data outgrows half the L2, so that
 * a candidate never gains from data the previous launch left there which a real run would not
 * find. A unit that fits is timed with its data resident, as in a run, where the kernel that
 * made its inputs just wrote them: a cold L2 there would favour the wrong tiles (a 1024^3
 * bf16 GEMM: 20% slower in runs for a pick 3% faster on a flushed L2). */
static bool flushed(const tbench *B)
{
    return B->bytes > B->T->flush_bytes / 8;
}

/* One timed group of candidate j on the device: each launch after a memset of the flush
 * buffer (4x the L2: the L2 holds nothing of the inputs then) when the unit's data outgrows
 * the L2 (flushed), between its own pair of events; *ms per launch. */
static ic_status time_on_device(tbench *B, int j, double *ms)
{
    tctx *T = B->T;
    ic__cu *cu = &T->d->cu;
    ic_status s = IC_OK;
    CUresult r = CUDA_SUCCESS;
    int reps = B->reps[j];
    bool flush = flushed(B);
    for (int i = 0; i < reps && !s && r == CUDA_SUCCESS; i++) {
        if (flush)
            r = cu->MemsetD8Async(T->flush, (unsigned char)i, T->flush_bytes, T->d->stream);
        if (r == CUDA_SUCCESS)
            r = cu->EventRecord(T->ev[2 * i], T->d->stream);
        if (r == CUDA_SUCCESS && !(s = launch(B, j)))
            r = cu->EventRecord(T->ev[2 * i + 1], T->d->stream);
    }
    if (!s && r == CUDA_SUCCESS)
        r = cu->EventSynchronize(T->ev[2 * reps - 1]);
    double total = 0;
    for (int i = 0; i < reps && !s && r == CUDA_SUCCESS; i++) {
        float t = 0;
        r = cu->EventElapsedTime(&t, T->ev[2 * i], T->ev[2 * i + 1]);
        total += t;
    }
    if (s)
        return s;
    if (r != CUDA_SUCCESS)
        return cu_err(T, r, "autotune: timing a candidate");
    *ms = total / reps;
    return IC_OK;
}

/* Runs candidate j once on the unit's inputs (results first set to 0xff bytes, so that one
 * that writes nothing cannot match) and copies its results into dst. */
static ic_status run_results(tbench *B, int j, void **dst)
{
    tctx *T = B->T;
    ic__cu *cu = &T->d->cu;
    CUresult r = CUDA_SUCCESS;
    for (int b = 0; b < T->nbufs && r == CUDA_SUCCESS; b++)
        if (B->out[b] && B->dev[b])
            r = cu->MemsetD8Async(B->dev[b], 0xff, buf_bytes(&T->bufs[b]), T->d->stream);
    if (r != CUDA_SUCCESS)
        return cu_err(T, r, "autotune: clearing results");
    ic_status s = launch(B, j);
    for (int b = 0; b < T->nbufs && !s; b++) {
        if (!B->out[b] || !B->dev[b])
            continue;
        size_t bytes = buf_bytes(&T->bufs[b]);
        if (!dst[b] && !(dst[b] = ic__malloc(T->c, bytes)))
            return ic__error(T->c, IC_ENOMEM, "autotune: out of memory for results");
        if ((r = cu->MemcpyDtoHAsync(dst[b], B->dev[b], bytes, T->d->stream)) != CUDA_SUCCESS)
            return cu_err(T, r, "autotune: downloading results");
    }
    if (!s && (r = cu->StreamSynchronize(T->d->stream)) != CUDA_SUCCESS)
        return cu_err(T, r, "autotune: running a candidate");
    return s;
}

/* Candidate j's results against the default's. */
static ic_status check_on_device(tbench *B, int j, bool *ok)
{
    tctx *T = B->T;
    *ok = false;
    ic_status s = run_results(B, j, B->got);
    if (s)
        return s;
    *ok = true;
    for (int b = 0; b < T->nbufs && *ok; b++)
        if (B->out[b] && B->dev[b])
            *ok = B->ref[b] && ic__tune_close(T->bufs[b].dtype, T->bufs[b].numel, B->ref[b], B->got[b]);
    return IC_OK;
}

/* The tuner's run function (ic__tune_run_fn; K->reps is 1: each sample is one timed group,
 * its launches calibrated per candidate): the first call of a candidate calibrates its group
 * (the race's warm-up), later ones time a group. ms per launch, < 0 when it cannot run. */
static double run_cand(void *arg, int j, int reps)
{
    tbench *B = arg;
    tctx *T = B->T;
    double ms = -1;
    ic_status s = !B->pm[j] ? ic__error(T->c, IC_EINVAL, "autotune: candidate %d has no code", j)
                  : B->reps[j] ? time_on_device(B, j, &ms)
                               : calibrate(B, j, &ms);
    if (s || !(ms >= 0) || !isfinite(ms)) {
        ic__logf(T->c, 1, "autotune: candidate %d of '%s' dropped: %s", j, B->K.kernel,
                 s ? ic_last_error(T->c) : "no time");
        ic_clear_error(T->c);
        return -1;
    }
    return ms * reps;
}

static void free_bench(tbench *B)
{
    tctx *T = B->T;
    ic_ctx *c = T->c;
    for (int j = 0; j < B->n; j++) {
        if (B->own[j])
            ic_cuda_module_unload(B->cm[j]);
        ic_ptx_module_destroy(B->pm[j]);
    }
    for (int i = 0; i < B->nshared; i++)
        ic_cuda_module_unload(B->shared[i]);
    for (int b = 0; b < T->nbufs; b++) {
        if (B->dev && B->dev[b])
            ic_cuda_free(T->d, B->dev[b]);
        if (B->ref)
            ic__free(c, B->ref[b]);
        if (B->got)
            ic__free(c, B->got[b]);
    }
    ic__free(c, B->cand);
    ic__free(c, B->pm);
    ic__free(c, B->cm);
    ic__free(c, B->own);
    ic__free(c, B->names);
    ic__free(c, B->reps);
    ic__free(c, B->confirmed);
    ic__free(c, B->dev);
    ic__free(c, B->out);
    ic__free(c, B->ref);
    ic__free(c, B->got);
    ic__free(c, B->kargs);
}

/* Room for n candidates more in every per-candidate array (new entries zero). */
#define GROW(p) \
    do { \
        void *q_ = ic__realloc(c, (p), sizeof *(p) * (size_t)cap); \
        if (!q_) \
            return ic__error(c, IC_ENOMEM, "autotune: out of memory"); \
        (p) = q_; \
        memset((p) + B->cap, 0, sizeof *(p) * (size_t)(cap - B->cap)); \
    } while (0)

static ic_status grow(tbench *B, int n)
{
    ic_ctx *c = B->T->c;
    if (B->n + n <= B->cap)
        return IC_OK;
    int cap = B->n + n;
    GROW(B->cand);
    GROW(B->pm);
    GROW(B->cm);
    GROW(B->own);
    GROW(B->names);
    GROW(B->reps);
    GROW(B->confirmed);
    B->cap = cap;
    return IC_OK;
}
#undef GROW

/* Adds cands[0..n) as a round of candidates: described to the race, emitted on the compile
 * threads and loaded together. The first round's candidate 0 is the default: its results
 * become the reference. */
static ic_status add_round(tbench *B, const ic__tcand *cands, int n)
{
    tctx *T = B->T;
    ic_ctx *c = T->c;
    if (B->nshared == 1 + COORDESC_STEPS)
        return ic__error(c, IC_EINVAL, "autotune: too many rounds");
    ic_status s = grow(B, n);
    for (int j = 0; j < n && !s; j++) {
        char label[IC__TUNE_DESC];
        ic__ptx_params_label(&cands[j].res, label, sizeof label);
        if (ic__tune_add(&B->K, label) != B->n + j)
            s = ic__error(c, IC_ENOMEM, "autotune: out of memory");
    }
    if (s)
        return s;
    memcpy(B->cand + B->n, cands, sizeof *cands * (size_t)n);
    B->from = B->n;
    B->n += n;
    double t0 = ic__now_ms();
    s = ic__run_jobs(c, n, emit_job, B, NULL);
    if (!s)
        s = load_round(B);
    ic__tune_compiled(&B->K, n, ic__now_ms() - t0);
    if (!s)
        s = ensure_buffers(B);
    if (!s && !B->pm[0])
        s = ic__error(c, IC_ECUDA, "autotune: the default of kernel '%s' did not build: %s",
                      T->ks[B->kid[B->tk]].name, ic_last_error(c));
    if (!s && !B->have_ref) {
        s = run_results(B, 0, B->ref);
        B->have_ref = !s;
    }
    return s;
}

/* Races the round [B->from, B->n) with cur (the point it moves from) and the default. */
static ic_status race_round(tbench *B, int cur)
{
    int n = B->n - B->from, *ids = ic__calloc(B->T->c, (size_t)n + 1, sizeof *ids);
    if (!ids)
        return ic__error(B->T->c, IC_ENOMEM, "autotune: out of memory");
    for (int j = 0; j < n; j++)
        ids[j] = B->from + j;
    ids[n] = cur;
    ic__tune_race(&B->K, n + 1, ids);
    ic__free(B->T->c, ids);
    if (B->K.oom)
        return ic__error(B->T->c, IC_ENOMEM, "autotune: out of memory");
    if (!B->K.cand[0].races) /* no time of the default: nothing to compare with */
        return ic__error(B->T->c, IC_ECUDA, "autotune: the default kernel could not be timed");
    return IC_OK;
}

/* IC_TUNE_COORDESC: the neighbours of cur (one field moved) raced with it, the fastest one
 * taking its place when faster by the margin, until none is or the unit's time is up. */
static ic_status coordesc(tbench *B, int cur)
{
    tctx *T = B->T;
    const ic_kernel *k = &T->ks[B->kid[B->tk]];
    for (int step = 0; step < COORDESC_STEPS && !ic__tune_out_of_time(&B->K); step++) {
        ic__tcand *nb;
        int nn;
        ic_status s = ic__tune_cuda_neighbours(T->c, k, T->nbufs, T->bufs, T->po, &B->cand[cur].res, B->cand,
                                               B->n, &nb, &nn);
        if (!s && nn)
            s = add_round(B, nb, nn);
        ic__free(T->c, nb);
        if (!s && nn)
            s = race_round(B, cur);
        if (s || !nn)
            return s;
        int best = -1;
        for (int j = B->from; j < B->n; j++)
            if (B->K.cand[j].state == IC__TC_TIMED && (best < 0 || B->K.cand[j].ms < B->K.cand[best].ms))
                best = j;
        if (best < 0 || !(B->K.cand[best].ms < B->K.cand[cur].ms * (1 - IC__TUNE_MARGIN)))
            return IC_OK;
        cur = best;
    }
    return IC_OK;
}

/* The winner (ic__tune_winner), confirmed by one more race against the default
 * (ic__tune_confirm; at most CONFIRMATIONS tries) and its outputs checked; the default when
 * none passes. */
static ic_status choose(tbench *B, int *chosen)
{
    ic_ctx *c = B->T->c;
    for (int tries = 0;;) {
        int w = *chosen = ic__tune_winner(&B->K);
        if (w == 0)
            return IC_OK;
        if (!B->confirmed[w]) {
            if (tries++ == CONFIRMATIONS)
                return *chosen = 0, IC_OK;
            B->confirmed[w] = true;
            if (!ic__tune_confirm(&B->K, w))
                continue;
        }
        bool ok = false;
        ic_status s = check_on_device(B, w, &ok);
        if (s == IC_ENOMEM)
            return s;
        if (s) {
            ic__logf(c, 1, "autotune: checking candidate %d failed: %s", w, ic_last_error(c));
            ic_clear_error(c);
        }
        if (ok && !ic__tune_corrupt(&B->K, w))
            return IC_OK;
        ic__logf(c, 0, "autotune: %s: candidate '%s' computes other outputs than the default: rejected",
                 B->K.kernel, B->K.cand[w].desc);
        ic__tune_reject(&B->K, w); /* the next best, if any, is tried */
    }
}

/* Benchmarks the unit B->kid (its last kernel tuned) over cands[0..n) (0: the default), then
 * coordinate descent: *chosen, an index into B->cand. */
static ic_status bench_unit(tbench *B, const ic__tcand *cands, int n, int *chosen)
{
    tctx *T = B->T;
    size_t nb = (size_t)T->nbufs + 1;
    B->dev = ic__calloc(T->c, nb, sizeof *B->dev);
    B->out = ic__calloc(T->c, nb, sizeof *B->out);
    B->ref = ic__calloc(T->c, nb, sizeof *B->ref);
    B->got = ic__calloc(T->c, nb, sizeof *B->got);
    B->kargs = ic__calloc(T->c, nb, sizeof *B->kargs);
    if (!B->dev || !B->out || !B->ref || !B->got || !B->kargs)
        return ic__error(T->c, IC_ENOMEM, "autotune: out of memory");
    mark_outputs(B);
    B->K.reps = 1; /* a sample is one timed group, calibrated per candidate (run_cand) */
    ic_status s = add_round(B, cands, n);
    if (!s)
        s = race_round(B, 0);
    if (!s && (T->flags & IC_TUNE_COORDESC))
        s = coordesc(B, ic__tune_winner(&B->K));
    return s ? s : choose(B, chosen);
}

/* ------------------------------------ the units ------------------------------------ */

static const char *kind_shape(int kind)
{
    switch (kind) {
    case IC_TUNE_GEMM: return "(gemm)";
    case IC_TUNE_CONV: return "(conv)";
    case IC_TUNE_POINTWISE: return "(pointwise)";
    case IC_TUNE_REDUCTION: return "(reduction)";
    default: return "(attention)";
    }
}

/* Tunes the unit kid[0..nu) (its last kernel), the race K begun: *chosen = the winner's
 * params; ends K (the AUTOTUNE table, stats) unless it fails. */
static ic_status tune_unit(tctx *T, int nu, const int *kid, ic__tune *K, ic_ptx_params *chosen)
{
    ic_ctx *c = T->c;
    int q = kid[nu - 1];
    ic__tcand *cands;
    int n;
    ic_status s = ic__tune_cuda_space(c, &T->ks[q], T->nbufs, T->bufs, T->po, &T->params[q],
                                      (T->flags & IC_TUNE_EXHAUSTIVE) != 0, &cands, &n);
    if (s)
        return s;
    *chosen = cands[0].in;
    if (n <= 1) { /* nothing to race: the default is the choice */
        char label[IC__TUNE_DESC];
        ic__ptx_params_label(&cands[0].res, label, sizeof label);
        ic__free(c, cands);
        if (ic__tune_add(K, label) < 0) {
            ic__tune_skip(K);
            return ic__error(c, IC_ENOMEM, "autotune: out of memory");
        }
        ic__tune_end(K, 0);
        return IC_OK;
    }
    tbench B;
    memset(&B, 0, sizeof B);
    B.T = T;
    B.K = *K;
    B.K.arg = &B; /* the run function's */
    B.nu = nu;
    B.tk = nu - 1;
    memcpy(B.kid, kid, sizeof *kid * (size_t)nu);
    int w = 0;
    s = bench_unit(&B, cands, n, &w);
    if (!s) {
        *chosen = B.cand[w].in;
        ic__tune_end(&B.K, w);
    } else {
        ic__tune_skip(&B.K);
    }
    free_bench(&B);
    ic__free(c, cands);
    return s;
}

/* The kind flag of kernel q (0: not tunable or invalid params). */
static int unit_kind(tctx *T, int q, bool conv)
{
    ic_ptx_params r;
    if (ic_ptx_params_resolve(T->c, &T->ks[q], T->nbufs, T->bufs, T->po, &T->params[q], &r)) {
        ic_clear_error(T->c);
        return 0;
    }
    return ic__tune_cuda_kind(&r, conv);
}

static bool all_zero(const ic_ptx_params *p)
{
    static const ic_ptx_params z;
    return !memcmp(p, &z, sizeof z);
}

/* Copies of the program's kernels and buffers (the PTX layer takes arrays). */
static ic_status tctx_init(tctx *T, ic_ctx *c, ic_cuda *d, const ic_program *prog, const ic_ptx_options *po,
                           const ic_ptx_params *given, int flags)
{
    memset(T, 0, sizeof *T);
    T->c = c, T->d = d, T->prog = prog, T->po = po, T->flags = flags;
    T->nk = ic_program_num_kernels(prog);
    T->nbufs = ic_program_num_buffers(prog);
    T->ks = ic__calloc(c, (size_t)T->nk + 1, sizeof *T->ks);
    T->bufs = ic__calloc(c, (size_t)T->nbufs + 1, sizeof *T->bufs);
    T->params = ic__calloc(c, (size_t)T->nk + 1, sizeof *T->params);
    if (!T->ks || !T->bufs || !T->params)
        return ic__error(c, IC_ENOMEM, "autotune: out of memory");
    for (int i = 0; i < T->nk; i++) {
        T->ks[i] = *ic_program_kernel(prog, i);
        if (given)
            T->params[i] = given[i];
    }
    for (int b = 0; b < T->nbufs; b++)
        T->bufs[b] = *ic_program_buffer(prog, b);
    return IC_OK;
}

/* The flush buffer and the events, at the first unit benchmarked. */
static ic_status tctx_device(tctx *T)
{
    if (T->have_ev)
        return IC_OK;
    ic__cu *cu = &T->d->cu;
    int l2 = 0;
    if (cu->DeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, T->d->dev) != CUDA_SUCCESS || l2 <= 0)
        l2 = 32 << 20; /* unknown: as if 32 MiB */
    T->flush_bytes = ic__tune_cuda_flush_bytes ? ic__tune_cuda_flush_bytes : (size_t)l2 * 4;
    CUdeviceptr p = 0;
    CUresult r = cu->MemAlloc(&p, T->flush_bytes);
    if (r != CUDA_SUCCESS)
        return cu_err(T, r, "autotune: the L2 flush buffer");
    T->flush = p;
    int i = 0;
    while (i < 2 * MAXREPS && (r = cu->EventCreate(&T->ev[i], CU_EVENT_DEFAULT)) == CUDA_SUCCESS)
        i++;
    T->have_ev = true; /* also when one failed: tctx_free destroys those made */
    return r == CUDA_SUCCESS ? IC_OK : cu_err(T, r, "autotune: events");
}

static void tctx_free(tctx *T)
{
    if (T->flush)
        T->d->cu.MemFree(T->flush);
    for (int i = 0; i < 2 * MAXREPS && T->have_ev; i++)
        if (T->ev[i])
            T->d->cu.EventDestroy(T->ev[i]);
    ic__free(T->c, T->ks);
    ic__free(T->c, T->bufs);
    ic__free(T->c, T->params);
}

/* units[u] = {producer, gemm} for a GEMM reading an im2col copy, else {kernel}; producers of
 * such pairs are not units of their own (the GEMM may skip them). */
static int find_units(tctx *T, int (*units)[3])
{
    int *prod = ic__calloc(T->c, (size_t)T->nk + 1, sizeof *prod);
    bool *is_prod = ic__calloc(T->c, (size_t)T->nk + 1, sizeof *is_prod);
    ic__iconv *cv = ic__calloc(T->c, (size_t)T->nk + 1, sizeof *cv);
    int n = 0;
    if (prod && is_prod && cv) {
        for (int i = 0; i < T->nk; i++)
            prod[i] = -1;
        int np = T->nk >= 2 && !T->c->sw.no_iconv ? ic__iconv_find(T->nk, T->ks, T->nbufs, T->bufs, cv) : 0;
        for (int i = 0; i < np; i++)
            prod[cv[i].gemm] = cv[i].producer, is_prod[cv[i].producer] = true;
        for (int q = 0; q < T->nk; q++) {
            if (is_prod[q])
                continue;
            units[n][0] = prod[q] >= 0 ? 2 : 1;
            units[n][1] = prod[q] >= 0 ? prod[q] : q;
            units[n][2] = q;
            n++;
        }
    }
    ic__free(T->c, prod);
    ic__free(T->c, is_prod);
    ic__free(T->c, cv);
    return n;
}

typedef struct {
    char *key;
    ic_ptx_params p[2];
    bool have;
} unit_result;

/* Unit u: the record, an earlier unit of the same key, or a benchmark. Every unit passes
 * through the graph's budget (ic__tune_begin and _end or _skip), so that each one benchmarked
 * gets its share of the time left. */
static ic_status do_unit(tctx *T, const int *unit, unit_result *res, const unit_result *prev, int nprev,
                         bool cache, const char *extra)
{
    ic_ctx *c = T->c;
    int nu = unit[0];
    const int *kid = unit + 1;
    int q = kid[nu - 1];
    int kind = all_zero(&T->params[q]) ? unit_kind(T, q, nu == 2) : 0;
    ic__tune K;
    ic__tune_begin(&K, &T->G, T->ks[q].name, kind_shape(kind), 1.0, run_cand, NULL);
    if (!(kind & T->flags))
        return ic__tune_skip(&K), IC_OK;
    if (!(res->key = ic__tune_cuda_key(T->prog, nu, kid, extra)))
        return ic__tune_skip(&K), ic__error(c, IC_ENOMEM, "autotune: out of memory");
    for (int j = 0; j < nprev; j++)
        if (prev[j].have && !strcmp(prev[j].key, res->key)) {
            memcpy(res->p, prev[j].p, sizeof res->p);
            res->have = true;
            return ic__tune_skip(&K), IC_OK;
        }
    T->st->kernels++;
    if (cache && ic__tune_cuda_record_get(c, res->key, nu, res->p)) {
        res->have = true;
        return ic__tune_end(&K, -1), IC_OK;
    }
    if (ic__tune_out_of_time(&K)) {
        ic__logf(c, 1, "autotune: the budget is spent: kernel '%s' keeps its default", T->ks[q].name);
        return ic__tune_skip(&K), IC_OK;
    }
    ic_status s = tctx_device(T);
    if (s)
        return ic__tune_skip(&K), s;
    ic_ptx_params chosen;
    if ((s = tune_unit(T, nu, kid, &K, &chosen)))
        return s;
    for (int u = 0; u < nu; u++)
        res->p[u] = T->params[kid[u]];
    res->p[nu - 1] = chosen;
    res->have = true;
    if (cache)
        ic__tune_cuda_record_put(c, res->key, nu, res->p);
    return IC_OK;
}

/* The text after a unit's loop IR in its key: what else its best params depend on. */
static void key_extra(const tctx *T, const ic_cuda_options *o, char *buf, size_t n)
{
    const ic_ptx_options *po = T->po;
    snprintf(buf, n, "gpu-tune device '%s' sm %d sms %d opt %d tf32 %d wgmma %d tune %d",
             T->d ? ic_cuda_device_name(T->d) : "none", po->sm, po->num_sms, po->opt_level, po->allow_tf32,
             po->wgmma, o->autotune);
}

ic_status ic__cuda_tune(ic__pipe *P, ic_cuda *d, const ic_program *prog, const ic_ptx_options *po,
                        const ic_ptx_params *given, const ic_cuda_options *o, ic_ptx_params **out)
{
    *out = NULL;
    ic_ctx *c = P->c;
    int flags = o ? o->autotune : 0;
    if (!d || !(flags & (IC_TUNE_MAX & ~IC_TUNE_COORDESC)) || !ic_program_num_kernels(prog))
        return IC_OK;
    ic_autotune_stats scratch;
    memset(&scratch, 0, sizeof scratch);
    tctx T;
    ic_status s = tctx_init(&T, c, d, prog, po, given, flags);
    T.st = P->tune ? P->tune : &scratch;
    int (*units)[3] = s ? NULL : ic__calloc(c, (size_t)T.nk + 1, sizeof *units);
    unit_result *res = units ? ic__calloc(c, (size_t)T.nk + 1, sizeof *res) : NULL;
    if (!s && !res)
        s = ic__error(c, IC_ENOMEM, "autotune: out of memory");
    int nunits = s ? 0 : find_units(&T, units);
    ic__tune_graph_init(&T.G, c, flags, o->autotune_budget_s, T.st, nunits, nunits);
    char extra[512];
    key_extra(&T, o, extra, sizeof extra);
    bool cache = ic__cache_on(c, o->cache), changed = false;
    for (int u = 0; u < nunits && !s; u++) {
        s = do_unit(&T, units[u], &res[u], res, u, cache, extra);
        if (s && s != IC_ENOMEM) {
            ic__logf(c, 1, "autotune: kernel '%s' keeps its default: %s", T.ks[units[u][units[u][0]]].name,
                     ic_last_error(c));
            ic_clear_error(c);
            s = IC_OK;
            continue;
        }
        for (int k = 0; !s && res[u].have && k < units[u][0]; k++) {
            int q = units[u][1 + k];
            changed |= memcmp(&T.params[q], &res[u].p[k], sizeof res[u].p[k]) != 0;
            T.params[q] = res[u].p[k];
        }
    }
    ic__tune_graph_end(&T.G);
    for (int u = 0; res && u < nunits; u++)
        free(res[u].key);
    ic__free(c, res);
    ic__free(c, units);
    if (!s && changed) {
        *out = T.params;
        T.params = NULL;
    }
    tctx_free(&T);
    return s;
}
