/* lower-impl.h - private structures of the Lower layer, shared with lib/Fuse: the program,
 * node classes, and the schedule (which nodes are materialised, which kernel computes what)
 * from which ic__program_build generates loop IR. ic_lower builds a one-kernel-per-op
 * schedule; ic_fuse builds a grouped one. */
#ifndef IC_LOWER_IMPL_H
#define IC_LOWER_IMPL_H

#include "graph-impl.h"
#include "ic/lower.h"

/* A graph programs share and the last one destroys: the expansion ic_lower made of a graph
 * with composite ops, kept alive by the programs Fuse builds from that one. */
typedef struct ic__gshare {
    ic_graph *g;
    int refs;
} ic__gshare;

struct ic_program {
    ic_ctx *c;
    ic_arena arena;        /* kernels, stages, instructions, names, node lists */
    const ic_graph *g;     /* borrowed, or owned through own */
    ic__gshare *own;       /* NULL unless g is an expansion made by ic_lower */
    int nbufs, capbufs;
    ic_buffer *bufs;       /* ic__realloc'd */
    int nkernels, capkernels;
    ic_kernel *kernels;    /* ic__realloc'd */
    int *node_buf;         /* per graph node: the buffer its value is loaded from, -1 none */
    int64_t arena_bytes;   /* TEMP storage, set by ic__program_plan */
};

/* What a node is to the lowering. */
typedef enum {
    IC__CL_LEAF,   /* input or param: loaded from its buffer */
    IC__CL_VIEW,   /* reshape permute transpose expand unsqueeze squeeze slice: index math */
    IC__CL_PW,     /* one output element from a few input elements: unary binary where
                    * cast cat embedding full arange */
    IC__CL_RED,    /* sum mean amax amin prod argmax */
    IC__CL_NORM,   /* softmax log_softmax layer_norm rms_norm (reductions + a row pass) */
    IC__CL_MM,     /* matmul linear bmm: a reduction over K of loaded operands */
    IC__CL_ATTN,   /* scaled_dot_product_attention with ic_attrs.fused: one attention kernel
                    * of its own (ic_kernel.attn), operands read from memory */
} ic__class;

IC_HIDDEN ic__class ic__node_class(const ic_node *n);
static inline bool ic__reduce_like(ic__class k)
{
    return k == IC__CL_RED || k == IC__CL_NORM || k == IC__CL_MM || k == IC__CL_ATTN;
}

/* The schedule: kernels ("groups") run in order 0..ngroups-1. A computing node with
 * group[v] >= 0 is materialised by that kernel (stored when something outside the kernel
 * reads it, or it is an output); a computing node with group -1 is computed inline wherever
 * it is read. Reductions, normalisations and matmuls always have a group. Outputs that are
 * views, inputs or params are stored by out_group[i]. */
typedef struct ic__sched {
    int ngroups;
    int *group;               /* per graph node */
    int *out_group;           /* per graph output position */
    const char *const *why;   /* per group, may be NULL */
    const char *prefix;       /* kernel name prefix, "cpu_" */
    bool emulate_casts;       /* round inlined f16/bf16 values as if they had been stored */
    bool collapse;            /* merge adjacent loop dims where no index needs div/mod for it */
    bool stash_rows;          /* softmax / layer_norm keep per-element intermediates in their
                               * output between passes (ic_fuse_options.stash_norm_rows) */
} ic__sched;

/* Nodes some output depends on (live[v]); callers free with ic__free. */
IC_HIDDEN bool *ic__live_nodes(ic_ctx *c, const ic_graph *g);
/* IC_EUNSUPPORTED naming the node when g still has symbolic dims. */
IC_HIDDEN ic_status ic__check_specialised(ic_ctx *c, const ic_graph *g);
/* Lowers g under schedule s into a new program (buffers, kernels, arena plan). */
IC_HIDDEN ic_status ic__program_build(ic_ctx *c, const ic_graph *g, const ic__sched *s,
                                      ic_program **out);
/* The one-kernel-per-op program (ic_lower; ic_fuse under IC_NO_FUSION); reason, when not
 * NULL, replaces the kernels' default "why". */
IC_HIDDEN ic_status ic__lower_unfused(ic_ctx *c, const ic_graph *g, const char *reason,
                                      const char *prefix, ic_program **out);
/* Generates kernel `group` of s and throws it away: true when it lowers, otherwise false
 * with the reason (e.g. "'mm' reads its operands from memory") in why. */
IC_HIDDEN bool ic__sched_try(ic_ctx *c, const ic_graph *g, const ic__sched *s, int group,
                             char *why, size_t n);
/* The one place kernel names are made: prefix + op names of the computing nodes
 * ("cpu_fused_add_mul_3", "cpu_softmax_0", "cpu_copy_2"). */
IC_HIDDEN void ic__kernel_name(char *buf, size_t n, const char *prefix, const ic_graph *g,
                               int nnodes, const char *const *nodes, int index);
/* The GPU's attention rewrite (attention.c) of a specialised graph: every
 * scaled_dot_product_attention that the fused attention kernel computes is marked
 * ic_attrs.fused (not expanded), and the pattern exported graphs spell it as,
 *     matmul(q, kT) -> mul or div by a constant -> [add mask] -> softmax(-1) -> matmul(., v),
 * with no other reader of the intermediates, becomes such an sdpa. *out is NULL when nothing
 * changes; it borrows g's param data (destroy it first). */
IC_HIDDEN ic_status ic__graph_fuse_attention(ic_ctx *c, const ic_graph *g, ic_graph **out);

/* Assigns arena offsets to TEMP buffers (liveness-based reuse) and sets arena_bytes. */
IC_HIDDEN void ic__program_plan(ic_program *p);

/* Register type of a dtype: f16/bf16 are computed in f32, u8/i8/i16 in i32 (loads widen,
 * stores truncate, and every result of a narrow dtype is wrapped to its width). */
static inline ic_dtype ic__regty(ic_dtype t)
{
    return t == IC_F16 || t == IC_BF16 ? IC_F32 : ic__narrow_int(t) ? IC_I32 : t;
}

/* dst reads src's graph: it shares src's ownership of it (if any). */
IC_HIDDEN void ic__program_share_graph(ic_program *dst, const ic_program *src);

#endif
