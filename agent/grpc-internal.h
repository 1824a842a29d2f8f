/* SPDX-License-Identifier: MIT */
#pragma once

/* Shared by grpc-server.c (the socket, connections, their IO) and grpc-call.c (the HTTP/2
 * session's callbacks, calls, framing). Nothing else includes this. */

#include <nghttp2/nghttp2.h>

#include "grpc-server.h"
#include "peer-creds.h"

struct grpc_conn;

/* What one caller (its pod, or its uid outside pods) holds, shared by its connections. */
struct grpc_count {
        struct grpc_count *next;
        char *key; /* "pod:<uid>" or "uid:<n>" */
        unsigned conns, streams;
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
        sd_event_source *accept_pause;
        struct grpc_conn *conns;
        struct grpc_count *counts;
        unsigned n_conns, n_streams;
        size_t in_bytes; /* request bytes held by every call of every connection */
        struct metrics_registration *metrics_reg;
        struct metric_family *m_calls, *m_streams, *m_rejected, *m_socket_replaced;
};

struct grpc_md {
        char *name, *value;
};

/* A call's life:
 *   RECEIVING  headers seen, the request message arriving
 *   HANDLER    the handler has it; it answers (send, finish) now or later
 *   FINISHING  a status was set: queued messages, then trailers, go out
 *   CLOSED     trailers submitted or the stream reset; freed when nghttp2 closes the stream */
enum call_state {
        CALL_RECEIVING,
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
        sd_event_source *deadline;
        grpc_cancel_fn on_cancel;
        void *cancel_userdata;
};

struct grpc_conn {
        struct grpc_server *server;
        struct grpc_conn *prev, *next;
        int fd;
        struct peer_creds creds;
        struct api_peer peer;
        struct grpc_count *count; /* NULL: privileged, not counted per caller */
        nghttp2_session *session;
        sd_event_source *io, *flush, *head_deadline;
        struct grpc_call *calls;
        unsigned n_calls;
        size_t in_bytes; /* request bytes held by its calls */
        uint8_t *out; /* what nghttp2 gave us and the socket did not take yet */
        size_t out_len, out_off;
        bool broken;
};

/* grpc-call.c */
int grpc_session_new(struct grpc_conn *c);
/* Ends every call of the connection (on_cancel with status) and frees it. */
void grpc_conn_free_calls(struct grpc_conn *c, enum grpc_status status);

/* grpc-server.c */
void grpc_conn_schedule_flush(struct grpc_conn *c);
void grpc_conn_got_request(struct grpc_conn *c);
const struct grpc_method *grpc_server_find_method(const struct grpc_server *s, const char *path, void **ret_userdata);
void grpc_server_count_call(struct grpc_server *s, const struct grpc_call *call, enum grpc_status status);
void grpc_server_streams_changed(struct grpc_server *s, int delta);
/* Whether the connection's caller may open one more stream. */
bool grpc_conn_may_open_stream(const struct grpc_conn *c);
void grpc_conn_streams_changed(struct grpc_conn *c, int delta);
