/* SPDX-License-Identifier: MIT */
/* /v1/identity: each pod gets its own identity, attested from the caller's PID (SO_PEERCRED),
 * its cgroup and its start time (caller.h); nobody else gets a private key.
 *
 *   caller inside a pod        → that pod's certificate, key and bundle (?wait=DUR long-polls
 *                                until the certificate changes)
 *   a configured systemd       → that service's, the same way
 *   service ([service.NAME])
 *   root/socket-group, no pod  → the node certificate and a table of workload certificates
 *                                (never a private key); ?pod=NS/NAME: one pod's status
 *   anybody else               → 403
 * /v1/identity/bundle is public. A long-poll is answered when the model announces its
 * workload's change (IDENTITY_CHANGE_WORKLOAD). */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "caller.h"
#include "fs.h"
#include "identity-views.h"
#include "json.h"
#include "log.h"
#include "parse.h"
#include "strv.h"
#include "waitq.h"

#define WAIT_MAX (10 * USEC_PER_MINUTE)

struct identity_api {
        struct identity *id;
        struct api_routes *routes;
        struct waitq *waiters; /* /v1/identity?wait= long-polls, keyed by the workload's uid */
};

static int reply_own(struct identity *id, struct api_request *req, const struct workload *w) {
        _cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
        _cleanup_(x509_cert_info_done) struct cert_info names = {}; /* not held: workload.c install() */
        cJSON *sans;
        if (x509_leaf_info(w->chain_pem, &names) < 0)
                return api_reply_error(req, 500, "cannot read its certificate");
        if (!o || !cJSON_AddStringToObject(o, "id", w->spiffe) || !cJSON_AddStringToObject(o, "certificate", w->chain_pem) ||
            !cJSON_AddStringToObject(o, "subject", names.subject) || !(sans = cJSON_AddArrayToObject(o, "sans")) ||
            !cJSON_AddStringToObject(o, "private_key", w->key_pem) ||
            !cJSON_AddStringToObject(o, "bundle", id->bundle_pem ? id->bundle_pem : "") ||
            !json_add_time(o, "not_after", w->info.not_after) || !cJSON_AddStringToObject(o, "serial", w->info.serial) ||
            !cJSON_AddNumberToObject(o, "generation", w->generation))
                return api_reply_error(req, 500, "out of memory");
        STRV_FOREACH(san, names.sans)
                if (!cJSON_AddItemToArray(sans, cJSON_CreateString(*san)))
                        return api_reply_error(req, 500, "out of memory");
        /* Rendered here rather than by api_reply_json so the copies of the key this function made
         * (cJSON's string, the first rendering) are wiped; the reply text itself is wiped when
         * libmicrohttpd is done with it (api_reply_secret). */
        char *text = cJSON_PrintUnformatted(o);
        cJSON *k = cJSON_GetObjectItemCaseSensitive(o, "private_key");
        if (cJSON_IsString(k))
                OPENSSL_cleanse(k->valuestring, strlen(k->valuestring));
        if (!text)
                return api_reply_error(req, 500, "out of memory");
        size_t n = strlen(text);
        char *line = malloc(n + 2);
        if (line) {
                memcpy(line, text, n);
                line[n] = '\n';
                line[n + 1] = 0;
        }
        OPENSSL_cleanse(text, n);
        free(text);
        if (!line)
                return api_reply_error(req, 500, "out of memory");
        return api_reply_secret(req, 200, "application/json", line, n + 1);
}

static int reply_for(struct identity *id, struct api_request *req, const char *uid) {
        struct workload *w = workload_find(id, uid);
        if (!w && startswith(uid, "service:"))
                return api_reply_error(req, 404, "this service has no identity");
        if (!w)
                return api_reply_error(req, 404, "this pod has no identity (annotate it %s: \"true\")", IDENTITY_ANNOTATION);
        if (!w->chain_pem)
                return api_reply_error(req, 503, "certificate not issued yet%s%s", w->last_error ? ": " : "",
                                       w->last_error ? w->last_error : "");
        return reply_own(id, req, w);
}

/* A new certificate for the pod (or the pod gone): answer those who have not seen it. */
static int on_wake(struct api_request *req, const char *uid, uint64_t generation, void *userdata) {
        struct identity_api *a = userdata;
        struct identity *id = a->id;
        struct workload *w = workload_find(id, uid);
        if (w && w->generation == generation)
                return 0;
        (void) reply_for(id, req, uid);
        return 1;
}

static void on_wait_timeout(struct api_request *req, const char *uid, usec_t timeout, void *userdata) {
        struct identity_api *a = userdata;
        (void) reply_for(a->id, req, uid);
}

/* A workload's certificate changed or the workload went: its long-polls hear it. */
static void on_identity_changed(struct identity *id, enum identity_change change, const char *uid, void *userdata) {
        struct identity_api *a = userdata;
        if (change == IDENTITY_CHANGE_WORKLOAD)
                waitq_wake(a->waiters, uid);
}

static int overview(struct identity *id, struct api_request *req) {
        _cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
        cJSON *node, *list;
        if (!o || !cJSON_AddStringToObject(o, "trustDomain", id->settings->trust_domain) ||
            !(node = cJSON_AddObjectToObject(o, "node")) || !(list = cJSON_AddArrayToObject(o, "workloads")))
                return api_reply_error(req, 500, "out of memory");
        if (id->node && cred_status(id->node, node) < 0)
                return api_reply_error(req, 500, "out of memory");
        if (id->node_ca) {
                cJSON *ca = cJSON_AddObjectToObject(o, "nodeCA");
                if (!ca || cred_status(id->node_ca, ca) < 0)
                        return api_reply_error(req, 500, "out of memory");
        }
        for (size_t i = 0; i < id->n_workloads; i++) {
                cJSON *w = cJSON_CreateObject();
                if (!w || !cJSON_AddItemToArray(list, w) || workload_status(id->workloads[i], w) < 0)
                        return api_reply_error(req, 500, "out of memory");
                if (id->workloads[i]->service)
                        continue; /* no pod, no gate */
                /* The "identity" pod gate as zkreg sees it: closed until the certificate exists. */
                const struct pod *p = pod_store_get(id->manager->pods, id->workloads[i]->uid);
                _cleanup_free_ char *why = NULL;
                int open = p ? workload_gate(p, id, &why) : 0;
                if (!cJSON_AddBoolToObject(w, "gateOpen", open > 0) ||
                    !json_add_string_or_null(w, "gateReason", open > 0 ? NULL : why))
                        return api_reply_error(req, 500, "out of memory");
        }
        return api_reply_json(req, 200, TAKE_PTR(o));
}

/* A configured service, for itself only: the same answer a pod gets. */
static int handle_service(struct identity_api *a, struct api_request *req, const struct caller *c, const char *pod,
                          usec_t timeout) {
        struct identity *id = a->id;
        if (pod)
                return caller_reply_forbidden(req, c, "identity of a pod");
        struct workload *w = workload_service_find(id, c->unit);
        if (!w)
                return api_reply_error(req, 404, "this service has no identity");
        if (!timeout)
                return reply_for(id, req, w->uid);
        return waitq_hold(a->waiters, req, w->uid, w->chain_pem ? w->generation : (unsigned) -1, timeout);
}

static int handle_identity(struct api_request *req, void *userdata) {
        struct identity_api *a = userdata;
        struct identity *id = a->id;
        const char *pod = api_request_query(req, "pod"), *wait = api_request_query(req, "wait");
        _cleanup_(caller_done) struct caller c = {};
        usec_t timeout = 0;
        int r;

        if (wait && (parse_duration(wait, &timeout) < 0 || timeout > WAIT_MAX))
                return api_reply_error(req, 400, "wait: expected a duration up to 10m, e.g. 30s");

        caller_resolve(id->manager, req, &c);
        /* A pod is answered for itself first, root inside it too; a caller whose pod cannot be
         * attested or is not on this node gets nothing, not even as root: it might be a pod. */
        if (c.kind == CALLER_OUTSIDER || caller_pod_unknown(&c))
                return caller_reply_forbidden(req, &c, "identity");
        if (c.kind == CALLER_SERVICE)
                return handle_service(a, req, &c, pod, timeout);
        if (c.kind != CALLER_POD) {
                if (pod) {
                        struct workload *w = NULL;
                        r = identity_find_pod(id, pod, &w);
                        if (r == -EINVAL)
                                return api_reply_error(req, 400, "pod: expected NAMESPACE/NAME");
                        if (r < 0)
                                return api_reply_error(req, 404, "no identity for pod %s", pod);
                        _cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
                        if (!o || workload_status(w, o) < 0)
                                return api_reply_error(req, 500, "out of memory");
                        return api_reply_json(req, 200, TAKE_PTR(o));
                }
                return overview(id, req);
        }

        if (pod) /* a pod asks about another: none of its business */
                return caller_reply_forbidden(req, &c, "identity of another pod");
        struct workload *w = workload_find(id, c.pod_uid);
        if (!timeout || !w)
                return reply_for(id, req, c.pod_uid);

        /* Held until the certificate changes from what it is now (none yet: any). */
        return waitq_hold(a->waiters, req, c.pod_uid, w->chain_pem ? w->generation : (unsigned) -1, timeout);
}

static int handle_bundle(struct api_request *req, void *userdata) {
        struct identity_api *a = userdata;
        struct identity *id = a->id;
        if (!id->bundle_pem)
                return api_reply_error(req, 503, "no trust bundle yet");
        char *copy = strdup(id->bundle_pem);
        if (!copy)
                return api_reply_error(req, 500, "out of memory");
        return api_reply_text(req, 200, "application/x-pem-file", copy, strlen(copy));
}

int identity_api_new(struct identity *id, struct identity_api **ret) {
        static const struct api_route routes[] = {
                { "GET", "/v1/identity", handle_identity, false },
                { "GET", "/v1/identity/bundle", handle_bundle, false },
        };
        static const struct waitq_ops ops = { .what = "pod", .wake = on_wake, .expire = on_wait_timeout };
        /* A pod's containers each waiting for its certificate: a handful per pod. */
        static const struct waitq_limits limits = { .per_key = 64, .total = 1000 };
        struct identity_api *a = calloc(1, sizeof(*a));
        int r;

        if (!a)
                return -ENOMEM;
        a->id = id;
        r = waitq_new(id->manager->event, &ops, &limits, a, &a->waiters);
        if (r >= 0)
                r = identity_add_observer(id, on_identity_changed, a);
        if (r >= 0)
                r = api_add_routes(id->manager->api, routes, ELEMENTSOF(routes), a, &a->routes);
        if (r < 0) {
                identity_api_free(a);
                return r;
        }
        *ret = a;
        return 0;
}

struct identity_api *identity_api_free(struct identity_api *a) {
        if (!a)
                return NULL;
        a->routes = api_routes_free(a->routes);
        identity_remove_observer(a->id, on_identity_changed, a);
        waitq_fail(a->waiters, NULL, 503, "the identity module is stopping");
        waitq_free(a->waiters);
        free(a);
        return NULL;
}
