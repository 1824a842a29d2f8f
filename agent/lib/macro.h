/* SPDX-License-Identifier: MIT */
#pragma once

/* Small helpers every file uses: cleanup attributes, time units, array sizes.
 * Ownership rule: x_free(NULL) is a no-op and every x_free returns NULL. */

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef uint64_t usec_t;

#define USEC_INFINITY ((usec_t) UINT64_MAX)
#define USEC_PER_MSEC ((usec_t) 1000ULL)
#define USEC_PER_SEC ((usec_t) 1000000ULL)
#define USEC_PER_MINUTE (60ULL * USEC_PER_SEC)
#define USEC_PER_HOUR (60ULL * USEC_PER_MINUTE)
#define NSEC_PER_USEC ((uint64_t) 1000ULL)

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))
#define _unused_ __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _cleanup_(f) __attribute__((cleanup(f)))
#define _likely_(x) (__builtin_expect(!!(x), 1))
#define _unlikely_(x) (__builtin_expect(!!(x), 0))

#define MAX(a, b) ((a) > (b) ? (a) : (b))
#define MIN(a, b) ((a) < (b) ? (a) : (b))

/* Defines NAME##p(type *p) calling func(*p) if non-NULL, for _cleanup_(). */
#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func)          \
        static inline void func##p(type *p) {            \
                if (*p)                                  \
                        func(*p);                        \
        }

static inline void freep(void *p) {
        free(*(void **) p);
}
#define _cleanup_free_ _cleanup_(freep)

static inline void closep(int *fd) {
        if (*fd >= 0) {
                int saved = errno;
                (void) close(*fd);
                errno = saved;
        }
}
#define _cleanup_close_ _cleanup_(closep)

static inline void fclosep(FILE **f) {
        if (*f)
                (void) fclose(*f);
}
#define _cleanup_fclose_ _cleanup_(fclosep)

/* Hands ownership out of a _cleanup_ variable. */
#define TAKE_PTR(p)                              \
        ({                                       \
                __typeof__(p) _took = (p);       \
                (p) = NULL;                      \
                _took;                           \
        })
#define TAKE_FD(fd)                              \
        ({                                       \
                int _took = (fd);                \
                (fd) = -EBADF;                   \
                _took;                           \
        })

#define SWAP_FIELD(a, b)                         \
        do {                                     \
                __typeof__(a) _swap = (a);       \
                (a) = (b);                       \
                (b) = _swap;                     \
        } while (0)

static inline void *mfree(void *p) {
        free(p);
        return NULL;
}

static inline int safe_close(int fd) {
        if (fd >= 0)
                (void) close(fd);
        return -EBADF;
}

/* A duration from a double, saturated instead of undefined when out of range. */
static inline usec_t usec_from_double(double d) {
        if (!(d > 0))
                return 0;
        if (d >= 0x1.0p64)
                return USEC_INFINITY;
        return (usec_t) d;
}

static inline usec_t timespec_to_usec(const struct timespec *ts) {
        return (usec_t) ts->tv_sec * USEC_PER_SEC + (usec_t) ts->tv_nsec / NSEC_PER_USEC;
}

static inline usec_t now_usec(clockid_t clock) {
        struct timespec ts;
        (void) clock_gettime(clock, &ts);
        return timespec_to_usec(&ts);
}

static inline bool streq(const char *a, const char *b) {
        return strcmp(a, b) == 0;
}

/* FNV-1a of s, continuing from h (start with STRING_HASH_INIT): a cheap first comparison before
 * strcmp() when many strings are searched one by one. */
#define STRING_HASH_INIT UINT64_C(14695981039346656037)
static inline uint64_t string_hash(uint64_t h, const char *s) {
        for (; *s; s++)
                h = (h ^ (unsigned char) *s) * UINT64_C(1099511628211);
        return h;
}

static inline bool startswith(const char *s, const char *prefix) {
        return strncmp(s, prefix, strlen(prefix)) == 0;
}

static inline bool streq_ptr(const char *a, const char *b) {
        if (!a || !b)
                return a == b;
        return streq(a, b);
}

static inline const char *strempty(const char *s) {
        return s ? s : "";
}

/* The value of a hex digit, -1 for any other character. */
static inline int unhexchar(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

static inline bool isempty(const char *s) {
        return !s || !*s;
}

/* Negative errno → positive, for strerror() and %m. */
static inline int errno_abs(int r) {
        return r < 0 ? -r : r;
}

/* Returns -errno, or -EIO if errno was not set (so callers never see 0 for a failure). */
static inline int negative_errno(void) {
        return errno > 0 ? -errno : -EIO;
}
