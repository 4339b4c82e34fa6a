/* ic-dump.c - print a graph at one stage of the pipeline: the graph itself (inferred dtypes
 * and shapes, one node a line), the loop IR one kernel per op, the fused kernels, the LLVM IR
 * before and after O3 and the host assembly (ic_compile_dump), and PTX (lib/PTX) when built.
 * Exit 0 on success, 1 with one line on stderr for bad input or usage. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include "common/cli.h"
#include "ic/fuse.h"
#include "ic/lower.h"
#if __has_include("ic/ptx.h")
#include "ic/ptx.h"
#define IC_DUMP_HAS_PTX 1
#endif

static const char usage[] =
    "usage: ic-dump GRAPH.json [options]\n"
    "\n"
    "Prints a graph at one stage of the pipeline, after a one-line banner.\n"
    "\n"
    "options:\n"
    "  --stage NAME     graph (default): one node a line with inferred dtype and shape;\n"
    "                   loops: loop-nest kernels, one per op (Lower);\n"
    "                   fused: the kernels after fusion, with each boundary's reason (Fuse);\n"
    "                   llvm: LLVM IR before O3; llvm-opt: after O3; asm: host assembly;\n"
    "                   ptx: PTX for an sm_90 GPU (no GPU needed; when built with lib/PTX)\n"
    "  --bind SYM=N     size of a symbolic dimension (repeatable); every stage but graph\n"
    "                   needs every symbol bound\n"
    "  --no-fusion      fused, llvm, llvm-opt, asm, ptx: one kernel per op (as IC_NO_FUSION=1)\n"
    "  -h, --help       this text\n";

typedef struct {
    const char *graph, *stage;
    cli_bind binds[CLI_MAX_BINDS];
    int nbinds;
    bool no_fusion, help;
} dump_opts;

/* A stage prints g (the original graph; vals binds its symbols, NULL when it has none) to f.
 * The graph stage prints the graph specialised by --bind when given (sg). */
typedef bool (*stage_fn)(ic_ctx *c, const ic_graph *g, const ic_graph *sg, const int64_t *vals,
                         const dump_opts *o, const char *stage, FILE *f, cli_err *e);

static bool stage_graph(ic_ctx *c, const ic_graph *g, const ic_graph *sg, const int64_t *vals,
                        const dump_opts *o, const char *stage, FILE *f, cli_err *e)
{
    ic_graph_print(f, sg ? sg : g);
    return true;
}

/* The compiler's stages, printed by the runtime (nothing is JIT-compiled). */
static bool stage_compile(ic_ctx *c, const ic_graph *g, const ic_graph *sg, const int64_t *vals,
                          const dump_opts *o, const char *stage, FILE *f, cli_err *e)
{
    ic_compile_options co;
    ic_compile_options_init(&co);
    co.debug = 0; /* a dump is not a compile: no debug folder */
    if (o->no_fusion)
        co.fusion = 0;
    if (ic_compile_dump(c, g, &co, vals, stage, f) != IC_OK)
        return cli_fail_ctx(e, c, NULL);
    return true;
}

#ifdef IC_DUMP_HAS_PTX
/* PTX for the default GPU (ic_ptx_options defaults: sm_90) from the fused loop IR, as
 * ic_cuda_compile would build it; needs no GPU. */
static bool stage_ptx(ic_ctx *c, const ic_graph *g, const ic_graph *sg, const int64_t *vals,
                      const dump_opts *o, const char *stage, FILE *f, cli_err *e)
{
    ic_graph *spec = NULL;
    ic_program *loops = NULL, *fused = NULL;
    ic_ptx_module *m = NULL;
    const char *nf = getenv("IC_NO_FUSION");
    bool fusion = !o->no_fusion && !(nf && *nf && strcmp(nf, "0") != 0);
    bool ok = !vals || ic_graph_specialize(g, vals, &spec) == IC_OK;
    ok = ok && ic_lower(c, spec ? spec : g, &loops) == IC_OK;
    if (ok && fusion) {
        ic_fuse_options fo;
        ic_fuse_options_init(&fo);
        ok = ic_fuse(c, loops, &fo, &fused) == IC_OK;
    }
    ok = ok && ic_ptx_emit(c, fused ? fused : loops, NULL, NULL, &m) == IC_OK;
    if (ok)
        fputs(ic_ptx_module_text(m), f);
    else
        cli_fail_ctx(e, c, NULL);
    ic_ptx_module_destroy(m);
    if (fused)
        ic_program_destroy(fused);
    if (loops)
        ic_program_destroy(loops);
    ic_graph_destroy(spec);
    return ok;
}
#else
#define stage_ptx NULL
#endif

/* Pipeline order. A stage whose fn is NULL is known but not built yet. comment: what starts a
 * comment line in the stage's language, so the banner keeps LLVM IR and assembly parseable
 * (ic-dump --stage llvm | opt ...). */
static const struct stage {
    const char *name;
    stage_fn fn;
    const char *what, *comment;
} stages[] = {
    { "graph", stage_graph, "graph IR with inferred dtypes and shapes", "" },
    { "loops", stage_compile, "loop-nest kernels, one per op (Lower)", "" },
    { "fused", stage_compile, "fused kernels (Fuse)", "" },
    { "llvm", stage_compile, "LLVM IR before O3 (LLVMGen)", "; " },
    { "llvm-opt", stage_compile, "LLVM IR after O3", "; " },
    { "asm", stage_compile, "host assembly", "# " },
    { "ptx", stage_ptx, "PTX for sm_90 (GPU)", "// " },
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
        if (strcmp(a, "--no-fusion") == 0) {
            o->no_fusion = true;
        } else if (cli_opt(argc, argv, &i, "--stage", &v, e)) {
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

/* Symbol values from --bind, every symbol bound (*vals NULL when the graph has none or when
 * !all: the graph stage without --bind, which needs none). */
static bool bind_symbols(ic_ctx *c, const ic_graph *g, const dump_opts *o, bool all,
                         int64_t **vals, cli_err *e)
{
    *vals = NULL;
    int nsym = ic_graph_num_symbols(g);
    if (!all || (!nsym && !o->nbinds))
        return true; /* the graph stage without --bind prints the symbolic graph */
    if (!(*vals = malloc(((size_t)nsym + 1) * sizeof **vals)))
        return cli_fail(e, "out of memory");
    for (int s = 0; s < nsym; s++)
        (*vals)[s] = -1;
    for (int b = 0; b < o->nbinds; b++)
        if (ic_graph_bind(g, o->binds[b].sym, o->binds[b].value, *vals) != IC_OK)
            return cli_fail_ctx(e, c, NULL);
    for (int s = 0; all && s < nsym; s++)
        if ((*vals)[s] < 0)
            return cli_fail(e, "graph '%s': symbol '%s' is not bound: pass --bind %s=N",
                            ic_graph_name(g), ic_graph_symbol_name(g, s), ic_graph_symbol_name(g, s));
    return true;
}

/* "== fused: seed_pattern, fused kernels (Fuse) ==" with the bindings, in the stage's comment
 * syntax. */
static void print_banner(FILE *f, const struct stage *st, const ic_graph *g, const int64_t *vals,
                         const dump_opts *o)
{
    fprintf(f, "%s== %s: %s, %s", st->comment, st->name, ic_graph_name(g), st->what);
    for (int s = 0; vals && s < ic_graph_num_symbols(g); s++)
        fprintf(f, "%s%s=%lld", s ? " " : " (", ic_graph_symbol_name(g, s), (long long)vals[s]);
    if (vals && ic_graph_num_symbols(g))
        fputc(')', f);
    const char *nf = getenv("IC_NO_FUSION");
    bool unfused = o->no_fusion || (nf && *nf && strcmp(nf, "0") != 0);
    if (unfused && strcmp(st->name, "graph") && strcmp(st->name, "loops"))
        fprintf(f, " [no fusion]");
    fprintf(f, " ==\n");
}

/* Runs the stage into memory first, so a failing stage prints nothing but its error. */
static bool dump(ic_ctx *c, const struct stage *st, const ic_graph *g, const ic_graph *sg,
                 const int64_t *vals, const dump_opts *o, cli_err *e)
{
    char *text = NULL;
    size_t n = 0;
    FILE *mem = open_memstream(&text, &n);
    if (!mem)
        return cli_fail(e, "out of memory");
    bool ok = st->fn(c, g, sg, vals, o, st->name, mem, e);
    if (fclose(mem) != 0 && ok)
        ok = cli_fail(e, "out of memory");
    if (ok) {
        print_banner(stdout, st, g, vals, o);
        fwrite(text, 1, n, stdout);
        if (n && text[n - 1] != '\n')
            putchar('\n');
    }
    free(text);
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
    cli_log_init(c, "ic-dump");
    ic_graph *g = NULL, *sg = NULL;
    int64_t *vals = NULL;
    bool is_graph = st->fn == stage_graph;
    bool ok = cli_load_graph(c, o.graph, &g, &e) &&
              bind_symbols(c, g, &o, !is_graph || o.nbinds > 0, &vals, &e);
    /* the graph stage prints the specialised graph when --bind is given */
    if (ok && is_graph && o.nbinds && ic_graph_specialize(g, vals, &sg) != IC_OK)
        ok = cli_fail_ctx(&e, c, NULL);
    ok = ok && dump(c, st, g, sg, vals, &o, &e);
    if (ok && fflush(stdout) != 0)
        ok = cli_fail(&e, "cannot write to standard output");
    if (!ok)
        cli_report("ic-dump", e.msg);
    free(vals);
    ic_graph_destroy(sg); /* borrows param data from g: destroy first */
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
    return ok ? 0 : 1;
}
