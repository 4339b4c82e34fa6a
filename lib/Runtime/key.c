/* key.c - cache keys of compiled kernels and codegen parameters as text (key-impl.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "key-impl.h"
#include "cache-impl.h"
#include "llvmgen-impl.h"

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

void ic__cg_params_format(const ic_codegen_params *p, char *buf, size_t n)
{
    int nf;
    const ic__cg_field *fields = ic__cg_fields(&nf);
    size_t w = 0;
    buf[0] = 0;
    for (int i = 0; i < nf && w < n; i++) {
        int k = snprintf(buf + w, n - w, "%s%s=%" PRId64, i ? " " : "", fields[i].name,
                         ic__cg_field_get(p, &fields[i]));
        w += k > 0 ? (size_t)k : 0;
    }
}

/* A known field within its bounds (a record naming anything else is not ours, or damaged). */
static bool set_field(ic_codegen_params *p, const char *name, size_t len, int64_t v)
{
    int nf;
    const ic__cg_field *fields = ic__cg_fields(&nf);
    for (int i = 0; i < nf; i++)
        if (strlen(fields[i].name) == len && !strncmp(fields[i].name, name, len))
            return ic__cg_field_set(p, &fields[i], v);
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
