/* key.c - cache keys of compiled kernels and codegen parameters as text (key-impl.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "key-impl.h"
#include "cache-impl.h"

uint64_t ic__hash_data(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, b + i, 8);
        h = (h ^ w) * 0x9e3779b97f4a7c15ull;
        h ^= h >> 29;
    }
    return ic__hash_bytes(h, b + i, n - i);
}

/* Marks used[b] for every buffer kernel k loads or stores (all of them for attention kernels,
 * whose operands are not instructions). */
static void mark_buffers(const ic_program *p, const ic_kernel *k, bool *used)
{
    int nb = ic_program_num_buffers(p);
    if (k->attn) {
        for (int b = 0; b < nb; b++)
            used[b] = true;
        return;
    }
    for (int s = 0; s < k->nstages; s++)
        for (int i = 0; i < k->stages[s].ninstr; i++) {
            const ic_linstr *in = &k->stages[s].instr[i];
            if ((in->op == IC_L_LOAD || in->op == IC_L_STORE) && in->buf >= 0 && in->buf < nb)
                used[in->buf] = true;
        }
}

static void print_buffers(FILE *f, const ic_program *p, const bool *used, bool hash_params)
{
    for (int b = 0; b < ic_program_num_buffers(p); b++) {
        if (!used[b])
            continue;
        const ic_buffer *bf = ic_program_buffer(p, b);
        fprintf(f, "buf%d kind %d %s[%" PRId64 "]", b, (int)bf->kind, ic_dtype_name(bf->dtype), bf->numel);
        if (hash_params && bf->kind == IC_BUF_PARAM && bf->data)
            fprintf(f, " data %016" PRIx64,
                    ic__hash_data(IC__HASH_SEED, bf->data, (size_t)bf->numel * ic_dtype_size(bf->dtype)));
        fputc('\n', f);
    }
}

char *ic__kernel_key(const ic_program *p, int k, bool hash_params, const char *extra)
{
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    bool *used = calloc((size_t)ic_program_num_buffers(p) + 1, sizeof *used);
    if (!f || !used) {
        if (f)
            fclose(f);
        free(text);
        free(used);
        return NULL;
    }
    ic_kernel_print(f, p, k);
    mark_buffers(p, ic_program_kernel(p, k), used);
    print_buffers(f, p, used, hash_params);
    fprintf(f, "%s\n", extra ? extra : "");
    free(used);
    return fclose(f) == 0 ? text : (free(text), NULL);
}

/* ---- codegen parameters as text ---- */

typedef struct {
    const char *name;
    size_t off;
    bool wide; /* int64_t, else int */
} field;

#define F(name, wide) { #name, offsetof(ic_codegen_params, name), wide }
static const field fields[] = {
    F(vector_width, 0), F(unroll, 0), F(strip, 1), F(threads, 0), F(parallel_depth, 0),
    F(serial_threshold, 1), F(grain, 1), F(prefer_vector_bits, 0), F(prefetch_bytes, 0),
    F(stream_bytes, 1), F(gemm.disable, 0), F(gemm.mr, 0), F(gemm.nr, 0), F(gemm.mc, 1),
    F(gemm.kc, 1), F(gemm.nc, 1), F(gemm.threads, 0), F(gemm.pack_a, 0), F(gemm.prepack, 0),
    F(gemm.unroll, 0), F(gemm.bf16_dot, 0), F(gemm.serial_flops, 1),
};
#undef F
enum { NFIELDS = sizeof fields / sizeof fields[0] };

void ic__cg_params_format(const ic_codegen_params *p, char *buf, size_t n)
{
    size_t w = 0;
    buf[0] = 0;
    for (int i = 0; i < NFIELDS && w < n; i++) {
        const char *at = (const char *)p + fields[i].off;
        int64_t v = 0;
        if (fields[i].wide)
            memcpy(&v, at, sizeof v);
        else {
            int x;
            memcpy(&x, at, sizeof x);
            v = x;
        }
        int k = snprintf(buf + w, n - w, "%s%s=%" PRId64, i ? " " : "", fields[i].name, v);
        w += k > 0 ? (size_t)k : 0;
    }
}

static bool set_field(ic_codegen_params *p, const char *name, size_t len, int64_t v)
{
    for (int i = 0; i < NFIELDS; i++) {
        if (strlen(fields[i].name) != len || strncmp(fields[i].name, name, len))
            continue;
        char *at = (char *)p + fields[i].off;
        if (fields[i].wide)
            memcpy(at, &v, sizeof v);
        else {
            int x = (int)v;
            if (x != v)
                return false;
            memcpy(at, &x, sizeof x);
        }
        return true;
    }
    return false;
}

bool ic__cg_params_parse(const char *text, ic_codegen_params *p)
{
    const char *s = text;
    while (*s) {
        while (*s == ' ')
            s++;
        if (!*s)
            break;
        const char *eq = strchr(s, '=');
        if (!eq)
            return false;
        char *end;
        long long v = strtoll(eq + 1, &end, 10);
        if (end == eq + 1 || (*end && *end != ' ') || !set_field(p, s, (size_t)(eq - s), v))
            return false;
        s = end;
    }
    return true;
}
