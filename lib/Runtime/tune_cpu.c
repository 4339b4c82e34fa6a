/* tune_cpu.c - the CPU autotuner: for each distinct kernel the options select, a search space
 * of ic_codegen_params (defaults first, statically pruned), candidates compiled in parallel on
 * the compile threads (a module and a JIT each), raced on random data of the kernel's own
 * buffers (tune.c decides), the winner's outputs checked against the default's, the choice
 * kept as a tuning record in the persistent cache.
 *
 * Spaces. GEMM kernels (ic_kernel_is_gemm): register tile mr x nr (the tiles that fit the
 * register file: mr * nr/lanes accumulators + nr/lanes B vectors + a broadcast), cache blocks
 * mc / kc / nc, packing of A, the team (all threads or one) and the micro-kernel's unroll.
 * Loop kernels (pointwise, row and column reductions): vector width, interleave, prefetch
 * distance, non-temporal stores, threads, grain and (column reductions) strip.
 * Every candidate is first made canonical (values clamped as the code generator clamps them,
 * choices that cannot change the code set to one value) so that no two candidates compile to
 * the same code. Validity is the only pruning under IC_TUNE_EXHAUSTIVE: the full cross product
 * of the value lists. Otherwise the grid is pruned statically: the tiles (taller than M or
 * wider than N dropped) each with two depths, and one change at a time from the default for
 * the other GEMM knobs; vector width x interleave and one change at a time for loop kernels;
 * IC_TUNE_COORDESC then refines the grid's winner one parameter at a time (Inductor's
 * coordinate descent: halve or double a value, keep a change that wins).
 *
 * Kernels that load integer data are not tuned: random data would make out-of-range indices
 * of gathers, or zero divisors. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "tune-impl.h"
#include "cpu-impl.h"
#include "cache-impl.h"
#include "key-impl.h"
#include "gemm-impl.h"

enum { KIND_NONE, KIND_GEMM, KIND_LOOP };
#define CHUNK 8         /* candidates compiled and raced together */
#define COORDESC_PASSES 3
#define CONFIRMATIONS 3   /* winners raced again before the default is kept */

/* One candidate's code. */
typedef struct {
    ic_codegen_params p;      /* canonical */
    char text[512];           /* p as text (ic__cg_params_format) */
    ic__jit *jit;
    ic__kernel_fn fn;
    bool failed;
    bool confirmed;           /* raced again as the winner (choose) */
} cand;

/* What the tuner knows of one kernel. */
typedef struct {
    ic_ctx *c;
    const ic_program *prog;
    const ic_codegen_target *t;
    const ic_compile_options *o;
    int k, kind, nb;
    const ic_kernel *kern;
    ic_buffer *bufs;          /* [nb] copies of the program's buffers */
    /* GEMM facts */
    int64_t M, N, K;
    int vl, regs, host;
    bool x_f32_contig;        /* A may be read in place */
    bool x_k_contig;          /* A is contiguous along k */
    bool serial_gemm;         /* too few flops for threads anyway */
    /* loop facts */
    int64_t elems;
    bool stream_matters;
    ic_codegen_params def;    /* the default exactly as the compile makes it (candidate 0) */
    int chosen;               /* the candidate taken */
    double per_cand_ms;       /* what the last chunk cost per candidate raced */
    /* candidates */
    cand *cs;
    int n, cap;
    /* benchmark data */
    void **table;             /* [nb] the kernel's buffer table */
    void **init;              /* [nb] the initial random contents (copies) */
    size_t *bytes;            /* [nb] */
    bool *stored;             /* [nb] buffers the kernel writes */
    bool *used;               /* [nb] buffers it reads or writes */
    ic__tune T;
} tuner;

static int64_t round_up(int64_t x, int64_t m)
{
    return (x + m - 1) / m * m;
}

static int64_t prod(int n, const int64_t *d)
{
    int64_t p = 1;
    for (int i = 0; i < n; i++)
        p *= d[i];
    return p;
}

static int host_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 256 ? 256 : (int)n;
}

/* ---- which kernels ---- */

static bool loads_integers(const ic_kernel *k, const ic_buffer *bufs)
{
    for (int s = 0; s < k->nstages; s++)
        for (int i = 0; i < k->stages[s].ninstr; i++) {
            const ic_linstr *in = &k->stages[s].instr[i];
            if (in->op == IC_L_LOAD && !ic_dtype_is_float(bufs[in->buf].dtype) && bufs[in->buf].dtype != IC_BOOL)
                return true;
        }
    return false;
}

static bool has_reduce(const ic_kernel *k)
{
    for (int s = 0; s < k->nstages; s++)
        if (k->stages[s].kind == IC_STAGE_REDUCE)
            return true;
    return false;
}

/* The kind of tuning kernel k (default params p) gets under flags: GEMM (the GEMM or, as the
 * CPU expands convolutions into GEMMs, the conv flag), LOOP (pointwise or reduction flag; also
 * a contraction whose params turn the GEMM path off), or none. */
static int kind_of(const ic_kernel *k, const ic_buffer *bufs, const ic_codegen_params *p, int flags)
{
    if (k->attn || k->nouter < 0 || prod(k->nouter, k->outer) * prod(k->ninner, k->inner) <= 0 ||
        loads_integers(k, bufs))
        return KIND_NONE;
    if (ic_kernel_is_gemm(k, bufs) && p->vector_width != 1 && p->gemm.disable != 1)
        return flags & (IC_TUNE_GEMM | IC_TUNE_CONV) ? KIND_GEMM : KIND_NONE;
    bool red = ic_kernel_mode_of(k) != IC_KMODE_POINTWISE && has_reduce(k);
    return flags & (red ? IC_TUNE_REDUCTION : IC_TUNE_POINTWISE) ? KIND_LOOP : KIND_NONE;
}

/* ---- facts, descriptions ---- */

static void gemm_facts(tuner *U, const ic_codegen_params *def)
{
    ic__gemm m;
    int bits = ic_codegen_target_vector_bits(U->t);
    U->vl = bits / 32;
    U->regs = bits >= 512 ? 32 : 16;
    U->host = def->threads > 0 ? def->threads : host_threads();
    if (!ic__gemm_recognise(U->kern, U->bufs, U->nb, &m))
        return;
    if (m.N < U->vl && m.M > m.N && m.x.expr < 0) { /* the generator swaps the operands' roles */
        int64_t t = m.M;
        m.M = m.N, m.N = t;
        m.x = m.y;
    }
    U->M = m.M, U->N = m.N, U->K = m.K;
    U->x_f32_contig = m.x.dt == IC_F32 && m.x.expr < 0 && !m.x.xform;
    U->x_k_contig = m.x.s_k == 1;
    U->serial_gemm = 2.0 * (double)m.M * (double)m.N * (double)m.K * (double)m.batch < (double)def->gemm.serial_flops ||
                     U->host == 1;
    char batch[48] = "";
    if (m.batch > 1)
        snprintf(batch, sizeof batch, ", batch=%" PRId64, m.batch);
    snprintf(U->T.shape, sizeof U->T.shape, "(M=%" PRId64 ", N=%" PRId64 ", K=%" PRId64 "%s)", m.M, m.N, m.K, batch);
}

static bool output_streams(const tuner *U)
{
    if (ic_kernel_mode_of(U->kern) != IC_KMODE_ROW)
        return false;
    for (int b = 0; b < U->nb; b++)
        if (U->stored[b] && U->bufs[b].kind == IC_BUF_OUTPUT)
            return true;
    return false;
}

static void loop_facts(tuner *U)
{
    const ic_kernel *k = U->kern;
    U->elems = prod(k->nouter, k->outer) * prod(k->ninner, k->inner);
    ic_kernel_mode mode = ic_kernel_mode_of(k);
    U->stream_matters = output_streams(U);
    U->host = host_threads();
    const char *what = mode == IC_KMODE_POINTWISE ? "pointwise" : mode == IC_KMODE_ROW ? "row" : "column";
    snprintf(U->T.shape, sizeof U->T.shape, "(%s, %" PRId64 " x %" PRId64 ")", what,
             prod(k->nouter, k->outer), prod(k->ninner, k->inner));
}

static void describe(const tuner *U, const ic_codegen_params *p, char *buf, size_t n)
{
    if (U->kind == KIND_GEMM) {
        const ic_gemm_params *g = &p->gemm;
        snprintf(buf, n, "mr=%d nr=%d mc=%" PRId64 " kc=%" PRId64 " nc=%" PRId64 " pack_a=%d unroll=%d threads=%d",
                 g->mr, g->nr, g->mc, g->kc, g->nc, g->pack_a, g->unroll, g->threads);
    } else {
        snprintf(buf, n, "vector_width=%d unroll=%d prefetch=%d stream=%" PRId64 " threads=%d grain=%" PRId64
                 " strip=%" PRId64, p->vector_width, p->unroll, p->prefetch_bytes, p->stream_bytes, p->threads,
                 p->grain, p->strip);
    }
}

/* ---- canonical candidates ---- */

/* GEMM params as the generator resolves them (gemm.c plan_blocks), choices that cannot
 * change the code set to one value; false when invalid (the tile does not fit the registers). */
static bool gemm_canon(const tuner *U, ic_codegen_params *p)
{
    ic_gemm_params *g = &p->gemm;
    ic_gemm_params_default(U->t, U->kern, U->bufs, g);
    int nv = g->nr / U->vl;
    if (g->mr < 1 || g->mr > 16 || g->nr % U->vl || nv < 1 || nv > 8 || g->mr * nv + nv + 1 > U->regs)
        return false;
    g->kc = g->kc < 1 ? 1 : g->kc > U->K ? U->K : g->kc;
    g->mc = round_up(g->mc < g->mr ? g->mr : g->mc, g->mr);
    g->mc = g->mc > round_up(U->M, g->mr) ? round_up(U->M, g->mr) : g->mc;
    g->nc = round_up(g->nc < g->nr ? g->nr : g->nc, g->nr);
    g->nc = g->nc > round_up(U->N, g->nr) ? round_up(U->N, g->nr) : g->nc;
    g->unroll = g->unroll < 1 ? 1 : g->unroll > 16 ? 16 : g->unroll;
    bool in_place = g->pack_a == -1 || (g->pack_a == 0 && U->x_k_contig && g->mr <= 8);
    g->pack_a = !U->x_f32_contig ? 1 : in_place ? -1 : 1;
    if (U->serial_gemm || g->threads >= U->host)
        g->threads = 0;
    return true;
}

static bool loop_canon(const tuner *U, ic_codegen_params *p)
{
    ic_kernel_mode mode = ic_kernel_mode_of(U->kern);
    if (p->vector_width < 1 || p->unroll < 0)
        return false;
    if (mode != IC_KMODE_COLUMN)
        p->strip = 0;
    if (!U->stream_matters)
        p->stream_bytes = 0;
    bool parallel = p->parallel_depth > 0 && p->threads != 1 && U->elems >= p->serial_threshold && U->host > 1;
    if (!parallel) /* one thread: threads, grain and threshold cannot matter */
        p->threads = 1, p->grain = 64, p->serial_threshold = 32768;
    if (mode != IC_KMODE_POINTWISE)
        p->grain = 64;
    return true;
}

/* Parameters the compile options set explicitly are not searched: the user's value stays. */
static void keep_options(const tuner *U, ic_codegen_params *p)
{
    const ic_compile_options *o = U->o;
    if (o->vector_width)
        p->vector_width = U->def.vector_width;
    if (o->serial_threshold)
        p->serial_threshold = U->def.serial_threshold;
    if (o->stream_bytes)
        p->stream_bytes = U->def.stream_bytes;
    if (o->prefetch_bytes)
        p->prefetch_bytes = U->def.prefetch_bytes;
    if (o->threads)
        p->threads = U->def.threads, p->gemm.threads = U->def.gemm.threads;
}

/* Adds p (made canonical) unless invalid or already there; index or -1. */
static int add_cand(tuner *U, ic_codegen_params p)
{
    keep_options(U, &p);
    if (!(U->kind == KIND_GEMM ? gemm_canon(U, &p) : loop_canon(U, &p)))
        return -1;
    char text[512]; /* compared as text: struct copies need not keep padding bytes equal */
    ic__cg_params_format(&p, text, sizeof text);
    for (int i = 0; i < U->n; i++)
        if (!strcmp(U->cs[i].text, text))
            return -1;
    if (U->n == U->cap) {
        int cap = U->cap ? 2 * U->cap : 64;
        cand *q = ic__realloc(U->c, U->cs, sizeof *q * (size_t)cap);
        if (!q)
            return -1;
        U->cs = q, U->cap = cap;
    }
    char desc[IC__TUNE_DESC];
    describe(U, &p, desc, sizeof desc);
    if (ic__tune_add(&U->T, desc) < 0)
        return -1;
    memset(&U->cs[U->n], 0, sizeof U->cs[U->n]);
    U->cs[U->n].p = p;
    memcpy(U->cs[U->n].text, text, sizeof text);
    return U->n++;
}

/* ---- the spaces ---- */

typedef struct { int mr, nv; } tile;
static const tile tiles512[] = { { 8, 3 }, { 6, 4 }, { 12, 2 }, { 14, 2 }, { 4, 6 }, { 16, 1 }, { 4, 4 } };
static const tile tiles256[] = { { 6, 2 }, { 4, 3 }, { 3, 4 }, { 8, 1 }, { 12, 1 }, { 5, 2 }, { 4, 2 } };

static void tiles_of(const tuner *U, const tile **t, int *n)
{
    *t = U->vl >= 16 ? tiles512 : tiles256;
    *n = 7;
}

static void gemm_full(tuner *U, const ic_codegen_params *d)
{
    const tile *ts;
    int nt;
    tiles_of(U, &ts, &nt);
    const ic_gemm_params *g = &U->cs[0].p.gemm; /* the default, resolved */
    int64_t kcs[] = { g->kc, 256, 512 }, mcs[] = { g->mc, g->mc / 2, 2 * g->mc }, ncs[] = { g->nc, 1 << 30 };
    int packs[] = { -1, 1 }, unrolls[] = { g->unroll, 2 * g->unroll }, threads[] = { 0, 1 };
    for (int a = 0; a < nt; a++)
        for (int b = 0; b < 3; b++)
            for (int m = 0; m < 3; m++)
                for (int n = 0; n < 2; n++)
                    for (int q = 0; q < 2; q++)
                        for (int u = 0; u < 2; u++)
                            for (int th = 0; th < 2; th++) {
                                ic_codegen_params p = *d;
                                p.gemm.mr = ts[a].mr, p.gemm.nr = ts[a].nv * U->vl;
                                p.gemm.kc = kcs[b], p.gemm.mc = mcs[m], p.gemm.nc = ncs[n];
                                p.gemm.pack_a = packs[q], p.gemm.unroll = unrolls[u], p.gemm.threads = threads[th];
                                add_cand(U, p);
                            }
}

/* Each tile not taller than M nor wider than N by a whole vector (pointless: padding), with
 * its heuristic blocks at the heuristic depth and at 256; then one change at a time from the
 * default: packing, one thread, unroll x2, nc all of N, mc x2. */
static void gemm_pruned(tuner *U, const ic_codegen_params *d)
{
    const tile *ts;
    int nt;
    tiles_of(U, &ts, &nt);
    const ic_gemm_params *g = &U->cs[0].p.gemm;
    for (int a = 0; a < nt; a++) {
        if (ts[a].mr > U->M || (ts[a].nv - 1) * U->vl >= U->N)
            continue;
        int64_t kcs[] = { 0, 256 };
        for (int b = 0; b < 2; b++) {
            ic_codegen_params p = *d; /* blocks: the heuristic's for this tile */
            p.gemm.mr = ts[a].mr, p.gemm.nr = ts[a].nv * U->vl, p.gemm.kc = kcs[b];
            p.gemm.mc = p.gemm.nc = 0;
            add_cand(U, p);
        }
    }
    ic_codegen_params p = *d;
    p.gemm.pack_a = g->pack_a == 1 ? -1 : 1;
    add_cand(U, p);
    p = *d, p.gemm.threads = 1;
    add_cand(U, p);
    p = *d, p.gemm.unroll = 2 * g->unroll;
    add_cand(U, p);
    p = *d, p.gemm.nc = 1 << 30;
    add_cand(U, p);
    p = *d, p.gemm.mc = 2 * g->mc;
    add_cand(U, p);
}

static void loop_full(tuner *U, const ic_codegen_params *d)
{
    int vws[] = { d->vector_width, d->vector_width / 2 }, unrolls[] = { 0, 2, 4 }, pfs[] = { 0, 512, 2048 },
        ths[] = { 0, 1 };
    int64_t streams[] = { d->stream_bytes, 0 }, grains[] = { 64, 4096 }, strips[] = { 0, 64, 256, 1024 };
    for (int a = 0; a < 2; a++)
        for (int u = 0; u < 3; u++)
            for (int f = 0; f < 3; f++)
                for (int s = 0; s < 2; s++)
                    for (int t = 0; t < 2; t++)
                        for (int g = 0; g < 2; g++)
                            for (int st = 0; st < 4; st++) {
                                ic_codegen_params p = *d;
                                p.vector_width = vws[a], p.unroll = unrolls[u], p.prefetch_bytes = pfs[f];
                                p.stream_bytes = streams[s], p.threads = ths[t], p.grain = grains[g];
                                p.strip = strips[st] ? strips[st] : d->strip;
                                add_cand(U, p);
                            }
}

/* Vector width (the host's and half) x interleave (LLVM's, 2, 4), then one change at a time:
 * prefetch distance, streaming stores, one thread, grain, strip. */
static void loop_pruned(tuner *U, const ic_codegen_params *d)
{
    int vws[] = { d->vector_width, d->vector_width / 2 }, unrolls[] = { 0, 2, 4 };
    for (int a = 0; a < 2; a++)
        for (int u = 0; u < 3; u++) {
            if (vws[a] < 1)
                continue;
            ic_codegen_params p = *d;
            p.vector_width = vws[a], p.unroll = unrolls[u];
            add_cand(U, p);
        }
    int pfs[] = { 0, 512, 2048 };
    for (int f = 0; f < 3; f++) {
        ic_codegen_params p = *d;
        p.prefetch_bytes = pfs[f];
        add_cand(U, p);
    }
    ic_codegen_params p = *d;
    p.stream_bytes = d->stream_bytes ? 0 : 1 << 20;
    add_cand(U, p);
    p = *d, p.threads = 1;
    add_cand(U, p);
    p = *d, p.grain = 4096;
    add_cand(U, p);
    int64_t strips[] = { 64, 256, 1024 };
    for (int s = 0; s < 3; s++) {
        p = *d, p.strip = strips[s];
        add_cand(U, p);
    }
}

/* ---- compiling candidates ---- */

static ic_status compile_job(void *arg, int j, int thread)
{
    (void)thread;
    tuner *U = ((tuner **)arg)[0];
    int i = ((int *)((tuner **)arg)[1])[j];
    cand *x = &U->cs[i];
    ic_kernel kern = *U->kern;
    ic_status s = ic__jit_kernels(U->c, 1, &kern, U->nb, U->bufs, i ? &x->p : &U->def, &x->jit, &x->fn);
    x->failed = s != IC_OK;
    return s == IC_ENOMEM ? s : IC_OK; /* a candidate that does not compile just drops out */
}

/* Compiles candidates ids[0..n) on the compile threads. */
static ic_status compile(tuner *U, int n, int *ids)
{
    void *arg[2] = { U, ids };
    double t0 = ic__now_ms();
    ic_status s = ic__run_jobs(U->c, n, compile_job, arg, NULL);
    ic__tune_compiled(&U->T, n, ic__now_ms() - t0);
    for (int j = 0; j < n; j++)
        if (U->cs[ids[j]].failed) {
            U->T.cand[ids[j]].state = IC__TC_FAILED;
            ic_clear_error(U->c); /* the real compile reports its own errors */
        }
    return s;
}

static void release(tuner *U, int i)
{
    if (i > 0 && U->cs[i].jit && i != U->T.best) {
        ic__jit_destroy(U->cs[i].jit);
        U->cs[i].jit = NULL, U->cs[i].fn = NULL;
    }
}

/* ---- benchmark data ---- */

static void fill(void *data, ic_dtype dt, int64_t n, unsigned *seed)
{
    for (int64_t i = 0; i < n; i++) {
        *seed = *seed * 1664525u + 1013904223u;
        float v = (float)((*seed >> 8) & 0xffff) / 32768.0f - 1.0f;
        switch (dt) {
        case IC_F32: ((float *)data)[i] = v; break;
        case IC_F64: ((double *)data)[i] = v; break;
        case IC_F16: ((uint16_t *)data)[i] = ic_f32_to_f16(v); break;
        case IC_BF16: ((uint16_t *)data)[i] = ic_f32_to_bf16(v); break;
        case IC_BOOL: ((uint8_t *)data)[i] = (*seed >> 12) & 1; break;
        default: memset((char *)data + i * ic_dtype_size(dt), 0, ic_dtype_size(dt)); break;
        }
    }
}

static void mark_used(const ic_kernel *k, bool *used, bool *stored)
{
    for (int s = 0; s < k->nstages; s++)
        for (int i = 0; i < k->stages[s].ninstr; i++) {
            const ic_linstr *in = &k->stages[s].instr[i];
            if (in->op == IC_L_LOAD)
                used[in->buf] = true;
            if (in->op == IC_L_STORE)
                used[in->buf] = stored[in->buf] = true;
        }
}

/* The buffers the kernel touches (U->used) and writes (U->stored): what the facts and the
 * data need; no data yet (a record makes it unneeded). */
static bool mark_buffers(tuner *U)
{
    ic_ctx *c = U->c;
    U->table = ic__calloc(c, (size_t)U->nb + 1, sizeof *U->table);
    U->init = ic__calloc(c, (size_t)U->nb + 1, sizeof *U->init);
    U->bytes = ic__calloc(c, (size_t)U->nb + 1, sizeof *U->bytes);
    U->stored = ic__calloc(c, (size_t)U->nb + 1, sizeof *U->stored);
    U->used = ic__calloc(c, (size_t)U->nb + 1, sizeof *U->used);
    if (!U->table || !U->init || !U->bytes || !U->stored || !U->used)
        return false;
    mark_used(U->kern, U->used, U->stored);
    return true;
}

/* Buffers of the kernel's own sizes, random (never the caller's data), and a copy of the
 * initial contents for the output check. */
static bool make_data(tuner *U)
{
    unsigned seed = 12345;
    for (int b = 0; b < U->nb; b++) {
        if (!U->used[b])
            continue;
        size_t n = (size_t)U->bufs[b].numel * ic_dtype_size(U->bufs[b].dtype);
        U->bytes[b] = n;
        n = (size_t)round_up((int64_t)n + 1, 64);
        U->table[b] = aligned_alloc(64, n);
        U->init[b] = malloc(n);
        if (!U->table[b] || !U->init[b])
            return false;
        fill(U->table[b], U->bufs[b].dtype, U->bufs[b].numel, &seed);
        memcpy(U->init[b], U->table[b], U->bytes[b]);
    }
    return true;
}

static void free_data(tuner *U)
{
    for (int b = 0; b < U->nb && U->table && U->init; b++) {
        free(U->table[b]);
        free(U->init[b]);
    }
    ic__free(U->c, U->table);
    ic__free(U->c, U->init);
    ic__free(U->c, U->bytes);
    ic__free(U->c, U->stored);
    ic__free(U->c, U->used);
}

static double run_cand(void *arg, int i, int reps)
{
    tuner *U = arg;
    ic__kernel_fn fn = U->cs[i].fn;
    if (!fn)
        return -1;
    double t0 = ic__now_ms();
    for (int r = 0; r < reps; r++)
        fn(U->table);
    return ic__now_ms() - t0;
}

/* ---- the output check ---- */

static void restore(tuner *U)
{
    for (int b = 0; b < U->nb; b++)
        if (U->table[b])
            memcpy(U->table[b], U->init[b], U->bytes[b]);
}

/* Whether candidate w writes what the default writes, from the same initial contents. */
static bool outputs_match(tuner *U, int w)
{
    void **ref = ic__calloc(U->c, (size_t)U->nb + 1, sizeof *ref);
    bool ok = ref != NULL;
    restore(U);
    U->cs[0].fn(U->table);
    for (int b = 0; b < U->nb && ok; b++)
        if (U->stored[b] && (ok = (ref[b] = malloc(U->bytes[b] + 1)) != NULL))
            memcpy(ref[b], U->table[b], U->bytes[b]);
    if (ok) {
        restore(U);
        U->cs[w].fn(U->table);
        if (ic__tune_corrupt(&U->T, w))
            for (int b = 0; b < U->nb; b++)
                if (U->stored[b] && U->bytes[b])
                    memset(U->table[b], 0x7f, U->bytes[b] < 64 ? U->bytes[b] : 64);
    }
    for (int b = 0; b < U->nb && ok; b++)
        if (U->stored[b])
            ok = ic__tune_close(U->bufs[b].dtype, U->bufs[b].numel, ref[b], U->table[b]);
    for (int b = 0; ref && b < U->nb; b++)
        free(ref[b]);
    ic__free(U->c, ref);
    return ok;
}

/* ---- the search ---- */

/* Candidates [from, U->n) in chunks: each chunk compiled, raced with the default and the best
 * so far, its losers' code freed. */
static ic_status search(tuner *U, int from)
{
    int ids[CHUNK + 1];
    for (int i = from; i < U->n; i += CHUNK) {
        int n = U->n - i < CHUNK ? U->n - i : CHUNK, best = U->T.best;
        /* a chunk costs about what the last one did per candidate, the default's and the best's
         * runs included: one that cannot end before the deadline does not start */
        if (ic__tune_left_ms(&U->T) < U->per_cand_ms * (n + 2))
            break;
        double t0 = ic__now_ms();
        for (int j = 0; j < n; j++)
            ids[j] = i + j;
        ids[n] = best; /* its code may have been freed when it lost a race: made again */
        ic_status s = compile(U, n + (best > 0 && !U->cs[best].fn), ids);
        if (s)
            return s;
        ic__tune_race(&U->T, n + (best > 0), ids);
        for (int j = 0; j <= n; j++)
            release(U, ids[j]);
        U->per_cand_ms = (ic__now_ms() - t0) / (n + 2);
    }
    return U->T.oom ? ic__error(U->c, IC_ENOMEM, "autotune: out of memory") : IC_OK;
}

/* Halves and doubles of each GEMM block / unroll, the other packing and team; the loop
 * kernels' width, interleave, prefetch, grain and strip. */
static int neighbours(tuner *U, const ic_codegen_params *w, int field, ic_codegen_params *out)
{
    int n = 0;
    for (int dir = 0; dir < 2; dir++) {
        ic_codegen_params p = *w;
        int64_t *v64 = NULL;
        int *v32 = NULL;
        if (U->kind == KIND_GEMM) {
            switch (field) {
            case 0: v64 = &p.gemm.mc; break;
            case 1: v64 = &p.gemm.kc; break;
            case 2: v64 = &p.gemm.nc; break;
            case 3: v32 = &p.gemm.unroll; break;
            case 4: if (dir) continue; p.gemm.pack_a = -p.gemm.pack_a; break;
            case 5: if (dir) continue; p.gemm.threads = p.gemm.threads ? 0 : 1; break;
            default: return 0;
            }
        } else {
            switch (field) {
            case 0: v32 = &p.vector_width; break;
            case 1: if (!p.unroll) p.unroll = dir ? 2 : 1; else v32 = &p.unroll; break;
            case 2: if (!p.prefetch_bytes) p.prefetch_bytes = dir ? 512 : 0; else v32 = &p.prefetch_bytes; break;
            case 3: v64 = &p.grain; break;
            case 4: v64 = &p.strip; break;
            default: return 0;
            }
        }
        if (v64)
            *v64 = dir ? 2 * *v64 : *v64 / 2;
        if (v32)
            *v32 = dir ? 2 * *v32 : *v32 / 2;
        out[n++] = p;
    }
    return n;
}

/* Coordinate descent from the best so far: per parameter, race its neighbours; a winner
 * (by the margin) moves the point; passes until one changes nothing. */
static ic_status coordesc(tuner *U)
{
    for (int pass = 0; pass < COORDESC_PASSES; pass++) {
        bool moved = false;
        for (int f = 0; f < 6 && ic__tune_left_ms(&U->T) > 0; f++) {
            int w = U->T.best;
            ic_codegen_params nb[2];
            int nn = neighbours(U, &U->cs[w].p, f, nb), from = U->n;
            for (int j = 0; j < nn; j++)
                add_cand(U, nb[j]);
            if (U->n == from)
                continue;
            double before = U->T.cand[w].ms;
            ic_status s = search(U, from);
            if (s)
                return s;
            moved |= U->T.best != w && U->T.cand[U->T.best].ms < before * (1 - IC__TUNE_MARGIN / 3);
        }
        if (!moved)
            break;
    }
    return IC_OK;
}

/* The winner, confirmed by one more race against the default (ic__tune_confirm; at most
 * CONFIRMATIONS tries) and its outputs checked; the default when none passes. */
static int choose(tuner *U)
{
    for (int tries = 0;;) {
        int w = ic__tune_winner(&U->T);
        if (w > 0 && !U->cs[w].fn && compile(U, 1, &w))
            return 0;
        if (w > 0 && U->cs[w].fn && !U->cs[w].confirmed) {
            if (tries++ == CONFIRMATIONS)
                return 0;
            U->cs[w].confirmed = true;
            if (!ic__tune_confirm(&U->T, w))
                continue;
        }
        if (w == 0 || (U->cs[w].fn && outputs_match(U, w)))
            return w;
        if (U->cs[w].fn)
            ic__logf(U->c, 0, "autotune: %s: candidate '%s' computes other outputs than the default: rejected",
                     U->T.kernel, U->T.cand[w].desc);
        ic__tune_reject(&U->T, w); /* the next best, if any, is tried */
    }
}

/* ---- records ---- */

/* What a record depends on besides the kernel: the host, the default params (which carry
 * the options' overrides) and the tuning flags. */
static char *record_key(const tuner *U)
{
    char dp[1024], extra[4096];
    ic__cg_params_format(&U->cs[0].p, dp, sizeof dp);
    snprintf(extra, sizeof extra, "cpu-tune %s %s %s threads %d flags %d\n%s", ic_codegen_target_triple(U->t),
             ic_codegen_target_cpu(U->t), ic_codegen_target_features(U->t), U->o->threads, U->o->autotune, dp);
    return ic__kernel_key(U->prog, U->k, U->cs[0].p.gemm.prepack == 1, extra);
}

static bool read_record(tuner *U, const char *key, ic_codegen_params *out)
{
    void *data;
    size_t n;
    if (!key || !ic__cache_get(U->c, IC__CACHE_CPU_TUNE, key, &data, &n))
        return false;
    ic__tune_record r;
    ic_codegen_params p = *out;
    bool ok = ic__tune_record_parse(data, n, &r) && ic__cg_params_parse(r.params, &p);
    free(data);
    if (ok)
        *out = p;
    return ok;
}

static void write_record(tuner *U, const char *key, const ic_codegen_params *chosen)
{
    ic__tune_record r;
    char text[2048];
    ic__cg_params_format(chosen, r.params, sizeof r.params);
    r.ms = U->T.cand[U->chosen].ms;
    r.default_ms = U->T.cand[0].ms;
    if (key && ic__tune_record_format(&r, text, sizeof text))
        ic__cache_put(U->c, IC__CACHE_CPU_TUNE, key, text, strlen(text));
}

/* ---- one kernel ---- */

static ic_status tune_search(tuner *U, ic_codegen_params *params)
{
    const ic__tune_graph *G = U->T.G;
    ic_codegen_params base = U->cs[0].p; /* the default, resolved */
    if (G->exhaustive)
        U->kind == KIND_GEMM ? gemm_full(U, &base) : loop_full(U, &base);
    else
        U->kind == KIND_GEMM ? gemm_pruned(U, &base) : loop_pruned(U, &base);
    int zero = 0;
    ic_status s = compile(U, 1, &zero);
    if (s || U->cs[0].failed)
        return s; /* the default does not compile: the real compile says why */
    if ((s = search(U, 1)))
        return s;
    if ((G->flags & IC_TUNE_COORDESC) && !G->exhaustive && (s = coordesc(U)))
        return s;
    U->chosen = choose(U);
    if (U->chosen > 0)
        *params = U->cs[U->chosen].p;
    return IC_OK;
}

/* Tunes kernel U->k, whose params are the default on entry and the choice on return: a
 * record's when the cache has one, else the search's (recorded). */
static ic_status tune_kernel(ic__tune_graph *G, tuner *U, ic_codegen_params *params, bool cache)
{
    U->def = *params;
    ic__tune_begin(&U->T, G, U->kern->name, "", U->kind == KIND_GEMM ? 4 : 1, run_cand, U);
    if (!mark_buffers(U)) {
        free_data(U);
        return ic__error(U->c, IC_ENOMEM, "autotune: out of memory");
    }
    U->kind == KIND_GEMM ? gemm_facts(U, params) : loop_facts(U);
    ic_status s = IC_OK;
    if (add_cand(U, *params) != 0) {
        s = ic__error(U->c, IC_ENOMEM, "autotune: out of memory");
    } else {
        char *key = cache ? record_key(U) : NULL;
        if (read_record(U, key, params)) {
            ic_codegen_params shown = *params; /* as the search described it */
            U->kind == KIND_GEMM ? gemm_canon(U, &shown) : loop_canon(U, &shown);
            describe(U, &shown, U->T.cand[0].desc, sizeof U->T.cand[0].desc);
            ic__tune_end(&U->T, -1);
        } else if (!make_data(U)) { /* the default stays: a compile that can run needs less */
            ic__logf(U->c, 0, "autotune: %s: no memory for the benchmark's buffers: not tuned", U->T.kernel);
            ic__tune_skip(&U->T);
        } else if (!(s = tune_search(U, params))) {
            if (U->T.cand[0].races) /* a search the budget cut before any race records nothing */
                write_record(U, key, params);
            ic__tune_end(&U->T, U->chosen);
        }
        free(key);
    }
    for (int i = 0; i < U->n; i++)
        ic__jit_destroy(U->cs[i].jit);
    ic__free(U->c, U->cs);
    ic__free(U->c, U->T.cand);
    free_data(U);
    return s;
}

/* The order of tuning: GEMM kernels first (most of the time, most to gain). */
static int order_kernels(const ic_program *prog, const int *code, const ic_buffer *bufs,
                         const ic_codegen_params *params, int flags, int *ks, int *kinds, double *weight)
{
    int n = 0;
    *weight = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int k = 0; k < ic_program_num_kernels(prog); k++) {
            int kind = code[k] == k ? kind_of(ic_program_kernel(prog, k), bufs, &params[k], flags) : KIND_NONE;
            if (kind == KIND_NONE || (kind == KIND_GEMM) != (pass == 0))
                continue;
            ks[n] = k, kinds[n++] = kind;
            *weight += kind == KIND_GEMM ? 4 : 1;
        }
    return n;
}

ic_status ic__tune_cpu(ic__pipe *P, const ic_program *prog, const ic_codegen_target *t, const int *code,
                       ic_codegen_params *params)
{
    const ic_compile_options *o = P->bopts;
    ic_ctx *c = P->c;
    int nk = ic_program_num_kernels(prog), nb = ic_program_num_buffers(prog);
    if (!(o->autotune & ~(IC_TUNE_COORDESC | IC_TUNE_EXHAUSTIVE)) || nk == 0)
        return IC_OK;
    int *ks = ic__calloc(c, (size_t)nk, sizeof *ks), *kinds = ic__calloc(c, (size_t)nk, sizeof *kinds);
    ic_buffer *bufs = ic__calloc(c, (size_t)nb + 1, sizeof *bufs);
    if (!ks || !kinds || !bufs) {
        ic__free(c, ks), ic__free(c, kinds), ic__free(c, bufs);
        return ic__error(c, IC_ENOMEM, "autotune: out of memory");
    }
    for (int b = 0; b < nb; b++)
        bufs[b] = *ic_program_buffer(prog, b);
    double weight;
    int n = order_kernels(prog, code, bufs, params, o->autotune, ks, kinds, &weight);
    ic__tune_graph G;
    ic__tune_graph_init(&G, c, o->autotune, o->autotune_budget_s, P->tune, n, weight);
    if (P->tune)
        P->tune->kernels += n;
    bool cache = ic__cache_on(c, o->cache);
    ic_status s = IC_OK;
    for (int i = 0; i < n && !s; i++) {
        tuner U = { .c = c, .prog = prog, .t = t, .o = o, .k = ks[i], .kind = kinds[i], .nb = nb, .bufs = bufs,
                    .kern = ic_program_kernel(prog, ks[i]) };
        s = tune_kernel(&G, &U, &params[ks[i]], cache);
    }
    ic__tune_graph_end(&G);
    for (int k = 0; k < nk; k++) /* kernels that run another's code take its params */
        params[k] = params[code[k]];
    ic__free(c, ks), ic__free(c, kinds), ic__free(c, bufs);
    return s;
}
