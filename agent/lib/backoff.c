/* SPDX-License-Identifier: MIT */
#include <math.h>
#include <sys/random.h>

#include "backoff.h"

/* Any non-zero state works for xorshift64*; this one is used when the seed scrambles to 0. */
#define RNG_FALLBACK_STATE UINT64_C(0x9e3779b97f4a7c15)

/* splitmix64: spreads nearby seeds (1, 2, 3, ... in tests and the simulation) over the whole
 * state space, so their sequences have nothing in common from the first draw on. */
static uint64_t splitmix64(uint64_t x) {
        x += UINT64_C(0x9e3779b97f4a7c15);
        x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
        x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
        return x ^ (x >> 31);
}

static uint64_t seed_from_kernel(const void *salt) {
        uint64_t seed = 0;

        /* This is jitter, not key material: never stall start-up waiting for entropy.
         * GRND_INSECURE needs Linux 5.6; older kernels refuse it with EINVAL. */
        if (getrandom(&seed, sizeof(seed), GRND_INSECURE) == (ssize_t) sizeof(seed))
                return seed;
        if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) == (ssize_t) sizeof(seed))
                return seed;
        /* Last resort, still different per process and per object (ASLR, PID). */
        return (uint64_t) (uintptr_t) salt ^ ((uint64_t) getpid() << 32);
}

/* One seed from the kernel per process, then the next number for each object: splitmix64 makes
 * neighbours unrelated, and an agent starting with thousands of registrations (each with its
 * backoff) made as many getrandom() calls, 3% of its start. Two threads racing to the first
 * call both ask the kernel; either answer serves. */
static uint64_t process_seed(const void *salt) {
        static uint64_t base, next;

        uint64_t b = __atomic_load_n(&base, __ATOMIC_ACQUIRE);
        if (b == 0) {
                b = seed_from_kernel(salt) | 1; /* never 0: 0 means "not yet" */
                __atomic_store_n(&base, b, __ATOMIC_RELEASE);
        }
        return b + __atomic_fetch_add(&next, 1, __ATOMIC_RELAXED);
}

static uint64_t rng_next(struct backoff *b) {
        uint64_t x = b->rng;

        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        b->rng = x;
        return x * UINT64_C(0x2545f4914f6cdd1d);
}

void backoff_init(struct backoff *b, const struct backoff_config *config, uint64_t seed) {
        *b = (struct backoff) {
                .config = *config,
        };

        if (seed == 0)
                seed = process_seed(b);
        b->rng = splitmix64(seed);
        if (b->rng == 0)
                b->rng = RNG_FALLBACK_STATE;
}

void backoff_reset(struct backoff *b) {
        b->base = 0;
        b->last_failure = 0;
        b->failures = 0;
}

double backoff_random(struct backoff *b) {
        /* The top 53 bits fill a double's mantissa exactly: uniform in [0, 1). */
        return (double) (rng_next(b) >> 11) * 0x1.0p-53;
}

usec_t backoff_random_between(struct backoff *b, usec_t lo, usec_t hi) {
        if (hi <= lo)
                return lo;

        uint64_t span = hi - lo;
        if (span == UINT64_MAX)
                return rng_next(b);

        /* Rejection sampling, so that no value is favoured by the modulo. */
        uint64_t n = span + 1;
        uint64_t threshold = -n % n;
        for (;;) {
                uint64_t r = rng_next(b);
                if (r >= threshold)
                        return lo + r % n;
        }
}

/* client-go's jitteredBackoffManager: a failure after a long enough healthy stretch starts the
 * sequence over. now < last_failure (a caller mixing clocks) never resets. */
static bool backoff_expired(const struct backoff *b, usec_t now) {
        return b->base != 0 && now > b->last_failure && now - b->last_failure > b->config.reset_after;
}

usec_t backoff_current_step(const struct backoff *b, usec_t now) {
        usec_t base = b->base != 0 && !backoff_expired(b, now) ? b->base : b->config.initial;
        return MIN(base, b->config.max);
}

usec_t backoff_next(struct backoff *b, usec_t now, usec_t retry_after) {
        const struct backoff_config *c = &b->config;

        if (backoff_expired(b, now)) {
                b->base = 0;
                b->failures = 0;
        }

        usec_t base = b->base != 0 ? b->base : c->initial;
        base = MIN(base, c->max);

        /* A factor below 1 would shrink the delay on every failure; treat it as constant. */
        double factor = c->factor >= 1.0 ? c->factor : 1.0;
        double next = (double) base * factor;
        b->base = next < (double) c->max ? usec_from_double(next) : c->max;
        /* 0 means "not backing off": keep a zero-length schedule distinguishable from it. */
        if (b->base == 0)
                b->base = 1;

        double jitter = c->jitter > 0 ? c->jitter : 0;
        usec_t delay = base;
        if (jitter > 0)
                delay = usec_from_double((double) base + backoff_random(b) * jitter * (double) base);
        delay = MAX(delay, base); /* rounding must never take it below the base */

        if (retry_after > 0) {
                usec_t cap = c->retry_after_max > 0 ? c->retry_after_max : c->max;
                delay = MAX(delay, MIN(retry_after, cap));
        }

        b->last_failure = now;
        b->failures++;
        return delay;
}
