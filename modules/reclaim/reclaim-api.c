/* SPDX-License-Identifier: MIT */
/* GET /v1/reclaim: every target with its figures, the pods whose opt-in was refused, and the
 * module's state. */

#include "json.h"
#include "manager.h"
#include "reclaim.h"
#include "strv.h"

static cJSON *targets_json(struct reclaim *rc) {
        _cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
        cJSON *list, *errors;
        if (!o || !(list = cJSON_AddArrayToObject(o, "targets")) || !(errors = cJSON_AddArrayToObject(o, "pod_errors")))
                return NULL;
        for (size_t i = 0; i < rc->n_targets; i++)
                if (!cJSON_AddItemToArray(list, target_to_json(rc->targets[i])))
                        return NULL;
        STRV_FOREACH(e, rc->pod_errors)
                if (!cJSON_AddItemToArray(errors, cJSON_CreateString(*e)))
                        return NULL;
        return TAKE_PTR(o);
}

/* GET /v1/reclaim: every target with its figures. */
static int handle_reclaim(struct api_request *req, void *userdata) {
        struct module_instance *mi = userdata;
        struct reclaim *rc = mi->data;
        if (!rc)
                return api_reply_error(req, 503, "the reclaim module is not running");
        cJSON *o = targets_json(rc);
        if (!o)
                return api_reply_error(req, 500, "out of memory");
        if (!cJSON_AddStringToObject(o, "state", module_state_to_string(mi->state)) ||
            !json_add_string_or_null(o, "reason", mi->reason) ||
            !(rc->have_hierarchy ? cJSON_AddNumberToObject(o, "cgroup_version", rc->version)
                                 : cJSON_AddNullToObject(o, "cgroup_version"))) {
                cJSON_Delete(o);
                return api_reply_error(req, 500, "out of memory");
        }
        return api_reply_json(req, 200, o);
}

static const struct api_route reclaim_routes[] = {
        { "GET", "/v1/reclaim", handle_reclaim, true },
};

int reclaim_api_register(struct module_instance *mi) {
        struct reclaim *rc = mi->data;

        if (rc->routes)
                return 0;
        int r = api_add_routes(mi->manager->api, reclaim_routes, ELEMENTSOF(reclaim_routes), mi, &rc->routes);
        return r < 0 ? r : 0;
}
