/* SPDX-License-Identifier: MIT */
#pragma once

/* The zk-version-node trigger: watches one znode through the ZooKeeper fact zkreg publishes
 * (facts.h, struct zookeeper_fact) and says "changed" when its mzxid moves. The first report
 * after a watch starts is the baseline (the sync at start covers it); a node that does not
 * exist counts as version -1, so its creation and its deletion are changes too; reports without
 * a session (-ENOTCONN) are ignored, since the fact reports again once it is back. */

#include <stdbool.h>
#include <stdint.h>

#include "facts.h"
#include "macro.h"

struct zk_trigger;

/* changed: the node's version moved from old to new (-1: absent). */
typedef void (*zk_trigger_fn)(struct zk_trigger *t, int64_t old_version, int64_t new_version, void *userdata);

/* Starts watching path through fact. The fact must outlive the trigger (or be replaced: see
 * zk_trigger_fact()). */
int zk_trigger_new(const struct zookeeper_fact *fact, const char *path, zk_trigger_fn fn, void *userdata,
                   struct zk_trigger **ret);
/* Stops the watch (fact->unwatch_node) unless forget is true (the fact is already gone, and its
 * watches with it). */
struct zk_trigger *zk_trigger_free(struct zk_trigger *t, bool forget);

const struct zookeeper_fact *zk_trigger_fact(const struct zk_trigger *t);
const char *zk_trigger_path(const struct zk_trigger *t);
/* The last version reported (-1 absent); false if none yet. */
bool zk_trigger_version(const struct zk_trigger *t, int64_t *ret);
/* The last error reported (negative errno, e.g. -ENOTCONN), 0 if the last report was good. */
int zk_trigger_error(const struct zk_trigger *t);
