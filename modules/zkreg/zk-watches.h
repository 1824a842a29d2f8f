/* SPDX-License-Identifier: MIT */
#pragma once

/* Node watches for other modules (FACT_ZOOKEEPER in agent/facts.h): report a znode's mzxid
 * once soon after watch_node() and again after every change, re-armed across reconnects and
 * session expiry (a new session re-reads every watched node, so a change missed meanwhile is
 * still reported). */

#include <systemd/sd-event.h>

#include "facts.h"
#include "macro.h"
#include "zk-session.h"

struct zk_watches;

int zk_watches_new(sd_event *e, struct zk_session *session, struct zk_watches **ret);
/* Call after the session's handle is closed or freed (no ZooKeeper watcher can fire anymore). */
struct zk_watches *zk_watches_free(struct zk_watches *w);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct zk_watches *, zk_watches_free);

/* The session changed state: on CONNECTED every watch is (re)read; on SUSPENDED/EXPIRED/
 * CLOSED every live watch is told -ENOTCONN once. */
void zk_watches_session_changed(struct zk_watches *w, enum zk_session_state state);

/* The fact's functions; zk is the struct zk_watches. */
int zk_watches_watch_node(void *zk, const char *path, zookeeper_node_fn fn, void *userdata, void **ret_watch);
void zk_watches_unwatch_node(void *zk, void *watch);

/* The fact is going away: cancel every watch (its fn is never called again), as if each were
 * unwatched; the watches are freed by the usual rules once ZooKeeper holds none of them. A
 * watcher of the fact must not unwatch them afterwards (facts.h). */
void zk_watches_cancel_all(struct zk_watches *w);

size_t zk_watches_count(const struct zk_watches *w);
