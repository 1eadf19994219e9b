/* Minimal assertions for the CTest executables: a failed check prints where
 * and why, and the test exits non-zero at the end. Safe to use from the fake
 * core's thread. */
#ifndef CUMULO_TEST_CHECK_H
#define CUMULO_TEST_CHECK_H

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

extern atomic_int check_failures;

#define CHECK(cond)                                                                    \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);   \
            atomic_fetch_add(&check_failures, 1);                                      \
        }                                                                              \
    } while (0)

#define CHECK_EQ_INT(got, want)                                                            \
    do {                                                                                   \
        long long got_ = (long long)(got), want_ = (long long)(want);                      \
        if (got_ != want_) {                                                               \
            fprintf(stderr, "%s:%d: %s is %lld, expected %lld\n", __FILE__, __LINE__, #got, \
                    got_, want_);                                                          \
            atomic_fetch_add(&check_failures, 1);                                          \
        }                                                                                  \
    } while (0)

/* Compares a (pointer, length) view with a NUL-terminated string. */
#define CHECK_VIEW(data, len, want)                                                        \
    do {                                                                                   \
        const char *want_ = (want);                                                        \
        size_t len_ = (len);                                                               \
        if (len_ != strlen(want_) || (len_ && memcmp((data), want_, len_) != 0)) {         \
            fprintf(stderr, "%s:%d: %s is '%.*s', expected '%s'\n", __FILE__, __LINE__,    \
                    #data, (int)len_, (const char *)(data), want_);                        \
            atomic_fetch_add(&check_failures, 1);                                          \
        }                                                                                  \
    } while (0)

#define CHECK_STATUS(got, want)                                                            \
    do {                                                                                   \
        int got_ = (got), want_ = (want);                                                  \
        if (got_ != want_) {                                                               \
            fprintf(stderr, "%s:%d: %s gave %s (%d), expected %s\n", __FILE__, __LINE__,   \
                    #got, cumulo_status_name(got_), got_, cumulo_status_name(want_));      \
            atomic_fetch_add(&check_failures, 1);                                          \
        }                                                                                  \
    } while (0)

#define CHECK_DEFINE_COUNTER atomic_int check_failures = 0

static inline int check_report(const char *what) {
    int failures = atomic_load(&check_failures);
    if (failures) fprintf(stderr, "%s: %d check(s) failed\n", what, failures);
    else printf("%s: all checks passed\n", what);
    return failures ? 1 : 0;
}

#endif
