/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/resource.h>

#include <cmocka.h>

#include "fd-limit.h"
#include "macro.h"

static uint64_t fds_held(const struct connection_caps *c) {
        return (uint64_t) FDS_PER_CONNECTION * (c->api + c->workload + 2 * (uint64_t) c->csi);
}

static void test_defaults_kept_when_the_limit_carries_them(_unused_ void **state) {
        static const uint64_t limits[] = { 65536, 524288, 1048576, UINT64_MAX };

        for (size_t i = 0; i < ELEMENTSOF(limits); i++) {
                struct connection_caps c;
                fd_limit_connection_caps(limits[i], &c);
                assert_false(c.scaled);
                assert_int_equal(c.api, CONNECTION_CAP_API);
                assert_int_equal(c.workload, CONNECTION_CAP_WORKLOAD);
                assert_int_equal(c.csi, CONNECTION_CAP_CSI);
                assert_true(fds_held(&c) + c.reserve <= limits[i]);
        }
}

/* Every limit from 64 to 64 Ki: the caps never hold more than what the reserve leaves, they
 * never shrink as the limit grows, and each keeps the same share of its default. */
static void test_scaled_caps_fit_beside_the_reserve(_unused_ void **state) {
        struct connection_caps prev = {};

        for (uint64_t limit = 64; limit <= 65536; limit++) {
                struct connection_caps c;
                fd_limit_connection_caps(limit, &c);
                assert_true(c.reserve >= MIN(limit / 2, (uint64_t) 192));
                assert_true(c.reserve >= limit / 8);
                if (c.api > 8 && c.csi > 2)
                        assert_true(fds_held(&c) + c.reserve <= limit);
                assert_true(c.api >= prev.api && c.workload >= prev.workload && c.csi >= prev.csi);
                assert_true(c.api >= 8 && c.workload >= 8 && c.csi >= 2);
                assert_true(c.api <= CONNECTION_CAP_API && c.csi <= CONNECTION_CAP_CSI);
                assert_int_equal(c.scaled, c.api < CONNECTION_CAP_API);
                prev = c;
        }
}

static void test_the_shipped_and_the_default_limits(_unused_ void **state) {
        struct connection_caps c;

        /* systemd's default soft limit, had nothing raised it: a fifth of the defaults. */
        fd_limit_connection_caps(1024, &c);
        assert_true(c.scaled);
        assert_int_equal(c.reserve, 192);
        assert_int_equal(c.api, 1000 * 832 / 4064);
        assert_int_equal(c.workload, c.api);
        assert_int_equal(c.csi, 3);
        /* A tiny limit: half of it kept, the floors given. */
        fd_limit_connection_caps(256, &c);
        assert_int_equal(c.reserve, 128);
        assert_int_equal(c.api, 1000 * 128 / 4064);
        assert_int_equal(c.csi, 2);
}

static void test_raise_reaches_the_hard_limit(_unused_ void **state) {
        struct rlimit saved, rl;
        uint64_t before, after;

        assert_int_equal(getrlimit(RLIMIT_NOFILE, &saved), 0);
        if (saved.rlim_max < 512)
                skip();
        rl = (struct rlimit) { .rlim_cur = 256, .rlim_max = saved.rlim_max };
        assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
        assert_int_equal(fd_limit_raise(&before, &after), 0);
        assert_int_equal(before, 256);
        assert_int_equal(after, saved.rlim_max);
        assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
        assert_int_equal(rl.rlim_cur, saved.rlim_max);
        /* Already there: nothing to do. */
        assert_int_equal(fd_limit_raise(&before, &after), 0);
        assert_int_equal(before, after);
        assert_int_equal(setrlimit(RLIMIT_NOFILE, &saved), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_defaults_kept_when_the_limit_carries_them),
                cmocka_unit_test(test_scaled_caps_fit_beside_the_reserve),
                cmocka_unit_test(test_the_shipped_and_the_default_limits),
                cmocka_unit_test(test_raise_reaches_the_hard_limit),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
