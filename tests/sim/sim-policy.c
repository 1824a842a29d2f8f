/* SPDX-License-Identifier: MIT */
/* The retry policies (and the write policies beside pinion's reflector), built from the model's constants. */

#include <errno.h>

#include "sim-policy.h"

void policies_init(const struct model *m, struct policy ret[static _POLICY_MAX]) {
        ret[POLICY_LEGACY] = (struct policy) {
                .name = "legacy",
                .backoff = {
                        .initial = m->legacy_retry,
                        .max = m->legacy_retry,
                        .factor = 1.0,
                        .jitter = 0,
                        .reset_after = m->legacy_retry,
                },
                .list_objects = m->legacy_list_objects > 0 ? m->legacy_list_objects : m->pods_per_node,
        };
        ret[POLICY_CLIENT_GO] = (struct policy) {
                .name = "client-go",
                .backoff = BACKOFF_CONFIG_CLIENT_GO,
                .renew_resumes = true,
                .list_objects = m->pods_per_node,
        };
        ret[POLICY_PINION] = (struct policy) {
                .name = "pinion",
                .backoff = {
                        .initial = m->backoff_initial,
                        .max = m->backoff_max,
                        .factor = m->backoff_factor,
                        .jitter = m->backoff_jitter,
                        .reset_after = m->backoff_reset,
                },
                .rate_limited = true,
                .qps = m->qps,
                .burst = m->burst,
                .renew_resumes = true,
                .resume = true,
                .gone_relists_at_once = m->gone_pause == GONE_PAUSE_NONE,
                .gone_splay = m->gone_pause == GONE_PAUSE_SPLAY,
                .honour_retry_after = true,
                .list_objects = m->pods_per_node,
        };
        ret[POLICY_NAIVE_WRITES] = ret[POLICY_PINION];
        ret[POLICY_NAIVE_WRITES].name = "naive-writes";
        ret[POLICY_NAIVE_WRITES].writes = WRITES_NAIVE;
        ret[POLICY_PINION_WRITES] = ret[POLICY_PINION];
        ret[POLICY_PINION_WRITES].name = "pinion-writes";
        ret[POLICY_PINION_WRITES].writes = WRITES_PINION;
}

int policy_from_name(const char *name) {
        static const char *const names[_POLICY_MAX] = {
                [POLICY_LEGACY] = "legacy",
                [POLICY_CLIENT_GO] = "client-go",
                [POLICY_PINION] = "pinion",
                [POLICY_NAIVE_WRITES] = "naive-writes",
                [POLICY_PINION_WRITES] = "pinion-writes",
        };

        for (int i = 0; i < _POLICY_MAX; i++)
                if (streq(name, names[i]))
                        return i;
        return -EINVAL;
}
