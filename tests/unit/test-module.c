/* SPDX-License-Identifier: MIT */
/* The module contract: dependency ordering, state strings, logged transitions and what an
 * instance tells its owner. */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include <cmocka.h>

#include "log.h"
#include "module.h"

/* An owner that records what it is told, in order, with the state the instance had then. */
#define MAX_EVENTS 16
struct recorder {
        struct module_instance *mi;
        unsigned n;
        enum module_event events[MAX_EVENTS];
        enum module_state states[MAX_EVENTS];
        bool synced[MAX_EVENTS];
};

static void record(struct module_instance *mi, enum module_event event, void *userdata) {
        struct recorder *r = userdata;

        assert_ptr_equal(mi, r->mi);
        assert_true(r->n < MAX_EVENTS);
        r->events[r->n] = event;
        r->states[r->n] = mi->state;
        r->synced[r->n] = mi->synced;
        r->n++;
}

static unsigned count_events(const struct recorder *r, enum module_event event) {
        unsigned n = 0;
        for (unsigned i = 0; i < r->n; i++)
                n += r->events[i] == event;
        return n;
}

#define MOD(n, ...) static const struct module n = { .name = #n, .deps = (const char *const[]) { __VA_ARGS__ } }
MOD(a, NULL);
MOD(b, "a", NULL);
MOD(c, "a", "b", NULL);
MOD(d, NULL);
MOD(loop1, "loop2", NULL);
MOD(loop2, "loop1", NULL);
MOD(orphan, "missing", NULL);

static void test_order_respects_dependencies(void **state) {
        /* c needs a and b, b needs a; d is free: stable order puts d right after what it follows */
        const struct module *const table[] = { &c, &d, &b, &a };
        unsigned order[4];
        _cleanup_free_ char *err = NULL;

        assert_int_equal(module_order(table, 4, order, &err), 0);
        const char *names[4];
        for (unsigned i = 0; i < 4; i++)
                names[i] = table[order[i]]->name;
        assert_string_equal(names[0], "d");
        assert_string_equal(names[1], "a");
        assert_string_equal(names[2], "b");
        assert_string_equal(names[3], "c");
}

static void test_order_reports_cycles_and_unknown(void **state) {
        const struct module *const cyc[] = { &a, &loop1, &loop2 };
        const struct module *const unk[] = { &a, &orphan };
        unsigned order[3];
        char *err = NULL;

        assert_int_equal(module_order(cyc, 3, order, &err), -ELOOP);
        assert_string_equal(err, "module dependency cycle involving loop1");
        free(err);
        err = NULL;
        assert_int_equal(module_order(unk, 2, order, &err), -ENOENT);
        assert_string_equal(err, "module orphan depends on unknown module missing");
        free(err);
}

static void test_real_table_orders(void **state) {
        unsigned order[16];
        _cleanup_free_ char *err = NULL;
        const struct module *const table[] = { &a, &b, &c, &d };

        assert_int_equal(module_order(table, 4, order, &err), 0);
        for (unsigned i = 0; i < 4; i++)
                assert_int_equal(order[i], i); /* already in dependency order: unchanged */
}

static void test_state_strings(void **state) {
        for (int s = 0; s < _MODULE_STATE_MAX; s++) {
                const char *name = module_state_to_string((enum module_state) s);
                assert_non_null(name);
                assert_int_equal(module_state_from_string(name), s);
        }
        assert_int_equal(module_state_from_string("sleeping"), _MODULE_STATE_INVALID);
        assert_null(module_state_to_string(_MODULE_STATE_MAX));
        assert_true(module_state_is_healthy(MODULE_DEGRADED));
        assert_true(module_state_is_healthy(MODULE_DISABLED));
        assert_false(module_state_is_healthy(MODULE_FAILED));
        assert_false(module_state_is_healthy(MODULE_STOPPING));
}

static void test_set_state_logs_and_notifies(void **state) {
        struct recorder rec = {};
        struct module_instance mi = { .module = &a, .state = MODULE_DISABLED, .owner_fn = record, .owner_userdata = &rec };
        char buf[4096] = "";
        FILE *saved = stderr;

        rec.mi = &mi;
        stderr = fmemopen(buf, sizeof(buf) - 1, "w");
        assert_non_null(stderr);
        log_setup(LOG_INFO, LOG_TARGET_TEXT);

        module_set_state(&mi, MODULE_DEGRADED, "backend %s down", "zk1:2181");
        module_set_state(&mi, MODULE_DEGRADED, "backend %s down", "zk1:2181"); /* no change: no log */
        module_set_state(&mi, MODULE_RUNNING, NULL);
        module_set_synced(&mi);
        module_set_synced(&mi);
        module_stopped(&mi);
        fclose(stderr);
        stderr = saved;

        assert_int_equal(rec.n, 5); /* degraded, running, synced, stopped, drained */
        assert_int_equal(count_events(&rec, MODULE_EVENT_STATE) + count_events(&rec, MODULE_EVENT_SYNCED), 4);
        assert_int_equal(count_events(&rec, MODULE_EVENT_STOPPED), 1);
        assert_int_equal(mi.state, MODULE_STOPPED);
        assert_null(mi.reason);
        assert_true(mi.synced);
        assert_non_null(strstr(buf, "warning: [a] disabled → degraded: backend zk1:2181 down\n"));
        assert_non_null(strstr(buf, "info: [a] degraded → running\n"));
        assert_non_null(strstr(buf, "info: [a] running → stopped\n"));
        assert_null(strstr(strstr(buf, "degraded: backend") + 1, "degraded: backend")); /* logged once */
}

/* The owner hears each change once, after the instance shows it, and nothing for calls that
 * change nothing. */
static void test_owner_hears_each_change_once(void **state) {
        struct recorder rec = {};
        struct module_instance mi = { .module = &b, .state = MODULE_STARTING, .owner_fn = record, .owner_userdata = &rec };

        rec.mi = &mi;
        log_setup(LOG_CRIT, LOG_TARGET_TEXT); /* the transitions' log lines are the test above's */

        module_set_state(&mi, MODULE_STARTING, NULL);           /* same state, same (no) reason */
        assert_int_equal(rec.n, 0);
        module_set_state(&mi, MODULE_DEGRADED, "zk down");      /* 0: STATE */
        module_set_state(&mi, MODULE_DEGRADED, "zk down");      /* unchanged */
        module_set_state(&mi, MODULE_DEGRADED, "zk still down"); /* 1: STATE, the reason changed */
        module_set_synced(&mi);                                 /* 2: SYNCED */
        module_set_synced(&mi);                                 /* once only */
        module_set_state(&mi, MODULE_RUNNING, NULL);            /* 3: STATE */
        module_set_state(&mi, MODULE_STOPPING, NULL);           /* 4: STATE */
        module_stopped(&mi);                                    /* 5: STATE to STOPPED, 6: STOPPED */
        assert_int_equal(rec.n, 7);

        const enum module_event events[] = { MODULE_EVENT_STATE, MODULE_EVENT_STATE, MODULE_EVENT_SYNCED,
                                             MODULE_EVENT_STATE, MODULE_EVENT_STATE, MODULE_EVENT_STATE,
                                             MODULE_EVENT_STOPPED };
        const enum module_state states[] = { MODULE_DEGRADED, MODULE_DEGRADED, MODULE_DEGRADED, MODULE_RUNNING,
                                             MODULE_STOPPING, MODULE_STOPPED,  MODULE_STOPPED };
        for (unsigned i = 0; i < rec.n; i++) {
                assert_int_equal(rec.events[i], events[i]);
                assert_int_equal(rec.states[i], states[i]);
                assert_int_equal(rec.synced[i], i >= 2);
        }

        /* Drained while already STOPPED (the manager set it when stop() returned 0): only the
         * drain is told. */
        rec.n = 0;
        module_stopped(&mi);
        assert_int_equal(rec.n, 1);
        assert_int_equal(rec.events[0], MODULE_EVENT_STOPPED);

        /* No owner (a throwaway instance validating a config): nothing is called. */
        mi.owner_fn = NULL;
        rec.n = 0;
        module_set_state(&mi, MODULE_FAILED, "gave up");
        module_stopped(&mi);
        assert_int_equal(rec.n, 0);
        assert_int_equal(mi.state, MODULE_STOPPED);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_order_respects_dependencies),
                cmocka_unit_test(test_order_reports_cycles_and_unknown),
                cmocka_unit_test(test_real_table_orders),
                cmocka_unit_test(test_state_strings),
                cmocka_unit_test(test_set_state_logs_and_notifies),
                cmocka_unit_test(test_owner_hears_each_change_once),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
