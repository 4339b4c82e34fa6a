/* cpu-impl.h - the CPU backend's compiled variants (backend_cpu.c) and how ic_run uses them:
 * run slots and staging (slots.c), IC_PROFILE (profile.c), the public API (compile.c). */
#ifndef IC_CPU_IMPL_H
#define IC_CPU_IMPL_H

#include "pipeline-impl.h"

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

/* A kernel that runs the code of another (the same code on other buffers): the table it is
 * called with has pairs[2i] (a buffer the code reads) point at pairs[2i + 1] (its own). */
typedef struct { int n; int *pairs; } ic__remap;

typedef struct ic__variant {
    ic__vbase b;           /* graph, loop IR, LRU state */
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
    /* from codegen on, for ic_compiled_save: */
    ic_codegen_params *params; /* [nkernels] */
    char *target_text;     /* the target the code was made for (the keys' target part) */
    ic__build *build;      /* keys and packed objects of the distinct kernels */
    /* between codegen and load only: */
    ic_codegen_target *target;
    char stats[256];       /* codegen times, for the log */
} ic__variant;

typedef struct ic__artifact ic__artifact;

struct ic_compiled {
    ic_ctx *c;
    const ic_graph *g;
    ic_compile_options o;
    char *mode;
    pthread_mutex_t lock;  /* variants, slot pools, bound */
    int nsyms;
    int64_t *bound;        /* ic_compiled_bind values, -1 = unbound */
    ic__vcache vc;         /* ic__variant's */
    bool profile;          /* IC_PROFILE: time every kernel of every run (summary at destroy) */
    ic_autotune_stats tune; /* the autotuner's and the cache's work, all variants (cc->lock) */
    ic__artifact *art;     /* ic_compiled_load: the file's mapping, graph and saved code (owned) */
};

/* compile.c: cc for g under o, with no variant compiled yet (ic_compile compiles one for a
 * graph without symbols; ic_compiled_load those of its file). */
IC_HIDDEN ic_status ic__compiled_create(ic_ctx *c, const ic_graph *g, const ic_compile_options *o,
                                        ic_compiled **out);

/* artifact.c: frees what ic_compiled_load made (after cc's variants, which use it). */
IC_HIDDEN void ic__artifact_free(ic__artifact *A);

/* slots.c */
IC_HIDDEN ic__slot *ic__slot_acquire(ic_compiled *cc, ic__variant *v); /* cc->lock held */
IC_HIDDEN void ic__slot_release(ic_compiled *cc, ic__variant *v, ic__slot *s);
IC_HIDDEN void ic__slots_free(ic_ctx *c, ic__variant *v);
IC_HIDDEN ic_status ic__check_outputs(ic_compiled *cc, const ic__variant *v, int nargs,
                                      const ic_tensor *args, int nouts, const ic_tensor *outs);
IC_HIDDEN ic_status ic__bind_buffers(ic_compiled *cc, const ic__variant *v, ic__slot *s,
                                     const ic_tensor *args, const ic_tensor *outs);
IC_HIDDEN void *const *ic__kernel_table(const ic__variant *v, ic__slot *slot, int k);
IC_HIDDEN bool ic__same_sig(const ic_tensor *want, const ic_tensor *got);

/* profile.c */
IC_HIDDEN void ic__run_profiled(const ic__variant *v, ic__slot *slot);
IC_HIDDEN void ic__profile_print(const ic_compiled *cc, const ic__variant *v);

#endif
