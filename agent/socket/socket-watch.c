/* SPDX-License-Identifier: MIT */
/* The agent's listening Unix sockets: binding one (socket_watch_listen()), and watching that its path
 * still names it (socket-watch.h). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "fs-acl.h"
#include "fs.h"
#include "log.h"
#include "socket-watch.h"

/* Connections taken from the listening socket while probing it, at most. */
#define PROBE_ACCEPT_MAX 64U
/* The socket file is also checked this often, should inotify miss something (a directory
 * replaced, a full inotify queue). */
#define SOCKET_CHECK_USEC (5 * USEC_PER_SEC)

struct socket_watch {
        sd_event *event;
        char *name, *path, *base;
        mode_t mode;
        gid_t gid;
        socket_watch_admit_fn admit;
        socket_watch_replaced_fn replaced;
        void *userdata;
        /* What path must name while it is our socket. */
        bool known;
        /* A fresh socket's path was taken again before it could be recorded: the periodic check
         * binds another (from the timer only, so that our own renames cannot loop on inotify). */
        bool lost;
        dev_t dev;
        ino_t ino;
        sd_event_source *inotify; /* on the directory */
        sd_event_source *timer;   /* the same check, periodically */
};

/* ---- binding ---- */

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

/* The socket file at path, never anything else (the path of an inherited socket was not made by
 * us), as an O_PATH descriptor: a socket file cannot be opened for I/O. */
static int open_socket_file(const char *path) {
        _cleanup_close_ int fd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;

        if (fd < 0 || fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISSOCK(st.st_mode))
                return -ENOTSOCK;
        return TAKE_FD(fd);
}

/* The group is let in with an ACL entry (fs-acl.h), so changing it needs no CAP_CHOWN. */
int socket_watch_apply_access(const char *path, mode_t mode, gid_t gid) {
        _cleanup_close_ int fd = open_socket_file(path);
        if (fd < 0)
                return fd;
        return fs_acl_grant_fd(fd, mode, (uid_t) -1, gid);
}

/* 1 if the socket at path has the access socket_watch_apply_access() gives it. */
static int socket_access_matches(const char *path, mode_t mode, gid_t gid) {
        _cleanup_close_ int fd = open_socket_file(path);
        if (fd < 0)
                return fd;
        return fs_acl_matches_fd(fd, mode, (uid_t) -1, gid);
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
        r = socket_watch_apply_access(path, mode, gid);
        if (r >= 0 && listen(fd, SOMAXCONN) < 0)
                r = -errno;
        if (r < 0) {
                (void) unlink(path);
                return r;
        }
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int socket_watch_listen(const char *path, mode_t mode, gid_t gid, int *ret_fd) {
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

        r = fs_path_split(path, &dir, NULL);
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

/* ---- which file is ours ---- */

/* Whether a connection to path arrives at listen_fd: then path names our socket. The probe
 * says a token of ours first; callers' connections queued before it are admitted as usual. */
static bool socket_answers(struct socket_watch *w, int listen_fd) {
        _cleanup_close_ int client = -EBADF;
        struct sockaddr_un sa;
        char token[16], seen[sizeof(token)];

        if (sockaddr_un_set(&sa, w->path) < 0)
                return false;
        snprintf(token, sizeof(token), "%08lx%07lx", (unsigned long) random(), (unsigned long) getpid() & 0xfffffff);
        client = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (client < 0 || connect(client, (const struct sockaddr *) &sa, sizeof(sa)) < 0 ||
            send(client, token, sizeof(token), MSG_NOSIGNAL) != (ssize_t) sizeof(token))
                return false;
        for (unsigned i = 0; i < PROBE_ACCEPT_MAX; i++) {
                _cleanup_close_ int server = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

                if (server < 0)
                        return false;
                if (recv(server, seen, sizeof(seen), MSG_PEEK | MSG_DONTWAIT) == (ssize_t) sizeof(seen) &&
                    memcmp(seen, token, sizeof(token)) == 0)
                        return true;
                if (w->admit)
                        w->admit(TAKE_FD(server), w->userdata);
        }
        return false;
}

/* Records which file the path is while it is our socket: the same inode before and after a
 * connection through the path reached listen_fd. Whoever can write the directory cannot slip a
 * file of theirs in between (a temporary name of ours renamed, a file swapped at start). */
static int socket_record(struct socket_watch *w, int listen_fd) {
        struct stat before, after;

        w->known = false;
        if (lstat(w->path, &before) < 0)
                return -errno;
        if (!S_ISSOCK(before.st_mode))
                return -ENOTSOCK;
        if (!socket_answers(w, listen_fd))
                return -EADDRNOTAVAIL;
        if (lstat(w->path, &after) < 0)
                return -errno;
        if (before.st_dev != after.st_dev || before.st_ino != after.st_ino)
                return -EADDRNOTAVAIL;
        w->dev = after.st_dev;
        w->ino = after.st_ino;
        w->known = true;
        return 0;
}

static bool stat_is_ours(const struct socket_watch *w, const struct stat *st) {
        return S_ISSOCK(st->st_mode) && st->st_dev == w->dev && st->st_ino == w->ino;
}

bool socket_watch_known(const struct socket_watch *w) {
        return w && w->known;
}

bool socket_watch_is_ours(const struct socket_watch *w) {
        struct stat st;

        return socket_watch_known(w) && lstat(w->path, &st) >= 0 && stat_is_ours(w, &st);
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

static void socket_repair(struct socket_watch *w) {
        char what[160];
        int fd = -EBADF, r;

        socket_describe(w->path, what, sizeof(what));
        log_error("%s socket %s is no longer ours: expected our socket (device %ju, inode %ju), "
                  "found %s. Someone with write access to its directory moved or replaced it; "
                  "binding a fresh socket at the path.",
                  w->name, w->path, (uintmax_t) w->dev, (uintmax_t) w->ino, what);
        r = socket_listen_over(w->path, w->mode, w->gid, &fd);
        if (r < 0) {
                log_error_errno(r, "%s: cannot bind a fresh socket at %s (retrying): %m", w->name, w->path);
                w->replaced(r, w->userdata);
                return;
        }
        r = socket_record(w, fd);
        w->lost = r < 0;
        if (r < 0)
                log_error_errno(r, "%s: the fresh socket at %s was replaced at once; binding another in %llus: %m",
                                w->name, w->path, (unsigned long long) (SOCKET_CHECK_USEC / USEC_PER_SEC));
        w->replaced(fd, w->userdata);
        log_notice("%s listening on %s again (inode %ju)", w->name, w->path, (uintmax_t) w->ino);
}

void socket_watch_check(struct socket_watch *w) {
        struct stat st;

        if (!socket_watch_known(w))
                return;
        if (lstat(w->path, &st) < 0 || !stat_is_ours(w, &st)) {
                socket_repair(w);
                return;
        }
        /* Ours, but its mode or ACL changed under us: put back what is configured. */
        if (socket_access_matches(w->path, w->mode, w->gid) == 0) {
                log_warning("%s socket %s had mode %04o (or other ACL entries); restoring %04o%s", w->name,
                            w->path, (unsigned) (st.st_mode & 07777), (unsigned) w->mode,
                            w->gid != (gid_t) -1 ? " with its group" : "");
                (void) socket_watch_apply_access(w->path, w->mode, w->gid);
        }
}

static int on_dir_event(sd_event_source *s, const struct inotify_event *ev, void *userdata) {
        struct socket_watch *w = userdata;

        if ((ev->mask & IN_Q_OVERFLOW) || ev->len == 0 || streq(ev->name, w->base))
                socket_watch_check(w);
        return 0;
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        struct socket_watch *w = userdata;

        if (w->lost)
                socket_repair(w);
        else
                socket_watch_check(w);
        (void) sd_event_source_set_time_relative(s, SOCKET_CHECK_USEC);
        (void) sd_event_source_set_enabled(s, SD_EVENT_ON);
        return 0;
}

/* ---- the watch ---- */

int socket_watch_new(sd_event *e, const struct socket_watch_options *o, int listen_fd, struct socket_watch **ret) {
        _cleanup_(socket_watch_freep) struct socket_watch *w = NULL;
        _cleanup_free_ char *dir = NULL;
        int r;

        if (!e || !o || isempty(o->path) || !o->replaced || listen_fd < 0 || !ret)
                return -EINVAL;
        w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        w->event = sd_event_ref(e);
        w->mode = o->mode;
        w->gid = o->gid;
        w->admit = o->admit;
        w->replaced = o->replaced;
        w->userdata = o->userdata;
        w->name = strdup(o->name ?: "Socket");
        w->path = strdup(o->path);
        if (!w->name || !w->path)
                return -ENOMEM;
        r = fs_path_split(w->path, &dir, &w->base);
        if (r < 0)
                return r;
        /* A socket whose file we cannot see is still served, only not watched. */
        r = socket_record(w, listen_fd);
        if (r < 0) {
                log_warning_errno(r, "%s: cannot identify the socket file %s; not watching it: %m", w->name, w->path);
                *ret = TAKE_PTR(w);
                return 0;
        }
        r = sd_event_add_inotify(e, &w->inotify, dir,
                                 IN_DELETE | IN_MOVED_FROM | IN_CREATE | IN_MOVED_TO | IN_ATTRIB | IN_ONLYDIR,
                                 on_dir_event, w);
        if (r < 0)
                log_warning_errno(r, "%s: cannot watch %s (checking it every %llus instead): %m", w->name, dir,
                                  (unsigned long long) (SOCKET_CHECK_USEC / USEC_PER_SEC));
        r = sd_event_add_time_relative(e, &w->timer, CLOCK_MONOTONIC, SOCKET_CHECK_USEC, USEC_PER_SEC, on_timer, w);
        if (r < 0)
                return r;
        (void) sd_event_source_set_enabled(w->timer, SD_EVENT_ON);
        *ret = TAKE_PTR(w);
        return 0;
}

struct socket_watch *socket_watch_free(struct socket_watch *w) {
        if (!w)
                return NULL;
        sd_event_source_disable_unref(w->inotify);
        sd_event_source_disable_unref(w->timer);
        sd_event_unref(w->event);
        free(w->name);
        free(w->path);
        free(w->base);
        free(w);
        return NULL;
}

void socket_watch_set_access(struct socket_watch *w, mode_t mode, gid_t gid) {
        if (!w)
                return;
        w->mode = mode;
        w->gid = gid;
}
