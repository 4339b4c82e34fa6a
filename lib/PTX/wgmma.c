/* wgmma.c - f16/bf16 GEMMs on Hopper's warpgroup MMAs (sm_90a).
 *
 * Why: mma.sync tops out near half of an H100's tensor-core rate; wgmma.mma_async reads its
 * operands straight from shared memory, a warpgroup (4 warps) at a time, and runs
 * asynchronously, so copies, MMAs and the next k-tile overlap.
 *
 * A block is 1 + wgc warpgroups of 128 threads, specialised:
 *   - warpgroup 0, the producer, copies the 64-deep k-tiles of A and B with cp.async into ST
 *     shared-memory stages and makes each stage's "full" mbarrier complete when its copies
 *     land (cp.async.mbarrier.arrive.noinc: one arrival a producer thread);
 *   - consumer warpgroup w owns rows 64w .. 64w+63 of the BM x BN tile: it waits for a stage,
 *     issues BK/16 wgmma m64nBNk16 (f32 accumulators, BN/2 registers a thread), commits them,
 *     and waits until at most one k-tile of MMAs is in flight; the stage before is then free
 *     and each consumer warp arrives on its "empty" mbarrier, which the producer waits for
 *     before refilling it.
 * The epilogue (the kernel's BODY stages: bias, activation, residual, casts) runs on the
 * accumulators in registers (gemm.c's), as on the mma.sync path; one with math-library
 * calls (gelu) goes through shared memory instead, as one loop body (epilogue_staged).
 *
 * Shared layout of an operand tile, the 128-byte-swizzle canonical layout wgmma reads
 * through matrix descriptors: the dim contiguous in global memory (k for a K-major operand,
 * m or n for an MN-major one) is cut into atoms of 64 elements; atom a holds R rows of 128
 * bytes; 16-byte chunk c of row r sits at chunk c ^ (r % 8) (atoms 1024-byte aligned, which
 * the hardware's swizzle assumes).
 *   K-major:  R = the tile's m (or n) rows, one atom (BK = 64); descriptor SBO = 1024 (8-row
 *             groups); each k16 step starts 32 bytes further.
 *   MN-major: R = 64 k rows; atoms along m (n) are LBO = 8 KB apart, 8-k groups SBO = 1024;
 *             each k16 step starts 2 KB further.
 * Edges: copies past M, N or K are zero-filled (cp.async src-size), outputs past M or N are
 * masked in the epilogue, so any M, N, K work.
 */
#include <stdio.h>
#include <string.h>
#include "pgemm-impl.h"

enum { WG_BK = 64, WG_THREADS = 128 };

/* ---- planning ---- */

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* 16-byte copies possible, and which dim is contiguous */
static bool copyable(const ic__gop *x, int nbv, bool *kmajor)
{
    if (x->xform || x->c0 % 8) /* a fused producer to apply: gemm.c's converting loads */
        return false;
    for (int i = 0; i < nbv; i++)
        if (x->cb[i] % 8)
            return false;
    if (x->sk == 1 && x->so % 8 == 0) {
        *kmajor = true;
        return true;
    }
    if (x->so == 1 && x->sk % 8 == 0) {
        *kmajor = false;
        return true;
    }
    return false;
}

static void plan_op(ic__gop *x, bool kmajor, int BO, int off)
{
    x->kmajor = kmajor;
    x->mode = 0; /* LD_FAST16 */
    x->es = 2;
    x->R = kmajor ? BO : WG_BK;
    x->C = kmajor ? WG_BK : BO;
    x->pitch = 128;
    x->off = off;
}

/* Estimated cycles of the whole GEMM with BM x BN tiles, one block an SM (the stages fill
 * shared memory): waves of tiles, each tile cdiv(K, 64) k-tiles at the slower of its MMAs
 * (about 1600 multiply-adds a cycle an SM of the 2048 peak with two consumer warpgroups,
 * 1200 with one) and its operand copies (about 40 bytes a cycle an SM from L2), plus a fixed
 * cost a tile (pipeline fill, epilogue). Calibrated on an H100 at BERT-base's and 4096^3's
 * shapes (benchmarks/gpu/NOTES.md); what it buys is the wave quantisation: [4096, 768]
 * outputs in 128 x 192 tiles are 128 tiles, one wave of 132 SMs, where 128 x 128 is 192
 * tiles in two waves. */
static double tile_cycles(const ic__pgemm *g, int nsms, int BM, int BN)
{
    int64_t tiles = cdiv(g->M, BM) * cdiv(g->N, BN) * g->Bt;
    double mma = (double)BM * BN * WG_BK / (BM == 128 ? 1600.0 : 1200.0);
    double copy = (double)(BM + BN) * WG_BK * 2 / 40.0;
    double tile = (double)cdiv(g->K, WG_BK) * (mma > copy ? mma : copy) + 3000.0;
    return (double)cdiv(tiles, nsms) * tile;
}

/* The tile: 64 or 128 rows (one or two consumer warpgroups) by 64, 128, 192 or 256 columns,
 * the cheapest by tile_cycles unless the params fix it. */
static bool pick_tile(const ic_ptx_params *in, const ic__pgemm *g, int nsms, int *BM, int *BN)
{
    static const int bms[] = { 128, 64 }, bns[] = { 256, 192, 128, 64 };
    double best = -1;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 4; j++) {
            int bm = bms[i], bn = bns[j];
            if ((in->tile_m && bm != in->tile_m) || (in->tile_n && bn != in->tile_n))
                continue;
            if ((bm == 128 && g->M <= 64) || (bn > 64 && g->N <= bn - 64)) /* a tile of padding */
                continue;
            double t = tile_cycles(g, nsms > 0 ? nsms : 132, bm, bn);
            if (best < 0 || t < best * 0.98) /* near-ties keep the larger tile */
                best = t, *BM = bm, *BN = bn;
        }
    return best >= 0;
}

bool ic__wgmma_plan(const ic_ptx_params *in, int sm, int nsms, ic__pgemm *g)
{
    bool ka, kb;
    int BM = 0, BN = 0;
    bool forced = in->wgmma > 0;
    if (in->wgmma < 0 || (sm != 90 && !forced) || !g->tc)
        return false;
    if (in->warps_m || in->warps_n || in->split_k > 1 || (in->tile_k && in->tile_k != WG_BK))
        return false;
    g->A.elems = false;
    if (g->B.gather && !copyable(&g->A, g->nbv, &ka)) { /* the producer stores B itself: A too */
        g->A.elems = true;
        ka = true; /* any layout: element loads */
    }
    if (g->M < 64 || g->N < 64 || g->K < 16 || !(g->A.elems || copyable(&g->A, g->nbv, &ka)) ||
        !(g->B.gather ? (kb = false, true) : copyable(&g->B, g->nbv, &kb)))
        return false;
    if (!pick_tile(in, g, nsms, &BM, &BN))
        return false;
    int64_t tiles = cdiv(g->M, BM) * cdiv(g->N, BN) * g->Bt;
    /* few tiles and a long k: mma.sync with split-k fills the GPU better */
    if (!forced && !in->tile_m && !in->tile_n && tiles * 2 <= nsms && cdiv(g->K, WG_BK) >= 16)
        return false;
    int stage = (BM + BN) * WG_BK * 2, budget = 227 * 1024 - 1024 - 16 * 8;
    int64_t nkt = cdiv(g->K, WG_BK);
    /* 4 stages: 5 (206 KB of 128 x 192 tiles) ran 5-8% slower than 4 at BERT's shapes on an
     * H100, the shared memory taken from the L1 cache */
    int ST = in->stages ? in->stages : budget / stage < 4 ? budget / stage : 4;
    if (!in->stages && ST > nkt) /* stages beyond the k-tiles only cost shared memory */
        ST = nkt < 2 ? 2 : (int)nkt;
    if (ST < 2 || ST > 8 || ST * stage > budget)
        return false;
    g->wg = true;
    g->wgc = BM / 64;
    g->BM = BM;
    g->BN = BN;
    g->BK = WG_BK;
    g->ST = ST;
    g->WM = g->WN = 0;
    g->SK = 1;
    g->threads = WG_THREADS * (1 + g->wgc);
    g->nacc = BN / 2;
    plan_op(&g->A, ka, BM, 0);
    plan_op(&g->B, kb, BN, BM * 128);
    g->stage_bytes = stage;
    g->bar_off = ST * stage;
    g->smem = 1024 + ST * stage + 16 * ST; /* 1024: room to align the stages */
    g->flag_off = g->smem;
    g->tm = cdiv(g->M, BM);
    g->tn = cdiv(g->N, BN);
    g->ntiles = tiles;
    g->kchunk = cdiv(g->K, WG_BK) * WG_BK;
    g->A.ofull = g->M % BM == 0;
    g->B.ofull = g->N % BN == 0;
    g->A.kfull = g->B.kfull = g->K % WG_BK == 0;
    return true;
}

/* ---- PTX helpers ---- */

static LLVMValueRef I32(ic__pg *G, int64_t v) { return ic__pg_i32(G, v); }
static LLVMValueRef I64(ic__pg *G, int64_t v) { return ic__pg_i64(G, v); }
static LLVMValueRef add(ic__pg *G, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildAdd(G->b, a, b, ""); }
static LLVMValueRef mul(ic__pg *G, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildMul(G->b, a, b, ""); }
static LLVMValueRef z64(ic__pg *G, LLVMValueRef a) { return LLVMBuildZExt(G->b, a, G->t_i64, ""); }

typedef struct {
    ic__gctx X;
    LLVMValueRef base;            /* i32 shared address of stage 0 (1024-aligned) */
    LLVMValueRef base_off;        /* i32 its byte offset in the dynamic shared memory */
    LLVMValueRef wtid;            /* i32 thread in its warpgroup */
} wctx;

static void asm0(ic__pg *G, const char *text, const char *cons, LLVMValueRef *a, int n)
{
    if (!G->emu) /* the emulator runs copies and MMAs synchronously: fences are no-ops */
        ic__pgemm_asm(G, G->t_void, text, cons, a, n, true);
}

/* Emulator: host pointer of shared address a. */
static LLVMValueRef sptr(wctx *W, LLVMValueRef a)
{
    return LLVMBuildGEP2(W->X.G->b, W->X.G->t_i8, W->X.smem, &a, 1, "");
}

static LLVMValueRef emu_call(wctx *W, const char *fn, LLVMTypeRef ret, LLVMValueRef *a, int n)
{
    LLVMTypeRef pt[9];
    for (int i = 0; i < n; i++)
        pt[i] = LLVMTypeOf(a[i]);
    return ic__pg_ext(W->X.G, fn, ret, pt, n, a);
}

static void mbar_init(wctx *W, LLVMValueRef bar, int count)
{
    ic__pg *G = W->X.G;
    LLVMValueRef a[2] = { bar, I32(G, count) };
    if (G->emu) {
        a[0] = sptr(W, bar);
        emu_call(W, "ic__emu_mbar_init", G->t_void, a, 2);
        return;
    }
    asm0(G, "mbarrier.init.shared::cta.b64 [$0], $1;", "r,r,~{memory}", a, 2);
}

/* Spins until the phase of `bar` with parity `parity` has completed. */
static void mbar_wait(wctx *W, LLVMValueRef bar, LLVMValueRef parity)
{
    ic__pg *G = W->X.G;
    LLVMBasicBlockRef spin = LLVMAppendBasicBlockInContext(G->ctx, G->fn, "mbar_wait");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(G->ctx, G->fn, "mbar_done");
    LLVMBuildBr(G->b, spin);
    LLVMPositionBuilderAtEnd(G->b, spin);
    LLVMValueRef a[2] = { bar, parity }, r;
    if (G->emu) {
        a[0] = sptr(W, bar);
        r = emu_call(W, "ic__emu_mbar_test", G->t_i32, a, 2);
    } else {
        r = ic__pgemm_asm(G, G->t_i32,
            "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [$1], $2; selp.u32 $0, 1, 0, p; }",
            "=r,r,r,~{memory}", a, 2, true);
    }
    LLVMBuildCondBr(G->b, LLVMBuildICmp(G->b, LLVMIntNE, r, I32(G, 0), ""), done, spin);
    LLVMPositionBuilderAtEnd(G->b, done);
}

/* An arrival on bar: now (arrive), or when this thread's earlier cp.async copies land
 * (copies) */
static void mbar_arrive(wctx *W, LLVMValueRef bar, bool copies)
{
    ic__pg *G = W->X.G;
    if (G->emu) {
        LLVMValueRef p = sptr(W, bar);
        emu_call(W, "ic__emu_mbar_arrive", G->t_void, &p, 1);
        return;
    }
    asm0(G, copies ? "cp.async.mbarrier.arrive.noinc.shared::cta.b64 [$0];"
                   : "{ .reg .b64 st; mbarrier.arrive.shared::cta.b64 st, [$0]; }", "r,~{memory}", &bar, 1);
}

/* 16 bytes from global src to shared dst (u32), bytes past `n` zero-filled. */
static void cp16(wctx *W, LLVMValueRef dst, LLVMValueRef src, LLVMValueRef n)
{
    ic__pg *G = W->X.G;
    if (G->emu) {
        LLVMValueRef a[4] = { sptr(W, dst), src, I32(G, 16), n };
        emu_call(W, "ic__emu_cpasync", G->t_void, a, 4);
        return;
    }
    LLVMValueRef a[3] = { dst, LLVMBuildPtrToInt(G->b, src, G->t_i64, ""), n };
    asm0(G, "cp.async.cg.shared.global [$0], [$1], 16, $2;", "r,l,r,~{memory}", a, 3);
}

/* 16 bytes (v: <4 x i32>) stored at shared address dst: a gathered chunk (iconv.c). */
static void sts16(wctx *W, LLVMValueRef dst, LLVMValueRef v)
{
    ic__pg *G = W->X.G;
    if (G->emu) {
        LLVMValueRef st = LLVMBuildStore(G->b, v, sptr(W, dst));
        LLVMSetAlignment(st, 4);
        return;
    }
    LLVMValueRef a[5] = { dst };
    for (int i = 0; i < 4; i++)
        a[1 + i] = LLVMBuildExtractElement(G->b, v, I32(G, i), "");
    /* no memory clobber: the next chunks' global loads may be issued before this store */
    asm0(G, "st.shared.v4.b32 [$0], {$1, $2, $3, $4};", "r,r,r,r,r", a, 5);
}

/* ---- the producer ---- */

static LLVMValueRef bar_addr(wctx *W, int which, LLVMValueRef s)
{
    const ic__pgemm *g = W->X.g;
    LLVMValueRef off = add(W->X.G, I32(W->X.G, g->bar_off + which * 8 * g->ST), mul(W->X.G, s, I32(W->X.G, 8)));
    return add(W->X.G, W->base, off);
}

/* Global address of operand x's element (o, k) and the bytes of the 16-byte chunk there that
 * exist (0 .. 16): past the edges the copy reads nothing and fills zeros. */
static LLVMValueRef chunk_src(wctx *W, const ic__gop *x, int which, LLVMValueRef o, LLVMValueRef k,
                              LLVMValueRef *nbytes)
{
    ic__pg *G = W->X.G;
    if (!(x->ofull && x->kfull))
        return ic__pgemm_edge_chunk(&W->X, x, which, o, k, 8, nbytes);
    *nbytes = I32(G, 16);
    LLVMValueRef off = add(G, W->X.bbase[which], add(G, mul(G, o, I64(G, x->so)), mul(G, k, I64(G, x->sk))));
    return LLVMBuildGEP2(G->b, ic__pg_mem_type(G, x->dt), G->bufptr[x->buf], &off, 1, "");
}

/* Copies k-tile k0 of operand x into the stage at shared address sb. */
static void produce_operand(wctx *W, const ic__gop *x, int which, LLVMValueRef sb, LLVMValueRef k0)
{
    ic__pg *G = W->X.G;
    LLVMBuilderRef b = G->b;
    int cpr = x->C / 8, total = x->R * cpr;
    LLVMValueRef o0 = which == 0 ? W->X.m0 : W->X.n0;
    LLVMValueRef gv[64], gd[64]; /* gathered chunks: every load issued before the first store */
    int ng = 0;
    for (int it = 0; it * WG_THREADS < total; it++) {
        LLVMValueRef ci = add(G, W->wtid, I32(G, (int64_t)it * WG_THREADS));
        LLVMValueRef row = LLVMBuildUDiv(b, ci, I32(G, cpr), "");
        LLVMValueRef chunk = LLVMBuildURem(b, ci, I32(G, cpr), "");
        LLVMValueRef atom = LLVMBuildUDiv(b, chunk, I32(G, 8), "");
        LLVMValueRef sw = LLVMBuildXor(b, LLVMBuildURem(b, chunk, I32(G, 8), ""), LLVMBuildURem(b, row, I32(G, 8), ""), "");
        LLVMValueRef dst = add(G, add(G, sb, I32(G, x->off)),
                               add(G, mul(G, atom, I32(G, x->R * 128)), add(G, mul(G, row, I32(G, 128)), mul(G, sw, I32(G, 16)))));
        LLVMValueRef r64 = z64(G, row), c64 = z64(G, mul(G, chunk, I32(G, 8)));
        LLVMValueRef o = add(G, o0, x->kmajor ? r64 : c64), k = add(G, k0, x->kmajor ? c64 : r64);
        if (x->gather || x->elems) { /* implicit-GEMM conv: im2col(x) gathered, or unaligned rows */
            gd[ng] = dst;
            gv[ng++] = x->gather ? ic__iconv_chunk(&W->X, o, k) : ic__iconv_elems(&W->X, x, which, o, k);
            continue;
        }
        LLVMValueRef n;
        LLVMValueRef src = chunk_src(W, x, which, o, k, &n);
        cp16(W, dst, src, n);
    }
    for (int i = 0; i < ng; i++)
        sts16(W, gd[i], gv[i]);
}

static LLVMValueRef stage_of(ic__pg *G, LLVMValueRef it, int ST, LLVMValueRef *parity)
{
    LLVMValueRef s = LLVMBuildURem(G->b, it, I64(G, ST), "");
    LLVMValueRef round = LLVMBuildUDiv(G->b, it, I64(G, ST), "");
    *parity = LLVMBuildTrunc(G->b, LLVMBuildAnd(G->b, round, I64(G, 1), ""), G->t_i32, "");
    return LLVMBuildTrunc(G->b, s, G->t_i32, "");
}

/* A counted loop `for (it = 0; it < n; it++)`: returns it; ic__pg_loop_end closes it. */
static LLVMValueRef loop_begin(ic__pg *G, ic__pg_loop *L, LLVMValueRef n, const char *name)
{
    return ic__pg_loop_begin(G, L, I64(G, 0), LLVMIntSLT, n, (const char *const[]){ name, "body", "done" });
}

static void producer(wctx *W, LLVMValueRef nkt)
{
    ic__pg *G = W->X.G;
    const ic__pgemm *g = W->X.g;
    ic__pg_loop L;
    LLVMValueRef it = loop_begin(G, &L, nkt, "produce");
    LLVMValueRef ph;
    LLVMValueRef s = stage_of(G, it, g->ST, &ph);
    mbar_wait(W, bar_addr(W, 1, s), LLVMBuildXor(G->b, ph, I32(G, 1), ""));
    LLVMValueRef sb = add(G, W->base, mul(G, s, I32(G, g->stage_bytes)));
    LLVMValueRef k0 = mul(G, it, I64(G, WG_BK));
    produce_operand(W, &g->A, 0, sb, k0);
    produce_operand(W, &g->B, 1, sb, k0);
    mbar_arrive(W, bar_addr(W, 0, s), true);
    if (g->B.gather) { /* B was stored by this thread: its second arrival, after a fence that
                        * makes the stores visible to wgmma's async proxy */
        asm0(G, "fence.proxy.async.shared::cta;", "~{memory}", NULL, 0);
        mbar_arrive(W, bar_addr(W, 0, s), false);
    }
    ic__pg_loop_end(G, &L, it, I64(G, 1));
}

/* ---- the consumers ---- */

/* Matrix descriptor of a 128B-swizzled tile starting at shared address addr. */
static LLVMValueRef desc(ic__pg *G, LLVMValueRef addr, int lbo, int sbo)
{
    LLVMValueRef lo = LLVMBuildAnd(G->b, LLVMBuildLShr(G->b, z64(G, addr), I64(G, 4), ""), I64(G, 0x3FFF), "");
    uint64_t hi = ((uint64_t)(lbo >> 4) << 16) | ((uint64_t)(sbo >> 4) << 32) | (1ull << 62);
    return LLVMBuildOr(G->b, lo, LLVMConstInt(G->t_i64, hi, 0), "");
}

/* Descriptor of operand x for consumer cw's rows (A only) at k16 step kk of stage sb. */
static LLVMValueRef op_desc(wctx *W, const ic__gop *x, LLVMValueRef sb, LLVMValueRef cw, int kk, bool isA)
{
    ic__pg *G = W->X.G;
    LLVMValueRef a = add(G, sb, I32(G, x->off));
    if (x->kmajor) {
        if (isA)
            a = add(G, a, mul(G, cw, I32(G, 64 * 128)));
        return desc(G, add(G, a, I32(G, kk * 32)), 16, 1024);
    }
    if (isA)
        a = add(G, a, mul(G, cw, I32(G, x->R * 128)));
    return desc(G, add(G, a, I32(G, kk * 2048)), x->R * 128, 1024);
}

/* Builds "{$0, ..., $(n-1)}" + rest into buf. */
static void regs(char *buf, size_t cap, int first, int n)
{
    size_t l = strlen(buf);
    l += (size_t)snprintf(buf + l, cap - l, "{");
    for (int i = 0; i < n; i++)
        l += (size_t)snprintf(buf + l, cap - l, "%s$%d", i ? "," : "", first + i);
    snprintf(buf + l, cap - l, "}");
}

/* Constraints: n "=f" outputs, the given inputs, then n inputs tied to the outputs. */
static void tied(char *buf, size_t cap, int n, const char *inputs)
{
    size_t l = 0;
    for (int i = 0; i < n; i++)
        l += (size_t)snprintf(buf + l, cap - l, "%s=f", i ? "," : "");
    if (*inputs)
        l += (size_t)snprintf(buf + l, cap - l, ",%s", inputs);
    for (int i = 0; i < n; i++)
        l += (size_t)snprintf(buf + l, cap - l, ",%d", i);
    snprintf(buf + l, cap - l, ",~{memory}");
}

static void unpack(ic__pg *G, LLVMValueRef r, int n, LLVMValueRef *acc)
{
    for (int i = 0; i < n; i++)
        acc[i] = LLVMBuildExtractValue(G->b, r, (unsigned)i, "");
}

static LLVMTypeRef acc_type(ic__pg *G, int n)
{
    LLVMTypeRef f[128];
    for (int i = 0; i < n; i++)
        f[i] = G->t_f32;
    return LLVMStructTypeInContext(G->ctx, f, (unsigned)n, 0);
}

/* acc += A(64 x 16, descriptor da) * B(16 x BN, db), asynchronously. */
static void wgmma(wctx *W, LLVMValueRef da, LLVMValueRef db, LLVMValueRef *acc)
{
    ic__pg *G = W->X.G;
    const ic__pgemm *g = W->X.g;
    int n = g->nacc;
    char text[2048], cons[2048];
    snprintf(text, sizeof text, "{ .reg .pred p; setp.ne.b32 p, $%d, 0; wgmma.mma_async.sync.aligned.m64n%dk16.f32.%s.%s ",
             n + 2, g->BN, g->bf16 ? "bf16" : "f16", g->bf16 ? "bf16" : "f16");
    regs(text, sizeof text, 0, n);
    size_t l = strlen(text);
    snprintf(text + l, sizeof text - l, ", $%d, $%d, p, 1, 1, %d, %d; }", n, n + 1, !g->A.kmajor, !g->B.kmajor);
    tied(cons, sizeof cons, n, "l,l,r");
    if (G->emu) {
        LLVMValueRef buf = ic__pg_alloca(G, LLVMArrayType2(G->t_f32, (uint64_t)n));
        ic__pg_store_n(G, G->t_f32, buf, acc, n);
        LLVMValueRef a[9] = { W->X.smem, da, db, I32(G, g->BN), I32(G, !g->A.kmajor), I32(G, !g->B.kmajor),
                              I32(G, g->bf16), W->wtid, buf };
        emu_call(W, "ic__emu_wgmma", G->t_void, a, 9);
        ic__pg_load_n(G, G->t_f32, buf, acc, n);
        return;
    }
    LLVMValueRef args[3 + 128];
    args[0] = da;
    args[1] = db;
    args[2] = I32(G, 1);
    for (int i = 0; i < n; i++)
        args[3 + i] = acc[i];
    unpack(G, ic__pgemm_asm(G, acc_type(G, n), text, cons, args, 3 + n, true), n, acc);
}

/* wgmma.wait_group n, with the accumulators passing through so that nothing reads them
 * before the MMAs that write them are done. */
static void wgmma_wait(wctx *W, int pending, LLVMValueRef *acc)
{
    ic__pg *G = W->X.G;
    int n = W->X.g->nacc;
    if (G->emu)
        return;
    char text[64], cons[2048];
    snprintf(text, sizeof text, "wgmma.wait_group.sync.aligned %d;", pending);
    tied(cons, sizeof cons, n, "");
    unpack(G, ic__pgemm_asm(G, acc_type(G, n), text, cons, acc, n, true), n, acc);
}

static void consumer(wctx *W, LLVMValueRef nkt, LLVMValueRef cw, LLVMValueRef lane)
{
    ic__pg *G = W->X.G;
    const ic__pgemm *g = W->X.g;
    LLVMBuilderRef b = G->b;
    int n = g->nacc;
    ic__pg_loop L;
    LLVMValueRef it = loop_begin(G, &L, nkt, "consume");
    LLVMValueRef ph;
    LLVMValueRef s = stage_of(G, it, g->ST, &ph);
    mbar_wait(W, bar_addr(W, 0, s), ph);
    /* the stage was written through the generic proxy (cp.async); wgmma reads it through
     * the async proxy */
    asm0(G, "fence.proxy.async.shared::cta;", "~{memory}", NULL, 0);
    asm0(G, "wgmma.fence.sync.aligned;", "~{memory}", NULL, 0);
    if (G->emu) { /* the warpgroup steps together, as its aligned instructions make it */
        LLVMValueRef off = add(G, I32(G, g->bar_off + 16 * g->ST), mul(G, cw, I32(G, 8)));
        LLVMValueRef p = sptr(W, add(G, W->base, off));
        emu_call(W, "ic__emu_wgsync", G->t_void, &p, 1);
    }
    LLVMValueRef acc[128];
    for (int i = 0; i < n; i++)
        acc[i] = LLVMBuildLoad2(b, G->t_f32, W->X.acc[i], "");
    LLVMValueRef sb = add(G, W->base, mul(G, s, I32(G, g->stage_bytes)));
    for (int kk = 0; kk < WG_BK / 16; kk++)
        wgmma(W, op_desc(W, &g->A, sb, cw, kk, true), op_desc(W, &g->B, sb, cw, kk, false), acc);
    asm0(G, "wgmma.commit_group.sync.aligned;", "~{memory}", NULL, 0);
    wgmma_wait(W, 1, acc);
    for (int i = 0; i < n; i++)
        LLVMBuildStore(b, acc[i], W->X.acc[i]);
    /* the previous k-tile's MMAs are done: its stage may be refilled */
    LLVMValueRef rel = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSGT, it, I64(G, 0), ""),
                                    LLVMBuildICmp(b, LLVMIntEQ, lane, I32(G, 0), ""), "");
    LLVMBasicBlockRef cont = ic__pg_if(G, rel, "release");
    LLVMValueRef prev = LLVMBuildTrunc(b, LLVMBuildURem(b, add(G, it, I64(G, g->ST - 1)), I64(G, g->ST), ""),
                                       G->t_i32, "");
    mbar_arrive(W, bar_addr(W, 1, prev), false);
    ic__pg_endif(G, cont);
    ic__pg_loop_end(G, &L, it, I64(G, 1));
    for (int i = 0; i < n; i++)
        acc[i] = LLVMBuildLoad2(b, G->t_f32, W->X.acc[i], "");
    wgmma_wait(W, 0, acc);
    for (int i = 0; i < n; i++)
        LLVMBuildStore(b, acc[i], W->X.acc[i]);
}

/* Accumulator d[4j + 2h + e] of thread t (warp w, lane l) of consumer cw is element
 * (64 cw + 16 w + l/4 + 8h, 8j + 2(l%4) + e) of the tile: mma.sync's m16n8 layout, repeated. */
static void epilogue(wctx *W, LLVMValueRef cw, LLVMValueRef warp, LLVMValueRef lane)
{
    ic__pg *G = W->X.G;
    const ic__pgemm *g = W->X.g;
    LLVMBuilderRef b = G->b;
    LLVMValueRef row = add(G, add(G, mul(G, cw, I32(G, 64)), mul(G, warp, I32(G, 16))), LLVMBuildUDiv(b, lane, I32(G, 4), ""));
    LLVMValueRef m0 = add(G, W->X.m0, z64(G, row));
    LLVMValueRef n0 = add(G, W->X.n0, z64(G, mul(G, LLVMBuildURem(b, lane, I32(G, 4), ""), I32(G, 2))));
    for (int j = 0; j < g->BN / 8; j++)
        for (int h = 0; h < 2; h++) {
            LLVMValueRef m = add(G, m0, I64(G, h * 8)), n = add(G, n0, I64(G, j * 8));
            LLVMValueRef v[2];
            for (int e = 0; e < 2; e++)
                v[e] = LLVMBuildLoad2(b, G->t_f32, W->X.acc[4 * j + 2 * h + e], "");
            if (g->N % 2 == 0) {
                ic__pgemm_epilogue_at(&W->X, m, n, 2, v);
            } else {
                ic__pgemm_epilogue_at(&W->X, m, n, 1, &v[0]);
                ic__pgemm_epilogue_at(&W->X, m, add(G, n, I64(G, 1)), 1, &v[1]);
            }
        }
}

/* The consumer warpgroups meet (the producer has left): named barrier 1; in the emulator an
 * mbarrier of 128 wgc arrivals after the warpgroups' own. */
static void consumers_sync(wctx *W)
{
    ic__pg *G = W->X.G;
    const ic__pgemm *g = W->X.g;
    if (G->emu) {
        LLVMValueRef p = sptr(W, add(G, W->base, I32(G, g->bar_off + 16 * g->ST + 16)));
        emu_call(W, "ic__emu_wgsync", G->t_void, &p, 1);
        return;
    }
    char text[64];
    snprintf(text, sizeof text, "bar.sync 1, %d;", WG_THREADS * g->wgc);
    asm0(G, text, "~{memory}", NULL, 0);
}

/* Pointer to float `elem` (i32) of the staged tile. */
static LLVMValueRef staged_ptr(wctx *W, LLVMValueRef elem)
{
    ic__pg *G = W->X.G;
    return ic__pgemm_smem_ptr(&W->X, add(G, W->base_off, mul(G, elem, I32(G, 4))));
}

/* The epilogue through shared memory (g->staged, gemm.c's plan_staged): the consumers write
 * their accumulators over the stages (constant offsets from one pointer: address arithmetic
 * per store makes LLVM's NVPTX reassociation pass quadratic), then walk the tile in one loop
 * (ic__pgemm_staged_loop). */
static void epilogue_staged(wctx *W, LLVMValueRef cw, LLVMValueRef warp, LLVMValueRef lane)
{
    ic__pg *G = W->X.G;
    const ic__pgemm *g = W->X.g;
    LLVMBuilderRef b = G->b;
    int pitch = g->BN + IC__STAGED_PAD, nt = WG_THREADS * g->wgc;
    LLVMTypeRef v2 = LLVMVectorType(G->t_f32, 2);
    asm0(G, "fence.proxy.async.shared::cta;", "~{memory}", NULL, 0); /* wgmma read them */
    consumers_sync(W); /* no consumer still reads a stage */
    LLVMValueRef row = add(G, add(G, mul(G, cw, I32(G, 64)), mul(G, warp, I32(G, 16))), LLVMBuildUDiv(b, lane, I32(G, 4), ""));
    LLVMValueRef col = mul(G, LLVMBuildURem(b, lane, I32(G, 4), ""), I32(G, 2));
    LLVMValueRef p0 = staged_ptr(W, add(G, mul(G, row, I32(G, pitch)), col));
    for (int j = 0; j < g->BN / 8; j++)
        for (int h = 0; h < 2; h++) {
            LLVMValueRef v = LLVMGetUndef(v2);
            for (int e = 0; e < 2; e++)
                v = LLVMBuildInsertElement(b, v, LLVMBuildLoad2(b, G->t_f32, W->X.acc[4 * j + 2 * h + e], ""),
                                           I32(G, e), "");
            LLVMValueRef off = I64(G, 4 * ((int64_t)h * 8 * pitch + 8 * j));
            LLVMSetAlignment(LLVMBuildStore(b, v, LLVMBuildGEP2(b, G->t_i8, p0, &off, 1, "")), 8);
        }
    consumers_sync(W);
    ic__pgemm_staged_loop(&W->X, W->base_off, add(G, mul(G, cw, I32(G, WG_THREADS)), W->wtid), nt);
}

/* ---- the kernel ---- */

void ic__pgen_wgmma(ic__pg *G)
{
    const ic__pgemm *g = G->pl->gemm;
    LLVMBuilderRef b = G->b;
    wctx W;
    memset(&W, 0, sizeof W);
    W.X.G = G;
    W.X.g = g;
    W.X.tid = G->tid;
    W.X.smem = ic__pgemm_dynamic_smem(G, g->smem + 16);
    LLVMValueRef accs[128];
    W.X.acc = accs;
    for (int i = 0; i < g->nacc; i++) {
        accs[i] = ic__pg_alloca(G, G->t_f32);
        LLVMBuildStore(b, LLVMConstReal(G->t_f32, 0), accs[i]);
    }
    LLVMValueRef split;
    (void)ic__pgemm_block_setup(&W.X, &split);
    if (G->emu) { /* shared addresses are offsets into the emulator's array */
        W.base = W.base_off = I32(G, 0);
    } else {
        LLVMValueRef raw = ic__pgemm_smem_u32(G, ic__pgemm_smem_ptr(&W.X, I32(G, 0)));
        W.base = LLVMBuildAnd(b, add(G, raw, I32(G, 1023)), I32(G, ~1023), "");
        W.base_off = LLVMBuildSub(b, W.base, raw, "");
    }
    bool staged = g->staged;
    LLVMValueRef nkt = I64(G, g->kchunk / WG_BK);
    LLVMValueRef wgi = LLVMBuildUDiv(b, W.X.tid, I32(G, WG_THREADS), "");
    W.wtid = LLVMBuildURem(b, W.X.tid, I32(G, WG_THREADS), "");
    LLVMBasicBlockRef cont = ic__pg_if(G, LLVMBuildICmp(b, LLVMIntEQ, W.X.tid, I32(G, 0), ""), "mbar_init");
    for (int s = 0; s < g->ST; s++) {
        mbar_init(&W, bar_addr(&W, 0, I32(G, s)), WG_THREADS * (g->B.gather ? 2 : 1));
        mbar_init(&W, bar_addr(&W, 1, I32(G, s)), 4 * g->wgc);
    }
    for (int w = 0; G->emu && w < g->wgc; w++) /* emulator: warpgroup meeting points */
        mbar_init(&W, add(G, W.base, I32(G, g->bar_off + 16 * g->ST + 8 * w)), WG_THREADS);
    if (G->emu && staged) /* and the consumers' */
        mbar_init(&W, add(G, W.base, I32(G, g->bar_off + 16 * g->ST + 16)), WG_THREADS * g->wgc);
    ic__pg_endif(G, cont);
    ic__pg_barrier(G);
    LLVMBasicBlockRef prod = LLVMAppendBasicBlockInContext(G->ctx, G->fn, "producer");
    LLVMBasicBlockRef cons = LLVMAppendBasicBlockInContext(G->ctx, G->fn, "consumer");
    LLVMBasicBlockRef quit = LLVMAppendBasicBlockInContext(G->ctx, G->fn, "producer_done");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntEQ, wgi, I32(G, 0), ""), prod, cons);
    LLVMPositionBuilderAtEnd(b, prod);
    producer(&W, nkt);
    LLVMBuildBr(b, quit);
    LLVMPositionBuilderAtEnd(b, quit);
    LLVMBuildRetVoid(b);
    LLVMPositionBuilderAtEnd(b, cons);
    LLVMValueRef cw = LLVMBuildSub(b, wgi, I32(G, 1), "");
    LLVMValueRef warp = LLVMBuildUDiv(b, W.wtid, I32(G, 32), ""), lane = LLVMBuildURem(b, W.wtid, I32(G, 32), "");
    consumer(&W, nkt, cw, lane);
    if (staged)
        epilogue_staged(&W, cw, warp, lane);
    else
        epilogue(&W, cw, warp, lane);
}
