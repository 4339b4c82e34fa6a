/* cache-impl.h - the persistent cache (cache.c): one file per key under $IC_CACHE_DIR, for
 * tuning records and compiled code. It is an optimisation only: a lookup that fails for any
 * reason (absent, unreadable, truncated, another version, a hash collision) is a miss, and a
 * store that fails is logged and forgotten; neither is ever an error of the compile.
 *
 *     char *key = ...;   // text that names everything the value depends on
 *     void *data; size_t n;
 *     if (ic__cache_get(c, "cpu-obj", key, &data, &n)) { use(data, n); free(data); }
 *     else { make(&data, &n); ic__cache_put(c, "cpu-obj", key, data, n); }
 *
 * Keys are texts of any length; the file name is a hash of (namespace, key, the ic and LLVM
 * versions, the cache format), and the entry holds the whole key text, compared on every read,
 * so a collision or an entry of another version is a miss. Writes go to a temporary file in
 * the same folder, then rename(2): readers see the old entry or the whole new one, never a
 * part, whatever other processes do and wherever a writer is killed. */
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
/* Stores data[0..n) for (ns, key), atomically replacing an older value; failures are logged
 * at level 1 and otherwise ignored. */
IC_HIDDEN void ic__cache_put(ic_ctx *c, const char *ns, const char *key, const void *data, size_t n);

/* A 64-bit FNV-1a hash of n bytes, continuing from h (start: IC__HASH_SEED): for keys that
 * name large data (frozen weights) by their hash instead of their bytes. */
#define IC__HASH_SEED 0xcbf29ce484222325ull
IC_HIDDEN uint64_t ic__hash_bytes(uint64_t h, const void *p, size_t n);

#endif
