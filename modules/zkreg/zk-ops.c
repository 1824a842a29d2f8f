/* SPDX-License-Identifier: MIT */
/* The registrations' ZooKeeper operations (see zk-ops.h). */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strv.h"
#include "zk-ops.h"

static const char *const zk_op_kind_table[_ZK_OP_KIND_MAX] = {
        [ZK_OP_CREATE] = "create",
        [ZK_OP_CREATE_PARENT] = "create_parent",
        [ZK_OP_SET] = "set",
        [ZK_OP_DELETE] = "delete",
        [ZK_OP_LIST] = "get_children",
        [ZK_OP_GET] = "get",
        [ZK_OP_WATCH_CHILDREN] = "watch_children",
        [ZK_OP_MULTI] = "multi",
};

/* A multi carries at most max_ops writes ([zookeeper] max-ops-per-write, 250 by default: the
 * registry pays one write token for each such request, write-pacer.h) and MULTI_MAX_BYTES:
 * well under the server's jute.maxbuffer (1 MiB by default, per request), and small enough
 * that a burst goes out as several requests: the server's stages (prepare, log, apply) work on
 * consecutive ones at once, and another client's request waits behind at most max_ops of ours,
 * not behind the whole burst. */
#define MULTI_MAX_OPS_DEFAULT 250
/* Child watches (lists) in flight at once: reads cannot be batched, and thousands at once
 * would make every other client's request wait behind them. */
#define WATCHES_MAX_IN_FLIGHT 250
#define MULTI_MAX_BYTES (256 * 1024)
/* What a create, set or delete adds to a multi besides its path and data: the op header, the
 * string lengths, the open ACL, the flags. */
#define MULTI_OP_OVERHEAD 64
/* The longest sequence suffix the server appends to member_ (a signed 32-bit counter, %010d). */
#define SEQUENCE_SUFFIX_MAX 11

/* A check: one list, then a read of every member it found; reported once all are back. It
 * lives as long as its operations: the last one to complete frees it. */
struct zk_check {
        zk_op_done_fn done; /* NULL: zk_ops_free() ran */
        void *owner;
        char *parent;
        struct zk_member_read *members;
        size_t n_members;
        size_t pending; /* reads in flight */
};

/* One operation in flight. The client holds it until its completion runs. */
struct zk_op {
        struct zk_ops *ops; /* NULL: zk_ops_free() ran */
        struct zk_op *prev, *next;
        enum zk_op_kind kind;
        char *path;
        char *data;
        usec_t started;
        zk_op_done_fn done; /* NULL: counted only */
        void *owner;
        struct zk_check *check; /* ZK_OP_LIST and ZK_OP_GET of a check */
        size_t index;           /* ZK_OP_GET: which member of the check */
        struct zk_op *q_next;   /* waiting for the flush */
        bool write_sent;        /* a create, set or delete the client holds */
        bool watch_sent;        /* a child watch's list the client holds */
};

/* Writes sent together as one multi: the client holds it until its completion runs. */
struct zk_batch {
        size_t n;
        struct zk_op **op;
        zoo_op_t *zop;
        zoo_op_result_t *res;
        char *paths; /* the created paths, one slot of path_max per op */
        size_t path_max;
};

struct zk_ops {
        struct zk_session *session;
        struct zk_op *ops; /* in flight or pending */
        struct zk_op *pending_head, *pending_tail;
        struct zk_op *watch_head, *watch_tail; /* child watches: sent once no write is in flight */
        size_t writes_in_flight, watches_in_flight;
        size_t max_ops; /* writes in one multi */
        sd_event_source *flush;
        zk_op_done_fn orphan;
        void *orphan_userdata;
        struct metric_family *m_ops, *m_op_seconds, *m_write_txns, *m_txn_ops;
};

static int on_flush(sd_event_source *src, void *userdata) {
        (void) src;
        zk_ops_flush(userdata);
        return 0;
}

static void op_free(struct zk_op *op) {
        free(op->path);
        free(op->data);
        free(op);
}

static void op_unlink(struct zk_op *op) {
        struct zk_ops *ops = op->ops;

        if (op->prev)
                op->prev->next = op->next;
        else
                ops->ops = op->next;
        if (op->next)
                op->next->prev = op->prev;
        op->prev = op->next = NULL;
}

int zk_ops_new(sd_event *e, struct zk_session *session, struct metrics *metrics, zk_op_done_fn orphan,
               void *orphan_userdata, struct zk_ops **ret) {
        static const char *const op_result[] = { "op", "result", NULL };
        static const char *const op[] = { "op", NULL };
        static const double buckets[] = { 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10 };
        static const double ops_buckets[] = { 1, 2, 5, 10, 25, 50, 100, 250, 500, 1000 };
        _cleanup_(zk_ops_freep) struct zk_ops *ops = NULL;
        int k;

        ops = calloc(1, sizeof(*ops));
        if (!ops)
                return -ENOMEM;
        ops->session = session;
        ops->orphan = orphan;
        ops->orphan_userdata = orphan_userdata;
        ops->max_ops = MULTI_MAX_OPS_DEFAULT;
        const struct metric_def families[] = {
                { METRIC_COUNTER, "pinion_zookeeper_operations_total",
                  "ZooKeeper operations by op (create, create_parent, set, delete, get_children, get, watch_children: a list that sets a child watch; multi: one request carrying several creates, sets and deletes, each also counted as itself) and result (ok, no_node, node_exists, connection_loss, session_expired, not_connected, ...).",
                  op_result, NULL, 0, &ops->m_ops },
                { METRIC_HISTOGRAM, "pinion_zookeeper_operation_duration_seconds",
                  "Time from submitting a ZooKeeper operation to its completion, by op.", op, buckets,
                  ELEMENTSOF(buckets), &ops->m_op_seconds },
                { METRIC_COUNTER, "pinion_zookeeper_write_transactions_total",
                  "Write requests sent to ZooKeeper, each one transaction on the server: a multi of creates, sets and deletes, or a lone write (what write-qps paces).",
                  NULL, NULL, 0, &ops->m_write_txns },
                { METRIC_HISTOGRAM, "pinion_zookeeper_write_transaction_ops",
                  "Creates, sets and deletes in each write request sent (at most max-ops-per-write).", NULL,
                  ops_buckets, ELEMENTSOF(ops_buckets), &ops->m_txn_ops },
        };
        k = metrics_families(metrics, families, ELEMENTSOF(families));
        if (k < 0)
                return k;
        k = sd_event_add_defer(e, &ops->flush, on_flush, ops);
        if (k < 0)
                return k;
        (void) sd_event_source_set_enabled(ops->flush, SD_EVENT_OFF);
        *ret = TAKE_PTR(ops);
        return 0;
}

struct zk_ops *zk_ops_free(struct zk_ops *ops) {
        if (!ops)
                return NULL;
        /* Pending ones never went out: nothing will complete them. */
        while (ops->pending_head) {
                struct zk_op *op = ops->pending_head;
                ops->pending_head = op->q_next;
                op_unlink(op);
                op_free(op);
        }
        while (ops->watch_head) {
                struct zk_op *op = ops->watch_head;
                ops->watch_head = op->q_next;
                op_unlink(op);
                op_free(op);
        }
        sd_event_source_disable_unref(ops->flush);
        /* Operations still in flight complete when the session's handle closes: detach them. */
        for (struct zk_op *op = ops->ops; op; op = op->next) {
                op->ops = NULL;
                op->done = NULL;
                if (op->check)
                        op->check->done = NULL;
        }
        free(ops);
        return NULL;
}

void zk_ops_set_max_ops(struct zk_ops *ops, size_t max_ops) {
        ops->max_ops = max_ops > 0 ? max_ops : 1;
}

void zk_ops_detach(struct zk_ops *ops, void *owner) {
        for (struct zk_op *op = ops->ops; op; op = op->next) {
                if (op->done && op->owner == owner) {
                        op->done = ops->orphan;
                        op->owner = ops->orphan_userdata;
                }
                if (op->check && op->check->done && op->check->owner == owner) {
                        op->check->done = ops->orphan;
                        op->check->owner = ops->orphan_userdata;
                }
        }
}

bool zk_ops_deleting(const struct zk_ops *ops, const char *path) {
        for (const struct zk_op *op = ops->ops; op; op = op->next)
                if (op->kind == ZK_OP_DELETE && (!path || streq(op->path, path)))
                        return true;
        return false;
}

/* The handle to submit on: deletes go on any handle (the client queues them until it
 * reconnects), everything else only while connected. */
static zhandle_t *ops_handle(struct zk_ops *ops, enum zk_op_kind kind) {
        if (kind != ZK_OP_DELETE && zk_session_state(ops->session) != ZK_SESSION_CONNECTED)
                return NULL;
        return zk_session_handle(ops->session);
}

static struct zk_op *op_new(struct zk_ops *ops, enum zk_op_kind kind, const char *path, const char *data,
                            zk_op_done_fn done, void *owner) {
        struct zk_op *op = calloc(1, sizeof(*op));
        if (!op)
                return NULL;
        op->path = strdup(path);
        op->data = data ? strdup(data) : NULL;
        if (!op->path || (data && !op->data)) {
                free(op->path);
                free(op->data);
                free(op);
                return NULL;
        }
        op->ops = ops;
        op->kind = kind;
        op->done = done;
        op->owner = owner;
        op->started = now_usec(CLOCK_MONOTONIC);
        op->next = ops->ops;
        if (ops->ops)
                ops->ops->prev = op;
        ops->ops = op;
        return op;
}

/* Unlinks the op and counts its result. */
static void op_finish(struct zk_op *op, int rc) {
        struct zk_ops *ops = op->ops;

        if (!ops)
                return;
        op_unlink(op);
        if (op->write_sent) {
                op->write_sent = false;
                /* The last write answered: the watches waiting for it may go. */
                if (--ops->writes_in_flight == 0 && ops->watch_head)
                        (void) sd_event_source_set_enabled(ops->flush, SD_EVENT_ONESHOT);
        }
        if (op->watch_sent) {
                op->watch_sent = false;
                if (ops->watches_in_flight-- == WATCHES_MAX_IN_FLIGHT && ops->watch_head)
                        (void) sd_event_source_set_enabled(ops->flush, SD_EVENT_ONESHOT);
        }
        (void) metric_inc(ops->m_ops, zk_op_kind_table[op->kind], zk_error_name(rc));
        if (rc != ZCLOSING)
                (void) metric_observe(ops->m_op_seconds,
                                      (double) (now_usec(CLOCK_MONOTONIC) - op->started) / USEC_PER_SEC,
                                      zk_op_kind_table[op->kind]);
}

/* Reports res to the op's owner (if anyone still listens), then frees the op. */
static void op_report(struct zk_op *op, struct zk_op_result *res) {
        zk_op_done_fn done = op->ops ? op->done : NULL;
        void *owner = op->owner;

        res->kind = op->kind;
        res->path = op->path;
        res->data = op->data;
        if (done)
                done(owner, res);
        op_free(op);
}

/* A new op of kind on a usable handle: ZOK, or why there is none (nothing to undo then). */
static int op_prepare(struct zk_ops *ops, enum zk_op_kind kind, const char *path, const char *data,
                      zk_op_done_fn done, void *owner, zhandle_t **ret_zh, struct zk_op **ret_op) {
        zhandle_t *zh = ops_handle(ops, kind);
        struct zk_op *op;

        if (!zh)
                return ZINVALIDSTATE;
        op = op_new(ops, kind, path, data, done, owner);
        if (!op)
                return ZSYSTEMERROR;
        *ret_zh = zh;
        *ret_op = op;
        return ZOK;
}

/* After the zoo_a*() call: on failure nothing is in flight. */
static int op_submitted(struct zk_ops *ops, struct zk_op *op, int rc) {
        if (rc != ZOK) {
                op_finish(op, rc);
                op_free(op);
                return rc;
        }
        zk_session_kick(ops->session);
        return ZOK;
}

/* ---- writes: pending until the flush, then one multi for those that go out together ---- */

static void create_done(int rc, const char *value, const void *data) {
        struct zk_op *op = (struct zk_op *) data;

        op_finish(op, rc);
        op_report(op, &(struct zk_op_result) { .rc = rc, .created = rc == ZOK ? value : NULL });
}

static void stat_done(int rc, const struct Stat *stat, const void *data) {
        struct zk_op *op = (struct zk_op *) data;

        (void) stat;
        op_finish(op, rc);
        op_report(op, &(struct zk_op_result) { .rc = rc });
}

static void children_done(int rc, const struct String_vector *strings, const void *data) {
        struct zk_op *op = (struct zk_op *) data;
        bool listed = rc == ZOK && strings;

        op_finish(op, rc);
        op_report(op, &(struct zk_op_result) {
                              .rc = rc == ZOK && !strings ? ZSYSTEMERROR : rc,
                              .children = listed ? strings->data : NULL,
                              .n_children = listed && strings->count > 0 ? (size_t) strings->count : 0,
                      });
}

static void delete_done(int rc, const void *data) {
        struct zk_op *op = (struct zk_op *) data;

        op_finish(op, rc);
        op_report(op, &(struct zk_op_result) { .rc = rc });
}

/* The op failed before the server saw it (or a multi it was part of reported this for all). */
static void op_fail(struct zk_op *op, int rc) {
        op_finish(op, rc);
        op_report(op, &(struct zk_op_result) { .rc = rc });
}

/* A write request went out: one transaction on the server, whatever it carries. */
static void write_request_sent(struct zk_ops *ops, size_t n) {
        (void) metric_inc(ops->m_write_txns);
        (void) metric_observe(ops->m_txn_ops, (double) n);
}

/* Sends one write on its own; on failure it is reported at once. */
static void op_send(struct zk_ops *ops, struct zk_op *op) {
        zhandle_t *zh = ops_handle(ops, op->kind);
        int len = op->data ? (int) strlen(op->data) : 0;
        int rc = ZINVALIDSTATE;

        if (zh)
                switch (op->kind) {
                case ZK_OP_CREATE:
                        rc = zoo_acreate(zh, op->path, op->data, len, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL,
                                         create_done, op);
                        break;
                case ZK_OP_SET:
                        rc = zoo_aset(zh, op->path, op->data, len, -1, stat_done, op);
                        break;
                case ZK_OP_DELETE:
                        rc = zoo_adelete(zh, op->path, -1, delete_done, op);
                        break;
                default:
                        rc = ZBADARGUMENTS;
                        break;
                }
        if (rc != ZOK)
                op_fail(op, rc);
        else {
                op->write_sent = true;
                ops->writes_in_flight++;
                write_request_sent(ops, 1);
        }
}

static struct zk_batch *batch_free(struct zk_batch *b) {
        if (b) {
                free(b->op);
                free(b->zop);
                free(b->res);
                free(b->paths);
                free(b);
        }
        return NULL;
}

static struct zk_batch *batch_new(size_t n, size_t path_max) {
        struct zk_batch *b = calloc(1, sizeof(*b));

        if (!b)
                return NULL;
        b->op = calloc(n, sizeof(*b->op));
        b->zop = calloc(n, sizeof(*b->zop));
        b->res = calloc(n, sizeof(*b->res));
        b->paths = calloc(n, path_max);
        b->path_max = path_max;
        if (!b->op || !b->zop || !b->res || !b->paths)
                return batch_free(b);
        return b;
}

/* The multi's answer. It is atomic: either every op happened (each reports its own result) or
 * none did. Then a connection problem is every op's answer (each owner handles an unknown
 * outcome as for a single op), and an answer about one node (NONODE, NODEEXISTS, ...) is that
 * op's own; the others did not happen because of it and are sent again, each on its own, so
 * that one stale op does not hold up the rest. */
static void multi_done(int rc, const void *data) {
        struct zk_batch *b = (struct zk_batch *) data;
        struct zk_ops *ops = b->op[0]->ops;

        if (ops)
                (void) metric_inc(ops->m_ops, zk_op_kind_table[ZK_OP_MULTI], zk_error_name(rc));
        for (size_t i = 0; i < b->n; i++) {
                struct zk_op *op = b->op[i];
                int err = b->res[i].err;
                if (rc == ZOK) {
                        op_finish(op, err);
                        op_report(op, &(struct zk_op_result) {
                                              .rc = err,
                                              .created = op->kind == ZK_OP_CREATE && err == ZOK ? b->res[i].value : NULL,
                                      });
                } else if (zk_error_is_connection(rc) || !op->ops || err == rc)
                        op_fail(op, zk_error_is_connection(rc) || !op->ops ? rc : err);
                else {
                        op->write_sent = false;
                        op->ops->writes_in_flight--;
                        op_send(op->ops, op);
                }
        }
        if (ops && ops->writes_in_flight == 0 && ops->watch_head)
                (void) sd_event_source_set_enabled(ops->flush, SD_EVENT_ONESHOT);
        batch_free(b);
}

/* Takes the next ops from the pending queue, as many as fit in one multi. */
static size_t pending_take(struct zk_ops *ops, struct zk_op **ret_first, size_t *ret_path_max) {
        size_t n = 0, bytes = 0, path_max = 0;
        struct zk_op *op = ops->pending_head, *last = NULL;

        *ret_first = op;
        for (; op && n < ops->max_ops; last = op, op = op->q_next) {
                size_t plen = strlen(op->path), cost = MULTI_OP_OVERHEAD + plen + (op->data ? strlen(op->data) : 0);
                if (n > 0 && bytes + cost > MULTI_MAX_BYTES)
                        break;
                bytes += cost;
                path_max = MAX(path_max, plen + SEQUENCE_SUFFIX_MAX + 1);
                n++;
        }
        if (last)
                last->q_next = NULL;
        ops->pending_head = op;
        if (!op)
                ops->pending_tail = NULL;
        *ret_path_max = path_max;
        return n;
}

static void batch_send(struct zk_ops *ops, struct zk_op *first, size_t n, size_t path_max) {
        struct zk_batch *b = batch_new(n, path_max);
        zhandle_t *zh = zk_session_handle(ops->session);
        struct zk_op *op = first;
        int rc;

        if (!b) {
                for (struct zk_op *next; op; op = next) {
                        next = op->q_next;
                        op_fail(op, ZSYSTEMERROR);
                }
                return;
        }
        for (size_t i = 0; op; i++, op = op->q_next) {
                int len = op->data ? (int) strlen(op->data) : 0;
                b->op[i] = op;
                if (op->kind == ZK_OP_CREATE)
                        zoo_create_op_init(&b->zop[i], op->path, op->data, len, &ZOO_OPEN_ACL_UNSAFE,
                                           ZOO_EPHEMERAL_SEQUENTIAL, b->paths + i * path_max, (int) path_max);
                else if (op->kind == ZK_OP_SET)
                        zoo_set_op_init(&b->zop[i], op->path, op->data, len, -1, NULL);
                else
                        zoo_delete_op_init(&b->zop[i], op->path, -1);
        }
        b->n = n;
        rc = zh ? zoo_amulti(zh, (int) n, b->zop, b->res, multi_done, b) : ZINVALIDSTATE;
        if (rc != ZOK) {
                for (size_t i = 0; i < n; i++)
                        op_fail(b->op[i], rc);
                batch_free(b);
                return;
        }
        for (size_t i = 0; i < n; i++)
                b->op[i]->write_sent = true;
        ops->writes_in_flight += n;
        write_request_sent(ops, n);
}

void zk_ops_flush(struct zk_ops *ops) {
        bool sent = false;

        (void) sd_event_source_set_enabled(ops->flush, SD_EVENT_OFF);
        /* Creates and sets go out only on a connected session (the session may have gone since
         * they were queued): without one they fail now; deletes go on any handle. */
        if (!ops_handle(ops, ZK_OP_CREATE)) {
                struct zk_op *keep = NULL, *keep_tail = NULL, *failed = NULL, *failed_tail = NULL;
                for (struct zk_op *op = ops->pending_head, *next; op; op = next) {
                        struct zk_op **head = op->kind == ZK_OP_DELETE ? &keep : &failed;
                        struct zk_op **tail = op->kind == ZK_OP_DELETE ? &keep_tail : &failed_tail;
                        next = op->q_next;
                        op->q_next = NULL;
                        if (*tail)
                                (*tail)->q_next = op;
                        else
                                *head = op;
                        *tail = op;
                }
                ops->pending_head = keep;
                ops->pending_tail = keep_tail;
                for (struct zk_op *op = failed, *next; op; op = next) {
                        next = op->q_next;
                        op->q_next = NULL;
                        op_fail(op, ZINVALIDSTATE);
                }
        }
        while (ops->pending_head) {
                struct zk_op *first = NULL;
                size_t path_max = 0, n;

                n = pending_take(ops, &first, &path_max);
                if (n == 1) {
                        first->q_next = NULL;
                        op_send(ops, first);
                } else
                        batch_send(ops, first, n, path_max);
                sent = true;
        }
        /* Child watches after the writes: a burst of creates is not slowed by the lists that
         * watch its members, and one list after the burst sees all of them. */
        while (ops->writes_in_flight == 0 && ops->watches_in_flight < WATCHES_MAX_IN_FLIGHT && ops->watch_head) {
                struct zk_op *op = ops->watch_head;
                zhandle_t *zh = ops_handle(ops, op->kind);
                int rc;
                ops->watch_head = op->q_next;
                if (!ops->watch_head)
                        ops->watch_tail = NULL;
                op->q_next = NULL;
                rc = zh ? zoo_aget_children(zh, op->path, 1, children_done, op) : ZINVALIDSTATE;
                if (rc != ZOK)
                        op_fail(op, rc);
                else {
                        op->watch_sent = true;
                        ops->watches_in_flight++;
                }
                sent = true;
        }
        if (sent)
                zk_session_kick(ops->session);
}

/* A write on a usable handle waits for the flush: ZOK, or why it cannot go (nothing pending
 * then). */
static int op_pend(struct zk_ops *ops, enum zk_op_kind kind, const char *path, const char *data, zk_op_done_fn done,
                   void *owner) {
        struct zk_op *op;

        if (!ops_handle(ops, kind))
                return ZINVALIDSTATE;
        op = op_new(ops, kind, path, data, done, owner);
        if (!op)
                return ZSYSTEMERROR;
        if (ops->pending_tail)
                ops->pending_tail->q_next = op;
        else
                ops->pending_head = op;
        ops->pending_tail = op;
        (void) sd_event_source_set_enabled(ops->flush, SD_EVENT_ONESHOT);
        return ZOK;
}

int zk_ops_create_member(struct zk_ops *ops, const char *parent, const char *data, zk_op_done_fn done, void *owner) {
        _cleanup_free_ char *path = NULL;

        if (asprintf(&path, "%s/member_", parent) < 0) {
                path = NULL;
                return ZSYSTEMERROR;
        }
        return op_pend(ops, ZK_OP_CREATE, path, data, done, owner);
}

int zk_ops_set(struct zk_ops *ops, const char *path, const char *data, zk_op_done_fn done, void *owner) {
        return op_pend(ops, ZK_OP_SET, path, data, done, owner);
}

int zk_ops_delete(struct zk_ops *ops, const char *path, zk_op_done_fn done, void *owner) {
        return op_pend(ops, ZK_OP_DELETE, path, NULL, done, owner);
}

int zk_ops_watch_children(struct zk_ops *ops, const char *path, zk_op_done_fn done, void *owner) {
        struct zk_op *op;

        if (!ops_handle(ops, ZK_OP_WATCH_CHILDREN))
                return ZINVALIDSTATE;
        op = op_new(ops, ZK_OP_WATCH_CHILDREN, path, NULL, done, owner);
        if (!op)
                return ZSYSTEMERROR;
        if (ops->watch_tail)
                ops->watch_tail->q_next = op;
        else
                ops->watch_head = op;
        ops->watch_tail = op;
        (void) sd_event_source_set_enabled(ops->flush, SD_EVENT_ONESHOT);
        return ZOK;
}

static void parent_done(int rc, const char *value, const void *data) {
        struct zk_op *op = (struct zk_op *) data;

        (void) value;
        op_finish(op, rc);
        op_free(op);
}

size_t zk_ops_create_parents(struct zk_ops *ops, char *const *paths) {
        size_t n = 0;

        STRV_FOREACH(p, paths) {
                struct zk_op *op = NULL;
                zhandle_t *zh = NULL;
                if (op_prepare(ops, ZK_OP_CREATE_PARENT, *p, NULL, NULL, NULL, &zh, &op) != ZOK)
                        break;
                if (op_submitted(ops, op, zoo_acreate(zh, *p, "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, parent_done,
                                                      op)) == ZOK)
                        n++;
        }
        return n;
}

/* ---- the check: list, then read every member_* ---- */

static void check_free(struct zk_check *c) {
        free(c->parent);
        for (size_t i = 0; i < c->n_members; i++) {
                free(c->members[i].path);
                free(c->members[i].data);
        }
        free(c->members);
        free(c);
}

static void check_report(struct zk_check *c, int rc) {
        if (c->done)
                c->done(c->owner, &(struct zk_op_result) {
                                          .kind = ZK_OP_LIST,
                                          .rc = rc,
                                          .path = c->parent,
                                          .members = c->members,
                                          .n_members = c->n_members,
                                  });
        check_free(c);
}

static void get_done(int rc, const char *value, int value_len, const struct Stat *stat, const void *data) {
        struct zk_op *op = (struct zk_op *) data;
        struct zk_check *c = op->check;
        struct zk_member_read *m = &c->members[op->index];

        op_finish(op, rc);
        m->rc = rc;
        if (rc == ZOK && stat) {
                size_t size = value && value_len > 0 ? (size_t) value_len : 0;
                m->owner = stat->ephemeralOwner;
                m->data = malloc(size + 1);
                if (m->data) {
                        if (size > 0)
                                memcpy(m->data, value, size);
                        m->data[size] = 0;
                        m->size = size;
                } else
                        m->rc = ZSYSTEMERROR;
        } else if (rc == ZOK)
                m->rc = ZSYSTEMERROR;
        op_free(op);
        if (--c->pending == 0)
                check_report(c, ZOK);
}

static void list_done(int rc, const struct String_vector *strings, const void *data) {
        struct zk_op *op = (struct zk_op *) data;
        struct zk_check *c = op->check;
        struct zk_ops *ops = op->ops;

        op_finish(op, rc);
        op_free(op);
        if (rc != ZOK || !strings || !ops || !c->done) {
                check_report(c, rc == ZOK ? ZSYSTEMERROR : rc);
                return;
        }
        c->members = calloc(strings->count > 0 ? (size_t) strings->count : 1, sizeof(*c->members));
        if (!c->members) {
                check_report(c, ZSYSTEMERROR);
                return;
        }
        for (int32_t i = 0; i < strings->count; i++) {
                if (strncmp(strings->data[i], "member_", 7) != 0)
                        continue;
                /* Every member not read is a failed read: the check is incomplete. */
                struct zk_member_read *m = &c->members[c->n_members++];
                struct zk_op *g = NULL;
                zhandle_t *zh = NULL;
                int k = ZSYSTEMERROR;
                if (asprintf(&m->path, "%s/%s", c->parent, strings->data[i]) < 0)
                        m->path = NULL;
                else
                        k = op_prepare(ops, ZK_OP_GET, m->path, NULL, NULL, NULL, &zh, &g);
                if (k == ZOK) {
                        g->check = c;
                        g->index = c->n_members - 1;
                        k = op_submitted(ops, g, zoo_aget(zh, m->path, 0, get_done, g));
                }
                if (k == ZOK)
                        c->pending++;
                else
                        m->rc = k;
        }
        if (c->pending == 0)
                check_report(c, ZOK);
}

int zk_ops_check(struct zk_ops *ops, const char *parent, zk_op_done_fn done, void *owner) {
        struct zk_check *c = calloc(1, sizeof(*c));
        struct zk_op *op = NULL;
        zhandle_t *zh = NULL;
        int rc;

        if (!c || !(c->parent = strdup(parent))) {
                free(c);
                return ZSYSTEMERROR;
        }
        c->done = done;
        c->owner = owner;
        rc = op_prepare(ops, ZK_OP_LIST, parent, NULL, NULL, NULL, &zh, &op);
        if (rc == ZOK) {
                op->check = c;
                rc = op_submitted(ops, op, zoo_aget_children(zh, parent, 0, list_done, op));
        }
        if (rc != ZOK)
                check_free(c);
        return rc;
}
