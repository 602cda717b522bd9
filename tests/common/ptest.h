/*
 * ptest.h — one test syntax for two runners.
 *
 * Natively (PTEST_CRITERION defined) the macros are Criterion's: each test
 * runs in a forked child and Criterion prints its synthesis line. Under
 * Emscripten, where Criterion does not exist, the same test files link with
 * ptest.c: a small runner that registers tests through constructors, runs
 * them in order, and prints "N passed, N failed". So every core unit test
 * also runs as WASM under node.
 *
 * Every assertion takes a message (a printf format and its arguments).
 */
#ifndef PTEST_H
#define PTEST_H

#include <stdint.h>

#ifdef PTEST_CRITERION

#include <criterion/criterion.h>

#define PTEST(suite, name)   Test(suite, name)
#define PT_ASSERT(cond, ...) cr_assert(cond, __VA_ARGS__)
#define PT_EXPECT(cond, ...) cr_expect(cond, __VA_ARGS__)
#define PT_FAIL(...)         cr_assert_fail(__VA_ARGS__)
#define PT_LOG(...)          cr_log_info(__VA_ARGS__)

#else /* plain runner (WASM) */

typedef void (*ptest_fn)(void);

void ptest_register(const char *suite, const char *name, ptest_fn fn);
/* Reports a failed assertion and leaves the current test (longjmp). */
_Noreturn void ptest_fail_at(const char *file, int line, const char *expr, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Reports a failed expectation; the test goes on and is counted as failed. */
void ptest_expect_fail_at(const char *file, int line, const char *expr, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void ptest_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define PTEST(suite, name)                                                                         \
    static void ptest_##suite##_##name(void);                                                      \
    __attribute__((constructor)) static void ptest_reg_##suite##_##name(void)                      \
    {                                                                                              \
        ptest_register(#suite, #name, ptest_##suite##_##name);                                     \
    }                                                                                              \
    static void ptest_##suite##_##name(void)

#define PT_ASSERT(cond, ...)                                                                       \
    do {                                                                                           \
        if (!(cond)) ptest_fail_at(__FILE__, __LINE__, #cond, __VA_ARGS__);                        \
    } while (0)
#define PT_EXPECT(cond, ...)                                                                       \
    do {                                                                                           \
        if (!(cond)) ptest_expect_fail_at(__FILE__, __LINE__, #cond, __VA_ARGS__);                 \
    } while (0)
#define PT_FAIL(...) ptest_fail_at(__FILE__, __LINE__, "failure", __VA_ARGS__)
#define PT_LOG(...)  ptest_log(__VA_ARGS__)

#endif /* PTEST_CRITERION */

#endif /* PTEST_H */
