/* gemm-impl.h - the GEMM path of LLVMGen: contraction kernels recognised in the loop IR
 * (gemm.c) and generated as packed, register-blocked, cache-blocked GEMMs whose epilogue (the
 * kernel's later stages) is applied to each accumulator tile as it is stored (gemm_emit.c). */
#ifndef IC_GEMM_IMPL_H
#define IC_GEMM_IMPL_H

#include "llvmgen-impl.h"

/* One operand of C[r, c] = sum_k X[r, k] * Y[k, c]: element (i, k) of the row operand (or
 * (k, j) of the column operand) is at c0 + s_i * i + s_k * k + sum_d sb[d] * batch_d. */
typedef struct ic__gemm_opnd {
    int buf;                      /* program buffer */
    ic_dtype dt;                  /* in memory: F32, F16 or BF16 (converted to f32) */
    int64_t c0, s_i, s_k;
    int64_t sb[IC_MAX_RANK];      /* per batch dim (ic__gemm.bvar) */
    bool batched;                 /* some sb[d] != 0 */
    int expr;                     /* -1: the offset is affine (c0, s_i, s_k, sb). Else the rows
                                   * operand's offset is not (a view like permute + reshape
                                   * folded into div/mod index math): the stage-0 instruction
                                   * computing it, evaluated per element while packing */
    int val, ld;                  /* stage-0 instructions: the f32 value multiplied, its LOAD */
    bool xform;                   /* a producer fused into the operand (a cast, a scale: more
                                   * than the conversion of dt to f32) lies between them: the
                                   * packing runs its instructions on each element it loads */
} ic__gemm_opnd;

/* A recognised contraction and how it is generated (all sizes are compile-time constants). */
typedef struct ic__gemm {
    int red;                      /* the REDUCE of stage 0 that the epilogue ACCs read */
    int rowvar, colvar;           /* outer loop var of C's rows / columns; -1 = size 1 */
    int64_t M, N, K;              /* rows, columns, depth of one product */
    int nb;                       /* batch dims: the other outer vars, outermost first */
    int bvar[IC_MAX_RANK];
    int64_t bdim[IC_MAX_RANK];
    int64_t batch;                /* product of bdim */
    ic__gemm_opnd x, y;           /* rows operand (M x K) and columns operand (K x N) */
    bool swapped;                 /* rows are the graph's n (skinny N: vectors along m) */
    /* the plan */
    ic_gemm_params p;             /* resolved: every field set */
    int vl, nv;                   /* lanes per vector; vectors per tile row (nr = nv * vl) */
    int64_t kc, npc;              /* depth per pass and passes over K */
    int64_t pm, pn;               /* row panels (of mr) per batch, column panels (of nr) */
    bool pack_a;                  /* copy X into panels (else read in place) */
    bool bf16_dot;                /* X and Y packed as bf16 pairs (k, k+1), vdpbf16ps */
    int esize;                    /* bytes of a packed element: 4 (f32) or 2 (bf16 pairs) */
    int64_t kp;                   /* K padded to what a packed panel holds (even for pairs) */
    const void *prepacked;        /* freezing: Y packed at compile time (owned, NULL if not) */
    int64_t prepacked_bytes;
    int64_t ldt;                  /* row stride of the accumulator tile store (floats) */
    int64_t a_floats, b_floats, t_floats, slot_bytes; /* per-thread scratch */
    int tmax;                     /* scratch slots = most threads a run uses */
    int64_t shared_bytes;         /* B block the team packs together (row split), 0 = none */
} ic__gemm;

/* Recognises kernel g->k as a contraction and plans it with g->p->gemm (packing constant
 * operands when freezing); false when it is not one or the GEMM path is disabled. */
IC_HIDDEN bool ic__gemm_match(ic__cg *g, ic__gemm *m);
/* Pure recognition (no plan): shared by ic_kernel_is_gemm and ic_gemm_params_default. */
IC_HIDDEN bool ic__gemm_recognise(const ic_kernel *k, const ic_buffer *bufs, int nbufs,
                                  ic__gemm *m);
/* need[i] for the instructions of stage st that the value of instruction root depends on
 * (root included); false if one of them is a REDUCE, ACC or STORE (no plain expression). */
IC_HIDDEN bool ic__gemm_expr_mark(const ic_stage *st, int root, bool *need);
/* need[i] for the instructions between operand o's LOAD and its value (constants included,
 * the LOAD and its offset not): what the packing emits on each loaded element. */
IC_HIDDEN void ic__gemm_chain_mark(const ic_stage *st, const ic__gemm_opnd *o, bool *need);
/* Generates kernel g->k (matched as m) as the exported function g->sym. */
IC_HIDDEN ic_status ic__gemm_emit(ic__cg *g, ic__gemm *m);
/* Frees what a plan owns (the prepacked panels). */
IC_HIDDEN void ic__gemm_release(ic__cg *g, ic__gemm *m);

/* The hook of gen.c's kernel dispatch: generates g->k through the GEMM path when it is a
 * contraction (*done = true), else leaves it to the loop nests. */
IC_HIDDEN ic_status ic__gemm_try(ic__cg *g, bool *done);

#endif
