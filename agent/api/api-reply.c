/* SPDX-License-Identifier: MIT */
/* Replies of the local API: holding a request (suspend, resume, noticing the client hang up),
 * building replies (JSON, text, errors) and streaming.
 *
 * A reply is only built here, while the handler runs or while the request waits; the access
 * handler (api-request.c) queues it with MHD on its next call for that connection. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <openssl/crypto.h>

#include "api-internal.h"

/* A stream whose reader does not keep up is cut off rather than buffered without bound: a
 * chunk is queued only while what is pending stays within this (a chunk larger than this on
 * its own still goes out to a reader that has caught up). What the handler writes while it
 * runs (a watch's initial state, as large as the store) does not count. A watch client that
 * is cut off lists again. */
#define API_STREAM_BUFFER_MAX ((size_t) 1024 * 1024)
/* How long a request over its caller's pace is held before its 429. */
#define API_PACE_HOLD_USEC (1 * USEC_PER_SEC)

/* ---- holding a request ---- */

void api_reply_resume(struct api_request *r) {
        r->hangup_watch = sd_event_source_disable_unref(r->hangup_watch);
        if (!r->suspended)
                return;
        r->suspended = false;
        MHD_resume_connection(r->connection);
        api_kick(r->api);
}

/* MHD does not notice a client hanging up on a suspended connection, so we watch for it
 * ourselves. Only EPOLLRDHUP: a client that pipelines its next request must not count. */
static int on_hangup(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        struct api_request *r = userdata;

        r->client_gone = true;
        api_reply_resume(r);
        return 0;
}

void api_reply_hold(struct api_request *r) {
        MHD_suspend_connection(r->connection);
        r->suspended = true;
        if (r->conn && r->conn->fd >= 0 && !r->hangup_watch)
                (void) sd_event_add_io(r->api->event, &r->hangup_watch, r->conn->fd, EPOLLRDHUP,
                                       on_hangup, r);
}

/* ---- building replies ---- */

static struct MHD_Response *response_from_text(char *text, size_t size, const char *content_type) {
        struct MHD_Response *resp;

        resp = MHD_create_response_from_buffer(size, text, MHD_RESPMEM_MUST_FREE);
        if (!resp) {
                free(text);
                return NULL;
        }
        if (content_type && MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type) != MHD_YES) {
                MHD_destroy_response(resp);
                return NULL;
        }
        return resp;
}

/* A body that holds a secret (a private key): wiped, then freed, when libmicrohttpd drops the
 * response after the last byte is sent or the client went away, so no copy of the key stays in
 * the heap for a later allocation to expose. */
struct secret_body {
        char *text;
        size_t size;
};

static void secret_body_free(void *cls) {
        struct secret_body *b = cls;
        OPENSSL_cleanse(b->text, b->size);
        free(b->text);
        free(b);
}

static struct MHD_Response *response_from_secret(char *text, size_t size, const char *content_type) {
        struct secret_body *b = malloc(sizeof(*b));
        struct MHD_Response *resp = NULL;

        if (b) {
                *b = (struct secret_body) { .text = text, .size = size };
                resp = MHD_create_response_from_buffer_with_free_callback_cls(size, text, secret_body_free, b);
        }
        if (!resp) {
                OPENSSL_cleanse(text, size);
                free(text);
                free(b);
                return NULL;
        }
        if (content_type && MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type) != MHD_YES) {
                MHD_destroy_response(resp);
                return NULL;
        }
        return resp;
}

/* Renders and frees body; a newline at the end for people using curl. */
static struct MHD_Response *response_from_json(cJSON *body) {
        char *text, *line;
        size_t len;

        text = body ? cJSON_PrintUnformatted(body) : NULL;
        cJSON_Delete(body);
        if (!text)
                return NULL;
        len = strlen(text);
        line = realloc(text, len + 2);
        if (!line) {
                cJSON_free(text);
                return NULL;
        }
        line[len] = '\n';
        line[len + 1] = 0;
        return response_from_text(line, len + 1, "application/json");
}

static struct MHD_Response *response_error(unsigned status, const char *message) {
        cJSON *body;

        body = cJSON_CreateObject();
        if (!body || !cJSON_AddStringToObject(body, "error", message) ||
            !cJSON_AddNumberToObject(body, "code", status)) {
                cJSON_Delete(body);
                return NULL;
        }
        return response_from_json(body);
}

/* Takes resp. NULL means the reply could not be built (out of memory): a plain 500 goes out
 * instead, or if even that fails, the connection is dropped. The request is finished either
 * way. */
int api_reply_respond(struct api_request *r, unsigned status, struct MHD_Response *resp) {
        bool waiting = r->state == REQUEST_WAITING;
        int k = 0;

        if (!resp) {
                k = -ENOMEM;
                status = 500;
                resp = response_error(status, "out of memory");
        }
        r->status = status;
        if (resp) {
                r->response = resp;
                r->state = REQUEST_REPLIED;
        } else
                r->state = REQUEST_FAILED;
        if (waiting)
                api_reply_resume(r);
        return k;
}

int api_reply_respond_error(struct api_request *r, unsigned status, const char *message) {
        return api_reply_respond(r, status, response_error(status, message));
}

/* Handlers may reply while they run, or later while the request waits. */
static bool request_may_reply(const struct api_request *r) {
        return r && (r->state == REQUEST_DISPATCHED || r->state == REQUEST_WAITING);
}

/* 405, with the methods the path does take in Allow. */
void api_reply_not_allowed(struct api_request *r, const char *allow) {
        struct MHD_Response *resp;

        resp = response_error(405, "method not allowed");
        if (resp && MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow) != MHD_YES) {
                MHD_destroy_response(resp);
                resp = NULL;
        }
        (void) api_reply_respond(r, 405, resp);
}

static void request_reply_paced(struct api_request *r) {
        struct MHD_Response *resp;
        char value[16];

        snprintf(value, sizeof(value), "%u", r->retry_after);
        resp = response_error(429, "too many requests from this caller: retry later");
        if (resp && MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, value) != MHD_YES) {
                MHD_destroy_response(resp);
                resp = NULL;
        }
        (void) api_reply_respond(r, 429, resp);
}

static int on_pace_hold_end(sd_event_source *s, uint64_t usec, void *userdata) {
        struct api_request *r = userdata;

        r->pace_hold = sd_event_source_disable_unref(r->pace_hold);
        request_reply_paced(r);
        return 0;
}

void api_reply_pace(struct api_request *r, unsigned retry_after_sec) {
        r->retry_after = retry_after_sec;
        /* A 429 at once would let a caller that pipelines make the loop parse and answer as
         * fast as it writes; held, each of its connections costs a request a second. */
        if (sd_event_add_time_relative(r->api->event, &r->pace_hold, CLOCK_MONOTONIC, API_PACE_HOLD_USEC,
                                       USEC_PER_SEC / 100, on_pace_hold_end, r) < 0) {
                request_reply_paced(r);
                return;
        }
        r->state = REQUEST_WAITING; /* the access handler suspends the connection on return */
}

/* ---- replies ---- */

int api_reply_json(struct api_request *r, unsigned status, cJSON *body) {
        if (!request_may_reply(r)) {
                cJSON_Delete(body);
                return -EALREADY;
        }
        return api_reply_respond(r, status, response_from_json(body));
}

int api_reply_text(struct api_request *r, unsigned status, const char *content_type, char *text,
                   size_t size) {
        if (!request_may_reply(r)) {
                free(text);
                return -EALREADY;
        }
        /* NULL text with a size: the caller's allocation failed. */
        if (!text && size > 0)
                return api_reply_respond(r, status, NULL);
        return api_reply_respond(r, status, response_from_text(text, size, content_type));
}

int api_reply_secret(struct api_request *r, unsigned status, const char *content_type, char *text,
                     size_t size) {
        if (!request_may_reply(r)) {
                if (text)
                        OPENSSL_cleanse(text, size);
                free(text);
                return -EALREADY;
        }
        if (!text)
                return api_reply_respond(r, status, NULL);
        return api_reply_respond(r, status, response_from_secret(text, size, content_type));
}

int api_reply_error(struct api_request *r, unsigned status, const char *format, ...) {
        _cleanup_free_ char *message = NULL;
        va_list ap;
        int k;

        if (!request_may_reply(r))
                return -EALREADY;
        va_start(ap, format);
        k = vasprintf(&message, format, ap);
        va_end(ap);
        if (k < 0) {
                message = NULL; /* undefined after a failed vasprintf() */
                return api_reply_respond(r, status, NULL);
        }
        return api_reply_respond(r, status, response_error(status, message));
}

void api_reply_suspend(struct api_request *r, api_abort_fn on_abort, void *userdata) {
        /* Without on_abort the holder could not learn that the client left, and would reply to
         * a freed request: refuse to suspend (the handler's reply-less return then fails it). */
        if (!r || r->state != REQUEST_DISPATCHED || !on_abort)
                return;
        r->on_abort = on_abort;
        r->abort_userdata = userdata;
        r->state = REQUEST_WAITING; /* the access handler suspends the connection on return */
}

/* ---- streams ---- */

static ssize_t on_stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
        struct api_request *r = cls;
        size_t n;

        if (r->client_gone)
                return MHD_CONTENT_READER_END_WITH_ERROR;
        if (r->stream_len > r->stream_off) {
                n = MIN(max, r->stream_len - r->stream_off);
                memcpy(buf, r->stream_buf + r->stream_off, n);
                r->stream_off += n;
                r->stream_read += n;
                if (r->stream_off == r->stream_len)
                        r->stream_off = r->stream_len = 0;
                return (ssize_t) n;
        }
        if (r->stream_ended)
                return MHD_CONTENT_READER_END_OF_STREAM;
        /* Nothing queued: returning 0 without suspending would make MHD spin. */
        api_reply_hold(r);
        return 0;
}

int api_reply_stream(struct api_request *r, unsigned status, const char *content_type,
                     api_abort_fn on_abort, void *userdata) {
        struct MHD_Response *resp;

        if (!request_may_reply(r))
                return -EALREADY;
        /* Unknown size: MHD sends HTTP/1.1 chunked encoding. */
        resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, on_stream_read, r, NULL);
        if (resp && content_type &&
            MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type) != MHD_YES) {
                MHD_destroy_response(resp);
                resp = NULL;
        }
        if (resp) {
                r->streaming = true;
                r->on_abort = on_abort;
                r->abort_userdata = userdata;
        }
        return api_reply_respond(r, status, resp);
}

static bool request_streaming(const struct api_request *r) {
        return r && r->streaming && !r->stream_ended &&
               (r->state == REQUEST_REPLIED || r->state == REQUEST_SENDING);
}

/* The reader fell behind: its buffer goes, the stream ends in error and the connection is
 * closed at once (MHD may hold a chunk for a reader that reads nothing at all). */
static int stream_drop(struct api_request *r) {
        r->stream_dropped = true;
        r->client_gone = true;
        r->stream_buf = mfree(r->stream_buf);
        r->stream_off = r->stream_len = r->stream_alloc = 0;
        (void) metric_inc(r->api->streams_dropped, api_request_route(r));
        if (r->conn && r->conn->fd >= 0)
                (void) shutdown(r->conn->fd, SHUT_RDWR);
        api_reply_resume(r);
        return -ENOBUFS;
}

int api_reply_stream_write(struct api_request *r, const char *data, size_t size) {
        size_t pending;

        if (!request_streaming(r) || (!data && size > 0))
                return -EINVAL;
        if (r->client_gone)
                return -ECONNRESET;
        if (size == 0)
                return 0;
        pending = (size_t) (r->stream_written - MAX(r->stream_read, r->stream_free_until));
        if (r->state != REQUEST_REPLIED && r->stream_written > r->stream_free_until && pending > 0 &&
            (pending > API_STREAM_BUFFER_MAX || size > API_STREAM_BUFFER_MAX - pending))
                return stream_drop(r);
        pending = r->stream_len - r->stream_off;
        if (r->stream_off > 0) {
                memmove(r->stream_buf, r->stream_buf + r->stream_off, pending);
                r->stream_off = 0;
                r->stream_len = pending;
        }
        if (r->stream_len + size > r->stream_alloc) {
                size_t want = MAX(r->stream_len + size, MIN(r->stream_alloc * 2, API_STREAM_BUFFER_MAX));
                char *grown = realloc(r->stream_buf, want);

                if (!grown)
                        return -ENOMEM;
                r->stream_buf = grown;
                r->stream_alloc = want;
        }
        memcpy(r->stream_buf + r->stream_len, data, size);
        r->stream_len += size;
        r->stream_written += size;
        if (r->state == REQUEST_REPLIED) /* the handler is still running */
                r->stream_free_until = r->stream_written;
        api_reply_resume(r); /* the reader suspended the connection when it ran dry */
        return 0;
}

int api_reply_stream_end(struct api_request *r) {
        if (!request_streaming(r))
                return -EINVAL;
        r->stream_ended = true;
        api_reply_resume(r);
        return 0;
}
