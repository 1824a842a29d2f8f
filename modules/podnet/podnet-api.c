/* SPDX-License-Identifier: MIT */
/* POST /v1/cni (root only): pinion-cni forwards every CNI operation here. The handler parses
 * the request, runs the operation (attachment.c, podnet.c) and maps its outcome to the reply and
 * to pinion_podnet_operations_total; a DEL's request is held, not the loop, until its veth is
 * gone (answered by answer_held_del()). */

#include <stdlib.h>

#include "cni-json.h"
#include "json.h"
#include "manager.h"
#include "podnet.h"

/* ---- replies ---- */

/* The HTTP status of a failed operation follows from its CNI error: the request's own (400), an
 * attachment unknown (404), a conflict with what is there (409), not now (503), the agent's
 * (500). An address the attachment cannot have is the request's, unless the attachment holds
 * another one (-EEXIST): a conflict. */
static unsigned failure_status(int error, const struct cni_error *e) {
        switch (e->code) {
        case CNI_ERR_UNKNOWN_CONTAINER:
                return 404;
        case CNI_ERR_DRIFT:
        case CNI_ERR_NAME_TAKEN:
        case CNI_ERR_ADDRESS_TAKEN:
                return 409;
        case CNI_ERR_ADDRESS_UNUSABLE:
                return error == -EEXIST ? 409 : 400;
        case CNI_ERR_TRY_AGAIN_LATER:
        case CNI_ERR_NOT_AVAILABLE:
        case CNI_ERR_LIMITED_CONNECTIVITY:
        case CNI_ERR_POOL_EXHAUSTED:
                return 503;
        case CNI_ERR_INTERNAL:
        case CNI_ERR_IO:
                return 500;
        default:
                return 400;
        }
}

static int reply_failure(struct api_request *req, unsigned status, const struct cni_request *cr, const struct cni_error *e) {
        _cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
        cJSON *cni = cni_json_error(e, cr ? cr->cni_version : NULL);

        if (!o || !cni || !cJSON_AddItemToObject(o, "cni", cni))
                return cJSON_Delete(cni), api_reply_error(req, 500, "out of memory");
        if (!cJSON_AddStringToObject(o, "error", e->msg ? e->msg : "error") ||
            !cJSON_AddNumberToObject(o, "code", status))
                return api_reply_error(req, 500, "out of memory");
        return api_reply_json(req, status, TAKE_PTR(o));
}

static int reply_ok(struct api_request *req, cJSON *result) {
        _cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
        if (!o || (result && !cJSON_AddItemToObject(o, "result", result)))
                return cJSON_Delete(result), api_reply_error(req, 500, "out of memory");
        return api_reply_json(req, 200, TAKE_PTR(o));
}

/* An operation's outcome as the reply; the metric counts it. */
static int reply_outcome(struct podnet *p, struct api_request *req, const struct cni_request *cr, int error,
                         cJSON *result, const struct cni_error *e) {
        int r;

        if (error < 0)
                r = reply_failure(req, failure_status(error, e), cr, e);
        else
                r = reply_ok(req, result);
        if (p->metrics_reg)
                (void) metric_inc(p->m_ops, cni_command_to_string(cr->command), r >= 0 && error >= 0 ? "ok" : "error");
        return r;
}

/* A held DEL: its veth's deletion ended with error (0: gone). This may run in the middle of
 * another request (an ADD waiting for a deletion). */
static void answer_held_del(struct podnet *p, struct api_request *req, int error) {
        const struct cni_request del = { .command = CNI_DEL };
        _cleanup_(cni_error_done) struct cni_error e = {};

        if (error < 0)
                (void) cni_error_set(&e, CNI_ERR_INTERNAL, "failed to delete the pod's interface", "%s", strerror(-error));
        (void) reply_outcome(p, req, &del, error, NULL, &e);
}

/* ---- the request ---- */

/* Runs one operation: 0 (with *ret_result for ADD and VERSION), 1 if the request is held (DEL),
 * or a negative errno with e. STATUS and VERSION answer whatever the module's state. */
static int run(struct module_instance *mi, struct api_request *req, const struct cni_request *cr, cJSON **ret_result,
               struct cni_error *e) {
        int r;

        if (cr->command == CNI_VERSION) {
                *ret_result = cni_json_version_result(cr->cni_version);
                return 0;
        }
        if (cr->command == CNI_STATUS)
                return podnet_cni_status(mi, e);
        r = podnet_cni_ready(mi, e);
        if (r < 0)
                return r;
        switch (cr->command) {
        case CNI_ADD:
                return attachment_add(mi, cr, ret_result, e);
        case CNI_DEL:
                return attachment_del(mi, cr, req, answer_held_del, e);
        case CNI_CHECK:
                return attachment_check(mi, cr, e);
        case CNI_GC:
                return attachment_gc(mi, cr, e);
        default:
                return cni_error_set(e, CNI_ERR_INTERNAL, "unreachable", "%s", cni_command_to_string(cr->command));
        }
}

/* POST /v1/cni (root only): one CNI operation from pinion-cni. */
static int handle_cni(struct api_request *req, void *userdata) {
        struct module_instance *mi = userdata;
        struct podnet *p = mi->data;
        _cleanup_(cni_json_request_done) struct cni_request cr = { .command = _CNI_COMMAND_INVALID };
        _cleanup_(cni_error_done) struct cni_error e = {};
        cJSON *result = NULL;
        size_t size = 0;
        const char *body = api_request_body(req, &size);
        int r;

        /* Wiring namespaces is root's business (DESIGN.md): socket-group reads status, no more. */
        const struct peer *peer = api_request_peer(req);
        if (!peer || peer->uid != 0) {
                (void) metric_inc(p->m_ops, "invalid", "error");
                return api_reply_error(req, 403, "POST /v1/cni is for root only (pinion-cni run by the container runtime)");
        }
        r = cni_json_parse_request(&cr, body, size, &e);
        if (r < 0) {
                r = r == -ENOMEM ? api_reply_error(req, 500, "out of memory") : reply_failure(req, 400, &cr, &e);
                (void) metric_inc(p->m_ops, "invalid", "error");
                return r;
        }

        r = run(mi, req, &cr, &result, &e);
        if (r < 0 && cr.command == CNI_ADD)
                network_gate_add_failed(mi, &cr, &e);
        if (r <= 0)
                r = reply_outcome(p, req, &cr, r, result, &e);
        else
                r = 0; /* held: counted when answered (answer_held_del()) */
        podnet_sync_state(p);
        return MIN(r, 0);
}

int podnet_api_register(struct module_instance *mi) {
        static const struct api_route routes[] = {
                /* Privileged lets socket-group in too: handle_cni() lets only root through. */
                { "POST", "/v1/cni", handle_cni, .privileged = true },
        };
        struct podnet *p = mi->data;

        if (p->routes)
                return 0;
        int r = api_add_routes(mi->manager->api, routes, ELEMENTSOF(routes), mi, &p->routes);
        return r < 0 ? r : 0;
}
