/* SPDX-License-Identifier: MIT */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "backoff.h"
#include "token-bucket.h"

#define MSEC USEC_PER_MSEC
#define SEC USEC_PER_SEC
/* An arbitrary non-zero clock origin, as CLOCK_MONOTONIC would give. */
#define T0 (1000 * SEC)

static struct backoff_config config_no_jitter(void) {
        struct backoff_config c = BACKOFF_CONFIG_CLIENT_GO;
        c.jitter = 0;
        return c;
}

/* ---- backoff ---- */

static void test_sequence_bounds_many_seeds(_unused_ void **state) {
        const struct backoff_config c = BACKOFF_CONFIG_CLIENT_GO;
        double share_sum = 0, share_min = 1, share_max = 0;
        unsigned samples = 0;

        for (uint64_t seed = 1; seed <= 2000; seed++) {
                struct backoff b;
                usec_t now = T0, base = c.initial;

                backoff_init(&b, &c, seed);
                for (unsigned attempt = 0; attempt < 12; attempt++) {
                        usec_t d = backoff_next(&b, now, 0);

                        assert_true(d >= base);
                        assert_true(d <= 2 * base); /* jitter 1.0: base × (1 + 1) */
                        assert_int_equal(b.failures, attempt + 1);

                        double share = (double) (d - base) / (double) base;
                        share_sum += share;
                        share_min = MIN(share_min, share);
                        share_max = MAX(share_max, share);
                        samples++;

                        /* The next attempt fails right after the wait: no reset. */
                        now += d;
                        base = MIN(base * 2, c.max);
                }
                /* After 12 failures the base has long been capped. */
                assert_int_equal(b.base, c.max);
        }

        /* The jitter is really spread over the whole range, not stuck at one end. */
        double mean = share_sum / samples;
        assert_true(mean > 0.47 && mean < 0.53);
        assert_true(share_min < 0.01);
        assert_true(share_max > 0.99);
}

static void test_jitter_zero_exact(_unused_ void **state) {
        const struct backoff_config c = config_no_jitter();
        const usec_t expected[] = { 800 * MSEC, 1600 * MSEC, 3200 * MSEC, 6400 * MSEC, 12800 * MSEC,
                                    25600 * MSEC, 30 * SEC, 30 * SEC, 30 * SEC };
        struct backoff b;
        usec_t now = T0;

        backoff_init(&b, &c, 42);
        for (size_t i = 0; i < ELEMENTSOF(expected); i++) {
                usec_t d = backoff_next(&b, now, 0);
                assert_int_equal(d, expected[i]);
                now += d;
        }
}

static void test_factor_and_cap(_unused_ void **state) {
        const struct backoff_config c = {
                .initial = 1 * SEC,
                .max = 10 * SEC,
                .factor = 3.0,
                .jitter = 0,
                .reset_after = USEC_PER_HOUR,
        };
        const usec_t expected[] = { 1 * SEC, 3 * SEC, 9 * SEC, 10 * SEC, 10 * SEC };
        struct backoff b;

        backoff_init(&b, &c, 7);
        for (size_t i = 0; i < ELEMENTSOF(expected); i++)
                assert_int_equal(backoff_next(&b, T0 + i * SEC, 0), expected[i]);

        /* An initial above max is capped too. */
        struct backoff_config big = c;
        big.initial = 20 * SEC;
        backoff_init(&b, &big, 7);
        assert_int_equal(backoff_next(&b, T0, 0), 10 * SEC);
}

static void test_reset_after(_unused_ void **state) {
        const struct backoff_config c = config_no_jitter();
        struct backoff b;
        usec_t now = T0;

        backoff_init(&b, &c, 1);
        assert_int_equal(backoff_next(&b, now, 0), 800 * MSEC);
        now += SEC;
        assert_int_equal(backoff_next(&b, now, 0), 1600 * MSEC);
        now += SEC;
        assert_int_equal(backoff_next(&b, now, 0), 3200 * MSEC);

        /* Exactly reset_after later is not "more than": the sequence goes on. */
        now += c.reset_after;
        assert_int_equal(backoff_next(&b, now, 0), 6400 * MSEC);
        assert_int_equal(b.failures, 4);

        /* One microsecond more and it starts over. */
        now += c.reset_after + 1;
        assert_int_equal(backoff_next(&b, now, 0), 800 * MSEC);
        assert_int_equal(b.failures, 1);
        now += SEC;
        assert_int_equal(backoff_next(&b, now, 0), 1600 * MSEC);

        /* An explicit reset forgets everything at once. */
        backoff_reset(&b);
        assert_int_equal(b.base, 0);
        assert_int_equal(b.failures, 0);
        assert_int_equal(backoff_next(&b, now + 1, 0), 800 * MSEC);
}

static void test_retry_after(_unused_ void **state) {
        struct backoff_config c = config_no_jitter();
        struct backoff b;

        backoff_init(&b, &c, 1);
        /* A hint above the computed delay wins... */
        assert_int_equal(backoff_next(&b, T0, 5 * SEC), 5 * SEC);
        /* ...and does not disturb the progression of the base. */
        assert_int_equal(backoff_next(&b, T0 + 1, 0), 1600 * MSEC);
        /* A hint below the computed delay is only a lower bound. */
        assert_int_equal(backoff_next(&b, T0 + 2, 100 * MSEC), 3200 * MSEC);
        /* An absurd hint is capped at max (retry_after_max = 0). */
        assert_int_equal(backoff_next(&b, T0 + 3, USEC_PER_HOUR), 30 * SEC);

        /* With an explicit cap. */
        c.retry_after_max = 10 * SEC;
        backoff_init(&b, &c, 1);
        assert_int_equal(backoff_next(&b, T0, USEC_PER_HOUR), 10 * SEC);
        assert_int_equal(backoff_next(&b, T0 + 1, 9 * SEC), 9 * SEC);

        /* With jitter, the hint is still a floor. */
        c = (struct backoff_config) BACKOFF_CONFIG_CLIENT_GO;
        for (uint64_t seed = 1; seed < 200; seed++) {
                backoff_init(&b, &c, seed);
                usec_t d = backoff_next(&b, T0, 5 * SEC);
                assert_true(d >= 5 * SEC);
                d = backoff_next(&b, T0 + 1, 0);
                assert_true(d >= 1600 * MSEC && d <= 3200 * MSEC);
        }
}

static void collect(uint64_t seed, usec_t out[static 16]) {
        const struct backoff_config c = BACKOFF_CONFIG_CLIENT_GO;
        struct backoff b;

        backoff_init(&b, &c, seed);
        for (unsigned i = 0; i < 16; i++)
                out[i] = backoff_next(&b, T0 + i, 0);
}

static void test_seeds(_unused_ void **state) {
        usec_t a[16], b[16], c[16];

        /* The same seed replays the same sequence (the fleet simulation relies on it)... */
        collect(1, a);
        collect(1, b);
        assert_memory_equal(a, b, sizeof(a));

        /* ...neighbouring seeds do not share it... */
        collect(2, c);
        assert_memory_not_equal(a, c, sizeof(a));
        unsigned same = 0;
        for (unsigned i = 0; i < 16; i++)
                same += a[i] == c[i];
        assert_true(same < 4);

        /* ...and seed 0 draws from the kernel, so two agents differ. */
        collect(0, a);
        collect(0, b);
        assert_memory_not_equal(a, b, sizeof(a));

        struct backoff bo;
        const struct backoff_config cfg = BACKOFF_CONFIG_CLIENT_GO;
        backoff_init(&bo, &cfg, 0);
        assert_true(bo.rng != 0);
}

static void test_random(_unused_ void **state) {
        const struct backoff_config c = BACKOFF_CONFIG_CLIENT_GO;
        struct backoff b;
        double sum = 0;
        bool seen[3] = {};

        backoff_init(&b, &c, 99);
        for (unsigned i = 0; i < 100000; i++) {
                double r = backoff_random(&b);
                assert_true(r >= 0.0 && r < 1.0);
                sum += r;
        }
        assert_true(fabs(sum / 100000 - 0.5) < 0.01);

        for (unsigned i = 0; i < 1000; i++) {
                usec_t v = backoff_random_between(&b, 5, 7);
                assert_true(v >= 5 && v <= 7);
                seen[v - 5] = true;
        }
        /* Both ends are inclusive. */
        assert_true(seen[0] && seen[1] && seen[2]);

        for (unsigned i = 0; i < 1000; i++) {
                usec_t v = backoff_random_between(&b, 5 * USEC_PER_MINUTE, 10 * USEC_PER_MINUTE);
                assert_true(v >= 5 * USEC_PER_MINUTE && v <= 10 * USEC_PER_MINUTE);
        }

        assert_int_equal(backoff_random_between(&b, 9, 9), 9);
        assert_int_equal(backoff_random_between(&b, 9, 3), 9);
        (void) backoff_random_between(&b, 0, UINT64_MAX); /* must not loop or trap */
}

/* ---- token bucket ---- */

static void test_bucket_burst_then_qps(_unused_ void **state) {
        struct token_bucket tb;
        usec_t wait = 0;

        token_bucket_init(&tb, 5, 10, T0);
        for (unsigned i = 0; i < 10; i++)
                assert_true(token_bucket_try_take(&tb, T0, NULL));

        assert_false(token_bucket_try_take(&tb, T0, &wait));
        assert_int_equal(wait, 200 * MSEC);
        assert_false(token_bucket_try_take(&tb, T0 + 200 * MSEC - 1, &wait));
        assert_int_equal(wait, 1);
        assert_true(token_bucket_try_take(&tb, T0 + 200 * MSEC, &wait));

        /* Polling every millisecond for 10 s yields exactly qps × 10 s. */
        unsigned taken = 0;
        for (usec_t t = T0 + 200 * MSEC + MSEC; t <= T0 + 10 * SEC + 200 * MSEC; t += MSEC)
                taken += token_bucket_try_take(&tb, t, NULL);
        assert_int_equal(taken, 50);

        /* A long idle stretch refills to burst, not beyond. */
        usec_t later = T0 + USEC_PER_HOUR;
        taken = 0;
        while (token_bucket_try_take(&tb, later, NULL))
                taken++;
        assert_int_equal(taken, 10);
}

static void test_current_step(_unused_ void **state) {
        struct backoff_config c = BACKOFF_CONFIG_CLIENT_GO;
        struct backoff b;
        usec_t t = 1000 * USEC_PER_SEC;

        c.jitter = 0;
        backoff_init(&b, &c, 1);
        assert_int_equal(backoff_current_step(&b, t), 800 * USEC_PER_MSEC); /* never failed */
        for (int i = 0; i < 3; i++)
                (void) backoff_next(&b, t, 0); /* 0.8, 1.6, 3.2 */
        assert_int_equal(backoff_current_step(&b, t), 6400 * USEC_PER_MSEC);
        for (int i = 0; i < 10; i++)
                (void) backoff_next(&b, t, 0);
        assert_int_equal(backoff_current_step(&b, t), 30 * USEC_PER_SEC); /* capped */
        /* After reset_after healthy, the step is back at initial, without another failure. */
        assert_int_equal(backoff_current_step(&b, t + c.reset_after + 1), 800 * USEC_PER_MSEC);
        assert_int_equal(backoff_current_step(&b, t + c.reset_after), 30 * USEC_PER_SEC);
}

static void test_bucket_reserve_queues(_unused_ void **state) {
        struct token_bucket tb;
        usec_t wait = 0;

        token_bucket_init(&tb, 5, 2, T0);
        assert_int_equal(token_bucket_reserve(&tb, T0), 0);
        assert_int_equal(token_bucket_reserve(&tb, T0), 0);
        assert_int_equal(token_bucket_reserve(&tb, T0), 200 * MSEC);
        assert_int_equal(token_bucket_reserve(&tb, T0), 400 * MSEC);
        assert_int_equal(token_bucket_reserve(&tb, T0), 600 * MSEC);
        assert_true(fabs(tb.tokens + 3) < 1e-9);

        /* A non-queueing caller waits behind every reservation. */
        assert_false(token_bucket_try_take(&tb, T0, &wait));
        assert_int_equal(wait, 800 * MSEC);

        /* Once the queue has drained, new reservations are timed from there. */
        assert_int_equal(token_bucket_reserve(&tb, T0 + 600 * MSEC), 200 * MSEC);
        assert_int_equal(token_bucket_reserve(&tb, T0 + 5 * SEC), 0);
}

static void test_bucket_set_rate(_unused_ void **state) {
        struct token_bucket tb;
        usec_t wait = 0;

        /* Shrinking the burst clamps the tokens held. */
        token_bucket_init(&tb, 5, 10, T0);
        token_bucket_set_rate(&tb, 1, 3, T0);
        assert_true(tb.tokens <= 3.0);
        for (unsigned i = 0; i < 3; i++)
                assert_true(token_bucket_try_take(&tb, T0, NULL));
        assert_false(token_bucket_try_take(&tb, T0, &wait));
        assert_int_equal(wait, 1 * SEC);

        /* Tokens earned before the change were earned at the old rate (1/s for 2 s)... */
        token_bucket_set_rate(&tb, 10, 50, T0 + 2 * SEC);
        assert_true(fabs(tb.tokens - 2.0) < 1e-9);
        /* ...and growing the burst does not mint tokens. */
        assert_true(token_bucket_try_take(&tb, T0 + 2 * SEC, NULL));
        assert_true(token_bucket_try_take(&tb, T0 + 2 * SEC, NULL));
        assert_false(token_bucket_try_take(&tb, T0 + 2 * SEC, &wait));
        assert_int_equal(wait, 100 * MSEC);

        /* Pending reservations survive a rate change. */
        token_bucket_init(&tb, 5, 1, T0);
        assert_int_equal(token_bucket_reserve(&tb, T0), 0);
        assert_int_equal(token_bucket_reserve(&tb, T0), 200 * MSEC);
        token_bucket_set_rate(&tb, 10, 5, T0);
        assert_false(token_bucket_try_take(&tb, T0, &wait));
        assert_int_equal(wait, 200 * MSEC); /* one owed + one wanted, at 10/s */
}

static void test_bucket_edges(_unused_ void **state) {
        struct token_bucket tb;
        usec_t wait = 0;

        /* Unlimited. */
        token_bucket_init(&tb, INFINITY, 1, T0);
        for (unsigned i = 0; i < 1000; i++)
                assert_true(token_bucket_try_take(&tb, T0, NULL));
        assert_int_equal(token_bucket_reserve(&tb, T0), 0);

        /* No refill: the burst, then never. */
        token_bucket_init(&tb, 0, 2, T0);
        assert_true(token_bucket_try_take(&tb, T0, NULL));
        assert_int_equal(token_bucket_reserve(&tb, T0), 0);
        assert_false(token_bucket_try_take(&tb, T0 + USEC_PER_HOUR, &wait));
        assert_int_equal(wait, USEC_INFINITY);
        assert_int_equal(token_bucket_reserve(&tb, T0 + USEC_PER_HOUR), USEC_INFINITY);

        /* A clock going backwards mints nothing. */
        token_bucket_init(&tb, 1, 1, T0);
        assert_true(token_bucket_try_take(&tb, T0, NULL));
        assert_false(token_bucket_try_take(&tb, T0 - 10 * SEC, &wait));
        assert_int_equal(wait, 1 * SEC);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_sequence_bounds_many_seeds),
                cmocka_unit_test(test_jitter_zero_exact),
                cmocka_unit_test(test_factor_and_cap),
                cmocka_unit_test(test_reset_after),
                cmocka_unit_test(test_retry_after),
                cmocka_unit_test(test_seeds),
                cmocka_unit_test(test_random),
                cmocka_unit_test(test_current_step),
                cmocka_unit_test(test_bucket_burst_then_qps),
                cmocka_unit_test(test_bucket_reserve_queues),
                cmocka_unit_test(test_bucket_set_rate),
                cmocka_unit_test(test_bucket_edges),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
