/* test_cli_cache.c - ic-cache as a user runs it: path, stats, list, clear [NS], gc, export and
 * import round trips, and bad usage and bad files (exit 1, one line on stderr). The cache is
 * filled through the store itself (cache-impl.h) in a mkdtemp folder named by IC_CACHE_DIR. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "cli_run.h"
#include "../../lib/Runtime/cache-impl.h"

/* A context whose cache is dir. */
static ic_ctx *cache_ctx(const char *dir)
{
    ic_ctx *c = ict_ctx();
    ic_switches sw;
    ic_ctx_switches(c, &sw);
    sw.cache_dir = dir;
    sw.no_cache = false;
    cr_assert_eq(ic_ctx_set_switches(c, &sw), IC_OK);
    return c;
}

/* Three entries: two CPU objects (one key of two lines) and a GPU tuning record. */
static void fill(const char *dir)
{
    ic_ctx *c = cache_ctx(dir);
    ic__cache_put(c, IC__CACHE_CPU_OBJ, "kernel one\nbuf0 f32[16]", "object one", 10);
    ic__cache_put(c, IC__CACHE_CPU_OBJ, "kernel two", "object two", 10);
    ic__cache_put(c, IC__CACHE_GPU_TUNE, "gpu kernel", "bm=128 bn=128", 13);
    ic_ctx_destroy(c);
}

/* ic-cache ARGS with IC_CACHE_DIR=cache (and `extra` env assignments), run in folder dir. */
static run_result cache_tool(const char *dir, const char *cache, const char *extra, const char *args)
{
    char env[8400];
    snprintf(env, sizeof env, "IC_CACHE_DIR='%s' %s", cache, extra ? extra : "");
    return run_tool_env(dir, env, "ic-cache", args);
}

static int count_lines(const char *s)
{
    return count_char(s, '\n');
}

Test(cli_cache, help_path_and_empty_stats)
{
    const char *dir = ict_tmpdir(), *cache = ict_path(dir, "cache");
    run_result r = cache_tool(dir, cache, NULL, "-h");
    assert_ok(r, "ic-cache -h");
    cr_assert(strstr(r.out, "usage: ic-cache") && strstr(r.out, "export FILE") && strstr(r.out, "IC_CACHE_DIR"));
    result_free(&r);
    r = cache_tool(dir, cache, NULL, "path");
    assert_ok(r, "ic-cache path");
    char want[4200];
    snprintf(want, sizeof want, "%s\n", cache);
    cr_assert_str_eq(r.out, want);
    result_free(&r);
    r = cache_tool(dir, cache, NULL, "");
    assert_ok(r, "ic-cache (stats by default)");
    cr_assert(strstr(r.out, cache) && strstr(r.out, "total") && strstr(r.out, " 0 entries"), "%s", r.out);
    result_free(&r);
    r = cache_tool(dir, cache, "IC_CACHE=0", "stats");
    assert_ok(r, "IC_CACHE=0 ic-cache stats");
    cr_assert(strstr(r.out, "IC_CACHE=0"), "stats says the cache is off: %s", r.out);
    result_free(&r);
    ict_rmtree(dir);
}

Test(cli_cache, list_stats_and_clear_a_namespace)
{
    const char *dir = ict_tmpdir();
    char cache[4200];
    snprintf(cache, sizeof cache, "%s", ict_path(dir, "cache"));
    fill(cache);
    run_result r = cache_tool(dir, cache, NULL, "list");
    assert_ok(r, "ic-cache list");
    cr_assert_eq(count_lines(r.out), 3, "one line per entry: %s", r.out);
    cr_assert(strstr(r.out, "cpu-obj") && strstr(r.out, "gpu-tune") && strstr(r.out, "valid"), "%s", r.out);
    cr_assert(strstr(r.out, "kernel one\n") && !strstr(r.out, "buf0"),
              "list shows a key's first line only: %s", r.out);
    result_free(&r);
    r = cache_tool(dir, cache, NULL, "stats");
    assert_ok(r, "ic-cache stats");
    cr_assert(strstr(r.out, "cpu-obj          2 entries") && strstr(r.out, "gpu-tune         1 entries") &&
              strstr(r.out, "total            3 entries"), "%s", r.out);
    result_free(&r);
    r = cache_tool(dir, cache, NULL, "clear cpu-obj");
    assert_ok(r, "ic-cache clear cpu-obj");
    cr_assert(strstr(r.out, "removed 2 entries"), "%s", r.out);
    result_free(&r);
    r = cache_tool(dir, cache, NULL, "list");
    cr_assert(count_lines(r.out) == 1 && strstr(r.out, "gpu kernel"), "%s", r.out);
    result_free(&r);
    r = cache_tool(dir, cache, NULL, "gc");
    assert_ok(r, "ic-cache gc");
    cr_assert(strstr(r.out, "removed 0 entries of other versions"), "%s", r.out);
    result_free(&r);
    r = cache_tool(dir, cache, NULL, "clear");
    assert_ok(r, "ic-cache clear");
    cr_assert(strstr(r.out, "removed 1 entries"), "%s", r.out);
    result_free(&r);
    cr_assert_eq(ict_count_files(cache), 0);
    ict_rmtree(dir);
}

Test(cli_cache, export_then_import)
{
    const char *dir = ict_tmpdir();
    char cache[4200], file[4200];
    snprintf(cache, sizeof cache, "%s", ict_path(dir, "cache"));
    snprintf(file, sizeof file, "%s", ict_path(dir, "all.icx"));
    fill(cache);
    run_result r = cache_tool(dir, cache, NULL, "export all.icx");
    assert_ok(r, "ic-cache export");
    cr_assert(strstr(r.out, "exported 3 entries"), "%s", r.out);
    result_free(&r);
    r = cache_tool(dir, cache, NULL, "clear");
    result_free(&r);
    r = cache_tool(dir, cache, NULL, "import all.icx");
    assert_ok(r, "ic-cache import");
    cr_assert(strstr(r.out, "imported 3 entries") && strstr(r.out, "skipped 0"), "%s", r.out);
    result_free(&r);
    ic_ctx *c = cache_ctx(cache);
    void *d;
    size_t n;
    cr_assert(ic__cache_get(c, IC__CACHE_GPU_TUNE, "gpu kernel", &d, &n) && n == 13 && !memcmp(d, "bm=128 bn=128", 13),
              "the imported entry reads back");
    free(d);
    ic_ctx_destroy(c);
    /* A damaged copy is refused, naming the file and the offset. */
    size_t len;
    char *b = ict_read_file(file, &len);
    cr_assert(b);
    b[len - 12] ^= 0x40;
    write_text(ict_path(dir, "bad.icx"), "");
    ict_write_file(ict_path(dir, "bad.icx"), b, len);
    free(b);
    r = cache_tool(dir, cache, NULL, "import bad.icx");
    assert_fails(r, "ic-cache", "a corrupt export", "bad.icx", "offset", "entry 2");
    result_free(&r);
    ict_rmtree(dir);
}

Test(cli_cache, bad_usage_and_errors)
{
    const char *dir = ict_tmpdir(), *cache = ict_path(dir, "cache");
    static const struct {
        const char *args, *part1, *part2;
    } cases[] = {
        { "bogus", "unknown command 'bogus'", "stats" },
        { "--verbose", "unknown option '--verbose'", "-h" },
        { "list extra", "list takes no operand", "-h" },
        { "export", "export takes one FILE", "-h" },
        { "import a b", "import takes one FILE", "-h" },
        { "clear a b", "clear takes at most one namespace", "-h" },
        { "clear cpu-ojb", "no namespace 'cpu-ojb'", "cpu-obj" },
        { "import absent.icx", "absent.icx", "cannot read" },
        { "import .", "cannot read", "." },
        { "export no/such/folder.icx", "no/such/folder.icx", "cannot write" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        run_result r = cache_tool(dir, cache, NULL, cases[i].args);
        assert_fails(r, "ic-cache", cases[i].args, cases[i].part1, cases[i].part2);
        result_free(&r);
    }
    write_text(ict_path(dir, "text.icx"), "this is not an export\n");
    run_result r = cache_tool(dir, cache, NULL, "import text.icx");
    assert_fails(r, "ic-cache", "import of a text file", "text.icx", "offset 0", "bad magic");
    result_free(&r);
    /* No folder can be named: every command but -h fails with one line. */
    r = run_tool_env(dir, "env -u IC_CACHE_DIR -u XDG_CACHE_HOME -u HOME", "ic-cache", "path");
    assert_fails(r, "ic-cache", "no cache folder", "no folder", "IC_CACHE_DIR");
    result_free(&r);
    ict_rmtree(dir);
}
