/* tune-impl.h - the backend-neutral autotuner (tune.c): how candidates of one kernel are timed
 * and compared, the time budget of a graph, the progress line, the AUTOTUNE table and tuning
 * records as text, shared by both tuners. A backend (CPU: tune_cpu.c; GPU: tune_cuda.c)
 * supplies the search space, compiles the candidates, runs one of them and checks a winner's
 * outputs; everything about deciding lives here.
 *
 *     ic__tune_graph G;                                 // one per compiled variant
 *     ic__tune_graph_init(&G, c, flags, budget_s, stats, nkernels, total_weight);
 *     for each selected kernel:
 *         ic__tune K;                                   // one per kernel
 *         ic__tune_begin(&K, &G, name, shape, weight, run_fn, arg);
 *         ic__tune_add(&K, "default params text")       // candidate 0 is always the default
 *         ... compile some candidates (ic__tune_add each), then
 *         ic__tune_race(&K, n, ids)                     // interleaved rounds, medians, early stop
 *         ... more chunks / coordinate descent while !ic__tune_out_of_time(&K)
 *         int w = ic__tune_winner(&K);                  // the default unless faster by the margin
 *         if (w && !ic__tune_confirm(&K, w)) ask ic__tune_winner again (a few times at most)
 *         the backend checks w's outputs against the default's; ic__tune_reject(&K, w) if wrong
 *         ic__tune_end(&K);                             // table (IC_AUTOTUNE_LOG), stats
 *     ic__tune_graph_end(&G);                           // clears the progress line
 *
 * Method. A race times a set of candidates together: one warm-up run each, then up to
 * IC__TUNE_ROUNDS rounds in which every live candidate runs once (a sample of `reps` calls,
 * reps set so the default's sample lasts about IC__TUNE_SAMPLE_MS), each round starting at
 * the next candidate so that no one is always first after another's cache state (a backend
 * that calibrates its own samples, as the GPU's per-candidate timed groups, sets K->reps = 1
 * after ic__tune_begin: its run function then returns ms per call and its first call of a
 * candidate is the warm-up); a
 * candidate's time in a race is the median of its samples, relative to the default's. After the first round a candidate slower
 * than 3x the best so far stops (early stop). The default takes part in every race, so the
 * margin test (a candidate replaces it only when faster by IC__TUNE_MARGIN) compares times of
 * the same rounds. Exhaustive (IC_TUNE_EXHAUSTIVE): no early stop and no budget.
 *
 * Budget. The graph's deadline is now + budget_s (0 = 60 s); each kernel gets a share of what
 * is left, by weight (a GEMM counts more than a pointwise kernel); compile and benchmark time
 * both count. A race that runs out of time keeps the samples it has (every candidate has at
 * least one: the first round always ends), and a backend does not start a batch of
 * candidates it expects to end past the deadline (ic__tune_left_ms).
 *
 * Test hooks (ic__tune_hooks): a timer that replaces measured times, a corruption predicate
 * the backend asks before comparing a winner's outputs, and a callback told each choice. */
#ifndef IC_TUNE_IMPL_H
#define IC_TUNE_IMPL_H

#include <stdio.h>
#include "graph-impl.h"
#include "ic/llvmgen.h"
#include "ic/runtime.h"

#define IC__TUNE_ROUNDS 5
#define IC__TUNE_MARGIN 0.03     /* a candidate replaces the default when 3% faster */
#define IC__TUNE_EARLY_STOP 3.0  /* stops a candidate slower than this times the best */
#define IC__TUNE_SAMPLE_MS 2.0   /* the default's sample lasts about this long */
#define IC__TUNE_DESC 192

/* One run of the graph's tuning: budget, progress, stats. */
typedef struct ic__tune_graph {
    ic_ctx *c;
    int flags;                /* IC_TUNE_* */
    bool exhaustive, log, tty;
    double t0, deadline;      /* ic__now_ms; deadline 0: none */
    double weight_left;       /* of the kernels not tuned yet */
    int nkernels, done;       /* for the progress line */
    ic_autotune_stats *stats; /* may be NULL */
    bool progress_shown;
    double progress_ms;       /* when the progress line was last written (ic__now_ms) */
} ic__tune_graph;

enum { IC__TC_NEW, IC__TC_TIMED, IC__TC_STOPPED, IC__TC_FAILED, IC__TC_REJECTED, IC__TC_UNCONFIRMED };

typedef struct ic__tune_cand {
    char desc[IC__TUNE_DESC]; /* the parameters as the table shows them */
    int state;                /* IC__TC_* */
    double ms;                /* its time at the default's speed (below) */
    int nsamples, races;
    double rel_sum;           /* sum over its races of its median / the default's */
    double last_rel;          /* that ratio in its last race */
} ic__tune_cand;

/* ms of `reps` back-to-back runs of candidate i (all together), < 0 when it cannot run. */
typedef double (*ic__tune_run_fn)(void *arg, int i, int reps);

/* One kernel's tuning. */
typedef struct ic__tune {
    ic__tune_graph *G;
    char kernel[96], shape[160];
    ic__tune_run_fn run;
    void *arg;
    ic__tune_cand *cand;
    int n, cap;
    int best;                 /* fastest candidate so far (0 before any race) */
    double def_sum;           /* the default's medians, summed over def_races races */
    int def_races;
    int reps;                 /* calls per sample, from the default's warm-up */
    double t0, deadline, weight, bench_ms, compile_ms;
    bool oom;
} ic__tune;

/* flags: the options' IC_TUNE_*; budget_s 0 = 60; stats (may be NULL) receive the counts. */
IC_HIDDEN void ic__tune_graph_init(ic__tune_graph *G, ic_ctx *c, int flags, double budget_s,
                                   ic_autotune_stats *stats, int nkernels, double total_weight);
IC_HIDDEN void ic__tune_graph_end(ic__tune_graph *G);

/* Starts kernel `name` (shape: text for the table, "(M=.., N=.., K=..)"), whose deadline is
 * its weight's share of the graph's time left. */
IC_HIDDEN void ic__tune_begin(ic__tune *K, ic__tune_graph *G, const char *name, const char *shape,
                              double weight, ic__tune_run_fn run, void *arg);
/* Adds a candidate; returns its index or -1 (out of memory). Index 0 is the default. */
IC_HIDDEN int ic__tune_add(ic__tune *K, const char *desc);
/* Whether the kernel's (or the graph's) time is up; never when exhaustive. */
IC_HIDDEN bool ic__tune_out_of_time(const ic__tune *K);
/* ms left to the kernel (INFINITY when exhaustive): a backend does not start a batch of
 * candidates that it expects to take longer. */
IC_HIDDEN double ic__tune_left_ms(const ic__tune *K);
/* Times candidates ids[0..n) (0 is added when absent) in interleaved rounds. Races differ in
 * what else runs on the machine, so a candidate's time is kept relative to the default's in
 * the same race: its `ms` is the mean of those ratios times the default's mean time. Sets
 * K->best, the fastest candidate of all races so far, and returns it. */
IC_HIDDEN int ic__tune_race(ic__tune *K, int n, const int *ids);
/* The candidate to take: K->best when its time beats the default's by the margin, else 0. */
IC_HIDDEN int ic__tune_winner(const ic__tune *K);
/* Races the winner w once more against the default: true when it beats the default by the
 * margin in that race alone. Else it is out of the running (the best of hundreds of noisy
 * times is optimistic: the winner's curse) and K->best becomes the next fastest. */
IC_HIDDEN bool ic__tune_confirm(ic__tune *K, int w);
/* Marks candidate i (its outputs wrong, or its code failed) out of the running: K->best becomes
 * the next fastest. */
IC_HIDDEN void ic__tune_reject(ic__tune *K, int i);
/* Counts compile time (ms) spent on candidates. */
IC_HIDDEN void ic__tune_compiled(ic__tune *K, int ncand, double ms);
/* Ends the kernel. chosen >= 0: the candidate taken after a search (the AUTOTUNE table when
 * logging; stats tuned, replaced when chosen != 0, seconds); -1: answered by a tuning record
 * (stats record_hits; the backend has described the record's parameters in candidate 0's
 * desc). Frees the candidates. */
IC_HIDDEN void ic__tune_end(ic__tune *K, int chosen);
/* Ends the kernel without a choice (the backend could not tune it): the default stays. */
IC_HIDDEN void ic__tune_skip(ic__tune *K);
/* Prints the AUTOTUNE table of K (candidates sorted by time, % of the best) to f. */
IC_HIDDEN void ic__tune_print_table(FILE *f, const ic__tune *K, int chosen);

/* ---- tuning records: the winner of one kernel, as the persistent cache stores it ---- */

typedef struct ic__tune_record {
    char params[1024];        /* the backend's parameter text */
    double ms, default_ms;
} ic__tune_record;

/* "params <text>\nms <t>\ndefault_ms <t>\n" into buf (n bytes); false when it does not fit. */
IC_HIDDEN bool ic__tune_record_format(const ic__tune_record *r, char *buf, size_t n);
/* Parses n bytes of that text; false when malformed. */
IC_HIDDEN bool ic__tune_record_parse(const char *text, size_t n, ic__tune_record *r);

/* ---- test hooks (unit tests only; NULL fields: none) ---- */

typedef struct ic__tune_hooks {
    void *user;
    /* the time of one sample of candidate cand of kernel (ms per call) instead of `measured`;
     * a negative return keeps `measured` */
    double (*time)(void *user, const char *kernel, int cand, const char *desc, double measured);
    /* whether the backend must spoil candidate cand's outputs before comparing them */
    bool (*corrupt)(void *user, const char *kernel, int cand, const char *desc);
    /* told the candidate taken for kernel (0: the default; -1: a tuning record's parameters,
     * desc then the record's, as the backend describes them in candidate 0's desc) */
    void (*chosen)(void *user, const char *kernel, int cand, const char *desc);
} ic__tune_hooks;

/* Installs hooks process-wide (NULL removes them). Not thread-safe: tests set them before
 * compiling. */
IC_HIDDEN void ic__tune_set_hooks(const ic__tune_hooks *h);
IC_HIDDEN bool ic__tune_corrupt(const ic__tune *K, int i);

/* ---- the backends' tuners ---- */

typedef struct ic__pipe ic__pipe;
/* CPU (tune_cpu.c): params[k] of every kernel selected by the options' autotune flags become
 * the tuned ones (a record's or a search's); kernels that run another's code (code[k] != k)
 * take that kernel's params. Only running out of memory is an error. */
IC_HIDDEN ic_status ic__tune_cpu(ic__pipe *P, const ic_program *prog, const ic_codegen_target *t,
                                 const int *code, ic_codegen_params *params);

/* Both backends check a tuned winner's outputs against the default's the same way:
 * got[0..n) matches want within dtype t's tolerance (for sums in other orders: split-K, other
 * tile depths, other unrolls), |g - w| <= rtol |w| + atol max(1, max|w|); integers bit for
 * bit; NaN only where want has NaN, infinities equal. */
IC_HIDDEN bool ic__tune_close(ic_dtype t, int64_t n, const void *want, const void *got);

#endif
