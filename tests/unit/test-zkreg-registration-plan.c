/* SPDX-License-Identifier: MIT */
/* zkreg's registration plan (reg-plan.c) without ZooKeeper: the next operation and the
 * state shown for what a registration wants and knows, the check after a lost create, flap
 * damping, the parents zkreg may create. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include <cmocka.h>

#include "reg-plan.h"
#include "strv.h"

#define ALIVE "{\"status\":\"ALIVE\"}"
#define STOPPING "{\"status\":\"STOPPING\"}"
#define OLD "{\"status\":\"ALIVE\",\"shard\":1}"
#define PARENT "/discovery/web"
#define MEMBER PARENT "/member_0000000001"
#define NOW (100 * USEC_PER_SEC)

/* Connected, wanted, nothing known yet. */
static struct reg_facts wanted(void) {
        return (struct reg_facts) {
                .goal = REG_GOAL_ALIVE,
                .alive = ALIVE,
                .stopping = STOPPING,
                .parent = PARENT,
                .connected = true,
                .state = REG_PENDING,
                .now = NOW,
        };
}

/* Our member holds the ALIVE data. */
static struct reg_facts registered(void) {
        struct reg_facts f = wanted();
        f.znode = MEMBER;
        f.written = ALIVE;
        f.state = REG_REGISTERED;
        return f;
}

static struct reg_next next_of(const struct reg_facts *f) {
        struct reg_next n;
        reg_plan_next(f, &n);
        return n;
}

static enum reg_state state_of(const struct reg_facts *f, enum reg_waiting *ret_waiting) {
        enum reg_waiting w;
        enum reg_state s;
        reg_plan_state(f, &s, &w);
        if (ret_waiting)
                *ret_waiting = w;
        return s;
}

static void test_tables(_unused_ void **state) {
        assert_string_equal(reg_plan_state_to_string(REG_UNREADY), "unready");
        assert_string_equal(reg_plan_state_to_string(REG_DEREGISTERING), "deregistering");
        assert_null(reg_plan_state_to_string(_REG_STATE_MAX));
        assert_null(reg_plan_state_to_string(_REG_STATE_INVALID));
        for (int i = 0; i < _REG_STATE_MAX; i++)
                assert_non_null(reg_plan_state_to_string(i));
        for (int i = 0; i < _REG_ACTION_MAX; i++)
                assert_non_null(reg_plan_action_to_string(i));
        for (int i = 0; i < _REG_GOAL_MAX; i++)
                assert_non_null(reg_plan_goal_to_string(i));
        for (int i = 0; i < _REG_OP_MAX; i++)
                assert_non_null(reg_plan_op_to_string(i));
        for (int i = 0; i < _REG_VERDICT_MAX; i++)
                assert_non_null(reg_plan_verdict_to_string(i));
        assert_null(reg_plan_action_to_string(_REG_ACTION_MAX));
}

static void test_create_then_registered(_unused_ void **state) {
        struct reg_facts f = wanted();
        struct reg_next n = next_of(&f);
        enum reg_waiting w;

        assert_int_equal(n.action, REG_ACTION_CREATE);
        assert_true(n.write);
        assert_false(n.drain_over);
        assert_false(reg_plan_urgent(&f));
        assert_int_equal(state_of(&f, NULL), REG_PENDING);
        /* in flight: registering, and nothing more to do */
        f.inflight = REG_OP_CREATE;
        assert_int_equal(state_of(&f, NULL), REG_REGISTERING);
        assert_int_equal(next_of(&f).action, REG_ACTION_NONE);
        /* done: in sync */
        f = registered();
        f.state = REG_REGISTERING;
        n = next_of(&f);
        assert_int_equal(n.action, REG_ACTION_NONE);
        assert_int_equal(n.wake, 0);
        assert_int_equal(state_of(&f, &w), REG_REGISTERED);
        assert_int_equal(w, REG_WAITING_CLEAR);
}

static void test_update_stays_registered(_unused_ void **state) {
        struct reg_facts f = registered();

        /* the data changed (an endpoint, a shard): rewritten in place, still registered */
        f.written = OLD;
        assert_int_equal(next_of(&f).action, REG_ACTION_SET);
        assert_true(next_of(&f).write);
        assert_false(reg_plan_urgent(&f));
        assert_int_equal(state_of(&f, NULL), REG_REGISTERED);
        f.inflight = REG_OP_SET;
        assert_int_equal(state_of(&f, NULL), REG_REGISTERED);
        /* a rewrite of a member not yet shown as registered is registering */
        f.state = REG_PENDING;
        assert_int_equal(state_of(&f, NULL), REG_REGISTERING);
        f.inflight = REG_OP_NONE;
        assert_int_equal(state_of(&f, NULL), REG_PENDING);
}

static void test_delete_when_unwanted_or_moved(_unused_ void **state) {
        struct reg_facts f = registered();

        f.goal = REG_GOAL_NONE;
        assert_int_equal(next_of(&f).action, REG_ACTION_DELETE);
        assert_true(next_of(&f).write);
        assert_true(reg_plan_urgent(&f));
        assert_int_equal(state_of(&f, NULL), REG_PENDING);
        f.inflight = REG_OP_DELETE;
        assert_int_equal(state_of(&f, NULL), REG_DEREGISTERING);
        /* deleted: nothing left, nothing wanted */
        f = registered();
        f.goal = REG_GOAL_NONE;
        f.znode = f.written = NULL;
        assert_int_equal(next_of(&f).action, REG_ACTION_NONE);
        assert_int_equal(state_of(&f, NULL), REG_UNREADY);

        /* a changed path: the old member goes first (whole segments: /discovery/webx is not under
         * /discovery/web) */
        f = registered();
        f.parent = "/discovery/we";
        assert_int_equal(next_of(&f).action, REG_ACTION_DELETE);
        assert_true(reg_plan_urgent(&f));
        f.parent = PARENT "/x";
        assert_int_equal(next_of(&f).action, REG_ACTION_DELETE);
        f.znode = "/discovery/webx/member_0000000001";
        f.parent = PARENT;
        assert_int_equal(next_of(&f).action, REG_ACTION_DELETE);
}

static void test_lost_create_is_checked_first(_unused_ void **state) {
        struct reg_facts f = wanted();

        f.lost_create = true;
        assert_int_equal(next_of(&f).action, REG_ACTION_CHECK);
        assert_false(next_of(&f).write); /* reads take no write token */
        assert_int_equal(state_of(&f, NULL), REG_PENDING);
        f.inflight = REG_OP_CHECK;
        assert_int_equal(state_of(&f, NULL), REG_REGISTERING);
        /* even when nothing is wanted any more: the member may exist */
        f = wanted();
        f.lost_create = true;
        f.goal = REG_GOAL_NONE;
        assert_int_equal(next_of(&f).action, REG_ACTION_CHECK);
        assert_int_equal(state_of(&f, NULL), REG_PENDING);
        /* and a pod that is gone is kept until it is known */
        f.pod_gone = true;
        assert_int_equal(next_of(&f).action, REG_ACTION_CHECK);
        f.lost_create = false;
        assert_int_equal(next_of(&f).action, REG_ACTION_FREE);
        f.znode = MEMBER;
        assert_int_equal(next_of(&f).action, REG_ACTION_DELETE);
}

static void test_waiting_for_the_session(_unused_ void **state) {
        struct reg_facts f = wanted();
        enum reg_waiting w;
        struct reg_next n;

        f.connected = false;
        n = next_of(&f);
        assert_int_equal(n.action, REG_ACTION_WAIT_SESSION);
        assert_int_equal(n.waiting, REG_WAITING_SESSION);
        assert_int_equal(state_of(&f, &w), REG_PENDING);
        assert_int_equal(w, REG_WAITING_KEEP);
        /* our member in sync: no note from the step, but not "registered" either */
        f = registered();
        f.connected = false;
        n = next_of(&f);
        assert_int_equal(n.action, REG_ACTION_WAIT_SESSION);
        assert_int_equal(n.waiting, REG_WAITING_KEEP);
        assert_int_equal(state_of(&f, &w), REG_PENDING);
        assert_int_equal(w, REG_WAITING_SUSPENDED);
        /* a note never hides an error */
        f.has_error = true;
        assert_int_equal(state_of(&f, &w), REG_PENDING);
        assert_int_equal(w, REG_WAITING_KEEP);
        /* a lost create waits for the check, quietly */
        f = wanted();
        f.connected = false;
        f.lost_create = true;
        assert_int_equal(next_of(&f).waiting, REG_WAITING_KEEP);
        /* nothing wanted, nothing there: nothing waits for the session, so a note set before
         * (the pod turned unready during the outage, its member went with the session) goes and
         * the reason under it (not Ready) shows */
        f = wanted();
        f.connected = false;
        f.goal = REG_GOAL_NONE;
        assert_int_equal(next_of(&f).waiting, REG_WAITING_CLEAR);
        assert_int_equal(state_of(&f, NULL), REG_UNREADY);
        /* unready with our member still there: it waits for the session to delete it */
        f.znode = MEMBER;
        f.written = ALIVE;
        assert_int_equal(next_of(&f).waiting, REG_WAITING_SESSION);
        /* the session is back: the delete goes out and no note is left over */
        f.connected = true;
        n = next_of(&f);
        assert_int_equal(n.action, REG_ACTION_DELETE);
        assert_int_equal(n.waiting, REG_WAITING_CLEAR);
        f.znode = NULL;
        f.written = NULL;
        n = next_of(&f);
        assert_int_equal(n.action, REG_ACTION_NONE);
        assert_int_equal(n.waiting, REG_WAITING_CLEAR);
}

static void test_backoff_damping_and_shutdown(_unused_ void **state) {
        struct reg_facts f = wanted();
        struct reg_next n;

        f.not_before = NOW + 5 * USEC_PER_SEC;
        n = next_of(&f);
        assert_int_equal(n.action, REG_ACTION_WAIT);
        assert_true(n.wake == NOW + 5 * USEC_PER_SEC);
        f.now = f.not_before;
        assert_int_equal(next_of(&f).action, REG_ACTION_CREATE);

        /* shutting down: damping (not_before) is skipped, an error backoff is not; deletes take
         * no token */
        f = registered();
        f.goal = REG_GOAL_NONE;
        f.shutting_down = true;
        f.not_before = NOW + 5 * USEC_PER_SEC;
        n = next_of(&f);
        assert_int_equal(n.action, REG_ACTION_DELETE);
        assert_false(n.write);
        f.error_until = NOW + USEC_PER_SEC;
        n = next_of(&f);
        assert_int_equal(n.action, REG_ACTION_WAIT);
        assert_true(n.wake == NOW + USEC_PER_SEC);
}

static void test_drain(_unused_ void **state) {
        struct reg_facts f = registered();
        enum reg_waiting w;
        struct reg_next n;

        /* marked STOPPING: the member is rewritten, urgently */
        f.goal = REG_GOAL_STOPPING;
        f.drain_until = NOW + 10 * USEC_PER_SEC;
        n = next_of(&f);
        assert_int_equal(n.action, REG_ACTION_SET);
        assert_false(n.drain_over);
        assert_true(reg_plan_urgent(&f));
        f.inflight = REG_OP_SET;
        assert_int_equal(state_of(&f, NULL), REG_STOPPING);
        /* STOPPING written: wait for the drain delay */
        f.inflight = REG_OP_NONE;
        f.written = STOPPING;
        n = next_of(&f);
        assert_int_equal(n.action, REG_ACTION_NONE);
        assert_true(n.wake == f.drain_until);
        assert_int_equal(state_of(&f, &w), REG_STOPPING);
        /* then the member goes */
        f.now = f.drain_until;
        n = next_of(&f);
        assert_true(n.drain_over);
        assert_int_equal(n.action, REG_ACTION_DELETE);
        /* the delay passed before STOPPING was written: written first */
        f.written = ALIVE;
        n = next_of(&f);
        assert_false(n.drain_over);
        assert_int_equal(n.action, REG_ACTION_SET);
        /* its member went (an expired session): the drain is over, nothing is made again */
        f = wanted();
        f.goal = REG_GOAL_STOPPING;
        f.drain_until = NOW + 10 * USEC_PER_SEC;
        n = next_of(&f);
        assert_true(n.drain_over);
        assert_int_equal(n.action, REG_ACTION_NONE);
        f.lost_create = true;
        assert_false(next_of(&f).drain_over);
}

static void test_check_adopts_the_first_and_deletes_the_rest(_unused_ void **state) {
        const int64_t us = 0x1234, them = 0x99;
        const struct reg_check_member m[] = {
                { REG_READ_OK, them, "10.0.0.1", 8080, false },  /* another session's */
                { REG_READ_OK, us, "10.0.0.2", 8080, false },    /* another endpoint */
                { REG_READ_OK, us, "10.0.0.1", 8081, false },    /* another port */
                { REG_READ_OK, us, NULL, 0, false },             /* not member data */
                { REG_READ_GONE, 0, NULL, 0, false },            /* deleted since the list */
                { REG_READ_OK, us, "10.0.0.1", 8080, true },     /* another registration's */
                { REG_READ_OK, us, "10.0.0.1", 8080, false },    /* ours */
                { REG_READ_OK, us, "10.0.0.1", 8080, false },    /* a second one of ours */
        };
        const enum reg_verdict want[] = {
                REG_VERDICT_IGNORE, REG_VERDICT_IGNORE, REG_VERDICT_IGNORE, REG_VERDICT_IGNORE,
                REG_VERDICT_IGNORE, REG_VERDICT_CLAIMED, REG_VERDICT_ADOPT, REG_VERDICT_DELETE,
        };
        enum reg_verdict v[ELEMENTSOF(m)];

        assert_true(reg_plan_check(m, ELEMENTSOF(m), us, "10.0.0.1", 8080, v));
        for (size_t i = 0; i < ELEMENTSOF(m); i++)
                if (v[i] != want[i])
                        fail_msg("member %zu: %s, wanted %s", i, reg_plan_verdict_to_string(v[i]),
                                 reg_plan_verdict_to_string(want[i]));
        /* nothing there: complete, nothing adopted */
        assert_true(reg_plan_check(NULL, 0, us, "10.0.0.1", 8080, v));
        /* a read that failed: adopt what was read, but check again */
        const struct reg_check_member partial[] = {
                { REG_READ_FAILED, 0, NULL, 0, false },
                { REG_READ_OK, us, "10.0.0.1", 8080, false },
        };
        assert_false(reg_plan_check(partial, 2, us, "10.0.0.1", 8080, v));
        assert_int_equal(v[0], REG_VERDICT_IGNORE);
        assert_int_equal(v[1], REG_VERDICT_ADOPT);
        /* no endpoint to look for: nothing is ours */
        assert_true(reg_plan_check(partial + 1, 1, us, NULL, 8080, v));
        assert_int_equal(v[0], REG_VERDICT_IGNORE);
}

static void test_flap_damping(_unused_ void **state) {
        const usec_t damping = 2 * USEC_PER_SEC;
        struct reg_flaps fl = {};
        usec_t t = 1000 * USEC_PER_SEC;

        /* the first return after a first departure waits damping from the departure */
        assert_int_equal(reg_plan_flap(&fl, true, false, t, damping), 0);
        assert_int_equal(fl.count, 1);
        assert_true(reg_plan_flap(&fl, false, true, t + USEC_PER_SEC, damping) == t + damping);
        /* the next one twice as long, then four times */
        assert_int_equal(reg_plan_flap(&fl, true, false, t + 3 * USEC_PER_SEC, damping), 0);
        assert_true(reg_plan_flap(&fl, false, true, t + 3 * USEC_PER_SEC, damping) == t + 3 * USEC_PER_SEC + 2 * damping);
        assert_int_equal(reg_plan_flap(&fl, true, false, t + 10 * USEC_PER_SEC, damping), 0);
        assert_true(reg_plan_flap(&fl, false, true, t + 10 * USEC_PER_SEC, damping) == t + 10 * USEC_PER_SEC + 4 * damping);
        /* capped at a minute, whatever the damping */
        for (int i = 0; i < 20; i++)
                (void) reg_plan_flap(&fl, true, false, t + 11 * USEC_PER_SEC, damping);
        assert_true(reg_plan_flap(&fl, false, true, t + 11 * USEC_PER_SEC, damping) == t + 11 * USEC_PER_SEC + REG_FLAP_PENALTY_MAX);
        assert_true(reg_plan_flap(&fl, false, true, t + 11 * USEC_PER_SEC, UINT64_MAX / 2) ==
                    t + 11 * USEC_PER_SEC + REG_FLAP_PENALTY_MAX);
        /* a penalty already served, no damping configured, or no change: nothing held back */
        assert_int_equal(reg_plan_flap(&fl, false, true, t + 11 * USEC_PER_SEC + REG_FLAP_PENALTY_MAX, damping), 0);
        assert_int_equal(reg_plan_flap(&fl, false, true, t + 12 * USEC_PER_SEC, 0), 0);
        assert_int_equal(reg_plan_flap(&fl, true, true, t + 12 * USEC_PER_SEC, damping), 0);
        /* a departure after a quiet minute starts counting again */
        fl = (struct reg_flaps) { .count = 5, .last_down = t };
        assert_int_equal(reg_plan_flap(&fl, true, false, t + REG_FLAP_WINDOW + 1, damping), 0);
        assert_int_equal(fl.count, 1);
        /* a return more than a minute after the departure is not damped */
        assert_int_equal(reg_plan_flap(&fl, false, true, t + 2 * REG_FLAP_WINDOW + 2, damping), 0);
}

static void test_parents(_unused_ void **state) {
        char **l = NULL;

        assert_int_equal(reg_plan_parents("/a/b/c", NULL, &l), 0);
        assert_int_equal(strv_length(l), 3);
        assert_string_equal(l[0], "/a");
        assert_string_equal(l[1], "/a/b");
        assert_string_equal(l[2], "/a/b/c");
        l = strv_free(l);
        /* the allowed prefix and above are the operator's */
        assert_int_equal(reg_plan_parents("/a/b/c", "/a", &l), 0);
        assert_int_equal(strv_length(l), 2);
        assert_string_equal(l[0], "/a/b");
        assert_string_equal(l[1], "/a/b/c");
        l = strv_free(l);
        assert_int_equal(reg_plan_parents("/a/b/c", "/a/b/c", &l), 0);
        assert_null(l);
        assert_int_equal(reg_plan_parents("/", NULL, &l), 0);
        assert_null(l);
        assert_int_equal(reg_plan_parents(NULL, NULL, &l), 0);
        assert_null(l);
        assert_int_equal(reg_plan_parents("/x", "/", &l), 0);
        assert_int_equal(strv_length(l), 1);
        assert_string_equal(l[0], "/x");
        l = strv_free(l);

        /* two NONODE answers in a row are worth another try, the third backs off */
        assert_false(reg_plan_parents_give_up(1));
        assert_false(reg_plan_parents_give_up(2));
        assert_true(reg_plan_parents_give_up(3));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_tables),
                cmocka_unit_test(test_create_then_registered),
                cmocka_unit_test(test_update_stays_registered),
                cmocka_unit_test(test_delete_when_unwanted_or_moved),
                cmocka_unit_test(test_lost_create_is_checked_first),
                cmocka_unit_test(test_waiting_for_the_session),
                cmocka_unit_test(test_backoff_damping_and_shutdown),
                cmocka_unit_test(test_drain),
                cmocka_unit_test(test_check_adopts_the_first_and_deletes_the_rest),
                cmocka_unit_test(test_flap_damping),
                cmocka_unit_test(test_parents),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
