/* test_cache.c - the persistent cache (lib/Runtime/cache.c, cache_admin.c): round trips, misses,
 * IC_CACHE=0 and want -1, corrupt entries (truncated, a flipped byte, bad magic) read as misses
 * and repaired by the next put, a version bump, hash collisions told apart by the stored key,
 * concurrent writers (processes and threads), writers killed by SIGKILL mid-write, temporary
 * files, list / stats / clear / gc, export and import (and malformed export files), and a
 * folder that cannot be written. Every test works in its own mkdtemp folder (IC_CACHE_DIR). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <criterion/criterion.h>
#include "ic/ic.h"
#include "ic/cache.h"
#include "testutil.h"
#include "cache-impl.h"

#define NS IC__CACHE_CPU_OBJ

/* ---- helpers ---- */

typedef struct {
    int n, level;
    char last[512];
} log_seen;

static void count_log(void *user, int level, const char *msg)
{
    log_seen *l = user;
    l->n++;
    l->level = level;
    snprintf(l->last, sizeof l->last, "%s", msg);
}

/* A context whose cache is folder dir (no_cache as given). */
static ic_ctx *cache_ctx(const char *dir, bool no_cache)
{
    setenv("IC_CACHE_DIR", dir, 1);
    ic_ctx *c = ict_ctx();
    ic_switches sw;
    ic_ctx_switches(c, &sw);
    sw.cache_dir = dir;
    sw.no_cache = no_cache;
    cr_assert_eq(ic_ctx_set_switches(c, &sw), IC_OK);
    return c;
}

static void assert_get(ic_ctx *c, const char *ns, const char *key, const void *want, size_t nwant)
{
    void *d;
    size_t n;
    cr_assert(ic__cache_get(c, ns, key, &d, &n), "get %s '%s': miss, want %zu bytes", ns, key, nwant);
    cr_assert_eq(n, nwant, "get %s '%s': %zu bytes, want %zu", ns, key, n, nwant);
    cr_assert(memcmp(d, want, n) == 0, "get %s '%s': wrong bytes", ns, key);
    free(d);
}

static void assert_miss(ic_ctx *c, const char *ns, const char *key)
{
    void *d = (void *)1;
    size_t n = 1;
    cr_assert(!ic__cache_get(c, ns, key, &d, &n), "get %s '%s': hit (%zu bytes), want a miss", ns, key, n);
    cr_assert(d == NULL && n == 0, "a miss leaves data NULL and n 0");
}

static void put_str(ic_ctx *c, const char *ns, const char *key, const char *val)
{
    ic__cache_put(c, ns, key, val, strlen(val));
}

/* The path of (ns, key)'s entry file under dir (in this version). */
static const char *entry_file(const char *dir, const char *ns, const char *key)
{
    static char path[1200];
    char name[IC__CACHE_NAME_LEN + 1];
    ic__cache_file_name(ns, key, strlen(key), name);
    snprintf(path, sizeof path, "%s/%s/%s", dir, ns, name);
    return path;
}

static int count_temps(const char *nsdir)
{
    int k = 0;
    DIR *d = opendir(nsdir);
    if (!d)
        return 0;
    for (struct dirent *e; (e = readdir(d));)
        k += ic__cache_file_kind(e->d_name) == IC__FILE_TEMP;
    closedir(d);
    return k;
}

/* A value whose every byte can be checked: "<key>|<seed>|<size>|" then bytes of the seed's
 * stream, size bytes in all (at least the header). */
static unsigned char stream_byte(uint64_t seed, size_t i)
{
    uint64_t z = seed * 0x9e3779b97f4a7c15ull + i * 0xbf58476d1ce4e5b9ull;
    z ^= z >> 31;
    return (unsigned char)(z * 0x94d049bb133111ebull >> 56);
}

static char *make_value(const char *key, uint64_t seed, size_t size, size_t *n)
{
    char head[256];
    int h = snprintf(head, sizeof head, "%s|%llu|%zu|", key, (unsigned long long)seed, size);
    size = size < (size_t)h ? (size_t)h : size;
    snprintf(head, sizeof head, "%s|%llu|%zu|", key, (unsigned long long)seed, size);
    h = (int)strlen(head);
    char *v = malloc(size);
    cr_assert(v);
    memcpy(v, head, (size_t)h);
    for (size_t i = (size_t)h; i < size; i++)
        v[i] = (char)stream_byte(seed, i);
    *n = size;
    return v;
}

/* Whether v[0..n) is a complete value made by make_value for key. */
static bool value_ok(const char *key, const char *v, size_t n)
{
    size_t kl = strlen(key);
    unsigned long long seed;
    size_t size;
    int used = 0;
    char head[256];
    if (n < kl + 1 || memcmp(v, key, kl) || v[kl] != '|')
        return false;
    size_t hl = n - kl < 64 ? n - kl : 64;
    memcpy(head, v + kl, hl);
    head[hl] = 0;
    if (sscanf(head, "|%llu|%zu|%n", &seed, &size, &used) != 2 || !used || size != n)
        return false;
    for (size_t i = kl + (size_t)used; i < n; i++)
        if ((unsigned char)v[i] != stream_byte(seed, i))
            return false;
    return true;
}

/* ---- the store ---- */

Test(cache, round_trip_and_misses)
{
    const char *dir = ict_tmpdir();
    ic_ctx *c = cache_ctx(dir, false);
    assert_miss(c, NS, "absent");
    put_str(c, NS, "k1", "hello");
    assert_get(c, NS, "k1", "hello", 5);
    assert_miss(c, IC__CACHE_CPU_TUNE, "k1");   /* another namespace */
    assert_miss(c, NS, "k");                    /* a prefix of a key */
    assert_miss(c, NS, "k12");
    ic__cache_put(c, NS, "empty", "", 0);
    assert_get(c, NS, "empty", "", 0);
    size_t n;
    char *big = make_value("big", 7, 3 << 20, &n);
    ic__cache_put(c, NS, "big", big, n);
    assert_get(c, NS, "big", big, n);
    put_str(c, NS, "k1", "replaced");
    assert_get(c, NS, "k1", "replaced", 8);
    free(big);
    ic_ctx_destroy(c);
    ict_rmtree(dir);
}

Test(cache, off_with_ic_cache_0_and_want_minus_1)
{
    const char *dir = ict_tmpdir();
    ic_ctx *on = cache_ctx(dir, false), *off = cache_ctx(dir, true);
    cr_assert(ic__cache_on(on, 0) && ic__cache_on(on, 1) && !ic__cache_on(on, -1));
    cr_assert(!ic__cache_on(off, 0) && !ic__cache_on(off, 1) && !ic__cache_on(off, -1),
              "IC_CACHE=0 wins over an option");
    put_str(off, NS, "k", "v");
    cr_assert_eq(ict_count_files(dir), 0, "IC_CACHE=0 wrote into the cache folder");
    put_str(on, NS, "k", "v");
    assert_get(on, NS, "k", "v", 1);
    assert_miss(off, NS, "k");
    ic_ctx_destroy(on);
    ic_ctx_destroy(off);
    ict_rmtree(dir);
}

/* Truncates file path to n bytes. */
static void truncate_to(const char *path, size_t n)
{
    cr_assert_eq(truncate(path, (off_t)n), 0, "truncate %s: %s", path, strerror(errno));
}

static void flip_byte(const char *path, size_t at)
{
    size_t n;
    unsigned char *b = ict_read_file(path, &n);
    cr_assert(b && at < n);
    b[at] ^= 0x20;
    ict_write_file(path, b, n);
    free(b);
}

Test(cache, corrupt_entries_are_misses_and_a_put_repairs_them)
{
    const char *dir = ict_tmpdir();
    ic_ctx *c = cache_ctx(dir, false);
    log_seen seen = { 0 };
    ic_log_set(c, count_log, &seen);
    const char *key = "kernel text\nline 2", *val = "object code bytes";
    put_str(c, NS, key, val);
    char path[1200];
    snprintf(path, sizeof path, "%s", entry_file(dir, NS, key));
    struct stat st;
    cr_assert_eq(stat(path, &st), 0, "no entry file at %s", path);
    size_t full = (size_t)st.st_size;
    size_t cuts[] = { 0, 4, 8, 20, full / 2, full - 9, full - 1 };
    for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
        truncate_to(path, cuts[i]);
        assert_miss(c, NS, key);
        put_str(c, NS, key, val);
        assert_get(c, NS, key, val, strlen(val));
    }
    for (size_t at = 0; at < full; at += 3) {   /* magic, lengths, version, key, value, checksum */
        flip_byte(path, at);
        assert_miss(c, NS, key);
        put_str(c, NS, key, val);
        assert_get(c, NS, key, val, strlen(val));
    }
    ict_write_file(path, "NOTCACHE and some more bytes after the bad magic, long enough", 60);
    assert_miss(c, NS, key);
    cr_assert(seen.n > 0 && seen.level == 1 && strstr(seen.last, path),
              "a corrupt entry is logged at level 1 naming it; last: %s", seen.last);
    put_str(c, NS, key, val);
    assert_get(c, NS, key, val, strlen(val));
    ic_ctx_destroy(c);
    ict_rmtree(dir);
}

Test(cache, a_version_bump_invalidates)
{
    const char *dir = ict_tmpdir();
    ic_ctx *c = cache_ctx(dir, false);
    put_str(c, NS, "k", "old build");
    assert_get(c, NS, "k", "old build", 9);
    ic__cache_set_version_salt("next release");
    assert_miss(c, NS, "k");
    put_str(c, NS, "k", "new build");
    assert_get(c, NS, "k", "new build", 9);
    ic_cache_entry *e;
    int n;
    cr_assert_eq(ic_cache_list(c, &e, &n), IC_OK, "%s", ic_last_error(c));
    cr_assert_eq(n, 2);
    int other = 0;
    for (int i = 0; i < n; i++)
        other += e[i].state == IC_CACHE_OTHER_VERSION;
    cr_assert_eq(other, 1, "the old build's entry lists as another version");
    ic_cache_free(c, e);
    ic_cache_counts k;
    cr_assert_eq(ic_cache_gc(c, &k), IC_OK, "%s", ic_last_error(c));
    cr_assert(k.other_version == 1 && k.corrupt == 0 && k.temps == 0, "gc removed %lld other-version",
              (long long)k.other_version);
    assert_get(c, NS, "k", "new build", 9);
    ic__cache_set_version_salt(NULL);
    assert_miss(c, NS, "k");   /* gc removed it */
    ic_ctx_destroy(c);
    ict_rmtree(dir);
}

Test(cache, colliding_file_names_are_told_apart_by_the_key)
{
    const char *dir = ict_tmpdir();
    ic_ctx *c = cache_ctx(dir, false);
    ic__cache_set_hash_bits(0);   /* every key of a namespace shares one file */
    cr_assert_str_eq(entry_file(dir, NS, "a"), entry_file(dir, NS, "b"));
    put_str(c, NS, "abc", "first");
    assert_get(c, NS, "abc", "first", 5);
    assert_miss(c, NS, "abd");
    assert_miss(c, NS, "abcd");
    put_str(c, NS, "abcd", "second");
    assert_miss(c, NS, "abc");
    assert_get(c, NS, "abcd", "second", 6);
    ic__cache_set_hash_bits(64);
    ic_ctx_destroy(c);
    ict_rmtree(dir);
}

/* ---- concurrent writers ---- */

#define NKEYS 3
static const char *const shared_keys[NKEYS] = { "shared key A", "shared key B\nsecond line", "shared key C" };

typedef struct {
    ic_ctx *c;
    int writer, iters;
    int bad;       /* gets that returned something other than a complete value of some writer */
    int hits;
} writer_arg;

/* Puts and gets the shared keys with values of different sizes (made beforehand, so the loop
 * is all cache traffic); after its own first put of a key a get of it must hit (another
 * writer's rename replaces the file, never removes it). */
static void *writer_loop(void *p)
{
    enum { VARIANTS = 4 };
    writer_arg *a = p;
    bool put_done[NKEYS] = { false };
    char *v[NKEYS][VARIANTS];
    size_t nv[NKEYS][VARIANTS];
    unsigned r = (unsigned)a->writer * 7919u + 1;
    for (int k = 0; k < NKEYS; k++)
        for (int j = 0; j < VARIANTS; j++) {
            r = r * 1103515245u + 12345u;
            v[k][j] = make_value(shared_keys[k], (uint64_t)a->writer << 32 | (unsigned)(k * VARIANTS + j),
                                 1 + (r >> 8) % 100000, &nv[k][j]);
        }
    for (int i = 0; i < a->iters; i++) {
        int k = i % NKEYS;
        r = r * 1103515245u + 12345u;
        ic__cache_put(a->c, NS, shared_keys[k], v[k][(r >> 12) % VARIANTS], nv[k][(r >> 12) % VARIANTS]);
        put_done[k] = true;
        int g = (int)((r >> 4) % NKEYS);
        void *d;
        size_t n;
        if (ic__cache_get(a->c, NS, shared_keys[g], &d, &n)) {
            a->hits++;
            a->bad += !value_ok(shared_keys[g], d, n);
            free(d);
        } else {
            a->bad += put_done[g];
        }
    }
    for (int k = 0; k < NKEYS; k++)
        for (int j = 0; j < VARIANTS; j++)
            free(v[k][j]);
    return NULL;
}

Test(cache, concurrent_writers_in_processes_and_threads)
{
    const char *dir = ict_tmpdir();
    enum { PROCS = 4, THREADS = 3, ITERS = 400 };
    pid_t pids[PROCS];
    for (int p = 0; p < PROCS; p++) {
        pids[p] = fork();
        cr_assert(pids[p] >= 0, "fork: %s", strerror(errno));
        if (pids[p] == 0) {
            ic_ctx *c = cache_ctx(dir, false);
            pthread_t th[THREADS];
            writer_arg a[THREADS];
            int bad = 0;
            for (int t = 0; t < THREADS; t++) {
                a[t] = (writer_arg){ c, p * THREADS + t, ITERS, 0, 0 };
                pthread_create(&th[t], NULL, writer_loop, &a[t]);
            }
            for (int t = 0; t < THREADS; t++) {
                pthread_join(th[t], NULL);
                bad += a[t].bad + (a[t].hits == 0);
            }
            ic_ctx_destroy(c);
            _exit(bad ? 1 : 0);
        }
    }
    for (int p = 0; p < PROCS; p++) {
        int st;
        cr_assert_eq(waitpid(pids[p], &st, 0), pids[p]);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0,
                  "writer process %d saw a partial, wrong or missing value", p);
    }
    ic_ctx *c = cache_ctx(dir, false);
    char nsdir[1100];
    snprintf(nsdir, sizeof nsdir, "%s/%s", dir, NS);
    cr_assert_eq(count_temps(nsdir), 0, "writers left temporary files");
    cr_assert_eq(ict_count_files(nsdir), NKEYS);
    for (int k = 0; k < NKEYS; k++) {
        void *d;
        size_t n;
        cr_assert(ic__cache_get(c, NS, shared_keys[k], &d, &n));
        cr_assert(value_ok(shared_keys[k], d, n), "key %d holds a bad value", k);
        free(d);
    }
    ic_ctx_destroy(c);
    ict_rmtree(dir);
}

/* A child that stores large values for the shared keys until it is killed. */
static _Noreturn void write_forever(const char *dir)
{
    ic_ctx *c = cache_ctx(dir, false);
    char *v[NKEYS][2];
    size_t n[NKEYS][2];
    for (int k = 0; k < NKEYS; k++)
        for (int j = 0; j < 2; j++)
            v[k][j] = make_value(shared_keys[k], (uint64_t)(getpid() * 4 + k * 2 + j),
                                 (size_t)(1 + j) << 20, &n[k][j]);
    for (unsigned i = 0;; i++)
        ic__cache_put(c, NS, shared_keys[i % NKEYS], v[i % NKEYS][i / NKEYS % 2], n[i % NKEYS][i / NKEYS % 2]);
}

Test(cache, sigkill_while_writing_leaves_valid_entries_or_misses, .timeout = 300)
{
    const char *dir = ict_tmpdir();
    char nsdir[1100];
    snprintf(nsdir, sizeof nsdir, "%s/%s", dir, NS);
    srand((unsigned)time(NULL));
    int kills = 0, left = 0;
    /* At least 6 kills, and on until one of them left a temporary file behind (the kill fell
     * between the temporary file's creation and its rename). */
    for (int round = 0; round < 200 && (kills < 6 || !left); round++) {
        pid_t pid = fork();
        cr_assert(pid >= 0, "fork: %s", strerror(errno));
        if (pid == 0)
            write_forever(dir);
        usleep(20000 + (useconds_t)(rand() % 60000));
        kill(pid, SIGKILL);
        int st;
        cr_assert_eq(waitpid(pid, &st, 0), pid);
        cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "the writer ended by itself");
        kills++;
        left = count_temps(nsdir);
    }
    cr_assert(left > 0, "no kill fell inside a write in %d rounds", kills);
    ic_ctx *c = cache_ctx(dir, false);
    for (int k = 0; k < NKEYS; k++) {
        void *d;
        size_t n;
        if (ic__cache_get(c, NS, shared_keys[k], &d, &n)) {
            cr_assert(value_ok(shared_keys[k], d, n), "key %d: a partial or wrong value after SIGKILL", k);
            free(d);
        }
    }
    ic_cache_entry *e;
    int n;
    cr_assert_eq(ic_cache_list(c, &e, &n), IC_OK, "%s", ic_last_error(c));
    cr_assert(n <= NKEYS, "temporary files listed as entries");
    for (int i = 0; i < n; i++)
        cr_assert_eq(e[i].state, IC_CACHE_VALID, "entry %s is %d after SIGKILL", e[i].file, (int)e[i].state);
    ic_cache_free(c, e);
    ic_cache_ns_stats *s;
    cr_assert_eq(ic_cache_stats(c, &s, &n), IC_OK);
    cr_assert(n == 1 && s[0].temps == left, "stats count %lld temporary files, the folder has %d",
              n ? (long long)s[0].temps : -1LL, left);
    ic_cache_free(c, s);
    ic_cache_counts k;
    cr_assert_eq(ic_cache_gc(c, &k), IC_OK);
    cr_assert_eq(k.temps, 0, "gc removed temporary files younger than an hour");
    cr_assert_eq(ic_cache_clear(c, NULL, &k), IC_OK, "%s", ic_last_error(c));
    cr_assert_eq(k.temps, left);
    cr_assert_eq(ict_count_files(dir), 0, "clear left files or folders behind");
    ic_ctx_destroy(c);
    ict_rmtree(dir);
}

/* ---- the folder as a whole ---- */

Test(cache, temporary_and_foreign_files_are_ignored)
{
    const char *dir = ict_tmpdir();
    ic_ctx *c = cache_ctx(dir, false);
    put_str(c, NS, "k", "value");
    char tmp_young[1300], tmp_old[1300], foreign[1300];
    snprintf(tmp_young, sizeof tmp_young, "%s.tmp.1.2.3", entry_file(dir, NS, "k"));
    snprintf(tmp_old, sizeof tmp_old, "%s.tmp.4.5.6", entry_file(dir, NS, "k"));
    snprintf(foreign, sizeof foreign, "%s/%s/README", dir, NS);
    ict_write_file(tmp_young, "partial", 7);
    ict_write_file(tmp_old, "partial", 7);
    ict_write_file(foreign, "mine", 4);
    struct timeval old[2] = { { time(NULL) - 7200, 0 }, { time(NULL) - 7200, 0 } };
    cr_assert_eq(utimes(tmp_old, old), 0);
    assert_get(c, NS, "k", "value", 5);
    ic_cache_entry *e;
    int n;
    cr_assert_eq(ic_cache_list(c, &e, &n), IC_OK);
    cr_assert(n == 1 && e[0].state == IC_CACHE_VALID && !strcmp(e[0].key, "k"), "list: %d entries", n);
    ic_cache_free(c, e);
    ic_cache_counts k;
    cr_assert_eq(ic_cache_gc(c, &k), IC_OK);
    cr_assert(k.temps == 1 && access(tmp_old, F_OK) != 0 && access(tmp_young, F_OK) == 0,
              "gc removes temporary files older than an hour only");
    cr_assert_eq(ic_cache_clear(c, NULL, &k), IC_OK);
    cr_assert(k.entries == 1 && k.temps == 1, "clear: %lld entries, %lld temps", (long long)k.entries,
              (long long)k.temps);
    cr_assert(access(foreign, F_OK) == 0, "clear removed a file the cache does not own");
    ic_ctx_destroy(c);
    ict_rmtree(dir);
}

Test(cache, list_stats_and_clear_one_namespace)
{
    const char *dir = ict_tmpdir();
    ic_ctx *c = cache_ctx(dir, false);
    put_str(c, NS, "first line\nsecond line", "12345");
    put_str(c, NS, "other", "1");
    put_str(c, IC__CACHE_GPU_TUNE, "gpu key", "abc");
    ic_cache_entry *e;
    int n;
    cr_assert_eq(ic_cache_list(c, &e, &n), IC_OK, "%s", ic_last_error(c));
    cr_assert_eq(n, 3);
    int64_t cpu_bytes = 0;
    for (int i = 0; i < n; i++) {
        struct stat st;
        char path[1200];
        snprintf(path, sizeof path, "%s/%s/%s", dir, e[i].ns, e[i].file);
        cr_assert_eq(stat(path, &st), 0, "listed %s does not exist", path);
        cr_assert_eq(e[i].bytes, (int64_t)st.st_size);
        cr_assert(llabs(e[i].mtime - (int64_t)time(NULL)) < 60);
        cr_assert_eq(e[i].state, IC_CACHE_VALID);
        cpu_bytes += strcmp(e[i].ns, NS) ? 0 : e[i].bytes;
        if (i)
            cr_assert(strcmp(e[i - 1].ns, e[i].ns) < 0 ||
                      (!strcmp(e[i - 1].ns, e[i].ns) && strcmp(e[i - 1].file, e[i].file) < 0), "not sorted");
    }
    bool first = false, gpu = false;
    for (int i = 0; i < n; i++) {
        first |= !strcmp(e[i].key, "first line");
        gpu |= !strcmp(e[i].key, "gpu key") && !strcmp(e[i].ns, IC__CACHE_GPU_TUNE);
    }
    cr_assert(first && gpu, "list shows each key's first line");
    ic_cache_free(c, e);
    ic_cache_ns_stats *s;
    cr_assert_eq(ic_cache_stats(c, &s, &n), IC_OK);
    cr_assert_eq(n, 2);
    cr_assert(!strcmp(s[0].ns, NS) && s[0].entries == 2 && s[0].bytes == cpu_bytes && s[0].temps == 0);
    cr_assert(!strcmp(s[1].ns, IC__CACHE_GPU_TUNE) && s[1].entries == 1);
    ic_cache_free(c, s);
    ic_cache_counts k;
    cr_assert_eq(ic_cache_clear(c, NS, &k), IC_OK, "%s", ic_last_error(c));
    cr_assert(k.entries == 2 && k.bytes == cpu_bytes);
    assert_miss(c, NS, "other");
    assert_get(c, IC__CACHE_GPU_TUNE, "gpu key", "abc", 3);
    ict_assert_error(c, ic_cache_clear(c, "no-such-ns", NULL), IC_EINVAL, "no namespace 'no-such-ns'",
                     "cpu-obj", dir);
    ict_assert_error(c, ic_cache_clear(c, "../x", NULL), IC_EINVAL, "no namespace");
    cr_assert_eq(ic_cache_clear(c, IC__CACHE_GPU_CODE, &k), IC_OK, "a known namespace with no folder");
    cr_assert_eq(k.entries, 0);
    ic_ctx_destroy(c);
    ict_rmtree(dir);
}

/* ---- export and import ---- */

Test(cache, export_import_round_trip)
{
    const char *dir = ict_tmpdir(), *out = ict_tmpdir();
    ic_ctx *c = cache_ctx(dir, false);
    size_t nbig;
    char *big = make_value("big", 3, 1 << 20, &nbig);
    put_str(c, NS, "a", "alpha");
    put_str(c, NS, "b\nmore", "beta");
    ic__cache_put(c, IC__CACHE_GPU_CODE, "big", big, nbig);
    ic__cache_put(c, IC__CACHE_CPU_TUNE, "empty", "", 0);
    const char *file = ict_path(out, "cache.icx");
    ic_cache_counts k;
    cr_assert_eq(ic_cache_export(c, file, &k), IC_OK, "%s", ic_last_error(c));
    cr_assert(k.entries == 4 && k.other_version == 0 && k.corrupt == 0, "exported %lld", (long long)k.entries);
    cr_assert_eq(ict_count_files(out), 1, "the export left a temporary file");
    cr_assert_eq(ic_cache_clear(c, NULL, NULL), IC_OK);
    assert_miss(c, NS, "a");
    cr_assert_eq(ic_cache_import(c, file, &k), IC_OK, "%s", ic_last_error(c));
    cr_assert(k.entries == 4 && k.other_version == 0, "imported %lld", (long long)k.entries);
    assert_get(c, NS, "a", "alpha", 5);
    assert_get(c, NS, "b\nmore", "beta", 4);
    assert_get(c, IC__CACHE_GPU_CODE, "big", big, nbig);
    assert_get(c, IC__CACHE_CPU_TUNE, "empty", "", 0);
    /* Another build's export: every entry skipped and counted, nothing stored. */
    ic__cache_set_version_salt("other build");
    cr_assert_eq(ic_cache_clear(c, NULL, NULL), IC_OK);
    put_str(c, NS, "x", "from the other build");
    put_str(c, NS, "y", "from the other build");
    cr_assert_eq(ic_cache_export(c, file, &k), IC_OK);
    ic__cache_set_version_salt(NULL);
    cr_assert_eq(ic_cache_clear(c, NULL, NULL), IC_OK);
    cr_assert_eq(ic_cache_import(c, file, &k), IC_OK, "%s", ic_last_error(c));
    cr_assert(k.entries == 0 && k.other_version == 2, "imported %lld, skipped %lld", (long long)k.entries,
              (long long)k.other_version);
    cr_assert_eq(ict_count_files(dir), 0, "entries of another version were stored");
    free(big);
    ic_ctx_destroy(c);
    ict_rmtree(dir);
    ict_rmtree(out);
}

/* Imports `bytes` written to a file and expects IC_EFORMAT naming it with every part. */
#define assert_bad_import(c, file, b, n, ...)                                                   \
    do {                                                                                       \
        ict_write_file((file), (b), (n));                                                      \
        ict_assert_error((c), ic_cache_import((c), (file), NULL), IC_EFORMAT, (file), "offset", \
                         __VA_ARGS__);                                                         \
    } while (0)

Test(cache, malformed_export_files_are_rejected)
{
    const char *dir = ict_tmpdir(), *out = ict_tmpdir();
    ic_ctx *c = cache_ctx(dir, false);
    put_str(c, NS, "a", "alpha");
    put_str(c, NS, "b", "a longer value for b");
    const char *file = ict_path(out, "good.icx");
    cr_assert_eq(ic_cache_export(c, file, NULL), IC_OK, "%s", ic_last_error(c));
    size_t n;
    char *good = ict_read_file(file, &n);
    cr_assert(good);
    cr_assert_eq(ic_cache_clear(c, NULL, NULL), IC_OK);
    char bad_path[1200];
    snprintf(bad_path, sizeof bad_path, "%s", ict_path(out, "bad.icx"));
    char *b = malloc(n + 8);
    memcpy(b, good, n);
    b[0] = 'X';
    assert_bad_import(c, bad_path, b, n, "offset 0", "bad magic");
    memcpy(b, good, n);
    assert_bad_import(c, bad_path, b, n - 3, "entry 1", "truncated");
    assert_bad_import(c, bad_path, b, 12, "offset 8", "truncated");
    b[n - 20] ^= 1;   /* inside the second entry's value: its own checksum */
    assert_bad_import(c, bad_path, b, n, "entry 1", "corrupt", "checksum");
    memcpy(b, good, n);
    b[16 + 8 + 2] ^= 1;   /* the first record's namespace name, still a valid name */
    assert_bad_import(c, bad_path, b, n, "entry 0", "record checksum mismatch");
    memcpy(b, good, n);
    b[16 + 8] = '/';
    assert_bad_import(c, bad_path, b, n, "entry 0", "offset 24", "bad namespace name");
    memcpy(b, good, n);
    memcpy(b + n, "extra!!!", 8);
    assert_bad_import(c, bad_path, b, n + 8, "data after the last entry");
    cr_assert_eq(ict_count_files(dir), 0, "a rejected import stored entries");
    ict_assert_error(c, ic_cache_import(c, ict_path(out, "absent.icx"), NULL), IC_EIO, "absent.icx");
    cr_assert_eq(ic_cache_import(c, file, NULL), IC_OK, "the good file still imports: %s", ic_last_error(c));
    assert_get(c, NS, "b", "a longer value for b", 20);
    ict_assert_error(c, ic_cache_export(c, ict_path(out, "no/such/folder.icx"), NULL), IC_EIO,
                     "no/such/folder.icx", "cannot write");
    free(b);
    free(good);
    ic_ctx_destroy(c);
    ict_rmtree(dir);
    ict_rmtree(out);
}

/* ---- a folder that cannot be written ---- */

Test(cache, an_unwritable_folder_is_logged_once_and_never_fails)
{
    const char *base = ict_tmpdir();
    char blocker[1100], dir[1200];
    snprintf(blocker, sizeof blocker, "%s/a-file", base);
    ict_write_file(blocker, "x", 1);
    snprintf(dir, sizeof dir, "%s/cache", blocker);   /* its parent is a file: ENOTDIR even for root */
    ic_ctx *c = cache_ctx(dir, false);
    log_seen seen = { 0 };
    ic_log_set(c, count_log, &seen);
    for (int i = 0; i < 5; i++) {
        put_str(c, NS, "k", "v");
        assert_miss(c, NS, "k");
    }
    cr_assert_eq(seen.n, 1, "want one log line, got %d (last: %s)", seen.n, seen.last);
    cr_assert(seen.level == 1 && strstr(seen.last, dir), "log: level %d '%s'", seen.level, seen.last);
    /* A namespace path taken by a file: the store's own folder exists, that one cannot. */
    const char *dir2 = ict_tmpdir();
    ict_write_file(ict_path(dir2, NS), "not a folder", 12);
    ic_ctx *c2 = cache_ctx(dir2, false);
    put_str(c2, NS, "k", "v");
    assert_miss(c2, NS, "k");
    put_str(c2, IC__CACHE_CPU_TUNE, "k", "v");
    assert_get(c2, IC__CACHE_CPU_TUNE, "k", "v", 1);
    ic_ctx_destroy(c2);
    ic_ctx_destroy(c);
    ict_rmtree(base);
    ict_rmtree(dir2);
}
