/* SPDX-License-Identifier: MIT */
/* The pure decisions of zkreg's registrations (see reg-plan.h). */

#include <errno.h>
#include <string.h>

#include "reg-plan.h"
#include "string-table.h"
#include "strv.h"

static const char *const reg_plan_state_table[_REG_STATE_MAX] = {
        [REG_UNREADY] = "unready",
        [REG_PENDING] = "pending",
        [REG_REGISTERING] = "registering",
        [REG_REGISTERED] = "registered",
        [REG_STOPPING] = "stopping",
        [REG_DEREGISTERING] = "deregistering",
};

DEFINE_STRING_TABLE_LOOKUP_TO_STRING(reg_plan_state, enum reg_state);

static const char *const reg_plan_goal_table[_REG_GOAL_MAX] = {
        [REG_GOAL_NONE] = "none",
        [REG_GOAL_ALIVE] = "alive",
        [REG_GOAL_STOPPING] = "stopping",
};

DEFINE_STRING_TABLE_LOOKUP_TO_STRING(reg_plan_goal, enum reg_goal);

static const char *const reg_plan_op_table[_REG_OP_MAX] = {
        [REG_OP_NONE] = "none",
        [REG_OP_CREATE] = "create",
        [REG_OP_CHECK] = "check",
        [REG_OP_SET] = "set",
        [REG_OP_DELETE] = "delete",
};

DEFINE_STRING_TABLE_LOOKUP_TO_STRING(reg_plan_op, enum reg_op);

static const char *const reg_plan_action_table[_REG_ACTION_MAX] = {
        [REG_ACTION_NONE] = "none",
        [REG_ACTION_FREE] = "free",
        [REG_ACTION_WAIT_SESSION] = "wait-session",
        [REG_ACTION_WAIT] = "wait",
        [REG_ACTION_CHECK] = "check",
        [REG_ACTION_DELETE] = "delete",
        [REG_ACTION_CREATE] = "create",
        [REG_ACTION_SET] = "set",
};

DEFINE_STRING_TABLE_LOOKUP_TO_STRING(reg_plan_action, enum reg_action);

static const char *const reg_plan_verdict_table[_REG_VERDICT_MAX] = {
        [REG_VERDICT_IGNORE] = "ignore",
        [REG_VERDICT_CLAIMED] = "claimed",
        [REG_VERDICT_ADOPT] = "adopt",
        [REG_VERDICT_DELETE] = "delete",
};

DEFINE_STRING_TABLE_LOOKUP_TO_STRING(reg_plan_verdict, enum reg_verdict);

const char *reg_plan_desired(const struct reg_facts *f, enum reg_goal g) {
        switch (g) {
        case REG_GOAL_ALIVE:
                return f->alive;
        case REG_GOAL_STOPPING:
                return f->stopping;
        default:
                return NULL;
        }
}

/* znode is a child of parent (a changed pinion.io/serverset leaves it under the old path). */
static bool znode_under(const char *znode, const char *parent) {
        size_t n = parent ? strlen(parent) : 0;
        return znode && parent && strncmp(znode, parent, n) == 0 && znode[n] == '/';
}

void reg_plan_state(const struct reg_facts *f, enum reg_state *ret_state, enum reg_waiting *ret_waiting) {
        const char *desired = reg_plan_desired(f, f->goal);
        bool member_here = desired && znode_under(f->znode, f->parent);
        enum reg_waiting waiting = REG_WAITING_KEEP;
        enum reg_state s;

        switch (f->inflight) {
        case REG_OP_DELETE:
                s = REG_DEREGISTERING;
                break;
        case REG_OP_SET:
                if (f->goal == REG_GOAL_STOPPING)
                        s = REG_STOPPING;
                else if (f->state == REG_REGISTERED)
                        s = REG_REGISTERED; /* an update: still registered */
                else
                        s = REG_REGISTERING;
                break;
        case REG_OP_CREATE:
        case REG_OP_CHECK:
                s = REG_REGISTERING;
                break;
        default:
                if (member_here && !f->connected) {
                        /* The member may be gone (the session may expire meanwhile): not "registered". */
                        s = REG_PENDING;
                        if (!f->has_error)
                                waiting = REG_WAITING_SUSPENDED;
                } else if (member_here && streq_ptr(f->written, desired)) {
                        s = f->goal == REG_GOAL_STOPPING ? REG_STOPPING : REG_REGISTERED;
                        waiting = REG_WAITING_CLEAR;
                } else if (member_here && f->goal == REG_GOAL_ALIVE && f->state == REG_REGISTERED)
                        s = REG_REGISTERED; /* its data about to be rewritten (endpoint change) */
                else if (f->goal != REG_GOAL_NONE || f->znode || f->lost_create)
                        s = REG_PENDING;
                else
                        s = REG_UNREADY;
        }
        *ret_state = s;
        *ret_waiting = waiting;
}

void reg_plan_next(const struct reg_facts *f, struct reg_next *ret) {
        struct reg_next n = { .action = REG_ACTION_NONE, .waiting = REG_WAITING_KEEP };
        enum reg_goal goal = f->goal;
        const char *desired;

        if (f->inflight != REG_OP_NONE) {
                *ret = n;
                return;
        }
        if (f->pod_gone && !f->znode && !f->lost_create) {
                n.action = REG_ACTION_FREE;
                *ret = n;
                return;
        }
        /* A drain ends for a member once the drain delay has passed with STOPPING written, or
         * when the member went (with an expired session): it is not made again. */
        if (goal == REG_GOAL_STOPPING &&
            (f->znode ? f->now >= f->drain_until && streq_ptr(f->written, f->stopping) : !f->lost_create)) {
                goal = REG_GOAL_NONE;
                n.drain_over = true;
        }
        desired = reg_plan_desired(f, goal);
        if (!f->connected) {
                bool member_in_sync = f->znode && desired && streq_ptr(f->written, desired);
                n.action = REG_ACTION_WAIT_SESSION;
                if ((goal != REG_GOAL_NONE || f->znode) && !member_in_sync && !f->lost_create)
                        n.waiting = REG_WAITING_SESSION;
                else if (goal == REG_GOAL_NONE && !f->znode && !f->lost_create)
                        n.waiting = REG_WAITING_CLEAR; /* nothing of ours waits: the reason is why_not */
                *ret = n;
                return;
        }
        /* Connected: nothing waits for the session, whatever the note said during the outage. */
        n.waiting = REG_WAITING_CLEAR;
        /* Shutting down skips damping and drain delay, but a failed delete still backs off. */
        usec_t wait_until = f->shutting_down ? f->error_until : f->not_before;
        if (f->now < wait_until) {
                n.action = REG_ACTION_WAIT;
                n.wake = wait_until;
                *ret = n;
                return;
        }

        if (f->lost_create)
                n.action = REG_ACTION_CHECK;
        else if (f->znode && (!desired || !znode_under(f->znode, f->parent)))
                n.action = REG_ACTION_DELETE;
        else if (desired && !f->znode)
                n.action = REG_ACTION_CREATE;
        else if (desired && !streq_ptr(f->written, desired))
                n.action = REG_ACTION_SET;
        else if (goal == REG_GOAL_STOPPING && f->znode)
                n.wake = f->drain_until;
        /* Reads are free; so are the deletes of a shutdown, which must not wait behind the bucket. */
        n.write = (n.action == REG_ACTION_CREATE || n.action == REG_ACTION_SET || n.action == REG_ACTION_DELETE) &&
                  !f->shutting_down;
        *ret = n;
}

bool reg_plan_urgent(const struct reg_facts *f) {
        if (!f->znode)
                return false;
        return !reg_plan_desired(f, f->goal) || !znode_under(f->znode, f->parent) || f->goal == REG_GOAL_STOPPING;
}

bool reg_plan_check(const struct reg_check_member *members, size_t n, int64_t session, const char *host,
                    unsigned port, enum reg_verdict *ret_verdicts) {
        bool adopted = false, complete = true;

        for (size_t i = 0; i < n; i++) {
                const struct reg_check_member *m = &members[i];
                enum reg_verdict v = REG_VERDICT_IGNORE;

                if (m->read == REG_READ_FAILED)
                        complete = false;
                else if (m->read != REG_READ_OK)
                        ;
                else if (m->claimed)
                        v = REG_VERDICT_CLAIMED;
                else if (m->owner == session && host && m->host && streq(m->host, host) && m->port == port) {
                        v = adopted ? REG_VERDICT_DELETE : REG_VERDICT_ADOPT;
                        adopted = true;
                }
                ret_verdicts[i] = v;
        }
        return complete;
}

usec_t reg_plan_flap(struct reg_flaps *fl, bool was, bool want, usec_t now, usec_t damping) {
        if (was && !want) {
                if (now - fl->last_down > REG_FLAP_WINDOW)
                        fl->count = 0;
                fl->count++;
                fl->last_down = now;
                return 0;
        }
        if (was || !want || fl->count == 0 || damping == 0 || now - fl->last_down > REG_FLAP_WINDOW)
                return 0;
        /* damping × 2^(flaps-1), at most REG_FLAP_PENALTY_MAX (no overflow for any damping) */
        unsigned shift = fl->count - 1 > 6 ? 6 : fl->count - 1;
        usec_t penalty = damping > (REG_FLAP_PENALTY_MAX >> shift) ? REG_FLAP_PENALTY_MAX : damping << shift;
        /* A penalty already served holds nothing back. */
        return fl->last_down + penalty > now ? fl->last_down + penalty : 0;
}

int reg_plan_parents(const char *parent, const char *floor, char ***ret) {
        _cleanup_strv_free_ char **l = NULL;
        size_t floor_len = floor ? strlen(floor) : 0;

        if (parent && parent[0] == '/' && parent[1])
                for (const char *slash = strchr(parent + 1, '/');; slash = strchr(slash + 1, '/')) {
                        size_t len = slash ? (size_t) (slash - parent) : strlen(parent);
                        /* Only below the allowed prefix: the prefix and above are the operator's. */
                        if (len > floor_len) {
                                char *node = strndup(parent, len);
                                if (!node || strv_push(&l, node) < 0)
                                        return -ENOMEM;
                        }
                        if (!slash)
                                break;
                }
        *ret = TAKE_PTR(l);
        return 0;
}

bool reg_plan_parents_give_up(unsigned attempts) {
        return attempts > 2;
}
