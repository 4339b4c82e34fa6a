/* fuzz_cache.h - persistent cache entries (cache.c's layout: cache-impl.h) for the cache
 * harnesses, raw or sealed.
 *
 * A raw mutation of an entry never gets past its checksum, nor matches this build's version
 * text (it names the build id, which every source change moves), so a sealed input is the
 * entry's middle only, its key and value fields as the file has them (u64 length + bytes each,
 * lengths free to be wrong); fz_cache_seal puts the magic and this build's version field in
 * front and the checksum behind. */
#ifndef IC_FUZZ_CACHE_H
#define IC_FUZZ_CACHE_H
#include "fuzz_common.h"
#include "cache-impl.h"
#include "key-impl.h"

static uint8_t fz_cache_magic[8];

/* This build's version field (u64 length + text) and magic (fz_cache_magic), taken from an
 * entry ic__cache_put writes. */
static inline const uint8_t *fz_cache_version(size_t *n)
{
    static uint8_t field[256];
    static size_t nfield;
    if (nfield) {
        *n = nfield;
        return field;
    }
    ic_ctx *c = fz_ctx();
    char dir[512], name[IC__CACHE_NAME_LEN + 1], path[700];
    ic__cache_put(c, "fuzz-version", "k", "v", 1);
    ic__cache_file_name("fuzz-version", "k", 1, name);
    snprintf(dir, sizeof dir, "%s/cache/fuzz-version", fz_dir());
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    uint64_t nver = 0;
    if (!f || fread(fz_cache_magic, 8, 1, f) != 1 || fread(&nver, 8, 1, f) != 1 || nver > sizeof field - 8 ||
        fread(field + 8, 1, (size_t)nver, f) != nver) {
        fprintf(stderr, "fuzz: cannot read the cache's version field from %s\n", path);
        abort();
    }
    fclose(f);
    remove(path);
    rmdir(dir);
    memcpy(field, &nver, 8);
    nfield = 8 + (size_t)nver;
    ic_ctx_destroy(c);
    *n = nfield;
    return field;
}

/* magic, version field, body[0..n), checksum: malloc'd into *out (*nout bytes). */
static inline void fz_cache_seal(const uint8_t *body, size_t n, uint8_t **out, size_t *nout)
{
    size_t nv;
    const uint8_t *ver = fz_cache_version(&nv);
    size_t total = 8 + nv + n + 8;
    uint8_t *b = malloc(total);
    if (!b)
        abort();
    memcpy(b, fz_cache_magic, 8);
    memcpy(b + 8, ver, nv);
    if (n)
        memcpy(b + 8 + nv, body, n);
    uint64_t sum = ic__hash_data(IC__HASH_SEED, b, total - 8);
    memcpy(b + total - 8, &sum, 8);
    *out = b;
    *nout = total;
}

/* The namespaces the library reads, in the order the harnesses' selector byte picks them. */
static const char *const fz_cache_ns[4] = { IC__CACHE_CPU_OBJ, IC__CACHE_CPU_TUNE, IC__CACHE_GPU_CODE,
                                            IC__CACHE_GPU_TUNE };
#endif
