/* SPDX-License-Identifier: MIT */
#pragma once

/* The pod model: a Kubernetes Pod object (JSON) parsed into the few fields the agent uses.
 *
 * A pod is immutable once shared (reference counted; an update replaces the object). The
 * node's pod store, which sources feed and observers watch, is in pod-store.h.
 *
 * pod-parse.c: pod_parse_json*(), the JSON parser. pods.c: everything else here. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "macro.h"

struct pod_port {
        char *name; /* may be NULL */
        uint16_t port;
        char *protocol; /* "TCP" (default), "UDP", "SCTP" */
};

struct pod_condition {
        char *type;    /* "Ready", "ContainersReady", "pinion.io/ready", ... */
        bool status;   /* "True" → true */
        char *reason;  /* may be NULL */
        char *message; /* may be NULL */
};

struct pod_kv {
        char *key;
        char *value;
};

struct pod {
        unsigned n_ref;

        char *uid;
        char *namespace;
        char *name;
        char *node_name;       /* spec.nodeName */
        char *service_account; /* spec.serviceAccountName, "default" if absent */
        /* The name in metadata.ownerReferences[] of kind Node (apiVersion v1), or NULL: the
         * kubelet sets it on the mirror pods it creates for its static pods, naming its node. */
        char *owner_node;
        char *phase;           /* status.phase, "Pending" if absent */
        char *resource_version;
        bool host_network;
        /* spec.readinessGates[].conditionType, NULL-terminated, may be empty: the conditions a
         * node component must set True before the kubelet calls the pod Ready. */
        char **readiness_gates;

        char **ips; /* status.podIPs[].ip (or status.podIP), NULL-terminated, may be empty */
        /* The IDs of the pod's containers the status lists (status.containerStatuses[],
         * initContainerStatuses[], ephemeralContainerStatuses[]: containerID without its
         * "<runtime>://"), NULL-terminated; empty for a static pod or one not started yet. */
        char **container_ids;

        struct pod_condition *conditions;
        size_t n_conditions;
        struct pod_kv *annotations; /* sorted by key */
        size_t n_annotations;
        struct pod_kv *labels; /* sorted by key */
        size_t n_labels;
        struct pod_port *ports; /* every container's ports, in spec order */
        size_t n_ports;

        char *source; /* "apiserver", "pods-dir:/etc/pinion/pods.d/web.json", ... */
};

/* Parses a v1 Pod. Requires metadata.name; metadata.namespace defaults to "default".
 * A missing metadata.uid is an error unless uid_fallback is given (static pods: the caller
 * derives a stable one). On -EINVAL *ret_error (if not NULL) says what is wrong (JSON path and
 * reason, e.g. "metadata.annotations: not an object"); free() it. */
int pod_parse_json(const cJSON *obj, const char *uid_fallback, struct pod **ret, char **ret_error);
int pod_parse_json_text(const char *text, size_t size, const char *uid_fallback, struct pod **ret,
                       char **ret_error);
/* The API representation (DESIGN.md /v1/pods): uid, namespace, name, node, phase, ready, ips,
 * annotations, labels, ports, serviceAccount, source. */
cJSON *pod_to_json(const struct pod *p);

struct pod *pod_ref(struct pod *p);
struct pod *pod_unref(struct pod *p);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct pod *, pod_unref);

/* A new pod (one reference) equal to p but with ips (copied; NULL: none). For the pod store's
 * network overlay: shared pods are immutable, so a changed field means a new object. */
int pod_copy_with_ips(const struct pod *p, char *const *ips, struct pod **ret);

/* The order annotations and labels are kept in (by key), for qsort() and bsearch(). */
int pod_kv_compare(const void *a, const void *b);

/* True if every field of the model is equal (resource_version is ignored). */
bool pod_equal(const struct pod *a, const struct pod *b);
const char *pod_annotation(const struct pod *p, const char *key);
bool pod_condition(const struct pod *p, const char *type); /* false if absent */
const struct pod_condition *pod_condition_find(const struct pod *p, const char *type); /* NULL if absent */
bool pod_has_readiness_gate(const struct pod *p, const char *type);
bool pod_is_ready(const struct pod *p);                    /* the "Ready" condition */
const char *pod_primary_ip(const struct pod *p);           /* ips[0] or NULL */
/* Whether a process in container id (NULL: in the pod's own cgroup) may speak for the pod:
 * always when the status lists no containers, else when id is one of them. */
bool pod_has_container(const struct pod *p, const char *id);

#define POD_ANNOTATION_CONFIG_HASH "kubernetes.io/config.hash"
#define POD_ANNOTATION_CONFIG_MIRROR "kubernetes.io/config.mirror"
/* Whether p speaks for the static pod the kubelet runs in cgroups named for uid (its config
 * hash), on node node_name: either a mirror pod of that static pod, annotated
 * kubernetes.io/config.mirror: <uid> and owned by the Node node_name (the apiserver lets only
 * that node's kubelet create such a pod, and refuses the annotation on any other pod; the
 * ownership is checked here as well so that an apiserver not enforcing it, or a pod bound to
 * another node, cannot capture the static pod's identity), or a pod from this node's pods-dir
 * (the operator's own files) annotated kubernetes.io/config.hash: <uid>. */
bool pod_is_static_pod(const struct pod *p, const char *uid, const char *node_name);
