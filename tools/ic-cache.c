/* ic-cache.c - look at and manage the persistent cache (include/ic/cache.h): list its entries,
 * per-namespace stats, clear all or one namespace, gc, export to one file, import one, print
 * its folder. Exit 0 on success, 1 with one line on stderr for bad usage or an error. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "common/cli.h"
#include "ic/cache.h"

static const char usage[] =
    "usage: ic-cache [COMMAND]\n"
    "\n"
    "Looks at and manages the persistent cache of tuning records and compiled code: the folder\n"
    "$IC_CACHE_DIR, else $XDG_CACHE_HOME/ic-llvm, else ~/.cache/ic-llvm (IC_CACHE=0 stops\n"
    "compiles from using it; this tool works on it all the same).\n"
    "\n"
    "commands:\n"
    "  stats         (default) entries, bytes and temporary files per namespace, and the total\n"
    "  list          one line per entry: namespace, file, bytes, modified (UTC), state (valid,\n"
    "                other-version, corrupt), the first line of its key\n"
    "  clear [NS]    removes every entry and temporary file, or those of namespace NS\n"
    "                (cpu-obj, cpu-tune, gpu-code, gpu-tune)\n"
    "  gc            removes entries of other versions, corrupt entries and temporary files\n"
    "                older than an hour\n"
    "  export FILE   writes every valid entry into FILE (atomically)\n"
    "  import FILE   checks every entry of FILE, then stores those of this version (entries\n"
    "                of another version are skipped and counted)\n"
    "  path          prints the cache folder\n"
    "  -h, --help    this text\n";

typedef bool (*command_fn)(ic_ctx *c, const char *arg, cli_err *e);

static const char *state_name(ic_cache_state s)
{
    return s == IC_CACHE_VALID ? "valid" : s == IC_CACHE_OTHER_VERSION ? "other-version" : "corrupt";
}

static bool cmd_path(ic_ctx *c, const char *arg, cli_err *e)
{
    char dir[1024];
    if (ic_cache_dir(c, dir, sizeof dir))
        return cli_fail_ctx(e, c, NULL);
    printf("%s\n", dir);
    return true;
}

static bool cmd_list(ic_ctx *c, const char *arg, cli_err *e)
{
    ic_cache_entry *l;
    int n;
    if (ic_cache_list(c, &l, &n))
        return cli_fail_ctx(e, c, NULL);
    for (int i = 0; i < n; i++) {
        char when[32];
        time_t t = (time_t)l[i].mtime;
        struct tm tm;
        strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", gmtime_r(&t, &tm));
        printf("%-9s %s %10lld  %s  %-13s %s\n", l[i].ns, l[i].file, (long long)l[i].bytes, when,
               state_name(l[i].state), l[i].key);
    }
    ic_cache_free(c, l);
    return true;
}

static bool cmd_stats(ic_ctx *c, const char *arg, cli_err *e)
{
    char dir[1024];
    ic_cache_ns_stats *s;
    int n;
    if (ic_cache_dir(c, dir, sizeof dir) || ic_cache_stats(c, &s, &n))
        return cli_fail_ctx(e, c, NULL);
    ic_switches sw;
    ic_ctx_switches(c, &sw);
    printf("cache %s%s\n", dir, sw.no_cache ? " (IC_CACHE=0: compiles neither read nor write it)" : "");
    ic_cache_ns_stats all = { "total" };
    for (int i = 0; i <= n; i++) {
        const ic_cache_ns_stats *x = i < n ? &s[i] : &all;
        printf("%-9s %8lld entries %14lld bytes", x->ns, (long long)x->entries, (long long)x->bytes);
        if (x->temps)
            printf("  (%lld temporary files, %lld bytes)", (long long)x->temps, (long long)x->temp_bytes);
        putchar('\n');
        all.entries += x->entries;
        all.bytes += x->bytes;
        all.temps += x->temps;
        all.temp_bytes += x->temp_bytes;
    }
    ic_cache_free(c, s);
    return true;
}

static bool cmd_clear(ic_ctx *c, const char *ns, cli_err *e)
{
    ic_cache_counts k;
    if (ic_cache_clear(c, ns, &k))
        return cli_fail_ctx(e, c, NULL);
    printf("removed %lld entries and %lld temporary files (%lld bytes)\n", (long long)k.entries,
           (long long)k.temps, (long long)k.bytes);
    return true;
}

static bool cmd_gc(ic_ctx *c, const char *arg, cli_err *e)
{
    ic_cache_counts k;
    if (ic_cache_gc(c, &k))
        return cli_fail_ctx(e, c, NULL);
    printf("removed %lld entries of other versions, %lld corrupt entries, %lld temporary files "
           "(%lld bytes)\n", (long long)k.other_version, (long long)k.corrupt, (long long)k.temps,
           (long long)k.bytes);
    return true;
}

static bool cmd_export(ic_ctx *c, const char *file, cli_err *e)
{
    ic_cache_counts k;
    if (ic_cache_export(c, file, &k))
        return cli_fail_ctx(e, c, NULL);
    printf("exported %lld entries (%lld bytes) to %s", (long long)k.entries, (long long)k.bytes, file);
    if (k.other_version || k.corrupt)
        printf("; left out %lld of other versions and %lld corrupt", (long long)k.other_version,
               (long long)k.corrupt);
    putchar('\n');
    return true;
}

static bool cmd_import(ic_ctx *c, const char *file, cli_err *e)
{
    ic_cache_counts k;
    if (ic_cache_import(c, file, &k))
        return cli_fail_ctx(e, c, NULL);
    printf("imported %lld entries (%lld bytes) from %s; skipped %lld of other versions\n",
           (long long)k.entries, (long long)k.bytes, file, (long long)k.other_version);
    return true;
}

static const struct {
    const char *name;
    command_fn fn;
    int min_args, max_args;   /* operands after the command */
} commands[] = {
    { "stats", cmd_stats, 0, 0 },   { "list", cmd_list, 0, 0 },     { "clear", cmd_clear, 0, 1 },
    { "gc", cmd_gc, 0, 0 },         { "export", cmd_export, 1, 1 }, { "import", cmd_import, 1, 1 },
    { "path", cmd_path, 0, 0 },
};

/* The command named by argv (stats when none) and its operand; false with e on bad usage. */
static bool parse_args(int argc, char **argv, int *cmd, const char **arg, bool *help, cli_err *e)
{
    *cmd = 0;
    *arg = NULL;
    *help = false;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
            return *help = true;
    if (argc < 2)
        return true;
    if (argv[1][0] == '-')
        return cli_fail(e, "unknown option '%s' (try -h)", argv[1]);
    int n = (int)(sizeof commands / sizeof *commands);
    for (*cmd = 0; *cmd < n && strcmp(commands[*cmd].name, argv[1]); (*cmd)++)
        ;
    if (*cmd == n)
        return cli_fail(e, "unknown command '%s' (commands: stats, list, clear [NS], gc, export FILE, "
                           "import FILE, path)", argv[1]);
    int nargs = argc - 2;
    if (nargs < commands[*cmd].min_args || nargs > commands[*cmd].max_args)
        return cli_fail(e, "%s takes %s (try -h)", argv[1],
                        commands[*cmd].max_args == 0   ? "no operand"
                        : commands[*cmd].min_args == 0 ? "at most one namespace"
                                                       : "one FILE");
    *arg = nargs ? argv[2] : NULL;
    return true;
}

int main(int argc, char **argv)
{
    cli_err e = { "" };
    int cmd;
    const char *arg;
    bool help;
    if (!parse_args(argc, argv, &cmd, &arg, &help, &e)) {
        cli_report("ic-cache", e.msg);
        return 1;
    }
    if (help) {
        fputs(usage, stdout);
        return 0;
    }
    ic_ctx *c = NULL;
    if (ic_ctx_create(NULL, &c) != IC_OK) {
        cli_report("ic-cache", "cannot create a context (out of memory)");
        return 1;
    }
    cli_log_init(c, "ic-cache");
    bool ok = commands[cmd].fn(c, arg, &e);
    if (ok && fflush(stdout) != 0)
        ok = cli_fail(&e, "cannot write to standard output");
    if (!ok)
        cli_report("ic-cache", e.msg);
    ic_ctx_destroy(c);
    return ok ? 0 : 1;
}
