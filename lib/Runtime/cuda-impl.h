/* cuda-impl.h - the CUDA driver API as the runtime sees it: types from the toolkit's cuda.h
 * when the build found one (IC_HAVE_CUDA_H), otherwise the few declarations we need
 * (ABI-identical); the entry points are always function pointers filled by dlsym from
 * libcuda.so.1 at run time, so nothing links against CUDA. */
#ifndef IC_CUDA_IMPL_H
#define IC_CUDA_IMPL_H

#include "graph-impl.h"
#include "ic/ptx.h"

#ifdef IC_HAVE_CUDA_H
#include <cuda.h>
#else
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;
typedef int CUdevice_attribute;
typedef int CUjit_option;
typedef int CUstreamCaptureMode;
typedef struct CUlinkState_st *CUlinkState;
typedef int CUjitInputType;
#define CUDA_SUCCESS 0
#define CUDA_ERROR_OUT_OF_MEMORY 2
#define CUDA_ERROR_NOT_FOUND 500
#define CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT 16
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76
#define CU_JIT_INFO_LOG_BUFFER 3
#define CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES 4
#define CU_JIT_ERROR_LOG_BUFFER 5
#define CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES 6
#define CU_JIT_INPUT_PTX 1
#define CU_STREAM_NON_BLOCKING 1
#define CU_EVENT_DEFAULT 0
#define CU_STREAM_CAPTURE_MODE_THREAD_LOCAL 1
#endif

/* Entry points, resolved with dlsym (the _v2 name first where the ABI has one). */
typedef struct ic__cu {
    void *lib;
    CUresult (*Init)(unsigned);
    CUresult (*DriverGetVersion)(int *);
    CUresult (*DeviceGetCount)(int *);
    CUresult (*DeviceGet)(CUdevice *, int);
    CUresult (*DeviceGetName)(char *, int, CUdevice);
    CUresult (*DeviceGetAttribute)(int *, CUdevice_attribute, CUdevice);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*DevicePrimaryCtxRelease)(CUdevice);
    CUresult (*CtxSetCurrent)(CUcontext);
    CUresult (*CtxSynchronize)(void);
    CUresult (*ModuleLoadDataEx)(CUmodule *, const void *, unsigned, CUjit_option *, void **);
    CUresult (*ModuleUnload)(CUmodule);
    CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
    CUresult (*FuncSetAttribute)(CUfunction, int, int);
    CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void **, void **);
    CUresult (*MemAlloc)(CUdeviceptr *, size_t);
    CUresult (*MemFree)(CUdeviceptr);
    CUresult (*MemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
    CUresult (*MemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
    CUresult (*MemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
    CUresult (*MemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
    CUresult (*StreamCreate)(CUstream *, unsigned);
    CUresult (*StreamDestroy)(CUstream);
    CUresult (*StreamSynchronize)(CUstream);
    CUresult (*EventCreate)(CUevent *, unsigned);
    CUresult (*EventRecord)(CUevent, CUstream);
    CUresult (*EventSynchronize)(CUevent);
    CUresult (*EventElapsedTime)(float *, CUevent, CUevent);
    CUresult (*EventDestroy)(CUevent);
    CUresult (*StreamBeginCapture)(CUstream, CUstreamCaptureMode);
    CUresult (*StreamEndCapture)(CUstream, CUgraph *);
    CUresult (*GraphInstantiate)(CUgraphExec *, CUgraph, unsigned long long);
    CUresult (*GraphLaunch)(CUgraphExec, CUstream);
    CUresult (*GraphExecDestroy)(CUgraphExec);
    CUresult (*GraphDestroy)(CUgraph);
    CUresult (*GetErrorName)(CUresult, const char **);
    CUresult (*GetErrorString)(CUresult, const char **);
    /* The linker (PTX -> cubin, the JIT work cuModuleLoadDataEx does, with the cubin kept for
     * the persistent cache) and the cubin loader: optional, all or none (NULL: PTX is loaded
     * with ModuleLoadDataEx as is). */
    CUresult (*LinkCreate)(unsigned, CUjit_option *, void **, CUlinkState *);
    CUresult (*LinkAddData)(CUlinkState, CUjitInputType, void *, size_t, const char *, unsigned,
                            CUjit_option *, void **);
    CUresult (*LinkComplete)(CUlinkState, void **, size_t *);
    CUresult (*LinkDestroy)(CUlinkState);
    CUresult (*ModuleLoadData)(CUmodule *, const void *);
} ic__cu;

typedef struct ic__cblock {
    CUdeviceptr ptr;
    size_t size;              /* rounded (the bucket) */
} ic__cblock;

struct ic_cuda {
    ic_ctx *c;
    ic__cu cu;
    CUdevice dev;
    CUcontext ctx;
    CUstream stream;
    int sm, nsms;
    int driver_version;       /* cuDriverGetVersion: 12040 = 12.4 (cubins are per driver) */
    char name[256];
    /* caching allocator: blocks handed out, and free blocks kept for reuse by size */
    ic__cblock *live, *cache;
    int nlive, caplive, ncache, capcache;
    size_t cached_bytes, live_bytes;
};

struct ic_cuda_module {
    ic_cuda *d;
    CUmodule *mods;           /* [nmods] the PTX modules loaded together; NULL: not loaded */
    int nmods;
    int nfn, capfn;
    char **names;
    CUfunction *fns;
    int *dyn_smem;            /* [nfn] dynamic shared memory limit set on each function */
};

/* One kernel module's machine code, for ic__cuda_load_code: data (size bytes, ic__malloc'd,
 * owned by the caller) is loaded when set; otherwise the PTX is compiled and, with the
 * driver's linker, the cubin made is left here (made = true) for the caller to keep. */
typedef struct ic__cubin {
    void *data;
    size_t size;
    bool made;
} ic__cubin;

/* Loads n kernel modules as one ic_cuda_module (ic_cuda_module_load_many), in parallel on
 * IC_COMPILE_THREADS threads: module i from cubins[i].data when set (a cubin the driver
 * refuses is dropped and made again from ptx[i]), else from ptx[i] through the linker (the
 * cubin kept in cubins[i]) or, without one, cuModuleLoadDataEx. cubins NULL: no cubins are
 * wanted, every module is JIT-loaded from its PTX (ic_cuda_module_load_many). */
IC_HIDDEN ic_status ic__cuda_load_code(ic_cuda *d, int n, const char *const *ptx, ic__cubin *cubins,
                                       ic_cuda_module **out);
/* Whether the driver has the linker entry points (cubins can be made and cached). */
IC_HIDDEN bool ic__cuda_has_linker(const ic_cuda *d);

/* Compiled GPU code in the persistent cache (gpu_cache.c): per kernel of a program, its key
 * and what its entry held. */
typedef struct ic__gcode {
    int nk;
    char **key;               /* [nk] malloc'd */
    ic_ptx_kernel *kern;      /* [nk] stored launch data (name, entry, args owned) where hit */
    char **ptx;               /* [nk] stored PTX of the kernel's code module where hit */
    ic__cubin *cubin;         /* [nk] that module's cubin (used where code == i); after the load
                               * every code module's, made = true where made anew */
    bool *hit;                /* [nk] an entry was found, parsed and fits */
} ic__gcode;

/* Looks every kernel of p up (PTX options po and requested params as ic_ptx_emit will get
 * them); *out owned by the caller (ic__gcode_free). Errors: out of memory only. */
IC_HIDDEN ic_status ic__gcode_lookup(ic_ctx *c, const ic_program *p, bool freezing, const ic_cuda *d,
                                     const ic_ptx_options *po, const ic_ptx_params *params, ic__gcode **out);
IC_HIDDEN int ic__gcode_hits(const ic__gcode *g);
/* When every kernel hit: *pm made from the entries (no emission needed); else *pm = NULL. */
IC_HIDDEN ic_status ic__gcode_module(ic_ctx *c, ic__gcode *g, ic_ptx_module **pm);
/* After an emission: hits whose launch data or PTX differ from pm's are dropped. */
IC_HIDDEN void ic__gcode_match(ic_ctx *c, ic__gcode *g, const ic_ptx_module *pm);
/* After the load: writes the entries of kernels that missed or whose code's cubin was made. */
IC_HIDDEN void ic__gcode_store(ic_ctx *c, const ic__gcode *g, const ic_ptx_module *pm);
IC_HIDDEN void ic__gcode_free(ic_ctx *c, ic__gcode *g);

/* "cuda: <what>: CUDA_ERROR_X (text)" as the context's error; returns IC_ECUDA. */
IC_HIDDEN ic_status ic__cuda_error(ic_cuda *d, CUresult r, const char *what);
/* The function of entry `name` in any of m's modules (looked up once, then cached). */
IC_HIDDEN ic_status ic__cuda_function(ic_cuda_module *m, const char *name, CUfunction *out);
/* The same, looking in module `hint` first (a kernel's own module: no search). */
IC_HIDDEN ic_status ic__cuda_function_in(ic_cuda_module *m, int hint, const char *name, CUfunction *out);

/* IC_PROFILE on the GPU (cuda_profile.c): an event before the first kernel of a run and after
 * each kernel; at the end of the run the gaps are added to the kernels' totals. */
typedef struct ic__cprof {
    int n;                    /* kernels */
    CUevent *ev;              /* [n + 1] */
    double *ms;               /* [n] total ms of each kernel over the profiled runs */
    int64_t runs;
} ic__cprof;

IC_HIDDEN ic_status ic__cprof_begin(ic_cuda *d, ic__cprof *p, int nkernels);
IC_HIDDEN ic_status ic__cprof_mark(ic_cuda *d, ic__cprof *p, int after_kernel);
IC_HIDDEN ic_status ic__cprof_end(ic_cuda *d, ic__cprof *p);
IC_HIDDEN void ic__cprof_print(const ic__cprof *p, const char *graph, const ic_ptx_module *pm);
IC_HIDDEN void ic__cprof_free(ic_cuda *d, ic__cprof *p);

#endif
