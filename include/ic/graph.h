/* graph.h - the Graph IR: tensors, ops with PyTorch semantics, shape and dtype inference.
 *
 * A graph owns everything in it (nodes, names, shapes, param data) in one arena, freed by
 * ic_graph_destroy. Values are node ids (ic_value); every builder call infers the node's
 * dtype and shape as PyTorch would and refuses what PyTorch would refuse.
 *
 *     ic_graph *g; ic_value a, b, t, y;
 *     ic_graph_create(c, "demo", &g);
 *     ic_dim sh[2] = { ic_dim_const(16384), ic_dim_const(512) };
 *     ic_graph_add_input(g, "a", IC_F32, 2, sh, &a);
 *     ic_graph_add_input(g, "b", IC_F32, 2, sh, &b);
 *     ic_graph_binary(g, "t", IC_OP_ADD, ic_val(a), ic_val(b), &t);
 *     ic_graph_binary(g, "y", IC_OP_MUL, ic_val(t), ic_scalar_f(0.5), &y);
 *     ic_graph_add_output(g, y);
 */
#ifndef IC_GRAPH_H
#define IC_GRAPH_H

#include <stdio.h>
#include "ic/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define IC_MAX_RANK 8
#define IC_DIM_MAX_SYMS 4
#define IC_MAX_INPUTS 64 /* most operands of one node (cat) */

typedef enum {
    IC_F32, IC_F64, IC_F16, IC_BF16, IC_I32, IC_I64, IC_BOOL,
    IC_U8, IC_I8, IC_I16, /* torch.uint8 int8 int16: in memory only, computed in i32 */
    IC_DTYPE_COUNT
} ic_dtype;

IC_API const char *ic_dtype_name(ic_dtype t);          /* "f32" */
IC_API size_t ic_dtype_size(ic_dtype t);                /* bytes per element */
IC_API bool ic_dtype_is_float(ic_dtype t);
IC_API bool ic_dtype_is_int(ic_dtype t);               /* u8 i8 i16 i32 i64 (not bool) */
/* The range of an integer dtype (bool: 0..1); false for floats. */
IC_API bool ic_dtype_int_range(ic_dtype t, int64_t *lo, int64_t *hi);
IC_API bool ic_dtype_from_name(const char *s, ic_dtype *out);
/* The spec's tolerances for comparing results of dtype t against PyTorch or the reference:
 * |got - want| <= atol + rtol * |want|; 0 and 0 (exact) for integers and bool. */
IC_API void ic_dtype_tolerance(ic_dtype t, double *rtol, double *atol);

typedef enum {
    IC_KIND_UNARY, IC_KIND_BINARY, IC_KIND_TERNARY, IC_KIND_REDUCE, IC_KIND_NORM,
    IC_KIND_VIEW, IC_KIND_CAT, IC_KIND_CONTRACT, IC_KIND_GATHER, IC_KIND_CREATE,
    IC_KIND_SPATIAL, /* pad, roll, conv, pooling, interpolate (issue 12) */
    IC_KIND_INPUT, IC_KIND_PARAM
} ic_op_kind;

typedef enum {
#define IC_OP(E, name, mn, mx, kind) IC_OP_##E,
#include "ic/ops.def"
#undef IC_OP
    IC_OP_COUNT,
    IC_OP_INPUT = 1000, /* pseudo-ops for graph inputs and params */
    IC_OP_PARAM = 1001,
} ic_op;

IC_API const char *ic_op_name(ic_op op);                /* "add", "input", "param" */
IC_API bool ic_op_from_name(const char *s, ic_op *out);
IC_API ic_op_kind ic_op_kind_of(ic_op op);

/* A dimension: coef * product of symbols (sym ids of the graph, sorted). A plain size has
 * nsym = 0. A reshape/expand target of -1 is coef = -1, nsym = 0. */
typedef struct {
    int64_t coef;
    uint16_t nsym;
    uint16_t sym[IC_DIM_MAX_SYMS];
} ic_dim;

static inline ic_dim ic_dim_const(int64_t n) { ic_dim d = { n, 0, {0} }; return d; }
IC_API bool ic_dim_eq(ic_dim a, ic_dim b);
IC_API bool ic_dim_is_const(ic_dim d);

/* A scalar attribute or operand: integer-valued when is_int (exact for i64). */
typedef struct { double f; int64_t i; bool is_int; } ic_scalar;

typedef int32_t ic_value; /* node id within its graph */

/* An operand: a value, or a numeric scalar (JSON number) broadcast to the other operand. */
typedef struct {
    ic_value node;   /* IC_SCALAR for a scalar, IC_NONE for an absent optional operand */
    ic_scalar scalar;
} ic_operand;

#define IC_SCALAR (-1)
#define IC_NONE (-2)   /* e.g. layer_norm(x, none, bias); JSON null */
static inline ic_operand ic_none(void) { ic_operand o = { IC_NONE, { 0, 0, false } }; return o; }

static inline ic_operand ic_val(ic_value v) { ic_operand o = { v, { 0, 0, false } }; return o; }
/* i is f truncated, saturated at the int64 range (NaN gives 0): a bare cast of inf, NaN or 1e300
 * is undefined behaviour. */
static inline int64_t ic_f64_to_i64_sat(double f)
{
    return f != f ? 0 : f >= 0x1p63 ? INT64_MAX : f < -0x1p63 ? INT64_MIN : (int64_t)f;
}
static inline ic_operand ic_scalar_f(double f) { ic_operand o = { -1, { f, ic_f64_to_i64_sat(f), false } }; return o; }
static inline ic_operand ic_scalar_i(int64_t i) { ic_operand o = { -1, { (double)i, i, true } }; return o; }

/* Attributes of every op; ic_attrs_init fills the spec's defaults for one op. "has_*"
 * records whether an optional attribute was given (absent dims = all dims). */
typedef struct ic_attrs {
    bool has_dims;  int ndims; int64_t dims[IC_MAX_RANK]; /* reductions, permute, squeeze */
    bool keepdim;
    int64_t dim, dim0, dim1;        /* argmax softmax log_softmax unsqueeze cat slice / transpose */
    int nshape; ic_dim shape[IC_MAX_RANK]; /* reshape expand full; normalized_shape */
    bool has_start, has_end;        /* slice: start end step (ints) */
    int64_t start, end, step;
    ic_scalar astart, aend, astep;  /* arange */
    ic_scalar value;                /* full */
    bool has_min, has_max; ic_scalar min, max; /* clamp */
    double eps;
    bool has_dtype; ic_dtype dtype; /* cast full arange */
    int approximate;                /* gelu: 0 = "none", 1 = "tanh" */
    double negative_slope;          /* leaky_relu (0.01) */
    double beta, threshold;         /* softplus (1, 20): x where x * beta > threshold */
    /* --- spatial ops (issue 12) ---
     * Per-spatial-dim lists (stride, padding, dilation, kernel_size, output_padding,
     * output_size, size, scale_factor) hold 0 entries when absent (the op's default), 1
     * entry (applied to every spatial dim, as PyTorch's int form) or one per spatial dim. */
    int npad; int64_t pad[2 * IC_MAX_RANK]; /* pad: F.pad order (last dim first, before/after) */
    int mode;                       /* pad: IC_PAD_*; interpolate: IC_INTERP_* */
    int64_t unfold_size;            /* unfold: size (dim, step: the fields above) */
    int nshifts; int64_t shifts[IC_MAX_RANK]; /* roll (dims: has_dims/dims) */
    int nstride; int64_t stride[IC_MAX_RANK];
    int npadding; int64_t padding[IC_MAX_RANK];
    int padding_str;                /* conv: IC_PADDING_INTS, IC_PADDING_SAME, IC_PADDING_VALID */
    int ndilation; int64_t dilation[IC_MAX_RANK];
    int64_t groups;                 /* conv (1) */
    int noutput_padding; int64_t output_padding[IC_MAX_RANK]; /* conv_transpose */
    int nkernel; int64_t kernel_size[IC_MAX_RANK];            /* pools */
    bool ceil_mode, count_include_pad;                        /* pools (false, true) */
    bool has_divisor; int64_t divisor_override;               /* avg_pool */
    int noutput_size; int64_t output_size[IC_MAX_RANK];       /* adaptive pools */
    int nsize; int64_t size[IC_MAX_RANK];                     /* interpolate */
    int nscale; double scale_factor[IC_MAX_RANK];             /* interpolate */
    bool align_corners;                                       /* interpolate */
    /* --- nn ops (issue 12) --- */
    int64_t num_groups;             /* group_norm (required) */
    bool is_causal;                 /* scaled_dot_product_attention (false) */
    bool has_scale; double scale;   /* scaled_dot_product_attention (absent: 1/sqrt(E)) */
    bool fused;                     /* scaled_dot_product_attention: computed by one fused kernel,
                                     * softmax(q k^T * scale + mask) v in f32 with no rounding in
                                     * between, instead of its expansion (set by the GPU compile's
                                     * attention rewrite; never read from or written to JSON).
                                     * Graphs built by callers leave it and the two below false:
                                     * the CPU backend refuses fused attention kernels */
    bool round_scores;              /* fused sdpa that replaces the exported chain of f16/bf16
                                     * ops: its scores are rounded to the dtype where the chain
                                     * stored them (q kᵀ, scaled, masked), as the unfused chain
                                     * and the reference executor round them */
    bool transpose_out;             /* fused sdpa: the result with dims -3 and -2 swapped,
                                     * [..., L, H, E] for q [..., H, L, E]: the layout the graph
                                     * permutes it back to (BERT's [B, S, H, D]) */
    int64_t diagonal;               /* triu tril (0) */
    double min_val, max_val;        /* hardtanh (-1, 1) */
    double alpha;                   /* elu (1) */
} ic_attrs;

enum { IC_PAD_CONSTANT, IC_PAD_REFLECT, IC_PAD_REPLICATE, IC_PAD_CIRCULAR };
enum { IC_INTERP_NEAREST, IC_INTERP_NEAREST_EXACT, IC_INTERP_LINEAR, IC_INTERP_BILINEAR,
       IC_INTERP_TRILINEAR };
enum { IC_PADDING_INTS, IC_PADDING_SAME, IC_PADDING_VALID };

IC_API void ic_attrs_init(ic_attrs *a, ic_op op);

typedef struct ic_graph ic_graph;

/* A read-only view of one node (borrowed from the graph, valid while it lives). */
typedef struct ic_node_info {
    const char *name;
    ic_op op;
    ic_dtype dtype;
    int rank;
    const ic_dim *shape;
    int ninputs;
    const ic_operand *inputs;
    const ic_attrs *attrs;      /* NULL for inputs and params */
    /* inputs: */
    bool has_range; int64_t range_lo, range_hi;
    /* params: */
    const char *file, *key;     /* NULL when supplied at run time */
    const void *data;           /* loaded weights (row-major), NULL when supplied at run time */
} ic_node_info;

/* Creates an empty graph; the caller owns *out (ic_graph_destroy). */
IC_API ic_status ic_graph_create(ic_ctx *c, const char *name, ic_graph **out);
IC_API void ic_graph_destroy(ic_graph *g);
IC_API ic_ctx *ic_graph_ctx(const ic_graph *g);
IC_API const char *ic_graph_name(const ic_graph *g);
/* The file the graph came from, used to locate errors; NULL for built graphs. */
IC_API const char *ic_graph_source(const ic_graph *g);

/* The dim for symbol `name`, creating the symbol on first use. */
IC_API ic_status ic_graph_symbol(ic_graph *g, const char *name, ic_dim *out);
IC_API int ic_graph_num_symbols(const ic_graph *g);
IC_API const char *ic_graph_symbol_name(const ic_graph *g, int sym);

/* Inputs: supplied at each run. range (lo < hi) only guides generated data; pass NULL. */
IC_API ic_status ic_graph_add_input(ic_graph *g, const char *name, ic_dtype dt, int rank,
                                    const ic_dim *shape, ic_value *out);
IC_API ic_status ic_graph_set_input_range(ic_graph *g, ic_value v, int64_t lo, int64_t hi);

/* Params: weights. With data (row-major, dtype dt, nbytes matching the shape) the graph
 * copies it; with data NULL the param is supplied at run time like an input. file/key, when
 * not NULL, record where the weights came from (written back by ic_graph_save_json). */
IC_API ic_status ic_graph_add_param(ic_graph *g, const char *name, ic_dtype dt, int rank,
                                    const ic_dim *shape, const void *data, size_t nbytes,
                                    const char *file, const char *key, ic_value *out);

/* Adds an op node; attrs may be NULL for defaults. Infers dtype and shape; on an error the
 * graph is unchanged and the message names the node, the op and the shapes. */
IC_API ic_status ic_graph_add_node(ic_graph *g, const char *name, ic_op op, int ninputs,
                                   const ic_operand *inputs, const ic_attrs *attrs, ic_value *out);
/* Shorthands for ic_graph_add_node. */
IC_API ic_status ic_graph_unary(ic_graph *g, const char *name, ic_op op, ic_operand x, ic_value *out);
IC_API ic_status ic_graph_binary(ic_graph *g, const char *name, ic_op op, ic_operand a,
                                 ic_operand b, ic_value *out);

IC_API ic_status ic_graph_add_output(ic_graph *g, ic_value v);

IC_API int ic_graph_num_nodes(const ic_graph *g);        /* inputs, params and ops */
IC_API void ic_graph_node(const ic_graph *g, ic_value v, ic_node_info *out);
IC_API bool ic_graph_find(const ic_graph *g, const char *name, ic_value *out);
IC_API int ic_graph_num_outputs(const ic_graph *g);
IC_API ic_value ic_graph_output(const ic_graph *g, int i);

/* Run-time arguments: the inputs, then the params without data, in definition order. */
IC_API int ic_graph_num_args(const ic_graph *g);
IC_API ic_value ic_graph_arg(const ic_graph *g, int i);

/* Checks every invariant (names, operand order, inferred shapes, outputs). Run by the
 * loader and by every compile; cheap. */
IC_API ic_status ic_graph_verify(const ic_graph *g);

/* Symbol values: vals[sym] for sym < ic_graph_num_symbols, -1 = unbound. */
IC_API ic_status ic_graph_bind(const ic_graph *g, const char *sym, int64_t value, int64_t *vals);
/* Evaluates a dim under vals; error if a symbol is unbound or the size overflows. */
IC_API ic_status ic_graph_eval_dim(const ic_graph *g, ic_dim d, const int64_t *vals, int64_t *out);

/* A new graph with every symbol replaced by its value (vals as above, all bound). Shapes
 * are re-inferred. The result borrows param data from g: destroy it before g. */
IC_API ic_status ic_graph_specialize(const ic_graph *g, const int64_t *vals, ic_graph **out);

/* ic-graph JSON v1 (../spec/graph-format.md). Load is all-or-nothing: on error *out is NULL
 * and the message names the file, the node and what is wrong. Params with "file" are read
 * (mmap) from safetensors beside the graph and validated. The caller owns *out. */
IC_API ic_status ic_graph_load_json(ic_ctx *c, const char *path, ic_graph **out);
/* The same from text in memory; dir is the folder param "file" paths are relative to (NULL =
 * the current folder); messages name the source "<string>". */
IC_API ic_status ic_graph_load_json_string(ic_ctx *c, const char *text, const char *dir,
                                           ic_graph **out);
/* Writes atomically (temp file + rename). Params with data and no file are written to
 * "<path without .json>.safetensors" beside it, also atomically. */
IC_API ic_status ic_graph_save_json(const ic_graph *g, const char *path);

/* One node a line, with inferred dtypes and shapes (ic-dump --stage graph). */
IC_API void ic_graph_print(FILE *f, const ic_graph *g);
/* Formats a shape like "[B, 128, 768]" into buf. */
IC_API const char *ic_graph_shape_str(const ic_graph *g, int rank, const ic_dim *shape,
                                      char *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif
