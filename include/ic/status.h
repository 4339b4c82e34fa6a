/* status.h - status codes, the context that owns all library state, errors and logging.
 *
 * Every fallible public function returns an ic_status (0 = IC_OK, negative = error) and,
 * on error, leaves one located message in its context:
 *
 *     ic_ctx *c;
 *     if (ic_ctx_create(NULL, &c)) return 1;
 *     if (ic_graph_load_json(c, "g.json", &g))
 *         fprintf(stderr, "%s\n", ic_last_error(c));   // "g.json: node 't1' (add): ..."
 */
#ifndef IC_STATUS_H
#define IC_STATUS_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(IC_BUILDING_LIBRARY)
#define IC_API __attribute__((visibility("default")))
#else
#define IC_API
#endif

typedef enum {
    IC_OK = 0,
    IC_EINVAL = -1,       /* bad argument or usage */
    IC_ESHAPE = -2,       /* incompatible shapes */
    IC_ENOMEM = -3,       /* allocation failed */
    IC_ELLVM = -4,        /* LLVM refused or failed */
    IC_ECUDA = -5,        /* CUDA driver missing or failed */
    IC_EIO = -6,          /* a file could not be read or written */
    IC_EFORMAT = -7,      /* a file is malformed */
    IC_EDTYPE = -8,       /* a dtype an op does not take */
    IC_EUNSUPPORTED = -9, /* valid, but not supported by this backend */
    IC_EMISMATCH = -10,   /* results differ from the reference */
} ic_status;

/* The library's version, "0.1.0" (CMake's project version). */
IC_API const char *ic_version(void);
/* A hash of the library's sources at build time (16 hex digits): two builds of different code
 * never share persistent cache entries, whatever their version says. */
IC_API const char *ic_build_id(void);

/* Static text for a status ("invalid argument", ...). Never NULL. */
IC_API const char *ic_status_str(ic_status s);

/* Allocator: realloc-like. size 0 frees ptr and returns NULL (lua_Alloc). */
typedef void *(*ic_alloc_fn)(void *user, void *ptr, size_t size);
typedef void (*ic_log_fn)(void *user, int level, const char *msg);

typedef struct ic_ctx_options {
    ic_alloc_fn alloc;    /* NULL = realloc/free */
    void *alloc_user;
    ic_log_fn log;        /* NULL = silent */
    void *log_user;
} ic_ctx_options;

/* Defaults: realloc/free, no log. */
IC_API void ic_ctx_options_init(ic_ctx_options *o);

/* The environment switches (README, "Environment variables"). ic_ctx_create reads each
 * IC_* variable once into its context; nothing else in the library or the tools calls
 * getenv for them, so setting one later has no effect: use ic_ctx_set_switches. */
typedef struct ic_switches {
    const char *dump;         /* IC_DUMP: comma list of stage names (ic_pipe_stage_find) or "all";
                               * NULL = none */
    int debug;                /* IC_DEBUG: log level the tools print (0) */
    bool no_fusion;           /* IC_NO_FUSION: every compile makes one kernel per op */
    bool compile_debug;       /* IC_COMPILE_DEBUG: compiles write a debug folder */
    bool profile;             /* IC_PROFILE: ic_run times every CPU kernel, ic_cuda_run every GPU kernel */
    int compile_threads;      /* IC_COMPILE_THREADS: codegen threads (0 = the cores online) */
    const char *cuda_driver;  /* IC_CUDA_DRIVER: the driver ic_cuda_open loads (NULL =
                               * libcuda.so.1) */
    const char *ptxas;        /* IC_PTXAS: the ptxas ic-dump --stage sass runs (NULL = look) */
    bool no_iconv;            /* IC_ICONV=0: GPU convs keep their im2col copies (lib/PTX/iconv.c) */
    const char *cache_dir;    /* IC_CACHE_DIR: the persistent cache (NULL = $XDG_CACHE_HOME/ic-llvm,
                               * else ~/.cache/ic-llvm) */
    bool no_cache;            /* IC_CACHE=0: no persistent cache (no records or code read or written) */
    bool autotune_log;        /* IC_AUTOTUNE_LOG: an AUTOTUNE table per tuned kernel on stderr */
} ic_switches;

/* All off (what an empty environment gives). */
IC_API void ic_switches_init(ic_switches *s);

/* A context owns the library's state for the graphs, compiled graphs and tensors made with it.
 *
 * Threads (unittests/Runtime/test_threads.c checks this under ThreadSanitizer): one context
 * may be shared by any number of threads. At the same time, threads may build or load graphs
 * (each graph changed by one thread at a time; a finished graph may be read by many:
 * compiled, run by ic_ref_run, saved, printed), compile the same graph or different ones, run
 * one compiled graph (ic_run, ic_compiled_bind, ic_compiled_save: see ic_run), load saved
 * models, and allocate and free tensors. The persistent cache is shared by threads and by
 * processes (entries are written atomically and checked when read). Errors are per thread:
 * ic_last_error(c) is the calling thread's last error on c, never another thread's.
 *
 * Not while other threads use c: ic_ctx_set_switches and ic_log_set (compiles read the
 * switches and the log callback without a lock: configure c before sharing it), and
 * ic_ctx_destroy (after every thread is done with c and all that was made with it). A shared
 * context calls its allocator and log callback from any thread, the library's own compile
 * threads included: they must be thread-safe (the defaults are). */
typedef struct ic_ctx ic_ctx;

/* Creates a context; opts may be NULL. Reads the IC_* switches once here (ic_switches).
 * The caller owns *out and frees it with ic_ctx_destroy after everything made with it. */
IC_API ic_status ic_ctx_create(const ic_ctx_options *opts, ic_ctx **out);
IC_API void ic_ctx_destroy(ic_ctx *c);

/* The context's switches; the strings are borrowed from c (valid until the next set). */
IC_API void ic_ctx_switches(const ic_ctx *c, ic_switches *out);
/* Replaces every switch (strings are copied); compiles started afterwards see them.
 * IC_ENOMEM leaves the old ones. Only while no other thread uses c (it frees the old strings). */
IC_API ic_status ic_ctx_set_switches(ic_ctx *c, const ic_switches *s);

/* The calling thread's last error message on this context: borrowed, valid until this
 * thread's next call on c. "" when this thread had none (other threads' errors never show). */
IC_API const char *ic_last_error(const ic_ctx *c);
IC_API void ic_clear_error(ic_ctx *c);

/* Replace the log callback (level 0 = info, 1 = debug); not while other threads use c. */
IC_API void ic_log_set(ic_ctx *c, ic_log_fn fn, void *user);

#ifdef __cplusplus
}
#endif
#endif
