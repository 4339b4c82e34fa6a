/* lower.h - the loop-level IR (kernels over buffers) and graph -> loop IR lowering.
 *
 * A program is a list of kernels run in order over numbered buffers. Every kernel has
 * the same shape, in the spirit of Inductor's loop bodies:
 *
 *     for o in outer[0] x ... x outer[nouter-1]:      // pointwise dims, parallel
 *         stage 0 .. nstages-1, in order, each one of:
 *           BODY:    the instructions once                         (pointwise work)
 *           REDUCE:  for r in inner[...]: the instructions; REDUCE instrs accumulate
 *           INNER:   for r in inner[...]: the instructions (stores), e.g. softmax output
 *
 * Instructions are SSA values local to their stage; VAR reads a loop variable, LOAD/STORE
 * address a buffer with a flat element offset (an I64 value), ACC reads the final value of a
 * REDUCE of an earlier stage. Shapes are concrete: lowering works on a specialised graph.
 * f16/bf16 exist only in memory: lowering casts loads to f32 and casts back before stores.
 *
 *     ic_program *p;
 *     ic_lower(c, specialised_graph, &p);   // one kernel per op, views folded into indices
 *     ic_program_print(stdout, p);
 *     ic_program_destroy(p);
 */
#ifndef IC_LOWER_H
#define IC_LOWER_H

#include "ic/graph.h"
#include "ic/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    IC_BUF_ARG,     /* run-time argument: index = position in ic_graph_arg order */
    IC_BUF_PARAM,   /* weights with data: constant, data points at them */
    IC_BUF_OUTPUT,  /* caller's output: index = output position */
    IC_BUF_TEMP,    /* intermediate, lives in the run's arena */
} ic_buf_kind;

typedef struct ic_buffer {
    ic_buf_kind kind;
    ic_dtype dtype;
    int64_t numel;
    int index;          /* ARG / OUTPUT position */
    const void *data;   /* PARAM: borrowed from the graph */
    const char *name;   /* graph node it holds */
    int64_t arena_offset; /* TEMP: byte offset in the run's arena (64-byte aligned); TEMPs
                           * whose lifetimes are disjoint may share bytes. -1 otherwise. */
} ic_buffer;

/* Hints an instruction may carry (ic_linstr.flags); lops.def says which op allows which. */
enum {
    /* EXP: its argument is <= 0 or NaN by construction (softmax's x - max of the row), so
     * codegen may leave out the overflow path. */
    IC_LF_EXP_LE0 = 1u << 0,
    /* REDUCE MAX: its reader makes a row with a NaN all NaN anyway (softmax: exp(x - max) is
     * NaN at the NaN, and so is the sum), so a NaN operand may be dropped instead of
     * propagated: codegen may use the plain compare. */
    IC_LF_NAN_FREE = 1u << 1,
};

/* Op traits (ic_lop_info.traits). */
enum {
    IC_LT_EPILOGUE = 1u << 0, /* a GEMM epilogue or operand transform may apply it per element */
    IC_LT_MATH = 1u << 1,     /* an approximation from the shared math library */
};

/* The type rule of an op (lops.def explains each). */
typedef enum {
    IC_LR_SPECIAL, IC_LR_ARITH, IC_LR_FLOAT, IC_LR_INT, IC_LR_BOOL, IC_LR_CAST, IC_LR_CMP,
    IC_LR_SELECT,
} ic_lrule;

/* The loop-IR ops: one row each in lops.def. */
typedef enum {
#define IC_LOP(ID, name, arity, rule, flags, traits) IC_L_##ID,
#include "ic/lops.def"
#undef IC_LOP
    IC_L_OP_COUNT
} ic_lop;

typedef struct ic_lop_info {
    const char *name;
    int arity;         /* value operands (REDUCE: 1; ic_linstr_arity gives ARGMAX's 2) */
    ic_lrule rule;
    unsigned flags;    /* IC_LF_* allowed */
    unsigned traits;   /* IC_LT_* */
} ic_lop_info;

/* The row of op in lops.def; NULL for a value that is no op. */
IC_API const ic_lop_info *ic_lop_get(ic_lop op);
/* Its name, "?" for no op. */
IC_API const char *ic_lop_name(ic_lop op);
/* Computing ops of one and two operands: lops.def rows of arity 1 or 2 whose rule is not
 * SPECIAL (CAST and NOT are unary; CMP is binary). */
IC_API bool ic_lop_is_unary(ic_lop op);
IC_API bool ic_lop_is_binary(ic_lop op);
IC_API bool ic_lop_has_trait(ic_lop op, unsigned trait);

typedef enum { IC_CMP_EQ, IC_CMP_NE, IC_CMP_LT, IC_CMP_LE, IC_CMP_GT, IC_CMP_GE } ic_cmp;
typedef enum {
    IC_RED_SUM, IC_RED_PROD, IC_RED_MAX, IC_RED_MIN, /* MAX/MIN propagate NaN */
    IC_RED_ARGMAX,                                   /* first index of the max; NaN is max */
} ic_red;

typedef struct ic_linstr {
    ic_lop op;
    ic_dtype type;      /* result type (arithmetic in F32, F64, I32, I64 or BOOL) */
    int a, b, c;        /* value operands: instr indices in the same stage (ic_linstr_arity);
                         * VAR's a is a loop variable, ACC's a and b a stage and an instr */
    int buf;            /* LOAD / STORE */
    ic_cmp cmp;         /* CMP */
    ic_red red;         /* REDUCE */
    unsigned flags;     /* IC_LF_* hints, only those the op's lops.def row allows */
    ic_scalar imm;      /* CONST */
} ic_linstr;

/* How many of a, b, c the instruction reads as values. */
IC_API int ic_linstr_arity(const ic_linstr *in);

typedef enum { IC_STAGE_BODY, IC_STAGE_REDUCE, IC_STAGE_INNER } ic_stage_kind;

typedef struct ic_stage {
    ic_stage_kind kind;
    int ninstr;
    ic_linstr *instr;
} ic_stage;

/* A fused attention kernel (ic_kernel.attn), the one kernel form that is no loop nest: for
 * each batch index b (nb dims of sizes batch[]) and query row l < L,
 *     out[b, l, :] = sum_s p[s] v[b, s, :],  p = softmax_s(scale * q[b, l, :] . k[b, s, :]
 *                                                     + mask[b, l, s])
 * over keys s < S, with p[s] = 0 where causal and s > l (mask: additive float or bool, where
 * false means -inf). Scores, the running max and sum, and the accumulation are f32 whatever
 * the operands' dtype; a row with every key masked is NaN (0 / 0), as the reference's.
 * Each operand is read through an affine view of its buffer, so permuted and broadcast views
 * (a [B, S, H*D] linear output read as [B, H, S, D]) need no copies:
 *     element (b, r, c) = buf[c0 + sum_i sb[i] * b_i + sr * r + sc * c]
 * with r, c = (l, e) for q and out, (s, e) for k and v, (l, s) for the mask (stride 0 where
 * it broadcasts). */
typedef struct ic_attn_operand {
    int buf;                   /* -1: absent (the mask) */
    int64_t c0, sr, sc;
    int64_t sb[IC_MAX_RANK];
} ic_attn_operand;

typedef struct ic_attention {
    int nb;
    int64_t batch[IC_MAX_RANK];
    int64_t L, S, E;           /* query rows, keys, head dim (of q, k and v alike) */
    double scale;
    bool causal;
    bool round;                /* scores rounded to q's dtype after q . k, after the scale and
                                * after the mask, as the chain of ops it replaces stored them */
    ic_attn_operand q, k, v, mask, out;
} ic_attention;

typedef struct ic_kernel {
    const char *name;          /* "cpu_fused_add_mul_relu_3": says what was fused */
    int nouter, ninner;
    int64_t outer[IC_MAX_RANK], inner[IC_MAX_RANK];
    int nstages;
    ic_stage *stages;
    int nnodes;                /* graph nodes computed here, for dumps and names */
    const char **nodes;
    const char *why;           /* why this kernel ends where it does (ic-dump --stage fused) */
    const ic_attention *attn;  /* non-NULL: an attention kernel (no stages; outer = batch, L, E
                                * and inner = S describe its space for printing) */
} ic_kernel;

typedef struct ic_program ic_program;

/* The operands of attention kernel a in the order q, k, v, mask, out (the mask's buf may be
 * -1): where code that walks a kernel's loads and stores finds an attention kernel's. */
static inline void ic_attention_operands(const ic_attention *a, const ic_attn_operand *ops[5])
{
    ops[0] = &a->q, ops[1] = &a->k, ops[2] = &a->v, ops[3] = &a->mask, ops[4] = &a->out;
}

/* Composite ops (conv, pooling, batch_norm, attention...; see expand-impl.h) rewritten as
 * existing ops of a new specialised graph *out, which borrows param data from g (destroy it
 * first). Matmul operands read through views no strides describe get a copy there too
 * (expand_contig.c). *out is NULL when g has neither. */
IC_API bool ic_graph_has_composites(const ic_graph *g);
IC_API ic_status ic_graph_expand(ic_ctx *c, const ic_graph *g, ic_graph **out);

/* Lowers a specialised graph (no symbols; ic_graph_specialize) to one kernel per
 * computing op; views (reshape permute transpose expand slice squeeze unsqueeze) become
 * index arithmetic, never copies. The program borrows g (param data): destroy it first. */
IC_API ic_status ic_lower(ic_ctx *c, const ic_graph *g, ic_program **out);
/* ic_lower with the kernel names of a backend: prefix "gpu_" makes "gpu_add_0". */
IC_API ic_status ic_lower_prefixed(ic_ctx *c, const ic_graph *g, const char *prefix,
                                   ic_program **out);
IC_API void ic_program_destroy(ic_program *p);

IC_API const ic_graph *ic_program_graph(const ic_program *p);
IC_API int ic_program_num_buffers(const ic_program *p);
IC_API const ic_buffer *ic_program_buffer(const ic_program *p, int i);
IC_API int ic_program_num_kernels(const ic_program *p);
IC_API const ic_kernel *ic_program_kernel(const ic_program *p, int i);

/* Stable text, one kernel a block (ic-dump --stage loops / fused). */
IC_API void ic_program_print(FILE *f, const ic_program *p);
/* Kernel k's block of that text. */
IC_API void ic_kernel_print(FILE *f, const ic_program *p, int k);
/* Checks operand order, types and buffer use; run after each stage in debug builds. */
IC_API ic_status ic_program_verify(const ic_program *p);
/* The same checks for one kernel over a buffer table (what each backend calls before its
 * codegen, adding only its own target limits). The message, set on c, names the kernel,
 * stage, instruction and op, after `who` ("codegen", "ptx"). */
IC_API ic_status ic_kernel_verify(ic_ctx *c, const char *who, const ic_kernel *k, int nbufs,
                                  const ic_buffer *bufs);

/* Bytes of arena the TEMP buffers need (see ic_buffer.arena_offset). */
IC_API int64_t ic_program_arena_size(const ic_program *p);

/* Runs p in plain C, one instruction at a time (a debugging backend and the oracle of the
 * Lower/Fuse tests): F32 results rounded to float after every instruction, F64 in double,
 * integers wrap. args follow ic_graph_arg order (any strides); outs[i] must be allocated by
 * the caller with output i's dtype and element count, contiguous. Loads and stores are
 * bounds-checked: an out-of-range offset is an IC_EINVAL naming the kernel. */
IC_API ic_status ic_program_interpret(ic_ctx *c, const ic_program *p, const ic_tensor *args,
                                      int nargs, ic_tensor *outs, int nouts);

#ifdef __cplusplus
}
#endif
#endif
