/* pipeline.c - the compile pipeline, once for every backend and every consumer (ic_compile,
 * ic_cuda_compile, ic_compile_dump, ic-dump): ic__pipeline lists the stages in order. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "fold-impl.h"
#include "lower-impl.h"
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
    ic__free(c, v->checks);
    ic_graph_destroy(v->folded); /* borrows from expanded and spec: first */
    ic_graph_destroy(v->expanded); /* borrows from attn: first */
    ic_graph_destroy(v->attn);
    ic_graph_destroy(v->convbn);
    ic_graph_destroy(v->spec);
    ic__free(c, v->vals);
    ic__free(c, v);
}

/* The size an index of gather-kind node ni must stay below: embedding's rows, gather's and
 * index_select's size of dim (nn ops); -1 when not known. */
static int64_t index_limit(const ic_graph *g, const ic_node_info *ni)
{
    ic_node_info wi;
    ic_graph_node(g, ni->inputs[0].node, &wi);
    if (ni->op == IC_OP_EMBEDDING)
        return wi.rank >= 1 ? wi.shape[0].coef : -1;
    int64_t d = ni->attrs->dim < 0 ? ni->attrs->dim + wi.rank : ni->attrs->dim;
    if (wi.rank == 0) /* a 0-d input is one element */
        return 1;
    return d >= 0 && d < wi.rank ? wi.shape[d].coef : -1;
}

/* Indices outside [0, size) (embedding, gather, index_select) are an error in PyTorch; the
 * kernels clamp them (no stray reads), so every backend's run checks the ones that come
 * straight from an argument, through value-preserving views, before running. */
static ic_status make_index_checks(ic_ctx *c, ic__vbase *v)
{
    const ic_graph *g = v->g;
    int n = ic_graph_num_nodes(g), nargs = ic_graph_num_args(g), k = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (ic_value id = 0; id < n; id++) {
            ic_node_info ni, xi;
            ic_graph_node(g, id, &ni);
            if (ic_op_kind_of(ni.op) != IC_KIND_GATHER || ni.ninputs < 2 || ni.inputs[1].node < 0)
                continue;
            ic_value x = ni.inputs[1].node;
            for (ic_graph_node(g, x, &xi);; ic_graph_node(g, x, &xi)) {
                bool same_values = xi.op == IC_OP_RESHAPE || xi.op == IC_OP_PERMUTE || xi.op == IC_OP_TRANSPOSE ||
                                   xi.op == IC_OP_EXPAND || xi.op == IC_OP_UNSQUEEZE || xi.op == IC_OP_SQUEEZE;
                if (!same_values || xi.ninputs < 1 || xi.inputs[0].node < 0)
                    break;
                x = xi.inputs[0].node;
            }
            int arg = -1;
            for (int a = 0; a < nargs && arg < 0; a++)
                if (ic_graph_arg(g, a) == x)
                    arg = a;
            int64_t limit = index_limit(g, &ni);
            if (arg < 0 || limit < 0 || !(xi.dtype == IC_I32 || xi.dtype == IC_I64))
                continue;
            if (pass == 1)
                v->checks[k] = (struct ic__index_check){ arg, limit, ni.name, ic_op_name(ni.op) };
            k++;
        }
        if (pass == 0 && k > 0 && !(v->checks = ic__calloc(c, (size_t)k, sizeof *v->checks)))
            return ic__error(c, IC_ENOMEM, "compile: out of memory");
        v->nchecks = pass == 0 ? 0 : k;
        k = 0;
    }
    return IC_OK;
}

ic_status ic__check_indices(const ic_graph *g, const ic__vbase *v, const ic_tensor *args)
{
    for (int i = 0; i < v->nchecks; i++) {
        const struct ic__index_check *ck = &v->checks[i];
        const ic_tensor *t = &args[ck->arg];
        int64_t n = ic_tensor_numel(t), idx[IC_MAX_RANK] = { 0 }, off = 0;
        for (int64_t e = 0; e < n; e++) {
            int64_t x = t->dtype == IC_I32 ? ((const int32_t *)t->data)[off] : ((const int64_t *)t->data)[off];
            if (x < 0 || x >= ck->limit)
                return ic__node_error(g, ck->node, ck->op, IC_EINVAL,
                                      "index %lld out of range [0, %lld) (argument %d, element %lld)",
                                      (long long)x, (long long)ck->limit, ck->arg, (long long)e);
            off = ic__next_elem(t, idx, off);
        }
    }
    return IC_OK;
}

static void print_graph(FILE *f, const void *g) { ic_graph_print(f, g); }
static void print_program(FILE *f, const void *p) { ic_program_print(f, p); }

/* requires: P->g verified. makes: v->g, the graph with constant sizes (v->spec when P->g has
 * symbols), its composite ops expanded (v->expanded) and, freezing, its constant subgraphs
 * folded into params (v->folded). */
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
        if ((s = ic__graph_fold_conv_bn(P->c, v->g, &v->convbn)))
            return s;
        v->g = v->convbn ? v->convbn : v->g;
    }
    /* before expansion, which leaves the fused sdpa nodes alone */
    if (P->be->fused_attention && P->fusion) {
        if ((s = ic__graph_fuse_attention(P->c, v->g, &v->attn)))
            return s;
        v->g = v->attn ? v->attn : v->g;
    }
    /* before freezing, so that it folds what composites compute from weights (batch_norm) */
    if ((s = ic_graph_expand(P->c, v->g, &v->expanded)))
        return s;
    v->g = v->expanded ? v->expanded : v->g;
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
    ic_status s = ic_lower_prefixed(P->c, v->g, P->be->prefix, &loops);
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
 *   2 expand       composite ops (conv, pooling, batch_norm, attention...) as existing ops
 *     freeze       constant subgraphs become params (freezing)     [stage graph]
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
    if ((s = P->be->load(P, v)) || (s = make_index_checks(P->c, v)))
        return s;
    v->load_ms = ic__now_ms() - t2;
    v->compile_ms = ic__now_ms() - t0;
    return IC_OK;
}
