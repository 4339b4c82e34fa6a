/* lite_main.c - the TSan runner's main (criterion/criterion.h beside it says why Criterion's
 * own cannot run there): every registered test in a forked child, in order; "[PASS]" or
 * "[FAIL]" a test; exit status 1 when any failed. An argument runs only the tests whose
 * "suite/name" contains it. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#include "criterion/criterion.h"

enum { MAX_TESTS = 64 };
static struct { const char *suite, *name; void (*fn)(void); } tests[MAX_TESTS];
static int ntests;

void ict_lite_register(const char *suite, const char *name, void (*fn)(void))
{
    if (ntests == MAX_TESTS) {
        fprintf(stderr, "lite: more than %d tests\n", MAX_TESTS);
        exit(2);
    }
    tests[ntests].suite = suite, tests[ntests].name = name, tests[ntests].fn = fn;
    ntests++;
}

void ict_lite_check(bool ok, const char *expr, const char *file, int line, const char *fmt, ...)
{
    if (ok)
        return;
    fprintf(stderr, "%s:%d: assertion failed: %s", file, line, expr);
    if (fmt[0]) {
        va_list ap;
        va_start(ap, fmt);
        fputs(": ", stderr);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
    }
    fputc('\n', stderr);
    exit(1);
}

/* Runs test i in a child; true when it exited 0. */
static bool run(int i)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        perror("lite: fork");
        return false;
    }
    if (pid == 0) {
        tests[i].fn();
        fflush(NULL);
        _exit(0);
    }
    int st = 0;
    if (waitpid(pid, &st, 0) != pid)
        return false;
    if (WIFSIGNALED(st))
        fprintf(stderr, "lite: %s/%s killed by signal %d\n", tests[i].suite, tests[i].name, WTERMSIG(st));
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

int main(int argc, char **argv)
{
    int failed = 0, ran = 0;
    for (int i = 0; i < ntests; i++) {
        char full[256];
        snprintf(full, sizeof full, "%s/%s", tests[i].suite, tests[i].name);
        if (argc > 1 && !strstr(full, argv[1]))
            continue;
        bool ok = run(i);
        printf("[%s] %s\n", ok ? "PASS" : "FAIL", full);
        fflush(stdout);
        failed += !ok;
        ran++;
    }
    printf("lite: %d tests, %d passed, %d failed\n", ran, ran - failed, failed);
    return failed || ran == 0 ? 1 : 0;
}
