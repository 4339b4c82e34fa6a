/* ptx-impl.h - private structures of the PTX layer: the per-kernel plan (plan.c: index
 * analysis, mapping and launch geometry), the generator state shared by gen.c (kernel
 * skeletons), instr.c (loop-IR instructions over vector lanes) and math.c (exp log sin ... as
 * internal functions), and the module (module.c: NVPTX target, O3, PTX emission). */
#ifndef IC_PTX_IMPL_H
#define IC_PTX_IMPL_H

#include <llvm-c/Core.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include "graph-impl.h"
#include "ic/ptx.h"

#define IC__PTX_MAXV 8                    /* most lanes a thread walks at once */
#define IC__PTX_NVARS (2 * IC_MAX_RANK)   /* loop variables: outer, then inner */
#define IC__PTX_MAXUNROLL 64              /* most unrolled iterations of an inner stage */
#define IC__PTX_SMEM_MAX (40 * 1024)      /* static shared memory we allow ourselves */

struct ic_ptx_module {
    ic_ctx *c;
    char *ptx;                /* owned: every kernel's module (kptx), joined */
    char *ir;                 /* owned, may be NULL: kir joined */
    char **kptx;              /* [nkernels] owned: each kernel's own PTX module (NULL where
                               * kernels[i].code names an earlier kernel with the same code) */
    char **kir;               /* [nkernels] owned, NULL unless keep_ir: its optimised IR */
    int nkernels;
    ic_ptx_kernel *kernels;   /* names owned (ic__strdup) */
    double emit_ms;
};

/* What the plan knows about one loop-IR instruction. */
typedef struct {
    bool affine;                      /* I32/I64 value = c0 + sum coef[v] * var v (the
                                       * shared ic__affine of lib/Lower/affine.c) */
    int64_t c0;
    int64_t coef[IC__PTX_NVARS];
    uint32_t deps;                    /* loop variables it depends on, bit per var */
    bool acc;                         /* depends on an ACC (a per-outer-point value) */
    int vn;                           /* value number shared by equal values of any stage;
                                       * -1: never shared (REDUCE, STORE, loads of buffers
                                       * this kernel stores to) */
} ic__pinfo;

/* How one kernel maps onto threads. */
typedef struct {
    const ic_kernel *k;
    ic_ptx_mode mode;
    ic_ptx_params prm;        /* resolved */
    int V;                    /* lanes */
    int T;                    /* threads per outer point (group) */
    int R;                    /* outer points (groups of V in COLUMN) per block */
    int block, ept;
    int lanevar;              /* the loop variable the lanes walk, -1: none */
    int64_t P;                /* outer points */
    int64_t N;                /* inner points */
    int64_t grid;
    int64_t K;                /* ROW/COLUMN: iterations of each inner stage per thread */
    bool unrolled;            /* those iterations are straight-line code */
    bool cache;               /* and values are reused across stages (row in registers) */
    bool exact;               /* K iterations cover the inner space with no masking */
    bool tail;                /* POINTWISE: the last group may be partial */
    int smem;                 /* bytes of shared memory */
    int **smem_off;           /* [stage][instr]: offset of a REDUCE's partials */
    ic__pinfo **info;         /* [stage][instr] */
    int nvn;
    bool *stored;             /* [nbufs]: the kernel stores to buffer b */
    bool *used;               /* [nbufs]: the kernel loads or stores buffer b */
    int nreduce_stages;
    /* ROW split across blocks (blocks_per_row > 1) */
    int S;                    /* blocks per row (1: no split) */
    int split_stage;          /* the REDUCE stage whose partials meet in the workspace */
    int flag_off;             /* shared-memory byte of the "last block" flag */
    int64_t ws_bytes;         /* workspace: P * S partials of 16 bytes per REDUCE */
    struct ic__pgemm *gemm;   /* IC_PTX_GEMM: the contraction (gemm.c), else NULL */
    bool allow_tf32;          /* ic_ptx_options.allow_tf32: f32 GEMMs may use TF32 */
    const struct ic__iconv *cv; /* this kernel is the GEMM of an implicit-GEMM conv candidate
                                 * (iconv.c), else NULL; gemm->B.gather says if taken */
} ic__pplan;

/* Checks k against the buffers (operand order, types, indices), then fills pl; params may be
 * NULL. pl's arrays are ic__malloc'd: ic__pplan_free. Errors name the kernel. */
IC_HIDDEN ic_status ic__pplan_make(ic_ctx *c, const ic_kernel *k, int nbufs,
                                   const ic_buffer *bufs, const ic_ptx_options *o,
                                   const ic_ptx_params *params, ic__pplan *pl);
/* The same for the GEMM of an implicit-GEMM conv candidate cv (NULL: none). */
IC_HIDDEN ic_status ic__pplan_make_cv(ic_ctx *c, const ic_kernel *k, int nbufs,
                                      const ic_buffer *bufs, const ic_ptx_options *o,
                                      const ic_ptx_params *params, const struct ic__iconv *cv,
                                      ic__pplan *pl);
IC_HIDDEN void ic__pplan_free(ic_ctx *c, ic__pplan *pl);
/* Element offsets a V-lane access at lane 0 may use as one aligned vector access. */
IC_HIDDEN bool ic__pplan_vec_ok(const ic__pplan *pl, const ic__pinfo *off, int V);

/* One value of every lane (or one shared by all: uni). */
typedef struct {
    LLVMValueRef v[IC__PTX_MAXV];
    bool uni;
} ic__lv;

typedef struct ic__pg {
    ic_ctx *c;
    int sm;
    bool arch_specific;               /* a kernel uses sm_90a instructions (wgmma): the
                                       * module's target becomes sm_90a */
    bool emu;                         /* for the host emulator: no NVVM intrinsics, one
                                       * address space; thread ids, shuffles, barriers and
                                       * f16 conversions are calls to ic__emu_* */
    LLVMContextRef ctx;
    LLVMModuleRef mod;
    LLVMBuilderRef b;
    LLVMTypeRef t_void, t_i1, t_i8, t_i16, t_i32, t_i64, t_f16, t_bf16, t_f32, t_f64;
    LLVMTypeRef t_gptr;               /* pointer in the global address space (generic for emu) */
    /* the kernel being generated */
    const ic_kernel *k;
    const ic_buffer *bufs;
    int nbufs;
    const ic__pplan *pl;
    LLVMValueRef fn;
    LLVMBasicBlockRef entry;
    LLVMValueRef *bufptr;             /* [nbufs] kernel parameters */
    LLVMValueRef smem;                /* the kernel's shared array, or NULL */
    LLVMValueRef tid, bid;            /* i32 */
    LLVMValueRef j, r;                /* i32: thread in its group, group in the block */
    LLVMValueRef pvalid;              /* i1: this thread's outer point exists (NULL: yes) */
    LLVMValueRef var[IC__PTX_NVARS];  /* i64 loop variables (lane 0 for the lane variable) */
    int nl;                           /* lanes of the current emission */
    LLVMValueRef valid;               /* i1: the current lanes exist (NULL: yes) */
    bool vec;                         /* vector accesses allowed in the current emission */
    int it;                           /* unrolled iteration (cache key), -1: no caching */
    ic__lv *vals;                     /* the current stage's values */
    ic__lv **accres;                  /* [stage][instr]: combined REDUCE results */
    LLVMValueRef **acc, **acci;       /* [stage][instr * MAXV + lane]: accumulator allocas */
    ic__lv *cache;                    /* [K][nvn] */
    bool *cached;
    LLVMValueRef slice;               /* i64: ROW split: this block's slice of its row */
    struct { LLVMValueRef v, i; } *split_part; /* [instr]: block partials (split rows) */
    LLVMValueRef *split_col;          /* [(instr * MAXV + lane) * 2 + 0/1]: COLUMN split: the
                                       * block's combined value and argmax index */
} ic__pg;

/* emu_wgmma.c: the emulator's mbarriers and wgmma (see wgmma.c) */
IC_HIDDEN void ic__emu_mbar_init(void *bar, int32_t count);
IC_HIDDEN void ic__emu_mbar_arrive(void *bar);
IC_HIDDEN int32_t ic__emu_mbar_test(void *bar, int32_t parity);
IC_HIDDEN void ic__emu_wgsync(void *bar);
IC_HIDDEN void ic__emu_wgmma(const uint8_t *smem, uint64_t da, uint64_t db, int32_t n, int32_t trans_a,
                             int32_t trans_b, int32_t bf16, int32_t wtid, float *acc);

/* gen.c */
IC_HIDDEN ic_status ic__pgen_kernel(ic__pg *G, const ic_kernel *k, const ic__pplan *pl,
                                    const char *name);
IC_HIDDEN LLVMValueRef ic__pg_i32(ic__pg *G, int64_t v);
IC_HIDDEN LLVMValueRef ic__pg_i64(ic__pg *G, int64_t v);
IC_HIDDEN LLVMValueRef ic__pg_call(ic__pg *G, const char *intrinsic, LLVMTypeRef *over,
                                   int nover, LLVMValueRef *args, int nargs);
IC_HIDDEN LLVMValueRef ic__pg_alloca(ic__pg *G, LLVMTypeRef t);
/* A counted loop `for (x = start; x pred lim; x += step)` over i64, with its blocks named
 * name[0..2] (test, body, exit): ic__pg_loop_begin returns x at the top of the body,
 * ic__pg_loop_end closes the body and leaves the builder after the loop. */
typedef struct {
    LLVMValueRef slot;
    LLVMBasicBlockRef head, done;
} ic__pg_loop;
IC_HIDDEN LLVMValueRef ic__pg_loop_begin(ic__pg *G, ic__pg_loop *L, LLVMValueRef start,
                                         LLVMIntPredicate pred, LLVMValueRef lim,
                                         const char *const name[3]);
IC_HIDDEN void ic__pg_loop_end(ic__pg *G, const ic__pg_loop *L, LLVMValueRef x, LLVMValueRef step);
/* v[0..n) stored to, or loaded into out[0..n) from, the array buf of elements of type t:
 * how the host emulator's calls take register groups (by pointer). */
IC_HIDDEN void ic__pg_store_n(ic__pg *G, LLVMTypeRef t, LLVMValueRef buf, const LLVMValueRef *v, int n);
IC_HIDDEN void ic__pg_load_n(ic__pg *G, LLVMTypeRef t, LLVMValueRef buf, LLVMValueRef *out, int n);
/* Calls external function `name` (declared on first use) of the given signature. */
IC_HIDDEN LLVMValueRef ic__pg_ext(ic__pg *G, const char *name, LLVMTypeRef ret, LLVMTypeRef *pt,
                                  int n, LLVMValueRef *args);
/* `if (cond) { ... }`: returns the continuation block; the builder is left in the then
 * block. cond NULL means always (no branch; returns NULL). */
IC_HIDDEN LLVMBasicBlockRef ic__pg_if(ic__pg *G, LLVMValueRef cond, const char *what);
IC_HIDDEN void ic__pg_endif(ic__pg *G, LLVMBasicBlockRef cont);
IC_HIDDEN LLVMValueRef ic__pg_barrier(ic__pg *G);   /* bar.sync 0 */
/* v from the lane whose id is this lane's xor off (shfl.sync.bfly over the whole warp). */
IC_HIDDEN LLVMValueRef ic__pg_shfl(ic__pg *G, LLVMValueRef v, int off);
/* Sets loop variables first..first+n-1 from flat index x (i64, 0 <= x < total). */
IC_HIDDEN void ic__pg_decompose(ic__pg *G, LLVMValueRef x, int n, const int64_t *sizes, int first,
                                int64_t total);
/* Emits stage s's instructions for the current lanes (G->nl, G->var, G->valid, G->pvalid). */
IC_HIDDEN void ic__pg_emit_stage(ic__pg *G, int s);
/* A zero-initialised array of n elements in global memory, private to the kernel. */
IC_HIDDEN LLVMValueRef ic__pg_module_array(ic__pg *G, const char *suffix, LLVMTypeRef elt, int64_t n);
IC_HIDDEN LLVMValueRef ic__pg_sreg(ic__pg *G, const char *intrinsic);   /* tid / ctaid */
IC_HIDDEN void ic__pg_annotate(ic__pg *G, const char *key, int val);     /* nvvm.annotations */

/* gemm.c: recognises a contraction kernel and plans its tiles (pl->gemm, mode GEMM): IC_OK
 * with *is_gemm false when k is no contraction it handles; an error for bad GEMM params. */
IC_HIDDEN ic_status ic__pgemm_plan(ic_ctx *c, const ic_kernel *k, const ic_buffer *bufs,
                                   const ic_ptx_params *in, int nsms, int sm, bool forced,
                                   ic__pplan *pl, bool *is_gemm);
IC_HIDDEN void ic__pgemm_free(ic_ctx *c, ic__pplan *pl);
IC_HIDDEN int ic__pgemm_smem_bytes(const ic__pplan *pl);   /* dynamic shared memory to launch with */
/* Generates the kernel body of a GEMM plan (after the entry, tid and ctaid are set up). */
IC_HIDDEN void ic__pgen_gemm(ic__pg *G);
IC_HIDDEN void ic__pg_fence(ic__pg *G);             /* membar.gl */
/* Split reductions: a block that is not is_last returns (block other); the last one goes on
 * in block last, after a fence, to read what the others wrote to the workspace. */
IC_HIDDEN void ic__pg_last_block(ic__pg *G, LLVMValueRef is_last, const char *last, const char *other);

/* attn.c: fused attention kernels (ic_kernel.attn): the plan (pl->mode IC_PTX_ATTENTION, geometry,
 * used buffers; dynamic shared memory to launch with) and the kernel body. */
IC_HIDDEN ic_status ic__pattn_plan(ic_ctx *c, const ic_kernel *k, const ic_buffer *bufs,
                                   const ic_ptx_params *in, ic__pplan *pl);
IC_HIDDEN int ic__pattn_smem_bytes(const ic__pplan *pl);
IC_HIDDEN void ic__pgen_attention(ic__pg *G);

/* instr.c */
IC_HIDDEN LLVMTypeRef ic__pg_type(ic__pg *G, ic_dtype t);       /* in registers */
IC_HIDDEN LLVMTypeRef ic__pg_mem_type(ic__pg *G, ic_dtype t);   /* in memory */
IC_HIDDEN LLVMValueRef ic__pg_const(ic__pg *G, ic_dtype t, ic_scalar s);
IC_HIDDEN LLVMValueRef ic__pg_convert(ic__pg *G, LLVMValueRef x, ic_dtype from, ic_dtype to);
/* Emits instruction i of stage s for the current lanes into G->vals[i]. */
IC_HIDDEN void ic__pg_instr(ic__pg *G, int s, int i);
/* Reduction identity, accumulate, and the combine of two partials (ARGMAX: value and index
 * pairs; *ri receives the index). */
IC_HIDDEN LLVMValueRef ic__pg_red_init(ic__pg *G, ic_red red, ic_dtype t);
IC_HIDDEN LLVMValueRef ic__pg_red_op(ic__pg *G, ic_red red, ic_dtype t, LLVMValueRef a,
                                     LLVMValueRef b);
IC_HIDDEN LLVMValueRef ic__pg_argmax_pick(ic__pg *G, ic_dtype t, LLVMValueRef va,
                                          LLVMValueRef ia, LLVMValueRef vb, LLVMValueRef ib);

/* math.c: f32/f64 exp log sin cos tanh erf sigmoid pow rsqrt, integer pow (the shared math
 * library with the GPU's settings). */
IC_HIDDEN LLVMValueRef ic__pmath(ic__pg *G, ic_lop op, ic_dtype t, LLVMValueRef x,
                                 LLVMValueRef y);
/* exp of an argument <= 0 or NaN (IC_LF_EXP_LE0), as the CPU's. */
IC_HIDDEN LLVMValueRef ic__pmath_exp_le0(ic__pg *G, ic_dtype t, LLVMValueRef x);

/* module.c */
/* An empty module with room for nk kernels (NULL when out of memory), for the NVPTX path
 * and the host emulator alike; ic_ptx_module_destroy frees it. */
IC_HIDDEN ic_ptx_module *ic__ptx_module_new(ic_ctx *c, int nk);
IC_HIDDEN void ic__ptx_llvm_init(void);
IC_HIDDEN void ic__pg_init_types(ic__pg *G);
/* Plans and generates every kernel into G->mod, filling m->kernels (names, geometry). */
IC_HIDDEN ic_status ic__ptx_gen_all(ic__pg *G, ic_ptx_module *m, int nk, const ic_kernel *ks,
                                    const char *const *names, const ic_ptx_options *o,
                                    const ic_ptx_params *params);

#endif
