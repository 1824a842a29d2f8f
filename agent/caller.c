/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "caller.h"
#include "log.h"
#include "manager.h"
#include "peer-pod.h"
#include "pod-store.h"
#include "pods.h"
#include "service.h"
#include "string-table.h"

static const char *const caller_kind_table[_CALLER_KIND_MAX] = {
        [CALLER_HOST] = "host",
        [CALLER_SOCKET_GROUP] = "socket-group",
        [CALLER_POD] = "pod",
        [CALLER_SERVICE] = "service",
        [CALLER_OUTSIDER] = "outsider",
};
DEFINE_STRING_TABLE_LOOKUP_TO_STRING(caller_kind, enum caller_kind);

/* Rule 4: the configured service whose cgroup the peer runs in. 1: it is; 0: it is in no
 * configured service; negative: it cannot be attested. */
static int resolve_service(const struct caller_place *place, const struct peer *peer, struct caller *ret) {
        _cleanup_free_ char *unit = NULL;
        const struct service_settings *s;
        int r;

        if (place->n_services == 0)
                return 0;
        r = peer_service_lookup(place->proc_root, place->service_roots, peer->pid, peer->pidfd, peer->start_time,
                                &unit);
        if (r <= 0)
                return r;
        s = service_find_unit(place->services, place->n_services, unit);
        if (!s)
                return 0;
        ret->kind = CALLER_SERVICE;
        ret->unit = TAKE_PTR(unit);
        ret->service = s;
        return 1;
}

/* Rule 1's refusal: neither a pod, nor the host, nor anyone else the peer's uid would make it. */
static void cannot_attest(const struct peer *peer, const char *what, int error, struct caller *ret) {
        log_debug("Cannot attest caller pid %d (%s): %s", (int) peer->pid, what, strerror(-error));
        ret->kind = CALLER_OUTSIDER;
        ret->privileged = false;
        ret->pod_error = error;
        ret->attested = false;
}

/* Rule 2: root or socket-group where it runs, in no pod or in the agent's own one. Privilege
 * goes only to a peer still alive, itself and not exiting after its place was read. */
static void resolve_by_credentials(const struct caller_place *place, const struct peer *peer,
                                   struct caller *ret) {
        int r;

        ret->kind = CALLER_OUTSIDER;
        if (!peer->privileged)
                return;
        r = proc_peer_alive(place->proc_root, peer->pid, peer->pidfd, peer->start_time);
        if (r < 0) {
                cannot_attest(peer, "where it runs", r, ret);
                return;
        }
        ret->privileged = true;
        ret->kind = peer->uid == 0 ? CALLER_HOST : CALLER_SOCKET_GROUP;
}

void caller_resolve_peer(const struct caller_place *place, const struct peer *peer, struct caller *ret) {
        _cleanup_(peer_pod_done) struct peer_pod where = {};
        struct pod *p;
        int r;

        *ret = (struct caller) { .kind = CALLER_OUTSIDER };

        r = peer_pod_lookup(place->proc_root, place->pod_roots, peer->pid, peer->pidfd, peer->start_time, &where);
        if (r < 0) {
                /* Gone, exiting or a zombie (whose v1 cgroups read "/", as the host's do), its PID
                 * now names another process, or placed where no pod nor the host runs: whatever
                 * it was, it is neither a pod nor the host. */
                cannot_attest(peer, "where it runs", r, ret);
                return;
        }
        ret->attested = true;
        if (r == 0) {
                r = resolve_service(place, peer, ret);
                if (r < 0)
                        cannot_attest(peer, "its service", r, ret);
                else if (r == 0)
                        resolve_by_credentials(place, peer, ret);
                return;
        }
        if (peer->privileged && streq_ptr(where.uid, place->own_pod_uid)) {
                resolve_by_credentials(place, peer, ret);
                return;
        }

        /* In a pod: that pod whatever its uid, or nobody. */
        ret->cgroup_pod_uid = strdup(where.uid);
        p = place->pods ? pod_store_get_by_cgroup(place->pods, where.uid, place->node_name) : NULL;
        if (!p)
                ret->pod_error = -ENXIO;
        else if (!pod_has_container(p, where.container_id)) {
                log_debug("Caller pid %d runs in pod %s but in none of its containers (%s)", (int) peer->pid,
                          where.uid, where.container_id ?: "no container");
                ret->pod_error = -EPERM;
        } else if (!(ret->pod_uid = strdup(p->uid))) /* the store's: a mirror pod's is not its cgroup's */
                ret->pod_error = -ENOMEM;
        else {
                ret->kind = CALLER_POD;
                ret->pod = p;
        }
}

static struct caller_place manager_place(struct manager *m) {
        return (struct caller_place) {
                .pod_roots = m->settings.pod_cgroup_roots,
                .own_pod_uid = m->own_pod_uid,
                .node_name = m->settings.node_name,
                .service_roots = m->settings.service_cgroup_roots,
                .services = m->settings.services,
                .n_services = m->settings.n_services,
                .pods = m->pods,
        };
}

void caller_resolve_manager_peer(struct manager *m, const struct peer *peer, struct caller *ret) {
        struct caller_place place = manager_place(m);
        caller_resolve_peer(&place, peer, ret);
}

void caller_resolve(struct manager *m, struct api_request *req, struct caller *ret) {
        caller_resolve_manager_peer(m, api_request_peer(req), ret);
}

void caller_peer_place(const struct peer *peer, void *userdata, struct peer_place *ret) {
        struct caller_place place = manager_place(userdata);
        _cleanup_(caller_done) struct caller c = {};

        caller_resolve_peer(&place, peer, &c);
        *ret = (struct peer_place) {
                .privileged = c.privileged,
                .pod_uid = TAKE_PTR(c.cgroup_pod_uid),
                .attested = c.attested,
        };
}

void caller_done(struct caller *c) {
        if (!c)
                return;
        c->pod_uid = mfree(c->pod_uid);
        c->cgroup_pod_uid = mfree(c->cgroup_pod_uid);
        c->unit = mfree(c->unit);
        c->service = NULL;
        c->pod = NULL;
}

const char *caller_refusal(const struct caller *c) {
        switch (c->kind) {
        case CALLER_POD:
                return "a pod may ask only about its own pod";
        case CALLER_SERVICE:
                return "a service may ask only for its own identity";
        case CALLER_HOST:
        case CALLER_SOCKET_GROUP:
        case CALLER_OUTSIDER:
        case _CALLER_KIND_MAX:
                break;
        }
        if (c->pod_error == -ENXIO)
                return "the caller's pod is not on this node";
        if (c->pod_error == -EPERM)
                return "the caller runs in none of its pod's containers";
        if (c->pod_error < 0)
                return "cannot attest the caller's pod";
        return "only root, the socket group and pods of this node may ask";
}

int caller_reply_forbidden(struct api_request *req, const struct caller *c, const char *what) {
        return api_reply_error(req, 403, "%s: %s", what, caller_refusal(c));
}
