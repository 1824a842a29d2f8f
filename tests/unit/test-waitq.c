/* SPDX-License-Identifier: MIT */
/* waitq.c against real clients: the API and the queue run on an sd-event loop in this process;
 * the client is a forked child that holds several requests at once (libcurl multi) and drives
 * the queue through control routes (/wake, /fail, /broadcast, /free), checking every answer it
 * gets. The child exits with its number of failures. */

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "api.h"
#include "waitq.h"

#define GUARD_USEC (30 * USEC_PER_SEC)

struct fixture {
        char dir[64];
        char sock[128];
        sd_event *event;
        struct api *api;
        struct waitq *q;
        uint64_t value; /* what a long-poll waits to change: cookies equal to it stay held */
        unsigned expired;
        bool done, timed_out;
        int child_status;
};

/* ---- the queue's owner ---- */

static int on_wake(struct api_request *req, const char *key, uint64_t cookie, void *userdata) {
        struct fixture *f = userdata;
        if (cookie == f->value)
                return 0;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "key", key);
        cJSON_AddNumberToObject(o, "value", (double) f->value);
        /* The waiter is out of the queue while this runs. */
        cJSON_AddNumberToObject(o, "waiting", waitq_count(f->q, key));
        (void) api_reply_json(req, 200, o);
        return 1;
}

static void on_expire(struct api_request *req, const char *key, usec_t timeout, void *userdata) {
        struct fixture *f = userdata;
        f->expired++;
        (void) api_reply_error(req, 504, "%s: nothing after %llums", key, (unsigned long long) (timeout / USEC_PER_MSEC));
}

static const struct waitq_ops ops = { .what = "thing", .wake = on_wake, .expire = on_expire };

static uint64_t query_number(struct api_request *r, const char *name) {
        const char *v = api_request_query(r, name);
        return v ? strtoull(v, NULL, 10) : 0;
}

/* GET /wait/KEY?cookie=N&ms=M */
static int h_wait(struct api_request *r, void *userdata) {
        struct fixture *f = userdata;
        return waitq_hold(f->q, r, api_request_param(r, 0), query_number(r, "cookie"),
                          query_number(r, "ms") * USEC_PER_MSEC);
}

/* GET /stream/KEY: a stream that starts with one line of its own. */
static int h_stream(struct api_request *r, void *userdata) {
        struct fixture *f = userdata;
        struct waiter *w = NULL;
        int k = waitq_stream(f->q, r, api_request_param(r, 0), "application/x-ndjson", &w);
        if (k == -EBUSY)
                return 0;
        assert_int_equal(k, 0);
        assert_int_equal(waitq_stream_write(w, "hello\n", 6), 0);
        return 0;
}

/* GET /wake/KEY?value=N: wakes KEY's long-polls whose cookie is not N. */
static int h_wake(struct api_request *r, void *userdata) {
        struct fixture *f = userdata;
        f->value = query_number(r, "value");
        waitq_wake(f->q, api_request_param(r, 0));
        return api_reply_text(r, 200, "text/plain", strdup("ok"), 2);
}

/* GET /fail/KEY (KEY "-": every key) */
static int h_fail(struct api_request *r, void *userdata) {
        struct fixture *f = userdata;
        const char *key = api_request_param(r, 0);
        waitq_fail(f->q, streq(key, "-") ? NULL : key, 410, "%s is gone", key);
        return api_reply_text(r, 200, "text/plain", strdup("ok"), 2);
}

/* GET /broadcast/KEY?line=TEXT (KEY "-": every key) */
static int h_broadcast(struct api_request *r, void *userdata) {
        struct fixture *f = userdata;
        const char *key = api_request_param(r, 0), *line = api_request_query(r, "line");
        char buf[256];
        int n = snprintf(buf, sizeof(buf), "%s\n", line);
        waitq_broadcast(f->q, streq(key, "-") ? NULL : key, buf, (size_t) n);
        return api_reply_text(r, 200, "text/plain", strdup("ok"), 2);
}

/* GET /count/KEY (KEY "-": all) */
static int h_count(struct api_request *r, void *userdata) {
        struct fixture *f = userdata;
        const char *key = api_request_param(r, 0);
        char *text = NULL;
        int n = asprintf(&text, "%u", waitq_count(f->q, streq(key, "-") ? NULL : key));
        return api_reply_text(r, 200, "text/plain", text, n < 0 ? 0 : (size_t) n);
}

/* GET /free: the queue goes away with what it holds. */
static int h_free(struct api_request *r, void *userdata) {
        struct fixture *f = userdata;
        f->q = waitq_free(f->q);
        return api_reply_text(r, 200, "text/plain", strdup("ok"), 2);
}

static const struct api_route routes[] = {
        { "GET", "/wait/{}", h_wait, false },
        { "GET", "/stream/{}", h_stream, false },
        { "GET", "/wake/{}", h_wake, false },
        { "GET", "/fail/{}", h_fail, false },
        { "GET", "/broadcast/{}", h_broadcast, false },
        { "GET", "/count/{}", h_count, false },
        { "GET", "/free", h_free, false },
};

/* ---- fixture ---- */

static int setup(void **state) {
        struct fixture *f = calloc(1, sizeof(*f));
        const struct waitq_limits limits = { .per_key = 3, .total = 5 };

        assert_non_null(f);
        strcpy(f->dir, "/tmp/test-waitq-XXXXXX");
        assert_non_null(mkdtemp(f->dir));
        snprintf(f->sock, sizeof(f->sock), "%s/pinion.sock", f->dir);
        assert_int_equal(sd_event_new(&f->event), 0);
        struct api_options opts = { .socket_path = f->sock, .socket_mode = 0600, .socket_gid = (gid_t) -1, .listen_fd = -1 };
        assert_int_equal(api_new(f->event, &opts, NULL, &f->api), 0);
        assert_int_equal(api_add_routes(f->api, routes, ELEMENTSOF(routes), f, NULL), 0);
        assert_int_equal(waitq_new(f->event, &ops, &limits, f, &f->q), 0);
        *state = f;
        return 0;
}

static int teardown(void **state) {
        struct fixture *f = *state;
        f->q = waitq_free(f->q);
        f->api = api_free(f->api);
        (void) unlink(f->sock);
        (void) rmdir(f->dir);
        sd_event_unref(f->event);
        free(f);
        return 0;
}

static int on_child(sd_event_source *s, const siginfo_t *si, void *userdata) {
        struct fixture *f = userdata;
        f->child_status = si->si_code == CLD_EXITED ? si->si_status : 128 + si->si_status;
        f->done = true;
        sd_event_source_disable_unref(s);
        return 0;
}

static int on_guard(sd_event_source *s, uint64_t usec, void *userdata) {
        struct fixture *f = userdata;
        f->timed_out = f->done = true;
        return 0;
}

typedef int (*client_fn)(struct fixture *f);

static void run_client(struct fixture *f, client_fn client) {
        sd_event_source *guard = NULL;
        pid_t pid = fork();

        assert_true(pid >= 0);
        if (pid == 0) {
                int n = client(f);
                _exit(MIN(n, 100));
        }
        f->done = f->timed_out = false;
        assert_int_equal(sd_event_add_child(f->event, NULL, pid, WEXITED, on_child, f), 0);
        assert_int_equal(sd_event_add_time_relative(f->event, &guard, CLOCK_MONOTONIC, GUARD_USEC, 0, on_guard, f), 0);
        while (!f->done)
                assert_true(sd_event_run(f->event, UINT64_MAX) >= 0);
        sd_event_source_disable_unref(guard);
        assert_false(f->timed_out);
        assert_int_equal(f->child_status, 0);
}

/* ---- the client (runs in the child) ---- */

static int failures;

#define CHECK(cond)                                                                                     \
        do {                                                                                            \
                if (!(cond)) {                                                                          \
                        fprintf(stderr, "# child: %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
                        failures++;                                                                     \
                }                                                                                       \
        } while (0)

struct call {
        CURL *easy;
        long status;
        char body[1024];
        size_t size;
        bool done;
};

static size_t on_body(char *p, size_t size, size_t n, void *userdata) {
        struct call *c = userdata;
        size_t k = MIN(size * n, sizeof(c->body) - 1 - c->size);
        memcpy(c->body + c->size, p, k);
        c->size += k;
        c->body[c->size] = 0;
        return size * n;
}

static void call_init(struct call *c, const struct fixture *f, const char *path) {
        char url[256];
        *c = (struct call) { .easy = curl_easy_init() };
        snprintf(url, sizeof(url), "http://localhost%s", path);
        curl_easy_setopt(c->easy, CURLOPT_UNIX_SOCKET_PATH, f->sock);
        curl_easy_setopt(c->easy, CURLOPT_URL, url);
        curl_easy_setopt(c->easy, CURLOPT_TIMEOUT, 20L);
        curl_easy_setopt(c->easy, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(c->easy, CURLOPT_WRITEDATA, c);
        curl_easy_setopt(c->easy, CURLOPT_PRIVATE, c);
}

/* One request, answered before it returns. */
static long get(const struct fixture *f, const char *path, char *body, size_t size) {
        struct call c;
        call_init(&c, f, path);
        CURLcode rc = curl_easy_perform(c.easy);
        if (rc != CURLE_OK)
                fprintf(stderr, "# child: %s: %s\n", path, curl_easy_strerror(rc));
        CHECK(rc == CURLE_OK);
        curl_easy_getinfo(c.easy, CURLINFO_RESPONSE_CODE, &c.status);
        curl_easy_cleanup(c.easy);
        if (body) {
                size_t n = MIN(size - 1, c.size);
                memcpy(body, c.body, n);
                body[n] = 0;
        }
        return c.status;
}

static unsigned count(const struct fixture *f, const char *key) {
        char path[64], body[32];
        snprintf(path, sizeof(path), "/count/%s", key);
        CHECK(get(f, path, body, sizeof(body)) == 200);
        return (unsigned) strtoul(body, NULL, 10);
}

/* Drives the held requests until want of them are done (or `rounds` × 50ms pass). */
static unsigned pump_rounds(CURLM *m, unsigned want, unsigned rounds) {
        unsigned done = 0;
        int running = 0, left;
        for (unsigned i = 0; i < rounds && done < want; i++) {
                curl_multi_perform(m, &running);
                for (CURLMsg *msg; (msg = curl_multi_info_read(m, &left));) {
                        struct call *c = NULL;
                        if (msg->msg != CURLMSG_DONE)
                                continue;
                        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **) &c);
                        curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &c->status);
                        c->done = true;
                        done++;
                }
                if (done < want)
                        curl_multi_poll(m, NULL, 0, 50, NULL);
        }
        return done;
}

static unsigned pump(CURLM *m, unsigned want) {
        return pump_rounds(m, want, 200);
}

static void hold(const struct fixture *f, CURLM *m, struct call *c, const char *path) {
        call_init(c, f, path);
        curl_multi_add_handle(m, c->easy);
}

static void release(CURLM *m, struct call *calls, size_t n) {
        for (size_t i = 0; i < n; i++) {
                curl_multi_remove_handle(m, calls[i].easy);
                curl_easy_cleanup(calls[i].easy);
        }
}

/* Waits until the server holds n waiters under key. */
static void until_count(const struct fixture *f, CURLM *m, const char *key, unsigned n) {
        for (unsigned i = 0; i < 200 && count(f, key) != n; i++)
                (void) pump_rounds(m, 1, 1);
        CHECK(count(f, key) == n);
}

static int client_wake(struct fixture *f) {
        CURLM *m = curl_multi_init();
        struct call c[3];

        /* Two under a (one has seen value 7 already), one under b. */
        hold(f, m, &c[0], "/wait/a?cookie=0&ms=10000");
        hold(f, m, &c[1], "/wait/a?cookie=7&ms=10000");
        hold(f, m, &c[2], "/wait/b?cookie=0&ms=10000");
        until_count(f, m, "-", 3);

        /* Value 7 for a: only the waiter that has not seen it is answered. */
        CHECK(get(f, "/wake/a?value=7", NULL, 0) == 200);
        CHECK(pump(m, 1) == 1);
        CHECK(c[0].done && c[0].status == 200 && strstr(c[0].body, "\"key\":\"a\""));
        CHECK(strstr(c[0].body, "\"waiting\":1")); /* the other one, not itself */
        CHECK(!c[1].done && !c[2].done);
        CHECK(count(f, "a") == 1 && count(f, "b") == 1);

        /* Value 8: the second one too; b's stays. */
        CHECK(get(f, "/wake/a?value=8", NULL, 0) == 200);
        CHECK(pump(m, 1) == 1);
        CHECK(c[1].done && c[1].status == 200);
        CHECK(!c[2].done);

        CHECK(get(f, "/wake/b?value=9", NULL, 0) == 200);
        CHECK(pump(m, 1) == 1);
        CHECK(c[2].done && c[2].status == 200 && strstr(c[2].body, "\"key\":\"b\""));
        CHECK(count(f, "-") == 0);
        release(m, c, ELEMENTSOF(c));
        curl_multi_cleanup(m);
        return failures;
}

static void test_wake(void **state) {
        run_client(*state, client_wake);
}

static int client_deadline_and_abort(struct fixture *f) {
        CURLM *m = curl_multi_init();
        struct call c[2];

        hold(f, m, &c[0], "/wait/a?ms=200");
        hold(f, m, &c[1], "/wait/b?ms=10000");
        until_count(f, m, "-", 2);
        CHECK(pump(m, 1) == 1);
        CHECK(c[0].done && c[0].status == 504);
        CHECK(strstr(c[0].body, "a: nothing after 200ms"));
        CHECK(count(f, "a") == 0);

        /* The client of b leaves: its waiter goes, without an answer. */
        curl_multi_remove_handle(m, c[1].easy);
        curl_easy_cleanup(c[1].easy);
        until_count(f, m, "b", 0);
        curl_multi_remove_handle(m, c[0].easy);
        curl_easy_cleanup(c[0].easy);
        curl_multi_cleanup(m);
        return failures;
}

static void test_deadline_and_abort(void **state) {
        struct fixture *f = *state;
        run_client(f, client_deadline_and_abort);
        assert_int_equal(f->expired, 1);
        assert_int_equal(waitq_count(f->q, NULL), 0);
}

static int client_caps(struct fixture *f) {
        CURLM *m = curl_multi_init();
        char body[512];
        struct call c[5];

        /* per_key 3, total 5 */
        for (unsigned i = 0; i < 3; i++)
                hold(f, m, &c[i], "/wait/a?ms=10000");
        until_count(f, m, "a", 3);
        CHECK(get(f, "/wait/a?ms=10000", body, sizeof(body)) == 429);
        CHECK(strstr(body, "thing a: too many requests waiting for it (at most 3); retry later"));
        hold(f, m, &c[3], "/wait/b?ms=10000");
        hold(f, m, &c[4], "/stream/c");
        until_count(f, m, "-", 5);
        CHECK(get(f, "/wait/d?ms=10000", body, sizeof(body)) == 429);
        CHECK(strstr(body, "too many requests waiting (at most 5 in all); retry later"));
        CHECK(get(f, "/stream/d", body, sizeof(body)) == 429);

        /* A failed key frees its places: long-polls get the error, the stream ends. */
        CHECK(get(f, "/fail/-", NULL, 0) == 200);
        CHECK(pump(m, 5) == 5);
        for (unsigned i = 0; i < 4; i++)
                CHECK(c[i].status == 410 && strstr(c[i].body, "- is gone"));
        CHECK(c[4].status == 200 && streq(c[4].body, "hello\n"));
        CHECK(count(f, "-") == 0);
        CHECK(get(f, "/wait/d?ms=50", NULL, 0) == 504);
        release(m, c, ELEMENTSOF(c));
        curl_multi_cleanup(m);
        return failures;
}

static void test_caps(void **state) {
        run_client(*state, client_caps);
}

static int client_streams(struct fixture *f) {
        CURLM *m = curl_multi_init();
        struct call c[4];

        hold(f, m, &c[0], "/stream/a");
        hold(f, m, &c[1], "/stream/a");
        hold(f, m, &c[2], "/stream/b");
        hold(f, m, &c[3], "/wait/a?ms=10000");
        until_count(f, m, "-", 4);
        CHECK(get(f, "/broadcast/a?line=one", NULL, 0) == 200);
        CHECK(get(f, "/broadcast/-?line=two", NULL, 0) == 200);
        /* Waking a key does nothing to its streams. */
        CHECK(get(f, "/wake/a?value=1", NULL, 0) == 200);
        CHECK(pump(m, 1) == 1);
        CHECK(c[3].done && c[3].status == 200);
        /* Failing a key ends its streams cleanly, and only its own. */
        CHECK(get(f, "/fail/a", NULL, 0) == 200);
        CHECK(pump(m, 2) == 2);
        CHECK(c[0].done && c[0].status == 200 && streq(c[0].body, "hello\none\ntwo\n"));
        CHECK(c[1].done && streq(c[1].body, "hello\none\ntwo\n"));
        CHECK(!c[2].done && count(f, "b") == 1);
        /* Freeing the queue ends the rest. */
        CHECK(get(f, "/free", NULL, 0) == 200);
        CHECK(pump(m, 1) == 1);
        CHECK(c[2].done && c[2].status == 200 && streq(c[2].body, "hello\ntwo\n"));
        release(m, c, ELEMENTSOF(c));
        curl_multi_cleanup(m);
        return failures;
}

static void test_streams(void **state) {
        run_client(*state, client_streams);
}

static int client_free_with_waiters(struct fixture *f) {
        CURLM *m = curl_multi_init();
        struct call c[1];

        hold(f, m, &c[0], "/wait/a?ms=10000");
        until_count(f, m, "a", 1);
        CHECK(get(f, "/free", NULL, 0) == 200);
        CHECK(pump(m, 1) == 1);
        CHECK(c[0].status == 503 && strstr(c[0].body, "the agent is stopping"));
        release(m, c, ELEMENTSOF(c));
        curl_multi_cleanup(m);
        return failures;
}

static void test_free_with_waiters(void **state) {
        struct fixture *f = *state;
        run_client(f, client_free_with_waiters);
        assert_null(f->q);
}

static void test_arguments(void **state) {
        struct fixture *f = *state;
        struct waitq *q = NULL;
        assert_int_equal(waitq_new(f->event, &ops, &(struct waitq_limits) { .per_key = 0, .total = 1 }, f, &q), -EINVAL);
        assert_int_equal(waitq_new(NULL, &ops, &(struct waitq_limits) { .per_key = 1, .total = 1 }, f, &q), -EINVAL);
        assert_int_equal(waitq_count(NULL, NULL), 0);
        waitq_wake(NULL, "a");
        waitq_fail(NULL, NULL, 500, "x");
        waitq_broadcast(NULL, NULL, "x", 1);
        assert_null(waitq_free(NULL));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_wake, setup, teardown),
                cmocka_unit_test_setup_teardown(test_deadline_and_abort, setup, teardown),
                cmocka_unit_test_setup_teardown(test_caps, setup, teardown),
                cmocka_unit_test_setup_teardown(test_streams, setup, teardown),
                cmocka_unit_test_setup_teardown(test_free_with_waiters, setup, teardown),
                cmocka_unit_test_setup_teardown(test_arguments, setup, teardown),
        };
        sigset_t mask;
        /* sd_event_add_child() needs SIGCHLD blocked. */
        sigemptyset(&mask);
        sigaddset(&mask, SIGCHLD);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        curl_global_init(CURL_GLOBAL_DEFAULT);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
