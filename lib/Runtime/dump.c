/* dump.c - the stage vocabulary and where stage texts go: the stop_after file of a dump
 * (ic_compile_dump, ic-dump), stderr (IC_DUMP) and the IC_COMPILE_DEBUG folder, each file
 * written atomically (temp file + rename). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "file-impl.h"
#include "pipeline-impl.h"

static const ic_pipe_stage_info stages[IC_PIPE_COUNT] = {
    [IC_PIPE_GRAPH] = { "graph", "spec", "graph IR with inferred dtypes and shapes", "", "graph.txt", NULL },
    [IC_PIPE_LOOPS] = { "loops", "lower,pre_fusion", "loop-nest kernels, one per op (Lower)", "",
                         "ir_pre_fusion.txt", NULL },
    [IC_PIPE_FUSED] = { "fused", "fuse,post_fusion", "fused kernels (Fuse)", "", "ir_post_fusion.txt", NULL },
    [IC_PIPE_LLVM] = { "llvm", "llvm-ir", "LLVM IR before O3 (LLVMGen)", "; ", NULL, "cpu" },
    [IC_PIPE_LLVM_OPT] = { "llvm-opt", "llvm_opt,opt", "LLVM IR after O3", "; ", "output_code.ll", NULL },
    [IC_PIPE_ASM] = { "asm", "s,assembly", "host assembly", "# ", "output_code.s", "cpu" },
    [IC_PIPE_PTX] = { "ptx", "", "PTX for sm_90 (GPU)", "// ", "output_code.ptx", "cuda" },
    [IC_PIPE_SASS] = { "sass", "", "SASS for sm_90 (ptxas + cuobjdump)", "// ", NULL, "cuda" },
};

const ic_pipe_stage_info *ic_pipe_stage_get(ic_pipe_stage st)
{
    return (unsigned)st < IC_PIPE_COUNT ? &stages[st] : NULL;
}

/* Whether name is one of the comma-separated words of list. */
static bool in_list(const char *list, const char *name, size_t n)
{
    for (const char *p = list; p && *p;) {
        size_t len = strcspn(p, ",");
        if (len == n && strncmp(p, name, n) == 0)
            return true;
        p += len + (p[len] == ',');
    }
    return false;
}

static bool find_n(const char *name, size_t n, ic_pipe_stage *out)
{
    for (int i = 0; i < IC_PIPE_COUNT; i++)
        if ((strlen(stages[i].name) == n && strncmp(stages[i].name, name, n) == 0) ||
            in_list(stages[i].aliases, name, n)) {
            *out = (ic_pipe_stage)i;
            return true;
        }
    return false;
}

bool ic_pipe_stage_find(const char *name, ic_pipe_stage *out)
{
    return name && find_n(name, strlen(name), out);
}

/* IC_DUMP names st (by name or alias) or says "all". */
static bool env_dump_wants(const ic_ctx *c, ic_pipe_stage st)
{
    for (const char *p = c->sw.dump; p && *p;) {
        size_t len = strcspn(p, ",");
        ic_pipe_stage s;
        if ((len == 3 && strncmp(p, "all", 3) == 0) || (find_n(p, len, &s) && s == st))
            return true;
        p += len + (p[len] == ',');
    }
    return false;
}

static bool is_dump(const ic__pipe *P)
{
    return P->stop_after >= 0;
}

bool ic__pipe_wants(const ic__pipe *P, ic_pipe_stage st)
{
    if (is_dump(P))
        return P->stop_after == (int)st;
    return env_dump_wants(P->c, st) || (P->dbg.on && stages[st].debug_file);
}

typedef struct { ic__print_fn fn; const void *arg; } print_arg;

static bool print_into(FILE *f, void *arg)
{
    const print_arg *a = arg;
    a->fn(f, a->arg);
    return !ferror(f);
}

/* Writes one file of the debug folder atomically; no fsync: a debug dump need not survive a
 * power loss, and a compile that dumps every stage would wait on the disk for each. */
static void dbg_write(ic__pipe *P, const char *file, ic__print_fn fn, const void *arg)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", P->dbg.dir, file);
    print_arg a = { fn, arg };
    const char *step;
    int e = ic__write_atomic(path, print_into, &a, 0, &step);
    if (e)
        ic__logf(P->c, 0, "ic: %s: %s: %s", path, step, strerror(e));
}

void ic__pipe_emit(ic__pipe *P, ic_pipe_stage st, ic__print_fn fn, const void *arg)
{
    if (is_dump(P)) {
        if (P->stop_after == (int)st)
            fn(P->out, arg);
        return;
    }
    if (env_dump_wants(P->c, st)) {
        fprintf(stderr, "== after %s ==\n", stages[st].name);
        fn(stderr, arg);
    }
    if (P->dbg.on && stages[st].debug_file)
        dbg_write(P, stages[st].debug_file, fn, arg);
}

static void print_text(FILE *f, const void *s)
{
    fputs(s ? (const char *)s : "(none)\n", f);
}

void ic__pipe_emit_text(ic__pipe *P, ic_pipe_stage st, const char *text)
{
    ic__pipe_emit(P, st, print_text, text);
}

void ic__dbg_open(ic__pipe *P, const ic_graph *g)
{
    P->dbg.on = false;
    if (!P->debug || is_dump(P))
        return;
    const char *parent = P->debug_dir ? P->debug_dir : "ic_debug";
    if (mkdir(parent, 0777) && errno != EEXIST) {
        ic__logf(P->c, 0, "ic: cannot create debug folder %s: %s", parent, strerror(errno));
        return;
    }
    char name[128];
    size_t k = 0;
    for (const char *p = ic_graph_name(g); p && *p && k < 64; p++)
        name[k++] = (*p == '/' || *p == '.' || *p == ' ') ? '_' : *p;
    name[k] = 0;
    for (int n = 0; n < 100000; n++) {
        snprintf(P->dbg.dir, sizeof P->dbg.dir, "%s/%s_%ld_%d", parent, k ? name : "graph", (long)getpid(), n);
        if (mkdir(P->dbg.dir, 0777) == 0) {
            P->dbg.on = true;
            fprintf(stderr, "ic: compile debug folder: %s\n", P->dbg.dir);
            return;
        }
        if (errno != EEXIST)
            break;
    }
    ic__logf(P->c, 0, "ic: cannot create a debug folder under %s", parent);
}

/* ---- ic_compile_dump ---- */

/* "graph, loops, ..., ptx" for messages: the stages the library makes (sass, the last, is
 * ic-dump's). */
static void stage_list(char *buf, size_t n)
{
    size_t k = 0;
    for (int i = 0; i < IC_PIPE_SASS && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%s", i ? ", " : "", stages[i].name);
}

/* Runs P to stop after stage (a name or alias), its text into f; P's backend must make it. */
static ic_status dump_stage(ic__pipe *P, const int64_t *vals, const char *stage, FILE *f)
{
    ic_ctx *c = P->c;
    ic_pipe_stage st;
    char list[160];
    stage_list(list, sizeof list);
    if (!ic_pipe_stage_find(stage, &st))
        return ic__error(c, IC_EINVAL, "unknown stage '%s' (%s)", stage, list);
    if (st == IC_PIPE_SASS)
        return ic__error(c, IC_EINVAL, "stage 'sass' is made by ic-dump (ptxas + cuobjdump), not "
                         "the library (%s)", list);
    const char *be = stages[st].backend;
    if (be && strcmp(be, P->be->name) != 0)
        return ic__error(c, IC_EINVAL, "stage '%s' is made by the %s backend, not %s", stage, be, P->be->name);
    ic_status s = ic_graph_verify(P->g);
    if (s)
        return s;
    if (ic_graph_num_symbols(P->g) > 0 && !vals)
        return ic__node_error(P->g, NULL, NULL, IC_EINVAL, "has symbols: bind them to dump stage '%s'", stage);
    P->stop_after = (int)st;
    P->out = f;
    ic__vbase *v = NULL;
    s = ic__pipeline(P, vals, &v);
    ic__variant_free(P, v);
    return s;
}

ic_status ic_cuda_compile_dump(ic_ctx *c, const ic_graph *g, const ic_cuda_options *o, const int64_t *vals,
                               const char *stage, FILE *f)
{
    ic_cuda_options oo;
    if (!o)
        ic_cuda_options_init(&oo), o = &oo;
    if (!g || !stage || !f)
        return ic__error(c, IC_EINVAL, "ic_cuda_compile_dump: graph, stage and file are required");
    ic__cuda_bopts bo = { NULL, o };
    ic__pipe P;
    ic__pipe_init(&P, c, &ic__backend_cuda, &bo, g);
    P.fusion = P.fusion && !o->no_fusion;
    P.freezing = o->freezing;
    return dump_stage(&P, vals, stage, f);
}

ic_status ic_compile_dump(ic_ctx *c, const ic_graph *g, const ic_compile_options *o,
                          const int64_t *vals, const char *stage, FILE *f)
{
    ic_compile_options oo;
    if (!o)
        ic_compile_options_init(&oo), o = &oo;
    if (!g || !stage || !f)
        return ic__error(c, IC_EINVAL, "ic_compile_dump: graph, stage and file are required");
    ic_pipe_stage st;
    if (ic_pipe_stage_find(stage, &st) && st == IC_PIPE_PTX) { /* as ic_cuda_compile makes it */
        ic_cuda_options co;
        ic_cuda_options_init(&co);
        co.no_fusion = !o->fusion;
        co.freezing = o->freezing;
        return ic_cuda_compile_dump(c, g, &co, vals, stage, f);
    }
    ic__pipe P;
    ic__pipe_init(&P, c, &ic__backend_cpu, o, g);
    P.fusion = P.fusion && o->fusion;
    P.freezing = o->freezing;
    return dump_stage(&P, vals, stage, f);
}
