/* SPDX-License-Identifier: MIT */
/* Requests of the local API: routing, bodies, handlers, replies, long-polls and streams.
 *
 * A request's life: the URI log callback allocates struct api_request (so we see the raw,
 * still percent-encoded path), the first access-handler call matches the route, further
 * calls collect the body, the last one runs the handler. A handler's reply is only built
 * there; it is queued with MHD on the next access-handler call for that connection, which is
 * immediately for synchronous replies, or after MHD_resume_connection() for suspended ones.
 * NOTIFY_COMPLETED counts the request and frees it. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/epoll.h>

#include "api-internal.h"

/* A stream whose reader does not keep up is cut off rather than buffered without bound. */
#define API_STREAM_BUFFER_MAX ((size_t) 8 * 1024 * 1024)
/* Code counted for a request whose client left before any reply (nginx's convention). */
#define API_CODE_CLIENT_GONE 499U

/* ---- requests ---- */

static struct api_request *request_free(struct api_request *r) {
        if (!r)
                return NULL;
        if (r->prev)
                r->prev->next = r->next;
        else if (r->api->requests == r)
                r->api->requests = r->next;
        if (r->next)
                r->next->prev = r->prev;
        sd_event_source_disable_unref(r->hangup_watch);
        route_entry_unref(r->route);
        if (r->response)
                MHD_destroy_response(r->response);
        for (size_t i = 0; i < r->n_segments; i++)
                free(r->segments[i]);
        free(r->segments);
        free(r->raw_uri);
        free(r->method);
        free(r->path);
        free(r->body);
        free(r->stream_buf);
        free(r);
        return NULL;
}

void request_resume(struct api_request *r) {
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
        request_resume(r);
        return 0;
}

static void request_suspend(struct api_request *r) {
        MHD_suspend_connection(r->connection);
        r->suspended = true;
        if (r->conn && r->conn->fd >= 0 && !r->hangup_watch)
                (void) sd_event_add_io(r->api->event, &r->hangup_watch, r->conn->fd, EPOLLRDHUP,
                                       on_hangup, r);
}

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
static int request_respond(struct api_request *r, unsigned status, struct MHD_Response *resp) {
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
                request_resume(r);
        return k;
}

static int request_respond_error(struct api_request *r, unsigned status, const char *message) {
        return request_respond(r, status, response_error(status, message));
}

/* Handlers may reply while they run, or later while the request waits. */
static bool request_may_reply(const struct api_request *r) {
        return r && (r->state == REQUEST_DISPATCHED || r->state == REQUEST_WAITING);
}

/* ---- paths and routes ---- */

static int hexval(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

static int percent_decode(const char *s, size_t n, char **ret) {
        _cleanup_free_ char *d = NULL;
        size_t o = 0;

        d = malloc(n + 1);
        if (!d)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                int hi, lo;

                if (s[i] != '%') {
                        d[o++] = s[i];
                        continue;
                }
                if (n - i < 3)
                        return -EBADMSG;
                hi = hexval(s[i + 1]);
                lo = hexval(s[i + 2]);
                /* %00 would cut the string short behind the handler's back. */
                if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
                        return -EBADMSG;
                d[o++] = (char) (hi << 4 | lo);
                i += 2;
        }
        d[o] = 0;
        *ret = TAKE_PTR(d);
        return 0;
}

/* Splits the raw path (query already cut off) into percent-decoded segments, so that an
 * encoded "/" inside a capture stays inside it. "/" is one empty segment. */
static int request_path_segments(const char *raw, size_t raw_len, char ***ret, size_t *ret_n) {
        char **segments = NULL;
        size_t n = 0;
        const char *p, *end = raw + raw_len;
        int r = 0;

        if (raw_len == 0 || raw[0] != '/')
                return -EBADMSG;
        for (p = raw + 1;; p++) {
                const char *slash = memchr(p, '/', (size_t) (end - p));
                const char *stop = slash ? slash : end;
                char **grown;

                grown = realloc(segments, (n + 1) * sizeof(char *));
                if (!grown) {
                        r = -ENOMEM;
                        break;
                }
                segments = grown;
                r = percent_decode(p, (size_t) (stop - p), &segments[n]);
                if (r < 0)
                        break;
                n++;
                if (!slash)
                        break;
                p = slash;
        }
        if (r < 0) {
                for (size_t i = 0; i < n; i++)
                        free(segments[i]);
                free(segments);
                return r;
        }
        *ret = segments;
        *ret_n = n;
        return 0;
}

unsigned pattern_captures(const char *pattern) {
        unsigned n = 0;

        for (const char *p = pattern; (p = strstr(p, "/{}")); p += 3)
                if (p[3] == '/' || p[3] == 0)
                        n++;
        return n;
}

static bool pattern_match(const char *pattern, char *const *segments, size_t n_segments,
                          unsigned params[static API_PARAMS_MAX], unsigned *ret_n_params) {
        const char *p = pattern;
        size_t i = 0;
        unsigned k = 0;

        while (*p == '/') {
                size_t len;

                p++;
                len = strcspn(p, "/");
                if (i >= n_segments)
                        return false;
                if (len == 2 && strncmp(p, "{}", 2) == 0) {
                        if (isempty(segments[i]) || k >= API_PARAMS_MAX)
                                return false;
                        params[k++] = (unsigned) i;
                } else if (strlen(segments[i]) != len || strncmp(segments[i], p, len) != 0)
                        return false;
                i++;
                p += len;
        }
        if (*p || i != n_segments)
                return false;
        *ret_n_params = k;
        return true;
}

static bool method_matches(const char *route_method, const char *method) {
        /* MHD answers HEAD like GET, without the body. */
        return streq(route_method, method) || (streq(method, "HEAD") && streq(route_method, "GET"));
}

/* Appends method to a ", "-separated list unless it is there already. */
static int allow_add(char **allow, const char *method) {
        size_t len = *allow ? strlen(*allow) : 0, mlen = strlen(method);
        char *grown;

        for (const char *p = *allow; p && *p; p += strspn(p, ", ")) {
                size_t l = strcspn(p, ",");

                if (l == mlen && strncmp(p, method, l) == 0)
                        return 0;
                p += l;
        }
        grown = realloc(*allow, len + mlen + 3);
        if (!grown)
                return -ENOMEM;
        if (len > 0) {
                memcpy(grown + len, ", ", 2);
                len += 2;
        }
        memcpy(grown + len, method, mlen + 1);
        *allow = grown;
        return 0;
}

/* Finds the route for the request. When only the method is wrong, -EOPNOTSUPP and
 * ret_allow gets the methods the path does take ("GET, POST"). */
static int request_route(struct api_request *r, char **ret_allow) {
        const struct api *a = r->api;
        _cleanup_free_ char *allow = NULL;
        unsigned params[API_PARAMS_MAX];
        unsigned n_params;
        int k;

        for (size_t i = 0; i < a->n_routes; i++) {
                struct route_entry *e = a->routes[i];

                if (!pattern_match(e->pattern, r->segments, r->n_segments, params, &n_params))
                        continue;
                if (method_matches(e->method, r->method)) {
                        r->route = route_entry_ref(e);
                        memcpy(r->params, params, sizeof(params));
                        r->n_params = n_params;
                        return 0;
                }
                k = allow_add(&allow, e->method);
                if (k < 0)
                        return k;
        }
        if (!allow)
                return -ENOENT;
        *ret_allow = TAKE_PTR(allow);
        return -EOPNOTSUPP;
}

static void request_reply_not_allowed(struct api_request *r, const char *allow) {
        struct MHD_Response *resp;

        resp = response_error(405, "method not allowed");
        if (resp && MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow) != MHD_YES) {
                MHD_destroy_response(resp);
                resp = NULL;
        }
        (void) request_respond(r, 405, resp);
}

/* What a request may send: nothing to a GET/HEAD route (a body there is only a way to make us
 * hold memory), a little from unprivileged callers, max_body from root and socket-group. */
#define API_UNPRIVILEGED_MAX_BODY 4096
static size_t request_max_body(const struct api_request *r) {
        if (r->method && (streq(r->method, "GET") || streq(r->method, "HEAD")))
                return 0;
        return r->peer.privileged ? r->api->max_body : MIN(r->api->max_body, (size_t) API_UNPRIVILEGED_MAX_BODY);
}

static bool request_body_too_large(struct api_request *r) {
        const char *cl;
        unsigned long long len;
        char *end;

        cl = MHD_lookup_connection_value(r->connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (!cl)
                return false;
        errno = 0;
        len = strtoull(cl, &end, 10);
        return errno == ERANGE || (end != cl && len > request_max_body(r));
}

/* Whether a body follows the headers (HTTP/1.1: only with Content-Length or
 * Transfer-Encoding). */
static bool request_expects_body(struct api_request *r) {
        const char *cl;

        if (MHD_lookup_connection_value(r->connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING))
                return true;
        cl = MHD_lookup_connection_value(r->connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        return cl && strspn(cl, "0") != strlen(cl);
}

/* First access-handler call: headers are in. Either the request is refused here, before
 * its body is read, or it moves on to REQUEST_RECEIVING. */
static void request_begin(struct api_request *r, const char *url, const char *method) {
        const union MHD_ConnectionInfo *info;
        _cleanup_free_ char *allow = NULL;
        const char *raw = r->raw_uri ? r->raw_uri : url;
        int k;

        info = MHD_get_connection_info(r->connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        r->conn = info ? info->socket_context : NULL;
        if (r->conn)
                r->peer = (struct api_peer) {
                        .pid = r->conn->pid,
                        .uid = r->conn->uid,
                        .gid = r->conn->gid,
                        .start_time = r->conn->start_time,
                        .privileged = conn_privileged(r->api, r->conn),
                };
        else
                r->peer = (struct api_peer) { .uid = (uid_t) -1, .gid = (gid_t) -1 };

        r->method = strdup(method);
        r->path = strdup(url);
        if (!r->method || !r->path) {
                (void) request_respond(r, 500, NULL);
                return;
        }

        k = request_path_segments(raw, strcspn(raw, "?#"), &r->segments, &r->n_segments);
        if (k == -EBADMSG) {
                (void) request_respond_error(r, 400, "malformed request path");
                return;
        }
        if (k < 0) {
                (void) request_respond(r, 500, NULL);
                return;
        }

        k = request_route(r, &allow);
        if (k == -ENOENT) {
                (void) request_respond_error(r, 404, "not found");
                return;
        }
        if (k == -EOPNOTSUPP) {
                request_reply_not_allowed(r, allow);
                return;
        }
        if (k < 0) {
                (void) request_respond(r, 500, NULL);
                return;
        }
        if (r->route->privileged && !r->peer.privileged) {
                (void) request_respond_error(r, 403, "permission denied");
                return;
        }
        /* A declared length over the limit is refused before any of it is read. */
        if (request_body_too_large(r)) {
                (void) request_respond_error(r, 413, "request body too large");
                return;
        }
        r->state = REQUEST_RECEIVING;
}

static void request_drop_body(struct api_request *r) {
        r->body_too_large = true;
        free(r->body);
        r->body = NULL;
        r->body_size = 0;
}

/* Chunked bodies have no declared length: past the limit, the rest is read and dropped so
 * that the 413 can still be sent on an orderly connection. */
static void request_add_body(struct api_request *r, const char *data, size_t size) {
        char *grown;

        if (r->body_too_large)
                return;
        if (size > request_max_body(r) - r->body_size) {
                request_drop_body(r);
                return;
        }
        grown = realloc(r->body, r->body_size + size + 1);
        if (!grown) {
                /* Treated like an oversized body: the handler never sees a truncated one. */
                request_drop_body(r);
                return;
        }
        r->body = grown;
        memcpy(r->body + r->body_size, data, size);
        r->body_size += size;
        r->body[r->body_size] = 0;
}

static void request_dispatch(struct api_request *r) {
        int k;

        if (r->body_too_large) {
                (void) request_respond_error(r, 413, "request body too large");
                return;
        }
        /* Its owner removed the route while the body arrived: the handler's userdata may be
         * gone, and the route is no longer served. */
        if (r->route->removed) {
                (void) request_respond_error(r, 404, "not found");
                return;
        }
        r->state = REQUEST_DISPATCHED;
        k = r->route->handler(r, r->route->userdata);
        /* Once the handler has replied or kept the request, its return value changes
         * nothing: the reply (or the owner's later reply) stands. */
        if (r->state != REQUEST_DISPATCHED)
                return;
        if (k < 0)
                (void) api_reply_error(r, 500, "internal error: %s", strerror(errno_abs(k)));
        else
                (void) api_reply_error(r, 500, "internal error: handler sent no reply");
}

static enum MHD_Result request_queue(struct api_request *r) {
        enum MHD_Result ok;

        ok = MHD_queue_response(r->connection, r->status, r->response);
        MHD_destroy_response(r->response);
        r->response = NULL;
        if (ok != MHD_YES) {
                r->state = REQUEST_FAILED;
                return MHD_NO;
        }
        r->state = REQUEST_SENDING;
        return MHD_YES;
}

/* What the access handler tells MHD after the request moved on. */
static enum MHD_Result request_settle(struct api_request *r) {
        switch (r->state) {
        case REQUEST_RECEIVING:
        case REQUEST_SENDING:
                return MHD_YES;
        case REQUEST_WAITING:
                request_suspend(r);
                return MHD_YES;
        case REQUEST_REPLIED:
                return request_queue(r);
        case REQUEST_NEW:
        case REQUEST_DISPATCHED:
        case REQUEST_FAILED:
                return MHD_NO;
        }
        return MHD_NO;
}

/* ---- MHD callbacks ---- */

void *api_on_uri(void *cls, const char *uri, struct MHD_Connection *connection) {
        struct api *a = cls;
        struct api_request *r;

        r = calloc(1, sizeof(*r));
        if (!r)
                return NULL;
        r->raw_uri = strdup(uri);
        if (!r->raw_uri) {
                free(r);
                return NULL;
        }
        r->api = a;
        r->connection = connection;
        r->started = now_usec(CLOCK_MONOTONIC);
        const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        conn_seen_request(a, info ? info->socket_context : NULL);
        r->next = a->requests;
        if (a->requests)
                a->requests->prev = r;
        a->requests = r;
        return r;
}

enum MHD_Result api_on_access(void *cls, struct MHD_Connection *connection, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_data_size, void **req_cls) {
        struct api_request *r = *req_cls;

        if (!r)
                return MHD_NO; /* out of memory in api_on_uri() */

        switch (r->state) {
        case REQUEST_NEW:
                request_begin(r, url, method);
                /* A reply queued in this first call makes MHD close the connection afterwards
                 * (it cannot know the body was not needed). Worth it to avoid reading the body
                 * of a refused request; without a body, the refusal waits for the next call
                 * and the connection stays open. */
                if (r->state == REQUEST_REPLIED && !request_expects_body(r))
                        return MHD_YES;
                if (r->state != REQUEST_RECEIVING || *upload_data_size == 0)
                        break;
                __attribute__((fallthrough));
        case REQUEST_RECEIVING:
                if (*upload_data_size > 0) {
                        request_add_body(r, upload_data, *upload_data_size);
                        *upload_data_size = 0;
                        return MHD_YES;
                }
                request_dispatch(r);
                break;
        case REQUEST_WAITING:
                /* Resumed without a reply: the client went away, or we are shutting down. */
                return MHD_NO;
        case REQUEST_REPLIED:
                /* A refused request said it had no body: anything that comes is dropped. */
                if (*upload_data_size > 0) {
                        *upload_data_size = 0;
                        return MHD_YES;
                }
                break;
        case REQUEST_DISPATCHED:
        case REQUEST_SENDING:
        case REQUEST_FAILED:
                break;
        }
        return request_settle(r);
}

static bool request_owner_holds(const struct api_request *r) {
        return r->state == REQUEST_WAITING || (r->streaming && !r->stream_ended);
}

static void request_account(struct api_request *r) {
        struct api *a = r->api;
        char code[16];
        const char *route;

        /* Never reached the access handler (malformed, or the client left while sending
         * headers): MHD's business, not a request of ours. */
        if (!a->requests_total || r->state == REQUEST_NEW)
                return;
        route = api_request_route(r);
        snprintf(code, sizeof(code), "%u", r->status ? r->status : API_CODE_CLIENT_GONE);
        (void) metric_inc(a->requests_total, route, code);
        (void) metric_observe(a->request_duration,
                              (double) (now_usec(CLOCK_MONOTONIC) - r->started) / USEC_PER_SEC, route);
}

void api_on_completed(void *cls, struct MHD_Connection *connection, void **req_cls,
                      enum MHD_RequestTerminationCode toe) {
        struct api_request *r = *req_cls;

        if (!r)
                return;
        *req_cls = NULL;
        r->hangup_watch = sd_event_source_disable_unref(r->hangup_watch);
        /* Whoever still holds the request hears that it is gone, however it ended: a HEAD of a
         * stream completes "OK" after the headers while the stream's owner still holds it. */
        if (request_owner_holds(r) && r->on_abort)
                r->on_abort(r, r->abort_userdata);
        request_account(r);
        struct api *a = r->api;
        request_free(r);
        api_check_idle(a);
}

static ssize_t on_stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
        struct api_request *r = cls;
        size_t n;

        if (r->client_gone)
                return MHD_CONTENT_READER_END_WITH_ERROR;
        if (r->stream_len > r->stream_off) {
                n = MIN(max, r->stream_len - r->stream_off);
                memcpy(buf, r->stream_buf + r->stream_off, n);
                r->stream_off += n;
                if (r->stream_off == r->stream_len)
                        r->stream_off = r->stream_len = 0;
                return (ssize_t) n;
        }
        if (r->stream_ended)
                return MHD_CONTENT_READER_END_OF_STREAM;
        /* Nothing queued: returning 0 without suspending would make MHD spin. */
        request_suspend(r);
        return 0;
}

/* ---- request accessors ---- */

const char *api_request_method(const struct api_request *r) {
        return r ? r->method : NULL;
}

const char *api_request_path(const struct api_request *r) {
        return r ? r->path : NULL;
}

const char *api_request_route(const struct api_request *r) {
        return r && r->route ? r->route->pattern : "unmatched";
}

const char *api_request_param(const struct api_request *r, unsigned i) {
        if (!r || i >= r->n_params)
                return NULL;
        return r->segments[r->params[i]];
}

const char *api_request_query(const struct api_request *r, const char *name) {
        const char *value = NULL;
        size_t size = 0;

        if (!r || !name)
                return NULL;
        /* "?watch" (no "=") is present with an empty value, not absent. */
        if (MHD_lookup_connection_value_n(r->connection, MHD_GET_ARGUMENT_KIND, name, strlen(name),
                                          &value, &size) != MHD_YES)
                return NULL;
        return value ? value : "";
}

const struct api_peer *api_request_peer(const struct api_request *r) {
        return r ? &r->peer : NULL;
}

const char *api_request_body(const struct api_request *r, size_t *ret_size) {
        if (ret_size)
                *ret_size = r && r->body ? r->body_size : 0;
        if (!r)
                return NULL;
        return r->body ? r->body : "";
}

/* ---- replies ---- */

int api_reply_json(struct api_request *r, unsigned status, cJSON *body) {
        if (!request_may_reply(r)) {
                cJSON_Delete(body);
                return -EALREADY;
        }
        return request_respond(r, status, response_from_json(body));
}

int api_reply_text(struct api_request *r, unsigned status, const char *content_type, char *text,
                   size_t size) {
        if (!request_may_reply(r)) {
                free(text);
                return -EALREADY;
        }
        /* NULL text with a size: the caller's allocation failed. */
        if (!text && size > 0)
                return request_respond(r, status, NULL);
        return request_respond(r, status, response_from_text(text, size, content_type));
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
                return request_respond(r, status, NULL);
        }
        return request_respond(r, status, response_error(status, message));
}

void api_request_suspend(struct api_request *r, api_abort_fn on_abort, void *userdata) {
        /* Without on_abort the holder could not learn that the client left, and would reply to
         * a freed request: refuse to suspend (the handler's reply-less return then fails it). */
        if (!r || r->state != REQUEST_DISPATCHED || !on_abort)
                return;
        r->on_abort = on_abort;
        r->abort_userdata = userdata;
        r->state = REQUEST_WAITING; /* the access handler suspends the connection on return */
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
        return request_respond(r, status, resp);
}

static bool request_streaming(const struct api_request *r) {
        return r && r->streaming && !r->stream_ended &&
               (r->state == REQUEST_REPLIED || r->state == REQUEST_SENDING);
}

int api_stream_write(struct api_request *r, const char *data, size_t size) {
        size_t pending;

        if (!request_streaming(r) || (!data && size > 0))
                return -EINVAL;
        if (r->client_gone)
                return -ECONNRESET;
        if (size == 0)
                return 0;
        pending = r->stream_len - r->stream_off;
        if (size > API_STREAM_BUFFER_MAX - pending)
                return -ENOBUFS;
        if (r->stream_off > 0) {
                memmove(r->stream_buf, r->stream_buf + r->stream_off, pending);
                r->stream_off = 0;
                r->stream_len = pending;
        }
        if (r->stream_len + size > r->stream_alloc) {
                size_t want = MAX(r->stream_len + size, r->stream_alloc * 2);
                char *grown = realloc(r->stream_buf, want);

                if (!grown)
                        return -ENOMEM;
                r->stream_buf = grown;
                r->stream_alloc = want;
        }
        memcpy(r->stream_buf + r->stream_len, data, size);
        r->stream_len += size;
        request_resume(r); /* the reader suspended the connection when it ran dry */
        return 0;
}

int api_stream_end(struct api_request *r) {
        if (!request_streaming(r))
                return -EINVAL;
        r->stream_ended = true;
        request_resume(r);
        return 0;
}
