/* cache.h - the persistent cache as a whole: list, stats, clear, gc, export, import.
 *
 * Compiles keep tuning records and compiled code in the context's cache folder (IC_CACHE_DIR,
 * else $XDG_CACHE_HOME/ic-llvm, else ~/.cache/ic-llvm; README "The persistent cache"), one
 * file per key, in a folder per namespace:
 *
 *     <dir>/cpu-obj/3f09c1d2a4b5e6f7        object code of one CPU kernel module
 *     <dir>/cpu-tune/...                    tuned codegen params of one CPU kernel
 *     <dir>/gpu-code/..., <dir>/gpu-tune/...
 *     <dir>/cpu-obj/3f09c1d2a4b5e6f7.tmp.<pid>.<thread>.<n>   a writer's file, before rename
 *
 * These functions manage that folder (tools/ic-cache is a thin shell over them). They work
 * whatever IC_CACHE says, so a disabled cache can still be looked at and cleared; they only
 * ever touch namespace folders and the files in them named as entries or temporary files.
 *
 *     ic_cache_entry *e; int n;
 *     if (ic_cache_list(c, &e, &n) == IC_OK) {
 *         for (int i = 0; i < n; i++) printf("%s/%s %s\n", e[i].ns, e[i].file, e[i].key);
 *         ic_cache_free(c, e);
 *     }
 */
#ifndef IC_CACHE_H
#define IC_CACHE_H

#include "ic/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define IC_CACHE_NS_MAX 32        /* a namespace name and its NUL */
#define IC_CACHE_KEY_LINE 160     /* the first line of a key kept by ic_cache_list, with its NUL */

/* The cache folder of c into buf (n bytes; it need not exist). IC_EINVAL when no folder can
 * be named (IC_CACHE_DIR, XDG_CACHE_HOME and HOME all unset) or it does not fit in buf. */
IC_API ic_status ic_cache_dir(ic_ctx *c, char *buf, size_t n);

typedef enum {
    IC_CACHE_VALID,          /* readable by this build */
    IC_CACHE_OTHER_VERSION,  /* intact, written by another ic, LLVM or cache format: never read */
    IC_CACHE_CORRUPT,        /* unreadable, truncated or failing its checksum: never read */
} ic_cache_state;

typedef struct ic_cache_entry {
    char ns[IC_CACHE_NS_MAX];     /* namespace (its folder) */
    char file[24];                /* file name in the folder (16 hex digits) */
    int64_t bytes;                /* file size */
    int64_t mtime;                /* last modified, seconds since the epoch */
    ic_cache_state state;
    char key[IC_CACHE_KEY_LINE];  /* the key's first line, cut to fit ("" when not readable) */
} ic_cache_entry;

/* Every entry (each file read and checked), sorted by namespace then file name: *out
 * (malloc'd through c's allocator: ic_cache_free) of *n. A missing folder has none. IC_EIO
 * with the folder's name when it cannot be read. */
IC_API ic_status ic_cache_list(ic_ctx *c, ic_cache_entry **out, int *n);

typedef struct ic_cache_ns_stats {
    char ns[IC_CACHE_NS_MAX];
    int64_t entries, bytes;       /* entry files and their bytes (not read: see ic_cache_list) */
    int64_t temps, temp_bytes;    /* writers' temporary files (in progress, or left by a crash) */
} ic_cache_ns_stats;

/* Per namespace, sorted by name: *out (ic_cache_free) of *n; fast (one stat per file). */
IC_API ic_status ic_cache_stats(ic_ctx *c, ic_cache_ns_stats **out, int *n);

/* Frees what ic_cache_list and ic_cache_stats return (NULL is fine). */
IC_API void ic_cache_free(ic_ctx *c, void *p);

/* What clear, gc, export and import did; each says which fields it fills (the others are 0). */
typedef struct ic_cache_counts {
    int64_t entries;          /* entries removed, exported or imported */
    int64_t bytes;            /* their bytes (export and import: of the entries' files) */
    int64_t other_version;    /* entries of another version: removed (gc), left out (export),
                               * skipped (import) */
    int64_t corrupt;          /* corrupt entries: removed (gc), left out (export) */
    int64_t temps;            /* temporary files removed (clear, gc) */
} ic_cache_counts;

/* Removes every entry and temporary file of namespace ns, or of all namespaces (ns NULL),
 * and the namespace folders left empty; a concurrent writer whose temporary file goes loses
 * that one store, nothing else. Fills entries (any state), bytes, temps. IC_EINVAL for a name
 * that is neither a namespace of this build nor a folder in the cache; IC_EIO naming the file
 * that cannot be removed. out may be NULL. */
IC_API ic_status ic_cache_clear(ic_ctx *c, const char *ns, ic_cache_counts *out);

/* Removes what no build of this version reads: entries of another version, corrupt entries,
 * and temporary files older than an hour (a younger one may belong to a running writer).
 * Fills other_version, corrupt, temps, bytes (of all of them). */
IC_API ic_status ic_cache_gc(ic_ctx *c, ic_cache_counts *out);

/* Writes every valid entry into one file at path (written atomically: a temporary file beside
 * it, then rename, so path is the old file or the whole new one). Fills entries, bytes,
 * other_version and corrupt (those left out). IC_EIO naming path when it cannot be written. */
IC_API ic_status ic_cache_export(ic_ctx *c, const char *path, ic_cache_counts *out);

/* Checks every entry of an export file, then stores those of this version (each atomically,
 * replacing an entry of the same key); entries of another version are skipped and counted.
 * All or nothing: a malformed file is IC_EFORMAT "<path>: offset <o>: entry <i>: <what>" and
 * stores nothing; IC_EIO when it cannot be read. Fills entries, bytes, other_version. */
IC_API ic_status ic_cache_import(ic_ctx *c, const char *path, ic_cache_counts *out);

#ifdef __cplusplus
}
#endif
#endif
