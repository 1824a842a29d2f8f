/* SPDX-License-Identifier: MIT */
/* The gRPC layer on libnghttp2's server session: one call per request stream, from its headers
 * (path, content-type, grpc-timeout, metadata) through its one request message (the 5-byte
 * prefix: compressed flag, length) to the handler, and the handler's answer back: response
 * headers, length-prefixed messages, trailers with grpc-status and a percent-encoded
 * grpc-message. Call states: grpc-internal.h. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grpc-internal.h"
#include "fs.h"
#include "log.h"

#define PREFIX_SIZE 5U
/* Request metadata per call (names and values together), and entries. */
#define MAX_METADATA_BYTES 16384U
#define MAX_METADATA 64U
#define MAX_MESSAGE_TEXT 512U

/* ---- calls ---- */

static void call_drop_input(struct grpc_call *call) {
        if (!call->in)
                return;
        explicit_bzero(call->in, call->in_len);
        grpc_budget_in_changed(call->conn, -(ssize_t) call->in_len);
        call->in = mfree(call->in);
        call->in_len = 0;
}

/* The call's request is no longer waiting: it ended, or its turn came. */
static void call_leave_queue(struct grpc_call *call) {
        if (call->state == CALL_QUEUED)
                grpc_budget_pace_withdraw(call);
}

static void call_free(struct grpc_call *call) {
        struct grpc_conn *c = call->conn;

        call_leave_queue(call);
        if (call->prev)
                call->prev->next = call->next;
        else
                c->calls = call->next;
        if (call->next)
                call->next->prev = call->prev;
        c->n_calls--;
        grpc_server_conn_streams_changed(c, -1);
        if (c->session)
                (void) nghttp2_session_set_stream_user_data(c->session, call->stream_id, NULL);
        sd_event_source_disable_unref(call->deadline);
        sd_event_source_disable_unref(call->body_deadline);
        for (size_t i = 0; i < call->n_md; i++) {
                free(call->md[i].name);
                free(call->md[i].value);
        }
        free(call->md);
        free(call->path);
        free(call->encoding);
        free(call->message);
        call_drop_input(call);
        if (call->out) {
                grpc_budget_out_changed(c, -(ssize_t) (call->out_len - call->out_off));
                explicit_bzero(call->out, call->out_len);
                free(call->out);
        }
        free(call);
}

/* The handler kept the call and the server ends it: tell the handler, which forgets it. */
static void call_cancel(struct grpc_call *call, enum grpc_status status) {
        grpc_cancel_fn fn = call->on_cancel;

        call->on_cancel = NULL;
        if (call->state == CALL_HANDLER && fn)
                fn(call, status, call->cancel_userdata);
}

void grpc_call_free_all(struct grpc_conn *c, enum grpc_status status) {
        while (c->calls) {
                struct grpc_call *call = c->calls;

                if (call->state == CALL_HANDLER || call->state == CALL_RECEIVING || call->state == CALL_QUEUED)
                        grpc_server_count_call(c->server, call, status);
                call_cancel(call, status);
                call_free(call);
        }
}

/* Resets the stream: the client sees the HTTP/2 error code (ENHANCE_YOUR_CALM: RESOURCE_EXHAUSTED,
 * CANCEL: CANCELLED). The call is closed here; it is freed when nghttp2 closes the stream. */
static void call_reset(struct grpc_call *call, uint32_t error_code, enum grpc_status counted_as) {
        if (call->state == CALL_CLOSED)
                return;
        grpc_server_count_call(call->conn->server, call, counted_as);
        call_leave_queue(call);
        if (call->state != CALL_HANDLER) /* else the handler may still read it: dropped after */
                call_drop_input(call);
        call->state = CALL_CLOSED;
        call->deadline = sd_event_source_disable_unref(call->deadline);
        call->body_deadline = sd_event_source_disable_unref(call->body_deadline);
        (void) nghttp2_submit_rst_stream(call->conn->session, NGHTTP2_FLAG_NONE, call->stream_id, error_code);
        grpc_server_conn_schedule_flush(call->conn);
}

/* ---- sending ---- */

static bool md_char_plain(unsigned char ch) {
        return ch >= 0x20 && ch <= 0x7e && ch != '%';
}

/* grpc-message: percent-encoded UTF-8 (PROTOCOL-HTTP2, Responses). */
static char *percent_encode(const char *text) {
        size_t n = strlen(text);
        char *out = malloc(n * 3 + 1), *p = out;

        if (!out)
                return NULL;
        for (const unsigned char *s = (const unsigned char *) text; *s; s++) {
                if (md_char_plain(*s))
                        *p++ = (char) *s;
                else
                        p += sprintf(p, "%%%02X", *s);
        }
        *p = 0;
        return out;
}

#define NV(n, v) { (uint8_t *) (n), (uint8_t *) (v), sizeof(n) - 1, strlen(v), NGHTTP2_NV_FLAG_NONE }

/* The trailers; or, when nothing was sent yet, a Trailers-Only response: one HEADERS frame with
 * the status and the trailers, ending the stream (what clients expect of an error). */
static int submit_trailers(struct grpc_call *call, bool trailers_only) {
        char status[16];
        _cleanup_free_ char *message = call->message ? percent_encode(call->message) : NULL;
        nghttp2_nv nv[4] = { NV(":status", "200"), NV("content-type", "application/grpc+proto") };
        size_t n = 0;

        snprintf(status, sizeof(status), "%d", call->status);
        if (trailers_only)
                n = 2;
        nv[n++] = (nghttp2_nv) NV("grpc-status", status);
        if (message)
                nv[n++] = (nghttp2_nv) NV("grpc-message", message);
        call->state = CALL_CLOSED;
        if (trailers_only)
                return nghttp2_submit_response(call->conn->session, call->stream_id, nv, n, NULL);
        return nghttp2_submit_trailer(call->conn->session, call->stream_id, nv, n);
}

static ssize_t on_data_read(nghttp2_session *session, int32_t stream_id, uint8_t *buf, size_t length,
                            uint32_t *data_flags, nghttp2_data_source *source, void *user_data) {
        struct grpc_call *call = source->ptr;
        size_t left = call->out_len - call->out_off, n = MIN(left, length);

        if (n > 0)
                memcpy(buf, call->out + call->out_off, n);
        call->out_off += n;
        grpc_budget_out_changed(call->conn, -(ssize_t) n);
        if (call->out_off == call->out_len && call->out) {
                explicit_bzero(call->out, call->out_len);
                call->out = mfree(call->out);
                call->out_len = call->out_off = 0;
        }
        if (n > 0)
                return (ssize_t) n;
        if (call->state == CALL_FINISHING) {
                *data_flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
                if (submit_trailers(call, false) < 0)
                        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
                return 0;
        }
        call->deferred = true;
        return NGHTTP2_ERR_DEFERRED;
}

static int call_respond(struct grpc_call *call) {
        nghttp2_nv nv[] = { NV(":status", "200"), NV("content-type", "application/grpc+proto") };
        nghttp2_data_provider provider = { .source.ptr = call, .read_callback = on_data_read };
        int r;

        if (!call->responded && call->state == CALL_FINISHING && call->out_len == call->out_off) {
                if (submit_trailers(call, true) < 0)
                        return -ENOMEM;
                call->responded = true;
                grpc_server_conn_schedule_flush(call->conn);
                return 0;
        }
        if (call->responded) {
                if (call->deferred) {
                        call->deferred = false;
                        (void) nghttp2_session_resume_data(call->conn->session, call->stream_id);
                }
                grpc_server_conn_schedule_flush(call->conn);
                return 0;
        }
        r = nghttp2_submit_response(call->conn->session, call->stream_id, nv, ELEMENTSOF(nv), &provider);
        if (r < 0)
                return -ENOMEM;
        call->responded = true;
        grpc_server_conn_schedule_flush(call->conn);
        return 0;
}

/* A request that is not gRPC at all gets a plain HTTP status (415: wrong content-type). */
static void call_reject_http(struct grpc_call *call, const char *status) {
        nghttp2_nv nv[] = { NV(":status", status) };

        grpc_server_count_call(call->conn->server, call, GRPC_STATUS_UNKNOWN);
        call->state = CALL_CLOSED;
        (void) nghttp2_submit_response(call->conn->session, call->stream_id, nv, ELEMENTSOF(nv), NULL);
        grpc_server_conn_schedule_flush(call->conn);
}

/* NULL, or why size more bytes may not be queued on the call (the metric's reason). */
static const char *call_out_over(const struct grpc_call *call, size_t size) {
        size_t unsent = call->out_len - call->out_off;

        if (size > UINT32_MAX || unsent + PREFIX_SIZE + size > call->conn->server->opts.max_unsent)
                return "slow-reader";
        return grpc_budget_out_over(call->conn, PREFIX_SIZE + size);
}

int grpc_call_send(struct grpc_call *call, const uint8_t *msg, size_t size) {
        struct grpc_server *s = call->conn->server;
        size_t unsent = call->out_len - call->out_off;
        const char *over;
        uint8_t *grown;

        if (call->state != CALL_HANDLER)
                return -ESHUTDOWN;
        over = call_out_over(call, size);
        if (over) {
                log_info("gRPC %s: %s for pid %d reset: its reader did not keep up (%zu bytes unsent; %s)", s->name,
                         grpc_call_method(call), (int) call->conn->creds.pid, unsent, over);
                grpc_server_count_rejected(s, over);
                call_reset(call, NGHTTP2_ENHANCE_YOUR_CALM, GRPC_STATUS_RESOURCE_EXHAUSTED);
                return -ENOBUFS;
        }
        /* Sent bytes go out of the buffer from the front; compact before growing. */
        grown = malloc(unsent + PREFIX_SIZE + size);
        if (!grown) {
                call_reset(call, NGHTTP2_INTERNAL_ERROR, GRPC_STATUS_INTERNAL);
                return -ENOMEM;
        }
        if (unsent)
                memcpy(grown, call->out + call->out_off, unsent);
        if (call->out) {
                explicit_bzero(call->out, call->out_len);
                free(call->out);
        }
        grown[unsent] = 0; /* not compressed */
        grown[unsent + 1] = (uint8_t) (size >> 24);
        grown[unsent + 2] = (uint8_t) (size >> 16);
        grown[unsent + 3] = (uint8_t) (size >> 8);
        grown[unsent + 4] = (uint8_t) size;
        if (size)
                memcpy(grown + unsent + PREFIX_SIZE, msg, size);
        call->out = grown;
        call->out_len = unsent + PREFIX_SIZE + size;
        call->out_off = 0;
        grpc_budget_out_changed(call->conn, (ssize_t) (PREFIX_SIZE + size));
        if (call_respond(call) < 0) {
                call_reset(call, NGHTTP2_INTERNAL_ERROR, GRPC_STATUS_INTERNAL);
                return -ENOMEM;
        }
        return 0;
}

static void call_finish_text(struct grpc_call *call, enum grpc_status status, char *message) {
        if (call->state == CALL_FINISHING || call->state == CALL_CLOSED) {
                free(message);
                return;
        }
        grpc_server_count_call(call->conn->server, call, status);
        call->on_cancel = NULL;
        call->status = status;
        free(call->message);
        call->message = message;
        call->deadline = sd_event_source_disable_unref(call->deadline);
        call_leave_queue(call);
        if (call->state != CALL_HANDLER) /* else the handler may still read it: dropped after */
                call_drop_input(call);
        call->state = CALL_FINISHING;
        if (call_respond(call) < 0)
                call_reset(call, NGHTTP2_INTERNAL_ERROR, GRPC_STATUS_INTERNAL);
}

void grpc_call_finish(struct grpc_call *call, enum grpc_status status, const char *format, ...) {
        char *message = NULL;
        va_list ap;

        if (format) {
                va_start(ap, format);
                if (vasprintf(&message, format, ap) < 0)
                        message = NULL;
                va_end(ap);
                if (message && strlen(message) > MAX_MESSAGE_TEXT)
                        message[MAX_MESSAGE_TEXT] = 0;
        }
        call_finish_text(call, status, message);
}

/* ---- accessors ---- */

const struct peer *grpc_call_peer(const struct grpc_call *call) {
        return &call->conn->peer;
}

const char *grpc_call_metadata(const struct grpc_call *call, const char *name) {
        for (size_t i = 0; i < call->n_md; i++)
                if (streq(call->md[i].name, name))
                        return call->md[i].value;
        return NULL;
}

const char *grpc_call_method(const struct grpc_call *call) {
        return call->method ? call->method->path : call->path ?: "unknown";
}

void grpc_call_set_cancel(struct grpc_call *call, grpc_cancel_fn fn, void *userdata) {
        call->on_cancel = fn;
        call->cancel_userdata = userdata;
}

/* ---- receiving ---- */

/* The client did not end its request in time: the stream is reset (the client sees CANCELLED)
 * and what came of it is freed. Also when the call was answered (refused) before: a stream the
 * client keeps open holds a slot. Not while its caller is held: then we stopped reading. */
static int on_body_deadline(sd_event_source *src, uint64_t usec, void *userdata) {
        struct grpc_call *call = userdata;
        struct grpc_conn *c = call->conn;
        struct grpc_server *s = c->server;

        if (c->count && c->count->held) {
                (void) sd_event_source_set_time_relative(src, s->opts.body_timeout);
                (void) sd_event_source_set_enabled(src, SD_EVENT_ONESHOT);
                return 0;
        }
        log_debug("gRPC %s: %s from pid %d reset: no complete request within %llus", s->name, grpc_call_method(call),
                  (int) c->creds.pid, (unsigned long long) (s->opts.body_timeout / USEC_PER_SEC));
        grpc_server_count_rejected(s, "body-timeout");
        if (call->state == CALL_RECEIVING) {
                call_reset(call, NGHTTP2_CANCEL, GRPC_STATUS_DEADLINE_EXCEEDED);
                return 0;
        }
        (void) nghttp2_submit_rst_stream(c->session, NGHTTP2_FLAG_NONE, call->stream_id, NGHTTP2_CANCEL);
        grpc_server_conn_schedule_flush(c);
        return 0;
}

static int on_deadline(sd_event_source *src, uint64_t usec, void *userdata) {
        struct grpc_call *call = userdata;

        call->deadline = sd_event_source_disable_unref(call->deadline);
        call_cancel(call, GRPC_STATUS_DEADLINE_EXCEEDED);
        call_finish_text(call, GRPC_STATUS_DEADLINE_EXCEEDED, strdup("deadline exceeded"));
        return 0;
}

/* grpc-timeout: at most 8 digits and a unit (H M S m u n). */
static int parse_timeout(const char *v, usec_t *ret) {
        static const struct {
                char unit;
                usec_t mul, div;
        } units[] = {
                { 'H', USEC_PER_HOUR, 1 }, { 'M', USEC_PER_MINUTE, 1 }, { 'S', USEC_PER_SEC, 1 },
                { 'm', USEC_PER_MSEC, 1 }, { 'u', 1, 1 },               { 'n', 1, 1000 },
        };
        size_t n = strlen(v);
        usec_t value = 0;

        if (n < 2 || n > 9)
                return -EINVAL;
        for (size_t i = 0; i + 1 < n; i++) {
                if (v[i] < '0' || v[i] > '9')
                        return -EINVAL;
                value = value * 10 + (usec_t) (v[i] - '0');
        }
        for (size_t i = 0; i < ELEMENTSOF(units); i++)
                if (units[i].unit == v[n - 1]) {
                        *ret = MAX(value * units[i].mul / units[i].div, (usec_t) 1);
                        return 0;
                }
        return -EINVAL;
}

static int call_add_md(struct grpc_call *call, const char *name, size_t name_len, const char *value, size_t value_len) {
        struct grpc_md *grown;

        if (call->n_md >= MAX_METADATA)
                return -E2BIG;
        grown = reallocarray(call->md, call->n_md + 1, sizeof(*grown));
        if (!grown)
                return -ENOMEM;
        call->md = grown;
        grown[call->n_md] = (struct grpc_md) { strndup(name, name_len), strndup(value, value_len) };
        if (!grown[call->n_md].name || !grown[call->n_md].value) {
                free(grown[call->n_md].name);
                free(grown[call->n_md].value);
                return -ENOMEM;
        }
        call->n_md++;
        return 0;
}

static bool content_type_ok(const char *v) {
        /* application/grpc, application/grpc+proto, optionally with parameters. */
        if (!startswith(v, "application/grpc"))
                return false;
        v += strlen("application/grpc");
        return *v == 0 || *v == ';' || startswith(v, "+proto");
}

static int on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame, void *user_data) {
        struct grpc_conn *c = user_data;
        struct grpc_server *s = c->server;
        struct grpc_call *call;

        if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
                return 0;
        if (c->n_calls >= s->opts.max_streams_per_connection || s->n_streams >= s->opts.max_streams ||
            !grpc_server_conn_may_open_stream(c)) {
                (void) metric_inc(s->m_rejected, s->name, grpc_server_conn_may_open_stream(c) ? "streams" : "caller-streams");
                log_debug("gRPC %s: stream refused: %u streams open (%u on the connection)", s->name, s->n_streams,
                          c->n_calls);
                return nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, frame->hd.stream_id,
                                                 NGHTTP2_REFUSED_STREAM) < 0 ? NGHTTP2_ERR_CALLBACK_FAILURE : 0;
        }
        call = calloc(1, sizeof(*call));
        if (!call)
                return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        if (sd_event_add_time_relative(s->event, &call->body_deadline, CLOCK_MONOTONIC, s->opts.body_timeout,
                                       USEC_PER_SEC / 10, on_body_deadline, call) < 0) {
                free(call);
                return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        }
        call->conn = c;
        call->stream_id = frame->hd.stream_id;
        call->next = c->calls;
        if (c->calls)
                c->calls->prev = call;
        c->calls = call;
        c->n_calls++;
        grpc_server_conn_streams_changed(c, +1);
        (void) nghttp2_session_set_stream_user_data(session, frame->hd.stream_id, call);
        return 0;
}

static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name, size_t namelen,
                     const uint8_t *value, size_t valuelen, uint8_t flags, void *user_data) {
        struct grpc_call *call = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
        const char *n = (const char *) name, *v = (const char *) value;

        if (!call || call->state != CALL_RECEIVING || frame->hd.type != NGHTTP2_HEADERS ||
            frame->headers.cat != NGHTTP2_HCAT_REQUEST)
                return 0; /* trailers from the client carry nothing we use */
        call->md_bytes += namelen + valuelen;
        if (call->md_bytes > MAX_METADATA_BYTES)
                return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* resets the stream */
        /* nghttp2 has checked the field: no NUL, lower-case names, a valid pseudo-header. */
        if (streq(n, ":method"))
                call->post = streq(v, "POST");
        else if (streq(n, ":path"))
                return (call->path = strndup(v, valuelen)) ? 0 : NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        else if (n[0] == ':')
                return 0;
        else if (streq(n, "content-type"))
                call->content_type_ok = content_type_ok(v);
        else if (streq(n, "grpc-timeout")) {
                if (parse_timeout(v, &call->timeout) < 0)
                        call->timeout = 0; /* the spec gives no error for it: no deadline */
        } else if (streq(n, "grpc-encoding")) {
                free(call->encoding);
                return (call->encoding = strndup(v, valuelen)) ? 0 : NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        } else if (call_add_md(call, n, namelen, v, valuelen) < 0)
                return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        return 0;
}

/* The request headers are complete: is it a call we serve? A refusal costs the caller a call
 * of its pace as a call does. */
static void call_headers_done(struct grpc_call *call) {
        struct grpc_server *s = call->conn->server;

        if (!call->post || !call->content_type_ok) {
                grpc_budget_pace_charge(call->conn);
                call_reject_http(call, "415");
                return;
        }
        call->method = grpc_server_find_method(s, call->path, &call->method_userdata);
        if (!call->method) {
                grpc_budget_pace_charge(call->conn);
                grpc_call_finish(call, GRPC_STATUS_UNIMPLEMENTED, "unknown method %s", call->path ?: "(none)");
                return;
        }
        if (call->encoding && !streq(call->encoding, "identity")) {
                grpc_budget_pace_charge(call->conn);
                grpc_call_finish(call, GRPC_STATUS_UNIMPLEMENTED, "grpc-encoding %s is not supported", call->encoding);
                return;
        }
        if (call->timeout &&
            sd_event_add_time_relative(s->event, &call->deadline, CLOCK_MONOTONIC, call->timeout, USEC_PER_MSEC,
                                       on_deadline, call) < 0)
                grpc_call_finish(call, GRPC_STATUS_INTERNAL, "out of memory");
}

static uint32_t call_message_length(const struct grpc_call *call) {
        return (uint32_t) call->in[1] << 24 | (uint32_t) call->in[2] << 16 | (uint32_t) call->in[3] << 8 | call->in[4];
}

/* NULL when the request is one uncompressed message, else what is wrong with it. */
static const char *call_framing_error(const struct grpc_call *call) {
        if (call->in_len < PREFIX_SIZE)
                return "no request message";
        if (call->in[0] & 1)
                return "compressed message without grpc-encoding";
        if (call->in[0] != 0 || call->in_len != PREFIX_SIZE + (size_t) call_message_length(call))
                return "expected exactly one request message";
        return NULL;
}

/* The client half-closed: its one message goes to the handler, in its caller's turn. */
static void call_dispatch(struct grpc_call *call) {
        const char *error;

        if (call->state != CALL_RECEIVING)
                return;
        error = call_framing_error(call);
        if (error) {
                grpc_budget_pace_charge(call->conn);
                grpc_call_finish(call, GRPC_STATUS_INTERNAL, "%s", error);
                return;
        }
        call->state = CALL_QUEUED;
        grpc_budget_pace_submit(call);
}

void grpc_call_run(struct grpc_call *call) {
        call->state = CALL_HANDLER;
        call->method->handler(call, call->in + PREFIX_SIZE, call_message_length(call), call->method_userdata);
        /* The message is the handler's only while it runs. */
        call_drop_input(call);
}

static int on_data_chunk(nghttp2_session *session, uint8_t flags, int32_t stream_id, const uint8_t *data, size_t len,
                         void *user_data) {
        struct grpc_call *call = nghttp2_session_get_stream_user_data(session, stream_id);
        const char *over;
        size_t max;
        uint8_t *grown;

        if (!call || call->state != CALL_RECEIVING || !call->method)
                return 0;
        max = call->conn->server->opts.max_recv_message;
        if (call->in_len + len > PREFIX_SIZE + max) {
                grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "request message larger than %zu bytes", max);
                return 0;
        }
        over = grpc_budget_in_over(call->conn, len);
        if (over) {
                grpc_server_count_rejected(call->conn->server, over);
                grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "too many request bytes held at once, retry later");
                return 0;
        }
        grown = realloc(call->in, call->in_len + len);
        if (!grown)
                return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        memcpy(grown + call->in_len, data, len);
        call->in = grown;
        call->in_len += len;
        grpc_budget_in_changed(call->conn, (ssize_t) len);
        /* A declared length over the limit fails before its bytes arrive. */
        if (call->in_len >= PREFIX_SIZE) {
                uint32_t declared = (uint32_t) call->in[1] << 24 | (uint32_t) call->in[2] << 16 |
                                    (uint32_t) call->in[3] << 8 | call->in[4];
                if (declared > max)
                        grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED,
                                         "request message of %u bytes, more than %zu", declared, max);
        }
        return 0;
}

static int on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *user_data) {
        struct grpc_call *call;

        if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA)
                return 0;
        call = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
        if (!call)
                return 0;
        if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST)
                call_headers_done(call);
        if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) {
                /* The client's half is done: the body deadline has nothing left to watch. */
                call->body_deadline = sd_event_source_disable_unref(call->body_deadline);
                call_dispatch(call);
        }
        return 0;
}

static int on_stream_close(nghttp2_session *session, int32_t stream_id, uint32_t error_code, void *user_data) {
        struct grpc_call *call = nghttp2_session_get_stream_user_data(session, stream_id);

        if (!call)
                return 0;
        if (call->state == CALL_RECEIVING || call->state == CALL_QUEUED || call->state == CALL_HANDLER)
                grpc_server_count_call(call->conn->server, call, GRPC_STATUS_CANCELLED);
        call_cancel(call, GRPC_STATUS_CANCELLED);
        call_free(call);
        return 0;
}

int grpc_call_session_new(struct grpc_conn *c) {
        nghttp2_session_callbacks *cb;
        nghttp2_option *opt;
        nghttp2_settings_entry settings[] = {
                { NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, c->server->opts.max_streams_per_connection },
                { NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, MAX_METADATA_BYTES },
        };
        int r;

        if (nghttp2_session_callbacks_new(&cb) < 0)
                return -ENOMEM;
        nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
        nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
        nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
        nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
        if (nghttp2_option_new(&opt) < 0) {
                nghttp2_session_callbacks_del(cb);
                return -ENOMEM;
        }
        /* Streams over the limit are refused by nghttp2 too, before any callback. */
        nghttp2_option_set_max_settings(opt, 32);
        r = nghttp2_session_server_new2(&c->session, cb, c, opt);
        nghttp2_option_del(opt);
        nghttp2_session_callbacks_del(cb);
        if (r < 0)
                return -ENOMEM;
        r = nghttp2_submit_settings(c->session, NGHTTP2_FLAG_NONE, settings, ELEMENTSOF(settings));
        return r < 0 ? -ENOMEM : 0;
}
