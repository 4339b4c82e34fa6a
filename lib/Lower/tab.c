/* tab.c - a small open-addressing hash table of pointers (hash-consing and CSE). */
#include <string.h>
#include "gen.h"

void ic__tab_init(ic__tab *t, ic_ctx *c)
{
    memset(t, 0, sizeof *t);
    t->c = c;
}

void ic__tab_free(ic__tab *t)
{
    ic__free(t->c, t->hash);
    ic__free(t->c, t->item);
    t->hash = NULL;
    t->item = NULL;
    t->cap = t->n = 0;
}

void ic__tab_clear(ic__tab *t)
{
    if (t->cap)
        memset(t->item, 0, sizeof(void *) * t->cap);
    t->n = 0;
}

void *ic__tab_find(const ic__tab *t, uint64_t h, bool (*eq)(const void *, const void *),
                   const void *key)
{
    if (!t->cap)
        return NULL;
    for (size_t i = h & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
        if (!t->item[i])
            return NULL;
        if (t->hash[i] == h && eq(t->item[i], key))
            return t->item[i];
    }
}

static void put_raw(uint64_t *hash, void **item, size_t cap, uint64_t h, void *it)
{
    size_t i = h & (cap - 1);
    while (item[i])
        i = (i + 1) & (cap - 1);
    hash[i] = h;
    item[i] = it;
}

static bool grow(ic__tab *t)
{
    size_t cap = t->cap ? t->cap * 2 : 64;
    uint64_t *hash = ic__calloc(t->c, cap, sizeof *hash);
    void **item = ic__calloc(t->c, cap, sizeof *item);
    if (!hash || !item) {
        ic__free(t->c, hash);
        ic__free(t->c, item);
        return false;
    }
    for (size_t i = 0; i < t->cap; i++)
        if (t->item[i])
            put_raw(hash, item, cap, t->hash[i], t->item[i]);
    ic__free(t->c, t->hash);
    ic__free(t->c, t->item);
    t->hash = hash;
    t->item = item;
    t->cap = cap;
    return true;
}

bool ic__tab_put(ic__tab *t, uint64_t h, void *item)
{
    if ((t->n + 1) * 2 > t->cap && !grow(t))
        return false;
    put_raw(t->hash, t->item, t->cap, h, item);
    t->n++;
    return true;
}
