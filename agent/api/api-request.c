/* SPDX-License-Identifier: MIT */
/* Requests of the local API: a request's life from its URI to its completion.
 *
 * The URI log callback allocates struct api_request (so we see the raw, still
 * percent-encoded path), the first access-handler call matches the route (api-route.c),
 * further calls collect the body, the last one runs the handler. A handler's reply
 * (api-reply.c) is only built there; it is queued with MHD on the next access-handler call
 * for that connection, which is immediately for synchronous replies, or after
 * MHD_resume_connection() for suspended ones. NOTIFY_COMPLETED counts the request and frees
 * it. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "api-internal.h"

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
        sd_event_source_disable_unref(r->pace_hold);
        api_budget_release(r);
        api_route_entry_unref(r->route);
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

/* ---- bodies and dispatch ---- */

/* What a request may send: nothing to a GET/HEAD route (a body there is only a way to make us
 * hold memory), a little from unprivileged callers, max_body from root and socket-group. */
#define API_UNPRIVILEGED_MAX_BODY 4096
static size_t request_max_body(const struct api_request *r) {
        if (r->method && (streq(r->method, "GET") || streq(r->method, "HEAD")))
                return 0;
        return r->peer.privileged ? r->api->max_body : MIN(r->api->max_body, (size_t) API_UNPRIVILEGED_MAX_BODY);
}

/* The body's declared length: false if there is none (chunked, or no body). */
static bool request_declared_length(struct api_request *r, unsigned long long *ret) {
        const char *cl;
        char *end;

        cl = MHD_lookup_connection_value(r->connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (!cl)
                return false;
        errno = 0;
        *ret = strtoull(cl, &end, 10);
        if (errno == ERANGE)
                *ret = ULLONG_MAX;
        return end != cl;
}

static bool request_body_too_large(struct api_request *r) {
        unsigned long long len;

        return request_declared_length(r, &len) && len > request_max_body(r);
}

static const char *budget_refusal(unsigned status) {
        return status == 413 ? "this caller's unfinished requests hold too many body bytes already"
                             : "the server's unfinished requests hold too many body bytes already";
}

/* A declared length is held against the budgets before any of it is read; a chunked body's
 * bytes as they come (request_add_body()). */
static bool request_reserve_body(struct api_request *r) {
        unsigned long long len;
        unsigned refused;

        if (!request_declared_length(r, &len) || len == 0)
                return true;
        refused = api_budget_hold_body(r, (size_t) len);
        if (refused == 0)
                return true;
        (void) api_reply_respond_error(r, refused, budget_refusal(refused));
        return false;
}

/* Pacing comes before anything costly is done for the request (placing a privileged peer reads
 * /proc); the route is known, for the 429's metric. */
static bool request_paced(struct api_request *r) {
        unsigned retry_after = api_budget_take_request(r->api, r->conn);

        if (retry_after == 0)
                return true;
        api_reply_pace(r, retry_after);
        return false;
}

static void request_place(struct api_request *r) {
        struct peer_place place = {};

        r->peer = api_conn_peer(r->api, r->conn);
        if (!r->peer.privileged || !r->api->place_fn)
                return;
        r->api->place_fn(&r->peer, r->api->place_userdata, &place);
        r->peer.privileged = place.privileged;
        free(place.pod_uid);
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
        r->peer = api_conn_peer(r->api, r->conn);
        r->peer.privileged = false; /* until placed */

        r->method = strdup(method);
        r->path = strdup(url);
        if (!r->method || !r->path) {
                (void) api_reply_respond(r, 500, NULL);
                return;
        }

        k = api_route_path_segments(raw, strcspn(raw, "?#"), &r->segments, &r->n_segments);
        if (k == -EBADMSG) {
                (void) api_reply_respond_error(r, 400, "malformed request path");
                return;
        }
        if (k < 0) {
                (void) api_reply_respond(r, 500, NULL);
                return;
        }

        k = api_route_match(r, &allow);
        if (k != -ENOMEM && !request_paced(r))
                return;
        if (k == -ENOENT) {
                (void) api_reply_respond_error(r, 404, "not found");
                return;
        }
        if (k == -EOPNOTSUPP) {
                api_reply_not_allowed(r, allow);
                return;
        }
        if (k < 0) {
                (void) api_reply_respond(r, 500, NULL);
                return;
        }
        request_place(r);
        if (r->route->privileged && !r->peer.privileged) {
                (void) api_reply_respond_error(r, 403, "permission denied");
                return;
        }
        /* A declared length over the limit is refused before any of it is read. */
        if (request_body_too_large(r)) {
                (void) api_reply_respond_error(r, 413, "request body too large");
                return;
        }
        if (!request_reserve_body(r))
                return;
        r->state = REQUEST_RECEIVING;
}

static void request_drop_body(struct api_request *r) {
        r->body_too_large = true;
        free(r->body);
        r->body = NULL;
        r->body_size = 0;
}

/* Chunked bodies have no declared length: past the limit, the rest is read and dropped so
 * that the 413 can still be sent on an orderly connection. Past a budget, the connection is
 * answered and closed at once (false): reading on would keep a caller over its budget busy. */
static bool request_add_body(struct api_request *r, const char *data, size_t size) {
        unsigned refused;
        char *grown;

        if (r->body_too_large)
                return true;
        if (size > request_max_body(r) - r->body_size) {
                request_drop_body(r);
                return true;
        }
        /* Beyond what is held already (a declared length): a chunked body's new bytes. */
        refused = r->body_size + size > r->budget_held ? api_budget_hold_body(r, r->body_size + size - r->budget_held) : 0;
        if (refused) {
                r->status = refused;
                request_drop_body(r);
                api_conn_send_final((struct api_conn *) r->conn, refused, budget_refusal(refused));
                return false;
        }
        grown = realloc(r->body, r->body_size + size + 1);
        if (!grown) {
                /* Treated like an oversized body: the handler never sees a truncated one. */
                request_drop_body(r);
                return true;
        }
        r->body = grown;
        memcpy(r->body + r->body_size, data, size);
        r->body_size += size;
        r->body[r->body_size] = 0;
        return true;
}

static void request_dispatch(struct api_request *r) {
        int k;

        if (r->body_too_large) {
                (void) api_reply_respond_error(r, 413, "request body too large");
                return;
        }
        /* Its owner removed the route while the body arrived: the handler's userdata may be
         * gone, and the route is no longer served. */
        if (r->route->removed) {
                (void) api_reply_respond_error(r, 404, "not found");
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
                api_reply_hold(r);
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

static struct api_conn *connection_conn(struct MHD_Connection *connection) {
        const union MHD_ConnectionInfo *info;

        info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        return info ? info->socket_context : NULL;
}

void *api_request_on_uri(void *cls, const char *uri, struct MHD_Connection *connection) {
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
        api_conn_seen_request(a, connection_conn(connection));
        api_conn_request_started(connection_conn(connection));
        r->next = a->requests;
        if (a->requests)
                a->requests->prev = r;
        a->requests = r;
        return r;
}

enum MHD_Result api_request_on_access(void *cls, struct MHD_Connection *connection, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_data_size, void **req_cls) {
        struct api_request *r = *req_cls;

        if (!r)
                return MHD_NO; /* out of memory in api_request_on_uri() */

        switch (r->state) {
        case REQUEST_NEW:
                api_conn_head_received(connection_conn(connection)); /* the head is complete */
                request_begin(r, url, method);
                if (r->state != REQUEST_RECEIVING)
                        api_conn_body_received(connection_conn(connection)); /* refused: no body awaited */
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
                        bool ok = request_add_body(r, upload_data, *upload_data_size);
                        *upload_data_size = 0;
                        return ok ? MHD_YES : MHD_NO;
                }
                api_conn_body_received(connection_conn(connection));
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
        if (r->state != REQUEST_RECEIVING)
                api_conn_body_received(connection_conn(connection)); /* refused: no body awaited */
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

void api_request_on_completed(void *cls, struct MHD_Connection *connection, void **req_cls,
                      enum MHD_RequestTerminationCode toe) {
        struct api_request *r = *req_cls;

        /* The connection may carry another request: its head is awaited from now. MHD closes
         * the connection itself after an error or "Connection: close". */
        if (toe == MHD_REQUEST_TERMINATED_COMPLETED_OK)
                api_conn_request_done(connection_conn(connection));
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

const struct peer *api_request_peer(const struct api_request *r) {
        return r ? &r->peer : NULL;
}

const char *api_request_body(const struct api_request *r, size_t *ret_size) {
        if (ret_size)
                *ret_size = r && r->body ? r->body_size : 0;
        if (!r)
                return NULL;
        return r->body ? r->body : "";
}
