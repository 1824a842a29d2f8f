/* SPDX-License-Identifier: MIT */
/* Connections of the local API: who connected (peer credentials, checked to belong to the
 * process that connected), whether they may (limits per pod, per uid, for all), and how long
 * they may take to send a request head.
 *
 * api-listen.c accepts; conn_admit() decides and hands the connection to MHD; MHD tells us
 * when it starts and ends (api_on_connection()), and the request code when a head is complete
 * and when a request is done (the header deadline). */
#include <errno.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "api-internal.h"
#include "fsutil.h"
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
/* A request head (request line and headers) must be complete this long after the connection
 * was accepted or its previous request finished; else the connection is closed. A slow
 * trickle of header bytes would otherwise hold a connection, and a caller's quota, for good. */
#define API_HEADER_TIMEOUT_USEC (10 * USEC_PER_SEC)

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

bool conn_privileged(const struct api *a, const struct api_conn *c) {
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

struct api_peer conn_peer(const struct api *a, const struct api_conn *c) {
        if (!c)
                return (struct api_peer) { .uid = (uid_t) -1, .gid = (gid_t) -1 };
        return peer_creds_to_api_peer(&c->creds, a->socket_gid);
}

/* The count a connection is in: its pod's, whatever its uid; the one shared count of every
 * peer that cannot be attested, whatever its uid; else its uid's, unless it is privileged where
 * it runs (root, socket-group in no pod: the place rule of caller.h). NULL with 0: no
 * per-caller count. */
static int conn_count_key(const struct api *a, const struct api_conn *c, char **ret) {
        struct api_peer peer = conn_peer(a, c);
        _cleanup_free_ char *pod = NULL;
        bool attested = peer.start_time != 0;

        *ret = NULL;
        if (a->anonymous)
                return 0;
        if (a->place_fn) {
                struct api_place place = {};

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

/* A count's cap, and the metric's reason label when it is reached. */
static unsigned conn_count_cap(const char *key, const char **ret_reason) {
        if (startswith(key, "pod:")) {
                *ret_reason = "pod";
                return API_MAX_CONNECTIONS_PER_POD;
        }
        if (streq(key, API_UNATTESTED_KEY)) {
                *ret_reason = "unattested";
                return API_MAX_UNATTESTED_CONNECTIONS;
        }
        *ret_reason = "uid";
        return API_MAX_CONNECTIONS_PER_UID;
}

/* NULL: admitted and counted. Else why not (the metric's reason label). */
static const char *conn_account(struct api *a, struct api_conn *c) {
        _cleanup_free_ char *key = NULL;
        const char *reason;

        if (conn_count_key(a, c, &key) < 0)
                return "memory";
        if (key) {
                if (a->n_limited >= API_MAX_LIMITED_CONNECTIONS)
                        return "limited";
                if (count_get(a, key) >= conn_count_cap(key, &reason))
                        return reason;
                if (count_inc(a, key) < 0)
                        return "memory";
                a->n_limited++;
                c->limited = true;
                c->count_key = TAKE_PTR(key);
        }
        a->n_conns++;
        c->counted = true;
        return NULL;
}

static void conn_unaccount(struct api *a, struct api_conn *c) {
        if (c->limited) {
                a->n_limited--;
                count_dec(a, c->count_key);
                c->limited = false;
        }
        if (c->counted) {
                a->n_conns--;
                c->counted = false;
        }
}

/* ---- the header deadline ---- */

static int on_head_deadline(sd_event_source *s, uint64_t usec, void *userdata) {
        struct api_conn *c = userdata;

        log_debug("Local API: closing a connection (pid %d, uid %u) that sent no complete request "
                  "head within %llus", (int) c->creds.pid, (unsigned) c->creds.uid,
                  (unsigned long long) (API_HEADER_TIMEOUT_USEC / USEC_PER_SEC));
        (void) metric_inc(c->api->header_timeouts);
        /* MHD sees the end of the stream and closes the connection. */
        (void) shutdown(c->fd, SHUT_RDWR);
        api_kick(c->api);
        return 0;
}

static void conn_arm_head_deadline(struct api_conn *c) {
        if (c->head_deadline) {
                (void) sd_event_source_set_time_relative(c->head_deadline, API_HEADER_TIMEOUT_USEC);
                (void) sd_event_source_set_enabled(c->head_deadline, SD_EVENT_ONESHOT);
                return;
        }
        /* Without a timer (out of memory) the idle timeout still ends the connection. */
        (void) sd_event_add_time_relative(c->api->event, &c->head_deadline, CLOCK_MONOTONIC,
                                          API_HEADER_TIMEOUT_USEC, USEC_PER_SEC / 10, on_head_deadline, c);
}

void conn_head_received(struct api_conn *c) {
        if (c && c->head_deadline)
                (void) sd_event_source_set_enabled(c->head_deadline, SD_EVENT_OFF);
}

void conn_request_done(struct api_conn *c) {
        if (c)
                conn_arm_head_deadline(c);
}

/* ---- a connection's life ---- */

static struct api_conn *conn_free(struct api_conn *c) {
        if (!c)
                return NULL;
        conn_unaccount(c->api, c);
        sd_event_source_disable_unref(c->head_deadline);
        free(c->count_key);
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

void conn_admit(struct api *a, int fd) {
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
        conn_arm_head_deadline(c);
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

void api_on_connection(void *cls, struct MHD_Connection *connection, void **socket_context,
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
                conn_seen_request(a, *socket_context);
                *socket_context = conn_free(*socket_context);
                api_check_idle(a);
                break;
        }
}

void conn_seen_request(struct api *a, struct api_conn *c) {
        if (!c || !c->fresh)
                return;
        c->fresh = false;
        a->n_fresh--;
}
