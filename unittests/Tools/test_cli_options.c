/* test_cli_options.c - ic-run's configuration flags as a user runs them: --list-options and
 * --list-mode-options (from the registry, no graph needed), --template, --option (repeatable),
 * --config (JSON and base64, as GraphNet passes it), --autotune-budget, their priority, the
 * notes for what has no effect on the CPU, --json's "options" and "autotune" objects, and the
 * usage errors (exit 1, one line naming the flag, the value and what is valid). */
#define _GNU_SOURCE
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ic/options.h"
#include "testutil.h"
#include "cli_run.h"

#define FAST "--iters 2 --warmup 0 --no-compare"

/* y = x * 2 + 1 with x of [4, 6]. */
static const char small_graph[] =
    "{\"ic_graph\": 1, \"name\": \"small\",\n"
    " \"inputs\": [{\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [4, 6]}],\n"
    " \"nodes\": [{\"name\": \"t\", \"op\": \"mul\", \"inputs\": [\"x\", 2]},\n"
    "           {\"name\": \"y\", \"op\": \"add\", \"inputs\": [\"t\", 1]}],\n"
    " \"outputs\": [\"y\"]}\n";

typedef struct {
    char dir[4096], graph[4200], env[4300];
} fixture;

/* A temporary folder holding the graph; compiles keep their cache in it. */
static void fixture_init(fixture *f)
{
    snprintf(f->dir, sizeof f->dir, "%s", ict_tmpdir());
    snprintf(f->graph, sizeof f->graph, "%s/small.json", f->dir);
    snprintf(f->env, sizeof f->env, "IC_CACHE_DIR='%s/cache'", f->dir);
    write_text(f->graph, small_graph);
}

static run_result run_args(const fixture *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static run_result run_args(const fixture *f, const char *fmt, ...)
{
    char args[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    return run_tool_env(f->dir, f->env, "ic-run", args);
}

static json_t *parse_json(const char *text)
{
    json_error_t err;
    json_t *j = json_loads(text, 0, &err);
    cr_assert(j && json_is_object(j), "--json output is not a JSON object (%s):\n%s", err.text, text);
    return j;
}

static json_t *field(json_t *o, const char *key, json_type type, const char *what)
{
    json_t *v = json_object_get(o, key);
    cr_assert(v, "%s: no field '%s'", what, key);
    cr_assert_eq(json_typeof(v), type, "%s: field '%s' has JSON type %d, want %d", what, key,
                 (int)json_typeof(v), (int)type);
    return v;
}

/* Runs with --json --check and returns the report (stderr must be `err`, "" for none). */
static json_t *run_json(const fixture *f, const char *flags, const char *err)
{
    run_result r = run_args(f, "'%s' %s --json --check " FAST, f->graph, flags);
    assert_ok(r, flags);
    if (err)
        cr_assert_str_eq(r.err, err, "%s: stderr", flags);
    json_t *j = parse_json(r.out);
    cr_assert(json_is_true(json_object_get(j, "check")), "%s: outputs check", flags);
    result_free(&r);
    return j;
}

static json_int_t opt_int(json_t *j, const char *name)
{
    return json_integer_value(field(field(j, "options", JSON_OBJECT, "top"), name, JSON_INTEGER, "options"));
}

static bool opt_bool(json_t *j, const char *name)
{
    json_t *v = json_object_get(field(j, "options", JSON_OBJECT, "top"), name);
    cr_assert(json_is_boolean(v), "options.%s should be a bool", name);
    return json_is_true(v);
}

/* ---- listing ---- */

Test(cli_options, list_options_prints_the_registry)
{
    fixture f;
    fixture_init(&f);
    run_result r = run_args(&f, "--list-options");
    assert_ok(r, "--list-options");
    cr_assert_str_empty(r.err, "%s", r.err);
    static const char *head[] = { "option", "type", "default", "environment", "code", "doc",
                                  "accepted values:" };
    for (size_t i = 0; i < sizeof head / sizeof head[0]; i++)
        cr_assert(strstr(r.out, head[i]), "header %s:\n%s", head[i], r.out);
    static const char *types[] = { "bool", "int", "float", "enum", "flags", "string" };
    for (int i = 0; i < ic_option_count(); i++) {
        const ic_option_info *o = ic_option_get(i);
        char line[512];
        snprintf(line, sizeof line, "\n%s ", o->name);
        const char *p = strstr(r.out, line);
        cr_assert(p, "no line for %s:\n%s", o->name, r.out);
        const char *end = strchr(p + 1, '\n');
        snprintf(line, sizeof line, "%.*s", (int)(end - p - 1), p + 1);
        cr_assert(strstr(line, types[o->type]) && strstr(line, *o->def ? o->def : "\"\"") &&
                      strstr(line, o->env ? o->env : " - ") && strstr(line, o->code ? " yes " : " no ") &&
                      strstr(line, o->doc),
                  "the line of %s: %s", o->name, line);
        cr_assert(strstr(r.out, o->values), "accepted values of %s", o->name);
    }
    result_free(&r);
    ict_rmtree(f.dir);
}

Test(cli_options, list_mode_options)
{
    fixture f;
    fixture_init(&f);
    run_result r = run_args(&f, "--list-mode-options");
    assert_ok(r, "--list-mode-options");
    static const char *lines[] = {
        "default                     {}",
        "reduce-overhead             {cuda_graphs=true}",
        "max-autotune                {cuda_graphs=true, autotune=max}",
        "max-autotune-no-cudagraphs  {autotune=max}",
        "no effect on the CPU",
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
        cr_assert(strstr(r.out, lines[i]), "%s:\n%s", lines[i], r.out);
    result_free(&r);
    static const char *one[][2] = {
        { "max-autotune", "cuda_graphs=true\nautotune=max\n" },
        { "max-autotune-no-cudagraphs", "autotune=max\n" },
        { "reduce-overhead", "cuda_graphs=true\n" },
        { "default", "# default sets no options\n" },
    };
    for (int i = 0; i < 4; i++) {
        r = run_args(&f, "--list-mode-options %s", one[i][0]);
        assert_ok(r, one[i][0]);
        cr_assert_str_eq(r.out, one[i][1], "--list-mode-options %s", one[i][0]);
        result_free(&r);
    }
    r = run_args(&f, "--list-mode-options '%s'", f.graph);
    assert_ok(r, "--list-mode-options GRAPH.json: the graph is not a mode");
    cr_assert(strstr(r.out, "max-autotune-no-cudagraphs  {autotune=max}"), "%s", r.out);
    result_free(&r);
    r = run_args(&f, "--list-mode-options=max-autotune");
    assert_ok(r, "--list-mode-options=");
    cr_assert_str_eq(r.out, one[0][1]);
    result_free(&r);
    ict_rmtree(f.dir);
}

/* ---- modes, templates, options, configs ---- */

Test(cli_options, modes_on_the_cpu)
{
    fixture f;
    fixture_init(&f);
    json_t *j = run_json(&f, "--mode max-autotune-no-cudagraphs", "");
    cr_assert_str_eq(json_string_value(field(j, "mode", JSON_STRING, "top")), "max-autotune-no-cudagraphs");
    cr_assert_str_eq(json_string_value(field(j, "mode_used", JSON_STRING, "top")), "max-autotune-no-cudagraphs");
    cr_assert(json_is_null(field(j, "template", JSON_NULL, "top")));
    json_decref(j);
    j = run_json(&f, "--mode max-autotune",
                 "ic-run: note: --mode max-autotune: CUDA graphs have no effect on --device cpu (ran as "
                 "--mode max-autotune-no-cudagraphs)\n");
    cr_assert_str_eq(json_string_value(field(j, "mode_used", JSON_STRING, "top")), "max-autotune-no-cudagraphs");
    json_decref(j);
    ict_rmtree(f.dir);
}

Test(cli_options, templates)
{
    fixture f;
    fixture_init(&f);
    json_t *j = run_json(&f, "--template max_autotune",
                         "ic-run: note: the template's mode max-autotune: CUDA graphs have no effect on "
                         "--device cpu (ran as --mode max-autotune-no-cudagraphs)\n");
    cr_assert_str_eq(json_string_value(field(j, "template", JSON_STRING, "top")), "max_autotune");
    cr_assert_str_eq(json_string_value(field(j, "mode", JSON_STRING, "top")), "max-autotune");
    json_decref(j);
    j = run_json(&f, "--template freezing", "");
    cr_assert(opt_bool(j, "freezing"), "template freezing");
    cr_assert(json_is_true(field(j, "freezing", JSON_TRUE, "top")));
    json_decref(j);
    static const char *quiet[] = { "triton", "cpp_wrapper", "cutlass", "aten", "tma" };
    for (int i = 0; i < 5; i++) {
        char flags[64];
        snprintf(flags, sizeof flags, "--template %s", quiet[i]);
        j = run_json(&f, flags, "");
        cr_assert_str_eq(json_string_value(field(j, "mode", JSON_STRING, "top")), "default", "%s", quiet[i]);
        cr_assert_str_eq(json_string_value(field(j, "template", JSON_STRING, "top")), quiet[i]);
        json_decref(j);
    }
    j = run_json(&f, "--template cudagraphs",
                 "ic-run: note: the template's mode reduce-overhead: CUDA graphs have no effect on "
                 "--device cpu (ran as --mode default)\n");
    cr_assert_str_eq(json_string_value(field(j, "mode", JSON_STRING, "top")), "reduce-overhead");
    cr_assert_str_eq(json_string_value(field(j, "mode_used", JSON_STRING, "top")), "default");
    json_decref(j);
    ict_rmtree(f.dir);
}

Test(cli_options, options_and_their_priority)
{
    fixture f;
    fixture_init(&f);
    json_t *j = run_json(&f, "--option vector_width=4 --option stream_bytes=-1 --option=prefetch_bytes=128", "");
    cr_assert_eq(opt_int(j, "vector_width"), 4);
    cr_assert_eq(opt_int(j, "stream_bytes"), -1);
    cr_assert_eq(opt_int(j, "prefetch_bytes"), 128);
    cr_assert_eq(opt_int(j, "serial_threshold"), 0, "the others at their defaults");
    cr_assert(opt_bool(j, "fusion") && !opt_bool(j, "freezing"));
    cr_assert_null(json_object_get(field(j, "options", JSON_OBJECT, "top"), "allow_tf32"), "cpu options only");
    cr_assert_null(json_object_get(field(j, "options", JSON_OBJECT, "top"), "max_variants"), "code-changing only");
    json_decref(j);
    /* the last of a repeated option wins */
    j = run_json(&f, "--option vector_width=4 --option vector_width=1", "");
    cr_assert_eq(opt_int(j, "vector_width"), 1);
    json_decref(j);
    /* option > freezing > template */
    j = run_json(&f, "--template freezing --option freezing=false", "");
    cr_assert(!opt_bool(j, "freezing"));
    json_decref(j);
    j = run_json(&f, "--freezing --option freezing=0", "");
    cr_assert(!opt_bool(j, "freezing"));
    json_decref(j);
    j = run_json(&f, "--freezing --template aten", "");
    cr_assert(opt_bool(j, "freezing"));
    json_decref(j);
    /* --threads is the old spelling of option threads and beats it */
    j = run_json(&f, "--option threads=2 --threads 1", "");
    cr_assert_eq(opt_int(j, "threads"), 1);
    json_decref(j);
    /* a template's mode does not conflict with options (only --mode does) */
    j = run_json(&f, "--template max_autotune --option cuda_graphs=false --option fusion=false",
                 "ic-run: note: option cuda_graphs has no effect on --device cpu (it applies to --device cuda)\n");
    cr_assert(!opt_bool(j, "fusion"));
    cr_assert_str_eq(json_string_value(field(j, "mode_used", JSON_STRING, "top")), "max-autotune-no-cudagraphs");
    json_t *cmp = field(field(j, "backends", JSON_OBJECT, "top"), "compiled", JSON_OBJECT, "backends");
    cr_assert_eq(json_integer_value(field(cmp, "kernels", JSON_INTEGER, "compiled")), 2,
                 "fusion=false: one kernel per op");
    json_decref(j);
    ict_rmtree(f.dir);
}

Test(cli_options, config_strings)
{
    fixture f;
    fixture_init(&f);
    const char *note = "ic-run: note: the template's mode max-autotune: CUDA graphs have no effect on "
                       "--device cpu (ran as --mode max-autotune-no-cudagraphs)\n";
    /* base64 of {"template": "max_autotune"}, as GraphNet passes it, and the JSON itself */
    json_t *j = run_json(&f, "--config eyJ0ZW1wbGF0ZSI6ICJtYXhfYXV0b3R1bmUifQ==", note);
    cr_assert_str_eq(json_string_value(field(j, "template", JSON_STRING, "top")), "max_autotune");
    json_decref(j);
    j = run_json(&f, "--config '{\"template\": \"max_autotune\"}'", note);
    cr_assert_str_eq(json_string_value(field(j, "mode", JSON_STRING, "top")), "max-autotune");
    json_decref(j);
    j = run_json(&f, "--config '{\"options\": {\"vector_width\": 8, \"freezing\": true}}'", "");
    cr_assert_eq(opt_int(j, "vector_width"), 8);
    cr_assert(opt_bool(j, "freezing"));
    json_decref(j);
    /* the flags apply on top of the config */
    j = run_json(&f, "--config '{\"options\": {\"vector_width\": 8}}' --option vector_width=2", "");
    cr_assert_eq(opt_int(j, "vector_width"), 2);
    json_decref(j);
    j = run_json(&f, "--config '{\"template\": \"freezing\", \"freezing\": false}'", "");
    cr_assert(!opt_bool(j, "freezing"), "the config's freezing flag beats its template");
    json_decref(j);
    ict_rmtree(f.dir);
}

Test(cli_options, json_autotune_object)
{
    fixture f;
    fixture_init(&f);
    json_t *j = run_json(&f, "--mode max-autotune-no-cudagraphs --autotune-budget 5", "");
    json_t *a = field(j, "autotune", JSON_OBJECT, "top");
    static const char *ints[] = { "kernels", "tuned", "record_hits", "candidates", "replaced",
                                  "code_hits", "code_misses" };
    for (int i = 0; i < 7; i++)
        cr_assert_geq(json_integer_value(field(a, ints[i], JSON_INTEGER, "autotune")), 0, "%s", ints[i]);
    static const char *reals[] = { "bench_s", "compile_s" };
    for (int i = 0; i < 2; i++)
        cr_assert_geq(json_real_value(field(a, reals[i], JSON_REAL, "autotune")), 0.0, "%s", reals[i]);
    cr_assert_eq(json_object_size(a), 9, "exactly the stats' fields");
    json_decref(j);
    /* the reference executor has nothing tuned: null */
    run_result r = run_args(&f, "'%s' --backend ref --json", f.graph);
    assert_ok(r, "--backend ref --json");
    j = parse_json(r.out);
    cr_assert(json_is_null(field(j, "autotune", JSON_NULL, "top")));
    json_decref(j);
    result_free(&r);
    ict_rmtree(f.dir);
}

/* ---- usage errors ---- */

Test(cli_options, usage_errors)
{
    fixture f;
    fixture_init(&f);
    static const struct { const char *fmt, *part, *part2; } cases[] = {
        { "'%s' --option", "--option", "needs a value" },
        { "'%s' --option vector_width", "--option expects NAME=VALUE", "'vector_width'" },
        { "'%s' --option =3", "--option expects NAME=VALUE", "'=3'" },
        { "'%s' --option fuse=1", "unknown option 'fuse'", "options: fusion, threads" },
        { "'%s' --option vector_width=x", "option 'vector_width': bad value 'x'", "an integer from 0 to 64" },
        { "'%s' --option autotune=gemm,fast", "bad value 'gemm,fast'", "gemm, conv, pointwise" },
        { "'%s' --mode max-autotune --option vector_width=4", "--option vector_width=4",
          "mode 'max-autotune' and options are exclusive" },
        { "'%s' --template", "--template", "needs a value" },
        { "'%s' --template inductor", "--template: unknown template 'inductor'",
          "triton, cpp_wrapper, cutlass, aten, cudagraphs, max_autotune, freezing, tma" },
        { "'%s' --config", "--config", "needs a value" },
        { "'%s' --config 'not base64!'", "--config", "neither a JSON object nor base64" },
        { "'%s' --config '{\"mode\": \"fast\"}'", "unknown mode 'fast'", "max-autotune-no-cudagraphs" },
        { "'%s' --config '{\"optons\": {}}'", "unknown key \"optons\"", "mode, template, options, freezing" },
        { "'%s' --config '{\"options\": {\"vector_width\": 99}}'", "bad value '99'", "vector_width" },
        { "'%s' --autotune-budget", "--autotune-budget", "needs a value" },
        { "'%s' --autotune-budget -1", "--autotune-budget", "'-1'" },
        { "'%s' --autotune-budget 1s", "--autotune-budget", "'1s'" },
        { "'%s' --autotune-budget nan", "--autotune-budget", "'nan'" },
        { "--list-mode-options turbo", "unknown mode 'turbo'", "reduce-overhead" },
        { "'%s' --mode turbo", "unknown mode 'turbo'", "default, reduce-overhead, max-autotune" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[8192], what[8300];
        snprintf(args, sizeof args, cases[i].fmt, f.graph);
        snprintf(what, sizeof what, "ic-run %s", args);
        run_result r = run_tool_env(f.dir, f.env, "ic-run", args);
        assert_fails(r, "ic-run", what, cases[i].part, cases[i].part2);
        cr_assert_str_empty(r.out, "%s: stdout: %s", what, r.out);
        result_free(&r);
    }
    ict_rmtree(f.dir);
}

Test(cli_options, help_names_the_new_flags)
{
    fixture f;
    fixture_init(&f);
    run_result r = run_args(&f, "-h");
    assert_ok(r, "-h");
    static const char *want[] = { "--template NAME", "--option NAME=VALUE", "--config STR",
                                  "--autotune-budget S", "--list-options", "--list-mode-options [MODE]",
                                  "max_autotune", "base64", "CUDA graphs have no effect on" };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        cr_assert(strstr(r.out, want[i]), "-h should mention %s:\n%s", want[i], r.out);
    cr_assert(!strstr(r.out, "not implemented"), "--mode is implemented:\n%s", r.out);
    result_free(&r);
    ict_rmtree(f.dir);
}

/* ---- the documents follow the registry ---- */

Test(cli_options, docs_list_every_option_and_variable)
{
    char *doc = read_text(src("docs/options.md")), *readme = read_text(src("README.md"));
    cr_assert(doc && readme, "docs/options.md and README.md are readable");
    for (int i = 0; i < ic_option_count(); i++) {
        const ic_option_info *o = ic_option_get(i);
        char row[128];
        snprintf(row, sizeof row, "\n| `%s` | %s |", o->name,
                 (const char *[]){ "bool", "int", "float", "enum", "flags", "string" }[o->type]);
        cr_assert(strstr(doc, row), "docs/options.md has no row '%s'", row + 1);
        if (o->env) {
            snprintf(row, sizeof row, "\n| `%s` |", o->env);
            cr_assert(strstr(readme, row), "README's environment table has no row for %s", o->env);
        }
    }
    for (int i = 0; i < ic_template_count(); i++) {
        char row[128];
        snprintf(row, sizeof row, "\n| `%s` | %s |", ic_template_get(i)->name, ic_template_get(i)->mode);
        cr_assert(strstr(doc, row), "docs/options.md has no template row '%s'", row + 1);
    }
    free(doc);
    free(readme);
}

/* Options that live in the context reach it: dump prints a stage, log_level the debug log. */
Test(cli_options, switch_options_reach_the_context)
{
    fixture f;
    fixture_init(&f);
    run_result r = run_args(&f, "'%s' --option dump=fused " FAST, f.graph);
    assert_ok(r, "--option dump=fused");
    cr_assert(strstr(r.err, "== after fused =="), "IC_DUMP's banner on stderr:\n%s", r.err);
    result_free(&r);
    r = run_args(&f, "'%s' --option fusion=false " FAST, f.graph);
    assert_ok(r, "--option fusion=false");
    cr_assert(strstr(r.out, "note: option fusion is false: the compiled backend builds one kernel per op"),
              "%s", r.out);
    result_free(&r);
    ict_rmtree(f.dir);
}
