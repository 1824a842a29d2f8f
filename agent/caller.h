/* SPDX-License-Identifier: MIT */
#pragma once

/* Who is asking: the peer credentials of a request (api.h) -> host, socket group, pod or
 * outsider. The one place every route asks, so that every module answers the same caller the
 * same way (docs/api.md, Authorization).
 *
 * The one order of checks:
 *   1. the peer's pod, attested from its cgroup and start time (peer-pod.h), if it is a pod
 *      this node knows (the pod store): CALLER_POD, also for root inside that pod;
 *   2. else root: CALLER_HOST; a member of socket-group: CALLER_SOCKET_GROUP;
 *   3. else CALLER_OUTSIDER.
 * Privilege is kept beside the kind: root inside a pod is that pod (CALLER_POD) and privileged.
 * A route that shows every pod's entries to privileged callers asks caller.privileged; a route
 * that answers a pod for itself first (/v1/identity: root in a pod gets its pod's identity)
 * asks caller.kind. */

#include <stdbool.h>

#include "macro.h"

struct api_peer;
struct api_request;
struct manager;
struct pod;
struct pod_store;

enum caller_kind {
        CALLER_HOST,         /* root, in no pod of this node */
        CALLER_SOCKET_GROUP, /* a member of socket-group, in no pod of this node */
        CALLER_POD,          /* a process of a pod on this node (pod_uid, pod) */
        CALLER_OUTSIDER,     /* anyone else: the public routes only */
        _CALLER_KIND_MAX,
};

struct caller {
        enum caller_kind kind;
        bool privileged; /* root or socket-group, wherever it runs: sees every pod's entries */
        char *pod_uid;   /* CALLER_POD: the attested pod's UID (owned) */
        struct pod *pod; /* CALLER_POD: its pod-store entry (borrowed: valid while the handler runs) */
        /* Why the caller has no pod: 0 when it runs in none (or is CALLER_POD); -ENXIO when it
         * runs in a pod this node does not know; else why its pod cannot be attested (the
         * process gone, its PID reused, an unreadable or ambiguous cgroup: peer_pod_lookup()). */
        int pod_error;
};

/* Classifies peer in the order above; proc_root is "/proc" (NULL) unless testing. Never fails:
 * what cannot be attested is recorded in pod_error. Free with caller_done(). */
void caller_resolve_peer(const char *proc_root, const struct pod_store *pods, const struct api_peer *peer,
                         struct caller *ret);
/* The same for a request to the API, against the manager's pod store. */
void caller_resolve(struct manager *m, struct api_request *req, struct caller *ret);
void caller_done(struct caller *c);

/* Whether the caller runs in a pod it cannot be told apart from: its pod cannot be attested or
 * is not on this node. Such a caller is neither that pod nor, where the pod would come first,
 * the host. */
static inline bool caller_pod_unknown(const struct caller *c) {
        return c->kind != CALLER_POD && c->pod_error != 0;
}

/* Whether the caller may use a route that answers privileged callers every pod's entries and a
 * pod its own ones only (/v1/configs, /v1/registrations); refuse the others with
 * caller_reply_forbidden(). */
static inline bool caller_may_read_own(const struct caller *c) {
        return c->privileged || c->kind == CALLER_POD;
}

const char *caller_kind_to_string(enum caller_kind k);
/* Why the caller is refused, for the error body: one wording for every route. */
const char *caller_refusal(const struct caller *c);
/* The refusal in the one error shape: 403 {"error": "<what>: <why>", "code": 403}, where what
 * names what was asked for ("registrations") and why comes from caller_refusal(). */
int caller_reply_forbidden(struct api_request *req, const struct caller *c, const char *what);
