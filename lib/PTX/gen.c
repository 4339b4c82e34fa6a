/* gen.c - kernel skeletons: the PTX entry (one global pointer per buffer, noalias, readonly
 * where never stored, so loads become ld.global.nc), thread indices, and the three mappings:
 *   POINTWISE  a thread takes V consecutive elements of the flattened outer space (16-byte
 *              accesses), with a per-element tail when V does not divide the size;
 *   ROW        T threads per outer point walk the inner space V elements at a time; REDUCE
 *              partials combine across lanes, then warp shuffles, then shared memory;
 *   COLUMN     a thread owns V adjacent outer points (lanes) and walks every T-th inner point;
 *              partials combine through shared memory.
 * Stages follow each other in one thread; a REDUCE's combined value (an ACC) is an SSA value
 * every later stage uses. When a thread's share of the inner space is small the iterations
 * are unrolled and values are reused across stages (the row stays in registers). */
#include <string.h>
#include "ptx-impl.h"
#include "math-impl.h"

LLVMValueRef ic__pg_i32(ic__pg *G, int64_t v) { return LLVMConstInt(G->t_i32, (unsigned long long)v, 1); }
LLVMValueRef ic__pg_i64(ic__pg *G, int64_t v) { return LLVMConstInt(G->t_i64, (unsigned long long)v, 1); }

LLVMValueRef ic__pg_call(ic__pg *G, const char *name, LLVMTypeRef *over, int nover,
                         LLVMValueRef *args, int nargs)
{
    return ic__llvm_intrinsic(G->mod, G->b, name, over, nover, args, nargs);
}

LLVMValueRef ic__pg_alloca(ic__pg *G, LLVMTypeRef t)
{
    LLVMBuilderRef b = ic__entry_builder(G->ctx, G->entry);
    LLVMValueRef a = LLVMBuildAlloca(b, t, "");
    LLVMDisposeBuilder(b);
    return a;
}

LLVMValueRef ic__pg_loop_begin(ic__pg *G, ic__pg_loop *L, LLVMValueRef start, LLVMIntPredicate pred,
                               LLVMValueRef lim, const char *const name[3])
{
    LLVMBuilderRef b = G->b;
    L->slot = ic__pg_alloca(G, G->t_i64);
    LLVMBuildStore(b, start, L->slot);
    L->head = LLVMAppendBasicBlockInContext(G->ctx, G->fn, name[0]);
    LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(G->ctx, G->fn, name[1]);
    L->done = LLVMAppendBasicBlockInContext(G->ctx, G->fn, name[2]);
    LLVMBuildBr(b, L->head);
    LLVMPositionBuilderAtEnd(b, L->head);
    LLVMValueRef x = LLVMBuildLoad2(b, G->t_i64, L->slot, "");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, pred, x, lim, ""), body, L->done);
    LLVMPositionBuilderAtEnd(b, body);
    return x;
}

void ic__pg_loop_end(ic__pg *G, const ic__pg_loop *L, LLVMValueRef x, LLVMValueRef step)
{
    LLVMBuildStore(G->b, LLVMBuildAdd(G->b, x, step, ""), L->slot);
    LLVMBuildBr(G->b, L->head);
    LLVMPositionBuilderAtEnd(G->b, L->done);
}

static LLVMValueRef elem_ptr(ic__pg *G, LLVMTypeRef t, LLVMValueRef buf, int i)
{
    LLVMValueRef ix = ic__pg_i32(G, i);
    return LLVMBuildGEP2(G->b, t, buf, &ix, 1, "");
}

void ic__pg_store_n(ic__pg *G, LLVMTypeRef t, LLVMValueRef buf, const LLVMValueRef *v, int n)
{
    for (int i = 0; i < n; i++)
        LLVMBuildStore(G->b, v[i], elem_ptr(G, t, buf, i));
}

void ic__pg_load_n(ic__pg *G, LLVMTypeRef t, LLVMValueRef buf, LLVMValueRef *out, int n)
{
    for (int i = 0; i < n; i++)
        out[i] = LLVMBuildLoad2(G->b, t, elem_ptr(G, t, buf, i), "");
}

LLVMBasicBlockRef ic__pg_if(ic__pg *G, LLVMValueRef cond, const char *what)
{
    if (!cond)
        return NULL;
    LLVMBasicBlockRef then = LLVMAppendBasicBlockInContext(G->ctx, G->fn, what);
    LLVMBasicBlockRef cont = LLVMAppendBasicBlockInContext(G->ctx, G->fn, "");
    LLVMBuildCondBr(G->b, cond, then, cont);
    LLVMPositionBuilderAtEnd(G->b, then);
    return cont;
}

void ic__pg_endif(ic__pg *G, LLVMBasicBlockRef cont)
{
    if (!cont)
        return;
    LLVMBuildBr(G->b, cont);
    LLVMPositionBuilderAtEnd(G->b, cont);
}

LLVMValueRef ic__pg_ext(ic__pg *G, const char *name, LLVMTypeRef ret, LLVMTypeRef *pt, int n,
                        LLVMValueRef *args)
{
    LLVMTypeRef ft = LLVMFunctionType(ret, pt, (unsigned)n, 0);
    LLVMValueRef fn = LLVMGetNamedFunction(G->mod, name);
    if (!fn)
        fn = LLVMAddFunction(G->mod, name, ft);
    return LLVMBuildCall2(G->b, ft, fn, args, (unsigned)n, "");
}

LLVMValueRef ic__pg_sreg(ic__pg *G, const char *name)
{
    if (G->emu)
        return ic__pg_ext(G, strstr(name, "ctaid") ? "ic__emu_ctaid" : "ic__emu_tid", G->t_i32, NULL, 0, NULL);
    return ic__pg_call(G, name, NULL, 0, NULL, 0);
}

/* Sets loop variables first..first+n-1 from flat index x (i64, 0 <= x < total). */
void ic__pg_decompose(ic__pg *G, LLVMValueRef x, int n, const int64_t *sizes, int first,
                      int64_t total)
{
    LLVMBuilderRef b = G->b;
    bool narrow = total <= 0x7fffffff;
    LLVMValueRef y = narrow ? LLVMBuildTrunc(b, x, G->t_i32, "") : x;
    LLVMTypeRef ty = narrow ? G->t_i32 : G->t_i64;
    for (int d = n - 1; d >= 0; d--) {
        LLVMValueRef v;
        if (sizes[d] == 1) {
            v = LLVMConstNull(ty);
        } else if (d == 0) {
            v = y;
        } else {
            LLVMValueRef k = LLVMConstInt(ty, (unsigned long long)sizes[d], 0);
            v = LLVMBuildURem(b, y, k, "");
            y = LLVMBuildUDiv(b, y, k, "");
        }
        G->var[first + d] = narrow ? LLVMBuildZExt(b, v, G->t_i64, "") : v;
    }
}

void ic__pg_emit_stage(ic__pg *G, int s)
{
    const ic_stage *st = &G->k->stages[s];
    const ic__pplan *pl = G->pl;
    for (int i = 0; i < st->ninstr; i++) {
        int vn = pl->info[s][i].vn;
        ic__lv *slot = NULL;
        if (G->it >= 0 && G->cache && vn >= 0) {
            slot = &G->cache[(size_t)G->it * (size_t)pl->nvn + (size_t)vn];
            if (G->cached[(size_t)G->it * (size_t)pl->nvn + (size_t)vn]) {
                G->vals[i] = *slot;
                continue;
            }
        }
        ic__pg_instr(G, s, i);
        if (slot) {
            *slot = G->vals[i];
            G->cached[(size_t)G->it * (size_t)pl->nvn + (size_t)vn] = true;
        }
    }
}

/* ---- POINTWISE ---- */

static void pointwise_at(ic__pg *G, LLVMValueRef base, int nl)
{
    const ic_kernel *k = G->k;
    ic__pg_decompose(G, base, k->nouter, k->outer, 0, G->pl->P);
    G->nl = nl;
    G->vec = nl > 1;
    G->valid = NULL;
    G->pvalid = NULL;
    G->it = -1;
    for (int s = 0; s < k->nstages; s++)
        ic__pg_emit_stage(G, s);
}

static void gen_pointwise(ic__pg *G)
{
    const ic__pplan *pl = G->pl;
    LLVMBuilderRef b = G->b;
    LLVMValueRef tid = LLVMBuildZExt(b, G->tid, G->t_i64, "");
    LLVMValueRef bid = LLVMBuildZExt(b, G->bid, G->t_i64, "");
    int64_t per_block = (int64_t)pl->block * pl->ept;
    bool full = pl->grid * per_block * pl->V == pl->P;
    for (int e = 0; e < pl->ept; e++) {
        LLVMValueRef chunk = LLVMBuildAdd(b, LLVMBuildMul(b, bid, ic__pg_i64(G, per_block), ""),
                                          LLVMBuildAdd(b, tid, ic__pg_i64(G, (int64_t)e * pl->block), ""), "");
        LLVMValueRef base = LLVMBuildMul(b, chunk, ic__pg_i64(G, pl->V), "");
        LLVMBasicBlockRef cont = ic__pg_if(G, full ? NULL : LLVMBuildICmp(b, LLVMIntSLT, base, ic__pg_i64(G, pl->P), ""), "in");
        if (!pl->tail) {
            pointwise_at(G, base, pl->V);
        } else {
            LLVMValueRef whole = LLVMBuildICmp(b, LLVMIntSLE, LLVMBuildAdd(b, base, ic__pg_i64(G, pl->V), ""),
                                               ic__pg_i64(G, pl->P), "");
            LLVMBasicBlockRef fast = LLVMAppendBasicBlockInContext(G->ctx, G->fn, "whole");
            LLVMBasicBlockRef slow = LLVMAppendBasicBlockInContext(G->ctx, G->fn, "tail");
            LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(G->ctx, G->fn, "");
            LLVMBuildCondBr(b, whole, fast, slow);
            LLVMPositionBuilderAtEnd(b, fast);
            pointwise_at(G, base, pl->V);
            LLVMBuildBr(b, join);
            LLVMPositionBuilderAtEnd(b, slow);
            for (int l = 0; l < pl->V; l++) {
                LLVMValueRef x = LLVMBuildAdd(b, base, ic__pg_i64(G, l), "");
                LLVMBasicBlockRef c2 = ic__pg_if(G, LLVMBuildICmp(b, LLVMIntSLT, x, ic__pg_i64(G, pl->P), ""), "lane");
                pointwise_at(G, x, 1);
                ic__pg_endif(G, c2);
            }
            LLVMBuildBr(b, join);
            LLVMPositionBuilderAtEnd(b, join);
        }
        ic__pg_endif(G, cont);
    }
}

/* ---- ROW and COLUMN ---- */

static bool row_mode(const ic__pg *G) { return G->pl->mode != IC_PTX_COLUMN; }

/* Loop variables for iteration `x` of the inner space: ROW walks flat inner index x (lanes
 * are the V elements from x); COLUMN walks inner point x (lanes are outer points). */
static void inner_at(ic__pg *G, LLVMValueRef x)
{
    const ic_kernel *k = G->k;
    for (int d = 0; d < k->ninner; d++)
        G->var[k->nouter + d] = NULL;
    ic__pg_decompose(G, x, k->ninner, k->inner, k->nouter, G->pl->N);
}

static ic_dtype red_val_type(const ic__pg *G, int s, int i)
{
    const ic_linstr *in = &G->k->stages[s].instr[i];
    return G->k->stages[s].instr[in->a].type;
}

static void init_accs(ic__pg *G, int s, int nl)
{
    const ic_stage *st = &G->k->stages[s];
    for (int i = 0; i < st->ninstr; i++) {
        const ic_linstr *in = &st->instr[i];
        if (in->op != IC_L_REDUCE)
            continue;
        ic_dtype vt = red_val_type(G, s, i);
        for (int l = 0; l < nl; l++) {
            LLVMValueRef *pv = &G->acc[s][i * IC__PTX_MAXV + l];
            if (!*pv)
                *pv = ic__pg_alloca(G, ic__pg_type(G, vt));
            LLVMBuildStore(G->b, ic__pg_red_init(G, in->red, vt), *pv);
            if (in->red == IC_RED_ARGMAX) {
                LLVMValueRef *pi = &G->acci[s][i * IC__PTX_MAXV + l];
                if (!*pi)
                    *pi = ic__pg_alloca(G, G->t_i64);
                LLVMBuildStore(G->b, ic__pg_i64(G, -1), *pi);
            }
        }
    }
}

/* Runs stage s over this thread's share of the inner space. */
static void iterate(ic__pg *G, int s)
{
    const ic__pplan *pl = G->pl;
    LLVMBuilderRef b = G->b;
    bool row = row_mode(G);
    int64_t TS = (int64_t)pl->T * pl->S;                      /* threads walking one row */
    int64_t step = row ? TS * pl->V : TS;                     /* flat inner index per iteration */
    int64_t lim = row ? pl->N - pl->V : pl->N - 1;            /* clamp for masked iterations */
    LLVMValueRef j64 = LLVMBuildZExt(b, G->j, G->t_i64, "");
    if (G->slice) /* split rows: this block's threads follow those of the blocks before it */
        j64 = LLVMBuildAdd(b, j64, LLVMBuildMul(b, G->slice, ic__pg_i64(G, pl->T), ""), "");
    LLVMValueRef start = row ? LLVMBuildMul(b, j64, ic__pg_i64(G, pl->V), "") : j64;
    G->nl = pl->V;
    G->vec = pl->V > 1;
    if (pl->unrolled) {
        for (int64_t it = 0; it < pl->K; it++) {
            LLVMValueRef x = LLVMBuildAdd(b, start, ic__pg_i64(G, it * step), "");
            G->valid = NULL;
            if ((it + 1) * step > pl->N) { /* some thread's x passes the end: mask it */
                G->valid = LLVMBuildICmp(b, LLVMIntSLE, x, ic__pg_i64(G, lim), "");
                x = LLVMBuildSelect(b, G->valid, x, ic__pg_i64(G, lim), "");
            }
            inner_at(G, x);
            G->it = pl->cache ? (int)it : -1;
            ic__pg_emit_stage(G, s);
        }
        G->valid = NULL;
        G->it = -1;
        return;
    }
    /* a loop: for (x = start; x < N (ROW: x <= N - V); x += step). COLUMN takes two
     * iterations a trip, then the odd one: the second's loads issue before the first's
     * accumulate waits (a column's threads have no other loads in flight; ROW's measured at
     * copy speed as is). The accumulation order is unchanged. */
    int U = row ? 1 : 2;
    ic__pg_loop L;
    LLVMValueRef x = ic__pg_loop_begin(G, &L, start, LLVMIntSLE, ic__pg_i64(G, lim - (U - 1) * step),
                                       (const char *const[]){ "loop", "body", "done" });
    G->valid = NULL;
    G->it = -1;
    for (int u = 0; u < U; u++) {
        inner_at(G, u ? LLVMBuildAdd(b, x, ic__pg_i64(G, u * step), "") : x);
        ic__pg_emit_stage(G, s);
    }
    ic__pg_loop_end(G, &L, x, ic__pg_i64(G, U * step));
    if (U == 1)
        return;
    x = LLVMBuildLoad2(b, G->t_i64, L.slot, "");
    LLVMBasicBlockRef cont = ic__pg_if(G, LLVMBuildICmp(b, LLVMIntSLE, x, ic__pg_i64(G, lim), ""), "odd");
    inner_at(G, x);
    ic__pg_emit_stage(G, s);
    ic__pg_endif(G, cont);
}

/* 32-bit pieces of a register value for shuffles and shared memory. */
static LLVMValueRef shfl(ic__pg *G, LLVMValueRef v, int off)
{
    LLVMBuilderRef b = G->b;
    LLVMTypeRef t = LLVMTypeOf(v);
    if (G->emu && (t == G->t_f32 || t == G->t_i32)) {
        LLVMValueRef a[2] = { t == G->t_f32 ? LLVMBuildBitCast(b, v, G->t_i32, "") : v, ic__pg_i32(G, off) };
        LLVMTypeRef pt[2] = { G->t_i32, G->t_i32 };
        LLVMValueRef r = ic__pg_ext(G, "ic__emu_shfl", G->t_i32, pt, 2, a);
        return t == G->t_f32 ? LLVMBuildBitCast(b, r, G->t_f32, "") : r;
    }
    if (t == G->t_f32 || t == G->t_i32) {
        LLVMValueRef a[4] = { ic__pg_i32(G, -1), v, ic__pg_i32(G, off), ic__pg_i32(G, 31) };
        return ic__pg_call(G, t == G->t_f32 ? "llvm.nvvm.shfl.sync.bfly.f32" : "llvm.nvvm.shfl.sync.bfly.i32",
                           NULL, 0, a, 4);
    }
    if (t == G->t_i1)
        return LLVMBuildTrunc(b, shfl(G, LLVMBuildZExt(b, v, G->t_i32, ""), off), G->t_i1, "");
    /* 64-bit: two halves */
    LLVMValueRef u = t == G->t_f64 ? LLVMBuildBitCast(b, v, G->t_i64, "") : v;
    LLVMValueRef lo = shfl(G, LLVMBuildTrunc(b, u, G->t_i32, ""), off);
    LLVMValueRef hi = shfl(G, LLVMBuildTrunc(b, LLVMBuildLShr(b, u, ic__pg_i64(G, 32), ""), G->t_i32, ""), off);
    LLVMValueRef w = LLVMBuildOr(b, LLVMBuildZExt(b, lo, G->t_i64, ""),
                                 LLVMBuildShl(b, LLVMBuildZExt(b, hi, G->t_i64, ""), ic__pg_i64(G, 32), ""), "");
    return t == G->t_f64 ? LLVMBuildBitCast(b, w, G->t_f64, "") : w;
}

LLVMValueRef ic__pg_shfl(ic__pg *G, LLVMValueRef v, int off) { return shfl(G, v, off); }

typedef struct { LLVMValueRef v, i; } pair;

static pair combine(ic__pg *G, const ic_linstr *in, ic_dtype vt, pair a, pair c)
{
    if (in->red != IC_RED_ARGMAX)
        return (pair){ ic__pg_red_op(G, in->red, vt, a.v, c.v), NULL };
    LLVMValueRef take = ic__pg_argmax_pick(G, vt, a.v, a.i, c.v, c.i);
    return (pair){ LLVMBuildSelect(G->b, take, c.v, a.v, ""), LLVMBuildSelect(G->b, take, c.i, a.i, "") };
}

/* Shared-memory slot `idx` of REDUCE (s, i): value at +0, argmax index at +8 of 16 bytes. */
static LLVMValueRef smem_slot(ic__pg *G, int s, int i, LLVMValueRef idx, bool index_part)
{
    const ic_linstr *in = &G->k->stages[s].instr[i];
    ic_dtype vt = red_val_type(G, s, i);
    int64_t sz = in->red == IC_RED_ARGMAX ? 16 : (vt == IC_BOOL || ic_dtype_size(vt) < 4) ? 4 : (int64_t)ic_dtype_size(vt);
    LLVMValueRef byte = LLVMBuildAdd(G->b, ic__pg_i32(G, G->pl->smem_off[s][i] + (index_part ? 8 : 0)),
                                     LLVMBuildMul(G->b, idx, ic__pg_i32(G, sz), ""), "");
    return LLVMBuildGEP2(G->b, G->t_i8, G->smem, &byte, 1, "");
}

static void smem_put(ic__pg *G, int s, int i, LLVMValueRef idx, pair p)
{
    ic_dtype vt = red_val_type(G, s, i);
    LLVMValueRef v = vt == IC_BOOL ? LLVMBuildZExt(G->b, p.v, G->t_i32, "") : p.v;
    LLVMBuildStore(G->b, v, smem_slot(G, s, i, idx, false));
    if (p.i)
        LLVMBuildStore(G->b, p.i, smem_slot(G, s, i, idx, true));
}

static pair smem_get(ic__pg *G, int s, int i, LLVMValueRef idx)
{
    ic_dtype vt = red_val_type(G, s, i);
    const ic_linstr *in = &G->k->stages[s].instr[i];
    LLVMTypeRef t = vt == IC_BOOL ? G->t_i32 : ic__pg_type(G, vt);
    pair p = { LLVMBuildLoad2(G->b, t, smem_slot(G, s, i, idx, false), ""), NULL };
    if (vt == IC_BOOL)
        p.v = LLVMBuildTrunc(G->b, p.v, G->t_i1, "");
    if (in->red == IC_RED_ARGMAX)
        p.i = LLVMBuildLoad2(G->b, G->t_i64, smem_slot(G, s, i, idx, true), "");
    return p;
}

static pair acc_get(ic__pg *G, int s, int i, int l)
{
    const ic_linstr *in = &G->k->stages[s].instr[i];
    ic_dtype vt = red_val_type(G, s, i);
    pair p = { LLVMBuildLoad2(G->b, ic__pg_type(G, vt), G->acc[s][i * IC__PTX_MAXV + l], ""), NULL };
    if (in->red == IC_RED_ARGMAX)
        p.i = LLVMBuildLoad2(G->b, G->t_i64, G->acci[s][i * IC__PTX_MAXV + l], "");
    return p;
}

LLVMValueRef ic__pg_barrier(ic__pg *G)
{
    if (G->emu)
        return ic__pg_ext(G, "ic__emu_barrier", G->t_void, NULL, 0, NULL);
    return ic__pg_call(G, "llvm.nvvm.barrier0", NULL, 0, NULL, 0);
}

/* ROW: lanes, then the T threads of the group (shuffles; shared memory past a warp). */
static void combine_row(ic__pg *G, int s)
{
    const ic__pplan *pl = G->pl;
    const ic_stage *st = &G->k->stages[s];
    LLVMBuilderRef b = G->b;
    pair part[st->ninstr > 0 ? st->ninstr : 1];
    for (int i = 0; i < st->ninstr; i++) {
        const ic_linstr *in = &st->instr[i];
        if (in->op != IC_L_REDUCE)
            continue;
        ic_dtype vt = red_val_type(G, s, i);
        pair p = acc_get(G, s, i, 0);
        for (int l = 1; l < pl->V; l++)
            p = combine(G, in, vt, p, acc_get(G, s, i, l));
        for (int off = (pl->T < 32 ? pl->T : 32) / 2; off >= 1; off /= 2) {
            pair o = { shfl(G, p.v, off), p.i ? shfl(G, p.i, off) : NULL };
            p = combine(G, in, vt, p, o);
        }
        part[i] = p;
    }
    if (pl->T > 32) {
        int W = pl->T / 32;
        LLVMValueRef warp = LLVMBuildUDiv(b, G->j, ic__pg_i32(G, 32), "");
        LLVMValueRef lane0 = LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildURem(b, G->j, ic__pg_i32(G, 32), ""),
                                           ic__pg_i32(G, 0), "");
        LLVMValueRef row0 = LLVMBuildMul(b, G->r, ic__pg_i32(G, W), "");
        LLVMBasicBlockRef cont = ic__pg_if(G, lane0, "put");
        for (int i = 0; i < st->ninstr; i++)
            if (st->instr[i].op == IC_L_REDUCE)
                smem_put(G, s, i, LLVMBuildAdd(b, row0, warp, ""), part[i]);
        ic__pg_endif(G, cont);
        ic__pg_barrier(G);
        for (int i = 0; i < st->ninstr; i++) {
            const ic_linstr *in = &st->instr[i];
            if (in->op != IC_L_REDUCE)
                continue;
            ic_dtype vt = red_val_type(G, s, i);
            pair p = smem_get(G, s, i, row0);
            for (int w = 1; w < W; w++)
                p = combine(G, in, vt, p, smem_get(G, s, i, LLVMBuildAdd(b, row0, ic__pg_i32(G, w), "")));
            part[i] = p;
        }
    }
    for (int i = 0; i < st->ninstr; i++) {
        if (st->instr[i].op != IC_L_REDUCE)
            continue;
        ic__lv *r = &G->accres[s][i];
        memset(r, 0, sizeof *r);
        r->v[0] = st->instr[i].red == IC_RED_ARGMAX ? part[i].i : part[i].v;
        r->uni = true;
        if (G->split_part) {
            G->split_part[i].v = part[i].v;
            G->split_part[i].i = part[i].i;
        }
    }
}

/* COLUMN: each lane is its own outer point; the T threads of a group meet in shared memory. */
static void combine_column(ic__pg *G, int s)
{
    const ic__pplan *pl = G->pl;
    const ic_stage *st = &G->k->stages[s];
    LLVMBuilderRef b = G->b;
    if (pl->T > 1) {
        LLVMValueRef mine = LLVMBuildMul(b, LLVMBuildAdd(b, LLVMBuildMul(b, G->j, ic__pg_i32(G, pl->R), ""), G->r, ""),
                                         ic__pg_i32(G, pl->V), "");
        for (int i = 0; i < st->ninstr; i++)
            if (st->instr[i].op == IC_L_REDUCE)
                for (int l = 0; l < pl->V; l++)
                    smem_put(G, s, i, LLVMBuildAdd(b, mine, ic__pg_i32(G, l), ""), acc_get(G, s, i, l));
        ic__pg_barrier(G);
    }
    for (int i = 0; i < st->ninstr; i++) {
        const ic_linstr *in = &st->instr[i];
        if (in->op != IC_L_REDUCE)
            continue;
        ic_dtype vt = red_val_type(G, s, i);
        ic__lv *r = &G->accres[s][i];
        memset(r, 0, sizeof *r);
        for (int l = 0; l < pl->V; l++) {
            pair p;
            if (pl->T == 1) {
                p = acc_get(G, s, i, l);
            } else {
                LLVMValueRef base = LLVMBuildAdd(b, LLVMBuildMul(b, G->r, ic__pg_i32(G, pl->V), ""), ic__pg_i32(G, l), "");
                p = smem_get(G, s, i, base);
                for (int t = 1; t < pl->T; t++)
                    p = combine(G, in, vt, p, smem_get(G, s, i, LLVMBuildAdd(b, base, ic__pg_i32(G, (int64_t)t * pl->R * pl->V), "")));
            }
            r->v[l] = in->red == IC_RED_ARGMAX ? p.i : p.v;
            if (G->split_col) {
                G->split_col[2 * ((size_t)i * IC__PTX_MAXV + (size_t)l)] = p.v;
                G->split_col[2 * ((size_t)i * IC__PTX_MAXV + (size_t)l) + 1] = p.i;
            }
        }
        r->uni = pl->V == 1;
    }
}

/* A zero-initialised array of the module in global memory (generic for the emulator). */
LLVMValueRef ic__pg_module_array(ic__pg *G, const char *suffix, LLVMTypeRef elt, int64_t n)
{
    char gname[300];
    snprintf(gname, sizeof gname, "%s_%s", LLVMGetValueName(G->fn), suffix);
    LLVMTypeRef at = LLVMArrayType2(elt, (uint64_t)(n > 0 ? n : 1));
    LLVMValueRef gv = LLVMAddGlobalInAddressSpace(G->mod, at, gname, G->emu ? 0 : 1);
    LLVMSetLinkage(gv, LLVMInternalLinkage);
    LLVMSetInitializer(gv, LLVMConstNull(at));
    LLVMSetAlignment(gv, 16);
    return gv;
}

void ic__pg_fence(ic__pg *G)
{
    if (G->emu)
        LLVMBuildFence(G->b, LLVMAtomicOrderingSequentiallyConsistent, 0, "");
    else
        ic__pg_call(G, "llvm.nvvm.membar.gl", NULL, 0, NULL, 0);
}

void ic__pg_last_block(ic__pg *G, LLVMValueRef is_last, const char *last, const char *other)
{
    LLVMBasicBlockRef go = LLVMAppendBasicBlockInContext(G->ctx, G->fn, last);
    LLVMBasicBlockRef quit = LLVMAppendBasicBlockInContext(G->ctx, G->fn, other);
    LLVMBuildCondBr(G->b, is_last, go, quit);
    LLVMPositionBuilderAtEnd(G->b, quit);
    LLVMBuildRetVoid(G->b);
    LLVMPositionBuilderAtEnd(G->b, go);
    ic__pg_fence(G);
}

/* Split rows: the block's combined partials go to the workspace; the last block of the row
 * to arrive (an atomic counter per row) reads every block's partial back in slice order,
 * combines them across its threads as before, and goes on to the later stages; the others
 * return. The counter is reset for the next launch. */
static void split_combine(ic__pg *G, int s, LLVMValueRef row)
{
    const ic__pplan *pl = G->pl;
    const ic_stage *st = &G->k->stages[s];
    LLVMBuilderRef b = G->b;
    LLVMValueRef ws = ic__pg_module_array(G, "ws", G->t_i8, pl->ws_bytes);
    LLVMValueRef cnt = ic__pg_module_array(G, "cnt", G->t_i32, pl->P);
    LLVMValueRef zero = ic__pg_i64(G, 0);
    LLVMValueRef crow[2] = { zero, row };
    LLVMValueRef pcnt = LLVMBuildGEP2(b, LLVMGlobalGetValueType(cnt), cnt, crow, 2, "");
    LLVMValueRef flag_idx = ic__pg_i32(G, pl->flag_off);
    LLVMValueRef pflag = LLVMBuildGEP2(b, G->t_i8, G->smem, &flag_idx, 1, "");
    LLVMValueRef j0 = LLVMBuildICmp(b, LLVMIntEQ, G->j, ic__pg_i32(G, 0), "");
    /* slot (row, t) of REDUCE number n: 16 bytes, value at +0, argmax index at +8 */
    int64_t per_red = pl->P * pl->S * 16;
    LLVMBasicBlockRef cont = ic__pg_if(G, j0, "publish");
    int n = 0;
    for (int i = 0; i < st->ninstr; i++) {
        if (st->instr[i].op != IC_L_REDUCE)
            continue;
        const ic__lv *r = &G->accres[s][i];
        LLVMValueRef slot = LLVMBuildAdd(b, LLVMBuildMul(b, row, ic__pg_i64(G, pl->S), ""), G->slice, "");
        LLVMValueRef byte = LLVMBuildAdd(b, ic__pg_i64(G, n * per_red), LLVMBuildMul(b, slot, ic__pg_i64(G, 16), ""), "");
        LLVMValueRef p = LLVMBuildGEP2(b, G->t_i8, ws, &byte, 1, "");
        ic_dtype vt = G->k->stages[s].instr[st->instr[i].a].type;
        LLVMValueRef v = G->split_part[i].v, ix = G->split_part[i].i;
        (void)r;
        if (vt == IC_BOOL)
            v = LLVMBuildZExt(b, v, G->t_i32, "");
        LLVMSetVolatile(LLVMBuildStore(b, v, p), 1);
        if (ix) {
            LLVMValueRef e8 = ic__pg_i64(G, 8);
            LLVMSetVolatile(LLVMBuildStore(b, ix, LLVMBuildGEP2(b, G->t_i8, p, &e8, 1, "")), 1);
        }
        n++;
    }
    ic__pg_fence(G);
    LLVMValueRef old = LLVMBuildAtomicRMW(b, LLVMAtomicRMWBinOpAdd, pcnt, ic__pg_i32(G, 1),
                                          LLVMAtomicOrderingMonotonic, 0);
    LLVMValueRef last = LLVMBuildICmp(b, LLVMIntEQ, old, ic__pg_i32(G, pl->S - 1), "");
    LLVMBuildStore(b, LLVMBuildZExt(b, last, G->t_i8, ""), pflag);
    ic__pg_endif(G, cont);
    ic__pg_barrier(G);
    LLVMValueRef is_last = LLVMBuildICmp(b, LLVMIntNE, LLVMBuildLoad2(b, G->t_i8, pflag, ""),
                                         LLVMConstInt(G->t_i8, 0, 0), "");
    ic__pg_last_block(G, is_last, "last", "notlast");
    /* every thread folds the partials t = j, j + T, ... into lane 0 of its accumulators */
    init_accs(G, s, pl->V);
    ic__pg_loop L;
    LLVMValueRef t = ic__pg_loop_begin(G, &L, LLVMBuildZExt(b, G->j, G->t_i64, ""), LLVMIntSLT,
                                       ic__pg_i64(G, pl->S),
                                       (const char *const[]){ "fold", "foldbody", "folded" });
    n = 0;
    for (int i = 0; i < st->ninstr; i++) {
        const ic_linstr *in = &st->instr[i];
        if (in->op != IC_L_REDUCE)
            continue;
        ic_dtype vt = G->k->stages[s].instr[in->a].type;
        LLVMValueRef slot = LLVMBuildAdd(b, LLVMBuildMul(b, row, ic__pg_i64(G, pl->S), ""), t, "");
        LLVMValueRef byte = LLVMBuildAdd(b, ic__pg_i64(G, n * per_red), LLVMBuildMul(b, slot, ic__pg_i64(G, 16), ""), "");
        LLVMValueRef p = LLVMBuildGEP2(b, G->t_i8, ws, &byte, 1, "");
        LLVMTypeRef ty = vt == IC_BOOL ? G->t_i32 : ic__pg_type(G, vt);
        LLVMValueRef v = LLVMBuildLoad2(b, ty, p, "");
        LLVMSetVolatile(v, 1);
        if (vt == IC_BOOL)
            v = LLVMBuildTrunc(b, v, G->t_i1, "");
        pair other = { v, NULL };
        if (in->red == IC_RED_ARGMAX) {
            LLVMValueRef e8 = ic__pg_i64(G, 8);
            other.i = LLVMBuildLoad2(b, G->t_i64, LLVMBuildGEP2(b, G->t_i8, p, &e8, 1, ""), "");
            LLVMSetVolatile(other.i, 1);
        }
        pair cur = acc_get(G, s, i, 0);
        pair r = combine(G, in, vt, cur, other);
        LLVMBuildStore(b, r.v, G->acc[s][i * IC__PTX_MAXV]);
        if (r.i)
            LLVMBuildStore(b, r.i, G->acci[s][i * IC__PTX_MAXV]);
        n++;
    }
    ic__pg_loop_end(G, &L, t, ic__pg_i64(G, pl->T));
    combine_row(G, s);
    cont = ic__pg_if(G, j0, "reset");
    LLVMBuildStore(b, ic__pg_i32(G, 0), pcnt);
    ic__pg_endif(G, cont);
}

/* Workspace slot `slot` (i64) of REDUCE number n among P * S slots a REDUCE: 16 bytes,
 * the value at +0, an argmax index at +8. */
static LLVMValueRef ws_slot(ic__pg *G, LLVMValueRef ws, int n, LLVMValueRef slot)
{
    const ic__pplan *pl = G->pl;
    LLVMValueRef byte = LLVMBuildAdd(G->b, ic__pg_i64(G, (int64_t)n * pl->P * pl->S * 16),
                                     LLVMBuildMul(G->b, slot, ic__pg_i64(G, 16), ""), "");
    return LLVMBuildGEP2(G->b, G->t_i8, ws, &byte, 1, "");
}

/* Volatile: other blocks read and write these slots. */
static void ws_put(ic__pg *G, LLVMValueRef p, ic_dtype vt, pair v)
{
    LLVMBuilderRef b = G->b;
    LLVMValueRef x = vt == IC_BOOL ? LLVMBuildZExt(b, v.v, G->t_i32, "") : v.v;
    LLVMSetVolatile(LLVMBuildStore(b, x, p), 1);
    if (v.i) {
        LLVMValueRef e8 = ic__pg_i64(G, 8);
        LLVMSetVolatile(LLVMBuildStore(b, v.i, LLVMBuildGEP2(b, G->t_i8, p, &e8, 1, "")), 1);
    }
}

static pair ws_get(ic__pg *G, LLVMValueRef p, ic_dtype vt, bool argmax)
{
    LLVMBuilderRef b = G->b;
    pair r = { LLVMBuildLoad2(b, vt == IC_BOOL ? G->t_i32 : ic__pg_type(G, vt), p, ""), NULL };
    LLVMSetVolatile(r.v, 1);
    if (vt == IC_BOOL)
        r.v = LLVMBuildTrunc(b, r.v, G->t_i1, "");
    if (argmax) {
        LLVMValueRef e8 = ic__pg_i64(G, 8);
        r.i = LLVMBuildLoad2(b, G->t_i64, LLVMBuildGEP2(b, G->t_i8, p, &e8, 1, ""), "");
        LLVMSetVolatile(r.i, 1);
    }
    return r;
}

/* Split columns: thread j == 0 of each group publishes its V combined partials to the
 * workspace (slot point * S + slice); after a fence and the block's barrier, thread 0 counts
 * the block in (an atomic counter per tile of R groups) and the last block of the tile to
 * arrive goes on: each thread folds the partials t = j, j + T, ... of its group's lanes in
 * slice order, combine_column meets the T threads again, and the later stages run. Every
 * order is fixed, so the result does not depend on which block came last. */
/* Thread 0 counts the block in at *pcnt; the block goes on (to the code after this) if it
 * was the tile's last, else returns. */
static void arrive_column(ic__pg *G, LLVMValueRef pcnt, LLVMValueRef t0)
{
    LLVMBuilderRef b = G->b;
    LLVMValueRef flag_idx = ic__pg_i32(G, G->pl->flag_off);
    LLVMValueRef pflag = LLVMBuildGEP2(b, G->t_i8, G->smem, &flag_idx, 1, "");
    LLVMBasicBlockRef cont = ic__pg_if(G, t0, "arrive");
    LLVMValueRef old = LLVMBuildAtomicRMW(b, LLVMAtomicRMWBinOpAdd, pcnt, ic__pg_i32(G, 1),
                                          LLVMAtomicOrderingMonotonic, 0);
    LLVMValueRef last = LLVMBuildICmp(b, LLVMIntEQ, old, ic__pg_i32(G, G->pl->S - 1), "");
    LLVMBuildStore(b, LLVMBuildZExt(b, last, G->t_i8, ""), pflag);
    ic__pg_endif(G, cont);
    ic__pg_barrier(G);
    LLVMValueRef is_last = LLVMBuildICmp(b, LLVMIntNE, LLVMBuildLoad2(b, G->t_i8, pflag, ""),
                                         LLVMConstInt(G->t_i8, 0, 0), "");
    ic__pg_last_block(G, is_last, "last", "notlast");
}

static void split_combine_column(ic__pg *G, int s, LLVMValueRef grp, LLVMValueRef tile)
{
    const ic__pplan *pl = G->pl;
    const ic_stage *st = &G->k->stages[s];
    LLVMBuilderRef b = G->b;
    LLVMValueRef ws = ic__pg_module_array(G, "ws", G->t_i8, pl->ws_bytes);
    LLVMValueRef cnt = ic__pg_module_array(G, "cnt", G->t_i32, pl->grid / pl->S);
    LLVMValueRef ct[2] = { ic__pg_i64(G, 0), tile };
    LLVMValueRef pcnt = LLVMBuildGEP2(b, LLVMGlobalGetValueType(cnt), cnt, ct, 2, "");
    LLVMValueRef j0 = LLVMBuildICmp(b, LLVMIntEQ, G->j, ic__pg_i32(G, 0), "");
    LLVMValueRef t0 = LLVMBuildICmp(b, LLVMIntEQ, G->tid, ic__pg_i32(G, 0), "");
    LLVMValueRef point0 = LLVMBuildMul(b, grp, ic__pg_i64(G, pl->V), "");
    LLVMBasicBlockRef cont = ic__pg_if(G, G->pvalid ? LLVMBuildAnd(b, j0, G->pvalid, "") : j0, "publish");
    for (int i = 0, n = 0; i < st->ninstr; i++) {
        if (st->instr[i].op != IC_L_REDUCE)
            continue;
        for (int l = 0; l < pl->V; l++) {
            LLVMValueRef point = LLVMBuildAdd(b, point0, ic__pg_i64(G, l), "");
            LLVMValueRef slot = LLVMBuildAdd(b, LLVMBuildMul(b, point, ic__pg_i64(G, pl->S), ""), G->slice, "");
            size_t at = 2 * ((size_t)i * IC__PTX_MAXV + (size_t)l);
            pair v = { G->split_col[at], G->split_col[at + 1] }; /* accres has argmax's index alone */
            ws_put(G, ws_slot(G, ws, n, slot), red_val_type(G, s, i), v);
        }
        n++;
    }
    ic__pg_fence(G);
    ic__pg_endif(G, cont);
    ic__pg_barrier(G);
    arrive_column(G, pcnt, t0);
    init_accs(G, s, pl->V);
    ic__pg_loop L;
    LLVMValueRef t = ic__pg_loop_begin(G, &L, LLVMBuildZExt(b, G->j, G->t_i64, ""), LLVMIntSLT,
                                       ic__pg_i64(G, pl->S),
                                       (const char *const[]){ "fold", "foldbody", "folded" });
    for (int i = 0, n = 0; i < st->ninstr; i++) {
        const ic_linstr *in = &st->instr[i];
        if (in->op != IC_L_REDUCE)
            continue;
        ic_dtype vt = red_val_type(G, s, i);
        for (int l = 0; l < pl->V; l++) {
            LLVMValueRef point = LLVMBuildAdd(b, point0, ic__pg_i64(G, l), "");
            LLVMValueRef slot = LLVMBuildAdd(b, LLVMBuildMul(b, point, ic__pg_i64(G, pl->S), ""), t, "");
            pair r = combine(G, in, vt, acc_get(G, s, i, l),
                             ws_get(G, ws_slot(G, ws, n, slot), vt, in->red == IC_RED_ARGMAX));
            LLVMBuildStore(b, r.v, G->acc[s][i * IC__PTX_MAXV + l]);
            if (r.i)
                LLVMBuildStore(b, r.i, G->acci[s][i * IC__PTX_MAXV + l]);
        }
        n++;
    }
    ic__pg_loop_end(G, &L, t, ic__pg_i64(G, pl->T));
    combine_column(G, s);
    cont = ic__pg_if(G, t0, "reset");
    LLVMBuildStore(b, ic__pg_i32(G, 0), pcnt);
    ic__pg_endif(G, cont);
}

static void gen_groups(ic__pg *G)
{
    const ic__pplan *pl = G->pl;
    const ic_kernel *k = G->k;
    LLVMBuilderRef b = G->b;
    bool row = row_mode(G);
    if (row) {
        G->j = LLVMBuildURem(b, G->tid, ic__pg_i32(G, pl->T), "");
        G->r = LLVMBuildUDiv(b, G->tid, ic__pg_i32(G, pl->T), "");
    } else {
        G->r = LLVMBuildURem(b, G->tid, ic__pg_i32(G, pl->R), "");
        G->j = LLVMBuildUDiv(b, G->tid, ic__pg_i32(G, pl->R), "");
    }
    int64_t groups = row ? pl->P : pl->P / pl->V;
    LLVMValueRef bid64 = LLVMBuildZExt(b, G->bid, G->t_i64, "");
    G->slice = NULL;
    if (pl->S > 1) { /* one row a block: block = row * S + slice */
        G->slice = LLVMBuildURem(b, bid64, ic__pg_i64(G, pl->S), "");
        bid64 = LLVMBuildUDiv(b, bid64, ic__pg_i64(G, pl->S), "");
    }
    LLVMValueRef grp = LLVMBuildAdd(b, LLVMBuildMul(b, bid64, ic__pg_i64(G, pl->R), ""),
                                    LLVMBuildZExt(b, G->r, G->t_i64, ""), "");
    G->pvalid = NULL;
    if (pl->grid * pl->R != groups) {
        G->pvalid = LLVMBuildICmp(b, LLVMIntSLT, grp, ic__pg_i64(G, groups), "");
        grp = LLVMBuildSelect(b, G->pvalid, grp, ic__pg_i64(G, groups - 1), "");
    }
    LLVMValueRef first = row ? grp : LLVMBuildMul(b, grp, ic__pg_i64(G, pl->V), "");
    ic__pg_decompose(G, first, k->nouter, k->outer, 0, pl->P);
    LLVMValueRef j0 = pl->T > 1 ? LLVMBuildICmp(b, LLVMIntEQ, G->j, ic__pg_i32(G, 0), "") : NULL;
    for (int s = 0; s < k->nstages; s++) {
        const ic_stage *st = &k->stages[s];
        if (st->kind == IC_STAGE_BODY) {
            LLVMValueRef cond = j0 && G->pvalid ? LLVMBuildAnd(b, j0, G->pvalid, "") : j0 ? j0 : G->pvalid;
            LLVMValueRef pv = G->pvalid;
            G->pvalid = NULL;
            LLVMBasicBlockRef cont = ic__pg_if(G, cond, "body");
            for (int d = 0; d < k->ninner; d++)
                G->var[k->nouter + d] = ic__pg_i64(G, 0);
            G->nl = row ? 1 : pl->V;
            G->vec = G->nl > 1;
            G->valid = NULL;
            G->it = -1;
            ic__pg_emit_stage(G, s);
            ic__pg_endif(G, cont);
            G->pvalid = pv;
            continue;
        }
        bool has_red = false;
        for (int i = 0; i < st->ninstr; i++)
            has_red |= st->instr[i].op == IC_L_REDUCE;
        if (has_red)
            init_accs(G, s, pl->V);
        iterate(G, s);
        if (has_red) {
            if (row)
                combine_row(G, s);
            else
                combine_column(G, s);
            if (s == pl->split_stage && row)
                split_combine(G, s, grp);
            else if (s == pl->split_stage)
                split_combine_column(G, s, grp, bid64);
        }
    }
}

void ic__pg_annotate(ic__pg *G, const char *key, int val)
{
    LLVMMetadataRef md[3] = {
        LLVMValueAsMetadata(G->fn),
        LLVMMDStringInContext2(G->ctx, key, strlen(key)),
        LLVMValueAsMetadata(ic__pg_i32(G, val)),
    };
    LLVMAddNamedMetadataOperand(G->mod, "nvvm.annotations",
                                LLVMMetadataAsValue(G->ctx, LLVMMDNodeInContext2(G->ctx, md, 3)));
}

static void add_attr(ic__pg *G, unsigned idx, const char *name)
{
    unsigned kind = LLVMGetEnumAttributeKindForName(name, strlen(name));
    LLVMAddAttributeAtIndex(G->fn, idx, LLVMCreateEnumAttribute(G->ctx, kind, 0));
}

ic_status ic__pgen_kernel(ic__pg *G, const ic_kernel *k, const ic__pplan *pl, const char *name)
{
    ic_ctx *c = G->c;
    G->k = k;
    G->pl = pl;
    int nb = G->nbufs > 0 ? G->nbufs : 1;
    LLVMTypeRef *pt = ic__calloc(c, (size_t)nb, sizeof *pt);
    G->bufptr = ic__calloc(c, (size_t)nb, sizeof *G->bufptr);
    int maxi = 1;
    for (int s = 0; s < k->nstages; s++)
        maxi = k->stages[s].ninstr > maxi ? k->stages[s].ninstr : maxi;
    G->vals = ic__calloc(c, (size_t)maxi, sizeof *G->vals);
    G->accres = ic__calloc(c, (size_t)k->nstages + 1, sizeof *G->accres);
    G->acc = ic__calloc(c, (size_t)k->nstages + 1, sizeof *G->acc);
    G->acci = ic__calloc(c, (size_t)k->nstages + 1, sizeof *G->acci);
    bool ok = pt && G->bufptr && G->vals && G->accres && G->acc && G->acci;
    for (int s = 0; ok && s < k->nstages; s++) {
        size_t n = (size_t)k->stages[s].ninstr + 1;
        G->accres[s] = ic__calloc(c, n, sizeof **G->accres);
        G->acc[s] = ic__calloc(c, n * IC__PTX_MAXV, sizeof **G->acc);
        G->acci[s] = ic__calloc(c, n * IC__PTX_MAXV, sizeof **G->acci);
        ok = G->accres[s] && G->acc[s] && G->acci[s];
    }
    G->cache = NULL;
    G->cached = NULL;
    G->split_part = NULL;
    if (ok && pl->S > 1 && !(G->split_part = ic__calloc(c, (size_t)maxi, sizeof *G->split_part)))
        ok = false;
    G->split_col = NULL;
    if (ok && pl->S > 1 && pl->mode == IC_PTX_COLUMN &&
        !(G->split_col = ic__calloc(c, (size_t)maxi * IC__PTX_MAXV * 2, sizeof *G->split_col)))
        ok = false;
    if (ok && pl->cache && pl->nvn > 0) {
        size_t n = (size_t)pl->K * (size_t)pl->nvn;
        G->cache = ic__calloc(c, n, sizeof *G->cache);
        G->cached = ic__calloc(c, n, sizeof *G->cached);
        ok = G->cache && G->cached;
    }
    ic_status st = IC_OK;
    if (!ok) {
        st = ic__error(c, IC_ENOMEM, "ptx: out of memory generating kernel '%s'", name);
        goto done;
    }
    /* parameters: the used buffers only (ic_ptx_kernel.args), in buffer order */
    unsigned np = 0;
    for (int i = 0; i < G->nbufs; i++)
        if (pl->used[i])
            pt[np++] = G->t_gptr;
    LLVMTypeRef fty = LLVMFunctionType(G->t_void, pt, np, 0);
    G->fn = LLVMAddFunction(G->mod, name, fty);
    for (int i = 0, j = 0; i < G->nbufs; i++) {
        G->bufptr[i] = NULL;
        if (!pl->used[i])
            continue;
        G->bufptr[i] = LLVMGetParam(G->fn, (unsigned)j);
        add_attr(G, (unsigned)j + 1, "noalias");
        if (!pl->stored[i])
            add_attr(G, (unsigned)j + 1, "readonly");
        j++;
    }
    add_attr(G, (unsigned)LLVMAttributeFunctionIndex, "nounwind");
    ic__pg_annotate(G, "kernel", 1);
    ic__pg_annotate(G, "maxntidx", pl->block);
    G->entry = LLVMAppendBasicBlockInContext(G->ctx, G->fn, "entry");
    LLVMPositionBuilderAtEnd(G->b, G->entry);
    G->smem = NULL;
    if (pl->smem > 0) {
        char sname[300];
        snprintf(sname, sizeof sname, "%s_smem", name);
        LLVMTypeRef at = LLVMArrayType2(G->t_i8, (uint64_t)pl->smem);
        G->smem = LLVMAddGlobalInAddressSpace(G->mod, at, sname, G->emu ? 0 : 3);
        LLVMSetLinkage(G->smem, LLVMInternalLinkage);
        LLVMSetInitializer(G->smem, LLVMGetUndef(at));
        LLVMSetAlignment(G->smem, 16);
    }
    G->tid = ic__pg_sreg(G, "llvm.nvvm.read.ptx.sreg.tid.x");
    G->bid = ic__pg_sreg(G, "llvm.nvvm.read.ptx.sreg.ctaid.x");
    for (int v = 0; v < IC__PTX_NVARS; v++)
        G->var[v] = ic__pg_i64(G, 0);
    if (pl->mode == IC_PTX_POINTWISE)
        gen_pointwise(G);
    else if (pl->mode == IC_PTX_GEMM)
        ic__pgen_gemm(G);
    else if (pl->mode == IC_PTX_ATTENTION)
        ic__pgen_attention(G);
    else
        gen_groups(G);
    LLVMBuildRetVoid(G->b);
done:
    for (int s = 0; G->accres && s < k->nstages; s++) {
        ic__free(c, G->accres[s]);
        if (G->acc)
            ic__free(c, G->acc[s]);
        if (G->acci)
            ic__free(c, G->acci[s]);
    }
    ic__free(c, G->accres);
    ic__free(c, G->acc);
    ic__free(c, G->acci);
    ic__free(c, G->vals);
    ic__free(c, G->cache);
    ic__free(c, G->cached);
    ic__free(c, G->split_part);
    G->split_part = NULL;
    ic__free(c, G->split_col);
    G->split_col = NULL;
    ic__free(c, G->bufptr);
    ic__free(c, pt);
    G->accres = NULL;
    G->acc = G->acci = NULL;
    G->vals = NULL;
    G->cache = NULL;
    G->cached = NULL;
    G->bufptr = NULL;
    return st;
}
