/* SPDX-License-Identifier: MIT */
/* The pod model: reference counting, copies, queries, equality and the API representation.
 * Reading a Pod object into the model is pod-parse.c. */
#include <errno.h>
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
        free(p->owner_node);
        free(p->service_account);
        free(p->phase);
        free(p->resource_version);
        strv_free(p->ips);
        strv_free(p->container_ids);
        strv_free(p->readiness_gates);
        for (size_t i = 0; i < p->n_conditions; i++) {
                free(p->conditions[i].type);
                free(p->conditions[i].reason);
                free(p->conditions[i].message);
        }
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
        if (r >= 0) r = dup_opt(p->owner_node, &c->owner_node);
        if (r >= 0) r = dup_opt(p->service_account, &c->service_account);
        if (r >= 0) r = dup_opt(p->phase, &c->phase);
        if (r >= 0) r = dup_opt(p->resource_version, &c->resource_version);
        if (r >= 0) r = dup_opt(p->source, &c->source);
        if (r >= 0) r = strv_copy(ips, &c->ips);
        if (r >= 0 && !c->ips)
                r = (c->ips = calloc(1, sizeof(char *))) ? 0 : -ENOMEM;
        if (r >= 0)
                r = strv_copy(p->container_ids, &c->container_ids);
        if (r >= 0)
                r = strv_copy(p->readiness_gates, &c->readiness_gates);
        if (r >= 0 && p->n_conditions > 0) {
                c->conditions = calloc(p->n_conditions, sizeof(struct pod_condition));
                r = c->conditions ? 0 : -ENOMEM;
                for (size_t i = 0; r >= 0 && i < p->n_conditions; i++) {
                        c->n_conditions++;
                        c->conditions[i].status = p->conditions[i].status;
                        r = dup_opt(p->conditions[i].type, &c->conditions[i].type);
                        if (r >= 0)
                                r = dup_opt(p->conditions[i].reason, &c->conditions[i].reason);
                        if (r >= 0)
                                r = dup_opt(p->conditions[i].message, &c->conditions[i].message);
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

/* The order of annotations and labels: by key, so that lookups can bisect. */
int pod_kv_compare(const void *a, const void *b) {
        return strcmp(((const struct pod_kv *) a)->key, ((const struct pod_kv *) b)->key);
}

/* ---- queries ---- */

const char *pod_annotation(const struct pod *p, const char *key) {
        struct pod_kv k = { .key = (char *) key }, *hit;

        if (!p || !key || p->n_annotations == 0)
                return NULL;
        hit = bsearch(&k, p->annotations, p->n_annotations, sizeof(struct pod_kv), pod_kv_compare);
        return hit ? hit->value : NULL;
}

const struct pod_condition *pod_condition_find(const struct pod *p, const char *type) {
        if (!p || !type)
                return NULL;
        for (size_t i = 0; i < p->n_conditions; i++)
                if (streq(p->conditions[i].type, type))
                        return &p->conditions[i];
        return NULL;
}

bool pod_has_readiness_gate(const struct pod *p, const char *type) {
        return p && type && strv_contains(p->readiness_gates, type);
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

bool pod_has_container(const struct pod *p, const char *id) {
        if (!p)
                return false;
        if (strv_length(p->container_ids) == 0)
                return true;
        return id && strv_contains(p->container_ids, id);
}

static bool source_is_pods_dir(const char *source) {
        return source && (streq(source, "pods-dir") || strncmp(source, "pods-dir:", 9) == 0);
}

bool pod_is_static_pod(const struct pod *p, const char *uid, const char *node_name) {
        if (!p || isempty(uid))
                return false;
        if (source_is_pods_dir(p->source))
                return streq_ptr(pod_annotation(p, POD_ANNOTATION_CONFIG_HASH), uid);
        return !isempty(node_name) && streq_ptr(pod_annotation(p, POD_ANNOTATION_CONFIG_MIRROR), uid) &&
               streq_ptr(p->owner_node, node_name) && streq_ptr(p->node_name, node_name);
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
                    a->conditions[i].status != b->conditions[i].status ||
                    !streq_ptr(a->conditions[i].reason, b->conditions[i].reason) ||
                    !streq_ptr(a->conditions[i].message, b->conditions[i].message))
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
               streq_ptr(a->owner_node, b->owner_node) &&
               streq_ptr(a->service_account, b->service_account) && streq_ptr(a->phase, b->phase) &&
               a->host_network == b->host_network && strv_equal(a->ips, b->ips) && conditions_equal(a, b) &&
               strv_equal(a->container_ids, b->container_ids) &&
               strv_equal(a->readiness_gates, b->readiness_gates) &&
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

/* "readinessGates": only when the pod has some, so a pod without keeps its old shape. */
static bool add_readiness_gates(cJSON *o, const struct pod *p) {
        cJSON *a;

        if (!p->readiness_gates || !p->readiness_gates[0])
                return true;
        a = cJSON_AddArrayToObject(o, "readinessGates");
        if (!a)
                return false;
        STRV_FOREACH(g, p->readiness_gates) {
                cJSON *s = cJSON_CreateString(*g);
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
            !add_readiness_gates(o, p) ||
            !add_kv(o, "annotations", p->annotations, p->n_annotations) ||
            !add_kv(o, "labels", p->labels, p->n_labels) || !add_ports(o, p) ||
            !add_string(o, "source", p->source) || !add_string(o, "resourceVersion", p->resource_version))
                return NULL;

        return TAKE_PTR(o);
}
