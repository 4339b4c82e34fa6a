/* params.c - the fields of ic_codegen_params, their text names and the values codegen accepts:
 * one table for the tuning records' text form (Runtime's key.c) and for checking params given
 * to ic_llvmgen, so a damaged or hand-made record is refused, never turned into code. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include "llvmgen-impl.h"

#define F(name, wide, lo, hi) { #name, offsetof(ic_codegen_params, name), wide, lo, hi }
/* The bounds are far outside what the heuristics and the tuner choose; they keep code
 * generation finite (vector widths, interleave and strip sizes become register and stack
 * arrays) and nothing else. */
static const ic__cg_field fields[] = {
    F(vector_width, 0, 0, 64), F(unroll, 0, 0, 64), F(strip, 1, 0, 1 << 16),
    F(threads, 0, 0, 1 << 16), F(parallel_depth, 0, 0, IC_MAX_RANK),
    F(serial_threshold, 1, 0, INT64_MAX), F(grain, 1, 0, INT64_MAX),
    F(prefer_vector_bits, 0, 0, 2048), F(prefetch_bytes, 0, -1, 1 << 24),
    F(stream_bytes, 1, 0, INT64_MAX), F(gemm.disable, 0, 0, 1), F(gemm.mr, 0, 0, 64),
    F(gemm.nr, 0, 0, 1024), F(gemm.mc, 1, 0, 1 << 24), F(gemm.kc, 1, 0, 1 << 24),
    F(gemm.nc, 1, 0, 1 << 24), F(gemm.threads, 0, 0, 1 << 16), F(gemm.pack_a, 0, -1, 1),
    F(gemm.prepack, 0, 0, 1), F(gemm.unroll, 0, 0, 64), F(gemm.bf16_dot, 0, -1, 1),
    F(gemm.serial_flops, 1, 0, INT64_MAX),
};
#undef F

const ic__cg_field *ic__cg_fields(int *n)
{
    *n = (int)(sizeof fields / sizeof fields[0]);
    return fields;
}

int64_t ic__cg_field_get(const ic_codegen_params *p, const ic__cg_field *f)
{
    const char *at = (const char *)p + f->off;
    if (f->wide) {
        int64_t v;
        memcpy(&v, at, sizeof v);
        return v;
    }
    int x;
    memcpy(&x, at, sizeof x);
    return x;
}

bool ic__cg_field_set(ic_codegen_params *p, const ic__cg_field *f, int64_t v)
{
    if (v < f->lo || v > f->hi)
        return false;
    char *at = (char *)p + f->off;
    if (f->wide)
        memcpy(at, &v, sizeof v);
    else {
        int x = (int)v;
        memcpy(at, &x, sizeof x);
    }
    return true;
}

ic_status ic__cg_params_check(ic_ctx *c, const char *kernel, const ic_codegen_params *p)
{
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        const ic__cg_field *f = &fields[i];
        int64_t v = ic__cg_field_get(p, f);
        if (v < f->lo || v > f->hi)
            return ic__error(c, IC_EINVAL, "codegen: kernel '%s': parameter %s = %lld is outside [%lld, %lld]",
                             kernel ? kernel : "?", f->name, (long long)v, (long long)f->lo, (long long)f->hi);
    }
    return IC_OK;
}
