/* cache.c - the persistent cache's store: one file per key, written atomically and checked on
 * every read (cache-impl.h). get and put run once per kernel on every compile, so each touches
 * only its own file: no folder scans, no locks, no fsync. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <llvm-c/Core.h>
#include "cache-impl.h"
#include "file-impl.h"
#include "key-impl.h"

/* Bumped whenever the entry layout or the meaning of a namespace's values changes; entries of
 * an older format read as another version. */
#define CACHE_FORMAT 2
static const char magic[8] = { 'I', 'C', 'C', 'A', 'C', 'H', 'E', '0' + CACHE_FORMAT };
/* Larger files are not entries: a bound checked before allocating. */
#define MAX_ENTRY ((uint64_t)1 << 36)
#define PATH_LEN 1024

/* Test hooks: process-wide because they stand for another build of the library, not for a
 * setting of one context. */
static char version_salt[64];
static int hash_bits = 64;

/* The folder whose write failure was last reported: a folder that cannot be written stays so
 * for a whole compile, and one line per process tells why nothing is cached there. */
static _Atomic uint64_t warned_dir;

uint64_t ic__hash_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

bool ic__cache_on(ic_ctx *c, int want)
{
    return want >= 0 && !c->sw.no_cache;
}

bool ic__cache_dir(ic_ctx *c, char *buf, size_t n)
{
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int w;
    if (c->sw.cache_dir)
        w = snprintf(buf, n, "%s", c->sw.cache_dir);
    else if (xdg && *xdg)
        w = snprintf(buf, n, "%s/ic-llvm", xdg);
    else if (home && *home)
        w = snprintf(buf, n, "%s/.cache/ic-llvm", home);
    else
        return false;
    return w > 0 && (size_t)w < n;
}

void ic__cache_set_version_salt(const char *salt)
{
    snprintf(version_salt, sizeof version_salt, "%s", salt ? salt : "");
}

void ic__cache_set_hash_bits(int bits)
{
    hash_bits = bits < 0 ? 0 : bits > 64 ? 64 : bits;
}

/* Everything a value depends on besides the caller's key: the versions of ic (and its build,
 * a hash of its sources), LLVM and the entry format. */
static size_t version_text(char *buf, size_t n)
{
    unsigned maj, min, pat;
    LLVMGetVersion(&maj, &min, &pat);
    int w = snprintf(buf, n, "ic %s build %s llvm %u.%u.%u format %d%s%s", ic_version(), ic_build_id(), maj,
                     min, pat, CACHE_FORMAT, version_salt[0] ? " salt " : "", version_salt);
    return w < 0 ? 0 : (size_t)w < n ? (size_t)w : n - 1;
}

bool ic__cache_ns_ok(const char *ns)
{
    size_t n = strspn(ns, "abcdefghijklmnopqrstuvwxyz0123456789_-");
    return n > 0 && n < IC__CACHE_NS_MAX && !ns[n];
}

void ic__cache_file_name(const char *ns, const char *key, size_t nkey, char *name)
{
    char ver[160];
    size_t nv = version_text(ver, sizeof ver);
    uint64_t h = ic__hash_data(IC__HASH_SEED, ver, nv);
    h = ic__hash_bytes(h, ns, strlen(ns) + 1);
    h = ic__hash_data(h, key, nkey);
    if (hash_bits < 64)
        h &= (1ull << hash_bits) - 1;
    snprintf(name, IC__CACHE_NAME_LEN + 1, "%016llx", (unsigned long long)h);
}

ic__file_kind ic__cache_file_kind(const char *name)
{
    size_t n = strspn(name, "0123456789abcdef");
    if (n != IC__CACHE_NAME_LEN)
        return IC__FILE_OTHER;
    if (!name[n])
        return IC__FILE_ENTRY;
    return strncmp(name + n, ".tmp.", 5) ? IC__FILE_OTHER : IC__FILE_TEMP;
}

/* ---- reading ---- */

static bool take_field(const char **p, const char *end, const char **field, uint64_t *len)
{
    if ((size_t)(end - *p) < 8)
        return false;
    memcpy(len, *p, 8);
    *p += 8;
    if (*len > (uint64_t)(end - *p))
        return false;
    *field = *p;
    *p += *len;
    return true;
}

ic__entry_state ic__cache_parse(const void *buf, size_t n, ic__cache_view *v, const char **why)
{
    const char *b = buf, *ver;
    uint64_t nver, sum;
    memset(v, 0, sizeof *v);
    *why = "";
    if (n < sizeof magic || memcmp(b, magic, sizeof magic - 1))
        return *why = "not a cache entry (bad magic)", IC__ENTRY_CORRUPT;
    if (b[sizeof magic - 1] != magic[sizeof magic - 1])
        return IC__ENTRY_OTHER_VERSION;   /* another format: its fields are not ours to read */
    if (n < sizeof magic + 4 * 8)
        return *why = "truncated", IC__ENTRY_CORRUPT;
    const char *p = b + sizeof magic, *end = b + n - 8;
    if (!take_field(&p, end, &ver, &nver) ||
        !take_field(&p, end, &v->key, &v->nkey) || !take_field(&p, end, &v->val, &v->nval))
        return *why = "truncated", IC__ENTRY_CORRUPT;
    if (p != end)
        return *why = "bad lengths", IC__ENTRY_CORRUPT;
    memcpy(&sum, end, 8);
    if (sum != ic__hash_data(IC__HASH_SEED, b, n - 8))
        return *why = "checksum mismatch", IC__ENTRY_CORRUPT;
    char mine[160];
    size_t nmine = version_text(mine, sizeof mine);
    return nver == nmine && !memcmp(ver, mine, nmine) ? IC__ENTRY_OK : IC__ENTRY_OTHER_VERSION;
}

/* The whole file at path (malloc'd), or NULL: absent, unreadable, not a regular file, too large. */
static char *read_entry_file(const char *path, size_t *n)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    struct stat st;
    char *b = NULL;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size <= MAX_ENTRY)
        b = malloc((size_t)st.st_size + 1);
    size_t got = 0, want = b ? (size_t)st.st_size : 0;
    while (b && got < want) {
        ssize_t r = read(fd, b + got, want - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            free(b);
            b = NULL;
        } else {
            got += (size_t)r;
        }
    }
    close(fd);
    *n = got;
    return b;
}

bool ic__cache_get(ic_ctx *c, const char *ns, const char *key, void **data, size_t *n)
{
    char dir[PATH_LEN], name[IC__CACHE_NAME_LEN + 1], path[PATH_LEN + 64];
    *data = NULL;
    *n = 0;
    if (!ic__cache_on(c, 0) || !ic__cache_ns_ok(ns) || !ic__cache_dir(c, dir, sizeof dir))
        return false;
    size_t nkey = strlen(key), sz = 0;
    ic__cache_file_name(ns, key, nkey, name);
    snprintf(path, sizeof path, "%s/%s/%s", dir, ns, name);
    char *b = read_entry_file(path, &sz);
    if (!b)
        return false;
    ic__cache_view v;
    const char *why;
    ic__entry_state st = ic__cache_parse(b, sz, &v, &why);
    if (st != IC__ENTRY_OK || v.nkey != nkey || memcmp(v.key, key, nkey)) {
        if (st == IC__ENTRY_CORRUPT)
            ic__logf(c, 1, "ic: cache: ignoring %s: %s", path, why);
        free(b);
        return false;
    }
    memmove(b, v.val, (size_t)v.nval);
    *data = b;
    *n = (size_t)v.nval;
    return true;
}

/* ---- writing ---- */

/* No fsync: after a power loss a renamed entry may be empty or torn (the rename reached the
 * disk before the data); its checksum then makes it a miss and the next put rewrites it, while
 * an fsync per kernel would add milliseconds of disk flush to every compile. */
int ic__cache_write_file(const char *dir, const char *ns, const char *name, const void *b, size_t n)
{
    char path[PATH_LEN + 64];
    int w = snprintf(path, sizeof path, "%s/%s/%s", dir, ns, name);
    if (!ic__cache_ns_ok(ns))
        return EINVAL;
    if (w < 0 || (size_t)w >= sizeof path)
        return ENAMETOOLONG;
    return ic__write_atomic_bytes(path, b, n, IC__WRITE_MKDIRS, NULL);
}

char *ic__cache_seal(int nparts, const void *const *parts, const size_t *sizes, size_t *len)
{
    char ver[160];
    uint64_t nv = version_text(ver, sizeof ver);
    size_t body = 0;
    for (int i = 0; i < nparts; i++)
        body += sizes[i];
    *len = sizeof magic + 8 + (size_t)nv + body + 8;
    char *b = malloc(*len), *p = b;
    if (!b)
        return NULL;
    memcpy(p, magic, sizeof magic);
    memcpy(p + sizeof magic, &nv, 8);
    memcpy(p + sizeof magic + 8, ver, (size_t)nv);
    p += sizeof magic + 8 + nv;
    for (int i = 0; i < nparts; i++) {
        if (sizes[i])
            memcpy(p, parts[i], sizes[i]);
        p += sizes[i];
    }
    uint64_t sum = ic__hash_data(IC__HASH_SEED, b, (size_t)(p - b));
    memcpy(p, &sum, 8);
    return b;
}

/* The entry's bytes (malloc'd), *len of them: the key and value fields, sealed; NULL on OOM. */
static char *make_entry(const char *key, size_t nkey, const void *data, size_t n, size_t *len)
{
    uint64_t nk = nkey, nd = n;
    const void *parts[4] = { &nk, key, &nd, data };
    const size_t sizes[4] = { 8, nkey, 8, n };
    return ic__cache_seal(4, parts, sizes, len);
}

void ic__cache_put(ic_ctx *c, const char *ns, const char *key, const void *data, size_t n)
{
    char dir[PATH_LEN], name[IC__CACHE_NAME_LEN + 1];
    if (!ic__cache_on(c, 0) || !ic__cache_dir(c, dir, sizeof dir))
        return;
    size_t nkey = strlen(key), len;
    ic__cache_file_name(ns, key, nkey, name);
    char *b = make_entry(key, nkey, data, n, &len);
    int err = b ? ic__cache_write_file(dir, ns, name, b, len) : ENOMEM;
    free(b);
    if (!err)
        return;
    uint64_t h = ic__hash_bytes(IC__HASH_SEED, dir, strlen(dir));
    if (atomic_exchange(&warned_dir, h) != h)
        ic__logf(c, 1, "ic: cache: cannot write in %s (%s): nothing is cached there", dir, strerror(err));
}
