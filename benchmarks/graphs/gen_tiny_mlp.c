/* gen_tiny_mlp.c - writes tiny_mlp.safetensors, the weights of tiny_mlp.json, reproducibly.
 * Self-contained (no ic-llvm needed), so the bytes depend only on this file:
 *
 *     cc -std=c11 -o /tmp/gen_tiny_mlp benchmarks/graphs/gen_tiny_mlp.c
 *     /tmp/gen_tiny_mlp benchmarks/graphs/tiny_mlp.safetensors
 *
 * Values: splitmix64 from seed 42, k / 2^24 - 0.5 with k the top 24 bits, i.e. uniform in
 * [-0.5, 0.5) and exact in f32. unittests/Tools/test_cli.c checks the checked-in file against it. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static const struct { const char *key; int rows, cols; } tensors[] = {
    { "fc1.weight", 16, 8 }, { "fc1.bias", 16, 0 }, { "fc2.weight", 4, 16 }, { "fc2.bias", 4, 0 },
};
enum { NT = sizeof tensors / sizeof tensors[0] };

static int numel(int i) { return tensors[i].rows * (tensors[i].cols ? tensors[i].cols : 1); }

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gen_tiny_mlp OUT.safetensors\n");
        return 1;
    }
    char header[1024];
    size_t n = 0;
    long off = 0;
    n += (size_t)snprintf(header + n, sizeof header - n, "{");
    for (int i = 0; i < NT; i++) {
        long bytes = 4L * numel(i);
        if (tensors[i].cols)
            n += (size_t)snprintf(header + n, sizeof header - n,
                                  "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%d,%d],\"data_offsets\":[%ld,%ld]}",
                                  i ? "," : "", tensors[i].key, tensors[i].rows, tensors[i].cols, off, off + bytes);
        else
            n += (size_t)snprintf(header + n, sizeof header - n,
                                  "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%d],\"data_offsets\":[%ld,%ld]}",
                                  i ? "," : "", tensors[i].key, tensors[i].rows, off, off + bytes);
        off += bytes;
    }
    n += (size_t)snprintf(header + n, sizeof header - n, "}");
    while (n % 8) /* safetensors pads the header with spaces to 8 bytes */
        header[n++] = ' ';
    FILE *f = fopen(argv[1], "wb");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    unsigned char len[8];
    for (int b = 0; b < 8; b++)
        len[b] = (unsigned char)((uint64_t)n >> (8 * b));
    fwrite(len, 1, 8, f);
    fwrite(header, 1, n, f);
    uint64_t s = 42;
    for (int i = 0; i < NT; i++)
        for (int j = 0; j < numel(i); j++) {
            float v = (float)(splitmix64(&s) >> 40) / 16777216.0f - 0.5f;
            uint32_t bits;
            memcpy(&bits, &v, 4);
            unsigned char le[4] = { (unsigned char)bits, (unsigned char)(bits >> 8),
                                    (unsigned char)(bits >> 16), (unsigned char)(bits >> 24) };
            fwrite(le, 1, 4, f);
        }
    if (fclose(f) != 0) {
        perror(argv[1]);
        return 1;
    }
    return 0;
}
