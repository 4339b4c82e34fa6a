/* cache.c - the persistent cache: one file per key, written atomically (cache-impl.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <llvm-c/Core.h>
#include "cache-impl.h"

/* Bumped whenever the entry layout or the meaning of a namespace's values changes. */
#define CACHE_FORMAT 1
static const char magic[8] = "ICCACHE1";

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

/* Everything a value depends on besides the caller's key: versions of ic, LLVM, the format. */
static void version_text(char *buf, size_t n)
{
    unsigned maj, min, pat;
    LLVMGetVersion(&maj, &min, &pat);
    snprintf(buf, n, "ic %s build %s llvm %u.%u.%u format %d", ic_version(), ic_build_id(), maj, min, pat,
             CACHE_FORMAT);
}

/* <dir>/<ns>/<hash>: false when the folder cannot be named. */
static bool entry_path(ic_ctx *c, const char *ns, const char *key, char *path, size_t n)
{
    char dir[900], ver[128];
    if (!ic__cache_dir(c, dir, sizeof dir))
        return false;
    version_text(ver, sizeof ver);
    uint64_t h = ic__hash_bytes(IC__HASH_SEED, ver, strlen(ver));
    h = ic__hash_bytes(h, ns, strlen(ns) + 1);
    h = ic__hash_bytes(h, key, strlen(key));
    int w = snprintf(path, n, "%s/%s/%016llx", dir, ns, (unsigned long long)h);
    return w > 0 && (size_t)w < n;
}

/* Reads all of f into a malloc'd buffer. */
static void *slurp(FILE *f, size_t *n)
{
    if (fseek(f, 0, SEEK_END) || ftell(f) < 0)
        return NULL;
    size_t sz = (size_t)ftell(f);
    rewind(f);
    char *b = malloc(sz + 1);
    if (b && fread(b, 1, sz, f) != sz) {
        free(b);
        return NULL;
    }
    *n = sz;
    return b;
}

/* Entry layout: magic, u64 version-text length, version text, u64 key length, key,
 * u64 value length, value, u64 hash of everything before it. */
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

static bool parse_entry(const char *b, size_t n, const char *key, const char **val, uint64_t *vlen)
{
    char ver[128];
    version_text(ver, sizeof ver);
    const char *p = b, *end = b + n, *v, *k;
    uint64_t lv, lk, h;
    if (n < sizeof magic + 8 || memcmp(b, magic, sizeof magic))
        return false;
    p += sizeof magic;
    if (!take_field(&p, end - 8, &v, &lv) || lv != strlen(ver) || memcmp(v, ver, lv) ||
        !take_field(&p, end - 8, &k, &lk) || lk != strlen(key) || memcmp(k, key, lk) ||
        !take_field(&p, end - 8, val, vlen) || p != end - 8)
        return false;
    memcpy(&h, p, 8);
    return h == ic__hash_bytes(IC__HASH_SEED, b, (size_t)(p - b));
}

bool ic__cache_get(ic_ctx *c, const char *ns, const char *key, void **data, size_t *n)
{
    char path[1024];
    *data = NULL;
    *n = 0;
    if (!ic__cache_on(c, 0) || !entry_path(c, ns, key, path, sizeof path))
        return false;
    FILE *f = fopen(path, "rb");
    if (!f)
        return false;
    size_t sz = 0;
    char *b = slurp(f, &sz);
    fclose(f);
    const char *val;
    uint64_t vlen;
    if (!b || !parse_entry(b, sz, key, &val, &vlen)) {
        free(b);
        return false;
    }
    memmove(b, val, (size_t)vlen);
    *data = b;
    *n = (size_t)vlen;
    return true;
}

/* mkdir -p of path's folders. */
static bool make_dirs(char *path)
{
    for (char *s = strchr(path + 1, '/'); s; s = strchr(s + 1, '/')) {
        *s = 0;
        bool ok = mkdir(path, 0777) == 0 || errno == EEXIST;
        *s = '/';
        if (!ok)
            return false;
    }
    return true;
}

static bool put_field(FILE *f, const void *p, uint64_t n, uint64_t *h)
{
    *h = ic__hash_bytes(*h, &n, 8);
    *h = ic__hash_bytes(*h, p, (size_t)n);
    return fwrite(&n, 8, 1, f) == 1 && fwrite(p, 1, (size_t)n, f) == n;
}

static bool write_entry(FILE *f, const char *key, const void *data, size_t n)
{
    char ver[128];
    version_text(ver, sizeof ver);
    uint64_t h = ic__hash_bytes(IC__HASH_SEED, magic, sizeof magic);
    bool ok = fwrite(magic, 1, sizeof magic, f) == sizeof magic && put_field(f, ver, strlen(ver), &h) &&
              put_field(f, key, strlen(key), &h) && put_field(f, data, n, &h) && fwrite(&h, 8, 1, f) == 1;
    return fflush(f) == 0 && ok && fsync(fileno(f)) == 0;
}

void ic__cache_put(ic_ctx *c, const char *ns, const char *key, const void *data, size_t n)
{
    char path[1024], tmp[1100];
    if (!ic__cache_on(c, 0) || !entry_path(c, ns, key, path, sizeof path) || !make_dirs(path))
        return;
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    bool ok = f && write_entry(f, key, data, n);
    if (f)
        ok = fclose(f) == 0 && ok;
    else if (fd >= 0)
        close(fd);
    if (!ok || rename(tmp, path) != 0) {
        ic__logf(c, 1, "ic: cache: could not write %s: %s", path, strerror(errno));
        unlink(tmp);
    }
}
