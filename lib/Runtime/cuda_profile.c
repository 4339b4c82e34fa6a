/* cuda_profile.c - IC_PROFILE for graphs compiled for a GPU: CUDA events around every kernel
 * of every run, and at destroy the same per-kernel table as the CPU's (profile.c).
 * Why events and a synchronize per run: host clocks around asynchronous launches measure the
 * launch, not the kernel; the synchronize makes a profiled run slower than a normal one, but
 * not its kernels. */
#include <stdio.h>
#include "cuda-impl.h"

static ic_status cu(ic_cuda *d, CUresult r, const char *what)
{
    return r == CUDA_SUCCESS ? IC_OK : ic__cuda_error(d, r, what);
}

/* Events made on the first profiled run of a variant (its kernel count is fixed). */
ic_status ic__cprof_begin(ic_cuda *d, ic__cprof *p, int nkernels)
{
    if (!p->ev) {
        p->ev = ic__calloc(d->c, (size_t)nkernels + 1, sizeof *p->ev);
        p->ms = ic__calloc(d->c, (size_t)nkernels + 1, sizeof *p->ms);
        if (!p->ev || !p->ms)
            return ic__error(d->c, IC_ENOMEM, "cuda: out of memory (IC_PROFILE events)");
        p->n = nkernels;
        for (int i = 0; i <= nkernels; i++) {
            ic_status s = cu(d, d->cu.EventCreate(&p->ev[i], CU_EVENT_DEFAULT), "IC_PROFILE: cuEventCreate");
            if (s)
                return s;
        }
    }
    return ic__cprof_mark(d, p, 0);
}

ic_status ic__cprof_mark(ic_cuda *d, ic__cprof *p, int after_kernel)
{
    return cu(d, d->cu.EventRecord(p->ev[after_kernel], d->stream), "IC_PROFILE: cuEventRecord");
}

/* Waits for the run and adds each kernel's time. */
ic_status ic__cprof_end(ic_cuda *d, ic__cprof *p)
{
    ic_status s = cu(d, d->cu.EventSynchronize(p->ev[p->n]), "IC_PROFILE: running the kernels");
    for (int i = 0; i < p->n && !s; i++) {
        float t = 0;
        s = cu(d, d->cu.EventElapsedTime(&t, p->ev[i], p->ev[i + 1]), "IC_PROFILE: cuEventElapsedTime");
        p->ms[i] += t;
    }
    p->runs += !s;
    return s;
}

void ic__cprof_print(const ic__cprof *p, const char *graph, const ic_ptx_module *pm)
{
    if (!p->runs)
        return;
    double total = 0;
    for (int k = 0; k < p->n; k++)
        total += p->ms[k];
    fprintf(stderr, "ic: profile of '%s' on the GPU (%d kernels, %lld runs):\n", graph, p->n, (long long)p->runs);
    fprintf(stderr, "  %-40s %10s %10s %7s\n", "kernel", "total ms", "ms/run", "share");
    for (int k = 0; k < p->n; k++)
        fprintf(stderr, "  %-40s %10.3f %10.4f %6.1f%%\n", ic_ptx_module_kernel(pm, k)->name, p->ms[k],
                p->ms[k] / (double)p->runs, total > 0 ? 100.0 * p->ms[k] / total : 0.0);
    fprintf(stderr, "  %-40s %10.3f %10.4f\n", "all kernels", total, total / (double)p->runs);
}

void ic__cprof_free(ic_cuda *d, ic__cprof *p)
{
    if (!p->ev) /* never profiled (or no device: ic-dump) */
        return;
    for (int i = 0; p->ev && i <= p->n; i++)
        if (p->ev[i])
            d->cu.EventDestroy(p->ev[i]);
    ic__free(d->c, p->ev);
    ic__free(d->c, p->ms);
}
