/* pgemm-impl.h - what gemm.c (tiled GEMMs: mma.sync, FFMA) shares with wgmma.c (Hopper
 * warpgroup GEMMs): the recognised contraction, its operands, and the code-generation context. */
#ifndef IC_PGEMM_IMPL_H
#define IC_PGEMM_IMPL_H

#include "ptx-impl.h"

enum { LD_FAST16, LD_ELEM4, LD_GENERIC };

#define IC__GEMM_MAXCHAIN 16      /* instructions of a producer fused into an operand */

typedef struct {
    int buf;
    ic_dtype dt;                  /* buffer dtype */
    int64_t c0, so, sk;           /* offset = c0 + batch + so * o + sk * k */
    int64_t cb[IC_MAX_RANK];      /* batch coefficients, per batch dim */
    int64_t O;                    /* extent of o (M or N) */
    bool kmajor;                  /* shared tile rows are o (k contiguous) */
    bool ofull, kfull;            /* every tile is whole along o / along k: no edge checks */
    int mode;                     /* LD_* */
    int R, C;                     /* shared tile: R rows of C elements */
    int pitch;                    /* bytes per row */
    int es;                       /* element bytes in shared memory */
    int off;                      /* byte offset in a stage */
    /* (gemm.c) the value multiplied, instruction val of the REDUCE stage, computed from the
     * LOAD ld through the chain ch[0..nch-1] (ascending, constants included): a pointwise
     * producer fused into the operand (a cast, a scale). xform: more than the conversion of
     * the loaded dtype to f32, so elements are loaded one by one and run through the chain on
     * their way to shared memory (LD_GENERIC). vt: the dtype the value is exact in (f16/bf16
     * after a cast to it, which keeps such operands on the tensor cores) */
    int val, ld, nch, ch[IC__GEMM_MAXCHAIN];
    bool xform;
    ic_dtype vt;
    bool gather;                  /* (iconv.c) B of an implicit-GEMM conv: read from x through
                                   * the conv's im2col index math, never from memory as [K, N] */
    bool elems;                   /* (iconv.c) wgmma with B.gather: rows not 16-byte aligned
                                   * (a 7x7 stem's weight, K = 147), loaded element by element */
} ic__gop;

/* An implicit-GEMM convolution (iconv.c): operand B[img, k, j] of the GEMM is im2col(x), k =
 * (c, kh, kw) and j = (oh, ow) row-major, x [img, C, H, W] contiguous; zero outside x. */
#define ICONV_MAXOPS 4
typedef struct ic__iconv {
    int producer, gemm;           /* kernel indices: the im2col copy and the GEMM reading it */
    int xbuf, tbuf;               /* x, and the im2col buffer the GEMM would have read */
    ic_dtype xdt;
    int nop;                      /* ops the copy applies to x's values (a relu fused into it):
                                   * op[i] (MAX, MIN) with constant c[i], first operand if cfirst */
    int op[ICONV_MAXOPS];
    double c[ICONV_MAXOPS];
    bool cfirst[ICONV_MAXOPS];
    int64_t nimg, C, H, W, KH, KW, OH, OW, sh, sw, dh, dw, ph, pw;
} ic__iconv;

typedef struct ic__pgemm {
    int rs, ri;                   /* the REDUCE stage and instruction */
    bool tc;                      /* tensor cores; else FFMA */
    bool tc_conv;                 /* (gemm.c) f16/bf16 values made by a producer fused into an
                                   * operand: tensor cores, but mma.sync with converting loads */
    bool tf32;                    /* (gemm.c) f32 on tensor cores: mma.sync m16n8k8 .tf32, only
                                   * with ic_ptx_options.allow_tf32 (FFMA otherwise) */
    bool bf16;
    int nmv, mv[IC_MAX_RANK];     /* loop variables merged into m, outer to inner */
    int nv;                       /* n's loop variable, -1: N == 1 */
    int nbv, bv[IC_MAX_RANK];     /* batch loop variables */
    int64_t M, N, K, Bt;
    ic__gop A, B;
    int BM, BN, BK, WM, WN, ST, SK, threads;
    int64_t tm, tn, ntiles, kchunk; /* tiles along m and n, tiles in all, k per split */
    int stage_bytes, smem, flag_off;
    int nacc;                     /* accumulators per thread */
    bool wg;                      /* Hopper warpgroup MMAs (wgmma.c) */
    int wgc;                      /* wgmma: consumer warpgroups, 64 rows of the tile each */
    int bar_off;                  /* wgmma: byte offset of the mbarriers (full[ST], empty[ST]) */
    ic__iconv cv;                 /* B.gather: the convolution */
    bool staged;                  /* the epilogue runs from the f32 tile written to shared memory
                                   * over the stages, as one loop body (ic__pgemm_staged_loop) */
} ic__pgemm;

typedef struct {
    ic__pg *G;
    const ic__pgemm *g;
    LLVMValueRef smem;            /* base of the dynamic shared memory (i8) */
    LLVMValueRef tid;             /* i32 */
    LLVMValueRef bbase[2];        /* i64 batch part of A's and B's offsets */
    LLVMValueRef m0, n0;          /* i64 tile origin */
    LLVMValueRef kbeg, kend;      /* i64 this block's k range */
    LLVMValueRef *acc;            /* [nacc] f32 allocas */
} ic__gctx;

/* gemm.c, for wgmma.c */
IC_HIDDEN LLVMValueRef ic__pgemm_asm(ic__pg *G, LLVMTypeRef ret, const char *text, const char *cons,
                                     LLVMValueRef *args, int n, bool side);
IC_HIDDEN LLVMValueRef ic__pgemm_smem_ptr(ic__gctx *X, LLVMValueRef byte);
IC_HIDDEN LLVMValueRef ic__pgemm_smem_u32(ic__pg *G, LLVMValueRef p);
/* The kernel's dynamic shared memory of `bytes` (a module array in the emulator). */
IC_HIDDEN LLVMValueRef ic__pgemm_dynamic_smem(ic__pg *G, int bytes);
/* cp.async of `bytes` (16 or 4) from global src to shared dst, of which srcbytes (i32) are
 * read and the rest zero-filled; commit_group; wait_group n (the emulator copies at once). */
IC_HIDDEN void ic__pgemm_cp_async(ic__pg *G, LLVMValueRef dst, LLVMValueRef src, int bytes, LLVMValueRef srcbytes);
IC_HIDDEN void ic__pgemm_cp_commit(ic__pg *G);
IC_HIDDEN void ic__pgemm_cp_wait(ic__pg *G, int n);
/* ldmatrix.x4 (.trans) of the shared pointer p into out[0..3]. */
IC_HIDDEN void ic__pgemm_ldmatrix4(ic__pg *G, LLVMValueRef p, bool trans, LLVMValueRef out[4]);
/* c[0..3] += A * B as mma.sync m16n8k16 (kind 0: f16, 1: bf16) or m16n8k8 (2: tf32). */
IC_HIDDEN void ic__pgemm_mma(ic__pg *G, int kind, LLVMValueRef a[4], LLVMValueRef b[2], LLVMValueRef c[4]);
/* The block's tile origin (X->m0, n0), batch offsets (bbase) and k range (kbeg, kend) for
 * block index bid; returns the tile index. */
IC_HIDDEN LLVMValueRef ic__pgemm_block_setup(ic__gctx *X, LLVMValueRef *split);
/* The global address of the 16-byte chunk (E elements) of operand x at (o, k) on a tile edge,
 * with in *nbytes the bytes of it that exist (cp.async zero-fills the rest). */
IC_HIDDEN LLVMValueRef ic__pgemm_edge_chunk(ic__gctx *X, const ic__gop *x, int which, LLVMValueRef o,
                                            LLVMValueRef k, int E, LLVMValueRef *nbytes);
/* Runs the BODY stages for output row m and columns n .. n+nl-1 holding accumulators v. */
IC_HIDDEN void ic__pgemm_epilogue_at(ic__gctx *X, LLVMValueRef m, LLVMValueRef n, int nl, LLVMValueRef *v);

/* iconv.c: the (producer, GEMM) kernel pairs of ks that are an im2col copy feeding a GEMM's
 * B operand with nothing else reading the copy; returns how many were written to out[nk]. */
IC_HIDDEN int ic__iconv_find(int nk, const ic_kernel *ks, int nbufs, const ic_buffer *bufs, ic__iconv *out);
/* g's B operand is the im2col buffer of cv, read as [img, K, N] contiguous. */
IC_HIDDEN bool ic__iconv_fits(const struct ic__pgemm *g, const ic__iconv *cv);
/* The 8 elements B[img, k, j .. j+7] of the gather operand as <4 x i32> (16 bytes, zeros
 * outside x or past K and N). */
IC_HIDDEN LLVMValueRef ic__iconv_chunk(ic__gctx *X, LLVMValueRef j, LLVMValueRef k);

/* The same for a plain operand x (x->elems) at (o, k): 8 elements along its contiguous dim. */
IC_HIDDEN LLVMValueRef ic__iconv_elems(ic__gctx *X, const ic__gop *x, int which, LLVMValueRef o, LLVMValueRef k);
/* Row pitch in floats of the staged f32 tile: 8 more than BN, so that the 8 rows a warp's
 * accumulator layout writes at once fall on different banks. */
#define IC__STAGED_PAD 8
/* The staged epilogue's loop: nthreads threads (ctid: this one, i32) walk the BM x BN f32 tile
 * at byte `tile` (i32) of the dynamic shared memory in pairs of columns, consecutive threads
 * on consecutive pairs, and run the BODY stages on each. The tile is written and a barrier
 * passed before. */
IC_HIDDEN void ic__pgemm_staged_loop(ic__gctx *X, LLVMValueRef tile, LLVMValueRef ctid, int nthreads);

/* wgmma.c: plans g for warpgroup MMAs when the device and operands allow (g->wg set, its
 * tiles, stages and shared layout filled); false leaves g alone. */
IC_HIDDEN bool ic__wgmma_plan(const ic_ptx_params *in, int sm, int nsms, ic__pgemm *g);
IC_HIDDEN void ic__pgen_wgmma(ic__pg *G);

#endif
