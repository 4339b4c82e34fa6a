/* test_cli_device.c - ic-run --device / --mode and ic-dump --stage sass as a user runs them.
 *
 * --device cuda is checked three ways: against whatever this machine has (no driver: exit 1
 * with "no CUDA driver found"; a driver and a GPU: --check passes; the test itself asks the
 * driver which case holds), against a driver path that does not exist (IC_CUDA_DRIVER), and
 * end to end against fake_libcuda.c, a stand-in driver built here whose kernels do nothing
 * and which logs every launch: that shows the mode that ran (kernel launches vs one captured
 * CUDA graph replayed), the copies and the report, and --check's mismatch exit (2), on any
 * machine with a C compiler. The sass stage is checked against the real toolkit when it is
 * installed (or its absence message when not) and through stand-in ptxas/cuobjdump scripts
 * (IC_PTXAS) for the plumbing and the error paths. No timings are asserted. */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "testutil.h"
#include "cli_run.h"

#define FAST "--iters 4 --warmup 1"

/* y = (x + b) * 0: every output element is 0 (or -0), which is what the fake driver's
 * never-written, zeroed "device memory" holds, so --check passes there. x [5, 7], b [1, 7]. */
static const char zero_graph[] =
    "{\"ic_graph\": 1, \"name\": \"zero\",\n"
    " \"inputs\": [{\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [5, 7]},\n"
    "            {\"name\": \"b\", \"dtype\": \"f32\", \"shape\": [1, 7]}],\n"
    " \"nodes\": [{\"name\": \"t\", \"op\": \"add\", \"inputs\": [\"x\", \"b\"]},\n"
    "           {\"name\": \"y\", \"op\": \"mul\", \"inputs\": [\"t\", 0]}],\n"
    " \"outputs\": [\"y\"]}\n";

/* y = x + 1: never 0 for x in [-1, 1) except at -1, so the fake driver's zeros mismatch. */
static const char plus_one_graph[] =
    "{\"ic_graph\": 1, \"name\": \"plus_one\",\n"
    " \"inputs\": [{\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [4, 6]}],\n"
    " \"nodes\": [{\"name\": \"y\", \"op\": \"add\", \"inputs\": [\"x\", 1]}],\n"
    " \"outputs\": [\"y\"]}\n";

/* Bytes the zero graph moves: x 35 + b 7 floats in, y 35 floats out. */
enum { ZERO_IN = (35 + 7) * 4, ZERO_OUT = 35 * 4 };

/* ---- helpers ---- */

typedef struct {
    char dir[4096];
    char graph[4200];
} fixture;

static void fixture_init(fixture *f, const char *text, const char *name)
{
    snprintf(f->dir, sizeof f->dir, "%s", ict_tmpdir());
    snprintf(f->graph, sizeof f->graph, "%s/%s", f->dir, name);
    write_text(f->graph, text);
}

static int count_lines_with(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; p && *p;) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        const char *hit = strstr(p, needle);
        n += hit && hit < p + len;
        p = e ? e + 1 : NULL;
    }
    return n;
}

static int count_lines_starting(const char *text, const char *prefix)
{
    int n = 0;
    size_t k = strlen(prefix);
    for (const char *p = text; p && *p;) {
        n += strncmp(p, prefix, k) == 0;
        p = strchr(p, '\n');
        p = p ? p + 1 : NULL;
    }
    return n;
}

static json_t *parse_json(const char *text)
{
    json_error_t err;
    json_t *j = json_loads(text, 0, &err);
    cr_assert(j && json_is_object(j), "--json output is not a JSON object (line %d: %s):\n%s",
              err.line, err.text, text);
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

static void make_exe(const char *path, const char *text)
{
    write_text(path, text);
    cr_assert_eq(chmod(path, 0755), 0, "chmod %s", path);
}

/* Builds fake_libcuda.c into dir/libcuda-fake.so (skips the test, visibly, without a C
 * compiler: e.g. on the GPU machine). */
static void build_fake_driver(const char *dir, char *so, size_t n)
{
    snprintf(so, n, "%s/libcuda-fake.so", dir);
    if (system("command -v cc >/dev/null 2>&1") != 0)
        cr_skip_test("no C compiler (cc) to build the stand-in CUDA driver");
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "cc -shared -fPIC -O1 -o '%s' '%s'", so,
             src("unittests/Tools/fake_libcuda.c"));
    cr_assert_eq(system(cmd), 0, "building the stand-in driver failed: %s", cmd);
}

/* "IC_CUDA_DRIVER='so' IC_FAKE_CUDA_LOG='dir/cuda.log' IC_CACHE_DIR='dir/cache'" (the log
 * emptied first; the compiled code cached in the test's folder). */
static const char *fake_env(const char *dir, const char *so, char *log, size_t n)
{
    static char env[16384];
    snprintf(log, n, "%s/cuda.log", dir);
    unlink(log);
    snprintf(env, sizeof env, "IC_CUDA_DRIVER='%s' IC_FAKE_CUDA_LOG='%s' IC_CACHE_DIR='%s/cache'", so, log, dir);
    return env;
}

/* The fake driver's log ("" when nothing was logged); caller frees. */
static char *read_log(const char *log)
{
    char *s = read_text(log);
    return s ? s : strdup("");
}

/* A failure through the stand-in that names a missing entry point points at the fixture. */
static void assert_fake_ok(const run_result *r, const char *what)
{
    cr_assert(!strstr(r->err, "no usable CUDA driver"),
              "%s: the runtime needs an entry point the stand-in lacks: add it to "
              "unittests/Tools/fake_libcuda.c: %s", what, r->err);
    cr_assert_eq(r->rc, 0, "%s: exit %d, want 0; stderr: %s", what, r->rc, r->err);
}

/* ---- the machine as it is ---- */

/* What this machine has, asked of the driver directly: -1 no driver, else the GPU count. */
static int gpus_here(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return -1;
    int (*init)(unsigned) = (int (*)(unsigned))dlsym(lib, "cuInit");
    int (*count)(int *) = (int (*)(int *))dlsym(lib, "cuDeviceGetCount");
    int n = 0;
    if (!init || !count || init(0) != 0 || count(&n) != 0)
        n = 0;
    dlclose(lib);
    return n;
}

Test(cli_device, cuda_runs_with_check_or_says_no_driver)
{
    fixture f;
    fixture_init(&f, zero_graph, "zero.json");
    const char *seed = src("benchmarks/graphs/seed_pattern.json");
    int gpus = gpus_here();
    char args[8192];
    snprintf(args, sizeof args, "'%s' --device cuda --check " FAST, seed);
    run_result r = run_tool(f.dir, "ic-run", args);
    if (gpus < 0) {
        fprintf(stderr, "[INFO] cli_device: no CUDA driver here: checking the message\n");
        assert_fails(r, "ic-run", "--device cuda without a driver", "--device cuda",
                     "no CUDA driver found (libcuda.so.1: ", "--device cpu");
        cr_assert_str_empty(r.out, "nothing on stdout when the device cannot open:\n%s", r.out);
        result_free(&r);
        /* the same with --json, and for --backend unfused */
        snprintf(args, sizeof args, "'%s' --device cuda --json --backend unfused", f.graph);
        r = run_tool(f.dir, "ic-run", args);
        assert_fails(r, "ic-run", "--json without a driver", "no CUDA driver found");
        cr_assert_str_empty(r.out, "--json prints nothing on failure:\n%s", r.out);
    } else if (gpus == 0) {
        fprintf(stderr, "[INFO] cli_device: a CUDA driver but no GPU here\n");
        assert_fails(r, "ic-run", "--device cuda with no GPU", "--device cuda: cuda: ");
    } else {
        assert_ok(r, "--device cuda --check on a GPU");
        cr_assert(strstr(r.out, "check (reference executor): every output matches"),
                  "every output should match:\n%s", r.out);
        cr_assert(strstr(r.out, "host us") && strstr(r.out, "copies (compiled, not in the run times)") &&
                      strstr(r.out, "kernels (compiled, 1): gpu_"),
                  "the GPU table:\n%s", r.out);
        result_free(&r);
        snprintf(args, sizeof args, "'%s' --device cuda --mode reduce-overhead --check --json " FAST,
                 seed);
        r = run_tool(f.dir, "ic-run", args);
        assert_ok(r, "--device cuda --mode reduce-overhead --check --json");
        json_t *j = parse_json(r.out);
        cr_assert(json_is_true(field(j, "check", JSON_TRUE, "top")), "check");
        cr_assert_str_eq(json_string_value(field(j, "mode_used", JSON_STRING, "top")),
                         "reduce-overhead", "mode_used");
        json_t *cmp = field(field(j, "backends", JSON_OBJECT, "top"), "compiled", JSON_OBJECT, "backends");
        cr_assert(json_number_value(field(cmp, "host_overhead_us", JSON_REAL, "compiled")) > 0,
                  "a host overhead is measured");
        json_decref(j);
    }
    result_free(&r);
    ict_rmtree(f.dir);
}

Test(cli_device, a_missing_driver_path_is_named)
{
    fixture f;
    fixture_init(&f, zero_graph, "zero.json");
    char args[8192];
    snprintf(args, sizeof args, "'%s' --device cuda " FAST, f.graph);
    run_result r = run_tool_env(f.dir, "IC_CUDA_DRIVER=/nonexistent/libcuda-ic-missing.so.1", "ic-run", args);
    assert_fails(r, "ic-run", "IC_CUDA_DRIVER to nothing", "--device cuda: ",
                 "no CUDA driver found (/nonexistent/libcuda-ic-missing.so.1: ");
    cr_assert_str_empty(r.out, "stdout: %s", r.out);
    result_free(&r);
    /* the cpu is not affected by the variable */
    snprintf(args, sizeof args, "'%s' --check " FAST, f.graph);
    r = run_tool_env(f.dir, "IC_CUDA_DRIVER=/nonexistent/libcuda-ic-missing.so.1", "ic-run", args);
    assert_ok(r, "--device cpu with IC_CUDA_DRIVER set");
    result_free(&r);
    ict_rmtree(f.dir);
}

/* ---- end to end through the stand-in driver ---- */

Test(cli_device, fake_driver_default_mode_launches_kernels_and_checks)
{
    fixture f;
    fixture_init(&f, zero_graph, "zero.json");
    char so[4200], log[4200], args[8192];
    build_fake_driver(f.dir, so, sizeof so);
    const char *env = fake_env(f.dir, so, log, sizeof log);
    snprintf(args, sizeof args, "'%s' --device cuda --check " FAST, f.graph);
    run_result r = run_tool_env(f.dir, env, "ic-run", args);
    assert_fake_ok(&r, "--device cuda --check (stand-in driver)");
    cr_assert_str_empty(r.err, "stderr: %s", r.err);
    static const char *want[] = {
        "device: ic fake device (sm_90, 4 SMs), cuda:0, mode default",
        "host us",
        "kernels (unfused, 2): gpu_add_0, gpu_mul_1",
        "kernels (compiled, 1): gpu_fused_add_mul_0",
        "compile (compiled): lower+fuse ",
        "copies (unfused, not in the run times): host->device 168 B ",
        "copies (compiled, not in the run times): host->device 168 B ",
        "device->host 140 B ",
        "check (reference executor): every output matches",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        cr_assert(strstr(r.out, want[i]), "want '%s' in:\n%s", want[i], r.out);
    /* both backends have a host-overhead column: 8 fields + "host us" */
    const char *row = strstr(r.out, "\ncompiled ");
    cr_assert(row, "no compiled row:\n%s", r.out);
    int fields = 0;
    for (const char *p = row + 1; *p && *p != '\n';) {
        while (*p == ' ')
            p++;
        if (*p && *p != '\n')
            fields++;
        while (*p && *p != ' ' && *p != '\n')
            p++;
    }
    cr_assert_eq(fields, 8, "the compiled row has 8 columns (host us last):\n%s", r.out);
    char *l = read_log(log);
    /* default mode: kernels launched one by one, at least warmup + iters times each */
    cr_assert_geq(count_lines_starting(l, "launch gpu_fused_add_mul_0 "), 5, "fused launches:\n%s", l);
    cr_assert_geq(count_lines_starting(l, "launch gpu_add_0 "), 5, "unfused launches:\n%s", l);
    cr_assert_eq(count_lines_starting(l, "begin_capture"), 0, "no CUDA graph in default mode:\n%s", l);
    cr_assert_eq(count_lines_starting(l, "graph_launch"), 0, "no graph launches in default mode");
    free(l);
    result_free(&r);
    ict_rmtree(f.dir);
}

Test(cli_device, fake_driver_reduce_overhead_replays_one_graph)
{
    fixture f;
    fixture_init(&f, zero_graph, "zero.json");
    char so[4200], log[4200], args[8192];
    build_fake_driver(f.dir, so, sizeof so);
    const char *env = fake_env(f.dir, so, log, sizeof log);
    snprintf(args, sizeof args, "'%s' --device cuda --mode reduce-overhead --check --json " FAST, f.graph);
    run_result r = run_tool_env(f.dir, env, "ic-run", args);
    assert_fake_ok(&r, "--mode reduce-overhead (stand-in driver)");
    cr_assert_str_empty(r.err, "no note for an implemented mode: %s", r.err);
    char *l = read_log(log);
    /* one capture per backend (unfused, compiled), each kernel captured once, then replays */
    cr_assert_eq(count_lines_starting(l, "begin_capture"), 2, "two captures:\n%s", l);
    cr_assert_eq(count_lines_starting(l, "capture_launch gpu_fused_add_mul_0 "), 1, "captured once:\n%s", l);
    cr_assert_eq(count_lines_starting(l, "capture_launch gpu_add_0 "), 1, "captured once:\n%s", l);
    cr_assert_eq(count_lines_starting(l, "launch "), 0, "no launch outside the graphs:\n%s", l);
    cr_assert_geq(count_lines_starting(l, "graph_launch"), 2 * 5, "replays:\n%s", l);
    free(l);

    json_t *j = parse_json(r.out);
    cr_assert_str_eq(json_string_value(field(j, "device", JSON_STRING, "top")), "cuda", "device");
    cr_assert_eq(json_integer_value(field(j, "device_ordinal", JSON_INTEGER, "top")), 0, "ordinal");
    cr_assert_str_eq(json_string_value(field(j, "device_name", JSON_STRING, "top")), "ic fake device", "name");
    cr_assert_eq(json_integer_value(field(j, "sm", JSON_INTEGER, "top")), 90, "sm");
    cr_assert_str_eq(json_string_value(field(j, "mode", JSON_STRING, "top")), "reduce-overhead", "mode");
    cr_assert_str_eq(json_string_value(field(j, "mode_used", JSON_STRING, "top")), "reduce-overhead", "used");
    cr_assert(json_is_true(field(j, "check", JSON_TRUE, "top")), "check");
    json_t *bes = field(j, "backends", JSON_OBJECT, "top");
    static const char *names[] = { "unfused", "compiled" };
    static const int nk[] = { 2, 1 };
    for (int i = 0; i < 2; i++) {
        json_t *b = field(bes, names[i], JSON_OBJECT, "backends");
        cr_assert_eq(json_integer_value(field(b, "kernels", JSON_INTEGER, names[i])), nk[i], "%s kernels", names[i]);
        const char *k0 = json_string_value(json_array_get(field(b, "kernel_names", JSON_ARRAY, names[i]), 0));
        cr_assert(k0 && strncmp(k0, "gpu_", 4) == 0, "%s: GPU kernel names, got %s", names[i], k0);
        cr_assert_eq(json_integer_value(field(b, "h2d_bytes", JSON_INTEGER, names[i])), ZERO_IN, "%s h2d", names[i]);
        cr_assert_eq(json_integer_value(field(b, "d2h_bytes", JSON_INTEGER, names[i])), ZERO_OUT, "%s d2h", names[i]);
        double host = json_number_value(field(b, "host_overhead_us", JSON_REAL, names[i]));
        cr_assert(host > 0, "%s: host overhead %g", names[i], host);
        double lo = json_number_value(field(b, "compile_lower_ms", JSON_REAL, names[i]));
        double px = json_number_value(field(b, "compile_ptx_ms", JSON_REAL, names[i]));
        double ld = json_number_value(field(b, "compile_load_ms", JSON_REAL, names[i]));
        double all = json_number_value(field(b, "compile_ms", JSON_REAL, names[i]));
        cr_assert(fabs(all - (lo + px + ld)) <= 1e-6 * (all + 1), "%s: compile_ms %g != %g + %g + %g",
                  names[i], all, lo, px, ld);
        cr_assert(json_number_value(field(b, "h2d_ms", JSON_REAL, names[i])) >= 0, "h2d_ms");
        cr_assert(json_number_value(field(b, "d2h_ms", JSON_REAL, names[i])) >= 0, "d2h_ms");
        cr_assert_str_eq(json_string_value(field(b, "check", JSON_STRING, names[i])), "match", "check");
    }
    json_decref(j);
    result_free(&r);
    ict_rmtree(f.dir);
}

/* The text of ic-dump's output after its one-line banner (malloc'd). */
static char *after_banner(const char *out)
{
    const char *nl = strchr(out, '\n');
    cr_assert(nl, "no banner line in:\n%s", out);
    return strdup(nl + 1);
}

/* ic-dump --device cuda --stage <stage> for f's graph, without its banner (malloc'd). */
static char *gpu_dump(const fixture *f, const char *stage)
{
    char args[8192];
    snprintf(args, sizeof args, "'%s' --device cuda --stage %s", f->graph, stage);
    run_result r = run_tool(f->dir, "ic-dump", args);
    assert_ok(r, stage);
    char *text = after_banner(r.out);
    result_free(&r);
    return text;
}

/* IC_COMPILE_DEBUG on a GPU compile writes the graph, the loop IR before and after fusion,
 * the NVPTX IR and the PTX, each what ic-dump --device cuda prints for that stage (the same
 * pipeline, stopped there). */
Test(cli_device, compile_debug_writes_the_gpu_folder)
{
    fixture f;
    fixture_init(&f, zero_graph, "zero.json");
    char so[4200], log[4200], args[8192], env[20000], path[8192];
    build_fake_driver(f.dir, so, sizeof so);
    snprintf(env, sizeof env, "%s IC_COMPILE_DEBUG=1", fake_env(f.dir, so, log, sizeof log));
    snprintf(args, sizeof args, "'%s' --device cuda --no-compare " FAST, f.graph);
    run_result r = run_tool_env(f.dir, env, "ic-run", args);
    assert_fake_ok(&r, "IC_COMPILE_DEBUG=1 --device cuda (stand-in driver)");
    const char *p = strstr(r.err, "ic: compile debug folder: ic_debug/zero_");
    cr_assert(p, "stderr: %s", r.err);
    char sub[512];
    snprintf(sub, sizeof sub, "%.*s", (int)strcspn(p + 26, "\n"), p + 26);
    result_free(&r);
    static const char *files[] = { "graph.txt", "ir_pre_fusion.txt", "ir_post_fusion.txt", "output_code.ll",
                                   "output_code.ptx" };
    static const char *stages[] = { "graph", "loops", "fused", "llvm-opt", "ptx" };
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        snprintf(path, sizeof path, "%s/%s/%s", f.dir, sub, files[i]);
        char *text = read_text(path), *want = gpu_dump(&f, stages[i]);
        cr_assert(text && *text, "%s missing or empty", path);
        cr_assert_str_eq(text, want, "the compile's %s differs from ic-dump --device cuda --stage %s", files[i],
                         stages[i]);
        free(text);
        free(want);
    }
    snprintf(path, sizeof path, "%s/%s/output_code.ptx", f.dir, sub);
    char *ptx = read_text(path);
    cr_assert(strstr(ptx, ".entry gpu_fused_add_mul_0"), "%.2000s", ptx);
    free(ptx);
    ict_rmtree(f.dir);
}

Test(cli_device, fake_driver_mismatch_exits_2)
{
    fixture f;
    fixture_init(&f, plus_one_graph, "plus_one.json");
    char so[4200], log[4200], args[8192];
    build_fake_driver(f.dir, so, sizeof so);
    const char *env = fake_env(f.dir, so, log, sizeof log);
    snprintf(args, sizeof args, "'%s' --device cuda --check " FAST, f.graph);
    run_result r = run_tool_env(f.dir, env, "ic-run", args);
    cr_assert(!strstr(r.err, "no usable CUDA driver"), "stand-in lacks an entry point: %s", r.err);
    cr_assert_eq(r.rc, 2, "kernels that do nothing cannot match x + 1: exit %d; stderr: %s", r.rc, r.err);
    cr_assert_eq(count_lines_starting(r.err, "ic-run: unfused vs reference: output 'y' f32 [4, 6]: "), 1,
                 "one line for unfused:\n%s", r.err);
    cr_assert_eq(count_lines_starting(r.err, "ic-run: compiled vs reference: output 'y' f32 [4, 6]: "), 1,
                 "one line for compiled:\n%s", r.err);
    cr_assert(strstr(r.out, "MISMATCH"), "the table says so:\n%s", r.out);
    result_free(&r);
    ict_rmtree(f.dir);
}

/* The max-autotune modes on a GPU: as asked, no note; max-autotune captures CUDA graphs. */
Test(cli_device, fake_driver_max_autotune_modes_run_as_asked)
{
    fixture f;
    fixture_init(&f, zero_graph, "zero.json");
    char so[4200], log[4200], args[8192];
    build_fake_driver(f.dir, so, sizeof so);
    static const char *modes[] = { "max-autotune", "max-autotune-no-cudagraphs" };
    for (int i = 0; i < 2; i++) {
        const char *env = fake_env(f.dir, so, log, sizeof log);
        snprintf(args, sizeof args, "'%s' --device cuda:0 --mode %s --no-compare --json " FAST, f.graph, modes[i]);
        run_result r = run_tool_env(f.dir, env, "ic-run", args);
        assert_fake_ok(&r, modes[i]);
        cr_assert_str_empty(r.err, "%s: no note, got: %s", modes[i], r.err);
        json_t *j = parse_json(r.out);
        cr_assert_str_eq(json_string_value(field(j, "mode", JSON_STRING, "top")), modes[i], "mode");
        cr_assert_str_eq(json_string_value(field(j, "mode_used", JSON_STRING, "top")), modes[i], "used");
        json_decref(j);
        char *l = read_log(log);
        if (i == 0)
            cr_assert_eq(count_lines_starting(l, "begin_capture"), 1, "max-autotune captures:\n%s", l);
        else
            cr_assert_eq(count_lines_starting(l, "begin_capture"), 0, "no CUDA graphs:\n%s", l);
        cr_assert_geq(count_lines_starting(l, i == 0 ? "graph_launch" : "launch gpu_fused_add_mul_0 "), 5,
                      "%s launches:\n%s", modes[i], l);
        free(l);
        result_free(&r);
    }
    ict_rmtree(f.dir);
}

/* Templates and options on a GPU: cudagraphs captures, GPU options reach --json's "options",
 * a CPU-only option gets a note. */
Test(cli_device, fake_driver_template_and_options)
{
    fixture f;
    fixture_init(&f, zero_graph, "zero.json");
    char so[4200], log[4200], args[8192];
    build_fake_driver(f.dir, so, sizeof so);
    const char *env = fake_env(f.dir, so, log, sizeof log);
    snprintf(args, sizeof args, "'%s' --device cuda --template cudagraphs --option wgmma=off "
             "--option allow_tf32=true --option vector_width=4 --no-compare --json " FAST, f.graph);
    run_result r = run_tool_env(f.dir, env, "ic-run", args);
    assert_fake_ok(&r, "--template cudagraphs --option ...");
    cr_assert_str_eq(r.err, "ic-run: note: option vector_width has no effect on --device cuda (it "
                            "applies to --device cpu)\n", "stderr");
    json_t *j = parse_json(r.out);
    cr_assert_str_eq(json_string_value(field(j, "mode", JSON_STRING, "top")), "reduce-overhead", "mode");
    cr_assert_str_eq(json_string_value(field(j, "mode_used", JSON_STRING, "top")), "reduce-overhead", "used");
    cr_assert_str_eq(json_string_value(field(j, "template", JSON_STRING, "top")), "cudagraphs", "template");
    json_t *opts = field(j, "options", JSON_OBJECT, "top");
    cr_assert_str_eq(json_string_value(field(opts, "wgmma", JSON_STRING, "options")), "off");
    cr_assert(json_is_true(field(opts, "allow_tf32", JSON_TRUE, "options")));
    cr_assert(json_is_true(field(opts, "iconv", JSON_TRUE, "options")));
    cr_assert_null(json_object_get(opts, "vector_width"), "GPU options only");
    cr_assert(json_is_object(field(j, "autotune", JSON_OBJECT, "top")));
    json_decref(j);
    char *l = read_log(log);
    cr_assert_eq(count_lines_starting(l, "begin_capture"), 1, "one capture:\n%s", l);
    free(l);
    result_free(&r);
    ict_rmtree(f.dir);
}

Test(cli_device, fake_driver_other_ordinal_is_refused)
{
    fixture f;
    fixture_init(&f, zero_graph, "zero.json");
    char so[4200], log[4200], args[8192];
    build_fake_driver(f.dir, so, sizeof so);
    const char *env = fake_env(f.dir, so, log, sizeof log);
    snprintf(args, sizeof args, "'%s' --device cuda:3 " FAST, f.graph);
    run_result r = run_tool_env(f.dir, env, "ic-run", args);
    assert_fails(r, "ic-run", "cuda:3 on a one-GPU driver", "--device cuda:3", "no device 3");
    result_free(&r);
    ict_rmtree(f.dir);
}

/* ic-dump --device: cuda stages by alias, a bad device and a CPU-only stage refused. */
Test(cli_device, dump_device_cuda)
{
    fixture f;
    fixture_init(&f, zero_graph, "zero.json");
    char args[8192];
    snprintf(args, sizeof args, "'%s' --device cuda --stage fuse", f.graph);
    run_result r = run_tool(f.dir, "ic-dump", args);
    assert_ok(r, "--device cuda --stage fuse");
    cr_assert(strstr(r.out, "== fused: zero, fused kernels (Fuse) [cuda] ==\n") && strstr(r.out, "gpu_fused_add_mul_0"),
              "%s", r.out);
    result_free(&r);
    snprintf(args, sizeof args, "'%s' --device gpu", f.graph);
    r = run_tool(f.dir, "ic-dump", args);
    assert_fails(r, "ic-dump", "--device gpu", "--device gpu: cpu or cuda");
    result_free(&r);
    snprintf(args, sizeof args, "'%s' --device cuda --stage asm", f.graph);
    r = run_tool(f.dir, "ic-dump", args);
    assert_fails(r, "ic-dump", "--device cuda --stage asm", "stage 'asm' is made by the cpu backend");
    result_free(&r);
    ict_rmtree(f.dir);
}

/* ---- --mode on the CPU ---- */

Test(cli_device, cpu_accepts_every_mode)
{
    fixture f;
    fixture_init(&f, plus_one_graph, "plus_one.json");
    char args[8192];
    snprintf(args, sizeof args, "'%s' --mode default --check " FAST, f.graph);
    run_result r = run_tool(f.dir, "ic-run", args);
    assert_ok(r, "--mode default");
    cr_assert_str_empty(r.err, "no note for default: %s", r.err);
    cr_assert(strstr(r.out, "every output matches") && !strstr(r.out, "host us") && !strstr(r.out, "device:"),
              "the cpu table is unchanged:\n%s", r.out);
    result_free(&r);
    /* CUDA graphs have nothing to capture on the CPU: a note for the modes that have them */
    static const char *modes[] = { "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs" };
    static const char *used[] = { "default", "max-autotune-no-cudagraphs", "max-autotune-no-cudagraphs" };
    for (int i = 0; i < 3; i++) {
        snprintf(args, sizeof args, "'%s' --mode=%s --check --json " FAST, f.graph, modes[i]);
        r = run_tool(f.dir, "ic-run", args);
        assert_ok(r, modes[i]);
        if (i < 2) {
            cr_assert_eq(count_char(r.err, '\n'), 1, "%s: one note, got: %s", modes[i], r.err);
            cr_assert(strncmp(r.err, "ic-run: note: --mode ", 21) == 0 && strstr(r.err, modes[i]) &&
                          strstr(r.err, "CUDA graphs have no effect on --device cpu") && strstr(r.err, used[i]),
                      "%s: %s", modes[i], r.err);
        } else {
            cr_assert_str_empty(r.err, "%s: no note: %s", modes[i], r.err);
        }
        json_t *j = parse_json(r.out);
        cr_assert(json_is_true(field(j, "check", JSON_TRUE, "top")), "%s: check", modes[i]);
        cr_assert_str_eq(json_string_value(field(j, "device", JSON_STRING, "top")), "cpu", "device");
        cr_assert(json_is_null(json_object_get(j, "device_name")) && json_is_null(json_object_get(j, "sm")) &&
                      json_is_null(json_object_get(j, "device_ordinal")),
                  "no GPU fields on the cpu");
        cr_assert_str_eq(json_string_value(field(j, "mode", JSON_STRING, "top")), modes[i], "mode");
        cr_assert_str_eq(json_string_value(field(j, "mode_used", JSON_STRING, "top")), used[i], "mode_used");
        json_t *cmp = field(field(j, "backends", JSON_OBJECT, "top"), "compiled", JSON_OBJECT, "backends");
        cr_assert(json_is_null(field(cmp, "host_overhead_us", JSON_NULL, "compiled")) &&
                      json_is_null(field(cmp, "h2d_bytes", JSON_NULL, "compiled")),
                  "GPU-only fields are null on the cpu");
        json_decref(j);
        result_free(&r);
    }
    ict_rmtree(f.dir);
}

/* ---- usage errors: refused before anything opens, with or without a driver ---- */

Test(cli_device, usage_errors)
{
    fixture f;
    fixture_init(&f, zero_graph, "zero.json");
    static const struct { const char *tool, *fmt, *part, *part2; } cases[] = {
        { "ic-run", "'%s' --device", "--device", "needs a value" },
        { "ic-run", "'%s' --device gpu", "'gpu'", "cpu, cuda, cuda:N" },
        { "ic-run", "'%s' --device=", "''", "cpu, cuda, cuda:N" },
        { "ic-run", "'%s' --device CUDA", "'CUDA'", "cpu, cuda" },
        { "ic-run", "'%s' --device cuda:x", "cuda:x", "integer" },
        { "ic-run", "'%s' --device cuda:-1", "cuda:-1", "integer" },
        { "ic-run", "'%s' --device cuda:", "cuda:", "integer" },
        { "ic-run", "'%s' --device cudax", "'cudax'", "cpu, cuda" },
        { "ic-run", "'%s' --mode", "--mode", "needs a value" },
        { "ic-run", "'%s' --mode turbo", "'turbo'",
          "default, reduce-overhead, max-autotune, max-autotune-no-cudagraphs" },
        { "ic-run", "'%s' --mode=", "''", "reduce-overhead" },
        { "ic-run", "'%s' --mode Default", "'Default'", "default" },
        { "ic-run", "'%s' --mode reduce_overhead", "'reduce_overhead'", "reduce-overhead" },
        { "ic-run", "'%s' --device cuda --backend ref", "--backend ref", "CPU" },
        { "ic-run", "'%s' --device cuda --threads 2", "--threads", "--device cuda" },
        { "ic-run", "--device cuda", "no graph", "usage" },
        { "ic-dump", "'%s' --stage SASS", "unknown stage 'SASS'", "ptx, sass" },
        { "ic-dump", "--stage sass", "no graph", "usage" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[8192], what[8300];
        snprintf(args, sizeof args, cases[i].fmt, f.graph);
        snprintf(what, sizeof what, "%s %s", cases[i].tool, args);
        /* a driver that does not exist: usage errors must come first */
        run_result r = run_tool_env(f.dir, "IC_CUDA_DRIVER=/nonexistent/libcuda.so.1", cases[i].tool, args);
        assert_fails(r, cases[i].tool, what, cases[i].part, cases[i].part2);
        cr_assert_str_empty(r.out, "%s: stdout: %s", what, r.out);
        result_free(&r);
    }
    ict_rmtree(f.dir);
}

Test(cli_device, help_names_device_mode_and_sass)
{
    fixture f;
    fixture_init(&f, zero_graph, "zero.json");
    run_result r = run_tool(f.dir, "ic-run", "-h");
    assert_ok(r, "ic-run -h");
    static const char *opts[] = { "--device", "cpu|cuda", "--mode", "default", "reduce-overhead",
                                  "max-autotune", "max-autotune-no-cudagraphs", "CUDA graph",
                                  "host overhead" };
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
        cr_assert(strstr(r.out, opts[i]), "ic-run -h should mention %s:\n%s", opts[i], r.out);
    result_free(&r);
    r = run_tool(f.dir, "ic-dump", "-h");
    assert_ok(r, "ic-dump -h");
    static const char *st[] = { "sass", "ptxas", "cuobjdump", "IC_PTXAS" };
    for (size_t i = 0; i < sizeof st / sizeof st[0]; i++)
        cr_assert(strstr(r.out, st[i]), "ic-dump -h should mention %s:\n%s", st[i], r.out);
    result_free(&r);
    ict_rmtree(f.dir);
}

/* ---- ic-dump --stage sass ---- */

/* Folders named ic-dump-sass-* left in dir (the stage's temp folders). */
static int leftovers(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += strncmp(e->d_name, "ic-dump-sass-", 13) == 0;
    if (d)
        closedir(d);
    return n;
}

Test(cli_device, sass_with_the_toolkit_or_a_clear_absence)
{
    fixture f;
    fixture_init(&f, zero_graph, "zero.json");
    char args[8192];
    snprintf(args, sizeof args, "'%s' --stage sass", f.graph);
    run_result r = run_tool_env(f.dir, "IC_PTXAS=", "ic-dump", args);
    if (r.rc == 0) {
        cr_assert(strncmp(r.out, "// == sass: zero, SASS for sm_90", 32) == 0, "banner:\n%.300s", r.out);
        cr_assert(strstr(r.out, "gpu_fused_add_mul_0") && strstr(r.out, "sm_90"),
                  "cuobjdump -sass names the kernel and the arch:\n%.3000s", r.out);
        cr_assert_str_empty(r.err, "stderr: %s", r.err);
    } else {
        fprintf(stderr, "[INFO] cli_device: no ptxas+cuobjdump here: %s", r.err);
        assert_fails(r, "ic-dump", "sass without the toolkit", "stage 'sass' needs", "CUDA toolkit",
                     "--stage ptx needs neither");
        cr_assert(strstr(r.err, "no ptxas") || strstr(r.err, "cuobjdump"), "which tool: %s", r.err);
        cr_assert_str_empty(r.out, "stdout: %s", r.out);
    }
    result_free(&r);
    ict_rmtree(f.dir);
}

/* Stand-in tools: ptxas logs its arguments beside itself and copies the PTX to the "cubin";
 * cuobjdump prints a header and the .entry lines of that file. */
static const char fake_ptxas[] =
    "#!/bin/sh\nPATH=/usr/bin:/bin\n"
    "echo \"$@\" > \"$(dirname \"$0\")/ptxas.args\"\n"
    "out=; in=\n"
    "while [ $# -gt 0 ]; do case \"$1\" in -o) out=\"$2\"; shift;; -*) ;; *) in=\"$1\";; esac; shift; done\n"
    "cp \"$in\" \"$out\"\n";
static const char fake_cuobjdump[] =
    "#!/bin/sh\nPATH=/usr/bin:/bin\n"
    "echo \"fake-cuobjdump $1\"\n"
    "grep '\\.entry' \"$2\" || true\n";
static const char failing_ptxas[] =
    "#!/bin/sh\necho \"ptxas fatal   : Unresolved extern function 'nope'\" >&2\nexit 255\n";
static const char failing_cuobjdump[] =
    "#!/bin/sh\necho \"cuobjdump info    : File is not a cubin\" >&2\nexit 1\n";

Test(cli_device, sass_through_stand_in_tools)
{
    fixture f;
    fixture_init(&f, zero_graph, "zero.json");
    char bin[4200], ptxas[4300], args[8192], env[16384], path[4300];
    snprintf(bin, sizeof bin, "%s/bin", f.dir);
    mkdir(bin, 0755);
    snprintf(ptxas, sizeof ptxas, "%s/ptxas", bin);
    make_exe(ptxas, fake_ptxas);
    snprintf(path, sizeof path, "%s/cuobjdump", bin);
    make_exe(path, fake_cuobjdump);
    /* TMPDIR: the stage's temp folder goes there, and must be gone afterwards */
    snprintf(env, sizeof env, "IC_PTXAS='%s' TMPDIR='%s'", ptxas, f.dir);
    snprintf(args, sizeof args, "'%s' --stage sass", f.graph);
    run_result r = run_tool_env(f.dir, env, "ic-dump", args);
    assert_ok(r, "sass through stand-ins");
    cr_assert_str_empty(r.err, "stderr: %s", r.err);
    const char *head = "// == sass: zero, SASS for sm_90 (ptxas + cuobjdump) ==\n"
                       "// ---- kernel 0 'gpu_fused_add_mul_0' ----\nfake-cuobjdump -sass\n";
    cr_assert(strncmp(r.out, head, strlen(head)) == 0, "banner, the kernel's line, then cuobjdump -sass's output:\n%s",
              r.out);
    cr_assert_eq(count_lines_with(r.out, ".entry gpu_"), 1, "the fused kernel's entry, once:\n%s", r.out);
    cr_assert(strstr(r.out, ".entry gpu_fused_add_mul_0("), "the PTX reached cuobjdump:\n%s", r.out);
    snprintf(path, sizeof path, "%s/ptxas.args", bin);
    char *a = read_text(path);
    cr_assert(a && strncmp(a, "-arch=sm_90 -o ", 15) == 0 && strstr(a, ".cubin ") && strstr(a, ".ptx"),
              "ptxas -arch=sm_90 -o X.cubin X.ptx, got: %s", a ? a : "(not run)");
    free(a);
    cr_assert_eq(leftovers(f.dir), 0, "the temp folder is removed");
    result_free(&r);

    /* --no-fusion: one entry per op, and the banner says so */
    snprintf(args, sizeof args, "'%s' --stage sass --no-fusion", f.graph);
    r = run_tool_env(f.dir, env, "ic-dump", args);
    assert_ok(r, "sass --no-fusion");
    cr_assert_eq(count_lines_with(r.out, ".entry gpu_"), 2, "two ops, two entries:\n%s", r.out);
    cr_assert_eq(count_lines_with(r.out, "fake-cuobjdump -sass"), 2, "a module per kernel:\n%s", r.out);
    cr_assert(strstr(r.out, "[no fusion] ==\n"), "banner:\n%s", r.out);
    result_free(&r);

    /* ptxas rejects the PTX: its message, one line, nothing on stdout, no temp folder left */
    make_exe(ptxas, failing_ptxas);
    snprintf(args, sizeof args, "'%s' --stage sass", f.graph);
    r = run_tool_env(f.dir, env, "ic-dump", args);
    assert_fails(r, "ic-dump", "failing ptxas", "ptxas failed (exit 255)", "graph 'zero'",
                 "Unresolved extern function 'nope'");
    cr_assert_str_empty(r.out, "stdout: %s", r.out);
    cr_assert_eq(leftovers(f.dir), 0, "the temp folder is removed after a failure");
    result_free(&r);

    /* cuobjdump fails */
    make_exe(ptxas, fake_ptxas);
    snprintf(path, sizeof path, "%s/cuobjdump", bin);
    make_exe(path, failing_cuobjdump);
    r = run_tool_env(f.dir, env, "ic-dump", args);
    assert_fails(r, "ic-dump", "failing cuobjdump", "cuobjdump failed (exit 1)", "File is not a cubin");
    cr_assert_str_empty(r.out, "stdout: %s", r.out);
    result_free(&r);

    /* no cuobjdump beside ptxas nor on PATH */
    unlink(path);
    snprintf(env, sizeof env, "IC_PTXAS='%s' TMPDIR='%s' PATH=/nonexistent-ic", ptxas, f.dir);
    r = run_tool_env(f.dir, env, "ic-dump", args);
    assert_fails(r, "ic-dump", "no cuobjdump", "needs cuobjdump", ptxas, "on PATH");
    cr_assert_str_empty(r.out, "stdout: %s", r.out);
    result_free(&r);

    /* IC_PTXAS that is not a program */
    r = run_tool_env(f.dir, "IC_PTXAS=/nonexistent/ptxas", "ic-dump", args);
    assert_fails(r, "ic-dump", "IC_PTXAS missing", "IC_PTXAS", "/nonexistent/ptxas", "not an executable");
    result_free(&r);
    ict_rmtree(f.dir);
}

/* The real ptxas (when installed) turns ic's PTX into an sm_90 cubin: a stand-in cuobjdump
 * beside a link to it checks the ELF magic, so this runs without cuobjdump. */
Test(cli_device, sass_real_ptxas_makes_a_cubin)
{
    const char *real = "/usr/local/cuda/bin/ptxas";
    if (access(real, X_OK) != 0)
        cr_skip_test("%s is not installed", real);
    fixture f;
    fixture_init(&f, zero_graph, "zero.json");
    char bin[4200], link[4300], path[4300], env[16384], args[8192];
    snprintf(bin, sizeof bin, "%s/bin", f.dir);
    mkdir(bin, 0755);
    snprintf(link, sizeof link, "%s/ptxas", bin);
    cr_assert_eq(symlink(real, link), 0, "symlink %s", link);
    snprintf(path, sizeof path, "%s/cuobjdump", bin);
    make_exe(path, "#!/bin/sh\nPATH=/usr/bin:/bin\n"
                   "[ \"$(head -c 4 \"$2\" | tail -c 3)\" = ELF ] && echo \"ELF cubin of $(wc -c < \"$2\") bytes\"\n");
    snprintf(env, sizeof env, "IC_PTXAS='%s'", link);
    snprintf(args, sizeof args, "'%s' --stage sass", src("benchmarks/graphs/seed_pattern.json"));
    run_result r = run_tool_env(f.dir, env, "ic-dump", args);
    assert_ok(r, "real ptxas");
    cr_assert(strstr(r.out, "\nELF cubin of "), "ptxas should write an ELF cubin:\n%s", r.out);
    result_free(&r);
    ict_rmtree(f.dir);
}

/* The index checks belong to the pipeline's variants, so the GPU runs them too: an embedding
 * index out of range is a located error (exit 1) before anything is uploaded, as on the CPU. */
Test(cli_device, fake_driver_refuses_embedding_indices_out_of_range)
{
    fixture f;
    fixture_init(&f, "{\"ic_graph\": 1, \"name\": \"emb\",\n"
                     " \"inputs\": [{\"name\": \"w\", \"dtype\": \"f32\", \"shape\": [10, 3]},\n"
                     "            {\"name\": \"i\", \"dtype\": \"i64\", \"shape\": [3]}],\n"
                     " \"nodes\": [{\"name\": \"y\", \"op\": \"embedding\", \"inputs\": [\"w\", \"i\"]}],\n"
                     " \"outputs\": [\"y\"]}\n",
                 "emb.json");
    ic_ctx *c = ict_ctx();
    float w[30] = { 0 };
    int64_t idx[3] = { 1, 10, 2 };
    ic_tensor t[2];
    ic_tensor_init(&t[0], IC_F32, 2, (int64_t[]){ 10, 3 }, w);
    ic_tensor_init(&t[1], IC_I64, 1, (int64_t[]){ 3 }, idx);
    char in[4200], so[4200], log[4200], args[16384];
    snprintf(in, sizeof in, "%s/in.safetensors", f.dir);
    cr_assert_eq(ic_safetensors_save(c, in, 2, (const char *const[]){ "w", "i" }, t), IC_OK, "%s",
                 ic_last_error(c));
    ic_ctx_destroy(c);
    build_fake_driver(f.dir, so, sizeof so);
    const char *env = fake_env(f.dir, so, log, sizeof log);
    snprintf(args, sizeof args, "'%s' --device cuda --inputs '%s' --no-compare " FAST, f.graph, in);
    run_result r = run_tool_env(f.dir, env, "ic-run", args);
    cr_assert(!strstr(r.err, "no usable CUDA driver"), "stand-in lacks an entry point: %s", r.err);
    cr_assert_eq(r.rc, 1, "exit %d; stderr: %s", r.rc, r.err);
    cr_assert(strstr(r.err, "node 'y' (embedding): index 10 out of range [0, 10)"), "%s", r.err);
    result_free(&r);
    ict_rmtree(f.dir);
}
