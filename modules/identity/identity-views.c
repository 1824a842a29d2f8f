/* SPDX-License-Identifier: MIT */
/* Where the identity model meets its views: the module starts them once the model is set up
 * and stops them before tearing it down. The views observe the model on their own; this is the
 * one file besides them that knows they exist. */

#include <stdlib.h>

#include "identity-views.h"

struct identity_views {
        struct identity_api *http; /* /v1/identity, /v1/identity/bundle */
        struct api_routes *jwt_routes; /* /v1/identity/jwt... */
        struct workload_api *grpc; /* NULL: no Workload API */
};

int identity_views_start(struct identity *id) {
        struct identity_views *v;
        int r;

        if (id->views)
                return 0;
        v = calloc(1, sizeof(*v));
        if (!v)
                return -ENOMEM;
        id->views = v;
        /* The routes in the order they always had: /v1/identity first. */
        r = identity_api_new(id, &v->http);
        if (r >= 0)
                r = jwt_api_register(id, &v->jwt_routes);
        if (r >= 0)
                r = workload_api_new(id, &v->grpc);
        return r; /* on failure what was made is freed by identity_views_stop() at teardown */
}

void identity_views_stop(struct identity *id) {
        struct identity_views *v = id->views;

        if (!v)
                return;
        v->jwt_routes = api_routes_free(v->jwt_routes);
        v->http = identity_api_free(v->http);
        v->grpc = workload_api_free(v->grpc);
        free(v);
        id->views = NULL;
}
