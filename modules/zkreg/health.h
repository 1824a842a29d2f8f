/* SPDX-License-Identifier: MIT */
#pragma once

/* Per-pod health checks like Nerve's, on the loop (libcurl through agent/lib/http.c; no blocking):
 *   pinion.io/health           tcp | http:/path | none   (absent: none)
 *   pinion.io/health-interval  time between checks        (default 2s)
 *   pinion.io/health-timeout   time a check may take      (default 1s, at most the interval)
 *   pinion.io/health-rise      consecutive successes to become healthy  (default 2)
 *   pinion.io/health-fall      consecutive failures to become unhealthy (default 2)
 * "tcp" connects to the pod's service endpoint; "http:/path" GETs http://IP:PORT/path and
 * wants a 2xx. A new checker is unknown (not healthy) until `rise` checks passed; the first
 * check runs at once. */

#include <stdbool.h>

#include <systemd/sd-event.h>

#include "http.h"
#include "macro.h"
#include "pods.h"

enum health_kind {
        HEALTH_NONE,
        HEALTH_TCP,
        HEALTH_HTTP,
        _HEALTH_KIND_MAX,
        _HEALTH_KIND_INVALID = -EINVAL,
};

const char *health_kind_to_string(enum health_kind k);

struct health_spec {
        enum health_kind kind;
        char path[512]; /* HTTP path, starting with '/' */
        usec_t interval;
        usec_t timeout;
        unsigned rise;
        unsigned fall;
};

/* Reads the annotations of p. -EINVAL with *ret_error saying which annotation is wrong. */
int health_spec_from_pod(const struct pod *p, struct health_spec *ret, char **ret_error);
bool health_spec_equal(const struct health_spec *a, const struct health_spec *b);

struct health;
/* Called after every check: ok, the error text if not ok (else NULL), and whether the
 * healthy/unhealthy verdict changed with this result. */
typedef void (*health_result_fn)(struct health *h, bool ok, const char *error, bool changed, void *userdata);

int health_new(sd_event *e, struct http_client *http, const struct health_spec *spec, const char *ip,
               unsigned port, health_result_fn fn, void *userdata, struct health **ret);
struct health *health_free(struct health *h);
/* Takes new interval/timeout/rise/fall of the same check (kind and path unchanged), keeping
 * the healthy/unhealthy verdict. false if kind or path differ (make a new checker then). */
bool health_update_timing(struct health *h, const struct health_spec *spec);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct health *, health_free);

bool health_is_healthy(const struct health *h);
/* Why not healthy: the last failure, or "waiting for N more successful checks". */
const char *health_reason(const struct health *h);
const struct health_spec *health_get_spec(const struct health *h);
const char *health_target(const struct health *h); /* "ip:port" */
