/* SPDX-License-Identifier: MIT */
/* The watch-stream decoder: events split anywhere, oversized lines skipped, corruption stops. */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include <cmocka.h>

#include "watch-stream.h"

struct seen {
        char types[32][16];
        char rvs[32][16];
        int codes[32];
        unsigned n;
        int stop_at; /* return -ECANCELED at this event index (or -1) */
};

static int record(const struct watch_event *ev, void *userdata) {
        struct seen *s = userdata;
        if ((int) s->n == s->stop_at)
                return -ECANCELED;
        snprintf(s->types[s->n], sizeof(s->types[0]), "%s", watch_stream_event_type_to_string(ev->type));
        snprintf(s->rvs[s->n], sizeof(s->rvs[0]), "%s", ev->resource_version ? ev->resource_version : "-");
        s->codes[s->n] = ev->type == WATCH_ERROR ? watch_stream_status_code(ev->object) : 0;
        s->n++;
        return 0;
}

static const char events[] =
        "{\"type\":\"ADDED\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"11\"}}}\n"
        "\n"
        "{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"12\"}}}\r\n"
        "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"resourceVersion\":\"15\"}}}\n"
        "{\"type\":\"DELETED\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"16\"}}}\n"
        "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410,\"reason\":\"Expired\"}}\n";

static void check_all(const struct seen *s) {
        static const char *const types[] = { "ADDED", "MODIFIED", "BOOKMARK", "DELETED", "ERROR" };
        static const char *const rvs[] = { "11", "12", "15", "16", "-" };
        assert_int_equal(s->n, 5);
        for (unsigned i = 0; i < 5; i++) {
                assert_string_equal(s->types[i], types[i]);
                assert_string_equal(s->rvs[i], rvs[i]);
        }
        assert_int_equal(s->codes[4], 410);
}

static void test_whole_and_byte_by_byte(void **state) {
        struct watch_stream ws;
        struct seen s = { .stop_at = -1 };

        watch_stream_init(&ws, 1 << 20);
        assert_int_equal(watch_stream_feed(&ws, events, strlen(events), record, &s), 0);
        check_all(&s);
        assert_false(watch_stream_partial(&ws));
        watch_stream_done(&ws);

        /* The transport may cut anywhere, even inside a multi-byte sequence or a number. */
        memset(&s, 0, sizeof(s));
        s.stop_at = -1;
        watch_stream_init(&ws, 1 << 20);
        for (size_t i = 0; i < strlen(events); i++)
                assert_int_equal(watch_stream_feed(&ws, events + i, 1, record, &s), 0);
        check_all(&s);
        assert_int_equal(ws.n_events, 5);
        watch_stream_done(&ws);
}

static void test_partial_line_is_pending(void **state) {
        struct watch_stream ws;
        struct seen s = { .stop_at = -1 };
        const char *half = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"resourceVersion\":\"1\"}}";

        watch_stream_init(&ws, 1024);
        assert_int_equal(watch_stream_feed(&ws, half, strlen(half), record, &s), 0);
        assert_int_equal(s.n, 0);
        assert_true(watch_stream_partial(&ws)); /* a stream ending here was cut short */
        assert_int_equal(watch_stream_feed(&ws, "}\n", 2, record, &s), 0);
        assert_int_equal(s.n, 1);
        assert_false(watch_stream_partial(&ws));
        watch_stream_done(&ws);
}

static void test_oversized_line_skipped(void **state) {
        struct watch_stream ws;
        struct seen s = { .stop_at = -1 };
        char big[5000];

        memset(big, 'x', sizeof(big));
        watch_stream_init(&ws, 1000);
        assert_int_equal(watch_stream_feed(&ws, "{\"type\":\"ADDED\",\"object\":{\"a\":\"", 31, record, &s), 0);
        for (int i = 0; i < 4; i++)
                assert_int_equal(watch_stream_feed(&ws, big, sizeof(big), record, &s), 0);
        assert_int_equal(watch_stream_feed(&ws, "\"}}\n", 4, record, &s), 0);
        assert_int_equal(ws.n_oversized, 1);
        assert_true(ws.cap < 8192); /* never held the 20 KB line */
        /* The stream goes on after it. */
        assert_int_equal(watch_stream_feed(&ws, events, strlen(events), record, &s), 0);
        check_all(&s);
        watch_stream_done(&ws);
}

static void test_corruption_stops(void **state) {
        static const char *const bad[] = {
                "not json\n",
                "[1,2]\n",
                "{\"type\":\"ADDED\"}\n",
                "{\"type\":\"RENAMED\",\"object\":{}}\n",
                "{\"type\":7,\"object\":{}}\n",
                "{\"type\":\"ADDED\",\"object\":\"str\"}\n",
                "{\"type\":\"ADDED\",\"object\":{}}garbage\n",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                struct watch_stream ws;
                struct seen s = { .stop_at = -1 };
                watch_stream_init(&ws, 1024);
                int r = watch_stream_feed(&ws, bad[i], strlen(bad[i]), record, &s);
                if (r != -EBADMSG)
                        fail_msg("case %zu (%s): r=%d", i, bad[i], r);
                assert_int_equal(s.n, 0);
                watch_stream_done(&ws);
        }
}

static void test_callback_can_stop(void **state) {
        struct watch_stream ws;
        struct seen s = { .stop_at = 2 };

        watch_stream_init(&ws, 1 << 20);
        assert_int_equal(watch_stream_feed(&ws, events, strlen(events), record, &s), -ECANCELED);
        assert_int_equal(s.n, 2);
        watch_stream_done(&ws);
}

static void test_names(void **state) {
        assert_int_equal(watch_stream_event_type_from_string("BOOKMARK"), WATCH_BOOKMARK);
        assert_int_equal(watch_stream_event_type_from_string("bookmark"), _WATCH_EVENT_TYPE_INVALID);
        assert_null(watch_stream_event_type_to_string(_WATCH_EVENT_TYPE_MAX));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_whole_and_byte_by_byte),
                cmocka_unit_test(test_partial_line_is_pending),
                cmocka_unit_test(test_oversized_line_skipped),
                cmocka_unit_test(test_corruption_stops),
                cmocka_unit_test(test_callback_can_stop),
                cmocka_unit_test(test_names),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
