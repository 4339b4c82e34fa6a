/* testutil.c - shared unit-test helpers: temp folders, files, shape strings, allclose. */
#define _GNU_SOURCE
#include "testutil.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ICT_SLOTS 8
#define ICT_PATHMAX 4096

static char *slot(void)
{
    static char bufs[ICT_SLOTS][ICT_PATHMAX];
    static int next;
    char *b = bufs[next];
    next = (next + 1) % ICT_SLOTS;
    return b;
}

/* ---- files ---- */

const char *ict_tmpdir(void)
{
    const char *base = getenv("TMPDIR");
    char *b = slot();
    snprintf(b, ICT_PATHMAX, "%s/ic-test-XXXXXX", base && *base ? base : "/tmp");
    cr_assert(mkdtemp(b) != NULL, "mkdtemp(%s): %s", b, strerror(errno));
    return b;
}

void ict_rmtree(const char *dir)
{
    chmod(dir, 0700);
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            char p[ICT_PATHMAX];
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            struct stat st;
            if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
                ict_rmtree(p);
            else
                unlink(p);
        }
        closedir(d);
    }
    rmdir(dir);
}

const char *ict_path(const char *dir, const char *name)
{
    char *b = slot();
    snprintf(b, ICT_PATHMAX, "%s/%s", dir, name);
    return b;
}

void ict_write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    cr_assert(f != NULL, "fopen(%s): %s", path, strerror(errno));
    cr_assert(n == 0 || fwrite(data, 1, n, f) == n, "writing %s failed", path);
    cr_assert(fclose(f) == 0, "closing %s failed", path);
}

char *ict_text(const void *p, size_t n)
{
    char *t = malloc(n + 1);
    if (t) {
        memcpy(t, p, n);
        t[n] = 0;
    }
    return t;
}

void *ict_read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + len, 1, cap - len, f)) > 0) {
        len += got;
        if (len == cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) {
                free(buf);
                buf = NULL;
            }
            buf = nb;
        }
    }
    fclose(f);
    if (n)
        *n = len;
    return buf;
}

int ict_count_files(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int k = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        k += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return k;
}

/* ---- context and graphs ---- */

ic_ctx *ict_ctx(void)
{
    ic_ctx *c = NULL;
    cr_assert_eq(ic_ctx_create(NULL, &c), IC_OK, "ic_ctx_create failed");
    return c;
}

ic_graph *ict_graph(ic_ctx *c, const char *name)
{
    ic_graph *g = NULL;
    ic_status s = ic_graph_create(c, name, &g);
    cr_assert_eq(s, IC_OK, "ic_graph_create: %s", ic_last_error(c));
    return g;
}

int ict_shape(ic_graph *g, const char *text, ic_dim *dims)
{
    const char *p = text;
    int rank = 0;
    while (*p) {
        while (*p && (isspace((unsigned char)*p) || *p == '[' || *p == ']' || *p == ','))
            p++;
        if (!*p)
            break;
        cr_assert(rank < IC_MAX_RANK, "shape '%s' has too many dims", text);
        if (*p == '-' || isdigit((unsigned char)*p)) {
            char *end;
            long long v = strtoll(p, &end, 10);
            dims[rank++] = ic_dim_const(v);
            p = end;
        } else {
            char name[64];
            int k = 0;
            while (*p && (isalnum((unsigned char)*p) || *p == '_') && k < 63)
                name[k++] = *p++;
            name[k] = 0;
            cr_assert(k > 0, "shape '%s': unexpected character '%c'", text, *p);
            ic_status s = ic_graph_symbol(g, name, &dims[rank++]);
            cr_assert_eq(s, IC_OK, "ic_graph_symbol(%s): %s", name, ic_last_error(ic_graph_ctx(g)));
        }
    }
    return rank;
}

ic_value ict_input(ic_graph *g, const char *name, ic_dtype dt, const char *shape)
{
    ic_dim d[IC_MAX_RANK];
    int r = ict_shape(g, shape, d);
    ic_value v = -1;
    ic_status s = ic_graph_add_input(g, name, dt, r, d, &v);
    cr_assert_eq(s, IC_OK, "add_input %s: %s", name, ic_last_error(ic_graph_ctx(g)));
    return v;
}

ic_value ict_param(ic_graph *g, const char *name, ic_dtype dt, const char *shape)
{
    ic_dim d[IC_MAX_RANK];
    int r = ict_shape(g, shape, d);
    ic_value v = -1;
    ic_status s = ic_graph_add_param(g, name, dt, r, d, NULL, 0, NULL, NULL, &v);
    cr_assert_eq(s, IC_OK, "add_param %s: %s", name, ic_last_error(ic_graph_ctx(g)));
    return v;
}

const char *ict_shape_of(const ic_graph *g, ic_value v)
{
    ic_node_info in;
    ic_graph_node(g, v, &in);
    char *b = slot();
    return ic_graph_shape_str(g, in.rank, in.shape, b, ICT_PATHMAX);
}

ic_dtype ict_dtype_of(const ic_graph *g, ic_value v)
{
    ic_node_info in;
    ic_graph_node(g, v, &in);
    return in.dtype;
}

void ict_assert_error_(ic_ctx *c, ic_status s, ic_status want, const char *const *parts,
                       const char *file, int line)
{
    const char *msg = ic_last_error(c);
    cr_assert_eq(s, want, "%s:%d: status %d (%s), want %d (%s); message: %s", file, line,
                 (int)s, ic_status_str(s), (int)want, ic_status_str(want), msg);
    for (int i = 0; parts[i]; i++)
        cr_assert(strstr(msg, parts[i]) != NULL, "%s:%d: message lacks \"%s\": %s", file, line,
                  parts[i], msg);
}

/* ---- numerics ---- */

void ict_tol(ic_dtype dt, double *rtol, double *atol)
{
    ic_dtype_tolerance(dt, rtol, atol);
}

/* Byte address of row-major logical element i. */
static const unsigned char *elem_ptr(const ic_tensor *t, int64_t i)
{
    int64_t off = 0;
    for (int d = t->rank - 1; d >= 0; d--) {
        int64_t s = t->shape[d] ? t->shape[d] : 1;
        off += (i % s) * t->strides[d];
        i /= s;
    }
    return (const unsigned char *)t->data + off * (int64_t)ic_dtype_size(t->dtype);
}

double ict_get_f(const ic_tensor *t, int64_t i)
{
    const unsigned char *p = elem_ptr(t, i);
    union { float f; double d; uint16_t h; int32_t i32; int64_t i64; uint8_t b; } u;
    memcpy(&u, p, ic_dtype_size(t->dtype));
    switch (t->dtype) {
    case IC_F32: return u.f;
    case IC_F64: return u.d;
    case IC_F16: return ic_f16_to_f32(u.h);
    case IC_BF16: return ic_bf16_to_f32(u.h);
    case IC_I32: return u.i32;
    case IC_I64: return (double)u.i64;
    case IC_BOOL: return u.b != 0;
    default: return NAN;
    }
}

int64_t ict_get_i(const ic_tensor *t, int64_t i)
{
    const unsigned char *p = elem_ptr(t, i);
    union { int32_t i32; int64_t i64; uint8_t b; } u;
    switch (t->dtype) {
    case IC_I32: memcpy(&u.i32, p, 4); return u.i32;
    case IC_I64: memcpy(&u.i64, p, 8); return u.i64;
    case IC_BOOL: return *p != 0;
    default: return (int64_t)ict_get_f(t, i);
    }
}

static void index_str(const ic_tensor *t, int64_t i, char *buf, size_t n)
{
    int64_t idx[IC_MAX_RANK];
    for (int d = t->rank - 1; d >= 0; d--) {
        int64_t s = t->shape[d] ? t->shape[d] : 1;
        idx[d] = i % s;
        i /= s;
    }
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < t->rank && k < n; d++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", d ? "," : "", (long long)idx[d]);
    if (k < n)
        snprintf(buf + k, n - k, "]");
}

static bool same_shape(const ic_tensor *a, const ic_tensor *b)
{
    if (a->rank != b->rank)
        return false;
    for (int d = 0; d < a->rank; d++)
        if (a->shape[d] != b->shape[d])
            return false;
    return true;
}

bool ict_allclose_tol(const ic_tensor *got, const ic_tensor *want, double rtol, double atol,
                      char *msg, size_t n)
{
    char tmp[8];
    if (!msg) {
        msg = tmp;
        n = sizeof tmp;
    }
    msg[0] = 0;
    if (!same_shape(got, want)) {
        snprintf(msg, n, "shapes differ: got rank %d, want rank %d (first dims %lld vs %lld)",
                 got->rank, want->rank, got->rank ? (long long)got->shape[0] : -1LL,
                 want->rank ? (long long)want->shape[0] : -1LL);
        return false;
    }
    bool exact = !ic_dtype_is_float(want->dtype) && !ic_dtype_is_float(got->dtype);
    int64_t numel = ic_tensor_numel(want), bad = 0, worst = -1;
    double worst_excess = -1;
    for (int64_t i = 0; i < numel; i++) {
        bool ok;
        double excess;
        if (exact) {
            int64_t a = ict_get_i(got, i), b = ict_get_i(want, i);
            ok = a == b;
            excess = ok ? 0 : fabs((double)a - (double)b) + 1;
        } else {
            double a = ict_get_f(got, i), b = ict_get_f(want, i);
            if (isnan(a) || isnan(b))
                ok = isnan(a) && isnan(b), excess = ok ? 0 : INFINITY;
            else if (isinf(a) || isinf(b))
                ok = a == b, excess = ok ? 0 : INFINITY;
            else
                excess = fabs(a - b) - (atol + rtol * fabs(b)), ok = excess <= 0;
        }
        if (!ok) {
            bad++;
            if (excess > worst_excess) {
                worst_excess = excess;
                worst = i;
            }
        }
    }
    if (!bad)
        return true;
    char ix[128];
    index_str(want, worst, ix, sizeof ix);
    double a = ict_get_f(got, worst), b = ict_get_f(want, worst);
    snprintf(msg, n,
             "%lld of %lld elements differ (%s, rtol %g atol %g); worst at %s (flat %lld): "
             "got %.9g, want %.9g, |diff| %.3g",
             (long long)bad, (long long)numel, ic_dtype_name(want->dtype), rtol, atol, ix,
             (long long)worst, a, b, fabs(a - b));
    return false;
}

bool ict_allclose(const ic_tensor *got, const ic_tensor *want, char *msg, size_t n)
{
    double rtol, atol;
    ict_tol(want->dtype, &rtol, &atol);
    return ict_allclose_tol(got, want, rtol, atol, msg, n);
}

char *ict_compile_dump(ic_ctx *c, const ic_graph *g, const ic_compile_options *o, const char *stage)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    cr_assert(f);
    ic_status s = ic_compile_dump(c, g, o, NULL, stage, f);
    fclose(f);
    cr_assert_eq(s, IC_OK, "dump %s: %s", stage, ic_last_error(c));
    return buf;
}
