/* SPDX-License-Identifier: MIT */
/* The value parsers of config tables: each turns a key's text into its field, or says why not
 * in words the FILE:LINE error quotes. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

int config_parse_duration(const char *v, void *ret, const char **reason) {
        int r = parse_duration(v, ret);
        if (r < 0)
                *reason = r == -ERANGE ? "duration too large"
                                       : "expected a duration such as 800ms, 30s, 2m or 1h";
        return r;
}

int config_parse_size(const char *v, void *ret, const char **reason) {
        int r = parse_size(v, ret);
        if (r < 0)
                *reason = r == -ERANGE ? "size too large" : "expected a size such as 4096, 64K, 512M or 2G";
        return r;
}

int config_parse_percent(const char *v, void *ret, const char **reason) {
        int r = parse_percent(v, ret);
        if (r < 0)
                *reason = r == -ERANGE ? "a percentage must be between 0% and 100%"
                                       : "expected a percentage such as 90%";
        return r;
}

int config_parse_bool(const char *v, void *ret, const char **reason) {
        int r = parse_bool(v, ret);
        if (r < 0)
                *reason = "expected a boolean (yes/no, true/false, on/off, 1/0)";
        return r;
}

int config_parse_int(const char *v, void *ret, const char **reason) {
        char *end;

        errno = 0;
        long long n = strtoll(v, &end, 10);
        if (isempty(v) || *end || errno != 0) {
                *reason = errno == ERANGE ? "integer out of range" : "expected an integer";
                return -EINVAL;
        }
        *(int64_t *) ret = n;
        return 0;
}

int config_parse_uint(const char *v, void *ret, const char **reason) {
        char *end;

        errno = 0;
        unsigned long long n = strtoull(v, &end, 10);
        if (isempty(v) || *v == '-' || *end || errno != 0 || n > UINT_MAX) {
                *reason = "expected a non-negative integer";
                return -EINVAL;
        }
        *(unsigned *) ret = (unsigned) n;
        return 0;
}

int config_parse_double(const char *v, void *ret, const char **reason) {
        char *end;

        errno = 0;
        double d = strtod(v, &end);
        if (isempty(v) || *end || errno != 0 || !isfinite(d) || d < 0) {
                *reason = "expected a non-negative number";
                return -EINVAL;
        }
        *(double *) ret = d;
        return 0;
}

int config_parse_string(const char *v, void *ret, const char **reason) {
        char *s = NULL;

        if (!isempty(v)) {
                s = strdup(v);
                if (!s) {
                        *reason = "out of memory";
                        return -ENOMEM;
                }
        }
        *(char **) ret = s;
        return 0;
}

int config_parse_path(const char *v, void *ret, const char **reason) {
        if (!isempty(v) && v[0] != '/') {
                *reason = "expected an absolute path";
                return -EINVAL;
        }
        if (strlen(v) >= PATH_MAX) {
                *reason = "path too long";
                return -EINVAL;
        }
        return config_parse_string(v, ret, reason);
}

int config_parse_url(const char *v, void *ret, const char **reason) {
        if (!isempty(v) && strncmp(v, "http://", 7) != 0 && strncmp(v, "https://", 8) != 0) {
                *reason = "expected an http:// or https:// URL";
                return -EINVAL;
        }
        return config_parse_string(v, ret, reason);
}

int config_parse_file(const char *v, void *ret, const char **reason) {
        if (isempty(v))
                return config_parse_path(v, ret, reason);
        if (v[0] != '/') {
                *reason = "expected an absolute path";
                return -EINVAL;
        }
        int r = config_check_file(v, reason);
        if (r < 0)
                return r;
        return config_parse_path(v, ret, reason);
}

int config_parse_strv(const char *v, void *ret, const char **reason) {
        char **l = NULL;
        int r = strv_split(v, ", \t", &l);
        if (r < 0) {
                *reason = "out of memory";
                return r;
        }
        if (!l[0])
                l = strv_free(l); /* empty list → NULL, like an empty string */
        *(char ***) ret = l;
        return 0;
}

int config_parse_mode(const char *v, void *ret, const char **reason) {
        char *end;

        errno = 0;
        unsigned long m = strtoul(v, &end, 8);
        if (isempty(v) || *end || errno != 0 || m > 07777) {
                *reason = "expected an octal file mode such as 0660";
                return -EINVAL;
        }
        *(mode_t *) ret = (mode_t) m;
        return 0;
}
