/*
 * ptest.c — the plain test runner behind ptest.h (used where Criterion is
 * not available, i.e. under Emscripten/node).
 */
#include "ptest.h"

#ifndef PTEST_CRITERION

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define PTEST_MAX 1024

typedef struct ptest_case {
    const char *suite;
    const char *name;
    ptest_fn fn;
} ptest_case;

static ptest_case ptest_cases[PTEST_MAX];
static int ptest_count;
static int ptest_overflow;
static jmp_buf ptest_jmp;
static int ptest_current_failed;

void ptest_register(const char *suite, const char *name, ptest_fn fn)
{
    if (ptest_count >= PTEST_MAX) {
        ptest_overflow = 1;
        return;
    }
    ptest_cases[ptest_count].suite = suite;
    ptest_cases[ptest_count].name = name;
    ptest_cases[ptest_count].fn = fn;
    ptest_count++;
}

__attribute__((format(printf, 5, 0))) static void ptest_vreport(const char *kind, const char *file,
                                                                int line, const char *expr,
                                                                const char *fmt, va_list ap)
{
    fprintf(stderr, "  %s %s:%d: %s: ", kind, file, line, expr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

void ptest_fail_at(const char *file, int line, const char *expr, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ptest_vreport("assertion failed", file, line, expr, fmt, ap);
    va_end(ap);
    ptest_current_failed = 1;
    longjmp(ptest_jmp, 1);
}

void ptest_expect_fail_at(const char *file, int line, const char *expr, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ptest_vreport("expectation failed", file, line, expr, fmt, ap);
    va_end(ap);
    ptest_current_failed = 1;
}

void ptest_log(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

int main(int argc, char **argv)
{
    const char *filter = argc > 1 ? argv[1] : NULL;
    int passed = 0;
    int failed = 0;
    if (ptest_overflow) {
        fprintf(stderr, "ptest: more than %d tests registered\n", PTEST_MAX);
        return 2;
    }
    for (int i = 0; i < ptest_count; i++) {
        const ptest_case *c = &ptest_cases[i];
        if (filter && strstr(c->name, filter) == NULL && strstr(c->suite, filter) == NULL) {
            continue;
        }
        ptest_current_failed = 0;
        if (setjmp(ptest_jmp) == 0) c->fn();
        if (ptest_current_failed) {
            failed++;
            fprintf(stderr, "[FAIL] %s::%s\n", c->suite, c->name);
        } else {
            passed++;
        }
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 && passed > 0 ? 0 : 1;
}

#endif /* !PTEST_CRITERION */
