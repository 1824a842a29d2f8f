/* SPDX-License-Identifier: MIT */
/* Fuzzes the gRPC server end to end: each input is written as raw bytes to one end of a socket
 * pair whose other end is a connection of a real gRPC server (agent/grpc/grpc-server.c and
 * grpc-call.c over libnghttp2, driven by sd-event as in the daemon); the loop runs until the
 * server has nothing more to do, then the client end closes and everything is freed.
 * Our code under test: the HTTP/2 callbacks, request headers and metadata, grpc-timeout, the
 * 5-byte message prefix and its limits, unary and streaming answers, trailers and their
 * percent-encoding, cancellation at close; and the protobuf path: the methods below decode
 * their requests with protobuf-c (the Workload API's messages) and encode answers. The seeds
 * (corpus/grpc/) are client prefaces with HEADERS and DATA frames for each method. */

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <systemd/sd-event.h>

#include "fuzz.h"
#include "grpc-server.h"
#include "metrics.h"
#include "workload.pb-c.h"

static sd_event *event;
static struct metrics *metrics;

/* Streams this handler keeps open: ended by the server when the connection goes. */
static unsigned open_streams;

static void on_cancel(struct grpc_call *call, enum grpc_status status, void *userdata) {
        (void) call;
        (void) status;
        (void) userdata;
        open_streams--;
}

static void send_message(struct grpc_call *call, const ProtobufCMessage *m) {
        size_t n = protobuf_c_message_get_packed_size(m);
        uint8_t *buf = malloc(n + 1);

        if (!buf)
                return;
        (void) protobuf_c_message_pack(m, buf);
        (void) grpc_call_send(call, buf, n);
        free(buf);
}

static void x509_svid(struct grpc_call *call, const uint8_t *msg, size_t size, void *userdata) {
        X509SVIDRequest *req = x509_svidrequest__unpack(NULL, size, msg);
        X509SVID svid = X509_SVID__INIT, *svids[] = { &svid };
        X509SVIDResponse resp = X509_SVIDRESPONSE__INIT;
        uint8_t key[32] = { 1, 2, 3 };

        (void) userdata;
        if (!req) {
                grpc_call_finish(call, GRPC_STATUS_INVALID_ARGUMENT, "malformed request");
                return;
        }
        x509_svidrequest__free_unpacked(req, NULL);
        if (!grpc_call_metadata(call, "workload.spiffe.io")) {
                grpc_call_finish(call, GRPC_STATUS_INVALID_ARGUMENT, "no header");
                return;
        }
        svid.spiffe_id = (char *) "spiffe://example.org/ns/a/sa/b";
        svid.x509_svid_key = (ProtobufCBinaryData) { sizeof(key), key };
        resp.n_svids = 1;
        resp.svids = svids;
        open_streams++;
        grpc_call_set_cancel(call, on_cancel, NULL);
        send_message(call, &resp.base); /* may end the call: then it is not ours any more */
}

static void jwt_svid(struct grpc_call *call, const uint8_t *msg, size_t size, void *userdata) {
        JWTSVIDRequest *req = jwtsvidrequest__unpack(NULL, size, msg);
        JWTSVIDResponse resp = JWTSVIDRESPONSE__INIT;
        JWTSVID *svids[4];
        JWTSVID items[4];

        (void) userdata;
        if (!req) {
                grpc_call_finish(call, GRPC_STATUS_INVALID_ARGUMENT, "malformed request");
                return;
        }
        for (size_t i = 0; i < req->n_audience && i < 4; i++) {
                items[i] = (JWTSVID) JWTSVID__INIT;
                items[i].spiffe_id = req->spiffe_id;
                items[i].svid = req->audience[i];
                svids[i] = &items[i];
                resp.n_svids++;
        }
        resp.svids = svids;
        send_message(call, &resp.base);
        grpc_call_finish(call, GRPC_STATUS_OK, NULL);
        jwtsvidrequest__free_unpacked(req, NULL);
}

static void validate(struct grpc_call *call, const uint8_t *msg, size_t size, void *userdata) {
        ValidateJWTSVIDRequest *req = validate_jwtsvidrequest__unpack(NULL, size, msg);

        (void) userdata;
        if (!req) {
                grpc_call_finish(call, GRPC_STATUS_INVALID_ARGUMENT, "malformed request");
                return;
        }
        /* Whatever the client sent comes back in grpc-message: percent-encoded. */
        grpc_call_finish(call, GRPC_STATUS_UNIMPLEMENTED, "%s for %s", req->svid, req->audience);
        validate_jwtsvidrequest__free_unpacked(req, NULL);
}

static const struct grpc_method methods[] = {
        { "/SpiffeWorkloadAPI/FetchX509SVID", x509_svid },
        { "/SpiffeWorkloadAPI/FetchJWTSVID", jwt_svid },
        { "/SpiffeWorkloadAPI/ValidateJWTSVID", validate },
};

static void drain(int fd) {
        uint8_t buf[16384];

        while (read(fd, buf, sizeof(buf)) > 0)
                ;
}

/* The peer is a pod's process: counted per caller, its calls paced (a small burst, so that
 * inputs reach the queue, and calls still queued when the server goes). */
static void place_in_pod(const struct peer *peer, void *userdata, struct peer_place *ret) {
        ret->privileged = false;
        ret->pod_uid = strdup("fuzz-pod");
        ret->attested = true;
}

/* Runs the loop until it has nothing ready (bounded). */
static void run(int client) {
        for (unsigned i = 0; i < 200; i++) {
                drain(client);
                if (sd_event_run(event, 0) <= 0)
                        break;
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        /* Small limits, so that inputs reach them. */
        const struct grpc_server_options opts = {
                .name = "fuzz",
                .max_connections = 4,
                .max_streams_per_connection = 8,
                .max_streams = 16,
                .max_recv_message = 4096,
                .max_unsent = 8192,
                .socket_gid = (gid_t) -1,
                .place = place_in_pod,
                .max_request_bytes_per_caller = 8192,
                .max_unsent_per_caller = 12288,
                .calls_per_second_per_caller = 1000,
                .call_burst_per_caller = 4,
        };
        struct grpc_server *s = NULL;
        int fds[2];

        if (!event) {
                if (sd_event_new(&event) < 0 || metrics_new(&metrics) < 0)
                        abort();
        }
        if (grpc_server_new(event, metrics, &opts, &s) < 0 || grpc_server_add_methods(s, methods, 3, NULL) < 0)
                abort();
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) < 0)
                abort();
        if (grpc_server_add_connection(s, fds[0]) < 0)
                abort();
        /* In pieces, as a network would deliver it. */
        for (size_t off = 0; off < size;) {
                size_t n = size - off < 1000 ? size - off : 1000;
                ssize_t w = send(fds[1], data + off, n, MSG_NOSIGNAL);

                if (w <= 0) {
                        run(fds[1]);
                        if (send(fds[1], data + off, n, MSG_NOSIGNAL) <= 0)
                                break;
                        off += n;
                        continue;
                }
                off += (size_t) w;
                run(fds[1]);
        }
        run(fds[1]);
        (void) shutdown(fds[1], SHUT_WR);
        run(fds[1]);
        close(fds[1]);
        run(-1);
        grpc_server_free(s);
        if (open_streams != 0)
                abort(); /* a kept call was never ended */
        return 0;
}
