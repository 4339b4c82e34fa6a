/* pipeline.c - the compile pipeline, once for every backend and every consumer (ic_compile,
 * ic_cuda_compile, ic_compile_dump, ic-dump): ic__pipeline lists the stages in order. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "fold-impl.h"
#include "ic/fuse.h"
#include "pipeline-impl.h"

double ic__now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

void ic__pipe_init(ic__pipe *P, ic_ctx *c, const ic__backend *be, const void *bopts, const ic_graph *g)
{
    memset(P, 0, sizeof *P);
    P->c = c;
    P->be = be;
    P->bopts = bopts;
    P->g = g;
    P->fusion = !c->sw.no_fusion;
    P->debug = c->sw.compile_debug;
    P->stop_after = -1;
}

void ic__pipe_set_debug(ic__pipe *P, int debug, const char *dir)
{
    if (debug)
        P->debug = debug > 0;
    P->debug_dir = dir;
}

void ic__variant_free(const ic__pipe *P, ic__vbase *v)
{
    if (!v)
        return;
    ic_ctx *c = P->c;
    P->be->variant_free(c, P->bopts, v);
    if (v->prog)
        ic_program_destroy(v->prog);
    ic_graph_destroy(v->folded); /* borrows from spec: first */
    ic_graph_destroy(v->spec);
    ic__free(c, v->vals);
    ic__free(c, v);
}

static void print_graph(FILE *f, const void *g) { ic_graph_print(f, g); }
static void print_program(FILE *f, const void *p) { ic_program_print(f, p); }

/* requires: P->g verified. makes: v->g, the graph with constant sizes (v->spec when P->g has
 * symbols) and, freezing, its constant subgraphs folded into params (v->folded). */
static ic_status specialise_and_freeze(ic__pipe *P, const int64_t *vals, ic__vbase *v)
{
    int nsyms = ic_graph_num_symbols(P->g);
    ic_status s;
    v->g = P->g;
    if (nsyms > 0) {
        if (!(v->vals = ic__calloc(P->c, (size_t)nsyms, sizeof *v->vals)))
            return ic__error(P->c, IC_ENOMEM, "compile: out of memory");
        memcpy(v->vals, vals, sizeof *v->vals * (size_t)nsyms);
        if ((s = ic_graph_specialize(P->g, vals, &v->spec)))
            return s;
        v->g = v->spec;
    }
    if (P->freezing) {
        if ((s = ic__graph_fold_constants(P->c, v->g, &v->folded)))
            return s;
        v->g = v->folded ? v->folded : v->g;
    }
    return IC_OK;
}

/* The fuse options of backend be: its kernel-name prefix and norm-row policy. */
static void fuse_options(const ic__backend *be, ic_fuse_options *fo)
{
    ic_fuse_options_init(fo);
    fo->prefix = be->prefix;
    fo->stash_norm_rows = be->stash_norm_rows;
}

/* requires: v->g specialised. makes: v->prog, the loop IR after fusion, or the one kernel
 * per op of Lower when fusion is off (option or IC_NO_FUSION). */
static ic_status lower_and_fuse(ic__pipe *P, ic__vbase *v)
{
    ic_program *loops = NULL;
    ic_status s = ic_lower(P->c, v->g, &loops);
    if (s)
        return s;
    ic__pipe_emit(P, IC_PIPE_LOOPS, print_program, loops);
    if (!P->fusion || P->stop_after == IC_PIPE_LOOPS) {
        v->prog = loops;
    } else {
        ic_fuse_options fo;
        fuse_options(P->be, &fo);
        s = ic_fuse(P->c, loops, &fo, &v->prog);
        ic_program_destroy(loops);
        if (s)
            return s;
    }
    ic__pipe_emit(P, IC_PIPE_FUSED, print_program, v->prog);
    return IC_OK;
}

static bool stopped(const ic__pipe *P, ic_pipe_stage last)
{
    return P->stop_after >= 0 && P->stop_after <= (int)last;
}

/* The whole compile of one variant, stage by stage:
 *   1 specialise   symbols -> the sizes in vals (graphs with symbols only)
 *   2 freeze       constant subgraphs become params (freezing)     [stage graph]
 *   3 lower        graph -> loop IR, one kernel per op              [stage loops]
 *   4 fuse         group kernels (fusion on)                        [stage fused]
 *   5 codegen      backend: LLVM modules and object code on several threads (CPU:
 *                  [llvm, llvm-opt, asm]) or one PTX module (CUDA: [llvm-opt, ptx])
 *   6 load         backend: JIT link and look up (CPU), module load and buffers (CUDA)
 * Each stage's text goes to ic__pipe_emit; stop_after ends the pipeline after that stage.
 * Every stage's output is a new object owned by the variant. */
ic_status ic__pipeline(ic__pipe *P, const int64_t *vals, ic__vbase **out)
{
    double t0 = ic__now_ms(), t1, t2;
    ic__vbase *v = *out = ic__calloc(P->c, 1, P->be->variant_size);
    if (!v)
        return ic__error(P->c, IC_ENOMEM, "compile: out of memory");
    ic_status s = specialise_and_freeze(P, vals, v);
    if (s)
        return s;
    ic__dbg_open(P, v->g);
    ic__pipe_emit(P, IC_PIPE_GRAPH, print_graph, v->g);
    if (stopped(P, IC_PIPE_GRAPH) || (s = lower_and_fuse(P, v)) || stopped(P, IC_PIPE_FUSED))
        return s;
    t1 = ic__now_ms();
    if ((s = P->be->codegen(P, v)) || stopped(P, IC_PIPE_SASS))
        return s;
    t2 = ic__now_ms();
    v->lower_ms = t1 - t0;
    v->codegen_ms = t2 - t1;
    if ((s = P->be->load(P, v)))
        return s;
    v->load_ms = ic__now_ms() - t2;
    v->compile_ms = ic__now_ms() - t0;
    return IC_OK;
}
