/* kernel.c - generates one kernel of a schedule: the loop domain (from the first reduction,
 * normalisation or matmul of the kernel, else from what it stores), the level of each
 * stored value (outer = one per outer iteration, row = one per inner iteration), the stages
 * (REDUCE stages in dependency order, then INNER for row stores, then BODY for outer
 * stores), and adjacent loop dims merged where no index needs a div/mod for it. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "gen.h"

enum { LVL_OUTER, LVL_ROW };

typedef struct {
    bool omerge[IC_MAX_RANK], imerge[IC_MAX_RANK]; /* dim i merges with dim i + 1 */
} collapse_cfg;

/* The logical dims of the domain, before merging into loops. */
typedef struct {
    int no, ni, nr;
    int64_t osz[IC_MAX_RANK], isz[IC_MAX_RANK];
    int rref[IC_MAX_RANK];     /* row dim -> outer dim k (k >= 0) or inner dim (-1 - k) */
    bool reduce;               /* the kernel has REDUCE stages */
    bool row;
} domain;

static void gen_free(ic__gen *G)
{
    if (!G)
        return;
    ic_ctx *c = G->c;
    ic__kb_free(&G->kb);
    ic__ix_free(&G->ix);
    ic__tab_free(&G->memo);
    ic__arena_free(&G->ar);
    ic__free(c, G->red);
    ic__free(c, G->avail);
    ic__free(c, G->used);
    ic__free(c, G);
}

static ic__gen *gen_new(const ic_program *p, const ic__sched *s, int group)
{
    ic_ctx *c = p->c;
    int n = ic_graph_num_nodes(p->g);
    ic__gen *G = ic__calloc(c, 1, sizeof *G);
    if (!G)
        return NULL;
    G->c = c;
    G->g = p->g;
    G->s = s;
    G->p = p;
    G->group = group;
    ic__arena_init(&G->ar, c);
    ic__ix_init(&G->ix, &G->ar);
    ic__kb_init(&G->kb, c, &G->ar);
    ic__tab_init(&G->memo, c);
    G->red = ic__calloc(c, (size_t)n + 1, sizeof *G->red);
    G->avail = ic__malloc(c, sizeof(int) * ((size_t)n + 1));
    G->used = ic__calloc(c, (size_t)n + 1, sizeof(bool));
    if (!G->red || !G->avail || !G->used) {
        gen_free(G);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        G->avail[i] = -1;
    return G;
}

/* ---- domain ---- */

static void push_dim(int64_t *sz, int *n, int64_t size)
{
    if (size != 1)
        sz[(*n)++] = size;
}

static ic_value find_anchor(const ic_program *p, const ic__sched *s, int group)
{
    for (int v = 0; v < ic_graph_num_nodes(p->g); v++)
        if (s->group[v] == group && ic__reduce_like(ic__node_class(ic__node(p->g, v))))
            return v;
    return -1;
}

static void domain_of(const ic_program *p, ic_value anchor, const ic__store *items, domain *d)
{
    memset(d, 0, sizeof *d);
    if (anchor < 0) { /* pointwise: what the first item stores */
        const ic_node *n = ic__node(p->g, items[0].v);
        for (int i = 0; i < n->info.rank; i++)
            push_dim(d->osz, &d->no, ic__dim(n, i));
        return;
    }
    const ic_node *n = ic__node(p->g, anchor);
    d->reduce = true;
    if (ic__node_class(n) == IC__CL_MM) {
        const ic_node *a = ic__node(p->g, n->in[0].node);
        for (int i = 0; i < n->info.rank; i++)
            push_dim(d->osz, &d->no, ic__dim(n, i));
        push_dim(d->isz, &d->ni, ic__dim(a, a->info.rank - 1));
        return;
    }
    const ic_node *x = ic__node(p->g, n->in[0].node);
    d->row = true;
    for (int i = 0; i < x->info.rank; i++) {
        int64_t sz = ic__dim(x, i);
        if (sz == 1)
            continue;
        if ((n->axes >> i) & 1u) {
            d->rref[d->nr++] = -1 - d->ni;
            d->isz[d->ni++] = sz;
        } else {
            d->rref[d->nr++] = d->no;
            d->osz[d->no++] = sz;
        }
    }
}

/* Groups logical dims into loops (merged runs) and gives each logical dim its index. */
static void make_loops(ic__gen *G, const int64_t *sz, int n, const bool *merge, int var0,
                       ic__ldim *L, int64_t *loops, int *nloops)
{
    for (int i = 0; i < n;) {
        int j = i;
        while (j + 1 < n && merge[j])
            j++;
        int64_t total = 1;
        for (int k = i; k <= j; k++)
            total *= sz[k];
        const ic__ix *var = ic__ix_var(&G->ix, var0 + *nloops, total);
        loops[(*nloops)++] = total;
        int64_t suffix = total;
        for (int k = i; k <= j; k++) {
            suffix = sz[k] ? suffix / sz[k] : 1;
            L[k].size = sz[k];
            L[k].ix = ic__ix_mod(&G->ix, ic__ix_div(&G->ix, var, suffix ? suffix : 1), sz[k]);
        }
        i = j + 1;
    }
}

static void setup(ic__gen *G, const domain *d, const collapse_cfg *cc)
{
    G->nodims = d->no;
    G->nidims = d->ni;
    G->nouter = G->ninner = 0;
    make_loops(G, d->osz, d->no, cc->omerge, 0, G->od, G->outer, &G->nouter);
    if (G->nouter == 0)
        G->outer[G->nouter++] = 1;
    if (d->reduce) {
        make_loops(G, d->isz, d->ni, cc->imerge, G->nouter, G->id, G->inner, &G->ninner);
        if (G->ninner == 0)
            G->inner[G->ninner++] = 1;
    }
    G->has_row = d->row;
    G->nrdims = d->nr;
    for (int i = 0; i < d->nr; i++)
        G->rd[i] = d->rref[i] >= 0 ? G->od[d->rref[i]] : G->id[-1 - d->rref[i]];
}

/* ---- stores ---- */

/* The node under v's views when every one of them is a bijection (permute, transpose,
 * reshape, squeeze, unsqueeze), else -1: such a view can be stored from the loops of the
 * node under it, each element written where the view puts it. */
static ic_value bijective_base(const ic__gen *G, ic_value v)
{
    while (ic__node_class(ic__gnode(G, v)) == IC__CL_VIEW) {
        ic_op op = ic__gnode(G, v)->info.op;
        if (op == IC_OP_EXPAND || op == IC_OP_SLICE || op == IC_OP_UNFOLD || op == IC_OP_FLIP)
            return -1;
        v = ic__gnode(G, v)->in[0].node;
    }
    return v;
}

/* The index of view v holding the element of `base` at bidx. */
static void forward(ic__gen *G, ic_value v, ic_value base, const ic__ix *const *bidx, const ic__ix **out)
{
    const ic_node *n = ic__gnode(G, v);
    if (v == base) {
        for (int i = 0; i < n->info.rank; i++)
            out[i] = bidx[i];
        return;
    }
    const ic_node *s = ic__gnode(G, n->in[0].node);
    const ic__ix *si[IC_MAX_RANK];
    int64_t sh[IC_MAX_RANK], oh[IC_MAX_RANK];
    forward(G, n->in[0].node, base, bidx, si);
    switch (n->info.op) {
    case IC_OP_PERMUTE: case IC_OP_TRANSPOSE:
        for (int i = 0; i < n->info.rank; i++)
            out[i] = si[n->perm[i]];
        return;
    case IC_OP_UNSQUEEZE:
        for (int i = 0, k = 0; i < n->info.rank; i++)
            out[i] = i == n->axis ? ic__ix_const(&G->ix, 0) : si[k++];
        return;
    case IC_OP_SQUEEZE:
        for (int i = 0, k = 0; i < s->info.rank; i++)
            if (!(n->axes & (1u << i)))
                out[k++] = si[i];
        return;
    default: /* reshape */
        for (int i = 0; i < s->info.rank; i++)
            sh[i] = ic__dim(s, i);
        for (int i = 0; i < n->info.rank; i++)
            oh[i] = ic__dim(n, i);
        ic__ix_delinear(&G->ix, ic__ix_linear(&G->ix, s->info.rank, sh, si), n->info.rank, oh, out);
    }
}

static bool natural(ic__gen *G, const ic_node *n, int level, const ic__ix **idx)
{
    return level == LVL_OUTER ? ic__nat_outer(G, n->info.rank, n->shape, idx)
                              : ic__nat_row(G, n->info.rank, n->shape, idx);
}

/* Stores item it at the natural index of its level; through `via` (its base) when set. */
static void store(ic__gen *G, const ic__store *it, int level, ic_value via)
{
    ic_value v = via >= 0 ? via : it->v;
    const ic_node *n = ic__gnode(G, v), *dst = ic__gnode(G, it->v);
    const ic__ix *idx[IC_MAX_RANK], *didx[IC_MAX_RANK];
    int64_t shape[IC_MAX_RANK];
    if (!natural(G, n, level, idx)) {
        ic__gen_fail(G, "'%s' does not fit the kernel's loops", n->info.name);
        return;
    }
    if (via >= 0)
        forward(G, it->v, via, idx, didx);
    for (int i = 0; i < dst->info.rank; i++) {
        shape[i] = ic__dim(dst, i);
        if (via < 0)
            didx[i] = idx[i];
    }
    int val = ic__eval(G, v, idx);
    val = ic__kb_cast(&G->kb, G->p->bufs[it->buf].dtype, val);
    int off = ic__kb_ix(&G->kb, ic__ix_linear(&G->ix, dst->info.rank, shape, didx));
    ic__kb_store(&G->kb, it->buf, off, val);
}

static void shape_text(const ic__gen *G, const ic_node *n, char *buf, size_t sz)
{
    ic_graph_shape_str(G->g, n->info.rank, n->shape, buf, sz);
}

static bool level_of(ic__gen *G, ic_value v, int *level)
{
    const ic_node *n = ic__gnode(G, v);
    const ic__ix *idx[IC_MAX_RANK];
    if (ic__nat_outer(G, n->info.rank, n->shape, idx))
        *level = LVL_OUTER;
    else if (ic__nat_row(G, n->info.rank, n->shape, idx))
        *level = LVL_ROW;
    else
        return false;
    return true;
}

static bool levels(ic__gen *G, const ic__store *items, int nitems, int *level, int *via)
{
    for (int i = 0; i < nitems; i++) {
        via[i] = -1;
        if (level_of(G, items[i].v, &level[i]))
            continue;
        ic_value b = bijective_base(G, items[i].v);
        if (b >= 0 && b != items[i].v && level_of(G, b, &level[i])) {
            via[i] = b;
            continue;
        }
        char sb[160];
        const ic_node *n = ic__gnode(G, items[i].v);
        shape_text(G, n, sb, sizeof sb);
        return ic__gen_fail(G, "'%s' %s does not fit the kernel's iteration domain", n->info.name, sb);
    }
    return true;
}

/* Plans the stages and emits them. */
static bool emit_with(ic__gen *G, const ic__store *items, int nitems, int *level, int *av, int *via)
{
    int nnodes = ic_graph_num_nodes(G->g), nred = 0;
    bool inner = false, outer = false;
    if (!levels(G, items, nitems, level, via))
        return false;
    for (int i = 0; i < nitems; i++)
        av[i] = ic__avail(G, items[i].v);
    for (int v = 0; v < nnodes; v++)
        if (G->red[v].planned && G->red[v].last + 1 > nred)
            nred = G->red[v].last + 1;
    if (nred > IC__MAXSTAGES - 2)
        return ic__gen_fail(G, "more than %d dependent reductions", IC__MAXSTAGES - 2);
    for (int i = 0; i < nitems; i++) {
        inner |= level[i] == LVL_ROW && (av[i] > 0 || nred == 0);
        outer |= level[i] == LVL_OUTER;
    }
    for (int st = 0; st < nred && !G->failed; st++) {
        ic__kb_stage(&G->kb, IC_STAGE_REDUCE);
        for (int v = 0; v < nnodes && !G->failed; v++)
            ic__red_emit(G, v, st);
        for (int i = 0; i < nitems && st == 0 && !inner; i++)
            if (level[i] == LVL_ROW)
                store(G, &items[i], LVL_ROW, via[i]);
    }
    if (inner) {
        ic__kb_stage(&G->kb, IC_STAGE_INNER);
        for (int i = 0; i < nitems; i++)
            if (level[i] == LVL_ROW)
                store(G, &items[i], LVL_ROW, via[i]);
    }
    if (outer) {
        ic__kb_stage(&G->kb, IC_STAGE_BODY);
        for (int i = 0; i < nitems; i++)
            if (level[i] == LVL_OUTER)
                store(G, &items[i], LVL_OUTER, via[i]);
    }
    if (G->kb.oom || G->ix.oom)
        ic__gen_fail(G, "out of memory");
    return !G->failed;
}

static bool emit(ic__gen *G, const ic__store *items, int nitems)
{
    int *level = ic__malloc(G->c, sizeof(int) * (size_t)nitems * 3);
    if (!level)
        return ic__gen_fail(G, "out of memory");
    bool ok = emit_with(G, items, nitems, level, level + nitems, level + 2 * nitems);
    ic__free(G->c, level);
    return ok;
}

static int count_divmod(const ic__gen *G)
{
    int k = 0;
    for (int s = 0; s < G->kb.nstages; s++)
        for (int i = 0; i < G->kb.st[s].n; i++)
            k += G->kb.st[s].ins[i].op == IC_L_IDIV || G->kb.st[s].ins[i].op == IC_L_MOD;
    return k;
}

static ic__gen *attempt(const ic_program *p, const ic__sched *s, int group, const domain *d,
                        const collapse_cfg *cc, const ic__store *items, int nitems, char *why,
                        size_t nwhy)
{
    ic__gen *G = gen_new(p, s, group);
    if (!G) {
        snprintf(why, nwhy, "out of memory");
        return NULL;
    }
    setup(G, d, cc);
    if (emit(G, items, nitems))
        return G;
    snprintf(why, nwhy, "%s", G->why);
    gen_free(G);
    return NULL;
}

/* ---- the kernel record ---- */

static bool copy_stages(ic_arena *ar, const ic__kb *kb, ic_kernel *k)
{
    k->nstages = kb->nstages;
    k->stages = ic__arena_alloc(ar, sizeof(ic_stage) * (size_t)(k->nstages + 1));
    if (!k->stages)
        return false;
    for (int i = 0; i < k->nstages; i++) {
        const ic__kbstage *st = &kb->st[i];
        k->stages[i].kind = st->kind;
        k->stages[i].ninstr = st->n;
        k->stages[i].instr = ic__arena_alloc(ar, sizeof(ic_linstr) * (size_t)(st->n + 1));
        if (!k->stages[i].instr)
            return false;
        memcpy(k->stages[i].instr, st->ins, sizeof(ic_linstr) * (size_t)st->n);
    }
    return true;
}

static bool append_kernel(ic_program *p, const ic_kernel *k)
{
    if (p->nkernels == p->capkernels) {
        int cap = p->capkernels ? p->capkernels * 2 : 16;
        ic_kernel *ks = ic__realloc(p->c, p->kernels, sizeof *ks * (size_t)cap);
        if (!ks)
            return false;
        p->kernels = ks;
        p->capkernels = cap;
    }
    p->kernels[p->nkernels++] = *k;
    return true;
}

/* The kernel record: loops, stages (dead code dropped), the nodes it computes and stores,
 * its name and the schedule's reason for its boundary. */
static bool finish(ic_program *p, const ic__sched *s, int group, ic__gen *G,
                   const ic__store *items, int nitems)
{
    ic_arena *ar = &p->arena;
    ic_kernel k;
    memset(&k, 0, sizeof k);
    ic__kb_dce(&G->kb);
    k.nouter = G->nouter;
    k.ninner = G->ninner;
    memcpy(k.outer, G->outer, sizeof k.outer);
    memcpy(k.inner, G->inner, sizeof k.inner);
    int n = ic_graph_num_nodes(p->g);
    for (int i = 0; i < nitems; i++)
        G->used[items[i].v] = true;
    k.nodes = ic__arena_alloc(ar, sizeof(char *) * (size_t)(n + 1));
    if (!copy_stages(ar, &G->kb, &k) || !k.nodes)
        return false;
    for (int v = 0; v < n; v++)
        if (G->used[v])
            k.nodes[k.nnodes++] = ic__node(p->g, v)->info.name;
    char name[256];
    ic__kernel_name(name, sizeof name, s->prefix ? s->prefix : "cpu_", p->g, k.nnodes, k.nodes,
                    p->nkernels);
    k.name = ic__arena_strdup(ar, name);
    k.why = ic__arena_strdup(ar, s->why && s->why[group] ? s->why[group] : "");
    return k.name && k.why && append_kernel(p, &k);
}

/* Merges adjacent loop dims, innermost first, while that adds no div/mod. */
static ic__gen *collapse(const ic_program *p, const ic__sched *s, int group, const domain *d,
                         collapse_cfg *cc, ic__gen *best, const ic__store *items, int nitems)
{
    char why[256];
    int score = count_divmod(best);
    for (int list = 0; list < 2; list++) {
        int n = list == 0 ? d->no : d->ni;
        for (int i = n - 2; i >= 0; i--) {
            collapse_cfg t = *cc;
            (list == 0 ? t.omerge : t.imerge)[i] = true;
            ic__gen *G = attempt(p, s, group, d, &t, items, nitems, why, sizeof why);
            if (G && count_divmod(G) <= score) {
                gen_free(best);
                best = G;
                *cc = t;
                score = count_divmod(G);
            } else {
                gen_free(G);
            }
        }
    }
    return best;
}

/* The attention kernel (ic_kernel.attn) of fused sdpa node `anchor`, alone in its group: each
 * operand's view of its buffer (ic__attn_operand), the output stored row-major. */
static bool gen_attention(ic_program *p, const ic__sched *s, int group, ic_value anchor,
                          const ic__store *items, int nitems, bool keep, char *why, size_t nwhy)
{
    const ic_node *n = ic__node(p->g, anchor);
    for (int v = 0; v < ic_graph_num_nodes(p->g); v++)
        if (s->group[v] == group && v != anchor && ic__node_class(ic__node(p->g, v)) != IC__CL_VIEW &&
            ic__node_class(ic__node(p->g, v)) != IC__CL_LEAF)
            return snprintf(why, nwhy, "attention '%s' is a kernel of its own", n->info.name), false;
    if (nitems != 1 || items[0].v != anchor)
        return snprintf(why, nwhy, "attention '%s' stores only its own value", n->info.name), false;
    ic__gen *G = gen_new(p, s, group);
    ic_attention *a = ic__arena_alloc(&p->arena, sizeof *a);
    if (!G || !a) {
        gen_free(G);
        return snprintf(why, nwhy, "out of memory"), false;
    }
    memset(a, 0, sizeof *a);
    int r = n->info.rank;
    const ic_node *q = ic__node(p->g, n->in[0].node), *k = ic__node(p->g, n->in[1].node);
    /* logical [batch.., L, E] dim i is stored dim pos[i] (transpose_out swaps -3 and -2) */
    int pos[IC_MAX_RANK];
    for (int i = 0; i < r; i++)
        pos[i] = !n->attrs.transpose_out ? i : i == r - 3 ? r - 2 : i == r - 2 ? r - 3 : i;
    a->nb = r - 2;
    for (int i = 0; i < a->nb; i++)
        a->batch[i] = ic__dim(n, pos[i]);
    a->L = ic__dim(n, pos[r - 2]);
    a->E = ic__dim(q, q->info.rank - 1);
    a->S = ic__dim(k, k->info.rank - 2);
    a->scale = n->attrs.has_scale ? n->attrs.scale : 1 / sqrt((double)a->E);
    a->causal = n->attrs.is_causal;
    a->round = n->attrs.round_scores;
    a->mask.buf = -1;
    bool has_mask = n->info.ninputs > 3 && n->in[3].node >= 0;
    bool ok = ic__attn_operand(G, n->in[0].node, a->nb, a->batch, a->L, a->E, &a->q) &&
              ic__attn_operand(G, n->in[1].node, a->nb, a->batch, a->S, a->E, &a->k) &&
              ic__attn_operand(G, n->in[2].node, a->nb, a->batch, a->S, a->E, &a->v) &&
              (!has_mask || ic__attn_operand(G, n->in[3].node, a->nb, a->batch, a->L, a->S, &a->mask));
    if (!ok)
        snprintf(why, nwhy, "%s", G->why);
    gen_free(G);
    if (!ok || !keep)
        return ok;
    a->out.buf = items[0].buf;
    int64_t stride[IC_MAX_RANK], st = 1; /* row-major strides of the stored shape */
    for (int i = r - 1; i >= 0; i--) {
        stride[i] = st;
        st *= ic__dim(n, i);
    }
    for (int i = 0; i < a->nb; i++)
        a->out.sb[i] = stride[pos[i]];
    a->out.sr = stride[pos[r - 2]];
    a->out.sc = stride[r - 1];
    ic_kernel kn;
    memset(&kn, 0, sizeof kn);
    kn.attn = a;
    kn.nouter = a->nb + 2;
    memcpy(kn.outer, a->batch, sizeof(int64_t) * (size_t)a->nb);
    kn.outer[a->nb] = a->L;
    kn.outer[a->nb + 1] = a->E;
    kn.ninner = 1;
    kn.inner[0] = a->S;
    kn.nodes = ic__arena_alloc(&p->arena, sizeof(char *));
    if (!kn.nodes)
        return snprintf(why, nwhy, "out of memory"), false;
    kn.nodes[kn.nnodes++] = n->info.name;
    char name[256];
    ic__kernel_name(name, sizeof name, s->prefix ? s->prefix : "cpu_", p->g, kn.nnodes, kn.nodes, p->nkernels);
    kn.name = ic__arena_strdup(&p->arena, name);
    kn.why = ic__arena_strdup(&p->arena, s->why && s->why[group] ? s->why[group] : "");
    if (!kn.name || !kn.why || !append_kernel(p, &kn))
        return snprintf(why, nwhy, "out of memory"), false;
    return true;
}

bool ic__gen_kernel(ic_program *p, const ic__sched *s, int group, const ic__store *items,
                    int nitems, bool keep, char *why, size_t nwhy)
{
    if (nitems == 0)
        return true;
    ic_value anchor = find_anchor(p, s, group);
    if (anchor >= 0 && ic__node_class(ic__node(p->g, anchor)) == IC__CL_ATTN)
        return gen_attention(p, s, group, anchor, items, nitems, keep, why, nwhy);
    domain d;
    collapse_cfg cc;
    memset(&cc, 0, sizeof cc);
    domain_of(p, find_anchor(p, s, group), items, &d);
    ic__gen *G = attempt(p, s, group, &d, &cc, items, nitems, why, nwhy);
    if (!G)
        return false;
    if (keep && s->collapse)
        G = collapse(p, s, group, &d, &cc, G, items, nitems);
    bool ok = !keep || finish(p, s, group, G, items, nitems);
    if (!ok)
        snprintf(why, nwhy, "out of memory");
    gen_free(G);
    return ok;
}
