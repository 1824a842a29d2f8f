/* SPDX-License-Identifier: MIT */
/* The local API server: libmicrohttpd in external-epoll mode on our sd-event loop, draining,
 * and the API object with its route table. The socket and accepting are in api-listen.c,
 * connections and their limits in api-conn.c; what happens to a request once MHD has one is
 * in api-request.c, api-route.c and api-reply.c.
 *
 * How MHD is driven: MHD's own epoll fd is an sd-event IO source and one sd-event timer is
 * re-armed from MHD_get_timeout() after every MHD_run(). MHD_run() is only ever called from
 * those two callbacks; everything else that needs MHD to look again (a resumed connection)
 * "kicks" the timer to fire at once, because MHD_run() must not be re-entered from inside
 * one of its own callbacks. */
#include <errno.h>
#include <sys/epoll.h>

#include "api-internal.h"

#define API_MAX_BODY_DEFAULT ((size_t) 1024 * 1024)
/* Idle keep-alive connections (and clients that stop reading) are dropped after this.
 * Suspended connections (long-polls, idle streams) do not time out in MHD. */
#define API_CONNECTION_TIMEOUT_SEC 60U
/* MHD's own cap, above ours (api-conn.c): we refuse first, and count why. */
#define API_MAX_CONNECTIONS 1000U
#define API_MHD_CONNECTION_LIMIT 1100U

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
                /* What connects now waits in the kernel's backlog. */
                api_listen_pause(a);
                a->draining = true;
        }
        if (api_busy(a) == 0)
                return 0;
        a->idle_fn = idle;
        a->idle_userdata = userdata;
        return 1;
}

/* ---- the API object ---- */

struct route_entry *api_route_entry_ref(struct route_entry *e) {
        if (e)
                e->n_ref++;
        return e;
}

struct route_entry *api_route_entry_unref(struct route_entry *e) {
        if (!e || --e->n_ref > 0)
                return NULL;
        free(e->method);
        free(e->pattern);
        free(e);
        return NULL;
}

static int api_metrics_register(struct api *a, struct metrics *m) {
        static const char *const requests_labels[] = { "route", "code", NULL };
        static const char *const route_labels[] = { "route", NULL };
        static const char *const reason_labels[] = { "reason", NULL };
        const struct metric_def defs[] = {
                { METRIC_COUNTER, "pinion_api_requests_total",
                  "Local API requests, by matched route and HTTP status.", requests_labels, NULL, 0,
                  &a->requests_total },
                { METRIC_HISTOGRAM, "pinion_api_request_duration_seconds",
                  "Local API request duration, from request line to last byte.", route_labels, NULL, 0,
                  &a->request_duration },
                { METRIC_COUNTER, "pinion_api_connections_rejected_total",
                  "Local API connections closed at accept, by the limit they were over (pod, uid, "
                  "unattested, limited, total) or memory/server.", reason_labels, NULL, 0, &a->connections_rejected },
                { METRIC_COUNTER, "pinion_api_header_timeouts_total",
                  "Local API connections closed for not sending a complete request head in time.",
                  NULL, NULL, 0, &a->header_timeouts },
                { METRIC_COUNTER, "pinion_api_connections_closed_total",
                  "Local API connections the agent closed past a deadline (idle, head, body).",
                  reason_labels, NULL, 0, &a->connections_closed },
                { METRIC_COUNTER, "pinion_api_streams_dropped_total",
                  "Local API streams cut off because their reader fell too far behind, by route.",
                  route_labels, NULL, 0, &a->streams_dropped },
                { METRIC_COUNTER, "pinion_api_socket_replaced_total",
                  "Times the API socket's path named something other than our socket, and a fresh "
                  "socket was bound there.", NULL, NULL, 0, &a->socket_replaced },
        };

        return metrics_families(m, defs, ELEMENTSOF(defs));
}

static int api_start_mhd(struct api *a) {
        const union MHD_DaemonInfo *info;
        int r;

        /* External epoll (no thread), suspend/resume for long-polls and streams, and no listening
         * socket: api-listen.c accepts and hands connections over. No MHD_USE_ERROR_LOG: library
         * code does not write to stderr. */
        a->mhd = MHD_start_daemon(MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_NO_LISTEN_SOCKET, 0, NULL,
                                  NULL, api_request_on_access, a,
                                  MHD_OPTION_URI_LOG_CALLBACK, api_request_on_uri, a,
                                  MHD_OPTION_NOTIFY_COMPLETED, api_request_on_completed, a,
                                  MHD_OPTION_NOTIFY_CONNECTION, api_conn_on_connection, a,
                                  MHD_OPTION_CONNECTION_TIMEOUT, API_CONNECTION_TIMEOUT_SEC,
                                  MHD_OPTION_CONNECTION_LIMIT, API_MHD_CONNECTION_LIMIT,
                                  MHD_OPTION_END);
        if (!a->mhd)
                return -EIO;
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

int api_new(sd_event *e, const struct api_options *opts, struct metrics *metrics, struct api **ret) {
        _cleanup_(api_freep) struct api *a = NULL;
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
        a->anonymous = opts->anonymous;
        a->max_connections = opts->max_connections > 0 ? MIN(opts->max_connections, API_MAX_CONNECTIONS)
                                                       : API_MAX_CONNECTIONS;
        a->max_connections_per_source = opts->anonymous ? opts->max_connections_per_source : 0;

        if (metrics) {
                r = api_metrics_register(a, metrics);
                if (r < 0)
                        return r;
        }

        r = api_start_mhd(a);
        if (r < 0)
                return r;
        r = api_listen_start(a, opts);
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
                        api_reply_resume(r);
                MHD_stop_daemon(a->mhd);
        }
        api_listen_stop(a);
        sd_event_source_disable_unref(a->io_source);
        sd_event_source_disable_unref(a->timer_source);
        for (size_t i = 0; i < a->n_routes; i++) {
                /* Its set's holder frees the set later, with no API to remove it from. */
                if (a->routes[i]->owner)
                        a->routes[i]->owner->api = NULL;
                api_route_entry_unref(a->routes[i]);
        }
        free(a->routes);
        for (size_t i = 0; i < a->n_counts; i++)
                free(a->counts[i].key);
        free(a->counts);
        api_budget_free_all(a);
        free(a->socket_path);
        free(a->access_path);
        sd_event_unref(a->event);
        free(a);
        return NULL;
}

static struct route_entry *route_entry_new(const struct api_route *route, void *userdata,
                                           struct api_routes *owner, bool standin, api_standin_fn preempt) {
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
        e->standin = standin;
        e->preempt = preempt;
        if (!e->method || !e->pattern)
                return api_route_entry_unref(e);
        return e;
}

static int route_check(const struct api_route *route) {
        if (!route->handler || isempty(route->method) || !route->pattern || route->pattern[0] != '/')
                return -EINVAL;
        if (api_route_pattern_captures(route->pattern) > API_PARAMS_MAX)
                return -EINVAL;
        return 0;
}

static int add_routes(struct api *a, const struct api_route *routes, size_t n, void *userdata,
                      struct api_routes **ret, bool standin, api_standin_fn preempt) {
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
                a->routes[a->n_routes + added] = route_entry_new(&routes[added], userdata, set, standin, preempt);
                if (!a->routes[a->n_routes + added])
                        break;
        }
        if (added < n) {
                /* All or nothing. */
                for (size_t i = 0; i < added; i++)
                        api_route_entry_unref(a->routes[a->n_routes + i]);
                return -ENOMEM;
        }
        a->n_routes += n;
        if (ret)
                *ret = TAKE_PTR(set);
        return 0;
}

int api_add_routes(struct api *a, const struct api_route *routes, size_t n, void *userdata,
                   struct api_routes **ret) {
        return add_routes(a, routes, n, userdata, ret, false, NULL);
}

int api_add_standin_routes(struct api *a, const struct api_route *routes, size_t n, void *userdata,
                           api_standin_fn preempt) {
        return add_routes(a, routes, n, userdata, NULL, true, preempt);
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
                                api_route_entry_unref(e);
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

void api_set_place_fn(struct api *a, peer_place_fn fn, void *userdata) {
        if (!a)
                return;
        a->place_fn = fn;
        a->place_userdata = userdata;
}

int api_set_access(struct api *a, mode_t socket_mode, gid_t socket_gid) {
        int r;

        if (!a)
                return -EINVAL;
        if (a->access_path) {
                r = socket_watch_apply_access(a->access_path, socket_mode, socket_gid);
                if (r < 0)
                        return r;
        }
        a->socket_mode = socket_mode;
        a->socket_gid = socket_gid;
        socket_watch_set_access(a->watch, socket_mode, socket_gid);
        return 0;
}

const char *api_socket_path(const struct api *a) {
        return a ? a->socket_path : NULL;
}
