/* cache_admin.c - the persistent cache as a whole (include/ic/cache.h): list, stats, clear,
 * gc, export and import, on the store's helpers (cache-impl.h). Unlike get and put these scan
 * folders: they serve ic-cache and users, never a compile. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "ic/cache.h"
#include "cache-impl.h"
#include "file-impl.h"
#include "key-impl.h"

#define PATH_LEN 1024
/* A temporary file younger than this may belong to a writer still running. */
#define TEMP_MAX_AGE_S 3600
static const char export_magic[8] = { 'I', 'C', 'C', 'E', 'X', 'P', '0', '1' };

ic_status ic_cache_dir(ic_ctx *c, char *buf, size_t n)
{
    if (!ic__cache_dir(c, buf, n))
        return ic__error(c, IC_EINVAL, "cache: no folder (IC_CACHE_DIR, XDG_CACHE_HOME and HOME "
                                       "are unset, or the path is too long)");
    return IC_OK;
}

void ic_cache_free(ic_ctx *c, void *p)
{
    ic__free(c, p);
}

/* ---- walking the folder ---- */

/* One file of a namespace folder, as the walk hands it to a visitor. */
typedef struct {
    const char *ns, *name, *path;
    ic__file_kind kind;
    struct stat st;
} cache_file;

typedef ic_status (*visit_fn)(ic_ctx *c, const cache_file *f, void *user);

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in folder path that keep(name) accepts, sorted: *names (malloc'd array of malloc'd
 * strings: free_names) of *n. A missing folder has none; another failure is IC_EIO. */
static ic_status read_names(ic_ctx *c, const char *path, bool (*keep)(const char *), char ***names, int *n)
{
    *names = NULL;
    *n = 0;
    DIR *d = opendir(path);
    if (!d)
        return errno == ENOENT ? IC_OK
                               : ic__error(c, IC_EIO, "cache: cannot read folder %s: %s", path, strerror(errno));
    int cap = 0;
    ic_status s = IC_OK;
    for (struct dirent *e; s == IC_OK && (e = readdir(d));) {
        if (!keep(e->d_name))
            continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            char **grown = realloc(*names, (size_t)cap * sizeof *grown);
            if (!grown) {
                s = ic__error(c, IC_ENOMEM, "cache: out of memory listing %s", path);
                break;
            }
            *names = grown;
        }
        if (!((*names)[*n] = strdup(e->d_name)))
            s = ic__error(c, IC_ENOMEM, "cache: out of memory listing %s", path);
        else
            (*n)++;
    }
    closedir(d);
    if (*n)
        qsort(*names, (size_t)*n, sizeof **names, cmp_names);
    return s;
}

static void free_names(char **names, int n)
{
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

static bool is_ns_name(const char *s)
{
    return ic__cache_ns_ok(s);
}

static bool is_cache_file(const char *s)
{
    return ic__cache_file_kind(s) != IC__FILE_OTHER;
}

/* Calls fn for every entry and temporary file of namespace folder dir/ns, in name order. */
static ic_status walk_ns(ic_ctx *c, const char *dir, const char *ns, visit_fn fn, void *user)
{
    char nsdir[PATH_LEN + 64], path[PATH_LEN + 160];
    snprintf(nsdir, sizeof nsdir, "%s/%s", dir, ns);
    char **names;
    int n;
    ic_status s = read_names(c, nsdir, is_cache_file, &names, &n);
    for (int i = 0; s == IC_OK && i < n; i++) {
        cache_file f = { ns, names[i], path, ic__cache_file_kind(names[i]) };
        snprintf(path, sizeof path, "%s/%s", nsdir, names[i]);
        if (lstat(path, &f.st) != 0 || !S_ISREG(f.st.st_mode))
            continue;   /* gone since the folder was read (a concurrent clear), or not ours */
        s = fn(c, &f, user);
    }
    free_names(names, n);
    return s;
}

/* Calls fn for every file of namespace ns, or of every namespace (ns NULL), in order. */
static ic_status walk(ic_ctx *c, const char *ns, visit_fn fn, void *user)
{
    char dir[PATH_LEN];
    ic_status s = ic_cache_dir(c, dir, sizeof dir);
    if (s || ns)
        return s ? s : walk_ns(c, dir, ns, fn, user);
    char **names;
    int n;
    s = read_names(c, dir, is_ns_name, &names, &n);
    for (int i = 0; s == IC_OK && i < n; i++)
        s = walk_ns(c, dir, names[i], fn, user);
    free_names(names, n);
    return s;
}

/* The whole of file f (malloc'd), or NULL with errno. */
static char *read_whole(const cache_file *f, size_t *n)
{
    FILE *fp = fopen(f->path, "rb");
    char *b = fp ? malloc((size_t)f->st.st_size + 1) : NULL;
    *n = b ? fread(b, 1, (size_t)f->st.st_size, fp) : 0;
    if (b && (ferror(fp) || *n != (size_t)f->st.st_size)) {
        free(b);
        b = NULL;
        errno = EIO;
    }
    if (fp)
        fclose(fp);
    return b;
}

/* The state of an entry's bytes b[0..n) as the public enum; *v filled when intact. */
static ic_cache_state entry_state(const char *b, size_t n, ic__cache_view *v)
{
    const char *why;
    if (!b)
        return IC_CACHE_CORRUPT;
    switch (ic__cache_parse(b, n, v, &why)) {
    case IC__ENTRY_OK: return IC_CACHE_VALID;
    case IC__ENTRY_OTHER_VERSION: return IC_CACHE_OTHER_VERSION;
    default: return IC_CACHE_CORRUPT;
    }
}

/* ---- list and stats ---- */

typedef struct {
    ic_cache_entry *e;
    int n, cap;
} entry_list;

static ic_status list_one(ic_ctx *c, const cache_file *f, void *user)
{
    entry_list *l = user;
    if (f->kind != IC__FILE_ENTRY)
        return IC_OK;
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        ic_cache_entry *grown = ic__realloc(c, l->e, (size_t)cap * sizeof *grown);
        if (!grown)
            return ic__error(c, IC_ENOMEM, "cache: out of memory listing %s", f->path);
        l->e = grown;
        l->cap = cap;
    }
    ic_cache_entry *e = &l->e[l->n++];
    memset(e, 0, sizeof *e);
    snprintf(e->ns, sizeof e->ns, "%s", f->ns);
    snprintf(e->file, sizeof e->file, "%s", f->name);
    e->bytes = (int64_t)f->st.st_size;
    e->mtime = (int64_t)f->st.st_mtime;
    size_t n;
    char *b = read_whole(f, &n);
    ic__cache_view v;
    e->state = entry_state(b, n, &v);
    if (v.key) {
        size_t len = strcspn(v.key, "\n");   /* keys are NUL-free text; the value follows */
        len = len < v.nkey ? len : (size_t)v.nkey;
        len = len < sizeof e->key - 1 ? len : sizeof e->key - 1;
        memcpy(e->key, v.key, len);
    }
    free(b);
    return IC_OK;
}

ic_status ic_cache_list(ic_ctx *c, ic_cache_entry **out, int *n)
{
    entry_list l = { 0 };
    ic_status s = walk(c, NULL, list_one, &l);
    if (s) {
        ic__free(c, l.e);
        l.e = NULL;
        l.n = 0;
    }
    *out = l.e;
    *n = l.n;
    return s;
}

typedef struct {
    ic_cache_ns_stats *s;
    int n, cap;
} stats_list;

static ic_status stats_one(ic_ctx *c, const cache_file *f, void *user)
{
    stats_list *l = user;
    if (!l->n || strcmp(l->s[l->n - 1].ns, f->ns)) {   /* the walk goes namespace by namespace */
        if (l->n == l->cap) {
            int cap = l->cap ? 2 * l->cap : 8;
            ic_cache_ns_stats *grown = ic__realloc(c, l->s, (size_t)cap * sizeof *grown);
            if (!grown)
                return ic__error(c, IC_ENOMEM, "cache: out of memory counting %s", f->path);
            l->s = grown;
            l->cap = cap;
        }
        memset(&l->s[l->n], 0, sizeof *l->s);
        snprintf(l->s[l->n++].ns, IC_CACHE_NS_MAX, "%s", f->ns);
    }
    ic_cache_ns_stats *s = &l->s[l->n - 1];
    if (f->kind == IC__FILE_ENTRY) {
        s->entries++;
        s->bytes += (int64_t)f->st.st_size;
    } else {
        s->temps++;
        s->temp_bytes += (int64_t)f->st.st_size;
    }
    return IC_OK;
}

ic_status ic_cache_stats(ic_ctx *c, ic_cache_ns_stats **out, int *n)
{
    stats_list l = { 0 };
    ic_status s = walk(c, NULL, stats_one, &l);
    if (s) {
        ic__free(c, l.s);
        l.s = NULL;
        l.n = 0;
    }
    *out = l.s;
    *n = l.n;
    return s;
}

/* ---- clear and gc ---- */

static ic_status remove_file(ic_ctx *c, const cache_file *f, ic_cache_counts *k, int64_t *count)
{
    if (unlink(f->path) != 0 && errno != ENOENT)
        return ic__error(c, IC_EIO, "cache: cannot remove %s: %s", f->path, strerror(errno));
    (*count)++;
    k->bytes += (int64_t)f->st.st_size;
    return IC_OK;
}

static ic_status clear_one(ic_ctx *c, const cache_file *f, void *user)
{
    ic_cache_counts *k = user;
    return remove_file(c, f, k, f->kind == IC__FILE_ENTRY ? &k->entries : &k->temps);
}

static ic_status gc_one(ic_ctx *c, const cache_file *f, void *user)
{
    ic_cache_counts *k = user;
    if (f->kind == IC__FILE_TEMP)
        return time(NULL) - f->st.st_mtime > TEMP_MAX_AGE_S ? remove_file(c, f, k, &k->temps) : IC_OK;
    size_t n;
    char *b = read_whole(f, &n);
    ic__cache_view v;
    ic_cache_state st = entry_state(b, n, &v);
    free(b);
    if (st == IC_CACHE_VALID)
        return IC_OK;
    return remove_file(c, f, k, st == IC_CACHE_CORRUPT ? &k->corrupt : &k->other_version);
}

/* Removes the namespace folders left empty (rmdir fails on the others, which is fine). */
static void remove_empty_ns(ic_ctx *c, const char *ns)
{
    char dir[PATH_LEN], path[PATH_LEN + 64];
    char **names = NULL;
    int n = 0;
    if (ic_cache_dir(c, dir, sizeof dir) || (!ns && read_names(c, dir, is_ns_name, &names, &n)))
        return;
    for (int i = 0; i < (ns ? 1 : n); i++) {
        snprintf(path, sizeof path, "%s/%s", dir, ns ? ns : names[i]);
        rmdir(path);
    }
    free_names(names, n);
}

/* A namespace ic_cache_clear takes: one this build writes, or a folder of the cache. */
static ic_status check_ns(ic_ctx *c, const char *ns)
{
    static const char *const known[] = { IC__CACHE_CPU_OBJ, IC__CACHE_CPU_TUNE, IC__CACHE_GPU_CODE,
                                         IC__CACHE_GPU_TUNE };
    char dir[PATH_LEN], path[PATH_LEN + 64];
    struct stat st;
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        if (!strcmp(ns, known[i]))
            return IC_OK;
    ic_status s = ic_cache_dir(c, dir, sizeof dir);
    if (s)
        return s;
    snprintf(path, sizeof path, "%s/%s", dir, ns);
    if (ic__cache_ns_ok(ns) && stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return IC_OK;
    return ic__error(c, IC_EINVAL, "cache %s: no namespace '%s' (namespaces: %s, %s, %s, %s)", dir, ns,
                     known[0], known[1], known[2], known[3]);
}

ic_status ic_cache_clear(ic_ctx *c, const char *ns, ic_cache_counts *out)
{
    ic_cache_counts k = { 0 };
    ic_status s = ns ? check_ns(c, ns) : IC_OK;
    if (!s)
        s = walk(c, ns, clear_one, &k);
    if (!s)
        remove_empty_ns(c, ns);
    if (out)
        *out = k;
    return s;
}

ic_status ic_cache_gc(ic_ctx *c, ic_cache_counts *out)
{
    ic_cache_counts k = { 0 };
    ic_status s = walk(c, NULL, gc_one, &k);
    if (out)
        *out = k;
    return s;
}

/* ---- export ----
 * File layout: magic "ICCEXP01", u64 count, then per entry: u64 namespace length, namespace,
 * u64 entry length, the entry's file as it is (it carries its own version and checksum), and
 * u64 ic__hash_data of the namespace and the entry length (the parts the entry's own checksum
 * does not cover). */

typedef struct {
    FILE *f;
    ic_cache_counts *k;
} export_state;

static uint64_t record_sum(const char *ns, uint64_t nns, uint64_t nentry)
{
    return ic__hash_data(ic__hash_data(IC__HASH_SEED, ns, (size_t)nns), &nentry, 8);
}

void ic__cache_export_head(FILE *f, uint64_t count)
{
    fwrite(export_magic, 1, sizeof export_magic, f);
    fwrite(&count, 8, 1, f);
}

void ic__cache_export_record(FILE *f, const char *ns, const void *entry, size_t n)
{
    uint64_t nns = strlen(ns), nentry = n, sum = record_sum(ns, nns, nentry);
    fwrite(&nns, 8, 1, f);
    fwrite(ns, 1, (size_t)nns, f);
    fwrite(&nentry, 8, 1, f);
    fwrite(entry, 1, n, f);
    fwrite(&sum, 8, 1, f);
}

static ic_status export_one(ic_ctx *c, const cache_file *f, void *user)
{
    export_state *x = user;
    if (f->kind != IC__FILE_ENTRY)
        return IC_OK;
    size_t n;
    char *b = read_whole(f, &n);
    ic__cache_view v;
    ic_cache_state st = entry_state(b, n, &v);
    if (st != IC_CACHE_VALID) {
        free(b);
        (*(st == IC_CACHE_CORRUPT ? &x->k->corrupt : &x->k->other_version))++;
        return IC_OK;
    }
    ic__cache_export_record(x->f, f->ns, b, n);
    free(b);
    x->k->entries++;
    x->k->bytes += (int64_t)n;
    return IC_OK;
}

typedef struct {
    ic_ctx *c;
    const char *path;
    ic_cache_counts k;
    ic_status s;
} export_arg;

/* Writes the export into f (a temporary file); a failed write shows in ferror(f). */
static bool export_into(FILE *f, void *arg)
{
    export_arg *a = arg;
    ic__cache_export_head(f, 0); /* the count, known at the end, is written then */
    export_state x = { f, &a->k };
    a->s = walk(a->c, NULL, export_one, &x);
    uint64_t count = (uint64_t)a->k.entries;
    if (!a->s && (fseek(f, sizeof export_magic, SEEK_SET) != 0 || fwrite(&count, 8, 1, f) != 1))
        a->s = ic__error(a->c, IC_EIO, "%s: cannot write: %s", a->path, strerror(errno));
    return !a->s;
}

ic_status ic_cache_export(ic_ctx *c, const char *path, ic_cache_counts *out)
{
    export_arg a = { .c = c, .path = path };
    const char *step;
    int err = ic__write_atomic(path, export_into, &a, IC__WRITE_SYNC, &step);
    ic_status s = a.s ? a.s : err ? ic__error(c, IC_EIO, "%s: %s: %s", path, step, strerror(err)) : IC_OK;
    if (out)
        *out = s ? (ic_cache_counts){ 0 } : a.k;
    return s;
}

/* ---- import ---- */

typedef struct {
    ic_ctx *c;
    FILE *f;
    const char *path;
    uint64_t off, size;     /* bytes read so far; the file's size */
    int64_t index;          /* the entry being read, from 0 */
} import_reader;

static ic_status bad(import_reader *r, uint64_t off, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static ic_status bad(import_reader *r, uint64_t off, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (r->index < 0)   /* the header, or what follows the last entry */
        return ic__error(r->c, IC_EFORMAT, "%s: offset %llu: %s", r->path, (unsigned long long)off, msg);
    return ic__error(r->c, IC_EFORMAT, "%s: offset %llu: entry %lld: %s", r->path,
                     (unsigned long long)off, (long long)r->index, msg);
}

/* Reads n bytes into p; IC_EFORMAT ("truncated") when the file ends first. */
static ic_status take(import_reader *r, void *p, uint64_t n, const char *what)
{
    if (n > r->size - r->off)
        return bad(r, r->off, "truncated in %s", what);
    if (fread(p, 1, (size_t)n, r->f) != n)
        return ic__error(r->c, IC_EIO, "%s: cannot read at offset %llu: %s", r->path,
                         (unsigned long long)r->off, strerror(errno ? errno : EIO));
    r->off += n;
    return IC_OK;
}

/* Reads and checks the next record: its namespace into ns, its entry bytes into *entry
 * (malloc'd) of *n, parsed into *v; *state says whether it is this version's. */
static ic_status read_record(import_reader *r, char *ns, char **entry, uint64_t *n, ic__cache_view *v,
                             ic__entry_state *state)
{
    uint64_t nns, sum, start;
    const char *why = "";
    ic_status s = take(r, &nns, 8, "the namespace length");
    if (!s && nns >= IC_CACHE_NS_MAX)
        return bad(r, r->off - 8, "namespace length %llu too large", (unsigned long long)nns);
    if (!s && !(s = take(r, ns, nns, "the namespace")))
        ns[nns] = 0;
    if (!s && !ic__cache_ns_ok(ns))
        return bad(r, r->off - nns, "bad namespace name '%s'", ns);
    if (!s)
        s = take(r, n, 8, "the entry length");
    if (!s && *n > r->size - r->off)
        return bad(r, r->off - 8, "entry length %llu past the end of the file", (unsigned long long)*n);
    start = r->off;
    if (!s && !(*entry = malloc((size_t)*n + 1)))
        return ic__error(r->c, IC_ENOMEM, "%s: out of memory reading entry %lld", r->path, (long long)r->index);
    if (!s)
        s = take(r, *entry, *n, "the entry");
    if (!s)
        s = take(r, &sum, 8, "the record checksum");
    if (!s && sum != record_sum(ns, nns, *n))
        s = bad(r, r->off - 8, "record checksum mismatch");
    if (!s && (*state = ic__cache_parse(*entry, (size_t)*n, v, &why)) == IC__ENTRY_CORRUPT)
        s = bad(r, start, "the entry is corrupt (%s)", why);
    return s;
}

/* One pass over the file: checks every record, and stores this version's when store. */
static ic_status import_pass(import_reader *r, const char *dir, bool store, ic_cache_counts *k)
{
    char magic[8], ns[IC_CACHE_NS_MAX], name[IC__CACHE_NAME_LEN + 1];
    uint64_t count;
    r->off = 0;
    r->index = -1;
    ic_status s = fseek(r->f, 0, SEEK_SET) ? ic__error(r->c, IC_EIO, "%s: cannot read", r->path) : IC_OK;
    if (!s && !(s = take(r, magic, 8, "the header")) && memcmp(magic, export_magic, 8))
        return bad(r, 0, "not an ic-cache export (bad magic)");
    if (!s)
        s = take(r, &count, 8, "the header");
    for (r->index = 0; !s && (uint64_t)r->index < count; r->index++) {
        char *entry = NULL;
        uint64_t n;
        ic__cache_view v;
        ic__entry_state st = IC__ENTRY_CORRUPT;
        s = read_record(r, ns, &entry, &n, &v, &st);
        if (!s && st == IC__ENTRY_OTHER_VERSION) {
            k->other_version++;
        } else if (!s) {
            k->entries++;
            k->bytes += (int64_t)n;
            ic__cache_file_name(ns, v.key, (size_t)v.nkey, name);
            int err = store ? ic__cache_write_file(dir, ns, name, entry, (size_t)n) : 0;
            if (err)
                s = ic__error(r->c, IC_EIO, "cache %s/%s: cannot write %s: %s", dir, ns, name, strerror(err));
        }
        free(entry);
    }
    r->index = -1;
    if (!s && r->off != r->size)
        s = bad(r, r->off, "data after the last entry");
    return s;
}

ic_status ic_cache_import(ic_ctx *c, const char *path, ic_cache_counts *out)
{
    ic_cache_counts k = { 0 };
    char dir[PATH_LEN];
    struct stat st;
    ic_status s = ic_cache_dir(c, dir, sizeof dir);
    FILE *f = s ? NULL : fopen(path, "rb");
    if (!s && (!f || fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)))
        s = ic__error(c, IC_EIO, "%s: cannot read: %s", path, f ? "not a regular file" : strerror(errno));
    import_reader r = { c, f, path, 0, s ? 0 : (uint64_t)st.st_size, 0 };
    if (!s)
        s = import_pass(&r, dir, false, &k);   /* all checked before anything is stored */
    if (!s) {
        k = (ic_cache_counts){ 0 };
        s = import_pass(&r, dir, true, &k);
    }
    if (f)
        fclose(f);
    if (out)
        *out = s ? (ic_cache_counts){ 0 } : k;
    return s;
}
