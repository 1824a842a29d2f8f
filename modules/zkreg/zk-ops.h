/* SPDX-License-Identifier: MIT */
#pragma once

/* zk-ops: the registrations' ZooKeeper operations on the agent's session: each zoo_a*() call
 * and its completion, counted in pinion_zookeeper_operations_total (by op and result) and
 * timed in pinion_zookeeper_operation_duration_seconds.
 *
 * An operation reports its result to its owner through a callback. The client completes every
 * operation, with ZCLOSING at the latest when the handle closes, so an owner that goes away
 * first detaches (zk_ops_detach): its operations then complete to the orphan handler given to
 * zk_ops_new(). zk_ops_free() detaches everything: what is still in flight completes to no one.
 * Operations go out only while the session is connected, except deletes, which the client
 * queues on any handle until it reconnects (or fails them).
 *
 * Writes (create, set, delete) do not go out at once: they wait for zk_ops_flush(), which the
 * owner calls after a burst of steps (else a deferred source calls it on the next loop
 * iteration). The flush sends what waits in order, together as ZooKeeper multi requests of up
 * to max_ops ops (zk_ops_set_max_ops, 250 by default; and 256 KiB), several in flight at once;
 * a lone write goes out on its own. Each request sent is counted in
 * pinion_zookeeper_write_transactions_total, its ops in pinion_zookeeper_write_transaction_ops. A
 * multi is atomic, and a burst of registrations has nothing to do with one another: when one
 * op of a multi fails on its node (NONODE, NODEEXISTS...), it reports that, and the others,
 * which did not happen, go out again one by one, so each gets its own answer. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "metrics.h"
#include "zk-error.h"
#include "zk-session.h"

enum zk_op_kind {
        ZK_OP_CREATE,
        ZK_OP_CREATE_PARENT,
        ZK_OP_SET,
        ZK_OP_DELETE,
        ZK_OP_LIST,
        ZK_OP_GET,
        ZK_OP_WATCH_CHILDREN,
        ZK_OP_MULTI, /* only counted: the ops in it report as themselves */
        _ZK_OP_KIND_MAX,
};

/* One member_* child read by a check. */
struct zk_member_read {
        char *path;
        int rc;        /* ZOK; ZNONODE (deleted since the list); else why it could not be read */
        char *data;    /* rc ZOK: its data, size bytes (NUL-terminated beyond them) */
        size_t size;
        int64_t owner; /* rc ZOK: its ephemeralOwner */
};

struct zk_op_result {
        enum zk_op_kind kind; /* a check reports as ZK_OP_LIST */
        int rc;
        const char *path;     /* the path operated on (a create: PARENT/member_; a check: PARENT) */
        const char *data;     /* create, set: the data sent */
        const char *created;  /* create with rc ZOK: the new member's path */
        const struct zk_member_read *members; /* check with rc ZOK: every member_*, as listed */
        size_t n_members;
        char *const *children; /* child watch with rc ZOK: the children's names, unsorted */
        size_t n_children;
};

typedef void (*zk_op_done_fn)(void *owner, const struct zk_op_result *res);

struct zk_ops;

int zk_ops_new(sd_event *e, struct zk_session *session, struct metrics *metrics, zk_op_done_fn orphan,
               void *orphan_userdata, struct zk_ops **ret);
struct zk_ops *zk_ops_free(struct zk_ops *ops);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct zk_ops *, zk_ops_free);

/* Each returns ZOK once the operation is in flight or pending (done will be called exactly
 * once, never from inside the call), else the client's error code: ZINVALIDSTATE without a
 * usable session, ZSYSTEMERROR out of memory, ... (nothing in flight, done is never called). */

/* An EPHEMERAL_SEQUENTIAL parent/member_ with data. */
int zk_ops_create_member(struct zk_ops *ops, const char *parent, const char *data, zk_op_done_fn done, void *owner);
/* Any version (-1). */
int zk_ops_set(struct zk_ops *ops, const char *path, const char *data, zk_op_done_fn done, void *owner);
int zk_ops_delete(struct zk_ops *ops, const char *path, zk_op_done_fn done, void *owner);
/* Lists parent and reads every member_* child; one result when every read has completed. */
int zk_ops_check(struct zk_ops *ops, const char *parent, zk_op_done_fn done, void *owner);
/* A child watch on path: lists its children and leaves a one-shot watch on them, whose event
 * (ZOO_CHILD_EVENT, or ZOO_DELETED_EVENT for path itself) reaches the session's node event
 * hook (zk_session_set_node_event); done reports the names, or rc ZNONODE if path is not
 * there (no watch is left then). It goes out with the next flush in which no write is in
 * flight (a burst's writes go first), at most 250 in flight at once (other clients'
 * requests are not stuck behind thousands). */
int zk_ops_watch_children(struct zk_ops *ops, const char *path, zk_op_done_fn done, void *owner);
/* Creates each path (persistent, empty) in order; ZooKeeper runs one session's requests in
 * order, so a create issued after these sees them. Results are only counted. Returns how many
 * went out. */
size_t zk_ops_create_parents(struct zk_ops *ops, char *const *paths);

/* The most writes one multi carries (at least 1). */
void zk_ops_set_max_ops(struct zk_ops *ops, size_t max_ops);

/* Sends the pending writes now. Their done may run from inside it (a write that cannot go). */
void zk_ops_flush(struct zk_ops *ops);

/* The owner goes away: its operations complete to the orphan handler from now on. */
void zk_ops_detach(struct zk_ops *ops, void *owner);
/* A delete of path (NULL: of anything) is in flight. */
bool zk_ops_deleting(const struct zk_ops *ops, const char *path);
