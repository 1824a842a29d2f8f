/* SPDX-License-Identifier: MIT */
#pragma once

/* Shared by the parts of the local API: api.c (the server: MHD on sd-event, draining, the
 * API object), api-listen.c (the listening socket, our own accept loop, rebinding it when
 * socket-watch.c finds the file replaced), api-conn.c (connections: peer credentials, limits,
 * the idle, head and body deadlines), api-budget.c (per caller: request pacing and the body
 * bytes held), api-request.c (a request's life: from
 * its URI through its body and handler to its completion), api-route.c (paths and the route
 * table) and api-reply.c (replies, suspend/resume, streaming). Nothing else includes this. */

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>

#include <microhttpd.h>

#include "api.h"
#include "token-bucket.h"
#include "peer-creds.h"
#include "socket-watch.h"

#define API_PARAMS_MAX 8

/* One route of the table. Requests hold a reference to the entry they matched (for its
 * handler and, in metrics, its pattern), so a route removed while a request of it is in
 * flight stays readable until that request is freed; a removed route's handler is never
 * called again. */
struct route_entry {
        unsigned n_ref;
        bool removed;
        struct api_routes *owner; /* the set it was added with, NULL: for the API's life */
        char *method;
        char *pattern;
        api_handler_fn handler;
        bool privileged;
        void *userdata;
        bool standin;           /* api_add_standin_routes(): matched after the ordinary routes */
        api_standin_fn preempt; /* a stand-in: true while it is matched before them too */
};

/* Routes added together by one api_add_routes() call, removed together. */
struct api_routes {
        struct api *api; /* NULL once the API is gone (or when the set is empty) */
};

struct api {
        sd_event *event;
        struct MHD_Daemon *mhd;
        sd_event_source *io_source;
        sd_event_source *timer_source;
        bool running; /* inside MHD_run() */
        bool kicked;  /* run MHD again as soon as the current run returns */

        /* api-listen.c: we accept, MHD only serves what we hand it (MHD_add_connection()). */
        int listen_fd;
        sd_event_source *accept_source;
        sd_event_source *accept_pause; /* out of fds: accepting again after a pause */
        char *socket_path;
        bool unlink_on_free;
        /* The socket file whose mode and group decide who may connect: the one we bound, or the
         * inherited socket's own path (NULL for an unnamed or abstract one). */
        char *access_path;
        /* Watches that access_path names our socket, so that a file put in its place is
         * noticed and replaced by a fresh socket of ours (socket-watch.h). */
        struct socket_watch *watch;
        mode_t socket_mode;
        gid_t socket_gid;
        size_t max_body;
        bool anonymous;           /* api_options.anonymous */
        unsigned max_connections; /* api_options.max_connections, or the default */
        unsigned max_connections_per_source; /* api_options' (anonymous only), 0: none */
        peer_place_fn place_fn; /* where a peer runs, beside its credentials (api_set_place_fn()) */
        void *place_userdata;

        struct route_entry **routes; /* each entry allocated alone: requests point at them */
        size_t n_routes;

        struct api_request *requests; /* every live request, so api_free() can resume them */

        /* api_quiesce(): accepting no more; idle_fn runs once api_busy() is 0. */
        bool draining;
        api_idle_fn idle_fn;
        void *idle_userdata;
        unsigned n_fresh; /* connections that have not sent a request line yet */

        struct metric_family *requests_total;
        struct metric_family *request_duration;

        struct metric_family *connections_rejected;
        struct metric_family *connections_closed;
        struct metric_family *header_timeouts;
        struct metric_family *streams_dropped;
        struct metric_family *socket_replaced;

        /* api-conn.c: connections handed to MHD, all of them and those of limited callers
         * (in a pod, or unprivileged); per pod and per uid in counts. */
        unsigned n_conns;
        unsigned n_limited;
        struct conn_count {
                char *key; /* "pod:<uid>" or "uid:<n>" */
                unsigned n;
        } *counts;
        size_t n_counts;
        struct api_conn *pending; /* accepted and being handed to MHD (until NOTIFY_STARTED) */

        /* api-budget.c: per caller (struct api_conn.caller_key), its request pacing and the
         * body bytes its unfinished requests hold; body_bytes: all callers together. */
        struct api_caller {
                char *key;
                struct token_bucket bucket; /* its requests' pace */
                size_t body_bytes; /* held by its unfinished requests */
        } *callers;
        size_t n_callers;
        size_t body_bytes;
};

/* Where a connection is in its request cycle; each phase but BUSY has a deadline. */
enum conn_phase {
        CONN_IDLE, /* waiting for a request line: since accept or the end of the last request */
        CONN_HEAD, /* request line in, waiting for the rest of the head */
        CONN_BODY, /* head in, waiting for the rest of the body */
        CONN_BUSY, /* the request is being answered (or waits, long-polls and streams) */
};

/* What SO_PEERCRED/SO_PEERGROUPS (and SO_PEERPIDFD) said about the process that connected;
 * one per connection, kept in MHD's socket context. */
struct api_conn {
        struct api *api;
        struct api_conn *next_pending;
        int fd;
        struct peer_creds creds;
        char *count_key; /* the per-pod, per-uid or per-source count it is in, NULL: none */
        /* Whose budget its requests use (api-budget.c): count_key, or "host-uid:<n>" for a
         * privileged caller, which is exempt from pacing (paced false). */
        char *caller_key;
        bool paced;
        bool counted;    /* in n_conns */
        bool limited;    /* in n_limited */
        bool fresh;      /* no request line seen yet, counted in struct api */
        enum conn_phase phase;
        usec_t idle_since;          /* when the current CONN_IDLE began */
        sd_event_source *deadline;  /* the current phase's */
};

enum request_state {
        REQUEST_NEW,        /* URI seen, access handler not called yet */
        REQUEST_RECEIVING,  /* route matched, body arriving */
        REQUEST_DISPATCHED, /* handler running */
        REQUEST_WAITING,    /* long-poll: handler kept it, no reply yet */
        REQUEST_REPLIED,    /* reply built, queued at the next access-handler call */
        REQUEST_SENDING,    /* reply handed to MHD */
        REQUEST_FAILED,     /* no reply could be built: the connection is dropped */
};

struct api_request {
        struct api *api;
        struct api_request *prev, *next;
        struct MHD_Connection *connection;
        const struct api_conn *conn;
        enum request_state state;
        usec_t started;

        char *raw_uri;
        char *method;
        char *path;
        char **segments; /* of the raw path, percent-decoded */
        size_t n_segments;
        struct route_entry *route; /* a reference */
        unsigned params[API_PARAMS_MAX];
        unsigned n_params;
        struct peer peer;

        char *body;
        size_t body_size;
        bool body_too_large;
        /* Counted against its caller's and the server's body budgets (api-budget.c): the
         * declared length, or what arrived of a chunked body. */
        char *budget_key;
        size_t budget_held;

        unsigned status;
        struct MHD_Response *response;

        /* Over its caller's pace: held (REQUEST_WAITING) until this fires, then answered 429
         * with Retry-After: retry_after. */
        sd_event_source *pace_hold;
        unsigned retry_after;

        bool suspended; /* MHD_suspend_connection() in effect */
        bool client_gone;
        sd_event_source *hangup_watch;
        api_abort_fn on_abort;
        void *abort_userdata;

        bool streaming;
        bool stream_ended;
        bool stream_dropped; /* its reader fell behind: cut off */
        char *stream_buf;
        size_t stream_off, stream_len, stream_alloc;
        /* Bytes written to and read from the stream so far; those up to stream_free_until
         * (written while the handler ran: the initial state) do not count against the cap. */
        uint64_t stream_written, stream_read, stream_free_until;
};

/* ---- api.c ---- */

/* Makes MHD run again soon: after a resume, MHD has work that its epoll fd may not show. */
void api_kick(struct api *a);
struct route_entry *api_route_entry_ref(struct route_entry *e);
struct route_entry *api_route_entry_unref(struct route_entry *e);
/* While draining: calls the idle callback once nothing is being answered any more. */
void api_check_idle(struct api *a);

/* ---- api-listen.c ---- */

/* Binds socket_path (mode, group), or takes over an inherited listening socket, and starts
 * accepting and watching the socket file. */
int api_listen_start(struct api *a, const struct api_options *opts);
/* Stops accepting: new connections wait in the listen backlog. */
void api_listen_pause(struct api *a);
/* Closes the socket, unlinking the file if it is still ours and we made it. */
void api_listen_stop(struct api *a);

/* ---- api-conn.c ---- */

/* Takes fd, a connection just accepted: identifies the peer, admits it within the limits
 * (closing it at once if over one) and hands it to MHD. */
void api_conn_admit(struct api *a, int fd);
/* MHD's NOTIFY_CONNECTION callback: connections start and end. */
void api_conn_on_connection(void *cls, struct MHD_Connection *connection, void **socket_context,
                       enum MHD_ConnectionNotificationCode toe);
/* root, or a member of socket-group (checked against the connection's credentials). */
bool api_conn_privileged(const struct api *a, const struct api_conn *c);
/* The peer of a connection (NULL: unknown, unprivileged), by its credentials alone. */
struct peer api_conn_peer(const struct api *a, const struct api_conn *c);
/* The connection sent a request line: it no longer counts as fresh. */
void api_conn_seen_request(struct api *a, struct api_conn *c);
/* The deadlines of a connection's request cycle (enum conn_phase): a request line arrived; its
 * head is complete (the body deadline runs); no more body is awaited (it was read, or the
 * request refused); the request finished and another may come (the idle deadline runs). */
void api_conn_request_started(struct api_conn *c);
void api_conn_head_received(struct api_conn *c);
void api_conn_body_received(struct api_conn *c);
void api_conn_request_done(struct api_conn *c);
/* Writes a last reply straight to the socket, bypassing MHD (which is between requests or
 * reading a body, with nothing of its own to send), and shuts the socket down: MHD closes the
 * connection when it next looks at it. */
void api_conn_send_final(struct api_conn *c, unsigned status, const char *message);

/* ---- api-budget.c ---- */

/* Takes one request from the caller's token bucket: 0, or the seconds after which one more
 * request will be let through (for Retry-After). Privileged callers are not paced. */
unsigned api_budget_take_request(struct api *a, const struct api_conn *c);
/* Holds size more body bytes for r (a declared length, or a chunk of a chunked body): 0, or
 * 413 when its caller's budget would be exceeded, 503 when the server's. */
unsigned api_budget_hold_body(struct api_request *r, size_t size);
/* Gives back what r holds. */
void api_budget_release(struct api_request *r);
void api_budget_free_all(struct api *a);

/* ---- api-request.c ---- */

/* The MHD callbacks that carry a request from its URI to its completion. */
void *api_request_on_uri(void *cls, const char *uri, struct MHD_Connection *connection);
enum MHD_Result api_request_on_access(void *cls, struct MHD_Connection *connection, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_data_size, void **req_cls);
void api_request_on_completed(void *cls, struct MHD_Connection *connection, void **req_cls,
                      enum MHD_RequestTerminationCode toe);

/* ---- api-route.c ---- */

/* Splits the raw path (query already cut off) into percent-decoded segments; -EBADMSG for an
 * encoding that cannot be right. */
int api_route_path_segments(const char *raw, size_t raw_len, char ***ret, size_t *ret_n);
/* Finds the route for the request and takes a reference to it. -ENOENT: no path matches;
 * -EOPNOTSUPP: only the method is wrong, and ret_allow gets the methods the path does take. */
int api_route_match(struct api_request *r, char **ret_allow);
/* The number of "{}" captures in a route pattern. */
unsigned api_route_pattern_captures(const char *pattern);

/* ---- api-reply.c ---- */

/* Suspends the connection until a reply or stream data comes, watching for a hangup. */
void api_reply_hold(struct api_request *r);
/* Stops watching for a hangup and, if the connection is suspended, resumes it and kicks MHD. */
void api_reply_resume(struct api_request *r);
/* Finishes the request with resp (taken; NULL: out of memory, a plain 500 or a dropped
 * connection instead). */
int api_reply_respond(struct api_request *r, unsigned status, struct MHD_Response *resp);
int api_reply_respond_error(struct api_request *r, unsigned status, const char *message);
void api_reply_not_allowed(struct api_request *r, const char *allow);
/* The caller made requests faster than it is paced: the request is held a while (its
 * connection suspended, so nothing more of it is read), then answered 429 with Retry-After. */
void api_reply_pace(struct api_request *r, unsigned retry_after_sec);
