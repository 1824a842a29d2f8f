/* SPDX-License-Identifier: MIT */
#pragma once

/* The node's pod store: the one truth for "which pods are on this node".
 *
 * Pods in the store are immutable (reference counted; an update replaces the object). Sources
 * (the apiserver module, the pods-dir watcher) feed the store; observers get added/updated/
 * removed with the old and the new object. An update whose relevant fields are unchanged
 * (pod_equal) is not announced, so a relist causes no spurious updates. */

#include <stddef.h>
#include <stdint.h>

#include "macro.h"
#include "pods.h"

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
/* The sources of the node's pods: pods-dir (static pods) and the apiserver module. */
#define POD_SOURCE_PODS_DIR "pods-dir"
#define POD_SOURCE_APISERVER "apiserver"

/* Makes the pods of one source exactly pods[0..n): puts each, removes the source's others.
 * This is what a relist or a directory rescan does; it announces only real differences
 * (removals first, then additions/updates) and returns how many there were.
 * source is a name without ':' ("apiserver", "pods-dir"); it owns every pod whose p->source is
 * that name or starts with "name:" (so "pods-dir" owns "pods-dir:/etc/pinion/pods.d/web.json").
 * A pod with a NULL source is given source; one owned by another source, or two pods with one
 * uid, is -EINVAL and nothing changes. */
int pod_store_replace_source(struct pod_store *s, const char *source, struct pod **pods, size_t n);

/* The network overlay. A pod's address may come from this node rather than from its source:
 * podnet (the CNI plugin's agent side) wires the pod and knows its IP before the apiserver does,
 * and a static pod has no status at all. pod_store_set_ips() records ips for the pod with this
 * uid (or, with uid NULL, with this namespace/name); the store applies them to the source's
 * object whenever it is put (now, and on every later update, relist or rescan) and announces the
 * result as an ordinary update. ips NULL clears the overlay: the pod goes back to its source's
 * ips (announced too). The overlay outlives the pod (a CNI ADD may come before the pod is seen).
 * Returns 1 if a pod in the store changed, 0 if not, negative errno. */
int pod_store_set_ips(struct pod_store *s, const char *uid, const char *namespace, const char *name,
                      char *const *ips);

struct pod *pod_store_get(const struct pod_store *s, const char *uid);
/* The pod a process in the kubelet's cgroup for pod uid belongs to: the pod with that uid, else
 * the one pod that speaks for the static pod uid names on node node_name (pod_is_static_pod():
 * its mirror pod, or a pods-dir pod carrying its config hash); NULL if none, or if more than
 * one claims it. */
struct pod *pod_store_get_by_cgroup(const struct pod_store *s, const char *uid, const char *node_name);
struct pod *pod_store_find(const struct pod_store *s, const char *namespace, const char *name);
size_t pod_store_size(const struct pod_store *s);
/* Pods owned by source (as pod_store_replace_source() counts ownership). */
size_t pod_store_count_source(const struct pod_store *s, const char *source);
/* A snapshot sorted by namespace/name; free the array with free(), not the pods (borrowed). */
int pod_store_list(const struct pod_store *s, struct pod ***ret, size_t *ret_n);
/* Bumps on every change; lets API clients ask "changed since". */
uint64_t pod_store_generation(const struct pod_store *s);
