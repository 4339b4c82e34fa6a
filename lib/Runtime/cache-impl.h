/* cache-impl.h - the persistent cache (cache.c): one file per key under $IC_CACHE_DIR, for
 * tuning records and compiled code. It is an optimisation only: a lookup that fails for any
 * reason (absent, unreadable, truncated, corrupt, another version, a hash collision) is a miss,
 * and a store that fails is logged once and forgotten; neither is ever an error of the compile.
 *
 *     char *key = ...;   // text that names everything the value depends on
 *     void *data; size_t n;
 *     if (ic__cache_get(c, "cpu-obj", key, &data, &n)) { use(data, n); free(data); }
 *     else { make(&data, &n); ic__cache_put(c, "cpu-obj", key, data, n); }
 *
 * Keys are texts of any length; the file name is a hash of (namespace, key, the ic and LLVM
 * versions, the cache format), and the entry holds the whole key text, compared on every read,
 * so a collision or an entry of another version is a miss. Writes go to a temporary file of
 * their own (pid, thread, counter) in the same folder, then rename(2): readers see the old entry
 * or the whole new one, never a part, whatever other threads and processes do and wherever a
 * writer is killed. The public side (list, clear, export, import) is include/ic/cache.h,
 * implemented in cache_admin.c on the helpers below. */
#ifndef IC_CACHE_IMPL_H
#define IC_CACHE_IMPL_H

#include "graph-impl.h"

/* Namespaces (a folder each). */
#define IC__CACHE_CPU_OBJ "cpu-obj"     /* object code of one CPU kernel module */
#define IC__CACHE_CPU_TUNE "cpu-tune"   /* the tuned codegen params of one CPU kernel */
#define IC__CACHE_GPU_CODE "gpu-code"   /* PTX, launch geometry and cubin of one GPU kernel */
#define IC__CACHE_GPU_TUNE "gpu-tune"   /* the tuned PTX params of one GPU kernel */

/* Whether the context's cache is on (IC_CACHE is not 0) and `want` (an options' cache field:
 * 0 = as the context says, 1 = on, -1 = off) does not turn it off. */
IC_HIDDEN bool ic__cache_on(ic_ctx *c, int want);
/* The cache folder: IC_CACHE_DIR, else $XDG_CACHE_HOME/ic-llvm, else $HOME/.cache/ic-llvm
 * (written into buf of n bytes); false when none can be named. */
IC_HIDDEN bool ic__cache_dir(ic_ctx *c, char *buf, size_t n);

/* The value stored for (ns, key): true and *data (malloc'd: free() it) of *n bytes, or false
 * (a miss, for whatever reason; nothing to free). */
IC_HIDDEN bool ic__cache_get(ic_ctx *c, const char *ns, const char *key, void **data, size_t *n);
/* Stores data[0..n) for (ns, key), atomically replacing an older value; a folder that cannot be
 * made or written is logged at level 1 once per folder and process, and otherwise ignored. */
IC_HIDDEN void ic__cache_put(ic_ctx *c, const char *ns, const char *key, const void *data, size_t n);

/* A 64-bit FNV-1a hash of n bytes, continuing from h (start: IC__HASH_SEED): for keys that
 * name large data (frozen weights) by their hash instead of their bytes. */
#define IC__HASH_SEED 0xcbf29ce484222325ull
IC_HIDDEN uint64_t ic__hash_bytes(uint64_t h, const void *p, size_t n);

/* ---- for cache_admin.c ----
 * Entry layout: magic "ICCACHE<format>", then three fields (u64 length + bytes): the version
 * text, the key, the value; then a u64 checksum (ic__hash_data) of everything before it. */

#define IC__CACHE_NAME_LEN 16   /* entry file names: 16 lowercase hex digits */
#define IC__CACHE_NS_MAX 32     /* namespace names: [a-z0-9_-], 1 to 31 characters */

typedef enum {
    IC__ENTRY_OK,               /* this version's, intact */
    IC__ENTRY_OTHER_VERSION,    /* intact, but written by another ic, LLVM or cache format */
    IC__ENTRY_CORRUPT,          /* not an entry: truncated, bad magic, lengths or checksum */
} ic__entry_state;

/* An entry parsed in place: pointers into its bytes (key and value are NULL when the entry is
 * of an older format whose fields this one cannot read). */
typedef struct {
    const char *key, *val;
    uint64_t nkey, nval;
} ic__cache_view;

/* An entry's bytes: the magic, this build's version field, parts[0..nparts) (the key and value
 * fields, u64 length + bytes each), the checksum; malloc'd, *len bytes, NULL on OOM. Also for
 * the fuzz harnesses, which seal mutated middles. */
IC_HIDDEN char *ic__cache_seal(int nparts, const void *const *parts, const size_t *sizes, size_t *len);
/* An export file (cache_admin.c): its head with count entries, and one record (namespace, the
 * entry's bytes as its file has them, the record's checksum). Also for the fuzz harnesses. */
IC_HIDDEN void ic__cache_export_head(FILE *f, uint64_t count);
IC_HIDDEN void ic__cache_export_record(FILE *f, const char *ns, const void *entry, size_t n);
/* Parses b[0..n); for a corrupt entry *why says what is wrong (static text). */
IC_HIDDEN ic__entry_state ic__cache_parse(const void *b, size_t n, ic__cache_view *v, const char **why);
/* The file name (IC__CACHE_NAME_LEN hex digits and a NUL) of (ns, key[0..nkey)) in this version. */
IC_HIDDEN void ic__cache_file_name(const char *ns, const char *key, size_t nkey, char *name);
/* Writes b[0..n) as dir/ns/name atomically (a temporary file of its own, then rename), making
 * the folders; 0 or an errno value. */
IC_HIDDEN int ic__cache_write_file(const char *dir, const char *ns, const char *name, const void *b, size_t n);
/* Whether ns is a valid namespace name. */
IC_HIDDEN bool ic__cache_ns_ok(const char *ns);

/* What a file name in a namespace folder is: an entry, a temporary file of a writer (an
 * entry's name + ".tmp."), or something the cache does not own (never touched). */
typedef enum { IC__FILE_ENTRY, IC__FILE_TEMP, IC__FILE_OTHER } ic__file_kind;
IC_HIDDEN ic__file_kind ic__cache_file_kind(const char *name);

/* ---- test hooks (unittests/Runtime/test_cache.c); process-wide, set before any cache use ----
 * A salt appended to the version text, standing for another build of ic (NULL or "" resets). */
IC_HIDDEN void ic__cache_set_version_salt(const char *salt);
/* File names keep only the low `bits` bits of the hash (64 = all), so distinct keys collide. */
IC_HIDDEN void ic__cache_set_hash_bits(int bits);

#endif
