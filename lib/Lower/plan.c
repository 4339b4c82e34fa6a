/* plan.c - arena offsets for TEMP buffers: a buffer lives from the first kernel that touches
 * it to the last; buffers whose lifetimes are disjoint may share bytes (first fit by offset).
 * A kernel never shares storage between two buffers it touches, so in-place hazards cannot
 * arise. */
#include <limits.h>
#include <string.h>
#include "lower-impl.h"

#define ALIGN 64

typedef struct {
    int buf, first, last;
    int64_t off, size;
} life;

static void lifetimes(const ic_program *p, life *L)
{
    for (int b = 0; b < p->nbufs; b++)
        L[b] = (life){ b, INT_MAX, -1, 0, 0 };
    for (int k = 0; k < p->nkernels; k++) {
        const ic_kernel *kn = &p->kernels[k];
        if (kn->attn) {
            const ic_attn_operand *ops[5];
            ic_attention_operands(kn->attn, ops);
            for (int w = 0; w < 5; w++)
                if (ops[w]->buf >= 0 && ops[w]->buf < p->nbufs) {
                    life *l = &L[ops[w]->buf];
                    l->first = k < l->first ? k : l->first;
                    l->last = k > l->last ? k : l->last;
                }
        }
        for (int s = 0; s < kn->nstages; s++)
            for (int i = 0; i < kn->stages[s].ninstr; i++) {
                const ic_linstr *in = &kn->stages[s].instr[i];
                if ((in->op != IC_L_LOAD && in->op != IC_L_STORE) || in->buf < 0 || in->buf >= p->nbufs)
                    continue;
                life *l = &L[in->buf];
                l->first = k < l->first ? k : l->first;
                l->last = k > l->last ? k : l->last;
            }
    }
}

/* Lowest offset where [off, off + size) misses every placed buffer alive at `first`. */
static int64_t fit(const life *placed, int nplaced, const life *t)
{
    int64_t off = 0;
    for (bool moved = true; moved;) {
        moved = false;
        for (int i = 0; i < nplaced; i++) {
            const life *o = &placed[i];
            bool alive = o->last >= t->first && o->first <= t->last;
            if (alive && o->size && off < o->off + o->size && o->off < off + t->size) {
                off = o->off + o->size;
                moved = true;
            }
        }
    }
    return off;
}

void ic__program_plan(ic_program *p)
{
    life *L = ic__calloc(p->c, (size_t)p->nbufs + 1, sizeof *L);
    life *placed = ic__calloc(p->c, (size_t)p->nbufs + 1, sizeof *placed);
    int nplaced = 0;
    p->arena_bytes = 0;
    if (!L || !placed) { /* no reuse: every TEMP gets its own bytes */
        for (int b = 0; b < p->nbufs; b++)
            if (p->bufs[b].kind == IC_BUF_TEMP) {
                p->bufs[b].arena_offset = p->arena_bytes;
                p->arena_bytes += ((int64_t)ic_dtype_size(p->bufs[b].dtype) * p->bufs[b].numel + ALIGN - 1) & ~(int64_t)(ALIGN - 1);
            }
        ic__free(p->c, L);
        ic__free(p->c, placed);
        return;
    }
    lifetimes(p, L);
    /* buffers are numbered in creation order, which is graph order: first uses ascend */
    for (int pass = 0; pass < p->nkernels + 1; pass++)
        for (int b = 0; b < p->nbufs; b++) {
            if (p->bufs[b].kind != IC_BUF_TEMP || L[b].first != (pass < p->nkernels ? pass : INT_MAX))
                continue;
            life t = L[b];
            t.size = ((int64_t)ic_dtype_size(p->bufs[b].dtype) * p->bufs[b].numel + ALIGN - 1) & ~(int64_t)(ALIGN - 1);
            t.off = t.first == INT_MAX ? 0 : fit(placed, nplaced, &t);
            if (t.first != INT_MAX)
                placed[nplaced++] = t;
            p->bufs[b].arena_offset = t.off;
            if (t.off + t.size > p->arena_bytes && t.first != INT_MAX)
                p->arena_bytes = t.off + t.size;
        }
    ic__free(p->c, L);
    ic__free(p->c, placed);
}
