/* SPDX-License-Identifier: MIT */
#pragma once

/* The registrations: one per pod with pinion.io/serverset, reconciled against ZooKeeper.
 *
 * Each registration has a wanted side (is the pod registrable: Ready, every pod gate open,
 * health checks passing, an IP and a port; and the ServerSet data) and a known side (our
 * member znode, the data written there, and whether a create's outcome is unknown). Its state
 * machine (reg.c; the states and their meaning in reg-plan.h, as
 * /v1/registrations shows them) issues at most one operation at a time; writes are paced per
 * ZooKeeper request (write-pacer.h: write-qps requests a second, each a multi of up to
 * max-ops-per-write operations).
 *
 * No duplicates: after a connection loss during a create, the registration lists the path and
 * adopts a member whose ephemeralOwner is our session and whose endpoint is ours, instead of
 * creating again. After expiry the old session's nodes are gone with it; members are created
 * anew. */

#include <stdint.h>

#include <cjson/cJSON.h>

#include "api.h"
#include "macro.h"
#include "zk-session.h"

struct manager;
struct registry;

struct registry_config {
        double write_qps;           /* write requests a second */
        unsigned max_ops_per_write; /* operations in one write request (a multi) */
        usec_t drain_delay;
        usec_t flap_damping;
        /* [zookeeper] allowed-prefixes (NULL or empty: any path); the registry keeps a copy. */
        char *const *allowed_prefixes;
        /* registry_new only: drained from the start (the operator's drain outlives the process;
         * drain-state.h), so the first evaluation registers nothing. */
        bool drained;
};

int registry_new(struct manager *m, struct zk_session *session, const struct registry_config *config,
                 struct registry **ret);
struct registry *registry_free(struct registry *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct registry *, registry_free);

/* Takes the new settings (a copy of allowed_prefixes) and re-checks every registration. */
int registry_set_config(struct registry *r, const struct registry_config *config);
void registry_session_changed(struct registry *r, enum zk_session_state old, enum zk_session_state new);

/* Shutdown: deregister everything now (no damping, no token wait). Returns 0 if nothing of ours
 * is left in ZooKeeper, else 1 and calls done once that is so (or the session is lost). */
typedef void (*registry_done_fn)(struct registry *r, void *userdata);
int registry_shutdown(struct registry *r, registry_done_fn done, void *userdata);
/* Shutdown without a session: forget everything (the session's close removes our nodes). */
void registry_abandon(struct registry *r);

/* Drain: mark every registered entry STOPPING, remove it after drain-delay, and register
 * nothing until undrained. Returns how many entries were marked. */
size_t registry_drain(struct registry *r);
void registry_undrain(struct registry *r);
bool registry_drained(const struct registry *r);

/* /v1/registrations */
int registry_list_json(struct registry *r, cJSON **ret);
int registry_status(struct registry *r, cJSON *obj);
void registry_collect_metrics(struct registry *r);
