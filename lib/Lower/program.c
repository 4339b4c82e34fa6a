/* program.c - the loop-IR program object: buffers, kernels, accessors, node classes. */
#include <string.h>
#include "gen.h"

ic__class ic__node_class(const ic_node *n)
{
    switch (ic_op_kind_of(n->info.op)) {
    case IC_KIND_INPUT: case IC_KIND_PARAM: return IC__CL_LEAF;
    case IC_KIND_VIEW: return IC__CL_VIEW;
    case IC_KIND_REDUCE: return IC__CL_RED;
    case IC_KIND_NORM: return IC__CL_NORM;
    case IC_KIND_CONTRACT: return n->info.op == IC_OP_SDPA && n->attrs.fused ? IC__CL_ATTN : IC__CL_MM;
    default: return IC__CL_PW;
    }
}

void ic_program_destroy(ic_program *p)
{
    if (!p)
        return;
    ic_ctx *c = p->c;
    ic__arena_free(&p->arena);
    ic__free(c, p->bufs);
    ic__free(c, p->kernels);
    ic__free(c, p->node_buf);
    if (p->own && --p->own->refs == 0) {
        ic_graph_destroy(p->own->g);
        ic__free(c, p->own);
    }
    ic__free(c, p);
}

void ic__program_share_graph(ic_program *dst, const ic_program *src)
{
    if (src->own && !dst->own && dst->g == src->g) {
        dst->own = src->own;
        dst->own->refs++;
    }
}

const ic_graph *ic_program_graph(const ic_program *p) { return p->g; }
int ic_program_num_buffers(const ic_program *p) { return p->nbufs; }
int ic_program_num_kernels(const ic_program *p) { return p->nkernels; }
int64_t ic_program_arena_size(const ic_program *p) { return p->arena_bytes; }

const ic_buffer *ic_program_buffer(const ic_program *p, int i)
{
    return i >= 0 && i < p->nbufs ? &p->bufs[i] : NULL;
}

const ic_kernel *ic_program_kernel(const ic_program *p, int i)
{
    return i >= 0 && i < p->nkernels ? &p->kernels[i] : NULL;
}
