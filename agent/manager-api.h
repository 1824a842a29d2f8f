/* SPDX-License-Identifier: MIT */
#pragma once

/* The core's routes on the local API (/v1/health, /v1/status, /v1/pods, /metrics) and the
 * core's metrics (build info, uptime, module states, pods). Modules register their own routes
 * with api_add_routes() on m->api. */

struct manager;

int manager_api_register(struct manager *m);
/* [agent] metrics-listen: serves /metrics on its TCP port too (metrics-listen.h), or stops
 * serving it there (empty). On a reload, a port that cannot be bound keeps the old one. */
int manager_api_metrics_listen(struct manager *m);
int manager_api_register_metrics(struct manager *m);
