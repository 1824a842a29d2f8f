/* SPDX-License-Identifier: MIT */
/* Paths and routes of the local API: the raw path split into percent-decoded segments (so
 * that an encoded "/" stays inside its capture), and the route table searched for the
 * request's pattern and method. */
#include <errno.h>
#include <string.h>

#include "api-internal.h"

static int percent_decode(const char *s, size_t n, char **ret) {
        _cleanup_free_ char *d = NULL;
        size_t o = 0;

        d = malloc(n + 1);
        if (!d)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                int hi, lo;

                if (s[i] != '%') {
                        d[o++] = s[i];
                        continue;
                }
                if (n - i < 3)
                        return -EBADMSG;
                hi = unhexchar(s[i + 1]);
                lo = unhexchar(s[i + 2]);
                /* %00 would cut the string short behind the handler's back. */
                if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
                        return -EBADMSG;
                d[o++] = (char) (hi << 4 | lo);
                i += 2;
        }
        d[o] = 0;
        *ret = TAKE_PTR(d);
        return 0;
}

/* Splits the raw path (query already cut off) into percent-decoded segments, so that an
 * encoded "/" inside a capture stays inside it. "/" is one empty segment. */
int api_route_path_segments(const char *raw, size_t raw_len, char ***ret, size_t *ret_n) {
        char **segments = NULL;
        size_t n = 0;
        const char *p, *end = raw + raw_len;
        int r = 0;

        if (raw_len == 0 || raw[0] != '/')
                return -EBADMSG;
        for (p = raw + 1;; p++) {
                const char *slash = memchr(p, '/', (size_t) (end - p));
                const char *stop = slash ? slash : end;
                char **grown;

                grown = realloc(segments, (n + 1) * sizeof(char *));
                if (!grown) {
                        r = -ENOMEM;
                        break;
                }
                segments = grown;
                r = percent_decode(p, (size_t) (stop - p), &segments[n]);
                if (r < 0)
                        break;
                n++;
                if (!slash)
                        break;
                p = slash;
        }
        if (r < 0) {
                for (size_t i = 0; i < n; i++)
                        free(segments[i]);
                free(segments);
                return r;
        }
        *ret = segments;
        *ret_n = n;
        return 0;
}

unsigned api_route_pattern_captures(const char *pattern) {
        unsigned n = 0;

        for (const char *p = pattern; (p = strstr(p, "/{}")); p += 3)
                if (p[3] == '/' || p[3] == 0)
                        n++;
        return n;
}

static bool pattern_match(const char *pattern, char *const *segments, size_t n_segments,
                          unsigned params[static API_PARAMS_MAX], unsigned *ret_n_params) {
        const char *p = pattern;
        size_t i = 0;
        unsigned k = 0;

        while (*p == '/') {
                size_t len;

                p++;
                len = strcspn(p, "/");
                if (i >= n_segments)
                        return false;
                if (len == 2 && strncmp(p, "{}", 2) == 0) {
                        if (isempty(segments[i]) || k >= API_PARAMS_MAX)
                                return false;
                        params[k++] = (unsigned) i;
                } else if (strlen(segments[i]) != len || strncmp(segments[i], p, len) != 0)
                        return false;
                i++;
                p += len;
        }
        if (*p || i != n_segments)
                return false;
        *ret_n_params = k;
        return true;
}

static bool method_matches(const char *route_method, const char *method) {
        /* MHD answers HEAD like GET, without the body. */
        return streq(route_method, method) || (streq(method, "HEAD") && streq(route_method, "GET"));
}

/* Appends method to a ", "-separated list unless it is there already. */
static int allow_add(char **allow, const char *method) {
        size_t len = *allow ? strlen(*allow) : 0, mlen = strlen(method);
        char *grown;

        for (const char *p = *allow; p && *p; p += strspn(p, ", ")) {
                size_t l = strcspn(p, ",");

                if (l == mlen && strncmp(p, method, l) == 0)
                        return 0;
                p += l;
        }
        grown = realloc(*allow, len + mlen + 3);
        if (!grown)
                return -ENOMEM;
        if (len > 0) {
                memcpy(grown + len, ", ", 2);
                len += 2;
        }
        memcpy(grown + len, method, mlen + 1);
        *allow = grown;
        return 0;
}

/* The order routes are tried in: stand-ins that preempt, the ordinary routes, then the other
 * stand-ins (api_add_standin_routes()). */
enum match_pass {
        PASS_PREEMPTING,
        PASS_ORDINARY,
        PASS_STANDING_IN,
        _PASS_MAX,
};

static bool route_in_pass(const struct route_entry *e, enum match_pass pass) {
        bool preempting = e->standin && e->preempt && e->preempt(e->userdata);

        switch (pass) {
        case PASS_PREEMPTING:
                return preempting;
        case PASS_ORDINARY:
                return !e->standin;
        case PASS_STANDING_IN:
                return e->standin && !preempting;
        case _PASS_MAX:
                break;
        }
        return false;
}

/* Finds the route for the request. When only the method is wrong, -EOPNOTSUPP and
 * ret_allow gets the methods the path does take ("GET, POST"). */
int api_route_match(struct api_request *r, char **ret_allow) {
        const struct api *a = r->api;
        _cleanup_free_ char *allow = NULL;
        unsigned params[API_PARAMS_MAX];
        unsigned n_params;
        int k;

        for (int pass = 0; pass < _PASS_MAX; pass++)
                for (size_t i = 0; i < a->n_routes; i++) {
                        struct route_entry *e = a->routes[i];

                        if (!route_in_pass(e, (enum match_pass) pass))
                                continue;
                        if (!pattern_match(e->pattern, r->segments, r->n_segments, params, &n_params))
                                continue;
                        if (method_matches(e->method, r->method)) {
                                r->route = api_route_entry_ref(e);
                                memcpy(r->params, params, sizeof(params));
                                r->n_params = n_params;
                                return 0;
                        }
                        k = allow_add(&allow, e->method);
                        if (k < 0)
                                return k;
                }
        if (!allow)
                return -ENOENT;
        *ret_allow = TAKE_PTR(allow);
        return -EOPNOTSUPP;
}
