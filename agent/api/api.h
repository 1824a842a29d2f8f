/* SPDX-License-Identifier: MIT */
#pragma once

/* The local API: HTTP/1.1 + JSON on a Unix socket, served by libmicrohttpd in external-epoll
 * mode, driven by the sd-event loop (the MHD epoll fd is an IO source, MHD_get_timeout() sets
 * a timer): no thread. We accept (connections are limited per pod, per uid and in all) and
 * hand connections to MHD; each one's peer credentials (SO_PEERCRED) are read when it is
 * accepted and handed to every handler. Limits and timeouts: docs/api.md. Routes are a table of {method, pattern, handler};
 * a pattern segment "{}" matches one path segment, captured in order.
 *
 * A handler replies at once with api_reply_*(), or keeps the request (api_reply_suspend())
 * and replies later from the loop (long-polls such as ?wait=30s); or starts a stream
 * (api_reply_stream()) and writes chunks as events happen. Errors are
 * {"error": "...", "code": N}. Every reply is counted in pinion_api_requests_total. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cjson/cJSON.h>
#include <systemd/sd-event.h>

#include "macro.h"
#include "metrics.h"
#include "peer.h"

struct api;
struct api_request;


typedef int (*api_handler_fn)(struct api_request *req, void *userdata);

struct api_route {
        const char *method;  /* "GET", "POST" */
        const char *pattern; /* "/v1/pods/{}/{}" */
        api_handler_fn handler;
        bool privileged;     /* only privileged peers may call it (403 before the body is read) */
};

struct api_options {
        const char *socket_path;
        mode_t socket_mode;     /* 0660; set on the socket file, bound or inherited */
        gid_t socket_gid;       /* (gid_t)-1: leave the group */
        int listen_fd;          /* >= 0: use this (socket activation), else bind socket_path */
        size_t max_body;        /* request bodies larger than this get 413; 0 = 1 MiB */
        /* A TCP port (metrics-listen.h): peers have no credentials. Each is unprivileged and in
         * no pod, counted in the total only; no socket file to watch. */
        bool anonymous;
        unsigned max_connections; /* at once; 0: 1000 */
        /* anonymous: connections at once from one source address (an IPv6 one's /64); 0: no
         * cap but the total. */
        unsigned max_connections_per_source;
};

int api_new(sd_event *e, const struct api_options *opts, struct metrics *metrics, struct api **ret);
/* Closes the socket (unlinking it if we bound it) and drops every connection. */
struct api *api_free(struct api *a);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct api *, api_free);

/* For a stop or restart that loses no request: stops accepting connections (new ones wait in the
 * listen backlog; with socket activation the next piniond answers them) and finishes what was
 * accepted. Returns 0 if nothing is being answered, else 1 and calls idle(userdata) once the
 * last such request is answered or its connection closed (never from inside this call). Long
 * polls and streams do not count: they end when the API is freed. */
typedef void (*api_idle_fn)(void *userdata);
int api_quiesce(struct api *a, api_idle_fn idle, void *userdata);
/* How many requests api_quiesce() still waits for: in progress, or connections with none yet. */
unsigned api_busy(const struct api *a);

/* Routes are matched in registration order; userdata is passed to the handler. With ret, the
 * routes are removed again by api_routes_free(*ret) (a module's stop() does, so a module
 * started again adds them once more, not twice); without, they live as long as the API. */
struct api_routes;
int api_add_routes(struct api *a, const struct api_route *routes, size_t n, void *userdata,
                   struct api_routes **ret);
/* Stand-ins: routes the API's owner answers for another party's routes while that party does
 * not serve them (the core, for a module that is not running: docs/api.md). A stand-in is
 * matched after every ordinary route of its path and method, so it answers only where none is
 * registered; and before them while preempt(userdata) says so (the party has routes registered
 * but is not to be served). Stand-ins live as long as the API. */
typedef bool (*api_standin_fn)(void *userdata);
int api_add_standin_routes(struct api *a, const struct api_route *routes, size_t n, void *userdata,
                           api_standin_fn preempt);
/* Removes the routes: requests to them get 404 from now on (or their stand-in's answer); one already being served keeps
 * its route until it is answered, but its handler is never called again. Accepts NULL, also
 * after the API is gone. */
struct api_routes *api_routes_free(struct api_routes *set);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct api_routes *, api_routes_free);
/* The routes being served (for tests and status). */
size_t api_route_count(const struct api *a);
void api_set_place_fn(struct api *a, peer_place_fn fn, void *userdata);

/* Changes who counts as privileged (socket-group) and the socket file's mode and group on
 * reload. */
int api_set_access(struct api *a, mode_t socket_mode, gid_t socket_gid);
const char *api_socket_path(const struct api *a);

/* socket_watch_listen() is in socket-watch.h. */

/* Request accessors (valid until the reply is sent). */
const char *api_request_method(const struct api_request *r);
const char *api_request_path(const struct api_request *r);
const char *api_request_route(const struct api_request *r); /* the matched pattern, for metrics */
/* The i-th "{}" capture, URL-decoded, or NULL. */
const char *api_request_param(const struct api_request *r, unsigned i);
/* A query argument ("watch" in ?watch=1), or NULL. */
const char *api_request_query(const struct api_request *r, const char *name);
const struct peer *api_request_peer(const struct api_request *r);
/* The request body (POST), NUL-terminated; size 0 if none. */
const char *api_request_body(const struct api_request *r, size_t *ret_size);

/* Replies. Each takes ownership of what it is given and completes the request (resuming it if
 * it was suspended). They return 0 or negative errno; the request is finished either way. */
int api_reply_json(struct api_request *r, unsigned status, cJSON *body);
int api_reply_text(struct api_request *r, unsigned status, const char *content_type, char *text,
                   size_t size);
/* As api_reply_text() for a body holding a secret (a private key): the body is wiped
 * (OPENSSL_cleanse) when the response is freed, after it was sent or the client went away. */
int api_reply_secret(struct api_request *r, unsigned status, const char *content_type, char *text,
                     size_t size);
int api_reply_error(struct api_request *r, unsigned status, const char *format, ...) _printf_(3, 4);

/* Long-poll: keep the request open. The handler must return 0 after calling this. The request
 * stays valid until replied to or until the client goes away, in which case on_abort (if set)
 * runs and the request must not be used afterwards. */
typedef void (*api_abort_fn)(struct api_request *r, void *userdata);
/* on_abort is required: without it the holder could not learn the request is gone. */
void api_reply_suspend(struct api_request *r, api_abort_fn on_abort, void *userdata);

/* Streaming (NDJSON watches): headers go out now; api_reply_stream_write() queues a chunk,
 * api_reply_stream_end() finishes the response. on_abort runs if the client goes away first. */
int api_reply_stream(struct api_request *r, unsigned status, const char *content_type,
                     api_abort_fn on_abort, void *userdata);
int api_reply_stream_write(struct api_request *r, const char *data, size_t size);
int api_reply_stream_end(struct api_request *r);
