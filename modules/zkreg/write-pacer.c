/* SPDX-License-Identifier: MIT */
/* The registrations' write pacing: tokens per request, operations per token (see write-pacer.h). */

#include "write-pacer.h"

static double pacer_burst(double qps) {
        return qps < 10 ? 10 : qps;
}

void write_pacer_init(struct write_pacer *p, double qps, unsigned max_ops, usec_t now) {
        token_bucket_init(&p->tb, qps, pacer_burst(qps), now);
        p->max_ops = max_ops > 0 ? max_ops : 1;
        p->left = 0;
}

void write_pacer_set(struct write_pacer *p, double qps, unsigned max_ops, usec_t now) {
        token_bucket_set_rate(&p->tb, qps, pacer_burst(qps), now);
        p->max_ops = max_ops > 0 ? max_ops : 1;
        if (p->left >= p->max_ops)
                p->left = p->max_ops - 1;
}

bool write_pacer_take(struct write_pacer *p, usec_t now, usec_t *ret_wait) {
        if (p->left > 0) {
                p->left--;
                return true;
        }
        if (!token_bucket_try_take(&p->tb, now, ret_wait))
                return false;
        p->left = p->max_ops - 1;
        return true;
}

void write_pacer_flush(struct write_pacer *p) {
        p->left = 0;
}
