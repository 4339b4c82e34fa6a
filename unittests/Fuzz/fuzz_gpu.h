/* fuzz_gpu.h - what the GPU harnesses share: a device that is only a description (no driver is
 * opened: the harnesses stop before any code is loaded) and a small lowered program, once per
 * process, whose buffer count bounds the kernels' arguments an entry may name. */
#ifndef IC_FUZZ_GPU_H
#define IC_FUZZ_GPU_H
#include "fuzz_common.h"
#include "cuda-impl.h"

#define FZ_GPU_NAME "ic fuzz GPU"
#define FZ_GPU_SM 90
#define FZ_GPU_DRIVER 12040

static inline void fz_gpu_device(ic_ctx *c, ic_cuda *d)
{
    memset(d, 0, sizeof *d);
    d->c = c;
    d->sm = FZ_GPU_SM;
    d->nsms = 132;
    d->driver_version = FZ_GPU_DRIVER;
    snprintf(d->name, sizeof d->name, "%s", FZ_GPU_NAME);
}

/* y = relu(a + b) * b over [64, 32]: a few kernels' worth of buffers. */
static inline const ic_program *fz_program(void)
{
    static ic_ctx *c;
    static ic_program *p;
    if (p)
        return p;
    static const char *const text =
        "{\"ic_graph\": 1, \"name\": \"fz\", \"inputs\": [{\"name\": \"a\", \"dtype\": \"f32\", \"shape\": [64, 32]},"
        " {\"name\": \"b\", \"dtype\": \"f32\", \"shape\": [64, 32]}], \"nodes\": ["
        "{\"name\": \"s\", \"op\": \"add\", \"inputs\": [\"a\", \"b\"]},"
        "{\"name\": \"r\", \"op\": \"relu\", \"inputs\": [\"s\"]},"
        "{\"name\": \"y\", \"op\": \"mul\", \"inputs\": [\"r\", \"b\"]},"
        "{\"name\": \"z\", \"op\": \"sum\", \"inputs\": [\"y\"], \"attrs\": {\"dims\": [1]}}],"
        " \"outputs\": [\"y\", \"z\"]}";
    ic_graph *g;
    c = fz_ctx();
    if (ic_graph_load_json_string(c, text, NULL, &g) || ic_lower(c, g, &p)) {
        fprintf(stderr, "fuzz: the GPU harness's program: %s\n", ic_last_error(c));
        abort();
    }
    /* the program borrows g: both live as long as the process */
    return p;
}
#endif
