/* runtime.h - executing graphs: the reference executor (the oracle every backend is
 * checked against) and argument binding. Compiled execution is added by later layers.
 *
 *     int64_t vals[8]; ic_tensor outs[1];
 *     ic_runtime_bind_args(g, nargs, args, vals);   // symbols from the supplied tensors
 *     ic_ref_run(c, g, vals, nargs, args, 1, outs); // outs[i] allocated: ic_tensor_free
 */
#ifndef IC_RUNTIME_H
#define IC_RUNTIME_H

#include "ic/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Fills vals[sym] from the shapes of args (ic_graph_arg order); symbols no arg fixes keep
 * their value (-1 = unbound). A symbol two args size differently is an error naming both;
 * so is a rank, dtype or fixed size that differs from the graph. */
IC_API ic_status ic_runtime_bind_args(const ic_graph *g, int nargs, const ic_tensor *args,
                                      int64_t *vals);

/* Runs g op by op in plain C. args follow ic_graph_arg order (any strides); vals binds
 * the symbols (every symbol must be bound; NULL when g has none). outs[i] receives freshly
 * allocated contiguous tensors that the caller frees with ic_tensor_free. Reductions
 * accumulate in double; f16/bf16 compute in f32 and round to nearest even. */
IC_API ic_status ic_ref_run(ic_ctx *c, const ic_graph *g, const int64_t *vals, int nargs,
                            const ic_tensor *args, int nouts, ic_tensor *outs);

/* ---- compiled execution (lib/Runtime/compile.c; the pipeline: pipeline.c) ----
 *
 *     ic_compile_options o; ic_compiled *cc;
 *     ic_compile_options_init(&o);                  // fusion on, all cores
 *     ic_compile(c, g, &o, &cc);                     // graph -> loop IR -> fused -> LLVM -> JIT
 *     ic_run(cc, nargs, args, nouts, outs);          // outs: caller's contiguous buffers
 *     ic_compiled_destroy(cc);                       // before g
 */

/* What the autotuner searches (ic_compile_options.autotune, ic_cuda_options.autotune). */
enum {
    IC_TUNE_GEMM = 1,        /* matmul-like kernels: tiles, blocks, packing, threads, stages */
    IC_TUNE_CONV = 2,        /* convolutions (implicit GEMMs on the GPU) */
    IC_TUNE_POINTWISE = 4,   /* pointwise kernels: vector width, unroll, prefetch, block size */
    IC_TUNE_REDUCTION = 8,   /* reductions: strips, threads per row, rows per block, split */
    IC_TUNE_ATTENTION = 16,  /* fused attention tiles (GPU) */
    IC_TUNE_COORDESC = 32,   /* refine the winner one parameter at a time (coordinate descent) */
    IC_TUNE_MAX = 63,        /* all of the above: what the max-autotune modes search */
    IC_TUNE_EXHAUSTIVE = 64, /* no pruning, no early stop, no budget (benchmarks of the tuner) */
};

/* What the autotuner and the persistent cache did for a compiled graph (all its variants). */
typedef struct ic_autotune_stats {
    int kernels;              /* distinct kernels the autotuner looked at */
    int tuned;                /* of them, benchmarked in this process */
    int record_hits;          /* of them, answered by a tuning record of the cache */
    int candidates;           /* candidates compiled and timed */
    int replaced;             /* kernels whose default lost to a candidate */
    double bench_s;           /* seconds spent timing candidates */
    double compile_s;         /* seconds spent compiling candidates */
    int code_hits, code_misses; /* compiled-code lookups in the persistent cache */
} ic_autotune_stats;

typedef struct ic_compile_options {
    int fusion;               /* 1 (default): fuse; 0: every op its own kernel ("unfused") */
    int threads;              /* OpenMP team size per kernel; 0 = the runtime's default */
    const char *mode;         /* as torch.compile: "default", "reduce-overhead" (no CUDA graphs on
                               * the CPU: as default), "max-autotune-no-cudagraphs",
                               * "max-autotune" (both: autotune = IC_TUNE_MAX when it is 0) */
    int debug;                /* 1: each compile writes a debug folder, -1: none, 0 (default):
                               * as the context's IC_COMPILE_DEBUG switch says */
    const char *debug_dir;    /* parent of the debug folders; NULL = "./ic_debug" */
    int vector_width;         /* 0 = heuristic, 1 = scalar code, else lanes */
    int64_t serial_threshold; /* 0 = heuristic; kernels smaller than this run on one thread */
    int64_t stream_bytes;     /* 0 = heuristic (a quarter of the last-level cache on x86), -1 =
                               * never, else: row kernels write outputs of at least this many
                               * bytes with non-temporal stores (ic_codegen_params) */
    int prefetch_bytes;       /* 0 = heuristic, -1 = no software prefetches, else the distance */
    int freezing;             /* 1: params with data are compile-time constants: matmul weights
                               * are packed once at compile time (ic_gemm_params.prepack) */
    int max_variants;         /* symbolic graphs: specialisations kept in memory (0 = 16, -1 =
                               * no limit); past it the least recently used idle one is
                               * dropped, and compiled again if its sizes come back */
    int autotune;             /* IC_TUNE_* flags: which kernels the autotuner searches (0: none) */
    double autotune_budget_s; /* tuning time limit per graph, seconds (0 = 60) */
    int cache;                /* the persistent cache (tuning records, object code): 0 = as the
                               * context says (on unless IC_CACHE=0), 1 = on, -1 = off */
} ic_compile_options;

typedef struct ic_compiled ic_compiled;

/* Defaults: fusion 1, threads 0, mode "default", debug 0 (the context's IC_COMPILE_DEBUG). */
IC_API void ic_compile_options_init(ic_compile_options *o);

/* Compiles g for the host CPU; o may be NULL (defaults). A graph without symbols is compiled
 * now; one with symbols is specialised at run time for the sizes ic_run sees (variants are
 * cached). The compiled object borrows g (destroy it first) and c; the caller owns *out. */
IC_API ic_status ic_compile(ic_ctx *c, const ic_graph *g, const ic_compile_options *o,
                            ic_compiled **out);

/* Runs the compiled graph. args follow ic_graph_arg order, any strides (non-contiguous
 * ones are copied into preallocated staging memory); outs[i] must be caller-allocated,
 * contiguous, with output i's dtype and shape, and must not overlap the args or each other.
 * Thread-safe: several threads may run one compiled graph at once (and bind, save, or meet new
 * sizes, whose variant is compiled while the others wait for cc); each run takes cc's own lock
 * twice, briefly, never a global one. ic_compiled_destroy only once every run has returned.
 * No allocation in the steady state. Errors name the argument or output and the shapes. */
IC_API ic_status ic_run(ic_compiled *cc, int nargs, const ic_tensor *args, int nouts,
                        ic_tensor *outs);

/* Binds a symbol that no argument fixes (like ic-run --bind B=8) for later runs. */
IC_API ic_status ic_compiled_bind(ic_compiled *cc, const char *sym, int64_t value);

IC_API void ic_compiled_destroy(ic_compiled *cc);

/* Introspection of the most recently used variant (0 / NULL before the first); safe while
 * other threads run cc, which may make another variant the last one meanwhile. A kernel name
 * lives as long as its variant: until cc is destroyed, or, for a symbolic graph, until
 * max_variants drops that variant. */
IC_API int ic_compiled_num_kernels(const ic_compiled *cc);
IC_API const char *ic_compiled_kernel_name(const ic_compiled *cc, int i);
IC_API double ic_compiled_compile_ms(const ic_compiled *cc);  /* wall time of that compile */
IC_API int ic_compiled_num_variants(const ic_compiled *cc);
/* What the autotuner and the cache did, summed over every variant compiled so far. */
IC_API void ic_compiled_autotune_stats(const ic_compiled *cc, ic_autotune_stats *out);
/* Shape of output i of the last variant run or compiled (rank, sizes); -1 if none. */
IC_API int ic_compiled_output_shape(const ic_compiled *cc, int i, int64_t *shape);

/* ---- saved compiled models (lib/Runtime/artifact.c), like AOTInductor's packages ----
 *
 *     ic_compile(c, g, &o, &cc); ic_run(cc, ...);   // every variant wanted compiled
 *     ic_compiled_save(cc, "bert.icm", true);       // graph, weights, kernels' object code
 *     ...                                           // another process, same ic and LLVM:
 *     ic_compiled_load(c, "bert.icm", &cc2);        // no LLVM code generation: ready in ms
 *     ic_run(cc2, ...); ic_compiled_destroy(cc2);   // cc2 owns its graph (ic_compiled_graph)
 */

/* Writes cc into one file, atomically (temp file + rename): its graph, every variant compiled
 * so far (symbol values, codegen parameters, each distinct kernel's object code), the compile
 * options, and the versions and CPU the code needs. with_weights: every param's data is in the
 * file; else params read from a safetensors file stay there (the file names it by absolute
 * path) and only in-memory ones are stored. Error when nothing was compiled yet. */
IC_API ic_status ic_compiled_save(const ic_compiled *cc, const char *path, bool with_weights);

/* Loads what ic_compiled_save wrote: the graph is lowered and fused again, each kernel's object
 * code comes from the file and is linked (no code generation). The result owns its graph and
 * the mapping of the file; sizes the file has no variant for compile as ic_compile would. A file
 * for another device, another ic or LLVM version, another target or a CPU with features this
 * host lacks is refused by an error naming the file and the mismatch; a truncated or damaged
 * file is an error (IC_EFORMAT), never used. */
IC_API ic_status ic_compiled_load(ic_ctx *c, const char *path, ic_compiled **out);

/* The graph cc runs: the one given to ic_compile, or the one ic_compiled_load made (owned by
 * cc, valid until ic_compiled_destroy). */
IC_API const ic_graph *ic_compiled_graph(const ic_compiled *cc);

/* ---- stages: one vocabulary for ic_compile_dump, ic-dump --stage, IC_DUMP and the
 * IC_COMPILE_DEBUG folder (lib/Runtime/dump.c) ---- */

typedef enum {
    IC_PIPE_GRAPH,           /* "graph": specialised (and, freezing, folded) graph */
    IC_PIPE_LOOPS,           /* "loops": loop IR, one kernel per op (Lower) */
    IC_PIPE_FUSED,           /* "fused": the kernels after Fuse */
    IC_PIPE_LLVM,            /* "llvm": the program's LLVM IR before O3 (CPU) */
    IC_PIPE_LLVM_OPT,        /* "llvm-opt": optimised LLVM IR (CPU modules; NVPTX on a GPU) */
    IC_PIPE_ASM,             /* "asm": host assembly */
    IC_PIPE_PTX,             /* "ptx": PTX (GPU) */
    IC_PIPE_SASS,            /* "sass": that PTX through ptxas + cuobjdump (ic-dump only) */
    IC_PIPE_COUNT
} ic_pipe_stage;

typedef struct ic_pipe_stage_info {
    const char *name;         /* "fused" */
    const char *aliases;      /* other accepted names, comma-separated ("fuse,post_fusion") */
    const char *what;         /* for banners: "fused kernels (Fuse)" */
    const char *comment;      /* what starts a comment line in the stage's text ("; ") */
    const char *debug_file;   /* its file in the IC_COMPILE_DEBUG folder, or NULL */
    const char *backend;      /* "cpu" or "cuda" when one backend makes it, NULL: both */
} ic_pipe_stage_info;

/* The stage's description, NULL when st is out of range. */
IC_API const ic_pipe_stage_info *ic_pipe_stage_get(ic_pipe_stage st);
/* The stage named name (or one of its aliases); false when none is. */
IC_API bool ic_pipe_stage_find(const char *name, ic_pipe_stage *out);

/* Prints one stage of compiling g under o (vals binds symbols, NULL when none) into f: the
 * text the pipeline produces for that stage in ic_compile (ic_cuda_compile for "ptx", with
 * default ic_cuda_options, sm_90, no GPU needed), made by the same code, which stops there:
 * nothing is JIT-compiled or loaded, no debug folder is written. stage: a name or alias
 * (ic_pipe_stage_find) except "sass". */
IC_API ic_status ic_compile_dump(ic_ctx *c, const ic_graph *g, const ic_compile_options *o,
                                 const int64_t *vals, const char *stage, FILE *f);

#ifdef __cplusplus
}
#endif
#endif
