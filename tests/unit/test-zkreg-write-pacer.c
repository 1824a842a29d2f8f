/* SPDX-License-Identifier: MIT */
/* zkreg's write pacing (write-pacer.c): one token per ZooKeeper write request, each request up
 * to max_ops operations, a pass's open request closed by its flush. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "write-pacer.h"

#define MSEC USEC_PER_MSEC
#define SEC USEC_PER_SEC
#define T0 (1000 * SEC)

/* One dispatch pass at now with want writes ready: how many went (the rest wait for a token);
 * ret_wait the time to the next token when some did not. */
static unsigned pass(struct write_pacer *p, usec_t now, unsigned want, usec_t *ret_wait) {
        unsigned went = 0;
        usec_t wait = 0;

        while (went < want && write_pacer_take(p, now, &wait))
                went++;
        write_pacer_flush(p);
        if (ret_wait)
                *ret_wait = went < want ? wait : 0;
        return went;
}

/* The defaults: a session's 250 members after an expiry cost one token, 5,000 pods at start
 * twenty, all in the first pass (the burst is 50 requests). */
static void test_requests_not_operations(_unused_ void **state) {
        struct write_pacer p;

        write_pacer_init(&p, 50, WRITE_PACER_MAX_OPS_DEFAULT, T0);
        assert_int_equal(pass(&p, T0, 250, NULL), 250);
        assert_true(p.tb.tokens > 48.99 && p.tb.tokens < 49.01);

        write_pacer_init(&p, 50, WRITE_PACER_MAX_OPS_DEFAULT, T0);
        assert_int_equal(pass(&p, T0, 5000, NULL), 5000);
        assert_true(p.tb.tokens > 29.99 && p.tb.tokens < 30.01);
        /* 251 ops are two requests */
        write_pacer_init(&p, 50, WRITE_PACER_MAX_OPS_DEFAULT, T0);
        assert_int_equal(pass(&p, T0, 251, NULL), 251);
        assert_true(p.tb.tokens > 47.99 && p.tb.tokens < 48.01);
}

/* The burst spent on passes of one write each: the next token, 1/qps later, carries everything
 * that became ready meanwhile, up to max_ops. */
static void test_dry_bucket_coalesces(_unused_ void **state) {
        struct write_pacer p;
        usec_t wait = 0;

        write_pacer_init(&p, 50, 250, T0);
        for (unsigned i = 0; i < 50; i++)
                assert_int_equal(pass(&p, T0, 1, NULL), 1);
        assert_int_equal(pass(&p, T0, 400, &wait), 0);
        assert_int_equal(wait, 20 * MSEC);
        assert_int_equal(pass(&p, T0 + wait, 400, &wait), 250);
        assert_int_equal(wait, 20 * MSEC);
        assert_int_equal(pass(&p, T0 + 40 * MSEC, 150, NULL), 150);
}

/* The flush closes the request: a pass after it pays again, even with places left. */
static void test_flush_closes_the_request(_unused_ void **state) {
        struct write_pacer p;

        write_pacer_init(&p, 10, 250, T0);
        for (unsigned i = 0; i < 10; i++)
                assert_int_equal(pass(&p, T0, 3, NULL), 3);
        assert_int_equal(pass(&p, T0, 3, NULL), 0);
}

/* max_ops 1 paces operations (each its own request); 0 is taken as 1. */
static void test_one_op_per_request(_unused_ void **state) {
        struct write_pacer p;

        write_pacer_init(&p, 50, 1, T0);
        assert_int_equal(pass(&p, T0, 250, NULL), 50);
        write_pacer_init(&p, 50, 0, T0);
        assert_int_equal(p.max_ops, 1);
        assert_int_equal(pass(&p, T0, 250, NULL), 50);
}

/* Below 10 a second the burst is still 10 requests; a reload keeps the tokens and takes the
 * new request size at once, also for a request open in this pass. */
static void test_burst_and_reload(_unused_ void **state) {
        struct write_pacer p;
        usec_t wait = 0;

        write_pacer_init(&p, 1, 100, T0);
        assert_int_equal(pass(&p, T0, 2000, &wait), 1000);
        assert_int_equal(wait, 1 * SEC);

        write_pacer_init(&p, 50, 250, T0);
        assert_true(write_pacer_take(&p, T0, NULL));
        write_pacer_set(&p, 50, 10, T0);
        for (unsigned i = 0; i < 9; i++)
                assert_true(write_pacer_take(&p, T0, NULL));
        assert_int_equal(p.left, 0);
        assert_true(p.tb.tokens > 48.99 && p.tb.tokens < 49.01);
        write_pacer_set(&p, 5, 10, T0);
        assert_true(p.tb.tokens > 9.99 && p.tb.tokens < 10.01);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_requests_not_operations),
                cmocka_unit_test(test_dry_bucket_coalesces),
                cmocka_unit_test(test_flush_closes_the_request),
                cmocka_unit_test(test_one_op_per_request),
                cmocka_unit_test(test_burst_and_reload),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
