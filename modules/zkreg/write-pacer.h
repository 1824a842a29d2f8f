/* SPDX-License-Identifier: MIT */
#pragma once

/* write-pacer: how fast the registrations write to ZooKeeper, counted in what costs the
 * ensemble. ZooKeeper takes a multi request of many creates, sets and deletes as one
 * transaction (one proposal, one log append, one commit), so the token bucket ([zookeeper]
 * write-qps, burst max(10, write-qps)) holds write requests, and one token pays for a
 * request of up to max_ops operations ([zookeeper] max-ops-per-write).
 *
 * The registry's dispatch runs every registration that has a write to make in one loop pass
 * and then flushes them together (zk-ops.c sends them as multis of max_ops): the first write
 * of a pass takes a token and opens a request with max_ops - 1 free places, the next writes
 * fill it, the one after opens another request with the next token, and the flush closes the
 * last one (write_pacer_flush: its free places are not carried over to the next pass). So a
 * session's worth of members after an expiry, or a pods-dir full of pods at start, goes out
 * as ceil(n / max_ops) full requests at once while the bucket holds that many tokens; when it
 * runs dry, what became ready while waiting for the next token goes out together with it.
 *
 * A pure function of an explicit clock, like the token bucket it holds, so the fleet
 * simulation (tests/sim/zk-fleet-sim.c) runs exactly this code. */

#include <stdbool.h>

#include "macro.h"
#include "token-bucket.h"

/* The default operations in one write request: the server takes a multi of 250 ServerSet
 * creates in about the time of a few single creates (docs/benchmarks.md), and well under its
 * jute.maxbuffer (1 MiB). */
#define WRITE_PACER_MAX_OPS_DEFAULT 250
/* The most a request may carry ([zookeeper] max-ops-per-write is checked against it): 1,000
 * ServerSet members stay under 1 MiB, and zk-ops.c also cuts a multi at 256 KiB. */
#define WRITE_PACER_MAX_OPS_LIMIT 1000 /* zkreg.c says so in its message */

struct write_pacer {
        struct token_bucket tb; /* write requests */
        unsigned max_ops;       /* operations one request carries */
        unsigned left;          /* free places in the request this pass has paid for */
};

/* qps requests a second, a burst of max(10, qps); each request up to max_ops operations
 * (at least 1). */
void write_pacer_init(struct write_pacer *p, double qps, unsigned max_ops, usec_t now);
/* Reload: the new rate and request size; the tokens held are kept (clamped to the new burst). */
void write_pacer_set(struct write_pacer *p, double qps, unsigned max_ops, usec_t now);
/* One write operation may go now: true. It fills the open request if that has a free place,
 * else takes a token for a new request. False without a token: ret_wait (if non-NULL) is the
 * time until the next one. */
bool write_pacer_take(struct write_pacer *p, usec_t now, usec_t *ret_wait);
/* The pass's writes went out: an open request is closed (its free places are not kept). */
void write_pacer_flush(struct write_pacer *p);
