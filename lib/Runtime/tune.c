/* tune.c - the backend-neutral autotuner: races of candidates (interleaved rounds, medians,
 * early stop), the margin rule, the budget, the progress line, the AUTOTUNE table and the
 * tuning records' text (tune-impl.h says how a backend uses it). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "tune-impl.h"
#include "pipeline-impl.h"

static ic__tune_hooks hooks;

void ic__tune_set_hooks(const ic__tune_hooks *h)
{
    if (h)
        hooks = *h;
    else
        memset(&hooks, 0, sizeof hooks);
}

bool ic__tune_corrupt(const ic__tune *K, int i)
{
    return hooks.corrupt && hooks.corrupt(hooks.user, K->kernel, i, K->cand[i].desc);
}

/* ---- the graph ---- */

void ic__tune_graph_init(ic__tune_graph *G, ic_ctx *c, int flags, double budget_s, ic_autotune_stats *stats,
                         int nkernels, double total_weight)
{
    memset(G, 0, sizeof *G);
    G->c = c;
    G->flags = flags;
    G->exhaustive = flags & IC_TUNE_EXHAUSTIVE;
    G->log = c->sw.autotune_log;
    G->tty = isatty(STDERR_FILENO);
    G->t0 = ic__now_ms();
    G->deadline = G->exhaustive ? 0 : G->t0 + 1e3 * (budget_s > 0 ? budget_s : 60.0);
    G->weight_left = total_weight;
    G->nkernels = nkernels;
    G->stats = stats;
}

void ic__tune_graph_end(ic__tune_graph *G)
{
    if (G->progress_shown)
        fputs("\r\033[K", stderr);
    G->progress_shown = false;
}

/* "autotune kernel 3/12 cpu_linear_0: 5 candidates, best 1.23 ms (default 1.40), 41 s left",
 * rewritten in place; at most ten times a second. */
static void progress(ic__tune *K, int done, int total)
{
    ic__tune_graph *G = K->G;
    double now = ic__now_ms();
    if (!G->tty || (now - G->progress_ms < 100 && done < total))
        return;
    G->progress_ms = now;
    char left[32] = "no budget";
    if (G->deadline)
        snprintf(left, sizeof left, "%.0f s left", fmax(0, (G->deadline - now) / 1e3));
    fprintf(stderr, "\r\033[Kautotune kernel %d/%d %s: %d/%d timed, best %.3f ms (default %.3f), %s",
            G->done + 1, G->nkernels, K->kernel, done, total, K->cand[K->best].ms, K->cand[0].ms, left);
    fflush(stderr);
    G->progress_shown = true;
}

/* ---- one kernel ---- */

void ic__tune_begin(ic__tune *K, ic__tune_graph *G, const char *name, const char *shape, double weight,
                    ic__tune_run_fn run, void *arg)
{
    memset(K, 0, sizeof *K);
    K->G = G;
    snprintf(K->kernel, sizeof K->kernel, "%s", name ? name : "?");
    snprintf(K->shape, sizeof K->shape, "%s", shape ? shape : "");
    K->run = run, K->arg = arg;
    K->weight = weight;
    K->t0 = ic__now_ms();
    if (G->deadline) {
        double left = fmax(0, G->deadline - K->t0);
        K->deadline = K->t0 + (G->weight_left > 0 ? left * weight / G->weight_left : left);
    }
}

int ic__tune_add(ic__tune *K, const char *desc)
{
    if (K->n == K->cap) {
        int cap = K->cap ? 2 * K->cap : 32;
        ic__tune_cand *p = ic__realloc(K->G->c, K->cand, sizeof *p * (size_t)cap);
        if (!p) {
            K->oom = true;
            return -1;
        }
        K->cand = p, K->cap = cap;
    }
    ic__tune_cand *t = &K->cand[K->n];
    memset(t, 0, sizeof *t);
    snprintf(t->desc, sizeof t->desc, "%s", desc);
    return K->n++;
}

bool ic__tune_out_of_time(const ic__tune *K)
{
    return ic__tune_left_ms(K) <= 0;
}

double ic__tune_left_ms(const ic__tune *K)
{
    return K->deadline ? K->deadline - ic__now_ms() : INFINITY;
}

void ic__tune_compiled(ic__tune *K, int ncand, double ms)
{
    K->compile_ms += ms;
    if (K->G->stats)
        K->G->stats->candidates += ncand;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* One sample of candidate i: ms per call (the hook's when it rigs the timer), < 0 failed. */
static double sample(ic__tune *K, int i)
{
    double t0 = ic__now_ms();
    double ms = K->run(K->arg, i, K->reps);
    K->bench_ms += ic__now_ms() - t0;
    if (ms < 0)
        return ms;
    ms /= K->reps;
    if (hooks.time) {
        double h = hooks.time(hooks.user, K->kernel, i, K->cand[i].desc, ms);
        ms = h >= 0 ? h : ms;
    }
    return ms;
}

/* Warm-up: one run of each (code and data into the caches); the default's time sets the
 * calls per sample. Candidates that cannot run fail here. */
static void warm_up(ic__tune *K, int n, const int *ids)
{
    for (int j = 0; j < n; j++) {
        int i = ids[j];
        double t0 = ic__now_ms();
        double ms = K->run(K->arg, i, 1);
        K->bench_ms += ic__now_ms() - t0;
        if (ms < 0)
            K->cand[i].state = IC__TC_FAILED;
        if (i == 0 && !K->reps)
            K->reps = ms > 0 ? (int)fmin(1000, fmax(1, ceil(IC__TUNE_SAMPLE_MS / ms))) : 1;
    }
}

/* The best median among the live candidates with samples (for the early stop). */
static double best_so_far(const ic__tune *K, int n, const int *ids, double (*s)[IC__TUNE_ROUNDS],
                          const int *ns)
{
    double best = INFINITY;
    for (int j = 0; j < n; j++) {
        if (!ns[j] || K->cand[ids[j]].state != IC__TC_NEW)
            continue;
        double v[IC__TUNE_ROUNDS];
        memcpy(v, s[j], sizeof v);
        best = fmin(best, median(v, ns[j]));
    }
    return best;
}

/* The rounds: every live candidate once per round, starting one further each round. */
static void rounds(ic__tune *K, int n, const int *ids, double (*s)[IC__TUNE_ROUNDS], int *ns)
{
    bool early = !K->G->exhaustive;
    for (int r = 0; r < IC__TUNE_ROUNDS; r++) {
        for (int q = 0; q < n; q++) {
            int j = (q + r) % n, i = ids[j];
            if (K->cand[i].state != IC__TC_NEW || (r > 0 && ic__tune_out_of_time(K) && ns[j]))
                continue;
            double ms = sample(K, i);
            if (ms < 0)
                K->cand[i].state = IC__TC_FAILED;
            else
                s[j][ns[j]++] = ms;
            progress(K, r * n + q + 1, IC__TUNE_ROUNDS * n);
        }
        if (r == 0 && early) {
            double best = best_so_far(K, n, ids, s, ns);
            for (int j = 0; j < n; j++)
                if (ids[j] && ns[j] && s[j][0] > IC__TUNE_EARLY_STOP * best)
                    K->cand[ids[j]].state = IC__TC_STOPPED;
        }
        if (ic__tune_out_of_time(K))
            break;
    }
}

/* Times of every candidate at the default's speed: its mean time relative to the default's
 * in the races it ran in (the default runs in each), times the default's mean; K->best the
 * fastest still in the running. */
static void pick_best(ic__tune *K)
{
    double dms = K->def_races ? K->def_sum / K->def_races : 0, best = INFINITY;
    K->best = 0;
    for (int i = 0; i < K->n; i++) {
        ic__tune_cand *t = &K->cand[i];
        if (!t->races)
            continue;
        t->ms = t->rel_sum / t->races * dms;
        if (t->state == IC__TC_TIMED && t->ms < best)
            best = t->ms, K->best = i;
    }
}

int ic__tune_race(ic__tune *K, int n, const int *ids)
{
    int *all = ic__malloc(K->G->c, sizeof(int) * (size_t)(n + 1));
    double(*s)[IC__TUNE_ROUNDS] = ic__calloc(K->G->c, (size_t)n + 1, sizeof *s);
    int *ns = ic__calloc(K->G->c, (size_t)n + 1, sizeof *ns);
    if (!all || !s || !ns) {
        K->oom = true;
        ic__free(K->G->c, all), ic__free(K->G->c, s), ic__free(K->G->c, ns);
        return K->best;
    }
    int m = 0;
    all[m++] = 0;
    for (int j = 0; j < n; j++)
        if (ids[j] > 0 && ids[j] < K->n && K->cand[ids[j]].state != IC__TC_REJECTED &&
            K->cand[ids[j]].state != IC__TC_FAILED)
            all[m++] = ids[j];
    for (int j = 0; j < m; j++) /* a candidate raced before races again */
        if (K->cand[all[j]].state == IC__TC_TIMED || K->cand[all[j]].state == IC__TC_STOPPED)
            K->cand[all[j]].state = IC__TC_NEW;
    warm_up(K, m, all);
    rounds(K, m, all, s, ns);
    double d = ns[0] ? median(s[0], ns[0]) : 0;
    for (int j = 0; j < m && d > 0; j++) {
        ic__tune_cand *t = &K->cand[all[j]];
        if (t->state == IC__TC_FAILED || !ns[j])
            continue;
        t->nsamples += ns[j];
        t->last_rel = j ? median(s[j], ns[j]) / d : 1;
        t->rel_sum += t->last_rel;
        t->races++;
        if (t->state == IC__TC_NEW)
            t->state = IC__TC_TIMED;
    }
    if (d > 0)
        K->def_sum += d, K->def_races++;
    pick_best(K);
    ic__free(K->G->c, all), ic__free(K->G->c, s), ic__free(K->G->c, ns);
    return K->best;
}

int ic__tune_winner(const ic__tune *K)
{
    int b = K->best;
    if (b <= 0 || K->cand[b].state != IC__TC_TIMED || K->cand[0].state != IC__TC_TIMED)
        return 0;
    return K->cand[b].ms < K->cand[0].ms * (1 - IC__TUNE_MARGIN) ? b : 0;
}

bool ic__tune_confirm(ic__tune *K, int w)
{
    if (w <= 0 || w >= K->n)
        return false;
    ic__tune_race(K, 1, &w);
    ic__tune_cand *t = &K->cand[w];
    if (t->state == IC__TC_TIMED && t->last_rel < 1 - IC__TUNE_MARGIN)
        return true;
    if (t->state == IC__TC_TIMED)
        t->state = IC__TC_UNCONFIRMED;
    pick_best(K);
    return false;
}

void ic__tune_reject(ic__tune *K, int i)
{
    if (i > 0 && i < K->n && K->cand[i].state != IC__TC_FAILED)
        K->cand[i].state = IC__TC_REJECTED;
    pick_best(K);
}

/* ---- the table ---- */

/* The table's groups: candidates still in the running, then stopped early (one sample, a
 * time to take with salt), rejected, failed, never timed. */
static int group(const ic__tune_cand *t)
{
    if (!t->nsamples)
        return 4;
    switch (t->state) {
    case IC__TC_TIMED: return 0;
    case IC__TC_STOPPED: return 1;
    case IC__TC_REJECTED: case IC__TC_UNCONFIRMED: return 2;
    default: return 3;
    }
}

/* Whether candidate a goes after b in the table: by group, then fastest first. */
static bool after(const ic__tune *K, int a, int b)
{
    const ic__tune_cand *x = &K->cand[a], *y = &K->cand[b];
    int gx = group(x), gy = group(y);
    return gx != gy ? gx > gy : x->ms > y->ms;
}

static const char *state_note(const ic__tune_cand *t)
{
    switch (t->state) {
    case IC__TC_STOPPED: return "  (early stop)";
    case IC__TC_FAILED: return "  (failed)";
    case IC__TC_REJECTED: return "  (wrong outputs)";
    case IC__TC_UNCONFIRMED: return "  (lost its lead when raced again)";
    default: return t->nsamples ? "" : "  (not timed: budget)";
    }
}

void ic__tune_print_table(FILE *f, const ic__tune *K, int chosen)
{
    int *order = malloc(sizeof(int) * (size_t)(K->n + 1));
    if (!order)
        return;
    for (int i = 0; i < K->n; i++) { /* insertion sort: a few hundred rows at most */
        int j = i;
        for (; j > 0 && after(K, order[j - 1], i); j--)
            order[j] = order[j - 1];
        order[j] = i;
    }
    double best = K->n && group(&K->cand[order[0]]) == 0 ? K->cand[order[0]].ms : 0;
    fprintf(f, "AUTOTUNE %s %s\n", K->kernel, K->shape);
    for (int j = 0; j < K->n; j++) {
        const ic__tune_cand *t = &K->cand[order[j]];
        if (t->nsamples)
            fprintf(f, "  %-78s %9.4f ms %6.1f%%%s%s%s\n", t->desc, t->ms, best > 0 ? 100 * best / t->ms : 0,
                    order[j] == 0 ? "  (default)" : "", order[j] == chosen ? "  <- chosen" : "", state_note(t));
        else
            fprintf(f, "  %-78s %9s    %6s %s%s\n", t->desc, "-", "", order[j] == 0 ? "  (default)" : "",
                    state_note(t));
    }
    fprintf(f, "SingleProcess AUTOTUNE benchmarking takes %.4f seconds and compiling %.4f seconds\n",
            K->bench_ms / 1e3, K->compile_ms / 1e3);
    free(order);
}

static void end_tuned(ic__tune *K, int chosen)
{
    ic__tune_graph *G = K->G;
    if (G->log) {
        ic__tune_graph_end(G);
        ic__tune_print_table(stderr, K, chosen);
    }
    if (hooks.chosen)
        hooks.chosen(hooks.user, K->kernel, chosen, K->cand[chosen].desc);
    if (G->stats) {
        G->stats->tuned++;
        G->stats->replaced += chosen != 0;
        G->stats->bench_s += K->bench_ms / 1e3;
        G->stats->compile_s += K->compile_ms / 1e3;
    }
}

void ic__tune_skip(ic__tune *K)
{
    K->G->weight_left -= K->weight;
    K->G->done++;
    ic__free(K->G->c, K->cand);
    K->cand = NULL;
    K->n = K->cap = 0;
}

void ic__tune_end(ic__tune *K, int chosen)
{
    ic__tune_graph *G = K->G;
    if (chosen < 0) {
        if (G->stats)
            G->stats->record_hits++;
        if (hooks.chosen && K->n)
            hooks.chosen(hooks.user, K->kernel, -1, K->cand[0].desc);
    } else {
        end_tuned(K, chosen);
    }
    ic__tune_skip(K);
}

/* ---- records ---- */

bool ic__tune_record_format(const ic__tune_record *r, char *buf, size_t n)
{
    int k = snprintf(buf, n, "params %s\nms %.17g\ndefault_ms %.17g\n", r->params, r->ms, r->default_ms);
    return k > 0 && (size_t)k < n && !strchr(r->params, '\n');
}

/* The value after "name " on the line at *s; advances *s past the line. */
static bool field(const char **s, const char *end, const char *name, char *out, size_t n)
{
    size_t len = strlen(name);
    const char *nl = memchr(*s, '\n', (size_t)(end - *s));
    if (!nl || (size_t)(nl - *s) < len + 1 || strncmp(*s, name, len) || (*s)[len] != ' ' ||
        (size_t)(nl - *s - len - 1) >= n)
        return false;
    memcpy(out, *s + len + 1, (size_t)(nl - *s - len - 1));
    out[nl - *s - len - 1] = 0;
    *s = nl + 1;
    return true;
}

static bool number(const char *text, double *v)
{
    char *end;
    *v = strtod(text, &end);
    return end != text && !*end && isfinite(*v) && *v >= 0;
}

bool ic__tune_record_parse(const char *text, size_t n, ic__tune_record *r)
{
    const char *s = text, *end = text + n;
    char a[64], b[64];
    return field(&s, end, "params", r->params, sizeof r->params) && field(&s, end, "ms", a, sizeof a) &&
           field(&s, end, "default_ms", b, sizeof b) && s == end && number(a, &r->ms) &&
           number(b, &r->default_ms);
}

/* ---- checking a winner ---- */

static double elem(ic_dtype t, const void *p, int64_t i)
{
    switch (t) {
    case IC_F32: return ((const float *)p)[i];
    case IC_F64: return ((const double *)p)[i];
    case IC_F16: return ic_f16_to_f32(((const uint16_t *)p)[i]);
    case IC_BF16: return ic_bf16_to_f32(((const uint16_t *)p)[i]);
    default: return 0;
    }
}

/* The tolerance is for sums in other orders (split-K, other tile depths), rounded to t. */
bool ic__tune_close(ic_dtype t, int64_t n, const void *want, const void *got)
{
    if (!ic_dtype_is_float(t))
        return !memcmp(want, got, (size_t)n * ic_dtype_size(t));
    double rtol = t == IC_BF16 ? 3e-2 : t == IC_F16 ? 4e-3 : 1e-3;
    double atol = t == IC_BF16 ? 1.6e-2 : t == IC_F16 ? 2e-3 : 1e-4, scale = 0;
    for (int64_t i = 0; i < n; i++) {
        double w = fabs(elem(t, want, i));
        scale = isfinite(w) && w > scale ? w : scale;
    }
    for (int64_t i = 0; i < n; i++) {
        double w = elem(t, want, i), g = elem(t, got, i);
        if (isnan(w) || isnan(g)) {
            if (isnan(w) != isnan(g))
                return false;
            continue;
        }
        if (isinf(w) || isinf(g)) {
            if (w != g)
                return false;
            continue;
        }
        if (fabs(g - w) > rtol * fabs(w) + atol * (scale > 1 ? scale : 1))
            return false;
    }
    return true;
}
