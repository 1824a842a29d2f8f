/* SPDX-License-Identifier: MIT */
/* The local API's listening socket: bound by us or inherited (socket activation), accepted
 * from by our own sd-event IO source, and watched so that a file put in its place is noticed.
 *
 * We accept, not MHD (it runs with MHD_USE_NO_LISTEN_SOCKET): a connection over a limit is
 * closed at once and we go on polling, where MHD, once at its connection limit, stopped
 * polling its listening socket and never came back.
 *
 * The socket file is watched by socket-watch.c: when its path names anything else, a fresh
 * socket is bound there; we count it and accept on that one from then on. */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "api-internal.h"
#include "log.h"
#include "socket-watch.h"

/* Connections taken per wakeup; the source is level-triggered, so the rest come next turn
 * and other sources get their turn in between. */
#define API_ACCEPT_BATCH 64U
/* Out of file descriptors: accept again after this, rather than spin on EMFILE. */
#define API_ACCEPT_PAUSE_USEC (100 * USEC_PER_MSEC)

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
                api_conn_admit(a, fd);
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

/* socket-watch.c found the path no longer ours, and bound a fresh socket there (fd >= 0). */
static void on_socket_replaced(int fd, void *userdata) {
        struct api *a = userdata;

        (void) metric_inc(a->socket_replaced);
        if (fd >= 0)
                (void) accept_switch(a, fd);
}

static void on_probe_admit(int fd, void *userdata) {
        api_conn_admit(userdata, fd);
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
                r = socket_watch_apply_access(a->access_path, a->socket_mode, a->socket_gid);
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
        r = socket_watch_listen(a->socket_path, a->socket_mode, a->socket_gid, &a->listen_fd);
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
        if (!a->access_path)
                return 0;
        return socket_watch_new(a->event,
                                &(const struct socket_watch_options) {
                                        .name = "Local API",
                                        .path = a->access_path,
                                        .mode = a->socket_mode,
                                        .gid = a->socket_gid,
                                        .admit = on_probe_admit,
                                        .replaced = on_socket_replaced,
                                        .userdata = a,
                                },
                                opts->listen_fd >= 0 ? opts->listen_fd : a->listen_fd, &a->watch);
}

void api_listen_pause(struct api *a) {
        (void) sd_event_source_set_enabled(a->accept_source, SD_EVENT_OFF);
}

void api_listen_stop(struct api *a) {
        bool ours = a->unlink_on_free && a->access_path && socket_watch_is_ours(a->watch);

        a->accept_source = sd_event_source_disable_unref(a->accept_source);
        a->accept_pause = sd_event_source_disable_unref(a->accept_pause);
        a->watch = socket_watch_free(a->watch);
        a->listen_fd = safe_close(a->listen_fd);
        /* Only our own file: what someone put in its place is not ours to remove. */
        if (ours)
                (void) unlink(a->access_path);
}
