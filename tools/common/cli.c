/* cli.c - option parsing, one-line error reporting, file identity and timing for the tools. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include "common/cli.h"

bool cli_fail(cli_err *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return false;
}

bool cli_fail_ctx(cli_err *e, ic_ctx *c, const char *prefix)
{
    const char *m = ic_last_error(c);
    if (!m || !*m)
        m = "unknown error";
    if (prefix)
        return cli_fail(e, "%s: %s", prefix, m);
    return cli_fail(e, "%s", m);
}

void cli_report(const char *tool, const char *msg)
{
    /* One line, whatever the library put in the message, so scripts can rely on it. */
    fprintf(stderr, "%s: ", tool);
    for (const char *p = msg; *p; p++)
        fputc(*p == '\n' || *p == '\r' ? ' ' : *p, stderr);
    fputc('\n', stderr);
}

bool cli_parse_i64(const char *s, int64_t *out)
{
    if (!s || !*s)
        return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || end == s)
        return false;
    *out = v;
    return true;
}

bool cli_parse_u64(const char *s, uint64_t *out)
{
    if (!s || !*s || *s == '-')
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || end == s)
        return false;
    *out = v;
    return true;
}

bool cli_opt(int argc, char **argv, int *i, const char *name, const char **val, cli_err *e)
{
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, name, n) != 0)
        return false;
    if (a[n] == '=') {
        *val = a + n + 1;
        return true;
    }
    if (a[n] != 0)
        return false;
    if (*i + 1 >= argc) {
        *val = NULL;
        cli_fail(e, "option %s needs a value", name);
        return true;
    }
    *val = argv[++*i];
    return true;
}

bool cli_parse_bind(const char *s, cli_bind *out, cli_err *e)
{
    const char *eq = strchr(s, '=');
    if (!eq || eq == s)
        return cli_fail(e, "--bind expects SYM=N (e.g. --bind B=8), got '%s'", s);
    if (!cli_parse_i64(eq + 1, &out->value) || out->value < 0)
        return cli_fail(e, "--bind %s: '%s' is not a non-negative integer", s, eq + 1);
    size_t len = (size_t)(eq - s);
    if (len >= sizeof out->sym)
        return cli_fail(e, "--bind %s: symbol name too long", s);
    memcpy(out->sym, s, len);
    out->sym[len] = 0;
    return true;
}

bool cli_load_graph(ic_ctx *c, const char *path, ic_graph **out, cli_err *e)
{
    *out = NULL;
    if (ic_graph_load_json(c, path, out) != IC_OK) {
        const char *m = ic_last_error(c);
        /* The loader names the file; make sure the user sees it even if a message does not. */
        if (m && strstr(m, path))
            return cli_fail(e, "%s", m);
        return cli_fail(e, "%s: %s", path, m && *m ? m : "cannot load graph");
    }
    return true;
}

bool cli_same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    if (!a || !b || stat(a, &sa) != 0 || stat(b, &sb) != 0)
        return false;
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

double cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int log_level;

static void log_to_stderr(void *user, int level, const char *msg)
{
    if (level <= log_level)
        cli_report((const char *)user, msg);
}

void cli_log_init(ic_ctx *c, const char *tool)
{
    ic_switches sw;
    ic_ctx_switches(c, &sw);
    log_level = sw.debug; /* IC_DEBUG, as the context read it */
    ic_log_set(c, log_to_stderr, (void *)tool);
}
