/* SPDX-License-Identifier: MIT */
#pragma once

/* The harness of the local API tests: the API runs on an sd-event loop in the test process;
 * the client is a forked child (its own PID, so peer credentials mean something) speaking
 * HTTP with libcurl or, where a half-finished request is needed, over a raw socket. The
 * child checks what it receives and exits with its number of failures; the parent checks
 * what handlers saw.
 *
 * Contents: the fixture; the test routes and their handlers; running a client; the client's
 * side (CHECK, requests with curl or a raw socket, reading replies). */

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "api.h"

/* How many requests /v1/gather holds before it answers them all. */
#define N_GATHER 20

struct fixture {
        char dir[64];
        char sock[128];
        sd_event *event;
        struct metrics *metrics;
        struct api *api;
        int signal_fd[2]; /* parent → child: "the request is now held" */

        bool done; /* stop serving: the child exited and every expected abort came */
        bool timed_out;
        pid_t child;
        bool child_done;
        int child_status;
        unsigned expect_aborts;
        unsigned aborts;

        /* What handlers saw. */
        struct peer last_peer;
        unsigned echo_calls;

        struct api_request *wait_req;
        sd_event_source *wait_timer;

        struct api_request *stream_req;
        sd_event_source *stream_timer;
        unsigned stream_n;

        struct api_request *gather[N_GATHER];
        unsigned n_gather;

        bool free_api_on_hold; /* api_free() with requests held */
        unsigned holds;
};

/* ---- the fixture (cmocka setup and teardown) ---- */

int fixture_setup(void **state);
int fixture_teardown(void **state);
/* Blocks SIGCHLD (for sd_event_add_child()), ignores SIGPIPE (a client hanging up must not
 * kill us) and sets up libcurl: once, in main(), before the tests. */
void api_harness_init(void);
void api_harness_done(void);

/* ---- the server side ---- */

/* The routes every test serves (handlers get the fixture):
 *   GET /v1/echo/{}/{}   method, path, route, captures, queries and peer as JSON
 *   POST /v1/body        the body's size and text
 *   /v1/multi            GET, POST, PUT: "ok"; GET /v1/priv: the same, privileged; GET /
 *   GET /v1/fail         fails without a reply
 *   GET /v1/wait         a long-poll answered 100ms later
 *   GET /v1/hold         a long-poll nobody answers (signals the child when held)
 *   GET /v1/stream       five NDJSON lines 20ms apart, then the end
 *   GET /v1/stream-hold  a stream of one line that stays open (signals the child)
 *   GET /v1/gather       answers none until N_GATHER are held at once
 *   GET /metrics         the fixture's metrics */
extern const struct api_route test_routes[];
extern const size_t n_test_routes;
int h_ok(struct api_request *r, void *userdata);
/* Tells the child that a request is now held (it waits in wait_signal()). */
void signal_child(struct fixture *f);
/* api_new() on the fixture's socket (max_body 1024) with test_routes added. */
void api_start(struct fixture *f, mode_t mode, gid_t gid, bool with_metrics);

typedef int (*client_fn)(struct fixture *f, void *arg);
/* Runs client() in a child while the loop serves it; asserts the child found no failure. */
void run_client(struct fixture *f, client_fn client, void *arg);

/* ---- the client side (runs in the child) ---- */

extern int child_failures;

#define CHECK(cond)                                                                             \
        do {                                                                                    \
                if (!(cond)) {                                                                  \
                        fprintf(stderr, "# child: %s:%d: check failed: %s\n", __FILE__, __LINE__, \
                                #cond);                                                         \
                        child_failures++;                                                       \
                }                                                                               \
        } while (0)

struct reply {
        long status;
        char *body;
        size_t size;
        unsigned writes;
        char content_type[128];
        char allow[128];
        bool chunked;
        cJSON *json;
};

void reply_clear(struct reply *r);
/* Points a curl handle at path on the fixture's socket, the reply collected into out. */
void easy_setup(CURL *c, const struct fixture *f, const char *method, const char *path,
                struct reply *out);
/* One request; body (if any) is sent as is, or chunked when chunked is set. Parses JSON
 * replies into out->json. Returns the curl result. */
CURLcode http(CURL *c, const struct fixture *f, const char *method, const char *path,
              const char *body, size_t body_size, bool chunked, struct reply *out);
const char *json_str(const struct reply *r, const char *key);
bool json_is_null(const struct reply *r, const char *key);
double json_num(const struct reply *r, const char *key);
bool json_bool(const struct reply *r, const char *key);
/* An error reply is exactly {"error": "...", "code": N}. */
void check_error(const struct reply *r, long status, const char *message);
/* A raw connection, for requests left half-done on purpose. */
int raw_connect(const struct fixture *f);
bool raw_send(int fd, const char *s);
/* Waits for signal_child(). */
void wait_signal(const struct fixture *f);
