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
#include "string-table.h"

static const char *const caller_kind_table[_CALLER_KIND_MAX] = {
        [CALLER_HOST] = "host",
        [CALLER_SOCKET_GROUP] = "socket-group",
        [CALLER_POD] = "pod",
        [CALLER_OUTSIDER] = "outsider",
};
DEFINE_STRING_TABLE_LOOKUP_TO_STRING(caller_kind, enum caller_kind);

void caller_resolve_peer(const char *proc_root, const struct pod_store *pods, const struct api_peer *peer,
                         struct caller *ret) {
        _cleanup_free_ char *uid = NULL;
        struct pod *p = NULL;
        int r;

        *ret = (struct caller) { .privileged = peer->privileged };

        /* The pod first, for every caller: root inside a pod is that pod (a pod's root is the
         * host's root without a user namespace, and must still get only its own pod's secrets
         * where a route answers a pod for itself). */
        r = peer_pod_lookup(proc_root, peer->pid, peer->start_time, &uid);
        if (r < 0) {
                /* Gone, or its PID now names another process: whatever it was, it is no pod. */
                log_debug("Cannot attest the pod of caller pid %d: %s", (int) peer->pid, strerror(-r));
                ret->pod_error = r;
        } else if (r > 0) {
                p = pods ? pod_store_get(pods, uid) : NULL;
                if (!p)
                        ret->pod_error = -ENXIO;
        }
        if (p) {
                ret->kind = CALLER_POD;
                ret->pod_uid = TAKE_PTR(uid);
                ret->pod = p;
        } else if (peer->privileged)
                ret->kind = peer->uid == 0 ? CALLER_HOST : CALLER_SOCKET_GROUP;
        else
                ret->kind = CALLER_OUTSIDER;
}

void caller_resolve(struct manager *m, struct api_request *req, struct caller *ret) {
        caller_resolve_peer(NULL, m->pods, api_request_peer(req), ret);
}

void caller_done(struct caller *c) {
        if (!c)
                return;
        c->pod_uid = mfree(c->pod_uid);
        c->pod = NULL;
}

const char *caller_refusal(const struct caller *c) {
        switch (c->kind) {
        case CALLER_POD:
                return "a pod may ask only about its own pod";
        case CALLER_HOST:
        case CALLER_SOCKET_GROUP:
        case CALLER_OUTSIDER:
        case _CALLER_KIND_MAX:
                break;
        }
        if (c->pod_error == -ENXIO)
                return "the caller's pod is not on this node";
        if (c->pod_error < 0)
                return "cannot attest the caller's pod";
        return "only root, the socket group and pods of this node may ask";
}

int caller_reply_forbidden(struct api_request *req, const struct caller *c, const char *what) {
        return api_reply_error(req, 403, "%s: %s", what, caller_refusal(c));
}
