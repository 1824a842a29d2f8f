/* SPDX-License-Identifier: MIT */
/* The local API server: the socket, libmicrohttpd in external-epoll mode on our sd-event loop,
 * connections and their peer credentials, and the API object with its route table. What
 * happens to a request once MHD has one is in api-request.c, api-route.c and api-reply.c.
 *
 * How MHD is driven: MHD's own epoll fd is an sd-event IO source and one sd-event timer is
 * re-armed from MHD_get_timeout() after every MHD_run(). MHD_run() is only ever called from
 * those two callbacks; everything else that needs MHD to look again (a resumed connection)
 * "kicks" the timer to fire at once, because MHD_run() must not be re-entered from inside
 * one of its own callbacks. */
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "api-internal.h"
#include "peer-pod.h"

#ifndef SO_PEERGROUPS
#define SO_PEERGROUPS 59
#endif

#define API_MAX_BODY_DEFAULT ((size_t) 1024 * 1024)
/* Idle keep-alive connections (and clients that stop reading) are dropped after this.
 * Suspended connections (long-polls, idle streams) do not time out in MHD. */
#define API_CONNECTION_TIMEOUT_SEC 60U
/* Connections at once: all peers; unprivileged peers together; one unprivileged uid. What
 * unprivileged peers cannot take stays for root and socket-group (pinionctl, pinion-cni). */
#define API_MAX_CONNECTIONS 1000U
#define API_MAX_UNPRIVILEGED_CONNECTIONS 512U
#define API_MAX_CONNECTIONS_PER_UID 32U

/* ---- the socket ---- */

static int sockaddr_un_set(struct sockaddr_un *sa, const char *path) {
        if (isempty(path))
                return -EINVAL;
        if (strlen(path) >= sizeof(sa->sun_path))
                return -ENAMETOOLONG;
        *sa = (struct sockaddr_un) { .sun_family = AF_UNIX };
        strcpy(sa->sun_path, path);
        return 0;
}

/* A socket file left by a previous run is removed; one that still accepts connections
 * belongs to a running agent and is not stolen; anything else is not ours to delete. */
static int socket_remove_stale(const char *path, const struct sockaddr_un *sa) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;

        if (lstat(path, &st) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (!S_ISSOCK(st.st_mode))
                return -EEXIST;
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        if (connect(fd, (const struct sockaddr *) sa, sizeof(*sa)) == 0 || errno == EAGAIN)
                return -EADDRINUSE;
        if (unlink(path) < 0 && errno != ENOENT)
                return -errno;
        return 0;
}

static int socket_apply_access(const char *path, mode_t mode, gid_t gid) {
        struct stat st;

        /* Only ever a socket: the path of an inherited one was not made by us. */
        if (lstat(path, &st) < 0)
                return -errno;
        if (!S_ISSOCK(st.st_mode))
                return -ENOTSOCK;
        if (chmod(path, mode) < 0)
                return -errno;
        if (gid != (gid_t) -1 && chown(path, (uid_t) -1, gid) < 0)
                return -errno;
        return 0;
}

static int socket_listen(const char *path, mode_t mode, gid_t gid, int *ret_fd) {
        _cleanup_close_ int fd = -EBADF;
        struct sockaddr_un sa;
        int r;

        r = sockaddr_un_set(&sa, path);
        if (r < 0)
                return r;
        r = socket_remove_stale(path, &sa);
        if (r < 0)
                return r;
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        /* bind() creates the file with the socket inode's mode minus the umask, so restricting
         * it first means the socket is never more open than asked, not even for an instant;
         * chmod() afterwards puts back what the umask took away. */
        if (fchmod(fd, mode) < 0)
                return -errno;
        if (bind(fd, (const struct sockaddr *) &sa, sizeof(sa)) < 0)
                return -errno;
        r = socket_apply_access(path, mode, gid);
        if (r >= 0 && listen(fd, SOMAXCONN) < 0)
                r = -errno;
        if (r < 0) {
                (void) unlink(path);
                return r;
        }
        *ret_fd = TAKE_FD(fd);
        return 0;
}

/* ---- connections and their peer credentials ---- */

static int peer_groups_from_proc(pid_t pid, gid_t **ret, size_t *ret_n) {
        _cleanup_free_ char *line = NULL;
        _cleanup_free_ gid_t *groups = NULL;
        size_t n = 0, cap = 0;
        char path[64];
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%d/status", (int) pid);
        f = fopen(path, "re");
        if (!f)
                return -errno;
        for (size_t len = 0; getline(&line, &len, f) >= 0;) {
                char *p, *end;

                if (strncmp(line, "Groups:", 7) != 0)
                        continue;
                for (p = line + 7;; p = end) {
                        unsigned long v = strtoul(p, &end, 10);
                        gid_t *grown;

                        if (end == p)
                                break;
                        if (n == cap) {
                                cap = cap ? cap * 2 : 16;
                                grown = realloc(groups, cap * sizeof(gid_t));
                                if (!grown) {
                                        fclose(f);
                                        return -ENOMEM;
                                }
                                groups = grown;
                        }
                        groups[n++] = (gid_t) v;
                }
                break;
        }
        fclose(f);
        *ret = TAKE_PTR(groups);
        *ret_n = n;
        return 0;
}

/* SO_PEERGROUPS gives the groups the client had when it connected, so a PID that exits and
 * is reused cannot lend its groups to the connection; /proc is the fallback for kernels
 * older than 4.13. */
static int peer_groups(int fd, pid_t pid, gid_t **ret, size_t *ret_n) {
        _cleanup_free_ gid_t *groups = NULL;
        socklen_t len = 0;

        for (;;) {
                gid_t *grown;

                if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) >= 0)
                        break;
                if (errno == ENOPROTOOPT)
                        return peer_groups_from_proc(pid, ret, ret_n);
                if (errno != ERANGE)
                        return -errno;
                grown = realloc(groups, len);
                if (!grown)
                        return -ENOMEM;
                groups = grown;
        }
        *ret = TAKE_PTR(groups);
        *ret_n = len / sizeof(gid_t);
        return 0;
}

static struct api_conn *conn_new(int fd) {
        struct api_conn *c;
        struct ucred cred;
        socklen_t len = sizeof(cred);

        c = calloc(1, sizeof(*c));
        if (!c)
                return NULL;
        c->fd = fd;
        c->uid = (uid_t) -1;
        c->gid = (gid_t) -1;
        if (fd < 0 || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
                return c; /* unknown peer: unprivileged */
        c->pid = cred.pid;
        c->uid = cred.uid;
        c->gid = cred.gid;
        /* Read now, as close to connect() as we can: a later lookup compares against it. */
        if (proc_start_time(NULL, cred.pid, &c->start_time) < 0)
                c->start_time = 0;
        /* Without the groups, a socket-group member is treated as unprivileged. */
        (void) peer_groups(fd, cred.pid, &c->groups, &c->n_groups);
        c->have_creds = true;
        return c;
}

static struct api_conn *conn_free(struct api_conn *c) {
        if (!c)
                return NULL;
        free(c->groups);
        free(c);
        return NULL;
}

bool conn_privileged(const struct api *a, const struct api_conn *c) {
        if (!c || !c->have_creds)
                return false;
        if (c->uid == 0)
                return true;
        if (a->socket_gid == (gid_t) -1)
                return false;
        if (c->gid == a->socket_gid)
                return true;
        for (size_t i = 0; i < c->n_groups; i++)
                if (c->groups[i] == a->socket_gid)
                        return true;
        return false;
}

/* Adds delta to uid's count of connections and returns the new count. */
static unsigned uid_count_add(struct api *a, uid_t uid, int delta) {
        for (size_t i = 0; i < a->n_uid_counts; i++)
                if (a->uid_counts[i].uid == uid) {
                        a->uid_counts[i].n += (unsigned) delta;
                        unsigned n = a->uid_counts[i].n;
                        if (n == 0)
                                a->uid_counts[i] = a->uid_counts[--a->n_uid_counts];
                        return n;
                }
        if (delta <= 0)
                return 0;
        struct uid_count *grown = realloc(a->uid_counts, (a->n_uid_counts + 1) * sizeof(*grown));
        if (!grown)
                return UINT_MAX; /* out of memory: count it as over the quota */
        a->uid_counts = grown;
        a->uid_counts[a->n_uid_counts++] = (struct uid_count) { .uid = uid, .n = (unsigned) delta };
        return (unsigned) delta;
}

static void conn_account(struct api *a, struct api_conn *c) {
        if (conn_privileged(a, c))
                return;
        c->counted = true;
        a->n_unprivileged++;
        unsigned mine = uid_count_add(a, c->uid, +1);
        if (mine > API_MAX_CONNECTIONS_PER_UID || a->n_unprivileged > API_MAX_UNPRIVILEGED_CONNECTIONS)
                /* MHD sees the end of the stream and closes the connection at once. */
                (void) shutdown(c->fd, SHUT_RDWR);
}

static void conn_unaccount(struct api *a, struct api_conn *c) {
        if (!c || !c->counted)
                return;
        a->n_unprivileged--;
        (void) uid_count_add(a, c->uid, -1);
}

void conn_seen_request(struct api *a, struct api_conn *c) {
        if (!c || !c->fresh)
                return;
        c->fresh = false;
        a->n_fresh--;
}

static void on_connection(void *cls, struct MHD_Connection *connection, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe) {
        struct api *a = cls;
        const union MHD_ConnectionInfo *info;
        struct api_conn *c;

        switch (toe) {
        case MHD_CONNECTION_NOTIFY_STARTED:
                info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
                /* NULL (out of memory) leaves the peer unknown, hence unprivileged. */
                c = conn_new(info ? info->connect_fd : -EBADF);
                if (c) {
                        conn_account(a, c);
                        c->fresh = true;
                        a->n_fresh++;
                }
                *socket_context = c;
                break;
        case MHD_CONNECTION_NOTIFY_CLOSED:
                conn_seen_request(a, *socket_context);
                conn_unaccount(a, *socket_context);
                *socket_context = conn_free(*socket_context);
                api_check_idle(a);
                break;
        }
}

/* ---- driving MHD from sd-event ---- */

static void api_arm_timer(struct api *a) {
        MHD_UNSIGNED_LONG_LONG ms = 0;
        usec_t usec;

        if (!a->timer_source)
                return;
        if (a->kicked)
                usec = 0;
        else if (MHD_get_timeout(a->mhd, &ms) == MHD_YES)
                usec = ms >= (USEC_INFINITY - 1) / USEC_PER_MSEC ? USEC_INFINITY - 1 : ms * USEC_PER_MSEC;
        else {
                (void) sd_event_source_set_enabled(a->timer_source, SD_EVENT_OFF);
                return;
        }
        a->kicked = false;
        (void) sd_event_source_set_time_relative(a->timer_source, usec);
        (void) sd_event_source_set_enabled(a->timer_source, SD_EVENT_ONESHOT);
}

static void api_run(struct api *a) {
        a->running = true;
        (void) MHD_run(a->mhd);
        a->running = false;
        api_arm_timer(a);
}

/* Makes MHD run again soon: after a resume, MHD has work that its epoll fd may not show. */
void api_kick(struct api *a) {
        a->kicked = true;
        if (!a->running)
                api_arm_timer(a);
}

/* Both return 0: a negative return would make sd-event disable the source for good. */
static int on_mhd_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        api_run(userdata);
        return 0;
}

static int on_mhd_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        api_run(userdata);
        return 0;
}

/* ---- draining ---- */

unsigned api_busy(const struct api *a) {
        unsigned n = a->n_fresh;

        for (const struct api_request *r = a->requests; r; r = r->next)
                switch (r->state) {
                case REQUEST_NEW:
                case REQUEST_RECEIVING:
                case REQUEST_DISPATCHED:
                case REQUEST_REPLIED:
                case REQUEST_SENDING:
                        if (!r->streaming)
                                n++;
                        break;
                case REQUEST_WAITING:
                case REQUEST_FAILED:
                        break;
                }
        return n;
}

void api_check_idle(struct api *a) {
        if (!a->draining || !a->idle_fn || api_busy(a) > 0)
                return;
        api_idle_fn fn = a->idle_fn;
        a->idle_fn = NULL;
        fn(a->idle_userdata);
}

int api_quiesce(struct api *a, api_idle_fn idle, void *userdata) {
        if (!a || !a->mhd)
                return 0;
        if (!a->draining) {
                /* MHD hands back its listening socket (our duplicate of listen_fd) and takes it
                 * out of its epoll set: what connects now waits in the kernel's backlog. */
                MHD_socket fd = MHD_quiesce_daemon(a->mhd);
                if (fd != MHD_INVALID_SOCKET)
                        safe_close(fd);
                a->draining = true;
        }
        if (api_busy(a) == 0)
                return 0;
        a->idle_fn = idle;
        a->idle_userdata = userdata;
        return 1;
}

/* ---- the API object ---- */

struct route_entry *route_entry_ref(struct route_entry *e) {
        if (e)
                e->n_ref++;
        return e;
}

struct route_entry *route_entry_unref(struct route_entry *e) {
        if (!e || --e->n_ref > 0)
                return NULL;
        free(e->method);
        free(e->pattern);
        free(e);
        return NULL;
}

static int api_metrics_register(struct api *a, struct metrics *m) {
        static const char *const requests_labels[] = { "route", "code", NULL };
        static const char *const duration_labels[] = { "route", NULL };
        int r;

        r = metrics_family(m, METRIC_COUNTER, "pinion_api_requests_total",
                           "Local API requests, by matched route and HTTP status.", requests_labels,
                           NULL, 0, &a->requests_total);
        if (r < 0)
                return r;
        return metrics_family(m, METRIC_HISTOGRAM, "pinion_api_request_duration_seconds",
                              "Local API request duration, from request line to last byte.",
                              duration_labels, NULL, 0, &a->request_duration);
}

/* Takes *fd: MHD closes the listening socket it was given when it stops. */
static int api_start_mhd(struct api *a, int *fd) {
        const union MHD_DaemonInfo *info;
        int r;

        /* External epoll (no thread) and suspend/resume for long-polls and streams. No
         * MHD_USE_ERROR_LOG: library code does not write to stderr. */
        a->mhd = MHD_start_daemon(MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME, 0, NULL, NULL, api_on_access, a,
                                  MHD_OPTION_LISTEN_SOCKET, *fd,
                                  MHD_OPTION_URI_LOG_CALLBACK, api_on_uri, a,
                                  MHD_OPTION_NOTIFY_COMPLETED, api_on_completed, a,
                                  MHD_OPTION_NOTIFY_CONNECTION, on_connection, a,
                                  MHD_OPTION_CONNECTION_TIMEOUT, API_CONNECTION_TIMEOUT_SEC,
                                  MHD_OPTION_CONNECTION_LIMIT, (unsigned) API_MAX_CONNECTIONS,
                                  MHD_OPTION_END);
        if (!a->mhd) {
                /* Whether a failed start closed the socket differs between MHD versions; a
                 * double close would make MHD_stop_daemon() elsewhere panic on EBADF. */
                if (fcntl(*fd, F_GETFD) < 0)
                        *fd = -EBADF;
                return -EIO;
        }
        *fd = -EBADF;

        info = MHD_get_daemon_info(a->mhd, MHD_DAEMON_INFO_EPOLL_FD);
        if (!info || info->epoll_fd < 0)
                return -EIO;
        r = sd_event_add_io(a->event, &a->io_source, info->epoll_fd, EPOLLIN, on_mhd_io, a);
        if (r < 0)
                return r;
        /* Accuracy 1us, not sd-event's default 250ms: MHD asks for "0" between the steps of
         * a resumed connection, and each step would otherwise wait for the next 250ms slot. */
        r = sd_event_add_time_relative(a->event, &a->timer_source, CLOCK_MONOTONIC, 0, 1, on_mhd_timer, a);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(a->io_source, "api-mhd-io");
        (void) sd_event_source_set_description(a->timer_source, "api-mhd-timer");
        api_arm_timer(a);
        return 0;
}

static int fd_nonblock(int fd) {
        int flags = fcntl(fd, F_GETFL);

        if (flags < 0)
                return -errno;
        if (!(flags & O_NONBLOCK) && fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
                return -errno;
        return 0;
}

/* The path of an inherited socket, for api_socket_path(). */
static char *socket_fd_path(int fd) {
        struct sockaddr_un sa = {};
        socklen_t len = sizeof(sa);

        if (getsockname(fd, (struct sockaddr *) &sa, &len) < 0 || sa.sun_family != AF_UNIX ||
            len <= offsetof(struct sockaddr_un, sun_path) || sa.sun_path[0] == 0)
                return NULL;
        return strndup(sa.sun_path, len - offsetof(struct sockaddr_un, sun_path));
}

int api_new(sd_event *e, const struct api_options *opts, struct metrics *metrics, struct api **ret) {
        _cleanup_(api_freep) struct api *a = NULL;
        _cleanup_close_ int mhd_fd = -EBADF;
        int r;

        if (!e || !opts || !ret || (opts->listen_fd < 0 && isempty(opts->socket_path)))
                return -EINVAL;

        a = calloc(1, sizeof(*a));
        if (!a)
                return -ENOMEM;
        a->event = sd_event_ref(e);
        a->listen_fd = -EBADF;
        a->socket_mode = opts->socket_mode;
        a->socket_gid = opts->socket_gid;
        a->max_body = opts->max_body > 0 ? opts->max_body : API_MAX_BODY_DEFAULT;

        if (metrics) {
                r = api_metrics_register(a, metrics);
                if (r < 0)
                        return r;
        }

        if (opts->listen_fd >= 0) {
                r = fd_nonblock(opts->listen_fd);
                if (r < 0)
                        return r;
                a->socket_path = opts->socket_path ? strdup(opts->socket_path) : socket_fd_path(opts->listen_fd);
                if (opts->socket_path && !a->socket_path)
                        return -ENOMEM;
                /* systemd made the file with piniond.socket's SocketMode=/SocketGroup=; socket-mode
                 * and socket-group are what an operator sets (to let pods in, say), so they apply
                 * to an inherited socket as to our own. The file is found from the socket itself,
                 * not from the configured path, which may name another. */
                a->access_path = socket_fd_path(opts->listen_fd);
                if (a->access_path) {
                        r = socket_apply_access(a->access_path, a->socket_mode, a->socket_gid);
                        if (r < 0)
                                return r;
                }
                /* MHD closes the fd it is given when it stops; it gets its own copy, so the
                 * caller's fd is only ours once api_new() succeeds. */
                mhd_fd = fcntl(opts->listen_fd, F_DUPFD_CLOEXEC, 3);
                if (mhd_fd < 0)
                        return -errno;
        } else {
                a->socket_path = strdup(opts->socket_path);
                if (!a->socket_path)
                        return -ENOMEM;
                r = socket_listen(a->socket_path, a->socket_mode, a->socket_gid, &a->listen_fd);
                if (r < 0)
                        return r;
                a->unlink_on_free = true;
                a->access_path = strdup(a->socket_path);
                if (!a->access_path)
                        return -ENOMEM;
                mhd_fd = fcntl(a->listen_fd, F_DUPFD_CLOEXEC, 3);
                if (mhd_fd < 0)
                        return -errno;
        }

        r = api_start_mhd(a, &mhd_fd);
        if (r < 0)
                return r;
        if (opts->listen_fd >= 0)
                a->listen_fd = opts->listen_fd;
        *ret = TAKE_PTR(a);
        return 0;
}

struct api *api_free(struct api *a) {
        if (!a)
                return NULL;
        a->idle_fn = NULL; /* the connections MHD closes now are no news to a draining owner */
        if (a->mhd) {
                /* Stopping MHD with a suspended connection is an API violation (it aborts):
                 * resume them all. MHD then closes every connection and NOTIFY_COMPLETED runs
                 * on_abort for the requests someone still holds. */
                a->running = true; /* no more timer arming */
                for (struct api_request *r = a->requests; r; r = r->next)
                        request_resume(r);
                MHD_stop_daemon(a->mhd);
        }
        sd_event_source_disable_unref(a->io_source);
        sd_event_source_disable_unref(a->timer_source);
        safe_close(a->listen_fd);
        if (a->unlink_on_free && a->socket_path)
                (void) unlink(a->socket_path);
        for (size_t i = 0; i < a->n_routes; i++) {
                /* Its set's holder frees the set later, with no API to remove it from. */
                if (a->routes[i]->owner)
                        a->routes[i]->owner->api = NULL;
                route_entry_unref(a->routes[i]);
        }
        free(a->routes);
        free(a->uid_counts);
        free(a->socket_path);
        free(a->access_path);
        sd_event_unref(a->event);
        free(a);
        return NULL;
}

static struct route_entry *route_entry_new(const struct api_route *route, void *userdata,
                                           struct api_routes *owner) {
        struct route_entry *e;

        e = calloc(1, sizeof(*e));
        if (!e)
                return NULL;
        e->n_ref = 1; /* the table's */
        e->owner = owner;
        e->method = strdup(route->method);
        e->pattern = strdup(route->pattern);
        e->handler = route->handler;
        e->privileged = route->privileged;
        e->userdata = userdata;
        if (!e->method || !e->pattern)
                return route_entry_unref(e);
        return e;
}

static int route_check(const struct api_route *route) {
        if (!route->handler || isempty(route->method) || !route->pattern || route->pattern[0] != '/')
                return -EINVAL;
        if (pattern_captures(route->pattern) > API_PARAMS_MAX)
                return -EINVAL;
        return 0;
}

int api_add_routes(struct api *a, const struct api_route *routes, size_t n, void *userdata,
                   struct api_routes **ret) {
        _cleanup_free_ struct api_routes *set = NULL;
        struct route_entry **grown;
        size_t added;
        int r;

        if (!a || (!routes && n > 0))
                return -EINVAL;
        for (size_t i = 0; i < n; i++) {
                r = route_check(&routes[i]);
                if (r < 0)
                        return r;
        }
        if (ret) {
                set = calloc(1, sizeof(*set));
                if (!set)
                        return -ENOMEM;
                set->api = n > 0 ? a : NULL; /* an empty set has nothing to remove */
        }
        grown = realloc(a->routes, (a->n_routes + n + 1) * sizeof(*grown)); /* + 1: never realloc(0) */
        if (!grown)
                return -ENOMEM;
        a->routes = grown;
        for (added = 0; added < n; added++) {
                a->routes[a->n_routes + added] = route_entry_new(&routes[added], userdata, set);
                if (!a->routes[a->n_routes + added])
                        break;
        }
        if (added < n) {
                /* All or nothing. */
                for (size_t i = 0; i < added; i++)
                        route_entry_unref(a->routes[a->n_routes + i]);
                return -ENOMEM;
        }
        a->n_routes += n;
        if (ret)
                *ret = TAKE_PTR(set);
        return 0;
}

struct api_routes *api_routes_free(struct api_routes *set) {
        struct api *a;
        size_t kept = 0;

        if (!set)
                return NULL;
        a = set->api;
        if (a) {
                for (size_t i = 0; i < a->n_routes; i++) {
                        struct route_entry *e = a->routes[i];
                        if (e->owner == set) {
                                e->removed = true;
                                e->owner = NULL;
                                route_entry_unref(e);
                        } else
                                a->routes[kept++] = e;
                }
                a->n_routes = kept;
        }
        free(set);
        return NULL;
}

size_t api_route_count(const struct api *a) {
        return a ? a->n_routes : 0;
}

void api_set_privilege_check(struct api *a, api_privilege_fn fn, void *userdata) {
        if (!a)
                return;
        a->privilege_fn = fn;
        a->privilege_userdata = userdata;
}

int api_set_access(struct api *a, mode_t socket_mode, gid_t socket_gid) {
        int r;

        if (!a)
                return -EINVAL;
        if (a->access_path) {
                r = socket_apply_access(a->access_path, socket_mode, socket_gid);
                if (r < 0)
                        return r;
        }
        a->socket_mode = socket_mode;
        a->socket_gid = socket_gid;
        return 0;
}

const char *api_socket_path(const struct api *a) {
        return a ? a->socket_path : NULL;
}
