/* SPDX-License-Identifier: MIT */
#include <math.h>

#include "token-bucket.h"

/* Tolerance for floating-point drift: waiting exactly the time we promised must succeed. */
#define TOKEN_EPSILON 1e-9

static bool rate_unlimited(double qps) {
        return isinf(qps) && qps > 0;
}

void token_bucket_refill(struct token_bucket *tb, usec_t now) {
        if (now <= tb->last) {
                /* Time went backwards (x/time/rate does the same): restart from here without
                 * minting tokens, rather than waiting for the clock to catch up. */
                tb->last = now;
                return;
        }

        if (tb->qps > 0 && !rate_unlimited(tb->qps)) {
                double add = (double) (now - tb->last) * tb->qps / (double) USEC_PER_SEC;
                tb->tokens = MIN(tb->tokens + add, tb->burst);
        }
        tb->last = now;
}

usec_t token_bucket_wait_for(const struct token_bucket *tb, double want) {
        double deficit = want - tb->tokens;

        if (deficit <= TOKEN_EPSILON)
                return 0;
        if (!(tb->qps > 0))
                return USEC_INFINITY;

        usec_t wait = usec_from_double(ceil(deficit * (double) USEC_PER_SEC / tb->qps));
        /* ceil() of a quotient carrying rounding noise can overshoot by one microsecond; keep
         * the shortest wait after which the refill (same formula as token_bucket_refill())
         * really covers the deficit. */
        if (wait > 0 && wait != USEC_INFINITY &&
            (double) (wait - 1) * tb->qps / (double) USEC_PER_SEC >= deficit - TOKEN_EPSILON)
                wait--;
        return wait;
}

void token_bucket_init(struct token_bucket *tb, double qps, double burst, usec_t now) {
        *tb = (struct token_bucket) {
                .qps = qps,
                .burst = burst > 0 ? burst : 0,
                .tokens = burst > 0 ? burst : 0,
                .last = now,
        };
}

bool token_bucket_try_take(struct token_bucket *tb, usec_t now, usec_t *ret_wait) {
        if (rate_unlimited(tb->qps))
                return true;

        token_bucket_refill(tb, now);
        if (tb->tokens >= 1.0 - TOKEN_EPSILON) {
                tb->tokens -= 1.0;
                return true;
        }

        if (ret_wait)
                /* A bucket smaller than one token never holds one. */
                *ret_wait = tb->burst >= 1.0 - TOKEN_EPSILON ? token_bucket_wait_for(tb, 1.0) : USEC_INFINITY;
        return false;
}

usec_t token_bucket_reserve(struct token_bucket *tb, usec_t now) {
        if (rate_unlimited(tb->qps))
                return 0;

        token_bucket_refill(tb, now);

        /* Reservations that can never be honoured are not queued: they would only push every
         * later caller back without ever completing (x/time/rate refuses them as well). */
        if (tb->burst < 1.0 - TOKEN_EPSILON)
                return USEC_INFINITY;
        if (!(tb->qps > 0) && tb->tokens < 1.0 - TOKEN_EPSILON)
                return USEC_INFINITY;

        /* Take it now even if the bucket is empty: the negative balance is the queue, so the
         * next caller waits behind this one. */
        tb->tokens -= 1.0;
        return token_bucket_wait_for(tb, 0.0);
}

void token_bucket_set_rate(struct token_bucket *tb, double qps, double burst, usec_t now) {
        /* Tokens earned so far were earned at the old rate. */
        if (!rate_unlimited(tb->qps))
                token_bucket_refill(tb, now);
        else {
                tb->tokens = tb->burst;
                tb->last = now;
        }

        tb->qps = qps;
        tb->burst = burst > 0 ? burst : 0;
        tb->tokens = MIN(tb->tokens, tb->burst);
}
