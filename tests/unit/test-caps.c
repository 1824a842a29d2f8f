/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "caps.h"
#include "macro.h"

static void test_names(_unused_ void **state) {
        assert_string_equal(cap_to_name(CAP_CHOWN), "CAP_CHOWN");
        assert_string_equal(cap_to_name(CAP_NET_ADMIN), "CAP_NET_ADMIN");
        assert_string_equal(cap_to_name(CAP_CHECKPOINT_RESTORE), "CAP_CHECKPOINT_RESTORE");
        assert_null(cap_to_name(63));
        /* Every capability this build knows has a name: a gap in the table would print NULL. */
        for (unsigned cap = 0; cap <= CAP_LAST_CAP; cap++)
                assert_non_null(cap_to_name(cap));
}

static void test_to_string(_unused_ void **state) {
        char *s = caps_to_string(0);
        assert_string_equal(s, "none");
        free(s);
        s = caps_to_string(CAP_TO_MASK64(CAP_KILL) | CAP_TO_MASK64(CAP_CHOWN) | CAP_TO_MASK64(CAP_SYS_ADMIN));
        assert_string_equal(s, "CAP_CHOWN CAP_KILL CAP_SYS_ADMIN"); /* in number order */
        free(s);
        s = caps_to_string(CAP_TO_MASK64(63));
        assert_string_equal(s, "cap_63");
        free(s);
}

/* In a child (the drop is for good): keeps CAP_CHOWN only, then reads the sets back. Only
 * what the thread had can be kept; as root (the integration tests' case) the bounding set goes
 * too, without CAP_SETPCAP it is left alone. */
static void test_keep_only_in_a_child(_unused_ void **state) {
        struct caps_state before;
        assert_int_equal(caps_get(&before), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                bool bounding = false;
                struct caps_state after;
                if (caps_keep_only(CAP_TO_MASK64(CAP_CHOWN), &bounding) < 0 || caps_get(&after) < 0)
                        _exit(10);
                uint64_t want = before.permitted & CAP_TO_MASK64(CAP_CHOWN);
                if (after.permitted != want || after.effective != want)
                        _exit(11);
                if (bounding != !!(before.effective & CAP_TO_MASK64(CAP_SETPCAP)))
                        _exit(12);
                if (bounding && after.bounding != CAP_TO_MASK64(CAP_CHOWN))
                        _exit(13);
                if (!bounding && after.bounding != before.bounding)
                        _exit(14);
                _exit(0);
        }
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_names),
                cmocka_unit_test(test_to_string),
                cmocka_unit_test(test_keep_only_in_a_child),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
