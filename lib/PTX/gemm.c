/* gemm.c - contractions as tiled shared-memory GEMMs.
 *
 * Recognition: a contraction as lib/Lower/contract.c matches it (a REDUCE stage summing
 * load(A) * load(B), each load optionally cast to f32, or run through a short chain of
 * pointwise instructions with constants: a producer Fuse left inline, such as a cast or a
 * scale) over one inner dim k, no other load, offsets affine in the loop variables
 * (lib/Lower/affine.c, through the plan), followed by BODY stages only (the epilogue:
 * bias, activation, residual, casts, the store). Outer variables only A depends on are m (adjacent ones that merge linearly
 * become one m), those only B depends on are n, the rest are batch dims; strides are free.
 *
 * Tensor cores (A and B both f16 or both bf16): a block computes a tile_m x tile_n tile with
 * warps_m x warps_n warps, each warp (tile_m / warps_m) x (tile_n / warps_n) outputs as
 * mma.sync.m16n8k16 fragments accumulated in f32. Tiles of A and B go through `stages`
 * shared-memory buffers filled by cp.async (16 bytes, zero-filled past the edges) while the
 * warps work on an earlier buffer; fragments come out with ldmatrix (.trans when the operand
 * is contiguous along m or n). Rows of 16-byte chunks are XOR-swizzled so ldmatrix and the
 * copies are free of bank conflicts. Operands whose layout or alignment does not allow
 * 16-byte copies are loaded element by element (same tiles, slower).
 * FFMA (f32, or mixed dtypes): the same pipeline with A stored [k][m] and B [k][n] (padded),
 * a thread computing 8 x 8 outputs from 16-byte shared-memory reads.
 * TF32 (f32 with ic_ptx_options.allow_tf32; never by default): the tensor-core tiling with
 * mma.sync m16n8k8 .tf32 on f32 tiles (padded rows, k-contiguous operands stored [o][k] so
 * their copies stay 16-byte), fragments read element by element and rounded with
 * cvt.rna.tf32.f32. Rounding rather than passing raw f32 bits (which the tensor core
 * truncates, as Triton's tf32 dots do) halves the operand error and removes its bias toward
 * zero, which would otherwise grow linearly with K on same-signed data; the cvt costs an ALU
 * slot per fragment register and k step, next to the mma.
 * An operand with a fused producer is copied element by element through the producer's
 * instructions (so each element is converted once per tile that loads it, as a plain load);
 * when its value is exact in f16/bf16 (x.to(bf16) @ w_bf16) it stays on the tensor cores.
 * split_k > 1: blocks along k write their partial tiles to a workspace of the module; the
 * last block of a tile (atomic counter) sums them in split order (deterministic) and runs
 * the epilogue. The epilogue is the kernel's BODY stages emitted on the accumulators, so
 * bias, activations and casts happen in registers before the only store.
 *
 * The emulator (G->emu) gets the same code with ldmatrix, mma and cp.async as calls into
 * emu.c that implement their warp-level semantics. */
#include <string.h>
#include "analysis-impl.h"
#include "pgemm-impl.h"

/* ---- recognition ---- */

static bool is16(ic_dtype t) { return t == IC_F16 || t == IC_BF16; }

/* The multiplicand o of the shared contraction as our operand x: at most
 * IC__GEMM_MAXCHAIN chain entries (constants included). */
static bool operand_chain(const ic__contract_opnd *o, ic__gop *x)
{
    if (o->nch > IC__GEMM_MAXCHAIN)
        return false;
    x->val = o->val;
    x->ld = o->ld;
    x->nch = o->nch;
    memcpy(x->ch, o->ch, sizeof(int) * (size_t)o->nch);
    x->xform = o->xform;
    x->vt = o->vt;
    return true;
}

static bool gemm_shape(const ic_kernel *k, const ic__pplan *pl, const ic_buffer *bufs, ic__pgemm *g)
{
    if (k->ninner != 1 || k->nouter < 1 || k->nstages < 2 || k->stages[0].kind != IC_STAGE_REDUCE)
        return false;
    for (int s = 1; s < k->nstages; s++)
        if (k->stages[s].kind != IC_STAGE_BODY)
            return false;
    const ic_stage *st = &k->stages[0];
    for (int i = 0; i < st->ninstr; i++)
        if (st->instr[i].op == IC_L_ACC)
            return false;
    ic__contract c;
    ic__gop ca, cb;
    memset(&ca, 0, sizeof ca);
    memset(&cb, 0, sizeof cb);
    if (!ic__contract_match(k, &c) || !operand_chain(&c.op[0], &ca) || !operand_chain(&c.op[1], &cb))
        return false;
    int red = c.red;
    int la = ca.ld, lb = cb.ld;
    /* every other load of the stage would be dead weight: refuse rather than guess */
    for (int i = 0; i < st->ninstr; i++)
        if (st->instr[i].op == IC_L_LOAD && i != la && i != lb)
            return false;
    const ic__pinfo *oa = &pl->info[0][st->instr[la].a], *ob = &pl->info[0][st->instr[lb].a];
    int kv = k->nouter;
    if (!oa->affine || !ob->affine || !oa->coef[kv] || !ob->coef[kv])
        return false;
    memset(g, 0, sizeof *g);
    g->A = ca;
    g->B = cb;
    g->rs = 0;
    g->ri = red;
    g->A.buf = st->instr[la].buf;
    g->B.buf = st->instr[lb].buf;
    g->A.dt = bufs[g->A.buf].dtype;
    g->B.dt = bufs[g->B.buf].dtype;
    if (g->A.dt != IC_F32 && !is16(g->A.dt))
        return false;
    if (g->B.dt != IC_F32 && !is16(g->B.dt))
        return false;
    /* classify the outer variables */
    int cls[IC_MAX_RANK]; /* 0 batch, 1 m, 2 n */
    for (int v = 0; v < k->nouter; v++) {
        bool da = oa->coef[v] != 0, db = ob->coef[v] != 0;
        cls[v] = k->outer[v] > 1 && da && !db ? 1 : k->outer[v] > 1 && !da && db ? 2 : 0;
    }
    int vm = -1, vn = -1;
    for (int v = 0; v < k->nouter; v++) {
        if (cls[v] == 1)
            vm = v;
        if (cls[v] == 2)
            vn = v;
    }
    g->nmv = 0;
    g->M = 1;
    g->A.so = 0;
    if (vm >= 0) { /* merge adjacent m variables laid out linearly (x[b, s, k] @ w) */
        int first = vm;
        while (first > 0 && cls[first - 1] == 1 && oa->coef[first - 1] == oa->coef[first] * k->outer[first])
            first--;
        for (int v = first; v <= vm; v++) {
            g->mv[g->nmv++] = v;
            g->M *= k->outer[v];
        }
        g->A.so = oa->coef[vm];
    }
    g->nv = vn;
    g->N = vn >= 0 ? k->outer[vn] : 1;
    g->B.so = vn >= 0 ? ob->coef[vn] : 0;
    g->nbv = 0;
    g->Bt = 1;
    for (int v = 0; v < k->nouter; v++) {
        bool in_m = false;
        for (int i = 0; i < g->nmv; i++)
            in_m |= g->mv[i] == v;
        if (in_m || v == vn)
            continue;
        g->A.cb[g->nbv] = oa->coef[v];
        g->B.cb[g->nbv] = ob->coef[v];
        g->bv[g->nbv++] = v;
        g->Bt *= k->outer[v];
    }
    g->K = k->inner[0];
    g->A.c0 = oa->c0;
    g->B.c0 = ob->c0;
    g->A.sk = oa->coef[kv];
    g->B.sk = ob->coef[kv];
    g->A.O = g->M;
    g->B.O = g->N;
    /* tensor cores for f16/bf16 values; a producer made them (x.to(bf16) @ w): converting
     * loads (tc_conv, set after the warpgroup dispatch, which copies raw operands) */
    bool tc = is16(g->A.vt) && g->A.vt == g->B.vt;
    g->tc_conv = tc && (g->A.xform || g->B.xform);
    g->tc = tc && !g->tc_conv;
    g->bf16 = g->A.vt == IC_BF16;
    return true;
}

/* ---- planning ---- */

static bool aligned(const ic__gop *x, int64_t q, int nbv)
{
    if (x->c0 % q)
        return false;
    for (int i = 0; i < nbv; i++)
        if (x->cb[i] % q)
            return false;
    return true;
}

/* Shared layout and copy mode of one operand. */
static void plan_operand(ic__gop *x, const ic__pgemm *g, int BO)
{
    if (g->tc) {
        x->es = 2;
        if (!x->xform && x->sk == 1 && x->so % 8 == 0 && aligned(x, 8, g->nbv)) {
            x->kmajor = true;
            x->mode = LD_FAST16;
        } else if (!x->xform && x->so == 1 && x->sk % 8 == 0 && aligned(x, 8, g->nbv)) {
            x->kmajor = false;
            x->mode = LD_FAST16;
        } else {
            x->kmajor = x->sk == 1 || x->so != 1;
            x->mode = LD_GENERIC;
        }
        x->R = x->kmajor ? BO : g->BK;
        x->C = x->kmajor ? g->BK : BO;
        x->pitch = x->C * 2;
    } else {
        x->es = 4;
        bool raw = x->dt == IC_F32 && !x->xform; /* the bytes as they are: cp.async */
        /* FFMA: rows are k (threads read 4 adjacent o at once). TF32: rows are o when k is
         * contiguous (16-byte copies along k), the fragments read single elements either way */
        x->kmajor = g->tf32 && x->sk == 1;
        int64_t fast = x->kmajor ? x->so : x->sk;
        if (raw && (x->kmajor ? x->sk : x->so) == 1 && fast % 4 == 0 && aligned(x, 4, g->nbv))
            x->mode = LD_FAST16;
        else
            x->mode = raw ? LD_ELEM4 : LD_GENERIC;
        x->R = x->kmajor ? BO : g->BK;
        x->C = x->kmajor ? g->BK : BO;
        /* padded rows: column-wise copies and the fragments' reads spread over the banks */
        x->pitch = (x->C + 4) * 4;
    }
}

static bool is_pow2(int64_t x) { return x > 0 && (x & (x - 1)) == 0; }

static ic_status bad(ic_ctx *c, const ic_kernel *k, const char *what)
{
    return ic__error(c, IC_EINVAL, "ptx: kernel '%s': bad GEMM params: %s", k->name ? k->name : "?", what);
}

/* Tiles and warps of the tensor-core GEMMs: mma.sync m16n8k16 (f16/bf16) or m16n8k8 (TF32),
 * k steps ks of 16 or 8. Measured on H100 (4096^3 bf16): 128 x 128 x 64, 3 stages, 2 x 4 warps
 * the best of the sweep in benchmarks/gpu (385 TFLOP/s against 345 for 128 x 128 x 32, 4
 * stages); an f32 tile is twice the bytes of a bf16 one, so TF32 takes tile_k 32: 3 stages of
 * 128 x 128 x 32 are 106 KB (two blocks an SM). */
static ic_status plan_warps(ic_ctx *c, const ic_kernel *k, const ic_ptx_params *in, ic__pgemm *g)
{
    int ks = g->tf32 ? 8 : 16, pn = g->tf32 ? 8 : 16; /* k step; smallest n piece of a warp */
    g->BM = in->tile_m ? in->tile_m : g->M <= 64 ? 64 : 128;
    g->BN = in->tile_n ? in->tile_n : g->N <= 64 ? 64 : 128;
    g->BK = in->tile_k ? in->tile_k : g->K >= 256 ? 4 * ks : 2 * ks;
    g->WM = in->warps_m ? in->warps_m : g->BM >= 64 ? g->BM / 64 : 1; /* tile_m 16 or 32: one warp along m */
    g->WN = in->warps_n ? in->warps_n : g->BN / 32;
    g->ST = in->stages ? in->stages : g->BK == 4 * ks ? 3 : 4;
    if (!is_pow2(g->BM) || g->BM < 16 || g->BM > 256 || !is_pow2(g->BN) || g->BN < 16 || g->BN > 256)
        return bad(c, k, "tile_m and tile_n must be powers of two in 16..256");
    if (g->BK != ks && g->BK != 2 * ks && g->BK != 4 * ks)
        return bad(c, k, g->tf32 ? "tile_k must be 8, 16 or 32 for TF32" : "tile_k must be 16, 32 or 64 for tensor cores");
    if (!is_pow2(g->WM) || !is_pow2(g->WN) || g->WM * g->WN > 16 || g->BM % (g->WM * 16) || g->BN % (g->WN * pn))
        return bad(c, k, g->tf32 ? "warps must split the tile into pieces of at least 16 x 8 (16 warps at most)"
                                 : "warps must split the tile into pieces of at least 16 x 16 (16 warps at most)");
    g->threads = g->WM * g->WN * 32;
    g->nacc = (g->BM / g->WM / 16) * (g->BN / g->WN / 8) * 4;
    if (g->nacc > 128)
        return bad(c, k, "more than 128 accumulators a thread");
    return IC_OK;
}

/* Whether the epilogue goes through shared memory (g->staged). A math-library call or a
 * division or square root per element (gelu's erf, sigmoid, a batch norm's rsqrt), unrolled
 * over a thread's accumulators, is thousands of instructions that the driver's JIT takes
 * most of a second to compile (ptxas time grows faster than the code): staged, the epilogue
 * is one loop body. Cheap epilogues (bias, relu, casts, residuals) stay on the registers. The
 * f32 tile goes over the stages: wgmma's stages must hold it, the mma.sync and FFMA kernels'
 * shared memory grows to it when smaller (within 227 KB). */
static void plan_staged(const ic_kernel *k, ic__pgemm *g)
{
    bool heavy = false;
    for (int s = g->rs + 1; s < k->nstages && !heavy; s++)
        for (int i = 0; i < k->stages[s].ninstr && !heavy; i++) {
            ic_lop op = k->stages[s].instr[i].op;
            heavy = (ic_lop_get(op)->traits & IC_LT_MATH) || op == IC_L_DIV || op == IC_L_SQRT ||
                    op == IC_L_RSQRT || op == IC_L_RECIP;
        }
    int need = g->BM * (g->BN + IC__STAGED_PAD) * 4;
    if (!heavy || (g->wg && need > g->ST * g->stage_bytes) || (!g->wg && need + 16 > 227 * 1024))
        return;
    g->staged = true;
    if (!g->wg && need > g->smem)
        g->smem = g->flag_off = need;
}

ic_status ic__pgemm_plan(ic_ctx *c, const ic_kernel *k, const ic_buffer *bufs, const ic_ptx_params *in,
                         int nsms, int sm, bool forced, ic__pplan *pl, bool *is_gemm)
{
    *is_gemm = false;
    ic__pgemm g;
    if (!gemm_shape(k, pl, bufs, &g)) {
        if (forced)
            return ic__error(c, IC_EINVAL, "ptx: kernel '%s': mode GEMM for a kernel that is no "
                             "contraction of two loads over one inner dim", k->name ? k->name : "?");
        return IC_OK;
    }
    /* tiny outputs (dot products, matrix-vector) are row reductions */
    if (!forced && g.M * g.N < 64)
        return IC_OK;
    if (g.tc && pl->cv && ic__iconv_fits(&g, pl->cv)) { /* implicit-GEMM conv: wgmma only */
        g.B.gather = true;
        g.cv = *pl->cv;
        if (ic__wgmma_plan(in, sm, nsms, &g)) {
            pl->used[g.cv.xbuf] = true; /* x instead of the im2col buffer */
            pl->used[g.cv.tbuf] = false;
            goto store;
        }
        g.B.gather = false;
    }
    if (g.tc && ic__wgmma_plan(in, sm, nsms, &g))
        goto store;
    g.tc |= g.tc_conv;
    g.tf32 = !g.tc && pl->allow_tf32;
    if (g.tc || g.tf32) {
        ic_status st = plan_warps(c, k, in, &g);
        if (st)
            return st;
    } else {
        g.BM = in->tile_m ? in->tile_m : g.M <= 32 ? 32 : g.M <= 64 ? 64 : 128;
        g.BN = in->tile_n ? in->tile_n : g.N <= 64 ? 64 : 128;
        g.BK = in->tile_k ? in->tile_k : 16;
        g.ST = in->stages ? in->stages : 3;
        if (in->warps_m || in->warps_n)
            return bad(c, k, "the FFMA GEMM takes no warps (a thread computes 8 x 8)");
        if (!is_pow2(g.BM) || g.BM < 16 || g.BM > 256 || !is_pow2(g.BN) || g.BN < 16 || g.BN > 256)
            return bad(c, k, "tile_m and tile_n must be powers of two in 16..256");
        if (g.BK != 8 && g.BK != 16 && g.BK != 32)
            return bad(c, k, "tile_k must be 8, 16 or 32 for FFMA");
        g.threads = (g.BM / 8) * (g.BN / 8);
        if (g.threads < 32 || g.threads > 1024)
            return bad(c, k, "tile_m * tile_n / 64 threads must be 32..1024");
        g.WM = g.WN = 0;
        g.nacc = 64;
    }
    if (g.ST < 2 || g.ST > 8)
        return bad(c, k, "stages must be 2..8");
    plan_operand(&g.A, &g, g.BM);
    plan_operand(&g.B, &g, g.BN);
    g.A.off = 0;
    g.B.off = g.A.R * g.A.pitch;
    g.stage_bytes = g.B.off + g.B.R * g.B.pitch;
    g.smem = g.stage_bytes * g.ST;
    g.flag_off = g.smem;
    if (g.smem + 16 > 227 * 1024)
        return bad(c, k, "more than 227 KB of shared memory (fewer stages or smaller tiles)");
    g.tm = (g.M + g.BM - 1) / g.BM;
    g.tn = (g.N + g.BN - 1) / g.BN;
    g.ntiles = g.tm * g.tn * g.Bt;
    int64_t kt = (g.K + g.BK - 1) / g.BK;
    int64_t SK = in->split_k;
    if (SK < 0 || SK > 256)
        return bad(c, k, "split_k must be 1..256");
    if (!SK) { /* too few tiles to fill the GPU and a long k: split it */
        SK = 1;
        while (g.ntiles * SK * 2 <= nsms && kt / (SK * 2) >= 8 && SK < 64)
            SK *= 2;
    }
    g.SK = (int)SK;
    g.kchunk = (kt + SK - 1) / SK * g.BK;
    g.A.ofull = g.M % g.BM == 0;
    g.B.ofull = g.N % g.BN == 0;
    g.A.kfull = g.B.kfull = g.K % g.BK == 0 && g.K % g.kchunk == 0;
store:
    plan_staged(k, &g);
    pl->grid = g.ntiles * g.SK;
    pl->block = g.threads;
    pl->mode = IC_PTX_GEMM;
    pl->lanevar = g.nv;
    pl->V = 1;
    pl->T = 1;
    pl->R = 1;
    pl->S = 1;
    pl->smem = 0;
    pl->gemm = ic__malloc(c, sizeof g);
    if (!pl->gemm)
        return ic__error(c, IC_ENOMEM, "ptx: out of memory planning kernel '%s'", k->name);
    *pl->gemm = g;
    pl->prm.tile_m = g.BM;
    pl->prm.tile_n = g.BN;
    pl->prm.tile_k = g.BK;
    pl->prm.warps_m = g.WM;
    pl->prm.warps_n = g.WN;
    pl->prm.stages = g.ST;
    pl->prm.split_k = g.SK;
    pl->prm.wgmma = g.wg ? 1 : -1;
    *is_gemm = true;
    return IC_OK;
}

int ic__pgemm_smem_bytes(const ic__pplan *pl)
{
    return pl->gemm ? pl->gemm->smem + 16 : 0;
}

void ic__pgemm_free(ic_ctx *c, ic__pplan *pl)
{
    ic__free(c, pl->gemm);
    pl->gemm = NULL;
}

/* ---- code generation helpers ---- */

static LLVMValueRef I32(ic__pg *G, int64_t v) { return ic__pg_i32(G, v); }
static LLVMValueRef I64(ic__pg *G, int64_t v) { return ic__pg_i64(G, v); }
static LLVMValueRef add(ic__pg *G, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildAdd(G->b, a, b, ""); }
static LLVMValueRef mul(ic__pg *G, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildMul(G->b, a, b, ""); }
static LLVMValueRef ult(ic__pg *G, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildICmp(G->b, LLVMIntULT, a, b, ""); }
static LLVMValueRef slt(ic__pg *G, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildICmp(G->b, LLVMIntSLT, a, b, ""); }
static LLVMValueRef sel(ic__pg *G, LLVMValueRef c, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildSelect(G->b, c, a, b, ""); }
static LLVMValueRef and_(ic__pg *G, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildAnd(G->b, a, b, ""); }
static LLVMValueRef z64(ic__pg *G, LLVMValueRef a) { return LLVMBuildZExt(G->b, a, G->t_i64, ""); }
static LLVMValueRef smin64(ic__pg *G, LLVMValueRef a, LLVMValueRef b) { return sel(G, slt(G, a, b), a, b); }
static LLVMValueRef smax64(ic__pg *G, LLVMValueRef a, LLVMValueRef b) { return sel(G, slt(G, a, b), b, a); }

static LLVMValueRef inline_asm(ic__pg *G, LLVMTypeRef ret, const char *text, const char *cons,
                               LLVMValueRef *args, int n, bool side)
{
    LLVMTypeRef pt[272]; /* a wgmma: 2 descriptors, a flag, up to 256 accumulators */
    for (int i = 0; i < n && i < 272; i++)
        pt[i] = LLVMTypeOf(args[i]);
    LLVMTypeRef ft = LLVMFunctionType(ret, pt, (unsigned)n, 0);
    LLVMValueRef fn = LLVMGetInlineAsm(ft, (char *)text, strlen(text), (char *)cons, strlen(cons), side, 0,
                                       LLVMInlineAsmDialectATT, 0);
    LLVMValueRef call = LLVMBuildCall2(G->b, ft, fn, args, (unsigned)n, "");
    /* warp-collective (mma.sync.aligned, ldmatrix): LLVM must not sink it into a branch only
     * some lanes take (an unrolled last k step feeding the masked epilogue stores), which
     * hangs the warp */
    unsigned conv = LLVMGetEnumAttributeKindForName("convergent", 10);
    LLVMAddCallSiteAttribute(call, (unsigned)LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(G->ctx, conv, 0));
    return call;
}

typedef ic__gctx gctx;

static LLVMValueRef smem_ptr(gctx *X, LLVMValueRef byte)
{
    return LLVMBuildGEP2(X->G->b, X->G->t_i8, X->smem, &byte, 1, "");
}

/* Shared-window address of a shared pointer, for inline PTX. */
static LLVMValueRef smem_u32(ic__pg *G, LLVMValueRef p)
{
    return LLVMBuildTrunc(G->b, LLVMBuildPtrToInt(G->b, p, G->t_i64, ""), G->t_i32, "");
}

static void cp_async(gctx *X, LLVMValueRef dst, LLVMValueRef src, int bytes, LLVMValueRef srcbytes)
{
    ic__pgemm_cp_async(X->G, dst, src, bytes, srcbytes);
}

void ic__pgemm_cp_async(ic__pg *G, LLVMValueRef dst, LLVMValueRef src, int bytes, LLVMValueRef srcbytes)
{
    if (G->emu) {
        LLVMTypeRef pt[4] = { LLVMTypeOf(dst), LLVMTypeOf(src), G->t_i32, G->t_i32 };
        LLVMValueRef a[4] = { dst, src, I32(G, bytes), srcbytes };
        ic__pg_ext(G, "ic__emu_cpasync", G->t_void, pt, 4, a);
        return;
    }
    LLVMValueRef a[3] = { smem_u32(G, dst), LLVMBuildPtrToInt(G->b, src, G->t_i64, ""), srcbytes };
    inline_asm(G, G->t_void, bytes == 16 ? "cp.async.cg.shared.global [$0], [$1], 16, $2;"
                                         : "cp.async.ca.shared.global [$0], [$1], 4, $2;",
               "r,l,r,~{memory}", a, 3, true);
}

static void cp_commit(gctx *X) { ic__pgemm_cp_commit(X->G); }
static void cp_wait(gctx *X, int n) { ic__pgemm_cp_wait(X->G, n); }

void ic__pgemm_cp_commit(ic__pg *G)
{
    if (!G->emu)
        inline_asm(G, G->t_void, "cp.async.commit_group;", "~{memory}", NULL, 0, true);
}

void ic__pgemm_cp_wait(ic__pg *G, int n)
{
    if (G->emu)
        return;
    char t[64];
    snprintf(t, sizeof t, "cp.async.wait_group %d;", n);
    inline_asm(G, G->t_void, t, "~{memory}", NULL, 0, true);
}

void ic__pgemm_ldmatrix4(ic__pg *G, LLVMValueRef p, bool trans, LLVMValueRef out[4])
{
    if (G->emu) {
        LLVMValueRef buf = ic__pg_alloca(G, LLVMArrayType2(G->t_i32, 4));
        LLVMTypeRef pt[3] = { LLVMTypeOf(p), G->t_i32, LLVMTypeOf(buf) };
        LLVMValueRef a[3] = { p, I32(G, trans), buf };
        ic__pg_ext(G, "ic__emu_ldmatrix", G->t_void, pt, 3, a);
        ic__pg_load_n(G, G->t_i32, buf, out, 4);
        return;
    }
    LLVMTypeRef f4[4] = { G->t_i32, G->t_i32, G->t_i32, G->t_i32 };
    LLVMTypeRef st = LLVMStructTypeInContext(G->ctx, f4, 4, 0);
    LLVMValueRef a = smem_u32(G, p);
    LLVMValueRef r = inline_asm(G, st, trans ? "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {$0,$1,$2,$3}, [$4];"
                                             : "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {$0,$1,$2,$3}, [$4];",
                                "=r,=r,=r,=r,r,~{memory}", &a, 1, true);
    for (int i = 0; i < 4; i++)
        out[i] = LLVMBuildExtractValue(G->b, r, (unsigned)i, "");
}

static void ldmatrix4(gctx *X, LLVMValueRef p, bool trans, LLVMValueRef out[4])
{
    ic__pgemm_ldmatrix4(X->G, p, trans, out);
}

void ic__pgemm_mma(ic__pg *G, int kind, LLVMValueRef a[4], LLVMValueRef b[2], LLVMValueRef c[4])
{
    if (G->emu) {
        LLVMValueRef ab = ic__pg_alloca(G, LLVMArrayType2(G->t_i32, 6));
        LLVMValueRef cb = ic__pg_alloca(G, LLVMArrayType2(G->t_f32, 4));
        LLVMValueRef abv[6] = { a[0], a[1], a[2], a[3], b[0], b[1] };
        ic__pg_store_n(G, G->t_i32, ab, abv, 6);
        ic__pg_store_n(G, G->t_f32, cb, c, 4);
        LLVMTypeRef pt[3] = { G->t_i32, LLVMTypeOf(ab), LLVMTypeOf(cb) };
        LLVMValueRef args[3] = { I32(G, kind), ab, cb };
        ic__pg_ext(G, "ic__emu_mma", G->t_void, pt, 3, args);
        ic__pg_load_n(G, G->t_f32, cb, c, 4);
        return;
    }
    LLVMTypeRef f4[4] = { G->t_f32, G->t_f32, G->t_f32, G->t_f32 };
    LLVMTypeRef st = LLVMStructTypeInContext(G->ctx, f4, 4, 0);
    LLVMValueRef args[10] = { a[0], a[1], a[2], a[3], b[0], b[1], c[0], c[1], c[2], c[3] };
    LLVMValueRef r = inline_asm(G, st, kind == 2
        ? "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {$0,$1,$2,$3}, {$4,$5,$6,$7}, {$8,$9}, {$10,$11,$12,$13};"
        : kind == 1
        ? "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {$0,$1,$2,$3}, {$4,$5,$6,$7}, {$8,$9}, {$10,$11,$12,$13};"
        : "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {$0,$1,$2,$3}, {$4,$5,$6,$7}, {$8,$9}, {$10,$11,$12,$13};",
        "=f,=f,=f,=f,r,r,r,r,r,r,0,1,2,3", args, 10, true);
    for (int i = 0; i < 4; i++)
        c[i] = LLVMBuildExtractValue(G->b, r, (unsigned)i, "");
}

/* c[0..3] += A(16x16, a[0..3]) * B(16x8, b[0..1]); TF32: A(16x8) * B(8x8), the same
 * accumulator layout */
static void mma(gctx *X, LLVMValueRef a[4], LLVMValueRef b[2], LLVMValueRef c[4])
{
    ic__pgemm_mma(X->G, X->g->tf32 ? 2 : X->g->bf16, a, b, c);
}

/* Byte offset in a stage of element (row, col) of operand x's shared tile. */
static LLVMValueRef tile_byte(gctx *X, const ic__gop *x, LLVMValueRef row, LLVMValueRef col)
{
    ic__pg *G = X->G;
    if (!X->g->tc) /* padded rows */
        return add(G, I32(G, x->off), add(G, mul(G, row, I32(G, x->pitch)), mul(G, col, I32(G, 4))));
    int C = x->C / 8; /* 16-byte chunks a row */
    LLVMValueRef ch = LLVMBuildLShr(G->b, col, I32(G, 3), "");
    LLVMValueRef key;
    if (C >= 8)
        key = LLVMBuildAnd(G->b, row, I32(G, 7), "");
    else if (C > 1)
        key = LLVMBuildAnd(G->b, LLVMBuildUDiv(G->b, row, I32(G, 8 / C), ""), I32(G, C - 1), "");
    else
        key = I32(G, 0);
    LLVMValueRef sw = LLVMBuildXor(G->b, ch, key, "");
    LLVMValueRef in = mul(G, LLVMBuildAnd(G->b, col, I32(G, 7), ""), I32(G, 2));
    return add(G, I32(G, x->off), add(G, mul(G, row, I32(G, x->pitch)), add(G, mul(G, sw, I32(G, 16)), in)));
}

/* Global pointer of operand x at (o, k) (i64). */
static LLVMValueRef gaddr(gctx *X, const ic__gop *x, int which, LLVMValueRef o, LLVMValueRef k)
{
    ic__pg *G = X->G;
    LLVMValueRef off = add(G, X->bbase[which], add(G, mul(G, o, I64(G, x->so)), mul(G, k, I64(G, x->sk))));
    LLVMTypeRef et = ic__pg_mem_type(G, x->dt);
    return LLVMBuildGEP2(G->b, et, G->bufptr[x->buf], &off, 1, "");
}

/* The same for a whole tile: the part that does not move with k0 first (LLVM hoists it out of
 * the k loop), then k0's. */
static LLVMValueRef gaddr_tile(gctx *X, const ic__gop *x, int which, LLVMValueRef o, LLVMValueRef kin,
                               LLVMValueRef k0)
{
    ic__pg *G = X->G;
    LLVMTypeRef et = ic__pg_mem_type(G, x->dt);
    LLVMValueRef inv = add(G, X->bbase[which], add(G, mul(G, o, I64(G, x->so)), mul(G, kin, I64(G, x->sk))));
    LLVMValueRef p = LLVMBuildGEP2(G->b, et, G->bufptr[x->buf], &inv, 1, "");
    LLVMValueRef mv = mul(G, k0, I64(G, x->sk));
    return LLVMBuildGEP2(G->b, et, p, &mv, 1, "");
}

/* A loaded element (raw, x->dt) through the producer fused into operand x: its chain of
 * instructions re-emitted on one lane. The f32 value, or with bits16 the f16/bf16 bits it is
 * exact in (tensor cores). The padding elements load a valid address and are zeroed after. */
static LLVMValueRef chain_value(gctx *X, const ic__gop *x, LLVMValueRef raw, bool bits16)
{
    ic__pg *G = X->G;
    const ic_stage *st = &G->k->stages[X->g->rs];
    int nl = G->nl, it = G->it;
    bool vec = G->vec;
    LLVMValueRef valid = G->valid, pvalid = G->pvalid;
    G->nl = 1, G->it = -1, G->vec = false, G->valid = NULL, G->pvalid = NULL;
    ic__lv *lv = &G->vals[x->ld];
    memset(lv, 0, sizeof *lv);
    lv->v[0] = raw;
    lv->uni = true;
    for (int i = 0; i < x->nch; i++)
        ic__pg_instr(G, X->g->rs, x->ch[i]);
    G->nl = nl, G->it = it, G->vec = vec, G->valid = valid, G->pvalid = pvalid;
    return G->vals[bits16 ? st->instr[x->val].a : x->val].v[0];
}

/* The global address of a 16-byte chunk of operand x starting at (o, k), E elements, at a
 * tile edge: *nbytes (i32) gets the bytes of it that exist (the elements left along the
 * contiguous dim, 0 when the other dim is out of range); a chunk with none reads from the
 * operand's origin, so that the address stays valid. */
LLVMValueRef ic__pgemm_edge_chunk(gctx *X, const ic__gop *x, int which, LLVMValueRef o, LLVMValueRef k, int E,
                                  LLVMValueRef *nbytes)
{
    ic__pg *G = X->G;
    LLVMValueRef avail, inr;
    if (x->kmajor) {
        avail = LLVMBuildSub(G->b, X->kend, k, "");
        inr = slt(G, o, I64(G, x->O));
    } else {
        avail = LLVMBuildSub(G->b, I64(G, x->O), o, "");
        inr = slt(G, k, X->kend);
    }
    avail = smax64(G, smin64(G, avail, I64(G, E)), I64(G, 0));
    avail = sel(G, inr, avail, I64(G, 0));
    LLVMValueRef ok = LLVMBuildICmp(G->b, LLVMIntSGT, avail, I64(G, 0), "");
    *nbytes = LLVMBuildTrunc(G->b, mul(G, avail, I64(G, x->es)), G->t_i32, "");
    return gaddr(X, x, which, sel(G, ok, o, I64(G, 0)), sel(G, ok, k, I64(G, 0)));
}

/* Copies tile k0.. of operand x into stage buffer `sbase` (i32 byte offset). */
static void load_operand(gctx *X, const ic__gop *x, int which, LLVMValueRef sbase, LLVMValueRef k0)
{
    ic__pg *G = X->G;
    const ic__pgemm *g = X->g;
    LLVMBuilderRef b = G->b;
    LLVMValueRef o0 = which == 0 ? X->m0 : X->n0;
    int threads = g->threads;
    /* o and k of shared (row, col) */
#define OK_OF(row, col, o, k)                                                                     \
    do {                                                                                          \
        LLVMValueRef r64_ = z64(G, row), c64_ = z64(G, col);                                      \
        o = add(G, o0, x->kmajor ? r64_ : c64_);                                                  \
        k = add(G, k0, x->kmajor ? c64_ : r64_);                                                  \
    } while (0)
    if (x->mode == LD_FAST16) {
        int E = 16 / x->es, cpr = x->C / E, total = x->R * cpr;
        for (int it = 0; it * threads < total; it++) {
            LLVMValueRef ci = add(G, X->tid, I32(G, (int64_t)it * threads));
            LLVMBasicBlockRef cont = (it + 1) * threads > total ? ic__pg_if(G, ult(G, ci, I32(G, total)), "chunk") : NULL;
            LLVMValueRef row = LLVMBuildUDiv(b, ci, I32(G, cpr), "");
            LLVMValueRef col = mul(G, LLVMBuildURem(b, ci, I32(G, cpr), ""), I32(G, E));
            LLVMValueRef o, k;
            OK_OF(row, col, o, k);
            LLVMValueRef dst = smem_ptr(X, add(G, sbase, tile_byte(X, x, row, col)));
            if (x->ofull && x->kfull) { /* whole tiles: plain 16-byte copies */
                LLVMValueRef kin = z64(G, x->kmajor ? col : row);
                cp_async(X, dst, gaddr_tile(X, x, which, add(G, o0, z64(G, x->kmajor ? row : col)), kin, k0), 16,
                         I32(G, 16));
                ic__pg_endif(G, cont);
                continue;
            }
            LLVMValueRef nbytes;
            LLVMValueRef src = ic__pgemm_edge_chunk(X, x, which, o, k, E, &nbytes);
            cp_async(X, dst, src, 16, nbytes);
            ic__pg_endif(G, cont);
        }
        return;
    }
    /* element by element; threads walk the dim that is contiguous in global memory */
    int total = x->R * x->C;
    bool rows_fast = x->kmajor ? x->so == 1 : x->sk == 1; /* global stride 1 along the rows' dim */
    for (int it = 0; it * threads < total; it++) {
        LLVMValueRef ei = add(G, X->tid, I32(G, (int64_t)it * threads));
        LLVMBasicBlockRef cont = (it + 1) * threads > total ? ic__pg_if(G, ult(G, ei, I32(G, total)), "elem") : NULL;
        LLVMValueRef row, col;
        if (rows_fast) {
            row = LLVMBuildURem(b, ei, I32(G, x->R), "");
            col = LLVMBuildUDiv(b, ei, I32(G, x->R), "");
        } else {
            row = LLVMBuildUDiv(b, ei, I32(G, x->C), "");
            col = LLVMBuildURem(b, ei, I32(G, x->C), "");
        }
        LLVMValueRef o, k;
        OK_OF(row, col, o, k);
        LLVMValueRef ok = and_(G, slt(G, o, I64(G, x->O)), slt(G, k, X->kend));
        LLVMValueRef src = gaddr(X, x, which, sel(G, ok, o, I64(G, 0)), sel(G, ok, k, I64(G, 0)));
        LLVMValueRef dst = smem_ptr(X, add(G, sbase, tile_byte(X, x, row, col)));
        if (x->mode == LD_ELEM4) {
            cp_async(X, dst, src, 4, sel(G, ok, I32(G, 4), I32(G, 0)));
        } else {
            LLVMTypeRef mt = ic__pg_mem_type(G, x->dt);
            LLVMValueRef v = LLVMBuildLoad2(b, mt, src, "");
            LLVMSetAlignment(v, (unsigned)ic_dtype_size(x->dt));
            if (g->tc) { /* 16-bit: raw, or the bits a fused producer's value is exact in */
                if (x->xform)
                    v = chain_value(X, x, v, true);
                v = sel(G, ok, v, LLVMConstInt(G->t_i16, 0, 0));
            } else {
                v = x->xform ? chain_value(X, x, v, false) : ic__pg_convert(G, v, x->dt, IC_F32);
                v = sel(G, ok, v, LLVMConstReal(G->t_f32, 0));
            }
            LLVMBuildStore(b, v, dst);
        }
        ic__pg_endif(G, cont);
    }
#undef OK_OF
}

static void load_stage(gctx *X, LLVMValueRef stage, LLVMValueRef kt)
{
    ic__pg *G = X->G;
    LLVMValueRef sbase = mul(G, stage, I32(G, X->g->stage_bytes));
    LLVMValueRef k0 = mul(G, kt, I64(G, X->g->BK));
    load_operand(X, &X->g->A, 0, sbase, k0);
    load_operand(X, &X->g->B, 1, sbase, k0);
}

/* ---- compute on one stage ---- */

static LLVMValueRef accv(gctx *X, int i) { return LLVMBuildLoad2(X->G->b, X->G->t_f32, X->acc[i], ""); }

/* The warp's MI x NI accumulator tiles += af[mi] * bfr[ni], whichever way the fragments were
 * loaded (ldmatrix or TF32 scalar loads). */
static void mma_tiles(gctx *X, int MI, int NI, LLVMValueRef (*af)[4], LLVMValueRef (*bfr)[2])
{
    for (int mi = 0; mi < MI; mi++)
        for (int ni = 0; ni < NI; ni++) {
            int a0 = (mi * NI + ni) * 4;
            LLVMValueRef c[4];
            for (int i = 0; i < 4; i++)
                c[i] = accv(X, a0 + i);
            mma(X, af[mi], bfr[ni], c);
            for (int i = 0; i < 4; i++)
                LLVMBuildStore(X->G->b, c[i], X->acc[a0 + i]);
        }
}

static void compute_tc(gctx *X, LLVMValueRef sbase, LLVMValueRef warp_m, LLVMValueRef warp_n, LLVMValueRef lane)
{
    ic__pg *G = X->G;
    const ic__pgemm *g = X->g;
    LLVMBuilderRef b = G->b;
    int WTM = g->BM / g->WM, WTN = g->BN / g->WN, MI = WTM / 16, NI = WTN / 8;
    LLVMValueRef q = LLVMBuildUDiv(b, lane, I32(G, 8), ""), r = LLVMBuildURem(b, lane, I32(G, 8), "");
    LLVMValueRef wm0 = mul(G, warp_m, I32(G, WTM)), wn0 = mul(G, warp_n, I32(G, WTN));
    for (int kk = 0; kk < g->BK / 16; kk++) {
        LLVMValueRef af[8][4], bfr[32][2];
        for (int mi = 0; mi < MI; mi++) {
            LLVMValueRef row, col;
            LLVMValueRef mbase = add(G, wm0, I32(G, mi * 16));
            if (g->A.kmajor) { /* rows m: lane%16, k: (lane/16)*8 */
                row = add(G, mbase, LLVMBuildURem(b, lane, I32(G, 16), ""));
                col = add(G, I32(G, kk * 16), mul(G, LLVMBuildUDiv(b, lane, I32(G, 16), ""), I32(G, 8)));
            } else { /* rows k: (q/2)*8 + r, m: (q%2)*8 */
                row = add(G, I32(G, kk * 16), add(G, mul(G, LLVMBuildUDiv(b, q, I32(G, 2), ""), I32(G, 8)), r));
                col = add(G, mbase, mul(G, LLVMBuildURem(b, q, I32(G, 2), ""), I32(G, 8)));
            }
            ldmatrix4(X, smem_ptr(X, add(G, sbase, tile_byte(X, &g->A, row, col))), !g->A.kmajor, af[mi]);
        }
        for (int ni = 0; ni < NI; ni += 2) {
            LLVMValueRef row, col, o[4];
            LLVMValueRef nbase = add(G, wn0, I32(G, ni * 8));
            if (g->B.kmajor) { /* rows n: (q/2)*8 + r, k: (q%2)*8 */
                row = add(G, nbase, add(G, mul(G, LLVMBuildUDiv(b, q, I32(G, 2), ""), I32(G, 8)), r));
                col = add(G, I32(G, kk * 16), mul(G, LLVMBuildURem(b, q, I32(G, 2), ""), I32(G, 8)));
            } else { /* rows k: (q%2)*8 + r, n: (q/2)*8 */
                row = add(G, I32(G, kk * 16), add(G, mul(G, LLVMBuildURem(b, q, I32(G, 2), ""), I32(G, 8)), r));
                col = add(G, nbase, mul(G, LLVMBuildUDiv(b, q, I32(G, 2), ""), I32(G, 8)));
            }
            ldmatrix4(X, smem_ptr(X, add(G, sbase, tile_byte(X, &g->B, row, col))), !g->B.kmajor, o);
            bfr[ni][0] = o[0];
            bfr[ni][1] = o[1];
            bfr[ni + 1][0] = o[2];
            bfr[ni + 1][1] = o[3];
        }
        mma_tiles(X, MI, NI, af, bfr);
    }
}

/* An f32 of shared memory rounded to TF32 (cvt.rna: to nearest, ties away from zero), in the
 * .b32 register an mma .tf32 operand takes. */
static LLVMValueRef cvt_tf32(ic__pg *G, LLVMValueRef v)
{
    if (G->emu) {
        LLVMTypeRef pt = G->t_f32;
        return ic__pg_ext(G, "ic__emu_cvt_tf32", G->t_i32, &pt, 1, &v);
    }
    return inline_asm(G, G->t_i32, "cvt.rna.tf32.f32 $0, $1;", "=r,f", &v, 1, false);
}

/* Element (o, k) of operand x's f32 tile in the stage at sbase, as a TF32 register. */
static LLVMValueRef frag_tf32(gctx *X, const ic__gop *x, LLVMValueRef sbase, LLVMValueRef o, LLVMValueRef k)
{
    ic__pg *G = X->G;
    LLVMValueRef at = x->kmajor ? tile_byte(X, x, o, k) : tile_byte(X, x, k, o);
    LLVMValueRef v = LLVMBuildLoad2(G->b, G->t_f32, smem_ptr(X, add(G, sbase, at)), "");
    LLVMSetAlignment(v, 4);
    return cvt_tf32(G, v);
}

/* TF32 on tensor cores: per k step of 8, each warp's (tile_m / warps_m) x (tile_n / warps_n)
 * outputs as mma m16n8k8 fragments. Lane l holds A(g, t), (g+8, t), (g, t+4), (g+8, t+4) and
 * B(t, g), (t+4, g) of its fragments (g = l/4, t = l%4), read one by one from the padded
 * tiles: the 32 lanes of a read hit 32 banks (pitch = 4 mod 32 words). */
static void compute_tf32(gctx *X, LLVMValueRef sbase, LLVMValueRef warp_m, LLVMValueRef warp_n, LLVMValueRef lane)
{
    ic__pg *G = X->G;
    const ic__pgemm *g = X->g;
    LLVMBuilderRef b = G->b;
    int WTM = g->BM / g->WM, WTN = g->BN / g->WN, MI = WTM / 16, NI = WTN / 8;
    LLVMValueRef gid = LLVMBuildUDiv(b, lane, I32(G, 4), ""), tig = LLVMBuildURem(b, lane, I32(G, 4), "");
    LLVMValueRef mw = add(G, mul(G, warp_m, I32(G, WTM)), gid), nw = add(G, mul(G, warp_n, I32(G, WTN)), gid);
    for (int kk = 0; kk < g->BK / 8; kk++) {
        LLVMValueRef af[16][4], bfr[32][2];
        LLVMValueRef k0 = add(G, tig, I32(G, kk * 8)), k1 = add(G, tig, I32(G, kk * 8 + 4));
        for (int mi = 0; mi < MI; mi++) {
            LLVMValueRef m0 = add(G, mw, I32(G, mi * 16)), m1 = add(G, mw, I32(G, mi * 16 + 8));
            af[mi][0] = frag_tf32(X, &g->A, sbase, m0, k0);
            af[mi][1] = frag_tf32(X, &g->A, sbase, m1, k0);
            af[mi][2] = frag_tf32(X, &g->A, sbase, m0, k1);
            af[mi][3] = frag_tf32(X, &g->A, sbase, m1, k1);
        }
        for (int ni = 0; ni < NI; ni++) {
            LLVMValueRef n = add(G, nw, I32(G, ni * 8));
            bfr[ni][0] = frag_tf32(X, &g->B, sbase, n, k0);
            bfr[ni][1] = frag_tf32(X, &g->B, sbase, n, k1);
        }
        mma_tiles(X, MI, NI, af, bfr);
    }
}

static LLVMValueRef fma_(ic__pg *G, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c)
{
    LLVMValueRef x[3] = { a, b, c };
    return ic__pg_call(G, "llvm.fma", &G->t_f32, 1, x, 3);
}

static void compute_ffma(gctx *X, LLVMValueRef sbase, LLVMValueRef tx, LLVMValueRef ty)
{
    ic__pg *G = X->G;
    const ic__pgemm *g = X->g;
    LLVMBuilderRef b = G->b;
    LLVMTypeRef v4 = LLVMVectorType(G->t_f32, 4);
    LLVMValueRef acc[64];
    for (int i = 0; i < 64; i++)
        acc[i] = accv(X, i);
    for (int kk = 0; kk < g->BK; kk++) {
        LLVMValueRef av[8], bv[8];
        for (int h = 0; h < 2; h++) {
            LLVMValueRef ca = add(G, mul(G, ty, I32(G, 4)), I32(G, h * g->BM / 2));
            LLVMValueRef cb = add(G, mul(G, tx, I32(G, 4)), I32(G, h * g->BN / 2));
            LLVMValueRef pa = smem_ptr(X, add(G, sbase, tile_byte(X, &g->A, I32(G, kk), ca)));
            LLVMValueRef pb = smem_ptr(X, add(G, sbase, tile_byte(X, &g->B, I32(G, kk), cb)));
            LLVMValueRef la = LLVMBuildLoad2(b, v4, pa, ""), lb = LLVMBuildLoad2(b, v4, pb, "");
            LLVMSetAlignment(la, 16);
            LLVMSetAlignment(lb, 16);
            for (int i = 0; i < 4; i++) {
                av[h * 4 + i] = LLVMBuildExtractElement(b, la, I32(G, i), "");
                bv[h * 4 + i] = LLVMBuildExtractElement(b, lb, I32(G, i), "");
            }
        }
        for (int i = 0; i < 8; i++)
            for (int j = 0; j < 8; j++)
                acc[i * 8 + j] = fma_(G, av[i], bv[j], acc[i * 8 + j]);
    }
    for (int i = 0; i < 64; i++)
        LLVMBuildStore(b, acc[i], X->acc[i]);
}

/* ---- epilogue ---- */

/* Runs the BODY stages for output row m (i64) and columns n .. n+nl-1 with accumulators v. */
static void epilogue_at(gctx *X, LLVMValueRef m, LLVMValueRef n, int nl, LLVMValueRef *v)
{
    ic__pg *G = X->G;
    const ic__pgemm *g = X->g;
    const ic_kernel *k = G->k;
    LLVMValueRef valid = and_(G, slt(G, m, I64(G, g->M)), slt(G, n, I64(G, g->N)));
    /* clamp so that the epilogue's loads stay in range on masked lanes */
    LLVMValueRef mc = smin64(G, m, I64(G, g->M - 1));
    LLVMValueRef nc = smin64(G, n, I64(G, g->N - nl));
    if (g->nmv > 0) {
        int64_t sizes[IC_MAX_RANK];
        for (int i = 0; i < g->nmv; i++)
            sizes[i] = k->outer[g->mv[i]];
        LLVMValueRef save[IC__PTX_NVARS];
        memcpy(save, G->var, sizeof save);
        ic__pg_decompose(G, mc, g->nmv, sizes, IC__PTX_NVARS - IC_MAX_RANK, g->M);
        LLVMValueRef got[IC_MAX_RANK];
        for (int i = 0; i < g->nmv; i++)
            got[i] = G->var[IC__PTX_NVARS - IC_MAX_RANK + i];
        memcpy(G->var, save, sizeof save);
        for (int i = 0; i < g->nmv; i++)
            G->var[g->mv[i]] = got[i];
    }
    if (g->nv >= 0)
        G->var[g->nv] = nc;
    G->nl = nl;
    G->vec = nl > 1;
    G->valid = NULL;
    G->pvalid = valid;
    G->it = -1;
    ic__lv *r = &G->accres[g->rs][g->ri];
    memset(r, 0, sizeof *r);
    for (int l = 0; l < nl; l++)
        r->v[l] = v[l];
    r->uni = nl == 1;
    for (int s = g->rs + 1; s < k->nstages; s++)
        ic__pg_emit_stage(G, s);
    G->pvalid = NULL;
}

/* The accumulator groups of this thread: row m, first column n, nl lanes. */
static void epilogue(gctx *X, LLVMValueRef tx, LLVMValueRef ty, LLVMValueRef warp_m, LLVMValueRef warp_n,
                     LLVMValueRef lane)
{
    ic__pg *G = X->G;
    const ic__pgemm *g = X->g;
    LLVMBuilderRef b = G->b;
    if (g->tc || g->tf32) { /* the mma accumulator layout */
        int WTM = g->BM / g->WM, WTN = g->BN / g->WN, MI = WTM / 16, NI = WTN / 8;
        LLVMValueRef gid = z64(G, LLVMBuildUDiv(b, lane, I32(G, 4), ""));
        LLVMValueRef tig = z64(G, LLVMBuildURem(b, lane, I32(G, 4), ""));
        LLVMValueRef mw = add(G, X->m0, z64(G, mul(G, warp_m, I32(G, WTM))));
        LLVMValueRef nw = add(G, X->n0, z64(G, mul(G, warp_n, I32(G, WTN))));
        for (int mi = 0; mi < MI; mi++)
            for (int ni = 0; ni < NI; ni++)
                for (int h = 0; h < 2; h++) {
                    LLVMValueRef m = add(G, mw, add(G, gid, I64(G, mi * 16 + h * 8)));
                    LLVMValueRef n = add(G, nw, add(G, mul(G, tig, I64(G, 2)), I64(G, ni * 8)));
                    int a0 = (mi * NI + ni) * 4 + h * 2;
                    LLVMValueRef v[2] = { accv(X, a0), accv(X, a0 + 1) };
                    if (g->N % 2 == 0) {
                        epilogue_at(X, m, n, 2, v);
                    } else {
                        epilogue_at(X, m, n, 1, &v[0]);
                        epilogue_at(X, m, add(G, n, I64(G, 1)), 1, &v[1]);
                    }
                }
        return;
    }
    int nl = g->N % 4 == 0 ? 4 : g->N % 2 == 0 ? 2 : 1;
    for (int hm = 0; hm < 2; hm++)
        for (int i = 0; i < 4; i++) {
            LLVMValueRef m = add(G, X->m0, z64(G, add(G, mul(G, ty, I32(G, 4)), I32(G, hm * g->BM / 2 + i))));
            for (int hn = 0; hn < 2; hn++) {
                LLVMValueRef n = add(G, X->n0, z64(G, add(G, mul(G, tx, I32(G, 4)), I32(G, hn * g->BN / 2))));
                for (int j = 0; j < 4; j += nl) {
                    LLVMValueRef v[4];
                    for (int l = 0; l < nl; l++)
                        v[l] = accv(X, (hm * 4 + i) * 8 + hn * 4 + j + l);
                    epilogue_at(X, m, add(G, n, I64(G, j)), nl, v);
                }
            }
        }
}

void ic__pgemm_staged_loop(gctx *X, LLVMValueRef tile, LLVMValueRef ctid, int nthreads)
{
    ic__pg *G = X->G;
    const ic__pgemm *g = X->g;
    LLVMBuilderRef b = G->b;
    int pitch = g->BN + IC__STAGED_PAD, half = g->BN / 2;
    LLVMTypeRef v2 = LLVMVectorType(G->t_f32, 2);
    ic__pg_loop L;
    LLVMValueRef it = ic__pg_loop_begin(G, &L, I64(G, 0), LLVMIntSLT, I64(G, (int64_t)g->BM * half / nthreads),
                                        (const char *const[]){ "epilogue", "epibody", "epidone" });
    LLVMValueRef p = add(G, ctid, mul(G, LLVMBuildTrunc(b, it, G->t_i32, ""), I32(G, nthreads)));
    LLVMValueRef r = LLVMBuildUDiv(b, p, I32(G, half), "");
    LLVMValueRef c = mul(G, LLVMBuildURem(b, p, I32(G, half), ""), I32(G, 2));
    LLVMValueRef at = add(G, tile, mul(G, add(G, mul(G, r, I32(G, pitch)), c), I32(G, 4)));
    LLVMValueRef pair = LLVMBuildLoad2(b, v2, smem_ptr(X, at), "");
    LLVMSetAlignment(pair, 8);
    LLVMValueRef v[2] = { LLVMBuildExtractElement(b, pair, I32(G, 0), ""), LLVMBuildExtractElement(b, pair, I32(G, 1), "") };
    LLVMValueRef m = add(G, X->m0, z64(G, r)), n = add(G, X->n0, z64(G, c));
    if (g->N % 2 == 0) {
        epilogue_at(X, m, n, 2, v);
    } else {
        epilogue_at(X, m, n, 1, &v[0]);
        epilogue_at(X, m, add(G, n, I64(G, 1)), 1, &v[1]);
    }
    ic__pg_loop_end(G, &L, it, I64(G, 1));
}

/* Accumulators a and a + 1 as one 8-byte store at byte off of p0. */
static void stage_pair(gctx *X, LLVMValueRef p0, int64_t off, int a)
{
    ic__pg *G = X->G;
    LLVMBuilderRef b = G->b;
    LLVMValueRef v = LLVMGetUndef(LLVMVectorType(G->t_f32, 2)), o = I64(G, off);
    v = LLVMBuildInsertElement(b, v, accv(X, a), I32(G, 0), "");
    v = LLVMBuildInsertElement(b, v, accv(X, a + 1), I32(G, 1), "");
    LLVMSetAlignment(LLVMBuildStore(b, v, LLVMBuildGEP2(b, G->t_i8, p0, &o, 1, "")), 8);
}

/* The epilogue through shared memory (g->staged): every thread writes its accumulators into
 * the f32 tile over the stages (constant offsets from one pointer: address arithmetic per
 * store makes LLVM's NVPTX reassociation pass quadratic), then the block walks the tile in
 * one loop (ic__pgemm_staged_loop), whose global stores coalesce. */
static void epilogue_staged(gctx *X, LLVMValueRef tx, LLVMValueRef ty, LLVMValueRef warp_m, LLVMValueRef warp_n,
                            LLVMValueRef lane)
{
    ic__pg *G = X->G;
    const ic__pgemm *g = X->g;
    LLVMBuilderRef b = G->b;
    int pitch = g->BN + IC__STAGED_PAD;
    ic__pg_barrier(G); /* no warp still reads a stage */
    LLVMValueRef row0, col0;
    if (g->tc || g->tf32) { /* the mma accumulator layout, as epilogue() walks it */
        int WTM = g->BM / g->WM, WTN = g->BN / g->WN;
        row0 = add(G, mul(G, warp_m, I32(G, WTM)), LLVMBuildUDiv(b, lane, I32(G, 4), ""));
        col0 = add(G, mul(G, warp_n, I32(G, WTN)), mul(G, LLVMBuildURem(b, lane, I32(G, 4), ""), I32(G, 2)));
    } else {
        row0 = mul(G, ty, I32(G, 4));
        col0 = mul(G, tx, I32(G, 4));
    }
    LLVMValueRef p0 = smem_ptr(X, mul(G, add(G, mul(G, row0, I32(G, pitch)), col0), I32(G, 4)));
    if (g->tc || g->tf32) {
        int MI = g->BM / g->WM / 16, NI = g->BN / g->WN / 8;
        for (int mi = 0; mi < MI; mi++)
            for (int ni = 0; ni < NI; ni++)
                for (int h = 0; h < 2; h++)
                    stage_pair(X, p0, 4 * ((int64_t)(mi * 16 + h * 8) * pitch + ni * 8), (mi * NI + ni) * 4 + h * 2);
    } else {
        for (int hm = 0; hm < 2; hm++)
            for (int i = 0; i < 4; i++)
                for (int hn = 0; hn < 2; hn++)
                    for (int j = 0; j < 4; j += 2)
                        stage_pair(X, p0, 4 * ((int64_t)(hm * g->BM / 2 + i) * pitch + hn * g->BN / 2 + j),
                                   (hm * 4 + i) * 8 + hn * 4 + j);
    }
    ic__pg_barrier(G);
    ic__pgemm_staged_loop(X, I32(G, 0), X->tid, g->threads);
}

/* ---- split-k: the last block of a tile sums the partials ---- */

static void split_k_combine(gctx *X, LLVMValueRef tile, LLVMValueRef split)
{
    ic__pg *G = X->G;
    const ic__pgemm *g = X->g;
    LLVMBuilderRef b = G->b;
    int64_t per = (int64_t)g->nacc * g->threads; /* floats a block writes */
    LLVMValueRef ws = ic__pg_module_array(G, "ws", G->t_f32, g->ntiles * g->SK * per);
    LLVMValueRef cnt = ic__pg_module_array(G, "cnt", G->t_i32, g->ntiles);
    LLVMValueRef tid64 = z64(G, X->tid);
    LLVMValueRef mine = add(G, mul(G, add(G, mul(G, tile, I64(G, g->SK)), split), I64(G, per)), tid64);
    for (int i = 0; i < g->nacc; i++) {
        LLVMValueRef ix = add(G, mine, I64(G, (int64_t)i * g->threads));
        LLVMSetVolatile(LLVMBuildStore(b, accv(X, i), LLVMBuildGEP2(b, G->t_f32, ws, &ix, 1, "")), 1);
    }
    ic__pg_fence(G);
    ic__pg_barrier(G);
    LLVMValueRef zero = I64(G, 0);
    LLVMValueRef ct[2] = { zero, tile };
    LLVMValueRef pcnt = LLVMBuildGEP2(b, LLVMGlobalGetValueType(cnt), cnt, ct, 2, "");
    LLVMValueRef pflag = smem_ptr(X, I32(G, g->flag_off));
    LLVMBasicBlockRef cont = ic__pg_if(G, LLVMBuildICmp(b, LLVMIntEQ, X->tid, I32(G, 0), ""), "count");
    LLVMValueRef old = LLVMBuildAtomicRMW(b, LLVMAtomicRMWBinOpAdd, pcnt, I32(G, 1), LLVMAtomicOrderingMonotonic, 0);
    LLVMBuildStore(b, LLVMBuildZExt(b, LLVMBuildICmp(b, LLVMIntEQ, old, I32(G, g->SK - 1), ""), G->t_i32, ""), pflag);
    ic__pg_endif(G, cont);
    ic__pg_barrier(G);
    LLVMValueRef last = LLVMBuildICmp(b, LLVMIntNE, LLVMBuildLoad2(b, G->t_i32, pflag, ""), I32(G, 0), "");
    ic__pg_last_block(G, last, "lasttile", "partial");
    for (int i = 0; i < g->nacc; i++)
        LLVMBuildStore(b, LLVMConstReal(G->t_f32, 0), X->acc[i]);
    /* for (s = 0; s < SK; s++) acc += ws[tile, s] */
    ic__pg_loop L;
    LLVMValueRef s = ic__pg_loop_begin(G, &L, zero, LLVMIntSLT, I64(G, g->SK),
                                       (const char *const[]){ "sum", "sumbody", "summed" });
    LLVMValueRef base = add(G, mul(G, add(G, mul(G, tile, I64(G, g->SK)), s), I64(G, per)), tid64);
    for (int i = 0; i < g->nacc; i++) {
        LLVMValueRef ix = add(G, base, I64(G, (int64_t)i * g->threads));
        LLVMValueRef v = LLVMBuildLoad2(b, G->t_f32, LLVMBuildGEP2(b, G->t_f32, ws, &ix, 1, ""), "");
        LLVMSetVolatile(v, 1);
        LLVMBuildStore(b, LLVMBuildFAdd(b, accv(X, i), v, ""), X->acc[i]);
    }
    ic__pg_loop_end(G, &L, s, I64(G, 1));
    cont = ic__pg_if(G, LLVMBuildICmp(b, LLVMIntEQ, X->tid, I32(G, 0), ""), "reset");
    LLVMBuildStore(b, I32(G, 0), pcnt);
    ic__pg_endif(G, cont);
}

/* ---- shared memory ---- */

static LLVMValueRef dynamic_smem(ic__pg *G, int bytes)
{
    if (G->emu) { /* blocks run one at a time: a plain array of the module, aligned as
                   * wgmma's 128B-swizzled stages need */
        char name[300];
        snprintf(name, sizeof name, "%s_smem", LLVMGetValueName(G->fn));
        LLVMTypeRef at = LLVMArrayType2(G->t_i8, (uint64_t)bytes);
        LLVMValueRef gv = LLVMAddGlobal(G->mod, at, name);
        LLVMSetLinkage(gv, LLVMInternalLinkage);
        LLVMSetInitializer(gv, LLVMConstNull(at));
        LLVMSetAlignment(gv, 1024);
        return gv;
    }
    LLVMValueRef gv = LLVMGetNamedGlobal(G->mod, "ic_dyn_smem");
    if (!gv) {
        gv = LLVMAddGlobalInAddressSpace(G->mod, LLVMArrayType2(G->t_i8, 0), "ic_dyn_smem", 3);
        LLVMSetLinkage(gv, LLVMExternalLinkage);
        LLVMSetAlignment(gv, 16);
    }
    return gv;
}

/* ---- shared with wgmma.c ---- */

LLVMValueRef ic__pgemm_block_setup(gctx *X, LLVMValueRef *split_out)
{
    ic__pg *G = X->G;
    const ic__pgemm *g = X->g;
    LLVMBuilderRef b = G->b;
    /* block -> (batch, tile m, tile n, split); tiles grouped 8 along m for L2 reuse */
    LLVMValueRef bid = z64(G, G->bid);
    LLVMValueRef split = LLVMBuildURem(b, bid, I64(G, g->SK), "");
    LLVMValueRef rest = LLVMBuildUDiv(b, bid, I64(G, g->SK), "");
    LLVMValueRef tile = rest;
    int64_t per_batch = g->tm * g->tn;
    LLVMValueRef batch = LLVMBuildUDiv(b, rest, I64(G, per_batch), "");
    LLVMValueRef t = LLVMBuildURem(b, rest, I64(G, per_batch), "");
    int64_t GM = 8;
    LLVMValueRef grp = LLVMBuildUDiv(b, t, I64(G, GM * g->tn), "");
    LLVMValueRef first = mul(G, grp, I64(G, GM));
    LLVMValueRef gsz = smin64(G, LLVMBuildSub(b, I64(G, g->tm), first, ""), I64(G, GM));
    LLVMValueRef within = LLVMBuildURem(b, t, I64(G, GM * g->tn), "");
    LLVMValueRef tmi = add(G, first, LLVMBuildURem(b, within, gsz, ""));
    LLVMValueRef tni = LLVMBuildUDiv(b, within, gsz, "");
    X->m0 = mul(G, tmi, I64(G, g->BM));
    X->n0 = mul(G, tni, I64(G, g->BN));
    /* batch variables, and the batch part of each operand's offset */
    for (int v = 0; v < IC__PTX_NVARS; v++)
        G->var[v] = I64(G, 0);
    int64_t bsz[IC_MAX_RANK];
    for (int i = 0; i < g->nbv; i++)
        bsz[i] = G->k->outer[g->bv[i]];
    if (g->nbv > 0) {
        ic__pg_decompose(G, batch, g->nbv, bsz, IC__PTX_NVARS - IC_MAX_RANK, g->Bt);
        LLVMValueRef got[IC_MAX_RANK];
        for (int i = 0; i < g->nbv; i++)
            got[i] = G->var[IC__PTX_NVARS - IC_MAX_RANK + i];
        for (int v = 0; v < IC__PTX_NVARS; v++)
            G->var[v] = I64(G, 0);
        for (int i = 0; i < g->nbv; i++)
            G->var[g->bv[i]] = got[i];
    }
    X->bbase[0] = I64(G, g->A.c0);
    X->bbase[1] = I64(G, g->B.c0);
    for (int i = 0; i < g->nbv; i++) {
        X->bbase[0] = add(G, X->bbase[0], mul(G, G->var[g->bv[i]], I64(G, g->A.cb[i])));
        X->bbase[1] = add(G, X->bbase[1], mul(G, G->var[g->bv[i]], I64(G, g->B.cb[i])));
    }
    X->kbeg = mul(G, split, I64(G, g->kchunk));
    X->kend = smin64(G, add(G, X->kbeg, I64(G, g->kchunk)), I64(G, g->K));
    *split_out = split;
    return tile;
}

LLVMValueRef ic__pgemm_asm(ic__pg *G, LLVMTypeRef ret, const char *text, const char *cons,
                           LLVMValueRef *args, int n, bool side)
{
    return inline_asm(G, ret, text, cons, args, n, side);
}

LLVMValueRef ic__pgemm_smem_ptr(gctx *X, LLVMValueRef byte) { return smem_ptr(X, byte); }
LLVMValueRef ic__pgemm_smem_u32(ic__pg *G, LLVMValueRef p) { return smem_u32(G, p); }
LLVMValueRef ic__pgemm_dynamic_smem(ic__pg *G, int bytes) { return dynamic_smem(G, bytes); }

void ic__pgemm_epilogue_at(gctx *X, LLVMValueRef m, LLVMValueRef n, int nl, LLVMValueRef *v)
{
    epilogue_at(X, m, n, nl, v);
}

/* ---- the kernel ---- */

void ic__pgen_gemm(ic__pg *G)
{
    const ic__pgemm *g = G->pl->gemm;
    if (g->wg) {
        G->arch_specific = true;
        ic__pgen_wgmma(G);
        return;
    }
    LLVMBuilderRef b = G->b;
    gctx X;
    memset(&X, 0, sizeof X);
    X.G = G;
    X.g = g;
    X.smem = dynamic_smem(G, g->smem + 16);
    X.tid = G->tid;
    /* two blocks an SM: the register budget that leaves (ptxas caps the kernel at 128 a
     * thread for 256 threads) keeps a block's loads in flight while the other computes */
    if (!G->emu && g->threads * 2 <= 1024 && g->nacc <= 64)
        ic__pg_annotate(G, "minctasm", 2);
    LLVMValueRef accs[128];
    X.acc = accs;
    for (int i = 0; i < g->nacc; i++) {
        accs[i] = ic__pg_alloca(G, G->t_f32);
        LLVMBuildStore(b, LLVMConstReal(G->t_f32, 0), accs[i]);
    }
    LLVMValueRef split;
    LLVMValueRef tile = ic__pgemm_block_setup(&X, &split);
    /* tiles of this block: kt_begin .. kt_begin + nkt */
    LLVMValueRef ktb = LLVMBuildUDiv(b, X.kbeg, I64(G, g->BK), "");
    LLVMValueRef nkt = LLVMBuildSDiv(b, add(G, LLVMBuildSub(b, X.kend, X.kbeg, ""), I64(G, g->BK - 1)), I64(G, g->BK), "");
    nkt = smax64(G, nkt, I64(G, 0));
    LLVMValueRef warp = LLVMBuildUDiv(b, X.tid, I32(G, 32), ""), lane = LLVMBuildURem(b, X.tid, I32(G, 32), "");
    LLVMValueRef warp_m = NULL, warp_n = NULL, tx = NULL, ty = NULL;
    if (g->tc || g->tf32) {
        warp_m = LLVMBuildUDiv(b, warp, I32(G, g->WN), "");
        warp_n = LLVMBuildURem(b, warp, I32(G, g->WN), "");
    } else {
        tx = LLVMBuildURem(b, X.tid, I32(G, g->BN / 8), "");
        ty = LLVMBuildUDiv(b, X.tid, I32(G, g->BN / 8), "");
    }
    /* prologue: stages 0 .. ST-2 */
    for (int s = 0; s < g->ST - 1; s++) {
        LLVMBasicBlockRef cont = ic__pg_if(G, slt(G, I64(G, s), nkt), "pro");
        load_stage(&X, I32(G, s), add(G, ktb, I64(G, s)));
        ic__pg_endif(G, cont);
        cp_commit(&X);
    }
    /* main loop */
    ic__pg_loop L;
    LLVMValueRef i = ic__pg_loop_begin(G, &L, I64(G, 0), LLVMIntSLT, nkt,
                                       (const char *const[]){ "kloop", "kbody", "kdone" });
    cp_wait(&X, g->ST - 2);
    ic__pg_barrier(G);
    LLVMValueRef pf = add(G, i, I64(G, g->ST - 1));
    LLVMBasicBlockRef cont = ic__pg_if(G, slt(G, pf, nkt), "prefetch");
    load_stage(&X, LLVMBuildTrunc(b, LLVMBuildURem(b, pf, I64(G, g->ST), ""), G->t_i32, ""), add(G, ktb, pf));
    ic__pg_endif(G, cont);
    cp_commit(&X);
    LLVMValueRef sbase = mul(G, LLVMBuildTrunc(b, LLVMBuildURem(b, i, I64(G, g->ST), ""), G->t_i32, ""),
                             I32(G, g->stage_bytes));
    if (g->tc)
        compute_tc(&X, sbase, warp_m, warp_n, lane);
    else if (g->tf32)
        compute_tf32(&X, sbase, warp_m, warp_n, lane);
    else
        compute_ffma(&X, sbase, tx, ty);
    ic__pg_loop_end(G, &L, i, I64(G, 1));
    cp_wait(&X, 0);
    if (g->SK > 1)
        split_k_combine(&X, tile, split);
    if (g->staged)
        epilogue_staged(&X, tx, ty, warp_m, warp_n, lane);
    else
        epilogue(&X, tx, ty, warp_m, warp_n, lane);
}
