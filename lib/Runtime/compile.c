/* compile.c - ic_compile / ic_run: the compile pipeline (specialise -> lower -> fuse ->
 * LLVM IR -> optimise -> object code, one module per distinct kernel on several threads ->
 * LLJIT), per-symbol-value variants, and the execution plan (planned arenas reused across
 * runs, a pool of them for concurrent runs, staging for strided args, IC_PROFILE). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "compile-impl.h"
#include "fold-impl.h" /* gemm: freezing folds constant subgraphs */
#include "ic/fuse.h"
#include "ic/runtime.h"

/* Scratch of one run: the planned TEMP arena, the buffer table the kernels read, and
 * staging copies of strided args. Reused run after run; a pool serves concurrent runs. */
typedef struct ic__slot {
    struct ic__slot *next_free, *next_all;
    void *arena, *arena_raw; /* 64-byte aligned inside arena_raw */
    void **bufs;             /* [nbufs] */
    void **staging;          /* [nargs], aligned */
    void **staging_raw;      /* [nargs] */
    size_t *staging_cap;     /* [nargs], bytes */
    void **alt;              /* [nbufs] the table of a kernel that runs another's code (remap) */
    double *prof_ms;         /* IC_PROFILE: [nkernels] ms spent in each kernel by this slot's runs */
    int64_t prof_runs;       /* IC_PROFILE: runs made with this slot */
} ic__slot;

/* n bytes 64-byte aligned from the context's allocator; *raw is what to free. */
static void *alloc64(ic_ctx *c, size_t n, void **raw)
{
    *raw = ic__malloc(c, n + 64);
    return *raw ? (void *)(((uintptr_t)*raw + 63) & ~(uintptr_t)63) : NULL;
}

/* A kernel that runs the code of another (the same code on other buffers): the table it is
 * called with has pairs[2i] (a buffer the code reads) point at pairs[2i + 1] (its own). */
typedef struct { int n; int *pairs; } ic__remap;

typedef struct ic__variant {
    int64_t *vals;         /* symbol values it is specialised for ([nsyms]) */
    ic_graph *spec;        /* owned when the graph has symbols, else NULL */
    ic_graph *folded;      /* freezing: the graph with constant subgraphs folded (owned) */
    const ic_graph *g;     /* the graph compiled (spec or the original) */
    ic_program *prog;      /* loop IR after fusion: buffers, kernel names */
    ic__jit *jit;
    int nkernels;
    ic__kernel_fn *fns;
    int *code;             /* [nkernels] the kernel whose code each kernel runs (itself or earlier) */
    ic__remap *remap;      /* [nkernels] its buffer renaming (n 0 for its own code) */
    int nbufs;
    int64_t arena_bytes;
    int nargs, nouts;
    ic_tensor *argsig;     /* expected dtype/rank/shape of each arg (data NULL) */
    ic_tensor *outsig;     /* expected dtype/rank/shape of each output */
    ic__slot *free_slots, *all_slots;
    double compile_ms;
    uint64_t used;         /* cc->tick at its last use (least recently used goes first) */
    int busy;              /* runs in flight (cc->lock): never dropped while > 0 */
    int nchecks;           /* embedding indices read straight from an argument */
    struct ic__index_check { int arg; int64_t limit; const char *node; } *checks;
} ic__variant;

struct ic_compiled {
    ic_ctx *c;
    const ic_graph *g;
    ic_compile_options o;
    char *mode;
    pthread_mutex_t lock;  /* variants, slot pools, bound */
    int nsyms;
    int64_t *bound;        /* ic_compiled_bind values, -1 = unbound */
    ic__variant **variants;
    int nvariants, capvariants;
    ic__variant *last;     /* most recently used */
    uint64_t tick;         /* uses so far (variant.used) */
    bool profile;          /* IC_PROFILE: time every kernel of every run (summary at destroy) */
};

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

void ic_compile_options_init(ic_compile_options *o)
{
    memset(o, 0, sizeof *o);
    o->fusion = 1;
    o->mode = "default";
    const char *d = getenv("IC_COMPILE_DEBUG");
    o->debug = d && *d && strcmp(d, "0") != 0;
}

/* ---- debug folder (IC_COMPILE_DEBUG) ---- */

typedef struct {
    ic_ctx *c;
    char dir[1024];
    bool on;
} ic__dbg;

static void dbg_open(ic__dbg *d, ic_ctx *c, const ic_compile_options *o, const ic_graph *g)
{
    d->c = c;
    d->on = false;
    if (!o->debug)
        return;
    const char *parent = o->debug_dir ? o->debug_dir : "ic_debug";
    if (mkdir(parent, 0777) && errno != EEXIST) {
        ic__logf(c, 0, "ic: cannot create debug folder %s: %s", parent, strerror(errno));
        return;
    }
    char name[128];
    size_t k = 0;
    for (const char *p = ic_graph_name(g); p && *p && k < 64; p++)
        name[k++] = (*p == '/' || *p == '.' || *p == ' ') ? '_' : *p;
    name[k] = 0;
    for (int n = 0; n < 100000; n++) {
        snprintf(d->dir, sizeof d->dir, "%s/%s_%ld_%d", parent, k ? name : "graph", (long)getpid(), n);
        if (mkdir(d->dir, 0777) == 0) {
            d->on = true;
            fprintf(stderr, "ic: compile debug folder: %s\n", d->dir);
            return;
        }
        if (errno != EEXIST)
            break;
    }
    ic__logf(c, 0, "ic: cannot create a debug folder under %s", parent);
}

/* Writes one file of the debug folder atomically (temp file + rename). */
static void dbg_write(ic__dbg *d, const char *file, void (*fn)(FILE *, const void *), const void *arg)
{
    if (!d->on)
        return;
    char path[1200], tmp[1220];
    snprintf(path, sizeof path, "%s/%s", d->dir, file);
    snprintf(tmp, sizeof tmp, "%s.tmp%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f)
        return;
    fn(f, arg);
    bool ok = fflush(f) == 0 && fsync(fileno(f)) == 0;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0)
        unlink(tmp);
}

static void print_graph(FILE *f, const void *g) { ic_graph_print(f, g); }
static void print_program(FILE *f, const void *p) { ic_program_print(f, p); }
static void print_text(FILE *f, const void *s) { fputs(s ? (const char *)s : "", f); }

/* IC_DUMP=llvm,asm: the optimised module or its assembly on stderr, with a banner. */
static bool dump_wanted(const ic_ctx *c, const char *stage)
{
    size_t n = strlen(stage);
    for (const char *p = c->dump; p && *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if ((len == n && strncmp(p, stage, n) == 0) || (len == 3 && strncmp(p, "all", 3) == 0))
            return true;
        p = e ? e + 1 : NULL;
    }
    return false;
}

/* ---- the pipeline ---- */

/* Lowers g (specialised) to loop IR, one kernel per op in *pre, then fuses it into *out
 * when fusion is on (*out == *pre when off). The caller destroys both (once if equal). */
static ic_status lower_and_fuse(ic_ctx *c, const ic_graph *g, bool fusion, ic_program **pre,
                                ic_program **out)
{
    *pre = *out = NULL;
    ic_status s = ic_lower(c, g, pre);
    if (s || !fusion) {
        *out = *pre;
        return s;
    }
    ic_fuse_options fo;
    ic_fuse_options_init(&fo);
    return ic_fuse(c, *pre, &fo, out);
}

/* Codegen parameters for every kernel: the heuristic, then the options' overrides. */
static ic_codegen_params *kernel_params(ic_ctx *c, const ic_program *p, const ic_codegen_target *t,
                                        const ic_compile_options *o)
{
    int nk = ic_program_num_kernels(p);
    ic_codegen_params *ps = ic__calloc(c, (size_t)nk + 1, sizeof *ps);
    if (!ps)
        return NULL;
    const ic_buffer *b0 = ic_program_num_buffers(p) ? ic_program_buffer(p, 0) : NULL;
    for (int i = 0; i < nk; i++) {
        ic_codegen_params_default(t, ic_program_kernel(p, i), b0, &ps[i]);
        ps[i].threads = o->threads;
        if (o->vector_width)
            ps[i].vector_width = o->vector_width;
        if (o->serial_threshold)
            ps[i].serial_threshold = o->serial_threshold;
        if (o->stream_bytes)
            ps[i].stream_bytes = o->stream_bytes < 0 ? 0 : o->stream_bytes;
        if (o->prefetch_bytes)
            ps[i].prefetch_bytes = o->prefetch_bytes < 0 ? 0 : o->prefetch_bytes;
        ps[i].gemm.prepack = o->freezing; /* gemm: freezing packs weights at compile time */
    }
    return ps;
}

static ic_status make_signatures(ic_ctx *c, ic__variant *v)
{
    const ic_graph *g = v->g;
    v->nargs = ic_graph_num_args(g);
    v->nouts = ic_graph_num_outputs(g);
    v->argsig = ic__calloc(c, (size_t)v->nargs + 1, sizeof(ic_tensor));
    v->outsig = ic__calloc(c, (size_t)v->nouts + 1, sizeof(ic_tensor));
    if (!v->argsig || !v->outsig)
        return ic__error(c, IC_ENOMEM, "out of memory");
    for (int i = 0; i < v->nargs + v->nouts; i++) {
        bool arg = i < v->nargs;
        ic_node_info ni;
        ic_graph_node(g, arg ? ic_graph_arg(g, i) : ic_graph_output(g, i - v->nargs), &ni);
        int64_t shape[IC_MAX_RANK];
        for (int d = 0; d < ni.rank; d++)
            shape[d] = ni.shape[d].coef; /* specialised: constant */
        ic_tensor_init(arg ? &v->argsig[i] : &v->outsig[i - v->nargs], ni.dtype, ni.rank, shape, NULL);
    }
    return IC_OK;
}

/* Embedding indices outside [0, num_embeddings) are an error in PyTorch; the kernels clamp
 * them (no stray reads), so ic_run checks the ones that come straight from an argument, through
 * value-preserving views, before running. */
static ic_status make_index_checks(ic_ctx *c, ic__variant *v)
{
    const ic_graph *g = v->g;
    int n = ic_graph_num_nodes(g), nargs = ic_graph_num_args(g), k = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (ic_value id = 0; id < n; id++) {
            ic_node_info ni, wi, xi;
            ic_graph_node(g, id, &ni);
            if (ni.op != IC_OP_EMBEDDING || ni.ninputs < 2 || ni.inputs[1].node < 0)
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
            ic_graph_node(g, ni.inputs[0].node, &wi);
            if (arg < 0 || wi.rank < 1 || !(xi.dtype == IC_I32 || xi.dtype == IC_I64))
                continue;
            if (pass == 1)
                v->checks[k] = (struct ic__index_check){ arg, wi.shape[0].coef, ni.name };
            k++;
        }
        if (pass == 0 && k > 0 && !(v->checks = ic__calloc(c, (size_t)k, sizeof *v->checks)))
            return ic__error(c, IC_ENOMEM, "compile: out of memory");
        v->nchecks = pass == 0 ? 0 : k;
        k = 0;
    }
    return IC_OK;
}

static ic_status check_indices(const ic_compiled *cc, const ic__variant *v, const ic_tensor *args)
{
    for (int i = 0; i < v->nchecks; i++) {
        const struct ic__index_check *ck = &v->checks[i];
        const ic_tensor *t = &args[ck->arg];
        int64_t n = ic_tensor_numel(t), idx[IC_MAX_RANK] = { 0 }, off = 0;
        for (int64_t e = 0; e < n; e++) {
            int64_t x = t->dtype == IC_I32 ? ((const int32_t *)t->data)[off] : ((const int64_t *)t->data)[off];
            if (x < 0 || x >= ck->limit)
                return ic__node_error(cc->g, ck->node, "embedding", IC_EINVAL,
                                      "index %lld out of range [0, %lld) (argument %d, element %lld)",
                                      (long long)x, (long long)ck->limit, ck->arg, (long long)e);
            for (int d = t->rank - 1; d >= 0; d--) {
                off += t->strides[d];
                if (++idx[d] < t->shape[d])
                    break;
                off -= t->strides[d] * t->shape[d];
                idx[d] = 0;
            }
        }
    }
    return IC_OK;
}

static void variant_destroy(ic_ctx *c, ic__variant *v)
{
    if (!v)
        return;
    ic__free(c, v->checks);
    for (ic__slot *s = v->all_slots, *n; s; s = n) {
        n = s->next_all;
        for (int i = 0; i < v->nargs; i++)
            ic__free(c, s->staging_raw[i]);
        ic__free(c, s->arena_raw);
        ic__free(c, s);
    }
    ic__jit_destroy(v->jit);
    ic__free(c, v->fns);
    for (int k = 0; v->remap && k < v->nkernels; k++)
        ic__free(c, v->remap[k].pairs);
    ic__free(c, v->remap);
    ic__free(c, v->code);
    if (v->prog)
        ic_program_destroy(v->prog);
    if (v->spec)
        ic_graph_destroy(v->spec);
    ic_graph_destroy(v->folded);
    ic__free(c, v->vals);
    ic__free(c, v->argsig);
    ic__free(c, v->outsig);
    ic__free(c, v);
}

/* ---- kernels that are the same code (dedup) ---- */

/* Kernel b is kernel a with its buffers renamed: the same loops, instructions and parameters,
 * and a one-to-one map between the buffers they touch of equal dtype (the code depends on
 * nothing else of a buffer, whether argument, temporary or output; only frozen weights, packed
 * at compile time, must be the same weight). Then b runs a's code on a buffer table in
 * which a's buffer numbers point at b's buffers (the attention's q, k and v projections, the
 * layers of a model). fwd/bwd: [nbufs] scratch; on success the pairs (a's buffer, b's buffer)
 * are appended to pairs (room for nbufs) and their count returned, else -1. */
static int same_code(const ic_kernel *a, const ic_kernel *b, const ic_codegen_params *pa,
                     const ic_codegen_params *pb, const ic_program *p, int *fwd, int *bwd, int *pairs)
{
    if (a->nouter != b->nouter || a->ninner != b->ninner || a->nstages != b->nstages ||
        memcmp(a->outer, b->outer, sizeof a->outer) || memcmp(a->inner, b->inner, sizeof a->inner) ||
        memcmp(pa, pb, sizeof *pa))
        return -1;
    int nb = ic_program_num_buffers(p), n = 0;
    for (int i = 0; i < nb; i++)
        fwd[i] = bwd[i] = -1;
    for (int s = 0; s < a->nstages; s++) {
        const ic_stage *sa = &a->stages[s], *sb = &b->stages[s];
        if (sa->kind != sb->kind || sa->ninstr != sb->ninstr)
            return -1;
        for (int i = 0; i < sa->ninstr; i++) {
            const ic_linstr *x = &sa->instr[i], *y = &sb->instr[i];
            if (x->op != y->op || x->type != y->type || x->a != y->a || x->b != y->b || x->c != y->c ||
                x->cmp != y->cmp || x->red != y->red || x->flags != y->flags || x->imm.is_int != y->imm.is_int || x->imm.i != y->imm.i ||
                memcmp(&x->imm.f, &y->imm.f, sizeof x->imm.f))
                return -1;
            if (x->op != IC_L_LOAD && x->op != IC_L_STORE)
                continue;
            if (x->buf < 0 || y->buf < 0 || x->buf >= nb || y->buf >= nb)
                return -1;
            if (fwd[x->buf] < 0 && bwd[y->buf] < 0) {
                const ic_buffer *bx = ic_program_buffer(p, x->buf), *by = ic_program_buffer(p, y->buf);
                bool frozen = pa->gemm.prepack == 1 && (bx->kind == IC_BUF_PARAM || by->kind == IC_BUF_PARAM);
                if (bx->dtype != by->dtype || (frozen && (bx->kind != by->kind || bx->data != by->data)))
                    return -1;
                fwd[x->buf] = y->buf, bwd[y->buf] = x->buf;
                pairs[2 * n] = x->buf, pairs[2 * n + 1] = y->buf;
                n++;
            }
            if (fwd[x->buf] != y->buf || bwd[y->buf] != x->buf)
                return -1;
        }
    }
    return n;
}

/* v->code[k]: the kernel whose code kernel k runs (k itself, or an earlier kernel that is the
 * same code) and v->remap[k] its buffer pairs. */
static ic_status find_same_code(ic_ctx *c, ic__variant *v, const ic_codegen_params *params)
{
    int nk = v->nkernels, nb = ic_program_num_buffers(v->prog);
    v->code = ic__calloc(c, (size_t)nk + 1, sizeof *v->code);
    v->remap = ic__calloc(c, (size_t)nk + 1, sizeof *v->remap);
    int *scratch = ic__calloc(c, (size_t)(4 * nb) + 1, sizeof(int));
    if (!v->code || !v->remap || !scratch) {
        ic__free(c, scratch);
        return ic__error(c, IC_ENOMEM, "compile: out of memory");
    }
    ic_status s = IC_OK;
    for (int k = 0; k < nk && !s; k++) {
        v->code[k] = k;
        const ic_kernel *kk = ic_program_kernel(v->prog, k);
        for (int j = 0; j < k; j++) {
            if (v->code[j] != j)
                continue;
            int n = same_code(ic_program_kernel(v->prog, j), kk, &params[j], &params[k], v->prog, scratch,
                              scratch + nb, scratch + 2 * nb);
            if (n < 0)
                continue;
            ic__remap *r = &v->remap[k];
            if (!(r->pairs = ic__malloc(c, sizeof(int) * (size_t)(2 * n + 1)))) {
                s = ic__error(c, IC_ENOMEM, "compile: out of memory");
                break;
            }
            memcpy(r->pairs, scratch + 2 * nb, sizeof(int) * (size_t)(2 * n));
            r->n = n;
            v->code[k] = j;
            break;
        }
    }
    ic__free(c, scratch);
    return s;
}

/* ---- code generation, one module per kernel, on several threads ---- */

/* The jobs of one variant's code generation: one per distinct kernel. Workers take jobs in
 * order; each job builds its own LLVM module (own context), optimises it and compiles it to
 * object code, so jobs share nothing but this table. */
typedef struct {
    ic_ctx *c;
    const ic__variant *v;
    const ic_codegen_params *params;
    ic_buffer *bufs;            /* [nbufs] copies of the program's buffers */
    int nbufs, njobs;
    int *kernel;                /* [njobs] kernel index of each job */
    ic__object **obj;           /* [njobs] */
    char **sym;                 /* [njobs] the kernel's symbol */
    char **ir, **as;            /* [njobs] optimised IR / assembly text (dumps only) */
    int *job_of;                /* [nkernels] the job of each kernel that runs its own code */
    bool want_ir, want_as, want_obj;
    pthread_mutex_t lock;       /* next, status, cpu */
    int next;
    ic_status status;           /* the first failure */
    double cpu_gen, cpu_opt, cpu_obj; /* CPU ms of each step, all threads */
} ic__build;

static double thread_cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* One job: loop IR of kernel -> LLVM IR -> optimised (ic_llvm_module_optimize) -> object code
 * (+ dumps). */
static ic_status build_job(ic__build *B, int j, const ic_codegen_target *t, double cpu[3])
{
    ic_ctx *c = B->c;
    int k = B->kernel[j];
    ic_kernel kern = *ic_program_kernel(B->v->prog, k);
    ic_llvm_module *m = NULL;
    double t0 = thread_cpu_ms();
    ic_status s = ic_llvmgen_kernels(c, 1, &kern, B->nbufs, B->bufs, t, &B->params[k], &m);
    double t1 = thread_cpu_ms();
    if (!s)
        s = ic_llvm_module_optimize(m);
    double t2 = thread_cpu_ms();
    if (!s && !(B->sym[j] = ic__strdup(c, ic_llvm_module_kernel_symbol(m, 0))))
        s = ic__error(c, IC_ENOMEM, "compile: out of memory");
    if (!s && B->want_ir)
        B->ir[j] = ic_llvm_module_ir_string(m);
    if (!s && B->want_as)
        B->as[j] = ic_llvm_module_asm_string(m);
    double t3 = thread_cpu_ms();
    if (!s && B->want_obj)
        s = ic__jit_emit_object(c, m, &B->obj[j]);
    cpu[0] += t1 - t0, cpu[1] += t2 - t1, cpu[2] += thread_cpu_ms() - t3;
    ic_llvm_module_destroy(m);
    return s;
}

static void *build_worker(void *arg)
{
    ic__build *B = arg;
    double cpu[3] = { 0, 0, 0 };
    /* a target (and its target machine) per thread: LLVM's target machines cache per-function
     * subtargets without locks */
    ic_codegen_target *t = NULL;
    ic_status s = ic_codegen_target_create(B->c, &t);
    for (;;) {
        pthread_mutex_lock(&B->lock);
        if (s && !B->status)
            B->status = s;
        int j = B->status ? B->njobs : B->next++;
        pthread_mutex_unlock(&B->lock);
        if (j >= B->njobs)
            break;
        s = build_job(B, j, t, cpu);
    }
    ic_codegen_target_destroy(t);
    pthread_mutex_lock(&B->lock);
    B->cpu_gen += cpu[0], B->cpu_opt += cpu[1], B->cpu_obj += cpu[2];
    pthread_mutex_unlock(&B->lock);
    return NULL;
}

/* Threads for code generation: IC_COMPILE_THREADS, else the cores online; at most one per job. */
static int build_threads(int njobs)
{
    const char *e = getenv("IC_COMPILE_THREADS");
    long n = e && *e ? atol(e) : sysconf(_SC_NPROCESSORS_ONLN);
    n = n < 1 ? 1 : n > 64 ? 64 : n;
    return (int)(n < njobs ? n : njobs);
}

/* Runs the jobs on build_threads() threads, the calling one included. */
static ic_status build_run(ic__build *B, int *nthreads)
{
    int n = build_threads(B->njobs);
    pthread_t tids[64];
    int started = 0;
    for (int i = 1; i < n; i++)
        if (pthread_create(&tids[started], NULL, build_worker, B) == 0)
            started++;
    build_worker(B); /* even if no thread could start, every job gets done here */
    for (int i = 0; i < started; i++)
        pthread_join(tids[i], NULL);
    *nthreads = started + 1;
    return B->status;
}

static void build_free(ic__build *B)
{
    for (int j = 0; j < B->njobs; j++) {
        if (B->obj)
            ic__jit_object_free(B->c, B->obj[j]);
        if (B->sym)
            ic__free(B->c, B->sym[j]);
        if (B->ir)
            free(B->ir[j]);
        if (B->as)
            free(B->as[j]);
    }
    ic__free(B->c, B->obj);
    ic__free(B->c, B->sym);
    ic__free(B->c, B->ir);
    ic__free(B->c, B->as);
    ic__free(B->c, B->kernel);
    ic__free(B->c, B->job_of);
    ic__free(B->c, B->bufs);
    pthread_mutex_destroy(&B->lock);
}

/* Optimised IR (or assembly) of every kernel in program order, for the dumps: a module per
 * distinct kernel, and a comment for each kernel that runs another's code. malloc'd. */
static char *build_text(const ic__build *B, const ic__variant *v, char **text)
{
    size_t n = 1;
    for (int j = 0; j < B->njobs; j++)
        n += text[j] ? strlen(text[j]) : 0;
    for (int k = 0; k < v->nkernels; k++) {
        const char *name = ic_program_kernel(v->prog, k)->name;
        n += 2 * (name ? strlen(name) : 1) + 128;
    }
    char *out = malloc(n), *p = out, *end = out + n;
    if (!out)
        return NULL;
    *p = 0;
    for (int k = 0; k < v->nkernels; k++) {
        const char *name = ic_program_kernel(v->prog, k)->name, *orig = ic_program_kernel(v->prog, v->code[k])->name;
        if (v->code[k] == k)
            snprintf(p, (size_t)(end - p), "; ---- kernel %d '%s' ----\n%s", k, name ? name : "?",
                     text[B->job_of[k]] ? text[B->job_of[k]] : "");
        else
            snprintf(p, (size_t)(end - p), "; ---- kernel %d '%s': the code of kernel %d '%s', on its own buffers ----\n",
                     k, name ? name : "?", v->code[k], orig ? orig : "?");
        p += strlen(p);
    }
    return out;
}

/* The jobs of v (v->code set): one per distinct kernel, GEMM kernels first. build_free(B)
 * afterwards, also on failure. */
static ic_status build_init(ic_ctx *c, const ic__variant *v, const ic_codegen_params *params, ic__build *B)
{
    memset(B, 0, sizeof *B);
    pthread_mutex_init(&B->lock, NULL);
    B->c = c, B->v = v, B->params = params;
    B->nbufs = ic_program_num_buffers(v->prog);
    for (int k = 0; k < v->nkernels; k++)
        B->njobs += v->code[k] == k;
    B->bufs = ic__calloc(c, (size_t)B->nbufs + 1, sizeof *B->bufs);
    B->kernel = ic__calloc(c, (size_t)B->njobs + 1, sizeof *B->kernel);
    B->obj = ic__calloc(c, (size_t)B->njobs + 1, sizeof *B->obj);
    B->sym = ic__calloc(c, (size_t)B->njobs + 1, sizeof *B->sym);
    B->ir = ic__calloc(c, (size_t)B->njobs + 1, sizeof *B->ir);
    B->as = ic__calloc(c, (size_t)B->njobs + 1, sizeof *B->as);
    B->job_of = ic__calloc(c, (size_t)v->nkernels + 1, sizeof *B->job_of);
    if (!B->bufs || !B->kernel || !B->obj || !B->sym || !B->ir || !B->as || !B->job_of)
        return ic__error(c, IC_ENOMEM, "compile: out of memory");
    for (int i = 0; i < B->nbufs; i++)
        B->bufs[i] = *ic_program_buffer(v->prog, i);
    /* GEMM kernels first: they take 3-5 times as long to compile as loop nests, and the
     * threads take jobs in order, so the small jobs fill the gaps at the end */
    for (int pass = 0, j = 0; pass < 2; pass++)
        for (int k = 0; k < v->nkernels; k++)
            if (v->code[k] == k && ic_kernel_is_gemm(ic_program_kernel(v->prog, k), B->bufs) == (pass == 0))
                B->job_of[k] = j, B->kernel[j++] = k;
    return IC_OK;
}

/* Stages 4-6 of compile_variant: the distinct kernels (find_same_code) each become a module
 * that is generated, optimised and compiled to object code, on several threads; the JIT then
 * links the objects and every kernel's function is looked up. stats: for the log. */
static ic_status codegen_variant(ic_compiled *cc, ic__variant *v, const ic_codegen_target *t,
                                 const ic_codegen_params *params, ic__dbg *dbg, char *stats, size_t nstats)
{
    ic_ctx *c = cc->c;
    ic__build B;
    ic_status s = build_init(c, v, params, &B);
    if (s)
        goto done;
    B.want_ir = dbg->on || dump_wanted(c, "llvm");
    B.want_as = dbg->on || dump_wanted(c, "asm");
    B.want_obj = true;
    double t0 = now_ms();
    int nthreads = 1;
    if ((s = build_run(&B, &nthreads)))
        goto done;
    double t1 = now_ms();
    if (B.want_ir || B.want_as) {
        char *ir = B.want_ir ? build_text(&B, v, B.ir) : NULL;
        char *as = B.want_as ? build_text(&B, v, B.as) : NULL;
        if (dump_wanted(c, "llvm"))
            fprintf(stderr, "== after llvm ==\n%s", ir ? ir : "(none)\n");
        if (dump_wanted(c, "asm"))
            fprintf(stderr, "== after asm ==\n%s", as ? as : "(none)\n");
        dbg_write(dbg, "output_code.ll", print_text, ir);
        dbg_write(dbg, "output_code.s", print_text, as);
        free(ir);
        free(as);
    }
    if ((s = ic__jit_create(c, t, &v->jit)))
        goto done;
    for (int j = 0; j < B.njobs && !s; j++) {
        s = ic__jit_add_object(v->jit, B.obj[j]);
        B.obj[j] = NULL;
    }
    for (int k = 0; k < v->nkernels && !s; k++)
        if (v->code[k] == k)
            s = ic__jit_lookup(v->jit, B.sym[B.job_of[k]], (void **)&v->fns[k]);
    for (int k = 0; k < v->nkernels && !s; k++)
        v->fns[k] = v->fns[v->code[k]];
    snprintf(stats, nstats, "codegen %.1f on %d thread%s [cpu ms: llvmgen %.1f, optimise %.1f, object code %.1f], "
             "link %.1f", t1 - t0, nthreads, nthreads > 1 ? "s" : "", B.cpu_gen, B.cpu_opt, B.cpu_obj,
             now_ms() - t1);
done:
    build_free(&B);
    return s;
}

/* ic-dump's llvm-opt and asm stages: the optimised modules of prog's kernels exactly as
 * ic_compile makes them (one per distinct kernel, its pipeline), in kernel order. */
static ic_status dump_modules(ic_ctx *c, ic_program *prog, const ic_codegen_params *params, bool as, FILE *f)
{
    ic__variant v;
    memset(&v, 0, sizeof v);
    v.prog = prog;
    v.nkernels = ic_program_num_kernels(prog);
    ic__build B;
    int nthreads;
    ic_status s = find_same_code(c, &v, params);
    if (!s) {
        if (!(s = build_init(c, &v, params, &B))) {
            B.want_ir = !as, B.want_as = as;
            s = build_run(&B, &nthreads);
        }
        char *text = s ? NULL : build_text(&B, &v, as ? B.as : B.ir);
        if (text)
            fputs(text, f);
        else if (!s)
            s = ic__error(c, IC_ENOMEM, "dump: out of memory");
        free(text);
        build_free(&B);
    }
    for (int k = 0; v.remap && k < v.nkernels; k++)
        ic__free(c, v.remap[k].pairs);
    ic__free(c, v.remap);
    ic__free(c, v.code);
    return s;
}

/* The whole compile of one variant, stage by stage:
 *   1 specialise   symbols -> the sizes in vals (graphs with symbols only)
 *   2 lower        graph -> loop IR, one kernel per op (views folded into indices)
 *   3 fuse         group kernels (fusion on)            [debug: ir_pre/post_fusion.txt]
 *   4 llvmgen      loop IR -> LLVM IR, per-kernel params, a module per distinct kernel
 *   5 optimise     default<O3> (O1 for GEMM kernels), vectorizers on [debug: output_code.ll/.s]
 *   6 jit          object code (4-6 on several threads, codegen_variant); LLJIT links it
 *                  and owns the code; look up each kernel
 * Every stage's output is a new object; failures free what was made. */
static ic_status compile_variant(ic_compiled *cc, const int64_t *vals, ic__variant **out)
{
    ic_ctx *c = cc->c;
    double t0 = now_ms();
    ic_status s = IC_OK;
    ic_program *pre = NULL;
    ic_codegen_target *t = NULL;
    ic_codegen_params *params = NULL;
    ic__dbg dbg;
    char stats[256] = "";
    *out = NULL;
    ic__variant *v = ic__calloc(c, 1, sizeof *v);
    if (!v || !(v->vals = ic__calloc(c, (size_t)cc->nsyms + 1, sizeof(int64_t))))
        goto oom;
    memcpy(v->vals, vals, sizeof(int64_t) * (size_t)cc->nsyms);
    v->g = cc->g;
    /* 1 */
    if (cc->nsyms > 0) {
        if ((s = ic_graph_specialize(cc->g, vals, &v->spec)))
            goto done;
        v->g = v->spec;
    }
    if (cc->o.freezing) { /* gemm: constant subgraphs (a cast of a weight) become params */
        if ((s = ic__graph_fold_constants(c, v->g, &v->folded)))
            goto done;
        v->g = v->folded ? v->folded : v->g;
    }
    dbg_open(&dbg, c, &cc->o, v->g);
    dbg_write(&dbg, "graph.txt", print_graph, v->g);
    /* 2, 3 */
    s = lower_and_fuse(c, v->g, cc->o.fusion && !c->no_fusion, &pre, &v->prog);
    dbg_write(&dbg, "ir_pre_fusion.txt", print_program, pre);
    if (s)
        goto done;
    dbg_write(&dbg, "ir_post_fusion.txt", print_program, v->prog);
    if (pre != v->prog)
        ic_program_destroy(pre);
    pre = NULL;
    double t_lower = now_ms();
    /* 4, 5, 6 */
    if ((s = ic_codegen_target_create(c, &t)))
        goto done;
    if (!(params = kernel_params(c, v->prog, t, &cc->o)))
        goto oom;
    v->nkernels = ic_program_num_kernels(v->prog);
    if (!(v->fns = ic__calloc(c, (size_t)v->nkernels + 1, sizeof(ic__kernel_fn))))
        goto oom;
    if ((s = find_same_code(c, v, params)) || (s = codegen_variant(cc, v, t, params, &dbg, stats, sizeof stats)))
        goto done;
    /* the execution plan: TEMP offsets come from the program's arena plan */
    v->nbufs = ic_program_num_buffers(v->prog);
    v->arena_bytes = ic_program_arena_size(v->prog);
    if ((s = make_signatures(c, v)) || (s = make_index_checks(c, v)))
        goto done;
    v->compile_ms = now_ms() - t0;
    int ncode = 0;
    for (int k = 0; k < v->nkernels; k++)
        ncode += v->code[k] == k;
    ic__logf(c, 1, "ic: compiled '%s': %d kernels (%d distinct) in %.1f ms (lower+fuse %.1f, %s)",
             ic_graph_name(cc->g), v->nkernels, ncode, v->compile_ms, t_lower - t0, stats);
    goto done;
oom:
    s = ic__error(c, IC_ENOMEM, "compile: out of memory");
done:
    if (pre && pre != (v ? v->prog : NULL))
        ic_program_destroy(pre);
    ic__free(c, params);
    ic_codegen_target_destroy(t);
    if (s) {
        variant_destroy(c, v);
        return s;
    }
    *out = v;
    return IC_OK;
}

/* ---- public API ---- */

static void profile_print(const ic_compiled *cc, const ic__variant *v);

ic_status ic_compile(ic_ctx *c, const ic_graph *g, const ic_compile_options *o, ic_compiled **out)
{
    if (!out)
        return ic__error(c, IC_EINVAL, "ic_compile: out is NULL");
    *out = NULL;
    if (!g)
        return ic__error(c, IC_EINVAL, "ic_compile: graph is NULL");
    ic_status s = ic_graph_verify(g);
    if (s)
        return s;
    ic_compiled *cc = ic__calloc(c, 1, sizeof *cc);
    if (!cc)
        return ic__error(c, IC_ENOMEM, "ic_compile: out of memory");
    cc->c = c;
    cc->g = g;
    if (o)
        cc->o = *o;
    else
        ic_compile_options_init(&cc->o);
    cc->mode = ic__strdup(c, cc->o.mode ? cc->o.mode : "default");
    cc->o.mode = cc->mode;
    cc->o.debug_dir = NULL;
    if (o && o->debug_dir && !(cc->o.debug_dir = ic__strdup(c, o->debug_dir)))
        cc->mode = NULL;
    pthread_mutex_init(&cc->lock, NULL);
    const char *prof = getenv("IC_PROFILE");
    cc->profile = prof && *prof && strcmp(prof, "0") != 0;
    cc->nsyms = ic_graph_num_symbols(g);
    cc->bound = ic__malloc(c, sizeof(int64_t) * (size_t)(cc->nsyms + 1));
    if (!cc->mode || !cc->bound) {
        ic_compiled_destroy(cc);
        return ic__error(c, IC_ENOMEM, "ic_compile: out of memory");
    }
    for (int i = 0; i < cc->nsyms; i++)
        cc->bound[i] = -1;
    if (strcmp(cc->mode, "default") != 0) {
        ic_compiled_destroy(cc);
        return ic__node_error(g, NULL, NULL, IC_EINVAL, "unknown compile mode '%s' (known: default)",
                              o->mode);
    }
    if (cc->o.max_variants < -1) {
        int m = cc->o.max_variants;
        ic_compiled_destroy(cc);
        return ic__node_error(g, NULL, NULL, IC_EINVAL,
                              "ic_compile: max_variants %d (0: 16, -1: no limit, or a count)", m);
    }
    if (cc->nsyms == 0) {
        ic__variant *v;
        if ((s = compile_variant(cc, cc->bound, &v))) {
            ic_compiled_destroy(cc);
            return s;
        }
        cc->variants = ic__calloc(c, 4, sizeof *cc->variants);
        if (!cc->variants) {
            variant_destroy(c, v);
            ic_compiled_destroy(cc);
            return ic__error(c, IC_ENOMEM, "ic_compile: out of memory");
        }
        cc->capvariants = 4;
        cc->variants[cc->nvariants++] = v;
        cc->last = v;
    }
    *out = cc;
    return IC_OK;
}

void ic_compiled_destroy(ic_compiled *cc)
{
    if (!cc)
        return;
    for (int i = 0; i < cc->nvariants && cc->profile; i++)
        profile_print(cc, cc->variants[i]);
    for (int i = 0; i < cc->nvariants; i++)
        variant_destroy(cc->c, cc->variants[i]);
    ic__free(cc->c, cc->variants);
    ic__free(cc->c, cc->bound);
    ic__free(cc->c, cc->mode);
    ic__free(cc->c, (void *)cc->o.debug_dir);
    pthread_mutex_destroy(&cc->lock);
    ic__free(cc->c, cc);
}

ic_status ic_compiled_bind(ic_compiled *cc, const char *sym, int64_t value)
{
    pthread_mutex_lock(&cc->lock);
    ic_status s = ic_graph_bind(cc->g, sym, value, cc->bound);
    cc->last = NULL; /* the fast path matches args only: re-resolve the variant */
    pthread_mutex_unlock(&cc->lock);
    return s;
}

/* ---- running ---- */

static bool same_sig(const ic_tensor *want, const ic_tensor *got)
{
    if (want->dtype != got->dtype || want->rank != got->rank)
        return false;
    for (int d = 0; d < want->rank; d++)
        if (want->shape[d] != got->shape[d])
            return false;
    return true;
}

static bool args_match(const ic__variant *v, int nargs, const ic_tensor *args)
{
    if (!v || nargs != v->nargs)
        return false;
    for (int i = 0; i < nargs; i++)
        if (!same_sig(&v->argsig[i], &args[i]))
            return false;
    return true;
}

/* The variant for these args: the last one used, a cached one, or a new compile. Called
 * with cc->lock held. */
/* Past cc's variant limit, drops the least recently used variant that no run is using
 * (never keep, the one about to run). Called with cc->lock held. */
static void evict_variants(ic_compiled *cc, const ic__variant *keep)
{
    int limit = cc->o.max_variants ? cc->o.max_variants : 16;
    while (limit > 0 && cc->nvariants > limit) {
        int lru = -1;
        for (int i = 0; i < cc->nvariants; i++) {
            const ic__variant *v = cc->variants[i];
            if (v != keep && v->busy == 0 && (lru < 0 || v->used < cc->variants[lru]->used))
                lru = i;
        }
        if (lru < 0) /* every other one is running: over the limit until they finish */
            return;
        ic__variant *v = cc->variants[lru];
        if (cc->last == v)
            cc->last = NULL;
        memmove(cc->variants + lru, cc->variants + lru + 1,
                sizeof *cc->variants * (size_t)(cc->nvariants - lru - 1));
        cc->nvariants--;
        variant_destroy(cc->c, v);
    }
}

static ic_status find_variant(ic_compiled *cc, int nargs, const ic_tensor *args, ic__variant **out)
{
    if (args_match(cc->last, nargs, args)) {
        *out = cc->last;
        cc->last->used = ++cc->tick;
        return IC_OK;
    }
    int64_t stackvals[16], *vals = cc->nsyms <= 16 ? stackvals : ic__malloc(cc->c, sizeof(int64_t) * (size_t)cc->nsyms);
    if (!vals)
        return ic__error(cc->c, IC_ENOMEM, "ic_run: out of memory");
    memcpy(vals, cc->bound, sizeof(int64_t) * (size_t)cc->nsyms);
    ic_status s = ic_runtime_bind_args(cc->g, nargs, args, vals);
    for (int i = 0; !s && i < cc->nsyms; i++)
        if (vals[i] < 0)
            s = ic__node_error(cc->g, NULL, NULL, IC_EINVAL,
                               "symbol '%s' is not fixed by any argument: bind it (ic_compiled_bind)",
                               ic_graph_symbol_name(cc->g, i));
    ic__variant *v = NULL;
    for (int i = 0; !s && i < cc->nvariants && !v; i++)
        if (memcmp(cc->variants[i]->vals, vals, sizeof(int64_t) * (size_t)cc->nsyms) == 0)
            v = cc->variants[i];
    if (!s && !v) {
        if (cc->nvariants == cc->capvariants) {
            int cap = cc->capvariants ? 2 * cc->capvariants : 4;
            ic__variant **nv = ic__realloc(cc->c, cc->variants, sizeof *nv * (size_t)cap);
            if (!nv)
                s = ic__error(cc->c, IC_ENOMEM, "ic_run: out of memory");
            else
                cc->variants = nv, cc->capvariants = cap;
        }
        if (!s && !(s = compile_variant(cc, vals, &v)))
            cc->variants[cc->nvariants++] = v;
    }
    if (vals != stackvals)
        ic__free(cc->c, vals);
    if (s)
        return s;
    /* bound sizes can still differ from the cached signature (a dtype, a fixed dim) */
    if (!args_match(v, nargs, args))
        return ic__node_error(cc->g, NULL, NULL, IC_ESHAPE, "arguments do not match the graph");
    cc->last = v;
    v->used = ++cc->tick;
    evict_variants(cc, v);
    *out = v;
    return IC_OK;
}

static ic__slot *slot_new(ic_ctx *c, const ic__variant *v)
{
    size_t n = sizeof(ic__slot) + sizeof(void *) * (size_t)(2 * v->nbufs + 2 * v->nargs) +
               sizeof(size_t) * (size_t)v->nargs + sizeof(double) * (size_t)v->nkernels + 16;
    ic__slot *s = ic__calloc(c, 1, n);
    if (!s)
        return NULL;
    s->bufs = (void **)(s + 1);
    s->staging = s->bufs + v->nbufs;
    s->staging_raw = s->staging + v->nargs;
    s->staging_cap = (size_t *)(s->staging_raw + v->nargs);
    s->alt = (void **)(s->staging_cap + v->nargs);
    s->prof_ms = (double *)(s->alt + v->nbufs);
    if (v->arena_bytes > 0 && !alloc64(c, (size_t)v->arena_bytes, &s->arena_raw)) {
        ic__free(c, s);
        return NULL;
    }
    s->arena = s->arena_raw ? (void *)(((uintptr_t)s->arena_raw + 63) & ~(uintptr_t)63) : NULL;
    return s;
}

/* A free slot of v (cc->lock held): the pool grows only when runs overlap. */
static ic__slot *slot_acquire(ic_compiled *cc, ic__variant *v)
{
    ic__slot *s = v->free_slots;
    if (s) {
        v->free_slots = s->next_free;
        v->busy++;
        return s;
    }
    if (!(s = slot_new(cc->c, v)))
        return NULL;
    s->next_all = v->all_slots;
    v->all_slots = s;
    v->busy++;
    return s;
}

static void slot_release(ic_compiled *cc, ic__variant *v, ic__slot *s)
{
    pthread_mutex_lock(&cc->lock);
    s->next_free = v->free_slots;
    v->free_slots = s;
    v->busy--;
    pthread_mutex_unlock(&cc->lock);
}

/* Copies a strided tensor into contiguous dst, element by element (any rank). */
static void copy_strided(void *dst, const ic_tensor *t)
{
    size_t es = ic_dtype_size(t->dtype);
    int64_t n = ic_tensor_numel(t), idx[IC_MAX_RANK] = { 0 }, off = 0;
    char *d = dst;
    for (int64_t i = 0; i < n; i++) {
        memcpy(d + i * (int64_t)es, (const char *)t->data + off * (int64_t)es, es);
        for (int k = t->rank - 1; k >= 0; k--) {
            off += t->strides[k];
            if (++idx[k] < t->shape[k])
                break;
            off -= t->strides[k] * t->shape[k];
            idx[k] = 0;
        }
    }
}

/* Byte range [lo, hi) a tensor's elements touch. */
static void extent(const ic_tensor *t, uintptr_t *lo, uintptr_t *hi)
{
    int64_t mn = 0, mx = 0;
    for (int d = 0; d < t->rank; d++) {
        if (t->shape[d] <= 0) {
            *lo = *hi = (uintptr_t)t->data;
            return;
        }
        int64_t span = (t->shape[d] - 1) * t->strides[d];
        if (span < 0)
            mn += span;
        else
            mx += span;
    }
    size_t es = ic_dtype_size(t->dtype);
    *lo = (uintptr_t)t->data + (uintptr_t)(mn * (int64_t)es);
    *hi = (uintptr_t)t->data + (uintptr_t)((mx + 1) * (int64_t)es);
}

static bool overlap(const ic_tensor *a, const ic_tensor *b)
{
    uintptr_t al, ah, bl, bh;
    extent(a, &al, &ah);
    extent(b, &bl, &bh);
    return al < ah && bl < bh && al < bh && bl < ah;
}

static ic_status check_outputs(ic_compiled *cc, const ic__variant *v, int nargs,
                               const ic_tensor *args, int nouts, const ic_tensor *outs)
{
    const ic_graph *g = cc->g;
    if (nouts != v->nouts)
        return ic__node_error(g, NULL, NULL, IC_EINVAL, "has %d outputs, got %d output tensors",
                              v->nouts, nouts);
    if (nouts > 0 && !outs)
        return ic__node_error(g, NULL, NULL, IC_EINVAL, "output tensors are NULL");
    for (int i = 0; i < nouts; i++) {
        const ic_tensor *o = &outs[i], *w = &v->outsig[i];
        ic_node_info ni;
        ic_graph_node(g, ic_graph_output(g, i), &ni);
        if (!same_sig(w, o) || !ic_tensor_is_contiguous(o) ||
            (!o->data && ic_tensor_numel(w) > 0)) {
            char got[160], want[160];
            int n = 0;
            for (int d = 0; d < o->rank && d < IC_MAX_RANK && n < 140; d++)
                n += snprintf(got + n, sizeof got - (size_t)n, "%s%lld", d ? ", " : "", (long long)o->shape[d]);
            got[n] = 0;
            n = 0;
            for (int d = 0; d < w->rank && n < 140; d++)
                n += snprintf(want + n, sizeof want - (size_t)n, "%s%lld", d ? ", " : "", (long long)w->shape[d]);
            want[n] = 0;
            return ic__node_error(g, ni.name, "output", IC_ESHAPE,
                                  "output %d must be a contiguous %s [%s] with data, got %s [%s]%s%s", i,
                                  ic_dtype_name(w->dtype), want,
                                  (unsigned)o->dtype < IC_DTYPE_COUNT ? ic_dtype_name(o->dtype) : "?", got,
                                  ic_tensor_is_contiguous(o) ? "" : " (strided)", o->data ? "" : " (no data)");
        }
        for (int j = 0; j < nargs; j++)
            if (overlap(o, &args[j]))
                return ic__node_error(g, ni.name, "output", IC_EINVAL,
                                      "output %d overlaps argument %d: outputs must be separate memory", i, j);
        for (int j = 0; j < i; j++)
            if (overlap(o, &outs[j]))
                return ic__node_error(g, ni.name, "output", IC_EINVAL, "output %d overlaps output %d", i, j);
    }
    return IC_OK;
}

/* Fills the buffer table of slot s for one run. */
static ic_status bind_buffers(ic_compiled *cc, const ic__variant *v, ic__slot *s,
                              const ic_tensor *args, const ic_tensor *outs)
{
    for (int b = 0; b < v->nbufs; b++) {
        const ic_buffer *buf = ic_program_buffer(v->prog, b);
        switch (buf->kind) {
        case IC_BUF_ARG: {
            const ic_tensor *a = &args[buf->index];
            if (ic_tensor_is_contiguous(a)) {
                s->bufs[b] = a->data;
                break;
            }
            size_t need = (size_t)ic_tensor_numel(a) * ic_dtype_size(a->dtype);
            if (s->staging_cap[buf->index] < need) {
                /* first strided use of this arg in this slot; reused afterwards */
                void *raw, *p = alloc64(cc->c, need, &raw);
                if (!p)
                    return ic__error(cc->c, IC_ENOMEM, "ic_run: out of memory staging argument %d",
                                     buf->index);
                ic__free(cc->c, s->staging_raw[buf->index]);
                s->staging_raw[buf->index] = raw;
                s->staging[buf->index] = p;
                s->staging_cap[buf->index] = need;
            }
            copy_strided(s->staging[buf->index], a);
            s->bufs[b] = s->staging[buf->index];
            break;
        }
        case IC_BUF_PARAM: s->bufs[b] = (void *)buf->data; break;
        case IC_BUF_OUTPUT: s->bufs[b] = outs[buf->index].data; break;
        case IC_BUF_TEMP: s->bufs[b] = (char *)s->arena + buf->arena_offset; break;
        }
    }
    return IC_OK;
}

/* The buffer table kernel k is called with: the slot's, or for a kernel that runs another's
 * code, the slot's alternate table with the buffers that code reads pointing at k's own. */
static void *const *kernel_table(const ic__variant *v, ic__slot *slot, int k)
{
    const ic__remap *r = &v->remap[k];
    if (r->n == 0)
        return slot->bufs;
    for (int i = 0; i < r->n; i++)
        slot->alt[r->pairs[2 * i]] = slot->bufs[r->pairs[2 * i + 1]];
    return slot->alt;
}

/* IC_PROFILE: the kernels one by one, each timed into the slot's counters (no locks: a slot
 * serves one run at a time; profile_print sums the slots). */
static void run_profiled(const ic__variant *v, ic__slot *slot)
{
    for (int k = 0; k < v->nkernels; k++) {
        double t = now_ms();
        v->fns[k](kernel_table(v, slot, k));
        slot->prof_ms[k] += now_ms() - t;
    }
    slot->prof_runs++;
}

/* IC_PROFILE: per kernel of each variant, the runs, mean ms per run and share of the total. */
static void profile_print(const ic_compiled *cc, const ic__variant *v)
{
    int64_t runs = 0;
    double total = 0;
    for (const ic__slot *s = v->all_slots; s; s = s->next_all)
        runs += s->prof_runs;
    if (runs == 0)
        return;
    fprintf(stderr, "ic: profile of '%s' (%d kernels, %lld runs):\n", ic_graph_name(cc->g), v->nkernels,
            (long long)runs);
    for (int k = 0; k < v->nkernels; k++)
        for (const ic__slot *s = v->all_slots; s; s = s->next_all)
            total += s->prof_ms[k];
    fprintf(stderr, "  %-40s %10s %10s %7s\n", "kernel", "total ms", "ms/run", "share");
    for (int k = 0; k < v->nkernels; k++) {
        double ms = 0;
        for (const ic__slot *s = v->all_slots; s; s = s->next_all)
            ms += s->prof_ms[k];
        fprintf(stderr, "  %-40s %10.3f %10.3f %6.1f%%\n", ic_program_kernel(v->prog, k)->name, ms,
                ms / (double)runs, total > 0 ? 100.0 * ms / total : 0.0);
    }
    fprintf(stderr, "  %-40s %10.3f %10.3f\n", "all kernels", total, total / (double)runs);
}

ic_status ic_run(ic_compiled *cc, int nargs, const ic_tensor *args, int nouts, ic_tensor *outs)
{
    if (!cc)
        return IC_EINVAL;
    if (nargs > 0 && !args)
        return ic__node_error(cc->g, NULL, NULL, IC_EINVAL, "arguments are NULL");
    for (int i = 0; i < nargs; i++)
        if (!args[i].data && ic_tensor_numel(&args[i]) != 0) {
            ic_node_info ni;
            ic_graph_node(cc->g, ic_graph_arg(cc->g, i < ic_graph_num_args(cc->g) ? i : 0), &ni);
            return ic__node_error(cc->g, ni.name, "argument", IC_EINVAL, "argument %d has no data", i);
        }
    ic__variant *v = NULL;
    pthread_mutex_lock(&cc->lock);
    ic_status s = find_variant(cc, nargs, args, &v);
    ic__slot *slot = s ? NULL : slot_acquire(cc, v);
    pthread_mutex_unlock(&cc->lock);
    if (s)
        return s;
    if (!slot)
        return ic__error(cc->c, IC_ENOMEM, "ic_run: out of memory for a run arena");
    if (!(s = check_outputs(cc, v, nargs, args, nouts, outs)) && !(s = check_indices(cc, v, args)) &&
        !(s = bind_buffers(cc, v, slot, args, outs))) {
        if (cc->profile) {
            run_profiled(v, slot);
        } else {
            for (int k = 0; k < v->nkernels; k++)
                v->fns[k](kernel_table(v, slot, k));
        }
    }
    slot_release(cc, v, slot);
    return s;
}

/* ---- introspection ---- */

static const ic__variant *last_variant(const ic_compiled *cc)
{
    return cc ? cc->last : NULL;
}

int ic_compiled_num_kernels(const ic_compiled *cc)
{
    const ic__variant *v = last_variant(cc);
    return v ? v->nkernels : 0;
}

const char *ic_compiled_kernel_name(const ic_compiled *cc, int i)
{
    const ic__variant *v = last_variant(cc);
    return v && i >= 0 && i < v->nkernels ? ic_program_kernel(v->prog, i)->name : NULL;
}

double ic_compiled_compile_ms(const ic_compiled *cc)
{
    const ic__variant *v = last_variant(cc);
    return v ? v->compile_ms : 0;
}

int ic_compiled_num_variants(const ic_compiled *cc)
{
    return cc ? cc->nvariants : 0;
}

int ic_compiled_output_shape(const ic_compiled *cc, int i, int64_t *shape)
{
    const ic__variant *v = last_variant(cc);
    if (!v || i < 0 || i >= v->nouts)
        return -1;
    memcpy(shape, v->outsig[i].shape, sizeof(int64_t) * (size_t)v->outsig[i].rank);
    return v->outsig[i].rank;
}

/* ---- dumps for ic-dump ---- */

ic_status ic_compile_dump(ic_ctx *c, const ic_graph *g, const ic_compile_options *o,
                          const int64_t *vals, const char *stage, FILE *f)
{
    ic_compile_options oo;
    if (!o)
        ic_compile_options_init(&oo), o = &oo;
    if (!g || !stage || !f)
        return ic__error(c, IC_EINVAL, "ic_compile_dump: graph, stage and file are required");
    bool st_graph = !strcmp(stage, "graph"), st_loops = !strcmp(stage, "loops"),
         st_fused = !strcmp(stage, "fused"), st_llvm = !strcmp(stage, "llvm"),
         st_opt = !strcmp(stage, "llvm-opt"), st_asm = !strcmp(stage, "asm");
    if (!(st_graph || st_loops || st_fused || st_llvm || st_opt || st_asm))
        return ic__error(c, IC_EINVAL, "unknown stage '%s' (graph, loops, fused, llvm, llvm-opt, asm)", stage);
    ic_status s = ic_graph_verify(g);
    if (s)
        return s;
    ic_graph *spec = NULL;
    const ic_graph *G = g;
    if (ic_graph_num_symbols(g) > 0) {
        if (!vals)
            return ic__node_error(g, NULL, NULL, IC_EINVAL, "has symbols: bind them to dump stage '%s'", stage);
        if ((s = ic_graph_specialize(g, vals, &spec)))
            return s;
        G = spec;
    }
    ic_program *pre = NULL, *prog = NULL;
    ic_codegen_target *t = NULL;
    ic_codegen_params *params = NULL;
    ic_llvm_module *m = NULL;
    if (st_graph) {
        ic_graph_print(f, G);
        goto done;
    }
    if (st_loops) {
        if (!(s = ic_lower(c, G, &prog)))
            ic_program_print(f, prog);
        goto done;
    }
    if ((s = lower_and_fuse(c, G, o->fusion && !c->no_fusion, &pre, &prog)))
        goto done;
    if (st_fused) {
        ic_program_print(f, prog);
        goto done;
    }
    if ((s = ic_codegen_target_create(c, &t)))
        goto done;
    if (!(params = kernel_params(c, prog, t, o))) {
        s = ic__error(c, IC_ENOMEM, "out of memory");
        goto done;
    }
    if (!st_llvm) { /* what ic_compile compiles: a module per distinct kernel */
        s = dump_modules(c, prog, params, st_asm, f);
        goto done;
    }
    if ((s = ic_llvmgen(c, prog, t, params, &m)))
        goto done;
    s = ic_llvm_module_print(f, m);
done:
    if (pre && pre != prog)
        ic_program_destroy(pre);
    if (prog)
        ic_program_destroy(prog);
    ic__free(c, params);
    ic_llvm_module_destroy(m);
    ic_codegen_target_destroy(t);
    if (spec)
        ic_graph_destroy(spec);
    return s;
}
