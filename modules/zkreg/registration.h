/* SPDX-License-Identifier: MIT */
#pragma once

/* One registration (a pod with pinion.io/serverset) and the registry that holds them: shared
 * by registry.c (the set of registrations, their wanted side from the pod store, the pod gates
 * and the health checks; drain, shutdown, the API) and reg.c (each registration's
 * state machine: it asks reg-plan.c for the next operation, runs it through
 * zk-ops.c and takes in the result), and member-watch.c (the child watches that notice a
 * member of ours deleted by someone else). See reg-plan.h for the states. */

#include <stdint.h>

#include "backoff.h"
#include "health.h"
#include "member-watch.h"
#include "metrics.h"
#include "reg-plan.h"
#include "registry.h"
#include "serverset.h"
#include "write-pacer.h"
#include "zk-ops.h"

#define MODULE "zkreg"

/* A create: the path it used and the endpoint its data names (what a check looks for if its
 * answer is lost). */
struct reg_create {
        char *parent;
        char *host;
        unsigned port;
};

struct reg_queue {
        struct registration *head, *tail;
};

struct registration {
        struct registry *registry;
        struct registration *prev, *next; /* all registrations */
        struct registration *q_next;      /* in its work queue */
        struct reg_queue *queue;          /* the work queue it waits in (NULL: none) */

        char *uid;
        char *name;      /* namespace/name */
        struct pod *pod; /* NULL: the pod is gone (or lost its annotation): freed once nothing is left */

        /* wanted */
        enum reg_goal goal;
        char *why_not;      /* why the goal is none */
        char *parent;       /* pinion.io/serverset */
        char *parent_floor; /* the allowed prefix it is under (NULL: none set): created by others */
        struct serverset_entry entry;
        usec_t drain_until; /* REG_GOAL_STOPPING: CLOCK_MONOTONIC */
        struct reg_flaps flaps;
        struct health *health;
        char *health_ip;
        unsigned health_port;

        /* known */
        char *znode;   /* our member, as far as we know it exists */
        struct member_watch *mwatch;           /* the watch over znode's path */
        struct registration *mw_prev, *mw_next; /* its other members */
        char *written; /* its data */
        int64_t znode_session;
        enum reg_op inflight;
        struct reg_create *creating; /* the create in flight */
        struct reg_create *lost;     /* a create whose answer was lost: look for its member first */
        unsigned parent_attempts;    /* NONODE answers to creates in a row */

        /* shown */
        enum reg_state state;
        usec_t last_change; /* CLOCK_REALTIME */
        char *last_error;
        char *waiting; /* shown over last_error (which stays) while waiting for the session */

        struct backoff backoff;
        usec_t not_before;  /* CLOCK_MONOTONIC: backoff, flap damping */
        usec_t error_until; /* CLOCK_MONOTONIC: the error backoff alone (kept while shutting down) */
        sd_event_source *timer;
};

struct registry {
        struct manager *manager;
        sd_event *event;
        struct zk_session *session;
        struct zk_ops *ops;
        struct registry_config config;
        char **allowed_prefixes; /* config.allowed_prefixes points here */
        struct write_pacer pacer; /* write requests and the operations each carries */

        struct registration *regs;
        size_t n_regs;
        /* tsearch trees of the registrations by uid and by their member's path (those with
         * one): a burst of pod changes or member events finds each in O(log n). */
        void *by_uid, *by_znode;
        /* The child watches over our members' paths (member-watch.c): a tsearch tree by path
         * and a list of all. */
        void *by_parent;
        struct member_watch *mwatches;
        /* Work queues, each FIFO: urgent (deletes and STOPPING updates: taking a member away
         * must not wait behind creates for write tokens) goes first, then normal. */
        struct reg_queue urgent, normal;
        sd_event_source *dispatch;       /* deferred: drains the queues */
        sd_event_source *dispatch_timer; /* the token bucket's wait */

        bool drained;
        bool shutting_down;
        registry_done_fn done;
        void *done_userdata;
        bool observing, listening;

        struct metric_family *m_regs, *m_health, *m_registered_total, *m_watched;
};

#define log_reg_full_errno(reg, level, error, ...)                                                             \
        log_ctx_full_errno((&(const struct log_ctx) { .module = MODULE, .pod_uid = (reg)->uid, .pod = (reg)->name }), \
                           level, error, __VA_ARGS__)

/* reg.c: the state machine */
int reg_set_string(char **p, const char *v);
struct registration *reg_new(struct registry *r, const struct pod *p);
void reg_free(struct registration *reg);
struct registration *reg_by_uid(struct registry *r, const char *uid);
/* What /v1/registrations shows as last_error: the waiting note, else the error. */
const char *reg_shown_error(const struct registration *reg);
/* The error shown (NULL: none); drops a waiting note. */
void reg_set_error(struct registration *reg, const char *error);
/* Takes the state the plan gives for what is known now (and the waiting note). */
void reg_update(struct registration *reg);
/* Its next step takes a member away. */
bool reg_urgent(const struct registration *reg);
/* Runs the next step. Returns false if its write finds no place in a request this pass paid
 * for and no token is left for another (the caller keeps it queued; the dispatch timer is set
 * for the next token). */
bool reg_step(struct registration *reg);
/* path, a member of ours as far as we know, is not in ZooKeeper any more: unless we delete it
 * ourselves, someone else did, and it is created again. */
void reg_member_gone(struct registry *r, const char *path);
/* The session went to state new (sid: its id): members of an ended session are gone. */
void reg_session_changed(struct registration *reg, enum zk_session_state new, int64_t sid);
/* zk-ops' orphan handler (operations of registrations that are gone); userdata is the
 * registry. */
void reg_on_orphan(void *userdata, const struct zk_op_result *res);

/* registry.c */
/* Queues the registration's next step (the urgent queue if it takes a member away). */
void registry_kick(struct registration *reg);
void registry_unqueue(struct registration *reg);
/* Shutting down: calls done once nothing of ours is left in ZooKeeper. */
void registry_check_done(struct registry *r);
