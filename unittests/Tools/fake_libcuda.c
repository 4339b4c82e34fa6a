/* fake_libcuda.c - a stand-in for libcuda.so.1, built by test_cli_device.c at test time and
 * loaded by ic-run through IC_CUDA_DRIVER, so `ic-run --device cuda` can be tested end to end
 * on machines without a GPU. "Device memory" is host memory (calloc: zeros), copies are
 * memcpy, events read the host clock, and kernels do NOTHING: an output stays as allocated
 * (zeros), so only a graph whose outputs are zero matches the reference. Every kernel launch,
 * stream capture and graph launch is appended as one line to $IC_FAKE_CUDA_LOG when set, so a
 * test can see which path ran. Not part of the library; no CUDA header needed (the types are
 * ints and opaque pointers, as in lib/Runtime/cuda-impl.h). When the runtime starts to need
 * another entry point, ic-run says "no usable CUDA driver (... lacks cuX)": add cuX here.
 *
 * The linker (cuLink*) makes a "cubin" that is the text "FAKECUBIN <device>\n" + the PTX;
 * cuModuleLoadData takes only a cubin of its own device (else CUDA_ERROR_NO_BINARY_FOR_GPU).
 * Log lines: "module_load <bytes>" (PTX JIT-loaded), "link <bytes>" (PTX compiled by the
 * linker), "module_load_cubin <bytes>". Built with -DFAKE_NO_LINKER it has no linker entry
 * points (a driver the runtime must fall back on cuModuleLoadDataEx with). The device and
 * the driver version can be changed: IC_FAKE_CUDA_NAME, IC_FAKE_CUDA_DRIVER_VERSION. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

enum { OK = 0, ERR_INVALID_VALUE = 1, ERR_OOM = 2, ERR_NO_BINARY = 209, ERR_NOT_FOUND = 500 };

struct fake_module { char *ptx; struct fake_fn *fns; };
struct fake_fn { char name[256]; struct fake_fn *next; };
struct fake_event { double t; };

static int capturing, ctx_token, stream_token, graph_token, exec_token;

static void logf_(const char *fmt, ...)
{
    const char *path = getenv("IC_FAKE_CUDA_LOG");
    if (!path || !*path)
        return;
    FILE *f = fopen(path, "a");
    if (!f)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
    fclose(f);
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

CUresult cuInit(unsigned flags) { return OK; }
CUresult cuDriverGetVersion(int *v)
{
    const char *e = getenv("IC_FAKE_CUDA_DRIVER_VERSION");
    *v = e && *e ? atoi(e) : 13000;
    return OK;
}

static const char *device_name(void)
{
    const char *e = getenv("IC_FAKE_CUDA_NAME");
    return e && *e ? e : "ic fake device";
}
CUresult cuDeviceGetCount(int *n) { *n = 1; return OK; }
CUresult cuDeviceGet(int *d, int ordinal) { *d = ordinal; return ordinal == 0 ? OK : ERR_INVALID_VALUE; }

CUresult cuDeviceGetName(char *buf, int n, int dev)
{
    snprintf(buf, (size_t)n, "%s", device_name());
    return OK;
}

CUresult cuDeviceGetAttribute(int *v, int attr, int dev)
{
    switch (attr) {
    case 16: *v = 4; return OK;   /* multiprocessors */
    case 75: *v = 9; return OK;   /* compute capability major */
    case 76: *v = 0; return OK;   /* minor */
    case 38: *v = 1 << 20; return OK; /* L2 bytes: the autotuner's flush is 4x this */
    default: *v = 0; return OK;
    }
}

CUresult cuDevicePrimaryCtxRetain(void **ctx, int dev) { *ctx = &ctx_token; return OK; }
CUresult cuDevicePrimaryCtxRelease(int dev) { return OK; }
CUresult cuCtxSetCurrent(void *ctx) { return OK; }
CUresult cuCtxSynchronize(void) { return OK; }

CUresult cuModuleLoadDataEx(void **mod, const void *image, unsigned n, int *opts, void **vals)
{
    struct fake_module *m = calloc(1, sizeof *m);
    if (!m || !(m->ptx = strdup((const char *)image))) {
        free(m);
        return ERR_OOM;
    }
    logf_("module_load %zu", strlen(m->ptx));
    *mod = m;
    return OK;
}

#ifndef FAKE_NO_LINKER
struct fake_link { char *cubin; };

CUresult cuLinkCreate_v2(unsigned n, int *opts, void **vals, void **state)
{
    *state = calloc(1, sizeof(struct fake_link));
    return *state ? OK : ERR_OOM;
}

/* type 1: CU_JIT_INPUT_PTX; the PTX must hold an entry (our kernels always do) */
CUresult cuLinkAddData_v2(void *state, int type, void *data, size_t size, const char *name, unsigned n,
                          int *opts, void **vals)
{
    struct fake_link *l = state;
    const char *ptx = data;
    if (type != 1 || l->cubin || !strstr(ptx, ".entry "))
        return ERR_INVALID_VALUE;
    size_t len = strlen(ptx), head = strlen(device_name()) + 12;
    if (!(l->cubin = malloc(head + len + 1)))
        return ERR_OOM;
    snprintf(l->cubin, head + len + 1, "FAKECUBIN %s\n%s", device_name(), ptx);
    logf_("link %zu", len);
    return OK;
}

CUresult cuLinkComplete(void *state, void **cubin, size_t *size)
{
    struct fake_link *l = state;
    if (!l->cubin)
        return ERR_INVALID_VALUE;
    *cubin = l->cubin;
    *size = strlen(l->cubin) + 1;
    return OK;
}

CUresult cuLinkDestroy(void *state)
{
    struct fake_link *l = state;
    free(l->cubin);
    free(l);
    return OK;
}

CUresult cuModuleLoadData(void **mod, const void *image)
{
    char head[300];
    snprintf(head, sizeof head, "FAKECUBIN %s\n", device_name());
    if (strncmp(image, head, strlen(head)))
        return ERR_NO_BINARY;
    struct fake_module *m = calloc(1, sizeof *m);
    if (!m || !(m->ptx = strdup((const char *)image + strlen(head)))) {
        free(m);
        return ERR_OOM;
    }
    logf_("module_load_cubin %zu", strlen(m->ptx));
    *mod = m;
    return OK;
}
#endif

CUresult cuModuleUnload(void *mod)
{
    struct fake_module *m = mod;
    for (struct fake_fn *f = m->fns, *n; f; f = n) {
        n = f->next;
        free(f);
    }
    free(m->ptx);
    free(m);
    return OK;
}

/* Found when the PTX has ".entry NAME(". */
CUresult cuModuleGetFunction(void **fn, void *mod, const char *name)
{
    struct fake_module *m = mod;
    char want[300];
    snprintf(want, sizeof want, ".entry %s(", name);
    if (!strstr(m->ptx, want))
        return ERR_NOT_FOUND;
    struct fake_fn *f = calloc(1, sizeof *f);
    if (!f)
        return ERR_OOM;
    snprintf(f->name, sizeof f->name, "%s", name);
    f->next = m->fns;
    m->fns = f;
    *fn = f;
    return OK;
}

CUresult cuLaunchKernel(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned smem, void *stream, void **params, void **extra)
{
    struct fake_fn *f = fn;
    logf_("%s %s %u %u", capturing ? "capture_launch" : "launch", f->name, gx, bx);
    return OK;
}

CUresult cuFuncSetAttribute(void *fn, int attr, int value) { return OK; }

CUresult cuMemAlloc(CUdeviceptr *p, size_t bytes)
{
    void *m = calloc(1, bytes ? bytes : 1);
    if (!m)
        return ERR_OOM;
    *p = (CUdeviceptr)(size_t)m;
    return OK;
}

CUresult cuMemFree(CUdeviceptr p) { free((void *)(size_t)p); return OK; }

CUresult cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t n, void *s)
{
    memcpy((void *)(size_t)dst, src, n);
    return OK;
}

CUresult cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t n, void *s)
{
    memcpy(dst, (const void *)(size_t)src, n);
    return OK;
}

CUresult cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, void *s)
{
    memmove((void *)(size_t)dst, (const void *)(size_t)src, n);
    return OK;
}

CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, void *s)
{
    memset((void *)(size_t)dst, v, n);
    return OK;
}

CUresult cuStreamCreate(void **s, unsigned flags) { *s = &stream_token; return OK; }
CUresult cuStreamDestroy(void *s) { return OK; }
CUresult cuStreamSynchronize(void *s) { return OK; }

CUresult cuEventCreate(void **e, unsigned flags)
{
    struct fake_event *ev = calloc(1, sizeof *ev);
    if (!ev)
        return ERR_OOM;
    *e = ev;
    return OK;
}

CUresult cuEventRecord(void *e, void *s) { ((struct fake_event *)e)->t = now_ms(); return OK; }
CUresult cuEventSynchronize(void *e) { return OK; }

CUresult cuEventElapsedTime(float *ms, void *a, void *b)
{
    *ms = (float)(((struct fake_event *)b)->t - ((struct fake_event *)a)->t);
    return OK;
}

CUresult cuEventDestroy(void *e) { free(e); return OK; }

CUresult cuStreamBeginCapture(void *s, int mode)
{
    capturing = 1;
    logf_("begin_capture");
    return OK;
}

CUresult cuStreamEndCapture(void *s, void **graph)
{
    capturing = 0;
    *graph = &graph_token;
    logf_("end_capture");
    return OK;
}

CUresult cuGraphInstantiateWithFlags(void **exec, void *graph, unsigned long long flags)
{
    *exec = &exec_token;
    return OK;
}

CUresult cuGraphLaunch(void *exec, void *s) { logf_("graph_launch"); return OK; }
CUresult cuGraphExecDestroy(void *exec) { return OK; }
CUresult cuGraphDestroy(void *graph) { return OK; }

CUresult cuGetErrorName(CUresult r, const char **s)
{
    *s = r == ERR_NOT_FOUND ? "CUDA_ERROR_NOT_FOUND" : r == ERR_OOM ? "CUDA_ERROR_OUT_OF_MEMORY"
       : r == ERR_NO_BINARY ? "CUDA_ERROR_NO_BINARY_FOR_GPU" : "CUDA_ERROR_INVALID_VALUE";
    return OK;
}

CUresult cuGetErrorString(CUresult r, const char **s)
{
    *s = "fake driver error";
    return OK;
}
