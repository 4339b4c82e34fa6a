/* graph-impl.h - private structures of the Graph layer: context, arena, graph, nodes. */
#ifndef IC_GRAPH_IMPL_H
#define IC_GRAPH_IMPL_H

#include <pthread.h>
#include <stdarg.h>
#include "ic/graph.h"
#include "ic/tensor.h"

#define IC_HIDDEN __attribute__((visibility("hidden")))
#define IC_ERRMAX 2048

/* internal invariant, never for user input */
#define IC_ASSERT(x) do { if (!(x)) ic__assert_fail(__FILE__, __LINE__, #x); } while (0)
IC_HIDDEN _Noreturn void ic__assert_fail(const char *file, int line, const char *what);

/* One thread's last error on a context (ic_last_error is per thread: threads that share a
 * context never see each other's messages). */
typedef struct ic_err_slot {
    struct ic_err_slot *next;
    pthread_t thread;
    uint64_t serial;          /* its thread's serial number (ctx.c): a new thread that reuses an
                               * exited one's pthread_t starts with no message */
    char msg[IC_ERRMAX];
} ic_err_slot;

struct ic_ctx {
    ic_alloc_fn alloc;
    void *alloc_user;
    ic_log_fn log;
    void *log_user;
    pthread_mutex_t lock;     /* guards the errs list (not the messages: each is its thread's) */
    ic_err_slot err0;         /* the first thread's slot: a single-threaded user allocates none */
    ic_err_slot *errs;        /* err0, then one more per further thread that reported an error */
    ic_switches sw;           /* IC_* read once at creation; strings owned */
};

IC_HIDDEN void *ic__malloc(ic_ctx *c, size_t n);
IC_HIDDEN void *ic__calloc(ic_ctx *c, size_t n, size_t size);
IC_HIDDEN void *ic__realloc(ic_ctx *c, void *p, size_t n);
IC_HIDDEN void ic__free(ic_ctx *c, void *p);
IC_HIDDEN char *ic__strdup(ic_ctx *c, const char *s);

/* Sets c's message and returns code. */
IC_HIDDEN ic_status ic__error(ic_ctx *c, ic_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
IC_HIDDEN ic_status ic__verror(ic_ctx *c, ic_status code, const char *fmt, va_list ap);
IC_HIDDEN void ic__logf(ic_ctx *c, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Parallel compile jobs (jobs.c). A job: fn(arg, j, thread) for job j in [0, njobs), thread
 * in [0, threads) numbering the thread that runs it (per-thread state). */
#define IC__MAX_JOB_THREADS 64
typedef ic_status (*ic__job_fn)(void *arg, int j, int thread);
/* Threads for njobs jobs: IC_COMPILE_THREADS, else the cores online; at most one per job,
 * at least one, at most IC__MAX_JOB_THREADS. */
IC_HIDDEN int ic__compile_threads(const ic_ctx *c, int njobs);
/* Runs every job on ic__compile_threads(c, njobs) threads, the calling one included, jobs
 * taken in index order; after a failure no job starts. Returns the first failure's status
 * (IC_OK when all succeeded); *nthreads (may be NULL): the threads that ran. */
IC_HIDDEN ic_status ic__run_jobs(ic_ctx *c, int njobs, ic__job_fn fn, void *arg, int *nthreads);

/* Bump allocator; everything is freed at once. */
typedef struct ic_arena_chunk ic_arena_chunk;
typedef struct { ic_ctx *c; ic_arena_chunk *head; } ic_arena;
IC_HIDDEN void ic__arena_init(ic_arena *a, ic_ctx *c);
IC_HIDDEN void *ic__arena_alloc(ic_arena *a, size_t n);   /* zeroed, 16-byte aligned */
IC_HIDDEN char *ic__arena_strdup(ic_arena *a, const char *s);
IC_HIDDEN void ic__arena_free(ic_arena *a);

typedef struct ic_node {
    ic_node_info info;        /* public view; pointers into the arena */
    ic_dim shape[IC_MAX_RANK];
    ic_operand in[IC_MAX_INPUTS];
    ic_attrs attrs;
    /* normalised by inference: */
    uint32_t axes;            /* reduce / squeeze / norm axes of the input, bit per dim */
    int axis;                 /* softmax argmax unsqueeze cat slice: non-negative dim */
    int perm[IC_MAX_RANK];    /* permute / transpose: output dim i reads input dim perm[i] */
    ic_dtype compute;         /* dtype operands are promoted to before computing */
} ic_node;

struct ic_graph {
    ic_ctx *c;
    ic_arena arena;
    const char *name;
    const char *source;       /* file path, or NULL */
    ic_node **nodes;
    int nnodes, cap;
    ic_value *outputs;
    int noutputs, capout;
    const char **syms;
    int nsyms, capsyms;
    void **owned_files;       /* ic_safetensors mapped for params (closed on destroy) */
    int nowned, capowned;
};

/* "file: graph 'g' node 'n' (op): " then fmt; node may be NULL. Returns code. */
IC_HIDDEN ic_status ic__node_error(const ic_graph *g, const char *node, const char *op,
                                   ic_status code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
IC_HIDDEN ic_status ic__graph_keep_file(ic_graph *g, void *st);
/* g as ic-graph JSON text (what ic_graph_save_json writes; *text malloc'd: free()), for a
 * caller that stores weights itself (saved compiled models): params with data have no
 * "file", except, with keep_files, those read from one (then an absolute path). */
IC_HIDDEN ic_status ic__graph_json_text(const ic_graph *g, bool keep_files, char **text, size_t *n);
IC_HIDDEN ic_status ic__graph_set_source(ic_graph *g, const char *path);
/* Checked arithmetic on sizes. */
IC_HIDDEN bool ic__mul_ok(int64_t a, int64_t b, int64_t *out);
/* Number of elements of a concrete shape, -1 on overflow or symbolic dims. */
IC_HIDDEN int64_t ic__shape_numel(int rank, const ic_dim *shape);
/* Element i of the array data of dtype t, as double (f16/bf16 widened exactly, bool 0 or 1):
 * what ic_tensor_get reads at an element's offset and the reference reads directly. */
IC_HIDDEN double ic__elem_get(ic_dtype t, const void *data, int64_t i);

static inline const ic_node *ic__node(const ic_graph *g, ic_value v) { return g->nodes[v]; }

/* Adds to dst a copy of node ni of another graph: an input (with its range), a param (its
 * data borrowed), or an op whose node operands map[] renames. */
IC_HIDDEN ic_status ic__graph_copy_node(ic_graph *dst, const ic_node_info *ni, const ic_value *map,
                                        ic_value *out);

/* A param whose data (row-major, may be NULL) is borrowed, not copied: the caller keeps it
 * alive while g lives (specialised, expanded and folded graphs share their source's weights). */
IC_HIDDEN ic_status ic__graph_param_borrow(ic_graph *g, const char *name, ic_dtype dt, int rank,
                                           const ic_dim *shape, const void *data,
                                           const char *file, const char *key, ic_value *out);

/* PyTorch's dtype rules (dtype.c: the one place they are written; new ops call these). */
/* Type promotion between two tensor dtypes (torch.promote_types): u8 with i8 -> i16, an
 * integer with a float -> the float, bool with anything -> the other. */
IC_HIDDEN ic_dtype ic__promote(ic_dtype a, ic_dtype b);
/* Float-only math (exp, sqrt, div...): integers and bool compute in f32. */
IC_HIDDEN ic_dtype ic__float_result(ic_dtype t);
/* sum, prod, cumsum: integers and bool accumulate in i64. */
IC_HIDDEN ic_dtype ic__sum_result(ic_dtype t);
/* u8 i8 i16: integers kept in memory only, computed in i32 and wrapped to their width. */
IC_HIDDEN bool ic__narrow_int(ic_dtype t);
/* Whether number v converts to dtype t without overflow (c10::checked_convert, which
 * clamp bounds and full values go through): u8 takes -255..255, i8 -128..127. */
IC_HIDDEN bool ic__scalar_fits(ic_scalar v, ic_dtype t);
/* v wrapped to integer dtype t's width (two's complement, as PyTorch's integer casts);
 * bool: v != 0; i64 and floats: v. */
IC_HIDDEN int64_t ic__wrap_int(int64_t v, ic_dtype t);
/* float -> integer dtype t: truncated toward zero to i64 (saturating, NaN 0), then wrapped
 * (bool: f != 0). PyTorch leaves out-of-range conversions undefined (its CPU kernels differ
 * between their scalar and vector paths); in range, this is exactly its result. */
IC_HIDDEN int64_t ic__float_to_int(double f, ic_dtype t);
/* arange of an integer dtype as PyTorch computes it: start + i * step in int64, from start
 * and step truncated toward zero (arange(0, 5, 1.5, dtype=i32) is 0 1 2 3; a step of 0.5
 * is a zero step, refused). */
IC_HIDDEN void ic__arange_int(const ic_attrs *at, int64_t *start, int64_t *step);

#endif
