/* test_options.c - the option registry (every option documented, typed, with a default that
 * parses; unique names; every IC_* switch listed), modes and templates, ic_config (mode and
 * options exclusive, unknown names and bad values refused with the valid ones listed, the
 * priority option > freezing > template, JSON and base64 config strings, all or nothing),
 * applying it to both option structs and the switches, the cache-key text, and ic_compile
 * taking every mode. */
#include <stdlib.h>
#include <string.h>
#include <criterion/criterion.h>
#include "ic/ic.h"
#include "ic/options.h"
#include "testutil.h"

static ic_config *new_config(ic_ctx *c)
{
    ic_config *cfg = NULL;
    cr_assert_eq(ic_config_create(c, &cfg), IC_OK, "%s", ic_last_error(c));
    return cfg;
}

static void assert_value(ic_ctx *c, const ic_config *cfg, const char *name, const char *want)
{
    char buf[256];
    cr_assert_eq(ic_config_get(cfg, name, buf, sizeof buf), IC_OK, "get %s: %s", name, ic_last_error(c));
    cr_assert_str_eq(buf, want, "option %s", name);
}

/* ---- the registry ---- */

Test(options, registry_rows_are_complete_and_unique)
{
    ic_ctx *c = ict_ctx();
    ic_config *cfg = new_config(c);
    int n = ic_option_count();
    cr_assert_geq(n, 18);
    cr_assert_null(ic_option_get(-1));
    cr_assert_null(ic_option_get(n));
    for (int i = 0; i < n; i++) {
        const ic_option_info *o = ic_option_get(i);
        cr_assert(o && o->name && *o->name && o->doc && *o->doc && o->def && o->values && *o->values,
                  "option %d is incomplete", i);
        cr_assert(o->type >= IC_OPTION_BOOL && o->type <= IC_OPTION_STRING, "%s: type", o->name);
        cr_assert(o->backends && !(o->backends & ~IC_OPTION_BOTH), "%s: backends", o->name);
        cr_assert(o->compile_field || o->cuda_field || o->switch_field, "%s goes nowhere", o->name);
        cr_assert_eq(ic_option_find(o->name), o, "%s: find", o->name);
        for (int j = 0; j < i; j++)
            cr_assert_str_neq(ic_option_get(j)->name, o->name, "duplicate option");
        /* the default is a value the option accepts, printed as written */
        assert_value(c, cfg, o->name, o->def);
        if (o->type != IC_OPTION_STRING)
            cr_assert_eq(ic_config_set(cfg, o->name, o->def), IC_OK, "%s=%s: %s", o->name, o->def, ic_last_error(c));
        /* a code-changing option must reach the code: a field of an option struct */
        if (o->code)
            cr_assert(o->compile_field || o->cuda_field || o->switch_field, "%s", o->name);
    }
    cr_assert_null(ic_option_find("nope"));
    cr_assert_null(ic_option_find(NULL));
    ic_config_destroy(cfg);
    ic_ctx_destroy(c);
}

Test(options, registry_has_the_fixed_names_and_every_switch)
{
    static const char *const names[] = {
        "fusion", "threads", "freezing", "vector_width", "serial_threshold", "stream_bytes",
        "prefetch_bytes", "max_variants", "cuda_graphs", "allow_tf32", "wgmma", "iconv",
        "ptx_opt_level", "autotune", "autotune_budget", "cache", "compile_threads", "debug",
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        cr_assert(ic_option_find(names[i]), "no option %s", names[i]);
    /* every IC_* variable the context reads (lib/Graph/ctx.c), named by exactly one option */
    static const char *const envs[] = {
        "IC_DUMP", "IC_DEBUG", "IC_NO_FUSION", "IC_COMPILE_DEBUG", "IC_PROFILE",
        "IC_COMPILE_THREADS", "IC_CUDA_DRIVER", "IC_PTXAS", "IC_ICONV", "IC_CACHE_DIR",
        "IC_CACHE", "IC_AUTOTUNE_LOG",
    };
    int with_env = 0;
    for (int i = 0; i < ic_option_count(); i++)
        with_env += ic_option_get(i)->env != NULL;
    cr_assert_eq(with_env, (int)(sizeof envs / sizeof envs[0]), "options with an environment variable");
    for (size_t e = 0; e < sizeof envs / sizeof envs[0]; e++) {
        int hits = 0;
        for (int i = 0; i < ic_option_count(); i++)
            hits += ic_option_get(i)->env && strcmp(ic_option_get(i)->env, envs[e]) == 0;
        cr_assert_eq(hits, 1, "%s is named by %d options", envs[e], hits);
    }
    /* the code-changing ones, which enter cache keys */
    cr_assert(ic_option_find("vector_width")->code && ic_option_find("allow_tf32")->code &&
              ic_option_find("wgmma")->code && ic_option_find("iconv")->code);
    cr_assert(!ic_option_find("max_variants")->code && !ic_option_find("cache")->code &&
              !ic_option_find("cuda_graphs")->code && !ic_option_find("compile_threads")->code);
}

Test(options, modes_and_templates)
{
    static const char *const modes[] = { "default", "reduce-overhead", "max-autotune",
                                         "max-autotune-no-cudagraphs" };
    cr_assert_eq(ic_mode_count(), 4);
    for (int i = 0; i < 4; i++) {
        cr_assert_str_eq(ic_mode_get(i)->name, modes[i]);
        cr_assert(strstr(ic_mode_names(), modes[i]));
        cr_assert_eq(ic_mode_find(modes[i]), ic_mode_get(i));
    }
    /* list_mode_options() */
    cr_assert(!ic_mode_get(0)->cuda_graphs && ic_mode_get(0)->autotune == 0);
    cr_assert(ic_mode_get(1)->cuda_graphs && ic_mode_get(1)->autotune == 0);
    cr_assert(ic_mode_get(2)->cuda_graphs && ic_mode_get(2)->autotune == IC_TUNE_MAX);
    cr_assert(!ic_mode_get(3)->cuda_graphs && ic_mode_get(3)->autotune == IC_TUNE_MAX);
    cr_assert_eq((int)IC_CUDA_MAX_AUTOTUNE, 2);
    cr_assert_eq((int)IC_CUDA_MAX_AUTOTUNE_NO_CUDAGRAPHS, 3);
    cr_assert_null(ic_mode_find("Default"));
    static const char *const tmpls[] = { "triton", "cpp_wrapper", "cutlass", "aten",
                                         "cudagraphs", "max_autotune", "freezing", "tma" };
    cr_assert_eq(ic_template_count(), 8);
    ic_ctx *c = ict_ctx();
    for (int i = 0; i < 8; i++) {
        const ic_template_info *t = ic_template_find(tmpls[i]);
        cr_assert(t && t->doc && *t->doc && ic_mode_find(t->mode), "template %s", tmpls[i]);
        ic_config *cfg = new_config(c);
        cr_assert_eq(ic_config_set_template(cfg, tmpls[i]), IC_OK, "%s: %s", tmpls[i], ic_last_error(c));
        cr_assert_str_eq(ic_config_template(cfg), tmpls[i]);
        const char *want = !strcmp(tmpls[i], "cudagraphs")     ? "reduce-overhead"
                           : !strcmp(tmpls[i], "max_autotune") ? "max-autotune"
                                                               : "default";
        cr_assert_str_eq(ic_config_mode(cfg), want, "template %s implies its mode", tmpls[i]);
        ic_config_destroy(cfg);
    }
    ic_ctx_destroy(c);
}

Test(options, autotune_text)
{
    char b[128];
    cr_assert_str_eq(ic_autotune_text(0, b, sizeof b), "none");
    cr_assert_str_eq(ic_autotune_text(IC_TUNE_MAX, b, sizeof b), "max");
    cr_assert_str_eq(ic_autotune_text(IC_TUNE_MAX | IC_TUNE_EXHAUSTIVE, b, sizeof b), "max,exhaustive");
    cr_assert_str_eq(ic_autotune_text(IC_TUNE_GEMM | IC_TUNE_CONV, b, sizeof b), "gemm,conv");
    cr_assert_str_eq(ic_autotune_text(IC_TUNE_REDUCTION | IC_TUNE_COORDESC, b, sizeof b), "reduction,coordesc");
}

/* ---- ic_config ---- */

Test(options, mode_and_options_are_exclusive)
{
    ic_ctx *c = ict_ctx();
    ic_config *cfg = new_config(c);
    cr_assert_eq(ic_config_set(cfg, "vector_width", "4"), IC_OK);
    ict_assert_error(c, ic_config_set_mode(cfg, "max-autotune"), IC_EINVAL, "mode 'max-autotune'",
                     "options are exclusive");
    cr_assert_str_eq(ic_config_mode(cfg), "default", "the failed mode is not kept");
    /* default sets nothing, so it never conflicts */
    cr_assert_eq(ic_config_set_mode(cfg, "default"), IC_OK);
    ic_config_destroy(cfg);
    cfg = new_config(c);
    cr_assert_eq(ic_config_set_mode(cfg, "reduce-overhead"), IC_OK);
    ict_assert_error(c, ic_config_set(cfg, "fusion", "false"), IC_EINVAL, "mode 'reduce-overhead'",
                     "exclusive");
    assert_value(c, cfg, "fusion", "true");
    assert_value(c, cfg, "cuda_graphs", "true");
    assert_value(c, cfg, "autotune", "none");
    cr_assert_eq(ic_config_set_mode(cfg, "max-autotune-no-cudagraphs"), IC_OK, "a mode replaces a mode");
    assert_value(c, cfg, "cuda_graphs", "false");
    assert_value(c, cfg, "autotune", "max");
    ic_config_destroy(cfg);
    ic_ctx_destroy(c);
}

Test(options, unknown_names_list_the_valid_ones)
{
    ic_ctx *c = ict_ctx();
    ic_config *cfg = new_config(c);
    ict_assert_error(c, ic_config_set(cfg, "fuse", "1"), IC_EINVAL, "unknown option 'fuse'",
                     "options: fusion, threads", "autotune_budget", "ptxas");
    ict_assert_error(c, ic_config_set_mode(cfg, "turbo"), IC_EINVAL, "unknown mode 'turbo'",
                     "default, reduce-overhead, max-autotune, max-autotune-no-cudagraphs");
    ict_assert_error(c, ic_config_set_template(cfg, "inductor"), IC_EINVAL, "unknown template 'inductor'",
                     "triton, cpp_wrapper, cutlass, aten, cudagraphs, max_autotune, freezing, tma");
    char buf[64];
    ict_assert_error(c, ic_config_get(cfg, "nope", buf, sizeof buf), IC_EINVAL, "unknown option 'nope'");
    ict_assert_error(c, ic_config_get(cfg, "autotune", buf, 2), IC_ENOMEM, "autotune");
    ic_config_destroy(cfg);
    ic_ctx_destroy(c);
}

Test(options, bad_values_name_the_option_value_and_accepted_ones)
{
    static const struct { const char *name, *value, *accepted; } bad[] = {
        { "vector_width", "abc", "an integer from 0 to 64" },
        { "vector_width", "65", "an integer from 0 to 64" },
        { "vector_width", "-1", "an integer from 0 to 64" },
        { "vector_width", "", "an integer from 0 to 64" },
        { "vector_width", "4x", "an integer from 0 to 64" },
        { "stream_bytes", "-2", "an integer >= -1" },
        { "serial_threshold", "99999999999999999999", "an integer >= 0" },
        { "fusion", "2", "true, false" },
        { "fusion", "maybe", "true, false" },
        { "cache", "maybe", "auto, on, off" },
        { "wgmma", "on", "auto, off" },
        { "autotune", "gemm,bogus", "gemm, conv, pointwise" },
        { "autotune", "none,gemm", "a comma list" },
        { "autotune", "gemm,", "gemm" },
        { "autotune", "", "max, none" },
        { "autotune_budget", "-1", "a number of seconds >= 0" },
        { "autotune_budget", "nan", "a number" },
        { "autotune_budget", "inf", "a number" },
        { "ptx_opt_level", "4", "an integer from -1 to 3" },
    };
    ic_ctx *c = ict_ctx();
    ic_config *cfg = new_config(c);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char opt[96], val[96];
        snprintf(opt, sizeof opt, "option '%s'", bad[i].name);
        snprintf(val, sizeof val, "bad value '%s'", bad[i].value);
        ict_assert_error(c, ic_config_set(cfg, bad[i].name, bad[i].value), IC_EINVAL, opt, val,
                         bad[i].accepted);
        cr_assert(!ic_config_is_set(cfg, bad[i].name), "%s=%s left nothing", bad[i].name, bad[i].value);
    }
    /* accepted spellings, printed canonically */
    cr_assert_eq(ic_config_set(cfg, "fusion", "OFF"), IC_OK);
    assert_value(c, cfg, "fusion", "false");
    cr_assert_eq(ic_config_set(cfg, "autotune", "conv,gemm,exhaustive"), IC_OK);
    assert_value(c, cfg, "autotune", "gemm,conv,exhaustive");
    cr_assert_eq(ic_config_set(cfg, "autotune", "gemm,conv,pointwise,reduction,attention,coordesc"), IC_OK);
    assert_value(c, cfg, "autotune", "max");
    cr_assert_eq(ic_config_set(cfg, "autotune_budget", "2.5"), IC_OK);
    assert_value(c, cfg, "autotune_budget", "2.5");
    cr_assert_eq(ic_config_set(cfg, "autotune_budget", "0.1"), IC_OK);
    assert_value(c, cfg, "autotune_budget", "0.1");
    cr_assert_eq(ic_config_set(cfg, "autotune_budget", "1e3"), IC_OK);
    assert_value(c, cfg, "autotune_budget", "1000");
    cr_assert_eq(ic_config_set(cfg, "cache_dir", "/tmp/x"), IC_OK);
    assert_value(c, cfg, "cache_dir", "/tmp/x");
    ic_config_destroy(cfg);
    ic_ctx_destroy(c);
}

Test(options, priority_option_then_freezing_then_template)
{
    ic_ctx *c = ict_ctx();
    ic_config *cfg = new_config(c);
    cr_assert_eq(ic_config_set_template(cfg, "freezing"), IC_OK);
    assert_value(c, cfg, "freezing", "true");
    ic_config_set_freezing(cfg, false);
    assert_value(c, cfg, "freezing", "false");
    cr_assert_eq(ic_config_set(cfg, "freezing", "true"), IC_OK);
    assert_value(c, cfg, "freezing", "true");
    cr_assert(ic_config_is_explicit(cfg, "freezing") && !ic_config_is_explicit(cfg, "fusion"));
    ic_config_destroy(cfg);
    /* the template's options and its mode sit below explicit options, which they do not
     * conflict with (only an explicit mode does) */
    cfg = new_config(c);
    cr_assert_eq(ic_config_set_template(cfg, "max_autotune"), IC_OK);
    assert_value(c, cfg, "autotune", "max");
    assert_value(c, cfg, "cuda_graphs", "true");
    cr_assert_eq(ic_config_set(cfg, "cuda_graphs", "false"), IC_OK);
    cr_assert_eq(ic_config_set(cfg, "autotune", "gemm"), IC_OK);
    assert_value(c, cfg, "cuda_graphs", "false");
    assert_value(c, cfg, "autotune", "gemm");
    cr_assert_str_eq(ic_config_mode(cfg), "max-autotune");
    /* a new template replaces the old one's values */
    cr_assert_eq(ic_config_set_template(cfg, "cutlass"), IC_OK);
    assert_value(c, cfg, "autotune", "gemm");
    cr_assert_eq(ic_config_set(cfg, "autotune", "none"), IC_OK);
    assert_value(c, cfg, "autotune", "none");
    ic_config_destroy(cfg);
    cfg = new_config(c);
    cr_assert_eq(ic_config_set_template(cfg, "cutlass"), IC_OK);
    assert_value(c, cfg, "autotune", "gemm,conv");
    assert_value(c, cfg, "wgmma", "auto");
    ic_config_set_freezing(cfg, true);
    assert_value(c, cfg, "freezing", "true");
    ic_config_destroy(cfg);
    ic_ctx_destroy(c);
}

/* ---- config strings ---- */

Test(options, json_and_base64_configs)
{
    ic_ctx *c = ict_ctx();
    ic_config *cfg = new_config(c);
    /* base64 of {"template": "max_autotune"}, as GraphNet passes it */
    cr_assert_eq(ic_config_parse(cfg, "eyJ0ZW1wbGF0ZSI6ICJtYXhfYXV0b3R1bmUifQ=="), IC_OK, "%s", ic_last_error(c));
    cr_assert_str_eq(ic_config_template(cfg), "max_autotune");
    cr_assert_str_eq(ic_config_mode(cfg), "max-autotune");
    assert_value(c, cfg, "autotune", "max");
    ic_config_destroy(cfg);
    /* URL-safe base64 without padding of {"options": {"vector_width": 4, "autotune": ["gemm",
     * "conv"]}, "freezing": true} */
    cfg = new_config(c);
    cr_assert_eq(ic_config_parse(cfg, "eyJvcHRpb25zIjogeyJ2ZWN0b3Jfd2lkdGgiOiA0LCAiYXV0b3R1bmUiOiBbImdlbW0i"
                                      "LCAiY29udiJdfSwgImZyZWV6aW5nIjogdHJ1ZX0"),
                 IC_OK, "%s", ic_last_error(c));
    assert_value(c, cfg, "vector_width", "4");
    assert_value(c, cfg, "autotune", "gemm,conv");
    assert_value(c, cfg, "freezing", "true");
    ic_config_destroy(cfg);
    /* JSON with every key; the options' explicit freezing beats the flag */
    cfg = new_config(c);
    cr_assert_eq(ic_config_parse(cfg, "  {\"template\": \"freezing\", \"freezing\": true, "
                                      "\"options\": {\"freezing\": false, \"fusion\": false, "
                                      "\"autotune_budget\": 1.5, \"cache\": \"off\"}}"),
                 IC_OK, "%s", ic_last_error(c));
    assert_value(c, cfg, "freezing", "false");
    assert_value(c, cfg, "fusion", "false");
    assert_value(c, cfg, "autotune_budget", "1.5");
    assert_value(c, cfg, "cache", "off");
    ic_config_destroy(cfg);
    cfg = new_config(c);
    cr_assert_eq(ic_config_parse(cfg, "{\"mode\": \"reduce-overhead\"}"), IC_OK);
    assert_value(c, cfg, "cuda_graphs", "true");
    ic_config_destroy(cfg);
    ic_ctx_destroy(c);
}

Test(options, bad_configs_change_nothing)
{
    static const struct { const char *text, *part, *part2; } bad[] = {
        { "", "neither a JSON object nor base64", "max_autotune" },
        { "not base64!", "neither a JSON object nor base64", "'not base64!'" },
        { "aGVsbG8=", "neither a JSON object nor base64", "aGVsbG8=" }, /* "hello" */
        { "{\"template\": ", "not a JSON object", "" },
        { "[1]", "neither", "" },
        { "{\"templat\": \"tma\"}", "unknown key \"templat\"", "mode, template, options, freezing" },
        { "{\"template\": \"nope\"}", "unknown template 'nope'", "tma" },
        { "{\"template\": 3}", "\"template\" must be a string", "" },
        { "{\"mode\": \"fast\"}", "unknown mode 'fast'", "max-autotune" },
        { "{\"freezing\": 1}", "\"freezing\" must be true or false", "" },
        { "{\"options\": [1]}", "\"options\" must be an object", "" },
        { "{\"options\": {\"vector_width\": 4, \"fuse\": 1}}", "unknown option 'fuse'", "fusion" },
        { "{\"options\": {\"vector_width\": \"wide\"}}", "option 'vector_width'", "bad value 'wide'" },
        { "{\"options\": {\"vector_width\": null}}", "option 'vector_width'", "a bool, a number" },
        { "{\"mode\": \"max-autotune\", \"options\": {\"vector_width\": 4}}", "exclusive", "max-autotune" },
    };
    ic_ctx *c = ict_ctx();
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ic_config *cfg = new_config(c);
        cr_assert_eq(ic_config_set(cfg, "vector_width", "2"), IC_OK);
        ict_assert_error(c, ic_config_parse(cfg, bad[i].text), IC_EINVAL, bad[i].part, bad[i].part2);
        assert_value(c, cfg, "vector_width", "2");
        cr_assert_null(ic_config_template(cfg), "%s: no template kept", bad[i].text);
        cr_assert_str_eq(ic_config_mode(cfg), "default");
        ic_config_destroy(cfg);
    }
    ic_ctx_destroy(c);
}

/* ---- applying ---- */

Test(options, apply_to_both_structs_and_the_switches)
{
    ic_ctx *c = ict_ctx();
    ic_config *cfg = new_config(c);
    cr_assert_eq(ic_config_set_template(cfg, "max_autotune"), IC_OK);
    static const char *const set[][2] = {
        { "fusion", "false" }, { "threads", "3" }, { "vector_width", "8" },
        { "serial_threshold", "5000000000" }, { "stream_bytes", "-1" }, { "prefetch_bytes", "256" },
        { "max_variants", "-1" }, { "allow_tf32", "true" }, { "wgmma", "off" },
        { "ptx_opt_level", "2" }, { "autotune_budget", "7.5" }, { "cache", "off" },
        { "debug", "on" }, { "iconv", "false" }, { "compile_threads", "2" },
        { "cache_dir", "/tmp/ic-cache-test" }, { "autotune_log", "true" },
    };
    for (size_t i = 0; i < sizeof set / sizeof set[0]; i++)
        cr_assert_eq(ic_config_set(cfg, set[i][0], set[i][1]), IC_OK, "%s: %s", set[i][0], ic_last_error(c));
    ic_compile_options o;
    ic_compile_options_init(&o);
    o.debug_dir = "keep";
    ic_config_apply_compile(cfg, &o);
    cr_assert(o.fusion == 0 && o.threads == 3 && o.vector_width == 8 && o.serial_threshold == 5000000000LL &&
              o.stream_bytes == -1 && o.prefetch_bytes == 256 && o.max_variants == -1 &&
              o.autotune == IC_TUNE_MAX && o.autotune_budget_s == 7.5 && o.cache == -1 && o.debug == 1 &&
              o.freezing == 0);
    cr_assert_str_eq(o.mode, "default", "the mode goes in through its options");
    cr_assert_str_eq(o.debug_dir, "keep", "fields no option names stay");
    ic_cuda_options g;
    ic_cuda_options_init(&g);
    ic_config_apply_cuda(cfg, &g);
    cr_assert(g.no_fusion && g.allow_tf32 && g.wgmma == -1 && g.ptx_opt_level == 2 && g.max_variants == -1 &&
              g.autotune == IC_TUNE_MAX && g.autotune_budget_s == 7.5 && g.cache == -1 && g.debug == 1);
    cr_assert_eq(g.mode, IC_CUDA_REDUCE_OVERHEAD, "max_autotune's CUDA graphs");
    ic_switches sw;
    ic_switches_init(&sw);
    sw.dump = "fused";
    ic_config_apply_switches(cfg, &sw);
    cr_assert(sw.no_fusion && sw.no_iconv && sw.compile_threads == 2 && sw.autotune_log && !sw.no_cache);
    cr_assert_str_eq(sw.cache_dir, "/tmp/ic-cache-test");
    cr_assert_str_eq(sw.dump, "fused", "switches no option sets stay");
    /* the context takes them */
    cr_assert_eq(ic_ctx_set_switches(c, &sw), IC_OK);
    ic_config_destroy(cfg);
    /* nothing set: nothing written */
    cfg = new_config(c);
    ic_compile_options o2;
    memset(&o2, 0x5a, sizeof o2);
    ic_compile_options o3 = o2;
    ic_config_apply_compile(cfg, &o2);
    cr_assert(memcmp(&o2, &o3, sizeof o2) == 0, "an empty config writes nothing");
    ic_config_set_freezing(cfg, true);
    ic_config_apply_cuda(cfg, &g);
    cr_assert(g.freezing);
    ic_config_destroy(cfg);
    ic_ctx_destroy(c);
}

/* ---- cache keys ---- */

static char *cfg_key(ic_config *cfg, unsigned backends)
{
    size_t n = ic_config_key(cfg, backends, NULL, 0);
    char *k = malloc(n + 1);
    cr_assert_eq(ic_config_key(cfg, backends, k, n + 1), n);
    return k;
}

Test(options, cache_key_text_follows_code_changing_options_only)
{
    ic_ctx *c = ict_ctx();
    ic_config *cfg = new_config(c);
    char *cpu0 = cfg_key(cfg, IC_OPTION_CPU), *gpu0 = cfg_key(cfg, IC_OPTION_CUDA);
    cr_assert(strstr(cpu0, "vector_width=0;") && strstr(cpu0, "fusion=true;") && !strstr(cpu0, "allow_tf32"),
              "%s", cpu0);
    cr_assert(strstr(gpu0, "allow_tf32=false;") && strstr(gpu0, "wgmma=auto;") && !strstr(gpu0, "vector_width"),
              "%s", gpu0);
    /* not code-changing: the same text */
    cr_assert_eq(ic_config_set(cfg, "max_variants", "3"), IC_OK);
    cr_assert_eq(ic_config_set(cfg, "autotune_budget", "9"), IC_OK);
    cr_assert_eq(ic_config_set(cfg, "cache", "off"), IC_OK);
    char *cpu1 = cfg_key(cfg, IC_OPTION_CPU);
    cr_assert_str_eq(cpu1, cpu0);
    /* code-changing: another text; a GPU option leaves the CPU key alone */
    cr_assert_eq(ic_config_set(cfg, "allow_tf32", "true"), IC_OK);
    char *cpu2 = cfg_key(cfg, IC_OPTION_CPU), *gpu2 = cfg_key(cfg, IC_OPTION_CUDA);
    cr_assert_str_eq(cpu2, cpu0);
    cr_assert_str_neq(gpu2, gpu0);
    cr_assert_eq(ic_config_set(cfg, "vector_width", "8"), IC_OK);
    char *cpu3 = cfg_key(cfg, IC_OPTION_CPU);
    cr_assert_str_neq(cpu3, cpu0);
    cr_assert(strstr(cpu3, "vector_width=8;"), "%s", cpu3);
    /* the structs give the same text as the config they were applied from */
    ic_compile_options o;
    ic_compile_options_init(&o);
    ic_config_apply_compile(cfg, &o);
    char buf[1024];
    cr_assert_lt(ic_compile_options_key(&o, NULL, buf, sizeof buf), sizeof buf);
    cr_assert_str_eq(buf, cpu3);
    cr_assert_eq(ic_config_set(cfg, "iconv", "false"), IC_OK);
    char *gpu3 = cfg_key(cfg, IC_OPTION_CUDA);
    ic_cuda_options g;
    ic_cuda_options_init(&g);
    ic_config_apply_cuda(cfg, &g);
    ic_switches sw;
    ic_switches_init(&sw);
    ic_config_apply_switches(cfg, &sw);
    ic_cuda_options_key(&g, &sw, buf, sizeof buf);
    cr_assert_str_eq(buf, gpu3);
    /* defaults from NULL structs match an empty config */
    ic_compile_options_key(NULL, NULL, buf, sizeof buf);
    cr_assert_str_eq(buf, cpu0);
    ic_cuda_options_key(NULL, NULL, buf, sizeof buf);
    cr_assert_str_eq(buf, gpu0);
    /* truncation is snprintf's */
    size_t need = ic_config_key(cfg, IC_OPTION_BOTH, buf, 8);
    cr_assert(need > 8 && strlen(buf) == 7);
    free(cpu0), free(gpu0), free(cpu1), free(cpu2), free(gpu2), free(cpu3), free(gpu3);
    ic_config_destroy(cfg);
    ic_ctx_destroy(c);
}

/* ---- ic_compile takes every mode ---- */

Test(options, ic_compile_accepts_the_modes)
{
    const char *dir = ict_tmpdir();
    setenv("IC_CACHE_DIR", dir, 1);
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "m");
    ic_value a = ict_input(g, "a", IC_F32, "4,8");
    ic_value y;
    cr_assert_eq(ic_graph_binary(g, "y", IC_OP_ADD, ic_val(a), ic_val(a), &y), IC_OK, "%s", ic_last_error(c));
    cr_assert_eq(ic_graph_add_output(g, y), IC_OK, "%s", ic_last_error(c));
    for (int i = 0; i < ic_mode_count(); i++) {
        ic_compile_options o;
        ic_compile_options_init(&o);
        o.mode = ic_mode_get(i)->name;
        ic_compiled *cc = NULL;
        cr_assert_eq(ic_compile(c, g, &o, &cc), IC_OK, "mode %s: %s", o.mode, ic_last_error(c));
        float x[32], out[32];
        for (int k = 0; k < 32; k++)
            x[k] = (float)k;
        ic_tensor t, r;
        ic_tensor_init(&t, IC_F32, 2, (int64_t[]){ 4, 8 }, x);
        ic_tensor_init(&r, IC_F32, 2, (int64_t[]){ 4, 8 }, out);
        cr_assert_eq(ic_run(cc, 1, &t, 1, &r), IC_OK, "%s", ic_last_error(c));
        for (int k = 0; k < 32; k++)
            cr_assert_eq(out[k], 2.0f * (float)k);
        ic_compiled_destroy(cc);
    }
    ic_compile_options o;
    ic_compile_options_init(&o);
    o.mode = "max_autotune";
    ic_compiled *cc = NULL;
    ict_assert_error(c, ic_compile(c, g, &o, &cc), IC_EINVAL, "unknown compile mode 'max_autotune'",
                     "default, reduce-overhead, max-autotune, max-autotune-no-cudagraphs");
    cr_assert_null(cc);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
    ict_rmtree(dir);
}

/* ---- the GPU options reach the code: wgmma=off keeps bf16 GEMMs off the warpgroup MMAs ---- */

static char *cuda_ptx(ic_ctx *c, const ic_graph *g, const ic_cuda_options *o)
{
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    cr_assert_eq(ic_cuda_compile_dump(c, g, o, NULL, "ptx", f), IC_OK, "%s", ic_last_error(c));
    fclose(f);
    return text;
}

Test(options, wgmma_option_reaches_the_ptx)
{
    const char *dir = ict_tmpdir();
    setenv("IC_CACHE_DIR", dir, 1);
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "mm");
    ic_value a = ict_input(g, "a", IC_BF16, "2048,1024"), b = ict_input(g, "b", IC_BF16, "1024,2048"), y;
    cr_assert_eq(ic_graph_binary(g, "y", IC_OP_MATMUL, ic_val(a), ic_val(b), &y), IC_OK, "%s", ic_last_error(c));
    cr_assert_eq(ic_graph_add_output(g, y), IC_OK);
    ic_config *cfg = new_config(c);
    ic_cuda_options o;
    ic_cuda_options_init(&o);
    ic_config_apply_cuda(cfg, &o);
    char *on = cuda_ptx(c, g, &o);
    cr_assert(strstr(on, "wgmma.mma_async"), "the default uses wgmma on sm_90");
    cr_assert_eq(ic_config_set(cfg, "wgmma", "off"), IC_OK);
    ic_config_apply_cuda(cfg, &o);
    cr_assert_eq(o.wgmma, -1);
    char *off = cuda_ptx(c, g, &o);
    cr_assert(!strstr(off, "wgmma.mma_async") && strstr(off, "mma.sync"), "wgmma=off: mma.sync only");
    free(on);
    free(off);
    ic_config_destroy(cfg);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
    ict_rmtree(dir);
}
