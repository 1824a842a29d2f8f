/* SPDX-License-Identifier: MIT */
#pragma once

/* The events of a run and the queue that orders them: by time, then the closing 1 s window
 * first, then in the order scheduled. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "macro.h"

enum event_type {
        EVENT_TICK,      /* a 1 s accounting window closes */
        EVENT_OUTAGE,    /* the scenario's outage begins */
        EVENT_SERVER_UP, /* the apiserver is back */
        EVENT_SEND,      /* an agent's request leaves (after its backoff and token bucket) */
        EVENT_REPLY,     /* an agent's request is answered */
        EVENT_WATCH_END, /* an agent's watch reaches its timeoutSeconds */
        EVENT_RELIST,    /* a Node reflector's deferred full relist is due (node-fresh-watch) */
        /* the writers' (sim-writes.c) */
        EVENT_POD_START,   /* a pod starts on the agent's node */
        EVENT_ROTATION,    /* one of the node's pods has its identity rotated */
        EVENT_CONDITION,   /* a pod's condition decision (arg: the pod) */
        EVENT_EVENTS_DUE,  /* a batch of a pod's Normal events closes: one event POST */
        EVENT_WRITE_SEND,  /* a write leaves (after its backoff and token bucket) */
        EVENT_WRITE_REPLY, /* a write is answered (arg: the apiserver's epoch when it was accepted) */
};

enum outcome {
        OUTCOME_NONE,
        OUTCOME_OK,
        OUTCOME_GONE,     /* 410: the resourceVersion is too old */
        OUTCOME_REJECTED, /* 429 from an overloaded apiserver */
        OUTCOME_REFUSED,  /* connection refused: the apiserver is down */
        OUTCOME_TIMEOUT,  /* no answer from a down apiserver */
};

struct event {
        usec_t time;
        uint64_t seq;
        uint32_t agent; /* the reflector; UINT32_MAX: the apiserver's or the clock's */
        uint32_t gen;   /* the reflector's; a naive write's flags */
        uint32_t arg;   /* the writers': a pod, an epoch */
        uint8_t type;
        uint8_t outcome;
};

struct heap {
        struct event *v;
        size_t n, allocated;
        uint64_t seq;
        bool oom;
};

/* Queues an event (its seq is assigned here). Out of memory sets h->oom and drops the event. */
void heap_push(struct heap *h, struct event e);
/* Takes the earliest event: false when the queue is empty. */
bool heap_pop(struct heap *h, struct event *ret);
