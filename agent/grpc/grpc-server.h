/* SPDX-License-Identifier: MIT */
#pragma once

/* A gRPC server (gRPC over HTTP/2, PROTOCOL-HTTP2) on a Unix socket, driven by the agent's
 * sd-event loop: libnghttp2's server session does HTTP/2, this does the gRPC layer on top (the
 * 5-byte message prefix, content-type, grpc-timeout, trailers). No threads, no gRPC C-core.
 *
 * Services register methods by full path ("/SpiffeWorkloadAPI/FetchX509SVID"). A method is
 * unary or server-streaming: its handler runs once the client has sent its one request message
 * (bytes: the service decodes them) and answers with grpc_call_send() (any number of messages)
 * and grpc_call_finish() (the status), now or later from the loop. A call the handler keeps
 * open is ended by the server when the client goes away (RST_STREAM, the connection closing) or
 * its deadline passes: on_cancel (grpc_call_set_cancel()) tells the handler, which must forget
 * the call then.
 *
 * Limits (docs/workload-api.md): messages received up to max_recv_message; streams per
 * connection (SETTINGS_MAX_CONCURRENT_STREAMS) and in total (over it: REFUSED_STREAM); unsent
 * data per stream up to max_unsent, per caller and in all (a reader that does not keep up is
 * reset with ENHANCE_YOUR_CALM, which clients report as RESOURCE_EXHAUSTED); request bytes held
 * per connection, per caller and in all; connections in total; deadlines: the first request's
 * headers after accept, a call's request message after its headers, and a connection with no
 * call open is closed (GOAWAY) when idle; connections and streams per caller (a pod, or a uid
 * outside pods); calls per caller paced by a token bucket (calls over the rate wait their turn,
 * before the handler runs, and the caller's connections are not read meanwhile); out of file
 * descriptors, accepting pauses. Every connection's peer is read at accept (peer-creds.h) and
 * handed to handlers. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <systemd/sd-event.h>

#include "macro.h"
#include "metrics.h"
#include "peer.h"

struct grpc_server;
struct grpc_call;

/* The status codes of gRPC (doc/statuscodes.md). */
enum grpc_status {
        GRPC_STATUS_OK = 0,
        GRPC_STATUS_CANCELLED = 1,
        GRPC_STATUS_UNKNOWN = 2,
        GRPC_STATUS_INVALID_ARGUMENT = 3,
        GRPC_STATUS_DEADLINE_EXCEEDED = 4,
        GRPC_STATUS_NOT_FOUND = 5,
        GRPC_STATUS_ALREADY_EXISTS = 6,
        GRPC_STATUS_PERMISSION_DENIED = 7,
        GRPC_STATUS_RESOURCE_EXHAUSTED = 8,
        GRPC_STATUS_FAILED_PRECONDITION = 9,
        GRPC_STATUS_ABORTED = 10,
        GRPC_STATUS_OUT_OF_RANGE = 11,
        GRPC_STATUS_UNIMPLEMENTED = 12,
        GRPC_STATUS_INTERNAL = 13,
        GRPC_STATUS_UNAVAILABLE = 14,
        GRPC_STATUS_DATA_LOSS = 15,
        GRPC_STATUS_UNAUTHENTICATED = 16,
        _GRPC_STATUS_MAX,
};
const char *grpc_server_status_to_string(enum grpc_status s);

/* The request message has arrived (msg: its bytes, valid during the call only). */
typedef void (*grpc_handler_fn)(struct grpc_call *call, const uint8_t *msg, size_t size, void *userdata);
/* The server ended a call the handler kept (status: CANCELLED when the client went away,
 * DEADLINE_EXCEEDED, UNAVAILABLE when the server stops). The call is gone afterwards. */
typedef void (*grpc_cancel_fn)(struct grpc_call *call, enum grpc_status status, void *userdata);

struct grpc_method {
        const char *path; /* "/package.Service/Method" */
        grpc_handler_fn handler;
};

struct grpc_server_options {
        const char *name;         /* for logs and the metrics' server label: "workload" */
        unsigned max_connections; /* 0: 1000 */
        unsigned max_streams_per_connection; /* 0: 1024 */
        unsigned max_streams;                /* in total; 0: 4096 */
        size_t max_recv_message;             /* 0: 4 MiB */
        size_t max_unsent;                   /* per stream; 0: 1 MiB */
        usec_t header_timeout;               /* first request headers after accept; 0: 10 s */
        gid_t socket_gid;                    /* peers of this group count as privileged; -1: none */
        /* Places each peer at accept (caller_peer_place(): its pod, or privileged where it runs),
         * so that one pod, or one uid outside pods, cannot take every connection and stream from
         * the others. NULL: counted by uid. Privileged peers are not counted per caller. */
        peer_place_fn place;
        void *place_userdata;
        unsigned max_connections_per_caller; /* 0: 64 */
        unsigned max_streams_per_caller;     /* 0: 1024 */
        usec_t body_timeout;                 /* a call's request message after its headers; 0: 10 s */
        usec_t idle_timeout;                 /* a connection with no call open; 0: 60 s */
        size_t max_request_bytes_per_caller; /* request bytes held; 0: 4 messages of max_recv_message */
        size_t max_request_bytes;            /* in all; 0: 64 callers' worth, at most 64 MiB */
        size_t max_unsent_per_caller;        /* 0: 4 x max_unsent */
        size_t max_unsent_total;             /* 0: 64 x max_unsent */
        unsigned calls_per_second_per_caller; /* sustained; 0: 100 */
        unsigned call_burst_per_caller;       /* at once after a quiet time; 0: 512 */
};

int grpc_server_new(sd_event *e, struct metrics *metrics, const struct grpc_server_options *o,
                    struct grpc_server **ret);
/* Ends every call (on_cancel with UNAVAILABLE), closes every connection and the socket. */
struct grpc_server *grpc_server_free(struct grpc_server *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct grpc_server *, grpc_server_free);

/* Adds methods (the table must outlive the server); userdata goes to their handlers. */
int grpc_server_add_methods(struct grpc_server *s, const struct grpc_method *methods, size_t n, void *userdata);
/* Binds path (socket_watch_listen(): mode, the socket group when set) in a directory that passes
 * socket_trust_dir_prepare(), starts accepting and watches the socket file (socket-watch.h: moved,
 * deleted or replaced, it is bound afresh, counted in pinion_grpc_socket_replaced_total).
 * Removes the socket again on free if the path still names it. */
int grpc_server_listen(struct grpc_server *s, const char *path, mode_t mode);
/* Serves an already connected socket (takes fd, also on error): tests and the fuzz target. */
int grpc_server_add_connection(struct grpc_server *s, int fd);
unsigned grpc_server_connections(const struct grpc_server *s);
unsigned grpc_server_streams(const struct grpc_server *s);

/* ---- calls ---- */

/* The peer of the call's connection, for caller_resolve_peer(). */
const struct peer *grpc_call_peer(const struct grpc_call *c);
/* A request metadata value by (lower-case) name, or NULL. */
const char *grpc_call_metadata(const struct grpc_call *c, const char *name);
const char *grpc_call_method(const struct grpc_call *c);
void grpc_call_set_cancel(struct grpc_call *c, grpc_cancel_fn fn, void *userdata);

/* Queues one response message. 0, or a negative errno: then the call has ended (-ENOBUFS: its
 * reader did not keep up, the stream was reset) and must not be used again; on_cancel is not
 * called for it. Sent bytes are wiped from the server's buffers once written. */
int grpc_call_send(struct grpc_call *c, const uint8_t *msg, size_t size);
/* Ends the call with status and message (printf-style; NULL: none) in its trailers. The call
 * must not be used afterwards. */
void grpc_call_finish(struct grpc_call *c, enum grpc_status status, const char *format, ...) _printf_(3, 4);
