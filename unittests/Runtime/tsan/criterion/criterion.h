/* criterion.h (TSan runner) - the few Criterion macros test_threads.c and testutil.c use, over
 * a plain runner, for the ThreadSanitizer build only (cmake/tsan.cmake, scripts/ci-tsan.sh).
 *
 * Criterion's own runner does not start under TSan (Criterion issue #274): BoxFort maps its
 * inheritable arena at a random address in [0x2000'0000'0000, 0x7f00'0000'0000), which TSan's
 * shadow mostly occupies, so about half the starts abort ("Could not initialize inheritable
 * arena") and others crash inside libcriterion. This runner keeps Criterion's model: each
 * test runs in a child forked from a parent that never starts a thread (a child of a process
 * with threads may not start threads under TSan), a failed assertion ends that child with a
 * message, and the exit status says whether every test passed. The ASan suite builds the same
 * sources with the real Criterion. */
#ifndef ICT_CRITERION_LITE_H
#define ICT_CRITERION_LITE_H

#include <stdbool.h>
#include <string.h>

void ict_lite_register(const char *suite, const char *name, void (*fn)(void));
void ict_lite_check(bool ok, const char *expr, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

#define Test(suite, name)                                                                   \
    static void suite##_##name(void);                                                       \
    __attribute__((constructor)) static void suite##_##name##_register(void)                \
    {                                                                                       \
        ict_lite_register(#suite, #name, suite##_##name);                                   \
    }                                                                                       \
    static void suite##_##name(void)

/* cr_assert(cond) or cr_assert(cond, "format", args...) */
#define cr_assert(cond, ...) ict_lite_check((cond), #cond, __FILE__, __LINE__, "" __VA_ARGS__)
#define cr_assert_eq(a, b, ...) cr_assert((a) == (b), __VA_ARGS__)
#define cr_assert_neq(a, b, ...) cr_assert((a) != (b), __VA_ARGS__)
#define cr_assert_gt(a, b, ...) cr_assert((a) > (b), __VA_ARGS__)
#define cr_assert_geq(a, b, ...) cr_assert((a) >= (b), __VA_ARGS__)
#define cr_assert_lt(a, b, ...) cr_assert((a) < (b), __VA_ARGS__)
#define cr_assert_leq(a, b, ...) cr_assert((a) <= (b), __VA_ARGS__)
#define cr_assert_not_null(p, ...) cr_assert((p) != NULL, __VA_ARGS__)
#define cr_assert_null(p, ...) cr_assert((p) == NULL, __VA_ARGS__)
#define cr_assert_str_eq(a, b, ...) cr_assert(strcmp((a), (b)) == 0, __VA_ARGS__)
#define cr_assert_str_empty(s, ...) cr_assert((s)[0] == 0, __VA_ARGS__)

#endif
