/* SPDX-License-Identifier: MIT */
#pragma once

/* The agent's listening Unix sockets: bound the one way (socket_watch_listen()), and watched so that
 * a file put in a socket's place is noticed. Used by the local API (api-listen.c) and the gRPC
 * servers (grpc-server.c).
 *
 * A socket file is the agent's by configuration. Whoever can write its directory can move it
 * aside and listen at the path instead; a watch records the file's (st_dev, st_ino) once a
 * connection through the path reached our listening socket, watches the directory (inotify,
 * and a check every 5 s), and when the path names anything else logs it ("<name> socket <path>
 * is no longer ours"), binds a fresh socket there (renamed over the impostor, so the path never
 * goes missing) and hands it to the owner, who accepts on it from then on. */

#include <stdbool.h>
#include <sys/types.h>

#include <systemd/sd-event.h>

#include "macro.h"

struct socket_watch;

/* A connection accepted from the listening socket while probing it: the owner serves it. */
typedef void (*socket_watch_admit_fn)(int fd, void *userdata);
/* The path was found no longer naming our socket. fd: a fresh listening socket bound there (the
 * owner takes it and accepts on it from now on), or a negative errno when none could be bound
 * (tried again at the next check). The owner counts it (its metric). */
typedef void (*socket_watch_replaced_fn)(int fd, void *userdata);

struct socket_watch_options {
        const char *name; /* starts the log lines: "Local API", "gRPC workload" */
        const char *path;
        mode_t mode;
        gid_t gid; /* -1: leave the group */
        socket_watch_admit_fn admit;
        socket_watch_replaced_fn replaced;
        void *userdata;
};

/* Watches o->path, which should name listen_fd. A file that cannot be identified as listen_fd's
 * is not watched (logged): *ret is still made, socket_watch_known() says false. */
int socket_watch_new(sd_event *e, const struct socket_watch_options *o, int listen_fd, struct socket_watch **ret);
struct socket_watch *socket_watch_free(struct socket_watch *w);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct socket_watch *, socket_watch_free);
/* The mode and group a fresh socket gets, and the check puts back (reload). */
void socket_watch_set_access(struct socket_watch *w, mode_t mode, gid_t gid);
bool socket_watch_known(const struct socket_watch *w);
/* Whether the path names our socket now (false when not known). */
bool socket_watch_is_ours(const struct socket_watch *w);
/* Checks the path now (what inotify and the timer do). */
void socket_watch_check(struct socket_watch *w);

/* Binds and listens on a Unix socket at path with mode and group let in (gid -1: none), never
 * more open than asked even for an instant; a stale socket there (nobody answers) is replaced,
 * a live one is -EADDRINUSE, anything else -EEXIST. The one rule for every socket the agent
 * serves (the local API's, the gRPC servers'). */
int socket_watch_listen(const char *path, mode_t mode, gid_t gid, int *ret_fd);
/* Sets a socket file's mode and lets group gid in with an ACL entry (fs-acl.h; gid -1 or 0:
 * the mode's group bits are the file's own group's); -ENOTSOCK if path is not a socket. */
int socket_watch_apply_access(const char *path, mode_t mode, gid_t gid);
