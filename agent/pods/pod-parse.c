/* SPDX-License-Identifier: MIT */
/* The Pod JSON parser: a v1 Pod object (a static pod file or an apiserver object) read into
 * the pod model, checked field by field so that every refusal names its JSON path. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pods.h"
#include "strv.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(cJSON *, cJSON_Delete);

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
        qsort(*kv, *n, sizeof(struct pod_kv), pod_kv_compare);
        /* Duplicate keys are legal JSON, but which one wins would be an accident of the parser. */
        for (size_t i = 1; i < *n; i++)
                if (streq((*kv)[i - 1].key, (*kv)[i].key))
                        return parse_error(error, "metadata.%s: duplicate key \"%s\"", key, (*kv)[i].key);
        return 1;
}

/* metadata.ownerReferences[]: only a Node owner is kept (a mirror pod's kubelet). */
static int parse_owner_node(struct pod *p, const cJSON *meta, char **error) {
        const cJSON *refs, *e;
        size_t i = 0;
        int r;

        r = get_array(meta, "metadata", "ownerReferences", &refs, error);
        if (r <= 0)
                return r;
        cJSON_ArrayForEach(e, refs) {
                _cleanup_free_ char *kind = NULL, *api_version = NULL, *name = NULL;
                char path[48];

                (void) snprintf(path, sizeof(path), "metadata.ownerReferences[%zu]", i++);
                if (!cJSON_IsObject(e))
                        return parse_error(error, "%s: not an object", path);
                if ((r = get_string(e, path, "kind", &kind, error)) < 0 ||
                    (r = get_string(e, path, "apiVersion", &api_version, error)) < 0 ||
                    (r = get_string(e, path, "name", &name, error)) < 0)
                        return r;
                if (!streq_ptr(kind, "Node") || !streq_ptr(api_version, "v1") || isempty(name))
                        continue;
                if (p->owner_node)
                        return parse_error(error, "%s: a second Node owner", path);
                p->owner_node = TAKE_PTR(name);
        }
        return 0;
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
        return parse_owner_node(p, meta, error);
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

/* spec.readinessGates[].conditionType: every entry must name a condition. */
static int parse_readiness_gates(struct pod *p, const cJSON *spec, char **error) {
        const cJSON *gates, *g;
        size_t n = 0;
        int r;

        r = get_array(spec, "spec", "readinessGates", &gates, error);
        if (r < 0)
                return r;
        p->readiness_gates = calloc(r == 0 ? 1 : (size_t) cJSON_GetArraySize(gates) + 1, sizeof(char *));
        if (!p->readiness_gates)
                return -ENOMEM;
        if (r == 0)
                return 0;
        cJSON_ArrayForEach(g, gates) {
                char path[48];

                (void) snprintf(path, sizeof(path), "spec.readinessGates[%zu]", n);
                if (!cJSON_IsObject(g))
                        return parse_error(error, "%s: not an object", path);
                r = get_string(g, path, "conditionType", &p->readiness_gates[n], error);
                if (r < 0)
                        return r;
                if (r == 0 || isempty(p->readiness_gates[n]))
                        return parse_error(error, "%s.conditionType: missing", path);
                n++;
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
        r = parse_readiness_gates(p, spec, error);
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

/* "containerd://<id>" -> "<id>": the ID the runtime names the container's cgroup with. The
 * runtime's name is not kept: the cgroup path spells it its own way (cri-containerd-, crio-). */
static int container_id_from(const char *value, const char *path, char **ret, char **error) {
        const char *id = strstr(value, "://");

        if (!id || id == value || strspn(value, "abcdefghijklmnopqrstuvwxyz0123456789-.") != (size_t) (id - value))
                return parse_error(error, "%s.containerID: \"%s\" is not <runtime>://<id>", path, value);
        id += 3;
        if (isempty(id) || strlen(id) > 128 || strspn(id, "0123456789abcdefABCDEF") != strlen(id))
                return parse_error(error, "%s.containerID: \"%s\" is not <runtime>://<hex id>", path, value);
        *ret = strdup(id);
        if (!*ret)
                return -ENOMEM;
        for (char *c = *ret; *c; c++)
                *c = (char) tolower((unsigned char) *c);
        return 0;
}

/* Every containerID of one of the status's container lists (a container not started yet has
 * none). */
static int parse_container_list(struct pod *p, const cJSON *status, const char *key, char **error) {
        const cJSON *list, *e;
        char path[80];
        size_t i = 0;
        int r;

        r = get_array(status, "status", key, &list, error);
        if (r <= 0)
                return r;
        cJSON_ArrayForEach(e, list) {
                _cleanup_free_ char *value = NULL;
                char *id = NULL;

                (void) snprintf(path, sizeof(path), "status.%s[%zu]", key, i++);
                if (!cJSON_IsObject(e))
                        return parse_error(error, "%s: not an object", path);
                r = get_string(e, path, "containerID", &value, error);
                if (r < 0)
                        return r;
                if (isempty(value))
                        continue;
                r = container_id_from(value, path, &id, error);
                if (r >= 0)
                        r = strv_push(&p->container_ids, id);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int parse_container_ids(struct pod *p, const cJSON *status, char **error) {
        static const char *const lists[] = { "containerStatuses", "initContainerStatuses",
                                             "ephemeralContainerStatuses" };
        int r;

        p->container_ids = calloc(1, sizeof(char *));
        if (!p->container_ids)
                return -ENOMEM;
        for (size_t i = 0; i < ELEMENTSOF(lists); i++) {
                r = parse_container_list(p, status, lists[i], error);
                if (r < 0)
                        return r;
        }
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
                r = get_string(c, path, "reason", &cond->reason, error);
                if (r >= 0)
                        r = get_string(c, path, "message", &cond->message, error);
                if (r < 0)
                        return r;
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
        r = parse_container_ids(p, status, error);
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

int pod_parse_json(const cJSON *obj, const char *uid_fallback, struct pod **ret, char **ret_error) {
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

int pod_parse_json_text(const char *text, size_t size, const char *uid_fallback, struct pod **ret,
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
        return pod_parse_json(obj, uid_fallback, ret, ret_error);
}
