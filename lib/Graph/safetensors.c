/* safetensors.c - .safetensors files: read by mmap with the header fully validated,
 * written atomically (temp file in the same folder, fsync, rename).
 *
 * Layout (https://github.com/huggingface/safetensors): u64 little-endian header length N,
 * N bytes of JSON {"name": {"dtype", "shape", "data_offsets": [begin, end]}, ...,
 * "__metadata__": {str: str}}, then the data area; offsets are relative to its start.
 *
 * Alignment: a tensor whose offset is a multiple of its element size is handed out
 * zero-copy from the read-only mapping. The format does not promise that (only writers
 * that sort by alignment do), so a misaligned entry is copied once, at open, into an
 * aligned private buffer owned by the ic_safetensors: every ic_tensor from
 * ic_safetensors_get is aligned for its dtype. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "file-impl.h"
#include "graph-impl.h"

#define ST_MAX_HEADER (100u * 1000u * 1000u) /* as the reference implementation */
#define ST_META "__metadata__"

typedef struct {
    const char *name;         /* owned by the ic_safetensors (names block) */
    ic_dtype dtype;
    int rank;
    int64_t shape[IC_MAX_RANK];
    uint64_t begin, end;      /* in the data area */
    void *copy;               /* aligned private copy of a misaligned entry, or NULL */
    void *copy_raw;           /* what to free for copy */
} st_entry;

struct ic_safetensors {
    ic_ctx *c;
    char *path;
    void *map;
    size_t map_size;
    const unsigned char *data; /* start of the data area inside map */
    uint64_t data_size;
    int n;
    st_entry *e;              /* in data order (begin, then name) */
    st_entry **by_name;       /* sorted by name, for ic_safetensors_get */
    char *names;              /* one block holding every name */
};

static const struct { const char *name; ic_dtype dt; } st_dtypes[] = {
    { "F32", IC_F32 }, { "F64", IC_F64 }, { "F16", IC_F16 }, { "BF16", IC_BF16 },
    { "I32", IC_I32 }, { "I64", IC_I64 }, { "BOOL", IC_BOOL },
    { "U8", IC_U8 }, { "I8", IC_I8 }, { "I16", IC_I16 },
};

static const char *st_dtype_name(ic_dtype dt)
{
    for (size_t i = 0; i < sizeof st_dtypes / sizeof *st_dtypes; i++)
        if (st_dtypes[i].dt == dt)
            return st_dtypes[i].name;
    return NULL;
}

static bool st_dtype_from_name(const char *s, ic_dtype *out)
{
    for (size_t i = 0; i < sizeof st_dtypes / sizeof *st_dtypes; i++)
        if (strcmp(st_dtypes[i].name, s) == 0) {
            *out = st_dtypes[i].dt;
            return true;
        }
    return false;
}

/* ---- reading ---- */

void ic_safetensors_close(ic_safetensors *st)
{
    if (!st)
        return;
    ic_ctx *c = st->c;
    for (int i = 0; st->e && i < st->n; i++)
        ic__free(c, st->e[i].copy_raw);
    if (st->map)
        munmap(st->map, st->map_size);
    ic__free(c, st->e);
    ic__free(c, st->by_name);
    ic__free(c, st->names);
    ic__free(c, st->path);
    ic__free(c, st);
}

/* Reads a non-negative JSON integer. */
static bool get_uint(const json_t *j, uint64_t *out)
{
    if (!json_is_integer(j) || json_integer_value(j) < 0)
        return false;
    *out = (uint64_t)json_integer_value(j);
    return true;
}

/* Name of the duplicate key that jansson refused: err.position is just past its closing
 * quote, so walk back to the opening one (skipping escaped quotes) and decode it. */
static void duplicate_key(const char *text, size_t len, const json_error_t *err, char *out,
                          size_t n)
{
    snprintf(out, n, "?");
    size_t end = (size_t)err->position;
    if (end < 2 || end > len || text[end - 1] != '"')
        return;
    for (size_t k = end - 1; k-- > 0;) {
        if (text[k] != '"')
            continue;
        size_t bs = 0;
        while (k - bs > 0 && text[k - bs - 1] == '\\')
            bs++;
        if (bs % 2)
            continue;
        json_t *s = json_loadb(text + k, end - k, JSON_DECODE_ANY, NULL);
        if (json_is_string(s))
            snprintf(out, n, "%s", json_string_value(s));
        json_decref(s);
        return;
    }
}

static ic_status st_fail(const ic_safetensors *st, const char *key, ic_status code,
                         const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* "path: tensor 'key': msg" (or "path: header: msg" without a key). */
static ic_status st_fail(const ic_safetensors *st, const char *key, ic_status code,
                         const char *fmt, ...)
{
    char msg[IC_ERRMAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (key)
        return ic__error(st->c, code, "%s: tensor '%s': %s", st->path, key, msg);
    return ic__error(st->c, code, "%s: %s", st->path, msg);
}

static ic_status parse_shape(ic_safetensors *st, const char *key, const json_t *js,
                             st_entry *e, uint64_t *numel)
{
    if (!json_is_array(js))
        return st_fail(st, key, IC_EFORMAT, "\"shape\" must be a list of integers");
    size_t r = json_array_size(js);
    if (r > IC_MAX_RANK)
        return st_fail(st, key, IC_EFORMAT, "rank %zu exceeds the supported maximum %d", r,
                       IC_MAX_RANK);
    uint64_t n = 1;
    for (size_t i = 0; i < r; i++) {
        uint64_t d;
        const json_t *jd = json_array_get(js, i);
        if (!get_uint(jd, &d))
            return st_fail(st, key, IC_EFORMAT,
                           "shape[%zu] must be a non-negative integer%s", i,
                           json_is_integer(jd) ? "" : " (not an integer)");
        if (__builtin_mul_overflow(n, d, &n) || n > (uint64_t)INT64_MAX)
            return st_fail(st, key, IC_EFORMAT, "element count overflows at shape[%zu] = %llu",
                           i, (unsigned long long)d);
        e->shape[i] = (int64_t)d;
    }
    e->rank = (int)r;
    *numel = n;
    return IC_OK;
}

static ic_status parse_entry(ic_safetensors *st, const char *key, const json_t *v, st_entry *e)
{
    if (!*key) /* no get or graph "key" can name it, and ic_safetensors_save refuses it */
        return st_fail(st, NULL, IC_EFORMAT, "header: a tensor has an empty name (\"\")");
    if (!json_is_object(v))
        return st_fail(st, key, IC_EFORMAT, "entry must be an object");
    const json_t *jdt = json_object_get(v, "dtype"), *js = json_object_get(v, "shape"),
                 *jo = json_object_get(v, "data_offsets");
    if (!json_is_string(jdt))
        return st_fail(st, key, IC_EFORMAT, "\"dtype\" is %s, expected a string",
                       jdt ? "not a string" : "missing");
    if (!st_dtype_from_name(json_string_value(jdt), &e->dtype))
        return st_fail(st, key, IC_EDTYPE,
                       "dtype \"%s\" is not supported (expected F32 F64 F16 BF16 I32 I64 BOOL U8 I8 I16)",
                       json_string_value(jdt));
    if (!js)
        return st_fail(st, key, IC_EFORMAT, "\"shape\" is missing");
    uint64_t numel = 0, nbytes, b, en;
    ic_status s = parse_shape(st, key, js, e, &numel);
    if (s)
        return s;
    if (!json_is_array(jo) || json_array_size(jo) != 2 || !get_uint(json_array_get(jo, 0), &b) ||
        !get_uint(json_array_get(jo, 1), &en))
        return st_fail(st, key, IC_EFORMAT,
                       "\"data_offsets\" must be [begin, end] with non-negative integers");
    if (b > en)
        return st_fail(st, key, IC_EFORMAT, "data_offsets [%llu, %llu]: begin is after end",
                       (unsigned long long)b, (unsigned long long)en);
    if (en > st->data_size)
        return st_fail(st, key, IC_EFORMAT,
                       "data_offsets [%llu, %llu] reach past the data area of %llu bytes "
                       "(file truncated?)",
                       (unsigned long long)b, (unsigned long long)en,
                       (unsigned long long)st->data_size);
    if (__builtin_mul_overflow(numel, (uint64_t)ic_dtype_size(e->dtype), &nbytes) ||
        nbytes != en - b)
        return st_fail(st, key, IC_EFORMAT,
                       "data_offsets [%llu, %llu] hold %llu bytes, but %s of %llu elements "
                       "needs %llu",
                       (unsigned long long)b, (unsigned long long)en,
                       (unsigned long long)(en - b), json_string_value(jdt),
                       (unsigned long long)numel, (unsigned long long)numel * ic_dtype_size(e->dtype));
    e->begin = b;
    e->end = en;
    return IC_OK;
}

static ic_status check_metadata(ic_safetensors *st, const json_t *m)
{
    if (!json_is_object(m))
        return st_fail(st, ST_META, IC_EFORMAT, "must be an object of strings");
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)m, k, v)
        if (!json_is_string(v))
            return st_fail(st, ST_META, IC_EFORMAT, "value of '%s' is not a string", k);
    return IC_OK;
}

static int by_offset(const void *pa, const void *pb)
{
    const st_entry *a = pa, *b = pb;
    if (a->begin != b->begin)
        return a->begin < b->begin ? -1 : 1;
    if (a->end != b->end)
        return a->end < b->end ? -1 : 1;
    return strcmp(a->name, b->name);
}

static int by_name(const void *pa, const void *pb)
{
    return strcmp((*(st_entry *const *)pa)->name, (*(st_entry *const *)pb)->name);
}

/* Entries sorted by offset: each non-empty one must start at or after the end of the
 * previous non-empty one (empty tensors occupy nothing). */
static ic_status check_overlap(ic_safetensors *st)
{
    const st_entry *prev = NULL;
    for (int i = 0; i < st->n; i++) {
        const st_entry *e = &st->e[i];
        if (e->begin == e->end)
            continue;
        if (prev && e->begin < prev->end)
            return st_fail(st, e->name, IC_EFORMAT,
                           "data_offsets [%llu, %llu] overlap tensor '%s' at [%llu, %llu]",
                           (unsigned long long)e->begin, (unsigned long long)e->end, prev->name,
                           (unsigned long long)prev->begin, (unsigned long long)prev->end);
        prev = e;
    }
    return IC_OK;
}

/* Copies entries whose data is not aligned to their element size (see the file header). */
static ic_status align_entries(ic_safetensors *st)
{
    for (int i = 0; i < st->n; i++) {
        st_entry *e = &st->e[i];
        size_t al = ic_dtype_size(e->dtype), nb = (size_t)(e->end - e->begin);
        const unsigned char *p = st->data + e->begin;
        if (nb == 0 || (uintptr_t)p % al == 0)
            continue;
        e->copy_raw = ic__malloc(st->c, nb + al);
        if (!e->copy_raw)
            return st_fail(st, e->name, IC_ENOMEM, "out of memory copying %zu misaligned bytes", nb);
        uintptr_t a = ((uintptr_t)e->copy_raw + al - 1) / al * al;
        e->copy = (void *)a;
        memcpy(e->copy, p, nb);
    }
    return IC_OK;
}

/* Fills st->e from the parsed header (object h). */
static ic_status parse_header(ic_safetensors *st, json_t *h)
{
    size_t n = json_object_size(h), names_len = 0;
    const char *k;
    json_t *v;
    if (json_object_get(h, ST_META)) {
        ic_status s = check_metadata(st, json_object_get(h, ST_META));
        if (s)
            return s;
        n--;
    }
    if (n > (size_t)INT32_MAX / 2)
        return st_fail(st, NULL, IC_EFORMAT, "too many tensors (%zu)", n);
    json_object_foreach(h, k, v)
        names_len += strlen(k) + 1;
    st->e = ic__calloc(st->c, n ? n : 1, sizeof *st->e);
    st->by_name = ic__calloc(st->c, n ? n : 1, sizeof *st->by_name);
    st->names = ic__malloc(st->c, names_len ? names_len : 1);
    if (!st->e || !st->by_name || !st->names)
        return st_fail(st, NULL, IC_ENOMEM, "out of memory reading the header");
    char *np = st->names;
    json_object_foreach(h, k, v) {
        if (strcmp(k, ST_META) == 0)
            continue;
        st_entry *e = &st->e[st->n];
        ic_status s = parse_entry(st, k, v, e);
        if (s)
            return s;
        size_t len = strlen(k) + 1;
        memcpy(np, k, len);
        e->name = np;
        np += len;
        st->n++;
    }
    qsort(st->e, (size_t)st->n, sizeof *st->e, by_offset);
    for (int i = 0; i < st->n; i++)
        st->by_name[i] = &st->e[i];
    qsort(st->by_name, (size_t)st->n, sizeof *st->by_name, by_name);
    ic_status s = check_overlap(st);
    return s ? s : align_entries(st);
}

/* Maps the file; checks the size prefix and parses the header JSON into *out. */
static ic_status map_file(ic_safetensors *st, json_t **out)
{
    int fd = open(st->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return st_fail(st, NULL, IC_EIO, "cannot open: %s", strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return st_fail(st, NULL, IC_EIO, "not a regular file");
    }
    if (sb.st_size < 8) {
        close(fd);
        return st_fail(st, NULL, IC_EFORMAT,
                       "file has %lld bytes, too short for the 8-byte header length (truncated?)",
                       (long long)sb.st_size);
    }
    st->map_size = (size_t)sb.st_size;
    void *m = mmap(NULL, st->map_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return st_fail(st, NULL, IC_EIO, "cannot map: %s", strerror(errno));
    st->map = m;
    const unsigned char *p = m;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | p[i];
    if (hlen > ST_MAX_HEADER)
        return st_fail(st, NULL, IC_EFORMAT, "header length %llu exceeds the %u-byte limit",
                       (unsigned long long)hlen, ST_MAX_HEADER);
    if (hlen > st->map_size - 8)
        return st_fail(st, NULL, IC_EFORMAT,
                       "header length %llu exceeds the %zu bytes after the length (truncated?)",
                       (unsigned long long)hlen, st->map_size - 8);
    st->data = p + 8 + hlen;
    st->data_size = st->map_size - 8 - hlen;
    json_error_t err;
    const char *text = (const char *)p + 8;
    json_t *h = json_loadb(text, (size_t)hlen, JSON_REJECT_DUPLICATES, &err);
    if (!h) {
        if (json_error_code(&err) == json_error_duplicate_key) {
            char key[256];
            duplicate_key(text, (size_t)hlen, &err, key, sizeof key);
            return st_fail(st, NULL, IC_EFORMAT, "header: key '%s' appears twice", key);
        }
        return st_fail(st, NULL, IC_EFORMAT, "header is not valid JSON: %s (byte %d)", err.text,
                       err.position);
    }
    if (!json_is_object(h)) {
        json_decref(h);
        return st_fail(st, NULL, IC_EFORMAT, "header must be a JSON object");
    }
    *out = h;
    return IC_OK;
}

ic_status ic_safetensors_open(ic_ctx *c, const char *path, ic_safetensors **out)
{
    if (!out)
        return ic__error(c, IC_EINVAL, "ic_safetensors_open: out is NULL");
    *out = NULL;
    if (!path)
        return ic__error(c, IC_EINVAL, "ic_safetensors_open: path is NULL");
    ic_safetensors *st = ic__calloc(c, 1, sizeof *st);
    if (!st || !(st->path = ic__strdup(c, path))) {
        ic__free(c, st);
        return ic__error(c, IC_ENOMEM, "%s: out of memory", path);
    }
    st->c = c;
    json_t *h = NULL;
    ic_status s = map_file(st, &h);
    if (!s)
        s = parse_header(st, h);
    json_decref(h);
    if (s) {
        ic_safetensors_close(st);
        return s;
    }
    *out = st;
    return IC_OK;
}

int ic_safetensors_count(const ic_safetensors *st) { return st ? st->n : 0; }

const char *ic_safetensors_name(const ic_safetensors *st, int i)
{
    return st && i >= 0 && i < st->n ? st->e[i].name : NULL;
}

ic_status ic_safetensors_get(const ic_safetensors *st, const char *name, ic_tensor *out)
{
    if (!st || !name || !out)
        return ic__error(st ? st->c : NULL, IC_EINVAL, "ic_safetensors_get: NULL argument");
    st_entry key = { .name = name }, *kp = &key;
    st_entry **hit = bsearch(&kp, st->by_name, (size_t)st->n, sizeof *st->by_name, by_name);
    if (!hit)
        return st_fail(st, name, IC_EINVAL, "no such tensor in the file (it has %d)", st->n);
    const st_entry *e = *hit;
    void *data = e->copy ? e->copy : (void *)(st->data + e->begin);
    ic_tensor_init(out, e->dtype, e->rank, e->shape, data);
    return IC_OK;
}

/* ---- writing ---- */

typedef struct {
    const char *name;
    const ic_tensor *t;
    uint64_t nbytes;
    int order;                /* position in the caller's list */
} st_out;

/* Larger elements first, so every offset is a multiple of its element size (as the
 * reference writer does); otherwise in the caller's order. */
static int by_alignment(const void *pa, const void *pb)
{
    const st_out *a = pa, *b = pb;
    size_t sa = ic_dtype_size(a->t->dtype), sb = ic_dtype_size(b->t->dtype);
    if (sa != sb)
        return sa > sb ? -1 : 1;
    return a->order - b->order;
}

static ic_status check_outputs(ic_ctx *c, const char *path, int n, const char *const *names,
                               const ic_tensor *ts, st_out *o)
{
    for (int i = 0; i < n; i++) {
        const char *nm = names[i];
        const ic_tensor *t = &ts[i];
        if (!nm || !*nm)
            return ic__error(c, IC_EINVAL, "%s: tensor %d has an empty name", path, i);
        if (strcmp(nm, ST_META) == 0)
            return ic__error(c, IC_EINVAL, "%s: tensor '%s': name is reserved", path, nm);
        for (int j = 0; j < i; j++)
            if (strcmp(names[j], nm) == 0)
                return ic__error(c, IC_EINVAL, "%s: tensor '%s': name given twice", path, nm);
        if (!st_dtype_name(t->dtype))
            return ic__error(c, IC_EDTYPE, "%s: tensor '%s': unknown dtype %d", path, nm,
                             (int)t->dtype);
        if (t->rank < 0 || t->rank > IC_MAX_RANK)
            return ic__error(c, IC_ESHAPE, "%s: tensor '%s': rank %d is outside 0..%d", path,
                             nm, t->rank, IC_MAX_RANK);
        int64_t numel = ic_tensor_numel(t), nb;
        if (numel < 0 || !ic__mul_ok(numel, (int64_t)ic_dtype_size(t->dtype), &nb))
            return ic__error(c, IC_ESHAPE, "%s: tensor '%s': negative or overflowing shape",
                             path, nm);
        if (numel > 0 && !t->data)
            return ic__error(c, IC_EINVAL, "%s: tensor '%s': data is NULL", path, nm);
        o[i] = (st_out){ nm, t, (uint64_t)nb, i };
    }
    return IC_OK;
}

/* One header entry {"dtype", "shape", "data_offsets"}; NULL when out of memory. */
static json_t *header_entry(const ic_tensor *t, uint64_t begin, uint64_t end)
{
    json_t *e = json_object(), *shape = json_array(), *offs = json_array();
    bool ok = e && shape && offs;
    for (int d = 0; ok && d < t->rank; d++)
        ok = !json_array_append_new(shape, json_integer(t->shape[d]));
    ok = ok && !json_array_append_new(offs, json_integer((json_int_t)begin)) &&
         !json_array_append_new(offs, json_integer((json_int_t)end));
    ok = ok && !json_object_set_new(e, "dtype", json_string(st_dtype_name(t->dtype)));
    ok = ok && !json_object_set(e, "shape", shape) && !json_object_set(e, "data_offsets", offs);
    json_decref(shape);
    json_decref(offs);
    if (!ok) {
        json_decref(e);
        return NULL;
    }
    return e;
}

/* The header JSON (compact, in data order), padded with spaces to a multiple of 8 as the
 * reference writer does, so the data area starts 8-aligned. */
static ic_status build_header(ic_ctx *c, const char *path, int n, const st_out *o,
                              char **text, size_t *len)
{
    json_t *h = json_object();
    uint64_t off = 0;
    bool ok = h != NULL;
    for (int i = 0; ok && i < n; i++) {
        json_t *e = header_entry(o[i].t, off, off + o[i].nbytes);
        if (!e) {
            ok = false;
            break;
        }
        if (json_object_set_new(h, o[i].name, e)) { /* refuses keys that are not UTF-8 */
            json_decref(h);
            return ic__error(c, IC_EINVAL, "%s: tensor '%s': name is not valid UTF-8", path,
                             o[i].name);
        }
        off += o[i].nbytes;
    }
    char *s = ok ? json_dumps(h, JSON_COMPACT) : NULL;
    json_decref(h);
    if (!s)
        return ic__error(c, IC_ENOMEM, "%s: out of memory building the header", path);
    size_t l = strlen(s), padded = (l + 7) / 8 * 8;
    *text = ic__malloc(c, padded);
    if (!*text) {
        free(s);
        return ic__error(c, IC_ENOMEM, "%s: out of memory building the header", path);
    }
    memcpy(*text, s, l);
    memset(*text + l, ' ', padded - l);
    free(s);
    *len = padded;
    return IC_OK;
}

/* Writes t's elements in row-major order (strides honoured) to f. */
static bool write_tensor(FILE *f, const ic_tensor *t, uint64_t nbytes)
{
    if (nbytes == 0)
        return true;
    if (ic_tensor_is_contiguous(t))
        return fwrite(t->data, 1, (size_t)nbytes, f) == nbytes;
    size_t es = ic_dtype_size(t->dtype);
    unsigned char buf[65536];
    size_t used = 0;
    int64_t idx[IC_MAX_RANK] = { 0 }, numel = (int64_t)(nbytes / es);
    for (int64_t i = 0; i < numel; i++) {
        int64_t off = 0;
        for (int d = 0; d < t->rank; d++)
            off += idx[d] * t->strides[d];
        memcpy(buf + used, (const unsigned char *)t->data + off * (int64_t)es, es);
        used += es;
        if (used + es > sizeof buf) {
            if (fwrite(buf, 1, used, f) != used)
                return false;
            used = 0;
        }
        for (int d = t->rank - 1; d >= 0 && ++idx[d] == t->shape[d]; d--)
            idx[d] = 0;
    }
    return fwrite(buf, 1, used, f) == used;
}

typedef struct { const char *hdr; size_t hlen; int n; const st_out *o; } st_file;

/* The whole file: header length, header, then every tensor's bytes; false with errno set. */
static bool write_all(FILE *f, void *arg)
{
    const st_file *a = arg;
    unsigned char len8[8];
    for (int i = 0; i < 8; i++)
        len8[i] = (unsigned char)((uint64_t)a->hlen >> (8 * i));
    if (fwrite(len8, 1, 8, f) != 8 || fwrite(a->hdr, 1, a->hlen, f) != a->hlen)
        return false;
    for (int i = 0; i < a->n; i++)
        if (!write_tensor(f, a->o[i].t, a->o[i].nbytes))
            return false;
    return true;
}

static ic_status write_atomic(ic_ctx *c, const char *path, const char *hdr, size_t hlen, int n,
                              const st_out *o)
{
    st_file a = { hdr, hlen, n, o };
    const char *step;
    int e = ic__write_atomic(path, write_all, &a, IC__WRITE_SYNC, &step);
    return e ? ic__error(c, IC_EIO, "%s: %s: %s", path, step, strerror(e)) : IC_OK;
}

ic_status ic_safetensors_save(ic_ctx *c, const char *path, int n, const char *const *names,
                              const ic_tensor *tensors)
{
    if (!path || !*path || n < 0 || (n > 0 && (!names || !tensors)))
        return ic__error(c, IC_EINVAL, "ic_safetensors_save: bad arguments (path '%s', n %d)",
                         path ? path : "(null)", n);
    st_out *o = ic__calloc(c, n ? (size_t)n : 1, sizeof *o);
    if (!o)
        return ic__error(c, IC_ENOMEM, "%s: out of memory", path);
    char *hdr = NULL;
    size_t hlen = 0;
    ic_status s = check_outputs(c, path, n, names, tensors, o);
    if (!s) {
        qsort(o, (size_t)n, sizeof *o, by_alignment);
        s = build_header(c, path, n, o, &hdr, &hlen);
    }
    if (!s)
        s = write_atomic(c, path, hdr, hlen, n, o);
    ic__free(c, hdr);
    ic__free(c, o);
    return s;
}
