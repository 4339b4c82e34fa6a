/* fuzz_tune_record.c - the tuning records' texts (lib/Runtime/tune.c, key.c, tune_cuda.c),
 * as the cache hands them over after the entry checks (fuzz_cache_entry.c reaches them
 * through the cache). The first byte picks the parser (mod 3):
 *   0  ic__tune_record_parse over the bytes, then ic__cg_params_parse of its params
 *   1  ic__cg_params_parse (CPU codegen params: "name=value ...")
 *   2  ic__ptx_params_parse (GPU params: "mode=N block=N ...")
 * What parses must format to text that parses to the same values. */
#include "fuzz_common.h"
#include "key-impl.h"
#include "tune-impl.h"
#include "tune_cuda-impl.h"

static void cg_params(const char *text)
{
    ic_codegen_params p, q;
    memset(&p, 0, sizeof p);
    if (!ic__cg_params_parse(text, &p))
        return;
    char buf[2048];
    ic__cg_params_format(&p, buf, sizeof buf);
    memset(&q, 0, sizeof q);
    FZ_CHECK(ic__cg_params_parse(buf, &q), "'%s' does not parse again", buf);
    FZ_CHECK(!memcmp(&p, &q, sizeof p), "'%s' parses to other values", buf);
}

static void ptx_params(const char *text)
{
    ic_ptx_params p, q;
    memset(&p, 0, sizeof p);
    if (!ic__ptx_params_parse(text, &p))
        return;
    char buf[IC__PTX_PARAMS_TEXT];
    ic__ptx_params_format(&p, buf, sizeof buf);
    memset(&q, 0, sizeof q);
    FZ_CHECK(ic__ptx_params_parse(buf, &q), "'%s' does not parse again", buf);
    FZ_CHECK(!memcmp(&p, &q, sizeof p), "'%s' parses to other values", buf);
}

static void record(const uint8_t *data, size_t size)
{
    /* an exact-size copy: the parser is given a length, not a C string */
    char *b = malloc(size ? size : 1);
    memcpy(b, data, size);
    ic__tune_record r, r2;
    if (ic__tune_record_parse(b, size, &r)) {
        cg_params(r.params);
        char text[2048];
        if (ic__tune_record_format(&r, text, sizeof text)) {
            FZ_CHECK(ic__tune_record_parse(text, strlen(text), &r2), "'%s' does not parse again", text);
            FZ_CHECK(!strcmp(r.params, r2.params) && r.ms == r2.ms && r.default_ms == r2.default_ms,
                     "'%s' parses to other values", text);
        }
    }
    free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    char *s = fz_cstr(data + 1, size - 1);
    switch (data[0] % 3) {
    case 0: record(data + 1, size - 1); break;
    case 1: cg_params(s); break;
    default: ptx_params(s); break;
    }
    free(s);
    return 0;
}
