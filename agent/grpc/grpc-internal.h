/* SPDX-License-Identifier: MIT */
#pragma once

/* Shared by grpc-server.c (the socket, connections, their IO) and grpc-call.c (the HTTP/2
 * session's callbacks, calls, framing). Nothing else includes this. */

#include <nghttp2/nghttp2.h>

#include "token-bucket.h"
#include "grpc-server.h"
#include "peer-creds.h"

struct grpc_conn;

/* What one caller (its pod, or its uid outside pods) holds, shared by its connections, and
 * its pace: a token bucket of calls (grpc-budget.c). Kept after its last connection until its
 * bucket is full again, so that reconnecting does not refill it. */
struct grpc_count {
        struct grpc_server *server;
        struct grpc_count *next;
        char *key; /* conn_count_key() */
        unsigned conns, streams;
        size_t in_bytes;  /* request bytes its calls hold */
        size_t out_bytes; /* response bytes queued for it and not yet taken by nghttp2 */
        struct token_bucket bucket; /* calls it may start (grpc_server_options' rate and burst) */
        struct grpc_call *queue_head, *queue_tail; /* complete requests waiting for a token */
        unsigned n_queued;
        struct grpc_count *ready_next; /* in the server's turn of callers with calls to run */
        bool ready;
        bool held; /* out of tokens: its connections are not read until it has one again */
        sd_event_source *refill; /* when a token is back (or the bucket full, for a count unused) */
};

struct grpc_server {
        sd_event *event;
        char *name;
        struct grpc_server_options opts;
        const struct grpc_method **methods; /* pointers into the services' tables */
        void **method_userdata;
        size_t n_methods;
        int listen_fd;
        char *socket_path; /* what we bound and remove again */
        char *watch_name;  /* "gRPC <name>", for the watch's logs */
        struct socket_watch *watch; /* that socket_path still names our socket (socket-watch.h) */
        sd_event_source *listen_source;
        sd_event_source *accept_pause; /* out of fds: accepting again after a pause */
        bool accept_paused, accept_failing;
        usec_t accept_warned; /* when the last "cannot accept" warning was logged */
        struct grpc_conn *conns;
        struct grpc_count *counts;
        unsigned n_conns, n_streams;
        size_t in_bytes;  /* request bytes held by every call of every connection */
        size_t out_bytes; /* response bytes queued and not yet taken by nghttp2, all calls */
        sd_event_source *pace; /* defer: runs queued calls, a few per loop iteration */
        struct grpc_count *ready_head, *ready_tail;
        struct metrics_registration *metrics_reg;
        struct metric_family *m_calls, *m_streams, *m_rejected, *m_socket_replaced;
};

struct grpc_md {
        char *name, *value;
};

/* A call's life:
 *   RECEIVING  headers seen, the request message arriving
 *   QUEUED     the request is complete and waits for its caller's turn (grpc-budget.c)
 *   HANDLER    the handler has it; it answers (send, finish) now or later
 *   FINISHING  a status was set: queued messages, then trailers, go out
 *   CLOSED     trailers submitted or the stream reset; freed when nghttp2 closes the stream */
enum call_state {
        CALL_RECEIVING,
        CALL_QUEUED,
        CALL_HANDLER,
        CALL_FINISHING,
        CALL_CLOSED,
};

struct grpc_call {
        struct grpc_conn *conn;
        struct grpc_call *prev, *next;
        int32_t stream_id;
        enum call_state state;
        const struct grpc_method *method;
        void *method_userdata;
        char *path;
        bool post, content_type_ok;
        char *encoding; /* grpc-encoding, if sent */
        usec_t timeout; /* grpc-timeout; 0: none */
        struct grpc_md *md;
        size_t n_md, md_bytes;
        uint8_t *in;
        size_t in_len;
        uint8_t *out; /* framed messages not yet taken by nghttp2 */
        size_t out_len, out_off;
        bool responded; /* response headers submitted */
        bool deferred;  /* the data source said DEFERRED: resume it when data comes */
        int status;
        char *message;
        sd_event_source *deadline;      /* grpc-timeout */
        sd_event_source *body_deadline; /* the request message must be complete by then */
        struct grpc_call *queue_next;   /* in its caller's queue, while QUEUED */
        grpc_cancel_fn on_cancel;
        void *cancel_userdata;
};

struct grpc_conn {
        struct grpc_server *server;
        struct grpc_conn *prev, *next;
        int fd;
        struct peer_creds creds;
        struct peer peer;
        struct grpc_count *count; /* NULL: privileged, not counted per caller */
        nghttp2_session *session;
        sd_event_source *io, *flush;
        sd_event_source *idle_deadline; /* armed while no call is open: head, then idle timeout */
        bool got_request;
        bool want_out; /* the socket did not take everything: EPOLLOUT */
        struct grpc_call *calls;
        unsigned n_calls;
        size_t in_bytes; /* request bytes held by its calls */
        uint8_t *out; /* what nghttp2 gave us and the socket did not take yet */
        size_t out_len, out_off;
        bool broken;
};

/* grpc-call.c */
int grpc_call_session_new(struct grpc_conn *c);
/* Ends every call of the connection (on_cancel with status) and frees it. */
void grpc_call_free_all(struct grpc_conn *c, enum grpc_status status);

/* grpc-server.c */
void grpc_server_conn_schedule_flush(struct grpc_conn *c);
/* Epoll events after a change: reading stops while the connection's caller is held. */
void grpc_server_conn_update_events(struct grpc_conn *c);
void grpc_server_count_rejected(struct grpc_server *s, const char *reason);
const struct grpc_method *grpc_server_find_method(const struct grpc_server *s, const char *path, void **ret_userdata);
void grpc_server_count_call(struct grpc_server *s, const struct grpc_call *call, enum grpc_status status);
void grpc_server_streams_changed(struct grpc_server *s, int delta);
/* Whether the connection's caller may open one more stream. */
bool grpc_server_conn_may_open_stream(const struct grpc_conn *c);
void grpc_server_conn_streams_changed(struct grpc_conn *c, int delta);
/* Frees a caller's count once nothing holds it and its bucket is full. */
void grpc_server_count_put(struct grpc_server *s, struct grpc_count *k);

/* grpc-budget.c: request bytes held (delta) by a call of c: its connection, its caller, the
 * server. */
void grpc_budget_in_changed(struct grpc_conn *c, ssize_t delta);
/* Whether len more request bytes fit; NULL, or the limit's reason (the metric's label). */
const char *grpc_budget_in_over(const struct grpc_conn *c, size_t len);
/* Response bytes queued and not yet taken by nghttp2: the caller's and the server's. */
void grpc_budget_out_changed(struct grpc_conn *c, ssize_t delta);
const char *grpc_budget_out_over(const struct grpc_conn *c, size_t len);

/* grpc-call.c: the handler gets the call's complete request (state QUEUED -> HANDLER). */
void grpc_call_run(struct grpc_call *call);

/* grpc-budget.c: calls paced per caller, a token bucket each, callers served in turn. */
int grpc_budget_pace_init(struct grpc_server *s);
void grpc_budget_pace_done(struct grpc_server *s);
/* A new caller's bucket starts full. */
void grpc_budget_pace_count_new(struct grpc_server *s, struct grpc_count *k);
void grpc_budget_pace_count_free(struct grpc_server *s, struct grpc_count *k);
/* The call's request is complete: runs it now (a privileged caller) or in its caller's turn. */
void grpc_budget_pace_submit(struct grpc_call *call);
/* The call leaves its caller's queue (it ended before its turn). */
void grpc_budget_pace_withdraw(struct grpc_call *call);
/* A call refused before its handler costs its caller a token too: out of them, the caller is
 * held (its connections not read) until it has one. */
void grpc_budget_pace_charge(struct grpc_conn *c);
/* Whether the count's bucket is full (the count is not needed for pacing any more). */
bool grpc_budget_pace_count_idle(struct grpc_server *s, struct grpc_count *k);
