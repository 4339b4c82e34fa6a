/* cli_run.h - running the built tools (ic-run, ic-dump) from the Tools tests: exit status,
 * stdout and stderr captured, and the checks every CLI test makes (exit 1 with exactly one
 * "<tool>: ..." line on stderr). The tools are taken from the folder of the test executable
 * (the build folder, wherever it was copied), else IC_BUILD_DIR; the source tree from
 * $IC_SOURCE_DIR when set (tests run on another machine), else IC_SOURCE_DIR. Included by each
 * test_*.c of this folder; all helpers are static inline so a file may use only some. */
#ifndef IC_TEST_CLI_RUN_H
#define IC_TEST_CLI_RUN_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "testutil.h"

typedef struct {
    int rc;        /* exit status; 128 + signal when killed */
    char *out, *err;
} run_result;

static inline void result_free(run_result *r)
{
    free(r->out);
    free(r->err);
}

/* A whole file as a NUL-terminated string (caller frees); NULL if it cannot be read. */
static inline char *read_text(const char *path)
{
    size_t n;
    char *d = ict_read_file(path, &n);
    char *s = d ? realloc(d, n + 1) : NULL;
    if (!s) {
        free(d);
        return NULL;
    }
    s[n] = 0;
    return s;
}

/* The folder holding ic-run and ic-dump: this executable's own when they are there (a build
 * folder carried to another machine keeps working), else the build folder it came from. */
static inline const char *tool_dir(void)
{
    static char dir[4096];
    if (dir[0])
        return dir;
    char exe[4096], probe[4200];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = 0;
            snprintf(probe, sizeof probe, "%s/ic-run", exe);
            if (access(probe, X_OK) == 0) {
                snprintf(dir, sizeof dir, "%s", exe);
                return dir;
            }
        }
    }
    snprintf(dir, sizeof dir, "%s", IC_BUILD_DIR);
    return dir;
}

/* Runs tool_dir()/tool with args (already shell-quoted) in folder dir (its working
 * directory, so debug folders land there), stdin from /dev/null. env: "VAR=value ..."
 * assignments put before the command, or NULL. */
static inline run_result run_tool_env(const char *dir, const char *env, const char *tool,
                                      const char *args)
{
    char cmd[32768], outp[4096], errp[4096];
    snprintf(outp, sizeof outp, "%s/.stdout", dir);
    snprintf(errp, sizeof errp, "%s/.stderr", dir);
    snprintf(cmd, sizeof cmd, "%s/%s", tool_dir(), tool);
    cr_assert(access(cmd, X_OK) == 0, "%s is not built (build everything before ctest)", cmd);
    snprintf(cmd, sizeof cmd, "cd '%s' && %s '%s/%s' %s </dev/null >'%s' 2>'%s'", dir,
             env ? env : "", tool_dir(), tool, args, outp, errp);
    int st = system(cmd);
    run_result r = { -1, NULL, NULL };
    cr_assert(st != -1, "system(%s) failed", cmd);
    r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    r.out = read_text(outp);
    r.err = read_text(errp);
    cr_assert(r.out && r.err, "cannot read the output of %s", cmd);
    unlink(outp);
    unlink(errp);
    return r;
}

static inline run_result run_tool(const char *dir, const char *tool, const char *args)
{
    return run_tool_env(dir, NULL, tool, args);
}

static inline int count_char(const char *s, char c)
{
    int n = 0;
    for (; *s; s++)
        n += *s == c;
    return n;
}

#define assert_ok(r, what)                                                                 \
    cr_assert_eq((r).rc, 0, "%s: exit %d, want 0; stderr: %s", (what), (r).rc, (r).err)

/* Exit `rc`, exactly one line "<tool>: ..." on stderr containing every part. */
static inline void assert_fails_rc_(const run_result *r, int rc, const char *tool,
                                    const char *what, const char *const *parts)
{
    cr_assert_eq(r->rc, rc, "%s: exit %d, want %d; stderr: %s", what, r->rc, rc, r->err);
    size_t tl = strlen(tool);
    cr_assert(strncmp(r->err, tool, tl) == 0 && r->err[tl] == ':',
              "%s: stderr should start with '%s:', got: %s", what, tool, r->err);
    cr_assert_eq(count_char(r->err, '\n'), 1, "%s: want one line on stderr, got: %s", what, r->err);
    size_t n = strlen(r->err);
    cr_assert(n > 0 && r->err[n - 1] == '\n', "%s: stderr should end with a newline: %s", what, r->err);
    for (; *parts; parts++)
        cr_assert(strstr(r->err, *parts), "%s: message should mention '%s', got: %s", what, *parts,
                  r->err);
}
#define assert_fails(r, tool, what, ...)                                                    \
    assert_fails_rc_(&(r), 1, (tool), (what), (const char *const[]){ __VA_ARGS__, NULL })
/* ic-run's mismatch exit (--check, --expect). */
#define assert_mismatch(r, what, ...)                                                       \
    assert_fails_rc_(&(r), 2, "ic-run", (what), (const char *const[]){ __VA_ARGS__, NULL })

/* The source tree: $IC_SOURCE_DIR when set, else the one this test was built from. */
static inline const char *source_root(void)
{
    const char *e = getenv("IC_SOURCE_DIR");
    return e && *e ? e : IC_SOURCE_DIR;
}

/* A path under the source tree, in a rotating static buffer (8 slots). */
static inline const char *src(const char *rel)
{
    static char bufs[8][4096];
    static int k;
    char *b = bufs[k++ % 8];
    snprintf(b, sizeof bufs[0], "%s/%s", source_root(), rel);
    return b;
}

static inline void write_text(const char *path, const char *text)
{
    ict_write_file(path, text, strlen(text));
}

static inline bool files_equal(const char *a, const char *b)
{
    size_t na, nb;
    void *da = ict_read_file(a, &na), *db = ict_read_file(b, &nb);
    bool eq = da && db && na == nb && memcmp(da, db, na) == 0;
    free(da);
    free(db);
    return eq;
}

#endif
