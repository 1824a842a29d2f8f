/* SPDX-License-Identifier: MIT */
#pragma once

/* GET /v1/pods?watch=1: the pod store's changes streamed to local clients as NDJSON, so N
 * sidecars on a node cost the apiserver one watch (the agent's), not N. Each line is
 *   {"type": "ADDED|MODIFIED|DELETED", "generation": G, "pod": {...}}
 * A new stream first gets every current pod as ADDED, then {"type": "SYNCED", "generation": G},
 * then live changes. With ?resourceVersion=G equal to the store's current generation (from a
 * previous stream or /v1/pods) the replay is skipped; any other value replays the full state
 * (the store keeps no history), which a client treats as updates of what it knows. */

#include "api.h"
#include "pod-store.h"

struct pod_watch_hub;

int pod_watch_hub_new(sd_event *e, struct pod_store *store, struct pod_watch_hub **ret);
/* Ends every stream (the response finishes cleanly) and stops observing the store. */
struct pod_watch_hub *pod_watch_hub_free(struct pod_watch_hub *h);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct pod_watch_hub *, pod_watch_hub_free);

/* Answers req with a stream. */
int pod_watch_hub_serve(struct pod_watch_hub *h, struct api_request *req);
unsigned pod_watch_hub_streams(const struct pod_watch_hub *h);
