/* SPDX-License-Identifier: MIT */
#pragma once

/* The pod model and the node's pod store: the one truth for "which pods are on this node".
 *
 * A pod is parsed from a Kubernetes Pod object (JSON) into the few fields the agent uses, and is
 * immutable once in the store (reference counted; an update replaces the object). Sources
 * (the apiserver module, the pods-dir watcher) feed the store; observers get added/updated/
 * removed with the old and the new object. An update whose relevant fields are unchanged
 * (pod_equal) is not announced, so a relist causes no spurious updates. */

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
        char *type;   /* "Ready", "ContainersReady", ... */
        bool status;  /* "True" → true */
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
        char *phase;           /* status.phase, "Pending" if absent */
        char *resource_version;
        bool host_network;

        char **ips; /* status.podIPs[].ip (or status.podIP), NULL-terminated, may be empty */

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
int pod_from_json(const cJSON *obj, const char *uid_fallback, struct pod **ret, char **ret_error);
int pod_from_json_text(const char *text, size_t size, const char *uid_fallback, struct pod **ret,
                       char **ret_error);
/* The API representation (DESIGN.md /v1/pods): uid, namespace, name, node, phase, ready, ips,
 * annotations, labels, ports, serviceAccount, source. */
cJSON *pod_to_json(const struct pod *p);

struct pod *pod_ref(struct pod *p);
struct pod *pod_unref(struct pod *p);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct pod *, pod_unref);

/* True if every field of the model is equal (resource_version is ignored). */
bool pod_equal(const struct pod *a, const struct pod *b);
const char *pod_annotation(const struct pod *p, const char *key);
bool pod_condition(const struct pod *p, const char *type); /* false if absent */
bool pod_is_ready(const struct pod *p);                    /* the "Ready" condition */
const char *pod_primary_ip(const struct pod *p);           /* ips[0] or NULL */

/* ---- the store ---- */

struct pod_store;

/* old is NULL for "added", new is NULL for "removed"; both set for "updated". The objects are
 * valid during the call; take a reference to keep one. An observer may add/remove observers
 * and change the store from inside the call (not free it): changes made there are queued and
 * delivered to every observer after the current one, in order; an observer added there gets
 * only changes made after it was added. */
typedef void (*pod_observer_fn)(struct pod_store *s, const struct pod *old, const struct pod *new,
                                void *userdata);

int pod_store_new(struct pod_store **ret);
struct pod_store *pod_store_free(struct pod_store *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct pod_store *, pod_store_free);

/* -EEXIST if the same fn/userdata pair is already registered. */
int pod_store_add_observer(struct pod_store *s, pod_observer_fn fn, void *userdata);
void pod_store_remove_observer(struct pod_store *s, pod_observer_fn fn, void *userdata);

/* Adds or replaces the pod with p->uid (the store takes its own reference). Returns 1 if the
 * store changed (added or updated), 0 if an equal pod was already there (the store then keeps
 * p silently, for its newer resource_version). */
int pod_store_put(struct pod_store *s, struct pod *p);
/* Returns 1 if removed, 0 if there was no such pod. */
int pod_store_remove(struct pod_store *s, const char *uid);
/* Makes the pods of one source exactly pods[0..n): puts each, removes the source's others.
 * This is what a relist or a directory rescan does; it announces only real differences
 * (removals first, then additions/updates) and returns how many there were.
 * source is a name without ':' ("apiserver", "pods-dir"); it owns every pod whose p->source is
 * that name or starts with "name:" (so "pods-dir" owns "pods-dir:/etc/pinion/pods.d/web.json").
 * A pod with a NULL source is given source; one owned by another source, or two pods with one
 * uid, is -EINVAL and nothing changes. */
int pod_store_replace_source(struct pod_store *s, const char *source, struct pod **pods, size_t n);

struct pod *pod_store_get(const struct pod_store *s, const char *uid);
struct pod *pod_store_find(const struct pod_store *s, const char *namespace, const char *name);
size_t pod_store_size(const struct pod_store *s);
/* A snapshot sorted by namespace/name; free the array with free(), not the pods (borrowed). */
int pod_store_list(const struct pod_store *s, struct pod ***ret, size_t *ret_n);
/* Bumps on every change; lets API clients ask "changed since". */
uint64_t pod_store_generation(const struct pod_store *s);
