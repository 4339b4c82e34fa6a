/* variants.c - the variant cache of a compiled graph, for every backend: one specialisation
 * per distinct set of symbol values, made by ic__pipeline on first sight, at most max_variants
 * kept (least recently used idle one dropped first). Not locked: the caller serialises. */
#include <string.h>
#include "pipeline-impl.h"

void ic__vcache_init(ic__vcache *vc, const ic__pipe *P, int max_variants)
{
    memset(vc, 0, sizeof *vc);
    vc->pipe = *P;
    vc->nsyms = ic_graph_num_symbols(P->g);
    vc->max = max_variants;
}

void ic__vcache_free(ic__vcache *vc)
{
    for (int i = 0; i < vc->n; i++)
        ic__variant_free(&vc->pipe, vc->v[i]);
    ic__free(vc->pipe.c, vc->v);
    vc->v = NULL;
    vc->n = vc->cap = 0;
    vc->last = NULL;
}

static ic__vbase *lookup(const ic__vcache *vc, const int64_t *vals)
{
    for (int i = 0; i < vc->n; i++)
        if (vc->nsyms == 0 || memcmp(vc->v[i]->vals, vals, sizeof *vals * (size_t)vc->nsyms) == 0)
            return vc->v[i];
    return NULL;
}

/* Past the limit, drops the least recently used variant that no run is using (never keep).
 * Over the limit while every other one is busy, until they finish. */
static void evict(ic__vcache *vc, const ic__vbase *keep)
{
    int limit = vc->max ? vc->max : 16;
    while (limit > 0 && vc->n > limit) {
        int lru = -1;
        for (int i = 0; i < vc->n; i++) {
            const ic__vbase *v = vc->v[i];
            if (v != keep && v->busy == 0 && (lru < 0 || v->used < vc->v[lru]->used))
                lru = i;
        }
        if (lru < 0)
            return;
        ic__vbase *v = vc->v[lru];
        if (vc->last == v)
            vc->last = NULL;
        memmove(vc->v + lru, vc->v + lru + 1, sizeof *vc->v * (size_t)(vc->n - lru - 1));
        vc->n--;
        ic__variant_free(&vc->pipe, v);
    }
}

/* Compiles the variant for vals and appends it. */
static ic_status add(ic__vcache *vc, const int64_t *vals, ic__vbase **out)
{
    ic_ctx *c = vc->pipe.c;
    if (vc->n == vc->cap) {
        int cap = vc->cap ? 2 * vc->cap : 4;
        ic__vbase **nv = ic__realloc(c, vc->v, sizeof *nv * (size_t)cap);
        if (!nv)
            return ic__error(c, IC_ENOMEM, "compile: out of memory for a variant");
        vc->v = nv, vc->cap = cap;
    }
    ic__pipe P = vc->pipe;
    ic__vbase *v = NULL;
    ic_status s = ic__pipeline(&P, vals, &v);
    if (s) {
        ic__variant_free(&P, v);
        return s;
    }
    vc->v[vc->n++] = *out = v;
    return IC_OK;
}

ic_status ic__vcache_get(ic__vcache *vc, const int64_t *vals, ic__vbase **out)
{
    ic__vbase *v = lookup(vc, vals);
    ic_status s = v ? IC_OK : add(vc, vals, &v);
    if (s)
        return s;
    vc->last = v;
    v->used = ++vc->tick;
    evict(vc, v);
    *out = v;
    return IC_OK;
}
