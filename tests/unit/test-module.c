/* SPDX-License-Identifier: MIT */
/* The module contract: dependency ordering, state strings and logged transitions. */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include <cmocka.h>

#include "log.h"
#include "manager.h"
#include "module.h"

/* The manager's side of the contract, recorded instead of acted on: this test links only
 * module.c and log.c. */
static unsigned changed_calls, stopped_calls;
void manager_module_changed(struct manager *m, struct module_instance *mi) {
        changed_calls++;
}
void manager_module_stopped(struct manager *m, struct module_instance *mi) {
        stopped_calls++;
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
        struct manager *fake = (struct manager *) 0x1; /* never dereferenced by module.c */
        struct module_instance mi = { .module = &a, .manager = fake, .state = MODULE_DISABLED };
        char buf[4096] = "";
        FILE *saved = stderr;

        stderr = fmemopen(buf, sizeof(buf) - 1, "w");
        assert_non_null(stderr);
        log_setup(LOG_INFO, LOG_TARGET_TEXT);

        changed_calls = 0;
        module_set_state(&mi, MODULE_DEGRADED, "backend %s down", "zk1:2181");
        module_set_state(&mi, MODULE_DEGRADED, "backend %s down", "zk1:2181"); /* no change: no log */
        module_set_state(&mi, MODULE_RUNNING, NULL);
        module_set_synced(&mi);
        module_set_synced(&mi);
        module_stopped(&mi);
        fclose(stderr);
        stderr = saved;

        assert_int_equal(changed_calls, 4); /* degraded, running, synced, stopped */
        assert_int_equal(stopped_calls, 1);
        assert_int_equal(mi.state, MODULE_STOPPED);
        assert_null(mi.reason);
        assert_true(mi.synced);
        assert_non_null(strstr(buf, "warning: [a] disabled → degraded: backend zk1:2181 down\n"));
        assert_non_null(strstr(buf, "info: [a] degraded → running\n"));
        assert_non_null(strstr(buf, "info: [a] running → stopped\n"));
        assert_null(strstr(strstr(buf, "degraded: backend") + 1, "degraded: backend")); /* logged once */
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_order_respects_dependencies),
                cmocka_unit_test(test_order_reports_cycles_and_unknown),
                cmocka_unit_test(test_real_table_orders),
                cmocka_unit_test(test_state_strings),
                cmocka_unit_test(test_set_state_logs_and_notifies),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
