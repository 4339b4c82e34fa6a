/* cuda.c - the CUDA driver loaded at run time (dlopen "libcuda.so.1", or IC_CUDA_DRIVER
 * as the context read it):
 * device and primary context, one non-blocking stream, a caching device allocator
 * (size-bucketed free lists), kernel modules made from PTX by the driver's linker (a cubin
 * the persistent cache keeps) and loaded with cuModuleLoadData, or, from a driver without
 * the linker, loaded with cuModuleLoadDataEx (the JIT's error log goes into the message);
 * kernel launches, and the device-to-device copy yardstick. */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include "cuda-impl.h"

#define LOG_BYTES 16384

ic_status ic__cuda_error(ic_cuda *d, CUresult r, const char *what)
{
    const char *name = NULL, *text = NULL;
    if (d->cu.GetErrorName)
        d->cu.GetErrorName(r, &name);
    if (d->cu.GetErrorString)
        d->cu.GetErrorString(r, &text);
    return ic__error(d->c, IC_ECUDA, "cuda: %s: %s (%s)", what, name ? name : "CUDA error",
                     text ? text : "?");
}

/* dlsym of name##_v2, then name. */
static void *sym(void *lib, const char *name, bool v2)
{
    void *p = NULL;
    if (v2) {
        char buf[128];
        snprintf(buf, sizeof buf, "%s_v2", name);
        p = dlsym(lib, buf);
    }
    return p ? p : dlsym(lib, name);
}

/* The optional linker entry points: all of them, or none (then PTX is loaded as it is). */
static void load_linker(ic__cu *cu)
{
    cu->LinkCreate = sym(cu->lib, "cuLinkCreate", true);
    cu->LinkAddData = sym(cu->lib, "cuLinkAddData", true);
    cu->LinkComplete = sym(cu->lib, "cuLinkComplete", false);
    cu->LinkDestroy = sym(cu->lib, "cuLinkDestroy", false);
    cu->ModuleLoadData = sym(cu->lib, "cuModuleLoadData", false);
    if (!cu->LinkCreate || !cu->LinkAddData || !cu->LinkComplete || !cu->LinkDestroy || !cu->ModuleLoadData)
        cu->LinkCreate = NULL, cu->LinkAddData = NULL, cu->LinkComplete = NULL, cu->LinkDestroy = NULL,
        cu->ModuleLoadData = NULL;
}

bool ic__cuda_has_linker(const ic_cuda *d)
{
    return d && d->cu.LinkCreate;
}

static ic_status load_driver(ic_ctx *c, ic__cu *cu)
{
    const char *path = c->sw.cuda_driver ? c->sw.cuda_driver : "libcuda.so.1";
    memset(cu, 0, sizeof *cu);
    cu->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!cu->lib) {
        const char *e = dlerror();
        return ic__error(c, IC_ECUDA, "no CUDA driver found (%s: %s)", path, e ? e : "cannot load");
    }
    struct { void **slot; const char *name; bool v2; } t[] = {
#define S(f, v2) { (void **)&cu->f, "cu" #f, v2 }
        S(Init, false), S(DriverGetVersion, false), S(DeviceGetCount, false), S(DeviceGet, false),
        S(DeviceGetName, false), S(DeviceGetAttribute, false), S(DevicePrimaryCtxRetain, false),
        S(DevicePrimaryCtxRelease, true), S(CtxSetCurrent, false), S(CtxSynchronize, false),
        S(ModuleLoadDataEx, false), S(ModuleUnload, false), S(ModuleGetFunction, false),
        S(LaunchKernel, false), S(FuncSetAttribute, false), S(MemAlloc, true), S(MemFree, true), S(MemcpyHtoDAsync, true),
        S(MemcpyDtoHAsync, true), S(MemcpyDtoDAsync, true), S(MemsetD8Async, false),
        S(StreamCreate, false), S(StreamDestroy, true), S(StreamSynchronize, false),
        S(EventCreate, false), S(EventRecord, false), S(EventSynchronize, false),
        S(EventElapsedTime, true), S(EventDestroy, true), S(StreamBeginCapture, true),
        S(StreamEndCapture, false), S(GraphLaunch, false), S(GraphExecDestroy, false),
        S(GraphDestroy, false), S(GetErrorName, false), S(GetErrorString, false),
#undef S
        { (void **)&cu->GraphInstantiate, "cuGraphInstantiateWithFlags", false },
    };
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
        *t[i].slot = sym(cu->lib, t[i].name, t[i].v2);
        if (!*t[i].slot) {
            dlclose(cu->lib);
            cu->lib = NULL;
            return ic__error(c, IC_ECUDA, "no usable CUDA driver (%s lacks %s)", path, t[i].name);
        }
    }
    load_linker(cu);
    return IC_OK;
}

#define CU(d, call, what)                                                                  \
    do {                                                                                   \
        CUresult r_ = (call);                                                              \
        if (r_ != CUDA_SUCCESS)                                                            \
            return ic__cuda_error((d), r_, (what));                                        \
    } while (0)

static ic_status open_device(ic_cuda *d, int ordinal)
{
    ic__cu *cu = &d->cu;
    CU(d, cu->Init(0), "cuInit");
    int n = 0;
    CU(d, cu->DeviceGetCount(&n), "cuDeviceGetCount");
    if (ordinal < 0 || ordinal >= n)
        return ic__error(d->c, IC_ECUDA, "cuda: no device %d (the driver sees %d)", ordinal, n);
    CU(d, cu->DeviceGet(&d->dev, ordinal), "cuDeviceGet");
    int major = 0, minor = 0;
    CU(d, cu->DeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d->dev),
       "cuDeviceGetAttribute");
    CU(d, cu->DeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d->dev),
       "cuDeviceGetAttribute");
    CU(d, cu->DeviceGetAttribute(&d->nsms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d->dev),
       "cuDeviceGetAttribute");
    d->sm = major * 10 + minor;
    CU(d, cu->DriverGetVersion(&d->driver_version), "cuDriverGetVersion");
    if (cu->DeviceGetName(d->name, (int)sizeof d->name - 1, d->dev) != CUDA_SUCCESS)
        snprintf(d->name, sizeof d->name, "device %d", ordinal);
    CU(d, cu->DevicePrimaryCtxRetain(&d->ctx, d->dev), "cuDevicePrimaryCtxRetain");
    CU(d, cu->CtxSetCurrent(d->ctx), "cuCtxSetCurrent");
    CU(d, cu->StreamCreate(&d->stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    return IC_OK;
}

ic_status ic_cuda_open(ic_ctx *c, int ordinal, ic_cuda **out)
{
    *out = NULL;
    ic_cuda *d = ic__calloc(c, 1, sizeof *d);
    if (!d)
        return ic__error(c, IC_ENOMEM, "cuda: out of memory");
    d->c = c;
    ic_status s = load_driver(c, &d->cu);
    if (!s)
        s = open_device(d, ordinal);
    if (s) {
        ic_cuda_close(d);
        return s;
    }
    *out = d;
    return IC_OK;
}

void ic_cuda_close(ic_cuda *d)
{
    if (!d)
        return;
    ic__cu *cu = &d->cu;
    if (cu->lib) {
        if (d->ctx) {
            cu->CtxSetCurrent(d->ctx);
            cu->CtxSynchronize();
        }
        ic_cuda_trim(d);
        for (int i = 0; i < d->nlive; i++) /* blocks never given back: free them now */
            cu->MemFree(d->live[i].ptr);
        if (d->stream)
            cu->StreamDestroy(d->stream);
        if (d->ctx)
            cu->DevicePrimaryCtxRelease(d->dev);
        dlclose(cu->lib);
    }
    ic__free(d->c, d->live);
    ic__free(d->c, d->cache);
    ic__free(d->c, d);
}

int ic_cuda_sm(const ic_cuda *d) { return d ? d->sm : 0; }
int ic_cuda_num_sms(const ic_cuda *d) { return d ? d->nsms : 0; }
const char *ic_cuda_device_name(const ic_cuda *d) { return d ? d->name : ""; }

/* ---- caching allocator ---- */

/* The bucket: powers of two up to 1 MiB, then multiples of 2 MiB. */
static size_t bucket(size_t n)
{
    if (n <= 512)
        return 512;
    if (n <= ((size_t)1 << 20)) {
        size_t b = 512;
        while (b < n)
            b *= 2;
        return b;
    }
    size_t g = (size_t)2 << 20;
    return (n + g - 1) / g * g;
}

static bool push(ic_ctx *c, ic__cblock **arr, int *n, int *cap, ic__cblock b)
{
    if (*n == *cap) {
        int nc = *cap ? *cap * 2 : 32;
        ic__cblock *na = ic__realloc(c, *arr, sizeof *na * (size_t)nc);
        if (!na)
            return false;
        *arr = na;
        *cap = nc;
    }
    (*arr)[(*n)++] = b;
    return true;
}

ic_status ic_cuda_alloc(ic_cuda *d, size_t bytes, uint64_t *ptr)
{
    size_t size = bucket(bytes);
    *ptr = 0;
    for (int i = 0; i < d->ncache; i++)
        if (d->cache[i].size == size) {
            ic__cblock b = d->cache[i];
            if (!push(d->c, &d->live, &d->nlive, &d->caplive, b))
                return ic__error(d->c, IC_ENOMEM, "cuda: out of host memory");
            d->cache[i] = d->cache[--d->ncache];
            d->cached_bytes -= size;
            d->live_bytes += size;
            *ptr = b.ptr;
            return IC_OK;
        }
    CUdeviceptr p = 0;
    CUresult r = d->cu.MemAlloc(&p, size);
    if (r == CUDA_ERROR_OUT_OF_MEMORY && d->ncache) { /* give the cache back and retry */
        ic_cuda_trim(d);
        r = d->cu.MemAlloc(&p, size);
    }
    if (r != CUDA_SUCCESS) {
        char what[96];
        snprintf(what, sizeof what, "cuMemAlloc of %zu bytes", size);
        return ic__cuda_error(d, r, what);
    }
    if (!push(d->c, &d->live, &d->nlive, &d->caplive, (ic__cblock){ p, size })) {
        d->cu.MemFree(p);
        return ic__error(d->c, IC_ENOMEM, "cuda: out of host memory");
    }
    d->live_bytes += size;
    *ptr = p;
    return IC_OK;
}

void ic_cuda_free(ic_cuda *d, uint64_t ptr)
{
    if (!d || !ptr)
        return;
    for (int i = 0; i < d->nlive; i++)
        if (d->live[i].ptr == ptr) {
            ic__cblock b = d->live[i];
            d->live[i] = d->live[--d->nlive];
            d->live_bytes -= b.size;
            if (push(d->c, &d->cache, &d->ncache, &d->capcache, b))
                d->cached_bytes += b.size;
            else
                d->cu.MemFree(b.ptr);
            return;
        }
}

void ic_cuda_trim(ic_cuda *d)
{
    if (!d)
        return;
    for (int i = 0; i < d->ncache; i++)
        d->cu.MemFree(d->cache[i].ptr);
    d->ncache = 0;
    d->cached_bytes = 0;
}

void ic_cuda_alloc_stats(const ic_cuda *d, size_t *cached, size_t *in_use)
{
    if (cached)
        *cached = d ? d->cached_bytes : 0;
    if (in_use)
        *in_use = d ? d->live_bytes : 0;
}

/* ---- modules ---- */

/* The modules of one ic__cuda_load_code, a job each (ic__run_jobs). */
typedef struct {
    ic_cuda *d;
    int n;
    const char *const *ptx;
    ic__cubin *cubins;        /* [n] or NULL */
    CUmodule *mods;
} load_jobs;

/* "cuda: <call> (module i of n): CUDA_ERROR_X: <the JIT's log>" */
static ic_status jit_error(const load_jobs *J, int i, CUresult r, const char *call, const char *log)
{
    const char *name = NULL;
    J->d->cu.GetErrorName(r, &name);
    char where[64] = "";
    if (J->n > 1)
        snprintf(where, sizeof where, " (module %d of %d)", i, J->n);
    return ic__error(J->d->c, IC_ECUDA, "cuda: %s%s: %s: %s", call, where, name ? name : "error",
                     log[0] ? log : "(the JIT left no log)");
}

/* PTX i compiled by the linker into a cubin (copied out of the link state into *cb). */
static ic_status link_ptx(const load_jobs *J, int i, char *log, ic__cubin *cb)
{
    ic__cu *cu = &J->d->cu;
    CUjit_option opt[2] = { CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES };
    void *val[2] = { log, (void *)(uintptr_t)(LOG_BYTES - 1) };
    CUlinkState ls = NULL;
    CUresult r = cu->LinkCreate(2, opt, val, &ls);
    if (r != CUDA_SUCCESS)
        return jit_error(J, i, r, "cuLinkCreate", log);
    void *img = NULL;
    size_t size = 0;
    const char *what = "cuLinkAddData";
    r = cu->LinkAddData(ls, CU_JIT_INPUT_PTX, (void *)J->ptx[i], strlen(J->ptx[i]) + 1, "ic", 0, NULL, NULL);
    if (r == CUDA_SUCCESS)
        what = "cuLinkComplete", r = cu->LinkComplete(ls, &img, &size);
    ic_status s = r != CUDA_SUCCESS ? jit_error(J, i, r, what, log) : IC_OK;
    if (!s && !(cb->data = ic__malloc(J->d->c, size ? size : 1)))
        s = ic__error(J->d->c, IC_ENOMEM, "cuda: out of memory for a cubin");
    if (!s) {
        memcpy(cb->data, img, size); /* img lives as long as the link state */
        cb->size = size;
        cb->made = true;
    }
    cu->LinkDestroy(ls);
    return s;
}

/* Module i from PTX: linked into a cubin kept in *cb and loaded when the caller keeps cubins
 * and the driver has the linker, else JIT-loaded as is (the same JIT work either way). */
static ic_status compile_module(const load_jobs *J, int i, char *log, ic__cubin *cb)
{
    ic__cu *cu = &J->d->cu;
    CUresult r;
    if (!J->cubins || !cu->LinkCreate) {
        CUjit_option opt[2] = { CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES };
        void *val[2] = { log, (void *)(uintptr_t)(LOG_BYTES - 1) };
        r = cu->ModuleLoadDataEx(&J->mods[i], J->ptx[i], 2, opt, val);
        return r == CUDA_SUCCESS ? IC_OK : jit_error(J, i, r, "cuModuleLoadDataEx", log);
    }
    ic_status s = link_ptx(J, i, log, cb);
    if (!s && (r = cu->ModuleLoadData(&J->mods[i], cb->data)) != CUDA_SUCCESS)
        s = jit_error(J, i, r, "cuModuleLoadData", "");
    return s;
}

/* Job i: module i loaded in this thread, with d's context made current here (a context is
 * current per thread): from its cubin when it has one the driver takes, else compiled. */
static ic_status load_job(void *arg, int i, int thread)
{
    (void)thread;
    load_jobs *J = arg;
    ic_cuda *d = J->d;
    if (!J->ptx[i])
        return ic__error(d->c, IC_EINVAL, "cuda: no PTX for module %d", i);
    CUresult r = d->cu.CtxSetCurrent(d->ctx);
    if (r != CUDA_SUCCESS)
        return ic__cuda_error(d, r, "cuCtxSetCurrent in a module-loading thread");
    ic__cubin none = { 0 }, *cb = J->cubins ? &J->cubins[i] : &none;
    if (cb->data && d->cu.ModuleLoadData) {
        if ((r = d->cu.ModuleLoadData(&J->mods[i], cb->data)) == CUDA_SUCCESS)
            return IC_OK;
        ic__logf(d->c, 1, "ic: cuda: a cached cubin was refused (module %d, error %d): compiling its PTX", i, (int)r);
    }
    ic__free(d->c, cb->data); /* refused, or unusable without the cubin loader */
    *cb = (ic__cubin){ 0 };
    char *log = ic__calloc(d->c, LOG_BYTES, 1);
    if (!log)
        return ic__error(d->c, IC_ENOMEM, "cuda: out of memory");
    ic_status s = compile_module(J, i, log, cb);
    if (s)
        J->mods[i] = NULL;
    ic__free(d->c, log);
    return s;
}

ic_status ic__cuda_load_code(ic_cuda *d, int n, const char *const *ptx, ic__cubin *cubins,
                             ic_cuda_module **out)
{
    *out = NULL;
    if (n < 1 || !ptx)
        return ic__error(d->c, IC_EINVAL, "cuda: no PTX to load");
    ic_cuda_module *m = ic__calloc(d->c, 1, sizeof *m);
    if (!m || !(m->mods = ic__calloc(d->c, (size_t)n, sizeof *m->mods))) {
        ic__free(d->c, m);
        return ic__error(d->c, IC_ENOMEM, "cuda: out of memory");
    }
    m->d = d;
    m->nmods = n;
    load_jobs J = { d, n, ptx, cubins, m->mods };
    ic_status s = ic__run_jobs(d->c, n, load_job, &J, NULL);
    d->cu.CtxSetCurrent(d->ctx); /* the calling thread ran jobs too: it keeps d's context */
    if (s) {
        ic_cuda_module_unload(m); /* the modules that did load */
        return s;
    }
    *out = m;
    return IC_OK;
}

ic_status ic_cuda_module_load_many(ic_cuda *d, int n, const char *const *ptx, ic_cuda_module **out)
{
    return ic__cuda_load_code(d, n, ptx, NULL, out);
}

ic_status ic_cuda_module_load(ic_cuda *d, const char *ptx, ic_cuda_module **out)
{
    *out = NULL;
    if (!ptx)
        return ic__error(d->c, IC_EINVAL, "cuda: no PTX to load");
    return ic_cuda_module_load_many(d, 1, &ptx, out);
}

void ic_cuda_module_unload(ic_cuda_module *m)
{
    if (!m)
        return;
    ic_ctx *c = m->d->c;
    for (int i = 0; i < m->nmods; i++)
        if (m->mods[i])
            m->d->cu.ModuleUnload(m->mods[i]);
    for (int i = 0; i < m->nfn; i++)
        ic__free(c, m->names[i]);
    ic__free(c, m->mods);
    ic__free(c, m->names);
    ic__free(c, m->fns);
    ic__free(c, m->dyn_smem);
    ic__free(c, m);
}

/* Entry name in module `hint` first, then in the others: CUDA_ERROR_NOT_FOUND moves on. */
static CUresult find_function(ic_cuda_module *m, int hint, const char *name, CUfunction *f)
{
    CUresult r = CUDA_ERROR_NOT_FOUND;
    if (hint >= 0 && hint < m->nmods && (r = m->d->cu.ModuleGetFunction(f, m->mods[hint], name)) != CUDA_ERROR_NOT_FOUND)
        return r;
    for (int i = 0; i < m->nmods; i++)
        if (i != hint && (r = m->d->cu.ModuleGetFunction(f, m->mods[i], name)) != CUDA_ERROR_NOT_FOUND)
            return r;
    return r;
}

ic_status ic__cuda_function(ic_cuda_module *m, const char *name, CUfunction *out)
{
    return ic__cuda_function_in(m, -1, name, out);
}

ic_status ic__cuda_function_in(ic_cuda_module *m, int hint, const char *name, CUfunction *out)
{
    for (int i = 0; i < m->nfn; i++)
        if (!strcmp(m->names[i], name)) {
            *out = m->fns[i];
            return IC_OK;
        }
    ic_ctx *c = m->d->c;
    if (m->nfn == m->capfn) {
        int nc = m->capfn ? m->capfn * 2 : 8;
        char **nn = ic__realloc(c, m->names, sizeof *nn * (size_t)nc);
        if (nn)
            m->names = nn;
        CUfunction *nf = ic__realloc(c, m->fns, sizeof *nf * (size_t)nc);
        if (nf)
            m->fns = nf;
        int *ns = ic__realloc(c, m->dyn_smem, sizeof *ns * (size_t)nc);
        if (ns)
            m->dyn_smem = ns;
        if (!nn || !nf || !ns)
            return ic__error(c, IC_ENOMEM, "cuda: out of memory");
        m->capfn = nc;
    }
    CUfunction f;
    CUresult r = find_function(m, hint, name, &f);
    if (r != CUDA_SUCCESS) {
        char what[300];
        snprintf(what, sizeof what, "cuModuleGetFunction('%s')", name);
        return ic__cuda_error(m->d, r, what);
    }
    if (!(m->names[m->nfn] = ic__strdup(c, name)))
        return ic__error(c, IC_ENOMEM, "cuda: out of memory");
    m->dyn_smem[m->nfn] = 0;
    m->fns[m->nfn++] = f;
    *out = f;
    return IC_OK;
}

/* CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: past 48 KB a block's dynamic shared memory
 * must be allowed explicitly, once per function. */
#define IC__CU_FUNC_MAX_DYN_SMEM 8

static ic_status allow_smem(ic_cuda_module *m, const char *name, CUfunction f, int bytes)
{
    for (int i = 0; i < m->nfn; i++) {
        if (m->fns[i] != f)
            continue;
        if (m->dyn_smem[i] >= bytes || bytes <= 48 * 1024)
            return IC_OK;
        CUresult r = m->d->cu.FuncSetAttribute(f, IC__CU_FUNC_MAX_DYN_SMEM, bytes);
        if (r != CUDA_SUCCESS) {
            char what[300];
            snprintf(what, sizeof what, "cuFuncSetAttribute('%s', max dynamic shared memory %d)", name, bytes);
            return ic__cuda_error(m->d, r, what);
        }
        m->dyn_smem[i] = bytes;
        return IC_OK;
    }
    return IC_OK;
}

ic_status ic_cuda_module_launch(ic_cuda_module *m, const char *name, int64_t grid, int block,
                                void **args)
{
    return ic_cuda_module_launch_smem(m, name, grid, block, 0, args);
}

ic_status ic_cuda_module_launch_smem(ic_cuda_module *m, const char *name, int64_t grid, int block,
                                     int dyn_smem, void **args)
{
    CUfunction f;
    ic_status s = ic__cuda_function(m, name, &f);
    if (s)
        return s;
    if (grid <= 0)
        return IC_OK;
    if (grid > 0x7fffffff || block <= 0 || block > 1024 || dyn_smem < 0)
        return ic__error(m->d->c, IC_EINVAL, "cuda: kernel '%s': bad launch %lld x %d (%d bytes of shared memory)",
                         name, (long long)grid, block, dyn_smem);
    if (dyn_smem && (s = allow_smem(m, name, f, dyn_smem)))
        return s;
    CUresult r = m->d->cu.LaunchKernel(f, (unsigned)grid, 1, 1, (unsigned)block, 1, 1, (unsigned)dyn_smem,
                                       m->d->stream, args, NULL);
    if (r != CUDA_SUCCESS) {
        char what[300];
        snprintf(what, sizeof what, "cuLaunchKernel('%s', %lld x %d)", name, (long long)grid, block);
        return ic__cuda_error(m->d, r, what);
    }
    return IC_OK;
}

ic_status ic_cuda_synchronize(ic_cuda *d)
{
    CU(d, d->cu.StreamSynchronize(d->stream), "cuStreamSynchronize");
    return IC_OK;
}

ic_status ic_cuda_copy_bandwidth(ic_cuda *d, size_t bytes, int iters, double *gbps)
{
    *gbps = 0;
    uint64_t a = 0, b = 0;
    CUevent e0 = NULL, e1 = NULL;
    ic_status s = ic_cuda_alloc(d, bytes, &a);
    if (!s)
        s = ic_cuda_alloc(d, bytes, &b);
    if (s)
        goto done;
    ic__cu *cu = &d->cu;
    CUresult r = cu->MemsetD8Async(a, 1, bytes, d->stream);
    if (!r) r = cu->MemcpyDtoDAsync(b, a, bytes, d->stream);   /* warm-up */
    if (!r) r = cu->EventCreate(&e0, CU_EVENT_DEFAULT);
    if (!r) r = cu->EventCreate(&e1, CU_EVENT_DEFAULT);
    if (!r) r = cu->EventRecord(e0, d->stream);
    for (int i = 0; !r && i < iters; i++)
        r = cu->MemcpyDtoDAsync(i % 2 ? a : b, i % 2 ? b : a, bytes, d->stream);
    if (!r) r = cu->EventRecord(e1, d->stream);
    if (!r) r = cu->EventSynchronize(e1);
    float ms = 0;
    if (!r) r = cu->EventElapsedTime(&ms, e0, e1);
    if (r) {
        s = ic__cuda_error(d, r, "timing device-to-device copies");
        goto done;
    }
    *gbps = ms > 0 ? 2.0 * (double)bytes * iters / (ms * 1e-3) / 1e9 : 0;
done:
    if (e0) d->cu.EventDestroy(e0);
    if (e1) d->cu.EventDestroy(e1);
    ic_cuda_free(d, a);
    ic_cuda_free(d, b);
    return s;
}
