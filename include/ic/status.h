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

typedef struct ic_ctx ic_ctx;

/* Creates a context; opts may be NULL. Reads IC_DEBUG / IC_DUMP / IC_NO_FUSION once here.
 * The caller owns *out and frees it with ic_ctx_destroy after everything made with it. */
IC_API ic_status ic_ctx_create(const ic_ctx_options *opts, ic_ctx **out);
IC_API void ic_ctx_destroy(ic_ctx *c);

/* The last error message of this context: borrowed, valid until the next call on c.
 * "" when there was none. */
IC_API const char *ic_last_error(const ic_ctx *c);
IC_API void ic_clear_error(ic_ctx *c);

/* Replace the log callback (level 0 = info, 1 = debug). */
IC_API void ic_log_set(ic_ctx *c, ic_log_fn fn, void *user);

#ifdef __cplusplus
}
#endif
#endif
