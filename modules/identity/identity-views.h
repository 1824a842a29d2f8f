/* SPDX-License-Identifier: MIT */
#pragma once

/* The views of the identity model: what the HTTP API (identity-api.c, jwt-api.c) and the
 * SPIFFE Workload API (workload-api.c) serve of it. Each observes the model
 * (identity_add_observer()) from its start to its stop; the model never calls one. */

#include "api.h"
#include "identity.h"

/* identity-views.c: all of them, started after the model is set up and stopped before it is
 * torn down (id->views). */
int identity_views_start(struct identity *id);
void identity_views_stop(struct identity *id);

/* identity-api.c: GET /v1/identity (with its ?wait= long-polls) and /v1/identity/bundle. */
struct identity_api;
int identity_api_new(struct identity *id, struct identity_api **ret);
struct identity_api *identity_api_free(struct identity_api *a);

/* jwt-api.c: the JWT-SVID routes; api_routes_free(*ret) removes them. */
int jwt_api_register(struct identity *id, struct api_routes **ret);

/* workload-api.c: the Workload API on [identity] workload-socket. *ret is NULL when there is
 * none (workload-socket empty, or not listening: logged, not fatal). */
struct workload_api;
int workload_api_new(struct identity *id, struct workload_api **ret);
struct workload_api *workload_api_free(struct workload_api *api);
