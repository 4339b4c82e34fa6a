/* cli.h - helpers shared by the command-line tools (ic-run, ic-dump): one-line error
 * messages, strict number parsing, --bind, deterministic generated data, reading run-time
 * arguments from .safetensors, output statistics and saving.
 *
 * These are tool code, not library API: every helper that can fail prints nothing itself but
 * writes one line into a caller buffer (cli_err) and returns false, so main() decides how to
 * report it ("ic-run: <message>", exit 1). */
#ifndef IC_TOOLS_CLI_H
#define IC_TOOLS_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "ic/ic.h"

#define CLI_ERRMAX 2048
#define CLI_MAX_BINDS 64

/* One error message, one line. */
typedef struct { char msg[CLI_ERRMAX]; } cli_err;

/* Formats into e and returns false, so helpers can `return cli_fail(e, ...)`. */
bool cli_fail(cli_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Copies the context's last library error into e (prefix may be NULL) and returns false. */
bool cli_fail_ctx(cli_err *e, ic_ctx *c, const char *prefix);
/* Prints "<tool>: <msg>" on stderr as exactly one line (embedded newlines become spaces). */
void cli_report(const char *tool, const char *msg);

/* Strict integer parsing: the whole string, no overflow. */
bool cli_parse_i64(const char *s, int64_t *out);
bool cli_parse_u64(const char *s, uint64_t *out);

/* Option values: accepts "--opt VALUE" and "--opt=VALUE". Returns true when argv[*i] is
 * `name`; *val is then the value (or NULL with an error in e when it is missing), and *i
 * is advanced past a separate value. */
bool cli_opt(int argc, char **argv, int *i, const char *name, const char **val, cli_err *e);

/* --bind SYM=N, parsed but not yet applied (the graph is loaded after the options). */
typedef struct { char sym[256]; int64_t value; } cli_bind;
bool cli_parse_bind(const char *s, cli_bind *out, cli_err *e);

/* Loads a graph file; on failure e holds the loader's message (it names the file). */
bool cli_load_graph(ic_ctx *c, const char *path, ic_graph **out, cli_err *e);

/* True when a and b name the same existing file (same device and inode). */
bool cli_same_file(const char *a, const char *b);

/* Monotonic seconds, for timing runs. */
double cli_now(void);

/* ---- deterministic data (documented in README.md, "Generated data") ----
 * Each generated argument draws from its own splitmix64 stream, seeded with
 * seed ^ fnv1a64(argument name), so a value does not depend on which other arguments were
 * supplied or on their order. Floats: k / 2^(p-1) - 1 with k uniform over p bits (p = the
 * dtype's significand precision: f64 53, f32 24, f16 11, bf16 8), i.e. uniform in [-1, 1) and
 * exactly representable. Integers: lo + (x mod (hi - lo)) over the input's "range" [lo, hi),
 * default [0, 10) (u8 i8 i16: their whole range, so wraparound is exercised). bool: the
 * top bit. */
uint64_t cli_splitmix64(uint64_t *state);
uint64_t cli_fnv1a64(const char *s);
/* Fills t (allocated, contiguous) from stream (seed, name). lo/hi used for integer dtypes. */
void cli_fill_random(ic_tensor *t, uint64_t seed, const char *name, int64_t lo, int64_t hi);

/* ---- run-time arguments ----
 * args[i] follows ic_graph_arg order; every tensor is owned (allocated, 64-byte aligned),
 * including those copied from --inputs, so executors never see unaligned mmap data. */
typedef struct {
    int n;
    ic_tensor *t;
    bool *supplied;     /* true: read from the inputs file; false: generated */
    int64_t *vals;      /* symbol values, one per graph symbol (-1 = unbound) */
} cli_args;

/* Reads every tensor of inputs_path (may be NULL) into args by name, applies binds, binds the
 * remaining symbols from the supplied tensors, checks that every symbol is bound and
 * generates the missing arguments from seed. Validated by ic_runtime_bind_args at the end. */
bool cli_args_prepare(ic_ctx *c, const ic_graph *g, const char *inputs_path, const cli_bind *binds,
                      int nbinds, uint64_t seed, cli_args *out, cli_err *e);
void cli_args_free(ic_ctx *c, cli_args *a);

/* Output statistics over all elements (NaNs counted apart, not in min/max/mean). */
typedef struct { double min, max, mean; int64_t n, nan; } cli_stats;
void cli_tensor_stats(const ic_tensor *t, cli_stats *out);
/* "[16384, 512]" for a concrete tensor. */
const char *cli_shape_str(const ic_tensor *t, char *buf, size_t n);

/* Saves the graph's outputs by output name (an output listed twice is saved once). */
bool cli_save_outputs(ic_ctx *c, const ic_graph *g, const char *path, int nouts,
                      const ic_tensor *outs, cli_err *e);

/* Refuses to write `out` over the graph, the inputs file or (g not NULL) a weights file of the
 * graph. With g NULL (before loading) it also refuses a folder or a missing parent folder, so
 * a bad path fails before a long run rather than after it. */
bool cli_check_not_input(const ic_graph *g, const char *graph_path, const char *inputs_path,
                         const char *out, cli_err *e);

/* ---- comparing outputs (ic-run --check / --expect) ----
 * The spec's tolerances: f64 rtol 1e-7 atol 1e-7, f32 1e-4 / 1e-5, f16 1e-3 / 1e-3,
 * bf16 1.6e-2 / 1e-2; integers and bool exact (0 / 0). An element passes when
 * |got - want| <= atol + rtol * |want|, when both are NaN, or when both are the same infinity. */
void cli_tol(ic_dtype dt, double *rtol, double *atol);

typedef struct {
    bool same_shape;       /* dtype, rank and sizes agree (nothing else is filled otherwise) */
    int64_t nelem, nbad;   /* elements compared / beyond the tolerance */
    int64_t worst;         /* flat (row-major) index of the worst element; -1 when empty */
    double worst_excess;   /* |got - want| / (atol + rtol |want|) there (floats); > 1 fails */
    double rtol, atol;
    char got[64], want[64];/* the values at `worst`, printed in the dtype's precision */
} cli_cmp;

/* Compares got with want element by element; true when every element passes. */
bool cli_compare(const ic_tensor *got, const ic_tensor *want, cli_cmp *out);
/* "[3, 17]": the multi-index of flat index `flat` in t's shape. */
const char *cli_index_str(const ic_tensor *t, int64_t flat, char *buf, size_t n);
/* One line naming the backend, the output and the worst element ("compiled: output 'y' f32
 * [4, 4]: 2 of 16 elements differ ...; worst at [1, 2] (flat 6): got 1.5, expected 2.5").
 * Returns true (and writes nothing useful) when r says everything matched. */
bool cli_mismatch_msg(const char *backend, const char *output, const ic_tensor *got,
                      const ic_tensor *want, const cli_cmp *r, char *buf, size_t n);

/* ---- library log messages ----
 * Installs a log callback on c that prints "<tool>: <message>" on stderr for every message of
 * level <= the context's IC_DEBUG switch (unset = 0: infos such as a debug folder that cannot be made; 1 adds the
 * debug messages, e.g. per-stage compile times). */
void cli_log_init(ic_ctx *c, const char *tool);

#endif
