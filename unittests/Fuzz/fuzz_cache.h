/* fuzz_cache.h - persistent cache entries (cache.c's layout: cache-impl.h) for the cache
 * harnesses, raw or sealed.
 *
 * A raw mutation of an entry never gets past its checksum, nor matches this build's version
 * text (it names the build id, which every source change moves), so a sealed input is the
 * entry's middle only, its key and value fields as the file has them (u64 length + bytes each,
 * lengths free to be wrong); fz_cache_seal puts the magic and this build's version field in
 * front and the checksum behind, as the library's own writer does. */
#ifndef IC_FUZZ_CACHE_H
#define IC_FUZZ_CACHE_H
#include "fuzz_common.h"
#include "cache-impl.h"
#include "key-impl.h"

/* magic, this build's version field, body[0..n), checksum (ic__cache_seal): malloc'd into
 * *out (*nout bytes). */
static inline void fz_cache_seal(const uint8_t *body, size_t n, uint8_t **out, size_t *nout)
{
    const void *parts[1] = { body };
    const size_t sizes[1] = { n };
    *out = (uint8_t *)ic__cache_seal(1, parts, sizes, nout);
    if (!*out)
        abort();
}

/* The namespaces the library reads, in the order the harnesses' selector byte picks them. */
static const char *const fz_cache_ns[4] = { IC__CACHE_CPU_OBJ, IC__CACHE_CPU_TUNE, IC__CACHE_GPU_CODE,
                                            IC__CACHE_GPU_TUNE };
#endif
