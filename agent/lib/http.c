/* SPDX-License-Identifier: MIT */

/* libcurl's multi interface on sd-event.
 *
 * curl tells us which sockets to watch (on_curl_socket) and when to call it back
 * (on_curl_timer); sd-event IO and timer sources call curl_multi_socket_action()
 * (client_socket_action). curl must never be re-entered from its own callbacks, and the
 * caller's done callbacks may submit, cancel or free anything, so the work after each
 * curl_multi_socket_action() happens in steps, outside curl:
 *
 *   1. transfers cancelled or submitted from inside a curl callback are removed from or
 *      added to the multi handle (they were only marked while curl was running),
 *   2. every finished transfer is collected from curl_multi_info_read() into a queue,
 *   3. the queue is drained one transfer at a time, calling its done callback.
 *
 * Every transfer is in exactly one place: c->transfers (PENDING, RUNNING, CANCELLED),
 * c->finished (FINISHED), or nowhere while its callback runs (DISPATCHING). */

#include <limits.h>
#include <sys/epoll.h>

#include "http.h"

/* Retry-After is clamped to this, so a caller adding it to a timestamp cannot overflow. */
#define RETRY_AFTER_MAX (24 * USEC_PER_HOUR)

enum transfer_state {
        TRANSFER_PENDING,     /* submitted from inside a curl callback; not in the multi yet */
        TRANSFER_RUNNING,     /* in the multi handle */
        TRANSFER_CANCELLED,   /* cancelled inside a curl callback; removed once curl returns */
        TRANSFER_FINISHED,    /* out of the multi, queued for its done callback */
        TRANSFER_DISPATCHING, /* its done callback is running; freed when it returns */
};

struct transfer_list {
        struct http_transfer *head, *tail;
};

struct http_transfer {
        struct http_client *client;
        enum transfer_state state;
        struct http_transfer *prev, *next;

        CURL *easy;
        http_done_fn done;
        void *userdata;

        size_t max_body; /* 0: the caller streams through its own CURLOPT_WRITEFUNCTION */
        char *body;
        size_t body_size, body_allocated;
        int write_error; /* why our write function refused data (-EFBIG, -ENOMEM) */

        CURLcode result;
        int error; /* set when the transfer failed outside curl (adding it to the multi) */

        /* Values handed out by http_response_header(): curl only keeps its own copy until
         * the next curl_easy_header() call, we promise "until the callback returns". */
        char **header_values;
        size_t n_header_values;

        char errbuf[CURL_ERROR_SIZE];
};

struct http_socket {
        struct http_client *client;
        sd_event_source *source;
        struct http_socket *prev, *next;
};

struct http_client {
        sd_event *event;
        CURLM *multi;
        sd_event_source *timer;
        bool curl_initialized;

        struct transfer_list transfers; /* PENDING, RUNNING, CANCELLED */
        struct transfer_list finished;  /* FINISHED, in completion order */
        struct http_socket *sockets;    /* every socket curl asked us to watch */
        unsigned n_active;

        bool in_curl;     /* inside curl_multi_socket_action(): curl must not be re-entered */
        bool dispatching; /* done callbacks are running */
        bool dying;       /* http_client_free() was called while in_curl or dispatching */
};

static void list_append(struct transfer_list *l, struct http_transfer *t) {
        t->prev = l->tail;
        t->next = NULL;
        if (l->tail)
                l->tail->next = t;
        else
                l->head = t;
        l->tail = t;
}

static void list_remove(struct transfer_list *l, struct http_transfer *t) {
        if (t->prev)
                t->prev->next = t->next;
        else
                l->head = t->next;
        if (t->next)
                t->next->prev = t->prev;
        else
                l->tail = t->prev;
        t->prev = t->next = NULL;
}

static int multi_code_to_errno(CURLMcode code) {
        switch (code) {
        case CURLM_OK:
                return 0;
        case CURLM_OUT_OF_MEMORY:
                return -ENOMEM;
        case CURLM_BAD_HANDLE:
        case CURLM_BAD_EASY_HANDLE:
        case CURLM_UNKNOWN_OPTION:
                return -EINVAL;
        case CURLM_ADDED_ALREADY:
                return -EEXIST;
        case CURLM_RECURSIVE_API_CALL:
                return -EBUSY;
        default:
                return -EIO;
        }
}

int http_curl_code_to_errno(CURLcode code) {
        switch (code) {
        case CURLE_OK:
                return 0;
        case CURLE_UNSUPPORTED_PROTOCOL:
                return -EPROTONOSUPPORT;
        case CURLE_URL_MALFORMAT:
        case CURLE_BAD_FUNCTION_ARGUMENT:
        case CURLE_UNKNOWN_OPTION:
                return -EINVAL;
        case CURLE_NOT_BUILT_IN:
        case CURLE_FUNCTION_NOT_FOUND:
                return -EOPNOTSUPP;
        case CURLE_COULDNT_RESOLVE_PROXY:
        case CURLE_COULDNT_RESOLVE_HOST:
                return -EHOSTUNREACH;
        case CURLE_COULDNT_CONNECT:
                return -ECONNREFUSED;
        case CURLE_INTERFACE_FAILED:
                return -EADDRNOTAVAIL;
        case CURLE_OPERATION_TIMEDOUT:
                return -ETIMEDOUT;
        case CURLE_OUT_OF_MEMORY:
                return -ENOMEM;
        case CURLE_WRITE_ERROR:          /* a write function refused data: the caller aborted */
        case CURLE_ABORTED_BY_CALLBACK:
                return -ECANCELED;
        case CURLE_FILESIZE_EXCEEDED:
                return -EFBIG;
        case CURLE_TOO_MANY_REDIRECTS:
                return -ELOOP;
        case CURLE_REMOTE_ACCESS_DENIED:
        case CURLE_LOGIN_DENIED:
                return -EACCES;
        case CURLE_RANGE_ERROR:
                return -ERANGE;
        case CURLE_SEND_ERROR:
        case CURLE_RECV_ERROR:
        case CURLE_GOT_NOTHING:
                return -ECONNRESET;
        case CURLE_PARTIAL_FILE:         /* the connection closed before the whole body came */
                return -EPIPE;
        case CURLE_WEIRD_SERVER_REPLY:   /* the server does not speak HTTP as it should */
        case CURLE_HTTP2:
        case CURLE_HTTP2_STREAM:
        case CURLE_HTTP3:
        case CURLE_QUIC_CONNECT_ERROR:
        case CURLE_BAD_CONTENT_ENCODING:
        case CURLE_UNRECOVERABLE_POLL:
                return -EBADMSG;
        /* Every TLS failure, the handshake as much as verification or pinning, is -EPROTO:
         * the peer could not be spoken to securely. */
        case CURLE_SSL_CONNECT_ERROR:
        case CURLE_PEER_FAILED_VERIFICATION:
        case CURLE_SSL_ENGINE_NOTFOUND:
        case CURLE_SSL_ENGINE_SETFAILED:
        case CURLE_SSL_CERTPROBLEM:
        case CURLE_SSL_CIPHER:
        case CURLE_SSL_ENGINE_INITFAILED:
        case CURLE_USE_SSL_FAILED:
        case CURLE_SSL_CACERT_BADFILE:
        case CURLE_SSL_SHUTDOWN_FAILED:
        case CURLE_SSL_CRL_BADFILE:
        case CURLE_SSL_ISSUER_ERROR:
        case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
        case CURLE_SSL_INVALIDCERTSTATUS:
        case CURLE_SSL_CLIENTCERT:
                return -EPROTO;
        case CURLE_AGAIN:
                return -EAGAIN;
        case CURLE_RECURSIVE_API_CALL:
                return -EBUSY;
        default:
                return -EIO;
        }
}

/* ---- transfers ---- */

static struct http_transfer *transfer_free(struct http_transfer *t) {
        if (!t)
                return NULL;
        if (t->easy)
                curl_easy_cleanup(t->easy);
        for (size_t i = 0; i < t->n_header_values; i++)
                free(t->header_values[i]);
        free(t->header_values);
        free(t->body);
        free(t);
        return NULL;
}

static size_t transfer_write(char *ptr, size_t size, size_t nmemb, void *userdata) {
        struct http_transfer *t = userdata;
        size_t n = size * nmemb, need;

        /* Returning less than n makes curl fail the transfer with CURLE_WRITE_ERROR;
         * write_error tells transfer_response() what it really was. */
        if (n > t->max_body - t->body_size || n >= SIZE_MAX - t->body_size) {
                t->write_error = -EFBIG;
                return 0;
        }

        need = t->body_size + n + 1;
        if (need > t->body_allocated) {
                size_t limit = t->max_body < SIZE_MAX ? t->max_body + 1 : SIZE_MAX;
                size_t a = MAX(need, (size_t) 4096);
                char *p;

                if (t->body_allocated <= SIZE_MAX / 2)
                        a = MAX(a, t->body_allocated * 2);
                a = MIN(a, limit);

                p = realloc(t->body, a);
                if (!p) {
                        t->write_error = -ENOMEM;
                        return 0;
                }
                t->body = p;
                t->body_allocated = a;
        }

        memcpy(t->body + t->body_size, ptr, n);
        t->body_size += n;
        t->body[t->body_size] = 0;
        return n;
}

static size_t write_refuse(_unused_ char *ptr, _unused_ size_t size, _unused_ size_t nmemb,
                           _unused_ void *userdata) {
        return 0;
}

static int transfer_setup(struct http_transfer *t) {
        if (curl_easy_setopt(t->easy, CURLOPT_PRIVATE, t) != CURLE_OK ||
            curl_easy_setopt(t->easy, CURLOPT_ERRORBUFFER, t->errbuf) != CURLE_OK ||
            curl_easy_setopt(t->easy, CURLOPT_NOSIGNAL, 1L) != CURLE_OK)
                return -EINVAL;

        if (t->max_body == 0)
                return 0; /* streaming: the caller's WRITEFUNCTION stays */

        if (curl_easy_setopt(t->easy, CURLOPT_WRITEFUNCTION, transfer_write) != CURLE_OK ||
            curl_easy_setopt(t->easy, CURLOPT_WRITEDATA, t) != CURLE_OK)
                return -EINVAL;

        /* With a Content-Length, curl refuses an oversized body before it arrives. */
        if ((uint64_t) t->max_body <= (uint64_t) INT64_MAX &&
            curl_easy_setopt(t->easy, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t) t->max_body) != CURLE_OK)
                return -EINVAL;

        return 0;
}

/* A transfer cancelled inside curl stays in the multi until curl returns; make sure none
 * of the caller's callbacks (and their userdata, which it may free now) are used again. */
static void transfer_silence(struct http_transfer *t) {
        if (t->max_body == 0) {
                (void) curl_easy_setopt(t->easy, CURLOPT_WRITEFUNCTION, write_refuse);
                (void) curl_easy_setopt(t->easy, CURLOPT_WRITEDATA, NULL);
        }
        (void) curl_easy_setopt(t->easy, CURLOPT_HEADERFUNCTION, NULL);
        (void) curl_easy_setopt(t->easy, CURLOPT_HEADERDATA, NULL);
        (void) curl_easy_setopt(t->easy, CURLOPT_XFERINFOFUNCTION, NULL);
        (void) curl_easy_setopt(t->easy, CURLOPT_NOPROGRESS, 1L);
}

static void transfer_complete(struct http_transfer *t) {
        char empty[1] = "";
        long status = 0;
        struct http_response resp = {
                .curl_code = t->result,
                .easy = t->easy,
        };

        if (curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status) == CURLE_OK)
                resp.status = status;

        if (t->error < 0)
                resp.error = t->error;
        else if (t->result == CURLE_WRITE_ERROR && t->write_error < 0)
                resp.error = t->write_error;
        else
                resp.error = http_curl_code_to_errno(t->result);

        if (resp.error == -EFBIG && t->write_error == -EFBIG)
                resp.error_message = "response body larger than the size limit";
        else if (resp.error < 0)
                resp.error_message = t->errbuf[0] ? t->errbuf : curl_easy_strerror(t->result);

        if (t->max_body > 0) {
                resp.body = t->body ?: empty;
                resp.body_size = t->body_size;
        }

        t->done(t->client, &resp, t->userdata);
}

/* ---- the client ---- */

static struct http_socket *socket_free(struct http_socket *s) {
        struct http_client *c;

        if (!s)
                return NULL;

        c = s->client;
        if (s->prev)
                s->prev->next = s->next;
        else
                c->sockets = s->next;
        if (s->next)
                s->next->prev = s->prev;

        /* Safe even while this source is dispatching: sd-event only detaches it then. */
        sd_event_source_disable_unref(s->source);
        free(s);
        return NULL;
}

static void client_destroy(struct http_client *c) {
        struct http_transfer *t;

        while ((t = c->transfers.head)) {
                list_remove(&c->transfers, t);
                if (t->state != TRANSFER_PENDING)
                        (void) curl_multi_remove_handle(c->multi, t->easy);
                transfer_free(t);
        }
        while ((t = c->finished.head)) {
                list_remove(&c->finished, t);
                transfer_free(t);
        }

        if (c->multi)
                (void) curl_multi_cleanup(c->multi);
        /* curl does not always say CURL_POLL_REMOVE for connections it closes on cleanup. */
        while (c->sockets)
                socket_free(c->sockets);

        sd_event_source_disable_unref(c->timer);
        sd_event_unref(c->event);
        if (c->curl_initialized)
                curl_global_cleanup();
        free(c);
}

static int client_arm_timer(struct http_client *c, long timeout_ms) {
        usec_t when;
        int r;

        if (timeout_ms < 0)
                return sd_event_source_set_enabled(c->timer, SD_EVENT_OFF);

        when = now_usec(CLOCK_MONOTONIC);
        /* curl rounds the delay down to whole milliseconds and does not call us again for
         * the same deadline: firing early would leave the transfer without a timer. */
        if (timeout_ms > 0)
                when += (usec_t) timeout_ms * USEC_PER_MSEC + USEC_PER_MSEC - 1;

        r = sd_event_source_set_time(c->timer, when);
        if (r < 0)
                return r;
        return sd_event_source_set_enabled(c->timer, SD_EVENT_ONESHOT);
}

/* Step 1: apply what was only marked while curl was running. */
static void client_flush_deferred(struct http_client *c) {
        struct http_transfer *t, *next;

        for (t = c->transfers.head; t; t = next) {
                next = t->next;

                if (t->state == TRANSFER_CANCELLED) {
                        list_remove(&c->transfers, t);
                        (void) curl_multi_remove_handle(c->multi, t->easy);
                        transfer_free(t);
                } else if (t->state == TRANSFER_PENDING) {
                        int r = multi_code_to_errno(curl_multi_add_handle(c->multi, t->easy));
                        if (r >= 0) {
                                t->state = TRANSFER_RUNNING;
                                continue;
                        }
                        /* Submit already returned success; report the failure as a completion. */
                        list_remove(&c->transfers, t);
                        t->error = r;
                        t->state = TRANSFER_FINISHED;
                        list_append(&c->finished, t);
                }
        }
}

/* Step 2: move every transfer curl finished to the queue. */
static void client_collect(struct http_client *c) {
        CURLMsg *m;
        int left;

        while ((m = curl_multi_info_read(c->multi, &left))) {
                struct http_transfer *t;
                CURLcode result;
                char *p = NULL;

                if (m->msg != CURLMSG_DONE)
                        continue;
                if (curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &p) != CURLE_OK || !p)
                        continue;

                t = (struct http_transfer *) p;
                if (t->state != TRANSFER_RUNNING)
                        continue;

                result = m->data.result; /* m dies with curl_multi_remove_handle() */
                list_remove(&c->transfers, t);
                (void) curl_multi_remove_handle(c->multi, t->easy);
                t->result = result;
                t->state = TRANSFER_FINISHED;
                list_append(&c->finished, t);
        }
}

/* Step 3: one callback at a time; each may change the queue or free the client. */
static void client_dispatch(struct http_client *c) {
        struct http_transfer *t;

        c->dispatching = true;
        while (!c->dying && (t = c->finished.head)) {
                list_remove(&c->finished, t);
                t->state = TRANSFER_DISPATCHING;
                c->n_active--;
                transfer_complete(t);
                transfer_free(t);
        }
        c->dispatching = false;

        if (c->dying)
                client_destroy(c);
}

/* Calls curl, then finishes what it reported. c may be freed when this returns. */
static void client_socket_action(struct http_client *c, curl_socket_t fd, int mask) {
        int running;

        c->in_curl = true;
        (void) curl_multi_socket_action(c->multi, fd, mask, &running);
        c->in_curl = false;

        if (c->dying) {
                client_destroy(c);
                return;
        }

        if (fd == CURL_SOCKET_TIMEOUT) {
                long timeout_ms;

                /* Our timer is one-shot: re-arm it from curl's own view, in case curl saw
                 * no change worth calling on_curl_timer() for. */
                if (curl_multi_timeout(c->multi, &timeout_ms) == CURLM_OK)
                        (void) client_arm_timer(c, timeout_ms);
        }

        client_flush_deferred(c);
        client_collect(c);
        client_dispatch(c);
}

static int on_io(_unused_ sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        struct http_client *c = userdata;
        int mask = 0;

        if (revents & EPOLLIN)
                mask |= CURL_CSELECT_IN;
        if (revents & EPOLLOUT)
                mask |= CURL_CSELECT_OUT;
        if (revents & (EPOLLERR | EPOLLHUP))
                mask |= CURL_CSELECT_ERR;

        client_socket_action(c, fd, mask);
        return 0;
}

static int on_timer(_unused_ sd_event_source *s, _unused_ uint64_t usec, void *userdata) {
        client_socket_action(userdata, CURL_SOCKET_TIMEOUT, 0);
        return 0;
}

static int on_curl_socket(_unused_ CURL *easy, curl_socket_t fd, int what, void *userdata,
                          void *socketp) {
        struct http_client *c = userdata;
        struct http_socket *s = socketp;
        uint32_t events = 0;

        if (what == CURL_POLL_REMOVE) {
                socket_free(s);
                return 0;
        }

        if (what & CURL_POLL_IN)
                events |= EPOLLIN;
        if (what & CURL_POLL_OUT)
                events |= EPOLLOUT;

        if (!s) {
                s = calloc(1, sizeof(*s));
                if (!s)
                        return -1;
                s->client = c;
                s->next = c->sockets;
                if (c->sockets)
                        c->sockets->prev = s;
                c->sockets = s;

                if (sd_event_add_io(c->event, &s->source, fd, events, on_io, c) < 0 ||
                    curl_multi_assign(c->multi, fd, s) != CURLM_OK) {
                        socket_free(s);
                        return -1;
                }
                (void) sd_event_source_set_description(s->source, "http-socket");
        } else if (events != 0 && sd_event_source_set_io_events(s->source, events) < 0)
                return -1;

        if (sd_event_source_set_enabled(s->source, events != 0 ? SD_EVENT_ON : SD_EVENT_OFF) < 0)
                return -1;
        return 0;
}

static int on_curl_timer(_unused_ CURLM *multi, long timeout_ms, void *userdata) {
        /* Only arm: calling curl_multi_socket_action() from here would re-enter curl. */
        return client_arm_timer(userdata, timeout_ms) < 0 ? -1 : 0;
}

int http_client_new(sd_event *e, struct http_client **ret) {
        _cleanup_(http_client_freep) struct http_client *c = NULL;
        int r;

        if (!e || !ret)
                return -EINVAL;

        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->event = sd_event_ref(e);

        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
                return -EIO;
        c->curl_initialized = true;

        c->multi = curl_multi_init();
        if (!c->multi)
                return -ENOMEM;

        /* 1ms accuracy: sd-event's default of 250ms would stretch curl's timeouts. */
        r = sd_event_add_time(c->event, &c->timer, CLOCK_MONOTONIC, 0, USEC_PER_MSEC, on_timer, c);
        if (r < 0)
                return r;
        r = sd_event_source_set_enabled(c->timer, SD_EVENT_OFF);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(c->timer, "http-timer");

        if (curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, on_curl_socket) != CURLM_OK ||
            curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c) != CURLM_OK ||
            curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, on_curl_timer) != CURLM_OK ||
            curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c) != CURLM_OK)
                return -EIO;

        *ret = TAKE_PTR(c);
        return 0;
}

struct http_client *http_client_free(struct http_client *c) {
        if (!c)
                return NULL;

        if (!c->in_curl && !c->dispatching) {
                client_destroy(c);
                return NULL;
        }

        /* Called from a callback: cancel everything now (so no other callback runs), let
         * client_socket_action()/client_dispatch() finish the job once the stack unwinds. */
        while (c->finished.head)
                http_transfer_cancel(c->finished.head);
        for (struct http_transfer *t = c->transfers.head, *next; t; t = next) {
                next = t->next;
                http_transfer_cancel(t);
        }
        c->dying = true;
        return NULL;
}

int http_client_submit(struct http_client *c, CURL *easy, size_t max_body, http_done_fn done,
                       void *userdata, struct http_transfer **ret) {
        struct http_transfer *t;
        int r;

        if (!easy)
                return -EINVAL;
        if (!c || !done) {
                curl_easy_cleanup(easy);
                return -EINVAL;
        }
        if (c->dying) {
                curl_easy_cleanup(easy);
                return -ESHUTDOWN;
        }

        t = calloc(1, sizeof(*t));
        if (!t) {
                curl_easy_cleanup(easy);
                return -ENOMEM;
        }
        t->client = c;
        t->easy = easy;
        t->done = done;
        t->userdata = userdata;
        t->max_body = max_body;

        r = transfer_setup(t);
        if (r < 0) {
                transfer_free(t);
                return r;
        }

        if (c->in_curl)
                t->state = TRANSFER_PENDING; /* curl refuses re-entry; client_flush_deferred() */
        else {
                r = multi_code_to_errno(curl_multi_add_handle(c->multi, easy));
                if (r < 0) {
                        transfer_free(t);
                        return r;
                }
                t->state = TRANSFER_RUNNING;
        }

        list_append(&c->transfers, t);
        c->n_active++;
        if (ret)
                *ret = t;
        return 0;
}

void http_transfer_cancel(struct http_transfer *t) {
        struct http_client *c;

        if (!t)
                return;
        c = t->client;

        switch (t->state) {
        case TRANSFER_PENDING:
                list_remove(&c->transfers, t);
                transfer_free(t);
                break;
        case TRANSFER_RUNNING:
                if (c->in_curl) {
                        t->state = TRANSFER_CANCELLED;
                        transfer_silence(t);
                        break;
                }
                list_remove(&c->transfers, t);
                (void) curl_multi_remove_handle(c->multi, t->easy);
                transfer_free(t);
                break;
        case TRANSFER_FINISHED:
                list_remove(&c->finished, t);
                transfer_free(t);
                break;
        case TRANSFER_CANCELLED:
        case TRANSFER_DISPATCHING:
                return; /* already on its way out, and no longer counted */
        }

        c->n_active--;
}

CURL *http_transfer_easy(const struct http_transfer *t) {
        return t->easy;
}

unsigned http_client_active(const struct http_client *c) {
        return c ? c->n_active : 0;
}

const char *http_response_header(const struct http_response *resp, const char *name) {
        struct http_transfer *t;
        struct curl_header *h;
        char *p = NULL, *copy, **values;

        if (!resp || !resp->easy || isempty(name))
                return NULL;
        if (curl_easy_header(resp->easy, name, 0, CURLH_HEADER, -1, &h) != CURLHE_OK)
                return NULL;

        /* Not one of ours (or no memory to keep a copy): curl's value, valid until its next
         * curl_easy_header() call. */
        if (curl_easy_getinfo(resp->easy, CURLINFO_PRIVATE, &p) != CURLE_OK || !p)
                return h->value;
        t = (struct http_transfer *) p;

        values = reallocarray(t->header_values, t->n_header_values + 1, sizeof(char *));
        if (!values)
                return h->value;
        t->header_values = values;

        copy = strdup(h->value);
        if (!copy)
                return h->value;
        t->header_values[t->n_header_values++] = copy;
        return copy;
}

usec_t http_response_retry_after(const struct http_response *resp) {
        const char *v;
        time_t when;
        usec_t now, at;

        v = http_response_header(resp, "Retry-After");
        if (isempty(v))
                return 0;

        if (v[strspn(v, "0123456789")] == '\0') {
                /* delta-seconds; strtoull() saturates on overflow, and so do we */
                unsigned long long s = strtoull(v, NULL, 10);

                if (s >= RETRY_AFTER_MAX / USEC_PER_SEC)
                        return RETRY_AFTER_MAX;
                return (usec_t) s * USEC_PER_SEC;
        }

        when = curl_getdate(v, NULL);
        if (when <= 0)
                return 0;

        if ((uint64_t) when >= USEC_INFINITY / USEC_PER_SEC)
                return RETRY_AFTER_MAX;
        at = (usec_t) when * USEC_PER_SEC;
        now = now_usec(CLOCK_REALTIME);
        if (at <= now)
                return 0;
        return MIN(at - now, RETRY_AFTER_MAX);
}
