/* ic-dump.c - print a graph at one stage of the pipeline: the graph itself (inferred dtypes
 * and shapes, one node a line); later the loop IR, fused kernels, LLVM IR, assembly and PTX.
 * Exit 0 on success, 1 with one line on stderr for bad input or usage. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include "common/cli.h"

static const char usage[] =
    "usage: ic-dump GRAPH.json [options]\n"
    "\n"
    "Prints a graph at one stage of the pipeline.\n"
    "\n"
    "options:\n"
    "  --stage NAME     graph (default): one node a line with inferred dtype and shape;\n"
    "                   loops, fused, llvm, asm, ptx are not available yet\n"
    "  --bind SYM=N     specialise symbolic dimensions before printing (repeatable)\n"
    "  -h, --help       this text\n";

/* A stage prints g (already specialised when --bind was given) to f. */
typedef bool (*stage_fn)(ic_ctx *c, const ic_graph *g, FILE *f, cli_err *e);

static bool stage_graph(ic_ctx *c, const ic_graph *g, FILE *f, cli_err *e)
{
    (void)c;
    (void)e;
    ic_graph_print(f, g);
    return true;
}

/* Pipeline order. A stage whose fn is NULL is known but not built yet. */
static const struct stage {
    const char *name;
    stage_fn fn;
    const char *what;
} stages[] = {
    { "graph", stage_graph, "graph IR with inferred dtypes and shapes" },
    { "loops", NULL, "loop-nest kernels (Lower)" },
    { "fused", NULL, "fused kernels (Fuse)" },
    { "llvm", NULL, "LLVM IR (LLVMGen)" },
    { "asm", NULL, "host assembly" },
    { "ptx", NULL, "PTX (GPU)" },
};
enum { NSTAGES = sizeof stages / sizeof stages[0] };

static const struct stage *find_stage(const char *name, cli_err *e)
{
    char list[256];
    size_t k = 0;
    for (int i = 0; i < NSTAGES; i++)
        k += (size_t)snprintf(list + k, sizeof list - k, "%s%s", i ? ", " : "", stages[i].name);
    for (int i = 0; i < NSTAGES; i++)
        if (strcmp(stages[i].name, name) == 0) {
            if (!stages[i].fn) {
                cli_fail(e, "stage '%s' (%s) is not available yet (stages: %s)", name,
                         stages[i].what, list);
                return NULL;
            }
            return &stages[i];
        }
    cli_fail(e, "unknown stage '%s' (stages: %s)", name, list);
    return NULL;
}

typedef struct {
    const char *graph, *stage;
    cli_bind binds[CLI_MAX_BINDS];
    int nbinds;
    bool help;
} dump_opts;

static bool parse_args(int argc, char **argv, dump_opts *o, cli_err *e)
{
    memset(o, 0, sizeof *o);
    o->stage = "graph";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            o->help = true;
            return true;
        }
        if (cli_opt(argc, argv, &i, "--stage", &v, e)) {
            if (!(o->stage = v))
                return false;
        } else if (cli_opt(argc, argv, &i, "--bind", &v, e)) {
            if (!v)
                return false;
            if (o->nbinds >= CLI_MAX_BINDS)
                return cli_fail(e, "too many --bind options (at most %d)", CLI_MAX_BINDS);
            if (!cli_parse_bind(v, &o->binds[o->nbinds++], e))
                return false;
        } else if (a[0] == '-' && a[1]) {
            return cli_fail(e, "unknown option '%s' (see ic-dump -h)", a);
        } else if (o->graph) {
            return cli_fail(e, "one graph at a time: '%s' and '%s' (see ic-dump -h)", o->graph, a);
        } else {
            o->graph = a;
        }
    }
    if (!o->graph)
        return cli_fail(e, "no graph given (usage: ic-dump GRAPH.json [--stage graph]; see ic-dump -h)");
    return true;
}

/* With --bind, every symbol must be bound and the graph is specialised (concrete shapes). */
static bool specialise(ic_ctx *c, const ic_graph *g, const dump_opts *o, ic_graph **out, cli_err *e)
{
    *out = NULL;
    if (!o->nbinds)
        return true;
    int nsym = ic_graph_num_symbols(g);
    int64_t *vals = malloc(((size_t)nsym + 1) * sizeof *vals);
    if (!vals)
        return cli_fail(e, "out of memory");
    for (int s = 0; s < nsym; s++)
        vals[s] = -1;
    bool ok = true;
    for (int b = 0; ok && b < o->nbinds; b++)
        if (ic_graph_bind(g, o->binds[b].sym, o->binds[b].value, vals) != IC_OK)
            ok = cli_fail_ctx(e, c, NULL);
    for (int s = 0; ok && s < nsym; s++)
        if (vals[s] < 0)
            ok = cli_fail(e, "graph '%s': symbol '%s' is not bound: pass --bind %s=N",
                          ic_graph_name(g), ic_graph_symbol_name(g, s), ic_graph_symbol_name(g, s));
    if (ok && ic_graph_specialize(g, vals, out) != IC_OK)
        ok = cli_fail_ctx(e, c, NULL);
    free(vals);
    return ok;
}

int main(int argc, char **argv)
{
    dump_opts o;
    cli_err e = { "" };
    if (!parse_args(argc, argv, &o, &e)) {
        cli_report("ic-dump", e.msg);
        return 1;
    }
    if (o.help) {
        fputs(usage, stdout);
        return 0;
    }
    const struct stage *st = find_stage(o.stage, &e);
    if (!st) {
        cli_report("ic-dump", e.msg);
        return 1;
    }
    ic_ctx *c = NULL;
    if (ic_ctx_create(NULL, &c) != IC_OK) {
        cli_report("ic-dump", "cannot create a context (out of memory)");
        return 1;
    }
    ic_graph *g = NULL, *sg = NULL;
    bool ok = cli_load_graph(c, o.graph, &g, &e) && specialise(c, g, &o, &sg, &e) &&
              st->fn(c, sg ? sg : g, stdout, &e);
    if (ok && fflush(stdout) != 0)
        ok = cli_fail(&e, "cannot write to standard output");
    if (!ok)
        cli_report("ic-dump", e.msg);
    ic_graph_destroy(sg); /* borrows param data from g: destroy first */
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
    return ok ? 0 : 1;
}
