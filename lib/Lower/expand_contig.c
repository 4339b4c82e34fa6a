/* expand_contig.c - matmul operands read through views that no strides describe get a copy.
 *
 * Why: views are index arithmetic (lower.h), and a reshape that merges dims a permute made
 * non-adjacent in memory (BERT's context: [B,H,S,D] permuted to [B,S,H,D], reshaped to
 * [B,S,H*D]) indexes its source with divisions and remainders. Both GEMM generators need
 * each operand affine in (m, n, k); such an operand falls back to one dot product per output,
 * 20-50x slower than the tensor cores. One copy kernel (a cast to the same dtype, which Fuse
 * materialises as a matmul operand) costs a read and a write of the operand, as PyTorch's
 * .contiguous() before its GEMM does. Views that strides describe (permutes, transposes,
 * splitting reshapes: Q, K, V as [B,H,S,D]) stay views: the GEMMs read them in place. */
#include <string.h>
#include "expand-impl.h"

enum { RMAX = IC_MAX_RANK };

static void node_shape(const ic_graph *g, ic_value v, int *rank, int64_t *sh)
{
    ic_node_info ni;
    ic_graph_node(g, v, &ni);
    *rank = ni.rank;
    for (int d = 0; d < ni.rank; d++)
        sh[d] = ni.shape[d].coef;
}

/* New strides for a reshape of (on, os, ost) to (nn, ns), as a view allows: runs of old dims
 * that are contiguous with each other may merge or split; false when the reshape needs a copy. */
static bool reshape_strides(int on, const int64_t *os, const int64_t *ost, int nn, const int64_t *ns,
                            int64_t *nst)
{
    int64_t numel = 1;
    for (int d = 0; d < on; d++)
        numel *= os[d];
    if (numel == 0)
        return true;
    int vd = nn - 1;
    int64_t base = on > 0 ? ost[on - 1] : 1, tnum = 1, vnum = 1;
    for (int td = on - 1; td >= 0; td--) {
        tnum *= os[td];
        bool run_ends = td == 0 || (os[td - 1] != 1 && ost[td - 1] != tnum * base);
        if (!run_ends)
            continue;
        while (vd >= 0 && (vnum < tnum || ns[vd] == 1)) {
            nst[vd] = vnum * base;
            vnum *= ns[vd];
            vd--;
        }
        if (vnum != tnum)
            return false;
        if (td > 0) {
            base = ost[td - 1];
            tnum = vnum = 1;
        }
    }
    return vd == -1;
}

static bool is_view(ic_op op)
{
    return op == IC_OP_RESHAPE || op == IC_OP_PERMUTE || op == IC_OP_TRANSPOSE || op == IC_OP_SQUEEZE ||
           op == IC_OP_UNSQUEEZE;
}

/* The strides of v over its base buffer (row-major for a computed value); false when no
 * strides describe it or a view is one this walk does not follow (then nothing changes). */
static bool strides_of(const ic_graph *g, ic_value v, int depth, int64_t *st)
{
    ic_node_info ni;
    ic_graph_node(g, v, &ni);
    int r;
    int64_t sh[RMAX], ist[RMAX], ish[RMAX];
    node_shape(g, v, &r, sh);
    bool view = is_view(ni.op);
    if (!view || depth > 16 || ni.ninputs < 1 || ni.inputs[0].node < 0) {
        int64_t s = 1;
        for (int d = r - 1; d >= 0; d--) {
            st[d] = s;
            s *= sh[d];
        }
        return !view;
    }
    ic_value in = ni.inputs[0].node;
    int ir;
    node_shape(g, in, &ir, ish);
    if (!strides_of(g, in, depth + 1, ist))
        return false;
    if (ni.op == IC_OP_PERMUTE) {
        for (int d = 0; d < r; d++)
            st[d] = ist[ni.attrs->dims[d] < 0 ? ni.attrs->dims[d] + r : ni.attrs->dims[d]];
        return true;
    }
    if (ni.op == IC_OP_TRANSPOSE) {
        int64_t a = ni.attrs->dim0 < 0 ? ni.attrs->dim0 + r : ni.attrs->dim0;
        int64_t b = ni.attrs->dim1 < 0 ? ni.attrs->dim1 + r : ni.attrs->dim1;
        memcpy(st, ist, sizeof(int64_t) * (size_t)r);
        st[a] = ist[b];
        st[b] = ist[a];
        return true;
    }
    return reshape_strides(ir, ish, ist, r, sh, st); /* reshape, squeeze, unsqueeze */
}

static bool needs_contig(const ic_graph *g, ic_value v)
{
    ic_node_info ni;
    ic_graph_node(g, v, &ni);
    int64_t st[RMAX];
    return is_view(ni.op) && !strides_of(g, v, 0, st);
}

/* Operand i (0 or 1) of matmul-class node ni reads through such a view. */
bool ic__exp_mm_operand_needs_contig(const ic_graph *g, const ic_node_info *ni, int i)
{
    if (ni->op != IC_OP_MATMUL && ni->op != IC_OP_LINEAR && ni->op != IC_OP_BMM)
        return false;
    return i < ni->ninputs && i < 2 && ni->inputs[i].node >= 0 && needs_contig(g, ni->inputs[i].node);
}
