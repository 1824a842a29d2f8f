/* SPDX-License-Identifier: MIT */
/* The ServerSet member format (see serverset.h). */

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "macro.h"
#include "serverset.h"

_printf_(3, 4) static int fail(char **ret_error, int r, const char *fmt, ...) {
        if (ret_error) {
                va_list ap;
                va_start(ap, fmt);
                if (vasprintf(ret_error, fmt, ap) < 0)
                        *ret_error = NULL;
                va_end(ap);
        }
        return r;
}

/* A decimal number in [min, max] with nothing else around it. */
static int parse_number(const char *s, long long min, long long max, long long *ret) {
        char *end = NULL;
        long long v;

        if (isempty(s) || s[0] == '+' || s[0] == '-' || s[0] == ' ')
                return -EINVAL;
        errno = 0;
        v = strtoll(s, &end, 10);
        if (errno != 0 || !end || *end != 0 || v < min || v > max)
                return -EINVAL;
        *ret = v;
        return 0;
}

static cJSON *endpoint_json(const char *host, unsigned port) {
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddStringToObject(o, "host", host) || !cJSON_AddNumberToObject(o, "port", port))
                return cJSON_Delete(o), NULL;
        return o;
}

void serverset_entry_done(struct serverset_entry *e) {
        e->alive = mfree(e->alive);
        e->stopping = mfree(e->stopping);
        e->endpoint = mfree(e->endpoint);
        e->host = mfree(e->host);
        e->port = 0;
}

int serverset_build(const struct pod *p, struct serverset_entry *ret, char **ret_error) {
        const char *ip = pod_primary_ip(p);
        const char *port_spec = pod_annotation(p, ANNOTATION_PORT);
        const char *shard_spec = pod_annotation(p, ANNOTATION_SHARD);
        const char *service_name = NULL;
        long long port = 0, shard = -1;

        if (!ip)
                return fail(ret_error, -EADDRNOTAVAIL,
                            "the pod has no IP yet (status.podIP): nothing to register until it has one");
        if (shard_spec && parse_number(shard_spec, 0, INT32_MAX, &shard) < 0)
                return fail(ret_error, -EINVAL, ANNOTATION_SHARD "=%s is not a number in 0..2147483647", shard_spec);

        if (port_spec) {
                if (parse_number(port_spec, 1, 65535, &port) == 0) {
                        for (size_t i = 0; i < p->n_ports; i++)
                                if (p->ports[i].port == port && p->ports[i].name) {
                                        service_name = p->ports[i].name;
                                        break;
                                }
                } else {
                        for (size_t i = 0; i < p->n_ports; i++)
                                if (streq_ptr(p->ports[i].name, port_spec)) {
                                        port = p->ports[i].port;
                                        service_name = p->ports[i].name;
                                        break;
                                }
                        if (port == 0)
                                return fail(ret_error, -EINVAL,
                                            ANNOTATION_PORT "=%s is neither a port number nor the name of a container port",
                                            port_spec);
                }
        } else if (p->n_ports > 0) {
                port = p->ports[0].port;
                service_name = p->ports[0].name;
        } else
                return fail(ret_error, -EINVAL, "no " ANNOTATION_PORT " annotation and no container port");
        if (port < 1 || port > 65535)
                return fail(ret_error, -EINVAL, "container port %lld is not in 1..65535", port);

        cJSON *root = cJSON_CreateObject(), *additional = NULL, *service = endpoint_json(ip, (unsigned) port);
        struct serverset_entry e = {};
        if (!root || !service || !cJSON_AddItemToObject(root, "serviceEndpoint", service)) {
                cJSON_Delete(service);
                cJSON_Delete(root);
                return -ENOMEM;
        }
        additional = cJSON_AddObjectToObject(root, "additionalEndpoints");
        if (!additional)
                goto oom;
        for (size_t i = 0; i < p->n_ports; i++) {
                const struct pod_port *pp = &p->ports[i];
                if (!pp->name || streq_ptr(pp->name, service_name) || cJSON_HasObjectItem(additional, pp->name) ||
                    pp->port == 0)
                        continue;
                cJSON *x = endpoint_json(ip, pp->port);
                if (!x || !cJSON_AddItemToObject(additional, pp->name, x)) {
                        cJSON_Delete(x);
                        goto oom;
                }
        }
        cJSON *status = cJSON_AddStringToObject(root, "status", "ALIVE");
        if (!status)
                goto oom;
        if (shard >= 0 && !cJSON_AddNumberToObject(root, "shard", (double) shard))
                goto oom;

        /* The same tree twice: only the status differs, in place (the key order stays). */
        e.alive = cJSON_PrintUnformatted(root);
        if (!e.alive || !cJSON_SetValuestring(status, "STOPPING"))
                goto oom;
        e.stopping = cJSON_PrintUnformatted(root);
        e.host = strdup(ip);
        e.port = (unsigned) port;
        if (!e.stopping || !e.host ||
            asprintf(&e.endpoint, strchr(ip, ':') ? "[%s]:%lld" : "%s:%lld", ip, port) < 0) {
                e.endpoint = NULL;
                goto oom;
        }
        cJSON_Delete(root);
        *ret = e;
        return 0;
oom:
        cJSON_Delete(root);
        serverset_entry_done(&e);
        return -ENOMEM;
}

int serverset_parse(const char *data, size_t size, struct serverset_member *ret) {
        struct serverset_member m = { .shard = -1 };
        cJSON *root, *service, *host, *port, *status, *shard;
        int r = -EINVAL;

        if (!data || size == 0 || size > (1u << 20))
                return -EINVAL;
        root = cJSON_ParseWithLength(data, size);
        if (!root)
                return -EINVAL;
        service = cJSON_GetObjectItemCaseSensitive(root, "serviceEndpoint");
        host = cJSON_GetObjectItemCaseSensitive(service, "host");
        port = cJSON_GetObjectItemCaseSensitive(service, "port");
        if (!cJSON_IsObject(root) || !cJSON_IsObject(service) || !cJSON_IsString(host) || !cJSON_IsNumber(port))
                goto out;
        if (port->valuedouble < 1 || port->valuedouble > 65535 || port->valuedouble != (double) (int) port->valuedouble)
                goto out;
        if (strlen(host->valuestring) >= sizeof(m.host) || host->valuestring[0] == 0)
                goto out;
        strcpy(m.host, host->valuestring);
        m.port = (uint16_t) port->valuedouble;
        status = cJSON_GetObjectItemCaseSensitive(root, "status");
        if (cJSON_IsString(status))
                snprintf(m.status, sizeof(m.status), "%s", status->valuestring);
        shard = cJSON_GetObjectItemCaseSensitive(root, "shard");
        if (cJSON_IsNumber(shard) && shard->valuedouble >= 0 && shard->valuedouble <= INT32_MAX)
                m.shard = (int64_t) shard->valuedouble;
        *ret = m;
        r = 0;
out:
        cJSON_Delete(root);
        return r;
}

bool serverset_path_valid(const char *path) {
        if (!path || path[0] != '/' || path[1] == 0 || strlen(path) > 1024)
                return false;
        for (const char *seg = path + 1; seg;) {
                const char *end = strchr(seg, '/');
                size_t n = end ? (size_t) (end - seg) : strlen(seg);
                if (n == 0 || (n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.'))
                        return false;
                for (size_t i = 0; i < n; i++)
                        if ((unsigned char) seg[i] < 0x20 || seg[i] == 0x7f)
                                return false;
                seg = end ? end + 1 : NULL;
        }
        return strcmp(path, "/zookeeper") != 0 && strncmp(path, "/zookeeper/", 11) != 0;
}

#define NAMESPACE_TEMPLATE "${namespace}"

static size_t path_depth(const char *path) {
        size_t n = 0;
        for (const char *c = path; *c; c++)
                if (*c == '/')
                        n++;
        return n;
}

/* prefix with every "${namespace}" replaced by namespace; NULL on OOM. */
static char *prefix_expand(const char *prefix, const char *namespace) {
        size_t tl = strlen(NAMESPACE_TEMPLATE), nl = strlen(namespace), n = 0;
        const char *p, *hit;
        char *out, *o;

        for (p = prefix; (hit = strstr(p, NAMESPACE_TEMPLATE)); p = hit + tl)
                n++;
        out = malloc(strlen(prefix) + n * nl + 1);
        if (!out)
                return NULL;
        o = out;
        for (p = prefix; (hit = strstr(p, NAMESPACE_TEMPLATE)); p = hit + tl) {
                memcpy(o, p, (size_t) (hit - p));
                o += hit - p;
                memcpy(o, namespace, nl);
                o += nl;
        }
        strcpy(o, p);
        return out;
}

/* path is prefix or below it, comparing whole segments ("/a/bc" is not below "/a/b"). */
static bool path_at_or_below(const char *path, const char *prefix) {
        size_t n = strlen(prefix);
        if (streq(prefix, "/"))
                return true;
        return strncmp(path, prefix, n) == 0 && (path[n] == 0 || path[n] == '/');
}

bool serverset_prefix_valid(const char *prefix) {
        _cleanup_free_ char *x = NULL;
        if (!prefix)
                return false;
        if (streq(prefix, "/"))
                return true;
        x = prefix_expand(prefix, "ns");
        return x && serverset_path_valid(x) && path_depth(x) <= SERVERSET_MAX_DEPTH;
}

int serverset_path_allowed(const char *path, char *const *prefixes, const char *namespace, char **ret_floor,
                           char **ret_error) {
        size_t depth = path ? path_depth(path) : 0;

        if (ret_floor)
                *ret_floor = NULL;
        if (ret_error)
                *ret_error = NULL;
        if (!path)
                return -EINVAL;
        if (depth > SERVERSET_MAX_DEPTH) {
                if (ret_error && asprintf(ret_error, ANNOTATION_SERVERSET "=%s has %zu path segments, more than %d",
                                          path, depth, SERVERSET_MAX_DEPTH) < 0)
                        *ret_error = NULL;
                return -E2BIG;
        }
        if (!prefixes || !prefixes[0])
                return 0;
        /* A namespace that is not one path segment matches no template (Kubernetes never makes one). */
        bool ns_ok = namespace && namespace[0] && !strchr(namespace, '/') && !streq(namespace, ".") &&
                     !streq(namespace, "..");
        for (size_t i = 0; prefixes[i]; i++) {
                _cleanup_free_ char *x = NULL;
                if (strstr(prefixes[i], NAMESPACE_TEMPLATE) && !ns_ok)
                        continue;
                x = prefix_expand(prefixes[i], ns_ok ? namespace : "");
                if (!x)
                        return -ENOMEM;
                if (path_at_or_below(path, x)) {
                        if (ret_floor)
                                *ret_floor = TAKE_PTR(x);
                        return 0;
                }
        }
        if (ret_error) {
                _cleanup_free_ char *list = NULL;
                size_t len = 0;
                for (size_t i = 0; prefixes[i]; i++)
                        len += strlen(prefixes[i]) + 2;
                list = calloc(1, len + 1);
                if (list)
                        for (size_t i = 0; prefixes[i]; i++) {
                                if (i > 0)
                                        strcat(list, ", ");
                                strcat(list, prefixes[i]);
                        }
                if (asprintf(ret_error, ANNOTATION_SERVERSET "=%s is outside [zookeeper] allowed-prefixes (%s) "
                             "for namespace %s", path, strempty(list), strempty(namespace)) < 0)
                        *ret_error = NULL;
        }
        return -EPERM;
}
