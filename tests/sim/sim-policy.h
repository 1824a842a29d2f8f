/* SPDX-License-Identifier: MIT */
#pragma once

/* The retry policies (the comment at the top of fleet-sim.c describes them): what each does
 * after a failure, a 410 and the normal end of a watch. */

#include <stdbool.h>

#include "backoff.h"
#include "sim-model.h"

enum policy_id {
        POLICY_LEGACY,
        POLICY_CLIENT_GO,
        POLICY_PINION,
        POLICY_NAIVE_WRITES,  /* pinion's reflector, and writes each retried on its own */
        POLICY_PINION_WRITES, /* pinion's reflector, and the agent's write queue */
        _POLICY_MAX,
};

enum write_policy {
        WRITES_NONE,
        WRITES_NAIVE,  /* every write sent when due and retried every legacy-retry on its own: no
                        * queue, no coalescing, no jitter, no token bucket */
        WRITES_PINION, /* one queue per agent: bounded, conditions coalesced, the agent's backoff
                        * and token bucket, a pause in [0, the backoff step] after a failure streak */
};

struct policy {
        const char *name;
        struct backoff_config backoff;
        bool rate_limited;       /* a token bucket in front of every request */
        double qps, burst;
        bool renew_resumes;      /* a watch that times out is renewed from its RV, not relisted */
        bool resume;             /* retries resume the watch from the last RV; only 410 relists */
        bool gone_relists_at_once; /* no backoff between a 410 and the relist */
        bool gone_splay;           /* a 410 relists after U(0, current backoff step) */
        bool honour_retry_after;
        unsigned list_objects;
        enum write_policy writes;
};

/* Fills one policy per policy_id from the model's constants. */
void policies_init(const struct model *m, struct policy ret[static _POLICY_MAX]);
/* The policy_id named `name`, or -EINVAL. */
int policy_from_name(const char *name);
