/* ctx.c - the context: allocator, located error messages (one per thread), logging, arena,
 * name tables. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "graph-impl.h"
#include "ic_build_id.h"

const char *ic_version(void) { return IC_VERSION_STRING; }

const char *ic_build_id(void) { return IC_BUILD_ID; }

const char *ic_status_str(ic_status s)
{
    switch (s) {
    case IC_OK: return "ok";
    case IC_EINVAL: return "invalid argument";
    case IC_ESHAPE: return "incompatible shapes";
    case IC_ENOMEM: return "out of memory";
    case IC_ELLVM: return "LLVM error";
    case IC_ECUDA: return "CUDA error";
    case IC_EIO: return "I/O error";
    case IC_EFORMAT: return "malformed file";
    case IC_EDTYPE: return "unsupported dtype";
    case IC_EUNSUPPORTED: return "unsupported";
    case IC_EMISMATCH: return "results differ from the reference";
    }
    return "unknown status";
}

void ic__assert_fail(const char *file, int line, const char *what)
{
    fprintf(stderr, "ic-llvm: internal error at %s:%d: %s\n", file, line, what);
    abort();
}

static void *default_alloc(void *user, void *ptr, size_t size)
{
    (void)user;
    if (size == 0) {
        free(ptr);
        return NULL;
    }
    return realloc(ptr, size);
}

void ic_ctx_options_init(ic_ctx_options *o)
{
    memset(o, 0, sizeof *o);
}

void ic_switches_init(ic_switches *s)
{
    memset(s, 0, sizeof *s);
}

static const char *env_or_null(const char *k)
{
    const char *v = getenv(k);
    return v && *v ? v : NULL;
}

/* An on/off switch: set to anything but "0". */
static bool env_on(const char *k)
{
    const char *v = env_or_null(k);
    return v && strcmp(v, "0") != 0;
}

/* The one place the library reads the environment. */
static void switches_from_env(ic_switches *s)
{
    ic_switches_init(s);
    s->dump = env_or_null("IC_DUMP");
    const char *dbg = env_or_null("IC_DEBUG");
    s->debug = dbg ? atoi(dbg) : 0;
    s->no_fusion = env_on("IC_NO_FUSION");
    s->compile_debug = env_on("IC_COMPILE_DEBUG");
    s->profile = env_on("IC_PROFILE");
    const char *th = env_or_null("IC_COMPILE_THREADS");
    s->compile_threads = th && atoi(th) > 0 ? atoi(th) : 0;
    s->cuda_driver = env_or_null("IC_CUDA_DRIVER");
    s->ptxas = env_or_null("IC_PTXAS");
    const char *iconv = env_or_null("IC_ICONV");
    s->no_iconv = iconv && !strcmp(iconv, "0");
    s->cache_dir = env_or_null("IC_CACHE_DIR");
    const char *cache = env_or_null("IC_CACHE");
    s->no_cache = cache && !strcmp(cache, "0");
    s->autotune_log = env_on("IC_AUTOTUNE_LOG");
}

static void switches_free(ic_ctx *c, ic_switches *s)
{
    ic__free(c, (void *)s->dump);
    ic__free(c, (void *)s->cuda_driver);
    ic__free(c, (void *)s->ptxas);
    ic__free(c, (void *)s->cache_dir);
}

/* A copy of string s owned by c in *dst (NULL for NULL or ""); false on OOM. */
static bool dup_opt(ic_ctx *c, const char *s, const char **dst)
{
    *dst = s && *s ? ic__strdup(c, s) : NULL;
    return *dst || !(s && *s);
}

/* *dst = a copy of *src with its strings duplicated; false (nothing kept) on OOM. */
static bool switches_copy(ic_ctx *c, ic_switches *dst, const ic_switches *src)
{
    ic_switches n = *src;
    bool ok = dup_opt(c, src->dump, &n.dump);
    ok = dup_opt(c, src->cuda_driver, &n.cuda_driver) && ok;
    ok = dup_opt(c, src->ptxas, &n.ptxas) && ok;
    ok = dup_opt(c, src->cache_dir, &n.cache_dir) && ok;
    if (!ok) {
        switches_free(c, &n);
        return false;
    }
    *dst = n;
    return true;
}

ic_status ic_ctx_create(const ic_ctx_options *opts, ic_ctx **out)
{
    ic_alloc_fn alloc = opts && opts->alloc ? opts->alloc : default_alloc;
    void *ud = opts ? opts->alloc_user : NULL;
    *out = NULL;
    ic_ctx *c = alloc(ud, NULL, sizeof *c);
    if (!c)
        return IC_ENOMEM;
    memset(c, 0, sizeof *c);
    c->alloc = alloc;
    c->alloc_user = ud;
    if (opts) {
        c->log = opts->log;
        c->log_user = opts->log_user;
    }
    pthread_mutex_init(&c->lock, NULL);
    c->errs = &c->err0;
    ic_switches env;
    switches_from_env(&env);
    if (!switches_copy(c, &c->sw, &env)) {
        ic_ctx_destroy(c);
        return IC_ENOMEM;
    }
    *out = c;
    return IC_OK;
}

void ic_ctx_switches(const ic_ctx *c, ic_switches *out)
{
    *out = c->sw;
}

ic_status ic_ctx_set_switches(ic_ctx *c, const ic_switches *s)
{
    if (!c || !s)
        return ic__error(c, IC_EINVAL, "ic_ctx_set_switches: %s is NULL", c ? "the switches" : "the context");
    ic_switches n;
    if (!switches_copy(c, &n, s))
        return ic__error(c, IC_ENOMEM, "ic_ctx_set_switches: out of memory");
    switches_free(c, &c->sw);
    c->sw = n;
    return IC_OK;
}

void ic_ctx_destroy(ic_ctx *c)
{
    if (!c)
        return;
    switches_free(c, &c->sw);
    for (ic_err_slot *e = c->errs, *n; e; e = n) {
        n = e->next;
        if (e != &c->err0)
            c->alloc(c->alloc_user, e, 0);
    }
    pthread_mutex_destroy(&c->lock);
    c->alloc(c->alloc_user, c, 0);
}

/* ---- errors: the last one of each thread ---- */

/* A number for the calling thread, unique for the life of the process (pthread_t values are
 * reused once a thread exits; these never are). 0 means none yet. */
static uint64_t thread_serial(void)
{
    static _Atomic uint64_t next;
    static _Thread_local uint64_t mine;
    if (!mine)
        mine = atomic_fetch_add(&next, 1) + 1;
    return mine;
}

/* The calling thread's slot in c (c->lock held), made when create; NULL when it has none. A
 * slot whose pthread_t is ours but whose serial is not belonged to an exited thread: it is
 * taken over, emptied, so the slots are at most the threads alive at once. When a new slot
 * cannot be allocated the first one is taken over (its thread's message is lost, not the
 * new one). */
static ic_err_slot *err_slot(ic_ctx *c, bool create)
{
    pthread_t self = pthread_self();
    uint64_t me = thread_serial();
    ic_err_slot *e = c->errs;
    for (; e; e = e->next)
        if (e->serial == 0 || pthread_equal(e->thread, self))
            break;
    if (!e && !create)
        return NULL;
    if (!e && (e = c->alloc(c->alloc_user, NULL, sizeof *e))) {
        e->next = c->errs->next;
        c->errs->next = e;
        e->serial = 0;
    }
    if (!e)
        e = &c->err0;
    if (e->serial != me) {
        if (!create)
            return NULL;
        e->thread = self;
        e->serial = me;
        e->msg[0] = 0;
    }
    return e;
}

const char *ic_last_error(const ic_ctx *c)
{
    if (!c)
        return "no context";
    ic_ctx *m = (ic_ctx *)c; /* the list's lock; the message itself is only ever this thread's */
    pthread_mutex_lock(&m->lock);
    const ic_err_slot *e = err_slot(m, false);
    pthread_mutex_unlock(&m->lock);
    return e ? e->msg : "";
}

void ic_clear_error(ic_ctx *c)
{
    pthread_mutex_lock(&c->lock);
    ic_err_slot *e = err_slot(c, false);
    if (e)
        e->msg[0] = 0;
    pthread_mutex_unlock(&c->lock);
}

void ic_log_set(ic_ctx *c, ic_log_fn fn, void *user)
{
    c->log = fn;
    c->log_user = user;
}

ic_status ic__verror(ic_ctx *c, ic_status code, const char *fmt, va_list ap)
{
    if (!c)
        return code;
    char msg[IC_ERRMAX]; /* formatted first: an argument may be this thread's last message */
    vsnprintf(msg, sizeof msg, fmt, ap);
    pthread_mutex_lock(&c->lock);
    ic_err_slot *e = err_slot(c, true);
    memcpy(e->msg, msg, sizeof msg);
    pthread_mutex_unlock(&c->lock);
    return code;
}

ic_status ic__error(ic_ctx *c, ic_status code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ic__verror(c, code, fmt, ap);
    va_end(ap);
    return code;
}

void ic__logf(ic_ctx *c, int level, const char *fmt, ...)
{
    if (!c || !c->log)
        return;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    c->log(c->log_user, level, buf);
}

void *ic__malloc(ic_ctx *c, size_t n) { return c->alloc(c->alloc_user, NULL, n ? n : 1); }

void *ic__calloc(ic_ctx *c, size_t n, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total))
        return NULL;
    void *p = ic__malloc(c, total);
    if (p)
        memset(p, 0, total ? total : 1);
    return p;
}

void *ic__realloc(ic_ctx *c, void *p, size_t n) { return c->alloc(c->alloc_user, p, n ? n : 1); }

void ic__free(ic_ctx *c, void *p)
{
    if (p)
        c->alloc(c->alloc_user, p, 0);
}

/* p (fresh storage of n bytes, or NULL when its allocation failed) holding s[0..n). */
static char *copy_str(char *p, const char *s, size_t n)
{
    if (p)
        memcpy(p, s, n);
    return p;
}

char *ic__strdup(ic_ctx *c, const char *s)
{
    size_t n = strlen(s) + 1;
    return copy_str(ic__malloc(c, n), s, n);
}

/* ---- arena ---- */

struct ic_arena_chunk {
    ic_arena_chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

void ic__arena_init(ic_arena *a, ic_ctx *c)
{
    a->c = c;
    a->head = NULL;
}

void *ic__arena_alloc(ic_arena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    ic_arena_chunk *h = a->head;
    if (!h || h->cap - h->used < n) {
        size_t cap = n > 16384 ? n : 16384;
        h = ic__malloc(a->c, sizeof *h + cap);
        if (!h)
            return NULL;
        h->next = a->head;
        h->used = 0;
        h->cap = cap;
        a->head = h;
    }
    void *p = h->data + h->used;
    h->used += n;
    memset(p, 0, n);
    return p;
}

char *ic__arena_strdup(ic_arena *a, const char *s)
{
    size_t n = strlen(s) + 1;
    return copy_str(ic__arena_alloc(a, n), s, n);
}

void ic__arena_free(ic_arena *a)
{
    ic_arena_chunk *h = a->head;
    while (h) {
        ic_arena_chunk *n = h->next;
        ic__free(a->c, h);
        h = n;
    }
    a->head = NULL;
}

/* ---- names ---- */

static const char *const dtype_names[IC_DTYPE_COUNT] = {
    "f32", "f64", "f16", "bf16", "i32", "i64", "bool", "u8", "i8", "i16"
};
static const size_t dtype_sizes[IC_DTYPE_COUNT] = { 4, 8, 2, 2, 4, 8, 1, 1, 1, 2 };

const char *ic_dtype_name(ic_dtype t)
{
    return (unsigned)t < IC_DTYPE_COUNT ? dtype_names[t] : "?";
}

size_t ic_dtype_size(ic_dtype t) { return (unsigned)t < IC_DTYPE_COUNT ? dtype_sizes[t] : 0; }

bool ic_dtype_is_float(ic_dtype t)
{
    return t == IC_F32 || t == IC_F64 || t == IC_F16 || t == IC_BF16;
}

bool ic_dtype_is_int(ic_dtype t)
{
    return t == IC_I32 || t == IC_I64 || t == IC_U8 || t == IC_I8 || t == IC_I16;
}

bool ic_dtype_int_range(ic_dtype t, int64_t *lo, int64_t *hi)
{
    switch (t) {
    case IC_BOOL: *lo = 0, *hi = 1; return true;
    case IC_U8: *lo = 0, *hi = UINT8_MAX; return true;
    case IC_I8: *lo = INT8_MIN, *hi = INT8_MAX; return true;
    case IC_I16: *lo = INT16_MIN, *hi = INT16_MAX; return true;
    case IC_I32: *lo = INT32_MIN, *hi = INT32_MAX; return true;
    case IC_I64: *lo = INT64_MIN, *hi = INT64_MAX; return true;
    default: return false;
    }
}

void ic_dtype_tolerance(ic_dtype t, double *rtol, double *atol)
{
    switch (t) {
    case IC_F64: *rtol = 1e-7, *atol = 1e-7; break;
    case IC_F32: *rtol = 1e-4, *atol = 1e-5; break;
    case IC_F16: *rtol = 1e-3, *atol = 1e-3; break;
    case IC_BF16: *rtol = 1.6e-2, *atol = 1e-2; break;
    default: *rtol = 0, *atol = 0; break; /* integers and bool: exact */
    }
}

bool ic_dtype_from_name(const char *s, ic_dtype *out)
{
    for (int i = 0; i < IC_DTYPE_COUNT; i++)
        if (strcmp(s, dtype_names[i]) == 0) {
            *out = (ic_dtype)i;
            return true;
        }
    return false;
}

static const struct { const char *name; ic_op_kind kind; } op_table[IC_OP_COUNT] = {
#define IC_OP(E, nm, mn, mx, k) { nm, k },
#include "ic/ops.def"
#undef IC_OP
};

const char *ic_op_name(ic_op op)
{
    if (op == IC_OP_INPUT)
        return "input";
    if (op == IC_OP_PARAM)
        return "param";
    return (unsigned)op < IC_OP_COUNT ? op_table[op].name : "?";
}

bool ic_op_from_name(const char *s, ic_op *out)
{
    for (int i = 0; i < IC_OP_COUNT; i++)
        if (strcmp(s, op_table[i].name) == 0) {
            *out = (ic_op)i;
            return true;
        }
    return false;
}

ic_op_kind ic_op_kind_of(ic_op op)
{
    if (op == IC_OP_INPUT)
        return IC_KIND_INPUT;
    if (op == IC_OP_PARAM)
        return IC_KIND_PARAM;
    return op_table[op].kind;
}
