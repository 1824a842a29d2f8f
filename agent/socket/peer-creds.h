/* SPDX-License-Identifier: MIT */
#pragma once

/* Who connected to one of the agent's Unix sockets: the kernel's SO_PEERCRED, the groups the
 * peer had at connect(), a pidfd of the process that connected and its start time, read only
 * while that process provably still holds its PID and is alive. The pidfd is kept as long as the
 * connection, so that every later read about the peer (its cgroup, peer-pod.h) can check that
 * the process is still alive and not a zombie. The local API (api-conn.c) and the gRPC server
 * (grpc-server.c) both read it here at accept, and caller.h classifies it. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "peer.h"

struct peer_creds {
        bool known; /* SO_PEERCRED could be read; else every field below is unset */
        pid_t pid;
        uid_t uid;
        gid_t gid;
        uint64_t start_time; /* of the process that connected; 0: not provably it */
        int pidfd;           /* of the process that connected (owned); -EBADF iff start_time is 0 */
        gid_t *groups;       /* owned */
        size_t n_groups;
};

/* Reads the peer of connected socket fd into *ret. Never fails: a peer whose credentials
 * cannot be read is left unknown (known false, uid and gid -1), hence unprivileged; one that is
 * gone, exiting or a zombie already, or whose PID cannot be shown to be the connected process's,
 * gets no pidfd and start time 0: nothing about it can be attested. */
void peer_creds_read(int fd, struct peer_creds *ret);
/* Frees the groups and closes the pidfd (only of creds peer_creds_read() made known: creds set
 * by hand with known false own no fd). */
void peer_creds_done(struct peer_creds *c);

/* root, or a member of socket_gid ((gid_t) -1: no socket group). */
bool peer_creds_privileged(const struct peer_creds *c, gid_t socket_gid);

/* The peer as caller_resolve_peer() takes it. */
struct peer peer_creds_to_peer(const struct peer_creds *c, gid_t socket_gid);
