/* SPDX-License-Identifier: MIT */
/* The CSI plugin's target path rule (csi-mount.c): what is refused on the text alone, before a
 * path is resolved or mounted on. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include <cmocka.h>

#include "csi-mount.h"
#include "macro.h"

#define ROOT "/var/lib/kubelet/pods"

static int check(const char *target) {
        char why[CSI_WHY_MAX] = "";
        int r = csi_mount_target_check(ROOT, target, why, sizeof(why));

        if (r < 0)
                assert_true(why[0] != 0); /* every refusal says why */
        return r;
}

static void test_kubelet_targets(_unused_ void **state) {
        assert_int_equal(check(ROOT "/0b5b1c9e-1d2a-4c2e-9f0a-000000000001/volumes/kubernetes.io~csi/pinion/mount"), 0);
        assert_int_equal(check(ROOT "/uid/x"), 0);
}

static void test_unclean(_unused_ void **state) {
        assert_int_equal(check(NULL), -EINVAL);
        assert_int_equal(check(""), -EINVAL);
        assert_int_equal(check("relative/path"), -EINVAL);
        assert_int_equal(check(ROOT "/uid/../../../../etc"), -EINVAL);
        assert_int_equal(check(ROOT "/uid/./x"), -EINVAL);
        assert_int_equal(check(ROOT "//uid/x"), -EINVAL);
        assert_int_equal(check(ROOT "/uid/x/"), -EINVAL);
        assert_int_equal(check(ROOT "/uid/.."), -EINVAL);
}

static void test_outside(_unused_ void **state) {
        assert_int_equal(check("/etc"), -EPERM);
        assert_int_equal(check("/var/lib/kubelet/podsX/uid/x"), -EPERM);
        assert_int_equal(check("/var/lib/kubelet"), -EPERM);
        /* The root itself and a pod's own directory are never covered. */
        assert_int_equal(check(ROOT), -EPERM);
        assert_int_equal(check(ROOT "/uid"), -EPERM);
}

static void test_bad_root(_unused_ void **state) {
        assert_int_equal(csi_mount_target_check("/a/../b", "/b/uid/x", NULL, 0), -EINVAL);
        assert_int_equal(csi_mount_target_check(NULL, "/b/uid/x", NULL, 0), -EINVAL);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_kubelet_targets),
                cmocka_unit_test(test_unclean),
                cmocka_unit_test(test_outside),
                cmocka_unit_test(test_bad_root),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
