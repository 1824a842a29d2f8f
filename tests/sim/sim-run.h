/* SPDX-License-Identifier: MIT */
#pragma once

/* One run of one policy through the scenario, and what it yields: the summary numbers and a
 * sample per 1 s window. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "macro.h"
#include "sim-model.h"
#include "sim-policy.h"
#include "sim-writes.h"

struct sample {
        double t; /* window start, seconds since the outage began */
        double offered;
        unsigned requests, rejected, failed, synced;
        unsigned writes;     /* write requests */
        unsigned backlogged; /* agents holding a write a failure delayed */
        bool up;
};

enum resource {
        RESOURCE_PODS,
        RESOURCE_NODES,
        _RESOURCE_MAX,
};

/* What the fleet received and the apiserver was offered over a span of the run. */
struct fanout {
        double events[_RESOURCE_MAX]; /* watch events received */
        double bytes[_RESOURCE_MAX];  /* watch events and list items received */
        uint64_t requests[_RESOURCE_MAX];
        double cost;                  /* offered: requests and events */
        usec_t span;
};

/* A route-relevant change to some Node every second the apiserver is up, and how long each
 * agent's Node reflector takes to hear of it: at once while its watch is established, else when
 * its watch resumes or its list completes. */
struct route_changes {
        uint64_t pairs; /* changes × Node reflectors */
        uint64_t late;  /* heard 5 s or more after the change, or never */
        usec_t max_delay;
};

struct result {
        const char *policy;
        bool writing;            /* the policy writes (naive-writes, pinion-writes) */
        uint64_t requests_outage; /* the reflectors' (the writes' are in .writes) */
        uint64_t requests_total; /* from the outage start until the end of the run */
        double peak_cost;        /* highest 1 s offered cost after the recovery (reads and writes) */
        unsigned falls;          /* fall-overs after the recovery */
        unsigned unsynced;       /* agents not synced when the run ended */
        usec_t p50, p99, max;    /* from the recovery until synced; USEC_INFINITY: never */
        usec_t end;
        struct fanout steady;          /* before the outage */
        struct fanout recovery;        /* from the outage start to the end */
        struct route_changes changes_steady, changes_after; /* before the outage, after the recovery */
        struct write_result writes; /* the naive-writes and pinion-writes policies */
        struct sample *samples;
        size_t n_samples, allocated_samples;
};

/* Runs policy p on model m (with m->seed) into *ret, which owns its samples afterwards; on
 * failure (negative errno) *ret holds nothing to free. */
int run_policy(const struct model *m, const struct policy *p, struct result *ret);
/* Frees a result's samples. */
void result_done(struct result *r);
