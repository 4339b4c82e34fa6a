/* artifact-impl.h - the container of saved compiled models (artifact.c), shared by the CPU's
 * ic_compiled_save / ic_compiled_load (artifact.c) and the GPU's ic_cuda_compiled_save /
 * ic_cuda_compiled_load (cuda_artifact.c): one file of named, checksummed sections at 64-byte
 * offsets (the layout: artifact.c's head comment). Both backends write the same "meta" lines
 * for versions (ic__art_meta_versions) and the same "graph", "weights" and "wdata" sections
 * (ic__art_graph_sections); each adds its own code sections. Loading checks the magic, the
 * section table, the meta section (device kind and versions first, then the backend's own
 * check), every section's hash, then rebuilds the graph with its weights from the mapping. */
#ifndef IC_ARTIFACT_IMPL_H
#define IC_ARTIFACT_IMPL_H

#include <stdio.h>
#include <string.h>
#include "pipeline-impl.h"

enum { IC__ART_ALIGN = 64, IC__ART_NAME_LEN = 24, IC__ART_MAX_SECTIONS = 16 };

/* ---- writing ---- */

/* One section being written: its pieces, each placed at a 64-byte offset. */
typedef struct ic__art_wsec {
    char name[IC__ART_NAME_LEN];
    int n, cap;
    struct ic__art_piece { const void *p; size_t n; } *pc; /* [n] borrowed (or owned below) */
    char *owned;              /* a text/table section's bytes (open_memstream) */
    size_t nowned;
    uint64_t offset, bytes, hash;
} ic__art_wsec;

typedef struct ic__art_writer {
    ic_ctx *c;
    const char *path;
    ic__art_wsec sec[IC__ART_MAX_SECTIONS];
    int nsec;
} ic__art_writer;

/* A section made of one memstream's bytes: f is written by fill, then closed into it. */
typedef ic_status (*ic__art_fill_fn)(ic__art_writer *W, FILE *f, const void *arg);

IC_HIDDEN ic_status ic__art_text_section(ic__art_writer *W, const char *name, ic__art_fill_fn fill,
                                         const void *arg);
/* Appends bytes p[0..n) (borrowed until the file is written) to data section x. */
IC_HIDDEN bool ic__art_add_piece(ic__art_writer *W, ic__art_wsec *x, const void *p, size_t n);
/* The offset piece i of x will have in its section (i == x->n: the next one's). */
IC_HIDDEN uint64_t ic__art_piece_offset(const ic__art_wsec *x, int i);
/* Appends data (a section a table's fill filled: zeroed, so it can be reused) as section name. */
IC_HIDDEN void ic__art_add_data_section(ic__art_writer *W, ic__art_wsec *data, const char *name);
/* The "ic", "build" and "llvm" meta lines: what every artifact must match to load. */
IC_HIDDEN void ic__art_meta_versions(FILE *f);
/* The sections "graph" (g's JSON), "weights" (the table) and "wdata" (the params' data). */
IC_HIDDEN ic_status ic__art_graph_sections(ic__art_writer *W, const ic_graph *g, bool with_weights);
/* W's sections into W->path, atomically (a temporary file beside it, then rename). */
IC_HIDDEN ic_status ic__art_write(ic__art_writer *W);
IC_HIDDEN void ic__art_writer_free(ic__art_writer *W);
/* W's sections as the whole file's bytes in memory (malloc'd into *out, *n bytes), as
 * ic__art_write would write them: for the fuzz harnesses, which seal mutated sections. */
IC_HIDDEN ic_status ic__art_image(ic__art_writer *W, char **out, size_t *n);

static inline void ic__art_put32(FILE *f, uint32_t v) { fwrite(&v, 4, 1, f); }
static inline void ic__art_put64(FILE *f, uint64_t v) { fwrite(&v, 8, 1, f); }
static inline void ic__art_putstr(FILE *f, const char *s)
{
    ic__art_put32(f, (uint32_t)strlen(s));
    fputs(s, f);
}

/* ---- loading ---- */

typedef struct ic__artifact ic__artifact;
/* Frees what ic__art_open made (after the variants that use its store). */
IC_HIDDEN void ic__artifact_free(ic__artifact *A);

typedef struct {
    int64_t *vals;
    char *target;
    int nkernels;
    ic_codegen_params *params;
} ic__art_svariant;

typedef struct {
    char *key;
    uint64_t hash;
    const void *data;
    size_t n;
} ic__art_sobject;

/* A GPU variant: its symbol values and each kernel's entry (gpu_cache.c's format: launch
 * data, PTX, cubin) inside the mapping. */
typedef struct {
    int64_t *vals;
    int nkernels;
    const void **entry;       /* [nkernels] */
    size_t *nentry;           /* [nkernels] */
} ic__art_gvariant;

struct ic__store {
    ic__art_svariant *var;    /* CPU */
    int nvar, nsyms;
    ic__art_sobject *obj;
    int nobj;
    ic__art_gvariant *gvar;   /* GPU */
    int ngvar;
};

struct ic__artifact {
    ic_ctx *c;
    char *path;
    const unsigned char *map;
    size_t size;
    struct { char name[IC__ART_NAME_LEN + 1]; const unsigned char *p; uint64_t bytes, hash; }
        sec[IC__ART_MAX_SECTIONS];
    int nsec;
    char *meta;               /* the meta section as a string */
    ic_graph *parsed;         /* the graph as its JSON loads (params the file holds: no data) */
    ic_graph *g;              /* with those params' data from the mapping (borrows parsed) */
    ic__store store;
};

/* The backend's check of the meta section, after the device kind and the versions. */
typedef ic_status (*ic__art_check_fn)(ic__artifact *A, const void *arg);

/* Opens path as an artifact for device kind `device` ("cpu", "cuda"; the loader is named by
 * `loader` in the refusal) whose sections include need[0..nneed): mapped, its table, meta
 * (device, versions, then check(A, arg)) and hashes checked, its graph rebuilt (A->g). *out
 * is set also on failure (ic__artifact_free it). */
IC_HIDDEN ic_status ic__art_open(ic_ctx *c, const char *path, const char *device, const char *loader,
                                 const char *const *need, int nneed, ic__art_check_fn check, const void *arg,
                                 ic__artifact **out);
/* The parsing layer of ic_compiled_load (artifact.c) and ic_cuda_compiled_load
 * (cuda_artifact.c): the file opened and checked as above, its graph rebuilt and its code
 * tables read into A->store, up to (not including) linking or loading any code. *out is set
 * also on failure (ic__artifact_free it). */
IC_HIDDEN ic_status ic__compiled_artifact_open(ic_ctx *c, const char *path, ic__artifact **out);
IC_HIDDEN ic_status ic__cuda_artifact_open(ic_cuda *d, const char *path, ic__artifact **out);
/* The value of meta line "key value" (up to the line's end) into buf; false when absent. */
IC_HIDDEN bool ic__art_meta_get(const ic__artifact *A, const char *key, char *buf, size_t n);
/* "<path>: <message>" as the context's error; returns code. */
IC_HIDDEN ic_status ic__art_error(ic__artifact *A, ic_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#define IC__ART_BAD(A, ...) ic__art_error((A), IC_EFORMAT, __VA_ARGS__)

/* A bounded reader of a table section. */
typedef struct {
    const unsigned char *p, *end;
} ic__art_rd;

IC_HIDDEN int ic__art_find_section(const ic__artifact *A, const char *name);
IC_HIDDEN ic__art_rd ic__art_reader(const ic__artifact *A, const char *name);
IC_HIDDEN bool ic__art_get32(ic__art_rd *r, uint32_t *v);
IC_HIDDEN bool ic__art_get64(ic__art_rd *r, uint64_t *v);
/* A string: ic__malloc'd, NUL-terminated; NULL when malformed (or out of memory). */
IC_HIDDEN char *ic__art_getstr(ic_ctx *c, ic__art_rd *r);

#endif
