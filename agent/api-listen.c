/* SPDX-License-Identifier: MIT */
/* The local API's listening socket: bound by us or inherited (socket activation), accepted
 * from by our own sd-event IO source, and watched so that a file put in its place is noticed.
 *
 * We accept, not MHD (it runs with MHD_USE_NO_LISTEN_SOCKET): a connection over a limit is
 * closed at once and we go on polling, where MHD, once at its connection limit, stopped
 * polling its listening socket and never came back.
 *
 * The socket file is the agent's by configuration. Whoever can write its directory can move it
 * aside and listen at the path instead; we record the file's (st_dev, st_ino), watch the
 * directory (inotify, and a periodic check), and when the path names anything else, log it,
 * count it and bind a fresh socket there (renamed over the impostor, so the path never goes
 * missing), accepting on that one from then on. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "api-internal.h"
#include "fsutil.h"
#include "log.h"

/* Connections taken per wakeup; the source is level-triggered, so the rest come next turn
 * and other sources get their turn in between. */
#define API_ACCEPT_BATCH 64U
/* Out of file descriptors: accept again after this, rather than spin on EMFILE. */
#define API_ACCEPT_PAUSE_USEC (100 * USEC_PER_MSEC)
/* The socket file is also checked this often, should inotify miss something (a directory
 * replaced, a full inotify queue). */
#define API_SOCKET_CHECK_USEC (5 * USEC_PER_SEC)

/* ---- the socket file ---- */

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

int socket_apply_access(const char *path, mode_t mode, gid_t gid) {
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

/* Binds and listens at path, which must be free. */
static int socket_bind_at(const char *path, mode_t mode, gid_t gid, int *ret_fd) {
        _cleanup_close_ int fd = -EBADF;
        struct sockaddr_un sa;
        int r;

        r = sockaddr_un_set(&sa, path);
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

int socket_listen(const char *path, mode_t mode, gid_t gid, int *ret_fd) {
        struct sockaddr_un sa;
        int r;

        r = sockaddr_un_set(&sa, path);
        if (r < 0)
                return r;
        r = socket_remove_stale(path, &sa);
        if (r < 0)
                return r;
        return socket_bind_at(path, mode, gid, ret_fd);
}

/* Binds a fresh socket at path in place of whatever is there: under a temporary name in the
 * same directory first, then renamed over it, so that the path is never missing. */
static int socket_listen_over(const char *path, mode_t mode, gid_t gid, int *ret_fd) {
        _cleanup_free_ char *dir = NULL, *tmp = NULL;
        int r;

        r = path_split(path, &dir, NULL);
        if (r < 0)
                return r;
        if (asprintf(&tmp, "%s/.pinion-%08" PRIx32 ".sock", dir, (uint32_t) random()) < 0)
                return -ENOMEM;
        (void) unlink(tmp);
        r = socket_bind_at(tmp, mode, gid, ret_fd);
        if (r == -ENAMETOOLONG) {
                /* No room for the longer name: the path is missing for an instant. */
                if (unlink(path) < 0 && errno != ENOENT)
                        return -errno;
                return socket_bind_at(path, mode, gid, ret_fd);
        }
        if (r < 0)
                return r;
        if (rename(tmp, path) < 0) {
                r = -errno;
                (void) unlink(tmp);
                *ret_fd = safe_close(*ret_fd);
                return r;
        }
        return 0;
}

/* Whether a connection to path arrives at listen_fd: then path names our socket. The probe
 * says a token of ours first; callers' connections queued before it are admitted as usual. */
static bool socket_answers(struct api *a, const char *path, int listen_fd) {
        _cleanup_close_ int client = -EBADF;
        struct sockaddr_un sa;
        char token[16], seen[sizeof(token)];

        if (sockaddr_un_set(&sa, path) < 0)
                return false;
        snprintf(token, sizeof(token), "%08lx%07lx", (unsigned long) random(), (unsigned long) getpid() & 0xfffffff);
        client = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (client < 0 || connect(client, (const struct sockaddr *) &sa, sizeof(sa)) < 0 ||
            send(client, token, sizeof(token), MSG_NOSIGNAL) != (ssize_t) sizeof(token))
                return false;
        for (unsigned i = 0; i < API_ACCEPT_BATCH; i++) {
                _cleanup_close_ int server = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

                if (server < 0)
                        return false;
                if (recv(server, seen, sizeof(seen), MSG_PEEK | MSG_DONTWAIT) == (ssize_t) sizeof(seen) &&
                    memcmp(seen, token, sizeof(token)) == 0)
                        return true;
                conn_admit(a, TAKE_FD(server));
        }
        return false;
}

/* Records which file access_path is while it is our socket: the same inode before and after a
 * connection through the path reached listen_fd. Whoever can write the directory cannot slip a
 * file of theirs in between (a temporary name of ours renamed, a file swapped at start). */
static int socket_record(struct api *a, int listen_fd) {
        struct stat before, after;

        a->socket_known = false;
        if (!a->access_path)
                return 0;
        if (lstat(a->access_path, &before) < 0)
                return -errno;
        if (!S_ISSOCK(before.st_mode))
                return -ENOTSOCK;
        if (!socket_answers(a, a->access_path, listen_fd))
                return -EADDRNOTAVAIL;
        if (lstat(a->access_path, &after) < 0)
                return -errno;
        if (before.st_dev != after.st_dev || before.st_ino != after.st_ino)
                return -EADDRNOTAVAIL;
        a->socket_dev = after.st_dev;
        a->socket_ino = after.st_ino;
        a->socket_known = true;
        return 0;
}

static bool socket_is_ours(const struct api *a, const struct stat *st) {
        return S_ISSOCK(st->st_mode) && st->st_dev == a->socket_dev && st->st_ino == a->socket_ino;
}

/* ---- accepting ---- */

static int on_accept_pause_end(sd_event_source *s, uint64_t usec, void *userdata) {
        struct api *a = userdata;

        if (!a->draining)
                (void) sd_event_source_set_enabled(a->accept_source, SD_EVENT_ON);
        return 0;
}

static void accept_pause(struct api *a) {
        (void) sd_event_source_set_enabled(a->accept_source, SD_EVENT_OFF);
        if (!a->accept_pause &&
            sd_event_add_time_relative(a->event, &a->accept_pause, CLOCK_MONOTONIC, API_ACCEPT_PAUSE_USEC, 0,
                                       on_accept_pause_end, a) < 0)
                return;
        (void) sd_event_source_set_time_relative(a->accept_pause, API_ACCEPT_PAUSE_USEC);
        (void) sd_event_source_set_enabled(a->accept_pause, SD_EVENT_ONESHOT);
}

/* Returns how many were taken, or negative errno (EAGAIN: none waiting). */
static int accept_some(struct api *a, int listen_fd, unsigned max) {
        unsigned n;

        for (n = 0; n < max; n++) {
                int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

                if (fd < 0) {
                        if (errno == EINTR || errno == ECONNABORTED)
                                continue;
                        return n > 0 ? (int) n : -errno;
                }
                conn_admit(a, fd);
        }
        return (int) n;
}

/* Returns 0: a negative return would make sd-event disable the source for good. */
static int on_accept(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        struct api *a = userdata;
        int r;

        r = accept_some(a, fd, API_ACCEPT_BATCH);
        if (r == -EMFILE || r == -ENFILE || r == -ENOBUFS || r == -ENOMEM) {
                log_warning_errno(r, "Local API: cannot accept connections for now: %m");
                accept_pause(a);
        }
        return 0;
}

static int accept_start(struct api *a, int fd) {
        int r;

        r = sd_event_add_io(a->event, &a->accept_source, fd, EPOLLIN, on_accept, a);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(a->accept_source, "api-accept");
        if (a->draining)
                (void) sd_event_source_set_enabled(a->accept_source, SD_EVENT_OFF);
        return 0;
}

/* ---- a replaced socket file ---- */

static void socket_describe(const char *path, char *buf, size_t size) {
        struct stat st;

        if (lstat(path, &st) < 0)
                snprintf(buf, size, "nothing (%s)", strerror(errno));
        else
                snprintf(buf, size, "%s inode %ju owned by %u:%u mode %04o",
                         S_ISSOCK(st.st_mode) ? "a socket" : S_ISDIR(st.st_mode) ? "a directory" : "a file",
                         (uintmax_t) st.st_ino, (unsigned) st.st_uid, (unsigned) st.st_gid,
                         (unsigned) (st.st_mode & 07777));
}

/* Moves accepting to new_fd: what still waits in the old backlog is taken first. */
static int accept_switch(struct api *a, int new_fd) {
        int r;

        if (a->listen_fd >= 0 && !a->draining)
                (void) accept_some(a, a->listen_fd, API_ACCEPT_BATCH);
        a->accept_source = sd_event_source_disable_unref(a->accept_source);
        safe_close(a->listen_fd);
        a->listen_fd = new_fd;
        r = accept_start(a, new_fd);
        if (r < 0)
                log_error_errno(r, "Local API: cannot accept on the new socket %s: %m", a->access_path);
        return r;
}

static void socket_repair(struct api *a) {
        char what[160];
        int fd = -EBADF, r;

        socket_describe(a->access_path, what, sizeof(what));
        log_error("Local API socket %s is no longer ours: expected our socket (device %ju, inode %ju), "
                  "found %s. Someone with write access to its directory moved or replaced it; "
                  "binding a fresh socket at the path.",
                  a->access_path, (uintmax_t) a->socket_dev, (uintmax_t) a->socket_ino, what);
        (void) metric_inc(a->socket_replaced);
        r = socket_listen_over(a->access_path, a->socket_mode, a->socket_gid, &fd);
        if (r < 0) {
                log_error_errno(r, "Local API: cannot bind a fresh socket at %s (retrying): %m", a->access_path);
                return;
        }
        r = socket_record(a, fd);
        if (r < 0)
                /* Known no more: the periodic check cannot tell ours apart now. */
                log_error_errno(r, "Local API: the fresh socket at %s was replaced at once; no longer "
                                "watching it: %m", a->access_path);
        (void) accept_switch(a, fd);
        log_notice("Local API listening on %s again (inode %ju)", a->access_path, (uintmax_t) a->socket_ino);
}

static void socket_check(struct api *a) {
        struct stat st;

        if (!a->socket_known)
                return;
        if (lstat(a->access_path, &st) < 0 || !socket_is_ours(a, &st)) {
                socket_repair(a);
                return;
        }
        /* Ours, but its mode or group changed under us: put back what is configured. */
        if ((st.st_mode & 07777) != a->socket_mode || (a->socket_gid != (gid_t) -1 && st.st_gid != a->socket_gid)) {
                log_warning("Local API socket %s had mode %04o group %u; restoring %04o", a->access_path,
                            (unsigned) (st.st_mode & 07777), (unsigned) st.st_gid, (unsigned) a->socket_mode);
                (void) socket_apply_access(a->access_path, a->socket_mode, a->socket_gid);
        }
}

static int on_socket_dir_event(sd_event_source *s, const struct inotify_event *ev, void *userdata) {
        struct api *a = userdata;
        _cleanup_free_ char *base = NULL;

        if ((ev->mask & IN_Q_OVERFLOW) || ev->len == 0 ||
            (path_split(a->access_path, NULL, &base) >= 0 && streq(ev->name, base)))
                socket_check(a);
        return 0;
}

static int on_socket_check(sd_event_source *s, uint64_t usec, void *userdata) {
        struct api *a = userdata;

        socket_check(a);
        (void) sd_event_source_set_time_relative(s, API_SOCKET_CHECK_USEC);
        (void) sd_event_source_set_enabled(s, SD_EVENT_ON);
        return 0;
}

static int socket_watch_start(struct api *a) {
        _cleanup_free_ char *dir = NULL;
        int r;

        if (!a->socket_known)
                return 0;
        r = path_split(a->access_path, &dir, NULL);
        if (r < 0)
                return r;
        r = sd_event_add_inotify(a->event, &a->socket_watch, dir,
                                 IN_DELETE | IN_MOVED_FROM | IN_CREATE | IN_MOVED_TO | IN_ATTRIB | IN_ONLYDIR,
                                 on_socket_dir_event, a);
        if (r < 0)
                log_warning_errno(r, "Local API: cannot watch %s (checking it every %llus instead): %m", dir,
                                  (unsigned long long) (API_SOCKET_CHECK_USEC / USEC_PER_SEC));
        r = sd_event_add_time_relative(a->event, &a->socket_check, CLOCK_MONOTONIC, API_SOCKET_CHECK_USEC,
                                       USEC_PER_SEC, on_socket_check, a);
        if (r < 0)
                return r;
        (void) sd_event_source_set_enabled(a->socket_check, SD_EVENT_ON);
        return 0;
}

/* ---- start and stop ---- */

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

/* An inherited socket becomes ours only once api_new() succeeds: until then listen_fd stays
 * the caller's (api_new() failing leaves it open). */
static int listen_inherited(struct api *a, const struct api_options *opts) {
        int r;

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
        return accept_start(a, opts->listen_fd);
}

static int listen_bound(struct api *a, const struct api_options *opts) {
        int r;

        a->socket_path = strdup(opts->socket_path);
        a->access_path = strdup(opts->socket_path);
        if (!a->socket_path || !a->access_path)
                return -ENOMEM;
        r = socket_listen(a->socket_path, a->socket_mode, a->socket_gid, &a->listen_fd);
        if (r < 0)
                return r;
        a->unlink_on_free = true;
        return accept_start(a, a->listen_fd);
}

int api_listen_start(struct api *a, const struct api_options *opts) {
        int r;

        r = opts->listen_fd >= 0 ? listen_inherited(a, opts) : listen_bound(a, opts);
        if (r < 0)
                return r;
        /* A socket whose file we cannot see is still served, only not watched. */
        r = socket_record(a, opts->listen_fd >= 0 ? opts->listen_fd : a->listen_fd);
        if (r < 0)
                log_warning_errno(r, "Local API: cannot identify the socket file %s; not watching it: %m",
                                  a->access_path);
        return socket_watch_start(a);
}

void api_listen_pause(struct api *a) {
        (void) sd_event_source_set_enabled(a->accept_source, SD_EVENT_OFF);
}

void api_listen_stop(struct api *a) {
        struct stat st;

        a->accept_source = sd_event_source_disable_unref(a->accept_source);
        a->accept_pause = sd_event_source_disable_unref(a->accept_pause);
        a->socket_watch = sd_event_source_disable_unref(a->socket_watch);
        a->socket_check = sd_event_source_disable_unref(a->socket_check);
        a->listen_fd = safe_close(a->listen_fd);
        /* Only our own file: what someone put in its place is not ours to remove. */
        if (a->unlink_on_free && a->access_path && a->socket_known && lstat(a->access_path, &st) >= 0 &&
            socket_is_ours(a, &st))
                (void) unlink(a->access_path);
}
