/* fuzz_cache_entry.c - persistent cache entries (lib/Runtime/cache.c) and what reads their
 * values: the first byte picks the namespace (bits 0-1: cpu-obj, cpu-tune, gpu-code, gpu-tune)
 * and whether the rest is the entry file as is (bit 2 clear) or its sealed middle (set:
 * fuzz_cache.h). The entry is parsed (ic__cache_parse), stored where its key names it and read
 * back through ic__cache_get, and a hit's value goes to its namespace's reader:
 *   cpu-obj   ic__jit_object_unpack (the packing around the object; the ELF itself is trusted
 *             code, never linked here)
 *   cpu-tune  ic__tune_record_parse, ic__cg_params_parse
 *   gpu-code  ic__gcode_from_entries, ic__gcode_module (fuzz_gpu.h's program)
 *   gpu-tune  ic__tune_cuda_record_get */
#include "fuzz_cache.h"
#include "fuzz_gpu.h"
#include "compile-impl.h"
#include "tune-impl.h"
#include "tune_cuda-impl.h"

static void read_value(ic_ctx *c, int ns, const char *key, const void *val, size_t n)
{
    if (ns == 0) {
        ic__object *o = NULL;
        char *sym = NULL;
        if (ic__jit_object_unpack(c, val, n, true, &o, &sym)) {
            ic__jit_object_free(c, o);
            ic__free(c, sym);
        }
    } else if (ns == 1) {
        ic__tune_record r;
        ic_codegen_params p;
        memset(&p, 0, sizeof p);
        if (ic__tune_record_parse(val, n, &r))
            ic__cg_params_parse(r.params, &p);
    } else if (ns == 2) {
        ic__gcode *g = NULL;
        FZ_CHECK(ic__gcode_from_entries(c, fz_program(), 1, &val, &n, &g) == IC_OK, "%s", ic_last_error(c));
        ic_ptx_module *pm = NULL;
        FZ_CHECK(ic__gcode_module(c, g, &pm) == IC_OK, "%s", ic_last_error(c));
        ic_ptx_module_destroy(pm);
        ic__gcode_free(c, g);
    } else {
        ic_ptx_params p[3];
        for (int k = 1; k <= 3; k++)
            ic__tune_cuda_record_get(c, key, k, p);
    }
}

/* Stores entry e (n bytes) under key's file name and reads it through the cache. */
static void through_cache(ic_ctx *c, int ns, const ic__cache_view *v, const uint8_t *e, size_t n)
{
    if (memchr(v->key, 0, (size_t)v->nkey)) /* no C string names it: only parse could read it */
        return;
    char *key = fz_cstr((const uint8_t *)v->key, (size_t)v->nkey), name[IC__CACHE_NAME_LEN + 1], dir[600];
    ic__cache_file_name(fz_cache_ns[ns], key, (size_t)v->nkey, name);
    snprintf(dir, sizeof dir, "%s/cache", fz_dir());
    FZ_CHECK(ic__cache_write_file(dir, fz_cache_ns[ns], name, e, n) == 0, "cannot write the entry");
    void *val;
    size_t nval;
    FZ_CHECK(ic__cache_get(c, fz_cache_ns[ns], key, &val, &nval), "a valid entry is a miss");
    FZ_CHECK(nval == v->nval && !memcmp(val, v->val, nval), "the value read differs from the parsed one");
    read_value(c, ns, key, val, nval);
    free(val);
    char path[700];
    snprintf(path, sizeof path, "%s/%s/%s", dir, fz_cache_ns[ns], name);
    remove(path);
    free(key);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    fz_program();
    int ns = data[0] & 3;
    const uint8_t *e = data + 1;
    size_t n = size - 1;
    uint8_t *sealed = NULL;
    if (data[0] & 4) {
        fz_cache_seal(e, n, &sealed, &n);
        e = sealed;
    }
    ic_ctx *c = fz_ctx();
    ic__cache_view v;
    const char *why;
    ic__entry_state st = ic__cache_parse(e, n, &v, &why);
    FZ_CHECK(st != IC__ENTRY_CORRUPT || why[0], "a corrupt entry without a reason");
    if (st == IC__ENTRY_OK)
        through_cache(c, ns, &v, e, n);
    free(sealed);
    ic_ctx_destroy(c);
    return 0;
}
