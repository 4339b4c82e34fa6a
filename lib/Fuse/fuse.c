/* fuse.c - the scheduler: decides which values are materialised and which kernels compute
 * them, then has the Lower layer generate the grouped program.
 *
 * requires: a specialised graph (the input program's), every op lowerable one per kernel;
 * keeps:    results (up to the rounding of fused f16/bf16 intermediates when
 *           emulate_precision_casts is off), the order of outputs and arguments;
 * breaks:   the one-kernel-per-op correspondence; kernel and buffer numbering.
 *
 * 1. Realize: reductions, normalisations and matmuls are always materialised; a pointwise
 *    node is materialised when it is a graph output, a matmul operand (reading it inline
 *    would recompute it for every output column) unless it is a cheap producer (a cast, a
 *    scale: cheap_producer) that the GEMM applies once per element as it packs or copies
 *    the operand, or expensive and read more than once. Every other pointwise node is
 *    computed inline wherever it is read.
 * 2. Group: each materialised node starts as its own kernel; a producer kernel is merged
 *    into a consumer kernel when the merged kernel lowers (same loop domain, reductions read
 *    only where they are computed, matmul operands still loaded) and no other kernel sits
 *    between them. What a failed merge says becomes the producer's "why".
 * 3. Order the kernels topologically and generate them (ic__program_build). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lower-impl.h"
#include "ic/fuse.h"

void ic_fuse_options_init(ic_fuse_options *o)
{
    memset(o, 0, sizeof *o);
    o->emulate_precision_casts = true;
    o->collapse_dims = true;
    o->max_inline_ops = 32;
    o->prefix = "cpu_";
    o->stash_norm_rows = true;
}

typedef struct {
    ic_ctx *c;
    const ic_graph *g;
    const ic_fuse_options *o;
    int n, nout, ng;
    bool *live;
    int *grp;            /* per node: its kernel, -1 = inline / view / leaf */
    int *ogrp;           /* per output position */
    int *src_off, *src;  /* per root (node v, then output position nout + i): realized reads */
    bool *dep;           /* ng x ng: dep[x * ng + y] = kernel x reads kernel y */
    bool *alive;         /* per group */
    char **why;          /* per node: why it is materialised */
    int *cost;           /* per node: ops when inlined */
    bool *costly;        /* per node: materialised because recomputing it would cost */
    bool *mm_operand;    /* per node: read by a matmul or an attention as an operand */
    ic_value *mm_reader; /* per node: the first matmul reading it as an operand, or the last
                          * attention (which never inlines its operands) */
    ic_value *win_reader; /* per node: the conv window copy gathering it (window_source), or -1 */
} fz;

static const ic_node *N(const fz *f, ic_value v) { return ic__node(f->g, v); }
static ic__class cls(const fz *f, ic_value v) { return ic__node_class(N(f, v)); }

static ic_value base_of(const fz *f, ic_value v)
{
    while (cls(f, v) == IC__CL_VIEW)
        v = N(f, v)->in[0].node;
    return v;
}

static void set_why(fz *f, ic_value v, const char *fmt, const char *a, const char *b)
{
    if (f->why[v])
        return;
    char buf[300];
    snprintf(buf, sizeof buf, fmt, a, b);
    f->why[v] = ic__strdup(f->c, buf);
}

/* ---- 1. what is materialised ---- */

static int op_weight(const ic_node *n)
{
    switch (n->info.op) {
    case IC_OP_GELU: case IC_OP_SOFTPLUS: return 8;
    case IC_OP_LOG1P: case IC_OP_EXPM1: case IC_OP_REMAINDER: return 4;
    case IC_OP_SILU: case IC_OP_SIGMOID: case IC_OP_POW: case IC_OP_HARDSWISH: return 3;
    case IC_OP_HARDSIGMOID: case IC_OP_LEAKY_RELU: case IC_OP_SIGN: return 2;
    case IC_OP_EXP: case IC_OP_LOG: case IC_OP_TANH: case IC_OP_ERF: case IC_OP_SIN:
    case IC_OP_COS: return 2;
    case IC_OP_CAT: return n->info.ninputs + 1;
    case IC_OP_MISH: return 10; /* --- nn ops: exp, log1p, tanh */
    case IC_OP_ELU: return 5;   /* expm1 */
    case IC_OP_GATHER: case IC_OP_INDEX_SELECT: case IC_OP_TRIU: case IC_OP_TRIL: return 2;
    default: return 1;
    }
}

static bool is_output(const fz *f, ic_value v)
{
    for (int i = 0; i < f->nout; i++)
        if (ic_graph_output(f->g, i) == v)
            return true;
    return false;
}

static int64_t numel(const fz *f, ic_value v)
{
    const ic_node *n = N(f, v);
    int64_t k = ic__shape_numel(n->info.rank, n->shape);
    return k > 0 ? k : 1;
}

/* How many times consumer v evaluates each element of b: a broadcasting read (b has
 * fewer elements than v computes) counts once per copy; cat reads all its inputs. */
static int64_t reads(const fz *f, ic_value v, ic_value b)
{
    const ic_node *n = N(f, v);
    int64_t r = cls(f, v) == IC__CL_PW ? numel(f, v) / numel(f, b) : 1;
    if (n->info.op == IC_OP_CAT)
        r *= n->info.ninputs;
    return r < 1 ? 1 : r > 1000000 ? 1000000 : r;
}

static bool is_float(ic_dtype t) { return t == IC_F32 || t == IC_F64 || t == IC_F16 || t == IC_BF16; }

/* A pointwise producer cheap enough to run on a matmul operand as the GEMM loads it (once per
 * element packed or copied to shared memory, not per output column): a float cast, neg, abs,
 * relu, or +-*÷ by a number, of an input or param (through views), or (up to `depth` deep) of
 * such a producer. Anything else is materialised as before; so is a producer of a computed
 * value, which that value's kernel applies once as its epilogue instead. */
static bool cheap_producer(const fz *f, ic_value v, int depth)
{
    const ic_node *n = N(f, v);
    if (depth <= 0 || cls(f, v) != IC__CL_PW || !is_float(n->info.dtype))
        return false;
    switch (n->info.op) {
    case IC_OP_CAST: case IC_OP_NEG: case IC_OP_ABS: case IC_OP_RELU:
    case IC_OP_ADD: case IC_OP_SUB: case IC_OP_MUL: case IC_OP_DIV:
        break;
    default:
        return false;
    }
    int tensors = 0;
    ic_value in = -1;
    for (int i = 0; i < n->info.ninputs; i++)
        if (n->in[i].node >= 0)
            tensors++, in = n->in[i].node;
        else if (n->in[i].node != IC_SCALAR)
            return false;
    if (tensors != 1 || !is_float(N(f, in)->info.dtype))
        return false;
    ic_value b = base_of(f, in);
    return cls(f, b) == IC__CL_LEAF || (f->grp[b] < 0 && cheap_producer(f, b, depth - 1));
}

/* The pointwise value the window copy b (a conv's im2col: a pad materialised as a matmul
 * operand) gathers, through views and the zero pad; -1 if none. Inline there, it would be
 * recomputed for every tap of the window (9x for 3x3), and the copy would no longer be the
 * pure gather the GPU's implicit GEMM reads instead of it (lib/PTX/iconv.c); materialised,
 * it becomes its producer's epilogue (a conv's bias, batch norm and relu after its GEMM). */
static ic_value window_source(const fz *f, ic_value b)
{
    if (!f->mm_operand[b] || N(f, b)->info.op != IC_OP_PAD)
        return -1;
    ic_value p = N(f, b)->in[0].node;
    while (p >= 0 && (cls(f, p) == IC__CL_VIEW || N(f, p)->info.op == IC_OP_PAD))
        p = N(f, p)->in[0].node;
    return p >= 0 && cls(f, p) == IC__CL_PW ? p : -1;
}

static void realize(fz *f, int64_t *uses)
{
    for (int v = 0; v < f->n; v++) {
        const ic_node *n = N(f, v);
        for (int i = 0; f->live[v] && i < n->info.ninputs; i++)
            if (n->in[i].node >= 0) {
                ic_value b = base_of(f, n->in[i].node);
                uses[b] += reads(f, v, b);
                /* an attention reads every operand from memory, whatever other readers allow */
                bool mm = cls(f, v) == IC__CL_MM && i < 2, attn = cls(f, v) == IC__CL_ATTN;
                if (cls(f, b) != IC__CL_LEAF && ((mm && !f->mm_operand[b]) || attn)) {
                    f->mm_operand[b] = true;
                    f->mm_reader[b] = v;
                }
            }
    }
    for (int b = 0; b < f->n; b++) { /* mm_reader of a window's source: the window copy */
        ic_value p = f->live[b] ? window_source(f, b) : -1;
        if (p >= 0 && !f->mm_operand[p])
            f->win_reader[p] = b;
    }
    for (int v = 0; v < f->n; v++) {
        const ic_node *n = N(f, v);
        ic__class k = cls(f, v);
        f->cost[v] = 1;
        if (!f->live[v] || k == IC__CL_LEAF || k == IC__CL_VIEW)
            continue;
        int c = op_weight(n);
        for (int i = 0; i < n->info.ninputs; i++)
            if (n->in[i].node >= 0) {
                ic_value b = base_of(f, n->in[i].node);
                c += f->grp[b] >= 0 ? 1 : f->cost[b];
            }
        f->cost[v] = c > 1000000 ? 1000000 : c;
        bool expensive = (uses[v] > 1 && c > f->o->max_inline_ops) || c > 4 * f->o->max_inline_ops;
        /* a matmul operand is read from memory, unless it is a cheap producer the GEMM
         * applies as it loads (its inputs' groups are decided: they come first) */
        bool by_attn = f->mm_operand[v] && cls(f, f->mm_reader[v]) == IC__CL_ATTN;
        bool operand = f->mm_operand[v] && (by_attn || !cheap_producer(f, v, 4));
        if (operand)
            set_why(f, v, by_attn ? "'%s' is an operand of attention '%s' (operands are read from memory)"
                                  : "'%s' is an operand of matmul '%s' (operands are read from memory)",
                    n->info.name, N(f, f->mm_reader[v])->info.name);
        bool windowed = f->win_reader[v] >= 0 && !operand && !cheap_producer(f, v, 4);
        if (windowed)
            set_why(f, v, "'%s' is gathered by the window copy '%s' (computed there, it would be "
                    "repeated for each tap)", n->info.name, N(f, f->win_reader[v])->info.name);
        if (ic__reduce_like(k) || is_output(f, v) || operand || expensive || windowed) {
            f->grp[v] = f->ng++;
            f->costly[v] = expensive;
            if (expensive)
                set_why(f, v, "'%s' is costly to recompute for each of its %s", n->info.name,
                    uses[v] > 1 ? "reads (readers or broadcast copies)" : "uses");
        }
    }
    for (int i = 0; i < f->nout; i++) {
        ic_value v = ic_graph_output(f->g, i);
        f->ogrp[i] = f->grp[v] >= 0 ? f->grp[v] : f->ng++;
    }
}

/* Realized nodes and leaves the computation of v reads (through views and inline nodes). */
static void collect(const fz *f, ic_value v, int *stamp, int mark, int *out, int *k)
{
    if (stamp[v] == mark)
        return;
    stamp[v] = mark;
    ic__class c = cls(f, v);
    if (c == IC__CL_LEAF || (c != IC__CL_VIEW && f->grp[v] >= 0)) {
        out[(*k)++] = v; /* leaves too: kernels reading the same input may share a loop */
        return;
    }
    const ic_node *n = N(f, v);
    for (int i = 0; i < n->info.ninputs; i++)
        if (n->in[i].node >= 0)
            collect(f, n->in[i].node, stamp, mark, out, k);
}

static bool push_sources(fz *f, size_t *cap, int k, const int *tmp, int m)
{
    if ((size_t)(k + m) > *cap) {
        size_t nc = (*cap + (size_t)m) * 2;
        int *s = ic__realloc(f->c, f->src, sizeof(int) * nc);
        if (!s)
            return false;
        f->src = s;
        *cap = nc;
    }
    memcpy(f->src + k, tmp, sizeof(int) * (size_t)m);
    return true;
}

/* For every root (a realized node, or an output that is not one), the realized nodes it
 * reads, as f->src[f->src_off[r] .. f->src_off[r + 1]). */
static bool sources(fz *f)
{
    int roots = f->n + f->nout, k = 0;
    size_t cap = (size_t)f->n + 16;
    int *stamp = ic__calloc(f->c, (size_t)f->n + 1, sizeof(int));
    int *tmp = ic__calloc(f->c, (size_t)f->n + 1, sizeof(int));
    f->src_off = ic__calloc(f->c, (size_t)roots + 2, sizeof(int));
    f->src = ic__calloc(f->c, cap, sizeof(int));
    bool ok = stamp && tmp && f->src_off && f->src;
    for (int r = 0; ok && r < roots; r++) {
        int m = 0;
        f->src_off[r] = k;
        if (r < f->n && f->grp[r] >= 0) {
            const ic_node *n = N(f, r);
            stamp[r] = r + 1;
            for (int i = 0; i < n->info.ninputs; i++)
                if (n->in[i].node >= 0)
                    collect(f, n->in[i].node, stamp, r + 1, tmp, &m);
        } else if (r >= f->n && f->grp[ic_graph_output(f->g, r - f->n)] < 0) {
            collect(f, ic_graph_output(f->g, r - f->n), stamp, r + 1, tmp, &m);
        }
        ok = push_sources(f, &cap, k, tmp, m);
        k += m;
    }
    if (ok)
        f->src_off[roots] = k;
    ic__free(f->c, stamp);
    ic__free(f->c, tmp);
    return ok;
}

/* ---- 2. grouping ---- */

static int root_group(const fz *f, int r)
{
    return r < f->n ? f->grp[r] : f->grp[ic_graph_output(f->g, r - f->n)] < 0 ? f->ogrp[r - f->n] : -1;
}

static void dependencies(fz *f)
{
    memset(f->dep, 0, sizeof(bool) * (size_t)f->ng * (size_t)f->ng);
    for (int r = 0; r < f->n + f->nout; r++) {
        int x = root_group(f, r);
        if (x < 0)
            continue;
        for (int j = f->src_off[r]; j < f->src_off[r + 1]; j++) {
            int y = f->grp[f->src[j]];
            if (y >= 0 && y != x)
                f->dep[x * f->ng + y] = true;
        }
    }
}

/* Is kernel to reachable from kernel from along dep edges: to what a kernel reads (up), else
 * to who reads it, leaving out the direct edge from -> skip? A depth-first search over the
 * live kernels; true when out of memory (the answer that merges nothing). */
static bool reaches(const fz *f, int from, int to, bool up, int skip)
{
    int ng = f->ng, *stack = ic__malloc(f->c, sizeof(int) * (size_t)ng), sp = 0;
    bool *seen = ic__calloc(f->c, (size_t)ng, sizeof(bool)), found = false;
    if (!stack || !seen) {
        ic__free(f->c, stack);
        ic__free(f->c, seen);
        return true;
    }
    stack[sp++] = from;
    seen[from] = true;
    while (sp && !found) {
        int u = stack[--sp];
        for (int w = 0; w < ng && !found; w++)
            if (f->alive[w] && !seen[w] && !(u == from && w == skip) &&
                f->dep[up ? u * ng + w : w * ng + u]) {
                found = w == to;
                seen[w] = true;
                stack[sp++] = w;
            }
    }
    ic__free(f->c, stack);
    ic__free(f->c, seen);
    return found;
}

/* Would merging producer p into consumer c close a cycle through another kernel? (The
 * kernels form a DAG, so a path p -> .. -> c other than the direct edge is one.) */
static bool cycle(const fz *f, int p, int c)
{
    return reaches(f, p, c, false, c);
}

static void relabel(fz *f, int from, int to)
{
    for (int v = 0; v < f->n; v++)
        if (f->grp[v] == from)
            f->grp[v] = to;
    for (int i = 0; i < f->nout; i++)
        if (f->ogrp[i] == from)
            f->ogrp[i] = to;
}

static ic__sched sched_of(const fz *f)
{
    ic__sched s;
    memset(&s, 0, sizeof s);
    s.ngroups = f->ng;
    s.group = f->grp;
    s.out_group = f->ogrp;
    s.prefix = f->o->prefix ? f->o->prefix : "cpu_";
    s.emulate_casts = f->o->emulate_precision_casts;
    s.stash_rows = f->o->stash_norm_rows;
    return s;
}

static const char *anchor_name(const fz *f, int grp)
{
    for (int v = 0; v < f->n; v++)
        if (f->grp[v] == grp)
            return N(f, v)->info.name;
    for (int i = 0; i < f->nout; i++)
        if (f->ogrp[i] == grp)
            return N(f, ic_graph_output(f->g, i))->info.name;
    return "?";
}

/* A costly value of p that c would evaluate once per broadcast copy. */
static ic_value recomputed(const fz *f, int p, int c)
{
    for (int r = 0; r < f->n + f->nout; r++) {
        if (root_group(f, r) != c)
            continue;
        ic_value root = r < f->n ? r : ic_graph_output(f->g, r - f->n);
        for (int j = f->src_off[r]; j < f->src_off[r + 1]; j++)
            if (f->grp[f->src[j]] == p && f->costly[f->src[j]] && numel(f, root) > numel(f, f->src[j]))
                return f->src[j];
    }
    return -1;
}

/* Moves kernel `from` into kernel `to` if the result lowers; otherwise leaves both as they
 * were and says why. */
static bool try_relabel(fz *f, int from, int to, char *why, size_t n)
{
    int *save = ic__malloc(f->c, sizeof(int) * ((size_t)f->n + (size_t)f->nout + 1));
    if (!save) {
        snprintf(why, n, "out of memory");
        return false;
    }
    memcpy(save, f->grp, sizeof(int) * (size_t)f->n);
    memcpy(save + f->n, f->ogrp, sizeof(int) * (size_t)f->nout);
    relabel(f, from, to);
    ic__sched s = sched_of(f);
    bool ok = ic__sched_try(f->c, f->g, &s, to, why, n);
    if (ok) {
        f->alive[from] = false;
        dependencies(f);
    } else {
        memcpy(f->grp, save, sizeof(int) * (size_t)f->n);
        memcpy(f->ogrp, save + f->n, sizeof(int) * (size_t)f->nout);
    }
    ic__free(f->c, save);
    return ok;
}

static bool try_merge(fz *f, int p, int c)
{
    char why[256] = "";
    ic_value rv = recomputed(f, p, c);
    if (rv >= 0)
        snprintf(why, sizeof why, "it would be recomputed for every broadcast copy");
    else if (cycle(f, p, c))
        snprintf(why, sizeof why, "another kernel runs between them");
    else if (try_relabel(f, p, c, why, sizeof why))
        return true;
    for (int r = 0; r < f->n + f->nout; r++) {
        if (root_group(f, r) != c)
            continue;
        for (int j = f->src_off[r]; j < f->src_off[r + 1]; j++) {
            ic_value s = f->src[j];
            if (f->grp[s] == p && !f->why[s]) {
                char buf[400];
                snprintf(buf, sizeof buf, "'%s' is read by the kernel of '%s' (%s)", N(f, s)->info.name,
                         anchor_name(f, c), why);
                f->why[s] = ic__strdup(f->c, buf);
            }
        }
    }
    return false;
}

/* The lowest node id in each group: its place in graph order. */
static int group_key(const fz *f, int grp)
{
    for (int v = 0; v < f->n; v++)
        if (f->grp[v] == grp)
            return v;
    for (int i = 0; i < f->nout; i++)
        if (f->ogrp[i] == grp)
            return ic_graph_output(f->g, i);
    return f->n;
}

static void merge_all(fz *f)
{
    dependencies(f);
    bool *failed = ic__calloc(f->c, (size_t)f->ng * (size_t)f->ng, sizeof(bool));
    if (!failed)
        return;
    for (bool changed = true; changed;) {
        changed = false;
        for (int c = 0; c < f->ng && !changed; c++) {
            if (!f->alive[c])
                continue;
            for (int p = 0; p < f->ng && !changed; p++)
                if (p != c && f->alive[p] && f->dep[c * f->ng + p] && !failed[p * f->ng + c]) {
                    if (try_merge(f, p, c)) {
                        changed = true;
                        memset(failed, 0, sizeof(bool) * (size_t)f->ng * (size_t)f->ng);
                    } else {
                        failed[p * f->ng + c] = true;
                    }
                }
        }
    }
    ic__free(f->c, failed);
}

/* Does kernel x read kernel y, directly or through others? */
static bool depends(const fz *f, int x, int y)
{
    return reaches(f, x, y, true, -1);
}

/* What a kernel loops over: its first reduction's input shape and reduced axes, or for a
 * pointwise kernel the shape of what it stores first (rank -1: matmuls, never shared). */
typedef struct {
    int rank;
    int64_t shape[IC_MAX_RANK];
    uint32_t axes;
    bool reduce;
} domain_sig;

static domain_sig signature(const fz *f, int grp)
{
    domain_sig d = { -1, { 0 }, 0, false };
    ic_value first = -1;
    for (int v = 0; v < f->n && first < 0; v++)
        if (f->grp[v] == grp && ic__reduce_like(cls(f, v)))
            first = v;
    if (first >= 0 && (cls(f, first) == IC__CL_MM || cls(f, first) == IC__CL_ATTN))
        return d;
    const ic_node *n = NULL;
    if (first >= 0) {
        n = N(f, N(f, first)->in[0].node);
        d.axes = N(f, first)->axes;
        d.reduce = true;
    } else {
        for (int r = 0; r < f->n + f->nout && !n; r++)
            if (root_group(f, r) == grp)
                n = N(f, r < f->n ? r : ic_graph_output(f->g, r - f->n));
    }
    if (!n)
        return d;
    d.rank = n->info.rank;
    for (int i = 0; i < d.rank; i++)
        d.shape[i] = n->shape[i].coef;
    return d;
}

static bool same_domain(const domain_sig *x, const domain_sig *y)
{
    return x->rank >= 0 && x->rank == y->rank && x->axes == y->axes && x->reduce == y->reduce &&
           memcmp(x->shape, y->shape, sizeof(int64_t) * (size_t)x->rank) == 0;
}

static bool share_input(const fz *f, int a, int b, int *stamp)
{
    memset(stamp, 0, sizeof(int) * (size_t)f->n);
    for (int r = 0; r < f->n + f->nout; r++)
        if (root_group(f, r) == a)
            for (int j = f->src_off[r]; j < f->src_off[r + 1]; j++)
                stamp[f->src[j]] = 1;
    for (int r = 0; r < f->n + f->nout; r++)
        if (root_group(f, r) == b)
            for (int j = f->src_off[r]; j < f->src_off[r + 1]; j++)
                if (stamp[f->src[j]])
                    return true;
    return false;
}

/* Independent kernels over the same loops that read a common input become one kernel, so
 * the input is read once (e.g. sum and amax of the same rows). */
static void merge_siblings(fz *f)
{
    int *stamp = ic__calloc(f->c, (size_t)f->n + 1, sizeof(int));
    domain_sig *sig = ic__calloc(f->c, (size_t)f->ng + 1, sizeof *sig);
    char why[256];
    for (int x = 0; sig && x < f->ng; x++)
        sig[x] = f->alive[x] ? signature(f, x) : (domain_sig){ -1, { 0 }, 0, false };
    for (int b = 0; stamp && sig && b < f->ng; b++)
        for (int a = 0; a < b && f->alive[b]; a++) {
            if (!f->alive[a] || !same_domain(&sig[a], &sig[b]) || !share_input(f, a, b, stamp) ||
                depends(f, a, b) || depends(f, b, a))
                continue;
            try_relabel(f, b, a, why, sizeof why);
        }
    ic__free(f->c, stamp);
    ic__free(f->c, sig);
}

/* ---- 3. order and reasons ---- */

/* Renumbers the live groups in a topological order (ties: graph order). */
static bool order(fz *f, int *newid)
{
    int ng = f->ng, k = 0;
    bool *done = ic__calloc(f->c, (size_t)ng + 1, sizeof(bool));
    int *key = ic__calloc(f->c, (size_t)ng + 1, sizeof(int));
    if (!done || !key) {
        ic__free(f->c, done);
        ic__free(f->c, key);
        return false;
    }
    for (int x = 0; x < ng; x++)
        key[x] = group_key(f, x), newid[x] = -1;
    for (;;) {
        int best = -1;
        for (int x = 0; x < ng; x++) {
            if (!f->alive[x] || done[x])
                continue;
            bool ready = true;
            for (int y = 0; y < ng && ready; y++)
                ready = !(f->alive[y] && !done[y] && y != x && f->dep[x * ng + y]);
            if (ready && (best < 0 || key[x] < key[best]))
                best = x;
        }
        if (best < 0)
            break;
        done[best] = true;
        newid[best] = k++;
    }
    ic__free(f->c, done);
    ic__free(f->c, key);
    return true;
}

static char *group_why(const fz *f, int grp)
{
    char buf[512];
    size_t k = 0;
    buf[0] = 0;
    for (int v = 0; v < f->n && k < sizeof buf - 1; v++) {
        if (f->grp[v] != grp)
            continue;
        bool out = is_output(f, v), read = false;
        for (int r = 0; r < f->n + f->nout && !read; r++) {
            int x = root_group(f, r);
            for (int j = f->src_off[r]; x >= 0 && x != grp && j < f->src_off[r + 1]; j++)
                read |= f->src[j] == v;
        }
        if (!out && !read)
            continue;
        const char *w = out ? NULL : f->why[v];
        char tmp[420];
        if (out)
            snprintf(tmp, sizeof tmp, "'%s' is a graph output", N(f, v)->info.name);
        else
            snprintf(tmp, sizeof tmp, "%s", w ? w : "read by a later kernel");
        k += (size_t)snprintf(buf + k, sizeof buf - k, "%s%s", k ? "; " : "", tmp);
    }
    for (int i = 0; i < f->nout && k < sizeof buf - 1; i++) {
        ic_value v = ic_graph_output(f->g, i);
        if (f->ogrp[i] == grp && f->grp[v] < 0)
            k += (size_t)snprintf(buf + k, sizeof buf - k, "%soutput '%s' is %s", k ? "; " : "",
                                  N(f, v)->info.name, cls(f, v) == IC__CL_VIEW ? "a view, stored contiguous"
                                                                               : "an argument, copied");
    }
    return ic__strdup(f->c, buf);
}

static ic_status build(fz *f, ic_program **out)
{
    int ng = f->ng;
    int *newid = ic__calloc(f->c, (size_t)ng + 1, sizeof(int));
    char **why = ic__calloc(f->c, (size_t)ng + 1, sizeof(char *));
    int *grp = ic__calloc(f->c, (size_t)f->n + 1, sizeof(int));
    int *ogrp = ic__calloc(f->c, (size_t)f->nout + 1, sizeof(int));
    ic_status st = IC_OK;
    if (!newid || !why || !grp || !ogrp || !order(f, newid))
        st = ic__error(f->c, IC_ENOMEM, "out of memory");
    int k = 0;
    for (int x = 0; !st && x < ng; x++)
        if (f->alive[x] && newid[x] >= 0) {
            why[newid[x]] = group_why(f, x);
            k = newid[x] + 1 > k ? newid[x] + 1 : k;
        }
    for (int v = 0; !st && v < f->n; v++)
        grp[v] = f->grp[v] >= 0 ? newid[f->grp[v]] : -1;
    for (int i = 0; !st && i < f->nout; i++)
        ogrp[i] = newid[f->ogrp[i]];
    if (!st) {
        ic__sched s = sched_of(f);
        s.ngroups = k;
        s.group = grp;
        s.out_group = ogrp;
        s.why = (const char *const *)why;
        s.collapse = f->o->collapse_dims;
        st = ic__program_build(f->c, f->g, &s, out);
    }
    for (int x = 0; why && x < ng; x++)
        ic__free(f->c, why[x]);
    ic__free(f->c, why);
    ic__free(f->c, newid);
    ic__free(f->c, grp);
    ic__free(f->c, ogrp);
    return st;
}

static void fz_free(fz *f)
{
    for (int v = 0; f->why && v < f->n; v++)
        ic__free(f->c, f->why[v]);
    ic__free(f->c, f->why);
    ic__free(f->c, f->live);
    ic__free(f->c, f->grp);
    ic__free(f->c, f->ogrp);
    ic__free(f->c, f->src_off);
    ic__free(f->c, f->src);
    ic__free(f->c, f->dep);
    ic__free(f->c, f->alive);
    ic__free(f->c, f->cost);
    ic__free(f->c, f->costly);
    ic__free(f->c, f->mm_operand);
    ic__free(f->c, f->mm_reader);
    ic__free(f->c, f->win_reader);
}

static ic_status fuse(fz *f, ic_program **out)
{
    int64_t *uses = ic__calloc(f->c, (size_t)f->n + 1, sizeof(int64_t));
    f->live = ic__live_nodes(f->c, f->g);
    f->grp = ic__malloc(f->c, sizeof(int) * ((size_t)f->n + 1));
    f->ogrp = ic__calloc(f->c, (size_t)f->nout + 1, sizeof(int));
    f->why = ic__calloc(f->c, (size_t)f->n + 1, sizeof(char *));
    f->cost = ic__calloc(f->c, (size_t)f->n + 1, sizeof(int));
    f->costly = ic__calloc(f->c, (size_t)f->n + 1, sizeof(bool));
    f->mm_operand = ic__calloc(f->c, (size_t)f->n + 1, sizeof(bool));
    f->mm_reader = ic__calloc(f->c, (size_t)f->n + 1, sizeof(ic_value));
    f->win_reader = ic__malloc(f->c, sizeof(ic_value) * ((size_t)f->n + 1));
    if (!uses || !f->live || !f->grp || !f->ogrp || !f->why || !f->cost || !f->costly || !f->mm_operand ||
        !f->mm_reader || !f->win_reader) {
        ic__free(f->c, uses);
        return ic__error(f->c, IC_ENOMEM, "out of memory");
    }
    for (int v = 0; v < f->n; v++)
        f->grp[v] = f->win_reader[v] = -1;
    realize(f, uses);
    ic__free(f->c, uses);
    f->dep = ic__calloc(f->c, (size_t)f->ng * (size_t)f->ng + 1, sizeof(bool));
    f->alive = ic__calloc(f->c, (size_t)f->ng + 1, sizeof(bool));
    if (!f->dep || !f->alive || !sources(f))
        return ic__error(f->c, IC_ENOMEM, "out of memory");
    for (int x = 0; x < f->ng; x++)
        f->alive[x] = true;
    merge_all(f);
    merge_siblings(f);
    return build(f, out);
}

ic_status ic_fuse(ic_ctx *c, const ic_program *in, const ic_fuse_options *opt, ic_program **out)
{
    ic_fuse_options o;
    if (!out || !in)
        return ic__error(c, IC_EINVAL, "ic_fuse: %s is NULL", out ? "the input program" : "out");
    *out = NULL;
    if (opt)
        o = *opt;
    else
        ic_fuse_options_init(&o);
    if (o.max_inline_ops < 1)
        o.max_inline_ops = 1;
    const ic_graph *g = ic_program_graph(in);
    ic_status st = ic__check_specialised(c, g);
    if (st)
        return st;
    if (o.no_fusion || c->sw.no_fusion) {
        st = ic__lower_unfused(c, g, o.no_fusion ? "no_fusion option: one kernel per op"
                                                 : "IC_NO_FUSION: one kernel per op",
                               o.prefix, out);
        if (!st)
            ic__program_share_graph(*out, in);
        return st;
    }
    fz f;
    memset(&f, 0, sizeof f);
    f.c = c;
    f.g = g;
    f.o = &o;
    f.n = ic_graph_num_nodes(g);
    f.nout = ic_graph_num_outputs(g);
    st = fuse(&f, out);
    fz_free(&f);
    if (!st)
        ic__program_share_graph(*out, in);
    return st;
}
