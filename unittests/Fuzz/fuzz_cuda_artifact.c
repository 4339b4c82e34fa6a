/* fuzz_cuda_artifact.c - GPU saved models (lib/Runtime/cuda_artifact.c) without a GPU:
 * ic_cuda_compiled_load's parsing layer (ic__cuda_artifact_open: container, meta against a
 * described device, hashes, graph and weights, gvariants table) over raw or sealed files
 * (fuzz_artifact.h), then every kernel entry through the GPU code parser (gpu_cache.c), as the
 * load would before handing cubins to the driver. Cubins are trusted code and never loaded. */
#include "fuzz_artifact.h"
#include "fuzz_gpu.h"

static void gpu_host(FILE *f)
{
    fprintf(f, "device cuda\ngpu %s\nsm %d\ndriver %d\n", FZ_GPU_NAME, FZ_GPU_SM, FZ_GPU_DRIVER);
}

static void check_store(ic_ctx *c, const ic__artifact *A)
{
    const ic__store *st = &A->store;
    for (int i = 0; i < st->ngvar; i++) {
        int nk;
        const void *const *ent;
        const size_t *n;
        FZ_CHECK(ic__store_gpu_variant(st, st->gvar[i].vals, st->nsyms, &nk, &ent, &n), "variant %d not found", i);
        ic__gcode *g = NULL;
        FZ_CHECK(ic__gcode_from_entries(c, fz_program(), nk, ent, n, &g) == IC_OK, "%s", ic_last_error(c));
        ic_ptx_module *pm = NULL;
        FZ_CHECK(ic__gcode_module(c, g, &pm) == IC_OK, "%s", ic_last_error(c));
        ic_ptx_module_destroy(pm);
        ic__gcode_free(c, g);
    }
    FZ_CHECK(ic_graph_verify(A->g) == IC_OK, "the rebuilt graph fails verify: %s", ic_last_error(c));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_program();
    ic_ctx *c = fz_ctx();
    ic_cuda d;
    fz_gpu_device(c, &d);
    char path[512];
    fz_artifact(c, path, sizeof path, "m.icm", data, size, gpu_host);
    ic__artifact *A = NULL;
    ic_status s = ic__cuda_artifact_open(&d, path, &A);
    fz_note(c, s);
    if (s == IC_OK)
        check_store(c, A);
    else
        FZ_CHECK(ic_last_error(c)[0], "status %d without a message", (int)s);
    ic__artifact_free(A);
    ic_ctx_destroy(c);
    return 0;
}
