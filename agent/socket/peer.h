/* SPDX-License-Identifier: MIT */
#pragma once

/* A peer of one of the agent's Unix sockets, as both servers (the local API, api/, and the gRPC
 * server, grpc/) hand it to their handlers, and where the one authorization rule (caller.h)
 * places it. The servers read it at accept (peer-creds.h); neither sees the other. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct peer {
        pid_t pid;
        uid_t uid;
        gid_t gid;
        /* The start time of the process that connected (clock ticks since boot), read at accept
         * and only if that process provably still held the PID and was alive (SO_PEERPIDFD's
         * pidfd; on older kernels a pidfd of the PID whose uid/gid are as at connect); 0 if not,
         * and then nothing can be attested: peer_pod_lookup() checks it so a reused PID is not
         * taken for the caller. */
        uint64_t start_time;
        /* That process's pidfd, borrowed from the connection (peer-creds.h), valid as long as
         * it; meaningful only with a start time (else -EBADF, or unset): every read about the
         * peer checks through it that the process is still alive and not a zombie. */
        int pidfd;
        /* root or a member of socket-group; once the API placed the peer (every request a
         * handler sees), also where it runs (api_set_place_fn()) */
        bool privileged;
};

/* Where a peer runs, as the one authorization rule places it (caller.h): whether it is
 * privileged there, the pod its cgroup names (owned; NULL: none), and whether it could be
 * attested at all (false: gone, a zombie, its PID reused, its cgroup unreadable or not the
 * kubelet's layout; such peers share one small connection count, whatever their uids). */
struct peer_place {
        bool privileged;
        char *pod_uid;
        bool attested;
};
/* Places a peer: asked when a connection is accepted (it is counted against its pod's
 * connection limit, or its uid's) and once per request from a peer whose credentials are
 * privileged, before the route's privilege is checked. NULL: credentials alone, counted by uid. */
typedef void (*peer_place_fn)(const struct peer *peer, void *userdata, struct peer_place *ret);
