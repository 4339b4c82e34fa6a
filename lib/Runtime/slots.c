/* slots.c - what one ic_run needs besides the code: a slot (planned arena, buffer table,
 * staging for strided args) from the variant's pool, the checks of outputs and embedding
 * indices, and the buffer table each kernel is called with. */
#include <stdlib.h>
#include <string.h>
#include "cpu-impl.h"

/* n bytes 64-byte aligned from the context's allocator; *raw is what to free. */
static void *alloc64(ic_ctx *c, size_t n, void **raw)
{
    *raw = ic__malloc(c, n + 64);
    return *raw ? (void *)(((uintptr_t)*raw + 63) & ~(uintptr_t)63) : NULL;
}

bool ic__same_sig(const ic_tensor *want, const ic_tensor *got)
{
    if (want->dtype != got->dtype || want->rank != got->rank)
        return false;
    for (int d = 0; d < want->rank; d++)
        if (want->shape[d] != got->shape[d])
            return false;
    return true;
}

/* The element offset after off in t's row-major order, idx[0..rank) its index (updated):
 * walks a strided tensor without a division per element. */
int64_t ic__next_elem(const ic_tensor *t, int64_t *idx, int64_t off)
{
    for (int d = t->rank - 1; d >= 0; d--) {
        off += t->strides[d];
        if (++idx[d] < t->shape[d])
            break;
        off -= t->strides[d] * t->shape[d];
        idx[d] = 0;
    }
    return off;
}

void ic__slots_free(ic_ctx *c, ic__variant *v)
{
    for (ic__slot *s = v->all_slots, *n; s; s = n) {
        n = s->next_all;
        for (int i = 0; i < v->nargs; i++)
            ic__free(c, s->staging_raw[i]);
        ic__free(c, s->arena_raw);
        ic__free(c, s);
    }
    v->all_slots = v->free_slots = NULL;
}

static ic__slot *slot_new(ic_ctx *c, const ic__variant *v)
{
    size_t n = sizeof(ic__slot) + sizeof(void *) * (size_t)(2 * v->nbufs + 2 * v->nargs) +
               sizeof(size_t) * (size_t)v->nargs + sizeof(double) * (size_t)v->nkernels + 16;
    ic__slot *s = ic__calloc(c, 1, n);
    if (!s)
        return NULL;
    s->bufs = (void **)(s + 1);
    s->staging = s->bufs + v->nbufs;
    s->staging_raw = s->staging + v->nargs;
    s->staging_cap = (size_t *)(s->staging_raw + v->nargs);
    s->alt = (void **)(s->staging_cap + v->nargs);
    s->prof_ms = (double *)(s->alt + v->nbufs);
    if (v->arena_bytes > 0 && !alloc64(c, (size_t)v->arena_bytes, &s->arena_raw)) {
        ic__free(c, s);
        return NULL;
    }
    s->arena = s->arena_raw ? (void *)(((uintptr_t)s->arena_raw + 63) & ~(uintptr_t)63) : NULL;
    return s;
}

/* A free slot of v (cc->lock held): the pool grows only when runs overlap. */
ic__slot *ic__slot_acquire(ic_compiled *cc, ic__variant *v)
{
    ic__slot *s = v->free_slots;
    if (s) {
        v->free_slots = s->next_free;
        v->b.busy++;
        return s;
    }
    if (!(s = slot_new(cc->c, v)))
        return NULL;
    s->next_all = v->all_slots;
    v->all_slots = s;
    v->b.busy++;
    return s;
}

void ic__slot_release(ic_compiled *cc, ic__variant *v, ic__slot *s)
{
    pthread_mutex_lock(&cc->lock);
    s->next_free = v->free_slots;
    v->free_slots = s;
    v->b.busy--;
    pthread_mutex_unlock(&cc->lock);
}

void ic__copy_strided(void *dst, const ic_tensor *t)
{
    size_t es = ic_dtype_size(t->dtype);
    int64_t n = ic_tensor_numel(t), idx[IC_MAX_RANK] = { 0 }, off = 0;
    char *d = dst;
    for (int64_t i = 0; i < n; i++) {
        memcpy(d + i * (int64_t)es, (const char *)t->data + off * (int64_t)es, es);
        off = ic__next_elem(t, idx, off);
    }
}

/* Byte range [lo, hi) a tensor's elements touch. */
static void extent(const ic_tensor *t, uintptr_t *lo, uintptr_t *hi)
{
    int64_t mn = 0, mx = 0;
    for (int d = 0; d < t->rank; d++) {
        if (t->shape[d] <= 0) {
            *lo = *hi = (uintptr_t)t->data;
            return;
        }
        int64_t span = (t->shape[d] - 1) * t->strides[d];
        if (span < 0)
            mn += span;
        else
            mx += span;
    }
    size_t es = ic_dtype_size(t->dtype);
    *lo = (uintptr_t)t->data + (uintptr_t)(mn * (int64_t)es);
    *hi = (uintptr_t)t->data + (uintptr_t)((mx + 1) * (int64_t)es);
}

static bool overlap(const ic_tensor *a, const ic_tensor *b)
{
    uintptr_t al, ah, bl, bh;
    extent(a, &al, &ah);
    extent(b, &bl, &bh);
    return al < ah && bl < bh && al < bh && bl < ah;
}

ic_status ic__check_outputs(ic_compiled *cc, const ic__variant *v, int nargs,
                               const ic_tensor *args, int nouts, const ic_tensor *outs)
{
    const ic_graph *g = cc->g;
    if (nouts != v->nouts)
        return ic__node_error(g, NULL, NULL, IC_EINVAL, "has %d outputs, got %d output tensors",
                              v->nouts, nouts);
    if (nouts > 0 && !outs)
        return ic__node_error(g, NULL, NULL, IC_EINVAL, "output tensors are NULL");
    for (int i = 0; i < nouts; i++) {
        const ic_tensor *o = &outs[i], *w = &v->outsig[i];
        ic_node_info ni;
        ic_graph_node(g, ic_graph_output(g, i), &ni);
        if (!ic__same_sig(w, o) || !ic_tensor_is_contiguous(o) ||
            (!o->data && ic_tensor_numel(w) > 0)) {
            char got[160], want[160];
            int n = 0;
            for (int d = 0; d < o->rank && d < IC_MAX_RANK && n < 140; d++)
                n += snprintf(got + n, sizeof got - (size_t)n, "%s%lld", d ? ", " : "", (long long)o->shape[d]);
            got[n] = 0;
            n = 0;
            for (int d = 0; d < w->rank && n < 140; d++)
                n += snprintf(want + n, sizeof want - (size_t)n, "%s%lld", d ? ", " : "", (long long)w->shape[d]);
            want[n] = 0;
            return ic__node_error(g, ni.name, "output", IC_ESHAPE,
                                  "output %d must be a contiguous %s [%s] with data, got %s [%s]%s%s", i,
                                  ic_dtype_name(w->dtype), want,
                                  (unsigned)o->dtype < IC_DTYPE_COUNT ? ic_dtype_name(o->dtype) : "?", got,
                                  ic_tensor_is_contiguous(o) ? "" : " (strided)", o->data ? "" : " (no data)");
        }
        for (int j = 0; j < nargs; j++)
            if (overlap(o, &args[j]))
                return ic__node_error(g, ni.name, "output", IC_EINVAL,
                                      "output %d overlaps argument %d: outputs must be separate memory", i, j);
        for (int j = 0; j < i; j++)
            if (overlap(o, &outs[j]))
                return ic__node_error(g, ni.name, "output", IC_EINVAL, "output %d overlaps output %d", i, j);
    }
    return IC_OK;
}

/* Fills the buffer table of slot s for one run. */
ic_status ic__bind_buffers(ic_compiled *cc, const ic__variant *v, ic__slot *s,
                              const ic_tensor *args, const ic_tensor *outs)
{
    for (int b = 0; b < v->nbufs; b++) {
        const ic_buffer *buf = ic_program_buffer(v->b.prog, b);
        switch (buf->kind) {
        case IC_BUF_ARG: {
            const ic_tensor *a = &args[buf->index];
            if (ic_tensor_is_contiguous(a)) {
                s->bufs[b] = a->data;
                break;
            }
            size_t need = (size_t)ic_tensor_numel(a) * ic_dtype_size(a->dtype);
            if (s->staging_cap[buf->index] < need) {
                /* first strided use of this arg in this slot; reused afterwards */
                void *raw, *p = alloc64(cc->c, need, &raw);
                if (!p)
                    return ic__error(cc->c, IC_ENOMEM, "ic_run: out of memory staging argument %d",
                                     buf->index);
                ic__free(cc->c, s->staging_raw[buf->index]);
                s->staging_raw[buf->index] = raw;
                s->staging[buf->index] = p;
                s->staging_cap[buf->index] = need;
            }
            ic__copy_strided(s->staging[buf->index], a);
            s->bufs[b] = s->staging[buf->index];
            break;
        }
        case IC_BUF_PARAM: s->bufs[b] = (void *)buf->data; break;
        case IC_BUF_OUTPUT: s->bufs[b] = outs[buf->index].data; break;
        case IC_BUF_TEMP: s->bufs[b] = (char *)s->arena + buf->arena_offset; break;
        }
    }
    return IC_OK;
}

/* The buffer table kernel k is called with: the slot's, or for a kernel that runs another's
 * code, the slot's alternate table with the buffers that code reads pointing at k's own. */
void *const *ic__kernel_table(const ic__variant *v, ic__slot *slot, int k)
{
    const ic__remap *r = &v->remap[k];
    if (r->n == 0)
        return slot->bufs;
    for (int i = 0; i < r->n; i++)
        slot->alt[r->pairs[2 * i]] = slot->bufs[r->pairs[2 * i + 1]];
    return slot->alt;
}

