/* SPDX-License-Identifier: MIT */
/* Fuzzes the local API end to end: each input is written as raw bytes to a connection on a real
 * API socket (agent/api/api.c, api-request.c, api-route.c and api-reply.c over libmicrohttpd,
 * driven by sd-event as in the daemon), then the loop runs until the agent has answered and
 * closed or a bound is reached.
 * Our code under test: path splitting, percent-decoding, routing and captures, query lookup,
 * method and privilege checks, body limits, suspend/resume and streaming replies. The routes
 * below use every request accessor, so what the parser hands a handler is read in full. */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <systemd/sd-event.h>

#include "api.h"
#include "fuzz.h"
#include "metrics.h"

static sd_event *event;
static struct api *api;
static struct metrics *metrics;
static char socket_path[108];
static bool verbose;

static cJSON *describe(struct api_request *r) {
        const struct peer *peer = api_request_peer(r);
        size_t body_size = 0;
        cJSON *j = cJSON_CreateObject();

        if (!j)
                return NULL;
        (void) cJSON_AddStringToObject(j, "method", api_request_method(r));
        (void) cJSON_AddStringToObject(j, "path", api_request_path(r));
        (void) cJSON_AddStringToObject(j, "route", api_request_route(r));
        for (unsigned i = 0; i < 4; i++) {
                const char *p = api_request_param(r, i);
                if (p)
                        (void) cJSON_AddStringToObject(j, "param", p);
        }
        static const char *const queries[] = { "wait", "watch", "pod", "", "x" };
        for (size_t i = 0; i < sizeof(queries) / sizeof(queries[0]); i++) {
                const char *q = api_request_query(r, queries[i]);
                if (q)
                        (void) cJSON_AddStringToObject(j, "query", q);
        }
        const char *body = api_request_body(r, &body_size);
        (void) cJSON_AddNumberToObject(j, "body", (double) body_size);
        if (body && body_size > 0)
                (void) cJSON_AddNumberToObject(j, "first", (unsigned char) body[0]);
        (void) cJSON_AddBoolToObject(j, "privileged", peer && peer->privileged);
        return j;
}

static int on_echo(struct api_request *r, void *userdata) {
        (void) userdata;
        return api_reply_json(r, 200, describe(r));
}

static void on_abort(struct api_request *r, void *userdata) {
        sd_event_source **s = userdata;
        (void) r;
        *s = sd_event_source_disable_unref(*s);
}

struct held {
        struct api_request *request;
        sd_event_source *source;
};
static struct held held;

static int on_later(sd_event_source *s, void *userdata) {
        struct held *h = userdata;
        (void) s;
        h->source = sd_event_source_disable_unref(h->source);
        if (h->request)
                (void) api_reply_json(h->request, 200, describe(h->request));
        h->request = NULL;
        return 0;
}

static void on_held_abort(struct api_request *r, void *userdata) {
        struct held *h = userdata;
        (void) r;
        h->request = NULL;
        h->source = sd_event_source_disable_unref(h->source);
}

static int on_suspend(struct api_request *r, void *userdata) {
        (void) userdata;
        if (held.request) /* one at a time */
                return api_reply_error(r, 409, "busy");
        if (sd_event_add_defer(event, &held.source, on_later, &held) < 0)
                return api_reply_error(r, 500, "defer");
        held.request = r;
        api_reply_suspend(r, on_held_abort, &held);
        return 0;
}

static sd_event_source *stream_source;

static int on_stream(struct api_request *r, void *userdata) {
        (void) userdata;
        if (api_reply_stream(r, 200, "application/x-ndjson", on_abort, &stream_source) < 0)
                return 0;
        (void) api_reply_stream_write(r, "{\"a\":1}\n", 8);
        (void) api_reply_stream_write(r, "{\"b\":2}\n", 8);
        return api_reply_stream_end(r);
}

static const struct api_route routes[] = {
        { "GET", "/v1/echo/{}/{}", on_echo, false },
        { "GET", "/v1/echo", on_echo, false },
        { "POST", "/v1/body/{}", on_echo, false },
        { "POST", "/v1/priv", on_echo, true },
        { "GET", "/v1/suspend", on_suspend, false },
        { "GET", "/v1/stream", on_stream, false },
};

static int setup(void) {
        struct api_options opts = {
                .socket_path = socket_path,
                .socket_mode = 0600,
                .socket_gid = (gid_t) -1,
                .listen_fd = -1,
                .max_body = 64 * 1024,
        };

        snprintf(socket_path, sizeof(socket_path), "/tmp/pinion-fuzz-api-%d.sock", (int) getpid());
        if (sd_event_new(&event) < 0 || metrics_new(&metrics) < 0 || api_new(event, &opts, metrics, &api) < 0 ||
            api_add_routes(api, routes, sizeof(routes) / sizeof(routes[0]), NULL, NULL) < 0) {
                fprintf(stderr, "fuzz-api-request: setup failed\n");
                abort();
        }
        return 0;
}

static void teardown(void) {
        api = api_free(api); /* unlinks the socket */
        metrics = metrics_free(metrics);
        event = sd_event_unref(event);
}

static int client_connect(void) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

        if (fd < 0)
                abort();
        memcpy(sa.sun_path, socket_path, strlen(socket_path) + 1);
        if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0)
                abort();
        return fd;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static bool initialized;
        size_t sent = 0;
        bool eof = false, shut = false;
        char buf[4096];
        int fd;

        if (!initialized) {
                initialized = true;
                verbose = getenv("PINION_FUZZ_VERBOSE") != NULL;
                setup();
                atexit(teardown);
        }
        fd = client_connect();
        /* Everything is in-process, so each step is ready at once: run the loop without waiting
         * and stop when the agent has closed, or when neither side has moved for a few rounds (a
         * request the agent keeps waiting for, like a half-sent one, ends when the client gives
         * up, as a real client would; the agent then sees the close). */
        unsigned rounds, idle = 0;
        for (rounds = 0; rounds < 10000 && !eof && idle < 20; rounds++) {
                bool progress = false;
                if (sent < size) {
                        ssize_t n = send(fd, data + sent, size - sent, MSG_NOSIGNAL);
                        if (n > 0) {
                                sent += (size_t) n;
                                progress = true;
                        } else if (n < 0 && errno != EAGAIN)
                                sent = size; /* the agent closed on us */
                }
                if (sent == size && !shut) {
                        (void) shutdown(fd, SHUT_WR);
                        shut = true;
                }
                if (sd_event_run(event, 0) > 0)
                        progress = true;
                for (;;) {
                        ssize_t n = recv(fd, buf, sizeof(buf), 0);
                        if (n > 0) {
                                if (verbose) /* PINION_FUZZ_VERBOSE=1: what the agent answered */
                                        fwrite(buf, 1, (size_t) n, stderr);
                                progress = true;
                                continue;
                        }
                        if (n == 0 || errno != EAGAIN)
                                eof = true;
                        break;
                }
                idle = progress ? 0 : idle + 1;
        }
        if (verbose)
                fprintf(stderr, "\n[fuzz-api-request: %s after %u rounds]\n", eof ? "closed" : "gave up", rounds);
        close(fd);
        /* Let the agent see the close and free the connection before the next input. */
        for (unsigned round = 0; round < 5; round++)
                (void) sd_event_run(event, 0);
        return 0;
}
