/* SPDX-License-Identifier: MIT */
/* Connections of the local API: who connected (peer credentials, checked to belong to the
 * process that connected), whether they may (limits per pod, per uid, per TCP source, for
 * all), and how long they may take to send a request line, its head and its body.
 *
 * api-listen.c accepts; api_conn_admit() decides and hands the connection to MHD; MHD tells us
 * when it starts and ends (api_conn_on_connection()), and the request code when a request line
 * comes, when a head and a body are complete and when a request is done (the deadlines). */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "api-internal.h"
#include "fd-limit.h"
#include "fs.h"
#include "log.h"
#include "peer-creds.h"

/* Connections at once. All callers together (api.c: API_MAX_CONNECTIONS, or an anonymous
 * API's own cap): what MHD and our fds can carry. Limited callers
 * (in a pod, or unprivileged outside pods) together: what they cannot take stays for the
 * host's root and socket-group (pinionctl, pinion-cni). One pod, whatever uids its processes
 * run as; one uid outside pods: so that one pod cannot starve another, nor one user another. */
#define API_MAX_LIMITED_CONNECTIONS 512U
#define API_MAX_CONNECTIONS_PER_POD 32U
#define API_MAX_CONNECTIONS_PER_UID 32U
/* Peers that cannot be attested (gone, a zombie, their PID reused) all together: one pod could
 * otherwise hold a count per throwaway uid of children that connect and exit. */
#define API_MAX_UNATTESTED_CONNECTIONS 8U
#define API_UNATTESTED_KEY "unattested"
/* Deadlines of a connection, each of which closes it: a trickle of bytes, or none, would
 * otherwise hold a connection, and its caller's quota, for good. A request line must come
 * this long after the connection was accepted or its previous request finished (idle), and
 * the whole head by the same time; the body this long after the head. Local callers send a
 * request at once, and at most 1 MiB of body: seconds are ample even for a loaded node. */
#define API_IDLE_TIMEOUT_USEC (10 * USEC_PER_SEC)
#define API_HEADER_TIMEOUT_USEC (10 * USEC_PER_SEC)
#define API_BODY_TIMEOUT_USEC (10 * USEC_PER_SEC)

static struct api_conn *conn_new(struct api *a, int fd) {
        struct api_conn *c;

        c = calloc(1, sizeof(*c));
        if (!c)
                return NULL;
        c->api = a;
        c->fd = fd;
        /* A TCP peer has no credentials: unknown, hence unprivileged. */
        if (a->anonymous)
                c->creds = (struct peer_creds) { .uid = (uid_t) -1, .gid = (gid_t) -1 };
        else
                peer_creds_read(fd, &c->creds);
        return c;
}

bool api_conn_privileged(const struct api *a, const struct api_conn *c) {
        return c && peer_creds_privileged(&c->creds, a->socket_gid);
}

/* ---- limits ---- */

static struct conn_count *count_find(struct api *a, const char *key) {
        for (size_t i = 0; i < a->n_counts; i++)
                if (streq(a->counts[i].key, key))
                        return &a->counts[i];
        return NULL;
}

static unsigned count_get(struct api *a, const char *key) {
        struct conn_count *k = count_find(a, key);

        return k ? k->n : 0;
}

static int count_inc(struct api *a, const char *key) {
        struct conn_count *k = count_find(a, key), *grown;

        if (k) {
                k->n++;
                return 0;
        }
        grown = realloc(a->counts, (a->n_counts + 1) * sizeof(*grown));
        if (!grown)
                return -ENOMEM;
        a->counts = grown;
        a->counts[a->n_counts] = (struct conn_count) { .key = strdup(key), .n = 1 };
        if (!a->counts[a->n_counts].key)
                return -ENOMEM;
        a->n_counts++;
        return 0;
}

static void count_dec(struct api *a, const char *key) {
        struct conn_count *k = count_find(a, key);

        if (!k || --k->n > 0)
                return;
        free(k->key);
        *k = a->counts[--a->n_counts];
}

struct peer api_conn_peer(const struct api *a, const struct api_conn *c) {
        if (!c)
                return (struct peer) { .uid = (uid_t) -1, .gid = (gid_t) -1 };
        return peer_creds_to_peer(&c->creds, a->socket_gid);
}

/* The count a connection is in: its pod's, whatever its uid; the one shared count of every
 * peer that cannot be attested, whatever its uid; else its uid's, unless it is privileged where
 * it runs (root, socket-group in no pod: the place rule of caller.h). NULL with 0: no
 * per-caller count. */
static int conn_count_key(const struct api *a, const struct api_conn *c, char **ret) {
        struct peer peer = api_conn_peer(a, c);
        _cleanup_free_ char *pod = NULL;
        bool attested = peer.start_time != 0;

        *ret = NULL;
        if (a->anonymous)
                return 0;
        if (a->place_fn) {
                struct peer_place place = {};

                a->place_fn(&peer, a->place_userdata, &place);
                peer.privileged = place.privileged;
                pod = place.pod_uid;
                attested = place.attested;
        }
        if (pod)
                return asprintf(ret, "pod:%s", pod) < 0 ? -ENOMEM : 0;
        if (!attested)
                return (*ret = strdup(API_UNATTESTED_KEY)) ? 0 : -ENOMEM;
        if (peer.privileged)
                return 0;
        return asprintf(ret, "uid:%u", (unsigned) c->creds.uid) < 0 ? -ENOMEM : 0;
}

/* Limited callers together get the same share of a cap sized down to the open-file limit
 * (fd-limit.h) as of the default one: the rest stays for the host's root and socket-group. */
static unsigned conn_limited_cap(const struct api *a) {
        return (unsigned) MIN((uint64_t) API_MAX_LIMITED_CONNECTIONS,
                              (uint64_t) a->max_connections * API_MAX_LIMITED_CONNECTIONS / CONNECTION_CAP_API);
}

/* A TCP peer's count: its address, or for IPv6 its /64 (what one host is typically given). */
static int conn_source_key(const struct api_conn *c, char **ret) {
        struct sockaddr_storage ss = {};
        socklen_t len = sizeof(ss);
        char text[INET6_ADDRSTRLEN];

        *ret = NULL;
        if (getpeername(c->fd, (struct sockaddr *) &ss, &len) < 0)
                return asprintf(ret, "addr:unknown") < 0 ? -ENOMEM : 0;
        if (ss.ss_family == AF_INET6) {
                struct in6_addr prefix = ((struct sockaddr_in6 *) &ss)->sin6_addr;

                memset(prefix.s6_addr + 8, 0, 8);
                if (!inet_ntop(AF_INET6, &prefix, text, sizeof(text)))
                        return -errno;
                return asprintf(ret, "addr:%s/64", text) < 0 ? -ENOMEM : 0;
        }
        if (ss.ss_family != AF_INET || !inet_ntop(AF_INET, &((struct sockaddr_in *) &ss)->sin_addr, text, sizeof(text)))
                return asprintf(ret, "addr:unknown") < 0 ? -ENOMEM : 0;
        return asprintf(ret, "addr:%s", text) < 0 ? -ENOMEM : 0;
}

/* The cap of a count key's connections, and the reason label when it is reached. */
static unsigned key_cap(const struct api *a, const char *key, const char **ret_reason) {
        if (startswith(key, "addr:")) {
                *ret_reason = "source";
                return a->max_connections_per_source > 0 ? a->max_connections_per_source : UINT_MAX;
        }
        if (streq(key, API_UNATTESTED_KEY)) {
                *ret_reason = "unattested";
                return API_MAX_UNATTESTED_CONNECTIONS;
        }
        *ret_reason = startswith(key, "pod:") ? "pod" : "uid";
        return startswith(key, "pod:") ? API_MAX_CONNECTIONS_PER_POD : API_MAX_CONNECTIONS_PER_UID;
}

/* Whose budgets the connection's requests use: its count, or a privileged caller's uid. */
static int conn_set_caller_key(struct api_conn *c) {
        if (c->count_key) {
                c->caller_key = strdup(c->count_key);
                c->paced = true;
        } else if (asprintf(&c->caller_key, "host-uid:%u", (unsigned) c->creds.uid) < 0)
                c->caller_key = NULL;
        return c->caller_key ? 0 : -ENOMEM;
}

/* NULL: admitted and counted. Else why not (the metric's reason label). */
static const char *conn_account(struct api *a, struct api_conn *c) {
        _cleanup_free_ char *key = NULL;
        const char *reason;
        bool limited;

        if ((a->anonymous ? conn_source_key(c, &key) : conn_count_key(a, c, &key)) < 0)
                return "memory";
        if (key) {
                /* Limited callers of the socket (a TCP peer is counted by its source alone). */
                limited = !a->anonymous;
                if (limited && a->n_limited >= conn_limited_cap(a))
                        return "limited";
                if (count_get(a, key) >= key_cap(a, key, &reason))
                        return reason;
                if (count_inc(a, key) < 0)
                        return "memory";
                if (limited)
                        a->n_limited++;
                c->limited = limited;
                c->count_key = TAKE_PTR(key);
        }
        if (conn_set_caller_key(c) < 0) {
                if (c->count_key)
                        count_dec(a, c->count_key);
                if (c->limited)
                        a->n_limited--;
                c->count_key = mfree(c->count_key);
                c->limited = false;
                return "memory";
        }
        a->n_conns++;
        c->counted = true;
        return NULL;
}

static void conn_unaccount(struct api *a, struct api_conn *c) {
        if (!c->counted)
                return;
        if (c->limited)
                a->n_limited--;
        if (c->count_key)
                count_dec(a, c->count_key);
        c->limited = false;
        a->n_conns--;
        c->counted = false;
}

/* ---- deadlines ---- */

static const char *phase_name(enum conn_phase p) {
        switch (p) {
        case CONN_IDLE:
                return "idle";
        case CONN_HEAD:
                return "head";
        case CONN_BODY:
                return "body";
        case CONN_BUSY:
                break;
        }
        return "busy";
}

/* The request of c whose body is being read, if any. */
static struct api_request *conn_receiving(struct api_conn *c) {
        for (struct api_request *r = c->api->requests; r; r = r->next)
                if (r->conn == c && r->state == REQUEST_RECEIVING)
                        return r;
        return NULL;
}

static int on_deadline(sd_event_source *s, uint64_t usec, void *userdata) {
        struct api_conn *c = userdata;
        struct api_request *r;

        log_debug("Local API: closing a connection of %s (pid %d) past its %s deadline",
                  c->caller_key ? c->caller_key : "an unknown caller", (int) c->creds.pid, phase_name(c->phase));
        (void) metric_inc(c->api->connections_closed, phase_name(c->phase));
        switch (c->phase) {
        case CONN_HEAD:
                (void) metric_inc(c->api->header_timeouts);
                break;
        case CONN_BODY:
                /* Counted with its route as a 408; the client is told why before the close. */
                r = conn_receiving(c);
                if (r)
                        r->status = 408;
                api_conn_send_final(c, 408, "request body not complete in time");
                api_kick(c->api);
                return 0;
        case CONN_IDLE:
        case CONN_BUSY:
                break;
        }
        /* MHD sees the end of the stream and closes the connection. */
        (void) shutdown(c->fd, SHUT_RDWR);
        api_kick(c->api);
        return 0;
}

/* Enters phase p, whose deadline is at (CLOCK_MONOTONIC; USEC_INFINITY: none). */
static void conn_set_phase(struct api_conn *c, enum conn_phase p, usec_t at) {
        c->phase = p;
        if (at == USEC_INFINITY) {
                if (c->deadline)
                        (void) sd_event_source_set_enabled(c->deadline, SD_EVENT_OFF);
                return;
        }
        if (c->deadline) {
                (void) sd_event_source_set_time(c->deadline, at);
                (void) sd_event_source_set_enabled(c->deadline, SD_EVENT_ONESHOT);
                return;
        }
        /* Without a timer (out of memory) MHD's idle timeout still ends the connection. */
        (void) sd_event_add_time(c->api->event, &c->deadline, CLOCK_MONOTONIC, at, USEC_PER_SEC / 10, on_deadline, c);
}

static void conn_wait_request(struct api_conn *c) {
        c->idle_since = now_usec(CLOCK_MONOTONIC);
        conn_set_phase(c, CONN_IDLE, c->idle_since + API_IDLE_TIMEOUT_USEC);
}

void api_conn_request_started(struct api_conn *c) {
        /* The head's deadline counts from the same start as the idle one: a request line
         * sent just in time does not buy a fresh 10 s for the headers. */
        if (c && c->phase == CONN_IDLE)
                conn_set_phase(c, CONN_HEAD, c->idle_since + API_HEADER_TIMEOUT_USEC);
}

void api_conn_head_received(struct api_conn *c) {
        if (c)
                conn_set_phase(c, CONN_BODY, now_usec(CLOCK_MONOTONIC) + API_BODY_TIMEOUT_USEC);
}

void api_conn_body_received(struct api_conn *c) {
        if (c && c->phase == CONN_BODY)
                conn_set_phase(c, CONN_BUSY, USEC_INFINITY);
}

void api_conn_request_done(struct api_conn *c) {
        if (c)
                conn_wait_request(c);
}

void api_conn_send_final(struct api_conn *c, unsigned status, const char *message) {
        char text[512];
        int body_len, n;

        if (!c || c->fd < 0)
                return;
        body_len = (int) strlen(message) + (int) sizeof("{\"error\":\"\",\"code\":000}\n") - 1;
        n = snprintf(text, sizeof(text),
                     "HTTP/1.1 %u %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                     "Connection: close\r\n\r\n{\"error\":\"%s\",\"code\":%03u}\n",
                     status, status == 408 ? "Request Timeout" : status == 413 ? "Content Too Large" : "Service Unavailable",
                     body_len, message, status);
        /* Best effort: a reader that does not take it gets the close alone. */
        if (n > 0 && (size_t) n < sizeof(text))
                (void) send(c->fd, text, (size_t) n, MSG_DONTWAIT | MSG_NOSIGNAL);
        (void) shutdown(c->fd, SHUT_RDWR);
}

/* ---- a connection's life ---- */

static struct api_conn *conn_free(struct api_conn *c) {
        if (!c)
                return NULL;
        conn_unaccount(c->api, c);
        sd_event_source_disable_unref(c->deadline);
        free(c->count_key);
        free(c->caller_key);
        peer_creds_done(&c->creds);
        free(c);
        return NULL;
}

static void pending_remove(struct api *a, struct api_conn *c) {
        for (struct api_conn **p = &a->pending; *p; p = &(*p)->next_pending)
                if (*p == c) {
                        *p = c->next_pending;
                        c->next_pending = NULL;
                        return;
                }
}

static struct api_conn *pending_take(struct api *a, int fd) {
        for (struct api_conn *c = a->pending; c; c = c->next_pending)
                if (c->fd == fd) {
                        pending_remove(a, c);
                        return c;
                }
        return NULL;
}

static void conn_reject(struct api *a, int fd, const char *reason) {
        (void) metric_inc(a->connections_rejected, reason);
        log_debug("Local API: connection refused (%s limit)", reason);
        safe_close(fd);
}

void api_conn_admit(struct api *a, int fd) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        struct api_conn *c;
        const char *reason;

        if (a->n_conns >= a->max_connections) { /* before any /proc reading for it */
                conn_reject(a, fd, "total");
                return;
        }
        c = conn_new(a, fd);
        if (!c) {
                conn_reject(a, fd, "memory");
                return;
        }
        reason = conn_account(a, c);
        if (reason) {
                conn_free(c);
                conn_reject(a, fd, reason);
                return;
        }
        conn_wait_request(c);
        c->next_pending = a->pending;
        a->pending = c;
        /* MHD closes fd if it cannot take it. */
        if (MHD_add_connection(a->mhd, fd, (const struct sockaddr *) &sa, sizeof(sa)) != MHD_YES) {
                (void) metric_inc(a->connections_rejected, "server");
                if (pending_take(a, fd) == c)
                        conn_free(c);
        }
        api_kick(a);
}

void api_conn_on_connection(void *cls, struct MHD_Connection *connection, void **socket_context,
                       enum MHD_ConnectionNotificationCode toe) {
        struct api *a = cls;
        const union MHD_ConnectionInfo *info;
        struct api_conn *c;

        switch (toe) {
        case MHD_CONNECTION_NOTIFY_STARTED:
                info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
                /* NULL (not ours, out of memory) leaves the peer unknown, hence unprivileged. */
                c = info ? pending_take(a, info->connect_fd) : NULL;
                if (c) {
                        c->fresh = true;
                        a->n_fresh++;
                }
                *socket_context = c;
                break;
        case MHD_CONNECTION_NOTIFY_CLOSED:
                api_conn_seen_request(a, *socket_context);
                *socket_context = conn_free(*socket_context);
                api_check_idle(a);
                break;
        }
}

void api_conn_seen_request(struct api *a, struct api_conn *c) {
        if (!c || !c->fresh)
                return;
        c->fresh = false;
        a->n_fresh--;
}
