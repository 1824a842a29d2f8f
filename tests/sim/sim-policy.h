/* SPDX-License-Identifier: MIT */
#pragma once

/* The three retry policies (the comment at the top of fleet-sim.c describes them): what each does
 * after a failure, a 410 and the normal end of a watch. */

#include <stdbool.h>

#include "backoff.h"
#include "sim-model.h"

enum policy_id {
        POLICY_LEGACY,
        POLICY_CLIENT_GO,
        POLICY_PINION,
        _POLICY_MAX,
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
};

/* Fills one policy per policy_id from the model's constants. */
void policies_init(const struct model *m, struct policy ret[static _POLICY_MAX]);
/* The policy_id named `name`, or -EINVAL. */
int policy_from_name(const char *name);
