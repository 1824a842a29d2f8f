/* SPDX-License-Identifier: MIT */
#pragma once

/* Pod gates: what must hold, besides a pod's own Ready condition, before the pod counts as ready
 * for registration (DESIGN.md: Ready AND declared configs present AND health checks passing; the
 * identity module adds "certificate issued"). A module that can hold a pod back adds a named gate;
 * a module that acts on readiness (zkreg) asks pod_gates_check() and listens for changes.
 *
 * This is how modules that never include each other agree on readiness: configsync and identity
 * add gates, zkreg listens, and the manager owns the set (m->pod_gates). */

#include <stddef.h>

#include "macro.h"
#include "pods.h"

struct pod_gates;

/* Returns 1 if the gate is open for p (satisfied, or the gate does not concern p), 0 if closed,
 * with *ret_reason saying why (the caller frees it; may be left NULL), or negative errno. */
typedef int (*pod_gate_fn)(const struct pod *p, void *userdata, char **ret_reason);

/* A gate's answer may have changed for the pod with this uid, or for any pod if uid is NULL. */
typedef void (*pod_gates_listener_fn)(struct pod_gates *g, const char *uid, void *userdata);

int pod_gates_new(struct pod_gates **ret);
struct pod_gates *pod_gates_free(struct pod_gates *g);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct pod_gates *, pod_gates_free);

/* What a gate holds back. Registration follows the pod's Ready, which the kubelet sets only once
 * the pod's sandbox (and so its network) exists; the pinion.io/ready condition is decided before
 * that, so a gate such as the network attachment holds back only the condition. */
enum {
        POD_GATE_REGISTRATION = 1u << 0, /* zkreg waits on it, beside the pod's Ready */
        POD_GATE_CONDITION = 1u << 1,    /* the pinion.io/ready condition waits on it */
        POD_GATE_ALL = POD_GATE_REGISTRATION | POD_GATE_CONDITION,
};

/* Adds or removes a named gate ("configs", "identity", "network"); listeners are told (uid
 * NULL). pod_gates_add() is pod_gates_add_scoped(..., POD_GATE_ALL). -EEXIST if the name is
 * taken, -EINVAL for an empty scope. Removing an unknown name is a no-op. */
int pod_gates_add(struct pod_gates *g, const char *name, pod_gate_fn fn, void *userdata);
int pod_gates_add_scoped(struct pod_gates *g, const char *name, pod_gate_fn fn, void *userdata,
                         unsigned scope);
void pod_gates_remove(struct pod_gates *g, const char *name);

/* -EEXIST if the same fn/userdata pair is already registered. A listener may add or remove
 * listeners and gates from inside its call. */
int pod_gates_add_listener(struct pod_gates *g, pod_gates_listener_fn fn, void *userdata);
void pod_gates_remove_listener(struct pod_gates *g, pod_gates_listener_fn fn, void *userdata);

/* The owner of a gate calls this when its answer for a pod (or for all pods: uid NULL) may have
 * changed; every listener is called synchronously. */
void pod_gates_changed(struct pod_gates *g, const char *uid);

/* Asks every registration gate in the order they were added. 1: all open. 0: one is closed and
 * *ret_reason (if ret_reason is not NULL) is "NAME: reason" for the first closed one. A gate
 * that fails (negative errno) counts as closed and its error is returned as the reason. */
int pod_gates_check(const struct pod_gates *g, const struct pod *p, char **ret_reason);

/* Asks every gate in scope, in the order they were added. 1: all open. 0: at least one is
 * closed; *ret_first (optional) is the first closed gate's name, *ret_reasons (optional) every
 * closed gate's "NAME: reason", joined by "; ". Both are the caller's to free. */
int pod_gates_check_scope(const struct pod_gates *g, const struct pod *p, unsigned scope, char **ret_first,
                          char **ret_reasons);

size_t pod_gates_count(const struct pod_gates *g);
