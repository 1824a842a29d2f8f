/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pods.h"
#include "strv.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(cJSON *, cJSON_Delete);

/* ---- the model ---- */

static void kv_array_free(struct pod_kv *kv, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(kv[i].key);
                free(kv[i].value);
        }
        free(kv);
}

static struct pod *pod_free(struct pod *p) {
        if (!p)
                return NULL;
        free(p->uid);
        free(p->namespace);
        free(p->name);
        free(p->node_name);
        free(p->service_account);
        free(p->phase);
        free(p->resource_version);
        strv_free(p->ips);
        for (size_t i = 0; i < p->n_conditions; i++)
                free(p->conditions[i].type);
        free(p->conditions);
        kv_array_free(p->annotations, p->n_annotations);
        kv_array_free(p->labels, p->n_labels);
        for (size_t i = 0; i < p->n_ports; i++) {
                free(p->ports[i].name);
                free(p->ports[i].protocol);
        }
        free(p->ports);
        free(p->source);
        free(p);
        return NULL;
}

struct pod *pod_ref(struct pod *p) {
        if (p)
                p->n_ref++;
        return p;
}

struct pod *pod_unref(struct pod *p) {
        if (!p)
                return NULL;
        if (--p->n_ref > 0)
                return NULL;
        return pod_free(p);
}

static int dup_kv(const struct pod_kv *kv, size_t n, struct pod_kv **ret) {
        struct pod_kv *c = calloc(MAX(n, 1u), sizeof(struct pod_kv));
        if (!c)
                return -ENOMEM;
        *ret = c; /* owned by the caller's pod from here on, also half-filled */
        for (size_t i = 0; i < n; i++)
                if (!(c[i].key = strdup(kv[i].key)) || !(c[i].value = strdup(kv[i].value)))
                        return -ENOMEM;
        return 0;
}

static int dup_opt(const char *s, char **ret) {
        *ret = s ? strdup(s) : NULL;
        return s && !*ret ? -ENOMEM : 0;
}

int pod_copy_with_ips(const struct pod *p, char *const *ips, struct pod **ret) {
        struct pod *c;
        int r;

        if (!p || !ret)
                return -EINVAL;
        c = calloc(1, sizeof(struct pod));
        if (!c)
                return -ENOMEM;
        c->n_ref = 1;
        c->host_network = p->host_network;
        r = dup_opt(p->uid, &c->uid);
        if (r >= 0) r = dup_opt(p->namespace, &c->namespace);
        if (r >= 0) r = dup_opt(p->name, &c->name);
        if (r >= 0) r = dup_opt(p->node_name, &c->node_name);
        if (r >= 0) r = dup_opt(p->service_account, &c->service_account);
        if (r >= 0) r = dup_opt(p->phase, &c->phase);
        if (r >= 0) r = dup_opt(p->resource_version, &c->resource_version);
        if (r >= 0) r = dup_opt(p->source, &c->source);
        if (r >= 0) r = strv_copy(ips, &c->ips);
        if (r >= 0 && !c->ips)
                r = (c->ips = calloc(1, sizeof(char *))) ? 0 : -ENOMEM;
        if (r >= 0 && p->n_conditions > 0) {
                c->conditions = calloc(p->n_conditions, sizeof(struct pod_condition));
                r = c->conditions ? 0 : -ENOMEM;
                for (size_t i = 0; r >= 0 && i < p->n_conditions; i++) {
                        c->n_conditions++;
                        c->conditions[i].status = p->conditions[i].status;
                        r = dup_opt(p->conditions[i].type, &c->conditions[i].type);
                }
        }
        if (r >= 0 && p->n_annotations > 0) {
                c->n_annotations = p->n_annotations;
                r = dup_kv(p->annotations, p->n_annotations, &c->annotations);
        }
        if (r >= 0 && p->n_labels > 0) {
                c->n_labels = p->n_labels;
                r = dup_kv(p->labels, p->n_labels, &c->labels);
        }
        if (r >= 0 && p->n_ports > 0) {
                c->ports = calloc(p->n_ports, sizeof(struct pod_port));
                r = c->ports ? 0 : -ENOMEM;
                for (size_t i = 0; r >= 0 && i < p->n_ports; i++) {
                        c->n_ports++;
                        c->ports[i].port = p->ports[i].port;
                        r = dup_opt(p->ports[i].name, &c->ports[i].name);
                        if (r >= 0)
                                r = dup_opt(p->ports[i].protocol, &c->ports[i].protocol);
                }
        }
        if (r < 0) {
                pod_free(c);
                return r;
        }
        *ret = c;
        return 0;
}

/* ---- parsing ---- */

/* Records what is wrong (the message names the JSON path) and returns -EINVAL; -ENOMEM if even
 * the message cannot be allocated. */
_printf_(2, 3) static int parse_error(char **error, const char *fmt, ...) {
        va_list ap;
        char *m;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&m, fmt, ap);
        va_end(ap);
        if (r < 0)
                return -ENOMEM;
        free(*error);
        *error = m;
        return -EINVAL;
}

static int type_error(char **error, const char *path, const char *key, const char *what) {
        if (isempty(path))
                return parse_error(error, "%s: not %s", key, what);
        return parse_error(error, "%s.%s: not %s", path, key, what);
}

/* Go's encoder writes null for an unset pointer, slice or map: the same as absent. */
static const cJSON *field(const cJSON *obj, const char *key) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
        return cJSON_IsNull(v) ? NULL : v;
}

/* The helpers below write straight into the pod under construction, which is freed whole on
 * failure. They return 0 when the field is absent, 1 when it was read. */

static int get_string(const cJSON *obj, const char *path, const char *key, char **ret, char **error) {
        const cJSON *v = field(obj, key);
        if (!v)
                return 0;
        if (!cJSON_IsString(v))
                return type_error(error, path, key, "a string");
        char *s = strdup(v->valuestring);
        if (!s)
                return -ENOMEM;
        free(*ret);
        *ret = s;
        return 1;
}

static int get_object(const cJSON *obj, const char *path, const char *key, const cJSON **ret, char **error) {
        const cJSON *v = field(obj, key);
        *ret = NULL;
        if (!v)
                return 0;
        if (!cJSON_IsObject(v))
                return type_error(error, path, key, "an object");
        *ret = v;
        return 1;
}

static int get_array(const cJSON *obj, const char *path, const char *key, const cJSON **ret, char **error) {
        const cJSON *v = field(obj, key);
        *ret = NULL;
        if (!v)
                return 0;
        if (!cJSON_IsArray(v))
                return type_error(error, path, key, "an array");
        *ret = v;
        return 1;
}

static int get_bool(const cJSON *obj, const char *path, const char *key, bool *ret, char **error) {
        const cJSON *v = field(obj, key);
        if (!v)
                return 0;
        if (!cJSON_IsBool(v))
                return type_error(error, path, key, "a boolean");
        *ret = cJSON_IsTrue(v);
        return 1;
}

static int dup_default(char **s, const char *def) {
        if (!isempty(*s))
                return 0;
        free(*s);
        *s = strdup(def);
        return *s ? 0 : -ENOMEM;
}

/* Kubernetes validates these at the apiserver; static pods from files are not, and other modules
 * put namespaces, names and uids into file paths and cgroup lookups. So enforce the same rules
 * here: nothing the apiserver accepts is refused, and nothing like "../x" gets through. */
static bool dns_label_valid(const char *s, size_t len) {
        if (len == 0 || len > 63)
                return false;
        for (size_t i = 0; i < len; i++) {
                char c = s[i];
                bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
                if (!alnum && (c != '-' || i == 0 || i == len - 1))
                        return false;
        }
        return true;
}

static bool dns_subdomain_valid(const char *s) {
        size_t len = strlen(s);
        if (len == 0 || len > 253)
                return false;
        for (const char *p = s;;) {
                size_t n = strcspn(p, ".");
                if (!dns_label_valid(p, n))
                        return false;
                if (!p[n])
                        return true;
                p += n + 1;
        }
}

static bool uid_valid(const char *s) {
        size_t len = strlen(s);
        if (len == 0 || len > 128 || s[0] == '.')
                return false;
        return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") == len;
}

static bool ip_valid(const char *s) {
        unsigned char buf[sizeof(struct in6_addr)];
        return inet_pton(AF_INET, s, buf) == 1 || inet_pton(AF_INET6, s, buf) == 1;
}

static int kv_compare(const void *a, const void *b) {
        return strcmp(((const struct pod_kv *) a)->key, ((const struct pod_kv *) b)->key);
}

/* metadata.annotations / metadata.labels: a map of strings, kept sorted by key. */
static int parse_kv(const cJSON *meta, const char *key, struct pod_kv **kv, size_t *n, char **error) {
        const cJSON *m, *v;
        int r;

        r = get_object(meta, "metadata", key, &m, error);
        if (r <= 0)
                return r;

        *kv = calloc(MAX(cJSON_GetArraySize(m), 1), sizeof(struct pod_kv));
        if (!*kv)
                return -ENOMEM;
        cJSON_ArrayForEach(v, m) {
                if (!cJSON_IsString(v))
                        return parse_error(error, "metadata.%s.%s: not a string", key, v->string);
                struct pod_kv *e = &(*kv)[*n];
                e->key = strdup(v->string);
                e->value = strdup(v->valuestring);
                (*n)++;
                if (!e->key || !e->value)
                        return -ENOMEM;
        }
        qsort(*kv, *n, sizeof(struct pod_kv), kv_compare);
        /* Duplicate keys are legal JSON, but which one wins would be an accident of the parser. */
        for (size_t i = 1; i < *n; i++)
                if (streq((*kv)[i - 1].key, (*kv)[i].key))
                        return parse_error(error, "metadata.%s: duplicate key \"%s\"", key, (*kv)[i].key);
        return 1;
}

static int parse_metadata(struct pod *p, const cJSON *obj, const char *uid_fallback, char **error) {
        const cJSON *meta;
        int r;

        r = get_object(obj, NULL, "metadata", &meta, error);
        if (r < 0)
                return r;
        if (r == 0)
                return parse_error(error, "metadata: missing");

        r = get_string(meta, "metadata", "name", &p->name, error);
        if (r < 0)
                return r;
        if (r == 0)
                return parse_error(error, "metadata.name: missing");
        if (!dns_subdomain_valid(p->name))
                return parse_error(error, "metadata.name: \"%s\" is not a valid name "
                                   "(lowercase DNS subdomain, at most 253 characters)", p->name);

        r = get_string(meta, "metadata", "namespace", &p->namespace, error);
        if (r < 0)
                return r;
        if (dup_default(&p->namespace, "default") < 0)
                return -ENOMEM;
        if (!dns_label_valid(p->namespace, strlen(p->namespace)))
                return parse_error(error, "metadata.namespace: \"%s\" is not a valid namespace "
                                   "(lowercase DNS label, at most 63 characters)", p->namespace);

        r = get_string(meta, "metadata", "uid", &p->uid, error);
        if (r < 0)
                return r;
        if (isempty(p->uid)) {
                if (!uid_fallback)
                        return parse_error(error, "metadata.uid: missing");
                if (dup_default(&p->uid, uid_fallback) < 0)
                        return -ENOMEM;
        }
        if (!uid_valid(p->uid))
                return parse_error(error, "metadata.uid: \"%s\" is not a valid uid", p->uid);

        r = get_string(meta, "metadata", "resourceVersion", &p->resource_version, error);
        if (r < 0)
                return r;

        r = parse_kv(meta, "annotations", &p->annotations, &p->n_annotations, error);
        if (r < 0)
                return r;
        r = parse_kv(meta, "labels", &p->labels, &p->n_labels, error);
        if (r < 0)
                return r;
        return 0;
}

static int parse_port(struct pod_port *port, const cJSON *obj, const char *path, char **error) {
        const cJSON *v;
        int r;

        if (!cJSON_IsObject(obj))
                return parse_error(error, "%s: not an object", path);

        r = get_string(obj, path, "name", &port->name, error);
        if (r < 0)
                return r;

        v = field(obj, "containerPort");
        if (!v)
                return parse_error(error, "%s.containerPort: missing", path);
        if (!cJSON_IsNumber(v))
                return type_error(error, path, "containerPort", "a number");
        if (v->valuedouble < 1 || v->valuedouble > 65535 || v->valuedouble != (double) (int) v->valuedouble)
                return parse_error(error, "%s.containerPort: %g is not a port (1..65535)", path, v->valuedouble);
        port->port = (uint16_t) v->valueint;

        r = get_string(obj, path, "protocol", &port->protocol, error);
        if (r < 0)
                return r;
        if (dup_default(&port->protocol, "TCP") < 0)
                return -ENOMEM;
        if (!streq(port->protocol, "TCP") && !streq(port->protocol, "UDP") && !streq(port->protocol, "SCTP"))
                return parse_error(error, "%s.protocol: \"%s\" is not TCP, UDP or SCTP", path, port->protocol);
        return 0;
}

static int parse_containers(struct pod *p, const cJSON *spec, char **error) {
        const cJSON *containers, *c;
        size_t ci = 0;
        int r;

        r = get_array(spec, "spec", "containers", &containers, error);
        if (r <= 0)
                return r;

        cJSON_ArrayForEach(c, containers) {
                const cJSON *ports, *port;
                char path[64];
                size_t pi = 0;

                (void) snprintf(path, sizeof(path), "spec.containers[%zu]", ci);
                if (!cJSON_IsObject(c))
                        return parse_error(error, "%s: not an object", path);
                r = get_array(c, path, "ports", &ports, error);
                if (r < 0)
                        return r;

                cJSON_ArrayForEach(port, ports) {
                        struct pod_port *grown = realloc(p->ports, (p->n_ports + 1) * sizeof(struct pod_port));
                        if (!grown)
                                return -ENOMEM;
                        p->ports = grown;
                        p->ports[p->n_ports++] = (struct pod_port) {};

                        (void) snprintf(path, sizeof(path), "spec.containers[%zu].ports[%zu]", ci, pi);
                        r = parse_port(&p->ports[p->n_ports - 1], port, path, error);
                        if (r < 0)
                                return r;
                        pi++;
                }
                ci++;
        }
        return 0;
}

static int parse_spec(struct pod *p, const cJSON *obj, char **error) {
        const cJSON *spec;
        int r;

        r = get_object(obj, NULL, "spec", &spec, error);
        if (r < 0)
                return r;

        r = get_string(spec, "spec", "nodeName", &p->node_name, error);
        if (r < 0)
                return r;
        if (p->node_name && !*p->node_name) {
                free(p->node_name);
                p->node_name = NULL;
        }

        r = get_string(spec, "spec", "serviceAccountName", &p->service_account, error);
        if (r < 0)
                return r;
        if (isempty(p->service_account)) {
                /* serviceAccount is the deprecated spelling; old manifests still carry it. */
                r = get_string(spec, "spec", "serviceAccount", &p->service_account, error);
                if (r < 0)
                        return r;
        }
        if (dup_default(&p->service_account, "default") < 0)
                return -ENOMEM;

        r = get_bool(spec, "spec", "hostNetwork", &p->host_network, error);
        if (r < 0)
                return r;

        return parse_containers(p, spec, error);
}

static int parse_ips(struct pod *p, const cJSON *status, char **error) {
        const cJSON *ips, *e;
        char *pod_ip = NULL;
        size_t i = 0;
        int r;

        p->ips = calloc(1, sizeof(char *));
        if (!p->ips)
                return -ENOMEM;

        r = get_string(status, "status", "podIP", &pod_ip, error);
        if (r < 0)
                return r;
        if (!isempty(pod_ip) && !ip_valid(pod_ip)) {
                r = parse_error(error, "status.podIP: \"%s\" is not an IP address", pod_ip);
                free(pod_ip);
                return r;
        }

        r = get_array(status, "status", "podIPs", &ips, error);
        if (r < 0) {
                free(pod_ip);
                return r;
        }

        cJSON_ArrayForEach(e, ips) {
                char path[48];
                char *ip = NULL;

                (void) snprintf(path, sizeof(path), "status.podIPs[%zu]", i++);
                if (!cJSON_IsObject(e))
                        r = parse_error(error, "%s: not an object", path);
                else {
                        r = get_string(e, path, "ip", &ip, error);
                        if (r == 0)
                                r = parse_error(error, "%s.ip: missing", path);
                        else if (r > 0 && !ip_valid(ip))
                                r = parse_error(error, "%s.ip: \"%s\" is not an IP address", path, ip);
                }
                if (r < 0) {
                        free(ip);
                        free(pod_ip);
                        return r;
                }
                r = strv_push(&p->ips, ip);
                if (r < 0) {
                        free(pod_ip);
                        return r;
                }
        }

        /* podIPs is the dual-stack list (podIPs[0] == podIP); older objects have only podIP. */
        if (strv_length(p->ips) == 0 && !isempty(pod_ip))
                return strv_push(&p->ips, pod_ip);
        free(pod_ip);
        return 0;
}

static int parse_conditions(struct pod *p, const cJSON *status, char **error) {
        const cJSON *conditions, *c;
        int r;

        r = get_array(status, "status", "conditions", &conditions, error);
        if (r <= 0)
                return r;

        p->conditions = calloc(MAX(cJSON_GetArraySize(conditions), 1), sizeof(struct pod_condition));
        if (!p->conditions)
                return -ENOMEM;

        cJSON_ArrayForEach(c, conditions) {
                struct pod_condition *cond = &p->conditions[p->n_conditions];
                _cleanup_free_ char *value = NULL;
                char path[48];

                (void) snprintf(path, sizeof(path), "status.conditions[%zu]", p->n_conditions++);
                if (!cJSON_IsObject(c))
                        return parse_error(error, "%s: not an object", path);
                r = get_string(c, path, "type", &cond->type, error);
                if (r < 0)
                        return r;
                if (r == 0)
                        return parse_error(error, "%s.type: missing", path);
                r = get_string(c, path, "status", &value, error);
                if (r < 0)
                        return r;
                if (r == 0)
                        return parse_error(error, "%s.status: missing", path);
                /* "False" and "Unknown" both mean: not (yet) true. */
                cond->status = streq(value, "True");
        }
        return 0;
}

static int parse_status(struct pod *p, const cJSON *obj, char **error) {
        const cJSON *status;
        int r;

        r = get_object(obj, NULL, "status", &status, error);
        if (r < 0)
                return r;

        r = get_string(status, "status", "phase", &p->phase, error);
        if (r < 0)
                return r;
        if (dup_default(&p->phase, "Pending") < 0)
                return -ENOMEM;

        r = parse_ips(p, status, error);
        if (r < 0)
                return r;
        return parse_conditions(p, status, error);
}

/* kind and apiVersion may be absent (items of a PodList), but a Deployment dropped into pods.d
 * should be named as what it is rather than fail on some missing field. */
static int check_kind(const cJSON *obj, char **error) {
        const cJSON *v;

        v = field(obj, "kind");
        if (v && !cJSON_IsString(v))
                return type_error(error, NULL, "kind", "a string");
        if (v && !streq(v->valuestring, "Pod"))
                return parse_error(error, "kind: \"%s\" is not \"Pod\"", v->valuestring);

        v = field(obj, "apiVersion");
        if (v && !cJSON_IsString(v))
                return type_error(error, NULL, "apiVersion", "a string");
        if (v && !streq(v->valuestring, "v1"))
                return parse_error(error, "apiVersion: \"%s\" is not \"v1\"", v->valuestring);
        return 0;
}

int pod_from_json(const cJSON *obj, const char *uid_fallback, struct pod **ret, char **ret_error) {
        _cleanup_(pod_unrefp) struct pod *p = NULL;
        _cleanup_free_ char *error = NULL;
        int r;

        if (!obj || !ret)
                return -EINVAL;

        if (!cJSON_IsObject(obj))
                r = parse_error(&error, "top level: not an object");
        else {
                p = calloc(1, sizeof(struct pod));
                if (!p)
                        return -ENOMEM;
                p->n_ref = 1;

                r = check_kind(obj, &error);
                if (r >= 0)
                        r = parse_metadata(p, obj, uid_fallback, &error);
                if (r >= 0)
                        r = parse_spec(p, obj, &error);
                if (r >= 0)
                        r = parse_status(p, obj, &error);
        }
        if (r < 0) {
                if (r == -EINVAL && ret_error && error)
                        *ret_error = TAKE_PTR(error);
                return r;
        }

        *ret = TAKE_PTR(p);
        return 0;
}

int pod_from_json_text(const char *text, size_t size, const char *uid_fallback, struct pod **ret,
                       char **ret_error) {
        _cleanup_(cJSON_Deletep) cJSON *obj = NULL;
        const char *end = NULL;

        if (!text || !ret)
                return -EINVAL;

        obj = cJSON_ParseWithLengthOpts(text, size, &end, false);
        if (obj && end) /* trailing garbage: the file is not what its writer meant */
                while (end < text + size && (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n'))
                        end++;
        if (!obj || (end && end < text + size)) {
                /* cJSON reports where it stopped; an offset is what an editor can use. */
                size_t offset = end && end >= text && end <= text + size ? (size_t) (end - text) : 0;
                char *m;

                if (ret_error) {
                        if (asprintf(&m, "invalid JSON at offset %zu%s", offset,
                                     obj ? " (data after the object)" : "") < 0)
                                return -ENOMEM;
                        *ret_error = m;
                }
                return -EINVAL;
        }
        return pod_from_json(obj, uid_fallback, ret, ret_error);
}

/* ---- queries ---- */

const char *pod_annotation(const struct pod *p, const char *key) {
        struct pod_kv k = { .key = (char *) key }, *hit;

        if (!p || !key || p->n_annotations == 0)
                return NULL;
        hit = bsearch(&k, p->annotations, p->n_annotations, sizeof(struct pod_kv), kv_compare);
        return hit ? hit->value : NULL;
}

bool pod_condition(const struct pod *p, const char *type) {
        if (!p || !type)
                return false;
        for (size_t i = 0; i < p->n_conditions; i++)
                if (streq(p->conditions[i].type, type))
                        return p->conditions[i].status;
        return false;
}

bool pod_is_ready(const struct pod *p) {
        return pod_condition(p, "Ready");
}

const char *pod_primary_ip(const struct pod *p) {
        return p && p->ips ? p->ips[0] : NULL;
}

static bool kv_equal(const struct pod_kv *a, size_t na, const struct pod_kv *b, size_t nb) {
        if (na != nb)
                return false;
        for (size_t i = 0; i < na; i++)
                if (!streq(a[i].key, b[i].key) || !streq(a[i].value, b[i].value))
                        return false;
        return true;
}

static bool conditions_equal(const struct pod *a, const struct pod *b) {
        if (a->n_conditions != b->n_conditions)
                return false;
        for (size_t i = 0; i < a->n_conditions; i++)
                if (!streq(a->conditions[i].type, b->conditions[i].type) ||
                    a->conditions[i].status != b->conditions[i].status)
                        return false;
        return true;
}

static bool ports_equal(const struct pod *a, const struct pod *b) {
        if (a->n_ports != b->n_ports)
                return false;
        for (size_t i = 0; i < a->n_ports; i++)
                if (!streq_ptr(a->ports[i].name, b->ports[i].name) || a->ports[i].port != b->ports[i].port ||
                    !streq_ptr(a->ports[i].protocol, b->ports[i].protocol))
                        return false;
        return true;
}

bool pod_equal(const struct pod *a, const struct pod *b) {
        if (a == b)
                return true;
        if (!a || !b)
                return false;
        return streq_ptr(a->uid, b->uid) && streq_ptr(a->namespace, b->namespace) &&
               streq_ptr(a->name, b->name) && streq_ptr(a->node_name, b->node_name) &&
               streq_ptr(a->service_account, b->service_account) && streq_ptr(a->phase, b->phase) &&
               a->host_network == b->host_network && strv_equal(a->ips, b->ips) && conditions_equal(a, b) &&
               kv_equal(a->annotations, a->n_annotations, b->annotations, b->n_annotations) &&
               kv_equal(a->labels, a->n_labels, b->labels, b->n_labels) && ports_equal(a, b) &&
               streq_ptr(a->source, b->source);
}

/* ---- the API representation ---- */

static bool add_string(cJSON *o, const char *key, const char *value) {
        return !value || cJSON_AddStringToObject(o, key, value);
}

static bool add_kv(cJSON *o, const char *key, const struct pod_kv *kv, size_t n) {
        cJSON *m = cJSON_AddObjectToObject(o, key);
        if (!m)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!cJSON_AddStringToObject(m, kv[i].key, kv[i].value))
                        return false;
        return true;
}

static bool add_conditions(cJSON *o, const struct pod *p) {
        cJSON *m = cJSON_AddObjectToObject(o, "conditions");
        if (!m)
                return false;
        for (size_t i = 0; i < p->n_conditions; i++) {
                /* The first of a repeated type wins, as in pod_condition(). */
                if (cJSON_GetObjectItemCaseSensitive(m, p->conditions[i].type))
                        continue;
                if (!cJSON_AddBoolToObject(m, p->conditions[i].type, p->conditions[i].status))
                        return false;
        }
        return true;
}

static bool add_ports(cJSON *o, const struct pod *p) {
        cJSON *a = cJSON_AddArrayToObject(o, "ports");
        if (!a)
                return false;
        for (size_t i = 0; i < p->n_ports; i++) {
                cJSON *e = cJSON_CreateObject();
                if (!e)
                        return false;
                cJSON_AddItemToArray(a, e);
                if (!add_string(e, "name", p->ports[i].name) ||
                    !cJSON_AddNumberToObject(e, "port", p->ports[i].port) ||
                    !add_string(e, "protocol", p->ports[i].protocol))
                        return false;
        }
        return true;
}

static bool add_ips(cJSON *o, const struct pod *p) {
        cJSON *a = cJSON_AddArrayToObject(o, "ips");
        if (!a)
                return false;
        STRV_FOREACH(ip, p->ips) {
                cJSON *s = cJSON_CreateString(*ip);
                if (!s)
                        return false;
                cJSON_AddItemToArray(a, s);
        }
        return true;
}

cJSON *pod_to_json(const struct pod *p) {
        _cleanup_(cJSON_Deletep) cJSON *o = NULL;

        if (!p)
                return NULL;
        o = cJSON_CreateObject();
        if (!o)
                return NULL;

        if (!add_string(o, "uid", p->uid) || !add_string(o, "namespace", p->namespace) ||
            !add_string(o, "name", p->name) || !add_string(o, "node", p->node_name) ||
            !add_string(o, "phase", p->phase) || !cJSON_AddBoolToObject(o, "ready", pod_is_ready(p)) ||
            !add_ips(o, p) || !add_string(o, "serviceAccount", p->service_account) ||
            !cJSON_AddBoolToObject(o, "hostNetwork", p->host_network) || !add_conditions(o, p) ||
            !add_kv(o, "annotations", p->annotations, p->n_annotations) ||
            !add_kv(o, "labels", p->labels, p->n_labels) || !add_ports(o, p) ||
            !add_string(o, "source", p->source) || !add_string(o, "resourceVersion", p->resource_version))
                return NULL;

        return TAKE_PTR(o);
}
