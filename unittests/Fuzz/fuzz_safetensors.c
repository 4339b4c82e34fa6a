/* fuzz_safetensors.c - the safetensors reader (lib/Graph/safetensors.c).
 *
 * Two ways to read an input, so the fuzzer reaches the header parser behind the 8-byte length
 * prefix (a raw mutation almost always breaks that length):
 * - raw: the bytes are the file;
 * - sealed, when the input starts with '{': the bytes up to the first NUL are the header JSON
 *   and the rest is the data area; the harness writes the length in front.
 * A file that opens must give every tensor it lists (reading all of its bytes), refuse a name
 * it lacks, and save to a file that opens again with the same tensors. */
#include "fuzz_common.h"

static void check_file(ic_ctx *c, ic_safetensors *st)
{
    int n = ic_safetensors_count(st);
    const char **names = calloc((size_t)n + 1, sizeof *names);
    ic_tensor *ts = calloc((size_t)n + 1, sizeof *ts);
    volatile unsigned sum = 0;
    for (int i = 0; i < n; i++) {
        names[i] = ic_safetensors_name(st, i);
        FZ_CHECK(names[i] && ic_safetensors_get(st, names[i], &ts[i]) == IC_OK,
                 "listed tensor %d not found: %s", i, ic_last_error(c));
        int64_t bytes = ic_tensor_numel(&ts[i]) * (int64_t)ic_dtype_size(ts[i].dtype);
        for (int64_t b = 0; b < bytes; b++)
            sum += ((const unsigned char *)ts[i].data)[b];
    }
    ic_tensor t;
    FZ_CHECK(ic_safetensors_get(st, "\x01no such tensor", &t) != IC_OK, "found a missing name");
    char path[512];
    fz_path(path, sizeof path, "copy.safetensors");
    ic_status s = ic_safetensors_save(c, path, n, names, ts);
    FZ_CHECK(s == IC_OK, "an opened file does not save: %s", ic_last_error(c));
    ic_safetensors *st2 = NULL;
    s = ic_safetensors_open(c, path, &st2);
    FZ_CHECK(s == IC_OK, "a saved file does not open: %s", ic_last_error(c));
    FZ_CHECK(ic_safetensors_count(st2) == n, "saved %d tensors, read %d", n, ic_safetensors_count(st2));
    ic_safetensors_close(st2);
    free(names);
    free(ts);
}

static void open_file(const char *path)
{
    ic_ctx *c = fz_ctx();
    ic_safetensors *st = NULL;
    ic_status s = ic_safetensors_open(c, path, &st);
    fz_note(c, s);
    if (s == IC_OK)
        check_file(c, st);
    else
        FZ_CHECK(ic_last_error(c)[0] && !st, "status %d without a message", (int)s);
    ic_safetensors_close(st);
    ic_ctx_destroy(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[512];
    if (size && data[0] == '{') {
        const uint8_t *nul = memchr(data, 0, size);
        size_t hlen = nul ? (size_t)(nul - data) : size, rest = nul ? size - hlen - 1 : 0;
        uint8_t *f = malloc(8 + hlen + rest);
        for (int i = 0; i < 8; i++)
            f[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
        memcpy(f + 8, data, hlen);
        if (rest)
            memcpy(f + 8 + hlen, nul + 1, rest);
        fz_write(path, sizeof path, "t.safetensors", f, 8 + hlen + rest);
        free(f);
    } else {
        fz_write(path, sizeof path, "t.safetensors", data, size);
    }
    open_file(path);
    return 0;
}
