/* test_cache_reliability.c - the persistent cache under the graph compiler, with the CPU
 * autotuner on: two processes tuning the same graph into one cache folder at once, a process
 * killed (SIGKILL) while tuning or writing, and entries damaged by hand each leave a folder
 * that the next compile reads or safely ignores (correct outputs, never a crash), and after
 * which a compile is fully warm. Compiles that run in child processes report through a pipe
 * (a child must not call cr_assert). Every test's cache is a fresh folder (IC_CACHE_DIR
 * through the context's switches). */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <criterion/criterion.h>
#include "ic/ic.h"
#include "testutil.h"

/* A cap, not a cost (the searches take about 3 s here): large enough that on a loaded CI machine
 * every search still races at least once, since a search the budget cuts before any race
 * records nothing and the warm compiles below expect a record per kernel. */
#define BUDGET_S 20.0

/* y = gelu(x @ w^T + b) (a GEMM with its epilogue) and z = layer_norm(u) (a row kernel). */
static const char GRAPH[] =
    "{\"ic_graph\": 1, \"name\": \"rel\", \"inputs\": ["
    "{\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [24, 64]}, "
    "{\"name\": \"w\", \"dtype\": \"f32\", \"shape\": [48, 64]}, "
    "{\"name\": \"b\", \"dtype\": \"f32\", \"shape\": [48]}, "
    "{\"name\": \"u\", \"dtype\": \"f32\", \"shape\": [32, 128]}, "
    "{\"name\": \"g\", \"dtype\": \"f32\", \"shape\": [128]}, "
    "{\"name\": \"h\", \"dtype\": \"f32\", \"shape\": [128]}], \"nodes\": ["
    "{\"name\": \"l\", \"op\": \"linear\", \"inputs\": [\"x\", \"w\", \"b\"]}, "
    "{\"name\": \"y\", \"op\": \"gelu\", \"inputs\": [\"l\"]}, "
    "{\"name\": \"z\", \"op\": \"layer_norm\", \"inputs\": [\"u\", \"g\", \"h\"], "
    "\"attrs\": {\"normalized_shape\": [128], \"eps\": 1e-5}}], \"outputs\": [\"y\", \"z\"]}";

enum { NARGS = 6, NOUTS = 2 };
static const int64_t SHAPES[NARGS][2] = { { 24, 64 }, { 48, 64 }, { 48 }, { 32, 128 }, { 128 }, { 128 } };

/* What one compile saw: ok only when it compiled, ran and matched the reference executor. */
typedef struct {
    int ok;
    ic_autotune_stats st;
    char why[256];
} outcome;

static ic_ctx *cache_ctx(const char *dir)
{
    ic_ctx *c = NULL;
    if (ic_ctx_create(NULL, &c) != IC_OK)
        return NULL;
    ic_switches sw;
    ic_ctx_switches(c, &sw);
    sw.cache_dir = dir;
    sw.autotune_log = false;
    if (ic_ctx_set_switches(c, &sw) != IC_OK) {
        ic_ctx_destroy(c);
        return NULL;
    }
    return c;
}

static void fill_args(ic_ctx *c, ic_tensor *args)
{
    unsigned seed = 7;
    for (int i = 0; i < NARGS; i++) {
        ic_tensor_init(&args[i], IC_F32, SHAPES[i][1] ? 2 : 1, SHAPES[i], NULL);
        ic_tensor_alloc(c, &args[i]);
        for (int64_t j = 0; j < ic_tensor_numel(&args[i]); j++) {
            seed = seed * 1664525u + 1013904223u;
            ((float *)args[i].data)[j] = (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
        }
    }
}

/* Compiles the graph with every tuner on into dir, runs it and compares with ic_ref_run.
 * Asserts nothing, so that it can run in a child process. */
static outcome compile_check(const char *dir)
{
    outcome r = { 0 };
    ic_ctx *c = cache_ctx(dir);
    if (!c) {
        snprintf(r.why, sizeof r.why, "no context");
        return r;
    }
    ic_graph *g = NULL;
    ic_compiled *cc = NULL;
    ic_tensor args[NARGS], want[NOUTS], got[NOUTS];
    fill_args(c, args);
    ic_compile_options o;
    ic_compile_options_init(&o);
    o.autotune = IC_TUNE_MAX;
    o.autotune_budget_s = BUDGET_S;
    int nwant = 0, ngot = 0;
    if (ic_graph_load_json_string(c, GRAPH, NULL, &g) != IC_OK)
        snprintf(r.why, sizeof r.why, "load: %s", ic_last_error(c));
    else if (ic_ref_run(c, g, NULL, NARGS, args, NOUTS, want) != IC_OK)
        snprintf(r.why, sizeof r.why, "ref: %s", ic_last_error(c));
    else if ((nwant = NOUTS, ic_compile(c, g, &o, &cc)) != IC_OK)
        snprintf(r.why, sizeof r.why, "compile: %s", ic_last_error(c));
    else {
        for (; ngot < NOUTS; ngot++) {
            ic_tensor_init(&got[ngot], want[ngot].dtype, want[ngot].rank, want[ngot].shape, NULL);
            ic_tensor_alloc(c, &got[ngot]);
        }
        ic_compiled_autotune_stats(cc, &r.st);
        if (ic_run(cc, NARGS, args, NOUTS, got) != IC_OK)
            snprintf(r.why, sizeof r.why, "run: %s", ic_last_error(c));
        else if (!ict_allclose(&got[0], &want[0], r.why, sizeof r.why) ||
                 !ict_allclose(&got[1], &want[1], r.why, sizeof r.why))
            ;
        else
            r.ok = 1;
    }
    for (int i = 0; i < ngot; i++)
        ic_tensor_free(c, &got[i]);
    for (int i = 0; i < nwant; i++)
        ic_tensor_free(c, &want[i]);
    for (int i = 0; i < NARGS; i++)
        ic_tensor_free(c, &args[i]);
    ic_compiled_destroy(cc);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
    return r;
}

/* ---- child processes ---- */

typedef struct {
    pid_t pid;
    int fd; /* read end of the child's report */
} child;

static child spawn(const char *dir)
{
    int p[2];
    cr_assert_eq(pipe(p), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0, "fork");
    if (pid == 0) {
        close(p[0]);
        outcome r = compile_check(dir);
        ssize_t w = write(p[1], &r, sizeof r);
        _exit(w == (ssize_t)sizeof r ? 0 : 3);
    }
    close(p[1]);
    return (child){ pid, p[0] };
}

/* Waits for a child that should finish by itself; its report. */
static outcome reap(child k)
{
    outcome r = { 0 };
    ssize_t n = read(k.fd, &r, sizeof r);
    close(k.fd);
    int status = 0;
    cr_assert_eq(waitpid(k.pid, &status, 0), k.pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child died (status %#x)", status);
    cr_assert_eq(n, (ssize_t)sizeof r, "child sent no report");
    return r;
}

static void assert_ok(const outcome *r, const char *what)
{
    cr_assert(r->ok, "%s: %s", what, r->why);
}

static void assert_warm(const outcome *r, const char *what)
{
    assert_ok(r, what);
    cr_assert_gt(r->st.kernels, 0, "%s: nothing looked at by the tuner", what);
    cr_assert_eq(r->st.record_hits, r->st.kernels, "%s: %d of %d tuning records read", what,
                 r->st.record_hits, r->st.kernels);
    cr_assert_eq(r->st.tuned, 0, "%s: %d kernels tuned again", what, r->st.tuned);
    cr_assert_eq(r->st.code_misses, 0, "%s: %d kernels compiled again", what, r->st.code_misses);
}

/* ---- the folder ---- */

typedef struct {
    int entries, temps;
} census;

static census count_ns(const char *dir, const char *ns)
{
    census n = { 0 };
    DIR *d = opendir(ict_path(dir, ns));
    if (!d)
        return n;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        if (strstr(e->d_name, ".tmp."))
            n.temps++;
        else
            n.entries++;
    }
    closedir(d);
    return n;
}

/* Names of the entries (not temporary files) of dir/ns; returns how many (at most max). */
static int list_entries(const char *dir, const char *ns, char (*names)[256], int max)
{
    DIR *d = opendir(ict_path(dir, ns));
    cr_assert(d, "no %s folder", ns);
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < max;)
        if (e->d_name[0] != '.' && !strstr(e->d_name, ".tmp."))
            snprintf(names[n++], 256, "%s", e->d_name);
    closedir(d);
    return n;
}

/* ---- the tests ---- */

Test(cache_reliability, two_processes_tune_at_once, .timeout = 120)
{
    char dir[1024]; /* ict_path reuses ict_tmpdir's buffers */
    snprintf(dir, sizeof dir, "%s", ict_tmpdir());
    /* both children start before this process loads anything (no OpenMP or LLVM state to
     * inherit) */
    child a = spawn(dir), b = spawn(dir);
    outcome ra = reap(a), rb = reap(b);
    assert_ok(&ra, "first tuner");
    assert_ok(&rb, "second tuner");
    cr_assert_eq(count_ns(dir, "cpu-tune").temps + count_ns(dir, "cpu-obj").temps, 0,
                 "temporary files left behind");
    outcome c = compile_check(dir);
    assert_warm(&c, "the compile after both");
    cr_assert_eq(c.st.kernels, ra.st.kernels);
    ict_rmtree(dir);
}

static bool written(const char *dir)
{
    census t = count_ns(dir, "cpu-tune"), o = count_ns(dir, "cpu-obj");
    return t.temps + t.entries + o.temps + o.entries > 0;
}

static void sleep_ms(int ms)
{
    struct timespec t = { ms / 1000, (long)(ms % 1000) * 1000000L };
    while (nanosleep(&t, &t) != 0)
        ;
}

Test(cache_reliability, killed_while_tuning, .timeout = 240)
{
    /* three fixed moments, then kills as the first file appears until one landed midway */
    static const int delays[] = { 50, 200, 800 };
    int kills = 0, midway = 0;
    for (int i = 0; i < 8 && (i < 3 || !midway); i++) {
        char dir[1024]; /* ict_path reuses ict_tmpdir's buffers */
        snprintf(dir, sizeof dir, "%s", ict_tmpdir());
        child k = spawn(dir);
        if (i < 3)
            sleep_ms(delays[i]);
        else /* the moment the child starts writing: its first record or code entry */
            for (int ms = 0; ms < 20000 && !written(dir); ms++)
                sleep_ms(1);
        kill(k.pid, SIGKILL);
        int status = 0;
        cr_assert_eq(waitpid(k.pid, &status, 0), k.pid);
        close(k.fd);
        census t = count_ns(dir, "cpu-tune"), o = count_ns(dir, "cpu-obj");
        if (WIFSIGNALED(status)) {
            kills++;
            /* something written, the compile not finished: it died tuning or writing */
            midway += t.temps + o.temps + t.entries + o.entries > 0;
        }
        /* the next run (another process, as in real use) reads or ignores what is there */
        outcome next = reap(spawn(dir));
        assert_ok(&next, "the compile after a kill");
        outcome warm = reap(spawn(dir));
        assert_warm(&warm, "the compile after that");
        ict_rmtree(dir);
    }
    cr_assert_gt(kills, 0, "every child finished before its kill");
    cr_assert_gt(midway, 0, "no kill landed while tuning or writing (%d kills)", kills);
}

/* Truncates every entry of dir/ns: the first to nothing, the others to half. */
static int truncate_entries(const char *dir, const char *ns)
{
    char names[64][256];
    int n = list_entries(dir, ns, names, 64);
    for (int i = 0; i < n; i++) {
        const char *path = ict_path(ict_path(dir, ns), names[i]);
        size_t sz;
        unsigned char *b = ict_read_file(path, &sz);
        cr_assert(b);
        ict_write_file(path, b, i == 0 ? 0 : sz / 2);
        free(b);
    }
    return n;
}

/* Flips a byte in the middle of every entry of dir/ns. */
static int corrupt_entries(const char *dir, const char *ns)
{
    char names[64][256];
    int n = list_entries(dir, ns, names, 64);
    for (int i = 0; i < n; i++) {
        const char *path = ict_path(ict_path(dir, ns), names[i]);
        size_t sz;
        unsigned char *b = ict_read_file(path, &sz);
        cr_assert(b && sz > 2, "%s: %zu bytes", path, b ? sz : 0);
        b[sz / 2] ^= 0x5a;
        ict_write_file(path, b, sz);
        free(b);
    }
    return n;
}

Test(cache_reliability, damaged_entries_ignored_and_rewritten, .timeout = 120)
{
    char dir[1024]; /* ict_path reuses ict_tmpdir's buffers */
    snprintf(dir, sizeof dir, "%s", ict_tmpdir());
    outcome first = compile_check(dir);
    assert_ok(&first, "cold compile");
    int kernels = first.st.kernels;
    cr_assert_gt(kernels, 0);

    /* tuning records: damaged ones are searched again */
    cr_assert_eq(truncate_entries(dir, "cpu-tune"), kernels, "one record per kernel");
    outcome t = compile_check(dir);
    assert_ok(&t, "after truncated records");
    cr_assert_eq(t.st.record_hits, 0, "a truncated record was read");
    cr_assert_eq(t.st.tuned, kernels);
    outcome tw = compile_check(dir);
    assert_warm(&tw, "after the records were rewritten");

    corrupt_entries(dir, "cpu-tune");
    outcome t2 = compile_check(dir);
    assert_ok(&t2, "after corrupted records");
    cr_assert_eq(t2.st.record_hits, 0, "a corrupted record was read");
    outcome t2w = compile_check(dir);
    assert_warm(&t2w, "after the records were rewritten");

    /* object code: damaged entries are compiled again */
    int objs = corrupt_entries(dir, "cpu-obj");
    cr_assert_gt(objs, 0);
    outcome o = compile_check(dir);
    assert_ok(&o, "after corrupted code");
    cr_assert_eq(o.st.record_hits, kernels, "the records are intact");
    cr_assert_eq(o.st.code_hits, 0, "corrupted code was loaded");
    cr_assert_gt(o.st.code_misses, 0);
    outcome ow = compile_check(dir);
    assert_warm(&ow, "after the code was rewritten");

    truncate_entries(dir, "cpu-obj");
    outcome o2 = compile_check(dir);
    assert_ok(&o2, "after truncated code");
    cr_assert_eq(o2.st.code_hits, 0, "truncated code was loaded");
    outcome o2w = compile_check(dir);
    assert_warm(&o2w, "after the code was rewritten");
    ict_rmtree(dir);
}
