/* ic-run.c - load a graph, bind and generate its run-time arguments, compile it for the CPU
 * or a CUDA GPU (fused, and unfused for comparison) or run the reference executor, time it,
 * optionally check every output against the reference, and print a short table or JSON.
 * Exit 0 on success, 1 with one line on stderr for bad input or usage, 2 when --check or
 * --expect finds a mismatch. */
#define _POSIX_C_SOURCE 200809L
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "common/cli.h"
#include "ic/options.h"

static const char usage[] =
    "usage: ic-run GRAPH.json [options]\n"
    "       ic-run --artifact MODEL [options]\n"
    "       ic-run --list-options | --list-mode-options [MODE]\n"
    "\n"
    "Compiles an ic-graph (JSON v1) for this CPU or a CUDA GPU, runs it on generated or\n"
    "supplied arguments, times it and prints a short table: compile time, median and min run\n"
    "time, GB/s and the kernels; with the default backend also the unfused baseline and the\n"
    "fused speedup.\n"
    "Run-time arguments (inputs, params without \"file\") are read by name from --inputs; the\n"
    "others are generated from --seed.\n"
    "\n"
    "options:\n"
    "  --backend NAME               compiled (default): fused kernels, timed against unfused;\n"
    "                               unfused: one compiled kernel per op (like eager mode);\n"
    "                               ref: the reference executor (plain C, op by op)\n"
    "  --no-compare                 compiled only: skip the unfused baseline\n"
    "  --device cpu|cuda[:N]        where the compiled backends run (default cpu). cuda: PTX\n"
    "                               through the CUDA driver on GPU N (0); host<->device copies\n"
    "                               are timed apart from the runs, and the host overhead per\n"
    "                               call (us) is reported\n"
    "  --allow-tf32                 cuda: f32 matmuls on tensor cores in TF32 (operands\n"
    "                               rounded to 10-bit mantissas; torch's allow_tf32). --check\n"
    "                               then compares f32 outputs with bf16's tolerances\n"
    "  --freezing                   params with data are compile-time constants (as torch's\n"
    "                               freezing): constant subgraphs folded, batch_norm folded\n"
    "                               into the convolution before it, CPU weights prepacked\n"
    "  --mode NAME                  as torch.compile: default; reduce-overhead (cuda: each\n"
    "                               run replays one CUDA graph); max-autotune-no-cudagraphs\n"
    "                               (autotune gemm, conv, pointwise, reduction, attention,\n"
    "                               coordesc); max-autotune (both). CUDA graphs have no effect on\n"
    "                               the CPU (a note on stderr says so). Exclusive with --option\n"
    "  --template NAME              a GraphNet config template: triton, cpp_wrapper, cutlass,\n"
    "                               aten, cudagraphs, max_autotune, freezing, tma (docs/options.md)\n"
    "  --option NAME=VALUE          set one option of the registry (repeatable; --list-options);\n"
    "                               beats --freezing, which beats the template\n"
    "  --config STR                 JSON or base64 of JSON with \"mode\", \"template\", \"options\",\n"
    "                               \"freezing\", e.g. {\"template\": \"max_autotune\"} (GraphNet's\n"
    "                               config); the other flags apply on top of it\n"
    "  --autotune-budget S          tuning time limit per graph in seconds (default 60)\n"
    "  --list-options               print the options: name, type, default, environment\n"
    "                               variable, whether it changes code (cache keys), doc\n"
    "  --list-mode-options [MODE]   print every mode's options, or MODE's one per line\n"
    "  --check                      also run the reference executor and compare every output\n"
    "                               with the spec's tolerances (exit 2 on a mismatch)\n"
    "  --expect FILE.safetensors    compare the outputs with tensors saved by name (e.g. from\n"
    "                               PyTorch), same tolerances (exit 2 on a mismatch)\n"
    "  --iters N                    timed runs (default 20; ref: 1)\n"
    "  --warmup N                   untimed runs before them (default 3; ref: 0)\n"
    "  --threads N                  cpu: OpenMP threads per kernel (default: all cores)\n"
    "  --json                       print one JSON object instead of the table\n"
    "  --inputs IN.safetensors      tensors supplied by name (symbols bind from their shapes)\n"
    "  --save-outputs OUT.safetensors  write the outputs by name (atomically; never over an input)\n"
    "  --bind SYM=N                 size of a symbolic dimension (repeatable)\n"
    "  --save-artifact MODEL        after the runs, save the compiled graph (weights included, every\n"
    "                               size compiled) into one file that --artifact loads (cpu; cuda:\n"
    "                               PTX and cubins, for GPUs of the same compute capability)\n"
    "  --artifact MODEL             instead of a graph: load a saved compiled model (no code\n"
    "                               generation; the options it was compiled with apply) and run it;\n"
    "                               the compile time is the load's\n"
    "  --seed N                     seed of the generated data (default 0)\n"
    "  -h, --help                   this text\n"
    "  --version                    the library's version and build id\n"
    "\n"
    "exit status: 0 ok, 1 bad usage or input (one line on stderr), 2 outputs do not match.\n";

enum { MAX_OPTIONS = 64 };

typedef struct {
    const char *graph, *inputs, *save, *expect, *backend, *device, *mode;
    const char *save_artifact, *artifact; /* --save-artifact, --artifact */
    const char *tmpl, *config;      /* --template, --config */
    const char *options[MAX_OPTIONS]; /* --option NAME=VALUE, in order */
    int noptions;
    bool mode_given;                /* --mode */
    double autotune_budget;         /* --autotune-budget; -1: not given */
    bool list_options;              /* --list-options */
    bool list_modes;                /* --list-mode-options [list_mode] */
    const char *list_mode;
    ic_config *cfg;                 /* everything above resolved (run) */
    cli_bind binds[CLI_MAX_BINDS];
    int nbinds;
    uint64_t seed;
    int64_t iters, warmup, threads; /* -1: not given */
    bool check, json, no_compare, help, version;
    bool allow_tf32;                /* --allow-tf32 (cuda) */
    bool freezing;                  /* --freezing */
    bool cuda;                      /* --device cuda[:N] */
    int ordinal;                    /* N */
} run_opts;

/* ---- options ---- */

static bool parse_count(const char *opt, const char *v, int64_t min, int64_t *out, cli_err *e)
{
    if (!v)
        return false;
    if (!cli_parse_i64(v, out) || *out < min || *out > 1000000000)
        return cli_fail(e, "%s expects an integer >= %lld, got '%s'", opt, (long long)min, v);
    return true;
}

/* --device cpu | cuda | cuda:N */
static bool parse_device(run_opts *o, cli_err *e)
{
    const char *d = o->device;
    if (strcmp(d, "cpu") == 0)
        return true;
    if (strncmp(d, "cuda", 4) == 0 && (d[4] == 0 || d[4] == ':')) {
        int64_t n = 0;
        if (d[4] == ':' && (!cli_parse_i64(d + 5, &n) || n < 0 || n > 1023))
            return cli_fail(e, "--device %s: the GPU number must be an integer from 0, as in cuda:1", d);
        o->cuda = true;
        o->ordinal = (int)n;
        return true;
    }
    return cli_fail(e, "unknown device '%s' (devices: cpu, cuda, cuda:N)", d);
}

static bool check_mode(const char *m, cli_err *e)
{
    if (ic_mode_find(m))
        return true;
    return cli_fail(e, "unknown mode '%s' (modes: %s)", m, ic_mode_names());
}

/* The mode that really runs: the one asked for (--mode, else the template's), less CUDA
 * graphs on the CPU, where they have nothing to capture. */
static const char *mode_used(const run_opts *o)
{
    const ic_mode_info *m = ic_mode_find(ic_config_mode(o->cfg));
    char graphs[8];
    ic_config_get(o->cfg, "cuda_graphs", graphs, sizeof graphs);
    bool g = o->cuda && strcmp(graphs, "true") == 0;
    if (m->cuda_graphs == g)
        return m->name;
    if (g)
        return m->autotune ? "max-autotune" : "reduce-overhead";
    return m->autotune ? "max-autotune-no-cudagraphs" : "default";
}

/* One line on stderr for each part of what was asked that has no effect on the device: the
 * CUDA graphs of a mode on the CPU, an option of the other backend. */
static void note_mode(const run_opts *o)
{
    char msg[512];
    const char *mode = ic_config_mode(o->cfg);
    if (strcmp(mode, mode_used(o)) != 0 && !ic_config_is_explicit(o->cfg, "cuda_graphs")) {
        snprintf(msg, sizeof msg, "note: %s %s: CUDA graphs have no effect on --device %s (ran "
                 "as --mode %s)", o->mode_given ? "--mode" : "the template's mode", mode, o->device,
                 mode_used(o));
        cli_report("ic-run", msg);
    }
    unsigned here = o->cuda ? IC_OPTION_CUDA : IC_OPTION_CPU;
    for (int i = 0; i < ic_option_count(); i++) {
        const ic_option_info *oi = ic_option_get(i);
        if (!(oi->backends & here) && ic_config_is_explicit(o->cfg, oi->name)) {
            snprintf(msg, sizeof msg, "note: option %s has no effect on --device %s (it applies to "
                     "--device %s)", oi->name, o->device, o->cuda ? "cpu" : "cuda");
            cli_report("ic-run", msg);
        }
    }
}

/* --artifact replaces the graph and runs the compiled backend alone (on the device it was
 * saved for: --device cuda loads a GPU model, the CPU one a CPU model; the library refuses the
 * other kind by name). */
static bool check_artifact_opts(run_opts *o, cli_err *e)
{
    if ((o->artifact && !*o->artifact) || (o->save_artifact && !*o->save_artifact))
        return cli_fail(e, "%s needs a file name", o->artifact ? "--artifact" : "--save-artifact");
    if (o->artifact && o->graph)
        return cli_fail(e, "a graph ('%s') or --artifact '%s', not both", o->graph, o->artifact);
    if ((o->artifact || o->save_artifact) && strcmp(o->backend, "ref") == 0)
        return cli_fail(e, "%s: the reference executor compiles nothing; drop --backend ref",
                        o->artifact ? "--artifact" : "--save-artifact");
    if (o->artifact && strcmp(o->backend, "compiled") != 0)
        return cli_fail(e, "--artifact runs the saved model; drop --backend %s", o->backend);
    if (o->artifact)
        o->no_compare = true; /* nothing to compile the unfused baseline from */
    return true;
}

static bool parse_args(int argc, char **argv, run_opts *o, cli_err *e)
{
    memset(o, 0, sizeof *o);
    o->backend = "compiled";
    o->device = "cpu";
    o->mode = "default";
    o->iters = o->warmup = o->threads = -1;
    o->autotune_budget = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            o->help = true;
            return true;
        }
        if (strcmp(a, "--version") == 0) {
            o->version = true;
            return true;
        }
        if (strcmp(a, "--list-options") == 0) {
            o->list_options = true;
        } else if (strcmp(a, "--list-mode-options") == 0) {
            o->list_modes = true;
            /* an optional MODE: the next word, unless it is an option or the graph */
            const char *next = i + 1 < argc ? argv[i + 1] : NULL;
            size_t len = next ? strlen(next) : 0;
            if (next && next[0] != '-' && !(len > 5 && strcmp(next + len - 5, ".json") == 0))
                o->list_mode = argv[++i];
        } else if (strncmp(a, "--list-mode-options=", 20) == 0) {
            o->list_modes = true;
            o->list_mode = a + 20;
        } else if (strcmp(a, "--check") == 0) {
            o->check = true;
        } else if (strcmp(a, "--json") == 0) {
            o->json = true;
        } else if (strcmp(a, "--no-compare") == 0) {
            o->no_compare = true;
        } else if (strcmp(a, "--allow-tf32") == 0) {
            o->allow_tf32 = true;
        } else if (strcmp(a, "--freezing") == 0) {
            o->freezing = true;
        } else if (cli_opt(argc, argv, &i, "--inputs", &v, e)) {
            if (!(o->inputs = v))
                return false;
        } else if (cli_opt(argc, argv, &i, "--save-outputs", &v, e)) {
            if (!(o->save = v))
                return false;
        } else if (cli_opt(argc, argv, &i, "--save-artifact", &v, e)) {
            if (!(o->save_artifact = v))
                return false;
        } else if (cli_opt(argc, argv, &i, "--artifact", &v, e)) {
            if (!(o->artifact = v))
                return false;
        } else if (cli_opt(argc, argv, &i, "--expect", &v, e)) {
            if (!(o->expect = v))
                return false;
        } else if (cli_opt(argc, argv, &i, "--backend", &v, e)) {
            if (!(o->backend = v))
                return false;
        } else if (cli_opt(argc, argv, &i, "--device", &v, e)) {
            if (!(o->device = v))
                return false;
        } else if (cli_opt(argc, argv, &i, "--mode", &v, e)) {
            if (!(o->mode = v))
                return false;
            o->mode_given = true;
        } else if (cli_opt(argc, argv, &i, "--template", &v, e)) {
            if (!(o->tmpl = v))
                return false;
        } else if (cli_opt(argc, argv, &i, "--config", &v, e)) {
            if (!(o->config = v))
                return false;
        } else if (cli_opt(argc, argv, &i, "--option", &v, e)) {
            if (!v)
                return false;
            if (o->noptions >= MAX_OPTIONS)
                return cli_fail(e, "too many --option options (at most %d)", MAX_OPTIONS);
            if (!strchr(v, '=') || v[0] == '=')
                return cli_fail(e, "--option expects NAME=VALUE (e.g. --option vector_width=8), got '%s'", v);
            o->options[o->noptions++] = v;
        } else if (cli_opt(argc, argv, &i, "--autotune-budget", &v, e)) {
            if (!v)
                return false;
            char *end;
            o->autotune_budget = strtod(v, &end);
            if (!*v || *end || !(o->autotune_budget >= 0 && o->autotune_budget <= 1e9))
                return cli_fail(e, "--autotune-budget expects seconds, a number >= 0, got '%s'", v);
        } else if (cli_opt(argc, argv, &i, "--iters", &v, e)) {
            if (!parse_count("--iters", v, 1, &o->iters, e))
                return false;
        } else if (cli_opt(argc, argv, &i, "--warmup", &v, e)) {
            if (!parse_count("--warmup", v, 0, &o->warmup, e))
                return false;
        } else if (cli_opt(argc, argv, &i, "--threads", &v, e)) {
            if (!parse_count("--threads", v, 1, &o->threads, e))
                return false;
        } else if (cli_opt(argc, argv, &i, "--seed", &v, e)) {
            if (!v)
                return false;
            if (!cli_parse_u64(v, &o->seed))
                return cli_fail(e, "--seed expects a non-negative integer, got '%s'", v);
        } else if (cli_opt(argc, argv, &i, "--bind", &v, e)) {
            if (!v)
                return false;
            if (o->nbinds >= CLI_MAX_BINDS)
                return cli_fail(e, "too many --bind options (at most %d)", CLI_MAX_BINDS);
            if (!cli_parse_bind(v, &o->binds[o->nbinds++], e))
                return false;
        } else if (a[0] == '-' && a[1]) {
            return cli_fail(e, "unknown option '%s' (see ic-run -h)", a);
        } else if (o->graph) {
            return cli_fail(e, "one graph at a time: '%s' and '%s' (see ic-run -h)", o->graph, a);
        } else {
            o->graph = a;
        }
    }
    if (o->list_options || o->list_modes)
        return !o->list_mode || check_mode(o->list_mode, e);
    if (!o->graph && !o->artifact)
        return cli_fail(e, "no graph given (usage: ic-run GRAPH.json [options]; see ic-run -h)");
    if (!check_artifact_opts(o, e))
        return false;
    if (o->save && *o->save == 0)
        return cli_fail(e, "--save-outputs needs a file name");
    if (o->expect && *o->expect == 0)
        return cli_fail(e, "--expect needs a file name");
    if (strcmp(o->backend, "ref") && strcmp(o->backend, "unfused") && strcmp(o->backend, "compiled"))
        return cli_fail(e, "unknown backend '%s' (backends: ref, unfused, compiled)", o->backend);
    bool ref = strcmp(o->backend, "ref") == 0;
    if (!parse_device(o, e) || !check_mode(o->mode, e))
        return false;
    if (o->cuda && ref)
        return cli_fail(e, "--backend ref is the reference executor, which runs on the CPU: drop "
                           "--device %s (--check compares the GPU's outputs with it)", o->device);
    if (!o->cuda && o->allow_tf32)
        return cli_fail(e, "--allow-tf32 lets GPU matmuls use TF32 tensor cores; it has no meaning "
                           "for --device %s", o->device);
    if (o->cuda && o->threads > 0)
        return cli_fail(e, "--threads sets the OpenMP threads of --device cpu; it has no meaning "
                           "for --device %s", o->device);
    if (o->iters < 0)
        o->iters = ref ? 1 : 20; /* the reference executor is slow: one run unless asked */
    if (o->warmup < 0)
        o->warmup = ref ? 0 : 3;
    return true;
}

/* ---- one backend: compile, time, keep its outputs ---- */

typedef struct {
    const char *name;      /* "ref", "unfused", "compiled" */
    bool compiled;
    ic_compiled *cc;       /* --device cpu */
    ic_cuda_compiled *gc;  /* --device cuda */
    double compile_ms;     /* cpu: ic_compiled_compile_ms; cuda: lower+fuse + PTX + module load */
    double median_ms, min_ms;
    ic_tensor *outs;       /* [nouts] allocated once (compiled) or by ic_ref_run (ref) */
    int nouts;
    bool checked, matches; /* --check / --expect results */
    bool tf32;             /* ran with --allow-tf32: f32 outputs carry TF32's error */
    double model_ms;       /* --artifact: cc was loaded (in that time), not compiled */
    /* cuda only: the compile's stages, the copies (outside the timed runs) and the host time
     * of one ic_cuda_launch */
    double lower_ms, ptx_ms, load_ms;
    double h2d_ms, d2h_ms, host_us;
    int64_t h2d_bytes, d2h_bytes;
} backend_run;

static int kernel_count(const backend_run *b)
{
    if (b->gc)
        return ic_cuda_compiled_num_kernels(b->gc);
    return b->cc ? ic_compiled_num_kernels(b->cc) : 0;
}

static const char *kernel_name(const backend_run *b, int k)
{
    if (b->gc) {
        const ic_ptx_kernel *pk = ic_cuda_compiled_kernel(b->gc, k);
        return pk ? pk->name : "?";
    }
    return ic_compiled_kernel_name(b->cc, k);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void median_min(double *ms, int64_t n, double *median, double *min)
{
    qsort(ms, (size_t)n, sizeof *ms, cmp_double);
    *min = ms[0];
    *median = n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
}

/* Output buffers in the graph's dtypes and (bound) shapes, allocated once before timing and
 * filled with 0xff (NaN for floats, -1 for integers) so an element no kernel writes cannot
 * pass a check by accident. */
static bool alloc_outputs(ic_ctx *c, const ic_graph *g, const int64_t *vals, backend_run *b,
                          cli_err *e)
{
    b->nouts = ic_graph_num_outputs(g);
    if (!(b->outs = calloc((size_t)b->nouts + 1, sizeof *b->outs)))
        return cli_fail(e, "out of memory");
    for (int i = 0; i < b->nouts; i++) {
        ic_node_info ni;
        ic_graph_node(g, ic_graph_output(g, i), &ni);
        int64_t shape[IC_MAX_RANK];
        for (int d = 0; d < ni.rank; d++)
            if (ic_graph_eval_dim(g, ni.shape[d], vals, &shape[d]) != IC_OK)
                return cli_fail_ctx(e, c, NULL);
        ic_tensor_init(&b->outs[i], ni.dtype, ni.rank, shape, NULL);
        if (ic_tensor_alloc(c, &b->outs[i]) != IC_OK) {
            char sh[256];
            return cli_fail(e, "graph '%s': cannot allocate output '%s' %s %s: %s", ic_graph_name(g),
                            ni.name, ic_dtype_name(ni.dtype), cli_shape_str(&b->outs[i], sh, sizeof sh),
                            ic_last_error(c));
        }
        memset(b->outs[i].data, 0xff, (size_t)ic_tensor_numel(&b->outs[i]) * ic_dtype_size(ni.dtype));
    }
    return true;
}

static void free_outputs(ic_ctx *c, ic_tensor *outs, int n)
{
    for (int i = 0; outs && i < n; i++)
        if (outs[i].data)
            ic_tensor_free(c, &outs[i]);
    free(outs);
}

static void backend_free(ic_ctx *c, backend_run *b)
{
    ic_compiled_destroy(b->cc);
    ic_cuda_compiled_destroy(b->gc);
    free_outputs(c, b->outs, b->nouts);
    memset(b, 0, sizeof *b);
}

static bool run_compiled(ic_ctx *c, const ic_graph *g, const run_opts *o, const cli_args *a,
                         bool fusion, backend_run *b, double *ms, cli_err *e)
{
    char what[64];
    snprintf(what, sizeof what, "backend %s", b->name);
    ic_compile_options co;
    ic_compile_options_init(&co);
    ic_config_apply_compile(o->cfg, &co);
    co.fusion = fusion && co.fusion;
    if (o->threads > 0)
        co.threads = (int)o->threads;
    if (o->autotune_budget >= 0)
        co.autotune_budget_s = o->autotune_budget;
    if (!b->cc && ic_compile(c, g, &co, &b->cc) != IC_OK)
        return cli_fail_ctx(e, c, what);
    for (int s = 0; s < ic_graph_num_symbols(g); s++)
        if (ic_compiled_bind(b->cc, ic_graph_symbol_name(g, s), a->vals[s]) != IC_OK)
            return cli_fail_ctx(e, c, what);
    if (!alloc_outputs(c, g, a->vals, b, e))
        return false;
    /* The first run compiles a graph with symbols (for these sizes); never timed. */
    if (ic_run(b->cc, a->n, a->t, b->nouts, b->outs) != IC_OK)
        return cli_fail_ctx(e, c, what);
    b->compile_ms = b->model_ms > 0 ? b->model_ms : ic_compiled_compile_ms(b->cc);
    for (int64_t i = 0; i < o->warmup; i++)
        if (ic_run(b->cc, a->n, a->t, b->nouts, b->outs) != IC_OK)
            return cli_fail_ctx(e, c, what);
    /* The timed loop: the same caller buffers every run, nothing allocated. */
    for (int64_t i = 0; i < o->iters; i++) {
        double t0 = cli_now();
        ic_status s = ic_run(b->cc, a->n, a->t, b->nouts, b->outs);
        ms[i] = (cli_now() - t0) * 1e3;
        if (s != IC_OK)
            return cli_fail_ctx(e, c, what);
    }
    median_min(ms, o->iters, &b->median_ms, &b->min_ms);
    return true;
}

/* ---- --device cuda ---- */

/* Median of `reps` wall-clock timings of one copy: the upload (then a stream synchronize) or
 * the download (which waits for queued work first: the stream is idle before the clock
 * starts). */
enum { COPY_REPS = 3, MAX_BATCHES = 10, MAX_HOST_CALLS = 100 };

static const char *cuda_what(const backend_run *b, char *buf, size_t n)
{
    snprintf(buf, n, "backend %s (cuda)", b->name);
    return buf;
}

static bool time_copies(ic_ctx *c, ic_cuda *d, const cli_args *a, backend_run *b, cli_err *e)
{
    double up[COPY_REPS], down[COPY_REPS], unused;
    char what[64];
    cuda_what(b, what, sizeof what);
    for (int r = 0; r < COPY_REPS; r++) {
        if (ic_cuda_synchronize(d) != IC_OK)
            return cli_fail_ctx(e, c, what);
        double t0 = cli_now();
        if (ic_cuda_upload(b->gc, a->n, a->t) != IC_OK || ic_cuda_synchronize(d) != IC_OK)
            return cli_fail_ctx(e, c, what);
        up[r] = (cli_now() - t0) * 1e3;
    }
    /* the arguments are uploaded again: run once more, so the outputs come from them */
    if (ic_cuda_launch(b->gc) != IC_OK || ic_cuda_synchronize(d) != IC_OK)
        return cli_fail_ctx(e, c, what);
    for (int r = 0; r < COPY_REPS; r++) {
        double t0 = cli_now();
        if (ic_cuda_download(b->gc, b->nouts, b->outs) != IC_OK)
            return cli_fail_ctx(e, c, what);
        down[r] = (cli_now() - t0) * 1e3;
    }
    median_min(up, COPY_REPS, &b->h2d_ms, &unused);
    median_min(down, COPY_REPS, &b->d2h_ms, &unused);
    b->h2d_bytes = b->d2h_bytes = 0;
    for (int i = 0; i < a->n; i++)
        b->h2d_bytes += ic_tensor_numel(&a->t[i]) * (int64_t)ic_dtype_size(a->t[i].dtype);
    for (int i = 0; i < b->nouts; i++)
        b->d2h_bytes += ic_tensor_numel(&b->outs[i]) * (int64_t)ic_dtype_size(b->outs[i].dtype);
    return true;
}

/* The GPU time of one run, from ic_cuda_time (CUDA events around back-to-back launches) in
 * up to MAX_BATCHES batches that share the --iters runs; median and min over the batches.
 * Then the host side of a call: the wall time of min(--iters, MAX_HOST_CALLS) ic_cuda_launch
 * calls over their number. Launches are asynchronous, so this is what the caller's thread
 * pays per call; the cap keeps the driver's launch queue (about a thousand entries) from
 * filling, which would make the calls wait for the GPU. */
static bool time_cuda_runs(ic_ctx *c, ic_cuda *d, const run_opts *o, backend_run *b, double *ms,
                           cli_err *e)
{
    char what[64];
    cuda_what(b, what, sizeof what);
    int64_t nb = o->iters < MAX_BATCHES ? o->iters : MAX_BATCHES;
    for (int64_t k = 0; k < nb; k++) {
        int64_t n = o->iters / nb + (k < o->iters % nb);
        if (ic_cuda_time(b->gc, (int)n, &ms[k]) != IC_OK)
            return cli_fail_ctx(e, c, what);
    }
    median_min(ms, nb, &b->median_ms, &b->min_ms);
    if (ic_cuda_synchronize(d) != IC_OK)
        return cli_fail_ctx(e, c, what);
    int64_t calls = o->iters < MAX_HOST_CALLS ? o->iters : MAX_HOST_CALLS;
    double t0 = cli_now();
    for (int64_t i = 0; i < calls; i++)
        if (ic_cuda_launch(b->gc) != IC_OK)
            return cli_fail_ctx(e, c, what);
    b->host_us = (cli_now() - t0) * 1e6 / (double)calls;
    if (ic_cuda_synchronize(d) != IC_OK)
        return cli_fail_ctx(e, c, what);
    return true;
}

/* Compiles for the GPU, uploads, warms up, times the runs, the host overhead and the copies;
 * the outputs end in b->outs. */
static bool run_cuda(ic_ctx *c, ic_cuda *d, const ic_graph *g, const run_opts *o,
                     const cli_args *a, bool fusion, backend_run *b, double *ms, cli_err *e)
{
    char what[64];
    cuda_what(b, what, sizeof what);
    ic_cuda_options co;
    ic_cuda_options_init(&co);
    ic_config_apply_cuda(o->cfg, &co);
    co.no_fusion = co.no_fusion || !fusion;
    co.allow_tf32 = co.allow_tf32 || o->allow_tf32;
    b->tf32 = co.allow_tf32;
    if (o->autotune_budget >= 0)
        co.autotune_budget_s = o->autotune_budget;
    if (!b->gc && ic_cuda_compile(d, g, &co, &b->gc) != IC_OK)
        return cli_fail_ctx(e, c, what);
    if (!alloc_outputs(c, g, a->vals, b, e))
        return false;
    /* The first upload compiles a graph with symbols (for these sizes); never timed. */
    if (ic_cuda_upload(b->gc, a->n, a->t) != IC_OK || ic_cuda_synchronize(d) != IC_OK)
        return cli_fail_ctx(e, c, what);
    ic_cuda_compiled_times(b->gc, &b->lower_ms, &b->ptx_ms, &b->load_ms);
    b->compile_ms = b->model_ms > 0 ? b->model_ms : b->lower_ms + b->ptx_ms + b->load_ms;
    for (int64_t i = 0; i < o->warmup; i++) /* reduce-overhead: the first captures the graph */
        if (ic_cuda_launch(b->gc) != IC_OK)
            return cli_fail_ctx(e, c, what);
    if (ic_cuda_synchronize(d) != IC_OK)
        return cli_fail_ctx(e, c, what);
    return time_cuda_runs(c, d, o, b, ms, e) && time_copies(c, d, a, b, e);
}

/* The reference executor allocates its outputs on every run (its API); the last run's stay. */
static bool run_ref(ic_ctx *c, const ic_graph *g, const cli_args *a, int64_t warmup, int64_t iters,
                    backend_run *b, double *ms, cli_err *e)
{
    b->nouts = ic_graph_num_outputs(g);
    if (!(b->outs = calloc((size_t)b->nouts + 1, sizeof *b->outs)))
        return cli_fail(e, "out of memory");
    for (int64_t i = 0; i < warmup + iters; i++) {
        for (int k = 0; k < b->nouts; k++)
            if (b->outs[k].data)
                ic_tensor_free(c, &b->outs[k]);
        double t0 = cli_now();
        ic_status s = ic_ref_run(c, g, a->vals, a->n, a->t, b->nouts, b->outs);
        if (i >= warmup)
            ms[i - warmup] = (cli_now() - t0) * 1e3;
        if (s != IC_OK)
            return cli_fail_ctx(e, c, NULL);
    }
    if (iters > 0)
        median_min(ms, iters, &b->median_ms, &b->min_ms);
    return true;
}

/* ---- checking ---- */

/* f32 outputs of a run with --allow-tf32: TF32 rounds matmul operands to 10-bit mantissas
 * (relative error 2^-11, f16's precision) and sums in f32, so results are compared with bf16's
 * tolerances instead of f32's. Fills r as cli_compare does. */
static bool compare_tf32(const ic_tensor *got, const ic_tensor *want, cli_cmp *r)
{
    if (cli_compare(got, want, r) || !r->same_shape)
        return r->same_shape && r->nbad == 0;
    cli_tol(IC_BF16, &r->rtol, &r->atol);
    r->nbad = 0;
    r->worst_excess = -1;
    for (int64_t i = 0; i < r->nelem; i++) {
        double g = ic_tensor_get(got, i), w = ic_tensor_get(want, i), x;
        if (isnan(g) || isnan(w) || isinf(g) || isinf(w))
            x = (isnan(g) && isnan(w)) || g == w ? 0 : INFINITY;
        else
            x = fabs(g - w) / (r->atol + r->rtol * fabs(w));
        r->nbad += x > 1;
        if (x > r->worst_excess) {
            r->worst_excess = x;
            r->worst = i;
            snprintf(r->got, sizeof r->got, "%.9g", g);
            snprintf(r->want, sizeof r->want, "%.9g", w);
        }
    }
    return r->nbad == 0;
}

/* Compares b's outputs with want (graph output order), printing one line on stderr for each
 * output that differs. */
static bool check_outputs(const ic_graph *g, backend_run *b, const ic_tensor *want,
                          const char *against)
{
    b->checked = true;
    b->matches = true;
    for (int i = 0; i < b->nouts; i++) {
        ic_node_info ni;
        ic_graph_node(g, ic_graph_output(g, i), &ni);
        cli_cmp r;
        char msg[CLI_ERRMAX], who[128];
        bool ok = b->tf32 && want[i].dtype == IC_F32 ? compare_tf32(&b->outs[i], &want[i], &r)
                                                    : cli_compare(&b->outs[i], &want[i], &r);
        if (ok)
            continue;
        snprintf(who, sizeof who, "%s vs %s", b->name, against);
        cli_mismatch_msg(who, ni.name, &b->outs[i], &want[i], &r, msg, sizeof msg);
        cli_report("ic-run", msg);
        b->matches = false;
    }
    return b->matches;
}

/* Reads --expect: one tensor per graph output, by name. */
static bool read_expected(ic_ctx *c, const ic_graph *g, const char *path, ic_safetensors **st,
                          ic_tensor *want, cli_err *e)
{
    if (ic_safetensors_open(c, path, st) != IC_OK) {
        const char *m = ic_last_error(c);
        if (m && strstr(m, path))
            return cli_fail(e, "%s", m);
        return cli_fail(e, "%s: %s", path, m && *m ? m : "cannot open");
    }
    for (int i = 0; i < ic_graph_num_outputs(g); i++) {
        ic_node_info ni;
        ic_graph_node(g, ic_graph_output(g, i), &ni);
        if (ic_safetensors_get(*st, ni.name, &want[i]) != IC_OK)
            return cli_fail(e, "%s: no tensor '%s' (output %d of graph '%s')", path, ni.name, i,
                            ic_graph_name(g));
    }
    return true;
}

/* ---- reporting ---- */

typedef struct {
    int64_t arg_bytes, out_bytes; /* every input and param (weights too) / every output */
} traffic;

static int64_t node_bytes(const ic_graph *g, const ic_node_info *ni, const int64_t *vals)
{
    int64_t n = (int64_t)ic_dtype_size(ni->dtype);
    for (int d = 0; d < ni->rank; d++) {
        int64_t s = 0;
        if (ic_graph_eval_dim(g, ni->shape[d], vals, &s) != IC_OK)
            return 0;
        n *= s;
    }
    return n;
}

/* What a run must at least move: read each input and param once, write each output once
 * (an output listed twice is written once). Intermediates are not counted. */
static traffic count_traffic(const ic_graph *g, const int64_t *vals)
{
    traffic t = { 0, 0 };
    for (int v = 0; v < ic_graph_num_nodes(g); v++) {
        ic_node_info ni;
        ic_graph_node(g, v, &ni);
        if (ni.op == IC_OP_INPUT || ni.op == IC_OP_PARAM)
            t.arg_bytes += node_bytes(g, &ni, vals);
    }
    for (int i = 0; i < ic_graph_num_outputs(g); i++) {
        bool dup = false;
        for (int j = 0; j < i; j++)
            dup |= ic_graph_output(g, j) == ic_graph_output(g, i);
        ic_node_info ni;
        ic_graph_node(g, ic_graph_output(g, i), &ni);
        if (!dup)
            t.out_bytes += node_bytes(g, &ni, vals);
    }
    return t;
}

static double gbps(const traffic *t, const backend_run *b)
{
    return b->median_ms > 0 ? (double)(t->arg_bytes + t->out_bytes) / (b->median_ms * 1e6) : 0;
}

static void print_outputs(const ic_graph *g, const backend_run *b)
{
    for (int i = 0; i < b->nouts; i++) {
        ic_node_info ni;
        char sh[256];
        cli_stats st;
        ic_graph_node(g, ic_graph_output(g, i), &ni);
        cli_tensor_stats(&b->outs[i], &st);
        printf("  %-12s %-4s %-18s", ni.name, ic_dtype_name(b->outs[i].dtype),
               cli_shape_str(&b->outs[i], sh, sizeof sh));
        if (st.n)
            printf(" min %-12.6g max %-12.6g mean %.6g", st.min, st.max, st.mean);
        else if (!st.nan)
            printf(" (empty)");
        if (st.nan)
            printf(" nan %lld", (long long)st.nan);
        putchar('\n');
    }
}

static void print_kernels(const backend_run *b)
{
    int nk = kernel_count(b);
    printf("kernels (%s, %d):", b->name, nk);
    for (int k = 0; k < nk; k++)
        printf("%s %s", k ? "," : "", kernel_name(b, k));
    putchar('\n');
}

/* "512 B", "1.2 kB", "67.1 MB" (powers of 1000, like GB/s). */
static const char *bytes_str(int64_t n, char *buf, size_t cap)
{
    if (n < 1000)
        snprintf(buf, cap, "%lld B", (long long)n);
    else if (n < 1000000)
        snprintf(buf, cap, "%.1f kB", (double)n / 1e3);
    else if (n < 1000000000)
        snprintf(buf, cap, "%.1f MB", (double)n / 1e6);
    else
        snprintf(buf, cap, "%.2f GB", (double)n / 1e9);
    return buf;
}

/* Milliseconds with 3 decimals, or 4 significant digits below 1 ms (tiny graphs). */
static const char *ms_str(double ms, char *buf, size_t cap)
{
    snprintf(buf, cap, ms >= 1 ? "%.3f" : "%.4g", ms);
    return buf;
}

/* "67.1 MB 5.123 ms (13.1 GB/s)" */
static const char *copy_str(int64_t bytes, double ms, char *buf, size_t cap)
{
    char by[32], t[32];
    bytes_str(bytes, by, sizeof by);
    ms_str(ms, t, sizeof t);
    if (ms > 0)
        snprintf(buf, cap, "%s %s ms (%.3g GB/s)", by, t, (double)bytes / (ms * 1e6));
    else
        snprintf(buf, cap, "%s %s ms", by, t);
    return buf;
}

/* --device cuda: per backend, the compile's stages and the copies timed apart. */
static void print_cuda_details(const backend_run *b)
{
    char l[32], p[32], m[32], up[96], down[96];
    printf("compile (%s): lower+fuse %s ms, PTX %s ms, module load %s ms\n", b->name,
           ms_str(b->lower_ms, l, sizeof l), ms_str(b->ptx_ms, p, sizeof p),
           ms_str(b->load_ms, m, sizeof m));
    printf("copies (%s, not in the run times): host->device %s; device->host %s\n", b->name,
           copy_str(b->h2d_bytes, b->h2d_ms, up, sizeof up),
           copy_str(b->d2h_bytes, b->d2h_ms, down, sizeof down));
}

static void print_table(const ic_graph *g, const run_opts *o, ic_cuda *d, const cli_args *a,
                        const traffic *t, backend_run *runs, int nruns, const backend_run *unfused,
                        bool checked)
{
    int ngen = 0;
    for (int i = 0; i < a->n; i++)
        ngen += !a->supplied[i];
    char in[32], out[32];
    printf("%s: %d argument%s (%d generated, seed %llu), %s in + %s out per run; "
           "%lld timed run%s after %lld warmup\n", ic_graph_name(g), a->n, a->n == 1 ? "" : "s",
           ngen, (unsigned long long)o->seed, bytes_str(t->arg_bytes, in, sizeof in),
           bytes_str(t->out_bytes, out, sizeof out), (long long)o->iters, o->iters == 1 ? "" : "s",
           (long long)o->warmup);
    for (int s = 0; s < ic_graph_num_symbols(g); s++)
        printf("  %s=%lld%s", ic_graph_symbol_name(g, s), (long long)a->vals[s],
               s + 1 == ic_graph_num_symbols(g) ? "\n" : "");
    if (d)
        printf("device: %s (sm_%d, %d SMs), cuda:%d, mode %s%s; run times from CUDA events\n",
               ic_cuda_device_name(d), ic_cuda_sm(d), ic_cuda_num_sms(d), o->ordinal, mode_used(o),
               ic_mode_find(mode_used(o))->cuda_graphs ? " (one CUDA graph per run)" : "");
    printf("%-9s %11s %10s %10s %8s %8s %8s", "backend", "compile ms", "median ms", "min ms",
           "GB/s", "speedup", "kernels");
    printf(d ? " %8s\n" : "\n", "host us");
    for (int i = 0; i < nruns; i++) {
        const backend_run *b = &runs[i];
        char comp[32] = "-", speed[32] = "-", nk[32] = "-";
        if (b->compiled) {
            snprintf(comp, sizeof comp, "%.2f", b->compile_ms);
            snprintf(nk, sizeof nk, "%d", kernel_count(b));
        }
        if (unfused && b != unfused && b->median_ms > 0)
            snprintf(speed, sizeof speed, "%.2fx", unfused->median_ms / b->median_ms);
        char med[32], min[32];
        printf("%-9s %11s %10s %10s %8.3g %8s %8s", b->name, comp,
               ms_str(b->median_ms, med, sizeof med), ms_str(b->min_ms, min, sizeof min),
               gbps(t, b), speed, nk);
        if (d)
            printf(" %8.3g", b->host_us);
        putchar('\n');
    }
    for (int i = 0; i < nruns; i++)
        if (runs[i].compiled)
            print_kernels(&runs[i]);
    for (int i = 0; d && i < nruns; i++)
        print_cuda_details(&runs[i]);
    if (checked) {
        bool all = true;
        for (int i = 0; i < nruns; i++)
            all &= runs[i].matches;
        printf("check (%s%s%s): %s\n", o->check ? "reference executor" : "",
               o->check && o->expect ? ", " : "", o->expect ? o->expect : "",
               all ? "every output matches within the spec's tolerances" : "MISMATCH (see stderr)");
    }
    printf("outputs (%s):\n", runs[nruns - 1].name);
    print_outputs(g, &runs[nruns - 1]);
}

/* jansson refuses NaN and infinities: those become null. */
static json_t *jnum(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

static bool config_true(const ic_config *cfg, const char *name)
{
    char v[8];
    return ic_config_get(cfg, name, v, sizeof v) == IC_OK && strcmp(v, "true") == 0;
}

/* The code-changing options of the device as they were resolved: bools and integers as JSON
 * ones, the rest as their text. */
static json_t *json_options(const run_opts *o)
{
    json_t *j = json_object();
    unsigned here = o->cuda ? IC_OPTION_CUDA : IC_OPTION_CPU;
    for (int i = 0; i < ic_option_count(); i++) {
        const ic_option_info *oi = ic_option_get(i);
        char v[256];
        if (!oi->code || !(oi->backends & here) || ic_config_get(o->cfg, oi->name, v, sizeof v))
            continue;
        json_t *jv = oi->type == IC_OPTION_BOOL ? json_boolean(strcmp(v, "true") == 0)
                     : oi->type == IC_OPTION_INT ? json_integer(strtoll(v, NULL, 10))
                                                 : json_string(v);
        json_object_set_new(j, oi->name, jv);
    }
    if (here == IC_OPTION_CPU && o->threads > 0) /* --threads beats the registry's value */
        json_object_set_new(j, "threads", json_integer(o->threads));
    return j;
}

/* What the autotuner and the persistent cache did for the selected backend (null for ref). */
static json_t *json_autotune(const backend_run *b)
{
    if (!b->cc && !b->gc)
        return json_null();
    ic_autotune_stats st;
    if (b->gc)
        ic_cuda_compiled_autotune_stats(b->gc, &st);
    else
        ic_compiled_autotune_stats(b->cc, &st);
    json_t *j = json_object();
    json_object_set_new(j, "kernels", json_integer(st.kernels));
    json_object_set_new(j, "tuned", json_integer(st.tuned));
    json_object_set_new(j, "record_hits", json_integer(st.record_hits));
    json_object_set_new(j, "candidates", json_integer(st.candidates));
    json_object_set_new(j, "replaced", json_integer(st.replaced));
    json_object_set_new(j, "bench_s", jnum(st.bench_s));
    json_object_set_new(j, "compile_s", jnum(st.compile_s));
    json_object_set_new(j, "code_hits", json_integer(st.code_hits));
    json_object_set_new(j, "code_misses", json_integer(st.code_misses));
    return j;
}

/* --device cuda fields of one backend (null on the CPU, so the keys are always there). */
static void json_cuda_fields(json_t *jb, const backend_run *b)
{
    bool g = b->gc != NULL;
    json_object_set_new(jb, "host_overhead_us", g ? jnum(b->host_us) : json_null());
    json_object_set_new(jb, "compile_lower_ms", g ? jnum(b->lower_ms) : json_null());
    json_object_set_new(jb, "compile_ptx_ms", g ? jnum(b->ptx_ms) : json_null());
    json_object_set_new(jb, "compile_load_ms", g ? jnum(b->load_ms) : json_null());
    json_object_set_new(jb, "h2d_bytes", g ? json_integer(b->h2d_bytes) : json_null());
    json_object_set_new(jb, "h2d_ms", g ? jnum(b->h2d_ms) : json_null());
    json_object_set_new(jb, "d2h_bytes", g ? json_integer(b->d2h_bytes) : json_null());
    json_object_set_new(jb, "d2h_ms", g ? jnum(b->d2h_ms) : json_null());
}

static json_t *json_report(const ic_graph *g, const run_opts *o, ic_cuda *d, const cli_args *a,
                           const traffic *t, backend_run *runs, int nruns,
                           const backend_run *unfused, bool checked)
{
    json_t *j = json_object(), *syms = json_object(), *bes = json_object(), *outs = json_array();
    json_object_set_new(j, "graph", json_string(ic_graph_name(g)));
    json_object_set_new(j, "file", json_string(o->graph ? o->graph : o->artifact));
    json_object_set_new(j, "seed", json_integer((json_int_t)o->seed));
    json_object_set_new(j, "iters", json_integer(o->iters));
    json_object_set_new(j, "warmup", json_integer(o->warmup));
    json_object_set_new(j, "threads", json_integer(o->threads > 0 ? o->threads : 0));
    json_object_set_new(j, "device", json_string(o->cuda ? "cuda" : "cpu"));
    json_object_set_new(j, "device_ordinal", o->cuda ? json_integer(o->ordinal) : json_null());
    json_object_set_new(j, "device_name", d ? json_string(ic_cuda_device_name(d)) : json_null());
    json_object_set_new(j, "sm", d ? json_integer(ic_cuda_sm(d)) : json_null());
    json_object_set_new(j, "mode", json_string(ic_config_mode(o->cfg)));
    json_object_set_new(j, "mode_used", json_string(mode_used(o)));
    json_object_set_new(j, "template", ic_config_template(o->cfg) ? json_string(ic_config_template(o->cfg))
                                                                   : json_null());
    json_object_set_new(j, "allow_tf32", json_boolean(o->allow_tf32 || config_true(o->cfg, "allow_tf32")));
    json_object_set_new(j, "freezing", json_boolean(config_true(o->cfg, "freezing")));
    json_object_set_new(j, "options", json_options(o));
    for (int s = 0; s < ic_graph_num_symbols(g); s++)
        json_object_set_new(syms, ic_graph_symbol_name(g, s), json_integer(a->vals[s]));
    json_object_set_new(j, "symbols", syms);
    json_object_set_new(j, "bytes_in", json_integer(t->arg_bytes));
    json_object_set_new(j, "bytes_out", json_integer(t->out_bytes));
    for (int i = 0; i < nruns; i++) {
        const backend_run *b = &runs[i];
        json_t *jb = json_object();
        json_object_set_new(jb, "compile_ms", b->compiled ? jnum(b->compile_ms) : json_null());
        json_object_set_new(jb, "run_ms_median", jnum(b->median_ms));
        json_object_set_new(jb, "run_ms_min", jnum(b->min_ms));
        json_object_set_new(jb, "gb_per_s", jnum(gbps(t, b)));
        json_t *names = json_array();
        int nk = b->compiled ? kernel_count(b) : 0;
        for (int k = 0; k < nk; k++)
            json_array_append_new(names, json_string(kernel_name(b, k)));
        json_object_set_new(jb, "kernels", b->compiled ? json_integer(nk) : json_null());
        json_object_set_new(jb, "kernel_names", names);
        json_object_set_new(jb, "check", !b->checked ? json_null()
                                         : b->matches ? json_string("match")
                                                      : json_string("mismatch"));
        json_cuda_fields(jb, b);
        json_object_set_new(bes, b->name, jb);
    }
    json_object_set_new(j, "backend", json_string(o->backend));
    json_object_set_new(j, "backends", bes);
    const backend_run *last = &runs[nruns - 1];
    json_object_set_new(j, "speedup", unfused && unfused != last && last->median_ms > 0
                                          ? jnum(unfused->median_ms / last->median_ms)
                                          : json_null());
    bool all = true;
    for (int i = 0; i < nruns; i++)
        all &= runs[i].matches;
    json_object_set_new(j, "check", checked ? json_boolean(all) : json_null());
    for (int i = 0; i < last->nouts; i++) {
        ic_node_info ni;
        cli_stats st;
        ic_graph_node(g, ic_graph_output(g, i), &ni);
        cli_tensor_stats(&last->outs[i], &st);
        json_t *jo = json_object(), *sh = json_array();
        json_object_set_new(jo, "name", json_string(ni.name));
        json_object_set_new(jo, "dtype", json_string(ic_dtype_name(last->outs[i].dtype)));
        for (int d = 0; d < last->outs[i].rank; d++)
            json_array_append_new(sh, json_integer(last->outs[i].shape[d]));
        json_object_set_new(jo, "shape", sh);
        json_object_set_new(jo, "min", st.n ? jnum(st.min) : json_null());
        json_object_set_new(jo, "max", st.n ? jnum(st.max) : json_null());
        json_object_set_new(jo, "mean", st.n ? jnum(st.mean) : json_null());
        json_object_set_new(jo, "nan", json_integer(st.nan));
        json_array_append_new(outs, jo);
    }
    json_object_set_new(j, "outputs", outs);
    json_object_set_new(j, "autotune", json_autotune(last));
    return j;
}

/* ---- the command ---- */

typedef struct {
    ic_graph *g;
    cli_args a;
    backend_run runs[2], ref; /* runs: [unfused,] the selected backend; ref for --check */
    int nruns;
    double *ms;               /* per-iteration times, allocated before timing */
    ic_safetensors *expect;
    ic_tensor *want;
    ic_cuda *dev;             /* --device cuda */
    ic_compiled *loaded;      /* --artifact: the model, until the compiled run takes it */
    ic_cuda_compiled *gloaded; /* --artifact --device cuda: the same */
    double load_ms;
    bool model_graph;         /* --artifact: g belongs to the model (freed with it) */
} run_state;

static void state_free(ic_ctx *c, run_state *st)
{
    for (int i = 0; i < st->nruns; i++)
        backend_free(c, &st->runs[i]);
    backend_free(c, &st->ref);
    ic_cuda_compiled_destroy(st->gloaded);
    ic_cuda_close(st->dev);   /* after every compiled graph of it */
    free(st->ms);
    free(st->want);
    ic_safetensors_close(st->expect);
    cli_args_free(c, &st->a);
    ic_compiled_destroy(st->loaded);
    if (!st->model_graph)
        ic_graph_destroy(st->g);
}

/* Runs the backends, then checks; returns the exit status (0, 1 with e set, 2). */
static int run_backends(ic_ctx *c, const run_opts *o, run_state *st, cli_err *e)
{
    const ic_graph *g = st->g;
    bool ref = strcmp(o->backend, "ref") == 0, unfused = strcmp(o->backend, "unfused") == 0;
    if (!ref && !unfused && !o->no_compare)
        st->runs[st->nruns++] = (backend_run){ .name = "unfused", .compiled = true };
    st->runs[st->nruns++] = (backend_run){ .name = o->backend, .compiled = !ref };
    for (int i = 0; i < st->nruns; i++) {
        backend_run *b = &st->runs[i];
        bool fused = strcmp(b->name, "compiled") == 0;
        if (fused && (st->loaded || st->gloaded)) { /* --artifact */
            b->cc = st->loaded, b->gc = st->gloaded, b->model_ms = st->load_ms;
            st->loaded = NULL, st->gloaded = NULL;
        }
        bool ok = ref       ? run_ref(c, g, &st->a, o->warmup, o->iters, b, st->ms, e)
                  : st->dev ? run_cuda(c, st->dev, g, o, &st->a, fused, b, st->ms, e)
                            : run_compiled(c, g, o, &st->a, fused, b, st->ms, e);
        if (!ok)
            return 1;
    }
    int rc = 0;
    if (o->check && !ref) {
        if (!run_ref(c, g, &st->a, 0, 1, &st->ref, st->ms, e))
            return 1;
        for (int i = 0; i < st->nruns; i++)
            if (!check_outputs(g, &st->runs[i], st->ref.outs, "reference"))
                rc = 2;
    } else if (o->check) {
        for (int i = 0; i < st->nruns; i++) /* the reference is its own oracle */
            st->runs[i].checked = st->runs[i].matches = true;
    }
    if (o->expect) {
        for (int i = 0; i < st->nruns; i++) {
            bool was = !st->runs[i].checked || st->runs[i].matches;
            if (!check_outputs(g, &st->runs[i], st->want, o->expect) || !was) {
                st->runs[i].matches = false;
                rc = 2;
            }
        }
    }
    return rc;
}

/* --device cuda: the GPU (st->dev), once. */
static bool open_device(ic_ctx *c, const run_opts *o, run_state *st, cli_err *e)
{
    if (!o->cuda || st->dev)
        return true;
    if (ic_cuda_open(c, o->ordinal, &st->dev) == IC_OK)
        return true;
    const char *m = ic_last_error(c);
    if (m && strstr(m, "no CUDA driver found"))
        return cli_fail(e, "--device %s: %s; --device cpu runs without one", o->device, m);
    return cli_fail(e, "--device %s: %s", o->device, m && *m ? m : "cannot open the GPU");
}

/* --artifact: the model and its graph, in the load's time (a GPU model: after opening the
 * device, which is not counted). */
static bool load_model(ic_ctx *c, const run_opts *o, run_state *st, cli_err *e)
{
    if (!open_device(c, o, st, e))
        return false;
    double t0 = cli_now();
    if (st->dev ? ic_cuda_compiled_load(st->dev, o->artifact, &st->gloaded) != IC_OK
                : ic_compiled_load(c, o->artifact, &st->loaded) != IC_OK)
        return cli_fail_ctx(e, c, NULL);
    st->load_ms = (cli_now() - t0) * 1e3;
    st->g = (ic_graph *)(st->dev ? ic_cuda_compiled_graph(st->gloaded) : ic_compiled_graph(st->loaded));
    st->model_graph = true;
    return true;
}

/* --save-artifact: the last backend's compiled graph, weights included. */
static bool save_model(ic_ctx *c, const run_opts *o, run_state *st, cli_err *e)
{
    const backend_run *b = &st->runs[st->nruns - 1];
    if ((b->gc ? ic_cuda_compiled_save(b->gc, o->save_artifact, true)
               : ic_compiled_save(b->cc, o->save_artifact, true)) != IC_OK)
        return cli_fail_ctx(e, c, NULL);
    if (!o->json)
        printf("saved the compiled model (%s) to %s\n", b->name, o->save_artifact);
    return true;
}

static int run(ic_ctx *c, const run_opts *o, cli_err *e)
{
    run_state st = { 0 };
    int rc = 1;
    /* Cheap checks on names first, so a bad command line never touches anything. */
    const char *source = o->graph ? o->graph : o->artifact;
    if (o->save && !cli_check_not_input(NULL, source, o->inputs, o->save, e))
        return 1;
    if (o->save_artifact && (cli_same_file(o->save_artifact, source) ||
                             (o->inputs && cli_same_file(o->save_artifact, o->inputs))))
        return cli_fail(e, "refusing to write the compiled model to '%s': it is an input of this run",
                        o->save_artifact), 1;
    if (o->artifact ? !load_model(c, o, &st, e) : !cli_load_graph(c, o->graph, &st.g, e))
        goto done;
    if (o->save && !cli_check_not_input(st.g, source, o->inputs, o->save, e))
        goto done;
    if (!cli_args_prepare(c, st.g, o->inputs, o->binds, o->nbinds, o->seed, &st.a, e))
        goto done;
    /* the expected outputs are read before the long runs, so a bad file fails fast */
    if (o->expect) {
        if (!(st.want = calloc((size_t)ic_graph_num_outputs(st.g) + 1, sizeof *st.want))) {
            cli_fail(e, "out of memory");
            goto done;
        }
        if (!read_expected(c, st.g, o->expect, &st.expect, st.want, e))
            goto done;
    }
    if (!(st.ms = calloc((size_t)o->iters + 1, sizeof *st.ms))) {
        cli_fail(e, "out of memory");
        goto done;
    }
    if (!open_device(c, o, &st, e))
        goto done;
    ic_switches sw;
    ic_ctx_switches(c, &sw);
    if (sw.no_fusion && strcmp(o->backend, "compiled") == 0 && !o->json)
        printf("note: %s: the compiled backend builds one kernel per op too\n",
               ic_config_is_set(o->cfg, "fusion") ? "option fusion is false" : "IC_NO_FUSION is set");
    rc = run_backends(c, o, &st, e);
    if (rc == 1)
        goto done;
    note_mode(o);
    traffic t = count_traffic(st.g, st.a.vals);
    const backend_run *unf = st.nruns == 2 ? &st.runs[0] : NULL;
    bool checked = o->check || o->expect;
    if (o->json) {
        json_t *j = json_report(st.g, o, st.dev, &st.a, &t, st.runs, st.nruns, unf, checked);
        char *text = j ? json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9)) : NULL;
        json_decref(j);
        if (!text) {
            rc = 1;
            cli_fail(e, "out of memory");
            goto done;
        }
        puts(text);
        free(text);
    } else {
        print_table(st.g, o, st.dev, &st.a, &t, st.runs, st.nruns, unf, checked);
    }
    if (o->save_artifact && !save_model(c, o, &st, e)) {
        rc = 1;
        goto done;
    }
    if (o->save) {
        backend_run *b = &st.runs[st.nruns - 1];
        if (!cli_save_outputs(c, st.g, o->save, b->nouts, b->outs, e)) {
            rc = 1;
            goto done;
        }
        if (!o->json)
            printf("saved %d output%s to %s\n", b->nouts, b->nouts == 1 ? "" : "s", o->save);
    }
done:
    if (fflush(stdout) != 0 && rc != 1) {
        cli_fail(e, "cannot write to standard output");
        rc = 1;
    }
    state_free(c, &st);
    return rc;
}

/* ---- the configuration: --config, --template, --freezing, --mode, --option ---- */

static bool build_config(ic_ctx *c, run_opts *o, cli_err *e)
{
    if (ic_config_create(c, &o->cfg) != IC_OK)
        return cli_fail_ctx(e, c, NULL);
    if (o->config && ic_config_parse(o->cfg, o->config) != IC_OK)
        return cli_fail_ctx(e, c, "--config");
    if (o->tmpl && ic_config_set_template(o->cfg, o->tmpl) != IC_OK)
        return cli_fail_ctx(e, c, "--template");
    if (o->freezing)
        ic_config_set_freezing(o->cfg, true);
    if (o->mode_given && ic_config_set_mode(o->cfg, o->mode) != IC_OK)
        return cli_fail_ctx(e, c, "--mode");
    for (int i = 0; i < o->noptions; i++) {
        char name[128], what[300];
        const char *eq = strchr(o->options[i], '=');
        snprintf(name, sizeof name, "%.*s", (int)(eq - o->options[i]), o->options[i]);
        snprintf(what, sizeof what, "--option %s", o->options[i]);
        if (ic_config_set(o->cfg, name, eq + 1) != IC_OK)
            return cli_fail_ctx(e, c, what);
    }
    /* the options that live in the context (iconv, cache_dir, autotune_log, ...) */
    ic_switches sw;
    ic_ctx_switches(c, &sw);
    ic_config_apply_switches(o->cfg, &sw);
    if (ic_ctx_set_switches(c, &sw) != IC_OK)
        return cli_fail_ctx(e, c, NULL);
    return true;
}

static const char *const type_names[] = { "bool", "int", "float", "enum", "flags", "string" };

/* --list-options: one line per option, then what each accepts. */
static void list_options(void)
{
    printf("%-17s %-6s %-8s %-19s %-5s %-9s %s\n", "option", "type", "default", "environment",
           "code", "backends", "doc");
    for (int i = 0; i < ic_option_count(); i++) {
        const ic_option_info *oi = ic_option_get(i);
        printf("%-17s %-6s %-8s %-19s %-5s %-9s %s\n", oi->name, type_names[oi->type],
               *oi->def ? oi->def : "\"\"", oi->env ? oi->env : "-", oi->code ? "yes" : "no",
               oi->backends == IC_OPTION_BOTH ? "cpu,cuda" : oi->backends == IC_OPTION_CPU ? "cpu" : "cuda",
               oi->doc);
    }
    printf("\naccepted values:\n");
    for (int i = 0; i < ic_option_count(); i++)
        printf("  %-17s %s\n", ic_option_get(i)->name, ic_option_get(i)->values);
    printf("\ncode = yes: the option changes generated code and is part of the cache keys.\n");
}

/* A mode's options as "name=value" words (separated by sep); "" for default. */
static const char *mode_options(const ic_mode_info *m, const char *sep, char *buf, size_t n)
{
    char tune[128];
    snprintf(buf, n, "%s%s%s%s", m->cuda_graphs ? "cuda_graphs=true" : "",
             m->cuda_graphs && m->autotune ? sep : "", m->autotune ? "autotune=" : "",
             m->autotune ? ic_autotune_text(m->autotune, tune, sizeof tune) : "");
    return buf;
}

/* --list-mode-options [MODE]: every mode and its options, or MODE's options one a line. */
static void list_modes(const char *only)
{
    char buf[256];
    if (only) {
        const ic_mode_info *m = ic_mode_find(only);
        if (m->cuda_graphs || m->autotune)
            printf("%s\n", mode_options(m, "\n", buf, sizeof buf));
        else
            printf("# %s sets no options\n", m->name);
        return;
    }
    for (int i = 0; i < ic_mode_count(); i++) {
        const ic_mode_info *m = ic_mode_get(i);
        printf("%-27s {%s}  %s\n", m->name, mode_options(m, ", ", buf, sizeof buf), m->doc);
    }
    printf("(cuda_graphs has no effect on the CPU)\n");
}

int main(int argc, char **argv)
{
    run_opts o;
    cli_err e = { "" };
    if (!parse_args(argc, argv, &o, &e)) {
        cli_report("ic-run", e.msg);
        return 1;
    }
    if (o.help) {
        fputs(usage, stdout);
        return 0;
    }
    if (o.version) {
        printf("ic-run (ic-llvm) %s, build %s\n", ic_version(), ic_build_id());
        return fflush(stdout) == 0 ? 0 : 1;
    }
    if (o.list_options || o.list_modes) {
        if (o.list_options)
            list_options();
        if (o.list_modes)
            list_modes(o.list_mode);
        return fflush(stdout) == 0 ? 0 : 1;
    }
    ic_ctx *c = NULL;
    if (ic_ctx_create(NULL, &c) != IC_OK) {
        cli_report("ic-run", "cannot create a context (out of memory)");
        return 1;
    }
    int rc = 1;
    if (build_config(c, &o, &e)) {
        cli_log_init(c, "ic-run"); /* after the switches: option log_level counts */
        rc = run(c, &o, &e);
    }
    if (rc == 1)
        cli_report("ic-run", e.msg);
    ic_config_destroy(o.cfg);
    ic_ctx_destroy(c);
    return rc;
}
