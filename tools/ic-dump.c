/* ic-dump.c - print a graph at one stage of the pipeline: the graph itself (inferred dtypes
 * and shapes, one node a line), the loop IR one kernel per op, the fused kernels, the LLVM IR
 * before and after O3 and the host assembly (ic_compile_dump), PTX (lib/PTX) when built, and
 * SASS from that PTX through the CUDA toolkit's ptxas and cuobjdump when they are installed.
 * Exit 0 on success, 1 with one line on stderr for bad input or usage. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "common/cli.h"
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
    "                   ptx: PTX for an sm_90 GPU, a module per kernel, each after a line\n"
    "                   '// ---- kernel <i> '<name>' ----' (no GPU needed; when built with\n"
    "                   lib/PTX; f16/bf16 GEMMs on wgmma make their module target sm_90a);\n"
    "                   sass: each module assembled by ptxas -arch=sm_90 and disassembled by\n"
    "                   cuobjdump -sass (CUDA toolkit: ptxas from $IC_PTXAS,\n"
    "                   /usr/local/cuda/bin or PATH, cuobjdump beside it or on PATH)\n"
    "                   (aliases: spec, lower, pre_fusion, fuse, post_fusion, llvm-ir,\n"
    "                   opt, llvm_opt, s, assembly; the names IC_DUMP takes)\n"
    "  --bind SYM=N     size of a symbolic dimension (repeatable); every stage but graph\n"
    "                   needs every symbol bound\n"
    "  --device NAME    cpu (default) or cuda: loops, fused and llvm-opt as ic_compile or\n"
    "                   ic_cuda_compile makes them (cuda: gpu_ kernels, NVPTX IR; no GPU\n"
    "                   needed); ptx and sass are always cuda, llvm and asm cpu\n"
    "  --no-fusion      fused, llvm, llvm-opt, asm, ptx, sass: one kernel per op (as\n"
    "                   IC_NO_FUSION=1)\n"
    "  -h, --help       this text\n";

typedef struct {
    const char *graph, *stage;
    cli_bind binds[CLI_MAX_BINDS];
    int nbinds;
    bool no_fusion, help;
    bool cuda;           /* --device cuda: the stages as ic_cuda_compile makes them */
} dump_opts;

/* A stage prints g (the original graph; vals binds its symbols, NULL when it has none) to f.
 * The graph stage prints the graph specialised by --bind when given. */
typedef bool (*stage_fn)(ic_ctx *c, const ic_graph *g, const int64_t *vals,
                         const dump_opts *o, const char *stage, FILE *f, cli_err *e);

static bool stage_compile(ic_ctx *c, const ic_graph *g, const int64_t *vals,
                          const dump_opts *o, const char *stage, FILE *f, cli_err *e);

/* Without --bind, a graph with symbols prints symbolic; else as the pipeline makes it. */
static bool stage_graph(ic_ctx *c, const ic_graph *g, const int64_t *vals,
                        const dump_opts *o, const char *stage, FILE *f, cli_err *e)
{
    if (!vals) {
        ic_graph_print(f, g);
        return true;
    }
    return stage_compile(c, g, vals, o, stage, f, e);
}

/* The compiler's stages, printed by the pipeline itself (ic_compile_dump), which stops
 * after the stage: nothing is JIT-compiled or loaded. */
static bool stage_compile(ic_ctx *c, const ic_graph *g, const int64_t *vals,
                          const dump_opts *o, const char *stage, FILE *f, cli_err *e)
{
    ic_status s;
    if (o->cuda) {
        ic_cuda_options go;
        ic_cuda_options_init(&go);
        go.no_fusion = o->no_fusion;
        s = ic_cuda_compile_dump(c, g, &go, vals, stage, f);
    } else {
        ic_compile_options co;
        ic_compile_options_init(&co);
        co.fusion = !o->no_fusion;
        s = ic_compile_dump(c, g, &co, vals, stage, f);
    }
    if (s != IC_OK)
        return cli_fail_ctx(e, c, NULL);
    return true;
}

#ifdef IC_DUMP_HAS_PTX
/* ---- sass: ptxas + cuobjdump from the CUDA toolkit ---- */

#define CUDA_BIN "/usr/local/cuda/bin"

static bool is_exe(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* dir/name into out when it is an executable file. */
static bool exe_in(const char *dir, size_t dirlen, const char *name, char *out, size_t n)
{
    if (!dirlen)
        return false;
    snprintf(out, n, "%.*s/%s", (int)dirlen, dir, name);
    return is_exe(out);
}

static bool on_path(const char *name, char *out, size_t n)
{
    const char *p = getenv("PATH");
    while (p && *p) {
        size_t len = strcspn(p, ":");
        if (exe_in(p, len, name, out, n))
            return true;
        p += len + (p[len] == ':');
    }
    return false;
}

/* ptxas: $IC_PTXAS (must then be executable), else /usr/local/cuda/bin/ptxas, else PATH;
 * cuobjdump: beside that ptxas, else PATH. */
static bool find_cuda_tools(const ic_ctx *c, char *ptxas, char *cuobjdump, size_t n, cli_err *e)
{
    ic_switches sw;
    ic_ctx_switches(c, &sw);
    const char *env = sw.ptxas;
    if (env && *env) {
        if (!is_exe(env))
            return cli_fail(e, "stage 'sass': IC_PTXAS is '%s', which is not an executable file", env);
        snprintf(ptxas, n, "%s", env);
    } else if (!exe_in(CUDA_BIN, strlen(CUDA_BIN), "ptxas", ptxas, n) && !on_path("ptxas", ptxas, n)) {
        return cli_fail(e, "stage 'sass' needs ptxas and cuobjdump from the CUDA toolkit: no ptxas "
                           "(looked in $IC_PTXAS, " CUDA_BIN " and PATH); --stage ptx needs neither");
    }
    const char *slash = strrchr(ptxas, '/');
    if (!(slash && exe_in(ptxas, (size_t)(slash - ptxas), "cuobjdump", cuobjdump, n)) &&
        !on_path("cuobjdump", cuobjdump, n))
        return cli_fail(e, "stage 'sass' needs cuobjdump from the CUDA toolkit: none beside %s or "
                           "on PATH; --stage ptx needs neither", ptxas);
    return true;
}

/* Runs argv[0] (a path) with stdout and stderr into the file `out`; false with e set when it
 * cannot start, and *status = its exit status (or 128 + signal). */
static bool spawn_wait(char *const argv[], const char *out, int *status, cli_err *e)
{
    extern char **environ;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0)
        return cli_fail(e, "cannot run %s: %s", argv[0], strerror(rc));
    int st = 0;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return cli_fail(e, "waiting for %s: %s", argv[0], strerror(errno));
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    return true;
}

/* A whole file as a string (caller frees); NULL when it cannot be read. */
static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t cap = 0, len = 0;
    while (f) {
        if (len + 4096 + 1 > cap) {
            char *nb = realloc(buf, cap = cap * 2 + 8192);
            if (!nb)
                break;
            buf = nb;
        }
        size_t k = fread(buf + len, 1, cap - len - 1, f);
        len += k;
        if (k == 0) {
            bool ok = !ferror(f);
            fclose(f);
            if (!ok)
                break;
            buf[len] = 0;
            *n = len;
            return buf;
        }
    }
    if (f)
        fclose(f);
    free(buf);
    return NULL;
}

static bool write_file(const char *path, const char *text, cli_err *e)
{
    FILE *f = fopen(path, "wb");
    bool ok = f && fputs(text, f) >= 0;
    ok = (f && fclose(f) == 0) && ok;
    return ok || cli_fail(e, "cannot write %s: %s", path, strerror(errno));
}

/* "ptxas: <its first lines>" from its log, at most ~1500 bytes, for a one-line error. */
static bool tool_failed(const char *tool, const char *log_path, int status, const ic_graph *g,
                        cli_err *e)
{
    size_t n = 0;
    char *log = slurp(log_path, &n);
    bool r = cli_fail(e, "stage 'sass': %s failed (exit %d) on the PTX of graph '%s': %.1500s", tool,
                      status, ic_graph_name(g), log && n ? log : "(no message)");
    free(log);
    return r;
}

/* In a fresh temp folder: k.ptx -> ptxas -> k.cubin -> cuobjdump -sass -> text into f. */
static bool assemble_and_disassemble(const char *ptx, const char *ptxas, const char *cuobjdump,
                                     const ic_graph *g, FILE *f, cli_err *e)
{
    const char *tmp = getenv("TMPDIR");
    char dir[1024], src[1100], bin[1100], log[1100], out[1100];
    snprintf(dir, sizeof dir, "%s/ic-dump-sass-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir))
        return cli_fail(e, "stage 'sass': cannot make a temp folder %s: %s", dir, strerror(errno));
    snprintf(src, sizeof src, "%s/k.ptx", dir);
    snprintf(bin, sizeof bin, "%s/k.cubin", dir);
    snprintf(log, sizeof log, "%s/ptxas.log", dir);
    snprintf(out, sizeof out, "%s/sass.txt", dir);
    int st = 0;
    bool ok = write_file(src, ptx, e);
    /* modules with Hopper wgmma kernels target sm_90a */
    char *arch = strstr(ptx, ".target sm_90a") ? "-arch=sm_90a" : "-arch=sm_90";
    char *as[] = { (char *)ptxas, arch, "-o", bin, src, NULL };
    ok = ok && spawn_wait(as, log, &st, e);
    if (ok && st != 0)
        ok = tool_failed("ptxas", log, st, g, e);
    char *dis[] = { (char *)cuobjdump, "-sass", bin, NULL };
    ok = ok && spawn_wait(dis, out, &st, e);
    if (ok && st != 0)
        ok = tool_failed("cuobjdump", out, st, g, e);
    if (ok) {
        size_t n = 0;
        char *text = slurp(out, &n);
        if (!text)
            ok = cli_fail(e, "stage 'sass': cannot read %s", out);
        else
            fwrite(text, 1, n, f);
        free(text);
    }
    unlink(src);
    unlink(bin);
    unlink(log);
    unlink(out);
    rmdir(dir);
    return ok;
}

/* Each kernel's PTX module in the ptx stage's text (after its "// ---- kernel" line) through
 * ptxas and cuobjdump, its SASS after that same line; a text without such lines (no kernels)
 * as one module. */
static bool sass_of_modules(char *ptx, const char *ptxas, const char *cuobjdump, const ic_graph *g,
                            FILE *f, cli_err *e)
{
    static const char mark[] = "\n// ---- kernel ";
    char *p = strncmp(ptx, mark + 1, strlen(mark + 1)) == 0 ? ptx : strstr(ptx, mark);
    if (!p)
        return assemble_and_disassemble(ptx, ptxas, cuobjdump, g, f, e);
    while (p) {
        const char *line = *p == '\n' ? p + 1 : p;
        char *body = strchr(line, '\n');
        if (!body)
            break;
        body++;
        fwrite(line, 1, (size_t)(body - line), f); /* the kernel's line */
        char *next = strstr(body, mark);
        char keep = next ? next[1] : 0;
        if (next)
            next[1] = 0; /* body ends after its last newline */
        bool ok = assemble_and_disassemble(body, ptxas, cuobjdump, g, f, e);
        if (next)
            next[1] = keep;
        if (!ok)
            return false;
        p = next;
    }
    return true;
}

/* SASS for sm_90: the PTX of stage_ptx through ptxas and cuobjdump (no GPU needed). */
static bool stage_sass(ic_ctx *c, const ic_graph *g, const int64_t *vals,
                       const dump_opts *o, const char *stage, FILE *f, cli_err *e)
{
    char ptxas[4096], cuobjdump[4096];
    if (!find_cuda_tools(c, ptxas, cuobjdump, sizeof ptxas, e))
        return false;
    char *ptx = NULL;
    size_t n = 0;
    FILE *mem = open_memstream(&ptx, &n);
    if (!mem)
        return cli_fail(e, "out of memory");
    bool ok = stage_compile(c, g, vals, o, "ptx", mem, e);
    if (fclose(mem) != 0 && ok)
        ok = cli_fail(e, "out of memory");
    ok = ok && sass_of_modules(ptx, ptxas, cuobjdump, g, f, e);
    free(ptx);
    return ok;
}
#else
#define stage_sass NULL
#endif

/* How ic-dump makes each stage of the library's vocabulary (ic_pipe_stage_get: names,
 * aliases, banner text and comment syntax, so the banner keeps LLVM IR and assembly
 * parseable: ic-dump --stage llvm | opt ...). NULL: not built. */
static stage_fn stage_maker(ic_pipe_stage st)
{
    switch (st) {
    case IC_PIPE_GRAPH: return stage_graph;
    case IC_PIPE_SASS: return stage_sass;
    default: return stage_compile;
    }
}

static bool find_stage(const char *name, ic_pipe_stage *out, cli_err *e)
{
    char list[256];
    size_t k = 0;
    for (int i = 0; i < IC_PIPE_COUNT; i++)
        k += (size_t)snprintf(list + k, sizeof list - k, "%s%s", i ? ", " : "", ic_pipe_stage_get(i)->name);
    if (!ic_pipe_stage_find(name, out))
        return cli_fail(e, "unknown stage '%s' (stages: %s)", name, list);
    if (!stage_maker(*out))
        return cli_fail(e, "stage '%s' (%s) is not available yet (stages: %s)", name,
                        ic_pipe_stage_get(*out)->what, list);
    return true;
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
        } else if (cli_opt(argc, argv, &i, "--device", &v, e)) {
            if (!v)
                return false;
            if (strcmp(v, "cpu") != 0 && strcmp(v, "cuda") != 0)
                return cli_fail(e, "--device %s: cpu or cuda (see ic-dump -h)", v);
            o->cuda = strcmp(v, "cuda") == 0;
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
static void print_banner(const ic_ctx *c, FILE *f, const ic_pipe_stage_info *st, const ic_graph *g,
                         const int64_t *vals, const dump_opts *o)
{
    fprintf(f, "%s== %s: %s, %s", st->comment, st->name, ic_graph_name(g), st->what);
    for (int s = 0; vals && s < ic_graph_num_symbols(g); s++)
        fprintf(f, "%s%s=%lld", s ? " " : " (", ic_graph_symbol_name(g, s), (long long)vals[s]);
    if (vals && ic_graph_num_symbols(g))
        fputc(')', f);
    ic_switches sw;
    ic_ctx_switches(c, &sw);
    bool unfused = o->no_fusion || sw.no_fusion;
    if (unfused && strcmp(st->name, "graph") && strcmp(st->name, "loops"))
        fprintf(f, " [no fusion]");
    if (o->cuda && !st->backend)
        fprintf(f, " [cuda]");
    fprintf(f, " ==\n");
}

/* Runs the stage into memory first, so a failing stage prints nothing but its error. */
static bool dump(ic_ctx *c, ic_pipe_stage stage, const ic_graph *g,
                 const int64_t *vals, const dump_opts *o, cli_err *e)
{
    char *text = NULL;
    size_t n = 0;
    FILE *mem = open_memstream(&text, &n);
    if (!mem)
        return cli_fail(e, "out of memory");
    const ic_pipe_stage_info *st = ic_pipe_stage_get(stage);
    bool ok = stage_maker(stage)(c, g, vals, o, st->name, mem, e);
    if (fclose(mem) != 0 && ok)
        ok = cli_fail(e, "out of memory");
    if (ok) {
        print_banner(c, stdout, st, g, vals, o);
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
    ic_pipe_stage st;
    if (!find_stage(o.stage, &st, &e)) {
        cli_report("ic-dump", e.msg);
        return 1;
    }
    ic_ctx *c = NULL;
    if (ic_ctx_create(NULL, &c) != IC_OK) {
        cli_report("ic-dump", "cannot create a context (out of memory)");
        return 1;
    }
    cli_log_init(c, "ic-dump");
    ic_graph *g = NULL;
    int64_t *vals = NULL;
    bool is_graph = st == IC_PIPE_GRAPH;
    bool ok = cli_load_graph(c, o.graph, &g, &e) &&
              bind_symbols(c, g, &o, !is_graph || o.nbinds > 0, &vals, &e);
    ok = ok && dump(c, st, g, vals, &o, &e);
    if (ok && fflush(stdout) != 0)
        ok = cli_fail(&e, "cannot write to standard output");
    if (!ok)
        cli_report("ic-dump", e.msg);
    free(vals);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
    return ok ? 0 : 1;
}
