/* pipeline-impl.h - the one compile pipeline (pipeline.c) and what it is made of: the backend
 * interface (CPU: backend_cpu.c, CUDA: cuda_run.c), the stage outputs shared by
 * ic_compile_dump, IC_DUMP and the IC_COMPILE_DEBUG folder (dump.c), the variant cache
 * (variants.c) and the code-generation thread pool (pool.c).
 *
 *     graph --specialise--> --expand--> --freeze--> graph --lower--> loops --fuse--> fused
 *           --backend codegen--> llvm / llvm-opt / asm (CPU) or ptx (CUDA) --backend load-->
 *
 * Every consumer runs ic__pipeline: ic_compile and ic_cuda_compile (through the variant
 * cache, to the end), ic_compile_dump and ic-dump (stop_after a stage, its text into a file). */
#ifndef IC_PIPELINE_IMPL_H
#define IC_PIPELINE_IMPL_H

#include <stdio.h>
#include "compile-impl.h"
#include "ic/ptx.h"
#include "ic/runtime.h"

/* What every backend's variant starts with: one specialisation of the graph and its loop
 * IR. A backend's variant struct embeds this first (backend.variant_size). */
typedef struct ic__vbase {
    int64_t *vals;            /* [nsyms] the symbol values it is specialised for */
    ic_graph *spec;           /* owned when the graph has symbols, else NULL */
    ic_graph *convbn;         /* freezing: batch_norms folded into convolutions (owned) */
    ic_graph *attn;           /* fused attention rewrite (backend.fused_attention; owned), else NULL */
    ic_graph *expanded;       /* composite ops as existing ops (owned), else NULL */
    ic_graph *folded;         /* freezing: constant subgraphs folded (owned), else NULL */
    const ic_graph *g;        /* the graph compiled (folded, spec or the original) */
    ic_program *prog;         /* loop IR after fusion */
    double lower_ms, codegen_ms, load_ms, compile_ms;
    uint64_t used;            /* the cache's tick at its last use (LRU) */
    int busy;                 /* runs in flight: never evicted while > 0 */
    int nchecks;              /* embedding indices read straight from an argument */
    struct ic__index_check { int arg; int64_t limit; const char *node, *op; } *checks;
} ic__vbase;

typedef struct ic__pipe ic__pipe;

/* Compiled code saved by ic_compiled_save, loaded back (artifact.c): per variant its codegen
 * parameters and target, and every kernel's packed object (ic__jit_object_pack) by cache key. */
typedef struct ic__store ic__store;
/* The packed object saved under key: true and data[0..n) (inside the store), or false. */
IC_HIDDEN bool ic__store_find(const ic__store *st, const char *key, const void **data, size_t *n);
/* The variant saved for symbol values vals (nsyms of them): its kernels' parameters
 * ([*nkernels], inside the store) and the key text of its target; NULL when none is. */
IC_HIDDEN const ic_codegen_params *ic__store_variant(const ic__store *st, const int64_t *vals, int nsyms,
                                                    int *nkernels, const char **target);

/* A backend: how fused loop IR becomes code and code becomes something to run. */
typedef struct ic__backend {
    const char *name;         /* "cpu", "cuda" (ic_pipe_stage_info.backend) */
    const char *prefix;       /* fused kernel names: "cpu_", "gpu_" */
    bool stash_norm_rows;     /* ic_fuse_options.stash_norm_rows */
    bool fused_attention;     /* it has an attention kernel (ic_kernel.attn): with fusion on,
                               * attention is rewritten to it before expansion */
    size_t variant_size;      /* its variant struct, ic__vbase first */
    /* v->prog -> code, emitting the backend's stages (ic__pipe_emit); stops early when
     * P->stop_after is one of them */
    ic_status (*codegen)(ic__pipe *P, ic__vbase *v);
    /* code -> runnable (JIT link, module load, buffers) */
    ic_status (*load)(ic__pipe *P, ic__vbase *v);
    /* frees the backend's part of v (the pipeline frees the rest); bopts: ic__pipe.bopts */
    void (*variant_free)(ic_ctx *c, const void *bopts, ic__vbase *v);
} ic__backend;

/* The CUDA backend's options: d NULL makes PTX for the defaults (sm_90) and cannot load. */
typedef struct ic__cuda_bopts {
    ic_cuda *d;
    const ic_cuda_options *o; /* NULL = defaults */
} ic__cuda_bopts;

IC_HIDDEN extern const ic__backend ic__backend_cpu;  /* bopts: const ic_compile_options * */
IC_HIDDEN extern const ic__backend ic__backend_cuda; /* bopts: const ic__cuda_bopts * */

/* The IC_COMPILE_DEBUG folder of one compile. */
typedef struct {
    char dir[1024];
    bool on;
} ic__dbg;

/* How to run the pipeline: ic__pipe_init, then the fields below as needed. */
struct ic__pipe {
    ic_ctx *c;
    const ic__backend *be;
    const void *bopts;        /* the backend's options */
    const ic_graph *g;
    bool fusion;              /* false: one kernel per op (also IC_NO_FUSION) */
    bool freezing;            /* fold constant subgraphs (and, on CPU, prepack weights) */
    bool debug;               /* write an IC_COMPILE_DEBUG folder */
    const char *debug_dir;    /* its parent; NULL = "ic_debug" */
    int stop_after;           /* an ic_pipe_stage whose text goes to out, or -1: compile and load */
    FILE *out;
    ic_autotune_stats *tune;  /* where the autotuner and the cache count their work (NULL: a
                               * dump, nowhere); the compiled object's, updated under its lock */
    const ic__store *store;   /* saved code to use before compiling (a loaded artifact), or NULL */
    ic__dbg dbg;              /* set by ic__pipeline */
};

/* P for backend be with options bopts: fusion from the context (IC_NO_FUSION), debug from
 * its IC_COMPILE_DEBUG, no freezing, run to the end. */
IC_HIDDEN void ic__pipe_init(ic__pipe *P, ic_ctx *c, const ic__backend *be, const void *bopts,
                             const ic_graph *g);
/* The debug option of ic_compile_options / ic_cuda_options: 0 = the context's, 1 on, -1 off. */
IC_HIDDEN void ic__pipe_set_debug(ic__pipe *P, int debug, const char *dir);

/* The pipeline: specialise P->g for vals (NULL when it has no symbols) -> freeze -> lower ->
 * fuse -> backend codegen -> backend load, emitting each stage's text. With stop_after set
 * it stops after that stage (its text written to P->out) and loads nothing. The caller owns
 * *out (ic__variant_free), also when stopped early. */
IC_HIDDEN ic_status ic__pipeline(ic__pipe *P, const int64_t *vals, ic__vbase **out);
IC_HIDDEN void ic__variant_free(const ic__pipe *P, ic__vbase *v);
/* Every backend's runs: the embedding indices args hold are in range (g names the node). */
IC_HIDDEN ic_status ic__check_indices(const ic_graph *g, const ic__vbase *v, const ic_tensor *args);

/* ---- stage outputs (dump.c) ---- */

typedef void (*ic__print_fn)(FILE *f, const void *arg);

/* Whether anything wants stage st's text: the stop_after file, IC_DUMP, the debug folder. */
IC_HIDDEN bool ic__pipe_wants(const ic__pipe *P, ic_pipe_stage st);
/* Writes stage st's text (fn(f, arg)) to everything that wants it: the stop_after file, stderr
 * after "== after <stage> ==" (IC_DUMP), the debug folder's file (atomically). */
IC_HIDDEN void ic__pipe_emit(ic__pipe *P, ic_pipe_stage st, ic__print_fn fn, const void *arg);
IC_HIDDEN void ic__pipe_emit_text(ic__pipe *P, ic_pipe_stage st, const char *text);
/* Opens P's debug folder for graph g when P->debug (and P is not a dump). */
IC_HIDDEN void ic__dbg_open(ic__pipe *P, const ic_graph *g);

/* ---- the variant cache (variants.c): per-symbol-value specialisations, LRU ---- */

typedef struct ic__vcache {
    ic__pipe pipe;            /* how a missing variant is made */
    int nsyms;
    int max;                  /* max_variants: 0 = 16, -1 = no limit */
    ic__vbase **v;
    int n, cap;
    ic__vbase *last;          /* most recently used */
    uint64_t tick;
} ic__vcache;

IC_HIDDEN void ic__vcache_init(ic__vcache *vc, const ic__pipe *P, int max_variants);
/* The variant for vals: cached, or compiled now. It becomes the most recently used; then
 * idle variants past the limit are dropped, least recently used first (never *out). */
IC_HIDDEN ic_status ic__vcache_get(ic__vcache *vc, const int64_t *vals, ic__vbase **out);
IC_HIDDEN void ic__vcache_free(ic__vcache *vc);

/* ---- parallel code generation (pool.c) ---- */

/* One job per distinct kernel of prog (code[k] == k), GEMM kernels first; each job builds its
 * own LLVM module (own context), optimises it and, when want_obj, compiles it to object
 * code, on IC_COMPILE_THREADS threads (the calling one included). With want_obj and no text
 * wanted, a job first looks its kernel's object up by key: in the store, then in the
 * persistent cache (use_cache); a miss compiles it and puts it in the cache. */
typedef struct ic__build {
    ic_ctx *c;
    const ic_program *prog;
    const int *code;            /* [nkernels] the kernel whose code each kernel runs */
    const ic_codegen_params *params;
    ic_buffer *bufs;            /* [nbufs] copies of the program's buffers */
    int nbufs, njobs, nkernels;
    int *kernel;                /* [njobs] kernel index of each job */
    ic__object **obj;           /* [njobs] */
    char **sym;                 /* [njobs] the kernel's symbol */
    char **ir, **as;            /* [njobs] optimised IR / assembly text (dumps only) */
    int *job_of;                /* [nkernels] the job of each kernel that runs its own code */
    bool want_ir, want_as, want_obj;
    const char *target_text;    /* the keys' target: "target <triple> cpu <name> features <list>" */
    bool use_cache;             /* the persistent cache: look up and store objects */
    const ic__store *store;     /* saved objects, looked up first (NULL: none) */
    bool store_only;            /* a kernel the store lacks is an error (an artifact's variant) */
    char **key;                 /* [njobs] the cache key of each job's kernel (want_obj) */
    void **blob;                /* [njobs] its packed object (kept for ic_compiled_save) */
    size_t *nblob;              /* [njobs] bytes */
    bool *blob_owned;           /* [njobs] false: blob points into the store */
    int hits, misses;           /* lookups answered and not (store or cache) */
    int *todo, ntodo;           /* [njobs] the jobs to compile (the misses) */
    ic_codegen_target **target; /* [thread] each compile thread's own target */
    double (*cpu)[3];           /* [thread] CPU ms of each step */
    double cpu_gen, cpu_opt, cpu_obj; /* CPU ms of each step, all threads */
    int nthreads;               /* threads that compiled (after ic__build_run; 0: none did) */
} ic__build;

/* ic__build_free(B) afterwards, also on failure. ic__build_run looks every job up first (in
 * the calling thread), then compiles the misses on the threads. */
IC_HIDDEN ic_status ic__build_init(ic_ctx *c, const ic_program *prog, const int *code,
                                   const ic_codegen_params *params, ic__build *B);
IC_HIDDEN ic_status ic__build_run(ic__build *B);
IC_HIDDEN void ic__build_free(ic__build *B);
/* Every kernel's optimised IR or assembly (text: B->ir or B->as) in program order, a kernel
 * that runs another's code as a comment line. malloc'd; NULL on OOM. */
IC_HIDDEN char *ic__build_text(const ic__build *B, char **text);

IC_HIDDEN double ic__now_ms(void);
/* Copies a strided tensor into contiguous dst, element by element (any rank): the staging of
 * strided arguments, on every backend (slots.c). */
IC_HIDDEN void ic__copy_strided(void *dst, const ic_tensor *t);
/* The element offset after off in t's row-major order, idx[0..rank) its index (updated):
 * walks a strided tensor without a division per element. */
IC_HIDDEN int64_t ic__next_elem(const ic_tensor *t, int64_t *idx, int64_t off);

#endif
