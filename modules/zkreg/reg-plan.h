/* SPDX-License-Identifier: MIT */
#pragma once

/* reg-plan: the pure decisions of zkreg's registrations, apart from ZooKeeper and the
 * event loop, so they can be unit tested and fuzzed. One registration compares what it wants
 * (its goal and the ServerSet data for it) with what ZooKeeper has as far as it knows (our
 * member, the data written there, a create whose outcome is unknown, the operation in flight):
 *
 *   reg_plan_next()    the next operation: create, set (update), delete, check after a create
 *                      whose answer was lost, wait (session, backoff, damping, drain delay),
 *                      forget the registration, or nothing
 *   reg_plan_state()   the state the registration is in (the one /v1/registrations shows)
 *   reg_plan_check()   after a check: which member under the path to adopt, which to delete
 *   reg_plan_urgent()  whether its next step takes a member away (goes before queued creates)
 *   reg_plan_flap()    flap damping: how long a pod that keeps going away waits to come back
 *   reg_plan_parents() the nodes zkreg may create for a path (below the allowed prefix)
 *
 * The registration states:
 *
 *   unready        nothing wanted and nothing of ours in ZooKeeper
 *   pending        something to do (create, update, delete, check) that waits: the session,
 *                  the write token bucket, a backoff after an error, flap damping; also our
 *                  member while the session is not connected (it may expire meanwhile)
 *   registering    a create, or the check after a lost create, is in flight
 *   registered     our member holds the ALIVE data (or is being rewritten with new data)
 *   stopping       drained: our member holds (or is being rewritten to) the STOPPING data
 *   deregistering  a delete is in flight
 *
 * Typical transitions: unready → pending (registrable) → registering (create issued) →
 * registered (created, or adopted by the check) → deregistering (not registrable, path
 * changed, shutdown) → unready; registered → stopping (drain) → deregistering (drain delay
 * over) → unready; registered → pending (session suspended, member deleted by someone else)
 * → registered; registering → pending (create failed or lost: back off, or check on reconnect). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "macro.h"

enum reg_state {
        REG_UNREADY,
        REG_PENDING,
        REG_REGISTERING,
        REG_REGISTERED,
        REG_STOPPING,
        REG_DEREGISTERING,
        _REG_STATE_MAX,
        _REG_STATE_INVALID = -EINVAL,
};

const char *reg_plan_state_to_string(enum reg_state s);

/* What the registration wants in ZooKeeper. */
enum reg_goal {
        REG_GOAL_NONE,     /* nothing: not registrable (why_not says why), or the pod is gone */
        REG_GOAL_ALIVE,    /* our member with the ALIVE data */
        REG_GOAL_STOPPING, /* drained: our member with the STOPPING data until the drain delay ends */
        _REG_GOAL_MAX,
};

const char *reg_plan_goal_to_string(enum reg_goal g);

/* The operation of a registration in flight (at most one at a time). */
enum reg_op {
        REG_OP_NONE,
        REG_OP_CREATE,
        REG_OP_CHECK, /* list the path and read every member: did a lost create happen? */
        REG_OP_SET,
        REG_OP_DELETE,
        _REG_OP_MAX,
};

const char *reg_plan_op_to_string(enum reg_op o);

struct reg_facts {
        /* wanted */
        enum reg_goal goal;
        const char *alive, *stopping; /* the member data for each goal */
        const char *parent;           /* pinion.io/serverset */
        bool pod_gone;                /* the pod is gone (or lost its annotation) */
        /* known */
        const char *znode;   /* our member, as far as we know it exists */
        const char *written; /* the data written there */
        bool lost_create;    /* a create's answer was lost: it may have happened */
        enum reg_op inflight;
        enum reg_state state; /* the state shown now */
        /* around it */
        bool connected;     /* the session is connected */
        bool shutting_down; /* the agent deregisters everything before it exits */
        bool has_error;     /* an error is shown (a waiting note never overwrites one) */
        usec_t now;         /* CLOCK_MONOTONIC */
        usec_t not_before;  /* backoff, flap damping */
        usec_t error_until; /* the error backoff alone (shutting down skips the rest) */
        usec_t drain_until; /* REG_GOAL_STOPPING: the member goes at this time */
};

/* The note shown over the error (which it keeps) while the registration waits for the session. */
enum reg_waiting {
        REG_WAITING_KEEP,      /* leave the note (or the error) as it is */
        REG_WAITING_SESSION,   /* "waiting for the ZooKeeper session (STATE)" */
        REG_WAITING_SUSPENDED, /* "session suspended" (never over an error: has_error) */
        REG_WAITING_CLEAR,     /* nothing waits for the session: drop the note (the error under it shows) */
        _REG_WAITING_MAX,
};

/* The member data the registration wants for goal g, NULL for none. */
const char *reg_plan_desired(const struct reg_facts *f, enum reg_goal g);

/* The state of the registration and the waiting note it shows. */
void reg_plan_state(const struct reg_facts *f, enum reg_state *ret_state, enum reg_waiting *ret_waiting);

enum reg_action {
        REG_ACTION_NONE,         /* in sync, or an operation is in flight */
        REG_ACTION_FREE,         /* the pod is gone and nothing of ours is left: forget it */
        REG_ACTION_WAIT_SESSION, /* something may be to do, with no session to do it */
        REG_ACTION_WAIT,         /* backoff, flap damping: look again at wake */
        REG_ACTION_CHECK,        /* a create's answer was lost: look for our member first */
        REG_ACTION_DELETE,       /* nothing wanted, or the member is under another path */
        REG_ACTION_CREATE,
        REG_ACTION_SET,          /* the member's data differs from what is wanted */
        _REG_ACTION_MAX,
};

const char *reg_plan_action_to_string(enum reg_action a);

struct reg_next {
        enum reg_action action;
        usec_t wake;        /* look again at this time (0: at the next event) */
        bool write;         /* the action takes a write token (not while shutting down) */
        bool drain_over;    /* the drain delay has passed (or the member went): the goal is none now */
        enum reg_waiting waiting;
};

void reg_plan_next(const struct reg_facts *f, struct reg_next *ret);

/* Its next step takes a member away (a delete, or the STOPPING rewrite of a drain): it goes to
 * the urgent queue, before creates waiting for write tokens. */
bool reg_plan_urgent(const struct reg_facts *f);

/* One member found under the path by a check after a lost create. */
enum reg_read {
        REG_READ_OK,     /* read: owner, host and port are set */
        REG_READ_GONE,   /* deleted between the list and the read: not a member */
        REG_READ_FAILED, /* could not be read: the check is incomplete */
};

struct reg_check_member {
        enum reg_read read;
        int64_t owner;    /* its ephemeralOwner */
        const char *host; /* its serviceEndpoint (NULL: not ServerSet member data) */
        unsigned port;
        bool claimed;     /* another registration's member (two pods may share an endpoint) */
};

enum reg_verdict {
        REG_VERDICT_IGNORE,  /* not ours */
        REG_VERDICT_CLAIMED, /* our session's and endpoint's, but another registration's member */
        REG_VERDICT_ADOPT,   /* the lost create happened: this is our member */
        REG_VERDICT_DELETE,  /* a second member of ours */
        _REG_VERDICT_MAX,
};

const char *reg_plan_verdict_to_string(enum reg_verdict v);

/* Judges members[0..n) (in the listed order) for a lost create of host:port by session: the
 * first one the session owns with that endpoint is adopted, any further one deleted. Returns
 * true if the check is complete, false if a member could not be read (check again). */
bool reg_plan_check(const struct reg_check_member *members, size_t n, int64_t session, const char *host,
                    unsigned port, enum reg_verdict *ret_verdicts);

/* Flap damping: a pod that went away within FLAP_WINDOW of its last departure waits
 * damping × 2^(flaps-1) (at most REG_FLAP_PENALTY_MAX) from that departure to come back. */
#define REG_FLAP_WINDOW (60 * USEC_PER_SEC)
#define REG_FLAP_PENALTY_MAX (60 * USEC_PER_SEC)

struct reg_flaps {
        unsigned count;   /* departures within the window */
        usec_t last_down; /* CLOCK_MONOTONIC of the last departure */
};

/* The wanted side changed from was to want at now: counts a departure, and for a return
 * returns the time before which it must not register (0: no damping). */
usec_t reg_plan_flap(struct reg_flaps *fl, bool was, bool want, usec_t now, usec_t damping);

/* The nodes to create (in order, each persistent and empty) so that parent exists: parent and
 * its ancestors, but only those below floor (the allowed prefix: the operator's, never
 * created; NULL: every ancestor below the root). -ENOMEM. An empty list if there is none. */
int reg_plan_parents(const char *parent, const char *floor, char ***ret);

/* A create answered NONODE although the parents were created (attempts counts the NONODE in a
 * row, including this one): keep creating parents, or back off (something else is wrong, or
 * the allowed prefix is missing). */
bool reg_plan_parents_give_up(unsigned attempts);
