/* SPDX-License-Identifier: MIT */
/* The gRPC server's socket and connections: accept (with a cap on connections, paused while
 * out of file descriptors), read the peer, count it against its caller's limits, feed what
 * arrives to the connection's HTTP/2 session and write what it produces, without blocking the
 * loop; close connections that say nothing; the socket file is watched (socket-watch.h) and
 * bound afresh when something else takes its path. The HTTP/2 and gRPC layers are in
 * grpc-call.c, the callers' byte budgets and the pacing of calls in grpc-budget.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "grpc-internal.h"
#include "log.h"
#include "socket-trust.h"
#include "socket-watch.h"
#include "string-table.h"

#define DEFAULT_MAX_CONNECTIONS 1000U
#define DEFAULT_MAX_STREAMS_PER_CONNECTION 1024U
#define DEFAULT_MAX_STREAMS 4096U
#define DEFAULT_MAX_RECV_MESSAGE (4U * 1024 * 1024)
#define DEFAULT_MAX_UNSENT (1U * 1024 * 1024)
#define DEFAULT_HEADER_TIMEOUT (10 * USEC_PER_SEC)
#define DEFAULT_BODY_TIMEOUT (10 * USEC_PER_SEC)
#define DEFAULT_IDLE_TIMEOUT (60 * USEC_PER_SEC)
#define DEFAULT_MAX_CONNECTIONS_PER_CALLER 64U
#define DEFAULT_MAX_STREAMS_PER_CALLER 1024U
/* Request bytes: a caller may hold a few messages at once, the server what 64 callers hold,
 * within a bound on the agent's memory. */
#define DEFAULT_CALLER_IN_MESSAGES 4U
#define DEFAULT_SERVER_IN_CALLERS 64U
#define DEFAULT_MAX_REQUEST_BYTES_CEILING (64U * 1024 * 1024)
#define DEFAULT_CALLER_UNSENT_STREAMS 4U
#define DEFAULT_SERVER_UNSENT_STREAMS 64U
#define DEFAULT_CALLS_PER_SECOND_PER_CALLER 100U
#define DEFAULT_CALL_BURST_PER_CALLER 512U
/* Out of file descriptors: accept again after this, rather than spin on EMFILE; the warning
 * about it at most this often. */
#define ACCEPT_PAUSE_USEC (250 * USEC_PER_MSEC)
#define ACCEPT_WARN_INTERVAL_USEC (60 * USEC_PER_SEC)
/* Peers that cannot be attested (gone, a zombie, their PID reused) all together: one pod could
 * otherwise hold a count per throwaway uid of children that connect and exit. */
#define GRPC_MAX_UNATTESTED_CONNECTIONS 8U
#define GRPC_UNATTESTED_KEY "unattested"
/* Read this much per wakeup at most, so one busy connection cannot hold the loop. */
#define READ_CHUNK 16384
#define READS_PER_WAKEUP 8
#define ACCEPTS_PER_WAKEUP 32

static const char *const grpc_server_status_table[_GRPC_STATUS_MAX] = {
        [GRPC_STATUS_OK] = "OK",
        [GRPC_STATUS_CANCELLED] = "CANCELLED",
        [GRPC_STATUS_UNKNOWN] = "UNKNOWN",
        [GRPC_STATUS_INVALID_ARGUMENT] = "INVALID_ARGUMENT",
        [GRPC_STATUS_DEADLINE_EXCEEDED] = "DEADLINE_EXCEEDED",
        [GRPC_STATUS_NOT_FOUND] = "NOT_FOUND",
        [GRPC_STATUS_ALREADY_EXISTS] = "ALREADY_EXISTS",
        [GRPC_STATUS_PERMISSION_DENIED] = "PERMISSION_DENIED",
        [GRPC_STATUS_RESOURCE_EXHAUSTED] = "RESOURCE_EXHAUSTED",
        [GRPC_STATUS_FAILED_PRECONDITION] = "FAILED_PRECONDITION",
        [GRPC_STATUS_ABORTED] = "ABORTED",
        [GRPC_STATUS_OUT_OF_RANGE] = "OUT_OF_RANGE",
        [GRPC_STATUS_UNIMPLEMENTED] = "UNIMPLEMENTED",
        [GRPC_STATUS_INTERNAL] = "INTERNAL",
        [GRPC_STATUS_UNAVAILABLE] = "UNAVAILABLE",
        [GRPC_STATUS_DATA_LOSS] = "DATA_LOSS",
        [GRPC_STATUS_UNAUTHENTICATED] = "UNAUTHENTICATED",
};
DEFINE_STRING_TABLE_LOOKUP_TO_STRING(grpc_server_status, enum grpc_status);

/* ---- metrics ---- */

static int register_metrics(struct grpc_server *s, struct metrics *metrics) {
        static const char *const call_labels[] = { "server", "method", "status", NULL };
        static const char *const server_label[] = { "server", NULL };
        static const char *const reject_labels[] = { "server", "reason", NULL };
        const struct metric_def defs[] = {
                { METRIC_COUNTER, "pinion_grpc_calls_total", "gRPC calls ended, by server, method and status.",
                  call_labels, NULL, 0, &s->m_calls },
                { METRIC_GAUGE, "pinion_grpc_streams_open", "gRPC calls in progress, by server.", server_label, NULL, 0,
                  &s->m_streams },
                { METRIC_COUNTER, "pinion_grpc_rejected_total",
                  "gRPC connections and streams refused or reset over a limit, by server and reason "
                  "(connections, caller-connections, unattested, streams, caller-streams, request-bytes, "
                  "caller-request-bytes, slow-reader, unsent-bytes, caller-unsent-bytes, protocol, "
                  "header-timeout, body-timeout, idle-timeout, caller-rate, accept-failed).",
                  reject_labels, NULL, 0, &s->m_rejected },
                { METRIC_COUNTER, "pinion_grpc_socket_replaced_total",
                  "Times a gRPC server's socket file was found moved, deleted or replaced and a fresh "
                  "socket was bound there, by server.",
                  server_label, NULL, 0, &s->m_socket_replaced },
        };

        int r;

        if (!metrics)
                return 0;
        r = metrics_register(metrics, defs, ELEMENTSOF(defs), NULL, NULL, &s->metrics_reg);
        if (r < 0)
                return r;
        /* The server's own series at zero from the start: a rate or an alert has a zero to
         * begin from. (Calls and refusals carry values known only when they happen.) */
        (void) metric_set(s->m_streams, 0, s->name);
        (void) metric_touch(s->m_socket_replaced, s->name);
        return 0;
}

void grpc_server_count_call(struct grpc_server *s, const struct grpc_call *call, enum grpc_status status) {
        /* Unknown paths share one label, so that a caller cannot grow the series without end. */
        const char *method = call->method ? call->method->path : "unknown";

        (void) metric_inc(s->m_calls, s->name, method, grpc_server_status_to_string(status));
        log_debug("gRPC %s: %s from pid %d ended: %s", s->name, call->path ?: "(no path)", (int) call->conn->creds.pid,
                  grpc_server_status_to_string(status));
}

void grpc_server_streams_changed(struct grpc_server *s, int delta) {
        s->n_streams = (unsigned) ((int) s->n_streams + delta);
        (void) metric_set(s->m_streams, (double) s->n_streams, s->name);
}

void grpc_server_count_rejected(struct grpc_server *s, const char *reason) {
        (void) metric_inc(s->m_rejected, s->name, reason);
}

static void count_rejected(struct grpc_server *s, const char *reason) {
        grpc_server_count_rejected(s, reason);
}

const struct grpc_method *grpc_server_find_method(const struct grpc_server *s, const char *path, void **ret_userdata) {
        for (size_t i = 0; path && i < s->n_methods; i++)
                if (streq(s->methods[i]->path, path)) {
                        *ret_userdata = s->method_userdata[i];
                        return s->methods[i];
                }
        return NULL;
}

/* ---- per-caller counts ---- */

static struct grpc_count *count_get(struct grpc_server *s, const char *key) {
        struct grpc_count *k;

        for (k = s->counts; k; k = k->next)
                if (streq(k->key, key))
                        return k;
        k = calloc(1, sizeof(*k));
        if (!k)
                return NULL;
        k->key = strdup(key);
        if (!k->key) {
                free(k);
                return NULL;
        }
        grpc_budget_pace_count_new(s, k);
        k->next = s->counts;
        s->counts = k;
        return k;
}

static void count_free(struct grpc_server *s, struct grpc_count *k) {
        for (struct grpc_count **p = &s->counts; *p; p = &(*p)->next)
                if (*p == k) {
                        *p = k->next;
                        break;
                }
        grpc_budget_pace_count_free(s, k);
        free(k->key);
        free(k);
}

void grpc_server_count_put(struct grpc_server *s, struct grpc_count *k) {
        if (!k || k->conns > 0 || k->streams > 0 || !grpc_budget_pace_count_idle(s, k))
                return;
        count_free(s, k);
}

/* The caller's count, made if new: its pod's, whatever its uid; the one shared count of every
 * peer that cannot be attested, whatever its uid; else its uid's. 0 with *ret NULL:
 * privileged, not counted. */
static int conn_count_key(struct grpc_server *s, struct grpc_conn *c, char **ret) {
        _cleanup_free_ char *pod = NULL;
        bool privileged = c->peer.privileged, attested = c->peer.start_time != 0;

        *ret = NULL;
        if (s->opts.place) {
                struct peer_place place = {};

                s->opts.place(&c->peer, s->opts.place_userdata, &place);
                privileged = place.privileged;
                pod = place.pod_uid;
                attested = place.attested;
        }
        if (pod)
                return asprintf(ret, "pod:%s", pod) < 0 ? -ENOMEM : 0;
        if (!attested)
                return (*ret = strdup(GRPC_UNATTESTED_KEY)) ? 0 : -ENOMEM;
        if (privileged)
                return 0;
        return asprintf(ret, "uid:%u", (unsigned) c->creds.uid) < 0 ? -ENOMEM : 0;
}

/* NULL: admitted and counted; else why not (the metric's reason). */
static const char *conn_account(struct grpc_server *s, struct grpc_conn *c) {
        _cleanup_free_ char *key = NULL;
        struct grpc_count *k;

        if (conn_count_key(s, c, &key) < 0)
                return "memory";
        if (!key)
                return NULL;
        k = count_get(s, key);
        if (!k)
                return "memory";
        if (streq(key, GRPC_UNATTESTED_KEY) && k->conns >= GRPC_MAX_UNATTESTED_CONNECTIONS) {
                grpc_server_count_put(s, k);
                return "unattested";
        }
        if (k->conns >= s->opts.max_connections_per_caller) {
                grpc_server_count_put(s, k);
                return "caller-connections";
        }
        k->conns++;
        c->count = k;
        return NULL;
}

bool grpc_server_conn_may_open_stream(const struct grpc_conn *c) {
        return !c->count || c->count->streams < c->server->opts.max_streams_per_caller;
}

static void conn_idle_check(struct grpc_conn *c);

void grpc_server_conn_streams_changed(struct grpc_conn *c, int delta) {
        if (c->count)
                c->count->streams = (unsigned) ((int) c->count->streams + delta);
        grpc_server_streams_changed(c->server, delta);
        conn_idle_check(c);
}

/* ---- a connection ---- */

static void conn_free(struct grpc_conn *c) {
        struct grpc_server *s;

        if (!c)
                return;
        s = c->server;
        grpc_call_free_all(c, GRPC_STATUS_CANCELLED);
        if (c->session)
                nghttp2_session_del(c->session);
        sd_event_source_disable_unref(c->io);
        sd_event_source_disable_unref(c->flush);
        sd_event_source_disable_unref(c->idle_deadline);
        safe_close(c->fd);
        peer_creds_done(&c->creds);
        if (c->count) {
                c->count->conns--;
                grpc_server_count_put(s, c->count);
        }
        if (c->out) {
                explicit_bzero(c->out, c->out_len);
                free(c->out);
        }
        if (c->prev)
                c->prev->next = c->next;
        else
                s->conns = c->next;
        if (c->next)
                c->next->prev = c->prev;
        s->n_conns--;
        free(c);
        /* A connection went: accepting may go on if it had paused at the cap (out of fds, the
         * pause's end turns it on). */
        if (s->listen_source && !s->accept_paused)
                (void) sd_event_source_set_enabled(s->listen_source, SD_EVENT_ON);
}

/* Writes what is pending; -EAGAIN when the socket is full. */
static int conn_write_pending(struct grpc_conn *c) {
        while (c->out_off < c->out_len) {
                ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                c->out_off += (size_t) n;
        }
        if (c->out)
                explicit_bzero(c->out, c->out_len);
        c->out_len = c->out_off = 0;
        return 0;
}

static int conn_keep(struct grpc_conn *c, const uint8_t *data, size_t n) {
        uint8_t *grown = realloc(c->out, n);

        if (!grown)
                return -ENOMEM;
        memcpy(grown, data, n);
        c->out = grown;
        c->out_len = n;
        c->out_off = 0;
        return 0;
}

/* Hands nghttp2's output to the socket until either has nothing more; what the socket does not
 * take waits in c->out, and nghttp2 is not asked for more meanwhile: a client that does not
 * read holds back only its own connection. */
static int conn_send(struct grpc_conn *c) {
        int r = conn_write_pending(c);

        if (r < 0)
                return r;
        for (;;) {
                const uint8_t *data;
                ssize_t n = nghttp2_session_mem_send(c->session, &data), w;

                if (n < 0)
                        return -EPROTO;
                if (n == 0)
                        return 0;
                w = send(c->fd, data, (size_t) n, MSG_NOSIGNAL);
                if (w < 0 && errno != EAGAIN && errno != EINTR)
                        return -errno;
                if (w < n)
                        return conn_keep(c, data + MAX(w, (ssize_t) 0), (size_t) (n - MAX(w, (ssize_t) 0))) ?: -EAGAIN;
        }
}

/* Flushes, then closes the connection when HTTP/2 is done with it or the socket failed. */
static void conn_flush(struct grpc_conn *c) {
        int r = c->broken ? -EPIPE : conn_send(c);

        if (r < 0 && r != -EAGAIN) {
                log_debug("gRPC %s: closing a connection (pid %d): %s", c->server->name, (int) c->creds.pid,
                          strerror(-r));
                conn_free(c);
                return;
        }
        if (r != -EAGAIN && !nghttp2_session_want_read(c->session) && !nghttp2_session_want_write(c->session)) {
                conn_free(c);
                return;
        }
        c->want_out = r == -EAGAIN;
        grpc_server_conn_update_events(c);
}

static bool conn_held(const struct grpc_conn *c) {
        return c->count && c->count->held;
}

void grpc_server_conn_update_events(struct grpc_conn *c) {
        (void) sd_event_source_set_io_events(c->io, (conn_held(c) ? 0 : EPOLLIN) | (c->want_out ? EPOLLOUT : 0));
}

static int on_flush(sd_event_source *src, void *userdata) {
        conn_flush(userdata);
        return 0;
}

void grpc_server_conn_schedule_flush(struct grpc_conn *c) {
        if (c->flush)
                (void) sd_event_source_set_enabled(c->flush, SD_EVENT_ONESHOT);
}

static int conn_read(struct grpc_conn *c) {
        uint8_t buf[READ_CHUNK];

        for (unsigned i = 0; i < READS_PER_WAKEUP; i++) {
                ssize_t n = recv(c->fd, buf, sizeof(buf), 0), used;

                if (n < 0)
                        return errno == EAGAIN || errno == EINTR ? 0 : -errno;
                if (n == 0)
                        return -ECONNRESET;
                used = nghttp2_session_mem_recv(c->session, buf, (size_t) n);
                explicit_bzero(buf, (size_t) n);
                if (used < 0) {
                        log_debug("gRPC %s: HTTP/2 error from pid %d: %s", c->server->name, (int) c->creds.pid,
                                  nghttp2_strerror((int) used));
                        count_rejected(c->server, "protocol");
                        /* nghttp2 has queued a GOAWAY: send it, then close. */
                        (void) conn_send(c);
                        return -EPROTO;
                }
                if (c->broken)
                        return -EPROTO;
                /* Out of its caller's tokens: what it sends next waits in the socket. */
                if (conn_held(c))
                        break;
        }
        /* More may be waiting: the loop comes back (level-triggered) after others had a turn. */
        return 0;
}

static int on_io(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        struct grpc_conn *c = userdata;

        if (revents & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
                int r = conn_read(c);

                if (r < 0) {
                        conn_free(c);
                        return 0;
                }
        }
        conn_flush(c);
        return 0;
}

/* No call open since the deadline was armed: before any request, a connection that says
 * nothing; after one, an idle connection, told with GOAWAY (clients reconnect when they need
 * to). Either way its slot is given back. */
static int on_idle_deadline(sd_event_source *src, uint64_t usec, void *userdata) {
        struct grpc_conn *c = userdata;
        struct grpc_server *s = c->server;

        if (!c->got_request) {
                log_debug("gRPC %s: closing a connection (pid %d) that sent no request within %llus", s->name,
                          (int) c->creds.pid, (unsigned long long) (s->opts.header_timeout / USEC_PER_SEC));
                count_rejected(s, "header-timeout");
        } else {
                log_debug("gRPC %s: closing a connection (pid %d) idle for %llus", s->name, (int) c->creds.pid,
                          (unsigned long long) (s->opts.idle_timeout / USEC_PER_SEC));
                count_rejected(s, "idle-timeout");
                if (nghttp2_session_terminate_session(c->session, NGHTTP2_NO_ERROR) == 0)
                        (void) conn_send(c);
        }
        conn_free(c);
        return 0;
}

/* The deadline runs while the connection has no call open. */
static void conn_idle_check(struct grpc_conn *c) {
        usec_t timeout;

        if (!c->idle_deadline)
                return;
        if (c->n_calls > 0) {
                c->got_request = true;
                (void) sd_event_source_set_enabled(c->idle_deadline, SD_EVENT_OFF);
                return;
        }
        timeout = c->got_request ? c->server->opts.idle_timeout : c->server->opts.header_timeout;
        (void) sd_event_source_set_time_relative(c->idle_deadline, timeout);
        (void) sd_event_source_set_enabled(c->idle_deadline, SD_EVENT_ONESHOT);
}

static int conn_start(struct grpc_conn *c) {
        struct grpc_server *s = c->server;
        int r;

        r = grpc_call_session_new(c);
        if (r < 0)
                return r;
        r = sd_event_add_io(s->event, &c->io, c->fd, EPOLLIN, on_io, c);
        if (r < 0)
                return r;
        r = sd_event_add_defer(s->event, &c->flush, on_flush, c);
        if (r < 0)
                return r;
        r = sd_event_add_time_relative(s->event, &c->idle_deadline, CLOCK_MONOTONIC, s->opts.header_timeout,
                                       USEC_PER_SEC / 10, on_idle_deadline, c);
        if (r < 0)
                return r;
        /* The server's SETTINGS go out at once. */
        grpc_server_conn_schedule_flush(c);
        return 0;
}

int grpc_server_add_connection(struct grpc_server *s, int fd) {
        const char *reason;
        struct grpc_conn *c;
        int r;

        if (s->n_conns >= s->opts.max_connections) {
                count_rejected(s, "connections");
                log_debug("gRPC %s: connection refused: %u connections open", s->name, s->n_conns);
                safe_close(fd);
                return -EBUSY;
        }
        c = calloc(1, sizeof(*c));
        if (!c) {
                safe_close(fd);
                return -ENOMEM;
        }
        c->server = s;
        c->fd = fd;
        peer_creds_read(fd, &c->creds);
        c->peer = peer_creds_to_peer(&c->creds, s->opts.socket_gid);
        reason = conn_account(s, c);
        if (reason) {
                count_rejected(s, reason);
                log_debug("gRPC %s: connection refused (pid %d, uid %u): %s limit", s->name, (int) c->creds.pid,
                          (unsigned) c->creds.uid, reason);
                peer_creds_done(&c->creds);
                free(c);
                safe_close(fd);
                return -EBUSY;
        }
        c->next = s->conns;
        if (s->conns)
                s->conns->prev = c;
        s->conns = c;
        s->n_conns++;
        r = conn_start(c);
        if (r < 0) {
                conn_free(c);
                return r;
        }
        return 0;
}

/* ---- the socket ---- */

static int on_accept_pause_end(sd_event_source *src, uint64_t usec, void *userdata) {
        struct grpc_server *s = userdata;

        s->accept_paused = false;
        if (s->listen_source && s->n_conns < s->opts.max_connections)
                (void) sd_event_source_set_enabled(s->listen_source, SD_EVENT_ON);
        return 0;
}

/* Out of file descriptors or memory: the connection stays in the backlog (the socket stays
 * readable, so going on would spin) and accepting waits a moment. One warning per episode,
 * and at most one a minute. */
static void accept_pause(struct grpc_server *s, int error) {
        usec_t now = 0;

        (void) sd_event_source_set_enabled(s->listen_source, SD_EVENT_OFF);
        s->accept_paused = true;
        count_rejected(s, "accept-failed");
        (void) sd_event_now(s->event, CLOCK_MONOTONIC, &now);
        if (!s->accept_failing && (!s->accept_warned || now >= s->accept_warned + ACCEPT_WARN_INTERVAL_USEC)) {
                log_warning_errno(error, "gRPC %s: cannot accept connections for now, pausing: %m", s->name);
                s->accept_warned = now;
        }
        s->accept_failing = true;
        if (!s->accept_pause &&
            sd_event_add_time_relative(s->event, &s->accept_pause, CLOCK_MONOTONIC, ACCEPT_PAUSE_USEC, 0,
                                       on_accept_pause_end, s) < 0) {
                on_accept_pause_end(NULL, 0, s); /* no timer: better to spin than to stop for good */
                return;
        }
        (void) sd_event_source_set_time_relative(s->accept_pause, ACCEPT_PAUSE_USEC);
        (void) sd_event_source_set_enabled(s->accept_pause, SD_EVENT_ONESHOT);
}

static void accept_succeeded(struct grpc_server *s) {
        if (!s->accept_failing)
                return;
        s->accept_failing = false;
        log_info("gRPC %s: accepting connections again", s->name);
}

static int on_accept(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        struct grpc_server *s = userdata;

        for (unsigned i = 0; i < ACCEPTS_PER_WAKEUP; i++) {
                int cfd;

                if (s->n_conns >= s->opts.max_connections) {
                        /* Left in the backlog until a connection goes (conn_free). */
                        count_rejected(s, "connections");
                        (void) sd_event_source_set_enabled(src, SD_EVENT_OFF);
                        return 0;
                }
                cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (cfd < 0) {
                        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                                accept_pause(s, -errno);
                        else if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
                                log_debug_errno(-errno, "gRPC %s: accept failed: %m", s->name);
                        return 0;
                }
                accept_succeeded(s);
                (void) grpc_server_add_connection(s, cfd);
        }
        return 0;
}

static int accept_start(struct grpc_server *s, int fd) {
        int r;

        r = sd_event_add_io(s->event, &s->listen_source, fd, EPOLLIN, on_accept, s);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(s->listen_source, "grpc-accept");
        return 0;
}

static void on_probe_admit(int fd, void *userdata) {
        (void) grpc_server_add_connection(userdata, fd);
}

/* socket-watch.c found the path no longer ours, and bound a fresh socket there (fd >= 0): what
 * still waits in the old backlog is taken, then accepting moves to the new one. */
static void on_socket_replaced(int fd, void *userdata) {
        struct grpc_server *s = userdata;
        int r;

        (void) metric_inc(s->m_socket_replaced, s->name);
        if (fd < 0)
                return;
        if (s->listen_source && s->listen_fd >= 0)
                (void) on_accept(s->listen_source, s->listen_fd, EPOLLIN, s);
        s->listen_source = sd_event_source_disable_unref(s->listen_source);
        safe_close(s->listen_fd);
        s->listen_fd = fd;
        r = accept_start(s, fd);
        if (r < 0)
                log_error_errno(r, "gRPC %s: cannot accept on the new socket %s: %m", s->name, s->socket_path);
}

int grpc_server_listen(struct grpc_server *s, const char *path, mode_t mode) {
        char why[SOCKET_TRUST_WHY_MAX] = "";
        _cleanup_close_ int fd = -EBADF;
        int r;

        if (s->listen_fd >= 0)
                return -EALREADY;
        r = socket_trust_dir_prepare(path, why, sizeof(why));
        if (r < 0)
                return log_error_errno(r, "gRPC %s: not listening on %s: %s", s->name, path, why[0] ? why : strerror(-r));
        r = socket_watch_listen(path, mode, s->opts.socket_gid, &fd);
        if (r < 0)
                return log_error_errno(r, "gRPC %s: cannot listen on %s: %m", s->name, path);
        s->socket_path = strdup(path);
        if (!s->socket_path)
                return -ENOMEM;
        r = accept_start(s, fd);
        if (r < 0)
                return r;
        s->listen_fd = TAKE_FD(fd);
        if (asprintf(&s->watch_name, "gRPC %s", s->name) < 0)
                return -ENOMEM;
        r = socket_watch_new(s->event,
                             &(const struct socket_watch_options) {
                                     .name = s->watch_name,
                                     .path = path,
                                     .mode = mode,
                                     .gid = s->opts.socket_gid,
                                     .admit = on_probe_admit,
                                     .replaced = on_socket_replaced,
                                     .userdata = s,
                             },
                             s->listen_fd, &s->watch);
        if (r < 0)
                return r;
        log_info("gRPC %s: listening on %s", s->name, path);
        return 0;
}

static void options_default_budgets(struct grpc_server_options *o) {
        if (!o->body_timeout)
                o->body_timeout = DEFAULT_BODY_TIMEOUT;
        if (!o->idle_timeout)
                o->idle_timeout = DEFAULT_IDLE_TIMEOUT;
        if (!o->max_request_bytes_per_caller)
                o->max_request_bytes_per_caller = DEFAULT_CALLER_IN_MESSAGES * (o->max_recv_message + 5);
        if (!o->max_request_bytes)
                o->max_request_bytes = MIN(DEFAULT_SERVER_IN_CALLERS * o->max_request_bytes_per_caller,
                                           (size_t) DEFAULT_MAX_REQUEST_BYTES_CEILING);
        if (!o->max_unsent_per_caller)
                o->max_unsent_per_caller = DEFAULT_CALLER_UNSENT_STREAMS * o->max_unsent;
        if (!o->max_unsent_total)
                o->max_unsent_total = DEFAULT_SERVER_UNSENT_STREAMS * o->max_unsent;
        if (!o->calls_per_second_per_caller)
                o->calls_per_second_per_caller = DEFAULT_CALLS_PER_SECOND_PER_CALLER;
        if (!o->call_burst_per_caller)
                o->call_burst_per_caller = DEFAULT_CALL_BURST_PER_CALLER;
}

int grpc_server_new(sd_event *e, struct metrics *metrics, const struct grpc_server_options *o,
                    struct grpc_server **ret) {
        _cleanup_(grpc_server_freep) struct grpc_server *s = NULL;
        int r;

        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->listen_fd = -EBADF;
        s->event = sd_event_ref(e);
        s->opts = *o;
        s->name = strdup(o->name ?: "grpc");
        if (!s->name)
                return -ENOMEM;
        s->opts.name = s->name;
        if (!s->opts.max_connections)
                s->opts.max_connections = DEFAULT_MAX_CONNECTIONS;
        if (!s->opts.max_streams_per_connection)
                s->opts.max_streams_per_connection = DEFAULT_MAX_STREAMS_PER_CONNECTION;
        if (!s->opts.max_streams)
                s->opts.max_streams = DEFAULT_MAX_STREAMS;
        if (!s->opts.max_recv_message)
                s->opts.max_recv_message = DEFAULT_MAX_RECV_MESSAGE;
        if (!s->opts.max_unsent)
                s->opts.max_unsent = DEFAULT_MAX_UNSENT;
        if (!s->opts.header_timeout)
                s->opts.header_timeout = DEFAULT_HEADER_TIMEOUT;
        if (!s->opts.max_connections_per_caller)
                s->opts.max_connections_per_caller = DEFAULT_MAX_CONNECTIONS_PER_CALLER;
        if (!s->opts.max_streams_per_caller)
                s->opts.max_streams_per_caller = DEFAULT_MAX_STREAMS_PER_CALLER;
        options_default_budgets(&s->opts);
        r = grpc_budget_pace_init(s);
        if (r < 0)
                return r;
        r = register_metrics(s, metrics);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(s);
        return 0;
}

struct grpc_server *grpc_server_free(struct grpc_server *s) {
        if (!s)
                return NULL;
        while (s->conns) {
                grpc_call_free_all(s->conns, GRPC_STATUS_UNAVAILABLE);
                conn_free(s->conns);
        }
        s->listen_source = sd_event_source_disable_unref(s->listen_source);
        s->accept_pause = sd_event_source_disable_unref(s->accept_pause);
        grpc_budget_pace_done(s);
        while (s->counts)
                count_free(s, s->counts);
        /* Only our own file: what someone put in its place is not ours to remove. */
        if (s->listen_fd >= 0 && s->socket_path && socket_watch_is_ours(s->watch))
                (void) unlink(s->socket_path);
        s->watch = socket_watch_free(s->watch);
        safe_close(s->listen_fd);
        free(s->socket_path);
        free(s->watch_name);
        metrics_registration_free(s->metrics_reg);
        free(s->methods);
        free(s->method_userdata);
        sd_event_unref(s->event);
        free(s->name);
        free(s);
        return NULL;
}

int grpc_server_add_methods(struct grpc_server *s, const struct grpc_method *methods, size_t n, void *userdata) {
        const struct grpc_method **m;
        void **u;

        m = reallocarray(s->methods, s->n_methods + n, sizeof(*m));
        if (!m)
                return -ENOMEM;
        s->methods = m;
        u = reallocarray(s->method_userdata, s->n_methods + n, sizeof(*u));
        if (!u)
                return -ENOMEM;
        s->method_userdata = u;
        for (size_t i = 0; i < n; i++) {
                s->methods[s->n_methods] = &methods[i];
                s->method_userdata[s->n_methods++] = userdata;
        }
        return 0;
}

unsigned grpc_server_connections(const struct grpc_server *s) {
        return s->n_conns;
}

unsigned grpc_server_streams(const struct grpc_server *s) {
        return s->n_streams;
}
