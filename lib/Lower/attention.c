/* attention.c - scaled dot-product attention as one fused kernel (ic_attrs.fused,
 * ic_kernel.attn) on the backends that have one (the GPU):
 *   - ic__graph_fuse_attention rewrites a specialised graph (see lower-impl.h): each sdpa the
 *     fused kernel can compute is marked fused (kept from expansion), and the pattern exported
 *     graphs write attention as becomes one fused sdpa;
 *   - ic__attn_operand gives the kernel generator (kernel.c) an operand's affine view of its
 *     buffer, through the index expressions every other kernel uses (views folded into
 *     indices, never copies).
 * What the kernel computes: ic_attention in lower.h. Eligible: q, k and v of one dtype, f16 or
 * bf16 (f32 attention keeps the expanded path: GEMMs and a softmax kernel), a head dim E shared
 * by q, k and v that is a multiple of 16 up to 128, a float or bool mask, and operands that are
 * chains of index-only views (permute transpose expand unsqueeze squeeze slice flip, reshapes
 * only straight over a stored value) of a stored value, so that their offsets are affine.
 * The pattern's intermediates (scores, scaled, masked, probabilities) must have no other reader
 * and be no output; its scale is a number operand. Anything else stays as it is. */
#include <math.h>
#include <string.h>
#include "gen.h"

static const ic_node *N(const ic_graph *g, ic_value v) { return ic__node(g, v); }
static bool is16(ic_dtype t) { return t == IC_F16 || t == IC_BF16; }

/* Reshapes down to a stored value: the flat offset is the stored one (affine after split). */
static bool flat_chain(const ic_graph *g, ic_value v)
{
    for (; ic__node_class(N(g, v)) == IC__CL_VIEW; v = N(g, v)->in[0].node)
        if (N(g, v)->info.op != IC_OP_RESHAPE)
            return false;
    return true;
}

/* v is a stored value seen through views whose offsets stay affine in its indices. */
static bool affine_view(const ic_graph *g, ic_value v)
{
    for (; ic__node_class(N(g, v)) == IC__CL_VIEW; v = N(g, v)->in[0].node) {
        ic_op op = N(g, v)->info.op;
        if (op == IC_OP_UNFOLD)
            return false;
        if (op == IC_OP_RESHAPE)
            return flat_chain(g, N(g, v)->in[0].node);
    }
    return true;
}

static bool head_dim_ok(int64_t E) { return E % 16 == 0 && E >= 16 && E <= 128; }

static int64_t dim(const ic_node *n, int i) { return n->shape[i].coef; }

/* An sdpa the fused kernel computes. */
static bool sdpa_ok(const ic_graph *g, const ic_node *n)
{
    const ic_node *q = N(g, n->in[0].node), *v = N(g, n->in[2].node);
    if (!is16(q->info.dtype) || n->info.dtype != q->info.dtype)
        return false;
    int64_t E = dim(q, q->info.rank - 1);
    if (!head_dim_ok(E) || dim(v, v->info.rank - 1) != E)
        return false;
    for (int i = 0; i < n->info.ninputs; i++) {
        ic_value x = n->in[i].node;
        if (x == IC_NONE)
            continue;
        if (x < 0 || !affine_view(g, x))
            return false;
        if (i == 3 && !ic_dtype_is_float(N(g, x)->info.dtype) && N(g, x)->info.dtype != IC_BOOL)
            return false;
    }
    return true;
}

/* ---- the pattern ---- */

typedef struct {
    ic_value q, kt, v, mask, fin;
    ic_value mid[4];     /* scores, scaled, masked, probs (-1 where absent) */
    double scale;
} pat;

/* v is only read once, by the pattern, and is no output. */
static bool private_(const int *nread, ic_value v) { return v >= 0 && nread[v] == 1; }

/* y = scores [* c | / c] with scores = matmul(q, kT): fills q, kt, scale, mid[0..1]. */
static bool scaled_scores(const ic_graph *g, const int *nread, ic_value y, pat *m)
{
    const ic_node *n = N(g, y);
    m->scale = 1;
    m->mid[1] = -1;
    if (n->info.op == IC_OP_MUL || n->info.op == IC_OP_DIV) {
        int t = n->in[0].node >= 0 ? 0 : 1; /* the tensor operand */
        if (n->in[1 - t].node != IC_SCALAR || n->in[t].node < 0 || (n->info.op == IC_OP_DIV && t != 0))
            return false;
        /* the number in the chain's dtype, as the unfused chain (and PyTorch) computes with it */
        double c = ic__round_fp(n->info.dtype, n->in[1 - t].scalar.f);
        m->scale = n->info.op == IC_OP_MUL ? c : 1 / c;
        if (!isfinite(m->scale) || !private_(nread, n->in[t].node))
            return false;
        m->mid[1] = y;
        y = n->in[t].node;
        n = N(g, y);
    }
    if (n->info.op != IC_OP_MATMUL && n->info.op != IC_OP_BMM)
        return false;
    m->mid[0] = y;
    m->q = n->in[0].node;
    m->kt = n->in[1].node;
    return true;
}

/* Shapes and dtypes: q [.., L, E], kT [.., E, S], v [.., S, E], one rank and batch, every
 * value of the chain in q's dtype, the mask not broadcasting the scores up. */
static bool pattern_shapes(const ic_graph *g, const pat *m)
{
    const ic_node *q = N(g, m->q), *kt = N(g, m->kt), *v = N(g, m->v), *sc = N(g, m->mid[0]);
    ic_dtype t = q->info.dtype;
    int r = q->info.rank;
    if (!is16(t) || r < 2 || kt->info.rank != r || v->info.rank != r || kt->info.dtype != t || v->info.dtype != t)
        return false;
    for (int i = 0; i < 4; i++)
        if (m->mid[i] >= 0 && N(g, m->mid[i])->info.dtype != t)
            return false;
    if (N(g, m->fin)->info.dtype != t || N(g, m->fin)->info.rank != r)
        return false;
    for (int d = 0; d < r - 2; d++)
        if (dim(kt, d) != dim(q, d) || dim(v, d) != dim(q, d))
            return false;
    int64_t E = dim(q, r - 1);
    if (!head_dim_ok(E) || dim(kt, r - 2) != E || dim(v, r - 1) != E || dim(v, r - 2) != dim(kt, r - 1))
        return false;
    if (m->mask >= 0) {
        const ic_node *mk = N(g, m->mask), *x = N(g, m->mid[2]);
        if (!ic_dtype_is_float(mk->info.dtype) || mk->info.rank > r || x->info.rank != r)
            return false;
        for (int d = 0; d < r; d++)
            if (dim(x, d) != dim(sc, d))
                return false;
    }
    return affine_view(g, m->q) && affine_view(g, m->kt) && affine_view(g, m->v) &&
           (m->mask < 0 || affine_view(g, m->mask));
}

/* fin = matmul(softmax(scaled [+ mask], -1), v). */
static bool match(const ic_graph *g, const int *nread, ic_value fin, pat *m)
{
    const ic_node *f = N(g, fin);
    memset(m, 0, sizeof *m);
    m->fin = fin;
    m->mask = -1;
    m->mid[2] = -1;
    if ((f->info.op != IC_OP_MATMUL && f->info.op != IC_OP_BMM) || !private_(nread, f->in[0].node) ||
        f->in[1].node < 0)
        return false;
    m->v = f->in[1].node;
    const ic_node *p = N(g, f->in[0].node);
    if (p->info.op != IC_OP_SOFTMAX || p->axis != p->info.rank - 1 || !private_(nread, p->in[0].node))
        return false;
    m->mid[3] = f->in[0].node;
    ic_value x = p->in[0].node;
    const ic_node *xn = N(g, x);
    if (xn->info.op == IC_OP_ADD && xn->in[0].node >= 0 && xn->in[1].node >= 0) {
        for (int i = 0; i < 2; i++) {
            pat t = *m;
            t.mid[2] = x;
            t.mask = xn->in[1 - i].node;
            if (private_(nread, xn->in[i].node) && scaled_scores(g, nread, xn->in[i].node, &t) &&
                pattern_shapes(g, &t)) {
                *m = t;
                return true;
            }
        }
        return false;
    }
    return scaled_scores(g, nread, x, m) && pattern_shapes(g, m);
}

/* ---- the rewrite ---- */

typedef struct {
    ic_ctx *c;
    const ic_graph *g;
    ic_graph *dst;
    ic_value *map;
    int *role;               /* per node: 0 copy, 1 sdpa to fuse, 2 pattern end, 3 dropped */
    pat *pats;               /* per node: the pattern ending there */
    ic_value *reader;        /* per node: its last reader */
    ic_value *absorb;        /* per fused node: the permute back to [.., L, H, E] it stores
                              * as (ic_attrs.transpose_out), -1: none */
} rw;

/* The permute that only swaps dims -3 and -2 of fused node v, when it is v's only reader:
 * the fused kernel stores that layout directly (BERT's context, permuted back to
 * [B, S, H, D] and reshaped for the output projection, is then a plain GEMM operand). */
static ic_value permute_back(const rw *R, const int *nread, ic_value v)
{
    ic_value p = R->reader[v];
    const ic_node *n = p >= 0 ? N(R->g, p) : NULL;
    int r = N(R->g, v)->info.rank;
    if (nread[v] != 1 || !n || r < 3 || (n->info.op != IC_OP_PERMUTE && n->info.op != IC_OP_TRANSPOSE))
        return -1;
    for (int i = 0; i < r; i++)
        if (n->perm[i] != (i == r - 3 ? r - 2 : i == r - 2 ? r - 3 : i))
            return -1;
    return p;
}

static ic_status emit_pattern(rw *R, ic_value v)
{
    const pat *m = &R->pats[v];
    ic_value as = R->absorb[v] >= 0 ? R->absorb[v] : v;
    const ic_node *f = N(R->g, as);
    char name[300];
    snprintf(name, sizeof name, "%s.k", f->info.name);
    ic_attrs tr, at;
    ic_attrs_init(&tr, IC_OP_TRANSPOSE);
    tr.dim0 = -2, tr.dim1 = -1;
    ic_value k;
    ic_status s = ic_graph_add_node(R->dst, name, IC_OP_TRANSPOSE, 1, (ic_operand[]){ ic_val(R->map[m->kt]) }, &tr, &k);
    if (s)
        return s;
    ic_attrs_init(&at, IC_OP_SDPA);
    at.has_scale = true;
    at.scale = m->scale;
    at.fused = true;
    at.round_scores = true;
    at.transpose_out = as != v;
    ic_operand in[4] = { ic_val(R->map[m->q]), ic_val(k), ic_val(R->map[m->v]), ic_none() };
    if (m->mask >= 0)
        in[3] = ic_val(R->map[m->mask]);
    return ic_graph_add_node(R->dst, f->info.name, IC_OP_SDPA, m->mask >= 0 ? 4 : 3, in, &at, &R->map[as]);
}

static ic_status copy_one(rw *R, ic_value v)
{
    ic_node_info ni;
    ic_graph_node(R->g, v, &ni);
    if (R->role[v] == 3)
        return IC_OK;
    if (R->role[v] == 2)
        return emit_pattern(R, v);
    ic_attrs fused;
    ic_value as = v;
    if (R->role[v] == 1) {
        fused = *ni.attrs;
        fused.fused = true;
        if (R->absorb[v] >= 0) {
            as = R->absorb[v];
            fused.transpose_out = true;
            ni.name = N(R->g, as)->info.name;
        }
        ni.attrs = &fused;
    }
    return ic__graph_copy_node(R->dst, &ni, R->map, &R->map[as]);
}

/* No value of m's chain is already part of another rewrite. */
static bool mids_free(const rw *R, const pat *m)
{
    for (int i = 0; i < 4; i++)
        if (m->mid[i] >= 0 && R->role[m->mid[i]] != 0)
            return false;
    return true;
}

/* Roles of every node; false when nothing changes. */
static bool plan(rw *R, const int *nread)
{
    bool any = false;
    int n = ic_graph_num_nodes(R->g);
    for (ic_value v = 0; v < n; v++) {
        const ic_node *nd = N(R->g, v);
        R->absorb[v] = -1;
        if (nd->info.op == IC_OP_SDPA && !nd->attrs.fused && sdpa_ok(R->g, nd)) {
            R->role[v] = 1;
        } else if (R->role[v] == 0 && match(R->g, nread, v, &R->pats[v]) && mids_free(R, &R->pats[v])) {
            R->role[v] = 2;
            for (int i = 0; i < 4; i++)
                if (R->pats[v].mid[i] >= 0)
                    R->role[R->pats[v].mid[i]] = 3;
        } else {
            continue;
        }
        any = true;
        if ((R->absorb[v] = permute_back(R, nread, v)) >= 0)
            R->role[R->absorb[v]] = 3;
    }
    return any;
}

ic_status ic__graph_fuse_attention(ic_ctx *c, const ic_graph *g, ic_graph **out)
{
    *out = NULL;
    int n = ic_graph_num_nodes(g);
    rw R = { .c = c, .g = g };
    int *nread = ic__calloc(c, (size_t)n + 1, sizeof *nread);
    R.map = ic__calloc(c, (size_t)n + 1, sizeof *R.map);
    R.role = ic__calloc(c, (size_t)n + 1, sizeof *R.role);
    R.pats = ic__calloc(c, (size_t)n + 1, sizeof *R.pats);
    R.reader = ic__calloc(c, (size_t)n + 1, sizeof *R.reader);
    R.absorb = ic__calloc(c, (size_t)n + 1, sizeof *R.absorb);
    ic_status s = !nread || !R.map || !R.role || !R.pats || !R.reader || !R.absorb
                      ? ic__error(c, IC_ENOMEM, "attention: out of memory") : IC_OK;
    for (ic_value v = 0; !s && v < n; v++)
        R.reader[v] = -1;
    for (ic_value v = 0; !s && v < n; v++)
        for (int i = 0; i < N(g, v)->info.ninputs; i++)
            if (N(g, v)->in[i].node >= 0) {
                nread[N(g, v)->in[i].node]++;
                R.reader[N(g, v)->in[i].node] = v;
            }
    for (int i = 0; !s && i < ic_graph_num_outputs(g); i++)
        nread[ic_graph_output(g, i)] += 2; /* an output is never private */
    if (!s && plan(&R, nread)) {
        s = ic_graph_create(c, ic_graph_name(g), &R.dst);
        if (!s)
            s = ic__graph_set_source(R.dst, ic_graph_source(g));
        for (ic_value v = 0; !s && v < n; v++)
            s = copy_one(&R, v);
        for (int i = 0; !s && i < ic_graph_num_outputs(g); i++)
            s = ic_graph_add_output(R.dst, R.map[ic_graph_output(g, i)]);
        if (!s)
            s = ic_graph_verify(R.dst);
        if (s)
            ic_graph_destroy(R.dst);
        else
            *out = R.dst;
    }
    ic__free(c, nread);
    ic__free(c, R.map);
    ic__free(c, R.role);
    ic__free(c, R.pats);
    ic__free(c, R.reader);
    ic__free(c, R.absorb);
    return s;
}

/* ---- operands ---- */

bool ic__attn_operand(ic__gen *G, ic_value v, int nb, const int64_t *batch, int64_t R, int64_t C,
                      ic_attn_operand *o)
{
    const ic_node *n = ic__gnode(G, v);
    int r = n->info.rank;
    const ic__ix *idx[IC_MAX_RANK];
    /* loop variables: the batch dims 0..nb-1, then the row (nb) and the column (nb + 1) */
    for (int d = 0; d < r; d++) {
        int od = d + nb + 2 - r;
        int64_t full = od < nb ? batch[od] : od == nb ? R : C, sz = ic__dim(n, d);
        idx[d] = od < 0 || (sz == 1 && full != 1) ? ic__ix_const(&G->ix, 0) : ic__ix_var(&G->ix, od, sz);
    }
    G->probe = true;
    G->probe_ix = NULL;
    int x = ic__eval(G, v, idx);
    G->probe = false;
    if (x < 0 || !G->probe_ix)
        return G->failed ? false : ic__gen_fail(G, "attention operand '%s' is not read from memory", n->info.name);
    const ic__ix *e = G->probe_ix;
    memset(o, 0, sizeof *o);
    o->buf = G->probe_buf;
    o->c0 = e->c0;
    for (int i = 0; i < e->n; i++) {
        const ic__ixatom *a = e->atom[i];
        if (a->kind != IC__IXA_VAR || a->var < 0 || a->var > nb + 1)
            return ic__gen_fail(G, "attention operand '%s' is no strided view of its buffer", n->info.name);
        int64_t *s = a->var < nb ? &o->sb[a->var] : a->var == nb ? &o->sr : &o->sc;
        *s += e->coef[i];
    }
    return true;
}
