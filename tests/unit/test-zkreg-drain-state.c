/* SPDX-License-Identifier: MIT */
/* zkreg's drain file (drain-state.c) on a real directory: what it writes, what it reads back,
 * and what it refuses (with the reason the agent logs and shows). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "drain-state.h"
#include "fs.h"
#include "state-version.h"

#define SINCE (1796208206ULL * USEC_PER_SEC) /* 2026-12-02T10:43:26Z */

static int setup(void **state) {
        const char *tmp = getenv("TMPDIR");
        char *root = NULL;

        assert_true(asprintf(&root, "%s/pinion-test-drain.XXXXXX", isempty(tmp) ? "/tmp" : tmp) > 0);
        assert_non_null(mkdtemp(root));
        *state = root;
        return 0;
}

static int teardown(void **state) {
        assert_int_equal(fs_rm_rf(*state), 0);
        free(*state);
        return 0;
}

static void test_format_is_versioned(_unused_ void **state) {
        struct drain_state s = { .drained = true, .since = SINCE };
        _cleanup_free_ char *text = drain_state_format(&s);

        assert_string_equal(text, "{\"version\":1,\"drained\":true,\"since\":\"2026-12-02T10:43:26Z\"}\n");
        free(text);
        s = (struct drain_state) {};
        text = drain_state_format(&s);
        assert_string_equal(text, "{\"version\":1,\"drained\":false,\"since\":null}\n");
}

static void expect_refused(const char *text, int error, const char *why) {
        struct drain_state s = { .drained = true, .since = 1 };
        _cleanup_free_ char *e = NULL;

        assert_int_equal(drain_state_parse("/state/zkreg/drain", text, &s, &e), error);
        assert_non_null(e);
        assert_non_null(strstr(e, why));
        assert_true(s.drained && s.since == 1); /* untouched */
}

static void test_parse(_unused_ void **state) {
        struct drain_state s;
        char *e = NULL;

        assert_int_equal(drain_state_parse("/state/zkreg/drain", "{\"version\":1,\"drained\":true,\"since\":\"2026-12-02T10:43:26Z\"}", &s, &e), 0);
        assert_true(s.drained);
        assert_int_equal(s.since, SINCE);
        /* since is optional; unknown keys of the same version are ignored */
        assert_int_equal(drain_state_parse("/state/zkreg/drain", "{\"version\":1,\"drained\":false,\"by\":\"x\"}", &s, &e), 0);
        assert_false(s.drained);
        assert_int_equal(s.since, 0);
        assert_null(e);
        /* a file without a version is version 1 (the shared rule, state-version.h) */
        assert_int_equal(drain_state_parse("/state/zkreg/drain", "{\"drained\":true}", &s, &e), 0);
        assert_true(s.drained);
        assert_null(e);

        expect_refused("", -EINVAL, "not a JSON object");
        expect_refused("{\"version\":1,\"drai", -EINVAL, "not a JSON object");
        expect_refused("[1]", -EINVAL, "not a JSON object");
        expect_refused("{\"version\":0,\"drained\":true}", -EINVAL, "version");
        expect_refused("{\"version\":1.5,\"drained\":true}", -EINVAL, "version");
        expect_refused("{\"version\":2,\"drained\":false}", STATE_VERSION_ERR_NEWER, "/state/zkreg/drain is in state format version 2");
        expect_refused("{\"version\":1,\"drained\":1}", -EINVAL, "\"drained\" is not true or false");
        expect_refused("{\"version\":1,\"drained\":true,\"since\":\"yesterday\"}", -EINVAL, "since");
        expect_refused("{\"version\":1,\"drained\":true,\"since\":\"2026-12-02T10:43:26Z junk\"}", -EINVAL, "since");
}

static void test_save_load(void **state) {
        _cleanup_free_ char *path = NULL, *e = NULL;
        struct drain_state s = { .drained = true, .since = SINCE }, got;
        struct stat st;

        /* absent: not drained */
        assert_true(asprintf(&path, "%s/zkreg/drain", (char *) *state) > 0);
        assert_int_equal(drain_state_load(path, &got, &e), 0);
        assert_false(got.drained);
        /* the directory is made, the file is private */
        assert_int_equal(drain_state_save(path, &s), 0);
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0600);
        assert_int_equal(drain_state_load(path, &got, &e), 0);
        assert_true(got.drained);
        assert_int_equal(got.since, SINCE);
        s.drained = false;
        assert_int_equal(drain_state_save(path, &s), 0);
        assert_int_equal(drain_state_load(path, &got, &e), 0);
        assert_false(got.drained);
        /* a directory where the file goes: nothing can be written or read */
        assert_int_equal(unlink(path), 0);
        assert_int_equal(mkdir(path, 0700), 0);
        assert_true(drain_state_save(path, &s) < 0);
        assert_true(drain_state_load(path, &got, &e) < 0);
        assert_non_null(strstr(e, "cannot read it"));
        assert_int_equal(rmdir(path), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_format_is_versioned),
                cmocka_unit_test(test_parse),
                cmocka_unit_test_setup_teardown(test_save_load, setup, teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
