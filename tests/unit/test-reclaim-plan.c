/* SPDX-License-Identifier: MIT */
/* reclaim's pure decisions (plan.c) and the cgroup path rules (memcg.c) without any cgroup. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include <cmocka.h>

#include "memcg.h"
#include "plan.h"

#define MiB (UINT64_C(1) << 20)

static struct reclaim_level pct(unsigned p) {
        return (struct reclaim_level) { .is_percent = true, .percent = p };
}

static struct reclaim_level bytes(uint64_t b) {
        return (struct reclaim_level) { .bytes = b };
}

static struct reclaim_bounds bounds(uint64_t limit, unsigned high, unsigned target, uint64_t min_file, uint64_t step) {
        struct reclaim_bounds b;
        const char *reason = NULL;
        struct reclaim_level h = pct(high), t = pct(target);
        assert_int_equal(plan_bounds_resolve(&h, &t, min_file, step, limit, &b, &reason), 0);
        return b;
}

static struct memcg_sample sample(uint64_t usage, uint64_t file) {
        return (struct memcg_sample) { .limit = 64 * MiB, .usage = usage, .file = file, .anon = usage - file };
}

static void test_parse_level(_unused_ void **state) {
        struct reclaim_level l;
        const char *reason = NULL;

        assert_int_equal(plan_parse_level("90%", &l, &reason), 0);
        assert_true(l.is_percent);
        assert_int_equal(l.percent, 90);
        assert_int_equal(plan_parse_level("900M", &l, &reason), 0);
        assert_false(l.is_percent);
        assert_true(l.bytes == 900 * MiB);
        const char *bad[] = { "0%", "101%", "0", "lots", "", "-5M", "%", "50%%" };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                reason = NULL;
                assert_int_equal(plan_parse_level(bad[i], &l, &reason), -EINVAL);
                assert_non_null(reason);
        }
}

static void test_resolve(_unused_ void **state) {
        struct reclaim_bounds b;
        const char *reason = NULL;
        struct reclaim_level h = pct(90), t = pct(80), hb = bytes(40 * MiB), tb = bytes(50 * MiB);
        uint64_t v;

        b = bounds(64 * MiB, 75, 50, 4 * MiB, 32 * MiB);
        assert_true(b.high == 48 * MiB && b.target == 32 * MiB && b.headroom == 1 * MiB);
        /* No overflow for huge limits. */
        assert_int_equal(plan_level_resolve(&h, UINT64_C(1) << 62, &v), 0);
        assert_true(v > (UINT64_C(1) << 61) && v < (UINT64_C(1) << 62));
        /* Percentages of no limit cannot be resolved; sizes can. */
        assert_int_equal(plan_bounds_resolve(&h, &t, 0, 0, UINT64_MAX, &b, &reason), -ERANGE);
        assert_non_null(strstr(reason, "no memory limit"));
        assert_int_equal(plan_bounds_resolve(&tb, &hb, 0, 0, UINT64_MAX, &b, &reason), 0);
        assert_true(b.step == UINT64_MAX && b.high == 50 * MiB);
        /* target >= high, high > limit */
        assert_int_equal(plan_bounds_resolve(&hb, &tb, 0, 0, UINT64_MAX, &b, &reason), -EINVAL);
        assert_int_equal(plan_bounds_resolve(&tb, &hb, 0, 0, 45 * MiB, &b, &reason), -EINVAL);
        assert_non_null(strstr(reason, "above the cgroup's limit"));
}

static void test_plan_idle_and_step(_unused_ void **state) {
        struct reclaim_bounds b = bounds(64 * MiB, 75, 50, 4 * MiB, 8 * MiB);
        struct reclaim_step p;
        struct memcg_sample s = sample(40 * MiB, 36 * MiB);

        plan_step(&b, &s, false, &p);
        assert_int_equal(p.verdict, RECLAIM_IDLE);
        assert_false(p.partial);

        /* At high with mostly cache: a bounded step toward target, limit = usage - step. */
        s = sample(50 * MiB, 46 * MiB);
        plan_step(&b, &s, false, &p);
        assert_int_equal(p.verdict, RECLAIM_STEP);
        assert_true(p.goal == 32 * MiB);
        assert_true(p.amount == 8 * MiB);
        assert_true(p.new_limit == 42 * MiB);
        assert_false(p.last);

        /* The last step reaches the goal exactly. */
        s = sample(38 * MiB, 34 * MiB);
        plan_step(&b, &s, true, &p);
        assert_int_equal(p.verdict, RECLAIM_STEP);
        assert_true(p.amount == 6 * MiB && p.new_limit == 32 * MiB && p.last);

        /* In an episode, below the goal is done. */
        s = sample(31 * MiB, 27 * MiB);
        plan_step(&b, &s, true, &p);
        assert_int_equal(p.verdict, RECLAIM_DONE);
}

static void test_plan_never_below_the_floor(_unused_ void **state) {
        struct reclaim_bounds b = bounds(64 * MiB, 75, 50, 4 * MiB, 64 * MiB);
        struct reclaim_step p;

        /* 40 MiB anon: the floor is 40 + 4 + 1 = 45 MiB, above target: reclaim to the floor
         * only, and say the target is unreachable. */
        struct memcg_sample s = sample(50 * MiB, 10 * MiB);
        plan_step(&b, &s, false, &p);
        assert_int_equal(p.verdict, RECLAIM_STEP);
        assert_true(p.partial);
        assert_true(p.floor == 45 * MiB && p.goal == 45 * MiB);
        assert_true(p.new_limit == 45 * MiB && p.amount == 5 * MiB);
        assert_true(p.new_limit >= s.anon + b.min_file);

        /* 46 MiB anon: the floor (51) is above high: leave it alone. */
        s = sample(50 * MiB, 4 * MiB);
        plan_step(&b, &s, false, &p);
        assert_int_equal(p.verdict, RECLAIM_UNREACHABLE);
        assert_int_equal(p.amount, 0);

        /* Cache at or below min-file is never taken. */
        b = bounds(64 * MiB, 60, 10, 16 * MiB, 64 * MiB);
        s = sample(40 * MiB, 16 * MiB);
        plan_step(&b, &s, false, &p);
        assert_int_equal(p.verdict, RECLAIM_UNREACHABLE);

        /* Property: for every sample, a step never asks for more than the cache above
         * min-file and never lowers the limit below anon + min-file. */
        b = bounds(64 * MiB, 80, 40, 8 * MiB, 16 * MiB);
        for (uint64_t usage = 0; usage <= 64 * MiB; usage += MiB / 2)
                for (uint64_t file = 0; file <= usage; file += MiB / 2) {
                        s = sample(usage, file);
                        for (int ep = 0; ep < 2; ep++) {
                                plan_step(&b, &s, ep, &p);
                                if (p.verdict != RECLAIM_STEP)
                                        continue;
                                assert_true(p.amount > 0);
                                assert_true(p.amount <= b.step);
                                assert_true(file > b.min_file && p.amount <= file - b.min_file);
                                assert_true(p.new_limit >= s.anon + MIN(file, b.min_file) + b.headroom);
                                assert_true(p.new_limit >= b.target);
                                assert_true(p.new_limit < b.high || ep);
                        }
                }
}

static void test_path_normalize(_unused_ void **state) {
        const struct {
                const char *in, *out;
        } good[] = {
                { "/", "/" }, { "a", "/a" }, { "//a//b/", "/a/b" }, { "/kubepods/burstable/podx", "/kubepods/burstable/podx" },
                { "/a.b/..c", "/a.b/..c" },
        };
        for (size_t i = 0; i < ELEMENTSOF(good); i++) {
                char *p = NULL;
                assert_int_equal(memcg_path_normalize(good[i].in, &p), 0);
                assert_string_equal(p, good[i].out);
                free(p);
        }
        const char *bad[] = { "", "/a/../b", "..", "/./a" };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                char *p = NULL;
                assert_int_equal(memcg_path_normalize(bad[i], &p), -EINVAL);
                assert_null(p);
        }
}

static void test_pod_dir(_unused_ void **state) {
        const char *uid = "3f2a1c9e-0b1d-4c6e-9a7b-000000000001";
        assert_true(memcg_is_pod_dir("pod3f2a1c9e-0b1d-4c6e-9a7b-000000000001", uid));
        assert_true(memcg_is_pod_dir("kubepods-burstable-pod3f2a1c9e_0b1d_4c6e_9a7b_000000000001.slice", uid));
        assert_true(memcg_is_pod_dir("kubepods-pod3f2a1c9e_0b1d_4c6e_9a7b_000000000001.slice", uid));
        assert_true(memcg_is_pod_dir("pod3f2a1c9e_0b1d_4c6e_9a7b_000000000001.slice", uid));
        assert_false(memcg_is_pod_dir("pod3f2a1c9e-0b1d-4c6e-9a7b-0000000000012", uid));
        assert_false(memcg_is_pod_dir("xpod3f2a1c9e_0b1d_4c6e_9a7b_000000000001.slice", uid));
        assert_false(memcg_is_pod_dir("pod3f2a1c9e-0b1d-4c6e-9a7b-000000000001.slice", uid));
        assert_false(memcg_is_pod_dir("pod", ""));
}

static void test_leftover_action(_unused_ void **state) {
        /* Only a confirmed ENOENT of the cgroup, or the original (or more) in force, lets a record
         * go without a restore; any other failure keeps it. */
        assert_int_equal(plan_leftover_action(-ENOENT, 0, 0, 64 * MiB, 0, 4096), LEFTOVER_FORGET);
        assert_int_equal(plan_leftover_action(-EACCES, 0, 0, 64 * MiB, 0, 4096), LEFTOVER_KEEP);
        assert_int_equal(plan_leftover_action(-ENOMEDIUM, 0, 0, 64 * MiB, 0, 4096), LEFTOVER_KEEP);
        assert_int_equal(plan_leftover_action(-EIO, 0, 0, 64 * MiB, 0, 4096), LEFTOVER_KEEP);
        assert_int_equal(plan_leftover_action(0, -EIO, 0, 64 * MiB, 0, 4096), LEFTOVER_KEEP);
        assert_int_equal(plan_leftover_action(0, -ENOENT, 0, 64 * MiB, 0, 4096), LEFTOVER_KEEP);
        assert_int_equal(plan_leftover_action(0, 0, 40 * MiB, 64 * MiB, 0, 4096), LEFTOVER_RESTORE);
        assert_int_equal(plan_leftover_action(0, 0, 40 * MiB, UINT64_MAX, 0, 4096), LEFTOVER_RESTORE);
        assert_int_equal(plan_leftover_action(0, 0, 64 * MiB, 64 * MiB, 0, 4096), LEFTOVER_FORGET);
        assert_int_equal(plan_leftover_action(0, 0, 80 * MiB, 64 * MiB, 0, 4096), LEFTOVER_FORGET);
        assert_int_equal(plan_leftover_action(0, 0, UINT64_MAX, UINT64_MAX, 0, 4096), LEFTOVER_FORGET);
        assert_int_equal(plan_leftover_action(0, 0, 40 * MiB, 0, 0, 4096), LEFTOVER_KEEP);
        /* With the value we wrote known: restored only if it is still in force (page-rounded). */
        assert_int_equal(plan_leftover_action(0, 0, 40 * MiB, 64 * MiB, 40 * MiB + 100, 4096), LEFTOVER_RESTORE);
        assert_int_equal(plan_leftover_action(0, 0, 44 * MiB, 64 * MiB, 40 * MiB, 4096), LEFTOVER_NOT_OURS);
        assert_int_equal(plan_leftover_action(0, 0, 64 * MiB, 64 * MiB, 40 * MiB, 4096), LEFTOVER_FORGET);
        assert_int_equal(plan_leftover_action(-ENOENT, 0, 0, 64 * MiB, 40 * MiB, 4096), LEFTOVER_FORGET);
        assert_int_equal(plan_leftover_action(0, -EIO, 0, 64 * MiB, 40 * MiB, 4096), LEFTOVER_KEEP);
        assert_string_equal(plan_leftover_action_to_string(LEFTOVER_KEEP), "keep");
        assert_string_equal(plan_leftover_action_to_string(LEFTOVER_NOT_OURS), "not-ours");
        assert_null(plan_leftover_action_to_string(_LEFTOVER_ACTION_MAX));
}

static void test_record_never_takes_the_lowered_limit(_unused_ void **state) {
        /* A failed restore leaves our 40M in force: it is not an operator's change... */
        assert_false(plan_limit_is_new_original(true, 64 * MiB, 40 * MiB));
        assert_false(plan_limit_is_new_original(true, 64 * MiB, 80 * MiB));
        /* ...and never recorded over the original, whoever asks. */
        assert_false(plan_record_may_write(true, 64 * MiB, 40 * MiB));
        assert_true(plan_record_may_write(true, 64 * MiB, 64 * MiB));
        assert_true(plan_record_may_write(true, 64 * MiB, 80 * MiB));
        assert_false(plan_record_may_write(false, 64 * MiB, 0));
        /* With the original back, a different limit is the operator's: the new original. */
        assert_true(plan_limit_is_new_original(false, 64 * MiB, 40 * MiB));
        assert_true(plan_record_may_write(false, 64 * MiB, 40 * MiB));
        assert_false(plan_limit_is_new_original(false, 64 * MiB, 64 * MiB));
        /* Nothing recorded yet: nothing to replace (the first step records). */
        assert_false(plan_limit_is_new_original(false, 0, 40 * MiB));
        assert_true(plan_record_may_write(false, 0, 40 * MiB));
        assert_true(plan_record_may_write(true, 0, 40 * MiB));
}

static void test_throttle_wanted(_unused_ void **state) {
        /* 64M limit, high 90% (57.6M), min-file 16M, headroom 1M. */
        struct reclaim_bounds b = bounds(64 * MiB, 90, 70, 16 * MiB, 32 * MiB);
        struct memcg_sample s = { .limit = 64 * MiB, .usage = 60 * MiB, .file = 59 * MiB, .anon = MiB };
        assert_true(plan_throttle_wanted(&b, &s, false));
        assert_true(plan_throttle_wanted(&b, &s, true));
        /* All of min-file counts, not what the kernel left of the cache at the cap. */
        s = (struct memcg_sample) { .limit = 64 * MiB, .usage = 42 * MiB, .file = MiB, .anon = 41 * MiB };
        assert_false(plan_throttle_wanted(&b, &s, true));
        assert_false(plan_throttle_wanted(&b, &s, false));
        /* In the headroom below high: stays if in force, does not come back otherwise. */
        s.anon = 40 * MiB; /* 40 + 16 + 1 = 57M < 57.6M, but 58M is not */
        assert_true(plan_throttle_wanted(&b, &s, true));
        assert_false(plan_throttle_wanted(&b, &s, false));
        s.anon = 39 * MiB;
        assert_true(plan_throttle_wanted(&b, &s, false));
        /* No overflow for an unlimited cgroup with sizes. */
        struct reclaim_level h = bytes(40 * MiB), t = bytes(24 * MiB);
        const char *reason = NULL;
        assert_int_equal(plan_bounds_resolve(&h, &t, UINT64_MAX, 0, UINT64_MAX, &b, &reason), 0);
        s.anon = UINT64_MAX - 1;
        assert_false(plan_throttle_wanted(&b, &s, true));
}

static void test_throttle_level(_unused_ void **state) {
        /* 64M limit, high 90% (57.6M), min-file 16M, headroom 1M: halfway (60.8M) is above the
         * limit - min-file + headroom (49M): the throttle a byte under halfway, the backstop at it. */
        struct reclaim_bounds b = bounds(64 * MiB, 90, 70, 16 * MiB, 0);
        uint64_t halfway = b.high + (64 * MiB - b.high) / 2;
        assert_true(plan_throttle_level(&b, MEMCG_V1) == halfway - 1);
        assert_true(plan_backstop_level(&b) == halfway);
        assert_true(plan_throttle_level(&b, MEMCG_V2) == b.high);
        /* high 70% (44.8M), min-file 4M: halfway (54.4M) would leave anonymous memory less than
         * the limit - min-file (60M); the throttle is at 61M, the backstop a byte over it. */
        b = bounds(64 * MiB, 70, 50, 4 * MiB, 0);
        assert_true(plan_throttle_level(&b, MEMCG_V1) == 61 * MiB);
        assert_true(plan_backstop_level(&b) == 61 * MiB + 1);
        /* min-file within the headroom: anonymous memory may need the whole limit, no v1
         * throttle; the backstop stays halfway. */
        b = bounds(64 * MiB, 70, 50, MiB, 0);
        assert_true(plan_throttle_level(&b, MEMCG_V1) == 0);
        assert_true(plan_backstop_level(&b) == b.high + (64 * MiB - b.high) / 2);
        b = bounds(64 * MiB, 70, 50, 0, 0);
        assert_true(plan_throttle_level(&b, MEMCG_V1) == 0);
        /* min-file above the limit: halfway. */
        b = bounds(64 * MiB, 70, 50, 128 * MiB, 0);
        assert_true(plan_throttle_level(&b, MEMCG_V1) == b.high + (64 * MiB - b.high) / 2 - 1);
        /* A big limit: the headroom is 1/64 of it. */
        b = bounds(1024 * MiB, 90, 80, 64 * MiB, 0);
        assert_true(plan_throttle_level(&b, MEMCG_V1) == 1024 * MiB - 64 * MiB + 16 * MiB);
        /* No limit (sizes), or high at the limit: nothing to lower on v1; v2 still throttles. */
        struct reclaim_level h = bytes(40 * MiB), t = bytes(24 * MiB);
        const char *reason = NULL;
        assert_int_equal(plan_bounds_resolve(&h, &t, 16 * MiB, 0, UINT64_MAX, &b, &reason), 0);
        assert_true(plan_throttle_level(&b, MEMCG_V1) == 0 && plan_backstop_level(&b) == 0);
        assert_true(plan_throttle_level(&b, MEMCG_V2) == 40 * MiB);
        assert_int_equal(plan_bounds_resolve(&h, &t, 16 * MiB, 0, 40 * MiB, &b, &reason), 0);
        assert_true(plan_throttle_level(&b, MEMCG_V1) == 0 && plan_backstop_level(&b) == 0);
}

static void test_throttle_value(_unused_ void **state) {
        /* Usage under the level: the level, in whole pages. */
        assert_true(plan_throttle_value(57 * MiB + 123, 40 * MiB, MiB, 4096) == 57 * MiB);
        /* Usage at or past it (a late wake-up, or an episode under way): where usage is, plus the
         * headroom, rounded up to a page — never a write that reclaims. */
        assert_true(plan_throttle_value(57 * MiB, 57 * MiB, MiB, 4096) == 58 * MiB);
        assert_true(plan_throttle_value(57 * MiB, 60 * MiB + 1, MiB, 4096) == 61 * MiB + 4096);
        assert_true(plan_throttle_value(57 * MiB, 57 * MiB - 1, MiB, 4096) == 57 * MiB);
        /* Saturates instead of wrapping. */
        assert_true(plan_throttle_value(57 * MiB, UINT64_MAX - 10, MiB, 4096) == UINT64_MAX);
}

static void test_inflow_rate(_unused_ void **state) {
        /* 10 MiB more in 100 ms: 100 MiB/s. */
        assert_true(plan_inflow_rate(40 * MiB, 50 * MiB, 100000) == 100 * MiB);
        /* Usage that fell (reclaimed) or stayed, or no time: no inflow. */
        assert_true(plan_inflow_rate(50 * MiB, 40 * MiB, 100000) == 0);
        assert_true(plan_inflow_rate(50 * MiB, 50 * MiB, 100000) == 0);
        assert_true(plan_inflow_rate(40 * MiB, 50 * MiB, 0) == 0);
        assert_true(plan_inflow_rate(0, UINT64_MAX, 1) == UINT64_MAX);
}

static void test_settle_delay(_unused_ void **state) {
        const uint64_t min = 5000, max = 100000;
        /* 100 MiB/s with 12.5 MiB to high: 125 ms to high, looked at after a quarter of it. */
        assert_true(plan_settle_delay(60 * MiB, 47 * MiB + 512 * 1024, 100 * MiB, min, max) == 31250);
        /* A slow writer, none, or high reached already: the settle delay as before. */
        assert_true(plan_settle_delay(57 * MiB, 45 * MiB, MiB, min, max) == max);
        assert_true(plan_settle_delay(57 * MiB, 45 * MiB, 0, min, max) == max);
        assert_true(plan_settle_delay(57 * MiB, 57 * MiB, 100 * MiB, min, max) == max);
        /* A writer at dd speed on a fast disk (3 GiB/s): never sooner than min. */
        assert_true(plan_settle_delay(57 * MiB, 45 * MiB, 3072 * MiB, min, max) == min);
        assert_true(plan_settle_delay(57 * MiB, 45 * MiB, UINT64_MAX, min, max) == min);
}

static void test_limit_is_ours(_unused_ void **state) {
        assert_true(plan_limit_as_kernel_keeps(40 * MiB + 4095, 4096) == 40 * MiB);
        assert_true(plan_limit_as_kernel_keeps(40 * MiB, 4096) == 40 * MiB);
        assert_true(plan_limit_as_kernel_keeps(UINT64_MAX, 4096) == UINT64_MAX);
        assert_true(plan_limit_is_ours(40 * MiB, 64 * MiB, 40 * MiB + 123, 4096));
        assert_false(plan_limit_is_ours(40 * MiB + 4096, 64 * MiB, 40 * MiB, 4096)); /* someone else's */
        assert_false(plan_limit_is_ours(64 * MiB, 64 * MiB, 40 * MiB, 4096));        /* the original is back */
        assert_false(plan_limit_is_ours(80 * MiB, 64 * MiB, 0, 4096));
        assert_true(plan_limit_is_ours(10 * MiB, 64 * MiB, 0, 4096)); /* unknown: below the original is ours */
        assert_true(plan_limit_is_ours(40 * MiB, UINT64_MAX, 40 * MiB, 4096));
}

static void test_step_errors(_unused_ void **state) {
        /* Transient: the next wake-up tries again. Hard: only after a backoff. */
        assert_true(plan_step_error_is_transient(-EBUSY));
        assert_true(plan_step_error_is_transient(-EAGAIN));
        const int hard[] = { -EROFS, -EACCES, -EPERM, -ENOENT, -EINVAL, -EIO, -ENOMEM, -EOPNOTSUPP };
        for (size_t i = 0; i < ELEMENTSOF(hard); i++)
                assert_false(plan_step_error_is_transient(hard[i]));
}

/* An episode that ended short of its goal (in_episode true for the next look) continues toward
 * target below high: usage is brought to target, not left just under high. */
static void test_plan_unfinished_continues_below_high(_unused_ void **state) {
        struct reclaim_bounds b = bounds(64 * MiB, 75, 50, 4 * MiB, 64 * MiB);
        struct reclaim_step p;
        struct memcg_sample s = sample(44 * MiB, 40 * MiB);

        plan_step(&b, &s, false, &p);
        assert_int_equal(p.verdict, RECLAIM_IDLE);
        plan_step(&b, &s, true, &p);
        assert_int_equal(p.verdict, RECLAIM_STEP);
        assert_true(p.amount == 12 * MiB && p.new_limit == 32 * MiB && p.last);
        /* At the goal: done (the look ends the unfinished state). */
        s = sample(32 * MiB, 28 * MiB);
        plan_step(&b, &s, true, &p);
        assert_int_equal(p.verdict, RECLAIM_DONE);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_parse_level),
                cmocka_unit_test(test_resolve),
                cmocka_unit_test(test_plan_idle_and_step),
                cmocka_unit_test(test_plan_never_below_the_floor),
                cmocka_unit_test(test_plan_unfinished_continues_below_high),
                cmocka_unit_test(test_path_normalize),
                cmocka_unit_test(test_pod_dir),
                cmocka_unit_test(test_leftover_action),
                cmocka_unit_test(test_record_never_takes_the_lowered_limit),
                cmocka_unit_test(test_step_errors),
                cmocka_unit_test(test_limit_is_ours),
                cmocka_unit_test(test_throttle_wanted),
                cmocka_unit_test(test_throttle_level),
                cmocka_unit_test(test_throttle_value),
                cmocka_unit_test(test_inflow_rate),
                cmocka_unit_test(test_settle_delay),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
