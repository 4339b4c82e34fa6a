/* ic-run.c - load a graph, bind and generate its run-time arguments, run it on a backend,
 * print a summary and optionally save the outputs. Exit 0 on success, 1 with one line on
 * stderr for bad input or usage. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "common/cli.h"

static const char usage[] =
    "usage: ic-run GRAPH.json [options]\n"
    "\n"
    "Runs an ic-graph (JSON v1) and prints each output's dtype, shape, min/max/mean and the\n"
    "run time. Run-time arguments (inputs, params without \"file\") are read by name from\n"
    "--inputs; the others are generated from --seed.\n"
    "\n"
    "options:\n"
    "  --inputs IN.safetensors      tensors supplied by name (symbols bind from their shapes)\n"
    "  --save-outputs OUT.safetensors  write the outputs by name (atomically; never over an input)\n"
    "  --bind SYM=N                 size of a symbolic dimension (repeatable)\n"
    "  --seed N                     seed of the generated data (default 0)\n"
    "  --backend NAME               ref (default); unfused and compiled are not available yet\n"
    "  -h, --help                   this text\n";

typedef struct {
    const char *graph, *inputs, *save, *backend;
    cli_bind binds[CLI_MAX_BINDS];
    int nbinds;
    uint64_t seed;
    bool help;
} run_opts;

/* A backend runs g on args into freshly allocated outs (freed with ic_tensor_free). Later
 * backends (unfused, compiled) plug in here with their own options (--check, --iters). */
typedef bool (*run_fn)(ic_ctx *c, const ic_graph *g, const cli_args *a, int nouts,
                       ic_tensor *outs, cli_err *e);

static bool run_ref(ic_ctx *c, const ic_graph *g, const cli_args *a, int nouts, ic_tensor *outs,
                    cli_err *e)
{
    if (ic_ref_run(c, g, a->vals, a->n, a->t, nouts, outs) != IC_OK)
        return cli_fail_ctx(e, c, NULL);
    return true;
}

static const struct backend {
    const char *name;
    run_fn run;        /* NULL: not available yet */
    const char *what;
} backends[] = {
    { "ref", run_ref, "reference executor (plain C, op by op)" },
    { "unfused", NULL, "JIT, one kernel per op" },
    { "compiled", NULL, "JIT with fusion" },
};

static const struct backend *find_backend(const char *name, cli_err *e)
{
    for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++)
        if (strcmp(backends[i].name, name) == 0) {
            if (!backends[i].run) {
                cli_fail(e, "backend '%s' (%s) is not available yet; use --backend ref", name,
                         backends[i].what);
                return NULL;
            }
            return &backends[i];
        }
    cli_fail(e, "unknown backend '%s' (backends: ref, unfused, compiled)", name);
    return NULL;
}

static bool parse_args(int argc, char **argv, run_opts *o, cli_err *e)
{
    memset(o, 0, sizeof *o);
    o->backend = "ref";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            o->help = true;
            return true;
        }
        if (cli_opt(argc, argv, &i, "--inputs", &v, e)) {
            if (!(o->inputs = v))
                return false;
        } else if (cli_opt(argc, argv, &i, "--save-outputs", &v, e)) {
            if (!(o->save = v))
                return false;
        } else if (cli_opt(argc, argv, &i, "--backend", &v, e)) {
            if (!(o->backend = v))
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
    if (!o->graph)
        return cli_fail(e, "no graph given (usage: ic-run GRAPH.json [options]; see ic-run -h)");
    if (o->save && *o->save == 0)
        return cli_fail(e, "--save-outputs needs a file name");
    return true;
}

static void print_summary(const ic_graph *g, const run_opts *o, const cli_args *a, int nouts,
                          const ic_tensor *outs, double secs)
{
    int ngen = 0;
    for (int i = 0; i < a->n; i++)
        ngen += !a->supplied[i];
    printf("%s: backend %s, %.3f ms, %d argument%s (%d generated, seed %llu)\n", ic_graph_name(g),
           o->backend, secs * 1e3, a->n, a->n == 1 ? "" : "s", ngen,
           (unsigned long long)o->seed);
    for (int s = 0; s < ic_graph_num_symbols(g); s++)
        printf("  %s=%lld%s", ic_graph_symbol_name(g, s), (long long)a->vals[s],
               s + 1 == ic_graph_num_symbols(g) ? "\n" : "");
    for (int i = 0; i < nouts; i++) {
        ic_node_info ni;
        char sh[256];
        cli_stats st;
        ic_graph_node(g, ic_graph_output(g, i), &ni);
        cli_tensor_stats(&outs[i], &st);
        printf("  %-12s %-4s %-18s", ni.name, ic_dtype_name(outs[i].dtype),
               cli_shape_str(&outs[i], sh, sizeof sh));
        if (st.n)
            printf(" min %-12.6g max %-12.6g mean %.6g", st.min, st.max, st.mean);
        else if (!st.nan)
            printf(" (empty)");
        if (st.nan)
            printf(" nan %lld", (long long)st.nan);
        putchar('\n');
    }
}

static int run(ic_ctx *c, const run_opts *o, cli_err *e)
{
    ic_graph *g = NULL;
    cli_args a = { 0 };
    ic_tensor *outs = NULL;
    int nouts = 0;
    bool ok = false;
    const struct backend *be = find_backend(o->backend, e);
    if (!be)
        return 1;
    /* Cheap checks on names first, so a bad command line never touches anything. */
    if (o->save && !cli_check_not_input(NULL, o->graph, o->inputs, o->save, e))
        return 1;
    if (!cli_load_graph(c, o->graph, &g, e))
        goto done;
    if (o->save && !cli_check_not_input(g, o->graph, o->inputs, o->save, e))
        goto done;
    if (!cli_args_prepare(c, g, o->inputs, o->binds, o->nbinds, o->seed, &a, e))
        goto done;
    nouts = ic_graph_num_outputs(g);
    if (!(outs = calloc((size_t)nouts + 1, sizeof *outs))) {
        cli_fail(e, "out of memory");
        goto done;
    }
    double t0 = cli_now();
    if (!be->run(c, g, &a, nouts, outs, e))
        goto done;
    double secs = cli_now() - t0;
    print_summary(g, o, &a, nouts, outs, secs);
    if (o->save) {
        if (!cli_save_outputs(c, g, o->save, nouts, outs, e))
            goto done;
        printf("saved %d output%s to %s\n", nouts, nouts == 1 ? "" : "s", o->save);
    }
    ok = true;
done:
    for (int i = 0; outs && i < nouts; i++)
        if (outs[i].data)
            ic_tensor_free(c, &outs[i]);
    free(outs);
    cli_args_free(c, &a);
    ic_graph_destroy(g);
    return ok ? 0 : 1;
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
    ic_ctx *c = NULL;
    if (ic_ctx_create(NULL, &c) != IC_OK) {
        cli_report("ic-run", "cannot create a context (out of memory)");
        return 1;
    }
    int rc = run(c, &o, &e);
    if (rc)
        cli_report("ic-run", e.msg);
    ic_ctx_destroy(c);
    return rc;
}
