/* gemm_emit.c - LLVM IR of a recognised contraction (gemm-impl.h), BLIS style:
 *
 *   K(bufs)                    scratch (stack, the kernel's own block, or malloc when another
 *                              run holds that block), then forks K.gemm.omp on a team of
 *                              min(omp_get_max_threads, plan) threads, or calls work directly
 *   K.gemm.work(bufs.., scratch, tid, nth, gtid)
 *     row panels (over the batch) or column panels are split across the team; per thread:
 *     for batch: for jc (nc columns): pack Y[:, jc..] (all of K) unless prepacked
 *       for ic (mc rows): for pc (kc deep): pack X[ic.., pc..] (or read it in place)
 *         for jr (nr): for ir (mr): micro-kernel -> accumulator tile; after the last pc the
 *           epilogue (the kernel's later stages) runs over the tile: bias, activation,
 *           residual, casts, stores -- never a separate pass over C
 *     with a row split and a Y without batch dims the team packs each Y block together
 *     (a share of its panels per thread, then a barrier) instead of once per thread
 *   K.gemm.micro.RxV(A, B, kc, C, first)   R x V vectors of f32 accumulators in registers:
 *                              llvm.fma of a broadcast A element and a row of B vectors, or
 *                              vdpbf16ps of a broadcast bf16 pair and a row of B pairs
 *   K.gemm.packA / K.gemm.packB             panels, zero padded, converted to f32 (or bf16
 *                              pairs); unit-stride operands by vl x vl block transposes; an
 *                              operand with a fused producer (x.to(f32), x * s) element by
 *                              element through the producer's instructions (opnd_f32)
 * Edges: rows past M and columns past N are zero in the panels; the last row panel and the
 * last column panel use micro-kernels of fewer rows / vectors; the epilogue covers exactly
 * the valid part of each tile. */
#include <stdio.h>
#include <string.h>
#include <llvm-c/DebugInfo.h>
#include "gemm-impl.h"

typedef struct {
    ic__cg *g;
    ic__gemm *m;
    LLVMTypeRef vty;            /* <vl x float> */
    unsigned valign;            /* alignment of tile and panel vectors */
    LLVMTypeRef micro_ty, packa_ty, packb_ty, work_ty, block_ty;
    LLVMValueRef micro[2][2];   /* [rows: full / edge][columns: full / edge] */
    int mre, nve;               /* edge rows (M % mr, 0 = none), vectors of the last column panel */
    LLVMValueRef packa, packb, work, panels, block;
    bool *xneed;                /* X with an expression index: the stage-0 instructions of it */
    bool *chain[2];             /* X, Y with a fused producer: its instructions (ic__gemm_chain_mark) */
} em_t;

/* ---- small builders ---- */

static LLVMValueRef I(ic__cg *g, int64_t v) { return ic__gen_i64(g, v); }
static LLVMValueRef add(ic__cg *g, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildNSWAdd(g->b, a, b, ""); }
static LLVMValueRef sub(ic__cg *g, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildNSWSub(g->b, a, b, ""); }
static LLVMValueRef mul(ic__cg *g, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildNSWMul(g->b, a, b, ""); }
static LLVMValueRef muli(ic__cg *g, LLVMValueRef a, int64_t b) { return mul(g, a, I(g, b)); }
static LLVMValueRef sdiv(ic__cg *g, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildSDiv(g->b, a, b, ""); }
static LLVMValueRef icmp(ic__cg *g, LLVMIntPredicate p, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildICmp(g->b, p, a, b, ""); }

static LLVMValueRef smin(ic__cg *g, LLVMValueRef a, LLVMValueRef b)
{
    LLVMValueRef x[2] = { a, b };
    return ic__gen_intrinsic(g, "llvm.smin", &g->t_i64, 1, x, 2);
}

static LLVMValueRef smax(ic__cg *g, LLVMValueRef a, LLVMValueRef b)
{
    LLVMValueRef x[2] = { a, b };
    return ic__gen_intrinsic(g, "llvm.smax", &g->t_i64, 1, x, 2);
}

static LLVMValueRef gep(ic__cg *g, LLVMTypeRef ty, LLVMValueRef p, LLVMValueRef idx)
{
    return LLVMBuildGEP2(g->b, ty, p, &idx, 1, "");
}

static LLVMBasicBlockRef blk(ic__cg *g, const char *name)
{
    return LLVMAppendBasicBlockInContext(g->ctx, g->fn, name);
}

static LLVMMetadataRef md_pair(ic__cg *g, const char *name, LLVMValueRef v)
{
    LLVMMetadataRef ops[2] = { LLVMMDStringInContext2(g->ctx, name, strlen(name)), v ? LLVMValueAsMetadata(v) : NULL };
    return LLVMMDNodeInContext2(g->ctx, ops, v ? 2 : 1);
}

/* llvm.loop metadata: no vectorisation (the code is vector already), unrolled `unroll` times
 * (1: never, which keeps the packing loops' block transposes a single copy in the IR). */
static LLVMValueRef md_scalar_loop(ic__cg *g, int unroll)
{
    LLVMMetadataRef ops[3];
    int n = 0;
    LLVMMetadataRef self = LLVMTemporaryMDNode(g->ctx, NULL, 0);
    ops[n++] = self;
    ops[n++] = md_pair(g, "llvm.loop.vectorize.enable", LLVMConstInt(g->t_i1, 0, 0));
    if (unroll > 1)
        ops[n++] = md_pair(g, "llvm.loop.unroll.count", LLVMConstInt(g->t_i32, (unsigned)unroll, 0));
    else
        ops[n++] = md_pair(g, "llvm.loop.unroll.disable", NULL);
    LLVMMetadataRef node = LLVMMDNodeInContext2(g->ctx, ops, (size_t)n);
    LLVMMetadataReplaceAllUsesWith(self, node);
    return LLVMMetadataAsValue(g->ctx, node);
}

/* A top-tested counted loop with an i64 induction variable. */
typedef struct { LLVMBasicBlockRef head, body, exit; LLVMValueRef iv; int64_t step; } lp_t;

static LLVMValueRef lp_open(ic__cg *g, lp_t *L, LLVMValueRef lo, LLVMValueRef hi, int64_t step,
                            const char *name)
{
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(g->b);
    L->head = blk(g, name);
    L->body = blk(g, name);
    L->exit = blk(g, name);
    L->step = step;
    LLVMBuildBr(g->b, L->head);
    LLVMPositionBuilderAtEnd(g->b, L->head);
    L->iv = LLVMBuildPhi(g->b, g->t_i64, name);
    LLVMAddIncoming(L->iv, &lo, &pre, 1);
    LLVMBuildCondBr(g->b, icmp(g, LLVMIntSLT, L->iv, hi), L->body, L->exit);
    LLVMPositionBuilderAtEnd(g->b, L->body);
    return L->iv;
}

/* llvm.loop metadata: never unrolled. The block, panel and batch loops run a handful of
 * times with constant trip counts, so full unrolling would copy the whole GEMM body (packing
 * calls, micro-kernel dispatch, epilogue) several times over: no faster, and each copy costs
 * optimisation and JIT codegen time (about half the compile time of a GEMM kernel). */
static LLVMValueRef md_no_unroll(ic__cg *g)
{
    LLVMMetadataRef self = LLVMTemporaryMDNode(g->ctx, NULL, 0);
    LLVMMetadataRef ops[2] = { self, md_pair(g, "llvm.loop.unroll.disable", NULL) };
    LLVMMetadataRef node = LLVMMDNodeInContext2(g->ctx, ops, 2);
    LLVMMetadataReplaceAllUsesWith(self, node);
    return LLVMMetadataAsValue(g->ctx, node);
}

/* md NULL: an outer loop, kept rolled (md_no_unroll). */
static void lp_close(ic__cg *g, lp_t *L, LLVMValueRef md)
{
    if (!md)
        md = md_no_unroll(g);
    LLVMValueRef next = add(g, L->iv, I(g, L->step));
    LLVMBasicBlockRef latch = LLVMGetInsertBlock(g->b);
    LLVMValueRef br = LLVMBuildBr(g->b, L->head);
    LLVMSetMetadata(br, g->md_loop, md);
    LLVMAddIncoming(L->iv, &next, &latch, 1);
    LLVMPositionBuilderAtEnd(g->b, L->exit);
}

/* if (c) { then } : returns the join block; the builder is left in `then`. */
static LLVMBasicBlockRef if_open(ic__cg *g, LLVMValueRef c, const char *name)
{
    LLVMBasicBlockRef then = blk(g, name), join = blk(g, name);
    LLVMBuildCondBr(g->b, c, then, join);
    LLVMPositionBuilderAtEnd(g->b, then);
    return join;
}

static void if_close(ic__cg *g, LLVMBasicBlockRef join)
{
    LLVMBuildBr(g->b, join);
    LLVMPositionBuilderAtEnd(g->b, join);
}

static void fn_attrs(ic__cg *g, LLVMValueRef fn, bool noinline)
{
    ic__gen_target_attrs(g, fn);
    char w[16];
    snprintf(w, sizeof w, "%d", g->p->prefer_vector_bits > 0 ? g->p->prefer_vector_bits : g->t->vector_bits);
    LLVMAttributeRef a = LLVMCreateStringAttribute(g->ctx, "prefer-vector-width", 19, w, (unsigned)strlen(w));
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, a);
    const char *kinds[2] = { "nounwind", "noinline" };
    for (int i = 0; i < (noinline ? 2 : 1); i++) {
        unsigned id = LLVMGetEnumAttributeKindForName(kinds[i], strlen(kinds[i]));
        LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(g->ctx, id, 0));
    }
}

/* A new internal function sym + suffix, its entry block current. */
static LLVMValueRef new_fn(ic__cg *g, const char *suffix, LLVMTypeRef ty, bool noinline_)
{
    char name[512];
    snprintf(name, sizeof name, "%s%s", g->sym, suffix);
    LLVMValueRef fn = LLVMAddFunction(g->mod, name, ty);
    LLVMSetLinkage(fn, LLVMInternalLinkage);
    fn_attrs(g, fn, noinline_);
    g->fn = fn;
    LLVMPositionBuilderAtEnd(g->b, blk(g, "entry"));
    return fn;
}

/* An element of dtype dt at p, as f32. */
static LLVMValueRef load_f32(ic__cg *g, ic_dtype dt, LLVMValueRef p)
{
    LLVMTypeRef mt = ic__gen_mem_type(g, dt);
    LLVMValueRef v = LLVMBuildLoad2(g->b, mt, p, "");
    LLVMSetAlignment(v, (unsigned)ic_dtype_size(dt));
    switch (dt) {
    case IC_F16:
        return LLVMBuildFPExt(g->b, v, g->t_f32, "");
    case IC_BF16: { /* the bits are the top half of an f32 */
        LLVMValueRef w = LLVMBuildZExt(g->b, v, g->t_i32, "");
        w = LLVMBuildShl(g->b, w, LLVMConstInt(g->t_i32, 16, 0), "");
        return LLVMBuildBitCast(g->b, w, g->t_f32, "");
    }
    default:
        return v;
    }
}

/* Element of operand o (0: X, 1: Y) at p as f32: load_f32, or with a producer fused into
 * the operand the raw element through the producer's instructions. */
static LLVMValueRef opnd_f32(em_t *E, int which, LLVMValueRef p)
{
    ic__cg *g = E->g;
    const ic__gemm_opnd *o = which ? &E->m->y : &E->m->x;
    if (!o->xform)
        return load_f32(g, o->dt, p);
    LLVMValueRef v = LLVMBuildLoad2(g->b, ic__gen_mem_type(g, o->dt), p, "");
    LLVMSetAlignment(v, (unsigned)ic_dtype_size(o->dt));
    g->vals[o->ld] = v;
    ic__gen_stage_subset(g, 0, E->chain[which]);
    return g->vals[o->val];
}

static void store_f32(ic__cg *g, LLVMValueRef v, LLVMValueRef base, LLVMValueRef idx)
{
    LLVMValueRef s = LLVMBuildStore(g->b, v, gep(g, g->t_f32, base, idx));
    LLVMSetAlignment(s, 4);
}

/* ---- the micro-kernel ---- */

/* C[rows x nvec vectors] (+)= A[rows x kc] * B[kc x nvec vectors]: A element (i, k) at
 * A[i * ars + k * aks], B row k at B[k * nr], C row i at C[i * ldt]. `first` (only read when
 * K takes several passes): start from zero instead of C. */
static LLVMValueRef emit_micro(em_t *E, int rows, int nvec)
{
    ic__cg *g = E->g;
    ic__gemm *m = E->m;
    char suffix[64];
    snprintf(suffix, sizeof suffix, ".gemm.micro.%dx%d", rows, nvec);
    LLVMValueRef fn = new_fn(g, suffix, E->micro_ty, true);
    for (unsigned i = 0; i < 4; i++)
        if (i != 2)
            ic__gen_noalias(g, fn, i);
    LLVMValueRef A = LLVMGetParam(fn, 0), B = LLVMGetParam(fn, 1), kc = LLVMGetParam(fn, 2);
    LLVMValueRef C = LLVMGetParam(fn, 3), first = LLVMGetParam(fn, 4);
    int64_t ars = m->pack_a ? 1 : m->x.s_i, aks = m->pack_a ? m->p.mr : m->x.s_k;
    int vl = m->vl, n = rows * nvec;
    LLVMValueRef init[16 * 8], acc[16 * 8], next[16 * 8];
    LLVMValueRef zero = LLVMConstNull(E->vty);
    for (int i = 0; i < rows; i++)
        for (int v = 0; v < nvec; v++) {
            LLVMValueRef x = zero;
            if (m->npc > 1) {
                LLVMValueRef p = gep(g, g->t_f32, C, I(g, i * m->ldt + v * vl));
                LLVMValueRef ld = LLVMBuildLoad2(g->b, E->vty, p, "");
                LLVMSetAlignment(ld, E->valign);
                x = LLVMBuildSelect(g->b, first, zero, ld, "");
            }
            init[i * nvec + v] = x;
        }
    LLVMValueRef kend = m->bf16_dot ? LLVMBuildAShr(g->b, kc, I(g, 1), "pairs") : kc;
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(g->b), head = blk(g, "k"), body = blk(g, "k.body"),
                      exit = blk(g, "k.exit");
    LLVMBuildBr(g->b, head);
    LLVMPositionBuilderAtEnd(g->b, head);
    LLVMValueRef k = LLVMBuildPhi(g->b, g->t_i64, "k");
    LLVMValueRef i0 = I(g, 0);
    LLVMAddIncoming(k, &i0, &pre, 1);
    for (int i = 0; i < n; i++) {
        acc[i] = LLVMBuildPhi(g->b, E->vty, "acc");
        LLVMAddIncoming(acc[i], &init[i], &pre, 1);
    }
    LLVMBuildCondBr(g->b, icmp(g, LLVMIntSLT, k, kend), body, exit);
    LLVMPositionBuilderAtEnd(g->b, body);
    LLVMValueRef bv[8];
    LLVMTypeRef mask_ty = LLVMVectorType(g->t_i32, (unsigned)vl);
    if (m->bf16_dot) {
        /* k counts pairs here: B row of pairs at B[k * 2 nr] (bf16), A pairs at A[(k mr + i) 2];
         * acc += A(i, 2k) B(2k, j) + A(i, 2k+1) B(2k+1, j) in one vdpbf16ps */
        LLVMTypeRef bft = LLVMBFloatTypeInContext(g->ctx), pty = LLVMVectorType(bft, (unsigned)(2 * vl));
        LLVMValueRef brow = gep(g, g->t_i16, B, muli(g, k, 2 * m->p.nr));
        for (int v = 0; v < nvec; v++) {
            bv[v] = LLVMBuildLoad2(g->b, pty, gep(g, g->t_i16, brow, I(g, 2 * v * vl)), "b");
            LLVMSetAlignment(bv[v], E->valign);
        }
        LLVMValueRef acol = gep(g, g->t_i32, A, muli(g, k, m->p.mr));
        LLVMTypeRef ity = LLVMVectorType(g->t_i32, (unsigned)vl);
        for (int i = 0; i < rows; i++) {
            LLVMValueRef a = LLVMBuildLoad2(g->b, g->t_i32, gep(g, g->t_i32, acol, I(g, i)), "a");
            LLVMSetAlignment(a, 4);
            LLVMValueRef ins = LLVMBuildInsertElement(g->b, LLVMGetPoison(ity), a, LLVMConstInt(g->t_i32, 0, 0), "");
            LLVMValueRef splat = LLVMBuildShuffleVector(g->b, ins, LLVMGetPoison(ity), LLVMConstNull(mask_ty), "");
            splat = LLVMBuildBitCast(g->b, splat, pty, "");
            for (int v = 0; v < nvec; v++) {
                LLVMValueRef args[3] = { acc[i * nvec + v], splat, bv[v] };
                next[i * nvec + v] = ic__gen_intrinsic(g, "llvm.x86.avx512bf16.dpbf16ps.512", NULL, 0, args, 3);
            }
        }
    } else {
    LLVMValueRef brow = gep(g, g->t_f32, B, muli(g, k, m->p.nr));
    for (int v = 0; v < nvec; v++) {
        bv[v] = LLVMBuildLoad2(g->b, E->vty, gep(g, g->t_f32, brow, I(g, v * vl)), "b");
        LLVMSetAlignment(bv[v], E->valign);
    }
    LLVMValueRef acol = gep(g, g->t_f32, A, muli(g, k, aks));
    for (int i = 0; i < rows; i++) {
        LLVMValueRef a = LLVMBuildLoad2(g->b, g->t_f32, gep(g, g->t_f32, acol, I(g, i * ars)), "a");
        LLVMSetAlignment(a, 4);
        LLVMValueRef ins = LLVMBuildInsertElement(g->b, LLVMGetPoison(E->vty), a, LLVMConstInt(g->t_i32, 0, 0), "");
        LLVMValueRef splat = LLVMBuildShuffleVector(g->b, ins, LLVMGetPoison(E->vty), LLVMConstNull(mask_ty), "");
        for (int v = 0; v < nvec; v++) {
            LLVMValueRef args[3] = { splat, bv[v], acc[i * nvec + v] };
            next[i * nvec + v] = ic__gen_intrinsic(g, "llvm.fma", &E->vty, 1, args, 3);
        }
    }
    }
    LLVMValueRef k1 = add(g, k, I(g, 1));
    LLVMBasicBlockRef latch = LLVMGetInsertBlock(g->b);
    LLVMValueRef br = LLVMBuildBr(g->b, head);
    LLVMSetMetadata(br, g->md_loop, md_scalar_loop(g, m->p.unroll));
    LLVMAddIncoming(k, &k1, &latch, 1);
    for (int i = 0; i < n; i++)
        LLVMAddIncoming(acc[i], &next[i], &latch, 1);
    LLVMPositionBuilderAtEnd(g->b, exit);
    for (int i = 0; i < rows; i++)
        for (int v = 0; v < nvec; v++) {
            LLVMValueRef p = gep(g, g->t_f32, C, I(g, i * m->ldt + v * vl));
            LLVMValueRef s = LLVMBuildStore(g->b, acc[i * nvec + v], p);
            LLVMSetAlignment(s, E->valign);
        }
    LLVMBuildRetVoid(g->b);
    return fn;
}

/* ---- packing ---- */

/* <vl x f32> from vl consecutive elements of dtype dt at p (unaligned). */
static LLVMValueRef load_vec_f32(em_t *E, ic_dtype dt, LLVMValueRef p)
{
    ic__cg *g = E->g;
    unsigned vl = (unsigned)E->m->vl;
    LLVMValueRef v = LLVMBuildLoad2(g->b, LLVMVectorType(ic__gen_mem_type(g, dt), vl), p, "");
    LLVMSetAlignment(v, (unsigned)ic_dtype_size(dt));
    switch (dt) {
    case IC_F16:
        return LLVMBuildFPExt(g->b, v, E->vty, "");
    case IC_BF16: {
        LLVMTypeRef wt = LLVMVectorType(g->t_i32, vl);
        LLVMValueRef w = LLVMBuildZExt(g->b, v, wt, "");
        LLVMValueRef c16[64];
        for (unsigned i = 0; i < vl; i++)
            c16[i] = LLVMConstInt(g->t_i32, 16, 0);
        w = LLVMBuildShl(g->b, w, LLVMConstVector(c16, vl), "");
        return LLVMBuildBitCast(g->b, w, E->vty, "");
    }
    default:
        return v;
    }
}

/* Transposes the vl x vl block v[0..vl-1] in place (v[c][r] = old v[r][c]) by swapping
 * off-diagonal blocks of halving size: log2(vl) rounds of two-input shuffles. vl must be a
 * power of two; rows that are NULL are treated as poison. */
static void transpose_block(em_t *E, LLVMValueRef *v)
{
    ic__cg *g = E->g;
    int vl = E->m->vl;
    LLVMValueRef lo[64], hi[64];
    for (int r = 0; r < vl; r++)
        if (!v[r])
            v[r] = LLVMGetPoison(E->vty);
    for (int h = vl / 2; h >= 1; h /= 2) {
        for (int j = 0; j < vl; j++) {
            lo[j] = LLVMConstInt(g->t_i32, (unsigned)((j & h) ? vl + j - h : j), 0);
            hi[j] = LLVMConstInt(g->t_i32, (unsigned)((j & h) ? vl + j : j + h), 0);
        }
        LLVMValueRef mlo = LLVMConstVector(lo, (unsigned)vl), mhi = LLVMConstVector(hi, (unsigned)vl);
        for (int r = 0; r < vl; r++)
            if (!(r & h)) {
                LLVMValueRef a = v[r], b = v[r + h];
                v[r] = LLVMBuildShuffleVector(g->b, a, b, mlo, "");
                v[r + h] = LLVMBuildShuffleVector(g->b, a, b, mhi, "");
            }
    }
}

/* Stores the first n lanes of vector v at p (f32, unaligned). */
static void store_lanes(em_t *E, LLVMValueRef v, int n, LLVMValueRef p)
{
    ic__cg *g = E->g;
    if (n < E->m->vl) {
        LLVMValueRef idx[64];
        for (int i = 0; i < n; i++)
            idx[i] = LLVMConstInt(g->t_i32, (unsigned)i, 0);
        v = LLVMBuildShuffleVector(g->b, v, LLVMGetPoison(E->vty), LLVMConstVector(idx, (unsigned)n), "");
    }
    LLVMValueRef st = LLVMBuildStore(g->b, v, p);
    LLVMSetAlignment(st, 4);
}

/* A packing function: packA(src, i0, n, k0, kc, dst) or packB(src, i0, n, dst) packs rows
 * (columns) i0.. i0+n-1 into panels of w; the loop over the panels gives each its first row
 * r0, its valid rows rv (fewer than w only in the last one), where it goes (d: w x depth
 * elements) and the source offset of its first element (base). */
typedef struct {
    LLVMValueRef fn, src, i0, n, k0, kc, dst; /* packB has no k0, kc: all of K */
    const ic__gemm_opnd *o;                   /* X (packA) or Y (packB) */
    int64_t w;                                /* mr (packA) or nr (packB) */
    LLVMValueRef depth;                       /* of a panel: kc or K, bf16 pairs: rounded up to even */
    lp_t L;
    LLVMValueRef p, r0, rv, d, base;
} pack_t;

/* Starts function packA (a) or packB; the source and destination do not alias. */
static void pack_begin(em_t *E, pack_t *P, bool a)
{
    ic__cg *g = E->g;
    unsigned dst = a ? 5 : 3;
    P->fn = new_fn(g, a ? ".gemm.packA" : ".gemm.packB", a ? E->packa_ty : E->packb_ty, true);
    ic__gen_noalias(g, P->fn, 0);
    ic__gen_noalias(g, P->fn, dst);
    P->src = LLVMGetParam(P->fn, 0);
    P->i0 = LLVMGetParam(P->fn, 1);
    P->n = LLVMGetParam(P->fn, 2);
    P->k0 = a ? LLVMGetParam(P->fn, 3) : NULL;
    P->kc = a ? LLVMGetParam(P->fn, 4) : NULL;
    P->dst = LLVMGetParam(P->fn, dst);
    P->o = a ? &E->m->x : &E->m->y;
    P->w = a ? E->m->p.mr : E->m->p.nr;
}

/* Opens the loop over the panels (elements of et), its variable named name. */
static void panels_open(ic__cg *g, pack_t *P, const char *name, LLVMTypeRef et)
{
    int64_t w = P->w;
    LLVMValueRef np = sdiv(g, add(g, P->n, I(g, w - 1)), I(g, w));
    P->p = lp_open(g, &P->L, I(g, 0), np, 1, name);
    P->r0 = add(g, P->i0, muli(g, P->p, w));
    P->rv = smin(g, I(g, w), sub(g, add(g, P->i0, P->n), P->r0));
    LLVMValueRef off = LLVMIsAConstantInt(P->depth) /* (K) one multiply */
                           ? muli(g, P->p, LLVMConstIntGetSExtValue(P->depth) * w)
                           : mul(g, muli(g, P->p, w), P->depth);
    P->d = gep(g, et, P->dst, off);
    if (P->k0)
        P->base = add(g, muli(g, P->r0, P->o->s_i), muli(g, P->k0, P->o->s_k));
    else
        P->base = muli(g, P->r0, P->o->s_i);
}

/* bf16 pairs: element (k, i) of a panel at d[(k / 2) * 2 * w + i * 2 + k % 2] (i16 bits). */
static void store_pair(ic__cg *g, LLVMValueRef d, LLVMValueRef k, LLVMValueRef i, int64_t w, LLVMValueRef v)
{
    LLVMValueRef pk = LLVMBuildAShr(g->b, k, I(g, 1), ""), lo = LLVMBuildAnd(g->b, k, I(g, 1), "");
    LLVMValueRef idx = add(g, add(g, muli(g, pk, 2 * w), muli(g, i, 2)), lo);
    LLVMValueRef st = LLVMBuildStore(g->b, v, gep(g, g->t_i16, d, idx));
    LLVMSetAlignment(st, 2);
}

/* Zeroes rows (columns) lo.. w-1 of panel d, kn deep: those past the matrix edge, so that
 * the micro-kernel can run whole panels. pairs: bf16 pairs (store_pair), else f32 at
 * d[k * w + i]. */
static void pad_panel(ic__cg *g, LLVMValueRef d, LLVMValueRef lo, int64_t w, LLVMValueRef kn, bool pairs)
{
    lp_t L1, L2;
    LLVMValueRef i = lp_open(g, &L1, lo, I(g, w), 1, "z");
    LLVMValueRef k = lp_open(g, &L2, I(g, 0), kn, 1, "zk");
    if (pairs)
        store_pair(g, d, k, i, w, LLVMConstInt(g->t_i16, 0, 0));
    else
        store_f32(g, LLVMConstReal(g->t_f32, 0), d, add(g, muli(g, k, w), i));
    lp_close(g, &L2, NULL);
    lp_close(g, &L1, NULL);
}

/* Whether operand o can be packed with vector loads along k and block transposes: unit
 * stride along k, and vl a power of two. */
static bool transposable(const em_t *E, const ic__gemm_opnd *o)
{
    int vl = E->m->vl;
    return o->s_k == 1 && vl >= 2 && (vl & (vl - 1)) == 0 && vl <= 64 && !o->xform;
}

/* Full panel of rows r0.. r0+mr-1 with unit stride along k: k in [0, kvec) in steps of vl by
 * loading vl k's of each row and transposing, d[k * mr + i]. */
static void packa_vector(em_t *E, LLVMValueRef src, LLVMValueRef base, LLVMValueRef kvec, LLVMValueRef d)
{
    ic__cg *g = E->g;
    ic__gemm *m = E->m;
    int vl = m->vl, mr = m->p.mr;
    LLVMTypeRef et = ic__gen_mem_type(g, m->x.dt);
    lp_t L;
    LLVMValueRef k = lp_open(g, &L, I(g, 0), kvec, vl, "kv");
    for (int g0 = 0; g0 < mr; g0 += vl) {
        LLVMValueRef v[64] = { 0 };
        int n = mr - g0 < vl ? mr - g0 : vl;
        for (int i = 0; i < n; i++)
            v[i] = load_vec_f32(E, m->x.dt, gep(g, et, src, add(g, base, add(g, I(g, (int64_t)(g0 + i) * m->x.s_i), k))));
        transpose_block(E, v);
        for (int kk = 0; kk < vl; kk++)
            store_lanes(E, v[kk], n, gep(g, g->t_f32, d, add(g, muli(g, add(g, k, I(g, kk)), mr), I(g, g0))));
    }
    lp_close(g, &L, md_scalar_loop(g, 1));
}

/* packA(src, i0, mi, k0, kc, dst): rows i0.. i0+mi-1, depth k0.. k0+kc-1 of X into panels of
 * mr rows: panel p, depth k, row r at dst[p * mr * kc + k * mr + r]; rows past mi are zero. */
static void packa_f32(em_t *E, pack_t *P)
{
    ic__cg *g = E->g;
    ic__gemm *m = E->m;
    const ic__gemm_opnd *x = P->o;
    LLVMValueRef src = P->src, kc = P->kc, rv = P->rv, d = P->d, base = P->base;
    LLVMTypeRef et = ic__gen_mem_type(g, x->dt);
    int64_t mr = P->w;
    bool along_k = (x->s_k < 0 ? -x->s_k : x->s_k) <= (x->s_i < 0 ? -x->s_i : x->s_i);
    lp_t L1, L2;
    LLVMValueRef kstart = I(g, 0);
    if (transposable(E, x)) { /* full panels: vl k's at a time, then the rest one by one */
        LLVMValueRef full = icmp(g, LLVMIntEQ, rv, I(g, mr));
        LLVMValueRef kvec = LLVMBuildSelect(g->b, full, LLVMBuildAnd(g->b, kc, I(g, ~(int64_t)(m->vl - 1)), ""),
                                            I(g, 0), "kvec");
        LLVMBasicBlockRef join = if_open(g, full, "vec");
        packa_vector(E, src, base, kvec, d);
        if_close(g, join);
        kstart = kvec;
    }
    if (along_k) {
        LLVMValueRef i = lp_open(g, &L1, I(g, 0), rv, 1, "i");
        LLVMValueRef rb = add(g, base, muli(g, i, x->s_i));
        LLVMValueRef k = lp_open(g, &L2, kstart, kc, 1, "k");
        LLVMValueRef v = opnd_f32(E, 0, gep(g, et, src, add(g, rb, muli(g, k, x->s_k))));
        store_f32(g, v, d, add(g, muli(g, k, mr), i));
        lp_close(g, &L2, NULL);
        lp_close(g, &L1, NULL);
    } else {
        LLVMValueRef k = lp_open(g, &L1, kstart, kc, 1, "k");
        LLVMValueRef kb = add(g, base, muli(g, k, x->s_k));
        LLVMValueRef i = lp_open(g, &L2, I(g, 0), rv, 1, "i");
        LLVMValueRef v = opnd_f32(E, 0, gep(g, et, src, add(g, kb, muli(g, i, x->s_i))));
        store_f32(g, v, d, add(g, muli(g, k, mr), i));
        lp_close(g, &L2, NULL);
        lp_close(g, &L1, NULL);
    }
    if (m->M % mr) /* the padding rows of the last panel */
        pad_panel(g, d, rv, mr, kc, false);
}

/* packB(src, j0, nj, dst): columns j0.. j0+nj-1, all of K, of Y into panels of nr columns:
 * panel q, depth k, column c at dst[q * K * nr + k * nr + c]; columns past nj are zero. */
static void packb_f32(em_t *E, pack_t *P)
{
    ic__cg *g = E->g;
    ic__gemm *m = E->m;
    const ic__gemm_opnd *y = P->o;
    LLVMValueRef src = P->src, cv = P->rv, d = P->d, base = P->base;
    LLVMTypeRef et = ic__gen_mem_type(g, y->dt);
    int64_t nr = P->w, K = m->K;
    bool along_j = (y->s_i < 0 ? -y->s_i : y->s_i) <= (y->s_k < 0 ? -y->s_k : y->s_k);
    lp_t L1, L2;
    if (along_j) {
        LLVMValueRef k = lp_open(g, &L1, I(g, 0), I(g, K), 1, "k");
        LLVMValueRef kb = add(g, base, muli(g, k, y->s_k));
        LLVMValueRef drow = gep(g, g->t_f32, d, muli(g, k, nr));
        LLVMValueRef j = lp_open(g, &L2, I(g, 0), cv, 1, "j");
        store_f32(g, opnd_f32(E, 1, gep(g, et, src, add(g, kb, muli(g, j, y->s_i)))), drow, j);
        lp_close(g, &L2, NULL);
        if (m->N % nr) {
            j = lp_open(g, &L2, cv, I(g, nr), 1, "z");
            store_f32(g, LLVMConstReal(g->t_f32, 0), drow, j);
            lp_close(g, &L2, NULL);
        }
        lp_close(g, &L1, NULL);
    } else {
        LLVMValueRef kstart = I(g, 0);
        if (transposable(E, y)) { /* full panels: vl x vl blocks (k, j) transposed */
            LLVMValueRef full = icmp(g, LLVMIntEQ, cv, I(g, nr));
            int64_t kv = K / m->vl * m->vl;
            kstart = LLVMBuildSelect(g->b, full, I(g, kv), I(g, 0), "kvec");
            LLVMBasicBlockRef join = if_open(g, full, "vec");
            lp_t L;
            LLVMValueRef k = lp_open(g, &L, I(g, 0), I(g, kv), m->vl, "kv");
            /* a loop over the panel's nv blocks, not nv copies of the transpose: a third of
             * the IR (and of the compile time) of this function for the same speed */
            lp_t Lj;
            LLVMValueRef jb = lp_open(g, &Lj, I(g, 0), I(g, m->nv), 1, "jb");
            LLVMValueRef col = muli(g, jb, m->vl);
            LLVMValueRef v[64] = { 0 };
            for (int jj = 0; jj < m->vl; jj++) {
                LLVMValueRef off = add(g, add(g, base, muli(g, add(g, col, I(g, jj)), y->s_i)), k);
                v[jj] = load_vec_f32(E, y->dt, gep(g, et, src, off));
            }
            transpose_block(E, v);
            for (int kk = 0; kk < m->vl; kk++) {
                LLVMValueRef p = gep(g, g->t_f32, d, add(g, muli(g, add(g, k, I(g, kk)), nr), col));
                LLVMValueRef st = LLVMBuildStore(g->b, v[kk], p);
                LLVMSetAlignment(st, E->valign);
            }
            lp_close(g, &Lj, md_scalar_loop(g, 1));
            lp_close(g, &L, md_scalar_loop(g, 1));
            if_close(g, join);
        }
        LLVMValueRef j = lp_open(g, &L1, I(g, 0), cv, 1, "j");
        LLVMValueRef jb = add(g, base, muli(g, j, y->s_i));
        LLVMValueRef k = lp_open(g, &L2, kstart, I(g, K), 1, "k");
        store_f32(g, opnd_f32(E, 1, gep(g, et, src, add(g, jb, muli(g, k, y->s_k)))), d,
                  add(g, muli(g, k, nr), j));
        lp_close(g, &L2, NULL);
        lp_close(g, &L1, NULL);
        if (m->N % nr)
            pad_panel(g, d, cv, nr, I(g, K), false);
    }
}

/* packA for vdpbf16ps: bf16 X into panels of mr rows by pairs along k, kc rounded up to even
 * (P->depth); rows past mi and the pad k are zero. */
static void packa_bf16(em_t *E, pack_t *P)
{
    ic__cg *g = E->g;
    const ic__gemm_opnd *x = P->o;
    LLVMValueRef kc = P->kc, kcp = P->depth, d = P->d;
    int64_t mr = P->w;
    lp_t L1, L2;
    LLVMValueRef i = lp_open(g, &L1, I(g, 0), P->rv, 1, "i");
    LLVMValueRef rb = add(g, P->base, muli(g, i, x->s_i));
    LLVMValueRef k = lp_open(g, &L2, I(g, 0), kc, 1, "k");
    LLVMValueRef v = LLVMBuildLoad2(g->b, g->t_i16, gep(g, g->t_i16, P->src, add(g, rb, muli(g, k, x->s_k))), "");
    LLVMSetAlignment(v, 2);
    store_pair(g, d, k, i, mr, v);
    lp_close(g, &L2, NULL);
    k = lp_open(g, &L2, kc, kcp, 1, "zk"); /* odd depth: the pad k */
    store_pair(g, d, k, i, mr, LLVMConstInt(g->t_i16, 0, 0));
    lp_close(g, &L2, NULL);
    lp_close(g, &L1, NULL);
    pad_panel(g, d, P->rv, mr, kcp, true);
}

/* packB for vdpbf16ps: bf16 Y into panels of nr columns by pairs along k (kp deep). */
static void packb_bf16(em_t *E, pack_t *P)
{
    ic__cg *g = E->g;
    ic__gemm *m = E->m;
    const ic__gemm_opnd *y = P->o;
    LLVMValueRef cv = P->rv, d = P->d;
    int64_t nr = P->w, K = m->K, Kp = m->kp;
    LLVMValueRef z = LLVMConstInt(g->t_i16, 0, 0);
    bool along_j = (y->s_i < 0 ? -y->s_i : y->s_i) <= (y->s_k < 0 ? -y->s_k : y->s_k);
    lp_t L1, L2;
    LLVMValueRef a, b;
    if (along_j) {
        a = lp_open(g, &L1, I(g, 0), I(g, K), 1, "k");
        b = lp_open(g, &L2, I(g, 0), cv, 1, "j");
    } else {
        a = lp_open(g, &L1, I(g, 0), cv, 1, "j");
        b = lp_open(g, &L2, I(g, 0), I(g, K), 1, "k");
    }
    LLVMValueRef k = along_j ? a : b, j = along_j ? b : a;
    LLVMValueRef off = add(g, add(g, P->base, muli(g, k, y->s_k)), muli(g, j, y->s_i));
    LLVMValueRef v = LLVMBuildLoad2(g->b, g->t_i16, gep(g, g->t_i16, P->src, off), "");
    LLVMSetAlignment(v, 2);
    store_pair(g, d, k, j, nr, v);
    lp_close(g, &L2, NULL);
    lp_close(g, &L1, NULL);
    if (Kp > K) { /* odd K: the pad k of every column */
        j = lp_open(g, &L1, I(g, 0), I(g, nr), 1, "zj");
        store_pair(g, d, I(g, K), j, nr, z);
        lp_close(g, &L1, NULL);
    }
    if (m->N % nr) {
        k = lp_open(g, &L1, I(g, 0), I(g, K), 1, "zk");
        j = lp_open(g, &L2, cv, I(g, nr), 1, "zj");
        store_pair(g, d, k, j, nr, z);
        lp_close(g, &L2, NULL);
        lp_close(g, &L1, NULL);
    }
}

/* packA (a) or packB: the loop over the panels, each filled by the variant for the packed
 * format: f32, or bf16 pairs for vdpbf16ps (a panel's depth rounded up to even). */
static LLVMValueRef emit_pack(em_t *E, bool a)
{
    ic__cg *g = E->g;
    ic__gemm *m = E->m;
    bool pairs = m->bf16_dot;
    pack_t P;
    pack_begin(E, &P, a);
    if (a)
        P.depth = pairs ? LLVMBuildAnd(g->b, add(g, P.kc, I(g, 1)), I(g, ~(int64_t)1), "kcp") : P.kc;
    else
        P.depth = I(g, pairs ? m->kp : m->K);
    panels_open(g, &P, a ? "p" : "q", pairs ? g->t_i16 : g->t_f32);
    if (a)
        (pairs ? packa_bf16 : packa_f32)(E, &P);
    else
        (pairs ? packb_bf16 : packb_f32)(E, &P);
    lp_close(g, &P.L, NULL);
    LLVMBuildRetVoid(g->b);
    return P.fn;
}

/* ---- the epilogue ---- */

/* llvm.loop metadata of the epilogue's column loop: vectorised at the kernel's width, neither
 * interleaved nor unrolled. A tile row is at most nr (a few vectors) long, so copies of the
 * vector body buy nothing, and with activations such as GELU each copy is ~100 instructions
 * of IR to optimise and compile. */
static LLVMValueRef md_epilogue(ic__cg *g)
{
    LLVMMetadataRef ops[5];
    int n = 0, w = g->p->vector_width;
    LLVMMetadataRef self = LLVMTemporaryMDNode(g->ctx, NULL, 0);
    ops[n++] = self;
    ops[n++] = md_pair(g, "llvm.loop.vectorize.enable", LLVMConstInt(g->t_i1, w != 1, 0));
    if (w > 1)
        ops[n++] = md_pair(g, "llvm.loop.vectorize.width", LLVMConstInt(g->t_i32, (unsigned)w, 0));
    ops[n++] = md_pair(g, "llvm.loop.interleave.count", LLVMConstInt(g->t_i32, 1, 0));
    ops[n++] = md_pair(g, "llvm.loop.unroll.disable", NULL);
    LLVMMetadataRef node = LLVMMDNodeInContext2(g->ctx, ops, (size_t)n);
    LLVMMetadataReplaceAllUsesWith(self, node);
    return LLVMMetadataAsValue(g->ctx, node);
}

/* The kernel's later stages over the valid rows x cols of an accumulator tile whose (0, 0)
 * is C[r0, c0]: the REDUCE's ACC reads the tile. The column loop is vectorised by LLVM. */
static ic_status emit_epilogue(em_t *E, LLVMValueRef tile, LLVMValueRef r0, LLVMValueRef rows,
                               LLVMValueRef c0, LLVMValueRef cols)
{
    ic__cg *g = E->g;
    ic__gemm *m = E->m;
    lp_t Li, Lj;
    LLVMValueRef i = lp_open(g, &Li, I(g, 0), rows, 1, "ei");
    if (m->rowvar >= 0)
        g->vars[m->rowvar] = add(g, r0, i);
    LLVMValueRef trow = gep(g, g->t_f32, tile, muli(g, i, m->ldt));
    LLVMValueRef j = lp_open(g, &Lj, I(g, 0), cols, 1, "ej");
    if (m->colvar >= 0)
        g->vars[m->colvar] = add(g, c0, j);
    g->acc[0][m->red] = gep(g, g->t_f32, trow, j);
    ic_status s = IC_OK;
    for (int st = 1; st < g->k->nstages && !s; st++)
        s = ic__gen_stage(g, st);
    lp_close(g, &Lj, md_epilogue(g));
    lp_close(g, &Li, NULL);
    return s;
}

/* ---- the work of one thread ---- */

static void call_micro(em_t *E, LLVMValueRef rows, LLVMValueRef cols, LLVMValueRef *args)
{
    ic__cg *g = E->g;
    ic__gemm *m = E->m;
    bool redge = E->mre > 0, cedge = E->nve > 0 && E->nve < m->nv;
    LLVMValueRef rfull = redge ? icmp(g, LLVMIntEQ, rows, I(g, m->p.mr)) : NULL;
    LLVMValueRef cfull = cedge ? icmp(g, LLVMIntSGT, cols, I(g, (int64_t)E->nve * m->vl)) : NULL;
    for (int r = 0; r < (redge ? 2 : 1); r++) {
        LLVMBasicBlockRef rjoin = NULL;
        if (redge)
            rjoin = if_open(g, r == 0 ? rfull : LLVMBuildNot(g->b, rfull, ""), "rows");
        for (int c = 0; c < (cedge ? 2 : 1); c++) {
            LLVMBasicBlockRef cjoin = NULL;
            if (cedge)
                cjoin = if_open(g, c == 0 ? cfull : LLVMBuildNot(g->b, cfull, ""), "cols");
            LLVMBuildCall2(g->b, E->micro_ty, E->micro[r][c], args, 5, "");
            if (cedge)
                if_close(g, cjoin);
        }
        if (redge)
            if_close(g, rjoin);
    }
}

/* Values of the work function that its blocks share. */
typedef struct {
    LLVMValueRef Ap, Bp, Ct;    /* this thread's A panels, B block, accumulator tiles */
    LLVMValueRef xsrc, ysrc;    /* X and Y of the current batch (ysrc NULL when prepacked) */
    LLVMTypeRef pe;             /* packed element: f32, or i16 (bf16 pairs) */
} wk_t;

/* Batch b: the batch loop vars (for the epilogue) and the operands' bases. */
static void batch_setup(em_t *E, wk_t *W, LLVMValueRef b)
{
    ic__cg *g = E->g;
    ic__gemm *m = E->m;
    LLVMValueRef xoff = I(g, m->x.c0), yoff = I(g, m->y.c0), rest = b;
    for (int d = m->nb - 1; d >= 0; d--) {
        LLVMValueRef idx = LLVMBuildURem(g->b, rest, I(g, m->bdim[d]), "");
        rest = LLVMBuildUDiv(g->b, rest, I(g, m->bdim[d]), "");
        g->vars[m->bvar[d]] = idx;
        xoff = add(g, xoff, muli(g, idx, m->x.sb[d]));
        yoff = add(g, yoff, muli(g, idx, m->y.sb[d]));
    }
    W->xsrc = LLVMBuildGEP2(g->b, ic__gen_mem_type(g, m->x.dt), g->bufptr[m->x.buf], &xoff, 1, "x");
    W->ysrc = E->panels ? NULL
              : LLVMBuildGEP2(g->b, ic__gen_mem_type(g, m->y.dt), g->bufptr[m->y.buf], &yoff, 1, "y");
}

/* X whose offset is an expression (m->x.expr): rows ic.. ic+mcur-1 (of the current batch),
 * depth pc.. pc+kcur-1 into mr-row panels in packA's layout, each element's offset computed
 * by the kernel's own index instructions with the loop variables bound. Inline in the work
 * function, where the batch variables are in scope; rows past mcur (M's edge) are zero. */
static ic_status emit_packa_expr(em_t *E, wk_t *W, LLVMValueRef ic, LLVMValueRef mcur, LLVMValueRef pc,
                                 LLVMValueRef kcur)
{
    ic__cg *g = E->g;
    ic__gemm *m = E->m;
    int64_t mr = m->p.mr;
    int kvar = g->k->ninner ? g->k->nouter : -1;
    LLVMTypeRef et = ic__gen_mem_type(g, m->x.dt);
    lp_t P, Li, Lk;
    LLVMValueRef np = sdiv(g, add(g, mcur, I(g, mr - 1)), I(g, mr));
    LLVMValueRef p = lp_open(g, &P, I(g, 0), np, 1, "xp");
    LLVMValueRef d = gep(g, g->t_f32, W->Ap, mul(g, muli(g, p, mr), kcur));
    LLVMValueRef i = lp_open(g, &Li, I(g, 0), I(g, mr), 1, "xi");
    LLVMValueRef r = add(g, muli(g, p, mr), i);
    LLVMValueRef valid = icmp(g, LLVMIntSLT, r, mcur);
    LLVMBasicBlockRef join = if_open(g, valid, "xrow");
    if (m->rowvar >= 0)
        g->vars[m->rowvar] = add(g, ic, r);
    LLVMValueRef k = lp_open(g, &Lk, I(g, 0), kcur, 1, "xk");
    if (kvar >= 0)
        g->vars[kvar] = add(g, pc, k);
    ic_status s = ic__gen_stage_subset(g, 0, E->xneed);
    LLVMValueRef off = g->vals[m->x.expr];
    store_f32(g, opnd_f32(E, 0, gep(g, et, g->bufptr[m->x.buf], off)), d, add(g, muli(g, k, mr), i));
    lp_close(g, &Lk, md_scalar_loop(g, 1));
    if_close(g, join);
    if (m->M % mr) {
        join = if_open(g, LLVMBuildNot(g->b, valid, ""), "xzero");
        k = lp_open(g, &Lk, I(g, 0), kcur, 1, "xz");
        store_f32(g, LLVMConstReal(g->t_f32, 0), d, add(g, muli(g, k, mr), i));
        lp_close(g, &Lk, NULL);
        if_close(g, join);
    }
    lp_close(g, &Li, NULL);
    lp_close(g, &P, NULL);
    return s;
}

/* Rows [mlo, mhi) x columns [jc, jc + ncur) of the current batch with the packed B block
 * bblk: for ic: for pc: pack A; for jr: for ir: micro-kernel, then the epilogue. */
static ic_status emit_block_body(em_t *E, wk_t *W, LLVMValueRef mlo, LLVMValueRef mhi, LLVMValueRef jc,
                                 LLVMValueRef ncur, LLVMValueRef bblk)
{
    ic__cg *g = E->g;
    ic__gemm *m = E->m;
    int64_t mr = m->p.mr, nr = m->p.nr, mc = m->p.mc, K = m->K, kc = m->kc;
    lp_t Lic, Lpc, Ljr, Lir;
    LLVMValueRef ic = lp_open(g, &Lic, mlo, mhi, mc, "ic");
    LLVMValueRef mcur = smin(g, I(g, mc), sub(g, mhi, ic));
    LLVMValueRef pc = m->npc > 1 ? lp_open(g, &Lpc, I(g, 0), I(g, K), kc, "pc") : I(g, 0);
    LLVMValueRef kcur = m->npc > 1 ? smin(g, I(g, kc), sub(g, I(g, K), pc)) : I(g, K);
    /* depth of the packed A panel and of the micro-kernel's loop: pairs are whole */
    LLVMValueRef kcp = m->bf16_dot ? LLVMBuildAnd(g->b, add(g, kcur, I(g, 1)), I(g, ~(int64_t)1), "") : kcur;
    ic_status s = IC_OK;
    if (m->x.expr >= 0) {
        s = emit_packa_expr(E, W, ic, mcur, pc, kcur);
    } else if (m->pack_a) {
        LLVMValueRef pa[6] = { W->xsrc, ic, mcur, pc, kcur, W->Ap };
        LLVMBuildCall2(g->b, E->packa_ty, E->packa, pa, 6, "");
    }
    LLVMValueRef first = icmp(g, LLVMIntEQ, pc, I(g, 0));
    LLVMValueRef lastp = icmp(g, LLVMIntEQ, add(g, pc, kcur), I(g, K));
    LLVMValueRef jr = lp_open(g, &Ljr, I(g, 0), ncur, nr, "jr");
    LLVMValueRef cols = smin(g, I(g, nr), sub(g, ncur, jr));
    LLVMValueRef bptr = gep(g, W->pe, bblk, add(g, muli(g, sdiv(g, jr, I(g, nr)), m->kp * nr), muli(g, pc, nr)));
    LLVMValueRef ir = lp_open(g, &Lir, I(g, 0), mcur, mr, "ir");
    LLVMValueRef rows = smin(g, I(g, mr), sub(g, mcur, ir));
    LLVMValueRef aptr = m->pack_a ? gep(g, W->pe, W->Ap, mul(g, ir, kcp))
                        : gep(g, g->t_f32, W->xsrc, add(g, muli(g, add(g, ic, ir), m->x.s_i), muli(g, pc, m->x.s_k)));
    LLVMValueRef tile = m->npc > 1 ? gep(g, g->t_f32, W->Ct, add(g, muli(g, ir, m->ldt), jr)) : W->Ct;
    LLVMValueRef margs[5] = { aptr, bptr, kcp, tile, first };
    call_micro(E, rows, cols, margs);
    LLVMBasicBlockRef ejoin = m->npc > 1 ? if_open(g, lastp, "epi") : NULL;
    if (!s)
        s = emit_epilogue(E, tile, add(g, ic, ir), rows, add(g, jc, jr), cols);
    if (ejoin)
        if_close(g, ejoin);
    lp_close(g, &Lir, NULL);
    lp_close(g, &Ljr, NULL);
    if (m->npc > 1)
        lp_close(g, &Lpc, NULL);
    lp_close(g, &Lic, NULL);
    return s;
}

/* K.gemm.block(used bufs.., Ap, Ct, x, bblk, mlo, mhi, jc, ncur, b): emit_block_body as a
 * function of its own, which the team path and the private path of the work function both
 * call: one copy of the blocks' loops, packing and epilogue instead of two (the epilogue, an
 * activation such as GELU vectorised with its remainder loop, is most of a GEMM kernel's IR,
 * so this is about a quarter of its optimisation and code generation time). One call per
 * batch and column block costs nothing next to the block's work. */
static ic_status emit_block_fn(em_t *E)
{
    ic__cg *g = E->g;
    ic__gemm *m = E->m;
    LLVMTypeRef ps[IC__MAX_KBUFS + 9];
    int n = 0;
    for (int i = 0; i < g->nbufs; i++)
        if (g->used[i])
            ps[n++] = g->t_ptr;
    int nb = n;
    for (int i = 0; i < 4; i++)
        ps[n++] = g->t_ptr; /* Ap, Ct, x, bblk */
    for (int i = 0; i < 5; i++)
        ps[n++] = g->t_i64; /* mlo, mhi, jc, ncur, b */
    E->block_ty = LLVMFunctionType(g->t_void, ps, (unsigned)n, 0);
    LLVMValueRef fn = E->block = new_fn(g, ".gemm.block", E->block_ty, true);
    for (int i = 0, a = 0; i < g->nbufs; i++) {
        g->bufptr[i] = g->used[i] ? LLVMGetParam(fn, (unsigned)a) : NULL;
        if (g->used[i])
            ic__gen_noalias(g, fn, (unsigned)a++);
    }
    ic__gen_noalias(g, fn, (unsigned)nb);     /* Ap: this thread's panels */
    ic__gen_noalias(g, fn, (unsigned)nb + 1); /* Ct: this thread's tiles */
    wk_t W;
    memset(&W, 0, sizeof W);
    W.pe = m->bf16_dot ? g->t_i16 : g->t_f32;
    W.Ap = LLVMGetParam(fn, (unsigned)nb), W.Ct = LLVMGetParam(fn, (unsigned)nb + 1);
    W.xsrc = LLVMGetParam(fn, (unsigned)nb + 2);
    LLVMValueRef P[5];
    for (int i = 0; i < 5; i++)
        P[i] = LLVMGetParam(fn, (unsigned)(nb + 4 + i));
    LLVMValueRef rest = P[4]; /* the batch loop variables, for the epilogue and X's expression */
    for (int d = m->nb - 1; d >= 0; d--) {
        g->vars[m->bvar[d]] = LLVMBuildURem(g->b, rest, I(g, m->bdim[d]), "");
        rest = LLVMBuildUDiv(g->b, rest, I(g, m->bdim[d]), "");
    }
    ic_status s = emit_block_body(E, &W, P[0], P[1], P[2], P[3], LLVMGetParam(fn, (unsigned)nb + 3));
    LLVMBuildRetVoid(g->b);
    return s;
}

/* The work function's call of K.gemm.block for batch b. */
static void emit_block(em_t *E, wk_t *W, LLVMValueRef mlo, LLVMValueRef mhi, LLVMValueRef jc, LLVMValueRef ncur,
                       LLVMValueRef bblk, LLVMValueRef b)
{
    ic__cg *g = E->g;
    LLVMValueRef args[IC__MAX_KBUFS + 9];
    int n = 0;
    for (int i = 0; i < g->nbufs; i++)
        if (g->used[i])
            args[n++] = g->bufptr[i];
    LLVMValueRef rest[9] = { W->Ap, W->Ct, W->xsrc, bblk, mlo, mhi, jc, ncur, b };
    for (int i = 0; i < 9; i++)
        args[n++] = rest[i];
    LLVMBuildCall2(g->b, E->block_ty, E->block, args, (unsigned)n, "");
}

/* The rows of batch b inside the row panels [r0, r1): [*mlo, *mhi). */
static void batch_rows(em_t *E, LLVMValueRef b, LLVMValueRef r0, LLVMValueRef r1, LLVMValueRef *mlo,
                       LLVMValueRef *mhi)
{
    ic__cg *g = E->g;
    ic__gemm *m = E->m;
    LLVMValueRef bpm = muli(g, b, m->pm);
    LLVMValueRef plo = sub(g, smax(g, r0, bpm), bpm), phi = sub(g, smin(g, r1, add(g, bpm, I(g, m->pm))), bpm);
    *mlo = muli(g, plo, m->p.mr);
    *mhi = smin(g, muli(g, phi, m->p.mr), I(g, m->M));
}

static void barrier(em_t *E, LLVMValueRef gtid)
{
    ic__cg *g = E->g;
    LLVMTypeRef fty, ps[2] = { g->t_ptr, g->t_i32 };
    LLVMValueRef f = ic__gen_decl(g, "__kmpc_barrier", g->t_void, ps, 2, false, &fty);
    LLVMValueRef a[2] = { ic__gen_omp_ident(g), gtid };
    LLVMBuildCall2(g->b, fty, f, a, 2, "");
}

/* Row split with a B that all threads read (no batch dependence, not prepacked): the team
 * packs each B block together (a share of its panels each) into the shared block, then
 * every thread multiplies its rows with it. Every thread runs every barrier. */
static ic_status emit_shared(em_t *E, wk_t *W, LLVMValueRef shared, LLVMValueRef tid, LLVMValueRef nth,
                             LLVMValueRef gtid, LLVMValueRef r0, LLVMValueRef r1)
{
    ic__cg *g = E->g;
    ic__gemm *m = E->m;
    int64_t nr = m->p.nr, nc = m->p.nc;
    lp_t Ljc, Lb;
    batch_setup(E, W, I(g, 0)); /* Y's base: the same for every batch */
    LLVMValueRef ysrc = W->ysrc;
    LLVMValueRef jc = lp_open(g, &Ljc, I(g, 0), I(g, m->N), nc, "jc");
    LLVMValueRef ncur = smin(g, I(g, nc), sub(g, I(g, m->N), jc));
    LLVMValueRef nq = sdiv(g, add(g, ncur, I(g, nr - 1)), I(g, nr));
    LLVMValueRef p0 = sdiv(g, mul(g, tid, nq), nth), p1 = sdiv(g, mul(g, add(g, tid, I(g, 1)), nq), nth);
    LLVMBasicBlockRef join = if_open(g, icmp(g, LLVMIntSLT, p0, p1), "packb");
    LLVMValueRef c0 = muli(g, p0, nr), c1 = smin(g, muli(g, p1, nr), ncur);
    LLVMValueRef pa[4] = { ysrc, add(g, jc, c0), sub(g, c1, c0), gep(g, W->pe, shared, muli(g, p0, m->kp * nr)) };
    LLVMBuildCall2(g->b, E->packb_ty, E->packb, pa, 4, "");
    if_close(g, join);
    barrier(E, gtid);
    join = if_open(g, icmp(g, LLVMIntSLT, r0, r1), "rows");
    LLVMValueRef bfirst = sdiv(g, r0, I(g, m->pm)), bend = add(g, sdiv(g, sub(g, r1, I(g, 1)), I(g, m->pm)), I(g, 1));
    LLVMValueRef b = lp_open(g, &Lb, bfirst, bend, 1, "batch");
    batch_setup(E, W, b);
    LLVMValueRef mlo, mhi;
    batch_rows(E, b, r0, r1, &mlo, &mhi);
    emit_block(E, W, mlo, mhi, jc, ncur, shared, b);
    lp_close(g, &Lb, NULL);
    if_close(g, join);
    barrier(E, gtid); /* the block is read until everyone is done */
    lp_close(g, &Ljc, NULL);
    return IC_OK;
}

/* Each thread its own B blocks (packed when they change, or the prepacked panels). */
static ic_status emit_private(em_t *E, wk_t *W, LLVMValueRef r0, LLVMValueRef r1, LLVMValueRef q0,
                              LLVMValueRef q1)
{
    ic__cg *g = E->g;
    ic__gemm *m = E->m;
    int64_t nr = m->p.nr, nc = m->p.nc;
    LLVMValueRef last_key = LLVMBuildAlloca(g->b, g->t_i64, "bkey");
    LLVMBuildStore(g->b, I(g, -1), last_key);
    LLVMValueRef any = LLVMBuildAnd(g->b, icmp(g, LLVMIntSLT, r0, r1), icmp(g, LLVMIntSLT, q0, q1), "");
    LLVMBasicBlockRef done = if_open(g, any, "share");
    LLVMValueRef nlo = muli(g, q0, nr), nhi = smin(g, muli(g, q1, nr), I(g, m->N));
    LLVMValueRef bfirst = sdiv(g, r0, I(g, m->pm)), bend = add(g, sdiv(g, sub(g, r1, I(g, 1)), I(g, m->pm)), I(g, 1));
    lp_t Lb, Ljc;
    LLVMValueRef b = lp_open(g, &Lb, bfirst, bend, 1, "batch");
    batch_setup(E, W, b);
    LLVMValueRef mlo, mhi;
    batch_rows(E, b, r0, r1, &mlo, &mhi);
    LLVMValueRef jc = lp_open(g, &Ljc, nlo, nhi, nc, "jc");
    LLVMValueRef ncur = smin(g, I(g, nc), sub(g, nhi, jc));
    LLVMValueRef bblk;
    if (E->panels) {
        LLVMValueRef panel = add(g, muli(g, m->y.batched ? b : I(g, 0), m->pn), sdiv(g, jc, I(g, nr)));
        bblk = gep(g, W->pe, E->panels, muli(g, panel, m->kp * nr));
    } else {
        /* repack only when the block differs from the one packed last */
        LLVMValueRef key = add(g, muli(g, m->y.batched ? b : I(g, 0), m->N + 1), jc);
        LLVMValueRef stale = icmp(g, LLVMIntNE, LLVMBuildLoad2(g->b, g->t_i64, last_key, ""), key);
        LLVMBasicBlockRef join = if_open(g, stale, "packb");
        LLVMValueRef pa[4] = { W->ysrc, jc, ncur, W->Bp };
        LLVMBuildCall2(g->b, E->packb_ty, E->packb, pa, 4, "");
        LLVMBuildStore(g->b, key, last_key);
        if_close(g, join);
        bblk = W->Bp;
    }
    emit_block(E, W, mlo, mhi, jc, ncur, bblk, b);
    lp_close(g, &Ljc, NULL);
    lp_close(g, &Lb, NULL);
    if_close(g, done);
    return IC_OK;
}

/* K.gemm.work(bufs.., scratch, tid, nth, gtid): thread tid of nth. Scratch: the shared B
 * block (when the plan has one), then one slot per thread. */
static ic_status emit_work(em_t *E)
{
    ic__cg *g = E->g;
    ic__gemm *m = E->m;
    LLVMValueRef fn = E->work = new_fn(g, ".gemm.work", E->work_ty, false);
    int a = 0;
    for (int i = 0; i < g->nbufs; i++) {
        g->bufptr[i] = g->used[i] ? LLVMGetParam(fn, (unsigned)a) : NULL;
        if (g->used[i])
            ic__gen_noalias(g, fn, (unsigned)a++);
    }
    ic__gen_noalias(g, fn, (unsigned)a);
    LLVMValueRef scratch = LLVMGetParam(fn, (unsigned)a), tid = LLVMGetParam(fn, (unsigned)a + 1);
    LLVMValueRef nth = LLVMGetParam(fn, (unsigned)a + 2), gtid = LLVMGetParam(fn, (unsigned)a + 3);
    wk_t W;
    W.pe = m->bf16_dot ? g->t_i16 : g->t_f32;
    LLVMValueRef slot = gep(g, g->t_i8, scratch, add(g, I(g, m->shared_bytes), muli(g, tid, m->slot_bytes)));
    int64_t aoff = ((m->a_floats + 15) / 16 * 16) * 4, boff = aoff + ((m->b_floats + 15) / 16 * 16) * 4;
    W.Ap = slot, W.Bp = gep(g, g->t_i8, slot, I(g, aoff)), W.Ct = gep(g, g->t_i8, slot, I(g, boff));

    /* this thread's share: row panels (over the batch) or column panels */
    int64_t R = m->batch * m->pm, PN = m->pn;
    LLVMValueRef rsplit = LLVMBuildOr(g->b, icmp(g, LLVMIntSGE, I(g, R), muli(g, nth, 2)),
                                      icmp(g, LLVMIntSGE, I(g, R), I(g, PN)), "rsplit");
    LLVMValueRef t1 = add(g, tid, I(g, 1));
    LLVMValueRef r0 = LLVMBuildSelect(g->b, rsplit, sdiv(g, muli(g, tid, R), nth), I(g, 0), "r0");
    LLVMValueRef r1 = LLVMBuildSelect(g->b, rsplit, sdiv(g, muli(g, t1, R), nth), I(g, R), "r1");
    LLVMValueRef q0 = LLVMBuildSelect(g->b, rsplit, I(g, 0), sdiv(g, muli(g, tid, PN), nth), "q0");
    LLVMValueRef q1 = LLVMBuildSelect(g->b, rsplit, I(g, PN), sdiv(g, muli(g, t1, PN), nth), "q1");
    ic_status s = IC_OK;
    if (m->shared_bytes > 0) {
        LLVMValueRef sh = LLVMBuildAnd(g->b, rsplit, icmp(g, LLVMIntSGT, nth, I(g, 1)), "shared");
        LLVMBasicBlockRef ysh = blk(g, "shared"), nsh = blk(g, "private"), join = blk(g, "end");
        LLVMBuildCondBr(g->b, sh, ysh, nsh);
        LLVMPositionBuilderAtEnd(g->b, ysh);
        s = emit_shared(E, &W, scratch, tid, nth, gtid, r0, r1);
        LLVMBuildBr(g->b, join);
        LLVMPositionBuilderAtEnd(g->b, nsh);
        if (!s)
            s = emit_private(E, &W, r0, r1, q0, q1);
        LLVMBuildBr(g->b, join);
        LLVMPositionBuilderAtEnd(g->b, join);
    } else {
        s = emit_private(E, &W, r0, r1, q0, q1);
    }
    LLVMBuildRetVoid(g->b);
    return s;
}

/* ---- the exported kernel and its microtask ---- */

/* Loads the used buffer pointers from the table bufs into args; returns their count. */
static int load_bufs(ic__cg *g, LLVMValueRef bufs, LLVMValueRef *args)
{
    int n = 0;
    for (int i = 0; i < g->nbufs; i++) {
        if (!g->used[i])
            continue;
        LLVMValueRef p = gep(g, g->t_ptr, bufs, I(g, i));
        args[n++] = LLVMBuildLoad2(g->b, g->t_ptr, p, "");
    }
    return n;
}

/* K.gemm.omp(gtid, btid, bufs, scratch): work(.., scratch, omp thread, team size). */
static LLVMValueRef emit_omp_task(em_t *E)
{
    ic__cg *g = E->g;
    LLVMTypeRef ps[4] = { g->t_ptr, g->t_ptr, g->t_ptr, g->t_ptr };
    LLVMValueRef fn = new_fn(g, ".gemm.omp", LLVMFunctionType(g->t_void, ps, 4, 0), false);
    ic__gen_noalias(g, fn, 0);
    ic__gen_noalias(g, fn, 1);
    LLVMValueRef args[IC__MAX_KBUFS + 4];
    int n = load_bufs(g, LLVMGetParam(fn, 2), args);
    args[n++] = LLVMGetParam(fn, 3);
    args[n++] = ic__gen_omp_i64(g, "omp_get_thread_num");
    args[n++] = ic__gen_omp_i64(g, "omp_get_num_threads");
    args[n++] = LLVMBuildLoad2(g->b, g->t_i32, LLVMGetParam(fn, 0), "gtid");
    LLVMBuildCall2(g->b, E->work_ty, E->work, args, (unsigned)n, "");
    LLVMBuildRetVoid(g->b);
    return fn;
}

/* Scratch of the run: on the stack when small; else the kernel's own block, or (while another
 * run holds that block) malloc'd memory, or, if even that fails, the block once it is free. */
typedef struct { LLVMValueRef ptr, lock, own, raw; } scratch_t;

static void scratch_acquire(em_t *E, scratch_t *S, int64_t bytes)
{
    ic__cg *g = E->g;
    char name[512];
    S->lock = S->own = S->raw = NULL;
    if (bytes <= 65536) {
        LLVMValueRef a = LLVMBuildArrayAlloca(g->b, g->t_i8, I(g, bytes), "scratch");
        LLVMSetAlignment(a, 64);
        S->ptr = a;
        return;
    }
    LLVMTypeRef aty = LLVMArrayType2(g->t_i8, (uint64_t)bytes);
    snprintf(name, sizeof name, "%s.gemm.scratch", g->sym);
    LLVMValueRef blkv = LLVMAddGlobal(g->mod, aty, name);
    LLVMSetInitializer(blkv, LLVMConstNull(aty));
    LLVMSetLinkage(blkv, LLVMInternalLinkage);
    LLVMSetAlignment(blkv, 64);
    snprintf(name, sizeof name, "%s.gemm.lock", g->sym);
    S->lock = LLVMAddGlobal(g->mod, g->t_i32, name);
    LLVMSetInitializer(S->lock, LLVMConstInt(g->t_i32, 0, 0));
    LLVMSetLinkage(S->lock, LLVMInternalLinkage);
    LLVMSetAlignment(S->lock, 4);
    S->own = LLVMBuildAlloca(g->b, g->t_i1, "own");
    S->raw = LLVMBuildAlloca(g->b, g->t_ptr, "raw");
    LLVMValueRef ptr = LLVMBuildAlloca(g->b, g->t_ptr, "sp");
    LLVMValueRef cx = LLVMBuildAtomicCmpXchg(g->b, S->lock, LLVMConstInt(g->t_i32, 0, 0), LLVMConstInt(g->t_i32, 1, 0),
                                             LLVMAtomicOrderingAcquire, LLVMAtomicOrderingMonotonic, 0);
    LLVMValueRef got = LLVMBuildExtractValue(g->b, cx, 1, "got");
    LLVMBuildStore(g->b, got, S->own);
    LLVMBuildStore(g->b, blkv, ptr);
    LLVMBuildStore(g->b, LLVMConstNull(g->t_ptr), S->raw);
    LLVMBasicBlockRef join = if_open(g, LLVMBuildNot(g->b, got, ""), "busy");
    LLVMTypeRef fty;
    LLVMValueRef f_malloc = ic__gen_decl(g, "malloc", g->t_ptr, &g->t_i64, 1, false, &fty);
    LLVMValueRef sz = I(g, bytes + 64);
    LLVMValueRef raw = LLVMBuildCall2(g->b, fty, f_malloc, &sz, 1, "");
    LLVMBuildStore(g->b, raw, S->raw);
    LLVMValueRef isnull = LLVMBuildIsNull(g->b, raw, "");
    LLVMBasicBlockRef spin = blk(g, "spin"), ok = blk(g, "malloced"), after = blk(g, "scratch");
    LLVMBuildCondBr(g->b, isnull, spin, ok);
    LLVMPositionBuilderAtEnd(g->b, ok);
    LLVMValueRef ri = LLVMBuildPtrToInt(g->b, raw, g->t_i64, "");
    ri = LLVMBuildAnd(g->b, add(g, ri, I(g, 63)), I(g, ~(int64_t)63), "");
    LLVMBuildStore(g->b, LLVMBuildIntToPtr(g->b, ri, g->t_ptr, ""), ptr);
    LLVMBuildBr(g->b, after);
    /* out of memory: wait for the block */
    LLVMPositionBuilderAtEnd(g->b, spin);
    LLVMValueRef f_yield = ic__gen_decl(g, "sched_yield", g->t_i32, NULL, 0, false, &fty);
    LLVMBuildCall2(g->b, fty, f_yield, NULL, 0, "");
    cx = LLVMBuildAtomicCmpXchg(g->b, S->lock, LLVMConstInt(g->t_i32, 0, 0), LLVMConstInt(g->t_i32, 1, 0),
                                LLVMAtomicOrderingAcquire, LLVMAtomicOrderingMonotonic, 0);
    LLVMValueRef got2 = LLVMBuildExtractValue(g->b, cx, 1, "");
    LLVMBuildStore(g->b, got2, S->own);
    LLVMBuildCondBr(g->b, got2, after, spin);
    LLVMPositionBuilderAtEnd(g->b, after);
    if_close(g, join);
    S->ptr = LLVMBuildLoad2(g->b, g->t_ptr, ptr, "scratch");
}

static void scratch_release(em_t *E, scratch_t *S)
{
    ic__cg *g = E->g;
    if (!S->lock)
        return;
    LLVMValueRef own = LLVMBuildLoad2(g->b, g->t_i1, S->own, "");
    LLVMBasicBlockRef rel = blk(g, "unlock"), fr = blk(g, "free"), join = blk(g, "released");
    LLVMBuildCondBr(g->b, own, rel, fr);
    LLVMPositionBuilderAtEnd(g->b, rel);
    LLVMValueRef st = LLVMBuildStore(g->b, LLVMConstInt(g->t_i32, 0, 0), S->lock);
    LLVMSetOrdering(st, LLVMAtomicOrderingRelease);
    LLVMSetAlignment(st, 4);
    LLVMBuildBr(g->b, join);
    LLVMPositionBuilderAtEnd(g->b, fr);
    LLVMTypeRef fty;
    LLVMValueRef f_free = ic__gen_decl(g, "free", g->t_void, &g->t_ptr, 1, false, &fty);
    LLVMValueRef raw = LLVMBuildLoad2(g->b, g->t_ptr, S->raw, "");
    LLVMBuildCall2(g->b, fty, f_free, &raw, 1, "");
    LLVMBuildBr(g->b, join);
    LLVMPositionBuilderAtEnd(g->b, join);
}

static void emit_kernel(em_t *E, LLVMValueRef task)
{
    ic__cg *g = E->g;
    ic__gemm *m = E->m;
    LLVMTypeRef kty = LLVMFunctionType(g->t_void, &g->t_ptr, 1, 0);
    LLVMValueRef kf = LLVMAddFunction(g->mod, g->sym, kty);
    fn_attrs(g, kf, false);
    g->fn = kf;
    LLVMPositionBuilderAtEnd(g->b, blk(g, "entry"));
    LLVMValueRef bufs = LLVMGetParam(kf, 0);
    scratch_t S;
    scratch_acquire(E, &S, m->shared_bytes + (int64_t)m->tmax * m->slot_bytes);
    if (task) {
        LLVMValueRef T = smin(g, ic__gen_omp_i64(g, "omp_get_max_threads"), I(g, m->tmax));
        ic__gen_omp_fork(g, task, smax(g, T, I(g, 1)), bufs, &S.ptr, 1);
    } else {
        LLVMValueRef args[IC__MAX_KBUFS + 4];
        int n = load_bufs(g, bufs, args);
        args[n++] = S.ptr;
        args[n++] = I(g, 0);
        args[n++] = I(g, 1);
        args[n++] = LLVMConstInt(g->t_i32, 0, 0); /* no team: no barriers */
        LLVMBuildCall2(g->b, E->work_ty, E->work, args, (unsigned)n, "");
    }
    scratch_release(E, &S);
    LLVMBuildRetVoid(g->b);
}

/* The prepacked panels of Y as a constant global. */
static LLVMValueRef emit_panels(em_t *E)
{
    ic__cg *g = E->g;
    ic__gemm *m = E->m;
    char name[512];
    size_t bytes = (size_t)m->prepacked_bytes;
    LLVMValueRef init = LLVMConstStringInContext2(g->ctx, (const char *)m->prepacked, bytes, 1);
    snprintf(name, sizeof name, "%s.gemm.panels", g->sym);
    LLVMValueRef gv = LLVMAddGlobal(g->mod, LLVMTypeOf(init), name);
    LLVMSetInitializer(gv, init);
    LLVMSetGlobalConstant(gv, 1);
    LLVMSetLinkage(gv, LLVMPrivateLinkage);
    LLVMSetUnnamedAddress(gv, LLVMGlobalUnnamedAddr);
    LLVMSetAlignment(gv, 64);
    return gv;
}

ic_status ic__gemm_emit(ic__cg *g, ic__gemm *m)
{
    em_t E;
    memset(&E, 0, sizeof E);
    E.g = g;
    E.m = m;
    E.vty = LLVMVectorType(g->t_f32, (unsigned)m->vl);
    E.valign = (unsigned)(m->vl * 4 > 64 ? 64 : m->vl * 4);
    g->mode = IC_KMODE_ROW;
    LLVMTypeRef mps[5] = { g->t_ptr, g->t_ptr, g->t_i64, g->t_ptr, g->t_i1 };
    E.micro_ty = LLVMFunctionType(g->t_void, mps, 5, 0);
    LLVMTypeRef aps[6] = { g->t_ptr, g->t_i64, g->t_i64, g->t_i64, g->t_i64, g->t_ptr };
    E.packa_ty = LLVMFunctionType(g->t_void, aps, 6, 0);
    LLVMTypeRef bps[4] = { g->t_ptr, g->t_i64, g->t_i64, g->t_ptr };
    E.packb_ty = LLVMFunctionType(g->t_void, bps, 4, 0);
    LLVMTypeRef wps[IC__MAX_KBUFS + 4];
    int n = 0;
    for (int i = 0; i < g->nbufs; i++)
        if (g->used[i])
            wps[n++] = g->t_ptr;
    wps[n++] = g->t_ptr;
    wps[n++] = g->t_i64;
    wps[n++] = g->t_i64;
    wps[n++] = g->t_i32;
    E.work_ty = LLVMFunctionType(g->t_void, wps, (unsigned)n, 0);

    E.mre = (int)(m->M % m->p.mr);
    int64_t nrem = m->N % m->p.nr;
    E.nve = nrem ? (int)((nrem + m->vl - 1) / m->vl) : 0;
    int rv[2] = { m->p.mr, E.mre }, cv[2] = { m->nv, E.nve && E.nve < m->nv ? E.nve : m->nv };
    for (int r = 0; r < (E.mre ? 2 : 1); r++)
        for (int c = 0; c < (E.nve && E.nve < m->nv ? 2 : 1); c++)
            E.micro[r][c] = emit_micro(&E, rv[r], cv[c]);
    const ic_stage *st0 = &g->k->stages[0];
    for (int w = 0; w < 2; w++) {
        const ic__gemm_opnd *o = w ? &m->y : &m->x;
        if (!o->xform)
            continue;
        if (!(E.chain[w] = ic__calloc(g->c, (size_t)st0->ninstr + 1, sizeof(bool)))) {
            ic__free(g->c, E.chain[0]);
            return ic__error(g->c, IC_ENOMEM, "codegen: out of memory for kernel '%s'", g->k->name);
        }
        ic__gemm_chain_mark(st0, o, E.chain[w]);
    }
    if (m->x.expr >= 0) { /* packed inline (emit_packa_expr) */
        if (!(E.xneed = ic__calloc(g->c, (size_t)st0->ninstr + 1, sizeof(bool)))) {
            ic__free(g->c, E.chain[0]);
            ic__free(g->c, E.chain[1]);
            return ic__error(g->c, IC_ENOMEM, "codegen: out of memory for kernel '%s'", g->k->name);
        }
        ic__gemm_expr_mark(st0, m->x.expr, E.xneed);
    } else if (m->pack_a) {
        E.packa = emit_pack(&E, true);
    }
    if (m->prepacked)
        E.panels = emit_panels(&E);
    else
        E.packb = emit_pack(&E, false);
    ic_status s = emit_block_fn(&E);
    if (!s)
        s = emit_work(&E);
    ic__free(g->c, E.xneed);
    ic__free(g->c, E.chain[0]);
    ic__free(g->c, E.chain[1]);
    if (s)
        return s;
    LLVMValueRef task = m->tmax > 1 ? emit_omp_task(&E) : NULL;
    emit_kernel(&E, task);
    return IC_OK;
}
