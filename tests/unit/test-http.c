/* SPDX-License-Identifier: MIT */

/* agent/lib/http.c against a real HTTP server: libmicrohttpd, started in this process on
 * 127.0.0.1 with a thread per connection (so a slow handler blocks only its own request). */

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/socket.h>

#include "http.h"

#define LARGE_SIZE 100000
#define STREAM_PIECES 5
#define WAIT (10 * USEC_PER_SEC)

static struct MHD_Daemon *server;
static uint16_t server_port;
static atomic_bool server_stopping;
static char large[LARGE_SIZE];

/* ---- the server ---- */

/* Sleeps, but not past the end of the test run. */
static void nap(usec_t usec) {
        usec_t until = now_usec(CLOCK_MONOTONIC) + usec;

        while (!atomic_load(&server_stopping) && now_usec(CLOCK_MONOTONIC) < until)
                (void) usleep(10 * 1000);
}

static ssize_t read_large(_unused_ void *cls, uint64_t pos, char *buf, size_t max) {
        size_t n;

        if (pos >= LARGE_SIZE)
                return MHD_CONTENT_READER_END_OF_STREAM;
        n = MIN(max, (size_t) (LARGE_SIZE - pos));
        memset(buf, 'x', n);
        return (ssize_t) n;
}

static ssize_t read_stream(void *cls, _unused_ uint64_t pos, char *buf, size_t max) {
        unsigned *n = cls;
        int k;

        if (*n >= STREAM_PIECES)
                return MHD_CONTENT_READER_END_OF_STREAM;
        if (*n > 0)
                nap(50 * USEC_PER_MSEC);
        k = snprintf(buf, max, "piece %u\n", *n);
        (*n)++;
        return k;
}

static enum MHD_Result respond(struct MHD_Connection *conn, unsigned status, struct MHD_Response *r) {
        enum MHD_Result ret;

        if (!r)
                return MHD_NO;
        ret = MHD_queue_response(conn, status, r);
        MHD_destroy_response(r);
        return ret;
}

static enum MHD_Result respond_text(struct MHD_Connection *conn, unsigned status, const char *text,
                                    const char *retry_after) {
        struct MHD_Response *r;

        r = MHD_create_response_from_buffer(strlen(text), (void *) text, MHD_RESPMEM_MUST_COPY);
        if (!r)
                return MHD_NO;
        if (retry_after)
                (void) MHD_add_response_header(r, "Retry-After", retry_after);
        return respond(conn, status, r);
}

static enum MHD_Result handle(_unused_ void *cls, struct MHD_Connection *conn, const char *url,
                              _unused_ const char *method, _unused_ const char *version,
                              _unused_ const char *upload_data, _unused_ size_t *upload_data_size,
                              _unused_ void **con_cls) {
        struct MHD_Response *r;

        if (streq(url, "/body")) {
                r = MHD_create_response_from_buffer(strlen("hello, pinion"), (void *) "hello, pinion",
                                                    MHD_RESPMEM_PERSISTENT);
                if (r) {
                        (void) MHD_add_response_header(r, "X-Pinion", "yes");
                        (void) MHD_add_response_header(r, "ETag", "\"v1\"");
                }
                return respond(conn, 200, r);
        }
        if (streq(url, "/status/404"))
                return respond_text(conn, 404, "not found", NULL);
        if (streq(url, "/status/500"))
                return respond_text(conn, 500, "broken", NULL);
        if (streq(url, "/status/503"))
                return respond_text(conn, 503, "busy", "7");
        if (streq(url, "/retry-date")) {
                char date[64];
                time_t when = time(NULL) + 30;
                struct tm tm;

                (void) gmtime_r(&when, &tm);
                (void) strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT", &tm);
                return respond_text(conn, 503, "busy", date);
        }
        if (streq(url, "/retry-bad"))
                return respond_text(conn, 503, "busy", "soon");
        if (streq(url, "/large"))
                return respond(conn, 200, MHD_create_response_from_buffer(LARGE_SIZE, large,
                                                                          MHD_RESPMEM_PERSISTENT));
        if (streq(url, "/large-chunked"))
                return respond(conn, 200, MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096,
                                                                            read_large, NULL, NULL));
        if (streq(url, "/slow")) {
                nap(3 * USEC_PER_SEC);
                return respond_text(conn, 200, "slow", NULL);
        }
        if (streq(url, "/stream")) {
                unsigned *n = calloc(1, sizeof(unsigned));

                if (!n)
                        return MHD_NO;
                r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 256, read_stream, n, free);
                if (!r)
                        free(n);
                return respond(conn, 200, r);
        }
        if (streq(url, "/echo"))
                return respond_text(conn, 200,
                                    strempty(MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Echo")),
                                    NULL);
        return respond_text(conn, 404, "no such handler", NULL);
}

static int server_start(_unused_ void **state) {
        struct sockaddr_in sa = {
                .sin_family = AF_INET,
                .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
        };
        const union MHD_DaemonInfo *info;

        memset(large, 'x', sizeof(large));
        server = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                                  MHD_USE_AUTO,
                                  0, NULL, NULL, handle, NULL,
                                  MHD_OPTION_SOCK_ADDR, (struct sockaddr *) &sa,
                                  MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned) 512,
                                  MHD_OPTION_END);
        if (!server)
                return -1;
        info = MHD_get_daemon_info(server, MHD_DAEMON_INFO_BIND_PORT);
        if (!info || info->port == 0)
                return -1;
        server_port = info->port;
        return 0;
}

static int server_stop(_unused_ void **state) {
        atomic_store(&server_stopping, true);
        MHD_stop_daemon(server);
        return 0;
}

/* ---- the loop and the client, fresh for every test ---- */

struct fixture {
        sd_event *event;
        struct http_client *client;
};

static int setup(void **state) {
        struct fixture *f = calloc(1, sizeof(*f));

        if (!f || sd_event_new(&f->event) < 0 || http_client_new(f->event, &f->client) < 0)
                return -1;
        *state = f;
        return 0;
}

static int teardown(void **state) {
        struct fixture *f = *state;

        http_client_free(f->client);
        sd_event_unref(f->event);
        free(f);
        return 0;
}

/* Runs the loop until *counter reaches target; false at the deadline. */
static bool run_until(sd_event *e, const unsigned *counter, unsigned target, usec_t timeout) {
        usec_t deadline = now_usec(CLOCK_MONOTONIC) + timeout;

        while (*counter < target) {
                usec_t n = now_usec(CLOCK_MONOTONIC);

                if (n >= deadline)
                        return false;
                assert_true(sd_event_run(e, MIN(deadline - n, 100 * USEC_PER_MSEC)) >= 0);
        }
        return true;
}

static void run_for(sd_event *e, usec_t duration) {
        static const unsigned never = 0;

        assert_false(run_until(e, &never, 1, duration));
}

static CURL *easy_new(const char *path) {
        char url[128];
        CURL *easy = curl_easy_init();

        assert_non_null(easy);
        (void) snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", server_port, path);
        assert_int_equal(curl_easy_setopt(easy, CURLOPT_URL, url), CURLE_OK);
        /* Never a proxy from the environment: only 127.0.0.1 is ever contacted. */
        assert_int_equal(curl_easy_setopt(easy, CURLOPT_PROXY, ""), CURLE_OK);
        return easy;
}

struct result {
        unsigned calls;
        int error;
        CURLcode curl_code;
        long status;
        bool has_message;
        char *body; /* copy */
        size_t body_size;
        bool body_null;
        char *x_pinion, *etag, *missing;
        usec_t retry_after;
};

static void result_clear(struct result *r) {
        free(r->body);
        free(r->x_pinion);
        free(r->etag);
        free(r->missing);
        *r = (struct result) {};
}

static char *strdup_or_null(const char *s) {
        return s ? strdup(s) : NULL;
}

static void on_done(_unused_ struct http_client *c, const struct http_response *resp, void *userdata) {
        struct result *r = userdata;

        r->calls++;
        r->error = resp->error;
        r->curl_code = resp->curl_code;
        r->status = resp->status;
        r->has_message = resp->error_message != NULL;
        r->body_null = resp->body == NULL;
        if (resp->body) {
                /* NUL-terminated, as promised */
                assert_int_equal(resp->body[resp->body_size], 0);
                free(r->body);
                r->body = strndup(resp->body, resp->body_size);
        }
        r->body_size = resp->body_size;
        r->x_pinion = strdup_or_null(http_response_header(resp, "x-pinion"));
        r->etag = strdup_or_null(http_response_header(resp, "ETag"));
        r->missing = strdup_or_null(http_response_header(resp, "X-Not-There"));
        r->retry_after = http_response_retry_after(resp);
}

static void on_done_forbidden(_unused_ struct http_client *c, _unused_ const struct http_response *resp,
                              _unused_ void *userdata) {
        fail_msg("done callback of a cancelled transfer ran");
}

static void fetch(struct fixture *f, const char *path, size_t max_body, struct result *r) {
        assert_int_equal(http_client_submit(f->client, easy_new(path), max_body, on_done, r, NULL), 0);
        assert_true(run_until(f->event, &r->calls, 1, WAIT));
        assert_int_equal(r->calls, 1);
}

/* ---- tests ---- */

static void test_body_and_status(void **state) {
        struct fixture *f = *state;
        struct result r = {};

        fetch(f, "/body", 4096, &r);
        assert_int_equal(r.error, 0);
        assert_int_equal(r.curl_code, CURLE_OK);
        assert_false(r.has_message);
        assert_int_equal(r.status, 200);
        assert_string_equal(r.body, "hello, pinion");
        assert_int_equal(r.body_size, strlen("hello, pinion"));
        assert_int_equal(http_client_active(f->client), 0);
        result_clear(&r);

        /* HTTP errors are not transport errors */
        fetch(f, "/status/404", 4096, &r);
        assert_int_equal(r.error, 0);
        assert_int_equal(r.status, 404);
        assert_string_equal(r.body, "not found");
        result_clear(&r);

        fetch(f, "/status/500", 4096, &r);
        assert_int_equal(r.error, 0);
        assert_int_equal(r.status, 500);
        result_clear(&r);
}

static void test_headers(void **state) {
        struct fixture *f = *state;
        struct result r = {};

        fetch(f, "/body", 4096, &r);
        assert_string_equal(r.x_pinion, "yes"); /* looked up case-insensitively */
        assert_string_equal(r.etag, "\"v1\"");
        assert_null(r.missing);
        assert_int_equal(r.retry_after, 0);
        result_clear(&r);
}

static void test_request_header_echo(void **state) {
        struct fixture *f = *state;
        struct curl_slist *headers = curl_slist_append(NULL, "X-Echo: hello from pinion");
        struct result r = {};
        CURL *easy = easy_new("/echo");

        assert_non_null(headers);
        assert_int_equal(curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers), CURLE_OK);
        assert_int_equal(http_client_submit(f->client, easy, 4096, on_done, &r, NULL), 0);
        assert_true(run_until(f->event, &r.calls, 1, WAIT));
        assert_int_equal(r.status, 200);
        assert_string_equal(r.body, "hello from pinion");
        curl_slist_free_all(headers);
        result_clear(&r);
}

static void test_retry_after(void **state) {
        struct fixture *f = *state;
        struct result r = {};

        fetch(f, "/status/503", 4096, &r);
        assert_int_equal(r.status, 503);
        assert_int_equal(r.retry_after, 7 * USEC_PER_SEC);
        result_clear(&r);

        /* HTTP-date 30s ahead; whole seconds on the wire and a little time in flight */
        fetch(f, "/retry-date", 4096, &r);
        assert_int_equal(r.status, 503);
        assert_true(r.retry_after > 27 * USEC_PER_SEC);
        assert_true(r.retry_after <= 30 * USEC_PER_SEC);
        result_clear(&r);

        fetch(f, "/retry-bad", 4096, &r);
        assert_int_equal(r.status, 503);
        assert_int_equal(r.retry_after, 0);
        result_clear(&r);
}

static void test_no_response(_unused_ void **state) {
        struct http_response resp = {};

        assert_null(http_response_header(&resp, "ETag"));
        assert_null(http_response_header(NULL, "ETag"));
        assert_int_equal(http_response_retry_after(&resp), 0);
        assert_int_equal(http_response_retry_after(NULL), 0);
}

static void test_max_body(void **state) {
        struct fixture *f = *state;
        struct result r = {};

        /* Content-Length known: refused by curl before the body arrives */
        fetch(f, "/large", 1000, &r);
        assert_int_equal(r.error, -EFBIG);
        assert_true(r.has_message);
        result_clear(&r);

        /* chunked: refused by the client's buffer */
        fetch(f, "/large-chunked", 1000, &r);
        assert_int_equal(r.error, -EFBIG);
        assert_int_equal(r.curl_code, CURLE_WRITE_ERROR);
        assert_true(r.has_message);
        assert_true(r.body_size <= 1000);
        result_clear(&r);

        /* exactly max_body is fine */
        fetch(f, "/large-chunked", LARGE_SIZE, &r);
        assert_int_equal(r.error, 0);
        assert_int_equal(r.body_size, LARGE_SIZE);
        result_clear(&r);

        fetch(f, "/large", LARGE_SIZE, &r);
        assert_int_equal(r.error, 0);
        assert_int_equal(r.body_size, LARGE_SIZE);
        assert_int_equal(memcmp(r.body, large, LARGE_SIZE), 0);
        result_clear(&r);
}

static void test_connection_refused(void **state) {
        struct fixture *f = *state;
        struct sockaddr_in sa = {
                .sin_family = AF_INET,
                .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
        };
        socklen_t len = sizeof(sa);
        struct result r = {};
        char url[128];
        CURL *easy;
        int fd;

        /* a port that was free a moment ago and has nobody listening now */
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(fd >= 0);
        assert_int_equal(bind(fd, (struct sockaddr *) &sa, sizeof(sa)), 0);
        assert_int_equal(getsockname(fd, (struct sockaddr *) &sa, &len), 0);
        safe_close(fd);

        easy = easy_new("/");
        (void) snprintf(url, sizeof(url), "http://127.0.0.1:%u/", ntohs(sa.sin_port));
        assert_int_equal(curl_easy_setopt(easy, CURLOPT_URL, url), CURLE_OK);
        assert_int_equal(http_client_submit(f->client, easy, 4096, on_done, &r, NULL), 0);
        assert_true(run_until(f->event, &r.calls, 1, WAIT));
        assert_int_equal(r.error, -ECONNREFUSED);
        assert_int_equal(r.curl_code, CURLE_COULDNT_CONNECT);
        assert_int_equal(r.status, 0);
        assert_true(r.has_message);
        result_clear(&r);
}

static void test_timeout(void **state) {
        struct fixture *f = *state;
        struct result r = {};
        CURL *easy = easy_new("/slow");
        usec_t start = now_usec(CLOCK_MONOTONIC), took;

        assert_int_equal(curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, 200L), CURLE_OK);
        assert_int_equal(http_client_submit(f->client, easy, 4096, on_done, &r, NULL), 0);
        assert_true(run_until(f->event, &r.calls, 1, WAIT));
        took = now_usec(CLOCK_MONOTONIC) - start;
        assert_int_equal(r.error, -ETIMEDOUT);
        assert_int_equal(r.curl_code, CURLE_OPERATION_TIMEDOUT);
        assert_true(r.has_message);
        /* driven by our timer source: not before curl's deadline, and not at the server's pace */
        assert_true(took >= 200 * USEC_PER_MSEC);
        assert_true(took < 2 * USEC_PER_SEC);
        result_clear(&r);
}

struct stream {
        char data[256];
        size_t size;
        unsigned writes;
        usec_t first, last;
        unsigned writes_at_done;
        bool abort;
        struct result result;
        /* for the tests that act from inside a write function */
        struct fixture *fixture;
        struct http_transfer *victim;
        struct stream *victim_stream;
        unsigned victim_writes_at_cancel;
        struct result *extra;
        bool free_client;
};

static size_t stream_write(char *ptr, size_t size, size_t nmemb, void *userdata) {
        struct stream *s = userdata;
        size_t n = size * nmemb;

        if (s->abort)
                return 0;
        assert_true(s->size + n < sizeof(s->data));
        memcpy(s->data + s->size, ptr, n);
        s->size += n;
        s->last = now_usec(CLOCK_MONOTONIC);
        if (s->writes++ == 0)
                s->first = s->last;

        if (s->victim) {
                /* inside curl: both must be deferred until curl returns */
                s->victim_writes_at_cancel = s->victim_stream->writes;
                http_transfer_cancel(TAKE_PTR(s->victim));
                assert_int_equal(http_client_submit(s->fixture->client, easy_new("/body"), 4096, on_done,
                                                    s->extra, NULL), 0);
        }
        if (s->free_client) {
                s->free_client = false;
                s->fixture->client = http_client_free(s->fixture->client);
        }
        return n;
}

static void on_stream_done(struct http_client *c, const struct http_response *resp, void *userdata) {
        struct stream *s = userdata;

        s->writes_at_done = s->writes;
        on_done(c, resp, &s->result);
}

static CURL *easy_stream(struct stream *s) {
        CURL *easy = easy_new("/stream");

        assert_int_equal(curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, stream_write), CURLE_OK);
        assert_int_equal(curl_easy_setopt(easy, CURLOPT_WRITEDATA, s), CURLE_OK);
        return easy;
}

static void test_streaming(void **state) {
        struct fixture *f = *state;
        struct stream s = {};

        assert_int_equal(http_client_submit(f->client, easy_stream(&s), 0, on_stream_done, &s, NULL), 0);
        assert_true(run_until(f->event, &s.result.calls, 1, WAIT));
        assert_int_equal(s.result.error, 0);
        assert_int_equal(s.result.status, 200);
        assert_true(s.result.body_null);
        assert_int_equal(s.result.body_size, 0);

        /* every piece, in order, before done; spread over time, so really streamed */
        assert_int_equal(s.writes_at_done, s.writes);
        s.data[s.size] = 0;
        assert_string_equal(s.data, "piece 0\npiece 1\npiece 2\npiece 3\npiece 4\n");
        assert_true(s.writes >= 2);
        assert_true(s.last - s.first >= 100 * USEC_PER_MSEC);
        result_clear(&s.result);
}

static void test_streaming_abort(void **state) {
        struct fixture *f = *state;
        struct stream s = { .abort = true };

        assert_int_equal(http_client_submit(f->client, easy_stream(&s), 0, on_stream_done, &s, NULL), 0);
        assert_true(run_until(f->event, &s.result.calls, 1, WAIT));
        assert_int_equal(s.result.error, -ECANCELED);
        assert_int_equal(s.result.curl_code, CURLE_WRITE_ERROR);
        result_clear(&s.result);
}

static void test_cancel(void **state) {
        struct fixture *f = *state;
        struct http_transfer *slow = NULL, *early = NULL;
        struct result r = {};

        /* before it ever ran */
        assert_int_equal(http_client_submit(f->client, easy_new("/body"), 4096, on_done_forbidden, NULL,
                                            &early), 0);
        assert_non_null(early);
        assert_int_equal(http_client_active(f->client), 1);
        http_transfer_cancel(early);
        assert_int_equal(http_client_active(f->client), 0);
        http_transfer_cancel(NULL);

        /* while connected and waiting for the server */
        assert_int_equal(http_client_submit(f->client, easy_new("/slow"), 4096, on_done_forbidden, NULL,
                                            &slow), 0);
        run_for(f->event, 200 * USEC_PER_MSEC);
        assert_int_equal(http_client_active(f->client), 1);
        http_transfer_cancel(slow);
        assert_int_equal(http_client_active(f->client), 0);

        /* the client still works, and the cancelled one stays silent */
        fetch(f, "/body", 4096, &r);
        assert_int_equal(r.status, 200);
        run_for(f->event, 200 * USEC_PER_MSEC);
        result_clear(&r);
}

#define PARALLEL 200

static void test_parallel(void **state) {
        struct fixture *f = *state;
        struct result *r = calloc(PARALLEL, sizeof(struct result));
        unsigned done = 0;

        assert_non_null(r);
        for (unsigned i = 0; i < PARALLEL; i++)
                assert_int_equal(http_client_submit(f->client, easy_new("/body"), 4096, on_done, &r[i],
                                                    NULL), 0);
        assert_int_equal(http_client_active(f->client), PARALLEL);

        for (usec_t deadline = now_usec(CLOCK_MONOTONIC) + 4 * WAIT;
             http_client_active(f->client) > 0 && now_usec(CLOCK_MONOTONIC) < deadline;)
                assert_true(sd_event_run(f->event, 100 * USEC_PER_MSEC) >= 0);

        for (unsigned i = 0; i < PARALLEL; i++) {
                assert_int_equal(r[i].calls, 1);
                assert_int_equal(r[i].error, 0);
                assert_int_equal(r[i].status, 200);
                assert_string_equal(r[i].body, "hello, pinion");
                done += r[i].calls;
                result_clear(&r[i]);
        }
        assert_int_equal(done, PARALLEL);
        assert_int_equal(http_client_active(f->client), 0);
        free(r);
}

struct chain {
        unsigned calls;
        unsigned target;
        int errors;
        struct http_transfer *self;
};

static void on_chain_done(struct http_client *c, const struct http_response *resp, void *userdata) {
        struct chain *ch = userdata;

        if (resp->error != 0 || resp->status != 200 || !streq(resp->body, "hello, pinion"))
                ch->errors++;
        /* cancelling the transfer being completed is a no-op */
        http_transfer_cancel(ch->self);
        ch->self = NULL;

        if (++ch->calls < ch->target)
                assert_int_equal(http_client_submit(c, easy_new("/body"), 4096, on_chain_done, ch,
                                                    &ch->self), 0);
        assert_int_equal(http_client_active(c), ch->calls < ch->target ? 1 : 0);
}

static void test_submit_from_callback(void **state) {
        struct fixture *f = *state;
        struct chain ch = { .target = 5 };

        assert_int_equal(http_client_submit(f->client, easy_new("/body"), 4096, on_chain_done, &ch,
                                            &ch.self), 0);
        assert_true(run_until(f->event, &ch.calls, ch.target, WAIT));
        assert_int_equal(ch.errors, 0);
        run_for(f->event, 100 * USEC_PER_MSEC);
        assert_int_equal(ch.calls, ch.target);
}

#define SIBLINGS 20

struct siblings {
        struct http_transfer *t[SIBLINGS];
        unsigned calls;
};

/* The first to finish cancels all the others, whether still running or already finished and
 * queued behind it. */
static void on_sibling_done(struct http_client *c, _unused_ const struct http_response *resp,
                            void *userdata) {
        struct siblings *s = userdata;

        assert_int_equal(s->calls++, 0);
        for (unsigned i = 0; i < SIBLINGS; i++)
                http_transfer_cancel(s->t[i]); /* includes this one: a no-op */
        assert_int_equal(http_client_active(c), 0);
}

static void test_cancel_from_callback(void **state) {
        struct fixture *f = *state;
        struct siblings s = {};

        for (unsigned i = 0; i < SIBLINGS; i++)
                assert_int_equal(http_client_submit(f->client, easy_new(i % 2 ? "/slow" : "/body"), 4096,
                                                    on_sibling_done, &s, &s.t[i]), 0);
        assert_true(run_until(f->event, &s.calls, 1, WAIT));
        run_for(f->event, 300 * USEC_PER_MSEC);
        assert_int_equal(s.calls, 1);
        assert_int_equal(http_client_active(f->client), 0);
}

static void test_cancel_from_write_function(void **state) {
        struct fixture *f = *state;
        struct stream s1 = {}, s2 = {};
        struct result extra = {};

        s1.fixture = f;
        s1.extra = &extra;
        s1.victim_stream = &s2;
        assert_int_equal(http_client_submit(f->client, easy_stream(&s2), 0, on_done_forbidden, NULL,
                                            &s1.victim), 0);
        assert_int_equal(http_client_submit(f->client, easy_stream(&s1), 0, on_stream_done, &s1, NULL), 0);

        assert_true(run_until(f->event, &s1.result.calls, 1, WAIT));
        assert_true(run_until(f->event, &extra.calls, 1, WAIT));
        run_for(f->event, 300 * USEC_PER_MSEC);

        assert_null(s1.victim);
        assert_int_equal(s1.result.error, 0);
        assert_int_equal(s1.writes_at_done, s1.writes);
        assert_int_equal(extra.error, 0);
        assert_string_equal(extra.body, "hello, pinion");
        assert_int_equal(s2.writes, s1.victim_writes_at_cancel); /* silenced once cancelled */
        assert_int_equal(http_client_active(f->client), 0);
        result_clear(&s1.result);
        result_clear(&extra);
}

static void test_free_with_transfers_running(void **state) {
        struct fixture *f = *state;
        struct stream s = {};

        for (unsigned i = 0; i < 5; i++)
                assert_int_equal(http_client_submit(f->client, easy_new("/slow"), 4096, on_done_forbidden,
                                                    NULL, NULL), 0);
        assert_int_equal(http_client_submit(f->client, easy_stream(&s), 0, on_done_forbidden, NULL,
                                            NULL), 0);
        /* connected, the stream half way (its pieces are 50ms apart) */
        run_for(f->event, 100 * USEC_PER_MSEC);
        assert_true(s.writes >= 1);
        assert_int_equal(http_client_active(f->client), 6);

        f->client = http_client_free(f->client);
        assert_null(f->client);
        run_for(f->event, 200 * USEC_PER_MSEC);
}

static void on_done_free_client(struct http_client *c, _unused_ const struct http_response *resp,
                                void *userdata) {
        struct fixture *f = userdata;

        assert_ptr_equal(c, f->client);
        f->client = http_client_free(c);
}

static void test_free_from_callback(void **state) {
        struct fixture *f = *state;

        for (unsigned i = 0; i < 3; i++)
                assert_int_equal(http_client_submit(f->client, easy_new("/slow"), 4096, on_done_forbidden,
                                                    NULL, NULL), 0);
        assert_int_equal(http_client_submit(f->client, easy_new("/body"), 4096, on_done_free_client, f,
                                            NULL), 0);
        for (usec_t deadline = now_usec(CLOCK_MONOTONIC) + WAIT;
             f->client && now_usec(CLOCK_MONOTONIC) < deadline;)
                assert_true(sd_event_run(f->event, 100 * USEC_PER_MSEC) >= 0);
        assert_null(f->client);
        run_for(f->event, 200 * USEC_PER_MSEC);
}

static void test_free_from_write_function(void **state) {
        struct fixture *f = *state;
        struct stream s = { .fixture = f, .free_client = true };

        assert_int_equal(http_client_submit(f->client, easy_new("/slow"), 4096, on_done_forbidden, NULL,
                                            NULL), 0);
        assert_int_equal(http_client_submit(f->client, easy_stream(&s), 0, on_done_forbidden, NULL,
                                            NULL), 0);
        for (usec_t deadline = now_usec(CLOCK_MONOTONIC) + WAIT;
             f->client && now_usec(CLOCK_MONOTONIC) < deadline;)
                assert_true(sd_event_run(f->event, 100 * USEC_PER_MSEC) >= 0);
        assert_null(f->client);
        assert_int_equal(s.writes, 1);
        run_for(f->event, 200 * USEC_PER_MSEC);
        assert_int_equal(s.writes, 1);
}

static void test_submit_invalid(void **state) {
        struct fixture *f = *state;

        assert_int_equal(http_client_submit(f->client, NULL, 4096, on_done, NULL, NULL), -EINVAL);
        /* the easy handle is taken over (and freed) even on failure: ASan would see a leak */
        assert_int_equal(http_client_submit(f->client, easy_new("/body"), 4096, NULL, NULL, NULL), -EINVAL);
        assert_int_equal(http_client_submit(NULL, easy_new("/body"), 4096, on_done, NULL, NULL), -EINVAL);
        assert_int_equal(http_client_active(f->client), 0);
        assert_int_equal(http_client_active(NULL), 0);
        assert_null(http_client_free(NULL));
        assert_int_equal(http_client_new(NULL, &(struct http_client *) { NULL }), -EINVAL);
}

static void test_curl_code_to_errno(_unused_ void **state) {
        static const struct {
                CURLcode code;
                int error;
        } table[] = {
                { CURLE_OK, 0 },
                { CURLE_COULDNT_CONNECT, -ECONNREFUSED },
                { CURLE_OPERATION_TIMEDOUT, -ETIMEDOUT },
                { CURLE_COULDNT_RESOLVE_HOST, -EHOSTUNREACH },
                { CURLE_PEER_FAILED_VERIFICATION, -EPROTO },
                { CURLE_SSL_CONNECT_ERROR, -EPROTO },
                { CURLE_SSL_CACERT_BADFILE, -EPROTO },
                { CURLE_WRITE_ERROR, -ECANCELED },
                { CURLE_FILESIZE_EXCEEDED, -EFBIG },
                { CURLE_OUT_OF_MEMORY, -ENOMEM },
                { CURLE_URL_MALFORMAT, -EINVAL },
                { CURLE_WEIRD_SERVER_REPLY, -EBADMSG },
                { CURLE_RECV_ERROR, -ECONNRESET },
                { CURLE_PARTIAL_FILE, -EPIPE },
                { CURLE_TOO_MANY_REDIRECTS, -ELOOP },
                { CURLE_FAILED_INIT, -EIO },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                assert_int_equal(http_curl_code_to_errno(table[i].code), table[i].error);
}

int main(void) {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
        const struct CMUnitTest tests[] = {
                T(test_body_and_status),
                T(test_headers),
                T(test_request_header_echo),
                T(test_retry_after),
                T(test_no_response),
                T(test_max_body),
                T(test_connection_refused),
                T(test_timeout),
                T(test_streaming),
                T(test_streaming_abort),
                T(test_cancel),
                T(test_parallel),
                T(test_submit_from_callback),
                T(test_cancel_from_callback),
                T(test_cancel_from_write_function),
                T(test_free_with_transfers_running),
                T(test_free_from_callback),
                T(test_free_from_write_function),
                T(test_submit_invalid),
                T(test_curl_code_to_errno),
        };
#undef T

        return cmocka_run_group_tests_name("http", tests, server_start, server_stop);
}
