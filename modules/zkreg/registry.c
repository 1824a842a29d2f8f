/* SPDX-License-Identifier: MIT */
/* The registrations (see registry.h): pod store and pod gates in, ZooKeeper members out. */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backoff.h"
#include "health.h"
#include "json.h"
#include "log.h"
#include "manager.h"
#include "registry.h"
#include "serverset.h"
#include "strv.h"

#define MODULE "zkreg"
#define FLAP_WINDOW (60 * USEC_PER_SEC)
#define FLAP_PENALTY_MAX (60 * USEC_PER_SEC)

enum op_kind {
        OP_CREATE,
        OP_CREATE_PARENT,
        OP_SET,
        OP_DELETE,
        OP_LIST,
        OP_GET,
        OP_EXISTS,
        _OP_KIND_MAX,
};

static const char *const op_kind_table[_OP_KIND_MAX] = {
        [OP_CREATE] = "create",
        [OP_CREATE_PARENT] = "create_parent",
        [OP_SET] = "set",
        [OP_DELETE] = "delete",
        [OP_LIST] = "get_children",
        [OP_GET] = "get",
        [OP_EXISTS] = "exists",
};

struct registration;

/* One ZooKeeper operation in flight. The client holds it until the completion runs (always:
 * closing the handle completes everything with ZCLOSING); the registry and the registration
 * may be gone by then (pointers NULL). */
struct zk_op {
        struct registry *registry;
        struct registration *reg;
        struct zk_op *prev, *next;
        enum op_kind kind;
        char *path;
        char *data;
        usec_t started;
};

struct registration {
        struct registry *registry;
        struct registration *prev, *next;       /* all registrations */
        struct registration *q_next;            /* work queue */
        bool queued;
        bool q_urgent;                          /* queued in the registry's urgent queue */

        char *uid;
        char *name; /* namespace/name */
        struct pod *pod;

        /* wanted */
        bool want;
        char *parent;   /* pinion.io/serverset */
        char *parent_floor; /* the allowed prefix it is under (NULL: none set): created by others */
        char *data;     /* ALIVE member data */
        char *stopping_data;
        char *endpoint; /* "ip:port" */
        char *why_not;
        struct health *health;
        char *health_ip;
        unsigned health_port;

        /* known */
        char *znode;       /* our member, as far as we know it exists */
        char *written;     /* its data */
        int64_t znode_session;
        bool uncertain;    /* a create's outcome is unknown: verify before creating */
        char *uncertain_data;
        char *uncertain_parent; /* the path that create used (the annotation may change since) */
        unsigned busy;     /* operations in flight */
        unsigned parent_attempts;
        bool verify_adopted, verify_failed;
        bool error_is_wait; /* last_error only says "waiting for the session" */

        bool removed;   /* the pod is gone (or lost its annotation): free once nothing is left */
        bool draining;
        usec_t drain_until; /* CLOCK_MONOTONIC */

        enum reg_state state;
        usec_t last_change; /* CLOCK_REALTIME */
        char *last_error;

        struct backoff backoff;
        usec_t not_before; /* CLOCK_MONOTONIC: backoff, damping, drain delay */
        usec_t error_until; /* CLOCK_MONOTONIC: the error backoff alone (kept while shutting down) */
        sd_event_source *timer;
        unsigned flaps;
        usec_t last_down; /* CLOCK_MONOTONIC of the last want true → false */
};

struct registry {
        struct manager *manager;
        sd_event *event;
        struct zk_session *session;
        struct registry_config config;
        char **allowed_prefixes; /* config.allowed_prefixes points here */
        struct token_bucket tb;

        struct registration *regs;
        size_t n_regs;
        /* Work queues: urgent (deletes and STOPPING updates: taking a member away must not
         * wait behind creates for write tokens), then normal; each FIFO. */
        struct reg_queue {
                struct registration *head, *tail;
        } q[2];
        struct zk_op *ops;
        sd_event_source *dispatch;       /* deferred: drains the queue */
        sd_event_source *dispatch_timer; /* the token bucket's wait */

        bool drained;
        bool shutting_down;
        registry_done_fn done;
        void *done_userdata;
        bool observing, listening;

        struct metric_family *m_ops, *m_op_seconds, *m_regs, *m_health, *m_registered_total;
};

static const char *const reg_state_table[_REG_STATE_MAX] = {
        [REG_UNREADY] = "unready",
        [REG_PENDING] = "pending",
        [REG_REGISTERING] = "registering",
        [REG_REGISTERED] = "registered",
        [REG_STOPPING] = "stopping",
        [REG_DEREGISTERING] = "deregistering",
};

const char *reg_state_to_string(enum reg_state s) {
        if (s < 0 || s >= _REG_STATE_MAX)
                return NULL;
        return reg_state_table[s];
}

#define reg_log(reg, level, error, ...)                                                             \
        log_ctx_full_errno((&(const struct log_ctx) { .module = MODULE, .pod_uid = (reg)->uid, .pod = (reg)->name }), \
                           level, error, __VA_ARGS__)

static void reg_kick(struct registration *reg);
static void registry_check_done(struct registry *r);

static int set_string(char **p, const char *v) {
        if (streq_ptr(*p, v))
                return 0;
        char *c = NULL;
        if (v && !(c = strdup(v)))
                return -ENOMEM;
        free(*p);
        *p = c;
        return 1;
}

static void reg_set_error(struct registration *reg, const char *error) {
        (void) set_string(&reg->last_error, error);
        reg->error_is_wait = false;
}

/* ---- state ---- */

static void reg_set_state(struct registration *reg, enum reg_state state) {
        enum reg_state old = reg->state;

        if (old == state)
                return;
        reg->state = state;
        reg->last_change = now_usec(CLOCK_REALTIME);
        if (state == REG_REGISTERED)
                (void) reg_log(reg, LOG_INFO, 0, "Registration %s → %s: %s at %s", reg_state_to_string(old),
                               reg_state_to_string(state), strempty(reg->endpoint), strempty(reg->znode));
        else if (state == REG_STOPPING || (state == REG_UNREADY && old != REG_PENDING) ||
                 old == REG_REGISTERED || old == REG_STOPPING)
                (void) reg_log(reg, LOG_INFO, 0, "Registration %s → %s%s%s", reg_state_to_string(old),
                               reg_state_to_string(state), reg->last_error ? ": " : "", strempty(reg->last_error));
        else
                (void) reg_log(reg, LOG_DEBUG, 0, "Registration %s → %s%s%s", reg_state_to_string(old),
                               reg_state_to_string(state), reg->last_error ? ": " : "", strempty(reg->last_error));
}

static const char *reg_desired_data(const struct registration *reg) {
        if (!reg->want)
                return NULL;
        return reg->draining ? reg->stopping_data : reg->data;
}

static bool znode_under(const char *znode, const char *parent) {
        size_t n = parent ? strlen(parent) : 0;
        return znode && parent && strncmp(znode, parent, n) == 0 && znode[n] == '/';
}

static void reg_update_state(struct registration *reg, enum op_kind busy_kind) {
        const char *desired = reg_desired_data(reg);

        if (reg->busy > 0) {
                if (busy_kind == OP_DELETE)
                        reg_set_state(reg, REG_DEREGISTERING);
                else if (busy_kind == OP_SET && reg->draining)
                        reg_set_state(reg, REG_STOPPING);
                else if (busy_kind == OP_SET && reg->state == REG_REGISTERED)
                        ; /* an update: still registered */
                else
                        reg_set_state(reg, REG_REGISTERING);
        } else if (desired && reg->znode && znode_under(reg->znode, reg->parent) &&
                   zk_session_state(reg->registry->session) != ZK_SESSION_CONNECTED) {
                /* The member may be gone (the session may expire meanwhile): not "registered". */
                if (!reg->last_error || reg->error_is_wait) {
                        reg_set_error(reg, "session suspended");
                        reg->error_is_wait = true;
                }
                reg_set_state(reg, REG_PENDING);
        } else if (desired && reg->znode && streq_ptr(reg->written, desired) && znode_under(reg->znode, reg->parent)) {
                if (reg->error_is_wait)
                        reg_set_error(reg, NULL);
                reg_set_state(reg, reg->draining ? REG_STOPPING : REG_REGISTERED);
        }
        else if (desired && reg->znode && !reg->draining && reg->state == REG_REGISTERED &&
                 znode_under(reg->znode, reg->parent))
                ; /* registered, its data about to be rewritten (endpoint change): still registered */
        else if (reg->want || reg->znode || reg->uncertain)
                reg_set_state(reg, REG_PENDING);
        else
                reg_set_state(reg, REG_UNREADY);
}

/* ---- operations ---- */

static struct zk_op *op_new(struct registry *r, struct registration *reg, enum op_kind kind, const char *path,
                            const char *data) {
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
        op->registry = r;
        op->reg = reg;
        op->kind = kind;
        op->started = now_usec(CLOCK_MONOTONIC);
        op->next = r->ops;
        if (r->ops)
                r->ops->prev = op;
        r->ops = op;
        if (reg)
                reg->busy++;
        return op;
}

/* Unlinks the op, counts its result; returns its registration (or NULL). */
static struct registration *op_finish(struct zk_op *op, int rc) {
        struct registry *r = op->registry;
        struct registration *reg = op->reg;

        if (r) {
                if (op->prev)
                        op->prev->next = op->next;
                else
                        r->ops = op->next;
                if (op->next)
                        op->next->prev = op->prev;
                (void) metric_inc(r->m_ops, op_kind_table[op->kind], zk_error_name(rc));
                if (rc != ZCLOSING)
                        (void) metric_observe(r->m_op_seconds,
                                              (double) (now_usec(CLOCK_MONOTONIC) - op->started) / USEC_PER_SEC,
                                              op_kind_table[op->kind]);
        }
        if (reg && reg->busy > 0)
                reg->busy--;
        return reg;
}

static void op_free(struct zk_op *op) {
        free(op->path);
        free(op->data);
        free(op);
}

static zhandle_t *registry_handle(struct registry *r) {
        if (zk_session_state(r->session) != ZK_SESSION_CONNECTED)
                return NULL;
        return zk_session_handle(r->session);
}

/* An error from ZooKeeper (not a connection problem): back off with jitter. */
static void reg_backoff(struct registration *reg, const char *what, int rc) {
        usec_t now = now_usec(CLOCK_MONOTONIC);
        usec_t wait = backoff_next(&reg->backoff, now, 0);
        char buf[512];

        snprintf(buf, sizeof(buf), "%s failed: %s (retrying in %llums)", what, zerror(rc),
                 (unsigned long long) (wait / USEC_PER_MSEC));
        reg_set_error(reg, buf);
        (void) reg_log(reg, LOG_WARNING, 0, "%s", buf);
        reg->not_before = now + wait;
        reg->error_until = now + wait;
}

static bool is_connection_error(int rc) {
        return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT || rc == ZSESSIONEXPIRED || rc == ZCLOSING ||
               rc == ZINVALIDSTATE || rc == ZSESSIONMOVED;
}

static void reg_after_op(struct registration *reg) {
        struct registry *r = reg->registry;

        if (reg->busy > 0)
                return;
        reg_update_state(reg, _OP_KIND_MAX);
        reg_kick(reg);
        if (r->shutting_down)
                registry_check_done(r);
}

static void delete_orphan(struct registry *r, const char *path);
static void member_watch(struct registry *r, const char *path);

static void parent_done(int rc, const char *value, const void *data) {
        struct zk_op *op = (struct zk_op *) data;

        (void) value;
        (void) op_finish(op, rc);
        op_free(op);
}

static void create_done(int rc, const char *value, const void *data) {
        struct zk_op *op = (struct zk_op *) data;
        struct registration *reg = op_finish(op, rc);
        struct registry *r = op->registry;

        if (!reg) {
                /* Nobody wants this member any more (can only happen while tearing down). */
                if (rc == ZOK && value && r)
                        delete_orphan(r, value);
                op_free(op);
                return;
        }
        if (rc == ZOK && value) {
                (void) set_string(&reg->znode, value);
                (void) set_string(&reg->written, op->data);
                reg->znode_session = zk_session_id(r->session);
                reg->uncertain = false;
                reg->parent_attempts = 0;
                member_watch(r, value);
                backoff_reset(&reg->backoff);
                reg_set_error(reg, NULL);
                (void) metric_inc(r->m_registered_total);
        } else if (rc == ZNONODE) {
                /* The path does not exist: create its parents (persistent, empty), in order, then
                 * the member again. ZooKeeper runs one session's requests in order. */
                zhandle_t *zh = registry_handle(r);
                _cleanup_free_ char *prefix = strdup(reg->parent ? reg->parent : "");
                size_t floor_len = reg->parent_floor ? strlen(reg->parent_floor) : 0;
                for (char *slash = prefix ? strchr(prefix + 1, '/') : NULL;; slash = strchr(slash + 1, '/')) {
                        if (!zh || !prefix)
                                break;
                        if (slash)
                                *slash = 0;
                        /* Only below the allowed prefix: the prefix and above are the operator's. */
                        struct zk_op *p = strlen(prefix) <= floor_len ? NULL :
                                          op_new(r, NULL, OP_CREATE_PARENT, prefix, NULL);
                        if (p && zoo_acreate(zh, prefix, "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, parent_done, p) != ZOK) {
                                op_finish(p, ZINVALIDSTATE);
                                op_free(p);
                        }
                        if (!slash)
                                break;
                        *slash = '/';
                }
                if (!zh)
                        reg_set_error(reg, "ZooKeeper session lost while creating the path");
                else if (reg->parent_floor && ++reg->parent_attempts > 2) {
                        char buf[512];
                        snprintf(buf, sizeof(buf), "the allowed prefix %s must exist (zkreg creates only the nodes "
                                 "below it)", reg->parent_floor);
                        reg_backoff(reg, buf, rc);
                } else if (!reg->parent_floor && ++reg->parent_attempts > 2)
                        /* Created the parents and still no node: something else is wrong. */
                        reg_backoff(reg, "creating the parent path", rc);
                else
                        reg_set_error(reg, "creating the parent path");
                zk_session_kick(r->session);
        } else if (rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT) {
                /* Did it happen? Find out on reconnect instead of creating again. */
                reg->uncertain = true;
                (void) set_string(&reg->uncertain_data, op->data);
                /* op->path is PARENT/member_: the check lists PARENT, whatever the annotation
                 * says by then (a member adopted outside the current path is deleted next). */
                free(reg->uncertain_parent);
                reg->uncertain_parent = strndup(op->path, strlen(op->path) - strlen("/member_"));
                reg_set_error(reg, "connection lost during create: checking for our member on reconnect");
        } else if (is_connection_error(rc)) {
                /* Session gone: a member it created went with it. */
                reg_set_error(reg, "ZooKeeper session lost during create");
        } else
                reg_backoff(reg, "create", rc);
        op_free(op);
        reg_after_op(reg);
}

static void delete_done(int rc, const void *data) {
        struct zk_op *op = (struct zk_op *) data;
        struct registration *reg = op_finish(op, rc);
        struct registry *r = op->registry;

        if (reg) {
                if (rc == ZOK || rc == ZNONODE) {
                        if (streq_ptr(reg->znode, op->path)) {
                                reg->znode = mfree(reg->znode);
                                reg->written = mfree(reg->written);
                                (void) reg_log(reg, LOG_INFO, 0, "Deregistered %s (%s)", op->path, strempty(reg->endpoint));
                        }
                        backoff_reset(&reg->backoff);
                        if (!reg->want && reg->why_not)
                                reg_set_error(reg, reg->why_not);
                } else if (!is_connection_error(rc))
                        reg_backoff(reg, "delete", rc);
                op_free(op);
                reg_after_op(reg);
                return;
        }
        op_free(op);
        if (r && r->shutting_down)
                registry_check_done(r);
}

static void delete_orphan(struct registry *r, const char *path) {
        zhandle_t *zh = zk_session_handle(r->session);
        struct zk_op *op;

        if (!zh)
                return;
        op = op_new(r, NULL, OP_DELETE, path, NULL);
        if (!op)
                return;
        if (zoo_adelete(zh, path, -1, delete_done, op) != ZOK) {
                op_finish(op, ZINVALIDSTATE);
                op_free(op);
                return;
        }
        zk_session_kick(r->session);
}

/* ---- our members deleted by someone else: an exists watch on each (watch=1: the session's
 * node events) ---- */

static bool delete_in_flight(const struct registry *r, const char *path) {
        for (const struct zk_op *op = r->ops; op; op = op->next)
                if (op->kind == OP_DELETE && streq(op->path, path))
                        return true;
        return false;
}

static void member_deleted(struct registry *r, const char *path) {
        if (delete_in_flight(r, path))
                return; /* our own deregistration */
        for (struct registration *reg = r->regs; reg; reg = reg->next) {
                if (!streq_ptr(reg->znode, path) || reg->znode_session != zk_session_id(r->session))
                        continue;
                reg->znode = mfree(reg->znode);
                reg->written = mfree(reg->written);
                reg_set_error(reg, "our member was deleted by someone else: registering again");
                (void) reg_log(reg, LOG_WARNING, 0, "Member %s was deleted by someone else: registering again", path);
                reg_after_op(reg);
                return;
        }
}

static void member_watch_done(int rc, const struct Stat *stat, const void *data) {
        struct zk_op *op = (struct zk_op *) data;
        struct registry *r = op->registry;

        (void) stat;
        (void) op_finish(op, rc);
        if (r && rc == ZNONODE)
                member_deleted(r, op->path); /* gone before the watch was set */
        op_free(op);
}

static void member_watch(struct registry *r, const char *path) {
        zhandle_t *zh = registry_handle(r);
        struct zk_op *op;

        if (!zh || !path)
                return;
        op = op_new(r, NULL, OP_EXISTS, path, NULL);
        if (!op)
                return;
        if (zoo_aexists(zh, path, 1, member_watch_done, op) != ZOK) {
                op_finish(op, ZINVALIDSTATE);
                op_free(op);
                return;
        }
        zk_session_kick(r->session);
}

static void on_node_event(int type, const char *path, void *userdata) {
        struct registry *r = userdata;

        if (type == ZOO_DELETED_EVENT) {
                member_deleted(r, path);
                return;
        }
        /* The one-shot watch fired on a change (our own update): watch on while it is ours. */
        for (struct registration *reg = r->regs; reg; reg = reg->next)
                if (streq_ptr(reg->znode, path)) {
                        member_watch(r, path);
                        return;
                }
}

static void set_done(int rc, const struct Stat *stat, const void *data) {
        struct zk_op *op = (struct zk_op *) data;
        struct registration *reg = op_finish(op, rc);

        (void) stat;
        if (reg) {
                if (rc == ZOK) {
                        if (streq_ptr(reg->znode, op->path))
                                (void) set_string(&reg->written, op->data);
                        backoff_reset(&reg->backoff);
                        reg_set_error(reg, NULL);
                } else if (rc == ZNONODE) {
                        /* Someone deleted our member: create it again. */
                        if (streq_ptr(reg->znode, op->path)) {
                                reg->znode = mfree(reg->znode);
                                reg->written = mfree(reg->written);
                        }
                        reg_set_error(reg, "our member was deleted by someone else: registering again");
                } else if (!is_connection_error(rc))
                        reg_backoff(reg, "update", rc);
        }
        op_free(op);
        if (reg)
                reg_after_op(reg);
}

/* Verify after an uncertain create: read every member under the path, adopt the one our
 * session owns with our endpoint, delete any extra such member. */
static void verify_finished(struct registration *reg) {
        if (reg->verify_failed) {
                /* Could not read everything: look again (on reconnect, or after a backoff). */
                if (zk_session_state(reg->registry->session) == ZK_SESSION_CONNECTED)
                        reg_backoff(reg, "checking for our member", ZOPERATIONTIMEOUT);
                return;
        }
        reg->uncertain = false;
        reg->uncertain_data = mfree(reg->uncertain_data);
        reg->uncertain_parent = mfree(reg->uncertain_parent);
}

static bool same_endpoint(const char *a, size_t na, const char *b) {
        struct serverset_member ma, mb;
        if (!b || serverset_parse(a, na, &ma) < 0 || serverset_parse(b, strlen(b), &mb) < 0)
                return false;
        return streq(ma.host, mb.host) && ma.port == mb.port;
}

/* Another registration's member (two pods may share an endpoint, e.g. host network): never
 * adopted nor deleted as "a second member of ours". */
static bool znode_claimed_by_other(const struct registry *r, const struct registration *reg, const char *path) {
        for (const struct registration *o = r->regs; o; o = o->next)
                if (o != reg && streq_ptr(o->znode, path))
                        return true;
        return false;
}

static void get_done(int rc, const char *value, int value_len, const struct Stat *stat, const void *data) {
        struct zk_op *op = (struct zk_op *) data;
        struct registration *reg = op_finish(op, rc);
        struct registry *r = op->registry;

        if (reg && rc == ZOK && znode_claimed_by_other(r, reg, op->path))
                (void) reg_log(reg, LOG_DEBUG, 0, "%s is another registration's member: not ours to adopt", op->path);
        else if (reg && rc == ZOK && stat && value && value_len > 0 && stat->ephemeralOwner == zk_session_id(r->session) &&
            same_endpoint(value, (size_t) value_len, reg->uncertain_data)) {
                if (!reg->verify_adopted) {
                        reg->verify_adopted = true;
                        (void) set_string(&reg->znode, op->path);
                        free(reg->written);
                        reg->written = strndup(value, (size_t) value_len);
                        reg->znode_session = stat->ephemeralOwner;
                        (void) reg_log(reg, LOG_INFO, 0, "The create before the connection loss happened: adopting %s", op->path);
                        member_watch(r, op->path);
                } else {
                        (void) reg_log(reg, LOG_WARNING, 0, "Deleting a second member of ours, %s", op->path);
                        delete_orphan(r, op->path);
                }
        } else if (reg && rc != ZOK && rc != ZNONODE)
                reg->verify_failed = true;
        if (reg && reg->busy == 0)
                verify_finished(reg);
        op_free(op);
        if (reg)
                reg_after_op(reg);
}

static void list_done(int rc, const struct String_vector *strings, const void *data) {
        struct zk_op *op = (struct zk_op *) data;
        struct registration *reg = op_finish(op, rc);
        struct registry *r = op->registry;

        if (reg && rc == ZNONODE) {
                reg->uncertain = false; /* no path, no member */
                reg->uncertain_data = mfree(reg->uncertain_data);
                reg->uncertain_parent = mfree(reg->uncertain_parent);
        } else if (reg && rc == ZOK && strings) {
                zhandle_t *zh = registry_handle(r);
                unsigned issued = 0;
                reg->verify_adopted = false;
                reg->verify_failed = !zh; /* every member unread is a failed check: look again */
                for (int32_t i = 0; zh && i < strings->count; i++) {
                        _cleanup_free_ char *path = NULL;
                        if (strncmp(strings->data[i], "member_", 7) != 0)
                                continue;
                        if (asprintf(&path, "%s/%s", op->path, strings->data[i]) < 0) {
                                path = NULL;
                                reg->verify_failed = true;
                                continue;
                        }
                        struct zk_op *g = op_new(r, reg, OP_GET, path, NULL);
                        if (!g) {
                                reg->verify_failed = true;
                                continue;
                        }
                        if (zoo_aget(zh, path, 0, get_done, g) != ZOK) {
                                op_finish(g, ZINVALIDSTATE);
                                op_free(g);
                                reg->verify_failed = true;
                                continue;
                        }
                        issued++;
                }
                if (issued == 0)
                        verify_finished(reg);
                zk_session_kick(r->session);
        } else if (reg && !is_connection_error(rc))
                reg_backoff(reg, "listing the path", rc);
        op_free(op);
        if (reg)
                reg_after_op(reg);
}

/* ---- the step: compare wanted and known, issue at most one operation ---- */

static int on_reg_timer(sd_event_source *src, uint64_t usec, void *userdata) {
        struct registration *reg = userdata;
        (void) src;
        (void) usec;
        reg_kick(reg);
        return 0;
}

static void reg_arm_timer(struct registration *reg, usec_t when) {
        struct registry *r = reg->registry;
        if (!reg->timer) {
                if (sd_event_add_time(r->event, &reg->timer, CLOCK_MONOTONIC, when, 10 * USEC_PER_MSEC, on_reg_timer, reg) < 0)
                        return;
        } else {
                (void) sd_event_source_set_time(reg->timer, when);
        }
        (void) sd_event_source_set_enabled(reg->timer, SD_EVENT_ONESHOT);
}

static void registry_free_reg(struct registration *reg);

/* Returns false if the step needs a write token and none is available (the caller requeues). */
static bool reg_do_step(struct registration *reg, bool *ret_need_token) {
        struct registry *r = reg->registry;
        zhandle_t *zh;
        usec_t now = now_usec(CLOCK_MONOTONIC);
        const char *desired;
        struct zk_op *op = NULL;
        int rc = ZOK;
        enum op_kind kind;

        *ret_need_token = false;
        if (reg->busy > 0)
                return true;
        if (reg->removed && !reg->znode && !reg->uncertain) {
                registry_free_reg(reg);
                return true;
        }
        if (reg->draining && reg->want && now >= reg->drain_until && reg->znode &&
            streq_ptr(reg->written, reg->stopping_data)) {
                reg->want = false;
                (void) set_string(&reg->why_not, "drained");
        }
        if (reg->draining && reg->want && !reg->znode && !reg->uncertain) {
                /* Draining and its member is gone (lost with an expired session): not made again. */
                reg->want = false;
                (void) set_string(&reg->why_not, "drained");
                reg_set_error(reg, "drained");
        }
        desired = reg_desired_data(reg);
        zh = registry_handle(r);
        if (!zh) {
                if (reg->want || reg->znode || reg->uncertain) {
                        char buf[128];
                        snprintf(buf, sizeof(buf), "waiting for the ZooKeeper session (%s)",
                                 zk_session_state_to_string(zk_session_state(r->session)));
                        if (!(reg->znode && reg->want && streq_ptr(reg->written, desired)) && !reg->uncertain) {
                                reg_set_error(reg, buf);
                                reg->error_is_wait = true;
                        }
                }
                reg_update_state(reg, _OP_KIND_MAX);
                return true;
        }
        /* Shutting down skips damping and drain delay, but a failed delete still backs off. */
        usec_t wait_until = r->shutting_down ? reg->error_until : reg->not_before;
        if (now < wait_until) {
                reg_update_state(reg, _OP_KIND_MAX);
                reg_arm_timer(reg, wait_until);
                return true;
        }

        if (reg->uncertain) {
                kind = OP_LIST;
        } else if (reg->znode && (!desired || !znode_under(reg->znode, reg->parent))) {
                kind = OP_DELETE;
        } else if (desired && !reg->znode) {
                kind = OP_CREATE;
        } else if (desired && !streq_ptr(reg->written, desired)) {
                kind = OP_SET;
        } else {
                reg_update_state(reg, _OP_KIND_MAX);
                if (reg->draining && reg->want && reg->znode)
                        reg_arm_timer(reg, reg->drain_until);
                return true;
        }

        if (kind != OP_LIST && !r->shutting_down) {
                usec_t wait = 0;
                if (!token_bucket_try_take(&r->tb, now, &wait)) {
                        *ret_need_token = true;
                        if (r->dispatch_timer) {
                                (void) sd_event_source_set_time(r->dispatch_timer, now + wait);
                                (void) sd_event_source_set_enabled(r->dispatch_timer, SD_EVENT_ONESHOT);
                        }
                        return false;
                }
        }

        switch (kind) {
        case OP_LIST: {
                const char *where = reg->uncertain_parent ? reg->uncertain_parent : reg->parent;
                op = op_new(r, reg, kind, where, NULL);
                if (op)
                        rc = zoo_aget_children(zh, where, 0, list_done, op);
                break;
        }
        case OP_DELETE:
                op = op_new(r, reg, kind, reg->znode, NULL);
                if (op)
                        rc = zoo_adelete(zh, reg->znode, -1, delete_done, op);
                break;
        case OP_CREATE: {
                _cleanup_free_ char *path = NULL;
                if (asprintf(&path, "%s/member_", reg->parent) < 0)
                        break;
                op = op_new(r, reg, kind, path, desired);
                if (op)
                        rc = zoo_acreate(zh, path, desired, (int) strlen(desired), &ZOO_OPEN_ACL_UNSAFE,
                                         ZOO_EPHEMERAL_SEQUENTIAL, create_done, op);
                break;
        }
        case OP_SET:
                op = op_new(r, reg, kind, reg->znode, desired);
                if (op)
                        rc = zoo_aset(zh, reg->znode, desired, (int) strlen(desired), -1, set_done, op);
                break;
        case OP_CREATE_PARENT:
        case OP_GET:
        case OP_EXISTS:
        case _OP_KIND_MAX:
                break;
        }
        if (!op) {
                reg_backoff(reg, "queueing an operation", ZSYSTEMERROR);
                reg_arm_timer(reg, reg->not_before);
                return true;
        }
        if (rc != ZOK) {
                op_finish(op, rc);
                op_free(op);
                if (is_connection_error(rc))
                        reg_set_error(reg, "ZooKeeper session not usable right now");
                else
                        reg_backoff(reg, op_kind_table[kind], rc);
                reg_update_state(reg, _OP_KIND_MAX);
                if (!is_connection_error(rc))
                        reg_arm_timer(reg, reg->not_before);
                return true;
        }
        zk_session_kick(r->session);
        if (reg->error_is_wait)
                reg_set_error(reg, NULL);
        reg_update_state(reg, kind);
        return true;
}

static int on_dispatch(sd_event_source *src, void *userdata) {
        struct registry *r = userdata;

        (void) src;
        for (;;) {
                struct reg_queue *q = r->q[1].head ? &r->q[1] : &r->q[0];
                struct registration *reg = q->head;
                bool need_token = false, urgent;

                if (!reg)
                        break;
                urgent = reg->q_urgent;
                q->head = reg->q_next;
                if (!q->head)
                        q->tail = NULL;
                reg->q_next = NULL;
                reg->queued = false;
                reg->q_urgent = false;
                if (!reg_do_step(reg, &need_token) && need_token) {
                        /* No token: back to the head of its queue; the timer resumes. */
                        reg->queued = true;
                        reg->q_urgent = urgent;
                        reg->q_next = q->head;
                        q->head = reg;
                        if (!q->tail)
                                q->tail = reg;
                        reg_update_state(reg, _OP_KIND_MAX);
                        return 0;
                }
        }
        return 0;
}

static int on_dispatch_timer(sd_event_source *src, uint64_t usec, void *userdata) {
        (void) usec;
        return on_dispatch(src, userdata);
}

/* The next step takes a member away (a delete, or the STOPPING update of a drain). */
static bool reg_is_urgent(const struct registration *reg) {
        if (!reg->znode)
                return false;
        return !reg_desired_data(reg) || !znode_under(reg->znode, reg->parent) || reg->draining;
}

static void reg_unqueue(struct registration *reg) {
        struct reg_queue *q = &reg->registry->q[reg->q_urgent];
        struct registration **pp = &q->head, *prev = NULL;

        if (!reg->queued)
                return;
        while (*pp && *pp != reg) {
                prev = *pp;
                pp = &(*pp)->q_next;
        }
        if (*pp)
                *pp = reg->q_next;
        if (q->tail == reg)
                q->tail = prev;
        reg->q_next = NULL;
        reg->queued = false;
        reg->q_urgent = false;
}

static void reg_kick(struct registration *reg) {
        struct registry *r = reg->registry;

        bool urgent = reg_is_urgent(reg);

        if (reg->queued && urgent && !reg->q_urgent)
                reg_unqueue(reg); /* moves to the urgent queue below */
        if (!reg->queued) {
                struct reg_queue *q = &r->q[urgent];
                reg->queued = true;
                reg->q_urgent = urgent;
                reg->q_next = NULL;
                if (q->tail)
                        q->tail->q_next = reg;
                else
                        q->head = reg;
                q->tail = reg;
        }
        if (r->dispatch && !(r->dispatch_timer && sd_event_source_get_enabled(r->dispatch_timer, NULL) > 0))
                (void) sd_event_source_set_enabled(r->dispatch, SD_EVENT_ONESHOT);
}

/* ---- wanted side: from the pod, its gates and its health ---- */

static void reg_evaluate(struct registration *reg);

static void on_health(struct health *h, bool ok, const char *error, bool changed, void *userdata) {
        struct registration *reg = userdata;
        struct registry *r = reg->registry;

        (void) error;
        (void) metric_inc(r->m_health, health_kind_to_string(health_get_spec(h)->kind), ok ? "ok" : "fail");
        if (changed)
                (void) reg_log(reg, LOG_INFO, 0, "Health check of %s: %s%s%s", health_target(h),
                               health_is_healthy(h) ? "healthy" : "unhealthy", health_is_healthy(h) ? "" : ": ",
                               health_is_healthy(h) ? "" : strempty(health_reason(h)));
        /* A verdict change moves the registration; a failure while unhealthy refreshes its reason. */
        if (changed || !health_is_healthy(h))
                reg_evaluate(reg);
}

/* Sets why_not (NULL if registrable) and the wanted data. */
static void reg_compute(struct registration *reg, char **ret_why) {
        struct registry *r = reg->registry;
        const struct pod *p = reg->pod;
        _cleanup_free_ char *error = NULL, *json = NULL, *stopping = NULL, *endpoint = NULL;
        struct health_spec spec;
        int k;

        *ret_why = NULL;
        if (reg->removed || !p) {
                *ret_why = strdup("the pod is gone");
                return;
        }
        if (r->shutting_down) {
                *ret_why = strdup("the agent is stopping");
                return;
        }
        if (!serverset_path_valid(reg->parent)) {
                if (asprintf(ret_why, ANNOTATION_SERVERSET "=%s is not a valid ZooKeeper path", strempty(reg->parent)) < 0)
                        *ret_why = NULL;
                return;
        }
        {
                _cleanup_free_ char *floor = NULL;
                k = serverset_path_allowed(reg->parent, r->allowed_prefixes, p->namespace, &floor, &error);
                if (k < 0) {
                        *ret_why = error ? TAKE_PTR(error) : strdup(strerror(-k));
                        return;
                }
                free(reg->parent_floor);
                reg->parent_floor = TAKE_PTR(floor);
        }
        k = serverset_build(p, "ALIVE", &json, &endpoint, &error);
        if (k < 0) {
                *ret_why = error ? TAKE_PTR(error) : strdup(strerror(-k));
                return;
        }
        (void) set_string(&reg->endpoint, endpoint);
        free(error);
        error = NULL;
        _cleanup_free_ char *endpoint2 = NULL;
        if (serverset_build(p, "STOPPING", &stopping, &endpoint2, NULL) < 0) {
                *ret_why = strdup("out of memory");
                return;
        }
        (void) set_string(&reg->data, json);
        (void) set_string(&reg->stopping_data, stopping);

        /* Health: (re)create the checker when its target or spec changes. */
        if (health_spec_from_pod(p, &spec, &error) < 0) {
                *ret_why = TAKE_PTR(error);
                reg->health = health_free(reg->health);
                return;
        }
        const char *ip = pod_primary_ip(p);
        struct serverset_member m;
        unsigned port = serverset_parse(json, strlen(json), &m) >= 0 ? m.port : 0;
        if (spec.kind == HEALTH_NONE)
                reg->health = health_free(reg->health);
        else if (reg->health && !health_spec_equal(health_get_spec(reg->health), &spec) &&
                 streq_ptr(reg->health_ip, ip) && reg->health_port == port &&
                 health_update_timing(reg->health, &spec))
                ; /* only the timing changed: the same check goes on, healthy stays healthy */
        else if (!reg->health || !health_spec_equal(health_get_spec(reg->health), &spec) ||
                 !streq_ptr(reg->health_ip, ip) || reg->health_port != port) {
                struct http_client *http = NULL;
                reg->health = health_free(reg->health);
                if (manager_http(r->manager, &http) < 0 ||
                    health_new(r->event, http, &spec, ip, port, on_health, reg, &reg->health) < 0) {
                        *ret_why = strdup("cannot start the health check");
                        return;
                }
                (void) set_string(&reg->health_ip, ip);
                reg->health_port = port;
        }

        if (r->drained) {
                *ret_why = strdup("drained");
                return;
        }
        if (!pod_is_ready(p)) {
                *ret_why = strdup("the pod is not Ready");
                return;
        }
        k = pod_gates_check(r->manager->pod_gates, p, &error);
        if (k <= 0) {
                if (!error && asprintf(&error, "a readiness gate is closed (%s)", k < 0 ? strerror(-k) : "no reason given") < 0)
                        error = NULL;
                *ret_why = TAKE_PTR(error);
                return;
        }
        if (reg->health && !health_is_healthy(reg->health)) {
                *ret_why = strdup(strempty(health_reason(reg->health)));
                return;
        }
}

static void reg_evaluate(struct registration *reg) {
        usec_t now = now_usec(CLOCK_MONOTONIC);
        char *why = NULL;
        bool was = reg->want;

        reg_compute(reg, &why);
        /* draining keeps its want until the drain delay has passed (then reg_do_step drops it) */
        if (reg->draining && reg->want && why && streq(why, "drained") && !reg->removed) {
                free(why);
                reg_kick(reg);
                return;
        }
        reg->want = !why;
        free(reg->why_not);
        reg->why_not = why;
        if (why)
                reg_set_error(reg, why);
        else if (!was)
                reg_set_error(reg, NULL);

        if (was && !reg->want) {
                if (now - reg->last_down > FLAP_WINDOW)
                        reg->flaps = 0;
                reg->flaps++;
                reg->last_down = now;
        } else if (!was && reg->want && reg->flaps > 0 && reg->registry->config.flap_damping > 0 &&
                   now - reg->last_down <= FLAP_WINDOW) {
                /* A pod that flaps comes back later each time: damping × 2^(flaps-1), at most 1m. */
                unsigned shift = reg->flaps - 1 > 6 ? 6 : reg->flaps - 1;
                usec_t penalty = reg->registry->config.flap_damping << shift;
                if (penalty > FLAP_PENALTY_MAX)
                        penalty = FLAP_PENALTY_MAX;
                if (reg->last_down + penalty > reg->not_before) {
                        reg->not_before = reg->last_down + penalty;
                        char buf[128];
                        snprintf(buf, sizeof(buf), "flap damping: registering again in %llums",
                                 (unsigned long long) ((reg->not_before - now) / USEC_PER_MSEC));
                        reg_set_error(reg, buf);
                        (void) reg_log(reg, LOG_INFO, 0, "Pod flapping (%u times in a minute): %s", reg->flaps, buf);
                }
        }
        reg_update_state(reg, _OP_KIND_MAX);
        reg_kick(reg);
}

/* ---- the set of registrations ---- */

static struct registration *registry_find(struct registry *r, const char *uid) {
        for (struct registration *reg = r->regs; reg; reg = reg->next)
                if (streq(reg->uid, uid))
                        return reg;
        return NULL;
}

static void registry_free_reg(struct registration *reg) {
        struct registry *r = reg->registry;

        reg_unqueue(reg);
        for (struct zk_op *op = r->ops; op; op = op->next)
                if (op->reg == reg)
                        op->reg = NULL;
        if (reg->prev)
                reg->prev->next = reg->next;
        else
                r->regs = reg->next;
        if (reg->next)
                reg->next->prev = reg->prev;
        r->n_regs--;
        health_free(reg->health);
        sd_event_source_disable_unref(reg->timer);
        pod_unref(reg->pod);
        free(reg->uid);
        free(reg->name);
        free(reg->parent);
        free(reg->parent_floor);
        free(reg->data);
        free(reg->stopping_data);
        free(reg->endpoint);
        free(reg->why_not);
        free(reg->health_ip);
        free(reg->znode);
        free(reg->written);
        free(reg->uncertain_data);
        free(reg->uncertain_parent);
        free(reg->last_error);
        free(reg);
}

static struct registration *registry_add(struct registry *r, const struct pod *p) {
        struct registration *reg = calloc(1, sizeof(*reg));
        if (!reg)
                return NULL;
        reg->registry = r;
        reg->uid = strdup(p->uid);
        if (!reg->uid || asprintf(&reg->name, "%s/%s", p->namespace, p->name) < 0) {
                free(reg->uid);
                free(reg);
                return NULL;
        }
        reg->state = REG_UNREADY;
        reg->last_change = now_usec(CLOCK_REALTIME);
        backoff_init(&reg->backoff,
                     &(struct backoff_config) {
                             .initial = 500 * USEC_PER_MSEC,
                             .max = 30 * USEC_PER_SEC,
                             .factor = 2.0,
                             .jitter = 0.5,
                             .reset_after = 2 * USEC_PER_MINUTE,
                     },
                     0);
        reg->next = r->regs;
        if (r->regs)
                r->regs->prev = reg;
        r->regs = reg;
        r->n_regs++;
        return reg;
}

static void on_pod(struct pod_store *s, const struct pod *old, const struct pod *new, void *userdata) {
        struct registry *r = userdata;
        const struct pod *p = new ? new : old;
        struct registration *reg = registry_find(r, p->uid);
        const char *path = new ? pod_annotation(new, ANNOTATION_SERVERSET) : NULL;

        (void) s;
        if (isempty(path)) {
                if (reg && !reg->removed) {
                        reg->removed = true;
                        reg->pod = pod_unref(reg->pod);
                        reg->health = health_free(reg->health);
                        reg_evaluate(reg);
                }
                return;
        }
        if (!reg) {
                reg = registry_add(r, new);
                if (!reg) {
                        log_module_error(MODULE, "Out of memory: cannot track pod %s/%s", new->namespace, new->name);
                        return;
                }
        }
        reg->removed = false;
        pod_unref(reg->pod);
        reg->pod = pod_ref((struct pod *) new);
        (void) set_string(&reg->parent, path);
        reg_evaluate(reg);
}

static void on_gates(struct pod_gates *g, const char *uid, void *userdata) {
        struct registry *r = userdata;

        (void) g;
        if (uid) {
                struct registration *reg = registry_find(r, uid);
                if (reg && !reg->removed)
                        reg_evaluate(reg);
                return;
        }
        for (struct registration *reg = r->regs; reg; reg = reg->next)
                if (!reg->removed)
                        reg_evaluate(reg);
}

static int registry_register_metrics(struct registry *r) {
        static const char *const op_result[] = { "op", "result", NULL };
        static const char *const op[] = { "op", NULL };
        static const char *const state[] = { "state", NULL };
        static const char *const check_result[] = { "check", "result", NULL };
        static const double buckets[] = { 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10 };
        struct metrics *m = r->manager->metrics;
        int k;

        k = metrics_family(m, METRIC_COUNTER, "pinion_zookeeper_operations_total",
                           "ZooKeeper operations by op (create, create_parent, set, delete, get_children, get) and result (ok, no_node, node_exists, connection_loss, session_expired, not_connected, ...).",
                           op_result, NULL, 0, &r->m_ops);
        if (k >= 0)
                k = metrics_family(m, METRIC_HISTOGRAM, "pinion_zookeeper_operation_duration_seconds",
                                   "Time from submitting a ZooKeeper operation to its completion, by op.", op, buckets,
                                   ELEMENTSOF(buckets), &r->m_op_seconds);
        if (k >= 0)
                k = metrics_family(m, METRIC_GAUGE, "pinion_zookeeper_registrations",
                                   "Registrations by state (unready, pending, registering, registered, stopping, deregistering).",
                                   state, NULL, 0, &r->m_regs);
        if (k >= 0)
                k = metrics_family(m, METRIC_COUNTER, "pinion_zookeeper_registrations_created_total",
                                   "Member znodes created.", NULL, NULL, 0, &r->m_registered_total);
        if (k >= 0)
                k = metrics_family(m, METRIC_COUNTER, "pinion_zookeeper_health_checks_total",
                                   "Health checks run by check (tcp, http) and result (ok, fail).", check_result, NULL, 0,
                                   &r->m_health);
        return k < 0 ? k : 0;
}

int registry_new(struct manager *m, struct zk_session *session, const struct registry_config *config,
                 struct registry **ret) {
        _cleanup_(registry_freep) struct registry *r = NULL;
        int k;

        r = calloc(1, sizeof(*r));
        if (!r)
                return -ENOMEM;
        r->manager = m;
        r->event = sd_event_ref(m->event);
        r->session = session;
        r->config = *config;
        k = strv_copy(config->allowed_prefixes, &r->allowed_prefixes);
        if (k < 0)
                return k;
        r->config.allowed_prefixes = r->allowed_prefixes;
        token_bucket_init(&r->tb, config->write_qps, config->write_qps < 10 ? 10 : config->write_qps,
                          now_usec(CLOCK_MONOTONIC));
        k = registry_register_metrics(r);
        if (k < 0)
                return k;
        k = sd_event_add_defer(r->event, &r->dispatch, on_dispatch, r);
        if (k < 0)
                return k;
        (void) sd_event_source_set_enabled(r->dispatch, SD_EVENT_OFF);
        k = sd_event_add_time(r->event, &r->dispatch_timer, CLOCK_MONOTONIC, 0, 0, on_dispatch_timer, r);
        if (k < 0)
                return k;
        (void) sd_event_source_set_enabled(r->dispatch_timer, SD_EVENT_OFF);
        k = pod_store_add_observer(m->pods, on_pod, r);
        if (k < 0)
                return k;
        r->observing = true;
        k = pod_gates_add_listener(m->pod_gates, on_gates, r);
        if (k < 0)
                return k;
        r->listening = true;
        zk_session_set_node_event(session, on_node_event, r);

        /* The pods already in the store. */
        struct pod **pods = NULL;
        size_t n = 0;
        k = pod_store_list(m->pods, &pods, &n);
        if (k < 0)
                return k;
        for (size_t i = 0; i < n; i++)
                on_pod(m->pods, NULL, pods[i], r);
        free(pods);
        *ret = TAKE_PTR(r);
        return 0;
}

struct registry *registry_free(struct registry *r) {
        if (!r)
                return NULL;
        if (r->observing)
                pod_store_remove_observer(r->manager->pods, on_pod, r);
        if (r->listening)
                pod_gates_remove_listener(r->manager->pod_gates, on_gates, r);
        zk_session_set_node_event(r->session, NULL, NULL);
        /* Operations still in flight complete when the session's handle closes: detach them. */
        for (struct zk_op *op = r->ops; op; op = op->next) {
                op->registry = NULL;
                op->reg = NULL;
        }
        r->ops = NULL;
        while (r->regs) {
                r->regs->busy = 0;
                registry_free_reg(r->regs);
        }
        sd_event_source_disable_unref(r->dispatch);
        sd_event_source_disable_unref(r->dispatch_timer);
        sd_event_unref(r->event);
        strv_free(r->allowed_prefixes);
        free(r);
        return NULL;
}

int registry_set_config(struct registry *r, const struct registry_config *config) {
        char **prefixes = NULL;
        int k = strv_copy(config->allowed_prefixes, &prefixes);
        if (k < 0)
                return k;
        strv_free(r->allowed_prefixes);
        r->allowed_prefixes = prefixes;
        r->config = *config;
        r->config.allowed_prefixes = r->allowed_prefixes;
        token_bucket_set_rate(&r->tb, config->write_qps, config->write_qps < 10 ? 10 : config->write_qps,
                              now_usec(CLOCK_MONOTONIC));
        /* allowed-prefixes may have changed: check every path again. */
        for (struct registration *reg = r->regs, *next; reg; reg = next) {
                next = reg->next;
                if (!reg->removed)
                        reg_evaluate(reg);
        }
        return 0;
}

void registry_session_changed(struct registry *r, enum zk_session_state old, enum zk_session_state new) {
        (void) old;
        if (!r)
                return;
        if (new == ZK_SESSION_EXPIRED || new == ZK_SESSION_CLOSED || new == ZK_SESSION_CONNECTED) {
                int64_t sid = zk_session_id(r->session);
                for (struct registration *reg = r->regs; reg; reg = reg->next) {
                        /* Members of an ended session are gone with it (the server deleted them when
                         * it expired the session), and so is the question whether a create of it
                         * happened. */
                        if (reg->znode && (new != ZK_SESSION_CONNECTED || reg->znode_session != sid)) {
                                reg->znode = mfree(reg->znode);
                                reg->written = mfree(reg->written);
                        }
                        if (new != ZK_SESSION_CONNECTED) {
                                reg->uncertain = false;
                                reg->uncertain_data = mfree(reg->uncertain_data);
                                reg->uncertain_parent = mfree(reg->uncertain_parent);
                        }
                }
        }
        for (struct registration *reg = r->regs, *next; reg; reg = next) {
                next = reg->next;
                reg_update_state(reg, _OP_KIND_MAX);
                reg_kick(reg);
        }
        if (r->shutting_down && new != ZK_SESSION_CONNECTED)
                registry_check_done(r);
}

static bool registry_has_nodes(const struct registry *r) {
        for (const struct registration *reg = r->regs; reg; reg = reg->next)
                if (reg->znode || reg->busy > 0 || reg->uncertain)
                        return true;
        for (const struct zk_op *op = r->ops; op; op = op->next)
                if (op->kind == OP_DELETE)
                        return true;
        return false;
}

static void registry_check_done(struct registry *r) {
        registry_done_fn done = r->done;

        if (!done)
                return;
        if (registry_has_nodes(r) && zk_session_state(r->session) == ZK_SESSION_CONNECTED)
                return;
        r->done = NULL;
        done(r, r->done_userdata);
}

int registry_shutdown(struct registry *r, registry_done_fn done, void *userdata) {
        r->shutting_down = true;
        for (struct registration *reg = r->regs; reg; reg = reg->next) {
                reg->draining = false;
                reg->not_before = 0;
                reg_evaluate(reg);
        }
        if (!registry_has_nodes(r))
                return 0;
        (void) log_module_info(MODULE, "Deregistering %zu registrations before closing the session", r->n_regs);
        r->done = done;
        r->done_userdata = userdata;
        return 1;
}

void registry_abandon(struct registry *r) {
        r->shutting_down = true;
        r->done = NULL;
}

size_t registry_drain(struct registry *r) {
        usec_t now = now_usec(CLOCK_MONOTONIC);
        size_t n = 0;

        r->drained = true;
        for (struct registration *reg = r->regs; reg; reg = reg->next) {
                if (reg->want && reg->znode && !reg->draining) {
                        reg->draining = true;
                        reg->drain_until = now + r->config.drain_delay;
                        n++;
                        reg_set_error(reg, "drained: marked STOPPING, removed after drain-delay");
                }
                reg_evaluate(reg);
        }
        log_module_info(MODULE, "Drain: %zu registrations marked STOPPING, removed in %llums; no new registrations", n,
                        (unsigned long long) (r->config.drain_delay / USEC_PER_MSEC));
        return n;
}

void registry_undrain(struct registry *r) {
        r->drained = false;
        for (struct registration *reg = r->regs; reg; reg = reg->next) {
                reg->draining = false;
                reg_evaluate(reg);
        }
        log_module_info(MODULE, "Undrained: registering ready pods again");
}

bool registry_drained(const struct registry *r) {
        return r && r->drained;
}

static int reg_cmp(const void *a, const void *b) {
        const struct registration *x = *(const struct registration *const *) a, *y = *(const struct registration *const *) b;
        return strcmp(x->name, y->name);
}

int registry_list_json(struct registry *r, cJSON **ret) {
        _cleanup_free_ struct registration **v = NULL;
        cJSON *arr = cJSON_CreateArray();
        size_t n = 0;

        if (!arr)
                return -ENOMEM;
        v = calloc(r->n_regs + 1, sizeof(*v));
        if (!v) {
                cJSON_Delete(arr);
                return -ENOMEM;
        }
        for (struct registration *reg = r->regs; reg; reg = reg->next)
                v[n++] = reg;
        qsort(v, n, sizeof(*v), reg_cmp);
        for (size_t i = 0; i < n; i++) {
                struct registration *reg = v[i];
                cJSON *o = cJSON_CreateObject();
                if (!o || !cJSON_AddItemToArray(arr, o) || !cJSON_AddStringToObject(o, "pod", reg->name) ||
                    !cJSON_AddStringToObject(o, "uid", reg->uid) || !json_add_string_or_null(o, "path", reg->parent) ||
                    !json_add_string_or_null(o, "znode", reg->znode) ||
                    !cJSON_AddStringToObject(o, "state", reg_state_to_string(reg->state)) ||
                    !json_add_time(o, "last_change", reg->last_change) ||
                    !json_add_string_or_null(o, "last_error", reg->last_error) ||
                    !json_add_string_or_null(o, "endpoint", reg->endpoint)) {
                        cJSON_Delete(arr);
                        return -ENOMEM;
                }
                if (reg->health) {
                        cJSON *h = cJSON_AddObjectToObject(o, "health");
                        if (!h || !cJSON_AddStringToObject(h, "check", health_kind_to_string(health_get_spec(reg->health)->kind)) ||
                            !cJSON_AddBoolToObject(h, "healthy", health_is_healthy(reg->health)) ||
                            !json_add_string_or_null(h, "target", health_target(reg->health))) {
                                cJSON_Delete(arr);
                                return -ENOMEM;
                        }
                }
        }
        *ret = arr;
        return 0;
}

int registry_status(struct registry *r, cJSON *obj) {
        unsigned counts[_REG_STATE_MAX] = {};
        cJSON *o;

        if (!r)
                return 0;
        for (struct registration *reg = r->regs; reg; reg = reg->next)
                counts[reg->state]++;
        o = cJSON_AddObjectToObject(obj, "registrations");
        if (!o)
                return -ENOMEM;
        for (enum reg_state s = 0; s < _REG_STATE_MAX; s++)
                if (!cJSON_AddNumberToObject(o, reg_state_to_string(s), counts[s]))
                        return -ENOMEM;
        if (!cJSON_AddBoolToObject(obj, "drained", r->drained))
                return -ENOMEM;
        return 0;
}

void registry_collect_metrics(struct registry *r) {
        unsigned counts[_REG_STATE_MAX] = {};

        for (struct registration *reg = r->regs; reg; reg = reg->next)
                counts[reg->state]++;
        for (enum reg_state s = 0; s < _REG_STATE_MAX; s++)
                (void) metric_set(r->m_regs, counts[s], reg_state_to_string(s));
}
