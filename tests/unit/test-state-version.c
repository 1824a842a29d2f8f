/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "json.h"
#include "macro.h"
#include "state-version.h"

static int json_version(const char *text, unsigned current, unsigned *ret) {
        _cleanup_(cJSON_Deletep) cJSON *o = cJSON_Parse(text);
        assert_non_null(o);
        return state_version_json(o, current, ret);
}

static void test_json(_unused_ void **state) {
        unsigned v = 0;

        /* No version: the format before versions. */
        assert_int_equal(json_version("{\"cgroup\": \"/a\"}", 1, &v), 0);
        assert_int_equal(v, 1);
        assert_int_equal(json_version("{\"version\": 2}", 2, &v), 0);
        assert_int_equal(v, 2);
        assert_int_equal(json_version("{\"version\": 1}", 2, &v), 0);
        assert_int_equal(v, 1);
        /* Newer: refused, and the version is there for the message. */
        assert_int_equal(json_version("{\"version\": 3}", 2, &v), STATE_VERSION_ERR_NEWER);
        assert_int_equal(v, 3);
        assert_int_equal(json_version("{\"version\": 0}", 2, &v), -EBADMSG);
        assert_int_equal(json_version("{\"version\": 1.5}", 2, &v), -EBADMSG);
        assert_int_equal(json_version("{\"version\": \"2\"}", 2, &v), -EBADMSG);
        assert_int_equal(json_version("{\"version\": -1}", 2, &v), -EBADMSG);

        _cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
        assert_int_equal(state_version_json_add(o, 7), 0);
        assert_int_equal(state_version_json(o, 7, &v), 0);
        assert_int_equal(v, 7);
}

static void test_text(_unused_ void **state) {
        const char *body = NULL;
        unsigned v = 0;
        char buf[16];

        assert_int_equal(state_version_text("00000000000000ab 0011\n", 2, &v, &body), 0);
        assert_int_equal(v, 1);
        assert_string_equal(body, "00000000000000ab 0011\n");
        assert_int_equal(state_version_text("v2 00ab 11\n", 2, &v, &body), 0);
        assert_int_equal(v, 2);
        assert_string_equal(body, "00ab 11\n");
        assert_int_equal(state_version_text("v1\n", 2, &v, &body), 0);
        assert_int_equal(v, 1);
        assert_string_equal(body, "");
        assert_int_equal(state_version_text("v12 x", 2, &v, &body), STATE_VERSION_ERR_NEWER);
        assert_int_equal(v, 12);
        assert_int_equal(state_version_text("v0 x", 2, &v, NULL), -EBADMSG);
        assert_int_equal(state_version_text("v2x", 2, &v, NULL), -EBADMSG);
        assert_int_equal(state_version_text("v99999999999999999999 x", 2, &v, NULL), -EBADMSG);

        int n = state_version_text_prefix(buf, sizeof(buf), 2);
        assert_int_equal(n, 3);
        assert_string_equal(buf, "v2 ");
}

static void test_describe(_unused_ void **state) {
        _cleanup_free_ char *s = state_version_describe("/var/lib/pinion/zkreg/session", 9, 2);
        assert_non_null(s);
        assert_non_null(strstr(s, "/var/lib/pinion/zkreg/session"));
        assert_non_null(strstr(s, "version 9"));
        assert_non_null(strstr(s, "up to 2"));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_json),
                cmocka_unit_test(test_text),
                cmocka_unit_test(test_describe),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
