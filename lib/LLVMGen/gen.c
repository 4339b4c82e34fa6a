/* gen.c - kernels -> LLVM functions: the loop nest of each kernel mode (pointwise, row,
 * column), accumulators, the OpenMP outlining through __kmpc_fork_call, and the module.
 *
 * Each kernel K becomes three functions:
 *   K(bufs)                     exported; forks K.omp on a team, or calls K.range serially
 *   K.omp(gtid, btid, bufs)     the microtask: this thread's static share [lo, hi)
 *   K.range(b0.., lo, hi)       the loops over work items lo..hi-1; buffers are noalias
 * A reduction with a single outer point (a full reduction) is split instead: per stage a
 * K.s<i> range function and microtask, and K combines the threads' partial accumulators;
 * so is a column reduction over one outer dim (K.c<i>: blocks of rows per thread, each with
 * a record of per-column accumulators). Short rows of a ROW kernel are run a few at a time
 * (row_group) so that their dependent passes overlap.
 */
#include <stdlib.h>
#include <string.h>
#include <llvm-c/Analysis.h>
#include <llvm-c/DebugInfo.h>
#include "llvmgen-impl.h"
#include "math-impl.h"
#include "gemm-impl.h" /* gemm: ic__gemm_try */

/* ---- small helpers ---- */

static LLVMBasicBlockRef block(ic__cg *g, const char *name)
{
    return LLVMAppendBasicBlockInContext(g->ctx, g->fn, name);
}

static LLVMValueRef entry_alloca(ic__cg *g, LLVMTypeRef ty, LLVMValueRef count, const char *name)
{
    LLVMBuilderRef b = ic__entry_builder(g->ctx, g->entry);
    LLVMValueRef a = count ? LLVMBuildArrayAlloca(b, ty, count, name) : LLVMBuildAlloca(b, ty, name);
    LLVMSetAlignment(a, 64);
    LLVMDisposeBuilder(b);
    return a;
}

static LLVMValueRef ld(ic__cg *g, LLVMValueRef p) { return LLVMBuildLoad2(g->b, g->t_i64, p, ""); }
static void st(ic__cg *g, LLVMValueRef v, LLVMValueRef p) { LLVMBuildStore(g->b, v, p); }

static LLVMValueRef smin(ic__cg *g, LLVMValueRef a, LLVMValueRef b)
{
    LLVMValueRef x[2] = { a, b };
    return ic__gen_intrinsic(g, "llvm.smin", &g->t_i64, 1, x, 2);
}

static LLVMMetadataRef md_flag(ic__cg *g, const char *name, LLVMValueRef v)
{
    LLVMMetadataRef ops[2] = { LLVMMDStringInContext2(g->ctx, name, strlen(name)),
                               LLVMValueAsMetadata(v) };
    return LLVMMDNodeInContext2(g->ctx, ops, 2);
}

LLVMValueRef ic__gen_loop_md(ic__cg *g)
{
    LLVMMetadataRef ops[5];
    int n = 0;
    LLVMMetadataRef self = LLVMTemporaryMDNode(g->ctx, NULL, 0);
    ops[n++] = self;
    int w = g->p->vector_width, u = g->p->unroll;
    ops[n++] = md_flag(g, "llvm.loop.vectorize.enable", LLVMConstInt(g->t_i1, w != 1, 0));
    if (w > 1)
        ops[n++] = md_flag(g, "llvm.loop.vectorize.width", LLVMConstInt(g->t_i32, (unsigned)w, 0));
    if (u > 0)
        ops[n++] = md_flag(g, "llvm.loop.interleave.count", LLVMConstInt(g->t_i32, (unsigned)u, 0));
    LLVMMetadataRef node = LLVMMDNodeInContext2(g->ctx, ops, (size_t)n);
    LLVMMetadataReplaceAllUsesWith(self, node);
    return LLVMMetadataAsValue(g->ctx, node);
}

/* A top-tested counted loop with a canonical i64 induction variable. */
typedef struct { LLVMBasicBlockRef head, body, exit, pre; LLVMValueRef iv; } loop_t;

static void loop_open(ic__cg *g, loop_t *L, LLVMValueRef lo, LLVMValueRef hi, const char *name)
{
    char nm[32];
    L->pre = LLVMGetInsertBlock(g->b);
    snprintf(nm, sizeof nm, "%s.head", name);
    L->head = block(g, nm);
    snprintf(nm, sizeof nm, "%s.body", name);
    L->body = block(g, nm);
    snprintf(nm, sizeof nm, "%s.exit", name);
    L->exit = block(g, nm);
    LLVMBuildBr(g->b, L->head);
    LLVMPositionBuilderAtEnd(g->b, L->head);
    L->iv = LLVMBuildPhi(g->b, g->t_i64, name);
    LLVMAddIncoming(L->iv, &lo, &L->pre, 1);
    LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, L->iv, hi, ""), L->body, L->exit);
    LLVMPositionBuilderAtEnd(g->b, L->body);
}

static void loop_close(ic__cg *g, loop_t *L, bool innermost)
{
    LLVMValueRef next = LLVMBuildNSWAdd(g->b, L->iv, ic__gen_i64(g, 1), "");
    LLVMBasicBlockRef latch = LLVMGetInsertBlock(g->b);
    LLVMValueRef br = LLVMBuildBr(g->b, L->head);
    if (innermost)
        LLVMSetMetadata(br, g->md_loop, ic__gen_loop_md(g));
    LLVMAddIncoming(L->iv, &next, &latch, 1);
    LLVMPositionBuilderAtEnd(g->b, L->exit);
}

/* Splits flat index v over dims[0..n-1] (row-major) into idx allocas. */
static void decompose(ic__cg *g, LLVMValueRef v, const int64_t *dims, int n, LLVMValueRef *idx)
{
    for (int d = n - 1; d >= 0; d--) {
        LLVMValueRef sz = ic__gen_i64(g, dims[d] > 0 ? dims[d] : 1);
        st(g, LLVMBuildURem(g->b, v, sz, ""), idx[d]);
        v = LLVMBuildUDiv(g->b, v, sz, "");
    }
}

/* idx (allocas over dims[0..n-1]) += 1 with carries, branch-free. */
static void odometer_inc(ic__cg *g, const int64_t *dims, int n, LLVMValueRef *idx)
{
    LLVMValueRef carry = ic__gen_i64(g, 1);
    for (int d = n - 1; d >= 0; d--) {
        LLVMValueRef t = LLVMBuildAdd(g->b, ld(g, idx[d]), carry, "");
        LLVMValueRef wrap = LLVMBuildICmp(g->b, LLVMIntEQ, t, ic__gen_i64(g, dims[d]), "");
        st(g, LLVMBuildSelect(g->b, wrap, ic__gen_i64(g, 0), t, ""), idx[d]);
        carry = LLVMBuildZExt(g->b, wrap, g->t_i64, "");
    }
}

static int64_t prod(int n, const int64_t *d)
{
    int64_t p = 1;
    for (int i = 0; i < n; i++)
        p *= d[i];
    return p;
}

/* ---- stages ---- */

/* COLUMN mode wraps the innermost work in a loop over the strip: lane j, column base + j. */
typedef struct { LLVMValueRef base, width; } strip_t;

static ic_status stage_body(ic__cg *g, int s, const strip_t *sp)
{
    if (!sp)
        return ic__gen_stage(g, s);
    loop_t L;
    loop_open(g, &L, ic__gen_i64(g, 0), sp->width, "lane");
    g->lane = L.iv;
    g->vars[g->k->nouter - 1] = LLVMBuildNSWAdd(g->b, sp->base, L.iv, "col");
    ic_status r = ic__gen_stage(g, s);
    loop_close(g, &L, true);
    return r;
}

/* The first REDUCE of stage st after instruction i (-1: from the start), or -1: the loops
 * over a stage's accumulators. */
static int next_reduce(const ic_stage *st, int i)
{
    while (++i < st->ninstr)
        if (st->instr[i].op == IC_L_REDUCE)
            return i;
    return -1;
}

static void init_accs(ic__cg *g, int s, const strip_t *sp)
{
    const ic_stage *stg = &g->k->stages[s];
    loop_t L;
    if (sp) {
        loop_open(g, &L, ic__gen_i64(g, 0), sp->width, "init");
        g->lane = L.iv;
    }
    for (int i = next_reduce(stg, -1); i >= 0; i = next_reduce(stg, i)) {
        const ic_linstr *in = &stg->instr[i];
        ic_dtype vt = in->red == IC_RED_ARGMAX ? stg->instr[in->a].type : in->type;
        LLVMTypeRef ty = ic__gen_type(g, vt);
        st(g, ic__gen_reduce_init(g, in->red, vt), ic__gen_acc_ptr(g, g->acc[s][i], ty));
        if (in->red == IC_RED_ARGMAX)
            st(g, ic__gen_i64(g, -1), ic__gen_acc_ptr(g, g->acc_idx[s][i], g->t_i64));
    }
    if (sp)
        loop_close(g, &L, true);
}

/* Runs stage s for the current outer point (or strip). */
static ic_status emit_stage(ic__cg *g, int s, const strip_t *sp)
{
    const ic_kernel *k = g->k;
    const ic_stage *stg = &k->stages[s];
    if (stg->kind == IC_STAGE_BODY)
        return stage_body(g, s, sp);
    if (stg->kind == IC_STAGE_REDUCE)
        init_accs(g, s, sp);
    loop_t L[IC_MAX_RANK];
    for (int d = 0; d < k->ninner; d++) {
        loop_open(g, &L[d], ic__gen_i64(g, 0), ic__gen_i64(g, k->inner[d]), "r");
        g->vars[k->nouter + d] = L[d].iv;
    }
    ic_status r = stage_body(g, s, sp);
    for (int d = k->ninner - 1; d >= 0; d--)
        loop_close(g, &L[d], d == k->ninner - 1 && !sp);
    return r;
}

/* Runs every stage for the current outer point (or strip). */
static ic_status emit_stages(ic__cg *g, const strip_t *sp)
{
    for (int s = 0; s < g->k->nstages; s++) {
        ic_status r = emit_stage(g, s, sp);
        if (r)
            return r;
    }
    return IC_OK;
}

/* ---- the three loop arrangements, inside K.range(bufs.., lo, hi) ---- */

/* What runs for one point of a segment loop: every stage (pointwise kernels) or one. */
typedef ic_status (*seg_body)(ic__cg *g, int stage);

static ic_status all_stages(ic__cg *g, int stage)
{
    (void)stage;
    return emit_stages(g, NULL);
}

/* Runs body over the flattened points [lo, hi) of dims[0..n-1] (loop variables varbase..):
 * segments, each a run of the innermost dim inside [lo, hi), vectorised. */
static ic_status emit_segments(ic__cg *g, LLVMValueRef lo, LLVMValueRef hi, const int64_t *dims,
                               int n, int varbase, seg_body body, int stage)
{
    if (n == 0) {
        loop_t L;
        loop_open(g, &L, lo, hi, "item");
        ic_status r = body(g, stage);
        loop_close(g, &L, false);
        return r;
    }
    LLVMValueRef idx[IC_MAX_RANK], pos = entry_alloca(g, g->t_i64, NULL, "pos");
    for (int d = 0; d < n; d++)
        idx[d] = entry_alloca(g, g->t_i64, NULL, "o");
    decompose(g, lo, dims, n, idx);
    st(g, lo, pos);
    LLVMBasicBlockRef head = block(g, "seg.head"), sbody = block(g, "seg.body"), exit = block(g, "seg.exit");
    LLVMBuildBr(g->b, head);
    LLVMPositionBuilderAtEnd(g->b, head);
    LLVMValueRef i = ld(g, pos);
    LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, i, hi, ""), sbody, exit);
    LLVMPositionBuilderAtEnd(g->b, sbody);
    LLVMValueRef j0 = ld(g, idx[n - 1]);
    LLVMValueRef len = smin(g, LLVMBuildSub(g->b, hi, i, ""),
                            LLVMBuildSub(g->b, ic__gen_i64(g, dims[n - 1]), j0, ""));
    for (int d = 0; d < n - 1; d++)
        g->vars[varbase + d] = ld(g, idx[d]);
    loop_t L;
    loop_open(g, &L, j0, LLVMBuildNSWAdd(g->b, j0, len, ""), "x");
    g->vars[varbase + n - 1] = L.iv;
    ic_status r = body(g, stage);
    loop_close(g, &L, true);
    st(g, LLVMBuildNSWAdd(g->b, i, len, ""), pos);
    st(g, ic__gen_i64(g, 0), idx[n - 1]);
    odometer_inc(g, dims, n - 1, idx);
    LLVMBuildBr(g->b, head);
    LLVMPositionBuilderAtEnd(g->b, exit);
    return r;
}

static ic_status emit_pointwise(ic__cg *g, LLVMValueRef lo, LLVMValueRef hi)
{
    return emit_segments(g, lo, hi, g->k->outer, g->k->nouter, 0, all_stages, -1);
}

/* Rows a ROW kernel runs together. A short row leaves the core waiting on its chain of
 * dependent steps (a vector pass, the horizontal reduction of its accumulators, the next
 * pass, ...): with the stages of several independent rows emitted in turn, out-of-order
 * execution overlaps one row's chain with the others' passes. Long rows need no help.
 * Three rows: BERT's attention softmax (rows of 128 f32, 8 AVX-512 vectors each) keeps
 * three rows' vectors in the 32 registers; four spill (3 vs 4 vs 2 rows, [32, 12, 128,
 * 128] back to back: 1.00, 1.07, 1.08 ms; eight lost a quarter of the bandwidth). */
static int row_group(const ic__cg *g)
{
    const ic_kernel *k = g->k;
    bool reduce = false;
    for (int s = 0; s < k->nstages; s++)
        reduce |= k->stages[s].kind == IC_STAGE_REDUCE;
    int64_t n = prod(k->ninner, k->inner);
    if (!reduce || k->ninner == 0 || n <= 0 || g->p->vector_width == 1)
        return 1;
    /* (rows of 768: +10% in L2, but twice the code to compile for a kernel bound by L3) */
    return n <= 256 ? 3 : 1;
}

/* Accumulator storage of every REDUCE for U rows: set 0 is g's own, sets 1.. new allocas. */
static void row_accs(ic__cg *g, int U, LLVMValueRef ***acc, LLVMValueRef ***acci, LLVMValueRef *mem)
{
    const ic_kernel *k = g->k;
    for (int u = 0; u < U; u++) {
        acc[u] = (LLVMValueRef **)mem;
        mem += k->nstages;
        acci[u] = (LLVMValueRef **)mem;
        mem += k->nstages;
        for (int s = 0; s < k->nstages; s++) {
            const ic_stage *stg = &k->stages[s];
            acc[u][s] = u ? mem : g->acc[s];
            acci[u][s] = u ? mem + stg->ninstr : g->acc_idx[s];
            if (u)
                mem += 2 * stg->ninstr;
            for (int i = 0; u && i < stg->ninstr; i++) {
                const ic_linstr *in = &stg->instr[i];
                acc[u][s][i] = acci[u][s][i] = NULL;
                if (in->op != IC_L_REDUCE)
                    continue;
                ic_dtype vt = in->red == IC_RED_ARGMAX ? stg->instr[in->a].type : in->type;
                acc[u][s][i] = entry_alloca(g, ic__gen_type(g, vt), NULL, "acc");
                if (in->red == IC_RED_ARGMAX)
                    acci[u][s][i] = entry_alloca(g, g->t_i64, NULL, "acci");
            }
        }
    }
}

/* One iteration over U rows: per stage, each row's loops in turn. */
static ic_status emit_rows(ic__cg *g, int U, LLVMValueRef *idx, LLVMValueRef ***acc, LLVMValueRef ***acci)
{
    const ic_kernel *k = g->k;
    int n = k->nouter;
    LLVMValueRef vars[8][IC_MAX_RANK];
    for (int u = 0; u < U; u++) {
        for (int d = 0; d < n; d++)
            vars[u][d] = ld(g, idx[d]);
        odometer_inc(g, k->outer, n, idx);
    }
    LLVMValueRef **acc0 = g->acc, **acci0 = g->acc_idx;
    ic_status r = IC_OK;
    for (int s = 0; s < k->nstages && !r; s++)
        for (int u = 0; u < U && !r; u++) {
            memcpy(g->vars, vars[u], sizeof(LLVMValueRef) * (size_t)n);
            g->acc = acc[u];
            g->acc_idx = acci[u];
            r = emit_stage(g, s, NULL);
        }
    g->acc = acc0;
    g->acc_idx = acci0;
    return r;
}

static ic_status emit_row(ic__cg *g, LLVMValueRef lo, LLVMValueRef hi)
{
    const ic_kernel *k = g->k;
    int n = k->nouter;
    LLVMValueRef idx[IC_MAX_RANK];
    for (int d = 0; d < n; d++)
        idx[d] = entry_alloca(g, g->t_i64, NULL, "o");
    decompose(g, lo, k->outer, n, idx);
    int U = row_group(g); /* at most 8 */
    LLVMValueRef start = lo;
    ic_status r = IC_OK;
    if (U > 1) { /* groups of U rows, then the rest one by one */
        int total = 0;
        for (int s = 0; s < k->nstages; s++)
            total += k->stages[s].ninstr;
        size_t words = (size_t)U * (2 * (size_t)k->nstages + 2 * (size_t)total) + 1;
        LLVMValueRef *mem = ic__calloc(g->c, words, sizeof(LLVMValueRef));
        LLVMValueRef **acc[8], **acci[8];
        if (!mem)
            return ic__error(g->c, IC_ENOMEM, "codegen: out of memory for kernel '%s'", k->name);
        row_accs(g, U, acc, acci, mem);
        LLVMValueRef pos = entry_alloca(g, g->t_i64, NULL, "pos");
        st(g, lo, pos);
        LLVMBasicBlockRef head = block(g, "grp.head"), body = block(g, "grp.body"), exit = block(g, "grp.exit");
        LLVMBuildBr(g->b, head);
        LLVMPositionBuilderAtEnd(g->b, head);
        LLVMValueRef i = ld(g, pos);
        LLVMValueRef last = LLVMBuildSub(g->b, hi, ic__gen_i64(g, U), "");
        LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntSLE, i, last, ""), body, exit);
        LLVMPositionBuilderAtEnd(g->b, body);
        r = emit_rows(g, U, idx, acc, acci);
        st(g, LLVMBuildNSWAdd(g->b, i, ic__gen_i64(g, U), ""), pos);
        LLVMBuildBr(g->b, head);
        LLVMPositionBuilderAtEnd(g->b, exit);
        start = ld(g, pos);
        ic__free(g->c, mem);
        if (r)
            return r;
    }
    loop_t L;
    loop_open(g, &L, start, hi, "item");
    for (int d = 0; d < n; d++)
        g->vars[d] = ld(g, idx[d]);
    r = emit_stages(g, NULL);
    odometer_inc(g, k->outer, n, idx);
    loop_close(g, &L, false);
    return r;
}

static ic_status emit_column(ic__cg *g, LLVMValueRef lo, LLVMValueRef hi)
{
    const ic_kernel *k = g->k;
    int n = k->nouter;
    int64_t cols = k->outer[n - 1], S = g->strip;
    int64_t dims[IC_MAX_RANK];
    memcpy(dims, k->outer, sizeof(int64_t) * (size_t)n);
    dims[n - 1] = (cols + S - 1) / S;
    LLVMValueRef idx[IC_MAX_RANK];
    for (int d = 0; d < n; d++)
        idx[d] = entry_alloca(g, g->t_i64, NULL, "o");
    decompose(g, lo, dims, n, idx);
    loop_t L;
    loop_open(g, &L, lo, hi, "item");
    for (int d = 0; d < n - 1; d++)
        g->vars[d] = ld(g, idx[d]);
    strip_t sp;
    sp.base = LLVMBuildNSWMul(g->b, ld(g, idx[n - 1]), ic__gen_i64(g, S), "base");
    sp.width = smin(g, ic__gen_i64(g, S), LLVMBuildSub(g->b, ic__gen_i64(g, cols), sp.base, ""));
    ic_status r = emit_stages(g, &sp);
    odometer_inc(g, dims, n, idx);
    loop_close(g, &L, false);
    return r;
}

/* ---- functions of one kernel ---- */

#define IC__CACHED_BYTES (256 * 1024) /* a buffer this small stays in L2 once read */

static int64_t buf_bytes(const ic_buffer *b) { return b->numel * (int64_t)ic_dtype_size(b->dtype); }

/* Index of buffer i among R's parameters. */
static int buf_param(const ic__cg *g, int i)
{
    int a = 0;
    for (int j = 0; j < i; j++)
        a += g->used[j];
    return a;
}

/* "ic-small-bufs" (indices in the buffer table) and "ic-small-params" (parameters of a range
 * function) of the used buffers that are broadcast operands: at most IC__CACHED_BYTES and an
 * eighth of the kernel's largest buffer, so read again and again (a bias, a mask, a
 * layer_norm's weight). They stay cached, and a prefetch past their end fetches nothing
 * useful: prefetch.c skips them. */
static void small_buf_attrs(ic__cg *g, LLVMValueRef fn)
{
    char bufs[512], params[512];
    size_t nb = 0, np = 0;
    bufs[0] = params[0] = 0;
    int64_t big = 0;
    for (int i = 0; i < g->nbufs; i++)
        if (g->used[i] && buf_bytes(&g->bufs[i]) > big)
            big = buf_bytes(&g->bufs[i]);
    for (int i = 0; i < g->nbufs; i++) {
        int64_t n = buf_bytes(&g->bufs[i]);
        if (!g->used[i] || n > IC__CACHED_BYTES || 8 * n > big)
            continue;
        if (nb + 24 < sizeof bufs && np + 24 < sizeof params) {
            nb += (size_t)snprintf(bufs + nb, sizeof bufs - nb, "%s%d", nb ? "," : "", i);
            np += (size_t)snprintf(params + np, sizeof params - np, "%s%d", np ? "," : "",
                                   buf_param(g, i));
        }
    }
    if (!nb)
        return;
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                            LLVMCreateStringAttribute(g->ctx, "ic-small-bufs", 13, bufs, (unsigned)nb));
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                            LLVMCreateStringAttribute(g->ctx, "ic-small-params", 15, params, (unsigned)np));
}

void ic__gen_target_attrs(ic__cg *g, LLVMValueRef fn)
{
    LLVMAttributeRef a = LLVMCreateStringAttribute(g->ctx, "target-cpu", 10, g->t->cpu,
                                                   (unsigned)strlen(g->t->cpu));
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, a);
    a = LLVMCreateStringAttribute(g->ctx, "target-features", 15, g->t->features,
                                  (unsigned)strlen(g->t->features));
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, a);
}

static void fn_attrs(ic__cg *g, LLVMValueRef fn)
{
    LLVMAttributeRef a;
    ic__gen_target_attrs(g, fn);
    if (g->p->prefer_vector_bits > 0) {
        char w[16];
        snprintf(w, sizeof w, "%d", g->p->prefer_vector_bits);
        a = LLVMCreateStringAttribute(g->ctx, "prefer-vector-width", 19, w, (unsigned)strlen(w));
        LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, a);
    }
    if (g->p->prefetch_bytes > 0) {
        char d[24];
        snprintf(d, sizeof d, "%d", g->p->prefetch_bytes);
        a = LLVMCreateStringAttribute(g->ctx, "ic-prefetch", 11, d, (unsigned)strlen(d));
        LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, a);
        if (g->mode == IC_KMODE_ROW && g->k->ninner > 0) { /* prefetch.c: the next row(s) */
            /* rows run U > 1 at a time (short rows): two groups ahead */
            int U = row_group(g);
            snprintf(d, sizeof d, "%lld", (long long)(U > 1 ? 2 * U : 1) * prod(g->k->ninner, g->k->inner));
            a = LLVMCreateStringAttribute(g->ctx, "ic-prefetch-row", 15, d, (unsigned)strlen(d));
            LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, a);
        }
        small_buf_attrs(g, fn);
    }
    unsigned nu = LLVMGetEnumAttributeKindForName("nounwind", 8);
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(g->ctx, nu, 0));
}

void ic__gen_noalias(ic__cg *g, LLVMValueRef fn, unsigned param)
{
    unsigned na = LLVMGetEnumAttributeKindForName("noalias", 7);
    LLVMAddAttributeAtIndex(fn, param + 1, LLVMCreateEnumAttribute(g->ctx, na, 0));
}

LLVMValueRef ic__gen_decl(ic__cg *g, const char *name, LLVMTypeRef ret, LLVMTypeRef *ps, int n,
                          bool vararg, LLVMTypeRef *fty)
{
    *fty = LLVMFunctionType(ret, ps, (unsigned)n, vararg);
    LLVMValueRef f = LLVMGetNamedFunction(g->mod, name);
    return f ? f : LLVMAddFunction(g->mod, name, *fty);
}

LLVMValueRef ic__gen_omp_i64(ic__cg *g, const char *name)
{
    LLVMTypeRef fty;
    LLVMValueRef f = ic__gen_decl(g, name, g->t_i32, NULL, 0, false, &fty);
    return LLVMBuildSExt(g->b, LLVMBuildCall2(g->b, fty, f, NULL, 0, ""), g->t_i64, "");
}

/* The ident_t every __kmpc call takes: {reserved, flags = KMP_IDENT_KMPC, reserved x2, psource}. */
LLVMValueRef ic__gen_omp_ident(ic__cg *g)
{
    LLVMValueRef id = LLVMGetNamedGlobal(g->mod, "ic.omp.ident");
    if (id)
        return id;
    const char *src = ";ic-llvm;kernel;0;0;;";
    LLVMValueRef str = LLVMAddGlobal(g->mod, LLVMArrayType2(g->t_i8, strlen(src) + 1), "ic.omp.src");
    LLVMSetInitializer(str, LLVMConstStringInContext2(g->ctx, src, strlen(src), 0));
    LLVMSetGlobalConstant(str, 1);
    LLVMSetLinkage(str, LLVMPrivateLinkage);
    LLVMTypeRef fields[5] = { g->t_i32, g->t_i32, g->t_i32, g->t_i32, g->t_ptr };
    LLVMTypeRef ty = LLVMStructTypeInContext(g->ctx, fields, 5, 0);
    LLVMValueRef vals[5] = { LLVMConstInt(g->t_i32, 0, 0), LLVMConstInt(g->t_i32, 2, 0),
                             LLVMConstInt(g->t_i32, 0, 0), LLVMConstInt(g->t_i32, 0, 0), str };
    id = LLVMAddGlobal(g->mod, ty, "ic.omp.ident");
    LLVMSetInitializer(id, LLVMConstNamedStruct(ty, vals, 5));
    LLVMSetGlobalConstant(id, 1);
    LLVMSetLinkage(id, LLVMPrivateLinkage);
    return id;
}

/* A range function <sym><suffix>(used buffer ptrs.., extra ptrs [nextra], i64 lo, i64 hi):
 * buffers and extras are noalias. Leaves the builder in its body; *start is the block the
 * entry (allocas only) branches to in range_end. */
typedef struct { LLVMValueRef fn; LLVMTypeRef ty; LLVMBasicBlockRef start; int nused, nextra; } range_t;

static void range_begin(ic__cg *g, range_t *R, const char *suffix, int nextra)
{
    char name[512];
    LLVMTypeRef ps[IC__MAX_KBUFS + 4];
    int n = 0;
    for (int i = 0; i < g->nbufs; i++)
        if (g->used[i])
            ps[n++] = g->t_ptr;
    R->nused = n;
    R->nextra = nextra;
    for (int i = 0; i < nextra; i++)
        ps[n++] = g->t_ptr;
    ps[n++] = g->t_i64;
    ps[n++] = g->t_i64;
    R->ty = LLVMFunctionType(g->t_void, ps, (unsigned)n, 0);
    snprintf(name, sizeof name, "%s%s", g->sym, suffix);
    R->fn = LLVMAddFunction(g->mod, name, R->ty);
    LLVMSetLinkage(R->fn, LLVMInternalLinkage);
    fn_attrs(g, R->fn);
    for (int i = 0, a = 0; i < g->nbufs; i++)
        g->bufptr[i] = g->used[i] ? LLVMGetParam(R->fn, (unsigned)a++) : NULL;
    for (int i = 0; i < R->nused + nextra; i++)
        ic__gen_noalias(g, R->fn, (unsigned)i);
    g->fn = R->fn;
    g->entry = block(g, "entry");
    R->start = block(g, "start");
    LLVMPositionBuilderAtEnd(g->b, R->start);
}

static LLVMValueRef range_param(const range_t *R, int i) /* extras, then lo (nextra), hi */
{
    return LLVMGetParam(R->fn, (unsigned)(R->nused + i));
}

static void range_end(ic__cg *g, const range_t *R)
{
    LLVMBuildRetVoid(g->b);
    LLVMPositionBuilderAtEnd(g->b, g->entry);
    LLVMBuildBr(g->b, R->start);
}

/* Loads the used buffer pointers from bufs and calls R(ptrs.., extra.., lo, hi). */
static void call_range(ic__cg *g, const range_t *R, LLVMValueRef bufs, LLVMValueRef *extra,
                       LLVMValueRef lo, LLVMValueRef hi)
{
    LLVMValueRef args[IC__MAX_KBUFS + 4];
    int n = 0;
    for (int i = 0; i < g->nbufs; i++) {
        if (!g->used[i])
            continue;
        LLVMValueRef off = ic__gen_i64(g, i);
        LLVMValueRef p = LLVMBuildInBoundsGEP2(g->b, g->t_ptr, bufs, &off, 1, "");
        args[n++] = LLVMBuildLoad2(g->b, g->t_ptr, p, "");
    }
    for (int i = 0; i < R->nextra; i++)
        args[n++] = extra[i];
    args[n++] = lo;
    args[n++] = hi;
    LLVMBuildCall2(g->b, R->ty, R->fn, args, (unsigned)n, "");
}

/* The microtask <sym><suffix>(gtid, btid, bufs, extra..): this thread's contiguous share of
 * [0, items), a multiple of grain, passed to R. With stride > 0 the last extra pointer is
 * advanced by tid * stride bytes (per-thread partial results). */
static LLVMValueRef omp_task(ic__cg *g, const char *suffix, const range_t *R, int64_t items,
                             int64_t grain, int64_t stride)
{
    char name[512];
    LLVMTypeRef ps[6] = { g->t_ptr, g->t_ptr, g->t_ptr, g->t_ptr, g->t_ptr, g->t_ptr };
    LLVMTypeRef ty = LLVMFunctionType(g->t_void, ps, 3 + (unsigned)R->nextra, 0);
    snprintf(name, sizeof name, "%s%s", g->sym, suffix);
    LLVMValueRef mt = LLVMAddFunction(g->mod, name, ty);
    LLVMSetLinkage(mt, LLVMInternalLinkage);
    fn_attrs(g, mt);
    ic__gen_noalias(g, mt, 0);
    ic__gen_noalias(g, mt, 1);
    LLVMBuilderRef saved = g->b;
    LLVMValueRef saved_fn = g->fn;
    g->b = LLVMCreateBuilderInContext(g->ctx);
    g->fn = mt;
    LLVMPositionBuilderAtEnd(g->b, block(g, "entry"));
    LLVMValueRef tid = ic__gen_omp_i64(g, "omp_get_thread_num");
    LLVMValueRef nth = ic__gen_omp_i64(g, "omp_get_num_threads");
    int64_t chunks = (items + grain - 1) / grain;
    LLVMValueRef per = LLVMBuildUDiv(g->b, LLVMBuildAdd(g->b, ic__gen_i64(g, chunks),
                                                        LLVMBuildSub(g->b, nth, ic__gen_i64(g, 1), ""), ""),
                                     nth, "");
    per = LLVMBuildMul(g->b, per, ic__gen_i64(g, grain), "per");
    LLVMValueRef lo = smin(g, LLVMBuildMul(g->b, tid, per, ""), ic__gen_i64(g, items));
    LLVMValueRef hi = smin(g, LLVMBuildAdd(g->b, lo, per, ""), ic__gen_i64(g, items));
    LLVMValueRef extra[4];
    for (int i = 0; i < R->nextra; i++)
        extra[i] = LLVMGetParam(mt, 3 + (unsigned)i);
    if (stride > 0) {
        LLVMValueRef off = LLVMBuildMul(g->b, tid, ic__gen_i64(g, stride), "");
        extra[R->nextra - 1] = LLVMBuildInBoundsGEP2(g->b, g->t_i8, extra[R->nextra - 1], &off, 1, "");
    }
    LLVMBasicBlockRef run = block(g, "run"), done = block(g, "done");
    /* partial results are written even by threads without work (an empty range) */
    LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntSLE, lo, hi, ""), run, done);
    LLVMPositionBuilderAtEnd(g->b, run);
    call_range(g, R, LLVMGetParam(mt, 2), extra, lo, hi);
    LLVMBuildBr(g->b, done);
    LLVMPositionBuilderAtEnd(g->b, done);
    LLVMBuildRetVoid(g->b);
    LLVMDisposeBuilder(g->b);
    g->b = saved;
    g->fn = saved_fn;
    return mt;
}

void ic__gen_omp_fork(ic__cg *g, LLVMValueRef mt, LLVMValueRef team, LLVMValueRef bufs,
                      LLVMValueRef *extra, int nextra)
{
    LLVMTypeRef fty;
    LLVMValueRef ident = ic__gen_omp_ident(g);
    if (team) {
        LLVMValueRef f_gt = ic__gen_decl(g, "__kmpc_global_thread_num", g->t_i32, &g->t_ptr, 1, false, &fty);
        LLVMValueRef gtid = LLVMBuildCall2(g->b, fty, f_gt, &ident, 1, "gtid");
        LLVMTypeRef pps[3] = { g->t_ptr, g->t_i32, g->t_i32 };
        LLVMValueRef f_push = ic__gen_decl(g, "__kmpc_push_num_threads", g->t_void, pps, 3, false, &fty);
        LLVMValueRef pa[3] = { ident, gtid, LLVMBuildTrunc(g->b, team, g->t_i32, "") };
        LLVMBuildCall2(g->b, fty, f_push, pa, 3, "");
    }
    LLVMTypeRef fps[3] = { g->t_ptr, g->t_i32, g->t_ptr };
    LLVMValueRef f_fork = ic__gen_decl(g, "__kmpc_fork_call", g->t_void, fps, 3, true, &fty);
    LLVMValueRef fa[8] = { ident, LLVMConstInt(g->t_i32, 1 + (unsigned)nextra, 0), mt, bufs };
    for (int i = 0; i < nextra; i++)
        fa[4 + i] = extra[i];
    LLVMBuildCall2(g->b, fty, f_fork, fa, 4 + (unsigned)nextra, "");
}

/* ic__gen_omp_fork with the team size of the params, if they fix one, else libomp's. */
static void omp_fork(ic__cg *g, LLVMValueRef mt, LLVMValueRef bufs, LLVMValueRef *extra, int nextra)
{
    LLVMValueRef team = g->p->threads > 1 ? ic__gen_i64(g, g->p->threads) : NULL;
    ic__gen_omp_fork(g, mt, team, bufs, extra, nextra);
}

/* Starts the exported kernel K(bufs); returns bufs. */
static LLVMValueRef kernel_begin(ic__cg *g)
{
    LLVMTypeRef kty = LLVMFunctionType(g->t_void, &g->t_ptr, 1, 0);
    LLVMValueRef kf = LLVMAddFunction(g->mod, g->sym, kty);
    fn_attrs(g, kf);
    g->fn = kf;
    g->entry = block(g, "entry");
    LLVMPositionBuilderAtEnd(g->b, g->entry);
    return LLVMGetParam(kf, 0);
}

/* ---- split reductions: a kernel with a single outer point, its stages one by one ----
 * Each REDUCE stage forks: every thread folds its share of the (flattened) inner points
 * into private accumulators and writes them to its partial record; the partials are then
 * combined in thread order (first-index ARGMAX and a fixed float order). INNER stages fork
 * over the same space; BODY stages run in K. Accumulators live in one block of 16-byte
 * slots (value, then the ARGMAX index). */

static int acc_slot(const ic_kernel *k, int s, int i, int *nslots)
{
    int n = 0, slot = -1;
    for (int a = 0; a < k->nstages; a++)
        for (int b = next_reduce(&k->stages[a], -1); b >= 0; b = next_reduce(&k->stages[a], b)) {
            if (a == s && b == i)
                slot = n;
            n++;
        }
    if (nslots)
        *nslots = n;
    return slot;
}

static ic_dtype acc_vtype(const ic_stage *st, const ic_linstr *in)
{
    return in->red == IC_RED_ARGMAX ? st->instr[in->a].type : in->type;
}

/* Points the accumulators of stages [0, upto) at their slots in block. */
static void accs_in_block(ic__cg *g, LLVMValueRef block_, int upto)
{
    const ic_kernel *k = g->k;
    for (int s = 0; s < upto; s++)
        for (int i = next_reduce(&k->stages[s], -1); i >= 0; i = next_reduce(&k->stages[s], i)) {
            LLVMValueRef off = ic__gen_i64(g, 16 * acc_slot(k, s, i, NULL));
            g->acc[s][i] = LLVMBuildInBoundsGEP2(g->b, g->t_i8, block_, &off, 1, "");
            LLVMValueRef off8 = ic__gen_i64(g, 16 * acc_slot(k, s, i, NULL) + 8);
            g->acc_idx[s][i] = LLVMBuildInBoundsGEP2(g->b, g->t_i8, block_, &off8, 1, "");
        }
}

/* Stores the reduction identities of stage s into the slots of record rec. */
static void init_slots(ic__cg *g, int s, LLVMValueRef rec)
{
    const ic_stage *st = &g->k->stages[s];
    for (int i = next_reduce(st, -1); i >= 0; i = next_reduce(st, i)) {
        const ic_linstr *in = &st->instr[i];
        int slot = acc_slot(g->k, s, i, NULL);
        LLVMValueRef off = ic__gen_i64(g, 16 * slot), off8 = ic__gen_i64(g, 16 * slot + 8);
        ic_dtype vt = acc_vtype(st, in);
        LLVMBuildStore(g->b, ic__gen_reduce_init(g, in->red, vt),
                               LLVMBuildInBoundsGEP2(g->b, g->t_i8, rec, &off, 1, ""));
        LLVMBuildStore(g->b, ic__gen_i64(g, -1), LLVMBuildInBoundsGEP2(g->b, g->t_i8, rec, &off8, 1, ""));
    }
}

static ic_status split_stage_body(ic__cg *g, int s)
{
    return ic__gen_stage(g, s);
}

/* The range function of stage s: (bufs.., accblock, partial, lo, hi). */
static ic_status split_range(ic__cg *g, int s, range_t *R)
{
    const ic_kernel *k = g->k;
    const ic_stage *stg = &k->stages[s];
    char suffix[32];
    snprintf(suffix, sizeof suffix, ".s%d", s);
    range_begin(g, R, suffix, 2);
    for (int d = 0; d < k->nouter; d++) /* a single outer point */
        g->vars[d] = ic__gen_i64(g, 0);
    accs_in_block(g, range_param(R, 0), s);
    if (stg->kind == IC_STAGE_REDUCE)
        for (int i = next_reduce(stg, -1); i >= 0; i = next_reduce(stg, i)) {
            const ic_linstr *in = &stg->instr[i];
            g->acc[s][i] = entry_alloca(g, ic__gen_type(g, acc_vtype(stg, in)), NULL, "acc");
            g->acc_idx[s][i] = entry_alloca(g, g->t_i64, NULL, "acci");
            st(g, ic__gen_reduce_init(g, in->red, acc_vtype(stg, in)), g->acc[s][i]);
            st(g, ic__gen_i64(g, -1), g->acc_idx[s][i]);
        }
    ic_status r = emit_segments(g, range_param(R, 2), range_param(R, 3), k->inner, k->ninner,
                                k->nouter, split_stage_body, s);
    if (stg->kind == IC_STAGE_REDUCE) /* this thread's partials */
        for (int i = next_reduce(stg, -1); i >= 0; i = next_reduce(stg, i)) {
            const ic_linstr *in = &stg->instr[i];
            int slot = acc_slot(k, s, i, NULL);
            LLVMTypeRef vty = ic__gen_type(g, acc_vtype(stg, in));
            LLVMValueRef off = ic__gen_i64(g, 16 * slot), off8 = ic__gen_i64(g, 16 * slot + 8);
            LLVMBuildStore(g->b, LLVMBuildLoad2(g->b, vty, g->acc[s][i], ""),
                           LLVMBuildInBoundsGEP2(g->b, g->t_i8, range_param(R, 1), &off, 1, ""));
            LLVMBuildStore(g->b, LLVMBuildLoad2(g->b, g->t_i64, g->acc_idx[s][i], ""),
                           LLVMBuildInBoundsGEP2(g->b, g->t_i8, range_param(R, 1), &off8, 1, ""));
        }
    range_end(g, R);
    return r;
}

/* Combines the partial records [0, nrec) of stage s into accblock, in order. */
static void split_combine(ic__cg *g, int s, LLVMValueRef accblock, LLVMValueRef partials,
                          LLVMValueRef nrec, int64_t recsize)
{
    const ic_stage *st = &g->k->stages[s];
    init_slots(g, s, accblock);
    accs_in_block(g, accblock, s + 1);
    loop_t L;
    loop_open(g, &L, ic__gen_i64(g, 0), nrec, "part");
    LLVMValueRef roff = LLVMBuildMul(g->b, L.iv, ic__gen_i64(g, recsize), "");
    LLVMValueRef rec = LLVMBuildInBoundsGEP2(g->b, g->t_i8, partials, &roff, 1, "");
    for (int i = next_reduce(st, -1); i >= 0; i = next_reduce(st, i)) {
        const ic_linstr *in = &st->instr[i];
        int slot = acc_slot(g->k, s, i, NULL);
        ic_dtype vt = acc_vtype(st, in);
        LLVMValueRef off = ic__gen_i64(g, 16 * slot), off8 = ic__gen_i64(g, 16 * slot + 8);
        LLVMValueRef v = LLVMBuildLoad2(g->b, ic__gen_type(g, vt),
                                        LLVMBuildInBoundsGEP2(g->b, g->t_i8, rec, &off, 1, ""), "");
        LLVMValueRef ix = LLVMBuildLoad2(g->b, g->t_i64, LLVMBuildInBoundsGEP2(g->b, g->t_i8, rec, &off8, 1, ""), "");
        ic__gen_combine(g, in->red, vt, g->acc[s][i],
                        in->red == IC_RED_ARGMAX ? g->acc_idx[s][i] : NULL, v, ix);
    }
    loop_close(g, &L, false);
}

static ic_status gen_split(ic__cg *g, int64_t items)
{
    const ic_kernel *k = g->k;
    int nslots;
    acc_slot(k, -1, -1, &nslots);
    int64_t recsize = 16 * (int64_t)(nslots ? nslots : 1);
    range_t R[64];
    if (k->nstages > 64)
        return ic__error(g->c, IC_EUNSUPPORTED, "codegen: kernel '%s' has %d stages (at most 64)",
                         k->name, k->nstages);
    LLVMValueRef tasks[64] = { 0 };
    for (int s = 0; s < k->nstages; s++) {
        if (k->stages[s].kind == IC_STAGE_BODY)
            continue;
        ic_status r = split_range(g, s, &R[s]);
        if (r)
            return r;
        char suffix[32];
        snprintf(suffix, sizeof suffix, ".s%d.omp", s);
        tasks[s] = omp_task(g, suffix, &R[s], items, g->p->grain > 0 ? g->p->grain : 64,
                            k->stages[s].kind == IC_STAGE_REDUCE ? recsize : 0);
    }
    LLVMValueRef bufs = kernel_begin(g);
    for (int d = 0; d < k->nouter; d++)
        g->vars[d] = ic__gen_i64(g, 0);
    for (int i = 0; i < g->nbufs; i++) { /* for the BODY stages, run here */
        LLVMValueRef off = ic__gen_i64(g, i);
        g->bufptr[i] = g->used[i] ? LLVMBuildLoad2(g->b, g->t_ptr, LLVMBuildInBoundsGEP2(g->b, g->t_ptr, bufs, &off, 1, ""), "") : NULL;
    }
    LLVMValueRef nrec = g->p->threads > 0 ? ic__gen_i64(g, g->p->threads) : ic__gen_omp_i64(g, "omp_get_max_threads");
    LLVMValueRef accblock = entry_alloca(g, g->t_i8, ic__gen_i64(g, recsize), "accs");
    LLVMValueRef partials = LLVMBuildArrayAlloca(g->b, g->t_i8, LLVMBuildMul(g->b, nrec, ic__gen_i64(g, recsize), ""), "partials");
    LLVMSetAlignment(partials, 64);
    for (int s = 0; s < k->nstages; s++) {
        LLVMValueRef extra[2] = { accblock, partials };
        switch (k->stages[s].kind) {
        case IC_STAGE_BODY: {
            accs_in_block(g, accblock, s);
            ic_status r = ic__gen_stage(g, s);
            if (r)
                return r;
            break;
        }
        case IC_STAGE_REDUCE: {
            loop_t L; /* threads that do not run leave the identity behind */
            loop_open(g, &L, ic__gen_i64(g, 0), nrec, "init");
            LLVMValueRef roff = LLVMBuildMul(g->b, L.iv, ic__gen_i64(g, recsize), "");
            init_slots(g, s, LLVMBuildInBoundsGEP2(g->b, g->t_i8, partials, &roff, 1, ""));
            loop_close(g, &L, false);
            omp_fork(g, tasks[s], bufs, extra, 2);
            split_combine(g, s, accblock, partials, nrec, recsize);
            break;
        }
        case IC_STAGE_INNER:
            omp_fork(g, tasks[s], bufs, extra, 2);
            break;
        }
    }
    LLVMBuildRetVoid(g->b);
    return IC_OK;
}

/* ---- split column reductions: the reduced rows split across the threads ----
 * A COLUMN kernel with one outer dim of C columns (a sum over dim 0 of [R, C]) walked by
 * strips reads each row in pieces, one piece a strip, a whole row apart: the prefetchers lose
 * the stream at every piece. Here each thread instead reads a contiguous block of rows, all C
 * columns of each, into its own record of C-long accumulator arrays; the records are combined
 * in thread order (as gen_split's), then the BODY stages run over the C columns in K. Kernels
 * with INNER stages (a row pass per column) keep the strips. */

#define IC__COLSPLIT_BYTES (32 * 1024) /* one thread's record: C accumulators of each REDUCE */
#define IC__COLSPLIT_TEAM 8            /* records K keeps on its stack (team size cap) */

/* Byte offsets in a record of the value and ARGMAX index arrays of REDUCE i of stage s (or,
 * with s = -1, the record size). */
static int64_t col_slot(const ic_kernel *k, int64_t C, int s, int i, int64_t *idx_off)
{
    int64_t off = 0;
    for (int a = 0; a < k->nstages; a++)
        for (int b = next_reduce(&k->stages[a], -1); b >= 0; b = next_reduce(&k->stages[a], b)) {
            const ic_linstr *in = &k->stages[a].instr[b];
            int64_t vsz = ic_dtype_size(acc_vtype(&k->stages[a], in));
            vsz = vsz < 1 ? 1 : vsz;
            int64_t v = off, ix = (off + vsz * C + 63) / 64 * 64;
            off = in->red == IC_RED_ARGMAX ? ix + 8 * C : ix;
            off = (off + 63) / 64 * 64;
            if (a == s && b == i) {
                if (idx_off)
                    *idx_off = ix;
                return v;
            }
        }
    return off;
}

/* Whether kernel k takes the split column path under g's parameters. */
static bool colsplit_ok(const ic__cg *g, bool threads_ok)
{
    const ic_kernel *k = g->k;
    if (g->mode != IC_KMODE_COLUMN || !threads_ok || k->nouter != 1 || k->ninner < 1)
        return false;
    bool reduce = false;
    for (int s = 0; s < k->nstages; s++) {
        if (k->stages[s].kind == IC_STAGE_INNER)
            return false;
        reduce |= k->stages[s].kind == IC_STAGE_REDUCE;
    }
    /* enough rows to share; wider rows keep the strips (long pieces of rows anyway) */
    return reduce && prod(k->ninner, k->inner) >= 256 &&
           col_slot(k, k->outer[0], -1, -1, NULL) <= IC__COLSPLIT_BYTES;
}

/* Points the accumulators of stages [0, upto) (all REDUCE stages for upto < 0: stage s only)
 * at their arrays in record rec. */
static void col_accs(ic__cg *g, LLVMValueRef rec, int from, int upto)
{
    const ic_kernel *k = g->k;
    for (int s = from; s < upto; s++)
        for (int i = next_reduce(&k->stages[s], -1); i >= 0; i = next_reduce(&k->stages[s], i)) {
            int64_t ix, v = col_slot(k, k->outer[0], s, i, &ix);
            LLVMValueRef ov = ic__gen_i64(g, v), oi = ic__gen_i64(g, ix);
            g->acc[s][i] = LLVMBuildInBoundsGEP2(g->b, g->t_i8, rec, &ov, 1, "");
            g->acc_idx[s][i] = LLVMBuildInBoundsGEP2(g->b, g->t_i8, rec, &oi, 1, "");
        }
}

/* Rows a thread of the split column path folds into its record at once. Each update of a
 * record (C accumulators, up to 32 KB) loads and stores all of it: for a sum of f32 rows in
 * f64 that is 4x the bytes of the row itself in L1/L2 traffic, enough to slow the stream
 * from memory. The values of COL_BLOCK rows are combined in registers first, then folded
 * once. Only for reductions that do not depend on the order within the block (not ARGMAX,
 * whose ties keep the first index, nor PROD) and whose running value nothing reads. */
#define COL_BLOCK 4

static bool reads_instr(const ic_linstr *in, int j)
{
    int n = ic_linstr_arity(in);
    return (n > 0 && in->a == j) || (n > 1 && in->b == j) || (n > 2 && in->c == j);
}

static int col_block_rows(const ic__cg *g, int s)
{
    const ic_stage *st = &g->k->stages[s];
    if (g->p->vector_width == 1)
        return 1;
    for (int i = next_reduce(st, -1); i >= 0; i = next_reduce(st, i)) {
        const ic_linstr *in = &st->instr[i];
        if (in->red != IC_RED_SUM && in->red != IC_RED_MAX && in->red != IC_RED_MIN)
            return 1;
        for (int j = i + 1; j < st->ninstr; j++)
            if (reads_instr(&st->instr[j], i))
                return 1;
    }
    return COL_BLOCK;
}

/* Loop variables of flat row v of the inner space. */
static void col_row_vars(ic__cg *g, LLVMValueRef v)
{
    const ic_kernel *k = g->k;
    for (int d = k->ninner - 1; d >= 0; d--) {
        LLVMValueRef sz = ic__gen_i64(g, k->inner[d]);
        g->vars[k->nouter + d] = d ? LLVMBuildURem(g->b, v, sz, "") : v;
        v = LLVMBuildUDiv(g->b, v, sz, "");
    }
}

/* Rows row..row+B-1 of stage s over the strip: each row's values, combined per lane, then
 * folded into the record once. */
static ic_status col_block(ic__cg *g, int s, const strip_t *sp, LLVMValueRef row, int B)
{
    const ic_stage *st = &g->k->stages[s];
    LLVMValueRef *dv = ic__calloc(g->c, (size_t)B * (size_t)st->ninstr, sizeof(LLVMValueRef));
    if (!dv)
        return ic__error(g->c, IC_ENOMEM, "codegen: out of memory for kernel '%s'", g->k->name);
    loop_t L;
    loop_open(g, &L, ic__gen_i64(g, 0), sp->width, "lane");
    g->lane = L.iv;
    g->vars[g->k->nouter - 1] = LLVMBuildNSWAdd(g->b, sp->base, L.iv, "col");
    ic_status r = IC_OK;
    for (int u = 0; u < B && !r; u++) {
        col_row_vars(g, LLVMBuildNSWAdd(g->b, row, ic__gen_i64(g, u), ""));
        g->deferred = dv + (size_t)u * (size_t)st->ninstr;
        r = ic__gen_stage(g, s);
    }
    g->deferred = NULL;
    for (int i = next_reduce(st, -1); i >= 0 && !r; i = next_reduce(st, i)) {
        const ic_linstr *in = &st->instr[i];
        LLVMValueRef v[COL_BLOCK];
        for (int u = 0; u < B; u++)
            v[u] = dv[(size_t)u * (size_t)st->ninstr + i];
        for (int n = B; n > 1;) { /* a tree: independent folds */
            int h = n / 2;
            for (int u = 0; u < h; u++)
                v[u] = ic__gen_fold(g, in->red, in->type, v[2 * u], v[2 * u + 1]);
            if (n & 1)
                v[h] = v[n - 1];
            n = h + (n & 1);
        }
        LLVMTypeRef ty = ic__gen_type(g, in->type);
        ic__gen_combine(g, in->red, in->type, ic__gen_acc_ptr(g, g->acc[s][i], ty), NULL,
                        v[0], NULL);
    }
    loop_close(g, &L, true);
    ic__free(g->c, dv);
    return r;
}

/* Range function of REDUCE stage s: (bufs.., final record, this thread's record, lo, hi):
 * rows lo..hi-1 of the flattened inner space, each over all C columns; blocks of B rows
 * (col_block_rows), then the rest one by one. */
static ic_status col_range(ic__cg *g, int s, range_t *R, const strip_t *sp_const)
{
    char suffix[32];
    snprintf(suffix, sizeof suffix, ".c%d", s);
    range_begin(g, R, suffix, 2);
    strip_t sp = *sp_const;
    col_accs(g, range_param(R, 0), 0, s);
    col_accs(g, range_param(R, 1), s, s + 1);
    init_accs(g, s, &sp);
    LLVMValueRef lo = range_param(R, 2), hi = range_param(R, 3);
    int B = col_block_rows(g, s);
    ic_status r = IC_OK;
    if (B > 1) { /* lo <= hi: omp_task calls a range only then */
        LLVMValueRef nb = LLVMBuildSDiv(g->b, LLVMBuildSub(g->b, hi, lo, ""), ic__gen_i64(g, B), "");
        loop_t Q;
        loop_open(g, &Q, ic__gen_i64(g, 0), nb, "blk");
        r = col_block(g, s, &sp, LLVMBuildNSWAdd(g->b, lo, LLVMBuildNSWMul(g->b, Q.iv, ic__gen_i64(g, B), ""), ""), B);
        loop_close(g, &Q, false);
        lo = LLVMBuildNSWAdd(g->b, lo, LLVMBuildNSWMul(g->b, nb, ic__gen_i64(g, B), ""), "");
    }
    loop_t L;
    loop_open(g, &L, lo, hi, "row");
    col_row_vars(g, L.iv);
    if (!r)
        r = stage_body(g, s, &sp);
    loop_close(g, &L, false);
    range_end(g, R);
    return r;
}

/* Stores the identities of stage s's reductions over the C lanes of record rec. */
static void col_init(ic__cg *g, int s, LLVMValueRef rec, const strip_t *sp)
{
    col_accs(g, rec, s, s + 1);
    init_accs(g, s, sp);
}

/* final = the records [0, nrec) of stage s combined in thread order, lane by lane. */
static void col_combine(ic__cg *g, int s, LLVMValueRef final, LLVMValueRef parts, LLVMValueRef nrec,
                        int64_t recsize, const strip_t *sp)
{
    const ic_kernel *k = g->k;
    const ic_stage *st = &k->stages[s];
    col_init(g, s, final, sp);
    loop_t T, L;
    loop_open(g, &T, ic__gen_i64(g, 0), nrec, "part");
    LLVMValueRef roff = LLVMBuildMul(g->b, T.iv, ic__gen_i64(g, recsize), "");
    LLVMValueRef rec = LLVMBuildInBoundsGEP2(g->b, g->t_i8, parts, &roff, 1, "");
    loop_open(g, &L, ic__gen_i64(g, 0), sp->width, "lane");
    for (int i = next_reduce(st, -1); i >= 0; i = next_reduce(st, i)) {
        const ic_linstr *in = &st->instr[i];
        ic_dtype vt = acc_vtype(st, in);
        LLVMTypeRef ty = ic__gen_type(g, vt);
        int64_t ix, v = col_slot(k, k->outer[0], s, i, &ix);
        LLVMValueRef ov = ic__gen_i64(g, v), oi = ic__gen_i64(g, ix);
        LLVMValueRef pv = LLVMBuildInBoundsGEP2(g->b, g->t_i8, rec, &ov, 1, "");
        LLVMValueRef pi = LLVMBuildInBoundsGEP2(g->b, g->t_i8, rec, &oi, 1, "");
        LLVMValueRef x = LLVMBuildLoad2(g->b, ty, LLVMBuildInBoundsGEP2(g->b, ty, pv, &L.iv, 1, ""), "");
        LLVMValueRef xi = LLVMBuildLoad2(g->b, g->t_i64, LLVMBuildInBoundsGEP2(g->b, g->t_i64, pi, &L.iv, 1, ""), "");
        LLVMValueRef fv = LLVMBuildInBoundsGEP2(g->b, ty, g->acc[s][i], &L.iv, 1, "");
        LLVMValueRef fi = LLVMBuildInBoundsGEP2(g->b, g->t_i64, g->acc_idx[s][i], &L.iv, 1, "");
        ic__gen_combine(g, in->red, vt, fv, in->red == IC_RED_ARGMAX ? fi : NULL, x, xi);
    }
    loop_close(g, &L, true);
    loop_close(g, &T, false);
}

static ic_status gen_colsplit(ic__cg *g)
{
    const ic_kernel *k = g->k;
    int64_t C = k->outer[0], rows = prod(k->ninner, k->inner);
    int64_t recsize = col_slot(k, C, -1, -1, NULL);
    range_t R[64];
    LLVMValueRef tasks[64] = { 0 };
    if (k->nstages > 64)
        return ic__error(g->c, IC_EUNSUPPORTED, "codegen: kernel '%s' has %d stages (at most 64)",
                         k->name, k->nstages);
    strip_t sp = { ic__gen_i64(g, 0), ic__gen_i64(g, C) };
    for (int s = 0; s < k->nstages; s++) {
        if (k->stages[s].kind != IC_STAGE_REDUCE)
            continue;
        ic_status r = col_range(g, s, &R[s], &sp);
        if (r)
            return r;
        char suffix[32];
        snprintf(suffix, sizeof suffix, ".c%d.omp", s);
        tasks[s] = omp_task(g, suffix, &R[s], rows, 1, recsize);
    }
    LLVMValueRef bufs = kernel_begin(g);
    for (int i = 0; i < g->nbufs; i++) { /* for the BODY stages, run here */
        LLVMValueRef off = ic__gen_i64(g, i);
        g->bufptr[i] = g->used[i] ? LLVMBuildLoad2(g->b, g->t_ptr, LLVMBuildInBoundsGEP2(g->b, g->t_ptr, bufs, &off, 1, ""), "") : NULL;
    }
    /* at most IC__COLSPLIT_TEAM threads, each with its record on K's stack */
    LLVMValueRef want = g->p->threads > 0 ? ic__gen_i64(g, g->p->threads) : ic__gen_omp_i64(g, "omp_get_max_threads");
    LLVMValueRef nrec = smin(g, want, ic__gen_i64(g, IC__COLSPLIT_TEAM));
    LLVMValueRef final = entry_alloca(g, g->t_i8, ic__gen_i64(g, recsize), "accs");
    LLVMValueRef parts = entry_alloca(g, g->t_i8, ic__gen_i64(g, recsize * IC__COLSPLIT_TEAM), "parts");
    for (int s = 0; s < k->nstages; s++) {
        LLVMValueRef extra[2] = { final, parts };
        if (k->stages[s].kind == IC_STAGE_BODY) {
            col_accs(g, final, 0, s);
            ic_status r = stage_body(g, s, &sp);
            if (r)
                return r;
            continue;
        }
        loop_t L; /* threads that do not run leave the identities behind */
        loop_open(g, &L, ic__gen_i64(g, 0), nrec, "init");
        LLVMValueRef roff = LLVMBuildMul(g->b, L.iv, ic__gen_i64(g, recsize), "");
        col_init(g, s, LLVMBuildInBoundsGEP2(g->b, g->t_i8, parts, &roff, 1, ""), &sp);
        loop_close(g, &L, false);
        ic__gen_omp_fork(g, tasks[s], nrec, bufs, extra, 2);
        col_combine(g, s, final, parts, nrec, recsize, &sp);
    }
    LLVMBuildRetVoid(g->b);
    return IC_OK;
}

/* ---- one kernel ---- */

static ic_status mark_used_buffers(ic__cg *g)
{
    const ic_kernel *k = g->k;
    int n = 0;
    memset(g->used, 0, (size_t)g->nbufs);
    for (int s = 0; s < k->nstages; s++)
        for (int i = 0; i < k->stages[s].ninstr; i++) {
            const ic_linstr *in = &k->stages[s].instr[i];
            if ((in->op == IC_L_LOAD || in->op == IC_L_STORE) && !g->used[in->buf])
                g->used[in->buf] = true, n++;
        }
    if (n > IC__MAX_KBUFS)
        return ic__error(g->c, IC_EUNSUPPORTED, "codegen: kernel '%s' touches %d buffers (at most %d)",
                         k->name, n, IC__MAX_KBUFS);
    return IC_OK;
}

/* ---- non-temporal stores ----
 *
 * A row kernel writing a large output (layer_norm's y) reads each line of it from memory
 * before overwriting it (the write-allocate), a third stream next to the input and the
 * write-back: stores that bypass the cache drop it (a C layer_norm of [8192, 4096]: 72% of
 * a copy with plain stores, 102% with non-temporal ones). They need 64-byte aligned vector
 * stores, which callers' output pointers do not promise: the kernel gets a second range
 * function, .range.nt, whose pointers are declared 64-byte aligned and whose last stores to
 * such outputs are non-temporal, and .range.sel picks it when the pointers are aligned.
 * A buffer qualifies when it is an output of at least p->stream_bytes, its rows are whole
 * lines, no stage after its last store reads or writes it (it is not read back from the
 * cache: softmax's stash of exp() in y is), and the kernel never loads it. */
static bool nt_plan(ic__cg *g)
{
    const ic_kernel *k = g->k;
    bool any = false;
    int64_t row = prod(k->ninner, k->inner);
    for (int i = 0; i < g->nbufs; i++) {
        g->nt_out[i] = false;
        const ic_buffer *b = &g->bufs[i];
        int64_t sz = (int64_t)ic_dtype_size(b->dtype);
        if (!g->used[i] || b->kind != IC_BUF_OUTPUT || g->p->stream_bytes <= 0 ||
            buf_bytes(b) < g->p->stream_bytes || (row * sz) % 64 || g->mode != IC_KMODE_ROW ||
            g->p->vector_width == 1)
            continue;
        bool stored = false, loaded = false;
        for (int s = 0; s < k->nstages; s++)
            for (int j = 0; j < k->stages[s].ninstr; j++) {
                const ic_linstr *in = &k->stages[s].instr[j];
                stored |= in->op == IC_L_STORE && in->buf == i;
                loaded |= in->op == IC_L_LOAD && in->buf == i;
            }
        g->nt_out[i] = stored && !loaded;
        any |= g->nt_out[i];
    }
    return any;
}

/* .range.sel(args..): .range.nt(args..) when every non-temporal output is 64-byte aligned,
 * else .range(args..). The .nt version ends with an sfence: its stores are weakly ordered,
 * and the outputs are read by other threads after the join. */
static void range_select(ic__cg *g, range_t *D, const range_t *R, const range_t *N)
{
    *D = *R;
    char name[512];
    snprintf(name, sizeof name, "%s.range.sel", g->sym);
    D->fn = LLVMAddFunction(g->mod, name, R->ty);
    LLVMSetLinkage(D->fn, LLVMInternalLinkage);
    fn_attrs(g, D->fn);
    LLVMPositionBuilderAtEnd(g->b, LLVMAppendBasicBlockInContext(g->ctx, D->fn, "entry"));
    LLVMValueRef ok = LLVMConstInt(g->t_i1, 1, 0);
    for (int i = 0; i < g->nbufs; i++) {
        if (!g->nt_out[i])
            continue;
        LLVMValueRef a = LLVMBuildPtrToInt(g->b, LLVMGetParam(D->fn, (unsigned)buf_param(g, i)), g->t_i64, "");
        LLVMValueRef low = LLVMBuildAnd(g->b, a, ic__gen_i64(g, 63), "");
        ok = LLVMBuildAnd(g->b, ok, LLVMBuildICmp(g->b, LLVMIntEQ, low, ic__gen_i64(g, 0), ""), "");
    }
    unsigned n = LLVMCountParams(D->fn);
    LLVMValueRef args[IC__MAX_KBUFS + 4];
    for (unsigned i = 0; i < n; i++)
        args[i] = LLVMGetParam(D->fn, i);
    LLVMBasicBlockRef yes = LLVMAppendBasicBlockInContext(g->ctx, D->fn, "aligned");
    LLVMBasicBlockRef no = LLVMAppendBasicBlockInContext(g->ctx, D->fn, "unaligned");
    LLVMBuildCondBr(g->b, ok, yes, no);
    LLVMPositionBuilderAtEnd(g->b, yes);
    LLVMBuildCall2(g->b, R->ty, N->fn, args, n, "");
    unsigned id = LLVMLookupIntrinsicID("llvm.x86.sse.sfence", 19);
    LLVMBuildCall2(g->b, LLVMIntrinsicGetType(g->ctx, id, NULL, 0),
                   LLVMGetIntrinsicDeclaration(g->mod, id, NULL, 0), NULL, 0, "");
    LLVMBuildRetVoid(g->b);
    LLVMPositionBuilderAtEnd(g->b, no);
    LLVMBuildCall2(g->b, R->ty, R->fn, args, n, "");
    LLVMBuildRetVoid(g->b);
}

/* llvm.assume((p & 63) == 0): unlike an align attribute on the parameter, it survives the
 * range function being inlined into the OpenMP task, and lets O3 align the vector stores. */
static void assume_aligned(ic__cg *g, LLVMValueRef p)
{
    LLVMValueRef low = LLVMBuildAnd(g->b, LLVMBuildPtrToInt(g->b, p, g->t_i64, ""), ic__gen_i64(g, 63), "");
    LLVMValueRef c = LLVMBuildICmp(g->b, LLVMIntEQ, low, ic__gen_i64(g, 0), "aligned");
    unsigned id = LLVMLookupIntrinsicID("llvm.assume", 11);
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(g->mod, id, NULL, 0);
    LLVMBuildCall2(g->b, LLVMIntrinsicGetType(g->ctx, id, NULL, 0), fn, &c, 1, "");
}

/* The loops of kernel k in a range function R<suffix>. */
static ic_status emit_range(ic__cg *g, range_t *R, const char *suffix)
{
    const ic_kernel *k = g->k;
    range_begin(g, R, suffix, 0);
    if (g->nt) { /* .range.sel calls this one with aligned outputs only */
        /* not inlined: .range.sel's own test would make the assumption redundant, and O3
         * drops it before the vectorizer has used it */
        unsigned ni = LLVMGetEnumAttributeKindForName("noinline", 8);
        LLVMAddAttributeAtIndex(R->fn, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(g->ctx, ni, 0));
        char list[256] = "";
        size_t len = 0;
        for (int i = 0; i < g->nbufs; i++)
            if (g->nt_out[i]) {
                assume_aligned(g, g->bufptr[i]);
                if (len + 16 < sizeof list)
                    len += (size_t)snprintf(list + len, sizeof list - len, "%s%d", len ? "," : "",
                                            buf_param(g, i));
            }
        LLVMAddAttributeAtIndex(R->fn, LLVMAttributeFunctionIndex,
                                LLVMCreateStringAttribute(g->ctx, "ic-nt-params", 12, list,
                                                          (unsigned)len));
    }
    /* accumulators: a scalar (row) or a strip-long array (column) per REDUCE */
    for (int s = 0; s < k->nstages; s++)
        for (int i = 0; i < k->stages[s].ninstr; i++) {
            const ic_linstr *in = &k->stages[s].instr[i];
            g->acc[s][i] = g->acc_idx[s][i] = NULL;
            if (in->op != IC_L_REDUCE)
                continue;
            LLVMValueRef cnt = g->mode == IC_KMODE_COLUMN ? ic__gen_i64(g, g->strip) : NULL;
            g->acc[s][i] = entry_alloca(g, ic__gen_type(g, acc_vtype(&k->stages[s], in)), cnt, "acc");
            if (in->red == IC_RED_ARGMAX)
                g->acc_idx[s][i] = entry_alloca(g, g->t_i64, cnt, "acci");
        }
    LLVMValueRef lo = range_param(R, 0), hi = range_param(R, 1);
    ic_status r = IC_OK;
    switch (g->mode) {
    case IC_KMODE_POINTWISE: r = emit_pointwise(g, lo, hi); break;
    case IC_KMODE_ROW: r = emit_row(g, lo, hi); break;
    case IC_KMODE_COLUMN: r = emit_column(g, lo, hi); break;
    }
    range_end(g, R);
    return r;
}

static ic_status gen_kernel(ic__cg *g)
{
    const ic_kernel *k = g->k;
    ic_status r;
    g->gemm = false;
    if ((r = mark_used_buffers(g)))
        return r;
    bool gemm; /* gemm: contractions go through the packed GEMM path (gemm.c) */
    r = ic__gemm_try(g, &gemm);
    g->gemm = gemm;
    if (r || gemm)
        return r;
    g->mode = ic_kernel_mode_of(k);
    g->strip = g->p->strip > 0 ? g->p->strip : 64;
    /* work items: outer points, segments' elements, or (outer rows x strips) */
    int64_t items = prod(k->nouter, k->outer);
    if (g->mode == IC_KMODE_COLUMN)
        items = prod(k->nouter - 1, k->outer) * ((k->outer[k->nouter - 1] + g->strip - 1) / g->strip);
    int64_t elems = prod(k->nouter, k->outer) * prod(k->ninner, k->inner);
    bool threads_ok = g->p->parallel_depth > 0 && g->p->threads != 1 && elems >= g->p->serial_threshold;
    if (g->mode == IC_KMODE_ROW && items == 1 && k->ninner > 0 && threads_ok)
        return gen_split(g, prod(k->ninner, k->inner));
    if (colsplit_ok(g, threads_ok))
        return gen_colsplit(g);
    bool parallel = threads_ok && items >= 2;
    int64_t grain = g->mode == IC_KMODE_POINTWISE && g->p->grain > 0 ? g->p->grain : 1;

    range_t R;
    g->nt = false;
    bool nt = nt_plan(g);
    if ((r = emit_range(g, &R, ".range")))
        return r;
    if (nt) {
        range_t N, D;
        g->nt = true;
        r = emit_range(g, &N, ".range.nt");
        g->nt = false;
        if (r)
            return r;
        range_select(g, &D, &R, &N);
        R = D;
    }
    LLVMValueRef mt = parallel && items > 0 ? omp_task(g, ".omp", &R, items, grain, 0) : NULL;
    LLVMValueRef bufs = kernel_begin(g);
    if (items > 0) {
        if (mt)
            omp_fork(g, mt, bufs, NULL, 0);
        else
            call_range(g, &R, bufs, NULL, ic__gen_i64(g, 0), ic__gen_i64(g, items));
    }
    LLVMBuildRetVoid(g->b);
    return IC_OK;
}

/* ---- the module ---- */

static void diag_handler(LLVMDiagnosticInfoRef di, void *user)
{
    ic_ctx *c = user;
    char *msg = LLVMGetDiagInfoDescription(di);
    /* e.g. "loop not vectorized" remarks for loops that cannot be: informative only */
    if (c && msg)
        ic__logf(c, 1, "llvm: %s", msg);
    LLVMDisposeMessage(msg);
}

/* Symbol-safe, unique names: [A-Za-z0-9_], not starting with a digit. */
static char *kernel_symbol(ic_ctx *c, const char *name, int idx, char **prev, int nprev)
{
    char buf[256];
    size_t n = 0;
    if (!name || !*name)
        name = "kernel";
    if (name[0] >= '0' && name[0] <= '9')
        buf[n++] = 'k', buf[n++] = '_';
    for (const char *p = name; *p && n < sizeof buf - 24; p++) {
        char ch = *p;
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_';
        buf[n++] = ok ? ch : '_';
    }
    buf[n] = 0;
    /* names the generated code declares itself (libomp, libm) */
    static const char *const reserved[] = { "tanh", "erf", "exp", "log", "sin", "cos", "pow", "main" };
    bool clash = strncmp(buf, "__kmpc", 6) == 0 || strncmp(buf, "omp_", 4) == 0 || strncmp(buf, "llvm", 4) == 0;
    for (size_t i = 0; i < sizeof reserved / sizeof *reserved; i++)
        clash |= strcmp(buf, reserved[i]) == 0;
    if (clash)
        snprintf(buf + n, sizeof buf - n, "_k%d", idx), n = strlen(buf);
    for (int i = 0; i < nprev; i++)
        if (strcmp(prev[i], buf) == 0) {
            snprintf(buf + n, sizeof buf - n, "_k%d", idx);
            break;
        }
    return ic__strdup(c, buf);
}

static ic_status gen_init(ic__cg *g, ic_ctx *c, const ic_codegen_target *t, ic_llvm_module *m)
{
    memset(g, 0, sizeof *g);
    g->c = c;
    g->t = t;
    g->ctx = m->ctx;
    g->mod = m->mod;
    g->b = LLVMCreateBuilderInContext(g->ctx);
    g->t_void = LLVMVoidTypeInContext(g->ctx);
    g->t_i1 = LLVMInt1TypeInContext(g->ctx);
    g->t_i8 = LLVMInt8TypeInContext(g->ctx);
    g->t_i16 = LLVMInt16TypeInContext(g->ctx);
    g->t_i32 = LLVMInt32TypeInContext(g->ctx);
    g->t_i64 = LLVMInt64TypeInContext(g->ctx);
    g->t_f16 = LLVMHalfTypeInContext(g->ctx);
    g->t_f32 = LLVMFloatTypeInContext(g->ctx);
    g->t_f64 = LLVMDoubleTypeInContext(g->ctx);
    g->t_ptr = LLVMPointerTypeInContext(g->ctx, 0);
    g->md_loop = LLVMGetMDKindIDInContext(g->ctx, "llvm.loop", 9);
    return IC_OK;
}

/* Per-kernel scratch: accumulator slots and SSA values of the largest stage. */
static ic_status gen_kernel_scratch(ic__cg *g, const ic_kernel *k, void **mem)
{
    size_t nst = (size_t)k->nstages, total = 0, maxi = 1;
    for (int s = 0; s < k->nstages; s++) {
        total += (size_t)k->stages[s].ninstr;
        if ((size_t)k->stages[s].ninstr > maxi)
            maxi = (size_t)k->stages[s].ninstr;
    }
    size_t bytes = 2 * nst * sizeof(LLVMValueRef *) + 2 * total * sizeof(LLVMValueRef) +
                   maxi * sizeof(LLVMValueRef) + 16;
    char *p = ic__calloc(g->c, 1, bytes);
    if (!p)
        return ic__error(g->c, IC_ENOMEM, "codegen: out of memory for kernel '%s'", k->name);
    *mem = p;
    g->acc = (LLVMValueRef **)p;
    g->acc_idx = g->acc + nst;
    LLVMValueRef *slots = (LLVMValueRef *)(g->acc_idx + nst);
    for (int s = 0; s < k->nstages; s++) {
        g->acc[s] = slots;
        slots += k->stages[s].ninstr;
        g->acc_idx[s] = slots;
        slots += k->stages[s].ninstr;
    }
    g->vals = slots;
    return IC_OK;
}

ic_status ic_llvmgen_kernels(ic_ctx *c, int nkernels, const ic_kernel *kernels, int nbufs,
                             const ic_buffer *bufs, const ic_codegen_target *t,
                             const ic_codegen_params *params, ic_llvm_module **out)
{
    *out = NULL;
    if (!t || nkernels < 0 || nbufs < 0 || (nkernels && !kernels) || (nbufs && !bufs))
        return ic__error(c, IC_EINVAL, "codegen: bad arguments");
    for (int i = 0; i < nkernels; i++) {
        /* the loop IR's own checks; the CPU adds no target limits */
        ic_status r = ic_kernel_verify(c, "codegen", &kernels[i], nbufs, bufs);
        if (r)
            return r;
    }
    ic__llvm_init();
    ic_llvm_module *m = ic__calloc(c, 1, sizeof *m);
    if (!m)
        return ic__error(c, IC_ENOMEM, "codegen: out of memory");
    m->c = c;
    m->t = t;
    m->tsc = LLVMOrcCreateNewThreadSafeContext();
    m->ctx = LLVMOrcThreadSafeContextGetContext(m->tsc);
    LLVMContextSetDiagnosticHandler(m->ctx, diag_handler, c);
    m->mod = LLVMModuleCreateWithNameInContext("ic", m->ctx);
    LLVMSetTarget(m->mod, t->triple);
    LLVMTargetDataRef td = LLVMCreateTargetDataLayout(t->tm);
    LLVMSetModuleDataLayout(m->mod, td);
    LLVMDisposeTargetData(td);
    m->syms = ic__calloc(c, (size_t)nkernels + 1, sizeof(char *));
    LLVMValueRef *bufptr = ic__calloc(c, (size_t)nbufs + 1, sizeof(LLVMValueRef));
    bool *used = ic__calloc(c, (size_t)nbufs + 1, sizeof(bool));
    bool *nt_out = ic__calloc(c, (size_t)nbufs + 1, sizeof(bool));
    if (!m->syms || !bufptr || !used || !nt_out) {
        ic__free(c, bufptr);
        ic__free(c, used);
        ic__free(c, nt_out);
        ic_llvm_module_destroy(m);
        return ic__error(c, IC_ENOMEM, "codegen: out of memory");
    }
    ic__cg g;
    gen_init(&g, c, t, m);
    g.bufs = bufs;
    g.nbufs = nbufs;
    g.bufptr = bufptr;
    g.used = used;
    g.nt_out = nt_out;
    ic_status r = IC_OK;
    for (int i = 0; i < nkernels && !r; i++) {
        const ic_kernel *k = &kernels[i];
        ic_codegen_params dp;
        if (!params)
            ic_codegen_params_default(t, k, bufs, &dp);
        g.p = params ? &params[i] : &dp;
        g.k = k;
        if (params && (r = ic__cg_params_check(c, k->name, g.p)))
            break;
        if (!(m->syms[i] = kernel_symbol(c, k->name, i, m->syms, i))) {
            r = ic__error(c, IC_ENOMEM, "codegen: out of memory");
            break;
        }
        m->nkernels = i + 1;
        g.sym = m->syms[i];
        void *scratch = NULL;
        if ((r = gen_kernel_scratch(&g, k, &scratch)))
            break;
        r = gen_kernel(&g);
        m->ngemm += g.gemm;
        ic__free(c, scratch);
    }
    LLVMDisposeBuilder(g.b);
    ic__free(c, bufptr);
    ic__free(c, used);
    ic__free(c, nt_out);
    if (!r)
        r = ic_llvm_module_verify(m);
    if (r) {
        ic_llvm_module_destroy(m);
        return r;
    }
    *out = m;
    return IC_OK;
}

LLVMOrcThreadSafeModuleRef ic__llvm_module_take(ic_llvm_module *m)
{
    if (!m->mod)
        return NULL;
    LLVMOrcThreadSafeModuleRef tsm = LLVMOrcCreateNewThreadSafeModule(m->mod, m->tsc);
    m->mod = NULL;
    return tsm;
}

void ic_llvm_module_destroy(ic_llvm_module *m)
{
    if (!m)
        return;
    if (m->mod)
        LLVMDisposeModule(m->mod);
    if (m->tsc)
        LLVMOrcDisposeThreadSafeContext(m->tsc);
    for (int i = 0; i < m->nkernels; i++)
        ic__free(m->c, m->syms[i]);
    ic__free(m->c, m->syms);
    ic__free(m->c, m);
}
