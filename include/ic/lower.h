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

typedef enum {
    IC_L_VAR,       /* a = loop var: 0..nouter-1 outer, nouter.. inner (I64) */
    IC_L_CONST,     /* imm, of type */
    IC_L_LOAD,      /* buf, a = offset (I64) -> buffer's dtype */
    IC_L_STORE,     /* buf, a = offset, b = value (buffer's dtype); no result */
    IC_L_ACC,       /* a = stage, b = instr index of a REDUCE in that stage */
    IC_L_REDUCE,    /* red, a = value, b = index (ARGMAX only, I64) -> accumulator */
    /* unary, a: */
    IC_L_NEG, IC_L_ABS, IC_L_EXP, IC_L_LOG, IC_L_SQRT, IC_L_RSQRT, IC_L_SIN, IC_L_COS,
    IC_L_TANH, IC_L_SIGMOID, IC_L_ERF, IC_L_RECIP, IC_L_FLOOR, IC_L_CEIL, IC_L_NOT,
    IC_L_CAST,      /* a converted to type (float->int truncates, x->bool is x != 0) */
    /* binary, a b: */
    IC_L_ADD, IC_L_SUB, IC_L_MUL, IC_L_DIV, IC_L_POW,
    IC_L_MAX, IC_L_MIN,          /* NaN-propagating for floats (torch.maximum) */
    IC_L_IDIV, IC_L_MOD,         /* integers: floor division and its remainder (index math) */
    IC_L_AND, IC_L_OR,           /* bool */
    IC_L_CMP,                    /* pred; -> BOOL */
    IC_L_SELECT,                 /* a ? b : c */
    IC_L_OP_COUNT
} ic_lop;

typedef enum { IC_CMP_EQ, IC_CMP_NE, IC_CMP_LT, IC_CMP_LE, IC_CMP_GT, IC_CMP_GE } ic_cmp;
typedef enum {
    IC_RED_SUM, IC_RED_PROD, IC_RED_MAX, IC_RED_MIN, /* MAX/MIN propagate NaN */
    IC_RED_ARGMAX,                                   /* first index of the max; NaN is max */
} ic_red;

/* EXP's pred: its argument is <= 0 or NaN by construction (softmax's x - max of the row),
 * so codegen may leave out the overflow path. */
#define IC_EXP_LE0 1
/* REDUCE's c: IC_RED_NAN_FREE on a MAX whose reader makes a row with a NaN all NaN anyway
 * (softmax: exp(x - max) is NaN at the NaN, and so is the sum), so a NaN operand may be
 * dropped instead of propagated: codegen may use the plain compare. -1 otherwise. */
#define IC_RED_NAN_FREE 1

typedef struct ic_linstr {
    ic_lop op;
    ic_dtype type;      /* result type (arithmetic in F32, F64, I32, I64 or BOOL) */
    int a, b, c;        /* operand instr indices in the same stage (or as documented) */
    int buf;            /* LOAD / STORE */
    int pred;           /* CMP: ic_cmp; REDUCE: ic_red; EXP: IC_EXP_LE0 or 0 */
    ic_scalar imm;      /* CONST */
} ic_linstr;

typedef enum { IC_STAGE_BODY, IC_STAGE_REDUCE, IC_STAGE_INNER } ic_stage_kind;

typedef struct ic_stage {
    ic_stage_kind kind;
    int ninstr;
    ic_linstr *instr;
} ic_stage;

typedef struct ic_kernel {
    const char *name;          /* "cpu_fused_add_mul_relu_3": says what was fused */
    int nouter, ninner;
    int64_t outer[IC_MAX_RANK], inner[IC_MAX_RANK];
    int nstages;
    ic_stage *stages;
    int nnodes;                /* graph nodes computed here, for dumps and names */
    const char **nodes;
    const char *why;           /* why this kernel ends where it does (ic-dump --stage fused) */
} ic_kernel;

typedef struct ic_program ic_program;

/* Lowers a specialised graph (no symbols; ic_graph_specialize) to one kernel per
 * computing op; views (reshape permute transpose expand slice squeeze unsqueeze) become
 * index arithmetic, never copies. The program borrows g (param data): destroy it first. */
IC_API ic_status ic_lower(ic_ctx *c, const ic_graph *g, ic_program **out);
IC_API void ic_program_destroy(ic_program *p);

IC_API const ic_graph *ic_program_graph(const ic_program *p);
IC_API int ic_program_num_buffers(const ic_program *p);
IC_API const ic_buffer *ic_program_buffer(const ic_program *p, int i);
IC_API int ic_program_num_kernels(const ic_program *p);
IC_API const ic_kernel *ic_program_kernel(const ic_program *p, int i);

/* Stable text, one kernel a block (ic-dump --stage loops / fused). */
IC_API void ic_program_print(FILE *f, const ic_program *p);
/* Checks operand order, types and buffer use; run after each stage in debug builds. */
IC_API ic_status ic_program_verify(const ic_program *p);

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
