/* SPDX-License-Identifier: MIT */
#pragma once

/* The agents' writes to the apiserver: each node's pods start at a steady rate (and keep starting
 * through an outage), and every start wants its pinion.io/ready condition PATCHed and its Normal
 * events POSTed; identity rotations add events. The write policies (the comment at the top of
 * fleet-sim.c describes them): naive (every write on its own, retried at a fixed interval) and
 * pinion (one bounded queue per agent that coalesces conditions, backs off as a whole, pauses
 * before draining after a failure streak, and takes its tokens from the agent's bucket). */

#include <stdbool.h>
#include <stdint.h>

#include "backoff.h"
#include "sim-event.h"
#include "sim-model.h"
#include "sim-policy.h"

/* What a run's writes yield. */
struct write_result {
        uint64_t starts;          /* pod starts, the whole run */
        uint64_t starts_steady;   /* pod starts whose writes were all due before the outage */
        uint64_t writes_steady;   /* write requests those starts caused (retries included) */
        uint64_t writes_before;   /* every write request (rotations too) from sim_writes_settle() to the outage */
        uint64_t writes_outage;   /* write requests sent while the apiserver was down in the outage */
        uint64_t writes_total;    /* write requests from the outage start to the end */
        uint64_t dropped;         /* events dropped from a full queue */
        uint64_t dropped_conditions; /* conditions dropped from a queue full of conditions */
        uint64_t coalesced;       /* condition decisions that replaced a queued one */
        unsigned queue_max;       /* the most writes one agent held (queued or in flight) */
        double peak_cost;         /* highest 1 s of write cost after the recovery */
        usec_t backlog_clear;     /* from the recovery until no agent holds a write a failure delayed;
                                   * USEC_INFINITY: not when the run ended */
        unsigned backlogged_end;  /* agents still holding such writes when the run ended */
};

struct sim; /* sim-run.c */

/* What sim-run.c offers the writers. */
/* The agent's one token bucket (shared with its reflectors). */
struct token_bucket *sim_run_bucket(struct sim *s, uint32_t agent);
/* A write of `cost` reaches the apiserver at `now`: OUTCOME_OK, _REJECTED, _REFUSED or
 * _TIMEOUT, and when its answer arrives. */
enum outcome sim_run_offer_write(struct sim *s, double cost, usec_t now, usec_t *ret_at);
/* Bumped every time the apiserver falls over: an answer accepted under an older epoch was cut. */
uint32_t sim_run_server_epoch(const struct sim *s);

struct writer;

struct sim_writes {
        const struct model *m;
        const struct policy *p;
        struct sim *sim;
        struct heap *heap;
        struct writer *writers; /* one per agent; NULL: the policy writes nothing */
        usec_t outage_start, recovery;
        usec_t steady_settle;   /* a start counts for the steady figure if it began this long before the outage */
        unsigned n_backlogged;  /* agents holding a write a failure delayed */
        usec_t clear_at;        /* when n_backlogged last fell to 0 */
        struct write_result *result;
};

/* How long after its start a pod's writes have all been sent in steady state: the steady figures
 * count the starts at least this long before the outage, and the writes from this long after the
 * run's start. */
usec_t sim_writes_settle(const struct model *m);
/* Sets up the fleet's writers (none unless p->writes) and schedules the first pod starts and
 * rotations. Returns 0 or -ENOMEM. */
int sim_writes_init(struct sim_writes *w, const struct model *m, const struct policy *p, struct sim *sim,
                    struct heap *heap, struct write_result *result);
void sim_writes_done(struct sim_writes *w);
/* Whether an event type belongs to the writers. */
bool sim_writes_owns(enum event_type type);
void sim_writes_dispatch(struct sim_writes *w, const struct event *e);
/* No agent holds a write a failure delayed. */
bool sim_writes_settled(const struct sim_writes *w);
/* Fills in what is known only at the end of the run. */
void sim_writes_finish(struct sim_writes *w);
