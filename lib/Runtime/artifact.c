/* artifact.c - saved compiled models (ic_compiled_save / ic_compiled_load), like AOTInductor's
 * packages: one file holding the graph, optionally its weights, and every compiled variant's
 * codegen parameters and kernel object code. Loading lowers and fuses the graph again (cheap),
 * then takes each kernel's object from the file by its cache key (pool.c: the store) and links
 * it: no LLVM code generation.
 *
 * Layout (little-endian; every section at a 64-byte offset, its size a multiple of 64):
 *     "ICMODEL2"                       magic; the last byte is the format's version
 *     u64 nsections; per section: char name[24] (NUL-padded), u64 offset, u64 bytes, u64 hash
 *                                      (of the hashes of its 1 MiB chunks: checked in parallel)
 *     u64 hash of everything above
 *   sections:
 *     meta      text, one "key value" line each: ic, build (ic_build_id), llvm, device, triple,
 *               cpu, features, graph, mode, option <name> <int>
 *     graph     the graph's JSON text (params whose data the file holds have no "file")
 *     weights   u32 count; per param: u32 n + name, u64 offset in wdata, u64 bytes
 *     wdata     the weights, each at a 64-byte offset (read in place from the mapping)
 *     variants  u32 count; per variant: u32 nsyms + i64 values, u32 n + target text, u32 kernels,
 *               per kernel u32 n + codegen params text (ic__cg_params_format)
 *     objects   u32 count; per object: u32 n + cache key, u64 offset in odata, u64 bytes
 *     odata     packed objects (ic__jit_object_pack), each at a 64-byte offset
 * The meta section is checked first (versions, device, CPU features) so that a file made
 * elsewhere is refused by name of the mismatch; then every section's hash, so that a damaged
 * file is an error before any of it is used.
 *
 * The container (header, sections, hashes, meta versions, graph and weights sections, atomic
 * write, checked open) is shared with the GPU's saved models (cuda_artifact.c), through
 * artifact-impl.h; there "variants", "objects" and "odata" give way to the GPU's sections. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>
#include "artifact-impl.h"
#include "cache-impl.h"
#include "file-impl.h"
#include "cpu-impl.h"
#include "key-impl.h"
#include "llvmgen-impl.h"

static const char art_magic[8] = { 'I', 'C', 'M', 'O', 'D', 'E', 'L', '2' };
enum { ALIGN = IC__ART_ALIGN, NAME_LEN = IC__ART_NAME_LEN, MAX_SECTIONS = IC__ART_MAX_SECTIONS,
       SEC_ENTRY = NAME_LEN + 24 };
#define BAD IC__ART_BAD

/* ---- a hash of section bytes: 4 independent lanes, so that large weights check fast ---- */

typedef struct {
    uint64_t h[4], total;
    unsigned char buf[32];
    size_t nbuf;
} hasher;

static void hash_init(hasher *H)
{
    memset(H, 0, sizeof *H);
    for (int i = 0; i < 4; i++)
        H->h[i] = IC__HASH_SEED + (uint64_t)i;
}

/* nb blocks of 32 bytes into the lanes, kept in locals: the compiler cannot keep H's lanes
 * in registers across stores it must assume alias the bytes (2x the speed on large weights). */
static void hash_blocks(hasher *H, const unsigned char *p, size_t nb)
{
    uint64_t a = H->h[0], b = H->h[1], c = H->h[2], d = H->h[3];
    for (; nb > 0; nb--, p += 32) {
        uint64_t w[4];
        memcpy(w, p, 32);
        a = (a ^ w[0]) * 0x9e3779b97f4a7c15ull, a ^= a >> 29;
        b = (b ^ w[1]) * 0x9e3779b97f4a7c15ull, b ^= b >> 29;
        c = (c ^ w[2]) * 0x9e3779b97f4a7c15ull, c ^= c >> 29;
        d = (d ^ w[3]) * 0x9e3779b97f4a7c15ull, d ^= d >> 29;
    }
    H->h[0] = a, H->h[1] = b, H->h[2] = c, H->h[3] = d;
}

static void hash_feed(hasher *H, const void *data, size_t n)
{
    const unsigned char *p = data;
    H->total += n;
    while (n > 0 && H->nbuf > 0) {
        size_t k = 32 - H->nbuf < n ? 32 - H->nbuf : n;
        memcpy(H->buf + H->nbuf, p, k);
        H->nbuf += k, p += k, n -= k;
        if (H->nbuf == 32) {
            hash_blocks(H, H->buf, 1);
            H->nbuf = 0;
        }
    }
    hash_blocks(H, p, n / 32);
    p += n / 32 * 32, n %= 32;
    memcpy(H->buf, p, n);
    H->nbuf += n;
}

static uint64_t hash_end(const hasher *H)
{
    uint64_t r = ic__hash_bytes(IC__HASH_SEED, H->h, sizeof H->h);
    r = ic__hash_bytes(r, H->buf, H->nbuf);
    return ic__hash_bytes(r, &H->total, 8);
}

static uint64_t hash_of(const void *p, size_t n)
{
    hasher H;
    hash_init(&H);
    hash_feed(&H, p, n);
    return hash_end(&H);
}

/* A section's hash: the hash of its 1 MiB chunks' hashes, so that a loader checks the chunks
 * of large weights on several threads (the writer feeds it as a stream). */
enum { CHUNK = 1 << 20, HASH_THREADS = 8 };

typedef struct {
    hasher outer, inner;
    size_t in_chunk;
} chunked;

static void chunked_init(chunked *C)
{
    hash_init(&C->outer);
    hash_init(&C->inner);
    C->in_chunk = 0;
}

static void chunked_feed(chunked *C, const void *data, size_t n)
{
    const unsigned char *p = data;
    while (n > 0) {
        size_t k = n < CHUNK - C->in_chunk ? n : CHUNK - C->in_chunk;
        hash_feed(&C->inner, p, k);
        p += k, n -= k, C->in_chunk += k;
        if (C->in_chunk == CHUNK) {
            uint64_t h = hash_end(&C->inner);
            hash_feed(&C->outer, &h, 8);
            hash_init(&C->inner);
            C->in_chunk = 0;
        }
    }
}

static uint64_t chunked_end(chunked *C)
{
    if (C->in_chunk > 0) {
        uint64_t h = hash_end(&C->inner);
        hash_feed(&C->outer, &h, 8);
    }
    return hash_end(&C->outer);
}

typedef struct {
    const unsigned char *p;
    size_t n;
    uint64_t *h;              /* [chunks] */
    size_t first, step;       /* this thread's chunks: first, first + step, ... */
} chunk_job;

static void *hash_chunks(void *arg)
{
    chunk_job *J = arg;
    for (size_t i = J->first; i * CHUNK < J->n; i += J->step) {
        size_t k = J->n - i * CHUNK < CHUNK ? J->n - i * CHUNK : CHUNK;
        J->h[i] = hash_of(J->p + i * CHUNK, k);
    }
    return NULL;
}

/* chunked's value for p[0..n), the chunks hashed on up to HASH_THREADS threads, no more than
 * the host has cores (the calling thread included); false when out of memory. */
static bool section_hash(const unsigned char *p, size_t n, uint64_t *out)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    size_t nc = (n + CHUNK - 1) / CHUNK, nt = nc < HASH_THREADS ? nc : HASH_THREADS;
    if (cores >= 1 && nt > (size_t)cores)
        nt = (size_t)cores;
    uint64_t *h = malloc(sizeof *h * (nc + 1));
    if (!h)
        return false;
    chunk_job J[HASH_THREADS];
    pthread_t tid[HASH_THREADS];
    bool started[HASH_THREADS] = { false };
    for (size_t t = 0; t < nt; t++) {
        J[t] = (chunk_job){ p, n, h, t, nt };
        started[t] = t > 0 && pthread_create(&tid[t], NULL, hash_chunks, &J[t]) == 0;
    }
    for (size_t t = 0; t < nt; t++) /* the calling thread's share, and any that did not start */
        if (!started[t])
            hash_chunks(&J[t]);
    for (size_t t = 1; t < nt; t++)
        if (started[t])
            pthread_join(tid[t], NULL);
    hasher H;
    hash_init(&H);
    hash_feed(&H, h, 8 * nc);
    *out = hash_end(&H);
    free(h);
    return true;
}

/* ---- the host: what a file's code needs of it ---- */

static void llvm_version(char *buf, size_t n)
{
    unsigned maj, min, pat;
    LLVMGetVersion(&maj, &min, &pat);
    snprintf(buf, n, "%u.%u.%u", maj, min, pat);
}

/* The "+feature" entries of want that have lacks (a comma list) does not: into buf. */
static bool missing_features(const char *want, const char *have, char *buf, size_t n)
{
    size_t w = 0;
    buf[0] = 0;
    for (const char *p = want; p && *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char f[128];
        if (len > 1 && len < sizeof f && p[0] == '+') {
            memcpy(f, p + 1, len - 1);
            f[len - 1] = 0;
            if (!ic__has_feature(have, f) && w < n)
                w += (size_t)snprintf(buf + w, n - w, "%s+%s", w ? "," : "", f);
        }
        p = end ? end + 1 : NULL;
    }
    return w > 0;
}

/* ======================================================================================
 * Saving
 * ==================================================================================== */


static size_t pad64(size_t n) { return (n + ALIGN - 1) / ALIGN * ALIGN; }

static ic__art_wsec *new_section(ic__art_writer *W, const char *name)
{
    ic__art_wsec *x = &W->sec[W->nsec++];
    memset(x, 0, sizeof *x);
    snprintf(x->name, sizeof x->name, "%s", name);
    return x;
}

bool ic__art_add_piece(ic__art_writer *W, ic__art_wsec *x, const void *p, size_t n)
{
    if (x->n == x->cap) {
        int cap = x->cap ? 2 * x->cap : 16;
        struct ic__art_piece *pc = ic__realloc(W->c, x->pc, sizeof *pc * (size_t)cap);
        if (!pc)
            return false;
        x->pc = pc, x->cap = cap;
    }
    x->pc[x->n++] = (struct ic__art_piece){ p, n };
    return true;
}

/* Offsets of the pieces in their section (x->bytes: its size). */
uint64_t ic__art_piece_offset(const ic__art_wsec *x, int i)
{
    uint64_t off = 0;
    for (int k = 0; k < i; k++)
        off += pad64(x->pc[k].n);
    return off;
}

static void section_close(ic__art_wsec *x)
{
    static const unsigned char zeros[ALIGN];
    chunked H;
    chunked_init(&H);
    x->bytes = 0;
    for (int i = 0; i < x->n; i++) {
        chunked_feed(&H, x->pc[i].p, x->pc[i].n);
        chunked_feed(&H, zeros, pad64(x->pc[i].n) - x->pc[i].n);
        x->bytes += pad64(x->pc[i].n);
    }
    x->hash = chunked_end(&H);
}

void ic__art_writer_free(ic__art_writer *W)
{
    for (int i = 0; i < W->nsec; i++) {
        ic__free(W->c, W->sec[i].pc);
        free(W->sec[i].owned);
    }
}



ic_status ic__art_text_section(ic__art_writer *W, const char *name, ic__art_fill_fn fill, const void *arg)
{
    ic__art_wsec *x = new_section(W, name);
    FILE *f = open_memstream(&x->owned, &x->nowned);
    if (!f)
        return ic__error(W->c, IC_ENOMEM, "%s: out of memory", W->path);
    ic_status s = fill(W, f, arg);
    if (fclose(f) != 0 && !s)
        s = ic__error(W->c, IC_ENOMEM, "%s: out of memory", W->path);
    if (!s && !ic__art_add_piece(W, x, x->owned, x->nowned))
        s = ic__error(W->c, IC_ENOMEM, "%s: out of memory", W->path);
    return s;
}

/* The variants worth saving: those compiled to the end. */
static int nsaved(const ic_compiled *cc)
{
    int n = 0;
    for (int i = 0; i < cc->vc.n; i++)
        n += ((const ic__variant *)cc->vc.v[i])->build != NULL;
    return n;
}

static const ic__variant *saved_variant(const ic_compiled *cc, int i)
{
    for (int k = 0; k < cc->vc.n; k++) {
        const ic__variant *v = (const ic__variant *)cc->vc.v[k];
        if (v->build && i-- == 0)
            return v;
    }
    return NULL;
}

static ic_status fill_meta(ic__art_writer *W, FILE *f, const void *arg)
{
    const ic_compiled *cc = arg;
    const ic__variant *v0 = saved_variant(cc, 0);
    char triple[256] = "", cpu[256] = "", feat[8192] = "";
    /* target text: "target <triple> cpu <cpu> features <list>" */
    if (sscanf(v0->target_text, "target %255s cpu %255s features %8191s", triple, cpu, feat) < 2)
        return ic__error(W->c, IC_EINVAL, "%s: cannot read the code's target '%s'", W->path, v0->target_text);
    for (int i = 1; i < nsaved(cc); i++)
        if (strcmp(saved_variant(cc, i)->target_text, v0->target_text) != 0)
            return ic__error(W->c, IC_EINVAL, "%s: the compiled variants were made for different CPUs", W->path);
    const ic_compile_options *o = &cc->o;
    ic__art_meta_versions(f);
    fprintf(f, "device cpu\ntriple %s\ncpu %s\nfeatures %s\ngraph %s\nmode %s\n", triple, cpu, feat,
            ic_graph_name(cc->g), o->mode ? o->mode : "default");
    fprintf(f, "option fusion %d\noption threads %d\noption vector_width %d\noption serial_threshold %lld\n"
            "option stream_bytes %lld\noption prefetch_bytes %d\noption freezing %d\noption max_variants %d\n"
            "option autotune %d\noption cache %d\n", o->fusion, o->threads, o->vector_width,
            (long long)o->serial_threshold, (long long)o->stream_bytes, o->prefetch_bytes, o->freezing,
            o->max_variants, o->autotune, o->cache);
    return IC_OK;
}

void ic__art_meta_versions(FILE *f)
{
    char llvm[64];
    llvm_version(llvm, sizeof llvm);
    fprintf(f, "ic %s\nbuild %s\nllvm %s\n", ic_version(), ic_build_id(), llvm);
}

typedef struct {
    const ic_graph *g;
    bool with_weights;
    ic__art_wsec *data;       /* wdata */
} weights_arg;

/* A param's data goes into the file unless it comes from a file the graph names and the
 * weights stay out: then the JSON keeps the file (an absolute path). */
static ic_status fill_graph(ic__art_writer *W, FILE *f, const void *arg)
{
    const weights_arg *a = arg;
    char *text = NULL;
    size_t n = 0;
    ic_status s = ic__graph_json_text(a->g, !a->with_weights, &text, &n);
    if (!s)
        fwrite(text, 1, n, f);
    free(text);
    return s;
}

/* Whether param ni's data goes into the file. */
static bool stores_weights(const ic_node_info *ni, bool with_weights)
{
    return ni->op == IC_OP_PARAM && ni->data && (with_weights || !ni->file);
}

static size_t param_bytes(const ic_node_info *ni)
{
    size_t n = ic_dtype_size(ni->dtype);
    for (int d = 0; d < ni->rank; d++)
        n *= (size_t)ni->shape[d].coef; /* params with data have constant shapes */
    return n;
}

static ic_status fill_weights(ic__art_writer *W, FILE *f, const void *arg)
{
    const weights_arg *a = arg;
    uint32_t n = 0;
    for (int v = 0; v < ic_graph_num_nodes(a->g); v++) {
        ic_node_info ni;
        ic_graph_node(a->g, v, &ni);
        n += stores_weights(&ni, a->with_weights);
    }
    ic__art_put32(f, n);
    for (int v = 0; v < ic_graph_num_nodes(a->g); v++) {
        ic_node_info ni;
        ic_graph_node(a->g, v, &ni);
        if (!stores_weights(&ni, a->with_weights))
            continue;
        size_t bytes = param_bytes(&ni);
        ic__art_putstr(f, ni.name);
        ic__art_put64(f, ic__art_piece_offset(a->data, a->data->n));
        ic__art_put64(f, bytes);
        if (!ic__art_add_piece(W, a->data, ni.data, bytes))
            return ic__error(W->c, IC_ENOMEM, "%s: out of memory", W->path);
    }
    return IC_OK;
}

static ic_status fill_variants(ic__art_writer *W, FILE *f, const void *arg)
{
    const ic_compiled *cc = arg;
    int nsyms = ic_graph_num_symbols(cc->g);
    ic__art_put32(f, (uint32_t)nsaved(cc));
    for (int i = 0; i < nsaved(cc); i++) {
        const ic__variant *v = saved_variant(cc, i);
        ic__art_put32(f, (uint32_t)nsyms);
        for (int s = 0; s < nsyms; s++)
            ic__art_put64(f, (uint64_t)v->b.vals[s]);
        ic__art_putstr(f, v->target_text);
        ic__art_put32(f, (uint32_t)v->nkernels);
        for (int k = 0; k < v->nkernels; k++) {
            char p[1024];
            ic__cg_params_format(&v->params[k], p, sizeof p);
            ic__art_putstr(f, p);
        }
    }
    return IC_OK;
}

/* Whether an earlier job of the variants (before variant i, job j) has key. */
static bool seen_key(const ic_compiled *cc, int i, int j, const char *key)
{
    for (int a = 0; a <= i; a++) {
        const ic__build *B = saved_variant(cc, a)->build;
        for (int b = 0; b < (a == i ? j : B->njobs); b++)
            if (strcmp(B->key[b], key) == 0)
                return true;
    }
    return false;
}

typedef struct {
    const ic_compiled *cc;
    ic__art_wsec *data;
} objects_arg;

static ic_status fill_objects(ic__art_writer *W, FILE *f, const void *arg)
{
    const objects_arg *a = arg;
    uint32_t n = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1)
            ic__art_put32(f, n);
        for (int i = 0; i < nsaved(a->cc); i++) {
            const ic__build *B = saved_variant(a->cc, i)->build;
            for (int j = 0; j < B->njobs; j++) {
                if (!B->key[j] || !B->blob[j])
                    return ic__error(W->c, IC_EINVAL, "%s: a kernel's object code is missing", W->path);
                if (seen_key(a->cc, i, j, B->key[j]))
                    continue;
                if (pass == 0) {
                    n++;
                    continue;
                }
                ic__art_putstr(f, B->key[j]);
                ic__art_put64(f, ic__art_piece_offset(a->data, a->data->n));
                ic__art_put64(f, B->nblob[j]);
                if (!ic__art_add_piece(W, a->data, B->blob[j], B->nblob[j]))
                    return ic__error(W->c, IC_ENOMEM, "%s: out of memory", W->path);
            }
        }
    }
    return IC_OK;
}

/* A data section whose pieces a table section listed (data: filled by the table's fill). */
void ic__art_add_data_section(ic__art_writer *W, ic__art_wsec *data, const char *name)
{
    snprintf(data->name, sizeof data->name, "%s", name);
    W->sec[W->nsec++] = *data;
    memset(data, 0, sizeof *data);
}

ic_status ic__art_graph_sections(ic__art_writer *W, const ic_graph *g, bool with_weights)
{
    ic__art_wsec wdata = { .n = 0 };
    weights_arg wa = { g, with_weights, &wdata };
    ic_status s;
    if (!(s = ic__art_text_section(W, "graph", fill_graph, &wa)) &&
        !(s = ic__art_text_section(W, "weights", fill_weights, &wa)))
        ic__art_add_data_section(W, &wdata, "wdata");
    ic__free(W->c, wdata.pc);
    return s;
}

/* Every section, in file order: each table before the data section it lists. */
static ic_status build_sections(ic__art_writer *W, const ic_compiled *cc, bool with_weights)
{
    ic__art_wsec odata = { .n = 0 };
    objects_arg oa = { cc, &odata };
    ic_status s;
    if (!(s = ic__art_text_section(W, "meta", fill_meta, cc)) && !(s = ic__art_graph_sections(W, cc->g, with_weights)) &&
        !(s = ic__art_text_section(W, "variants", fill_variants, cc)) &&
        !(s = ic__art_text_section(W, "objects", fill_objects, &oa)))
        ic__art_add_data_section(W, &odata, "odata");
    ic__free(W->c, odata.pc);
    return s;
}

static size_t header_bytes(int nsec) { return 8 + 8 + (size_t)nsec * SEC_ENTRY + 8; }

/* The whole file: header, section table, its hash, then each section, 64-byte aligned. */
static bool write_all(FILE *f, void *arg)
{
    ic__art_writer *W = arg;
    static const unsigned char zeros[ALIGN];
    uint64_t off = pad64(header_bytes(W->nsec));
    for (int i = 0; i < W->nsec; i++) {
        section_close(&W->sec[i]);
        W->sec[i].offset = off;
        off += W->sec[i].bytes;
    }
    char *hdr = NULL;
    size_t nh = 0;
    FILE *h = open_memstream(&hdr, &nh);
    if (!h)
        return false;
    fwrite(art_magic, 1, sizeof art_magic, h);
    ic__art_put64(h, (uint64_t)W->nsec);
    for (int i = 0; i < W->nsec; i++) {
        fwrite(W->sec[i].name, 1, NAME_LEN, h);
        ic__art_put64(h, W->sec[i].offset);
        ic__art_put64(h, W->sec[i].bytes);
        ic__art_put64(h, W->sec[i].hash);
    }
    bool ok = fclose(h) == 0;
    ok = ok && fwrite(hdr, 1, nh, f) == nh;
    uint64_t hh = ok ? hash_of(hdr, nh) : 0;
    ok = ok && fwrite(&hh, 8, 1, f) == 1 && fwrite(zeros, 1, pad64(nh + 8) - nh - 8, f) == pad64(nh + 8) - nh - 8;
    free(hdr);
    for (int i = 0; ok && i < W->nsec; i++)
        for (int k = 0; ok && k < W->sec[i].n; k++) {
            const struct ic__art_piece *p = &W->sec[i].pc[k];
            ok = fwrite(p->p, 1, p->n, f) == p->n && fwrite(zeros, 1, pad64(p->n) - p->n, f) == pad64(p->n) - p->n;
        }
    return ok;
}

/* path written atomically: a temporary file beside it, then rename(2). */
ic_status ic__art_write(ic__art_writer *W)
{
    const char *step;
    int e = ic__write_atomic(W->path, write_all, W, IC__WRITE_SYNC, &step);
    return e ? ic__error(W->c, IC_EIO, "%s: %s: %s", W->path, step, strerror(e)) : IC_OK;
}

ic_status ic__art_image(ic__art_writer *W, char **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    FILE *f = open_memstream(out, n);
    bool ok = f && write_all(f, W);
    if (f)
        ok = fclose(f) == 0 && ok;
    if (!ok) {
        free(*out);
        *out = NULL;
        return ic__error(W->c, IC_ENOMEM, "%s: out of memory", W->path);
    }
    return IC_OK;
}

ic_status ic_compiled_save(const ic_compiled *cc, const char *path, bool with_weights)
{
    if (!cc || !path || !*path)
        return cc ? ic__error(cc->c, IC_EINVAL, "ic_compiled_save: no file name") : IC_EINVAL;
    ic__art_writer W = { .c = cc->c, .path = path };
    pthread_mutex_t *lock = (pthread_mutex_t *)&cc->lock; /* the variants must not change meanwhile */
    pthread_mutex_lock(lock);
    ic_status s = nsaved(cc) == 0
                      ? ic__error(cc->c, IC_EINVAL, "%s: '%s' has no compiled code yet (a graph with symbols "
                                  "compiles at its first ic_run)", path, ic_graph_name(cc->g))
                      : build_sections(&W, cc, with_weights);
    if (!s)
        s = ic__art_write(&W);
    pthread_mutex_unlock(lock);
    ic__art_writer_free(&W);
    return s;
}

/* ======================================================================================
 * Loading
 * ==================================================================================== */


bool ic__store_find(const ic__store *st, const char *key, const void **data, size_t *n)
{
    uint64_t h = ic__hash_bytes(IC__HASH_SEED, key, strlen(key));
    for (int i = 0; i < st->nobj; i++)
        if (st->obj[i].hash == h && strcmp(st->obj[i].key, key) == 0) {
            *data = st->obj[i].data;
            *n = st->obj[i].n;
            return true;
        }
    return false;
}

const ic_codegen_params *ic__store_variant(const ic__store *st, const int64_t *vals, int nsyms, int *nkernels,
                                           const char **target)
{
    for (int i = 0; i < st->nvar && nsyms == st->nsyms; i++)
        if (nsyms == 0 || memcmp(st->var[i].vals, vals, sizeof *vals * (size_t)nsyms) == 0) {
            *nkernels = st->var[i].nkernels;
            *target = st->var[i].target;
            return st->var[i].params;
        }
    return NULL;
}

void ic__artifact_free(ic__artifact *A)
{
    if (!A)
        return;
    ic_ctx *c = A->c;
    for (int i = 0; i < A->store.nvar; i++) {
        ic__free(c, A->store.var[i].vals);
        ic__free(c, A->store.var[i].target);
        ic__free(c, A->store.var[i].params);
    }
    for (int i = 0; i < A->store.nobj; i++)
        ic__free(c, A->store.obj[i].key);
    for (int i = 0; i < A->store.ngvar; i++) {
        ic__free(c, A->store.gvar[i].vals);
        ic__free(c, (void *)A->store.gvar[i].entry);
        ic__free(c, A->store.gvar[i].nentry);
    }
    ic__free(c, A->store.var);
    ic__free(c, A->store.obj);
    ic__free(c, A->store.gvar);
    ic_graph_destroy(A->g); /* borrows from parsed */
    ic_graph_destroy(A->parsed);
    ic__free(c, A->meta);
    if (A->map)
        munmap((void *)A->map, A->size);
    ic__free(c, A->path);
    ic__free(c, A);
}


ic_status ic__art_error(ic__artifact *A, ic_status code, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ic__error(A->c, code, "%s: %s", A->path, msg);
}

static ic_status map_file(ic__artifact *A)
{
    int fd = open(A->path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (fd < 0)
        return ic__art_error(A, IC_EIO, "cannot open: %s", strerror(errno));
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return ic__art_error(A, IC_EIO, "not a regular file");
    }
    A->size = (size_t)sb.st_size;
    void *p = A->size ? mmap(NULL, A->size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0) : MAP_FAILED;
    close(fd);
    if (A->size == 0)
        return BAD(A, "the file is empty: not a saved ic model");
    if (p == MAP_FAILED)
        return ic__art_error(A, IC_EIO, "cannot map: %s", strerror(errno));
    A->map = p;
    return IC_OK;
}

/* The magic and the section table (bounds and the table's own hash). */
static ic_status read_table(ic__artifact *A)
{
    if (A->size < 8 || memcmp(A->map, art_magic, 7) != 0)
        return BAD(A, "not a saved ic model (no ICMODEL header)");
    if (A->map[7] != art_magic[7])
        return BAD(A, "a saved ic model of format %c; this ic reads format %c", A->map[7], art_magic[7]);
    uint64_t nsec;
    if (A->size < 16)
        return BAD(A, "truncated: %zu bytes, the header alone needs more", A->size);
    memcpy(&nsec, A->map + 8, 8);
    if (nsec == 0 || nsec > MAX_SECTIONS)
        return BAD(A, "damaged header: %llu sections", (unsigned long long)nsec);
    size_t nh = header_bytes((int)nsec);
    if (A->size < nh)
        return BAD(A, "truncated: %zu bytes, the header alone needs %zu", A->size, nh);
    uint64_t hh;
    memcpy(&hh, A->map + nh - 8, 8);
    if (hh != hash_of(A->map, nh - 8))
        return BAD(A, "damaged header (checksum mismatch)");
    A->nsec = (int)nsec;
    for (int i = 0; i < A->nsec; i++) {
        const unsigned char *e = A->map + 16 + (size_t)i * SEC_ENTRY;
        uint64_t off;
        memcpy(A->sec[i].name, e, NAME_LEN);
        A->sec[i].name[NAME_LEN] = 0;
        memcpy(&off, e + NAME_LEN, 8);
        memcpy(&A->sec[i].bytes, e + NAME_LEN + 8, 8);
        memcpy(&A->sec[i].hash, e + NAME_LEN + 16, 8);
        if (off > A->size || A->sec[i].bytes > A->size - off)
            return BAD(A, "truncated: section '%s' ends at byte %llu of %zu", A->sec[i].name,
                       (unsigned long long)(off + A->sec[i].bytes), A->size);
        A->sec[i].p = A->map + off;
    }
    return IC_OK;
}

int ic__art_find_section(const ic__artifact *A, const char *name)
{
    for (int i = 0; i < A->nsec; i++)
        if (strcmp(A->sec[i].name, name) == 0)
            return i;
    return -1;
}

/* The value of meta line "key value" (up to the line's end) into buf; false when absent. */
bool ic__art_meta_get(const ic__artifact *A, const char *key, char *buf, size_t n)
{
    size_t kl = strlen(key);
    for (const char *l = A->meta; l && *l;) {
        const char *end = strchr(l, '\n');
        size_t len = end ? (size_t)(end - l) : strlen(l);
        if (len > kl && strncmp(l, key, kl) == 0 && l[kl] == ' ') {
            snprintf(buf, n, "%.*s", (int)(len - kl - 1), l + kl + 1);
            return true;
        }
        l = end ? end + 1 : NULL;
    }
    return false;
}

/* The meta section's device kind and versions against this ic: a file made for another kind
 * of device or by another ic or LLVM is refused by name of the mismatch. */
static ic_status check_meta(ic__artifact *A, const char *device, const char *loader)
{
    int m = ic__art_find_section(A, "meta");
    if (m < 0)
        return BAD(A, "damaged: no meta section");
    if (!(A->meta = ic__malloc(A->c, (size_t)A->sec[m].bytes + 1)))
        return ic__art_error(A, IC_ENOMEM, "out of memory");
    memcpy(A->meta, A->sec[m].p, (size_t)A->sec[m].bytes);
    A->meta[A->sec[m].bytes] = 0;
    char v[256], llvm[64], dev[64];
    llvm_version(llvm, sizeof llvm);
    if (!ic__art_meta_get(A, "ic", v, sizeof v) || !ic__art_meta_get(A, "device", dev, sizeof dev))
        return BAD(A, "damaged: the meta section lacks a field");
    if (strcmp(dev, device) != 0)
        return ic__art_error(A, IC_EUNSUPPORTED, "saved for device '%s'; %s loads models saved for '%s'", dev,
                             loader, device);
    if (strcmp(v, ic_version()) != 0)
        return ic__art_error(A, IC_EUNSUPPORTED, "saved by ic %s; this is ic %s (save it again with this version)",
                             v, ic_version());
    if (!ic__art_meta_get(A, "build", v, sizeof v) || strcmp(v, ic_build_id()) != 0)
        return ic__art_error(A, IC_EUNSUPPORTED, "saved by another build of ic %s (build %s; this is build %s): save "
                             "it again with this one", ic_version(), v, ic_build_id());
    if (!ic__art_meta_get(A, "llvm", v, sizeof v) || strcmp(v, llvm) != 0)
        return ic__art_error(A, IC_EUNSUPPORTED, "saved with LLVM %s; this ic uses LLVM %s", v, llvm);
    return IC_OK;
}

/* The CPU's part of the meta check: the target and CPU features the code needs. */
static ic_status check_cpu(ic__artifact *A, const void *arg)
{
    (void)arg;
    char triple[256], feat[8192], missing[2048], cpu[256];
    if (!ic__art_meta_get(A, "triple", triple, sizeof triple) || !ic__art_meta_get(A, "features", feat, sizeof feat) ||
        !ic__art_meta_get(A, "cpu", cpu, sizeof cpu))
        return BAD(A, "damaged: the meta section lacks a field");
    char *host_triple = LLVMGetDefaultTargetTriple(), *host_feat = LLVMGetHostCPUFeatures();
    ic_status s = IC_OK;
    if (strcmp(triple, host_triple) != 0)
        s = ic__art_error(A, IC_EUNSUPPORTED, "made for target %s; this host is %s", triple, host_triple);
    else if (missing_features(feat, host_feat, missing, sizeof missing))
        s = ic__art_error(A, IC_EUNSUPPORTED, "made for CPU '%s' with features this host lacks: %s", cpu, missing);
    LLVMDisposeMessage(host_triple);
    LLVMDisposeMessage(host_feat);
    return s;
}

static ic_status check_hashes(ic__artifact *A, const char *const *need, int nneed)
{
    for (int i = 0; i < A->nsec; i++) {
        uint64_t h;
        if (!section_hash(A->sec[i].p, (size_t)A->sec[i].bytes, &h))
            return ic__art_error(A, IC_ENOMEM, "out of memory");
        if (h != A->sec[i].hash)
            return BAD(A, "damaged: section '%s' does not match its checksum", A->sec[i].name);
    }
    for (int i = 0; i < nneed; i++)
        if (ic__art_find_section(A, need[i]) < 0)
            return BAD(A, "damaged: no %s section", need[i]);
    return IC_OK;
}

ic__art_rd ic__art_reader(const ic__artifact *A, const char *name)
{
    int i = ic__art_find_section(A, name);
    return (ic__art_rd){ A->sec[i].p, A->sec[i].p + A->sec[i].bytes };
}

bool ic__art_get32(ic__art_rd *r, uint32_t *v)
{
    if (r->end - r->p < 4)
        return false;
    memcpy(v, r->p, 4);
    r->p += 4;
    return true;
}

bool ic__art_get64(ic__art_rd *r, uint64_t *v)
{
    if (r->end - r->p < 8)
        return false;
    memcpy(v, r->p, 8);
    r->p += 8;
    return true;
}

/* A string: ic__malloc'd, NUL-terminated; NULL when malformed (or out of memory). */
char *ic__art_getstr(ic_ctx *c, ic__art_rd *r)
{
    uint32_t n;
    if (!ic__art_get32(r, &n) || (size_t)(r->end - r->p) < n || memchr(r->p, 0, n))
        return NULL;
    char *s = ic__malloc(c, (size_t)n + 1);
    if (s) {
        memcpy(s, r->p, n);
        s[n] = 0;
        r->p += n;
    }
    return s;
}

/* The data of param name in wdata: true and *p, *n; false when the file holds none. */
static ic_status find_weights(ic__artifact *A, const char *name, const void **p, size_t *n)
{
    ic__art_rd r = ic__art_reader(A, "weights");
    int d = ic__art_find_section(A, "wdata");
    uint32_t count;
    *p = NULL;
    if (!ic__art_get32(&r, &count))
        return BAD(A, "damaged weights table");
    for (uint32_t i = 0; i < count; i++) {
        uint64_t off, bytes;
        char *nm = ic__art_getstr(A->c, &r);
        bool ok = nm && ic__art_get64(&r, &off) && ic__art_get64(&r, &bytes) && off <= A->sec[d].bytes &&
                  bytes <= A->sec[d].bytes - off && off % ALIGN == 0;
        bool match = ok && strcmp(nm, name) == 0;
        ic__free(A->c, nm);
        if (!ok)
            return BAD(A, "damaged weights table");
        if (match) {
            *p = A->sec[d].p + off;
            *n = (size_t)bytes;
            return IC_OK;
        }
    }
    return IC_OK;
}

/* One node of parsed into A->g: a param the file holds gets its data from the mapping. */
static ic_status copy_node(ic__artifact *A, ic_value v, ic_value *map)
{
    ic_node_info ni;
    ic_graph_node(A->parsed, v, &ni);
    if (ni.op == IC_OP_PARAM && !ni.data) {
        const void *p;
        size_t n = 0;
        ic_status s = find_weights(A, ni.name, &p, &n);
        if (s)
            return s;
        if (p && n != param_bytes(&ni))
            return BAD(A, "param '%s': %zu bytes of weights for %zu", ni.name, n, param_bytes(&ni));
        ni.data = p;
    }
    return ic__graph_copy_node(A->g, &ni, map, &map[v]);
}

/* A->g: the graph's JSON, then its params' data from the file. */
static ic_status load_graph(ic__artifact *A)
{
    int gi = ic__art_find_section(A, "graph");
    char *text = ic__malloc(A->c, (size_t)A->sec[gi].bytes + 1);
    if (!text)
        return ic__art_error(A, IC_ENOMEM, "out of memory");
    memcpy(text, A->sec[gi].p, (size_t)A->sec[gi].bytes);
    text[A->sec[gi].bytes] = 0; /* the padding after the text is zeros: it ends there */
    ic_status s = ic_graph_load_json_string(A->c, text, NULL, &A->parsed);
    ic__free(A->c, text);
    if (s)
        return ic__art_error(A, s, "its graph: %s", ic_last_error(A->c));
    const ic_graph *p = A->parsed;
    if ((s = ic_graph_create(A->c, ic_graph_name(p), &A->g)) || (s = ic__graph_set_source(A->g, A->path)))
        return s;
    for (int i = 0; i < ic_graph_num_symbols(p) && !s; i++) {
        ic_dim d;
        s = ic_graph_symbol(A->g, ic_graph_symbol_name(p, i), &d);
    }
    ic_value *map = ic__calloc(A->c, (size_t)ic_graph_num_nodes(p) + 1, sizeof *map);
    if (!map)
        return ic__art_error(A, IC_ENOMEM, "out of memory");
    for (ic_value v = 0; v < ic_graph_num_nodes(p) && !s; v++)
        s = copy_node(A, v, map);
    for (int i = 0; i < ic_graph_num_outputs(p) && !s; i++)
        s = ic_graph_add_output(A->g, map[ic_graph_output(p, i)]);
    ic__free(A->c, map);
    return s ? s : ic_graph_verify(A->g);
}

static ic_status read_variant(ic__artifact *A, ic__art_rd *r, ic__art_svariant *sv)
{
    ic_ctx *c = A->c;
    uint32_t nsyms, nk;
    if (!ic__art_get32(r, &nsyms) || nsyms != (uint32_t)A->store.nsyms)
        return BAD(A, "damaged variants table (symbols)");
    if (!(sv->vals = ic__calloc(c, nsyms + 1, sizeof *sv->vals)))
        return ic__art_error(A, IC_ENOMEM, "out of memory");
    for (uint32_t i = 0; i < nsyms; i++)
        if (!ic__art_get64(r, (uint64_t *)&sv->vals[i]) || sv->vals[i] < 0)
            return BAD(A, "damaged variants table (values)");
    if (!(sv->target = ic__art_getstr(c, r)) || !ic__art_get32(r, &nk) || nk > 1u << 20)
        return BAD(A, "damaged variants table (target)");
    sv->nkernels = (int)nk;
    if (!(sv->params = ic__calloc(c, nk + 1, sizeof *sv->params)))
        return ic__art_error(A, IC_ENOMEM, "out of memory");
    for (uint32_t k = 0; k < nk; k++) {
        char *t = ic__art_getstr(c, r);
        bool ok = t && ic__cg_params_parse(t, &sv->params[k]);
        ic__free(c, t);
        if (!ok)
            return BAD(A, "damaged variants table (kernel %u's parameters)", k);
    }
    return IC_OK;
}

static ic_status load_store(ic__artifact *A)
{
    ic_ctx *c = A->c;
    ic__art_rd r = ic__art_reader(A, "variants");
    uint32_t nv, no;
    A->store.nsyms = ic_graph_num_symbols(A->g);
    if (!ic__art_get32(&r, &nv) || nv == 0 || nv > 1u << 16)
        return BAD(A, "damaged variants table");
    if (!(A->store.var = ic__calloc(c, nv, sizeof *A->store.var)))
        return ic__art_error(A, IC_ENOMEM, "out of memory");
    for (uint32_t i = 0; i < nv; i++) {
        A->store.nvar++;
        ic_status s = read_variant(A, &r, &A->store.var[i]);
        if (s)
            return s;
    }
    r = ic__art_reader(A, "objects");
    int d = ic__art_find_section(A, "odata");
    if (!ic__art_get32(&r, &no) || no > 1u << 20)
        return BAD(A, "damaged objects table");
    if (!(A->store.obj = ic__calloc(c, no + 1, sizeof *A->store.obj)))
        return ic__art_error(A, IC_ENOMEM, "out of memory");
    for (uint32_t i = 0; i < no; i++) {
        ic__art_sobject *o = &A->store.obj[A->store.nobj++];
        uint64_t off, bytes;
        if (!(o->key = ic__art_getstr(c, &r)) || !ic__art_get64(&r, &off) || !ic__art_get64(&r, &bytes) || off > A->sec[d].bytes ||
            bytes > A->sec[d].bytes - off || off % ALIGN != 0)
            return BAD(A, "damaged objects table");
        o->hash = ic__hash_bytes(IC__HASH_SEED, o->key, strlen(o->key));
        o->data = A->sec[d].p + off;
        o->n = (size_t)bytes;
    }
    return IC_OK;
}

/* The options the model was compiled with (meta "option" lines). */
static void load_options(const ic__artifact *A, ic_compile_options *o, char *mode, size_t nmode)
{
    char v[64];
    ic_compile_options_init(o);
#define OPT(name, field, type)                          \
    if (ic__art_meta_get(A, "option " #name, v, sizeof v))      \
        o->field = (type)strtoll(v, NULL, 10);
    OPT(fusion, fusion, int)
    OPT(threads, threads, int)
    OPT(vector_width, vector_width, int)
    OPT(serial_threshold, serial_threshold, int64_t)
    OPT(stream_bytes, stream_bytes, int64_t)
    OPT(prefetch_bytes, prefetch_bytes, int)
    OPT(freezing, freezing, int)
    OPT(max_variants, max_variants, int)
    OPT(autotune, autotune, int)
    OPT(cache, cache, int)
#undef OPT
    if (ic__art_meta_get(A, "mode", mode, nmode))
        o->mode = mode;
}

ic_status ic__art_open(ic_ctx *c, const char *path, const char *device, const char *loader,
                       const char *const *need, int nneed, ic__art_check_fn check, const void *arg,
                       ic__artifact **out)
{
    ic__artifact *A = *out = ic__calloc(c, 1, sizeof *A);
    if (!A || !(A->path = ic__strdup(c, path)))
        return ic__error(c, IC_ENOMEM, "%s: out of memory", path);
    A->c = c;
    ic_status s;
    if ((s = map_file(A)) || (s = read_table(A)) || (s = check_meta(A, device, loader)) || (s = check(A, arg)) ||
        (s = check_hashes(A, need, nneed)) || (s = load_graph(A)))
        return s;
    return IC_OK;
}

ic_status ic__compiled_artifact_open(ic_ctx *c, const char *path, ic__artifact **out)
{
    static const char *const need[] = { "meta", "graph", "weights", "wdata", "variants", "objects", "odata" };
    ic_status s = ic__art_open(c, path, "cpu", "ic_compiled_load", need, 7, check_cpu, NULL, out);
    return s ? s : load_store(*out);
}

ic_status ic_compiled_load(ic_ctx *c, const char *path, ic_compiled **out)
{
    if (!out)
        return ic__error(c, IC_EINVAL, "ic_compiled_load: out is NULL");
    *out = NULL;
    if (!path || !*path)
        return ic__error(c, IC_EINVAL, "ic_compiled_load: no file name");
    ic__artifact *A = NULL;
    ic_compiled *cc = NULL;
    ic_status s = ic__compiled_artifact_open(c, path, &A);
    ic_compile_options o;
    char mode[64] = "default";
    if (!s) {
        load_options(A, &o, mode, sizeof mode);
        s = ic__compiled_create(c, A->g, &o, &cc);
    }
    if (s) {
        ic__artifact_free(A);
        return s;
    }
    cc->art = A;
    cc->vc.pipe.store = &A->store;
    for (int i = 0; i < A->store.nvar && !s; i++) {
        ic__vbase *v;
        s = ic__vcache_get(&cc->vc, A->store.var[i].vals, &v);
    }
    if (s) {
        ic_compiled_destroy(cc);
        return s;
    }
    *out = cc;
    return IC_OK;
}

const ic_graph *ic_compiled_graph(const ic_compiled *cc)
{
    return cc ? cc->g : NULL;
}
