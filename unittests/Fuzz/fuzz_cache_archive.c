/* fuzz_cache_archive.c - cache export files read by ic_cache_import (lib/Runtime/cache_admin.c).
 * An input starting with "ICCEXP" is the file as is. Any other is records to seal: each a
 * selector byte (bits 0-1: the namespace, fuzz_cache.h), a u32 little-endian length and that
 * many bytes of an entry's sealed middle; the harness writes the export with the right count,
 * record checksums and sealed entries. An import that succeeds must list, export and import
 * again; every import's entries are cleared after it (the cache is under the temporary folder). */
#include "fuzz_cache.h"

static const char *archive(char *path, size_t np, const uint8_t *data, size_t size)
{
    if (size >= 6 && !memcmp(data, "ICCEXP", 6))
        return fz_write(path, np, "a.iccx", data, size);
    char *buf = NULL;
    size_t nbuf = 0, at = 0;
    FILE *f = open_memstream(&buf, &nbuf);
    uint64_t count = 0;
    ic__cache_export_head(f, 0);
    while (at < size) {
        const char *ns = fz_cache_ns[data[at++] & 3];
        uint32_t len = 0;
        for (int i = 0; i < 4 && at < size; i++)
            len |= (uint32_t)data[at++] << (8 * i);
        size_t n = len < size - at ? len : size - at, ne;
        uint8_t *e;
        fz_cache_seal(data + at, n, &e, &ne);
        at += n;
        ic__cache_export_record(f, ns, e, ne);
        free(e);
        count++;
    }
    rewind(f);
    ic__cache_export_head(f, count);
    if (fclose(f))
        abort();
    fz_write(path, np, "a.iccx", buf, nbuf);
    free(buf);
    return path;
}

static void round_trip(ic_ctx *c, const ic_cache_counts *k)
{
    ic_cache_entry *list = NULL;
    int n = 0;
    FZ_CHECK(ic_cache_list(c, &list, &n) == IC_OK, "list after import: %s", ic_last_error(c));
    FZ_CHECK(n <= k->entries, "%d entries listed after importing %lld", n, (long long)k->entries);
    ic_cache_free(c, list);
    char path[512];
    ic_cache_counts k2;
    fz_path(path, sizeof path, "again.iccx");
    FZ_CHECK(ic_cache_export(c, path, &k2) == IC_OK, "export after import: %s", ic_last_error(c));
    FZ_CHECK(ic_cache_import(c, path, &k2) == IC_OK, "the export of an import does not import: %s",
             ic_last_error(c));
    remove(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ic_ctx *c = fz_ctx();
    char path[512];
    archive(path, sizeof path, data, size);
    ic_cache_counts k;
    ic_status s = ic_cache_import(c, path, &k);
    fz_note(c, s);
    if (s == IC_OK)
        round_trip(c, &k);
    else
        FZ_CHECK(ic_last_error(c)[0], "status %d without a message", (int)s);
    FZ_CHECK(ic_cache_clear(c, NULL, &k) == IC_OK, "clear: %s", ic_last_error(c));
    ic_ctx_destroy(c);
    return 0;
}
