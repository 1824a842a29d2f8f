/* SPDX-License-Identifier: MIT */
/* json-text: the plugin's JSON scanner and string writer (modules/podnet/json-text.c). */

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "json-text.h"
#include "macro.h"

static int member(const char *text, const char *key, struct json_text_value *v) {
        return json_text_object_member(text, strlen(text), key, v);
}

static char *member_string(const char *text, const char *key) {
        char *s = NULL;
        assert_int_equal(json_text_member_string(text, strlen(text), key, &s), 1);
        return s;
}

/* RFC 8259 objects, every kind of value, whitespace around and between. */
static void test_accepts_json_objects(void **state) {
        static const char *const good[] = {
                "{}", " \t\r\n{ } \n", "{\"a\":1}", "{\"a\":-0.5e+10,\"b\":0,\"c\":1E3}",
                "{\"a\":[1,[2,{}],\"x\",true,false,null]}", "{\"a\":{\"b\":{\"c\":[]}}}",
                "{\"\\u00e9\\ud83d\\ude00\":\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"}", "{\"a\":\"\xc3\xa9 raw UTF-8\"}",
        };
        for (size_t i = 0; i < ELEMENTSOF(good); i++)
                assert_int_equal(member(good[i], NULL, NULL), 0);
}

static void test_refuses_what_is_no_json_object(void **state) {
        static const char *const bad[] = {
                "", " ", "[]", "\"s\"", "1", "null", "{", "}", "{\"a\"}", "{\"a\":}", "{\"a\":1,}", "{,}",
                "{\"a\":1}x", "{\"a\":1}{}", "{a:1}", "{'a':1}", "{\"a\":01}", "{\"a\":1.}", "{\"a\":.5}",
                "{\"a\":+1}", "{\"a\":1e}", "{\"a\":-}", "{\"a\":tru}", "{\"a\":nul}", "{\"a\":\"x}",
                "{\"a\":\"\x01\"}", "{\"a\":\"\\x\"}", "{\"a\":\"\\u12\"}", "{\"a\":\"\\ud800\"}",
                "{\"a\":\"\\udc00\\ud800\"}", "{\"a\":\"\\ud800\\u0041\"}", "{\"a\":[1 2]}", "{\"a\" 1}",
                "\v{}", "{\"a\":1}\f",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                struct json_text_value v;
                assert_int_equal(member(bad[i], "a", &v), -EBADMSG);
        }
        assert_int_equal(json_text_object_member(NULL, 0, "a", NULL), -EBADMSG);
        /* Length, not NUL, ends the text. */
        assert_int_equal(json_text_object_member("{}x", 2, NULL, NULL), 0);
}

static void test_nesting_is_bounded(void **state) {
        char deep[2 * 140 + 16];
        size_t n = 0;

        for (int levels = 127; levels <= 128; levels++) {
                n = 0;
                deep[n++] = '{';
                memcpy(deep + n, "\"a\":", 4), n += 4;
                for (int i = 1; i < levels; i++)
                        deep[n++] = '[';
                for (int i = 1; i < levels; i++)
                        deep[n++] = ']';
                deep[n++] = '}';
                deep[n] = '\0';
                assert_int_equal(member(deep, "a", NULL), levels <= 128 ? 1 : -EBADMSG);
        }
        n = 0;
        deep[n++] = '{';
        memcpy(deep + n, "\"a\":", 4), n += 4;
        for (int i = 0; i < 129; i++)
                deep[n++] = '[';
        for (int i = 0; i < 129; i++)
                deep[n++] = ']';
        deep[n++] = '}';
        deep[n] = '\0';
        assert_int_equal(member(deep, "a", NULL), -EBADMSG);
}

/* Only top-level members are found, the first of equal names, with their values' places. */
static void test_finds_top_level_members(void **state) {
        const char *text = "{\"inner\":{\"socket\":\"/no\"},\"socket\":\"/run/a.sock\",\"socket\":\"/run/b\","
                           "\"list\":[1,2] ,\"n\":-42,\"f\":1.5,\"t\":true}";
        struct json_text_value v;
        _cleanup_free_ char *s = member_string(text, "socket");
        int n;

        assert_string_equal(s, "/run/a.sock");
        assert_int_equal(member(text, "list", &v), 1);
        assert_int_equal(v.type, JSON_TEXT_ARRAY);
        assert_int_equal(v.size, 5);
        assert_memory_equal(v.start, "[1,2]", 5);
        assert_int_equal(member(text, "inner", &v), 1);
        assert_int_equal(v.type, JSON_TEXT_OBJECT);
        assert_int_equal(json_text_object_member(v.start, v.size, "socket", &v), 1);
        assert_int_equal(member(text, "n", &v), 1);
        assert_int_equal(json_text_int(&v, &n), 0);
        assert_int_equal(n, -42);
        assert_int_equal(member(text, "f", &v), 1);
        assert_int_equal(json_text_int(&v, &n), -EBADMSG);
        assert_int_equal(member(text, "t", &v), 1);
        assert_int_equal(v.type, JSON_TEXT_TRUE);
        assert_int_equal(json_text_string(&v, &s), -EBADMSG);
        assert_int_equal(member(text, "missing", &v), 0);
        assert_int_equal(json_text_member_string(text, strlen(text), "missing", &s), 0);
        assert_int_equal(json_text_member_string(text, strlen(text), "n", &s), -EBADMSG);
        assert_int_equal(json_text_member_string("{\"socket\":", 10, "socket", &s), -EBADMSG);
        assert_string_equal(s, "/run/a.sock"); /* left as it was by each failure */
        assert_int_equal(member(text, "Socket", &v), 0);
        /* A key written with escapes is the same key. */
        _cleanup_free_ char *t = member_string("{\"\\u0073ock\\u0065t\":\"/x\"}", "socket");
        assert_string_equal(t, "/x");
}

static void test_decodes_strings(void **state) {
        _cleanup_free_ char *a = member_string("{\"k\":\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\te\"}", "k");
        _cleanup_free_ char *b = member_string("{\"k\":\"\\u0041\\u00e9\\u20ac\\ud83d\\ude00\"}", "k");
        struct json_text_value v;
        char *c = NULL;
        int n;

        assert_string_equal(a, "a\"b\\c/d\b\f\n\r\te");
        assert_string_equal(b, "A\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
        /* A NUL inside would cut a path short: refused. */
        assert_int_equal(member("{\"k\":\"/run/x\\u0000y\"}", "k", &v), 1);
        assert_int_equal(json_text_string(&v, &c), -EBADMSG);
        assert_int_equal(member("{\"k\":2147483648,\"m\":-2147483648,\"x\":12345678901}", "k", &v), 1);
        assert_int_equal(json_text_int(&v, &n), -EBADMSG);
        assert_int_equal(member("{\"k\":2147483648,\"m\":-2147483648}", "m", &v), 1);
        assert_int_equal(json_text_int(&v, &n), 0);
        assert_int_equal(n, INT32_MIN);
}

/* What the writer escapes reads back as it was; other bytes go as they are. */
static void test_writes_strings(void **state) {
        static const char *const samples[] = { "", "plain", "q\"b\\s/", "\x01\x1f\n\t\r\b\f", "\xc3\xa9\xff" };
        for (size_t i = 0; i < ELEMENTSOF(samples); i++) {
                struct json_text_buf b = {};
                _cleanup_free_ char *text = NULL;
                json_text_put(&b, "{\"k\":");
                json_text_put_string(&b, samples[i]);
                json_text_put(&b, "}");
                assert_int_equal(json_text_buf_take(&b, &text), 0);
                _cleanup_free_ char *back = member_string(text, "k");
                assert_string_equal(back, samples[i]);
        }
        struct json_text_buf b = {};
        _cleanup_free_ char *text = NULL;
        json_text_put_string(&b, "a\x01\"");
        assert_int_equal(json_text_buf_take(&b, &text), 0);
        assert_string_equal(text, "\"a\\u0001\\\"\"");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_accepts_json_objects),
                cmocka_unit_test(test_refuses_what_is_no_json_object),
                cmocka_unit_test(test_nesting_is_bounded),
                cmocka_unit_test(test_finds_top_level_members),
                cmocka_unit_test(test_decodes_strings),
                cmocka_unit_test(test_writes_strings),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
