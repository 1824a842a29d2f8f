/* SPDX-License-Identifier: MIT */
/* The local API: libmicrohttpd in external-epoll mode on our sd-event loop.
 *
 * How MHD is driven: MHD's own epoll fd is an sd-event IO source and one sd-event timer is
 * re-armed from MHD_get_timeout() after every MHD_run(). MHD_run() is only ever called from
 * those two callbacks; everything else that needs MHD to look again (a resumed connection)
 * "kicks" the timer to fire at once, because MHD_run() must not be re-entered from inside
 * one of its own callbacks.
 *
 * A request's life: the URI log callback allocates struct api_request (so we see the raw,
 * still percent-encoded path), the first access-handler call matches the route, further
 * calls collect the body, the last one runs the handler. A handler's reply is only built
 * there; it is queued with MHD on the next access-handler call for that connection, which is
 * immediately for synchronous replies, or after MHD_resume_connection() for suspended ones.
 * NOTIFY_COMPLETED counts the request and frees it. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <microhttpd.h>

#include "api.h"

#ifndef SO_PEERGROUPS
#define SO_PEERGROUPS 59
#endif

#define API_MAX_BODY_DEFAULT ((size_t) 1024 * 1024)
/* A stream whose reader does not keep up is cut off rather than buffered without bound. */
#define API_STREAM_BUFFER_MAX ((size_t) 8 * 1024 * 1024)
#define API_PARAMS_MAX 8
/* Idle keep-alive connections (and clients that stop reading) are dropped after this.
 * Suspended connections (long-polls, idle streams) do not time out in MHD. */
#define API_CONNECTION_TIMEOUT_SEC 60U
/* Code counted for a request whose client left before any reply (nginx's convention). */
#define API_CODE_CLIENT_GONE 499U

struct route_entry {
        char *method;
        char *pattern;
        api_handler_fn handler;
        bool privileged;
        void *userdata;
};

struct api {
        sd_event *event;
        struct MHD_Daemon *mhd;
        sd_event_source *io_source;
        sd_event_source *timer_source;
        bool running; /* inside MHD_run() */
        bool kicked;  /* run MHD again as soon as the current run returns */

        int listen_fd;
        char *socket_path;
        bool unlink_on_free;
        mode_t socket_mode;
        gid_t socket_gid;
        size_t max_body;

        struct route_entry **routes; /* each entry allocated alone: requests point at them */
        size_t n_routes;

        struct api_request *requests; /* every live request, so api_free() can resume them */

        struct metric_family *requests_total;
        struct metric_family *request_duration;
};

/* What SO_PEERCRED/SO_PEERGROUPS said about the process that connected; one per
 * connection, kept in MHD's socket context. */
struct api_conn {
        int fd;
        bool have_creds;
        pid_t pid;
        uid_t uid;
        gid_t gid;
        gid_t *groups;
        size_t n_groups;
};

enum request_state {
        REQUEST_NEW,        /* URI seen, access handler not called yet */
        REQUEST_RECEIVING,  /* route matched, body arriving */
        REQUEST_DISPATCHED, /* handler running */
        REQUEST_WAITING,    /* long-poll: handler kept it, no reply yet */
        REQUEST_REPLIED,    /* reply built, queued at the next access-handler call */
        REQUEST_SENDING,    /* reply handed to MHD */
        REQUEST_FAILED,     /* no reply could be built: the connection is dropped */
};

struct api_request {
        struct api *api;
        struct api_request *prev, *next;
        struct MHD_Connection *connection;
        const struct api_conn *conn;
        enum request_state state;
        usec_t started;

        char *raw_uri;
        char *method;
        char *path;
        char **segments; /* of the raw path, percent-decoded */
        size_t n_segments;
        const struct route_entry *route;
        unsigned params[API_PARAMS_MAX];
        unsigned n_params;
        struct api_peer peer;

        char *body;
        size_t body_size;
        bool body_too_large;

        unsigned status;
        struct MHD_Response *response;

        bool suspended; /* MHD_suspend_connection() in effect */
        bool client_gone;
        sd_event_source *hangup_watch;
        api_abort_fn on_abort;
        void *abort_userdata;

        bool streaming;
        bool stream_ended;
        char *stream_buf;
        size_t stream_off, stream_len, stream_alloc;
};

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

/* ---- peer credentials ---- */

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

static bool conn_privileged(const struct api *a, const struct api_conn *c) {
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
static void api_kick(struct api *a) {
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

static void request_resume(struct api_request *r) {
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
static int path_split(const char *raw, size_t raw_len, char ***ret, size_t *ret_n) {
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

static unsigned pattern_captures(const char *pattern) {
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
                const struct route_entry *e = a->routes[i];

                if (!pattern_match(e->pattern, r->segments, r->n_segments, params, &n_params))
                        continue;
                if (method_matches(e->method, r->method)) {
                        r->route = e;
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

static bool request_body_too_large(struct api_request *r) {
        const char *cl;
        unsigned long long len;
        char *end;

        cl = MHD_lookup_connection_value(r->connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (!cl)
                return false;
        errno = 0;
        len = strtoull(cl, &end, 10);
        return errno == ERANGE || (end != cl && len > r->api->max_body);
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

        k = path_split(raw, strcspn(raw, "?#"), &r->segments, &r->n_segments);
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
        if (size > r->api->max_body - r->body_size) {
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

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *connection) {
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
        r->next = a->requests;
        if (a->requests)
                a->requests->prev = r;
        a->requests = r;
        return r;
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *connection, const char *url,
                                 const char *method, const char *version, const char *upload_data,
                                 size_t *upload_data_size, void **req_cls) {
        struct api_request *r = *req_cls;

        if (!r)
                return MHD_NO; /* out of memory in on_uri() */

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

static void on_completed(void *cls, struct MHD_Connection *connection, void **req_cls,
                         enum MHD_RequestTerminationCode toe) {
        struct api_request *r = *req_cls;

        if (!r)
                return;
        *req_cls = NULL;
        r->hangup_watch = sd_event_source_disable_unref(r->hangup_watch);
        /* Only whoever still holds the request hears of it; after on_abort it is gone. */
        if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && request_owner_holds(r) && r->on_abort)
                r->on_abort(r, r->abort_userdata);
        request_account(r);
        request_free(r);
}

static void on_connection(void *cls, struct MHD_Connection *connection, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe) {
        const union MHD_ConnectionInfo *info;

        switch (toe) {
        case MHD_CONNECTION_NOTIFY_STARTED:
                info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
                /* NULL (out of memory) leaves the peer unknown, hence unprivileged. */
                *socket_context = conn_new(info ? info->connect_fd : -EBADF);
                break;
        case MHD_CONNECTION_NOTIFY_CLOSED:
                *socket_context = conn_free(*socket_context);
                break;
        }
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

/* ---- the API object ---- */

static struct route_entry *route_entry_free(struct route_entry *e) {
        if (!e)
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
        a->mhd = MHD_start_daemon(MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME, 0, NULL, NULL, on_access, a,
                                  MHD_OPTION_LISTEN_SOCKET, *fd,
                                  MHD_OPTION_URI_LOG_CALLBACK, on_uri, a,
                                  MHD_OPTION_NOTIFY_COMPLETED, on_completed, a,
                                  MHD_OPTION_NOTIFY_CONNECTION, on_connection, a,
                                  MHD_OPTION_CONNECTION_TIMEOUT, API_CONNECTION_TIMEOUT_SEC,
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
        for (size_t i = 0; i < a->n_routes; i++)
                route_entry_free(a->routes[i]);
        free(a->routes);
        free(a->socket_path);
        sd_event_unref(a->event);
        free(a);
        return NULL;
}

static struct route_entry *route_entry_new(const struct api_route *route, void *userdata) {
        struct route_entry *e;

        e = calloc(1, sizeof(*e));
        if (!e)
                return NULL;
        e->method = strdup(route->method);
        e->pattern = strdup(route->pattern);
        e->handler = route->handler;
        e->privileged = route->privileged;
        e->userdata = userdata;
        if (!e->method || !e->pattern)
                return route_entry_free(e);
        return e;
}

static int route_check(const struct api_route *route) {
        if (!route->handler || isempty(route->method) || !route->pattern || route->pattern[0] != '/')
                return -EINVAL;
        if (pattern_captures(route->pattern) > API_PARAMS_MAX)
                return -EINVAL;
        return 0;
}

int api_add_routes(struct api *a, const struct api_route *routes, size_t n, void *userdata) {
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
        if (n == 0)
                return 0;
        grown = realloc(a->routes, (a->n_routes + n) * sizeof(*grown));
        if (!grown)
                return -ENOMEM;
        a->routes = grown;
        for (added = 0; added < n; added++) {
                a->routes[a->n_routes + added] = route_entry_new(&routes[added], userdata);
                if (!a->routes[a->n_routes + added])
                        break;
        }
        if (added < n) {
                /* All or nothing. */
                for (size_t i = 0; i < added; i++)
                        route_entry_free(a->routes[a->n_routes + i]);
                return -ENOMEM;
        }
        a->n_routes += n;
        return 0;
}

int api_set_access(struct api *a, mode_t socket_mode, gid_t socket_gid) {
        int r;

        if (!a)
                return -EINVAL;
        /* An inherited socket's file belongs to whoever created it (systemd's SocketMode=). */
        if (a->unlink_on_free) {
                r = socket_apply_access(a->socket_path, socket_mode, socket_gid);
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
        if (!r || r->state != REQUEST_DISPATCHED)
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
