/* SPDX-License-Identifier: MIT */
#pragma once

/* A token bucket with golang.org/x/time/rate's semantics: qps tokens a second up to burst, taken
 * one per event or reserved ahead (a negative balance is the queue). A pure function of an
 * explicit clock, so the fleet simulation (tests/sim/) links exactly this code. */

#include <stdbool.h>

#include "macro.h"

struct token_bucket {
        double qps;    /* tokens added per second */
        double burst;  /* capacity */
        double tokens; /* may be negative: reservations not yet covered */
        usec_t last;   /* clock value of the last refill */
};

void token_bucket_init(struct token_bucket *tb, double qps, double burst, usec_t now);
/* Takes a token if one is available now: returns true. Otherwise returns false and, if
 * ret_wait is non-NULL, sets it to the time until one will be. */
bool token_bucket_try_take(struct token_bucket *tb, usec_t now, usec_t *ret_wait);
/* Reserves a token and returns how long to wait before using it (0 = now). Reservations queue
 * up, like client-go's rate limiter Wait(). */
usec_t token_bucket_reserve(struct token_bucket *tb, usec_t now);
/* Adds the tokens earned since the last call (a clock that went back adds none). */
void token_bucket_refill(struct token_bucket *tb, usec_t now);
/* How long until the bucket holds `want` tokens, as of its last refill; 0 if it does,
 * USEC_INFINITY if it never will. */
usec_t token_bucket_wait_for(const struct token_bucket *tb, double want);
/* Changes the rate on reload, keeping the tokens (clamped to the new burst). */
void token_bucket_set_rate(struct token_bucket *tb, double qps, double burst, usec_t now);
