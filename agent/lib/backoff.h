/* SPDX-License-Identifier: MIT */
#pragma once

/* Jittered exponential backoff (the token bucket is token-bucket.h). Pure functions of an explicit clock and a
 * seeded generator, so the fleet simulation (tests/sim/) links exactly this code.
 *
 * Backoff follows client-go's reflector policy: the base delay starts at `initial`, is
 * multiplied by `factor` after each failure up to `max`; the delay returned is the base plus a
 * uniform random share of up to jitter × base (so in [base, base × (1 + jitter)]); when the last
 * failure is longer than `reset_after` ago the base starts again at `initial`. A server's
 * Retry-After hint is honoured as a lower bound, itself capped at `retry_after_max`. */

#include <stdbool.h>
#include <stdint.h>

#include "macro.h"

struct backoff_config {
        usec_t initial;         /* 800ms */
        usec_t max;             /* 30s */
        double factor;          /* 2.0 */
        double jitter;          /* 1.0 */
        usec_t reset_after;     /* 2min */
        usec_t retry_after_max; /* cap on a server hint; 0 means "max" */
};

#define BACKOFF_CONFIG_CLIENT_GO                                                                    \
        ((struct backoff_config) {                                                                  \
                .initial = 800 * USEC_PER_MSEC,                                                     \
                .max = 30 * USEC_PER_SEC,                                                           \
                .factor = 2.0,                                                                      \
                .jitter = 1.0,                                                                      \
                .reset_after = 2 * USEC_PER_MINUTE,                                                 \
        })

struct backoff {
        struct backoff_config config;
        usec_t base;         /* the next failure's base delay; 0 = not backing off */
        usec_t last_failure; /* clock value of the last backoff_next() call, 0 = never */
        unsigned failures;   /* consecutive failures since the last reset */
        uint64_t rng;        /* xorshift64* state, never 0 */
};

/* seed 0 picks one from getrandom(). */
void backoff_init(struct backoff *b, const struct backoff_config *config, uint64_t seed);
/* Records a failure at `now` and returns how long to wait before the next attempt.
 * retry_after is the server's hint (0 if none). */
usec_t backoff_next(struct backoff *b, usec_t now, usec_t retry_after);
/* The base delay the next failure would get (before jitter): backoff-initial after a healthy
 * spell, else where the sequence has come to. For pauses that should scale with how far
 * apart a fleet's retries already are. */
usec_t backoff_current_step(const struct backoff *b, usec_t now);
/* Forgets every failure at once (e.g. after a config change). The usual reset needs no call:
 * the next backoff_next() restarts at `initial` when the last failure is over reset_after ago,
 * i.e. after that long healthy. */
void backoff_reset(struct backoff *b);
/* A uniform double in [0, 1) from the backoff's generator (for splay/jitter elsewhere). */
double backoff_random(struct backoff *b);
/* A uniform duration in [lo, hi] using the generator (e.g. watch timeouts in [5m, 10m]). */
usec_t backoff_random_between(struct backoff *b, usec_t lo, usec_t hi);
