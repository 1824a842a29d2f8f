/* SPDX-License-Identifier: MIT */
/* Each registration's state machine (see registration.h and reg-plan.h): reg_step()
 * asks the plan for the next operation and runs it through zk-ops; each completion takes in
 * what ZooKeeper answered, shows the state the plan gives, and queues the next step. */

#include <errno.h>
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "manager.h"
#include "pod-events.h"
#include "registration.h"
#include "strv.h"

int reg_set_string(char **p, const char *v) {
        if (streq_ptr(*p, v))
                return 0;
        char *c = NULL;
        if (v && !(c = strdup(v)))
                return -ENOMEM;
        free(*p);
        *p = c;
        return 1;
}

static struct reg_create *reg_create_free(struct reg_create *c) {
        if (c) {
                free(c->parent);
                free(c->host);
                free(c);
        }
        return NULL;
}
DEFINE_TRIVIAL_CLEANUP_FUNC(struct reg_create *, reg_create_free);

static struct reg_create *reg_create_new(const char *parent, const char *host, unsigned port) {
        struct reg_create *c = calloc(1, sizeof(*c));
        if (!c)
                return NULL;
        c->parent = strdup(parent);
        c->host = strdup(host);
        c->port = port;
        if (!c->parent || !c->host)
                return reg_create_free(c);
        return c;
}

/* ---- the indexes ---- */

static int reg_uid_cmp(const void *a, const void *b) {
        return strcmp(((const struct registration *) a)->uid, ((const struct registration *) b)->uid);
}

static int reg_znode_cmp(const void *a, const void *b) {
        return strcmp(((const struct registration *) a)->znode, ((const struct registration *) b)->znode);
}

struct registration *reg_by_uid(struct registry *r, const char *uid) {
        struct registration key = { .uid = (char *) uid };
        void *node = tfind(&key, &r->by_uid, reg_uid_cmp);
        return node ? *(struct registration **) node : NULL;
}

static struct registration *reg_by_znode(struct registry *r, const char *path) {
        struct registration key = { .znode = (char *) path };
        void *node = path ? tfind(&key, &r->by_znode, reg_znode_cmp) : NULL;
        return node ? *(struct registration **) node : NULL;
}

/* Forgets our member (and its data) as known. */
static void reg_forget_member(struct registration *reg) {
        struct registry *r = reg->registry;

        member_watch_remove(reg);
        if (reg->znode && reg_by_znode(r, reg->znode) == reg)
                (void) tdelete(reg, &r->by_znode, reg_znode_cmp);
        reg->znode = mfree(reg->znode);
        reg->written = mfree(reg->written);
}

/* path is our member, with data written. Another registration's member is never ours (the
 * plan adopts nothing claimed), so the index holds each path once. */
static void reg_set_member(struct registration *reg, const char *path, const char *written) {
        struct registry *r = reg->registry;

        if (!streq_ptr(reg->znode, path)) {
                reg_forget_member(reg);
                if (reg_set_string(&reg->znode, path) < 0)
                        return;
                if (!reg_by_znode(r, path) && !tsearch(reg, &r->by_znode, reg_znode_cmp)) {
                        /* Out of memory: a member we cannot find by its path is one we cannot
                         * watch over, so it is not ours as far as we know. */
                        reg->znode = mfree(reg->znode);
                        return;
                }
                member_watch_add(reg);
        }
        (void) reg_set_string(&reg->written, written);
}

/* ---- what it shows ---- */

const char *reg_shown_error(const struct registration *reg) {
        return reg->waiting ? reg->waiting : reg->last_error;
}

void reg_set_error(struct registration *reg, const char *error) {
        (void) reg_set_string(&reg->last_error, error);
        reg->waiting = mfree(reg->waiting);
}

static void reg_set_waiting(struct registration *reg, enum reg_waiting w) {
        struct registry *r = reg->registry;
        char buf[128];

        switch (w) {
        case REG_WAITING_SESSION:
                snprintf(buf, sizeof(buf), "waiting for the ZooKeeper session (%s)",
                         zk_session_state_to_string(zk_session_state(r->session)));
                break;
        case REG_WAITING_SUSPENDED:
                snprintf(buf, sizeof(buf), "session suspended");
                break;
        case REG_WAITING_CLEAR:
                reg->waiting = mfree(reg->waiting);
                return;
        default:
                return;
        }
        /* Over the error, not instead of it: once the wait is over, the reason under it (why the
         * pod is not registrable) shows again. */
        (void) reg_set_string(&reg->waiting, buf);
}

/* A member that goes away says so once at info, in its "Deregistered" line (on_deleted):
 * the transitions on the way there and back to unready are debug. */
static bool reg_transition_is_deregistration(const struct registration *reg, enum reg_state old, enum reg_state state) {
        if (reg->goal != REG_GOAL_NONE)
                return false;
        return (old == REG_REGISTERED && (state == REG_PENDING || state == REG_DEREGISTERING)) ||
               (old == REG_DEREGISTERING && state == REG_UNREADY);
}

/* The one place the state changes: every transition is logged, the notable ones at info. */
static void reg_set_state(struct registration *reg, enum reg_state state) {
        enum reg_state old = reg->state;
        const char *error = reg_shown_error(reg);

        if (old == state)
                return;
        reg->state = state;
        reg->last_change = now_usec(CLOCK_REALTIME);
        if (state == REG_REGISTERED)
                (void) log_reg_full_errno(reg, LOG_INFO, 0, "Registration %s → %s: %s at %s", reg_plan_state_to_string(old),
                               reg_plan_state_to_string(state), strempty(reg->entry.endpoint), strempty(reg->znode));
        else if (reg_transition_is_deregistration(reg, old, state))
                (void) log_reg_full_errno(reg, LOG_DEBUG, 0, "Registration %s → %s%s%s", reg_plan_state_to_string(old),
                               reg_plan_state_to_string(state), error ? ": " : "", strempty(error));
        else if (state == REG_STOPPING || (state == REG_UNREADY && old != REG_PENDING) ||
                 old == REG_REGISTERED || old == REG_STOPPING)
                (void) log_reg_full_errno(reg, LOG_INFO, 0, "Registration %s → %s%s%s", reg_plan_state_to_string(old),
                               reg_plan_state_to_string(state), error ? ": " : "", strempty(error));
        else
                (void) log_reg_full_errno(reg, LOG_DEBUG, 0, "Registration %s → %s%s%s", reg_plan_state_to_string(old),
                               reg_plan_state_to_string(state), error ? ": " : "", strempty(error));
}

static struct reg_facts reg_facts(const struct registration *reg, usec_t now) {
        const struct registry *r = reg->registry;

        return (struct reg_facts) {
                .goal = reg->goal,
                .alive = reg->entry.alive,
                .stopping = reg->entry.stopping,
                .parent = reg->parent,
                .pod_gone = !reg->pod,
                .znode = reg->znode,
                .written = reg->written,
                .lost_create = reg->lost != NULL,
                .inflight = reg->inflight,
                .state = reg->state,
                .connected = zk_session_state(r->session) == ZK_SESSION_CONNECTED &&
                             zk_session_handle(r->session),
                .shutting_down = r->shutting_down,
                .has_error = reg->last_error != NULL,
                .now = now,
                .not_before = reg->not_before,
                .error_until = reg->error_until,
                .drain_until = reg->drain_until,
        };
}

void reg_update(struct registration *reg) {
        struct reg_facts f = reg_facts(reg, now_usec(CLOCK_MONOTONIC));
        enum reg_waiting waiting;
        enum reg_state state;

        reg_plan_state(&f, &state, &waiting);
        reg_set_waiting(reg, waiting);
        reg_set_state(reg, state);
}

bool reg_urgent(const struct registration *reg) {
        struct reg_facts f = reg_facts(reg, 0);
        return reg_plan_urgent(&f);
}

/* ---- timers and errors ---- */

static int on_reg_timer(sd_event_source *src, uint64_t usec, void *userdata) {
        struct registration *reg = userdata;
        (void) src;
        (void) usec;
        registry_kick(reg);
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

/* An error from ZooKeeper (not a connection problem): back off with jitter. */
static void reg_backoff(struct registration *reg, const char *what, int rc) {
        usec_t now = now_usec(CLOCK_MONOTONIC);
        usec_t wait = backoff_next(&reg->backoff, now, 0);
        char buf[512];

        snprintf(buf, sizeof(buf), "%s failed: %s (retrying in %llums)", what, zerror(rc),
                 (unsigned long long) (wait / USEC_PER_MSEC));
        reg_set_error(reg, buf);
        (void) log_reg_full_errno(reg, LOG_WARNING, 0, "%s", buf);
        reg->not_before = now + wait;
        reg->error_until = now + wait;
}

/* An operation completed: show where it stands and queue the next step. */
static void reg_after_op(struct registration *reg) {
        struct registry *r = reg->registry;

        if (reg->inflight != REG_OP_NONE)
                return;
        reg_update(reg);
        registry_kick(reg);
        if (r->shutting_down)
                registry_check_done(r);
}

/* ---- our members deleted by someone else (member-watch.c notices) ---- */

void reg_member_gone(struct registry *r, const char *path) {
        struct registration *reg = reg_by_znode(r, path);

        if (!reg || reg->znode_session != zk_session_id(r->session))
                return;
        if (reg->inflight == REG_OP_DELETE)
                return; /* our own deregistration */
        reg_forget_member(reg);
        reg_set_error(reg, "our member was deleted by someone else: registering again");
        (void) log_reg_full_errno(reg, LOG_WARNING, 0, "Member %s was deleted by someone else: registering again", path);
        pod_event_emit(r->manager->pod_events, reg->uid, POD_EVENT_NORMAL, POD_EVENT_DEREGISTERED, "Deregister",
                       "ZooKeeper member %s of %s was deleted by someone else: registering again", path,
                       strempty(reg->entry.endpoint));
        reg_after_op(reg);
}

/* Operations whose registration is gone, and deletes of members nobody owns. */
void reg_on_orphan(void *userdata, const struct zk_op_result *res) {
        struct registry *r = userdata;

        if (res->kind == ZK_OP_CREATE && res->rc == ZOK && res->created)
                /* Nobody wants this member any more (can only happen while tearing down). */
                (void) zk_ops_delete(r->ops, res->created, reg_on_orphan, r);
        else if (res->kind == ZK_OP_DELETE && r->shutting_down)
                registry_check_done(r);
}

/* ---- completions ---- */

static void on_created(void *userdata, const struct zk_op_result *res) {
        struct registration *reg = userdata;
        struct registry *r = reg->registry;
        _cleanup_(reg_create_freep) struct reg_create *create = TAKE_PTR(reg->creating);
        int rc = res->rc;

        reg->inflight = REG_OP_NONE;
        if (rc == ZOK && res->created) {
                reg_set_member(reg, res->created, res->data);
                reg->znode_session = zk_session_id(r->session);
                reg->lost = reg_create_free(reg->lost);
                reg->parent_attempts = 0;
                backoff_reset(&reg->backoff);
                reg_set_error(reg, NULL);
                (void) metric_inc(r->m_registered_total);
                pod_event_emit(r->manager->pod_events, reg->uid, POD_EVENT_NORMAL, POD_EVENT_REGISTERED, "Register",
                               "Registered %s in ZooKeeper at %s", strempty(reg->entry.endpoint), res->created);
        } else if (rc == ZNONODE) {
                /* The path does not exist: create its parents (persistent, empty), in order, then
                 * the member again (the next step). */
                bool connected = zk_session_state(r->session) == ZK_SESSION_CONNECTED;
                _cleanup_strv_free_ char **parents = NULL;
                if (connected && reg_plan_parents(reg->parent, reg->parent_floor, &parents) >= 0)
                        (void) zk_ops_create_parents(r->ops, parents);
                if (!connected)
                        reg_set_error(reg, "ZooKeeper session lost while creating the path");
                else if (reg_plan_parents_give_up(++reg->parent_attempts) && reg->parent_floor) {
                        char buf[512];
                        snprintf(buf, sizeof(buf), "the allowed prefix %s must exist (zkreg creates only the nodes "
                                 "below it)", reg->parent_floor);
                        reg_backoff(reg, buf, rc);
                } else if (reg_plan_parents_give_up(reg->parent_attempts))
                        /* Created the parents and still no node: something else is wrong. */
                        reg_backoff(reg, "creating the parent path", rc);
                else
                        reg_set_error(reg, "creating the parent path");
        } else if (rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT) {
                /* Did it happen? Find out on reconnect instead of creating again: the check lists
                 * the path this create used, whatever the annotation says by then (a member
                 * adopted outside the current path is deleted next). */
                reg->lost = reg_create_free(reg->lost);
                reg->lost = TAKE_PTR(create);
                reg_set_error(reg, "connection lost during create: checking for our member on reconnect");
        } else if (zk_error_is_connection(rc)) {
                /* Session gone: a member it created went with it. */
                reg_set_error(reg, "ZooKeeper session lost during create");
        } else
                reg_backoff(reg, "create", rc);
        reg_after_op(reg);
}

static void on_deleted(void *userdata, const struct zk_op_result *res) {
        struct registration *reg = userdata;

        reg->inflight = REG_OP_NONE;
        if (res->rc == ZOK || res->rc == ZNONODE) {
                if (streq_ptr(reg->znode, res->path)) {
                        reg_forget_member(reg);
                        (void) log_reg_full_errno(reg, LOG_INFO, 0, "Deregistered %s (%s)%s%s", res->path,
                                                  strempty(reg->entry.endpoint), reg->why_not ? ": " : "",
                                                  strempty(reg->why_not));
                        pod_event_emit(reg->registry->manager->pod_events, reg->uid, POD_EVENT_NORMAL,
                                       POD_EVENT_DEREGISTERED, "Deregister", "Deregistered %s from ZooKeeper (%s)%s%s",
                                       strempty(reg->entry.endpoint), res->path, reg->why_not ? ": " : "",
                                       strempty(reg->why_not));
                }
                backoff_reset(&reg->backoff);
                if (reg->goal == REG_GOAL_NONE && reg->why_not)
                        reg_set_error(reg, reg->why_not);
        } else if (!zk_error_is_connection(res->rc))
                reg_backoff(reg, "delete", res->rc);
        reg_after_op(reg);
}

static void on_set(void *userdata, const struct zk_op_result *res) {
        struct registration *reg = userdata;

        reg->inflight = REG_OP_NONE;
        if (res->rc == ZOK) {
                if (streq_ptr(reg->znode, res->path))
                        (void) reg_set_string(&reg->written, res->data);
                backoff_reset(&reg->backoff);
                reg_set_error(reg, NULL);
        } else if (res->rc == ZNONODE) {
                /* Someone deleted our member: create it again. */
                if (streq_ptr(reg->znode, res->path))
                        reg_forget_member(reg);
                reg_set_error(reg, "our member was deleted by someone else: registering again");
        } else if (!zk_error_is_connection(res->rc))
                reg_backoff(reg, "update", res->rc);
        reg_after_op(reg);
}

/* Another registration's member (two pods may share an endpoint, e.g. host network). */
static bool znode_claimed_by_other(struct registry *r, const struct registration *reg, const char *path) {
        const struct registration *o = reg_by_znode(r, path);
        return o && o != reg;
}

/* The check after a lost create: every member under its path read; the plan says which one is
 * ours (adopted) and which are extra members of ours (deleted). */
static void check_judge(struct registration *reg, const struct zk_op_result *res) {
        struct registry *r = reg->registry;
        _cleanup_free_ struct reg_check_member *members = calloc(res->n_members + 1, sizeof(*members));
        _cleanup_free_ struct serverset_member *parsed = calloc(res->n_members + 1, sizeof(*parsed));
        _cleanup_free_ enum reg_verdict *verdicts = calloc(res->n_members + 1, sizeof(*verdicts));

        if (!members || !parsed || !verdicts) {
                reg_backoff(reg, "checking for our member", ZSYSTEMERROR);
                return;
        }
        for (size_t i = 0; i < res->n_members; i++) {
                const struct zk_member_read *m = &res->members[i];
                members[i].read = m->rc == ZOK ? REG_READ_OK : m->rc == ZNONODE ? REG_READ_GONE : REG_READ_FAILED;
                if (m->rc != ZOK)
                        continue;
                members[i].owner = m->owner;
                /* Read back from ZooKeeper: written by anyone. */
                if (serverset_parse(m->data, m->size, &parsed[i]) >= 0) {
                        members[i].host = parsed[i].host;
                        members[i].port = parsed[i].port;
                }
                members[i].claimed = znode_claimed_by_other(r, reg, m->path);
        }
        bool complete = reg_plan_check(members, res->n_members, zk_session_id(r->session), reg->lost->host,
                                       reg->lost->port, verdicts);
        for (size_t i = 0; i < res->n_members; i++) {
                const struct zk_member_read *m = &res->members[i];
                switch (verdicts[i]) {
                case REG_VERDICT_CLAIMED:
                        (void) log_reg_full_errno(reg, LOG_DEBUG, 0, "%s is another registration's member: not ours to adopt", m->path);
                        break;
                case REG_VERDICT_ADOPT:
                        reg_set_member(reg, m->path, m->data);
                        reg->znode_session = m->owner;
                        (void) log_reg_full_errno(reg, LOG_INFO, 0, "The create before the connection loss happened: adopting %s", m->path);
                        pod_event_emit(r->manager->pod_events, reg->uid, POD_EVENT_NORMAL, POD_EVENT_REGISTERED,
                                       "Register", "Registered %s in ZooKeeper at %s (created before a connection loss)",
                                       strempty(reg->entry.endpoint), m->path);
                        break;
                case REG_VERDICT_DELETE:
                        (void) log_reg_full_errno(reg, LOG_WARNING, 0, "Deleting a second member of ours, %s", m->path);
                        (void) zk_ops_delete(r->ops, m->path, reg_on_orphan, r);
                        break;
                default:
                        break;
                }
        }
        if (complete)
                reg->lost = reg_create_free(reg->lost);
        else if (zk_session_state(r->session) == ZK_SESSION_CONNECTED)
                /* Could not read everything: look again after a backoff (or on reconnect). */
                reg_backoff(reg, "checking for our member", ZOPERATIONTIMEOUT);
}

static void on_checked(void *userdata, const struct zk_op_result *res) {
        struct registration *reg = userdata;

        reg->inflight = REG_OP_NONE;
        if (res->rc == ZNONODE)
                reg->lost = reg_create_free(reg->lost); /* no path, no member */
        else if (res->rc == ZOK && reg->lost)
                check_judge(reg, res);
        else if (!zk_error_is_connection(res->rc))
                reg_backoff(reg, "listing the path", res->rc);
        reg_after_op(reg);
}

/* ---- the step ---- */

static int reg_issue(struct registration *reg, enum reg_action action, const char *desired, enum reg_op *ret_op) {
        struct zk_ops *ops = reg->registry->ops;
        int rc;

        switch (action) {
        case REG_ACTION_CHECK:
                *ret_op = REG_OP_CHECK;
                return zk_ops_check(ops, reg->lost->parent, on_checked, reg);
        case REG_ACTION_DELETE:
                *ret_op = REG_OP_DELETE;
                return zk_ops_delete(ops, reg->znode, on_deleted, reg);
        case REG_ACTION_SET:
                *ret_op = REG_OP_SET;
                return zk_ops_set(ops, reg->znode, desired, on_set, reg);
        case REG_ACTION_CREATE: {
                _cleanup_(reg_create_freep) struct reg_create *c = reg_create_new(reg->parent, reg->entry.host,
                                                                                 reg->entry.port);
                *ret_op = REG_OP_CREATE;
                if (!c)
                        return ZSYSTEMERROR;
                rc = zk_ops_create_member(ops, reg->parent, desired, on_created, reg);
                if (rc == ZOK)
                        reg->creating = TAKE_PTR(c);
                return rc;
        }
        default:
                return ZBADARGUMENTS;
        }
}

bool reg_step(struct registration *reg) {
        struct registry *r = reg->registry;
        usec_t now = now_usec(CLOCK_MONOTONIC);
        struct reg_facts f = reg_facts(reg, now);
        struct reg_next next;
        enum reg_op op = REG_OP_NONE;
        int rc;

        if (reg->inflight != REG_OP_NONE)
                return true;
        reg_plan_next(&f, &next);
        if (next.drain_over) {
                /* The reason shows from now on, as for any other reason a member goes. */
                reg->goal = REG_GOAL_NONE;
                (void) reg_set_string(&reg->why_not, "drained");
                reg_set_error(reg, "drained");
        }
        reg_set_waiting(reg, next.waiting);

        switch (next.action) {
        case REG_ACTION_FREE:
                reg_free(reg);
                return true;
        case REG_ACTION_NONE:
        case REG_ACTION_WAIT_SESSION:
        case REG_ACTION_WAIT:
                reg_update(reg);
                if (next.wake > 0)
                        reg_arm_timer(reg, next.wake);
                return true;
        default:
                break;
        }

        if (next.write) {
                usec_t wait = 0;
                if (!write_pacer_take(&r->pacer, now, &wait)) {
                        if (r->dispatch_timer) {
                                (void) sd_event_source_set_time(r->dispatch_timer, now + wait);
                                (void) sd_event_source_set_enabled(r->dispatch_timer, SD_EVENT_ONESHOT);
                        }
                        reg_update(reg);
                        return false;
                }
        }

        rc = reg_issue(reg, next.action, reg_plan_desired(&f, reg->goal), &op);
        if (rc != ZOK) {
                if (rc == ZSYSTEMERROR)
                        reg_backoff(reg, "queueing an operation", rc);
                else if (zk_error_is_connection(rc))
                        reg_set_error(reg, "ZooKeeper session not usable right now");
                else
                        reg_backoff(reg, reg_plan_op_to_string(op), rc);
                reg_update(reg);
                if (!zk_error_is_connection(rc))
                        reg_arm_timer(reg, reg->not_before);
                return true;
        }
        reg->inflight = op;
        reg_set_waiting(reg, REG_WAITING_CLEAR);
        reg_update(reg);
        return true;
}

void reg_session_changed(struct registration *reg, enum zk_session_state new, int64_t sid) {
        /* Members of an ended session are gone with it (the server deleted them when it expired
         * the session), and so is the question whether a create of it happened. */
        if (reg->znode && (new != ZK_SESSION_CONNECTED || reg->znode_session != sid))
                reg_forget_member(reg);
        if (new != ZK_SESSION_CONNECTED)
                reg->lost = reg_create_free(reg->lost);
}

/* ---- life ---- */

struct registration *reg_new(struct registry *r, const struct pod *p) {
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
        if (!tsearch(reg, &r->by_uid, reg_uid_cmp)) {
                free(reg->uid);
                free(reg->name);
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

void reg_free(struct registration *reg) {
        struct registry *r = reg->registry;

        registry_unqueue(reg);
        /* Only the operation in flight is the registration's own (watches are the registry's). */
        if (r->ops && reg->inflight != REG_OP_NONE)
                zk_ops_detach(r->ops, reg);
        reg_forget_member(reg);
        (void) tdelete(reg, &r->by_uid, reg_uid_cmp);
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
        free(reg->why_not);
        free(reg->parent);
        free(reg->parent_floor);
        serverset_entry_done(&reg->entry);
        free(reg->health_ip);
        reg_create_free(reg->creating);
        reg_create_free(reg->lost);
        free(reg->last_error);
        free(reg->waiting);
        free(reg);
}
