/* ptx.h - the GPU backend: loop IR (lower.h) -> NVPTX LLVM IR -> PTX text, and the CUDA
 * runtime that loads the PTX through the driver API and runs compiled graphs on a GPU.
 *
 * Code generation (lib/PTX) needs no GPU and no CUDA: it runs LLVM's NVPTX target. Each loop-IR
 * kernel becomes one PTX entry named like the kernel with "gpu_" for "cpu_", taking one pointer
 * per program buffer, in buffer order. How a kernel is mapped onto threads (pointwise, row or
 * column reduction) and its launch geometry come from ic_ptx_params, which an autotuner may
 * search; zeros pick a heuristic from the kernel's shape and index expressions.
 *
 *     ic_ptx_options o = { .sm = 90 };
 *     ic_ptx_module *m;
 *     if (ic_ptx_emit(c, program, &o, NULL, &m)) ...;   // NULL: heuristic params per kernel
 *     fputs(ic_ptx_module_text(m), stdout);             // ic-dump --stage ptx (all kernels)
 *     const ic_ptx_kernel *k = ic_ptx_module_kernel(m, 0); // name, grid, block
 *     ic_ptx_module_destroy(m);
 *
 * The runtime part (lib/Runtime/cuda*.c) loads libcuda.so.1 at run time with dlopen, so the
 * library builds and runs without CUDA; ic_cuda_open then fails with IC_ECUDA and the message
 * "no CUDA driver found (libcuda.so.1: <reason>)".
 *
 *     ic_cuda *d; ic_cuda_compiled *cc;
 *     if (ic_cuda_open(c, 0, &d)) { puts(ic_last_error(c)); return; }
 *     ic_cuda_compile(d, graph, NULL, &cc);              // lower, fuse, PTX, cuModuleLoadDataEx
 *     ic_cuda_run(cc, nargs, args, nouts, outs);         // host tensors in and out
 *     ic_cuda_compiled_destroy(cc); ic_cuda_close(d);
 */
#ifndef IC_PTX_H
#define IC_PTX_H

#include "ic/lower.h"
#include "ic/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How a kernel's iteration space maps onto GPU threads. */
typedef enum {
    IC_PTX_AUTO = 0,    /* chosen from the kernel (params only) */
    IC_PTX_POINTWISE,   /* no reduction: the outer space flattened, `vec` elements a thread */
    IC_PTX_ROW,         /* threads_per_row threads share each outer point, splitting the inner
                         * (reduced) dims, combined with warp shuffles and shared memory */
    IC_PTX_COLUMN,      /* a thread owns `vec` adjacent outer points (the contiguous dim) and
                         * threads_per_row threads split the inner dims, combined in shared memory */
    IC_PTX_GEMM,        /* a contraction (REDUCE-sum over one inner dim of load(A) * load(B),
                         * offsets affine in (m, k) and (k, n), any batch dims) as a tiled
                         * shared-memory GEMM: f16/bf16 on tensor cores (on sm_90
                         * warpgroup MMAs, wgmma.mma_async; elsewhere mma.sync m16n8k16,
                         * ldmatrix, cp.async stages), f32 on FFMA (on tensor cores in TF32,
                         * m16n8k8, with ic_ptx_options.allow_tf32); the kernel's later BODY
                         * stages (bias, activation, residual, casts) run on the accumulators
                         * before the store (the epilogue) */
    IC_PTX_ATTENTION,   /* an attention kernel (ic_kernel.attn), flash-attention style: a block
                         * of 4 warps takes 64 query rows of one batch index, loops over tiles
                         * of 64 keys (causal: only those at or left of its diagonal; the next
                         * tile copied by cp.async meanwhile), S = Q K^T
                         * and O += P V on tensor cores (mma.sync m16n8k16, f32 accumulation),
                         * online softmax in f32; f16/bf16 operands, head dim E a multiple of
                         * 16 up to 128. Only this mode takes such kernels */
} ic_ptx_mode;

/* Launch geometry of one kernel: the knobs an autotuner searches. 0 means "heuristic". */
typedef struct ic_ptx_params {
    ic_ptx_mode mode;       /* force a mapping (ROW and COLUMN need inner dims) */
    int block;              /* threads per block: a multiple of 32, at most 1024 */
    int vec;                /* elements per thread access: 1, 2, 4 or 8 (16-byte accesses of
                             * the narrowest dtype when the index expressions allow it) */
    int ept;                /* pointwise: vector groups per thread */
    int threads_per_row;    /* ROW/COLUMN: threads sharing one outer point (a power of two) */
    int regs_elems;         /* ROW/COLUMN: keep a thread's share of the row in registers across
                             * stages when it holds at most this many elements (0 = 128 bytes
                             * of the narrowest dtype: 32 f32, 64 bf16; -1 = never: every stage
                             * re-reads memory) */
    int blocks_per_row;     /* ROW/COLUMN: blocks sharing each row (COLUMN: each block's tile of
                             * columns) along the reduced dims (a power of two). Above 1, each
                             * block reduces a slice, writes its partials to a workspace of the
                             * module, and the last block of the row or tile (an atomic counter)
                             * combines the partials in a fixed order and runs the later BODY
                             * stages: long rows, full reductions and column reductions with few
                             * columns use the whole GPU. Needs one REDUCE stage followed by
                             * BODY stages only. 0 = heuristic, 1 = off */
    /* GEMM: the block tile (tile_m x tile_n outputs, tile_k deep), warps_m x warps_n warps,
     * `stages` shared-memory buffers in flight (cp.async), and split_k blocks along K whose
     * partial tiles the last one sums in a fixed order (skinny shapes). 0 = heuristic. */
    int tile_m, tile_n, tile_k;
    int warps_m, warps_n;
    int stages;
    int split_k;
    /* GEMM, f16/bf16: Hopper warpgroup MMAs (wgmma.mma_async from 128B-swizzled shared stages,
     * a producer warpgroup and 1-2 consumer warpgroups synchronised by mbarriers; tile_m 64 or
     * 128, tile_n 64, 128, 192 or 256, tile_k 64). 0 = heuristic (on sm_90 targets unless
     * ic_ptx_options.wgmma is -1, for shapes that fill the GPU), 1 = whenever the operands allow
     * (16-byte aligned rows; also in the emulator; the PTX targets sm_90a), -1 = never */
    int wgmma;
} ic_ptx_params;

typedef struct ic_ptx_options {
    int sm;                 /* compute capability x 10 (90 = H100); 0 = 90. LLVM 19 knows up to
                             * sm_90: newer devices get sm_90 PTX, which their driver JITs */
    int ptx_version;        /* PTX ISA x 10; 0 = what LLVM 19 needs for sm (8.0 for sm_90) */
    int opt_level;          /* 0..3 (LLVM pipeline); 0 = 3. Use -1 for no optimisation */
    int num_sms;            /* multiprocessors, for the geometry heuristics (0 = 132) */
    bool keep_ir;           /* keep the optimised LLVM IR text (ic_ptx_module_llvm_ir) */
    bool allow_tf32;        /* f32 contractions on tensor cores in TF32 (mma.sync m16n8k8:
                             * operands rounded to 10-bit mantissas, f32 accumulation), like
                             * torch.backends.cuda.matmul.allow_tf32; false (default): FFMA,
                             * exact f32 products */
    int wgmma;              /* Hopper warpgroup GEMMs (wgmma.mma_async, mbarrier pipelines) for
                             * f16/bf16 contractions: 0 = when sm is 90 (the module's PTX
                             * target becomes sm_90a, which only sm_90 devices run), -1 = never
                             * (mma.sync, as on other devices) */
} ic_ptx_options;

/* All zero: sm_90, the PTX version it needs, O3, 132 SMs, no TF32, wgmma when sm is 90. */
IC_API void ic_ptx_options_init(ic_ptx_options *o);

/* One generated kernel and how to launch it: grid x block threads, 1-D. */
typedef struct ic_ptx_kernel {
    const char *name;       /* the kernel's name, unique in the module, e.g. "gpu_fused_add_mul_3" */
    const char *entry;      /* the PTX entry symbol to launch: name, or the name of kernel
                             * `code` (borrowed) */
    int code;               /* the kernel whose PTX module holds this one's code: itself, or an
                             * earlier kernel whose IR was the same but for the name (the Q, K
                             * and V projections, repeated layers); such kernels are optimised,
                             * printed and JIT-compiled once, each launched on its own args */
    ic_ptx_mode mode;
    ic_ptx_params params;   /* resolved: every field set */
    int64_t grid;           /* blocks; 0 when the kernel has no work (skip the launch) */
    int block;
    int smem_bytes;         /* static shared memory */
    int rows_per_block;     /* ROW/COLUMN: outer points (groups of vec) per block */
    bool in_registers;      /* ROW/COLUMN: stages reuse registers instead of re-reading */
    int dyn_smem_bytes;     /* dynamic shared memory the launch must give (GEMM), 0: none */
    int nargs;              /* its parameters: the buffers it loads or stores, by index */
    const int *args;        /* [nargs] buffer indices in parameter order (ascending); a kernel
                             * takes only these, so that large programs stay within PTX's
                             * 4 KiB of kernel parameters */
} ic_ptx_kernel;

typedef struct ic_ptx_module ic_ptx_module;

/* Emits every kernel of p as PTX for options o (NULL = defaults). params: one per kernel
 * (fields 0 = heuristic) or NULL. The caller owns *out. Errors name the kernel: IC_EINVAL for
 * malformed loop IR or bad params, IC_ELLVM when LLVM fails. */
IC_API ic_status ic_ptx_emit(ic_ctx *c, const ic_program *p, const ic_ptx_options *o,
                             const ic_ptx_params *params, ic_ptx_module **out);
/* The same over explicit kernels and buffers (tests and tools that build loop IR by hand). */
IC_API ic_status ic_ptx_emit_kernels(ic_ctx *c, int nkernels, const ic_kernel *kernels,
                                     int nbufs, const ic_buffer *bufs, const ic_ptx_options *o,
                                     const ic_ptx_params *params, ic_ptx_module **out);
IC_API void ic_ptx_module_destroy(ic_ptx_module *m);

/* Each kernel is a PTX module of its own (made on IC_COMPILE_THREADS threads, loaded by the
 * driver in parallel), but a kernel of the same code as an earlier one has none (its `code`).
 * The text of them all (NUL-terminated, borrowed from m): each kernel's module in kernel
 * order after a line "// ---- kernel <i> '<name>' ----" (for a kernel of another's code only
 * "// ---- kernel <i> '<name>': the code of kernel <j> '<name j>' ----"), whatever the number
 * of threads. It is not one PTX module: ptxas takes each kernel's text alone. */
IC_API const char *ic_ptx_module_text(const ic_ptx_module *m);
/* The PTX module (header and one entry) holding kernel i's code: its own, or that of kernel
 * ic_ptx_module_kernel(m, i)->code; borrowed; NULL when i is out of range. */
IC_API const char *ic_ptx_module_kernel_text(const ic_ptx_module *m, int i);
/* The optimised NVPTX LLVM IR when o->keep_ir was set, else NULL: each kernel's module after
 * a line "; ---- kernel <i> '<name>' ----" (as the PTX text). */
IC_API const char *ic_ptx_module_llvm_ir(const ic_ptx_module *m);
IC_API int ic_ptx_module_num_kernels(const ic_ptx_module *m);
IC_API const ic_ptx_kernel *ic_ptx_module_kernel(const ic_ptx_module *m, int i);
/* Milliseconds spent building IR, optimising, and emitting PTX. */
IC_API double ic_ptx_module_emit_ms(const ic_ptx_module *m);

/* A module made again from what an earlier ic_ptx_emit produced (a persistent cache's entries,
 * a saved artifact): the kernels' launch data as ic_ptx_module_kernel gave it (copied; entry
 * must be the name of kernel `code`, which must be a kernel at or before it whose code is its
 * own) and, for each kernel whose code is its own, ptx[i], its PTX module (copied; ptx[i] is
 * ignored for the others). The texts (ic_ptx_module_text) read as the emission's did; there is
 * no LLVM IR. IC_EINVAL naming the kernel when the parts do not fit together. */
IC_API ic_status ic_ptx_module_from_parts(ic_ctx *c, int nkernels, const ic_ptx_kernel *kernels,
                                          const char *const *ptx, ic_ptx_module **out);

/* The geometry ic_ptx_emit would use for kernel k when given *in (NULL = all heuristic):
 * mode, block, vec, threads per row. IC_EINVAL naming the kernel when *in is not valid. */
IC_API ic_status ic_ptx_params_resolve(ic_ctx *c, const ic_kernel *k, int nbufs,
                                       const ic_buffer *bufs, const ic_ptx_options *o,
                                       const ic_ptx_params *in, ic_ptx_params *out);

/* "gpu_<rest>" for a loop-IR kernel name "cpu_<rest>" (other names get "gpu_" prepended),
 * made a valid PTX identifier. Writes at most n bytes into buf (NUL-terminated). */
IC_API void ic_ptx_kernel_name(const char *loop_name, char *buf, size_t n);

/* Runs kernels exactly as generated for the GPU (same mapping, lanes, vector accesses, shared
 * memory, shuffles and barriers) on the CPU, each block's threads as host threads: a check of
 * the generated code on machines without a GPU. mem[i] is the host memory of buffer i. Slow
 * (one host thread per GPU thread of a block): for tests and debugging. */
IC_API ic_status ic_ptx_emulate_kernels(ic_ctx *c, int nkernels, const ic_kernel *kernels,
                                        int nbufs, const ic_buffer *bufs,
                                        const ic_ptx_params *params, void *const *mem);
/* Runs program p that way. args follow ic_graph_arg order (any strides); outs[i] must be
 * allocated by the caller, contiguous, with output i's dtype and element count. */
IC_API ic_status ic_ptx_emulate(ic_ctx *c, const ic_program *p, const ic_ptx_params *params,
                                const ic_tensor *args, int nargs, ic_tensor *outs, int nouts);
/* The same two under options o (NULL = defaults): of them the emulator uses allow_tf32 and
 * num_sms (the code is generated for its portable target, whatever o->sm says). */
IC_API ic_status ic_ptx_emulate_kernels_opts(ic_ctx *c, int nkernels, const ic_kernel *kernels,
                                             int nbufs, const ic_buffer *bufs,
                                             const ic_ptx_options *o, const ic_ptx_params *params,
                                             void *const *mem);
IC_API ic_status ic_ptx_emulate_opts(ic_ctx *c, const ic_program *p, const ic_ptx_options *o,
                                     const ic_ptx_params *params, const ic_tensor *args, int nargs,
                                     ic_tensor *outs, int nouts);

/* ------------------------------------------------------------------------------------------
 * CUDA runtime (lib/Runtime/cuda*.c): the driver API through dlopen("libcuda.so.1").
 * ------------------------------------------------------------------------------------------ */

/* An open device: driver, primary context, one stream, and a caching allocator. */
typedef struct ic_cuda ic_cuda;

/* Loads the driver and opens device `ordinal`. IC_ECUDA with "no CUDA driver found
 * (libcuda.so.1: ...)" when there is none, or with the driver's error name and string. The
 * caller owns *out (ic_cuda_close), and uses it from one thread at a time. */
IC_API ic_status ic_cuda_open(ic_ctx *c, int ordinal, ic_cuda **out);
IC_API void ic_cuda_close(ic_cuda *d);
IC_API int ic_cuda_sm(const ic_cuda *d);              /* compute capability x 10: 90 */
IC_API int ic_cuda_num_sms(const ic_cuda *d);
IC_API const char *ic_cuda_device_name(const ic_cuda *d);

/* Device memory from the caching allocator (size-bucketed free lists; freed blocks are kept
 * for reuse until ic_cuda_close or ic_cuda_trim). *ptr is a CUdeviceptr. */
IC_API ic_status ic_cuda_alloc(ic_cuda *d, size_t bytes, uint64_t *ptr);
IC_API void ic_cuda_free(ic_cuda *d, uint64_t ptr);
IC_API void ic_cuda_trim(ic_cuda *d);                 /* returns cached blocks to the driver */
/* Bytes currently cached (free, not returned to the driver) and handed out. */
IC_API void ic_cuda_alloc_stats(const ic_cuda *d, size_t *cached, size_t *in_use);

/* Loads PTX (cuModuleLoadDataEx, the JIT error log captured into the message). */
typedef struct ic_cuda_module ic_cuda_module;
IC_API ic_status ic_cuda_module_load(ic_cuda *d, const char *ptx, ic_cuda_module **out);
/* Loads n PTX modules as one ic_cuda_module whose functions are looked up in all of them
 * (entry names must differ across them): the driver JITs them in parallel, one module at a
 * time per thread of IC_COMPILE_THREADS (each makes d's context current). Errors name the
 * module (0-based) and carry the JIT's log; all or nothing. */
IC_API ic_status ic_cuda_module_load_many(ic_cuda *d, int n, const char *const *ptx,
                                          ic_cuda_module **out);
IC_API void ic_cuda_module_unload(ic_cuda_module *m);
/* Launches entry `name` with grid x block threads; args[i] points at the i-th parameter
 * value (for our kernels: a uint64_t device pointer per buffer). Asynchronous. */
IC_API ic_status ic_cuda_module_launch(ic_cuda_module *m, const char *name, int64_t grid,
                                       int block, void **args);
/* The same with dyn_smem bytes of dynamic shared memory (past 48 KB the function's limit is
 * raised first, once). */
IC_API ic_status ic_cuda_module_launch_smem(ic_cuda_module *m, const char *name, int64_t grid,
                                            int block, int dyn_smem, void **args);
IC_API ic_status ic_cuda_synchronize(ic_cuda *d);
/* Device-to-device copy bandwidth in GB/s (read + write bytes / time), `iters` copies of
 * `bytes` timed with events: the yardstick the benchmarks compare against. */
IC_API ic_status ic_cuda_copy_bandwidth(ic_cuda *d, size_t bytes, int iters, double *gbps);

typedef enum {
    IC_CUDA_DEFAULT = 0,          /* kernels launched one by one on each run */
    IC_CUDA_REDUCE_OVERHEAD = 1,  /* the launches captured once per bound shape as a CUDA graph
                                   * (stream capture) and replayed with one cuGraphLaunch */
    IC_CUDA_MAX_AUTOTUNE = 2,     /* CUDA graphs, and autotune = IC_TUNE_MAX when it is 0 */
    IC_CUDA_MAX_AUTOTUNE_NO_CUDAGRAPHS = 3, /* autotune = IC_TUNE_MAX when it is 0 */
} ic_cuda_mode;                   /* in the order of ic_mode_get (options.h) */

typedef struct ic_cuda_options {
    ic_cuda_mode mode;
    bool no_fusion;               /* one kernel per op (the analog of eager mode) */
    const ic_ptx_params *params;  /* one per kernel of the program, or NULL (heuristic) */
    int nparams;
    int ptx_opt_level;            /* ic_ptx_options.opt_level */
    bool allow_tf32;              /* ic_ptx_options.allow_tf32 (default false) */
    int wgmma;                    /* ic_ptx_options.wgmma: 0 = Hopper warpgroup GEMMs when the
                                   * device is sm_90, -1 = never (mma.sync) */
    int debug;                    /* 1: each compile writes a debug folder (graph, loop IR before
                                   * and after fusion, NVPTX IR, PTX), -1: none, 0: as the
                                   * context's IC_COMPILE_DEBUG says */
    const char *debug_dir;        /* parent of the debug folders; NULL = "./ic_debug" */
    bool freezing;                /* fold constant subgraphs of params into params */
    int max_variants;             /* symbolic graphs: variants kept (0 = 16, -1 = no limit),
                                   * least recently used dropped first */
    int autotune;                 /* IC_TUNE_* flags (runtime.h): kernels the autotuner
                                   * searches; 0 = none */
    double autotune_budget_s;     /* tuning time limit per graph, seconds (0 = 60) */
    int cache;                    /* persistent cache (tuning records, PTX, cubins): 0 = as the
                                   * context says, 1 = on, -1 = off */
} ic_cuda_options;

/* All zero: default mode, fusion, heuristic params, debug as the context says. */
IC_API void ic_cuda_options_init(ic_cuda_options *o);

/* A graph compiled for d. Symbolic dims are bound at each upload from the argument shapes;
 * each new binding compiles (and caches) its own variant. */
typedef struct ic_cuda_compiled ic_cuda_compiled;

/* Verifies g and, when g has no symbols, compiles it right away (lower, fuse, PTX, module
 * load, device buffers and params uploaded). o may be NULL. g must outlive *out. The caller
 * owns *out. */
IC_API ic_status ic_cuda_compile(ic_cuda *d, const ic_graph *g, const ic_cuda_options *o,
                                 ic_cuda_compiled **out);
IC_API void ic_cuda_compiled_destroy(ic_cuda_compiled *cc);

/* Prints one stage of compiling g for a GPU under o (NULL = defaults; vals binds symbols,
 * NULL when none) into f, made by ic_cuda_compile's own pipeline stopped after that stage, for
 * sm_90 without a GPU: "graph", "loops", "fused" (gpu_ kernels, as the GPU fuses), "llvm-opt"
 * (the NVPTX module after O3), "ptx", or an alias (ic_pipe_stage_find). IC_EINVAL for an
 * unknown stage or one only the CPU makes ("llvm", "asm"). */
IC_API ic_status ic_cuda_compile_dump(ic_ctx *c, const ic_graph *g, const ic_cuda_options *o,
                                      const int64_t *vals, const char *stage, FILE *f);

/* Copies args (ic_graph_arg order, host memory, any strides) to the device, binding the
 * symbols (compiling a variant for a new binding). */
IC_API ic_status ic_cuda_upload(ic_cuda_compiled *cc, int nargs, const ic_tensor *args);
/* Enqueues one execution over the uploaded arguments (kernels, or the CUDA graph in
 * reduce-overhead mode, captured on the first launch of a variant). Asynchronous: returns
 * once the work is queued. */
IC_API ic_status ic_cuda_launch(ic_cuda_compiled *cc);
/* Waits for the queued work, then copies the outputs to host tensors. An output whose data
 * is NULL is allocated (contiguous; free with ic_tensor_free); otherwise its dtype and shape
 * must match. */
IC_API ic_status ic_cuda_download(ic_cuda_compiled *cc, int nouts, ic_tensor *outs);
/* upload + launch + download. */
IC_API ic_status ic_cuda_run(ic_cuda_compiled *cc, int nargs, const ic_tensor *args, int nouts,
                             ic_tensor *outs);
/* Times `iters` back-to-back launches over the uploaded arguments with CUDA events (after
 * one warm-up): *ms = milliseconds per execution. */
IC_API ic_status ic_cuda_time(ic_cuda_compiled *cc, int iters, double *ms);

/* The variant of the last upload (or the only one): its kernels and compile times. */
IC_API int ic_cuda_compiled_num_kernels(const ic_cuda_compiled *cc);
IC_API const ic_ptx_kernel *ic_cuda_compiled_kernel(const ic_cuda_compiled *cc, int i);
/* Milliseconds from graph to loaded module: lower+fuse, PTX emission, cuModuleLoadDataEx. */
IC_API void ic_cuda_compiled_times(const ic_cuda_compiled *cc, double *lower_ms, double *ptx_ms,
                                   double *load_ms);
/* What the autotuner and the cache did, summed over every variant compiled so far. */
IC_API void ic_cuda_compiled_autotune_stats(const ic_cuda_compiled *cc, ic_autotune_stats *out);
/* The PTX text of that variant (borrowed). */
IC_API const char *ic_cuda_compiled_ptx(const ic_cuda_compiled *cc);

#ifdef __cplusplus
}
#endif
#endif
