/* fuzz_weights.h - a small weights file the graph harnesses' inputs can name: written once per
 * process into the temporary folder as "w.safetensors" and "tiny_mlp.safetensors" (the name
 * benchmarks/graphs/tiny_mlp.json uses), one tensor of each kind a param may read. */
#ifndef IC_FUZZ_WEIGHTS_H
#define IC_FUZZ_WEIGHTS_H
#include "fuzz_common.h"

static void fz_weights(void)
{
    static int done;
    if (done)
        return;
    done = 1;
    static float w1[16 * 8], b1[16], w2[4 * 16], b2[4];
    static uint16_t h[6];
    static int64_t i64[5];
    static uint8_t u8[7];
    static const char *const names[] = { "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias",
                                         "h", "i", "b" };
    const struct { ic_dtype dt; int rank; int64_t shape[2]; void *data; } spec[] = {
        { IC_F32, 2, { 16, 8 }, w1 }, { IC_F32, 1, { 16 }, b1 }, { IC_F32, 2, { 4, 16 }, w2 },
        { IC_F32, 1, { 4 }, b2 },     { IC_BF16, 2, { 2, 3 }, h }, { IC_I64, 1, { 5 }, i64 },
        { IC_U8, 1, { 7 }, u8 },
    };
    ic_tensor t[7];
    for (int i = 0; i < 7; i++)
        ic_tensor_init(&t[i], spec[i].dt, spec[i].rank, spec[i].shape, spec[i].data);
    ic_ctx *c = fz_ctx();
    char p[512];
    if (ic_safetensors_save(c, fz_path(p, sizeof p, "w.safetensors"), 7, names, t) ||
        ic_safetensors_save(c, fz_path(p, sizeof p, "tiny_mlp.safetensors"), 7, names, t)) {
        fprintf(stderr, "fuzz: writing the weights: %s\n", ic_last_error(c));
        abort();
    }
    ic_ctx_destroy(c);
}
#endif
