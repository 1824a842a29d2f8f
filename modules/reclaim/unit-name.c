/* SPDX-License-Identifier: MIT */
/* The unit name rule of unit-cap.h (unit_name_from_cgroup()): a pure function of the path, by
 * systemd's naming of units and slices. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "unit-cap.h"

static bool unit_chars(const char *s, size_t n) {
        static const char ok[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789:-_.\\@";
        for (size_t i = 0; i < n; i++)
                if (!s[i] || !strchr(ok, s[i]))
                        return false;
        return n > 0;
}

static bool has_suffix(const char *s, size_t n, const char *suffix) {
        size_t k = strlen(suffix);
        return n > k && memcmp(s + n - k, suffix, k) == 0;
}

int unit_name_from_cgroup(const char *path, char **ret_unit) {
        const char *p = path, *parent = NULL;
        size_t parent_len = 0;

        if (!path || path[0] != '/')
                return 0;
        for (;;) {
                p++;
                const char *end = strchrnul(p, '/');
                size_t n = (size_t) (end - p);
                bool last = *end == 0;
                /* systemd's names: at most 255 characters, no leading '-' but "-.slice". */
                if (n == 0 || n > 255 || p[0] == '-' || !unit_chars(p, n))
                        return 0;
                bool slice = has_suffix(p, n, ".slice");
                if (!slice && !(last && (has_suffix(p, n, ".service") || has_suffix(p, n, ".scope"))))
                        return 0;
                if (slice) {
                        /* "a-b.slice" lives in "a.slice", "a.slice" in the root. */
                        size_t stem = n - strlen(".slice");
                        const char *dash = NULL;
                        for (const char *q = p; q < p + stem; q++)
                                if (*q == '-')
                                        dash = q;
                        if (!parent ? dash != NULL
                                    : !dash || (size_t) (dash - p) != parent_len || memcmp(p, parent, parent_len) != 0)
                                return 0;
                        parent = p;
                        parent_len = stem;
                }
                if (last) {
                        char *u = strndup(p, n);
                        if (!u)
                                return -ENOMEM;
                        *ret_unit = u;
                        return 1;
                }
                p = end;
        }
}
