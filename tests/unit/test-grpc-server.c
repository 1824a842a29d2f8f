/* SPDX-License-Identifier: MIT */
/* grpc-server.c against a real HTTP/2 client: libnghttp2's client session in this process,
 * on one end of a socket pair whose other end is a connection of the server, both driven by
 * the same sd-event loop. Checks the gRPC layer's answers (status codes, percent-encoded
 * messages), deadlines and cancellation reaching the handler, a slow reader reset with
 * ENHANCE_YOUR_CALM, and the stream limit; with callers placed in pods (the place function):
 * request bytes and unsent bytes budgeted per caller, the body and idle deadlines, the message
 * size limit, and calls paced per caller. */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <nghttp2/nghttp2.h>

#include "grpc-server.h"

#define MAX_STREAMS 64

struct result {
        int status;      /* grpc-status; -1: none seen */
        char message[256];
        char http_status[8];
        uint32_t reset;  /* RST_STREAM error code; 0: closed cleanly */
        bool closed;
        size_t data;     /* DATA bytes received */
};

struct client {
        int fd;
        nghttp2_session *session;
        struct result r[MAX_STREAMS];
        bool slow; /* does not return window: a reader that does not keep up */
        bool goaway;
};

struct fixture {
        sd_event *event;
        struct grpc_server *server;
        struct client a, b, c;
        const char *next_pod; /* where the next connection is placed; NULL: the host */
        /* the server's side */
        struct grpc_call *kept;
        struct grpc_call *held[8];
        unsigned n_held;
        int cancelled; /* the status on_cancel got; -1: not called */
        int send_error;
};

static struct fixture *F;

/* ---- the server's methods ---- */

static void on_cancel(struct grpc_call *call, enum grpc_status status, void *userdata) {
        struct fixture *f = userdata;
        f->cancelled = (int) status;
        f->kept = NULL;
}

static void echo(struct grpc_call *call, const uint8_t *msg, size_t size, void *userdata) {
        if (grpc_call_send(call, msg, size) < 0)
                return;
        grpc_call_finish(call, GRPC_STATUS_OK, "50%% done\n");
}

static void keep(struct grpc_call *call, const uint8_t *msg, size_t size, void *userdata) {
        struct fixture *f = userdata;
        f->kept = call;
        grpc_call_set_cancel(call, on_cancel, f);
}

/* Keeps the call without a cancel function: the server ends it when the client goes. */
static void hold(struct grpc_call *call, const uint8_t *msg, size_t size, void *userdata) {
        struct fixture *f = userdata;
        if (f->n_held < 8)
                f->held[f->n_held++] = call;
}

static const struct grpc_method methods[] = {
        { "/t.T/Echo", echo },
        { "/t.T/Keep", keep },
        { "/t.T/Hold", hold },
};

static void place_by_fixture(const struct peer *peer, void *userdata, struct peer_place *ret) {
        struct fixture *f = userdata;
        ret->privileged = !f->next_pod;
        ret->pod_uid = f->next_pod ? strdup(f->next_pod) : NULL;
        ret->attested = true;
}

/* ---- the client ---- */

static int on_header(nghttp2_session *s, const nghttp2_frame *frame, const uint8_t *name, size_t namelen,
                     const uint8_t *value, size_t valuelen, uint8_t flags, void *userdata) {
        struct client *c = userdata;
        struct result *r = &c->r[frame->hd.stream_id % MAX_STREAMS];

        if (strcmp((const char *) name, "grpc-status") == 0)
                r->status = atoi((const char *) value);
        else if (strcmp((const char *) name, "grpc-message") == 0)
                snprintf(r->message, sizeof(r->message), "%.*s", (int) valuelen, (const char *) value);
        else if (strcmp((const char *) name, ":status") == 0)
                snprintf(r->http_status, sizeof(r->http_status), "%.*s", (int) valuelen, (const char *) value);
        return 0;
}

static int on_data(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data, size_t len, void *userdata) {
        struct client *c = userdata;
        c->r[id % MAX_STREAMS].data += len;
        return 0;
}

static int on_frame(nghttp2_session *s, const nghttp2_frame *frame, void *userdata) {
        struct client *c = userdata;
        if (frame->hd.type == NGHTTP2_GOAWAY)
                c->goaway = true;
        return 0;
}

static int on_close(nghttp2_session *s, int32_t id, uint32_t error_code, void *userdata) {
        struct client *c = userdata;
        c->r[id % MAX_STREAMS].closed = true;
        c->r[id % MAX_STREAMS].reset = error_code;
        return 0;
}

static void client_start(struct fixture *f, struct client *c, bool slow) {
        nghttp2_session_callbacks *cb;
        nghttp2_option *opt;
        /* A slow reader: a window of 1 KiB that is never returned. */
        nghttp2_settings_entry slow_settings[] = { { NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1024 } };
        int fds[2];

        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds), 0);
        assert_int_equal(grpc_server_add_connection(f->server, fds[0]), 0);
        c->fd = fds[1];
        c->slow = slow;
        for (size_t i = 0; i < MAX_STREAMS; i++)
                c->r[i].status = -1;
        assert_int_equal(nghttp2_session_callbacks_new(&cb), 0);
        nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
        nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_close);
        nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame);
        assert_int_equal(nghttp2_option_new(&opt), 0);
        if (slow)
                nghttp2_option_set_no_auto_window_update(opt, 1);
        assert_int_equal(nghttp2_session_client_new2(&c->session, cb, c, opt), 0);
        nghttp2_option_del(opt);
        nghttp2_session_callbacks_del(cb);
        assert_int_equal(nghttp2_submit_settings(c->session, NGHTTP2_FLAG_NONE, slow_settings, slow ? 1 : 0), 0);
}

static void client_stop(struct client *c) {
        if (c->session)
                nghttp2_session_del(c->session);
        if (c->fd > 0)
                close(c->fd);
        *c = (struct client) {};
}

#define NV(n, v) { (uint8_t *) (n), (uint8_t *) (v), strlen(n), strlen(v), NGHTTP2_NV_FLAG_NONE }

struct body {
        const uint8_t *data;
        size_t len, off;
        bool open; /* the request does not end: the client stops sending after len */
};

static ssize_t read_body(nghttp2_session *s, int32_t id, uint8_t *buf, size_t length, uint32_t *flags,
                         nghttp2_data_source *source, void *userdata) {
        struct body *b = source->ptr;
        size_t n = b->len - b->off < length ? b->len - b->off : length;

        if (n > 0)
                memcpy(buf, b->data + b->off, n);
        b->off += n;
        if (b->off == b->len && b->open)
                return n > 0 ? (ssize_t) n : NGHTTP2_ERR_DEFERRED;
        if (b->off == b->len)
                *flags |= NGHTTP2_DATA_FLAG_EOF;
        return (ssize_t) n;
}

/* Starts a call; body is the whole request (prefix included) and must live until sent. */
static int32_t client_call(struct client *c, const char *path, struct body *b, const char *extra_name,
                           const char *extra_value) {
        nghttp2_nv nv[] = {
                NV(":method", "POST"), NV(":scheme", "http"), NV(":path", path), NV(":authority", "t"),
                NV("content-type", "application/grpc"), NV("te", "trailers"),
                NV(extra_name ? extra_name : "x-none", extra_value ? extra_value : "1"),
        };
        nghttp2_data_provider p = { .source.ptr = b, .read_callback = read_body };
        int32_t id = nghttp2_submit_request(c->session, NULL, nv, sizeof(nv) / sizeof(nv[0]), &p, NULL);

        assert_true(id > 0);
        return id;
}

/* One turn: the client writes, the server runs, the client reads. */
static void pump_client(struct client *c) {
        const uint8_t *data;
        uint8_t buf[65536];
        ssize_t n;

        if (!c->session)
                return;
        while ((n = nghttp2_session_mem_send(c->session, &data)) > 0)
                assert_int_equal(write(c->fd, data, (size_t) n), n);
        while ((n = read(c->fd, buf, sizeof(buf))) > 0)
                assert_int_equal(nghttp2_session_mem_recv(c->session, buf, (size_t) n), n);
}

static void pump(struct fixture *f, unsigned turns, usec_t wait) {
        for (unsigned i = 0; i < turns; i++) {
                pump_client(&f->a);
                pump_client(&f->b);
                pump_client(&f->c);
                while (sd_event_run(f->event, 0) > 0)
                        ;
                pump_client(&f->a);
                pump_client(&f->b);
                pump_client(&f->c);
                if (wait)
                        (void) sd_event_run(f->event, wait);
        }
}

static const uint8_t EMPTY_MSG[] = { 0, 0, 0, 0, 0 };

/* ---- tests ---- */

static void test_unary_answers(void **state) {
        struct fixture *f = *state;
        static const uint8_t hello[] = { 0, 0, 0, 0, 2, 'h', 'i' };
        static const uint8_t compressed[] = { 1, 0, 0, 0, 0 };
        static const uint8_t huge[] = { 0, 0xff, 0xff, 0xff, 0xff };
        static const uint8_t two[] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 };
        struct body b1 = { hello, sizeof(hello) }, b2 = { compressed, sizeof(compressed) },
                    b3 = { huge, sizeof(huge) }, b4 = { two, sizeof(two) }, b5 = { EMPTY_MSG, 5 },
                    b6 = { EMPTY_MSG, 5 }, b7 = { NULL, 0 };
        int32_t ok, comp, big, dbl, unknown, gzip, none;

        /* One after the other: the fixture's server takes 2 streams at once. */
        client_start(f, &f->a, false);
        ok = client_call(&f->a, "/t.T/Echo", &b1, NULL, NULL);
        pump(f, 5, 0);
        comp = client_call(&f->a, "/t.T/Echo", &b2, NULL, NULL);
        pump(f, 5, 0);
        big = client_call(&f->a, "/t.T/Echo", &b3, NULL, NULL);
        pump(f, 5, 0);
        dbl = client_call(&f->a, "/t.T/Echo", &b4, NULL, NULL);
        pump(f, 5, 0);
        unknown = client_call(&f->a, "/t.T/Nope", &b5, NULL, NULL);
        pump(f, 5, 0);
        gzip = client_call(&f->a, "/t.T/Echo", &b6, "grpc-encoding", "gzip");
        pump(f, 5, 0);
        none = client_call(&f->a, "/t.T/Echo", &b7, NULL, NULL);
        pump(f, 5, 0);

        assert_int_equal(f->a.r[ok].status, GRPC_STATUS_OK);
        assert_int_equal(f->a.r[ok].data, sizeof(hello));
        assert_string_equal(f->a.r[ok].message, "50%25 done%0A");
        assert_int_equal(f->a.r[comp].status, GRPC_STATUS_INTERNAL);
        assert_int_equal(f->a.r[big].status, GRPC_STATUS_RESOURCE_EXHAUSTED);
        assert_int_equal(f->a.r[dbl].status, GRPC_STATUS_INTERNAL);
        assert_int_equal(f->a.r[unknown].status, GRPC_STATUS_UNIMPLEMENTED);
        assert_int_equal(f->a.r[gzip].status, GRPC_STATUS_UNIMPLEMENTED);
        assert_int_equal(f->a.r[none].status, GRPC_STATUS_INTERNAL);
        for (int32_t id = ok; id <= none; id += 2) {
                assert_true(f->a.r[id].closed);
                assert_string_equal(f->a.r[id].http_status, "200");
        }
        assert_int_equal(grpc_server_streams(f->server), 0);
}

static void test_deadline_reaches_the_handler(void **state) {
        struct fixture *f = *state;
        struct body b = { EMPTY_MSG, 5 };
        int32_t id;

        client_start(f, &f->a, false);
        id = client_call(&f->a, "/t.T/Keep", &b, "grpc-timeout", "50m");
        pump(f, 3, 0);
        assert_non_null(f->kept);
        assert_int_equal(grpc_server_streams(f->server), 1);
        for (unsigned i = 0; i < 50 && f->cancelled < 0; i++)
                pump(f, 1, 20 * USEC_PER_MSEC);
        assert_int_equal(f->cancelled, GRPC_STATUS_DEADLINE_EXCEEDED);
        pump(f, 5, 0);
        assert_int_equal(f->a.r[id].status, GRPC_STATUS_DEADLINE_EXCEEDED);
        assert_int_equal(grpc_server_streams(f->server), 0);
}

static void test_cancel_and_close_reach_the_handler(void **state) {
        struct fixture *f = *state;
        struct body b = { EMPTY_MSG, 5 }, b2 = { EMPTY_MSG, 5 };
        int32_t id;

        client_start(f, &f->a, false);
        id = client_call(&f->a, "/t.T/Keep", &b, NULL, NULL);
        pump(f, 3, 0);
        assert_non_null(f->kept);
        assert_int_equal(nghttp2_submit_rst_stream(f->a.session, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL), 0);
        pump(f, 3, 0);
        assert_int_equal(f->cancelled, GRPC_STATUS_CANCELLED);
        assert_int_equal(grpc_server_streams(f->server), 0);

        /* The connection closing ends its calls too. */
        f->cancelled = -1;
        (void) client_call(&f->a, "/t.T/Keep", &b2, NULL, NULL);
        pump(f, 3, 0);
        assert_non_null(f->kept);
        client_stop(&f->a);
        pump(f, 3, 0);
        assert_int_equal(f->cancelled, GRPC_STATUS_CANCELLED);
        assert_int_equal(grpc_server_connections(f->server), 0);
}

static void test_slow_reader_is_reset(void **state) {
        struct fixture *f = *state;
        struct body b = { EMPTY_MSG, 5 };
        static uint8_t chunk[64 * 1024];
        int32_t id;
        int r = 0;

        client_start(f, &f->a, true);
        id = client_call(&f->a, "/t.T/Keep", &b, NULL, NULL);
        pump(f, 3, 0);
        assert_non_null(f->kept);
        /* The handler streams as fast as it can; the reader takes 1 KiB and no more. */
        for (unsigned i = 0; i < 64 && r == 0; i++) {
                r = grpc_call_send(f->kept, chunk, sizeof(chunk));
                pump(f, 1, 0);
        }
        assert_int_equal(r, -ENOBUFS);
        f->kept = NULL;
        pump(f, 3, 0);
        assert_true(f->a.r[id].closed);
        assert_int_equal(f->a.r[id].reset, NGHTTP2_ENHANCE_YOUR_CALM);
        assert_true(f->a.r[id].data <= 1024);
        assert_int_equal(f->cancelled, -1); /* an error from send is the handler's news already */
        assert_int_equal(grpc_server_streams(f->server), 0);
}

static void test_streams_over_the_total_are_refused(void **state) {
        struct fixture *f = *state;
        struct body b[3] = { { EMPTY_MSG, 5 }, { EMPTY_MSG, 5 }, { EMPTY_MSG, 5 } };
        int32_t third;

        /* The fixture's server takes 2 streams in all. */
        client_start(f, &f->a, false);
        client_start(f, &f->b, false);
        (void) client_call(&f->a, "/t.T/Keep", &b[0], NULL, NULL);
        (void) client_call(&f->a, "/t.T/Keep", &b[1], NULL, NULL);
        pump(f, 3, 0);
        assert_int_equal(grpc_server_streams(f->server), 2);
        third = client_call(&f->b, "/t.T/Keep", &b[2], NULL, NULL);
        pump(f, 3, 0);
        assert_true(f->b.r[third].closed);
        assert_int_equal(f->b.r[third].reset, NGHTTP2_REFUSED_STREAM);
        assert_int_equal(grpc_server_streams(f->server), 2);
        client_stop(&f->a);
        pump(f, 3, 0);
        assert_int_equal(grpc_server_streams(f->server), 0);
}


/* ---- callers in pods: budgets, deadlines, pace (setup_pods) ---- */

static unsigned answered(const struct client *c, int32_t first, unsigned n, int status) {
        unsigned k = 0;

        for (unsigned i = 0; i < n; i++)
                k += c->r[(first + 2 * (int32_t) i) % MAX_STREAMS].status == status;
        return k;
}

static void test_request_bytes_budgeted_per_caller(void **state) {
        struct fixture *f = *state;
        static uint8_t partial[900] = { 0, 0, 0, 3, 0xe8 }; /* declares 1000 bytes, sends 895 */
        struct body held[3] = { { partial, sizeof(partial), 0, true }, { partial, sizeof(partial), 0, true },
                                { partial, sizeof(partial), 0, true } };
        struct body other = { partial, sizeof(partial), 0, true }, done = { EMPTY_MSG, 5, 0, false };
        int32_t a1, a2, c1, b1, b2;

        /* Pod A on two connections holds two unfinished requests; its third is over its
         * 2,500 bytes, whatever the server has left. */
        f->next_pod = "A";
        client_start(f, &f->a, false);
        client_start(f, &f->c, false);
        f->next_pod = "B";
        client_start(f, &f->b, false);
        a1 = client_call(&f->a, "/t.T/Echo", &held[0], NULL, NULL);
        a2 = client_call(&f->a, "/t.T/Echo", &held[1], NULL, NULL);
        pump(f, 3, 0);
        c1 = client_call(&f->c, "/t.T/Echo", &held[2], NULL, NULL);
        pump(f, 3, 0);
        assert_int_equal(f->c.r[c1].status, GRPC_STATUS_RESOURCE_EXHAUSTED);
        assert_int_equal(f->a.r[a1].status, -1);
        assert_int_equal(f->a.r[a2].status, -1);
        /* Pod B is not held back by A's requests. */
        b1 = client_call(&f->b, "/t.T/Echo", &other, NULL, NULL);
        b2 = client_call(&f->b, "/t.T/Echo", &done, NULL, NULL);
        pump(f, 3, 0);
        assert_int_equal(f->b.r[b1].status, -1); /* still arriving, not refused */
        assert_int_equal(f->b.r[b2].status, GRPC_STATUS_OK);
}

static void test_unsent_bytes_budgeted_per_caller(void **state) {
        struct fixture *f = *state;
        static uint8_t chunk[200 * 1024];
        struct body b[3] = { { EMPTY_MSG, 5, 0, false }, { EMPTY_MSG, 5, 0, false }, { EMPTY_MSG, 5, 0, false } };
        int32_t a2, b1;

        /* Readers that take nothing: what is sent to them stays queued. */
        f->next_pod = "A";
        client_start(f, &f->a, true);
        f->next_pod = "B";
        client_start(f, &f->b, true);
        (void) client_call(&f->a, "/t.T/Hold", &b[0], NULL, NULL);
        a2 = client_call(&f->a, "/t.T/Hold", &b[1], NULL, NULL);
        pump(f, 3, 0);
        b1 = client_call(&f->b, "/t.T/Hold", &b[2], NULL, NULL);
        pump(f, 3, 0);
        assert_int_equal(f->n_held, 3);
        /* 200 KiB per stream is within the stream's 256 KiB; the second is over pod A's 300 KiB. */
        assert_int_equal(grpc_call_send(f->held[0], chunk, sizeof(chunk)), 0);
        assert_int_equal(grpc_call_send(f->held[1], chunk, sizeof(chunk)), -ENOBUFS);
        assert_int_equal(grpc_call_send(f->held[2], chunk, sizeof(chunk)), 0);
        pump(f, 3, 0);
        assert_true(f->a.r[a2].closed);
        assert_int_equal(f->a.r[a2].reset, NGHTTP2_ENHANCE_YOUR_CALM);
        assert_false(f->b.r[b1].closed);
}

static void test_body_deadline(void **state) {
        struct fixture *f = *state;
        static uint8_t partial[100] = { 0, 0, 0, 3, 0xe8 };
        struct body b = { partial, sizeof(partial), 0, true };
        int32_t id;

        f->next_pod = "A";
        client_start(f, &f->a, false);
        id = client_call(&f->a, "/t.T/Echo", &b, NULL, NULL);
        pump(f, 3, 0);
        assert_int_equal(grpc_server_streams(f->server), 1);
        for (unsigned i = 0; i < 100 && !f->a.r[id].closed; i++)
                pump(f, 1, 20 * USEC_PER_MSEC);
        assert_true(f->a.r[id].closed);
        assert_int_equal(f->a.r[id].reset, NGHTTP2_CANCEL);
        assert_int_equal(grpc_server_streams(f->server), 0);
        /* The connection itself stays: the call was the slow part. */
        assert_int_equal(grpc_server_connections(f->server), 1);
}

static void test_body_deadline_after_a_refusal(void **state) {
        struct fixture *f = *state;
        static uint8_t partial[100] = { 0, 0, 0, 3, 0xe8 };
        struct body b = { partial, sizeof(partial), 0, true };
        int32_t id;

        /* Refused at its headers, the client keeps sending: the stream still holds a slot until
         * the body deadline resets it. */
        f->next_pod = "A";
        client_start(f, &f->a, false);
        id = client_call(&f->a, "/t.T/Nope", &b, NULL, NULL);
        pump(f, 3, 0);
        assert_int_equal(f->a.r[id].status, GRPC_STATUS_UNIMPLEMENTED);
        assert_int_equal(grpc_server_streams(f->server), 1);
        for (unsigned i = 0; i < 100 && grpc_server_streams(f->server) > 0; i++)
                pump(f, 1, 20 * USEC_PER_MSEC);
        assert_int_equal(grpc_server_streams(f->server), 0);
}

static void test_idle_deadline(void **state) {
        struct fixture *f = *state;
        struct body b = { EMPTY_MSG, 5, 0, false };
        int32_t id;

        f->next_pod = "A";
        client_start(f, &f->a, false);
        id = client_call(&f->a, "/t.T/Echo", &b, NULL, NULL);
        pump(f, 3, 0);
        assert_int_equal(f->a.r[id].status, GRPC_STATUS_OK);
        assert_int_equal(grpc_server_connections(f->server), 1);
        for (unsigned i = 0; i < 100 && grpc_server_connections(f->server) > 0; i++)
                pump(f, 1, 20 * USEC_PER_MSEC);
        assert_int_equal(grpc_server_connections(f->server), 0);
        pump(f, 2, 0);
        assert_true(f->a.goaway);
}

static void test_message_size(void **state) {
        struct fixture *f = *state;
        static uint8_t fits[5 + 4096] = { 0, 0, 0, 0x10, 0 }, over[5 + 4097] = { 0, 0, 0, 0x10, 1 };
        struct body b1 = { fits, sizeof(fits), 0, false }, b2 = { over, sizeof(over), 0, false };
        int32_t ok, big;

        /* The host's root: beyond the per-caller request budget, a message's limit alone. */
        f->next_pod = NULL;
        client_start(f, &f->a, false);
        ok = client_call(&f->a, "/t.T/Echo", &b1, NULL, NULL);
        big = client_call(&f->a, "/t.T/Echo", &b2, NULL, NULL);
        pump(f, 5, 0);
        assert_int_equal(f->a.r[ok].status, GRPC_STATUS_OK);
        assert_int_equal(f->a.r[big].status, GRPC_STATUS_RESOURCE_EXHAUSTED);
}

static void test_calls_paced_per_caller(void **state) {
        struct fixture *f = *state;
        struct body a[8], b = { EMPTY_MSG, 5, 0, false };
        int32_t other;

        /* A burst of 3 and 10 calls a second: of 8 calls at once, 3 run now, the rest in turn. */
        f->next_pod = "A";
        client_start(f, &f->a, false);
        f->next_pod = "B";
        client_start(f, &f->b, false);
        for (unsigned i = 0; i < 8; i++) {
                a[i] = (struct body) { EMPTY_MSG, 5, 0, false };
                (void) client_call(&f->a, "/t.T/Echo", &a[i], NULL, NULL);
        }
        pump(f, 3, 0);
        assert_int_equal(answered(&f->a, 1, 8, GRPC_STATUS_OK), 3);
        /* Another caller has its own pace. */
        other = client_call(&f->b, "/t.T/Echo", &b, NULL, NULL);
        pump(f, 3, 0);
        assert_int_equal(f->b.r[other].status, GRPC_STATUS_OK);
        assert_int_equal(answered(&f->a, 1, 8, GRPC_STATUS_OK), 3);
        /* The rest within their turn: 5 calls at 10 a second. */
        for (unsigned i = 0; i < 100 && answered(&f->a, 1, 8, GRPC_STATUS_OK) < 8; i++)
                pump(f, 1, 20 * USEC_PER_MSEC);
        assert_int_equal(answered(&f->a, 1, 8, GRPC_STATUS_OK), 8);
        assert_int_equal(grpc_server_streams(f->server), 0);
}

static void test_refusals_cost_the_caller_too(void **state) {
        struct fixture *f = *state;
        struct body u[4], b = { EMPTY_MSG, 5, 0, false };
        int32_t id;

        /* Unknown methods are refused, and each takes a call of the pace: after the burst, a
         * good call waits for its token. */
        f->next_pod = "A";
        client_start(f, &f->a, false);
        for (unsigned i = 0; i < 4; i++) {
                u[i] = (struct body) { EMPTY_MSG, 5, 0, false };
                (void) client_call(&f->a, "/t.T/Nope", &u[i], NULL, NULL);
        }
        pump(f, 3, 0);
        assert_int_equal(answered(&f->a, 1, 4, GRPC_STATUS_UNIMPLEMENTED), 4);
        id = client_call(&f->a, "/t.T/Echo", &b, NULL, NULL);
        pump(f, 3, 0);
        assert_int_equal(f->a.r[id].status, -1);
        for (unsigned i = 0; i < 100 && f->a.r[id].status < 0; i++)
                pump(f, 1, 20 * USEC_PER_MSEC);
        assert_int_equal(f->a.r[id].status, GRPC_STATUS_OK);
}

static int setup_pods(void **state) {
        static struct fixture f;
        const struct grpc_server_options opts = {
                .name = "test",
                .max_unsent = 256 * 1024,
                .max_unsent_per_caller = 300 * 1024,
                .max_recv_message = 4096,
                .max_request_bytes_per_caller = 2500,
                .body_timeout = 100 * USEC_PER_MSEC,
                .idle_timeout = 200 * USEC_PER_MSEC,
                .calls_per_second_per_caller = 10,
                .call_burst_per_caller = 3,
                .socket_gid = (gid_t) -1,
                .place = place_by_fixture,
                .place_userdata = &f,
        };

        f = (struct fixture) { .cancelled = -1 };
        assert_int_equal(sd_event_new(&f.event), 0);
        assert_int_equal(grpc_server_new(f.event, NULL, &opts, &f.server), 0);
        assert_int_equal(grpc_server_add_methods(f.server, methods, ELEMENTSOF(methods), &f), 0);
        F = &f;
        *state = &f;
        return 0;
}

static int setup(void **state) {
        static struct fixture f;
        const struct grpc_server_options opts = { .name = "test", .max_streams = 2, .max_unsent = 256 * 1024,
                                                  .socket_gid = (gid_t) -1 };

        f = (struct fixture) { .cancelled = -1 };
        assert_int_equal(sd_event_new(&f.event), 0);
        assert_int_equal(grpc_server_new(f.event, NULL, &opts, &f.server), 0);
        assert_int_equal(grpc_server_add_methods(f.server, methods, ELEMENTSOF(methods), &f), 0);
        F = &f;
        *state = &f;
        return 0;
}

static int teardown(void **state) {
        struct fixture *f = *state;

        client_stop(&f->a);
        client_stop(&f->b);
        client_stop(&f->c);
        grpc_server_free(f->server);
        sd_event_unref(f->event);
        return 0;
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_unary_answers, setup, teardown),
                cmocka_unit_test_setup_teardown(test_deadline_reaches_the_handler, setup, teardown),
                cmocka_unit_test_setup_teardown(test_cancel_and_close_reach_the_handler, setup, teardown),
                cmocka_unit_test_setup_teardown(test_slow_reader_is_reset, setup, teardown),
                cmocka_unit_test_setup_teardown(test_streams_over_the_total_are_refused, setup, teardown),
                cmocka_unit_test_setup_teardown(test_request_bytes_budgeted_per_caller, setup_pods, teardown),
                cmocka_unit_test_setup_teardown(test_unsent_bytes_budgeted_per_caller, setup_pods, teardown),
                cmocka_unit_test_setup_teardown(test_body_deadline, setup_pods, teardown),
                cmocka_unit_test_setup_teardown(test_body_deadline_after_a_refusal, setup_pods, teardown),
                cmocka_unit_test_setup_teardown(test_idle_deadline, setup_pods, teardown),
                cmocka_unit_test_setup_teardown(test_message_size, setup_pods, teardown),
                cmocka_unit_test_setup_teardown(test_calls_paced_per_caller, setup_pods, teardown),
                cmocka_unit_test_setup_teardown(test_refusals_cost_the_caller_too, setup_pods, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
