/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs.h"
#include "macro.h"
#include "peer-service.h"
#include "service.h"
#include "strv.h"

#define SERVICE_SUFFIX ".service"

static int parse_unit(const char *v, void *ret, const char **reason) {
        if (!isempty(v) && !peer_service_unit_valid(v)) {
                *reason = "expected a systemd service unit name (NAME.service)";
                return -EINVAL;
        }
        return config_parse_string(v, ret, reason);
}

static int parse_user(const char *v, void *ret, const char **reason) {
        if (!isempty(v) && !getpwnam(v)) {
                *reason = "no such user";
                return -EINVAL;
        }
        return config_parse_string(v, ret, reason);
}

/* A SPIFFE ID as the spec has it: spiffe://, a trust domain of [a-z0-9.-_], then a path of
 * non-empty segments of [a-zA-Z0-9.-_], none "." or "..". Whether the trust domain is the
 * node's is the identity module's to check. */
static bool spiffe_id_valid(const char *v) {
        if (!startswith(v, "spiffe://"))
                return false;
        const char *td = v + strlen("spiffe://");
        size_t td_len = strspn(td, "abcdefghijklmnopqrstuvwxyz0123456789.-_");
        if (td_len == 0 || td[td_len] != '/')
                return false;
        for (const char *seg = td + td_len + 1;;) {
                size_t n = strspn(seg, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_");
                if (n == 0 || (n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.'))
                        return false;
                if (seg[n] == 0)
                        return strlen(v) <= 2048;
                if (seg[n] != '/')
                        return false;
                seg += n + 1;
        }
}

static int parse_spiffe_id(const char *v, void *ret, const char **reason) {
        if (!isempty(v) && !spiffe_id_valid(v)) {
                *reason = "expected spiffe://TRUST-DOMAIN/PATH";
                return -EINVAL;
        }
        return config_parse_string(v, ret, reason);
}

#define FIELD(f) offsetof(struct service_settings, f)
static const struct config_key service_keys[] = {
        { "unit", parse_unit, FIELD(unit), NULL, config_free_string },
        { "spiffe-id", parse_spiffe_id, FIELD(spiffe_id), NULL, config_free_string },
        { "user", parse_user, FIELD(user), NULL, config_free_string },
        { "tls-dir", config_parse_path, FIELD(tls_dir), NULL, config_free_string },
        { "dns-names", config_parse_strv, FIELD(dns_names), NULL, config_free_strv },
        {}
};
#undef FIELD

static bool dns_name_valid(const char *s) {
        size_t n = strlen(s);
        return n > 0 && n <= 253 && s[0] != '.' && s[0] != '-' && s[n - 1] != '.' && !strstr(s, "..") &&
               strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-.*") == n;
}

static const char *service_check(const void *object) {
        const struct service_settings *s = object;
        if (s->tls_dir && streq(s->tls_dir, "/"))
                return "tls-dir may not be /";
        STRV_FOREACH(d, s->dns_names)
                if (!dns_name_valid(*d))
                        return "dns-names: expected lowercase DNS names";
        return NULL;
}

static int default_unit(struct config *c, struct service_settings *s, char **ret_error) {
        if (s->unit)
                return 0;
        if (asprintf(&s->unit, "%s" SERVICE_SUFFIX, s->name) < 0) {
                s->unit = NULL;
                return -ENOMEM;
        }
        if (peer_service_unit_valid(s->unit))
                return 0;
        _cleanup_free_ char *section = NULL;
        if (asprintf(&section, SERVICE_SECTION_PREFIX "%s", s->name) < 0)
                return -ENOMEM;
        return config_section_error(c, section, ret_error, "unit: %s is not a unit name: set unit =", s->unit);
}

int service_parse_all(struct config *c, struct service_settings ***ret, size_t *ret_n, char **ret_error) {
        struct service_settings **s = NULL;
        size_t n = 0;
        int r;

        r = config_parse_instances(c, SERVICE_SECTION_PREFIX, service_keys, sizeof(struct service_settings), service_check,
                                   (void ***) &s, &n, ret_error);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n && r >= 0; i++)
                r = default_unit(c, s[i], ret_error);
        /* One unit, one identity: two sections for it would make its answer depend on the order. */
        for (size_t j = 1; j < n && r >= 0; j++)
                for (size_t i = 0; i < j && r >= 0; i++)
                        if (streq(s[i]->unit, s[j]->unit)) {
                                _cleanup_free_ char *section = NULL;
                                r = asprintf(&section, SERVICE_SECTION_PREFIX "%s", s[j]->name) < 0
                                            ? -ENOMEM
                                            : config_section_error(c, section, ret_error, "unit %s is also [service.%s]'s",
                                                                   s[j]->unit, s[i]->name);
                        }
        if (r < 0) {
                service_free_all(s, n);
                return r;
        }
        *ret = s;
        *ret_n = n;
        return 0;
}

/* Whether path is dir or below it (both absolute; trailing slashes ignored). */
static bool path_at_or_below(const char *path, const char *dir) {
        size_t n = strlen(dir);
        while (n > 1 && dir[n - 1] == '/')
                n--;
        return strncmp(path, dir, n) == 0 && (path[n] == 0 || path[n] == '/' || n == 1);
}

int service_check_tls_dirs(struct config *c, struct service_settings *const *s, size_t n, const char *socket_path,
                            char **ret_error) {
        _cleanup_free_ char *socket_dir = NULL;
        int r = fs_path_split(socket_path, &socket_dir, NULL);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                if (!s[i]->tls_dir || !path_at_or_below(s[i]->tls_dir, socket_dir))
                        continue;
                _cleanup_free_ char *section = NULL;
                if (asprintf(&section, SERVICE_SECTION_PREFIX "%s", s[i]->name) < 0)
                        return -ENOMEM;
                return config_section_error(c, section, ret_error,
                                            "tls-dir %s is in the socket's directory %s, which pods may mount: "
                                            "keys never go there", s[i]->tls_dir, socket_dir);
        }
        return 0;
}

void service_free_all(struct service_settings **s, size_t n) {
        config_instances_free(service_keys, (void **) s, n);
}

const struct service_settings *service_find_unit(struct service_settings *const *s, size_t n, const char *unit) {
        for (size_t i = 0; unit && i < n; i++)
                if (streq(s[i]->unit, unit))
                        return s[i];
        return NULL;
}
