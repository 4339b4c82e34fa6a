/* fuzz_gpu_code.c - GPU code entries of the persistent cache (lib/Runtime/gpu_cache.c), the
 * same entries a saved GPU model holds per kernel: launch data, arguments, names, PTX, cubin.
 * The input is up to 8 entries, each a u32 little-endian length and that many bytes (the last
 * cut to what is left); they are parsed as the kernels of one program (ic__gcode_from_entries)
 * and, when all hit, made into a PTX module (ic__gcode_module), as a cache hit would before
 * loading. The cubins are not loaded: no driver is opened here. */
#include "fuzz_gpu.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const ic_program *p = fz_program();
    ic_ctx *c = fz_ctx();
    const void *ent[8];
    size_t n[8];
    int nk = 0;
    size_t at = 0;
    while (at < size && nk < 8) {
        uint32_t len = 0;
        for (int i = 0; i < 4 && at < size; i++)
            len |= (uint32_t)data[at++] << (8 * i);
        n[nk] = len < size - at ? len : size - at;
        ent[nk++] = data + at;
        at += n[nk - 1];
    }
    ic__gcode *g = NULL;
    ic_status s = ic__gcode_from_entries(c, p, nk, ent, n, &g);
    FZ_CHECK(s == IC_OK, "from_entries failed: %s", ic_last_error(c));
    ic_ptx_module *pm = NULL;
    s = ic__gcode_module(c, g, &pm);
    FZ_CHECK(s == IC_OK, "gcode_module failed: %s", ic_last_error(c));
    if (pm) {
        FZ_CHECK(ic_ptx_module_num_kernels(pm) == nk, "a module of %d kernels from %d entries",
                 ic_ptx_module_num_kernels(pm), nk);
        for (int i = 0; i < nk; i++) /* what a launch reads */
            FZ_CHECK(ic_ptx_module_kernel(pm, i)->name && ic_ptx_module_kernel_text(pm, i),
                     "kernel %d has no name or text", i);
        ic__gcode_match(c, g, pm);
        ic_ptx_module_destroy(pm);
    }
    ic__gcode_free(c, g);
    ic_ctx_destroy(c);
    return 0;
}
