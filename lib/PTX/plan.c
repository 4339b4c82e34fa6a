/* plan.c - how a loop-IR kernel maps onto GPU threads: validation of the kernel, the affine
 * forms of its index arithmetic (lib/Lower/affine.c: which accesses are contiguous in which
 * loop variable, so they can be 16-byte vector accesses), value numbering across stages (so a row kept in
 * registers is not re-read), the choice of POINTWISE / ROW / COLUMN and the launch geometry. */
#include <string.h>
#include "analysis-impl.h"
#include "pgemm-impl.h"

static bool is_16(ic_dtype t) { return t == IC_F16 || t == IC_BF16; }

static int64_t pow2_floor(int64_t x)
{
    int64_t p = 1;
    while (p * 2 <= x)
        p *= 2;
    return p;
}

static int64_t pow2_ceil(int64_t x)
{
    int64_t p = 1;
    while (p < x)
        p *= 2;
    return p;
}

static bool is_pow2(int64_t x) { return x > 0 && (x & (x - 1)) == 0; }

/* ---- analysis ---- */

static void analyse_instr(const ic_kernel *k, int s, int i, ic__pinfo *inf)
{
    const ic_linstr *in = &k->stages[s].instr[i];
    int n = ic_linstr_arity(in);
    const ic__pinfo *A = n > 0 ? &inf[in->a] : NULL;
    const ic__pinfo *B = n > 1 ? &inf[in->b] : NULL;
    const ic__pinfo *C = n > 2 ? &inf[in->c] : NULL;
    ic__pinfo *o = &inf[i];
    memset(o, 0, sizeof *o);
    o->vn = -1;
    if (A) { o->deps |= A->deps; o->acc |= A->acc; }
    if (B) { o->deps |= B->deps; o->acc |= B->acc; }
    if (C) { o->deps |= C->deps; o->acc |= C->acc; }
    if (in->op == IC_L_VAR)
        o->deps = 1u << in->a;
    if (in->op == IC_L_ACC) {
        o->acc = true;
        o->deps = k->nouter >= 32 ? 0 : (1u << k->nouter) - 1; /* per outer point */
    }
}

/* Value numbers: equal (op, type, operand numbers, attributes) across stages share one. */
typedef struct { int op, type, a, b, c, buf, cmp; int64_t imm; double f; bool isint; } vkey;

static int value_number(vkey *keys, int *nkeys, const vkey *k)
{
    for (int i = 0; i < *nkeys; i++)
        if (!memcmp(&keys[i], k, sizeof *k))
            return i;
    keys[*nkeys] = *k;
    return (*nkeys)++;
}

static ic_status analyse(ic_ctx *c, const ic_kernel *k, int nbufs, ic__pplan *pl)
{
    int total = 0;
    for (int s = 0; s < k->nstages; s++)
        total += k->stages[s].ninstr;
    pl->info = ic__calloc(c, (size_t)k->nstages + 1, sizeof *pl->info);
    pl->smem_off = ic__calloc(c, (size_t)k->nstages + 1, sizeof *pl->smem_off);
    pl->stored = ic__calloc(c, (size_t)nbufs + 1, sizeof *pl->stored);
    pl->used = ic__calloc(c, (size_t)nbufs + 1, sizeof *pl->used);
    vkey *keys = ic__calloc(c, (size_t)total + 1, sizeof *keys);
    ic__affine *forms = ic__calloc(c, (size_t)total + 1, sizeof *forms); /* of one stage */
    if (!pl->info || !pl->smem_off || !pl->stored || !pl->used || !keys || !forms) {
        ic__free(c, keys);
        ic__free(c, forms);
        return ic__error(c, IC_ENOMEM, "ptx: out of memory planning kernel '%s'", k->name);
    }
    for (int s = 0; s < k->nstages; s++) {
        pl->info[s] = ic__calloc(c, (size_t)k->stages[s].ninstr + 1, sizeof **pl->info);
        pl->smem_off[s] = ic__calloc(c, (size_t)k->stages[s].ninstr + 1, sizeof **pl->smem_off);
        if (!pl->info[s] || !pl->smem_off[s]) {
            ic__free(c, keys);
            ic__free(c, forms);
            return ic__error(c, IC_ENOMEM, "ptx: out of memory planning kernel '%s'", k->name);
        }
        for (int i = 0; i < k->stages[s].ninstr; i++) {
            const ic_linstr *in = &k->stages[s].instr[i];
            if (in->op == IC_L_STORE)
                pl->stored[in->buf] = true;
            if (in->op == IC_L_STORE || in->op == IC_L_LOAD)
                pl->used[in->buf] = true;
        }
        bool has_red = false;
        for (int i = 0; i < k->stages[s].ninstr; i++)
            has_red |= k->stages[s].instr[i].op == IC_L_REDUCE;
        pl->nreduce_stages += has_red;
    }
    int nkeys = 0;
    for (int s = 0; s < k->nstages; s++) {
        ic__pinfo *inf = pl->info[s];
        for (int i = 0; i < k->stages[s].ninstr; i++) {
            const ic_linstr *in = &k->stages[s].instr[i];
            analyse_instr(k, s, i, inf);
            _Static_assert(IC__PTX_NVARS == IC__NVARS, "ic__pinfo.coef holds an ic__affine's");
            ic__affine_instr(in, i, k->nouter + k->ninner, forms, &forms[i]);
            inf[i].affine = forms[i].ok;
            inf[i].c0 = forms[i].c0;
            memcpy(inf[i].coef, forms[i].coef, sizeof inf[i].coef);
            if (in->op == IC_L_REDUCE || in->op == IC_L_STORE ||
                (in->op == IC_L_LOAD && pl->stored[in->buf]))
                continue;
            /* f16/bf16 widened to f32 is recomputed from the kept 16-bit load (one shift), so
             * a row kept in registers costs half the registers */
            if (in->op == IC_L_CAST && is_16(k->stages[s].instr[in->a].type))
                continue;
            vkey key;
            memset(&key, 0, sizeof key);
            key.op = in->op;
            key.type = in->type;
            key.a = key.b = key.c = key.buf = key.cmp = -1;
            int n = ic_linstr_arity(in);
            if (in->op == IC_L_VAR || in->op == IC_L_ACC) {
                key.a = in->a;
                key.b = in->op == IC_L_ACC ? in->b : -1;
            } else {
                if (n > 0) key.a = inf[in->a].vn;
                if (n > 1) key.b = inf[in->b].vn;
                if (n > 2) key.c = inf[in->c].vn;
                if ((n > 0 && key.a < 0) || (n > 1 && key.b < 0) || (n > 2 && key.c < 0))
                    continue;
            }
            if (in->op == IC_L_LOAD)
                key.buf = in->buf;
            if (in->op == IC_L_CMP)
                key.cmp = in->cmp;
            if (in->op == IC_L_CONST) {
                key.imm = in->imm.i;
                key.f = in->imm.f;
                key.isint = in->imm.is_int;
            }
            inf[i].vn = value_number(keys, &nkeys, &key);
        }
    }
    pl->nvn = nkeys;
    ic__free(c, keys);
    ic__free(c, forms);
    return IC_OK;
}

bool ic__pplan_vec_ok(const ic__pplan *pl, const ic__pinfo *off, int V)
{
    if (V <= 1)
        return true;
    if (pl->lanevar < 0 || !off->affine || off->coef[pl->lanevar] != 1 || off->c0 % V)
        return false;
    for (int v = 0; v < IC__PTX_NVARS; v++)
        if (v != pl->lanevar && off->coef[v] % V)
            return false;
    return true;
}

/* The loads and stores of k's stages (only the REDUCE and INNER ones with inner_stages), in
 * order: next_access returns the next one, NULL after the last; s is its stage. */
typedef struct {
    const ic_kernel *k;
    bool inner_stages;
    int s, i;
} accesses;

static const ic_linstr *next_access(accesses *it)
{
    for (; it->s < it->k->nstages; it->s++, it->i = -1) {
        const ic_stage *st = &it->k->stages[it->s];
        if (it->inner_stages && st->kind == IC_STAGE_BODY)
            continue;
        while (++it->i < st->ninstr)
            if (st->instr[it->i].op == IC_L_LOAD || st->instr[it->i].op == IC_L_STORE)
                return &st->instr[it->i];
    }
    return NULL;
}

/* Smallest element (bytes) among the buffers the given stages touch, and how many
 * accesses of those stages are vector-legal with V lanes. */
static int narrowest(const ic_kernel *k, const ic_buffer *bufs, bool inner_stages)
{
    int m = 8;
    accesses it = { k, inner_stages, 0, -1 };
    for (const ic_linstr *in; (in = next_access(&it));) {
        int sz = (int)ic_dtype_size(bufs[in->buf].dtype);
        m = sz < m ? sz : m;
    }
    return m;
}

static int count_vec(const ic__pplan *pl, const ic_kernel *k, int V, bool inner_stages)
{
    int n = 0;
    accesses it = { k, inner_stages, 0, -1 };
    for (const ic_linstr *in; (in = next_access(&it));)
        if ((pl->info[it.s][in->a].deps & (1u << pl->lanevar)) &&
            ic__pplan_vec_ok(pl, &pl->info[it.s][in->a], V))
            n++;
    return n;
}

/* Lanes: the widest power of two <= want dividing `size` with some vector-legal access. */
static int pick_vec(ic__pplan *pl, const ic_kernel *k, const ic_buffer *bufs, int want,
                    int64_t size, bool inner_stages, bool forced)
{
    if (pl->lanevar < 0)
        return 1;
    if (!want) {
        want = 16 / narrowest(k, bufs, inner_stages);
        want = want > IC__PTX_MAXV ? IC__PTX_MAXV : want;
    }
    for (int V = want; V > 1; V /= 2)
        if (size % V == 0 && (forced || count_vec(pl, k, V, inner_stages) > 0))
            return V;
    return 1;
}

static int64_t outer_points(const ic_kernel *k)
{
    int64_t P = 1;
    for (int d = 0; d < k->nouter; d++)
        P *= k->outer[d];
    return P;
}

static int64_t inner_points(const ic_kernel *k)
{
    int64_t N = 1;
    for (int d = 0; d < k->ninner; d++)
        N *= k->inner[d];
    return N;
}

static ic_ptx_mode choose_mode(const ic__pplan *pl, const ic_kernel *k)
{
    bool inner = false;
    for (int s = 0; s < k->nstages; s++)
        inner |= k->stages[s].kind != IC_STAGE_BODY;
    if (!inner)
        return IC_PTX_POINTWISE;
    if (k->nouter == 0 || k->ninner == 0 || pl->P == 1)
        return IC_PTX_ROW;
    int li = k->nouter + k->ninner - 1, lo = k->nouter - 1;
    int row = 0, col = 0;
    for (int s = 0; s < k->nstages; s++) {
        if (k->stages[s].kind == IC_STAGE_BODY)
            continue;
        for (int i = 0; i < k->stages[s].ninstr; i++) {
            const ic_linstr *in = &k->stages[s].instr[i];
            if (in->op != IC_L_LOAD && in->op != IC_L_STORE)
                continue;
            const ic__pinfo *o = &pl->info[s][in->a];
            if (!o->affine)
                continue;
            if (o->coef[li] == 1)
                row++;
            else if (o->coef[lo] == 1)
                col++;
        }
    }
    return col > row ? IC_PTX_COLUMN : IC_PTX_ROW;
}

static int red_bytes(const ic_linstr *in, ic_dtype acc_t)
{
    int sz = acc_t == IC_BOOL ? 4 : (int)ic_dtype_size(acc_t);
    if (sz < 4)
        sz = 4;
    return in->red == IC_RED_ARGMAX ? 16 : sz;
}

/* Shared memory: one region per REDUCE of `per` partials each. */
static int place_smem(ic__pplan *pl, const ic_kernel *k, int64_t per)
{
    int off = 0;
    for (int s = 0; s < k->nstages; s++)
        for (int i = 0; i < k->stages[s].ninstr; i++) {
            const ic_linstr *in = &k->stages[s].instr[i];
            if (in->op != IC_L_REDUCE)
                continue;
            const ic_linstr *val = &k->stages[s].instr[in->a];
            int64_t bytes = per * red_bytes(in, val->type);
            pl->smem_off[s][i] = off;
            if (off + bytes > (int64_t)1 << 30)
                return 1 << 30;
            off += (int)((bytes + 15) & ~(int64_t)15);
        }
    return off;
}

static ic_status bad_params(ic_ctx *c, const ic_kernel *k, const char *what)
{
    return ic__error(c, IC_EINVAL, "ptx: kernel '%s': bad launch params: %s",
                     k->name ? k->name : "?", what);
}

static ic_status geometry_pointwise(ic_ctx *c, ic__pplan *pl, const ic_kernel *k,
                                    const ic_buffer *bufs, const ic_ptx_params *in)
{
    pl->lanevar = k->nouter > 0 ? k->nouter - 1 : -1;
    int64_t last = k->nouter > 0 ? k->outer[k->nouter - 1] : 1;
    int V = pick_vec(pl, k, bufs, in->vec, k->nouter == 1 ? (int64_t)1 << 40 : last, false,
                     in->vec != 0);
    if (in->vec && V != in->vec && k->nouter != 1)
        V = pick_vec(pl, k, bufs, in->vec, last, false, true);
    pl->V = V;
    pl->tail = V > 1 && pl->P % V != 0;
    pl->block = in->block ? in->block : 256;
    pl->ept = in->ept ? in->ept : 1;
    if (pl->ept < 1 || pl->ept > 16)
        return bad_params(c, k, "ept must be 1..16");
    int64_t chunks = (pl->P + V - 1) / V;
    int64_t threads = (chunks + pl->ept - 1) / pl->ept;
    pl->grid = (threads + pl->block - 1) / pl->block;
    pl->T = 1;
    pl->R = pl->block;
    return IC_OK;
}

/* The REDUCE stage a row may be split at across blocks: the only stage with inner loops,
 * every later stage a BODY, no earlier stage storing (every block would run it). -1: none. */
static int split_stage(const ic_kernel *k)
{
    int r = -1;
    for (int s = 0; s < k->nstages; s++) {
        const ic_stage *st = &k->stages[s];
        if (st->kind == IC_STAGE_BODY) {
            if (r < 0)
                for (int i = 0; i < st->ninstr; i++)
                    if (st->instr[i].op == IC_L_STORE)
                        return -1;
            continue;
        }
        if (r >= 0 || st->kind != IC_STAGE_REDUCE)
            return -1;
        r = s;
    }
    return r;
}

static int count_reduces(const ic_stage *st)
{
    int n = 0;
    for (int i = 0; i < st->ninstr; i++)
        n += st->instr[i].op == IC_L_REDUCE;
    return n;
}

/* A REDUCE accumulating in f64 (layer_norm's mean and variance): its combine costs twice the
 * shuffles, and two loads a thread measured best for bf16 rows too (H100, 8192 x 4096
 * layer_norm: 92.6% of copy against 90.4% with four). */
static bool f64_reduce(const ic_kernel *k)
{
    for (int s = 0; s < k->nstages; s++)
        for (int i = 0; i < k->stages[s].ninstr; i++)
            if (k->stages[s].instr[i].op == IC_L_REDUCE && k->stages[s].instr[i].type == IC_F64)
                return true;
    return false;
}

static ic_status geometry_row(ic_ctx *c, ic__pplan *pl, const ic_kernel *k,
                              const ic_buffer *bufs, const ic_ptx_params *in, int nsms)
{
    pl->lanevar = k->ninner > 0 ? k->nouter + k->ninner - 1 : -1;
    int64_t last = k->ninner > 0 ? k->inner[k->ninner - 1] : 1;
    pl->V = pick_vec(pl, k, bufs, in->vec, last, true, in->vec != 0);
    int64_t nvec = pl->N / pl->V;
    int64_t T = in->threads_per_row;
    int esz = narrowest(k, bufs, true);
    if (!T) {
        /* Measured on H100/H200 (8192 x 4096 softmax, layer_norm, sums): two 16-byte loads
         * a thread for 4-byte data, four for 2-byte data (whose rows have half the bytes to
         * amortise the combine); never 1024 threads a row (at most two blocks an SM). More
         * threads a row when there are too few rows to fill the GPU. */
        int64_t loads = esz >= 4 || f64_reduce(k) ? 2 : 4;
        T = pow2_floor(nvec / loads > 0 ? nvec / loads : 1);
        T = T > 512 ? 512 : T;
        while (T < 512 && pl->P * T < (int64_t)nsms * 1024 && T * 2 <= nvec)
            T *= 2;
    }
    if (!is_pow2(T) || T > 1024)
        return bad_params(c, k, "threads_per_row must be a power of two <= 1024");
    /* several blocks a row when the rows alone leave the GPU idle (full reductions, few long
     * rows): enough blocks for about two waves, each with at least 8 vectors a thread */
    int64_t S = in->blocks_per_row;
    int sst = split_stage(k);
    if (S < 0 || (S > 1 && (!is_pow2(S) || S > 65536)))
        return bad_params(c, k, "blocks_per_row must be a power of two <= 65536");
    if (S > 1 && sst < 0)
        return bad_params(c, k, "blocks_per_row > 1 needs one REDUCE stage followed by BODY stages");
    if (!S) {
        S = 1;
        if (sst >= 0 && !in->block && T >= 32)
            while (S < 65536 && pl->P * S * 2 * T <= (int64_t)nsms * 2048 && nvec >= S * 2 * T * 8)
                S *= 2;
    }
    if (S > 1 && in->block && in->block != T)
        return bad_params(c, k, "blocks_per_row > 1 needs block == threads_per_row (one row a block)");
    pl->S = (int)S;
    pl->split_stage = S > 1 ? sst : -1;
    int64_t block = in->block;
    if (S > 1)
        block = T < 32 ? 32 : T;
    if (S > 1 && T < 32)
        return bad_params(c, k, "blocks_per_row > 1 needs threads_per_row >= 32");
    if (!block) { /* one row a block from 128 threads a row up (measured faster than two) */
        block = T > 128 ? T : 128;
        int64_t need = T * pow2_ceil(pl->P);
        if (need < block)
            block = need < 32 ? 32 : need;
    }
    if (block % 32 || block > 1024 || block < T || block % T)
        return bad_params(c, k, "block must be a multiple of 32 and of threads_per_row, <= 1024");
    pl->T = (int)T;
    pl->block = (int)block;
    pl->R = (int)(block / T);
    int64_t TS = T * S; /* threads walking one row */
    pl->K = nvec ? (nvec + TS - 1) / TS : 0;
    pl->exact = pl->K * TS == nvec;
    int regs = in->regs_elems > 0 ? in->regs_elems : 128 / (esz < 4 ? esz : 4);
    pl->unrolled = pl->K <= IC__PTX_MAXUNROLL && pl->K * pl->V <= regs;
    pl->cache = pl->unrolled && in->regs_elems >= 0;
    pl->grid = (pl->P + pl->R - 1) / pl->R * S;
    pl->smem = T > 32 ? place_smem(pl, k, (int64_t)pl->R * (T / 32)) : 0;
    if (S > 1) {
        pl->flag_off = pl->smem;
        pl->smem += 16;
        pl->ws_bytes = pl->P * S * 16 * count_reduces(&k->stages[sst]);
        if (pl->ws_bytes > ((int64_t)1 << 30))
            return bad_params(c, k, "blocks_per_row too large: the workspace passes 1 GiB");
    }
    if (pl->smem > IC__PTX_SMEM_MAX)
        return bad_params(c, k, "too much shared memory for this geometry");
    return IC_OK;
}

/* COLUMN split along the inner (reduced) dims: S blocks share each tile of R groups, each
 * walking every (T S)-th inner point from its slice; the last block of a tile to arrive
 * combines the S partials in slice order (deterministic, as the ROW split). Heuristic: up
 * to 1024 threads an SM with at least 8 iterations a thread; the loop takes two iterations
 * a trip, so two 16-byte loads a thread are in flight (32 KiB an SM). A [16384, 4096] f32
 * column sum had 128 tiles of 8 x 32 threads, 256 threads an SM with one load in flight
 * each (65% of copy measured); S = 4 makes it 512 blocks. 1024 threads, not ROW's 2048:
 * sums accumulate in f64 (bf16: 8 lanes, 40 registers), so 2048 would not be resident at
 * once and the last 30% of the blocks would run as a second, thin wave. */
static ic_status column_split(ic_ctx *c, ic__pplan *pl, const ic_kernel *k, const ic_ptx_params *in,
                              int64_t tiles, int nsms, int64_t *out)
{
    int64_t S = in->blocks_per_row;
    int sst = split_stage(k);
    if (S < 0 || (S > 1 && (!is_pow2(S) || S > 65536)))
        return bad_params(c, k, "blocks_per_row must be a power of two <= 65536");
    if (S > 1 && sst < 0)
        return bad_params(c, k, "blocks_per_row > 1 needs one REDUCE stage followed by BODY stages");
    if (!S) {
        S = 1;
        while (sst >= 0 && S < 65536 && tiles * S * 2 * pl->block <= (int64_t)nsms * 1024 &&
               pl->N >= S * 2 * pl->T * 8)
            S *= 2;
    }
    pl->S = (int)S;
    pl->split_stage = S > 1 ? sst : -1;
    if (S > 1) {
        pl->flag_off = pl->smem;
        pl->smem += 16;
        pl->ws_bytes = pl->P * S * 16 * count_reduces(&k->stages[sst]);
        if (pl->ws_bytes > ((int64_t)1 << 30))
            return bad_params(c, k, "blocks_per_row too large: the workspace passes 1 GiB");
        if (pl->smem > IC__PTX_SMEM_MAX)
            return bad_params(c, k, "too much shared memory for this geometry");
    }
    *out = S;
    return IC_OK;
}

static ic_status geometry_column(ic_ctx *c, ic__pplan *pl, const ic_kernel *k,
                                 const ic_buffer *bufs, const ic_ptx_params *in, int nsms)
{
    pl->lanevar = k->nouter - 1;
    pl->V = pick_vec(pl, k, bufs, in->vec, k->outer[k->nouter - 1], true, in->vec != 0);
    int64_t G = pl->P / pl->V;
    int64_t T = in->threads_per_row;
    if (!T) {
        T = 1;
        while (T < 32 && G * T < (int64_t)nsms * 1024 && T * 2 <= pl->N)
            T *= 2;
    }
    if (!is_pow2(T) || T > 1024)
        return bad_params(c, k, "threads_per_row must be a power of two <= 1024");
    int64_t block = in->block;
    if (!block) {
        block = T > 256 ? T : 256;
        int64_t need = T * pow2_ceil(G);
        if (need < block)
            block = need < 32 ? 32 : need;
    }
    if (block % 32 || block > 1024 || block < T || block % T)
        return bad_params(c, k, "block must be a multiple of 32 and of threads_per_row, <= 1024");
    for (;;) {
        pl->smem = T > 1 ? place_smem(pl, k, block * pl->V) : 0;
        if (pl->smem <= IC__PTX_SMEM_MAX)
            break;
        if (in->vec || in->threads_per_row || pl->V == 1)
            return bad_params(c, k, "too much shared memory for this geometry");
        pl->V /= 2;
        G = pl->P / pl->V;
    }
    pl->T = (int)T;
    pl->block = (int)block;
    pl->R = (int)(block / T);
    int64_t tiles = (G + pl->R - 1) / pl->R;
    int64_t S = 0;
    ic_status s = column_split(c, pl, k, in, tiles, nsms, &S);
    if (s)
        return s;
    int64_t TS = T * S; /* threads walking one column */
    pl->K = (pl->N + TS - 1) / TS;
    pl->exact = pl->K * TS == pl->N;
    int esz = narrowest(k, bufs, true);
    int regs = in->regs_elems > 0 ? in->regs_elems : 128 / (esz < 4 ? esz : 4);
    pl->unrolled = pl->K <= IC__PTX_MAXUNROLL && pl->K * pl->V <= regs;
    pl->cache = pl->unrolled && in->regs_elems >= 0;
    pl->grid = tiles * S;
    return IC_OK;
}

/* The compute capability for Hopper warpgroup GEMMs: 90 when the target is exactly sm_90
 * (H100, H200: wgmma needs the sm_90a PTX target, which runs on those alone) and the options
 * allow it, else 0. */
static int wgmma_sm(const ic_ptx_options *o)
{
    int sm = o && o->sm > 0 ? o->sm : 90;
    return sm == 90 && !(o && o->wgmma < 0) ? 90 : 0;
}

ic_status ic__pplan_make(ic_ctx *c, const ic_kernel *k, int nbufs, const ic_buffer *bufs,
                         const ic_ptx_options *o, const ic_ptx_params *params, ic__pplan *pl)
{
    return ic__pplan_make_cv(c, k, nbufs, bufs, o, params, NULL, pl);
}

ic_status ic__pplan_make_cv(ic_ctx *c, const ic_kernel *k, int nbufs, const ic_buffer *bufs,
                            const ic_ptx_options *o, const ic_ptx_params *params,
                            const struct ic__iconv *cv, ic__pplan *pl)
{
    memset(pl, 0, sizeof *pl);
    pl->cv = cv;
    pl->k = k;
    pl->lanevar = -1;
    pl->S = 1;
    pl->split_stage = -1;
    pl->allow_tf32 = o && o->allow_tf32;
    /* the loop IR's own checks; the GPU adds no target limits of its own */
    ic_status s = ic_kernel_verify(c, "ptx", k, nbufs, bufs);
    if (s)
        return s;
    if ((s = analyse(c, k, nbufs, pl)))
        return s;
    ic_ptx_params in;
    memset(&in, 0, sizeof in);
    if (params)
        in = *params;
    if (in.vec && (in.vec > IC__PTX_MAXV || !is_pow2(in.vec)))
        return bad_params(c, k, "vec must be 1, 2, 4 or 8");
    if (in.wgmma < -1 || in.wgmma > 1)
        return bad_params(c, k, "wgmma must be -1, 0 or 1");
    if (in.block && (in.block % 32 || in.block > 1024 || in.block < 32))
        return bad_params(c, k, "block must be a multiple of 32, at most 1024");
    if (k->attn)
        return ic__pattn_plan(c, k, bufs, &in, pl);
    if (in.mode == IC_PTX_ATTENTION)
        return bad_params(c, k, "mode ATTENTION for a kernel that is no attention kernel");
    int nsms = o && o->num_sms > 0 ? o->num_sms : 132;
    pl->P = outer_points(k);
    pl->N = inner_points(k);
    if ((unsigned)in.mode > IC_PTX_GEMM)
        return bad_params(c, k, "unknown mode");
    if (!in.mode || in.mode == IC_PTX_GEMM) {
        bool is_gemm = false;
        if ((s = ic__pgemm_plan(c, k, bufs, &in, nsms, wgmma_sm(o), in.mode == IC_PTX_GEMM, pl, &is_gemm)))
            return s;
        if (is_gemm) {
            if (pl->P == 0)
                pl->grid = 0;
            if (pl->grid > 0x7fffffff)
                return ic__error(c, IC_EUNSUPPORTED, "ptx: kernel '%s': %lld blocks exceed the grid limit",
                                 k->name, (long long)pl->grid);
            pl->prm.mode = IC_PTX_GEMM;
            pl->prm.block = pl->block;
            pl->prm.vec = 1;
            pl->prm.ept = 1;
            pl->prm.threads_per_row = 1;
            pl->prm.blocks_per_row = 1;
            pl->prm.regs_elems = in.regs_elems;
            return IC_OK;
        }
    }
    pl->mode = in.mode ? in.mode : choose_mode(pl, k);
    bool inner = false;
    for (int st = 0; st < k->nstages; st++)
        inner |= k->stages[st].kind != IC_STAGE_BODY;
    if (pl->mode == IC_PTX_POINTWISE && inner)
        return bad_params(c, k, "POINTWISE for a kernel with inner loops");
    if (pl->mode == IC_PTX_COLUMN && (k->nouter == 0 || !inner))
        return bad_params(c, k, "COLUMN needs outer dims and inner loops");
    if (pl->mode == IC_PTX_POINTWISE)
        s = geometry_pointwise(c, pl, k, bufs, &in);
    else if (pl->mode == IC_PTX_ROW)
        s = geometry_row(c, pl, k, bufs, &in, nsms);
    else
        s = geometry_column(c, pl, k, bufs, &in, nsms);
    if (s)
        return s;
    if (pl->P == 0)
        pl->grid = 0;
    if (pl->grid > 0x7fffffff)
        return ic__error(c, IC_EUNSUPPORTED, "ptx: kernel '%s': %lld blocks exceed the grid limit",
                         k->name, (long long)pl->grid);
    pl->prm.mode = pl->mode;
    pl->prm.block = pl->block;
    pl->prm.vec = pl->V;
    pl->prm.ept = pl->mode == IC_PTX_POINTWISE ? pl->ept : 1;
    pl->prm.threads_per_row = pl->T;
    pl->prm.blocks_per_row = pl->S;
    pl->prm.regs_elems = in.regs_elems ? in.regs_elems : 128 / (narrowest(k, bufs, true) < 4 ? narrowest(k, bufs, true) : 4);
    return IC_OK;
}

void ic__pplan_free(ic_ctx *c, ic__pplan *pl)
{
    if (pl->info)
        for (int s = 0; s < pl->k->nstages; s++)
            ic__free(c, pl->info[s]);
    if (pl->smem_off)
        for (int s = 0; s < pl->k->nstages; s++)
            ic__free(c, pl->smem_off[s]);
    ic__free(c, pl->info);
    ic__free(c, pl->smem_off);
    ic__free(c, pl->stored);
    ic__free(c, pl->used);
    ic__pgemm_free(c, pl);
    memset(pl, 0, sizeof *pl);
}
