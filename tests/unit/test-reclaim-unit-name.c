/* SPDX-License-Identifier: MIT */
/* reclaim: which cgroup path is a systemd unit's own cgroup (unit_name_from_cgroup()), the rule
 * that decides whether memory.high is set through systemd (it then confirms). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>

#include <cmocka.h>

#include "unit-cap.h"

static void expect_unit(const char *path, const char *unit) {
        char *u = NULL;
        int r = unit_name_from_cgroup(path, &u);
        if (!unit) {
                assert_int_equal(r, 0);
                assert_null(u);
                return;
        }
        assert_int_equal(r, 1);
        assert_string_equal(u, unit);
        free(u);
}

static void test_units(_unused_ void **state) {
        expect_unit("/system.slice/x.service", "x.service");
        expect_unit("/system.slice/run-u12.scope", "run-u12.scope");
        expect_unit("/system.slice/system-getty.slice/getty@tty1.service", "getty@tty1.service");
        expect_unit("/system.slice", "system.slice");
        expect_unit("/init.scope", "init.scope");
        expect_unit("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1a2b_3c.slice",
                    "kubepods-burstable-pod1a2b_3c.slice");
        expect_unit("/kubepods.slice/kubepods-pod1a2b_3c.slice", "kubepods-pod1a2b_3c.slice");
        expect_unit("/system.slice/a\\x2db.service", "a\\x2db.service");
}

static void test_not_units(_unused_ void **state) {
        expect_unit("/", NULL);
        expect_unit("", NULL);
        expect_unit("/system.slice/x.service/sub", NULL);    /* below a unit */
        expect_unit("/x.service/y.service", NULL);            /* services hold no units */
        expect_unit("/kubepods/burstable/pod1a2b", NULL);     /* the kubelet's cgroupfs driver */
        expect_unit("/system.slice/cri-containerd-abc", NULL);
        expect_unit("/a-b.slice", NULL);                      /* a-b.slice lives in a.slice */
        expect_unit("/a.slice/b-c.slice", NULL);              /* ... not in another slice */
        expect_unit("/a.slice/a-b-c.slice", NULL);            /* one level at a time */
        expect_unit("/system.slice/-.service", NULL);
        expect_unit("/system.slice/x y.service", NULL);
        expect_unit("/system.slice/.service", NULL);
        expect_unit("/system.slice/x.socket", NULL);          /* no cgroup of its own */
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_units),
                cmocka_unit_test(test_not_units),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
