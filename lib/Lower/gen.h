/* gen.h - Lower-private machinery: hash tables, index expressions (index.c), the
 * instruction builder with CSE (builder.c), and the kernel generator context shared by
 * kernel.c (domains, stages, stores), eval.c (pointwise ops, views) and decompose.c
 * (reductions, normalisations, matmul). */
#ifndef IC_GEN_H
#define IC_GEN_H

#include "lower-impl.h"

/* ---- a small open-addressing hash table of non-NULL pointers ---- */

typedef struct {
    ic_ctx *c;
    uint64_t *hash;
    void **item;
    size_t cap, n;
} ic__tab;

IC_HIDDEN void ic__tab_init(ic__tab *t, ic_ctx *c);
IC_HIDDEN void ic__tab_free(ic__tab *t);
IC_HIDDEN void ic__tab_clear(ic__tab *t);
/* The item with hash h that eq(item, key) accepts, or NULL. */
IC_HIDDEN void *ic__tab_find(const ic__tab *t, uint64_t h,
                             bool (*eq)(const void *item, const void *key), const void *key);
IC_HIDDEN bool ic__tab_put(ic__tab *t, uint64_t h, void *item);
static inline uint64_t ic__mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

/* ---- index expressions ----
 * An expression is c0 + sum coef[i] * atom[i]; atoms are loop variables, floor division
 * and remainder by a positive constant, clamps, and values loaded at run time. Both are
 * hash-consed per kernel, so equal expressions are equal pointers. Every expression knows
 * its value range, which lets (i*B + j) / B simplify to i and (x/B)*B + x%B to x. */

enum { IC__IXA_VAR, IC__IXA_DIV, IC__IXA_MOD, IC__IXA_VAL, IC__IXA_CLAMP };

typedef struct ic__ix ic__ix;
typedef struct ic__ixatom {
    int id, kind;
    int var;             /* VAR */
    int instr, stage;    /* VAL: an I64 instruction of that stage */
    const ic__ix *e;     /* DIV MOD CLAMP */
    int64_t k;           /* DIV MOD */
    int64_t lo, hi;      /* value range (CLAMP: the bounds) */
} ic__ixatom;

struct ic__ix {
    int id, n;
    int64_t c0, lo, hi;
    const int64_t *coef;
    const ic__ixatom *const *atom; /* sorted by id */
};

typedef struct {
    ic_arena *ar;
    ic__tab atoms, exprs;
    int natoms, nexprs;
    bool oom;
} ic__ixtab;

IC_HIDDEN void ic__ix_init(ic__ixtab *t, ic_arena *ar);
IC_HIDDEN void ic__ix_free(ic__ixtab *t);
IC_HIDDEN const ic__ix *ic__ix_const(ic__ixtab *t, int64_t k);
IC_HIDDEN const ic__ix *ic__ix_var(ic__ixtab *t, int var, int64_t size);
IC_HIDDEN const ic__ix *ic__ix_val(ic__ixtab *t, int instr, int stage, int64_t lo, int64_t hi);
IC_HIDDEN const ic__ix *ic__ix_add(ic__ixtab *t, const ic__ix *a, const ic__ix *b);
IC_HIDDEN const ic__ix *ic__ix_scale(ic__ixtab *t, const ic__ix *a, int64_t k);
IC_HIDDEN const ic__ix *ic__ix_addc(ic__ixtab *t, const ic__ix *a, int64_t k);
IC_HIDDEN const ic__ix *ic__ix_div(ic__ixtab *t, const ic__ix *a, int64_t k);
IC_HIDDEN const ic__ix *ic__ix_mod(ic__ixtab *t, const ic__ix *a, int64_t k);
IC_HIDDEN const ic__ix *ic__ix_clamp(ic__ixtab *t, const ic__ix *a, int64_t lo, int64_t hi);
static inline bool ic__ix_is_const(const ic__ix *e, int64_t *k)
{
    if (e->n)
        return false;
    if (k)
        *k = e->c0;
    return true;
}
/* Row-major flat offset of idx in shape (rank dims). */
IC_HIDDEN const ic__ix *ic__ix_linear(ic__ixtab *t, int rank, const int64_t *shape,
                                      const ic__ix *const *idx);
/* The multi-index of flat offset e in shape (inverse of ic__ix_linear). */
IC_HIDDEN void ic__ix_delinear(ic__ixtab *t, const ic__ix *e, int rank, const int64_t *shape,
                               const ic__ix **idx);

/* ---- scalar values and conversions (shared by constant folding and the interpreter) ---- */

typedef union { double f; int64_t i; } ic__val;

static inline bool ic__is_fp(ic_dtype t) { return ic_dtype_is_float(t); }
/* v (a value of type from: floats in .f, integers and bool in .i) converted to type to:
 * floats round to the target's precision (f16/bf16 to nearest even), float -> integer
 * truncates toward zero and saturates (NaN -> 0), x -> bool is x != 0. */
IC_HIDDEN ic__val ic__convert(ic__val v, ic_dtype from, ic_dtype to);
/* Rounds a double to what type t can hold (F32: float; F16/BF16: their precision). */
IC_HIDDEN double ic__round_fp(ic_dtype t, double f);

/* ---- the instruction builder ---- */

typedef struct {
    ic_stage_kind kind;
    int n, cap;
    ic_linstr *ins;
    ic__tab cse;
} ic__kbstage;

typedef struct ic__kb {
    ic_ctx *c;
    int nstages, capstages, cur;
    ic__kbstage *st;
    bool oom;
    ic__tab ixmemo;      /* (stage, ix id) -> instr, for emitted index expressions */
    ic_arena *ar;
} ic__kb;

IC_HIDDEN void ic__kb_init(ic__kb *b, ic_ctx *c, ic_arena *ar);
IC_HIDDEN void ic__kb_free(ic__kb *b);
IC_HIDDEN int ic__kb_stage(ic__kb *b, ic_stage_kind kind);   /* starts a stage: its index */
IC_HIDDEN int ic__kb_emit(ic__kb *b, ic_linstr in);          /* CSE'd, simplified */
IC_HIDDEN ic_dtype ic__kb_type(const ic__kb *b, int i);      /* of instr i, current stage */
IC_HIDDEN int ic__kb_const_f(ic__kb *b, ic_dtype t, double f);
IC_HIDDEN int ic__kb_const_i(ic__kb *b, ic_dtype t, int64_t i);
IC_HIDDEN int ic__kb_un(ic__kb *b, ic_lop op, ic_dtype t, int a);
IC_HIDDEN int ic__kb_bin(ic__kb *b, ic_lop op, ic_dtype t, int a, int c);
IC_HIDDEN int ic__kb_cast(ic__kb *b, ic_dtype t, int a);
IC_HIDDEN int ic__kb_cmp(ic__kb *b, ic_cmp cmp, int a, int c);
/* exp(a) for an a that is <= 0 or NaN by construction (IC_LF_EXP_LE0). */
IC_HIDDEN int ic__kb_exp_le0(ic__kb *b, ic_dtype t, int a);
IC_HIDDEN int ic__kb_select(ic__kb *b, int cond, int a, int c);
IC_HIDDEN int ic__kb_var(ic__kb *b, int var);
IC_HIDDEN int ic__kb_load(ic__kb *b, int buf, ic_dtype t, int off);
IC_HIDDEN void ic__kb_store(ic__kb *b, int buf, int off, int val);
IC_HIDDEN int ic__kb_reduce(ic__kb *b, ic_red red, ic_dtype t, int val, int index);
/* REDUCE MAX that may drop NaN operands (IC_LF_NAN_FREE): softmax's row max. */
IC_HIDDEN int ic__kb_max_nan_free(ic__kb *b, ic_dtype t, int val);
IC_HIDDEN int ic__kb_acc(ic__kb *b, int stage, int instr);
/* Removes instructions no store or read reduction needs (run once, at the end). */
IC_HIDDEN void ic__kb_dce(ic__kb *b);
/* Emits e as I64 instructions of the current stage (memoised). */
IC_HIDDEN int ic__kb_ix(ic__kb *b, const ic__ix *e);

/* ---- the kernel generator ---- */

#define IC__MAXSTAGES 16

typedef struct {
    bool planned;
    int stage0, stage1;  /* stage of the first reduce; the second pass of softmax and
                          * layer_norm (-1 otherwise) */
    int last;            /* last of them: the value is available in later stages */
    int r0, r1, r2;      /* reduce instrs: r0 in stage0; r1 (and r2) in stage1 or stage0 */
    int stash;           /* buffer holding a per-element intermediate of the row between
                          * stages (softmax: exp(x - max)), -1 when it is recomputed */
} ic__redinfo;

/* A logical dim of the kernel domain and the index expression that walks it. */
typedef struct {
    int64_t size;
    const ic__ix *ix;
} ic__ldim;

typedef struct ic__gen {
    ic_ctx *c;
    const ic_graph *g;
    const ic__sched *s;
    const ic_program *p;     /* buffers and node_buf */
    int group;
    ic_arena ar;             /* scratch: index expressions, memo keys */
    ic__ixtab ix;
    ic__kb kb;
    /* domain */
    int nodims, nidims, nrdims;      /* logical outer, inner, row dims (non-1 sizes) */
    ic__ldim od[IC_MAX_RANK], id[IC_MAX_RANK], rd[IC_MAX_RANK];
    bool has_row;                    /* row-level nodes allowed (reduction/norm anchor) */
    int nouter, ninner;
    int64_t outer[IC_MAX_RANK], inner[IC_MAX_RANK];
    /* per node */
    ic__redinfo *red;
    int *avail;              /* memo: first stage the value can be computed in, -2 unknown */
    bool *used;              /* computed (not loaded) in this kernel */
    ic__tab memo;            /* (stage, node, idx) -> instr */
    bool load_only;          /* evaluating matmul operands: no inline computation */
    bool probe;              /* finding an attention operand's view: a load records its
                              * buffer and flat index (probe_buf, probe_ix) instead */
    int probe_buf;
    const ic__ix *probe_ix;
    bool failed;
    char why[256];
} ic__gen;

IC_HIDDEN bool ic__gen_fail(ic__gen *G, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Value of node v at multi-index idx (one expression per dim of v), as an instruction of
 * the current stage with type ic__regty(v's dtype); -1 after ic__gen_fail. */
IC_HIDDEN int ic__eval(ic__gen *G, ic_value v, const ic__ix *const *idx);
/* Operand i of n evaluated at n's idx (broadcast) and converted to type t. */
IC_HIDDEN int ic__eval_operand(ic__gen *G, const ic_node *n, int i, const ic__ix *const *idx,
                               ic_dtype t);
IC_HIDDEN int ic__eval_pointwise(ic__gen *G, const ic_node *n, const ic__ix *const *idx);
IC_HIDDEN int ic__eval_view(ic__gen *G, const ic_node *n, const ic__ix *const *idx);
IC_HIDDEN int ic__load_node(ic__gen *G, ic_value v, const ic__ix *const *idx);

/* decompose.c: reductions, normalisations, matmul. red_emit emits v's reduces that were
 * planned (ic__avail) into `stage`; red_value is v's value at idx in a later stage. */
IC_HIDDEN bool ic__red_emit(ic__gen *G, ic_value v, int stage);
IC_HIDDEN int ic__red_value(ic__gen *G, ic_value v, const ic__ix *const *idx);
/* Natural index of reduction-like n's input (kept dims -> outer, reduced -> inner) and
 * output; false when n's shapes do not fit the kernel domain. */
IC_HIDDEN bool ic__nat_input(ic__gen *G, const ic_node *n, const ic__ix **idx);
IC_HIDDEN bool ic__nat_output(ic__gen *G, const ic_node *n, const ic__ix **idx);
/* Natural index of a tensor of this shape at the outer level / the row level. */
IC_HIDDEN bool ic__nat_outer(ic__gen *G, int rank, const ic_dim *shape, const ic__ix **idx);
IC_HIDDEN bool ic__nat_row(ic__gen *G, int rank, const ic_dim *shape, const ic__ix **idx);
IC_HIDDEN bool ic__idx_eq(int rank, const ic__ix *const *a, const ic__ix *const *b);
/* First stage node v's value can be computed in (0 = needs no reduction of this kernel). */
IC_HIDDEN int ic__avail(ic__gen *G, ic_value v);

/* attention.c: the affine view attention operand v (right-aligned to the kernel's nb batch
 * dims of sizes batch[], then rows of R and columns of C) takes of its buffer; false (after
 * ic__gen_fail) when it is none. */
IC_HIDDEN bool ic__attn_operand(ic__gen *G, ic_value v, int nb, const int64_t *batch, int64_t R,
                                int64_t C, ic_attn_operand *o);

/* kernel.c: generates kernel `group` of s storing items (node value -> buffer). keep:
 * append it to p; otherwise only check that it lowers (why says why not). */
typedef struct { ic_value v; int buf; } ic__store;
IC_HIDDEN bool ic__gen_kernel(ic_program *p, const ic__sched *s, int group, const ic__store *items,
                              int nitems, bool keep, char *why, size_t nwhy);

static inline const ic_node *ic__gnode(const ic__gen *G, ic_value v) { return G->g->nodes[v]; }
static inline int64_t ic__dim(const ic_node *n, int i) { return n->shape[i].coef; }
/* Is v computed in this kernel (rather than loaded)? */
IC_HIDDEN bool ic__computed_here(const ic__gen *G, ic_value v);

#endif
