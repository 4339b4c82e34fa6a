/* fuzz_config.c - config strings (lib/Runtime/config.c, options.c): ic_config_parse over the
 * bytes as a C string (JSON, or base64 of JSON), on a fresh config and on one that already
 * has a mode, a template and options. A refusal must leave the config as it was (all or
 * nothing); what parses must resolve every option (ic_config_get) and apply to the option
 * structs (ic_config_apply_*). */
#include "fuzz_common.h"

static void key_of(const ic_config *cfg, char *buf, size_t n)
{
    size_t need = ic_config_key(cfg, IC_OPTION_BOTH, buf, n);
    FZ_CHECK(need < n, "a config key of %zu bytes", need);
}

static void use(ic_ctx *c, ic_config *cfg)
{
    char buf[4096];
    for (int i = 0; i < ic_option_count(); i++)
        FZ_CHECK(ic_config_get(cfg, ic_option_get(i)->name, buf, sizeof buf) == IC_OK, "get %s: %s",
                 ic_option_get(i)->name, ic_last_error(c));
    ic_compile_options o;
    ic_cuda_options co;
    ic_switches sw;
    ic_compile_options_init(&o);
    ic_cuda_options_init(&co);
    ic_switches_init(&sw);
    ic_config_apply_compile(cfg, &o);
    ic_config_apply_cuda(cfg, &co);
    ic_config_apply_switches(cfg, &sw);
    FZ_CHECK(ic_config_mode(cfg) != NULL, "no mode");
}

/* The config as text: its key, mode and template. */
static void state(const ic_config *cfg, char *buf, size_t n)
{
    key_of(cfg, buf, n - 600);
    const char *t = ic_config_template(cfg);
    size_t k = strlen(buf);
    snprintf(buf + k, n - k, " mode=%.256s template=%.256s", ic_config_mode(cfg), t ? t : "(none)");
}

static void parse(ic_ctx *c, ic_config *cfg, const char *text)
{
    static char before[16384], after[16384];
    state(cfg, before, sizeof before);
    ic_status s = ic_config_parse(cfg, text);
    fz_note(c, s);
    if (s != IC_OK) {
        FZ_CHECK(ic_last_error(c)[0], "status %d without a message", (int)s);
        state(cfg, after, sizeof after);
        FZ_CHECK(!strcmp(before, after), "a refused config changed it:\n%s\n%s", before, after);
    }
    use(c, cfg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ic_ctx *c = fz_ctx();
    char *text = fz_cstr(data, size);
    ic_config *cfg;
    FZ_CHECK(ic_config_create(c, &cfg) == IC_OK, "create");
    parse(c, cfg, text);
    ic_config_destroy(cfg);
    FZ_CHECK(ic_config_create(c, &cfg) == IC_OK, "create");
    ic_config_set_template(cfg, "cutlass");
    ic_config_set_freezing(cfg, true);
    ic_config_set(cfg, "vector_width", "8");
    parse(c, cfg, text);
    ic_config_destroy(cfg);
    free(text);
    ic_ctx_destroy(c);
    return 0;
}
