/* SPDX-License-Identifier: MIT */
#pragma once

/* Who is asking: the peer credentials of a request (api.h) and where the process runs ->
 * host, socket group, pod or outsider. The one place every route asks, and the one rule of
 * privilege the API applies before a privileged route reads a body (caller_peer_place()),
 * so that every module answers the same caller the same way (docs/api.md, Authorization).
 *
 * Privilege comes from place, not from uid: a container's root is the host's root without a
 * user namespace, and must get no more than its pod. The one order of checks:
 *   1. where the peer runs, attested from its cgroup below the pod roots (peer-pod.h), read
 *      while the process that connected is alive and not a zombie (its pidfd and start time
 *      checked around every read). Cannot be attested (gone, exiting or a zombie, PID reused,
 *      start time unknown, /proc unreadable, not the kubelet's layout): CALLER_OUTSIDER, never
 *      the host nor the socket group, whatever its uid; attested false.
 *   2. in no pod and no configured service, or in the agent's own pod (a DaemonSet's `kubectl exec`), with root or
 *      socket-group credentials, and still alive once placed: CALLER_HOST / CALLER_SOCKET_GROUP,
 *      privileged.
 *   3. in a pod this node knows (by the UID its cgroup names, or for a static pod, whose
 *      cgroup names its config hash, its mirror pod: pod_store_get_by_cgroup()) and, when its
 *      status lists containers, in one of them:
 *      CALLER_POD, whatever its uid, never privileged. In a pod this node does not know, or
 *      in none of its listed containers: CALLER_OUTSIDER.
 *   4. in no pod, in the cgroup of a configured systemd service (a unit directly below a
 *      service root with a [service.NAME] section, service.h): CALLER_SERVICE, whatever its
 *      uid (its root too is the service, not the host), never privileged.
 *   5. else (in no pod, ordinary credentials): CALLER_OUTSIDER. */

#include <stdbool.h>

#include "macro.h"

struct peer;
struct peer_place;
struct api_request;
struct manager;
struct pod;
struct pod_store;
struct service_settings;

/* What the rule needs besides the peer. */
struct caller_place {
        const char *proc_root;        /* NULL: "/proc" */
        char *const *pod_roots;       /* [agent] pod-cgroup-roots */
        const char *own_pod_uid;      /* the pod piniond itself runs in; NULL: none */
        const struct pod_store *pods; /* the node's pods; NULL: none known */
        const char *node_name;        /* this node: whose mirror pods stand for static pods */
        char *const *service_roots;   /* [agent] service-cgroup-roots */
        struct service_settings *const *services; /* [service.NAME] */
        size_t n_services;
};

enum caller_kind {
        CALLER_HOST,         /* root, in no pod (or in the agent's own pod) */
        CALLER_SOCKET_GROUP, /* a member of socket-group, in no pod (or in the agent's own pod) */
        CALLER_POD,          /* a process of a pod on this node (pod_uid, pod) */
        CALLER_SERVICE,      /* a process of a configured systemd service (unit, service) */
        CALLER_OUTSIDER,     /* anyone else: the public routes only */
        _CALLER_KIND_MAX,
};

struct caller {
        enum caller_kind kind;
        bool privileged; /* CALLER_HOST or CALLER_SOCKET_GROUP: sees every pod's entries */
        char *pod_uid;   /* CALLER_POD: the attested pod's UID in the store (owned) */
        struct pod *pod; /* CALLER_POD: its pod-store entry (borrowed: valid while the handler runs) */
        char *unit;      /* CALLER_SERVICE: the unit its cgroup names (owned) */
        const struct service_settings *service; /* CALLER_SERVICE: its section (borrowed, as pod) */
        /* Why the caller has no pod: 0 when it runs in none (or is CALLER_POD); -ENXIO when it
         * runs in a pod this node does not know; -EPERM when it runs in none of the containers
         * its pod's status lists; else why its pod cannot be attested (the process gone, its
         * PID reused, an unreadable cgroup or not the kubelet's layout: peer_pod_lookup()). */
        int pod_error;
        /* Whether where it runs could be read at all (rule 1); false: pod_error says why. */
        bool attested;
        /* The pod the caller's cgroup names, whether this node knows it, and its container, or
         * not (owned; NULL: in no pod, or in the agent's own): what its connections count
         * against, so that a pod the store has not caught up with cannot starve another. */
        char *cgroup_pod_uid;
};

/* Classifies peer in the order above; peer->privileged says what its credentials are (root or
 * socket-group). Never fails: what cannot be attested is recorded in pod_error. Free with
 * caller_done(). */
void caller_resolve_peer(const struct caller_place *place, const struct peer *peer, struct caller *ret);
/* The same for a request to the API, against the manager's settings and pod store. */
void caller_resolve(struct manager *m, struct api_request *req, struct caller *ret);
/* The same for a peer of another server of the agent (the gRPC server: grpc_call_peer()). */
void caller_resolve_manager_peer(struct manager *m, const struct peer *peer, struct caller *ret);
void caller_done(struct caller *c);

/* The API's placer (api_set_place_fn(), userdata: the manager): whether a peer is privileged
 * where it runs (rule 2), its pod when it is a pod's (rule 1), and whether it could be attested,
 * for the connection limits. */
void caller_peer_place(const struct peer *peer, void *userdata, struct peer_place *ret);

/* Whether the caller runs in a pod it cannot be told apart from: its pod cannot be attested, is
 * not on this node, or the caller is in none of its containers. Such a caller is neither that
 * pod nor the host. */
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
