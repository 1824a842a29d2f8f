/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "parse.h"

int parse_duration(const char *s, usec_t *ret) {
        static const struct {
                const char *suffix;
                usec_t factor;
        } units[] = {
                { "us", 1 },
                { "ms", USEC_PER_MSEC },
                { "s", USEC_PER_SEC },
                { "sec", USEC_PER_SEC },
                { "m", USEC_PER_MINUTE },
                { "min", USEC_PER_MINUTE },
                { "h", USEC_PER_HOUR },
                { "d", 24 * USEC_PER_HOUR },
        };
        usec_t total = 0;
        bool any = false;

        if (isempty(s))
                return -EINVAL;
        while (*s) {
                char *end;
                s += strspn(s, " ");
                if (!*s)
                        break;
                if (*s < '0' || *s > '9')
                        return -EINVAL;
                errno = 0;
                unsigned long long v = strtoull(s, &end, 10);
                if (errno != 0 || end == s)
                        return -EINVAL;
                size_t ulen = strspn(end, "abcdefghijklmnopqrstuvwxyz");
                usec_t factor = 0;
                if (ulen == 0)
                        factor = USEC_PER_SEC; /* a bare number is seconds, as in systemd */
                else
                        for (size_t i = 0; i < ELEMENTSOF(units); i++)
                                if (strlen(units[i].suffix) == ulen && strncmp(end, units[i].suffix, ulen) == 0)
                                        factor = units[i].factor;
                if (factor == 0)
                        return -EINVAL;
                if (v > (UINT64_MAX - total) / factor)
                        return -ERANGE;
                total += v * factor;
                any = true;
                s = end + ulen;
        }
        if (!any)
                return -EINVAL;
        *ret = total;
        return 0;
}

int parse_size(const char *s, uint64_t *ret) {
        static const char suffixes[] = "KMGT";
        char *end;
        uint64_t factor = 1;

        if (isempty(s) || *s < '0' || *s > '9')
                return -EINVAL;
        errno = 0;
        unsigned long long v = strtoull(s, &end, 10);
        if (errno != 0)
                return -ERANGE;
        if (*end) {
                const char *p = strchr(suffixes, *end);
                if (!p)
                        return -EINVAL;
                for (const char *q = suffixes; q <= p; q++)
                        factor *= 1024;
                end++;
                /* Accept "M", "MB" and "MiB" alike: all binary. */
                if (streq(end, "iB") || streq(end, "B"))
                        end += strlen(end);
                if (*end)
                        return -EINVAL;
        }
        if (v > UINT64_MAX / factor)
                return -ERANGE;
        *ret = v * factor;
        return 0;
}

int parse_percent(const char *s, unsigned *ret) {
        char *end;

        if (isempty(s) || *s < '0' || *s > '9')
                return -EINVAL;
        errno = 0;
        unsigned long v = strtoul(s, &end, 10);
        if (errno != 0 || !streq(end, "%"))
                return -EINVAL;
        if (v > 100)
                return -ERANGE;
        *ret = (unsigned) v;
        return 0;
}

int parse_bool(const char *s, bool *ret) {
        static const char *const yes[] = { "1", "yes", "true", "on" };
        static const char *const no[] = { "0", "no", "false", "off" };

        for (size_t i = 0; i < ELEMENTSOF(yes); i++)
                if (strcasecmp(s, yes[i]) == 0) {
                        *ret = true;
                        return 0;
                }
        for (size_t i = 0; i < ELEMENTSOF(no); i++)
                if (strcasecmp(s, no[i]) == 0) {
                        *ret = false;
                        return 0;
                }
        return -EINVAL;
}
