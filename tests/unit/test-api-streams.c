/* SPDX-License-Identifier: MIT */
/* api.c against real clients (the harness is api-harness.h): requests that outlive their
 * handler. Long polls, streams, clients hanging up on either, api_free() with requests held,
 * and many requests at once, sequential, fresh and concurrent. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api-harness.h"

static int client_long_poll(struct fixture *f, void *arg) {
        CURL *c = curl_easy_init();
        struct reply r = {};

        for (int i = 0; i < 3; i++) {
                usec_t t0 = now_usec(CLOCK_MONOTONIC);

                CHECK(http(c, f, "GET", "/v1/wait", NULL, 0, false, &r) == CURLE_OK);
                CHECK(r.status == 200);
                CHECK(json_bool(&r, "waited"));
                CHECK(now_usec(CLOCK_MONOTONIC) - t0 >= 100 * USEC_PER_MSEC);
                /* The connection is still good for an ordinary request. */
                CHECK(http(c, f, "GET", "/v1/echo/a/b", NULL, 0, false, &r) == CURLE_OK);
                CHECK(r.status == 200);
        }
        reply_clear(&r);
        curl_easy_cleanup(c);
        return child_failures;
}

static void test_long_poll(void **state) {
        struct fixture *f = *state;

        api_start(f, 0660, (gid_t) -1, true);
        run_client(f, client_long_poll, NULL);
        assert_int_equal(f->aborts, 0);
        assert_null(f->wait_req);
}

static int client_stream(struct fixture *f, void *arg) {
        CURL *c = curl_easy_init();
        struct reply r = {};

        for (int i = 0; i < 2; i++) {
                CHECK(http(c, f, "GET", "/v1/stream", NULL, 0, false, &r) == CURLE_OK);
                CHECK(r.status == 200);
                CHECK(r.chunked);
                CHECK(strcmp(r.content_type, "application/x-ndjson") == 0);
                CHECK(r.body && strcmp(r.body, "{\"n\":0}\n{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n{\"n\":4}\n") == 0);
                /* The lines arrived as they were written, not all at the end. */
                CHECK(r.writes >= 3);
        }
        reply_clear(&r);
        curl_easy_cleanup(c);
        return child_failures;
}

static void test_stream(void **state) {
        struct fixture *f = *state;

        api_start(f, 0660, (gid_t) -1, true);
        run_client(f, client_stream, NULL);
        assert_int_equal(f->aborts, 0);
        assert_null(f->stream_req);
}

static int client_abort(struct fixture *f, void *arg) {
        char buf[512];
        ssize_t n;
        int fd;

        /* A long-poll: hang up while it is held. */
        fd = raw_connect(f);
        CHECK(fd >= 0);
        CHECK(raw_send(fd, "GET /v1/hold HTTP/1.1\r\nHost: x\r\n\r\n"));
        wait_signal(f);
        close(fd);

        /* A stream: read its first line, then hang up. */
        fd = raw_connect(f);
        CHECK(fd >= 0);
        CHECK(raw_send(fd, "GET /v1/stream-hold HTTP/1.1\r\nHost: x\r\n\r\n"));
        wait_signal(f);
        n = read(fd, buf, sizeof(buf) - 1);
        CHECK(n > 0);
        buf[n > 0 ? n : 0] = 0;
        CHECK(strstr(buf, "HTTP/1.1 200") == buf);
        close(fd);

        /* Half-closed after sending: still "gone" (EPOLLRDHUP). */
        fd = raw_connect(f);
        CHECK(fd >= 0);
        CHECK(raw_send(fd, "GET /v1/hold HTTP/1.1\r\nHost: x\r\n\r\n"));
        wait_signal(f);
        CHECK(shutdown(fd, SHUT_WR) == 0);
        n = read(fd, buf, sizeof(buf));
        CHECK(n == 0); /* closed without a reply */
        close(fd);
        return child_failures;
}

static void test_abort(void **state) {
        struct fixture *f = *state;
        _cleanup_free_ char *text = NULL;

        api_start(f, 0660, (gid_t) -1, true);
        f->expect_aborts = 3;
        run_client(f, client_abort, NULL);
        assert_int_equal(f->aborts, 3);

        assert_int_equal(metrics_render(f->metrics, &text, NULL), 0);
        assert_non_null(strstr(text, "pinion_api_requests_total{route=\"/v1/hold\",code=\"499\"} 2\n"));
        assert_non_null(strstr(text, "pinion_api_requests_total{route=\"/v1/stream-hold\",code=\"200\"} 1\n"));
}

static int client_free_held(struct fixture *f, void *arg) {
        char buf[4096];
        size_t got = 0;
        ssize_t n;
        int a, b;

        a = raw_connect(f);
        b = raw_connect(f);
        CHECK(a >= 0 && b >= 0);
        CHECK(raw_send(a, "GET /v1/hold HTTP/1.1\r\nHost: x\r\n\r\n"));
        wait_signal(f);
        CHECK(raw_send(b, "GET /v1/stream-hold HTTP/1.1\r\nHost: x\r\n\r\n"));
        wait_signal(f);
        /* api_free() now runs: both connections are closed. */
        CHECK(read(a, buf, sizeof(buf)) == 0);
        while ((n = read(b, buf + got, sizeof(buf) - 1 - got)) > 0)
                got += (size_t) n;
        CHECK(n == 0);
        buf[got] = 0;
        CHECK(strstr(buf, "HTTP/1.1 200") == buf);
        CHECK(strstr(buf, "{\"n\":0}") != NULL);
        close(a);
        close(b);
        return child_failures;
}

static void test_free_with_held_requests(void **state) {
        struct fixture *f = *state;
        struct stat st;

        api_start(f, 0660, (gid_t) -1, false); /* and no metrics */
        f->free_api_on_hold = true;
        f->expect_aborts = 2;
        run_client(f, client_free_held, NULL);
        assert_null(f->api);
        assert_int_equal(f->aborts, 2);
        assert_int_equal(stat(f->sock, &st), -1); /* unlinked */
}

static int client_many(struct fixture *f, void *arg) {
        CURL *c = curl_easy_init(), *easy[N_GATHER];
        struct reply r = {}, replies[N_GATHER] = {};
        CURLM *multi = curl_multi_init();
        bool seen[N_GATHER] = {};
        int running = 0;
        long connects = 0;

        /* 100 sequential on one keep-alive connection... */
        for (int i = 0; i < 100; i++) {
                char path[64];
                snprintf(path, sizeof(path), "/v1/echo/seq/%d", i);
                CHECK(http(c, f, "GET", path, NULL, 0, false, &r) == CURLE_OK);
                CHECK(r.status == 200);
                CHECK(json_str(&r, "p1") && atoi(json_str(&r, "p1")) == i);
        }
        curl_easy_getinfo(c, CURLINFO_NUM_CONNECTS, &connects);
        /* ...and 100 on fresh connections. */
        for (int i = 0; i < 100; i++) {
                curl_easy_reset(c);
                reply_clear(&r);
                easy_setup(c, f, "GET", "/v1/echo/fresh/x", &r);
                curl_easy_setopt(c, CURLOPT_FRESH_CONNECT, 1L);
                curl_easy_setopt(c, CURLOPT_FORBID_REUSE, 1L);
                CHECK(curl_easy_perform(c) == CURLE_OK);
                curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
                CHECK(r.status == 200);
        }

        /* 20 at once: the server answers none until it holds all 20. */
        for (int i = 0; i < N_GATHER; i++) {
                easy[i] = curl_easy_init();
                easy_setup(easy[i], f, "GET", "/v1/gather", &replies[i]);
                curl_multi_add_handle(multi, easy[i]);
        }
        do {
                CHECK(curl_multi_perform(multi, &running) == CURLM_OK);
                if (running)
                        CHECK(curl_multi_poll(multi, NULL, 0, 1000, NULL) == CURLM_OK);
        } while (running > 0 && child_failures == 0);
        for (int i = 0; i < N_GATHER; i++) {
                cJSON *j;
                const cJSON *idx;

                curl_easy_getinfo(easy[i], CURLINFO_RESPONSE_CODE, &replies[i].status);
                CHECK(replies[i].status == 200);
                j = replies[i].body ? cJSON_Parse(replies[i].body) : NULL;
                idx = cJSON_GetObjectItemCaseSensitive(j, "index");
                CHECK(cJSON_IsNumber(idx) && idx->valueint >= 0 && idx->valueint < N_GATHER &&
                      !seen[idx->valueint]);
                if (cJSON_IsNumber(idx) && idx->valueint >= 0 && idx->valueint < N_GATHER)
                        seen[idx->valueint] = true;
                cJSON_Delete(j);
                curl_multi_remove_handle(multi, easy[i]);
                curl_easy_cleanup(easy[i]);
                reply_clear(&replies[i]);
        }
        curl_multi_cleanup(multi);
        reply_clear(&r);
        curl_easy_cleanup(c);
        return child_failures;
}

static void test_many_requests(void **state) {
        struct fixture *f = *state;
        _cleanup_free_ char *text = NULL;

        api_start(f, 0660, (gid_t) -1, true);
        run_client(f, client_many, NULL);
        assert_int_equal(f->echo_calls, 200);
        assert_int_equal(metrics_render(f->metrics, &text, NULL), 0);
        assert_non_null(strstr(text, "pinion_api_requests_total{route=\"/v1/echo/{}/{}\",code=\"200\"} 200\n"));
        assert_non_null(strstr(text, "pinion_api_requests_total{route=\"/v1/gather\",code=\"200\"} 20\n"));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_long_poll, fixture_setup, fixture_teardown),
                cmocka_unit_test_setup_teardown(test_stream, fixture_setup, fixture_teardown),
                cmocka_unit_test_setup_teardown(test_abort, fixture_setup, fixture_teardown),
                cmocka_unit_test_setup_teardown(test_free_with_held_requests, fixture_setup, fixture_teardown),
                cmocka_unit_test_setup_teardown(test_many_requests, fixture_setup, fixture_teardown),
        };
        int failed;

        api_harness_init();
        failed = cmocka_run_group_tests_name("api-streams", tests, NULL, NULL);
        api_harness_done();
        return failed;
}
