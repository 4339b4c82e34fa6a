/* testutil.h - helpers shared by the unit tests: temporary folders and files, graph
 * shorthands (shapes written as strings), and an allclose with the spec's tolerances.
 *
 *     const char *dir = ict_tmpdir();                 // fresh folder, remove with ict_rmtree
 *     ic_ctx *c = ict_ctx();                          // asserts on failure
 *     ic_graph *g = ict_graph(c, "t");
 *     ic_value a = ict_input(g, "a", IC_F32, "B,128,768");
 *     ict_assert_shape(g, v, "[128*B, 768]");        // compares ic_graph_shape_str text
 *     ict_assert_allclose(&got, &want);               // per-dtype rtol/atol, prints worst
 *
 * Everything here asserts (Criterion) on internal failure, so tests stay short. Strings
 * returned as const char * live in rotating static buffers: copy them if you keep many.
 */
#ifndef IC_TESTUTIL_H
#define IC_TESTUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <criterion/criterion.h>
#include "ic/ic.h"

/* ---- files ---- */

/* Creates a fresh private folder under $TMPDIR (or /tmp). Rotating static buffer. */
const char *ict_tmpdir(void);
/* Removes a folder and everything in it (best effort; restores write permission first). */
void ict_rmtree(const char *dir);
/* "dir/name" in a rotating static buffer (8 slots). */
const char *ict_path(const char *dir, const char *name);
/* Writes n bytes to path (creating or truncating); asserts on failure. */
void ict_write_file(const char *path, const void *data, size_t n);
/* Reads a whole file into malloc'd memory (caller frees); NULL if it cannot be read. */
void *ict_read_file(const char *path, size_t *n);
/* A NUL-terminated malloc'd copy of the n bytes at p (file contents have no NUL of their own:
 * strndup would read one past them); NULL on OOM. */
char *ict_text(const void *p, size_t n);
/* Entries in dir other than . and .. (-1 if it cannot be read). */
int ict_count_files(const char *dir);

/* ---- context and graphs ---- */

/* A context with the default allocator; asserts on failure. */
ic_ctx *ict_ctx(void);
/* ic_compile_dump's text of g at stage (o: NULL = defaults), malloc'd; asserts on failure. */
char *ict_compile_dump(ic_ctx *c, const ic_graph *g, const ic_compile_options *o, const char *stage);
/* A new graph; asserts on failure. */
ic_graph *ict_graph(ic_ctx *c, const char *name);
/* Parses "2,3", "[B, 128, 768]", "" or "[]" (a scalar) into dims; symbols are created in g.
 * Returns the rank. Asserts on a malformed string. */
int ict_shape(ic_graph *g, const char *text, ic_dim *dims);
/* Adds an input / a run-time param with the shape written as text; asserts on failure. */
ic_value ict_input(ic_graph *g, const char *name, ic_dtype dt, const char *shape);
ic_value ict_param(ic_graph *g, const char *name, ic_dtype dt, const char *shape);
/* The inferred shape of v as text ("[128*B, 768]"), in a rotating static buffer. */
const char *ict_shape_of(const ic_graph *g, ic_value v);
ic_dtype ict_dtype_of(const ic_graph *g, ic_value v);

#define ict_assert_shape(g, v, want)                                                       \
    do {                                                                                   \
        const char *ict_got_ = ict_shape_of((g), (v));                                      \
        cr_assert_str_eq(ict_got_, (want), "shape of node %d: got %s, want %s", (int)(v),  \
                         ict_got_, (want));                                                \
    } while (0)

#define ict_assert_dtype(g, v, want)                                                       \
    do {                                                                                   \
        ic_dtype ict_got_ = ict_dtype_of((g), (v));                                         \
        cr_assert_eq(ict_got_, (want), "dtype of node %d: got %s, want %s", (int)(v),      \
                     ic_dtype_name(ict_got_), ic_dtype_name(want));                        \
    } while (0)

/* Asserts that status s is want and that the context's message contains every one of the
 * given substrings (NULL-terminated list), printing the message when it does not. */
void ict_assert_error_(ic_ctx *c, ic_status s, ic_status want, const char *const *parts,
                       const char *file, int line);
#define ict_assert_error(c, s, want, ...)                                                  \
    ict_assert_error_((c), (s), (want), (const char *const[]){ __VA_ARGS__, NULL },        \
                      __FILE__, __LINE__)

/* ---- numerics ---- */

/* The spec's tolerances: f64 1e-7/1e-7, f32 1e-4/1e-5, f16 1e-3/1e-3, bf16 1.6e-2/1e-2,
 * integers and bool exact (0/0). */
void ict_tol(ic_dtype dt, double *rtol, double *atol);
/* Element i (row-major logical index, strides honoured) as double / as exact int64. */
double ict_get_f(const ic_tensor *t, int64_t i);
int64_t ict_get_i(const ic_tensor *t, int64_t i);
/* torch.allclose-style check |got - want| <= atol + rtol * |want| with the tolerances of
 * want's dtype (NaN matches NaN, infinities must match exactly). Same shape required.
 * On failure writes "N of M elements differ; worst at [i,j] (flat k): got X, want Y, ..."
 * into msg (may be NULL) and returns false. */
bool ict_allclose(const ic_tensor *got, const ic_tensor *want, char *msg, size_t n);
bool ict_allclose_tol(const ic_tensor *got, const ic_tensor *want, double rtol, double atol,
                      char *msg, size_t n);

#define ict_assert_allclose(got, want)                                                     \
    do {                                                                                   \
        char ict_msg_[1024];                                                               \
        cr_assert(ict_allclose((got), (want), ict_msg_, sizeof ict_msg_), "%s", ict_msg_); \
    } while (0)

#endif
